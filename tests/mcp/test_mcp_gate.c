/*
 * test_mcp_gate.c: an MCP call in flight when the process dies is settled like any other tool
 * call of its contract (issue 28 item 4): a non-idempotent MCP tool becomes an in-doubt item
 * for a person, never repeated; one a person declared idempotent in config runs again. Uses
 * vigil's fault server (tests/mcp/fault_server.js) declared in the config file.
 */
#include "tool/tool_helpers.h"

#include "mcp/mcp_helpers.h"

#include <signal.h>

static char cfg_path[1100], starts_path[1100];

/* extra: more keys for the server's declaration (a change of it). */
static void write_config(const char *extra)
{
    FILE *f = fopen(cfg_path, "w");
    ASSERT(f);
    /* env and cancelled have no annotations (mutating, non-idempotent); cancelled is declared
     * idempotent by its override. */
    fprintf(f,
            "{\"mcp_servers\": {\"fault\": {\"command\": [\"node\", "
            "\"%s/tests/mcp/fault_server.js\"], \"tools\": {\"cancelled\": {\"idempotent\": "
            "true}}, \"env\": {\"FAULT_STARTS_FILE\": \"%s\"}%s}}}",
            VIGIL_SOURCE_DIR, starts_path, extra);
    fclose(f);
    setenv("VIGIL_CONFIG", cfg_path, 1);
}

/* How many times the fault server has started. */
static int starts(void)
{
    int n = 0, ch;
    FILE *f = fopen(starts_path, "r");
    while (f && (ch = fgetc(f)) != EOF)
        n += ch == '\n';
    if (f)
        fclose(f);
    return n;
}

/* proves: S2-028 */
TEST(the_tool_list_is_cached_until_the_declaration_changes)
{
    struct test_rt t;
    char a[37];
    remove(starts_path);
    test_rt_open(&t, "mcp_gate_cache");
    make_agent(&t, "{\"tools\": [\"fault__*\"]}", a);
    ASSERT(vg_tool_executor_find(executor(&t), "fault__ok")); /* first: listed live */
    ASSERT_EQ(starts(), 1);
    test_rt_reopen(&t); /* a new process: the tools come from the cache, nothing starts */
    ASSERT(vg_tool_executor_find(executor(&t), "fault__ok"));
    ASSERT_EQ(starts(), 1);
    struct vg_tool_outcome o = {0};
    call_tool(&t, a, "wake-1", "fault__ok", "{}", &o); /* the first call starts it */
    ASSERT_EQ(o.code, VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(starts(), 2);
    /* A changed declaration invalidates the cached list: it is listed live again. */
    write_config(", \"timeout_ms\": 5000");
    test_rt_reopen(&t);
    ASSERT(vg_tool_executor_find(executor(&t), "fault__ok"));
    ASSERT_EQ(starts(), 3);
    test_rt_close(&t);
    write_config("");
}

/* Call with a crash armed: the call stops as if the process died right after the effect. */
static void crash_call(struct test_rt *t, const char *agent, const char *tool)
{
    struct vg_tool_outcome o = {0};
    vigil_error err = {0};
    struct vg_tool_call_ctx ctx = {.agent_id = agent, .run_key = "wake-1"};
    json_t *args = json_object();
    vg_tool_executor_test_crash(executor(t), VG_CRASH_AFTER_EFFECT);
    ASSERT_EQ(vg_tool_executor_call(executor(t), &ctx, tool, args, &o, &err), VIGIL_ECANCELED);
    json_decref(args);
    vg_tool_outcome_release(&o);
}

TEST(a_non_idempotent_mcp_call_cut_by_a_crash_is_in_doubt)
{
    struct test_rt t;
    char a[37];
    test_rt_open(&t, "mcp_gate_doubt");
    make_agent(&t, "{\"tools\": [\"fault__*\"]}", a);
    const struct vg_tool_def *d = vg_tool_executor_find(executor(&t), "fault__env");
    ASSERT(d && d->mutating && d->idem == VG_IDEM_NON_IDEMPOTENT);
    crash_call(&t, a, "fault__env");
    test_rt_reopen(&t); /* a new process: new servers, the store as the crash left it */
    int settled = 0;
    vigil_error err = {0};
    ASSERT_EQ(vg_tool_executor_recover(executor(&t), &settled, &err), VIGIL_OK);
    struct vg_tool_outcome o = {0};
    call_tool(&t, a, "wake-1", "fault__env", "{}", &o);
    ASSERT_EQ(o.code, VG_TOOL_IN_DOUBT); /* held for a person, not sent again */
    vg_tool_outcome_release(&o);
    json_t *items = NULL;
    ASSERT_EQ(vg_tool_in_doubt_list(t.env, a, &items, &err), VIGIL_OK);
    ASSERT_EQ(json_array_size(items), 1);
    json_decref(items);
    test_rt_close(&t);
}

TEST(an_idempotent_mcp_call_cut_by_a_crash_runs_again)
{
    struct test_rt t;
    char a[37];
    test_rt_open(&t, "mcp_gate_idem");
    make_agent(&t, "{\"tools\": [\"fault__*\"]}", a);
    const struct vg_tool_def *d = vg_tool_executor_find(executor(&t), "fault__cancelled");
    ASSERT(d && d->mutating && d->idem == VG_IDEM_IDEMPOTENT); /* the config's override */
    crash_call(&t, a, "fault__cancelled");
    test_rt_reopen(&t);
    int settled = 0;
    vigil_error err = {0};
    ASSERT_EQ(vg_tool_executor_recover(executor(&t), &settled, &err), VIGIL_OK);
    struct vg_tool_outcome o = {0};
    call_tool(&t, a, "wake-1", "fault__cancelled", "{}", &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    ASSERT_STREQ(json_string_value(json_object_get(o.result, "text")), "cancelled: []");
    vg_tool_outcome_release(&o);
    json_t *items = NULL;
    ASSERT_EQ(vg_tool_in_doubt_list(t.env, a, &items, &err), VIGIL_OK);
    ASSERT_EQ(json_array_size(items), 0);
    json_decref(items);
    test_rt_close(&t);
}

int main(void)
{
    mcp_need_node();
    signal(SIGPIPE, SIG_IGN);
    const char *dir = vg_test_tmpdir("mcp_gate");
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
    snprintf(starts_path, sizeof starts_path, "%s/starts", dir);
    write_config("");
    RUN(the_tool_list_is_cached_until_the_declaration_changes);
    RUN(a_non_idempotent_mcp_call_cut_by_a_crash_is_in_doubt);
    RUN(an_idempotent_mcp_call_cut_by_a_crash_runs_again);
    unsetenv("VIGIL_CONFIG");
    return 0;
}
