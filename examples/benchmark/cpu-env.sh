# Sourced by the benchmark scripts: the library settings that suit this CPU
# (BENCHMARKS.md). Debian's OpenBLAS 0.3.21 and BLIS 0.9 do not recognise
# recent CPUs (Zen 4/5, Emerald Rapids) and fall back to slow generic kernels;
# name the best they have. SkylakeX/skx and ATen's avx512 kernels fault
# where avx512f is missing.
cpu_flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
if [[ " $cpu_flags " == *" avx512f "* ]]; then
  export OPENBLAS_CORETYPE=SkylakeX BLIS_ARCH_TYPE=skx ATEN_CPU_CAPABILITY=avx512
elif grep -q -m1 'AuthenticAMD' /proc/cpuinfo; then
  export OPENBLAS_CORETYPE=Zen BLIS_ARCH_TYPE=zen3
else
  export OPENBLAS_CORETYPE=Haswell BLIS_ARCH_TYPE=haswell
fi
unset cpu_flags
