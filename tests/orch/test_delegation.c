/*
 * test_delegation.c: delegation end to end with the scripted model and the wake queue, as the
 * daemon runs it: a parent's run spawns children and ends; the children run as wakes under
 * their slots; the last one to finish wakes the parent with every result.
 */
#include "helpers/rt.h"

#include "agent/agent.h"
#include "loop/watch_model.h"
#include "orch/orch.h"
#include "orch/orch_int.h"
#include "os/fs.h"
#include "runtime/runtime_int.h"
#include "runtime/wake_runner.h"
#include "store/store.h"
#include "wake/wake.h"

static void cassette(const char *name, const char *exchanges)
{
    static char path[4300];
    size_t n = strlen(exchanges) + 64;
    char *text = malloc(n);
    ASSERT(text != NULL);
    char dir[200];
    snprintf(dir, sizeof dir, "%s_cassette", name);
    snprintf(path, sizeof path, "%s/c.json", vg_test_tmpdir(dir));
    snprintf(text, n, "{\"vigil_cassette\":1,\"exchanges\":[%s]}", exchanges);
    ASSERT_OK(vg_fs_write_file(path, text, strlen(text), E));
    free(text);
    setenv("VIGIL_MODEL_CASSETTE", path, 1);
}

static void make_agent(struct test_rt *t, const char *name, const char *config, char id[37])
{
    vigil_agent_spec s = {.name = name, .kind = "worker", .config_json = config};
    ASSERT_OK(vigil_agent_create(t->rt, &s, id, E));
}

static int64_t count(struct test_rt *t, const char *kind, const char *owner, const char *k1)
{
    struct vg_query q = {.kind = kind, .owner = owner, .k1 = k1};
    int64_t n = -1;
    ASSERT_OK(vg_store_count(t->env->store, &q, &n, E));
    return n;
}

/* The children of agent that `vigil agent tree` says wait for a slot (a queued child is kept in
 * its call's record, not a spawn_child record of its own: orch.h). */
static int waiting_children(struct test_rt *t, const char *agent)
{
    char *text = NULL;
    json_t *c;
    size_t i;
    int n = 0;
    ASSERT_OK(vigil_agent_tree(t->rt, agent, &text, E));
    json_t *tree = json_loads(text, 0, NULL);
    vigil_free(text);
    json_array_foreach (json_object_get(tree, "children"), i, c)
        n += !strcmp(json_string_value(json_object_get(c, "status")), "waiting");
    json_decref(tree);
    return n;
}

static void user_wake(struct vg_wake *w, const char *agent, const char *text)
{
    char key[65];
    enum vg_enqueue_result res;
    json_t *seed = json_string(text);
    struct vg_wake_req r = {.reason = VG_REASON_USER,
                            .agent_id = agent,
                            .session_id = "s1",
                            .turn_id = "t1",
                            .seed_input = seed};
    ASSERT_OK(vg_wake_enqueue(w, &r, key, &res, E));
    ASSERT_EQ(res, VG_ENQ_NEW);
    json_decref(seed);
}

/* The contents of an agent's session thread, oldest first, joined. */
static char *thread_text(struct test_rt *t, const char *agent, const char *session)
{
    char thread[200];
    json_t *msgs = NULL, *m;
    size_t i;
    snprintf(thread, sizeof thread, "%s:session:%s", agent, session);
    ASSERT_OK(vg_message_latest(t->env, agent, thread, 200, &msgs, E));
    size_t cap = 1 << 20, len = 0;
    char *out = calloc(1, cap);
    json_array_foreach (msgs, i, m) {
        const char *c = json_string_value(json_object_get(m, "content"));
        len += (size_t)snprintf(out + len, cap - len, "[%s] %s\n",
                                json_string_value(json_object_get(m, "kind")), c ? c : "");
    }
    json_decref(msgs);
    return out;
}

static const char *SPAWN8 =
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"spawn_agents\",\"arguments\":"
    "\"{\\\"requests\\\":[{\\\"agent\\\":\\\"w0\\\",\\\"goal\\\":\\\"part 0\\\"},"
    "{\\\"agent\\\":\\\"w1\\\",\\\"goal\\\":\\\"part "
    "1\\\"},{\\\"agent\\\":\\\"w2\\\",\\\"goal\\\":\\\"part 2\\\"},"
    "{\\\"agent\\\":\\\"w3\\\",\\\"goal\\\":\\\"part "
    "3\\\"},{\\\"agent\\\":\\\"w4\\\",\\\"goal\\\":\\\"part 4\\\"},"
    "{\\\"agent\\\":\\\"w5\\\",\\\"goal\\\":\\\"part "
    "5\\\"},{\\\"agent\\\":\\\"w6\\\",\\\"goal\\\":\\\"part 6\\\"},"
    "{\\\"agent\\\":\\\"w7\\\",\\\"goal\\\":\\\"part 7\\\"}]}\"}],\"stop_reason\":\"tool_use\"}},"
    "{\"response\":{\"text\":\"Delegated; waiting.\"}},"
    "{\"response\":{\"text\":\"child answer A\"}},{\"response\":{\"text\":\"child answer B\"}},"
    "{\"response\":{\"text\":\"child answer C\"}},{\"response\":{\"text\":\"child answer D\"}},"
    "{\"response\":{\"text\":\"child answer E\"}},{\"response\":{\"text\":\"child answer F\"}},"
    "{\"response\":{\"text\":\"child answer G\"}},{\"response\":{\"text\":\"child answer H\"}},"
    "{\"response\":{\"text\":\"All eight parts are in.\"}}";

/* A parent allowed 3 children at once, 8 workers, and the parent's user wake queued. */
static void fan_out_world(struct test_rt *t, struct vg_wake *w, const char *name, char boss[37],
                          char kid[8][37])
{
    cassette(name, SPAWN8);
    test_rt_open(t, name);
    make_agent(t, "boss",
               "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true,\"max_concurrent\":3}}",
               boss);
    for (int i = 0; i < 8; i++) {
        char n[8];
        snprintf(n, sizeof n, "w%d", i);
        make_agent(t, n, "{}", kid[i]);
    }
    ASSERT_OK(vg_wake_init(w, t->env, NULL, E));
    user_wake(w, boss, "Split the job in eight.");
}

/* `vigil runs show` of the parent's (only) run lists each spawn decision with its reason. */
static void parents_run_shows_its_decisions(struct test_rt *t, const char *agent, size_t n)
{
    char *text = NULL;
    ASSERT_OK(vigil_runs_list(t->rt, agent, NULL, NULL, 1, &text, E));
    json_t *list = json_loads(text, 0, NULL);
    vigil_free(text);
    const char *run_id = json_string_value(
        json_object_get(json_array_get(json_object_get(list, "items"), 0), "run_id"));
    ASSERT(run_id != NULL);
    ASSERT_OK(vigil_run_show(t->rt, run_id, &text, E));
    json_t *run = json_loads(text, 0, NULL), *d;
    vigil_free(text);
    json_t *decisions = json_object_get(run, "spawn_decisions");
    size_t i;
    ASSERT_EQ(json_array_size(decisions), n);
    json_array_foreach (decisions, i, d) {
        ASSERT(json_string_value(json_object_get(d, "reason")) != NULL);
        ASSERT_EQ(json_integer_value(json_object_get(d, "index")), (json_int_t)i);
    }
    /* The same decisions are the run's journal records: its replay rebuilds them. */
    ASSERT_OK(vigil_run_replay(t->rt, run_id, &text, E));
    json_t *replay = json_loads(text, 0, NULL);
    vigil_free(text);
    ASSERT(json_is_true(json_object_get(replay, "stored_projection_matches")));
    size_t seen = 0;
    json_array_foreach (json_object_get(replay, "timeline"), i, d) {
        const char *policy = json_string_value(json_object_get(d, "policy"));
        if (!policy || strncmp(policy, "spawn-", 6))
            continue;
        ASSERT_STREQ(policy, "spawn-admitted");
        ASSERT_CONTAINS(json_string_value(json_object_get(d, "reason")), "admitted");
        seen++;
    }
    ASSERT_EQ(seen, n);
    json_decref(replay);
    json_decref(run);
    json_decref(list);
}

static int body_cb(void *user, const struct vg_record *r)
{
    *(json_t **)user = json_loads(r->body, 0, NULL);
    return 1;
}

/* A spawn call's eight decisions are one journal record of the parent's run (one row, one write
 * of the run's projection), each decision in it with its own id, action, reason and policy; the
 * decisions are in the run's replay and `runs show` all the same. proves: S0-147 */
