#!/usr/bin/env bash
# Configures and builds vigil into a build folder. Usage: scripts/build.sh DIR [cmake args...]
# Builds (once) and uses the static HTTP(S)-only libcurl of scripts/curl.sh and the static
# SQLite of scripts/sqlite.sh unless the arguments name their own with -DVIGIL_CURL_DIR= or
# -DVIGIL_SQLITE_DIR= (empty: the system's library).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1
shift
# -DVAR=DIR from scripts/SCRIPT, unless the caller set VAR.
dep_args=()
own_build() {
  case " $ARGS " in
    *" -D$1"[=:]* | *" -D $1"[=:]*) ;;
    *)
      local found
      found=$(scripts/"$2") || found="" # it says why on stderr; the system's library then
      dep_args+=(-D"$1"="$found")
      ;;
  esac
}
ARGS="$*"
own_build VIGIL_CURL_DIR curl.sh
own_build VIGIL_SQLITE_DIR sqlite.sh
cmake -S . -B "$dir" "${dep_args[@]}" "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
