/*
 * child.c: the end of a spawned child's run. Its result is recorded and its spend charged to
 * its parent; a waiting sibling takes its slot; and the last child of a group enqueues the
 * parent's wake, whose input is every child's result. The parent meanwhile holds nothing: no
 * thread, no fiber, no lease, only records. A child that itself spawned is not finished until
 * the wake bringing its own children's results has run: that wake's run key is an alias
 * (spawn_alias record) of the child's, so its depth and its parent stay the child's.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "base/buf.h"
#include "base/json.h"
#include "loop/loop.h"
#include "orch/orch_int.h"
#include "orch/task.h"

#define RESULT_MAX 16000

static vigil_code child_get_direct(struct vg_env *env, const char *key, json_t **out, int64_t *rev,
                                   vigil_error *err)
{
    return vg_env_get_json(env, "spawn_child", key, out, rev, err);
}

vigil_code vg_orch_child_get(struct vg_env *env, const char *run_key, json_t **out, int64_t *rev,
                             vigil_error *err)
{
    json_t *alias = NULL;
    vigil_code rc = child_get_direct(env, run_key, out, rev, err);
    if (rc != VIGIL_ENOTFOUND)
        return rc;
    if ((rc = vg_env_get_json(env, "spawn_alias", run_key, &alias, NULL, err)))
        return rc;
    const char *key = json_string_value(json_object_get(alias, "child_run_key"));
    rc = key ? child_get_direct(env, key, out, rev, err)
             : VG_FAIL(err, VIGIL_ECORRUPT, "spawn alias %.16s names no child", run_key);
    json_decref(alias);
    return rc;
}

/* ---- children kept in their spawn_call record until they start ------------------------------
 * A call's children queued for a slot are not a spawn_child record each: the call's record
 * keeps their bodies ("waiting", status `waiting`) and has k1 `waiting` while any of them has
 * not started; a child that starts gets its spawn_child record then (status `running`), and
 * the call's k1 becomes `admitted` with its last one. Readers join both (orch.h). */

struct calls {
    struct vg_record **r; /* owned copies */
    size_t n, cap;
    int failed;
};

static int calls_cb(void *user, const struct vg_record *r)
{
    struct calls *c = user;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        struct vg_record **grown = vg_realloc(c->r, cap * sizeof *grown);
        if (!grown)
            return c->failed = 1;
        c->r = grown;
        c->cap = cap;
    }
    if (!(c->r[c->n] = vg_record_dup(r)))
        return c->failed = 1;
    c->n++;
    return 0;
}

static void calls_release(struct calls *c)
{
    for (size_t i = 0; i < c->n; i++)
        vg_free(c->r[i]);
    vg_free(c->r);
}

static int found_cb(void *user, const struct vg_record *r)
{
    (void)r;
    *(int *)user = 1;
    return 1;
}

static vigil_code child_started(struct vg_env *env, const char *key, int *started, vigil_error *err)
{
    *started = 0;
    if (!key)
        return VG_FAIL(err, VIGIL_ECORRUPT, "a waiting child of a spawn call has no run key");
    vigil_code rc = vg_store_get(env->store, "spawn_child", key, found_cb, started, err);
    return rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc;
}

static vigil_code waiting_of_call(struct vg_env *env, const struct vg_record *call,
                                  vg_orch_waiting_fn fn, void *user, vigil_error *err)
{
    json_t *body = NULL, *child;
    size_t i;
    if (vg_env_parse_json_shared(env, call->body, &body))
        return VG_FAIL(err, VIGIL_ECORRUPT, "spawn call %.16s is not JSON", call->id);
    vigil_code rc = VIGIL_OK;
    json_array_foreach (json_object_get(body, "waiting"), i, child) {
        int started = 0;
        rc =
            child_started(env, json_string_value(json_object_get(child, "run_key")), &started, err);
        if (!rc && !started)
            rc = fn(user, child, vg_orch_jint(child, "admitted_ms"), err);
        if (rc)
            break;
    }
    json_decref(body);
    return rc;
}

