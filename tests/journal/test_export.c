/*
 * test_export.c: journals exported as newline-delimited JSON per owner and imported into a
 * fresh store replay to the same projection; importing twice adds nothing; a bad line refuses
 * the whole file with its line number and writes nothing; file paths encode ids so none can
 * leave the owner root.
 */
#include "journal/journal_fixture.h"

#include <jansson.h>

#include "os/fs.h"

static void make_runs(struct fx *f, char ids[2][37])
{
    for (int r = 0; r < 2; r++) {
        struct vg_run *run = fx_run(f, FX_AGENT, r ? "second" : "first");
        snprintf(ids[r], 37, "%s", vg_journal_run_id(run));
        struct vg_journal_message m = {.message_id = "m1",
                                       .source = "operator",
                                       .message_type = "chat",
                                       .payload_json = "\"hi\""};
        ASSERT_OK(vg_journal_message_accept(run, &m, NULL, E));
        ASSERT_OK(vg_journal_message_delivery(run, "m1", "delivered", "model", NULL, E));
        for (int i = 0; i < 4; i++) {
            struct vg_journal_activity a = {.progress_json = "{\"summary\":\"working\"}"};
            ASSERT_OK(vg_journal_activity(run, &a, E));
        }
        char tool[37];
        ASSERT_OK(vg_journal_tool_call_started(run, "grep", "op", "{\"q\":\"x\"}", tool, E));
        ASSERT_OK(vg_journal_tool_call_finished(run, tool, "succeeded", "[1,2]", NULL, 4, E));
        struct vg_journal_observation o = {.observation_id = "o1",
                                           .source = "daemon",
                                           .confidence = "medium",
                                           .signal_json =
                                               "{\"type\":\"status\",\"status\":\"ok\"}"};
        ASSERT_OK(vg_journal_observe(run, &o, NULL, E));
        if (r == 0)
            ASSERT_OK(vg_journal_run_close(run, VG_RUN_COMPLETED, "fine", NULL, E));
        vg_journal_run_free(run);
        vg_test_clock_advance(&f->clock, 500);
    }
}

static char *read_export(const char *folder)
{
    char path[4400];
    char *data = NULL;
    size_t len = 0;
    ASSERT_OK(vg_journal_path(folder, FX_AGENT, path, sizeof path, E));
    ASSERT_OK(vg_fs_read_file(path, 1 << 26, &data, &len, E));
    return data;
}

TEST(export_import_replay)
{
    /* proves: S1-009 S1-008 S1-038 */
    struct fx a, b;
    fx_open(&a, "je_src", 21);
    char ids[2][37];
    make_runs(&a, ids);
    char folder[4300];
    snprintf(folder, sizeof folder, "%s/export", vg_test_tmpdir("je_out"));
    int64_t lines = 0;
    ASSERT_OK(vg_journal_export(a.store, folder, FX_AGENT, &lines, E));
    ASSERT_EQ(lines, fx_count(a.store, "journal", NULL));
    char expect[4400];
    snprintf(expect, sizeof expect, "%s/agent-journals/%s.interaction.jsonl", folder, FX_AGENT);
    ASSERT(vg_fs_exists(expect));
    /* one line per record, runs in order, each in sequence order */
    char *data = read_export(folder);
    json_t *first = json_loadb(data, strchr(data, '\n') - data, 0, NULL);
    ASSERT_STREQ(json_string_value(json_object_get(first, "type")), "journal.header");
    ASSERT_STREQ(json_string_value(json_object_get(first, "run_id")), ids[0]);
    json_decref(first);

    fx_open(&b, "je_dst", 22);
    int64_t added = 0;
    ASSERT_OK(vg_journal_import(b.store, folder, FX_AGENT, &added, E));
    ASSERT_EQ(added, lines);
    for (int r = 0; r < 2; r++) {
        char *pa = NULL, *pb = NULL, *full = NULL;
        ASSERT_OK(vg_journal_replay_projection(a.store, ids[r], &pa, E));
        ASSERT_OK(vg_journal_replay_projection(b.store, ids[r], &pb, E));
        ASSERT_STREQ(pb, pa);
        ASSERT_OK(vg_journal_replay(b.store, ids[r], &full, E));
        ASSERT_CONTAINS(full, "\"stored_projection_matches\":true");
        vg_free(pa);
        vg_free(pb);
        vg_free(full);
    }
    /* history works on the imported store */
    char *t = NULL;
    ASSERT_OK(vg_journal_run_show(b.store, ids[0], &t, E));
    ASSERT_CONTAINS(t, "\"status\":\"completed\"");
    ASSERT_CONTAINS(t, "\"tool_calls\":1");
    vg_free(t);
    ASSERT_OK(vg_journal_runs_list(b.store, FX_AGENT, "running", NULL, 0, &t, E));
    ASSERT_CONTAINS(t, ids[1]);
    vg_free(t);
    ASSERT_OK(vg_journal_run_tools(b.store, ids[1], NULL, 0, &t, E));
    ASSERT_CONTAINS(t, "\"output_preview\":\"[1,2]\"");
    vg_free(t);
    /* idempotent: twice adds nothing, and nothing into the source either */
    ASSERT_OK(vg_journal_import(b.store, folder, FX_AGENT, &added, E));
    ASSERT_EQ(added, 0);
    ASSERT_EQ(fx_count(b.store, "journal", NULL), lines);
    ASSERT_OK(vg_journal_import(a.store, folder, FX_AGENT, &added, E));
    ASSERT_EQ(added, 0);
    /* a duplicate observation after import is still acknowledged */
    struct vg_run *run = NULL;
    ASSERT_OK(vg_journal_run_attach(b.store, &b.clock.base, b.ids, ids[1], &run, E));
    struct vg_journal_observation o = {
        .observation_id = "o1", .source = "daemon", .confidence = "medium"};
    struct vg_journal_ack ack = {0};
    ASSERT_OK(vg_journal_observe(run, &o, &ack, E));
    ASSERT_EQ(ack.duplicate, 1);
    vg_journal_run_free(run);
    vg_free(data);
    fx_close(&a);
    fx_close(&b);
}

