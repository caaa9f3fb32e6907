/*
 * graph.c: the dispatcher's view of the open task graph, kept in memory between transactions
 * (docs/orchestration.md, "The task graph"; docs/internals/PERF.md, "Session 23"). The store
 * stays the truth: the view holds the tasks not finished (pending, ready, running), each with
 * its body, its version and how many of its blockers are not done yet, the ready ones in a
 * heap by age, and the running ones by their run key. A run's end then reads nothing: its task
 * is written done, what it blocks is counted down in memory, and only a task that becomes ready
 * is written.
 *
 * Every writer of tasks changes one record, `task_graph/default`: the view's own transactions
 * once each, with a fresh tag in its body, any other write of a task (task.c) with an empty
 * tag, locking it before its first task write (stamp_take), so task writers on different
 * connections take turns. The view is used only while that record is still the one it last
 * wrote or read (its revision and body): a write by another process or runtime, or a
 * rolled-back transaction of its own, makes it rebuild from the store (a scan of the open
 * tasks). So a crash loses nothing: a new process builds its view from what was committed.
 */
#include "base/common.h"

#include "orch/orch_int.h"
#include "orch/task.h"
#include "os/ids.h"

#define GRAPH_KIND "task_graph"
#define GRAPH_ID "default"

static void graph_clear(struct vg_task_graph *g)
{
    for (size_t i = 0; i < g->len; i++)
        json_decref(g->node[i].body);
    g->len = 0;
    g->nheap = 0;
    g->running = 0;
    g->pending = 0;
    g->slots = 0;
    json_object_clear(g->by_id);
    json_object_clear(g->by_run);
    g->valid = 0;
    g->pool.valid = 0; /* another writer moved on: the loads are read again too */
}

static void graph_free(void *p)
{
    struct vg_task_graph *g = p;
    if (!g)
        return;
    graph_clear(g);
    json_decref(g->by_id);
    json_decref(g->by_run);
    vg_free(g->node);
    vg_free(g->heap);
    vg_task_pool_clear(&g->pool);
    vg_free(g);
}

/* A rolled-back transaction: the view moved tasks the store did not. */
void vg_task_graph_drop(struct vg_env *env)
{
    struct vg_task_graph *g = env->task_graph;
    if (g) {
        g->valid = 0;
        g->pool.valid = 0; /* it counted the rolled-back starts */
    }
}

/* ---- the ready heap, oldest (seq, then id) first ------------------------------------------- */

static int older(const struct vg_task_graph *g, size_t a, size_t b)
{
    const struct vg_task_node *x = &g->node[a], *y = &g->node[b];
    return x->seq != y->seq ? x->seq < y->seq : strcmp(x->id, y->id) < 0;
}

static void heap_swap(struct vg_task_graph *g, size_t i, size_t j)
{
    size_t t = g->heap[i];
    g->heap[i] = g->heap[j];
    g->heap[j] = t;
}

vigil_code vg_task_graph_push_ready(struct vg_task_graph *g, size_t node, vigil_error *err)
{
    if (g->nheap == g->capheap) {
        size_t cap = g->capheap ? g->capheap * 2 : 64;
        size_t *h = vg_realloc(g->heap, cap * sizeof *h);
        if (!h)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory keeping the ready tasks");
        g->heap = h;
        g->capheap = cap;
    }
    size_t i = g->nheap++;
    g->heap[i] = node;
    while (i && older(g, g->heap[i], g->heap[(i - 1) / 2])) {
        heap_swap(g, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    return VIGIL_OK;
}

int vg_task_graph_pop_ready(struct vg_task_graph *g, size_t *node)
{
    if (!g->nheap)
        return 0;
    *node = g->heap[0];
    g->heap[0] = g->heap[--g->nheap];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < g->nheap && older(g, g->heap[l], g->heap[m]))
            m = l;
        if (r < g->nheap && older(g, g->heap[r], g->heap[m]))
            m = r;
        if (m == i)
            break;
        heap_swap(g, i, m);
        i = m;
    }
    return 1;
}

/* ---- building the view from the store ------------------------------------------------------ */

struct load_ctx {
    struct vg_task_graph *g;
    vigil_code rc;
    vigil_error *err;
};