TEST(a_spawn_calls_decisions_are_one_journal_record)
{
    struct test_rt t;
    struct vg_wake w;
    char boss[37], kid[8][37], *text = NULL;
    int ran = 0;
    fan_out_world(&t, &w, "orch_decisions_once", boss, kid);
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_OK(vigil_runs_list(t.rt, boss, NULL, NULL, 1, &text, E));
    json_t *list = json_loads(text, 0, NULL);
    vigil_free(text);
    const char *run_id = json_string_value(
        json_object_get(json_array_get(json_object_get(list, "items"), 0), "run_id"));
    ASSERT(run_id != NULL);
    struct vg_query q = {.kind = "journal", .owner = boss, .k1 = run_id, .k2 = "decision.recorded"};
    int64_t singles = -1, calls = -1;
    ASSERT_OK(vg_store_count(t.env->store, &q, &singles, E));
    q.k2 = "decisions.recorded";
    ASSERT_OK(vg_store_count(t.env->store, &q, &calls, E));
    ASSERT_EQ(singles, 0);
    ASSERT_EQ(calls, 1);
    json_t *rec = NULL, *d;
    ASSERT_OK(vg_store_scan(t.env->store, &q, body_cb, &rec, E));
    ASSERT(rec != NULL);
    json_t *items = json_object_get(rec, "decisions");
    ASSERT_EQ(json_array_size(items), 8);
    size_t i;
    json_array_foreach (items, i, d) {
        ASSERT(json_string_length(json_object_get(d, "decision_id")) == 36);
        ASSERT_STREQ(json_string_value(json_object_get(d, "action")), "record-only");
        char want[32];
        snprintf(want, sizeof want, "request %zu (", i);
        ASSERT_CONTAINS(json_string_value(json_object_get(d, "reason")), want);
        json_t *pol = json_object_get(d, "policy");
        ASSERT_STREQ(json_string_value(json_object_get(pol, "kind")), "spawn-admitted");
        ASSERT_STREQ(json_string_value(json_object_get(pol, "tool")), "spawn_agents");
        ASSERT(json_string_length(json_object_get(pol, "operation_id")) > 0);
    }
    ASSERT(strcmp(json_string_value(json_object_get(json_array_get(items, 0), "decision_id")),
                  json_string_value(json_object_get(json_array_get(items, 1), "decision_id"))));
    parents_run_shows_its_decisions(&t, boss, 8);
    json_decref(rec);
    json_decref(list);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* proves: S0-147 S2-005 S2-042 */
TEST(a_fan_out_of_8_runs_3_at_a_time_and_wakes_the_parent_once_with_every_result)
{
    struct test_rt t;
    struct vg_wake w;
    char boss[37], kid[8][37];
    fan_out_world(&t, &w, "orch_fanout", boss, kid);
    int ran = 0, runs = 0;
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
    ASSERT_EQ(ran, 1);
    /* The parent's run ended: 3 children run, 5 wait for a slot, the parent holds nothing. */
    ASSERT_EQ(count(&t, "spawn_child", boss, "running"), 3);
    ASSERT_EQ(waiting_children(&t, boss), 5);
    parents_run_shows_its_decisions(&t, boss, 8);
    do {
        ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
        runs += ran;
        ASSERT(count(&t, "spawn_child", boss, "running") <= 3);
        ASSERT(count(&t, "wake_run", NULL, "queued") <= 3);
    } while (ran);
    ASSERT_EQ(runs, 9); /* eight children and the parent's wake with their results */
    ASSERT_EQ(count(&t, "spawn_child", boss, "completed"), 8);
    for (int i = 0; i < 8; i++)
        ASSERT_EQ(count(&t, "wake_run", kid[i], NULL), 1); /* no child ran twice */
    ASSERT_EQ(count(&t, "wake_run", boss, NULL), 2);
    char *text = thread_text(&t, boss, "s1");
    ASSERT_CONTAINS(text, "[user] Split the job in eight.");
    ASSERT_CONTAINS(text, "The agents you spawned have finished");
    for (char c = 'A'; c <= 'H'; c++) {
        char want[32];
        snprintf(want, sizeof want, "child answer %c", c);
        ASSERT_CONTAINS(text, want);
    }
    ASSERT_CONTAINS(text, "All eight parts are in.");
    free(text);
    vg_wake_release(&w);
    test_rt_close(&t);
}

static int first_child_cb(void *user, const struct vg_record *r)
{
    snprintf(user, 65, "%s", r->id);
    return 1;
}

/* A child whose wake is cancelled before it starts ends "cancelled" for its parent: the next
 * waiting child takes its slot, and the parent's results wake still comes once the others are
 * done, with the cancellation among the results (C3 of the session-30 trial: it stayed
 * "running" and the parent was never woken). */
TEST(a_child_cancelled_before_it_starts_ends_for_its_parent)
{
    struct test_rt t;
    struct vg_wake w;
    char boss[37], kid[8][37], key[65] = "";
    int ran = 0, runs = 0, queued = 0;
    fan_out_world(&t, &w, "orch_cancel_child", boss, kid);
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
    struct vg_query q = {.kind = "spawn_child", .owner = boss, .k1 = "running"};
    ASSERT_OK(vg_store_scan(t.env->store, &q, first_child_cb, key, E));
    ASSERT_OK(vigil_run_cancel(t.rt, key, "tester", &queued, E));
    ASSERT_EQ(queued, 1);
    json_t *rec = NULL;
    ASSERT_OK(vg_orch_child_get(t.env, key, &rec, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(rec, "status")), "cancelled");
    ASSERT_CONTAINS(json_string_value(json_object_get(rec, "result")), "cancelled by tester");
    json_decref(rec);
    ASSERT_EQ(count(&t, "spawn_child", boss, "running"), 3); /* a waiting child took the slot */
    ASSERT_EQ(waiting_children(&t, boss), 4);
    do {
        ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
        runs += ran;
    } while (ran);
    ASSERT_EQ(runs, 8); /* seven children and the parent's wake with their results */
    ASSERT_EQ(count(&t, "spawn_child", boss, "completed"), 7);
    ASSERT_EQ(count(&t, "wake_run", boss, NULL), 2);
    char *text = thread_text(&t, boss, "s1");
    ASSERT_CONTAINS(text, "The agents you spawned have finished");
    ASSERT_CONTAINS(text, "cancelled by tester before it started");
    free(text);
    vg_wake_release(&w);
    test_rt_close(&t);
}

static const char *SPAWN_TWO =
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"spawn_agents\",\"arguments\":"
    "\"{\\\"requests\\\":[{\\\"agent\\\":\\\"w0\\\",\\\"goal\\\":\\\"part 0\\\"},"
    "{\\\"agent\\\":\\\"w1\\\",\\\"goal\\\":\\\"part 1\\\"}]}\"}],"
    "\"stop_reason\":\"tool_use\"}},"
    "{\"response\":{\"text\":\"Delegated; waiting.\"}},"
    "{\"response\":{\"text\":\"child answer A\"}},{\"response\":{\"text\":\"child answer B\"}},"
    "{\"response\":{\"text\":\"Both parts are in.\"}}";

static const char *wake_status(struct test_rt *t, const char *key)
{
    static char st[16];
    json_t *run = NULL;
    ASSERT_OK(vg_env_get_json(t->env, "wake_run", key, &run, NULL, E));
    snprintf(st, sizeof st, "%s", json_string_value(json_object_get(run, "status")));
    json_decref(run);
    return st;
}

static void activate_then_pause(struct test_rt *t, const char *agent)
{
    ASSERT_OK(vigil_agent_resume(t->rt, agent, "test", E)); /* created -> active -> dormant */
    ASSERT_OK(vigil_agent_pause(t->rt, agent, "test", E));
}

/* The global kill switch pulled in the middle of a fan-out, and the agents paused, hold the
 * fan-out: the child queued before the switch, the child started while its agent is paused and
 * the parent's results wake while the parent is paused each wait in the queue and run once
 * their agent takes wakes again. Skipped, the child stayed running with its parent waiting for
 * ever, the parent's only slot held (trial M1). */
TEST(a_kill_switch_or_a_pause_mid_fan_out_holds_the_children_and_they_run_after_it)
{
    struct test_rt t;
    struct vg_wake w;
    char boss[37], w0[37], w1[37], key[65] = "";
    int ran = 0;
    cassette("orch_held_fan_out", SPAWN_TWO);
    test_rt_open(&t, "orch_held_fan_out");
    make_agent(&t, "boss",
               "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true,\"max_concurrent\":1}}",
               boss);
    make_agent(&t, "w0", "{}", w0);
    make_agent(&t, "w1", "{}", w1);
    ASSERT_OK(vg_orch_wake_init(&w, t.env, E)); /* reads the kill switches, as the daemon's */
    user_wake(&w, boss, "Split the job in two.");
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
    ASSERT_EQ(ran, 1);
    struct vg_query q = {.kind = "spawn_child", .owner = boss, .k1 = "running"};
    ASSERT_OK(vg_store_scan(t.env->store, &q, first_child_cb, key, E));
    ASSERT_OK(vigil_kill_set(t.rt, NULL, NULL, 1, "incident", E));
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 0, &ran, E));
    ASSERT_EQ(ran, 0);
    ASSERT_STREQ(wake_status(&t, key), "queued");
    ASSERT_OK(vigil_kill_set(t.rt, NULL, NULL, 0, "test", E));
    activate_then_pause(&t, w1);
    ASSERT_OK(vigil_agent_pause(t.rt, boss, "test", E)); /* active since its run */
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 0, &ran, E));
    ASSERT_EQ(ran, 1); /* w0; w1's run waits for w1 */
    ASSERT_EQ(count(&t, "spawn_child", boss, "running"), 1);
    ASSERT_EQ(count(&t, "wake_run", w1, "queued"), 1);
    ASSERT_OK(vigil_agent_resume(t.rt, w1, "test", E));
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 0, &ran, E));
    ASSERT_EQ(ran, 1); /* w1; the parent's results wake waits for the parent */
    ASSERT_EQ(count(&t, "spawn_child", boss, "completed"), 2);
    ASSERT_EQ(count(&t, "wake_run", boss, "queued"), 1);
    ASSERT_OK(vigil_agent_resume(t.rt, boss, "test", E));
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 0, &ran, E));
    ASSERT_EQ(ran, 1);
    char *text = thread_text(&t, boss, "s1");
    ASSERT_CONTAINS(text, "child answer A");
    ASSERT_CONTAINS(text, "child answer B");
    ASSERT_CONTAINS(text, "Both parts are in.");
    free(text);
    ASSERT_EQ(count(&t, "wake_run", NULL, "skipped"), 0);
    vg_wake_release(&w);
    test_rt_close(&t);
}

