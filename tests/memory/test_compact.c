/*
 * test_compact.c: compaction jobs: the state machine with bounded backoff and the fallback
 * summarizer, derived summary ids that make replays and two concurrent workers (two runtimes on
 * one store file) produce one summary, pointers that move only with the summary, depth-2
 * summaries, and context assembly that replaces covered history by summaries.
 */
#include "helpers/http_server.h"
#include "helpers/rt.h"

#include "loop/loop.h"
#include "memory/compact.h"
#include "memory/loop_adapter.h"
#include "memory/memory.h"
#include "model/model.h"

/* A model summarizer stand-in: fails with `code` while fails_left > 0. */
struct fake_sum {
    struct vg_summarizer base;
    int fails_left;
    vigil_code code;
    int calls;
};

static vigil_code fake_summarize(struct vg_summarizer *s, json_t *messages, int depth,
                                 int max_tokens, char **out, vigil_error *err)
{
    struct fake_sum *f = (struct fake_sum *)s;
    f->calls++;
    if (f->fails_left > 0) {
        f->fails_left--;
        return VG_FAIL(err, f->code, "model summarizer failed");
    }
    char buf[128];
    snprintf(buf, sizeof buf, "model summary of %zu items at depth %d", json_array_size(messages),
             depth);
    *out = vg_strdup(buf);
    return *out ? VIGIL_OK : VIGIL_ENOMEM;
}

static const struct vg_summarizer_methods fake_methods = {1, "model", fake_summarize};

static void fill(struct test_rt *t, const char *agent, const char *thread, int n)
{
    for (int i = 0; i < n; i++) {
        char text[128];
        snprintf(text, sizeof text, "message number %d talks about topic%d. More words here.", i,
                 i);
        struct vg_message_in in = {.agent_id = agent,
                                   .thread_id = thread,
                                   .kind = i % 2 ? VG_MSG_THOUGHT : VG_MSG_USER,
                                   .content = text};
        ASSERT_OK(vg_message_append(t->env, &in, NULL, E));
    }
}

static const struct vg_compaction_policy policy = {.thread_budget = 200,
                                                   .keep_tokens = 100,
                                                   .summary_tokens = 60,
                                                   .level2_fanout = 3,
                                                   .max_attempts = 4,
                                                   .fallback_after = 2,
                                                   .backoff_base_ms = 1000,
                                                   .backoff_max_ms = 3000,
                                                   .lease_ms = 10000};

static int64_t count(struct test_rt *t, const char *kind, const char *owner, const char *k1,
                     const char *k2)
{
    struct vg_query q = {.kind = kind, .owner = owner, .k1 = k1, .k2 = k2};
    int64_t n = 0;
    ASSERT_OK(vg_store_count(t->env->store, &q, &n, E));
    return n;
}

static json_t *job(struct test_rt *t, const char *id)
{
    json_t *j = NULL;
    ASSERT_OK(vg_compact_job_get(t->env, id, &j, E));
    return j;
}

static const char *status(json_t *j)
{
    return json_string_value(json_object_get(j, "status"));
}

