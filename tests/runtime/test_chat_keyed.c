/*
 * test_chat_keyed.c: a turn sent again with the same key (vigil_chat_keyed; POST /chat's
 * Idempotency-Key) is not made twice (trial F, F6). A completed turn answers its recorded
 * outcome again, marked replayed, without a model call and without a second copy of its
 * message in the thread; the key used with another text is refused. A turn that failed runs
 * again under the same run key: the tool call its first try made is answered from its record,
 * so the tool's effect happens once.
 */
#include "helpers/test.h"

#include <jansson.h>

#include "env/env.h"
#include "os/fs.h"
#include "runtime/runtime.h"
#include "store/store.h"

static int effects; /* calls of the tool that reached it */

static vigil_code charge(void *user, const vigil_tool_call_info *call, const char *args_json,
                         char **out_result_json, vigil_error *err)
{
    effects++;
    *out_result_json = strdup("{\"charged\":true}");
    return *out_result_json ? VIGIL_OK : VIGIL_ENOMEM;
}

static vigil_runtime *open_app(const char *name, const char *exchanges)
{
    const char *dir = vg_test_tmpdir(name);
    char path[4200], cassette[4200], text[2048];
    snprintf(cassette, sizeof cassette, "%s/model.json", dir);
    snprintf(text, sizeof text, "{\"vigil_cassette\":1,\"exchanges\":%s}", exchanges);
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
    vigil_tool_def def = {.name = "charge", .description = "Charge the card once."};
    ASSERT_OK(vigil_tool_register(rt, &def, charge, NULL, E));
    effects = 0;
    return rt;
}

static json_t *turn(vigil_runtime *rt, const char *agent, const char *key, const char *text)
{
    char *out = NULL;
    ASSERT_OK(vigil_chat_keyed(rt, agent, NULL, key, text, NULL, &out, E));
    json_t *v = json_loads(out, 0, NULL);
    vigil_free(out);
    return v;
}

/* The user messages the agent's threads hold. */
static int64_t user_messages(vigil_runtime *rt, const char *agent)
{
    int64_t n = 0;
    struct vg_query q = {.kind = "message", .owner = agent, .k2 = "user"};
    ASSERT_OK(vg_store_count(vg_runtime_env(rt)->store, &q, &n, E));
    return n;
}

/* proves: S0-159 */
TEST(a_completed_turn_sent_again_answers_its_outcome_without_running)
{
    vigil_runtime *rt = open_app("chat_keyed_done", "[{\"response\":{\"text\":\"42\"}}]");
    char agent[37];
    vigil_agent_spec spec = {.name = "K1"};
    ASSERT_OK(vigil_agent_create(rt, &spec, agent, E));
    json_t *first = turn(rt, agent, "req-1", "what is the answer?");
    ASSERT(!json_object_get(first, "replayed"));
    /* The cassette has no second answer: a second model call would fail. */
    json_t *again = turn(rt, agent, "req-1", "what is the answer?");
    ASSERT(json_is_true(json_object_get(again, "replayed")));
    ASSERT_STREQ(json_string_value(json_object_get(again, "reply")), "42");
    ASSERT_STREQ(json_string_value(json_object_get(again, "run_id")),
                 json_string_value(json_object_get(first, "run_id")));
    ASSERT_EQ(user_messages(rt, agent), 1);
    char *out = NULL;
    ASSERT_CODE(VIGIL_EINVAL,
                vigil_chat_keyed(rt, agent, NULL, "req-1", "another question", NULL, &out, NULL));
    ASSERT(out == NULL);
    json_decref(first);
    json_decref(again);
    vigil_runtime_close(rt);
}

TEST(a_failed_turn_sent_again_runs_but_makes_its_tool_call_once)
{
    vigil_runtime *rt = open_app(
        "chat_keyed_failed",
        "[{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"charge\",\"arguments\":{}}]}},"
        "{\"error\":{\"code\":\"EAUTH\",\"message\":\"the key was revoked\"}},"
        "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"charge\",\"arguments\":{}}]}},"
        "{\"response\":{\"text\":\"charged\"}}]");
    char agent[37], *out = NULL;
    vigil_agent_spec spec = {.name = "K2", .config_json = "{\"tools\":[\"charge\"]}"};
    ASSERT_OK(vigil_agent_create(rt, &spec, agent, E));
    ASSERT_CODE(VIGIL_EAUTH,
                vigil_chat_keyed(rt, agent, NULL, "pay-7", "pay the bill", NULL, &out, NULL));
    ASSERT_EQ(effects, 1);
    json_t *retry = turn(rt, agent, "pay-7", "pay the bill");
    ASSERT_STREQ(json_string_value(json_object_get(retry, "reply")), "charged");
    ASSERT(!json_object_get(retry, "replayed"));
    ASSERT_EQ(effects, 1); /* the retry's call was answered from the first try's record */
    json_decref(retry);
    vigil_runtime_close(rt);
}

int main(void)
{
    RUN(a_completed_turn_sent_again_answers_its_outcome_without_running);
    RUN(a_failed_turn_sent_again_runs_but_makes_its_tool_call_once);
    return 0;
}
