#!/usr/bin/env bash
# Packs what gpu-check.sh runs on a GPU machine that has no LLVM: kiln-bench
# and the JIT tests (KilnJITTests, whose GpuTarget tests need the GPU),
# linked again from BUILD_DIR against LLVM and MLIR's static archives (only
# the code they call travels: ~180 MB each, stripped, instead of libLLVM.so,
# libMLIR.so and their own dependencies), with the few shared libraries they
# still need (fmt, libomp), the fake driver (built without the emulated GPU,
# so without LLVM) of GpuTarget.HostSideRunsAgainstA
# FakeDriver, the cost model's predictions of the GPU rows, and a zstd to
# unpack them. Writes OUT_DIR (default <repo>/.gpu-bundle, ignored by git):
# kiln-gpu.tar.zst (about 55 MiB) and zstd. Run after a build of the same
# commit; takes about 6 minutes on 2 cores (3 of them the predictions).
# Usage: gpu-bundle.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=${2:-$root/.gpu-bundle}
llvm=/usr/lib/llvm-22/lib

for tool in zstd strip ninja; do
  command -v "$tool" >/dev/null || {
    echo "gpu-bundle.sh: needs $tool" >&2
    exit 1
  }
done
ninja -C "$build" kiln-bench KilnJITTests kiln-fake-cuda-ptx >/dev/null

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/kiln-gpu"
# Every LLVM and MLIR archive, in one group (lld takes what is referenced);
# zlib and zstd statically too.
archives=$(ls "$llvm"/libMLIR*.a "$llvm"/libLLVM*.a)
static="-Wl,--gc-sections -Wl,--start-group $(echo $archives) -Wl,--end-group"
static+=" /usr/lib/x86_64-linux-gnu/libzstd.a /usr/lib/x86_64-linux-gnu/libz.a"
static+=" -lpthread"

# Links `target` (a ninja target of BUILD_DIR) again with the static archives
# in place of libMLIR.so and libLLVM.so, into the stage as `name`.
relink() {
  local target=$1 name=$2 command
  command=$(ninja -C "$build" -t commands "$target" | tail -1)
  command=${command#': && '}
  command=${command%' && :'}
  if [[ $command != *"-o $target "* || $command != *libMLIR.so* ]]; then
    echo "gpu-bundle.sh: unexpected link command for $target" >&2
    exit 1
  fi
  command=${command/" $llvm/libMLIR.so.22.1"/}
  command=${command/" $llvm/libLLVM.so.1"/}
  command=${command/"-o $target "/"-o $stage/$name.full "}
  (cd "$build" && eval "$command $static")
  strip -o "$stage/kiln-gpu/$name" "$stage/$name.full"
  rm "$stage/$name.full"
  if ldd "$stage/kiln-gpu/$name" | grep -q -E 'libMLIR|libLLVM'; then
    echo "gpu-bundle.sh: $name still needs libMLIR or libLLVM" >&2
    exit 1
  fi
}
relink examples/kiln-bench kiln-bench
relink test/Unit/JIT/KilnJITTests KilnJITTests
cp -L /usr/lib/x86_64-linux-gnu/libfmt.so.9 "$llvm/libomp.so.5" "$stage/kiln-gpu/"
# The fake driver without the emulated GPU (no LLVM), under the usual name.
cp -L "$build/test/Unit/Cuda/libkiln-fake-cuda-ptx.so" \
  "$stage/kiln-gpu/libkiln-fake-cuda.so"
if ldd "$stage/kiln-gpu/libkiln-fake-cuda.so" | grep -q -E 'libMLIR|libLLVM'; then
  echo "gpu-bundle.sh: the fake driver still needs libMLIR or libLLVM" >&2
  exit 1
fi
# Where the tests read their inputs (KILN_SOURCE_DIR, compiled in).
echo "$root" >"$stage/kiln-gpu/source-dir"
git -C "$root" rev-parse HEAD >"$stage/kiln-gpu/commit" 2>/dev/null || true
"$here/source-hash.sh" "$root" >"$stage/kiln-gpu/source-hash"

# The static cost model's predictions of the GPU rows for an H200 (no GPU
# needed: done here, not on the GPU machine's time), fp32, tf32, tf32x3;
# gpu-check.sh puts them beside the measured rows.
for math in fp32 tf32 tf32x3; do
  "$build/examples/kiln-bench" --gpu-predict h200 --gpu-math "$math" \
    --models gpt-tiny,gpt-small,encdec --modes forward,forward-b1,train |
    grep '^PREDICT ' >>"$stage/kiln-gpu/predicted.log" || {
    echo "gpu-bundle.sh: kiln-bench --gpu-predict failed" >&2
    exit 1
  }
done

mkdir -p "$out"
tar -C "$stage" -cf - kiln-gpu | zstd -19 -T2 --long=28 -q -f -o "$out/kiln-gpu.tar.zst"
cp "$(command -v zstd)" "$out/zstd"
du -sh "$out"/*
