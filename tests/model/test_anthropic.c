/*
 * test_anthropic.c: the Anthropic Messages adapter against a loopback HTTP server with the
 * fixture streams (tests/fixtures/model/anthropic): exact requests (headers and body as JSON,
 * prompt-caching markers included), normalized responses, error events mid-stream, 429 and
 * 529 handling through the test clock.
 */
#include "model/model_test.h"

#include "model/anthropic/anthropic.h"

#define SSE_HEADERS "Content-Type: text/event-stream\r\nrequest-id: req_011Ctest\r\n"
#define JSON_HEADERS "Content-Type: application/json\r\n"

struct env {
    struct vg_test_server *srv;
    struct vg_model *m;
    struct vg_test_clock tc;
    struct vg_ids *ids;
    char base[128];
};

static void setup(struct env *e, const struct vg_ts_response *rs, size_t n)
{
    e->srv = vg_test_server_start(rs, n);
    vg_test_clock_init(&e->tc, 1795338031000LL);
    e->ids = vg_ids_seeded(&e->tc.base, 7);
    snprintf(e->base, sizeof(e->base), "%s/v1", vg_test_server_url(e->srv));
    struct vg_model_options o = {.provider = "anthropic",
                                 .model = "claude-sonnet-4-20250514",
                                 .base_url = e->base,
                                 .api_key = "sk-ant-test",
                                 .clock = &e->tc.base,
                                 .ids = e->ids,
                                 .timeout_ms = 5000};
    ASSERT_OK(vg_model_new(&o, &e->m, E));
}

static void teardown(struct env *e)
{
    vg_model_free(e->m);
    vg_ids_free(e->ids);
    vg_test_server_stop(e->srv);
}

static void assert_post(struct env *e, size_t i, const char *fixture, int stream)
{
    const struct vg_ts_request *r = vg_test_server_request(e->srv, i);
    ASSERT(r != NULL);
    ASSERT_STREQ(r->method, "POST");
    ASSERT_STREQ(r->path, "/v1/messages");
    ASSERT_STREQ(vg_ts_header(r, "x-api-key"), "sk-ant-test");
    ASSERT_STREQ(vg_ts_header(r, "anthropic-version"), "2023-06-01");
    ASSERT_STREQ(vg_ts_header(r, "content-type"), "application/json");
    if (stream)
        ASSERT_STREQ(vg_ts_header(r, "accept"), "text/event-stream");
    ASSERT(vg_ts_header(r, "Authorization") == NULL);
    assert_json_fixture(r->body, fixture);
}

static const struct vg_model_tool weather = {"get_weather", "Get the current weather for a city.",
                                             WEATHER_SCHEMA, 0};

/* proves: S4-013 S4-014 S4-046 */
TEST(text_stream)
{
    struct env e;
    char *sse = vg_test_fixture("model/anthropic/01_text_stream.response.sse", NULL);
    struct vg_ts_response rs[] = {{.headers = SSE_HEADERS, .body = sse, .chunk = 9}};
    setup(&e, rs, 1);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Say hello in three words."};
    struct vg_model_request req = {
        .system = "You are a concise assistant.", .messages = &msg, .n_messages = 1};
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    struct vg_model_response *r = NULL;

    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    assert_post(&e, 0, "model/anthropic/01_text_stream.request.json", 1);
    ASSERT_STREQ(r->text, "Hello there, friend!");
    ASSERT_EQ(r->n_text_blocks, 1);
    ASSERT_STREQ(rec.text.data, "Hello there, friend!");
    ASSERT_EQ(rec.text_calls, 3);
    ASSERT_EQ(r->stop_reason, VG_MODEL_STOP_END_TURN);
    ASSERT_EQ(r->usage.input_tokens, 21);
    ASSERT_EQ(r->usage.output_tokens, 9);
    ASSERT_STREQ(r->response_id, "msg_01KGpOyQNcdOyZbkBFTFoOxt");
    ASSERT_STREQ(r->request_id, "req_011Ctest");
    ASSERT_STREQ(r->provider, "anthropic");
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(sse);
}

