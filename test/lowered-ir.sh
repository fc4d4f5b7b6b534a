#!/usr/bin/env bash
# Writes the LLVM-dialect IR that Kiln lowers a few models to (gpt-tiny's
# forward pass, training step and decoding step; the encoder-decoder's
# forward pass), for x86-64-v2, x86-64-v3, x86-64-v4 and the host, both as
# the JIT lowers them (kiln-bench --dump) and as `kiln-opt --kiln-to-llvm`
# does, into OUT_DIR, and the JIT's as LLVM IR (.ll, mlir-translate). Run it
# with the builds before and after a change that must not change code
# generation and compare the folders:
#
#   test/lowered-ir.sh build-before /tmp/before
#   test/lowered-ir.sh build /tmp/after
#   diff -r /tmp/before /tmp/after && echo identical
#
# A change that only moves where constants are created (a pass that builds
# them in another order) changes the order of llvm.mlir.constant ops in the
# .mlir files, not the LLVM IR, where constants are operands: then compare
# the .ll files (diff -r -x '*.mlir').
#
# Code for a CPU this machine lacks features of is lowered but not run (its
# first call may fault). CPUS="x86-64-v3 host" limits the CPUs.
#
# The target's own attributes (the module's kiln.target, the functions'
# target_cpu and target_features) say what the code is for, not how it is
# generated: they are left out of the comparison.
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR OUT_DIR" >&2
  exit 2
fi
build=$1
out=$2
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

strip_target() {
  python3 -c '
import re, sys
text = sys.stdin.read()
for attr in (r"kiln\.target = #kiln\.target<[^>]*>",
             r"target_cpu = \"[^\"]*\"",
             r"target_features = #llvm\.target_features<[^>]*>"):
    text = re.sub(r", " + attr, "", text)
    text = re.sub(attr + r", ", "", text)
    text = re.sub(attr, "", text)
text = text.replace(" attributes {}", "")
sys.stdout.write(text)
'
}

for cpu in ${CPUS:-x86-64-v2 x86-64-v3 x86-64-v4 host}; do
  for run in gpt-tiny:forward gpt-tiny:train gpt-tiny:decode encdec:forward; do
    model=${run%%:*}
    mode=${run##*:}
    dump="$work/$model-$mode-$cpu"
    mkdir -p "$dump"
    echo "lowering $model $mode for $cpu" >&2
    if ! "$build/examples/kiln-bench" --models "$model" --modes "$mode" \
      --steps 1 --cpu "$cpu" --dump "$dump" >"$dump/log" 2>&1; then
      if [[ ! -s "$dump/module.llvm.mlir" ]]; then
        cat "$dump/log" >&2
        exit 1
      fi
      echo "  (lowered; it does not run on this machine)" >&2
    fi
    strip_target <"$dump/module.llvm.mlir" >"$out/$model-$mode-$cpu.jit.mlir"
    "${MLIR_TRANSLATE:-/usr/lib/llvm-22/bin/mlir-translate}" --mlir-to-llvmir \
      "$out/$model-$mode-$cpu.jit.mlir" -o "$out/$model-$mode-$cpu.ll"
    "$build/bin/kiln-opt" "$dump/module.kiln.mlir" --kiln-to-llvm="cpu=$cpu" |
      strip_target >"$out/$model-$mode-$cpu.opt.mlir"
  done
done
