#!/usr/bin/env bash
# Builds the SQLite vigil links: Debian's own source package of the SQLite installed here, with
# every Debian patch (the security fixes among them), as one static library compiled with the
# options below. Usage: scripts/sqlite.sh
#
# Prints the folder it installed into (.deps/sqlite-VERSION-BUILD, reused by later runs) on stdout.
# When it cannot build it (no network to the Debian archive, no tclsh) it says why on stderr,
# prints nothing and exits 0: the build then uses Debian's shared libsqlite3, which works the
# same and costs an agent step about 10% more instructions (docs/ARCHITECTURE.md, "Choices").
# scripts/debsrc.sh has the details (where the source comes from, how failures are remembered).
#
# Why: Debian builds SQLite for every program at once: without its lookaside allocator (each of
# the small allocations a statement makes goes to malloc), and with the pre-update hook and the
# session extension, which every write checks for. vigil needs neither, and a step runs some
# thirty statements.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/debsrc.sh

# SQLite's own defaults otherwise (lookaside on; vigil turns secure delete on itself and opens
# its connections without SQLite's per-connection mutex). USE_URI as in Debian's build: a store
# path may be a file: URI. What the system offers (pwrite, fdatasync...) comes from SQLite's
# configure, through sqlite_cfg.h as in SQLite's own build: without it SQLite would write with
# lseek and write, and sync with fsync.
SQLITE_OPTIONS=(-D_HAVE_SQLITE_CONFIG_H -DSQLITE_THREADSAFE=1 -DSQLITE_DEFAULT_MEMSTATUS=0
  -DSQLITE_OMIT_DEPRECATED -DSQLITE_OMIT_SHARED_CACHE -DSQLITE_LIKE_DOESNT_MATCH_BLOBS
  -DSQLITE_USE_ALLOCA -DSQLITE_USE_URI=1 -DSQLITE_ENABLE_FTS5)

# Checked before anything is fetched, and not remembered as a failed build: once tcl is
# installed, the next build builds SQLite.
if ! command -v tclsh >/dev/null; then
  echo "sqlite.sh: tclsh is missing (scripts/deps.sh installs tcl; SQLite's build generates its" \
    "source with it); using the system libsqlite3" >&2
  exit 0
fi

debsrc_build() {
  local src=$1 stage=$2 prefix=$3
  cd "$src"
  # The amalgamation: SQLite's whole library as one C file, generated from the patched tree.
  ./configure --disable-tcl
  make sqlite3.c
  mkdir -p "$stage$prefix/lib" "$stage$prefix/include"
  grep -q '^#define HAVE_PWRITE 1' sqlite_cfg.h # else SQLite would seek, then write
  ${CC:-cc} -O2 -g -fPIC -I. "${SQLITE_OPTIONS[@]}" -c sqlite3.c -o sqlite3.o
  ar rcs "$stage$prefix/lib/libsqlite3.a" sqlite3.o
  cp sqlite3.h sqlite3ext.h "$stage$prefix/include/"
}

debsrc_main sqlite libsqlite3-dev sqlite3 lib/libsqlite3.a libsqlite3
