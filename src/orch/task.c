/*
 * task.c: the task graph. A task's body holds both directions of its edges (`blocks`, the
 * tasks it holds back, and `blocked_by`), so readiness is decided from one task and the tasks
 * it names, never from a scan of the graph: finishing a task looks only at what it blocks.
 * Sections: records; edges and cycles; transitions; dispatch; ends of runs.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "orch/orch_int.h"
#include "orch/task.h"

static const char *jstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* ---- records ------------------------------------------------------------------------------- */

vigil_code vg_task_get(struct vg_env *env, const char *id, json_t **out, int64_t *version,
                       vigil_error *err)
{
    if (!id || !*id || strlen(id) > 100)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no task \"%.60s\"", id ? id : "");
    vigil_code rc = vg_env_get_json(env, "task", id, out, version, err);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no task \"%.60s\"", id);
    if (!rc && version)
        json_object_set_new(*out, "version", json_integer(*version));
    return rc;
}

/* Write a task at its version. A write outside the dispatcher's view is followed, once per
 * transaction, by vg_task_graph_changed (graph.c). */
static vigil_code task_store(struct vg_env *env, json_t *t, int64_t version, vigil_error *err)
{
    json_object_del(t, "version");
    const char *kind = jstr(t, "kind");
    return vg_env_update_json(env, "task", jstr(t, "id"), "", jstr(t, "status"), kind ? kind : "",
                              vg_orch_jint(t, "created_ms"), t, version, err);
}

struct list_ctx {
    json_t *items;
};

static int list_cb(void *user, const struct vg_record *r)
{
    json_t *b = json_loads(r->body, 0, NULL);
    if (b) {
        json_object_set_new(b, "version", json_integer(r->rev));
        json_array_append_new(((struct list_ctx *)user)->items, b);
    }
    return 0;
}

/* A status a task can have (NULL: any). */
static int status_known(const char *status)
{
    static const char *const known[] = {"pending", "ready",  "running",
                                        "done",    "failed", "cancelled"};
    for (size_t i = 0; status && i < VG_ARRAY_LEN(known); i++)
        if (!strcmp(status, known[i]))
            return 1;
    return !status;
}

vigil_code vg_task_list(struct vg_env *env, const char *status, json_t **out, vigil_error *err)
{
    if (!status_known(status))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "unknown task status \"%.40s\": pending, ready, running, done, failed or "
                       "cancelled",
                       status);
    struct list_ctx l = {json_array()};
    struct vg_query q = {.kind = "task", .k1 = status};
    vigil_code rc = l.items ? vg_store_scan(env->store, &q, list_cb, &l, err)
                            : VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing tasks");
    if (rc)
        json_decref(l.items);
    else
        *out = l.items;
    return rc;
}

/* ---- edges and cycles ---------------------------------------------------------------------- */

static int open_status(const char *st)
{
    return st && (!strcmp(st, "pending") || !strcmp(st, "ready"));
}

/* Does `from` reach `to` along blocks edges? */
static vigil_code reaches(struct vg_env *env, const char *from, const char *to, int *found,
                          vigil_error *err)
{
    json_t *seen = json_object(), *stack = json_pack("[s]", from);
    vigil_code rc = seen && stack ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    *found = 0;
    while (!rc && !*found && json_array_size(stack)) {
        size_t last = json_array_size(stack) - 1;
        char id[101];
        snprintf(id, sizeof id, "%s", json_string_value(json_array_get(stack, last)));
        json_array_remove(stack, last);
        if (!strcmp(id, to)) {
            *found = 1;
            break;
        }
        if (json_object_get(seen, id))
            continue;
        json_object_set_new(seen, id, json_true());
        json_t *t = NULL, *b;
        size_t i;
        if ((rc = vg_task_get(env, id, &t, NULL, err)))
            break;
        json_array_foreach (json_object_get(t, "blocks"), i, b)
            json_array_append(stack, b);
        json_decref(t);
    }
    json_decref(seen);
    json_decref(stack);
    return rc;
}

/* Record the edge a -> b in both bodies (inside the caller's transaction, which marks the
 * dispatcher's view changed: vg_task_graph_changed). */
static vigil_code link_edge(struct vg_env *env, json_t *a, int64_t av, json_t *b, int64_t bv,
                            vigil_error *err)
{
    const char *ast = jstr(a, "status");
    if (json_array_append_new(json_object_get(a, "blocks"), json_string(jstr(b, "id"))) ||
        json_array_append_new(json_object_get(b, "blocked_by"), json_string(jstr(a, "id"))))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory adding an edge");
    if (strcmp(ast, "done") && !strcmp(jstr(b, "status"), "ready"))
        json_object_set_new(b, "status", json_string("pending"));
    vigil_code rc = av ? task_store(env, a, av, err) : VIGIL_OK; /* the caller stamps */
    return rc ? rc : task_store(env, b, bv, err);
}

