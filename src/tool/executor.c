/*
 * executor.c: the tool registry and the gated, idempotent executor (docs/internals/TOOLS.md). A
 * call passes the gates in a fixed order (resolution, arguments, kill switches, wake reason, scope,
 * operation replay, budget, approval), records an `action` message before and a `toolResult`
 * message after, and for a mutating tool keeps an `operation` record (started before the side
 * effect, finished with the result after) and, when the effect leaves the agent domain, a saga
 * record (journal_pending -> journal_done -> agent_done). A finished operation id never runs
 * twice; a started one found later is settled without repeating the effect (see settle()).
 */
#include "base/common.h"

#include "base/json.h"

#include "agent/agent.h"
#include "base/hash.h"
#include "journal/journal.h"
#include "os/clock.h"
#include "tool/schema.h"
#include "os/ids.h"
#include "os/proc.h"
#include "tool/tool.h"

#include <fnmatch.h>
#include <pthread.h>

#define APPROVAL_TTL_MS (24LL * 3600 * 1000)

struct entry {
    struct vg_tool_def *def;    /* owned */
    struct vg_tool_provider *p; /* borrowed from providers[] */
};

struct vg_tool_executor {
    struct vg_env *env;
    struct entry *tools;
    size_t n, cap;
    struct vg_tool_provider **providers; /* owned */
    size_t np;
    /* Contracts a deferred provider's new list replaced: a call parked on another fiber may
     * still read one, so they are freed with the executor. */
    struct vg_tool_def **retired;
    size_t nretired;
    vg_tool_scope_fn scope_fn;
    void *scope_user;
    vg_tool_step_fn step_fn; /* NULL but in the crash tests */
    void *step_user;
};

/* Everything one call carries between the gates. */
struct call_st {
    const char *agent_id, *run_key, *run_id, *tool, *wake;
    char thread[200];
    const struct entry *e; /* &entry, or NULL: unknown tool */
    struct entry entry;    /* a copy: the registry may change while the call is parked */
    json_t *agent;         /* owned: agent record */
    json_t *config;        /* a reference: the agent's, or its copy narrowed by a grant */
    json_t *args;          /* owned copy */
    json_t *scopes;        /* owned: sorted allowed scopes */
    char *canon;           /* owned: canonical arguments, as stored and shown */
    char *hashed;          /* owned: their hashed text where it differs (reals), else NULL */
    char args_hash[65];
    char scope_snapshot[1024];
    char targets[1024];
    char op_id[65];
    char starter[37]; /* this call's start of the operation (op_write): saga_effect_done */
    char action_id[201];
    int preview_only;
    int op_recorded; /* an operation record exists for this call */
    int op_absent;   /* read in this call's write transaction: none yet (its put reads nothing) */
    int hand_marked; /* listed among this process's running hand calls (hand_mark) */
    json_t *op_kept; /* owned: the operation record as this call last wrote it, or NULL */
    int64_t op_rev;  /* its revision then */
    int saga;        /* a saga record exists for this call */
    int finish_open; /* the caller asked to commit the finishing transaction (ctx) */
    int start_open;  /* the caller's transaction is left open for the call's start (ctx) */
    /* The caller's charge held back from its open transaction (ctx), until written: NULL */
    const struct vg_budget_charge *carry;
    int *carry_written;
    vigil_code (*fence)(void *user, struct vg_env *env, vigil_error *err); /* ctx's, or NULL */
    void *fence_user;
    const struct vg_tool_call_ctx *ctx; /* the caller's (result_end) */
};

static const char *or_(const char *a, const char *b)
{
    return a ? a : b;
}

/* ---- registry ------------------------------------------------------------------------------- */

vigil_code vg_tool_executor_new(struct vg_env *env, struct vg_tool_executor **out, vigil_error *err)
{
    struct vg_tool_executor *x = vg_calloc(1, sizeof *x);
    if (!x)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating the tool executor");
    x->env = env;
    *out = x;
    return VIGIL_OK;
}

void vg_tool_executor_free(struct vg_tool_executor *x)
{
    if (!x)
        return;
    for (size_t i = 0; i < x->n; i++)
        vg_tool_def_free(x->tools[i].def);
    for (size_t i = 0; i < x->np; i++)
        vg_tool_provider_destroy(x->providers[i]);
    for (size_t i = 0; i < x->nretired; i++)
        vg_tool_def_free(x->retired[i]);
    vg_free(x->retired);
    vg_free(x->tools);
    vg_free(x->providers);
    vg_free(x);
}

static struct entry *find(struct vg_tool_executor *x, const char *name)
{
    for (size_t i = 0; name && i < x->n; i++)
        if (!strcmp(x->tools[i].def->name, name))
            return &x->tools[i];
    return NULL;
}

static struct entry *resolve(struct vg_tool_executor *x, const char *name);

const struct vg_tool_def *vg_tool_executor_find(struct vg_tool_executor *x, const char *name)
{
    struct entry *e = resolve(x, name);
    return e ? e->def : NULL;
}

/* Register the tools of list as p's. strict: a name taken by another provider fails (and the
 * caller undoes); else that tool is left out and the others registered. */
static vigil_code add_listed(struct vg_tool_executor *x, struct vg_tool_provider *p, json_t *list,
                             int strict, vigil_error *err)
{
    json_t *c;
    size_t i;
    vigil_code rc;
    json_array_foreach (list, i, c) {
        struct vg_tool_def *d = NULL;
        if ((rc = vg_tool_def_parse(c, &d, err))) {
            if (strict)
                return rc;
            continue;
        }
        if (find(x, d->name)) {
            vg_tool_def_free(d);
            if (strict)
                return VG_FAIL(err, VIGIL_EEXISTS, "a tool named \"%s\" is already registered",
                               json_string_value(json_object_get(c, "name")));
            continue;
        }
        if (x->n == x->cap) {
            size_t cap = x->cap ? x->cap * 2 : 16;
            struct entry *t = vg_realloc(x->tools, cap * sizeof *t);
            if (!t) {
                vg_tool_def_free(d);
                return VG_FAIL(err, VIGIL_ENOMEM, "out of memory registering tools");
            }
            x->tools = t;
            x->cap = cap;
        }
        x->tools[x->n++] = (struct entry){d, p};
    }
    return VIGIL_OK;
}

vigil_code vg_tool_executor_add(struct vg_tool_executor *x, struct vg_tool_provider *p,
                                vigil_error *err)
{
    json_t *list = NULL;
    size_t first = x->n;
    vigil_code rc;
    struct vg_tool_provider **pp = vg_realloc(x->providers, (x->np + 1) * sizeof *pp);
    if (!pp) {
        vg_tool_provider_destroy(p);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory adding a tool provider");
    }
    x->providers = pp;
    x->providers[x->np++] = p;
    if (vg_tool_provider_deferred_prefix(p))
        return VIGIL_OK; /* listed when one of its tools is first needed */
    if (!(rc = vg_tool_provider_list(p, &list, err)) && !(rc = add_listed(x, p, list, 1, err))) {
        json_decref(list);
        return VIGIL_OK;
    }
    /* Undo this provider's entries; the provider itself is dropped. */
    while (x->n > first)
        vg_tool_def_free(x->tools[--x->n].def);
    x->np--;
    vg_tool_provider_destroy(p);
    json_decref(list);
    return rc;
}

/* List a deferred provider again: its old entries go, the new list's come (a name another
 * provider holds is left out). A failed list leaves it with no tools; the provider says why. */
static void relist(struct vg_tool_executor *x, struct vg_tool_provider *p)
{
    json_t *list = NULL;
    vigil_error e = {0};
    size_t kept = 0;
    for (size_t i = 0; i < x->n; i++) {
        if (x->tools[i].p != p) {
            x->tools[kept++] = x->tools[i];
            continue;
        }
        struct vg_tool_def **r = vg_realloc(x->retired, (x->nretired + 1) * sizeof *r);
        if (!r) {
            x->tools[kept++] = x->tools[i]; /* kept registered: better stale than freed early */
            continue;
        }
        x->retired = r;
        x->retired[x->nretired++] = x->tools[i].def;
    }
    x->n = kept;
    if (vg_tool_provider_list(p, &list, &e) == VIGIL_OK)
        (void)add_listed(x, p, list, 0, &e);
    json_decref(list);
}

/* Whether one of the globs could match a name starting with prefix: its literal head (up to
 * the first wildcard) and the prefix agree as far as both go. */
static int globs_may_match_prefix(json_t *patterns, const char *prefix)
{
    size_t i;
    json_t *v;
    json_array_foreach (patterns, i, v) {
        const char *g = json_string_value(v);
        size_t head = g ? strcspn(g, "*?[\\") : 0, n = strlen(prefix);
        if (g && !strncmp(g, prefix, head < n ? head : n))
            return 1;
    }
    return 0;
}

/* List the stale deferred providers that matter: for a tool name, those whose prefix starts
 * it; for an agent's config, those its allowlist could reach; with neither, all of them. */
static void refresh_deferred(struct vg_tool_executor *x, const char *name, json_t *config)
{
    for (size_t i = 0; i < x->np; i++) {
        struct vg_tool_provider *p = x->providers[i];
        const char *pre = vg_tool_provider_deferred_prefix(p);
        if (!pre || !vg_tool_provider_stale(p))
            continue;
        if (name && strncmp(name, pre, strlen(pre)) != 0)
            continue;
        if (config && !globs_may_match_prefix(json_object_get(config, "tools"), pre))
            continue;
        relist(x, p);
    }
}

/* List again the deferred providers whose prefix starts name and that may serve it though
 * their fresh list lacks it (a list from a cache: the server may have a new tool). */
static void ask_deferred(struct vg_tool_executor *x, const char *name)
{
    for (size_t i = 0; i < x->np; i++) {
        struct vg_tool_provider *p = x->providers[i];
        const char *pre = vg_tool_provider_deferred_prefix(p);
        if (pre && !strncmp(name, pre, strlen(pre)) && vg_tool_provider_may_serve(p, name))
            relist(x, p);
    }
}

/* A tool by name, listing a deferred provider that may serve it when it is not known yet. A
 * known tool never re-lists here: a list that changed is taken at the next turn's tool list,
 * not in the middle of a batch of calls. */
static struct entry *resolve(struct vg_tool_executor *x, const char *name)
{
    struct entry *e = find(x, name);
    if (!e && name) {
        refresh_deferred(x, name, NULL);
        e = find(x, name);
    }
    if (!e && name) {
        ask_deferred(x, name);
        e = find(x, name);
    }
    return e;
}

void vg_tool_executor_set_scope_resolver(struct vg_tool_executor *x, vg_tool_scope_fn fn,
                                         void *user)
{
    x->scope_fn = fn;
    x->scope_user = user;
}

void vg_tool_executor_set_step_hook(struct vg_tool_executor *x, vg_tool_step_fn fn, void *user)
{
    x->step_fn = fn;
    x->step_user = user;
}

/* vg_json_array_sort's order for the contracts: objects by their "name". */
static int by_name(const void *a, const void *b)
{
    const char *x = json_string_value(json_object_get(*(json_t *const *)a, "name"));
    const char *y = json_string_value(json_object_get(*(json_t *const *)b, "name"));
    return strcmp(x, y);
}

vigil_code vg_tool_executor_contracts(struct vg_tool_executor *x, json_t **out, vigil_error *err)
{
    refresh_deferred(x, NULL, NULL);
    json_t *a = json_array();
    for (size_t i = 0; a && i < x->n; i++)
        if (json_array_append(a, x->tools[i].def->contract)) {
            json_decref(a);
            a = NULL;
        }
    if (!a)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing tools");
    (void)vg_json_array_sort(a, by_name);
    *out = a;
    return VIGIL_OK;
}

/* ---- per-agent resolution ------------------------------------------------------------------- */

static int str_in(json_t *arr, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach (arr, i, v)
        if (json_is_string(v) && !strcmp(json_string_value(v), s))
            return 1;
    return 0;
}

/* Whether allowed (a list of scopes) covers scope: a scope is a path, and an allowed scope
 * covers itself and every scope under it ("work" covers "work/task-1"; "work/task-1" covers
 * neither "work" nor "work/task-2"), so a host can scope an agent to one entity of a group
 * (docs/tools.md, "Which tools an agent may call"). */
static int scope_covered(json_t *allowed, const char *scope)
{
    size_t i;
    json_t *v;
    json_array_foreach (allowed, i, v) {
        const char *a = json_string_value(v);
        size_t n = a ? strlen(a) : 0;
        if (a && !strncmp(a, scope, n) && (scope[n] == '\0' || scope[n] == '/'))
            return 1;
    }
    return 0;
}

static int glob_in(json_t *patterns, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach (patterns, i, v)
        if (json_is_string(v) && fnmatch(json_string_value(v), name, 0) == 0)
            return 1;
    return 0;
}

/* Capabilities a manifest grants by a section of its own: "spawn" by spawn: {enabled: true}
 * (the orchestrator's tools, src/orch: spawning is off unless the agent's kind enables it). */
static int held_by_manifest(json_t *config, const char *cap)
{
    return cap && !strcmp(cap, "spawn") &&
           json_is_true(json_object_get(json_object_get(config, "spawn"), "enabled"));
}

/* Manifest allowlist (and the run's grant, when it has one), then the capability profile. Deny
 * by default: no config.tools, no tools. 1 when the agent may call d; else 0, and why (which of
 * them lacks it, so the user knows what to add) in why when why is not NULL. */
