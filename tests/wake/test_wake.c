/*
 * test_wake.c: notifications, subscriptions, the wake queue and run log, leases, recovery, the
 * failure policy and self-notification suppression, all on the test clock (no sleeping).
 */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/rt.h"
#include "helpers/fault_store.h"
#include "helpers/wake_runners.h"

#include "agent/agent.h"
#include "base/hash.h"
#include "journal/journal.h"
#include "wake/wake.h"
#include "wake/wake_int.h"

static void make_agent(struct test_rt *t, char id[37])
{
    static int made;
    char name[32];
    snprintf(name, sizeof name, "watcher-%d", made++);
    vigil_agent_spec spec = {.name = name, .kind = "task_agent", .mode = "autonomous"};
    ASSERT_OK(vigil_agent_create(t->rt, &spec, id, E));
    ASSERT_OK(vg_agent_transition(t->env, id, VIGIL_LIFECYCLE_ACTIVE, "test", E));
}

static void sub_add(struct test_rt *t, const char *agent, const char *const *tokens, size_t n,
                    char out[201])
{
    struct vg_sub_spec s = {.agent_id = agent, .tokens = tokens, .n_tokens = n};
    ASSERT_OK(vg_sub_add(t->env, &s, out, E));
}

static int64_t count_runs(struct test_rt *t, const char *agent, const char *status)
{
    struct vg_query q = {.kind = "wake_run", .owner = agent, .k1 = status};
    int64_t n = 0;
    ASSERT_OK(vg_store_count(t->env->store, &q, &n, E));
    return n;
}

static json_t *run_get(struct test_rt *t, const char *key)
{
    json_t *r = NULL;
    ASSERT_OK(vg_env_get_json(t->env, "wake_run", key, &r, NULL, E));
    return r;
}

static const char *js(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* Process a batch of tokens built directly (no debounce). */
static void batch(struct vg_wake *w, const char *const *tokens, size_t n, const char *source,
                  const char *seq, struct vg_match_stats *st)
{
    struct vg_wake_batch b;
    ASSERT_OK(vg_wake_batch_build(&b, tokens, n, source, seq, E));
    ASSERT_OK(vg_wake_batch_process(w, &b, st, E));
    vg_wake_batch_release(&b);
}

/* proves: S0-009 S0-015 */
TEST(classifier_puts_each_token_in_one_class)
{
    ASSERT_EQ(vg_token_classify("TASK"), VG_TOKEN_KEY);
    ASSERT_EQ(vg_token_classify("DAY_PLAN"), VG_TOKEN_KEY);
    ASSERT_EQ(vg_token_classify("AGENT_STATE_CHANGED"), VG_TOKEN_KEY);
    ASSERT_EQ(vg_token_classify("workout.running"), VG_TOKEN_SUBTYPE);
    ASSERT_EQ(vg_token_classify("workout.data.workoutType"), VG_TOKEN_SUBTYPE);
    ASSERT_EQ(vg_token_classify("0193a5b2-7c1d-7e00-8000-000000000001"), VG_TOKEN_ENTITY);
    ASSERT_EQ(vg_token_classify("task-42"), VG_TOKEN_ENTITY);
    ASSERT_EQ(vg_token_classify("workout."), VG_TOKEN_ENTITY);
    ASSERT_EQ(vg_token_classify("Task"), VG_TOKEN_ENTITY);
}

/* proves: S0-008 S0-160 S3-028 */
TEST(debounce_merges_rapid_tokens_into_one_batch_and_one_run)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], sub[201];
    test_rt_open(&t, "wake_debounce");
    make_agent(&t, a);
    const char *toks[] = {"TASK"};
    sub_add(&t, a, toks, 1, sub);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    char buf[16] = "TASK"; /* the caller may reuse its buffer right after */
    const char *in1[] = {buf, "task-1"};
    ASSERT_OK(vg_wake_intake(&w, in1, 2, NULL, VG_ORIGIN_LOCAL, E));
    snprintf(buf, sizeof buf, "junk");
    vg_test_clock_advance(&t.clock, 40);
    const char *in2[] = {"TASK", "task-2"};
    ASSERT_OK(vg_wake_intake(&w, in2, 2, NULL, VG_ORIGIN_LOCAL, E));
    const char *sync1[] = {"TASK", "task-9"};
    ASSERT_OK(vg_wake_intake(&w, sync1, 2, NULL, VG_ORIGIN_SYNC, E));
    int n = -1;
    ASSERT_OK(vg_wake_intake_flush(&w, 0, &n, E)); /* window still open */
    ASSERT_EQ(n, 0);
    ASSERT_EQ(vg_wake_intake_deadline(&w), t.clock.wall_ms + 60);
    vg_test_clock_advance(&t.clock, 60); /* local window (100 ms) closed; sync (1 s) open */
    ASSERT_OK(vg_wake_intake_flush(&w, 0, &n, E));
    ASSERT_EQ(n, 1);
    ASSERT_EQ(count_runs(&t, a, "queued"), 1);
    json_t *tokens = NULL;
    {
        struct vg_wake_job job;
        int got = 0;
        ASSERT_OK(vg_wake_claim(&w, &job, &got, E));
        ASSERT_EQ(got, 1);
        tokens = json_incref(job.tokens);
        ASSERT_OK(vg_wake_finish(&w, &job, VG_WAKE_COMPLETED, NULL, E));
        vg_wake_job_release(&job);
    }
    ASSERT_EQ(json_array_size(tokens), 3); /* TASK, task-1, task-2: distinct, merged */
    json_decref(tokens);
    vg_test_clock_advance(&t.clock, 1000);
    ASSERT_OK(vg_wake_intake_flush(&w, 0, &n, E));
    ASSERT_EQ(n, 1); /* the sync-origin batch, after its longer window */
    ASSERT_EQ(count_runs(&t, a, "queued"), 1);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* proves: S0-014 S0-160 S3-074 S0-159 */
TEST(duplicate_and_overlapping_batches_give_one_run_per_coalesced_batch)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], sub[201];
    struct vg_match_stats st;
    test_rt_open(&t, "wake_dup");
    make_agent(&t, a);
    const char *toks[] = {"TASK", "task-1"};
    sub_add(&t, a, toks, 2, sub);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    const char *b1[] = {"TASK", "task-1"};
    batch(&w, b1, 2, NULL, "n1", &st);
    ASSERT_EQ(st.matched_subs, 1); /* two matching tokens, one subscription, one wake */
    ASSERT_EQ(st.enqueued, 1);
    batch(&w, b1, 2, NULL, "n1", &st); /* the same batch delivered again */
    ASSERT_EQ(st.duplicate, 1);
    ASSERT_EQ(st.enqueued + st.merged, 0);
    /* Identities are kept for a week, then pruned. */
    int pruned = -1;
    ASSERT_OK(vg_wake_prune_batches(t.env, t.clock.wall_ms - 1, 0, &pruned, E));
    ASSERT_EQ(pruned, 0);
    const char *b2[] = {"task-1", "TASK", "task-2"}; /* overlapping, while one is queued */
    batch(&w, b2, 3, NULL, "n2", &st);
    ASSERT_EQ(st.merged, 1);
    ASSERT_EQ(count_runs(&t, a, "queued"), 1);
    int ran = 0;
    struct vg_wake_runner *r = NULL;
    ASSERT_OK(vg_wake_runner_new("echo", NULL, &r, E));
    ASSERT_OK(vg_wake_drain(&w, r, 0, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_EQ(count_runs(&t, a, "completed"), 1);
    vg_test_clock_advance(&t.clock, 8 * 24 * 3600000LL);
    ASSERT_OK(vg_wake_prune_batches(t.env, t.clock.wall_ms - 7 * 24 * 3600000LL, 0, &pruned, E));
    ASSERT_EQ(pruned, 2);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* proves: S0-103 S0-085 S0-102 S3-029 S0-095 S3-030 S3-074 S0-159 */
TEST(run_keys_and_thread_ids_are_deterministic)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], sub[201], key[65], expect[65];
    enum vg_enqueue_result res;
    test_rt_open(&t, "wake_keys");
    make_agent(&t, a);
    const char *toks[] = {"TASK"};
    sub_add(&t, a, toks, 1, sub);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    struct vg_wake_req req = {.reason = VG_REASON_SUBSCRIPTION,
                              .agent_id = a,
                              .reason_id = sub,
                              .batch_identity = "batch-x"};
    ASSERT_OK(vg_wake_enqueue(&w, &req, key, &res, E));
    ASSERT_EQ(res, VG_ENQ_NEW);
    const char *parts[] = {a, sub, "batch-x", "1"};
    vg_sha256_hex_parts(expect, parts, 4);
    ASSERT_STREQ(key, expect);
    json_t *run = run_get(&t, key);
    char thread[200];
    snprintf(thread, sizeof thread, "%s:run:%s", a, key);
    ASSERT_STREQ(js(run, "thread_id"), thread);
    ASSERT_STREQ(js(run, "status"), "queued");
    json_decref(run);
    json_t *state = NULL;
    ASSERT_OK(vg_state_get(t.env, a, &state, NULL, E));
    ASSERT_EQ(json_integer_value(json_object_get(state, "wake_counter")), 1);
    json_decref(state);
    /* Run it, then the same tokens again: the counter gives a new key, and it runs too. */
    struct vg_wake_runner *r = NULL;
    int ran;
    ASSERT_OK(vg_wake_runner_new("echo", NULL, &r, E));
    ASSERT_OK(vg_wake_drain(&w, r, 0, &ran, E));
    char key2[65];
    ASSERT_OK(vg_wake_enqueue(&w, &req, key2, &res, E));
    ASSERT_EQ(res, VG_ENQ_NEW);
    ASSERT(strcmp(key, key2) != 0);
    ASSERT_OK(vg_wake_drain(&w, r, 0, &ran, E));
    ASSERT_EQ(count_runs(&t, a, "completed"), 2);
    /* Timer: H(agent, timer, scheduled time); the same firing twice is one run. */
    struct vg_wake_req tr = {.reason = VG_REASON_TIMER,
                             .agent_id = a,
                             .reason_id = "tm-1",
                             .scheduled_ms = 1767250800000};
    ASSERT_OK(vg_wake_enqueue(&w, &tr, key, &res, E));
    vg_run_key_timer(expect, a, "tm-1", 1767250800000);
    ASSERT_STREQ(key, expect);
    ASSERT_OK(vg_wake_drain(&w, r, 0, &ran, E));
    ASSERT_OK(vg_wake_enqueue(&w, &tr, key, &res, E)); /* a second device fires it too */
    ASSERT_EQ(res, VG_ENQ_DUPLICATE);
    ASSERT_OK(vg_wake_drain(&w, r, 0, &ran, E));
    ASSERT_EQ(ran, 0); /* S0-095: a completed run key never runs again */
    /* User: H(agent, session, turn), in the session's thread, never merged. */
    json_t *seed = json_string("hello");
    struct vg_wake_req ur = {.reason = VG_REASON_USER,
                             .agent_id = a,
                             .session_id = "s1",
                             .turn_id = "t1",
                             .seed_input = seed};
    ASSERT_OK(vg_wake_enqueue(&w, &ur, key, &res, E));
    vg_run_key_user(expect, a, "s1", "t1");
    ASSERT_STREQ(key, expect);
    run = run_get(&t, key);
    snprintf(thread, sizeof thread, "%s:session:s1", a);
    ASSERT_STREQ(js(run, "thread_id"), thread);
    ASSERT_STREQ(js(run, "seed_input"), "hello");
    json_decref(run);
    json_decref(seed);
    vg_wake_runner_free(r);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* A wake's log entry holds its run key (the record's id: the same key twice is one entry), its
 * agent, reason and reason id, thread, status, the logical change that woke it (the batch's
 * identity), when it was created, started and completed, and the error of a failed run.
 * proves: S3-014 */
