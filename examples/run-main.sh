#!/usr/bin/env bash
# Kiln's main job for now: a GPT model written with the C++ DSL is compiled
# in-process and run (examples/gpt/gpt.cpp); then the same kind of model, as
# kiln IR, goes through kiln-opt down to linalg.
set -euo pipefail
build=${1:-build}
here=$(dirname "$0")

echo "== examples/gpt: gpt-tiny built with the DSL, JIT-compiled, run"
"$build/examples/kiln-example-gpt"
echo
echo "== examples/gpt/gpt_tiny_block.mlir through kiln-opt"
echo "-- evaluation mode (kiln-opt --kiln-strip-dropout --canonicalize):"
eval_ir=$("$build/bin/kiln-opt" --kiln-strip-dropout --canonicalize "$here/gpt/gpt_tiny_block.mlir")
sed -n '1,12p' <<<"$eval_ir"
echo "   ..."
echo "-- lowered (kiln-opt --kiln-to-linalg): $("$build/bin/kiln-opt" --kiln-strip-dropout \
  --kiln-to-linalg "$here/gpt/gpt_tiny_block.mlir" | grep -c "linalg\.") linalg ops, no kiln op left"