/* proves: S4-013 S4-014 */
TEST(single_tool_stream)
{
    struct env e;
    char *sse = vg_test_fixture("model/anthropic/02_tool_single_stream.response.sse", NULL);
    struct vg_ts_response rs[] = {{.headers = SSE_HEADERS, .body = sse, .chunk = 1}};
    setup(&e, rs, 1);
    struct vg_model_message msg = {.role = VG_MODEL_USER,
                                   .text = "What's the weather in Paris right now?"};
    struct vg_model_request req = {
        .messages = &msg, .n_messages = 1, .tools = &weather, .n_tools = 1};
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    struct vg_model_response *r = NULL;

    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    assert_post(&e, 0, "model/anthropic/02_tool_single_stream.request.json", 1);
    ASSERT_STREQ(r->text, "I'll check the current weather in Paris for you.");
    ASSERT_EQ(r->n_tool_calls, 1);
    ASSERT_STREQ(r->tool_calls[0].id, "toolu_01WwDllJtWR6zqlIKiUBKnCf");
    ASSERT_STREQ(r->tool_calls[0].arguments, "{\"location\": \"Paris\", \"unit\": \"celsius\"}");
    ASSERT_EQ(rec.starts, 1);
    ASSERT_STREQ(rec.ids[0], "toolu_01WwDllJtWR6zqlIKiUBKnCf");
    ASSERT_STREQ(rec.args[0].data, r->tool_calls[0].arguments);
    ASSERT_EQ(r->stop_reason, VG_MODEL_STOP_TOOL_USE);
    ASSERT_EQ(r->usage.output_tokens, 71);
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(sse);
}

/* proves: S4-013 S4-046 */
TEST(parallel_tools_stream)
{
    struct env e;
    char *sse = vg_test_fixture("model/anthropic/03_tool_parallel_stream.response.sse", NULL);
    struct vg_ts_response rs[] = {{.headers = SSE_HEADERS, .body = sse}};
    setup(&e, rs, 1);
    struct vg_model_message msg = {.role = VG_MODEL_USER,
                                   .text = "Compare the weather in Paris and Tokyo."};
    struct vg_model_request req = {.messages = &msg,
                                   .n_messages = 1,
                                   .tools = &weather,
                                   .n_tools = 1,
                                   .tool_choice = VG_MODEL_TOOL_CHOICE_AUTO};
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    struct vg_model_response *r = NULL;

    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    assert_post(&e, 0, "model/anthropic/03_tool_parallel_stream.request.json", 1);
    ASSERT_EQ(r->n_tool_calls, 2);
    ASSERT_STREQ(r->tool_calls[0].arguments, "{\"location\": \"Paris\"}");
    ASSERT_STREQ(r->tool_calls[1].arguments, "{\"location\": \"Tokyo\", \"unit\": \"celsius\"}");
    ASSERT_EQ(rec.starts, 2);
    ASSERT_STREQ(rec.args[1].data, r->tool_calls[1].arguments);
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(sse);
}

TEST(forced_tool_arguments_in_many_deltas)
{
    struct env e;
    char *sse = vg_test_fixture("model/anthropic/04_tool_args_many_deltas.response.sse", NULL);
    struct vg_ts_response rs[] = {{.headers = SSE_HEADERS, .body = sse, .chunk = 13}};
    setup(&e, rs, 1);
    struct vg_model_message msg = {
        .role = VG_MODEL_USER,
        .text = "Add two todo items to notes/todo.md: buy milk, and call \"Ana\" about the café "
                "hours."};
    struct vg_model_tool wf = {"write_file", "Write text to a file in the agent workspace.",
                               WRITE_FILE_SCHEMA, 0};
    struct vg_model_request req = {.messages = &msg,
                                   .n_messages = 1,
                                   .tools = &wf,
                                   .n_tools = 1,
                                   .tool_choice = VG_MODEL_TOOL_CHOICE_TOOL,
                                   .tool_choice_name = "write_file"};
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    struct vg_model_response *r = NULL;

    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    assert_post(&e, 0, "model/anthropic/04_tool_args_many_deltas.request.json", 1);
    json_t *args = json_loads(r->tool_calls[0].arguments, 0, NULL);
    ASSERT(args != NULL);
    ASSERT_STREQ(json_string_value(json_object_get(args, "content")),
                 "- [ ] buy milk\n- [ ] call \"Ana\" re: café hours\n");
    ASSERT(json_is_true(json_object_get(args, "append")));
    json_decref(args);
    ASSERT_STREQ(r->text, "");
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(sse);
}