TEST(a_wake_log_entry_holds_the_wakes_identity_times_and_outcome)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], sub[201], key[65], thread[200];
    enum vg_enqueue_result res;
    test_rt_open(&t, "wake_log_entry");
    make_agent(&t, a);
    const char *toks[] = {"TASK"};
    sub_add(&t, a, toks, 1, sub);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    struct vg_wake_req req = {.reason = VG_REASON_SUBSCRIPTION,
                              .agent_id = a,
                              .reason_id = sub,
                              .batch_identity = "batch-7"};
    ASSERT_OK(vg_wake_enqueue(&w, &req, key, &res, E));
    json_t *run = run_get(&t, key);
    snprintf(thread, sizeof thread, "%s:run:%s", a, key);
    ASSERT_STREQ(js(run, "run_key"), key);
    ASSERT_STREQ(js(run, "agent_id"), a);
    ASSERT_STREQ(js(run, "reason"), "subscription");
    ASSERT_STREQ(js(run, "reason_id"), sub);
    ASSERT_STREQ(js(run, "thread_id"), thread);
    ASSERT_STREQ(js(run, "status"), "queued");
    ASSERT_STREQ(js(run, "logical_change_key"), "batch-7");
    ASSERT(js(run, "created_at"));
    ASSERT(json_is_null(json_object_get(run, "started_at")));
    ASSERT(json_is_null(json_object_get(run, "completed_at")));
    ASSERT(json_is_null(json_object_get(run, "error")));
    json_decref(run);
    struct vg_wake_job job;
    int got = 0;
    vg_test_clock_advance(&t.clock, 5);
    ASSERT_OK(vg_wake_claim(&w, &job, &got, E));
    ASSERT_EQ(got, 1);
    run = run_get(&t, key);
    ASSERT_STREQ(js(run, "status"), "started");
    ASSERT(js(run, "started_at") && strcmp(js(run, "started_at"), js(run, "created_at")) > 0);
    json_decref(run);
    vg_test_clock_advance(&t.clock, 5);
    ASSERT_OK(vg_wake_finish(&w, &job, VG_WAKE_FAILED_FINAL, "the model is down", E));
    vg_wake_job_release(&job);
    run = run_get(&t, key);
    ASSERT_STREQ(js(run, "status"), "failed");
    ASSERT_STREQ(js(run, "error"), "the model is down");
    ASSERT(js(run, "completed_at") && strcmp(js(run, "completed_at"), js(run, "started_at")) > 0);
    json_decref(run);
    /* The same run key again is the same entry, not a second one. */
    struct vg_wake_req tr = {
        .reason = VG_REASON_TIMER, .agent_id = a, .reason_id = "tm-1", .scheduled_ms = 1000};
    ASSERT_OK(vg_wake_enqueue(&w, &tr, key, &res, E));
    ASSERT_EQ(res, VG_ENQ_NEW);
    ASSERT_OK(vg_wake_claim(&w, &job, &got, E));
    ASSERT_OK(vg_wake_finish(&w, &job, VG_WAKE_COMPLETED, NULL, E));
    vg_wake_job_release(&job);
    ASSERT_OK(vg_wake_enqueue(&w, &tr, key, &res, E));
    ASSERT_EQ(res, VG_ENQ_DUPLICATE);
    ASSERT_EQ(count_runs(&t, a, "completed"), 1);
    ASSERT_EQ(count_runs(&t, a, "queued"), 0);
    /* A wake the agent cannot take is logged skipped, with why. */
    ASSERT_OK(vigil_agent_pause(t.rt, a, "test", E));
    struct vg_wake_req m = {.reason = VG_REASON_MANUAL, .agent_id = a};
    ASSERT_OK(vg_wake_enqueue(&w, &m, key, &res, E));
    ASSERT_EQ(res, VG_ENQ_SKIPPED);
    run = run_get(&t, key);
    ASSERT_STREQ(js(run, "status"), "skipped");
    ASSERT(js(run, "skip_reason"));
    json_decref(run);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* Enqueueing a wake with the store failing at each of its calls in turn: the wake counter moves
 * and the wake's log entry is written together or not at all, so a crash never leaves a counter
 * value that no entry holds or one that the next wake would take again. proves: S3-015 */
TEST(the_wake_counter_and_the_log_entry_are_written_in_one_transaction)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], name[48], key[65];
    enum vg_enqueue_result res;
    long calls = 0;
    for (long nth = 0; nth == 0 || nth <= calls; nth++) {
        snprintf(name, sizeof name, "wake_counter_fault_%ld", nth);
        test_rt_open(&t, name);
        make_agent(&t, a);
        ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
        struct vg_wake_req first = {
            .reason = VG_REASON_USER, .agent_id = a, .session_id = "s", .turn_id = "t1"};
        ASSERT_OK(vg_wake_enqueue(&w, &first, key, &res, E));
        struct vg_store *fault = NULL;
        ASSERT_OK(vg_store_fault_wrap(t.env->store, &fault, E));
        t.env->store = fault;
        vg_store_fault_arm(fault, nth, VIGIL_EIO);
        struct vg_wake_req second = {
            .reason = VG_REASON_USER, .agent_id = a, .session_id = "s", .turn_id = "t2"};
        vigil_code rc = vg_wake_enqueue(&w, &second, key, &res, NULL);
        if (!nth)
            ASSERT((calls = vg_store_fault_calls(fault)) > 2);
        vg_store_fault_arm(fault, 0, VIGIL_OK);
        int64_t counter = 0, rev = 0;
        ASSERT_OK(vg_wake_counter_read(t.env, a, &counter, &rev, E));
        int64_t entries = count_runs(&t, a, "queued");
        if (rc == VIGIL_OK ? counter != 2 || entries != 2 : counter != 1 || entries != 1)
            TEST_FAIL_("store call %ld of %ld failed: enqueue %s, counter %lld, %lld entries", nth,
                       calls, vigil_code_name(rc), (long long)counter, (long long)entries);
        /* The next wake takes the next number, whatever happened. */
        struct vg_wake_req third = {
            .reason = VG_REASON_USER, .agent_id = a, .session_id = "s", .turn_id = "t3"};
        ASSERT_OK(vg_wake_enqueue(&w, &third, key, &res, E));
        ASSERT_EQ(res, VG_ENQ_NEW);
        ASSERT_OK(vg_wake_counter_read(t.env, a, &counter, &rev, E));
        ASSERT_EQ(counter, count_runs(&t, a, "queued"));
        vg_wake_release(&w);
        test_rt_close(&t);
    }
}

/* One of two processes enqueueing an agent's wakes on one store at once. */
struct enqueuer {
    const char *path, *agent, *session;
    vigil_code rc;
    char msg[256];
};

#define ENQUEUES 25

static void *enqueue_many(void *arg)
{
    struct enqueuer *q = arg;
    vigil_runtime_options ro = {.store_uri = q->path};
    vigil_runtime *rt = NULL;
    struct vg_wake w;
    vigil_error err = {0};
    if ((q->rc = vigil_runtime_open(&ro, &rt, &err)) ||
        (q->rc = vg_wake_init(&w, vg_runtime_env(rt), NULL, &err))) {
        snprintf(q->msg, sizeof q->msg, "%s", err.message);
        vigil_runtime_close(rt);
        return NULL;
    }
    for (int i = 0; i < ENQUEUES && !q->rc; i++) {
        char turn[32], key[65];
        snprintf(turn, sizeof turn, "turn-%d", i);
        struct vg_wake_req req = {.reason = VG_REASON_USER,
                                  .agent_id = q->agent,
                                  .session_id = q->session,
                                  .turn_id = turn};
        if ((q->rc = vg_wake_enqueue(&w, &req, key, NULL, &err)))
            snprintf(q->msg, sizeof q->msg, "enqueue %d: %.200s", i, err.message);
    }
    vg_wake_release(&w);
    vigil_runtime_close(rt);
    return NULL;
}

/* Two runtimes enqueue wakes of one agent at the same time: each wake takes a counter value of
 * its own (the counter ends at the number of wakes, each in the log once). proves: S3-015 */
