/*
 * test_window.c: the hot window on its own. Results the gated executor recorded without their
 * call's id answer the calls in order; a result in the executor's envelope is kept as the model
 * should read it; the window keeps its memory to its token budget, exchanges whole and the
 * turn's input always; a person's message left unanswered leaves when the next one comes.
 */
#include "helpers/test.h"

#include "loop/window.h"

static void push_json(struct vg_window *w, const char *body)
{
    json_t *v = json_loads(body, 0, NULL);
    if (!v)
        TEST_FAIL_("bad test JSON: %s", body);
    ASSERT_OK(vg_window_push_body(w, v, E));
    json_decref(v);
}

/* How the gated executor records a call: an action, then a result naming its tool but not the
 * model's call id. */
TEST(results_recorded_without_a_call_id_answer_the_calls_in_order)
{
    struct vg_window w;
    vg_window_init(&w, 0);
    push_json(&w, "{\"kind\":\"user\",\"content\":\"go\"}");
    push_json(&w, "{\"kind\":\"thought\",\"content\":\"\",\"metadata\":{\"tool_calls\":["
                  "{\"id\":\"a\",\"name\":\"memory_write\",\"arguments\":\"{}\"},"
                  "{\"id\":\"b\",\"name\":\"note\",\"arguments\":\"{}\"},"
                  "{\"id\":\"c\",\"name\":\"memory_write\",\"arguments\":\"{\\\"x\\\":1}\"}]}}");
    static const char *const tools[] = {"memory_write", "note", "memory_write"};
    for (size_t i = 0; i < 3; i++) {
        char body[300];
        push_json(&w, "{\"kind\":\"action\",\"content\":\"{}\",\"metadata\":{}}");
        snprintf(body, sizeof body,
                 "{\"kind\":\"toolResult\",\"content\":\"r%zu\",\"metadata\":{\"toolName\":"
                 "\"%s\",\"status\":\"%s\"}}",
                 i, tools[i], i == 1 ? "error" : "success");
        push_json(&w, body);
    }
    /* A result after the turn moved on answers nothing (an approved call run at a later
     * start): it is not kept. */
    push_json(&w, "{\"kind\":\"user\",\"content\":\"next\"}");
    push_json(&w, "{\"kind\":\"toolResult\",\"content\":\"late\",\"metadata\":{\"toolName\":"
                  "\"note\"}}");
    ASSERT_EQ(w.n, 6); /* no action, no late result */
    static const char *const ids[] = {"a", "b", "c"};
    for (size_t i = 0; i < 3; i++) {
        ASSERT_STREQ(w.msgs[2 + i]->kind, "toolResult");
        ASSERT_STREQ(w.msgs[2 + i]->tool_call_id, ids[i]);
        ASSERT_EQ(w.msgs[2 + i]->is_error, i == 1);
    }
    ASSERT_EQ(w.turn, 5);
    vg_window_release(&w);
}

/* record_observations appends its notes to the thread before its result; a person's memory
 * decision may land while calls are out. Both wait until the exchange has its results (which
 * must follow their calls), and neither starts a turn. A message of a later run ends an
 * exchange a crash left without results. */
TEST(messages_added_while_calls_are_out_follow_the_exchange)
{
    struct vg_window w;
    vg_window_init(&w, 0);
    push_json(&w, "{\"kind\":\"user\",\"content\":\"go\",\"run_id\":\"r1\"}");
    push_json(&w, "{\"kind\":\"thought\",\"content\":\"\",\"run_id\":\"r1\",\"metadata\":"
                  "{\"tool_calls\":[{\"id\":\"a\",\"name\":\"record_observations\","
                  "\"arguments\":\"{}\"},{\"id\":\"b\",\"name\":\"echo\",\"arguments\":\"{}\"}]}}");
    push_json(&w, "{\"kind\":\"observation\",\"content\":\"a note\",\"run_id\":\"r1\"}");
    push_json(&w, "{\"kind\":\"toolResult\",\"content\":\"ok\",\"run_id\":\"r1\","
                  "\"metadata\":{\"toolName\":\"record_observations\"}}");
    push_json(&w, "{\"kind\":\"system\",\"content\":\"a person decided\"}");
    push_json(&w, "{\"kind\":\"toolResult\",\"content\":\"ok\",\"run_id\":\"r1\","
                  "\"metadata\":{\"toolName\":\"echo\"}}");
    static const char *const kinds[] = {"user",       "thought",     "toolResult",
                                        "toolResult", "observation", "system"};
    ASSERT_EQ(w.n, VG_ARRAY_LEN(kinds));
    for (size_t i = 0; i < w.n; i++)
        ASSERT_STREQ(w.msgs[i]->kind, kinds[i]);
    ASSERT_EQ(w.turn, 0);
    /* A crash leaves the next exchange without its second result; the next run's input (a
     * wake's observation) starts the next turn. */
    push_json(&w, "{\"kind\":\"thought\",\"content\":\"\",\"run_id\":\"r1\",\"metadata\":"
                  "{\"tool_calls\":[{\"id\":\"c\",\"name\":\"echo\",\"arguments\":\"{}\"},"
                  "{\"id\":\"d\",\"name\":\"echo\",\"arguments\":\"{}\"}]}}");
    push_json(&w, "{\"kind\":\"toolResult\",\"content\":\"ok\",\"run_id\":\"r1\","
                  "\"metadata\":{\"toolName\":\"echo\"}}");
    push_json(&w, "{\"kind\":\"observation\",\"content\":\"woke\",\"run_id\":\"r2\"}");
    ASSERT_OK(vg_window_flush(&w, E));
    ASSERT_EQ(w.n, 9);
    ASSERT_EQ(w.turn, 8);
    ASSERT_STREQ(w.msgs[7]->tool_call_id, "c");
    vg_window_release(&w);
}

