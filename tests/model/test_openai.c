/*
 * test_openai.c: the OpenAI-compatible adapter against a loopback HTTP server speaking the
 * real wire format (bodies from tests/fixtures/model/{openai,ollama,llamacpp}). Each case
 * asserts the exact request (method, path, auth header, body as JSON) and the normalized
 * response, plus errors, retries through the test clock, cut streams and cancel.
 */
#include "model/model_test.h"

#include "config/config.h"
#include "model/openai/openai.h"

#include <limits.h>

#define SSE_HEADERS "Content-Type: text/event-stream\r\nx-request-id: req_test_1\r\n"
#define JSON_HEADERS "Content-Type: application/json\r\n"

struct env {
    struct vg_test_server *srv;
    struct vg_model *m;
    struct vg_test_clock tc;
    struct vg_ids *ids;
    char base[128];
};

static void setup(struct env *e, const struct vg_ts_response *rs, size_t n, const char *key,
                  int stream_usage, int max_retries)
{
    e->srv = vg_test_server_start(rs, n);
    vg_test_clock_init(&e->tc, 1795338031000LL);
    e->ids = vg_ids_seeded(&e->tc.base, 42);
    snprintf(e->base, sizeof(e->base), "%s/v1", vg_test_server_url(e->srv));
    struct vg_model_options o = {.provider = "openai",
                                 .model = "gpt-4o-2024-08-06",
                                 .base_url = e->base,
                                 .api_key = key,
                                 .clock = &e->tc.base,
                                 .ids = e->ids,
                                 .stream_usage = stream_usage,
                                 .max_retries = max_retries,
                                 .timeout_ms = 5000};
    ASSERT_OK(vg_model_new(&o, &e->m, E));
}

static void teardown(struct env *e)
{
    vg_model_free(e->m);
    vg_ids_free(e->ids);
    vg_test_server_stop(e->srv);
}

static void assert_post(struct env *e, size_t i, const char *fixture, const char *accept)
{
    const struct vg_ts_request *r = vg_test_server_request(e->srv, i);
    ASSERT(r != NULL);
    ASSERT_STREQ(r->method, "POST");
    ASSERT_STREQ(r->path, "/v1/chat/completions");
    ASSERT_STREQ(vg_ts_header(r, "Content-Type"), "application/json");
    if (accept)
        ASSERT_STREQ(vg_ts_header(r, "Accept"), accept);
    assert_json_fixture(r->body, fixture);
}

static const struct vg_model_tool weather = {"get_weather", "Get the current weather for a city.",
                                             WEATHER_SCHEMA_STRICT, 0};

/* proves: S4-015 S4-046 */
TEST(text_stream_with_usage)
{
    struct env e;
    char *sse = vg_test_fixture("model/openai/01_text_stream_usage.response.sse", NULL);
    struct vg_ts_response rs[] = {{.headers = SSE_HEADERS, .body = sse}};
    setup(&e, rs, 1, "sk-test", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Say hello in three words."};
    struct vg_model_request req = {
        .system = "You are a concise assistant.", .messages = &msg, .n_messages = 1};
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    struct vg_model_response *r = NULL;

    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    assert_post(&e, 0, "model/openai/01_text_stream_usage.request.json", "text/event-stream");
    ASSERT_STREQ(vg_ts_header(vg_test_server_request(e.srv, 0), "Authorization"), "Bearer sk-test");
    ASSERT_STREQ(r->text, "Hello there, friend!");
    ASSERT_STREQ(rec.text.data, "Hello there, friend!");
    ASSERT_EQ(rec.text_calls, 5);
    ASSERT_EQ(r->stop_reason, VG_MODEL_STOP_END_TURN);
    ASSERT_STREQ(r->stop_raw, "stop");
    ASSERT_EQ(r->usage.input_tokens, 24);
    ASSERT_EQ(r->usage.output_tokens, 5);
    ASSERT_STREQ(r->model, "gpt-4o-2024-08-06");
    ASSERT_STREQ(r->response_id, "chatcmpl-35qP3kGpsGpL2Yfx1DxOZpl9CmOrk");
    ASSERT_STREQ(r->request_id, "req_test_1");
    ASSERT_STREQ(r->provider, "openai");
    ASSERT_EQ(r->attempts, 1);
    ASSERT_EQ(r->scripted, 0);
    ASSERT_EQ(r->n_tool_calls, 0);
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(sse);
}

/* proves: S4-015 S4-046 */
TEST(single_tool_stream_split_arguments)
{
    struct env e;
    char *sse = vg_test_fixture("model/openai/02_tool_single_stream.response.sse", NULL);
    struct vg_ts_response rs[] = {{.headers = SSE_HEADERS, .body = sse, .chunk = 5}};
    setup(&e, rs, 1, "sk-test", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER,
                                   .text = "What's the weather in Paris right now?"};
    struct vg_model_request req = {.messages = &msg,
                                   .n_messages = 1,
                                   .tools = &weather,
                                   .n_tools = 1,
                                   .tool_choice = VG_MODEL_TOOL_CHOICE_AUTO};
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    struct vg_model_response *r = NULL;

    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    assert_post(&e, 0, "model/openai/02_tool_single_stream.request.json", "text/event-stream");
    ASSERT_EQ(r->n_tool_calls, 1);
    ASSERT_STREQ(r->tool_calls[0].id, "call_H8G5RmMkSsRHd9MRHONf216q");
    ASSERT_STREQ(r->tool_calls[0].name, "get_weather");
    ASSERT_STREQ(r->tool_calls[0].arguments, "{\"location\":\"Paris\",\"unit\":\"celsius\"}");
    ASSERT_EQ(rec.starts, 1);
    ASSERT_STREQ(rec.names[0], "get_weather");
    ASSERT_STREQ(rec.args[0].data, r->tool_calls[0].arguments);
    ASSERT_EQ(r->stop_reason, VG_MODEL_STOP_TOOL_USE);
    ASSERT_EQ(r->usage.input_tokens, 81);
    ASSERT_EQ(r->usage.output_tokens, 17);
    ASSERT_STREQ(r->text, "");
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(sse);
}

/* proves: S4-015 S4-046 */
TEST(parallel_tools_stream)
{
    struct env e;
    char *sse = vg_test_fixture("model/openai/03_tool_parallel_stream.response.sse", NULL);
    struct vg_ts_response rs[] = {{.headers = SSE_HEADERS, .body = sse, .chunk = 1}};
    setup(&e, rs, 1, "sk-test", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER,
                                   .text = "Compare the weather in Paris and Tokyo."};
    struct vg_model_request req = {.messages = &msg,
                                   .n_messages = 1,
                                   .tools = &weather,
                                   .n_tools = 1,
                                   .parallel_tool_calls = 1};
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    struct vg_model_response *r = NULL;

    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    assert_post(&e, 0, "model/openai/03_tool_parallel_stream.request.json", NULL);
    ASSERT_EQ(r->n_tool_calls, 2);
    ASSERT_STREQ(r->tool_calls[0].id, "call_wG5J73nYjD1R4CCgPS0qeG9O");
    ASSERT_STREQ(r->tool_calls[1].id, "call_CtFtoWg2fpphY3y5dixNYjqa");
    json_t *a0 = json_loads(r->tool_calls[0].arguments, 0, NULL);
    json_t *a1 = json_loads(r->tool_calls[1].arguments, 0, NULL);
    ASSERT_STREQ(json_string_value(json_object_get(a0, "location")), "Paris");
    ASSERT_STREQ(json_string_value(json_object_get(a1, "location")), "Tokyo");
    json_decref(a0);
    json_decref(a1);
    ASSERT_EQ(rec.starts, 2);
    ASSERT_STREQ(rec.args[1].data, r->tool_calls[1].arguments);
    ASSERT_EQ(r->stop_reason, VG_MODEL_STOP_TOOL_USE);
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(sse);
}

/* proves: S4-015 */
TEST(arguments_in_many_chunks_with_text)
{
    struct env e;
    char *sse = vg_test_fixture("model/openai/04_tool_args_many_deltas.response.sse", NULL);
    struct vg_ts_response rs[] = {{.headers = SSE_HEADERS, .body = sse, .chunk = 7}};
    setup(&e, rs, 1, "sk-test", 0, 0);
    struct vg_model_message msg = {
        .role = VG_MODEL_USER,
        .text = "Add two todo items to notes/todo.md: buy milk, and call \"Ana\" about the café "
                "hours."};
    struct vg_model_tool wf = {"write_file", "Write text to a file in the agent workspace.",
                               WRITE_FILE_SCHEMA, 0};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1, .tools = &wf, .n_tools = 1};
    struct vg_model_response *r = NULL;
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);

    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    assert_post(&e, 0, "model/openai/04_tool_args_many_deltas.request.json", NULL);
    ASSERT_STREQ(r->text, "Adding both items now.");
    ASSERT_EQ(r->n_tool_calls, 1);
    json_t *args = json_loads(r->tool_calls[0].arguments, 0, NULL);
    ASSERT(args != NULL);
    ASSERT_STREQ(json_string_value(json_object_get(args, "path")), "notes/todo.md");
    ASSERT_STREQ(json_string_value(json_object_get(args, "content")),
                 "- [ ] buy milk\n- [ ] call \"Ana\" re: café hours\n");
    ASSERT(json_is_true(json_object_get(args, "append")));
    json_decref(args);
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(sse);
}

