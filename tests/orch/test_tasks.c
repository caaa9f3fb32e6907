/*
 * test_tasks.c: the task graph and its dispatcher, with the scripted model answering every
 * task's run at once (no cassette: its labelled echo).
 */
#include "helpers/pg_env.h"
#include "helpers/rt.h"
#include "helpers/fault_store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "agent/agent.h"
#include "base/hash.h"
#include "base/stats.h"
#include "orch/orch_int.h"
#include "orch/task.h"
#include "os/fiber.h"
#include "runtime/runtime.h"
#include "runtime/wake_runner.h"
#include "store/store.h"
#include "wake/wake.h"

static const char *jstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static void add(struct test_rt *t, const char *title, const char *const *blocks, size_t n,
                char id[37])
{
    ASSERT_OK(vigil_task_add(t->rt, title, "worker", blocks, n, id, E));
}

static const char *status(struct test_rt *t, const char *id)
{
    static char st[16];
    json_t *v = NULL;
    ASSERT_OK(vg_task_get(t->env, id, &v, NULL, E));
    snprintf(st, sizeof st, "%s", jstr(v, "status"));
    json_decref(v);
    return st;
}

/* proves: S2-035 */
TEST(an_edge_that_would_close_a_cycle_is_refused_and_writes_nothing)
{
    struct test_rt t;
    char a[37], b[37], c[37];
    test_rt_open(&t, "task_cycle");
    add(&t, "a", NULL, 0, a);
    add(&t, "b", NULL, 0, b);
    add(&t, "c", NULL, 0, c);
    ASSERT_OK(vigil_task_block(t.rt, a, b, E));
    ASSERT_OK(vigil_task_block(t.rt, b, c, E));
    ASSERT_STREQ(status(&t, c), "pending");
    json_t *before = NULL, *after = NULL;
    ASSERT_OK(vg_task_list(t.env, NULL, &before, E));
    ASSERT_CODE(VIGIL_EINVAL, vigil_task_block(t.rt, c, a, NULL));
    ASSERT_CODE(VIGIL_EINVAL, vigil_task_block(t.rt, a, a, NULL));
    ASSERT_OK(vg_task_list(t.env, NULL, &after, E));
    ASSERT(json_equal(before, after)); /* same bodies, same versions */
    json_decref(before);
    json_decref(after);
    test_rt_close(&t);
}

/* A cycle that got into the store anyway (written by hand here, as an old or imported graph
 * could hold one) is found when the dispatcher has nothing else to do. */
/* proves: S2-035 */
TEST(a_cycle_already_stored_is_detected_at_run_time)
{
    struct test_rt t;
    char a[37], b[37], w[37];
    test_rt_open(&t, "task_cycle_run");
    vigil_agent_spec s = {.name = "w", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w, E));
    add(&t, "a", NULL, 0, a);
    const char *blocks[] = {a};
    add(&t, "b", blocks, 1, b);
    json_t *tb = NULL;
    int64_t v = 0;
    ASSERT_OK(vg_task_get(t.env, b, &tb, &v, E));
    json_array_append_new(json_object_get(tb, "blocked_by"), json_string(a));
    json_object_set_new(tb, "status", json_string("pending"));
    json_object_del(tb, "version");
    ASSERT_OK(vg_env_update_json(t.env, "task", b, "", "pending", "worker", 0, tb, v, E));
    json_t *ta = NULL;
    ASSERT_OK(vg_task_get(t.env, a, &ta, &v, E));
    json_array_append_new(json_object_get(ta, "blocks"), json_string(b));
    json_object_set_new(ta, "status", json_string("pending"));
    json_object_del(ta, "version");
    ASSERT_OK(vg_env_update_json(t.env, "task", a, "", "pending", "worker", 0, ta, v, E));
    json_decref(ta);
    json_decref(tb);
    int started = -1;
    ASSERT_OK(vigil_task_dispatch(t.rt, 2, &started, E));
    ASSERT_EQ(started, 0);
    ASSERT_STREQ(status(&t, a), "failed");
    ASSERT_STREQ(status(&t, b), "failed");
    test_rt_close(&t);
}

/* Every running task's blockers are done. */
static void check_order(struct test_rt *t, int cap)
{
    json_t *running = NULL, *r, *b;
    size_t i, j;
    ASSERT_OK(vg_task_list(t->env, "running", &running, E));
    ASSERT((int)json_array_size(running) <= cap);
    json_array_foreach (running, i, r) {
        json_array_foreach (json_object_get(r, "blocked_by"), j, b)
            ASSERT_STREQ(status(t, json_string_value(b)), "done");
    }
    json_decref(running);
}

/* With no judge model, the dispatcher's code alone does every mechanical step: it walks the
 * DAG, keeps to its slots, dispatches, and follows each run to its end to start what it
 * unblocks.
 * proves: S2-030 S2-031 S2-034 S2-037 */
TEST(a_dag_of_1000_tasks_with_diamonds_runs_in_dependency_order_within_its_slots)
{
    enum { N = 1000, SLOTS = 3 };
    struct test_rt t;
    static char id[N][37];
    test_rt_open(&t, "task_dag");
    for (int i = 0; i < 3; i++) {
        char name[8], a[37];
        snprintf(name, sizeof name, "w%d", i);
        vigil_agent_spec s = {.name = name, .kind = "worker"};
        ASSERT_OK(vigil_agent_create(t.rt, &s, a, E));
    }
    /* Task i waits for (i-1)/2 and i/3: each pair of them closes a diamond upstream. */
    for (int i = 0; i < N; i++) {
        char title[32];
        snprintf(title, sizeof title, "t%d", i);
        add(&t, title, NULL, 0, id[i]);
        if (i >= 1)
            ASSERT_OK(vigil_task_block(t.rt, id[(i - 1) / 2], id[i], E));
        if (i >= 2 && i / 3 != (i - 1) / 2)
            ASSERT_OK(vigil_task_block(t.rt, id[i / 3], id[i], E));
    }
    test_rt_reopen(&t); /* the graph survives a restart */
    struct vg_wake w;
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    int started = 0, ran = 0, runs = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, SLOTS, &started, E));
    ASSERT_EQ(started, 1); /* only the root is ready */
    do {
        check_order(&t, SLOTS);
        ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
        runs += ran;
    } while (ran);
    ASSERT_EQ(runs, N);
    json_t *done = NULL;
    ASSERT_OK(vg_task_list(t.env, "done", &done, E));
    ASSERT_EQ(json_array_size(done), N);
    ASSERT_EQ(json_integer_value(json_object_get(json_array_get(done, 0), "attempts")), 1);
    json_decref(done);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* proves: S2-036 */
TEST(two_dispatchers_racing_on_one_task_start_it_once)
{
    struct test_rt t;
    char a[37], w[37];
    test_rt_open(&t, "task_race");
    vigil_agent_spec s = {.name = "w", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w, E));
    add(&t, "a", NULL, 0, a);
    json_t *seen = NULL;
    int64_t v = 0;
    ASSERT_OK(vg_task_get(t.env, a, &seen, &v, E)); /* the second dispatcher reads it */
    /* A second process on the same store dispatches first. */
    vigil_runtime *other = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t.path};
    ASSERT_OK(vigil_runtime_open(&o, &other, E));
    int started = 0;
    ASSERT_OK(vigil_task_dispatch(other, 2, &started, E));
    ASSERT_EQ(started, 1);
    vigil_runtime_close(other);
    /* The one that read it before: its move from the status it read is refused (the task
     * reads running: its wake is there), and its start's wake, keyed by the task and its
     * attempt whichever agent it picked, is a duplicate that writes nothing. */
    ASSERT_CODE(VIGIL_ESTATE, vg_task_transition(t.env, a, "ready", "running", v, NULL, NULL));
    char key[65], got[65], session[64];
    vg_task_run_key(key, a, 1);
    snprintf(session, sizeof session, "task:%s", a);
    struct vg_wake wk;
    enum vg_enqueue_result res;
    struct vg_wake_req r = {.reason = VG_REASON_USER,
                            .label = "task",
                            .agent_id = w,
                            .session_id = session,
                            .turn_id = "attempt-1",
                            .run_key = key};
    ASSERT_OK(vg_wake_init(&wk, t.env, NULL, E));
    ASSERT_OK(vg_wake_enqueue(&wk, &r, got, &res, E));
    ASSERT_EQ(res, VG_ENQ_DUPLICATE);
    vg_wake_release(&wk);
    ASSERT_OK(vigil_task_dispatch(t.rt, 2, &started, E));
    ASSERT_EQ(started, 0);
    struct vg_query q = {.kind = "wake_run"};
    int64_t n = 0;
    ASSERT_OK(vg_store_count(t.env->store, &q, &n, E));
    ASSERT_EQ(n, 1);
    json_decref(seen);
    test_rt_close(&t);
}

TEST(cancelling_a_task_cancels_what_it_blocks_and_nothing_of_it_starts)
{
    struct test_rt t;
    char a[37], b[37], c[37], w[37];
    test_rt_open(&t, "task_cancel");
    vigil_agent_spec s = {.name = "w", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w, E));
    add(&t, "a", NULL, 0, a);
    add(&t, "b", NULL, 0, b);
    const char *bl[] = {b};
    add(&t, "c", bl, 1, c);
    ASSERT_OK(vigil_task_block(t.rt, a, b, E));
    ASSERT_OK(vigil_task_cancel(t.rt, a, E));
    ASSERT_STREQ(status(&t, b), "cancelled");
    ASSERT_STREQ(status(&t, a), "cancelled");
    ASSERT_CODE(VIGIL_ESTATE, vigil_task_cancel(t.rt, a, NULL));
    int started = -1;
    ASSERT_OK(vigil_task_dispatch(t.rt, 4, &started, E));
    ASSERT_EQ(started, 1); /* c alone: it blocks b, nothing blocks it */
    ASSERT_STREQ(status(&t, c), "running");
    /* The counts by stored status (pending, ready, running, done, failed, cancelled) that the
     * daemon's event poller reads instead of the list: a and b cancelled, c running by its
     * wake (stored ready until its run ends). */
    int64_t n[VIGIL_TASK_STATUSES] = {-1, -1, -1, -1, -1, -1, -1};
    ASSERT_OK(vigil_task_counts(t.rt, n, E));
    ASSERT(n[0] == 0 && n[1] == 1 && n[2] == 1 && n[3] == 0 && n[4] == 0 && n[5] == 2 && n[6] == 0);
    test_rt_close(&t);
}

/* Cancelling a running task stops its run (trial L1: the run went on, calling tools and the
 * model for a task already cancelled): a queued run never starts, one under way is asked to
 * stop, as `vigil runs cancel` asks it; the task stays cancelled, with what it blocks. */