/* proves: S0-035, S0-039, S0-041, S0-174, S0-038 */
TEST(job_state_machine_with_backoff_and_fallback)
{
    struct test_rt t;
    test_rt_open(&t, "compact_states");
    char agent[37], jid[VG_RECORD_ID_MAX];
    vigil_agent_spec spec = {.name = "c"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    fill(&t, agent, "chat", 10); /* ~15 tokens each: under the 200 budget */
    ASSERT_OK(vg_compact_consider(t.env, agent, "chat", &policy, jid, E));
    ASSERT_STREQ(jid, "");
    fill(&t, agent, "chat", 10);
    ASSERT_OK(vg_compact_consider(t.env, agent, "chat", &policy, jid, E));
    ASSERT(jid[0]);
    char again[VG_RECORD_ID_MAX];
    ASSERT_OK(vg_compact_consider(t.env, agent, "chat", &policy, again, E));
    ASSERT_STREQ(again, ""); /* single-flight: one open job per thread */
    json_t *j = job(&t, jid);
    ASSERT_STREQ(status(j), "pending");
    ASSERT_EQ(json_integer_value(json_object_get(j, "attempts")), 0);
    int64_t span_n = json_integer_value(json_object_get(j, "messages"));
    ASSERT(span_n >= 1 && span_n < 20);
    json_decref(j);

    /* the job survives a restart */
    test_rt_reopen(&t);
    struct fake_sum model = {{&fake_methods}, 5, VIGIL_EPROVIDER, 0};
    int ran = 0;
    ASSERT_OK(vg_compact_run_one(t.env, &model.base, &policy, &ran, E));
    ASSERT_EQ(ran, 1);
    j = job(&t, jid);
    ASSERT_STREQ(status(j), "pending");
    ASSERT_EQ(json_integer_value(json_object_get(j, "attempts")), 1);
    int64_t now = vg_env_now(t.env);
    ASSERT_EQ(json_integer_value(json_object_get(j, "next_attempt_ms")), now + 1000);
    ASSERT_CONTAINS(json_string_value(json_object_get(j, "last_error")), "model summarizer");
    json_decref(j);
    /* pointers did not move, raw history intact */
    json_t *st = NULL;
    ASSERT_OK(vg_state_get(t.env, agent, &st, NULL, E));
    ASSERT(json_is_null(json_object_get(st, "latest_summary_message_id")));
    json_decref(st);
    ASSERT_EQ(count(&t, "message", agent, "chat", NULL), 20);

    /* not due yet: nothing runs */
    ASSERT_OK(vg_compact_run_one(t.env, &model.base, &policy, &ran, E));
    ASSERT_EQ(ran, 0);
    vg_test_clock_advance(&t.clock, 1000);
    ASSERT_OK(vg_compact_run_one(t.env, &model.base, &policy, &ran, E));
    j = job(&t, jid);
    ASSERT_EQ(json_integer_value(json_object_get(j, "attempts")), 2);
    ASSERT_EQ(json_integer_value(json_object_get(j, "next_attempt_ms")),
              vg_env_now(t.env) + 2000); /* doubled */
    json_decref(j);
    /* third attempt: past fallback_after, the extractive summarizer makes the summary */
    vg_test_clock_advance(&t.clock, 2000);
    ASSERT_OK(vg_compact_run_one(t.env, &model.base, &policy, &ran, E));
    ASSERT_EQ(model.calls, 2);
    j = job(&t, jid);
    ASSERT_STREQ(status(j), "done");
    ASSERT_STREQ(json_string_value(json_object_get(j, "summarizer")), "extractive");
    const char *sid = json_string_value(json_object_get(j, "summary_id"));
    json_t *sum = NULL;
    ASSERT_OK(vg_message_get(t.env, sid, &sum, E));
    ASSERT_STREQ(json_string_value(json_object_get(sum, "kind")), "summary");
    ASSERT_CONTAINS(json_string_value(json_object_get(sum, "content")), "message number 0");
    ASSERT_EQ(json_integer_value(json_object_get(json_object_get(sum, "metadata"), "depth")), 1);
    json_decref(sum);
    json_t *links = NULL;
    ASSERT_OK(vg_link_targets(t.env, "summary_start", sid, &links, E));
    ASSERT_STREQ(json_string_value(json_array_get(links, 0)),
                 json_string_value(json_object_get(j, "start_id")));
    json_decref(links);
    ASSERT_OK(vg_link_targets(t.env, "summary_end", sid, &links, E));
    ASSERT_STREQ(json_string_value(json_array_get(links, 0)),
                 json_string_value(json_object_get(j, "end_id")));
    json_decref(links);
    ASSERT_OK(vg_state_get(t.env, agent, &st, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(st, "latest_summary_message_id")), sid);
    json_decref(st);
    json_decref(j);
    ASSERT_EQ(count(&t, "message", agent, "chat", NULL), 20); /* raw messages stay */
    test_rt_close(&t);
}

/* proves: S0-040, S0-039 */
TEST(max_attempts_make_a_job_terminal_and_refusals_fall_back_at_once)
{
    struct test_rt t;
    test_rt_open(&t, "compact_terminal");
    char agent[37], jid[VG_RECORD_ID_MAX];
    vigil_agent_spec spec = {.name = "c"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    fill(&t, agent, "chat", 20);
    struct vg_compaction_policy p = policy;
    p.fallback_after = 100; /* never fall back on plain failures */
    p.max_attempts = 3;
    ASSERT_OK(vg_compact_consider(t.env, agent, "chat", &p, jid, E));
    struct fake_sum model = {{&fake_methods}, 100, VIGIL_ENETWORK, 0};
    int ran;
    for (int i = 0; i < 3; i++) {
        ASSERT_OK(vg_compact_run_one(t.env, &model.base, &p, &ran, E));
        ASSERT_EQ(ran, 1);
        vg_test_clock_advance(&t.clock, 10000);
    }
    json_t *j = job(&t, jid);
    ASSERT_STREQ(status(j), "failed_terminal");
    json_decref(j);
    ASSERT_OK(vg_compact_run_one(t.env, &model.base, &p, &ran, E));
    ASSERT_EQ(ran, 0);
    /* manual retry, and a rate-limit refusal runs the fallback in the same attempt */
    ASSERT_OK(vg_compact_job_retry(t.env, jid, E));
    model.code = VIGIL_ERATELIMIT;
    ASSERT_OK(vg_compact_run_one(t.env, &model.base, &p, &ran, E));
    j = job(&t, jid);
    ASSERT_STREQ(status(j), "done");
    ASSERT_EQ(json_integer_value(json_object_get(j, "attempts")), 1);
    ASSERT_STREQ(json_string_value(json_object_get(j, "summarizer")), "extractive");
    json_decref(j);
    ASSERT_CODE(VIGIL_ESTATE, vg_compact_job_retry(t.env, jid, NULL));
    test_rt_close(&t);
}

/* proves: S0-037, S0-177, S0-036 */
TEST(replays_and_two_workers_make_one_summary)
{
    struct test_rt a;
    test_rt_open(&a, "compact_two");
    char agent[37], jid[VG_RECORD_ID_MAX];
    vigil_agent_spec spec = {.name = "c"};
    ASSERT_OK(vigil_agent_create(a.rt, &spec, agent, E));
    fill(&a, agent, "chat", 20);
    ASSERT_OK(vg_compact_consider(a.env, agent, "chat", &policy, jid, E));
    /* a second runtime on the same store file: another worker process */
    vigil_runtime *rb = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = a.path};
    ASSERT_OK(vg_runtime_open_with(&o, &a.clock.base, vg_ids_seeded(&a.clock.base, 99), &rb, E));
    struct vg_env *b = vg_runtime_env(rb);

    char ja[VG_RECORD_ID_MAX], jb[VG_RECORD_ID_MAX];
    json_t *job_a = NULL, *job_b = NULL;
    ASSERT_OK(vg_compact_claim(a.env, &policy, ja, &job_a, E));
    ASSERT_STREQ(ja, jid);
    ASSERT_OK(vg_compact_claim(b, &policy, jb, &job_b, E));
    ASSERT(job_b == NULL); /* claimed and leased by A */
    /* A stalls past its lease; B takes the job over and finishes it */
    vg_test_clock_advance(&a.clock, 10001);
    ASSERT_OK(vg_compact_claim(b, &policy, jb, &job_b, E));
    ASSERT_STREQ(jb, jid);
    ASSERT_OK(vg_compact_commit(b, job_b, "summary by B", "model", E));
    /* A wakes up and commits its own text for the same span: nothing new is made */
    ASSERT_OK(vg_compact_commit(a.env, job_a, "summary by A", "model", E));
    /* and a plain replay of B's commit changes nothing either */
    ASSERT_OK(vg_compact_commit(b, job_b, "summary by B", "model", E));
    char sthread[VG_RECORD_ID_MAX];
    vg_compact_summary_thread("chat", sthread);
    ASSERT_EQ(count(&a, "message", agent, sthread, NULL), 1);
    ASSERT_EQ(count(&a, "link", agent, NULL, NULL) > 0, 1);
    json_t *msgs = NULL;
    ASSERT_OK(vg_message_latest(a.env, agent, sthread, 5, &msgs, E));
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(msgs, 0), "content")),
                 "summary by B");
    json_decref(msgs);

    /* even with the job record lost and rescheduled, the span-derived id refuses a second
     * summary for the span */
    ASSERT_OK(vg_store_remove(a.env->store, "compaction_job", jid, E));
    ASSERT_OK(
        vg_env_put_json(a.env, "compaction_job", jid, agent, "chat", "running", 0, job_a, 0, E));
    ASSERT_OK(vg_compact_commit(a.env, job_a, "summary by A again", "model", E));
    ASSERT_EQ(count(&a, "message", agent, sthread, NULL), 1);
    json_t *cur = NULL;
    int64_t crev = 0;
    ASSERT_OK(vg_compact_cursor(a.env, agent, "chat", &cur, &crev, E));
    json_int_t covered = json_integer_value(json_object_get(cur, "covered_seq"));
    ASSERT_EQ(covered, json_integer_value(json_object_get(job_b, "end_seq")));
    json_decref(cur);
    json_decref(job_a);
    json_decref(job_b);
    vigil_runtime_close(rb);
    test_rt_close(&a);
}

