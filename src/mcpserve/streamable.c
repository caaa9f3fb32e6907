/*
 * streamable.c: the MCP server over Streamable HTTP (the daemon's /mcp; docs/http.md "MCP
 * server mode"). A request is answered with one JSON body, except a tools/call that asks for
 * progress (params._meta.progressToken): an SSE stream scoped to it carries its
 * notifications/progress and then its response (vg_mcpserve_stream_run, on the caller's thread).
 * No event has an id: a stream cannot be resumed (2025-11-25 leaves resumability optional,
 * 2026-07-28 removed it), so no priming event is sent either.
 * A session's notifications/cancelled reaches a tools/call of the same session running on
 * another HTTP request (the table of running requests below): the turn is cancelled and its
 * POST answered 202 with no body, since a cancelled request gets no JSON-RPC answer. An id
 * already running in the session is refused (400, -32600): a cancel names one request only.
 * In 2026-07-28 (no session) a client cancels by closing its connection (client_gone).
 *
 * Revision 2025-11-25: initialize opens a session whose id (32 random bytes from libsodium, in
 * hex; a secret like the token) the answer carries in Mcp-Session-Id; every later request names
 * it. The session keeps only the negotiated version: a request runs on a server made for it
 * with the runtime its HTTP thread holds, so requests of one session may run at once.
 * Revision 2026-07-28 has no session: a request naming that version in params._meta is served
 * alone, its Mcp-Method and Mcp-Name headers checked against the body.
 */
#include "base/common.h"
#include "base/json.h"

#include "mcpserve/mcpserve.h"

#include <pthread.h>
#include <sodium.h>
#include <strings.h>

#define MODERN_VERSION "2026-07-28"
#define MCP_BAD_REQUEST (-32000) /* implementation-defined: what the TypeScript SDK uses */
#define MCP_SESSION_NOT_FOUND (-32001)
#define MCP_HEADER_MISMATCH (-32020)
#define MCP_UNSUPPORTED_VERSION (-32022)
#define SESSION_ID_LEN 64

struct session {
    char id[SESSION_ID_LEN + 1];
    char version[16];
    uint64_t used; /* the table's tick at its last request: the least recent ends first */
};

/* A request of a session being answered now: a notifications/cancelled of the session for it
 * (sent on another HTTP request) marks it, and its tools/call's cancel hook looks here. */
#define MAX_RUNNING 256
struct running {
    char session[SESSION_ID_LEN + 1];
    char id[64]; /* the request id as JSON text */
    int cancelled;
};

struct vg_mcpserve_sessions {
    pthread_mutex_t mu;
    struct session *s;
    int n, max, page_size;
    uint64_t tick;
    struct running running[MAX_RUNNING];
    int n_running;
};

vigil_code vg_mcpserve_sessions_new(int page_size, int max, struct vg_mcpserve_sessions **out,
                                    vigil_error *err)
{
    if (sodium_init() < 0)
        return VG_FAIL(err, VIGIL_ERROR, "libsodium could not start");
    struct vg_mcpserve_sessions *t = vg_calloc(1, sizeof *t);
    if (t)
        t->max = max > 0 ? max : 1024;
    if (!t || !(t->s = vg_calloc((size_t)t->max, sizeof *t->s))) {
        vg_free(t);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting the MCP endpoint");
    }
    t->page_size = page_size;
    pthread_mutex_init(&t->mu, NULL);
    *out = t;
    return VIGIL_OK;
}

void vg_mcpserve_sessions_free(struct vg_mcpserve_sessions *t)
{
    if (!t)
        return;
    sodium_memzero(t->s, (size_t)t->max * sizeof *t->s);
    vg_free(t->s);
    pthread_mutex_destroy(&t->mu);
    vg_free(t);
}

int vg_mcpserve_sessions_count(struct vg_mcpserve_sessions *t)
{
    pthread_mutex_lock(&t->mu);
    int n = t->n;
    pthread_mutex_unlock(&t->mu);
    return n;
}