TEST(pruned_export_imports)
{
    /* proves: S1-036 S1-009 */
    struct fx a, b;
    fx_open(&a, "je_pruned", 23);
    char ids[2][37];
    make_runs(&a, ids);
    int64_t removed = 0;
    ASSERT_OK(vg_journal_prune_activity(a.store, ids[0], 1, &removed, E));
    ASSERT(removed > 0);
    char folder[4300];
    snprintf(folder, sizeof folder, "%s", vg_test_tmpdir("je_pruned_out"));
    ASSERT_OK(vg_journal_export(a.store, folder, FX_AGENT, NULL, E));
    fx_open(&b, "je_pruned_dst", 24);
    ASSERT_OK(vg_journal_import(b.store, folder, FX_AGENT, NULL, E));
    char *pa = NULL, *pb = NULL;
    ASSERT_OK(vg_journal_stored_projection(a.store, ids[0], &pa, E));
    ASSERT_OK(vg_journal_replay_projection(b.store, ids[0], &pb, E));
    ASSERT_STREQ(pb, pa);
    vg_free(pa);
    vg_free(pb);
    fx_close(&a);
    fx_close(&b);
}

/* Replace line n (1-based) of text with repl; returns an owned copy. */
static char *with_line(const char *text, int n, const char *repl)
{
    size_t cap = strlen(text) + strlen(repl) + 2;
    char *out = vg_malloc(cap);
    size_t o = 0;
    int line = 1;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (line == n) {
            memcpy(out + o, repl, strlen(repl));
            o += strlen(repl);
        } else {
            memcpy(out + o, p, len);
            o += len;
        }
        if (nl && !(line == n && !*repl)) /* an empty repl drops the line */
            out[o++] = '\n';
        p += len + (nl ? 1 : 0);
        line++;
    }
    out[o] = '\0';
    return out;
}

static void refused(struct vg_store *s, const char *text, const char *want)
{
    vigil_error e = {0};
    int64_t added = -1;
    vigil_code rc = vg_journal_import_text(s, text, strlen(text), FX_AGENT, &added, &e);
    if (rc == VIGIL_OK)
        TEST_FAIL_("accepted a bad file (want %s)", want);
    ASSERT_CONTAINS(e.message, want);
    ASSERT_EQ(added, -1);
    ASSERT_EQ(fx_count(s, "journal", NULL), 0);
    ASSERT_EQ(fx_count(s, "run", NULL), 0);
}