/* proves: S0-032, S0-042, S0-043, S0-031, S4-012, S4-042 */
TEST(spans_are_contiguous_and_summaries_replace_history_in_context)
{
    struct test_rt t;
    test_rt_open(&t, "compact_spans");
    char agent[37];
    vigil_agent_spec spec = {.name = "c"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    struct fake_sum model = {{&fake_methods}, 0, VIGIL_OK, 0};
    int64_t prev_end = 0;
    int summaries = 0, depth2 = 0;
    for (int round = 0; round < 12; round++) {
        fill(&t, agent, "chat", 8);
        char jid[VG_RECORD_ID_MAX];
        for (;;) {
            ASSERT_OK(vg_compact_consider(t.env, agent, "chat", &policy, jid, E));
            if (!jid[0])
                break;
            int ran = 0;
            ASSERT_OK(vg_compact_run_one(t.env, &model.base, &policy, &ran, E));
            json_t *j = job(&t, jid);
            ASSERT_STREQ(status(j), "done");
            if (json_integer_value(json_object_get(j, "depth")) == 1) {
                /* contiguous: each span starts right after the previous one in the thread */
                int64_t start = json_integer_value(json_object_get(j, "start_seq"));
                struct vg_query q = {.kind = "message",
                                     .owner = agent,
                                     .k1 = "chat",
                                     .has_seq_min = 1,
                                     .seq_min = prev_end + 1,
                                     .has_seq_max = 1,
                                     .seq_max = start - 1};
                int64_t gap = 0;
                ASSERT_OK(vg_store_count(t.env->store, &q, &gap, E));
                ASSERT_EQ(gap, 0);
                prev_end = json_integer_value(json_object_get(j, "end_seq"));
                summaries++;
            } else {
                depth2++;
            }
            json_decref(j);
        }
    }
    ASSERT(summaries >= 4);
    ASSERT(depth2 >= 1);
    /* context: hot messages start after the covered span; summaries come with it */
    struct vg_memory *m = NULL;
    ASSERT_OK(vg_memory_new(t.env, NULL, &m, E));
    struct vg_assemble_opts o = {.agent_id = agent, .thread_id = "chat", .hot_max = 200};
    struct vg_context c;
    ASSERT_OK(vg_memory_assemble(m, &o, &c, E));
    ASSERT(json_array_size(c.summaries) >= 1);
    ASSERT(json_integer_value(json_object_get(json_array_get(c.hot, 0), "seq")) > prev_end);
    ASSERT(json_array_size(c.hot) < 96);
    int saw_depth2 = 0;
    for (size_t i = 0; i < json_array_size(c.summaries); i++)
        saw_depth2 |=
            json_integer_value(json_object_get(
                json_object_get(json_array_get(c.summaries, i), "metadata"), "depth")) == 2;
    ASSERT(saw_depth2);
    vg_context_release(&c);
    /* summarized raw messages stay searchable */
    json_t *hits = NULL;
    ASSERT_OK(vg_memory_search(m, agent, "topic3", VG_SEARCH_KEYWORD, 5, &hits, E));
    ASSERT(json_array_size(hits) >= 1);
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(hits, 0), "kind")), "message");
    json_decref(hits);
    vg_memory_free(m);
    test_rt_close(&t);
}

