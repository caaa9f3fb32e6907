/*
 * test_agent_check.c: every public function that takes an agent id answers VIGIL_ENOTFOUND
 * `no agent "X"` for one that is not stored — never created, empty, malformed, deleted — and
 * writes nothing for it; a NULL filter still means every agent. (The command line's table test,
 * tests/cli/test_unknown_agent.sh, compares the store's bytes; this one is the library's view.)
 */
#include "helpers/rt.h"

#include <sys/stat.h>

static void expect_no_agent(vigil_code rc, const vigil_error *err, const char *id, int line)
{
    char want[128];
    snprintf(want, sizeof want, "no agent \"%s\"", id);
    if (rc != VIGIL_ENOTFOUND || !strstr(err->message, want)) {
        fprintf(stderr, "line %d: agent \"%s\": got %s \"%s\"\n", line, id, vigil_code_name(rc),
                err->message);
        exit(1);
    }
}

/* Each public call taking an agent id, with that id. */
static void call_all(vigil_runtime *rt, const char *id, const char *dir)
{
    vigil_error err;
    char *out = NULL, key[65], id37[37];
    int n = 0;
    int64_t count = 0;
    vigil_lifecycle lc;
#define CHECK(call)                                                                                \
    do {                                                                                           \
        memset(&err, 0, sizeof err);                                                               \
        expect_no_agent((call), &err, id, __LINE__);                                               \
    } while (0)
    CHECK(vigil_agent_show(rt, id, &out, &err));
    CHECK(vigil_agent_lifecycle(rt, id, &lc, &err));
    CHECK(vigil_agent_pause(rt, id, NULL, &err));
    CHECK(vigil_agent_resume(rt, id, NULL, &err));
    CHECK(vigil_agent_destroy(rt, id, NULL, &err));
    CHECK(vigil_agent_delete(rt, id, &err));
    CHECK(vigil_chat(rt, id, NULL, "hi", NULL, &out, &err));
    CHECK(vigil_runs_list(rt, id, NULL, NULL, 0, &out, &err));
    CHECK(vigil_journal_export(rt, id, dir, &count, &err));
    CHECK(vigil_memory_list(rt, id, NULL, &out, &err));
    CHECK(vigil_memory_show(rt, id, "persona", &out, &err));
    CHECK(vigil_memory_search(rt, id, "hello", 5, &out, &err));
    CHECK(vigil_memory_history(rt, id, "persona", &out, &err));
    CHECK(vigil_memory_pending(rt, id, &out, &err));
    CHECK(vigil_memory_seed(rt, id, NULL, &n, &err));
    CHECK(vigil_memory_set(rt, id, "hours", "Open 9-17", NULL, NULL, &out, &err));
    CHECK(vigil_memory_delete(rt, id, "hours", &out, &err));
    CHECK(vigil_approval_list(rt, id, NULL, &out, &err));
    CHECK(vigil_kill_set(rt, id, NULL, 1, "test", &err));
    CHECK(vigil_kill_active(rt, id, NULL, &n, &err));
    CHECK(vigil_budget_usage(rt, id, &out, &err));
    CHECK(vigil_tool_list_for_agent(rt, id, &out, &err));
    CHECK(vigil_tool_call(rt, id, "k", "set_report", "{}", &out, &err));
    CHECK(vigil_subscription_add(rt, id, "{\"tokens\":[\"T\"]}", &out, &err));
    CHECK(vigil_subscription_list(rt, id, &out, &err));
    CHECK(vigil_timer_add(rt, id, "cron", "@daily", "UTC", id37, &err));
    CHECK(vigil_timer_list(rt, id, &out, &err));
    CHECK(vigil_wake_agent(rt, id, NULL, NULL, key, &err));
    CHECK(vigil_wake_agent(rt, id, "hi", NULL, key, &err));
    CHECK(vigil_wake_runs(rt, id, NULL, 0, &out, &err));
#undef CHECK
}

static int64_t owned(struct vg_env *env, const char *kind, const char *owner)
{
    struct vg_query q = {.kind = kind, .owner = owner};
    int64_t n = -1;
    ASSERT_OK(vg_store_count(env->store, &q, &n, E));
    return n;
}

/* The lists a write for any agent would show in, as one text to compare. */
static char *everything(vigil_runtime *rt)
{
    char *parts[5] = {0}, *all = NULL;
    ASSERT_OK(vigil_kill_status(rt, &parts[0], E));
    ASSERT_OK(vigil_subscription_list(rt, NULL, &parts[1], E));
    ASSERT_OK(vigil_timer_list(rt, NULL, &parts[2], E));
    ASSERT_OK(vigil_wake_runs(rt, NULL, NULL, 0, &parts[3], E));
    ASSERT_OK(vigil_memory_pending(rt, NULL, &parts[4], E));
    size_t len = 1;
    for (int i = 0; i < 5; i++)
        len += strlen(parts[i]) + 1;
    all = calloc(1, len);
    ASSERT(all != NULL);
    for (int i = 0; i < 5; i++) {
        snprintf(all + strlen(all), len - strlen(all), "%s\n", parts[i]);
        vigil_free(parts[i]);
    }
    return all;
}

TEST(unknown_agents_are_not_found_and_nothing_is_written)
{
    struct test_rt t;
    char real[37], gone[37], dir[4300];
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    test_rt_open(&t, "agent_check");
    vigil_agent_spec spec = {.name = "real", .config_json = "{\"tools\":[\"set_report\"]}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, real, E));
    spec.name = "gone";
    ASSERT_OK(vigil_agent_create(t.rt, &spec, gone, E));
    ASSERT_OK(vigil_agent_destroy(t.rt, gone, NULL, E));
    ASSERT_OK(vigil_agent_delete(t.rt, gone, E));
    snprintf(dir, sizeof dir, "%s.export", t.path);
    char *before = everything(t.rt);

    const char *bad[] = {"01999999-0000-7000-8000-000000000000", "nonsense", "", gone};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        call_all(t.rt, bad[i], dir);
        ASSERT_EQ(owned(t.env, "memory_block", bad[i]), 0);
        ASSERT_EQ(owned(t.env, "wake_run", bad[i]), 0);
    }
    char *after = everything(t.rt);
    ASSERT_STREQ(after, before);
    struct stat st;
    ASSERT(stat(dir, &st) != 0); /* no export folder */

    /* A NULL filter is every agent, and a stored agent works. */
    char *out = NULL;
    ASSERT_OK(vigil_memory_pending(t.rt, NULL, &out, E));
    vigil_free(out);
    ASSERT_OK(vigil_memory_list(t.rt, real, NULL, &out, E));
    vigil_free(out);
    ASSERT_OK(vigil_runs_list(t.rt, real, NULL, NULL, 0, &out, E));
    vigil_free(out);
    free(before);
    free(after);
    test_rt_close(&t);
}

int main(void)
{
    RUN(unknown_agents_are_not_found_and_nothing_is_written);
    return 0;
}
