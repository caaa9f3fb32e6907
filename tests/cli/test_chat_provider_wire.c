/*
 * test_chat_provider_wire.c: `vigil chat -m` (the built binary, $VIGIL_CLI) against the loopback
 * HTTP server speaking the OpenAI and Anthropic wire formats the way some servers bend them: a
 * JSON answer to a streaming request is the reply; a used-up quota fails at once with exit 9
 * and a message about billing; an answer cut by max_tokens inside a tool call runs nothing and
 * exits 9 (the provider class of docs/cli.md), in text and --json output.
 */
#include "helpers/http_server.h"
#include "helpers/test.h"

#include <sys/wait.h>

#include "os/fs.h"

static char dir[4096];
static char agent[64];
static char out[65536], err[65536];

/* Run the binary with these arguments; stdout and stderr land in out and err. */
static int vigil(const char *args)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "exec \"%s\" %s >\"%s/out\" 2>\"%s/err\" </dev/null",
             getenv("VIGIL_CLI"), args, dir, dir);
    int st = system(cmd);
    const char *names[] = {"out", "err"};
    char *bufs[] = {out, err};
    for (int i = 0; i < 2; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(bufs[i], 1, sizeof out - 1, f) : 0;
        bufs[i][n] = '\0';
        if (f)
            fclose(f);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A server for one chat turn; the model environment points vigil at it. */
static struct vg_test_server *serve(const char *provider, const struct vg_ts_response *rs, size_t n)
{
    struct vg_test_server *srv = vg_test_server_start(rs, n);
    char base[128];
    snprintf(base, sizeof base, "%s/v1", vg_test_server_url(srv));
    setenv("VIGIL_MODEL_PROVIDER", provider, 1);
    setenv("VIGIL_MODEL_BASE_URL", base, 1);
    setenv("VIGIL_MODEL",
           strcmp(provider, "openai") ? "claude-sonnet-4-20250514" : "gpt-4o-2024-08-06", 1);
    return srv;
}

#define JSON_HEADERS "Content-Type: application/json\r\n"
#define SSE_HEADERS "Content-Type: text/event-stream\r\n"

static const char openai_cut_sse[] =
    "data: {\"id\":\"c1\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"role\":"
    "\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"call_cut\",\"type\":\"function\","
    "\"function\":{\"name\":\"memory_write\",\"arguments\":\"{\\\"label\\\": \\\"no\"}}]},"
    "\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"c1\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{},"
    "\"finish_reason\":\"length\"}]}\n\n"
    "data: [DONE]\n\n";
static const char openai_done[] =
    "{\"id\":\"c3\",\"object\":\"chat.completion\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,"
    "\"message\":{\"role\":\"assistant\",\"content\":\"all done\"},\"finish_reason\":\"stop\"}]}";
static const char anthropic_cut_sse[] =
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_c\","
    "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-20250514\","
    "\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":20,\"output_tokens\":1}}}\n\n"
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
    "\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_cut\",\"name\":\"memory_write\","
    "\"input\":{}}}\n\n"
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{"
    "\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"label\\\": \\\"no\"}}\n\n"
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
    "\"max_tokens\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":8}}\n\n"
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
static const char anthropic_done[] =
    "{\"id\":\"msg_e\",\"type\":\"message\",\"role\":\"assistant\",\"model\":"
    "\"claude-sonnet-4-20250514\",\"content\":[{\"type\":\"text\",\"text\":\"all done\"}],"
    "\"stop_reason\":\"end_turn\",\"usage\":{\"input_tokens\":30,\"output_tokens\":2}}";

static void cut_turn_exits_provider_class(const char *provider, const char *cut, const char *done,
                                          const char *flags)
{
    struct vg_ts_response rs[] = {{.headers = SSE_HEADERS, .body = cut},
                                  {.headers = JSON_HEADERS, .body = done}};
    struct vg_test_server *srv = serve(provider, rs, 2);
    char args[256];
    snprintf(args, sizeof args, "chat %s -m 'remember my note' %s", agent, flags);
    ASSERT_EQ(vigil(args), 9);
    if (strstr(flags, "--json")) {
        ASSERT_CONTAINS(out, "\"end\": \"max_tokens\"");
        ASSERT_CONTAINS(out, "\"tool_calls\": 0");
    } else {
        ASSERT_CONTAINS(err, "vigil: the model's answer was cut by max_tokens inside a tool call");
        ASSERT_CONTAINS(err, "raise model.max_tokens");
    }
    ASSERT_EQ(vg_test_server_count(srv), 1); /* no result went back: the call never ran */
    vg_test_server_stop(srv);
}

