/*
 * test_loop_failed_turn.c: what a failed turn leaves in the conversation. Its user message
 * stays in the store (the run's journal and the thread keep it), but a later request does not
 * send it: after two turns the provider refused, the next request holds only the turn that was
 * answered and the new question, not a pile of unanswered ones (trial F, F6), whether the
 * window was kept between the runs or read afresh after a restart. A turn that was answered
 * stays.
 */
#include "helpers/rt.h"

#include "agent/agent.h"
#include "helpers/echo_executor.h"
#include "loop/loop.h"
#include "loop/watch_model.h"
#include "model/model.h"
#include "os/fs.h"
#include "store/store.h"

struct turns {
    struct test_rt t;
    char agent[37], thread[128];
    struct vg_model *inner;
    struct watch_model wm;
};

static void open_turns(struct turns *s, const char *name)
{
    char path[4300];
    test_rt_open(&s->t, name);
    vigil_agent_spec spec = {.name = "asker"};
    ASSERT_OK(vigil_agent_create(s->t.rt, &spec, s->agent, E));
    snprintf(s->thread, sizeof s->thread, "%s:session:default", s->agent);
    snprintf(path, sizeof path, "%s.cassette.json", s->t.path);
    static const char cassette[] =
        "{\"vigil_cassette\":1,\"exchanges\":["
        "{\"response\":{\"text\":\"hello to you\"}},"
        "{\"error\":{\"code\":\"ERATELIMIT\",\"message\":\"slow down\"}},"
        "{\"error\":{\"code\":\"EPROVIDER\",\"message\":\"connection broke mid-response\"}},"
        "{\"response\":{\"text\":\"the answer\"}},"
        "{\"response\":{\"text\":\"you are welcome\"}}]}";
    ASSERT_OK(vg_fs_write_file(path, cassette, strlen(cassette), E));
    struct vg_model_options mo = {
        .provider = "scripted", .cassette = path, .clock = &s->t.clock.base, .max_retries = -1};
    ASSERT_OK(vg_model_new(&mo, &s->inner, E));
    watch_model_init(&s->wm, s->inner);
    s->wm.keep = 1;
}

static void close_turns(struct turns *s)
{
    watch_model_release(&s->wm);
    vg_model_free(s->inner);
    test_rt_close(&s->t);
}

/* One turn; VIGIL_OK or the model's error. */
static vigil_code turn(struct turns *s, const char *text)
{
    struct vg_loop_input in = {.agent_id = s->agent,
                               .thread_id = s->thread,
                               .run_key = text,
                               .wake_reason = "user",
                               .input = text,
                               .model = &s->wm.base,
                               .executor = vg_loop_echo_executor()};
    struct vg_loop_result r;
    vigil_error e = {0};
    vigil_code rc = vg_loop_run(s->t.env, &in, &r, &e);
    vg_loop_result_release(&r);
    return rc;
}

/* The texts of request i's messages, joined with '|'. */
static void request_texts(struct turns *s, size_t i, char *out, size_t n)
{
    json_t *msgs = watch_model_messages(&s->wm, i), *m;
    size_t k, at = 0;
    out[0] = '\0';
    json_array_foreach (msgs, k, m) {
        const char *text = json_string_value(json_object_get(m, "text"));
        at +=
            (size_t)snprintf(out + at, at < n ? n - at : 0, "%s%s", k ? "|" : "", text ? text : "");
    }
}

static void failed_turns_leave_the_context(int restart)
{
    struct turns s;
    char texts[1000];
    open_turns(&s, restart ? "failed_turn_restart" : "failed_turn_kept");
    ASSERT_OK(turn(&s, "hi"));
    ASSERT_CODE(VIGIL_ERATELIMIT, turn(&s, "what is the answer?"));
    ASSERT_CODE(VIGIL_EPROVIDER, turn(&s, "what is the answer? (again)"));
    if (restart)
        test_rt_reopen(&s.t);
    ASSERT_OK(turn(&s, "what is the answer, please?"));
    ASSERT_OK(turn(&s, "thanks"));
    ASSERT_EQ(s.wm.n_requests, 5);
    request_texts(&s, 3, texts, sizeof texts);
    ASSERT_STREQ(texts, "hi|hello to you|what is the answer, please?");
    request_texts(&s, 4, texts, sizeof texts);
    ASSERT_STREQ(texts, "hi|hello to you|what is the answer, please?|the answer|thanks");
    /* The store keeps every question asked, the failed ones too. */
    int64_t n = 0;
    struct vg_query q = {.kind = "message", .owner = s.agent, .k1 = s.thread, .k2 = "user"};
    ASSERT_OK(vg_store_count(s.t.env->store, &q, &n, E));
    ASSERT_EQ(n, 5);
    close_turns(&s);
}

TEST(failed_turns_questions_stay_stored_but_leave_later_requests)
{
    failed_turns_leave_the_context(0);
}

TEST(failed_turns_questions_leave_requests_read_after_a_restart)
{
    failed_turns_leave_the_context(1);
}

int main(void)
{
    RUN(failed_turns_questions_stay_stored_but_leave_later_requests);
    RUN(failed_turns_questions_leave_requests_read_after_a_restart);
    return 0;
}
