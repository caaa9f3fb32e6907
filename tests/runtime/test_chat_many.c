/*
 * test_chat_many.c: vigil_chat_many runs many chat turns at once on the caller's thread. Each
 * turn is the whole turn vigil_chat runs (its reply, its tool calls through the gate, its run
 * journaled and committed), the turns interleave (a turn's tool calls run while another turn
 * still has its own to come), a turn that fails fails alone, and the runtime is an ordinary one
 * again afterwards.
 */
#include "helpers/test.h"

#include "helpers/model_server.h"

#include <signal.h>
#include <sys/wait.h>

#define TURNS 6
#define STEPS 3 /* tool steps the model server asks each turn for */

static pid_t server;

/* The model server goes with the test process, also when an assertion ends it early. */
static void stop_server(void)
{
    if (server > 0) {
        kill(server, SIGKILL);
        waitpid(server, NULL, 0);
        server = 0;
    }
}
static int order[TURNS * STEPS + 8], n_order; /* the turn of each tool call, as they started */

struct turn_user {
    int index;
};

static void on_tool(void *user, const char *name, const char *args)
{
    (void)name;
    (void)args;
    if (n_order < (int)VG_ARRAY_LEN(order))
        order[n_order++] = ((struct turn_user *)user)->index;
}

/* The model server's `echo` tool: answers with its arguments ("step N": how far the turn is). */
static vigil_code echo_tool(void *user, const vigil_tool_call_info *call, const char *args_json,
                            char **out_result_json, vigil_error *err)
{
    (void)user;
    (void)call;
    (void)err;
    *out_result_json = strdup(args_json);
    return *out_result_json ? VIGIL_OK : VIGIL_ENOMEM;
}

/* A runtime on the real clock: its model calls go over a real socket to a real server, and
 * nothing here waits for time. */
struct test_rt {
    vigil_runtime *rt;
};