static void run_key_of(struct test_rt *t, const char *id, char key[65]);

TEST(cancelling_a_running_task_stops_its_run)
{
    struct test_rt t;
    char a[37], b[37], c[37], w[37], key[65];
    test_rt_open(&t, "task_cancel_running");
    vigil_agent_spec s = {.name = "w", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w, E));
    add(&t, "a", NULL, 0, a);
    add(&t, "b", NULL, 0, b);
    add(&t, "c", NULL, 0, c);
    ASSERT_OK(vigil_task_block(t.rt, a, c, E));
    int started = 0, ran = -1, got = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, &started, E));
    ASSERT_EQ(started, 1);
    ASSERT_STREQ(status(&t, a), "running"); /* its wake queued */
    ASSERT_OK(vigil_task_cancel(t.rt, a, E));
    ASSERT_STREQ(status(&t, a), "cancelled");
    ASSERT_STREQ(status(&t, c), "cancelled");
    ASSERT_STREQ(status(&t, b), "running"); /* the freed slot */
    run_key_of(&t, b, key);
    struct vg_wake wk;
    struct vg_wake_job job;
    memset(&job, 0, sizeof job);
    ASSERT_OK(vg_wake_init(&wk, t.env, NULL, E));
    ASSERT_OK(vg_wake_claim(&wk, &job, &got, E)); /* b's run, under way */
    ASSERT_EQ(got, 1);
    ASSERT_STREQ(job.run_key, key);
    ASSERT_EQ(vg_run_cancel_requested(t.env, key, NULL, 0), 0);
    ASSERT_OK(vigil_task_cancel(t.rt, b, E));
    ASSERT_EQ(vg_run_cancel_requested(t.env, key, NULL, 0), 1);
    ASSERT_STREQ(status(&t, b), "cancelled");
    ASSERT_OK(vg_wake_finish(&wk, &job, VG_WAKE_COMPLETED, NULL, E));
    vg_wake_job_release(&job);
    ASSERT_OK(vg_wake_drain(&wk, vg_wake_runner_loop(), 4, &ran, E));
    ASSERT_EQ(ran, 0); /* a's queued run never started */
    vg_wake_release(&wk);
    test_rt_close(&t);
}

/* The counts are kept between calls while nothing they count changed (the daemon's event poller
 * asks every poll): each change, by this runtime or by another process on the store, shows at
 * the next call all the same. */
TEST(task_counts_follow_every_writer_while_kept_between_calls)
{
    struct test_rt t;
    char a[37], b[37], w[37];
    int64_t n[VIGIL_TASK_STATUSES];
    test_rt_open(&t, "task_counts");
    vigil_agent_spec s = {.name = "w", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w, E));
    add(&t, "a", NULL, 0, a);
    ASSERT_OK(vigil_task_counts(t.rt, n, E));
    ASSERT(n[1] == 1 && n[2] == 0);
    ASSERT_OK(vigil_task_counts(t.rt, n, E)); /* nothing changed: the same */
    ASSERT(n[1] == 1 && n[2] == 0);
    add(&t, "b", NULL, 0, b); /* this runtime's own write */
    ASSERT_OK(vigil_task_counts(t.rt, n, E));
    ASSERT(n[1] == 2 && n[5] == 0);
    vigil_runtime *other = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t.path};
    ASSERT_OK(vigil_runtime_open(&o, &other, E));
    ASSERT_OK(vigil_task_cancel(other, b, E)); /* another process's */
    ASSERT_OK(vigil_task_counts(t.rt, n, E));
    ASSERT(n[1] == 1 && n[5] == 1);
    int started = 0;
    /* a started by its wake alone: stored ready still, and counted running by the wake */
    ASSERT_OK(vigil_task_dispatch(other, 2, &started, E));
    ASSERT_EQ(started, 1);
    vigil_runtime_close(other);
    ASSERT_OK(vigil_task_counts(t.rt, n, E));
    ASSERT(n[0] == 0 && n[1] == 1 && n[2] == 1 && n[5] == 1);
    test_rt_close(&t);
}

/* A person cancelling a task's queued run ends the task (cancelled, with what it blocks) and
 * frees its slot: the next ready task starts. A re-run of a run the task still waits for
 * takes its place, and its end settles the task. */
TEST(cancelling_a_tasks_run_ends_the_task_and_frees_its_slot)
{
    struct test_rt t;
    char a[37], b[37], c[37], w[37], rerun[65], key[65];
    test_rt_open(&t, "task_run_cancel");
    vigil_agent_spec s = {.name = "w", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w, E));
    add(&t, "a", NULL, 0, a);
    add(&t, "b", NULL, 0, b);
    add(&t, "c", NULL, 0, c);
    ASSERT_OK(vigil_task_block(t.rt, a, c, E));
    int started = 0, queued = 0, ran = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, &started, E));
    ASSERT_EQ(started, 1);
    json_t *ta = NULL;
    ASSERT_OK(vg_task_get(t.env, a, &ta, NULL, E));
    snprintf(key, sizeof key, "%s", jstr(ta, "run_key"));
    json_decref(ta);
    ASSERT_OK(vigil_run_cancel(t.rt, key, NULL, &queued, E));
    ASSERT_EQ(queued, 1);
    ASSERT_STREQ(status(&t, a), "cancelled");
    ASSERT_STREQ(status(&t, c), "cancelled"); /* it waited for a */
    ASSERT_STREQ(status(&t, b), "running");   /* the freed slot is filled */
    /* b's run is re-run before it ran: the re-run is what b waits for now. */
    json_t *tb = NULL;
    ASSERT_OK(vg_task_get(t.env, b, &tb, NULL, E));
    ASSERT_OK(vigil_run_rerun(t.rt, jstr(tb, "run_key"), "do b", rerun, E));
    ASSERT_OK(vigil_run_cancel(t.rt, jstr(tb, "run_key"), NULL, &queued, E));
    json_decref(tb);
    ASSERT_STREQ(status(&t, b), "running");
    struct vg_wake wk;
    ASSERT_OK(vg_wake_init(&wk, t.env, NULL, E));
    ASSERT_OK(vg_wake_drain(&wk, vg_wake_runner_loop(), 4, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_STREQ(status(&t, b), "done");
    vg_wake_release(&wk);
    test_rt_close(&t);
}

/* A re-run of the run of a task that has ended would change nothing (the task stays ended, and
 * what it blocks was cancelled with it): it is refused, naming `vigil task add`, and nothing is
 * queued (trial L7). */
TEST(rerunning_the_run_of_an_ended_task_is_refused_naming_task_add)
{
    struct test_rt t;
    char a[37], c[37], w[37], rerun[65], key[65];
    vigil_error err = {0};
    test_rt_open(&t, "task_rerun_ended");
    vigil_agent_spec s = {.name = "w", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w, E));
    add(&t, "a", NULL, 0, a);
    add(&t, "c", NULL, 0, c);
    ASSERT_OK(vigil_task_block(t.rt, a, c, E));
    int started = 0, queued = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, &started, E));
    json_t *ta = NULL;
    ASSERT_OK(vg_task_get(t.env, a, &ta, NULL, E));
    snprintf(key, sizeof key, "%s", jstr(ta, "run_key"));
    json_decref(ta);
    ASSERT_OK(vigil_run_cancel(t.rt, key, NULL, &queued, E));
    ASSERT_STREQ(status(&t, a), "cancelled");
    int64_t before = 0, after = 0;
    struct vg_query all = {.kind = "wake_run"};
    ASSERT_OK(vg_store_count(t.env->store, &all, &before, E));
    ASSERT_CODE(VIGIL_ESTATE, vigil_run_rerun(t.rt, key, "again", rerun, &err));
    ASSERT(strstr(err.message, "has ended (cancelled)") != NULL);
    ASSERT(strstr(err.message, "vigil task add") != NULL);
    ASSERT_OK(vg_store_count(t.env->store, &all, &after, E));
    ASSERT_EQ(after, before); /* nothing queued */
    ASSERT_STREQ(status(&t, a), "cancelled");
    ASSERT_STREQ(status(&t, c), "cancelled");
    test_rt_close(&t);
}

/* Runs that ended together: their tasks move on, what they unblock becomes ready, and the
 * freed slots are refilled in one call, spread over the agents by load; an end that is not a
 * task's run is ignored. */
TEST(runs_that_end_together_move_their_tasks_and_refill_the_slots_in_one_call)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], b[37], c[37], d[37], w0[37], w1[37];
    test_rt_open(&t, "task_batch");
    vigil_agent_spec s0 = {.name = "w0", .kind = "worker"}, s1 = {.name = "w1", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s0, w0, E));
    ASSERT_OK(vigil_agent_create(t.rt, &s1, w1, E));
    add(&t, "a", NULL, 0, a);
    add(&t, "b", NULL, 0, b);
    add(&t, "c", NULL, 0, c);
    add(&t, "d", NULL, 0, d);
    ASSERT_OK(vigil_task_block(t.rt, a, c, E));
    ASSERT_OK(vigil_task_block(t.rt, b, c, E));
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    int started = 0;
    ASSERT_OK(vg_task_dispatch(t.env, &w, 2, &started, E));
    ASSERT_EQ(started, 2); /* a and b, the oldest ready; d waits for a slot */
    ASSERT_STREQ(status(&t, a), "running");
    ASSERT_STREQ(status(&t, b), "running");
    ASSERT_STREQ(status(&t, d), "ready");
    struct vg_wake_job job[2];
    struct vg_orch_outcome ok = {.status = "completed", .text = "ok"};
    struct vg_task_end ends[3];
    for (int i = 0; i < 2; i++) {
        int got = 0;
        memset(&job[i], 0, sizeof job[i]);
        ASSERT_OK(vg_wake_claim(&w, &job[i], &got, E));
        ASSERT_EQ(got, 1);
        ASSERT_OK(vg_wake_finish(&w, &job[i], VG_WAKE_COMPLETED, NULL, E));
        ends[i] = (struct vg_task_end){job[i].run_key, &ok};
    }
    ASSERT(strcmp(job[0].agent_id, job[1].agent_id) != 0); /* one each: the least loaded */
    ends[2] = (struct vg_task_end){"not-a-tasks-run", &ok};
    ASSERT_OK(vg_task_runs_ended(t.env, &w, ends, 3, E));
    ASSERT_STREQ(status(&t, a), "done");
    ASSERT_STREQ(status(&t, b), "done");
    /* c became ready with its last blocker, and both freed slots were filled. */
    ASSERT_STREQ(status(&t, c), "running");
    ASSERT_STREQ(status(&t, d), "running");
    json_t *tc = NULL, *td = NULL;
    ASSERT_OK(vg_task_get(t.env, c, &tc, NULL, E));
    ASSERT_OK(vg_task_get(t.env, d, &td, NULL, E));
    ASSERT(strcmp(jstr(tc, "agent"), jstr(td, "agent")) != 0);
    json_decref(tc);
    json_decref(td);
    /* The same ends again change nothing: their tasks are done. */
    ASSERT_OK(vg_task_runs_ended(t.env, &w, ends, 3, E));
    ASSERT_STREQ(status(&t, c), "running");
    for (int i = 0; i < 2; i++)
        vg_wake_job_release(&job[i]);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* The run key a running task waits for. */
