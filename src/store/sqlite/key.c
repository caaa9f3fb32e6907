/*
 * key.c: UUID-led key values as 16 bytes and the rest (key.h).
 */
#include "base/common.h"

#include "store/sqlite/key.h"

static int hex_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

size_t vg_sqlite_key_pack(const char *text, unsigned char *out)
{
    if (!text)
        return 0;
    size_t len = strnlen(text, VG_SQLITE_KEY_MAX);
    if (len < VG_SQLITE_UUID_TEXT || len >= VG_SQLITE_KEY_MAX - VG_SQLITE_UUID_TEXT)
        return 0;
    size_t o = 0;
    for (size_t i = 0; i < VG_SQLITE_UUID_TEXT; i += 2) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (text[i] != '-')
                return 0;
            i++;
        }
        int hi = hex_value(text[i]), lo = hex_value(text[i + 1]);
        if (hi < 0 || lo < 0)
            return 0;
        out[o++] = (unsigned char)(hi << 4 | lo);
    }
    memcpy(out + o, text + VG_SQLITE_UUID_TEXT, len - VG_SQLITE_UUID_TEXT);
    return o + len - VG_SQLITE_UUID_TEXT;
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