/* proves: S0-034 */
TEST(model_summarizer_first_extractive_on_refusal)
{
    static const struct vg_ts_response rs[] = {
        {.body = "{\"id\":\"c1\",\"object\":\"chat.completion\",\"model\":\"m\","
                 "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
                 "\"content\":\"The user talked about topics 0 to 9.\"},"
                 "\"finish_reason\":\"stop\"}],"
                 "\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":9}}"},
        {.status = 429, .body = "{\"error\":{\"message\":\"rate limited\"}}"},
    };
    struct vg_test_server *srv = vg_test_server_start(rs, VG_ARRAY_LEN(rs));
    struct test_rt t;
    test_rt_open(&t, "compact_model");
    char base[160];
    snprintf(base, sizeof base, "%s/v1", vg_test_server_url(srv));
    struct vg_model_options mo = {.provider = "openai",
                                  .model = "m",
                                  .base_url = base,
                                  .api_key = "k",
                                  .clock = &t.clock.base,
                                  .max_retries = -1,
                                  .timeout_ms = 5000};
    struct vg_model *model = NULL;
    ASSERT_OK(vg_model_new(&mo, &model, E));
    struct vg_summarizer_model sm;
    vg_summarizer_model_init(&sm, model);
    char agent[37], jid[VG_RECORD_ID_MAX];
    vigil_agent_spec spec = {.name = "c"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    fill(&t, agent, "chat", 20);
    ASSERT_OK(vg_compact_consider(t.env, agent, "chat", &policy, jid, E));
    int ran = 0;
    ASSERT_OK(vg_compact_run_one(t.env, &sm.base, &policy, &ran, E));
    json_t *j = job(&t, jid);
    ASSERT_STREQ(status(j), "done");
    ASSERT_STREQ(json_string_value(json_object_get(j, "summarizer")), "model");
    json_t *sum = NULL;
    ASSERT_OK(vg_message_get(t.env, json_string_value(json_object_get(j, "summary_id")), &sum, E));
    ASSERT_STREQ(json_string_value(json_object_get(sum, "content")),
                 "The user talked about topics 0 to 9.");
    json_decref(sum);
    json_decref(j);
    const struct vg_ts_request *rq = vg_test_server_request(srv, 0);
    ASSERT_CONTAINS(rq->body, "Summarize the conversation span");
    ASSERT_CONTAINS(rq->body, "message number 0");
    /* the next span meets a rate limit: the fallback summarizes in the same attempt */
    fill(&t, agent, "chat", 20);
    ASSERT_OK(vg_compact_consider(t.env, agent, "chat", &policy, jid, E));
    ASSERT(jid[0]);
    ASSERT_OK(vg_compact_run_one(t.env, &sm.base, &policy, &ran, E));
    j = job(&t, jid);
    ASSERT_STREQ(status(j), "done");
    ASSERT_STREQ(json_string_value(json_object_get(j, "summarizer")), "extractive");
    ASSERT_EQ(json_integer_value(json_object_get(j, "attempts")), 1);
    json_decref(j);
    vg_model_free(model);
    test_rt_close(&t);
    vg_test_server_stop(srv);
}