static void run_key_of(struct test_rt *t, const char *id, char key[65])
{
    json_t *v = NULL;
    ASSERT_OK(vg_task_get(t->env, id, &v, NULL, E));
    ASSERT(jstr(v, "run_key") != NULL);
    snprintf(key, 65, "%s", jstr(v, "run_key"));
    json_decref(v);
}

static void complete(struct vg_env *env, const char *key)
{
    struct vg_orch_outcome ok = {.status = "completed", .text = "ok"};
    ASSERT_OK(vg_task_run_ended(env, NULL, key, &ok, E));
}

/* A fiber of the worker's: its run's end, as the daemon's runner records it. */
struct fiber_end {
    struct test_rt *t;
    struct vg_wake *w;
    const char *key;
    vigil_code rc;
};

static void end_in_fiber(void *arg)
{
    struct fiber_end *f = arg;
    struct vg_orch_outcome ok = {.status = "completed", .text = "ok"};
    vigil_error err = {0};
    f->rc = vg_task_run_ended(f->t->env, f->w, f->key, &ok, &err);
}

/* The daemon's guard (src/wake/daemon.c): runs sharing a connection park only between
 * transactions. */
static int outside_tx(void *store)
{
    return !vg_store_in_tx(store);
}

/* The graph's stamp: every transaction that moves tasks writes it once. */
static int64_t stamp_rev(struct test_rt *t)
{
    json_t *j = NULL;
    int64_t rev = 0;
    ASSERT_OK(vg_env_get_json(t->env, "task_graph", "default", &j, &rev, E));
    json_decref(j);
    return rev;
}

/* The daemon's worker runs each claimed wake as a fiber, and each run records its own end:
 * the runs whose ends come in the same round of the worker are recorded together, in one
 * transaction and one dispatch round, as vg_task_runs_ended does for ends handed over at once.
 * (Each end its own transaction, the stamp would move twice.) */
/* proves: S2-031 */
TEST(runs_of_one_workers_fibers_that_end_together_are_recorded_in_one_transaction)
{
    struct test_rt t;
    struct vg_wake w;
    struct vg_fiber_sched *sched = NULL;
    char a[37], b[37], c[37], d[37], w0[37], w1[37];
    test_rt_open(&t, "task_fiber_ends");
    vigil_agent_spec s0 = {.name = "w0", .kind = "worker"}, s1 = {.name = "w1", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s0, w0, E));
    ASSERT_OK(vigil_agent_create(t.rt, &s1, w1, E));
    add(&t, "a", NULL, 0, a);
    add(&t, "b", NULL, 0, b);
    add(&t, "c", NULL, 0, c);
    add(&t, "d", NULL, 0, d);
    ASSERT_OK(vigil_task_block(t.rt, a, d, E));
    ASSERT_OK(vigil_task_block(t.rt, b, d, E));
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    ASSERT_OK(vg_task_dispatch(t.env, &w, 2, NULL, E)); /* a and b, the oldest */
    struct vg_wake_job job[2];
    struct fiber_end f[2];
    ASSERT_OK(vg_fiber_sched_new(&sched, E));
    vg_fiber_sched_set_guard(sched, outside_tx, t.env->store);
    for (int i = 0; i < 2; i++) {
        int got = 0;
        memset(&job[i], 0, sizeof job[i]);
        ASSERT_OK(vg_wake_claim(&w, &job[i], &got, E));
        ASSERT_EQ(got, 1);
        f[i] = (struct fiber_end){&t, &w, job[i].run_key, VIGIL_ERROR};
        ASSERT_OK(vg_fiber_spawn(sched, end_in_fiber, &f[i], E));
    }
    int64_t before = stamp_rev(&t);
    vg_fiber_sched_run(sched);
    ASSERT_OK(f[0].rc);
    ASSERT_OK(f[1].rc);
    ASSERT_EQ(stamp_rev(&t), before + 1);
    ASSERT_STREQ(status(&t, a), "done");
    ASSERT_STREQ(status(&t, b), "done");
    /* both freed slots refilled: c, and d, whose blockers both ended in that transaction */
    ASSERT_STREQ(status(&t, c), "running");
    ASSERT_STREQ(status(&t, d), "running");
    /* Off a fiber, an end is recorded at once, alone, as before. */
    char kc[65];
    run_key_of(&t, c, kc);
    complete(t.env, kc);
    ASSERT_STREQ(status(&t, c), "done");
    ASSERT_EQ(stamp_rev(&t), before + 2);
    vg_fiber_sched_free(sched);
    for (int i = 0; i < 2; i++)
        vg_wake_job_release(&job[i]);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* /metrics' dispatcher counters (docs/http.md): the ends that came together count as one call
 * of two ends, an end alone as a call of one, and each call's CPU is added. The counters are the
 * process's: this test reads how much they moved. */
TEST(the_dispatcher_counts_its_calls_the_ends_they_recorded_and_its_cpu)
{
    struct test_rt t;
    struct vg_wake w;
    struct vg_fiber_sched *sched = NULL;
    char a[37], b[37], c[37], w0[37], w1[37], kc[65];
    test_rt_open(&t, "task_dispatcher_counts");
    vigil_agent_spec s0 = {.name = "w0", .kind = "worker"}, s1 = {.name = "w1", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s0, w0, E));
    ASSERT_OK(vigil_agent_create(t.rt, &s1, w1, E));
    add(&t, "a", NULL, 0, a);
    add(&t, "b", NULL, 0, b);
    add(&t, "c", NULL, 0, c);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    ASSERT_OK(vg_task_dispatch(t.env, &w, 2, NULL, E)); /* a and b */
    struct vg_wake_job job[2];
    struct fiber_end f[2];
    ASSERT_OK(vg_fiber_sched_new(&sched, E));
    vg_fiber_sched_set_guard(sched, outside_tx, t.env->store);
    for (int i = 0; i < 2; i++) {
        int got = 0;
        memset(&job[i], 0, sizeof job[i]);
        ASSERT_OK(vg_wake_claim(&w, &job[i], &got, E));
        ASSERT_EQ(got, 1);
        f[i] = (struct fiber_end){&t, &w, job[i].run_key, VIGIL_ERROR};
        ASSERT_OK(vg_fiber_spawn(sched, end_in_fiber, &f[i], E));
    }
    struct vg_dispatcher_counts c0, c1, c2;
    vg_stats_dispatcher_read(&c0);
    vg_fiber_sched_run(sched);
    ASSERT_OK(f[0].rc);
    ASSERT_OK(f[1].rc);
    vg_stats_dispatcher_read(&c1);
    ASSERT_EQ(c1.calls - c0.calls, 1);
    ASSERT_EQ(c1.ends - c0.ends, 2);
    ASSERT(c1.cpu_ns > c0.cpu_ns);
    ASSERT_STREQ(status(&t, c), "running"); /* a freed slot refilled */
    run_key_of(&t, c, kc);
    complete(t.env, kc); /* off a fiber: alone */
    vg_stats_dispatcher_read(&c2);
    ASSERT_EQ(c2.calls - c1.calls, 1);
    ASSERT_EQ(c2.ends - c1.ends, 1);
    ASSERT(c2.cpu_ns > c1.cpu_ns);
    vg_fiber_sched_free(sched);
    for (int i = 0; i < 2; i++)
        vg_wake_job_release(&job[i]);
    vg_wake_release(&w);
    test_rt_close(&t);
}

static const char *wake_status(struct test_rt *t, const char *key)
{
    static char st[16];
    json_t *j = NULL;
    ASSERT_OK(vg_env_get_json(t->env, "wake_run", key, &j, NULL, E));
    snprintf(st, sizeof st, "%s", jstr(j, "status"));
    json_decref(j);
    return st;
}

/* One task's claim and run by the daemon's runner (the agent loop), with the store failing its
 * nth call from the claim on (0: none); the number of calls they made. */
static long run_task_failing_at(long nth, char task[37], char key[65], struct test_rt *t)
{
    struct vg_wake w;
    struct vg_store *fault = NULL;
    char name[48], agent[37];
    int ran = 0;
    snprintf(name, sizeof name, "task_end_finish_%ld", nth);
    test_rt_open(t, name);
    vigil_agent_spec s = {.name = "w", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t->rt, &s, agent, E));
    add(t, "a", NULL, 0, task);
    ASSERT_OK(vg_wake_init(&w, t->env, NULL, E));
    ASSERT_OK(vg_task_dispatch(t->env, &w, 1, NULL, E));
    run_key_of(t, task, key);
    ASSERT_OK(vg_store_fault_wrap(t->env->store, &fault, E));
    t->env->store = fault;
    vg_store_fault_arm(fault, nth, VIGIL_EIO);
    vigil_error e = {0};
    (void)vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, &e);
    long calls = vg_store_fault_calls(fault);
    vg_store_fault_arm(fault, 0, VIGIL_OK);
    ASSERT(!vg_store_in_tx(fault));
    vg_wake_release(&w);
    return calls;
}

/* A task's run that completes has its end (the task done) and its wake's finish (the wake
 * completed) written in one transaction: whichever of the run's last calls fails (its last
 * loop phase, the end, the finish and the round after them), the store never holds the task
 * done while its wake is still open, nor the wake completed while its task is not done. (In two
 * transactions, a failure after the end's commit left the task done and its wake started, or failed
 * by the runner, which took the failure for the end's.) */
TEST(a_tasks_run_end_and_its_wakes_finish_are_one_transaction)
{
    struct test_rt t;
    char task[37], key[65];
    long calls = run_task_failing_at(0, task, key, &t);
    ASSERT_STREQ(status(&t, task), "done");
    ASSERT_STREQ(wake_status(&t, key), "completed");
    test_rt_close(&t);
    ASSERT(calls > 32);
    for (long nth = calls - 31; nth <= calls; nth++) {
        run_task_failing_at(nth, task, key, &t);
        int done = !strcmp(status(&t, task), "done");
        int completed = !strcmp(wake_status(&t, key), "completed");
        if (done != completed)
            fprintf(stderr, "call %ld of %ld failed: task %s, wake %s\n", nth, calls,
                    status(&t, task), wake_status(&t, key));
        ASSERT_EQ(done, completed);
        test_rt_close(&t);
    }
}

