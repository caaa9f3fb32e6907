/*
 * test_chat.c: a chat turn (vigil_chat) holds the agent's lease: it waits while another run
 * holds the agent (single flight across processes), runs once the lease is free or expired,
 * gives up with EBUSY when it stays taken, and leaves the lease free afterwards. A later turn,
 * in another process, is shown the earlier turn's tool calls with the results they had.
 */
#include "helpers/rt.h"
#include "helpers/fault_store.h"
#include "helpers/fault_vfs.h"

#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent.h"
#include "base/json.h"
#include "journal/journal.h"
#include "loop/watch_model.h"
#include "os/fs.h"
#include "runtime/runtime_int.h"
#include "store/store.h"
#include "wake/wake.h"

static char agent[37];

static void setup(struct test_rt *t, const char *name)
{
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    test_rt_open(t, name);
    vigil_agent_spec spec = {.name = "chatty"};
    ASSERT_OK(vigil_agent_create(t->rt, &spec, agent, E));
}

/* A turn's outcome (vigil.h) is written as text: the same canonical JSON (compact, keys sorted,
 * usage nested, stop_reason null when none) that the runtime's other answers are. */
TEST(a_turns_outcome_is_canonical_json_with_every_field)
{
    struct test_rt t;
    char *out = NULL;
    setup(&t, "chat_outcome");
    ASSERT_OK(vigil_chat(t.rt, agent, NULL, "hello \"there\"", NULL, &out, E));
    json_t *v = json_loads(out, 0, NULL);
    ASSERT(v != NULL);
    char *again = vg_json_dump(v, 1);
    ASSERT_STREQ(out, again);
    ASSERT_CONTAINS(json_string_value(json_object_get(v, "reply")), "you said: hello \"there\"");
    ASSERT_STREQ(json_string_value(json_object_get(v, "end")), "completed");
    ASSERT_EQ(json_integer_value(json_object_get(v, "steps")), 1);
    ASSERT_EQ(json_integer_value(json_object_get(v, "tool_calls")), 0);
    ASSERT(json_is_true(json_object_get(v, "scripted")));
    ASSERT(json_is_real(json_object_get(v, "cost_usd")));
    ASSERT(json_is_null(json_object_get(v, "stop_reason")));
    json_t *usage = json_object_get(v, "usage");
    ASSERT_EQ(json_object_size(usage), 3);
    ASSERT(json_is_integer(json_object_get(usage, "cached_tokens")));
    ASSERT_EQ(json_object_size(v), 9);
    ASSERT_EQ(strlen(json_string_value(json_object_get(v, "run_id"))), 36);
    vg_free(again);
    json_decref(v);
    vigil_free(out);
    test_rt_close(&t);
}

/* proves: S0-020 */
TEST(turn_waits_for_a_held_lease_then_runs)
{
    struct test_rt t;
    char *out = NULL;
    int64_t epoch = 0;
    int got = 0;
    setup(&t, "chat_lease");
    /* The daemon holds the agent for one more second (test time). */
    ASSERT_OK(vg_wake_lease_take(t.env, agent, "daemon:w0", 1000, &epoch, &got, E));
    ASSERT_EQ(got, 1);
    int64_t before = vg_env_now(t.env);
    ASSERT_OK(vigil_chat(t.rt, agent, NULL, "hello", NULL, &out, E));
    ASSERT_CONTAINS(out, "you said: hello");
    vigil_free(out);
    ASSERT(vg_env_now(t.env) - before >= 1000); /* it waited for the lease, on the test clock */
    /* The old holder is fenced off; the lease is free again. */
    ASSERT_CODE(VIGIL_ESTATE, vg_wake_lease_check(t.env, agent, epoch, NULL));
    int64_t e2 = 0;
    ASSERT_OK(vg_wake_lease_take(t.env, agent, "other", 1000, &e2, &got, E));
    ASSERT_EQ(got, 1);
    ASSERT(e2 > epoch + 1);
    test_rt_close(&t);
}

TEST(turn_gives_up_when_the_agent_stays_busy)
{
    struct test_rt t;
    char *out = NULL;
    int64_t epoch = 0;
    int got = 0;
    setup(&t, "chat_busy");
    ASSERT_OK(vg_wake_lease_take(t.env, agent, "daemon:w0", 3600000, &epoch, &got, E));
    vigil_error err = {0};
    ASSERT_EQ(vigil_chat(t.rt, agent, NULL, "hello", NULL, &out, &err), VIGIL_EBUSY);
    ASSERT_CONTAINS(err.message, "busy");
    /* Nothing of the turn was written. */
    char thread[128];
    json_t *msgs = NULL;
    snprintf(thread, sizeof thread, "%s:session:default", agent);
    ASSERT_OK(vg_message_latest(t.env, agent, thread, 10, &msgs, E));
    ASSERT_EQ(json_array_size(msgs), 0);
    json_decref(msgs);
    test_rt_close(&t);
}

