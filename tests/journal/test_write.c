/*
 * test_write.c: the write paths of a run. Header first (and a failed header write leaves no
 * run and says why), message accept -> delivery, observation -> decision -> state/activity/
 * owner effect, awaiting input as running + awaiting-operator + request id, noisy telemetry in
 * activity.updated only, idempotent messages and observations (also across a reopened store
 * and another process), traces of model calls, tool calls and policy decisions with the run's
 * totals, and failed appends that leave the run unchanged.
 */
#include "journal/journal_fixture.h"

#include "store/body.h"

#include <jansson.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

static int types_cb(void *user, const struct vg_record *r)
{
    char *out = user;
    json_t *b = json_loads(r->body, 0, NULL);
    size_t n = strlen(out);
    snprintf(out + n, 2048 - n, "%lld:%s,", (long long)r->seq,
             json_string_value(json_object_get(b, "type")));
    json_decref(b);
    return 0;
}

/* "1:journal.header,2:message.accepted,..." for a run. */
static const char *types(struct vg_store *s, const char *run_id)
{
    static char out[2048];
    out[0] = '\0';
    struct vg_query q = {.kind = "journal", .k1 = run_id};
    ASSERT_OK(vg_store_scan(s, &q, types_cb, out, E));
    return out;
}

/* An operator's chat message, "msg-1". */
static const struct vg_journal_message HELLO = {.message_id = "msg-1",
                                                .source = "operator",
                                                .message_type = "chat",
                                                .payload_json = "\"hello\"",
                                                .mutates_context = 1};

static json_t *projection(struct vg_store *s, const char *run_id)
{
    char *text = NULL;
    ASSERT_OK(vg_journal_stored_projection(s, run_id, &text, E));
    json_t *p = json_loads(text, 0, NULL);
    vg_free(text);
    ASSERT(p);
    return p;
}

static const char *jstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

TEST(header_first)
{
    /* proves: S1-012 S1-013 S1-001 */
    struct fx f;
    fx_open(&f, "jw_header", 1);
    struct vg_run *run = fx_run(&f, FX_AGENT, "key-1");
    ASSERT_STREQ(types(f.store, vg_journal_run_id(run)), "1:journal.header,");
    ASSERT_EQ(vg_journal_run_next_sequence(run), 2);
    char *show = NULL;
    ASSERT_OK(vg_journal_run_show(f.store, vg_journal_run_id(run), &show, E));
    ASSERT_CONTAINS(show, "\"status\":\"running\"");
    ASSERT_CONTAINS(show, "\"run_key\":\"key-1\"");
    ASSERT_CONTAINS(show, "\"wake_reason\":\"message\"");
    vg_free(show);
    /* the header freezes the launch contract */
    char *msgs = NULL;
    ASSERT_OK(vg_journal_replay(f.store, vg_journal_run_id(run), &msgs, E));
    ASSERT_CONTAINS(msgs, "\"stored_projection_matches\":true");
    vg_free(msgs);
    json_t *p = projection(f.store, vg_journal_run_id(run));
    ASSERT_STREQ(jstr(p, "lifecycle"), "running");
    ASSERT_STREQ(jstr(p, "run_key"), "key-1");
    ASSERT_STREQ(jstr(p, "model"), "scripted/test");
    ASSERT_STREQ(jstr(p, "thread_id"), "thread-1");
    json_decref(p);
    vg_journal_run_free(run);
    fx_close(&f);
}

TEST(header_write_fails)
{
    /* proves: S1-012 S1-011 */
    struct fx f;
    fx_open(&f, "jw_header_fault", 2);
    struct vg_store *fault = fx_wrap_faults(&f);
    /* Call 1 is begin, call 2 the header put; every later call of the open fails too. */
    for (long nth = 1; nth <= 4; nth++) {
        vg_store_fault_arm(fault, nth, VIGIL_EFULL);
        struct vg_run_launch l = {.agent_id = FX_AGENT, .run_key = "k", .wake_reason = "timer"};
        struct vg_run *run = NULL;
        vigil_error e = {0};
        ASSERT_CODE(VIGIL_EFULL, vg_journal_run_open(f.store, &f.clock.base, f.ids, &l, &run, &e));
        ASSERT(run == NULL);
        ASSERT_CONTAINS(e.message, "run not started: journal header not written");
        if (nth == 2)
            ASSERT_CONTAINS(e.message, "injected fault in store put");
        vg_store_fault_arm(fault, 0, VIGIL_OK);
        ASSERT_EQ(fx_count(f.store, "journal", NULL), 0);
        ASSERT_EQ(fx_count(f.store, "run", NULL), 0);
        ASSERT_EQ(fx_count(f.store, "run_projection", NULL), 0);
    }
    /* and a bad launch contract never reaches the store */
    struct vg_run_launch bad = {.agent_id = FX_AGENT, .run_key = "k"};
    struct vg_run *run = NULL;
    vigil_error e = {0};
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_run_open(f.store, &f.clock.base, f.ids, &bad, &run, &e));
    ASSERT_CONTAINS(e.message, "wake reason");
    fx_close(&f);
}

TEST(message_path)
{
    /* proves: S1-024 S1-027 S1-023 S1-004 */
    struct fx f;
    fx_open(&f, "jw_msg", 3);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    struct vg_journal_message m = HELLO;
    struct vg_journal_ack ack = {0};
    ASSERT_OK(vg_journal_message_accept(run, &m, &ack, E));
    ASSERT_EQ(ack.duplicate, 0);
    ASSERT_EQ(ack.sequence, 2);
    ASSERT_OK(vg_journal_message_delivery(run, "msg-1", "attempted", "model", NULL, E));
    ASSERT_OK(vg_journal_message_delivery(run, "msg-1", "failed", "model", "rate limited", E));
    ASSERT_OK(vg_journal_message_delivery(run, "msg-1", "delivered", "model", NULL, E));
    /* the same message id again: acknowledged, nothing appended */
    struct vg_journal_ack dup = {0};
    ASSERT_OK(vg_journal_message_accept(run, &m, &dup, E));
    ASSERT_EQ(dup.duplicate, 1);
    ASSERT_EQ(dup.sequence, 2);
    ASSERT_STREQ(dup.record_id, ack.record_id);
    ASSERT_STREQ(types(f.store, vg_journal_run_id(run)),
                 "1:journal.header,2:message.accepted,3:message.delivery,4:message.delivery,"
                 "5:message.delivery,");
    /* bad values are refused before anything is written */
    vigil_error e = {0};
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_message_delivery(run, "msg-1", "lost", "model", NULL, &e));
    ASSERT_CONTAINS(e.message, "\"lost\" is not allowed");
    m.message_id = "msg-2";
    m.source = "stranger";
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_message_accept(run, &m, NULL, NULL));
    m.source = "daemon";
    m.payload_json = "{not json";
    ASSERT_CODE(VIGIL_EPARSE, vg_journal_message_accept(run, &m, NULL, NULL));
    ASSERT_EQ(vg_journal_run_next_sequence(run), 6);
    ASSERT_EQ(fx_count(f.store, "journal", NULL), 5);
    vg_journal_run_free(run);
    fx_close(&f);
}

/* One run of owner kind `scope` owned by `owner`: the same writes whatever the owner, each
 * message and observation sent twice. Its record types as types() gives them. */
