/*
 * http.c: the Streamable HTTP transport of an MCP server (revision 2025-11-25, transports
 * §Streamable HTTP). Every message we send is one POST to the server's URL with
 * `Accept: application/json, text/event-stream`; the server answers a request either with one
 * JSON body or with an SSE stream whose events carry messages (notifications and its own
 * requests first, the response last), and a notification or response with 202. The session id
 * the server assigns at initialize (`Mcp-Session-Id`) and the negotiated protocol version go
 * on every later POST. The stream is read as it arrives (src/model's SSE parser) and handed
 * message by message to the client: the everything server sends an SSE priming event with
 * empty data first, which is skipped. Once the response it awaits came, the stream is read on
 * to its end, which the server should send at once (transports: it SHOULD close the stream
 * after the response): a transfer cut short takes its connection with it, so every call would
 * connect anew (a TCP handshake and a socket a call, most of an HTTP call's CPU on both sides:
 * docs/internals/PERF.md, session 22). A server that keeps the stream open longer than
 * LINGER_MS is remembered, and its streams are cut at the response from then on.
 * Secrets in `headers` (${NAME}) are interpolated for each POST and wiped after it. A client
 * keeps, between POSTs, the proxy it read from the environment once and, when no header holds a
 * secret, the header list of its session (docs/internals/PERF.md, session 23).
 */
#include "mcp/proc.h"

#include "model/http.h"
#include "model/sse.h"
#include "os/clock.h"

#define ACCEPT_BOTH "Accept: application/json, text/event-stream"
#define MAX_HEADERS 32
#define LINGER_MS 200 /* how long a stream may go on after its response */

struct post_st {
    const struct vg_mcp_server_conf *s;
    struct vg_http_response *resp;
    vg_mcp_http_msg_fn fn;
    void *user;
    struct vg_sse sse;
    int sse_ready;
    struct vg_buf json; /* a JSON body as it arrives */
    int done;           /* fn said the awaited response came */
    int cut;            /* cut the stream at the response (the server holds its streams) */
    int64_t done_ns;    /* when the response came (the real monotonic clock) */
};

static vigil_code on_event(void *user, const struct vg_sse_event *ev, vigil_error *err)
{
    struct post_st *st = user;
    (void)err;
    if (ev->data_len == 0 || st->done) /* the priming event (MCP.md: empty data) */
        return VIGIL_OK;
    st->done = st->fn(st->user, ev->data, ev->data_len);
    return VIGIL_OK;
}

static int is_sse(const struct vg_http_response *r)
{
    return !strncasecmp(r->content_type, "text/event-stream", 17);
}

static vigil_code on_body(void *user, const char *data, size_t len, vigil_error *err)
{
    struct post_st *st = user;
    if (!is_sse(st->resp)) {
        vg_buf_append(&st->json, data, len);
        return st->json.fail ? VG_FAIL(err, VIGIL_ETOOBIG,
                                       "MCP server \"%s\" answered more "
                                       "than %zu bytes (max_message_bytes)",
                                       st->s->name, st->s->max_message)
                             : VIGIL_OK;
    }
    if (!st->sse_ready) {
        vg_sse_init(&st->sse, st->s->max_message, on_event, st);
        st->sse_ready = 1;
    }
    if (st->done) /* what follows the response is not ours: only its end is awaited */
        return VIGIL_OK;
    vigil_code rc = vg_sse_feed(&st->sse, data, len, err);
    if (!rc && st->done && st->cut)
        return VG_FAIL(err, VIGIL_ECANCELED, "stream read to its response");
    if (!rc && st->done)
        st->done_ns = vg_clock_mono_ns(vg_clock_real());
    return rc;
}

/* curl's progress check: a stream that goes on LINGER_MS after its response is cut. */
static int lingering(void *user)
{
    struct post_st *st = user;
    return st->done_ns && vg_clock_mono_ns(vg_clock_real()) - st->done_ns >= LINGER_MS * 1000000LL;
}

static void wipe_str(char *s)
{
    for (volatile char *p = s; p && *p; p++)
        *p = 0;
}

