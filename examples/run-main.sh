#!/usr/bin/env bash
# Kiln's main job (`make run`): trains the character-level GPT on Tiny
# Shakespeare from scratch (about 5 minutes on 2 cores: compile, 2,500 AdamW
# steps, validation every 250) and prints a generated sample. The checkpoint
# and the CSV log go to the build directory; `--resume` continues a run.
set -euo pipefail
build=${1:-build}
shift || true
exec "$build/examples/kiln-example-shakespeare" \
  --checkpoint "$build/shakespeare.ckpt.safetensors" \
  --csv "$build/shakespeare.csv" "$@"
