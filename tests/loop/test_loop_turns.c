/*
 * test_loop_turns.c: long turns keep their own beginning. A run of 20, 100 and 500 sequential
 * tool calls under the scripted provider, every model request checked as it is sent: the
 * turn's user message is in it, every assistant message with tool calls is followed by all of
 * its results (pairs never split, no result without its call), the exchanges it holds are the
 * turn's newest ones in order (the one just made always), it fits the token budget, and an
 * older turn leaves before any exchange of the current turn does.
 */
#include "helpers/rt.h"

#include "agent/agent.h"
#include "base/json.h"
#include "helpers/echo_executor.h"
#include "loop/loop.h"
#include "loop/watch_model.h"
#include "model/model.h"
#include "os/fs.h"
#include "store/store.h"

static char dir[4096];

#define TURN_INPUT "take the steps one by one"
#define OLDER_INPUT "an earlier question"

/* A cassette of n calls of echo ("step 1" ... "step n", ids c1 ... cn), then a reply. */
static struct vg_model *steps_model(struct test_rt *t, int n)
{
    char path[4200];
    struct vg_buf b;
    vg_buf_init(&b, 0);
    vg_buf_puts(&b, "{\"vigil_cassette\":1,\"exchanges\":[");
    for (int i = 1; i <= n; i++)
        vg_buf_printf(&b,
                      "{\"response\":{\"tool_calls\":[{\"id\":\"c%d\",\"name\":\"echo\","
                      "\"arguments\":{\"text\":\"step %d\"}}]}},",
                      i, i);
    vg_buf_printf(&b, "{\"response\":{\"text\":\"took %d steps\"}}]}", n);
    ASSERT_OK(vg_buf_finish(&b, E));
    snprintf(path, sizeof path, "%s/steps_%d.json", dir, n);
    ASSERT_OK(vg_fs_write_file(path, b.data, b.len, E));
    vg_buf_release(&b);
    struct vg_model_options o = {
        .provider = "scripted", .cassette = path, .clock = &t->clock.base, .max_retries = -1};
    struct vg_model *m = NULL;
    ASSERT_OK(vg_model_new(&o, &m, E));
    return m;
}

/* What the requests of one run held. */
struct turn_watch {
    int64_t budget;   /* the run's context budget */
    int requests;     /* requests seen; request k follows k exchanges */
    int trimmed;      /* requests that left some of the turn's exchanges out */
    int older_out;    /* requests without the older turn */
    int64_t max_used; /* the largest request, in estimated tokens */
};

static int64_t message_tokens(const struct vg_model_message *m)
{
    int64_t t = vg_token_estimate(m->text) + 8;
    for (size_t k = 0; k < m->n_tool_calls; k++)
        t += vg_token_estimate(m->tool_calls[k].name) +
             vg_token_estimate(m->tool_calls[k].arguments) + 4;
    return t;
}

static int64_t request_tokens(const struct vg_model_request *req)
{
    int64_t used = vg_token_estimate(req->system);
    for (size_t i = 0; i < req->n_tools; i++)
        used += vg_token_estimate(req->tools[i].name) +
                vg_token_estimate(req->tools[i].description) +
                vg_token_estimate(req->tools[i].input_schema) + 8;
    for (size_t i = 0; i < req->n_messages; i++)
        used += message_tokens(&req->messages[i]);
    return used;
}

