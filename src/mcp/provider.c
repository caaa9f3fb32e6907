/*
 * provider.c: the tool-provider port over MCP. One provider per declared server, named "mcp",
 * serves that server's tools as `server__tool`: the executor registers them like any tool, so
 * the allowlists, the schema check, kill switches (tool class "mcp"), scope, budgets,
 * approvals, operation ids and the journal apply unchanged. A server that cannot start or
 * list serves no tools and is logged; it never takes the other tools down with it.
 */
#include "mcp/mcp.h"

#include "config/config.h"
#include "env/env.h"
#include "tool/schema.h"
#include "tool/tool.h"

#define MAX_TEXT_FOR_MODEL ((size_t)64 << 10)

struct tool_entry {
    char *vigil_name;
    char *mcp_name;
    struct vg_schema *output; /* compiled outputSchema or NULL */
};

/* A tool list replaced by a newer one: a call parked on another fiber may still read it. */
struct retired {
    struct tool_entry *tools;
    size_t n;
    struct retired *next;
};

/* A client and its declaration, replaced by a newer declaration: a call parked on another
 * fiber may still hold them, so they are freed with the provider. */
struct old_client {
    struct vg_mcp_client *client;
    struct vg_mcp_conf *conf;
    struct old_client *next;
};

struct mcp_provider {
    struct vg_tool_provider base;            /* must stay first */
    struct vg_mcp_conf *conf;                /* owned: this one server's declaration */
    const struct vg_mcp_server_conf *server; /* &conf->servers[0] */
    struct vg_mcp_client *client;
    struct old_client *old;
    int withdrawn; /* no longer declared: serves no tools */
    struct vg_mcp_options opts;
    struct vg_env *env; /* for the tool-list cache, or NULL */
    struct tool_entry *tools;
    size_t n;
    struct retired *retired; /* freed with the provider */
    int listed;              /* its tools were listed (from the cache or the server) */
    int from_cache;          /* the list served came from the cache, not from the server */
    int ask_server;          /* list from the server next, not the cache (a tool was missing) */
    json_t *warned;          /* the server's list whose refused tools were last logged */
    int quiet;               /* this listing logs no refused tool (said before, or cached) */
    char prefix[40];         /* "server__" */
    char source[40];         /* "mcp:server" */
};