static int load_cb(void *user, const struct vg_record *r)
{
    struct load_ctx *c = user;
    struct vg_task_graph *g = c->g;
    if (strlen(r->id) >= sizeof g->node[0].id) {
        c->rc = VG_FAIL(c->err, VIGIL_ECORRUPT, "a task id of over 100 bytes: %.40s...", r->id);
        return 1;
    }
    if (g->len == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 256;
        struct vg_task_node *n = vg_realloc(g->node, cap * sizeof *n);
        if (!n) {
            c->rc = VG_FAIL(c->err, VIGIL_ENOMEM, "out of memory building the task graph");
            return 1;
        }
        g->node = n;
        g->cap = cap;
    }
    struct vg_task_node *n = &g->node[g->len];
    memset(n, 0, sizeof *n);
    if (!(n->body = json_loads(r->body, 0, NULL)) ||
        json_object_set_new(g->by_id, r->id, json_integer((json_int_t)g->len))) {
        json_decref(n->body);
        c->rc = VG_FAIL(c->err, VIGIL_ECORRUPT, "task %.40s: its record is not JSON", r->id);
        return 1;
    }
    snprintf(n->id, sizeof n->id, "%s", r->id);
    snprintf(n->status, sizeof n->status, "%s", r->k1);
    n->version = r->rev;
    n->seq = r->seq;
    g->len++;
    return 0;
}

/* Each open task's count of open blockers (a blocker not open is done: one that failed or was
 * cancelled closed what it blocks), the ready ones in the heap (stored ready, or stored pending
 * with no open blocker: task.c derive_ready), the running ones by run key (stored running, or
 * stored pending or ready with its next attempt's wake: task.c vg_task_derive_running). */
static vigil_code index_nodes(struct vg_env *env, struct vg_task_graph *g, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    for (size_t i = 0; !rc && i < g->len; i++) {
        struct vg_task_node *n = &g->node[i];
        json_t *b;
        size_t j;
        if (strcmp(n->status, "running") && (rc = vg_task_derive_running(env, n->body, err)))
            break;
        const char *st = json_string_value(json_object_get(n->body, "status"));
        if (st && !strcmp(st, "running")) /* stored, or started by its wake (task.c) */
            snprintf(n->status, sizeof n->status, "%s", "running");
        json_array_foreach (json_object_get(n->body, "blocked_by"), j, b)
            n->waiting += json_is_string(b) && json_object_get(g->by_id, json_string_value(b));
        const char *key = json_string_value(json_object_get(n->body, "run_key"));
        if (!strcmp(n->status, "pending") && !n->waiting &&
            json_array_size(json_object_get(n->body, "blocked_by")))
            snprintf(n->status, sizeof n->status, "%s", "ready");
        if (!strcmp(n->status, "ready"))
            rc = vg_task_graph_push_ready(g, i, err);
        else if (!strcmp(n->status, "pending"))
            g->pending++;
        else if (!strcmp(n->status, "running") && key) {
            g->running++;
            if (json_object_set_new(g->by_run, key, json_integer((json_int_t)i)))
                rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory building the task graph");
        } else if (!strcmp(n->status, "running"))
            g->running++;
    }
    return rc;
}

static vigil_code rebuild(struct vg_env *env, struct vg_task_graph *g, vigil_error *err)
{
    static const char *const open_status[] = {"pending", "ready", "running"};
    struct load_ctx c = {g, VIGIL_OK, err};
    vigil_code rc = VIGIL_OK;
    graph_clear(g);
    for (size_t i = 0; !rc && i < 3; i++) {
        struct vg_query q = {.kind = "task", .k1 = open_status[i]};
        rc = vg_store_scan(env->store, &q, load_cb, &c, err);
        if (!rc)
            rc = c.rc;
    }
    if (!rc)
        rc = index_nodes(env, g, err);
    if (rc)
        graph_clear(g);
    return rc;
}

/* ---- the record that says whose view is current ------------------------------------------- */

struct stamp {
    int64_t rev;
    char body[64];
};

static int stamp_cb(void *user, const struct vg_record *r)
{
    struct stamp *s = user;
    s->rev = r->rev;
    snprintf(s->body, sizeof s->body, "%s", r->body);
    return 1;
}

static vigil_code stamp_read(struct vg_env *env, struct stamp *s, vigil_error *err)
{
    s->rev = 0;
    s->body[0] = '\0';
    vigil_error miss = {0};
    vigil_code rc = vg_error_unless_missing(
        err, &miss, vg_store_get(env->store, GRAPH_KIND, GRAPH_ID, stamp_cb, s, &miss));
    return rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc;
}

