/*
 * test_mcp_http.c: the Streamable HTTP transport against the real everything server from npm
 * (scripts/npm.sh), started in its streamableHttp mode on a free loopback port: initialize and
 * its session id, tools/list, tools/call answered as SSE streams (a priming event with empty
 * data first, progress notifications before the response), a session the server no longer
 * knows (the server restarted) initialized again, and the same server's tools as vigil tools
 * through the gate; and vigil's own HTTP fault server for a stream cut before its response
 * and a 404 for a forgotten session. Skips (77) without the npm server (after the fault
 * server's test), fails when VIGIL_REQUIRE_MCP=1.
 */
#include "tool/tool_helpers.h"

#include "mcp/mcp.h"
#include "mcp/mcp_helpers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static char everything[1024], cfg_path[1100];
static int port;
static pid_t server_pid;
static const char *server_argv[4]; /* what start_server runs */

/* A port nothing listens on now (the kernel's pick for an ephemeral bind). */
static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT(fd >= 0);
    ASSERT(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    ASSERT(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* Start server_argv on port and wait for its "listening" line on stderr (60 s at most). */
static void start_server(void)
{
    int errp[2];
    char portstr[16];
    ASSERT(pipe(errp) == 0);
    snprintf(portstr, sizeof portstr, "%d", port);
    server_pid = fork();
    ASSERT(server_pid >= 0);
    if (server_pid == 0) {
        setpgid(0, 0);
        dup2(errp[1], 2);
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0), dup2(null, 1);
        setenv("PORT", portstr, 1);
        execvp(server_argv[0], (char *const *)server_argv);
        _exit(127);
    }
    close(errp[1]);
    char buf[4096];
    size_t got = 0;
    for (;;) {
        struct pollfd p = {.fd = errp[0], .events = POLLIN};
        ASSERT(poll(&p, 1, 60000) == 1);
        ssize_t n = read(errp[0], buf + got, sizeof buf - 1 - got);
        ASSERT(n > 0);
        got += (size_t)n;
        buf[got] = '\0';
        if (strstr(buf, "listening on port"))
            break;
        ASSERT(got < sizeof buf - 1);
    }
    close(errp[0]);
}

static void stop_server(void)
{
    int st;
    if (server_pid <= 0)
        return;
    kill(-server_pid, SIGKILL);
    waitpid(server_pid, &st, 0);
    server_pid = 0;
}

TEST(everything_over_streamable_http)
{
    char text[512];
    snprintf(text, sizeof text,
             "{\"web\": {\"url\": \"http://127.0.0.1:%d/mcp\", \"headers\": "
             "{\"X-Test\": \"${HOME}\"}}}",
             port);
    json_t *j = json_loads(text, 0, NULL);
    struct vg_mcp_conf *conf = NULL;
    struct vg_mcp_client *c = NULL;
    struct vg_mcp_options o = {.log = mcp_quiet};
    vigil_error err = {0};
    json_t *tools = NULL;
    ASSERT_EQ(vg_mcp_conf_parse(j, &conf, &err), VIGIL_OK);
    json_decref(j);
    ASSERT_EQ(vg_mcp_client_new(&conf->servers[0], &o, &c, &err), VIGIL_OK);
    ASSERT_EQ(vg_mcp_client_tools(c, &tools, &err), VIGIL_OK);
    ASSERT(json_array_size(tools) >= 13);
    json_t *info = vg_mcp_client_server_info(c);
    ASSERT_STREQ(json_string_value(json_object_get(info, "protocolVersion")), "2025-11-25");
    json_t *res = mcp_call(c, "echo", "{\"message\": \"over http\"}");
    ASSERT_STREQ(mcp_first_text(res), "Echo: over http");
    json_decref(res);
    /* Progress notifications on the stream before the response. */
    res = mcp_call(c, "trigger-long-running-operation", "{\"duration\": 0.2, \"steps\": 2}");
    ASSERT(strstr(mcp_first_text(res), "Long running operation completed"));
    json_decref(res);
    res = mcp_call(c, "get-structured-content", "{\"location\": \"Chicago\"}");
    ASSERT(json_is_object(json_object_get(res, "structuredContent")));
    json_decref(res);
    /* The server restarts: our session is unknown to it; the client initializes again. */
    stop_server();
    start_server();
    res = mcp_call(c, "echo", "{\"message\": \"again\"}");
    ASSERT_STREQ(mcp_first_text(res), "Echo: again");
    json_decref(res);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

/* vigil's own HTTP fault server (tests/mcp/fault_http_server.js): a stream cut before its
 * response fails that call without a hang and the next call works; a session the server
 * forgot (404 "Session not found") is initialized again and the call resent. */
TEST(a_cut_stream_and_an_expired_session)
{
    char text[512];
    snprintf(text, sizeof text,
             "{\"f\": {\"url\": \"http://127.0.0.1:%d/mcp\", \"timeout_ms\": "
             "5000}}",
             port);
    json_t *j = json_loads(text, 0, NULL);
    struct vg_mcp_conf *conf = NULL;
    struct vg_mcp_client *c = NULL;
    struct vg_mcp_options o = {.log = mcp_quiet};
    vigil_error err = {0};
    json_t *res = NULL;
    ASSERT_EQ(vg_mcp_conf_parse(j, &conf, &err), VIGIL_OK);
    json_decref(j);
    ASSERT_EQ(vg_mcp_client_new(&conf->servers[0], &o, &c, &err), VIGIL_OK);
    res = mcp_call(c, "ok", "{}");
    ASSERT_STREQ(mcp_first_text(res), "ok: 1"); /* after a progress event on the stream */
    json_decref(res);
    vigil_code rc = vg_mcp_client_call(c, "cut", NULL, &res, &err);
    ASSERT(rc == VIGIL_ENETWORK || rc == VIGIL_EPROVIDER);
    res = mcp_call(c, "ok", "{}");
    ASSERT_STREQ(mcp_first_text(res), "ok: 2");
    json_decref(res);
    res = mcp_call(c, "expire", "{}");
    json_decref(res);
    res = mcp_call(c, "inits", "{}"); /* 404 first: initialized again, then answered */
    ASSERT_STREQ(mcp_first_text(res), "inits: 2");
    json_decref(res);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

/* Declared in the config file by url: its tools are vigil tools through the gate. */
TEST(http_server_tools_pass_the_gate)
{
    struct test_rt t;
    char a[37], *out = NULL;
    vigil_error err = {0};
    FILE *f = fopen(cfg_path, "w");
    ASSERT(f);
    fprintf(f, "{\"mcp_servers\": {\"web\": {\"url\": \"http://127.0.0.1:%d/mcp\"}}}", port);
    fclose(f);
    setenv("VIGIL_CONFIG", cfg_path, 1);
    test_rt_open(&t, "mcp_http_gate");
    make_agent(&t, "{\"tools\": [\"web__*\"]}", a);
    ASSERT_EQ(vigil_tool_call(t.rt, a, "run-1", "web__get_sum", "{\"a\": 2, \"b\": 3}", &out, &err),
              VIGIL_OK);
    ASSERT(strstr(out, "The sum of 2 and 3 is 5"));
    vigil_free(out);
    ASSERT_EQ(vigil_tool_list_for_agent(t.rt, a, &out, &err), VIGIL_OK);
    ASSERT(strstr(out, "\"source\":\"mcp:web\""));
    vigil_free(out);
    test_rt_close(&t);
    unsetenv("VIGIL_CONFIG");
}

int main(void)
{
    char fault[1200];
    signal(SIGPIPE, SIG_IGN);
    atexit(stop_server); /* a failed test exits: no server left behind */
    mcp_need_node();
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", vg_test_tmpdir("mcp_http"));
    snprintf(fault, sizeof fault, "%s/tests/mcp/fault_http_server.js", VIGIL_SOURCE_DIR);
    server_argv[0] = "node", server_argv[1] = fault, server_argv[2] = NULL;
    port = free_port();
    start_server();
    RUN(a_cut_stream_and_an_expired_session);
    stop_server();
    mcp_npm_bin("mcp-server-everything", everything, sizeof everything);
    server_argv[0] = everything, server_argv[1] = "streamableHttp", server_argv[2] = NULL;
    port = free_port();
    start_server();
    RUN(everything_over_streamable_http);
    RUN(http_server_tools_pass_the_gate);
    stop_server();
    return 0;
}
