/*
 * spawn.c: one spawn_agents call. The facts every request shares (the parent's manifest, depth,
 * budgets, cooldown, slots) are read once; each request then gets its child agent, its verdict
 * from admit.c, a spawn_decision record and, when admitted, a spawn_child record and (when a
 * slot is free) the child's wake. Everything is keyed by the call's group, derived from its
 * operation id, so a replay writes nothing new and starts no child twice.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "base/buf.h"
#include "orch/orch_int.h"

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

/* What the whole call shares. */
struct call {
    struct vg_env *env;
    const struct vg_tool_request *q;
    json_t *parent;       /* the parent agent (owned) */
    json_t *parent_child; /* the parent's own spawn_child record, or NULL (owned) */
    json_t *agents;       /* every agent, read once for the call's requests (owned), or NULL */
    char group[33];
    struct vg_orch_facts base;
    int64_t steps_left; /* the parent's steps budget left today; -1: unlimited */
};

static int last_admitted_cb(void *user, const struct vg_record *r)
{
    *(int64_t *)user = r->seq;
    return 1;
}

static int reserved_cb(void *user, const struct vg_record *r)
{
    json_t *b = json_loads(r->body, 0, NULL);
    double usd =
        json_number_value(json_object_get(json_object_get(b, "request"), "cost_budget_usd"));
    *(int64_t *)user += (int64_t)(usd * 1e6);
    json_decref(b);
    return 0;
}

/* What the parent's running and waiting children may still spend is not the parent's to give
 * again: their cost budgets are taken off what it has left. */
static vigil_code reserve(struct call *c, vigil_error *err)
{
    static const char *const states[] = {"running", "waiting", "approval"};
    int64_t held = 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(states); i++) {
        struct vg_query q = {.kind = "spawn_child", .owner = c->q->agent_id, .k1 = states[i]};
        vigil_code rc = vg_store_scan(c->env->store, &q, reserved_cb, &held, err);
        if (rc)
            return rc;
    }
    c->base.cost_left = held >= c->base.cost_left ? 0 : c->base.cost_left - held;
    return VIGIL_OK;
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
    c->base.cost_left =
        json_is_integer(cost) ? json_integer_value(cost) - vg_orch_jint(usage, "cost_micros") : -1;
    c->steps_left =
        json_is_integer(steps) ? json_integer_value(steps) - vg_orch_jint(usage, "steps") : -1;
    if (c->base.cost_left < -1)
        c->base.cost_left = 0;
    json_decref(usage);
    return c->base.cost_left > 0 ? reserve(c, err) : VIGIL_OK;
}

static vigil_code read_facts(struct call *c, vigil_error *err)
{
    struct vg_env *env = c->env;
    const char *agent = c->q->agent_id;
    vigil_code rc = vg_agent_get(env, agent, &c->parent, NULL, err);
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
    if (c->parent_child) {
        f->parent_depth = (int)vg_orch_jint(c->parent_child, "depth");
        json_t *req = json_object_get(c->parent_child, "request");
        /* Granted twice over: by the spawn that made this run, and by name (not a glob) in the
         * agent's own manifest. */
        f->granted = has_string(json_object_get(req, "allowed_tools"), "spawn_agents") &&
                     has_string(json_object_get(config, "tools"), "spawn_agents");
    }
    int64_t last = -1;
    struct vg_query q = {
        .kind = "spawn_decision", .owner = agent, .k1 = "admitted", .descending = 1, .limit = 1};
    if ((rc = vg_store_scan(env->store, &q, last_admitted_cb, &last, err)))
        return rc;
    f->since_last_ms = last < 0 ? -1 : vg_env_now(env) - last;
    int on = 0;
    if ((rc = vg_kill_active(env, agent, NULL, &on, err)))
        return rc;
    f->kill_switch = on;
    f->cap_parent = vg_orch_parent_cap(config);
    f->cap_global = VG_ORCH_GLOBAL_DEFAULT;
    if ((rc = vg_orch_count(env, "spawn_child", agent, "running", NULL, &f->running_parent, err)) ||
        (rc = vg_orch_count(env, "spawn_child", NULL, "running", NULL, &f->running_global, err)))
        return rc;
    return read_budgets(c, err);
}

static int live(json_t *a)
{
    const char *lc = json_string_value(json_object_get(a, "lifecycle"));
    return lc && (!strcmp(lc, "active") || !strcmp(lc, "created"));
}

static vigil_code keep_agent(void *user, json_t *a, vigil_error *err)
{
    return json_array_append(user, a) ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing agents")
                                      : VIGIL_OK;
}