/* The dispatcher keeps what each task still waits for in memory: after a restart (a crash
 * loses that memory) it is rebuilt from the store, and the next run's end dispatches exactly
 * the tasks whose blockers have all completed. */
/* proves: S2-034 */
TEST(the_ready_set_rebuilt_after_a_restart_dispatches_exactly_the_unblocked_tasks)
{
    struct test_rt t;
    char a[37], b[37], c[37], d[37], e[37], w0[37], ka[65], kb[65];
    test_rt_open(&t, "task_rebuild");
    vigil_agent_spec s = {.name = "w0", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w0, E));
    add(&t, "a", NULL, 0, a);
    add(&t, "b", NULL, 0, b);
    add(&t, "c", NULL, 0, c);
    add(&t, "d", NULL, 0, d);
    add(&t, "e", NULL, 0, e);
    ASSERT_OK(vigil_task_block(t.rt, a, c, E)); /* c waits for a and b */
    ASSERT_OK(vigil_task_block(t.rt, b, c, E));
    ASSERT_OK(vigil_task_block(t.rt, c, d, E)); /* d waits for c */
    ASSERT_OK(vigil_task_block(t.rt, b, e, E)); /* e waits for b */
    int started = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 4, &started, E));
    ASSERT_EQ(started, 2);
    run_key_of(&t, a, ka);
    run_key_of(&t, b, kb);
    complete(t.env, ka); /* c now waits for b alone: known in memory, not written */
    ASSERT_STREQ(status(&t, c), "pending");
    test_rt_reopen(&t); /* the memory is gone */
    complete(t.env, kb);
    ASSERT_STREQ(status(&t, b), "done");
    ASSERT_STREQ(status(&t, c), "running");
    ASSERT_STREQ(status(&t, e), "running");
    ASSERT_STREQ(status(&t, d), "pending");
    test_rt_close(&t);
}

static int64_t version_of(struct test_rt *t, const char *id)
{
    json_t *v = NULL;
    int64_t rev = 0;
    ASSERT_OK(vg_task_get(t->env, id, &v, &rev, E));
    json_decref(v);
    return rev;
}

/* A task ready only by derivation (stored pending, every blocker done) when the process stops
 * is ready to the next one: its rebuilt view starts it as soon as a slot is free. */
TEST(a_task_ready_by_derivation_starts_after_a_restart)
{
    struct test_rt t;
    char a[37], b[37], c[37], w0[37], ka[65];
    test_rt_open(&t, "task_derived_restart");
    vigil_agent_spec s = {.name = "w0", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w0, E));
    add(&t, "a", NULL, 0, a);
    add(&t, "b", NULL, 0, b);
    add(&t, "c", NULL, 0, c);
    ASSERT_OK(vigil_task_block(t.rt, a, b, E));
    ASSERT_OK(vigil_task_block(t.rt, a, c, E));
    int started = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, &started, E));
    run_key_of(&t, a, ka);
    complete(t.env, ka); /* b and c ready; the one slot takes b, c is left stored pending */
    int64_t vc = version_of(&t, c);
    test_rt_reopen(&t); /* the view is gone */
    ASSERT_STREQ(status(&t, c), "ready");
    ASSERT_OK(vigil_task_dispatch(t.rt, 2, &started, E)); /* a second slot */
    ASSERT_EQ(started, 1);
    ASSERT_STREQ(status(&t, c), "running");
    ASSERT_EQ(version_of(&t, c), vc); /* started: its wake written, not the task */
    test_rt_close(&t);
}

/* A task a run's end unblocks is never written ready: the same transaction starts it (its
 * wake written, the task not), or it stays stored pending, ready by derivation (every blocker
 * done) for every reader: its status, the ready listing, and the next round, which starts it.
 * A dispatched run needs no link record: its wake names the task. */
TEST(a_task_unblocked_is_ready_by_derivation_and_written_only_when_started)
{
    struct test_rt t;
    char a[37], b[37], c[37], w0[37], ka[65];
    test_rt_open(&t, "task_written_once");
    vigil_agent_spec s = {.name = "w0", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w0, E));
    add(&t, "a", NULL, 0, a);
    add(&t, "b", NULL, 0, b);
    add(&t, "c", NULL, 0, c);
    ASSERT_OK(vigil_task_block(t.rt, a, b, E));
    ASSERT_OK(vigil_task_block(t.rt, a, c, E));
    int started = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, &started, E));
    ASSERT_EQ(started, 1);
    int64_t vb = version_of(&t, b), vc = version_of(&t, c);
    run_key_of(&t, a, ka);
    complete(t.env, ka); /* b and c become ready; the one slot takes b */
    ASSERT_STREQ(status(&t, b), "running");
    ASSERT_EQ(version_of(&t, b), vb);     /* started: its wake written, not the task */
    ASSERT_STREQ(status(&t, c), "ready"); /* no slot: ready, and not written */
    ASSERT_EQ(version_of(&t, c), vc);
    struct vg_query pend = {.kind = "task", .k1 = "pending"};
    int64_t stored_pending = -1;
    ASSERT_OK(vg_store_count(t.env->store, &pend, &stored_pending, E));
    ASSERT_EQ(stored_pending, 2); /* b and c, as the store holds them */
    json_t *ready = NULL, *pending = NULL;
    ASSERT_OK(vg_task_list(t.env, "ready", &ready, E));
    ASSERT_OK(vg_task_list(t.env, "pending", &pending, E));
    ASSERT_EQ(json_array_size(ready), 1);
    ASSERT_STREQ(jstr(json_array_get(ready, 0), "id"), c);
    ASSERT_EQ(json_array_size(pending), 0);
    json_decref(ready);
    json_decref(pending);
    struct vg_query q = {.kind = "task_run"};
    int64_t links = -1;
    ASSERT_OK(vg_store_count(t.env->store, &q, &links, E));
    ASSERT_EQ(links, 0);
    char kb[65];
    run_key_of(&t, b, kb);
    complete(t.env, kb); /* found from its wake alone */
    ASSERT_STREQ(status(&t, b), "done");
    ASSERT_STREQ(status(&t, c), "running");
    test_rt_close(&t);
}

static int64_t stored_count(struct test_rt *t, const char *kind, const char *k1)
{
    struct vg_query q = {.kind = kind, .k1 = k1};
    int64_t n = -1;
    ASSERT_OK(vg_store_count(t->env->store, &q, &n, E));
    return n;
}

static void claim_and_finish(struct test_rt *t, const char *want_key)
{
    struct vg_wake w;
    struct vg_wake_job job = {0};
    int got = 0;
    ASSERT_OK(vg_wake_init(&w, t->env, NULL, E));
    ASSERT_OK(vg_wake_claim(&w, &job, &got, E));
    ASSERT_EQ(got, 1);
    ASSERT_STREQ(job.run_key, want_key);
    ASSERT_OK(vg_wake_finish(&w, &job, VG_WAKE_COMPLETED, NULL, E));
    vg_wake_job_release(&job);
    vg_wake_release(&w);
}

/* A start is one record: the task's wake, keyed by the task and its attempt. The task row is
 * not written (its version and stored status stay), yet it is running to every reader, and
 * after a restart (the view lost, as after kill -9) it is neither started again nor lost: the
 * one wake is claimed and its end moves the task, which then holds the attempt, agent and run
 * key. A failed attempt's retry is the next attempt's wake, under the next key. */
TEST(a_started_task_is_its_wake_only_and_a_restart_neither_loses_nor_repeats_it)
{
    struct test_rt t;
    char a[37], b[37], w0[37], k1[65], k2[65];
    test_rt_open(&t, "task_start_is_wake");
    vigil_agent_spec s = {.name = "w0", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w0, E));
    add(&t, "a", NULL, 0, a);
    add(&t, "b", NULL, 0, b);
    ASSERT_OK(vigil_task_block(t.rt, a, b, E));
    int64_t va = version_of(&t, a);
    int started = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 2, &started, E));
    ASSERT_EQ(started, 1);
    vg_task_run_key(k1, a, 1);
    ASSERT_EQ(version_of(&t, a), va); /* no task write */
    ASSERT_EQ(stored_count(&t, "task", "ready"), 1);
    ASSERT_EQ(stored_count(&t, "task", "running"), 0);
    ASSERT_EQ(stored_count(&t, "wake_run", NULL), 1);
    json_t *v = NULL, *running = NULL;
    ASSERT_OK(vg_task_get(t.env, a, &v, NULL, E));
    ASSERT_STREQ(jstr(v, "status"), "running");
    ASSERT_STREQ(jstr(v, "run_key"), k1);
    ASSERT_STREQ(jstr(v, "agent"), w0);
    json_decref(v);
    ASSERT_OK(vg_task_list(t.env, "running", &running, E));
    ASSERT_EQ(json_array_size(running), 1);
    json_decref(running);
    test_rt_reopen(&t); /* the view is gone; the wake is queued */
    ASSERT_STREQ(status(&t, a), "running");
    ASSERT_OK(vigil_task_dispatch(t.rt, 2, &started, E));
    ASSERT_EQ(started, 0); /* not started again */
    ASSERT_EQ(stored_count(&t, "wake_run", NULL), 1);
    claim_and_finish(&t, k1);
    struct vg_orch_outcome failed = {.status = "failed", .text = "no"};
    /* a retry: ready again, and the end's refill starts attempt 2 */
    ASSERT_OK(vg_task_run_ended(t.env, NULL, k1, &failed, E));
    ASSERT_STREQ(status(&t, a), "running");
    vg_task_run_key(k2, a, 2);
    run_key_of(&t, a, k1);
    ASSERT_STREQ(k1, k2);
    vg_test_clock_advance(&t.clock, VG_TASK_RETRY_BASE_MS); /* its backoff */
    claim_and_finish(&t, k2);
    complete(t.env, k2);
    ASSERT_OK(vg_env_get_json(t.env, "task", a, &v, NULL, E)); /* as stored */
    ASSERT_STREQ(jstr(v, "status"), "done");
    ASSERT_EQ(json_integer_value(json_object_get(v, "attempts")), 2);
    ASSERT_STREQ(jstr(v, "agent"), w0);
    ASSERT_STREQ(jstr(v, "run_key"), k2);
    json_decref(v);
    ASSERT_STREQ(status(&t, b), "running"); /* the end refilled the slot */
    ASSERT_EQ(stored_count(&t, "wake_run", NULL), 3);
    test_rt_close(&t);
}

