/*
 * spawn.c: one spawn_agents call. The facts every request shares (the parent's manifest, depth,
 * budgets, cooldown, slots, the kill switches that are on) are read once; each request then gets
 * its child agent, its verdict from admit.c and, when admitted, a spawn_child record and (when a
 * slot is free) the child's wake. The call's decisions, admitted or denied, are one spawn_call
 * record written at its end (one row a call, not one a request: the row is most of a decision's
 * cost); so are the children it queued for a slot (their spawn_child records, kept in it until they
 * start). Everything is keyed by the call's group, derived from its operation id, so a replay
 * writes nothing new and starts no child twice.
 */
#include "base/common.h"

#include <fnmatch.h>

#include "agent/agent.h"
#include "base/buf.h"
#include "base/json.h"
#include "orch/orch_int.h"
#include "tool/tool.h"

static vigil_code kill_query(void *user, struct vg_env *env, const char *agent_id, int *on,
                             vigil_error *err)
{
    (void)user;
    return vg_kill_active(env, agent_id, NULL, on, err);
}

vigil_code vg_orch_wake_init(struct vg_wake *w, struct vg_env *env, vigil_error *err)
{
    vigil_code rc = vg_wake_init(w, env, NULL, err);
    if (!rc)
        w->kill = kill_query;
    return rc;
}

