/*
 * tools.c: declared command tools. A `command_tools` entry, from the config file or from an
 * agent's manifest, becomes a command tool provider (src/tool/command.c) in the runtime's
 * executor, so `vigil chat`, `vigil serve` and `vigil tool call` have it with no C. The
 * declaration is stored as written: ${NAME} references stay references, and command.c expands
 * them from the environment only when a call runs.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "manifest/manifest.h"
#include "tool/tool.h"

#include <fnmatch.h>

json_t *vg_manifest_tool_contract(const char *name, const json_t *decl)
{
    static const char *const fields[] = {
        "version",      "description", "input_schema",         "output_schema",
        "capabilities", "risk",        "allowed_wake_reasons", "scope",
        "idempotency",  "mutating",    "tool_class",           "requires_approval"};
    json_t *c = json_pack("{s:s}", "name", name);
    for (size_t i = 0; c && i < VG_ARRAY_LEN(fields); i++) {
        json_t *v = json_object_get(decl, fields[i]);
        if (v && json_object_set(c, fields[i], v)) {
            json_decref(c);
            return NULL;
        }
    }
    return c;
}

/* A NULL-terminated array of the strings of a JSON array (borrowed from it). */
static const char **strv(const json_t *a)
{
    const char **v = vg_calloc(json_array_size(a) + 1, sizeof *v);
    for (size_t i = 0; v && i < json_array_size(a); i++)
        v[i] = json_string_value(json_array_get(a, i));
    return v;
}

/* "NAME=template" for each env entry, NULL-terminated; every string owned. */
static char **env_templates(const json_t *env)
{
    const char *k;
    json_t *v;
    size_t i = 0;
    char **out = vg_calloc(json_object_size(env) + 1, sizeof *out);
    json_object_foreach ((json_t *)env, k, v) {
        if (!out)
            break;
        size_t n = strlen(k) + json_string_length(v) + 2;
        if (!(out[i] = vg_malloc(n)))
            break;
        snprintf(out[i++], n, "%s=%s", k, json_string_value(v));
    }
    return out;
}

static void free_templates(char **t)
{
    for (size_t i = 0; t && t[i]; i++)
        vg_free(t[i]);
    vg_free(t);
}

/* The command provider of one declaration (*out owned). */
static vigil_code make_one(const char *name, const json_t *decl, struct vg_tool_provider **out,
                           vigil_error *err)
{
    struct vg_tool_provider *p = NULL;
    json_t *contract = vg_manifest_tool_contract(name, decl);
    const char **argv = strv(json_object_get(decl, "command"));
    const char **allow = strv(json_object_get(decl, "env_allow"));
    char **set = env_templates(json_object_get(decl, "env"));
    vigil_code rc;
    if (!contract || !argv || !allow || !set) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory registering command tool \"%s\"", name);
        goto out;
    }
    struct vg_tool_command_options o = {
        .argv = argv,
        .cwd = json_string_value(json_object_get(decl, "cwd")),
        .minimal_env = 1,
        .env_allow = allow,
        .env_set = (const char *const *)set,
        .timeout_ms = (int)json_integer_value(json_object_get(decl, "timeout_ms")),
        .max_output = (size_t)json_integer_value(json_object_get(decl, "max_output"))};
    if (!(rc = vg_tool_command_provider(contract, &o, &p, err)))
        *out = p;
out:
    json_decref(contract);
    vg_free(argv);
    vg_free(allow);
    free_templates(set);
    return rc;
}

/* Declarations seen so far: name -> {"decl": ..., "from": source}. what: "command tool"...
 * A name declared differently fails with EEXISTS; with keep_going, the entry keeps the first
 * declaration and gets "clash": the message instead, so that only the agents it concerns fail. */
static vigil_code collect(json_t *seen, const json_t *decls, const char *from, const char *what,
                          int keep_going, vigil_error *err)
{
    const char *name;
    json_t *decl;
    json_object_foreach ((json_t *)decls, name, decl) {
        json_t *had = json_object_get(seen, name);
        if (had && json_equal(json_object_get(had, "decl"), decl))
            continue; /* the same one declared twice: one */
        if (had && keep_going && json_object_get(had, "clash"))
            continue; /* the first clash is the one named */
        if (had && keep_going) {
            char msg[512];
            snprintf(msg, sizeof msg,
                     "%s \"%s\" is declared differently by %s and by %s: rename one of them", what,
                     name, json_string_value(json_object_get(had, "from")), from);
            if (json_object_set_new(had, "clash", json_string(msg)))
                return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading %ss", what);
            continue;
        }
        if (had)
            return VG_FAIL(err, VIGIL_EEXISTS,
                           "%s \"%s\" is declared differently by %s and by %s: rename "
                           "one of them",
                           what, name, json_string_value(json_object_get(had, "from")), from);
        if (json_object_set_new(seen, name, json_pack("{s:O, s:s}", "decl", decl, "from", from)))
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading %ss", what);
    }
    return VIGIL_OK;
}

