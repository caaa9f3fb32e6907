/*
 * test_tool_calls.c: a run's tool calls are read from its journal records (src/journal/
 * tool_calls.c). No row of kind run_tool_call is written; every reader (the tool-call page and
 * its cursor, one call in full, a run's counts, a running run's follow, recovery's open calls)
 * gives byte for byte what it gave when a row per call was stored, and a run of a store written
 * then (its rows present) is read from its rows.
 */
#include "journal/journal_fixture.h"

#include <jansson.h>

/* What the readers give of a run: each reader's text, in a fixed order. */
struct reads {
    char *text[12];
    int n;
};

static void read_add(struct reads *r, char *text)
{
    ASSERT(r->n < (int)VG_ARRAY_LEN(r->text));
    r->text[r->n++] = text;
}

static void read_all(struct vg_store *s, const char *run_id, const char *const *calls,
                     size_t n_calls, struct reads *r)
{
    char *text = NULL;
    memset(r, 0, sizeof *r);
    ASSERT_OK(vg_journal_run_tools(s, run_id, NULL, 0, &text, E));
    read_add(r, text);
    ASSERT_OK(vg_journal_run_tools(s, run_id, NULL, 2, &text, E));
    json_t *page = json_loads(text, 0, NULL);
    read_add(r, text);
    const char *next = json_string_value(json_object_get(page, "next_cursor"));
    ASSERT(next);
    ASSERT_OK(vg_journal_run_tools(s, run_id, next, 2, &text, E));
    read_add(r, text);
    json_decref(page);
    for (size_t i = 0; i < n_calls; i++) {
        ASSERT_OK(vg_journal_run_tool(s, calls[i], &text, E));
        read_add(r, text);
    }
    ASSERT_OK(vg_journal_run_show(s, run_id, &text, E));
    read_add(r, text);
    ASSERT_OK(vg_journal_run_follow(s, run_id, (int64_t[2]){0, 0}, 50, &text, E));
    read_add(r, text);
    ASSERT_OK(vg_journal_run_follow(s, run_id, (int64_t[2]){0, 4}, 1, &text, E));
    read_add(r, text);
}

static void reads_release(struct reads *r)
{
    for (int i = 0; i < r->n; i++)
        vg_free(r->text[i]);
}

/* The rows a version before Session 29 stored (journal.c's put_call_row then), made here from
 * the journal records: the start's fields, the end's status, error, duration, time and
 * sequence; a finished call's output left in its end record, a running one's null. */
static int old_row_cb(void *user, const struct vg_record *r)
{
    json_t *rows = user, *rec = json_loads(r->body, 0, NULL);
    const json_t *tc = json_object_get(rec, "tool_call");
    const char *id = json_string_value(json_object_get(tc, "tool_call_id"));
    if (!id) {
        json_decref(rec);
        return 0;
    }
    int start = !strcmp(json_string_value(json_object_get(tc, "status")), "running");
    json_t *row = json_object_get(rows, id);
    if (!row) {
        row =
            json_pack("{s:s,s:O,s:O,s:s,s:O?,s:O?,s:n,s:n,s:n,s:n,s:n,s:n,s:n}", "tool_call_id", id,
                      "run_id", json_object_get(rec, "run_id"), "name", json_object_get(tc, "name"),
                      "status", "running", "input", json_object_get(tc, "input"), "operation_id",
                      json_object_get(tc, "operation_id"), "output", "error_code", "duration_ms",
                      "started_at", "ended_at", "started_sequence", "finished_sequence");
        json_object_set_new(rows, id, row);
    }
    json_object_set(row, start ? "started_at" : "ended_at", json_object_get(rec, "occurred_at"));
    json_object_set(row, start ? "started_sequence" : "finished_sequence",
                    json_object_get(rec, "sequence"));
    if (!start) {
        json_object_set(row, "status", json_object_get(tc, "status"));
        json_object_set(row, "duration_ms", json_object_get(tc, "duration_ms"));
        if (json_object_get(tc, "error_code"))
            json_object_set(row, "error_code", json_object_get(tc, "error_code"));
        json_object_del(row, "output");
    }
    json_decref(rec);
    return 0;
}

static void put_old_rows(struct vg_store *s, const char *run_id)
{
    json_t *rows = json_object(), *row;
    struct vg_query q = {.kind = "journal", .owner = FX_AGENT, .k1 = run_id};
    ASSERT_OK(vg_store_scan(s, &q, old_row_cb, rows, E));
    const char *id;
    json_object_foreach (rows, id, row) {
        char *text = json_dumps(row, JSON_COMPACT | JSON_SORT_KEYS);
        struct vg_record r = {.kind = "run_tool_call",
                              .id = id,
                              .owner = FX_AGENT,
                              .k1 = run_id,
                              .k2 = json_string_value(json_object_get(row, "status")),
                              .seq = json_integer_value(json_object_get(row, "started_sequence")),
                              .body = text};
        ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
        free(text);
    }
    json_decref(rows);
}