static int may_call_why(json_t *config, const struct vg_tool_def *d, char *why, size_t n)
{
    size_t i;
    json_t *cap, *granted = json_object_get(config, "granted_tools");
    if (!glob_in(json_object_get(config, "tools"), d->name)) {
        if (why)
            snprintf(why, n, "it is not in the agent's manifest tools (add it there)");
        return 0;
    }
    if (granted && !glob_in(granted, d->name)) {
        if (why)
            snprintf(why, n, "it is not among the tools this run was granted");
        return 0;
    }
    json_array_foreach (json_object_get(d->contract, "capabilities"), i, cap) {
        const char *c = json_string_value(cap);
        if (!str_in(json_object_get(config, "capabilities"), c) && !held_by_manifest(config, c)) {
            if (why && !strcmp(c, "spawn")) /* granted by the flag, which also enables it */
                snprintf(why, n,
                         "spawning is off for this agent (enable it in the manifest: "
                         "spawn: {enabled: true})");
            else if (why)
                snprintf(why, n,
                         "it needs the capability \"%s\", not in the agent's manifest "
                         "capabilities (add it there)",
                         c);
            return 0;
        }
    }
    return 1;
}

static int may_call(json_t *config, const struct vg_tool_def *d)
{
    return may_call_why(config, d, NULL, 0);
}

static vigil_code agent_config(struct vg_env *env, const char *agent_id, json_t **agent,
                               vigil_error *err)
{
    if (!agent_id || !*agent_id)
        return VG_FAIL(err, VIGIL_EINVAL, "no agent id given");
    return vg_agent_get_shared(env, agent_id, agent, err); /* every caller only reads it */
}

static vigil_code narrow_to_grant(struct vg_env *env, const char *run_key, json_t **config,
                                  vigil_error *err);

vigil_code vg_tool_executor_visible_tools(struct vg_tool_executor *x, const char *agent_id,
                                          const char *run_key, json_t **tools_for_model,
                                          vigil_error *err)
{
    json_t *agent = NULL, *out = json_array(), *config = NULL;
    vigil_code rc = out ? agent_config(x->env, agent_id, &agent, err)
                        : VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing tools");
    if (!rc && (config = json_incref(json_object_get(agent, "config"))))
        rc = narrow_to_grant(x->env, run_key, &config, err); /* the model sees what it may call */
    if (rc) {
        json_decref(config);
        json_decref(agent);
        json_decref(out);
        return rc;
    }
    refresh_deferred(x, NULL, config); /* at a turn's start: a changed list is taken here */
    for (size_t i = 0; i < x->n; i++) {
        json_t *c = x->tools[i].def->contract;
        if (!may_call(config, x->tools[i].def))
            continue;
        if (json_array_append_new(out,
                                  json_pack("{s:O, s:O, s:O}", "name", json_object_get(c, "name"),
                                            "description", json_object_get(c, "description"),
                                            "input_schema", json_object_get(c, "input_schema")))) {
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing tools");
            break;
        }
    }
    json_decref(config);
    json_decref(agent);
    if (rc) {
        json_decref(out);
        return rc;
    }
    (void)vg_json_array_sort(out, by_name);
    *tools_for_model = out;
    return VIGIL_OK;
}

vigil_code vg_tool_executor_describe(struct vg_tool_executor *x, const char *agent_id, json_t **out,
                                     vigil_error *err)
{
    json_t *agent = NULL, *config = NULL, *a = json_array();
    vigil_code rc = a ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing tools");
    if (!rc && agent_id && !(rc = agent_config(x->env, agent_id, &agent, err)))
        config = json_object_get(agent, "config");
    if (!rc)
        refresh_deferred(x, NULL, config);
    for (size_t i = 0; !rc && i < x->n; i++) {
        json_t *c = json_copy(x->tools[i].def->contract);
        if (config && !may_call(config, x->tools[i].def)) {
            json_decref(c);
            continue;
        }
        if (!c ||
            json_object_set_new(c, "source", json_string(vg_tool_provider_source(x->tools[i].p))) ||
            json_array_append_new(a, c))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing tools");
    }
    json_decref(agent);
    if (rc) {
        json_decref(a);
        return rc;
    }
    (void)vg_json_array_sort(a, by_name);
    *out = a;
    return VIGIL_OK;
}

vigil_code vg_tool_agent_may_call(struct vg_tool_executor *x, const char *agent_id,
                                  const char *tool_name, int *may, vigil_error *err)
{
    json_t *agent = NULL;
    struct entry *e = resolve(x, tool_name);
    vigil_code rc = agent_config(x->env, agent_id, &agent, err);
    if (rc)
        return rc;
    *may = e && may_call(json_object_get(agent, "config"), e->def);
    json_decref(agent);
    return VIGIL_OK;
}

/* ---- operation ids -------------------------------------------------------------------------- */

static char *canonical(json_t *args)
{
    return vg_json_dump(args, 1);
}

/* The text a call's operation id and argument hash are taken over: the canonical text, but with
 * reals as %.17g (vg_json_hash_text), so that ids of calls started before session 37 (whose
 * canonical text was that) stay the same. *owned is set when it is not canon itself, for
 * arguments holding a real; NULL when out of memory. */
static const char *hashed_text(json_t *args, const char *canon, char **owned)
{
    *owned = NULL;
    if (!vg_json_has_real(args))
        return canon;
    return *owned = vg_json_hash_text(args);
}

/* The operation id from the arguments' canonical text (the gate has it already). */
static void operation_id_of(const char *agent_id, const char *run_key, const char *tool,
                            const char *canon, const char *scope_snapshot, const char *targets,
                            char out[65])
{
    char inner[65];
    const char *in[] = {tool, canon, scope_snapshot ? scope_snapshot : "", targets ? targets : ""};
    vg_sha256_hex_parts(inner, in, 4);
    /* The agent is part of the id: the same call under the same run key by another agent is
     * another operation, never answered with this one's recorded result. */
    const char *outer[] = {agent_id ? agent_id : "", run_key, inner};
    vg_sha256_hex_parts(out, outer, 3);
}

vigil_code vg_tool_operation_id(const char *agent_id, const char *run_key, const char *tool,
                                json_t *args, const char *scope_snapshot, const char *targets,
                                char out[65], vigil_error *err)
{
    char *canon = vg_json_hash_text(args);
    if (!canon)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory hashing tool arguments");
    operation_id_of(agent_id, run_key, tool, canon, scope_snapshot, targets, out);
    vg_free(canon);
    return VIGIL_OK;
}

/* ---- outcome -------------------------------------------------------------------------------- */

void vg_tool_outcome_release(struct vg_tool_outcome *o)
{
    json_decref(o->result);
    json_decref(o->changed_entity_ids);
    json_decref(o->changed_tokens);
    json_decref(o->decisions);
    o->result = o->changed_entity_ids = o->changed_tokens = o->decisions = NULL;
    vg_free(o->content);
    vg_free(o->result_text);
    o->content = o->result_text = NULL;
}

json_t *vg_tool_outcome_json(const struct vg_tool_outcome *o)
{
    json_t *j =
        json_pack("{s:s, s:s, s:O?, s:O?, s:O?, s:b}", "status", o->status, "operation_id",
                  o->operation_id, "result", o->result, "changed_entity_ids", o->changed_entity_ids,
                  "changed_tokens", o->changed_tokens, "replayed", o->replayed);
    if (!j)
        return NULL;
    if (o->error_code[0]) {
        json_object_set_new(j, "error_code", json_string(o->error_code));
        json_object_set_new(j, "error_message", json_string(o->error_message));
    }
    if (o->approval_id[0])
        json_object_set_new(j, "approval_id", json_string(o->approval_id));
    if (o->action_id[0])
        json_object_set_new(j, "action_id", json_string(o->action_id));
    if (o->result_id[0])
        json_object_set_new(j, "result_id", json_string(o->result_id));
    return j;
}

char *vg_tool_outcome_text(const struct vg_tool_outcome *o)
{
    struct vg_tool_outcome shell = *o;
    struct vg_json_splice sp = {"result", o->result_text, 0, 0};
    struct vg_buf b;
    if (o->result_text)
        shell.result = NULL; /* written "result": null, the place the text goes */
    json_t *j = vg_tool_outcome_json(&shell);
    vg_buf_init(&b, 0);
    if (!j || vg_json_put_canonical_splice(&b, j, &sp, o->result_text ? 1 : 0) || b.fail) {
        json_decref(j);
        vg_buf_release(&b);
        return NULL;
    }
    json_decref(j);
    return vg_buf_detach(&b, NULL);
}

/* The response's result as text, encoded here when the provider did not give it (NULL when out
 * of memory: the records then encode the tree, as before). */
static void result_text_once(struct vg_tool_response *r)
{
    if (r->result && !r->result_text)
        r->result_text = vg_json_dump(r->result, 1);
}

static void outcome_set(struct vg_tool_outcome *o, const struct call_st *st,
                        struct vg_tool_response *r)
{
    o->code = r->code;
    snprintf(o->status, sizeof o->status, "%s",
             r->code      ? "error"
             : r->partial ? "partial"
                          : "success");
    snprintf(o->error_code, sizeof o->error_code, "%s", vg_tool_code_name(r->code));
    snprintf(o->error_message, sizeof o->error_message, "%s", r->code ? r->message : "");
    snprintf(o->operation_id, sizeof o->operation_id, "%s", st->op_id);
    snprintf(o->action_id, sizeof o->action_id, "%s", st->action_id);
    json_decref(o->result);
    json_decref(o->changed_entity_ids);
    json_decref(o->changed_tokens);
    o->result = r->result ? json_incref(r->result) : NULL;
    o->changed_entity_ids = json_incref(r->changed_entity_ids);
    o->changed_tokens = json_incref(r->changed_tokens);
    json_decref(o->decisions);
    o->decisions = json_incref(r->decisions);
    vg_free(o->result_text);
    result_text_once(r);
    o->result_text = r->result_text && o->result ? vg_strdup(r->result_text) : NULL;
}

/* The recorded outcome object of an operation (stored in its record). */
static json_t *outcome_record(const struct vg_tool_outcome *o)
{
    return vg_tool_outcome_json(o);
}

static void outcome_from_record(struct vg_tool_outcome *o, json_t *rec)
{
    enum vg_tool_code c = VG_TOOL_OK;
    vg_tool_code_parse(json_string_value(json_object_get(rec, "error_code")), &c);
    o->code = c;
    snprintf(o->status, sizeof o->status, "%s",
             or_(json_string_value(json_object_get(rec, "status")), "error"));
    snprintf(o->error_code, sizeof o->error_code, "%s",
             or_(json_string_value(json_object_get(rec, "error_code")), ""));
    snprintf(o->error_message, sizeof o->error_message, "%s",
             or_(json_string_value(json_object_get(rec, "error_message")), ""));
    vg_tool_outcome_release(o);
    json_t *v = json_object_get(rec, "result");
    o->result = v && !json_is_null(v) ? json_incref(v) : NULL;
    o->changed_entity_ids = json_incref(json_object_get(rec, "changed_entity_ids"));
    o->changed_tokens = json_incref(json_object_get(rec, "changed_tokens"));
}

/* ---- records -------------------------------------------------------------------------------- */

/* One record per fact: a call inside a run leaves its wake reason and run key to the run's
 * record (the message names the run); only a call outside any run keeps them here. */
static vigil_code append_action(struct vg_tool_executor *x, struct call_st *st, vigil_error *err)
{
    json_t *meta =
        json_pack("{s:s, s:s, s:s, s:s, s:O, s:b}", "actionType", "tool_call", "toolName", st->tool,
                  "operationId", st->op_id, "argumentsHash", st->args_hash, "scopeSnapshot",
                  st->scopes, "previewOnly", st->preview_only);
    if (meta && !(st->run_id && *st->run_id) &&
        (json_object_set_new(meta, "wakeReason", json_string(st->wake)) ||
         json_object_set_new(meta, "runKey", json_string(st->run_key)))) {
        json_decref(meta);
        meta = NULL;
    }
    if (!meta)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory recording a tool call");
    struct vg_message_in m = {.agent_id = st->agent_id,
                              .thread_id = st->thread,
                              .kind = VG_MSG_ACTION,
                              .content = st->canon,
                              .content_type = "application/json",
                              .metadata = meta,
                              .run_id = st->run_id};
    char mid[37], *start = NULL;
    vigil_code rc = VIGIL_OK;
    if (st->ctx && st->ctx->action_start) { /* the caller's start of the call, in its row */
        rc = st->ctx->action_start(st->ctx->action_start_user, mid, &start, err);
        m.id = start ? mid : NULL;
        m.journal_start = start;
    }
    if (!rc)
        rc = vg_message_append(x->env, &m, st->action_id, err);
    vg_free(start);
    json_decref(meta);
    return rc;
}

static vigil_code append_result(struct vg_tool_executor *x, struct call_st *st,
                                struct vg_tool_outcome *o, vigil_error *err)
{
    char *content = NULL;
    /* One record per fact: the outcome (status, operation id, changed entities and tokens,
     * error, approval, replayed) is the content's envelope; the metadata adds only what the
     * envelope lacks. */
    json_t *meta = json_pack("{s:s, s:s}", "actionRefId", st->action_id, "toolName", st->tool);
    if (!meta)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory recording a tool result");
    content = vg_tool_outcome_text(o);
    struct vg_message_in m = {.agent_id = st->agent_id,
                              .thread_id = st->thread,
                              .kind = VG_MSG_TOOL_RESULT,
                              .content = content ? content : "",
                              .content_type = "application/json",
                              .metadata = meta,
                              .run_id = st->run_id};
    char mid[37], *end = NULL;
    vigil_code rc =
        content ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory recording a result");
    if (!rc && st->ctx && st->ctx->result_end) { /* the caller's end of the call, in its row */
        vg_ids_new(x->env->ids, mid);
        m.id = mid;
        rc = st->ctx->result_end(st->ctx->result_end_user, mid, content, o->code != VG_TOOL_OK,
                                 o->error_code, json_array_size(o->decisions) > 0, &end, err);
        m.journal_end = end;
    }
    if (!rc)
        rc = vg_message_append(x->env, &m, o->result_id, err);
    vg_free(end);
    json_decref(meta);
    vg_free(o->content);
    o->content = rc ? NULL : content; /* what the model is shown: encoded once */
    if (rc)
        vg_free(content);
    return rc;
}

