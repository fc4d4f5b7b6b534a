#!/usr/bin/env bash
# Kiln's main job for now: a GPT block written in kiln IR goes through
# kiln-opt: parsed and verified, switched to evaluation mode, canonicalized.
set -euo pipefail
build=${1:-build}
here=$(dirname "$0")
model="$here/gpt/gpt_tiny_block.mlir"

echo "== kiln dialect: $("$build/bin/kiln-opt" --show-dialects | grep -c kiln) registered (kiln-opt --show-dialects)"
echo "== $model: training mode, as written (parsed, verified, printed)"
"$build/bin/kiln-opt" "$model"
echo
echo "== evaluation mode: kiln-opt --kiln-strip-dropout --canonicalize"
"$build/bin/kiln-opt" --kiln-strip-dropout --canonicalize "$model"