/* proves: S4-018 */
TEST(rate_limit_waits_retry_after_through_test_clock)
{
    struct env e;
    char *body = vg_test_fixture("model/openai/06_http_429_retry_after.response.json", NULL);
    char *sse = vg_test_fixture("model/openai/01_text_stream_usage.response.sse", NULL);
    struct vg_ts_response rs[] = {
        {.status = 429,
         .headers = JSON_HEADERS "retry-after: 2\r\nretry-after-ms: 1216\r\n",
         .body = body},
        {.headers = SSE_HEADERS, .body = sse}};
    setup(&e, rs, 2, "sk-test", -1, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);

    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    assert_post(&e, 0, "model/openai/06_http_429_retry_after.request.json", NULL);
    ASSERT_EQ(vg_test_server_count(e.srv), 2);
    ASSERT_EQ(e.tc.slept_ms, 1216); /* retry-after-ms wins over retry-after */
    ASSERT_EQ(r->attempts, 2);
    ASSERT(r->latency_ms >= 1216);
    ASSERT_STREQ(r->text, "Hello there, friend!");
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(body);
    vg_free(sse);
}

/* proves: S4-018 */
TEST(rate_limit_persisting_is_a_structured_error)
{
    struct env e;
    char *body = vg_test_fixture("model/openai/06_http_429_retry_after.response.json", NULL);
    struct vg_ts_response rs[] = {
        {.status = 429, .headers = JSON_HEADERS "retry-after: 2\r\n", .body = body}};
    setup(&e, rs, 1, "sk-test", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_ERATELIMIT, vg_model_complete(e.m, &req, &r, &err));
    ASSERT(r == NULL);
    ASSERT_EQ(vg_test_server_count(e.srv), 3); /* 3 attempts by default */
    ASSERT_EQ(e.tc.slept_ms, 4000);
    ASSERT_EQ(err.subcode, 429);
    ASSERT_CONTAINS(err.message, "Rate limit reached for gpt-4o");
    ASSERT_CONTAINS(err.message, "after 3 attempts");
    teardown(&e);
    vg_free(body);
}

/* Trial F7: a long provider message is cut at a word with "..." and the line keeps its closing
 * quote and "(after N attempts)" whole; a retry-after over retry_after_max_ms says, in the
 * message, that it was not retried and why. */
TEST(a_long_provider_message_keeps_the_lines_end)
{
    struct env e;
    static const char body[] =
        "{\"error\":{\"message\":\"This request would exceed the rate limit for your organization "
        "of 50,000 input tokens per minute. For details, refer to: https://docs.claude.com/en/api/"
        "rate-limits. You can see the response headers for current usage. Please reduce the prompt "
        "length or the maximum tokens requested, or try again later.\",\"type\":\"requests\"}}";
    struct vg_ts_response rs[] = {
        {.status = 429, .headers = JSON_HEADERS "retry-after: 2\r\n", .body = body}};
    setup(&e, rs, 1, "sk-test", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_ERATELIMIT, vg_model_complete(e.m, &req, &r, &err));
    size_t n = strlen(err.message);
    ASSERT(n < sizeof err.message - 1);
    ASSERT_CONTAINS(err.message, "...\" (after 3 attempts)");
    ASSERT_EQ(err.message[n - 1], ')');
    teardown(&e);
}