TEST(concurrent_enqueues_never_share_a_wake_counter_value)
{
    struct test_rt t;
    char a[37];
    test_rt_open(&t, "wake_counter_concurrent");
    make_agent(&t, a);
    struct enqueuer q[2] = {{.path = t.path, .agent = a, .session = "one"},
                            {.path = t.path, .agent = a, .session = "two"}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        ASSERT_EQ(pthread_create(&th[i], NULL, enqueue_many, &q[i]), 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        if (q[i].rc)
            TEST_FAIL_("enqueuer %d: %s", i, q[i].msg);
    }
    int64_t counter = 0, rev = 0;
    ASSERT_OK(vg_wake_counter_read(t.env, a, &counter, &rev, E));
    ASSERT_EQ(counter, 2 * ENQUEUES);
    ASSERT_EQ(count_runs(&t, a, "queued"), 2 * ENQUEUES);
    test_rt_close(&t);
}

/* proves: S0-019 S3-028 S3-074 */
TEST(two_wakes_for_a_busy_agent_merge)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], sub1[201], sub2[201], k1[65], k2[65], k3[65];
    enum vg_enqueue_result res;
    test_rt_open(&t, "wake_merge");
    make_agent(&t, a);
    const char *t1[] = {"TASK"}, *t2[] = {"workout.running"};
    sub_add(&t, a, t1, 1, sub1);
    sub_add(&t, a, t2, 1, sub2);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    /* The agent is busy: one run started, holding its lease. */
    struct vg_wake_req busy = {.reason = VG_REASON_MANUAL, .agent_id = a};
    ASSERT_OK(vg_wake_enqueue(&w, &busy, k1, &res, E));
    struct vg_wake_job job;
    int got;
    ASSERT_OK(vg_wake_claim(&w, &job, &got, E));
    ASSERT_EQ(got, 1);
    const char *b1[] = {"TASK", "task-1"}, *b2[] = {"workout.running", "w-7"};
    struct vg_wake_req r1 = {.reason = VG_REASON_SUBSCRIPTION,
                             .agent_id = a,
                             .reason_id = sub1,
                             .batch_identity = "b1",
                             .tokens = b1,
                             .n_tokens = 2};
    struct vg_wake_req r2 = {.reason = VG_REASON_SUBSCRIPTION,
                             .agent_id = a,
                             .reason_id = sub2,
                             .batch_identity = "b2",
                             .tokens = b2,
                             .n_tokens = 2};
    ASSERT_OK(vg_wake_enqueue(&w, &r1, k2, &res, E));
    ASSERT_EQ(res, VG_ENQ_NEW);
    ASSERT_OK(vg_wake_enqueue(&w, &r2, k3, &res, E));
    ASSERT_EQ(res, VG_ENQ_MERGED);
    ASSERT_STREQ(k3, k2);
    ASSERT_EQ(count_runs(&t, a, "queued"), 1);
    /* Single flight: nothing else of this agent can start while it runs. */
    struct vg_wake_job other;
    ASSERT_OK(vg_wake_claim(&w, &other, &got, E));
    ASSERT_EQ(got, 0);
    ASSERT_OK(vg_wake_finish(&w, &job, VG_WAKE_COMPLETED, NULL, E));
    vg_wake_job_release(&job);
    ASSERT_OK(vg_wake_claim(&w, &job, &got, E));
    ASSERT_EQ(got, 1);
    ASSERT_STREQ(job.run_key, k2);
    ASSERT_EQ(json_array_size(job.tokens), 4); /* TASK, task-1, workout.running, w-7 */
    json_t *run = run_get(&t, k2);
    ASSERT_EQ(json_array_size(json_object_get(run, "merged")), 1);
    json_decref(run);
    ASSERT_OK(vg_wake_finish(&w, &job, VG_WAKE_COMPLETED, NULL, E));
    vg_wake_job_release(&job);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* proves: S0-020 */
TEST(lease_fencing_refuses_an_old_epoch)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], k[65];
    enum vg_enqueue_result res;
    test_rt_open(&t, "wake_lease");
    make_agent(&t, a);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    struct vg_wake_req m = {.reason = VG_REASON_MANUAL, .agent_id = a};
    ASSERT_OK(vg_wake_enqueue(&w, &m, k, &res, E));
    struct vg_wake_job old;
    int got, n;
    ASSERT_OK(vg_wake_claim(&w, &old, &got, E));
    ASSERT_EQ(got, 1);
    ASSERT_OK(vg_wake_lease_check(t.env, a, old.epoch, E));
    /* The run is presumed dead: its lease expires and recovery hands it to a successor. */
    vg_test_clock_advance(&t.clock, w.cfg.lease_ms + 1);
    ASSERT_OK(vg_wake_recover(&w, NULL, &n, E));
    ASSERT_EQ(n, 1);
    ASSERT_CODE(VIGIL_ESTATE, vg_wake_lease_check(t.env, a, old.epoch, NULL));
    struct vg_wake_job next;
    ASSERT_OK(vg_wake_claim(&w, &next, &got, E));
    ASSERT_EQ(got, 1);
    ASSERT_STREQ(next.run_key, old.run_key);
    ASSERT(next.epoch > old.epoch);
    /* The old run wakes up and tries to write and to finish: both refused. */
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_ESTATE, vg_wake_lease_check(t.env, a, old.epoch, &err));
    ASSERT_CONTAINS(err.message, "superseded");
    ASSERT_CODE(VIGIL_ESTATE, vg_wake_finish(&w, &old, VG_WAKE_COMPLETED, NULL, NULL));
    ASSERT_OK(vg_wake_lease_check(t.env, a, next.epoch, E));
    ASSERT_OK(vg_wake_finish(&w, &next, VG_WAKE_COMPLETED, NULL, E));
    json_t *run = run_get(&t, next.run_key);
    ASSERT_STREQ(js(run, "status"), "completed");
    ASSERT_EQ(json_integer_value(json_object_get(run, "attempts")), 2);
    json_decref(run);
    vg_wake_job_release(&old);
    vg_wake_job_release(&next);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* proves: S3-016 S0-172 S0-173 */
TEST(recovery_requeues_started_runs_with_the_same_run_key)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], sub[201];
    struct vg_match_stats st;
    test_rt_open(&t, "wake_recover");
    make_agent(&t, a);
    const char *toks[] = {"TASK"};
    sub_add(&t, a, toks, 1, sub);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    snprintf(w.holder, sizeof w.holder, "daemon:1");
    batch(&w, toks, 1, NULL, "n1", &st);
    struct vg_wake_job job;
    int got, n;
    ASSERT_OK(vg_wake_claim(&w, &job, &got, E));
    ASSERT_EQ(got, 1);
    char key[65];
    memcpy(key, job.run_key, sizeof key);
    /* Effects written by the first attempt, then a crash (the process is gone). */
    struct vg_wake_runner *r = NULL;
    ASSERT_OK(vg_wake_runner_new("test:steps=3", NULL, &r, E));
    static const volatile int never = 0;
    struct vg_buf etext;
    vg_buf_init(&etext, 1024);
    ASSERT_EQ(vg_wake_runner_run(r, t.env, &job, &never, &etext), VG_WAKE_COMPLETED);
    vg_buf_release(&etext);
    vg_wake_job_release(&job);
    vg_wake_release(&w);
    test_rt_reopen(&t);
    /* Restart: the old daemon's lease has not expired, but its holder is known dead. */
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    snprintf(w.holder, sizeof w.holder, "daemon:2");
    ASSERT_OK(vg_wake_recover(&w, "daemon:", &n, E));
    ASSERT_EQ(n, 1);
    json_t *run = run_get(&t, key);
    ASSERT_STREQ(js(run, "status"), "queued");
    ASSERT_STREQ(js(run, "reason"), "recovery");
    ASSERT_STREQ(js(run, "original_reason"), "subscription");
    json_decref(run);
    int ran;
    ASSERT_OK(vg_wake_drain(&w, r, 0, &ran, E));
    ASSERT_EQ(ran, 1);
    run = run_get(&t, key);
    ASSERT_STREQ(js(run, "status"), "completed");
    ASSERT_EQ(json_integer_value(json_object_get(run, "attempts")), 2);
    json_decref(run);
    /* Three effects in all: the re-run found every step done and repeated none. */
    struct vg_query q = {.kind = "test_effect", .k1 = key};
    int64_t effects = 0;
    ASSERT_OK(vg_store_count(t.env->store, &q, &effects, E));
    ASSERT_EQ(effects, 3);
    ASSERT_OK(vg_wake_recover(&w, "daemon:", &n, E));
    ASSERT_EQ(n, 0);
    vg_wake_runner_free(r);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* A run reads its lease at every write phase (the fence). The lease a take or a give-back wrote
 * is kept parsed under its text, so the first fence after a take, and the next turn's take after
 * a give-back, read the parsed value instead of parsing the text again: a shared read hands out
 * the kept value itself, the same one each time (a text read first is parsed, and the next read
 * parses it again). */
TEST(the_lease_written_is_read_back_without_parsing)
{
    struct test_rt t;
    char a[37];
    int64_t epoch = 0;
    int got = 0;
    json_t *first = NULL, *second = NULL;
    test_rt_open(&t, "wake_lease_noted");
    make_agent(&t, a);
    ASSERT_OK(vg_wake_lease_take(t.env, a, "chat:1", 60000, &epoch, &got, E));
    ASSERT_EQ(got, 1);
    /* The agent's first lease is inserted; its next take and give-back update it. */
    ASSERT_OK(vg_wake_lease_give_back(t.env, a, epoch, E));
    ASSERT_OK(vg_wake_lease_take(t.env, a, "chat:2", 60000, &epoch, &got, E));
    ASSERT_EQ(got, 1);
    ASSERT_OK(vg_env_get_json_shared(t.env, "agent_lease", a, &first, E));
    ASSERT_OK(vg_env_get_json_shared(t.env, "agent_lease", a, &second, E));
    ASSERT(first == second);
    ASSERT_STREQ(js(first, "holder"), "chat:2");
    json_decref(first);
    json_decref(second);
    ASSERT_OK(vg_wake_lease_give_back(t.env, a, epoch, E));
    ASSERT_OK(vg_env_get_json_shared(t.env, "agent_lease", a, &first, E));
    ASSERT_OK(vg_env_get_json_shared(t.env, "agent_lease", a, &second, E));
    ASSERT(first == second);
    ASSERT_STREQ(js(first, "holder"), "");
    json_decref(first);
    json_decref(second);
    test_rt_close(&t);
}