/* The wake the loop's claim takes now, or "" (nothing claimable yet); finished at once. */
static void claim_now(struct test_rt *t, char key[65])
{
    struct vg_wake w;
    struct vg_wake_job job = {0};
    int got = 0;
    key[0] = '\0';
    ASSERT_OK(vg_wake_init(&w, t->env, NULL, E));
    ASSERT_OK(vg_wake_claim(&w, &job, &got, E));
    if (got) {
        snprintf(key, 65, "%s", job.run_key);
        ASSERT_OK(vg_wake_finish(&w, &job, VG_WAKE_COMPLETED, NULL, E));
        vg_wake_job_release(&job);
    }
    vg_wake_release(&w);
}

/* A text of n bytes of 'a' with "é" (two bytes) over byte `at`: a cut there splits it. */
static char *split_at(size_t n, size_t at)
{
    char *text = malloc(n + 1);
    ASSERT(text != NULL);
    memset(text, 'a', n);
    text[n] = '\0';
    memcpy(text + at - 1, "\xc3\xa9", 2);
    return text;
}

/* A task keeps the first VG_TASK_RESULT_MAX bytes of its run's answer as its result, and a
 * failed attempt's retry the first 500 of its error: where that cut would split a character,
 * the task keeps the text up to it (cut byte for byte, the string was not UTF-8, jansson
 * refused it, and the run's end failed as "out of memory": the task never finished). */
TEST(a_tasks_result_and_a_retrys_error_are_cut_where_a_character_ends)
{
    struct test_rt t;
    char a[37], b[37], w0[37], k1[65], k2[65], ka[65];
    test_rt_open(&t, "task_long_answer");
    vigil_agent_spec s = {.name = "w0", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w0, E));
    add(&t, "a", NULL, 0, a);
    add(&t, "b", NULL, 0, b);
    ASSERT_OK(vigil_task_dispatch(t.rt, 2, NULL, E));
    run_key_of(&t, a, ka);
    claim_now(&t, k1);
    claim_now(&t, k2);
    const char *kb = strcmp(k1, ka) ? k1 : k2;
    char *answer = split_at(VG_TASK_RESULT_MAX + 100, VG_TASK_RESULT_MAX);
    char *error = split_at(600, 500);
    struct vg_orch_outcome ok = {.status = "completed", .text = answer};
    struct vg_orch_outcome failed = {.status = "failed", .text = error};
    /* b's end moves it through the dispatcher's view; a's failure goes through the store */
    ASSERT_OK(vg_task_run_ended(t.env, NULL, kb, &ok, E));
    ASSERT_OK(vg_task_run_ended(t.env, NULL, ka, &failed, E)); /* a retry */
    json_t *v = NULL;
    ASSERT_OK(vg_task_get(t.env, a, &v, NULL, E));
    const char *kept = jstr(json_object_get(v, "retry"), "error");
    ASSERT(kept != NULL && strlen(kept) == 499 && !strncmp(kept, error, 499));
    json_decref(v);
    vg_test_clock_advance(&t.clock, VG_TASK_RETRY_BASE_MS); /* its backoff, at most this */
    claim_now(&t, k1);
    ASSERT(k1[0] != '\0');
    ASSERT_OK(vg_task_run_ended(t.env, NULL, k1, &ok, E));
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(vg_task_get(t.env, i ? b : a, &v, NULL, E));
        ASSERT_STREQ(jstr(v, "status"), "done");
        kept = jstr(v, "result");
        ASSERT(kept != NULL && strlen(kept) == VG_TASK_RESULT_MAX - 1 &&
               !strncmp(kept, answer, VG_TASK_RESULT_MAX - 1));
        json_decref(v);
    }
    free(error);
    free(answer);
    test_rt_close(&t);
}

/* A failed attempt's retry waits a backoff on the clock (trial L10: three attempts used to come
 * back to back, so a model outage of a second spent them all): exponential from
 * VG_TASK_RETRY_BASE_MS, half of it jitter, capped; the task keeps it ("retry": the attempt it
 * follows, the wait, when, and the error), and its next attempt's wake is not claimed before. */
TEST(a_failed_tasks_retry_waits_an_exponential_backoff_on_the_clock)
{
    struct test_rt t;
    char a[37], b[37], w0[37], key[65], want[65];
    test_rt_open(&t, "task_retry_backoff");
    vigil_agent_spec s = {.name = "w0", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w0, E));
    add(&t, "a", NULL, 0, a);
    add(&t, "b", NULL, 0, b);
    ASSERT_OK(vigil_task_block(t.rt, a, b, E));
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, NULL, E));
    struct vg_orch_outcome failed = {.status = "failed", .text = "model unreachable"};
    int64_t wait[3] = {0};
    for (int64_t attempt = 1; attempt <= 3; attempt++) {
        vg_task_run_key(want, a, attempt);
        claim_now(&t, key);
        ASSERT_STREQ(key, want);
        int64_t ended_at = vg_env_now(t.env);
        ASSERT_OK(vg_task_run_ended(t.env, NULL, key, &failed, E));
        if (attempt == 3)
            break;
        json_t *v = NULL;
        ASSERT_OK(vg_task_get(t.env, a, &v, NULL, E));
        json_t *retry = json_object_get(v, "retry");
        ASSERT_EQ(json_integer_value(json_object_get(retry, "after_attempt")), attempt);
        wait[attempt] = json_integer_value(json_object_get(retry, "backoff_ms"));
        int64_t full = (int64_t)VG_TASK_RETRY_BASE_MS << (attempt - 1);
        ASSERT(wait[attempt] >= full / 2 && wait[attempt] <= full);
        ASSERT_EQ(json_integer_value(json_object_get(retry, "not_before_ms")),
                  ended_at + wait[attempt]);
        ASSERT_STREQ(jstr(retry, "error"), "model unreachable");
        json_decref(v);
        claim_now(&t, key); /* not before its backoff */
        ASSERT_STREQ(key, "");
        vg_test_clock_advance(&t.clock, wait[attempt] - 1);
        claim_now(&t, key);
        ASSERT_STREQ(key, "");
        vg_test_clock_advance(&t.clock, 1); /* due: the next attempt's claim below */
    }
    ASSERT_STREQ(status(&t, a), "failed"); /* after its retries, as before */
    ASSERT_STREQ(status(&t, b), "cancelled");
    /* Capped, jitter in its second half, the same for a task and attempt on every process. */
    for (int64_t n = 1; n <= 12; n++) {
        int64_t ms = vg_task_retry_backoff_ms(a, n);
        int64_t full = VG_MIN((int64_t)VG_TASK_RETRY_BASE_MS << (n - 1), VG_TASK_RETRY_MAX_MS);
        ASSERT(ms >= full / 2 && ms <= full);
        ASSERT_EQ(ms, vg_task_retry_backoff_ms(a, n));
    }
    ASSERT(vg_task_retry_backoff_ms(a, 12) >= VG_TASK_RETRY_MAX_MS / 2);
    test_rt_close(&t);
}

/* A daemon's look for new tasks, as its loop makes it each second (the host's sweep). */
static void daemon_looks(struct vg_env *env)
{
    struct vg_wake w;
    ASSERT_OK(vg_wake_init(&w, env, NULL, E));
    ASSERT_OK(vg_runtime_wake_host()->sweep(env, &w, E));
    vg_wake_release(&w);
}

/* A task added while a daemon runs, after the graph it serves went idle, is started by the
 * daemon by itself, without another `vigil task dispatch` (trial L9); before the dispatcher was
 * ever started on the store (a graph still being built) the daemon starts nothing. */
TEST(a_daemon_starts_a_task_added_while_it_runs_once_the_dispatcher_was_started)
{
    struct test_rt t;
    char a[37], b[37], c[37], w0[37], key[65], want[65];
    test_rt_open(&t, "task_added_later");
    vigil_agent_spec s = {.name = "w0", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w0, E));
    add(&t, "a", NULL, 0, a);
    add(&t, "b", NULL, 0, b);
    daemon_looks(t.env); /* never dispatched: a graph being built waits for its dispatch */
    ASSERT_STREQ(status(&t, a), "ready");
    ASSERT_OK(vigil_task_block(t.rt, a, b, E));
    ASSERT_OK(vigil_task_dispatch(t.rt, 2, NULL, E));
    for (int i = 0; i < 2; i++) { /* the graph runs to its end and goes idle */
        claim_now(&t, key);
        complete(t.env, key);
    }
    ASSERT_STREQ(status(&t, b), "done");
    daemon_looks(t.env);
    add(&t, "c", NULL, 0, c); /* as `vigil task add` or POST /v1/tasks would */
    ASSERT_STREQ(status(&t, c), "ready");
    daemon_looks(t.env);
    ASSERT_STREQ(status(&t, c), "running");
    daemon_looks(t.env); /* nothing new: nothing more */
    vg_task_run_key(want, c, 1);
    claim_now(&t, key);
    ASSERT_STREQ(key, want);
    complete(t.env, key);
    ASSERT_STREQ(status(&t, c), "done");
    ASSERT_EQ(stored_count(&t, "wake_run", NULL), 3);
    test_rt_close(&t);
}

struct looker {
    struct vg_env *env;
    int rounds;
};

static void *looker_main(void *arg)
{
    struct looker *l = arg;
    for (int i = 0; i < l->rounds; i++)
        daemon_looks(l->env);
    return NULL;
}

/* Two daemons on one PostgreSQL store look for added tasks at once: each task added is started
 * once (its attempt's run key is taken by one start; the other's round gives way). Run only with
 * VIGIL_PG_URI set. */
/* proves: S2-036 */
TEST(two_daemons_looking_for_added_tasks_start_each_once)
{
    const char *uri = getenv("VIGIL_PG_URI");
    if (!uri || !*uri) {
        fprintf(stderr, "skipped: no VIGIL_PG_URI for the two daemons\n");
        return;
    }
    struct test_rt t;
    char w0[37], w1[37], id[37], first[37];
    setenv("VIGIL_TEST_RT_PG", "1", 1);
    test_rt_open(&t, "task_pg_added");
    unsetenv("VIGIL_TEST_RT_PG");
    vigil_agent_spec s0 = {.name = "w0", .kind = "worker"}, s1 = {.name = "w1", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s0, w0, E));
    ASSERT_OK(vigil_agent_create(t.rt, &s1, w1, E));
    add(&t, "first", NULL, 0, first);
    ASSERT_OK(vigil_task_dispatch(t.rt, 50, NULL, E));
    vigil_runtime *other = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t.path};
    ASSERT_OK(vigil_runtime_open(&o, &other, E));
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < 4; i++)
            add(&t, "added", NULL, 0, id);
        struct looker l1 = {.env = t.env, .rounds = 3},
                      l2 = {.env = vg_runtime_env(other), .rounds = 3};
        pthread_t th;
        ASSERT_EQ(pthread_create(&th, NULL, looker_main, &l2), 0);
        looker_main(&l1);
        ASSERT_EQ(pthread_join(th, NULL), 0);
    }
    json_t *all = NULL, *x;
    size_t i;
    ASSERT_OK(vg_task_list(t.env, NULL, &all, E));
    ASSERT_EQ(json_array_size(all), 21);
    json_array_foreach (all, i, x) {
        ASSERT_STREQ(jstr(x, "status"), "running"); /* every one started */
        char key[65];
        vg_task_run_key(key, jstr(x, "id"), 1);
        ASSERT_STREQ(jstr(x, "run_key"), key);
    }
    json_decref(all);
    ASSERT_EQ(stored_count(&t, "wake_run", NULL), 21); /* once each */
    vigil_runtime_close(other);
    test_rt_close(&t);
}