/* A second result of one call, or a result of a call of another tool, is not kept. */
TEST(a_result_answers_one_open_call_at_most_once)
{
    struct vg_window w;
    vg_window_init(&w, 0);
    static const struct vg_model_tool_call calls[] = {{"a", "echo", "{}"}};
    ASSERT_OK(vg_window_push(&w, "thought", "", NULL, 0, calls, 1, E));
    ASSERT_OK(vg_window_push(&w, "toolResult", "one", "a", 0, NULL, 0, E));
    ASSERT_OK(vg_window_push(&w, "toolResult", "again", "a", 0, NULL, 0, E));
    ASSERT_OK(vg_window_push(&w, "toolResult", "stray", "z", 0, NULL, 0, E));
    push_json(&w, "{\"kind\":\"toolResult\",\"content\":\"x\",\"metadata\":{\"toolName\":"
                  "\"other\"}}");
    ASSERT_EQ(w.n, 2);
    ASSERT_STREQ(w.msgs[1]->content, "one");
    vg_window_release(&w);
}

static const char *kept_result(const char *envelope, int *is_error)
{
    static char out[512];
    struct vg_window w;
    vg_window_init(&w, 0);
    static const struct vg_model_tool_call calls[] = {{"a", "t", "{}"}};
    ASSERT_OK(vg_window_push(&w, "thought", "", NULL, 0, calls, 1, E));
    ASSERT_OK(vg_window_push(&w, "toolResult", envelope, "a", 0, NULL, 0, E));
    ASSERT_EQ(w.n, 2);
    snprintf(out, sizeof out, "%s", w.msgs[1]->content);
    *is_error = w.msgs[1]->is_error;
    vg_window_release(&w);
    return out;
}

/* The model reads the tool's answer; the ids of the envelope stay in the store. */
TEST(an_executor_envelope_is_kept_as_its_answer)
{
    int is_error = 0;
    ASSERT_STREQ(kept_result("{\"action_id\":\"019a-1\",\"changed_entity_ids\":[\"blk-1\"],"
                             "\"changed_tokens\":[\"AGENT_MEMORY_CHANGED\"],\"operation_id\":"
                             "\"9f2c\",\"replayed\":false,\"result\":{\"label\":\"notes\","
                             "\"revision\":2},\"result_id\":\"019a-2\",\"status\":\"success\"}",
                             &is_error),
                 "{\"label\":\"notes\",\"revision\":2}");
    ASSERT_EQ(is_error, 0);
    ASSERT_STREQ(kept_result("{\"action_id\":\"019a-1\",\"changed_entity_ids\":null,"
                             "\"error_code\":\"invalid_arguments\",\"error_message\":\"label is "
                             "required\",\"operation_id\":\"9f2c\",\"replayed\":false,"
                             "\"status\":\"error\"}",
                             &is_error),
                 "{\"error\":\"invalid_arguments\",\"message\":\"label is required\"}");
    ASSERT_EQ(is_error, 1);
    ASSERT_STREQ(kept_result("{\"operation_id\":\"9f2c\",\"replayed\":true,\"status\":"
                             "\"success\"}",
                             &is_error),
                 "null");
    ASSERT_STREQ(kept_result("{\"operation_id\":\"9f2c\",\"replayed\":false,\"result\":[1],"
                             "\"status\":\"partial\"}",
                             &is_error),
                 "{\"result\":[1],\"status\":\"partial\"}");
    /* What the fast reader declines (a fraction, text not in canonical form) reads the same. */
    ASSERT_STREQ(kept_result("{\"operation_id\":\"o\",\"replayed\":false,\"result\":{\"x\":1.5},"
                             "\"status\":\"success\"}",
                             &is_error),
                 "{\"x\":1.5}");
    ASSERT_STREQ(
        kept_result("{\"operation_id\": \"o\", \"replayed\": false, \"result\": {\"b\": 1, "
                    "\"a\": [2]}, \"status\": \"success\"}",
                    &is_error),
        "{\"a\":[2],\"b\":1}");
    /* A tool's own answer that merely looks alike is left as it is. */
    const char *own = "{\"operation_id\":\"x\",\"replayed\":false,\"status\":\"success\","
                      "\"mine\":1}";
    ASSERT_STREQ(kept_result(own, &is_error), own);
}