/* proves: S4-018 */
TEST(rate_limit_retry_after_seconds)
{
    struct env e;
    char *body = vg_test_fixture("model/anthropic/06_http_429_retry_after.response.json", NULL);
    char *sse = vg_test_fixture("model/anthropic/01_text_stream.response.sse", NULL);
    struct vg_ts_response rs[] = {
        {.status = 429,
         .headers = JSON_HEADERS "retry-after: 13\r\nx-should-retry: true\r\n",
         .body = body},
        {.headers = SSE_HEADERS, .body = sse}};
    setup(&e, rs, 2);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    struct vg_model_response *r = NULL;

    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    assert_post(&e, 0, "model/anthropic/06_http_429_retry_after.request.json", 1);
    ASSERT_EQ(e.tc.slept_ms, 13000);
    ASSERT_EQ(r->attempts, 2);
    ASSERT_EQ(r->latency_ms, 13000); /* the test clock only moved by the wait */
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(body);
    vg_free(sse);
}

TEST(rate_limit_retry_after_http_date)
{
    struct env e;
    /* The test clock stands at 2026-11-22T09:00:31Z; the date is 20 s later. */
    struct vg_ts_response rs[] = {
        {.status = 429,
         .headers = JSON_HEADERS "retry-after: Sun, 22 Nov 2026 09:00:51 GMT\r\n",
         .body =
             "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow\"}}"},
        {.headers = JSON_HEADERS,
         .body = "{\"id\":\"m\",\"content\":[{\"type\":\"text\",\"text\":\"ok\"}],\"stop_reason\":"
                 "\"end_turn\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}"}};
    setup(&e, rs, 2);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;

    ASSERT_OK(vg_model_complete(e.m, &req, &r, E));
    ASSERT_EQ(e.tc.slept_ms, 20000);
    ASSERT_STREQ(r->text, "ok");
    vg_model_response_free(r);
    teardown(&e);
}

/* proves: S4-018 */
TEST(overloaded_529_retries_with_backoff_then_fails)
{
    struct env e;
    char *body = vg_test_fixture("model/anthropic/07_http_529_overloaded.response.json", NULL);
    struct vg_ts_response rs[] = {{.status = 529, .headers = JSON_HEADERS, .body = body}};
    setup(&e, rs, 1);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    struct vg_model_response *r = NULL;
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_EOVERLOAD, vg_model_stream(e.m, &req, &cb, &r, &err));
    assert_post(&e, 2, "model/anthropic/07_http_529_overloaded.request.json", 1);
    ASSERT_EQ(vg_test_server_count(e.srv), 3);
    ASSERT(e.tc.slept_ms <= 500 + 1000); /* full jitter under the 500 ms and 1 s ceilings */
    ASSERT_EQ(err.subcode, 529);
    ASSERT_CONTAINS(err.message, "Overloaded");
    recorder_release(&rec);
    teardown(&e);
    vg_free(body);
}

/* proves: S4-046 */
TEST(max_tokens_stop)
{
    struct env e;
    char *sse = vg_test_fixture("model/anthropic/08_max_tokens_text.response.sse", NULL);
    struct vg_ts_response rs[] = {{.headers = SSE_HEADERS, .body = sse}};
    setup(&e, rs, 1);
    struct vg_model_message msg = {.role = VG_MODEL_USER,
                                   .text = "Tell me the history of the printing press."};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1, .max_tokens = 16};
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    struct vg_model_response *r = NULL;

    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    assert_post(&e, 0, "model/anthropic/08_max_tokens_text.request.json", 1);
    ASSERT_EQ(r->stop_reason, VG_MODEL_STOP_MAX_TOKENS);
    ASSERT_STREQ(r->text, "The history of the printing press begins in the 1440s, when Johannes");
    ASSERT(!r->tool_calls_cut); /* cut in its text: no call to hold back */
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(sse);
}

