#!/usr/bin/env bash
# Kiln's benchmark: the forward pass and the training step of the
# BENCHMARKS.md models in Kiln and, when libtorch-dev is installed, in tuned
# libtorch, in the same run; prints both and the speed ratio. Row by row,
# Kiln and then libtorch run, each in a process of its own, so that a burst
# of load on this shared machine hits both sides of a row alike; the whole
# is repeated `--rounds` times and each figure is the median over the rounds
# of each process's median step. A row whose two sides ran in different
# vCPU layouts (core_latency.h) is measured again, both sides, up to twice.
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
kiln_out=$(mktemp)
torch_out=$(mktemp)
trap 'rm -f "$results" "$kiln_out" "$torch_out"' EXIT
# The vCPU layout of one RESULT line, from the core round trips it printed
# before and after its timed steps (core_latency.h): "near" when both read
# under 200 ns (the two vCPUs share an L3), "far" when both read more,
# "mixed" when the layout changed while it ran, "unknown" without probes.
layout_awk='function layout(b, a) {
  if (b <= 0 || a <= 0) return "unknown"
  if (b < 200 && a < 200) return "near"
  if (b >= 200 && a >= 200) return "far"
  return "mixed"
}
function fields(line,    parts, kv, i, n) {
  delete f
  n = split(line, parts, " ")
  for (i = 2; i <= n; ++i) { split(parts[i], kv, "="); f[kv[1]] = kv[2] }
}'
# The rows (model, mode) of Kiln's output $1 and libtorch's $2 whose two
# sides measured in different layouts, or in a changing one.
mismatched() {
  awk "$layout_awk"'
    /^RESULT / {
      fields($0)
      key = f["model"] " " f["mode"]
      l = layout(f["core_ns_before"] + 0, f["core_ns_after"] + 0)
      if (FILENAME == ARGV[1]) kiln[key] = l; else torch[key] = l
    }
    END {
      for (key in kiln) {
        if (!(key in torch) || kiln[key] == "unknown" || torch[key] == "unknown")
          continue
        if (kiln[key] != torch[key] || kiln[key] == "mixed")
          printf "%s (Kiln %s, libtorch %s) ", key, kiln[key], torch[key]
      }
    }' "$1" "$2"
}
# Up to this many tries per row: a row whose two sides measured in different
# layouts (a Kiln step takes ~18-26% longer far than near, libtorch's
# too) is measured again, both sides; the last try counts.
tries=3
for ((r = 1; r <= rounds; ++r)); do
  for model in ${models//,/ }; do
    for mode in ${modes//,/ }; do
      for ((try = 1; try <= tries; ++try)); do
        echo "== round $r of $rounds: $model $mode, Kiln"
        "$build/examples/kiln-bench" --models "$model" --modes "$mode" --steps "$steps" |
          tee "$kiln_out"
        echo "== round $r of $rounds: $model $mode, libtorch (tuned as BENCHMARKS.md says)"
        "$here/run-torch-peer.sh" --models "$model" --modes "$mode" --steps "$steps" |
          tee "$torch_out"
        apart=$(mismatched "$kiln_out" "$torch_out")
        if [[ -z $apart ]]; then
          break
        fi
        if ((try < tries)); then
          echo "== vCPU layouts differ: ${apart}: measuring both again"
        fi
      done
      cat "$kiln_out" "$torch_out" >> "$results"
    done
  done
done
echo
echo "== Side by side (median of $rounds round(s); ratio = libtorch ms / Kiln ms: > 1 when Kiln is faster)"
echo "   (the ratio is the median over the rounds whose two sides measured in the same vCPU layout, of"
echo "   how many the next column says; a row with none compares the medians of all rounds, marked *)"
awk "$(cat "$here/median.awk")""$layout_awk"'
  /^RESULT / {
    fields($0)
    key = f["model"] " " f["mode"]
    c = ++runs[f["peer"], key]
    ms[f["peer"], key, c] = f["median_ms"]; pct[f["peer"], key, c] = f["peak_pct"]
    lay[f["peer"], key, c] = layout(f["core_ns_before"] + 0, f["core_ns_after"] + 0)
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
    printf "%-22s %10s %8s %9s %10s %8s %9s %8s %7s %12s\n", "model / mode", "kiln ms",
           "% peak", "RSS MiB", "torch ms", "% peak", "RSS MiB", "ratio", "alike",
           "core ns k/t"
    for (i = 1; i <= n; ++i) {
      k = order[i]
      if (!(("kiln", k) in runs)) continue
      kms = median(ms, runs, "kiln", k); kpct = median(pct, runs, "kiln", k)
      if (("libtorch", k) in runs) {
        tms = median(ms, runs, "libtorch", k); tpct = median(pct, runs, "libtorch", k)
        # Round c of Kiln against round c of libtorch, where both measured
        # in one layout (near or far) throughout.
        alike = 0
        for (c = 1; c <= runs["kiln", k] && c <= runs["libtorch", k]; ++c) {
          l = lay["kiln", k, c]
          if (l == lay["libtorch", k, c] && (l == "near" || l == "far") &&
              ms["kiln", k, c] > 0)
            ratios["ratio", k, ++alike] = ms["libtorch", k, c] / ms["kiln", k, c]
        }
        runs["ratio", k] = alike
        ratio = alike ? median(ratios, runs, "ratio", k) : tms / kms
        printf "%-22s %10.2f %7.1f%% %9s %10.2f %7.1f%% %9s %7.2fx%s %6s %12s\n", k,
               kms, kpct, rss["kiln", k], tms, tpct, rss["libtorch", k], ratio,
               alike ? " " : "*", alike "/" runs["kiln", k],
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