static void check_request(void *user, const struct vg_model_request *req)
{
    struct turn_watch *w = user;
    int made = w->requests++; /* exchanges made before this request */
    int input = 0, older = 0, exchanges = 0, last = 0;
    for (size_t i = 0; i < req->n_messages; i++) {
        const struct vg_model_message *m = &req->messages[i];
        if (m->role == VG_MODEL_USER) {
            if (!strcmp(m->text, OLDER_INPUT)) {
                ASSERT(!input); /* history in the order it happened */
                older = 1;
            }
            input += !strcmp(m->text, TURN_INPUT);
            continue;
        }
        if (m->role == VG_MODEL_TOOL)
            TEST_FAIL_("request %d: a result (of %s) without its call before it", made,
                       m->tool_call_id);
        if (!m->n_tool_calls)
            continue; /* the older turn's answer */
        ASSERT_EQ(input, 1);
        /* The call and its result, side by side; steps in order, none skipped. */
        ASSERT_EQ(m->n_tool_calls, 1);
        ASSERT(i + 1 < req->n_messages);
        const struct vg_model_message *r = &req->messages[++i];
        ASSERT_EQ(r->role, VG_MODEL_TOOL);
        ASSERT_STREQ(r->tool_call_id, m->tool_calls[0].id);
        int step = (int)strtol(m->tool_calls[0].id + 1, NULL, 10);
        char want[64];
        snprintf(want, sizeof want, "{\"echo\":\"step %d\"}", step);
        ASSERT_STREQ(r->text, want);
        if (last)
            ASSERT_EQ(step, last + 1);
        last = step;
        exchanges++;
    }
    if (input != 1)
        TEST_FAIL_("request %d (after %d tool calls) holds the turn's user message %d times", made,
                   made, input);
    ASSERT_EQ(last, made); /* the exchange just made is always there */
    int64_t used = request_tokens(req);
    if (used > w->budget && exchanges > 1)
        TEST_FAIL_("request %d: %lld tokens over a budget of %lld", made, (long long)used,
                   (long long)w->budget);
    w->max_used = VG_MAX(w->max_used, used);
    if (exchanges < made) {
        w->trimmed++;
        if (older)
            TEST_FAIL_("request %d: the turn lost exchanges while an older turn stayed", made);
    }
    w->older_out += !older;
}

/* One turn of n tool calls after an older turn, within a context budget given to the run (0:
 * none: then `expect` is the budget the agent's config or its model should give). */
static struct turn_watch run_agent_steps(const char *name, int n, int64_t budget, int64_t expect,
                                         const char *model, const char *config)
{
    struct test_rt t;
    char id[37], thread[128];
    test_rt_open(&t, name);
    vigil_agent_spec spec = {.name = "stepper",
                             .prompt = "Take one step per call.",
                             .model = model,
                             .config_json = config};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, id, E));
    snprintf(thread, sizeof thread, "%s:session:default", id);
    struct vg_message_in older[] = {
        {.agent_id = id, .thread_id = thread, .kind = VG_MSG_USER, .content = OLDER_INPUT},
        {.agent_id = id, .thread_id = thread, .kind = VG_MSG_THOUGHT, .content = "an answer"}};
    for (size_t i = 0; i < VG_ARRAY_LEN(older); i++)
        ASSERT_OK(vg_message_append(t.env, &older[i], NULL, E));

    struct vg_model *inner = steps_model(&t, n);
    struct watch_model wm;
    watch_model_init(&wm, inner);
    struct turn_watch w = {.budget = budget ? budget : expect};
    wm.check = check_request;
    wm.user = &w;
    struct vg_loop_input in = {.agent_id = id,
                               .thread_id = thread,
                               .run_key = name,
                               .wake_reason = "user",
                               .input = TURN_INPUT,
                               .model = &wm.base,
                               .executor = vg_loop_echo_executor()};
    in.limits.max_steps = n + 1;
    in.limits.max_tool_rounds = n + 1;
    in.limits.total_steps_cap = n + 10;
    in.limits.context_tokens = budget;
    struct vg_loop_result r;
    ASSERT_OK(vg_loop_run(t.env, &in, &r, E));
    ASSERT_EQ(r.end, VG_LOOP_COMPLETED);
    ASSERT_EQ(r.tool_calls, n);
    ASSERT_EQ(w.requests, n + 1);
    char reply[64];
    snprintf(reply, sizeof reply, "took %d steps", n);
    ASSERT_STREQ(r.final_text, reply);
    vg_loop_result_release(&r);
    watch_model_release(&wm);
    vg_model_free(inner);
    test_rt_close(&t);
    return w;
}

static struct turn_watch run_steps(const char *name, int n, int64_t budget)
{
    return run_agent_steps(name, n, budget, 102400 /* 80% of an unknown model's 128k */, NULL,
                           NULL);
}

/* A turn of 20 tool calls (the 40-message window lost its user message after 13): with the
 * default budget every request holds the whole turn and the older one. */
