/*
 * test_ends.c: a tool call's end record kept in its toolResult message's row, and its start in
 * its action message's row (src/journal/ends.c). No journal row is written for such an end; every
 * reader of the run's journal (the tool-call pages, one call, the run's counts, the follow, replay,
 * export, import, recovery's open calls) gives byte for byte what it gives when the same end is a
 * row of its own, as stores written before hold it.
 */
#include "journal/journal_fixture.h"

#include <jansson.h>

#include "journal/journal_int.h"
#include "os/fs.h"

#define THREAD "thread-1"

/*
 * How the test's messages keep their records. 0: the member as the journal gives it, [seq, at,
 * form] (a tool call's end with a last string, the prev_id its form stands for), as stores
 * written before Session 34 keep it (without that string) and as a message whose time and
 * prev_id are others keeps it. 1: as src/agent/message.c writes them
 * since: the message's time is its record's (the row's at) and the member leaves it out, each
 * message's prev_id is the thread's previous message, and an end drops the last string when it
 * is that prev_id (docs/internals/JOURNAL.md, "The record's time and its call's id from the
 * message").
 */
static int layout;
static char thread_head[64]; /* the thread's newest message (layout 1) */

/* The member text kept as the layout keeps it, and the message's time (*at, kept when the
 * member has none). *text is replaced (malloc'd). */
static void lay_out(char **text, int64_t *at)
{
    json_t *a = json_loads(*text, 0, NULL);
    ASSERT(json_is_array(a) && json_array_size(a) >= 3);
    if (!layout) {
        json_decref(a);
        return;
    }
    *at = json_integer_value(json_array_get(a, 1));
    json_array_remove(a, 1);
    json_t *last = json_array_get(a, json_array_size(a) - 1);
    if (json_is_string(last) && !strcmp(json_string_value(last), thread_head))
        json_array_remove(a, json_array_size(a) - 1);
    free(*text);
    *text = json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(a);
}

/* The message body with member (text: its value, NULL for none) and, in layout 1, prev_id. */
static char *with_member(json_t *b, const char *member, const char *text, int64_t *at)
{
    char *kept = text ? strdup(text) : NULL;
    if (kept)
        lay_out(&kept, at);
    if (layout && thread_head[0])
        json_object_set_new(b, "prev_id", json_string(thread_head));
    if (kept)
        json_object_set_new(b, member, json_loads(kept, 0, NULL));
    free(kept);
    char *body = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(b);
    return body;
}

/* A message row with body, its time at; the thread's head is then id. */
static void put_row(struct fx *f, const char *id, const char *kind, int64_t seq, int64_t at,
                    const char *body)
{
    struct vg_record r = {.kind = "message",
                          .id = id,
                          .owner = FX_AGENT,
                          .k1 = THREAD,
                          .k2 = kind,
                          .seq = seq,
                          .at = at,
                          .body = body};
    ASSERT_OK(vg_store_put(f->store, &r, 0, NULL, E));
    snprintf(thread_head, sizeof thread_head, "%s", id);
}

/* The toolResult message a caller writes with an end (as src/agent/message.c lays it out),
 * its content the call's output. */
static void put_result_message(struct fx *f, const char *run_id, const char *id,
                               const char *content, const char *end, int64_t seq)
{
    json_t *b = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:I}", "agent_id", FX_AGENT, "content", content,
                          "id", id, "kind", "toolResult", "run_id", run_id, "thread_id", THREAD,
                          "seq", (json_int_t)seq);
    int64_t at = vg_clock_now_ms(&f->clock.base);
    char *text = with_member(b, "journal_end", end, &at);
    put_row(f, id, "toolResult", seq, at, text);
    free(text);
}

/* A call ended in its result message: the end's text for it, then the message. */
static void end_in_message(struct fx *f, struct vg_run *run, const char *call, const char *status,
                           const char *output, const char *code, int64_t seq)
{
    char mid[37], *end = NULL;
    vg_ids_new(f->ids, mid);
    ASSERT_OK(vg_journal_tool_call_finished_in(run, call, status, output, code, 2, mid, &end, E));
    put_result_message(f, vg_journal_run_id(run), mid, output, end, seq);
    vg_free(end);
}

/* Calls ended in their messages (succeeded, failed with a code), one whose output is not
 * canonical text (its end a row), one ended apart (a row), one still running. */