static vigil_code note_tool(void *user, const vigil_tool_call_info *call, const char *args_json,
                            char **out_result_json, vigil_error *err)
{
    *out_result_json = strdup("{\"result\":{\"noted\":true},\"changed_entity_ids\":[\"n-1\"]}");
    return *out_result_json ? VIGIL_OK : VIGIL_ENOMEM;
}

/* A process of its own: a runtime on the store, the tools registered as every process does,
 * and a watcher on the model its cassette makes. */
static void open_process(struct test_rt *t, struct watch_model *w, const char *cassette,
                         const char *exchanges, int reopen)
{
    char path[4200], text[4096];
    snprintf(path, sizeof path, "%s/%s.json", vg_test_tmpdir(cassette), cassette);
    snprintf(text, sizeof text, "{\"vigil_cassette\":1,\"exchanges\":%s}", exchanges);
    ASSERT_OK(vg_fs_write_file(path, text, strlen(text), E));
    setenv("VIGIL_MODEL_CASSETTE", path, 1);
    if (reopen)
        test_rt_reopen(t);
    vigil_tool_def note = {.name = "note",
                           .description = "Take a note.",
                           .input_schema_json = "{\"type\":\"object\"}"};
    ASSERT_OK(vigil_tool_register(t->rt, &note, note_tool, NULL, E));
    const char *argv[] = {"/bin/sh", "-c", "cat >/dev/null; echo '{\"result\":{\"ran\":1}}'", NULL};
    vigil_tool_def cmd = {.name = "run_cmd",
                          .description = "Run the command.",
                          .input_schema_json = "{\"type\":\"object\"}"};
    ASSERT_OK(vigil_tool_register_command(t->rt, &cmd, argv, 10000, 0, E));
    ASSERT_OK(vg_runtime_prepare(t->rt, E));
    watch_model_init(w, t->rt->model);
    w->keep = 1;
    t->rt->model = &w->base;
}

static void close_process(struct test_rt *t, struct watch_model *w)
{
    t->rt->model = w->inner;
    watch_model_release(w);
}

static int has_text(json_t *v, const char *needle)
{
    char *text = vg_json_dump(v, 1);
    int found = text && strstr(text, needle);
    vg_free(text);
    return found;
}

/* A memory tool, a C callback tool and a command tool run in one process's
 * turn; the next turn, in another process, sends the model the conversation exactly as the
 * first process last sent it (each call with its recorded result, none "interrupted"), then the
 * first turn's answer and the new message. The model reads each tool's answer, not the gate's
 * bookkeeping (operation and message ids). */
TEST(a_later_process_tells_the_tool_calls_as_they_happened)
{
    struct test_rt t;
    struct watch_model w1, w2;
    setup(&t, "chat_history");
    char *out = NULL;
    json_t *changes =
        json_pack("{s:{s:[s, s, s]}}", "config", "tools", "memory_*", "note", "run_cmd");
    vigil_agent_spec spec = {.name = "tooled", .config_json = NULL};
    char *config = vg_json_dump(json_object_get(changes, "config"), 1);
    spec.config_json = config;
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    vg_free(config);
    json_decref(changes);

    open_process(&t, &w1, "first",
                 "[{\"response\":{\"tool_calls\":["
                 "{\"id\":\"call_0\",\"name\":\"memory_write\",\"arguments\":"
                 "{\"label\":\"likes\",\"content\":\"tea\"}},"
                 "{\"id\":\"call_1\",\"name\":\"note\",\"arguments\":{\"text\":\"tea\"}},"
                 "{\"id\":\"call_2\",\"name\":\"run_cmd\",\"arguments\":{}}]}},"
                 "{\"response\":{\"text\":\"saved\"}}]",
                 0);
    ASSERT_OK(vigil_chat(t.rt, agent, NULL, "remember that I like tea", NULL, &out, E));
    ASSERT_CONTAINS(out, "\"tool_calls\":3");
    vigil_free(out);
    ASSERT_EQ(json_array_size(w1.requests), 2);
    json_t *seen = json_deep_copy(watch_model_messages(&w1, 1));
    close_process(&t, &w1);

    open_process(&t, &w2, "second", "[{\"response\":{\"text\":\"tea\"}}]", 1);
    ASSERT_OK(vigil_chat(t.rt, agent, NULL, "what do I like?", NULL, &out, E));
    vigil_free(out);
    json_t *want = json_deep_copy(seen);
    json_array_append_new(want, json_pack("{s:s, s:s}", "role", "assistant", "text", "saved"));
    json_array_append_new(want, json_pack("{s:s, s:s}", "role", "user", "text", "what do I like?"));
    json_t *got = watch_model_messages(&w2, 0);
    if (!json_equal(got, want)) {
        char *g = vg_json_dump(got, 1), *x = vg_json_dump(want, 1);
        TEST_FAIL_("the second process's request\n got  %s\n want %s", g, x);
    }
    ASSERT(!has_text(got, "interrupted"));
    ASSERT(!has_text(got, "operation_id"));
    ASSERT(has_text(got, "{\\\"noted\\\":true}"));
    ASSERT(has_text(got, "{\\\"ran\\\":1}"));
    json_decref(want);
    json_decref(seen);
    close_process(&t, &w2);
    test_rt_close(&t);
}