/* The wake a task's start writes, as its run and a person read it: the task's title in its
 * input (non-ASCII and quoted text kept whole), its session the task's, and keyed by the task
 * and its attempt, "task", the id and "attempt-N" hashed (the key a restart finds the start by). */
TEST(a_tasks_wake_carries_its_title_and_is_keyed_by_the_task_and_its_attempt)
{
    struct test_rt t;
    char a[37], w0[37], key[65], want[80], session[64], turn[32];
    const char *title = "R\xc3\xa9sum\xc3\xa9 \xe2\x9c\x93 \"quoted\" \\ end";
    test_rt_open(&t, "task_wake_text");
    vigil_agent_spec s = {.name = "w0", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w0, E));
    add(&t, title, NULL, 0, a);
    int started = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, &started, E));
    ASSERT_EQ(started, 1);
    for (int64_t attempt = 1; attempt <= 2; attempt++) {
        char attempt_turn[32];
        snprintf(turn, sizeof turn, "attempt-%lld", (long long)attempt);
        vg_task_attempt_turn(attempt_turn, attempt);
        ASSERT_STREQ(attempt_turn, turn);
        const char *parts[] = {"task", a, turn};
        vg_sha256_hex_parts(key, parts, 3);
        vg_task_run_key(want, a, attempt);
        ASSERT_STREQ(want, key);
        json_t *wake = NULL;
        ASSERT_OK(vg_env_get_json(t.env, "wake_run", key, &wake, NULL, E));
        snprintf(want, sizeof want, "Task %s: ", a);
        ASSERT_EQ(strncmp(jstr(wake, "seed_input"), want, strlen(want)), 0);
        ASSERT_STREQ(jstr(wake, "seed_input") + strlen(want), title);
        snprintf(session, sizeof session, "task:%s", a);
        ASSERT_STREQ(jstr(wake, "session_id"), session);
        ASSERT_STREQ(jstr(wake, "agent_id"), w0);
        json_decref(wake);
        json_t *v = NULL;
        ASSERT_OK(vg_task_get(t.env, a, &v, NULL, E));
        ASSERT_STREQ(jstr(v, "status"), "running");
        ASSERT_STREQ(jstr(v, "run_key"), key);
        json_decref(v);
        claim_and_finish(&t, key);
        struct vg_orch_outcome failed = {.status = "failed", .text = "no"};
        ASSERT_OK(vg_task_run_ended(t.env, NULL, key, &failed, E)); /* a retry: attempt 2 */
        vg_test_clock_advance(&t.clock, VG_TASK_RETRY_BASE_MS);     /* after its backoff */
    }
    char big[32];
    vg_task_attempt_turn(big, 12345678901234LL);
    ASSERT_STREQ(big, "attempt-12345678901234");
    vg_task_attempt_turn(big, 0);
    ASSERT_STREQ(big, "attempt-0");
    test_rt_close(&t);
}

/* A round without the view (it was stale and not yet worth a rebuild: another runtime wrote a
 * task) counts the tasks running by their wakes, stored ready as they are, against its slots:
 * it starts only what the slots leave. */
TEST(a_round_without_the_view_counts_tasks_running_by_their_wakes_against_the_slots)
{
    struct test_rt t;
    char id[37], w0[37];
    test_rt_open(&t, "task_store_round_slots");
    vigil_agent_spec s = {.name = "w0", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w0, E));
    for (int i = 0; i < 16; i++)
        add(&t, "t", NULL, 0, id);
    int started = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 2, &started, E));
    ASSERT_EQ(started, 2);
    ASSERT_EQ(stored_count(&t, "task", "running"), 0); /* running by their wakes only */
    vigil_runtime *other = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t.path};
    ASSERT_OK(vigil_runtime_open(&o, &other, E));
    ASSERT_OK(vigil_task_add(other, "late", "worker", NULL, 0, id, E)); /* the view is stale */
    vigil_runtime_close(other);
    ASSERT_OK(vigil_task_dispatch(t.rt, 3, &started, E));
    ASSERT_EQ(started, 1); /* 3 slots, 2 running */
    ASSERT_EQ(stored_count(&t, "wake_run", NULL), 3);
    json_t *running = NULL;
    ASSERT_OK(vg_task_list(t.env, "running", &running, E));
    ASSERT_EQ(json_array_size(running), 3);
    json_decref(running);
    test_rt_close(&t);
}

/* A task goes only to an agent that takes wakes: given to a dormant one, or one under its kill
 * switch, its wake would be skipped and the task stay running for ever. It waits ready until
 * an agent can take it. */
TEST(a_task_waits_ready_while_no_agent_of_its_kind_takes_wakes)
{
    struct test_rt t;
    char a[37], w0[37], w1[37], key[65];
    test_rt_open(&t, "task_no_taker");
    vigil_agent_spec s0 = {.name = "w0", .kind = "worker"}, s1 = {.name = "w1", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s0, w0, E));
    ASSERT_OK(vigil_agent_create(t.rt, &s1, w1, E));
    ASSERT_OK(vigil_agent_resume(t.rt, w0, "test", E)); /* created -> active -> dormant */
    ASSERT_OK(vigil_agent_pause(t.rt, w0, "test", E));
    ASSERT_OK(vigil_kill_set(t.rt, w1, NULL, 1, "test", E));
    add(&t, "a", NULL, 0, a);
    int started = -1;
    ASSERT_OK(vigil_task_dispatch(t.rt, 2, &started, E));
    ASSERT_EQ(started, 0);
    ASSERT_STREQ(status(&t, a), "ready");
    struct vg_query q = {.kind = "wake_run"};
    int64_t wakes = -1;
    ASSERT_OK(vg_store_count(t.env->store, &q, &wakes, E));
    ASSERT_EQ(wakes, 0);
    ASSERT_OK(vigil_kill_set(t.rt, w1, NULL, 0, "test", E));
    ASSERT_OK(vigil_task_dispatch(t.rt, 2, &started, E));
    ASSERT_EQ(started, 1);
    ASSERT_STREQ(status(&t, a), "running");
    run_key_of(&t, a, key);
    json_t *task = NULL;
    ASSERT_OK(vg_task_get(t.env, a, &task, NULL, E));
    ASSERT_STREQ(jstr(task, "agent"), w1);
    json_decref(task);
    complete(t.env, key);
    ASSERT_STREQ(status(&t, a), "done");
    test_rt_close(&t);
}

/* One claim by a daemon's wake system, which reads the kill switches: whether it started a run,
 * and which. */
static int claim_one(struct test_rt *t, char key[65])
{
    struct vg_wake w;
    struct vg_wake_job job = {0};
    int got = 0;
    ASSERT_OK(vg_orch_wake_init(&w, t->env, E));
    ASSERT_OK(vg_wake_claim(&w, &job, &got, E));
    if (got) {
        snprintf(key, 65, "%s", job.run_key);
        ASSERT_OK(vg_wake_finish(&w, &job, VG_WAKE_COMPLETED, NULL, E));
        vg_wake_job_release(&job);
    }
    vg_wake_release(&w);
    return got;
}

/* A task whose run was queued before the kill switch went on (a dispatch with no daemon, then
 * `vigil kill on`, then `vigil serve`), or before its agent was paused, waits in the queue and
 * runs once the switch is off or the agent resumed: skipped, the task read running for ever and
 * held its slot, and `vigil status` said all was well (trial M1). */
TEST(a_tasks_run_queued_before_a_kill_switch_or_a_pause_waits_and_runs_after_it)
{
    struct test_rt t;
    char a[37], w0[37], key[65], ran[65] = "";
    test_rt_open(&t, "task_held_by_switch");
    vigil_agent_spec s = {.name = "w0", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w0, E));
    ASSERT_OK(vigil_agent_resume(t.rt, w0, "test", E));
    add(&t, "a", NULL, 0, a);
    int started = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, &started, E));
    ASSERT_EQ(started, 1);
    run_key_of(&t, a, key);
    ASSERT_OK(vigil_kill_set(t.rt, NULL, NULL, 1, "incident", E));
    ASSERT_EQ(claim_one(&t, ran), 0);
    ASSERT_STREQ(wake_status(&t, key), "queued");
    ASSERT_OK(vigil_kill_set(t.rt, NULL, NULL, 0, "test", E));
    ASSERT_OK(vigil_agent_pause(t.rt, w0, "migration", E));
    ASSERT_EQ(claim_one(&t, ran), 0);
    ASSERT_STREQ(wake_status(&t, key), "queued");
    ASSERT_STREQ(status(&t, a), "running");
    ASSERT_OK(vigil_agent_resume(t.rt, w0, "test", E));
    ASSERT_EQ(claim_one(&t, ran), 1);
    ASSERT_STREQ(ran, key);
    complete(t.env, key);
    ASSERT_STREQ(status(&t, a), "done");
    test_rt_close(&t);
}

/* Two runtimes on one store each keep their own view: a task one of them finished counts for
 * the other, whose next run's end then readies what both blocked. */
/* proves: S2-036 */
TEST(a_task_finished_by_another_runtime_counts_in_this_ones_view)
{
    struct test_rt t;
    char a[37], b[37], c[37], w0[37], ka[65], kb[65];
    test_rt_open(&t, "task_two_views");
    vigil_agent_spec s = {.name = "w0", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w0, E));
    add(&t, "a", NULL, 0, a);
    add(&t, "b", NULL, 0, b);
    add(&t, "c", NULL, 0, c);
    ASSERT_OK(vigil_task_block(t.rt, a, c, E));
    ASSERT_OK(vigil_task_block(t.rt, b, c, E));
    for (int i = 0; i < 16; i++) { /* a view too big to rebuild at the first change: the store */
        char x[37];
        add(&t, "x", NULL, 0, x);
        ASSERT_OK(vigil_task_block(t.rt, c, x, E));
    }
    int started = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 4, &started, E)); /* this runtime's view: a, b running */
    ASSERT_EQ(started, 2);
    run_key_of(&t, a, ka);
    run_key_of(&t, b, kb);
    vigil_runtime *other = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t.path};
    ASSERT_OK(vigil_runtime_open(&o, &other, E));
    complete(vg_runtime_env(other), ka); /* the other one ends a's run */
    vigil_runtime_close(other);
    ASSERT_STREQ(status(&t, a), "done");
    ASSERT_STREQ(status(&t, c), "pending");
    complete(t.env, kb);
    ASSERT_STREQ(status(&t, c), "running");
    json_t *pending = NULL;
    ASSERT_OK(vg_task_list(t.env, "pending", &pending, E));
    ASSERT_EQ(json_array_size(pending), 16);
    json_decref(pending);
    test_rt_close(&t);
}

