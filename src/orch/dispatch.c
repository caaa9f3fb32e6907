/*
 * dispatch.c: the dispatcher's code loop (docs/orchestration.md): ready tasks start as wakes of
 * agents picked by rules, within the slots; a task's run ending moves it on and fills the slot.
 * Each start is one transaction that enqueues the task's wake and moves the task ready -> running
 * at the version it was read at: a dispatcher that lost the race to another writes nothing.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "base/hash.h"
#include "base/jscan.h"
#include "base/json.h"
#include "base/stats.h"
#include "orch/orch_int.h"
#include "orch/task.h"
#include "os/fiber.h"

static const char *jstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* The cap (asked > 0: set to it). A new cap written through a valid view g stays in it, and
 * its seal's fresh stamp makes every other view rebuild and read the cap; without one, every
 * view is told (vg_task_graph_changed). */
static vigil_code slots_of(struct vg_env *env, int asked, int *slots, struct vg_task_graph *g,
                           vigil_error *err)
{
    json_t *s = NULL;
    int64_t rev = 0;
    vigil_code rc = vg_env_get_json(env, "task_slots", "default", &s, &rev, err);
    if (rc && rc != VIGIL_ENOTFOUND)
        return rc;
    int have = rc ? VG_TASK_SLOTS_DEFAULT : (int)vg_orch_jint(s, "slots");
    json_decref(s);
    *slots = asked > 0 ? asked : have;
    if (asked <= 0 || asked == have)
        return VIGIL_OK;
    json_t *b = json_pack("{s:i}", "slots", asked);
    rc = rev ? vg_env_update_json(env, "task_slots", "default", "", "", "", 0, b, rev, err)
             : vg_env_put_json(env, "task_slots", "default", "", "", "", 0, b, 0, err);
    json_decref(b);
    if (!rc && g) {
        g->wrote = 1;
        g->delta_ok = 0; /* the other views read the new cap: they rebuild */
    }
    return rc || g ? rc : vg_task_graph_changed(env, err);
}

/* The agents a round may give tasks to (struct vg_task_pool, kept with the view between
 * transactions, or the round's own without it). Only agents that take wakes now: a task
 * given to a dormant agent or one under a kill switch would get a skipped wake and never end
 * (the enqueue checks again, in the task's transaction: a refusal leaves it ready). */
struct pool_scan {
    struct vg_task_pool *p;
    struct vg_env *env;
    struct vg_wake *w;
    vigil_code rc;
    vigil_error *err;
};

/* ",a,b," of the agent's manifest tags (config.tags), or NULL: none. Only a body that names
 * tags is parsed. */
static char *agent_tags(struct vg_env *env, const struct vg_record *r)
{
    json_t *a = NULL, *t;
    struct vg_buf b;
    size_t i;
    if (!r->body || !strstr(r->body, "\"tags\"") || vg_env_parse_json_shared(env, r->body, &a))
        return NULL;
    vg_buf_init(&b, 4096);
    json_array_foreach (json_object_get(json_object_get(a, "config"), "tags"), i, t)
        if (json_string_value(t))
            vg_buf_printf(&b, "%s%s,", b.len ? "" : ",", json_string_value(t));
    json_decref(a);
    if (!b.len || b.fail) {
        vg_buf_release(&b);
        return NULL;
    }
    return vg_buf_detach(&b, NULL);
}

/* Every tag of the task (a JSON array) among the candidate's. */
static int has_tags(const struct vg_task_candidate *c, json_t *tags)
{
    char needle[80];
    size_t i;
    json_t *t;
    json_array_foreach (tags, i, t) {
        snprintf(needle, sizeof needle, ",%s,", json_string_value(t) ? json_string_value(t) : "");
        if (!c->tags || !strstr(c->tags, needle))
            return 0;
    }
    return 1;
}

/* One agent record: its lifecycle and kind are index keys, so its body is parsed only when it
 * names tags. */
static int pool_cb(void *user, const struct vg_record *r)
{
    struct pool_scan *s = user;
    struct vg_task_pool *p = s->p;
    int queued = 0, started = 0, killed = 0;
    if (strcmp(r->k1, "active") != 0 && strcmp(r->k1, "created") != 0)
        return 0; /* dormant or destroyed: its wakes would be skipped */
    if (strlen(r->id) > 36)
        return 0;
    if (s->w->kill && (s->rc = s->w->kill(s->w->kill_user, s->env, r->id, &killed, s->err)))
        return 1;
    if (killed)
        return 0;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        struct vg_task_candidate *c = vg_realloc(p->c, cap * sizeof *c);
        if (!c) {
            s->rc = VG_FAIL(s->err, VIGIL_ENOMEM, "out of memory picking an agent");
            return 1;
        }
        p->c = c;
        p->cap = cap;
    }
    if ((s->rc = vg_orch_count(s->env, "wake_run", r->id, "queued", NULL, &queued, s->err)) ||
        (s->rc = vg_orch_count(s->env, "wake_run", r->id, "started", NULL, &started, s->err)))
        return 1;
    snprintf(p->c[p->n].id, 37, "%s", r->id);
    p->c[p->n].tags = agent_tags(s->env, r);
    p->c[p->n++].load = queued + started;
    return 0;
}

void vg_task_pool_clear(struct vg_task_pool *p)
{
    for (size_t i = 0; i < p->n; i++)
        vg_free(p->c[i].tags);
    vg_free(p->c);
    p->c = NULL;
    p->n = p->cap = 0;
}

static vigil_code pool_load(struct vg_env *env, struct vg_wake *w, struct vg_task_pool *p,
                            const char *kind, vigil_error *err)
{
    struct vg_query q = {.kind = "agent", .k2 = *kind ? kind : NULL};
    struct pool_scan s = {p, env, w, VIGIL_OK, err};
    for (size_t i = 0; i < p->n; i++)
        vg_free(p->c[i].tags);
    p->n = 0;
    p->rounds = 0;
    p->held = 1;
    p->read_ms = vg_env_now(env);
    p->kill = w->kill;
    p->kill_user = w->kill_user;
    snprintf(p->kind, sizeof p->kind, "%s", kind);
    vigil_code rc = vg_store_scan(env->store, &q, pool_cb, &s, err);
    if (!rc)
        rc = s.rc;
    p->valid = !rc;
    return rc;
}