/* The session named id (under mu), or NULL; ids are secrets: compared in constant time. */
static struct session *find(struct vg_mcpserve_sessions *t, const char *id)
{
    if (!id || strlen(id) != SESSION_ID_LEN)
        return NULL;
    for (int i = 0; i < t->n; i++)
        if (!sodium_memcmp(t->s[i].id, id, SESSION_ID_LEN))
            return &t->s[i];
    return NULL;
}

/* A new session at version; its id into out. The table full, the least recent one ends. */
static void open_session(struct vg_mcpserve_sessions *t, const char *version,
                         char out[SESSION_ID_LEN + 1])
{
    unsigned char raw[SESSION_ID_LEN / 2];
    randombytes_buf(raw, sizeof raw);
    sodium_bin2hex(out, SESSION_ID_LEN + 1, raw, sizeof raw);
    pthread_mutex_lock(&t->mu);
    int slot = t->n < t->max ? t->n++ : 0;
    for (int i = 0; i < t->n && t->n == t->max; i++)
        if (t->s[i].used < t->s[slot].used)
            slot = i;
    memcpy(t->s[slot].id, out, sizeof t->s[slot].id);
    snprintf(t->s[slot].version, sizeof t->s[slot].version, "%s", version);
    t->s[slot].used = ++t->tick;
    pthread_mutex_unlock(&t->mu);
}

/* The session's version into version (mu taken here); 0 when there is no such session. */
static int session_version(struct vg_mcpserve_sessions *t, const char *id, char version[16])
{
    pthread_mutex_lock(&t->mu);
    struct session *s = find(t, id);
    if (s) {
        s->used = ++t->tick;
        memcpy(version, s->version, 16);
    }
    pthread_mutex_unlock(&t->mu);
    return s != NULL;
}

static int end_session(struct vg_mcpserve_sessions *t, const char *id)
{
    pthread_mutex_lock(&t->mu);
    struct session *s = find(t, id);
    if (s) {
        *s = t->s[--t->n];
        sodium_memzero(&t->s[t->n], sizeof t->s[t->n]);
    }
    pthread_mutex_unlock(&t->mu);
    return s != NULL;
}

/* The answer: status and a JSON-RPC message (taken) as the body. */
static void answer(struct vg_mcpserve_http_answer *a, int status, json_t *msg)
{
    char *text = msg ? vg_json_dumps(msg, JSON_COMPACT) : NULL;
    json_decref(msg);
    a->status = status;
    a->body = vg_strdup(text ? text
                             : "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,"
                               "\"message\":\"out of memory\"}}");
    free(text);
}

/* A header's value as a message may quote it: visible ASCII only (JSON text must be UTF-8,
 * and a header may carry any byte), at most 40 characters. */
static const char *quotable(const char *v, char out[48])
{
    size_t n = 0;
    for (; v && v[n] && n < 40; n++)
        out[n] = v[n] > 0x20 && v[n] < 0x7f ? v[n] : '?';
    out[n] = '\0';
    return out;
}

static void refuse(struct vg_mcpserve_http_answer *a, int status, int code, const char *message)
{
    answer(a, status, vg_rpc_error(NULL, code, "%s", message));
}

/* Whether an Accept header takes type ("application/json"), by name or by wildcard. */
static int accepts(const char *accept, const char *type)
{
    char wild[32];
    snprintf(wild, sizeof wild, "%.*s/*", (int)strcspn(type, "/"), type);
    return accept &&
           (strcasestr(accept, type) || strcasestr(accept, wild) || strcasestr(accept, "*/*"));
}

/* The request (session, id as JSON text) among the running ones (under mu); -1 when not. */
static int running_find(struct vg_mcpserve_sessions *t, const char *session, const char *id)
{
    for (int i = 0; i < t->n_running; i++)
        if (!strcmp(t->running[i].session, session) && !strcmp(t->running[i].id, id))
            return i;
    return -1;
}

/* Note request id of session as running (1), or done (0). Past MAX_RUNNING at once, or with an
 * id too long to keep, a request just cannot be cancelled. -1: on, and that id is running in
 * the session already (JSON-RPC: ids of requests in flight are unique), nothing noted. */
