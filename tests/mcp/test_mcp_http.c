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

/* proves: S2-024 */
TEST(everything_over_streamable_http)
{
    char text[512];
    snprintf(text, sizeof text,
             "{\"web\": {\"url\": \"http://127.0.0.1:%d/mcp\", \"headers\": "
             "{\"X-Test\": \"${HOME}\"}}}",
             port);
    struct vg_mcp_conf *conf = mcp_conf_of(text);
    struct vg_mcp_client *c = NULL;
    struct vg_mcp_options o = {.log = mcp_quiet};
    vigil_error err = {0};
    json_t *tools = NULL;
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
 * forgot (404 "Session not found", or the SDK's 400 "No valid session ID") is initialized
 * again and the call resent. */
TEST(a_cut_stream_and_an_expired_session)
{
    char text[512];
    snprintf(text, sizeof text,
             "{\"f\": {\"url\": \"http://127.0.0.1:%d/mcp\", \"timeout_ms\": "
             "5000}}",
             port);
    struct vg_mcp_conf *conf = mcp_conf_of(text);
    struct vg_mcp_client *c = NULL;
    struct vg_mcp_options o = {.log = mcp_quiet};
    vigil_error err = {0};
    json_t *res = NULL;
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
    /* What the TypeScript SDK's servers answer instead of 404: 400 "No valid session ID". */
    res = mcp_call(c, "expire400", "{}");
    json_decref(res);
    res = mcp_call(c, "inits", "{}");
    ASSERT_STREQ(mcp_first_text(res), "inits: 3");
    json_decref(res);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

/* Calls reuse one keep-alive connection: the POST's stream is read to its end, not cut at the
 * response (which closed the connection, so every call connected anew). A server that holds
 * its stream open after the response is cut a moment later: the call still answers, well within
 * its timeout (the held stream lasts a minute, the timeout is 20 s). */
TEST(calls_keep_their_connection_and_a_held_stream_is_cut)
{
    char text[512];
    snprintf(text, sizeof text,
             "{\"f\": {\"url\": \"http://127.0.0.1:%d/mcp\", \"timeout_ms\": 20000}}", port);
    json_t *j = json_loads(text, 0, NULL), *res = NULL;
    struct vg_mcp_conf *conf = NULL;
    struct vg_mcp_client *c = NULL;
    struct vg_mcp_options o = {.log = mcp_quiet, .no_own_stream = 1};
    vigil_error err = {0};
    ASSERT_EQ(vg_mcp_conf_parse(j, &conf, &err), VIGIL_OK);
    json_decref(j);
    ASSERT_EQ(vg_mcp_client_new(&conf->servers[0], &o, &c, &err), VIGIL_OK);
    res = mcp_call(c, "conns", "{}");
    int before = 0;
    ASSERT(sscanf(mcp_first_text(res), "conns: %d", &before) == 1);
    json_decref(res);
    for (int i = 0; i < 5; i++)
        json_decref(mcp_call(c, "ok", "{}")); /* SSE answers, with a progress event first */
    res = mcp_call(c, "conns", "{}");
    char want[32];
    snprintf(want, sizeof want, "conns: %d", before);
    ASSERT_STREQ(mcp_first_text(res), want); /* not one more */
    json_decref(res);
    res = mcp_call(c, "hold", "{}");
    ASSERT_STREQ(mcp_first_text(res), "held");
    json_decref(res);
    res = mcp_call(c, "hold", "{}"); /* now known to hold: cut at the response at once */
    ASSERT_STREQ(mcp_first_text(res), "held");
    json_decref(res);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

static void unset_proxies(void)
{
    const char *vars[] = {"http_proxy", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"};
    for (size_t i = 0; i < VG_ARRAY_LEN(vars); i++)
        unsetenv(vars[i]);
}

/* A client reads the proxy settings of the environment once, at its first POST (libcurl would
 * read five variables at every request): http_proxy is used (here a port nothing listens on,
 * so the call fails), no_proxy is honoured, and what the environment says after a client's
 * first POST does not change that client's. */
TEST(a_client_reads_the_proxy_from_the_environment_once)
{
    char text[512], proxy[64];
    struct vg_mcp_options o = {.log = mcp_quiet, .no_own_stream = 1};
    struct vg_mcp_client *refused = NULL, *c = NULL;
    vigil_error err = {0};
    json_t *res = NULL;
    snprintf(text, sizeof text,
             "{\"f\": {\"url\": \"http://127.0.0.1:%d/mcp\", \"timeout_ms\": 5000}}", port);
    struct vg_mcp_conf *conf = mcp_conf_of(text);
    unset_proxies();
    snprintf(proxy, sizeof proxy, "http://127.0.0.1:%d", free_port());
    setenv("http_proxy", proxy, 1);
    ASSERT_EQ(vg_mcp_client_new(&conf->servers[0], &o, &refused, &err), VIGIL_OK);
    ASSERT(vg_mcp_client_call(refused, "ok", NULL, &res, &err) != VIGIL_OK);
    setenv("no_proxy", "127.0.0.1", 1);
    ASSERT_EQ(vg_mcp_client_new(&conf->servers[0], &o, &c, &err), VIGIL_OK);
    res = mcp_call(c, "ok", "{}");
    ASSERT(!strncmp(mcp_first_text(res), "ok", 2));
    json_decref(res);
    unsetenv("no_proxy"); /* the proxy alone would refuse: this client read its settings */
    res = mcp_call(c, "ok", "{}");
    ASSERT(!strncmp(mcp_first_text(res), "ok", 2));
    json_decref(res);
    unset_proxies();
    vg_mcp_client_free(refused);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

/* The client's notes go to a pipe the test waits on (the listener's thread writes them). */
static int log_pipe[2] = {-1, -1};

static void log_to_pipe(void *user, const char *server, const char *line)
{
    (void)user, (void)server;
    if (write(log_pipe[1], line, strlen(line)) < 0 || write(log_pipe[1], "\n", 1) < 0)
        return; /* the pipe full: the test that waits would fail on its own */
}

/* Wait (60 s at most) for a note holding needle. */
static void wait_note(const char *needle)
{
    static char seen[65536];
    static size_t len;
    for (;;) {
        char *hit = strstr(seen, needle);
        if (hit) { /* drop what was read up to and with the hit */
            size_t used = (size_t)(hit - seen) + strlen(needle);
            memmove(seen, seen + used, len - used + 1);
            len -= used;
            return;
        }
        struct pollfd p = {.fd = log_pipe[0], .events = POLLIN};
        ASSERT(poll(&p, 1, 60000) == 1);
        if (len > sizeof seen / 2) /* keep the tail only */
            memmove(seen, seen + len - 1024, 1025), len = 1024;
        ssize_t n = read(log_pipe[0], seen + len, sizeof seen - 1 - len);
        ASSERT(n > 0);
        len += (size_t)n;
        seen[len] = '\0';
    }
}

static struct vg_mcp_client *url_client(struct vg_mcp_conf **conf, const char *headers)
{
    char text[512];
    struct vg_mcp_client *c = NULL;
    struct vg_mcp_options o = {.log = log_to_pipe};
    vigil_error err = {0};
    snprintf(text, sizeof text,
             "{\"f\": {\"url\": \"http://127.0.0.1:%d/mcp\", \"timeout_ms\": 5000%s%s}}", port,
             headers ? ", \"headers\": " : "", headers ? headers : "");
    *conf = mcp_conf_of(text);
    ASSERT_EQ(vg_mcp_client_new(&(*conf)->servers[0], &o, &c, &err), VIGIL_OK);
    return c;
}

/* The server's own stream (the GET of 2025-11-25, MCP-25): a change of tools announced between
 * requests arrives on it and is listed at the next look; when the stream drops, the client
 * reconnects after the server's retry: and sends the last event id it saw (Last-Event-ID). */
TEST(the_get_stream_carries_changes_and_resumes_after_a_drop)
{
    struct vg_mcp_conf *conf = NULL;
    struct vg_mcp_client *c = url_client(&conf, NULL);
    vigil_error err = {0};
    json_t *tools = NULL;
    ASSERT_EQ(vg_mcp_client_tools(c, &tools, &err), VIGIL_OK);
    ASSERT_EQ(vg_mcp_client_tools(c, &tools, &err), VIGIL_OK); /* the start counted as a change */
    size_t before = json_array_size(tools);
    ASSERT_EQ(vg_mcp_client_tools_changed(c), 0);
    json_t *res = mcp_call(c, "announce", "{}"); /* the answer's stream says nothing of it */
    json_decref(res);
    wait_note("announced a change of its tools on its own stream");
    ASSERT_EQ(vg_mcp_client_tools_changed(c), 1);
    ASSERT_EQ(vg_mcp_client_tools(c, &tools, &err), VIGIL_OK);
    ASSERT_EQ(json_array_size(tools), before + 1);
    res = mcp_call(c, "dropget", "{}");
    char want[64];
    snprintf(want, sizeof want, "last-event-id: %s", mcp_first_text(res));
    ASSERT(!strncmp(mcp_first_text(res), "ev-", 3));
    json_decref(res);
    res = mcp_call(c, "lastid", "{}"); /* answered once the client has reconnected */
    ASSERT_STREQ(mcp_first_text(res), want);
    json_decref(res);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

/* A refused credential is the code table's auth or permission failure, not a server failure:
 * 401 EAUTH, 403 EDENIED (exit statuses 9 and 10, docs/cli.md). */
TEST(refused_credentials_are_auth_and_permission_failures)
{
    struct vg_mcp_conf *conf = NULL;
    struct vg_mcp_client *c = url_client(&conf, "{\"Authorization\": \"Bearer wrong\"}");
    vigil_error err = {0};
    json_t *tools = NULL;
    ASSERT_EQ(vg_mcp_client_tools(c, &tools, &err), VIGIL_EAUTH);
    ASSERT(strstr(err.message, "HTTP 401"));
    ASSERT(strstr(err.message, "headers"));
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
    c = url_client(&conf, "{\"Authorization\": \"Bearer forbidden\"}");
    ASSERT_EQ(vg_mcp_client_tools(c, &tools, &err), VIGIL_EDENIED);
    ASSERT_EQ(vigil_code_exit_status(VIGIL_EDENIED), 10);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

/* A transport failure names the server, not only its URL: with several servers on one host the
 * name is what the user has (trial E26 c). Port 1 of the loopback: nothing listens there. */
TEST(a_transport_failure_names_the_server)
{
    struct vg_mcp_conf *conf = mcp_conf_of("{\"remote\": {\"url\": \"http://127.0.0.1:1/mcp\", "
                                           "\"timeout_ms\": 5000}}");
    struct vg_mcp_client *c = NULL;
    struct vg_mcp_options o = {.log = log_to_pipe};
    vigil_error err = {0};
    json_t *tools = NULL;
    ASSERT_EQ(vg_mcp_client_new(&conf->servers[0], &o, &c, &err), VIGIL_OK);
    ASSERT_NE(vg_mcp_client_tools(c, &tools, &err), VIGIL_OK);
    static const char want[] = "MCP server \"remote\": ";
    if (strncmp(err.message, want, sizeof want - 1) || !strstr(err.message, "127.0.0.1:1"))
        TEST_FAIL_("%s", err.message);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

/* The everything server sends its simulated log messages, which belong to no request, on the
 * GET stream: they reach the client between its calls. */
TEST(everything_speaks_on_its_get_stream)
{
    struct vg_mcp_conf *conf = NULL;
    struct vg_mcp_client *c = url_client(&conf, NULL);
    json_t *res = mcp_call(c, "toggle-simulated-logging", "{}");
    json_decref(res);
    wait_note("on its own stream: ");
    res = mcp_call(c, "toggle-simulated-logging", "{}");
    json_decref(res);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

/* Revision 2026-07-28 over HTTP (our fixture server in its HTTP mode): subscriptions/listen
 * holds a stream of its own, on which a tool added later is announced; input_required is
 * answered in follow-up rounds (MCP-49, MCP-50). */
TEST(modern_over_http_listens_and_answers_input_rounds)
{
    struct vg_mcp_conf *conf = NULL;
    struct vg_mcp_client *c = url_client(&conf, NULL);
    vigil_error err = {0};
    json_t *tools = NULL;
    ASSERT_EQ(vg_mcp_client_tools(c, &tools, &err), VIGIL_OK);
    ASSERT_EQ(json_array_size(tools), 5);
    ASSERT(json_object_get(vg_mcp_client_server_info(c), "supportedVersions"));
    json_t *res = mcp_call(c, "grow", "{}");
    json_decref(res);
    wait_note("announced a change of its tools on its own stream");
    ASSERT_EQ(vg_mcp_client_tools(c, &tools, &err), VIGIL_OK);
    ASSERT_EQ(json_array_size(tools), 6);
    res = mcp_call(c, "ask", "{}");
    ASSERT_STREQ(mcp_first_text(res), "q={\"action\":\"decline\"} r={\"roots\":[]}");
    json_decref(res);
    res = mcp_call(c, "methods", "{}");
    ASSERT(strstr(mcp_first_text(res), "subscriptions/listen"));
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
    ASSERT(pipe(log_pipe) == 0);
    ASSERT(fcntl(log_pipe[1], F_SETFL, O_NONBLOCK) == 0); /* a note never blocks the client */
    atexit(stop_server); /* a failed test exits: no server left behind */
    mcp_need_node();
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", vg_test_tmpdir("mcp_http"));
    snprintf(fault, sizeof fault, "%s/tests/mcp/fault_http_server.js", VIGIL_SOURCE_DIR);
    server_argv[0] = "node", server_argv[1] = fault, server_argv[2] = NULL;
    port = free_port();
    start_server();
    RUN(a_cut_stream_and_an_expired_session);
    RUN(calls_keep_their_connection_and_a_held_stream_is_cut);
    RUN(a_client_reads_the_proxy_from_the_environment_once);
    RUN(the_get_stream_carries_changes_and_resumes_after_a_drop);
    RUN(refused_credentials_are_auth_and_permission_failures);
    RUN(a_transport_failure_names_the_server);
    stop_server();
    char modern[1200];
    snprintf(modern, sizeof modern, "%s/tests/mcp/modern_server.js", VIGIL_SOURCE_DIR);
    server_argv[0] = "node", server_argv[1] = modern, server_argv[2] = NULL;
    port = free_port();
    start_server();
    RUN(modern_over_http_listens_and_answers_input_rounds);
    stop_server();
    mcp_npm_bin("mcp-server-everything", everything, sizeof everything);
    server_argv[0] = everything, server_argv[1] = "streamableHttp", server_argv[2] = NULL;
    port = free_port();
    start_server();
    RUN(everything_over_streamable_http);
    RUN(everything_speaks_on_its_get_stream);
    RUN(http_server_tools_pass_the_gate);
    stop_server();
    return 0;
}
