/*
 * listen.c: the stream a Streamable HTTP server may use for messages of its own (MCP.md MCP-25,
 * MCP-49). Replies to our POSTs carry only what belongs to that request; a change of the
 * server's tools announced between requests comes on a stream the client keeps open beside
 * them: in revision 2025-11-25 the optional GET of the MCP endpoint (with the session id;
 * 405 means the server offers none), in 2026-07-28 a POST of `subscriptions/listen` whose
 * answer stays open. A thread of its own holds it, since the client's requests block: it hands
 * each message to the client's callback, answers the server's requests (ping) by POST, and
 * when the stream drops reconnects after the server's `retry:` (else 1 s, doubling to 30 s),
 * sending `Last-Event-ID` so a legacy server can replay what was missed. A lost session, a
 * refused credential or a 405 ends it: the client starts a new one at its next handshake.
 */
#include "mcp/proc.h"

#include "base/json.h"
#include "model/http.h"
#include "model/sse.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define FIRST_RETRY_MS 1000
#define MAX_RETRY_MS 30000
#define MAX_HEADERS 32

struct vg_mcp_listener {
    const struct vg_mcp_server_conf *conf;
    struct vg_mcp_http http; /* a copy: session and version as of the handshake */
    int modern;
    vg_mcp_listen_fn fn;
    void *user;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int stop;
    char last_id[256]; /* the last event id seen, sent back as Last-Event-ID */
    long retry_ms;     /* the server's retry:, or -1 */
    struct vg_sse sse;
    int got_event; /* an event arrived on this connection: the backoff starts over */
};

static int stopping(void *user)
{
    struct vg_mcp_listener *l = user;
    return atomic_load(&l->stop);
}

static int ignore(void *user, const char *text, size_t len)
{
    (void)user, (void)text, (void)len;
    return 0;
}

/* The server's request on the stream: ping answered, anything else -32601, each by a POST of
 * its own (the answer gets 202). */
static void answer(struct vg_mcp_listener *l, const struct vg_mcp_msg *m)
{
    json_t *r = !strcmp(m->method, "ping")
                    ? json_pack("{s:s, s:O, s:{}}", "jsonrpc", "2.0", "id", m->id, "result")
                    : json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", m->id, "error",
                                "code", -32601, "message", "Method not found");
    char *text = r ? vg_json_dump(r, 0) : NULL;
    struct vg_mcp_http h = l->http;
    h.method = h.name = NULL;
    if (text)
        vg_mcp_http_post(&h, l->conf, text, strlen(text), l->conf->timeout_ms, ignore, NULL, NULL);
    vg_free(text);
    json_decref(r);
}

static vigil_code on_event(void *user, const struct vg_sse_event *ev, vigil_error *err)
{
    struct vg_mcp_listener *l = user;
    struct vg_mcp_msg m;
    (void)err;
    snprintf(l->last_id, sizeof l->last_id, "%s", ev->id);
    l->got_event = 1;
    if (ev->data_len == 0) /* a priming event */
        return VIGIL_OK;
    enum vg_mcp_msg_kind k = vg_mcp_msg_parse(ev->data, ev->data_len, &m);
    if (k == VG_MCP_REQUEST && !l->modern)
        answer(l, &m);
    else if (k == VG_MCP_NOTIFICATION)
        l->fn(l->user, &m);
    vg_mcp_msg_release(&m);
    return VIGIL_OK;
}

static vigil_code on_body(void *user, const char *data, size_t len, vigil_error *err)
{
    struct vg_mcp_listener *l = user;
    return vg_sse_feed(&l->sse, data, len, err);
}

/* The request that opens the stream: its headers (owned lines) and, in 2026-07-28, its body. */
static size_t stream_headers(struct vg_mcp_listener *l, char **lines, char **body)
{
    struct vg_mcp_http h = l->http;
    h.method = l->modern ? "subscriptions/listen" : NULL;
    h.name = NULL;
    size_t n = vg_mcp_http_headers(l->conf, &h, lines, MAX_HEADERS);
    if (!l->modern && l->last_id[0] && n < MAX_HEADERS + 3) {
        size_t len = strlen(l->last_id) + 16;
        if ((lines[n] = vg_malloc(len)))
            snprintf(lines[n++], len, "Last-Event-ID: %s", l->last_id);
    }
    *body = NULL;
    if (l->modern) {
        json_t *notes = json_pack("{s:{s:b}}", "notifications", "toolsListChanged", 1);
        json_t *p = notes ? vg_mcp_modern_params(notes) : NULL;
        json_t *m = p ? json_pack("{s:s, s:s, s:s, s:o}", "jsonrpc", "2.0", "id", "vigil-listen",
                                  "method", "subscriptions/listen", "params", p)
                      : NULL;
        *body = m ? vg_json_dump(m, 0) : NULL;
        json_decref(m);
        json_decref(notes);
    }
    return n;
}