int64_t vg_orch_jint(json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

vigil_code vg_orch_count(struct vg_env *env, const char *kind, const char *owner, const char *k1,
                         const char *k2, int *out, vigil_error *err)
{
    struct vg_query q = {.kind = kind, .owner = owner, .k1 = k1, .k2 = k2};
    int64_t n = 0;
    vigil_code rc = vg_store_count(env->store, &q, &n, err);
    *out = (int)n;
    return rc;
}

int vg_orch_parent_cap(json_t *config)
{
    json_int_t cap = vg_orch_jint(json_object_get(config, "spawn"), "max_concurrent");
    return cap >= 1 && cap <= 64 ? (int)cap : VG_ORCH_PER_PARENT_DEFAULT;
}

static int has_string(json_t *arr, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach (arr, i, v)
        if (json_is_string(v) && !strcmp(json_string_value(v), s))
            return 1;
    return 0;
}

/* An agent as admission sees it: its columns, and its name from its body. */
struct agent_row {
    char id[37], kind[65], lifecycle[16];
    char *name; /* owned, or NULL */
    int ascii;  /* the id is ASCII: a text it goes into needs no UTF-8 check for it */
};

struct agents {
    struct vg_env *env;
    struct agent_row *row;
    size_t n, cap;
    int failed;
};

/* What the whole call shares. */
struct call {
    struct vg_env *env;
    const struct vg_tool_request *q;
    json_t *parent;        /* the parent agent (owned) */
    json_t *parent_child;  /* the parent's own spawn_child record, or NULL (owned) */
    json_t *parent_scopes; /* the scopes the parent's run may touch (owned): no child gets more */
    struct agents *agents; /* every agent, read once for the call's requests (owned), or NULL */
    struct vg_store_change_mark agents_mark; /* the mark they were read under (agents_read) */
    int agents_marked;                       /* agents_mark holds one: they may be kept */
    struct vg_kill_on kill; /* the kill switches on, read once for the parent and every child */
    char group[33];
    struct vg_orch_facts base;
    int64_t steps_left; /* the parent's steps budget left today; -1: unlimited */
    /* The spawn_call record's decisions, its queued children's spawn_child texts and the
     * answer's children as canonical text, each an array's text from its '[' (closed at the
     * call's end, so the record and the answer take them as they are, not copied first) */
    struct vg_buf decisions, waiting, answers;
    json_t *journal;        /* the decisions for the calling run's journal (tools.c), owned */
    int admitted, awaiting; /* decisions that admitted (or queued) a child; awaiting a person */
    int queued;             /* decisions that queued a child */
    int recorded; /* the call's spawn_call record exists: a replay, which writes nothing */
    int running_parent, running_all; /* the running children the call found, and it started */
};

static int last_admitted_cb(void *user, const struct vg_record *r)
{
    *(int64_t *)user = r->seq;
    return 1;
}

/* When the parent last had a child admitted (-1: never): its latest spawn_call that admitted
 * one (k1 `waiting` while a child it queued has not started), or a person's approval (a
 * spawn_decision; in a store written before spawn_call, every decision was one of those). */
static vigil_code last_admitted(struct vg_env *env, const char *agent, int64_t *last,
                                vigil_error *err)
{
    static const char *const kinds[] = {"spawn_call", "spawn_call", "spawn_decision"};
    static const char *const k1s[] = {"admitted", "waiting", "admitted"};
    for (size_t i = 0; i < VG_ARRAY_LEN(kinds); i++) {
        int64_t at = -1;
        struct vg_query q = {
            .kind = kinds[i], .owner = agent, .k1 = k1s[i], .descending = 1, .limit = 1};
        vigil_code rc = vg_store_scan(env->store, &q, last_admitted_cb, &at, err);
        if (rc)
            return rc;
        if (at > *last)
            *last = at;
    }
    return VIGIL_OK;
}

/* The cost (micro-dollars) and tokens children hold until they end. */
struct held {
    int64_t cost, tokens;
};

static void hold(struct held *h, json_t *child)
{
    json_t *req = json_object_get(child, "request");
    h->cost += (int64_t)(json_number_value(json_object_get(req, "cost_budget_usd")) * 1e6);
    h->tokens += vg_orch_jint(req, "token_budget");
}

static int reserved_cb(void *user, const struct vg_record *r)
{
    json_t *b = json_loads(r->body, 0, NULL);
    hold(user, b);
    json_decref(b);
    return 0;
}

static vigil_code reserved_waiting_cb(void *user, json_t *child, int64_t seq, vigil_error *err)
{
    (void)seq;
    (void)err;
    hold(user, child);
    return VIGIL_OK;
}

static int64_t less_held(int64_t left, int64_t held)
{
    return left < 0 ? left : held >= left ? 0 : left - held;
}

/* What the parent's running and waiting children may still spend is not the parent's to give
 * again: their cost and token budgets are taken off what it has left. */
static vigil_code reserve(struct call *c, vigil_error *err)
{
    static const char *const states[] = {"running", "waiting", "approval"};
    struct held held = {0};
    for (size_t i = 0; i < VG_ARRAY_LEN(states); i++) {
        struct vg_query q = {.kind = "spawn_child", .owner = c->q->agent_id, .k1 = states[i]};
        vigil_code rc = vg_store_scan(c->env->store, &q, reserved_cb, &held, err);
        if (rc)
            return rc;
    }
    vigil_code rc =
        vg_orch_waiting_each(c->env, c->q->agent_id, NULL, reserved_waiting_cb, &held, err);
    if (rc)
        return rc;
    c->base.cost_left = less_held(c->base.cost_left, held.cost);
    c->base.tokens_left = less_held(c->base.tokens_left, held.tokens);
    return VIGIL_OK;
}

/* Whether a request of the call asks a token budget. */
static int asks_tokens(const struct call *c)
{
    size_t i;
    json_t *req;
    json_array_foreach (json_object_get(c->q->args, "requests"), i, req)
        if (json_object_get(req, "token_budget"))
            return 1;
    return 0;
}

/* The parent's remaining budgets and its reservations. */
static vigil_code read_budgets(struct call *c, vigil_error *err)
{
    const char *agent = c->q->agent_id;
    json_t *usage = NULL;
    vigil_code rc = vg_budget_check(c->env, agent, &c->base.budget_out, err);
    if (!rc)
        rc = vg_budget_usage(c->env, agent, &usage, err);
    if (rc)
        return rc;
    json_t *lim = json_object_get(usage, "limits");
    json_t *cost = json_object_get(lim, "cost_micros"), *steps = json_object_get(lim, "steps");
    json_t *tokens = json_object_get(lim, "tokens");
    c->base.cost_left =
        json_is_integer(cost) ? json_integer_value(cost) - vg_orch_jint(usage, "cost_micros") : -1;
    c->base.tokens_left =
        json_is_integer(tokens) ? json_integer_value(tokens) - vg_orch_jint(usage, "tokens") : -1;
    c->steps_left =
        json_is_integer(steps) ? json_integer_value(steps) - vg_orch_jint(usage, "steps") : -1;
    if (c->base.cost_left < -1)
        c->base.cost_left = 0;
    if (c->base.tokens_left < -1)
        c->base.tokens_left = 0;
    json_decref(usage);
    /* Reservations matter only to a request that asks a budget of a limited parent. */
    return c->base.cost_left > 0 || (c->base.tokens_left > 0 && asks_tokens(c)) ? reserve(c, err)
                                                                                : VIGIL_OK;
}

/* The scopes the parent's run may touch: its manifest's allowed_scopes, narrowed by its run's
 * own grant when it has one (a child's run, or a later run continuing it). A child is granted
 * these, or fewer: a sub-agent never reaches outside its parent's scope (S2-043). */
static vigil_code read_parent_scopes(struct call *c, json_t *config, vigil_error *err)
{
    json_t *g = NULL, *own = json_object_get(config, "allowed_scopes"), *granted;
    vigil_error miss = {0}; /* a top-level run has no grant */
    vigil_code rc = vg_error_unless_missing(
        err, &miss, vg_env_get_json(c->env, "tool_grant", c->q->run_key, &g, NULL, &miss));
    if (rc && rc != VIGIL_ENOTFOUND)
        return rc;
    granted = json_object_get(g, "scopes");
    c->parent_scopes = json_is_array(granted) ? vg_tool_scopes_narrow(own, granted)
                       : json_is_array(own)   ? json_copy(own)
                                              : json_array();
    json_decref(g);
    return c->parent_scopes ? VIGIL_OK
                            : VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading the scopes");
}

static vigil_code read_facts(struct call *c, vigil_error *err)
{
    struct vg_env *env = c->env;
    const char *agent = c->q->agent_id;
    /* Read only: the executor's gate read it just before, so this is the memo's. */
    vigil_code rc = vg_agent_get_shared(env, agent, &c->parent, err);
    if (rc)
        return rc;
    json_t *config = json_object_get(c->parent, "config");
    json_t *spawn = json_object_get(config, "spawn");
    struct vg_orch_facts *f = &c->base;
    f->spawn_enabled = json_is_true(json_object_get(spawn, "enabled"));
    f->cooldown_ms = vg_orch_jint(spawn, "cooldown_ms");
    rc = vg_orch_child_get(env, c->q->run_key, &c->parent_child, NULL, err);
    if (rc == VIGIL_ENOTFOUND)
        rc = VIGIL_OK;
    if (rc)
        return rc;
    if ((rc = read_parent_scopes(c, config, err)))
        return rc;
    if (c->parent_child) {
        f->parent_depth = (int)vg_orch_jint(c->parent_child, "depth");
        json_t *req = json_object_get(c->parent_child, "request");
        /* Granted twice over: by the spawn that made this run, and by name (not a glob) in the
         * agent's own manifest. */
        f->granted = has_string(json_object_get(req, "allowed_tools"), "spawn_agents") &&
                     has_string(json_object_get(config, "tools"), "spawn_agents");
    }
    /* Only a cooldown reads when the parent last had a child admitted: three scans a call,
     * which a parent without one (the default) does not pay. */
    int64_t last = -1;
    if (f->cooldown_ms > 0 && (rc = last_admitted(env, agent, &last, err)))
        return rc;
    f->since_last_ms = last < 0 ? -1 : vg_env_now(env) - last;
    if ((rc = vg_kill_read_on(env, &c->kill, err)))
        return rc;
    f->kill_switch = vg_kill_on_for(&c->kill, agent, NULL);
    f->cap_parent = vg_orch_parent_cap(config);
    f->cap_global = VG_ORCH_GLOBAL_DEFAULT;
    if ((rc = vg_orch_running_children(env, agent, &f->running_parent, &f->running_global, err)))
        return rc;
    c->running_parent = f->running_parent;
    c->running_all = f->running_global;
    return read_budgets(c, err);
}

static int agent_cb(void *user, const struct vg_record *r)
{
    struct agents *a = user;
    json_t *body = NULL;
    if (strlen(r->id) > 36 || !strcmp(r->k1, "destroyed"))
        return 0;
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 32;
        struct agent_row *row = vg_realloc(a->row, cap * sizeof *row);
        if (!row)
            return a->failed = 1;
        a->row = row;
        a->cap = cap;
    }
    struct agent_row *x = &a->row[a->n];
    snprintf(x->id, sizeof x->id, "%s", r->id);
    snprintf(x->kind, sizeof x->kind, "%s", r->k2);
    snprintf(x->lifecycle, sizeof x->lifecycle, "%s", r->k1);
    x->ascii = 1;
    for (const char *p = x->id; *p; p++)
        x->ascii &= (unsigned char)*p < 0x80;
    /* The memo's own value when the same body was read lately: no parse, no copy. */
    if (vg_env_parse_json_shared(a->env, r->body, &body))
        return a->failed = 1;
    const char *name = json_string_value(json_object_get(body, "name"));
    x->name = name ? vg_strdup(name) : NULL;
    json_decref(body);
    if (name && !x->name)
        return a->failed = 1;
    a->n++;
    return 0;
}