/* Every wake record of any status: a refused wake leaves none (its task's start rolled back). */
static int64_t wakes(struct test_rt *t)
{
    struct vg_query q = {.kind = "wake_run"};
    int64_t n = -1;
    ASSERT_OK(vg_store_count(t->env->store, &q, &n, E));
    return n;
}

/* This runtime's view of the task graph (orch_int.h): whether it is in use, and how many
 * transactions it has served since it was last rebuilt from the store. */
static int view_served(struct test_rt *t, size_t *served)
{
    struct vg_task_graph *g = t->env->task_graph;
    *served = g ? g->served : 0;
    return g && g->valid;
}

/* A second runtime on the store of t (a second connection, as a daemon's second worker). */
static struct vg_env *second(struct test_rt *t, vigil_runtime **rt)
{
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t->path};
    ASSERT_OK(vigil_runtime_open(&o, rt, E));
    return vg_runtime_env(*rt);
}

/* Two runtimes ending runs of one graph by turns, as the daemon's two workers do: each one's
 * view is one transaction behind the other's, and catches up on the tasks the other's stamp
 * lists (PERF.md "Session 33") instead of reading the store for every round (the view of 19
 * tasks is not rebuilt before it has served two) and then rebuilding. What it derives is what
 * the store says: the task both ends free starts, once, and the rest stays pending. */
/* proves: S2-031 */
TEST(two_workers_ending_runs_by_turns_keep_their_views_by_catching_up)
{
    struct test_rt t;
    char a[37], b[37], c[37], w0[37], ka[65], kb[65];
    size_t served = 0, before = 0;
    test_rt_open(&t, "task_turns");
    vigil_agent_spec s = {.name = "w0", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w0, E));
    add(&t, "a", NULL, 0, a);
    add(&t, "b", NULL, 0, b);
    add(&t, "c", NULL, 0, c);
    ASSERT_OK(vigil_task_block(t.rt, a, c, E));
    ASSERT_OK(vigil_task_block(t.rt, b, c, E));
    for (int i = 0; i < 16; i++) {
        char x[37];
        add(&t, "x", NULL, 0, x);
        ASSERT_OK(vigil_task_block(t.rt, c, x, E));
    }
    int started = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 4, &started, E)); /* this view: a, b running */
    ASSERT_EQ(started, 2);
    run_key_of(&t, a, ka);
    run_key_of(&t, b, kb);
    vigil_runtime *other = NULL;
    struct vg_env *oe = second(&t, &other);
    ASSERT_OK(vg_task_dispatch(oe, NULL, 0, &started, E)); /* its view, at this one's stamp */
    ASSERT_EQ(started, 0);
    complete(oe, ka); /* the other worker ends a's run: its stamp lists a */
    ASSERT(view_served(&t, &before));
    complete(t.env, kb); /* this one ends b's: it reads a again, and c is free */
    ASSERT(view_served(&t, &served));
    ASSERT(served > before); /* neither bypassed (valid 0) nor rebuilt (served 0) */
    ASSERT_STREQ(status(&t, a), "done");
    ASSERT_STREQ(status(&t, b), "done");
    ASSERT_STREQ(status(&t, c), "running");
    ASSERT_EQ(wakes(&t), 3);
    json_t *pending = NULL;
    ASSERT_OK(vg_task_list(t.env, "pending", &pending, E));
    ASSERT_EQ(json_array_size(pending), 16);
    json_decref(pending);
    vigil_runtime_close(other);
    test_rt_close(&t);
}

/* A task the other worker started while this view held it ready is passed over here: this
 * view, one transaction behind, learns from the other's stamp that it runs (and that the task
 * the other ended is done), so it neither starts it a second time nor counts the freed slot
 * twice; the third task waits for a slot and starts when one frees. */
/* proves: S2-031 */
TEST(a_task_another_worker_started_is_not_started_again_by_a_view_that_caught_up)
{
    struct test_rt t;
    char p[37], q[37], r[37], w0[37], kp[65], kq[65];
    size_t served = 0;
    test_rt_open(&t, "task_turns_ready");
    vigil_agent_spec s = {.name = "w0", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w0, E));
    add(&t, "p", NULL, 0, p);
    add(&t, "q", NULL, 0, q);
    add(&t, "r", NULL, 0, r);
    for (int i = 0; i < 16; i++) {
        char x[37];
        add(&t, "x", NULL, 0, x);
        ASSERT_OK(vigil_task_block(t.rt, r, x, E));
    }
    int started = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, &started, E)); /* p runs; q and r ready here */
    ASSERT_EQ(started, 1);
    run_key_of(&t, p, kp);
    vigil_runtime *other = NULL;
    struct vg_env *oe = second(&t, &other);
    ASSERT_OK(vg_task_dispatch(oe, NULL, 0, &started, E));
    ASSERT_EQ(started, 0);
    complete(oe, kp); /* the other ends p and starts q, the oldest ready */
    ASSERT_STREQ(status(&t, q), "running");
    ASSERT_OK(vigil_task_dispatch(t.rt, 0, &started, E)); /* this view catches up: full */
    ASSERT_EQ(started, 0);
    ASSERT(view_served(&t, &served));
    ASSERT_STREQ(status(&t, r), "ready");
    ASSERT_EQ(wakes(&t), 2);
    run_key_of(&t, q, kq);
    complete(t.env, kq); /* q's end frees the slot: r starts */
    ASSERT_STREQ(status(&t, q), "done");
    ASSERT_STREQ(status(&t, r), "running");
    ASSERT_EQ(wakes(&t), 3);
    vigil_runtime_close(other);
    test_rt_close(&t);
}

/* The dispatcher keeps the agents it may pick, with their loads, between runs' ends. The only
 * agent, paused (pause 1) or put under its kill switch (pause 0) by another connection
 * between two rounds, gets no task from the next round: the task waits ready with no wake,
 * and goes to the agent as soon as the other connection lets it take wakes again. */
static void other_stops_the_only_agent(int pause)
{
    struct test_rt t;
    char a[37], b[37], w0[37], ka[65], kb[65];
    test_rt_open(&t, pause ? "task_pool_paused" : "task_pool_killed");
    vigil_agent_spec s = {.name = "w0", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w0, E));
    ASSERT_OK(vigil_agent_resume(t.rt, w0, "test", E));
    add(&t, "a", NULL, 0, a);
    add(&t, "b", NULL, 0, b);
    int started = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, &started, E)); /* a on w0, the pool kept */
    ASSERT_EQ(started, 1);
    run_key_of(&t, a, ka);
    vigil_runtime *other = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t.path};
    ASSERT_OK(vigil_runtime_open(&o, &other, E));
    if (pause)
        ASSERT_OK(vigil_agent_pause(other, w0, "test", E));
    else
        ASSERT_OK(vigil_kill_set(other, w0, NULL, 1, "test", E));
    complete(t.env, ka); /* the round that would give b to w0 */
    ASSERT_STREQ(status(&t, a), "done");
    ASSERT_STREQ(status(&t, b), "ready");
    ASSERT_EQ(wakes(&t), 1);                              /* a's only */
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, &started, E)); /* still none */
    ASSERT_EQ(started, 0);
    ASSERT_STREQ(status(&t, b), "ready");
    if (pause)
        ASSERT_OK(vigil_agent_resume(other, w0, "test", E));
    else
        ASSERT_OK(vigil_kill_set(other, w0, NULL, 0, "test", E));
    vigil_runtime_close(other);
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, &started, E));
    ASSERT_EQ(started, 1);
    ASSERT_STREQ(status(&t, b), "running");
    ASSERT_EQ(wakes(&t), 2);
    run_key_of(&t, b, kb);
    complete(t.env, kb);
    ASSERT_STREQ(status(&t, b), "done");
    test_rt_close(&t);
}

TEST(the_only_agent_paused_by_another_connection_between_rounds_gets_no_task)
{
    other_stops_the_only_agent(1);
}

TEST(a_kill_switch_another_process_sets_between_rounds_keeps_tasks_from_its_agent)
{
    other_stops_the_only_agent(0);
}

/* A store `name` with one worker w0, tasks a and b, and a dispatched to w0 (its run key in
 * ka): the dispatcher now keeps w0 in its pool for b. */
static void a_running_on_a_kept_pool(struct test_rt *t, const char *name, char w0[37], char a[37],
                                     char b[37], char ka[65])
{
    test_rt_open(t, name);
    vigil_agent_spec s = {.name = "w0", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t->rt, &s, w0, E));
    add(t, "a", NULL, 0, a);
    add(t, "b", NULL, 0, b);
    int started = 0;
    ASSERT_OK(vigil_task_dispatch(t->rt, 1, &started, E));
    ASSERT_EQ(started, 1);
    run_key_of(t, a, ka);
}

/* The dispatcher keeps the agents of a kind between runs' ends (up to 1 s or 64 rounds): one
 * whose kind changed since is not given the next task of its old kind (the wake's enqueue
 * checks the kind again, in the task's transaction); the task waits ready with no wake until
 * an agent of its kind takes it. */
TEST(an_agent_whose_kind_changed_between_rounds_gets_no_task_of_its_old_kind)
{
    struct test_rt t;
    char a[37], b[37], w0[37], w1[37], ka[65];
    int started = 0;
    a_running_on_a_kept_pool(&t, "task_pool_kind", w0, a, b, ka);
    json_t *f = json_pack("{s:s}", "kind", "writer");
    ASSERT_OK(vg_agent_update(t.env, w0, f, E));
    json_decref(f);
    complete(t.env, ka); /* the round that would give b to w0 */
    ASSERT_STREQ(status(&t, a), "done");
    ASSERT_STREQ(status(&t, b), "ready");
    ASSERT_EQ(wakes(&t), 1); /* a's only */
    vigil_agent_spec s1 = {.name = "w1", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s1, w1, E));
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, &started, E));
    ASSERT_EQ(started, 1);
    json_t *tb = NULL;
    ASSERT_OK(vg_task_get(t.env, b, &tb, NULL, E));
    ASSERT_STREQ(jstr(tb, "status"), "running");
    ASSERT_STREQ(jstr(tb, "agent"), w1);
    json_decref(tb);
    test_rt_close(&t);
}