static int running_mark(struct vg_mcpserve_sessions *t, const char *session, const json_t *id,
                        int on)
{
    char *key = session ? vg_json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    if (!key || strlen(key) >= sizeof t->running[0].id) {
        free(key);
        return 0;
    }
    pthread_mutex_lock(&t->mu);
    int i = running_find(t, session, key), dup = on && i >= 0;
    if (on && i < 0 && t->n_running < MAX_RUNNING) {
        struct running *r = &t->running[t->n_running++];
        snprintf(r->session, sizeof r->session, "%s", session);
        snprintf(r->id, sizeof r->id, "%s", key);
        r->cancelled = 0;
    } else if (!on && i >= 0) {
        t->running[i] = t->running[--t->n_running];
    }
    pthread_mutex_unlock(&t->mu);
    free(key);
    return dup ? -1 : 0;
}

/* A notifications/cancelled of session: its request, if running, is marked. */
static void running_cancel(struct vg_mcpserve_sessions *t, const char *session,
                           const json_t *request_id)
{
    char *key = request_id ? vg_json_dumps(request_id, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    pthread_mutex_lock(&t->mu);
    int i = key ? running_find(t, session, key) : -1;
    if (i >= 0)
        t->running[i].cancelled = 1;
    pthread_mutex_unlock(&t->mu);
    free(key);
}

/* What a request's cancel hook looks at: the session's cancel marks (2025-11-25), the client's
 * connection (2026-07-28) and the server stopping; io: the stream of a streamed call. */
struct cancel_probe {
    struct vg_mcpserve_sessions *t;
    const char *session;
    int modern;
    int (*gone)(void *user), (*stopping)(void *user);
    void *user;
    const struct vg_mcpserve_stream_io *io;
    const json_t *id;
};

static int http_cancelled(void *user, const json_t *id)
{
    struct cancel_probe *p = user;
    if (p->stopping && p->stopping(p->user))
        return 1;
    if (p->modern)
        return p->gone && p->gone(p->user);
    if (!p->session)
        return 0;
    char *key = vg_json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT);
    pthread_mutex_lock(&p->t->mu);
    int i = key ? running_find(p->t, p->session, key) : -1;
    int yes = i >= 0 && p->t->running[i].cancelled;
    pthread_mutex_unlock(&p->t->mu);
    free(key);
    return yes;
}

/* One JSON-RPC message (taken) as an SSE event on io's stream. */
static void stream_event(const struct vg_mcpserve_stream_io *io, json_t *msg)
{
    char *text = vg_json_dumps(msg, JSON_COMPACT); /* compact: no raw newline in the data line */
    json_decref(msg);
    if (!text)
        return;
    size_t n = strlen(text) + 32;
    char *event = vg_malloc(n);
    if (event) {
        int len = snprintf(event, n, "event: message\ndata: %s\n\n", text);
        io->write(io->user, event, (size_t)len);
    }
    vg_free(event);
    free(text);
}

/* A progress notification of a streamed call; none once it is cancelled (nothing more may be
 * sent for a cancelled request). */
static void stream_notify(void *user, json_t *msg)
{
    struct cancel_probe *p = user;
    if (http_cancelled(p, p->id))
        json_decref(msg);
    else
        stream_event(p->io, msg);
}

/* Answer message text on a server made for it (at version, NULL: fresh) with rt: the reply
 * (owned), or NULL for a call the client cancelled. */
static json_t *run_message(struct vg_mcpserve_sessions *t, vigil_runtime *rt, const char *version,
                           struct cancel_probe *probe, const char *text, size_t len)
{
    struct vg_mcpserve *s = NULL;
    vigil_error err = {0};
    struct vg_mcpserve_hooks hooks = {
        .user = probe, .cancelled = http_cancelled, .notify = probe->io ? stream_notify : NULL};
    struct vg_mcpserve_options o = {
        .rt = rt, .page_size = t->page_size, .session_version = version, .hooks = &hooks};
    if (vg_mcpserve_new(&o, &s, &err))
        return vg_rpc_error((json_t *)probe->id, VG_RPC_INTERNAL_ERROR, "%s", err.message);
    json_t *reply = vg_mcpserve_handle(s, text, len);
    vg_mcpserve_free(s);
    return reply;
}

