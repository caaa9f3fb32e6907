/*
 * recover.c: what a crashed run of an agent leaves is settled by the run that takes the agent
 * over, before it goes on: every operation the crashed run left started (tool/executor.c), and
 * every run of the agent still marked running, closed `crashed` with the run key of the run that
 * recovered it, its tool calls still running closed `crashed` with what recovery decided. One agent
 * at a time, under its lease: the lease makes runs single-flight, so a run still marked running
 * while its successor holds the lease is one whose process is gone.
 */
#include "base/common.h"

#include "base/json.h"

#include "journal/journal.h"
#include "store/store.h"
#include "runtime/recover.h"
#include "runtime/runtime_int.h"
#include "tool/tool.h"
#include "wake/wake.h"

#include <unistd.h>

/* The closed run's record names the run key that recovered it (run show prints the body). */
static vigil_code link_recovery(struct vg_env *env, const char *run_id, const char *by_run_key,
                                vigil_error *err)
{
    struct vg_record *r = NULL;
    vigil_code rc = vg_store_get_copy(env->store, "run", run_id, &r, err);
    if (rc)
        return rc;
    json_t *b = json_loads(r->body, 0, NULL);
    char *text = NULL;
    if (!b || json_object_set_new(b, "recovered_by_run_key", json_string(by_run_key)) ||
        !(text = vg_json_dump(b, 1))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory closing a crashed run");
    } else {
        struct vg_record u = *r;
        u.body = text;
        u.at = vg_env_now(env);
        rc = vg_store_update(env->store, &u, r->rev, err);
    }
    vg_free(text);
    json_decref(b);
    vg_free(r);
    return rc;
}

/* ---- the tool calls a crashed run left running ---------------------------------------------- */

/* A tool call the crashed run had started and not finished, and the status of its operation
 * before recovery settled it ("" when it had no operation record). */
struct open_call {
    char id[37], run_id[37];
    char *op_id; /* NULL: the call names no operation */
    char op_before[16];
};

struct open_calls {
    struct open_call *v;
    size_t n, cap;
};

static void open_calls_release(struct open_calls *c)
{
    for (size_t i = 0; i < c->n; i++)
        vg_free(c->v[i].op_id);
    vg_free(c->v);
}

static int open_call_cb(void *user, const char *id, const char *run_id, const char *op)
{
    struct open_calls *c = user;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        struct open_call *v = vg_realloc(c->v, cap * sizeof *v);
        if (!v)
            return 1;
        c->v = v;
        c->cap = cap;
    }
    struct open_call *oc = &c->v[c->n];
    memset(oc, 0, sizeof *oc);
    snprintf(oc->id, sizeof oc->id, "%s", id);
    snprintf(oc->run_id, sizeof oc->run_id, "%s", run_id);
    if (op && !(oc->op_id = vg_strdup(op)))
        return 1;
    c->n++;
    return 0;
}

/* The status of an operation record ("" when there is none). */
static vigil_code op_status(struct vg_env *env, const char *op_id, char out[16], vigil_error *err)
{
    json_t *op = NULL;
    out[0] = 0;
    if (!op_id)
        return VIGIL_OK;
    vigil_code rc = vg_env_get_json(env, "operation", op_id, &op, NULL, err);
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK;
    const char *status = json_string_value(json_object_get(op, "status"));
    if (!rc && status)
        snprintf(out, 16, "%s", status);
    json_decref(op);
    return rc;
}

/* The agent's tool calls still running, with their operations' status before recovery. */
static vigil_code collect_open_calls(struct vg_env *env, const char *agent_id,
                                     struct open_calls *out, vigil_error *err)
{
    vigil_code rc = vg_journal_open_calls(env->store, agent_id, open_call_cb, out, err);
    for (size_t i = 0; !rc && i < out->n; i++)
        rc = op_status(env, out->v[i].op_id, out->v[i].op_before, err);
    return rc;
}

