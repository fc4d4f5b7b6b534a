#!/usr/bin/env python3
"""Writes the seed corpus of kiln-fuzz-ir: every piece (split at '// -----')
of the lit tests given that holds a kiln op, without its comment lines.

usage: ir-seeds.py OUTPUT_DIR TEST.mlir...
"""
import os
import re
import sys


# A kiln op, generic ("kiln.add"(...)) or pretty (%0 = kiln.add ...).
KILN_OP = re.compile(r'(=\s*|^\s*)"?kiln\.[a-z_]+[" ]', re.M)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        os.remove(os.path.join(out, name))
    count = 0
    for path in sys.argv[2:]:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        stem = os.path.splitext(os.path.basename(path))[0]
        for index, piece in enumerate(re.split(r"^// -----.*$", text, flags=re.M)):
            lines = [l for l in piece.splitlines() if not l.lstrip().startswith("//")]
            body = "\n".join(lines).strip()
            if not KILN_OP.search(body):
                continue
            with open(os.path.join(out, f"{stem}-{index}.mlir"), "w", encoding="utf-8") as f:
                f.write(body + "\n")
            count += 1
    if count == 0:
        sys.exit("ir-seeds.py: no kiln IR in the tests given")


if __name__ == "__main__":
    main()
