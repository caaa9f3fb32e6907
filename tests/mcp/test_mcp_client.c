/*
 * test_mcp_client.c: the MCP client against vigil's fault server (tests/mcp/fault_server.js):
 * lazy start, pagination, list_changed, a crash mid-call and the restart after its backoff, a
 * hang that times out and is cancelled, garbage lines and a server ping with id 0, a 10 MB
 * answer that is dropped while the connection stays usable, progress, and a server that
 * ignores stdin closing and SIGTERM.
 */
#include "helpers/test.h"

#include "mcp/mcp.h"
#include "mcp/mcp_helpers.h"

#include <signal.h>
#include <sys/wait.h>

static struct step_clock clk;
static char logged[8192];

static void keep_log(void *user, const char *server, const char *line)
{
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof logged - n, "%s: %s\n", server, line);
}

static struct vg_mcp_conf *fault_conf(const char *extra_env)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"fault\": {\"command\": [\"node\", \"%s/tests/mcp/fault_server.js\"], "
             "\"timeout_ms\": 1000, \"max_message_bytes\": 1048576, \"env\": {%s}}}",
             VIGIL_SOURCE_DIR, extra_env ? extra_env : "");
    return mcp_conf_of(text);
}

static struct vg_mcp_client *client(struct vg_mcp_conf *conf)
{
    struct vg_mcp_client *c = NULL;
    struct vg_mcp_options o = {.clock = &clk.base, .log = keep_log, .stop_grace_ms = 200};
    vigil_error err = {0};
    ASSERT_EQ(vg_mcp_client_new(&conf->servers[0], &o, &c, &err), VIGIL_OK);
    return c;
}

static char *call_text(struct vg_mcp_client *c, const char *tool, vigil_code want, vigil_error *err)
{
    json_t *res = NULL;
    vigil_code rc = vg_mcp_client_call(c, tool, NULL, &res, err);
    if (rc != want)
        TEST_FAIL_("call %s: %s (%s)", tool, vigil_code_name(rc), err->message);
    if (rc)
        return NULL;
    char *t = vg_strdup(json_string_value(
        json_object_get(json_array_get(json_object_get(res, "content"), 0), "text")));
    json_decref(res);
    return t;
}

TEST(starts_on_first_use_and_lists_every_page)
{
    struct vg_mcp_conf *conf = fault_conf(NULL);
    struct vg_mcp_client *c = client(conf);
    json_t *tools = NULL;
    vigil_error err = {0};
    ASSERT_STREQ(vg_mcp_client_state(c), "not started");
    ASSERT_EQ(vg_mcp_client_pid(c), 0);
    ASSERT_EQ(vg_mcp_client_tools(c, &tools, &err), VIGIL_OK);
    ASSERT_STREQ(vg_mcp_client_state(c), "running");
    /* 9 tools in pages of 2: every page was fetched by nextCursor. */
    ASSERT_EQ(json_array_size(tools), 9);
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(tools, 8), "name")), "quit");
    ASSERT_STREQ(json_string_value(json_object_get(
                     json_object_get(vg_mcp_client_server_info(c), "serverInfo"), "name")),
                 "fault");
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