TEST(a_retry_after_too_long_says_so_in_the_message)
{
    struct env e;
    static const char body[] = "{\"error\":{\"message\":\"Rate limit reached\"}}";
    struct vg_ts_response rs[] = {
        {.status = 429, .headers = JSON_HEADERS "retry-after: 120\r\n", .body = body}};
    setup(&e, rs, 1, "sk-test", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_ERATELIMIT, vg_model_complete(e.m, &req, &r, &err));
    ASSERT_EQ(vg_test_server_count(e.srv), 1);
    ASSERT_CONTAINS(err.message, "not retried: the server asked to wait 120s, over "
                                 "model.retry_after_max_ms 60000");
    teardown(&e);
}

/* proves: S4-046 */
TEST(length_stop_is_max_tokens)
{
    struct env e;
    char *sse = vg_test_fixture("model/openai/08_length_stop.response.sse", NULL);
    struct vg_ts_response rs[] = {{.headers = SSE_HEADERS, .body = sse}};
    setup(&e, rs, 1, "sk-test", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER,
                                   .text = "Tell me the history of the printing press."};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1, .max_tokens = 12};
    struct vg_model_response *r = NULL;
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);

    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    assert_post(&e, 0, "model/openai/08_length_stop.request.json", NULL);
    ASSERT_EQ(r->stop_reason, VG_MODEL_STOP_MAX_TOKENS);
    ASSERT_STREQ(r->text, "The printing press was invented around 1440 by");
    ASSERT(!r->tool_calls_cut); /* cut in its text: no call to hold back */
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(sse);
}

/* proves: S4-015 S4-046 */
TEST(non_streaming_parallel_tool_calls)
{
    struct env e;
    char *body = vg_test_fixture("model/openai/09_nonstream_tool_calls.response.json", NULL);
    struct vg_ts_response rs[] = {
        {.headers = JSON_HEADERS "x-request-id: req_9\r\n", .body = body}};
    setup(&e, rs, 1, "sk-test", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER,
                                   .text = "Compare the weather in Paris and Tokyo."};
    struct vg_model_request req = {
        .messages = &msg, .n_messages = 1, .tools = &weather, .n_tools = 1};
    struct vg_model_response *r = NULL;

    ASSERT_OK(vg_model_complete(e.m, &req, &r, E));
    assert_post(&e, 0, "model/openai/09_nonstream_tool_calls.request.json", "application/json");
    ASSERT_EQ(r->n_tool_calls, 2);
    ASSERT_STREQ(r->tool_calls[0].arguments, "{\"location\": \"Paris\"}");
    ASSERT_STREQ(r->tool_calls[1].id, "call_8q1fIyBb1oHvaO9otvzFYdxC");
    ASSERT_EQ(r->stop_reason, VG_MODEL_STOP_TOOL_USE);
    ASSERT_EQ(r->usage.input_tokens, 96);
    ASSERT_EQ(r->usage.output_tokens, 46);
    ASSERT_STREQ(r->request_id, "req_9");
    vg_model_response_free(r);
    teardown(&e);
    vg_free(body);
}

/* proves: S4-015 */
TEST(tool_result_followup_request)
{
    struct env e;
    char *body = vg_test_fixture("model/openai/10_tool_result_followup.response.json", NULL);
    struct vg_ts_response rs[] = {{.headers = JSON_HEADERS, .body = body}};
    setup(&e, rs, 1, "sk-test", 0, 0);
    struct vg_model_tool_call calls[] = {
        {"call_Up6urCHPMhqQc3KXFQIWxmBG", "get_weather", "{\"location\": \"Paris\"}"},
        {"call_8q1fIyBb1oHvaO9otvzFYdxC", "get_weather",
         "{\"location\": \"Tokyo\", \"unit\": \"celsius\"}"}};
    struct vg_model_message msgs[] = {
        {.role = VG_MODEL_USER, .text = "Compare the weather in Paris and Tokyo."},
        {.role = VG_MODEL_ASSISTANT, .tool_calls = calls, .n_tool_calls = 2},
        {.role = VG_MODEL_TOOL,
         .tool_call_id = "call_Up6urCHPMhqQc3KXFQIWxmBG",
         .text = "14°C, light rain, wind 18 km/h"},
        {.role = VG_MODEL_TOOL,
         .tool_call_id = "call_8q1fIyBb1oHvaO9otvzFYdxC",
         .text = "weather service timeout after 10s",
         .is_error = 1}};
    struct vg_model_request req = {
        .messages = msgs, .n_messages = 4, .tools = &weather, .n_tools = 1};
    struct vg_model_response *r = NULL;

    ASSERT_OK(vg_model_complete(e.m, &req, &r, E));
    assert_post(&e, 0, "model/openai/10_tool_result_followup.request.json", NULL);
    ASSERT_CONTAINS(r->text, "Paris is 14°C with light rain.");
    ASSERT_EQ(r->stop_reason, VG_MODEL_STOP_END_TURN);
    vg_model_response_free(r);
    teardown(&e);
    vg_free(body);
}

/* proves: S4-017 */
TEST(bad_key_is_eauth_and_not_retried)
{
    struct env e;
    struct vg_ts_response rs[] = {
        {.status = 401,
         .headers = JSON_HEADERS,
         .body = "{\"error\":{\"message\":\"Incorrect API key provided: sk-bad.\",\"type\":"
                 "\"invalid_request_error\",\"code\":\"invalid_api_key\"}}"}};
    setup(&e, rs, 1, "sk-bad", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_EAUTH, vg_model_complete(e.m, &req, &r, &err));
    ASSERT_EQ(vg_test_server_count(e.srv), 1);
    ASSERT_EQ(err.subcode, 401);
    ASSERT_CONTAINS(err.message, "Incorrect API key provided");
    ASSERT_EQ(e.tc.slept_ms, 0);
    teardown(&e);
}

/* A server (a proxy, a local gateway) that quotes the key it was sent: the error keeps the
 * message but not the key, which would go on to the run's error, the log and the API (trial H5). */
TEST(a_key_the_server_quotes_is_not_in_the_error)
{
    struct env e;
    struct vg_ts_response rs[] = {
        {.status = 401,
         .headers = JSON_HEADERS,
         .body = "{\"error\":{\"message\":\"Incorrect API key provided: Bearer "
                 "sk-live-8f2b1c9d0e\",\"type\":\"invalid_request_error\"}}"}};
    setup(&e, rs, 1, "sk-live-8f2b1c9d0e", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_EAUTH, vg_model_complete(e.m, &req, &r, &err));
    ASSERT(strstr(err.message, "8f2b1c9d0e") == NULL);
    ASSERT_CONTAINS(err.message, "Incorrect API key provided: [redacted]");
    teardown(&e);
}