static void write_calls(struct fx *f, struct vg_run *run, char calls[5][37])
{
    ASSERT_OK(vg_journal_tool_call_started(run, "add", "op-1", "{\"a\":1}", calls[0], E));
    vg_test_clock_advance(&f->clock, 2);
    end_in_message(f, run, calls[0], "succeeded", "{\"r\":2}", NULL, 1);
    ASSERT_OK(vg_journal_tool_call_started(run, "fetch", NULL, "[\"x\"]", calls[1], E));
    vg_test_clock_advance(&f->clock, 3);
    end_in_message(f, run, calls[1], "failed", "\"boom\"", "E_X", 2);
    ASSERT_OK(vg_journal_tool_call_started(run, "echo", NULL, "{}", calls[2], E));
    char mid[37], *end = NULL;
    vg_ids_new(f->ids, mid);
    ASSERT_OK(vg_journal_tool_call_finished_in(run, calls[2], "succeeded", "{ \"b\": 1 }", NULL, 0,
                                               mid, &end, E));
    ASSERT(end == NULL); /* not canonical: the message does not hold the output as the record */
    ASSERT_OK(vg_journal_tool_call_started(run, "echo", NULL, "{}", calls[3], E));
    ASSERT_OK(vg_journal_tool_call_finished(run, calls[3], "succeeded", "\"hi\"", NULL, 0, E));
    vg_test_clock_advance(&f->clock, 1);
    ASSERT_OK(vg_journal_tool_call_started(run, "slow", "op-5", "{}", calls[4], E));
}

/* What the readers give of the run, each reader's text joined in a fixed order. */
static char *read_all(struct fx *f, const char *run_id, char calls[5][37], const char *dir)
{
    json_t *all = json_array();
    char *text = NULL;
    ASSERT_OK(vg_journal_run_tools(f->store, run_id, NULL, 0, &text, E));
    json_array_append_new(all, json_string(text));
    vg_free(text);
    ASSERT_OK(vg_journal_run_tools(f->store, run_id, NULL, 2, &text, E));
    json_t *page = json_loads(text, 0, NULL);
    json_array_append_new(all, json_string(text));
    vg_free(text);
    ASSERT_OK(vg_journal_run_tools(
        f->store, run_id, json_string_value(json_object_get(page, "next_cursor")), 2, &text, E));
    json_decref(page);
    json_array_append_new(all, json_string(text));
    vg_free(text);
    for (int i = 0; i < 5; i++) {
        ASSERT_OK(vg_journal_run_tool(f->store, calls[i], &text, E));
        json_array_append_new(all, json_string(text));
        vg_free(text);
    }
    ASSERT_OK(vg_journal_run_show(f->store, run_id, &text, E));
    json_array_append_new(all, json_string(text));
    vg_free(text);
    ASSERT_OK(vg_journal_run_follow(f->store, run_id, (int64_t[2]){0, 0}, 50, &text, E));
    json_array_append_new(all, json_string(text));
    vg_free(text);
    ASSERT_OK(vg_journal_replay(f->store, run_id, &text, E));
    ASSERT_CONTAINS(text, "\"stored_projection_matches\":true");
    json_array_append_new(all, json_string(text));
    vg_free(text);
    int64_t n = 0;
    ASSERT_OK(vg_journal_export(f->store, dir, FX_AGENT, &n, E));
    char path[4300], *file = NULL;
    size_t len = 0;
    ASSERT_OK(vg_journal_path(dir, FX_AGENT, path, sizeof path, E));
    ASSERT_OK(vg_fs_read_file(path, (size_t)1 << 24, &file, &len, E));
    json_array_append_new(all, json_string(file));
    vg_free(file);
    char *joined = json_dumps(all, JSON_INDENT(1));
    json_decref(all);
    return joined;
}

struct kept {
    struct fx *f;
    const char *run_id;
    int n;
};

/* Each end a message keeps, written as the row a store written before holds instead, and the
 * message without it. */
static int as_row_cb(void *user, const struct vg_record *r)
{
    struct kept *k = user;
    char *text = NULL;
    ASSERT_OK(vg_journal_end_find(k->f->store, r->id, k->run_id, &text, E));
    if (!text)
        return 0;
    json_t *rec = json_loads(text, 0, NULL);
    int64_t at = 0;
    vg_time_parse_ms(json_string_value(json_object_get(rec, "occurred_at")), &at);
    struct vg_record row = {.kind = "journal",
                            .id = r->id,
                            .owner = FX_AGENT,
                            .k1 = k->run_id,
                            .k2 = "activity.updated",
                            .seq = json_integer_value(json_object_get(rec, "sequence")),
                            .at = at,
                            .body = text};
    ASSERT_OK(vg_store_put(k->f->store, &row, 0, NULL, E));
    json_decref(rec);
    vg_free(text);
    json_t *m = json_loads(r->body, 0, NULL);
    json_object_del(m, "journal_end");
    char *plain = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
    struct vg_record mr = *r;
    mr.body = plain;
    ASSERT_OK(vg_store_update(k->f->store, &mr, r->rev, E));
    free(plain);
    json_decref(m);
    k->n++;
    return 0;
}

