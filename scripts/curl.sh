#!/usr/bin/env bash
# Builds the libcurl vigil links: Debian's own source package of the libcurl installed here,
# with every Debian patch (the security fixes among them), configured for HTTP and HTTPS over
# OpenSSL only and built as a static library. Usage: scripts/curl.sh
#
# Prints the folder it installed into (.deps/curl-VERSION, reused by later runs) on stdout.
# When it cannot build it (no network to the Debian archive, say) it says why on stderr, prints
# nothing and exits 0: the build then uses Debian's shared libcurl, which works the same and
# costs each process about 4 MB more memory (docs/ARCHITECTURE.md, "Choices").
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

version=$(dpkg-query -W -f='${source:Version}' libcurl4-openssl-dev 2>/dev/null || true)
if [ -z "$version" ]; then
  say "libcurl4-openssl-dev is not installed (scripts/deps.sh installs it); using the system libcurl"
  exit 0
fi
prefix=$root/.deps/curl-$version
if [ -f "$prefix/lib/libcurl.a" ] && [ -f "$prefix/include/curl/curl.h" ]; then
  echo "$prefix"
  exit 0
fi

work=$root/.deps/work-curl
rm -rf "$work"
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/src"
log=$work/build.log
fail() {
  say "$1; using the system libcurl (log: $log)"
  exit 0
}

# deb-src lines for the Debian archives this machine installs from (apt-cache policy lists
# each as "PRIO URI SUITE/COMPONENT ARCH Packages" with a "release ...o=Debian..." line after).
apt-cache policy | awk '
  /^ *[0-9]+ (https?|file):/ { uri = $2; split($3, sc, "/"); getline rel
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
(cd "$work/src" && dpkg-source -x "curl_$version.dsc" curl) >>"$log" 2>&1 ||
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
(
  cd "$work/src/curl"
  ./configure --prefix="$prefix" "${features[@]}" CFLAGS="-O2 -g"
  make -j"$(nproc)" -C lib
  make -C lib install
  make -C include install
) >>"$log" 2>&1 || { rm -rf "$prefix"; fail "building libcurl failed"; }
rm -rf "$work"
echo "$prefix"
