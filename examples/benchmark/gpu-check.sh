#!/usr/bin/env bash
# Kiln's GPU check, one command on a machine with an NVIDIA GPU (and
# PyTorch for the peer): unpacks the bundle gpu-bundle.sh made (kiln-bench
# and the JIT tests, linked statically against LLVM and MLIR, so the GPU
# machine needs no LLVM), runs every GpuTarget test, each in a process of
# its own, in parallel; then Kiln's GPU benchmark rows (kiln-bench --gpu
# native, then a profile of two more steps: each kernel's time from CUDA
# events, launches and bytes copied per step; the same with TF32 products,
# --gpu-math tf32, and gpt-small with tf32x3 and bf16) and PyTorch's on the
# same device (torch_gpu_peer.py: eager and torch.compile, fp32 and TF32,
# eager autocast bf16); and
# prints one table. Each phase has a time limit, so the whole stays under 8
# minutes; logs go to $OUT (or /tmp/kiln-gpu/out), at most 6 files.
# Usage: gpu-check.sh [BUNDLE_DIR] [--steps N] [--models a,b] [--skip-tests]
#                     [--skip-torch]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bundle=$root/.gpu-bundle
steps=10
models=gpt-tiny,gpt-small,encdec
tests=1
torch=1
if [[ $# -gt 0 && $1 != --* ]]; then
  bundle=$1
  shift
fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --skip-tests) tests=0; shift ;;
    --skip-torch) torch=0; shift ;;
    *)
      echo "usage: gpu-check.sh [BUNDLE_DIR] [--steps N] [--models a,b]" \
        "[--skip-tests] [--skip-torch]" >&2
      exit 2
      ;;
  esac
done
work=/tmp/kiln-gpu
out=${OUT:-$work/out}
mkdir -p "$work" "$out"
start=$(date +%s)
phase() { echo "== $1 ($(($(date +%s) - start)) s)"; }

phase "device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
  --format=csv,noheader || { echo "gpu-check.sh: no GPU here" >&2; exit 1; }
nproc

phase "unpack"
unzstd=$bundle/zstd
chmod +x "$unzstd" 2>/dev/null
"$unzstd" --version >/dev/null 2>&1 || unzstd=zstd
rm -rf "$work/kiln-gpu"
"$unzstd" -d --long=28 -c "$bundle/kiln-gpu.tar.zst" | tar -C "$work" -xf - ||
  { echo "gpu-check.sh: cannot unpack $bundle/kiln-gpu.tar.zst" >&2; exit 1; }
bin=$work/kiln-gpu
export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "bundle of commit $(cat "$bin/commit" 2>/dev/null)"
# Whether the bundle was built from this tree's sources (its .git may be
# stale on a GPU machine; the sources are what the tests read).
if [[ "$(cat "$bin/source-hash" 2>/dev/null)" == \
      "$(bash "$root/examples/benchmark/source-hash.sh" "$root")" ]]; then
  echo "the bundle was built from this tree's sources"
else
  echo "gpu-check.sh: warning: the bundle was built from other sources than" \
    "this tree's (run gpu-bundle.sh again after building this tree)" >&2
fi
# The tests read their inputs from the source directory compiled into them.
source=$(cat "$bin/source-dir")
if [[ ! -e $source/test/Dialect/Kiln/ops.mlir ]]; then
  mkdir -p "$(dirname "$source")" && ln -sfn "$root" "$source"
fi

failed=0
if ((tests)); then
  phase "GpuTarget tests"
  # One process per test, in parallel (the compilations are CPU-bound).
  run_test() {
    local name=$1 env=()
    case $name in
      GpuTarget.WithoutAGpu*) env=(KILN_CUDA_DRIVER=/nonexistent/libcuda.so.1) ;;
      GpuTarget.HostSide* | GpuTarget.LaunchAndCopyBudgets*)
        env=(KILN_CUDA_DRIVER=$bin/libkiln-fake-cuda.so KILN_FAKE_CUDA_PTX=1) ;;
    esac
    local log=$work/tests/$name.log t0=$(date +%s)
    if env "${env[@]}" timeout 240 "$bin/KilnJITTests" --gtest_filter="$name" \
      >"$log" 2>&1; then
      echo "PASS $name ($(($(date +%s) - t0)) s)"
    else
      echo "FAIL $name ($(($(date +%s) - t0)) s): $(grep -m3 -E 'Failure|error|Expected|rror:' "$log" | tr '\n' ' ')"
    fi
  }
  export -f run_test
  export bin out work
  rm -rf "$work/tests" && mkdir -p "$work/tests"
  "$bin/KilnJITTests" --gtest_list_tests --gtest_filter='GpuTarget.*' |
    awk '/^[^ ]/ { suite = $1 } /^  / { print suite $1 }' |
    xargs -P 8 -I{} bash -c 'run_test {}' | sort | tee "$out/tests.txt"
  if grep -q '^FAIL' "$out/tests.txt"; then
    failed=1
    for name in $(awk '/^FAIL/ { print $2 }' "$out/tests.txt"); do
      echo "== $name" && tail -60 "$work/tests/$name.log"
    done >"$out/failed-tests.log"
  fi
  [[ -s $out/tests.txt ]] || { echo "no GpuTarget tests ran"; failed=1; }