static int64_t journal_rows(struct fx *f, const char *run_id)
{
    int64_t n = -1;
    struct vg_query q = {.kind = "journal", .owner = FX_AGENT, .k1 = run_id};
    ASSERT_OK(vg_store_count(f->store, &q, &n, E));
    return n;
}

/* The readers give the same bytes whether a call's end is kept in its message or is a row. */
static void an_end_in_its_message_reads_as_its_row_did_laid_out(void)
{
    struct fx f;
    fx_open(&f, "jt_ends_rows", 31);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    char run_id[37], calls[5][37];
    snprintf(run_id, sizeof run_id, "%s", vg_journal_run_id(run));
    write_calls(&f, run, calls);
    /* header, 5 starts, 2 ends of their own: the two ends kept in messages are no rows */
    ASSERT_EQ(journal_rows(&f, run_id), 8);
    char dir[4300];
    snprintf(dir, sizeof dir, "%s.export", f.path);
    char *in_messages = read_all(&f, run_id, calls, dir);
    ASSERT_CONTAINS(in_messages, "\\\"record_count\\\":10");
    ASSERT_CONTAINS(in_messages, "\\\"records\\\":10");
    ASSERT_CONTAINS(in_messages, "\\\"output\\\":{\\\"r\\\":2}");
    ASSERT_CONTAINS(in_messages, "\\\"error_code\\\":\\\"E_X\\\"");
    struct kept k = {.f = &f, .run_id = run_id};
    struct vg_query q = {.kind = "message", .owner = FX_AGENT, .k1 = THREAD};
    ASSERT_OK(vg_store_scan(f.store, &q, as_row_cb, &k, E));
    ASSERT_EQ(k.n, 2);
    ASSERT_EQ(journal_rows(&f, run_id), 10);
    char *as_rows = read_all(&f, run_id, calls, dir);
    ASSERT_STREQ(in_messages, as_rows);
    free(in_messages);
    free(as_rows);
    vg_journal_run_free(run);
    fx_close(&f);
}

TEST(an_end_in_its_message_reads_as_its_row_did)
{
    for (layout = 0; layout < 2; layout++) {
        thread_head[0] = '\0';
        an_end_in_its_message_reads_as_its_row_did_laid_out();
    }
}

static int open_cb(void *user, const char *id, const char *run_id, const char *op)
{
    (void)run_id;
    (void)op;
    json_array_append_new(user, json_string(id));
    return 0;
}

/* Recovery's open calls count an end kept in a message as an end; import of an export of such a
 * run writes each end as a row once, and an import into the store that keeps them adds nothing. */
TEST(ends_in_messages_close_calls_and_import_once)
{
    struct fx f, g;
    fx_open(&f, "jt_ends_import", 32);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    char run_id[37], calls[5][37];
    snprintf(run_id, sizeof run_id, "%s", vg_journal_run_id(run));
    write_calls(&f, run, calls);
    json_t *open = json_array();
    ASSERT_OK(vg_journal_open_calls(f.store, FX_AGENT, open_cb, open, E));
    ASSERT_EQ((int64_t)json_array_size(open), 1);
    ASSERT_STREQ(json_string_value(json_array_get(open, 0)), calls[4]);
    json_decref(open);
    vigil_error e = {0}; /* an end kept in a message is an end: the call is not finished again */
    ASSERT_CODE(VIGIL_ESTATE,
                vg_journal_tool_call_finished(run, calls[0], "failed", NULL, NULL, 0, &e));
    char dir[4300];
    snprintf(dir, sizeof dir, "%s.export", f.path);
    int64_t n = 0, added = -1;
    ASSERT_OK(vg_journal_export(f.store, dir, FX_AGENT, &n, E));
    ASSERT_EQ(n, 10);
    ASSERT_OK(vg_journal_import(f.store, dir, FX_AGENT, &added, E));
    ASSERT_EQ(added, 0);
    ASSERT_EQ(journal_rows(&f, run_id), 8);
    fx_open(&g, "jt_ends_import_to", 33);
    ASSERT_OK(vg_journal_import(g.store, dir, FX_AGENT, &added, E));
    ASSERT_EQ(added, 10);
    char *from = NULL, *to = NULL;
    ASSERT_OK(vg_journal_replay_projection(f.store, run_id, &from, E));
    ASSERT_OK(vg_journal_replay_projection(g.store, run_id, &to, E));
    ASSERT_STREQ(from, to);
    vg_free(from);
    vg_free(to);
    ASSERT_OK(vg_journal_run_tools(f.store, run_id, NULL, 0, &from, E));
    ASSERT_OK(vg_journal_run_tools(g.store, run_id, NULL, 0, &to, E));
    ASSERT_STREQ(from, to);
    vg_free(from);
    vg_free(to);
    fx_close(&g);
    vg_journal_run_free(run);
    fx_close(&f);
}