/* The pool is read again unless it is of this kind, read with this kill-switch query, and
 * either held for this round or, with an agent, young enough (struct vg_task_pool): a new
 * agent, or one resumed, is seen within that bound; one paused or killed is refused by its
 * wake's enqueue at once. */
static int pool_fresh(struct vg_env *env, struct vg_wake *w, struct vg_task_pool *p,
                      const char *kind)
{
    int64_t age = vg_env_now(env) - p->read_ms;
    if (!p->valid || strcmp(p->kind, kind) || p->kill != w->kill || p->kill_user != w->kill_user)
        return 0;
    return p->held ||
           (p->n && p->rounds < VG_TASK_POOL_MAX_ROUNDS && age >= 0 && age < VG_TASK_POOL_MAX_MS);
}

/* The rules' ranking of the pool for task: the candidates of its kind holding its tags, the
 * least loaded first. *best: the first of them (p->n: none); *tied: how many share its load. */
static void rank(const struct vg_task_pool *p, json_t *task, size_t *best, size_t *tied)
{
    json_t *tags = json_object_get(task, "tags");
    *best = p->n;
    *tied = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (tags && !has_tags(&p->c[i], tags))
            continue;
        if (*best == p->n || p->c[i].load < p->c[*best].load) {
            *best = i;
            *tied = 1;
        } else if (p->c[i].load == p->c[*best].load) {
            (*tied)++;
        }
    }
}

static vigil_code pool_for(struct vg_env *env, struct vg_wake *w, struct vg_task_pool *p,
                           json_t *task, vigil_error *err)
{
    const char *kind = jstr(task, "kind") ? jstr(task, "kind") : "";
    return pool_fresh(env, w, p, kind) ? VIGIL_OK : pool_load(env, w, p, kind, err);
}

vigil_code vg_task_pool_tied(struct vg_env *env, struct vg_wake *w, struct vg_task_pool *p,
                             json_t *task, json_t **ids, vigil_error *err)
{
    size_t best, tied;
    vigil_code rc = pool_for(env, w, p, task, err);
    json_t *tags = json_object_get(task, "tags");
    *ids = rc ? NULL : json_array();
    if (!rc && !*ids)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory picking an agent");
    if (!rc)
        rank(p, task, &best, &tied);
    for (size_t i = 0; !rc && best < p->n && i < p->n; i++)
        if ((!tags || has_tags(&p->c[i], tags)) && p->c[i].load == p->c[best].load &&
            json_array_append_new(*ids, json_string(p->c[i].id)))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory picking an agent");
    return rc;
}

/* The agent the task's recorded judgement chose, when it is still a candidate. */
static size_t judged(const struct vg_task_pool *p, json_t *task)
{
    const char *want = jstr(json_object_get(task, "judgement"), "agent");
    json_t *tags = json_object_get(task, "tags");
    for (size_t i = 0; want && *want && i < p->n; i++)
        if (!strcmp(p->c[i].id, want) && (!tags || has_tags(&p->c[i], tags)))
            return i;
    return p->n;
}

/* Rules: an agent of the task's kind (any live agent when it names none) holding every tag of
 * the task, the least loaded (fewest wakes queued or running), then the first by id. When
 * several tie and a judge is configured, the task waits for the judge (p->deferred, its id in
 * p->judge) unless a judgement is recorded: then the judged agent, if it is still a candidate,
 * else the rules' first (a judge is asked once a task). *agent empty: none now. */
static vigil_code pick_agent(struct vg_env *env, struct vg_wake *w, struct vg_task_pool *p,
                             json_t *task, char agent[37], vigil_error *err)
{
    size_t best, tied, chosen;
    vigil_code rc = pool_for(env, w, p, task, err);
    agent[0] = '\0';
    if (rc)
        return rc;
    if (vg_task_triage_pending(task) && p->judge && env->task_judge_on &&
        env->task_judge_on(env->task_judge_user)) { /* the judge says first whether to retry */
        p->deferred = 1;
        return json_array_append_new(p->judge, json_string(jstr(task, "id")))
                   ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory picking an agent")
                   : VIGIL_OK;
    }
    rank(p, task, &best, &tied);
    p->selection = VG_TASK_SELECTION;
    if (best < p->n && (chosen = judged(p, task)) < p->n) {
        best = chosen;
        p->selection = VG_TASK_SELECTION_JUDGE;
    } else if (best < p->n && tied > 1 && p->judge && !json_object_get(task, "judgement") &&
               env->task_judge_on && env->task_judge_on(env->task_judge_user)) {
        p->deferred = 1;
        if (json_array_append_new(p->judge, json_string(jstr(task, "id"))))
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory picking an agent");
        return VIGIL_OK;
    }
    if (best < p->n)
        memcpy(agent, p->c[best].id, 37);
    return VIGIL_OK;
}

/* An agent that refused its wake (a lifecycle or kill switch changed since the pool was read)
 * gets no more tasks this round, and the pool is read again next round. */
static void pool_drop(struct vg_task_pool *p, const char *agent)
{
    p->rounds = VG_TASK_POOL_MAX_ROUNDS;
    p->held = 1;
    for (size_t j = 0; j < p->n; j++)
        if (!strcmp(p->c[j].id, agent)) {
            vg_free(p->c[j].tags);
            p->c[j] = p->c[--p->n];
            return;
        }
}

void vg_task_pool_charge(struct vg_task_pool *p, const char *agent, int delta)
{
    for (size_t j = 0; agent && j < p->n; j++)
        if (!strcmp(p->c[j].id, agent) && p->c[j].load + delta >= 0)
            p->c[j].load += delta;
}

/* The start's one write: the task's wake, under the run key of the task and its next attempt
 * (vg_task_run_key). The task is not written: it is running because that wake exists
 * (vg_task_derive_running), and is written when its run ends (PERF.md "Session 31"). A second
 * start of the same attempt (another dispatcher's, from a view that missed the first) finds
 * the key taken and writes nothing: ECONFLICT. An agent that takes no wakes now, or is not of
 * the task's kind any more, writes nothing either (refuse_quietly): *refused 1, ESTATE. In the
 * round's flat transaction (vg_store_begin_flat: no savepoint a task, PERF.md Session 27) any
 * failure rolls the whole round back; inside a caller's transaction the level is a savepoint. */