/* The agent_lease gets of fence checks of every agent in ids, in one transaction. */
static long lease_gets(struct test_rt *t, struct vg_store *counting, char (*ids)[37],
                       const int64_t *epochs, int n)
{
    vg_store_fault_watch(counting, "agent_lease");
    ASSERT_OK(vg_store_begin(t->env->store, E));
    for (int i = 0; i < n; i++)
        ASSERT_OK(vg_wake_lease_check(t->env, ids[i], epochs[i], E));
    ASSERT_OK(vg_store_end(t->env->store, VIGIL_OK, E));
    return vg_store_fault_gets(counting);
}

/* Agents taking turns in one thread (vigil_chat_many, a daemon's loop thread) check their
 * leases at every phase of a step. With more of them than the env keeps other records of, a
 * check reads no lease while none changed; one agent's give-back and take leave the others'
 * unread; a lease another connection moved is read again, and the superseded run fenced off. */
TEST(agents_taking_turns_check_their_leases_without_reading_them)
{
    enum { N = 3 * VG_ENV_KEPT_READS };
    struct test_rt t;
    char ids[N][37];
    int64_t epochs[N];
    int got = 0;
    test_rt_open(&t, "wake_lease_epochs");
    for (int i = 0; i < N; i++) {
        make_agent(&t, ids[i]);
        ASSERT_OK(vg_wake_lease_take(t.env, ids[i], "chat:1", 60000, &epochs[i], &got, E));
        ASSERT_EQ(got, 1);
    }
    struct vg_store *counting = NULL; /* closed with the runtime, and the store it wraps */
    ASSERT_OK(vg_store_fault_wrap(t.env->store, &counting, E));
    t.env->store = counting;
    ASSERT(lease_gets(&t, counting, ids, epochs, N) <= N);
    ASSERT_EQ(lease_gets(&t, counting, ids, epochs, N), 0);
    ASSERT_OK(vg_wake_lease_give_back(t.env, ids[0], epochs[0], E));
    ASSERT_OK(vg_wake_lease_take(t.env, ids[0], "chat:2", 60000, &epochs[0], &got, E));
    ASSERT_EQ(got, 1);
    vg_store_fault_watch(counting, "agent_lease");
    ASSERT_OK(vg_store_begin(t.env->store, E));
    ASSERT_EQ(vg_wake_lease_check(t.env, ids[0], epochs[0] - 1, NULL), VIGIL_ESTATE);
    ASSERT_OK(vg_store_end(t.env->store, VIGIL_OK, E));
    ASSERT_EQ(lease_gets(&t, counting, ids, epochs, N), 0);
    /* Another connection takes agent 1 after its give-back: this one's run at the old epoch
     * is fenced off. */
    ASSERT_OK(vg_wake_lease_give_back(t.env, ids[1], epochs[1], E));
    vigil_runtime_options ro = {.store_uri = t.path};
    vigil_runtime *other = NULL;
    int64_t taken = 0;
    ASSERT_OK(vigil_runtime_open(&ro, &other, E));
    ASSERT_OK(vg_wake_lease_take(vg_runtime_env(other), ids[1], "chat:3", 60000, &taken, &got, E));
    ASSERT_EQ(got, 1);
    vigil_runtime_close(other);
    ASSERT_OK(vg_store_begin(t.env->store, E));
    ASSERT_EQ(vg_wake_lease_check(t.env, ids[1], epochs[1], NULL), VIGIL_ESTATE);
    ASSERT_OK(vg_wake_lease_check(t.env, ids[1], taken, E));
    ASSERT_OK(vg_store_end(t.env->store, VIGIL_OK, E));
    test_rt_close(&t);
}

/* A run whose lease expired and whose agent was since taken by someone else (a chat turn) is
 * re-queued, but the newer holder keeps its lease. */
TEST(recovery_leaves_a_newer_lease_alone)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], sub[201];
    struct vg_match_stats st;
    test_rt_open(&t, "wake_recover_newer");
    make_agent(&t, a);
    const char *toks[] = {"TASK"};
    sub_add(&t, a, toks, 1, sub);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    batch(&w, toks, 1, NULL, "n1", &st);
    struct vg_wake_job job;
    int got, n;
    ASSERT_OK(vg_wake_claim(&w, &job, &got, E));
    ASSERT_EQ(got, 1);
    char key[65];
    memcpy(key, job.run_key, sizeof key);
    vg_wake_job_release(&job);
    /* The run's lease expires; a chat turn takes the agent. */
    vg_test_clock_advance(&t.clock, w.cfg.lease_ms + 1);
    int64_t chat_epoch = 0;
    ASSERT_OK(vg_wake_lease_take(t.env, a, "chat:1", 60000, &chat_epoch, &got, E));
    ASSERT_EQ(got, 1);
    ASSERT_OK(vg_wake_recover(&w, NULL, &n, E));
    ASSERT_EQ(n, 1);
    json_t *run = run_get(&t, key);
    ASSERT_STREQ(js(run, "status"), "queued");
    json_decref(run);
    /* The chat still holds the agent: its writes pass the fence. */
    ASSERT_OK(vg_wake_lease_check(t.env, a, chat_epoch, E));
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* A user turn re-queued by recovery keeps its own input: a later autonomous wake is queued
 * beside it, never merged into it. */
TEST(a_recovered_user_turn_is_never_merged)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], ukey[65], mkey[65];
    enum vg_enqueue_result res;
    test_rt_open(&t, "wake_recover_user");
    make_agent(&t, a);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    json_t *seed = json_string("hello");
    struct vg_wake_req ur = {.reason = VG_REASON_USER,
                             .agent_id = a,
                             .session_id = "s1",
                             .turn_id = "t1",
                             .seed_input = seed};
    ASSERT_OK(vg_wake_enqueue(&w, &ur, ukey, &res, E));
    json_decref(seed);
    struct vg_wake_job job;
    int got, n;
    ASSERT_OK(vg_wake_claim(&w, &job, &got, E));
    ASSERT_EQ(got, 1);
    vg_wake_job_release(&job);
    vg_test_clock_advance(&t.clock, w.cfg.lease_ms + 1);
    ASSERT_OK(vg_wake_recover(&w, NULL, &n, E));
    ASSERT_EQ(n, 1);
    json_t *run = run_get(&t, ukey);
    ASSERT_STREQ(js(run, "status"), "queued");
    ASSERT_STREQ(js(run, "original_reason"), "user");
    json_decref(run);
    struct vg_wake_req m = {.reason = VG_REASON_MANUAL, .agent_id = a};
    ASSERT_OK(vg_wake_enqueue(&w, &m, mkey, &res, E));
    ASSERT_EQ(res, VG_ENQ_NEW);
    ASSERT(strcmp(mkey, ukey) != 0);
    ASSERT_EQ(count_runs(&t, a, "queued"), 2);
    run = run_get(&t, ukey);
    ASSERT_STREQ(js(run, "seed_input"), "hello");
    ASSERT_EQ(json_array_size(json_object_get(run, "merged")), 0);
    json_decref(run);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* proves: S3-081 S3-021 S0-151 (a failed wake stays inspectable and is replayed by a re-run) */