static const char *owner_run(struct fx *f, const char *scope, const char *owner, char id[37])
{
    struct vg_run_launch l = {.agent_id = owner,
                              .scope = scope,
                              .run_key = scope,
                              .wake_reason = "message",
                              .thread_id = "thread-1"};
    struct vg_run *run = NULL;
    ASSERT_OK(vg_journal_run_open(f->store, &f->clock.base, f->ids, &l, &run, E));
    snprintf(id, 37, "%s", vg_journal_run_id(run));
    struct vg_journal_message m = HELLO;
    struct vg_journal_ack ack = {0};
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(vg_journal_message_accept(run, &m, &ack, E));
        ASSERT_EQ(ack.duplicate, i);
        ASSERT_EQ(ack.sequence, 2);
    }
    ASSERT_OK(vg_journal_message_delivery(run, "msg-1", "delivered", "model", NULL, E));
    struct vg_journal_observation o = {.observation_id = "obs-1",
                                       .source = "daemon",
                                       .confidence = "high",
                                       .signal_json = "{\"type\":\"progress\",\"summary\":\"x\"}"};
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(vg_journal_observe(run, &o, &ack, E));
        ASSERT_EQ(ack.duplicate, i);
        ASSERT_EQ(ack.sequence, 4);
    }
    struct vg_journal_decision d = {.observation_id = "obs-1", .action = "record-only"};
    ASSERT_OK(vg_journal_decide(run, &d, E));
    ASSERT_OK(vg_journal_run_close(run, VG_RUN_COMPLETED, NULL, NULL, E));
    vg_journal_run_free(run);
    return types(f->store, id);
}

/* Every owner kind's journal is the same journal: the same record schemas (the header says the
 * owner kind; the owner need not be an agent), the same append and idempotency rules (a message
 * or an observation sent twice is acknowledged once), the same read and the same replay; an
 * owner kind outside the list is refused. proves: S1-006 */
TEST(every_owner_kind_has_the_same_journal)
{
    static const char *const owners[][2] = {
        {"agent", FX_AGENT}, {"system", "system"}, {"task", "task-7"}, {"artifact", "report.md"}};
    struct fx f;
    fx_open(&f, "jw_owners", 9);
    char first[2048];
    for (size_t i = 0; i < VG_ARRAY_LEN(owners); i++) {
        char id[37], *text = NULL;
        const char *t = owner_run(&f, owners[i][0], owners[i][1], id);
        if (i == 0)
            snprintf(first, sizeof first, "%s", t);
        ASSERT_STREQ(t, first);
        ASSERT_OK(vg_journal_replay(f.store, id, &text, E));
        ASSERT_CONTAINS(text, "\"stored_projection_matches\":true");
        ASSERT_CONTAINS(text, "\"processed_message_ids\":[\"msg-1\"]");
        ASSERT_CONTAINS(text, "\"processed_observation_ids\":[\"obs-1\"]");
        vg_free(text);
        ASSERT_OK(vg_journal_run_show(f.store, id, &text, E));
        char want[128];
        snprintf(want, sizeof want, "\"owner_kind\":\"%s\"", owners[i][0]);
        ASSERT_CONTAINS(text, want);
        vg_free(text);
    }
    ASSERT_STREQ(first, "1:journal.header,2:message.accepted,3:message.delivery,"
                        "4:observation.recorded,5:decision.recorded,6:state.changed,");
    struct vg_run_launch bad = {
        .agent_id = "x", .scope = "robot", .run_key = "k", .wake_reason = "message"};
    struct vg_run *run = NULL;
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_run_open(f.store, &f.clock.base, f.ids, &bad, &run, NULL));
    fx_close(&f);
}

TEST(observation_path)
{
    /* proves: S1-042 S1-029 S1-030 S1-031 S1-028 */
    struct fx f;
    fx_open(&f, "jw_obs", 4);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    struct vg_journal_observation o = {
        .observation_id = "obs-1",
        .source = "mcp",
        .confidence = "authoritative",
        .signal_json = "{\"type\":\"completed_claim\",\"summary\":\"tests pass\"}"};
    struct vg_journal_ack ack = {0};
    ASSERT_OK(vg_journal_observe(run, &o, &ack, E));
    struct vg_journal_decision d = {
        .observation_id = "obs-1", .action = "route-owner-effect", .reason = "claim accepted"};
    ASSERT_OK(vg_journal_decide(run, &d, E));
    struct vg_journal_state st = {.activity = "reviewing"};
    ASSERT_OK(vg_journal_state_change(run, &st, E));
    struct vg_journal_owner_effect ef = {.observation_id = "obs-1",
                                         .owner_entity = "task",
                                         .effect_type = "task.completed",
                                         .payload_json = "{\"task\":\"t1\"}"};
    ASSERT_OK(vg_journal_owner_effect(run, &ef, E));
    ASSERT_STREQ(types(f.store, vg_journal_run_id(run)),
                 "1:journal.header,2:observation.recorded,3:decision.recorded,4:state.changed,"
                 "5:owner-effect.recorded,");
    json_t *p = projection(f.store, vg_journal_run_id(run));
    ASSERT_STREQ(jstr(p, "activity"), "reviewing");
    ASSERT_EQ(
        json_integer_value(json_object_get(json_object_get(p, "processed_observations"), "count")),
        1);
    char *tl = json_dumps(json_object_get(p, "timeline"), JSON_COMPACT);
    ASSERT_CONTAINS(tl, "\"item\":\"claim\"");
    ASSERT_CONTAINS(tl, "\"text\":\"tests pass\"");
    ASSERT_CONTAINS(tl, "\"item\":\"owner-effect\"");
    vg_free(tl);
    json_decref(p);
    /* an observation with an invalid signal is refused whole */
    o.observation_id = "obs-2";
    o.signal_json = "{\"type\":\"completed_claim\"}";
    vigil_error e = {0};
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_observe(run, &o, NULL, &e));
    ASSERT_CONTAINS(e.message, "missing required field \"summary\"");
    ASSERT_EQ(fx_count(f.store, "journal", NULL), 5);
    vg_journal_run_free(run);
    fx_close(&f);
}