static vigil_code blockable(json_t *t, vigil_error *err)
{
    if (!open_status(jstr(t, "status")))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "task %s is %s: only a pending or ready task can be "
                       "blocked",
                       jstr(t, "id"), jstr(t, "status"));
    return VIGIL_OK;
}

vigil_code vg_task_block(struct vg_env *env, const char *a, const char *b, vigil_error *err)
{
    json_t *ta = NULL, *tb = NULL;
    int64_t av = 0, bv = 0;
    int cycle = 0;
    vigil_code rc = vg_store_begin(env->store, err);
    if (rc)
        return rc;
    /* The stamp first (graph.c): a concurrent task writer waits, then reads what this wrote. */
    if (!(rc = vg_task_graph_lock(env, err)) && !(rc = vg_task_get(env, a, &ta, &av, err)) &&
        !(rc = vg_task_get(env, b, &tb, &bv, err)) && !(rc = blockable(tb, err)) &&
        !(rc = reaches(env, b, a, &cycle, err)) && cycle)
        rc = VG_FAIL(err, VIGIL_EINVAL,
                     "\"%s blocks %s\" would close a cycle (%s already "
                     "leads to %s): nothing written",
                     a, b, b, a);
    if (!rc) {
        size_t i;
        json_t *x;
        json_array_foreach (json_object_get(ta, "blocks"), i, x)
            if (!strcmp(json_string_value(x), b))
                cycle = -1; /* the edge is there already */
    }
    if (!rc && cycle == 0 && !(rc = link_edge(env, ta, av, tb, bv, err)))
        rc = vg_task_graph_changed(env, err);
    rc = vg_store_end(env->store, rc, err);
    json_decref(ta);
    json_decref(tb);
    return rc;
}

vigil_code vg_task_add(struct vg_env *env, const char *title, const char *kind,
                       const char *const *blocks, size_t n, char out_id[37], vigil_error *err)
{
    char id[37];
    if (!title || !*title || strlen(title) > 2000)
        return VG_FAIL(err, VIGIL_EINVAL, "a task needs a title of 1 to 2000 bytes");
    if (kind && (!*kind || strlen(kind) > 64))
        return VG_FAIL(err, VIGIL_EINVAL, "a task's kind has 1 to 64 bytes");
    vg_ids_new(env->ids, id);
    int64_t now = vg_env_now(env);
    json_t *t = json_pack("{s:s, s:s, s:s, s:s, s:[], s:[], s:i, s:I}", "id", id, "title", title,
                          "kind", kind ? kind : "", "status", "ready", "blocks", "blocked_by",
                          "attempts", 0, "created_ms", (json_int_t)now);
    if (!t)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory adding a task");
    vigil_code rc = vg_store_begin(env->store, err);
    if (!rc)
        rc = vg_task_graph_lock(env, err); /* before any task write: graph.c */
    if (!rc)
        rc = vg_env_put_json(env, "task", id, "", "ready", kind ? kind : "", now, t, 0, err);
    if (!rc) /* once for the task and its edges */
        rc = vg_task_graph_changed(env, err);
    for (size_t i = 0; !rc && i < n; i++) {
        json_t *b = NULL, *self = NULL;
        int64_t bv = 0, sv = 0;
        if (!(rc = vg_task_get(env, blocks[i], &b, &bv, err)) && !(rc = blockable(b, err)) &&
            !(rc = vg_task_get(env, id, &self, &sv, err)))
            rc = link_edge(env, self, sv, b, bv, err);
        json_decref(b);
        json_decref(self);
    }
    rc = vg_store_end(env->store, rc, err);
    json_decref(t);
    if (!rc)
        memcpy(out_id, id, 37);
    return rc;
}

/* ---- transitions --------------------------------------------------------------------------- */

vigil_code vg_task_move(struct vg_env *env, json_t *t, int64_t version, const char *to,
                        json_t *patch, vigil_error *err)
{
    vigil_code rc = vg_task_move_quiet(env, t, version, to, patch, err);
    return rc ? rc : vg_task_graph_changed(env, err);
}