/*
 * Take the stamp for the open transaction, then read it (PostgreSQL: SELECT ... FOR UPDATE;
 * SQLite: nothing to take, its write transaction holds the store). Every transaction that
 * writes tasks takes it before its first task write, so two of them on different connections
 * take turns: the second waits until the first ends and then reads what it wrote, instead of
 * both reading one revision under READ COMMITTED and the second failing its compare-and-swap
 * (ECONFLICT) once the first commits. A stamp never written yet is first put if absent (an
 * insert of another transaction is waited for, then left as it is), so there is a row to lock.
 * Outside a transaction it is only read: the compare-and-swap of the write decides.
 */
static vigil_code stamp_take(struct vg_env *env, struct stamp *s, vigil_error *err)
{
    vigil_code rc = vg_store_lock_for_write(env->store, GRAPH_KIND, GRAPH_ID, err);
    if (!rc)
        rc = stamp_read(env, s, err);
    if (rc || s->rev || !vg_store_in_tx(env->store))
        return rc;
    rc = vg_env_put_text(env, GRAPH_KIND, GRAPH_ID, "", "", "", 0, "{\"by\":\"\"}",
                         VG_PUT_IF_ABSENT, err);
    if (!rc)
        rc = vg_store_lock_for_write(env->store, GRAPH_KIND, GRAPH_ID, err);
    return rc ? rc : stamp_read(env, s, err);
}

/* Only the lock: a stamp not written yet is written by the transaction's stamp_take. */
vigil_code vg_task_graph_lock(struct vg_env *env, vigil_error *err)
{
    return vg_store_lock_for_write(env->store, GRAPH_KIND, GRAPH_ID, err);
}

/* Write body at the revision read (rev 0: absent). */
static vigil_code stamp_write(struct vg_env *env, int64_t rev, const char *body, vigil_error *err)
{
    return rev ? vg_env_update_text(env, GRAPH_KIND, GRAPH_ID, "", "", "", 0, body, rev, err)
               : vg_env_put_text(env, GRAPH_KIND, GRAPH_ID, "", "", "", 0, body, 0, err);
}

vigil_code vg_task_graph_changed(struct vg_env *env, vigil_error *err)
{
    struct stamp s = {0};
    vg_task_graph_drop(env); /* a write outside the view: it rebuilds */
    vigil_code rc = stamp_take(env, &s, err);
    return rc ? rc : stamp_write(env, s.rev, "{\"by\":\"\"}", err);
}

vigil_code vg_task_graph_sync(struct vg_env *env, struct vg_task_graph **out, vigil_error *err)
{
    struct vg_task_graph *g = env->task_graph;
    struct stamp s = {0};
    if (!g) {
        if (!(g = vg_calloc(1, sizeof *g)) || !(g->by_id = json_object()) ||
            !(g->by_run = json_object())) {
            graph_free(g);
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory keeping the task graph");
        }
        env->task_graph = g;
        env->task_graph_free = graph_free;
    }
    vigil_code rc = stamp_take(env, &s, err); /* held until the caller's transaction ends */
    g->wrote = 0;
    g->served++;
    if (!rc && !(g->valid && s.rev == g->stamp_rev && !strcmp(s.body, g->stamp_body))) {
        /* Another writer moved on (another worker of the daemon, a CLI): the rebuild reads
         * every open task, so it waits until the view has served an eighth of its size, and
         * until then the caller reads the store as it goes (g->valid 0). Writers taking turns
         * then cost at most eight open tasks' reads each. */
        g->valid = 0;
        if (g->len && g->served <= g->len / 8)
            goto out;
        g->served = 0;
        if (!(rc = rebuild(env, g, err))) {
            g->stamp_rev = s.rev;
            snprintf(g->stamp_body, sizeof g->stamp_body, "%s", s.body);
            g->valid = 1;
            /* Inside a caller's transaction the stamp read may be one it has not committed: the
             * view's own fresh stamp then tells a rollback from what it saw. */
            g->wrote = env->store->depth > 1;
        }
    }
out:
    *out = g;
    return rc;
}

