# shellcheck shell=bash
# Sourced by scripts/curl.sh and scripts/sqlite.sh: builds, once, a library from Debian's own
# source package of the version installed here (every Debian patch applied, the security fixes
# among them) and prints the folder it installed into (.deps/NAME-VERSION-BUILD) on stdout.
# BUILD is a hash of the calling script, so changing how it builds builds again.
#
#   debsrc_main NAME DEV_PACKAGE SOURCE_PACKAGE ARTIFACT LIBRARY
#
# NAME names the folder and the calling script (scripts/NAME.sh); DEV_PACKAGE is the -dev
# package whose source version is built; SOURCE_PACKAGE its Debian source package; ARTIFACT the
# file under the install folder whose presence means a finished build (lib/libcurl.a); LIBRARY
# the library in messages (libcurl).
# The caller defines `debsrc_build SRC STAGE PREFIX`: build the unpacked source SRC for PREFIX
# and install it under STAGE (STAGE$PREFIX/...); its output goes to the log, and its first
# failing command fails the build.
#
# When it cannot build (no network to the Debian archive, a missing tool) it says why on stderr,
# prints nothing and exits 0: the build then uses the system's shared library, which works the
# same (docs/ARCHITECTURE.md, "Choices"). A failure is remembered
# (.deps/NAME-VERSION-BUILD.failed) so later builds do not wait on the network again; delete
# that file to retry. The source comes through apt (signed Release, checksummed Sources), from
# the same Debian mirrors as this machine's packages, with a private package list: the machine's
# apt configuration is not touched.
set -euo pipefail

debsrc_main() {
  local name=$1 devpkg=$2 srcpkg=$3 artifact=$4 lib=$5
  local root version upstream prefix failed_mark work="" log=/dev/null
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  say() { echo "$name.sh: $*" >&2; }
  # Any failure falls back to the system library; the build goes on either way.
  fail() {
    say "$1; using the system $lib (log: $log)"
    trap - ERR
    if [ -n "$work" ]; then
      touch "$failed_mark" 2>/dev/null
      rm -rf "$work"
    fi
    exit 0
  }
  trap 'fail "an unexpected error (${BASH_SOURCE[0]##*/}, line $LINENO)"' ERR

  version=$(dpkg-query -W -f='${source:Version}' "$devpkg" 2>/dev/null || true)
  if [ -z "$version" ]; then
    say "$devpkg is not installed (scripts/deps.sh installs it); using the system $lib"
    exit 0
  fi
  upstream=${version#*:} # the file names leave out an epoch
  prefix=$root/.deps/$name-$upstream-$(sha256sum "$root/scripts/$name.sh" | cut -c1-8)
  # A complete install is renamed into place last, so its presence means the build finished.
  if [ -f "$prefix/$artifact" ]; then
    echo "$prefix"
    exit 0
  fi
  mkdir -p "$root/.deps"
  failed_mark=$prefix.failed
  if [ -e "$failed_mark" ]; then
    say "an earlier attempt failed (remove $failed_mark to try again); using the system $lib"
    exit 0
  fi
  # One build at a time; a second caller waits for the first, then finds its result.
  exec 9>"$root/.deps/$name.lock"
  flock 9
  if [ -f "$prefix/$artifact" ]; then
    echo "$prefix"
    exit 0
  fi
  if [ -e "$failed_mark" ]; then
    say "the build before this one failed (remove $failed_mark to try again); using the" \
      "system $lib"
    exit 0
  fi

  work=$(mktemp -d "$root/.deps/work-$name.XXXXXX")
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/src"
  log=$root/.deps/$name-build.log
  : >"$log"

  # deb-src lines for the Debian archives this machine installs from (apt-cache policy lists
  # each as "PRIO URI SUITE/COMPONENT ARCH Packages" with a "release ...o=Debian..." line after).
  apt-cache policy | awk '
    /^ *-?[0-9]+ ((mirror|tor)\+)?(https?|file):/ { uri = $2; split($3, sc, "/"); getline rel
      if (rel ~ /o=Debian,/ && sc[2] != "")
        print "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] " uri " " sc[1] " " sc[2] }' |
    sort -u >"$work/sources.list"
  [ -s "$work/sources.list" ] || fail "no Debian archive in apt's sources"
  local apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list"
    -o Dir::Etc::SourceParts=/nonexistent -o "Dir::State::Lists=$work/lists"
    -o "Dir::Cache=$work/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User=root -qq)
  say "fetching Debian's source of $srcpkg $version"
  apt-get "${apt_opts[@]}" update >>"$log" 2>&1 ||
    fail "cannot reach the Debian archive for sources"
  (cd "$work/src" && apt-get "${apt_opts[@]}" source --download-only "$srcpkg=$version") \
    >>"$log" 2>&1 || fail "cannot download the source of $srcpkg $version"
  (cd "$work/src" && dpkg-source -x "${srcpkg}_$upstream.dsc" "$srcpkg") >>"$log" 2>&1 ||
    fail "cannot unpack the source of $srcpkg $version"

  # Installed into a staging folder, checked, then renamed into place: a partial install is
  # never taken for a finished one.
  local stage=$work/stage
  say "building $lib $version"
  # In the background so that set -e stops the build at its first failing step: a subshell on
  # the left of || would run every step and report only the last one's status.
  (debsrc_build "$work/src/$srcpkg" "$stage" "$prefix") >>"$log" 2>&1 &
  wait $! || fail "building $lib failed"
  [ -f "$stage$prefix/$artifact" ] || fail "the $lib build installed no $artifact"
  rm -rf "$prefix"
  mv "$stage$prefix" "$prefix"
  rm -rf "$work"
  echo "$prefix"
}
