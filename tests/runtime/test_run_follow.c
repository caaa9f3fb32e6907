/*
 * test_run_follow.c: vigil_run_follow, a follower's look at a run (the HTTP event poller): the
 * items past the sequences it saw and only those, the same items vigil_run_messages and
 * vigil_run_tools list, the sequences to pass at the next look, and "more" when the limit cut a
 * list short. A turn of the instant model server with three tool steps makes the items.
 */
#include "helpers/test.h"

#include "helpers/model_server.h"

#include <jansson.h>
#include <signal.h>
#include <sys/wait.h>

#define STEPS 3

static pid_t server;

static void stop_server(void)
{
    if (server > 0) {
        kill(server, SIGKILL);
        waitpid(server, NULL, 0);
        server = 0;
    }
}

static vigil_code echo_tool(void *user, const vigil_tool_call_info *call, const char *args_json,
                            char **out_result_json, vigil_error *err)
{
    (void)user;
    (void)call;
    (void)err;
    *out_result_json = strdup(args_json);
    return *out_result_json ? VIGIL_OK : VIGIL_ENOMEM;
}

/* A runtime with one agent whose turn took STEPS tool steps; its run id into run. */
static vigil_runtime *one_turn(char run[37])
{
    char url[64], path[4200], id[37], *out = NULL;
    int port = 0;
    vigil_runtime *rt = NULL;
    atexit(stop_server);
    server = vg_instant_model_start(STEPS, STEPS, -1, &port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", port);
    setenv("VIGIL_MODEL_PROVIDER", "openai", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    setenv("VIGIL_MODEL_BASE_URL", url, 1);
    setenv("VIGIL_MODEL", "bench", 1);
    setenv("VIGIL_MODEL_MAX_RETRIES", "0", 1);
    unsetenv("VIGIL_CONFIG");
    snprintf(path, sizeof path, "%s/agent.db", vg_test_tmpdir("run_follow"));
    vigil_runtime_options o = {.size = sizeof o, .store_uri = path, .create_if_missing = 1};
    ASSERT_OK(vigil_runtime_open(&o, &rt, E));
    vigil_tool_def def = {.name = "echo",
                          .description = "Echo the text.",
                          .input_schema_json = "{\"type\":\"object\",\"properties\":{\"text\":"
                                               "{\"type\":\"string\"}},\"required\":[\"text\"]}",
                          .contract_json = "{\"mutating\":false,\"idempotency\":\"idempotent\"}"};
    ASSERT_OK(vigil_tool_register(rt, &def, echo_tool, NULL, E));
    vigil_agent_spec spec = {.name = "follow", .config_json = "{\"tools\":[\"echo\"]}"};
    ASSERT_OK(vigil_agent_create(rt, &spec, id, E));
    ASSERT_OK(vigil_chat(rt, id, NULL, "go", NULL, &out, E));
    const char *p = strstr(out, "\"run_id\":\"");
    ASSERT(p != NULL);
    memcpy(run, p + 10, 36);
    run[36] = '\0';
    vigil_free(out);
    return rt;
}

/* A look: the answer parsed. */
static json_t *look(vigil_runtime *rt, const char *run, int64_t m, int64_t t, int limit)
{
    char *text = NULL;
    const int64_t after[2] = {m, t};
    json_t *o = NULL;
    ASSERT_OK(vigil_run_follow(rt, run, after, limit, &text, E));
    o = json_loads(text, 0, NULL);
    vigil_free(text);
    ASSERT(o != NULL);
    return o;
}

static int64_t after_of(json_t *o, int i)
{
    return json_integer_value(json_array_get(json_object_get(o, "after"), (size_t)i));
}

TEST(a_look_lists_what_came_after_the_sequences_seen_and_only_that)
{
    char run[37], *msgs = NULL, *tools = NULL;
    vigil_runtime *rt = one_turn(run);
    /* The first look: everything, as the two listings give it. */
    json_t *all = look(rt, run, 0, 0, 0);
    ASSERT_OK(vigil_run_messages(rt, run, NULL, 0, &msgs, E));
    ASSERT_OK(vigil_run_tools(rt, run, NULL, 0, &tools, E));
    json_t *m = json_loads(msgs, 0, NULL), *t = json_loads(tools, 0, NULL);
    ASSERT(json_equal(json_object_get(all, "messages"), json_object_get(m, "items")));
    ASSERT(json_equal(json_object_get(all, "tool_calls"), json_object_get(t, "items")));
    size_t n_msgs = json_array_size(json_object_get(m, "items"));
    ASSERT(n_msgs >= 2);
    ASSERT_EQ(json_array_size(json_object_get(all, "tool_calls")), (size_t)STEPS);
    ASSERT(json_is_false(json_object_get(all, "more")));
    json_t *last = json_array_get(json_object_get(all, "messages"), n_msgs - 1);
    ASSERT_EQ(after_of(all, 0), json_integer_value(json_object_get(last, "sequence")));
    /* The next look from where the first ended: nothing, and the same sequences. */
    json_t *again = look(rt, run, after_of(all, 0), after_of(all, 1), 0);
    ASSERT_EQ(json_array_size(json_object_get(again, "messages")), (size_t)0);
    ASSERT_EQ(json_array_size(json_object_get(again, "tool_calls")), (size_t)0);
    ASSERT_EQ(after_of(again, 0), after_of(all, 0));
    ASSERT_EQ(after_of(again, 1), after_of(all, 1));
    /* From the first message on: the rest of them only. */
    int64_t first = json_integer_value(
        json_object_get(json_array_get(json_object_get(all, "messages"), 0), "sequence"));
    json_t *rest = look(rt, run, first, after_of(all, 1), 0);
    ASSERT_EQ(json_array_size(json_object_get(rest, "messages")), n_msgs - 1);
    ASSERT(json_equal(json_array_get(json_object_get(rest, "messages"), 0),
                      json_array_get(json_object_get(all, "messages"), 1)));
    /* A limit of one: one of each, "more", and the look after it goes on with the second. */
    json_t *one = look(rt, run, 0, 0, 1);
    ASSERT_EQ(json_array_size(json_object_get(one, "tool_calls")), (size_t)1);
    ASSERT(json_is_true(json_object_get(one, "more")));
    json_t *next = look(rt, run, after_of(one, 0), after_of(one, 1), 1);
    ASSERT(json_equal(json_array_get(json_object_get(next, "tool_calls"), 0),
                      json_array_get(json_object_get(all, "tool_calls"), 1)));
    /* No such run; no sequences. */
    const int64_t zero[2] = {0, 0};
    char *text = NULL;
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_ENOTFOUND, vigil_run_follow(rt, "no-such-run", zero, 0, &text, &err));
    ASSERT_CODE(VIGIL_EINVAL, vigil_run_follow(rt, run, NULL, 0, &text, &err));
    ASSERT_CODE(VIGIL_EINVAL, vigil_run_follow(rt, run, zero, 1001, &text, &err));
    json_decref(all);
    json_decref(again);
    json_decref(rest);
    json_decref(one);
    json_decref(next);
    json_decref(m);
    json_decref(t);
    vigil_free(msgs);
    vigil_free(tools);
    vigil_runtime_close(rt);
    stop_server();
}

int main(void)
{
    RUN(a_look_lists_what_came_after_the_sequences_seen_and_only_that);
    return 0;
}
