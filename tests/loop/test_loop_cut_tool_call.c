/*
 * test_loop_cut_tool_call.c: an answer cut by max_tokens while the model wrote a tool call
 * never runs the call. Each case is a real provider adapter (OpenAI-compatible, Anthropic),
 * streamed and not, against the loopback HTTP server speaking its wire format: the turn ends
 * with the max_tokens outcome, the run is journaled as failed, the executor never sees a call
 * and no second request is made.
 */
#include "helpers/http_server.h"
#include "helpers/rt.h"

#include "agent/agent.h"
#include "journal/journal.h"
#include "helpers/echo_executor.h"
#include "loop/loop.h"
#include "model/model.h"

/* The model starts an echo call and is cut inside its arguments. */
static const char openai_sse[] =
    "data: {\"id\":\"c1\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"role\":"
    "\"assistant\",\"content\":\"Echoing.\"},\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"c1\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{"
    "\"tool_calls\":[{\"index\":0,\"id\":\"call_cut\",\"type\":\"function\",\"function\":{"
    "\"name\":\"echo\",\"arguments\":\"{\\\"text\\\": \\\"hel\"}}]},\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"c1\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{},"
    "\"finish_reason\":\"length\"}]}\n\n"
    "data: [DONE]\n\n";
static const char openai_json[] =
    "{\"id\":\"c2\",\"object\":\"chat.completion\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,"
    "\"message\":{\"role\":\"assistant\",\"content\":\"Echoing.\",\"tool_calls\":[{\"id\":"
    "\"call_cut\",\"type\":\"function\",\"function\":{\"name\":\"echo\",\"arguments\":"
    "\"{\\\"text\\\": \\\"hel\"}}]},\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":9,"
    "\"completion_tokens\":8,\"total_tokens\":17}}";
static const char openai_done[] =
    "{\"id\":\"c3\",\"object\":\"chat.completion\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,"
    "\"message\":{\"role\":\"assistant\",\"content\":\"done\"},\"finish_reason\":\"stop\"}]}";

static const char anthropic_sse[] =
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_c\","
    "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-20250514\","
    "\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":20,\"output_tokens\":1}}}\n\n"
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
    "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{"
    "\"type\":\"text_delta\",\"text\":\"Echoing.\"}}\n\n"
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,"
    "\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_cut\",\"name\":\"echo\","
    "\"input\":{}}}\n\n"
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{"
    "\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"text\\\": \\\"hel\"}}\n\n"
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
    "\"max_tokens\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":8}}\n\n"
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
static const char anthropic_json[] =
    "{\"id\":\"msg_d\",\"type\":\"message\",\"role\":\"assistant\",\"model\":"
    "\"claude-sonnet-4-20250514\",\"content\":[{\"type\":\"text\",\"text\":\"Echoing.\"},"
    "{\"type\":\"tool_use\",\"id\":\"toolu_cut\",\"name\":\"echo\",\"input\":{\"text\":\"hel\"}}],"
    "\"stop_reason\":\"max_tokens\",\"stop_sequence\":null,\"usage\":{\"input_tokens\":20,"
    "\"output_tokens\":8}}";
static const char anthropic_done[] =
    "{\"id\":\"msg_e\",\"type\":\"message\",\"role\":\"assistant\",\"model\":"
    "\"claude-sonnet-4-20250514\",\"content\":[{\"type\":\"text\",\"text\":\"done\"}],"
    "\"stop_reason\":\"end_turn\",\"usage\":{\"input_tokens\":30,\"output_tokens\":1}}";

/* An executor that counts the calls it is asked to run (echo otherwise). */
struct counting {
    struct vg_loop_executor x;
    int calls;
};

static vigil_code counting_visible(void *self, struct vg_env *env, const char *agent,
                                   const char *run_key, json_t **out, vigil_error *err)
{
    return vg_loop_echo_executor()->visible_tools(NULL, env, agent, run_key, out, err);
}

static vigil_code counting_call(void *self, struct vg_env *env, const struct vg_loop_call_ctx *c,
                                const char *name, const char *args,
                                struct vg_loop_tool_outcome *out, vigil_error *err)
{
    ((struct counting *)self)->calls++;
    return vg_loop_echo_executor()->call(NULL, env, c, name, args, out, err);
}

static void on_text(void *user, const char *delta, size_t len)
{
    (void)user;
    (void)delta;
    (void)len;
}

