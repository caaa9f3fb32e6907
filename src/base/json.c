/*
 * json.c: a minimal JSON writer for hot paths: string escaping with UTF-8 validation.
 */
#include "base/common.h"

#include "base/json.h"

#include <inttypes.h>

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if it is not valid. */
static size_t utf8_len(const unsigned char *p)
{
    unsigned char c = p[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        return (p[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        if ((p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80)
            return 0;
        if (c == 0xe0 && p[1] < 0xa0)
            return 0; /* overlong */
        if (c == 0xed && p[1] > 0x9f)
            return 0; /* surrogates */
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if ((p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80)
            return 0;
        if ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] > 0x8f))
            return 0;
        return 4;
    }
    return 0;
}

void vg_json_put_string(struct vg_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    if (!s) {
        vg_buf_puts(b, "null");
        return;
    }
    const unsigned char *p = (const unsigned char *)s;
    vg_buf_putc(b, '"');
    while (*p) {
        /* Copy the longest run that needs no escaping in one append. */
        const unsigned char *run = p;
        while (*p >= 0x20 && *p != '"' && *p != '\\' && *p < 0x80)
            p++;
        if (p > run)
            vg_buf_append(b, run, (size_t)(p - run));
        if (!*p)
            break;
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            vg_buf_append(b, esc, 2);
            p++;
        } else if (c < 0x20) {
            char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            switch (c) {
            case '\n':
                vg_buf_append(b, "\\n", 2);
                break;
            case '\r':
                vg_buf_append(b, "\\r", 2);
                break;
            case '\t':
                vg_buf_append(b, "\\t", 2);
                break;
            default:
                vg_buf_append(b, esc, 6);
            }
            p++;
        } else {
            size_t n = utf8_len(p);
            if (n) {
                vg_buf_append(b, p, n);
                p += n;
            } else {
                vg_buf_puts(b, "\\ufffd");
                p++;
            }
        }
    }
    vg_buf_putc(b, '"');
}

void vg_json_put_key(struct vg_buf *b, const char *key, int first)
{
    if (!first)
        vg_buf_putc(b, ',');
    vg_json_put_string(b, key);
    vg_buf_putc(b, ':');
}

void vg_json_put_int(struct vg_buf *b, int64_t v)
{
    vg_buf_printf(b, "%" PRId64, v);
}
