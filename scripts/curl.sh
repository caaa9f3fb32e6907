#!/usr/bin/env bash
# Builds the libcurl vigil links: Debian's own source package of the libcurl installed here,
# with every Debian patch (the security fixes among them), configured for HTTP and HTTPS over
# OpenSSL only and built as a static library. Usage: scripts/curl.sh
#
# Prints the folder it installed into (.deps/curl-VERSION-BUILD, reused by later runs) on stdout.
# When it cannot build it (no network to the Debian archive, say) it says why on stderr, prints
# nothing and exits 0: the build then uses Debian's shared libcurl, which works the same and
# costs each process about 4 MB more memory (docs/ARCHITECTURE.md, "Choices"). scripts/debsrc.sh
# has the details (where the source comes from, how failures are remembered).
#
# Why: Debian's libcurl also speaks LDAP, RTMP, SSH, SMB, Kerberos and more, and loading the
# libraries behind them (GnuTLS, Kerberos, OpenLDAP, SASL, libssh2...) costs every process
# about 4 MB before it sends a request. vigil only ever speaks HTTP(S) to model providers.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/debsrc.sh

debsrc_build() {
  local src=$1 stage=$2 prefix=$3
  local features=(--disable-shared --enable-static --with-pic --with-openssl
    --with-ca-path=/etc/ssl/certs --with-ca-bundle=/etc/ssl/certs/ca-certificates.crt
    --disable-ftp --disable-file --disable-ldap --disable-ldaps --disable-rtsp --disable-dict
    --disable-telnet --disable-tftp --disable-pop3 --disable-imap --disable-smb --disable-smtp
    --disable-gopher --disable-mqtt --disable-manual --disable-ntlm --disable-alt-svc
    --disable-hsts --disable-cookies --without-libssh2 --without-libssh --without-librtmp
    --without-libidn2 --without-libpsl --without-brotli --without-zstd --without-nghttp2
    --without-gssapi --without-zlib)
  cd "$src"
  ./configure --prefix="$prefix" "${features[@]}" CFLAGS="-O2 -g"
  make -j"$(nproc)" -C lib
  make -C lib install DESTDIR="$stage"
  make -C include install DESTDIR="$stage"
  test -f "$stage$prefix/include/curl/curl.h"
}

debsrc_main curl libcurl4-openssl-dev curl lib/libcurl.a libcurl
