#!/usr/bin/env bash
# Configures and builds vigil into a build folder. Usage: scripts/build.sh DIR [cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1
shift
cmake -S . -B "$dir" "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
