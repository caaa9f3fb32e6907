#!/usr/bin/env bash
# Configures and builds vigil into a build folder. Usage: scripts/build.sh DIR [cmake args...]
# Builds (once) and uses the static HTTP(S)-only libcurl of scripts/curl.sh unless the
# arguments name one with -DVIGIL_CURL_DIR= (empty: the system libcurl).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1
shift
# The static HTTP(S)-only libcurl (scripts/curl.sh), unless the caller chose one.
curl_args=()
case " $* " in
  *" -DVIGIL_CURL_DIR"[=:]* | *" -D VIGIL_CURL_DIR"[=:]*) ;;
  *)
    curl_dir=$(scripts/curl.sh) || curl_dir=""
    curl_args=(-DVIGIL_CURL_DIR="$curl_dir")
    ;;
esac
cmake -S . -B "$dir" "${curl_args[@]}" "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
