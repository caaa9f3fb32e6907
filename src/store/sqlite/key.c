/*
 * key.c: UUID-led key values as 16 bytes and the rest (key.h).
 */
#include "base/common.h"

#include "store/sqlite/key.h"

/* A hex digit's value plus one (lowercase only: the canonical form), 0 for any other byte. */
static const unsigned char HEX1[256] = {
    ['0'] = 1, ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,  ['6'] = 7,  ['7'] = 8,
    ['8'] = 9, ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16};

/* Where the UUID's 16 bytes start in its text. */
static const unsigned char BYTE_AT[VG_SQLITE_UUID_BYTES] = {0,  2,  4,  6,  9,  11, 14, 16,
                                                            19, 21, 24, 26, 28, 30, 32, 34};

size_t vg_sqlite_key_pack(const char *text, unsigned char *out)
{
    if (!text)
        return 0;
    /* In the text's order, each byte checked before the next is read: a NUL fails the check
     * (HEX1 has 0 for it, and it is no '-'), so nothing past the string's end is read. */
    const unsigned char *t = (const unsigned char *)text;
    for (size_t i = 0; i < VG_SQLITE_UUID_BYTES; i++) {
        size_t at = BYTE_AT[i];
        if (i > 0 && at != BYTE_AT[i - 1] + 2u && t[at - 1] != '-') /* after 8-4-4-4 digits */
            return 0;
        unsigned hi = HEX1[t[at]], lo = hi ? HEX1[t[at + 1]] : 0;
        if (!lo)
            return 0;
        out[i] = (unsigned char)((hi - 1) << 4 | (lo - 1));
    }
    size_t rest = strnlen(text + VG_SQLITE_UUID_TEXT, VG_SQLITE_KEY_MAX);
    if (rest >= VG_SQLITE_KEY_MAX - 2 * VG_SQLITE_UUID_TEXT)
        return 0;
    memcpy(out + VG_SQLITE_UUID_BYTES, text + VG_SQLITE_UUID_TEXT, rest);
    return VG_SQLITE_UUID_BYTES + rest;
}

int vg_sqlite_key_unpack(const unsigned char *blob, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    if (!blob || n < VG_SQLITE_UUID_BYTES ||
        n - VG_SQLITE_UUID_BYTES >= VG_SQLITE_KEY_MAX - VG_SQLITE_UUID_TEXT)
        return 0;
    size_t o = 0;
    for (size_t i = 0; i < VG_SQLITE_UUID_BYTES; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = digits[blob[i] >> 4];
        out[o++] = digits[blob[i] & 15];
    }
    memcpy(out + o, blob + VG_SQLITE_UUID_BYTES, n - VG_SQLITE_UUID_BYTES);
    out[o + n - VG_SQLITE_UUID_BYTES] = '\0';
    return 1;
}