/* A retry's wake waits out the backoff its failed attempt set (task_ended); 0 otherwise. */
static int64_t retry_not_before(json_t *task, int64_t attempt)
{
    json_t *retry = json_object_get(task, "retry");
    if (!retry || vg_orch_jint(retry, "after_attempt") != attempt - 1)
        return 0;
    return vg_orch_jint(retry, "not_before_ms");
}

static vigil_code start_writes(struct vg_env *env, struct vg_wake *w, struct vg_task_graph *g,
                               json_t *task, const char *agent, char key[65], int *refused,
                               vigil_error *err)
{
    char session[128], turn[32], got[65], text[2200]; /* a title has at most 2000 bytes */
    const char *id = jstr(task, "id"), *kind = jstr(task, "kind");
    const char *title = jstr(task, "title") ? jstr(task, "title") : "";
    int64_t attempt = vg_orch_jint(task, "attempts") + 1;
    enum vg_enqueue_result res;
    size_t id_len = strlen(id), title_len = strlen(title);
    json_t *seed = NULL;
    /* "Task ID: TITLE", put together without snprintf. The id and the title are strings of a
     * parsed body, valid UTF-8 already, and so is the text joining them: not checked again. */
    if (5 + id_len + 2 + title_len < sizeof text) {
        memcpy(text, "Task ", 5);
        memcpy(text + 5, id, id_len);
        memcpy(text + 5 + id_len, ": ", 2);
        memcpy(text + 7 + id_len, title, title_len);
        seed = json_stringn_nocheck(text, 7 + id_len + title_len);
    } else {
        seed = json_sprintf("Task %s: %s", id, title);
    }
    size_t session_len = VG_MIN(id_len, sizeof session - 6); /* a task id has at most 100 */
    memcpy(session, "task:", 5);
    memcpy(session + 5, id, session_len);
    session[5 + session_len] = '\0';
    vg_task_attempt_turn(turn, attempt);
    vg_task_run_key(key, id, attempt);
    struct vg_wake_req r = {.reason = VG_REASON_USER,
                            .label = "task",
                            .agent_id = agent,
                            .session_id = session,
                            .turn_id = turn,
                            .seed_input = seed,
                            .kind = kind && *kind ? kind : NULL,
                            .refuse_quietly = 1,
                            .run_key = key,
                            .not_before_ms = retry_not_before(task, attempt)};
    vigil_code rc = seed ? vg_store_begin(env->store, err)
                         : VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting a task");
    if (rc)
        goto out;
    rc = vg_wake_enqueue(w, &r, got, &res, err);
    if (!rc && res == VG_ENQ_SKIPPED) { /* nothing written: the task stays ready */
        *refused = 1;
        rc = vg_store_end(env->store, VIGIL_OK, err);
        rc =
            rc ? rc : VG_FAIL(err, VIGIL_ESTATE, "agent %s refused the wake of task %s", agent, id);
        goto out;
    }
    if (!rc && res != VG_ENQ_NEW)
        rc = VG_FAIL(err, VIGIL_ECONFLICT, "task %s moved on (its attempt %lld was started)", id,
                     (long long)attempt);
    if (!rc && !g) /* no view: every view rebuilds and finds the wake */
        rc = vg_task_graph_changed(env, err);
    rc = vg_store_end(env->store, rc, err);
out:
    json_decref(seed);
    return rc;
}

/* A start another writer's move refused, its savepoint rolled back: the round goes on. In a
 * flat round the refusal rolled the whole round back: the caller hears of it (and retries). */
static int lost_race(struct vg_env *env, vigil_code rc)
{
    return (rc == VIGIL_ECONFLICT || rc == VIGIL_ESTATE) && !vg_store_flat(env->store);
}

/* Start a ready task (in the round's transaction, a savepoint of its own): node i of the view
 * g, or (g NULL) `task` as read from the store, with its "version". *started 1 when it did; 0
 * with no agent of its kind. */
static vigil_code start_task(struct vg_env *env, struct vg_wake *w, struct vg_task_pool *pool,
                             struct vg_task_graph *g, size_t i, json_t *task, int *started,
                             vigil_error *err)
{
    char agent[37], key[65];
    task = g ? g->node[i].body : task;
    int refused = 0;
    *started = 0;
    vigil_code rc = pick_agent(env, w, pool, task, agent, err);
    if (rc || !agent[0])
        return rc;
    rc = start_writes(env, w, g, task, agent, key, &refused, err);
    if (!rc && g)
        rc = vg_task_graph_started(g, i, agent, key, vg_orch_jint(task, "attempts") + 1,
                                   pool->selection, err);
    if (rc && g)
        g->valid = 0; /* rolled back: the view moved the task in memory */
    if (refused && rc == VIGIL_ESTATE) {
        pool_drop(pool, agent);
        return VIGIL_OK;
    }
    *started = !rc;
    if (*started)
        vg_task_pool_charge(pool, agent, 1);
    return rc;
}

/* Kahn's order over the stuck tasks: those it never reaches are in a cycle or behind one. */
static vigil_code fail_cycles(struct vg_env *env, vigil_error *err)
{
    json_t *pending = NULL, *t, *indeg = json_object();
    size_t i;
    vigil_code rc = vg_task_list(env, "pending", &pending, err);
    json_array_foreach (pending, i, t)
        json_object_set_new(indeg, jstr(t, "id"), json_integer(0));
    json_array_foreach (pending, i, t) {
        json_t *b;
        size_t j;
        json_array_foreach (json_object_get(t, "blocks"), j, b) {
            json_t *d = json_object_get(indeg, json_string_value(b));
            if (d)
                json_integer_set(d, json_integer_value(d) + 1);
        }
    }
    int moved = 1;
    while (moved) { /* peel the tasks nothing pending blocks */
        moved = 0;
        json_array_foreach (pending, i, t) {
            json_t *d = json_object_get(indeg, jstr(t, "id")), *b;
            size_t j;
            if (!d || json_integer_value(d) != 0)
                continue;
            json_object_del(indeg, jstr(t, "id"));
            moved = 1;
            json_array_foreach (json_object_get(t, "blocks"), j, b) {
                json_t *x = json_object_get(indeg, json_string_value(b));
                if (x)
                    json_integer_set(x, json_integer_value(x) - 1);
            }
        }
    }
    json_array_foreach (pending, i, t) {
        if (rc || !json_object_get(indeg, jstr(t, "id")))
            continue;
        json_t *p = json_pack("{s:s}", "reason", "a cycle in the task graph (found at run time)");
        rc = vg_task_transition(env, jstr(t, "id"), "pending", "failed", vg_orch_jint(t, "version"),
                                p, err);
        json_decref(p);
    }
    json_decref(pending);
    json_decref(indeg);
    return rc;
}

