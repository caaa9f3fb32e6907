/*
 * test_api.c: the wakes section of include/vigil.h end to end in one process (notify, wake,
 * process, subscriptions, timers, the run log), and a torture loop that fails every allocation
 * of the wake paths in turn: each failure must end in a clean error with nothing half-written.
 */
#include "helpers/rt.h"
#include "helpers/wake_runners.h"

#include "agent/agent.h"
#include "base/hash.h"
#include "journal/journal.h"
#include "wake/wake.h"

static void make_agent(struct test_rt *t, char id[37])
{
    vigil_agent_spec spec = {.name = "api", .mode = "hybrid"};
    ASSERT_OK(vigil_agent_create(t->rt, &spec, id, E));
    ASSERT_OK(vigil_agent_resume(t->rt, id, NULL, E));
}

static json_t *runs(struct test_rt *t, const char *agent, const char *status)
{
    char *text = NULL;
    ASSERT_OK(vigil_wake_runs(t->rt, agent, status, 0, &text, E));
    json_t *v = json_loads(text, 0, NULL);
    vigil_free(text);
    ASSERT(json_is_array(v));
    return v;
}

/* proves: S0-181 S0-093 S0-056 */
TEST(public_api_wakes_agents_in_process)
{
    struct test_rt t;
    char a[37], key[65], tid[37], *sub = NULL, *text = NULL;
    int ran = 0;
    test_rt_open(&t, "wake_api");
    make_agent(&t, a);
    ASSERT_OK(vigil_subscription_add(t.rt, a, "{\"tokens\":[\"TASK\"],\"id\":\"s1\"}", &sub, E));
    ASSERT_STREQ(sub, "s1");
    vigil_free(sub);
    ASSERT_CODE(VIGIL_EINVAL, vigil_subscription_add(t.rt, a, "[1]", &sub, NULL));
    ASSERT_CODE(VIGIL_EINVAL, vigil_subscription_add(t.rt, a, "{\"tokens\":[1]}", &sub, NULL));
    ASSERT_CODE(VIGIL_EINVAL, vigil_subscription_add(t.rt, a, "{\"tokens\":[]}", &sub, NULL));
    ASSERT_CODE(VIGIL_ENOTFOUND,
                vigil_subscription_add(t.rt, "01a20685-48a5-705c-bfd4-89c42b9f4382",
                                       "{\"tokens\":[\"TASK\"]}", &sub, NULL));
    ASSERT_OK(vigil_subscription_list(t.rt, a, &text, E));
    ASSERT_CONTAINS(text, "\"TASK\"");
    vigil_free(text);

    const char *toks[] = {"TASK", "task-1"};
    ASSERT_OK(vigil_notify(t.rt, toks, 2, E));
    ASSERT_CODE(VIGIL_EINVAL, vigil_notify(t.rt, toks, 0, NULL));
    ASSERT_OK(vigil_wake_process(t.rt, 0, &ran, E));
    ASSERT_EQ(ran, 1);
    json_t *done = runs(&t, a, "completed");
    ASSERT_EQ(json_array_size(done), 1);
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(done, 0), "reason")),
                 "subscription");
    json_decref(done);

    ASSERT_OK(vigil_wake_agent(t.rt, a, "hello there", "s-42", key, E));
    ASSERT_OK(vigil_wake_process(t.rt, 0, &ran, E));
    ASSERT_EQ(ran, 1);
    json_t *msgs = NULL;
    char thread[120];
    snprintf(thread, sizeof thread, "%s:session:s-42", a);
    ASSERT_OK(vg_message_latest(t.env, a, thread, 5, &msgs, E));
    /* The loop ran the user's turn in the session thread: the message and the reply (the
     * scripted model, no provider being configured, echoes it). */
    ASSERT_EQ(json_array_size(msgs), 2);
    ASSERT_CONTAINS(json_string_value(json_object_get(json_array_get(msgs, 0), "content")),
                    "hello there");
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(msgs, 1), "kind")), "thought");
    ASSERT_CONTAINS(json_string_value(json_object_get(json_array_get(msgs, 1), "content")),
                    "hello there");
    json_decref(msgs);

    ASSERT_OK(vigil_timer_add(t.rt, a, "cron", "*/5 * * * *", "Europe/Berlin", tid, E));
    ASSERT_CODE(VIGIL_EINVAL, vigil_timer_add(t.rt, a, "weekly", "x", NULL, tid, NULL));
    ASSERT_OK(vigil_timer_set_zone(t.rt, tid, "Asia/Tokyo", E));
    ASSERT_OK(vigil_timer_list(t.rt, a, &text, E));
    ASSERT_CONTAINS(text, "Asia/Tokyo");
    vigil_free(text);
    vg_test_clock_advance(&t.clock, 5 * 60000);
    ASSERT_OK(vigil_wake_process(t.rt, 0, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_OK(vigil_timer_remove(t.rt, tid, E));

    /* Under a kill switch a wake is refused as a chat turn is, EKILLED (423, exit 10), not as
     * the agent's state (trial J6); it is logged as skipped all the same. */
    vigil_error err = {0};
    ASSERT_OK(vigil_kill_set(t.rt, a, NULL, 1, "incident", E));
    ASSERT_CODE(VIGIL_EKILLED, vigil_wake_agent(t.rt, a, "look", NULL, key, &err));
    ASSERT_CONTAINS(err.message, "kill switch is on");
    ASSERT_OK(vigil_kill_set(t.rt, a, NULL, 0, NULL, E));
    json_t *killed = runs(&t, a, "skipped");
    ASSERT_EQ(json_array_size(killed), 1);
    json_decref(killed);

    ASSERT_OK(vigil_agent_pause(t.rt, a, "holiday", E));
    ASSERT_CODE(VIGIL_ESTATE, vigil_wake_agent(t.rt, a, NULL, NULL, key, &err));
    ASSERT_CONTAINS(err.message, "agent is dormant");
    json_t *skipped = runs(&t, a, "skipped");
    ASSERT_EQ(json_array_size(skipped), 2);
    json_decref(skipped);
    ASSERT_OK(vigil_subscription_remove(t.rt, "s1", E));
    test_rt_close(&t);
}

/* One pass of the wake paths; returns the first failure. */
static vigil_error last_err;

static vigil_code wake_paths(struct test_rt *t, const char *agent, const char *seq)
{
    struct vg_wake w;
    vigil_error err = {0};
    vigil_code rc = vg_wake_init(&w, t->env, NULL, &err);
    if (rc)
        return rc;
    struct vg_wake_batch b;
    const char *toks[] = {"TASK", seq};
    struct vg_wake_runner *r = NULL;
    int ran;
    if (!(rc = vg_wake_batch_build(&b, toks, 2, NULL, seq, &err))) {
        rc = vg_wake_batch_process(&w, &b, NULL, &err);
        vg_wake_batch_release(&b);
    }
    if (!rc)
        rc = vg_timer_fire_due(&w, 0, &ran, &err);
    if (!rc)
        rc = vg_wake_runner_new("echo", NULL, &r, &err);
    if (!rc)
        rc = vg_wake_drain(&w, r, 0, &ran, &err);
    VG_UNUSED(agent);
    vg_wake_release(&w);
    last_err = err;
    return rc;
}

static int64_t count(struct test_rt *t, const char *kind, const char *k1)
{
    struct vg_query q = {.kind = kind, .k1 = k1};
    int64_t n = 0;
    ASSERT_OK(vg_store_count(t->env->store, &q, &n, E));
    return n;
}

/* proves: S3-070 */
TEST(every_allocation_failure_ends_cleanly)
{
    struct test_rt t;
    char a[37], sid[201], tid[37], seq[32];
    test_rt_open(&t, "wake_torture");
    make_agent(&t, a);
    const char *toks[] = {"TASK"};
    struct vg_sub_spec s = {.agent_id = a, .tokens = toks, .n_tokens = 1};
    ASSERT_OK(vg_sub_add(t.env, &s, sid, E));
    ASSERT_OK(vg_timer_add(t.env, a, VG_TIMER_CRON, "* * * * *", "UTC", tid, E));
    int failures = 0;
    for (long n = 1; n < 5000; n++) {
        snprintf(seq, sizeof seq, "t%ld", n);
        vg_test_clock_advance(&t.clock, 60000);
        int64_t before_q = count(&t, "wake_run", "queued");
        int64_t before_s = count(&t, "wake_run", "started");
        vg_alloc_fail_at(n, 1); /* the nth allocation and every later one fail */
        vigil_code rc = wake_paths(&t, a, seq);
        int injected = vg_alloc_failed();
        vg_alloc_fail_at(0, 0);
        if (!injected) {
            ASSERT_EQ(rc, VIGIL_OK);
            break; /* every allocation of the paths has been failed once */
        }
        failures++;
        /* jansson reports an allocation failure inside json_loads as a syntax error, so a
         * record read can surface as ECORRUPT "... not a JSON object" (env/env.c). */
        if (rc == VIGIL_ECORRUPT && strstr(last_err.message, "not a JSON object"))
            rc = VIGIL_ENOMEM;
        if (rc != VIGIL_OK && rc != VIGIL_ENOMEM)
            TEST_FAIL_("allocation %ld: %s: %s", n, vigil_code_name(rc), last_err.message);
        /* Nothing is left half-done. A run whose finish could not be written stays started,
         * exactly as after a crash: recovery re-queues it once its lease expires. */
        ASSERT(count(&t, "wake_run", "started") <= before_s + 1);
        if (count(&t, "wake_run", "started")) {
            struct vg_wake w;
            int nrec = 0;
            vg_test_clock_advance(&t.clock, 300001);
            ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
            ASSERT_OK(vg_wake_recover(&w, NULL, &nrec, E));
            vg_wake_release(&w);
            ASSERT_EQ(nrec, 1);
        }
        ASSERT_EQ(count(&t, "wake_run", "started"), 0);
        ASSERT(count(&t, "wake_run", "queued") <= before_q + 2);
        snprintf(seq, sizeof seq, "h%ld", n);
        ASSERT_OK(wake_paths(&t, a, seq));
        /* Left queued only: a retry after a run that failed (its runner ran out of memory),
         * waiting for its backoff. Let it come due and run. */
        json_t *q = runs(&t, a, "queued");
        for (size_t i = 0; i < json_array_size(q); i++) {
            json_t *r = json_array_get(q, i);
            ASSERT_STREQ(json_string_value(json_object_get(r, "reason")), "recovery");
            ASSERT(json_integer_value(json_object_get(r, "not_before_ms")) > t.clock.wall_ms);
        }
        if (json_array_size(q)) {
            vg_test_clock_advance(&t.clock, 3600000);
            snprintf(seq, sizeof seq, "r%ld", n);
            ASSERT_OK(wake_paths(&t, a, seq));
            ASSERT_EQ(count(&t, "wake_run", "queued"), 0);
        }
        json_decref(q);
    }
    ASSERT(failures > 50);
    test_rt_close(&t);
}

/* A simulated clock: the time is what the test says, and a sleep moves it on. */
struct sim_clock {
    int64_t now_ms;
};

static int64_t sim_now(void *user)
{
    return ((struct sim_clock *)user)->now_ms;
}

static void sim_sleep(void *user, int64_t ms)
{
    ((struct sim_clock *)user)->now_ms += ms;
}

/* A runtime on a fresh store in the test folder name, reading the time from clock, with one
 * active agent of that mode (its id into agent). */
static vigil_runtime *open_on_clock(const char *name, const vigil_clock *clock, const char *mode,
                                    char agent[37])
{
    char path[4200];
    snprintf(path, sizeof path, "%s/store.db", vg_test_tmpdir(name));
    vigil_runtime_options o;
    vigil_runtime_options_default(&o);
    o.store_uri = path;
    o.create_if_missing = 1;
    o.clock = clock;
    vigil_runtime *rt = NULL;
    ASSERT_OK(vigil_runtime_open(&o, &rt, E));
    vigil_agent_spec spec = {.name = name, .mode = mode};
    ASSERT_OK(vigil_agent_create(rt, &spec, agent, E));
    ASSERT_OK(vigil_agent_resume(rt, agent, NULL, E));
    return rt;
}

/* A runtime opened on the program's clock reads the time from it alone: a daily timer fires
 * when the simulated day reaches its hour, its run's times are the simulated ones, and three
 * days skipped give one catch-up wake, all in no real time. */
TEST(a_program_clock_drives_timers_and_record_times)
{
    struct sim_clock sim;
    ASSERT_EQ(vg_time_parse_ms("2026-12-01T08:00:00Z", &sim.now_ms), 0);
    vigil_clock clock = {.now_ms = sim_now, .sleep_ms = sim_sleep, .user = &sim};
    char a[37], tid[37];
    vigil_runtime *rt = open_on_clock("wake_api_clock", &clock, "autonomous", a);
    ASSERT_OK(vigil_timer_add(rt, a, "cron", "0 18 * * *", "UTC", tid, E));
    int ran = -1;
    ASSERT_OK(vigil_wake_process(rt, 0, &ran, E));
    ASSERT_EQ(ran, 0);
    sim.now_ms += 10 * 3600000LL; /* 18:00 */
    ASSERT_OK(vigil_wake_process(rt, 0, &ran, E));
    ASSERT_EQ(ran, 1);
    char *text = NULL;
    ASSERT_OK(vigil_wake_runs(rt, a, "completed", 0, &text, E));
    ASSERT_CONTAINS(text, "\"created_at\":\"2026-12-01T18:00:00.000Z\"");
    vigil_free(text);
    sim.now_ms += 3 * 86400000LL;
    ASSERT_OK(vigil_wake_process(rt, 0, &ran, E));
    ASSERT_EQ(ran, 1); /* the days missed: one catch-up wake, not three */
    ASSERT_OK(vigil_timer_list(rt, a, &text, E));
    ASSERT_CONTAINS(text, "\"next_run_at\":\"2026-12-05T18:00:00.000Z\"");
    vigil_free(text);
    vigil_runtime_close(rt);
    /* A clock without its now_ms is refused. */
    vigil_clock broken = {.user = &sim};
    vigil_runtime_options o;
    vigil_runtime_options_default(&o);
    o.store_uri = ":memory:";
    o.create_if_missing = 1;
    o.clock = &broken;
    ASSERT_CODE(VIGIL_EINVAL, vigil_runtime_open(&o, &rt, NULL));
}

/* A clock that moves on by a millisecond at every reading: two readings never agree. */
static int64_t ticking_now(void *user)
{
    return (*(int64_t *)user)++;
}

/* A manual wake's run key and its created_at come from one reading of the clock: on a clock
 * that moves at every reading, the key is the hash of the agent and the very time created_at
 * shows (with the agent's wake counter). proves: S3-062 */
TEST(a_manual_wakes_key_and_time_are_one_reading_of_the_clock)
{
    int64_t t = 1796634000000;
    vigil_clock clock = {.now_ms = ticking_now, .user = &t};
    char a[37], key[65], *text = NULL;
    vigil_runtime *rt = open_on_clock("wake_api_tick", &clock, "hybrid", a);
    ASSERT_OK(vigil_wake_agent(rt, a, NULL, NULL, key, E));
    ASSERT_OK(vigil_wake_runs(rt, a, "queued", 0, &text, E));
    json_t *runs = json_loads(text, 0, NULL), *run = json_array_get(runs, 0);
    vigil_free(text);
    int64_t created = 0;
    ASSERT_EQ(vg_time_parse_ms(json_string_value(json_object_get(run, "created_at")), &created), 0);
    ASSERT_STREQ(json_string_value(json_object_get(run, "run_key")), key);
    json_decref(runs);
    ASSERT_OK(vigil_agent_show(rt, a, &text, E));
    json_t *shown = json_loads(text, 0, NULL);
    vigil_free(text);
    char turn[64], want[65];
    snprintf(turn, sizeof turn, "manual:%lld:%lld", (long long)created,
             (long long)json_integer_value(
                 json_object_get(json_object_get(shown, "state"), "wake_counter")));
    json_decref(shown);
    const char *parts[] = {a, turn};
    vg_sha256_hex_parts(want, parts, 2);
    ASSERT_STREQ(key, want);
    vigil_runtime_close(rt);
}

/* A listing of every status (no status asked) is the newest wakes of the log, newest first,
 * whatever their statuses, cut at the limit: a wake is indexed by its status (and agent) only
 * (store schema 25), so the listing merges the statuses' newest, for one agent or all. */
TEST(a_listing_of_every_status_is_the_newest_wakes_newest_first)
{
    int64_t t = 1796634000000;
    vigil_clock clock = {.now_ms = ticking_now, .user = &t};
    char a[37], k[4][65], *text = NULL;
    vigil_runtime *rt = open_on_clock("wake_api_list", &clock, "hybrid", a);
    const char *said[] = {"one", "two", "three", "four"}, *session[] = {"s1", "s2", "s3", "s4"};
    for (int i = 0; i < 4; i++)
        ASSERT_OK(vigil_wake_agent(rt, a, said[i], session[i], k[i], E));
    int was_queued = 0, ran = 0;
    ASSERT_OK(vigil_run_cancel(rt, k[2], NULL, &was_queued, E)); /* the third: cancelled */
    ASSERT_EQ(was_queued, 1);
    ASSERT_OK(vigil_wake_process(rt, 1, &ran, E)); /* the oldest: completed */
    ASSERT_EQ(ran, 1);
    /* Now, oldest to newest: completed, queued, cancelled, queued. */
    const char *agents[] = {a, NULL};
    for (int g = 0; g < 2; g++) {
        for (int limit = 1; limit <= 5; limit++) {
            ASSERT_OK(vigil_wake_runs(rt, agents[g], NULL, limit, &text, E));
            json_t *v = json_loads(text, 0, NULL);
            vigil_free(text);
            ASSERT_EQ((int)json_array_size(v), limit < 4 ? limit : 4);
            for (int i = 0; i < (int)json_array_size(v); i++)
                ASSERT_STREQ(
                    json_string_value(json_object_get(json_array_get(v, (size_t)i), "run_key")),
                    k[3 - i]);
            ASSERT_STREQ(json_string_value(json_object_get(json_array_get(v, 0), "status")),
                         "queued");
            json_decref(v);
        }
    }
    ASSERT_OK(vigil_wake_runs(rt, NULL, NULL, 4, &text, E));
    ASSERT_CONTAINS(text, "\"status\":\"cancelled\"");
    ASSERT_CONTAINS(text, "\"status\":\"completed\"");
    vigil_free(text);
    vigil_runtime_close(rt);
}

/* The wake-run log holds what launched a run and how it ended, and the run's key, which
 * names its journal; what the run said and did (its messages, tool calls, timeline and
 * projection) is in the journal alone. A dispatcher task's run is such a wake (its record keeps
 * the wake's run key, src/orch/task.c). proves: S1-005 */
TEST(a_wakes_record_names_its_runs_journal_and_holds_no_transcript)
{
    static const char *const fields[] = {"run_key",     "agent_id",      "reason",
                                         "reason_id",   "thread_id",     "session_id",
                                         "status",      "tokens",        "seed_input",
                                         "meta",        "merged",        "created_at",
                                         "created_ms",  "started_at",    "completed_at",
                                         "error",       "skip_reason",   "attempts",
                                         "epoch",       "not_before_ms", "logical_change_key",
                                         "scheduled_at"};
    struct test_rt t;
    char a[37], key[65], run_id[37];
    int ran = 0;
    test_rt_open(&t, "wake_journal_ref");
    make_agent(&t, a);
    ASSERT_OK(vigil_wake_agent(t.rt, a, "hello there", "s-1", key, E));
    ASSERT_OK(vigil_wake_process(t.rt, 0, &ran, E));
    ASSERT_EQ(ran, 1);
    struct vg_record *w = NULL;
    ASSERT_OK(vg_store_get_copy(t.env->store, "wake_run", key, &w, E));
    json_t *b = json_loads(w->body, 0, NULL);
    ASSERT(b != NULL);
    ASSERT_STREQ(json_string_value(json_object_get(b, "status")), "completed");
    const char *k;
    json_t *v;
    json_object_foreach (b, k, v) {
        size_t i = 0;
        while (i < VG_ARRAY_LEN(fields) && strcmp(fields[i], k))
            i++;
        if (i == VG_ARRAY_LEN(fields))
            TEST_FAIL_("the wake's record holds \"%s\"", k);
    }
    /* Its key is the journal's: the run, its records and its projection are there. */
    ASSERT_OK(vg_journal_run_resolve(t.env->store, key, run_id, E));
    char *show = NULL;
    ASSERT_OK(vg_journal_run_show(t.env->store, run_id, &show, E));
    ASSERT_CONTAINS(show, "\"status\":\"completed\"");
    ASSERT_CONTAINS(show, key);
    vg_free(show);
    char *msgs = NULL;
    ASSERT_OK(vg_journal_run_messages(t.env->store, run_id, NULL, 10, &msgs, E));
    ASSERT_CONTAINS(msgs, "hello there");
    vg_free(msgs);
    char *replay = NULL;
    ASSERT_OK(vg_journal_replay(t.env->store, run_id, &replay, E));
    ASSERT_CONTAINS(replay, "\"stored_projection_matches\":true");
    vg_free(replay);
    json_decref(b);
    vg_free(w);
    test_rt_close(&t);
}

int main(void)
{
    test_wake_runners_provide();
    RUN(public_api_wakes_agents_in_process);
    RUN(a_wakes_record_names_its_runs_journal_and_holds_no_transcript);
    RUN(every_allocation_failure_ends_cleanly);
    RUN(a_program_clock_drives_timers_and_record_times);
    RUN(a_manual_wakes_key_and_time_are_one_reading_of_the_clock);
    RUN(a_listing_of_every_status_is_the_newest_wakes_newest_first);
    return 0;
}