TEST(failures_back_off_exponentially_then_the_agent_turns_dormant)
{
    struct test_rt t;
    struct vg_wake w;
    struct vg_wake_config cfg;
    char a[37], k[65];
    enum vg_enqueue_result res;
    test_rt_open(&t, "wake_backoff");
    make_agent(&t, a);
    vg_wake_config_defaults(&cfg);
    cfg.max_failures = 3;
    cfg.backoff_base_ms = 1000;
    ASSERT_OK(vg_wake_init(&w, t.env, &cfg, E));
    struct vg_wake_runner *fail = NULL;
    ASSERT_OK(vg_wake_runner_new("test:fail=1", NULL, &fail, E));
    struct vg_wake_req m = {.reason = VG_REASON_MANUAL, .agent_id = a};
    ASSERT_OK(vg_wake_enqueue(&w, &m, k, &res, E));
    char first[65];
    memcpy(first, k, sizeof first);
    int ran;
    int64_t delays[] = {1000, 2000};
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(vg_wake_drain(&w, fail, 1, &ran, E));
        ASSERT_EQ(ran, 1);
        json_t *rt = NULL, *state = NULL;
        ASSERT_OK(vg_runtime_state_get(t.env, a, &rt, NULL, E));
        ASSERT_EQ(json_integer_value(json_object_get(rt, "failure_streak")), i + 1);
        json_decref(rt);
        ASSERT_OK(vg_state_get(t.env, a, &state, NULL, E));
        int64_t next = 0;
        ASSERT_EQ(vg_time_parse_ms(js(state, "next_wake_at"), &next), 0);
        ASSERT_EQ(next - t.clock.wall_ms, delays[i]);
        json_decref(state);
        /* Nothing runs before the backoff is over. */
        vg_test_clock_advance(&t.clock, delays[i] - 1);
        ASSERT_OK(vg_wake_drain(&w, fail, 1, &ran, E));
        ASSERT_EQ(ran, 0);
        vg_test_clock_advance(&t.clock, 1);
    }
    ASSERT_EQ(count_runs(&t, a, "failed"), 2);
    ASSERT_OK(vg_wake_drain(&w, fail, 1, &ran, E)); /* the third failure */
    ASSERT_EQ(ran, 1);
    vigil_lifecycle lc;
    ASSERT_OK(vg_agent_lifecycle(t.env, a, &lc, E));
    ASSERT_EQ(lc, VIGIL_LIFECYCLE_DORMANT);
    json_t *agent = NULL;
    ASSERT_OK(vg_agent_get(t.env, a, &agent, NULL, E));
    ASSERT_CONTAINS(js(agent, "lifecycle_reason"), "3 consecutive failed runs");
    ASSERT_CONTAINS(js(agent, "lifecycle_reason"), "test runner failure");
    json_decref(agent);
    ASSERT_EQ(count_runs(&t, a, "queued"), 0);
    /* A dormant agent never runs: an explicit wake is logged as skipped with the reason. */
    ASSERT_OK(vg_wake_enqueue(&w, &m, k, &res, E));
    ASSERT_EQ(res, VG_ENQ_SKIPPED);
    json_t *run = run_get(&t, k);
    ASSERT_STREQ(js(run, "status"), "skipped");
    ASSERT_STREQ(js(run, "skip_reason"), "agent is dormant");
    json_decref(run);
    /* A success resets the streak. */
    ASSERT_OK(vg_agent_transition(t.env, a, VIGIL_LIFECYCLE_ACTIVE, "retry", E));
    struct vg_wake_runner *echo = NULL;
    ASSERT_OK(vg_wake_runner_new("echo", NULL, &echo, E));
    vg_test_clock_advance(&t.clock, 1);
    ASSERT_OK(vg_wake_enqueue(&w, &m, k, &res, E));
    ASSERT_OK(vg_wake_drain(&w, echo, 0, &ran, E));
    json_t *rt = NULL;
    ASSERT_OK(vg_runtime_state_get(t.env, a, &rt, NULL, E));
    ASSERT_EQ(json_integer_value(json_object_get(rt, "failure_streak")), 0);
    json_decref(rt);
    /* The failed wakes stay in the log as failed, with their error, for an operator to look at
     * (vigil wakes --status failed); the first of them, run again once its cause is mended,
     * completes as a new run that names it. */
    run = run_get(&t, first);
    ASSERT_STREQ(js(run, "status"), "failed");
    ASSERT_CONTAINS(js(run, "error"), "test runner failure");
    json_decref(run);
    char again[65];
    ASSERT_OK(vigil_run_rerun(t.rt, first, NULL, again, E));
    ASSERT_OK(vg_wake_drain(&w, echo, 0, &ran, E));
    ASSERT_EQ(ran, 1);
    run = run_get(&t, again);
    ASSERT_STREQ(js(run, "status"), "completed");
    ASSERT_STREQ(json_string_value(json_object_get(json_object_get(run, "meta"), "rerun_of")),
                 first);
    json_decref(run);
    vg_wake_runner_free(fail);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* proves: S0-096 */
TEST(destroyed_agents_never_run)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], k[65];
    enum vg_enqueue_result res;
    test_rt_open(&t, "wake_skip");
    make_agent(&t, a);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    struct vg_wake_req m = {.reason = VG_REASON_MANUAL, .agent_id = a};
    ASSERT_OK(vg_wake_enqueue(&w, &m, k, &res, E));
    ASSERT_OK(vg_agent_transition(t.env, a, VIGIL_LIFECYCLE_DESTROYED, "gone", E));
    int ran;
    struct vg_wake_runner *echo = NULL;
    ASSERT_OK(vg_wake_runner_new("echo", NULL, &echo, E));
    ASSERT_OK(vg_wake_drain(&w, echo, 0, &ran, E));
    ASSERT_EQ(ran, 0);
    json_t *run = run_get(&t, k);
    ASSERT_STREQ(js(run, "status"), "skipped");
    ASSERT_STREQ(js(run, "skip_reason"), "agent is destroyed");
    json_decref(run);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* A dormant agent's notifications and timer firings leave one skipped entry between two of its
 * wakes (trial G10), merged so a busy subscription does not grow the log; nothing is caught up
 * after it is resumed, and its subscriptions wake it again from then on.
 * proves: S3-057 (pause takes a dormant agent's subscriptions out of play, resume restores them) */
TEST(a_dormant_agents_dropped_triggers_leave_one_skipped_entry)
{
    struct test_rt t;
    struct vg_wake w;
    struct vg_match_stats st;
    char a[37], sub[201], k[65], seq[16];
    enum vg_enqueue_result res;
    int ran;
    test_rt_open(&t, "wake_dormant_log");
    make_agent(&t, a);
    const char *toks[] = {"ORDER"};
    sub_add(&t, a, toks, 1, sub);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    ASSERT_OK(vg_agent_transition(t.env, a, VIGIL_LIFECYCLE_DORMANT, "maintenance", E));
    for (int i = 0; i < 40; i++) {
        char order[16];
        snprintf(order, sizeof order, "order-%d", i);
        snprintf(seq, sizeof seq, "s%d", i);
        const char *b[] = {"ORDER", order};
        batch(&w, b, 2, NULL, seq, &st);
        ASSERT_EQ(st.enqueued, 0);
    }
    struct vg_wake_req tm = {.reason = VG_REASON_TIMER,
                             .agent_id = a,
                             .reason_id = "timer-1",
                             .scheduled_ms = t.clock.wall_ms};
    ASSERT_OK(vg_wake_enqueue(&w, &tm, k, &res, E));
    ASSERT_EQ(res, VG_ENQ_SKIPPED);
    ASSERT_EQ(count_runs(&t, a, "queued"), 0);
    ASSERT_EQ(count_runs(&t, a, "skipped"), 1);
    struct vg_query q = {.kind = "wake_run", .owner = a, .k1 = "skipped"};
    struct vg_id_list ids = {0};
    ASSERT_OK(vg_store_scan_ids(t.env->store, &q, &ids, E));
    json_t *run = run_get(&t, ids.ids[0]);
    vg_id_list_release(&ids);
    ASSERT_STREQ(js(run, "reason"), "subscription");
    ASSERT_STREQ(js(run, "skip_reason"), "agent is dormant");
    ASSERT_EQ(json_integer_value(json_object_get(run, "merged_total")), 40); /* 39 + the timer */
    json_t *merged = json_object_get(run, "merged");
    ASSERT_STREQ(js(json_array_get(merged, json_array_size(merged) - 1), "reason"), "subscription");
    json_decref(run);
    /* Resumed: nothing is caught up; after a wake, a new pause starts a new entry. */
    ASSERT_OK(vg_agent_transition(t.env, a, VIGIL_LIFECYCLE_ACTIVE, "back", E));
    ASSERT_EQ(count_runs(&t, a, "queued"), 0);
    struct vg_wake_req m = {.reason = VG_REASON_MANUAL, .agent_id = a};
    ASSERT_OK(vg_wake_enqueue(&w, &m, k, &res, E));
    struct vg_wake_runner *echo = NULL;
    ASSERT_OK(vg_wake_runner_new("echo", NULL, &echo, E));
    ASSERT_OK(vg_wake_drain(&w, echo, 0, &ran, E));
    ASSERT_EQ(ran, 1);
    /* ... and its subscription takes triggers again. */
    const char *back[] = {"ORDER", "order-back"};
    batch(&w, back, 2, NULL, "s-back", &st);
    ASSERT_EQ(st.enqueued, 1);
    ASSERT_OK(vg_wake_drain(&w, echo, 0, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_OK(vg_agent_transition(t.env, a, VIGIL_LIFECYCLE_DORMANT, "again", E));
    vg_test_clock_advance(&t.clock, 60000);
    tm.scheduled_ms = t.clock.wall_ms;
    ASSERT_OK(vg_wake_enqueue(&w, &tm, k, &res, E));
    ASSERT_EQ(count_runs(&t, a, "skipped"), 2);
    vg_wake_runner_free(echo);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* A run whose process died reads running (nobody closed it), and the views say its process is
 * gone (trials G2, G9); a run of a live process does not. */
TEST(a_run_whose_process_is_gone_says_so_in_agent_show)
{
    struct test_rt t;
    struct vg_wake w;
    struct vg_wake_job job;
    char a[37], k[65], *text = NULL;
    enum vg_enqueue_result res;
    int got = 0, status = 0;
    test_rt_open(&t, "wake_gone_holder");
    make_agent(&t, a);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    struct vg_wake_req m = {.reason = VG_REASON_MANUAL, .agent_id = a};
    ASSERT_OK(vg_wake_enqueue(&w, &m, k, &res, E));
    ASSERT_OK(vg_wake_claim(&w, &job, &got, E)); /* held by this live process */
    ASSERT_EQ(got, 1);
    ASSERT_OK(vigil_agent_show(t.rt, a, &text, E));
    ASSERT_CONTAINS(text, "\"running\"");
    ASSERT(!strstr(text, "holder_gone"));
    vigil_free(text);
    ASSERT_OK(vg_wake_finish(&w, &job, VG_WAKE_COMPLETED, NULL, E));
    vg_wake_job_release(&job);
    vg_wake_release(&w);
    test_rt_close(&t);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) { /* a process that starts a run and dies in it */
        test_rt_reopen(&t);
        struct vg_run_launch l = {.agent_id = a, .run_key = k, .wake_reason = "manual"};
        struct vg_run *run = NULL;
        if (vg_wake_init(&w, t.env, NULL, NULL) || vg_wake_enqueue(&w, &m, k, &res, NULL) ||
            vg_wake_claim(&w, &job, &got, NULL) || !got ||
            vg_journal_run_open(t.env->store, t.env->clock, t.env->ids, &l, &run, NULL))
            _exit(1);
        _exit(0);
    }
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_EQ(status, 0);
    test_rt_reopen(&t);
    ASSERT_OK(vigil_agent_show(t.rt, a, &text, E));
    json_t *v = json_loads(text, 0, NULL), *r = json_object_get(v, "runtime");
    vigil_free(text);
    ASSERT_STREQ(js(r, "run_status"), "running");
    ASSERT(json_is_true(json_object_get(r, "holder_gone")));
    ASSERT_EQ(json_integer_value(json_object_get(r, "holder_pid")), pid);
    json_decref(v);
    /* The run listing says so too (it decodes a page only when a run of it is running). */
    ASSERT_OK(vigil_runs_list(t.rt, a, NULL, NULL, 0, &text, E));
    v = json_loads(text, 0, NULL);
    vigil_free(text);
    r = json_array_get(json_object_get(v, "items"), 0);
    ASSERT_STREQ(js(r, "status"), "running");
    ASSERT(json_is_true(json_object_get(r, "holder_gone")));
    json_decref(v);
    test_rt_close(&t);
}

static vigil_code kill_all(void *user, struct vg_env *env, const char *agent, int *on,
                           vigil_error *err)
{
    *on = *(int *)user;
    return VIGIL_OK;
}

/* proves: S0-153 */
TEST(kill_switch_stops_new_and_queued_wakes)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], k[65], k2[65];
    enum vg_enqueue_result res;
    int on = 0, ran;
    test_rt_open(&t, "wake_kill");
    make_agent(&t, a);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    w.kill = kill_all;
    w.kill_user = &on;
    struct vg_wake_req m = {.reason = VG_REASON_MANUAL, .agent_id = a};
    ASSERT_OK(vg_wake_enqueue(&w, &m, k, &res, E));
    ASSERT_EQ(res, VG_ENQ_NEW);
    on = 1;
    vg_test_clock_advance(&t.clock, 1);
    ASSERT_OK(vg_wake_enqueue(&w, &m, k2, &res, E));
    ASSERT_EQ(res, VG_ENQ_SKIPPED);
    struct vg_wake_runner *echo = NULL;
    ASSERT_OK(vg_wake_runner_new("echo", NULL, &echo, E));
    ASSERT_OK(vg_wake_drain(&w, echo, 0, &ran, E));
    ASSERT_EQ(ran, 0);
    json_t *run = run_get(&t, k);
    ASSERT_STREQ(js(run, "skip_reason"), "kill switch is on");
    json_decref(run);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* proves: S3-041 S3-080 S3-043 S0-080 */
TEST(an_agents_own_tool_writes_do_not_wake_it)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], b[37], c[37], sa[201], sb[201], sc[201];
    test_rt_open(&t, "wake_selfsup");
    make_agent(&t, a);
    make_agent(&t, b);
    make_agent(&t, c);
    const char *toks[] = {"TASK", "task-1"};
    const char *state_key[] = {VIGIL_TOKEN_AGENT_STATE_CHANGED};
    sub_add(&t, a, toks, 2, sa);
    sub_add(&t, b, toks, 2, sb);
    sub_add(&t, c, state_key, 1, sc); /* would hear every wake-counter increment */
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    /* Through the runtime's hook: tokens committed while a's tool runs carry a's id. */
    t.env->notify.fn = vg_wake_intake_hook;
    t.env->notify.fn_user = &w;
    t.env->notify.source = a;
    vg_env_notify(t.env, toks, 2);
    t.env->notify.source = NULL;
    int n;
    vg_test_clock_advance(&t.clock, 100);
    ASSERT_OK(vg_wake_intake_flush(&w, 0, &n, E));
    ASSERT_EQ(n, 1);
    ASSERT_EQ(count_runs(&t, a, "queued"), 0); /* a's own write: even the TASK key is dropped */
    ASSERT_EQ(count_runs(&t, b, "queued"), 1); /* chained: b still hears a's change */
    /* An external edit of the same task during a's run still wakes a. */
    vg_env_notify(t.env, toks, 2);
    vg_test_clock_advance(&t.clock, 100);
    ASSERT_OK(vg_wake_intake_flush(&w, 0, &n, E));
    ASSERT_EQ(count_runs(&t, a, "queued"), 1);
    /* Wake bookkeeping (counter increments, raised as AGENT_STATE_CHANGED) woke nobody. */
    vg_test_clock_advance(&t.clock, 1000);
    ASSERT_OK(vg_wake_intake_flush(&w, 1, &n, E));
    ASSERT_EQ(count_runs(&t, b, "queued"), 1);
    ASSERT_EQ(count_runs(&t, c, "queued"), 0);
    t.env->notify.fn = NULL;
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* proves: S3-078 S3-079 */
TEST(untagged_batches_fall_back_to_the_mutated_entity_set)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], sa[201];
    struct vg_match_stats st;
    test_rt_open(&t, "wake_selfset");
    make_agent(&t, a);
    const char *toks[] = {"TASK", "task-1", "task-2"};
    sub_add(&t, a, toks, 3, sa);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    const char *mine[] = {"task-1"};
    vg_wake_note_mutations(&w, a, mine, 1);
    const char *b1[] = {"TASK", "task-1"};
    batch(&w, b1, 2, NULL, "x1", &st);
    ASSERT_EQ(st.suppressed, 1);
    ASSERT_EQ(count_runs(&t, a, "queued"), 0);
    const char *b2[] = {"TASK", "task-1", "task-2"}; /* someone else touched task-2 */
    batch(&w, b2, 3, NULL, "x2", &st);
    ASSERT_EQ(st.suppressed, 0);
    ASSERT_EQ(count_runs(&t, a, "queued"), 1);
    /* After the TTL the agent's own entity wakes it again. */
    struct vg_wake_runner *echo = NULL;
    int ran;
    ASSERT_OK(vg_wake_runner_new("echo", NULL, &echo, E));
    ASSERT_OK(vg_wake_drain(&w, echo, 0, &ran, E)); /* pre-registers task-1/2, then clears */
    vg_wake_note_mutations(&w, a, mine, 1);
    vg_test_clock_advance(&t.clock, w.cfg.suppress_ttl_ms + 1);
    batch(&w, b1, 2, NULL, "x3", &st);
    ASSERT_EQ(st.suppressed, 0);
    ASSERT_EQ(st.enqueued, 1);
    vg_wake_release(&w);
    test_rt_close(&t);
}