/* One connection, until it ends. 1 when the stream is over for good (not offered, the session
 * or the credentials refused). */
static int one_stream(struct vg_mcp_listener *l)
{
    char *lines[MAX_HEADERS + 4] = {0}, *body = NULL;
    size_t nh = stream_headers(l, lines, &body);
    struct vg_http_response resp;
    vigil_error err = {0};
    vg_http_response_init(&resp);
    vg_sse_init(&l->sse, l->conf->max_message, on_event, l);
    l->got_event = 0;
    struct vg_http_request req = {.method = l->modern ? "POST" : "GET",
                                  .url = l->conf->url,
                                  .headers = (const char *const *)lines,
                                  .n_headers = nh,
                                  .body = body,
                                  .body_len = body ? strlen(body) : 0,
                                  .timeout_ms = 3600000,
                                  .max_response = l->conf->max_message,
                                  .on_body = on_body,
                                  .user = l,
                                  .cancel = stopping,
                                  .cancel_user = l};
    vigil_code rc = (l->modern && !body) ? VIGIL_ENOMEM : vg_http_perform(&req, &resp, &err);
    vg_mcp_http_headers_free(lines, nh);
    vg_free(body);
    long status = resp.status;
    int sse_answer = !strncasecmp(resp.content_type, "text/event-stream", 17);
    if (l->sse.retry_ms >= 0)
        l->retry_ms = l->sse.retry_ms;
    vg_sse_release(&l->sse);
    vg_http_response_release(&resp);
    if (rc == VIGIL_ECANCELED)
        return 1;
    /* Not offered (405, or an answer that is no stream), the session gone, refused: over. */
    return status == 405 || status == 404 || status == 400 || status == 401 || status == 403 ||
           (status >= 200 && status < 300 && !sse_answer);
}

/* Wait ms or until stopped: 1 when stopped. */
static int pause_ms(struct vg_mcp_listener *l, long ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&l->mu);
    while (!atomic_load(&l->stop) && pthread_cond_timedwait(&l->cv, &l->mu, &until) == 0) {
    }
    pthread_mutex_unlock(&l->mu);
    return atomic_load(&l->stop);
}

static void *run(void *arg)
{
    struct vg_mcp_listener *l = arg;
    long backoff = FIRST_RETRY_MS;
    while (!atomic_load(&l->stop)) {
        if (one_stream(l))
            break;
        if (l->got_event)
            backoff = FIRST_RETRY_MS;
        long wait = l->retry_ms >= 0 ? l->retry_ms : backoff;
        backoff = VG_MIN(backoff * 2, MAX_RETRY_MS);
        if (pause_ms(l, wait))
            break;
    }
    return NULL;
}

vigil_code vg_mcp_listen_start(const struct vg_mcp_server_conf *s, const struct vg_mcp_http *h,
                               int modern, vg_mcp_listen_fn fn, void *user,
                               struct vg_mcp_listener **out, vigil_error *err)
{
    struct vg_mcp_listener *l = vg_calloc(1, sizeof *l);
    if (!l)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    l->conf = s;
    l->http = *h;
    l->http.kept = NULL; /* the client's, used by its own thread only */
    l->modern = modern;
    l->fn = fn;
    l->user = user;
    l->retry_ms = -1;
    atomic_init(&l->stop, 0);
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    if (pthread_create(&l->thread, NULL, run, l)) {
        pthread_cond_destroy(&l->cv);
        pthread_mutex_destroy(&l->mu);
        vg_free(l);
        return VG_FAIL(err, VIGIL_ERROR, "could not start a thread for MCP server \"%s\"", s->name);
    }
    *out = l;
    return VIGIL_OK;
}

void vg_mcp_listen_stop(struct vg_mcp_listener *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    atomic_store(&l->stop, 1);
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    vg_free(l);
}
