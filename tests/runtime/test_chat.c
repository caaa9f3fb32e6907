/*
 * test_chat.c: a chat turn (vigil_chat) holds the agent's lease: it waits while another run
 * holds the agent (single flight across processes), runs once the lease is free or expired,
 * gives up with EBUSY when it stays taken, and leaves the lease free afterwards.
 */
#include "helpers/rt.h"

#include "agent/agent.h"
#include "wake/wake.h"

static char agent[37];

static void setup(struct test_rt *t, const char *name)
{
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    test_rt_open(t, name);
    vigil_agent_spec spec = {.name = "chatty"};
    ASSERT_OK(vigil_agent_create(t->rt, &spec, agent, E));
}

/* proves: S0-020 */
TEST(turn_waits_for_a_held_lease_then_runs)
{
    struct test_rt t;
    char *out = NULL;
    int64_t epoch = 0;
    int got = 0;
    setup(&t, "chat_lease");
    /* The daemon holds the agent for one more second (test time). */
    ASSERT_OK(vg_wake_lease_take(t.env, agent, "daemon:w0", 1000, &epoch, &got, E));
    ASSERT_EQ(got, 1);
    int64_t before = vg_env_now(t.env);
    ASSERT_OK(vigil_chat(t.rt, agent, NULL, "hello", NULL, &out, E));
    ASSERT_CONTAINS(out, "you said: hello");
    vigil_free(out);
    ASSERT(vg_env_now(t.env) - before >= 1000); /* it waited for the lease, on the test clock */
    /* The old holder is fenced off; the lease is free again. */
    ASSERT_CODE(VIGIL_ESTATE, vg_wake_lease_check(t.env, agent, epoch, NULL));
    int64_t e2 = 0;
    ASSERT_OK(vg_wake_lease_take(t.env, agent, "other", 1000, &e2, &got, E));
    ASSERT_EQ(got, 1);
    ASSERT(e2 > epoch + 1);
    test_rt_close(&t);
}

TEST(turn_gives_up_when_the_agent_stays_busy)
{
    struct test_rt t;
    char *out = NULL;
    int64_t epoch = 0;
    int got = 0;
    setup(&t, "chat_busy");
    ASSERT_OK(vg_wake_lease_take(t.env, agent, "daemon:w0", 3600000, &epoch, &got, E));
    vigil_error err = {0};
    ASSERT_EQ(vigil_chat(t.rt, agent, NULL, "hello", NULL, &out, &err), VIGIL_EBUSY);
    ASSERT_CONTAINS(err.message, "busy");
    /* Nothing of the turn was written. */
    char thread[128];
    json_t *msgs = NULL;
    snprintf(thread, sizeof thread, "%s:session:default", agent);
    ASSERT_OK(vg_message_latest(t.env, agent, thread, 10, &msgs, E));
    ASSERT_EQ(json_array_size(msgs), 0);
    json_decref(msgs);
    test_rt_close(&t);
}

int main(void)
{
    RUN(turn_waits_for_a_held_lease_then_runs);
    RUN(turn_gives_up_when_the_agent_stays_busy);
    return 0;
}
