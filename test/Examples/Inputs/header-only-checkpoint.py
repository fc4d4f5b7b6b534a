# Writes a safetensors file with no data: KEY=VALUE metadata entries and, with
# --empty N, N tensors of shape [0] (a forged checkpoint for the refusal
# tests). Usage: header-only-checkpoint.py OUT [--empty N] [KEY=VALUE ...]
import json
import struct
import sys

out = sys.argv[1]
args = sys.argv[2:]
empty = 0
if args[:1] == ["--empty"]:
    empty = int(args[1])
    args = args[2:]
header = {"__metadata__": dict(a.split("=", 1) for a in args)}
for i in range(empty):
    header[f"t{i}"] = {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text)