/* Calls that overlap, fail, finish through another handle and stay running. */
static void write_calls(struct fx *f, struct vg_run *run, char calls[4][37])
{
    ASSERT_OK(vg_journal_tool_call_started(run, "add", "op-1", "{\"a\":1}", calls[0], E));
    vg_test_clock_advance(&f->clock, 2);
    ASSERT_OK(vg_journal_tool_call_started(run, "fetch", NULL, "[\"x\"]", calls[1], E));
    vg_test_clock_advance(&f->clock, 3);
    ASSERT_OK(vg_journal_tool_call_finished(run, calls[1], "failed", "\"boom\"", "E_X", 3, E));
    struct vg_run *other = NULL;
    ASSERT_OK(
        vg_journal_run_attach(f->store, &f->clock.base, f->ids, vg_journal_run_id(run), &other, E));
    ASSERT_OK(vg_journal_tool_call_finished(other, calls[0], "succeeded", "{\"r\":2}", NULL, 5, E));
    vg_journal_run_free(other);
    ASSERT_OK(vg_journal_run_reload(run, E));
    vg_test_clock_advance(&f->clock, 1);
    ASSERT_OK(vg_journal_tool_call_started(run, "echo", NULL, "{}", calls[2], E));
    ASSERT_OK(vg_journal_tool_call_finished(run, calls[2], "succeeded", "\"hi\"", NULL, 0, E));
    ASSERT_OK(vg_journal_tool_call_started(run, "slow", "op-4", "{}", calls[3], E));
}

TEST(calls_read_from_records_read_as_their_rows_did)
{
    struct fx f;
    fx_open(&f, "jt_calls_rows", 21);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    char run_id[37], calls[4][37];
    snprintf(run_id, sizeof run_id, "%s", vg_journal_run_id(run));
    write_calls(&f, run, calls);
    ASSERT_EQ(fx_count(f.store, "run_tool_call", NULL), 0); /* no row per call */
    const char *ids[] = {calls[0], calls[1], calls[2], calls[3]};
    struct reads from_records, from_rows;
    read_all(f.store, run_id, ids, 4, &from_records);
    ASSERT_CONTAINS(from_records.text[0], "\"output_preview\":\"boom\"");
    ASSERT_CONTAINS(from_records.text[3], "\"output\":{\"r\":2}");
    ASSERT_CONTAINS(from_records.text[7], "\"tool_calls\":4");
    put_old_rows(f.store, run_id);
    ASSERT_EQ(fx_count(f.store, "run_tool_call", NULL), 4);
    read_all(f.store, run_id, ids, 4, &from_rows);
    ASSERT_EQ(from_rows.n, from_records.n);
    for (int i = 0; i < from_rows.n; i++)
        ASSERT_STREQ(from_records.text[i], from_rows.text[i]);
    reads_release(&from_records);
    reads_release(&from_rows);
    vg_journal_run_free(run);
    fx_close(&f);
}

/* Every page of the run's calls, limit a page, one after the other. */
static char *all_pages(struct vg_store *s, const char *run_id, int limit)
{
    json_t *pages = json_array();
    char *cursor = NULL;
    do {
        char *text = NULL;
        ASSERT_OK(vg_journal_run_tools(s, run_id, cursor, limit, &text, E));
        json_t *page = json_loads(text, 0, NULL);
        vg_free(text);
        ASSERT(json_array_size(json_object_get(page, "items")) > 0);
        free(cursor);
        const char *next = json_string_value(json_object_get(page, "next_cursor"));
        cursor = next ? strdup(next) : NULL;
        json_array_append_new(pages, page);
    } while (cursor);
    char *all = json_dumps(pages, JSON_COMPACT);
    json_decref(pages);
    return all;
}

/* A long run's calls, paged through, as its rows paged: a page reads on only until one more call
 * has started and the page's have ended. */
TEST(a_long_run_pages_as_its_rows_did)
{
    struct fx f;
    fx_open(&f, "jt_calls_pages", 24);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    char run_id[37], a[37], b[37];
    snprintf(run_id, sizeof run_id, "%s", vg_journal_run_id(run));
    for (int i = 0; i < 15; i++) { /* two at a time, ending in the other order */
        ASSERT_OK(vg_journal_tool_call_started(run, "one", NULL, "{}", a, E));
        ASSERT_OK(vg_journal_tool_call_started(run, "two", NULL, "{}", b, E));
        vg_test_clock_advance(&f.clock, 1);
        ASSERT_OK(vg_journal_tool_call_finished(run, b, "succeeded", "1", NULL, 1, E));
        ASSERT_OK(vg_journal_tool_call_finished(run, a, "failed", "2", "E", 1, E));
    }
    ASSERT_OK(vg_journal_tool_call_started(run, "last", NULL, "{}", a, E));
    char *from_records[3], *from_rows[3];
    const int limits[] = {1, 4, 31};
    for (int i = 0; i < 3; i++)
        from_records[i] = all_pages(f.store, run_id, limits[i]);
    ASSERT_CONTAINS(from_records[0], "\"name\":\"last\"");
    put_old_rows(f.store, run_id);
    for (int i = 0; i < 3; i++) {
        from_rows[i] = all_pages(f.store, run_id, limits[i]);
        ASSERT_STREQ(from_records[i], from_rows[i]);
        free(from_records[i]);
        free(from_rows[i]);
    }
    vg_journal_run_free(run);
    fx_close(&f);
}