static vigil_code saga_write(struct vg_tool_executor *x, struct call_st *st, const char *phase,
                             const char *status, const char *last_error, json_t *result,
                             vigil_error *err)
{
    json_t *old = NULL, *b;
    int64_t rev = 0;
    char at[32];
    vg_time_format_ms(at, vg_env_now(x->env));
    vigil_error miss = {0};
    vigil_code rc = vg_error_unless_missing(
        err, &miss, vg_env_get_json(x->env, "saga", st->op_id, &old, &rev, &miss));
    if (rc && rc != VIGIL_ENOTFOUND)
        return rc;
    b = old ? old : json_pack("{s:s, s:s}", "operation_id", st->op_id, "created_at", at);
    if (!b)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing a saga record");
    json_object_set_new(b, "agent_id", json_string(st->agent_id));
    json_object_set_new(b, "run_key", json_string(st->run_key));
    json_object_set_new(b, "tool_name", json_string(st->tool));
    json_object_set_new(b, "phase", json_string(phase));
    json_object_set_new(b, "status", json_string(status));
    json_object_set_new(b, "last_error", last_error ? json_string(last_error) : json_null());
    json_object_set_new(b, "updated_at", json_string(at));
    if (result)
        json_object_set(b, "outcome", result);
    rc = old ? vg_env_update_json(x->env, "saga", st->op_id, st->agent_id, phase, status,
                                  vg_env_now(x->env), b, rev, err)
             : vg_env_put_json(x->env, "saga", st->op_id, st->agent_id, phase, status,
                               vg_env_now(x->env), b, 0, err);
    json_decref(b);
    st->saga = 1;
    return rc;
}

/* The operation record this call writes next: the one it wrote last, kept (its finishing write
 * then reads nothing back: the record holds the arguments), or the stored one, or a new one. */
static vigil_code op_body(struct vg_tool_executor *x, struct call_st *st, int kept, json_t **b,
                          int64_t *rev, vigil_error *err)
{
    char at[32];
    if (kept) {
        *b = json_incref(st->op_kept);
        *rev = st->op_rev;
        return VIGIL_OK;
    }
    vigil_error miss = {0}; /* the operation's first attempt: no record yet */
    vigil_code rc =
        st->op_absent
            ? VIGIL_ENOTFOUND
            : vg_error_unless_missing(
                  err, &miss, vg_env_get_json(x->env, "operation", st->op_id, b, rev, &miss));
    st->op_absent = 0;
    if (rc != VIGIL_ENOTFOUND)
        return rc;
    *rev = 0;
    vg_time_format_ms(at, vg_env_now(x->env));
    *b = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?, s:s, s:O, s:s, s:s}", "operation_id", st->op_id,
                   "agent_id", st->agent_id, "tool", st->tool, "run_key", st->run_key, "thread_id",
                   st->thread, "run_id", st->run_id, "wake_reason", st->wake, "arguments", st->args,
                   "started_at", at, "action_id", st->action_id);
    return *b ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing an operation record");
}

/* The calls made outside any run that this process runs now, by operation id: a repeat from
 * this process (another thread of `vigil serve`) knows whether the first still runs, which the
 * process's own liveness cannot tell. A call that ended without writing its end (a failed write,
 * a crash a test simulates in-process) is not listed, so its repeat settles it. When the list is
 * full a call is not listed: its repeat settles it as before. */
#define HAND_RUNNING_MAX 64
static pthread_mutex_t hand_mu = PTHREAD_MUTEX_INITIALIZER;
static char hand_running[HAND_RUNNING_MAX][65];

/* on 1: list op_id (1 when listed); 0: take it off; -1: 1 when listed. */
static int hand_mark(const char *op_id, int on)
{
    int found = 0, free_at = -1;
    pthread_mutex_lock(&hand_mu);
    for (int i = 0; i < HAND_RUNNING_MAX && !found; i++) {
        if (!strcmp(hand_running[i], op_id)) {
            found = 1;
            if (on == 0)
                hand_running[i][0] = '\0';
        } else if (!hand_running[i][0] && free_at < 0) {
            free_at = i;
        }
    }
    if (on == 1 && !found && free_at >= 0) {
        snprintf(hand_running[free_at], 65, "%s", op_id);
        found = 1;
    }
    pthread_mutex_unlock(&hand_mu);
    return on == 0 ? 0 : found;
}

/* The process that starts a call made outside any run (`vigil tool call`, the HTTP route): no
 * lease says whether it still runs, so the operation names it (E31 of trial E). */
static json_t *holder_self(void)
{
    struct vg_proc_id me;
    vg_proc_self(&me);
    return json_pack("{s:s, s:I, s:s}", "host", me.host, "pid", (json_int_t)me.pid, "start",
                     me.start);
}

/* The operation's body as text (owned; NULL when out of memory), with what the call has as text
 * already written as it is: its arguments' canonical text when b holds this call's arguments,
 * and its outcome's (then "outcome" is set to null in b, the place the text goes). */
static char *op_text(const struct call_st *st, json_t *b, const char *outcome)
{
    struct vg_json_splice sp[2] = {{"arguments", NULL, 0, 0}, {"outcome", outcome, 0, 0}};
    struct vg_buf t;
    if (st->canon && json_object_get(b, "arguments") == st->args)
        sp[0].raw = st->canon;
    vg_buf_init(&t, 0);
    if ((outcome && json_object_set_new(b, "outcome", json_null())) ||
        vg_json_put_canonical_splice(&t, b, sp, 2) || t.fail) {
        vg_buf_release(&t);
        return NULL;
    }
    return vg_buf_detach(&t, NULL);
}

/* Write the operation record with status; outcome (its envelope as canonical text) or NULL. */
static vigil_code op_write_from(struct vg_tool_executor *x, struct call_st *st, int kept,
                                const char *status, const char *outcome, vigil_error *err)
{
    json_t *b = NULL;
    int64_t rev = 0;
    char at[32];
    vg_time_format_ms(at, vg_env_now(x->env));
    vigil_code rc = op_body(x, st, kept, &b, &rev, err);
    if (rc)
        return rc;
    json_object_set_new(b, "status", json_string(status));
    if (!strcmp(status, "started") && st->starter[0])
        json_object_set_new(b, "starter", json_string(st->starter));
    if (strcmp(status, "started"))
        json_object_del(b, "holder"); /* it ended: nobody holds it */
    else if (!(st->run_id && *st->run_id) && json_object_set_new(b, "holder", holder_self()))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing an operation record");
    else if (!(st->run_id && *st->run_id) && !st->hand_marked)
        st->hand_marked = hand_mark(st->op_id, 1);
    if (rc) {
        json_decref(b);
        return rc;
    }
    char *text = NULL;
    if ((outcome && json_object_set_new(b, "finished_at", json_string(at))) ||
        !(text = op_text(st, b, outcome))) {
        json_decref(b);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing an operation record");
    }
    rc = rev ? vg_env_update_text(x->env, "operation", st->op_id, st->agent_id, status, st->tool,
                                  vg_env_now(x->env), text, rev, err)
             : vg_env_put_text(x->env, "operation", st->op_id, st->agent_id, status, st->tool,
                               vg_env_now(x->env), text, 0, err);
    vg_free(text);
    json_decref(st->op_kept);
    /* Kept for the call's next write, which a finished record never has: its tree's outcome is
     * the placeholder, not the text written. */
    st->op_kept = rc || outcome ? NULL : json_incref(b);
    st->op_rev = rev + 1;
    json_decref(b);
    st->op_recorded = 1;
    return rc;
}

/* A kept record another writer moved since (a successor's take-over) is read again. */
static vigil_code op_write(struct vg_tool_executor *x, struct call_st *st, const char *status,
                           const char *outcome, vigil_error *err)
{
    vigil_code rc = st->op_kept ? op_write_from(x, st, 1, status, outcome, err) : VIGIL_ENOTFOUND;
    if (rc == VIGIL_ECONFLICT || rc == VIGIL_ENOTFOUND)
        rc = op_write_from(x, st, 0, status, outcome, err);
    return rc;
}

/*
 * The saga's record of an effect that happened, by the process that ran it. Guarded by the
 * operation's own row: it lands only while the operation is still the one this call started
 * (status started, its starter this call's). A successor settling the call first takes the
 * operation over under the same row lock (settle_take_over), so of the two exactly one decides
 * how the call ends: after this record, the successor settles from it (no second effect, no
 * person asked); after the successor's take-over, this record is refused (ESTATE) and the
 * successor's settling stands (docs/scale-out.md).
 */
static vigil_code saga_effect_done(struct vg_tool_executor *x, struct call_st *st,
                                   const char *status, const char *last_error, json_t *result,
                                   vigil_error *err)
{
    json_t *op = NULL;
    vigil_code rc = vg_store_begin(x->env->store, err);
    if (!rc)
        rc = vg_store_lock_for_write(x->env->store, "operation", st->op_id, err);
    if (!rc)
        rc = vg_env_get_json(x->env, "operation", st->op_id, &op, NULL, err);
    if (!rc && (strcmp(or_(json_string_value(json_object_get(op, "status")), ""), "started") ||
                strcmp(or_(json_string_value(json_object_get(op, "starter")), ""), st->starter)))
        rc = VG_FAIL(err, VIGIL_ESTATE,
                     "operation %s was taken over by another run while its effect ran: this "
                     "run's record of the effect is not written",
                     st->op_id);
    if (!rc)
        rc = saga_write(x, st, "journal_done", status, last_error, result, err);
    json_decref(op);
    return vg_store_end(x->env->store, rc, err);
}

/* Record a refusal or a failure before anything ran: action + toolResult in one transaction. */
static vigil_code refuse(struct vg_tool_executor *x, struct call_st *st, enum vg_tool_code code,
                         const char *msg, struct vg_tool_outcome *out, vigil_error *err)
{
    struct vg_tool_response r = {.code = code};
    snprintf(r.message, sizeof r.message, "%s", msg);
    vigil_code rc = vg_store_begin(x->env->store, err);
    if (rc)
        return rc;
    rc = append_action(x, st, err);
    outcome_set(out, st, &r);
    if (!rc)
        rc = append_result(x, st, out, err);
    return vg_store_end(x->env->store, rc, err);
}

/* Union of two string arrays (either may be NULL) as a new array. */
static json_t *str_union(json_t *a, json_t *b)
{
    json_t *u = json_array(), *v;
    size_t i;
    if (!u)
        return NULL;
    json_array_foreach (a, i, v)
        if (json_is_string(v) && !str_in(u, json_string_value(v)))
            json_array_append(u, v);
    json_array_foreach (b, i, v)
        if (json_is_string(v) && !str_in(u, json_string_value(v)))
            json_array_append(u, v);
    return u;
}

/*
 * Write everything that follows an effect: the toolResult message, tool_effect links, the
 * notification tokens, the finished operation and the saga's agent_done. Runs inside the
 * caller's transaction.
 */
static vigil_code finish(struct vg_tool_executor *x, struct call_st *st, struct vg_tool_response *r,
                         struct vg_tool_outcome *out, vigil_error *err)
{
    vigil_code rc;
    size_t i;
    json_t *id;
    if (r->code == VG_TOOL_OK) {
        /* Declared tokens always travel with a success; the tool may add its own. */
        json_t *declared =
            json_object_get(json_object_get(st->e->def->contract, "side_effects"), "tokens");
        json_t *u = str_union(declared, r->changed_tokens);
        if (!u)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory finishing a tool call");
        json_decref(r->changed_tokens);
        r->changed_tokens = u;
        if (!r->changed_entity_ids && !(r->changed_entity_ids = json_array()))
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory finishing a tool call");
    }
    outcome_set(out, st, r);
    if ((rc = append_result(x, st, out, err)))
        return rc;
    json_array_foreach (r->changed_entity_ids, i, id) {
        json_t *meta = json_pack("{s:s, s:s}", "tool", st->tool, "operation_id", st->op_id);
        if (!meta)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory linking a tool effect");
        rc = json_is_string(id) ? vg_link_add(x->env, st->agent_id, "tool_effect", out->result_id,
                                              json_string_value(id), meta, err)
                                : VIGIL_OK;
        json_decref(meta);
        if (rc)
            return rc;
    }
    if (r->code == VG_TOOL_OK) {
        size_t n = json_array_size(r->changed_tokens) + json_array_size(r->changed_entity_ids);
        const char **tok = n ? vg_calloc(n, sizeof *tok) : NULL;
        size_t k = 0;
        if (n && !tok)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory raising tool tokens");
        json_array_foreach (r->changed_tokens, i, id)
            tok[k++] = json_string_value(id);
        json_array_foreach (r->changed_entity_ids, i, id)
            if (json_is_string(id))
                tok[k++] = json_string_value(id);
        if (k)
            vg_env_notify(x->env, tok, k);
        vg_free(tok);
    }
    /* A call made by hand that changes nothing keeps an operation too, written once at its
     * end: the record `vigil tool calls` lists (E4 of session 31's trial). The gate replays only
     * mutating tools' operations, so a repeat of it still reads afresh. */
    if (st->op_recorded || (!st->e->def->mutating && !(st->run_id && *st->run_id))) {
        char *rec = vg_tool_outcome_text(out);
        if (!rec)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory finishing an operation");
        rc = op_write(x, st, "finished", rec, err);
        vg_free(rec);
        if (rc)
            return rc;
    }
    if (st->saga)
        rc = saga_write(x, st, "agent_done", r->code ? "failed" : "completed",
                        r->code ? r->message : NULL, NULL, err);
    return rc;
}

/* Validate a success's result against the output schema; a mismatch becomes tool_failed. */
static vigil_code check_output(struct call_st *st, struct vg_tool_response *r, vigil_error *err)
{
    vigil_error e2 = {0};
    if (r->code || !st->e->def->output || st->preview_only)
        return VIGIL_OK;
    json_t *res = r->result ? r->result : json_null();
    vigil_code rc = vg_schema_validate(st->e->def->output, res, NULL, &e2);
    if (rc == VIGIL_EINVAL) {
        vg_tool_response_fail(r, VG_TOOL_FAILED,
                              "tool result does not match its output "
                              "schema: %s",
                              e2.message);
        return VIGIL_OK;
    }
    if (rc)
        vg_error_copy(err, &e2);
    return rc;
}

