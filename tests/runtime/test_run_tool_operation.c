/*
 * test_run_tool_operation.c: every view of a tool call names the operation id its C callback
 * was given (vigil_tool_call_info.operation_id, "tag effects with it"): the run's tool-call list,
 * the call in full and a follower's look, whether the call's end is kept in the result message
 * the tool gate writes (a small output) or written by the agent loop itself (an output too long
 * for a message's row). The gate makes the id after the call's start is journaled, and no record
 * of the call named it: the run's list said "operation_id": null (trial F, F4). How a call
 * ended is said in one vocabulary: a call made by hand reads "succeeded" as a run's does.
 */
#include "helpers/test.h"

#include <jansson.h>

#include "os/fs.h"

/* The operation ids the callback was given, in order. */
struct seen {
    char ops[4][65];
    int n;
};

static vigil_code answer(void *user, const vigil_tool_call_info *call, const char *args_json,
                         char **out_result_json, vigil_error *err)
{
    struct seen *s = user;
    json_t *args = json_loads(args_json, 0, NULL);
    json_int_t size = json_integer_value(json_object_get(args, "size"));
    json_decref(args);
    if (s->n < 4)
        snprintf(s->ops[s->n++], sizeof s->ops[0], "%s", call->operation_id);
    char *text = malloc((size_t)size + 32);
    if (!text)
        return VIGIL_ENOMEM;
    memset(text, 'x', (size_t)size);
    text[size] = '\0';
    json_t *reply = json_pack("{s:s}", "text", text);
    free(text);
    char *dumped = json_dumps(reply, JSON_COMPACT);
    json_decref(reply);
    *out_result_json = dumped ? strdup(dumped) : NULL;
    free(dumped);
    return *out_result_json ? VIGIL_OK : VIGIL_ENOMEM;
}

static const char two_calls[] =
    "{\"vigil_cassette\":1,\"exchanges\":["
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"answer\",\"arguments\":"
    "{\"size\":10}}]}},"
    "{\"response\":{\"tool_calls\":[{\"id\":\"c2\",\"name\":\"answer\",\"arguments\":"
    "{\"size\":9000}}]}},"
    "{\"response\":{\"text\":\"done\"}}]}";

static vigil_runtime *open_app_with(const char *dir, struct seen *s, const char *text)
{
    char path[4200], cassette[4200];
    snprintf(cassette, sizeof cassette, "%s/model.json", dir);
    ASSERT_OK(vg_fs_write_file(cassette, text, strlen(text), E));
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    setenv("VIGIL_MODEL_CASSETTE", cassette, 1);
    unsetenv("VIGIL_CONFIG");
    snprintf(path, sizeof path, "%s/app.db", dir);
    vigil_runtime_options ro;
    vigil_runtime_options_default(&ro);
    ro.store_uri = path;
    ro.create_if_missing = 1;
    vigil_runtime *rt = NULL;
    ASSERT_OK(vigil_runtime_open(&ro, &rt, E));
    vigil_tool_def def = {.name = "answer",
                          .description = "Answer text of a size.",
                          .input_schema_json = "{\"type\":\"object\",\"properties\":{\"size\":"
                                               "{\"type\":\"integer\"}},\"required\":[\"size\"]}"};
    ASSERT_OK(vigil_tool_register(rt, &def, answer, s, E));
    return rt;
}

static vigil_runtime *open_app(const char *dir, struct seen *s)
{
    return open_app_with(dir, s, two_calls);
}

/* The n-th item of a listing page. */
static json_t *item(json_t *list, size_t n)
{
    return json_array_get(json_object_get(list, "items"), n);
}

TEST(every_view_of_a_run_tool_call_names_the_operation_id_its_callback_got)
{
    struct seen s = {.n = 0};
    vigil_runtime *rt = open_app(vg_test_tmpdir("run_tool_operation"), &s);
    char agent[37], *out = NULL;
    vigil_agent_spec spec = {.name = "App", .config_json = "{\"tools\":[\"answer\"]}"};
    ASSERT_OK(vigil_agent_create(rt, &spec, agent, E));
    ASSERT_OK(vigil_chat(rt, agent, NULL, "go", NULL, &out, E));
    json_t *turn = json_loads(out, 0, NULL);
    vigil_free(out);
    const char *run_id = json_string_value(json_object_get(turn, "run_id"));
    ASSERT(run_id);
    ASSERT_EQ(s.n, 2);
    ASSERT_OK(vigil_run_tools(rt, run_id, NULL, 0, &out, E));
    json_t *list = json_loads(out, 0, NULL);
    vigil_free(out);
    ASSERT_EQ((int64_t)json_array_size(json_object_get(list, "items")), 2);
    const int64_t after[2] = {0, 0};
    ASSERT_OK(vigil_run_follow(rt, run_id, after, 0, &out, E));
    json_t *follow = json_loads(out, 0, NULL);
    vigil_free(out);
    for (size_t i = 0; i < 2; i++) { /* 0: the end in the gate's message; 1: the loop's own */
        json_t *it = item(list, i);
        ASSERT_STREQ(json_string_value(json_object_get(it, "status")), "succeeded");
        ASSERT_STREQ(json_string_value(json_object_get(it, "operation_id")), s.ops[i]);
        ASSERT_OK(
            vigil_run_tool(rt, json_string_value(json_object_get(it, "tool_call_id")), &out, E));
        json_t *one = json_loads(out, 0, NULL);
        vigil_free(out);
        ASSERT_STREQ(json_string_value(json_object_get(one, "operation_id")), s.ops[i]);
        json_decref(one);
        json_t *f = json_array_get(json_object_get(follow, "tool_calls"), i);
        ASSERT_STREQ(json_string_value(json_object_get(f, "operation_id")), s.ops[i]);
    }
    json_decref(follow);
    json_decref(list);
    json_decref(turn);
    vigil_runtime_close(rt);
}