TEST(a_turn_of_20_calls_keeps_everything)
{
    struct turn_watch w = run_steps("turn_20", 20, 0);
    ASSERT_EQ(w.trimmed, 0);
    ASSERT_EQ(w.older_out, 0);
}

/* 100 calls in a budget that holds about 70 exchanges: the older turn leaves first, then the
 * turn's oldest exchanges, and the user message stays to the end. */
TEST(a_turn_of_100_calls_drops_the_older_turn_then_its_oldest_pairs)
{
    struct turn_watch w = run_steps("turn_100", 100, 2500);
    ASSERT(w.trimmed > 0);
    ASSERT(w.older_out >= w.trimmed); /* (each request checks the older turn left first) */
    ASSERT(w.max_used <= 2500);
}

/* proves: S0-046 — however long the turn, each request stays within the context budget. */
TEST(a_turn_of_500_calls_keeps_its_user_message_within_the_budget)
{
    struct turn_watch w = run_steps("turn_500", 500, 4000);
    ASSERT(w.trimmed > 300);
    ASSERT(w.max_used <= 4000);
}

/* Without a budget from the caller: the agent's own context_tokens, else 80% of its model's
 * known context window (gpt-4: 8,192 tokens). */
TEST(the_budget_comes_from_the_agent_or_its_model)
{
    struct turn_watch w = run_agent_steps("turn_agent_budget", 100, 0, 2500, NULL,
                                          "{\"limits\":{\"context_tokens\":2500}}");
    ASSERT(w.trimmed > 0);
    ASSERT(w.max_used <= 2500);
    w = run_agent_steps("turn_model_budget", 300, 0, 6553, "gpt-4", NULL);
    ASSERT(w.trimmed > 0);
    ASSERT(w.max_used <= 6553 && w.max_used > 6000);
}

/* proves: S0-046 — a run reads its thread only as far back as its budget reaches, however long
 * the history, but always its whole current turn. */
TEST(a_long_history_is_read_only_as_far_as_the_budget)
{
    struct test_rt t;
    char id[37], thread[128], text[401];
    test_rt_open(&t, "turn_read_bound");
    vigil_agent_spec spec = {.name = "reader"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, id, E));
    snprintf(thread, sizeof thread, "%s:session:default", id);
    memset(text, 'x', 400); /* 100 tokens, 108 in context */
    text[400] = '\0';
    ASSERT_OK(vg_store_begin(t.env->store, E));
    for (int i = 0; i < 1000; i++) {
        struct vg_message_in m = {.agent_id = id,
                                  .thread_id = thread,
                                  .kind = i % 2 ? VG_MSG_THOUGHT : VG_MSG_USER,
                                  .content = text};
        ASSERT_OK(vg_message_append(t.env, &m, NULL, E));
    }
    ASSERT_OK(vg_store_end(t.env->store, VIGIL_OK, E));
    json_t *got = NULL;
    ASSERT_OK(vg_message_recent(t.env, id, thread, 2000, &got, E));
    ASSERT_EQ(json_array_size(got), 19); /* 19 × 108 >= 2,000 */
    json_decref(got);
    /* A turn longer than the budget is read whole. */
    ASSERT_OK(vg_store_begin(t.env->store, E));
    for (int i = 0; i < 60; i++) {
        struct vg_message_in m = {.agent_id = id,
                                  .thread_id = thread,
                                  .kind = i ? VG_MSG_THOUGHT : VG_MSG_USER,
                                  .content = text};
        ASSERT_OK(vg_message_append(t.env, &m, NULL, E));
    }
    ASSERT_OK(vg_store_end(t.env->store, VIGIL_OK, E));
    ASSERT_OK(vg_message_recent(t.env, id, thread, 2000, &got, E));
    ASSERT_EQ(json_array_size(got), 60);
    json_decref(got);
    test_rt_close(&t);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s", vg_test_tmpdir("loop_turns_cassettes"));
    RUN(a_turn_of_20_calls_keeps_everything);
    RUN(a_turn_of_100_calls_drops_the_older_turn_then_its_oldest_pairs);
    RUN(a_turn_of_500_calls_keeps_its_user_message_within_the_budget);
    RUN(the_budget_comes_from_the_agent_or_its_model);
    RUN(a_long_history_is_read_only_as_far_as_the_budget);
    return 0;
}
