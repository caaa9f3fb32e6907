/*
 * server.c: the MCP server's lifecycle (revision 2025-11-25: initialize with version
 * negotiation, notifications/initialized, ping), list pagination, dispatch, and the stdio
 * transport. The catalogue of tools and resources is agents.c.
 */
#include "base/common.h"
#include "base/json.h"

#include "mcpserve/mcpserve.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>

#define LATEST_VERSION "2025-11-25"
#define MODERN_VERSION "2026-07-28"
#define VG_MCP_UNSUPPORTED_VERSION (-32022)
#define INSTRUCTIONS                                                                               \
    "Each tool talks to, wakes, or reads the report of one vigil agent (a persistent AI agent "    \
    "with its own memory). Resources are the agents' reports and memory blocks, read-only."

static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05",
                                       NULL};

struct vg_mcpserve {
    vigil_runtime *rt;
    const struct vg_mcpserve_hooks *hooks;
    int page_size;
    int initialized; /* initialize answered */
    char version[16];
};

vigil_code vg_mcpserve_new(const struct vg_mcpserve_options *o, struct vg_mcpserve **out,
                           vigil_error *err)
{
    struct vg_mcpserve *s = vg_calloc(1, sizeof *s);
    if (!s)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting the MCP server");
    s->rt = o->rt;
    s->hooks = o->hooks;
    s->page_size = o->page_size > 0 ? o->page_size : 50;
    if (o->session_version) {
        snprintf(s->version, sizeof s->version, "%s", o->session_version);
        s->initialized = 1;
    }
    *out = s;
    return VIGIL_OK;
}

int vg_mcpserve_version_supported(const char *v)
{
    for (size_t i = 0; v && versions[i]; i++)
        if (!strcmp(v, versions[i]))
            return 1;
    return v && !strcmp(v, MODERN_VERSION);
}

void vg_mcpserve_free(struct vg_mcpserve *s)
{
    vg_free(s);
}

static json_t *capabilities(void);
static json_t *server_info(void);

static json_t *initialize(struct vg_mcpserve *s, const struct vg_rpc_message *m)
{
    const char *asked = json_string_value(json_object_get(m->params, "protocolVersion"));
    if (!asked || !json_is_object(json_object_get(m->params, "capabilities")))
        return vg_rpc_error(m->id, VG_RPC_INVALID_PARAMS,
                            "initialize needs protocolVersion and capabilities");
    /* Negotiation: echo a version we speak, else offer our latest (the client decides). */
    const char *chosen = LATEST_VERSION;
    for (size_t i = 0; versions[i]; i++)
        if (!strcmp(asked, versions[i]))
            chosen = versions[i];
    snprintf(s->version, sizeof s->version, "%s", chosen);
    s->initialized = 1;
    return vg_rpc_result(m->id, json_pack("{s:s, s:o, s:o, s:s}", "protocolVersion", chosen,
                                          "capabilities", capabilities(), "serverInfo",
                                          server_info(), "instructions", INSTRUCTIONS));
}

/* One page of items: the cursor is the decimal offset of the page's first item. */
static json_t *page(const struct vg_mcpserve *s, const struct vg_rpc_message *m, json_t *all,
                    const char *key)
{
    const char *cursor = json_string_value(json_object_get(m->params, "cursor"));
    json_t *c = json_object_get(m->params, "cursor");
    size_t from = 0, n = json_array_size(all);
    if (c && !cursor)
        return vg_rpc_error(m->id, VG_RPC_INVALID_PARAMS, "cursor must be a string");
    if (cursor) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(cursor, &end, 10);
        if (!*cursor || *end || errno || *cursor < '0' || *cursor > '9' || v == 0 || v >= n)
            return vg_rpc_error(m->id, VG_RPC_INVALID_PARAMS, "invalid cursor \"%.64s\"", cursor);
        from = (size_t)v;
    }
    json_t *items = json_array();
    for (size_t i = from; i < n && i < from + (size_t)s->page_size; i++)
        json_array_append(items, json_array_get(all, i));
    json_t *result = json_pack("{s:o}", key, items);
    if (from + (size_t)s->page_size < n) {
        char next[32];
        snprintf(next, sizeof next, "%zu", from + (size_t)s->page_size);
        json_object_set_new(result, "nextCursor", json_string(next));
    }
    return vg_rpc_result(m->id, result);
}