static void append_n(struct vg_env *env, const char *agent, int n, int salt)
{
    for (int i = 0; i < n; i++) {
        char text[160];
        snprintf(text, sizeof text, "turn %d line %d: a few more words about topic%d to count.",
                 salt, i, salt * 7 + i);
        struct vg_message_in in = {
            .agent_id = agent, .thread_id = "chat", .kind = VG_MSG_USER, .content = text};
        ASSERT_OK(vg_message_append(env, &in, NULL, E));
    }
}

static int sum_tokens(void *user, const struct vg_record *r)
{
    int64_t *sums = user; /* total, count */
    json_t *b = json_loads(r->body, 0, NULL);
    ASSERT(b != NULL);
    sums[0] += json_integer_value(json_object_get(b, "tokens"));
    sums[1]++;
    json_decref(b);
    return 0;
}

/* Whether a fresh scan of the thread's uncovered messages passes the budget: what
 * vg_compact_consider decided at depth 1 before it kept a tally. */
static int fresh_scan_passes(struct vg_env *env, const char *agent)
{
    json_t *cur = NULL;
    int64_t rev = 0, sums[2] = {0, 0};
    ASSERT_OK(vg_compact_cursor(env, agent, "chat", &cur, &rev, E));
    struct vg_query q = {.kind = "message",
                         .owner = agent,
                         .k1 = "chat",
                         .has_seq_min = 1,
                         .seq_min = json_integer_value(json_object_get(cur, "covered_seq")) + 1,
                         .limit = 200 * 4 + 64};
    json_decref(cur);
    ASSERT_OK(vg_store_scan(env->store, &q, sum_tokens, sums, E));
    return sums[1] > 0 && (sums[0] > policy.thread_budget || sums[1] >= q.limit);
}

/* The check after a run keeps a tally of the uncovered tokens and reads only the messages added
 * since; it must decide as a fresh scan does, turn after turn, across compactions, with another
 * process (a second runtime on the store) appending to the thread between checks. */
TEST(the_kept_tally_decides_as_a_fresh_scan_turn_after_turn)
{
    struct test_rt a;
    test_rt_open(&a, "compact_tally");
    char agent[37], jid[VG_RECORD_ID_MAX];
    vigil_agent_spec spec = {.name = "c"};
    ASSERT_OK(vigil_agent_create(a.rt, &spec, agent, E));
    vigil_runtime *rb = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = a.path};
    ASSERT_OK(vg_runtime_open_with(&o, &a.clock.base, vg_ids_seeded(&a.clock.base, 7), &rb, E));
    struct vg_env *b = vg_runtime_env(rb);
    struct fake_sum model = {{&fake_methods}, 0, VIGIL_OK, 0};
    int scheduled = 0, quiet = 0, by_other = 0;
    for (int turn = 0; turn < 90; turn++) {
        int other = turn % 4 == 1; /* the other process's turn: A has not seen these */
        append_n(other ? b : a.env, agent, 1 + turn % 3, turn);
        by_other += other && fresh_scan_passes(a.env, agent);
        int expect = fresh_scan_passes(a.env, agent);
        ASSERT_OK(vg_compact_consider(a.env, agent, "chat", &policy, jid, E));
        json_t *j = jid[0] ? job(&a, jid) : NULL;
        int depth1 = j && json_integer_value(json_object_get(j, "depth")) == 1;
        json_decref(j);
        ASSERT_EQ(depth1, expect);
        scheduled += depth1;
        quiet += !expect;
        while (jid[0]) { /* summarize what is due, as the worker would, before the next turn */
            int ran = 0;
            ASSERT_OK(vg_compact_run_one(a.env, &model.base, &policy, &ran, E));
            ASSERT_OK(vg_compact_consider(a.env, agent, "chat", &policy, jid, E));
        }
    }
    ASSERT(scheduled >= 5);
    ASSERT(quiet >= 20);
    ASSERT(by_other >= 1); /* a decision that only the other process's messages made */
    vigil_runtime_close(rb);
    test_rt_close(&a);
}

