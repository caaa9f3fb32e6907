/*
 * task.c: the task graph. A task's body holds both directions of its edges (`blocks`, the
 * tasks it holds back, and `blocked_by`), so readiness is decided from one task and the tasks
 * it names, never from a scan of the graph: finishing a task looks only at what it blocks.
 * Sections: records; edges and cycles; transitions; dispatch; ends of runs.
 */
#include "base/common.h"

#include "base/json.h"

#include "agent/agent.h"
#include "base/hash.h"
#include "orch/orch_int.h"
#include "orch/task.h"

static const char *jstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* ---- records ------------------------------------------------------------------------------- */

static int status_cb(void *user, const struct vg_record *r)
{
    snprintf(user, 16, "%s", r->k1);
    return 1;
}

/* A blocker that holds its task back: any not done (one that failed or was cancelled
 * cancels what it blocks, but until then, as inside fail_cycles, it does not free it). */
static vigil_code holds_back(struct vg_env *env, const char *id, int *holds, vigil_error *err)
{
    char status[16] = "";
    vigil_error miss = {0};
    vigil_code rc = vg_error_unless_missing(
        err, &miss, vg_store_get(env->store, "task", id, status_cb, status, &miss));
    *holds = rc || strcmp(status, "done") != 0;
    return rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc;
}

/*
 * `ready` is derived, not always written: a task stored pending whose blockers are all done
 * is ready (the dispatcher does not write the pending -> ready move: docs/orchestration.md,
 * "The task graph"; PERF.md "Session 30"). A task stored ready (one with no blockers, a retry,
 * a store written before) is ready as stored. Only the blockers' status columns are read.
 */
static vigil_code derive_ready(struct vg_env *env, json_t *t, vigil_error *err)
{
    json_t *b;
    size_t i;
    int held = 0;
    vigil_code rc = VIGIL_OK;
    const char *st = jstr(t, "status");
    if (!st || strcmp(st, "pending"))
        return VIGIL_OK;
    json_array_foreach (json_object_get(t, "blocked_by"), i, b)
        if (!held && json_is_string(b) && (rc = holds_back(env, json_string_value(b), &held, err)))
            return rc;
    if (!held && json_array_size(json_object_get(t, "blocked_by")) &&
        json_object_set_new(t, "status", json_string("ready")))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a task");
    return VIGIL_OK;
}

/* Written digit by digit: snprintf's format parsing was most of it, twice a task start. */
void vg_task_attempt_turn(char out[32], int64_t attempt)
{
    char digits[24];
    size_t d = sizeof digits;
    uint64_t u = attempt < 0 ? 0 - (uint64_t)attempt : (uint64_t)attempt;
    do
        digits[--d] = (char)('0' + u % 10);
    while ((u /= 10) && d);
    if (attempt < 0)
        digits[--d] = '-';
    memcpy(out, "attempt-", 8);
    memcpy(out + 8, digits + d, sizeof digits - d);
    out[8 + sizeof digits - d] = '\0';
}

void vg_task_run_key(char out[65], const char *task_id, int64_t attempt)
{
    char turn[32];
    vg_task_attempt_turn(turn, attempt);
    const char *parts[] = {"task", task_id, turn};
    vg_sha256_hex_parts(out, parts, 3);
}

static int wake_agent_cb(void *user, const struct vg_record *r)
{
    snprintf(user, 37, "%s", r->owner);
    return 1;
}

/*
 * `running` is derived too: the dispatcher's start writes the task's wake only (its run key
 * from the task and its next attempt, vg_task_run_key), not the task, so a task stored pending
 * or ready whose next attempt's wake exists, whatever that wake's status, is running on the
 * wake's agent (PERF.md "Session 31"). The task is written when its run ends (done, a retry,
 * failed, cancelled) or is re-run (stored running from then on). One point read of the wake's
 * key columns; the wake's body is not parsed.
 */
const char *vg_task_selection(json_t *t, const char *agent)
{
    const char *judged = jstr(json_object_get(t, "judgement"), "agent");
    return judged && agent && *judged && !strcmp(judged, agent) ? VG_TASK_SELECTION_JUDGE
                                                                : VG_TASK_SELECTION;
}