static void agents_free(void *p)
{
    struct agents *a = p;
    if (!a)
        return;
    for (size_t i = 0; i < a->n; i++)
        vg_free(a->row[i].name);
    vg_free(a->row);
    vg_free(a);
}

static int agents_mark(struct vg_env *env, struct vg_store_change_mark *m)
{
    vigil_error ignored = {0}; /* PostgreSQL keeps no marks: the agents are read each call */
    m->kind = "agent";
    return vg_store_control(env->store, VG_STORE_CTRL_CHANGE_MARK, m, &ignored) == VIGIL_OK;
}

/* The agents the call's requests name: the ones the env keeps when no agent record was written
 * since they were read (a scan of every agent is most of a call's fixed cost after the gate's),
 * else a scan. The call holds them, taken off the env (another fiber's call reads its own), and
 * gives them back at its end (agents_keep). */
static vigil_code agents_read(struct call *c, vigil_error *err)
{
    struct vg_env *env = c->env;
    struct vg_store_change_mark now;
    int marked = agents_mark(env, &now);
    if (marked && env->spawn_agents && now.foreign == env->spawn_agents_mark.foreign &&
        now.own == env->spawn_agents_mark.own) {
        c->agents = env->spawn_agents;
        env->spawn_agents = NULL;
        c->agents_mark = now;
        c->agents_marked = 1;
        return VIGIL_OK;
    }
    struct agents *a = vg_calloc(1, sizeof *a);
    if (!a)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing agents");
    a->env = env;
    c->agents = a;
    struct vg_query q = {.kind = "agent"};
    vigil_code rc = vg_store_scan(env->store, &q, agent_cb, a, err);
    if (!rc && a->failed)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing agents");
    c->agents_mark = now;
    c->agents_marked = marked && !rc;
    return rc;
}

/* At the call's end: its agents kept on the env with the mark they were read under, for the
 * next call to take while the mark holds. */
static void agents_keep(struct call *c)
{
    struct vg_env *env = c->env;
    if (!c->agents_marked) {
        agents_free(c->agents);
        return;
    }
    if (env->spawn_agents_free)
        env->spawn_agents_free(env->spawn_agents);
    env->spawn_agents = c->agents;
    env->spawn_agents_free = agents_free;
    env->spawn_agents_mark = c->agents_mark;
}

static int live(const struct agent_row *a)
{
    return !strcmp(a->lifecycle, "active") || !strcmp(a->lifecycle, "created");
}

/* Does agent a answer to the request's name, or (no name) its kind? Never the parent by kind. */
static int names(const struct call *c, const struct agent_row *a, const char *name,
                 const char *kind)
{
    if (name)
        return !strcmp(a->id, name) || (a->name && !strcmp(a->name, name));
    return !strcmp(a->kind, kind) && strcmp(a->id, c->q->agent_id) != 0;
}