static const char *SPAWN_FAILING =
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"spawn_agents\",\"arguments\":"
    "\"{\\\"requests\\\":[{\\\"agent\\\":\\\"w0\\\",\\\"goal\\\":\\\"part 0\\\"}]}\"}],"
    "\"stop_reason\":\"tool_use\"}},"
    "{\"response\":{\"text\":\"Delegated; waiting.\"}},"
    "{\"error\":{\"code\":\"EAUTH\",\"message\":\"bad key\"}},"
    "{\"response\":{\"text\":\"The part failed; noted.\"}},"
    "{\"response\":{\"text\":\"a retry would have said this\"}}";

/* A child whose run fails ends "failed" for its parent, which is woken with the failure; the
 * daemon's generic retry does not run it again after that (trial C10: a recovery wake ran the
 * child's work after its parent had been told it failed). */
TEST(a_failed_child_is_reported_to_its_parent_and_not_retried_behind_it)
{
    struct test_rt t;
    struct vg_wake w;
    char boss[37], kid[37];
    int ran = 0, runs = 0;
    cassette("orch_failed_child", SPAWN_FAILING);
    test_rt_open(&t, "orch_failed_child");
    make_agent(&t, "boss", "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true}}", boss);
    make_agent(&t, "w0", "{}", kid);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    user_wake(&w, boss, "Do the part.");
    do { /* until nothing more runs */
        ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
        runs += ran;
    } while (ran);
    ASSERT_EQ(runs, 3); /* the parent, its child, the parent again with the result */
    ASSERT_EQ(count(&t, "spawn_child", boss, "failed"), 1);
    ASSERT_EQ(count(&t, "wake_run", kid, NULL), 1);  /* no recovery wake of the child */
    ASSERT_EQ(count(&t, "wake_run", boss, NULL), 2); /* the parent, woken with the failure */
    char *text = thread_text(&t, boss, "s1");
    ASSERT_CONTAINS(text, "bad key");
    free(text);
    vg_wake_release(&w);
    test_rt_close(&t);
}

static const char *RESUME =
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"spawn_agents\",\"arguments\":"
    "\"{\\\"requests\\\":[{\\\"agent\\\":\\\"w0\\\",\\\"goal\\\":\\\"count the "
    "sheep\\\"}]}\"}],\"stop_reason\":\"tool_use\"}},"
    "{\"response\":{\"text\":\"Delegated.\"}},"
    "{\"response\":{\"text\":\"first answer: 41 sheep\"}},"
    "{\"response\":{\"text\":\"Thanks.\"}},"
    "{\"response\":{\"text\":\"resumed answer: 42 with the lamb\"}}";

/* proves: S2-008 */
TEST(a_resumed_sub_agent_sees_its_exact_conversation_and_the_steps_it_took)
{
    struct test_rt t;
    struct vg_wake w;
    char boss[37], kid[37], key[65] = "", again[65];
    int ran = 0;
    cassette("orch_resume", RESUME);
    test_rt_open(&t, "orch_resume");
    make_agent(&t, "boss", "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true}}", boss);
    make_agent(&t, "w0", "{}", kid);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    user_wake(&w, boss, "Count them.");
    do
        ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
    while (ran);
    struct vg_query q = {.kind = "spawn_child", .owner = boss};
    ASSERT_OK(vg_store_scan(t.env->store, &q, first_child_cb, key, E));
    ASSERT_EQ(count(&t, "wake_run", boss, NULL), 2);
    vigil_error err = {0};
    char rk[65];
    ASSERT_EQ(vigil_run_resume(t.rt, "no-such-run-key-at-all", NULL, rk, &err), VIGIL_ENOTFOUND);
    ASSERT_OK(vigil_run_resume(t.rt, key, "Count the lamb too.", again, E));
    do
        ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
    while (ran);
    json_t *child = NULL;
    ASSERT_OK(vg_orch_child_get(t.env, key, &child, NULL, E));
    char *text = thread_text(&t, kid, json_string_value(json_object_get(child, "session")));
    /* One conversation: the delegated task, the first answer, the continuation, the new answer. */
    const char *order[] = {
        "count the sheep", "first answer: 41 sheep", "You are resuming your earlier run",
        "after 1 steps",   "Count the lamb too.",    "resumed answer: 42 with the lamb"};
    const char *at = text;
    for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
        const char *hit = strstr(at, order[i]);
        if (!hit)
            ASSERT_CONTAINS(at, order[i]);
        at = hit;
    }
    free(text);
    json_decref(child);
    ASSERT_EQ(count(&t, "wake_run", boss, NULL), 2); /* the parent was not woken again */
    ASSERT_EQ(count(&t, "run_resume", kid, NULL), 1);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* The step limit a run is given (as the wake runner computes it: the agent's definition, then
 * its spawn): a sub-agent's run takes 50 when neither its definition nor its spawn request sets
 * one, its definition's when it does; a top-level run takes none (0: no limit, test_loop.c runs
 * one past where a limit would stop it). proves: S2-009 */