vigil_code vg_task_derive_running(struct vg_env *env, json_t *t, vigil_error *err)
{
    const char *st = jstr(t, "status"), *id = jstr(t, "id");
    char key[65], agent[37] = "";
    if (!st || !id || (strcmp(st, "pending") && strcmp(st, "ready")))
        return VIGIL_OK;
    int64_t attempt = vg_orch_jint(t, "attempts") + 1;
    vg_task_run_key(key, id, attempt);
    vigil_error miss = {0};
    vigil_code rc = vg_error_unless_missing(
        err, &miss, vg_store_get(env->store, "wake_run", key, wake_agent_cb, agent, &miss));
    if (rc)
        return rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc;
    json_t *p =
        json_pack("{s:s, s:s, s:s, s:I, s:s}", "status", "running", "agent", agent, "run_key", key,
                  "attempts", (json_int_t)attempt, "selection", vg_task_selection(t, agent));
    rc = p && !json_object_update(t, p)
             ? VIGIL_OK
             : VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a task");
    json_decref(p);
    return rc;
}

/* A task's status as every reader sees it: running by its wake, ready by its blockers. */
static vigil_code derive_status(struct vg_env *env, json_t *t, vigil_error *err)
{
    vigil_code rc = vg_task_derive_running(env, t, err);
    return rc ? rc : derive_ready(env, t, err);
}

vigil_code vg_task_get(struct vg_env *env, const char *id, json_t **out, int64_t *version,
                       vigil_error *err)
{
    if (!id || !*id || strlen(id) > 100)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no task \"%.60s\"", id ? id : "");
    vigil_code rc = vg_env_get_json(env, "task", id, out, version, err);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no task \"%.60s\"", id);
    if (!rc && (rc = derive_status(env, *out, err))) {
        json_decref(*out);
        *out = NULL;
    }
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
    int64_t last_seq; /* the last record's seq and id: a page's keyset cursor */
    char last_id[101];
};

static int list_cb(void *user, const struct vg_record *r)
{
    struct list_ctx *l = user;
    json_t *b = json_loads(r->body, 0, NULL);
    if (b) {
        json_object_set_new(b, "version", json_integer(r->rev));
        json_array_append_new(l->items, b);
    }
    l->last_seq = r->seq;
    snprintf(l->last_id, sizeof l->last_id, "%s", r->id);
    return 0;
}

/* A status a task can have (NULL: any). */
static int status_known(const char *status)
{
    static const char *const known[] = {"pending", "ready",  "running",  "attention",
                                        "done",    "failed", "cancelled"};
    for (size_t i = 0; status && i < VG_ARRAY_LEN(known); i++)
        if (!strcmp(status, known[i]))
            return 1;
    return !status;
}

static int older_first(const void *a, const void *b)
{
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int64_t cx = vg_orch_jint(x, "created_ms"), cy = vg_orch_jint(y, "created_ms");
    const char *ix = jstr(x, "id"), *iy = jstr(y, "id");
    return cx != cy ? (cx < cy ? -1 : 1) : strcmp(ix ? ix : "", iy ? iy : "");
}

/* items, oldest first (a ready listing merges two status runs of the index). */
static vigil_code sort_oldest_first(json_t *items, vigil_error *err)
{
    return vg_json_array_sort(items, older_first)
               ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing tasks")
               : VIGIL_OK;
}

/* The pending tasks read, each with its derived status; those not of `status` (when given)
 * left out. */
static vigil_code derive_listed(struct vg_env *env, json_t *items, const char *status,
                                vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    for (size_t i = 0; !rc && i < json_array_size(items);) {
        json_t *t = json_array_get(items, i);
        if (!(rc = derive_status(env, t, err)) && status && strcmp(jstr(t, "status"), status))
            json_array_remove(items, i);
        else
            i++;
    }
    return rc;
}

/* Up to `want` (0: all) of the tasks stored `stored` (pending or ready) whose derived status
 * is `status`, oldest first, appended to items: the stored run of the status index read a page
 * at a time after the last seen, so a round that wants a few reads the tasks older than them
 * only. */
