/*
 * sse.h: an incremental server-sent-events parser (WHATWG HTML "event stream" rules). Feed it
 * bytes in any chunking; it calls back once per complete event. Handles \n, \r\n and \r line
 * ends (also split across feeds), comments, multi-line data, event names, ids, a leading BOM,
 * and fields with or without the space after the colon.
 */
#ifndef VG_MODEL_SSE_H
#define VG_MODEL_SSE_H

#include <stddef.h>

#include "base/buf.h"

struct vg_sse_event {
    const char *event; /* event type; "message" when the stream named none */
    const char *data;  /* data lines joined by \n, NUL-terminated */
    size_t data_len;
    const char *id; /* last event id seen ("" when none) */
};

/* Return VIGIL_OK to go on; another code stops the parser and is returned by vg_sse_feed. */
typedef vigil_code (*vg_sse_event_cb)(void *user, const struct vg_sse_event *ev, vigil_error *err);

struct vg_sse {
    vg_sse_event_cb cb;
    void *user;
    struct vg_buf line;  /* the current, unfinished line */
    struct vg_buf data;  /* data of the current event */
    struct vg_buf event; /* event type of the current event */
    struct vg_buf id;    /* last event id */
    int has_data;        /* a data field was seen for the current event */
    int after_cr;        /* the previous byte was a CR: a following LF belongs to it */
    int started;         /* first bytes seen (BOM check done) */
    size_t bom_seen;     /* bytes of a leading UTF-8 BOM matched so far */
    vigil_code fail;     /* sticky failure */
    size_t events;       /* events dispatched */
    long retry_ms;       /* the last `retry:` field (reconnection time, ms); -1 when none */
};

/* max_event caps one event's data and one line (ETOOBIG past it); 0: 8 MiB. */
void vg_sse_init(struct vg_sse *p, size_t max_event, vg_sse_event_cb cb, void *user);
void vg_sse_release(struct vg_sse *p);
vigil_code vg_sse_feed(struct vg_sse *p, const char *data, size_t len, vigil_error *err);
/* End of stream: an unterminated last event is discarded, as the standard says. */
vigil_code vg_sse_finish(struct vg_sse *p, vigil_error *err);

#endif