static int count_records_cb(void *user, const struct vg_record *r)
{
    (void)r;
    ++*(int *)user;
    return 0;
}

static int end_row_cb(void *user, const struct vg_record *r)
{
    *(int *)user += strstr(r->body, "\"tool_call\"") && !strstr(r->body, "\"running\"");
    return 0;
}

static int end_in_message_cb(void *user, const struct vg_record *r)
{
    *(int *)user += !strcmp(r->k2, "toolResult") && strstr(r->body, "\"journal_end\":[") != NULL;
    return 0;
}

static int start_row_cb(void *user, const struct vg_record *r)
{
    *(int *)user += strstr(r->body, "\"tool_call\"") && strstr(r->body, "\"running\"");
    return 0;
}

/* An action message that keeps its call's start: its id is the call's. */
static int start_in_message_cb(void *user, const struct vg_record *r)
{
    json_t *calls = user;
    if (!strcmp(r->k2, "action") && strstr(r->body, "\"journal_start\":["))
        json_array_append_new(calls, json_string(r->id));
    return 0;
}

static int model_call_row_cb(void *user, const struct vg_record *r)
{
    *(int *)user += strstr(r->body, "\"model_call\"") != NULL;
    return 0;
}

/* A thought message that keeps its model call's record (its id the message's). */
static int call_in_message_cb(void *user, const struct vg_record *r)
{
    *(int *)user += !strcmp(r->k2, "thought") && strstr(r->body, "\"journal_call\":[") != NULL;
    return 0;
}

/* A message whose kept record says neither its time nor its call's id (the message's created_at
 * and prev_id say them): the member is [sequence, form] alone. */
static int member_lean_cb(void *user, const struct vg_record *r)
{
    static const char *const members[] = {"journal_call", "journal_start", "journal_end"};
    json_t *m = json_loads(r->body, 0, NULL);
    for (size_t i = 0; i < VG_ARRAY_LEN(members); i++) {
        json_t *a = json_object_get(m, members[i]);
        *(int *)user += json_array_size(a) == 2 && json_is_object(json_array_get(a, 1));
    }
    json_decref(m);
    return 0;
}

/* Each of a turn's tool calls (a memory tool, a C callback tool, a command tool) keeps the
 * journal's end of the call in its toolResult message's row and its start in its action
 * message's row, and each model call its record in its thought message's row, not in journal
 * rows of their own,
 * and the run's readers still give every end: the calls' statuses and outputs, replay matching
 * the live projection, the export listing each end at its sequence. */