static void setup_with(struct test_rt *t, const char *name, char ids[][37], int n, int scripted)
{
    char url[64], path[4200];
    int port = 0;
    static int registered;
    if (!registered++)
        atexit(stop_server);
    if (!scripted)
        server = vg_instant_model_start(STEPS, STEPS, -1, &port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", port);
    setenv("VIGIL_MODEL_PROVIDER", scripted ? "scripted" : "openai", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    setenv("VIGIL_MODEL_BASE_URL", url, 1);
    setenv("VIGIL_MODEL", "bench", 1);
    setenv("VIGIL_MODEL_MAX_RETRIES", "0", 1);
    unsetenv("VIGIL_CONFIG");
    snprintf(path, sizeof path, "%s/agent.db", vg_test_tmpdir(name));
    vigil_runtime_options o = {.size = sizeof o, .store_uri = path, .create_if_missing = 1};
    ASSERT_OK(vigil_runtime_open(&o, &t->rt, E));
    vigil_tool_def def = {.name = "echo",
                          .description = "Echo the text.",
                          .input_schema_json = "{\"type\":\"object\",\"properties\":{\"text\":"
                                               "{\"type\":\"string\"}},\"required\":[\"text\"]}",
                          .contract_json = "{\"mutating\":false,\"idempotency\":\"idempotent\"}"};
    ASSERT_OK(vigil_tool_register(t->rt, &def, echo_tool, NULL, E));
    for (int i = 0; i < n; i++) {
        char agent_name[32];
        snprintf(agent_name, sizeof agent_name, "many-%d", i);
        vigil_agent_spec spec = {.name = agent_name, .config_json = "{\"tools\":[\"echo\"]}"};
        ASSERT_OK(vigil_agent_create(t->rt, &spec, ids[i], E));
    }
    n_order = 0;
}

static void setup(struct test_rt *t, const char *name, char ids[][37], int n)
{
    setup_with(t, name, ids, n, 0);
}

static void teardown(struct test_rt *t)
{
    vigil_runtime_close(t->rt);
    stop_server();
    unsetenv("VIGIL_MODEL_PROVIDER");
    unsetenv("VIGIL_MODEL_BASE_URL");
    unsetenv("VIGIL_MODEL");
    unsetenv("VIGIL_MODEL_MAX_RETRIES");
}

/* The run id of a turn's outcome ({"run_id":"...",...}). */
static void run_id_of(const char *out_json, char id[37])
{
    const char *p = strstr(out_json, "\"run_id\":\"");
    ASSERT(p != NULL);
    memcpy(id, p + 10, 36);
    id[36] = '\0';
}

TEST(turns_run_at_once_and_each_is_a_whole_turn)
{
    struct test_rt t;
    char ids[TURNS][37];
    vigil_chat_turn turns[TURNS];
    struct turn_user users[TURNS];
    vigil_chat_callbacks cbs[TURNS];
    setup(&t, "chat_many", ids, TURNS);
    for (int i = 0; i < TURNS; i++) {
        users[i].index = i;
        cbs[i] = (vigil_chat_callbacks){.user = &users[i], .on_tool = on_tool};
        turns[i] = (vigil_chat_turn){.agent_id = ids[i], .text = "go", .cb = &cbs[i]};
    }
    ASSERT_OK(vigil_chat_many(t.rt, turns, TURNS, E));
    for (int i = 0; i < TURNS; i++) {
        char run[37], *tools = NULL;
        ASSERT_STREQ(turns[i].error.message, "");
        ASSERT_OK(turns[i].code);
        ASSERT_CONTAINS(turns[i].out_json, "\"reply\":\"all done\"");
        ASSERT_CONTAINS(turns[i].out_json, "\"tool_calls\":3");
        /* Its run and its tool calls are in the store, read back through the public API. */
        run_id_of(turns[i].out_json, run);
        ASSERT_OK(vigil_run_tools(t.rt, run, NULL, 0, &tools, E));
        ASSERT_CONTAINS(tools, "\"status\":\"succeeded\"");
        vigil_free(tools);
        vigil_free(turns[i].out_json);
    }
    /* Interleaved: one after the other, the calls would come in TURNS runs of one turn each. */
    ASSERT_EQ(n_order, TURNS * STEPS);
    int switches = 0;
    for (int i = 1; i < n_order; i++)
        switches += order[i] != order[i - 1];
    ASSERT(switches > TURNS - 1);
    /* And the runtime is an ordinary one again: a plain turn commits and returns. */
    char *out = NULL;
    ASSERT_OK(vigil_chat(t.rt, ids[0], "again", "go", NULL, &out, E));
    ASSERT_CONTAINS(out, "all done");
    vigil_free(out);
    teardown(&t);
}

TEST(a_failing_turn_fails_alone)
{
    struct test_rt t;
    char ids[2][37];
    setup(&t, "chat_many_fail", ids, 2);
    vigil_chat_turn turns[3] = {
        {.agent_id = ids[0], .text = "go"},
        {.agent_id = "01890000-0000-7000-8000-000000000000", .text = "go"},
        {.agent_id = ids[1], .text = "go", .session = "bad:session"},
    };
    ASSERT_OK(vigil_chat_many(t.rt, turns, 3, E));
    ASSERT_OK(turns[0].code);
    ASSERT_CONTAINS(turns[0].out_json, "all done");
    ASSERT_EQ(turns[1].code, VIGIL_ENOTFOUND);
    ASSERT(turns[1].out_json == NULL);
    ASSERT_EQ(turns[1].error.code, VIGIL_ENOTFOUND);
    ASSERT_EQ(turns[2].code, VIGIL_EINVAL);
    ASSERT_CONTAINS(turns[2].error.message, "session");
    vigil_free(turns[0].out_json);
    teardown(&t);
}

/* The scripted model's turns never park (its cassette is one conversation in order): they run
 * one after the other, each a whole turn. */
TEST(scripted_turns_run_one_after_another)
{
    struct test_rt t;
    char ids[3][37];
    vigil_chat_turn turns[3];
    setup_with(&t, "chat_many_scripted", ids, 3, 1);
    for (int i = 0; i < 3; i++)
        turns[i] = (vigil_chat_turn){.agent_id = ids[i], .text = "hello"};
    ASSERT_OK(vigil_chat_many(t.rt, turns, 3, E));
    for (int i = 0; i < 3; i++) {
        ASSERT_STREQ(turns[i].error.message, "");
        ASSERT_CONTAINS(turns[i].out_json, "you said: hello");
        vigil_free(turns[i].out_json);
    }
    teardown(&t);
}

static vigil_runtime *nested_rt;
static vigil_code nested_code = VIGIL_OK;

static void call_many_from_a_callback(void *user, const char *name, const char *args)
{
    vigil_chat_turn inner = {.agent_id = user, .text = "go"};
    vigil_error err = {0};
    (void)name;
    (void)args;
    nested_code = vigil_chat_many(nested_rt, &inner, 1, &err);
}

/* Turns do not nest: a callback that starts more turns is refused, and its own turn goes on. */
TEST(called_from_a_turn_it_refuses)
{
    struct test_rt t;
    char ids[1][37];
    setup(&t, "chat_many_nested", ids, 1);
    nested_rt = t.rt;
    vigil_chat_callbacks cb = {.user = ids[0], .on_tool = call_many_from_a_callback};
    vigil_chat_turn turn = {.agent_id = ids[0], .text = "go", .cb = &cb};
    ASSERT_OK(vigil_chat_many(t.rt, &turn, 1, E));
    ASSERT_EQ(nested_code, VIGIL_ESTATE);
    ASSERT_OK(turn.code);
    vigil_free(turn.out_json);
    teardown(&t);
}

TEST(no_turns_and_bad_arguments)
{
    struct test_rt t;
    char ids[1][37];
    vigil_error err = {0};
    setup(&t, "chat_many_args", ids, 1);
    ASSERT_OK(vigil_chat_many(t.rt, NULL, 0, E));
    ASSERT_EQ(vigil_chat_many(NULL, NULL, 0, &err), VIGIL_EINVAL);
    ASSERT_EQ(vigil_chat_many(t.rt, NULL, 2, &err), VIGIL_EINVAL);
    teardown(&t);
}

int main(void)
{
    RUN(turns_run_at_once_and_each_is_a_whole_turn);
    RUN(a_failing_turn_fails_alone);
    RUN(scripted_turns_run_one_after_another);
    RUN(called_from_a_turn_it_refuses);
    RUN(no_turns_and_bad_arguments);
    return 0;
}