vigil_code vg_orch_waiting_each(struct vg_env *env, const char *owner, const char *parent_run_key,
                                vg_orch_waiting_fn fn, void *user, vigil_error *err)
{
    struct calls calls = {0};
    struct vg_query q = {
        .kind = "spawn_call", .owner = owner, .k1 = "waiting", .k2 = parent_run_key};
    vigil_code rc = vg_store_scan(env->store, &q, calls_cb, &calls, err);
    if (!rc && calls.failed)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading waiting children");
    for (size_t i = 0; !rc && i < calls.n; i++)
        rc = waiting_of_call(env, calls.r[i], fn, user, err);
    calls_release(&calls);
    return rc;
}

static int k1_cb(void *user, const struct vg_record *r)
{
    snprintf(user, 32, "%s", r->k1);
    return 1;
}

/* The k1 of a group's spawn_call record ("" when there is none). */
static vigil_code call_k1(struct vg_env *env, const char *group, char k1[32], vigil_error *err)
{
    k1[0] = '\0';
    vigil_code rc =
        group ? vg_store_get(env->store, "spawn_call", group, k1_cb, k1, err) : VIGIL_ENOTFOUND;
    return rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc;
}

vigil_code vg_orch_call_recorded(struct vg_env *env, const char *group, int *recorded,
                                 vigil_error *err)
{
    char k1[32];
    vigil_code rc = call_k1(env, group, k1, err);
    *recorded = k1[0] != '\0';
    return rc;
}

/* The group's last waiting child started: its call's k1 says so (the cooldown reads
 * `admitted`, and no reader looks for waiting children in it any more). */
static vigil_code call_all_started(struct vg_env *env, const char *group, vigil_error *err)
{
    struct vg_record *r = NULL;
    vigil_code rc = vg_store_get_copy(env->store, "spawn_call", group, &r, err);
    if (!rc && !strcmp(r->k1, "waiting"))
        rc = vg_env_update_text(env, "spawn_call", r->id, r->owner, "admitted", r->k2, r->seq,
                                r->body, r->rev, err);
    vg_free(r);
    return rc;
}

struct open_ctx {
    const char *run_key;
    int open;
};

/* A child whose request says on_complete none is not waited for: its parent is never woken
 * with its result. (Its canonical request holds the key and value as written here only when
 * they are the request's own: a quote inside a string is escaped.) */
static int waited_for(const char *body)
{
    return !strstr(body, "\"on_complete\":\"none\"");
}

static int open_cb(void *user, const struct vg_record *r)
{
    struct open_ctx *o = user;
    char needle[100];
    snprintf(needle, sizeof needle, "\"parent_run_key\":\"%s\"", o->run_key);
    return o->open = strstr(r->body, needle) != NULL && waited_for(r->body);
}

static vigil_code open_kept_cb(void *user, json_t *child, int64_t seq, vigil_error *err)
{
    (void)seq;
    (void)err;
    *(int *)user |= strcmp(vg_orch_on_complete(child), "none") != 0;
    return VIGIL_OK;
}

/* Does the run still have children of its own running or waiting? */
static vigil_code has_open_children(struct vg_env *env, const char *agent, const char *run_key,
                                    int *open, vigil_error *err)
{
    static const char *const states[] = {"running", "waiting", "approval"};
    struct open_ctx o = {run_key, 0};
    vigil_code rc = VIGIL_OK;
    for (size_t i = 0; !rc && !o.open && i < VG_ARRAY_LEN(states); i++) {
        struct vg_query q = {.kind = "spawn_child", .owner = agent, .k1 = states[i]};
        rc = vg_store_scan(env->store, &q, open_cb, &o, err);
    }
    int calls = 0; /* a call of the run with a child waiting in it, which it waits for */
    if (!rc && !o.open &&
        !(rc = vg_orch_count(env, "spawn_call", agent, "waiting", run_key, &calls, err)) && calls)
        rc = vg_orch_waiting_each(env, agent, run_key, open_kept_cb, &o.open, err);
    *open = o.open;
    return rc;
}