/* The child a request names: an agent by id or name, else the first live agent of its kind
 * other than the parent (agents listed by id: the same request picks the same child). The
 * agents are read once for all of the call's requests (or kept from an earlier call), their
 * bodies parsed only when the env's memo has not seen them. */
static vigil_code find_child(struct call *c, json_t *req, struct agent_row **child,
                             vigil_error *err)
{
    const char *name = json_string_value(json_object_get(req, "agent"));
    const char *kind = json_string_value(json_object_get(req, "kind"));
    *child = NULL;
    if (!name && !kind)
        return VIGIL_OK;
    vigil_code rc = c->agents ? VIGIL_OK : agents_read(c, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < c->agents->n; i++) {
        if (names(c, &c->agents->row[i], name, kind)) {
            *child = live(&c->agents->row[i]) ? &c->agents->row[i] : NULL;
            break;
        }
    }
    return VIGIL_OK;
}

/* The child's wake input: the goal and its references, said as coming from the parent. */
static char *child_input(json_t *child)
{
    json_t *req = json_object_get(child, "request"), *ref;
    struct vg_buf b;
    size_t i;
    vg_buf_init(&b, 64 * 1024);
    vg_buf_printf(&b, "Task delegated to you by agent %s: %s",
                  json_string_value(json_object_get(child, "parent_agent")),
                  json_string_value(json_object_get(req, "goal")));
    json_array_foreach (json_object_get(req, "input_refs"), i, ref)
        vg_buf_printf(&b, "%s%s", i ? ", " : "\nInput references: ", json_string_value(ref));
    const char *criteria = json_string_value(json_object_get(req, "success_criteria"));
    if (criteria) /* what the parent will judge its result by, returned with it */
        vg_buf_printf(&b, "\nSuccess criteria: %s", criteria);
    return vg_buf_detach(&b, NULL);
}

vigil_code vg_orch_enqueue_child(struct vg_wake *w, const char *run_key, json_t *child,
                                 vigil_error *err)
{
    char key[65];
    enum vg_enqueue_result res;
    char *text = child_input(child);
    /* The input joins strings of the record's tree (valid UTF-8 already) with ASCII: not
     * checked again. The meta is built without json_pack, whose format is parsed each call. */
    json_t *seed = text ? json_string_nocheck(text) : NULL;
    json_t *meta = json_object(), *spawn = json_object();
    if (json_object_set_new(spawn, "run_key", json_string_nocheck(run_key))) {
        json_decref(spawn);
        json_decref(meta);
        meta = NULL;
    } else if (json_object_set_new(meta, "spawn", spawn)) { /* the set freed spawn */
        json_decref(meta);
        meta = NULL;
    }
    vg_free(text);
    if (!seed || !meta) {
        json_decref(seed);
        json_decref(meta);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting a child");
    }
    struct vg_wake_req r = {.reason = VG_REASON_USER,
                            .label = "spawn",
                            .agent_id = json_string_value(json_object_get(child, "child_agent")),
                            .session_id = json_string_value(json_object_get(child, "session")),
                            .turn_id = "1",
                            .seed_input = seed,
                            .meta = meta,
                            /* the key admission derived from the same agent, session and turn:
                             * not hashed a second time */
                            .run_key = run_key};
    vigil_code rc = vg_wake_enqueue(w, &r, key, &res, err);
    json_decref(seed);
    json_decref(meta);
    if (!rc && strcmp(key, run_key))
        rc = VG_FAIL(err, VIGIL_ESTATE, "the child's wake got run key %.16s, not %.16s", key,
                     run_key);
    return rc;
}

vigil_code vg_orch_grant(struct vg_env *env, const char *run_key, json_t *child, vigil_error *err)
{
    json_t *req = json_object_get(child, "request");
    json_t *tools = json_object_get(req, "allowed_tools");
    /* What admission granted (never wider than the parent's); a child admitted before it was
     * recorded has the scopes its request named. */
    json_t *scopes = json_object_get(child, "granted_scopes");
    if (!scopes)
        scopes = json_object_get(req, "allowed_scopes");
    if (!tools && !scopes)
        return VIGIL_OK;
    return vg_tool_grant_put(env, run_key, json_string_value(json_object_get(child, "child_agent")),
                             tools, scopes, err);
}

/* The steps a child may take: its request's, within what the parent has left today. */
static int64_t child_steps(const struct call *c, json_t *req)
{
    int64_t asked = vg_orch_jint(req, "max_steps");
    if (c->steps_left >= 0 && (!asked || asked > c->steps_left))
        asked = c->steps_left > 0 ? c->steps_left : 1;
    return asked;
}

/* The parent's run key as lineage knows it: a child's later runs are aliases of its first. */
static const char *parent_key(const struct call *c)
{
    const char *k = json_string_value(json_object_get(c->parent_child, "run_key"));
    return k ? k : c->q->run_key;
}

/* One request as its records see it: its canonical text (written once, into both records),
 * its child, its index, session and run key. */
struct one {
    json_t *req;
    const char *req_text;
    json_t *scopes;          /* the scopes granted: the parent's, narrowed by the request's */
    const char *scopes_text; /* the same, canonical */
    struct agent_row *child;
    int index;
    char session[64], key[65];
};