static void append_to(struct vg_env *env, const char *agent, const char *thread, const char *text)
{
    struct vg_message_in in = {
        .agent_id = agent, .thread_id = thread, .kind = VG_MSG_USER, .content = text};
    ASSERT_OK(vg_message_append(env, &in, NULL, E));
}

static int depth1_job(struct test_rt *t, const char *agent, const char *thread)
{
    char jid[VG_RECORD_ID_MAX];
    ASSERT_OK(vg_compact_consider(t->env, agent, thread, &policy, jid, E));
    json_t *j = jid[0] ? job(t, jid) : NULL;
    int depth1 = j && json_integer_value(json_object_get(j, "depth")) == 1;
    json_decref(j);
    return depth1;
}

/* Rewrites a stored message's tokens behind the tally's back (no append tells it). */
static void restate_tokens(struct vg_env *env, const char *id, int64_t tokens)
{
    json_t *b = NULL;
    int64_t rev = 0;
    ASSERT_OK(vg_env_get_json(env, "message", id, &b, &rev, E));
    json_object_set_new(b, "tokens", json_integer(tokens));
    ASSERT_OK(vg_env_update_json(env, "message", id,
                                 json_string_value(json_object_get(b, "agent_id")),
                                 json_string_value(json_object_get(b, "thread_id")), "user",
                                 json_integer_value(json_object_get(b, "seq")), b, rev, E));
    json_decref(b);
}

/* The messages this process appends to a thread it started are counted as they are appended:
 * the check after the run reads back only the newest counted one (its anchor), not each one
 * (1.4 M instructions a conversation of 12 tool steps: docs/internals/PERF.md, session 28).
 * Seen here by a count the store no longer agrees with: a message whose stored tokens were
 * rewritten behind the tally's back still counts as appended. */
TEST(a_thread_started_here_is_counted_as_appended_not_read_back)
{
    struct test_rt t;
    test_rt_open(&t, "compact_appended");
    char agent[37], first[VG_RECORD_ID_MAX];
    vigil_agent_spec spec = {.name = "c"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    /* No check has run yet in this process, as when every conversation of vigil_chat_many
     * starts before any ends: the checks' limits are told first, as the runtime's memory does
     * before its first run. */
    vg_compact_keep_tallies(t.env, &policy);
    struct vg_message_in in = {
        .agent_id = agent, .thread_id = "new", .kind = VG_MSG_USER, .content = "hello"};
    ASSERT_OK(vg_message_append(t.env, &in, first, E));
    append_to(t.env, agent, "new", "a short answer");
    append_to(t.env, agent, "new", "a short question");
    restate_tokens(t.env, first, 100000);
    ASSERT_EQ(depth1_job(&t, agent, "new"), 0); /* a fresh scan would pass the budget */
    test_rt_close(&t);
}

/* A tally started by a thread's first append still finds what it counted in the store (an
 * append rolled back is not counted) and still reads what another process appended. */
TEST(a_tally_kept_as_appended_sees_rollbacks_and_other_processes)
{
    struct test_rt a;
    test_rt_open(&a, "compact_appended_other");
    char agent[37];
    vigil_agent_spec spec = {.name = "c"};
    ASSERT_OK(vigil_agent_create(a.rt, &spec, agent, E));
    vigil_runtime *rb = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = a.path};
    ASSERT_OK(vg_runtime_open_with(&o, &a.clock.base, vg_ids_seeded(&a.clock.base, 9), &rb, E));
    struct vg_env *b = vg_runtime_env(rb);
    ASSERT_EQ(depth1_job(&a, agent, "warm-up"), 0);
    append_to(a.env, agent, "t", "hello");
    append_to(a.env, agent, "t", "a short answer");
    ASSERT_EQ(depth1_job(&a, agent, "t"), 0);
    char big[1200]; /* 300 tokens: past the budget alone */
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ASSERT_OK(vg_store_begin(a.env->store, E));
    append_to(a.env, agent, "t", big);
    ASSERT(vg_store_end(a.env->store, VIGIL_EINVAL, NULL) == VIGIL_EINVAL); /* rolled back */
    ASSERT_EQ(depth1_job(&a, agent, "t"), 0);
    append_to(a.env, agent, "t", "another short one"); /* takes the rolled-back sequence */
    ASSERT_EQ(depth1_job(&a, agent, "t"), 0);
    append_to(b, agent, "t", big); /* the other process: this one was told nothing */
    append_to(a.env, agent, "t", "and a last word");
    ASSERT_EQ(depth1_job(&a, agent, "t"), 1);
    vigil_runtime_close(rb);
    test_rt_close(&a);
}

