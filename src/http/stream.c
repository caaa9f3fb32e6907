/*
 * stream.c: a response whose bytes a kept thread (workers.c) produces as they come (a streamed chat
 * turn, an MCP call with progress). The thread appends to a buffer; libmicrohttpd's content
 * reader sends what is there, or suspends the connection until the thread writes or ends (no
 * thread of libmicrohttpd's pool waits). A client that goes away, or the server stopping, shows
 * in vg_http_stream_gone, which the thread's work polls to cancel itself.
 */
#include "base/common.h"

#include "http/http_int.h"
#include "http/mhd.h"

#include <poll.h>

struct vg_http_stream {
    pthread_mutex_t mu;
    struct vg_buf out; /* bytes not yet sent */
    size_t sent;       /* bytes of out already sent */
    int done, gone, refs;
    /* Its connection waits suspended for the next bytes; whoever clears suspended resumes it. */
    struct MHD_Connection *conn;
    int suspended;
    struct vg_http *h;
    vg_http_stream_fn fn;
    void *arg;
    void (*free_arg)(void *arg);
};

static void stream_unref(struct vg_http_stream *s)
{
    pthread_mutex_lock(&s->mu);
    int last = --s->refs == 0;
    pthread_mutex_unlock(&s->mu);
    if (!last)
        return;
    vg_buf_release(&s->out);
    if (s->free_arg)
        s->free_arg(s->arg);
    pthread_mutex_destroy(&s->mu);
    vg_free(s);
}

/* Resume the connection if it waits (called with s->mu held, which it releases): the resume
 * runs outside the lock, libmicrohttpd's lock never under ours. The connection stays
 * suspended, so open, until then. */
static void stream_wake_unlock(struct vg_http_stream *s)
{
    int resume = s->suspended;
    s->suspended = 0;
    pthread_mutex_unlock(&s->mu);
    if (resume)
        MHD_resume_connection(s->conn);
}

void vg_http_stream_write(struct vg_http_stream *s, const char *text, size_t len)
{
    pthread_mutex_lock(&s->mu);
    if (s->gone) { /* no reader any more: a call that runs on (a legacy MCP call) buffers nothing */
        pthread_mutex_unlock(&s->mu);
        return;
    }
    vg_buf_append(&s->out, text, len);
    stream_wake_unlock(s);
}

struct vg_http *vg_http_stream_server(struct vg_http_stream *s)
{
    return s->h;
}

int vg_http_stream_gone(struct vg_http_stream *s)
{
    pthread_mutex_lock(&s->mu);
    int gone = s->gone || atomic_load(&s->h->stopping);
    pthread_mutex_unlock(&s->mu);
    return gone;
}

int vg_http_conn_closed(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct pollfd p = {.fd = info ? info->connect_fd : -1, .events = POLLRDHUP};
    return p.fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

int vg_http_stream_closed(struct vg_http_stream *s)
{
    pthread_mutex_lock(&s->mu);
    /* A suspended connection is not watched by libmicrohttpd, so a close would show only at the
     * next write: the socket is asked instead. Only while suspended (s->mu held): libmicrohttpd
     * cannot close and free the connection under us then. */
    int gone = s->gone || (s->suspended && vg_http_conn_closed(s->conn));
    pthread_mutex_unlock(&s->mu);
    return gone;
}

void vg_http_stream_end(struct vg_http_stream *s)
{
    pthread_mutex_lock(&s->mu);
    s->done = 1;
    stream_wake_unlock(s);
}

static void stream_thread(void *arg)
{
    struct vg_http_stream *s = arg;
    struct vg_http *h = s->h;
    s->fn(s, s->arg);
    pthread_mutex_lock(&s->mu);
    s->done = 1;
    stream_wake_unlock(s);
    stream_unref(s);
    pthread_mutex_lock(&h->pool.mu); /* vg_http_stop waits for this */
    h->chat_threads--;
    pthread_cond_broadcast(&h->pool.cv);
    pthread_mutex_unlock(&h->pool.mu);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct vg_http_stream *s = cls;
    VG_UNUSED(pos);
    pthread_mutex_lock(&s->mu);
    if (s->sent == s->out.len && !s->done) {
        /* Nothing yet: wait suspended for the next bytes or the end (a stop cancels the work,
         * which then ends). A resume before the suspend cancels it. */
        s->suspended = 1;
        pthread_mutex_unlock(&s->mu);
        MHD_suspend_connection(s->conn);
        return 0;
    }
    size_t n = VG_MIN(max, s->out.len - s->sent);
    memcpy(buf, s->out.data + s->sent, n);
    s->sent += n;
    int end = n == 0 && s->done;
    pthread_mutex_unlock(&s->mu);
    return end ? MHD_CONTENT_READER_END_OF_STREAM : (ssize_t)n;
}

static void stream_free(void *cls)
{
    struct vg_http_stream *s = cls;
    pthread_mutex_lock(&s->mu);
    s->gone = 1; /* the work, if still running, cancels itself */
    pthread_mutex_unlock(&s->mu);
    stream_unref(s);
}

void vg_http_stream_start(struct vg_req *r, const char *content_type, vg_http_stream_fn fn,
                          void *arg, void (*free_arg)(void *arg))
{
    struct vg_http_stream *s = vg_calloc(1, sizeof *s);
    if (!s) {
        if (free_arg)
            free_arg(arg);
        vg_req_error(r, VIGIL_ENOMEM, NULL);
        return;
    }
    pthread_mutex_init(&s->mu, NULL);
    vg_buf_init(&s->out, 0);
    s->conn = r->conn;
    s->h = r->h;
    s->refs = 2; /* the thread's and the response's */
    s->fn = fn;
    s->arg = arg;
    s->free_arg = free_arg;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, s, stream_free);
    pthread_mutex_lock(&r->h->pool.mu);
    r->h->chat_threads++;
    pthread_mutex_unlock(&r->h->pool.mu);
    if (!resp || vg_http_work(&r->h->workers, stream_thread, NULL, s) != 0) {
        pthread_mutex_lock(&r->h->pool.mu);
        r->h->chat_threads--;
        pthread_cond_broadcast(&r->h->pool.cv);
        pthread_mutex_unlock(&r->h->pool.mu);
        if (resp)
            MHD_destroy_response(resp); /* stream_free drops one reference */
        else
            s->refs--;
        stream_unref(s);
        if (atomic_load(&r->h->stopping))
            vg_req_error(r, VIGIL_EBUSY, "the server is stopping");
        else
            vg_req_error(r, VIGIL_ENOMEM, "could not start the stream");
        return;
    }
    /* Reverse proxies (nginx) send each event as it comes instead of buffering the stream. */
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    vg_req_respond(r, resp, content_type);
}