static json_t *list(struct vg_mcpserve *s, const struct vg_rpc_message *m, int tools)
{
    vigil_error err = {0};
    json_t *all = tools ? vg_mcpserve_tools(s->rt, &err) : vg_mcpserve_resources(s->rt, &err);
    if (!all)
        return vg_rpc_error(m->id, VG_RPC_INTERNAL_ERROR, "%s", err.message);
    json_t *r = page(s, m, all, tools ? "tools" : "resources");
    json_decref(all);
    return r;
}

static json_t *call(struct vg_mcpserve *s, const struct vg_rpc_message *m)
{
    const char *name = json_string_value(json_object_get(m->params, "name"));
    json_t *args = json_object_get(m->params, "arguments");
    if (!name || (args && !json_is_object(args)))
        return vg_rpc_error(m->id, VG_RPC_INVALID_PARAMS,
                            "tools/call needs a name and an arguments object");
    int code = 0;
    vigil_error err = {0};
    struct vg_mcpserve_call_ctx ctx = {
        .hooks = s->hooks,
        .id = m->id,
        .progress_token = json_object_get(json_object_get(m->params, "_meta"), "progressToken")};
    if (ctx.progress_token && !json_is_string(ctx.progress_token) &&
        !json_is_integer(ctx.progress_token))
        return vg_rpc_error(m->id, VG_RPC_INVALID_PARAMS,
                            "_meta.progressToken must be a string or an integer");
    json_t *r = vg_mcpserve_call(s->rt, name, args, &ctx, &code, &err);
    if (vg_mcpserve_cancelled(&ctx)) { /* the client gave up on it: no answer */
        json_decref(r);
        return NULL;
    }
    return r ? vg_rpc_result(m->id, r) : vg_rpc_error(m->id, code, "%s", err.message);
}

void vg_mcpserve_progress(struct vg_mcpserve_call_ctx *ctx, const char *message)
{
    if (!ctx || !ctx->progress_token || !ctx->hooks || !ctx->hooks->notify)
        return;
    ctx->progress += 1;
    ctx->hooks->notify(ctx->hooks->user, json_pack("{s:s, s:s, s:{s:O, s:f, s:s}}", "jsonrpc",
                                                   "2.0", "method", "notifications/progress",
                                                   "params", "progressToken", ctx->progress_token,
                                                   "progress", ctx->progress, "message", message));
}

int vg_mcpserve_cancelled(const struct vg_mcpserve_call_ctx *ctx)
{
    return ctx && ctx->id && ctx->hooks && ctx->hooks->cancelled &&
           ctx->hooks->cancelled(ctx->hooks->user, ctx->id);
}

static json_t *read_resource(struct vg_mcpserve *s, const struct vg_rpc_message *m)
{
    const char *uri = json_string_value(json_object_get(m->params, "uri"));
    if (!uri)
        return vg_rpc_error(m->id, VG_RPC_INVALID_PARAMS, "resources/read needs a uri");
    int code = 0;
    vigil_error err = {0};
    json_t *r = vg_mcpserve_read_resource(s->rt, uri, &code, &err);
    if (!r && code == VG_MCP_RESOURCE_NOT_FOUND)
        return json_pack("{s:s, s:O, s:{s:i, s:s, s:{s:s}}}", "jsonrpc", "2.0", "id", m->id,
                         "error", "code", code, "message", err.message, "data", "uri", uri);
    return r ? vg_rpc_result(m->id, r) : vg_rpc_error(m->id, code, "%s", err.message);
}

/* The methods both eras share; NULL with *known 0 when meth is none of them (a known one
 * answers NULL only for a call the client cancelled: no answer). */
static json_t *shared_method(struct vg_mcpserve *s, const struct vg_rpc_message *m, int *known)
{
    const char *meth = m->method;
    *known = 1;
    if (!strcmp(meth, "tools/list"))
        return list(s, m, 1);
    if (!strcmp(meth, "resources/list"))
        return list(s, m, 0);
    if (!strcmp(meth, "resources/templates/list"))
        return vg_rpc_result(m->id, json_pack("{s:[]}", "resourceTemplates"));
    if (!strcmp(meth, "tools/call"))
        return call(s, m);
    if (!strcmp(meth, "resources/read"))
        return read_resource(s, m);
    *known = 0;
    return NULL;
}

