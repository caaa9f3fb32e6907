/*
 * status_api.c: vigil_status, the store and its fleet at a glance for an operator (`vigil
 * status`, GET /v1/status; trial G7): the store, the daemons and which of them are stale, the
 * kill switches on, agents by lifecycle, the wake queue, what waits for a person, the next timer
 * firing, and the list of what needs a person's attention. Every figure is a count or a one-row
 * read of an index (kind and k1), so its cost does not grow with the history kept; the one scan
 * is of the wakes running now, to find those whose process is gone.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "os/proc.h"
#include "runtime/runtime_int.h"
#include "store/store.h"
#include "wake/wake.h"

struct status {
    vigil_runtime *rt;
    int64_t now;
    json_t *root;      /* the answer, owned */
    json_t *attention; /* borrowed from root: what needs a person, one line each */
    int alive;         /* daemons serving the store now */
    int oom;           /* a value could not be made: the answer is ENOMEM */
};

/* Set key on obj to value (taken); a NULL value or a failed set marks the answer out of memory. */
static json_t *put(struct status *s, json_t *obj, const char *key, json_t *value)
{
    if (!value || json_object_set_new(obj, key, value))
        s->oom = 1;
    return value;
}

static void attention(struct status *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void attention(struct status *s, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (json_array_append_new(s->attention, json_string(line)))
        s->oom = 1;
}

static vigil_code count(struct status *s, const char *kind, const char *k1, int64_t *n,
                        vigil_error *err)
{
    struct vg_query q = {.kind = kind, .k1 = k1};
    *n = 0;
    return vg_store_count(s->rt->env.store, &q, n, err);
}

/* The store: where, which adapter, how big, which schema. */
static vigil_code store_part(struct status *s, vigil_error *err)
{
    struct vg_store *st = s->rt->env.store;
    int64_t bytes = 0, used = 0;
    int schema = 0;
    vigil_code rc = vg_store_control(st, VG_STORE_CTRL_SCHEMA_VERSION, &schema, err);
    if (!rc)
        rc = vg_store_control(st, VG_STORE_CTRL_FILE_SIZE, &bytes, err);
    if (!rc)
        rc = vg_store_control(st, VG_STORE_CTRL_USED_BYTES, &used, err);
    if (rc)
        return rc;
    json_t *o = put(s, s->root, "store", json_object());
    if (o) {
        put(s, o, "uri", json_string(s->rt->store_uri));
        put(s, o, "kind", json_string(vg_store_kind(st)));
        put(s, o, "bytes", json_integer(bytes));
        put(s, o, "used_bytes", json_integer(used));
        put(s, o, "schema_version", json_integer(schema));
    }
    return VIGIL_OK;
}

/* A shared store's daemons from their records, each marked stale or not; a SQLite store's one
 * daemon from its lock file (it keeps no record). */
static vigil_code daemons_part(struct status *s, vigil_error *err)
{
    char *text = NULL;
    size_t i;
    json_t *d;
    int stale = 0;
    vigil_code rc = vigil_daemon_list(s->rt, &text, err);
    if (rc)
        return rc;
    json_t *list = put(s, s->root, "daemons", json_loads(text, 0, NULL));
    vigil_free(text);
    long pid = 0;
    if (list && !json_array_size(list) && vg_daemon_running(s->rt->store_uri, &pid)) {
        struct vg_proc_id me;
        vg_proc_self(&me);
        json_t *one =
            json_pack("{s:s, s:I, s:b}", "host", me.host, "pid", (json_int_t)pid, "stale", 0);
        if (!one || json_array_append_new(list, one))
            s->oom = 1;
        s->alive = 1;
        return VIGIL_OK;
    }
    json_array_foreach (list, i, d) {
        int is_stale = vg_daemon_record_stale(d, s->now);
        stale += is_stale;
        s->alive += !is_stale;
        put(s, d, "stale", json_boolean(is_stale));
        put(s, d, "beat_age_ms",
            json_integer(s->now - json_integer_value(json_object_get(d, "beat_ms"))));
    }
    if (stale)
        attention(s,
                  "%d daemon record(s) stale (killed, or its host is down): its runs are taken "
                  "over; remove the record with `vigil status --prune-stale` (a live daemon "
                  "removes it a day after its last beat)",
                  stale);
    return VIGIL_OK;
}

static int kill_cb(void *user, const struct vg_record *r)
{
    struct status *s = user;
    json_t *sw = json_loads(r->body, 0, NULL);
    if (!sw || json_array_append_new(json_object_get(s->root, "kill_switches"), sw))
        s->oom = 1;
    return s->oom;
}

/* The kill switches on, and agents by lifecycle. */
static vigil_code switches_and_agents(struct status *s, vigil_error *err)
{
    static const char *const lifecycles[] = {"created", "active", "dormant", "destroyed"};
    struct vg_query q = {.kind = "kill_switch", .k1 = "on"};
    json_t *agents = NULL;
    int64_t n = 0, dormant = 0;
    vigil_code rc = put(s, s->root, "kill_switches", json_array())
                        ? vg_store_scan(s->rt->env.store, &q, kill_cb, s, err)
                        : VIGIL_OK;
    if (!rc && (agents = put(s, s->root, "agents", json_object())))
        for (size_t i = 0; !rc && i < VG_ARRAY_LEN(lifecycles); i++)
            if (!(rc = count(s, "agent", lifecycles[i], &n, err)))
                put(s, agents, lifecycles[i], json_integer(n));
    if (!rc && json_array_size(json_object_get(s->root, "kill_switches")))
        attention(s, "a kill switch is on: mutating tools are refused and no wake starts (`vigil "
                     "kill status`)");
    dormant = json_integer_value(json_object_get(agents, "dormant"));
    if (!rc && dormant)
        attention(s,
                  "%lld agent(s) dormant after repeated failures: `vigil agent list`, then "
                  "`vigil agent resume ID`",
                  (long long)dormant);
    return rc;
}

/* The name of agent_id (a new reference), or JSON null for none or an agent gone. */
static vigil_code agent_name(struct status *s, const char *agent_id, json_t **out, vigil_error *err)
{
    json_t *agent = NULL;
    vigil_error miss = {0};
    vigil_code rc =
        agent_id ? vg_error_unless_missing(err, &miss,
                                           vg_agent_get(&s->rt->env, agent_id, &agent, NULL, &miss))
                 : VIGIL_ENOTFOUND;
    json_t *name = json_object_get(agent, "name");
    *out = json_is_string(name) ? json_incref(name) : json_null();
    json_decref(agent);
    return rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc;
}

struct oldest {
    int64_t at;
    char agent[64];
};

static int oldest_cb(void *user, const struct vg_record *r)
{
    struct oldest *o = user;
    o->at = r->seq;
    snprintf(o->agent, sizeof o->agent, "%s", r->owner ? r->owner : "");
    return 1;
}

/* The wakes running now whose process is gone (nobody runs them until a daemon or `vigil wake`
 * recovers them). */
static int running_cb(void *user, const struct vg_record *r)
{
    json_t *ids = user;
    return json_array_append_new(ids, json_string(r->owner ? r->owner : "")) != 0;
}

static vigil_code orphaned_wakes(struct status *s, int64_t *n, vigil_error *err)
{
    struct vg_query q = {.kind = "wake_run", .k1 = "started"};
    json_t *agents = json_array(), *a;
    size_t i;
    *n = 0;
    if (!agents)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading the status");
    vigil_code rc = vg_store_scan(s->rt->env.store, &q, running_cb, agents, err);
    json_array_foreach (agents, i, a) {
        json_t *note = json_object();
        if (!rc && !note)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading the status");
        if (!rc)
            rc = vg_runtime_note_gone_holder(s->rt, json_string_value(a), note, err);
        *n += json_object_get(note, "holder_gone") != NULL;
        json_decref(note);
    }
    json_decref(agents);
    return rc;
}

/* The wake queue: queued, running (and of those, orphaned), failed, the oldest queued. */
static vigil_code wakes_part(struct status *s, vigil_error *err)
{
    static const char *const keys[][2] = {
        {"queued", "queued"}, {"running", "started"}, {"failed", "failed"}};
    struct vg_query q = {.kind = "wake_run", .k1 = "queued", .limit = 1};
    struct oldest o = {0};
    int64_t n = 0, orphaned = 0;
    json_t *w = put(s, s->root, "wakes", json_object());
    vigil_code rc = VIGIL_OK;
    for (size_t i = 0; w && !rc && i < VG_ARRAY_LEN(keys); i++)
        if (!(rc = count(s, "wake_run", keys[i][1], &n, err)))
            put(s, w, keys[i][0], json_integer(n));
    if (!w || rc || (rc = orphaned_wakes(s, &orphaned, err)) ||
        (rc = vg_store_scan(s->rt->env.store, &q, oldest_cb, &o, err)))
        return rc;
    put(s, w, "orphaned", json_integer(orphaned));
    put(s, w, "oldest_queued_ms", o.at ? json_integer(o.at) : json_null());
    put(s, w, "oldest_queued_age_ms", o.at ? json_integer(s->now - o.at) : json_null());
    put(s, w, "oldest_queued_agent_id", o.at ? json_string(o.agent) : json_null());
    json_t *name = NULL;
    if ((rc = agent_name(s, o.at ? o.agent : NULL, &name, err)))
        return rc;
    put(s, w, "oldest_queued_agent_name", name);
    if (!s->alive && json_integer_value(json_object_get(w, "queued")))
        attention(s, "%lld wake(s) queued and no daemon runs: start `vigil serve` to run them",
                  (long long)json_integer_value(json_object_get(w, "queued")));
    if (orphaned)
        attention(s,
                  "%lld wake(s) read running but their process is gone: the next `vigil serve` "
                  "or `vigil wake` recovers them",
                  (long long)orphaned);
    return VIGIL_OK;
}

/* What waits for a person: approvals, operations in doubt, memory changes, and tasks in
 * attention (a run that completed with a call in doubt: the task waits until a person answers
 * the call, docs/orchestration.md). */
static vigil_code waiting_part(struct status *s, vigil_error *err)
{
    static const char *const parts[][5] = {
        {"approvals_pending", "approval", "pending", "tool call(s) wait for approval",
         "vigil approvals"},
        {"in_doubt", "in_doubt", "pending", "operation(s) a crash left in doubt",
         "vigil indoubt list"},
        {"memory_pending", "memory_pending", "pending", "memory change(s) wait for approval",
         "vigil memory pending"},
        {"tasks_attention", "task", "attention",
         "task(s) in attention: their run completed with a call in doubt (answer it: `vigil "
         "indoubt list`)",
         "vigil task list --status attention"}};
    vigil_code rc = VIGIL_OK;
    for (size_t i = 0; !rc && i < VG_ARRAY_LEN(parts); i++) {
        int64_t n = 0;
        if ((rc = count(s, parts[i][1], parts[i][2], &n, err)))
            break;
        put(s, s->root, parts[i][0], json_integer(n));
        if (n)
            attention(s, "%lld %s: `%s`", (long long)n, parts[i][3], parts[i][4]);
    }
    return rc;
}

static int timer_cb(void *user, const struct vg_record *r)
{
    *(json_t **)user = json_loads(r->body, 0, NULL);
    return 1;
}

/* The next timer firing, with its agent's name. */
static vigil_code timer_part(struct status *s, vigil_error *err)
{
    struct vg_query q = {.kind = "timer", .k1 = "on", .limit = 1};
    json_t *t = NULL, *name = NULL;
    vigil_code rc = vg_store_scan(s->rt->env.store, &q, timer_cb, &t, err);
    if (!rc && t)
        rc = agent_name(s, json_string_value(json_object_get(t, "agent_id")), &name, err);
    if (!rc)
        put(s, s->root, "next_timer",
            t ? json_pack("{s:O?, s:O?, s:O, s:O?, s:O?}", "timer_id", json_object_get(t, "id"),
                          "agent_id", json_object_get(t, "agent_id"), "agent_name", name, "at",
                          json_object_get(t, "next_run_at"), "ms",
                          json_object_get(t, "next_run_ms"))
              : json_null());
    json_decref(t);
    json_decref(name);
    return rc;
}

vigil_code vigil_status(vigil_runtime *rt, char **out_json, vigil_error *err)
{
    if (!rt || !out_json)
        return VG_FAIL(err, VIGIL_EINVAL, "status needs a runtime and an output");
    struct status s = {.rt = rt, .now = vg_env_now(&rt->env), .root = json_object()};
    vigil_code rc = VIGIL_OK;
    if (!s.root || !(s.attention = put(&s, s.root, "attention", json_array())))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading the status");
    put(&s, s.root, "now_ms", json_integer(s.now));
    vigil_runtime_read_batch(rt, 1); /* one snapshot for every figure */
    if (!rc)
        rc = store_part(&s, err);
    if (!rc)
        rc = daemons_part(&s, err);
    if (!rc)
        rc = switches_and_agents(&s, err);
    if (!rc)
        rc = wakes_part(&s, err);
    if (!rc)
        rc = waiting_part(&s, err);
    if (!rc)
        rc = timer_part(&s, err);
    vigil_runtime_read_batch(rt, 0);
    if (!rc && s.oom)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading the status");
    if (rc) {
        json_decref(s.root);
        return rc;
    }
    return vg_runtime_json_out(s.root, out_json, err);
}

vigil_code vigil_daemon_prune_stale(vigil_runtime *rt, int *removed, vigil_error *err)
{
    if (!rt)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime given");
    return vg_daemon_records_prune(&rt->env, 0, removed, err);
}