/* More threads than an env keeps tallies for (128): an evicted thread's check scans again and
 * still decides as a fresh scan does; a kept one counts what it was told. */
TEST(tallies_of_more_threads_than_kept_still_decide)
{
    struct test_rt t;
    test_rt_open(&t, "compact_many_threads");
    char agent[37], thread[32];
    vigil_agent_spec spec = {.name = "c"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    ASSERT_EQ(depth1_job(&t, agent, "warm-up"), 0);
    for (int i = 0; i < 140; i++) {
        snprintf(thread, sizeof thread, "t%d", i);
        append_to(t.env, agent, thread, "hello");
        append_to(t.env, agent, thread, "a short answer");
        ASSERT_EQ(depth1_job(&t, agent, thread), 0);
    }
    char big[1200]; /* 300 tokens: past the budget alone */
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    append_to(t.env, agent, "t0", big);    /* its tally was the oldest: gone */
    append_to(t.env, agent, "t139", big);  /* kept */
    append_to(t.env, agent, "t139", "ok"); /* counted as appended */
    ASSERT_EQ(depth1_job(&t, agent, "t0"), 1);
    ASSERT_EQ(depth1_job(&t, agent, "t139"), 1);
    test_rt_close(&t);
}

/* A thread of many short messages: the check reads at most span_max * 4 + 64 uncovered
 * messages, and when those alone hold less than the budget while the thread's uncovered
 * history passes it, the history is compacted all the same, the oldest span first (trial K5:
 * a chat of 1,052 messages and 69,913 uncovered tokens past a budget of 51,200 never got a
 * job, as its oldest 864 messages held 41,044). */
TEST(a_long_thread_of_short_messages_is_compacted)
{
    static const struct vg_compaction_policy small = {.thread_budget = 2000, .span_max = 10};
    struct test_rt t;
    test_rt_open(&t, "compact_short_messages");
    char agent[37], jid[VG_RECORD_ID_MAX];
    vigil_agent_spec spec = {.name = "c"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    for (int i = 0; i < 104; i++) /* the check's reach: 10 * 4 + 64 */
        append_to(t.env, agent, "chat", "ok, thanks");
    char big[1200]; /* 300 tokens */
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    for (int i = 0; i < 8; i++) /* past the budget with them */
        append_to(t.env, agent, "chat", big);
    ASSERT_OK(vg_compact_consider(t.env, agent, "chat", &small, jid, E));
    ASSERT(jid[0] != '\0');
    json_t *j = job(&t, jid);
    ASSERT_EQ(json_integer_value(json_object_get(j, "depth")), 1);
    ASSERT_EQ(json_integer_value(json_object_get(j, "messages")), 10); /* the oldest span */
    ASSERT_EQ(json_integer_value(json_object_get(j, "start_seq")), 1);
    json_decref(j);
    test_rt_close(&t);
}

/* A summarizer that names the thread it summarized. */
static vigil_code thread_summarize(struct vg_summarizer *s, json_t *messages, int depth,
                                   int max_tokens, char **out, vigil_error *err)
{
    (void)s;
    (void)depth;
    (void)max_tokens;
    (void)err;
    char buf[200];
    snprintf(buf, sizeof buf, "summary of thread %s",
             json_string_value(json_object_get(json_array_get(messages, 0), "thread_id")));
    *out = vg_strdup(buf);
    return *out ? VIGIL_OK : VIGIL_ENOMEM;
}

static const struct vg_summarizer_methods thread_methods = {1, "model", thread_summarize};

/* Whether the summaries of a context's list name these threads, oldest first, and no other. */
static void names_threads(json_t *list, const char *const *threads, size_t n)
{
    ASSERT_EQ(json_array_size(list), n);
    for (size_t i = 0; i < n; i++) {
        char want[64];
        snprintf(want, sizeof want, "summary of thread %s", threads[i]);
        ASSERT_STREQ(json_string_value(json_object_get(json_array_get(list, i), "content")), want);
    }
}

/* Context assembly is thread-first: the active thread's raw messages, then the latest summary
 * of each of the agent's other threads most recently summarized (at most 4), in what the raw
 * messages leave; a new session of an agent so starts with what its earlier ones were about.
 * The model's system text (the loop's prefix) carries them too. proves: S0-045 */
TEST(a_thread_sees_the_summaries_of_the_agents_other_threads_after_its_own_messages)
{
    struct test_rt t;
    test_rt_open(&t, "compact_prior_threads");
    char agent[37];
    vigil_agent_spec spec = {.name = "c"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    struct vg_summarizer sum = {&thread_methods};
    static const char *const threads[] = {"s1", "s2", "s3", "s4", "s5"};
    for (size_t i = 0; i < VG_ARRAY_LEN(threads); i++) {
        fill(&t, agent, threads[i], 20); /* past the thread budget of 200 tokens */
        char jid[VG_RECORD_ID_MAX];
        ASSERT_OK(vg_compact_consider(t.env, agent, threads[i], &policy, jid, E));
        ASSERT(jid[0]);
        int ran = 0;
        ASSERT_OK(vg_compact_run_one(t.env, &sum, &policy, &ran, E));
        ASSERT_EQ(ran, 1);
        vg_test_clock_advance(&t.clock, 1000);
    }
    append_to(t.env, agent, "now", "a new session begins");
    struct vg_memory *m = NULL;
    ASSERT_OK(vg_memory_new(t.env, NULL, &m, E));
    struct vg_assemble_opts o = {.agent_id = agent, .thread_id = "now", .hot_max = 40};
    struct vg_context c;
    ASSERT_OK(vg_memory_assemble(m, &o, &c, E));
    ASSERT_EQ(json_array_size(c.hot), 1);
    ASSERT_EQ(json_array_size(c.summaries), 0);
    static const char *const newest4[] = {"s2", "s3", "s4", "s5"};
    names_threads(c.prior, newest4, 4);
    vg_context_release(&c);
    /* One more thread summarized: it is the newest of them now. */
    fill(&t, agent, "s6", 20);
    char jid6[VG_RECORD_ID_MAX];
    int ran6 = 0;
    ASSERT_OK(vg_compact_consider(t.env, agent, "s6", &policy, jid6, E));
    ASSERT_OK(vg_compact_run_one(t.env, &sum, &policy, &ran6, E));
    ASSERT_EQ(ran6, 1);
    ASSERT_OK(vg_memory_assemble(m, &o, &c, E));
    static const char *const newer4[] = {"s3", "s4", "s5", "s6"};
    names_threads(c.prior, newer4, 4);
    vg_context_release(&c);
    vg_test_clock_advance(&t.clock, 1000);

    /* A summarized thread has its own summaries as its own, and the others' as prior. */
    o.thread_id = "s5";
    ASSERT_OK(vg_memory_assemble(m, &o, &c, E));
    static const char *const own[] = {"s5"}, *const others[] = {"s2", "s3", "s4", "s6"};
    names_threads(c.summaries, own, 1);
    names_threads(c.prior, others, 4);
    vg_context_release(&c);

    /* Raw messages first: when they take the budget, the other threads' summaries give way. */
    char big[3161];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    append_to(t.env, agent, "full", big); /* 790 tokens of a budget of 800 */
    o.thread_id = "full";
    o.window = 1000;
    ASSERT_OK(vg_memory_assemble(m, &o, &c, E));
    ASSERT_EQ(json_array_size(c.hot), 1);
    ASSERT_EQ(json_array_size(c.prior), 0);
    vg_context_release(&c);
    vg_memory_free(m);

    /* What the loop sends the model before each call. */
    struct vg_memory_loop *ml = NULL;
    struct vg_loop_memory lm;
    ASSERT_OK(vg_memory_loop_new(t.env, NULL, &ml, E));
    vg_memory_loop_interface(ml, &lm);
    char *text = NULL;
    ASSERT_OK(lm.prefix(lm.self, t.env, agent, "now", NULL, &text, E));
    ASSERT_CONTAINS(text, "Summaries of your other conversations");
    ASSERT_CONTAINS(text, "summary of thread s5");
    ASSERT(strstr(text, "summary of thread s1") == NULL);
    vg_free(text);
    vg_memory_loop_free(ml);
    test_rt_close(&t);
}

int main(void)
{
    RUN(model_summarizer_first_extractive_on_refusal);
    RUN(job_state_machine_with_backoff_and_fallback);
    RUN(max_attempts_make_a_job_terminal_and_refusals_fall_back_at_once);
    RUN(replays_and_two_workers_make_one_summary);
    RUN(spans_are_contiguous_and_summaries_replace_history_in_context);
    RUN(the_kept_tally_decides_as_a_fresh_scan_turn_after_turn);
    RUN(a_thread_started_here_is_counted_as_appended_not_read_back);
    RUN(a_tally_kept_as_appended_sees_rollbacks_and_other_processes);
    RUN(tallies_of_more_threads_than_kept_still_decide);
    RUN(a_long_thread_of_short_messages_is_compacted);
    RUN(a_thread_sees_the_summaries_of_the_agents_other_threads_after_its_own_messages);
    return 0;
}