static vigil_code collect_agent(const json_t *agent, const char *key, const char *what,
                                json_t *seen, int keep_going, vigil_error *err)
{
    json_t *decls = json_object_get(json_object_get(agent, "config"), key);
    char from[300];
    if (!json_is_object(decls))
        return VIGIL_OK;
    snprintf(from, sizeof from, "agent \"%s\"", json_string_value(json_object_get(agent, "name")));
    return collect(seen, decls, from, what, keep_going, err);
}

vigil_code vg_manifest_collect_from(const json_t *decls, const char *from, const char *what,
                                    json_t *seen, vigil_error *err)
{
    return json_is_object(decls) ? collect(seen, decls, from, what, 0, err) : VIGIL_OK;
}

vigil_code vg_manifest_collect_one(const json_t *agent, const char *key, const char *what,
                                   json_t *seen, vigil_error *err)
{
    return collect_agent(agent, key, what, seen, 0, err);
}

struct declared {
    const char *key, *what;
    json_t *seen;
};

static vigil_code declared_one(void *user, json_t *a, vigil_error *err)
{
    struct declared *d = user;
    const char *lc = json_string_value(json_object_get(a, "lifecycle"));
    if (lc && !strcmp(lc, "destroyed"))
        return VIGIL_OK;
    return collect_agent(a, d->key, d->what, d->seen, 1, err);
}

vigil_code vg_manifest_collect_declared(struct vg_env *env, const char *key, const char *what,
                                        json_t *seen, vigil_error *err)
{
    struct declared d = {key, what, seen};
    return vg_agent_each(env, declared_one, &d, err);
}

/* ---- declared command tools kept in step with their declarations --------------------------- */

/* One declared tool as the executor sees it: a deferred provider (its prefix is the tool's
 * name) around the command provider of the current declaration. A new declaration swaps the
 * inner provider and makes the tool stale, so the executor lists it again when next needed; a
 * tool no longer declared lists nothing. Replaced inner providers stay until the end: a call
 * parked on another fiber may still be running one. */
struct declared_tool {
    struct vg_tool_provider base;   /* must stay first */
    struct vg_tool_provider *inner; /* owned, or NULL: no longer declared */
    struct vg_tool_provider **old;  /* owned: replaced inner providers */
    size_t nold;
    int stale;
    char *name;
    json_t *decl; /* the declaration inner serves, or NULL */
};

static vigil_code dt_list(struct vg_tool_provider *p, json_t **out, vigil_error *err)
{
    struct declared_tool *d = (struct declared_tool *)p;
    d->stale = 0;
    if (d->inner)
        return vg_tool_provider_list(d->inner, out, err);
    return (*out = json_array()) ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
}

static vigil_code dt_call(struct vg_tool_provider *p, const struct vg_tool_request *q,
                          struct vg_tool_response *r, vigil_error *err)
{
    struct declared_tool *d = (struct declared_tool *)p;
    if (d->inner)
        return vg_tool_provider_call(d->inner, q, r, err);
    vg_tool_response_fail(r, VG_TOOL_UNKNOWN_TOOL, "command tool %s is no longer declared",
                          d->name);
    return VIGIL_OK;
}

static void dt_destroy(struct vg_tool_provider *p)
{
    struct declared_tool *d = (struct declared_tool *)p;
    vg_tool_provider_destroy(d->inner);
    for (size_t i = 0; i < d->nold; i++)
        vg_tool_provider_destroy(d->old[i]);
    vg_free(d->old);
    vg_free(d->name);
    json_decref(d->decl);
    vg_free(d);
}

static const char *dt_prefix(struct vg_tool_provider *p)
{
    return ((struct declared_tool *)p)->name;
}

static int dt_stale(struct vg_tool_provider *p)
{
    return ((struct declared_tool *)p)->stale;
}

static const struct vg_tool_provider_methods declared_methods = {.version = 3,
                                                                 .name = "command",
                                                                 .caps = 0,
                                                                 .list = dt_list,
                                                                 .call = dt_call,
                                                                 .lookup = NULL,
                                                                 .destroy = dt_destroy,
                                                                 .after_commit = NULL,
                                                                 .deferred_prefix = dt_prefix,
                                                                 .stale = dt_stale,
                                                                 .source = NULL};