/* A tools/call answered as a stream, kept for the caller's thread: what serving it needs once
 * the HTTP request is gone. Its id stays marked running in its session until it is answered. */
struct vg_mcpserve_stream {
    struct vg_mcpserve_sessions *t;
    char version[16];                 /* the session's, or "" (2026-07-28) */
    char session[SESSION_ID_LEN + 1]; /* "" in 2026-07-28 */
    int modern, marked;
    json_t *id;
    char *body;
    size_t len;
};

/* Whether a request is answered as a stream: a tools/call with a usable progress token (an
 * unusable one is refused in one JSON body), from a caller that can stream. */
static int wants_stream(const struct vg_mcpserve_http_request *q, const json_t *id,
                        const json_t *params, const char *method)
{
    json_t *token = json_object_get(json_object_get(params, "_meta"), "progressToken");
    return q->can_stream && id && method && !strcmp(method, "tools/call") &&
           (json_is_string(token) || json_is_integer(token)) &&
           accepts(q->accept, "text/event-stream");
}

static struct vg_mcpserve_stream *stream_new(struct vg_mcpserve_sessions *t, const char *version,
                                             const char *session, int modern,
                                             const struct vg_mcpserve_http_request *q, json_t *id)
{
    struct vg_mcpserve_stream *st = vg_calloc(1, sizeof *st);
    if (!st || !(st->body = vg_malloc(q->len + 1))) {
        vg_free(st);
        return NULL;
    }
    memcpy(st->body, q->body, q->len);
    st->body[q->len] = '\0';
    st->len = q->len;
    st->t = t;
    snprintf(st->version, sizeof st->version, "%s", version ? version : "");
    snprintf(st->session, sizeof st->session, "%s", session ? session : "");
    st->modern = modern;
    st->marked = 1;
    st->id = json_incref(id);
    return st;
}

/* The request's id no longer running: a new request may use it once it is answered. */
static void stream_unmark(struct vg_mcpserve_stream *st)
{
    if (st->marked && st->session[0])
        running_mark(st->t, st->session, st->id, 0);
    st->marked = 0;
}

void vg_mcpserve_stream_run(struct vg_mcpserve_stream *st, vigil_runtime *rt,
                            const struct vg_mcpserve_stream_io *io)
{
    struct cancel_probe probe = {.t = st->t,
                                 .session = st->session[0] ? st->session : NULL,
                                 .modern = st->modern,
                                 .gone = io->closed,
                                 .stopping = io->stopping,
                                 .user = io->user,
                                 .io = io,
                                 .id = st->id};
    json_t *reply =
        rt ? run_message(st->t, rt, st->version[0] ? st->version : NULL, &probe, st->body, st->len)
           : vg_rpc_error(st->id, VG_RPC_INTERNAL_ERROR, "no runtime could be opened for the call");
    stream_unmark(st);
    if (reply)
        stream_event(io, reply);
}

void vg_mcpserve_stream_free(struct vg_mcpserve_stream *st)
{
    if (!st)
        return;
    stream_unmark(st);
    json_decref(st->id);
    vg_free(st->body);
    vg_free(st);
}

/* The server for one request on rt: fresh, or in an open session at version (session: its
 * id, whose notifications/cancelled can then reach the request; modern: a 2026-07-28 request,
 * cancelled by the client's closing its connection). NULL: cancelled, or answered as a stream
 * (a->stream). */