static int lookups_seen;
static char lookup_ids[8][64];

static vigil_code fake_lookup(void *user, struct vg_env *env, const char *const *ids, size_t n,
                              json_t **out, vigil_error *err)
{
    lookups_seen++;
    *out = json_object();
    for (size_t i = 0; i < n; i++) {
        snprintf(lookup_ids[i % 8], 64, "%s", ids[i]);
        if (!strcmp(ids[i], "task-gym"))
            json_object_set_new(*out, ids[i],
                                json_pack("{s:s, s:[s]}", "category", "gym", "links", "goal-1"));
        if (!strcmp(ids[i], "task-work"))
            json_object_set_new(*out, ids[i], json_pack("{s:s}", "category", "work"));
    }
    return VIGIL_OK;
}

/* proves: S0-011 S0-012 S0-013 S0-016 S0-017 S0-018 */
TEST(predicates_refine_token_matches_with_one_lookup_of_entity_ids)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], b[37], c[37], sa[201], sb[201], sc[201];
    struct vg_match_stats st;
    test_rt_open(&t, "wake_pred");
    make_agent(&t, a);
    make_agent(&t, b);
    make_agent(&t, c);
    const char *task[] = {"TASK"}, *workout[] = {"WORKOUT"};
    const char *gym[] = {"category=gym"}, *running[] = {"workout.running"};
    struct vg_sub_spec s1 = {
        .agent_id = a, .tokens = task, .n_tokens = 1, .where = gym, .n_where = 1};
    ASSERT_OK(vg_sub_add(t.env, &s1, sa, E));
    struct vg_sub_spec s2 = {.agent_id = b, .tokens = task, .n_tokens = 1, .linked_to = "goal-1"};
    ASSERT_OK(vg_sub_add(t.env, &s2, sb, E));
    struct vg_sub_spec s3 = {
        .agent_id = c, .tokens = workout, .n_tokens = 1, .require = running, .n_require = 1};
    ASSERT_OK(vg_sub_add(t.env, &s3, sc, E));
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    w.lookup = fake_lookup;
    lookups_seen = 0;
    const char *work[] = {"TASK", "task-work", "workout.running"};
    batch(&w, work, 3, NULL, "p1", &st);
    ASSERT_EQ(lookups_seen, 1);
    ASSERT_STREQ(lookup_ids[0], "task-work"); /* only the entity id was looked up */
    ASSERT_EQ(st.matched_subs, 0);
    const char *g[] = {"TASK", "task-gym"};
    batch(&w, g, 2, NULL, "p2", &st);
    ASSERT_EQ(lookups_seen, 2); /* one bulk lookup per batch, for both subscriptions */
    ASSERT_EQ(st.matched_subs, 2);
    ASSERT_EQ(count_runs(&t, a, "queued"), 1);
    ASSERT_EQ(count_runs(&t, b, "queued"), 1);
    const char *w1[] = {"WORKOUT", "w-1", "workout.cycling"};
    batch(&w, w1, 3, NULL, "p3", &st);
    ASSERT_EQ(count_runs(&t, c, "queued"), 0);
    const char *w2[] = {"WORKOUT", "w-1", "workout.running"};
    batch(&w, w2, 3, NULL, "p4", &st);
    ASSERT_EQ(count_runs(&t, c, "queued"), 1);
    ASSERT_EQ(lookups_seen, 2); /* no predicate needed entities: no lookup */
    /* A subscription on a subtype token matches it directly. */
    const char *sub_only[] = {"workout.running"};
    struct vg_sub_spec s4 = {.agent_id = a, .tokens = sub_only, .n_tokens = 1};
    char s4id[201];
    ASSERT_OK(vg_sub_add(t.env, &s4, s4id, E));
    batch(&w, w2, 3, NULL, "p5", &st);
    ASSERT_EQ(st.matched_subs, 2);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* proves: S0-010 S3-069 */
