/*
 * test_mcp_servers.c: the reference MCP servers from npm (scripts/npm.sh installs them):
 * @modelcontextprotocol/server-everything and @modelcontextprotocol/server-filesystem confined
 * to a temporary folder, over stdio, first through the client and then as vigil tools through
 * the executor's gate (declared in the config file, allowlisted by glob, approval for a
 * destructive tool). Skips (77) without them, fails when VIGIL_REQUIRE_MCP=1.
 */
#include "tool/tool_helpers.h"

#include "mcp/mcp.h"
#include "mcp/mcp_helpers.h"
#include "os/fs.h"

#include <signal.h>
#include <sys/stat.h>

static char everything[1024], filesystem[1024];
static char root[1024];

/* proves: S2-024 */
TEST(everything_over_stdio)
{
    char text[2048];
    snprintf(text, sizeof text, "{\"everything\": {\"command\": [\"%s\"]}}", everything);
    struct vg_mcp_conf *conf = mcp_conf_of(text);
    struct vg_mcp_client *c = NULL;
    struct vg_mcp_options o = {.log = mcp_quiet};
    vigil_error err = {0};
    json_t *tools = NULL;
    ASSERT_EQ(vg_mcp_client_new(&conf->servers[0], &o, &c, &err), VIGIL_OK);
    ASSERT_EQ(vg_mcp_client_tools(c, &tools, &err), VIGIL_OK);
    ASSERT_EQ(json_array_size(tools), 13); /* no client capabilities: no conditional tools */
    json_t *res = mcp_call(c, "echo", "{\"message\": \"hi\"}");
    ASSERT_STREQ(mcp_first_text(res), "Echo: hi");
    json_decref(res);
    res = mcp_call(c, "get-structured-content", "{\"location\": \"Chicago\"}");
    ASSERT(
        json_is_number(json_object_get(json_object_get(res, "structuredContent"), "temperature")));
    json_decref(res);
    /* Progress notifications arrive before the answer and are taken on the way. */
    res = mcp_call(c, "trigger-long-running-operation", "{\"duration\": 0.2, \"steps\": 2}");
    ASSERT(strstr(mcp_first_text(res), "Long running operation completed"));
    json_decref(res);
    /* An unknown tool: this server answers an isError result (or an error; either is fine). */
    json_t *a = json_object();
    res = NULL;
    vigil_code rc = vg_mcp_client_call(c, "no-such-tool", a, &res, &err);
    ASSERT(rc == VIGIL_EINVAL || json_is_true(json_object_get(res, "isError")));
    json_decref(res);
    json_decref(a);
    /* A request the server does not know is a JSON-RPC error, and the connection goes on. */
    ASSERT_EQ(vg_mcp_client_request(c, "no/such/method", NULL, 0, &res, &err), VIGIL_EUNSUPPORTED);
    ASSERT(strstr(err.message, "-32601"));
    res = mcp_call(c, "get-sum", "{\"a\": 2, \"b\": 3}");
    ASSERT(strstr(mcp_first_text(res), "5"));
    json_decref(res);
    int pid = vg_mcp_client_pid(c);
    vg_mcp_client_free(c);
    ASSERT_EQ(kill(pid, 0), -1);
    vg_mcp_conf_free(conf);
}