struct vg_manifest_tools {
    struct declared_tool **t; /* borrowed: the executor owns them */
    size_t n;
};

vigil_code vg_manifest_tools_new(struct vg_manifest_tools **out, vigil_error *err)
{
    return (*out = vg_calloc(1, sizeof **out)) ? VIGIL_OK
                                               : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
}

void vg_manifest_tools_free(struct vg_manifest_tools *s)
{
    if (s)
        vg_free(s->t);
    vg_free(s);
}

int vg_manifest_tools_has(const struct vg_manifest_tools *s, const char *name)
{
    for (size_t i = 0; s && i < s->n; i++)
        if (!strcmp(s->t[i]->name, name))
            return 1;
    return 0;
}

/* Serve decl (borrowed; NULL: no longer declared) from d from now on. */
static vigil_code redeclare(struct declared_tool *d, const json_t *decl, vigil_error *err)
{
    struct vg_tool_provider *p = NULL, **old = NULL;
    vigil_code rc = decl ? make_one(d->name, decl, &p, err) : VIGIL_OK;
    if (!rc && d->inner && !(old = vg_realloc(d->old, (d->nold + 1) * sizeof *old)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory redeclaring command tool \"%s\"", d->name);
    if (rc) {
        vg_tool_provider_destroy(p);
        return rc;
    }
    if (d->inner) {
        d->old = old;
        d->old[d->nold++] = d->inner;
    }
    d->inner = p;
    json_decref(d->decl);
    d->decl = decl ? json_deep_copy(decl) : NULL;
    d->stale = 1;
    return VIGIL_OK;
}

static vigil_code add_declared(struct vg_manifest_tools *s, struct vg_tool_executor *x,
                               const char *name, const json_t *decl, vigil_error *err)
{
    if (vg_tool_executor_find(x, name))
        return VG_FAIL(err, VIGIL_EEXISTS, "a tool named \"%s\" is already registered", name);
    struct declared_tool **tt = vg_realloc(s->t, (s->n + 1) * sizeof *tt);
    struct declared_tool *d = tt ? vg_calloc(1, sizeof *d) : NULL;
    if (tt)
        s->t = tt;
    if (!d || !(d->name = vg_strdup(name))) {
        vg_free(d);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory registering command tool \"%s\"", name);
    }
    d->base.methods = &declared_methods;
    vigil_code rc = redeclare(d, decl, err);
    if (rc) {
        dt_destroy(&d->base);
        return rc;
    }
    if ((rc = vg_tool_executor_add(x, &d->base, err))) /* owns d from here, even on failure */
        return rc;
    s->t[s->n++] = d;
    return VIGIL_OK;
}

vigil_code vg_manifest_tools_sync(struct vg_manifest_tools *s, struct vg_tool_executor *x,
                                  const json_t *decls, vigil_error *err)
{
    const char *name;
    json_t *decl;
    vigil_code rc = VIGIL_OK;
    json_object_foreach ((json_t *)decls, name, decl) {
        struct declared_tool *d = NULL;
        for (size_t i = 0; i < s->n && !d; i++)
            d = !strcmp(s->t[i]->name, name) ? s->t[i] : NULL;
        if (d && json_equal(d->decl, decl))
            continue;
        if ((rc = d ? redeclare(d, decl, err) : add_declared(s, x, name, decl, err)))
            return rc;
    }
    for (size_t i = 0; !rc && i < s->n; i++)
        if (s->t[i]->decl && !json_object_get(decls, s->t[i]->name))
            rc = redeclare(s->t[i], NULL, err);
    return rc;
}