/* ---- a call's start kept in its action message ------------------------------------------- */

/* A message of kind with content, keeping member (NULL: none) with the text kept. */
static void put_message(struct fx *f, const char *run_id, const char *id, const char *kind,
                        const char *content, const char *member, const char *kept, int64_t seq)
{
    json_t *b =
        json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:I}", "agent_id", FX_AGENT, "content", content, "id",
                  id, "kind", kind, "run_id", run_id, "thread_id", THREAD, "seq", (json_int_t)seq);
    int64_t at = vg_clock_now_ms(&f->clock.base);
    char *text = with_member(b, member, member ? kept : NULL, &at);
    put_row(f, id, kind, seq, at, text);
    free(text);
}

/* A call started in a transaction, its start kept for its action message (taken: the message
 * written with it; not taken: a row at the commit). */
static void start_kept(struct fx *f, struct vg_run *run, const char *name, const char *input,
                       int taken, char call[37], int64_t seq)
{
    char *start = NULL;
    ASSERT_OK(vg_store_begin(f->store, E));
    ASSERT_OK(vg_journal_tool_call_started_in(run, name, NULL, input, call, E));
    if (taken) {
        ASSERT_OK(vg_journal_kept_take(run, call, &start, E));
        ASSERT(start != NULL);
        put_message(f, vg_journal_run_id(run), call, "action", input, "journal_start", start, seq);
    }
    ASSERT_OK(vg_store_end(f->store, VIGIL_OK, E));
    vg_free(start);
}

/* Starts kept in their action messages, ended in their result messages or by rows; a start no
 * message took (a row), one started apart (a row), one kept and still running. */
static void write_kept_calls(struct fx *f, struct vg_run *run, char calls[5][37])
{
    start_kept(f, run, "add", "{\"a\":1}", 1, calls[0], 1);
    vg_test_clock_advance(&f->clock, 2);
    end_in_message(f, run, calls[0], "succeeded", "{\"r\":2}", NULL, 2);
    start_kept(f, run, "fetch", "[\"x\"]", 1, calls[1], 3);
    vg_test_clock_advance(&f->clock, 3);
    ASSERT_OK(vg_journal_tool_call_finished(run, calls[1], "failed", "\"boom\"", "E_X", 3, E));
    start_kept(f, run, "echo", "{}", 0, calls[2], 4);
    end_in_message(f, run, calls[2], "succeeded", "\"hi\"", NULL, 5);
    ASSERT_OK(vg_journal_tool_call_started(run, "echo", NULL, "{\"b\":1}", calls[3], E));
    end_in_message(f, run, calls[3], "succeeded", "{}", NULL, 6);
    vg_test_clock_advance(&f->clock, 1);
    start_kept(f, run, "slow", "{}", 1, calls[4], 7);
}

/* Each start and end a message keeps, written as the row a store written before holds instead,
 * and the message without it. */
static int kept_as_row_cb(void *user, const struct vg_record *r)
{
    struct kept *k = user;
    char *text = NULL;
    ASSERT_OK(vg_journal_end_find(k->f->store, r->id, k->run_id, &text, E));
    if (!text)
        return 0;
    json_t *rec = json_loads(text, 0, NULL);
    int64_t at = 0;
    vg_time_parse_ms(json_string_value(json_object_get(rec, "occurred_at")), &at);
    struct vg_record row = {.kind = "journal",
                            .id = r->id,
                            .owner = FX_AGENT,
                            .k1 = k->run_id,
                            .k2 = "activity.updated",
                            .seq = json_integer_value(json_object_get(rec, "sequence")),
                            .at = at,
                            .body = text};
    ASSERT_OK(vg_store_put(k->f->store, &row, 0, NULL, E));
    json_decref(rec);
    vg_free(text);
    json_t *m = json_loads(r->body, 0, NULL);
    json_object_del(m, "journal_end");
    json_object_del(m, "journal_start");
    char *plain = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
    struct vg_record mr = *r;
    mr.body = plain;
    ASSERT_OK(vg_store_update(k->f->store, &mr, r->rev, E));
    free(plain);
    json_decref(m);
    k->n++;
    return 0;
}