static void cut_call_never_runs(const char *provider, const char *model, int stream)
{
    int openai = !strcmp(provider, "openai");
    const char *json_headers = "Content-Type: application/json\r\n";
    struct vg_ts_response rs[] = {
        {.headers = stream ? "Content-Type: text/event-stream\r\n" : json_headers,
         .body = openai ? (stream ? openai_sse : openai_json)
                        : (stream ? anthropic_sse : anthropic_json)},
        /* What a loop that ran the call would be told next. */
        {.headers = json_headers, .body = openai ? openai_done : anthropic_done}};
    struct vg_test_server *srv = vg_test_server_start(rs, 2);
    struct test_rt t;
    char name[64], base[128], id[37], thread[128];
    snprintf(name, sizeof name, "loop_cut_%s_%d", provider, stream);
    test_rt_open(&t, name);
    vigil_agent_spec spec = {.name = "cut", .prompt = "You help."};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, id, E));
    snprintf(thread, sizeof thread, "%s:session:default", id);
    snprintf(base, sizeof base, "%s/v1", vg_test_server_url(srv));
    struct vg_model_options o = {.provider = provider,
                                 .model = model,
                                 .base_url = base,
                                 .api_key = "k",
                                 .clock = &t.clock.base,
                                 .max_retries = -1};
    struct vg_model *m = NULL;
    ASSERT_OK(vg_model_new(&o, &m, E));
    struct counting k = {
        .x = {.self = &k, .visible_tools = counting_visible, .call = counting_call}};
    struct vg_loop_observer obs = {.on_text = on_text};
    struct vg_loop_input in = {.agent_id = id,
                               .thread_id = thread,
                               .run_key = "cut",
                               .wake_reason = "user",
                               .input = "echo hello",
                               .model = m,
                               .executor = &k.x,
                               .observer = stream ? &obs : NULL};
    struct vg_loop_result r;

    ASSERT_OK(vg_loop_run(t.env, &in, &r, E));
    ASSERT_EQ(r.end, VG_LOOP_MAX_TOKENS);
    ASSERT_STREQ(vg_loop_end_name(r.end), "max_tokens");
    ASSERT_STREQ(r.stop_reason, "max_tokens");
    ASSERT_EQ(k.calls, 0);
    ASSERT_EQ(r.tool_calls, 0);
    ASSERT_EQ(r.steps, 1);
    ASSERT_STREQ(r.final_text, "Echoing.");
    ASSERT_EQ(vg_test_server_count(srv), 1);
    ASSERT_CONTAINS(vg_test_server_request(srv, 0)->body,
                    stream ? "\"stream\":true" : "\"echo hello\"");
    /* The run is closed as failed, saying why; the model's turn is kept as it was written. */
    char *show = NULL;
    ASSERT_OK(vg_journal_run_show(t.env->store, r.run_id, &show, E));
    ASSERT_CONTAINS(show, "\"failed\"");
    ASSERT_CONTAINS(show, "cut by max_tokens inside a tool call");
    vg_free(show);
    json_t *msgs = NULL;
    ASSERT_OK(vg_message_latest(t.env, id, thread, 100, &msgs, E));
    ASSERT_EQ(json_array_size(msgs), 2); /* the user's input and the cut turn, no action */
    char *last = json_dumps(json_array_get(msgs, 1), JSON_COMPACT);
    ASSERT_CONTAINS(last, openai ? "call_cut" : "toolu_cut");
    ASSERT_CONTAINS(last, "max_tokens");
    free(last);
    json_decref(msgs);
    vg_loop_result_release(&r);
    vg_model_free(m);
    test_rt_close(&t);
    vg_test_server_stop(srv);
}

/* Trial F8: a text answer cut by max_tokens is the reply, and the outcome says it was cut. */
TEST(a_text_cut_by_max_tokens_says_so_in_the_outcome)
{
    static const char cut_text[] =
        "{\"id\":\"c4\",\"object\":\"chat.completion\",\"model\":\"gpt-4o\",\"choices\":[{"
        "\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"The history of the "
        "printing press begins\"},\"finish_reason\":\"length\"}]}";
    struct vg_ts_response rs[] = {
        {.headers = "Content-Type: application/json\r\n", .body = cut_text}};
    struct vg_test_server *srv = vg_test_server_start(rs, 1);
    struct test_rt t;
    char base[128], id[37], thread[128];
    test_rt_open(&t, "loop_cut_text");
    vigil_agent_spec spec = {.name = "cut_text"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, id, E));
    snprintf(thread, sizeof thread, "%s:session:default", id);
    snprintf(base, sizeof base, "%s/v1", vg_test_server_url(srv));
    struct vg_model_options o = {.provider = "openai",
                                 .model = "gpt-4o",
                                 .base_url = base,
                                 .api_key = "k",
                                 .clock = &t.clock.base,
                                 .max_retries = -1};
    struct vg_model *m = NULL;
    ASSERT_OK(vg_model_new(&o, &m, E));
    struct vg_loop_input in = {.agent_id = id,
                               .thread_id = thread,
                               .run_key = "cut_text",
                               .wake_reason = "user",
                               .input = "history?",
                               .model = m,
                               .executor = vg_loop_echo_executor()};
    struct vg_loop_result r;
    ASSERT_OK(vg_loop_run(t.env, &in, &r, E));
    ASSERT_EQ(r.end, VG_LOOP_COMPLETED);
    ASSERT_STREQ(r.final_text, "The history of the printing press begins");
    ASSERT_STREQ(r.stop_reason, "max_tokens");
    vg_loop_result_release(&r);
    vg_model_free(m);
    test_rt_close(&t);
    vg_test_server_stop(srv);
}

TEST(openai_length_inside_a_tool_call_runs_nothing)
{
    cut_call_never_runs("openai", "gpt-4o", 0);
    cut_call_never_runs("openai", "gpt-4o", 1);
}

TEST(anthropic_max_tokens_inside_a_tool_use_runs_nothing)
{
    cut_call_never_runs("anthropic", "claude-sonnet-4-20250514", 0);
    cut_call_never_runs("anthropic", "claude-sonnet-4-20250514", 1);
}

int main(void)
{
    RUN(openai_length_inside_a_tool_call_runs_nothing);
    RUN(a_text_cut_by_max_tokens_says_so_in_the_outcome);
    RUN(anthropic_max_tokens_inside_a_tool_use_runs_nothing);
    return 0;
}