static json_t *capabilities(void)
{
    return json_pack("{s:{s:b}, s:{s:b, s:b}}", "tools", "listChanged", 0, "resources", "subscribe",
                     0, "listChanged", 0);
}

static json_t *server_info(void)
{
    return json_pack("{s:s, s:s, s:s}", "name", "vigil", "title", "vigil agents", "version",
                     vigil_version());
}

/*
 * Revision 2026-07-28: no handshake and no session; each request names its version in
 * params._meta, results say resultType and carry the server's info. initialize and ping are
 * gone from it.
 */
static json_t *modern(struct vg_mcpserve *s, const struct vg_rpc_message *m, json_t *version)
{
    const char *v = json_string_value(version);
    if (!v || strcmp(v, MODERN_VERSION))
        return json_pack("{s:s, s:O, s:{s:i, s:s, s:{s:[s, s, s, s, s], s:O}}}", "jsonrpc", "2.0",
                         "id", m->id, "error", "code", VG_MCP_UNSUPPORTED_VERSION, "message",
                         "Unsupported protocol version", "data", "supported", MODERN_VERSION,
                         versions[0], versions[1], versions[2], versions[3], "requested", version);
    json_t *reply = NULL;
    int known = 1;
    if (!strcmp(m->method, "server/discover"))
        reply = vg_rpc_result(m->id, json_pack("{s:[s], s:o, s:s}", "supportedVersions",
                                               MODERN_VERSION, "capabilities", capabilities(),
                                               "instructions", INSTRUCTIONS));
    else if (strcmp(m->method, "initialize") && strcmp(m->method, "ping"))
        reply = shared_method(s, m, &known);
    else
        known = 0;
    if (!reply && known)
        return NULL; /* cancelled */
    if (!reply)
        return vg_rpc_error(m->id, VG_RPC_METHOD_NOT_FOUND, "method not found in %s: %.100s",
                            MODERN_VERSION, m->method);
    json_t *result = json_object_get(reply, "result");
    if (result) {
        json_object_set_new(result, "resultType", json_string("complete"));
        json_object_set_new(
            result, "_meta",
            json_pack("{s:o}", "io.modelcontextprotocol/serverInfo", server_info()));
    }
    return reply;
}

static json_t *request(struct vg_mcpserve *s, const struct vg_rpc_message *m)
{
    json_t *version = json_object_get(json_object_get(m->params, "_meta"),
                                      "io.modelcontextprotocol/protocolVersion");
    if (version)
        return modern(s, m, version);
    if (!strcmp(m->method, "initialize"))
        return initialize(s, m);
    if (!strcmp(m->method, "ping"))
        return vg_rpc_result(m->id, json_object());
    if (!s->initialized)
        return vg_rpc_error(m->id, VG_RPC_INVALID_REQUEST,
                            "send initialize first (server not initialized)");
    int known = 0;
    json_t *reply = shared_method(s, m, &known);
    return reply || known ? reply
                          : vg_rpc_error(m->id, VG_RPC_METHOD_NOT_FOUND, "method not found: %.100s",
                                         m->method);
}

json_t *vg_mcpserve_handle(struct vg_mcpserve *s, const char *text, size_t len)
{
    struct vg_rpc_message m;
    json_t *reply = vg_rpc_read(text, len, &m);
    if (reply)
        return reply;
    /* Notifications (initialized, cancelled, ...) and the client's responses get no reply. */
    if (m.method && m.id)
        reply = request(s, &m);
    vg_rpc_message_clear(&m);
    return reply;
}

/* Read one line of any length into *buf; -1 at EOF with nothing read. *too_long when the line
 * was over the cap (the rest of it is skipped). */
