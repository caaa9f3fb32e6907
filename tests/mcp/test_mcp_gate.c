/*
 * test_mcp_gate.c: an MCP call in flight when the process dies is settled like any other tool
 * call of its contract (issue 28 item 4): a non-idempotent MCP tool becomes an in-doubt item
 * for a person, never repeated; one a person declared idempotent in config runs again. Uses
 * vigil's fault server (tests/mcp/fault_server.js) declared in the config file.
 */
#include "tool/tool_helpers.h"

#include "mcp/mcp_helpers.h"

#include "agent/agent.h"
#include "manifest/manifest.h"

#include <signal.h>

static char cfg_path[1100], starts_path[1100], helper_starts[1100], dir_path[1024];

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

static int starts(void)
{
    return mcp_count_lines(starts_path);
}

/* proves: S2-028 */
TEST(the_tool_list_is_cached_until_the_declaration_changes)
{
    struct test_rt t;
    char a[37];
    remove(starts_path);
    test_rt_open(&t, "mcp_gate_cache");
    make_agent(&t, "{\"tools\": [\"fault__*\"]}", a);
    executor(&t); /* the runtime's tools, the server declared: nothing starts */
    ASSERT_EQ(starts(), 0);
    ASSERT(vg_tool_executor_find(executor(&t), "fault__ok")); /* first need: listed live */
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

/* The server, not vigil, dies mid-call (trial L2): it had the request and may have done its
 * effect (a row inserted, then the crash), so a non-idempotent mutating call is in doubt for a
 * person, not a plain failure the model would retry. */
TEST(a_non_idempotent_mcp_call_whose_server_dies_holding_it_is_in_doubt)
{
    struct test_rt t;
    char a[37];
    vigil_error err = {0};
    test_rt_open(&t, "mcp_gate_died");
    make_agent(&t, "{\"tools\": [\"fault__*\"]}", a);
    const struct vg_tool_def *d = vg_tool_executor_find(executor(&t), "fault__crash");
    ASSERT(d && d->mutating && d->idem == VG_IDEM_NON_IDEMPOTENT);
    struct vg_tool_outcome o = {0};
    call_tool(&t, a, "wake-died", "fault__crash", "{}", &o);
    ASSERT_EQ(o.code, VG_TOOL_IN_DOUBT);
    ASSERT(strstr(o.error_message, "may have taken effect") != NULL);
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

/* Apply a manifest for agent `name` that declares server `server` (the fault server, which
 * grows a tool on demand) and may call tools; the new agent's id in id. */
static void apply_helper(struct test_rt *t, const char *name, const char *server, const char *tools,
                         char id[37])
{
    char path[1200];
    json_t *out = NULL, *problems = json_array();
    vigil_error err = {0};
    snprintf(path, sizeof path, "%s/%s.json", dir_path, name);
    FILE *f = fopen(path, "w");
    ASSERT(f);
    fprintf(f,
            "{\"name\": \"%s\", \"tools\": %s, \"mcp_servers\": {\"%s\": {\"command\": "
            "[\"node\", \"%s/tests/mcp/fault_server.js\"], \"env\": {\"FAULT_STARTS_FILE\": "
            "\"%s\", \"FAULT_GROW\": \"1\"}}}}",
            name, tools, server, VIGIL_SOURCE_DIR, helper_starts);
    fclose(f);
    ASSERT_EQ(vg_manifest_apply_path(t->env, path, 0, &out, problems, &err), VIGIL_OK);
    snprintf(id, 37, "%s", json_string_value(json_object_get(json_array_get(out, 0), "id")));
    json_decref(out);
    json_decref(problems);
}

static char *tools_of(struct test_rt *t, const char *agent)
{
    char *text = NULL;
    vigil_error err = {0};
    ASSERT_EQ(vigil_tool_list_for_agent(t->rt, agent, &text, &err), VIGIL_OK);
    return text;
}

/* An agent whose manifest names an MCP server gets that server's tools as server__tool, with
 * nothing started until they are needed: building the runtime's tools and listing another
 * agent's tools start no server; listing this agent's tools starts its server once; a tool the
 * server announces later (tools/list_changed) can be called and is offered from then on.
 * proves: S2-022 S2-023 S2-026 */
TEST(a_manifest_server_serves_its_agent_lazily_and_grows)
{
    struct test_rt t;
    char a[37], other[37];
    remove(starts_path);
    remove(helper_starts);
    test_rt_open(&t, "mcp_gate_manifest");
    apply_helper(&t, "helper-user", "helper", "[\"helper__*\"]", a);
    make_agent(&t, "{\"tools\": [\"set_report\"]}", other);
    executor(&t);
    char *text = tools_of(&t, other);
    ASSERT(!strstr(text, "helper__"));
    vigil_free(text);
    ASSERT_EQ(mcp_count_lines(helper_starts), 0);
    ASSERT_EQ(starts(), 0); /* the config's server: no agent here may call its tools */
    text = tools_of(&t, a);
    ASSERT(strstr(text, "\"name\":\"helper__ok\""));
    ASSERT(strstr(text, "\"source\":\"mcp:helper\""));
    ASSERT(!strstr(text, "helper__grown"));
    vigil_free(text);
    ASSERT_EQ(mcp_count_lines(helper_starts), 1);
    ASSERT_EQ(starts(), 0);
    struct vg_tool_outcome o = {0};
    call_tool(&t, a, "wake-1", "helper__grow", "{}", &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    call_tool(&t, a, "wake-1", "helper__grown", "{}", &o); /* announced after the call */
    ASSERT_EQ(o.code, VG_TOOL_OK);
    ASSERT_STREQ(json_string_value(json_object_get(o.result, "text")), "I am new");
    vg_tool_outcome_release(&o);
    text = tools_of(&t, a);
    ASSERT(strstr(text, "\"name\":\"helper__grown\""));
    vigil_free(text);
    ASSERT_EQ(mcp_count_lines(helper_starts), 1);
    /* Another run's call goes to the same server process: the connection is kept for every
     * run of the runtime, not made again for each. */
    call_tool(&t, a, "wake-2", "helper__ok", "{}", &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(mcp_count_lines(helper_starts), 1);
    test_rt_close(&t);
}

/* Apply the manifest text (a JSON object) as it is. */
static void apply_text(struct test_rt *t, const char *text)
{
    char path[1200];
    json_t *out = NULL, *problems = json_array();
    vigil_error err = {0};
    snprintf(path, sizeof path, "%s/manifest.json", dir_path);
    FILE *f = fopen(path, "w");
    ASSERT(f);
    fputs(text, f);
    fclose(f);
    ASSERT_EQ(vg_manifest_apply_path(t->env, path, 0, &out, problems, &err), VIGIL_OK);
    json_decref(out);
    json_decref(problems);
}

/* A runtime whose tools were built before an agent was applied (a running daemon's) serves that
 * agent's server at its next listing; a changed declaration is served anew (its server started
 * again, as now declared), and a withdrawn one serves nothing. Nothing else starts. */
TEST(a_running_runtime_follows_its_agents_declarations)
{
    struct test_rt t;
    char a[37], other[37], manifest[2048];
    struct vg_tool_outcome o = {0};
    remove(helper_starts);
    test_rt_open(&t, "mcp_gate_follow");
    make_agent(&t, "{\"tools\": [\"set_report\"]}", other);
    executor(&t); /* built with no helper server */
    apply_helper(&t, "late", "helper", "[\"helper__*\"]", a);
    char *text = tools_of(&t, a);
    ASSERT(strstr(text, "\"name\":\"helper__ok\""));
    vigil_free(text);
    ASSERT_EQ(mcp_count_lines(helper_starts), 1);
    call_tool(&t, a, "wake-1", "helper__ok", "{}", &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    /* The same server declared anew (no FAULT_GROW): the old process goes, a new one serves. */
    snprintf(manifest, sizeof manifest,
             "{\"name\": \"late\", \"tools\": [\"helper__*\"], \"mcp_servers\": {\"helper\": "
             "{\"command\": [\"node\", \"%s/tests/mcp/fault_server.js\"], \"env\": "
             "{\"FAULT_STARTS_FILE\": \"%s\"}}}}",
             VIGIL_SOURCE_DIR, helper_starts);
    apply_text(&t, manifest);
    text = tools_of(&t, a);
    ASSERT(strstr(text, "\"name\":\"helper__ok\""));
    ASSERT(!strstr(text, "helper__grow")); /* the new declaration's list */
    vigil_free(text);
    ASSERT_EQ(mcp_count_lines(helper_starts), 2);
    call_tool(&t, a, "wake-2", "helper__ok", "{}", &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    ASSERT_STREQ(json_string_value(json_object_get(o.result, "text")), "ok: 1"); /* new process */
    vg_tool_outcome_release(&o);
    /* Withdrawn: the agent's tools no longer include it, and nothing starts. */
    apply_text(&t, "{\"name\": \"late\", \"tools\": [\"helper__*\"]}");
    text = tools_of(&t, a);
    ASSERT(!strstr(text, "helper__"));
    vigil_free(text);
    call_tool(&t, a, "wake-3", "helper__ok", "{}", &o);
    ASSERT_EQ(o.code, VG_TOOL_UNKNOWN_TOOL);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(mcp_count_lines(helper_starts), 2);
    test_rt_close(&t);
}

/* The same server name declared differently by the config file and a manifest is served to
 * no agent: the agents that reach it fail, naming both (which of the two an agent would get is
 * not guessed); an agent whose allowlist does not reach it keeps its tools (trial E22). */
TEST(a_server_declared_differently_twice_fails_only_the_agents_it_concerns)
{
    struct test_rt t;
    char a[37], b[37];
    struct vg_tool_executor *x = NULL;
    vigil_error err = {0};
    test_rt_open(&t, "mcp_gate_twice");
    apply_helper(&t, "twice", "fault", "[\"fault__*\"]", a);
    make_agent(&t, "{\"tools\": [\"set_report\", \"memory_*\"]}", b);
    ASSERT_EQ(vg_runtime_tools(t.rt, &x, &err), VIGIL_OK);
    ASSERT(vg_tool_executor_find(x, "set_report"));
    ASSERT_EQ(vg_runtime_tool_sources_refresh(t.rt, b, &err), VIGIL_OK);
    ASSERT_EQ(vg_runtime_tool_sources_refresh(t.rt, a, &err), VIGIL_EEXISTS);
    ASSERT(strstr(err.message, "MCP server \"fault\""));
    ASSERT(strstr(err.message, "the config file") && strstr(err.message, "agent \"twice\""));
    test_rt_close(&t);
}

/* A server name the client refuses, stored by an agent made before manifests and the API were
 * held to the client's rule (here written into its record under the checks), is left out; the
 * other agents' tools are still built. */
TEST(an_agent_server_the_client_refuses_is_left_out)
{
    struct test_rt t;
    char a[37], b[37];
    struct vg_tool_executor *x = NULL;
    vigil_error err = {0};
    test_rt_open(&t, "mcp_gate_badname");
    make_agent(&t, "{\"tools\": [\"*\"]}", a);
    json_t *old = json_loads("{\"config\": {\"tools\": [\"*\"], \"mcp_servers\": "
                             "{\"Bad-Name\": {\"command\": [\"x\"]}}}}",
                             0, NULL);
    ASSERT_OK(vg_agent_update(t.env, a, old, E));
    json_decref(old);
    make_agent(&t, "{\"tools\": [\"set_report\"]}", b);
    ASSERT_EQ(vg_runtime_tools(t.rt, &x, &err), VIGIL_OK);
    ASSERT(vg_tool_executor_find(x, "set_report"));
    test_rt_close(&t);
}

int main(void)
{
    mcp_need_node();
    signal(SIGPIPE, SIG_IGN);
    const char *dir = vg_test_tmpdir("mcp_gate");
    snprintf(dir_path, sizeof dir_path, "%s", dir);
    snprintf(helper_starts, sizeof helper_starts, "%s/helper_starts", dir);
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
    snprintf(starts_path, sizeof starts_path, "%s/starts", dir);
    write_config("");
    RUN(the_tool_list_is_cached_until_the_declaration_changes);
    RUN(a_non_idempotent_mcp_call_cut_by_a_crash_is_in_doubt);
    RUN(a_non_idempotent_mcp_call_whose_server_dies_holding_it_is_in_doubt);
    RUN(an_idempotent_mcp_call_cut_by_a_crash_runs_again);
    RUN(a_manifest_server_serves_its_agent_lazily_and_grows);
    RUN(a_running_runtime_follows_its_agents_declarations);
    RUN(a_server_declared_differently_twice_fails_only_the_agents_it_concerns);
    RUN(an_agent_server_the_client_refuses_is_left_out);
    unsetenv("VIGIL_CONFIG");
    return 0;
}