static vigil_code dispatch(struct vg_env *env, struct vg_wake *w, struct vg_task_graph *g,
                           int slots, int *started, json_t *judge, vigil_error *err);

/* One round: one transaction, so one commit however many tasks start, and flat: no savepoint
 * a task (a refused start writes nothing; any other failure fails the round). */
static vigil_code round_once(struct vg_env *env, struct vg_wake *w, int slots, int *started,
                             json_t *judge, vigil_error *err)
{
    struct vg_task_graph *g = NULL;
    vigil_code rc = vg_store_begin_flat(env->store, err);
    if (rc)
        return rc;
    if (!(rc = vg_task_graph_sync(env, &g, err)))
        rc = dispatch(env, w, g, slots, started, judge, err);
    if (!rc)
        rc = vg_task_graph_seal(env, g, err);
    if ((rc = vg_store_end(env->store, rc, err)))
        vg_task_graph_drop(env);
    return rc;
}

/* Rounds while tasks wait for the judge: each is asked outside the round's transaction (a
 * model call holds no lock), its answer recorded, and the next round follows it. Every task is
 * judged once, so the rounds end; the cap only bounds a round's work (what is left waits for
 * the next run's end or dispatch). */
static vigil_code rounds(struct vg_env *env, struct vg_wake *w, int slots, int *started,
                         json_t *judge, vigil_error *err)
{
    int n = 0, more = 0;
    vigil_code rc = VIGIL_OK;
    if (vg_store_in_tx(env->store)) /* inside a caller's transaction: its next round asks */
        return VIGIL_OK;
    for (int pass = 0; !rc && json_array_size(judge) && pass < VG_TASK_JUDGE_ROUNDS; pass++) {
        rc = vg_task_judge_deferred(env, w, judge, err);
        json_array_clear(judge);
        if (!rc)
            rc = round_once(env, w, slots, &more, judge, err);
        n += more;
    }
    if (started)
        *started += n;
    return rc;
}

static vigil_code dispatch_rounds(struct vg_env *env, struct vg_wake *w, int slots, int *started,
                                  vigil_error *err);

/* The dispatcher's cap record is its mark of having been started on this store: put (at the
 * default cap) by the first dispatch a person asks for, it tells a daemon to dispatch tasks
 * added later by itself (vg_task_dispatch_added). */
static vigil_code mark_started(struct vg_env *env, vigil_error *err)
{
    json_t *b = json_pack("{s:i}", "slots", VG_TASK_SLOTS_DEFAULT);
    vigil_code rc =
        b ? vg_env_put_json(env, "task_slots", "default", "", "", "", 0, b, VG_PUT_IF_ABSENT, err)
          : VG_FAIL(err, VIGIL_ENOMEM, "out of memory dispatching");
    json_decref(b);
    return rc;
}

static int found_cb(void *user, const struct vg_record *r)
{
    (void)r;
    *(int *)user = 1;
    return 1;
}

vigil_code vg_task_dispatch_added(struct vg_env *env, struct vg_wake *w, int64_t *seen,
                                  vigil_error *err)
{
    int64_t rev = 0;
    int outside = 0, started = 0;
    vigil_error miss = {0};
    vigil_code rc = vg_task_graph_stamp(env, &rev, &outside, err);
    if (rc || rev == *seen)
        return rc;
    *seen = rev;
    if (!outside) /* a dispatch round wrote it last: it filled the slots it could */
        return VIGIL_OK;
    rc = vg_error_unless_missing(
        err, &miss, vg_store_get(env->store, "task_slots", "default", found_cb, &started, &miss));
    if (rc == VIGIL_ENOTFOUND || (!rc && !started)) /* never dispatched: a graph being built */
        return VIGIL_OK;
    if (!rc)
        rc = dispatch_rounds(env, w, 0, NULL, err);
    if (rc == VIGIL_ECONFLICT) { /* another dispatcher started them first: look again */
        *seen = 0;
        return VIGIL_OK;
    }
    return rc;
}

vigil_code vg_task_dispatch(struct vg_env *env, struct vg_wake *w, int slots, int *started,
                            vigil_error *err)
{
    vigil_code rc = mark_started(env, err);
    return rc ? rc : dispatch_rounds(env, w, slots, started, err);
}

static vigil_code dispatch_rounds(struct vg_env *env, struct vg_wake *w, int slots, int *started,
                                  vigil_error *err)
{
    struct vg_wake own;
    json_t *judge = json_array();
    vigil_code rc = !judge ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory dispatching")
                    : w    ? VIGIL_OK
                           : vg_orch_wake_init(&own, env, err);
    if (!rc)
        rc = round_once(env, w ? w : &own, slots, started, judge, err);
    if (!rc)
        rc = rounds(env, w ? w : &own, slots, started, judge, err);
    if (!w && judge)
        vg_wake_release(&own);
    json_decref(judge);
    return rc;
}

/* The view again when a write outside it (a retry, a failure, a cycle) made it stale in this
 * transaction; its next stamp is then a fresh one. */
static vigil_code resync(struct vg_env *env, struct vg_task_graph **g, vigil_error *err)
{
    if ((*g)->valid)
        return VIGIL_OK;
    vigil_code rc = vg_task_graph_sync(env, g, err);
    (*g)->wrote = 1;
    return rc;
}

static int session_cb(void *user, const struct vg_record *r);

/* An open wake (queued or started) of a task's run: its key and its task (from its session). */
static int open_wake_cb(void *user, const struct vg_record *r)
{
    char task[101] = "";
    session_cb(task, r);
    return task[0] && json_array_append_new(user, json_pack("[s, s]", r->id, task)) ? 1 : 0;
}

