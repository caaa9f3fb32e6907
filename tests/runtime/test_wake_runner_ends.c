/*
 * test_wake_runner_ends.c: how a wake's run ends is what its wake-log entry says (the
 * OpenAI-compatible provider against the loopback server): a run a spent budget stopped is
 * `stopped` with why, not `completed` (trial F11); a run the provider failed with a refused
 * key is `failed` and not retried as a recovery wake, nor counted toward dormancy (trial F22);
 * a failed run's retry may call the agent's tools and does not do again what the failed attempt
 * did (trial G8), and `runs show` of it names the failed run it recovers (trial G12).
 */
#include "helpers/http_server.h"
#include "helpers/rt.h"

#include "agent/agent.h"
#include "runtime/wake_runner.h"
#include "wake/wake.h"

static const char answer_json[] =
    "{\"id\":\"c1\",\"object\":\"chat.completion\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,"
    "\"message\":{\"role\":\"assistant\",\"content\":\"hello\"},\"finish_reason\":\"stop\"}],"
    "\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":2,\"total_tokens\":42}}";
static const char bad_key[] = "{\"error\":{\"message\":\"Incorrect API key provided: sk-wrong\","
                              "\"type\":\"invalid_request_error\",\"code\":\"invalid_api_key\"}}";

static void use_server(struct vg_test_server *srv)
{
    char base[128];
    snprintf(base, sizeof base, "%s/v1", vg_test_server_url(srv));
    setenv("VIGIL_MODEL_PROVIDER", "openai", 1);
    setenv("VIGIL_MODEL_BASE_URL", base, 1);
    setenv("VIGIL_MODEL", "gpt-4o", 1);
    setenv("OPENAI_API_KEY", "sk-test", 1);
    unsetenv("VIGIL_CONFIG");
}

/* One manual wake of the agent, run; its wake-log entry (owned). */
static json_t *wake_once(struct test_rt *t, struct vg_wake *w, const char *agent)
{
    char key[65];
    enum vg_enqueue_result res;
    struct vg_wake_req m = {.reason = VG_REASON_MANUAL, .agent_id = agent};
    ASSERT_OK(vg_wake_enqueue(w, &m, key, &res, E));
    int ran = 0;
    ASSERT_OK(vg_wake_drain(w, vg_wake_runner_loop(), 1, &ran, E));
    ASSERT_EQ(ran, 1);
    json_t *run = NULL;
    ASSERT_OK(vg_env_get_json(t->env, "wake_run", key, &run, NULL, E));
    return run;
}

TEST(a_wake_a_budget_stopped_says_stopped_and_why)
{
    struct vg_ts_response rs[] = {
        {.headers = "Content-Type: application/json\r\n", .body = answer_json}};
    struct vg_test_server *srv = vg_test_server_start(rs, 1);
    use_server(srv);
    struct test_rt t;
    struct vg_wake w;
    char a[37];
    test_rt_open(&t, "wake_runner_budget");
    vigil_agent_spec spec = {.name = "spender", .config_json = "{\"budgets\":{\"tokens\":10}}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, a, E));
    ASSERT_OK(vg_runtime_wake_init(&w, t.env, NULL, E));
    json_t *first = wake_once(&t, &w, a); /* 42 tokens: the budget of 10 is spent */
    ASSERT_STREQ(json_string_value(json_object_get(first, "status")), "completed");
    json_t *second = wake_once(&t, &w, a);
    ASSERT_STREQ(json_string_value(json_object_get(second, "status")), "stopped");
    ASSERT_STREQ(json_string_value(json_object_get(second, "error")),
                 "stopped: its tokens budget is spent");
    ASSERT_EQ(vg_test_server_count(srv), 1); /* the stopped run never asked the model */
    char *list = NULL;
    ASSERT_OK(vigil_wake_runs(t.rt, a, "stopped", 0, &list, E));
    ASSERT_CONTAINS(list, "budget is spent");
    vigil_free(list);
    json_decref(first);
    json_decref(second);
    vg_wake_release(&w);
    test_rt_close(&t);
    vg_test_server_stop(srv);
}

TEST(a_wake_the_provider_refused_the_key_of_is_not_retried)
{
    struct vg_ts_response rs[] = {
        {.status = 401, .headers = "Content-Type: application/json\r\n", .body = bad_key}};
    struct vg_test_server *srv = vg_test_server_start(rs, 1);
    use_server(srv);
    struct test_rt t;
    struct vg_wake w;
    char a[37];
    test_rt_open(&t, "wake_runner_bad_key");
    vigil_agent_spec spec = {.name = "keyless"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, a, E));
    ASSERT_OK(vg_runtime_wake_init(&w, t.env, NULL, E));
    json_t *run = wake_once(&t, &w, a);
    ASSERT_STREQ(json_string_value(json_object_get(run, "status")), "failed");
    ASSERT_CONTAINS(json_string_value(json_object_get(run, "error")), "Incorrect API key");
    ASSERT_CONTAINS(json_string_value(json_object_get(run, "error")), "not retried");
    ASSERT_EQ(w.last_outcome, VG_WAKE_FAILED_FINAL);
    char *list = NULL;
    ASSERT_OK(vigil_wake_runs(t.rt, a, "queued", 0, &list, E));
    ASSERT(!strstr(list, "recovery")); /* no recovery wake waits */
    vigil_free(list);
    json_t *state = NULL;
    ASSERT_OK(vg_runtime_state_get(t.env, a, &state, NULL, E));
    ASSERT_EQ(json_integer_value(json_object_get(state, "failure_streak")), 0);
    json_decref(state);
    json_decref(run);
    vg_wake_release(&w);
    test_rt_close(&t);
    vg_test_server_stop(srv);
}