/* A base URL's user and password, quoted by a connection error (trial H5). */
TEST(a_password_in_the_base_url_is_not_in_the_error)
{
    struct env e;
    struct vg_ts_response rs[] = {{.status = 200}};
    setup(&e, rs, 1, "sk-test", 0, 0);
    vg_test_server_stop(e.srv); /* nothing listens on the port any more */
    vg_model_free(e.m);
    char base[160];
    snprintf(base, sizeof base, "http://admin:hunter22@%s/v1", e.base + strlen("http://"));
    struct vg_model_options o = {.provider = "openai",
                                 .model = "gpt-4o-2024-08-06",
                                 .base_url = base,
                                 .api_key = "sk-test",
                                 .clock = &e.tc.base,
                                 .ids = e.ids,
                                 .timeout_ms = 5000};
    ASSERT_OK(vg_model_new(&o, &e.m, E));
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_ENETWORK, vg_model_complete(e.m, &req, &r, &err));
    ASSERT(strstr(err.message, "hunter22") == NULL);
    ASSERT_CONTAINS(err.message, "http://[redacted]@127.0.0.1");
    struct vg_ts_response rs2[] = {{.status = 200}};
    e.srv = vg_test_server_start(rs2, 1); /* for teardown */
    teardown(&e);
}

TEST(bad_request_is_einval_with_provider_message)
{
    struct env e;
    struct vg_ts_response rs[] = {
        {.status = 400,
         .headers = JSON_HEADERS,
         .body = "{\"error\":{\"message\":\"Invalid value for 'max_completion_tokens'.\","
                 "\"type\":\"invalid_request_error\"}}"}};
    setup(&e, rs, 1, "sk-test", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_EINVAL, vg_model_complete(e.m, &req, &r, &err));
    ASSERT_EQ(vg_test_server_count(e.srv), 1);
    ASSERT_CONTAINS(err.message, "Invalid value for 'max_completion_tokens'.");
    teardown(&e);
}

TEST(server_error_retried_then_succeeds)
{
    struct env e;
    char *body = vg_test_fixture("model/openai/10_tool_result_followup.response.json", NULL);
    struct vg_ts_response rs[] = {{.status = 500, .body = "oops"},
                                  {.status = 503, .body = "busy"},
                                  {.headers = JSON_HEADERS, .body = body}};
    setup(&e, rs, 3, "sk-test", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;

    ASSERT_OK(vg_model_complete(e.m, &req, &r, E));
    ASSERT_EQ(r->attempts, 3);
    ASSERT_EQ(vg_test_server_count(e.srv), 3);
    /* Full jitter: each wait is at most its ceiling (500 ms, then 1000 ms). */
    ASSERT(e.tc.slept_ms <= 1500);
    vg_model_response_free(r);
    teardown(&e);
    vg_free(body);
}

TEST(malformed_json_body_is_eparse)
{
    struct env e;
    struct vg_ts_response rs[] = {{.headers = JSON_HEADERS, .body = "{\"choices\": [ {oops"}};
    setup(&e, rs, 1, "sk-test", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_EPARSE, vg_model_complete(e.m, &req, &r, &err));
    ASSERT_EQ(vg_test_server_count(e.srv), 1);
    ASSERT_CONTAINS(err.message, "malformed response body");
    teardown(&e);
}

TEST(malformed_stream_chunk_is_eparse)
{
    struct env e;
    struct vg_ts_response rs[] = {{.headers = SSE_HEADERS, .body = "data: {not json\n\n"}};
    setup(&e, rs, 1, "sk-test", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_EPARSE, vg_model_stream(e.m, &req, &cb, &r, &err));
    ASSERT_CONTAINS(err.message, "malformed stream chunk");
    recorder_release(&rec);
    teardown(&e);
}

/* A stream cut after text reached the caller is reported, not retried. */
TEST(stream_cut_after_delivery_is_not_retried)
{
    struct env e;
    char *sse = vg_test_fixture("model/openai/01_text_stream_usage.response.sse", NULL);
    const char *cut = strstr(sse, " there");
    struct vg_ts_response rs[] = {
        {.headers = SSE_HEADERS, .body = sse, .chunk = 64, .cut_after = (size_t)(cut - sse) + 200}};
    setup(&e, rs, 1, "sk-test", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_ENETWORK, vg_model_stream(e.m, &req, &cb, &r, &err));
    ASSERT(r == NULL);
    ASSERT_EQ(vg_test_server_count(e.srv), 1);
    ASSERT(rec.text.len > 0);
    ASSERT_CONTAINS(err.detail, "already delivered");
    recorder_release(&rec);
    teardown(&e);
    vg_free(sse);
}

/* A stream cut before anything was delivered is retried like any network failure. */
TEST(stream_cut_before_delivery_is_retried)
{
    struct env e;
    char *sse = vg_test_fixture("model/openai/01_text_stream_usage.response.sse", NULL);
    struct vg_ts_response rs[] = {{.headers = SSE_HEADERS, .body = sse, .cut_after = 40},
                                  {.headers = SSE_HEADERS, .body = sse}};
    setup(&e, rs, 2, "sk-test", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);

    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    ASSERT_EQ(r->attempts, 2);
    ASSERT_STREQ(rec.text.data, "Hello there, friend!");
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(sse);
}

/* The server closes cleanly but the stream never finished: an error, not half a response. */
TEST(stream_without_finish_is_an_error)
{
    struct env e;
    const char *body = "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":"
                       "\"Hi\"},\"finish_reason\":null}]}\n\n";
    struct vg_ts_response rs[] = {{.headers = SSE_HEADERS, .body = body}};
    setup(&e, rs, 1, "sk-test", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_ENETWORK, vg_model_stream(e.m, &req, &cb, &r, &err));
    ASSERT_CONTAINS(err.message, "stream ended before the response was complete");
    ASSERT_EQ(vg_test_server_count(e.srv), 1);
    recorder_release(&rec);
    teardown(&e);
}

TEST(error_chunk_mid_stream)
{
    struct env e;
    const char *body =
        "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n"
        "data: {\"error\":{\"message\":\"The server had an error while processing your "
        "request.\",\"type\":\"server_error\"}}\n\n";
    struct vg_ts_response rs[] = {{.headers = SSE_HEADERS, .body = body}};
    setup(&e, rs, 1, "sk-test", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_EPROVIDER, vg_model_stream(e.m, &req, &cb, &r, &err));
    ASSERT_CONTAINS(err.message, "The server had an error");
    ASSERT_EQ(vg_test_server_count(e.srv), 1); /* "Hi" was delivered: no retry */
    recorder_release(&rec);
    teardown(&e);
}

/* proves: S4-015 */
TEST(ollama_parallel_tools_in_one_delta_without_key)
{
    struct env e;
    char *sse = vg_test_fixture("model/ollama/03_v1_tool_parallel_one_delta.response.sse", NULL);
    struct vg_ts_response rs[] = {{.headers = SSE_HEADERS, .body = sse}};
    setup(&e, rs, 1, NULL, -1, 0);
    vg_model_free(e.m);
    unsetenv("OPENAI_API_KEY");
    struct vg_model_options o = {.provider = "openai",
                                 .model = "llama3.2",
                                 .base_url = e.base,
                                 .clock = &e.tc.base,
                                 .ids = e.ids,
                                 .stream_usage = -1};
    ASSERT_OK(vg_model_new(&o, &e.m, E));
    struct vg_model_tool t = {"get_weather", "Get the current weather for a city.",
                              "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\","
                              "\"description\":\"The city to get the weather for\"}},"
                              "\"required\":[\"city\"]}",
                              0};
    struct vg_model_message msg = {.role = VG_MODEL_USER,
                                   .text = "Compare the weather in Paris and Tokyo."};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1, .tools = &t, .n_tools = 1};
    struct vg_model_response *r = NULL;
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);

    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    assert_post(&e, 0, "model/ollama/03_v1_tool_parallel_one_delta.request.json", NULL);
    ASSERT(vg_ts_header(vg_test_server_request(e.srv, 0), "Authorization") == NULL);
    ASSERT_EQ(r->n_tool_calls, 2);
    ASSERT_STREQ(r->tool_calls[1].arguments, "{\"city\":\"Tokyo\"}");
    ASSERT_STREQ(rec.args[0].data, "{\"city\":\"Paris\"}");
    ASSERT_EQ(r->stop_reason, VG_MODEL_STOP_TOOL_USE);
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(sse);
}