fi

phase "Kiln on the GPU"
timeout 240 "$bin/kiln-bench" --gpu native --models "$models" \
  --steps "$steps" --gpu-profile 2>&1 | tee "$out/kiln.log" || failed=1
phase "Kiln on the GPU, TF32 products"
timeout 200 "$bin/kiln-bench" --gpu native --gpu-math tf32 \
  --models "$models" --steps "$steps" --gpu-profile 2>&1 |
  tee -a "$out/kiln.log" || failed=1
if [[ ,$models, == *,gpt-small,* ]]; then
  phase "Kiln on the GPU, tf32x3 products (gpt-small)"
  timeout 120 "$bin/kiln-bench" --gpu native --gpu-math tf32x3 \
    --models gpt-small --steps "$steps" 2>&1 |
    tee -a "$out/kiln.log" || failed=1
  phase "Kiln on the GPU, bf16 products (gpt-small)"
  timeout 100 "$bin/kiln-bench" --gpu native --gpu-math bf16 \
    --models gpt-small --steps "$steps" 2>&1 |
    tee -a "$out/kiln.log" || failed=1
fi

if ((torch)); then
  phase "PyTorch on the GPU"
  # Eager rows of every model first, then torch.compile's (slow to compile)
  # of gpt-small only, each with its own time limit.
  PYTHONUNBUFFERED=1 timeout 120 python3 "$here/torch_gpu_peer.py" \
    --models "$models" --steps "$steps" \
    --variants eager-fp32,eager-tf32,eager-bf16 \
    2>&1 | tee "$out/torch.log" || failed=1
  if [[ ,$models, == *,gpt-small,* ]]; then
    PYTHONUNBUFFERED=1 timeout 180 python3 "$here/torch_gpu_peer.py" \
      --models gpt-small --modes train,forward --steps "$steps" \
      --variants compile-fp32,compile-tf32 \
      --compile-models gpt-small 2>&1 | tee -a "$out/torch.log" || failed=1
  fi
fi

phase "table"
# The bundle's static predictions (gpu-bundle.sh) become the columns
# kiln-predicted and kiln-tf32-predicted.
cat "$out"/kiln.log "$out"/torch.log "$bin/predicted.log" 2>/dev/null | awk '
  function fields(line,    parts, kv, i, n) {
    delete f
    n = split(line, parts, " ")
    for (i = 2; i <= n; ++i) { split(parts[i], kv, "="); f[kv[1]] = kv[2] }
  }
  /^RESULT / {
    fields($0)
    key = f["model"] " " f["mode"]
    if (!(key in seen)) { seen[key] = 1; keys[++nkeys] = key }
    if (!(f["peer"] in seenPeer)) { seenPeer[f["peer"]] = 1; peers[++npeers] = f["peer"] }
    ms[key, f["peer"]] = f["median_ms"]
  }
  /^PREDICT / {
    fields($0)
    key = f["model"] " " f["mode"]
    peer = f["peer"] "-predicted"
    if (!(key in seen)) { seen[key] = 1; keys[++nkeys] = key }
    if (!(peer in seenPeer)) { seenPeer[peer] = 1; peers[++npeers] = peer }
    ms[key, peer] = f["predicted_ms"]
  }
  /^PROFILE / {
    fields($0)
    pkey = f["peer"] " " f["model"] " " f["mode"]
    profs[++nprofs] = pkey
    prof[pkey] = sprintf("%5d launches, %8.2f ms in kernels, %7.2f MiB in, %7.2f MiB out",
                         f["launches_per_step"], f["kernel_ms_per_step"],
                         f["to_device_mib"], f["to_host_mib"])
  }
  END {
    printf "%-22s", "median ms per step"
    for (p = 1; p <= npeers; ++p) printf " %18s", peers[p]
    printf " %12s %12s\n", "kiln/eager32", "tf32/eager32"
    for (k = 1; k <= nkeys; ++k) {
      printf "%-22s", keys[k]
      for (p = 1; p <= npeers; ++p) {
        v = ms[keys[k], peers[p]]
        printf " %18s", v == "" ? "-" : v
      }
      b = ms[keys[k], "torch-eager-fp32"]
      for (side = 1; side <= 2; ++side) {
        a = ms[keys[k], side == 1 ? "kiln" : "kiln-tf32"]
        printf " %12s", (a != "" && b != "" && b > 0) ? sprintf("%.2fx", a / b) : "-"
      }
      printf "\n"
    }
    print ""
    print "Kiln per step (profiled apart):"
    for (k = 1; k <= nprofs; ++k)
      printf "  %-30s %s\n", profs[k], prof[profs[k]]
  }' | tee "$out/table.txt"
echo
echo "slowest kernels per row (ms per step, share, launches, grid, block):"
awk '/^KERNEL / { n[$2 $3 $4]++; if (n[$2 $3 $4] <= 6) print "  " $0 }' \
  "$out/kiln.log" | sed 's/KERNEL //' | tee -a "$out/table.txt"
phase "done"
exit $failed