static long read_line(FILE *in, char **buf, size_t *cap, int *too_long)
{
    size_t n = 0;
    int ch;
    *too_long = 0;
    while ((ch = getc(in)) != EOF && ch != '\n') {
        if (n >= VG_MCPSERVE_MAX_MESSAGE) {
            *too_long = 1;
            continue;
        }
        if (n + 1 >= *cap) {
            size_t nc = *cap ? *cap * 2 : 4096;
            char *nb = vg_realloc(*buf, nc);
            if (!nb)
                return -2;
            *buf = nb;
            *cap = nc;
        }
        (*buf)[n++] = (char)ch;
    }
    if (ch == EOF && n == 0 && !*too_long)
        return -1;
    return (long)n;
}

/*
 * The stdio transport. A reader thread reads lines into a queue while the main thread answers
 * them one at a time, so that a notifications/cancelled sent during a long tools/call reaches
 * it: the reader notes the ids the client cancelled (of requests read and not yet answered)
 * and the call's cancel hook looks there. Only the main thread writes to out.
 */
struct line {
    char *text; /* NULL: a line over the cap */
    size_t len;
    struct line *next;
};

struct stdio_link {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct line *head, *tail;
    int eof, failed;   /* the reader is done (failed: out of memory) */
    json_t *open;      /* ids (as JSON text) of requests read and not yet answered */
    json_t *cancelled; /* ids among them the client cancelled */
    FILE *in, *out;
    int out_broken;
    int refs; /* the main thread and the reader: the last one frees the link */
};

static void link_unref(struct stdio_link *l)
{
    pthread_mutex_lock(&l->mu);
    int last = --l->refs == 0;
    pthread_mutex_unlock(&l->mu);
    if (!last)
        return;
    for (struct line *ln = l->head, *next; ln; ln = next) {
        next = ln->next;
        vg_free(ln->text);
        vg_free(ln);
    }
    json_decref(l->open);
    json_decref(l->cancelled);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    vg_free(l);
}

static char *id_key(const json_t *id)
{
    return id ? vg_json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
}

/* The reader's look at a line: a request's id is open; a cancellation of an open one noted. */
static void note_line(struct stdio_link *l, const char *text, size_t len)
{
    json_t *m = json_loadb(text, len, 0, NULL);
    const char *method = json_string_value(json_object_get(m, "method"));
    json_t *id = json_object_get(m, "id");
    char *key = NULL;
    if (method && !id && !strcmp(method, "notifications/cancelled"))
        key = id_key(json_object_get(json_object_get(m, "params"), "requestId"));
    else if (method && id)
        key = id_key(id);
    if (key) {
        pthread_mutex_lock(&l->mu);
        if (id) /* requests */
            json_object_set_new(l->open, key, json_true());
        else if (json_object_get(l->open, key))
            json_object_set_new(l->cancelled, key, json_true());
        pthread_mutex_unlock(&l->mu);
    }
    free(key);
    json_decref(m);
}

static void *stdio_reader(void *arg)
{
    struct stdio_link *l = arg;
    char *buf = NULL;
    size_t cap = 0;
    int too_long = 0;
    long n;
    while ((n = read_line(l->in, &buf, &cap, &too_long)) >= 0) {
        if (n && buf[n - 1] == '\r')
            n--;
        if (!n && !too_long)
            continue;
        struct line *ln = vg_calloc(1, sizeof *ln);
        if (ln && !too_long && !(ln->text = vg_malloc((size_t)n + 1))) {
            vg_free(ln);
            ln = NULL;
        }
        if (!ln) {
            n = -2;
            break;
        }
        if (!too_long) {
            memcpy(ln->text, buf, (size_t)n);
            ln->text[n] = '\0';
            ln->len = (size_t)n;
            note_line(l, ln->text, ln->len);
        }
        pthread_mutex_lock(&l->mu);
        if (l->tail)
            l->tail->next = ln;
        else
            l->head = ln;
        l->tail = ln;
        pthread_cond_signal(&l->cv);
        pthread_mutex_unlock(&l->mu);
    }
    vg_free(buf);
    pthread_mutex_lock(&l->mu);
    l->eof = 1;
    l->failed = n == -2;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    link_unref(l);
    return NULL;
}