/* proves: S4-013 */
TEST(non_streaming_tool_use)
{
    struct env e;
    char *body = vg_test_fixture("model/anthropic/10_nonstream_tool_use.response.json", NULL);
    struct vg_ts_response rs[] = {{.headers = JSON_HEADERS, .body = body}};
    setup(&e, rs, 1);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Weather in Berlin?"};
    struct vg_model_request req = {
        .messages = &msg, .n_messages = 1, .tools = &weather, .n_tools = 1};
    struct vg_model_response *r = NULL;

    ASSERT_OK(vg_model_complete(e.m, &req, &r, E));
    assert_post(&e, 0, "model/anthropic/10_nonstream_tool_use.request.json", 0);
    ASSERT(vg_ts_header(vg_test_server_request(e.srv, 0), "accept") == NULL ||
           strcmp(vg_ts_header(vg_test_server_request(e.srv, 0), "accept"), "text/event-stream"));
    ASSERT_STREQ(r->text, "Let me check that for you.");
    ASSERT_EQ(r->n_tool_calls, 1);
    ASSERT_STREQ(r->tool_calls[0].arguments, "{\"location\":\"Berlin\",\"unit\":\"celsius\"}");
    ASSERT_EQ(r->stop_reason, VG_MODEL_STOP_TOOL_USE);
    ASSERT_EQ(r->usage.input_tokens, 402);
    ASSERT_EQ(r->usage.output_tokens, 68);
    vg_model_response_free(r);
    teardown(&e);
    vg_free(body);
}

/* proves: S4-045 */
TEST(tool_result_followup_with_prompt_caching)
{
    struct env e;
    char *sse = vg_test_fixture("model/anthropic/11_tool_result_followup.response.sse", NULL);
    struct vg_ts_response rs[] = {{.headers = SSE_HEADERS, .body = sse}};
    setup(&e, rs, 1);
    struct vg_model_tool_call calls[] = {
        {"toolu_018kVzjliKE1QufhQNB9reos", "get_weather", "{\"location\": \"Paris\"}"},
        {"toolu_01fhypnXLDn8S9wPNWkPLR34", "get_weather",
         "{\"location\": \"Tokyo\", \"unit\": \"celsius\"}"}};
    struct vg_model_message msgs[] = {
        {.role = VG_MODEL_USER, .text = "Compare the weather in Paris and Tokyo."},
        {.role = VG_MODEL_ASSISTANT,
         .text = "I'll look up both cities at once.",
         .tool_calls = calls,
         .n_tool_calls = 2},
        {.role = VG_MODEL_TOOL,
         .tool_call_id = "toolu_018kVzjliKE1QufhQNB9reos",
         .text = "14°C, light rain, wind 18 km/h"},
        {.role = VG_MODEL_TOOL,
         .tool_call_id = "toolu_01fhypnXLDn8S9wPNWkPLR34",
         .text = "weather service timeout after 10s",
         .is_error = 1}};
    struct vg_model_request req = {.system = "You are a weather assistant.",
                                   .messages = msgs,
                                   .n_messages = 4,
                                   .tools = &weather,
                                   .n_tools = 1,
                                   .cache_prompt = 1};
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    struct vg_model_response *r = NULL;

    ASSERT(vg_model_caps(e.m) & VG_MODEL_CAP_PROMPT_CACHE);
    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    assert_post(&e, 0, "model/anthropic/11_tool_result_followup.request.json", 1);
    ASSERT_EQ(r->usage.cache_read_tokens, 466);
    ASSERT_EQ(r->usage.input_tokens, 57);
    ASSERT_EQ(r->usage.output_tokens, 33);
    ASSERT_CONTAINS(r->text, "want me to retry?");
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(sse);
}