TEST(a_tool_calls_end_is_kept_in_its_result_message)
{
    struct test_rt t;
    struct watch_model w;
    setup(&t, "chat_ends");
    char *out = NULL, *text = NULL;
    vigil_agent_spec spec = {.name = "tooled",
                             .config_json = "{\"tools\":[\"memory_*\",\"note\",\"run_cmd\"]}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    open_process(&t, &w, "ends",
                 "[{\"response\":{\"tool_calls\":["
                 "{\"id\":\"call_0\",\"name\":\"memory_write\",\"arguments\":"
                 "{\"label\":\"likes\",\"content\":\"tea\"}},"
                 "{\"id\":\"call_1\",\"name\":\"note\",\"arguments\":{\"text\":\"tea\"}},"
                 "{\"id\":\"call_2\",\"name\":\"run_cmd\",\"arguments\":{}}]}},"
                 "{\"response\":{\"text\":\"saved\"}}]",
                 0);
    ASSERT_OK(vigil_chat(t.rt, agent, NULL, "remember that I like tea", NULL, &out, E));
    json_t *o = json_loads(out, 0, NULL);
    char run_id[64];
    snprintf(run_id, sizeof run_id, "%s", json_string_value(json_object_get(o, "run_id")));
    json_decref(o);
    vigil_free(out);
    int end_rows = 0, in_messages = 0;
    struct vg_query jq = {.kind = "journal", .owner = agent, .k1 = run_id};
    ASSERT_OK(vg_store_scan(t.rt->env.store, &jq, end_row_cb, &end_rows, E));
    struct vg_query mq = {.kind = "message", .owner = agent};
    ASSERT_OK(vg_store_scan(t.rt->env.store, &mq, end_in_message_cb, &in_messages, E));
    ASSERT_EQ(end_rows, 0);
    ASSERT_EQ(in_messages, 3);
    /* and each call's start in its action message's row (ends.c) */
    int start_rows = 0;
    json_t *started = json_array();
    ASSERT_OK(vg_store_scan(t.rt->env.store, &jq, start_row_cb, &start_rows, E));
    ASSERT_OK(vg_store_scan(t.rt->env.store, &mq, start_in_message_cb, started, E));
    ASSERT_EQ(start_rows, 0);
    ASSERT_EQ((int64_t)json_array_size(started), 3);
    ASSERT_OK(vigil_run_tools(t.rt, run_id, NULL, 0, &text, E));
    ASSERT(!strstr(text, "\"running\""));
    size_t si;
    json_t *sid;
    json_array_foreach (started, si, sid) /* the call's id is its action message's */
        ASSERT_CONTAINS(text, json_string_value(sid));
    json_decref(started);
    /* and each model call in the row of the thought message that holds its answer */
    int call_rows = 0, calls_kept = 0;
    ASSERT_OK(vg_store_scan(t.rt->env.store, &jq, model_call_row_cb, &call_rows, E));
    ASSERT_OK(vg_store_scan(t.rt->env.store, &mq, call_in_message_cb, &calls_kept, E));
    ASSERT_EQ(call_rows, 0);
    ASSERT_EQ(calls_kept, 2);
    /* every kept record leaves its time and its call's id to its message (Session 34) */
    int lean = 0;
    ASSERT_OK(vg_store_scan(t.rt->env.store, &mq, member_lean_cb, &lean, E));
    ASSERT_EQ(lean, 8);
    int done = 0;
    for (const char *p = text; (p = strstr(p, "\"status\":\"succeeded\"")); p++)
        done++;
    ASSERT_EQ(done, 3);
    ASSERT_CONTAINS(text, "n-1"); /* the outputs: the note tool's changed entity */
    vigil_free(text);
    ASSERT_OK(vigil_run_replay(t.rt, run_id, &text, E));
    ASSERT_CONTAINS(text, "\"stored_projection_matches\":true");
    vigil_free(text);
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/export", vg_test_tmpdir("chat_ends_export"));
    int64_t n = 0;
    ASSERT_OK(vigil_journal_export(t.rt, agent, dir, &n, E));
    char path[4400], *file = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/agent-journals/%s.interaction.jsonl", dir, agent);
    ASSERT_OK(vg_fs_read_file(path, (size_t)1 << 24, &file, &len, E));
    int ends = 0, seq = 0, model_calls = 0;
    for (char *line = file, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        ASSERT(nl != NULL);
        *nl = '\0';
        json_t *rec = json_loads(line, 0, NULL);
        ASSERT_EQ(json_integer_value(json_object_get(rec, "sequence")), ++seq);
        const char *st =
            json_string_value(json_object_get(json_object_get(rec, "tool_call"), "status"));
        ends += st && !strcmp(st, "succeeded") &&
                json_object_get(json_object_get(rec, "tool_call"), "output");
        model_calls += json_object_get(rec, "model_call") != NULL;
        json_decref(rec);
    }
    ASSERT_EQ(ends, 3);
    ASSERT_EQ(model_calls, 2);
    vg_free(file);
    /* The count is of both files: the journal's lines and the agent's own records. */
    snprintf(path, sizeof path, "%s/agent-journals/%s.agent.jsonl", dir, agent);
    ASSERT_OK(vg_fs_read_file(path, (size_t)1 << 24, &file, &len, E));
    int own = 0;
    for (const char *p = file; (p = strchr(p, '\n')); p++)
        own++;
    ASSERT(own > 0);
    ASSERT_EQ(n, seq + own);
    vg_free(file);
    /* The step's three actions and three results are kept in its thought's row, their ids made
     * from the thought's (docs/internals/STORE.md, "A step's messages in one row"), while every
     * reader above got one record a message: the turn's nine messages in three rows. */
    int records = 0, rows = 0;
    ASSERT_OK(vg_store_scan(t.rt->env.store, &mq, count_records_cb, &records, E));
    ASSERT_OK(vg_store_scan_stored(t.rt->env.store, &mq, count_records_cb, &rows, E));
    ASSERT_EQ(records, 9);
    ASSERT_EQ(rows, 3);
    close_process(&t, &w);
    test_rt_close(&t);
}

static int run_ids_cb(void *user, const struct vg_record *r)
{
    json_array_append_new(user, json_string(r->id));
    return 0;
}

