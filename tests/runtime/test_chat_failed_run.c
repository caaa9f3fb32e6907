/*
 * test_chat_failed_run.c: a chat turn that fails on the model provider (here a 401 from an
 * OpenAI-compatible server) returns the provider's error and names the run it journaled as
 * failed, first in err.detail as "run_id=ID", so the program can link the error to the run
 * (vigil_run_show); before, the id was given nowhere (trial F, F19). A turn refused before its
 * run began (an unknown agent) names none.
 */
#include "helpers/rt.h"
#include "helpers/http_server.h"

#include <jansson.h>

TEST(a_turn_failed_on_the_provider_names_its_failed_run)
{
    static const struct vg_ts_response unauthorized = {
        .status = 401,
        .headers = "Content-Type: application/json\r\n",
        .body = "{\"error\":{\"message\":\"Incorrect API key provided\",\"type\":"
                "\"invalid_request_error\",\"code\":\"invalid_api_key\"}}"};
    struct vg_test_server *srv = vg_test_server_start(&unauthorized, 1);
    char base[256];
    snprintf(base, sizeof base, "%s/v1", vg_test_server_url(srv));
    setenv("VIGIL_MODEL_PROVIDER", "openai", 1);
    setenv("VIGIL_MODEL_BASE_URL", base, 1);
    setenv("VIGIL_MODEL", "gpt-4o", 1);
    setenv("OPENAI_API_KEY", "sk-wrong", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    struct test_rt t;
    test_rt_open(&t, "chat_failed_run");
    char agent[37], *out = NULL;
    vigil_agent_spec spec = {.name = "Prov"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));

    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EAUTH, vigil_chat(t.rt, agent, NULL, "hello", NULL, &out, &err));
    ASSERT(out == NULL);
    ASSERT_CONTAINS(err.message, "401");
    ASSERT(strncmp(err.detail, "run_id=", 7) == 0);
    /* Still the provider's failure past the run's id: upstream, never vigil's own 401. */
    ASSERT(vigil_error_from_provider(&err));
    ASSERT_EQ(vigil_error_http_status(&err), 502);
    ASSERT_EQ(vigil_error_exit_status(&err), 9);
    char run_id[37];
    snprintf(run_id, sizeof run_id, "%.36s", err.detail + 7);
    ASSERT_EQ(strlen(run_id), 36);
    /* The run it names is the turn's, journaled failed. */
    ASSERT_OK(vigil_run_show(t.rt, run_id, &out, E));
    json_t *run = json_loads(out, 0, NULL);
    ASSERT_STREQ(json_string_value(json_object_get(run, "status")), "failed");
    ASSERT_STREQ(json_string_value(json_object_get(run, "agent_id")), agent);
    json_decref(run);
    vigil_free(out);
    out = NULL;

    /* Refused before a run began: no run to name. */
    vigil_error_clear(&err);
    ASSERT_CODE(VIGIL_ENOTFOUND, vigil_chat(t.rt, "00000000-0000-7000-8000-000000000000", NULL,
                                            "hello", NULL, &out, &err));
    ASSERT(strncmp(err.detail, "run_id=", 7) != 0);
    test_rt_close(&t);
    vg_test_server_stop(srv);
}

int main(void)
{
    RUN(a_turn_failed_on_the_provider_names_its_failed_run);
    return 0;
}