/* Whether the task of an open wake is running by it and not stored so (task.c
 * vg_task_derive_running): its stored status pending or ready, its next attempt's key this. */
static vigil_code started_by(struct vg_env *env, json_t *pair, int *by, vigil_error *err)
{
    json_t *t = NULL;
    const char *key = json_string_value(json_array_get(pair, 0));
    vigil_code rc =
        vg_env_get_json(env, "task", json_string_value(json_array_get(pair, 1)), &t, NULL, err);
    const char *st = jstr(t, "status");
    *by = 0;
    if (!rc && st && strcmp(st, "running") && !(rc = vg_task_derive_running(env, t, err)))
        *by = !strcmp(jstr(t, "status"), "running") && !strcmp(jstr(t, "run_key"), key);
    json_decref(t);
    return rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc;
}

/* The running tasks without the view: those stored running, and those running by an open wake
 * (a wake closed before its task's end is recorded leaves the count: the slot is free again). */
static vigil_code running_tasks(struct vg_env *env, int *running, vigil_error *err)
{
    static const char *const open[] = {"queued", "started"};
    json_t *pairs = json_array(), *p;
    size_t i;
    vigil_code rc = pairs ? vg_orch_count(env, "task", NULL, "running", NULL, running, err)
                          : VG_FAIL(err, VIGIL_ENOMEM, "out of memory counting tasks");
    for (size_t k = 0; !rc && k < VG_ARRAY_LEN(open); k++) {
        struct vg_query q = {.kind = "wake_run", .k1 = open[k]};
        rc = vg_store_scan(env->store, &q, open_wake_cb, pairs, err);
    }
    json_array_foreach (pairs, i, p) {
        int by = 0;
        if (rc || (rc = started_by(env, p, &by, err)))
            break;
        *running += by;
    }
    json_decref(pairs);
    return rc;
}

/* The round without the view (graph.c declined to rebuild it yet): the running tasks counted
 * and the oldest ready ones read (the stored ready ones and the pending ones ready by
 * derivation, only as many as the free slots). */
static vigil_code dispatch_store(struct vg_env *env, struct vg_wake *w, int slots, int *started,
                                 json_t *judge, vigil_error *err)
{
    int running = 0, n = 0, cap = 0, pending = 0;
    json_t *ready = NULL;
    vigil_code rc = slots_of(env, slots, &cap, NULL, err);
    if (!rc)
        rc = running_tasks(env, &running, err);
    if (!rc)
        rc = vg_task_ready_oldest(env, running < cap ? (size_t)(cap - running) : 1, &ready, err);
    struct vg_task_pool pool = {.judge = judge}; /* this round's only: the view keeps none */
    for (size_t i = 0; !rc && !pool.deferred && i < json_array_size(ready) && running + n < cap;
         i++) {
        int one = 0;
        rc = start_task(env, w, &pool, NULL, 0, json_array_get(ready, i), &one, err);
        if (lost_race(env, rc)) /* another dispatcher took it */
            rc = VIGIL_OK;
        n += one;
    }
    if (!rc && !n && !running && !json_array_size(ready) &&
        !(rc = vg_orch_count(env, "task", NULL, "pending", NULL, &pending, err)) && pending)
        rc = fail_cycles(env, err);
    vg_task_pool_clear(&pool);
    json_decref(ready);
    if (started)
        *started = n;
    return rc;
}

/* Start the oldest ready tasks while slots are free; one with no agent of its kind stays
 * ready. When nothing is ready or running but tasks are pending, look for cycles. */
static vigil_code dispatch(struct vg_env *env, struct vg_wake *w, struct vg_task_graph *g,
                           int slots, int *started, json_t *judge, vigil_error *err)
{
    int n = 0;
    size_t i, *idle = NULL, nidle = 0;
    vigil_code rc = resync(env, &g, err);
    if (!rc && g->valid && slots > 0 && slots != g->slots)
        rc = slots_of(env, slots, &g->slots, g, err);
    if (!rc && g->valid && !g->slots)
        rc = slots_of(env, 0, &g->slots, NULL, err);
    if (!rc && !g->valid)
        return dispatch_store(env, w, slots, started, judge, err);
    g->pool.rounds++;
    g->pool.held = 0;
    g->pool.judge = judge;
    g->pool.deferred = 0;
    /* A task waiting for the judge stops the round, so no younger task takes its slot. */
    while (!rc && g->valid && !g->pool.deferred && g->running < g->slots &&
           vg_task_graph_pop_ready(g, &i)) {
        int one = 0;
        rc = start_task(env, w, &g->pool, g, i, NULL, &one, err);
        if (lost_race(env, rc)) /* another writer moved it */
            rc = VIGIL_OK;
        n += one;
        if (!rc && !one && g->valid) { /* no agent for it now: it stays ready */
            size_t *x = vg_realloc(idle, (nidle + 1) * sizeof *x);
            if (!x)
                rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory dispatching");
            else
                (idle = x)[nidle++] = i;
        }
    }
    for (size_t j = 0; !rc && g->valid && j < nidle; j++)
        rc = vg_task_graph_push_ready(g, idle[j], err);
    if (!rc && g->valid && !n && !g->running && !g->nheap && g->pending)
        rc = fail_cycles(env, err);
    g->pool.judge = NULL;
    vg_free(idle);
    if (started)
        *started = n;
    return rc;
}

/* ---- ends of runs -------------------------------------------------------------------------- */

/* {"result": the run's text, at most VG_TASK_RESULT_MAX bytes, cut where a character ends},
 * or NULL (out of memory). Built without
 * json_pack, whose format is parsed at every call. */
static json_t *result_patch(const char *text)
{
    size_t len = strlen(text);
    json_t *p = json_object(), *r = json_stringn(text, vg_utf8_cut(text, len, VG_TASK_RESULT_MAX));
    if (!p || !r || json_object_set_new(p, "result", r)) { /* a set that fails frees r */
        json_decref(p);
        if (!p)
            json_decref(r);
        return NULL;
    }
    return p;
}