TEST(filesystem_confined_to_a_folder)
{
    char text[3000];
    snprintf(text, sizeof text, "{\"fs\": {\"command\": [\"%s\", \"%s\"]}}", filesystem, root);
    struct vg_mcp_conf *conf = mcp_conf_of(text);
    struct vg_mcp_client *c = NULL;
    struct vg_mcp_options o = {.log = mcp_quiet};
    vigil_error err = {0};
    ASSERT_EQ(vg_mcp_client_new(&conf->servers[0], &o, &c, &err), VIGIL_OK);
    snprintf(text, sizeof text, "{\"path\": \"%s/note.txt\", \"content\": \"written by vigil\"}",
             root);
    json_t *res = mcp_call(c, "write_file", text);
    ASSERT(!json_is_true(json_object_get(res, "isError")));
    json_decref(res);
    snprintf(text, sizeof text, "%s/note.txt", root);
    ASSERT(vg_fs_exists(text));
    res = mcp_call(c, "read_text_file", "{\"path\": \"/etc/passwd\"}");
    ASSERT(json_is_true(json_object_get(res, "isError")));
    ASSERT(strstr(mcp_first_text(res), "outside allowed directories"));
    json_decref(res);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

/* MCP tools through the one gate: the config file declares the servers, the agent's allowlist
 * names them by glob, the call is journaled, a destructive tool waits for approval. */
/* proves: S2-002 */
TEST(mcp_tools_pass_the_gate)
{
    char cfg[4096], path[1100], id[37], other[37];
    snprintf(path, sizeof path, "%s/config.json", root);
    snprintf(cfg, sizeof cfg,
             "{\"mcp_servers\": {\"everything\": {\"command\": [\"%s\"]}, "
             "\"fs\": {\"command\": [\"%s\", \"%s\"]}}}",
             everything, filesystem, root);
    FILE *f = fopen(path, "w");
    ASSERT(f);
    fputs(cfg, f);
    fclose(f);
    setenv("VIGIL_CONFIG", path, 1);
    struct test_rt t;
    test_rt_open(&t, "mcp_gate");
    make_agent(&t, "{\"tools\": [\"everything__*\", \"fs__write_file\", \"set_report\"]}", id);
    /* One pool: the built-in tools and the servers' tools, shown to the model together. */
    json_t *pool = NULL;
    vigil_error e0 = {0};
    ASSERT_EQ(vg_tool_executor_visible_tools(executor(&t), id, NULL, &pool, &e0), VIGIL_OK);
    ASSERT_EQ(json_array_size(pool), 12 + 1 + 1); /* everything's 12, fs__write_file, set_report */
    json_decref(pool);
    struct vg_tool_outcome out = {0};
    call_tool(&t, id, "r1", "everything__echo", "{\"message\": \"hi\"}", &out);
    ASSERT_EQ(out.code, VG_TOOL_OK);
    ASSERT_STREQ(json_string_value(json_object_get(out.result, "text")), "Echo: hi");
    ASSERT_EQ(count_msgs(&t, id, "r1", "toolResult"), 1);
    vg_tool_outcome_release(&out);
    /* The schema check runs before the server is asked. */
    call_tool(&t, id, "r1", "everything__echo", "{\"message\": 5}", &out);
    ASSERT_EQ(out.code, VG_TOOL_INVALID_ARGUMENTS);
    vg_tool_outcome_release(&out);
    /* destructiveHint: approval first, nothing written. */
    char args[1200];
    snprintf(args, sizeof args, "{\"path\": \"%s/gated.txt\", \"content\": \"x\"}", root);
    call_tool(&t, id, "r1", "fs__write_file", args, &out);
    ASSERT_EQ(out.code, VG_TOOL_CONFIRMATION_REQUIRED);
    vg_tool_outcome_release(&out);
    snprintf(path, sizeof path, "%s/gated.txt", root);
    ASSERT(!vg_fs_exists(path));
    /* Outside the allowlist. */
    call_tool(&t, id, "r1", "fs__list_allowed_directories", "{}", &out);
    ASSERT_EQ(out.code, VG_TOOL_NOT_ALLOWED);
    vg_tool_outcome_release(&out);
    /* Another agent without the glob sees none of them. */
    make_agent(&t, "{\"tools\": [\"set_report\"]}", other);
    json_t *visible = NULL;
    vigil_error err = {0};
    ASSERT_EQ(vg_tool_executor_visible_tools(executor(&t), other, NULL, &visible, &err), VIGIL_OK);
    ASSERT_EQ(json_array_size(visible), 1);
    json_decref(visible);
    test_rt_close(&t);
    unsetenv("VIGIL_CONFIG");
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    mcp_npm_bin("mcp-server-everything", everything, sizeof everything);
    mcp_npm_bin("mcp-server-filesystem", filesystem, sizeof filesystem);
    snprintf(root, sizeof root, "%s", vg_test_tmpdir("mcp_servers"));
    RUN(everything_over_stdio);
    RUN(filesystem_confined_to_a_folder);
    RUN(mcp_tools_pass_the_gate);
    return 0;
}
