# Sourced by the benchmark scripts: the library settings that suit this CPU
# (BENCHMARKS.md). Debian's OpenBLAS 0.3.21 and BLIS 0.9 do not recognise
# recent CPUs (Zen 4/5, Emerald Rapids) and fall back to slow generic kernels;
# name the best they have. SkylakeX and ATen's avx512 kernels fault where
# avx512f is missing. BLIS 0.9 reads BLIS_ARCH_TYPE as the number of its
# arch_t enum (blis.h: 0 skx, 3 haswell, 6 zen3), not a name: any name reads
# as 0, skx, whose AVX-512 kernels fault (SIGILL) on a Zen 3.
cpu_flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
if [[ " $cpu_flags " == *" avx512f "* ]]; then
  export OPENBLAS_CORETYPE=SkylakeX BLIS_ARCH_TYPE=0 ATEN_CPU_CAPABILITY=avx512
elif grep -q -m1 'AuthenticAMD' /proc/cpuinfo; then
  export OPENBLAS_CORETYPE=Zen BLIS_ARCH_TYPE=6
else
  export OPENBLAS_CORETYPE=Haswell BLIS_ARCH_TYPE=3
fi
unset cpu_flags