/* The spawn_child record's text, written from its fields without a JSON tree. */
static char *child_text(const struct call *c, const struct one *o, const char *status)
{
    struct vg_buf b;
    const struct agent_row *a = o->child;
    struct vg_jfield f[] = {
        {"admitted_ms", VG_JF_INT, NULL, vg_env_now(c->env)},
        {"child_agent", VG_JF_STR, a->id, 0},
        {"child_kind", VG_JF_STR, a->kind, 0},
        {"child_name", VG_JF_STR, a->name, 0},
        {"depth", VG_JF_INT, NULL, c->base.parent_depth + 1},
        {"granted_scopes", VG_JF_RAW, o->scopes_text, 0},
        {"group", VG_JF_STR, c->group, 0},
        {"index", VG_JF_INT, NULL, o->index},
        {"max_steps", VG_JF_INT, NULL, child_steps(c, o->req)},
        {"parent_agent", VG_JF_STR, c->q->agent_id, 0},
        {"parent_run_key", VG_JF_STR, parent_key(c), 0},
        {"parent_thread", VG_JF_STR, c->q->thread_id ? c->q->thread_id : "", 0},
        {"request", VG_JF_RAW, o->req_text, 0},
        {"run_key", VG_JF_STR, o->key, 0},
        {"session", VG_JF_STR, o->session, 0},
        {"status", VG_JF_STR, status, 0},
    };
    vg_buf_init(&b, VG_BUF_DEFAULT_MAX);
    if (vg_json_put_fields(&b, f, VG_ARRAY_LEN(f)) < 0 || b.fail) {
        vg_buf_release(&b);
        return NULL;
    }
    return vg_buf_detach(&b, NULL);
}

/* What the child's grant, wake and approval read of its record, as a tree built from the same
 * fields (owned; NULL when out of memory): no parse of the text just written. */
static json_t *child_tree(const struct call *c, const struct one *o)
{
    /* Set one by one, not by json_pack, whose format is parsed at every call. The run key is
     * hex (not checked as UTF-8); the rest is checked. */
    json_t *t = json_object();
    int bad =
        !t || json_object_set_new(t, "child_agent", json_string(o->child->id)) ||
        (o->child->name && json_object_set_new(t, "child_name", json_string(o->child->name))) ||
        json_object_set_new(t, "depth", json_integer(c->base.parent_depth + 1)) ||
        json_object_set(t, "granted_scopes", o->scopes) ||
        json_object_set_new(t, "parent_agent", json_string(c->q->agent_id)) ||
        json_object_set_new(t, "parent_run_key", json_string(parent_key(c))) ||
        json_object_set(t, "request", o->req) ||
        json_object_set_new(t, "run_key", json_string_nocheck(o->key)) ||
        json_object_set_new(t, "session", json_string(o->session));
    if (bad) {
        json_decref(t);
        return NULL;
    }
    return t;
}

static const char *child_status(enum vg_orch_verdict v)
{
    return v == VG_ORCH_ADMITTED ? "running" : v == VG_ORCH_QUEUED ? "waiting" : "approval";
}

/* The spawn_child record of an admitted (or approval-awaiting) child, its grant, and its wake
 * (admitted) or a person's approval (high risk). A replayed call inserts nothing: done. The
 * record's fields are made a tree only when one of those needs it. */
