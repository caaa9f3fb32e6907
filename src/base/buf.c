/*
 * buf.c: the capped growable buffer. Growth doubles, so appends are amortized O(1).
 *
 * The first allocation is 1 KiB: most buffers are built, used and released within one call (a
 * record's body, a request), and an agent step's bodies run from a hundred bytes to a couple of
 * KiB. Starting at 64 bytes cost a step dozens of reallocations (docs/internals/PERF.md).
 */
#include "base/common.h"

#include "base/buf.h"

static char empty_text[1];

#define FIRST_CAP 1024

void vg_buf_init(struct vg_buf *b, size_t max)
{
    b->data = empty_text;
    b->len = 0;
    b->cap = 0;
    b->max = max ? max : VG_BUF_DEFAULT_MAX;
    b->fail = VIGIL_OK;
}

void vg_buf_release(struct vg_buf *b)
{
    if (b->cap)
        vg_free(b->data);
    vg_buf_init(b, b->max);
}

void vg_buf_reset(struct vg_buf *b)
{
    b->len = 0;
    if (b->cap)
        b->data[0] = '\0';
    b->fail = VIGIL_OK;
}

static int grow(struct vg_buf *b, size_t extra)
{
    if (b->fail)
        return 0;
    if (extra > b->max || b->len > b->max - extra) {
        b->fail = VIGIL_ETOOBIG;
        return 0;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 1;
    size_t cap = b->cap ? b->cap : FIRST_CAP;
    while (cap < need)
        cap *= 2;
    char *p = b->cap ? vg_realloc(b->data, cap) : vg_malloc(cap);
    if (!p) {
        b->fail = VIGIL_ENOMEM;
        return 0;
    }
    if (!b->cap)
        p[0] = '\0';
    b->data = p;
    b->cap = cap;
    return 1;
}

void vg_buf_append_slow(struct vg_buf *b, const void *data, size_t n)
{
    if (!grow(b, n))
        return;
    if (n)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void vg_buf_puts(struct vg_buf *b, const char *s)
{
    vg_buf_append(b, s, strlen(s));
}

char *vg_buf_room_slow(struct vg_buf *b, size_t n)
{
    return grow(b, n) ? b->data + b->len : NULL;
}

void vg_buf_putc_slow(struct vg_buf *b, char c)
{
    vg_buf_append(b, &c, 1);
}

void vg_buf_put_i64(struct vg_buf *b, long long v)
{
    char tmp[24], *p = tmp + sizeof tmp;
    /* Digits from the magnitude as unsigned, so LLONG_MIN needs no special case. */
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    vg_buf_append(b, p, (size_t)(tmp + sizeof tmp - p));
}

void vg_buf_vprintf(struct vg_buf *b, const char *fmt, va_list ap)
{
    va_list cp;
    va_copy(cp, ap);
    int n = vsnprintf(NULL, 0, fmt, cp);
    va_end(cp);
    if (n < 0) {
        if (!b->fail)
            b->fail = VIGIL_ERROR;
        return;
    }
    if (!grow(b, (size_t)n))
        return;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void vg_buf_printf(struct vg_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vg_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

vigil_code vg_buf_finish(struct vg_buf *b, vigil_error *err)
{
    if (b->fail == VIGIL_ETOOBIG)
        return VG_FAIL(err, VIGIL_ETOOBIG, "text is longer than its limit of %zu bytes", b->max);
    if (b->fail)
        return VG_FAIL(err, b->fail, "could not build text: %s", vigil_strerror(b->fail));
    return VIGIL_OK;
}

char *vg_buf_detach(struct vg_buf *b, size_t *len)
{
    if (b->fail)
        return NULL;
    char *out;
    if (b->cap) {
        out = b->data;
    } else {
        out = vg_malloc(1);
        if (!out)
            return NULL;
        out[0] = '\0';
    }
    if (len)
        *len = b->len;
    vg_buf_init(b, b->max);
    return out;
}