TEST(subscriptions_persist_and_replace_by_id)
{
    struct test_rt t;
    char a[37], id[201];
    test_rt_open(&t, "wake_subpersist");
    make_agent(&t, a);
    const char *toks[] = {"TASK", "task-1"};
    struct vg_sub_spec s = {.id = "watch-task", .agent_id = a, .tokens = toks, .n_tokens = 2};
    ASSERT_OK(vg_sub_add(t.env, &s, id, E));
    ASSERT_OK(vg_sub_add(t.env, &s, id, E)); /* again, as a restart would */
    test_rt_reopen(&t);
    json_t *list = NULL;
    ASSERT_OK(vg_sub_list(t.env, a, &list, E));
    ASSERT_EQ(json_array_size(list), 1);
    json_decref(list);
    struct vg_query q = {.kind = "sub_token", .owner = a};
    int64_t n = 0;
    ASSERT_OK(vg_store_count(t.env->store, &q, &n, E));
    ASSERT_EQ(n, 2);
    struct vg_wake w;
    struct vg_match_stats st;
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    const char *b1[] = {"task-1"};
    batch(&w, b1, 1, NULL, "r1", &st);
    ASSERT_EQ(st.enqueued, 1);
    ASSERT_OK(vg_sub_remove(t.env, "watch-task", E));
    ASSERT_OK(vg_store_count(t.env->store, &q, &n, E));
    ASSERT_EQ(n, 0);
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_sub_remove(t.env, "watch-task", NULL));
    vg_wake_release(&w);
    test_rt_close(&t);
}

TEST(durable_notifications_are_taken_once)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], sa[201];
    test_rt_open(&t, "wake_durable");
    make_agent(&t, a);
    const char *toks[] = {"TASK"};
    sub_add(&t, a, toks, 1, sa);
    ASSERT_OK(vg_wake_notify_durable(t.env, toks, 1, NULL, E));
    ASSERT_OK(vg_wake_notify_durable(t.env, toks, 1, NULL, E));
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    int taken, n;
    ASSERT_OK(vg_wake_intake_durable(&w, 0, &taken, E));
    ASSERT_EQ(taken, 2);
    ASSERT_OK(vg_wake_intake_durable(&w, 0, &taken, E)); /* polling again takes nothing new */
    ASSERT_EQ(taken, 0);
    vg_test_clock_advance(&t.clock, 100);
    ASSERT_OK(vg_wake_intake_flush(&w, 0, &n, E));
    ASSERT_EQ(n, 1);
    ASSERT_EQ(count_runs(&t, a, "queued"), 1);
    struct vg_query q = {.kind = "notification"};
    int64_t left = -1;
    ASSERT_OK(vg_store_count(t.env->store, &q, &left, E));
    ASSERT_EQ(left, 0);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* Damage a record: its body no JSON, or for an agent its lifecycle column unknown. */
static void damage(struct test_rt *t, const char *kind, const char *id)
{
    struct vg_record *r = NULL;
    ASSERT_OK(vg_store_get_copy(t->env->store, kind, id, &r, E));
    if (!strcmp(kind, "agent"))
        r->k1 = "unknown";
    else
        r->body = "{damaged";
    ASSERT_OK(vg_store_update(t->env->store, r, r->rev, E));
    vg_free(r);
}

/* A batch whose tokens some broken agents also watch still wakes the healthy ones: one agent's
 * subscription damaged, another agent's lifecycle unreadable, a third's record removed with its
 * subscription left behind. Each is skipped and counted; the batch is consumed once, and the
 * next batch matches as well.
 * proves: S3-063 (vigil restores no subscriptions into memory: the store's token index is
 * the truth, so matching a batch is where one broken agent must not block the others) */
TEST(a_broken_agent_never_blocks_the_others_wakes)
{
    struct test_rt t;
    struct vg_wake w;
    char healthy[37], bad_sub[37], bad_agent[37], gone[37], sid[201], ignored[201];
    test_rt_open(&t, "wake_broken_agent");
    make_agent(&t, bad_sub);
    make_agent(&t, bad_agent);
    make_agent(&t, gone);
    make_agent(&t, healthy);
    const char *toks[] = {"TASK"};
    sub_add(&t, bad_sub, toks, 1, sid);
    damage(&t, "subscription", sid);
    sub_add(&t, bad_agent, toks, 1, ignored);
    damage(&t, "agent", bad_agent);
    sub_add(&t, gone, toks, 1, ignored);
    ASSERT_OK(vg_store_remove(t.env->store, "agent", gone, E));
    sub_add(&t, healthy, toks, 1, ignored);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    struct vg_match_stats st;
    batch(&w, toks, 1, NULL, "b1", &st);
    ASSERT_EQ(st.enqueued, 1);
    ASSERT_EQ(st.broken, 3);
    ASSERT_EQ(count_runs(&t, healthy, "queued"), 1);
    ASSERT_EQ(count_runs(&t, gone, "queued"), 0);
    /* Durable notifications the same way: taken, and the healthy agent's queued wake grows. */
    ASSERT_OK(vg_wake_notify_durable(t.env, toks, 1, NULL, E));
    int taken, n;
    ASSERT_OK(vg_wake_intake_durable(&w, 0, &taken, E));
    ASSERT_EQ(taken, 1);
    vg_test_clock_advance(&t.clock, 100);
    ASSERT_OK(vg_wake_intake_flush(&w, 0, &n, E));
    struct vg_query q = {.kind = "notification"};
    int64_t left = -1;
    ASSERT_OK(vg_store_count(t.env->store, &q, &left, E));
    ASSERT_EQ(left, 0);
    ASSERT_EQ(count_runs(&t, healthy, "queued"), 1);
    vg_wake_release(&w);
    test_rt_close(&t);
}

static char heard[16][80];
static int n_heard;

static void hear(void *user, const char *const *tokens, size_t n)
{
    for (size_t i = 0; i < n && n_heard < 16; i++)
        snprintf(heard[n_heard++], sizeof heard[0], "%s", tokens[i]);
}

/* proves: S0-022 S0-097 S3-032 (the run's end in the wake log) */
TEST(a_completed_run_emits_state_changed_and_resets_runtime_state)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], k[65];
    enum vg_enqueue_result res;
    test_rt_open(&t, "wake_done");
    make_agent(&t, a);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    struct vg_wake_req m = {.reason = VG_REASON_MANUAL, .agent_id = a};
    ASSERT_OK(vg_wake_enqueue(&w, &m, k, &res, E));
    struct vg_wake_job job;
    int got;
    ASSERT_OK(vg_wake_claim(&w, &job, &got, E));
    json_t *rt = NULL;
    ASSERT_OK(vg_runtime_state_get(t.env, a, &rt, NULL, E));
    ASSERT_STREQ(js(rt, "run_status"), "running");
    ASSERT_STREQ(js(rt, "active_run_id"), k);
    json_decref(rt);
    json_t *state = NULL;
    ASSERT_OK(vg_state_get(t.env, a, &state, NULL, E));
    t.env->notify.fn = hear;
    n_heard = 0;
    ASSERT_OK(vg_wake_finish(&w, &job, VG_WAKE_COMPLETED, NULL, E));
    t.env->notify.fn = NULL;
    int saw = 0;
    for (int i = 0; i + 2 < n_heard; i++)
        if (!strcmp(heard[i], VIGIL_TOKEN_AGENT_STATE_CHANGED) && !strcmp(heard[i + 1], a) &&
            !strcmp(heard[i + 2], js(state, "id")))
            saw = 1;
    ASSERT(saw);
    json_decref(state);
    ASSERT_OK(vg_runtime_state_get(t.env, a, &rt, NULL, E));
    ASSERT_STREQ(js(rt, "run_status"), "idle");
    ASSERT(json_is_null(json_object_get(rt, "active_run_id")));
    ASSERT_EQ(json_integer_value(json_object_get(rt, "failure_streak")), 0);
    json_decref(rt);
    /* the wake's time is in the durable state, and its end in the wake log */
    ASSERT_OK(vg_state_get(t.env, a, &state, NULL, E));
    char at[32];
    vg_time_format_ms(at, t.clock.wall_ms);
    ASSERT_STREQ(js(state, "last_wake_at"), at);
    json_decref(state);
    json_t *run = run_get(&t, k);
    ASSERT_STREQ(js(run, "status"), "completed");
    ASSERT(js(run, "started_at") && js(run, "completed_at"));
    json_decref(run);
    vg_wake_job_release(&job);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* A wake that succeeds after a failed one moves the agent's state: the last message it saw
 * (the head of its messages, which its run appended), the time of its last wake, and its
 * failure count back to 0. proves: S3-050 */
TEST(a_successful_wake_records_its_head_message_time_and_resets_failures)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], k[65], msg[37];
    enum vg_enqueue_result res;
    struct vg_wake_job job;
    int got = 0;
    test_rt_open(&t, "wake_success_state");
    make_agent(&t, a);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    struct vg_wake_req m = {.reason = VG_REASON_MANUAL, .agent_id = a};
    ASSERT_OK(vg_wake_enqueue(&w, &m, k, &res, E));
    ASSERT_OK(vg_wake_claim(&w, &job, &got, E));
    ASSERT_EQ(got, 1);
    ASSERT_OK(vg_wake_finish(&w, &job, VG_WAKE_FAILED, "the model is down", E));
    vg_wake_job_release(&job);
    json_t *rt = NULL;
    ASSERT_OK(vg_runtime_state_get(t.env, a, &rt, NULL, E));
    ASSERT_EQ(json_integer_value(json_object_get(rt, "failure_streak")), 1);
    json_decref(rt);
    vg_test_clock_advance(&t.clock, 3600 * 1000); /* past the failure's backoff */
    ASSERT_OK(vg_wake_enqueue(&w, &m, k, &res, E));
    ASSERT_OK(vg_wake_claim(&w, &job, &got, E));
    ASSERT_EQ(got, 1);
    struct vg_message_in in = {
        .agent_id = a, .thread_id = job.thread_id, .kind = VG_MSG_THOUGHT, .content = "seen it"};
    ASSERT_OK(vg_message_append(t.env, &in, msg, E));
    ASSERT_OK(vg_wake_finish(&w, &job, VG_WAKE_COMPLETED, NULL, E));
    vg_wake_job_release(&job);
    json_t *state = NULL;
    ASSERT_OK(vg_state_get(t.env, a, &state, NULL, E));
    ASSERT_STREQ(js(state, "recent_head_message_id"), msg);
    char at[32];
    vg_time_format_ms(at, t.clock.wall_ms);
    ASSERT_STREQ(js(state, "last_wake_at"), at);
    json_decref(state);
    ASSERT_OK(vg_runtime_state_get(t.env, a, &rt, NULL, E));
    ASSERT_EQ(json_integer_value(json_object_get(rt, "failure_streak")), 0);
    json_decref(rt);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* proves: S0-096 */