/* Whichever store call of a tool step fails, what is committed replays to the run's stored
 * projection: a call's end kept in its result message is committed with that message or not at
 * all (a failure after the end was folded gives up the transaction, src/loop/loop.c). */
TEST(a_failed_store_call_never_splits_an_end_from_its_message)
{
    long nth;
    for (nth = 1;; nth++) {
        struct test_rt t;
        struct watch_model w;
        char name[64];
        snprintf(name, sizeof name, "chat_end_fault_%ld", nth);
        setup(&t, name);
        vigil_agent_spec spec = {.name = "tooled", .config_json = "{\"tools\":[\"note\"]}"};
        ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
        open_process(&t, &w, name,
                     "[{\"response\":{\"tool_calls\":[{\"id\":\"call_0\",\"name\":\"note\","
                     "\"arguments\":{\"text\":\"tea\"}}]}},{\"response\":{\"text\":\"noted\"}}]",
                     0);
        struct vg_store *fault = NULL;
        ASSERT_OK(vg_store_fault_wrap(t.rt->env.store, &fault, E));
        t.rt->env.store = fault;
        vg_store_fault_arm(fault, nth, VIGIL_EIO);
        char *out = NULL;
        vigil_error e = {0};
        vigil_code rc = vigil_chat(t.rt, agent, NULL, "note tea", NULL, &out, &e);
        long calls = vg_store_fault_calls(fault);
        vg_store_fault_arm(fault, 0, VIGIL_OK);
        vigil_free(out);
        ASSERT(!vg_store_in_tx(fault));
        json_t *runs = json_array();
        struct vg_query rq = {.kind = "run", .owner = agent};
        ASSERT_OK(vg_store_scan(fault, &rq, run_ids_cb, runs, E));
        size_t i;
        json_t *id;
        json_array_foreach (runs, i, id) {
            char *text = NULL;
            ASSERT_OK(vg_journal_replay(fault, json_string_value(id), &text, E));
            if (!strstr(text, "\"stored_projection_matches\":true"))
                TEST_FAIL_("store call %ld failed: run %s replays to another projection: %s", nth,
                           json_string_value(id), text);
            vg_free(text);
        }
        json_decref(runs);
        close_process(&t, &w);
        test_rt_close(&t);
        if (calls < nth) { /* the turn finished before call nth: every point was covered */
            ASSERT_OK(rc);
            break;
        }
    }
    ASSERT(nth > 20);
}

/* The log syncs of a chat turn, commit by commit (the store's transaction hook). */
static struct {
    long syncs_at_last_commit;
    int commits, synced[64]; /* each committed transaction: did its commit sync the log? */
    int effects, synced_at_effect;
} turn_syncs;

static void count_syncs(void *user, int committed)
{
    long n = vg_sqlite_fault_vfs_count(); /* a durable commit syncs inside it */
    if (committed && turn_syncs.commits < (int)VG_ARRAY_LEN(turn_syncs.synced))
        turn_syncs.synced[turn_syncs.commits++] = n > turn_syncs.syncs_at_last_commit;
    turn_syncs.syncs_at_last_commit = n;
}

static vigil_code counted_note(void *user, const vigil_tool_call_info *call, const char *args,
                               char **out, vigil_error *err)
{
    int c = turn_syncs.commits;
    turn_syncs.effects++;
    turn_syncs.synced_at_effect += c > 0 && turn_syncs.synced[c - 1];
    *out = strdup("{\"noted\":true}");
    return *out ? VIGIL_OK : VIGIL_ENOMEM;
}

#define NOTE_CALL(id)                                                                              \
    "{\"response\":{\"tool_calls\":[{\"id\":\"" id "\",\"name\":\"note\","                         \
    "\"arguments\":{\"n\":\"" id "\"}}]}},"

/* One log sync per model call: a turn of three tool steps makes four model calls and syncs four
 * times, once before each tool acts (the commit that records its started operation, carrying
 * the turn's earlier commits: the lease, the run's start, the model's turn) and once at the
 * close, which carries the final answer and gives the lease back (a commit of its own after
 * the close until session 35). It took seven: the lease's take and give-back and the run's
 * start synced apart. */