/* What recovery did with a call's operation, from its status before and after settling. */
static const char *recovery_of(const char *before, const char *after)
{
    if (!*before)
        return "not_run"; /* no operation record: the effect never started */
    if (!strcmp(before, "finished"))
        return "replayed"; /* finished before the crash: its recorded outcome stands */
    if (!strcmp(after, "in_doubt"))
        return "in_doubt"; /* a person decides: vigil indoubt */
    if (!strcmp(after, "finished"))
        return "settled"; /* its lookup found the effect, or it ran again as that was safe */
    return "pending";     /* still started: looked up again, or run when called again */
}

/* Close the crashed run's open tool calls `crashed`, each saying what recovery decided. */
static vigil_code close_open_calls(struct vg_env *env, struct vg_run *run,
                                   const struct open_calls *calls, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    for (size_t i = 0; !rc && i < calls->n; i++) {
        const struct open_call *c = &calls->v[i];
        char after[16];
        if (strcmp(c->run_id, vg_journal_run_id(run)) ||
            (rc = op_status(env, c->op_id, after, err)))
            continue;
        json_t *o = json_pack("{s:s, s:s?, s:s?}", "recovery", recovery_of(c->op_before, after),
                              "operation_id", c->op_id, "operation_status", *after ? after : NULL);
        char *text = o ? vg_json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        rc = text ? vg_journal_tool_call_finished(run, c->id, "crashed", text, NULL, 0, err)
                  : VG_FAIL(err, VIGIL_ENOMEM, "out of memory closing a crashed tool call");
        vg_free(text);
        json_decref(o);
    }
    return rc;
}

/* Close the run crashed, and its open tool calls. *run stays open until the caller's
 * transaction ends: the journal writes the run's record when it commits. */
static vigil_code close_crashed(struct vg_env *env, const char *run_id, const char *by_run_key,
                                const struct open_calls *calls, struct vg_run **run,
                                vigil_error *err)
{
    char why[300];
    snprintf(why, sizeof why,
             "crashed: the process running it stopped; run key %.80s took the agent over and "
             "settled its operations",
             by_run_key);
    vigil_code rc = vg_journal_run_attach(env->store, env->clock, env->ids, run_id, run, err);
    if (!rc)
        rc = close_open_calls(env, *run, calls, err);
    if (!rc)
        rc = vg_journal_run_close(*run, VG_RUN_CRASHED, NULL, why, err);
    return rc;
}