/* A server that names no tool call (some OpenAI-compatible ones leave "id" out): each call of
 * the turn still gets a name of its own, by its place (call_0, call_1), streamed or not, so its
 * result can be paired with it. proves: S4-015 */
TEST(tool_calls_without_ids_are_named_by_their_place)
{
    static const char body[] =
        "{\"id\":\"x\",\"object\":\"chat.completion\",\"model\":\"m\",\"choices\":[{"
        "\"index\":0,\"finish_reason\":\"tool_calls\",\"message\":{\"role\":\"assistant\","
        "\"content\":null,\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":"
        "\"get_weather\",\"arguments\":\"{}\"}},{\"type\":\"function\",\"id\":\"\","
        "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{}\"}}]}}]}";
    static const char sse[] =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":["
        "{\"index\":0,\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
        "\"arguments\":\"{}\"}},{\"index\":1,\"type\":\"function\",\"function\":{\"name\":"
        "\"get_weather\",\"arguments\":\"{}\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
        "data: [DONE]\n\n";
    struct env e;
    struct vg_ts_response rs[] = {{.headers = JSON_HEADERS, .body = body},
                                  {.headers = SSE_HEADERS, .body = sse}};
    setup(&e, rs, 2, NULL, -1, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Paris and Tokyo?"};
    struct vg_model_request req = {
        .messages = &msg, .n_messages = 1, .tools = &weather, .n_tools = 1};
    struct vg_model_response *r = NULL;
    ASSERT_OK(vg_model_complete(e.m, &req, &r, E));
    ASSERT_EQ(r->n_tool_calls, 2);
    ASSERT_STREQ(r->tool_calls[0].id, "call_0");
    ASSERT_STREQ(r->tool_calls[1].id, "call_1");
    vg_model_response_free(r);
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    ASSERT_EQ(r->n_tool_calls, 2);
    ASSERT_STREQ(r->tool_calls[0].id, "call_0");
    ASSERT_STREQ(r->tool_calls[1].id, "call_1");
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
}

/* proves: S4-015 S4-061 */
TEST(llamacpp_text_and_key_from_environment)
{
    struct env e;
    char *sse = vg_test_fixture("model/llamacpp/01_text_stream_usage.response.sse", NULL);
    struct vg_ts_response rs[] = {{.headers = SSE_HEADERS, .body = sse, .chunk = 3}};
    setup(&e, rs, 1, NULL, 0, 0);
    vg_model_free(e.m);
    setenv("OPENAI_API_KEY", "no-key", 1);
    struct vg_model_options o = {.provider = "openai",
                                 .model = "qwen2.5-7b-instruct",
                                 .base_url = e.base,
                                 .clock = &e.tc.base,
                                 .ids = e.ids};
    ASSERT_OK(vg_model_new(&o, &e.m, E));
    unsetenv("OPENAI_API_KEY");
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Say hello in three words."};
    struct vg_model_request req = {
        .system = "You are a concise assistant.", .messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);

    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    assert_post(&e, 0, "model/llamacpp/01_text_stream_usage.request.json", NULL);
    ASSERT_STREQ(vg_ts_header(vg_test_server_request(e.srv, 0), "Authorization"), "Bearer no-key");
    ASSERT_STREQ(r->text, "Hello there, friend!");
    ASSERT_EQ(r->usage.input_tokens, 27);
    ASSERT_EQ(r->usage.output_tokens, 6);
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(sse);
}

TEST(timeout_is_etimeout)
{
    struct env e;
    struct vg_ts_response rs[] = {{.stall = 1}};
    e.srv = vg_test_server_start(rs, 1);
    vg_test_clock_init(&e.tc, 0);
    e.ids = vg_ids_seeded(&e.tc.base, 1);
    snprintf(e.base, sizeof(e.base), "%s/v1", vg_test_server_url(e.srv));
    struct vg_model_options o = {.provider = "openai",
                                 .model = "m",
                                 .base_url = e.base,
                                 .clock = &e.tc.base,
                                 .ids = e.ids,
                                 .timeout_ms = 300,
                                 .max_retries = -1};
    ASSERT_OK(vg_model_new(&o, &e.m, E));
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_ETIMEOUT, vg_model_complete(e.m, &req, &r, &err));
    ASSERT_EQ(vg_test_server_count(e.srv), 1);
    teardown(&e);
}

TEST(cancel_during_transfer)
{
    struct env e;
    struct vg_ts_response rs[] = {{.stall = 1}};
    setup(&e, rs, 1, "sk-test", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    rec.cancel_now = 1;
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_ECANCELED, vg_model_stream(e.m, &req, &cb, &r, &err));
    ASSERT(r == NULL);
    recorder_release(&rec);
    teardown(&e);
}