TEST(awaiting_input)
{
    /* proves: S1-033 S1-034 */
    struct fx f;
    fx_open(&f, "jw_input", 5);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    const char *id = vg_journal_run_id(run);
    struct vg_journal_observation o = {
        .observation_id = "obs-q",
        .source = "sdk",
        .confidence = "authoritative",
        .signal_json =
            "{\"type\":\"needs_input\",\"request_id\":\"req-1\",\"question\":\"A or B?\"}"};
    ASSERT_OK(vg_journal_observe(run, &o, NULL, E));
    struct vg_journal_decision d = {.observation_id = "obs-q", .action = "update-state"};
    ASSERT_OK(vg_journal_decide(run, &d, E));
    ASSERT_OK(vg_journal_await_input(run, "req-1", E));
    json_t *p = projection(f.store, id);
    ASSERT_STREQ(jstr(p, "lifecycle"), "running");
    ASSERT_STREQ(jstr(p, "attention"), "awaiting-operator");
    ASSERT_STREQ(jstr(p, "current_input_request_id"), "req-1");
    json_decref(p);
    /* the answer is its own record, then the request is cleared */
    struct vg_journal_message m = {.message_id = "answer-1",
                                   .source = "operator",
                                   .message_type = "input-response",
                                   .payload_json = "\"B\""};
    ASSERT_OK(vg_journal_message_accept(run, &m, NULL, E));
    struct vg_journal_state st = {.attention = "autonomous", .clear_input_request = 1};
    ASSERT_OK(vg_journal_state_change(run, &st, E));
    p = projection(f.store, id);
    ASSERT(json_is_null(json_object_get(p, "current_input_request_id")));
    ASSERT_STREQ(jstr(p, "attention"), "autonomous");
    json_decref(p);
    ASSERT_STREQ(types(f.store, id),
                 "1:journal.header,2:observation.recorded,3:decision.recorded,4:state.changed,"
                 "5:message.accepted,6:state.changed,");
    /* awaiting-input is no lifecycle */
    vigil_error e = {0};
    struct vg_journal_state bad = {.lifecycle = "awaiting-input"};
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_state_change(run, &bad, &e));
    vg_journal_run_free(run);
    fx_close(&f);
}

TEST(noise_goes_to_activity)
{
    /* proves: S1-032 S1-035 */
    struct fx f;
    fx_open(&f, "jw_noise", 6);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    const char *id = vg_journal_run_id(run);
    struct vg_model_call_trace t = {.provider = "scripted",
                                    .model = "m",
                                    .latency_ms = 120,
                                    .input_tokens = 100,
                                    .output_tokens = 20,
                                    .attempts = 1};
    ASSERT_OK(vg_journal_model_call(run, &t, E));
    for (int i = 1; i <= 3; i++) {
        char prog[128];
        snprintf(prog, sizeof prog,
                 "{\"summary\":\"step %d\",\"units\":{\"completed\":%d,\"total\":3}}", i, i);
        struct vg_journal_activity a = {.activity = "editing",
                                        .progress_json = prog,
                                        .current_target_json =
                                            "{\"kind\":\"file\",\"path\":\"a.c\"}",
                                        .capabilities_json = "{\"streaming\":true}"};
        ASSERT_OK(vg_journal_activity(run, &a, E));
    }
    ASSERT_STREQ(types(f.store, id),
                 "1:journal.header,2:activity.updated,3:activity.updated,4:activity.updated,"
                 "5:activity.updated,");
    json_t *p = projection(f.store, id);
    /* semantic activity untouched; the latest telemetry carries the usage totals */
    ASSERT_STREQ(jstr(p, "activity"), "idle");
    json_t *la = json_object_get(p, "latest_activity");
    ASSERT_EQ(json_integer_value(json_object_get(la, "sequence")), 5);
    ASSERT_EQ(json_integer_value(json_object_get(json_object_get(la, "telemetry"), "total_tokens")),
              120);
    ASSERT_EQ(json_integer_value(json_object_get(p, "timeline_count")), 1); /* only "started" */
    json_decref(p);
    vg_journal_run_free(run);
    fx_close(&f);
}

/* Child process: attach to the run on a fresh store handle and repeat the observation. */
static int child_observe(const char *path, const char *run_id)
{
    struct vg_test_clock clock;
    vg_test_clock_init(&clock, 1795000999000LL);
    struct vg_ids *ids = vg_ids_seeded(&clock.base, 99);
    struct vg_store *s = NULL;
    struct vg_store_options o = {0};
    struct vg_run *run = NULL;
    if (vg_store_open(path, &o, &s, NULL) ||
        vg_journal_run_attach(s, &clock.base, ids, run_id, &run, NULL))
        return 10;
    struct vg_journal_observation ob = {.observation_id = "obs-dup",
                                        .source = "provider-output",
                                        .confidence = "high",
                                        .raw_text = "again"};
    struct vg_journal_ack ack = {0};
    int rc = vg_journal_observe(run, &ob, &ack, NULL) ? 11 : ack.duplicate ? (int)ack.sequence : 12;
    vg_journal_run_free(run);
    vg_store_close(s);
    vg_ids_free(ids);
    return rc;
}

TEST(duplicate_observation_across_processes)
{
    /* proves: S1-043 */
    struct fx f;
    fx_open(&f, "jw_dup", 7);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    char run_id[37];
    snprintf(run_id, sizeof run_id, "%s", vg_journal_run_id(run));
    struct vg_journal_observation ob = {.observation_id = "obs-dup",
                                        .source = "provider-output",
                                        .confidence = "high",
                                        .raw_text = "first"};
    struct vg_journal_ack ack = {0};
    ASSERT_OK(vg_journal_observe(run, &ob, &ack, E));
    ASSERT_EQ(ack.sequence, 2);
    vg_journal_run_free(run);
    /* a fresh store handle and a fresh run object: the durable key answers */
    fx_reopen(&f);
    ASSERT_OK(vg_journal_run_attach(f.store, &f.clock.base, f.ids, run_id, &run, E));
    struct vg_journal_ack again = {0};
    ASSERT_OK(vg_journal_observe(run, &ob, &again, E));
    ASSERT_EQ(again.duplicate, 1);
    ASSERT_EQ(again.sequence, 2);
    ASSERT_STREQ(again.record_id, ack.record_id);
    ASSERT_EQ(fx_count(f.store, "journal", run_id), 2);
    vg_journal_run_free(run);
    /* and another process */
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0)
        _exit(child_observe(f.path, run_id));
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 2); /* duplicate, acknowledged at sequence 2 */
    ASSERT_EQ(fx_count(f.store, "journal", run_id), 2);
    /* the attached run keeps appending after the last sequence */
    ASSERT_OK(vg_journal_run_attach(f.store, &f.clock.base, f.ids, run_id, &run, E));
    ASSERT_EQ(vg_journal_run_next_sequence(run), 3);
    ASSERT_OK(vg_journal_run_close(run, VG_RUN_COMPLETED, "done", NULL, E));
    char *rp = NULL;
    ASSERT_OK(vg_journal_replay(f.store, run_id, &rp, E));
    ASSERT_CONTAINS(rp, "\"stored_projection_matches\":true");
    ASSERT_CONTAINS(rp, "\"processed_observation_ids\":[\"obs-dup\"]");
    vg_free(rp);
    vg_journal_run_free(run);
    fx_close(&f);
}

static int bodies_cb(void *user, const struct vg_record *r)
{
    struct vg_buf *b = user;
    vg_buf_puts(b, r->body);
    vg_buf_putc(b, '\n');
    return 0;
}

/* Every journal record body of a run, one a line (owned). */
static char *bodies(struct vg_store *s, const char *run_id)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    struct vg_query q = {.kind = "journal", .k1 = run_id};
    ASSERT_OK(vg_store_scan(s, &q, bodies_cb, &b, E));
    ASSERT_OK(vg_buf_finish(&b, E));
    return vg_buf_detach(&b, NULL);
}