TEST(a_call_made_by_hand_ends_in_the_words_of_a_run_tool_call)
{
    struct seen s = {.n = 0};
    vigil_runtime *rt = open_app(vg_test_tmpdir("hand_call_status"), &s);
    char agent[37], *out = NULL;
    vigil_agent_spec spec = {.name = "Hand", .config_json = "{\"tools\":[\"answer\"]}"};
    ASSERT_OK(vigil_agent_create(rt, &spec, agent, E));
    ASSERT_OK(vigil_tool_call(rt, agent, "by-hand", "answer", "{\"size\":3}", &out, E));
    vigil_free(out);
    ASSERT_OK(vigil_tool_calls_by_hand(rt, agent, NULL, 0, &out, E));
    json_t *page = json_loads(out, 0, NULL);
    vigil_free(out);
    json_t *it = item(page, 0);
    ASSERT_STREQ(json_string_value(json_object_get(it, "result_status")), "succeeded");
    ASSERT_STREQ(json_string_value(json_object_get(it, "operation_id")), s.ops[0]);
    json_decref(page);
    vigil_runtime_close(rt);
}

/* Arguments with real numbers (a report's confidence, a temperature): the run's calls read back.
 * The journal's readers stepped over a kept record with a scanner that declined any number
 * with a fraction, and took that as a corrupt message: `vigil runs show` and `runs tools` of
 * the run, and of every earlier run of its thread, failed with "message ... cannot be read"
 * (trial J1 of session 36). And the reals come back as given, 0.8, from vigil_run_tools and
 * vigil_report_get (trial J5). */
TEST(a_call_with_real_numbers_in_its_arguments_reads_back)
{
    static const char reals[] =
        "{\"vigil_cassette\":1,\"exchanges\":["
        "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"answer\",\"arguments\":"
        "{\"size\":4,\"ratio\":0.8,\"scale\":-2.5e-3}}]}},"
        "{\"response\":{\"tool_calls\":[{\"id\":\"c2\",\"name\":\"set_report\",\"arguments\":"
        "{\"scope\":\"daily\",\"markdown\":\"up\",\"confidence\":0.8}}]}},"
        "{\"response\":{\"text\":\"done\"}}]}";
    struct seen s = {.n = 0};
    vigil_runtime *rt = open_app_with(vg_test_tmpdir("run_tool_reals"), &s, reals);
    char agent[37], *out = NULL;
    vigil_agent_spec spec = {.name = "Reals",
                             .config_json = "{\"tools\":[\"answer\",\"set_report\"]}"};
    ASSERT_OK(vigil_agent_create(rt, &spec, agent, E));
    ASSERT_OK(vigil_chat(rt, agent, NULL, "go", NULL, &out, E));
    json_t *turn = json_loads(out, 0, NULL);
    vigil_free(out);
    const char *run_id = json_string_value(json_object_get(turn, "run_id"));
    ASSERT(run_id);
    ASSERT_OK(vigil_run_tools(rt, run_id, NULL, 0, &out, E));
    /* the stored arguments as given (their preview, JSON text in a string): the shortest
     * digits, not jansson's 0.80000000000000004 (trial J5) */
    ASSERT_CONTAINS(out, "\\\"ratio\\\":0.8,");
    ASSERT_CONTAINS(out, "\\\"scale\\\":-0.0025,");
    ASSERT(!strstr(out, "0000000"));
    json_t *list = json_loads(out, 0, NULL);
    vigil_free(out);
    ASSERT_EQ((int64_t)json_array_size(json_object_get(list, "items")), 2);
    for (size_t i = 0; i < 2; i++)
        ASSERT_STREQ(json_string_value(json_object_get(item(list, i), "status")), "succeeded");
    ASSERT_CONTAINS(json_string_value(json_object_get(item(list, 0), "input_preview")), "0.8");
    ASSERT_OK(vigil_run_show(rt, run_id, &out, E));
    vigil_free(out);
    ASSERT_OK(vigil_report_get(rt, agent, "daily", 0, &out, E));
    ASSERT_CONTAINS(out, "\"confidence\":0.8,");
    vigil_free(out);
    json_decref(list);
    json_decref(turn);
    vigil_runtime_close(rt);
}

int main(void)
{
    RUN(every_view_of_a_run_tool_call_names_the_operation_id_its_callback_got);
    RUN(a_call_made_by_hand_ends_in_the_words_of_a_run_tool_call);
    RUN(a_call_with_real_numbers_in_its_arguments_reads_back);
    return 0;
}
