/*
 * test_upkeep.c: a chat turn's upkeep left for its caller (vigil_runtime_defer_upkeep and
 * vigil_runtime_upkeep, include/vigil.h). The upkeep here is what shows: the compaction check
 * of the turn's thread, which records a compaction job once a turn takes the thread past its
 * budget. Deferred, the turn returns without it; asked for, it runs once; not asked for, the
 * runtime's next turn or its close runs it; a crash before it loses none of what the turn
 * returned, and the thread's next run makes the check again.
 */
#include "helpers/rt.h"

#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent.h"
#include "runtime/runtime_int.h"
#include "store/store.h"

/* A fresh store and an agent of a small context: its compaction budget (half of it) is passed
 * within a few turns of 2,000 characters. */
static void setup(struct test_rt *t, const char *name)
{
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    test_rt_open(t, name);
}

static void small_agent(struct test_rt *t, const char *name, char agent[37])
{
    vigil_agent_spec spec = {.name = name, .config_json = "{\"limits\":{\"context_tokens\":4000}}"};
    ASSERT_OK(vigil_agent_create(t->rt, &spec, agent, E));
}

/* The compaction jobs of the agent's default session, in any status. */
static int64_t jobs(struct test_rt *t, const char *agent)
{
    char thread[200];
    int64_t n = 0;
    snprintf(thread, sizeof thread, "%s:session:default", agent);
    struct vg_query q = {.kind = "compaction_job", .owner = agent, .k1 = thread};
    ASSERT_OK(vg_store_count(t->env->store, &q, &n, E));
    return n;
}

/* Turn number `turn` (0 first): each turn's message its own, the same for every agent. */
static void turn(struct test_rt *t, const char *agent, int n)
{
    char text[2001], *out = NULL;
    memset(text, 'w', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    text[0] = (char)('a' + n);
    ASSERT_OK(vigil_chat(t->rt, agent, NULL, text, NULL, &out, E));
    ASSERT_CONTAINS(out, "\"end\":\"completed\"");
    vigil_free(out);
}

static int completed_runs(struct test_rt *t, const char *agent)
{
    char *out = NULL;
    ASSERT_OK(vigil_runs_list(t->rt, agent, "completed", NULL, 20, &out, E));
    json_t *runs = json_loads(out, 0, NULL);
    int n = (int)json_array_size(json_object_get(runs, "items"));
    json_decref(runs);
    vigil_free(out);
    return n;
}

/* The messages of the agent's default session (the turns' and the replies). */
static size_t messages(struct test_rt *t, const char *agent)
{
    char thread[200];
    json_t *msgs = NULL;
    snprintf(thread, sizeof thread, "%s:session:default", agent);
    ASSERT_OK(vg_message_latest(t->env, agent, thread, 50, &msgs, E));
    size_t n = json_array_size(msgs);
    json_decref(msgs);
    return n;
}

/* Deferred: each turn returns with no check made (no job even from the turn that takes the
 * thread past its budget); vigil_runtime_upkeep then runs the turn's, once (a second call finds
 * none waiting), and the job it records is the one the turn would have made. *due: how many
 * turns that took. */
static void turns_until_due_asking(struct test_rt *t, const char *agent, int *due)
{
    int n = 0;
    for (; n < 6 && jobs(t, agent) == 0; n++) {
        turn(t, agent, n);
        ASSERT_EQ(jobs(t, agent), 0); /* the turn left its check waiting */
        ASSERT_EQ(vigil_runtime_upkeep(t->rt), 1);
        ASSERT_EQ(vigil_runtime_upkeep(t->rt), 0); /* once */
    }
    ASSERT(n >= 2 && n < 6);
    ASSERT_EQ(jobs(t, agent), 1);
    *due = n;
}

TEST(a_deferred_upkeep_runs_once_when_asked)
{
    struct test_rt t;
    char agent[37];
    int due = 0;
    setup(&t, "upkeep_asked");
    small_agent(&t, "asked", agent);
    vigil_runtime_defer_upkeep(t.rt, 1);
    ASSERT_EQ(vigil_runtime_upkeep(t.rt), 0); /* none before any turn */
    turns_until_due_asking(&t, agent, &due);
    test_rt_close(&t);
}

/* Not asked for, a waiting upkeep is not skipped: the runtime's next turn runs it before its
 * own run, and closing the runtime runs the last one. Deferred or not, compaction is considered
 * after each run and scheduled once the thread passed its budget. proves: S0-044 */
TEST(an_upkeep_not_asked_for_runs_at_the_next_turn_or_the_close)
{
    struct test_rt t;
    char first[37], next[37], closing[37];
    int due = 0;
    setup(&t, "upkeep_not_asked");
    small_agent(&t, "first", first);
    small_agent(&t, "next", next);
    small_agent(&t, "closing", closing);
    vigil_runtime_defer_upkeep(t.rt, 1);
    turns_until_due_asking(&t, first, &due);

    for (int n = 0; n < due; n++)
        turn(&t, next, n);
    ASSERT_EQ(jobs(&t, next), 0); /* the turn that passed the budget left its check waiting */
    turn(&t, first, due);         /* another agent's turn runs it first */
    ASSERT_EQ(jobs(&t, next), 1);
    ASSERT_EQ(vigil_runtime_upkeep(t.rt), 1); /* the first agent's turn's own */

    for (int n = 0; n < due; n++)
        turn(&t, closing, n);
    ASSERT_EQ(jobs(&t, closing), 0);
    test_rt_reopen(&t); /* closes the runtime first */
    ASSERT_EQ(jobs(&t, closing), 1);
    test_rt_close(&t);
}

/* A process that dies after its turn returned and before the upkeep: every run it returned is
 * completed, with its messages; only the check is not made, and the thread's next run (another
 * process's, not deferring) makes it. */
TEST(a_crash_before_the_upkeep_loses_nothing_the_turn_returned)
{
    struct test_rt t;
    char probe[37], agent[37];
    int due = 0;
    setup(&t, "upkeep_crash");
    small_agent(&t, "probe", probe);
    small_agent(&t, "crash", agent);
    vigil_runtime_defer_upkeep(t.rt, 1);
    turns_until_due_asking(&t, probe, &due);
    vigil_runtime_close(t.rt);
    t.rt = NULL;
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        test_rt_reopen(&t);
        vigil_runtime_defer_upkeep(t.rt, 1);
        for (int n = 0; n < due; n++)
            turn(&t, agent, n);
        _exit(jobs(&t, agent) == 0 ? 0 : 4); /* the last turn returned; its upkeep waits */
    }
    int status = -1;
    ASSERT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    t.opens++; /* other ids than the child's */
    test_rt_reopen(&t);
    ASSERT_EQ(completed_runs(&t, agent), due);
    ASSERT_EQ(messages(&t, agent), messages(&t, probe)); /* the same turns, all kept */
    ASSERT_EQ(jobs(&t, agent), 0);                       /* the check alone was lost */
    turn(&t, agent, due);
    ASSERT_EQ(jobs(&t, agent), 1);
    test_rt_close(&t);
}

int main(void)
{
    RUN(a_deferred_upkeep_runs_once_when_asked);
    RUN(an_upkeep_not_asked_for_runs_at_the_next_turn_or_the_close);
    RUN(a_crash_before_the_upkeep_loses_nothing_the_turn_returned);
    return 0;
}
