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
 * wrote or read (its revision and tag): a write by another process or runtime, or a
 * rolled-back transaction of its own, makes it rebuild from the store (a scan of the open
 * tasks). So a crash loses nothing: a new process builds its view from what was committed.
 * Views that take turns (the daemon's workers, each with its own runtime) list in the stamp
 * the tasks their transactions moved, and a view behind reads just those again ("catching
 * up", below; PERF.md "Session 33").
 */
#include "base/common.h"

#include "base/json.h"
#include "orch/orch_int.h"
#include "orch/task.h"
#include "os/ids.h"

#define GRAPH_KIND "task_graph"
#define GRAPH_ID "default"

/* A node's status set to `to` (cut to fit): a copy, where snprintf's format parsing cost more
 * than the rest of a move. */
static void status_set(struct vg_task_node *n, const char *to)
{
    size_t len = VG_MIN(strlen(to), sizeof n->status - 1);
    memcpy(n->status, to, len);
    n->status[len] = '\0';
}

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
        g->delta_ok = 0;   /* a write outside the view, or a rollback: the stamp lists none */
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

static void heap_pop(struct vg_task_graph *g)
{
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
}

/* A task another view started or finished while it was ready here stays in the heap until it
 * comes up (catching up does not search the heap): it is passed over then. */
int vg_task_graph_pop_ready(struct vg_task_graph *g, size_t *node)
{
    while (g->nheap) {
        *node = g->heap[0];
        heap_pop(g);
        if (g->node[*node].body && !strcmp(g->node[*node].status, "ready"))
            return 1;
    }
    return 0;
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
    status_set(n, r->k1);
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
            status_set(n, "running");
        json_array_foreach (json_object_get(n->body, "blocked_by"), j, b)
            n->waiting += json_is_string(b) && json_object_get(g->by_id, json_string_value(b));
        const char *key = json_string_value(json_object_get(n->body, "run_key"));
        if (!strcmp(n->status, "pending") && !n->waiting &&
            json_array_size(json_object_get(n->body, "blocked_by")))
            status_set(n, "ready");
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
    /* attention: a task whose run left a call in doubt (doubt.c) holds what it blocks */
    static const char *const open_status[] = {"pending", "ready", "running", "attention"};
    struct load_ctx c = {g, VIGIL_OK, err};
    vigil_code rc = VIGIL_OK;
    graph_clear(g);
    for (size_t i = 0; !rc && i < VG_ARRAY_LEN(open_status); i++) {
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
    char tag[37]; /* its "by" (the text a view wrote starts {"by":"TAG"); "" otherwise */
    int want_body;
    char *body; /* owned: its whole text, when wanted (catching up) */
};

static int stamp_cb(void *user, const struct vg_record *r)
{
    struct stamp *s = user;
    size_t len = strncmp(r->body, "{\"by\":\"", 7) ? 0 : strcspn(r->body + 7, "\"");
    s->rev = r->rev;
    len = len < sizeof s->tag ? len : 0; /* a tag too long for one is none */
    memcpy(s->tag, r->body + 7, len);
    s->tag[len] = '\0';
    if (s->want_body)
        s->body = vg_strdup(r->body);
    return 1;
}

static vigil_code stamp_read(struct vg_env *env, struct stamp *s, vigil_error *err)
{
    s->rev = 0;
    s->tag[0] = '\0';
    vg_free(s->body);
    s->body = NULL;
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

vigil_code vg_task_graph_stamp(struct vg_env *env, int64_t *rev, int *outside, vigil_error *err)
{
    struct stamp s = {0};
    vigil_code rc = stamp_read(env, &s, err);
    *rev = s.rev;
    *outside = s.rev && !s.tag[0];
    return rc;
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

/* Node i is closed (done): what it blocks counted down, those left with no open blocker ready
 * (not written: stored pending, they are ready by derivation, task.c derive_ready, in this
 * view, a rebuilt one and every reader), and i out of the view. */
static vigil_code close_node(struct vg_task_graph *g, size_t i, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
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
        g->pending--;
        status_set(n, "ready");
        if ((rc = vg_task_graph_push_ready(g, k, err)))
            break;
    }
    json_decref(blocks);
    /* Finished: out of the view (its dependents no longer count it). */
    json_object_del(g->by_id, g->node[i].id);
    json_decref(g->node[i].body);
    g->node[i].body = NULL;
    return rc;
}

/* ---- catching up ---------------------------------------------------------------------------- */

/*
 * A view's transaction lists in the stamp it writes the tasks it moved (started, or done) and
 * the stamps before it that the list runs from ("log": [revision, tag, the place of the first
 * task moved after it] each), when every task write of that transaction went through the view;
 * a view writing stamps in a row extends its list (up to VG_TASK_CHAIN_MAX stamps and
 * VG_TASK_DELTA_MAX tasks). A view at one of those stamps (the daemon's other worker, taking
 * turns with this one) then reads just the tasks listed after it again, instead of reading the
 * store while a rebuild is not yet worth it and then rebuilding: what the other view derived
 * from them (the tasks their ends made ready) it derives the same way, from what the store says
 * now. A task listed that is no longer in the view was closed already (every task listed was in
 * the graph at the list's first stamp: a new task is written outside the views). Any other
 * writer (the CLI, a retry, a failure, a cap) writes a stamp that lists nothing, and the views
 * behind it rebuild as before.
 */

/* The view is at the stamp s, read from the store: its next stamp starts a list of its own. */
static void stamp_keep(struct vg_task_graph *g, const struct stamp *s)
{
    g->stamp_rev = s->rev;
    memcpy(g->stamp_tag, s->tag, sizeof g->stamp_tag);
    g->chain_nlog = g->chain_nids = 0; /* its next stamp starts a list of its own */
}

/* Node k's task as another view's transactions left it (t, read in this one, at version v): *ok
 * 0 when the move is not one a view makes (the caller then rebuilds). Takes t. */
static vigil_code catch_up_task(struct vg_task_graph *g, size_t k, json_t *t, int64_t v, int *ok,
                                vigil_error *err)
{
    struct vg_task_node *n = &g->node[k];
    const char *st = json_string_value(json_object_get(t, "status"));
    const char *key = json_string_value(json_object_get(t, "run_key"));
    const char *agent = json_string_value(json_object_get(n->body, "agent"));
    vigil_code rc = VIGIL_OK;
    int waits = st && (!strcmp(st, "pending") || !strcmp(st, "ready")); /* not started */
    *ok = st && (!strcmp(st, "done") || !strcmp(st, n->status) ||
                 (waits && (!strcmp(n->status, "pending") || !strcmp(n->status, "ready"))) ||
                 (!strcmp(st, "running") && key && strcmp(n->status, "running")));
    if (*ok && !strcmp(st, "done")) {
        if (!strcmp(n->status, "running")) { /* its wake is over */
            json_object_del(g->by_run, json_string_value(json_object_get(n->body, "run_key")));
            g->running--;
            vg_task_pool_charge(&g->pool, agent, -1);
        }
        g->pending -= !strcmp(n->status, "pending");
        json_decref(t);
        return close_node(g, k, err); /* what it blocks: ready by derivation */
    }
    if (*ok && !waits && strcmp(n->status, st)) { /* started; if ready here, passed over */
        g->pending -= !strcmp(n->status, "pending");
        status_set(n, "running");
        g->running++;
        vg_task_pool_charge(&g->pool, json_string_value(json_object_get(t, "agent")), 1);
        if (json_object_set_new(g->by_run, key, json_integer((json_int_t)k)))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory keeping the running tasks");
    }
    if (*ok) {
        json_object_del(t, "version");
        json_decref(n->body);
        n->body = t;
        n->version = v;
    } else {
        json_decref(t);
    }
    return rc;
}

/* A listed task as stored, running when its next attempt's wake exists (task.c
 * vg_task_derive_running). Its readiness is not derived (vg_task_get reads each blocker for
 * it): the view counts its blockers itself. */
static vigil_code moved_task(struct vg_env *env, const char *id, json_t **t, int64_t *v,
                             vigil_error *err)
{
    vigil_code rc = vg_env_get_json(env, "task", id, t, v, err);
    if (!rc && (rc = vg_task_derive_running(env, *t, err))) {
        json_decref(*t);
        *t = NULL;
    }
    return rc;
}

/* Where the stamp's list (b) runs from this view's stamp: the place of the first task moved
 * after it, or -1 when the list does not name this view's stamp. */
static long chain_from(const struct vg_task_graph *g, json_t *b)
{
    json_t *e;
    size_t i;
    json_array_foreach (json_object_get(b, "log"), i, e) {
        const char *tag = json_string_value(json_array_get(e, 1));
        if (json_integer_value(json_array_get(e, 0)) == g->stamp_rev && tag &&
            !strcmp(tag, g->stamp_tag))
            return (long)json_integer_value(json_array_get(e, 2));
    }
    return -1;
}

/* *caught 1 when the stamp s lists what moved since this view's stamp, and each of those tasks
 * was read again here. */
static vigil_code catch_up(struct vg_env *env, struct vg_task_graph *g, const struct stamp *s,
                           int *caught, vigil_error *err)
{
    json_t *b = s->body ? json_loads(s->body, 0, NULL) : NULL;
    json_t *moved = json_object_get(b, "moved");
    long from = s->rev > g->stamp_rev && json_is_array(moved) ? chain_from(g, b) : -1;
    int ok = from >= 0;
    vigil_code rc = VIGIL_OK;
    for (size_t i = ok ? (size_t)from : 0; ok && !rc && i < json_array_size(moved); i++) {
        const char *id = json_string_value(json_array_get(moved, i));
        json_t *x = json_object_get(g->by_id, id ? id : ""), *t = NULL;
        int64_t v = 0;
        if (!id || !x)
            continue; /* closed already */
        if (!(rc = moved_task(env, id, &t, &v, err)))
            rc = catch_up_task(g, (size_t)json_integer_value(x), t, v, &ok, err);
        if (rc == VIGIL_ENOTFOUND) { /* gone: rebuild */
            rc = VIGIL_OK;
            ok = 0;
        }
    }
    *caught = !rc && ok;
    json_decref(b);
    return rc;
}

vigil_code vg_task_graph_sync(struct vg_env *env, struct vg_task_graph **out, vigil_error *err)
{
    struct vg_task_graph *g = env->task_graph;
    struct stamp s = {0};
    int caught = 0;
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
    int first = !g->in_tx;                    /* a resync later in the transaction is not */
    g->wrote = 0;
    g->served++;
    if (!rc && g->valid && !(s.rev == g->stamp_rev && !strcmp(s.tag, g->stamp_tag))) {
        if (s.tag[0]) /* another view writes too: list this one's moves for it */
            g->shared = VG_TASK_SHARED_ROUNDS;
        s.want_body = 1; /* its list: read it whole */
        if (!(rc = stamp_read(env, &s, err)) && !(rc = catch_up(env, g, &s, &caught, err)) &&
            caught)
            stamp_keep(g, &s);
        else
            g->valid = 0; /* another writer moved on, or the view is half caught up */
    }
    if (!rc && !g->valid) {
        /* Another writer moved on (another worker of the daemon, a CLI): the rebuild reads
         * every open task, so it waits until the view has served an eighth of its size, and
         * until then the caller reads the store as it goes (g->valid 0). Writers taking turns
         * then cost at most eight open tasks' reads each. */
        if (g->len && g->served <= g->len / 8)
            goto out;
        g->served = 0;
        if (!(rc = rebuild(env, g, err))) {
            if (s.tag[0] && strcmp(s.tag, g->stamp_tag)) /* another view's stamp */
                g->shared = VG_TASK_SHARED_ROUNDS;
            stamp_keep(g, &s);
            g->valid = 1;
            /* Inside a caller's transaction the stamp read may be one it has not committed: the
             * view's own fresh stamp then tells a rollback from what it saw. */
            g->wrote = env->store->depth > 1;
        }
    }
out:
    vg_free(s.body);
    if (first) { /* what this transaction moves through the view, for its seal to list */
        g->in_tx = 1;
        g->nmoved = 0;
        g->delta_ok = !rc && g->valid;
    }
    *out = g;
    return rc;
}

/* The list's oldest stamp and the tasks moved after it only, dropped. */
static void chain_drop_oldest(struct vg_task_graph *g)
{
    size_t cut = g->chain_nlog > 1 ? g->chain[1].first : g->chain_nids;
    memmove(g->chain_ids, g->chain_ids + cut, (g->chain_nids - cut) * sizeof g->chain_ids[0]);
    g->chain_nids -= cut;
    memmove(g->chain, g->chain + 1, (g->chain_nlog - 1) * sizeof g->chain[0]);
    g->chain_nlog--;
    for (size_t i = 0; i < g->chain_nlog; i++)
        g->chain[i].first -= cut;
}

/* This transaction's moves after the stamp the view is at, added to the list it wrote last
 * (the oldest stamps dropped past the caps). 0 when they cannot be listed: the stamp then lists
 * nothing, and the list starts again. */
static int chain_extend(struct vg_task_graph *g)
{
    if (!g->shared || !g->delta_ok || !g->nmoved || !g->stamp_rev ||
        g->nmoved > VG_TASK_DELTA_MAX) {
        g->chain_nlog = g->chain_nids = 0;
        return 0;
    }
    while (g->chain_nlog &&
           (g->chain_nlog == VG_TASK_CHAIN_MAX || g->chain_nids + g->nmoved > VG_TASK_DELTA_MAX))
        chain_drop_oldest(g);
    struct vg_task_chain *c = &g->chain[g->chain_nlog++];
    c->rev = g->stamp_rev;
    memcpy(c->tag, g->stamp_tag, sizeof c->tag);
    c->first = g->chain_nids;
    memcpy(g->chain_ids + g->chain_nids, g->moved, g->nmoved * sizeof g->moved[0]);
    g->chain_nids += g->nmoved;
    return 1;
}

/* Append text (len bytes) at *n of buf (cap): 0 when it does not fit. */
static int put(char *buf, size_t cap, size_t *n, const char *text, size_t len)
{
    if (*n + len >= cap)
        return 0;
    memcpy(buf + *n, text, len);
    *n += len;
    buf[*n] = '\0';
    return 1;
}

/* A number >= 0 in decimal (snprintf's format parsing cost more than the rest of a stamp). */
static int put_int(char *buf, size_t cap, size_t *n, int64_t v)
{
    char digits[24];
    size_t d = sizeof digits;
    uint64_t u = v < 0 ? 0 : (uint64_t)v;
    do
        digits[--d] = (char)('0' + u % 10);
    while ((u /= 10) && d);
    return put(buf, cap, n, digits + d, sizeof digits - d);
}

/* ,"log":[[rev,"tag",first],...],"moved":["id",...] of the list. */
static int chain_text(const struct vg_task_graph *g, char *body, size_t cap, size_t *n)
{
    char entry[80];
    int ok = put(body, cap, n, ",\"log\":[", 8);
    for (size_t i = 0; ok && i < g->chain_nlog; i++) {
        size_t len = 0;
        ok = put(entry, sizeof entry, &len, i ? ",[" : "[", i ? 2 : 1) &&
             put_int(entry, sizeof entry, &len, g->chain[i].rev) &&
             put(entry, sizeof entry, &len, ",\"", 2) &&
             put(entry, sizeof entry, &len, g->chain[i].tag, strlen(g->chain[i].tag)) &&
             put(entry, sizeof entry, &len, "\",", 2) &&
             put_int(entry, sizeof entry, &len, (int64_t)g->chain[i].first) &&
             put(entry, sizeof entry, &len, "]", 1) && put(body, cap, n, entry, len);
    }
    ok = ok && put(body, cap, n, "],\"moved\":[", 11);
    for (size_t i = 0; ok && i < g->chain_nids; i++) {
        const char *id = g->node[g->chain_ids[i]].id; /* none needs escaping: delta_note */
        size_t len = strlen(id);
        ok = put(body, cap, n, i ? ",\"" : "\"", i ? 2 : 1) && put(body, cap, n, id, len) &&
             put(body, cap, n, "\"", 1);
    }
    return ok && put(body, cap, n, "]", 1);
}

/* The stamp's text: a fresh tag, and what moved after which stamps (chain_extend). */
static void stamp_text(struct vg_task_graph *g, const char *tag, char *body, size_t cap)
{
    size_t n = 0;
    put(body, cap, &n, "{\"by\":\"", 7);
    put(body, cap, &n, tag, strlen(tag));
    put(body, cap, &n, "\"", 1);
    size_t head = n;
    if (chain_extend(g) && chain_text(g, body, cap, &n) && put(body, cap, &n, "}", 1))
        return;
    n = head; /* nothing listed: {"by":"TAG"} (a list that did not fit is cut off) */
    put(body, cap, &n, "}", 1);
    g->chain_nlog = g->chain_nids = 0;
}

vigil_code vg_task_graph_seal(struct vg_env *env, struct vg_task_graph *g, vigil_error *err)
{
    char tag[37], body[VG_TASK_STAMP_MAX];
    vigil_code rc = VIGIL_OK;
    g->in_tx = 0;
    if (!g->wrote)
        return rc;   /* unchanged */
    if (!g->valid) { /* it wrote, then lost track: every view (this one too) reads the store */
        g->wrote = 0;
        return vg_task_graph_changed(env, err);
    }
    vg_ids_new(env->ids, tag);
    stamp_text(g, tag, body, sizeof body);
    g->shared -= g->shared > 0;
    rc = stamp_write(env, g->stamp_rev, body, err);
    if (rc) {
        g->valid = 0;
        return rc;
    }
    g->stamp_rev = g->stamp_rev ? g->stamp_rev + 1 : 1;
    memcpy(g->stamp_tag, tag, sizeof g->stamp_tag);
    g->wrote = 0;
    return VIGIL_OK;
}

/* ---- moves ---------------------------------------------------------------------------------- */

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

/* A move of node i through the view, listed for the seal's stamp (delta_ok 0 past the cap). */
static void delta_note(struct vg_task_graph *g, size_t i)
{
    const char *id = g->node[i].id;
    if (strspn(id, "0123456789abcdefABCDEF-") != strlen(id)) /* listed without escapes */
        g->delta_ok = 0;
    else if (g->nmoved < VG_TASK_DELTA_MAX)
        g->moved[g->nmoved++] = i;
    else
        g->delta_ok = 0;
}

vigil_code vg_task_graph_started(struct vg_task_graph *g, size_t i, const char *agent,
                                 const char *run_key, int64_t attempts, const char *selection,
                                 vigil_error *err)
{
    struct vg_task_node *n = &g->node[i];
    /* Running in memory only: the store has its wake (vg_task_derive_running), and the stamp
     * this view's seal writes makes every other view rebuild and find it. The fields are set
     * one by one: a json_pack of them cost twice as much as the sets. The run key (hex), the
     * selection (task.h's names) and the status are ASCII: not checked as UTF-8. */
    g->wrote = 1;
    g->pending -= !strcmp(n->status, "pending");
    status_set(n, "running");
    if (json_object_set_new(n->body, "agent", json_string(agent)) ||
        json_object_set_new(n->body, "run_key", json_string_nocheck(run_key)) ||
        json_object_set_new(n->body, "attempts", json_integer((json_int_t)attempts)) ||
        json_object_set_new(n->body, "selection", json_string_nocheck(selection)) ||
        json_object_set_new(n->body, "status", json_string_nocheck("running"))) {
        g->valid = 0;
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory keeping the running tasks");
    }
    g->running++;
    if (json_object_set_new(g->by_run, run_key, json_integer((json_int_t)i))) {
        g->valid = 0;
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory keeping the running tasks");
    }
    delta_note(g, i);
    return VIGIL_OK;
}

/* The result and the status are set in the node's body itself and the body written at the
 * node's version: no patch object merged in, no "version" set on it to be taken off again. */
vigil_code vg_task_graph_done(struct vg_env *env, struct vg_task_graph *g, size_t i,
                              const char *run_key, const char *result, vigil_error *err)
{
    struct vg_task_node *n = &g->node[i];
    size_t len = strlen(result);
    json_t *text = json_stringn(result, vg_utf8_cut(result, len, VG_TASK_RESULT_MAX));
    vigil_code rc = VIGIL_OK;
    g->wrote = 1;
    if (!text || json_object_set_new(n->body, "result", text) || /* a failed set frees text */
        json_object_set_new(n->body, "status", json_string_nocheck("done")))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory finishing a task");
    if (!rc)
        rc = vg_task_store_moved(env, n->body, n->version, err);
    if (rc) {
        g->valid = 0; /* the body changed in memory, the store did not */
        return rc;
    }
    n->version++;
    g->pending -= !strcmp(n->status, "pending");
    status_set(n, "done");
    json_object_del(g->by_run, run_key);
    g->running--;
    delta_note(g, i);
    if ((rc = close_node(g, i, err)))
        g->valid = 0;
    return rc;
}
