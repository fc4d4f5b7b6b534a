# The benchmark scripts' median (run.sh, run-gemm.sh): the median of
# values[peer, key, 1..runs[peer, key]], the rounds of one row of one peer;
# 0 when there is none. Prepended to each script's awk program.
function median(values, runs, peer, key,    n, i, j, v, x) {
  n = runs[peer, key]
  for (i = 1; i <= n; ++i) v[i] = values[peer, key, i] + 0
  for (i = 2; i <= n; ++i) {
    x = v[i]
    for (j = i - 1; j >= 1 && v[j] > x; --j) v[j + 1] = v[j]
    v[j + 1] = x
  }
  if (n == 0) return 0
  return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
