/*
 * test_window_cache.c: the hot window kept between runs (loop/window_cache.h). A kept window
 * reads only the messages added since, whoever added them: another connection to the store
 * (what another process is) catches up exactly as a fresh read would show the thread, and so
 * does a thread compaction summarized; a run's request then holds what the other process wrote.
 */
#include "helpers/rt.h"

#include "agent/agent.h"
#include "agent/agent_int.h"
#include "helpers/echo_executor.h"
#include "loop/loop.h"
#include "loop/watch_model.h"
#include "loop/window_cache.h"
#include "memory/compact.h"
#include "model/model.h"
#include "os/fs.h"

#define BUDGET 100000

static void append(struct vg_env *env, const char *agent, const char *thread,
                   enum vg_message_kind kind, const char *content, json_t *metadata)
{
    struct vg_message_in m = {.agent_id = agent,
                              .thread_id = thread,
                              .kind = kind,
                              .content = content,
                              .metadata = metadata};
    ASSERT_OK(vg_message_append(env, &m, NULL, E));
    json_decref(metadata);
}

/* A user message, one tool exchange answered, and a reply. */
static void append_turn(struct vg_env *env, const char *agent, const char *thread, const char *tag)
{
    char text[64], call[64];
    snprintf(text, sizeof text, "question %s", tag);
    snprintf(call, sizeof call, "call_%s", tag);
    append(env, agent, thread, VG_MSG_USER, text, NULL);
    append(env, agent, thread, VG_MSG_THOUGHT, "",
           json_pack("{s:[{s:s, s:s, s:s}]}", "tool_calls", "id", call, "name", "echo", "arguments",
                     "{}"));
    append(env, agent, thread, VG_MSG_TOOL_RESULT, "{\"echo\":\"ok\"}",
           json_pack("{s:s, s:s}", "tool_call_id", call, "toolName", "echo"));
    snprintf(text, sizeof text, "answer %s", tag);
    append(env, agent, thread, VG_MSG_THOUGHT, text, NULL);
}

/* The window as a run read it before windows were kept: the store's recent messages, pushed. */
static void fresh_window(struct vg_env *env, const char *agent, const char *thread,
                         struct vg_window *w)
{
    json_t *latest = NULL;
    vg_window_init(w, BUDGET);
    ASSERT_OK(vg_message_recent(env, agent, thread, BUDGET, &latest, E));
    for (size_t i = 0; i < json_array_size(latest); i++)
        ASSERT_OK(vg_window_push_body(w, json_array_get(latest, i), E));
    ASSERT_OK(vg_window_flush(w, E));
    json_decref(latest);
}

static void assert_same(const struct vg_window *a, const struct vg_window *b)
{
    ASSERT_EQ(a->n, b->n);
    ASSERT_EQ(a->turn, b->turn);
    ASSERT_EQ(a->tokens, b->tokens);
    for (size_t i = 0; i < a->n; i++) {
        const struct vg_window_msg *x = a->msgs[i], *y = b->msgs[i];
        ASSERT_STREQ(x->kind, y->kind);
        ASSERT_STREQ(x->content, y->content);
        ASSERT_EQ(x->tool_call_id == NULL, y->tool_call_id == NULL);
        if (x->tool_call_id)
            ASSERT_STREQ(x->tool_call_id, y->tool_call_id);
        ASSERT_EQ(x->is_error, y->is_error);
        ASSERT_EQ(x->n_calls, y->n_calls);
        for (size_t k = 0; k < x->n_calls; k++) {
            ASSERT_STREQ(x->calls[k].id, y->calls[k].id);
            ASSERT_STREQ(x->calls[k].arguments, y->calls[k].arguments);
        }
    }
}

/* The kept window and a fresh read agree. */
static void assert_caught_up(struct vg_env *env, const char *agent, const char *thread)
{
    struct vg_window kept, fresh;
    ASSERT_OK(vg_window_cache_read(env, agent, thread, BUDGET, &kept, E));
    fresh_window(env, agent, thread, &fresh);
    assert_same(&kept, &fresh);
    vg_window_release(&kept);
    vg_window_release(&fresh);
}

static vigil_runtime *open_other(const struct test_rt *t)
{
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t->path};
    vigil_runtime *rt = NULL;
    ASSERT_OK(vigil_runtime_open(&o, &rt, E));
    return rt;
}

/* A fresh store with one agent; thread receives its default session's thread. */
static void open_agent(struct test_rt *t, const char *name, char agent[37], char thread[128])
{
    test_rt_open(t, name);
    vigil_agent_spec spec = {.name = "kept"};
    ASSERT_OK(vigil_agent_create(t->rt, &spec, agent, E));
    snprintf(thread, 128, "%s:session:default", agent);
}

