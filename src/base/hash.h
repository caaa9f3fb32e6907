/*
 * hash.h: SHA-256 (libsodium) for run keys, operation ids and content addressing.
 * Inputs are joined with a 0x1f unit separator, so ("ab","c") and ("a","bc") differ.
 */
#ifndef VG_HASH_H
#define VG_HASH_H

#include <stddef.h>

#define VG_SHA256_HEX_LEN 64

/* Lowercase hex of SHA-256 over the parts joined by 0x1f; out holds 65 bytes. */
void vg_sha256_hex_parts(char out[VG_SHA256_HEX_LEN + 1], const char *const *parts, size_t n);
/* Lowercase hex of SHA-256 of a byte string. */
void vg_sha256_hex(char out[VG_SHA256_HEX_LEN + 1], const void *data, size_t len);

#endif
