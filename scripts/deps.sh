#!/usr/bin/env bash
# Installs the Debian packages vigil needs that are missing. Usage: scripts/deps.sh [build|test]
#   build: what building and running vigil needs.
#   test:  also what the full test suite needs (PostgreSQL server, clang for fuzzers, the JSON
#          Schema test suite, cppcheck for scripts/analyze.sh, clang-format for
#          scripts/format.sh, gcovr and llvm (llvm-cov) for the coverage report).
# Runs apt-get only when something is missing, so a second run costs nothing. Needs root (or
# sudo) when it has something to install.
set -euo pipefail
profile=${1:-build}

build_pkgs=(build-essential cmake pkg-config git ca-certificates tzdata xz-utils tcl libssl-dev
  libsqlite3-dev libjansson-dev libcurl4-openssl-dev libuv1-dev libsodium-dev libical-dev
  libfyaml-dev libpq-dev liblua5.4-dev libseccomp-dev libmicrohttpd-dev libedit-dev)
test_pkgs=(postgresql clang libclang-rt-dev json-schema-test-suite sqlite3 procps util-linux python3
  nodejs wrk cppcheck clang-format gcovr llvm chromium)

pkgs=("${build_pkgs[@]}")
if [ "$profile" = test ]; then
  pkgs+=("${test_pkgs[@]}")
  # npm (for scripts/npm.sh, the MCP test servers): Debian's package only where no npm command
  # is there already; a nodejs package of another origin (NodeSource's) ships its own npm and
  # conflicts with Debian's.
  command -v npm >/dev/null || pkgs+=(npm)
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#pkgs[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then sudo=sudo; else
    echo "deps: missing packages (${missing[*]}) and not root; run as root or install sudo" >&2
    exit 1
  fi
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps: done"