/* "name: value", owned (NULL when out of memory: the header is then left out). */
static char *line_of(const char *name, const char *value)
{
    size_t n = strlen(name) + strlen(value) + 3;
    char *l = vg_malloc(n);
    if (l)
        snprintf(l, n, "%s: %s", name, value);
    return l;
}

size_t vg_mcp_http_headers(const struct vg_mcp_server_conf *s, const struct vg_mcp_http *h,
                           char **lines, size_t max)
{
    size_t n = 0;
    const char *k;
    json_t *v;
    lines[n++] = vg_strdup("Content-Type: application/json");
    lines[n++] = vg_strdup(ACCEPT_BOTH);
    if (h->session[0])
        lines[n++] = line_of("Mcp-Session-Id", h->session);
    if (h->version[0])
        lines[n++] = line_of("MCP-Protocol-Version", h->version);
    if (h->method)
        lines[n++] = line_of("Mcp-Method", h->method);
    if (h->name) { /* a non-ASCII tool name goes in its Base64 form */
        char *name = vg_mcp_header_value(h->name);
        lines[n++] = name ? line_of("Mcp-Name", name) : NULL;
        vg_free(name);
    }
    json_object_foreach (s->headers, k, v) {
        char *val = n < max ? vg_mcp_interpolate(json_string_value(v), NULL) : NULL;
        if (val)
            lines[n++] = line_of(k, val);
        wipe_str(val);
        vg_free(val);
    }
    size_t kept = 0; /* a line out of memory is left out */
    for (size_t i = 0; i < n; i++)
        if (lines[i])
            lines[kept++] = lines[i];
    return kept;
}

void vg_mcp_http_headers_free(char **lines, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        wipe_str(lines[i]);
        vg_free(lines[i]);
    }
}

/* A non-2xx answer: its body may still be a JSON-RPC error for our request (the SDK answers
 * "Bad Request" and "Session not found" that way); else the status and the body's start. 401
 * and 403 are about our credentials: EAUTH and EDENIED, so `vigil mcp` exits with the code
 * table's status for them rather than a server failure's. */
static vigil_code http_failure(struct post_st *st, long status, vigil_error *err)
{
    struct vg_buf *b = &st->resp->body;
    char text[240];
    if (status == 401 ||
        status == 403) /* our credentials (`headers`) are wrong, whatever the body */
        return VG_FAIL(err, status == 401 ? VIGIL_EAUTH : VIGIL_EDENIED,
                       "MCP server \"%s\" answered HTTP %ld (%s): check the credentials in its "
                       "`headers` (and the environment variables they name)",
                       st->s->name, status, status == 401 ? "not authenticated" : "forbidden");
    if (b->len && st->fn(st->user, b->data, b->len))
        return VIGIL_OK;
    snprintf(text, sizeof text, "%.*s", (int)VG_MIN(b->len, sizeof text - 1),
             b->len ? b->data : "");
    /* An unknown session: 404 by the specification; the TypeScript SDK's servers answer 400
     * "Bad Request: No valid session ID provided" (with no id to match). */
    int lost = status == 404 || (status == 400 && strcasestr(text, "session"));
    return VG_FAIL(err, lost ? VIGIL_ENOTFOUND : VIGIL_EPROVIDER,
                   "MCP server \"%s\" answered HTTP %ld%s%s", st->s->name, status,
                   text[0] ? ": " : "", text);
}

void vg_mcp_http_kept_release(struct vg_mcp_http_kept *k)
{
    vg_http_headers_free(k->headers);
    k->headers = NULL;
}

static int headers_hold_secrets(const struct vg_mcp_server_conf *s)
{
    const char *k;
    json_t *v;
    json_object_foreach (s->headers, k, v) {
        const char *text = json_string_value(v);
        if (text && strstr(text, "${"))
            return 1;
    }
    return 0;
}

/* The client's kept header list when it serves this POST (rebuilt when the session or version
 * changed), else NULL: the lines are built for this POST alone. Not kept: the per-request
 * headers of 2026-07-28 and any list with a secret in it. */
