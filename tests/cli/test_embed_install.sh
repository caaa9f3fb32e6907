#!/usr/bin/env bash
# `cmake --install` puts the command, libvigil.so.0, include/vigil.h and vigil.pc under a
# prefix, and a program outside the tree (examples/embed/weather.c) builds in strict C11 with
# `pkg-config --cflags --libs vigil` alone, against the installed library, and runs: it calls its
# own tool through a chat turn with the scripted model (docs/embedding.md).
set -e
source "$(dirname "$0")/lib.sh" "$1"
BUILD=$(cd "$(dirname "$VIGIL")" && pwd)
SRC=${VIGIL_SOURCE_DIR:?}
P="$T/prefix"

cmake --install "$BUILD" --prefix "$P" >"$T/install.log" 2>&1 || bad "install: $(tail -3 "$T/install.log")"
pc=$(ls "$P"/lib*/pkgconfig/vigil.pc "$P"/lib/*/pkgconfig/vigil.pc 2>/dev/null | head -n 1 || true)
[ -n "$pc" ] && ok || bad "no vigil.pc under $P"
[ -f "$P/include/vigil.h" ] && ok || bad "no vigil.h under $P/include"
export PKG_CONFIG_PATH=$(dirname "$pc")
has "$(pkg-config --modversion vigil)" "$(sed -n 's/#define VIGIL_VERSION "\(.*\)"/\1/p' "$SRC/include/vigil.h")"
flags=$(pkg-config --cflags --libs vigil)
has "$flags" "-lvigil"
# The paths are the prefix's, found from where vigil.pc lies (${pcfiledir}).
[ -f "$(pkg-config --variable=includedir vigil)/vigil.h" ] && ok || bad "includedir: $flags"
libdir=$(cd "$(pkg-config --variable=libdir vigil)" && pwd -P)
case "$libdir" in "$(cd "$P" && pwd -P)"/*) ok ;; *) bad "libdir $libdir is not under $P" ;; esac
[ -e "$libdir/libvigil.so.0" ] && ok || bad "no libvigil.so.0 in $libdir"

# A sanitizer build's library needs its runtime in the program too (the test suite's ASan build,
# with clang, whose sanitized shared library leaves the runtime to the program): the build's own
# compiler and flags (CMakeLists.txt).
san=${VIGIL_TEST_PROGRAM_FLAGS:-}
# shellcheck disable=SC2086 # the flags are words
if "${VIGIL_TEST_CC:-cc}" -std=c11 -Wall -Wextra -Werror $san "$SRC/examples/embed/weather.c" $flags \
  -Wl,-rpath,"$libdir" -o "$T/weather" 2>"$T/cc.log"; then ok; else bad "cc: $(cat "$T/cc.log")"; fi
out=$(cd "$T" && XDG_CONFIG_HOME="$T/xdg" VIGIL_MODEL_PROVIDER=scripted \
  VIGIL_MODEL_CASSETTE="$SRC/examples/embed/weather.json" ./weather app.db 2>&1) || bad "weather: $out"
has "$out" '"name":"get_weather"'
has "$out" "the tool ran 1 time(s)"
# It ran against the installed library, not the build tree's.
has "$(ldd "$T/weather")" "$libdir/libvigil.so.0"
finish