TEST(traces_and_totals)
{
    /* proves: S1-016 S2-020 S0-125 (a run's trace: its run key and wake reason, each model
     * call's latency, retries and cost, its tool calls and its policy decisions) */
    struct fx f;
    fx_open(&f, "jw_traces", 8);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    const char *id = vg_journal_run_id(run);
    struct vg_model_call_trace t = {.provider = "anthropic",
                                    .model = "claude",
                                    .latency_ms = 800,
                                    .input_tokens = 1000,
                                    .output_tokens = 200,
                                    .cached_tokens = 600,
                                    .cost_micros = 4500,
                                    .attempts = 3,
                                    .stop_reason = "tool_use"};
    ASSERT_OK(vg_journal_model_call(run, &t, E));
    char tool[37];
    ASSERT_OK(vg_journal_tool_call_started(run, "shell", "op-1", "{\"cmd\":\"ls\"}", tool, E));
    ASSERT_OK(
        vg_journal_tool_call_finished(run, tool, "succeeded", "{\"stdout\":\"a.c\"}", NULL, 35, E));
    vigil_error e = {0};
    ASSERT_CODE(VIGIL_ESTATE,
                vg_journal_tool_call_finished(run, tool, "failed", NULL, NULL, 1, &e));
    /* A call started in a transaction that was rolled back does not exist, even for the handle
     * that started it (it keeps the call's body in memory only until a failure or a reload). */
    char gone[37];
    ASSERT_OK(vg_store_begin(f.store, E));
    ASSERT_OK(vg_journal_tool_call_started(run, "shell", NULL, "{}", gone, E));
    ASSERT_OK(vg_store_rollback(f.store, E));
    ASSERT_OK(vg_journal_run_reload(run, E));
    ASSERT_CODE(VIGIL_ENOTFOUND,
                vg_journal_tool_call_finished(run, gone, "succeeded", "{}", NULL, 1, NULL));
    ASSERT_OK(vg_journal_policy_decision(run, "approval-requested", "shell", "op-2", NULL, E));
    ASSERT_OK(
        vg_journal_policy_decision(run, "approval-denied", "shell", "op-2", "operator said no", E));
    ASSERT_OK(vg_journal_policy_decision(run, "budget-refusal", NULL, NULL, "daily budget", E));
    ASSERT_OK(vg_journal_policy_decision(run, "kill-switch-refusal", NULL, NULL, "global stop", E));
    t.input_tokens = 50;
    t.output_tokens = 5;
    t.cached_tokens = 0;
    t.cost_micros = 500;
    t.attempts = 1;
    t.stop_reason = "end_turn";
    ASSERT_OK(vg_journal_model_call(run, &t, E));
    ASSERT_OK(vg_journal_run_close(run, VG_RUN_COMPLETED, "listed files", NULL, E));
    ASSERT_STREQ(types(f.store, id),
                 "1:journal.header,2:activity.updated,3:activity.updated,4:activity.updated,"
                 "5:decision.recorded,6:decision.recorded,7:decision.recorded,"
                 "8:decision.recorded,9:activity.updated,10:state.changed,");
    char *show = NULL;
    ASSERT_OK(vg_journal_run_show(f.store, id, &show, E));
    ASSERT_CONTAINS(
        show, "\"usage\":{\"cached_tokens\":600,\"input_tokens\":1050,\"output_tokens\":205}");
    ASSERT_CONTAINS(show, "\"cost_micros\":5000");
    ASSERT_CONTAINS(show, "\"run_key\":\"k\"");
    ASSERT_CONTAINS(show, "\"wake_reason\":\"message\"");
    char *all = bodies(f.store, id);
    ASSERT_CONTAINS(all, "\"latency_ms\":800");
    ASSERT_CONTAINS(all, "\"attempts\":3");
    ASSERT_CONTAINS(all, "\"cost_micros\":4500");
    vg_free(all);
    ASSERT_CONTAINS(show, "\"model_calls\":2");
    ASSERT_CONTAINS(show, "\"tool_calls\":1");
    ASSERT_CONTAINS(show, "\"status\":\"completed\"");
    ASSERT_CONTAINS(show, "\"summary\":\"listed files\"");
    vg_free(show);
    char *one = NULL;
    ASSERT_OK(vg_journal_run_tool(f.store, tool, &one, E));
    ASSERT_CONTAINS(one, "\"input\":{\"cmd\":\"ls\"}");
    ASSERT_CONTAINS(one, "\"output\":{\"stdout\":\"a.c\"}");
    ASSERT_CONTAINS(one, "\"duration_ms\":35");
    ASSERT_CONTAINS(one, "\"operation_id\":\"op-1\"");
    vg_free(one);
    char *rp = NULL;
    ASSERT_OK(vg_journal_replay(f.store, id, &rp, E));
    ASSERT_CONTAINS(rp, "\"policy\":\"kill-switch-refusal\"");
    ASSERT_CONTAINS(rp, "\"action\":\"reject\"");
    ASSERT_CONTAINS(rp, "\"stored_projection_matches\":true");
    ASSERT_CONTAINS(rp, "\"lifecycle\":\"completed\"");
    vg_free(rp);
    /* closed: no more appends, no second close */
    ASSERT_CODE(VIGIL_ESTATE, vg_journal_run_close(run, VG_RUN_FAILED, NULL, "x", NULL));
    struct vg_journal_state st = {.activity = "idle"};
    ASSERT_CODE(VIGIL_ESTATE, vg_journal_state_change(run, &st, NULL));
    vg_journal_run_free(run);
    fx_close(&f);
}

/* Every stored record of kind (of the run's k1) is canonical JSON text, and for the journal a
 * valid record; the bodies go to out (owned), in sequence order. */
struct stored {
    json_t *bodies;
    int journal;
};

static int stored_cb(void *user, const struct vg_record *r)
{
    struct stored *st = user;
    json_t *b = json_loads(r->body, 0, NULL);
    ASSERT(b);
    char *again = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    ASSERT_STREQ(again, r->body);
    free(again);
    if (st->journal)
        ASSERT_OK(vg_journal_validate_text(r->body, strlen(r->body), E));
    json_object_set_new(b, "_seq", json_integer(r->seq));
    json_array_append_new(st->bodies, b);
    return 0;
}

static json_t *stored_of(struct vg_store *s, const char *kind, const char *run_id)
{
    struct stored st = {json_array(), strcmp(kind, "journal") == 0};
    struct vg_query q = {.kind = kind, .k1 = run_id};
    ASSERT_OK(vg_store_scan(s, &q, stored_cb, &st, E));
    return st.bodies;
}

static void replay_matches(struct vg_store *s, const char *run_id)
{
    char *rp = NULL;
    ASSERT_OK(vg_journal_replay(s, run_id, &rp, E));
    ASSERT_CONTAINS(rp, "\"stored_projection_matches\":true");
    vg_free(rp);
}

static const char *nth_str(json_t *a, size_t i, const char *k1, const char *k2)
{
    json_t *o = json_object_get(json_array_get(a, i), k1);
    return k2 ? json_string_value(json_object_get(o, k2)) : json_string_value(o);
}

