/*
 * buf.h: a growable text buffer with a hard size cap. `data` is never NULL and always
 * NUL-terminated. The first failure (out of memory, over the cap) is sticky: later appends are
 * no-ops and vg_buf_finish reports it once. Modeled on git's strbuf and curl's dynbuf.
 */
#ifndef VG_BUF_H
#define VG_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <string.h>

struct vg_buf {
    char *data;      /* the text, NUL-terminated; points at a shared "" until first growth */
    size_t len;      /* bytes used, without the NUL */
    size_t cap;      /* bytes allocated; 0 while data is the shared "" */
    size_t max;      /* hard cap on len; appends past it fail with VIGIL_ETOOBIG */
    vigil_code fail; /* first failure, sticky; VIGIL_OK while healthy */
};

#define VG_BUF_DEFAULT_MAX ((size_t)64 << 20)

void vg_buf_init(struct vg_buf *b, size_t max);
void vg_buf_release(struct vg_buf *b);
void vg_buf_reset(struct vg_buf *b); /* len = 0, keeps the allocation and clears the failure */
void vg_buf_append_slow(struct vg_buf *b, const void *data, size_t n);
/* Inline while the bytes fit: the JSON writers append a few bytes at a time. */
static inline void vg_buf_append(struct vg_buf *b, const void *data, size_t n)
{
    if (n < b->cap - b->len && b->len + n <= b->max && !b->fail) {
        memcpy(b->data + b->len, data, n);
        b->len += n;
        b->data[b->len] = '\0';
    } else {
        vg_buf_append_slow(b, data, n);
    }
}
void vg_buf_puts(struct vg_buf *b, const char *s);
void vg_buf_putc_slow(struct vg_buf *b, char c);
/* One byte; inline because JSON writers put thousands of punctuation bytes per record. */
static inline void vg_buf_putc(struct vg_buf *b, char c)
{
    if (b->len + 2 <= b->cap && b->len < b->max && !b->fail) {
        b->data[b->len++] = c;
        b->data[b->len] = '\0';
    } else {
        vg_buf_putc_slow(b, c);
    }
}
/* Room for n more bytes at data + len, which the caller writes and then counts with
 * vg_buf_added; NULL when the buffer cannot grow (the failure is sticky, as for appends).
 * Inline while there is room: the JSON writers ask once per string. */
char *vg_buf_room_slow(struct vg_buf *b, size_t n);
static inline char *vg_buf_room(struct vg_buf *b, size_t n)
{
    if (n < b->cap - b->len && b->len + n <= b->max && !b->fail)
        return b->data + b->len;
    return vg_buf_room_slow(b, n);
}
static inline void vg_buf_added(struct vg_buf *b, size_t n)
{
    b->len += n;
    b->data[b->len] = '\0';
}
/* A signed integer in decimal (what "%lld" writes), without the cost of printf. */
void vg_buf_put_i64(struct vg_buf *b, long long v);
void vg_buf_printf(struct vg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void vg_buf_vprintf(struct vg_buf *b, const char *fmt, va_list ap);
/* Report the sticky failure, if any, into err. */
vigil_code vg_buf_finish(struct vg_buf *b, vigil_error *err);
/* Hand the text to the caller (free with vg_free) and reset the buffer; NULL on failure. */
char *vg_buf_detach(struct vg_buf *b, size_t *len);

#endif