static vigil_code close_running_runs(struct vg_env *env, const char *agent_id,
                                     const char *by_run_key, const struct open_calls *calls,
                                     int *closed, vigil_error *err)
{
    struct vg_id_list ids = {0};
    struct vg_query q = {.kind = "run", .owner = agent_id, .k1 = "running"};
    struct vg_run **runs = NULL;
    vigil_code rc = vg_store_scan_ids(env->store, &q, &ids, err);
    if (!rc && ids.n && !(runs = vg_calloc(ids.n, sizeof *runs)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory closing crashed runs");
    if (!rc && ids.n && !(rc = vg_store_begin(env->store, err))) {
        for (size_t i = 0; !rc && i < ids.n; i++)
            rc = close_crashed(env, ids.ids[i], by_run_key, calls, &runs[i], err);
        rc = vg_store_end(env->store, rc, err);
    }
    for (size_t i = 0; runs && i < ids.n; i++)
        vg_journal_run_free(runs[i]);
    vg_free(runs);
    /* The link after the close has committed: the journal writes a run's record when the
     * transaction that closed it commits, and the link changes that record. */
    if (!rc && ids.n && !(rc = vg_store_begin(env->store, err))) {
        for (size_t i = 0; !rc && i < ids.n; i++)
            rc = link_recovery(env, ids.ids[i], by_run_key, err);
        rc = vg_store_end(env->store, rc, err);
    }
    if (!rc && closed)
        *closed = (int)ids.n;
    vg_id_list_release(&ids);
    return rc;
}

vigil_code vg_runtime_recover_agent(vigil_runtime *rt, const char *agent_id, const char *by_run_key,
                                    vigil_error *err)
{
    struct vg_tool_executor *tools = NULL;
    struct open_calls calls = {0};
    vigil_code rc = vg_runtime_tools(rt, &tools, err);
    /* The open calls' operations are read before settling, to tell a replay from a re-run. */
    if (!rc)
        rc = collect_open_calls(&rt->env, agent_id, &calls, err);
    if (!rc)
        rc = vg_tool_executor_recover_agent(tools, agent_id, NULL, err);
    if (!rc)
        rc = close_running_runs(&rt->env, agent_id, by_run_key, &calls, NULL, err);
    open_calls_release(&calls);
    return rc;
}

/* Agents with a run marked running, each once (the list is sorted by the scan's order). */
struct agents_ctx {
    struct vg_id_list *agents;
    int bad;
};

static int agent_cb(void *user, const struct vg_record *r)
{
    struct agents_ctx *c = user;
    for (size_t i = 0; i < c->agents->n; i++)
        if (!strcmp(c->agents->ids[i], r->owner))
            return 0;
    if (c->agents->n == c->agents->cap) {
        size_t cap = c->agents->cap ? c->agents->cap * 2 : 16;
        char **p = vg_realloc(c->agents->ids, cap * sizeof *p);
        if (!p)
            return c->bad = 1;
        c->agents->ids = p;
        c->agents->cap = cap;
    }
    if (!(c->agents->ids[c->agents->n] = vg_strdup(r->owner)))
        return c->bad = 1;
    c->agents->n++;
    return 0;
}

vigil_code vg_runtime_recover_dead(vigil_runtime *rt, int *recovered, vigil_error *err)
{
    struct vg_id_list agents = {0};
    struct agents_ctx c = {&agents, 0};
    struct vg_query q = {.kind = "run", .k1 = "running"};
    char holder[64], key[64];
    int n = 0;
    vigil_code rc = vg_store_scan(rt->env.store, &q, agent_cb, &c, err);
    if (!rc && c.bad)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory recovering runs");
    snprintf(holder, sizeof holder, "recovery:%ld", (long)getpid());
    snprintf(key, sizeof key, "recovery:%ld", (long)getpid());
    for (size_t i = 0; !rc && i < agents.n; i++) {
        int64_t epoch = 0;
        int got = 0;
        /* A free lease (expired, or its holder's process gone) means the runs are dead; a held
         * one is a live run's, left alone. */
        if ((rc = vg_wake_lease_take(&rt->env, agents.ids[i], holder, 60000, &epoch, &got, err)) ||
            !got)
            continue;
        rc = vg_runtime_recover_agent(rt, agents.ids[i], key, err);
        vigil_code grc = vg_wake_lease_give_back(&rt->env, agents.ids[i], epoch, rc ? NULL : err);
        rc = rc ? rc : grc;
        n++;
    }
    vg_id_list_release(&agents);
    if (!rc && recovered)
        *recovered = n;
    return rc;
}

vigil_code vg_runtime_recover_start(vigil_runtime *rt, vigil_error *err)
{
    struct vg_tool_executor *tools = NULL;
    struct vg_store *store = rt->env.store;
    vigil_code rc = vg_runtime_tools(rt, &tools, err);
    if (rc)
        return rc;
    /* Group commit while settling, one sync at the end: each commit is safe against a process
     * crash and in order, so a power loss can only take the recovery back as a whole (done
     * again at the next start), and a thousand dead agents cost one sync, not five each. */
    int durable = vg_store_durable(store);
    if (durable && (rc = vg_store_durable_commits(store, 0, err)))
        return rc;
    rc = vg_tool_executor_recover(tools, NULL, err);
    if (!rc)
        rc = vg_runtime_recover_dead(rt, NULL, err);
    if (durable) {
        vigil_code drc = vg_store_durable_commits(store, 1, rc ? NULL : err);
        if (!drc)
            drc = vg_store_sync(store, rc ? NULL : err);
        if (drc == VIGIL_EUNSUPPORTED) /* the server syncs its log in order (PostgreSQL) */
            drc = VIGIL_OK;
        if (!rc)
            rc = drc;
    }
    return rc;
}