static vigil_code write_child(struct call *c, struct vg_wake *w, const struct one *o,
                              enum vg_orch_verdict v, vigil_error *err)
{
    const char *status = child_status(v);
    char *text = c->recorded ? NULL : child_text(c, o, status);
    int inserted = 0;
    json_t *rec = NULL;
    struct vg_record r = {.kind = "spawn_child",
                          .id = o->key,
                          .owner = c->q->agent_id,
                          .k1 = status,
                          .k2 = c->group,
                          .seq = vg_env_now(c->env),
                          .at = vg_env_now(c->env),
                          .body = text};
    vigil_code rc = text || c->recorded
                        ? VIGIL_OK
                        : VG_FAIL(err, VIGIL_ENOMEM, "out of memory admitting a child");
    if (!rc && text && v == VG_ORCH_QUEUED) { /* kept in the call's record until it starts */
        if (c->waiting.len > 1)
            vg_buf_putc(&c->waiting, ',');
        vg_buf_puts(&c->waiting, text);
        inserted = 1;
        c->queued++;
    } else if (!rc && text) {
        rc = vg_store_put(c->env->store, &r, VG_PUT_IF_ABSENT, &inserted, err);
    }
    if (!rc && inserted && v == VG_ORCH_ADMITTED) { /* a replayed call's child counted already */
        c->running_parent++;
        c->running_all++;
    }
    /* Every child has a grant: its scopes are its parent's at most, whatever it asked. */
    int needs = inserted;
    if (!rc && needs && !(rec = child_tree(c, o)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory admitting a child");
    vg_free(text);
    if (!rc && rec)
        rc = vg_orch_grant(c->env, o->key, rec, err);
    if (!rc && rec && v == VG_ORCH_ADMITTED)
        rc = vg_orch_enqueue_child(w, o->key, rec, err);
    if (!rc && rec && v == VG_ORCH_AWAITING_APPROVAL)
        rc = vg_orch_approval_ask(c->env, rec, err);
    json_decref(rec);
    return rc;
}

/* A string value; checked as UTF-8 unless ascii says it is ASCII already. */
static json_t *text_value(const char *s, int ascii)
{
    return ascii ? json_string_nocheck(s) : json_string(s);
}

/* One request's answer, as the calling agent reads it (owned; NULL when out of memory). The
 * verdict's name, its reason (admit.c's text), the run key (hex) and a child id found ASCII
 * when it was read (agent_cb) are not checked again as UTF-8. */
static json_t *answer_of(const struct call *c, int index, enum vg_orch_verdict v,
                         const char *reason, const struct agent_row *child, const char *key,
                         json_t *request_id)
{
    json_t *a = json_object();
    int bad =
        !a || json_object_set_new(a, "index", json_integer(index)) ||
        json_object_set_new(a, "decision", json_string_nocheck(vg_orch_verdict_name(v))) ||
        json_object_set_new(a, "reason", json_string_nocheck(reason)) ||
        (child && json_object_set_new(a, "child_agent", text_value(child->id, child->ascii))) ||
        (key && json_object_set_new(a, "run_key", json_string_nocheck(key))) ||
        (request_id && json_object_set(a, "request_id", request_id)) ||
        json_object_set_new(a, "depth", json_integer(c->base.parent_depth + 1));
    if (bad) {
        json_decref(a);
        return NULL;
    }
    return a;
}

/* The same answer as canonical text, after the call's earlier ones: written from its fields as
 * the tree is built, so the executor never encodes the call's answer (tool.h, result_text). */
static int answer_text(struct call *c, int index, enum vg_orch_verdict v, const char *reason,
                       const char *child, const char *key, const char *request_id)
{
    struct vg_jfield f[7] = {
        {"decision", VG_JF_STR, vg_orch_verdict_name(v), 0},
        {"depth", VG_JF_INT, NULL, c->base.parent_depth + 1},
        {"index", VG_JF_INT, NULL, index},
        {"reason", VG_JF_STR, reason, 0},
    };
    size_t n = 4;
    if (child) /* answer_of leaves out what the decision has not */
        f[n++] = (struct vg_jfield){"child_agent", VG_JF_STR, child, 0};
    if (key)
        f[n++] = (struct vg_jfield){"run_key", VG_JF_STR, key, 0};
    if (request_id) /* the parent's name for the request, when it gave one */
        f[n++] = (struct vg_jfield){"request_id", VG_JF_STR, request_id, 0};
    if (c->answers.len > 1)
        vg_buf_putc(&c->answers, ',');
    return vg_json_put_fields(&c->answers, f, n) < 0 || c->answers.fail;
}

/* Text of len bytes appended at *n of buf (cap), cut to fit: the per-decision texts below are
 * put together piece by piece, where snprintf's format parsing was most of their cost. */
static void put_cut(char *buf, size_t cap, size_t *n, const char *text, size_t len)
{
    len = VG_MIN(len, cap - 1 - *n);
    memcpy(buf + *n, text, len);
    *n += len;
    buf[*n] = '\0';
}

static void put_str(char *buf, size_t cap, size_t *n, const char *text)
{
    put_cut(buf, cap, n, text, strlen(text));
}

/* A number >= 0 in decimal (a request's index). */
static void put_index(char *buf, size_t cap, size_t *n, int v)
{
    char digits[16];
    size_t d = sizeof digits;
    unsigned u = v < 0 ? 0 : (unsigned)v;
    do
        digits[--d] = (char)('0' + u % 10);
    while ((u /= 10) && d);
    put_cut(buf, cap, n, digits + d, sizeof digits - d);
}

/* One decision for the calling run's journal: {kind: spawn-admitted|spawn-denied|
 * spawn-awaiting-approval, reason}, its reason naming the request, the child and the run key.
 * Every part of that text but the child's id is ASCII (admit.c's reasons, the verdict's name,
 * the hex key), so it is checked as UTF-8 only when the id is not ASCII. */
static int journal_decision(struct call *c, int index, enum vg_orch_verdict v, const char *reason,
                            const struct agent_row *child, const char *key)
{
    /* "request N (VERDICT, child ID, run key KEY16): REASON"; it fits whole (the id has at most
     * 36 bytes, the reason is admit.c's), so nothing is cut inside a character */
    char why[1024];
    size_t n = 0;
    put_str(why, sizeof why, &n, "request ");
    put_index(why, sizeof why, &n, index);
    put_str(why, sizeof why, &n, " (");
    put_str(why, sizeof why, &n, vg_orch_verdict_name(v));
    put_str(why, sizeof why, &n, ", child ");
    put_str(why, sizeof why, &n, child ? child->id : "none");
    put_str(why, sizeof why, &n, ", run key ");
    put_cut(why, sizeof why, &n, key ? key : "none", key ? VG_MIN(strlen(key), 16) : 4);
    put_str(why, sizeof why, &n, "): ");
    put_cut(why, sizeof why, &n, reason, VG_MIN(strlen(reason), 900));
    const char *kind = v == VG_ORCH_DENIED              ? "spawn-denied"
                       : v == VG_ORCH_AWAITING_APPROVAL ? "spawn-awaiting-approval"
                                                        : "spawn-admitted";
    /* Not json_pack: parsing its format cost more than building the object (about 6 k
     * instructions a decision). */
    json_t *d = json_object();
    if (!d || json_object_set_new(d, "kind", json_string_nocheck(kind)) ||
        json_object_set_new(d, "reason", text_value(why, !child || child->ascii))) {
        json_decref(d);
        return 1;
    }
    return json_array_append_new(c->journal, d);
}

/* The decision as recorded (one entry of the call's spawn_call record, its text written from
 * its fields), as answered (returned, owned, and its text kept) and as journaled. */
static vigil_code record_decision(struct call *c, const struct one *o, enum vg_orch_verdict v,
                                  const char *reason, json_t **answer, vigil_error *err)
{
    const char *cid = o->child ? o->child->id : NULL;
    const char *key = v != VG_ORCH_DENIED ? o->key : NULL;
    struct vg_jfield f[] = {
        {"child_agent", VG_JF_STR, cid, 0},
        {"decision", VG_JF_STR, vg_orch_verdict_name(v), 0},
        {"index", VG_JF_INT, NULL, o->index},
        {"reason", VG_JF_STR, reason, 0},
        {"request", VG_JF_RAW, o->req_text, 0},
        {"run_key", VG_JF_STR, key, 0},
        {"granted_scopes", VG_JF_RAW, o->scopes_text, 0}, /* what a child admitted may touch */
    };
    if (c->decisions.len > 1)
        vg_buf_putc(&c->decisions, ',');
    if (vg_json_put_fields(&c->decisions, f, VG_ARRAY_LEN(f) - (key ? 0 : 1)) < 0 ||
        c->decisions.fail)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory recording a spawn decision");
    c->admitted += v == VG_ORCH_ADMITTED || v == VG_ORCH_QUEUED;
    c->awaiting += v == VG_ORCH_AWAITING_APPROVAL;
    json_t *rid = json_object_get(o->req, "request_id");
    if (!(*answer = answer_of(c, o->index, v, reason, o->child, key, rid)) ||
        answer_text(c, o->index, v, reason, cid, key, json_string_value(rid)) ||
        journal_decision(c, o->index, v, reason, o->child, key))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory answering spawn_agents");
    return VIGIL_OK;
}

/* The call's decisions as one record (orch.h, spawn_call): k1 says whether any admitted a
 * child, which the cooldown reads. A replayed call finds it written and writes nothing. */
static vigil_code record_call(struct call *c, vigil_error *err)
{
    struct vg_buf b;
    vg_buf_putc(&c->decisions, ']');
    vg_buf_putc(&c->waiting, ']');
    vigil_code rc = vg_buf_finish(&c->decisions, err);
    if (!rc)
        rc = vg_buf_finish(&c->waiting, err);
    struct vg_jfield f[] = {
        {"decisions", VG_JF_RAW, c->decisions.data, 0},
        {"depth", VG_JF_INT, NULL, c->base.parent_depth + 1},
        {"group", VG_JF_STR, c->group, 0},
        {"parent_run_key", VG_JF_STR, parent_key(c), 0},
        {"waiting", VG_JF_RAW, c->waiting.data, 0}, /* only when a child was queued */
    };
    const char *k1 = c->queued     ? "waiting"
                     : c->admitted ? "admitted"
                     : c->awaiting ? "awaiting_approval"
                                   : "denied";
    size_t nf = VG_ARRAY_LEN(f) - (c->queued ? 0 : 1);
    vg_buf_init(&b, VG_BUF_DEFAULT_MAX);
    if (!rc && (vg_json_put_fields(&b, f, nf) < 0 || b.fail))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory recording spawn decisions");
    if (!rc)
        rc = vg_buf_finish(&b, err);
    if (!rc)
        rc = vg_env_put_text(c->env, "spawn_call", c->group, c->q->agent_id, k1, parent_key(c),
                             vg_env_now(c->env), b.data, VG_PUT_IF_ABSENT, err);
    vg_buf_release(&b);
    return rc;
}

/* Whether the parent's spawn.agents (names and globs; absent: any agent) lists the child by
 * its name: a spawn-enabled agent otherwise reaches every live agent's tools (trial H3). */
static int child_listed(const struct call *c, const struct agent_row *child)
{
    json_t *list = json_object_get(json_object_get(json_object_get(c->parent, "config"), "spawn"),
                                   "agents"),
           *p;
    size_t i;
    if (!json_is_array(list))
        return 1;
    json_array_foreach (list, i, p) {
        const char *pat = json_string_value(p);
        if (pat && child->name && !fnmatch(pat, child->name, 0))
            return 1;
    }
    return 0;
}

/* Record and, when admitted, start (or queue, or ask a person about) one child. */
static vigil_code decide_one(struct call *c, struct vg_wake *w, json_t *req, int index,
                             json_t *answers, vigil_error *err)
{
    struct one o = {.req = req, .index = index};
    json_t *d = NULL;
    struct vg_orch_facts f = c->base;
    char *req_text = vg_json_dump(req, 1);
    vigil_code rc = req_text ? find_child(c, req, &o.child, err)
                             : VG_FAIL(err, VIGIL_ENOMEM, "out of memory deciding a spawn");
    o.req_text = req_text;
    json_t *asked = json_object_get(req, "allowed_scopes");
    o.scopes =
        asked ? vg_tool_scopes_narrow(c->parent_scopes, asked) : json_incref(c->parent_scopes);
    char *scopes_text = o.scopes ? vg_json_dump(o.scopes, 1) : NULL;
    o.scopes_text = scopes_text;
    if (!rc && !scopes_text)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory deciding a spawn");
    const char *cid = o.child ? o.child->id : NULL;
    f.child_found = o.child != NULL;
    f.child_is_parent = cid && !strcmp(cid, c->q->agent_id);
    f.child_not_listed = cid && !child_listed(c, o.child);
    if (rc)
        goto out;
    f.kill_switch |= cid && vg_kill_on_for(&c->kill, cid, NULL);
    const char *tier = json_string_value(json_object_get(req, "risk_tier"));
    f.high_risk = tier && !strcmp(tier, "high");
    f.cost_asked = (int64_t)(json_number_value(json_object_get(req, "cost_budget_usd")) * 1e6);
    f.tokens_asked = vg_orch_jint(req, "token_budget");
    f.approval_required = vg_orch_jint(req, "required_approvals") > 0;
    const char *reason;
    enum vg_orch_verdict v = vg_orch_admit(&f, &reason);
    size_t n = 0; /* "spawn:GROUP:INDEX" */
    put_str(o.session, sizeof o.session, &n, "spawn:");
    put_str(o.session, sizeof o.session, &n, c->group);
    put_str(o.session, sizeof o.session, &n, ":");
    put_index(o.session, sizeof o.session, &n, index);
    if (cid)
        vg_run_key_user(o.key, cid, o.session, "1");
    if (v != VG_ORCH_DENIED) {
        if ((rc = write_child(c, w, &o, v, err)))
            goto out;
        c->base.running_parent += v == VG_ORCH_ADMITTED;
        c->base.running_global += v == VG_ORCH_ADMITTED;
        c->base.cost_left = less_held(c->base.cost_left, f.cost_asked);
        c->base.tokens_left = less_held(c->base.tokens_left, f.tokens_asked);
    }
    if (!(rc = record_decision(c, &o, v, reason, &d, err)) && json_array_append_new(answers, d))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory answering spawn_agents");
out:
    vg_free(req_text);
    vg_free(scopes_text);
    json_decref(o.scopes);
    return rc;
}

static const char answer_note[] = "Admitted children run on their own. Your next wake brings "
                                  "every child's result once the last one finishes.";

/* The call's answer into r: its tree, its canonical text (written from the answers' texts, not
 * encoded from the tree) and the decisions for the calling run's journal. */
static vigil_code answer(struct call *c, json_t *children, struct vg_tool_response *r,
                         vigil_error *err)
{
    struct vg_buf b;
    vg_buf_putc(&c->answers, ']');
    struct vg_jfield f[] = {
        {"children", VG_JF_RAW, c->answers.data, 0},
        {"group", VG_JF_STR, c->group, 0},
        {"note", VG_JF_STR, answer_note, 0},
    };
    vg_buf_init(&b, 0);
    int bad = c->answers.fail || vg_json_put_fields(&b, f, VG_ARRAY_LEN(f)) < 0 || b.fail;
    r->result =
        json_pack("{s:s, s:o, s:s}", "group", c->group, "children", children, "note", answer_note);
    r->result_text = bad ? NULL : vg_buf_detach(&b, NULL);
    r->decisions = c->journal;
    c->journal = NULL;
    vg_buf_release(&b);
    if (!r->result || !r->result_text)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory answering spawn_agents");
    return VIGIL_OK;
}

vigil_code vg_orch_spawn(struct vg_env *env, const struct vg_tool_request *q,
                         struct vg_tool_response *r, vigil_error *err)
{
    struct call c = {.env = env, .q = q, .journal = json_array()};
    vg_buf_init(&c.decisions, VG_BUF_DEFAULT_MAX);
    vg_buf_init(&c.waiting, VG_BUF_DEFAULT_MAX);
    vg_buf_init(&c.answers, 0);
    vg_buf_putc(&c.decisions, '[');
    vg_buf_putc(&c.waiting, '[');
    vg_buf_putc(&c.answers, '[');
    struct vg_wake w;
    json_t *answers = json_array(), *req;
    size_t i;
    snprintf(c.group, sizeof c.group, "%.32s", q->operation_id ? q->operation_id : "");
    vigil_code rc = strlen(c.group) < 32
                        ? VG_FAIL(err, VIGIL_EINVAL, "spawn_agents needs the call's operation id")
                    : answers && c.journal
                        ? read_facts(&c, err)
                        : VG_FAIL(err, VIGIL_ENOMEM, "out of memory spawning agents");
    if (!rc)
        rc = vg_orch_call_recorded(env, c.group, &c.recorded, err);
    if (!rc)
        rc = vg_wake_init(&w, env, NULL, err);
    if (!rc) {
        json_array_foreach (json_object_get(q->args, "requests"), i, req) {
            if ((rc = decide_one(&c, &w, req, (int)i, answers, err)))
                break;
        }
        vg_wake_release(&w);
    }
    if (!rc)
        rc = record_call(&c, err);
    if (!rc) /* the call's last spawn_child write is behind it */
        vg_orch_running_keep(env, q->agent_id, c.running_parent, c.running_all);
    if (!rc)
        rc = answer(&c, answers, r, err);
    else
        json_decref(answers);
    vg_buf_release(&c.decisions);
    vg_buf_release(&c.waiting);
    vg_buf_release(&c.answers);
    json_decref(c.journal);
    json_decref(c.parent);
    json_decref(c.parent_child);
    json_decref(c.parent_scopes);
    agents_keep(&c);
    vg_kill_on_release(&c.kill);
    return rc;
}
