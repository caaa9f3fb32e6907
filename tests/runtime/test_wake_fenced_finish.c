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
 * The stalled daemon's record of the effect (the saga's journal_done) and the successor's
 * settling of the call are decided by the operation's row, both ways: recorded first, the
 * successor settles from it (the first test); settled first (in doubt), the record is refused
 * and the settling stands (the second; without the guard both landed: an operation in doubt
 * whose saga says done).
 *
 * The stall is placed exactly: the tool's effect itself moves the lease to a successor, from
 * another runtime on the same store, as a successor's claim does. On SQLite, and on the test
 * PostgreSQL server as runtime_test_wake_fenced_finish_pg.
 */
#include "helpers/rt.h"

#include "agent/agent.h"
#include "base/hash.h"
#include "runtime/runtime_int.h"
#include "runtime/wake_runner.h"
#include "tool/tool.h"
#include "wake/wake.h"

struct stall {
    vigil_runtime *other; /* the successor's daemon: its own connection to the store */
    const char *agent;
    int effects;
    int settle_first; /* the successor settles the call while the effect runs */
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
        if (s->settle_first) { /* the successor's recovery, before the effect is recorded */
            int settled = 0;
            struct vg_tool_executor *x = NULL;
            ASSERT_OK(vg_runtime_tools(s->other, &x, E));
            ASSERT_OK(vg_tool_executor_recover_agent(x, s->agent, &settled, E));
            ASSERT_EQ(settled, 1);
        }
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

static const char *saga_phase(struct vg_env *env, const char *op, char out[32])
{
    json_t *b = NULL;
    ASSERT_OK(vg_env_get_json(env, "saga", op, &b, NULL, E));
    snprintf(out, 32, "%s", json_string_value(json_object_get(b, "phase")));
    json_decref(b);
    return out;
}

struct fixture {
    struct test_rt t;
    struct vg_wake w;
    struct stall s;
    char a[37], key[65], thread[200];
};

/* A wake whose one tool call stalls its daemon while the effect runs (see effect_then_stall),
 * run up to the stalled daemon's end. */
static void stall_a_run(struct fixture *f, const char *name, int settle_first)
{
    char cassette[4300];
    enum vg_enqueue_result res;
    memset(f, 0, sizeof *f);
    f->s.settle_first = settle_first;
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_CONFIG");
    unsetenv("VIGIL_WAKE_RUNNER");
    test_rt_open(&f->t, name);
    snprintf(cassette, sizeof cassette, "%.4200s/cassette.json", vg_test_tmpdir(name));
    /* The stalled run's call, then its successor's replay of it and its answer. */
    FILE *fp = fopen(cassette, "w");
    ASSERT(fp);
    fputs("{\"vigil_cassette\":1,\"exchanges\":["
          "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"fx\",\"arguments\":{}}]}},"
          "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"fx\",\"arguments\":{}}]}},"
          "{\"response\":{\"text\":\"done\"}}]}",
          fp);
    fclose(fp);
    setenv("VIGIL_MODEL_CASSETTE", cassette, 1);
    test_rt_reopen(&f->t); /* the model from the cassette */
    vigil_runtime_options o = {.size = sizeof o, .store_uri = f->t.path};
    ASSERT_OK(vg_runtime_open_with(&o, &f->t.clock.base, NULL, &f->s.other, E));
    vigil_tool_def d = {.name = "fx", .description = "an effect on the host"};
    ASSERT_OK(vigil_tool_register(f->t.rt, &d, effect_then_stall, &f->s, E));
    ASSERT_OK(vigil_tool_register(f->s.other, &d, effect_then_stall, &f->s, E));
    vigil_agent_spec spec = {.name = "stalled", .config_json = "{\"tools\":[\"fx\"]}"};
    ASSERT_OK(vigil_agent_create(f->t.rt, &spec, f->a, E));
    f->s.agent = f->a;
    ASSERT_OK(vg_wake_init(&f->w, f->t.env, NULL, E));
    struct vg_wake_req m = {.reason = VG_REASON_MANUAL, .agent_id = f->a};
    ASSERT_OK(vg_wake_enqueue(&f->w, &m, f->key, &res, E));
    int ran = 0;
    ASSERT_OK(vg_wake_drain(&f->w, vg_wake_runner_loop(), 1, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_EQ(f->s.effects, 1);
    json_t *run = NULL;
    ASSERT_OK(vg_env_get_json(f->t.env, "wake_run", f->key, &run, NULL, E));
    snprintf(f->thread, sizeof f->thread, "%s",
             json_string_value(json_object_get(run, "thread_id")));
    json_decref(run);
}

/* The successor's daemon goes too; recovery re-queues the run under its run key, and the next
 * claim completes it without a second effect. */
static void successor_completes(struct fixture *f)
{
    char st[32];
    int n = 0, ran = 0;
    ASSERT_OK(vg_wake_recover(&f->w, "gone:", &n, E));
    ASSERT_EQ(n, 1);
    ASSERT_OK(vg_wake_drain(&f->w, vg_wake_runner_loop(), 0, &ran, E));
    ASSERT_STREQ(status_of(f->t.env, "wake_run", f->key, st), "completed");
    ASSERT(!retried(f->t.env, f->a, f->key)); /* not given up for a retry under another key */
    ASSERT_EQ(f->s.effects, 1);
}

static void fixture_close(struct fixture *f)
{
    vg_wake_release(&f->w);
    vigil_runtime_close(f->s.other);
    test_rt_close(&f->t);
}

TEST(a_stalled_daemons_finish_is_fenced_and_its_successor_completes_the_run_key)
{
    struct fixture f;
    char st[32];
    stall_a_run(&f, "wake_fenced_finish", 0);
    /* The stalled daemon's finish left nothing: the operation is as its start left it, the
     * thread has no result of the call, and the wake is still the successor's to finish. */
    ASSERT_STREQ(status_of(f.t.env, "operation", f.s.op, st), "started");
    ASSERT_STREQ(saga_phase(f.t.env, f.s.op, st), "journal_done"); /* recorded before settling */
    ASSERT_EQ(tool_results(f.t.env, f.a, f.thread), 0);
    ASSERT_STREQ(status_of(f.t.env, "wake_run", f.key, st), "started");
    /* The call is settled from the saga's record of the effect: finished, nobody asked. */
    successor_completes(&f);
    ASSERT_STREQ(status_of(f.t.env, "operation", f.s.op, st), "finished");
    ASSERT(tool_results(f.t.env, f.a, f.thread) >= 1); /* the settled call, replayed */
    fixture_close(&f);
}

/* The other order: the successor settles the call (in doubt: the effect is unknown to it)
 * while the stalled daemon's effect runs; the stalled daemon's record of the effect is then
 * refused, so the operation is in doubt with a saga that says so, not done. */
TEST(a_call_settled_by_the_successor_first_refuses_the_stalled_daemons_record)
{
    struct fixture f;
    char st[32];
    stall_a_run(&f, "wake_fenced_settled_first", 1);
    ASSERT_STREQ(status_of(f.t.env, "operation", f.s.op, st), "in_doubt");
    ASSERT_STREQ(saga_phase(f.t.env, f.s.op, st), "journal_pending");
    ASSERT_STREQ(status_of(f.t.env, "in_doubt", f.s.op, st), "pending");
    ASSERT_EQ(tool_results(f.t.env, f.a, f.thread), 0);
    successor_completes(&f);
    ASSERT_STREQ(status_of(f.t.env, "operation", f.s.op, st), "in_doubt"); /* a person's call */
    fixture_close(&f);
}

int main(void)
{
    RUN(a_stalled_daemons_finish_is_fenced_and_its_successor_completes_the_run_key);
    RUN(a_call_settled_by_the_successor_first_refuses_the_stalled_daemons_record);
    return 0;
}