TEST(a_sub_agent_run_takes_50_steps_unless_its_definition_says_otherwise)
{
    struct test_rt t;
    struct vg_wake w;
    char boss[37], kid[37], key[65] = "";
    int ran = 0;
    cassette("orch_steps", RESUME);
    test_rt_open(&t, "orch_steps");
    make_agent(&t, "boss", "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true}}", boss);
    make_agent(&t, "w0", "{}", kid);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    user_wake(&w, boss, "Count them.");
    do
        ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
    while (ran);
    struct vg_query q = {.kind = "spawn_child", .owner = boss};
    ASSERT_OK(vg_store_scan(t.env->store, &q, first_child_cb, key, E));
    ASSERT(key[0]);
    struct vg_loop_limits child = {0}, top = {0};
    ASSERT_OK(vg_runtime_agent_limits(t.env, kid, &child, E));
    ASSERT_OK(vg_orch_child_limits(t.env, key, &child, E));
    ASSERT_EQ(child.max_steps, 50);
    ASSERT_OK(vg_runtime_agent_limits(t.env, boss, &top, E));
    ASSERT_OK(vg_orch_child_limits(t.env, "a-run-key-of-no-spawn", &top, E));
    ASSERT_EQ(top.max_steps, 0);
    /* The definition's own limit is the child's. */
    json_t *f = json_pack("{s:{s:{s:i}}}", "config", "limits", "max_steps", 7);
    ASSERT_OK(vg_agent_update(t.env, kid, f, E));
    json_decref(f);
    struct vg_loop_limits defined = {0};
    ASSERT_OK(vg_runtime_agent_limits(t.env, kid, &defined, E));
    ASSERT_OK(vg_orch_child_limits(t.env, key, &defined, E));
    ASSERT_EQ(defined.max_steps, 7);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* A greedy child calls tools forever; the steps it may take are what its parent had left. */
static const char *GREEDY =
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"spawn_agents\",\"arguments\":"
    "\"{\\\"requests\\\":[{\\\"agent\\\":\\\"greedy\\\",\\\"goal\\\":\\\"eat\\\","
    "\\\"max_runtime_ms\\\":60000}]}\"}],"
    "\"stop_reason\":\"tool_use\"}},"
    "{\"response\":{\"text\":\"Delegated.\"}},"
#define NOTE(n)                                                                                    \
    "{\"response\":{\"tool_calls\":[{\"id\":\"n" #n "\",\"name\":\"record_observations\","         \
    "\"arguments\":\"{\\\"notes\\\":[\\\"more " #n "\\\"]}\"}],\"stop_reason\":\"tool_use\"}},"
    NOTE(1) NOTE(2) NOTE(3) NOTE(4) NOTE(5) NOTE(6) NOTE(7) NOTE(8)
        NOTE(9) "{\"response\":{\"text\":\"parent sees the result\"}}";

/* proves: S0-145 S2-011 (the per-spawn run time; the timeout's grace: test_loop.c) */
TEST(a_greedy_child_is_stopped_by_its_parents_budget_and_its_spend_is_the_parents)
{
    struct test_rt t;
    struct vg_wake w;
    char boss[37], greedy[37];
    cassette("orch_greedy", GREEDY);
    test_rt_open(&t, "orch_greedy");
    make_agent(&t, "boss",
               "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true},"
               "\"budgets\":{\"steps\":5}}",
               boss);
    make_agent(&t, "greedy", "{\"tools\":[\"record_observations\"]}", greedy);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    user_wake(&w, boss, "Go.");
    int ran = 0;
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 2, &ran, E));
    ASSERT_EQ(ran, 2); /* the parent's run, then the child's */
    json_t *kids = NULL;
    ASSERT_OK(vg_orch_tree(t.env, boss, &kids, E));
    json_t *kid = json_array_get(json_object_get(kids, "children"), 0);
    /* At the spawn the parent had used 1 of its 5 steps: the child got 4. */
    ASSERT_EQ(json_integer_value(json_object_get(kid, "max_steps")), 4);
    /* Its run's time limit is the request's max_runtime_ms, which narrows the definition's
     * (10 min here) and never widens a shorter one. */
    struct vg_loop_limits lim = {.timeout_ms = 600000};
    const char *kid_key = json_string_value(json_object_get(kid, "run_key"));
    ASSERT_OK(vg_orch_child_limits(t.env, kid_key, &lim, E));
    ASSERT_EQ(lim.timeout_ms, 60000);
    lim.timeout_ms = 1000;
    ASSERT_OK(vg_orch_child_limits(t.env, kid_key, &lim, E));
    ASSERT_EQ(lim.timeout_ms, 1000);
    ASSERT_STREQ(json_string_value(json_object_get(kid, "status")), "completed");
    json_int_t spent = json_integer_value(json_object_get(json_object_get(kid, "spent"), "steps"));
    ASSERT(spent >= 4 && spent <= 5); /* the soft stop at 4, one more before the hard stop */
    json_decref(kids);
    /* The child's steps count against the parent: its budget is gone, so it spawns no more. */
    json_t *usage = NULL;
    ASSERT_OK(vg_budget_usage(t.env, boss, &usage, E));
    ASSERT(json_integer_value(json_object_get(usage, "steps")) >= 2 + spent);
    json_decref(usage);
    char *out = NULL;
    vigil_error err = {0};
    vigil_tool_call(t.rt, boss, "later", "spawn_agents",
                    "{\"requests\":[{\"agent\":\"greedy\",\"goal\":\"again\"}]}", &out, &err);
    ASSERT_CONTAINS(out, "budget");
    vigil_free(out);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* A child's result is the first 16,000 bytes of its answer: where that cut would split a
 * character, the text up to it (cut byte for byte, the string was not UTF-8, jansson refused it,
 * and the child's end failed as "out of memory": its parent never heard of it). */
TEST(a_childs_long_result_is_kept_cut_where_a_character_ends)
{
    struct test_rt t;
    struct vg_wake w;
    char top[37], leaf[37];
    enum { LONG = 16100, CUT = 16000 };
    char *answer = malloc(LONG + 1);
    ASSERT(answer != NULL);
    memset(answer, 'a', LONG);
    answer[LONG] = '\0';
    memcpy(answer + CUT - 1, "\xc3\xa9", 2); /* "é" over byte 16,000 */
    const char *head =
        "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"spawn_agents\",\"arguments\":"
        "\"{\\\"requests\\\":[{\\\"agent\\\":\\\"leaf\\\",\\\"goal\\\":\\\"write it all\\\"}]}\"}],"
        "\"stop_reason\":\"tool_use\"}},"
        "{\"response\":{\"text\":\"top waits\"}},"
        "{\"response\":{\"text\":\"";
    const char *tail = "\"}},{\"response\":{\"text\":\"top is done\"}}";
    size_t n = strlen(head) + LONG + strlen(tail) + 1;
    char *exchanges = malloc(n);
    ASSERT(exchanges != NULL);
    snprintf(exchanges, n, "%s%s%s", head, answer, tail);
    cassette("orch_long_result", exchanges);
    test_rt_open(&t, "orch_long_result");
    make_agent(&t, "top", "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true}}", top);
    make_agent(&t, "leaf", "{}", leaf);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    user_wake(&w, top, "Write it.");
    int ran = 0;
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 0, &ran, E));
    ASSERT_EQ(ran, 3); /* top, leaf, top again with the result */
    json_t *tree = NULL;
    ASSERT_OK(vg_orch_tree(t.env, top, &tree, E));
    json_t *c = json_array_get(json_object_get(tree, "children"), 0);
    const char *kept = json_string_value(json_object_get(c, "result"));
    ASSERT(kept != NULL && strlen(kept) == CUT - 1 && !strncmp(kept, answer, CUT - 1));
    json_decref(tree);
    free(exchanges);
    free(answer);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* top spawns mid (granted to spawn), mid spawns leaf and ends; leaf's result resumes mid's
 * own conversation, and mid's final answer from there is what top gets. */
static const char *CHAIN =
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"spawn_agents\",\"arguments\":"
    "\"{\\\"requests\\\":[{\\\"agent\\\":\\\"mid\\\",\\\"goal\\\":\\\"plan the trip\\\","
    "\\\"allowed_tools\\\":[\\\"spawn_agents\\\"]}]}\"}],\"stop_reason\":\"tool_use\"}},"
    "{\"response\":{\"text\":\"top waits\"}},"
    "{\"response\":{\"tool_calls\":[{\"id\":\"c2\",\"name\":\"spawn_agents\",\"arguments\":"
    "\"{\\\"requests\\\":[{\\\"agent\\\":\\\"leaf\\\",\\\"goal\\\":\\\"find trains\\\"}]}\"}],"
    "\"stop_reason\":\"tool_use\"}},"
    "{\"response\":{\"text\":\"mid waits\"}},"
    "{\"response\":{\"text\":\"train at 9\"}},"
    "{\"response\":{\"text\":\"plan: take the 9 o'clock train\"}},"
    "{\"response\":{\"text\":\"top is done\"}}";

TEST(a_sub_agent_resumes_its_own_conversation_when_its_children_finish)
{
    struct test_rt t;
    struct vg_wake w;
    char top[37], mid[37], leaf[37];
    cassette("orch_chain", CHAIN);
    test_rt_open(&t, "orch_chain");
    make_agent(&t, "top", "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true}}", top);
    make_agent(&t, "mid", "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true}}", mid);
    make_agent(&t, "leaf", "{}", leaf);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    user_wake(&w, top, "Plan a trip.");
    int ran = 0;
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 0, &ran, E));
    ASSERT_EQ(ran, 5); /* top, mid, leaf, mid again, top again */
    json_t *tree = NULL;
    ASSERT_OK(vg_orch_tree(t.env, top, &tree, E));
    json_t *m = json_array_get(json_object_get(tree, "children"), 0);
    ASSERT_STREQ(json_string_value(json_object_get(m, "result")), "plan: take the 9 o'clock train");
    json_t *l = json_array_get(json_object_get(m, "children"), 0);
    ASSERT_STREQ(json_string_value(json_object_get(l, "child_agent")), leaf);
    ASSERT_EQ(json_integer_value(json_object_get(l, "depth")), 2);
    /* mid's thread is one conversation: its task, its spawn, and the results after them. */
    char session[80];
    snprintf(session, sizeof session, "%s", json_string_value(json_object_get(m, "session")));
    char *text = thread_text(&t, mid, session);
    const char *task = strstr(text, "plan the trip"), *wait = strstr(text, "mid waits");
    const char *res = strstr(text, "train at 9"), *fin = strstr(text, "plan: take");
    ASSERT(task && wait && res && fin && task < wait && wait < res && res < fin);
    free(text);
    text = thread_text(&t, top, "s1");
    ASSERT_CONTAINS(text, "plan: take the 9 o'clock train");
    free(text);
    json_decref(tree);
    vg_wake_release(&w);
    test_rt_close(&t);
}