static const char tally_call[] =
    "{\"id\":\"c2\",\"object\":\"chat.completion\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,"
    "\"message\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\","
    "\"type\":\"function\",\"function\":{\"name\":\"tally\",\"arguments\":\"{\\\"n\\\":1}\"}}]},"
    "\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":5,"
    "\"total_tokens\":45}}";

static int tallies;

static vigil_code tally(void *user, const vigil_tool_call_info *call, const char *args, char **out,
                        vigil_error *err)
{
    (void)user, (void)call, (void)args, (void)err;
    tallies++;
    *out = vg_strdup("{\"counted\":true}");
    return *out ? VIGIL_OK : VIGIL_ENOMEM;
}

/* The wake-log entry of the agent's queued recovery wake (owned), or NULL. */
static json_t *queued_recovery(struct test_rt *t, const char *agent)
{
    char *list = NULL;
    ASSERT_OK(vigil_wake_runs(t->rt, agent, "queued", 0, &list, E));
    json_t *page = json_loads(list, 0, NULL), *found = NULL, *it;
    size_t i;
    json_array_foreach (page, i, it)
        if (!strcmp(json_string_value(json_object_get(it, "reason")), "recovery"))
            found = json_incref(it);
    json_decref(page);
    vigil_free(list);
    return found;
}

/* The model asks for a mutating tool, which runs; its next answer is not JSON, so the run fails
 * and is retried as a recovery wake. The retry's model asks for the same call again: the call is
 * allowed on a recovery wake (the default allowed_wake_reasons) and answered from the failed
 * attempt's record, not done again; the retry completes. */
