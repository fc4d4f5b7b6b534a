#!/usr/bin/env bash
# Kiln's benchmark: the forward pass and the training step of the
# BENCHMARKS.md models in Kiln and, when libtorch-dev is installed, in tuned
# libtorch, in the same run; prints both and the speed ratio.
# Usage: run.sh [BUILD_DIR] [--models a,b] [--modes forward,train] [--steps N]
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
while [[ $# -gt 0 ]]; do
  case $1 in
    --models) models=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "usage: run.sh [BUILD_DIR] [--models a,b] [--modes a,b] [--steps N]" >&2; exit 2 ;;
  esac
done

results=$(mktemp)
trap 'rm -f "$results"' EXIT
echo "== Kiln"
"$build/examples/kiln-bench" --models "$models" --modes "$modes" --steps "$steps" |
  tee -a "$results"
echo
echo "== libtorch (tuned as BENCHMARKS.md says)"
"$here/run-torch-peer.sh" --models "$models" --modes "$modes" --steps "$steps" |
  tee -a "$results"
echo
echo "== Side by side (ratio = libtorch ms / Kiln ms: > 1 when Kiln is faster)"
awk '
  /^RESULT / {
    delete f
    for (i = 2; i <= NF; ++i) { split($i, kv, "="); f[kv[1]] = kv[2] }
    key = f["model"] " " f["mode"]
    ms[f["peer"], key] = f["median_ms"]; pct[f["peer"], key] = f["peak_pct"]
    rss[f["peer"], key] = f["rss_mib"]
    if (!(key in seen)) { seen[key] = 1; order[++n] = key }
  }
  END {
    printf "%-22s %10s %8s %9s %10s %8s %9s %8s\n", "model / mode", "kiln ms",
           "% peak", "RSS MiB", "torch ms", "% peak", "RSS MiB", "ratio"
    for (i = 1; i <= n; ++i) {
      k = order[i]
      if ((("kiln", k) in ms) && (("libtorch", k) in ms))
        printf "%-22s %10.2f %7.1f%% %9s %10.2f %7.1f%% %9s %7.2fx\n", k,
               ms["kiln", k], pct["kiln", k], rss["kiln", k], ms["libtorch", k],
               pct["libtorch", k], rss["libtorch", k], ms["libtorch", k] / ms["kiln", k]
      else if (("kiln", k) in ms)
        printf "%-22s %10.2f %7.1f%% %10s\n", k, ms["kiln", k], pct["kiln", k], "-"
    }
  }' "$results"