/* proves: S2-027 */
TEST(a_crash_mid_call_fails_the_call_and_restarts_after_backoff)
{
    struct vg_mcp_conf *conf = fault_conf(NULL);
    struct vg_mcp_client *c = client(conf);
    vigil_error err = {0};
    char *t = call_text(c, "ok", VIGIL_OK, &err);
    ASSERT_STREQ(t, "ok: 1");
    vg_free(t);
    int pid = vg_mcp_client_pid(c);
    call_text(c, "crash", VIGIL_ENETWORK, &err);
    if (!strstr(err.message, "exited with status 3"))
        TEST_FAIL_("%s", err.message);
    ASSERT(strstr(err.message, "crashing now")); /* its stderr, drained */
    ASSERT_STREQ(vg_mcp_client_state(c), "down");
    ASSERT_EQ(kill(pid, 0), -1); /* reaped, not a zombie */
    /* A call within the backoff waits out its short rest (250 ms, under the call's 1000 ms
     * timeout: trial E26 e), then starts a new server. */
    int64_t crashed_ns = clk.mono_ns;
    t = call_text(c, "ok", VIGIL_OK, &err);
    ASSERT_STREQ(t, "ok: 1"); /* a fresh process counts from 1 */
    vg_free(t);
    ASSERT(clk.mono_ns - crashed_ns >= 250 * 1000000LL); /* waited on the clock port */
    ASSERT_NE(vg_mcp_client_pid(c), pid);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

TEST(a_backoff_longer_than_the_call_may_wait_fails_the_call_at_once)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"fault\": {\"command\": [\"node\", \"%s/tests/mcp/fault_server.js\"], "
             "\"timeout_ms\": 200}}",
             VIGIL_SOURCE_DIR);
    struct vg_mcp_conf *conf = mcp_conf_of(text);
    struct vg_mcp_client *c = client(conf);
    vigil_error err = {0};
    call_text(c, "crash", VIGIL_ENETWORK, &err);
    int64_t crashed_ns = clk.mono_ns;
    /* 250 ms left, the call may wait 200: the server stays down, the call fails now. */
    call_text(c, "ok", VIGIL_ENETWORK, &err);
    ASSERT(strstr(err.message, "next start in 250 ms"));
    ASSERT_EQ(clk.mono_ns, crashed_ns); /* nothing waited */
    step_clock_advance(&clk, 250);
    char *t = call_text(c, "ok", VIGIL_OK, &err);
    ASSERT_STREQ(t, "ok: 1");
    vg_free(t);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