TEST(traces_written_as_text)
{
    /* proves: S1-016 */
    /* A step's three traces are written as text, not as jansson trees: every record and tool
     * call row must still be canonical and valid, the stored projection what replay makes of
     * the records (its newest activity kept as text, or as a tree after another activity), and
     * a value the registry would refuse must be refused before anything is written. */
    struct fx f;
    fx_open(&f, "jw_text", 10);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    const char *id = vg_journal_run_id(run);
    struct vg_model_call_trace t = {.provider = "ollama \"local\"\n\xc3\xa9",
                                    .model = "qwen",
                                    .latency_ms = 7,
                                    .input_tokens = 10,
                                    .output_tokens = 2,
                                    .error_code = "rate_limited"};
    ASSERT_OK(vg_journal_model_call(run, &t, E));
    replay_matches(f.store, id);
    char first[37], second[37];
    ASSERT_OK(vg_journal_tool_call_started(
        run, "shell", NULL,
        "{\"z\":1,\"a\":{\"y\":[1,2,{\"b\":null,\"a\":\"\xc3\xa9\\u0001\"}],\"x\":1.5}}", first,
        E));
    replay_matches(f.store, id);
    ASSERT_OK(vg_journal_tool_call_finished(run, first, "failed", "\"boom\"", "E_TOOL", 12, E));
    ASSERT_OK(vg_journal_tool_call_started(run, "fetch", "op-9", NULL, second, E));
    /* Finished by another handle: the start is read back from its record. */
    struct vg_run *other = NULL;
    ASSERT_OK(vg_journal_run_attach(f.store, &f.clock.base, f.ids, id, &other, E));
    ASSERT_OK(vg_journal_tool_call_finished(other, second, "denied", NULL, NULL, 0, E));
    vg_journal_run_free(other);
    ASSERT_OK(vg_journal_run_reload(run, E));
    replay_matches(f.store, id);
    /* An activity built as a tree takes the newest activity back from the text. */
    struct vg_journal_activity a = {.activity = "reviewing"};
    ASSERT_OK(vg_journal_activity(run, &a, E));
    replay_matches(f.store, id);
    t.error_code = NULL;
    t.stop_reason = "end_turn";
    ASSERT_OK(vg_journal_model_call(run, &t, E));
    replay_matches(f.store, id);

    /* Refused before anything is written. */
    int64_t next = vg_journal_run_next_sequence(run), records = fx_count(f.store, "journal", id);
    vigil_error e = {0};
    struct vg_model_call_trace bad = t;
    bad.model = "";
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_model_call(run, &bad, &e));
    bad = t;
    bad.stop_reason = "";
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_model_call(run, &bad, &e));
    bad = t;
    bad.provider = "bad \xff byte";
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_model_call(run, &bad, &e));
    ASSERT_CONTAINS(e.message, "UTF-8");
    char third[37];
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_tool_call_started(run, "x\xc3", NULL, "{}", third, &e));
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_tool_call_started(run, "x", "", "{}", third, &e));
    ASSERT_CODE(VIGIL_EPARSE, vg_journal_tool_call_started(run, "x", NULL, "{", third, &e));
    ASSERT_OK(vg_journal_tool_call_started(run, "x", NULL, "[]", third, E));
    next++, records++;
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_tool_call_finished(run, third, "done", NULL, NULL, 1, &e));
    ASSERT_CODE(VIGIL_EINVAL,
                vg_journal_tool_call_finished(run, third, "running", NULL, NULL, 1, &e));
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_tool_call_finished(run, third, "failed", NULL, "", 1, &e));
    ASSERT_EQ(vg_journal_run_next_sequence(run), next);
    ASSERT_EQ(fx_count(f.store, "journal", id), records);
    ASSERT_OK(vg_journal_tool_call_finished(run, third, "canceled", NULL, NULL, 1, E));
    ASSERT_OK(vg_journal_run_close(run, VG_RUN_COMPLETED, NULL, NULL, E));
    replay_matches(f.store, id);

    json_t *recs = stored_of(f.store, "journal", id);
    ASSERT_EQ((int64_t)json_array_size(recs), 11);
    ASSERT_STREQ(nth_str(recs, 1, "model_call", "provider"), "ollama \"local\"\n\xc3\xa9");
    ASSERT_STREQ(nth_str(recs, 1, "model_call", "error_code"), "rate_limited");
    ASSERT(!json_object_get(json_object_get(json_array_get(recs, 1), "model_call"), "stop_reason"));
    ASSERT_STREQ(nth_str(recs, 2, "telemetry", "active_tool_name"), "shell");
    ASSERT_STREQ(nth_str(recs, 5, "tool_call", "operation_id"), "op-9");
    ASSERT_STREQ(nth_str(recs, 5, "tool_call", "status"), "denied");
    json_decref(recs);
    /* A call is its start and end records: no row repeats them (tool_calls.c); its readers
     * make of the records what a row held. */
    json_t *rows = stored_of(f.store, "run_tool_call", id);
    ASSERT_EQ((int64_t)json_array_size(rows), 0);
    const char *calls[] = {first, second, third};
    for (size_t i = 0; i < 3; i++) {
        char *text = NULL;
        ASSERT_OK(vg_journal_run_tool(f.store, calls[i], &text, E));
        json_array_append_new(rows, json_loads(text, 0, NULL));
        vg_free(text);
    }
    json_t *r0 = json_array_get(rows, 0), *r1 = json_array_get(rows, 1);
    char *in = json_dumps(json_object_get(r0, "input"), JSON_COMPACT | JSON_SORT_KEYS);
    ASSERT_STREQ(in,
                 "{\"a\":{\"x\":1.5,\"y\":[1,2,{\"a\":\"\xc3\xa9\\u0001\",\"b\":null}]},\"z\":1}");
    free(in);
    ASSERT_STREQ(nth_str(rows, 0, "status", NULL), "failed");
    ASSERT_STREQ(nth_str(rows, 0, "output", NULL), "boom");
    ASSERT_STREQ(nth_str(rows, 0, "error_code", NULL), "E_TOOL");
    ASSERT_EQ(json_integer_value(json_object_get(r0, "started_sequence")), 3);
    ASSERT_EQ(json_integer_value(json_object_get(r0, "finished_sequence")), 4);
    ASSERT_EQ(json_integer_value(json_object_get(r0, "duration_ms")), 12);
    ASSERT(json_is_null(json_object_get(r0, "operation_id")));
    ASSERT_STREQ(nth_str(rows, 1, "status", NULL), "denied");
    ASSERT_STREQ(nth_str(rows, 1, "operation_id", NULL), "op-9");
    ASSERT(json_is_null(json_object_get(r1, "input")));
    ASSERT(json_is_null(json_object_get(r1, "output")));
    ASSERT(json_is_string(json_object_get(r1, "ended_at")));
    ASSERT_EQ(json_integer_value(json_object_get(r1, "finished_sequence")), 6);
    /* Readers get each call as it was written, its output taken from the end record. */
    const char *want[] = {"\"boom\"", "null", "null"};
    for (size_t i = 0; i < 3; i++) {
        char *text = NULL;
        ASSERT_OK(vg_journal_run_tool(f.store, nth_str(rows, i, "tool_call_id", NULL), &text, E));
        json_t *call = json_loads(text, 0, NULL);
        char *out = json_dumps(json_object_get(call, "output"), JSON_ENCODE_ANY);
        ASSERT_STREQ(out, want[i]);
        free(out);
        json_decref(call);
        vg_free(text);
    }
    char *page = NULL;
    ASSERT_OK(vg_journal_run_tools(f.store, id, NULL, 0, &page, E));
    ASSERT_CONTAINS(page, "\"output_preview\":\"boom\"");
    vg_free(page);
    json_decref(rows);
    vg_journal_run_free(run);
    fx_close(&f);
}

