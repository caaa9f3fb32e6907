/*
 * hash.c: SHA-256 helpers over libsodium's crypto_hash_sha256.
 */
#include "base/common.h"

#include "base/hash.h"

#include <sodium.h>

static void to_hex(char *out, const unsigned char *digest)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < crypto_hash_sha256_BYTES; i++) {
        out[2 * i] = hex[digest[i] >> 4];
        out[2 * i + 1] = hex[digest[i] & 15];
    }
    out[2 * crypto_hash_sha256_BYTES] = '\0';
}

void vg_sha256_hex_parts(char out[VG_SHA256_HEX_LEN + 1], const char *const *parts, size_t n)
{
    crypto_hash_sha256_state st;
    unsigned char digest[crypto_hash_sha256_BYTES];
    const unsigned char sep = 0x1f;
    crypto_hash_sha256_init(&st);
    for (size_t i = 0; i < n; i++) {
        if (i)
            crypto_hash_sha256_update(&st, &sep, 1);
        const char *p = parts[i] ? parts[i] : "";
        crypto_hash_sha256_update(&st, (const unsigned char *)p, strlen(p));
    }
    crypto_hash_sha256_final(&st, digest);
    to_hex(out, digest);
}

void vg_sha256_hex(char out[VG_SHA256_HEX_LEN + 1], const void *data, size_t len)
{
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(digest, data, len);
    to_hex(out, digest);
}
