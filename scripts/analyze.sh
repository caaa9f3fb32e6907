#!/usr/bin/env bash
# Static analysis: cppcheck (Debian's) over src/ and cli/, its warning, portability and
# performance checks (style checks are the review's and .clang-format's business). A finding
# is fixed, or justified in scripts/cppcheck/suppressions.txt with its reason beside it.
# Usage: scripts/analyze.sh   Exit status: 0 when cppcheck finds nothing left, 1 otherwise.
# About 15 s of CPU on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cppcheck >/dev/null; then
  echo "analyze.sh: no cppcheck; install it (scripts/deps.sh test, or apt-get install cppcheck)" >&2
  exit 2
fi
cache=${VIGIL_CPPCHECK_DIR:-build/cppcheck}
mkdir -p "$cache/generated/manifest"
# The files the build generates and the sources include (the manifest schema), written here the
# way the build writes them, so no build folder is needed.
cmake -DIN=share/schema/manifest.schema.json -DOUT="$cache/generated/manifest/schema.inc" \
  -P cmake/embed_text.cmake
if cppcheck -j2 --quiet --std=c11 --enable=warning,portability,performance \
  --library=scripts/cppcheck/jansson.cfg --cppcheck-build-dir="$cache" \
  --suppressions-list=scripts/cppcheck/suppressions.txt --inline-suppr \
  --error-exitcode=1 -I include -I src -I "$cache/generated" -DVIGIL_SOURCE_DIR='"."' \
  --suppress=missingIncludeSystem src cli; then
  echo "analyze: cppcheck found nothing"
else
  echo "analyze: cppcheck findings above: fix them, or justify them in scripts/cppcheck/suppressions.txt"
  exit 1
fi