TEST(bad_file_refused_whole)
{
    /* proves: S1-039 S1-010 */
    struct fx a, b;
    fx_open(&a, "je_bad_src", 25);
    char ids[2][37];
    make_runs(&a, ids);
    char folder[4300];
    snprintf(folder, sizeof folder, "%s", vg_test_tmpdir("je_bad_out"));
    ASSERT_OK(vg_journal_export(a.store, folder, FX_AGENT, NULL, E));
    char *data = read_export(folder);
    fx_open(&b, "je_bad_dst", 26);

    /* an unknown record type on line 5 */
    const char *p = data;
    for (int i = 1; i < 5; i++)
        p = strchr(p, '\n') + 1;
    char *bad = vg_strndup(p, (size_t)(strchr(p, '\n') - p));
    char *q = strstr(bad, "\"type\":\"activity.updated\"");
    ASSERT(q);
    memcpy(q + 8, "activity.updatex", 16);
    char *t = with_line(data, 5, bad);
    refused(b.store, t, "line 5: unknown journal record type");
    vg_free(t);
    vg_free(bad);
    t = with_line(data, 3, "{\"broken\":");
    refused(b.store, t, "line 3: not JSON");
    vg_free(t);
    t = with_line(data, 1, ""); /* header dropped */
    refused(b.store, t, "line 1: run");
    vg_free(t);
    /* a duplicated line */
    size_t l1 = strchr(data, '\n') - data;
    char *dup = vg_malloc(strlen(data) + l1 + 2);
    memcpy(dup, data, l1 + 1);
    memcpy(dup + l1 + 1, data, strlen(data) + 1);
    refused(b.store, dup, "line 2:");
    vg_free(dup);
    /* empty line in the middle */
    char *withgap = vg_malloc(strlen(data) + 2);
    memcpy(withgap, data, l1 + 1);
    withgap[l1 + 1] = '\n';
    memcpy(withgap + l1 + 2, data + l1 + 1, strlen(data) - l1);
    refused(b.store, withgap, "line 2: empty line");
    vg_free(withgap);
    /* the file's owner must be the requested one */
    vigil_error e = {0};
    ASSERT_CODE(VIGIL_EINVAL,
                vg_journal_import_text(b.store, data, strlen(data),
                                       "0190aaaa-0000-7000-8000-00000000beef", NULL, &e));
    ASSERT_CONTAINS(e.message, "line 1: owner");
    ASSERT_EQ(fx_count(b.store, "journal", NULL), 0);
    /* the whole file still imports */
    ASSERT_OK(vg_journal_import_text(b.store, data, strlen(data), FX_AGENT, NULL, E));
    vg_free(data);

    /* ids never escape the owner root */
    char path[4400];
    ASSERT_OK(vg_journal_path("/r", "../../etc/passwd", path, sizeof path, E));
    ASSERT_STREQ(path, "/r/agent-journals/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd.interaction.jsonl");
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_path("/r", "", path, sizeof path, NULL));
    fx_close(&a);
    fx_close(&b);
}

/* The run's tool calls as their readers give them: the page, then each call in full. */
static char *calls_read(struct vg_store *s, const char *run_id)
{
    char *page = NULL, *one = NULL;
    ASSERT_OK(vg_journal_run_tools(s, run_id, NULL, 0, &page, E));
    json_t *p = json_loads(page, 0, NULL), *it;
    json_t *all = json_pack("[s]", page);
    vg_free(page);
    size_t i;
    json_array_foreach (json_object_get(p, "items"), i, it) {
        ASSERT_OK(vg_journal_run_tool(s, json_string_value(json_object_get(it, "tool_call_id")),
                                      &one, E));
        json_array_append_new(all, json_string(one));
        vg_free(one);
    }
    ASSERT_EQ((int64_t)json_array_size(all), 2);
    char *text = json_dumps(all, JSON_COMPACT);
    json_decref(p);
    json_decref(all);
    return text;
}

/* Imported, a run's tool calls read as in the store it came from: from the records when the
 * calls were exported as records only (no row written), from rows when the file came from a
 * version that wrote a row per call (a start record with an id of its own). */
TEST(imported_tool_calls_read_the_same)
{
    struct fx a, b, c;
    fx_open(&a, "je_calls_src", 31);
    char ids[2][37];
    make_runs(&a, ids);
    char folder[4300];
    snprintf(folder, sizeof folder, "%s/export", vg_test_tmpdir("je_calls_out"));
    ASSERT_OK(vg_journal_export(a.store, folder, FX_AGENT, NULL, E));
    char *want = calls_read(a.store, ids[1]);
    fx_open(&b, "je_calls_dst", 32);
    ASSERT_OK(vg_journal_import(b.store, folder, FX_AGENT, NULL, E));
    ASSERT_EQ(fx_count(b.store, "run_tool_call", NULL), 0);
    char *got = calls_read(b.store, ids[1]);
    ASSERT_STREQ(got, want);
    free(got);
    /* As exported by a version that wrote rows: each start record's id is not its call's. */
    char *data = read_export(folder);
    int changed = 0;
    for (char *line = data; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        char *end = strchr(line, '\n'), *rid = strstr(line, "\"record_id\":\"");
        char *start = strstr(line, "\"status\":\"running\",\"tool_call_id\"");
        if (!end || !rid || !start || start > end || rid > end || !strstr(line, "\"tool_call\":{"))
            continue;
        char *last = rid + strlen("\"record_id\":\"") + 35; /* the id's last character */
        *last = *last == 'f' ? 'e' : 'f';
        changed++;
    }
    ASSERT_EQ(changed, 2);
    fx_open(&c, "je_calls_old", 33);
    ASSERT_OK(vg_journal_import_text(c.store, data, strlen(data), FX_AGENT, NULL, E));
    ASSERT_EQ(fx_count(c.store, "run_tool_call", NULL), 2);
    got = calls_read(c.store, ids[1]);
    ASSERT_STREQ(got, want);
    free(got);
    free(want);
    vg_free(data);
    fx_close(&a);
    fx_close(&b);
    fx_close(&c);
}

int main(void)
{
    RUN(export_import_replay);
    RUN(pruned_export_imports);
    RUN(bad_file_refused_whole);
    RUN(imported_tool_calls_read_the_same);
    return 0;
}