static void plog(struct mcp_provider *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void plog(struct mcp_provider *m, const char *fmt, ...)
{
    char line[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (m->opts.log)
        m->opts.log(m->opts.log_user, m->server->name, line);
    else
        fprintf(stderr, "vigil: mcp %s: %s\n", m->server->name, line);
}

/* Why a tool is not served, said once per list the server gives (a list read from the cache
 * was said when the server gave it; `vigil mcp tools` shows it any time): trial E6. */
static void refused(struct mcp_provider *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void refused(struct mcp_provider *m, const char *fmt, ...)
{
    char line[400];
    va_list ap;
    if (m->quiet)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    plog(m, "%s", line);
}

static struct tool_entry *find(struct mcp_provider *m, const char *vigil_name)
{
    for (size_t i = 0; vigil_name && i < m->n; i++)
        if (!strcmp(m->tools[i].vigil_name, vigil_name))
            return &m->tools[i];
    return NULL;
}

/* Remember one served tool; 0, or -1 when its name is taken or memory ran out. */
static int add_entry(struct mcp_provider *m, const json_t *tool, const json_t *contract)
{
    const char *vname = json_string_value(json_object_get(contract, "name"));
    json_t *out = json_object_get(tool, "outputSchema");
    struct tool_entry e = {0};
    vigil_error err = {0};
    if (find(m, vname)) {
        refused(m, "tool \"%s\" is not served: its name %s is taken by another of its tools",
                json_string_value(json_object_get(tool, "name")), vname);
        return -1;
    }
    if (json_is_object(out) && vg_schema_compile(out, &e.output, &err)) {
        refused(m, "tool %s is not served: its output schema: %s", vname, err.message);
        return -1;
    }
    struct tool_entry *t = vg_realloc(m->tools, (m->n + 1) * sizeof *t);
    if (!t || !(e.vigil_name = vg_strdup(vname)) ||
        !(e.mcp_name = vg_strdup(json_string_value(json_object_get(tool, "name"))))) {
        if (t)
            m->tools = t;
        vg_free(e.vigil_name);
        vg_schema_free(e.output);
        return -1;
    }
    m->tools = t;
    m->tools[m->n++] = e;
    return 0;
}

#define CACHE_KIND "mcp_tools"

/* The server's tools as cached for this very declaration (owned), or NULL. */
static json_t *cached_tools(struct mcp_provider *m, const char *hash)
{
    json_t *body = NULL, *tools = NULL;
    if (!m->env || vg_env_get_json(m->env, CACHE_KIND, m->server->name, &body, NULL, NULL))
        return NULL;
    const char *h = json_string_value(json_object_get(body, "config_hash"));
    if (h && !strcmp(h, hash) && json_is_array(json_object_get(body, "tools")))
        tools = json_incref(json_object_get(body, "tools"));
    json_decref(body);
    return tools;
}

vigil_code vg_mcp_cache_tools(struct vg_env *env, const struct vg_mcp_server_conf *server,
                              json_t *tools, vigil_error *err)
{
    char hash[65];
    int64_t rev = 0;
    json_t *old = NULL, *body;
    vg_mcp_conf_hash(server, hash);
    if (!(body = json_pack("{s:s, s:O}", "config_hash", hash, "tools", tools)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory caching a tool list");
    vigil_code rc = vg_store_begin(env->store, err);
    if (!rc) {
        if (vg_env_get_json(env, CACHE_KIND, server->name, &old, &rev, NULL) == VIGIL_OK)
            rc = vg_env_update_json(env, CACHE_KIND, server->name, NULL, hash, NULL, 0, body, rev,
                                    err);
        else
            rc = vg_env_put_json(env, CACHE_KIND, server->name, NULL, hash, NULL, 0, body, 0, err);
        rc = vg_store_end(env->store, rc, err);
    }
    json_decref(old);
    json_decref(body);
    return rc;
}

/* Remember the tools a live server listed; a failure only costs a start next time. */
static void cache_tools(struct mcp_provider *m, json_t *tools)
{
    vigil_error e = {0};
    if (m->env && vg_mcp_cache_tools(m->env, m->server, tools, &e))
        plog(m, "could not cache its tool list: %s", e.message);
}

/* The tools to register: on the first listing, the cached list while the declaration is
 * unchanged (nothing starts); else the live server's, which refreshes the cache when it differs.
 * Owned, or NULL when there are none. */
static json_t *tools_to_serve(struct mcp_provider *m)
{
    char hash[65];
    json_t *tools = NULL, *cached;
    vigil_error e = {0};
    int asked = m->ask_server;
    vg_mcp_conf_hash(m->server, hash);
    cached = cached_tools(m, hash);
    m->from_cache = cached && !m->listed && !asked;
    m->ask_server = 0;
    if (m->from_cache)
        return cached;
    if (vg_mcp_client_tools(m->client, &tools, &e)) {
        plog(m, "serves no tools: %s", e.message);
        if (asked) /* asked for a missing tool: what was served stays served */
            return cached;
        json_decref(cached);
        return NULL;
    }
    if (!cached || !json_equal(cached, tools))
        cache_tools(m, tools);
    json_decref(cached);
    return json_incref(tools);
}

static void free_entries(struct tool_entry *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        vg_free(t[i].vigil_name);
        vg_free(t[i].mcp_name);
        vg_schema_free(t[i].output);
    }
    vg_free(t);
}

/* Put the current list aside for a new one (lists change seldom: a few blocks at most). When
 * even that allocation fails the list is freed now. */
static void retire_entries(struct mcp_provider *m)
{
    struct retired *r = m->n ? vg_calloc(1, sizeof *r) : NULL;
    if (r) {
        *r = (struct retired){m->tools, m->n, m->retired};
        m->retired = r;
    } else {
        free_entries(m->tools, m->n);
    }
    m->tools = NULL;
    m->n = 0;
}

static vigil_code m_list(struct vg_tool_provider *p, json_t **out, vigil_error *err)
{
    struct mcp_provider *m = (struct mcp_provider *)p;
    json_t *tools = NULL, *t, *list = json_array();
    vigil_error e = {0};
    size_t i;
    if (!list)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing MCP tools");
    retire_entries(m);
    if (m->withdrawn) {
        m->listed = 1;
        *out = list;
        return VIGIL_OK;
    }
    if (!(tools = tools_to_serve(m))) {
        *out = list;
        return VIGIL_OK;
    }
    m->listed = 1;
    m->quiet = m->from_cache || json_equal(m->warned, tools);
    json_decref(m->warned);
    m->warned = json_incref(tools);
    json_array_foreach (tools, i, t) {
        json_t *c = NULL;
        const char *tname = json_string_value(json_object_get(t, "name"));
        json_t *ov = json_object_get(m->server->tools, tname ? tname : "");
        if (vg_mcp_tool_contract(m->server->name, t, ov, &c, &e)) {
            refused(m, "%s", e.message);
            continue;
        }
        if (!add_entry(m, t, c))
            json_array_append(list, c);
        json_decref(c);
    }
    json_decref(tools);
    *out = list;
    return VIGIL_OK;
}

/* Listed when first needed; again when the server announced a change (or was restarted). */
static const char *m_prefix(struct vg_tool_provider *p)
{
    return ((struct mcp_provider *)p)->prefix;
}

/* A call names a tool the list lacks: a list from the cache may be older than the server
 * (updated since, same declaration), so the server is asked once (trial E8). */
static int m_may_serve(struct vg_tool_provider *p, const char *name)
{
    struct mcp_provider *m = (struct mcp_provider *)p;
    (void)name;
    if (!m->from_cache || m->withdrawn)
        return 0;
    m->ask_server = 1;
    return 1;
}

static int m_stale(struct vg_tool_provider *p)
{
    struct mcp_provider *m = (struct mcp_provider *)p;
    return !m->listed || vg_mcp_client_tools_changed(m->client);
}

static const char *m_source(struct vg_tool_provider *p)
{
    struct mcp_provider *m = (struct mcp_provider *)p;
    return m->source;
}

/* The model-facing answer of a CallToolResult into r. */
static void answer(struct tool_entry *e, json_t *res, struct vg_tool_response *r)
{
    json_t *model = vg_mcp_result_for_model(res, MAX_TEXT_FOR_MODEL);
    const char *text = json_string_value(json_object_get(model, "text"));
    if (!model) {
        vg_tool_response_fail(r, VG_TOOL_FAILED, "out of memory reading the tool's result");
        return;
    }
    if (json_is_true(json_object_get(res, "isError"))) {
        /* A tool execution error: the model reads it and may correct its call. */
        vg_tool_response_fail(r, VG_TOOL_FAILED, "%s", text && *text ? text : "the tool failed");
        json_decref(model);
        return;
    }
    if (e->output) {
        vigil_error ve = {0};
        json_t *sc = json_object_get(res, "structuredContent");
        if (!sc || vg_schema_validate(e->output, sc, NULL, &ve)) {
            vg_tool_response_fail(r, VG_TOOL_FAILED,
                                  "the tool's structured content %s its output schema%s%s",
                                  sc ? "does not match" : "is missing, required by", sc ? ": " : "",
                                  sc ? ve.message : "");
            json_decref(model);
            return;
        }
    }
    r->result = model;
}

static vigil_code m_call(struct vg_tool_provider *p, const struct vg_tool_request *q,
                         struct vg_tool_response *r, vigil_error *err)
{
    struct mcp_provider *m = (struct mcp_provider *)p;
    struct tool_entry *e = find(m, q->tool);
    json_t *res = NULL;
    vigil_error ce = {0};
    if (!e) {
        vg_tool_response_fail(r, VG_TOOL_UNKNOWN_TOOL, "MCP server \"%s\" serves no tool %s",
                              m->server->name, q->tool);
        return VIGIL_OK;
    }
    if (q->preview_only) {
        r->result = json_pack("{s:s, s:s, s:O}", "server", m->server->name, "tool", e->mcp_name,
                              "arguments", q->args);
        return r->result ? VIGIL_OK
                         : VG_FAIL(err, VIGIL_ENOMEM, "out of memory previewing an MCP call");
    }
    int unanswered = 0;
    vigil_code rc =
        vg_mcp_client_call_unanswered(m->client, e->mcp_name, q->args, &res, &unanswered, &ce);
    if (rc) {
        vg_tool_response_fail(r, rc == VIGIL_ETIMEOUT ? VG_TOOL_TIMEOUT : VG_TOOL_FAILED, "%s",
                              ce.message);
        /* A server that died holding the request may have done its effect first: stopped,
         * like a command killed mid-run, so a non-idempotent mutating call is held in doubt
         * rather than failed, which invited a retry that did it twice (trial L2). */
        r->stopped = unanswered;
        return VIGIL_OK;
    }
    answer(e, res, r);
    json_decref(res);
    return VIGIL_OK;
}

static void m_destroy(struct vg_tool_provider *p)
{
    struct mcp_provider *m = (struct mcp_provider *)p;
    vg_mcp_client_free(m->client);
    json_decref(m->warned);
    free_entries(m->tools, m->n);
    while (m->retired) {
        struct retired *next = m->retired->next;
        free_entries(m->retired->tools, m->retired->n);
        vg_free(m->retired);
        m->retired = next;
    }
    while (m->old) {
        struct old_client *next = m->old->next;
        vg_mcp_client_free(m->old->client);
        vg_mcp_conf_free(m->old->conf);
        vg_free(m->old);
        m->old = next;
    }
    vg_mcp_conf_free(m->conf);
    vg_free(m);
}

static const struct vg_tool_provider_methods mcp_methods = {.version = 4,
                                                            .name = "mcp",
                                                            .caps = 0,
                                                            .list = m_list,
                                                            .call = m_call,
                                                            .lookup = NULL,
                                                            .destroy = m_destroy,
                                                            .after_commit = NULL,
                                                            .deferred_prefix = m_prefix,
                                                            .stale = m_stale,
                                                            .source = m_source,
                                                            .may_serve = m_may_serve};

/* ---- the set of declared servers ---------------------------------------------------------- */

struct vg_mcp_set {
    struct vg_mcp_options opts;
    struct vg_env *env;
    struct mcp_provider **p; /* borrowed: the executor owns them */
    size_t n;
};

vigil_code vg_mcp_set_new(const struct vg_mcp_options *o, struct vg_env *env,
                          struct vg_mcp_set **out, vigil_error *err)
{
    struct vg_mcp_set *s = vg_calloc(1, sizeof *s);
    if (!s)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating the MCP servers");
    s->opts = o ? *o : (struct vg_mcp_options){0};
    s->env = env;
    *out = s;
    return VIGIL_OK;
}

void vg_mcp_set_free(struct vg_mcp_set *s)
{
    if (s)
        vg_free(s->p);
    vg_free(s);
}

static vigil_code add_server(struct vg_mcp_set *s, struct vg_tool_executor *x,
                             struct vg_mcp_conf *conf, vigil_error *err)
{
    struct mcp_provider **pp = vg_realloc(s->p, (s->n + 1) * sizeof *pp);
    struct mcp_provider *m = pp ? vg_calloc(1, sizeof *m) : NULL;
    if (pp)
        s->p = pp;
    if (!m) {
        vg_mcp_conf_free(conf);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory adding MCP servers");
    }
    m->base.methods = &mcp_methods;
    m->conf = conf;
    m->server = &conf->servers[0];
    m->opts = s->opts;
    m->env = s->env;
    snprintf(m->prefix, sizeof m->prefix, "%s__", m->server->name);
    snprintf(m->source, sizeof m->source, "mcp:%s", m->server->name);
    vigil_code rc = vg_mcp_client_new(m->server, &m->opts, &m->client, err);
    if (rc) {
        vg_mcp_conf_free(conf);
        vg_free(m);
        return rc;
    }
    if ((rc = vg_tool_executor_add(x, &m->base, err))) /* owns m from here, even on failure */
        return rc;
    s->p[s->n++] = m;
    return VIGIL_OK;
}

/* Serve conf (owned; NULL: withdraw the server) in place of m's declaration. The running
 * server of the old one is stopped now; the new one starts on first use. */
static vigil_code redeclare(struct mcp_provider *m, struct vg_mcp_conf *conf, vigil_error *err)
{
    plog(m, "%s: its server is stopped%s", conf ? "its declaration changed" : "no longer declared",
         conf ? "; the new one starts on first use" : "");
    m->listed = 0; /* listed again when next needed */
    if (!conf) {
        vg_mcp_client_retire(m->client);
        m->withdrawn = 1;
        return VIGIL_OK;
    }
    struct old_client *o = vg_calloc(1, sizeof *o);
    struct vg_mcp_client *c = NULL;
    vigil_code rc = o ? vg_mcp_client_new(&conf->servers[0], &m->opts, &c, err)
                      : VG_FAIL(err, VIGIL_ENOMEM, "out of memory redeclaring an MCP server");
    if (rc) {
        vg_free(o);
        vg_mcp_conf_free(conf);
        return rc;
    }
    /* The new client first: a call that comes while the old one's is awaited gets the new. */
    *o = (struct old_client){m->client, m->conf, m->old};
    m->old = o;
    m->client = c;
    m->conf = conf;
    m->server = &conf->servers[0];
    m->withdrawn = 0;
    vg_mcp_client_retire(o->client);
    return VIGIL_OK;
}

vigil_code vg_mcp_set_sync(struct vg_mcp_set *s, struct vg_tool_executor *x,
                           const json_t *mcp_servers, vigil_error *err)
{
    struct vg_mcp_conf *all = NULL;
    vigil_code rc = vg_mcp_conf_parse(mcp_servers, &all, err); /* every server, or none */
    for (size_t i = 0; !rc && i < all->n; i++) {
        const struct vg_mcp_server_conf *want = &all->servers[i];
        struct mcp_provider *m = NULL;
        struct vg_mcp_conf *one = NULL;
        char h1[65], h2[65];
        for (size_t j = 0; j < s->n && !m; j++)
            m = !strcmp(s->p[j]->server->name, want->name) ? s->p[j] : NULL;
        if (m && !m->withdrawn) {
            vg_mcp_conf_hash(want, h1);
            vg_mcp_conf_hash(m->server, h2);
            if (!strcmp(h1, h2))
                continue;
        }
        /* The declaration moves to its provider: all keeps its name only (for the check below). */
        if (!(rc = vg_mcp_conf_take(all, i, &one, err)))
            rc = m ? redeclare(m, one, err) : add_server(s, x, one, err);
    }
    for (size_t j = 0; !rc && j < s->n; j++)
        if (!s->p[j]->withdrawn && !vg_mcp_conf_find(all, s->p[j]->server->name))
            rc = redeclare(s->p[j], NULL, err);
    vg_mcp_conf_free(all);
    return rc;
}