/* A complete (not streamed) call is canceled mid-transfer by the request's own check: how a
 * stopping daemon interrupts a run waiting on its model. The server stalls and no retry is
 * allowed, so only the check made during the transfer can end it before the timeout. */
static int cancel_always(void *user)
{
    int *polls = user;
    (*polls)++;
    return 1;
}

TEST(cancel_a_complete_call_during_transfer)
{
    struct env e;
    struct vg_ts_response rs[] = {{.stall = 1}};
    setup(&e, rs, 1, "sk-test", 0, -1);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    int polls = 0;
    struct vg_model_request req = {
        .messages = &msg, .n_messages = 1, .cancel = cancel_always, .cancel_user = &polls};
    struct vg_model_response *r = NULL;
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_ECANCELED, vg_model_complete(e.m, &req, &r, &err));
    ASSERT(r == NULL);
    ASSERT(polls >= 1); /* asked during the transfer, not only between attempts */
    teardown(&e);
}

/* A cancel that comes while the call waits out a rate limit's retry-after ends the call
 * within a slice of the wait (100 ms), not after it: a person who cancels a turn, or a stopping
 * daemon, does not wait out a long retry-after. */
static int cancel_after_a_while(void *user)
{
    const struct vg_test_clock *tc = user;
    return tc->slept_ms >= 300;
}

TEST(cancel_during_a_retry_after_wait_ends_the_wait)
{
    struct env e;
    char *body = vg_test_fixture("model/openai/06_http_429_retry_after.response.json", NULL);
    struct vg_ts_response rs[] = {
        {.status = 429, .headers = JSON_HEADERS "retry-after: 20\r\n", .body = body},
        {.status = 200}};
    setup(&e, rs, 2, "sk-test", 0, 0);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {
        .messages = &msg, .n_messages = 1, .cancel = cancel_after_a_while, .cancel_user = &e.tc};
    struct vg_model_response *r = NULL;
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_ECANCELED, vg_model_complete(e.m, &req, &r, &err));
    ASSERT(r == NULL);
    ASSERT_EQ(vg_test_server_count(e.srv), 1); /* no second attempt */
    ASSERT_EQ(e.tc.slept_ms, 300);             /* not the 20 s the server asked for */
    teardown(&e);
    vg_free(body);
}

TEST(connection_refused_is_enetwork)
{
    struct env e;
    struct vg_ts_response rs[] = {{.status = 200}};
    setup(&e, rs, 1, "sk-test", 0, 1);
    vg_test_server_stop(e.srv); /* nothing listens on the port any more */
    struct vg_ts_response rs2[] = {{.status = 200}};
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_ENETWORK, vg_model_complete(e.m, &req, &r, &err));
    ASSERT_CONTAINS(err.message, "after 2 attempts");
    e.srv = vg_test_server_start(rs2, 1); /* for teardown */
    teardown(&e);
}

TEST(missing_model_id_is_einval)
{
    struct env e;
    struct vg_ts_response rs[] = {{.status = 200}};
    setup(&e, rs, 1, "sk-test", 0, 0);
    vg_model_free(e.m);
    struct vg_model_options o = {
        .provider = "openai", .base_url = e.base, .clock = &e.tc.base, .ids = e.ids};
    ASSERT_OK(vg_model_new(&o, &e.m, E));
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EINVAL, vg_model_complete(e.m, &req, &r, &err));
    ASSERT_EQ(vg_test_server_count(e.srv), 0);
    teardown(&e);
}

static vigil_code build_plain(const struct vg_model_request *req, char **body, vigil_error *err)
{
    return vg_openai_build_body(req, "m", 0, 0, body, err);
}

TEST(dumped_schema_sent_as_it_is)
{
    assert_dumped_schema_sent_as_it_is(build_plain, WEATHER_SCHEMA_STRICT);
}

/* The answer read without a jansson tree: whatever the body, the outcome and every field are
 * what the jansson reader makes of it (answers of unusual shape are left to that reader). */
TEST(answers_read_without_a_tree_match_the_jansson_reader)
{
    static const char *const bodies[] = {
        /* the usual shapes */
        "{\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
        "\"assistant\",\"content\":\"hi \\\"there\\\"\\n\\u00e9\\ud83d\\ude00\",\"refusal\":null},"
        "\"finish_reason\":\"stop\",\"logprobs\":null}],\"usage\":{\"prompt_tokens\":12,"
        "\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":5}}}",
        "{\"choices\":[{\"message\":{\"content\":null,\"tool_calls\":[{\"id\":\"a\",\"function\":"
        "{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":1}\"}},{\"function\":{\"name\":\"g\"}}]},"
        "\"finish_reason\":\"tool_calls\"},{\"message\":{}}]}",
        "{\"choices\":[{\"message\":{\"refusal\":\"no\"},\"finish_reason\":\"stop\"}],"
        "\"usage\":null}",
        "{\"choices\":[{\"message\":{\"content\":\"x\"},\"finish_reason\":\"length\"}],"
        "\"usage\":{\"prompt_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":9}}}",
        /* shapes left to the jansson reader */
        "{\"choices\":[{\"message\":{\"content\":\"a\",\"content\":\"b\"}}]}",
        "{\"choices\":[{\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"x\"}]}}]}",
        "{\"choices\":[{\"message\":{\"tool_calls\":[{\"function\":{\"name\":\"f\","
        "\"arguments\":{\"x\":1}}}]}}]}",
        "{\"choices\":[{\"message\":{\"tool_calls\":[{\"function\":{\"arguments\":\"{}\"}}]}}]}",
        "{\"choices\":[{\"message\":{\"content\":\"x\"}}],\"usage\":{\"prompt_tokens\":1.5}}",
        "{\"\\u0063hoices\":[{\"message\":{\"content\":\"x\"}}]}",
        "{\"error\":{\"message\":\"nope\",\"type\":\"invalid_request_error\"}}",
        "{\"error\":null,\"choices\":[{\"message\":{\"content\":\"x\"}}]}",
        "{\"choices\":[]}",
        "{\"choices\":[{\"message\":\"x\"}]}",
        "{\"choices\":{}}",
        "[1]",
        "{\"choices\":[{\"message\":{\"content\":\"x\"}}]} trailing",
        "{\"choices\":[{\"message\":{\"content\":\"\\u0000\"}}]}",
        "{\"id\":7,\"choices\":[{\"message\":{\"content\":\"x\"},\"finish_reason\":1}]}",
    };
    for (size_t i = 0; i < VG_ARRAY_LEN(bodies); i++) {
        struct vg_model_response *a = NULL, *b = NULL;
        vigil_error ea = {0}, eb = {0};
        size_t len = strlen(bodies[i]);
        vg_alloc_fail_at(LONG_MAX, 0); /* count allocations, fail none */
        vigil_code ra = vg_openai_parse_response(bodies[i], len, &a, &ea);
        long fast = vg_alloc_count();
        vg_alloc_fail_at(LONG_MAX, 0);
        vigil_code rb = vg_openai_parse_response_tree(bodies[i], len, &b, &eb);
        long tree = vg_alloc_count();
        vg_alloc_fail_at(0, 0);
        /* The usual shapes (the first four) are read without the tree: a few allocations for
         * the response, where the tree takes one for every value and key. */
        if (i < 4 && fast * 2 >= tree)
            TEST_FAIL_("body %zu: %ld allocations without the tree, %ld with it", i, fast, tree);
        if (ra != rb || (ra == VIGIL_OK && !vg_model_response_same(a, b)))
            TEST_FAIL_("body %zu: %s / %s", i, ea.message, eb.message);
        if (ra != VIGIL_OK)
            ASSERT_STREQ(ea.message, eb.message);
        vg_model_response_free(a);
        vg_model_response_free(b);
    }
}