static struct vg_tool_request make_req(struct vg_tool_executor *x, struct call_st *st)
{
    return (struct vg_tool_request){.env = x->env,
                                    .def = st->e->def,
                                    .tool = st->tool,
                                    .agent_id = st->agent_id,
                                    .run_key = st->run_key,
                                    .thread_id = st->thread,
                                    .run_id = st->run_id,
                                    .wake_reason = st->wake,
                                    .operation_id = st->op_id,
                                    .args = st->args,
                                    .preview_only = st->preview_only,
                                    .halt = st->ctx ? st->ctx->halt : NULL,
                                    .cancelled = st->ctx ? st->ctx->cancelled : NULL,
                                    .cancelled_user = st->ctx ? st->ctx->cancelled_user : NULL,
                                    .journal_run = st->ctx ? st->ctx->journal_run : NULL};
}

/* The step hook's word on going on past this step (tool.h), or OK when there is none. */
static vigil_code at_step(const struct vg_tool_executor *x, enum vg_tool_step step,
                          vigil_error *err)
{
    return x->step_fn ? x->step_fn(x->step_user, step, err) : VIGIL_OK;
}

static vigil_code in_doubt_item(struct vg_tool_executor *x, struct call_st *st, const char *why,
                                vigil_error *err);

/* A non-idempotent mutating call that timed out: its request reached the tool, which may have
 * done the effect before it was stopped (an MCP server is only asked to cancel; a program is
 * killed wherever it was). Answering a plain `timeout` invited a retry under a new run key that
 * did it twice (E9 of session 31's trial): it is in doubt, as after a crash, and *why says so.
 * A program killed by a signal someone else sent is the same case (H14 of session 34's). */
static void stopped_in_doubt(const struct vg_tool_def *d, struct vg_tool_response *r, char *why,
                             size_t n)
{
    int timed_out = r->code == VG_TOOL_TIMEOUT;
    if (!d->mutating || d->idem != VG_IDEM_NON_IDEMPOTENT || !(timed_out || r->stopped))
        return;
    char said[256];
    snprintf(said, sizeof said, "%s", r->message);
    snprintf(why, n,
             "the tool was stopped after its request was sent (%.200s): its effect is unknown",
             said);
    vg_tool_response_release(r);
    if (timed_out)
        vg_tool_response_fail(r, VG_TOOL_IN_DOUBT,
                              "the tool timed out and may have taken effect; a human must resolve "
                              "it (applied or retry)");
    else
        vg_tool_response_fail(r, VG_TOOL_IN_DOUBT,
                              "the tool was stopped while it ran (%.160s) and may have taken "
                              "effect; a human must resolve it (applied or retry)",
                              said);
}

/* A transactional provider's effect in a level of its own inside the open transaction, then the
 * call's finish at the level around it: an effect that failed or broke is undone alone and its
 * failure recorded. `fence`: the caller's lease is checked first (the transaction did not check
 * it yet). */
static vigil_code effect_in_tx(struct vg_tool_executor *x, struct call_st *st, int fence,
                               struct vg_tool_outcome *out, vigil_error *err)
{
    struct vg_store *store = x->env->store;
    struct vg_tool_response r = {0};
    struct vg_tool_request q = make_req(x, st);
    vigil_error e2 = {0};
    vigil_code rc = vg_store_begin(store, err);
    if (rc)
        return rc;
    /* The effect commits with its record: fenced like the start, so a caller whose lease passed
     * to a successor meanwhile (a stall longer than the lease) changes nothing. */
    if (fence && st->fence && (rc = st->fence(st->fence_user, x->env, err)))
        return vg_store_end(store, rc, NULL);
    rc = vg_tool_provider_call(st->e->p, &q, &r, &e2);
    if (!rc)
        rc = check_output(st, &r, &e2);
    if (!rc && r.code == VG_TOOL_OK) {
        vigil_code hrc = at_step(x, VG_TOOL_STEP_AFTER_EFFECT, err);
        if (!hrc) /* else the crash loses the uncommitted effect */
            rc = finish(x, st, &r, out, err);
        rc = vg_store_end(store, hrc ? hrc : rc, hrc ? NULL : err);
        vg_tool_response_release(&r);
        return hrc ? hrc : rc;
    }
    vg_store_end(store, VIGIL_ERROR, NULL);
    if (rc) {
        vg_tool_response_release(&r);
        vg_tool_response_fail(&r, VG_TOOL_FAILED, "%s", e2.message);
    }
    rc = finish(x, st, &r, out, err);
    vg_tool_response_release(&r);
    return rc;
}

/*
 * Run the effect and record its end. Transactional providers' mutating calls run inside the
 * finishing transaction (a first call's start joins it: call_run_in_one; here, a call a recovery
 * runs again); others run between two transactions with the saga marking where they are. A call
 * that changes nothing has no effect to commit with its record, so it runs outside any transaction
 * too: a slow read (a memory search embedding its query over the network) holds no write lock, and
 * on a worker's fiber it parks while the worker's other runs go on.
 */
static vigil_code run_effect(struct vg_tool_executor *x, struct call_st *st,
                             struct vg_tool_outcome *out, vigil_error *err)
{
    struct vg_tool_response r = {0};
    struct vg_tool_request q = make_req(x, st);
    vigil_code rc;
    const struct vg_tool_def *d = st->e->def;
    char why[400] = "";

    if ((st->e->p->methods->caps & VG_TOOL_PROVIDER_CAP_TRANSACTIONAL) && d->mutating) {
        if ((rc = vg_store_begin(x->env->store, err)))
            return rc;
        rc = vg_store_end(x->env->store, effect_in_tx(x, st, 1, out, err), err);
        if (!rc && !vg_store_in_tx(x->env->store)) /* committed, not nested in a caller's */
            vg_tool_provider_after_commit(st->e->p, &q);
        return rc ? rc : at_step(x, VG_TOOL_STEP_AFTER_FINISHED, err);
    }
    vigil_error e2 = {0};
    rc = vg_tool_provider_call(st->e->p, &q, &r, &e2);
    if (rc) {
        vg_tool_response_release(&r);
        vg_tool_response_fail(&r, VG_TOOL_FAILED, "%s", e2.message);
    }
    stopped_in_doubt(d, &r, why, sizeof why);
    if ((rc = check_output(st, &r, err)) || (rc = at_step(x, VG_TOOL_STEP_AFTER_EFFECT, err))) {
        vg_tool_response_release(&r);
        return rc;
    }
    if (d->mutating) {
        /* The outside write is done (or failed): say so before the agent side. */
        struct vg_tool_outcome tmp = {0};
        outcome_set(&tmp, st, &r);
        json_t *rec = outcome_record(&tmp);
        vg_tool_outcome_release(&tmp);
        rc = rec ? saga_effect_done(x, st, r.code ? "failed" : "pending", r.code ? r.message : NULL,
                                    rec, err)
                 : VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing a saga record");
        json_decref(rec);
        if (rc || (rc = at_step(x, VG_TOOL_STEP_AFTER_JOURNAL, err))) {
            vg_tool_response_release(&r);
            return rc;
        }
    }
    /* The caller that asked for it commits the finish with its own records of the call (the
     * agent loop's end of the call): one commit, not two. Nothing durable is lost: this commit
     * was a group commit under the loop, and a crash before it settles the started operation. */
    int open = st->finish_open && !vg_store_in_tx(x->env->store);
    if ((rc = open ? vg_store_begin_flat(x->env->store, err)
                   : vg_store_begin(x->env->store, err)) == VIGIL_OK) {
        rc = finish(x, st, &r, out, err);
        if (!rc && why[0]) /* the operation goes to a person, as after a crash */
            rc = in_doubt_item(x, st, why, err);
        if (rc || !open)
            rc = vg_store_end(x->env->store, rc, err);
        else
            out->tx_open = 1;
    }
    vg_tool_response_release(&r);
    return rc || out->tx_open ? rc : at_step(x, VG_TOOL_STEP_AFTER_FINISHED, err);
}

/* ---- settling operations a crash left started ----------------------------------------------- */

/* RERUN: the effect did not happen or may happen again; LOOKUP_EMPTY: the tool's lookup found
 * no effect (yet: a lookup may lag the effect), see recover_one. */
enum settle { SETTLE_RERUN, SETTLE_DONE, SETTLE_IN_DOUBT, SETTLE_LOOKUP_EMPTY };

/*
 * The operation already had an in-doubt item. While it is pending the person has yet to
 * answer and nothing changes. Once answered "retry", the retried attempt went in doubt too: the
 * item becomes pending again, with the earlier answers kept under "history", so a person is
 * asked again (*raised = 1).
 */
static vigil_code in_doubt_again(struct vg_tool_executor *x, struct call_st *st, json_t *fresh,
                                 int *raised, vigil_error *err)
{
    json_t *old = NULL;
    int64_t rev = 0;
    vigil_code rc = vg_env_get_json(x->env, "in_doubt", st->op_id, &old, &rev, err);
    if (rc)
        return rc;
    const char *status = json_string_value(json_object_get(old, "status"));
    if (!status || !strcmp(status, "pending")) {
        json_decref(old);
        return VIGIL_OK;
    }
    json_t *history = json_object_get(old, "history");
    history = json_is_array(history) ? json_incref(history) : json_array();
    json_object_del(old, "history");
    /* The _new setters take their argument even when they fail. */
    int failed = !history;
    if (failed)
        json_decref(old);
    else if ((failed = json_array_append_new(history, old)))
        json_decref(history);
    else
        failed = json_object_set_new(fresh, "history", history);
    if (failed)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory recording an in-doubt operation");
    rc = vg_env_update_json(x->env, "in_doubt", st->op_id, st->agent_id, "pending", st->tool,
                            vg_env_now(x->env), fresh, rev, err);
    if (!rc)
        *raised = 1;
    return rc;
}

static vigil_code in_doubt_item(struct vg_tool_executor *x, struct call_st *st, const char *why,
                                vigil_error *err)
{
    char at[32];
    vg_time_format_ms(at, vg_env_now(x->env));
    json_t *b = json_pack("{s:s, s:s, s:s, s:s, s:O, s:s, s:s, s:s, s:s?, s:s}", "operation_id",
                          st->op_id, "agent_id", st->agent_id, "tool", st->tool, "run_key",
                          st->run_key, "arguments", st->args, "status", "pending", "reason", why,
                          "created_at", at, "run_id", st->run_id, "thread_id", st->thread);
    if (!b)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory recording an in-doubt operation");
    vigil_code rc = vg_store_begin(x->env->store, err);
    if (!rc) {
        int inserted = 0;
        char *text = vg_json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
        struct vg_record rec = {.kind = "in_doubt",
                                .id = st->op_id,
                                .owner = st->agent_id,
                                .k1 = "pending",
                                .k2 = st->tool,
                                .seq = vg_env_now(x->env),
                                .at = vg_env_now(x->env),
                                .body = text};
        rc = text ? vg_store_put(x->env->store, &rec, VG_PUT_IF_ABSENT, &inserted, err)
                  : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
        vg_free(text);
        if (!rc && !inserted)
            rc = in_doubt_again(x, st, b, &inserted, err);
        if (!rc)
            rc = op_write(x, st, "in_doubt", NULL, err);
        if (!rc && inserted) {
            const char *tokens[] = {"TOOL_IN_DOUBT", st->agent_id, st->op_id};
            vg_env_notify(x->env, tokens, 3);
        }
        rc = vg_store_end(x->env->store, rc, err);
    }
    json_decref(b);
    return rc;
}

/* Finish an operation whose effect is known to have happened, with the given response. */
static vigil_code settle_finish(struct vg_tool_executor *x, struct call_st *st,
                                struct vg_tool_response *r, struct vg_tool_outcome *out,
                                vigil_error *err)
{
    vigil_code rc = vg_store_begin(x->env->store, err);
    if (rc)
        return rc;
    rc = finish(x, st, r, out, err);
    return vg_store_end(x->env->store, rc, err);
}

/*
 * In the caller's transaction: lock the operation's row, read its saga (*saga owned, NULL when
 * none), and unless the saga holds the effect's outcome, stamp the operation as this call's.
 * A process still running the effect (stalled past its lease) then cannot record it any more
 * (saga_effect_done): what is settled from here stands.
 */
static vigil_code settle_take_over(struct vg_tool_executor *x, struct call_st *st, json_t **saga,
                                   vigil_error *err)
{
    json_t *op = NULL;
    int64_t rev = 0;
    *saga = NULL;
    vigil_code rc = vg_store_lock_for_write(x->env->store, "operation", st->op_id, err);
    vigil_error miss = {0};
    if (!rc && (rc = vg_error_unless_missing(
                    err, &miss, vg_env_get_json(x->env, "saga", st->op_id, saga, NULL, &miss))) ==
                   VIGIL_ENOTFOUND)
        rc = VIGIL_OK;
    st->saga = *saga != NULL;
    if (rc || (*saga && !strcmp(or_(json_string_value(json_object_get(*saga, "phase")), ""),
                                "journal_done")))
        return rc;
    if ((rc = vg_env_get_json(x->env, "operation", st->op_id, &op, &rev, err)))
        return rc;
    vg_ids_new(x->env->ids, st->starter);
    const char *status = or_(json_string_value(json_object_get(op, "status")), "started");
    rc = json_object_set_new(op, "starter", json_string(st->starter))
             ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory settling an operation")
             : vg_env_update_json(x->env, "operation", st->op_id, st->agent_id, status, st->tool,
                                  vg_env_now(x->env), op, rev, err);
    json_decref(op);
    return rc;
}

static vigil_code commit_caller_start(struct vg_tool_executor *x, struct call_st *st,
                                      vigil_error *err);