/* The wait before a failed task's next attempt (trial L10: retries back to back spent all of
 * them on a model outage of a second): VG_TASK_RETRY_BASE_MS doubled each attempt up to
 * VG_TASK_RETRY_MAX_MS, of which the second half is jitter drawn from the task's id and attempt
 * (tasks failed together by one outage do not all come back at one instant; the same task's
 * wait is the same on every process, so a re-recorded end writes the same). */
int64_t vg_task_retry_backoff_ms(const char *task_id, int64_t attempt)
{
    int64_t delay = VG_TASK_RETRY_BASE_MS;
    for (int64_t i = 1; i < attempt && delay < VG_TASK_RETRY_MAX_MS; i++)
        delay *= 2;
    delay = VG_MIN(delay, VG_TASK_RETRY_MAX_MS);
    char n[24], hex[VG_SHA256_HEX_LEN + 1];
    snprintf(n, sizeof n, "%lld", (long long)attempt);
    const char *parts[] = {task_id ? task_id : "", n};
    vg_sha256_hex_parts(hex, parts, 2);
    hex[8] = '\0'; /* 32 bits of it are plenty */
    uint64_t draw = strtoull(hex, NULL, 16);
    return delay / 2 + (int64_t)(draw % (uint64_t)(delay / 2 + 1));
}

/* A failed attempt's retry, kept in the task: when its next attempt may start (its wake waits
 * until then), how long that is, and the failure it follows. */
static int retry_patch(struct vg_env *env, json_t *p, json_t *t, const char *text)
{
    int64_t attempt = vg_orch_jint(t, "attempts");
    int64_t backoff = vg_task_retry_backoff_ms(jstr(t, "id"), attempt);
    size_t n = strlen(text);
    return json_object_set_new(p, "retry",
                               json_pack("{s:I, s:I, s:I, s:s%}", "after_attempt",
                                         (json_int_t)attempt, "backoff_ms", (json_int_t)backoff,
                                         "not_before_ms", (json_int_t)(vg_env_now(env) + backoff),
                                         "error", text, vg_utf8_cut(text, n, 500)));
}

static vigil_code task_ended(struct vg_env *env, json_t *t, int64_t v,
                             const struct vg_orch_outcome *o, vigil_error *err)
{
    const char *id = jstr(t, "id");
    const char *text = o->text ? o->text : "";
    json_t *p = result_patch(text);
    vigil_code rc;
    if (!p)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory finishing a task");
    if (!strcmp(o->status, "completed") && o->in_doubt) { /* not done until settled */
        rc = vg_task_hold_in_doubt(env, t, v, p, o->in_doubt, err);
    } else if (!strcmp(o->status, "completed")) {
        /* t was read in this transaction; what it blocks is ready by derivation now */
        rc = vg_task_move(env, t, v, "done", p, err);
    } else if (!strcmp(o->status, "cancelled")) { /* a person stopped it: no retry */
        json_object_set_new(p, "reason", json_string("its run was cancelled by a person"));
        rc = vg_task_transition(env, id, "running", "cancelled", v, p, err);
        if (!rc)
            rc = vg_task_after_failed(env, id, "a task it waits for was cancelled", err);
    } else if (vg_orch_jint(t, "attempts") <= VG_TASK_MAX_RETRIES) {
        /* a retry after its backoff, which a configured judge may call off first (judge.c:
         * triage) */
        if (retry_patch(env, p, t, text))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory finishing a task");
        else if (env->task_judge_on && env->task_judge_on(env->task_judge_user) &&
                 json_object_set_new(p, "triage",
                                     json_pack("{s:b, s:I, s:s%, s:s}", "pending", 1, "attempt",
                                               (json_int_t)vg_orch_jint(t, "attempts"), "error",
                                               text, vg_utf8_cut(text, strlen(text), 500), "agent",
                                               jstr(t, "agent") ? jstr(t, "agent") : "")))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory finishing a task");
        else
            rc = vg_task_transition(env, id, "running", "ready", v, p, err);
    } else {
        rc = vg_task_transition(env, id, "running", "failed", v, p, err);
        if (!rc)
            rc = vg_task_after_failed(env, id, "a task it waits for failed", err);
    }
    json_decref(p);
    return rc;
}

/* The task a run worked on: a re-run's task_run record's k1 column (the body is not parsed). */
static int link_cb(void *user, const struct vg_record *r)
{
    snprintf(user, 101, "%s", r->k1);
    return 1;
}

/* A dispatched run's session is "task:ID" (start_task): its wake record's session_id, read
 * without building a tree (jansson reads it when the scanner declines). */
static void session_task(const char *session, char task[101])
{
    if (session && !strncmp(session, "task:", 5) && strlen(session + 5) < 101)
        snprintf(task, 101, "%s", session + 5);
}

static int session_cb(void *user, const struct vg_record *r)
{
    struct vg_jscan s;
    struct vg_buf b;
    const char *k;
    size_t len, at = 0;
    int more = -1, scanned = 0; /* more: -1 until the object is entered */
    vg_buf_init(&b, 4096);
    vg_jscan_init(&s, r->body, strlen(r->body));
    if (vg_jscan_enter(&s, '{') == 0)
        while ((more = vg_jscan_next(&s, &k, &len)) == 1 && !vg_jscan_key_is(k, len, "session_id"))
            if (vg_jscan_skip(&s) < 0)
                break;
    if (more == 1 && vg_jscan_peek(&s) == 'n') /* session_id: null */
        scanned = 1;
    else if (more == 1 && vg_jscan_string(&s, &b, &at) >= 0 && !b.fail) {
        session_task(b.data + at, user);
        scanned = 1;
    } else if (more == 0) /* no session_id */
        scanned = 1;
    if (!scanned) { /* the scanner declined */
        json_t *run = json_loads(r->body, 0, NULL);
        session_task(jstr(run, "session_id"), user);
        json_decref(run);
    }
    vg_buf_release(&b);
    return 1;
}

/* task[0] is 0 when the run was not a task's. A dispatched run has no link of its own (its
 * wake names the task); a re-run of one has (vg_task_run_replaced). */
static vigil_code task_of_run(struct vg_env *env, const char *run_key, char task[101],
                              vigil_error *err)
{
    task[0] = '\0';
    vigil_error miss = {0};
    vigil_code rc = vg_store_get(env->store, "task_run", run_key, link_cb, task, &miss);
    if (rc == VIGIL_ENOTFOUND)
        rc = vg_store_get(env->store, "wake_run", run_key, session_cb, task, &miss);
    rc = vg_error_unless_missing(err, &miss, rc);
    return rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc;
}

