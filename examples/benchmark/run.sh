#!/usr/bin/env bash
# Kiln's benchmark: the forward pass and the training step of the
# BENCHMARKS.md models in Kiln and, when libtorch-dev is installed, in tuned
# libtorch, in the same run; prints both and the speed ratio. Row by row,
# Kiln and then libtorch run, each in a process of its own, so that a burst
# of load on this shared machine hits both sides of a row alike; the whole
# is repeated `--rounds` times and each figure is the median over the rounds
# of each process's median step.
# Usage: run.sh [BUILD_DIR] [--models a,b] [--modes forward,train] [--steps N] [--rounds N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$root/build
if [[ $# -gt 0 && $1 != --* ]]; then
  build=$1
  shift
fi
models=gpt-tiny,gpt-small,encdec
modes=forward,train
steps=10
rounds=1
usage="usage: run.sh [BUILD_DIR] [--models a,b] [--modes a,b] [--steps N] [--rounds N]"
while [[ $# -gt 0 ]]; do
  case $1 in
    --models) models=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
  echo "run.sh: --rounds wants a positive count, not '$rounds'" >&2
  exit 2
fi

results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  for model in ${models//,/ }; do
    for mode in ${modes//,/ }; do
      echo "== round $r of $rounds: $model $mode, Kiln"
      "$build/examples/kiln-bench" --models "$model" --modes "$mode" --steps "$steps" |
        tee -a "$results"
      echo "== round $r of $rounds: $model $mode, libtorch (tuned as BENCHMARKS.md says)"
      "$here/run-torch-peer.sh" --models "$model" --modes "$mode" --steps "$steps" |
        tee -a "$results"
    done
  done
done
echo
echo "== Side by side (median of $rounds round(s); ratio = libtorch ms / Kiln ms: > 1 when Kiln is faster)"
awk "$(cat "$here/median.awk")"'
  /^RESULT / {
    delete f
    for (i = 2; i <= NF; ++i) { split($i, kv, "="); f[kv[1]] = kv[2] }
    key = f["model"] " " f["mode"]
    c = ++runs[f["peer"], key]
    ms[f["peer"], key, c] = f["median_ms"]; pct[f["peer"], key, c] = f["peak_pct"]
    if (f["rss_mib"] + 0 > rss[f["peer"], key] + 0) rss[f["peer"], key] = f["rss_mib"]
    for (w = 1; w <= 2; ++w) {
      ns = f[w == 1 ? "core_ns_before" : "core_ns_after"] + 0
      if (ns > 0 && (probes == 0 || ns < fastest)) fastest = ns
      if (ns > slowest) slowest = ns
      if (ns > 0) ++probes
      if (ns > core[f["peer"], key] + 0) core[f["peer"], key] = ns
    }
    if (!(key in seen)) { seen[key] = 1; order[++n] = key }
  }
  END {
    printf "%-22s %10s %8s %9s %10s %8s %9s %8s %12s\n", "model / mode", "kiln ms",
           "% peak", "RSS MiB", "torch ms", "% peak", "RSS MiB", "ratio", "core ns k/t"
    for (i = 1; i <= n; ++i) {
      k = order[i]
      if (!(("kiln", k) in runs)) continue
      kms = median(ms, runs, "kiln", k); kpct = median(pct, runs, "kiln", k)
      if (("libtorch", k) in runs) {
        tms = median(ms, runs, "libtorch", k); tpct = median(pct, runs, "libtorch", k)
        printf "%-22s %10.2f %7.1f%% %9s %10.2f %7.1f%% %9s %7.2fx %12s\n", k,
               kms, kpct, rss["kiln", k], tms, tpct, rss["libtorch", k], tms / kms,
               core["kiln", k] + 0 "/" core["libtorch", k] + 0
      } else {
        printf "%-22s %10.2f %7.1f%% %9s %10s\n", k, kms, kpct, rss["kiln", k], "-"
      }
    }
    # core_latency.h: 80-120 ns when the two vCPUs share an L3, 340+ when
    # not (then memory-bound phases slow down and a Kiln training step takes
    # ~18% longer); "core ns k/t" is the slowest probe of each side of a
    # row, and a spread means the rows were not measured alike.
    if (probes > 0)
      printf "core-to-core round trip over the run: %.0f to %.0f ns (%d probes)\n",
             fastest, slowest, probes
  }' "$results"