/*
 * An operation record says started but not finished: the process died somewhere between.
 * Never repeat an effect that may have happened: a saga at journal_done carries the outcome;
 * a transactional provider's effect rolled back with the crash; a provider that can look up
 * its effect decides; an idempotent tool may run again; anything else is in doubt.
 */
static vigil_code settle(struct vg_tool_executor *x, struct call_st *st, json_t *op,
                         enum settle *how, struct vg_tool_outcome *out, vigil_error *err)
{
    json_t *saga = NULL;
    vigil_code rc;
    const struct vg_tool_def *d = st->e->def;
    const char *aid = json_string_value(json_object_get(op, "action_id"));
    snprintf(st->action_id, sizeof st->action_id, "%s", aid ? aid : "");
    st->op_recorded = 1;
    if ((rc = vg_store_begin(x->env->store, err)))
        return rc;
    rc = settle_take_over(x, st, &saga, err);
    if (rc || !saga ||
        strcmp(or_(json_string_value(json_object_get(saga, "phase")), ""), "journal_done")) {
        if ((rc = vg_store_end(x->env->store, rc, err))) {
            json_decref(saga);
            return rc;
        }
    } else {
        struct vg_tool_outcome rec = {0};
        struct vg_tool_response r = {0};
        outcome_from_record(&rec, json_object_get(saga, "outcome"));
        r.code = rec.code;
        r.partial = !strcmp(rec.status, "partial");
        snprintf(r.message, sizeof r.message, "%s", rec.error_message);
        r.result = rec.result, rec.result = NULL;
        r.changed_entity_ids = rec.changed_entity_ids, rec.changed_entity_ids = NULL;
        r.changed_tokens = rec.changed_tokens, rec.changed_tokens = NULL;
        vg_tool_outcome_release(&rec);
        json_decref(saga);
        rc = finish(x, st, &r, out, err);
        vg_tool_response_release(&r);
        *how = SETTLE_DONE;
        return vg_store_end(x->env->store, rc, err);
    }
    json_decref(saga);
    if (st->e->p->methods->caps & VG_TOOL_PROVIDER_CAP_TRANSACTIONAL) {
        *how = SETTLE_RERUN;
        return VIGIL_OK;
    }
    if (vg_tool_provider_can_lookup(st->e->p)) {
        struct vg_tool_request q = make_req(x, st);
        struct vg_tool_response r = {0};
        int found = 0;
        /* The lookup asks the outside world (an MCP server, a command) and may take long: the
         * caller's start left open is committed first, with the take-over above, so no write
         * transaction (SQLite's one writer, PostgreSQL's lease row) is held while it answers. */
        if ((rc = commit_caller_start(x, st, err)))
            return rc;
        if ((rc = vg_tool_provider_lookup(st->e->p, &q, &found, &r, err))) {
            vg_tool_response_release(&r);
            return rc;
        }
        if (found) {
            rc = settle_finish(x, st, &r, out, err);
            vg_tool_response_release(&r);
            *how = SETTLE_DONE;
            return rc;
        }
        vg_tool_response_release(&r);
        *how = SETTLE_LOOKUP_EMPTY;
        return VIGIL_OK;
    }
    if (d->idem == VG_IDEM_IDEMPOTENT || !d->mutating) {
        *how = SETTLE_RERUN;
        return VIGIL_OK;
    }
    *how = SETTLE_IN_DOUBT;
    return in_doubt_item(x, st, "the process stopped while the tool ran; its effect is unknown",
                         err);
}

/* ---- the gates ------------------------------------------------------------------------------ */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The agent's allowed scopes, sorted, as an array and a snapshot string. */
static vigil_code scope_snapshot(struct call_st *st, vigil_error *err)
{
    json_t *a = json_object_get(st->config, "allowed_scopes"), *v;
    size_t i, n = 0, len = 0;
    const char **s = vg_calloc(json_array_size(a) + 1, sizeof *s);
    if (!s || !(st->scopes = json_array())) {
        vg_free(s);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading scopes");
    }
    json_array_foreach (a, i, v)
        if (json_is_string(v))
            s[n++] = json_string_value(v);
    qsort(s, n, sizeof *s, cmp_str);
    st->scope_snapshot[0] = '\0';
    for (i = 0; i < n; i++) {
        json_array_append_new(st->scopes, json_string(s[i]));
        len +=
            (size_t)snprintf(st->scope_snapshot + VG_MIN(len, sizeof st->scope_snapshot - 1),
                             sizeof st->scope_snapshot - VG_MIN(len, sizeof st->scope_snapshot - 1),
                             "%s%s", i ? "," : "", s[i]);
    }
    vg_free(s);
    if (len >= sizeof st->scope_snapshot) {
        /* Too long to keep verbatim: its hash stands in (ids stay stable). */
        char h[65];
        char *canon = vg_json_hash_text(st->scopes);
        if (!canon)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading scopes");
        vg_sha256_hex(h, canon, strlen(canon));
        vg_free(canon);
        snprintf(st->scope_snapshot, sizeof st->scope_snapshot, "sha256:%s", h);
    }
    return VIGIL_OK;
}

/* Deny by default, fail closed: returns VG_TOOL_OUT_OF_SCOPE with a message, or OK. */
static enum vg_tool_code check_scope(struct vg_tool_executor *x, struct call_st *st, char *msg,
                                     size_t n)
{
    const struct vg_tool_def *d = st->e->def;
    size_t i, j, len = 0;
    json_t *name;
    st->targets[0] = '\0';
    if (d->scope_rule == VG_SCOPE_AGENT || d->scope_rule == VG_SCOPE_UNSCOPED)
        return VG_TOOL_OK;
    json_array_foreach (d->scope_args, i, name) {
        const char *an = json_string_value(name);
        json_t *v = json_object_get(st->args, an), *one;
        json_t *vals = json_is_array(v) ? json_incref(v) : json_pack("[O?]", v);
        if (!vals || !json_array_size(vals)) {
            json_decref(vals);
            snprintf(msg, n, "the scope of argument \"%s\" cannot be resolved: it is missing", an);
            return VG_TOOL_OUT_OF_SCOPE;
        }
        json_array_foreach (vals, j, one) {
            char scope[256];
            const char *s = json_string_value(one);
            if (!s) {
                json_decref(vals);
                snprintf(msg, n, "the scope of argument \"%s\" cannot be resolved", an);
                return VG_TOOL_OUT_OF_SCOPE;
            }
            if (d->scope_rule == VG_SCOPE_TARGET) {
                if (!x->scope_fn || !x->scope_fn(x->scope_user, s, scope, sizeof scope) ||
                    !scope[0]) {
                    snprintf(msg, n, "target \"%s\" (argument \"%s\") has no resolvable scope", s,
                             an);
                    json_decref(vals);
                    return VG_TOOL_OUT_OF_SCOPE;
                }
            } else {
                snprintf(scope, sizeof scope, "%s", s);
            }
            if (!scope_covered(st->scopes, scope)) {
                snprintf(msg, n,
                         "scope \"%s\" of argument \"%s\" is not among the agent's "
                         "allowed scopes",
                         scope, an);
                json_decref(vals);
                return VG_TOOL_OUT_OF_SCOPE;
            }
            len += (size_t)snprintf(st->targets + VG_MIN(len, sizeof st->targets - 1),
                                    sizeof st->targets - VG_MIN(len, sizeof st->targets - 1),
                                    "%s=%s;", an, s);
        }
        json_decref(vals);
    }
    return VG_TOOL_OK;
}

static int needs_approval(struct call_st *st)
{
    return st->e->def->requires_approval ||
           glob_in(json_object_get(st->config, "require_approval"), st->tool);
}

static void st_release(struct call_st *st)
{
    if (st->hand_marked)
        hand_mark(st->op_id, 0);
    json_decref(st->config);
    json_decref(st->agent);
    json_decref(st->args);
    json_decref(st->scopes);
    json_decref(st->op_kept);
    vg_free(st->canon);
    vg_free(st->hashed);
}

/* The caller's held-back charge (carry), into the caller's open transaction on its own: the
 * transaction is about to commit without the call's start. */
static vigil_code carry_write(struct vg_tool_executor *x, struct call_st *st, vigil_error *err)
{
    if (!st->carry)
        return VIGIL_OK;
    vigil_code rc = vg_budget_charge(x->env, st->agent_id, st->carry, err);
    if (!rc) {
        *st->carry_written = 1;
        st->carry = NULL;
    }
    return rc;
}

/* The caller's transaction left open for the call's start (start_open) began flat: a level
 * rolled back in it takes the whole of it (the caller's turn and the call's start). Before a
 * dry run that is rolled back, and before the tool is asked anything while a person's approval
 * is still to come, it is committed as the caller would have: the call is refused pending the
 * approval, so no effect follows and no barrier is due, and no write lock is held while the
 * tool answers. */
static vigil_code commit_caller_start(struct vg_tool_executor *x, struct call_st *st,
                                      vigil_error *err)
{
    struct vg_store *store = x->env->store;
    if (!st->start_open || vg_store_depth(store) != 1)
        return VIGIL_OK;
    st->start_open = 0;
    vigil_code rc = carry_write(x, st, err);
    return rc ? rc : vg_store_commit(store, err);
}

/* Produce the preview an approval shows: the tool's own when it has one. */
static vigil_code make_preview(struct vg_tool_executor *x, struct call_st *st, json_t **out,
                               vigil_error *err)
{
    *out = NULL;
    if (json_is_true(json_object_get(st->e->def->contract, "preview"))) {
        struct vg_tool_response r = {0};
        int save = st->preview_only;
        st->preview_only = 1;
        struct vg_tool_request q = make_req(x, st);
        vigil_code rc = commit_caller_start(x, st, err);
        if (rc || (rc = vg_store_begin(x->env->store, err)))
            return rc;
        rc = vg_tool_provider_call(st->e->p, &q, &r, err);
        vg_store_end(x->env->store, VIGIL_ERROR, NULL); /* a preview never writes */
        st->preview_only = save;
        if (!rc && r.code == VG_TOOL_OK && r.result)
            *out = json_incref(r.result);
        vg_tool_response_release(&r);
        if (rc)
            return rc;
    }
    if (!*out)
        *out = json_pack("{s:s, s:O}", "tool", st->tool, "arguments", st->args);
    return *out ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory making a preview");
}

/* ---- the gate, step by step ----------------------------------------------------------------- */

/* A refusal decided by the checks of steps 1-5: recorded once the operation id is known. */
struct refusal {
    enum vg_tool_code code; /* VG_TOOL_OK: none */
    char msg[512];
};

static void set_entry(struct call_st *st, const struct entry *e)
{
    if (e)
        st->entry = *e;
    st->e = e ? &st->entry : NULL;
}

vigil_code vg_tool_grant_put(struct vg_env *env, const char *run_key, const char *agent_id,
                             json_t *tools, json_t *scopes, vigil_error *err)
{
    json_t *g = json_pack("{s:O?, s:O?}", "tools", tools, "scopes", scopes);
    vigil_code rc = g ? vg_env_put_json(env, "tool_grant", run_key, agent_id, "", "", 0, g,
                                        VG_PUT_IF_ABSENT, err)
                      : VG_FAIL(err, VIGIL_ENOMEM, "out of memory recording a grant");
    json_decref(g);
    return rc;
}

json_t *vg_tool_scopes_narrow(json_t *have, json_t *grant)
{
    json_t *kept = json_array(), *s;
    size_t i;
    int bad = !kept;
    /* The narrower of each pair that nests: a grant never widens, and a grant of one entity
     * of a group the agent may touch gives that entity alone. */
    json_array_foreach (have, i, s)
        if (!bad && json_is_string(s) && scope_covered(grant, json_string_value(s)) &&
            !str_in(kept, json_string_value(s)))
            bad = json_array_append(kept, s) != 0;
    json_array_foreach (grant, i, s)
        if (!bad && json_is_string(s) && !scope_covered(kept, json_string_value(s)) &&
            scope_covered(have, json_string_value(s)))
            bad = json_array_append(kept, s) != 0;
    if (bad) {
        json_decref(kept);
        return NULL;
    }
    return kept;
}

/* The run's grant narrows the agent's config for this call: the tools as a second allowlist
 * (may_call), the scopes as the intersection. *config (a reference the caller holds) is
 * replaced by a narrowed copy when the run has a grant: the agent's own config may be the env
 * memo's, shared by every run of the agent. */
static vigil_code narrow_to_grant(struct vg_env *env, const char *run_key, json_t **config_io,
                                  vigil_error *err)
{
    json_t *g = NULL, *tools, *scopes, *kept, *config;
    vigil_error miss = {0}; /* most runs have no grant */
    vigil_code rc =
        run_key ? vg_error_unless_missing(
                      err, &miss, vg_env_get_json(env, "tool_grant", run_key, &g, NULL, &miss))
                : VIGIL_ENOTFOUND;
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK;
    if (rc)
        return rc;
    if (!(config = json_copy(*config_io))) {
        json_decref(g);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a grant");
    }
    json_decref(*config_io);
    *config_io = config;
    /* A part the grant does not name (null: vg_tool_grant_put's NULL) is not narrowed. */
    if ((tools = json_object_get(g, "tools")) && !json_is_null(tools) &&
        json_object_set(config, "granted_tools", tools))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a grant");
    if (!rc && (scopes = json_object_get(g, "scopes")) && !json_is_null(scopes)) {
        if (!(kept = vg_tool_scopes_narrow(json_object_get(config, "allowed_scopes"), scopes)))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a grant");
        else
            json_object_set_new(config, "allowed_scopes", kept);
    }
    json_decref(g);
    return rc;
}

/* Everything a call needs before its gate: the agent's config (narrowed by the run's grant), a
 * copy of the arguments, the scope snapshot and the tool's entry (NULL: unknown). */