/* The readers give the same bytes whether a call's start is kept in its action message or is a
 * row; a start no message takes is a row. */
static void a_start_in_its_action_message_reads_as_its_row_did_laid_out(void)
{
    struct fx f;
    fx_open(&f, "jt_starts_rows", 34);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    char run_id[37], calls[5][37];
    snprintf(run_id, sizeof run_id, "%s", vg_journal_run_id(run));
    write_kept_calls(&f, run, calls);
    /* header, 2 starts and 1 end of their own: 3 starts and 3 ends kept in messages */
    ASSERT_EQ(journal_rows(&f, run_id), 4);
    char dir[4300];
    snprintf(dir, sizeof dir, "%s.export", f.path);
    char *in_messages = read_all(&f, run_id, calls, dir);
    ASSERT_CONTAINS(in_messages, "\\\"record_count\\\":10");
    ASSERT_CONTAINS(in_messages, "\\\"records\\\":10");
    ASSERT_CONTAINS(in_messages, "\\\"input\\\":[\\\"x\\\"]");
    ASSERT_CONTAINS(in_messages, "\\\"status\\\":\\\"running\\\"");
    struct kept k = {.f = &f, .run_id = run_id};
    struct vg_query q = {.kind = "message", .owner = FX_AGENT, .k1 = THREAD};
    ASSERT_OK(vg_store_scan(f.store, &q, kept_as_row_cb, &k, E));
    ASSERT_EQ(k.n, 6);
    ASSERT_EQ(journal_rows(&f, run_id), 10);
    char *as_rows = read_all(&f, run_id, calls, dir);
    ASSERT_STREQ(in_messages, as_rows);
    free(in_messages);
    free(as_rows);
    vg_journal_run_free(run);
    fx_close(&f);
}

TEST(a_start_in_its_action_message_reads_as_its_row_did)
{
    for (layout = 0; layout < 2; layout++) {
        thread_head[0] = '\0';
        a_start_in_its_action_message_reads_as_its_row_did_laid_out();
    }
}

/* Recovery's open calls find a call whose start is kept in its action message and that has no
 * end (a crash in flight), and only it; import writes each kept start as a row once. */
TEST(starts_in_messages_stay_open_and_import_once)
{
    struct fx f, g;
    fx_open(&f, "jt_starts_import", 35);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    char run_id[37], calls[5][37];
    snprintf(run_id, sizeof run_id, "%s", vg_journal_run_id(run));
    write_kept_calls(&f, run, calls);
    json_t *open = json_array();
    ASSERT_OK(vg_journal_open_calls(f.store, FX_AGENT, open_cb, open, E));
    ASSERT_EQ((int64_t)json_array_size(open), 1);
    ASSERT_STREQ(json_string_value(json_array_get(open, 0)), calls[4]);
    json_decref(open);
    /* another handle (a reload) finishes the running call from its kept start */
    struct vg_run *again = NULL;
    ASSERT_OK(vg_journal_run_attach(f.store, &f.clock.base, f.ids, run_id, &again, E));
    ASSERT_OK(vg_journal_tool_call_finished(again, calls[4], "succeeded", "1", NULL, 0, E));
    vg_journal_run_free(again);
    char dir[4300];
    snprintf(dir, sizeof dir, "%s.export", f.path);
    int64_t n = 0, added = -1;
    ASSERT_OK(vg_journal_export(f.store, dir, FX_AGENT, &n, E));
    ASSERT_EQ(n, 11);
    ASSERT_OK(vg_journal_import(f.store, dir, FX_AGENT, &added, E));
    ASSERT_EQ(added, 0);
    fx_open(&g, "jt_starts_import_to", 36);
    ASSERT_OK(vg_journal_import(g.store, dir, FX_AGENT, &added, E));
    ASSERT_EQ(added, 11);
    char *from = NULL, *to = NULL;
    ASSERT_OK(vg_journal_run_tools(f.store, run_id, NULL, 0, &from, E));
    ASSERT_OK(vg_journal_run_tools(g.store, run_id, NULL, 0, &to, E));
    ASSERT_STREQ(from, to);
    vg_free(from);
    vg_free(to);
    fx_close(&g);
    vg_journal_run_free(run);
    fx_close(&f);
}