/* Servers that ignore `stream: true` answer with one JSON document: it is read by its
 * Content-Type, tool calls included, and passed on through the stream callbacks as a stream
 * would have been. proves: S4-015 */
TEST(json_answer_to_a_streaming_request_is_read_by_its_content_type)
{
    struct env e;
    char *body = vg_test_fixture("model/openai/09_nonstream_tool_calls.response.json", NULL);
    struct vg_ts_response rs[] = {
        {.headers = "Content-Type: application/json; charset=utf-8\r\nx-request-id: req_j\r\n",
         .body = body,
         .chunk = 7}};
    setup(&e, rs, 1, "sk-test", -1, -1);
    struct vg_model_message msg = {.role = VG_MODEL_USER,
                                   .text = "Compare the weather in Paris and Tokyo."};
    struct vg_model_request req = {
        .messages = &msg, .n_messages = 1, .tools = &weather, .n_tools = 1};
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    struct vg_model_response *r = NULL;

    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    ASSERT_CONTAINS(vg_test_server_request(e.srv, 0)->body, "\"stream\":true");
    ASSERT_EQ(r->n_tool_calls, 2);
    ASSERT_STREQ(r->tool_calls[0].arguments, "{\"location\": \"Paris\"}");
    ASSERT_STREQ(r->tool_calls[1].id, "call_8q1fIyBb1oHvaO9otvzFYdxC");
    ASSERT_EQ(r->stop_reason, VG_MODEL_STOP_TOOL_USE);
    ASSERT_EQ(r->usage.input_tokens, 96);
    ASSERT_STREQ(r->request_id, "req_j");
    ASSERT_EQ(rec.starts, 2);
    ASSERT_STREQ(rec.ids[1], "call_8q1fIyBb1oHvaO9otvzFYdxC");
    ASSERT_STREQ(rec.args[1].data, "{\"location\": \"Tokyo\", \"unit\": \"celsius\"}");
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(body);
}

/* The same for a text answer: the words reach the stream callbacks. proves: S4-015 */
TEST(json_text_answer_to_a_streaming_request_reaches_the_callbacks)
{
    struct env e;
    char *body = vg_test_fixture("model/openai/10_tool_result_followup.response.json", NULL);
    struct vg_ts_response rs[] = {{.headers = JSON_HEADERS, .body = body}};
    setup(&e, rs, 1, "sk-test", -1, -1);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Weather?"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    struct vg_model_response *r = NULL;

    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    ASSERT_CONTAINS(r->text, "Paris is 14");
    ASSERT_STREQ(rec.text.data, r->text);
    ASSERT_EQ(r->stop_reason, VG_MODEL_STOP_END_TURN);
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(body);
}

#define QUOTA_BODY                                                                                 \
    "{\"error\":{\"message\":\"You exceeded your current quota, please check your plan and "       \
    "billing details.\",\"type\":\"insufficient_quota\",\"param\":null,\"code\":"                  \
    "\"insufficient_quota\"}}"

/* A 429 that says the quota is used up is no rate limit: waiting does not help, so it is not
 * retried (a retry-after included), and the message sends the user to billing. */
TEST(insufficient_quota_is_not_retried_and_says_check_billing)
{
    for (int stream = 0; stream < 2; stream++) {
        struct env e;
        struct vg_ts_response rs[] = {
            {.status = 429,
             .headers = JSON_HEADERS "retry-after: 1\r\nx-request-id: req_q\r\n",
             .body = QUOTA_BODY}};
        setup(&e, rs, 1, "sk-test", 0, 0);
        struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
        struct vg_model_request req = {.messages = &msg, .n_messages = 1};
        struct vg_model_response *r = NULL;
        struct recorder rec;
        struct vg_model_stream_cb cb = recorder_init(&rec);
        vigil_error err = {0};

        ASSERT_CODE(VIGIL_EPROVIDER, stream ? vg_model_stream(e.m, &req, &cb, &r, &err)
                                            : vg_model_complete(e.m, &req, &r, &err));
        ASSERT(r == NULL);
        ASSERT_EQ(vg_test_server_count(e.srv), 1);
        ASSERT_EQ(e.tc.slept_ms, 0);
        ASSERT_EQ(err.subcode, 429);
        ASSERT_CONTAINS(err.message, "openai: the account's quota or credit is used up");
        ASSERT_CONTAINS(err.message, "check the plan and billing with the provider");
        ASSERT_CONTAINS(err.message, "You exceeded your current quota");
        ASSERT_CONTAINS(err.detail, "req_q");
        recorder_release(&rec);
        teardown(&e);
    }
}

/* An answer cut by max_tokens (finish_reason "length") while the model wrote a tool call: the
 * response says so, streamed or not, and keeps the calls as written. A text answer cut short
 * has no cut call. proves: S4-046 */