TEST(a_turn_cut_inside_a_tool_call_exits_with_the_provider_status)
{
    cut_turn_exits_provider_class("openai", openai_cut_sse, openai_done, "");
    cut_turn_exits_provider_class("openai", openai_cut_sse, openai_done, "--json");
    cut_turn_exits_provider_class("anthropic", anthropic_cut_sse, anthropic_done, "");
    cut_turn_exits_provider_class("anthropic", anthropic_cut_sse, anthropic_done, "--json");
}

/* A server that ignores `stream: true`: its JSON answer is the reply of the streamed turn. */
TEST(a_json_answer_to_the_streamed_turn_is_the_reply)
{
    const char *providers[] = {"openai", "anthropic"};
    const char *bodies[] = {openai_done, anthropic_done};
    for (int i = 0; i < 2; i++) {
        struct vg_ts_response rs[] = {{.headers = JSON_HEADERS, .body = bodies[i]}};
        struct vg_test_server *srv = serve(providers[i], rs, 1);
        char args[256];
        snprintf(args, sizeof args, "chat %s -m hello", agent);
        ASSERT_EQ(vigil(args), 0);
        ASSERT_STREQ(out, "all done\n");
        ASSERT_CONTAINS(vg_test_server_request(srv, 0)->body, "\"stream\":true");
        vg_test_server_stop(srv);
    }
}

/* A used-up quota is not waited out: one request, exit 9, and the line says to see billing. */
TEST(a_used_up_quota_fails_at_once_pointing_at_billing)
{
    struct vg_ts_response openai[] = {
        {.status = 429,
         .headers = JSON_HEADERS "retry-after: 1\r\n",
         .body = "{\"error\":{\"message\":\"You exceeded your current quota, please check your "
                 "plan and billing details.\",\"type\":\"insufficient_quota\",\"param\":null,"
                 "\"code\":\"insufficient_quota\"}}"}};
    struct vg_ts_response anthropic[] = {
        {.status = 402,
         .headers = JSON_HEADERS,
         .body = "{\"type\":\"error\",\"error\":{\"type\":\"billing_error\",\"message\":"
                 "\"Your credit balance is too low to access the Anthropic API.\"}}"}};
    const char *providers[] = {"openai", "anthropic"};
    const struct vg_ts_response *rs[] = {openai, anthropic};
    for (int i = 0; i < 2; i++) {
        struct vg_test_server *srv = serve(providers[i], rs[i], 1);
        char args[256];
        snprintf(args, sizeof args, "chat %s -m hello", agent);
        ASSERT_EQ(vigil(args), 9);
        ASSERT_CONTAINS(err, "the account's quota or credit is used up");
        ASSERT_CONTAINS(err, "check the plan and billing with the provider");
        ASSERT_EQ(vg_test_server_count(srv), 1);
        vg_test_server_stop(srv);
    }
}

int main(void)
{
    if (!getenv("VIGIL_CLI"))
        TEST_FAIL_("VIGIL_CLI is not set (run through ctest)");
    snprintf(dir, sizeof dir, "%s", vg_test_tmpdir("cli_chat_provider_wire"));
    char store[4200], config[4200];
    snprintf(store, sizeof store, "%s/vigil.db", dir);
    snprintf(config, sizeof config, "%s/config.yaml", dir);
    ASSERT_OK(vg_fs_write_file(config, "{}\n", 3, E));
    setenv("VIGIL_STORE", store, 1);
    setenv("VIGIL_CONFIG", config, 1);
    setenv("OPENAI_API_KEY", "sk-test", 1);
    setenv("ANTHROPIC_API_KEY", "sk-ant-test", 1);
    setenv("VIGIL_MODEL_MAX_RETRIES", "2", 1);
    unsetenv("XDG_DATA_HOME");
    ASSERT_EQ(vigil("init"), 0);
    ASSERT_EQ(vigil("agent create --name Pal --prompt 'You help.'"), 0);
    snprintf(agent, sizeof agent, "%.*s", (int)strcspn(out, "\n"), out);
    RUN(a_json_answer_to_the_streamed_turn_is_the_reply);
    RUN(a_used_up_quota_fails_at_once_pointing_at_billing);
    RUN(a_turn_cut_inside_a_tool_call_exits_with_the_provider_status);
    return 0;
}