/* Without a system prompt the cache marker goes on the last tool. proves: S4-045 */
TEST(cache_marker_on_last_tool_without_system)
{
    struct vg_model_tool tools[2] = {weather, {"b", NULL, NULL, 0}};
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "hi"};
    struct vg_model_request req = {
        .messages = &msg, .n_messages = 1, .tools = tools, .n_tools = 2, .cache_prompt = 1};
    struct env e;
    struct vg_ts_response rs[] = {
        {.headers = JSON_HEADERS,
         .body = "{\"id\":\"m\",\"content\":[],\"stop_reason\":\"end_turn\",\"usage\":{}}"}};
    setup(&e, rs, 1);
    struct vg_model_response *r = NULL;
    ASSERT_OK(vg_model_complete(e.m, &req, &r, E));
    json_t *body = json_loads(vg_test_server_request(e.srv, 0)->body, 0, NULL);
    json_t *t = json_object_get(body, "tools");
    ASSERT(json_object_get(json_array_get(t, 0), "cache_control") == NULL);
    ASSERT_STREQ(json_string_value(json_object_get(
                     json_object_get(json_array_get(t, 1), "cache_control"), "type")),
                 "ephemeral");
    ASSERT_STREQ(r->text, "");
    json_decref(body);
    vg_model_response_free(r);
    teardown(&e);
}

TEST(error_event_mid_stream_is_reported_not_retried)
{
    struct env e;
    const char *body =
        "event: message_start\n"
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"c\","
        "\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"
        "event: content_block_start\n"
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\","
        "\"text\":\"\"}}\n\n"
        "event: content_block_delta\n"
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
        "\"text\":\"Partial\"}}\n\n"
        "event: error\n"
        "data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":"
        "\"Overloaded\"}}\n\n";
    struct vg_ts_response rs[] = {{.headers = SSE_HEADERS, .body = body}};
    setup(&e, rs, 1);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    struct vg_model_response *r = NULL;
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_EOVERLOAD, vg_model_stream(e.m, &req, &cb, &r, &err));
    ASSERT(r == NULL);
    ASSERT_STREQ(rec.text.data, "Partial");
    ASSERT_EQ(vg_test_server_count(e.srv), 1);
    ASSERT_CONTAINS(err.message, "overloaded_error");
    ASSERT_CONTAINS(err.detail, "already delivered");
    recorder_release(&rec);
    teardown(&e);
}

TEST(error_event_before_output_is_retried)
{
    struct env e;
    char *sse = vg_test_fixture("model/anthropic/01_text_stream.response.sse", NULL);
    struct vg_ts_response rs[] = {
        {.headers = SSE_HEADERS,
         .body = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
                 "\"message\":\"Overloaded\"}}\n\n"},
        {.headers = SSE_HEADERS, .body = sse}};
    setup(&e, rs, 2);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    struct vg_model_response *r = NULL;

    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    ASSERT_EQ(r->attempts, 2);
    ASSERT_STREQ(rec.text.data, "Hello there, friend!");
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(sse);
}

TEST(cut_stream_without_message_stop)
{
    struct env e;
    char *sse = vg_test_fixture("model/anthropic/02_tool_single_stream.response.sse", NULL);
    const char *at =
        strstr(sse, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\","
                    "\"index\":1}");
    ASSERT(at != NULL);
    struct vg_ts_response rs[] = {
        {.headers = SSE_HEADERS, .body = sse, .body_len = (size_t)(at - sse)}};
    setup(&e, rs, 1);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    struct vg_model_response *r = NULL;
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_ENETWORK, vg_model_stream(e.m, &req, &cb, &r, &err));
    ASSERT(r == NULL);
    ASSERT_CONTAINS(err.message, "message_stop");
    ASSERT_EQ(vg_test_server_count(e.srv), 1);
    recorder_release(&rec);
    teardown(&e);
    vg_free(sse);
}