TEST(a_failed_runs_retry_may_call_tools_and_does_not_do_again_what_was_done)
{
    struct vg_ts_response rs[] = {
        {.headers = "Content-Type: application/json\r\n", .body = tally_call},
        {.headers = "Content-Type: application/json\r\n", .body = "not json"},
        {.headers = "Content-Type: application/json\r\n", .body = tally_call},
        {.headers = "Content-Type: application/json\r\n", .body = answer_json}};
    struct vg_test_server *srv = vg_test_server_start(rs, 4);
    use_server(srv);
    struct test_rt t;
    struct vg_wake w;
    char a[37];
    test_rt_open(&t, "wake_runner_retry_tools");
    vigil_tool_def def = {.name = "tally", .description = "Count one."};
    ASSERT_OK(vigil_tool_register(t.rt, &def, tally, NULL, E));
    vigil_agent_spec spec = {.name = "counter", .config_json = "{\"tools\":[\"tally\"]}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, a, E));
    ASSERT_OK(vg_runtime_wake_init(&w, t.env, NULL, E));
    tallies = 0;
    json_t *first = wake_once(&t, &w, a);
    ASSERT_STREQ(json_string_value(json_object_get(first, "status")), "failed");
    ASSERT_EQ(tallies, 1);
    json_t *retry = queued_recovery(&t, a);
    ASSERT(retry != NULL);
    vg_test_clock_advance(&t.clock, 3600 * 1000); /* past the retry's backoff */
    int ran = 0;
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
    ASSERT_EQ(ran, 1);
    json_t *after = NULL;
    const char *key = json_string_value(json_object_get(retry, "run_key"));
    ASSERT_OK(vg_env_get_json(t.env, "wake_run", key, &after, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(after, "status")), "completed");
    ASSERT_EQ(tallies, 1); /* the failed attempt's effect, answered from its record */
    char *tools = NULL;
    ASSERT_OK(vigil_run_tools(t.rt, key, NULL, 0, &tools, E));
    ASSERT(!strstr(tools, "not_allowed"));
    ASSERT_CONTAINS(tools, "\"name\":\"tally\"");
    ASSERT_CONTAINS(tools, "\\\"replayed\\\":true");
    vigil_free(tools);
    json_decref(after);
    json_decref(retry);
    json_decref(first);
    vg_wake_release(&w);
    test_rt_close(&t);
    vg_test_server_stop(srv);
}

/* `runs show` of a failed run's retry names what it recovers (trial G12): the failed run's key
 * and id, the first attempt's key and the reason the work was first queued for; the failed
 * run itself recovers nothing. */
TEST(a_retry_shown_names_the_failed_run_it_recovers)
{
    struct vg_ts_response rs[] = {
        {.headers = "Content-Type: application/json\r\n", .body = "not json"},
        {.headers = "Content-Type: application/json\r\n", .body = answer_json}};
    struct vg_test_server *srv = vg_test_server_start(rs, 2);
    use_server(srv);
    struct test_rt t;
    struct vg_wake w;
    char a[37];
    test_rt_open(&t, "wake_runner_retry_shown");
    vigil_agent_spec spec = {.name = "retrier"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, a, E));
    ASSERT_OK(vg_runtime_wake_init(&w, t.env, NULL, E));
    json_t *first = wake_once(&t, &w, a);
    ASSERT_STREQ(json_string_value(json_object_get(first, "status")), "failed");
    json_t *retry = queued_recovery(&t, a);
    ASSERT(retry != NULL);
    vg_test_clock_advance(&t.clock, 3600 * 1000); /* past the retry's backoff */
    int ran = 0;
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
    ASSERT_EQ(ran, 1);
    const char *fkey = json_string_value(json_object_get(first, "run_key"));
    char *text = NULL, *failed_text = NULL;
    ASSERT_OK(vigil_run_show(t.rt, fkey, &failed_text, E));
    json_t *failed = json_loads(failed_text, 0, NULL);
    ASSERT(json_object_get(failed, "recovers") == NULL);
    ASSERT_OK(vigil_run_show(t.rt, json_string_value(json_object_get(retry, "run_key")), &text, E));
    json_t *shown = json_loads(text, 0, NULL), *rec = json_object_get(shown, "recovers");
    ASSERT_STREQ(json_string_value(json_object_get(shown, "wake_reason")), "recovery");
    ASSERT_STREQ(json_string_value(json_object_get(rec, "kind")), "retry");
    ASSERT_STREQ(json_string_value(json_object_get(rec, "failed_run_key")), fkey);
    ASSERT_STREQ(json_string_value(json_object_get(rec, "first_run_key")), fkey);
    ASSERT_STREQ(json_string_value(json_object_get(rec, "failed_run_id")),
                 json_string_value(json_object_get(failed, "run_id")));
    ASSERT_STREQ(json_string_value(json_object_get(rec, "original_reason")), "manual");
    json_decref(shown);
    json_decref(failed);
    vigil_free(text);
    vigil_free(failed_text);
    json_decref(retry);
    json_decref(first);
    vg_wake_release(&w);
    test_rt_close(&t);
    vg_test_server_stop(srv);
}

int main(void)
{
    RUN(a_wake_a_budget_stopped_says_stopped_and_why);
    RUN(a_wake_the_provider_refused_the_key_of_is_not_retried);
    RUN(a_failed_runs_retry_may_call_tools_and_does_not_do_again_what_was_done);
    RUN(a_retry_shown_names_the_failed_run_it_recovers);
    return 0;
}