TEST(a_hang_times_out_by_the_clock_and_is_cancelled)
{
    struct vg_mcp_conf *conf = fault_conf(NULL);
    struct vg_mcp_client *c = client(conf);
    vigil_error err = {0};
    char *t = call_text(c, "ok", VIGIL_OK, &err);
    vg_free(t);
    /* Every clock read moves 100 ms: the 1000 ms timeout passes in about ten polls, and the
     * ping after it (answered at once by this server, busy with nothing) has as many. */
    clk.step_ms = 100;
    call_text(c, "hang", VIGIL_ETIMEOUT, &err);
    clk.step_ms = 0;
    ASSERT(strstr(err.message, "did not answer within 1000 ms"));
    ASSERT_STREQ(vg_mcp_client_state(c), "running"); /* it answered the ping: it works */
    /* The hang was request id 3 (0 server/discover, 1 initialize, 2 ok): the server heard it
     * was cancelled. */
    t = call_text(c, "cancelled", VIGIL_OK, &err);
    ASSERT_STREQ(t, "cancelled: [3]");
    vg_free(t);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

TEST(a_server_that_exits_between_calls_starts_again_at_once)
{
    struct vg_mcp_conf *conf = fault_conf(NULL);
    struct vg_mcp_client *c = client(conf);
    vigil_error err = {0};
    char *t = call_text(c, "quit", VIGIL_OK, &err);
    ASSERT_STREQ(t, "bye");
    vg_free(t);
    siginfo_t info;
    ASSERT_EQ(waitid(P_PID, (id_t)vg_mcp_client_pid(c), &info, WEXITED | WNOWAIT), 0);
    t = call_text(c, "ok", VIGIL_OK, &err); /* no failed call, no backoff: a new process */
    ASSERT_STREQ(t, "ok: 1");
    vg_free(t);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

/* proves: S2-027 */
TEST(repeated_timeouts_open_the_breaker)
{
    struct vg_mcp_conf *conf = fault_conf(NULL);
    struct vg_mcp_client *c = client(conf);
    vigil_error err = {0};
    char *t = call_text(c, "ok", VIGIL_OK, &err);
    vg_free(t);
    int pid = vg_mcp_client_pid(c);
    clk.step_ms = 100; /* a server that answers the ping after each: kept until the third */
    call_text(c, "hang", VIGIL_ETIMEOUT, &err);
    call_text(c, "hang", VIGIL_ETIMEOUT, &err);
    ASSERT_STREQ(vg_mcp_client_state(c), "running");
    call_text(c, "hang", VIGIL_ETIMEOUT, &err); /* the third in a row */
    clk.step_ms = 0;
    ASSERT_STREQ(vg_mcp_client_state(c), "down");
    ASSERT_EQ(kill(pid, 0), -1); /* the hung server was stopped */
    ASSERT(strstr(logged, "3 requests in a row got no answer (next start in 250 ms)"));
    /* Open: the next call does not wait for a timeout of the hung server; it waits out the
     * short backoff and gets a new process. */
    t = call_text(c, "ok", VIGIL_OK, &err);
    ASSERT_STREQ(t, "ok: 1");
    ASSERT_NE(vg_mcp_client_pid(c), pid);
    vg_free(t);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

/* A server stuck in a call (its one thread blocked: it answers nothing, not even a ping) costs
 * one timeout, not three (trial L5): the ping after the timeout goes unanswered, the server is
 * stopped at once, and the next call gets a new process after the short backoff instead of
 * waiting out a second timeout. Without the ping the server stays "running" and the next call
 * times out too. */
TEST(a_stuck_stdio_server_costs_one_timeout_and_is_restarted)
{
    struct vg_mcp_conf *conf = fault_conf(NULL);
    struct vg_mcp_client *c = client(conf);
    vigil_error err = {0};
    char *t = call_text(c, "ok", VIGIL_OK, &err);
    vg_free(t);
    int pid = vg_mcp_client_pid(c);
    logged[0] = '\0';
    clk.step_ms = 100;
    call_text(c, "stuck", VIGIL_ETIMEOUT, &err);
    clk.step_ms = 0;
    ASSERT(strstr(err.message, "did not answer within 1000 ms"));
    ASSERT_STREQ(vg_mcp_client_state(c), "down");
    ASSERT_EQ(kill(pid, 0), -1); /* the stuck server was stopped */
    ASSERT(strstr(logged, "a request got no answer in 1000 ms, nor a ping in 1000 ms: stuck "
                          "(next start in 250 ms)"));
    t = call_text(c, "ok", VIGIL_OK, &err); /* a new process, no second timeout */
    ASSERT_STREQ(t, "ok: 1");
    ASSERT_NE(vg_mcp_client_pid(c), pid);
    vg_free(t);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

TEST(garbage_lines_and_a_server_ping_with_id_0)
{
    struct vg_mcp_conf *conf = fault_conf(NULL);
    struct vg_mcp_client *c = client(conf);
    vigil_error err = {0};
    logged[0] = '\0';
    char *t = call_text(c, "garbage", VIGIL_OK, &err);
    ASSERT_STREQ(t, "after garbage, ping answered: true");
    vg_free(t);
    ASSERT(strstr(logged, "not a JSON-RPC message"));
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

TEST(a_10mb_answer_is_dropped_and_the_connection_goes_on)
{
    struct vg_mcp_conf *conf = fault_conf(NULL);
    struct vg_mcp_client *c = client(conf);
    vigil_error err = {0};
    call_text(c, "huge", VIGIL_ETOOBIG, &err);
    ASSERT(strstr(err.message, "more than 1048576 bytes"));
    char *t = call_text(c, "ok", VIGIL_OK, &err);
    ASSERT_STREQ(t, "ok: 2");
    vg_free(t);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

TEST(progress_and_unknown_tools)
{
    struct vg_mcp_conf *conf = fault_conf(NULL);
    struct vg_mcp_client *c = client(conf);
    vigil_error err = {0};
    json_t *res = NULL;
    char *t = call_text(c, "progress", VIGIL_OK, &err);
    ASSERT_STREQ(t, "progress sent");
    vg_free(t);
    ASSERT_EQ(vg_mcp_client_call(c, "nope", NULL, &res, &err), VIGIL_OK);
    ASSERT(json_is_true(json_object_get(res, "isError")));
    json_decref(res);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

TEST(a_server_that_ignores_stdin_closing_and_sigterm_is_killed)
{
    struct vg_mcp_conf *conf =
        fault_conf("\"FAULT_IGNORE_EOF\": \"1\", \"FAULT_IGNORE_TERM\": \"1\"");
    struct vg_mcp_client *c = client(conf);
    vigil_error err = {0};
    char *t = call_text(c, "ok", VIGIL_OK, &err);
    vg_free(t);
    int pid = vg_mcp_client_pid(c);
    vg_mcp_client_stop(c);
    ASSERT_EQ(kill(pid, 0), -1);
    ASSERT_STREQ(vg_mcp_client_state(c), "not started");
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

TEST(the_environment_is_minimal_plus_declared)
{
    /* The server sees only the inherited allow-list and what is declared, ${} interpolated. */
    setenv("VIGIL_TEST_SECRET", "s3cret", 1);
    setenv("VIGIL_NOT_PASSED", "x", 1);
    struct vg_mcp_conf *conf = fault_conf("\"TOKEN\": \"Bearer ${VIGIL_TEST_SECRET}\"");
    ASSERT(strstr(conf->servers[0].env[0], "${VIGIL_TEST_SECRET}")); /* kept uninterpolated */
    struct vg_mcp_client *c = client(conf);
    vigil_error err = {0};
    char *t = call_text(c, "env", VIGIL_OK, &err);
    json_t *seen = json_loads(t, 0, NULL);
    vg_free(t);
    ASSERT_STREQ(json_string_value(json_object_get(seen, "token")), "Bearer s3cret");
    size_t i;
    json_t *name;
    json_array_foreach (json_object_get(seen, "names"), i, name) {
        const char *n = json_string_value(name);
        if (strcmp(n, "HOME") && strcmp(n, "LOGNAME") && strcmp(n, "PATH") && strcmp(n, "SHELL") &&
            strcmp(n, "TERM") && strcmp(n, "USER") && strcmp(n, "TOKEN"))
            TEST_FAIL_("the server saw variable %s", n);
    }
    json_decref(seen);
    vg_mcp_client_free(c);
    char missing[130];
    char *s = vg_mcp_interpolate("a ${VIGIL_TEST_SECRET} b $${HOME}c", missing);
    ASSERT_STREQ(s, "a s3cret b ${HOME}c"); /* "$${" a literal "${" (trial E25) */
    vg_free(s);
    /* an unset variable is refused, named, as a command tool's is */
    ASSERT(vg_mcp_interpolate("a ${VIGIL_UNSET_X}c", missing) == NULL);
    ASSERT_STREQ(missing, "VIGIL_UNSET_X");
    s = vg_mcp_interpolate("a ${VIGIL_UNSET_X}c", NULL); /* headers: empty */
    ASSERT_STREQ(s, "a c");
    vg_free(s);
    vg_mcp_conf_free(conf);
}

/* Revision 2026-07-28, chosen by what the server answers: our modern fixture server answers
 * server/discover, so the client sends no initialize and puts _meta on every request (the
 * server refuses requests without it) and asks for tool-list changes with subscriptions/listen
 * (a tool the server adds later is then listed); resultType input_required is answered in
 * follow-up rounds, and a failure naming what vigil cannot give when it asks for sampling.
 * The fault server (legacy) answers server/discover with an error: it gets initialize. */
TEST(the_revision_is_chosen_by_what_the_server_answers)
{
    char text[1024];
    vigil_error err = {0};
    json_t *tools = NULL;
    snprintf(text, sizeof text,
             "{\"modern\": {\"command\": [\"node\", \"%s/tests/mcp/modern_server.js\"], "
             "\"timeout_ms\": 1000}}",
             VIGIL_SOURCE_DIR);
    struct vg_mcp_conf *conf = mcp_conf_of(text);
    struct vg_mcp_client *c = client(conf);
    ASSERT_EQ(vg_mcp_client_tools(c, &tools, &err), VIGIL_OK);
    ASSERT_EQ(json_array_size(tools), 5);
    json_t *info = vg_mcp_client_server_info(c);
    ASSERT(json_object_get(json_object_get(info, "_meta"), "io.modelcontextprotocol/serverInfo"));
    char *t = call_text(c, "methods", VIGIL_OK, &err);
    ASSERT_STREQ(t, "server/discover,subscriptions/listen,tools/list,tools/call");
    vg_free(t);
    /* Changes come through the subscription: a tool added later is listed at the next look
     * (the list taken as the server started counts as changed once: listed again here). */
    ASSERT_EQ(vg_mcp_client_tools(c, &tools, &err), VIGIL_OK);
    ASSERT_EQ(vg_mcp_client_tools_changed(c), 0);
    t = call_text(c, "grow", VIGIL_OK, &err);
    vg_free(t);
    ASSERT_EQ(vg_mcp_client_tools_changed(c), 1);
    ASSERT_EQ(vg_mcp_client_tools(c, &tools, &err), VIGIL_OK);
    ASSERT_EQ(json_array_size(tools), 6);
    /* Multi-round-trip requests: each input_required is answered by the same call sent again
     * with inputResponses (a form declined, no roots) and the server's requestState. */
    t = call_text(c, "ask", VIGIL_OK, &err);
    ASSERT_STREQ(t, "q={\"action\":\"decline\"} r={\"roots\":[]}");
    vg_free(t);
    t = call_text(c, "sample", VIGIL_EUNSUPPORTED, &err); /* sampling: vigil cannot give it */
    ASSERT(strstr(err.message, "sampling/createMessage"));
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);

    conf = fault_conf(NULL);
    c = client(conf);
    t = call_text(c, "ok", VIGIL_OK, &err);
    ASSERT_STREQ(t, "ok: 1");
    vg_free(t);
    ASSERT_STREQ(
        json_string_value(json_object_get(vg_mcp_client_server_info(c), "protocolVersion")),
        "2025-11-25");
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

/* How reference servers bend the specification (MCP.md MCP-08, MCP-09, MCP-28), with the
 * fault server made to do it: a server that answers initialize with another version it may
 * speak is spoken to in it, one that answers a version vigil does not speak is refused by
 * name; nothing but server/discover goes before initialize and its notifications/initialized
 * (servers answer requests sent too early: vigil must not send them); a server that answers
 * every page with the same cursor (everything ignores cursors it does not know) ends the
 * listing instead of looping. */
TEST(what_reference_servers_do_off_the_specification)
{
    struct vg_mcp_conf *conf = fault_conf("\"FAULT_VERSION\": \"2024-11-05\"");
    struct vg_mcp_client *c = client(conf);
    vigil_error err = {0};
    json_t *tools = NULL;
    ASSERT_EQ(vg_mcp_client_tools(c, &tools, &err), VIGIL_OK);
    ASSERT_STREQ(
        json_string_value(json_object_get(vg_mcp_client_server_info(c), "protocolVersion")),
        "2024-11-05");
    char *t = call_text(c, "methods", VIGIL_OK, &err);
    ASSERT(!strncmp(t, "server/discover,initialize,notifications/initialized,tools/list,", 64));
    vg_free(t);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);

    conf = fault_conf("\"FAULT_VERSION\": \"1999-01-01\"");
    c = client(conf);
    ASSERT_EQ(vg_mcp_client_tools(c, &tools, &err), VIGIL_EUNSUPPORTED);
    if (!strstr(err.message, "1999-01-01"))
        TEST_FAIL_("%s", err.message);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);

    conf = fault_conf("\"FAULT_STUCK_CURSOR\": \"1\"");
    c = client(conf);
    ASSERT_EQ(vg_mcp_client_tools(c, &tools, &err), VIGIL_OK);
    t = call_text(c, "methods", VIGIL_OK, &err);
    int lists = 0;
    for (const char *p = t; (p = strstr(p, "tools/list")); p++)
        lists++;
    ASSERT_EQ(lists, 2); /* the first page, then the same cursor again: the end */
    vg_free(t);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
}

int main(void)
{
    mcp_need_node();
    signal(SIGPIPE, SIG_IGN);
    step_clock_init(&clk);
    RUN(starts_on_first_use_and_lists_every_page);
    RUN(a_crash_mid_call_fails_the_call_and_restarts_after_backoff);
    RUN(a_backoff_longer_than_the_call_may_wait_fails_the_call_at_once);
    RUN(a_hang_times_out_by_the_clock_and_is_cancelled);
    RUN(a_server_that_exits_between_calls_starts_again_at_once);
    RUN(repeated_timeouts_open_the_breaker);
    RUN(a_stuck_stdio_server_costs_one_timeout_and_is_restarted);
    RUN(garbage_lines_and_a_server_ping_with_id_0);
    RUN(a_10mb_answer_is_dropped_and_the_connection_goes_on);
    RUN(progress_and_unknown_tools);
    RUN(a_server_that_ignores_stdin_closing_and_sigterm_is_killed);
    RUN(the_environment_is_minimal_plus_declared);
    RUN(the_revision_is_chosen_by_what_the_server_answers);
    RUN(what_reference_servers_do_off_the_specification);
    return 0;
}
