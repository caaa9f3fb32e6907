#!/usr/bin/env bash
# Line and branch coverage of the core (src/) by the test suite, printed by gcovr: a build of
# its own (build-cov, gcc --coverage, no optimization), then the tests, then the report with an
# HTML page. scripts/test.sh prints the same summary from its sanitizer build (clang, built with
# -DVIGIL_COVERAGE=ON), so it needs no build of its own; this script is for a report by hand.
# Usage: scripts/coverage.sh [ctest args...]   e.g. scripts/coverage.sh -L quick
# Needs gcovr (scripts/deps.sh test installs it). The HTML report: build-cov/coverage.html.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v gcovr >/dev/null; then
  echo "coverage.sh: no gcovr; install it (scripts/deps.sh test, or apt-get install gcovr)" >&2
  exit 2
fi
scripts/build.sh build-cov -DCMAKE_BUILD_TYPE=Debug -DVIGIL_BENCH=OFF -DCMAKE_C_COMPILER=gcc \
  -DCMAKE_C_FLAGS=--coverage -DCMAKE_EXE_LINKER_FLAGS=--coverage \
  -DCMAKE_SHARED_LINKER_FLAGS=--coverage
find build-cov -name '*.gcda' -delete
(cd build-cov && ctest -j2 --timeout 900 "$@") || echo "coverage.sh: some tests failed (the report counts what ran)"
# The core: src/ only (not the tests, the CLI or the benchmarks).
gcovr --root . --filter 'src/' --branches --exclude-unreachable-branches \
  --exclude-throw-branches --print-summary --html build-cov/coverage.html \
  --object-directory build-cov build-cov | tail -n 40
