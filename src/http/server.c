/*
 * server.c: libmicrohttpd set up for the API, the access rules every request passes before any
 * handler runs, and the dispatch to the route table (routes.c).
 *
 * Threads: libmicrohttpd's pool of one epoll thread per core. Nothing waits on them: a route
 * that may wait long (vg_http_route_waits: a chat, a tool call, a sandbox run, an MCP call) runs on
 * a kept thread of workers.c while its connection is suspended (or on the pool thread that read it
 * when no other client needs that thread: run_here), and the streams (events.c, chat.c)
 * suspend their connection while they have nothing to send. Each handler takes a runtime from the
 * pool for its thread alone (vigil.h: a runtime is used by one thread at a time).
 *
 * Order of the checks (each refusal writes nothing and answers the code table's status):
 * path sanity (400), Host (403: DNS rebinding), Origin (403 unless same-origin or configured;
 * preflights answered here), method override headers (400), the token (401; the query string
 * and cookies are never looked at for it; the web page's own files, exact paths only, need
 * none: web.c), the route (404/405), the body size (413).
 */
#include "base/common.h"
#include "base/json.h"

#include "http/http_int.h"
#include "http/mhd.h"
#include "http/web.h"
#include "mcpserve/mcpserve.h"
#include "os/say.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <sodium.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* One request's state across libmicrohttpd's calls. */
struct pending {
    const struct vg_route *route;
    char params[3][256];
    struct vg_buf body;
    int too_big, refused;
    int offloaded;     /* its handler runs on a worker thread, the connection suspended */
    struct vg_req req; /* the request as its handler sees it */
};

/* ---- runtime pool ---------------------------------------------------------------------------- */

vigil_code vg_http_runtime_open(const char *store_path, vigil_runtime **out, vigil_error *err)
{
    vigil_runtime_options o = {.size = sizeof o, .store_uri = store_path};
    vigil_code rc = vigil_runtime_open(&o, out, err);
    if (!rc && (rc = vigil_daemon_on_runtime(store_path, *out, err))) {
        vigil_runtime_close(*out);
        *out = NULL;
    }
    return rc;
}

vigil_runtime *vg_rt_pool_take(struct vg_rt_pool *p, int wait, vigil_error *err)
{
    vigil_runtime *rt = NULL;
    pthread_mutex_lock(&p->mu);
    while (wait && !p->n_free && p->n_open >= VG_RT_POOL_MAX)
        pthread_cond_wait(&p->cv, &p->mu);
    if (!p->n_free && p->n_open >= VG_RT_POOL_MAX) { /* !wait: busy, err left VIGIL_OK */
        pthread_mutex_unlock(&p->mu);
        return NULL;
    }
    if (p->n_free)
        rt = p->free[--p->n_free];
    else
        p->n_open++; /* opened below, outside the lock */
    pthread_mutex_unlock(&p->mu);
    if (rt)
        return rt;
    if (vg_http_runtime_open(p->store_path, &rt, err) == VIGIL_OK) {
        /* The pool's threads read at once: one read lock held for the process spares each
         * read transaction an fcntl under SQLite's shared-memory mutex, and the other
         * thread's wait on it (docs/internals/PERF.md, session 27). */
        vigil_runtime_read_anchor(rt, 1);
        return rt;
    }
    pthread_mutex_lock(&p->mu);
    p->n_open--;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

void vg_rt_pool_give(struct vg_rt_pool *p, vigil_runtime *rt)
{
    if (!rt)
        return;
    pthread_mutex_lock(&p->mu);
    p->free[p->n_free++] = rt; /* n_free <= n_open <= VG_RT_POOL_MAX */
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* The runtime a thread of libmicrohttpd's pool keeps for the requests it answers itself: no
 * lock per request for it, and its store connection, prepared statements and record memo stay
 * this thread's (two threads taking turns at the shared pool's lock were a futex wait a request
 * at times). */
static _Thread_local struct {
    const struct vg_rt_pool *pool;
    vigil_runtime *rt;
} kept;

static vigil_runtime *thread_runtime(struct vg_rt_pool *p, vigil_error *err)
{
    if (kept.pool == p && kept.rt)
        return kept.rt;
    vigil_runtime *rt = vg_rt_pool_take(p, 0, err);
    if (!rt)
        return NULL;
    pthread_mutex_lock(&p->mu);
    if (p->n_kept < VG_RT_POOL_MAX) {
        p->kept[p->n_kept++] = rt;
        kept.pool = p;
        kept.rt = rt;
        /* A turn on it answers before its upkeep, which on_completed runs once the answer is
         * out (vigil.h; docs/internals/PERF.md, session 40). */
        vigil_runtime_defer_upkeep(rt, 1);
    }
    pthread_mutex_unlock(&p->mu);
    return rt;
}

/* Back to the pool, unless it is the thread's own. */
static void runtime_done(struct vg_rt_pool *p, vigil_runtime *rt)
{
    if (!(kept.pool == p && kept.rt == rt))
        vg_rt_pool_give(p, rt);
}

void vg_http_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
}