/* proves: S4-017 */
TEST(bad_key_is_eauth)
{
    struct env e;
    struct vg_ts_response rs[] = {
        {.status = 401,
         .headers = JSON_HEADERS,
         .body = "{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":"
                 "\"invalid x-api-key\"}}"}};
    setup(&e, rs, 1);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_EAUTH, vg_model_complete(e.m, &req, &r, &err));
    ASSERT_EQ(vg_test_server_count(e.srv), 1);
    ASSERT_CONTAINS(err.message, "invalid x-api-key");
    teardown(&e);
}

/* The x-api-key a server quotes back is not kept in the error (trial H5). */
TEST(a_key_the_server_quotes_is_not_in_the_error)
{
    struct env e;
    struct vg_ts_response rs[] = {
        {.status = 401,
         .headers = JSON_HEADERS,
         .body = "{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":"
                 "\"invalid x-api-key sk-ant-test\"}}"}};
    setup(&e, rs, 1);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_EAUTH, vg_model_complete(e.m, &req, &r, &err));
    ASSERT(strstr(err.message, "sk-ant-test") == NULL);
    ASSERT_CONTAINS(err.message, "invalid x-api-key [redacted]");
    teardown(&e);
}

static vigil_code build_plain(const struct vg_model_request *req, char **body, vigil_error *err)
{
    return vg_anthropic_build_body(req, "m", 0, body, err);
}

TEST(dumped_schema_sent_as_it_is)
{
    assert_dumped_schema_sent_as_it_is(build_plain, WEATHER_SCHEMA);
}

/* A server that ignores `stream: true` and answers with one JSON message: read by its
 * Content-Type, tool use included, and passed on through the stream callbacks. proves: S4-013 */
TEST(json_answer_to_a_streaming_request_is_read_by_its_content_type)
{
    struct env e;
    char *body = vg_test_fixture("model/anthropic/10_nonstream_tool_use.response.json", NULL);
    struct vg_ts_response rs[] = {
        {.headers = JSON_HEADERS "request-id: req_j\r\n", .body = body, .chunk = 11}};
    setup(&e, rs, 1);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Weather in Berlin?"};
    struct vg_model_request req = {
        .messages = &msg, .n_messages = 1, .tools = &weather, .n_tools = 1};
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    struct vg_model_response *r = NULL;

    ASSERT_OK(vg_model_stream(e.m, &req, &cb, &r, E));
    ASSERT_EQ(vg_test_server_count(e.srv), 1);
    ASSERT_CONTAINS(vg_test_server_request(e.srv, 0)->body, "\"stream\":true");
    ASSERT_STREQ(r->text, "Let me check that for you.");
    ASSERT_EQ(r->n_tool_calls, 1);
    ASSERT_STREQ(r->tool_calls[0].id, "toolu_01ClDVwQB9e6k8wmSwk81zG4");
    ASSERT_STREQ(r->tool_calls[0].arguments, "{\"location\":\"Berlin\",\"unit\":\"celsius\"}");
    ASSERT_EQ(r->stop_reason, VG_MODEL_STOP_TOOL_USE);
    ASSERT_EQ(r->usage.input_tokens, 402);
    ASSERT_STREQ(r->request_id, "req_j");
    ASSERT_STREQ(rec.text.data, "Let me check that for you.");
    ASSERT_EQ(rec.starts, 1);
    ASSERT_STREQ(rec.names[0], "get_weather");
    ASSERT_STREQ(rec.args[0].data, r->tool_calls[0].arguments);
    vg_model_response_free(r);
    recorder_release(&rec);
    teardown(&e);
    vg_free(body);
}

/* Anthropic's "billing_error" (HTTP 402, the credit used up) is not retried and sends the user
 * to billing. */
