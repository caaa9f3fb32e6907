#!/usr/bin/env bash
# The edit-build-test loop: no apt-get, no PostgreSQL server, seconds rather than minutes when
# little changed. For the whole suite (both builds, PostgreSQL, fuzzing) run scripts/test.sh.
# Usage: scripts/check.sh [BUILD_DIR]   (default: build)
#
# 1. Configures BUILD_DIR if it has no CMakeCache.txt (RelWithDebInfo, no benchmarks), with the
#    static SQLite already in .deps/ if one is there and otherwise the system's: never a download.
# 2. Builds it (every target: the tests are targets).
# 3. Runs `ctest -L quick` when the build knows that label; otherwise this subset: every test
#    but the ones matching $slow below (the shell tests of tests/cli/ that drive the binary, the
#    PostgreSQL conformance suite, the fault-injection loops (torture, oom), the crash, lease
#    and daemon scenarios, and wake_test_api, half of the subset's time alone). 53 tests, about
#    half a minute on two cores. VIGIL_CHECK_ALL=1 runs every test.
# 4. Runs scripts/funclen.sh and scripts/layers.sh (a second each).
# Exit status: 0 when everything passed, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
slow='^cli_|_pg$|torture|_oom$|crash_recovery|lease_takeover|daemon|wake_test_api'

if [ ! -f "$dir/CMakeCache.txt" ]; then
  sqlite=$(ls -d .deps/sqlite-*/lib 2>/dev/null | head -n 1 || true)
  echo "check: configuring $dir (SQLite: ${sqlite:-the system library})"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVIGIL_BENCH=OFF \
    -DVIGIL_CURL_DIR= -DVIGIL_SQLITE_DIR="${sqlite%/lib}" >/dev/null
fi
cmake --build "$dir" -j"${JOBS:-$(nproc)}"

status=0
cd "$dir"
if [ "${VIGIL_CHECK_ALL:-0}" = 1 ]; then
  echo "check: every test"
  ctest --output-on-failure -j"${JOBS:-$(nproc)}" || status=1
elif ctest --print-labels | grep -qx '  quick'; then
  echo "check: ctest -L quick"
  ctest -L quick --output-on-failure -j"${JOBS:-$(nproc)}" || status=1
else
  echo "check: no 'quick' label; every test but -E '$slow'"
  ctest -E "$slow" --output-on-failure -j"${JOBS:-$(nproc)}" || status=1
fi
cd - >/dev/null
scripts/funclen.sh || status=1
scripts/layers.sh | grep -v '^warning: .*(known violation, issue 27)$' || status=1
exit $status