void vg_http_deadline(struct timespec *until, int64_t ms)
{
    clock_gettime(CLOCK_MONOTONIC, until);
    int64_t ns = until->tv_nsec + ms * 1000000;
    until->tv_sec += ns / 1000000000;
    until->tv_nsec = ns % 1000000000;
}

/* ---- answers -----------------------------------------------------------------------------------
 */

void vg_req_json(struct vg_req *r, int status, char *owned_json)
{
    vigil_free(r->json);
    r->status = status;
    r->json = owned_json;
}

void vg_req_value(struct vg_req *r, int status, json_t *v)
{
    char *text = v ? vg_json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    vg_req_json(r, status, text ? vg_strdup(text) : NULL); /* NULL: send_req says ENOMEM */
    free(text);
}

static void error_body(struct vg_req *r, int status, const char *code, const char *message)
{
    vg_req_value(r, status,
                 json_pack("{s:s, s:s, s:i}", "code", code, "message", message ? message : "",
                           "status", status));
}

void vg_req_error(struct vg_req *r, vigil_code code, const char *message)
{
    error_body(r, vigil_code_http_status(code), vigil_code_name(code),
               message && *message ? message : vigil_strerror(code));
}

void vg_req_fail(struct vg_req *r, vigil_code code, const vigil_error *err)
{
    if (!err || err->code != code || !vigil_error_from_provider(err)) {
        vg_req_error(r, code, err ? err->message : NULL);
        return;
    }
    /* The model provider failed, not the request nor its token: an upstream status (502; its
     * rate limit 429, its overload 503), never 401 with vigil's challenge (trial F5, F9, F10). */
    int status = vigil_error_http_status(err);
    vg_req_value(r, status,
                 json_pack("{s:s, s:s, s:i, s:s}", "code", vigil_code_name(code), "message",
                           err->message[0] ? err->message : vigil_strerror(code), "status", status,
                           "upstream", "model provider"));
}

void vg_req_answer(struct vg_req *r, vigil_code code, char *owned_json, const vigil_error *err)
{
    if (code) {
        vigil_free(owned_json);
        vg_req_fail(r, code, err);
        return;
    }
    vg_req_json(r, r->status ? r->status : 200,
                owned_json ? owned_json : vg_strdup("{\"ok\":true}"));
}

void vg_req_respond(struct vg_req *r, struct MHD_Response *resp, const char *content_type)
{
    if (!resp) {
        vg_req_error(r, VIGIL_ENOMEM, NULL);
        return;
    }
    MHD_add_response_header(resp, "Content-Type", content_type);
    r->response = resp;
    r->status = 200;
}

const char *vg_req_query(struct vg_req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *vg_req_header(struct vg_req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, key);
}

const char *vg_req_str(struct vg_req *r, const char *key, int *bad)
{
    json_t *v = r->body ? json_object_get(r->body, key) : NULL;
    if (v && !json_is_string(v) && !json_is_null(v))
        *bad = 1;
    return json_string_value(v);
}

int vg_req_limit(struct vg_req *r)
{
    const char *v = vg_req_query(r, "limit");
    char *end = NULL;
    if (!v)
        return 0;
    long n = strtol(v, &end, 10);
    return (*v && !*end && n >= 1 && n <= 1000) ? (int)n : -1;
}

/* Headers every answer carries; CORS ones only for a configured origin. */
static void add_common_headers(struct vg_http *h, struct MHD_Connection *conn,
                               struct MHD_Response *resp)
{
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    if (origin && h->allow_origin && !strcmp(origin, h->allow_origin)) {
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", h->allow_origin);
        MHD_add_response_header(resp, "Vary", "Origin");
    }
}

static void free_json(void *p)
{
    vigil_free(p);
}