/* 500 exchanges through a window of 1,000 tokens: it never holds much more than its budget,
 * the older turn leaves first, exchanges leave whole, and the turn's input stays. */
TEST(the_window_keeps_its_memory_to_its_budget)
{
    struct vg_window w;
    vg_window_init(&w, 1000);
    ASSERT_OK(vg_window_push(&w, "user", "an older turn", NULL, 0, NULL, 0, E));
    ASSERT_OK(vg_window_push(&w, "thought", "its answer", NULL, 0, NULL, 0, E));
    ASSERT_OK(vg_window_push(&w, "user", "the turn's input", NULL, 0, NULL, 0, E));
    for (int i = 0; i < 500; i++) {
        char id[16], args[64];
        snprintf(id, sizeof id, "c%d", i);
        snprintf(args, sizeof args, "{\"text\":\"step %d\"}", i);
        struct vg_model_tool_call c = {id, "echo", args};
        ASSERT_OK(vg_window_push(&w, "thought", "", NULL, 0, &c, 1, E));
        ASSERT(w.tokens <= 1000 + 60); /* the newest exchange may be in progress */
        ASSERT_OK(vg_window_push(&w, "toolResult", args, id, 0, NULL, 0, E));
        ASSERT(w.tokens <= 1000);
        ASSERT_STREQ(w.msgs[w.turn]->content, "the turn's input");
        if (i > 40)
            ASSERT_EQ(w.turn, 0); /* the older turn went first */
        ASSERT(w.turn + 1 == w.n || !strcmp(w.msgs[w.turn + 1]->kind, "thought"));
    }
    ASSERT(w.n < 100);
    ASSERT_STREQ(w.msgs[w.n - 1]->tool_call_id, "c499");
    /* A smaller budget keeps a suffix of the exchanges, whole, and the input. */
    struct vg_window_span s;
    vg_window_fit(&w, 300, &s);
    ASSERT_EQ(s.older_from, 0);
    ASSERT_EQ(s.input_end, 1);
    ASSERT_STREQ(w.msgs[s.turn_from]->kind, "thought");
    ASSERT(s.turn_from > 1 && s.turn_from < w.n - 2);
    vg_window_release(&w);
}

/* A person's message with no answer after it (its turn failed) leaves when the next one comes;
 * what came between stays, and an answered question stays (trial F, F6). */
TEST(an_unanswered_question_leaves_when_the_next_comes)
{
    struct vg_window w;
    vg_window_init(&w, 0);
    push_json(&w, "{\"kind\":\"user\",\"content\":\"hi\"}");
    push_json(&w, "{\"kind\":\"thought\",\"content\":\"hello\"}");
    push_json(&w, "{\"kind\":\"user\",\"content\":\"failed once\"}");
    push_json(&w, "{\"kind\":\"user\",\"content\":\"failed twice\"}");
    push_json(&w, "{\"kind\":\"observation\",\"content\":\"a wake's news\"}");
    push_json(&w, "{\"kind\":\"user\",\"content\":\"asked again\"}");
    static const char *const kept[] = {"hi", "hello", "a wake's news", "asked again"};
    ASSERT_EQ(w.n, VG_ARRAY_LEN(kept));
    int64_t tokens = 0;
    for (size_t i = 0; i < w.n; i++) {
        ASSERT_STREQ(w.msgs[i]->content, kept[i]);
        tokens += w.msgs[i]->tokens;
    }
    ASSERT_EQ(w.tokens, tokens);
    ASSERT_EQ(w.turn, w.n - 1);
    vg_window_release(&w);
}

int main(void)
{
    RUN(results_recorded_without_a_call_id_answer_the_calls_in_order);
    RUN(messages_added_while_calls_are_out_follow_the_exchange);
    RUN(a_result_answers_one_open_call_at_most_once);
    RUN(an_executor_envelope_is_kept_as_its_answer);
    RUN(the_window_keeps_its_memory_to_its_budget);
    RUN(an_unanswered_question_leaves_when_the_next_comes);
    return 0;
}