TEST(a_sleeping_agent_does_not_run_until_sleep_until)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], k[65], until[32];
    enum vg_enqueue_result res;
    int ran;
    test_rt_open(&t, "wake_sleep");
    make_agent(&t, a);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    json_t *state = NULL;
    int64_t rev = 0;
    ASSERT_OK(vg_state_get(t.env, a, &state, &rev, E));
    json_decref(state);
    vg_time_format_ms(until, t.clock.wall_ms + 60000);
    json_t *ch = json_pack("{s:s}", "sleep_until", until);
    ASSERT_OK(vg_state_update(t.env, a, ch, rev, NULL, E));
    json_decref(ch);
    struct vg_wake_req m = {.reason = VG_REASON_MANUAL, .agent_id = a};
    ASSERT_OK(vg_wake_enqueue(&w, &m, k, &res, E));
    struct vg_wake_runner *echo = NULL;
    ASSERT_OK(vg_wake_runner_new("echo", NULL, &echo, E));
    ASSERT_OK(vg_wake_drain(&w, echo, 0, &ran, E));
    ASSERT_EQ(ran, 0);
    ASSERT_EQ(count_runs(&t, a, "queued"), 1); /* kept, not dropped */
    vg_test_clock_advance(&t.clock, 60001);
    ASSERT_OK(vg_wake_drain(&w, echo, 0, &ran, E));
    ASSERT_EQ(ran, 1);
    vg_wake_release(&w);
    test_rt_close(&t);
}

static void make_agent_of_mode(struct test_rt *t, const char *name, const char *mode, char id[37])
{
    vigil_agent_spec spec = {.name = name, .mode = mode};
    ASSERT_OK(vigil_agent_create(t->rt, &spec, id, E));
    ASSERT_OK(vg_agent_transition(t->env, id, VIGIL_LIFECYCLE_ACTIVE, "test", E));
}

static int first_body(void *user, const struct vg_record *r)
{
    *(json_t **)user = json_loads(r->body, 0, NULL);
    return 1;
}

/* The newest wake of an agent whose status is `status` (NULL when it has none). */
static json_t *wake_of(struct test_rt *t, const char *agent, const char *status)
{
    json_t *v = NULL;
    struct vg_query q = {
        .kind = "wake_run", .owner = agent, .k1 = status, .descending = 1, .limit = 1};
    ASSERT_OK(vg_store_scan(t->env->store, &q, first_body, &v, E));
    return v;
}

/* Interaction modes: an autonomous agent runs when its triggers wake it, an interactive one in
 * the sessions a person starts, a hybrid one both. A batch its subscription matches and a timer
 * of its coming due wake the autonomous and the hybrid agent, and not the interactive one: its
 * trigger is logged as skipped, saying why; a person's turn wakes the interactive agent. A
 * person's turn to an autonomous agent is taken too (docs/wakes.md, "Interaction modes": a
 * task agent's chat), in its session's thread beside the trigger's run; each agent runs what it
 * took, then is idle. proves: S0-092 */
TEST(an_interactive_agent_is_woken_by_a_person_not_by_its_triggers)
{
    struct test_rt t;
    struct vg_wake w;
    struct vg_match_stats st;
    char agents[3][37], sub[201], key[65];
    static const char *const modes[] = {"autonomous", "interactive", "hybrid"};
    enum vg_enqueue_result res;
    test_rt_open(&t, "wake_modes");
    const char *toks[] = {"TASK"};
    for (int i = 0; i < 3; i++) {
        make_agent_of_mode(&t, modes[i], modes[i], agents[i]);
        sub_add(&t, agents[i], toks, 1, sub);
    }
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    const char *in[] = {"TASK", "task-1"};
    batch(&w, in, 2, NULL, "1", &st);
    for (int i = 0; i < 3; i++) {
        struct vg_wake_req timer = {.reason = VG_REASON_TIMER,
                                    .agent_id = agents[i],
                                    .reason_id = "timer-1",
                                    .scheduled_ms = 1000};
        ASSERT_OK(vg_wake_enqueue(&w, &timer, key, &res, E));
    }
    ASSERT_EQ(count_runs(&t, agents[0], "queued"), 1); /* the timer merged into the batch's */
    ASSERT_EQ(count_runs(&t, agents[2], "queued"), 1);
    ASSERT_EQ(count_runs(&t, agents[1], "queued"), 0);
    ASSERT_EQ(count_runs(&t, agents[1], "skipped"), 1); /* both triggers, one record */
    json_t *skipped = wake_of(&t, agents[1], "skipped");
    ASSERT_STREQ(js(skipped, "skip_reason"), VG_WAKE_SKIP_INTERACTIVE);
    json_decref(skipped);
    /* The mode is read from the record's text; a config nested past what that scan follows
     * (an extension 40 arrays deep) is read whole, and says the same. */
    char deep[37], config[200];
    snprintf(config, sizeof config, "{\"extension\":{\"acme.deep\":%.40s%.40s}}",
             "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
             "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]");
    vigil_agent_spec deep_spec = {.name = "deep", .mode = "interactive", .config_json = config};
    ASSERT_OK(vigil_agent_create(t.rt, &deep_spec, deep, E));
    ASSERT_OK(vg_agent_transition(t.env, deep, VIGIL_LIFECYCLE_ACTIVE, "test", E));
    struct vg_wake_req deep_timer = {
        .reason = VG_REASON_TIMER, .agent_id = deep, .reason_id = "timer-2", .scheduled_ms = 1000};
    ASSERT_OK(vg_wake_enqueue(&w, &deep_timer, key, &res, E));
    ASSERT_EQ(res, VG_ENQ_SKIPPED);

    /* A person's turn runs it. */
    json_t *seed = json_string("let's plan the day");
    struct vg_wake_req turn = {.reason = VG_REASON_USER,
                               .agent_id = agents[1],
                               .session_id = "morning",
                               .turn_id = "t1",
                               .seed_input = seed};
    ASSERT_OK(vg_wake_enqueue(&w, &turn, key, &res, E));
    ASSERT_EQ(res, VG_ENQ_NEW);
    ASSERT_EQ(count_runs(&t, agents[1], "queued"), 1);
    /* A person's turn to the autonomous agent: its own run, not merged into the trigger's. */
    turn.agent_id = agents[0];
    ASSERT_OK(vg_wake_enqueue(&w, &turn, key, &res, E));
    ASSERT_EQ(res, VG_ENQ_NEW);
    ASSERT_EQ(count_runs(&t, agents[0], "queued"), 2);
    json_decref(seed);
    /* Each runs what it took, then sleeps: idle, no run under way. */
    struct vg_wake_runner *r = NULL;
    int ran = 0;
    ASSERT_OK(vg_wake_runner_new("echo", NULL, &r, E));
    ASSERT_OK(vg_wake_drain(&w, r, 0, &ran, E));
    ASSERT_EQ(ran, 4); /* autonomous: trigger and turn; interactive: turn; hybrid: trigger */
    int completed[] = {2, 1, 1};
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(count_runs(&t, agents[i], "completed"), completed[i]);
        json_t *rt = NULL;
        ASSERT_OK(vg_runtime_state_get(t.env, agents[i], &rt, NULL, E));
        ASSERT_STREQ(js(rt, "run_status"), "idle");
        json_decref(rt);
    }
    vg_wake_runner_free(r);
    vg_wake_release(&w);
    test_rt_close(&t);
}

int main(void)
{
    test_wake_runners_provide();
    RUN(an_interactive_agent_is_woken_by_a_person_not_by_its_triggers);
    RUN(a_sleeping_agent_does_not_run_until_sleep_until);
    RUN(a_completed_run_emits_state_changed_and_resets_runtime_state);
    RUN(a_wake_log_entry_holds_the_wakes_identity_times_and_outcome);
    RUN(the_wake_counter_and_the_log_entry_are_written_in_one_transaction);
    RUN(concurrent_enqueues_never_share_a_wake_counter_value);
    RUN(a_successful_wake_records_its_head_message_time_and_resets_failures);
    RUN(classifier_puts_each_token_in_one_class);
    RUN(debounce_merges_rapid_tokens_into_one_batch_and_one_run);
    RUN(duplicate_and_overlapping_batches_give_one_run_per_coalesced_batch);
    RUN(run_keys_and_thread_ids_are_deterministic);
    RUN(two_wakes_for_a_busy_agent_merge);
    RUN(lease_fencing_refuses_an_old_epoch);
    RUN(the_lease_written_is_read_back_without_parsing);
    RUN(agents_taking_turns_check_their_leases_without_reading_them);
    RUN(recovery_requeues_started_runs_with_the_same_run_key);
    RUN(recovery_leaves_a_newer_lease_alone);
    RUN(a_recovered_user_turn_is_never_merged);
    RUN(failures_back_off_exponentially_then_the_agent_turns_dormant);
    RUN(a_dormant_agents_dropped_triggers_leave_one_skipped_entry);
    RUN(a_run_whose_process_is_gone_says_so_in_agent_show);
    RUN(destroyed_agents_never_run);
    RUN(kill_switch_stops_new_and_queued_wakes);
    RUN(an_agents_own_tool_writes_do_not_wake_it);
    RUN(untagged_batches_fall_back_to_the_mutated_entity_set);
    RUN(predicates_refine_token_matches_with_one_lookup_of_entity_ids);
    RUN(subscriptions_persist_and_replace_by_id);
    RUN(durable_notifications_are_taken_once);
    RUN(a_broken_agent_never_blocks_the_others_wakes);
    return 0;
}