static vigil_code derived_of(struct vg_env *env, const char *stored, const char *status,
                             size_t want, json_t *items, vigil_error *err)
{
    enum { PAGE = 64 };
    struct vg_query q = {.kind = "task", .k1 = stored, .limit = PAGE};
    char after[101] = "";
    size_t found = 0, got = PAGE;
    vigil_code rc = VIGIL_OK;
    while (!rc && got == PAGE && (!want || found < want)) {
        struct list_ctx page = {.items = json_array()};
        if (!page.items)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing tasks");
        rc = vg_store_scan(env->store, &q, list_cb, &page, err);
        got = json_array_size(page.items);
        for (size_t i = 0; !rc && i < got; i++) {
            json_t *t = json_array_get(page.items, i);
            if (!(rc = derive_status(env, t, err)) && !strcmp(jstr(t, "status"), status) &&
                (!want || found < want) && !json_array_append(items, t))
                found++;
        }
        if (got) {
            memcpy(after, page.last_id, sizeof after);
            q.has_after = 1;
            q.after_seq = page.last_seq;
            q.after_id = after;
        }
        json_decref(page.items);
    }
    return rc;
}

/* The tasks of a derived status (ready or running): those stored so (running only: a stored
 * ready or pending task is read for its wake) and those derived from pending and ready. */
static vigil_code list_derived(struct vg_env *env, const char *status, size_t want, json_t **out,
                               vigil_error *err)
{
    struct list_ctx l = {.items = json_array()};
    struct vg_query q = {.kind = "task", .k1 = "running"};
    vigil_code rc = l.items ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing tasks");
    if (!rc && !strcmp(status, "running"))
        rc = vg_store_scan(env->store, &q, list_cb, &l, err);
    if (!rc)
        rc = derived_of(env, "ready", status, want, l.items, err);
    if (!rc)
        rc = derived_of(env, "pending", status, want, l.items, err);
    if (!rc)
        rc = sort_oldest_first(l.items, err);
    while (!rc && want && json_array_size(l.items) > want)
        json_array_remove(l.items, json_array_size(l.items) - 1);
    if (rc)
        json_decref(l.items);
    else
        *out = l.items;
    return rc;
}

vigil_code vg_task_ready_oldest(struct vg_env *env, size_t want, json_t **out, vigil_error *err)
{
    return list_derived(env, "ready", want, out, err);
}

/* A status other than pending, ready and running is the index's run of it; those three are
 * derived (derive_status): a ready listing is the stored ready tasks not started and the
 * pending ones whose blockers are all done, a running one the stored running tasks and the
 * pending or ready ones whose wake exists. */
vigil_code vg_task_list(struct vg_env *env, const char *status, json_t **out, vigil_error *err)
{
    if (!status_known(status))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "unknown task status \"%.40s\": pending, ready, running, attention, done, "
                       "failed or cancelled",
                       status);
    if (status && (!strcmp(status, "ready") || !strcmp(status, "running")))
        return list_derived(env, status, 0, out, err);
    struct list_ctx l = {.items = json_array()};
    struct vg_query q = {.kind = "task", .k1 = status};
    vigil_code rc = l.items ? vg_store_scan(env->store, &q, list_cb, &l, err)
                            : VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing tasks");
    if (!rc && (!status || !strcmp(status, "pending")))
        rc = derive_listed(env, l.items, status, err);
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

/* A tag is what an agent's manifest `tags` may hold: 1 to 64 of a-z 0-9 _ - (so a comma,
 * which the dispatcher's pool joins them with, never is one). */