TEST(tool_call_cut_by_length_is_reported)
{
    static const char sse[] =
        "data: {\"id\":\"c1\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"role\":"
        "\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":"
        "\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]},"
        "\"finish_reason\":null}]}\n\n"
        "data: {\"id\":\"c1\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{"
        "\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"location\\\": \\\"Pa\"}}"
        "]},\"finish_reason\":null}]}\n\n"
        "data: {\"id\":\"c1\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{},"
        "\"finish_reason\":\"length\"}]}\n\n"
        "data: [DONE]\n\n";
    static const char json[] =
        "{\"id\":\"c2\",\"object\":\"chat.completion\",\"model\":\"gpt-4o\",\"choices\":[{"
        "\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":"
        "\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
        "\"{\\\"location\\\": \\\"To\"}}]},\"finish_reason\":\"length\"}],\"usage\":{"
        "\"prompt_tokens\":9,\"completion_tokens\":8,\"total_tokens\":17}}";
    for (int stream = 0; stream < 2; stream++) {
        struct env e;
        struct vg_ts_response rs[] = {
            {.headers = stream ? SSE_HEADERS : JSON_HEADERS, .body = stream ? sse : json}};
        setup(&e, rs, 1, "sk-test", 0, 0);
        struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Weather in Paris?"};
        struct vg_model_request req = {
            .messages = &msg, .n_messages = 1, .tools = &weather, .n_tools = 1, .max_tokens = 8};
        struct vg_model_response *r = NULL;
        struct recorder rec;
        struct vg_model_stream_cb cb = recorder_init(&rec);

        ASSERT_OK(stream ? vg_model_stream(e.m, &req, &cb, &r, E)
                         : vg_model_complete(e.m, &req, &r, E));
        ASSERT_EQ(r->stop_reason, VG_MODEL_STOP_MAX_TOKENS);
        ASSERT_STREQ(r->stop_raw, "length");
        ASSERT_EQ(r->n_tool_calls, 1);
        ASSERT_STREQ(r->tool_calls[0].arguments,
                     stream ? "{\"location\": \"Pa" : "{\"location\": \"To");
        ASSERT(r->tool_calls_cut);
        vg_model_response_free(r);
        recorder_release(&rec);
        teardown(&e);
    }
}

/* model.max_tokens in the config is what a request that sets none sends; a request's own
 * wins. */
TEST(configured_max_tokens_is_sent_when_the_request_sets_none)
{
    char *body = vg_test_fixture("model/openai/10_tool_result_followup.response.json", NULL);
    struct vg_ts_response rs[] = {{.headers = JSON_HEADERS, .body = body}};
    struct vg_test_server *srv = vg_test_server_start(rs, 1);
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "model:\n  provider: openai\n  name: gpt-4o\n  base_url: %s/v1\n"
             "  max_tokens: 4096\n",
             vg_test_server_url(srv));
    struct vg_config *cfg = NULL;
    struct vg_model *m = NULL;
    ASSERT_OK(vg_config_parse(yaml, strlen(yaml), "c.yaml", &cfg, E));
    ASSERT_OK(vg_model_from_config(cfg, NULL, NULL, &m, E));
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hi"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    ASSERT_OK(vg_model_complete(m, &req, &r, E));
    vg_model_response_free(r);
    req.max_tokens = 100;
    ASSERT_OK(vg_model_complete(m, &req, &r, E));
    vg_model_response_free(r);
    ASSERT_CONTAINS(vg_test_server_request(srv, 0)->body, "\"max_completion_tokens\":4096");
    ASSERT_CONTAINS(vg_test_server_request(srv, 1)->body, "\"max_completion_tokens\":100");
    vg_model_free(m);
    vg_config_free(cfg);
    vg_test_server_stop(srv);
    vg_free(body);
}

#ifndef VIGIL_CURL_LINKED
/* Whether a library whose file name contains name is mapped into this process. */
static int mapped(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    ASSERT(f != NULL);
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, name) != NULL;
    fclose(f);
    return found;
}

/* Its first case: no request made before it. The load's passing peak comes while the process
 * is small, not on top of the runs in flight at the first request (src/model/model.c). */
TEST(an_http_provider_loads_libcurl_when_it_is_made)
{
    ASSERT(!mapped("/libcurl.so"));
    struct vg_model_options o = {.provider = "openai", .base_url = "http://127.0.0.1:1/v1"};
    struct vg_model *m = NULL;
    ASSERT_OK(vg_model_new(&o, &m, E));
    ASSERT(mapped("/libcurl.so"));
    vg_model_free(m);
}
#endif

int main(void)
{
    vg_alloc_install_json();
#ifndef VIGIL_CURL_LINKED
    RUN(an_http_provider_loads_libcurl_when_it_is_made);
#endif
    RUN(text_stream_with_usage);
    RUN(dumped_schema_sent_as_it_is);
    RUN(single_tool_stream_split_arguments);
    RUN(parallel_tools_stream);
    RUN(arguments_in_many_chunks_with_text);
    RUN(rate_limit_waits_retry_after_through_test_clock);
    RUN(rate_limit_persisting_is_a_structured_error);
    RUN(a_long_provider_message_keeps_the_lines_end);
    RUN(a_retry_after_too_long_says_so_in_the_message);
    RUN(length_stop_is_max_tokens);
    RUN(non_streaming_parallel_tool_calls);
    RUN(answers_read_without_a_tree_match_the_jansson_reader);
    RUN(tool_result_followup_request);
    RUN(bad_key_is_eauth_and_not_retried);
    RUN(a_key_the_server_quotes_is_not_in_the_error);
    RUN(a_password_in_the_base_url_is_not_in_the_error);
    RUN(bad_request_is_einval_with_provider_message);
    RUN(server_error_retried_then_succeeds);
    RUN(malformed_json_body_is_eparse);
    RUN(malformed_stream_chunk_is_eparse);
    RUN(stream_cut_after_delivery_is_not_retried);
    RUN(stream_cut_before_delivery_is_retried);
    RUN(stream_without_finish_is_an_error);
    RUN(error_chunk_mid_stream);
    RUN(ollama_parallel_tools_in_one_delta_without_key);
    RUN(tool_calls_without_ids_are_named_by_their_place);
    RUN(llamacpp_text_and_key_from_environment);
    RUN(timeout_is_etimeout);
    RUN(cancel_during_transfer);
    RUN(cancel_a_complete_call_during_transfer);
    RUN(cancel_during_a_retry_after_wait_ends_the_wait);
    RUN(connection_refused_is_enetwork);
    RUN(missing_model_id_is_einval);
    RUN(json_answer_to_a_streaming_request_is_read_by_its_content_type);
    RUN(json_text_answer_to_a_streaming_request_reaches_the_callbacks);
    RUN(insufficient_quota_is_not_retried_and_says_check_billing);
    RUN(tool_call_cut_by_length_is_reported);
    RUN(configured_max_tokens_is_sent_when_the_request_sets_none);
    return 0;
}