/* A kept window reads only what is newer than its newest message: one slipped in below it
 * (which never happens: messages only follow the thread's head) is not read again, while a
 * fresh read shows it. Without the kept window every run reread the thread. */
TEST(a_kept_window_reads_only_newer_messages)
{
    struct test_rt t;
    char agent[37], thread[128];
    open_agent(&t, "window_cache_newer", agent, thread);
    append_turn(t.env, agent, thread, "1");
    struct vg_window w;
    ASSERT_OK(vg_window_cache_read(t.env, agent, thread, BUDGET, &w, E));
    ASSERT_EQ(w.n, 4);
    vg_window_release(&w);
    /* An observation: a person's message with no answer after it would leave the window. */
    ASSERT_OK(vg_env_put_text(t.env, "message", "slipped", agent, thread, "observation", 0,
                              "{\"id\":\"slipped\",\"kind\":\"observation\","
                              "\"content\":\"old\",\"seq\":0}",
                              0, E));
    append(t.env, agent, thread, VG_MSG_USER, "question 2", NULL);
    ASSERT_OK(vg_window_cache_read(t.env, agent, thread, BUDGET, &w, E));
    ASSERT_EQ(w.n, 5);
    ASSERT_STREQ(w.msgs[4]->content, "question 2");
    for (size_t i = 0; i < w.n; i++)
        ASSERT(strcmp(w.msgs[i]->content, "old") != 0);
    vg_window_release(&w);
    struct vg_window fresh;
    fresh_window(t.env, agent, thread, &fresh);
    ASSERT_EQ(fresh.n, 6);
    vg_window_release(&fresh);
    test_rt_close(&t);
}

/* A kept window whose newest message was rolled back (a read outside a transaction sees an
 * open round's released writes; the round then failed) is read again: the message that took
 * the lost one's sequence shows, not the lost one. The round's failure is made by hand here:
 * the message removed and the thread's heads moved back. */
TEST(a_kept_window_whose_newest_message_was_rolled_back_is_read_again)
{
    struct test_rt t;
    char agent[37], thread[128], key[200], lost[VG_RECORD_ID_MAX];
    open_agent(&t, "window_cache_rolled_back", agent, thread);
    append_turn(t.env, agent, thread, "1");
    snprintf(key, sizeof key, "%s:%s", agent, thread);
    struct vg_pointer agent_head, thread_head;
    ASSERT_OK(vg_pointer_read(t.env, "agent_head_message", agent, &agent_head, E));
    ASSERT_OK(vg_pointer_read(t.env, "agent_head_message", key, &thread_head, E));
    append(t.env, agent, thread, VG_MSG_USER, "lost", NULL);
    struct vg_window w;
    ASSERT_OK(vg_window_cache_read(t.env, agent, thread, BUDGET, &w, E));
    ASSERT_STREQ(w.msgs[w.n - 1]->content, "lost"); /* kept, with the message to be lost */
    vg_window_release(&w);
    ASSERT_OK(vg_link_pointer_get(t.env, "agent_head_message", key, lost, sizeof lost, E));
    struct vg_pointer now;
    ASSERT_OK(vg_store_remove(t.env->store, "message", lost, E));
    ASSERT_OK(vg_pointer_read(t.env, "agent_head_message", agent, &now, E));
    ASSERT_OK(vg_pointer_write(t.env, agent, "agent_head_message", agent, agent_head.to,
                               agent_head.seq, &now, E));
    ASSERT_OK(vg_pointer_read(t.env, "agent_head_message", key, &now, E));
    ASSERT_OK(vg_pointer_write(t.env, agent, "agent_head_message", key, thread_head.to,
                               thread_head.seq, &now, E));
    append(t.env, agent, thread, VG_MSG_USER, "kept", NULL); /* the lost one's sequence */
    ASSERT_OK(vg_window_cache_read(t.env, agent, thread, BUDGET, &w, E));
    struct vg_window fresh;
    fresh_window(t.env, agent, thread, &fresh);
    ASSERT_STREQ(w.msgs[w.n - 1]->content, "kept");
    assert_same(&w, &fresh);
    vg_window_release(&w);
    vg_window_release(&fresh);
    test_rt_close(&t);
}

/* Another process appends to the thread (several turns, a tool exchange among them) between
 * this process's runs: the kept window catches up to what a fresh read shows. */
TEST(another_process_appending_is_caught_up)
{
    struct test_rt t;
    char agent[37], thread[128];
    open_agent(&t, "window_cache_other", agent, thread);
    append_turn(t.env, agent, thread, "1");
    assert_caught_up(t.env, agent, thread);
    vigil_runtime *other = open_other(&t);
    struct vg_env *oenv = vg_runtime_env(other);
    append_turn(oenv, agent, thread, "2");
    append_turn(oenv, agent, thread, "3");
    append(t.env, agent, thread, VG_MSG_USER, "question 4", NULL);
    assert_caught_up(t.env, agent, thread);
    /* The other process read (and keeps) its own window; this one appends; it catches up. */
    assert_caught_up(oenv, agent, thread);
    append_turn(t.env, agent, thread, "5");
    assert_caught_up(oenv, agent, thread);
    assert_caught_up(t.env, agent, thread);
    vigil_runtime_close(other);
    test_rt_close(&t);
}