int vg_task_tag_valid(const char *tag)
{
    size_t n = tag ? strlen(tag) : 0;
    return n >= 1 && n <= 64 && strspn(tag, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

/* The new task's body; tags only when it has some (a task without them is stored as before). */
static vigil_code task_body(const char *id, const char *title, const char *kind,
                            const char *const *tags, size_t n_tags, int64_t now, json_t **out,
                            vigil_error *err)
{
    if (!title || !*title || strlen(title) > 2000)
        return VG_FAIL(err, VIGIL_EINVAL, "a task needs a title of 1 to 2000 bytes");
    if (kind && (!*kind || strlen(kind) > 64))
        return VG_FAIL(err, VIGIL_EINVAL, "a task's kind has 1 to 64 bytes");
    if (n_tags > VG_TASK_MAX_TAGS)
        return VG_FAIL(err, VIGIL_EINVAL, "a task has at most %d tags", VG_TASK_MAX_TAGS);
    for (size_t i = 0; i < n_tags; i++)
        if (!vg_task_tag_valid(tags[i]))
            return VG_FAIL(err, VIGIL_EINVAL, "invalid tag \"%.70s\": 1 to 64 of a-z 0-9 _ -",
                           tags[i] ? tags[i] : "");
    json_t *t = json_pack("{s:s, s:s, s:s, s:s, s:[], s:[], s:i, s:I}", "id", id, "title", title,
                          "kind", kind ? kind : "", "status", "ready", "blocks", "blocked_by",
                          "attempts", 0, "created_ms", (json_int_t)now);
    json_t *list = n_tags ? json_array() : NULL;
    for (size_t i = 0; list && i < n_tags; i++)
        if (json_array_append_new(list, json_string(tags[i]))) {
            json_decref(list);
            list = NULL;
        }
    if (!t || (n_tags && (!list || json_object_set_new(t, "tags", list)))) {
        json_decref(t);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory adding a task");
    }
    *out = t;
    return VIGIL_OK;
}

vigil_code vg_task_add(struct vg_env *env, const char *title, const char *kind,
                       const char *const *tags, size_t n_tags, const char *const *blocks, size_t n,
                       char out_id[37], vigil_error *err)
{
    char id[37];
    json_t *t = NULL;
    vg_ids_new(env->ids, id);
    int64_t now = vg_env_now(env);
    vigil_code rc = task_body(id, title, kind, tags, n_tags, now, &t, err);
    if (rc)
        return rc;
    rc = vg_store_begin(env->store, err);
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

vigil_code vg_task_store_moved(struct vg_env *env, json_t *t, int64_t version, vigil_error *err)
{
    vigil_code rc = task_store(env, t, version, err);
    if (rc == VIGIL_ECONFLICT)
        return VG_FAIL(err, VIGIL_ECONFLICT, "task %s moved on (not at version %lld)",
                       jstr(t, "id"), (long long)version);
    return rc;
}

vigil_code vg_task_move_quiet(struct vg_env *env, json_t *t, int64_t version, const char *to,
                              json_t *patch, vigil_error *err)
{
    if ((patch && json_object_update(t, patch)) ||
        json_object_set_new(t, "status", json_string(to)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory moving a task");
    vigil_code rc = vg_task_store_moved(env, t, version, err);
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

/* A cancelled task's run stops too (trial L1): a queued one never starts, one under way is asked
 * to stop at its next safe point, as `vigil runs cancel` does. Its end then finds the task
 * cancelled and changes nothing. A run that ended meanwhile (ESTATE) has nothing to stop. */
static vigil_code stop_run(struct vg_env *env, json_t *t, vigil_error *err)
{
    const char *key = jstr(t, "run_key");
    if (strcmp(jstr(t, "status"), "running") || !key)
        return VIGIL_OK;
    int queued = 0;
    vigil_error e = {0};
    vigil_code rc = vg_run_cancel(env, key, NULL, &queued, &e);
    if (rc && rc != VIGIL_ESTATE)
        vg_error_copy(err, &e);
    return rc == VIGIL_ESTATE ? VIGIL_OK : rc;
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
        if (!open_status(st) && strcmp(st, "running") && strcmp(st, "attention"))
            rc = VG_FAIL(err, VIGIL_ESTATE, "task %s is %s already", id, st);
        json_t *p = json_pack("{s:s}", "reason", "cancelled by a person");
        if (!rc)
            rc = vg_task_transition(env, id, st, "cancelled", v, p, err);
        json_decref(p);
        if (!rc)
            rc = close_dependents(env, t, "a task it waits for was cancelled", err);
        if (!rc)
            rc = stop_run(env, t, err);
    }
    json_decref(t);
    return vg_store_end(env->store, rc, err);
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
