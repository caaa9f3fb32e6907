#!/usr/bin/env bash
# The quick start on a fresh Debian 12 machine: installs what is missing, builds the vigil
# command (only it: the tests, benchmarks and fuzzers are scripts/test.sh's), and runs the main
# job on embedded defaults (a SQLite store in a temporary folder, the built-in embedder, and the
# scripted model when no provider is configured, labelled as such).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
scripts/build.sh build -DCMAKE_BUILD_TYPE=RelWithDebInfo --target vigil_cli
exec examples/quickstart.sh build/vigil