/* A store failure while a run's tool-call page fetches a call's output (from its end record)
 * is reported as what it is, never as running out of memory: a person then looks at the disk,
 * not at the machine's memory. */
TEST(a_store_failure_reading_a_call_output_is_no_memory_error)
{
    struct fx f;
    fx_open(&f, "jw_tools_fault", 12);
    struct vg_store *fault = fx_wrap_faults(&f);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    char call[37];
    ASSERT_OK(vg_journal_tool_call_started(run, "echo", NULL, "{}", call, E));
    ASSERT_OK(vg_journal_tool_call_finished(run, call, "succeeded", "\"hi\"", NULL, 3, E));
    ASSERT_OK(vg_journal_run_close(run, VG_RUN_COMPLETED, NULL, NULL, E));
    const char *id = vg_journal_run_id(run);
    int failed = 0;
    for (long nth = 1; nth <= 6; nth++) {
        char *page = NULL;
        vigil_error e = {0};
        vg_store_fault_arm(fault, nth, VIGIL_EIO);
        vigil_code rc = vg_journal_run_tools(f.store, id, NULL, 0, &page, &e);
        vg_store_fault_arm(fault, 0, VIGIL_OK);
        if (rc == VIGIL_OK) {
            ASSERT_CONTAINS(page, "\"output_preview\":\"hi\"");
            vg_free(page);
            continue;
        }
        ASSERT_CODE(VIGIL_EIO, rc);
        ASSERT(!strstr(e.message, "out of memory"));
        failed++;
    }
    ASSERT(failed >= 2); /* the page's scan, and the output's scan inside it */
    vg_journal_run_free(run);
    fx_close(&f);
}

TEST(reserved_and_invalid_appends)
{
    /* proves: S1-037 S1-039 */
    struct fx f;
    fx_open(&f, "jw_reserved", 9);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    vigil_error e = {0};
    ASSERT_CODE(VIGIL_EINVAL,
                vg_journal_append_json(run, "projection.recorded",
                                       "{\"projection\":\"timeline-item\",\"payload\":{}}", &e));
    ASSERT_CONTAINS(e.message, "reserved");
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_append_json(run, "gossip.recorded", "{}", &e));
    ASSERT_CONTAINS(e.message, "unknown journal record type");
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_append_json(run, "journal.header", "{}", NULL));
    ASSERT_CODE(VIGIL_EINVAL,
                vg_journal_append_json(run, "state.changed", "{\"sequence\":9}", NULL));
    ASSERT_OK(vg_journal_append_json(run, "state.changed", "{\"attention\":\"blocked\"}", E));
    ASSERT_EQ(fx_count(f.store, "journal", NULL), 2);
    vg_journal_run_free(run);
    fx_close(&f);
}

TEST(failed_append_changes_nothing)
{
    /* proves: S1-001 */
    struct fx f;
    fx_open(&f, "jw_fail", 10);
    struct vg_store *fault = fx_wrap_faults(&f);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    /* begin, key put, record put, projection update, commit: fail each in turn */
    for (long nth = 1; nth <= 5; nth++) {
        vg_store_fault_arm(fault, nth, VIGIL_EIO);
        struct vg_journal_observation ob = {
            .observation_id = "o", .source = "git", .confidence = "low"};
        ASSERT_CODE(VIGIL_EIO, vg_journal_observe(run, &ob, NULL, NULL));
        vg_store_fault_arm(fault, 0, VIGIL_OK);
        ASSERT_EQ(vg_journal_run_next_sequence(run), 2);
        ASSERT_EQ(fx_count(f.store, "journal", NULL), 1);
        ASSERT_EQ(fx_count(f.store, "journal_key", NULL), 0);
    }
    struct vg_journal_observation ob = {
        .observation_id = "o", .source = "git", .confidence = "low"};
    struct vg_journal_ack ack = {0};
    ASSERT_OK(vg_journal_observe(run, &ob, &ack, E));
    ASSERT_EQ(ack.duplicate, 0);
    ASSERT_EQ(ack.sequence, 2);
    char *rp = NULL;
    ASSERT_OK(vg_journal_replay(f.store, vg_journal_run_id(run), &rp, E));
    ASSERT_CONTAINS(rp, "\"stored_projection_matches\":true");
    vg_free(rp);
    vg_journal_run_free(run);
    fx_close(&f);
}

/* The run's body of counters, as the store has it. */
static json_t *stored_run(struct fx *f, struct vg_run *run)
{
    struct vg_record *row = NULL;
    ASSERT_OK(vg_store_get_copy(f->store, "run", vg_journal_run_id(run), &row, E));
    json_t *b = json_loads(row->body, 0, NULL);
    vg_free(row);
    ASSERT(b);
    return b;
}

/* A model call or a tool call that fails at any store write leaves the run's counters as the
 * store has them: the next that succeeds counts once (the run record's body is changed in place
 * by these appends, so a failure must send the run back to the store). */
TEST(failed_traces_change_no_counter)
{
    /* proves: S1-001 */
    struct fx f;
    fx_open(&f, "jw_fail_traces", 11);
    struct vg_store *fault = fx_wrap_faults(&f);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    struct vg_model_call_trace t = {
        .provider = "openai", .model = "m", .input_tokens = 10, .output_tokens = 2, .attempts = 1};
    char call[37];
    /* Fail the nth store call of each (the reads of a run sent back to the store, then begin,
     * the record, the projection and the run record, the call's row, commit), then once more
     * with none failing; count what succeeded. */
    int models = 0, tools = 0, failed = 0;
    /* A failure before the append's own writes (its begin) and then a success of the other. */
    vg_store_fault_arm(fault, 1, VIGIL_EIO);
    ASSERT_CODE(VIGIL_EIO, vg_journal_model_call(run, &t, NULL));
    ASSERT_OK(vg_journal_tool_call_started(run, "echo", NULL, "{}", call, E));
    vg_store_fault_arm(fault, 1, VIGIL_EIO);
    ASSERT_CODE(VIGIL_EIO, vg_journal_tool_call_started(run, "echo", NULL, "{}", call, NULL));
    ASSERT_OK(vg_journal_model_call(run, &t, E));
    json_t *b = stored_run(&f, run);
    ASSERT_EQ(json_integer_value(json_object_get(b, "model_calls")), 1);
    ASSERT_EQ(json_integer_value(json_object_get(b, "tool_calls")), 1);
    json_decref(b);
    models = tools = 1;
    for (long nth = 1; nth <= 9; nth++) {
        vg_store_fault_arm(fault, nth, VIGIL_EIO);
        vigil_code rc = vg_journal_model_call(run, &t, NULL);
        vg_store_fault_arm(fault, 0, VIGIL_OK);
        models += rc == VIGIL_OK;
        failed += rc == VIGIL_EIO;
        vg_store_fault_arm(fault, nth, VIGIL_EIO);
        rc = vg_journal_tool_call_started(run, "echo", NULL, "{}", call, NULL);
        vg_store_fault_arm(fault, 0, VIGIL_OK);
        tools += rc == VIGIL_OK;
        failed += rc == VIGIL_EIO;
    }
    ASSERT_OK(vg_journal_model_call(run, &t, E));
    ASSERT_OK(vg_journal_tool_call_started(run, "echo", NULL, "{}", call, E));
    models++;
    tools++;
    ASSERT(failed >= 10 && models >= 3);
    b = stored_run(&f, run);
    ASSERT_EQ(json_integer_value(json_object_get(b, "model_calls")), models);
    ASSERT_EQ(json_integer_value(json_object_get(b, "tool_calls")), tools);
    ASSERT_EQ(json_integer_value(json_object_get(json_object_get(b, "usage"), "input_tokens")),
              10 * models);
    json_decref(b);
    char *page = NULL; /* each call once: a failed start left no record of it */
    ASSERT_OK(vg_journal_run_tools(f.store, vg_journal_run_id(run), NULL, 1000, &page, E));
    json_t *pj = json_loads(page, 0, NULL);
    ASSERT_EQ((int64_t)json_array_size(json_object_get(pj, "items")), tools);
    json_decref(pj);
    vg_free(page);
    char *rp = NULL;
    ASSERT_OK(vg_journal_replay(f.store, vg_journal_run_id(run), &rp, E));
    ASSERT_CONTAINS(rp, "\"stored_projection_matches\":true");
    vg_free(rp);
    vg_journal_run_free(run);
    fx_close(&f);
}