/* An agent deleted by another process while the dispatcher's pool still holds it: the round
 * that would give it a task leaves the task ready and still ends the finished one (before, the
 * wake's "no such agent" failed the whole round), and the next agent of the kind takes it. */
TEST(an_agent_deleted_by_another_process_between_rounds_fails_no_round)
{
    struct test_rt t;
    char a[37], b[37], w0[37], w1[37], ka[65];
    int started = 0;
    a_running_on_a_kept_pool(&t, "task_pool_deleted", w0, a, b, ka);
    vigil_runtime *other = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t.path};
    ASSERT_OK(vigil_runtime_open(&o, &other, E));
    ASSERT_OK(vigil_agent_destroy(other, w0, "test", E));
    ASSERT_OK(vigil_agent_delete(other, w0, E));
    complete(t.env, ka); /* the round that would give b to w0 */
    ASSERT_STREQ(status(&t, a), "done");
    ASSERT_STREQ(status(&t, b), "ready");
    vigil_agent_spec s1 = {.name = "w1", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(other, &s1, w1, E));
    vigil_runtime_close(other);
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, &started, E));
    ASSERT_EQ(started, 1);
    ASSERT_STREQ(status(&t, b), "running");
    test_rt_close(&t);
}

/* A new cap set in a round that loses track of its view (here: the agent refuses the task's
 * wake) still reaches another runtime's view, which was built under the old cap. */
TEST(a_new_cap_set_in_a_round_whose_view_is_lost_reaches_the_other_views)
{
    struct test_rt t;
    char a[37], b[37], w0[37];
    test_rt_open(&t, "task_cap_lost_view");
    vigil_agent_spec s = {.name = "w0", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w0, E));
    ASSERT_OK(vigil_agent_resume(t.rt, w0, "test", E));
    add(&t, "a", NULL, 0, a);
    add(&t, "b", NULL, 0, b);
    int started = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, &started, E)); /* a on w0 */
    ASSERT_EQ(started, 1);
    vigil_runtime *other = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t.path};
    ASSERT_OK(vigil_runtime_open(&o, &other, E));
    ASSERT_OK(vigil_task_dispatch(other, 0, &started, E)); /* its view: cap 1, full */
    ASSERT_EQ(started, 0);
    ASSERT_OK(vigil_agent_pause(other, w0, "test", E));
    ASSERT_OK(vigil_task_dispatch(t.rt, 2, &started, E)); /* cap 2; b refused by w0 */
    ASSERT_EQ(started, 0);
    ASSERT_OK(vigil_agent_resume(other, w0, "test", E));
    ASSERT_OK(vigil_task_dispatch(other, 0, &started, E)); /* reads cap 2: b starts */
    ASSERT_EQ(started, 1);
    ASSERT_STREQ(status(&t, b), "running");
    vigil_runtime_close(other);
    test_rt_close(&t);
}

/* A new cap the dispatcher itself sets keeps its view (no rebuild, no round from the store),
 * and the other runtimes' views read the new cap. */
TEST(a_new_cap_is_kept_by_this_view_and_read_by_another_runtimes)
{
    struct test_rt t;
    char id[6][37], w0[37];
    test_rt_open(&t, "task_new_cap");
    vigil_agent_spec s = {.name = "w0", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, w0, E));
    for (int i = 0; i < 6; i++)
        add(&t, "t", NULL, 0, id[i]);
    int started = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, &started, E));
    ASSERT_EQ(started, 1);
    ASSERT_OK(vigil_task_dispatch(t.rt, 3, &started, E)); /* the cap raised: two more */
    ASSERT_EQ(started, 2);
    vigil_runtime *other = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t.path};
    ASSERT_OK(vigil_runtime_open(&o, &other, E));
    ASSERT_OK(vigil_task_dispatch(other, 0, &started, E)); /* its cap is 3: all taken */
    ASSERT_EQ(started, 0);
    ASSERT_OK(vigil_task_dispatch(other, 4, &started, E));
    ASSERT_EQ(started, 1);
    vigil_runtime_close(other);
    ASSERT_OK(vigil_task_dispatch(t.rt, 0, &started, E)); /* this one reads 4: all taken */
    ASSERT_EQ(started, 0);
    json_t *running = NULL;
    ASSERT_OK(vg_task_list(t.env, "running", &running, E));
    ASSERT_EQ(json_array_size(running), 4);
    json_decref(running);
    test_rt_close(&t);
}

struct other_add {
    vigil_runtime *rt;
    vigil_code rc;
    char id[37], message[256];
    atomic_int done;
};

static void *other_add_main(void *p)
{
    struct other_add *o = p;
    vigil_error err = {0};
    o->rc = vigil_task_add(o->rt, "b", "worker", NULL, 0, o->id, &err);
    snprintf(o->message, sizeof o->message, "%s", err.message);
    atomic_store(&o->done, 1);
    return NULL;
}

/* Two runtimes on one PostgreSQL store (two connections) write tasks at once: the second
 * waits on the task graph's stamp until the first's transaction commits, then writes, where
 * both used to read one revision of it and the second failed its compare-and-swap
 * (ECONFLICT) once the first committed. Run only with VIGIL_PG_URI set (SQLite takes one
 * writer at a time anyway). */
/* proves: S2-036 */
TEST(task_writers_on_two_connections_take_turns_instead_of_conflicting)
{
    const char *uri = getenv("VIGIL_PG_URI");
    if (!uri || !*uri) {
        fprintf(stderr, "skipped: no VIGIL_PG_URI for the two connections\n");
        return;
    }
    struct test_rt t;
    char a[37], first[37], waiting[32] = "0";
    setenv("VIGIL_TEST_RT_PG", "1", 1);
    test_rt_open(&t, "task_pg_turns");
    unsetenv("VIGIL_TEST_RT_PG");
    add(&t, "first", NULL, 0, first); /* the stamp exists */
    vigil_runtime *other = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t.path};
    ASSERT_OK(vigil_runtime_open(&o, &other, E));
    /* This runtime's transaction writes a task (and so the stamp) and stays open. */
    ASSERT_OK(vg_store_begin(t.env->store, E));
    add(&t, "a", NULL, 0, a);
    struct other_add oa = {.rt = other};
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, other_add_main, &oa), 0);
    /* Until the other connection waits for a lock this transaction holds (or has ended). */
    for (int i = 0; !atomic_load(&oa.done) && !strcmp(waiting, "0"); i++) {
        ASSERT(i < 20000); /* 20 s */
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
        vg_test_pg_value("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                         " AND datname = current_database()",
                         waiting, sizeof waiting);
    }
    ASSERT(strcmp(waiting, "0")); /* it waited, not went through or failed at once */
    ASSERT_OK(vg_store_commit(t.env->store, E));
    ASSERT_EQ(pthread_join(th, NULL), 0);
    if (oa.rc)
        TEST_FAIL_("the other runtime's task add failed: %s (%s)", vigil_code_name(oa.rc),
                   oa.message);
    ASSERT_STREQ(status(&t, a), "ready");
    ASSERT_STREQ(status(&t, oa.id), "ready");
    json_t *ready = NULL;
    ASSERT_OK(vg_task_list(t.env, "ready", &ready, E));
    ASSERT_EQ(json_array_size(ready), 3);
    json_decref(ready);
    vigil_runtime_close(other);
    test_rt_close(&t);
}

int main(void)
{
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    RUN(an_edge_that_would_close_a_cycle_is_refused_and_writes_nothing);
    RUN(a_cycle_already_stored_is_detected_at_run_time);
    RUN(two_dispatchers_racing_on_one_task_start_it_once);
    RUN(cancelling_a_task_cancels_what_it_blocks_and_nothing_of_it_starts);
    RUN(cancelling_a_running_task_stops_its_run);
    RUN(task_counts_follow_every_writer_while_kept_between_calls);
    RUN(cancelling_a_tasks_run_ends_the_task_and_frees_its_slot);
    RUN(rerunning_the_run_of_an_ended_task_is_refused_naming_task_add);
    RUN(runs_that_end_together_move_their_tasks_and_refill_the_slots_in_one_call);
    RUN(runs_of_one_workers_fibers_that_end_together_are_recorded_in_one_transaction);
    RUN(the_dispatcher_counts_its_calls_the_ends_they_recorded_and_its_cpu);
    RUN(a_tasks_run_end_and_its_wakes_finish_are_one_transaction);
    RUN(the_ready_set_rebuilt_after_a_restart_dispatches_exactly_the_unblocked_tasks);
    RUN(a_task_finished_by_another_runtime_counts_in_this_ones_view);
    RUN(two_workers_ending_runs_by_turns_keep_their_views_by_catching_up);
    RUN(a_task_another_worker_started_is_not_started_again_by_a_view_that_caught_up);
    RUN(a_task_unblocked_is_ready_by_derivation_and_written_only_when_started);
    RUN(a_task_ready_by_derivation_starts_after_a_restart);
    RUN(a_started_task_is_its_wake_only_and_a_restart_neither_loses_nor_repeats_it);
    RUN(a_failed_tasks_retry_waits_an_exponential_backoff_on_the_clock);
    RUN(a_tasks_result_and_a_retrys_error_are_cut_where_a_character_ends);
    RUN(a_daemon_starts_a_task_added_while_it_runs_once_the_dispatcher_was_started);
    RUN(two_daemons_looking_for_added_tasks_start_each_once);
    RUN(a_tasks_wake_carries_its_title_and_is_keyed_by_the_task_and_its_attempt);
    RUN(a_round_without_the_view_counts_tasks_running_by_their_wakes_against_the_slots);
    RUN(a_task_waits_ready_while_no_agent_of_its_kind_takes_wakes);
    RUN(a_tasks_run_queued_before_a_kill_switch_or_a_pause_waits_and_runs_after_it);
    RUN(the_only_agent_paused_by_another_connection_between_rounds_gets_no_task);
    RUN(a_kill_switch_another_process_sets_between_rounds_keeps_tasks_from_its_agent);
    RUN(an_agent_whose_kind_changed_between_rounds_gets_no_task_of_its_old_kind);
    RUN(an_agent_deleted_by_another_process_between_rounds_fails_no_round);
    RUN(a_new_cap_is_kept_by_this_view_and_read_by_another_runtimes);
    RUN(a_new_cap_set_in_a_round_whose_view_is_lost_reaches_the_other_views);
    RUN(task_writers_on_two_connections_take_turns_instead_of_conflicting);
    RUN(a_dag_of_1000_tasks_with_diamonds_runs_in_dependency_order_within_its_slots);
    return 0;
}
