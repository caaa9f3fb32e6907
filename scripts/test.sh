#!/usr/bin/env bash
# The full test suite on a fresh Debian 12 machine: installs what is missing, starts a private
# PostgreSQL server for the PostgreSQL tests, builds vigil twice (optimized, and with
# AddressSanitizer + UndefinedBehaviorSanitizer) and runs every test in both builds.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

scripts/deps.sh test

# A throwaway PostgreSQL cluster on a private socket, stopped when this script exits. The
# PostgreSQL tests must run here: without a server they fail instead of being skipped.
export VIGIL_REQUIRE_PG=1
if [ -z "${VIGIL_PG_URI:-}" ]; then
  source scripts/pg.sh
  pg_start "$root/build-pg"
  trap pg_stop EXIT
fi

scripts/build.sh build -DCMAKE_BUILD_TYPE=RelWithDebInfo
(cd build && ctest --output-on-failure -j2 --timeout 600)

# The sanitizer build skips the benchmarks; it runs every test again.
scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=Debug -DVIGIL_ASAN=ON -DVIGIL_UBSAN=ON \
  -DVIGIL_BENCH=OFF -DCMAKE_C_COMPILER=clang
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j2 --timeout 900)
