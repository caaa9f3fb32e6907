/*
 * fuzz_sse.c: arbitrary bytes through the SSE parser, fed whole and in chunks whose sizes come
 * from the input; both ways must give the same events (the parser keeps no chunking state
 * beyond the current line).
 */
#include "base/common.h"

#include "base/buf.h"
#include "model/sse.h"

static vigil_code collect(void *user, const struct vg_sse_event *ev, vigil_error *err)
{
    struct vg_buf *b = user;
    vg_buf_puts(b, ev->event);
    vg_buf_putc(b, '\0');
    vg_buf_append(b, ev->data, ev->data_len);
    vg_buf_putc(b, '\0');
    vg_buf_puts(b, ev->id);
    vg_buf_putc(b, '\n');
    return VIGIL_OK;
}

static void run(const uint8_t *data, size_t size, size_t step, struct vg_buf *out)
{
    struct vg_sse p;
    vigil_error err = {0};
    vg_sse_init(&p, 1 << 20, collect, out);
    for (size_t off = 0; off < size; off += step)
        if (vg_sse_feed(&p, (const char *)data + off, VG_MIN(step, size - off), &err))
            break;
    vg_sse_finish(&p, &err);
    vg_sse_release(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct vg_buf a, b;
    if (size == 0)
        return 0;
    vg_buf_init(&a, 0);
    vg_buf_init(&b, 0);
    run(data + 1, size - 1, size, &a);
    run(data + 1, size - 1, (size_t)(data[0] % 17) + 1, &b);
    if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0)
        __builtin_trap();
    vg_buf_release(&a);
    vg_buf_release(&b);
    return 0;
}