vigil_code vg_task_of_run(struct vg_env *env, const char *run_key, char id[101], vigil_error *err)
{
    return task_of_run(env, run_key, id, err);
}

/* One run's end, in the caller's transaction: its task moves on, and what that unblocks. */
static vigil_code end_one(struct vg_env *env, const char *task_id, const char *run_key,
                          const struct vg_orch_outcome *o, vigil_error *err)
{
    json_t *t = NULL;
    int64_t v = 0;
    vigil_code rc = vg_task_get(env, task_id, &t, &v, err);
    /* Only the run the task is waiting for moves it: an old attempt's end changes nothing. */
    if (!rc && !strcmp(jstr(t, "status"), "running") && jstr(t, "run_key") &&
        !strcmp(jstr(t, "run_key"), run_key))
        rc = task_ended(env, t, v, o, err);
    json_decref(t);
    return rc;
}

/* One run's end (its task task_id), in the caller's transaction. A completed run of a task
 * the view holds as running under it moves through the view; any other end goes through the
 * store, and the view is rebuilt after it. */
static vigil_code end_run(struct vg_env *env, struct vg_task_graph **g, const char *task_id,
                          const struct vg_task_end *e, vigil_error *err)
{
    size_t i;
    const char *text = e->outcome->text ? e->outcome->text : "";
    vigil_code rc = resync(env, g, err);
    if (rc || !(*g)->valid || !vg_task_graph_find_run(*g, e->run_key, &i) ||
        strcmp(e->outcome->status, "completed") || e->outcome->in_doubt)
        return rc ? rc : end_one(env, task_id, e->run_key, e->outcome, err);
    vg_task_pool_charge(&(*g)->pool, jstr((*g)->node[i].body, "agent"), -1); /* wake over */
    return vg_task_graph_done(env, *g, i, e->run_key, text, err);
}

/* Whether the end's wake is finished in its transaction (vg_orch_outcome.job): not when an
 * earlier try finished it already (its batch committed, then its next round failed). */
static int finishes_wake(const struct vg_task_end *e)
{
    const struct vg_orch_outcome *o = e->outcome;
    return o->job && o->job->wake && o->finished && !*o->finished &&
           !strcmp(o->status, "completed");
}

/* The wakes of the task runs whose ends carry them, finished (completed) in the ends'
 * transaction: a commit less a task, and the end is written only while the run holds its
 * agent's lease (the finish checks it), so a run presumed dead records no end its successor
 * will also record. */
static vigil_code finish_wakes(const struct vg_task_end *ends, size_t n, char (*tasks)[101],
                               vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    for (size_t i = 0; !rc && i < n; i++)
        if (tasks[i][0] && finishes_wake(&ends[i]))
            rc = vg_wake_finish(ends[i].outcome->job->wake, ends[i].outcome->job, VG_WAKE_COMPLETED,
                                NULL, err);
    return rc;
}

static vigil_code runs_ended(struct vg_env *env, struct vg_wake *w, const struct vg_task_end *ends,
                             size_t n, size_t *recorded, vigil_error *err)
{
    char(*tasks)[101] = n ? vg_calloc(n, sizeof *tasks) : NULL;
    json_t *judge = json_array();
    size_t found = 0;
    struct vg_task_graph *g = NULL;
    struct vg_wake own;
    int owned = 0;
    vigil_code rc = (n && !tasks) || !judge
                        ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory ending runs")
                        : VIGIL_OK;
    for (size_t i = 0; !rc && i < n; i++) {
        vg_task_graph_task_of_run(env, ends[i].run_key, tasks[i]); /* no read when it knows */
        if (tasks[i][0] || !(rc = task_of_run(env, ends[i].run_key, tasks[i], err)))
            found += tasks[i][0] != '\0';
    }
    if (!rc && found && !w && !(rc = vg_orch_wake_init(&own, env, err)))
        owned = 1;
    /* The tasks' ends, their wakes' finishes, what they unblock and the refilled slots: one
     * transaction, whose notifications are wake bookkeeping when it finishes wakes (as the
     * finish's own transaction's are: they wake nobody). */
    const char *source = env->notify.source;
    int finishing = 0;
    for (size_t i = 0; i < n; i++)
        finishing |= tasks && tasks[i][0] && finishes_wake(&ends[i]);
    if (!rc && found && !(rc = vg_store_begin_flat(env->store, err))) {
        if (finishing && vg_store_depth(env->store) == 1)
            env->notify.source = VG_WAKE_SOURCE_SELF;
        /* the leases first: a run's fenced write takes its lease before the stamp too */
        rc = finishing ? finish_wakes(ends, n, tasks, err) : VIGIL_OK;
        if (!rc)
            rc = vg_task_graph_sync(env, &g, err);
        for (size_t i = 0; !rc && i < n; i++)
            if (tasks[i][0])
                rc = end_run(env, &g, tasks[i], &ends[i], err);
        if (!rc)
            rc = dispatch(env, owned ? &own : w, g, 0, NULL, judge, err);
        if (!rc)
            rc = vg_task_graph_seal(env, g, err);
        if ((rc = vg_store_end(env->store, rc, err)))
            vg_task_graph_drop(env);
        else
            *recorded = found;
        env->notify.source = source;
        for (size_t i = 0; !rc && finishing && i < n; i++)
            if (tasks[i][0] && finishes_wake(&ends[i]))
                *ends[i].outcome->finished = 1;
    }
    if (!rc)
        rc = rounds(env, owned ? &own : w, 0, NULL, judge, err);
    if (owned)
        vg_wake_release(&own);
    json_decref(judge);
    vg_free(tasks);
    return rc;
}

/* Metered for /metrics (docs/http.md): the call's CPU on its own thread and fiber, and the
 * ends it committed, so an operator reads the dispatcher's CPU a task and how many ends a call
 * carried. */