/* A waiting child: [seq, run key, its body when its call's record keeps it, else null]. */
static int waiting_cb(void *user, const struct vg_record *r)
{
    return json_array_append_new(user, json_pack("[I, s, n]", (json_int_t)r->seq, r->id)) != 0;
}

static vigil_code waiting_kept_cb(void *user, json_t *child, int64_t seq, vigil_error *err)
{
    json_t *key = json_object_get(child, "run_key");
    if (json_array_append_new(user, json_pack("[I, O, O]", (json_int_t)seq, key, child)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading waiting children");
    return VIGIL_OK;
}

/* The parent's waiting children, oldest first: the records (a person's approval, or a store
 * written before waiting children were kept in their call) and the calls' kept ones. */
static vigil_code waiting_children(struct vg_env *env, const char *parent, json_t **out,
                                   vigil_error *err)
{
    json_t *items = json_array();
    struct vg_query q = {.kind = "spawn_child", .owner = parent, .k1 = "waiting"};
    vigil_code rc = items ? vg_store_scan(env->store, &q, waiting_cb, items, err)
                          : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    if (!rc)
        rc = vg_orch_waiting_each(env, parent, NULL, waiting_kept_cb, items, err);
    if (!rc && vg_json_array_sort(items, vg_orch_by_seq_then_key))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading waiting children");
    if (rc)
        json_decref(items);
    else
        *out = items;
    return rc;
}

/* Start one waiting child: its record moves to running, or (kept in its call) is written so. */
static vigil_code start_one(struct vg_env *env, struct vg_wake *w, const char *parent, json_t *item,
                            vigil_error *err)
{
    const char *key = json_string_value(json_array_get(item, 1));
    json_t *kept = json_array_get(item, 2), *rec = NULL;
    int64_t rev = 0;
    vigil_code rc;
    if (json_is_object(kept)) {
        rec = json_deep_copy(kept);
        rc = rec && !json_object_set_new(rec, "status", json_string("running"))
                 ? vg_env_put_json(env, "spawn_child", key, parent, "running",
                                   json_string_value(json_object_get(rec, "group")),
                                   vg_orch_jint(rec, "admitted_ms"), rec, VG_PUT_IF_ABSENT, err)
                 : VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting a child");
    } else if (!(rc = child_get_direct(env, key, &rec, &rev, err))) {
        rc = vg_orch_child_set_status(env, key, rec, rev, "running", err);
    }
    if (!rc)
        rc = vg_orch_enqueue_child(w, key, rec, err);
    json_decref(rec);
    return rc;
}

/* The calls whose kept children all started now: started counts each call's kept children this
 * round started, items holds every one not started before it. */
static vigil_code calls_settled(struct vg_env *env, json_t *items, json_t *started,
                                vigil_error *err)
{
    const char *group;
    json_t *n;
    vigil_code rc = VIGIL_OK;
    json_object_foreach (started, group, n) {
        json_int_t left = 0;
        size_t i;
        json_t *item;
        json_array_foreach (items, i, item) {
            json_t *kept = json_array_get(item, 2);
            const char *g = json_string_value(json_object_get(kept, "group"));
            left += g && !strcmp(g, group);
        }
        if (left == json_integer_value(n) && (rc = call_all_started(env, group, err)))
            break;
    }
    return rc;
}

vigil_code vg_orch_child_set_status(struct vg_env *env, const char *key, json_t *rec, int64_t rev,
                                    const char *status, vigil_error *err)
{
    if (json_object_set_new(rec, "status", json_string(status)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory updating a child");
    return vg_env_update_json(env, "spawn_child", key,
                              json_string_value(json_object_get(rec, "parent_agent")), status,
                              json_string_value(json_object_get(rec, "group")),
                              vg_orch_jint(rec, "admitted_ms"), rec, rev, err);
}

static int spawn_child_mark(struct vg_env *env, struct vg_store_change_mark *mark)
{
    vigil_error ignored = {0};
    mark->kind = "spawn_child";
    return vg_store_control(env->store, VG_STORE_CTRL_CHANGE_MARK, mark, &ignored) == VIGIL_OK;
}

/* Counting the running children scans their index entries (about 145 k instructions each with a
 * few thousand running): a spawn call reads both, so the counts it leaves are kept
 * (docs/internals/PERF.md, Session 27). */
vigil_code vg_orch_running_children(struct vg_env *env, const char *parent, int *of_parent,
                                    int *all, vigil_error *err)
{
    struct vg_store_change_mark m;
    int kept = env->kept_running_valid && spawn_child_mark(env, &m) &&
               m.foreign == env->kept_running_mark.foreign && m.own == env->kept_running_mark.own;
    vigil_code rc = VIGIL_OK;
    if (kept && !strcmp(env->kept_running_parent, parent))
        *of_parent = env->kept_running_of_parent;
    else
        rc = vg_orch_count(env, "spawn_child", parent, "running", NULL, of_parent, err);
    if (kept)
        *all = env->kept_running_all;
    else if (!rc)
        rc = vg_orch_count(env, "spawn_child", NULL, "running", NULL, all, err);
    return rc;
}

void vg_orch_running_keep(struct vg_env *env, const char *parent, int of_parent, int all)
{
    env->kept_running_valid = strlen(parent) < sizeof env->kept_running_parent &&
                              spawn_child_mark(env, &env->kept_running_mark);
    if (!env->kept_running_valid)
        return;
    snprintf(env->kept_running_parent, sizeof env->kept_running_parent, "%s", parent);
    env->kept_running_of_parent = of_parent;
    env->kept_running_all = all;
}

/* Start the parent's waiting children, oldest first, while it and the store have slots. */
vigil_code vg_orch_start_waiting(struct vg_env *env, struct vg_wake *w, const char *parent,
                                 vigil_error *err)
{
    json_t *agent = NULL, *items = NULL, *started = json_object();
    int running = 0, global = 0;
    vigil_code rc = started ? vg_agent_get(env, parent, &agent, NULL, err)
                            : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    if (!rc)
        rc = waiting_children(env, parent, &items, err);
    if (!rc)
        rc = vg_orch_running_children(env, parent, &running, &global, err);
    int cap = vg_orch_parent_cap(json_object_get(agent, "config"));
    for (size_t i = 0; !rc && i < json_array_size(items); i++) {
        if (running >= cap || global >= VG_ORCH_GLOBAL_DEFAULT)
            break;
        json_t *item = json_array_get(items, i);
        const char *group = json_string_value(json_object_get(json_array_get(item, 2), "group"));
        rc = start_one(env, w, parent, item, err);
        if (!rc && group &&
            json_object_set_new(
                started, group,
                json_integer(json_integer_value(json_object_get(started, group)) + 1)))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
        running++;
        global++;
    }
    if (!rc)
        rc = calls_settled(env, items, started, err);
    json_decref(agent);
    json_decref(items);
    json_decref(started);
    return rc;
}

struct group_ctx {
    json_t *results;
    int open;
};

const char *vg_orch_on_complete(json_t *child)
{
    const char *s =
        json_string_value(json_object_get(json_object_get(child, "request"), "on_complete"));
    return s ? s : "wake_on_all";
}

/* One child's result as its parent's wake gives it: the request's id (the parent's, else
 * GROUP:INDEX) and success criteria with it, so the parent can judge it by them. */
static json_t *result_of(json_t *b, const char *run_key)
{
    json_t *req = json_object_get(b, "request");
    json_t *rid = json_object_get(req, "request_id");
    json_t *r =
        json_pack("{s:O, s:O, s:O, s:s, s:O, s:O}", "index", json_object_get(b, "index"), "agent",
                  json_object_get(b, "child_agent"), "name", json_object_get(b, "child_name"),
                  "run_key", run_key, "status", json_object_get(b, "status"), "result",
                  json_object_get(b, "result") ? json_object_get(b, "result") : json_null());
    json_t *crit = json_object_get(req, "success_criteria");
    json_t *dkey = json_object_get(req, "decision_key");
    int bad = !r || (crit && json_object_set(r, "success_criteria", crit)) ||
              (dkey && json_object_set(r, "decision_key", dkey)) ||
              json_object_set_new(r, "request_id",
                                  rid ? json_incref(rid)
                                      : json_sprintf("%s:%d",
                                                     json_string_value(json_object_get(b, "group")),
                                                     (int)vg_orch_jint(b, "index")));
    if (bad) {
        json_decref(r);
        return NULL;
    }
    return r;
}

static int group_cb(void *user, const struct vg_record *r)
{
    struct group_ctx *g = user;
    json_t *b = json_loads(r->body, 0, NULL);
    if (!b)
        return 0;
    if (strcmp(vg_orch_on_complete(b), "wake_on_all")) { /* not in the wake on all */
        json_decref(b);
        return 0;
    }
    const char *st = json_string_value(json_object_get(b, "status"));
    if (st && (!strcmp(st, "running") || !strcmp(st, "waiting") || !strcmp(st, "approval")))
        g->open++;
    json_array_append_new(g->results, result_of(b, r->id));
    json_decref(b);
    return 0;
}

/* The session the parent's results wake continues: the parent's own session when it ran in
 * one (a chat, or a child's spawn session), so its conversation goes on exactly. */
static void parent_session(json_t *rec, char *out, size_t n)
{
    const char *thread = json_string_value(json_object_get(rec, "parent_thread"));
    const char *parent = json_string_value(json_object_get(rec, "parent_agent"));
    size_t plen = parent ? strlen(parent) : 0;
    if (thread && plen && !strncmp(thread, parent, plen) && !strncmp(thread + plen, ":session:", 9))
        snprintf(out, n, "%s", thread + plen + 9);
    else
        snprintf(out, n, "spawn-results:%s", json_string_value(json_object_get(rec, "group")));
}

/* The parent's wake with results: every child's of the group (on_complete wake_on_all), or
 * one child's (wake_on_each: its turn names the child's index). */
static vigil_code wake_parent(struct vg_env *env, struct vg_wake *w, json_t *rec, json_t *results,
                              int each, json_t *arbitration, vigil_error *err)
{
    char session[128], turn[64], key[65];
    const char *group = json_string_value(json_object_get(rec, "group"));
    const char *parent = json_string_value(json_object_get(rec, "parent_agent"));
    parent_session(rec, session, sizeof session);
    if (strlen(session) > 100)
        snprintf(session, sizeof session, "spawn-results:%s", group);
    if (each)
        snprintf(turn, sizeof turn, "result:%s:%d", group, (int)vg_orch_jint(rec, "index"));
    else
        snprintf(turn, sizeof turn, "results:%s", group);
    char *list = vg_json_dumps(results, JSON_COMPACT | JSON_SORT_KEYS);
    struct vg_buf b;
    vg_buf_init(&b, 1 << 20);
    if (each)
        vg_buf_printf(&b,
                      "An agent you spawned has finished (group %s, request %d). Its result: %s",
                      group, (int)vg_orch_jint(rec, "index"), list ? list : "[]");
    else
        vg_buf_printf(&b, "The agents you spawned have finished (group %s). Their results: %s",
                      group, list ? list : "[]");
    if (json_array_size(arbitration)) { /* S0-142: arbitrate.c */
        char *a = vg_json_dumps(arbitration, JSON_COMPACT | JSON_SORT_KEYS);
        vg_buf_printf(&b,
                      "\nWhere children answered one decision (decision_key), vigil chose by "
                      "its arbitration policy: %s",
                      a ? a : "[]");
        vg_free(a);
    }
    vg_free(list);
    char *text = vg_buf_detach(&b, NULL);
    json_t *seed = text ? json_string(text) : NULL;
    vg_free(text);
    json_t *parent_child = NULL;
    vigil_code rc =
        seed ? vg_orch_child_get(env, json_string_value(json_object_get(rec, "parent_run_key")),
                                 &parent_child, NULL, err)
             : VG_FAIL(err, VIGIL_ENOMEM, "out of memory waking a parent");
    if (rc == VIGIL_ENOTFOUND)
        rc = VIGIL_OK;
    vg_run_key_user(key, parent, session, turn);
    if (!rc && parent_child) { /* the parent is a child itself: the new run continues it */
        json_t *a = json_pack("{s:O}", "child_run_key", json_object_get(parent_child, "run_key"));
        rc = a ? vg_env_put_json(env, "spawn_alias", key, parent, "", "", 0, a, VG_PUT_IF_ABSENT,
                                 err)
               : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
        json_decref(a);
        if (!rc) /* the continuation keeps the child's grant */
            rc = vg_orch_grant(env, key, parent_child, err);
    }
    if (!rc) {
        enum vg_enqueue_result res;
        struct vg_wake_req r = {.reason = VG_REASON_USER,
                                .label = "children",
                                .agent_id = parent,
                                .session_id = session,
                                .turn_id = turn,
                                .seed_input = seed};
        rc = vg_wake_enqueue(w, &r, key, &res, err);
    }
    json_decref(parent_child);
    json_decref(seed);
    return rc;
}

struct kept_ctx {
    const char *group;
    int open;
};

/* A child of the group kept in its call, not started, that the wake on all waits for. */
static vigil_code kept_all_cb(void *user, json_t *child, int64_t seq, vigil_error *err)
{
    struct kept_ctx *k = user;
    const char *g = json_string_value(json_object_get(child, "group"));
    (void)seq;
    (void)err;
    k->open += g && !strcmp(g, k->group) && !strcmp(vg_orch_on_complete(child), "wake_on_all");
    return VIGIL_OK;
}

/* A child of on_complete wake_on_each wakes its parent with its own result; none, never. */
static vigil_code finish_alone(struct vg_env *env, struct vg_wake *w, json_t *rec, vigil_error *err)
{
    if (!strcmp(vg_orch_on_complete(rec), "none"))
        return VIGIL_OK;
    json_t *results = json_array();
    const char *key = json_string_value(json_object_get(rec, "run_key"));
    vigil_code rc = results && !json_array_append_new(results, result_of(rec, key))
                        ? wake_parent(env, w, rec, results, 1, NULL, err)
                        : VG_FAIL(err, VIGIL_ENOMEM, "out of memory waking a parent");
    json_decref(results);
    return rc;
}

vigil_code vg_orch_finish_group(struct vg_env *env, struct vg_wake *w, json_t *rec,
                                vigil_error *err)
{
    if (strcmp(vg_orch_on_complete(rec), "wake_on_all"))
        return finish_alone(env, w, rec, err);
    struct group_ctx g = {json_array(), 0};
    struct vg_query q = {.kind = "spawn_child",
                         .owner = json_string_value(json_object_get(rec, "parent_agent")),
                         .k2 = json_string_value(json_object_get(rec, "group"))};
    char k1[32];
    vigil_code rc = g.results ? vg_store_scan(env->store, &q, group_cb, &g, err)
                              : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    if (!rc && !g.open && !(rc = call_k1(env, q.k2, k1, err)) && !strcmp(k1, "waiting")) {
        /* a child of the group waits in its call's record: one the wake on all waits for? */
        struct kept_ctx k = {q.k2, 0};
        rc = vg_orch_waiting_each(env, q.owner,
                                  json_string_value(json_object_get(rec, "parent_run_key")),
                                  kept_all_cb, &k, err);
        g.open = k.open;
    }
    json_t *arbitration = NULL;
    if (!rc && !g.open && !(arbitration = vg_orch_arbitrate(g.results)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory arbitrating children's results");
    if (!rc && !g.open)
        rc = wake_parent(env, w, rec, g.results, 0, arbitration, err);
    json_decref(arbitration);
    json_decref(g.results);
    return rc;
}

/* Was this run's spend counted in the child's record already? (a replay of its end, or the
 * run that spawned, counted when it ended with its children still open) */
static int run_charged(json_t *rec, const char *run_id)
{
    json_t *ids = json_object_get(rec, "charged_runs"), *id;
    size_t i;
    json_array_foreach (ids, i, id)
        if (run_id && !strcmp(json_string_value(id) ? json_string_value(id) : "", run_id))
            return 1;
    return 0;
}

/* Add the run's spend to the child's "spent" (every run of the child: the one that spawned, the
 * wakes that brought its children's results) and to the parent's budgets, once per run. */
static vigil_code charge_run(struct vg_env *env, json_t *rec, const struct vg_orch_outcome *o,
                             vigil_error *err)
{
    json_t *old = json_object_get(rec, "spent");
    int64_t steps = vg_orch_jint(old, "steps"), tokens = vg_orch_jint(old, "tokens"),
            cost = vg_orch_jint(old, "cost_micros");
    int fresh = !run_charged(rec, o->run_id);
    if (fresh) {
        steps += o->steps;
        tokens += o->tokens;
        cost += o->cost_micros;
    }
    json_t *ids = json_object_get(rec, "charged_runs");
    if (json_object_set_new(rec, "spent",
                            json_pack("{s:I, s:I, s:I}", "steps", (json_int_t)steps, "tokens",
                                      (json_int_t)tokens, "cost_micros", (json_int_t)cost)) ||
        (fresh && o->run_id && o->run_id[0] && !ids &&
         json_object_set_new(rec, "charged_runs", ids = json_array())) ||
        (fresh && o->run_id && o->run_id[0] && json_array_append_new(ids, json_string(o->run_id))))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory charging a child's run");
    if (!fresh || (!o->steps && !o->tokens && !o->cost_micros))
        return VIGIL_OK;
    struct vg_budget_charge c = {0};
    c.v[VG_BUDGET_STEPS] = o->steps;
    c.v[VG_BUDGET_TOKENS] = o->tokens;
    c.v[VG_BUDGET_COST] = o->cost_micros;
    /* the child's spend counts against its parent too */
    return vg_budget_charge(env, json_string_value(json_object_get(rec, "parent_agent")), &c, err);
}

static vigil_code record_end(struct vg_env *env, struct vg_wake *w, const char *key, json_t *rec,
                             int64_t rev, const struct vg_orch_outcome *o, vigil_error *err)
{
    const char *parent = json_string_value(json_object_get(rec, "parent_agent"));
    const char *text = o->text ? o->text : "";
    size_t n = strlen(text);
    if (json_object_set_new(rec, "result", json_stringn(text, vg_utf8_cut(text, n, RESULT_MAX))) ||
        json_object_set_new(rec, "ended_ms", json_integer(vg_env_now(env))))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory recording a child's end");
    vigil_code rc = charge_run(env, rec, o, err);
    if (!rc)
        rc = vg_orch_child_set_status(env, key, rec, rev, o->status, err);
    if (!rc)
        rc = vg_orch_start_waiting(env, w, parent, err);
    if (!rc)
        rc = vg_orch_finish_group(env, w, rec, err);
    return rc;
}

/* The child's run ended with children of its own still open: the child goes on (their results
 * wake continues it), but what this run spent is the parent's now, as it would be at the end. */
static vigil_code record_spend(struct vg_env *env, const char *key, json_t *rec, int64_t rev,
                               const struct vg_orch_outcome *o, vigil_error *err)
{
    if ((!o->steps && !o->tokens && !o->cost_micros) || run_charged(rec, o->run_id))
        return VIGIL_OK;
    vigil_code rc = vg_store_begin(env->store, err);
    if (rc)
        return rc;
    rc = charge_run(env, rec, o, err);
    if (!rc)
        rc = vg_orch_child_set_status(env, key, rec, rev, "running", err);
    return vg_store_end(env->store, rc, err);
}

vigil_code vg_orch_run_ended(struct vg_env *env, struct vg_wake *w, const char *run_key,
                             const struct vg_orch_outcome *o, vigil_error *err)
{
    json_t *rec = NULL;
    int64_t rev = 0;
    int open = 0, tagged = 0;
    struct vg_wake own;
    vigil_code rc = vg_task_run_ended(env, w, run_key, o, err); /* a task's run? */
    if (!rc)
        rc = vg_orch_child_get(env, run_key, &rec, &rev, err);
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK; /* not a spawned run */
    const char *st = json_string_value(json_object_get(rec, "status"));
    const char *agent = json_string_value(json_object_get(rec, "child_agent"));
    if (!rc && st && strcmp(st, "running")) { /* recorded already */
        json_decref(rec);
        return VIGIL_OK;
    }
    const char *key = json_string_value(json_object_get(rec, "run_key"));
    if (!rc && !key)
        rc = VG_FAIL(err, VIGIL_ECORRUPT, "child record %.16s has no run key", run_key);
    if (!rc)
        rc = has_open_children(env, agent, key, &open, err);
    if (!rc && open) /* its own children's results wake finishes it */
        rc = record_spend(env, key, rec, rev, o, err);
    if (rc || open) {
        json_decref(rec);
        return rc;
    }
    if (!w && !(rc = vg_wake_init(&own, env, NULL, err)))
        tagged = 1;
    if (!rc && !(rc = vg_store_begin(env->store, err)))
        rc = vg_store_end(env->store, record_end(env, tagged ? &own : w, key, rec, rev, o, err),
                          err);
    if (tagged)
        vg_wake_release(&own);
    json_decref(rec);
    return rc;
}

/* What the child may still spend, of its request's token and cost budgets: what its earlier
 * runs spent (the one that spawned, before its children's results came) is taken off; a
 * budget spent whole leaves -1, so the next run stops before its first model call. */
static int64_t left_or_spent(int64_t left)
{
    return left > 0 ? left : -1;
}

static void spend_limits(json_t *rec, struct vg_loop_limits *limits)
{
    json_t *req = json_object_get(rec, "request"), *spent = json_object_get(rec, "spent");
    int64_t tokens = vg_orch_jint(req, "token_budget");
    double usd = json_number_value(json_object_get(req, "cost_budget_usd"));
    int64_t cost = (int64_t)(usd * 1e6);
    if (tokens > 0)
        limits->spend_tokens = left_or_spent(tokens - vg_orch_jint(spent, "tokens"));
    if (cost > 0)
        limits->spend_cost_micros = left_or_spent(cost - vg_orch_jint(spent, "cost_micros"));
}

vigil_code vg_orch_child_limits(struct vg_env *env, const char *run_key,
                                struct vg_loop_limits *limits, vigil_error *err)
{
    json_t *rec = NULL;
    vigil_code rc = vg_orch_child_get(env, run_key, &rec, NULL, err);
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK;
    if (rc)
        return rc;
    int64_t steps = vg_orch_jint(rec, "max_steps");
    int64_t ms = vg_orch_jint(json_object_get(rec, "request"), "max_runtime_ms");
    if (!limits->max_steps) /* its definition sets none: a sub-agent's default (seed 002 D5) */
        limits->max_steps = VG_ORCH_CHILD_MAX_STEPS;
    if (steps > 0 && steps < limits->max_steps)
        limits->max_steps = (int)steps;
    if (ms > 0 && (!limits->timeout_ms || ms < limits->timeout_ms))
        limits->timeout_ms = ms;
    spend_limits(rec, limits);
    json_decref(rec);
    return VIGIL_OK;
}