static json_int_t spent_steps(json_t *child)
{
    return json_integer_value(json_object_get(json_object_get(child, "spent"), "steps"));
}

static json_int_t budget_steps(struct test_rt *t, const char *agent)
{
    json_t *usage = NULL;
    ASSERT_OK(vg_budget_usage(t->env, agent, &usage, E));
    json_int_t n = json_integer_value(json_object_get(usage, "steps"));
    json_decref(usage);
    return n;
}

/* mid spawns leaf and ends (2 steps); the wake with leaf's result then fails at its first call. */
static const char *CHAIN_FAILING =
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"spawn_agents\",\"arguments\":"
    "\"{\\\"requests\\\":[{\\\"agent\\\":\\\"mid\\\",\\\"goal\\\":\\\"plan the trip\\\","
    "\\\"allowed_tools\\\":[\\\"spawn_agents\\\"]}]}\"}],\"stop_reason\":\"tool_use\"}},"
    "{\"response\":{\"text\":\"top waits\"}},"
    "{\"response\":{\"tool_calls\":[{\"id\":\"c2\",\"name\":\"spawn_agents\",\"arguments\":"
    "\"{\\\"requests\\\":[{\\\"agent\\\":\\\"leaf\\\",\\\"goal\\\":\\\"find trains\\\"}]}\"}],"
    "\"stop_reason\":\"tool_use\"}},"
    "{\"response\":{\"text\":\"mid waits\"}},"
    "{\"response\":{\"text\":\"train at 9\"}},"
    "{\"error\":{\"code\":\"EAUTH\",\"message\":\"bad key\"}},"
    "{\"response\":{\"text\":\"top notes the failure\"}}";

/* A child's spend is every step of every run it made: a child that spawned and then failed in
 * the wake bringing its children's results spent the steps of its first run, and its parent's
 * budget counts them (trial C24 of session 30: it showed 0 and the parent was not charged). */
TEST(a_child_that_spawned_and_then_failed_is_charged_every_step_it_took)
{
    struct test_rt t;
    struct vg_wake w;
    char top[37], mid[37], leaf[37];
    cassette("orch_spent_failed", CHAIN_FAILING);
    test_rt_open(&t, "orch_spent_failed");
    make_agent(&t, "top", "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true}}", top);
    make_agent(&t, "mid", "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true}}", mid);
    make_agent(&t, "leaf", "{}", leaf);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    user_wake(&w, top, "Plan a trip.");
    int ran = 0;
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 0, &ran, E));
    ASSERT_EQ(ran, 5); /* top, mid, leaf, mid's failing results wake, top again */
    json_t *tree = NULL;
    ASSERT_OK(vg_orch_tree(t.env, top, &tree, E));
    json_t *m = json_array_get(json_object_get(tree, "children"), 0);
    ASSERT_STREQ(json_string_value(json_object_get(m, "status")), "failed");
    ASSERT_EQ(spent_steps(m), 2); /* its spawn call and "mid waits" */
    json_t *l = json_array_get(json_object_get(m, "children"), 0);
    ASSERT_EQ(spent_steps(l), 1);
    /* top's own 3 steps and mid's 2; leaf's step is mid's (a child's parent is charged). */
    ASSERT_EQ(budget_steps(&t, top), 3 + 2);
    ASSERT_EQ(budget_steps(&t, mid), 2 + 1);
    /* Ending mid again (a replay of its end) charges nothing twice. */
    struct vg_orch_outcome again = {.status = "failed", .text = "x", .steps = 9};
    ASSERT_OK(
        vg_orch_run_ended(t.env, &w, json_string_value(json_object_get(m, "run_key")), &again, E));
    ASSERT_EQ(budget_steps(&t, top), 5);
    json_decref(tree);
    vg_wake_release(&w);
    test_rt_close(&t);
}

static vigil_runtime *g_rt;

/* A tool whose call is a person pressing "cancel" on the run making it. */
static vigil_code press_cancel(void *user, const vigil_tool_call_info *call, const char *args_json,
                               char **out, vigil_error *err)
{
    int queued = 1;
    (void)user;
    (void)args_json;
    vigil_code rc = vigil_run_cancel(g_rt, call->run_key, "tester", &queued, err);
    *out = strdup("{\"result\":\"requested\"}");
    return rc ? rc : (*out ? VIGIL_OK : VIGIL_ENOMEM);
}

static const char *SPAWN_CANCELLED =
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"spawn_agents\",\"arguments\":"
    "\"{\\\"requests\\\":[{\\\"agent\\\":\\\"w0\\\",\\\"goal\\\":\\\"part 0\\\"}]}\"}],"
    "\"stop_reason\":\"tool_use\"}},"
    "{\"response\":{\"text\":\"Delegated; waiting.\"}},"
    "{\"response\":{\"tool_calls\":[{\"id\":\"c2\",\"name\":\"press_cancel\","
    "\"arguments\":\"{}\"}],\"stop_reason\":\"tool_use\"}},"
    "{\"response\":{\"text\":\"The part was cancelled; noted.\"}}";

/* A child cancelled while it runs ends "cancelled" with the steps it took charged to it and to
 * its parent. */
TEST(a_child_cancelled_while_it_runs_is_charged_the_steps_it_took)
{
    struct test_rt t;
    struct vg_wake w;
    char boss[37], kid[37];
    int ran = 0;
    cassette("orch_spent_cancelled", SPAWN_CANCELLED);
    test_rt_open(&t, "orch_spent_cancelled");
    g_rt = t.rt;
    vigil_tool_def d = {.name = "press_cancel",
                        .description = "Cancel this run.",
                        .input_schema_json = "{\"type\":\"object\"}"};
    ASSERT_OK(vigil_tool_register(t.rt, &d, press_cancel, NULL, E));
    make_agent(&t, "boss", "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true}}", boss);
    make_agent(&t, "w0", "{\"tools\":[\"press_cancel\"]}", kid);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    user_wake(&w, boss, "Do the part.");
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 0, &ran, E));
    ASSERT_EQ(ran, 3); /* the parent, its child, the parent again */
    json_t *tree = NULL;
    ASSERT_OK(vg_orch_tree(t.env, boss, &tree, E));
    json_t *c = json_array_get(json_object_get(tree, "children"), 0);
    ASSERT_STREQ(json_string_value(json_object_get(c, "status")), "cancelled");
    ASSERT_EQ(spent_steps(c), 1);
    ASSERT_EQ(budget_steps(&t, boss), 3 + 1);
    json_decref(tree);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* A tool whose call is a person pulling the global kill switch. */
static vigil_code pull_switch(void *user, const vigil_tool_call_info *call, const char *args_json,
                              char **out, vigil_error *err)
{
    (void)user;
    (void)call;
    (void)args_json;
    vigil_code rc = vigil_kill_set(g_rt, NULL, NULL, 1, "incident", err);
    *out = strdup("{\"result\":\"pulled\"}");
    return rc ? rc : (*out ? VIGIL_OK : VIGIL_ENOMEM);
}

static const char *SPAWN_SWITCHED =
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"spawn_agents\",\"arguments\":"
    "\"{\\\"requests\\\":[{\\\"agent\\\":\\\"w0\\\",\\\"goal\\\":\\\"refund 10\\\"}]}\"}],"
    "\"stop_reason\":\"tool_use\"}},"
    "{\"response\":{\"text\":\"Delegated; waiting.\"}},"
    "{\"response\":{\"tool_calls\":[{\"id\":\"c2\",\"name\":\"pull_switch\","
    "\"arguments\":\"{}\"}],\"stop_reason\":\"tool_use\"}},"
    "{\"response\":{\"text\":\"The refund is done.\"}},"
    "{\"response\":{\"text\":\"Noted.\"}}";

/* A child the kill switch stopped ends "completed" with what it had answered, as a budget stop
 * does (trial F11), and its result says it was stopped and why: it was an empty "completed",
 * which a parent could not tell from a refund done (trial M4). */