static enum MHD_Result send_req(struct vg_req *r)
{
    struct MHD_Response *resp = r->response;
    if (!resp) {
        if (!r->json && r->status != 204)
            error_body(r, 503, "ENOMEM", "out of memory");
        char *text = r->json;
        size_t n = text ? strlen(text) : 0;
        resp = text ? MHD_create_response_from_buffer_with_free_callback(n, text, free_json)
                    : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (!resp)
            return MHD_NO;
        r->json = NULL;
        MHD_add_response_header(resp, "Content-Type", "application/json");
    }
    add_common_headers(r->h, r->conn, resp);
    if (r->status == 401)
        MHD_add_response_header(resp, "WWW-Authenticate", "Bearer realm=\"vigil\"");
    if (r->retry_after_s > 0) {
        char secs[24];
        snprintf(secs, sizeof secs, "%lld", (long long)r->retry_after_s);
        MHD_add_response_header(resp, "Retry-After", secs);
    }
    enum MHD_Result ok = MHD_queue_response(r->conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    r->response = NULL;
    return ok;
}

/* Refuse with a status and code name outside a handler. */
static enum MHD_Result refuse(struct vg_http *h, struct MHD_Connection *conn, int status,
                              const char *code, const char *message, const char *allow)
{
    struct vg_req r = {.h = h, .conn = conn};
    atomic_fetch_add(&h->refused_total, 1);
    error_body(&r, status, code, message);
    if (allow) {
        struct MHD_Response *resp =
            MHD_create_response_from_buffer_with_free_callback(strlen(r.json), r.json, free_json);
        if (!resp)
            return MHD_NO;
        r.json = NULL;
        MHD_add_response_header(resp, "Content-Type", "application/json");
        MHD_add_response_header(resp, "Allow", allow);
        r.response = resp;
    }
    r.status = status;
    return send_req(&r);
}

/* ---- access rules -------------------------------------------------------------------------- */

/* A path of printable ASCII without dot segments, empty segments or backslashes: anything
 * else is refused before routing (libmicrohttpd has already decoded %-escapes). */
static int path_ok(const char *p)
{
    if (p[0] != '/' || strstr(p, "//") || strstr(p, "/./") || strstr(p, "/../") || strchr(p, '\\'))
        return 0;
    size_t n = strlen(p);
    if ((n >= 2 && !strcmp(p + n - 2, "/.")) || (n >= 3 && !strcmp(p + n - 3, "/..")))
        return 0;
    for (const unsigned char *c = (const unsigned char *)p; *c; c++)
        if (*c < 0x21 || *c > 0x7e)
            return 0;
    return 1;
}

/* libmicrohttpd's %-decoding, except that an escaped control byte (%00 above all, which would
 * cut the path short) becomes 0x01, which path_ok refuses. */
static size_t unescape(void *cls, struct MHD_Connection *conn, char *s)
{
    char *w = s;
    VG_UNUSED(cls);
    VG_UNUSED(conn);
    for (const char *r = s; *r; r++) {
        unsigned v = 0;
        if (r[0] == '%' && sscanf(r + 1, "%2x", &v) == 1 && isxdigit((unsigned char)r[1]) &&
            isxdigit((unsigned char)r[2])) {
            *w++ = (char)(v < 0x20 || v == 0x7f ? 0x01 : v);
            r += 2;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}

static int host_ok(struct vg_http *h, const char *host)
{
    char alt[64];
    if (!host)
        return 0;
    if (!strcasecmp(host, h->host))
        return 1;
    snprintf(alt, sizeof alt, "localhost:%d", h->port);
    if (!strcasecmp(host, alt))
        return 1;
    /* Listening on every address (with --allow-remote and its warning): any name reaches us. */
    return h->o.allow_remote && (!strncmp(h->host, "0.0.0.0:", 8) || !strncmp(h->host, "[::]:", 5));
}

static int origin_ok(struct vg_http *h, const char *origin, const char *host)
{
    char same[300];
    if (!origin)
        return 1;
    if (h->allow_origin && !strcmp(origin, h->allow_origin))
        return 1;
    snprintf(same, sizeof same, "http://%s", host ? host : "");
    return !strcasecmp(origin, same);
}

static int token_ok(struct vg_http *h, const char *auth)
{
    if (!auth || strncasecmp(auth, "Bearer ", 7))
        return 0;
    auth += 7;
    while (*auth == ' ')
        auth++;
    if (strlen(auth) != 64)
        return 0;
    return sodium_memcmp(auth, h->token, 64) == 0;
}

/* A CORS preflight: allowed only for the configured origin. */
/* What a refused cross-origin request is told: how its origin would be let in (trial J7). */
#define CROSS_ORIGIN_REFUSED                                                                       \
    "cross-origin requests are not allowed here: start the daemon with "                           \
    "`vigil serve --allow-origin ORIGIN` to allow one origin (docs/http.md)"

static enum MHD_Result preflight(struct vg_http *h, struct MHD_Connection *conn)
{
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    if (!origin || !h->allow_origin || strcmp(origin, h->allow_origin))
        return refuse(h, conn, 403, "EDENIED", CROSS_ORIGIN_REFUSED, NULL);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", h->allow_origin);
    MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, DELETE");
    MHD_add_response_header(resp, "Access-Control-Allow-Headers",
                            "Authorization, Content-Type, Last-Event-ID");
    MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
    MHD_add_response_header(resp, "Vary", "Origin");
    enum MHD_Result ok = MHD_queue_response(conn, 204, resp);
    MHD_destroy_response(resp);
    return ok;
}

static int query_has_token(struct MHD_Connection *conn)
{
    static const char *const names[] = {"token", "access_token",  "api_key", "apikey",
                                        "auth",  "authorization", "bearer"};
    for (size_t i = 0; i < VG_ARRAY_LEN(names); i++)
        if (MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, names[i]))
            return 1;
    return 0;
}

/* The checks of a request's first call; MHD_YES with p->refused set once refused. */
static enum MHD_Result admit(struct vg_http *h, struct MHD_Connection *conn, const char *url,
                             const char *method, struct pending *p)
{
    const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    const char *len = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    char allow[64] = "";
    p->refused = 1;
    if (!path_ok(url))
        return refuse(h, conn, 400, "EINVAL", "malformed path", NULL);
    if (!host_ok(h, host))
        return refuse(h, conn, 403, "EDENIED",
                      "the Host header does not name this server (DNS rebinding guard)", NULL);
    if (!strcmp(method, "OPTIONS"))
        return preflight(h, conn);
    if (!origin_ok(h, origin, host))
        return refuse(h, conn, 403, "EDENIED", CROSS_ORIGIN_REFUSED, NULL);
    if (MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-HTTP-Method-Override") ||
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-HTTP-Method") ||
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Method-Override"))
        return refuse(h, conn, 400, "EINVAL", "method override headers are not accepted", NULL);
    if (query_has_token(conn))
        return refuse(h, conn, 401, "EAUTH",
                      "the API token goes in the Authorization header, never in the URL", NULL);
    const struct vg_web_asset *asset = vg_web_find(method, url);
    if (asset) { /* the page shell only: its data comes through authenticated /v1 calls */
        atomic_fetch_add(&h->requests_total, 1);
        return (enum MHD_Result)vg_web_send(conn, asset);
    }
    if (!token_ok(h, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization")))
        return refuse(h, conn, 401, "EAUTH",
                      "missing or wrong API token: send Authorization: Bearer TOKEN "
                      "(`vigil token` prints it)",
                      NULL);
    int found = vg_http_route_find(method, url, &p->route, p->params);
    if (found == 404)
        return refuse(h, conn, 404, "ENOTFOUND", "no such route", NULL);
    if (found == 405) {
        for (size_t i = 0; i < vg_http_n_routes; i++) {
            char tmp[3][256];
            const struct vg_route *r;
            if (vg_http_route_find(vg_http_routes[i].method, url, &r, tmp) == 0 &&
                !strstr(allow, r->method))
                snprintf(allow + strlen(allow), sizeof allow - strlen(allow), "%s%s",
                         *allow ? ", " : "", r->method);
        }
        return refuse(h, conn, 405, "EUNSUPPORTED", "method not allowed on this route", allow);
    }
    if (len && strtoull(len, NULL, 10) > h->o.max_body)
        return refuse(h, conn, 413, "ETOOBIG", "request body is over the size limit", NULL);
    p->refused = 0;
    return MHD_YES;
}

/* ---- dispatch ----------------------------------------------------------------------------------
 */

/* Does the body hold a member its route does not take? 1 with err naming it and the members
 * the route takes (a typo such as "promt" would otherwise be ignored: trial C7 of session 30). */
static int unknown_member(const struct vg_route *route, json_t *body, vigil_error *err)
{
    const char *key;
    json_t *v;
    if (!route->members || !body)
        return 0;
    json_object_foreach (body, key, v) {
        size_t n = strlen(key);
        const char *m = route->members;
        int known = 0;
        while (!known && *m) {
            size_t len = strcspn(m, ",");
            known = len == n && !strncmp(m, key, n);
            m += len + (m[len] == ',');
        }
        if (!known) {
            VG_FAIL(err, VIGIL_EINVAL, "unknown member \"%.64s\" in the body: this route takes %s",
                    key, route->members);
            return 1;
        }
    }
    return 0;
}

/* Whether the request says its body is YAML (a manifest as manifests.md writes it). */
static int body_is_yaml(struct MHD_Connection *conn)
{
    static const char *const yaml[] = {"application/yaml", "application/x-yaml", "text/yaml",
                                       "text/x-yaml"};
    const char *ct =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    size_t n = ct ? strcspn(ct, "; ") : 0;
    for (size_t i = 0; ct && i < VG_ARRAY_LEN(yaml); i++)
        if (strlen(yaml[i]) == n && !strncasecmp(ct, yaml[i], n))
            return 1;
    return 0;
}

/* The body as JSON; a route that also takes YAML says so when the text is neither (trial J7: a
 * manifest pasted from manifests.md was refused as "not JSON" with no word of the way). */
static vigil_code req_body(struct vg_http *h, struct MHD_Connection *conn, struct pending *p,
                           struct vg_req *r, vigil_error *err)
{
    if (!p->route->body || !p->body.len || (p->route->body == 2 && body_is_yaml(conn)))
        return VIGIL_OK;
    vigil_code rc = vg_http_body_parse(p->body.data, p->body.len, h->o.max_body, &r->body, err);
    if (rc == VIGIL_EPARSE && p->route->body == 2) {
        char why[161];
        size_t n = strnlen(err->message, sizeof why - 1);
        memcpy(why, err->message, n);
        why[n] = '\0';
        VG_FAIL(err, VIGIL_EPARSE,
                "%s; send it as JSON, or as YAML with Content-Type: application/yaml", why);
    }
    return rc;
}

/* The request as its handler sees it, into r; 0, or 1 when refused already (the answer in r). */
static int req_prepare(struct vg_http *h, struct MHD_Connection *conn, const char *url,
                       const char *method, struct pending *p, struct vg_req *r)
{
    vigil_error err = {0};
    *r = (struct vg_req){.h = h, .conn = conn, .method = method, .path = url};
    for (int i = 0; i < 3; i++) {
        memcpy(r->param_buf[i], p->params[i], sizeof r->param_buf[i]);
        r->params[i] = r->param_buf[i][0] ? r->param_buf[i] : NULL;
    }
    atomic_fetch_add(&h->requests_total, 1);
    if (p->too_big) {
        atomic_fetch_add(&h->refused_total, 1);
        error_body(r, 413, "ETOOBIG", "request body is over the size limit");
        return 1;
    }
    if (req_body(h, conn, p, r, &err)) {
        atomic_fetch_add(&h->refused_total, 1);
        vg_req_fail(r, err.code, &err);
        return 1;
    }
    if (unknown_member(p->route, r->body, &err)) {
        atomic_fetch_add(&h->refused_total, 1);
        json_decref(r->body);
        r->body = NULL;
        vg_req_fail(r, err.code, &err);
        return 1;
    }
    r->status = p->route->ok_status;
    r->route = p->route;
    r->raw = p->body.data;
    r->raw_len = p->body.len;
    return 0;
}

/* Run the handler with a runtime of the pool (r->rt when already taken); the answer is left
 * in r. */
static void req_handle(struct vg_req *r)
{
    vigil_error err = {0};
    if (!r->rt && !r->no_runtime && !(r->rt = vg_rt_pool_take(&r->h->pool, 1, &err))) {
        json_decref(r->body);
        r->body = NULL;
        vg_req_fail(r, err.code, &err);
        return;
    }
    /* A GET's reads share one snapshot: one read transaction of the store instead of one per
     * read, each taking SQLite's shared-memory lock (two fcntl calls, and a mutex the pool's
     * threads contend for: docs/internals/PERF.md, session 23). */
    int reads = !strcmp(r->method, "GET");
    if (reads)
        vigil_runtime_read_batch(r->rt, 1);
    if (!vg_http_agent_by_name(r))
        r->route->fn(r);
    if (reads)
        vigil_runtime_read_batch(r->rt, 0);
    runtime_done(&r->h->pool, r->rt);
    r->rt = NULL;
    json_decref(r->body);
    r->body = NULL;
    if (!r->json && !r->response && r->status != 204)
        vg_req_json(r, r->status, vg_strdup("{\"ok\":true}"));
}

static void workers_add(struct vg_http *h, int n)
{
    pthread_mutex_lock(&h->pool.mu);
    h->chat_threads += n;
    pthread_cond_broadcast(&h->pool.cv); /* vg_http_stop waits for them */
    pthread_mutex_unlock(&h->pool.mu);
}

/* An offloaded handler's thread: the answer is left in p->req. */
static void route_worker(void *arg)
{
    struct pending *p = arg;
    req_handle(&p->req);
}

/* Then (the worker counted idle, workers.c): the connection resumes and libmicrohttpd calls
 * on_request again to send the answer. p is not touched after the resume. */
static void route_answer(void *arg)
{
    struct pending *p = arg;
    struct vg_http *h = p->req.h;
    MHD_resume_connection(p->req.conn);
    workers_add(h, -1);
}

/* Handlers that may wait for a whole turn (a chat, an MCP tool call): they run on a thread of
 * their own while the connection is suspended, so no thread of libmicrohttpd's small pool
 * waits for them. */

/* An MCP message that is no request (a notification such as notifications/cancelled, or the
 * client's response) is answered 202 by src/mcpserve without touching a runtime. It is served
 * at once: queued behind the turns that hold every runtime, a cancel would wait for the very
 * call it cancels. */
static int mcp_needs_no_runtime(const struct vg_req *r)
{
    if (r->route->fn != vg_http_mcp_route || strcmp(r->route->method, "POST"))
        return 0;
    json_t *m = json_loadb(r->raw, r->raw_len, 0, NULL);
    int no = json_is_object(m) &&
             (!json_object_get(m, "id") || !json_is_string(json_object_get(m, "method")));
    json_decref(m);
    return no;
}

/* A long route (a chat turn, a tool call, an MCP call) runs on the thread of libmicrohttpd's pool
 * that read it, instead of going to a worker and back, when its connection is the one that thread
 * holds and another thread of the pool runs no such route: no other client waits on this thread
 * while it runs, and new connections go to the threads still polling. The two hand-offs (a
 * worker's wake-up, then this thread's by the resume) were most of what HTTP added to a chat
 * turn (docs/internals/PERF.md, session 34). 1 when it ran here, its answer in r. */
static int run_here(struct vg_http *h, struct vg_req *r)
{
    atomic_int *conns = vg_http_thread_conns(h);
    vigil_error err = {0};
    if (!conns || atomic_load(conns) != 1)
        return 0;
    if (atomic_fetch_add(&h->routes_here, 1) + 1 >= (int)h->pool_threads ||
        !(r->rt = thread_runtime(&h->pool, &err))) {
        atomic_fetch_sub(&h->routes_here, 1);
        return 0;
    }
    /* libmicrohttpd's idle timeout does not cut it: the answer goes out as the route returns,
     * however long it took (tests/http/test_http_api.c, a_long_call_alone_on_its_thread...). */
    req_handle(r);
    atomic_fetch_sub(&h->routes_here, 1);
    return 1;
}

static enum MHD_Result run_route(struct vg_http *h, struct MHD_Connection *conn, const char *url,
                                 const char *method, struct pending *p)
{
    struct vg_req *r = &p->req;
    vigil_error err = {0};
    if (req_prepare(h, conn, url, method, p, r))
        return send_req(r);
    if (mcp_needs_no_runtime(r)) {
        r->no_runtime = 1;
        req_handle(r);
        return send_req(r);
    }
    /* A thread of libmicrohttpd's pool never waits for a runtime: when every runtime is busy
     * (long turns), the request waits on a thread of its own like a chat. */
    if (!vg_http_route_waits(p->route) && !(r->rt = thread_runtime(&h->pool, &err)) && err.code) {
        json_decref(r->body);
        r->body = NULL;
        vg_req_fail(r, err.code, &err);
        return send_req(r);
    }
    if (!r->rt && run_here(h, r))
        return send_req(r);
    if (!r->rt) {
        workers_add(h, 1);
        p->offloaded = 1;
        MHD_suspend_connection(conn);
        if (vg_http_work(&h->workers, route_worker, route_answer, p) == 0)
            return MHD_YES;
        MHD_resume_connection(conn); /* no thread: the handler runs here */
        p->offloaded = 0;
        workers_add(h, -1);
        /* Unless the server is stopping (its workers gone): no whole turn on this thread
         * then, which libmicrohttpd's stop would wait for. */
        if (atomic_load(&h->stopping)) {
            json_decref(r->body);
            r->body = NULL;
            vg_req_error(r, VIGIL_EBUSY, "the server is stopping");
            return send_req(r);
        }
    }
    req_handle(r);
    return send_req(r);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct vg_http *h = cls;
    struct pending *p = *con_cls;
    VG_UNUSED(version);
    if (p && p->offloaded) { /* resumed: the worker's answer goes out */
        p->offloaded = 0;
        return send_req(&p->req);
    }
    if (!p) {
        if (!(p = vg_calloc(1, sizeof *p)))
            return MHD_NO;
        vg_buf_init(&p->body, h->o.max_body + 1);
        *con_cls = p;
        vg_http_watch_request(h, conn, 1);
        return admit(h, conn, url, method, p);
    }
    if (p->refused) {
        *upload_data_size = 0; /* the refusal is queued: drop what the client still sends */
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (p->body.len + *upload_data_size > h->o.max_body)
            p->too_big = 1;
        else
            vg_buf_append(&p->body, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    p->refused = 1; /* answered: later calls have nothing to do */
    return run_route(h, conn, url, method, p);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct pending *p = *con_cls;
    VG_UNUSED(toe);
    vg_http_watch_request(cls, conn, 0); /* the next request's headers are timed from now */
    if (p) {
        vigil_free(p->req.json); /* an answer never sent (the client went away) */
        if (p->req.response)
            MHD_destroy_response(p->req.response);
        vg_buf_release(&p->body);
        vg_free(p);
        *con_cls = NULL;
    }
    /* The answer is out: a turn's upkeep left on the thread's runtime runs now, off the turn's
     * time, and what the request (a whole chat turn's thousands of blocks) freed is settled
     * now, warm, not at the start of the next request after an idle wait (alloc.h). */
    struct vg_http *h = cls;
    if (kept.pool == &h->pool && kept.rt)
        vigil_runtime_upkeep(kept.rt);
    vg_alloc_settle_thread();
}

/* ---- start and stop ---------------------------------------------------------------------- */

/* "HOST:PORT", "HOST" or "[V6]:PORT" into a socket address; the Host-header form in hostform. */
static vigil_code parse_listen(char *hostform, size_t hostform_size, const char *listen,
                               struct sockaddr_storage *ss, int *loopback, vigil_error *err)
{
    char host[200];
    long port = VG_HTTP_DEFAULT_PORT;
    const char *colon = NULL;
    if (listen[0] == '[') {
        const char *end = strchr(listen, ']');
        if (!end || end - listen - 1 >= (long)sizeof host)
            return VG_FAIL(err, VIGIL_EINVAL, "--listen \"%s\": unclosed [", listen);
        snprintf(host, sizeof host, "%.*s", (int)(end - listen - 1), listen + 1);
        colon = end[1] == ':' ? end + 1 : NULL;
        if (end[1] && !colon)
            return VG_FAIL(err, VIGIL_EINVAL, "--listen \"%s\": expected [ADDRESS]:PORT", listen);
    } else {
        colon = strrchr(listen, ':');
        size_t n = colon ? (size_t)(colon - listen) : strlen(listen);
        if (n >= sizeof host)
            return VG_FAIL(err, VIGIL_EINVAL, "--listen \"%s\": address too long", listen);
        snprintf(host, sizeof host, "%.*s", (int)n, listen);
    }
    if (colon) {
        char *end = NULL;
        port = strtol(colon + 1, &end, 10);
        if (!colon[1] || *end || port < 0 || port > 65535)
            return VG_FAIL(err, VIGIL_EINVAL,
                           "--listen \"%s\": the port is a number from 0 to "
                           "65535",
                           listen);
    }
    if (!strcmp(host, "localhost"))
        snprintf(host, sizeof host, "127.0.0.1");
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        *loopback = (ntohl(a4->sin_addr.s_addr) >> 24) == 127;
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        *loopback = IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr);
    } else {
        return VG_FAIL(err, VIGIL_EINVAL,
                       "--listen \"%s\": give a numeric address (127.0.0.1, [::1]) or localhost",
                       listen);
    }
    snprintf(hostform, hostform_size, ss->ss_family == AF_INET6 ? "[%s]" : "%s", host);
    return VIGIL_OK;
}

/* The address parsed, and refused when it is remote without allow_remote. */
static vigil_code listen_address(char *hostform, size_t hostform_size, const char *listen,
                                 int allow_remote, struct sockaddr_storage *ss, int *loopback,
                                 vigil_error *err)
{
    vigil_code rc =
        parse_listen(hostform, hostform_size, listen ? listen : "127.0.0.1", ss, loopback, err);
    if (!rc && !*loopback && !allow_remote)
        rc = VG_FAIL(err, VIGIL_EINVAL,
                     "--listen %s is not a loopback address: add "
                     "--allow-remote to serve it",
                     listen);
    return rc;
}

vigil_code vg_http_check_listen(const char *listen, int allow_remote, vigil_error *err)
{
    char hostform[256];
    struct sockaddr_storage ss;
    int loopback = 0;
    vigil_code rc =
        listen_address(hostform, sizeof hostform, listen, allow_remote, &ss, &loopback, err);
    if (rc)
        return rc;
    /* A trial bind: an address this machine does not have fails now, not after the daemon
     * took the store. In use is left to the start, where it may be this store's own daemon. */
    int fd = socket(ss.ss_family, SOCK_STREAM, 0);
    if (fd < 0)
        return VIGIL_OK;
    socklen_t len =
        ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    int bound = bind(fd, (struct sockaddr *)&ss, len), bind_errno = errno;
    close(fd);
    if (bound && bind_errno != EADDRINUSE)
        return VG_FAIL(err, VIGIL_EINVAL, "--listen %s: cannot listen there: %s%s",
                       listen ? listen : "127.0.0.1", strerror(bind_errno),
                       bind_errno == EADDRNOTAVAIL ? " (not an address of this machine)" : "");
    return VIGIL_OK;
}

static void set_defaults(struct vg_http_options *o)
{
    if (o->max_connections <= 0)
        o->max_connections = 256;
    if (o->timeout_s <= 0)
        o->timeout_s = 30;
    if (!o->max_body)
        o->max_body = 1 << 20;
    if (o->events_poll_ms <= 0)
        o->events_poll_ms = 250;
    if (o->heartbeat_ms <= 0)
        o->heartbeat_ms = 10000;
    if (o->heartbeat_ms > o->timeout_s * 500)
        o->heartbeat_ms = o->timeout_s * 500;
}

/* A client that leaves while its answer is being sent (an event stream closed, a browser tab
 * shut) is routine: libmicrohttpd reports it as a failed send, which is no news to an operator. */
static int peer_left(const char *line)
{
    return strstr(line, "no longer available for sending") ||
           strstr(line, "forcibly closed by remote peer");
}

/* libmicrohttpd's own messages, marked as the daemon's. While it starts they are dropped: a
 * failure to listen is reported once by start_mhd, naming the address asked for (libmicrohttpd
 * would name port 0, the port of the socket address it is not given). */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    struct vg_http *h = cls;
    if (!atomic_load(&h->listening))
        return;
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    if (peer_left(line))
        return;
    vg_say("vigil serve: http: %s\n", line);
}

/* Each connection's memory pool in libmicrohttpd: the request's headers and the response's
 * header and chunk buffers. With the thread's stack it is most of what an idle event stream
 * costs (the pool's pages are all touched), so it is kept to what a request of this API needs:
 * its headers (the token, an MCP session id, a browser's usual ones) take well under the
 * about 7 KiB it leaves for them; more is refused 431. */
#define VG_HTTP_CONN_MEMORY 8192

static vigil_code start_mhd(struct vg_http *h, struct sockaddr_storage *ss, vigil_error *err)
{
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned threads = (unsigned)(cores < 1 ? 1 : cores > 16 ? 16 : cores);
    h->pool_threads = threads;
    if (ss->ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    /* The logger first: libmicrohttpd warns about options it reads before it. */
    h->mhd = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)ss, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)h->o.max_connections * threads, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)h->o.max_connections, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)h->o.timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)VG_HTTP_CONN_MEMORY,
        MHD_OPTION_UNESCAPE_CALLBACK, unescape, h, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
        MHD_OPTION_NOTIFY_CONNECTION, vg_http_watch_notify, h, MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_THREAD_STACK_SIZE, (size_t)(1 << 20), MHD_OPTION_END);
    if (!h->mhd)
        return VG_FAIL(err, VIGIL_EBUSY,
                       "could not listen on %s (address in use or not "
                       "available)",
                       h->o.listen ? h->o.listen : h->host);
    atomic_store(&h->listening, 1);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : 0;
    char *colon = h->host[0] == '[' ? strchr(h->host, ']') + 1 : h->host + strlen(h->host);
    snprintf(colon, sizeof h->host - (size_t)(colon - h->host), ":%d", h->port);
    snprintf(h->self_origin, sizeof h->self_origin, "http://%s", h->host);
    return VIGIL_OK;
}

