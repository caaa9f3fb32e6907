#!/usr/bin/env bash
# Builds the libcurl vigil links: Debian's own source package of the libcurl installed here,
# with every Debian patch (the security fixes among them), configured for HTTP and HTTPS over
# OpenSSL only and built as a static library. Usage: scripts/curl.sh
#
# Prints the folder it installed into (.deps/curl-VERSION, reused by later runs) on stdout.
# When it cannot build it (no network to the Debian archive, say) it says why on stderr, prints
# nothing and exits 0: the build then uses Debian's shared libcurl, which works the same and
# costs each process about 4 MB more memory (docs/ARCHITECTURE.md, "Choices"). A failure is
# remembered (.deps/curl-VERSION.failed) so later builds do not wait on the network again;
# delete that file to retry.
#
# Why: Debian's libcurl also speaks LDAP, RTMP, SSH, SMB, Kerberos and more, and loading the
# libraries behind them (GnuTLS, Kerberos, OpenLDAP, SASL, libssh2...) costs every process
# about 4 MB before it sends a request. vigil only ever speaks HTTP(S) to model providers.
# The source comes through apt (signed Release, checksummed Sources), from the same Debian
# mirrors as this machine's packages, with a private package list: the machine's apt
# configuration is not touched.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

say() { echo "curl.sh: $*" >&2; }
work=""
log=/dev/null
# Any failure falls back to the system libcurl; the build goes on either way.
fail() {
  say "$1; using the system libcurl (log: $log)"
  trap - ERR
  if [ -n "$work" ]; then
    touch "$failed_mark" 2>/dev/null
    rm -rf "$work"
  fi
  exit 0
}
trap 'fail "an unexpected error (line $LINENO)"' ERR

version=$(dpkg-query -W -f='${source:Version}' libcurl4-openssl-dev 2>/dev/null || true)
if [ -z "$version" ]; then
  say "libcurl4-openssl-dev is not installed (scripts/deps.sh installs it); using the system libcurl"
  exit 0
fi
upstream=${version#*:} # the file names leave out an epoch
prefix=$root/.deps/curl-$upstream
# A complete install is renamed into place last, so its presence means the build finished.
if [ -f "$prefix/lib/libcurl.a" ]; then
  echo "$prefix"
  exit 0
fi
mkdir -p "$root/.deps"
failed_mark=$root/.deps/curl-$upstream.failed
if [ -e "$failed_mark" ]; then
  say "an earlier attempt failed (remove $failed_mark to try again); using the system libcurl"
  exit 0
fi
# One build at a time; a second caller waits for the first, then finds its result.
exec 9>"$root/.deps/curl.lock"
flock 9
if [ -f "$prefix/lib/libcurl.a" ]; then
  echo "$prefix"
  exit 0
fi

work=$(mktemp -d "$root/.deps/work-curl.XXXXXX")
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/src"
log=$root/.deps/curl-build.log
: >"$log"

# deb-src lines for the Debian archives this machine installs from (apt-cache policy lists
# each as "PRIO URI SUITE/COMPONENT ARCH Packages" with a "release ...o=Debian..." line after).
apt-cache policy | awk '
  /^ *-?[0-9]+ ((mirror|tor)\+)?(https?|file):/ { uri = $2; split($3, sc, "/"); getline rel
    if (rel ~ /o=Debian,/ && sc[2] != "")
      print "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] " uri " " sc[1] " " sc[2] }' |
  sort -u >"$work/sources.list"
[ -s "$work/sources.list" ] || fail "no Debian archive in apt's sources"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/nonexistent
  -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Debug::NoLocking=1
  -o APT::Sandbox::User=root -qq)
say "fetching Debian's source of curl $version"
apt-get "${apt_opts[@]}" update >>"$log" 2>&1 || fail "cannot reach the Debian archive for sources"
(cd "$work/src" && apt-get "${apt_opts[@]}" source --download-only "curl=$version") >>"$log" 2>&1 ||
  fail "cannot download the source of curl $version"
(cd "$work/src" && dpkg-source -x "curl_$upstream.dsc" curl) >>"$log" 2>&1 ||
  fail "cannot unpack the source of curl $version"

say "building libcurl $version (HTTP and HTTPS only, static)"
features=(--disable-shared --enable-static --with-pic --with-openssl
  --with-ca-path=/etc/ssl/certs --with-ca-bundle=/etc/ssl/certs/ca-certificates.crt
  --disable-ftp --disable-file --disable-ldap --disable-ldaps --disable-rtsp --disable-dict
  --disable-telnet --disable-tftp --disable-pop3 --disable-imap --disable-smb --disable-smtp
  --disable-gopher --disable-mqtt --disable-manual --disable-ntlm --disable-alt-svc
  --disable-hsts --disable-cookies --without-libssh2 --without-libssh --without-librtmp
  --without-libidn2 --without-libpsl --without-brotli --without-zstd --without-nghttp2
  --without-gssapi --without-zlib)
# Installed into a staging folder, checked, then renamed into place: a partial install is never
# taken for a finished one.
stage=$work/stage
(
  cd "$work/src/curl" &&
    ./configure --prefix="$prefix" "${features[@]}" CFLAGS="-O2 -g" &&
    make -j"$(nproc)" -C lib &&
    make -C lib install DESTDIR="$stage" &&
    make -C include install DESTDIR="$stage"
) >>"$log" 2>&1 || fail "building libcurl failed"
[ -f "$stage$prefix/lib/libcurl.a" ] && [ -f "$stage$prefix/include/curl/curl.h" ] ||
  fail "the libcurl build installed no library"
rm -rf "$prefix"
mv "$stage$prefix" "$prefix"
rm -rf "$work"
echo "$prefix"