/* ---- a model call kept in its thought message ------------------------------------------- */

/* A model call appended in a transaction, its record kept for the thought message answering it
 * (taken: the message written with it; not taken: a row at the commit). */
static void model_call_kept(struct fx *f, struct vg_run *run, int taken, int64_t seq)
{
    struct vg_model_call_trace t = {.provider = "openai",
                                    .model = "m",
                                    .latency_ms = 4,
                                    .input_tokens = 10 + seq,
                                    .output_tokens = 3,
                                    .attempts = 1,
                                    .stop_reason = "tool_use"};
    char mid[37], *call = NULL;
    vg_ids_new(f->ids, mid);
    ASSERT_OK(vg_store_begin(f->store, E));
    ASSERT_OK(vg_journal_model_call_in(run, &t, mid, E));
    if (taken) {
        ASSERT_OK(vg_journal_kept_take(run, mid, &call, E));
        ASSERT(call != NULL);
        put_message(f, vg_journal_run_id(run), mid, "thought", "", "journal_call", call, seq);
    }
    ASSERT_OK(vg_store_end(f->store, VIGIL_OK, E));
    vg_free(call);
    vg_test_clock_advance(&f->clock, 1);
}

/* Model calls kept in their thought messages around calls kept in their messages; one no
 * message took (a row) and one written apart (a row). */
static void write_model_calls(struct fx *f, struct vg_run *run, char calls[5][37])
{
    model_call_kept(f, run, 1, 0);
    write_kept_calls(f, run, calls);
    model_call_kept(f, run, 1, 8);
    model_call_kept(f, run, 0, 9);
    struct vg_model_call_trace t = {.provider = "openai", .model = "m", .error_code = "ETIMEOUT"};
    ASSERT_OK(vg_journal_model_call(run, &t, E));
    model_call_kept(f, run, 1, 10);
}

/* Each record a message keeps as the row a store written before holds, the message without it. */
static int all_as_row_cb(void *user, const struct vg_record *r)
{
    struct kept *k = user;
    json_t *m = json_loads(r->body, 0, NULL);
    int has = json_object_get(m, "journal_call") != NULL;
    json_decref(m);
    if (!has)
        return kept_as_row_cb(user, r);
    char *text = NULL;
    ASSERT_OK(vg_journal_end_find(k->f->store, r->id, k->run_id, &text, E));
    ASSERT(text != NULL);
    json_t *rec = json_loads(text, 0, NULL);
    int64_t at = 0;
    vg_time_parse_ms(json_string_value(json_object_get(rec, "occurred_at")), &at);
    struct vg_record row = {.kind = "journal",
                            .id = r->id,
                            .owner = FX_AGENT,
                            .k1 = k->run_id,
                            .k2 = "activity.updated",
                            .seq = json_integer_value(json_object_get(rec, "sequence")),
                            .at = at,
                            .body = text};
    ASSERT_OK(vg_store_put(k->f->store, &row, 0, NULL, E));
    json_decref(rec);
    vg_free(text);
    m = json_loads(r->body, 0, NULL);
    json_object_del(m, "journal_call");
    char *plain = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
    struct vg_record mr = *r;
    mr.body = plain;
    ASSERT_OK(vg_store_update(k->f->store, &mr, r->rev, E));
    free(plain);
    json_decref(m);
    k->n++;
    return 0;
}

/* The readers give the same bytes whether a model call's record is kept in its thought message
 * or is a row; one no message takes is a row. */