/* The stored projection's last sequence number. */
static int64_t stored_last(struct fx *f, struct vg_run *run)
{
    json_t *p = projection(f->store, vg_journal_run_id(run));
    int64_t n = json_integer_value(json_object_get(p, "last_sequence"));
    json_decref(p);
    return n;
}

static vigil_code deliver(struct vg_run *run, const char *status)
{
    return vg_journal_message_delivery(run, "msg-1", status, "model", NULL, NULL);
}

/* Inside a caller's transaction a run's projection and run record are written once, at its
 * commit: the records land as they are appended, the projection with the last of them; a
 * rollback takes everything back and the run goes on from the store; a savepoint rolled back
 * with one of the run's records in it, or a failed append, makes the transaction refuse to
 * commit, since the projection would no longer match the records. */
TEST(projection_written_once_per_transaction)
{
    struct fx f;
    fx_open(&f, "jw_kept_back", 11);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    struct vg_journal_message m = HELLO;
    ASSERT_OK(vg_journal_message_accept(run, &m, NULL, E));
    ASSERT_EQ(stored_last(&f, run), 2);

    /* Two appends in one transaction: the projection moves once, at the commit. */
    ASSERT_OK(vg_store_begin(f.store, E));
    ASSERT_OK(deliver(run, "attempted"));
    ASSERT_OK(deliver(run, "delivered"));
    ASSERT_EQ(stored_last(&f, run), 2);
    ASSERT_OK(vg_store_commit(f.store, E));
    ASSERT_EQ(stored_last(&f, run), 4);
    ASSERT_OK(deliver(run, "attempted")); /* the revisions kept in memory are right */
    ASSERT_EQ(stored_last(&f, run), 5);

    /* Rolled back: nothing of it stays, and the run goes on from the store. */
    ASSERT_OK(vg_store_begin(f.store, E));
    ASSERT_OK(deliver(run, "failed"));
    ASSERT_OK(vg_store_rollback(f.store, E));
    ASSERT_EQ(stored_last(&f, run), 5);
    ASSERT_OK(deliver(run, "delivered"));
    ASSERT_EQ(stored_last(&f, run), 6);

    /* A savepoint after the run's record, rolled back: the record stays, the commit works. */
    ASSERT_OK(vg_store_begin(f.store, E));
    ASSERT_OK(deliver(run, "attempted"));
    ASSERT_OK(vg_store_begin(f.store, E));
    ASSERT_OK(vg_store_rollback(f.store, E));
    ASSERT_OK(vg_store_commit(f.store, E));
    ASSERT_EQ(stored_last(&f, run), 7);

    /* A savepoint holding one of its records, rolled back: the commit is refused. */
    ASSERT_OK(vg_store_begin(f.store, E));
    ASSERT_OK(deliver(run, "attempted"));
    ASSERT_OK(vg_store_begin(f.store, E));
    ASSERT_OK(deliver(run, "failed"));
    ASSERT_OK(vg_store_rollback(f.store, E));
    vigil_error e = {0};
    ASSERT_CODE(VIGIL_ESTATE, vg_store_commit(f.store, &e));
    ASSERT_CONTAINS(e.message, "failed in this transaction");
    ASSERT_EQ(stored_last(&f, run), 7);
    ASSERT_STREQ(types(f.store, vg_journal_run_id(run)),
                 "1:journal.header,2:message.accepted,3:message.delivery,4:message.delivery,"
                 "5:message.delivery,6:message.delivery,7:message.delivery,");

    vg_journal_run_free(run);
    fx_close(&f);
}

/* Every store call of a transaction with two appends failing in turn: whatever the failure,
 * what commits (all of it or nothing) leaves the projection matching the records, and the run
 * goes on. */
TEST(kept_back_writes_survive_every_failure)
{
    struct fx f;
    fx_open(&f, "jw_kept_back_faults", 12);
    struct vg_store *fault = fx_wrap_faults(&f);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    struct vg_journal_message m = HELLO;
    ASSERT_OK(vg_journal_message_accept(run, &m, NULL, E));
    int failed_commits = 0;
    for (long nth = 1;; nth++) {
        int64_t before = stored_last(&f, run), appended = 0;
        vg_store_fault_arm(fault, nth, VIGIL_EIO);
        vigil_code rc = vg_store_begin(f.store, NULL);
        if (rc == VIGIL_OK) {
            appended += deliver(run, "attempted") == VIGIL_OK;
            appended += deliver(run, "delivered") == VIGIL_OK;
            rc = vg_store_commit(f.store, NULL);
        }
        long calls = vg_store_fault_calls(fault);
        vg_store_fault_arm(fault, 0, VIGIL_OK);
        failed_commits += rc != VIGIL_OK;
        int64_t now = rc == VIGIL_OK ? before + appended : before;
        ASSERT_EQ(stored_last(&f, run), now);
        ASSERT_OK(deliver(run, "attempted")); /* the run goes on */
        ASSERT_EQ(stored_last(&f, run), now + 1);
        char *msgs = NULL;
        ASSERT_OK(vg_journal_replay(f.store, vg_journal_run_id(run), &msgs, E));
        ASSERT_CONTAINS(msgs, "\"stored_projection_matches\":true");
        vg_free(msgs);
        if (calls < nth) /* the fault was not reached: every call was tried */
            break;
    }
    ASSERT(failed_commits > 5);
    vg_journal_run_free(run);
    fx_close(&f);
}

/* A tool call's decisions (a spawn call's) are one decisions.recorded record: each decision
 * in it with its own id, its action from its kind and its reason; the projection's timeline
 * and replay have an item for each, as separate records would give. */
