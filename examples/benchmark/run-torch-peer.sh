#!/usr/bin/env bash
# Builds and runs the libtorch peer (torch_peer.cpp) tuned as BENCHMARKS.md says; args pass through.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${KILN_BENCH_DIR:-$root/build-bench}
lib=/usr/lib/x86_64-linux-gnu

if [[ ! -f /usr/include/torch/csrc/api/include/torch/torch.h || ! -e $lib/libtorch.so ]]; then
  echo "torch peer skipped: libtorch-dev is not installed (apt-get install -y libtorch-dev libopenblas0-openmp)"
  exit 0
fi
if [[ ! -d $lib/openblas-openmp ]]; then
  echo "warning: libopenblas0-openmp is not installed; the peer will be slower than the doc's tuned numbers" >&2
fi

bin=$out/torch_peer
stale=0
for source in torch_peer.cpp fma_peak.h core_latency.h; do
  [[ $here/$source -nt $bin ]] && stale=1
done
if [[ ! -x $bin || $stale == 1 ]]; then
  mkdir -p "$out"
  echo "building $bin (g++ -O2, about a minute)"
  g++ -std=c++17 -O2 -D_GLIBCXX_USE_CXX11_ABI=1 -I/usr/include/torch/csrc/api/include \
    "$here/torch_peer.cpp" -o "$bin.tmp" -Wl,--no-as-needed -ltorch -ltorch_cpu -lc10 -Wl,--as-needed
  mv "$bin.tmp" "$bin"
fi

source "$here/cpu-env.sh"
echo "peer settings: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE ATEN_CPU_CAPABILITY=${ATEN_CPU_CAPABILITY:-default}" >&2
export LD_LIBRARY_PATH=$lib/openblas-openmp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
exec "$bin" "$@"