static void a_model_call_in_its_thought_message_reads_as_its_row_did_laid_out(void)
{
    struct fx f;
    fx_open(&f, "jt_calls_rows", 37);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    char run_id[37], calls[5][37];
    snprintf(run_id, sizeof run_id, "%s", vg_journal_run_id(run));
    write_model_calls(&f, run, calls);
    /* header, 2 starts, 1 end and 2 model calls of their own: 3 model calls, 3 starts and 3
     * ends kept in messages */
    ASSERT_EQ(journal_rows(&f, run_id), 6);
    char dir[4300];
    snprintf(dir, sizeof dir, "%s.export", f.path);
    char *in_messages = read_all(&f, run_id, calls, dir);
    ASSERT_CONTAINS(in_messages, "\\\"record_count\\\":15");
    ASSERT_CONTAINS(in_messages, "\\\"records\\\":15");
    ASSERT_CONTAINS(in_messages, "\\\"input_tokens\\\":20");
    ASSERT_CONTAINS(in_messages, "\\\"error_code\\\":\\\"ETIMEOUT\\\"");
    struct kept k = {.f = &f, .run_id = run_id};
    struct vg_query q = {.kind = "message", .owner = FX_AGENT, .k1 = THREAD};
    ASSERT_OK(vg_store_scan(f.store, &q, all_as_row_cb, &k, E));
    ASSERT_EQ(k.n, 9);
    ASSERT_EQ(journal_rows(&f, run_id), 15);
    char *as_rows = read_all(&f, run_id, calls, dir);
    ASSERT_STREQ(in_messages, as_rows);
    free(in_messages);
    free(as_rows);
    vg_journal_run_free(run);
    fx_close(&f);
}

TEST(a_model_call_in_its_thought_message_reads_as_its_row_did)
{
    for (layout = 0; layout < 2; layout++) {
        thread_head[0] = '\0';
        a_model_call_in_its_thought_message_reads_as_its_row_did_laid_out();
    }
}

static int thought_cb(void *user, const struct vg_record *r)
{
    json_t *m = json_loads(r->body, 0, NULL);
    ASSERT_STREQ(json_string_value(json_object_get(m, "kind")), "thought");
    ASSERT_STREQ(json_string_value(json_object_get(m, "content")), "");
    *(int *)user += json_object_get(m, "journal_call") != NULL;
    json_decref(m);
    return 0;
}

/* Pruning takes a model call kept in its thought message as it takes a row (the message keeps
 * its own fields); import writes such records as rows once; recovery finds the open call. */
static void model_calls_in_messages_prune_and_import_once_laid_out(void)
{
    struct fx f, g;
    fx_open(&f, "jt_calls_prune", 38);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    char run_id[37], calls[5][37];
    snprintf(run_id, sizeof run_id, "%s", vg_journal_run_id(run));
    write_model_calls(&f, run, calls);
    json_t *open = json_array();
    ASSERT_OK(vg_journal_open_calls(f.store, FX_AGENT, open_cb, open, E));
    ASSERT_EQ((int64_t)json_array_size(open), 1);
    ASSERT_STREQ(json_string_value(json_array_get(open, 0)), calls[4]);
    json_decref(open);
    char dir[4300];
    snprintf(dir, sizeof dir, "%s.export", f.path);
    int64_t n = 0, added = -1, removed = 0;
    ASSERT_OK(vg_journal_export(f.store, dir, FX_AGENT, &n, E));
    ASSERT_EQ(n, 15);
    ASSERT_OK(vg_journal_import(f.store, dir, FX_AGENT, &added, E));
    ASSERT_EQ(added, 0);
    fx_open(&g, "jt_calls_import_to", 39);
    ASSERT_OK(vg_journal_import(g.store, dir, FX_AGENT, &added, E));
    ASSERT_EQ(added, 15);
    char *from = NULL, *to = NULL;
    ASSERT_OK(vg_journal_replay_projection(f.store, run_id, &from, E));
    ASSERT_OK(vg_journal_replay_projection(g.store, run_id, &to, E));
    ASSERT_STREQ(from, to);
    vg_free(from);
    vg_free(to);
    /* keep the newest activity: the 4 other model calls go (2 kept in messages), calls stay */
    ASSERT_OK(vg_journal_prune_activity(f.store, run_id, 1, &removed, E));
    ASSERT_EQ(removed, 4);
    ASSERT_OK(vg_journal_prune_activity(g.store, run_id, 1, &removed, E));
    ASSERT_EQ(removed, 4);
    int kept = 0;
    struct vg_query q = {.kind = "message", .owner = FX_AGENT, .k1 = THREAD, .k2 = "thought"};
    ASSERT_OK(vg_store_scan(f.store, &q, thought_cb, &kept, E));
    ASSERT_EQ(kept, 1); /* the newest, kept by pruning */
    ASSERT_OK(vg_journal_replay(f.store, run_id, &from, E));
    ASSERT_OK(vg_journal_replay(g.store, run_id, &to, E));
    ASSERT_CONTAINS(from, "\"stored_projection_matches\":true");
    ASSERT_STREQ(from, to);
    vg_free(from);
    vg_free(to);
    ASSERT_OK(vg_journal_export(f.store, dir, FX_AGENT, &n, E));
    ASSERT_EQ(n, 11);
    fx_close(&g);
    vg_journal_run_free(run);
    fx_close(&f);
}

