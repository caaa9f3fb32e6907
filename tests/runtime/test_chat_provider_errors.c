/*
 * test_chat_provider_errors.c: a turn the model provider fails (the OpenAI-compatible provider
 * against the loopback server) fails as the provider's fault, not the caller's: its key refused
 * (401) and its malformed answer are upstream failures (HTTP 502, exit 9), never vigil's own
 * 401 nor a 400 usage error (trial F5, F9); vigil's own refusals keep their code's row.
 */
#include "helpers/http_server.h"
#include "helpers/rt.h"

static const char bad_key[] = "{\"error\":{\"message\":\"Incorrect API key provided: sk-wrong\","
                              "\"type\":\"invalid_request_error\",\"code\":\"invalid_api_key\"}}";

static void use_server(struct vg_test_server *srv)
{
    char base[128];
    snprintf(base, sizeof base, "%s/v1", vg_test_server_url(srv));
    setenv("VIGIL_MODEL_PROVIDER", "openai", 1);
    setenv("VIGIL_MODEL_BASE_URL", base, 1);
    setenv("VIGIL_MODEL", "gpt-4o", 1);
    setenv("OPENAI_API_KEY", "sk-wrong", 1);
    unsetenv("VIGIL_CONFIG");
}

/* One turn of a new agent against the server; the error it fails with. */
static vigil_error turn(const char *name, struct vg_test_server *srv)
{
    struct test_rt t;
    char a[37], *out = NULL;
    vigil_error e = {0};
    use_server(srv);
    test_rt_open(&t, name);
    vigil_agent_spec spec = {.name = "app"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, a, E));
    ASSERT(vigil_chat(t.rt, a, NULL, "hi", NULL, &out, &e) != VIGIL_OK);
    vigil_free(out);
    test_rt_close(&t);
    return e;
}

TEST(a_refused_provider_key_is_an_upstream_failure)
{
    struct vg_ts_response rs[] = {
        {.status = 401, .headers = "Content-Type: application/json\r\n", .body = bad_key}};
    struct vg_test_server *srv = vg_test_server_start(rs, 1);
    vigil_error e = turn("provider_401", srv);
    ASSERT_EQ(e.code, VIGIL_EAUTH);
    ASSERT_CONTAINS(e.message, "Incorrect API key");
    ASSERT(vigil_error_from_provider(&e));
    ASSERT_EQ(vigil_error_http_status(&e), 502);
    ASSERT_EQ(vigil_error_exit_status(&e), 9);
    vg_test_server_stop(srv);
}

TEST(a_malformed_provider_answer_is_an_upstream_failure)
{
    struct vg_ts_response rs[] = {
        {.headers = "Content-Type: application/json\r\n", .body = "data: {\"nope\"\n\n"}};
    struct vg_test_server *srv = vg_test_server_start(rs, 1);
    vigil_error e = turn("provider_garbage", srv);
    ASSERT_EQ(e.code, VIGIL_EPARSE);
    ASSERT(vigil_error_from_provider(&e));
    ASSERT_EQ(vigil_error_http_status(&e), 502);
    ASSERT_EQ(vigil_error_exit_status(&e), 9);
    vg_test_server_stop(srv);
}

TEST(a_provider_rate_limit_stays_429_and_vigils_own_refusals_keep_their_row)
{
    vigil_error own = {.code = VIGIL_EAUTH};
    snprintf(own.message, sizeof own.message, "missing or wrong API token");
    ASSERT(!vigil_error_from_provider(&own));
    ASSERT_EQ(vigil_error_http_status(&own), 401);
    vigil_error usage = {.code = VIGIL_EPARSE};
    ASSERT_EQ(vigil_error_exit_status(&usage), 2);
    vigil_error limited = {.code = VIGIL_ERATELIMIT};
    snprintf(limited.detail, sizeof limited.detail, "model provider");
    ASSERT(vigil_error_from_provider(&limited));
    ASSERT_EQ(vigil_error_http_status(&limited), 429);
    vigil_error none = {0};
    ASSERT(!vigil_error_from_provider(&none));
}

int main(void)
{
    RUN(a_refused_provider_key_is_an_upstream_failure);
    RUN(a_malformed_provider_answer_is_an_upstream_failure);
    RUN(a_provider_rate_limit_stays_429_and_vigils_own_refusals_keep_their_row);
    return 0;
}