TEST(billing_error_is_not_retried_and_says_check_billing)
{
    for (int stream = 0; stream < 2; stream++) {
        struct env e;
        struct vg_ts_response rs[] = {
            {.status = 402,
             .headers = JSON_HEADERS "request-id: req_b\r\n",
             .body = "{\"type\":\"error\",\"error\":{\"type\":\"billing_error\",\"message\":"
                     "\"Your credit balance is too low to access the Anthropic API.\"},"
                     "\"request_id\":\"req_b\"}"}};
        setup(&e, rs, 1);
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
        ASSERT_EQ(err.subcode, 402);
        ASSERT_CONTAINS(err.message, "anthropic: the account's quota or credit is used up");
        ASSERT_CONTAINS(err.message, "check the plan and billing with the provider");
        ASSERT_CONTAINS(err.message, "credit balance is too low");
        recorder_release(&rec);
        teardown(&e);
    }
}

/* An answer cut by max_tokens inside a tool_use block: the response says so, streamed or not.
 * proves: S4-046 */
TEST(tool_use_cut_by_max_tokens_is_reported)
{
    static const char sse[] =
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_c\","
        "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-20250514\","
        "\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":20,\"output_tokens\":1}}}"
        "\n\n"
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
        "\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_c\",\"name\":\"get_weather\","
        "\"input\":{}}}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"location\\\": \\\"Ber\"}}"
        "\n\n"
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
        "\"max_tokens\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":8}}\n\n"
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    static const char json[] =
        "{\"id\":\"msg_d\",\"type\":\"message\",\"role\":\"assistant\",\"model\":"
        "\"claude-sonnet-4-20250514\",\"content\":[{\"type\":\"text\",\"text\":\"Checking.\"},"
        "{\"type\":\"tool_use\",\"id\":\"toolu_d\",\"name\":\"get_weather\",\"input\":{}}],"
        "\"stop_reason\":\"max_tokens\",\"stop_sequence\":null,\"usage\":{\"input_tokens\":20,"
        "\"output_tokens\":8}}";
    for (int stream = 0; stream < 2; stream++) {
        struct env e;
        struct vg_ts_response rs[] = {
            {.headers = stream ? SSE_HEADERS : JSON_HEADERS, .body = stream ? sse : json}};
        setup(&e, rs, 1);
        struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Weather in Berlin?"};
        struct vg_model_request req = {
            .messages = &msg, .n_messages = 1, .tools = &weather, .n_tools = 1, .max_tokens = 8};
        struct vg_model_response *r = NULL;
        struct recorder rec;
        struct vg_model_stream_cb cb = recorder_init(&rec);

        ASSERT_OK(stream ? vg_model_stream(e.m, &req, &cb, &r, E)
                         : vg_model_complete(e.m, &req, &r, E));
        ASSERT_EQ(r->stop_reason, VG_MODEL_STOP_MAX_TOKENS);
        ASSERT_EQ(r->n_tool_calls, 1);
        ASSERT(r->tool_calls_cut);
        if (stream)
            ASSERT_STREQ(r->tool_calls[0].arguments, "{\"location\": \"Ber");
        vg_model_response_free(r);
        recorder_release(&rec);
        teardown(&e);
    }
}

int main(void)
{
    vg_alloc_install_json();
    RUN(text_stream);
    RUN(dumped_schema_sent_as_it_is);
    RUN(single_tool_stream);
    RUN(parallel_tools_stream);
    RUN(forced_tool_arguments_in_many_deltas);
    RUN(rate_limit_retry_after_seconds);
    RUN(rate_limit_retry_after_http_date);
    RUN(overloaded_529_retries_with_backoff_then_fails);
    RUN(max_tokens_stop);
    RUN(non_streaming_tool_use);
    RUN(tool_result_followup_with_prompt_caching);
    RUN(cache_marker_on_last_tool_without_system);
    RUN(error_event_mid_stream_is_reported_not_retried);
    RUN(error_event_before_output_is_retried);
    RUN(cut_stream_without_message_stop);
    RUN(bad_key_is_eauth);
    RUN(a_key_the_server_quotes_is_not_in_the_error);
    RUN(json_answer_to_a_streaming_request_is_read_by_its_content_type);
    RUN(billing_error_is_not_retried_and_says_check_billing);
    RUN(tool_use_cut_by_max_tokens_is_reported);
    return 0;
}