static json_t *serve(struct vg_mcpserve_sessions *t, vigil_runtime *rt, const char *version,
                     const char *session, int modern, const struct vg_mcpserve_http_request *q,
                     const struct vg_rpc_message *m, int *status, struct vg_mcpserve_http_answer *a)
{
    struct cancel_probe probe = {.t = t,
                                 .session = session,
                                 .modern = modern,
                                 .gone = q->client_gone,
                                 .stopping = q->stopping,
                                 .user = q->user,
                                 .id = m->id};
    if (running_mark(t, session, m->id, 1) < 0) {
        char *key = vg_json_dumps(m->id, JSON_ENCODE_ANY | JSON_COMPACT);
        json_t *e = vg_rpc_error(m->id, VG_RPC_INVALID_REQUEST,
                                 "Invalid Request: id %.60s is in use by a request of this "
                                 "session still running; give each request in flight an id "
                                 "of its own",
                                 key ? key : "?");
        free(key);
        *status = 400;
        return e;
    }
    if (wants_stream(q, m->id, m->params, m->method)) {
        if (!(a->stream = stream_new(t, version, session, modern, q, m->id))) {
            running_mark(t, session, m->id, 0);
            return vg_rpc_error(m->id, VG_RPC_INTERNAL_ERROR, "out of memory");
        }
        a->status = 200;
        return NULL;
    }
    json_t *reply = run_message(t, rt, version, &probe, q->body, q->len);
    running_mark(t, session, m->id, 0);
    return reply;
}

/* What Mcp-Name must say for a message: the tool's or prompt's name, or the resource's URI. */
static const char *name_of(const struct vg_rpc_message *m)
{
    json_t *p = m->params;
    if (!strcmp(m->method, "resources/read"))
        return json_string_value(json_object_get(p, "uri"));
    if (!strcmp(m->method, "tools/call") || !strcmp(m->method, "prompts/get"))
        return json_string_value(json_object_get(p, "name"));
    return NULL;
}

/* 2026-07-28: the headers say what the body says (MCP-49), then the request is served. */
static void modern(struct vg_mcpserve_sessions *t, vigil_runtime *rt,
                   const struct vg_mcpserve_http_request *q, const struct vg_rpc_message *m,
                   const char *version, struct vg_mcpserve_http_answer *a)
{
    const char *name = m->method ? name_of(m) : NULL;
    const char *bad = NULL, *said = NULL, *body = NULL;
    char q1[48];
    int status = 200;
    if (q->protocol_version && (!version || strcmp(q->protocol_version, version)))
        bad = "MCP-Protocol-Version", said = q->protocol_version, body = version ? version : "";
    else if (m->method && (!q->mcp_method || strcmp(q->mcp_method, m->method)))
        bad = "Mcp-Method", said = q->mcp_method, body = m->method;
    else if (name && (!q->mcp_name || strcmp(q->mcp_name, name)))
        bad = "Mcp-Name", said = q->mcp_name, body = name;
    if (bad) {
        answer(a, 400,
               vg_rpc_error(m->id, MCP_HEADER_MISMATCH,
                            "Header mismatch: %s header value '%.100s' does not match body "
                            "value '%.100s'",
                            bad, quotable(said, q1), body));
        return;
    }
    if (!m->id || !m->method) {
        a->status = 202;
        return;
    }
    json_t *reply = serve(t, rt, NULL, NULL, 1, q, m, &status, a);
    if (!reply) { /* a stream, or cancelled: the client closed its connection, so it reads no
                   * answer */
        if (!a->stream)
            a->status = 202;
        return;
    }
    json_t *e = json_object_get(reply, "error");
    answer(a, json_integer_value(json_object_get(e, "code")) == MCP_UNSUPPORTED_VERSION ? 400 : 200,
           reply);
}

