#!/usr/bin/env bash
# The GEMM benchmark: Kiln's contraction against the BLAS libraries installed
# (OpenBLAS, BLIS, oneDNN; apt-get install libopenblas-dev libopenblas0-openmp
# libblis-dev libblis4-openmp libdnnl-dev) and MKL (from PyPI, below) on
# every contraction of the benchmark models (gemm_shapes.h), at 1 and 2
# threads, in one run. Shape by shape, Kiln and each library run one after
# the other (a burst of load on this shared machine then hits them alike),
# in `--rounds` rounds; each figure is the median over the rounds of each
# process's median time.
# Usage: run-gemm.sh [BUILD_DIR] [--threads 1,2] [--rounds 3] [--no-mkl]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$root/build
if [[ $# -gt 0 && $1 != --* ]]; then
  build=$1
  shift
fi
threads=1,2
rounds=3
use_mkl=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --threads) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --no-mkl) use_mkl=0; shift ;;
    *) echo "usage: run-gemm.sh [BUILD_DIR] [--threads 1,2] [--rounds 3] [--no-mkl]" >&2; exit 2 ;;
  esac
done
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
  echo "run-gemm.sh: --rounds wants a positive count, not '$rounds'" >&2
  exit 2
fi
out=${KILN_BENCH_DIR:-$root/build-bench}
lib=/usr/lib/x86_64-linux-gnu
inc=/usr/include/x86_64-linux-gnu
mkdir -p "$out"
source "$here/cpu-env.sh"

# name, compiler flags (one build per library found)
peers=()
build_peer() {
  local name=$1
  shift
  local bin=$out/gemm_peer_$name
  if [[ ! -x $bin || $here/gemm_peer.cpp -nt $bin || $here/gemm_shapes.h -nt $bin ]]; then
    g++ -std=c++17 -O2 -DPEER_NAME="\"$name\"" "$here/gemm_peer.cpp" -o "$bin" "$@"
  fi
  peers+=("$name")
}
# The OpenMP build (libopenblas0-openmp), with the headers of libopenblas-dev.
openblas_inc=$(ls -d "$inc"/openblas-* 2>/dev/null | head -1 || true)
if [[ -e $lib/openblas-openmp/libopenblas.so.0 && -n $openblas_inc ]]; then
  build_peer openblas -I"$openblas_inc" "$lib/openblas-openmp/libopenblas.so.0" \
    -Wl,-rpath,"$lib/openblas-openmp"
fi
if [[ -e $lib/blis-openmp/libblis.so.4 && -f $inc/blis-openmp/cblas.h ]]; then
  build_peer blis -I"$inc/blis-openmp" "$lib/blis-openmp/libblis.so.4" \
    -Wl,-rpath,"$lib/blis-openmp"
fi
if [[ -f /usr/include/oneapi/dnnl/dnnl.h ]]; then
  build_peer onednn -DPEER_DNNL -ldnnl
fi
# MKL from PyPI (mkl, mkl-include, mkl-devel) in a private virtual
# environment (KILN_MKL_VENV, default BUILD_DIR/mkl-venv), installed on
# first use where pip reaches PyPI; `--no-mkl` leaves it out.
# (The wheels ship the library as libmkl_rt.so.N, without the plain name.)
mkl_venv=${KILN_MKL_VENV:-$build/mkl-venv}
mkl_rt() { ls "$mkl_venv"/lib/libmkl_rt.so* 2>/dev/null | head -1 || true; }
if ((use_mkl)); then
  if [[ ! -f $mkl_venv/include/mkl_cblas.h || -z $(mkl_rt) ]]; then
    echo "run-gemm.sh: installing MKL into $mkl_venv (once)" >&2
    if ! { python3 -m venv "$mkl_venv" &&
      "$mkl_venv/bin/pip" install -q mkl mkl-include mkl-devel; }; then
      echo "run-gemm.sh: MKL left out: pip could not install it" >&2
    fi
  fi
  if [[ -f $mkl_venv/include/mkl_cblas.h && -n $(mkl_rt) ]]; then
    build_peer mkl -DPEER_MKL -I"$mkl_venv/include" "$(mkl_rt)" \
      -Wl,-rpath,"$mkl_venv/lib"
  fi
fi
if ((${#peers[@]} == 0)); then
  echo "no BLAS library found: Kiln alone (apt-get install libopenblas-dev libopenblas0-openmp libblis-dev libdnnl-dev)" >&2
fi
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) (OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE BLIS_ARCH_TYPE=$BLIS_ARCH_TYPE)"

results=$(mktemp)
trap 'rm -f "$results"' EXIT
mapfile -t shapes < <("$build/examples/kiln-gemm" --list)
for ((r = 1; r <= rounds; ++r)); do
  for t in ${threads//,/ }; do
    echo "== round $r of $rounds, $t thread(s)"
    # One untimed run first: the first process after a change of thread
    # count ran at one core's speed on two (tiny qkv: 114 GFLOP/s, then
    # 219-226), a core of this virtual machine waking up.
    OMP_NUM_THREADS=$t "$build/examples/kiln-gemm" "${shapes[0]}" > /dev/null
    for shape in "${shapes[@]}"; do
      OMP_NUM_THREADS=$t "$build/examples/kiln-gemm" "$shape" | grep '^GEMM' |
        sed "s/^GEMM /GEMM threads=$t /" >> "$results"
      for peer in "${peers[@]}"; do
        # A library that fails on a shape (a kernel this CPU lacks) loses
        # that row, not the run.
        OMP_NUM_THREADS=$t BLIS_NUM_THREADS=$t MKL_NUM_THREADS=$t \
          "$out/gemm_peer_$peer" "$shape" |
          sed "s/^GEMM /GEMM threads=$t /" >> "$results" ||
          echo "run-gemm.sh: $peer failed on \"$shape\" ($t thread(s))" >&2
      done
    done
  done
done
echo
echo "GFLOP/s (median of $rounds rounds); ratio = Kiln / the best library (>= 0.9 is the goal)"
awk -v peers="${peers[*]}" "$(cat "$here/median.awk")"'
  /^GEMM / {
    delete f
    line = $0
    if (match(line, /shape="[^"]*"/)) {
      f["shape"] = substr(line, RSTART + 7, RLENGTH - 8)
    }
    n = split(line, parts, " ")
    for (i = 2; i <= n; ++i) { split(parts[i], kv, "="); if (kv[1] != "shape") f[kv[1]] = kv[2] }
    key = f["threads"] SUBSEP f["shape"]
    c = ++runs[f["peer"], key]
    all[f["peer"], key, c] = f["gflops"]
    if (!(key in seen)) { seen[key] = 1; order[++count] = key }
  }
  END {
    np = split(peers, names, " ")
    for (i = 1; i <= count; ++i) {
      g["kiln", order[i]] = median(all, runs, "kiln", order[i])
      for (p = 1; p <= np; ++p) g[names[p], order[i]] = median(all, runs, names[p], order[i])
    }
    np = split(peers, names, " ")
    printf "%-16s %3s %8s", "shape", "thr", "kiln"
    for (p = 1; p <= np; ++p) printf " %9s", names[p]
    printf " %7s\n", "ratio"
    for (i = 1; i <= count; ++i) {
      split(order[i], k, SUBSEP)
      best = 0
      printf "%-16s %3s %8.1f", k[2], k[1], g["kiln", order[i]]
      for (p = 1; p <= np; ++p) {
        v = g[names[p], order[i]]
        printf " %9.1f", v
        if (v > best) best = v
      }
      if (best > 0) printf " %6.2fx", g["kiln", order[i]] / best
      printf "\n"
    }
  }' "$results"