TEST(a_child_the_kill_switch_stopped_tells_its_parent_so)
{
    struct test_rt t;
    struct vg_wake w;
    char boss[37], kid[37], key[65] = "";
    int ran = 0;
    cassette("orch_switched_child", SPAWN_SWITCHED);
    test_rt_open(&t, "orch_switched_child");
    g_rt = t.rt;
    vigil_tool_def d = {.name = "pull_switch",
                        .description = "Pull the kill switch.",
                        .input_schema_json = "{\"type\":\"object\"}"};
    ASSERT_OK(vigil_tool_register(t.rt, &d, pull_switch, NULL, E));
    make_agent(&t, "boss", "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true}}", boss);
    make_agent(&t, "w0", "{\"tools\":[\"pull_switch\"]}", kid);
    ASSERT_OK(vg_orch_wake_init(&w, t.env, E));
    user_wake(&w, boss, "Refund it.");
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 0, &ran, E));
    ASSERT_EQ(ran, 2); /* the parent, then its child, which the switch stopped */
    struct vg_query q = {.kind = "spawn_child", .owner = boss};
    ASSERT_OK(vg_store_scan(t.env->store, &q, first_child_cb, key, E));
    json_t *rec = NULL;
    ASSERT_OK(vg_orch_child_get(t.env, key, &rec, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(rec, "status")), "completed");
    ASSERT_CONTAINS(json_string_value(json_object_get(rec, "result")),
                    "[stopped by a kill switch (vigil kill status) before it finished]");
    json_decref(rec);
    ASSERT_OK(vigil_kill_set(t.rt, NULL, NULL, 0, "test", E));
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 0, &ran, E));
    ASSERT_EQ(ran, 1); /* the parent's results wake, held while the switch was on */
    char *text = thread_text(&t, boss, "s1");
    ASSERT_CONTAINS(text, "before it finished]");
    free(text);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* A restart between the parent's run and its children's loses nothing and runs nothing
 * twice: the children are queued wakes, and ending a child twice changes nothing. */
TEST(a_restart_while_the_parent_waits_loses_nothing_and_runs_no_child_twice)
{
    struct test_rt t;
    struct vg_wake w;
    char boss[37], kid[8][37];
    fan_out_world(&t, &w, "orch_restart", boss, kid);
    int ran = 0;
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 3, &ran, E));
    vg_wake_release(&w);
    /* Ending a finished child again (a retry after a crash) enqueues nothing more. */
    json_t *tree = NULL;
    ASSERT_OK(vg_orch_tree(t.env, boss, &tree, E));
    const char *k0 = NULL;
    json_t *c;
    size_t j;
    json_array_foreach (json_object_get(tree, "children"), j, c) {
        if (!strcmp(json_string_value(json_object_get(c, "status")), "completed"))
            k0 = json_string_value(json_object_get(c, "run_key"));
    }
    ASSERT(k0 != NULL);
    struct vg_orch_outcome o = {.status = "completed", .text = "again"};
    int64_t before = count(&t, "wake_run", NULL, NULL);
    ASSERT_OK(vg_orch_run_ended(t.env, NULL, k0, &o, E));
    ASSERT_EQ(count(&t, "wake_run", NULL, NULL), before);
    json_decref(tree);
    /* The process is gone; a new one takes over, its model answering from where it was. */
    cassette(
        "orch_restart_2",
        "{\"response\":{\"text\":\"child answer C\"}},{\"response\":{\"text\":\"child answer D\"}},"
        "{\"response\":{\"text\":\"child answer E\"}},{\"response\":{\"text\":\"child answer F\"}},"
        "{\"response\":{\"text\":\"child answer G\"}},{\"response\":{\"text\":\"child answer H\"}},"
        "{\"response\":{\"text\":\"All eight parts are in.\"}}");
    test_rt_reopen(&t);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    int rest = 0;
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 0, &rest, E));
    ASSERT_EQ(ran + rest, 10);
    ASSERT_EQ(count(&t, "spawn_child", boss, "completed"), 8);
    for (int i = 0; i < 8; i++)
        ASSERT_EQ(count(&t, "wake_run", kid[i], NULL), 1);
    ASSERT_EQ(count(&t, "wake_run", boss, NULL), 2);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* The parent grants one tool; the child's manifest allows every tool. */
static const char *GRANT_ONE =
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"spawn_agents\",\"arguments\":"
    "\"{\\\"requests\\\":[{\\\"agent\\\":\\\"w0\\\",\\\"goal\\\":\\\"observe\\\","
    "\\\"allowed_tools\\\":[\\\"record_observations\\\"]}]}\"}],\"stop_reason\":\"tool_use\"}},"
    "{\"response\":{\"text\":\"Delegated.\"}},"
    "{\"response\":{\"text\":\"child done\"}},"
    "{\"response\":{\"text\":\"parent done\"}}";

/* The request the model got whose messages include `needle` (borrowed), or NULL. */
static json_t *request_with(struct watch_model *m, const char *needle)
{
    size_t i;
    json_t *r;
    json_array_foreach (m->requests, i, r) {
        char *text = json_dumps(json_object_get(r, "messages"), 0);
        int hit = text && strstr(text, needle);
        free(text);
        if (hit)
            return r;
    }
    return NULL;
}

/* proves: S0-146 */
TEST(a_childs_model_is_shown_only_the_tools_its_parent_granted)
{
    struct test_rt t;
    struct vg_wake w;
    struct watch_model m;
    char boss[37], kid[37];
    int ran = 0;
    cassette("orch_grant_view", GRANT_ONE);
    test_rt_open(&t, "orch_grant_view");
    make_agent(&t, "boss", "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true}}", boss);
    make_agent(&t, "w0", "{\"tools\":[\"*\"]}", kid);
    ASSERT_OK(vg_runtime_prepare(t.rt, E));
    watch_model_init(&m, t.rt->model);
    m.keep = 1;
    t.rt->model = &m.base;
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    user_wake(&w, boss, "Delegate the observing.");
    do
        ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
    while (ran);
    json_t *req = request_with(&m, "Task delegated to you");
    ASSERT(req != NULL);
    json_t *tools = json_object_get(req, "tools");
    ASSERT_EQ(json_array_size(tools), 1);
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(tools, 0), "name")),
                 "record_observations");
    /* Outside that run (no grant) the same agent is shown its whole manifest. */
    json_t *all = NULL;
    ASSERT_OK(vg_tool_executor_visible_tools(t.rt->tools, kid, NULL, &all, E));
    ASSERT(json_array_size(all) > 1);
    json_decref(all);
    t.rt->model = m.inner;
    watch_model_release(&m);
    vg_wake_release(&w);
    test_rt_close(&t);
}

static const char *RISKY =
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"spawn_agents\",\"arguments\":"
    "\"{\\\"requests\\\":[{\\\"agent\\\":\\\"w0\\\",\\\"goal\\\":\\\"deploy\\\","
    "\\\"risk_tier\\\":\\\"high\\\"},{\\\"agent\\\":\\\"w1\\\",\\\"goal\\\":\\\"wipe the disk\\\","
    "\\\"risk_tier\\\":\\\"high\\\"}]}\"}],\"stop_reason\":\"tool_use\"}},"
    "{\"response\":{\"text\":\"Asked; waiting.\"}}";

/* The pending approval whose request names the child agent `kid` (owned id in out). */
static void approval_of(struct test_rt *t, const char *boss, const char *kid, char out[37])
{
    char *text = NULL;
    ASSERT_OK(vigil_approval_list(t->rt, boss, "pending", &text, E));
    json_t *list = json_loads(text, 0, NULL), *a;
    vigil_free(text);
    size_t i;
    out[0] = '\0';
    json_array_foreach (list, i, a) {
        json_t *req = json_object_get(a, "request");
        if (!strcmp(json_string_value(json_object_get(req, "child_agent")), kid))
            snprintf(out, 37, "%s", json_string_value(json_object_get(a, "id")));
    }
    json_decref(list);
    ASSERT(out[0] != '\0');
}