static const struct vg_http_headers *kept_headers(struct vg_mcp_http *h,
                                                  const struct vg_mcp_server_conf *s)
{
    struct vg_mcp_http_kept *k = h->kept;
    char *lines[MAX_HEADERS + 4] = {0};
    if (!k || h->method || h->name || headers_hold_secrets(s))
        return NULL;
    if (k->headers && !strcmp(k->session, h->session) && !strcmp(k->version, h->version))
        return k->headers;
    vg_mcp_http_kept_release(k);
    size_t n = vg_mcp_http_headers(s, h, lines, MAX_HEADERS);
    k->headers = vg_http_headers_new((const char *const *)lines, n);
    vg_mcp_http_headers_free(lines, n);
    memcpy(k->session, h->session, sizeof k->session);
    memcpy(k->version, h->version, sizeof k->version);
    return k->headers;
}

/* The transport's message names the URL; with several servers on one host the user knows
 * them by name (trial E26 c). */
static void name_the_server(const struct vg_mcp_server_conf *s, vigil_error *err)
{
    char was[sizeof err->message];
    if (!err || !strncmp(err->message, "MCP server", 10))
        return;
    snprintf(was, sizeof was, "%s", err->message);
    int n = snprintf(err->message, sizeof err->message, "MCP server \"%s\": %s", s->name, was);
    if (n >= (int)sizeof err->message) /* cut: the end of curl's text is the part to lose */
        err->message[sizeof err->message - 1] = '\0';
}

vigil_code vg_mcp_http_post(struct vg_mcp_http *h, const struct vg_mcp_server_conf *s,
                            const char *body, size_t len, int timeout_ms, vg_mcp_http_msg_fn fn,
                            void *user, vigil_error *err)
{
    char *lines[MAX_HEADERS + 4] = {0}, sid[256];
    struct vg_mcp_http_kept *k = h->kept;
    const struct vg_http_headers *kept = kept_headers(h, s);
    size_t nh = kept ? 0 : vg_mcp_http_headers(s, h, lines, MAX_HEADERS);
    if (k && !k->proxy_read)
        k->proxy_read =
            vg_http_proxy_from_env(s->url, k->proxy, sizeof k->proxy, k->noproxy, sizeof k->noproxy)
                ? 1
                : -1;
    struct vg_http_response resp;
    struct post_st st = {.s = s, .resp = &resp, .fn = fn, .user = user, .cut = h->holds_streams};
    vg_http_response_init(&resp);
    vg_buf_init(&st.json, s->max_message);
    struct vg_http_request req = {.method = "POST",
                                  .url = s->url,
                                  .headers = (const char *const *)lines,
                                  .n_headers = nh,
                                  .body = body,
                                  .body_len = len,
                                  .timeout_ms = timeout_ms,
                                  .max_response = s->max_message,
                                  .on_body = on_body,
                                  .user = &st,
                                  .cancel = lingering,
                                  .cancel_user = &st,
                                  .proxy = k && k->proxy_read == 1 ? k->proxy : NULL,
                                  .noproxy = k && k->proxy_read == 1 ? k->noproxy : NULL,
                                  .prepared = kept};
    vigil_code rc = vg_http_perform(&req, &resp, err);
    vg_mcp_http_headers_free(lines, nh);
    h->status = resp.status;
    if (rc && st.done) {             /* what ended the stream after its response does not undo it */
        h->holds_streams |= !st.cut; /* held past LINGER_MS, or ended otherwise than by an end */
        rc = VIGIL_OK;
    }
    if (rc)
        name_the_server(s, err);
    if (!rc && vg_http_response_header(&resp, "mcp-session-id", sid, sizeof sid))
        snprintf(h->session, sizeof h->session, "%s", sid);
    if (!rc && (resp.status < 200 || resp.status >= 300))
        rc = http_failure(&st, resp.status, err);
    else if (!rc && st.json.len && !st.done)
        st.done = fn(user, st.json.data, st.json.len);
    if (!rc && st.sse_ready && !st.done)
        rc = vg_sse_finish(&st.sse, err);
    if (st.sse_ready)
        vg_sse_release(&st.sse);
    vg_buf_release(&st.json);
    vg_http_response_release(&resp);
    return rc;
}