vigil_code vg_http_start(const struct vg_http_options *o, struct vg_http **out, vigil_error *err)
{
    struct sockaddr_storage ss;
    int loopback = 0;
    vigil_code rc;
    if (!o->store_path || !o->token || strlen(o->token) != 64)
        return VG_FAIL(err, VIGIL_EINVAL, "the HTTP API needs a store and a 64-character token");
    rc = vg_mhd_load(err); /* before anything here can reach libmicrohttpd (mhd.h) */
    if (rc)
        return rc;
    if (sodium_init() < 0)
        return VG_FAIL(err, VIGIL_ERROR, "libsodium could not start");
    struct vg_http *h = vg_calloc(1, sizeof *h);
    if (!h)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting the HTTP API");
    h->o = *o;
    set_defaults(&h->o);
    pthread_mutex_init(&h->pool.mu, NULL);
    vg_http_cond_init(&h->pool.cv);
    vg_http_workers_init(&h->workers);
    pthread_mutex_init(&h->watch_mu, NULL);
    vg_http_cond_init(&h->watch_cv);
    h->token = vg_strdup(o->token);
    h->store_path = vg_strdup(o->store_path);
    h->pool.store_path = h->store_path;
    h->allow_origin = o->allow_origin ? vg_strdup(o->allow_origin) : NULL;
    if ((rc = listen_address(h->host, sizeof h->host, o->listen, o->allow_remote, &ss, &loopback,
                             err)))
        goto fail;
    if ((rc = vg_events_start(h, &h->events, err)) ||
        (rc = vg_mcpserve_sessions_new(0, 0, &h->mcp, err)) || (rc = start_mhd(h, &ss, err)) ||
        (rc = vg_http_watch_start(h, err)))
        goto fail;
    if (!loopback)
        vg_say("vigil serve: warning: the HTTP API listens on %s, beyond this machine: "
               "anyone who can reach it and holds the token controls every agent; put TLS in "
               "front of it\n",
               h->host);
    vg_say("vigil serve: HTTP API on http://%s\n", h->host);
    *out = h;
    return VIGIL_OK;
fail:
    vg_http_stop(h);
    return rc;
}