vigil_code vg_task_runs_ended(struct vg_env *env, struct vg_wake *w, const struct vg_task_end *ends,
                              size_t n, vigil_error *err)
{
    struct vg_fiber_cpu meter;
    size_t recorded = 0;
    vg_fiber_cpu_begin(&meter);
    vigil_code rc = runs_ended(env, w, ends, n, &recorded, err);
    vg_stats_dispatcher_call(vg_fiber_cpu_end(&meter), recorded);
    return rc;
}

/* ---- ends gathered from fibers ------------------------------------------------------------ */

/*
 * The runs of one thread's fibers (a daemon worker's) that end in the same round of its
 * scheduler are recorded by one vg_task_runs_ended: one transaction and one dispatch round for
 * all of them, as if they had been handed over together. Each run adds its end here and joins
 * the batch (os/fiber.h), whose first joiner lets the other ready fibers run (and join) before
 * it records the lot. Off a fiber, or where the fibers may not park (a serial model), an end is
 * recorded at once, alone, as before.
 */
struct gathered_end {
    struct vg_task_end end;
    struct vg_wake *w;
    vigil_code rc; /* its own answer: a batch that fails is recorded again one end at a time */
    vigil_error err;
};

struct ends_gathered {
    struct vg_fiber_batch *batch;
    struct vg_env *env;
    struct gathered_end **list; /* each on its joiner's stack, which waits in the batch */
    size_t n, cap;
};

static void ends_free(void *p)
{
    struct ends_gathered *g = p;
    if (!g)
        return;
    vg_fiber_batch_free(g->batch);
    vg_free(g->list);
    vg_free(g);
}

/* The batch's operation. A failed transaction kept nothing of any end, so each is then
 * recorded alone: one run's bad end fails that run only. */
static vigil_code ends_record(void *user, vigil_error *err)
{
    struct ends_gathered *g = user;
    struct gathered_end **list = g->list;
    size_t n = g->n;
    struct vg_task_end *ends = vg_calloc(n ? n : 1, sizeof *ends);
    struct vg_wake *w = NULL;
    vigil_error e = {0};
    /* Ends that join while these are recorded (a commit may wait for its shared round) make a
     * list of their own. */
    g->list = NULL;
    g->n = g->cap = 0;
    for (size_t i = 0; ends && i < n; i++) {
        ends[i] = list[i]->end;
        w = w ? w : list[i]->w;
    }
    /* one end alone is recorded below, as is each of a batch that failed */
    int together = ends && n > 1 && !vg_task_runs_ended(g->env, w, ends, n, &e);
    for (size_t i = 0; i < n; i++)
        list[i]->rc = together
                          ? VIGIL_OK
                          : vg_task_runs_ended(g->env, list[i]->w, &list[i]->end, 1, &list[i]->err);
    vg_free(ends);
    vg_free(list);
    (void)err;
    return VIGIL_OK;
}

/* The env's gathering (made at first use), with room for one more end. */
static vigil_code ends_gathered(struct vg_env *env, struct ends_gathered **out, vigil_error *err)
{
    struct ends_gathered *g = env->task_ends;
    if (!g) {
        vigil_code rc = VIGIL_OK;
        if (!(g = vg_calloc(1, sizeof *g)))
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory gathering the ends of runs");
        if ((rc = vg_fiber_batch_new(&g->batch, ends_record, g, err))) {
            vg_free(g);
            return rc;
        }
        g->env = env;
        env->task_ends = g;
        env->task_ends_free = ends_free;
    }
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 8;
        struct gathered_end **l = vg_realloc(g->list, cap * sizeof *l);
        if (!l)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory gathering the ends of runs");
        g->list = l;
        g->cap = cap;
    }
    *out = g;
    return VIGIL_OK;
}

vigil_code vg_task_run_ended(struct vg_env *env, struct vg_wake *w, const char *run_key,
                             const struct vg_orch_outcome *o, vigil_error *err)
{
    struct gathered_end me = {.end = {run_key, o}, .w = w};
    struct ends_gathered *g = NULL;
    if (!vg_fiber_can_park())
        return vg_task_runs_ended(env, w, &me.end, 1, err);
    vigil_code rc = ends_gathered(env, &g, err);
    if (rc)
        return rc;
    g->list[g->n++] = &me;
    if ((rc = vg_fiber_batch_join(g->batch, err)))
        return rc;
    if (me.rc)
        vg_error_copy(err, &me.err);
    return me.rc;
}

static int ended_status(const char *status)
{
    return status &&
           (!strcmp(status, "done") || !strcmp(status, "failed") || !strcmp(status, "cancelled"));
}

vigil_code vg_task_run_replaced(struct vg_env *env, const char *old_key, const char *new_key,
                                const char *agent, vigil_error *err)
{
    json_t *link = NULL, *t = NULL, *patch = NULL;
    int64_t v = 0;
    char id[101];
    vigil_code rc = task_of_run(env, old_key, id, err);
    if (rc || !id[0])
        return rc;
    if (!(link = json_pack("{s:s}", "task", id)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory re-running a task's run");
    /* the stamp before the task (graph.c), as every task writer takes them */
    rc = vg_task_graph_lock(env, err);
    if (!rc)
        rc = vg_env_put_json(env, "task_run", new_key, agent, id, "", vg_env_now(env), link,
                             VG_PUT_IF_ABSENT, err);
    if (!rc)
        rc = vg_task_get(env, id, &t, &v, err);
    /* A task that has ended stays ended (its dependents went on or were cancelled with it): a
     * re-run that would change nothing is refused, saying how to redo it (trial L7). */
    if (!rc && ended_status(jstr(t, "status")))
        rc = VG_FAIL(err, VIGIL_ESTATE,
                     "run %.16s is the run of task %s, which has ended (%s): a re-run would not "
                     "reopen it or what it blocks; add the task again with `vigil task add "
                     "--title ...` (POST /v1/tasks)",
                     old_key, id, jstr(t, "status"));
    if (!rc && !strcmp(jstr(t, "status"), "running") && jstr(t, "run_key") &&
        !strcmp(jstr(t, "run_key"), old_key)) {
        if (!(patch = json_pack("{s:s}", "run_key", new_key)))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory re-running a task's run");
        else
            rc = vg_task_transition(env, id, "running", "running", v, patch, err);
    }
    json_decref(patch);
    json_decref(t);
    json_decref(link);
    return rc;
}