TEST(a_chat_turn_syncs_the_log_once_per_model_call)
{
    struct test_rt t;
    char path[4200], text[1024], *out = NULL;
    if (getenv("VIGIL_TEST_RT_PG")) /* SQLite's log syncs: PostgreSQL's are the server's */
        return;
    ASSERT_OK(vg_sqlite_fault_vfs_install(E)); /* passes everything through; counts when armed */
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_CONFIG");
    test_rt_open(&t, "chat_syncs");
    snprintf(path, sizeof path, "%s/steps.json", vg_test_tmpdir("chat_syncs"));
    snprintf(text, sizeof text,
             "{\"vigil_cassette\":1,\"exchanges\":[" NOTE_CALL("c1") NOTE_CALL("c2")
                 NOTE_CALL("c3") "{\"response\":{\"text\":\"done\"}}]}");
    ASSERT_OK(vg_fs_write_file(path, text, strlen(text), E));
    setenv("VIGIL_MODEL_CASSETTE", path, 1);
    vigil_tool_def def = {.name = "note", .description = "Note a text."};
    ASSERT_OK(vigil_tool_register(t.rt, &def, counted_note, NULL, E));
    vigil_agent_spec spec = {.name = "synced", .config_json = "{\"tools\":[\"note\"]}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    ASSERT_OK(vg_runtime_prepare(t.rt, E)); /* the first use's recovery syncs apart, once */
    memset(&turn_syncs, 0, sizeof turn_syncs);
    vg_store_set_tx_hook(t.env->store, count_syncs, NULL);
    vg_sqlite_fault_vfs_arm(LONG_MAX, VG_FAULT_SYNC, VIGIL_EIO, 0);
    ASSERT_OK(vigil_chat(t.rt, agent, NULL, "note three things", NULL, &out, E));
    long syncs = vg_sqlite_fault_vfs_count();
    vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
    vg_store_set_tx_hook(t.env->store, NULL, NULL);
    ASSERT_CONTAINS(out, "\"tool_calls\":3");
    vigil_free(out);
    ASSERT_EQ(syncs, 4);
    ASSERT_EQ(turn_syncs.effects, 3);
    ASSERT_EQ(turn_syncs.synced_at_effect, 3); /* each effect after a synced commit */
    int n = turn_syncs.commits;
    ASSERT(n >= 2);
    ASSERT(turn_syncs.synced[n - 1]);       /* the close, with the answer and the lease */
    ASSERT(!turn_syncs.synced[0]);          /* the lease taken */
    ASSERT(vg_store_durable(t.env->store)); /* the turn leaves commits durable */
    json_t *lease = NULL;
    ASSERT_OK(vg_env_get_json(t.env, "agent_lease", agent, &lease, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(lease, "holder")), ""); /* given back */
    json_decref(lease);
    test_rt_close(&t);
}

/* The locks a one-tool chat turn takes on the store's log index (SQLite's shared memory): each
 * is a round trip to the kernel (an fcntl call to take it, one to give it back), one a read
 * transaction and more a write transaction. The turn's reads share read transactions where
 * they come together (before the lease, recovery's, the run's preparation, the compaction's
 * check), a run's start takes no write transaction to learn that no memory decision waits, and
 * the lease goes back in the close's transaction: 30 locks where it took 48 (session 35; the
 * bound leaves two for reads added later). The count is of the second turn: the first also
 * seeds the agent's memory. */
TEST(a_one_tool_turn_takes_the_stores_locks_few_times)
{
    struct test_rt t;
    char path[4200], text[1024], *out = NULL;
    if (getenv("VIGIL_TEST_RT_PG")) /* SQLite's locks */
        return;
    ASSERT_OK(vg_sqlite_fault_vfs_install(E)); /* passes everything through; counts when armed */
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_CONFIG");
    test_rt_open(&t, "chat_locks");
    snprintf(path, sizeof path, "%s/steps.json", vg_test_tmpdir("chat_locks"));
    snprintf(text, sizeof text,
             "{\"vigil_cassette\":1,\"exchanges\":[" NOTE_CALL(
                 "c1") "{\"response\":{\"text\":"
                       "\"one\"}}," NOTE_CALL("c2") "{\"response\":{\"text\":\"two\"}}]}");
    ASSERT_OK(vg_fs_write_file(path, text, strlen(text), E));
    setenv("VIGIL_MODEL_CASSETTE", path, 1);
    vigil_tool_def def = {.name = "note", .description = "Note a text."};
    ASSERT_OK(vigil_tool_register(t.rt, &def, counted_note, NULL, E));
    vigil_agent_spec spec = {.name = "locked", .config_json = "{\"tools\":[\"note\"]}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    ASSERT_OK(vigil_chat(t.rt, agent, NULL, "note one thing", NULL, &out, E));
    vigil_free(out);
    vg_sqlite_fault_vfs_arm(LONG_MAX, VG_FAULT_SHM_LOCK, VIGIL_EIO, 0);
    ASSERT_OK(vigil_chat(t.rt, agent, NULL, "note another", NULL, &out, E));
    long locks = vg_sqlite_fault_vfs_count();
    vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
    ASSERT_CONTAINS(out, "\"tool_calls\":1");
    vigil_free(out);
    ASSERT(locks > 0);
    ASSERT(locks <= 32);
    test_rt_close(&t);
}

/* The child's end: it dies (as a SIGKILL would) right after its nth commit returns. */
static int die_after_commits;

static void die_after_commit(void *user, int committed)
{
    if (committed && --die_after_commits == 0)
        _exit(0);
}

static int runs_that_are(struct test_rt *t, const char *status)
{
    char *out = NULL;
    ASSERT_OK(vigil_runs_list(t->rt, agent, status, NULL, 10, &out, E));
    json_t *runs = json_loads(out, 0, NULL);
    int n = (int)json_array_size(json_object_get(runs, "items"));
    json_decref(runs);
    vigil_free(out);
    return n;
}

/* A turn of a process that died right after its nth commit, then a turn of the next process:
 * what the store holds. The runs listed by status, the user's messages of the thread. */
static void turn_after_a_crash_at_commit(struct test_rt *t, int nth, int *crashed, int *said)
{
    char *out = NULL, thread[128];
    vigil_runtime_close(t->rt);
    t->rt = NULL;
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        test_rt_reopen(t);
        die_after_commits = nth;
        vg_store_set_tx_hook(t->env->store, die_after_commit, NULL);
        vigil_chat(t->rt, agent, NULL, "hello", NULL, &out, NULL);
        _exit(3); /* the turn ended before its nth commit */
    }
    int status = -1;
    ASSERT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    t->opens++; /* other ids than the child's */
    test_rt_reopen(t);
    ASSERT_OK(vigil_chat(t->rt, agent, NULL, "again", NULL, &out, E));
    ASSERT_CONTAINS(out, "you said: again");
    vigil_free(out);
    ASSERT_EQ(runs_that_are(t, "running"), 0); /* nothing left running */
    *crashed = runs_that_are(t, "crashed");
    json_t *msgs = NULL;
    snprintf(thread, sizeof thread, "%s:session:default", agent);
    ASSERT_OK(vg_message_latest(t->env, agent, thread, 20, &msgs, E));
    size_t i;
    json_t *m;
    *said = 0;
    json_array_foreach (msgs, i, m)
        *said += !strcmp(json_string_value(json_object_get(m, "content")), "hello");
    json_decref(msgs);
}

/* The run's start is committed without a sync of its own (the turn's first durable commit syncs
 * it), so a power loss may leave the store with or without it; a crash leaves it. Either way the
 * agent's next turn runs: a process dead right after its lease was taken (the store as a power
 * loss leaves it when the start was never synced: the lease alone, its holder gone) leaves no
 * run and no message; one dead right after the start leaves a run that recovery closes
 * `crashed`, and its user message, once. */
TEST(a_turn_after_a_crash_right_after_the_lease_or_the_start_runs)
{
    struct test_rt t;
    int crashed = -1, said = -1;
    setup(&t, "chat_crash_lease");
    turn_after_a_crash_at_commit(&t, 1, &crashed, &said); /* the lease taken */
    ASSERT_EQ(crashed, 0);
    ASSERT_EQ(said, 0);
    test_rt_close(&t);
    setup(&t, "chat_crash_start");
    turn_after_a_crash_at_commit(&t, 2, &crashed, &said); /* the run's start */
    ASSERT_EQ(crashed, 1);
    ASSERT_EQ(said, 1);
    test_rt_close(&t);
}

/* The compaction jobs of the agent's default chat thread. */
static int64_t compaction_jobs(struct test_rt *t)
{
    char thread[200];
    int64_t n = 0;
    snprintf(thread, sizeof thread, "%s:session:default", agent);
    struct vg_query q = {.kind = "compaction_job", .owner = agent, .k1 = thread};
    ASSERT_OK(vg_store_count(t->env->store, &q, &n, E));
    return n;
}

/* After each turn, compaction is considered for the turn's thread: nothing is scheduled while
 * the thread's history is under its budget (51,200 tokens by default), and a job is once a turn
 * takes it past it; the turns themselves all complete. proves: S0-044 */
TEST(a_turn_that_takes_its_thread_past_its_budget_schedules_compaction)
{
    struct test_rt t;
    char *out = NULL;
    setup(&t, "chat_compaction_after_run");
    size_t n = 40000; /* about 10,000 tokens a message */
    char *text = vg_malloc(n + 1);
    ASSERT(text);
    memset(text, 'w', n);
    text[n] = '\0';
    int turn = 0;
    for (; turn < 8 && compaction_jobs(&t) == 0; turn++) {
        text[0] = (char)('a' + turn); /* each turn's message its own */
        ASSERT_OK(vigil_chat(t.rt, agent, NULL, text, NULL, &out, E));
        vigil_free(out);
        if (turn < 2)
            ASSERT_EQ(compaction_jobs(&t), 0); /* 20,000 tokens and less: under the budget */
    }
    ASSERT_EQ(compaction_jobs(&t), 1);
    ASSERT(turn >= 3 && turn <= 6); /* scheduled the turn the history passed 51,200 tokens */
    vg_free(text);
    test_rt_close(&t);
}

/* With a small context (a small local model's), compaction's budget follows it: half the
 * context, so the turns that leave the window are summarized soon after, not once 51,200 tokens
 * piled up (trial K6). An agent with 4,000 context tokens passes its 2,000 within a few turns of
 * about 500 tokens each; the fixed budget would have scheduled nothing in these turns. */
TEST(compactions_budget_follows_a_small_context)
{
    struct test_rt t;
    char *out = NULL, small[37], thread[200];
    setup(&t, "chat_compaction_small");
    vigil_agent_spec spec = {.name = "small",
                             .config_json = "{\"limits\":{\"context_tokens\":4000}}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, small, E));
    snprintf(thread, sizeof thread, "%s:session:default", small);
    char text[2001];
    memset(text, 'w', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    int64_t jobs = 0;
    for (int turn = 0; turn < 6 && jobs == 0; turn++) {
        text[0] = (char)('a' + turn);
        ASSERT_OK(vigil_chat(t.rt, small, NULL, text, NULL, &out, E));
        vigil_free(out);
        struct vg_query q = {.kind = "compaction_job", .owner = small, .k1 = thread};
        ASSERT_OK(vg_store_count(t.env->store, &q, &jobs, E));
    }
    ASSERT_EQ(jobs, 1);
    test_rt_close(&t);
}

/* A session's conversation read whole, oldest first (vigil chat --history, trial K7): each
 * turn's message and answer, the latest limit of them, another session apart, an unknown agent
 * ENOTFOUND and a limit out of range EINVAL. */
TEST(a_sessions_messages_are_read_oldest_first)
{
    struct test_rt t;
    char *out = NULL;
    setup(&t, "chat_session_messages");
    ASSERT_OK(vigil_chat(t.rt, agent, NULL, "first question", NULL, &out, E));
    vigil_free(out);
    ASSERT_OK(vigil_chat(t.rt, agent, NULL, "second question", NULL, &out, E));
    vigil_free(out);
    ASSERT_OK(vigil_chat(t.rt, agent, "other", "elsewhere", NULL, &out, E));
    vigil_free(out);
    ASSERT_OK(vigil_session_messages(t.rt, agent, NULL, 0, &out, E));
    json_t *v = json_loads(out, 0, NULL), *items = json_object_get(v, "items");
    vigil_free(out);
    ASSERT_EQ(json_array_size(items), 4);
    ASSERT_STREQ(json_string_value(json_object_get(v, "session")), "default");
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(items, 0), "kind")), "user");
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(items, 0), "content")),
                 "first question");
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(items, 1), "kind")), "thought");
    ASSERT_CONTAINS(json_string_value(json_object_get(json_array_get(items, 3), "content")),
                    "second question"); /* the scripted model echoes */
    json_decref(v);
    ASSERT_OK(vigil_session_messages(t.rt, agent, "default", 1, &out, E));
    v = json_loads(out, 0, NULL);
    vigil_free(out);
    ASSERT_EQ(json_array_size(json_object_get(v, "items")), 1);
    json_decref(v);
    ASSERT_OK(vigil_session_messages(t.rt, agent, "other", 10, &out, E));
    ASSERT_CONTAINS(out, "elsewhere");
    ASSERT(!strstr(out, "first question"));
    vigil_free(out);
    ASSERT_CODE(
        VIGIL_ENOTFOUND,
        vigil_session_messages(t.rt, "01a2292f-0000-7000-8000-000000000000", NULL, 10, &out, NULL));
    ASSERT_CODE(VIGIL_EINVAL, vigil_session_messages(t.rt, agent, NULL, 1001, &out, NULL));
    test_rt_close(&t);
}

int main(void)
{
    RUN(a_turns_outcome_is_canonical_json_with_every_field);
    RUN(turn_waits_for_a_held_lease_then_runs);
    RUN(turn_gives_up_when_the_agent_stays_busy);
    RUN(a_later_process_tells_the_tool_calls_as_they_happened);
    RUN(a_tool_calls_end_is_kept_in_its_result_message);
    RUN(a_failed_store_call_never_splits_an_end_from_its_message);
    RUN(a_chat_turn_syncs_the_log_once_per_model_call);
    RUN(a_one_tool_turn_takes_the_stores_locks_few_times);
    RUN(a_turn_after_a_crash_right_after_the_lease_or_the_start_runs);
    RUN(a_turn_that_takes_its_thread_past_its_budget_schedules_compaction);
    RUN(compactions_budget_follows_a_small_context);
    RUN(a_sessions_messages_are_read_oldest_first);
    return 0;
}
