/*
 * sse.c: the server-sent-events parser both streaming adapters use. It follows the WHATWG
 * "interpreting an event stream" algorithm byte by byte, keeping only the unfinished line
 * between feeds, so any chunking of the same bytes yields the same events (the fuzz target and
 * the chunking tests check that).
 */
#include "base/common.h"

#include "model/sse.h"

#define DEFAULT_MAX ((size_t)8 << 20)

static const unsigned char bom[3] = {0xEF, 0xBB, 0xBF};

void vg_sse_init(struct vg_sse *p, size_t max_event, vg_sse_event_cb cb, void *user)
{
    size_t max = max_event ? max_event : DEFAULT_MAX;
    memset(p, 0, sizeof(*p));
    p->cb = cb;
    p->user = user;
    p->retry_ms = -1;
    vg_buf_init(&p->line, max);
    vg_buf_init(&p->data, max);
    vg_buf_init(&p->event, 4096);
    vg_buf_init(&p->id, 4096);
}

void vg_sse_release(struct vg_sse *p)
{
    vg_buf_release(&p->line);
    vg_buf_release(&p->data);
    vg_buf_release(&p->event);
    vg_buf_release(&p->id);
}

static int field_is(const char *f, size_t n, const char *name)
{
    return strlen(name) == n && memcmp(f, name, n) == 0;
}

static vigil_code dispatch(struct vg_sse *p, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    if (!p->has_data) {
        vg_buf_reset(&p->event);
        return VIGIL_OK;
    }
    if (p->data.len && p->data.data[p->data.len - 1] == '\n') {
        p->data.len--;
        p->data.data[p->data.len] = '\0';
    }
    struct vg_sse_event ev = {
        .event = p->event.len ? p->event.data : "message",
        .data = p->data.data,
        .data_len = p->data.len,
        .id = p->id.data,
    };
    p->events++;
    if (p->cb)
        rc = p->cb(p->user, &ev, err);
    vg_buf_reset(&p->data);
    vg_buf_reset(&p->event);
    p->has_data = 0;
    return rc;
}

static vigil_code process_line(struct vg_sse *p, vigil_error *err)
{
    const char *line = p->line.data;
    size_t n = p->line.len;
    vigil_code rc = VIGIL_OK;

    if (n == 0)
        return dispatch(p, err);
    if (line[0] == ':')
        goto out; /* comment (keep-alive) */

    const char *colon = memchr(line, ':', n);
    size_t flen = colon ? (size_t)(colon - line) : n;
    const char *value = colon ? colon + 1 : line + n;
    size_t vlen = n - (size_t)(value - line);
    if (vlen && value[0] == ' ') {
        value++;
        vlen--;
    }

    if (field_is(line, flen, "data")) {
        vg_buf_append(&p->data, value, vlen);
        vg_buf_putc(&p->data, '\n');
        p->has_data = 1;
        if (p->data.fail)
            rc = vg_buf_finish(&p->data, err);
    } else if (field_is(line, flen, "event")) {
        vg_buf_reset(&p->event);
        vg_buf_append(&p->event, value, vlen);
        if (p->event.fail)
            rc = vg_buf_finish(&p->event, err);
    } else if (field_is(line, flen, "id")) {
        if (!memchr(value, '\0', vlen)) {
            vg_buf_reset(&p->id);
            vg_buf_append(&p->id, value, vlen);
            if (p->id.fail)
                rc = vg_buf_finish(&p->id, err);
        }
    } else if (field_is(line, flen, "retry")) {
        /* The reconnection time, for a caller that reconnects (MCP's GET stream): digits only,
         * as the standard says; anything else is ignored. */
        long ms = 0;
        size_t i = 0;
        for (; i < vlen && value[i] >= '0' && value[i] <= '9' && ms < 86400000L; i++)
            ms = ms * 10 + (value[i] - '0');
        if (vlen && i == vlen)
            p->retry_ms = ms;
    }
    /* Unknown fields are ignored, as the standard says. */
out:
    vg_buf_reset(&p->line);
    return rc;
}

vigil_code vg_sse_feed(struct vg_sse *p, const char *data, size_t len, vigil_error *err)
{
    size_t i = 0;
    vigil_code rc = VIGIL_OK;

    if (p->fail)
        return VG_FAIL(err, p->fail, "event stream parser already failed");

    while (!p->started && i < len) {
        if ((unsigned char)data[i] == bom[p->bom_seen]) {
            p->bom_seen++;
            i++;
            if (p->bom_seen == 3)
                p->started = 1;
            continue;
        }
        /* Not a BOM after all: the bytes matched so far are ordinary text. */
        vg_buf_append(&p->line, bom, p->bom_seen);
        p->started = 1;
    }

    while (i < len) {
        char c = data[i];
        if (c == '\n' && p->after_cr) {
            p->after_cr = 0; /* the LF of a CRLF: the line already ended at the CR */
            i++;
            continue;
        }
        p->after_cr = 0;
        if (c == '\r' || c == '\n') {
            p->after_cr = (c == '\r');
            i++;
            if (p->line.fail) {
                rc = vg_buf_finish(&p->line, err);
                goto out;
            }
            rc = process_line(p, err);
            if (rc != VIGIL_OK)
                goto out;
            continue;
        }
        /* Copy the run of ordinary bytes up to the next line end in one append. */
        size_t j = i;
        while (j < len && data[j] != '\r' && data[j] != '\n')
            j++;
        vg_buf_append(&p->line, data + i, j - i);
        if (p->line.fail) {
            rc = vg_buf_finish(&p->line, err);
            goto out;
        }
        i = j;
    }
out:
    if (rc != VIGIL_OK)
        p->fail = rc;
    return rc;
}

vigil_code vg_sse_finish(struct vg_sse *p, vigil_error *err)
{
    if (p->fail)
        return VG_FAIL(err, p->fail, "event stream parser already failed");
    /* An event not closed by a blank line is discarded; so is a partial last line. */
    vg_buf_reset(&p->line);
    vg_buf_reset(&p->data);
    vg_buf_reset(&p->event);
    p->has_data = 0;
    return VIGIL_OK;
}