/* Whether seen's entry t may be served; one that may not is said in clashes (name -> message). */
static vigil_code servable(const char *name, json_t *t, vg_manifest_taken_fn taken, void *user,
                           json_t *clashes, vigil_error *err)
{
    char msg[512];
    const char *clash = json_string_value(json_object_get(t, "clash"));
    if (!clash && strstr(name, "__")) { /* stored before the rule: never an MCP tool's stand-in */
        snprintf(msg, sizeof msg,
                 "command tool \"%s\" of %s takes an MCP tool's name (\"__\" is reserved for "
                 "SERVER__TOOL): rename it",
                 name, json_string_value(json_object_get(t, "from")));
        clash = msg;
    } else if (!clash && taken && taken(user, name)) {
        snprintf(msg, sizeof msg,
                 "command tool \"%s\" of %s is named like a built-in tool: rename it", name,
                 json_string_value(json_object_get(t, "from")));
        clash = msg;
    }
    if (clash &&
        json_object_set_new(clashes, name,
                            json_pack("{s:s, s:b}", "message", clash, "builtin", clash == msg)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading command tools");
    return clash ? VIGIL_EEXISTS : VIGIL_OK;
}

vigil_code vg_manifest_declared_tools(struct vg_env *env, const json_t *config_tools,
                                      vg_manifest_taken_fn taken, void *user, json_t **out,
                                      json_t *clashes, vigil_error *err)
{
    json_t *seen = json_object(), *merged = json_object(), *t;
    const char *name;
    vigil_code rc = seen && merged ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    if (!rc && config_tools &&
        !(rc = vg_manifest_check_command_tools(config_tools, "the config's command_tools", err)))
        rc = collect(seen, config_tools, "the config file", "command tool", 0, err);
    if (!rc)
        rc = vg_manifest_collect_declared(env, "command_tools", "command tool", seen, err);
    json_object_foreach (seen, name, t) {
        vigil_code one = rc ? rc : servable(name, t, taken, user, clashes, err);
        if (one == VIGIL_ENOMEM)
            rc = one;
        else if (!one && json_object_set(merged, name, json_object_get(t, "decl")))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading command tools");
    }
    json_decref(seen);
    if (rc) {
        json_decref(merged);
        return rc;
    }
    *out = merged;
    return VIGIL_OK;
}

/* ---- the allowlist's likely typos ---------------------------------------------------------- */

/* Whether key (command_tools or mcp_servers) of one manifest or stored agent's config holds
 * name (command_tools), or a server whose SERVER__ starts name (mcp_servers). */
static int declares(const json_t *config, const char *key, const char *name)
{
    const char *k;
    json_t *v;
    int server = !strcmp(key, "mcp_servers");
    json_object_foreach ((json_t *)json_object_get(config, key), k, v) {
        size_t n = strlen(k);
        if (server ? !strncmp(name, k, n) && !strncmp(name + n, "__", 2) : !strcmp(name, k))
            return 1;
    }
    return 0;
}

/* Whether a command tool or MCP server of the config file, a kept agent or a manifest applied
 * now serves name (an MCP server's tools are not known without starting it: its prefix is). */
static int declared_anywhere(const json_t *config, const json_t *by_name, const json_t *docs,
                             const char *key, const char *name)
{
    const char *k;
    json_t *a, *d;
    size_t i;
    if (declares(config, key, name))
        return 1;
    json_object_foreach ((json_t *)by_name, k, a) {
        if (json_is_object(a) && declares(json_object_get(a, "config"), key, name))
            return 1;
    }
    json_array_foreach (docs, i, d) {
        if (declares(json_object_get(d, "doc"), key, name))
            return 1;
    }
    return 0;
}

vigil_code vg_manifest_tool_warnings(const json_t *doc, const json_t *docs, const json_t *by_name,
                                     const json_t *config, vg_manifest_taken_fn taken, void *user,
                                     json_t **out, vigil_error *err)
{
    json_t *w = json_array(), *t;
    size_t i;
    if (!w)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    json_array_foreach (taken ? json_object_get(doc, "tools") : NULL, i, t) {
        const char *name = json_string_value(t);
        if (!name || strpbrk(name, "*?[") || taken(user, name) ||
            declared_anywhere(config, by_name, docs, "command_tools", name) ||
            declared_anywhere(config, by_name, docs, "mcp_servers", name))
            continue;
        json_t *line = json_sprintf(
            "tools entry \"%s\" names no known tool (%s)", name,
            name[0] == '!' ? "`!` does not take a tool away: tools lists what the agent may call"
            : strstr(name, "__")
                ? "no MCP server named before its __ is declared"
                : "check the name with `vigil tool list`; a program embedding libvigil may "
                  "register it");
        if (!line || json_array_append_new(w, line)) {
            json_decref(w);
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
        }
    }
    *out = w;
    return VIGIL_OK;
}

/* ---- what a new declaration reaches -------------------------------------------------------- */

/* Whether the allowlist entry pattern can name a tool of the MCP server server (SERVER__TOOL):
 * its part before the first wildcard agrees with "SERVER__". */
static int reaches_server(const char *pattern, const char *server)
{
    char prefix[300];
    int n = snprintf(prefix, sizeof prefix, "%s__", server);
    size_t lit = strcspn(pattern, "*?[");
    if (!pattern[lit]) /* no wildcard: the name itself */
        return !strncmp(pattern, prefix, (size_t)n);
    return !strncmp(pattern, prefix, lit < (size_t)n ? lit : (size_t)n);
}

int vg_manifest_allowlist_reaches(const json_t *config, const char *name, int server,
                                  const char **entry)
{
    json_t *t;
    size_t i;
    json_array_foreach (json_object_get(config, "tools"), i, t) {
        const char *p = json_string_value(t);
        if (p && (server ? reaches_server(p, name) : !fnmatch(p, name, 0))) {
            if (entry)
                *entry = p;
            return 1;
        }
    }
    return 0;
}

/* Whether name under key is new: declared by no kept agent, not by the config file, and by no
 * manifest of docs before doc (so two manifests declaring it are said once). */
static int declared_before(const json_t *doc, const json_t *docs, const json_t *by_name,
                           const json_t *config, const char *key, const char *name)
{
    const char *k;
    json_t *a, *d;
    size_t i;
    if (json_object_get(json_object_get(config, key), name))
        return 1;
    json_object_foreach ((json_t *)by_name, k, a) {
        if (json_is_object(a) &&
            json_object_get(json_object_get(json_object_get(a, "config"), key), name))
            return 1;
    }
    json_array_foreach (docs, i, d) {
        if (json_object_get(d, "doc") == doc)
            break;
        if (json_object_get(json_object_get(json_object_get(d, "doc"), key), name))
            return 1;
    }
    return 0;
}

struct reach {
    const char *what; /* "command tool \"x\"" or "MCP server \"x\"'s tools (x__*)" */
    const char *name; /* the tool's or server's name */
    int server;       /* name is an MCP server's */
    int dry_run;      /* "would be", not "is now" */
    json_t *out;      /* the messages */
};

/* One other agent (its name and config): a message when its allowlist reaches r's name. */
static vigil_code reach_one(struct reach *r, const char *agent, const json_t *config)
{
    const char *entry = NULL;
    if (!vg_manifest_allowlist_reaches(config, r->name, r->server, &entry))
        return VIGIL_OK;
    json_t *m = json_sprintf("%s %s by agent \"%s\" (its tools entry \"%s\")", r->what,
                             r->dry_run  ? "would be callable"
                             : r->server ? "are now callable"
                                         : "is now callable",
                             agent, entry);
    return m && !json_array_append_new(r->out, m) ? VIGIL_OK : VIGIL_ENOMEM;
}

/* Every agent other than doc's whose allowlist reaches r's name: the kept ones (as they will
 * be: one applied now is read from its manifest) and the other manifests applied now. */
static vigil_code reach_others(struct reach *r, const json_t *doc, const json_t *docs,
                               const json_t *by_name)
{
    const char *self = json_string_value(json_object_get(doc, "name")), *k;
    json_t *a, *d;
    size_t i;
    vigil_code rc = VIGIL_OK;
    json_object_foreach ((json_t *)by_name, k, a) {
        int now = 0;
        json_array_foreach (docs, i, d) {
            const char *n = json_string_value(json_object_get(json_object_get(d, "doc"), "name"));
            now |= n && !strcmp(n, k);
        }
        if (!rc && json_is_object(a) && !now && strcmp(k, self ? self : ""))
            rc = reach_one(r, k, json_object_get(a, "config"));
    }
    json_array_foreach (docs, i, d) {
        const json_t *other = json_object_get(d, "doc");
        const char *n = json_string_value(json_object_get(other, "name"));
        if (!rc && other != doc && n && strcmp(n, self ? self : ""))
            rc = reach_one(r, n, other);
    }
    return rc;
}

vigil_code vg_manifest_reach_notices(const json_t *doc, const json_t *docs, const json_t *by_name,
                                     const json_t *config, int dry_run, json_t **out,
                                     vigil_error *err)
{
    static const char *const keys[] = {"command_tools", "mcp_servers"};
    struct reach r = {.dry_run = dry_run, .out = json_array()};
    vigil_code rc = r.out ? VIGIL_OK : VIGIL_ENOMEM;
    for (size_t k = 0; !rc && k < VG_ARRAY_LEN(keys); k++) {
        const char *name;
        json_t *decl;
        json_object_foreach (json_object_get(doc, keys[k]), name, decl) {
            if (rc || declared_before(doc, docs, by_name, config, keys[k], name))
                continue;
            char what[400];
            if (k == 0)
                snprintf(what, sizeof what, "command tool \"%s\"", name);
            else
                snprintf(what, sizeof what, "MCP server \"%s\"'s tools (%s__*)", name, name);
            r.what = what, r.name = name, r.server = k == 1;
            rc = reach_others(&r, doc, docs, by_name);
        }
    }
    if (rc) {
        json_decref(r.out);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    }
    *out = r.out;
    return VIGIL_OK;
}
