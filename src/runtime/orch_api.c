/*
 * orch_api.c: the orchestrator's part of include/vigil.h (src/orch does the work).
 */
#include "base/common.h"

#include "orch/orch.h"
#include "orch/task.h"
#include "runtime/runtime_int.h"

vigil_code vigil_agent_tree(vigil_runtime *rt, const char *agent_id, char **out_json,
                            vigil_error *err)
{
    json_t *v = NULL;
    if (!out_json)
        return VG_FAIL(err, VIGIL_EINVAL, "no place for the lineage");
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (!rc)
        rc = vg_orch_tree(&rt->env, agent_id, &v, err);
    return rc ? rc : vg_runtime_json_out(v, out_json, err);
}

vigil_code vigil_task_add(vigil_runtime *rt, const char *title, const char *kind,
                          const char *const *blocks, size_t n_blocks, char out_id[37],
                          vigil_error *err)
{
    return vigil_task_add_tagged(rt, title, kind, NULL, 0, blocks, n_blocks, out_id, err);
}

vigil_code vigil_task_add_tagged(vigil_runtime *rt, const char *title, const char *kind,
                                 const char *const *tags, size_t n_tags, const char *const *blocks,
                                 size_t n_blocks, char out_id[37], vigil_error *err)
{
    if (!rt || !out_id || (n_blocks && !blocks) || (n_tags && !tags))
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime, output, tags or blocked tasks given");
    return vg_task_add(&rt->env, title, kind, tags, n_tags, blocks, n_blocks, out_id, err);
}

vigil_code vigil_task_block(vigil_runtime *rt, const char *a, const char *b, vigil_error *err)
{
    if (!rt || !a || !b)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime or task given");
    return vg_task_block(&rt->env, a, b, err);
}

vigil_code vigil_task_list(vigil_runtime *rt, const char *status, char **out_json, vigil_error *err)
{
    json_t *v = NULL;
    if (!rt || !out_json)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime or output given");
    vigil_code rc = vg_task_list(&rt->env, vg_cancel_spelling(status, "cancelled"), &v, err);
    return rc ? rc : vg_runtime_json_out(v, out_json, err);
}

static vigil_code count_tasks(vigil_runtime *rt, int64_t out[VIGIL_TASK_STATUSES], vigil_error *err)
{
    static const char *const statuses[] = {"running", "pending",   "ready",    "done",
                                           "failed",  "cancelled", "attention"};
    static const int slot[] = {2, 0, 1, 3, 4, 5, 6};
    vigil_code rc = VIGIL_OK;
    for (size_t i = 0; !rc && i < VG_ARRAY_LEN(statuses); i++) {
        struct vg_query q = {.kind = "task", .k1 = statuses[i]};
        rc = vg_store_count(rt->env.store, &q, &out[slot[i]], err);
    }
    /* A started task is written when its run ends: until then its wake says it runs. */
    static const char *const open[] = {"queued", "started"};
    for (size_t i = 0; !rc && i < VG_ARRAY_LEN(open); i++) {
        int64_t n = 0;
        struct vg_query q = {.kind = "wake_run", .k1 = open[i], .k2 = "task"};
        if (!(rc = vg_store_count(rt->env.store, &q, &n, err)))
            out[2] += n;
    }
    return rc;
}

/* The store's marks of task and wake_run records now (VG_STORE_CTRL_CHANGE_MARK), or 0 when it
 * cannot say (PostgreSQL; no snapshot taken yet). */
static int task_marks(vigil_runtime *rt, struct vg_store_change_mark m[2])
{
    vigil_error ignored = {0};
    m[0].kind = "task";
    m[1].kind = "wake_run";
    return !vg_store_control(rt->env.store, VG_STORE_CTRL_CHANGE_MARK, &m[0], &ignored) &&
           !vg_store_control(rt->env.store, VG_STORE_CTRL_CHANGE_MARK, &m[1], &ignored);
}

static int marks_equal(const struct vg_store_change_mark a[2],
                       const struct vg_store_change_mark b[2])
{
    return a[0].foreign == b[0].foreign && a[0].own == b[0].own && a[1].foreign == b[1].foreign &&
           a[1].own == b[1].own;
}

/* Counting scans each status's index entries, so it grows with the tasks (about 17 M
 * instructions at 10,000), and the event poller asks at every poll: the counts are kept with
 * the marks of the records they count and served while the marks hold. The stored `running`
 * count goes first: it is small (a start writes only its wake) and takes the read batch's
 * snapshot, which a mark needs. */
vigil_code vigil_task_counts(vigil_runtime *rt, int64_t out[VIGIL_TASK_STATUSES], vigil_error *err)
{
    if (!rt || !out)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime or output given");
    struct vg_store_change_mark now[2];
    struct vg_query running = {.kind = "task", .k1 = "running"};
    int64_t stored_running = 0;
    vg_store_read_batch(rt->env.store, 1);
    vigil_code rc = vg_store_count(rt->env.store, &running, &stored_running, err);
    if (!rc && rt->kept_counts_valid && task_marks(rt, now) &&
        marks_equal(now, rt->kept_counts_marks)) {
        memcpy(out, rt->kept_counts, sizeof rt->kept_counts);
        vg_store_read_batch(rt->env.store, 0);
        return VIGIL_OK;
    }
    rt->kept_counts_valid = 0;
    if (!rc && !(rc = count_tasks(rt, out, err)) && task_marks(rt, rt->kept_counts_marks)) {
        memcpy(rt->kept_counts, out, sizeof rt->kept_counts);
        rt->kept_counts_valid = 1;
    }
    vg_store_read_batch(rt->env.store, 0);
    return rc;
}

