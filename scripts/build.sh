#!/usr/bin/env bash
# Configures and builds vigil into a build folder.
# Usage: scripts/build.sh DIR [--target NAME]... [cmake args...]
#
# libcurl: Debian's shared libcurl by default, so its TLS and HTTP fixes arrive with apt. The
# smaller static HTTP(S)-only libcurl of scripts/curl.sh (docs/ARCHITECTURE.md, "Choices": about
# 5 MB less memory per process) is built and linked only when asked: VIGIL_CURL=static in the
# environment, or -DVIGIL_CURL_DIR=$(scripts/curl.sh) in the arguments.
# SQLite: the static build of scripts/sqlite.sh (built once) unless the arguments name their own
# with -DVIGIL_SQLITE_DIR= (empty: the system's library).
# --target NAME builds only that target (repeatable); without it, everything.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1
shift
targets=()
cmake_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --target)
      targets+=(--target "$2")
      shift 2
      ;;
    *)
      cmake_args+=("$1")
      shift
      ;;
  esac
done
ARGS="${cmake_args[*]}"
# Whether the caller set -DVAR itself.
caller_set() {
  case " $ARGS " in
    *" -D$1"[=:]* | *" -D $1"[=:]*) return 0 ;;
    *) return 1 ;;
  esac
}
dep_args=()
# -DVAR=DIR from scripts/SCRIPT, unless the caller set VAR.
own_build() {
  caller_set "$1" && return 0
  local found
  found=$(scripts/"$2") || found="" # it says why on stderr; the system's library then
  dep_args+=(-D"$1"="$found")
}
case ${VIGIL_CURL:-system} in
  static) own_build VIGIL_CURL_DIR curl.sh ;;
  # Said even to a folder configured with the static one before: the default is the default.
  system) caller_set VIGIL_CURL_DIR || dep_args+=(-DVIGIL_CURL_DIR=) ;;
  *)
    echo "build.sh: VIGIL_CURL=$VIGIL_CURL: use 'system' (the default) or 'static'" >&2
    exit 2
    ;;
esac
own_build VIGIL_SQLITE_DIR sqlite.sh
cmake -S . -B "$dir" "${dep_args[@]}" "${cmake_args[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)" "${targets[@]}"
