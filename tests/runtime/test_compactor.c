/*
 * test_compactor.c: compaction is best-effort work off the foreground run's time
 * (src/runtime/compactor.c). The proof: a clock that holds every thread but the test's own
 * while it is shut, so the compactor cannot get past its first look at the time, and the turn
 * (a chat, or a wake's run as the daemon's workers run it) still returns with its answer and
 * its run completed; the job it made due is done only once the clock lets the compactor on.
 */
#include "helpers/rt.h"

#include <pthread.h>

#include "agent/agent.h"
#include "memory/compact.h"
#include "runtime/runtime_int.h"
#include "store/store.h"

/* ---- a clock the test's own thread passes and every other waits at while it is shut -------- */

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_shut;
static int gate_waiting; /* threads held at the gate now */
static pthread_t gate_owner;
static const struct vg_clock_methods *hand_methods; /* the test clock's own */

static void gate_pass(void)
{
    if (pthread_equal(pthread_self(), gate_owner))
        return;
    pthread_mutex_lock(&gate_mu);
    gate_waiting++;
    pthread_cond_broadcast(&gate_cv);
    while (gate_shut)
        pthread_cond_wait(&gate_cv, &gate_mu);
    gate_waiting--;
    pthread_mutex_unlock(&gate_mu);
}

static int64_t gate_now_ms(struct vg_clock *c)
{
    gate_pass();
    return hand_methods->now_ms(c);
}

static int64_t gate_mono_ns(struct vg_clock *c)
{
    gate_pass();
    return hand_methods->mono_ns(c);
}

static void gate_sleep_ms(struct vg_clock *c, int64_t ms)
{
    gate_pass();
    hand_methods->sleep_ms(c, ms);
}

static const struct vg_clock_methods gate_methods = {
    .version = 1,
    .name = "gate",
    .now_ms = gate_now_ms,
    .mono_ns = gate_mono_ns,
    .sleep_ms = gate_sleep_ms,
};

/* The test runtime's clock becomes the gate, shut. */
static void gate_install(struct test_rt *t)
{
    gate_owner = pthread_self();
    gate_shut = 1;
    hand_methods = t->clock.base.methods;
    t->clock.base.methods = &gate_methods;
}

/* Wait until another thread (the compactor) is held at the gate: it was asked for a pass and
 * is in it. */
static void gate_wait_for_one_held(void)
{
    pthread_mutex_lock(&gate_mu);
    while (!gate_waiting)
        pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
}

static void gate_open(void)
{
    pthread_mutex_lock(&gate_mu);
    gate_shut = 0;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

/* ---- the tests --------------------------------------------------------------------------------
 */

static void setup(struct test_rt *t, const char *name, char agent[37])
{
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    test_rt_open(t, name);
    /* a small context: its compaction budget (half of it) is passed within a few turns */
    vigil_agent_spec spec = {.name = "small",
                             .config_json = "{\"limits\":{\"context_tokens\":4000}}"};
    ASSERT_OK(vigil_agent_create(t->rt, &spec, agent, E));
}

/* The thread's compaction jobs in status (pending, running, done, ...). */
static int64_t jobs_in(struct test_rt *t, const char *agent, const char *thread, const char *status)
{
    int64_t n = 0;
    struct vg_query q = {.kind = "compaction_job", .owner = agent, .k1 = thread, .k2 = status};
    ASSERT_OK(vg_store_count(t->env->store, &q, &n, E));
    return n;
}

static void big_text(char *text, size_t size, int turn)
{
    memset(text, 'w', size - 1);
    text[size - 1] = '\0';
    text[0] = (char)('a' + turn); /* each turn's message its own */
}

/* Once the compactor may go on: the job is done and its summary is in the thread's summaries. */
static void compaction_goes_on(struct test_rt *t, const char *agent, const char *thread)
{
    char summaries[VG_RECORD_ID_MAX];
    json_t *msgs = NULL;
    gate_open();
    vg_runtime_compact_settle(t->rt);
    ASSERT_EQ(jobs_in(t, agent, thread, "pending"), 0);
    ASSERT_EQ(jobs_in(t, agent, thread, "done"), 1);
    vg_compact_summary_thread(thread, summaries);
    ASSERT_OK(vg_message_latest(t->env, agent, summaries, 10, &msgs, E));
    ASSERT_EQ(json_array_size(msgs), 1);
    json_decref(msgs);
}

/* A chat turn that takes its thread past its budget returns with its answer while the
 * compaction it made due cannot move at all (held at the clock), so the turn's time holds
 * none of it; let go, the compactor does the job. Before the compactor, vigil_chat ran the job
 * itself before it returned: the job was done by then. proves: S0-033 */
TEST(a_chat_turn_returns_while_its_compaction_is_held)
{
    struct test_rt t;
    char agent[37], thread[200], text[2001], *out = NULL;
    setup(&t, "compactor_chat", agent);
    snprintf(thread, sizeof thread, "%s:session:default", agent);
    gate_install(&t);
    int turn = 0;
    for (; turn < 6 && jobs_in(&t, agent, thread, NULL) == 0; turn++) {
        big_text(text, sizeof text, turn);
        ASSERT_OK(vigil_chat(t.rt, agent, NULL, text, NULL, &out, E));
        ASSERT_CONTAINS(out, "\"end\":\"completed\"");
        vigil_free(out);
    }
    ASSERT(turn >= 2 && turn < 6);
    ASSERT_EQ(jobs_in(&t, agent, thread, "pending"), 1); /* not run in the turn's time */
    gate_wait_for_one_held();                            /* the compactor is on it, held */
    ASSERT_EQ(jobs_in(&t, agent, thread, "pending"), 1);
    compaction_goes_on(&t, agent, thread);
    test_rt_close(&t);
}

/* The same for a wake's run, as the daemon's workers and `vigil wake` run them
 * (vg_wake_run_one): the run ends completed, its lease given back, and the worker is free for
 * its next run while the compaction is held. proves: S0-033 */
TEST(a_wakes_run_ends_while_its_compaction_is_held)
{
    struct test_rt t;
    char agent[37], thread[200], text[2001], key[65];
    setup(&t, "compactor_wake", agent);
    snprintf(thread, sizeof thread, "%s:session:log", agent);
    gate_install(&t);
    int turn = 0, ran = 0;
    for (; turn < 6 && jobs_in(&t, agent, thread, NULL) == 0; turn++) {
        big_text(text, sizeof text, turn);
        ASSERT_OK(vigil_wake_agent(t.rt, agent, text, "log", key, E));
        ASSERT_OK(vigil_wake_process(t.rt, 4, &ran, E));
        ASSERT_EQ(ran, 1);
    }
    ASSERT(turn >= 2 && turn < 6);
    char *runs = NULL;
    ASSERT_OK(vigil_wake_runs(t.rt, agent, "completed", 0, &runs, E));
    ASSERT_CONTAINS(runs, key); /* the last run ended completed */
    vigil_free(runs);
    ASSERT_EQ(jobs_in(&t, agent, thread, "pending"), 1);
    gate_wait_for_one_held();
    compaction_goes_on(&t, agent, thread);
    test_rt_close(&t);
}

int main(void)
{
    RUN(a_chat_turn_returns_while_its_compaction_is_held);
    RUN(a_wakes_run_ends_while_its_compaction_is_held);
    return 0;
}