/* Does agent a answer to the request's name, or (no name) its kind? Never the parent by kind. */
static int names(const struct call *c, json_t *a, const char *name, const char *kind)
{
    const char *id = json_string_value(json_object_get(a, "id"));
    const char *n = json_string_value(json_object_get(a, "name"));
    const char *k = json_string_value(json_object_get(a, "kind"));
    const char *lc = json_string_value(json_object_get(a, "lifecycle"));
    if (!id || (lc && !strcmp(lc, "destroyed")))
        return 0;
    if (name)
        return !strcmp(id, name) || (n && !strcmp(n, name));
    return k && !strcmp(k, kind) && strcmp(id, c->q->agent_id) != 0;
}

/* The child a request names: an agent by id or name, else the first live agent of its kind
 * other than the parent (agents listed by id: the same request picks the same child). The
 * agents are read once for all of the call's requests. */
static vigil_code find_child(struct call *c, json_t *req, json_t **child, vigil_error *err)
{
    const char *name = json_string_value(json_object_get(req, "agent"));
    const char *kind = json_string_value(json_object_get(req, "kind"));
    json_t *a;
    size_t i;
    *child = NULL;
    if (!name && !kind)
        return VIGIL_OK;
    if (!c->agents) {
        vigil_code rc = (c->agents = json_array())
                            ? vg_agent_each(c->env, keep_agent, c->agents, err)
                            : VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing agents");
        if (rc)
            return rc;
    }
    json_array_foreach (c->agents, i, a) {
        if (names(c, a, name, kind)) {
            *child = live(a) ? json_incref(a) : NULL;
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
    return vg_buf_detach(&b, NULL);
}

vigil_code vg_orch_enqueue_child(struct vg_wake *w, const char *run_key, json_t *child,
                                 vigil_error *err)
{
    char key[65];
    enum vg_enqueue_result res;
    char *text = child_input(child);
    json_t *seed = text ? json_string(text) : NULL;
    json_t *meta = json_pack("{s:{s:s}}", "spawn", "run_key", run_key);
    vg_free(text);
    if (!seed || !meta) {
        json_decref(seed);
        json_decref(meta);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting a child");
    }
    struct vg_wake_req r = {.reason = VG_REASON_USER,
                            .agent_id = json_string_value(json_object_get(child, "child_agent")),
                            .session_id = json_string_value(json_object_get(child, "session")),
                            .turn_id = "1",
                            .seed_input = seed,
                            .meta = meta};
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
    json_t *scopes = json_object_get(req, "allowed_scopes");
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

static json_t *child_record(const struct call *c, json_t *req, json_t *child, int index,
                            const char *session, const char *key, const char *status)
{
    const char *thread = c->q->thread_id ? c->q->thread_id : "";
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:O, s:O, s:i, s:s, s:i, s:O, s:s, s:s, s:I, s:I}",
                     "run_key", key, "parent_agent", c->q->agent_id, "parent_run_key",
                     parent_key(c), "parent_thread", thread, "child_agent",
                     json_string_value(json_object_get(child, "id")), "child_name",
                     json_object_get(child, "name"), "child_kind", json_object_get(child, "kind"),
                     "depth", c->base.parent_depth + 1, "group", c->group, "index", index,
                     "request", req, "session", session, "status", status, "admitted_ms",
                     (json_int_t)vg_env_now(c->env), "max_steps", (json_int_t)child_steps(c, req));
}

static const char *child_status(enum vg_orch_verdict v)
{
    return v == VG_ORCH_ADMITTED ? "running" : v == VG_ORCH_QUEUED ? "waiting" : "approval";
}

/* The spawn_child record of an admitted (or approval-awaiting) child, its grant, and its wake
 * (admitted) or a person's approval (high risk). A replayed call inserts nothing: done. */
static vigil_code write_child(struct call *c, struct vg_wake *w, json_t *req, json_t *child,
                              int index, enum vg_orch_verdict v, const char *session,
                              const char *key, vigil_error *err)
{
    const char *status = child_status(v);
    json_t *rec = child_record(c, req, child, index, session, key, status);
    char *text = rec ? json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    int inserted = 0;
    struct vg_record r = {.kind = "spawn_child",
                          .id = key,
                          .owner = c->q->agent_id,
                          .k1 = status,
                          .k2 = c->group,
                          .seq = vg_env_now(c->env),
                          .at = vg_env_now(c->env),
                          .body = text};
    vigil_code rc = text ? vg_store_put(c->env->store, &r, VG_PUT_IF_ABSENT, &inserted, err)
                         : VG_FAIL(err, VIGIL_ENOMEM, "out of memory admitting a child");
    vg_free(text);
    if (!rc && inserted)
        rc = vg_orch_grant(c->env, key, rec, err);
    if (!rc && inserted && v == VG_ORCH_ADMITTED)
        rc = vg_orch_enqueue_child(w, key, rec, err);
    if (!rc && inserted && v == VG_ORCH_AWAITING_APPROVAL)
        rc = vg_orch_approval_ask(c->env, rec, err);
    json_decref(rec);
    return rc;
}

/* The decision as recorded (spawn_decision) and as answered (returned, owned). */
static vigil_code record_decision(struct call *c, json_t *req, int index, const char *cid,
                                  enum vg_orch_verdict v, const char *reason, const char *key,
                                  json_t **answer, vigil_error *err)
{
    char did[48];
    snprintf(did, sizeof did, "%s:%d", c->group, index);
    json_t *d =
        json_pack("{s:s, s:i, s:s, s:s, s:s?, s:s?, s:s, s:i, s:O}", "group", c->group, "index",
                  index, "decision", vg_orch_verdict_name(v), "reason", reason, "child_agent", cid,
                  "run_key", v != VG_ORCH_DENIED ? key : NULL, "parent_run_key", parent_key(c),
                  "depth", c->base.parent_depth + 1, "request", req);
    const char *k1 = v == VG_ORCH_DENIED              ? "denied"
                     : v == VG_ORCH_AWAITING_APPROVAL ? "awaiting_approval"
                                                      : "admitted";
    vigil_code rc = d ? vg_env_put_json(c->env, "spawn_decision", did, c->q->agent_id, k1,
                                        parent_key(c), vg_env_now(c->env), d, VG_PUT_IF_ABSENT, err)
                      : VG_FAIL(err, VIGIL_ENOMEM, "out of memory recording a spawn decision");
    if (rc) {
        json_decref(d);
        return rc;
    }
    json_object_del(d, "request");
    json_object_del(d, "group");
    json_object_del(d, "parent_run_key");
    *answer = d;
    return VIGIL_OK;
}

/* Record and, when admitted, start (or queue, or ask a person about) one child. */
static vigil_code decide_one(struct call *c, struct vg_wake *w, json_t *req, int index,
                             json_t *answers, vigil_error *err)
{
    json_t *child = NULL, *d = NULL;
    char session[64], key[65] = "";
    struct vg_orch_facts f = c->base;
    vigil_code rc = find_child(c, req, &child, err);
    if (rc)
        return rc;
    const char *cid = child ? json_string_value(json_object_get(child, "id")) : NULL;
    f.child_found = child != NULL;
    f.child_is_parent = cid && !strcmp(cid, c->q->agent_id);
    int on = 0;
    if (cid && (rc = vg_kill_active(c->env, cid, NULL, &on, err)))
        goto out;
    f.kill_switch |= on;
    const char *tier = json_string_value(json_object_get(req, "risk_tier"));
    f.high_risk = tier && !strcmp(tier, "high");
    f.cost_asked = (int64_t)(json_number_value(json_object_get(req, "cost_budget_usd")) * 1e6);
    const char *reason;
    enum vg_orch_verdict v = vg_orch_admit(&f, &reason);
    snprintf(session, sizeof session, "spawn:%s:%d", c->group, index);
    if (cid)
        vg_run_key_user(key, cid, session, "1");
    if (v != VG_ORCH_DENIED) {
        if ((rc = write_child(c, w, req, child, index, v, session, key, err)))
            goto out;
        c->base.running_parent += v == VG_ORCH_ADMITTED;
        c->base.running_global += v == VG_ORCH_ADMITTED;
        if (c->base.cost_left > 0)
            c->base.cost_left -=
                f.cost_asked < c->base.cost_left ? f.cost_asked : c->base.cost_left;
    }
    if (!(rc = record_decision(c, req, index, cid, v, reason, key, &d, err)) &&
        json_array_append_new(answers, d))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory answering spawn_agents");
out:
    json_decref(child);
    return rc;
}

vigil_code vg_orch_spawn(struct vg_env *env, const struct vg_tool_request *q, json_t **out,
                         vigil_error *err)
{
    struct call c = {.env = env, .q = q};
    struct vg_wake w;
    json_t *answers = json_array(), *req;
    size_t i;
    snprintf(c.group, sizeof c.group, "%.32s", q->operation_id ? q->operation_id : "");
    if (strlen(c.group) < 32)
        return VG_FAIL(err, VIGIL_EINVAL, "spawn_agents needs the call's operation id");
    vigil_code rc =
        answers ? read_facts(&c, err) : VG_FAIL(err, VIGIL_ENOMEM, "out of memory spawning agents");
    if (!rc)
        rc = vg_wake_init(&w, env, NULL, err);
    if (!rc) {
        json_array_foreach (json_object_get(q->args, "requests"), i, req) {
            if ((rc = decide_one(&c, &w, req, (int)i, answers, err)))
                break;
        }
        vg_wake_release(&w);
    }
    json_decref(c.parent);
    json_decref(c.parent_child);
    json_decref(c.agents);
    if (!rc && !(*out = json_pack("{s:s, s:o, s:s}", "group", c.group, "children", answers, "note",
                                  "Admitted children run on their own. Your next wake "
                                  "brings every child's result once the last one finishes.")))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory answering spawn_agents");
    if (rc)
        json_decref(answers);
    return rc;
}