/* proves: S0-145 S0-147 */
TEST(a_high_risk_child_waits_for_a_person_and_a_rejection_is_a_denied_decision)
{
    struct test_rt t;
    struct vg_wake w;
    char boss[37], kid[2][37], yes[37], no[37];
    int ran = 0;
    cassette("orch_risky", RISKY);
    test_rt_open(&t, "orch_risky");
    make_agent(&t, "boss", "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true}}", boss);
    make_agent(&t, "w0", "{}", kid[0]);
    make_agent(&t, "w1", "{}", kid[1]);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    user_wake(&w, boss, "Deploy, and wipe the disk.");
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
    ASSERT_EQ(ran, 1);
    /* Both children await a person; neither started; the parent's run ended, parked in
     * records: a new process finds everything as it was and has nothing to run. */
    vg_wake_release(&w);
    cassette("orch_risky_2", "{\"response\":{\"text\":\"deployed it\"}},"
                             "{\"response\":{\"text\":\"one deployed, one refused\"}}");
    test_rt_reopen(&t);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    ASSERT_EQ(count(&t, "spawn_child", boss, "approval"), 2);
    ASSERT_EQ(test_rt_decisions_saying(&t, boss, "awaiting_approval"), 2);
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 5, &ran, E));
    ASSERT_EQ(ran, 0);
    ASSERT_EQ(count(&t, "wake_run", kid[0], NULL), 0);
    approval_of(&t, boss, kid[0], yes);
    approval_of(&t, boss, kid[1], no);
    /* Approved: that child starts; its sibling still waits, so the parent is not woken. */
    ASSERT_OK(vigil_approval_resolve(t.rt, yes, 1, "alice", NULL, NULL, E));
    ASSERT_EQ(count(&t, "spawn_child", boss, "running"), 1);
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 5, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_EQ(count(&t, "spawn_child", boss, "completed"), 1);
    ASSERT_EQ(count(&t, "wake_run", boss, NULL), 1);
    /* Rejected: a denied decision with the person's reason; the child never runs, and the
     * group is complete, so the parent wakes with both results. */
    ASSERT_OK(vigil_approval_resolve(t.rt, no, 0, "alice", "not on a Friday", NULL, E));
    ASSERT_OK(vigil_approval_resolve(t.rt, no, 0, "alice", "not on a Friday", NULL, E));
    ASSERT_EQ(count(&t, "spawn_child", boss, "denied"), 1);
    ASSERT_EQ(test_rt_decisions_saying(&t, boss, "denied"), 1);
    ASSERT_EQ(test_rt_decisions_saying(&t, boss, "admitted"), 1);
    char *tree = NULL;
    ASSERT_OK(vigil_agent_tree(t.rt, boss, &tree, E));
    ASSERT_CONTAINS(tree, "a person rejected this high-risk child: not on a Friday");
    ASSERT_CONTAINS(tree, "a person approved this high-risk child");
    vigil_free(tree);
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 5, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_EQ(count(&t, "wake_run", kid[1], NULL), 0);
    ASSERT_EQ(count(&t, "wake_run", boss, NULL), 2);
    char *text = thread_text(&t, boss, "s1");
    ASSERT_CONTAINS(text, "deployed it");
    ASSERT_CONTAINS(text, "not on a Friday");
    ASSERT_CONTAINS(text, "one deployed, one refused");
    free(text);
    vg_wake_release(&w);
    test_rt_close(&t);
}

static const char *RISKY_TTL =
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"spawn_agents\",\"arguments\":"
    "\"{\\\"requests\\\":[{\\\"agent\\\":\\\"w0\\\",\\\"goal\\\":\\\"deploy\\\","
    "\\\"risk_tier\\\":\\\"high\\\",\\\"ttl_ms\\\":60000}]}\"}],\"stop_reason\":"
    "\"tool_use\"}},"
    "{\"response\":{\"text\":\"Asked; waiting.\"}},"
    "{\"response\":{\"text\":\"nobody answered, so I did not deploy\"}}";

/* proves: S0-147 */
TEST(an_unanswered_approval_expires_by_the_sweep_and_the_parent_wakes_with_the_denial)
{
    struct test_rt t;
    struct vg_wake w;
    char boss[37], kid[37];
    int ran = 0, settled = -1;
    cassette("orch_expiry", RISKY_TTL);
    test_rt_open(&t, "orch_expiry");
    make_agent(&t, "boss", "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true}}", boss);
    make_agent(&t, "w0", "{}", kid);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    user_wake(&w, boss, "Deploy.");
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_EQ(count(&t, "spawn_child", boss, "approval"), 1);
    /* Within its TTL the sweep leaves it to a person. */
    vg_test_clock_advance(&t.clock, 59000);
    ASSERT_OK(vg_orch_approvals_sweep(t.env, &w, &settled, E));
    ASSERT_EQ(settled, 0);
    ASSERT_EQ(count(&t, "approval", boss, "pending"), 1);
    /* Past it, with nobody reading the approval: the sweep records the expiry, the denied
     * decision with its reason, and wakes the parent with the denial. */
    vg_test_clock_advance(&t.clock, 2000);
    ASSERT_OK(vg_orch_approvals_sweep(t.env, &w, &settled, E));
    ASSERT_EQ(settled, 1);
    ASSERT_EQ(count(&t, "approval", boss, "expired"), 1);
    ASSERT_EQ(count(&t, "spawn_child", boss, "denied"), 1);
    ASSERT_EQ(test_rt_decisions_saying(&t, boss, "denied"), 1);
    char *tree = NULL;
    ASSERT_OK(vigil_agent_tree(t.rt, boss, &tree, E));
    ASSERT_CONTAINS(tree, "no person answered the approval of this high-risk child before it "
                          "expired");
    vigil_free(tree);
    /* A second sweep finds nothing left to settle. */
    ASSERT_OK(vg_orch_approvals_sweep(t.env, &w, &settled, E));
    ASSERT_EQ(settled, 0);
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 5, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_EQ(count(&t, "wake_run", kid, NULL), 0);
    ASSERT_EQ(count(&t, "wake_run", boss, NULL), 2);
    char *text = thread_text(&t, boss, "s1");
    ASSERT_CONTAINS(text, "before it expired");
    ASSERT_CONTAINS(text, "nobody answered, so I did not deploy");
    free(text);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* A child given a token budget calls tools until its answered calls have used it (50 tokens a
 * call here): it stops before its next call, and what it spent is its parent's. */
#define SPENT_NOTE(n)                                                                              \
    "{\"response\":{\"tool_calls\":[{\"id\":\"t" #n "\",\"name\":\"record_observations\","         \
    "\"arguments\":\"{\\\"notes\\\":[\\\"more " #n "\\\"]}\"}],\"stop_reason\":\"tool_use\","      \
    "\"usage\":{\"input_tokens\":40,\"output_tokens\":10}}},"
static const char *TOKENS =
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"spawn_agents\",\"arguments\":"
    "\"{\\\"requests\\\":[{\\\"agent\\\":\\\"greedy\\\",\\\"goal\\\":\\\"eat\\\","
    "\\\"token_budget\\\":120}]}\"}],"
    "\"stop_reason\":\"tool_use\"}},"
    "{\"response\":{\"text\":\"Delegated.\"}}," SPENT_NOTE(1) SPENT_NOTE(2) SPENT_NOTE(3)
        SPENT_NOTE(4) SPENT_NOTE(5) SPENT_NOTE(6) "{\"response\":{\"text\":\"parent again\"}}";

/* proves: S0-144 (token budget) */
TEST(a_childs_token_budget_stops_it_and_its_tokens_are_its_parents)
{
    struct test_rt t;
    struct vg_wake w;
    char boss[37], greedy[37];
    int ran = 0;
    cassette("orch_tokens", TOKENS);
    test_rt_open(&t, "orch_tokens");
    make_agent(&t, "boss", "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true}}", boss);
    make_agent(&t, "greedy", "{\"tools\":[\"record_observations\"]}", greedy);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    user_wake(&w, boss, "Go.");
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 2, &ran, E));
    ASSERT_EQ(ran, 2); /* the parent's run, then the child's */
    json_t *kids = NULL;
    ASSERT_OK(vg_orch_tree(t.env, boss, &kids, E));
    json_t *kid = json_array_get(json_object_get(kids, "children"), 0);
    json_t *spent = json_object_get(kid, "spent");
    /* 50, 100, 150: the third call reached 120, so no fourth was made. */
    ASSERT_EQ(json_integer_value(json_object_get(spent, "steps")), 3);
    ASSERT_EQ(json_integer_value(json_object_get(spent, "tokens")), 150);
    json_decref(kids);
    json_t *usage = NULL;
    ASSERT_OK(vg_budget_usage(t.env, boss, &usage, E));
    ASSERT(json_integer_value(json_object_get(usage, "tokens")) >= 150);
    json_decref(usage);
    /* The child's run says why it stopped. */
    char *runs = NULL;
    ASSERT_OK(vigil_runs_list(t.rt, greedy, NULL, NULL, 5, &runs, E));
    ASSERT_CONTAINS(runs, "stopped: its tokens budget is spent");
    vigil_free(runs);
    vg_wake_release(&w);
    test_rt_close(&t);
}