void vg_http_stop(struct vg_http *h)
{
    if (!h)
        return;
    atomic_store(&h->stopping, 1);
    vg_events_stop(h->events); /* first: the streams end (resumed) */
    /* Streamed chat turns (canceled by now) and offloaded handlers resume their connections:
     * before libmicrohttpd stops and frees them. */
    pthread_mutex_lock(&h->pool.mu);
    while (h->chat_threads > 0)
        pthread_cond_wait(&h->pool.cv, &h->pool.mu);
    pthread_mutex_unlock(&h->pool.mu);
    vg_http_workers_stop(&h->workers);
    vg_http_watch_stop(h); /* before libmicrohttpd closes the sockets it watches */
    if (h->mhd)
        MHD_stop_daemon(h->mhd);
    vg_http_workers_free(&h->workers); /* no request offloads any more */
    vg_events_free(h->events);
    vg_mcpserve_sessions_free(h->mcp);
    for (int i = 0; i < h->pool.n_free; i++)
        vigil_runtime_close(h->pool.free[i]);
    for (int i = 0; i < h->pool.n_kept; i++) /* their threads ended with libmicrohttpd */
        vigil_runtime_close(h->pool.kept[i]);
    pthread_mutex_destroy(&h->pool.mu);
    pthread_cond_destroy(&h->pool.cv);
    pthread_mutex_destroy(&h->watch_mu);
    pthread_cond_destroy(&h->watch_cv);
    if (h->token)
        sodium_memzero(h->token, strlen(h->token));
    vg_free(h->token);
    vg_free(h->store_path);
    vg_free(h->allow_origin);
    vg_free(h);
}
