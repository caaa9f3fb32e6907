/*
 * test_wake_fenced_finish.c: a daemon stalled past its lease while a tool's effect ran (a
 * SIGSTOP, a network stall) has lost the agent to a successor when it resumes. The call's
 * finish it then writes (the finished operation, the tool's result, the agent's head message)
 * must not commit: the successor may already have read the head message and be moving it (in
 * the three-daemon test, the successor's compare-and-swap of it failed so, "revision 22,
 * expected 21", and its wake was given up for a retry under a new run key). The successor
 * completes the wake under its original run key and settles the call from what the stalled
 * daemon recorded before its finish, without a second effect.
 *
 * The stall is placed exactly: the tool's effect itself moves the lease to a successor, from
 * another runtime on the same store, as a successor's claim does. On SQLite, and on the test
 * PostgreSQL server as runtime_test_wake_fenced_finish_pg.
 */
#include "helpers/rt.h"

#include "agent/agent.h"
#include "base/hash.h"
#include "runtime/wake_runner.h"
#include "wake/wake.h"

struct stall {
    vigil_runtime *other; /* the successor's daemon: its own connection to the store */
    const char *agent;
    int effects;
    char op[65];
};

/* The effect, during which the daemon "stalls" and a successor takes the agent over. */
static vigil_code effect_then_stall(void *user, const vigil_tool_call_info *call, const char *args,
                                    char **out, vigil_error *err)
{
    struct stall *s = user;
    (void)args;
    s->effects++;
    snprintf(s->op, sizeof s->op, "%s", call->operation_id);
    if (s->effects == 1) {
        struct vg_env *env = vg_runtime_env(s->other);
        json_t *lease = NULL;
        int64_t rev = 0;
        ASSERT_OK(vg_env_get_json(env, "agent_lease", s->agent, &lease, &rev, E));
        int64_t epoch = json_integer_value(json_object_get(lease, "epoch"));
        json_object_set_new(lease, "epoch", json_integer(epoch + 1));
        json_object_set_new(lease, "holder", json_string("gone:successor"));
        ASSERT_OK(vg_env_update_json(env, "agent_lease", s->agent, s->agent, "gone:successor", "",
                                     json_integer_value(json_object_get(lease, "expires_ms")),
                                     lease, rev, E));
        json_decref(lease);
        /* ... and the run, as a claim does: the lease's epoch is the run's. */
        json_t *run = NULL;
        ASSERT_OK(vg_env_get_json(env, "wake_run", call->run_key, &run, &rev, E));
        json_object_set_new(run, "epoch", json_integer(epoch + 1));
        ASSERT_OK(vg_env_update_json(env, "wake_run", call->run_key, s->agent, "started",
                                     json_string_value(json_object_get(run, "reason")),
                                     json_integer_value(json_object_get(run, "created_ms")), run,
                                     rev, E));
        json_decref(run);
    }
    *out = strdup("{\"result\":{\"done\":true}}");
    return *out ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
}

static const char *status_of(struct vg_env *env, const char *kind, const char *id, char out[32])
{
    json_t *b = NULL;
    ASSERT_OK(vg_env_get_json(env, kind, id, &b, NULL, E));
    snprintf(out, 32, "%s", json_string_value(json_object_get(b, "status")));
    json_decref(b);
    return out;
}

static int tool_results(struct vg_env *env, const char *agent, const char *thread)
{
    json_t *msgs = NULL;
    ASSERT_OK(vg_message_latest(env, agent, thread, 100, &msgs, E));
    int n = 0;
    for (size_t i = 0; i < json_array_size(msgs); i++)
        n += !strcmp(json_string_value(json_object_get(json_array_get(msgs, i), "kind")),
                     "toolResult");
    json_decref(msgs);
    return n;
}

/* The wake a failure would have scheduled: a retry under another run key (queue.c). */
static int retried(struct vg_env *env, const char *agent, const char *key)
{
    char retry[65];
    const char *parts[] = {agent, "retry", key};
    vg_sha256_hex_parts(retry, parts, 3);
    json_t *b = NULL;
    vigil_code rc = vg_env_get_json(env, "wake_run", retry, &b, NULL, NULL);
    json_decref(b);
    return rc == VIGIL_OK;
}

TEST(a_stalled_daemons_finish_is_fenced_and_its_successor_completes_the_run_key)
{
    struct test_rt t;
    struct vg_wake w;
    struct stall s = {0};
    char a[37], key[65], cassette[4300], st[32];
    enum vg_enqueue_result res;
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_CONFIG");
    unsetenv("VIGIL_WAKE_RUNNER");
    test_rt_open(&t, "wake_fenced_finish");
    snprintf(cassette, sizeof cassette, "%.4200s/cassette.json",
             vg_test_tmpdir("wake_fenced_finish_model"));
    /* The stalled run's call, then its successor's replay of it and its answer. */
    FILE *f = fopen(cassette, "w");
    ASSERT(f);
    fputs("{\"vigil_cassette\":1,\"exchanges\":["
          "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"fx\",\"arguments\":{}}]}},"
          "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"fx\",\"arguments\":{}}]}},"
          "{\"response\":{\"text\":\"done\"}}]}",
          f);
    fclose(f);
    setenv("VIGIL_MODEL_CASSETTE", cassette, 1);
    test_rt_reopen(&t); /* the model from the cassette */
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t.path};
    ASSERT_OK(vg_runtime_open_with(&o, &t.clock.base, NULL, &s.other, E));
    vigil_tool_def d = {.name = "fx", .description = "an effect on the host"};
    ASSERT_OK(vigil_tool_register(t.rt, &d, effect_then_stall, &s, E));
    vigil_agent_spec spec = {.name = "stalled", .config_json = "{\"tools\":[\"fx\"]}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, a, E));
    s.agent = a;
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    struct vg_wake_req m = {.reason = VG_REASON_MANUAL, .agent_id = a};
    ASSERT_OK(vg_wake_enqueue(&w, &m, key, &res, E));
    int ran = 0;
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_EQ(s.effects, 1);
    json_t *run = NULL;
    ASSERT_OK(vg_env_get_json(t.env, "wake_run", key, &run, NULL, E));
    char thread[200];
    snprintf(thread, sizeof thread, "%s", json_string_value(json_object_get(run, "thread_id")));
    json_decref(run);
    /* The stalled daemon's finish left nothing: the operation is as its start left it, the
     * thread has no result of the call, and the wake is still the successor's to finish. */
    ASSERT_STREQ(status_of(t.env, "operation", s.op, st), "started");
    ASSERT_EQ(tool_results(t.env, a, thread), 0);
    ASSERT_STREQ(status_of(t.env, "wake_run", key, st), "started");
    /* The successor's daemon goes too; recovery re-queues the run under its run key, and the
     * next claim completes it: the call settled from the saga's record of the effect. */
    int n = 0;
    ASSERT_OK(vg_wake_recover(&w, "gone:", &n, E));
    ASSERT_EQ(n, 1);
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 0, &ran, E));
    ASSERT_STREQ(status_of(t.env, "wake_run", key, st), "completed");
    ASSERT(!retried(t.env, a, key)); /* not given up for a retry under another run key */
    ASSERT_EQ(s.effects, 1);
    ASSERT_STREQ(status_of(t.env, "operation", s.op, st), "finished");
    ASSERT(tool_results(t.env, a, thread) >= 1); /* the settled call, replayed */
    vg_wake_release(&w);
    vigil_runtime_close(s.other);
    test_rt_close(&t);
}

int main(void)
{
    RUN(a_stalled_daemons_finish_is_fenced_and_its_successor_completes_the_run_key);
    return 0;
}