static vigil_code call_prepare(struct vg_tool_executor *x, const struct vg_tool_call_ctx *ctx,
                               const char *tool_name, json_t *args, struct call_st *st,
                               vigil_error *err)
{
    vigil_code rc;
    st->agent_id = ctx->agent_id;
    st->run_key = ctx->run_key;
    st->run_id = ctx->run_id;
    st->tool = tool_name;
    st->wake = ctx->wake_reason && *ctx->wake_reason ? ctx->wake_reason : "manual";
    st->preview_only = ctx->preview_only;
    st->finish_open = ctx->finish_open;
    st->start_open = ctx->start_open;
    if (ctx->start_open && ctx->carry && ctx->carry_written) {
        st->carry = ctx->carry;
        st->carry_written = ctx->carry_written;
    }
    st->fence = ctx->fence;
    st->fence_user = ctx->fence_user;
    st->ctx = ctx;
    if (ctx->thread_id)
        snprintf(st->thread, sizeof st->thread, "%s", ctx->thread_id);
    else
        snprintf(st->thread, sizeof st->thread, "%s:run:%.100s", st->agent_id, st->run_key);
    if ((rc = agent_config(x->env, st->agent_id, &st->agent, err)))
        return rc;
    st->config = json_incref(json_object_get(st->agent, "config"));
    if (st->config && (rc = narrow_to_grant(x->env, st->run_key, &st->config, err)))
        return rc;
    st->args = !args ? json_object() : ctx->args_fresh ? json_incref(args) : json_deep_copy(args);
    if (!st->args)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory preparing a tool call");
    if ((rc = scope_snapshot(st, err)))
        return rc;
    set_entry(st, resolve(x, tool_name));
    return VIGIL_OK;
}

/* 1. resolution: the tool exists and this agent may call it */
static void gate_resolution(struct call_st *st, struct refusal *r)
{
    if (!st->e) {
        r->code = VG_TOOL_UNKNOWN_TOOL;
        snprintf(r->msg, sizeof r->msg, "no tool named \"%s\"", st->tool);
    } else {
        char why[256];
        if (!may_call_why(st->config, st->e->def, why, sizeof why)) {
            r->code = VG_TOOL_NOT_ALLOWED;
            snprintf(r->msg, sizeof r->msg, "agent may not call \"%s\": %s", st->tool, why);
        }
    }
}

/* 2. arguments against the input schema, defaults filled in */
static vigil_code check_arguments(struct call_st *st, struct refusal *r, vigil_error *err)
{
    vigil_error e2 = {0};
    vigil_code rc;
    if (!json_is_object(st->args)) {
        r->code = VG_TOOL_INVALID_ARGUMENTS;
        snprintf(r->msg, sizeof r->msg, "arguments must be a JSON object");
    } else if ((rc = vg_schema_validate(st->e->def->input, st->args, NULL, &e2))) {
        if (rc != VIGIL_EINVAL) {
            vg_error_copy(err, &e2);
            return rc;
        }
        r->code = VG_TOOL_INVALID_ARGUMENTS;
        snprintf(r->msg, sizeof r->msg, "%s", e2.message);
    } else {
        return vg_schema_apply_defaults(st->e->def->input, st->args, err);
    }
    return VIGIL_OK;
}

/* Then the arguments' canonical form and hash, which every later step and record uses (a
 * refused call's too). */