vigil_code vigil_task_graph(vigil_runtime *rt, char **out_json, vigil_error *err)
{
    json_t *tasks = NULL, *t, *b;
    size_t i, j;
    if (!rt || !out_json)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime or output given");
    vigil_code rc = vg_task_list(&rt->env, NULL, &tasks, err);
    if (rc)
        return rc;
    json_t *nodes = json_array(), *edges = json_array();
    json_array_foreach (tasks, i, t) {
        json_array_append_new(
            nodes,
            json_pack("{s:O?, s:O?, s:O?, s:O?, s:O?}", "id", json_object_get(t, "id"), "title",
                      json_object_get(t, "title"), "status", json_object_get(t, "status"), "kind",
                      json_object_get(t, "kind"), "agent", json_object_get(t, "agent")));
        json_array_foreach (json_object_get(t, "blocks"), j, b)
            json_array_append_new(
                edges, json_pack("{s:O?, s:O}", "from", json_object_get(t, "id"), "to", b));
    }
    int whole = nodes && edges && json_array_size(nodes) == json_array_size(tasks);
    json_decref(tasks);
    json_t *g = whole ? json_pack("{s:o, s:o}", "nodes", nodes, "edges", edges) : NULL;
    if (!whole) {
        json_decref(nodes);
        json_decref(edges);
    }
    return g ? vg_runtime_json_out(g, out_json, err)
             : VG_FAIL(err, VIGIL_ENOMEM, "out of memory building the task graph");
}

vigil_code vigil_task_show(vigil_runtime *rt, const char *task_id, char **out_json,
                           vigil_error *err)
{
    json_t *v = NULL;
    int64_t version = 0;
    if (!rt || !out_json)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime or output given");
    vigil_code rc = vg_task_get(&rt->env, task_id, &v, &version, err);
    return rc ? rc : vg_runtime_json_out(v, out_json, err);
}

vigil_code vigil_task_cancel(vigil_runtime *rt, const char *task_id, vigil_error *err)
{
    if (!rt)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime given");
    return vg_task_cancel(&rt->env, task_id, err);
}

vigil_code vigil_task_dispatch(vigil_runtime *rt, int slots, int *started, vigil_error *err)
{
    if (!rt)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime given");
    return vg_task_dispatch(&rt->env, NULL, slots, started, err);
}

vigil_code vigil_run_cancel(vigil_runtime *rt, const char *run, const char *by, int *was_queued,
                            vigil_error *err)
{
    int queued = 0;
    if (!rt)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime given");
    vigil_code rc = vg_run_cancel(&rt->env, run, by, &queued, err);
    if (!rc && was_queued)
        *was_queued = queued;
    return rc;
}

vigil_code vigil_run_rerun(vigil_runtime *rt, const char *run, const char *prompt,
                           char out_run_key[65], vigil_error *err)
{
    vigil_run_override o = {.prompt = prompt};
    return vigil_run_rerun_with(rt, run, &o, out_run_key, err);
}

/* A model or tool name of an override: not empty, and short enough to be a name. */
static vigil_code override_name(const char *what, const char *name, vigil_error *err)
{
    if (!name || !name[0] || strlen(name) > 200)
        return VG_FAIL(err, VIGIL_EINVAL, "a re-run's %s must be a name of 1 to 200 characters",
                       what);
    return VIGIL_OK;
}

/* Put the text s into into (as key's value, or appended when key is NULL); EINVAL when s is
 * not UTF-8 (jansson refuses it: the override is never dropped silently). */
static vigil_code put_text(json_t *into, const char *key, const char *what, const char *s,
                           vigil_error *err)
{
    json_t *t = json_string(s);
    if (!t)
        return VG_FAIL(err, VIGIL_EINVAL, "a re-run's %s is not valid UTF-8 text", what);
    if (key ? json_object_set_new(into, key, t) : json_array_append_new(into, t))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory re-running a run");
    return VIGIL_OK;
}

/* The override as its record keeps it: {"prompt"?, "model"?, "tools"?}. */
static vigil_code override_json(const vigil_run_override *o, json_t **out, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    json_t *v = json_object(), *tools = o && o->tools ? json_array() : NULL;
    if (!v || (o && o->tools && !tools))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory re-running a run");
    if (!rc && o && o->model && !(rc = override_name("model", o->model, err)))
        rc = put_text(v, "model", "model", o->model, err);
    if (!rc && o && o->prompt)
        rc = put_text(v, "prompt", "prompt", o->prompt, err);
    for (size_t i = 0; !rc && tools && i < o->n_tools; i++)
        if (!(rc = override_name("tool", o->tools[i], err)))
            rc = put_text(tools, NULL, "tool name", o->tools[i], err);
    if (!rc && tools && json_object_set(v, "tools", tools))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory re-running a run");
    json_decref(tools);
    if (rc)
        json_decref(v);
    else
        *out = v;
    return rc;
}

vigil_code vigil_run_rerun_with(vigil_runtime *rt, const char *run,
                                const vigil_run_override *override, char out_run_key[65],
                                vigil_error *err)
{
    json_t *o = NULL;
    if (!rt || !out_run_key)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime or output given");
    vigil_code rc = override_json(override, &o, err);
    if (!rc)
        rc = vg_run_rerun(&rt->env, run, o, out_run_key, err);
    json_decref(o);
    return rc;
}

vigil_code vigil_run_resume(vigil_runtime *rt, const char *run, const char *prompt,
                            char out_run_key[65], vigil_error *err)
{
    if (!rt || !out_run_key)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime or output given");
    return vg_run_resume(&rt->env, run, prompt, out_run_key, err);
}