/* The next line (owned), or NULL once the reader is done and the queue empty. */
static struct line *next_line(struct stdio_link *l)
{
    pthread_mutex_lock(&l->mu);
    while (!l->head && !l->eof)
        pthread_cond_wait(&l->cv, &l->mu);
    struct line *ln = l->head;
    if (ln && !(l->head = ln->next))
        l->tail = NULL;
    pthread_mutex_unlock(&l->mu);
    return ln;
}

/* One message out, on one line (JSON_COMPACT escapes newlines inside strings). */
static void send_message(struct stdio_link *l, json_t *msg)
{
    if (!l->out_broken &&
        (vg_json_dumpf(msg, l->out, JSON_COMPACT) || fputc('\n', l->out) == EOF || fflush(l->out)))
        l->out_broken = 1;
    json_decref(msg);
}

static void stdio_notify(void *user, json_t *msg)
{
    send_message(user, msg);
}

static int cancelled_key(struct stdio_link *l, const char *key)
{
    pthread_mutex_lock(&l->mu);
    int yes = key && json_object_get(l->cancelled, key) != NULL;
    pthread_mutex_unlock(&l->mu);
    return yes;
}

static int stdio_cancelled(void *user, const json_t *id)
{
    char *key = id_key(id);
    int yes = cancelled_key(user, key);
    free(key);
    return yes;
}

/* The open request key names (NULL: not a request) is done: answered, or dropped. Returns
 * whether the client had cancelled it. */
static int close_request(struct stdio_link *l, const char *key)
{
    int cancelled = 0;
    if (key) {
        pthread_mutex_lock(&l->mu);
        cancelled = json_object_get(l->cancelled, key) != NULL;
        json_object_del(l->open, key);
        json_object_del(l->cancelled, key);
        pthread_mutex_unlock(&l->mu);
    }
    return cancelled;
}

static void answer_line(struct vg_mcpserve *s, struct stdio_link *l, struct line *ln, FILE *log)
{
    json_t *m = ln->text ? json_loadb(ln->text, ln->len, 0, NULL) : NULL, *reply = NULL;
    char *key =
        json_string_value(json_object_get(m, "method")) ? id_key(json_object_get(m, "id")) : NULL;
    json_decref(m);
    if (!ln->text)
        reply = vg_rpc_error(NULL, VG_RPC_INVALID_REQUEST, "message over %u bytes",
                             VG_MCPSERVE_MAX_MESSAGE);
    else if (!cancelled_key(l, key))
        reply = vg_mcpserve_handle(s, ln->text, ln->len); /* not cancelled before it began */
    if (close_request(l, key)) {                          /* cancelled meanwhile: no answer */
        json_decref(reply);
        reply = NULL;
    }
    free(key);
    if (!reply)
        return;
    if (json_object_get(reply, "error"))
        fprintf(log, "vigil mcp serve: %s\n",
                json_string_value(json_object_get(json_object_get(reply, "error"), "message")));
    send_message(l, reply);
}

int vg_mcpserve_stdio(struct vg_mcpserve *s, FILE *in, FILE *out, FILE *log)
{
    struct stdio_link *l = vg_calloc(1, sizeof *l);
    if (!l)
        return 1;
    struct vg_mcpserve_hooks hooks = {
        .user = l, .notify = stdio_notify, .cancelled = stdio_cancelled};
    const struct vg_mcpserve_hooks *saved = s->hooks;
    pthread_t reader;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->in = in;
    l->out = out;
    l->open = json_object();
    l->cancelled = json_object();
    l->refs = 2;
    int started = l->open && l->cancelled && pthread_create(&reader, NULL, stdio_reader, l) == 0;
    if (!started)
        l->refs = 1;
    s->hooks = &hooks;
    /* Until in ends; or until out fails (the client is gone): then the reader, blocked on in,
     * is left to end with it and free the link. */
    for (struct line *ln; started && !l->out_broken && (ln = next_line(l));) {
        answer_line(s, l, ln, log);
        vg_free(ln->text);
        vg_free(ln);
    }
    if (started && !l->out_broken)
        pthread_join(reader, NULL);
    else if (started)
        pthread_detach(reader);
    s->hooks = saved;
    pthread_mutex_lock(&l->mu);
    int rc = !started || l->failed || l->out_broken ? 1 : 0;
    pthread_mutex_unlock(&l->mu);
    link_unref(l);
    return rc;
}