static vigil_code gate_arguments(struct call_st *st, struct refusal *r, vigil_error *err)
{
    vigil_code rc;
    if (!r->code && (rc = check_arguments(st, r, err)))
        return rc;
    const char *hashed;
    if (!(st->canon = canonical(st->args)) ||
        !(hashed = hashed_text(st->args, st->canon, &st->hashed)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory preparing a tool call");
    vg_sha256_hex(st->args_hash, hashed, strlen(hashed));
    return VIGIL_OK;
}

/* 3. kill switches: mutating tools stop at once */
static vigil_code gate_kill_switches(struct vg_tool_executor *x, struct call_st *st,
                                     struct refusal *r, vigil_error *err)
{
    int on = 0;
    vigil_code rc;
    if (r->code || !st->e->def->mutating)
        return VIGIL_OK;
    if ((rc = vg_kill_active(x->env, st->agent_id, st->e->def->tool_class, &on, err)))
        return rc;
    if (on) {
        r->code = VG_TOOL_KILLED;
        snprintf(r->msg, sizeof r->msg,
                 "a kill switch stops mutating tools (global, agent or class \"%s\")",
                 st->e->def->tool_class);
    }
    return VIGIL_OK;
}

/* 4. wake reason */
static void gate_wake_reason(struct call_st *st, struct refusal *r)
{
    if (!r->code &&
        !str_in(json_object_get(st->e->def->contract, "allowed_wake_reasons"), st->wake)) {
        r->code = VG_TOOL_NOT_ALLOWED;
        snprintf(r->msg, sizeof r->msg, "tool \"%s\" may not run on a \"%s\" wake", st->tool,
                 st->wake);
    }
}

/* A preview changes nothing and is not an operation: the action, the tool's preview (its
 * writes discarded) and the result, in one transaction. */
static vigil_code call_preview(struct vg_tool_executor *x, struct call_st *st,
                               struct vg_tool_outcome *out, vigil_error *err)
{
    struct vg_tool_response r = {0};
    vigil_error e2 = {0};
    vigil_code rc;
    if (!json_is_true(json_object_get(st->e->def->contract, "preview")))
        return refuse(x, st, VG_TOOL_INVALID_ARGUMENTS, "this tool has no preview", out, err);
    if ((rc = vg_store_begin(x->env->store, err)))
        return rc;
    if (!(rc = append_action(x, st, err))) {
        struct vg_tool_request q = make_req(x, st);
        vigil_code prc = vg_store_begin(x->env->store, &e2);
        if (!prc) {
            prc = vg_tool_provider_call(st->e->p, &q, &r, &e2);
            vg_store_end(x->env->store, VIGIL_ERROR, NULL); /* discard any write */
        }
        if (prc)
            vg_tool_response_fail(&r, VG_TOOL_FAILED, "%s", e2.message);
        outcome_set(out, st, &r);
        rc = append_result(x, st, out, err);
    }
    rc = vg_store_end(x->env->store, rc, err);
    vg_tool_response_release(&r);
    return rc;
}

/* A finished operation's replay is recorded too, marked as such; it changes nothing. */
static vigil_code replay(struct vg_tool_executor *x, struct call_st *st, json_t *op,
                         struct vg_tool_outcome *out, vigil_error *err)
{
    vigil_code rc;
    outcome_from_record(out, json_object_get(op, "outcome"));
    out->replayed = 1;
    snprintf(out->operation_id, sizeof out->operation_id, "%s", st->op_id);
    if ((rc = vg_store_begin(x->env->store, err)))
        return rc;
    if (!(rc = append_action(x, st, err))) {
        snprintf(out->action_id, sizeof out->action_id, "%s", st->action_id);
        rc = append_result(x, st, out, err);
    }
    return vg_store_end(x->env->store, rc, err);
}

static const char in_doubt_text[] = "an earlier attempt of this operation may have taken "
                                    "effect; a human must resolve it (applied or retry)";

/* How long a call made outside any run counts as still running, at most: its process on
 * another host (whose life this host cannot see), or one here whose call failed to record its
 * end and left it started, must not hold its repeats off for ever. No tool call runs so long. */
#define HAND_CALL_STALE_MS (15 * 60 * 1000)

/* A started operation of a call made outside any run whose process still runs it: its effect
 * may be under way, so settling it now (as a crash) would put a clean effect in doubt. */
static int hand_call_live(struct vg_tool_executor *x, const struct call_st *st, json_t *op)
{
    json_t *h = json_object_get(op, "holder");
    const char *host = json_string_value(json_object_get(h, "host"));
    struct vg_proc_id me;
    int64_t started = 0;
    if (!h || !host)
        return 0; /* a run's call (its lease decides) or a record written before holders */
    if (vg_time_parse_ms(json_string_value(json_object_get(op, "started_at")), &started) ||
        vg_env_now(x->env) - started >= HAND_CALL_STALE_MS)
        return 0;
    vg_proc_self(&me);
    long pid = (long)json_integer_value(json_object_get(h, "pid"));
    const char *start = json_string_value(json_object_get(h, "start"));
    if (!strcmp(host, me.host) && pid == me.pid && start && !strcmp(start, me.start))
        return hand_mark(st->op_id, -1);
    return strcmp(host, me.host) || !vg_proc_gone(host, pid, start);
}

/* 6. the operation: replay a finished one, settle one a crash left started (*done = 1: the
 * call ended here) */
static vigil_code gate_operation(struct vg_tool_executor *x, struct call_st *st,
                                 struct vg_tool_outcome *out, int *done, vigil_error *err)
{
    json_t *op = NULL;
    int64_t rev;
    if (!st->e->def->mutating)
        return VIGIL_OK;
    vigil_error miss = {0}; /* a first call has no operation yet */
    vigil_code rc = vg_error_unless_missing(
        err, &miss, vg_env_get_json(x->env, "operation", st->op_id, &op, &rev, &miss));
    if (rc && rc != VIGIL_ENOTFOUND)
        return rc;
    rc = VIGIL_OK;
    const char *status = op ? json_string_value(json_object_get(op, "status")) : NULL;
    *done = status != NULL;
    if (status && !strcmp(status, "finished")) {
        rc = replay(x, st, op, out, err);
    } else if (status && !strcmp(status, "in_doubt")) {
        rc = refuse(x, st, VG_TOOL_IN_DOUBT, in_doubt_text, out, err);
    } else if (status && hand_call_live(x, st, op)) { /* nothing written: the caller may repeat */
        rc = VG_FAIL(
            err, VIGIL_EBUSY,
            "operation %s (tool \"%s\") is still running in process %lld: repeat this "
            "call once it has ended to read its result",
            st->op_id, st->tool,
            (long long)json_integer_value(json_object_get(json_object_get(op, "holder"), "pid")));
    } else if (status) {
        enum settle how = SETTLE_RERUN;
        if ((rc = settle(x, st, op, &how, out, err)) == VIGIL_OK) {
            *done = how == SETTLE_DONE || how == SETTLE_IN_DOUBT;
            if (how == SETTLE_IN_DOUBT)
                rc = refuse(x, st, VG_TOOL_IN_DOUBT, in_doubt_text, out, err);
        }
    }
    json_decref(op);
    return rc;
}

/* 7. budget */
static vigil_code gate_budget(struct vg_tool_executor *x, struct call_st *st,
                              struct vg_tool_outcome *out, int *done, vigil_error *err)
{
    const char *over = NULL;
    char msg[128];
    vigil_code rc = vg_budget_check_agent(x->env, st->agent_id, st->agent, st->carry, &over, err);
    if (rc || !over)
        return rc;
    *done = 1;
    snprintf(msg, sizeof msg, "the agent's daily %s budget is exhausted", over);
    return refuse(x, st, VG_TOOL_BUDGET_EXCEEDED, msg, out, err);
}

/* Ask a person: the approval request with its preview, and the call refused until then. */
static vigil_code request_approval(struct vg_tool_executor *x, struct call_st *st,
                                   struct vg_tool_outcome *out, vigil_error *err)
{
    json_t *preview = NULL, *request = NULL;
    char aid[37], msg[512];
    vigil_code rc = make_preview(x, st, &preview, err);
    if (rc)
        return rc;
    request = json_pack("{s:s, s:O, s:s, s:s, s:s, s:s?}", "tool", st->tool, "arguments", st->args,
                        "run_key", st->run_key, "thread_id", st->thread, "wake_reason", st->wake,
                        "run_id", st->run_id);
    rc = request ? vg_approval_request(x->env, st->agent_id, st->op_id, request, preview,
                                       APPROVAL_TTL_MS, aid, err)
                 : VG_FAIL(err, VIGIL_ENOMEM, "out of memory requesting approval");
    json_decref(preview);
    json_decref(request);
    if (rc)
        return rc;
    snprintf(out->approval_id, sizeof out->approval_id, "%s", aid);
    snprintf(msg, sizeof msg, "tool \"%s\" needs approval %s (vigil approve %s)", st->tool, aid,
             aid);
    return refuse(x, st, VG_TOOL_CONFIRMATION_REQUIRED, msg, out, err);
}

/* 8. approval: a rejected one refuses, a missing one is requested, an approved one passes */
static vigil_code gate_approval(struct vg_tool_executor *x, struct call_st *st,
                                struct vg_tool_outcome *out, int *done, vigil_error *err)
{
    json_t *ap = NULL;
    char msg[512];
    if (!needs_approval(st))
        return VIGIL_OK;
    vigil_code rc = vg_approval_for_operation(x->env, st->op_id, &ap, err);
    if (rc && rc != VIGIL_ENOTFOUND)
        return rc;
    const char *as = ap ? json_string_value(json_object_get(ap, "status")) : "";
    *done = strcmp(as, "approved") != 0;
    if (!strcmp(as, "rejected")) {
        snprintf(msg, sizeof msg, "approval %s was rejected: %s",
                 json_string_value(json_object_get(ap, "id")),
                 or_(json_string_value(json_object_get(ap, "reason")), "no reason given"));
        rc = refuse(x, st, VG_TOOL_REJECTED, msg, out, err);
    } else if (*done) {
        rc = request_approval(x, st, out, err);
    } else {
        rc = VIGIL_OK;
    }
    json_decref(ap);
    return rc;
}

/* The action, the started operation (and saga) of a mutating tool and the budget charge, in
 * one transaction fenced with the caller's lease. The charge takes the caller's held-back one
 * (carry) with it: one write of the day's usage a tool step, not two. `in_one`: inside the
 * call's one transaction (call_run_in_one), which the effect and the finish share: no level of
 * its own, and no started operation, which nothing could read before the finished one replaces
 * it in the same commit (the finish puts the operation once). */
static vigil_code record_started(struct vg_tool_executor *x, const struct vg_tool_call_ctx *ctx,
                                 struct call_st *st, int in_one, vigil_error *err)
{
    const struct vg_tool_def *d = st->e->def;
    vigil_code rc = in_one ? VIGIL_OK : vg_store_begin(x->env->store, err);
    if (rc)
        return rc;
    struct vg_budget_charge charge = {0};
    for (int k = 0; st->carry && k < VG_BUDGET_KIND_COUNT; k++)
        charge.v[k] = st->carry->v[k];
    charge.v[VG_BUDGET_TOOL_CALLS] += 1;
    /* The check above ("not run yet") and this write are fenced together: a caller whose lease
     * passed to a successor since that check fails here, before any effect. */
    rc = ctx->fence && d->mutating ? ctx->fence(ctx->fence_user, x->env, err) : VIGIL_OK;
    if (d->mutating)
        vg_ids_new(x->env->ids, st->starter);
    if (!rc)
        rc = append_action(x, st, err);
    if (!rc && d->mutating && !in_one)
        rc = op_write(x, st, "started", NULL, err);
    if (in_one)
        st->op_recorded = 1; /* written by the finish */
    if (!rc && d->mutating && !(st->e->p->methods->caps & VG_TOOL_PROVIDER_CAP_TRANSACTIONAL))
        rc = saga_write(x, st, "journal_pending", "pending", NULL, NULL, err);
    if (!rc)
        rc = vg_budget_charge(x->env, st->agent_id, &charge, err);
    if (!in_one)
        rc = vg_store_end(x->env->store, rc, err);
    if (rc == VIGIL_OK && st->carry) {
        *st->carry_written = 1;
        st->carry = NULL;
    }
    return rc;
}

/*
 * 9. run: record the action and the started operation, then the effect. That commit is the
 * barrier before the effect, and durable whatever mode the caller left: a power loss must not
 * leave an effect whose started operation is lost (it would run again), and it makes
 * everything the caller committed before durable too (the agent loop's turn). Under group
 * commit (the agent loop) the rest stays group commits, the result included: it reaches the
 * disk with the next barrier or the run's close, and a power loss before that leaves a started
 * operation, settled later without repeating the effect. A caller's transaction left open for
 * it (start_open) is that commit: the caller's records of the call's start and the started
 * operation become durable together. Inside any other caller's transaction the caller decides.
 */
static vigil_code call_run(struct vg_tool_executor *x, const struct vg_tool_call_ctx *ctx,
                           struct call_st *st, struct vg_tool_outcome *out, vigil_error *err)
{
    struct vg_store *store = x->env->store;
    /* st's, not ctx's: the gate may have committed the caller's start already (before a
     * recovery lookup), and then this call makes its own barrier. */
    if (st->start_open && vg_store_depth(store) != 1)
        return VG_FAIL(err, VIGIL_ESTATE, "the caller's transaction to join is not open");
    int barrier = !st->start_open && !vg_store_in_tx(store) && !vg_store_durable(store);
    vigil_code rc = at_step(x, VG_TOOL_STEP_BEFORE_STARTED, err);
    if (rc || (barrier && (rc = vg_store_durable_commits(store, 1, err))))
        return rc;
    rc = record_started(x, ctx, st, 0, err);
    if (st->start_open && !rc)
        rc = vg_store_commit_durable(store, err);
    if (barrier) {
        vigil_code lrc = vg_store_durable_commits(store, 0, rc ? NULL : err);
        rc = rc ? rc : lrc;
    }
    if (rc || (rc = at_step(x, VG_TOOL_STEP_AFTER_STARTED, err)))
        return rc;
    if (ctx->started)
        ctx->started(ctx->started_user);
    return run_effect(x, st, out, err);
}

/* Whether the provider has work for after the call's commit (after_commit): the executor then
 * commits the call itself rather than leave the transaction to its caller. */
static int works_after_commit(const struct vg_tool_provider *p)
{
    return p->methods->version >= 2 && p->methods->after_commit;
}

/* Inside the call's write transaction: whether an operation record exists already (*seen), one
 * another process wrote after the gate's read; else the call's first write of it puts it
 * without reading again (op_absent). */
static vigil_code op_seen_in_tx(struct vg_tool_executor *x, struct call_st *st, int *seen,
                                vigil_error *err)
{
    json_t *op = NULL;
    vigil_error miss = {0};
    vigil_code rc = vg_error_unless_missing(
        err, &miss, vg_env_get_json(x->env, "operation", st->op_id, &op, NULL, &miss));
    json_decref(op);
    *seen = rc == VIGIL_OK;
    st->op_absent = rc == VIGIL_ENOTFOUND;
    return rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc;
}

/*
 * 9, for a transactional provider's mutating call: its start (the action, the budget charge),
 * its effect and its finish (the result, the operation, written once, finished) in one
 * transaction. The effect is a write of the store that commits with its records or not at all,
 * so no barrier is due before it: a crash before the commit leaves nothing of the call (no
 * action, no operation), and it runs again as a first call. One commit a call, made in the
 * caller's mode, where there were a durable one before the effect and another after it.
 * - A caller's start left open (start_open: the agent loop's turn, a flat transaction) takes
 *   the call's start and is committed first, in the caller's mode: the effect needs a level of
 *   its own, undone alone when it fails, which a flat transaction lacks. A crash between the
 *   two commits leaves an action without an operation: the call did not run (recovery says
 *   not_run) and runs as a first call when made again.
 * - The gate read "not run yet" before this transaction took the write lock: another process's
 *   call of the same operation (a hand call repeated) may have committed since. It is read
 *   again here; when it is there nothing more is written and *again = 1: the gate's operation
 *   step answers (the finished one replayed).
 * - The caller that asked for it (finish_open) gets the transaction open (tx_open), unless the
 *   provider has work after the commit. `started` is told once the call has committed, outside
 *   any transaction; a caller given the transaction tells its own after its commit.
 */
static vigil_code call_run_in_one(struct vg_tool_executor *x, const struct vg_tool_call_ctx *ctx,
                                  struct call_st *st, struct vg_tool_outcome *out, int *again,
                                  vigil_error *err)
{
    struct vg_store *store = x->env->store;
    vigil_code rc = VIGIL_OK;
    int seen = 0, joined = st->start_open;
    *again = 0;
    if (joined) {
        st->start_open = 0;
        if ((rc = vg_store_end(store, record_started(x, ctx, st, 1, err), err)) ||
            (rc = at_step(x, VG_TOOL_STEP_AFTER_STARTED, err)))
            return rc;
    }
    int own = !vg_store_in_tx(store);
    int leave_open = own && st->finish_open && !works_after_commit(st->e->p);
    if ((rc = vg_store_begin(store, err)))
        return rc;
    rc = op_seen_in_tx(x, st, &seen, err);
    if (!rc && seen) {
        *again = 1;
        vg_store_rollback(store, NULL); /* nothing written */
        return VIGIL_OK;
    }
    if (!rc && !joined && !(rc = record_started(x, ctx, st, 1, err)))
        rc = at_step(x, VG_TOOL_STEP_AFTER_STARTED, err); /* a crash loses the whole call */
    if (!rc)
        rc = effect_in_tx(x, st, joined, out, err); /* fenced by record_started, or there */
    /* The caller's records of the call's end join it as one of its phases: flat, as its own. */
    if (!rc && leave_open && !(rc = vg_store_flatten(store, err))) {
        out->tx_open = 1;
        return VIGIL_OK;
    }
    if ((rc = vg_store_end(store, rc, err)) || vg_store_in_tx(store))
        return rc;
    if (ctx->started)
        ctx->started(ctx->started_user);
    struct vg_tool_request q = make_req(x, st);
    vg_tool_provider_after_commit(st->e->p, &q);
    return at_step(x, VG_TOOL_STEP_AFTER_FINISHED, err);
}

/* A transactional provider's mutating call (call_run_in_one), and the gate's operation step
 * again when another process's call of the same operation committed first. */
static vigil_code call_run_one_tx(struct vg_tool_executor *x, const struct vg_tool_call_ctx *ctx,
                                  struct call_st *st, struct vg_tool_outcome *out, vigil_error *err)
{
    if (st->start_open && vg_store_depth(x->env->store) != 1)
        return VG_FAIL(err, VIGIL_ESTATE, "the caller's transaction to join is not open");
    vigil_code rc = at_step(x, VG_TOOL_STEP_BEFORE_STARTED, err);
    for (int tries = 0; !rc && tries < 2; tries++) {
        int again = 0, done = 0;
        if ((rc = call_run_in_one(x, ctx, st, out, &again, err)) || !again)
            return rc;
        if ((rc = gate_operation(x, st, out, &done, err)) || done)
            return rc;
    }
    return rc ? rc
              : VG_FAIL(err, VIGIL_EBUSY,
                        "operation %s (tool \"%s\") is being written by another call: repeat "
                        "this call to read its result",
                        st->op_id, st->tool);
}

/* The gate in its order: steps 1-5 decide a refusal, recorded once the operation id is known;
 * a preview stops there; steps 6-8 may end the call; step 9 runs it. The gate's reads are the
 * caller's read batch (vg_tool_executor_call), which ends (*batch = 0) before step 9: no read
 * transaction stays open while a tool acts. */
static vigil_code call_gated(struct vg_tool_executor *x, const struct vg_tool_call_ctx *ctx,
                             struct call_st *st, struct vg_tool_outcome *out, int *batch,
                             vigil_error *err)
{
    struct refusal r = {0};
    int done = 0;
    vigil_code rc;
    gate_resolution(st, &r);
    if ((rc = gate_arguments(st, &r, err)) || (rc = gate_kill_switches(x, st, &r, err)))
        return rc;
    gate_wake_reason(st, &r);
    /* 5. scope: deny by default, fail closed */
    if (!r.code)
        r.code = check_scope(x, st, r.msg, sizeof r.msg);
    const char *op_key = st->ctx->operation_key ? st->ctx->operation_key : st->run_key;
    operation_id_of(st->agent_id, op_key, st->tool, st->hashed ? st->hashed : st->canon,
                    st->scope_snapshot, st->targets, st->op_id);
    if (r.code)
        return refuse(x, st, r.code, r.msg, out, err);
    if (st->preview_only)
        return call_preview(x, st, out, err);
    if ((rc = gate_operation(x, st, out, &done, err)) || done ||
        (rc = gate_budget(x, st, out, &done, err)) || done ||
        (rc = gate_approval(x, st, out, &done, err)) || done)
        return rc;
    vg_store_read_batch(x->env->store, 0);
    *batch = 0;
    if ((st->e->p->methods->caps & VG_TOOL_PROVIDER_CAP_TRANSACTIONAL) && st->e->def->mutating)
        return call_run_one_tx(x, ctx, st, out, err);
    return call_run(x, ctx, st, out, err);
}

static vigil_code call_through_gates(struct vg_tool_executor *x, const struct vg_tool_call_ctx *ctx,
                                     const char *tool_name, json_t *args,
                                     struct vg_tool_outcome *out, vigil_error *err)
{
    struct call_st st = {0};
    memset(out, 0, sizeof *out);
    if (!ctx || !ctx->agent_id || !*ctx->agent_id || !ctx->run_key || !*ctx->run_key)
        return VG_FAIL(err, VIGIL_EINVAL, "a tool call needs an agent id and a run key");
    if (!tool_name || !*tool_name)
        return VG_FAIL(err, VIGIL_EINVAL, "a tool call needs a tool name");
    int batch = 1;
    vg_store_read_batch(x->env->store, 1); /* the gate's reads share one read transaction */
    vigil_code rc = call_prepare(x, ctx, tool_name, args, &st, err);
    if (!rc)
        rc = call_gated(x, ctx, &st, out, &batch, err);
    if (batch)
        vg_store_read_batch(x->env->store, 0);
    if (!rc && !out->operation_id[0])
        snprintf(out->operation_id, sizeof out->operation_id, "%s", st.op_id);
    st_release(&st);
    return rc;
}

/*
 * A call made through another of the run (ctx->journal_via: a program's vigil.call) is a tool
 * call of the run's journal too, as the model's are, marked with where it came from: the run's
 * tool list, its counts, replay and export then show what the program did, not only that code
 * ran (trial L4). Its start before the gates, so a refusal is listed as denied.
 */
static vigil_code call_journaled(struct vg_tool_executor *x, const struct vg_tool_call_ctx *ctx,
                                 const char *tool_name, json_t *args, struct vg_tool_outcome *out,
                                 vigil_error *err)
{
    char id[37], *input = vg_json_dumps(args ? args : json_null(), JSON_COMPACT | JSON_ENCODE_ANY);
    int64_t t0 = vg_clock_mono_ns(x->env->clock);
    memset(out, 0, sizeof *out);
    vigil_code rc = input ? vg_journal_tool_call_started_via(ctx->journal_run, tool_name,
                                                             ctx->journal_via, input, id, err)
                          : VG_FAIL(err, VIGIL_ENOMEM, "out of memory journaling a tool call");
    vg_free(input);
    if (rc)
        return rc;
    rc = call_through_gates(x, ctx, tool_name, args, out, err);
    if (rc)
        return rc;
    json_t *j = out->content ? NULL : vg_tool_outcome_json(out);
    char *text = j ? vg_json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    int64_t ms = (vg_clock_mono_ns(x->env->clock) - t0) / 1000000;
    rc = vg_journal_tool_call_finished(
        ctx->journal_run, id, vg_journal_tool_status_of(out->code != VG_TOOL_OK, out->error_code),
        out->content ? out->content
        : text       ? text
                     : "null",
        out->error_code[0] ? out->error_code : NULL, ms, err);
    vg_free(text);
    return rc;
}

vigil_code vg_tool_executor_call(struct vg_tool_executor *x, const struct vg_tool_call_ctx *ctx,
                                 const char *tool_name, json_t *args, struct vg_tool_outcome *out,
                                 vigil_error *err)
{
    if (ctx && ctx->journal_run && ctx->journal_via)
        return call_journaled(x, ctx, tool_name, args, out, err);
    return call_through_gates(x, ctx, tool_name, args, out, err);
}

/* ---- approvals that run, recovery, in-doubt items ------------------------------------------- */

vigil_code vg_tool_executor_run_approved(struct vg_tool_executor *x, const char *approval_id,
                                         struct vg_tool_outcome *out, vigil_error *err)
{
    json_t *ap = NULL;
    vigil_code rc = vg_approval_get(x->env, approval_id, &ap, err);
    if (rc)
        return rc;
    const char *st = json_string_value(json_object_get(ap, "status"));
    if (strcmp(st, "approved") != 0) {
        rc = VG_FAIL(err, VIGIL_ESTATE, "approval \"%s\" is %s, not approved", approval_id, st);
        json_decref(ap);
        return rc;
    }
    json_t *req = json_object_get(ap, "request");
    struct vg_tool_call_ctx ctx = {
        .agent_id = json_string_value(json_object_get(ap, "agent_id")),
        .run_key = json_string_value(json_object_get(req, "run_key")),
        .thread_id = json_string_value(json_object_get(req, "thread_id")),
        .run_id = json_string_value(json_object_get(req, "run_id")),
        .wake_reason = json_string_value(json_object_get(req, "wake_reason"))};
    rc = vg_tool_executor_call(x, &ctx, json_string_value(json_object_get(req, "tool")),
                               json_object_get(req, "arguments"), out, err);
    if (!rc && strcmp(out->operation_id, json_string_value(json_object_get(ap, "operation_id")))) {
        /* The agent's scope changed since the request: the approval does not cover this. */
        snprintf(out->error_message, sizeof out->error_message,
                 "the operation changed since approval %s (scope or arguments)", approval_id);
    }
    json_decref(ap);
    return rc;
}

struct ops_ctx {
    json_t *out;
    int bad;
};

static int ops_cb(void *user, const struct vg_record *r)
{
    struct ops_ctx *c = user;
    json_t *b = json_loads(r->body, 0, NULL);
    if (!b || json_array_append_new(c->out, b)) {
        c->bad = 1;
        return 1;
    }
    return 0;
}

static vigil_code scan_all(struct vg_env *env, struct vg_query *q, json_t **out, vigil_error *err)
{
    struct ops_ctx c = {json_array(), 0};
    if (!c.out)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory scanning records");
    vigil_code rc = vg_store_scan(env->store, q, ops_cb, &c, err);
    if (!rc && c.bad)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory scanning records");
    if (rc) {
        json_decref(c.out);
        return rc;
    }
    *out = c.out;
    return VIGIL_OK;
}

/*
 * Is a run of the agent live right now (its lease, kept by the wake system, held and not
 * expired)? Its started operations are then in flight, not crashed, and recovery leaves them
 * alone: settling them would race the run that is about to finish them.
 */
static int agent_run_live(struct vg_env *env, const char *agent_id)
{
    json_t *lease = NULL;
    if (!agent_id || vg_env_get_json(env, "agent_lease", agent_id, &lease, NULL, NULL) != VIGIL_OK)
        return 0;
    const char *holder = json_string_value(json_object_get(lease, "holder"));
    int live = holder && *holder &&
               json_integer_value(json_object_get(lease, "expires_ms")) > vg_env_now(env) &&
               !vg_proc_gone(json_string_value(json_object_get(lease, "host")),
                             (long)json_integer_value(json_object_get(lease, "pid")),
                             json_string_value(json_object_get(lease, "pid_start")));
    json_decref(lease);
    return live;
}

/* Lookups that find nothing are tried this often, 1 s apart and doubling, before the operation
 * goes to a person: a lookup may lag its effect, but not forever. */
#define LOOKUP_TRIES 5
#define LOOKUP_BACKOFF_MS 1000

/* A lookup found nothing: count the try and say when the next may be, or raise an in-doubt
 * item once the tries are spent. */
static vigil_code lookup_missed(struct vg_tool_executor *x, struct call_st *st, json_t *op,
                                int *raised, vigil_error *err)
{
    int64_t tries = json_integer_value(json_object_get(op, "lookups")) + 1, rev = 0;
    json_t *cur = NULL;
    *raised = 0;
    if (tries >= LOOKUP_TRIES) {
        char why[200];
        snprintf(why, sizeof why,
                 "the process stopped while the tool ran; its lookup found no effect %lld times",
                 (long long)tries);
        *raised = 1;
        return in_doubt_item(x, st, why, err);
    }
    vigil_code rc = vg_env_get_json(x->env, "operation", st->op_id, &cur, &rev, err);
    if (rc)
        return rc;
    int64_t next = vg_env_now(x->env) + (LOOKUP_BACKOFF_MS << (tries - 1));
    if (json_object_set_new(cur, "lookups", json_integer(tries)) ||
        json_object_set_new(cur, "next_lookup_ms", json_integer(next)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory recording a lookup");
    else
        rc = vg_env_update_json(x->env, "operation", st->op_id, st->agent_id, "started", st->tool,
                                vg_env_now(x->env), cur, rev, err);
    json_decref(cur);
    return rc;
}

/* The call state of a stored operation record (borrowing its strings). */
static vigil_code call_from_op(struct vg_tool_executor *x, json_t *op, struct call_st *st,
                               vigil_error *err)
{
    st->agent_id = json_string_value(json_object_get(op, "agent_id"));
    st->tool = st->e->def->name;
    st->run_key = json_string_value(json_object_get(op, "run_key"));
    st->run_id = json_string_value(json_object_get(op, "run_id"));
    st->wake = json_string_value(json_object_get(op, "wake_reason"));
    snprintf(st->thread, sizeof st->thread, "%s",
             or_(json_string_value(json_object_get(op, "thread_id")), ""));
    snprintf(st->op_id, sizeof st->op_id, "%s",
             json_string_value(json_object_get(op, "operation_id")));
    st->args = json_incref(json_object_get(op, "arguments"));
    if (!(st->scopes = json_array()) || !(st->canon = canonical(st->args)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory recovering operations");
    (void)x;
    return VIGIL_OK;
}

/*
 * Settle one operation a crash left started. `held`: the caller holds the agent's lease (it took
 * the agent over from the crashed run), so an effect that may run again runs now, and the
 * operation is finished before the agent goes on; without the lease it stays started and runs
 * when called again. *done: 1 when the operation is no longer started.
 */
static vigil_code recover_one(struct vg_tool_executor *x, json_t *op, int held, int *done,
                              vigil_error *err)
{
    struct call_st st = {0};
    struct vg_tool_outcome out = {0};
    enum settle how = SETTLE_RERUN;
    *done = 0;
    set_entry(&st, resolve(x, json_string_value(json_object_get(op, "tool"))));
    if (!st.e)
        return VIGIL_OK; /* its provider is not registered in this process: leave it */
    if (json_integer_value(json_object_get(op, "next_lookup_ms")) > vg_env_now(x->env))
        return VIGIL_OK; /* its lookup's backoff has not passed */
    vigil_code rc = call_from_op(x, op, &st, err);
    if (!rc)
        rc = settle(x, &st, op, &how, &out, err);
    if (!rc && how == SETTLE_LOOKUP_EMPTY)
        rc = lookup_missed(x, &st, op, done, err);
    else if (!rc && how == SETTLE_RERUN && held)
        rc = run_effect(x, &st, &out, err);
    if (!rc && (how == SETTLE_DONE || how == SETTLE_IN_DOUBT || (how == SETTLE_RERUN && held)))
        *done = 1;
    vg_tool_outcome_release(&out);
    st_release(&st);
    return rc;
}

static vigil_code recover_ops(struct vg_tool_executor *x, const char *agent_id, int held,
                              int *settled, vigil_error *err)
{
    json_t *ops = NULL, *op;
    size_t i;
    int n = 0, done = 0;
    struct vg_query q = {.kind = "operation", .owner = agent_id, .k1 = "started"};
    vigil_code rc = scan_all(x->env, &q, &ops, err);
    if (rc)
        return rc;
    json_array_foreach (ops, i, op) {
        if (!held && agent_run_live(x->env, json_string_value(json_object_get(op, "agent_id"))))
            continue; /* in flight in a live run, not left by a crash */
        if ((rc = recover_one(x, op, held, &done, err)))
            break;
        n += done;
    }
    json_decref(ops);
    if (!rc && settled)
        *settled = n;
    return rc;
}

vigil_code vg_tool_executor_recover(struct vg_tool_executor *x, int *settled, vigil_error *err)
{
    return recover_ops(x, NULL, 0, settled, err);
}

vigil_code vg_tool_executor_recover_agent(struct vg_tool_executor *x, const char *agent_id,
                                          int *settled, vigil_error *err)
{
    if (!agent_id || !*agent_id)
        return VG_FAIL(err, VIGIL_EINVAL, "no agent id given");
    return recover_ops(x, agent_id, 1, settled, err);
}

vigil_code vg_tool_in_doubt_list(struct vg_env *env, const char *agent_id, json_t **out,
                                 vigil_error *err)
{
    struct vg_query q = {.kind = "in_doubt", .owner = agent_id, .k1 = "pending"};
    return scan_all(env, &q, out, err);
}

vigil_code vg_tool_in_doubt_show(struct vg_env *env, const char *operation_id, json_t **out,
                                 vigil_error *err)
{
    json_t *item = NULL, *op = NULL;
    vigil_code rc = vg_env_get_json(env, "in_doubt", operation_id, &item, NULL, err);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no in-doubt operation \"%.80s\"", operation_id);
    if (rc)
        return rc;
    rc = vg_env_get_json(env, "operation", operation_id, &op, NULL, err);
    if (rc == VIGIL_ENOTFOUND) /* answered "retry" or "not applied": the attempt is forgotten */
        rc = VIGIL_OK;
    if (!rc && json_object_set_new(item, "operation", op ? op : json_null()))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading an in-doubt operation");
    if (rc) {
        json_decref(item);
        return rc;
    }
    *out = item;
    return VIGIL_OK;
}

static const char *answer_name(enum vg_in_doubt_answer a)
{
    return a == VG_IN_DOUBT_APPLIED       ? "applied"
           : a == VG_IN_DOUBT_NOT_APPLIED ? "not_applied"
                                          : "retry";
}

/* The operation after a person's answer: applied and not applied finish it (the recorded
 * outcome says which: an identical call replays it and never runs), retry forgets the attempt. */
static vigil_code answer_operation(struct vg_env *env, const char *operation_id,
                                   enum vg_in_doubt_answer a, const char *agent, const char *at,
                                   vigil_error *err)
{
    json_t *op = NULL, *o = NULL;
    int64_t op_rev = 0;
    vigil_code rc;
    if (a == VG_IN_DOUBT_RETRY) {
        rc = vg_store_remove(env->store, "operation", operation_id, err);
        if (!rc && (rc = vg_store_remove(env->store, "saga", operation_id, err)) == VIGIL_ENOTFOUND)
            rc = VIGIL_OK;
        return rc;
    }
    if ((rc = vg_env_get_json(env, "operation", operation_id, &op, &op_rev, err)))
        return rc;
    if (a == VG_IN_DOUBT_APPLIED)
        o = json_pack("{s:s, s:s, s:{s:s}, s:[], s:[]}", "status", "success", "operation_id",
                      operation_id, "result", "resolved", "applied", "changed_entity_ids",
                      "changed_tokens");
    else
        o = json_pack("{s:s, s:s, s:s, s:s, s:[], s:[]}", "status", "error", "operation_id",
                      operation_id, "error_code", "tool_failed", "error_message",
                      "not applied: a person found the effect did not happen and chose not to "
                      "run it again",
                      "changed_entity_ids", "changed_tokens");
    if (!o || json_object_set_new(op, "status", json_string("finished")) ||
        json_object_set_new(op, "outcome", o) ||
        json_object_set_new(op, "finished_at", json_string(at)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory resolving an in-doubt operation");
    else
        rc = vg_env_update_json(env, "operation", operation_id, agent, "finished",
                                json_string_value(json_object_get(op, "tool")), vg_env_now(env), op,
                                op_rev, err);
    json_decref(op);
    return rc;
}

vigil_code vg_tool_in_doubt_answer(struct vg_env *env, const char *operation_id,
                                   enum vg_in_doubt_answer answer, const char *by, int *already,
                                   vigil_error *err)
{
    json_t *item = NULL;
    int64_t rev;
    char at[32];
    if (already)
        *already = 0;
    vigil_code rc = vg_store_begin(env->store, err);
    if (rc)
        return rc;
    if ((rc = vg_env_get_json(env, "in_doubt", operation_id, &item, &rev, err))) {
        if (rc == VIGIL_ENOTFOUND)
            rc = VG_FAIL(err, VIGIL_ENOTFOUND, "no in-doubt operation \"%.80s\"", operation_id);
        goto out;
    }
    const char *agent = json_string_value(json_object_get(item, "agent_id"));
    if (strcmp(or_(json_string_value(json_object_get(item, "status")), ""), "pending") != 0) {
        if (already) /* already resolved: a no-op */
            *already = 1;
        goto out;
    }
    vg_time_format_ms(at, vg_env_now(env));
    const char *name = answer_name(answer);
    json_object_set_new(item, "status", json_string(name));
    json_object_set_new(item, "resolved_by", json_string(by && *by ? by : "human"));
    json_object_set_new(item, "resolved_at", json_string(at));
    if ((rc = vg_env_update_json(env, "in_doubt", operation_id, agent, name,
                                 json_string_value(json_object_get(item, "tool")), vg_env_now(env),
                                 item, rev, err)) ||
        (rc = answer_operation(env, operation_id, answer, agent, at, err)))
        goto out;
    const char *tokens[] = {"TOOL_IN_DOUBT_RESOLVED", agent, operation_id};
    vg_env_notify(env, tokens, 3);
out:
    rc = vg_store_end(env->store, rc, err);
    json_decref(item);
    return rc;
}

vigil_code vg_tool_in_doubt_resolve(struct vg_env *env, const char *operation_id, int applied,
                                    const char *by, vigil_error *err)
{
    return vg_tool_in_doubt_answer(
        env, operation_id, applied ? VG_IN_DOUBT_APPLIED : VG_IN_DOUBT_RETRY, by, NULL, err);
}
