#!/usr/bin/env bash
# Runs the lit tests and the C++ unit tests (two at a time) of a built tree,
# then prints one summary line: "kiln tests: N passed, M failed".
set -uo pipefail
build=${1:-build}
# Two tests run at once on as many cores, each a process with its own
# OpenMP threads: an idle thread must sleep at once rather than spin for
# libomp's default 200 ms on the core the other test compiles on (a sixth
# of the run's time).
export KMP_BLOCKTIME=0
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

echo "== lit (check-kiln)"
/usr/lib/llvm-22/bin/lit -v "$build/test" 2>&1 | tee "$logs/lit"
lit_rc=${PIPESTATUS[0]}

echo "== unit tests (ctest)"
ctest --test-dir "$build" --output-on-failure -j2 2>&1 | tee "$logs/ctest"
ctest_rc=${PIPESTATUS[0]}

# lit: "  Passed: N" (or "  Passed    : N" when several kinds are listed) /
# "  Failed    : N"; ctest: "... 0 tests failed out of N".
# The summary is at the end; a failing test's own output may hold similar
# lines, so only the last match counts.
count() {
  local n
  n=$(grep -Eo "^ +$1 *: +[0-9]+" "$logs/lit" | tail -1 | grep -Eo '[0-9]+$')
  echo "${n:-0}"
}
lit_passed=$(count Passed)
lit_failed=$(( $(count Failed) + $(count Unresolved) + $(count 'Unexpectedly Passed') ))
read -r ctest_failed ctest_total < <(sed -nE \
  's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1 \2/p' "$logs/ctest")
ctest_failed=${ctest_failed:-0}
ctest_total=${ctest_total:-0}

passed=$((lit_passed + ctest_total - ctest_failed))
failed=$((lit_failed + ctest_failed))
if [[ $lit_rc -ne 0 || $ctest_rc -ne 0 ]] && [[ $failed -eq 0 ]]; then
  failed=1 # A runner failed without a countable test failure.
fi
echo
echo "kiln tests: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