static int open_cb(void *user, const char *id, const char *run_id, const char *op)
{
    json_t *open = user;
    json_array_append_new(open, json_pack("[s,s,s?]", id, run_id, op));
    return 0;
}

/* Recovery's calls still running: a running run's starts without an end, also those of a row
 * a store written before holds, each once. */
TEST(open_calls_are_the_starts_without_an_end)
{
    struct fx f;
    fx_open(&f, "jt_calls_open", 22);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    char run_id[37], calls[4][37];
    snprintf(run_id, sizeof run_id, "%s", vg_journal_run_id(run));
    write_calls(&f, run, calls);
    json_t *open = json_array();
    ASSERT_OK(vg_journal_open_calls(f.store, FX_AGENT, open_cb, open, E));
    ASSERT_EQ((int64_t)json_array_size(open), 1);
    json_t *one = json_array_get(open, 0);
    ASSERT_STREQ(json_string_value(json_array_get(one, 0)), calls[3]);
    ASSERT_STREQ(json_string_value(json_array_get(one, 1)), run_id);
    ASSERT_STREQ(json_string_value(json_array_get(one, 2)), "op-4");
    json_array_clear(open);
    put_old_rows(f.store, run_id); /* the run as a store written before holds it */
    ASSERT_OK(vg_journal_open_calls(f.store, FX_AGENT, open_cb, open, E));
    ASSERT_EQ((int64_t)json_array_size(open), 1);
    /* Closing it (recovery does, from a handle of its own) finishes its row too, and then
     * nothing is open. */
    struct vg_run *closer = NULL;
    ASSERT_OK(vg_journal_run_attach(f.store, &f.clock.base, f.ids, run_id, &closer, E));
    ASSERT_OK(vg_journal_tool_call_finished(closer, calls[3], "crashed", "{}", NULL, 0, E));
    vg_journal_run_free(closer);
    json_array_clear(open);
    ASSERT_OK(vg_journal_open_calls(f.store, FX_AGENT, open_cb, open, E));
    ASSERT_EQ((int64_t)json_array_size(open), 0);
    char *text = NULL;
    ASSERT_OK(vg_journal_run_tool(f.store, calls[3], &text, E));
    ASSERT_CONTAINS(text, "\"status\":\"crashed\"");
    vg_free(text);
    /* A call finished is not finished again, by any handle. */
    vigil_error e = {0};
    ASSERT_CODE(VIGIL_ESTATE,
                vg_journal_tool_call_finished(run, calls[0], "failed", NULL, NULL, 0, &e));
    json_decref(open);
    vg_journal_run_free(run);
    fx_close(&f);
}

/* A call's id names its start record; another record's id, or an unknown one, is no call. */
TEST(a_call_is_found_by_its_start_records_id)
{
    struct fx f;
    fx_open(&f, "jt_calls_find", 23);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k");
    char call[37];
    ASSERT_OK(vg_journal_tool_call_started(run, "add", NULL, "{}", call, E));
    struct vg_record *rec = NULL;
    ASSERT_OK(vg_store_get_copy(f.store, "journal", call, &rec, E));
    ASSERT_CONTAINS(rec->body, "\"running\"");
    vg_free(rec);
    ASSERT_OK(vg_journal_tool_call_finished(run, call, "succeeded", "1", NULL, 1, E));
    char *text = NULL;
    vigil_error e = {0};
    ASSERT_CODE(VIGIL_ENOTFOUND,
                vg_journal_run_tool(f.store, "01a1ee56-5e00-7238-b4bd-dd0ddbb73e89", &text, &e));
    ASSERT_CONTAINS(e.message, "not found");
    /* The run's header record is a journal record but no call. */
    struct vg_query q = {.kind = "journal", .owner = FX_AGENT, .k1 = vg_journal_run_id(run)};
    struct vg_id_list ids = {0};
    ASSERT_OK(vg_store_scan_ids(f.store, &q, &ids, E));
    ASSERT(ids.n >= 3);
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_journal_run_tool(f.store, ids.ids[0], &text, &e));
    ASSERT_CODE(VIGIL_ENOTFOUND,
                vg_journal_tool_call_finished(run, ids.ids[0], "failed", NULL, NULL, 0, &e));
    vg_id_list_release(&ids);
    vg_journal_run_free(run);
    fx_close(&f);
}

int main(void)
{
    RUN(calls_read_from_records_read_as_their_rows_did);
    RUN(a_long_run_pages_as_its_rows_did);
    RUN(open_calls_are_the_starts_without_an_end);
    RUN(a_call_is_found_by_its_start_records_id);
    return 0;
}
