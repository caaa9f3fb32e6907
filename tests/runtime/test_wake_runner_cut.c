/*
 * test_wake_runner_cut.c: a wake whose run the model's answer cut by max_tokens inside a tool
 * call (the OpenAI-compatible provider against the loopback server) is a failed wake, saying
 * why, as its journaled run is: not a completed one.
 */
#include "helpers/http_server.h"
#include "helpers/rt.h"

#include "runtime/wake_runner.h"
#include "wake/wake.h"

/* A wake's run asks for a complete answer (no one watches it stream). */
static const char cut_json[] =
    "{\"id\":\"c2\",\"object\":\"chat.completion\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,"
    "\"message\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_cut\","
    "\"type\":\"function\",\"function\":{\"name\":\"memory_write\",\"arguments\":"
    "\"{\\\"label\\\": \\\"no\"}}]},\"finish_reason\":\"length\"}]}";
static const char done_json[] =
    "{\"id\":\"c3\",\"object\":\"chat.completion\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,"
    "\"message\":{\"role\":\"assistant\",\"content\":\"all done\"},\"finish_reason\":\"stop\"}]}";

TEST(a_wake_cut_inside_a_tool_call_fails_saying_why)
{
    struct vg_ts_response rs[] = {
        {.headers = "Content-Type: application/json\r\n", .body = cut_json},
        {.headers = "Content-Type: application/json\r\n", .body = done_json}};
    struct vg_test_server *srv = vg_test_server_start(rs, 2);
    char base[128];
    snprintf(base, sizeof base, "%s/v1", vg_test_server_url(srv));
    setenv("VIGIL_MODEL_PROVIDER", "openai", 1);
    setenv("VIGIL_MODEL_BASE_URL", base, 1);
    setenv("VIGIL_MODEL", "gpt-4o", 1);
    unsetenv("VIGIL_CONFIG");
    struct test_rt t;
    struct vg_wake w;
    char a[37], key[65];
    enum vg_enqueue_result res;
    test_rt_open(&t, "wake_runner_cut");
    vigil_agent_spec spec = {.name = "watcher"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, a, E));
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    struct vg_wake_req m = {.reason = VG_REASON_MANUAL, .agent_id = a};
    ASSERT_OK(vg_wake_enqueue(&w, &m, key, &res, E));
    int ran = 0;
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 0, &ran, E));
    ASSERT_EQ(ran, 1);
    json_t *run = NULL;
    ASSERT_OK(vg_env_get_json(t.env, "wake_run", key, &run, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(run, "status")), "failed");
    ASSERT_CONTAINS(json_string_value(json_object_get(run, "error")),
                    "cut by max_tokens inside a tool call");
    json_decref(run);
    ASSERT_EQ(vg_test_server_count(srv), 1); /* the call never ran: nothing went back */
    vg_wake_release(&w);
    test_rt_close(&t);
    vg_test_server_stop(srv);
}

int main(void)
{
    RUN(a_wake_cut_inside_a_tool_call_fails_saying_why);
    return 0;
}