TEST(a_calls_decisions_are_one_record_and_a_timeline_item_each)
{
    struct fx f;
    fx_open(&f, "jw_decisions", 1);
    struct vg_run *run = fx_run(&f, FX_AGENT, "key-d");
    const char *id = vg_journal_run_id(run);
    static const struct vg_journal_policy d[] = {{"spawn-admitted", "request 0: admitted"},
                                                 {"spawn-denied", "request 1: depth"},
                                                 {"spawn-awaiting-approval", "request 2: risk"}};
    ASSERT_OK(vg_journal_policy_decisions(run, d, 3, "spawn_agents", "op-9", E));
    ASSERT_OK(vg_journal_policy_decision(run, "budget-refusal", NULL, NULL, "daily budget", E));
    ASSERT_STREQ(types(f.store, id), "1:journal.header,2:decisions.recorded,3:decision.recorded,");
    json_t *recs = stored_of(f.store, "journal", id); /* each checked canonical and valid */
    json_t *items = json_object_get(json_array_get(recs, 1), "decisions");
    ASSERT_EQ(json_array_size(items), 3);
    static const char *const action[] = {"record-only", "reject", "record-only"};
    for (size_t i = 0; i < 3; i++) {
        ASSERT_STREQ(nth_str(items, i, "action", NULL), action[i]);
        ASSERT_STREQ(nth_str(items, i, "reason", NULL), d[i].reason);
        ASSERT_STREQ(nth_str(items, i, "policy", "kind"), d[i].kind);
        ASSERT_STREQ(nth_str(items, i, "policy", "tool"), "spawn_agents");
        ASSERT_STREQ(nth_str(items, i, "policy", "operation_id"), "op-9");
    }
    ASSERT(strcmp(nth_str(items, 0, "decision_id", NULL), nth_str(items, 1, "decision_id", NULL)));
    /* the header's item, then the call's three decisions and the single one */
    json_t *p = projection(f.store, id), *tl = json_object_get(p, "timeline");
    ASSERT_EQ(json_array_size(tl), 5);
    for (size_t i = 0; i < 3; i++) {
        ASSERT_STREQ(nth_str(tl, i + 1, "item", NULL), "decision");
        ASSERT_STREQ(nth_str(tl, i + 1, "policy", NULL), d[i].kind);
        ASSERT_STREQ(nth_str(tl, i + 1, "action", NULL), action[i]);
        ASSERT_STREQ(nth_str(tl, i + 1, "reason", NULL), d[i].reason);
        ASSERT_STREQ(nth_str(tl, i + 1, "decision_id", NULL),
                     nth_str(items, i, "decision_id", NULL));
        ASSERT_EQ(json_integer_value(json_object_get(json_array_get(tl, i + 1), "sequence")), 2);
    }
    ASSERT_STREQ(nth_str(tl, 4, "policy", NULL), "budget-refusal");
    ASSERT_EQ(json_integer_value(json_object_get(p, "timeline_count")), 5);
    replay_matches(f.store, id);
    json_decref(p);
    json_decref(recs);
    vg_journal_run_free(run);
    fx_close(&f);
}

static int header_packed_cb(void *user, const struct vg_record *r)
{
    struct vg_buf *b = user;
    ASSERT(vg_body_pack(r, b) == 1);
    struct vg_buf back;
    vg_buf_init(&back, VG_BUF_DEFAULT_MAX);
    struct vg_record stored = *r;
    stored.body = b->data;
    ASSERT(vg_body_unpack(&stored, &back) == 1);
    ASSERT_STREQ(back.data, r->body); /* read back byte for byte */
    vg_buf_release(&back);
    return 1;
}

/* A run's header is stored without its agent id (the row's owner) and the constants every run
 * of this version says (its kind, the protocol descriptor): store/body.c, 20-22, Session 34. */
TEST(a_runs_header_stores_none_of_its_constants)
{
    struct fx f;
    fx_open(&f, "jw_header_packed", 42);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    struct vg_buf packed;
    vg_buf_init(&packed, VG_BUF_DEFAULT_MAX);
    struct vg_query q = {.kind = "journal",
                         .owner = FX_AGENT,
                         .k1 = vg_journal_run_id(run),
                         .k2 = "journal.header",
                         .limit = 1};
    ASSERT_OK(vg_store_scan(f.store, &q, header_packed_cb, &packed, E));
    ASSERT(packed.data != NULL);
    ASSERT(!strstr(packed.data, "protocol_descriptor"));
    ASSERT(!strstr(packed.data, "agent-execution-interaction-journal"));
    ASSERT(!strstr(packed.data, "\"agent_id\""));
    ASSERT_CONTAINS(packed.data, "\"run_key\":\"k\"");
    vg_buf_release(&packed);
    vg_journal_run_free(run);
    fx_close(&f);
}

/* The rows of kind that the store file keeps at the table's left end (a negative rowid: where
 * the SQLite adapter puts the rows a run rewrites at each commit), and how many of them are a
 * running run's (their k1, the status). */
static int64_t left_end_rows(const char *path, const char *kind, int64_t *running)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int64_t n = -1;
    ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_prepare_v2(db,
                                 "SELECT count(*), count(CASE WHEN k1 = 'running' THEN 1 END) "
                                 "FROM records WHERE kind = ?1 AND rowid < 0",
                                 -1, &st, NULL),
              SQLITE_OK);
    sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) {
        n = sqlite3_column_int64(st, 0);
        *running = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
}

/* A finished run's record and projection leave the left end of the SQLite table, where the rows
 * a running run rewrites are kept together: the record shrinks when the run ends (its packed
 * form), and left there with the next runs' rows put in to its left, it kept leaves part empty
 * (docs/internals/PERF.md, "Session 36"). A running run's rows stay. */
TEST(a_finished_runs_record_and_projection_leave_the_left_end)
{
    struct fx f;
    fx_open(&f, "jw_settled", 13);
    for (int i = 0; i < 4; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        struct vg_run *run = fx_run(&f, FX_AGENT, key);
        struct vg_journal_message m = HELLO;
        ASSERT_OK(vg_journal_message_accept(run, &m, NULL, E));
        ASSERT_OK(deliver(run, "delivered"));
        if (i < 3)
            ASSERT_OK(vg_journal_run_close(run, VG_RUN_COMPLETED, "done", NULL, E));
        vg_journal_run_free(run);
    }
    int64_t running = -1;
    ASSERT_EQ(left_end_rows(f.path, "run", &running), 1);
    ASSERT_EQ(running, 1);
    ASSERT_EQ(left_end_rows(f.path, "run_projection", &running), 1);
    ASSERT_EQ(fx_count(f.store, "run", NULL), 4);
    fx_close(&f);
}

int main(void)
{
    RUN(header_first);
    RUN(header_write_fails);
    RUN(message_path);
    RUN(every_owner_kind_has_the_same_journal);
    RUN(observation_path);
    RUN(awaiting_input);
    RUN(noise_goes_to_activity);
    RUN(duplicate_observation_across_processes);
    RUN(traces_and_totals);
    RUN(traces_written_as_text);
    RUN(reserved_and_invalid_appends);
    RUN(failed_append_changes_nothing);
    RUN(failed_traces_change_no_counter);
    RUN(a_store_failure_reading_a_call_output_is_no_memory_error);
    RUN(projection_written_once_per_transaction);
    RUN(kept_back_writes_survive_every_failure);
    RUN(a_runs_header_stores_none_of_its_constants);
    RUN(a_finished_runs_record_and_projection_leave_the_left_end);
    RUN(a_calls_decisions_are_one_record_and_a_timeline_item_each);
    return 0;
}
