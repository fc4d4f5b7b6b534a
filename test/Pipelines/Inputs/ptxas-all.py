"""Runs ptxas on every PTX kernel module that kiln-to-gpu embedded in its
output (gpu.object assembly strings) and prints how many it accepted.

usage: ptxas-all.py PTXAS ARCH < lowered.mlir
"""
import re
import subprocess
import sys
import tempfile

ptxas, arch = sys.argv[1], sys.argv[2]
text = sys.stdin.read()
# MLIR escapes non-printable bytes as \XX (hex) and quotes as \22.
objects = re.findall(r'assembly = "((?:[^"\\]|\\.)*)"', text)
if not objects:
    sys.exit("no PTX in the input")
for i, escaped in enumerate(objects):
    ptx = re.sub(r"\\(\\|[0-9A-Fa-f]{2})",
                 lambda m: "\\" if m.group(1) == "\\" else chr(int(m.group(1), 16)),
                 escaped)
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(ptx)
        f.flush()
        result = subprocess.run([ptxas, "-arch=" + arch, f.name, "-o",
                                 "/dev/null"], capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit("ptxas refused module %d:\n%s" % (i, result.stderr))
print("ptxas accepted %d modules for %s" % (len(objects), arch))