/* Compaction summarizes a thread into its summary thread and changes no message of it: the kept
 * window stays what a fresh read shows, before and after. */
TEST(compaction_leaves_the_kept_window_true)
{
    static const struct vg_compaction_policy policy = {.thread_budget = 200,
                                                       .keep_tokens = 100,
                                                       .summary_tokens = 60,
                                                       .level2_fanout = 3,
                                                       .max_attempts = 4,
                                                       .fallback_after = 2,
                                                       .backoff_base_ms = 1000,
                                                       .backoff_max_ms = 3000,
                                                       .lease_ms = 10000};
    struct test_rt t;
    char agent[37], thread[128], job[VG_RECORD_ID_MAX];
    open_agent(&t, "window_cache_compact", agent, thread);
    for (int i = 0; i < 40; i++) {
        char tag[16];
        snprintf(tag, sizeof tag, "%d", i);
        append_turn(t.env, agent, thread, tag);
    }
    assert_caught_up(t.env, agent, thread);
    ASSERT_OK(vg_compact_consider(t.env, agent, thread, &policy, job, E));
    ASSERT(job[0]);
    int ran = 0;
    ASSERT_OK(vg_compact_run_one(t.env, NULL, &policy, &ran, E));
    ASSERT_EQ(ran, 1);
    append(t.env, agent, thread, VG_MSG_USER, "after the summary", NULL);
    assert_caught_up(t.env, agent, thread);
    test_rt_close(&t);
}

/* A model call's request in this process holds the turn another process had in between. */
TEST(a_run_shows_the_model_what_another_process_wrote)
{
    struct test_rt t;
    char agent[37], thread[128], path[4300];
    open_agent(&t, "window_cache_run", agent, thread);
    snprintf(path, sizeof path, "%s.cassette.json", t.path);
    static const char cassette[] = "{\"vigil_cassette\":1,\"exchanges\":["
                                   "{\"response\":{\"text\":\"first reply\"}},"
                                   "{\"response\":{\"text\":\"second reply\"}}]}";
    ASSERT_OK(vg_fs_write_file(path, cassette, strlen(cassette), E));
    struct vg_model_options mo = {
        .provider = "scripted", .cassette = path, .clock = &t.clock.base, .max_retries = -1};
    struct vg_model *inner = NULL;
    ASSERT_OK(vg_model_new(&mo, &inner, E));
    struct watch_model wm;
    watch_model_init(&wm, inner);
    wm.keep = 1;
    static const char *const inputs[] = {"hello", "again"};
    for (int i = 0; i < 2; i++) {
        struct vg_loop_input in = {.agent_id = agent,
                                   .thread_id = thread,
                                   .run_key = inputs[i],
                                   .wake_reason = "user",
                                   .input = inputs[i],
                                   .model = &wm.base,
                                   .executor = vg_loop_echo_executor()};
        struct vg_loop_result r;
        ASSERT_OK(vg_loop_run(t.env, &in, &r, E));
        ASSERT_EQ(r.end, VG_LOOP_COMPLETED);
        vg_loop_result_release(&r);
        if (i == 0) { /* between the runs, another process has a turn of its own */
            vigil_runtime *other = open_other(&t);
            append_turn(vg_runtime_env(other), agent, thread, "elsewhere");
            vigil_runtime_close(other);
        }
    }
    json_t *msgs = watch_model_messages(&wm, 1);
    static const char *const want[] = {
        "hello", "first reply", "question elsewhere", NULL, NULL, "answer elsewhere", "again"};
    ASSERT_EQ(json_array_size(msgs), VG_ARRAY_LEN(want));
    for (size_t i = 0; i < VG_ARRAY_LEN(want); i++) {
        if (!want[i])
            continue;
        json_t *m = json_array_get(msgs, i);
        ASSERT_STREQ(json_string_value(json_object_get(m, "text")), want[i]);
    }
    watch_model_release(&wm);
    vg_model_free(inner);
    test_rt_close(&t);
}

int main(void)
{
    RUN(a_kept_window_reads_only_newer_messages);
    RUN(a_kept_window_whose_newest_message_was_rolled_back_is_read_again);
    RUN(another_process_appending_is_caught_up);
    RUN(compaction_leaves_the_kept_window_true);
    RUN(a_run_shows_the_model_what_another_process_wrote);
    return 0;
}