vigil_code vg_task_graph_seal(struct vg_env *env, struct vg_task_graph *g, vigil_error *err)
{
    char tag[37], body[64];
    vigil_code rc = VIGIL_OK;
    if (!g->wrote)
        return rc;   /* unchanged */
    if (!g->valid) { /* it wrote, then lost track: every view (this one too) reads the store */
        g->wrote = 0;
        return vg_task_graph_changed(env, err);
    }
    vg_ids_new(env->ids, tag);
    snprintf(body, sizeof body, "{\"by\":\"%s\"}", tag);
    rc = stamp_write(env, g->stamp_rev, body, err);
    if (rc) {
        g->valid = 0;
        return rc;
    }
    g->stamp_rev = g->stamp_rev ? g->stamp_rev + 1 : 1;
    snprintf(g->stamp_body, sizeof g->stamp_body, "%s", body);
    g->wrote = 0;
    return VIGIL_OK;
}

/* ---- moves ---------------------------------------------------------------------------------- */

vigil_code vg_task_graph_move(struct vg_env *env, struct vg_task_graph *g, size_t i, const char *to,
                              json_t *patch, vigil_error *err)
{
    struct vg_task_node *n = &g->node[i];
    g->wrote = 1;
    vigil_code rc = vg_task_move_quiet(env, n->body, n->version, to, patch, err);
    if (rc) {
        g->valid = 0; /* the body changed in memory, the store did not */
        return rc;
    }
    json_object_del(n->body, "version");
    n->version++;
    g->pending -= !strcmp(n->status, "pending");
    snprintf(n->status, sizeof n->status, "%s", to);
    g->pending += !strcmp(to, "pending");
    return VIGIL_OK;
}

int vg_task_graph_find_run(struct vg_task_graph *g, const char *run_key, size_t *node)
{
    json_t *v = json_object_get(g->by_run, run_key);
    if (!v)
        return 0;
    *node = (size_t)json_integer_value(v);
    return 1;
}

void vg_task_graph_task_of_run(struct vg_env *env, const char *run_key, char task[101])
{
    struct vg_task_graph *g = env->task_graph;
    size_t i;
    task[0] = '\0';
    if (g && vg_task_graph_find_run(g, run_key, &i) && i < g->len)
        memcpy(task, g->node[i].id, sizeof g->node[i].id);
}

vigil_code vg_task_graph_started(struct vg_task_graph *g, size_t i, const char *run_key,
                                 json_t *patch, vigil_error *err)
{
    struct vg_task_node *n = &g->node[i];
    /* Running in memory only: the store has its wake (vg_task_derive_running), and the stamp
     * this view's seal writes makes every other view rebuild and find it. */
    g->wrote = 1;
    g->pending -= !strcmp(n->status, "pending");
    snprintf(n->status, sizeof n->status, "%s", "running");
    if (json_object_update(n->body, patch) ||
        json_object_set_new(n->body, "status", json_string("running"))) {
        g->valid = 0;
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory keeping the running tasks");
    }
    g->running++;
    if (json_object_set_new(g->by_run, run_key, json_integer((json_int_t)i))) {
        g->valid = 0;
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory keeping the running tasks");
    }
    return VIGIL_OK;
}

vigil_code vg_task_graph_done(struct vg_env *env, struct vg_task_graph *g, size_t i,
                              const char *run_key, json_t *patch, vigil_error *err)
{
    vigil_code rc = vg_task_graph_move(env, g, i, "done", patch, err);
    if (rc)
        return rc;
    json_object_del(g->by_run, run_key);
    g->running--;
    json_t *blocks = json_incref(json_object_get(g->node[i].body, "blocks")), *d;
    size_t j;
    json_array_foreach (blocks, j, d) {
        json_t *x = json_object_get(g->by_id, json_string_value(d));
        if (!x)
            continue;
        size_t k = (size_t)json_integer_value(x);
        struct vg_task_node *n = &g->node[k];
        if (--n->waiting > 0 || strcmp(n->status, "pending"))
            continue;
        /* Ready, and not written: stored pending with every blocker closed, it is ready by
         * derivation (task.c derive_ready), in this view, a rebuilt one and every reader. */
        g->pending--;
        snprintf(n->status, sizeof n->status, "%s", "ready");
        if ((rc = vg_task_graph_push_ready(g, k, err)))
            break;
    }
    json_decref(blocks);
    /* Finished: out of the view (its dependents no longer count it). */
    json_object_del(g->by_id, g->node[i].id);
    json_decref(g->node[i].body);
    g->node[i].body = NULL;
    if (rc)
        g->valid = 0;
    return rc;
}