/* 2025-11-25: initialize opens a session; anything else must name an open one. */
static void legacy(struct vg_mcpserve_sessions *t, vigil_runtime *rt,
                   const struct vg_mcpserve_http_request *q, const struct vg_rpc_message *m,
                   struct vg_mcpserve_http_answer *a)
{
    char version[16], q1[48];
    int status = 200;
    if (m->method && m->id && !strcmp(m->method, "initialize")) {
        json_t *reply = serve(t, rt, NULL, NULL, 0, q, m, &status, a);
        const char *v =
            json_string_value(json_object_get(json_object_get(reply, "result"), "protocolVersion"));
        if (v)
            open_session(t, v, a->session);
        answer(a, status, reply);
        return;
    }
    if (!q->session) {
        refuse(a, 400, MCP_BAD_REQUEST,
               "Bad Request: no Mcp-Session-Id header (send initialize first)");
        return;
    }
    if (!session_version(t, q->session, version)) {
        refuse(a, 404, MCP_SESSION_NOT_FOUND,
               "Session not found: it ended or never was (initialize again)");
        return;
    }
    if (q->protocol_version && strcmp(q->protocol_version, version)) {
        answer(a, 400,
               vg_rpc_error(m->id, MCP_BAD_REQUEST,
                            "Bad Request: MCP-Protocol-Version %.40s is not the session's "
                            "(%s)",
                            quotable(q->protocol_version, q1), version));
        return;
    }
    if (m->method && !m->id && !strcmp(m->method, "notifications/cancelled"))
        running_cancel(t, q->session, json_object_get(m->params, "requestId"));
    if (!m->id || !m->method) {
        a->status = 202;
        return;
    }
    json_t *reply = serve(t, rt, version, q->session, 0, q, m, &status, a);
    if (reply)
        answer(a, status, reply);
    else if (!a->stream) /* cancelled by the client: no JSON-RPC answer; HTTP needs its own */
        a->status = 202;
}

static void post(struct vg_mcpserve_sessions *t, vigil_runtime *rt,
                 const struct vg_mcpserve_http_request *q, struct vg_mcpserve_http_answer *a)
{
    struct vg_rpc_message m;
    char q1[48];
    if (!accepts(q->accept, "application/json") || !accepts(q->accept, "text/event-stream")) {
        refuse(a, 406, MCP_BAD_REQUEST,
               "Not Acceptable: the client must accept both application/json and "
               "text/event-stream");
        return;
    }
    if (!q->content_type || strncasecmp(q->content_type, "application/json", 16)) {
        refuse(a, 415, MCP_BAD_REQUEST,
               "Unsupported Media Type: a message is sent as application/json");
        return;
    }
    if (q->protocol_version && !vg_mcpserve_version_supported(q->protocol_version)) {
        answer(a, 400,
               vg_rpc_error(NULL, MCP_BAD_REQUEST,
                            "Bad Request: unsupported protocol version %.40s (vigil "
                            "speaks 2026-07-28, and 2025-11-25 back to 2024-11-05)",
                            quotable(q->protocol_version, q1)));
        return;
    }
    json_t *reply = vg_rpc_read(q->body ? q->body : "", q->len, &m);
    if (reply) {
        answer(a, 400, reply);
        return;
    }
    json_t *version = json_object_get(json_object_get(m.params, "_meta"),
                                      "io.modelcontextprotocol/protocolVersion");
    if (version || (q->protocol_version && !strcmp(q->protocol_version, MODERN_VERSION)))
        modern(t, rt, q, &m, json_string_value(version), a);
    else
        legacy(t, rt, q, &m, a);
    vg_rpc_message_clear(&m);
}

void vg_mcpserve_http(struct vg_mcpserve_sessions *t, vigil_runtime *rt,
                      const struct vg_mcpserve_http_request *q, struct vg_mcpserve_http_answer *a)
{
    memset(a, 0, sizeof *a);
    if (!strcmp(q->method, "POST")) {
        post(t, rt, q, a);
        return;
    }
    if (strcmp(q->method, "DELETE")) { /* GET: no stream of the server's own messages */
        a->allow = "POST, DELETE";
        refuse(a, 405, MCP_BAD_REQUEST,
               "Method Not Allowed: this server sends no messages of its own (POST "
               "requests; DELETE ends a session)");
        return;
    }
    if (!q->session) {
        refuse(a, 400, MCP_BAD_REQUEST, "Bad Request: DELETE needs an Mcp-Session-Id");
        return;
    }
    if (!end_session(t, q->session)) {
        refuse(a, 404, MCP_SESSION_NOT_FOUND, "Session not found");
        return;
    }
    a->status = 204;
}