TEST(model_calls_in_messages_prune_and_import_once)
{
    for (layout = 0; layout < 2; layout++) {
        thread_head[0] = '\0';
        model_calls_in_messages_prune_and_import_once_laid_out();
    }
}

static int copy_cb(void *user, const struct vg_record *r)
{
    ASSERT_OK(vg_store_put(user, r, 0, NULL, E));
    return 0;
}

/* A run's text as a reader gives it: its replay, its tool calls and its export file. */
static char *run_text(struct fx *f, const char *run_id, const char *dir)
{
    char *replay = NULL, *tools = NULL, *file = NULL, path[4300];
    size_t len = 0;
    int64_t n = 0;
    ASSERT_OK(vg_journal_replay(f->store, run_id, &replay, E));
    ASSERT_OK(vg_journal_run_tools(f->store, run_id, NULL, 0, &tools, E));
    ASSERT_OK(vg_journal_export(f->store, dir, FX_AGENT, &n, E));
    ASSERT_OK(vg_journal_path(dir, FX_AGENT, path, sizeof path, E));
    ASSERT_OK(vg_fs_read_file(path, (size_t)1 << 24, &file, &len, E));
    size_t size = strlen(replay) + strlen(tools) + len + 3;
    char *all = malloc(size);
    snprintf(all, size, "%s\n%s\n%s", replay, tools, file);
    vg_free(replay);
    vg_free(tools);
    vg_free(file);
    return all;
}

/* An agent moved to a new store (its messages first, then its journal: src/runtime/move.c): the
 * import rebuilds each run's record from a journal whose records its messages keep, before the
 * run record names the run's thread, and the moved run reads as it did. */
static void a_moved_run_is_rebuilt_with_the_records_its_messages_keep_laid_out(void)
{
    struct fx f, g;
    fx_open(&f, "jt_kept_move", 40);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    char run_id[37], calls[5][37];
    snprintf(run_id, sizeof run_id, "%s", vg_journal_run_id(run));
    write_model_calls(&f, run, calls);
    char dir[4300], dir2[4300];
    snprintf(dir, sizeof dir, "%s.export", f.path);
    int64_t n = 0, added = -1;
    ASSERT_OK(vg_journal_export(f.store, dir, FX_AGENT, &n, E));
    fx_open(&g, "jt_kept_move_to", 41);
    struct vg_query q = {.kind = "message", .owner = FX_AGENT, .k1 = THREAD};
    ASSERT_OK(vg_store_scan(f.store, &q, copy_cb, g.store, E));
    ASSERT_OK(vg_journal_import(g.store, dir, FX_AGENT, &added, E));
    ASSERT_EQ(added, 6); /* the rows; the 9 records the messages keep stay there */
    ASSERT_EQ(journal_rows(&g, run_id), 6);
    snprintf(dir2, sizeof dir2, "%s.export", g.path);
    char *from = run_text(&f, run_id, dir), *to = run_text(&g, run_id, dir2);
    ASSERT_CONTAINS(to, "\"record_count\":15");
    ASSERT_STREQ(from, to);
    free(from);
    free(to);
    ASSERT_OK(vg_journal_replay_projection(f.store, run_id, &from, E));
    ASSERT_OK(vg_journal_replay_projection(g.store, run_id, &to, E));
    ASSERT_STREQ(from, to);
    vg_free(from);
    vg_free(to);
    fx_close(&g);
    vg_journal_run_free(run);
    fx_close(&f);
}

TEST(a_moved_run_is_rebuilt_with_the_records_its_messages_keep)
{
    for (layout = 0; layout < 2; layout++) {
        thread_head[0] = '\0';
        a_moved_run_is_rebuilt_with_the_records_its_messages_keep_laid_out();
    }
}

int main(void)
{
    RUN(an_end_in_its_message_reads_as_its_row_did);
    RUN(ends_in_messages_close_calls_and_import_once);
    RUN(a_start_in_its_action_message_reads_as_its_row_did);
    RUN(starts_in_messages_stay_open_and_import_once);
    RUN(a_model_call_in_its_thought_message_reads_as_its_row_did);
    RUN(model_calls_in_messages_prune_and_import_once);
    RUN(a_moved_run_is_rebuilt_with_the_records_its_messages_keep);
    return 0;
}
