#!/usr/bin/env bash
# GPT-2 124M on the CPU: Kiln (kiln-bench --models gpt2) against the current
# PyTorch (torch_gpt2_peer.py, eager and torch.compile) in the same run,
# mode by mode (prefill of 512 tokens, decode of 128 tokens one at a time,
# decode-b4: four sequences decoded together, the training step at batch 4
# of 64), each side and variant in a process of
# its own (its peak RSS its own);
# the whole repeated --rounds times, each figure the median over the rounds.
# Prints tokens/s per side, Kiln / the faster peer, and for decode the share
# of the bound the measured memory bandwidth sets (kiln-bench).
# The peer runs in a private virtual environment (KILN_TORCH_VENV, default
# BUILD_DIR/torch-venv), created with `pip install torch` on first use: the
# tests never need it.
# Usage: run-gpt2.sh [BUILD_DIR] [--modes prefill,decode,decode-b4,train] [--steps N]
#                    [--rounds N] [--no-compile]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$root/build
if [[ $# -gt 0 && $1 != --* ]]; then
  build=$1
  shift
fi
modes=prefill,decode,decode-b4,train
steps=5
rounds=1
variants=eager,compile
usage="usage: run-gpt2.sh [BUILD_DIR] [--modes a,b] [--steps N] [--rounds N] [--no-compile]"
while [[ $# -gt 0 ]]; do
  case $1 in
    --modes) modes=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --no-compile) variants=eager; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
for n in "$rounds" "$steps"; do
  if ! [[ $n =~ ^[1-9][0-9]*$ ]]; then
    echo "run-gpt2.sh: --rounds and --steps want positive counts, not '$n'" >&2
    exit 2
  fi
done
bench=$build/examples/kiln-bench
if [[ ! -x $bench ]]; then
  echo "run-gpt2.sh: $bench is missing (make build first)" >&2
  exit 1
fi
venv=${KILN_TORCH_VENV:-$build/torch-venv}
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  echo "run-gpt2.sh: installing PyTorch into $venv (once)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch
fi

results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((round = 1; round <= rounds; ++round)); do
  for mode in ${modes//,/ }; do
    echo "round $round: $mode" >&2
    "$bench" --models gpt2 --modes "$mode" --steps "$steps" |
      grep '^RESULT' >>"$results" || echo "kiln-bench gpt2 $mode failed" >&2
    for variant in ${variants//,/ }; do
      "$venv/bin/python" "$here/torch_gpt2_peer.py" --modes "$mode" \
        --variants "$variant" --steps "$steps" 2>/dev/null |
        grep '^RESULT' >>"$results" ||
        echo "the PyTorch peer ($variant) failed on $mode" >&2
    done
  done
done

awk "$(cat "$here/median.awk")"'
function fields(line,    parts, kv, i, n) {
  delete f
  n = split(line, parts, " ")
  for (i = 2; i <= n; ++i) { split(parts[i], kv, "="); f[kv[1]] = kv[2] }
}
{
  fields($0)
  peer = f["peer"]; mode = f["mode"]
  tok[peer, mode, ++runs[peer, mode]] = f["tokens_per_s"]
  if (peer == "kiln" && mode ~ /^decode/) {
    pct["kiln", mode, runs["kiln", mode]] = f["bound_pct"]
    bw["kiln", "bw", ++runs["kiln", "bw"]] = f["bandwidth_gbs"]
  }
  seen[mode] = 1
}
END {
  printf "%-9s %12s %14s %16s %10s  %s\n", "mode", "Kiln tok/s", "torch eager", "torch.compile", "Kiln/best", "decode bound"
  n = split("prefill decode decode-b4 train", order, " ")
  for (i = 1; i <= n; ++i) {
    m = order[i]
    if (!(m in seen)) continue
    k = median(tok, runs, "kiln", m)
    e = median(tok, runs, "torch-eager", m)
    c = median(tok, runs, "torch-compile", m)
    best = e > c ? e : c
    extra = ""
    if (m ~ /^decode/)
      extra = sprintf("%.1f%% of %.1f GB/s", median(pct, runs, "kiln", m), median(bw, runs, "kiln", "bw"))
    printf "%-9s %12.1f %14.1f %16.1f %9.2fx  %s\n", m, k, e, c, (best > 0 ? k / best : 0), extra
  }
}' "$results"
