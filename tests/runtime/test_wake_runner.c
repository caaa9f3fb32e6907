/*
 * test_wake_runner.c: the loop runner turns a claimed wake into the agent's input. A batch that
 * names tens of thousands of entities still runs: the input lists what fits its budget and
 * counts the rest, instead of failing the wake on every retry.
 */
#include "helpers/rt.h"

#include "agent/agent.h"
#include "runtime/wake_runner.h"
#include "wake/wake.h"

TEST(a_huge_wake_delta_is_cut_to_its_budget_and_the_run_completes)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], key[65];
    enum vg_enqueue_result res;
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    test_rt_open(&t, "wake_runner_huge_delta");
    vigil_agent_spec spec = {.name = "watcher"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, a, E));
    /* 40,000 tokens of 36 bytes: about 1.5 MB of JSON, more than a wake input may hold. */
    enum { N = 40000 };
    static char names[N][40];
    static const char *tokens[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "task-%031d", i);
        tokens[i] = names[i];
    }
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    struct vg_wake_req m = {
        .reason = VG_REASON_MANUAL, .agent_id = a, .tokens = tokens, .n_tokens = N};
    ASSERT_OK(vg_wake_enqueue(&w, &m, key, &res, E));
    ASSERT_EQ(res, VG_ENQ_NEW);
    int ran = 0;
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 0, &ran, E));
    ASSERT_EQ(ran, 1);
    json_t *run = NULL;
    ASSERT_OK(vg_env_get_json(t.env, "wake_run", key, &run, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(run, "status")), "completed");
    json_t *msgs = NULL;
    ASSERT_OK(vg_message_latest(t.env, a, json_string_value(json_object_get(run, "thread_id")), 100,
                                &msgs, E));
    json_decref(run);
    /* The wake input: the first tokens, then a count of the rest, within its budget. */
    const char *input = json_string_value(json_object_get(json_array_get(msgs, 0), "content"));
    ASSERT(input != NULL);
    ASSERT_CONTAINS(input, "You woke up: reason manual.");
    ASSERT_CONTAINS(input, "\"task-0000000000000000000000000000000\"");
    ASSERT_CONTAINS(input, " more.");
    ASSERT(strlen(input) <= 64 * 1024 + 200);
    /* shown + counted = all */
    const char *more = strstr(input, "] and ");
    ASSERT(more != NULL);
    long rest = strtol(more + 6, NULL, 10);
    size_t shown = 0;
    for (const char *p = input; (p = strstr(p, "\"task-")); p++)
        shown++;
    ASSERT_EQ((long)shown + rest, (long)N);
    json_decref(msgs);
    vg_wake_release(&w);
    test_rt_close(&t);
}

int main(void)
{
    RUN(a_huge_wake_delta_is_cut_to_its_budget_and_the_run_completes);
    return 0;
}
