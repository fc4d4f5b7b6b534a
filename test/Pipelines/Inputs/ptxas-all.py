"""Runs ptxas on every PTX kernel module that kiln-to-gpu embedded in its
output (gpu.object assembly strings) and prints how many it accepted.

With --budget, ptxas also reports each kernel's resources (-v), and every
kernel must keep within the budget: at most REGISTERS registers per thread
and SMEM bytes of static shared memory per block, no stack frame and no
spills. A kernel past it is named with what it uses, and the script fails;
else it prints the largest use of each.

usage: ptxas-all.py PTXAS ARCH [--budget REGISTERS,SMEM] < lowered.mlir
"""
import re
import subprocess
import sys
import tempfile

if len(sys.argv) not in (3, 5) or (len(sys.argv) == 5 and
                                   sys.argv[3] != "--budget"):
    sys.exit(__doc__)
ptxas, arch = sys.argv[1], sys.argv[2]
budget = None
if len(sys.argv) == 5:
    registers, smem = (int(v) for v in sys.argv[4].split(","))
    budget = {"registers": registers, "smem": smem, "stack": 0,
              "spill stores": 0, "spill loads": 0}
text = sys.stdin.read()
# MLIR escapes non-printable bytes as \XX (hex) and quotes as \22.
objects = re.findall(r'assembly = "((?:[^"\\]|\\.)*)"', text)
if not objects:
    sys.exit("no PTX in the input")
kernels = {}  # name -> {resource: amount}
for i, escaped in enumerate(objects):
    ptx = re.sub(r"\\(\\|[0-9A-Fa-f]{2})",
                 lambda m: "\\" if m.group(1) == "\\" else chr(int(m.group(1), 16)),
                 escaped)
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(ptx)
        f.flush()
        command = [ptxas, "-arch=" + arch, f.name, "-o", "/dev/null"]
        if budget:
            command.insert(1, "-v")
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit("ptxas refused module %d:\n%s" % (i, result.stderr))
    name = None
    for line in result.stderr.splitlines():
        entry = re.search(r"Compiling entry function '([^']+)'", line)
        if entry:
            name = entry.group(1)
            # Two GPU modules may hold kernels of one name (outlining names
            # each module's kernels after their function): each is counted.
            if name in kernels:
                name += " (module %d)" % i
            kernels[name] = {key: 0 for key in budget or {}}
            continue
        if name is None:
            continue
        for amount, what in re.findall(
                r"(\d+) (registers|bytes smem|bytes stack frame|"
                r"bytes spill stores|bytes spill loads)", line):
            key = what.replace("bytes ", "").replace(" frame", "")
            kernels[name][key] = int(amount)
print("ptxas accepted %d modules for %s" % (len(objects), arch))
if budget:
    if not kernels:
        sys.exit("ptxas -v reported no kernel")
    over = ["%s: %s %d > %d" % (name, key, used[key], limit)
            for name, used in sorted(kernels.items())
            for key, limit in budget.items() if used[key] > limit]
    if over:
        sys.exit("kernels past the budget:\n  " + "\n  ".join(over))
    print("%d kernels within the budget: registers at most %d (largest %d), "
          "shared memory at most %d bytes (largest %d), no stack, no spills"
          % (len(kernels), budget["registers"],
             max(k["registers"] for k in kernels.values()), budget["smem"],
             max(k["smem"] for k in kernels.values())))