static const char *STRATEGIES =
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"spawn_agents\",\"arguments\":"
    "\"{\\\"requests\\\":[{\\\"agent\\\":\\\"w0\\\",\\\"goal\\\":\\\"find a train\\\","
    "\\\"request_id\\\":\\\"alpha\\\",\\\"success_criteria\\\":\\\"names a departure time\\\","
    "\\\"on_complete\\\":\\\"wake_on_each\\\"},"
    "{\\\"agent\\\":\\\"w1\\\",\\\"goal\\\":\\\"tidy up\\\",\\\"on_complete\\\":\\\"none\\\"},"
    "{\\\"agent\\\":\\\"w2\\\",\\\"goal\\\":\\\"find a hotel\\\","
    "\\\"success_criteria\\\":\\\"names a street\\\"}]}\"}],\"stop_reason\":\"tool_use\"}},"
    "{\"response\":{\"text\":\"Delegated.\"}},"
    "{\"response\":{\"text\":\"answer one\"}},{\"response\":{\"text\":\"answer two\"}},"
    "{\"response\":{\"text\":\"answer three\"}},{\"response\":{\"text\":\"answer four\"}},"
    "{\"response\":{\"text\":\"answer five\"}}";

/* The session of agent's child record of index i under boss. */
static void child_session(struct test_rt *t, const char *boss, int i, char *out, size_t n)
{
    json_t *kids = NULL, *c;
    size_t k;
    ASSERT_OK(vg_orch_tree(t->env, boss, &kids, E));
    out[0] = '\0';
    json_array_foreach (json_object_get(kids, "children"), k, c) {
        json_t *rec = NULL;
        if (json_integer_value(json_object_get(c, "index")) != i)
            continue;
        ASSERT_OK(vg_orch_child_get(t->env, json_string_value(json_object_get(c, "run_key")), &rec,
                                    NULL, E));
        snprintf(out, n, "%s", json_string_value(json_object_get(rec, "session")));
        json_decref(rec);
    }
    json_decref(kids);
    ASSERT(out[0]);
}

/* on_complete says what the parent is woken with: wake_on_each, a wake with that child's
 * result as soon as it ends; none, no wake at all; wake_on_all (the default), one wake once
 * the last such child ends, with their results alone. A child's success criteria are in its
 * input and come back with its result, with the request's id.
 * proves: S0-144 (request id, success criteria, on-complete strategy) */
TEST(on_complete_and_success_criteria_shape_what_the_parent_is_woken_with)
{
    struct test_rt t;
    struct vg_wake w;
    char boss[37], kid[3][37], session[100];
    int ran = 0;
    cassette("orch_strategies", STRATEGIES);
    test_rt_open(&t, "orch_strategies");
    make_agent(&t, "boss", "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true}}", boss);
    make_agent(&t, "w0", "{}", kid[0]);
    make_agent(&t, "w1", "{}", kid[1]);
    make_agent(&t, "w2", "{}", kid[2]);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    user_wake(&w, boss, "Plan the trip.");
    do
        ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
    while (ran);
    ASSERT_EQ(count(&t, "spawn_child", boss, "completed"), 3);
    /* The first run, the wake of w0 alone, the wake of the rest (w2's); none of w1. */
    ASSERT_EQ(count(&t, "wake_run", boss, NULL), 3);
    char *text = thread_text(&t, boss, "s1");
    const char *each = strstr(text, "An agent you spawned has finished");
    const char *all = strstr(text, "The agents you spawned have finished");
    ASSERT(each != NULL && all != NULL);
    ASSERT_CONTAINS(each, "\"request_id\":\"alpha\"");
    ASSERT_CONTAINS(each, "\"success_criteria\":\"names a departure time\"");
    /* The wake on all carries w2's result (its id is the decision's, GROUP:2), not w0's or
     * w1's. */
    const char *end = strchr(all, '\n');
    size_t len = end ? (size_t)(end - all) : strlen(all);
    char *line = strndup(all, len);
    ASSERT_CONTAINS(line, "\"success_criteria\":\"names a street\"");
    ASSERT_CONTAINS(line, ":2\"");
    ASSERT(strstr(line, "\"index\":0") == NULL && strstr(line, "\"index\":1") == NULL);
    free(line);
    free(text);
    /* The child read its criteria with its goal. */
    child_session(&t, boss, 0, session, sizeof session);
    text = thread_text(&t, kid[0], session);
    ASSERT_CONTAINS(text, "Success criteria: names a departure time");
    free(text);
    vg_wake_release(&w);
    test_rt_close(&t);
}

static const char *DISAGREE =
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"spawn_agents\",\"arguments\":"
    "\"{\\\"requests\\\":[{\\\"agent\\\":\\\"w0\\\",\\\"goal\\\":\\\"pick a route\\\","
    "\\\"decision_key\\\":\\\"route\\\"},{\\\"agent\\\":\\\"w1\\\",\\\"goal\\\":\\\"pick a "
    "route\\\",\\\"decision_key\\\":\\\"route\\\"},{\\\"agent\\\":\\\"w2\\\",\\\"goal\\\":"
    "\\\"pick a route\\\",\\\"decision_key\\\":\\\"route\\\"}]}\"}],\"stop_reason\":"
    "\"tool_use\"}},"
    "{\"response\":{\"text\":\"Asked three.\"}},"
    "{\"response\":{\"text\":\"Take the A1\"}},{\"response\":{\"text\":\"Take the M6\"}},"
    "{\"response\":{\"text\":\"take the  a1\"}},{\"response\":{\"text\":\"A1 it is.\"}}";

/* Three children answer one decision (decision_key route), two of them alike: the parent's
 * results wake carries the policy's verdict beside the results, whichever child answered
 * what. proves: S0-142 */
TEST(children_that_disagree_on_one_decision_wake_the_parent_with_the_verdict)
{
    struct test_rt t;
    struct vg_wake w;
    char boss[37], kid[3][37];
    int ran = 0;
    cassette("orch_disagree", DISAGREE);
    test_rt_open(&t, "orch_disagree");
    make_agent(&t, "boss", "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true}}", boss);
    make_agent(&t, "w0", "{}", kid[0]);
    make_agent(&t, "w1", "{}", kid[1]);
    make_agent(&t, "w2", "{}", kid[2]);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    user_wake(&w, boss, "Which road?");
    do
        ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
    while (ran);
    char *text = thread_text(&t, boss, "s1");
    const char *verdict = strstr(text, "vigil chose by its arbitration policy");
    ASSERT(verdict != NULL);
    ASSERT_CONTAINS(verdict, "\"answer\":\"take the a1\"");
    ASSERT_CONTAINS(verdict, "\"votes\":2");
    ASSERT_CONTAINS(verdict, "\"agreed\":false");
    ASSERT_CONTAINS(text, "A1 it is.");
    free(text);
    vg_wake_release(&w);
    test_rt_close(&t);
}

int main(void)
{
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_CONFIG");
    RUN(a_fan_out_of_8_runs_3_at_a_time_and_wakes_the_parent_once_with_every_result);
    RUN(a_spawn_calls_decisions_are_one_journal_record);
    RUN(a_child_cancelled_before_it_starts_ends_for_its_parent);
    RUN(a_kill_switch_or_a_pause_mid_fan_out_holds_the_children_and_they_run_after_it);
    RUN(a_failed_child_is_reported_to_its_parent_and_not_retried_behind_it);
    RUN(a_resumed_sub_agent_sees_its_exact_conversation_and_the_steps_it_took);
    RUN(a_childs_long_result_is_kept_cut_where_a_character_ends);
    RUN(a_sub_agent_run_takes_50_steps_unless_its_definition_says_otherwise);
    RUN(a_greedy_child_is_stopped_by_its_parents_budget_and_its_spend_is_the_parents);
    RUN(a_sub_agent_resumes_its_own_conversation_when_its_children_finish);
    RUN(a_child_that_spawned_and_then_failed_is_charged_every_step_it_took);
    RUN(a_child_cancelled_while_it_runs_is_charged_the_steps_it_took);
    RUN(a_child_the_kill_switch_stopped_tells_its_parent_so);
    RUN(a_restart_while_the_parent_waits_loses_nothing_and_runs_no_child_twice);
    RUN(a_childs_model_is_shown_only_the_tools_its_parent_granted);
    RUN(a_high_risk_child_waits_for_a_person_and_a_rejection_is_a_denied_decision);
    RUN(an_unanswered_approval_expires_by_the_sweep_and_the_parent_wakes_with_the_denial);
    RUN(a_childs_token_budget_stops_it_and_its_tokens_are_its_parents);
    RUN(on_complete_and_success_criteria_shape_what_the_parent_is_woken_with);
    RUN(children_that_disagree_on_one_decision_wake_the_parent_with_the_verdict);
    return 0;
}