vigil_code vg_task_move_quiet(struct vg_env *env, json_t *t, int64_t version, const char *to,
                              json_t *patch, vigil_error *err)
{
    if ((patch && json_object_update(t, patch)) ||
        json_object_set_new(t, "status", json_string(to)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory moving a task");
    vigil_code rc = task_store(env, t, version, err);
    if (rc == VIGIL_ECONFLICT)
        return VG_FAIL(err, VIGIL_ECONFLICT, "task %s moved on (not at version %lld)",
                       jstr(t, "id"), (long long)version);
    if (!rc)
        json_object_set_new(t, "version", json_integer(version + 1));
    return rc;
}

vigil_code vg_task_transition(struct vg_env *env, const char *id, const char *from, const char *to,
                              int64_t version, json_t *patch, vigil_error *err)
{
    json_t *t = NULL;
    int64_t now_version = 0;
    vigil_code rc = vg_task_get(env, id, &t, &now_version, err);
    if (!rc && now_version != version)
        rc = VG_FAIL(err, VIGIL_ECONFLICT, "task %s moved on (version %lld, not %lld)", id,
                     (long long)now_version, (long long)version);
    if (!rc && strcmp(jstr(t, "status"), from))
        rc = VG_FAIL(err, VIGIL_ESTATE, "task %s is %s, not %s", id, jstr(t, "status"), from);
    if (!rc)
        rc = vg_task_move(env, t, version, to, patch, err);
    json_decref(t);
    return rc;
}

/* Cancel (or fail) every open task `id` blocks, transitively, saying why. */
static vigil_code close_dependents(struct vg_env *env, json_t *t, const char *why, vigil_error *err)
{
    json_t *d;
    size_t i;
    vigil_code rc = VIGIL_OK;
    json_array_foreach (json_object_get(t, "blocks"), i, d) {
        json_t *x = NULL;
        int64_t v = 0;
        if ((rc = vg_task_get(env, json_string_value(d), &x, &v, err)))
            break;
        if (open_status(jstr(x, "status"))) {
            json_t *p = json_pack("{s:s}", "reason", why);
            rc = vg_task_transition(env, jstr(x, "id"), jstr(x, "status"), "cancelled", v, p, err);
            json_decref(p);
            if (!rc)
                rc = close_dependents(env, x, why, err);
        }
        json_decref(x);
        if (rc)
            break;
    }
    return rc;
}

vigil_code vg_task_cancel(struct vg_env *env, const char *id, vigil_error *err)
{
    json_t *t = NULL;
    int64_t v = 0;
    vigil_code rc = vg_store_begin(env->store, err);
    if (rc)
        return rc;
    if (!(rc = vg_task_graph_lock(env, err)) && !(rc = vg_task_get(env, id, &t, &v, err))) {
        const char *st = jstr(t, "status");
        if (!open_status(st) && strcmp(st, "running"))
            rc = VG_FAIL(err, VIGIL_ESTATE, "task %s is %s already", id, st);
        json_t *p = json_pack("{s:s}", "reason", "cancelled by a person");
        if (!rc)
            rc = vg_task_transition(env, id, st, "cancelled", v, p, err);
        json_decref(p);
        if (!rc)
            rc = close_dependents(env, t, "a task it waits for was cancelled", err);
    }
    json_decref(t);
    return vg_store_end(env->store, rc, err);
}

static int status_cb(void *user, const struct vg_record *r)
{
    snprintf(user, 16, "%s", r->k1);
    return 1;
}

/* Is the task done? Its status is the record's k1 column: the body is not parsed. */
static vigil_code task_done(struct vg_env *env, const char *id, int *done, vigil_error *err)
{
    char status[16] = "";
    vigil_code rc = vg_store_get(env->store, "task", id, status_cb, status, err);
    if (rc == VIGIL_ENOTFOUND)
        rc = VG_FAIL(err, VIGIL_ENOTFOUND, "no task \"%.60s\"", id);
    *done = !rc && !strcmp(status, "done");
    return rc;
}

/* The tasks `t` (done) blocks whose other blockers are all done too now become ready. Each is
 * read once and moved as read; of its other blockers only the status column is read. */
static vigil_code wake_dependents(struct vg_env *env, json_t *t, vigil_error *err)
{
    json_t *d;
    size_t i;
    vigil_code rc = VIGIL_OK;
    json_array_foreach (json_object_get(t, "blocks"), i, d) {
        json_t *x = NULL, *b;
        int64_t v = 0;
        size_t j;
        int all_done = 1;
        if ((rc = vg_task_get(env, json_string_value(d), &x, &v, err)))
            break;
        json_array_foreach (json_object_get(x, "blocked_by"), j, b) {
            if (!all_done || !json_is_string(b) || !strcmp(json_string_value(b), jstr(t, "id")))
                continue;
            if ((rc = task_done(env, json_string_value(b), &all_done, err)))
                break;
        }
        if (!rc && all_done && !strcmp(jstr(x, "status"), "pending"))
            rc = vg_task_move(env, x, v, "ready", NULL, err);
        json_decref(x);
        if (rc)
            break;
    }
    return rc;
}

vigil_code vg_task_after_done(struct vg_env *env, json_t *t, vigil_error *err)
{
    return wake_dependents(env, t, err);
}

vigil_code vg_task_after_failed(struct vg_env *env, const char *id, const char *why,
                                vigil_error *err)
{
    json_t *t = NULL;
    vigil_code rc = vg_task_get(env, id, &t, NULL, err);
    if (!rc)
        rc = close_dependents(env, t, why, err);
    json_decref(t);
    return rc;
}
