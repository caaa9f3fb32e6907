/*
 * test_model_oom.c: allocation-failure torture for the model layer's parsers and builders.
 * Every allocation in turn is made to fail; each run must end in a clean error (ENOMEM; EPARSE
 * or EINVAL where jansson reports an allocation failure inside its parser or encoder as bad
 * input, which it does) or succeed when the failed allocation was not needed, and leak nothing
 * (the sanitizer build checks leaks).
 */
#include "model/model_test.h"

#include "config/config.h"
#include "model/anthropic/anthropic.h"
#include "model/openai/openai.h"

static vigil_code openai_once(const char *sse, const char *json)
{
    struct vg_openai_stream *s = NULL;
    struct vg_model_response *r = NULL;
    struct vg_model_stream_cb cb = {0};
    vigil_error err = {0};
    vigil_code rc = vg_openai_stream_new(&cb, &s, &err);
    if (rc == VIGIL_OK)
        rc = vg_openai_stream_feed(s, sse, strlen(sse), &err);
    if (rc == VIGIL_OK)
        rc = vg_openai_stream_finish(s, &r, &err);
    vg_openai_stream_free(s);
    vg_model_response_free(r);
    r = NULL;
    if (rc == VIGIL_OK)
        rc = vg_openai_parse_response(json, strlen(json), &r, &err);
    vg_model_response_free(r);
    return rc;
}

static vigil_code anthropic_once(const char *sse, const struct vg_model_request *req)
{
    struct vg_anthropic_stream *s = NULL;
    struct vg_model_response *r = NULL;
    struct vg_model_stream_cb cb = {0};
    vigil_error err = {0};
    char *body = NULL;
    vigil_code rc = vg_anthropic_stream_new(&cb, &s, &err);
    if (rc == VIGIL_OK)
        rc = vg_anthropic_stream_feed(s, sse, strlen(sse), &err);
    if (rc == VIGIL_OK)
        rc = vg_anthropic_stream_finish(s, &r, &err);
    vg_anthropic_stream_free(s);
    vg_model_response_free(r);
    if (rc == VIGIL_OK)
        rc = vg_anthropic_build_body(req, "m", 1, &body, &err);
    vg_free(body);
    body = NULL;
    if (rc == VIGIL_OK)
        rc = vg_openai_build_body(req, "m", 1, 0, &body, &err);
    vg_free(body);
    body = NULL;
    if (rc == VIGIL_OK)
        rc = vg_model_request_to_json(req, &body, &err);
    vg_free(body);
    return rc;
}

static vigil_code config_once(void)
{
    struct vg_config *c = NULL;
    vigil_error err = {0};
    const char *yaml = "model:\n  provider: openai\n  prices:\n    a: {input: 1}\nlist: [1, 2]\n";
    vigil_code rc = vg_config_parse(yaml, strlen(yaml), "c.yaml", &c, &err);
    if (rc == VIGIL_OK)
        rc = vg_config_set_string(c, "x.y", "z", &err);
    vg_config_free(c);
    return rc;
}

#define TORTURE(call)                                                                              \
    do {                                                                                           \
        int finished = 0;                                                                          \
        for (long n = 1; n < 5000 && !finished; n++) {                                             \
            vg_alloc_fail_at(n, 1);                                                                \
            vigil_code tc_rc = (call);                                                             \
            int failed_ = vg_alloc_failed();                                                       \
            vg_alloc_fail_at(0, 0);                                                                \
            if (!failed_) {                                                                        \
                ASSERT_EQ(tc_rc, VIGIL_OK);                                                        \
                finished = 1;                                                                      \
            } else if (tc_rc != VIGIL_ENOMEM && tc_rc != VIGIL_EINVAL && tc_rc != VIGIL_EPARSE) {  \
                TEST_FAIL_("allocation %ld: %s returned %s", n, #call, vigil_code_name(tc_rc));    \
            }                                                                                      \
        }                                                                                          \
        ASSERT(finished);                                                                          \
    } while (0)

TEST(openai_parsers_survive_every_allocation_failure)
{
    char *sse = vg_test_fixture("model/openai/03_tool_parallel_stream.response.sse", NULL);
    char *json = vg_test_fixture("model/openai/09_nonstream_tool_calls.response.json", NULL);
    TORTURE(openai_once(sse, json));
    vg_free(sse);
    vg_free(json);
}

TEST(anthropic_parser_and_encoders_survive_every_allocation_failure)
{
    char *sse = vg_test_fixture("model/anthropic/03_tool_parallel_stream.response.sse", NULL);
    struct vg_model_tool_call calls[] = {{"t1", "get_weather", "{\"location\":\"Paris\"}"}};
    struct vg_model_tool weather = {"get_weather", "w", WEATHER_SCHEMA, 0};
    struct vg_model_message msgs[] = {
        {.role = VG_MODEL_USER, .text = "q"},
        {.role = VG_MODEL_ASSISTANT, .text = "a", .tool_calls = calls, .n_tool_calls = 1},
        {.role = VG_MODEL_TOOL, .tool_call_id = "t1", .text = "r", .is_error = 1}};
    struct vg_model_request req = {.system = "s",
                                   .messages = msgs,
                                   .n_messages = 3,
                                   .tools = &weather,
                                   .n_tools = 1,
                                   .cache_prompt = 1};
    TORTURE(anthropic_once(sse, &req));
    vg_free(sse);
}

TEST(config_survives_every_allocation_failure)
{
    TORTURE(config_once());
}

int main(void)
{
    vg_alloc_install_json();
    RUN(openai_parsers_survive_every_allocation_failure);
    RUN(anthropic_parser_and_encoders_survive_every_allocation_failure);
    RUN(config_survives_every_allocation_failure);
    return 0;
}
