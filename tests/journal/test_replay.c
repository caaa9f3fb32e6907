/*
 * test_replay.c: replay rebuilds a run from its records alone. Same records give a byte-
 * identical projection (twice in one process, in a second store built from the same inputs,
 * and in another process), the live projection stored with each append equals the replayed
 * one, pruning old activity.updated records changes nothing replay reports, live run state is
 * not consulted, a damaged journal (a gap, a bad record) is refused whole, and a run whose
 * records are stored in the full form of stores written before the packed one (store/body.h)
 * replays the same.
 */
#include "journal/journal_fixture.h"

#include "base/buf.h"
#include "journal/journal_int.h"

#include <jansson.h>
#include <sys/wait.h>
#include <unistd.h>

#include "os/fs.h"
#include "store/sqlite/key.h"

#include <sqlite3.h>

/* A run with every write path; n_noise activity updates spread through it. */
static char *build_run(struct fx *f, int n_noise)
{
    static char id[37];
    struct vg_run *run = fx_run(f, FX_AGENT, "replay-key");
    snprintf(id, sizeof id, "%s", vg_journal_run_id(run));
    struct vg_journal_message m = {.message_id = "m1",
                                   .source = "daemon",
                                   .message_type = "wake-delta",
                                   .payload_json = "{\"changed\":[\"task-1\"]}"};
    ASSERT_OK(vg_journal_message_accept(run, &m, NULL, E));
    ASSERT_OK(vg_journal_message_delivery(run, "m1", "delivered", "model", NULL, E));
    for (int i = 0; i < n_noise; i++) {
        vg_test_clock_advance(&f->clock, 7);
        char prog[80];
        snprintf(prog, sizeof prog, "{\"summary\":\"tick %d\"}", i);
        struct vg_journal_activity a = {.progress_json = prog, .active_tool_name = "shell"};
        ASSERT_OK(vg_journal_activity(run, &a, E));
        if (i % 5 == 0) {
            char oid[32], sig[128];
            snprintf(oid, sizeof oid, "o%d", i);
            snprintf(sig, sizeof sig, "{\"type\":\"progress\",\"summary\":\"at %d\"}", i);
            struct vg_journal_observation o = {
                .observation_id = oid, .source = "sdk", .confidence = "high", .signal_json = sig};
            ASSERT_OK(vg_journal_observe(run, &o, NULL, E));
            struct vg_journal_decision d = {.observation_id = oid, .action = "emit-message"};
            ASSERT_OK(vg_journal_decide(run, &d, E));
        }
    }
    struct vg_model_call_trace t = {.provider = "p",
                                    .model = "m",
                                    .latency_ms = 5,
                                    .input_tokens = 9,
                                    .output_tokens = 4,
                                    .attempts = 2};
    ASSERT_OK(vg_journal_model_call(run, &t, E));
    ASSERT_OK(vg_journal_await_input(run, "req-9", E));
    struct vg_journal_observation o = {.observation_id = "say",
                                       .source = "provider-output",
                                       .confidence = "authoritative",
                                       .signal_json =
                                           "{\"type\":\"message\",\"text\":\"which file?\"}"};
    ASSERT_OK(vg_journal_observe(run, &o, NULL, E));
    ASSERT_OK(vg_journal_run_close(run, VG_RUN_INTERRUPTED, NULL, "operator away", E));
    vg_journal_run_free(run);
    return id;
}

static char *projection_text(struct vg_store *s, const char *id)
{
    char *p = NULL;
    ASSERT_OK(vg_journal_replay_projection(s, id, &p, E));
    return p;
}

/* A valid payload of every signal, by name. */
static const char *const SIGNAL_PAYLOADS[][2] = {
    {"progress", "\"summary\":\"half way\""},
    {"status", "\"status\":\"compiling\""},
    {"needs_input", "\"request_id\":\"q1\",\"question\":\"which?\""},
    {"blocked", "\"reason\":\"no access\""},
    {"ready_for_verification", "\"summary\":\"ready\""},
    {"completed_claim", "\"summary\":\"done\""},
    {"failed_claim", "\"reason\":\"broke\""},
    {"message", "\"text\":\"hi\""},
    {"usage", "\"input_tokens\":10"},
    {"diagnostic", "\"message\":\"m\""},
};

static const char *signal_payload(const char *name)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(SIGNAL_PAYLOADS); i++)
        if (!strcmp(SIGNAL_PAYLOADS[i][0], name))
            return SIGNAL_PAYLOADS[i][1];
    TEST_FAIL_("no payload for signal %s", name);
    return NULL;
}

/* A copy of the first record a scan gives (into *(struct vg_record **)user). */
static int first_record_cb(void *user, const struct vg_record *r)
{
    *(struct vg_record **)user = vg_record_dup(r);
    return 1;
}

/* The timeline item replay made of the observation of signal `name` (NULL: none). */
static json_t *signal_item(json_t *timeline, const char *name)
{
    for (size_t i = 0; i < json_array_size(timeline); i++) {
        json_t *it = json_array_get(timeline, i);
        const char *sig = json_string_value(json_object_get(it, "signal"));
        if (sig && !strcmp(sig, name))
            return it;
    }
    return NULL;
}

/* Whether the header's protocol descriptor lists signal `name`, and with which schema key. */
static const char *described(json_t *header_descriptor, const char *name)
{
    json_t *sigs = json_object_get(header_descriptor, "signals");
    for (size_t i = 0; i < json_array_size(sigs); i++) {
        json_t *s = json_array_get(sigs, i);
        if (!strcmp(json_string_value(json_object_get(s, "type")), name))
            return json_string_value(json_object_get(s, "schema"));
    }
    return NULL;
}

/* Replay, the protocol descriptor and validation all read the one signal registry: for every
 * row of it, an observation of that signal replays to the timeline item the row names, quoting
 * the payload field the row names (or to none), and the header describes the signal, with the
 * row's schema key, exactly when the row surfaces it. proves: S1-021 */
TEST(signals_project_through_their_registry_row)
{
    struct fx f;
    fx_open(&f, "jr_signals", 21);
    struct vg_run *run = fx_run(&f, FX_AGENT, "signals-key");
    char id[37];
    snprintf(id, sizeof id, "%s", vg_journal_run_id(run));
    size_t n = vg_journal_signal_count();
    ASSERT_EQ(n, VG_ARRAY_LEN(SIGNAL_PAYLOADS));
    for (size_t i = 0; i < n; i++) {
        char oid[32], sig[256];
        snprintf(oid, sizeof oid, "o-%zu", i);
        snprintf(sig, sizeof sig, "{\"type\":\"%s\",%s}", vg_journal_signal_name(i),
                 signal_payload(vg_journal_signal_name(i)));
        struct vg_journal_observation o = {
            .observation_id = oid, .source = "sdk", .confidence = "high", .signal_json = sig};
        ASSERT_OK(vg_journal_observe(run, &o, NULL, E));
    }
    vg_journal_run_free(run);
    char *text = NULL;
    ASSERT_OK(vg_journal_replay(f.store, id, &text, E));
    json_t *replay = json_loads(text, 0, NULL);
    ASSERT(replay != NULL);
    json_t *timeline = json_object_get(replay, "timeline");
    struct vg_query hq = {.kind = "journal", .owner = FX_AGENT, .k1 = id, .limit = 1};
    struct vg_record *hr = NULL;
    ASSERT_OK(vg_store_scan(f.store, &hq, first_record_cb, &hr, E));
    ASSERT(hr != NULL);
    json_t *header = json_loads(hr->body, 0, NULL);
    ASSERT(header != NULL);
    json_t *descriptor = json_object_get(header, "protocol_descriptor");
    for (size_t i = 0; i < n; i++) {
        const char *name = vg_journal_signal_name(i);
        const struct jsignal *row = vg_journal_signal_find(name);
        ASSERT(row != NULL);
        const char *item_kind = vg_journal_projection_item(row->projection);
        json_t *it = signal_item(timeline, name);
        if (!item_kind) {
            ASSERT(it == NULL);
        } else {
            ASSERT(it != NULL);
            ASSERT_STREQ(json_string_value(json_object_get(it, "item")), item_kind);
            char want[256];
            snprintf(want, sizeof want, "{%s}", signal_payload(name));
            json_t *fields = json_loads(want, 0, NULL);
            ASSERT(fields != NULL);
            ASSERT(
                json_equal(json_object_get(it, "text"), json_object_get(fields, row->text_field)));
            json_decref(fields);
        }
        const char *key = described(descriptor, name);
        ASSERT_EQ(key != NULL, row->surfaced);
        if (key)
            ASSERT_STREQ(key, row->schema_key);
    }
    json_decref(header);
    vg_free(hr);
    json_decref(replay);
    vg_free(text);
    fx_close(&f);
}

TEST(deterministic)
{
    /* proves: S1-038 S1-002 */
    struct fx a, b;
    fx_open(&a, "jr_det_a", 42);
    char id[37];
    snprintf(id, sizeof id, "%s", build_run(&a, 30));
    char *p1 = projection_text(a.store, id), *p2 = projection_text(a.store, id);
    ASSERT_STREQ(p1, p2);
    char *stored = NULL;
    ASSERT_OK(vg_journal_stored_projection(a.store, id, &stored, E));
    ASSERT_STREQ(stored, p1);
    /* the same inputs in another store give the same bytes */
    fx_open(&b, "jr_det_b", 42);
    ASSERT_STREQ(build_run(&b, 30), id);
    char *p3 = projection_text(b.store, id);
    ASSERT_STREQ(p3, p1);
    /* and in another process */
    char out[4300];
    snprintf(out, sizeof out, "%s.child", a.path);
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        struct vg_store *s = NULL;
        struct vg_store_options o = {.read_only = 1};
        char *p = NULL;
        if (vg_store_open(a.path, &o, &s, NULL) || vg_journal_replay_projection(s, id, &p, NULL) ||
            vg_fs_write_file(out, p, strlen(p), NULL))
            _exit(1);
        _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char *child = NULL;
    size_t len = 0;
    ASSERT_OK(vg_fs_read_file(out, 1 << 24, &child, &len, E));
    ASSERT_STREQ(child, p1);
    /* the projection says what the run is */
    json_t *pj = json_loads(p1, 0, NULL);
    ASSERT_STREQ(json_string_value(json_object_get(pj, "lifecycle")), "interrupted");
    ASSERT_STREQ(json_string_value(json_object_get(pj, "error")), "operator away");
    ASSERT_EQ(
        json_integer_value(json_object_get(json_object_get(pj, "processed_observations"), "count")),
        7);
    json_decref(pj);
    char *full = NULL;
    ASSERT_OK(vg_journal_replay(a.store, id, &full, E));
    ASSERT_CONTAINS(full, "\"processed_message_ids\":[\"m1\"]");
    ASSERT_CONTAINS(
        full,
        "\"processed_observation_ids\":[\"o0\",\"o5\",\"o10\",\"o15\",\"o20\",\"o25\",\"say\"]");
    ASSERT_CONTAINS(full, "\"item\":\"chat\"");
    ASSERT_CONTAINS(full, "\"stored_projection_matches\":true");
    vg_free(full);
    vg_free(child);
    vg_free(stored);
    vg_free(p1);
    vg_free(p2);
    vg_free(p3);
    fx_close(&a);
    fx_close(&b);
}

TEST(pruning_keeps_replay)
{
    /* proves: S1-036 S1-038 */
    struct fx f;
    fx_open(&f, "jr_prune", 43);
    char id[37];
    snprintf(id, sizeof id, "%s", build_run(&f, 40));
    char *before = projection_text(f.store, id);
    int64_t n_before = fx_count(f.store, "journal", id), removed = 0;
    vigil_error e = {0};
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_prune_activity(f.store, id, 0, &removed, &e));
    ASSERT_OK(vg_journal_prune_activity(f.store, id, 1, &removed, E));
    ASSERT_EQ(removed, 40); /* 40 progress updates + 1 model call, the newest kept */
    ASSERT_EQ(fx_count(f.store, "journal", id), n_before - 40);
    char *after = projection_text(f.store, id);
    ASSERT_STREQ(after, before);
    char *full = NULL;
    ASSERT_OK(vg_journal_replay(f.store, id, &full, E));
    ASSERT_CONTAINS(full, "\"stored_projection_matches\":true");
    vg_free(full);
    /* pruning again removes nothing more */
    ASSERT_OK(vg_journal_prune_activity(f.store, id, 1, &removed, E));
    ASSERT_EQ(removed, 0);
    vg_free(before);
    vg_free(after);
    fx_close(&f);
}

TEST(independent_of_live_state)
{
    /* proves: S1-040 S1-014 S1-044 */
    struct fx f;
    fx_open(&f, "jr_live", 44);
    char id[37];
    snprintf(id, sizeof id, "%s", build_run(&f, 3));
    char *before = projection_text(f.store, id);
    /* scribble over the run record and the stored projection: replay reads neither */
    struct vg_record *r = NULL;
    ASSERT_OK(vg_store_get_copy(f.store, "run", id, &r, E));
    r->body = "{\"status\":\"completed\",\"summary\":\"lies\"}";
    ASSERT_OK(vg_store_update(f.store, r, r->rev, E));
    vg_free(r);
    ASSERT_OK(vg_store_get_copy(f.store, "run_projection", id, &r, E));
    r->body = "{\"lifecycle\":\"completed\"}";
    ASSERT_OK(vg_store_update(f.store, r, r->rev, E));
    vg_free(r);
    char *after = projection_text(f.store, id);
    ASSERT_STREQ(after, before);
    char *full = NULL;
    ASSERT_OK(vg_journal_replay(f.store, id, &full, E));
    ASSERT_CONTAINS(full, "\"stored_projection_matches\":false");
    vg_free(full);
    vg_free(before);
    vg_free(after);
    fx_close(&f);
}

/* A stored projection that the replay does not give is named field by field, so an operator
 * sees where the live run's saved state parts from its journal; a matching one names none. */
TEST(a_differing_projection_names_its_fields)
{
    struct fx f;
    fx_open(&f, "jr_differences", 45);
    char id[37];
    snprintf(id, sizeof id, "%s", build_run(&f, 2));
    char *full = NULL;
    ASSERT_OK(vg_journal_replay(f.store, id, &full, E));
    ASSERT(!strstr(full, "\"differences\""));
    vg_free(full);
    struct vg_record *r = NULL;
    ASSERT_OK(vg_store_get_copy(f.store, "run_projection", id, &r, E));
    r->body = "{\"lifecycle\":\"running\",\"left_over\":1}";
    ASSERT_OK(vg_store_update(f.store, r, r->rev, E));
    vg_free(r);
    ASSERT_OK(vg_journal_replay(f.store, id, &full, E));
    json_t *v = json_loads(full, 0, NULL);
    vg_free(full);
    ASSERT(json_is_false(json_object_get(v, "stored_projection_matches")));
    json_t *diffs = json_object_get(v, "differences"), *d;
    json_t *proj = json_object_get(v, "projection");
    size_t i, seen = 0;
    json_array_foreach (diffs, i, d) {
        const char *field = json_string_value(json_object_get(d, "field"));
        if (!strcmp(field, "lifecycle")) {
            ASSERT_STREQ(json_string_value(json_object_get(d, "stored")), "running");
            ASSERT_STREQ(json_string_value(json_object_get(d, "replayed")),
                         json_string_value(json_object_get(proj, "lifecycle")));
            seen |= 1;
        } else if (!strcmp(field, "left_over")) {
            ASSERT(json_is_null(json_object_get(d, "replayed")));
            seen |= 2;
        } else {
            ASSERT(json_is_null(json_object_get(d, "stored"))); /* only the replay has it */
            ASSERT(json_object_get(proj, field) != NULL);
        }
    }
    ASSERT_EQ(seen, 3);
    ASSERT_EQ(json_array_size(diffs), json_object_size(proj) + 1); /* every field, and left_over */
    json_decref(v);
    fx_close(&f);
}

static int first_of_type_cb(void *user, const struct vg_record *r)
{
    char **out = user;
    if (!*out && strstr(r->body, (const char *)out[1]))
        *out = vg_strdup(r->id);
    return 0;
}

TEST(damaged_journal_refused)
{
    /* proves: S1-039 */
    struct fx f;
    fx_open(&f, "jr_damaged", 45);
    char id[37];
    snprintf(id, sizeof id, "%s", build_run(&f, 2));
    char *found[2] = {NULL, (char *)"\"type\":\"message.delivery\""};
    struct vg_query q = {.kind = "journal", .k1 = id};
    ASSERT_OK(vg_store_scan(f.store, &q, first_of_type_cb, found, E));
    ASSERT(found[0]);
    /* a semantic record gone: a gap that no pruning explains */
    struct vg_record *r = NULL;
    ASSERT_OK(vg_store_get_copy(f.store, "journal", found[0], &r, E));
    ASSERT_OK(vg_store_remove(f.store, "journal", found[0], E));
    char *p = NULL;
    vigil_error e = {0};
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_replay_projection(f.store, id, &p, &e));
    ASSERT_CONTAINS(e.message, "sequence gap before sequence 4");
    ASSERT(p == NULL);
    /* put it back with a wrong field: refused whole, with the record number */
    char *bad = vg_strdup(r->body);
    char *st = strstr(bad, "\"delivered\"");
    ASSERT(st);
    memcpy(st + 1, "misplace", 8);
    r->body = bad;
    ASSERT_OK(vg_store_put(f.store, r, 0, NULL, E));
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_replay(f.store, id, &p, &e));
    ASSERT_CONTAINS(e.message, "invalid journal record 3");
    ASSERT(p == NULL);
    vg_free(bad);
    vg_free(r);
    vg_free(found[0]);
    ASSERT_CODE(VIGIL_ENOTFOUND,
                vg_journal_replay(f.store, "0190aaaa-0000-7000-8000-00000000ffff", &p, NULL));
    fx_close(&f);
}

/* Every body of kind in the store, as reading gives it (the full form), by id. */
struct full_rows {
    char *id[256], *body[256];
    int n;
};

static int keep_row(void *user, const struct vg_record *r)
{
    struct full_rows *f = user;
    ASSERT(f->n < 256);
    f->id[f->n] = vg_strdup(r->id);
    f->body[f->n++] = vg_strdup(r->body);
    return 0;
}

/* Rewrite kind's rows in the form a store written before the packed bodies holds; the number
 * of rows that were stored packed. */
static int store_in_full_form(struct fx *f, const char *kind)
{
    struct full_rows rows = {.n = 0};
    struct vg_query q = {.kind = kind, .owner = FX_AGENT};
    ASSERT_OK(vg_store_scan(f->store, &q, keep_row, &rows, E));
    vg_store_close(f->store);
    f->store = NULL;
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int packed = 0;
    ASSERT_EQ(sqlite3_open(f->path, &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_prepare_v2(db,
                                 "UPDATE records SET body = ?1 WHERE kind = ?2 AND id = ?3 "
                                 "AND body LIKE '{\"\":%'",
                                 -1, &st, NULL),
              SQLITE_OK);
    for (int i = 0; i < rows.n; i++) {
        sqlite3_bind_text(st, 1, rows.body[i], -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, kind, -1, SQLITE_STATIC);
        unsigned char key[VG_SQLITE_KEY_MAX]; /* the id as the store keeps it (schema 11) */
        size_t n = vg_sqlite_key_pack(rows.id[i], key);
        if (n)
            sqlite3_bind_blob(st, 3, key, (int)n, SQLITE_STATIC);
        else
            sqlite3_bind_text(st, 3, rows.id[i], -1, SQLITE_STATIC);
        ASSERT_EQ(sqlite3_step(st), SQLITE_DONE);
        packed += sqlite3_changes(db);
        sqlite3_reset(st);
        vg_free(rows.id[i]);
        vg_free(rows.body[i]);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    fx_reopen(f);
    return packed;
}

TEST(a_run_stored_in_the_full_form_replays)
{
    struct fx a;
    fx_open(&a, "jr_full_form", 7);
    char id[37], call[37];
    snprintf(id, sizeof id, "%s", build_run(&a, 12));
    struct vg_run *run = fx_run(&a, FX_AGENT, "tool-key");
    char tool_run[37];
    snprintf(tool_run, sizeof tool_run, "%s", vg_journal_run_id(run));
    ASSERT_OK(vg_journal_tool_call_started(run, "add", "op-1", "{\"a\":1}", call, E));
    vg_test_clock_advance(&a.clock, 3);
    ASSERT_OK(
        vg_journal_tool_call_finished(run, call, "succeeded", "{\"result\":\"2\"}", NULL, 3, E));
    ASSERT_OK(vg_journal_run_close(run, VG_RUN_COMPLETED, NULL, NULL, E));
    vg_journal_run_free(run);
    char *before = NULL, *tool_before = NULL, *after = NULL, *tool_after = NULL;
    ASSERT_OK(vg_journal_replay(a.store, id, &before, E));
    ASSERT_OK(vg_journal_replay(a.store, tool_run, &tool_before, E));
    ASSERT_CONTAINS(before, "\"stored_projection_matches\":true");

    ASSERT(store_in_full_form(&a, "journal") > 20);
    ASSERT_EQ(store_in_full_form(&a, "run_tool_call"), 0); /* a call is its records */
    ASSERT_OK(vg_journal_replay(a.store, id, &after, E));
    ASSERT_OK(vg_journal_replay(a.store, tool_run, &tool_after, E));
    ASSERT_STREQ(after, before);
    ASSERT_STREQ(tool_after, tool_before);
    vg_free(before);
    vg_free(tool_before);
    vg_free(after);
    vg_free(tool_after);
    fx_close(&a);
}

/* A run's projection stored before session 37 holds its reals (a call's arguments) as jansson
 * wrote them, 0.80000000000000004, where the canonical writer now writes 0.8: replay still
 * finds the stored projection the one it rebuilds (the same values), and a stored projection
 * that differs in value still does not match. */
TEST(a_projection_stored_with_long_reals_still_matches)
{
    struct fx a;
    fx_open(&a, "jr_long_reals", 7);
    char call[37], run_id[37];
    struct vg_run *run = fx_run(&a, FX_AGENT, "reals-key");
    snprintf(run_id, sizeof run_id, "%s", vg_journal_run_id(run));
    ASSERT_OK(vg_journal_tool_call_started(run, "set_report", "op-1",
                                           "{\"confidence\":0.8,\"scope\":\"daily\"}", call, E));
    vg_journal_run_free(run);
    static const char *const as_stored[] = {"0.80000000000000004", "0.80000000000000016"};
    for (size_t i = 0; i < VG_ARRAY_LEN(as_stored); i++) {
        struct vg_record *r = NULL;
        ASSERT_OK(vg_store_get_copy(a.store, PROJECTION_KIND, run_id, &r, E));
        char *at = strstr(r->body, "\"confidence\":0.8");
        ASSERT(at);
        struct vg_buf body;
        vg_buf_init(&body, 0);
        vg_buf_append(&body, r->body, (size_t)(at - r->body) + strlen("\"confidence\":"));
        vg_buf_puts(&body, as_stored[i]);
        vg_buf_puts(&body, at + strlen("\"confidence\":0.8"));
        ASSERT_OK(vg_buf_finish(&body, E));
        struct vg_record w = *r;
        w.body = body.data;
        ASSERT_OK(vg_store_update(a.store, &w, r->rev, E));
        vg_buf_release(&body);
        vg_free(r);
        char *text = NULL;
        ASSERT_OK(vg_journal_replay(a.store, run_id, &text, E));
        ASSERT_CONTAINS(text, i == 0 ? "\"stored_projection_matches\":true"
                                     : "\"stored_projection_matches\":false");
        vg_free(text);
    }
    fx_close(&a);
}

/* The output of a finished call, as vg_journal_run_tool gives it (canonical JSON). */
static char *call_output(struct vg_store *s, const char *call)
{
    char *text = NULL;
    ASSERT_OK(vg_journal_run_tool(s, call, &text, E));
    json_t *b = json_loads(text, 0, NULL);
    char *out = json_dumps(json_object_get(b, "output"), JSON_ENCODE_ANY | JSON_COMPACT);
    json_decref(b);
    vg_free(text);
    return out;
}

/* A finished call's output is stored once, in the journal's end record; its readers get it
 * from there, also after pruning, which keeps a call's records; a row stored with its output
 * (by a version that wrote rows) is read as it is. */
TEST(a_tool_calls_output_is_stored_once)
{
    struct fx a;
    fx_open(&a, "jr_output_once", 8);
    char call[37], run_id[37];
    struct vg_run *run = fx_run(&a, FX_AGENT, "tool-key");
    snprintf(run_id, sizeof run_id, "%s", vg_journal_run_id(run));
    ASSERT_OK(vg_journal_tool_call_started(run, "add", "op-1", "{\"a\":1}", call, E));
    ASSERT_OK(
        vg_journal_tool_call_finished(run, call, "succeeded", "{\"result\":\"2\"}", NULL, 3, E));
    for (int i = 0; i < 3; i++) {
        struct vg_journal_activity act = {.progress_json = "{\"summary\":\"after\"}"};
        ASSERT_OK(vg_journal_activity(run, &act, E));
    }
    ASSERT_OK(vg_journal_run_close(run, VG_RUN_COMPLETED, NULL, NULL, E));
    vg_journal_run_free(run);
    struct vg_record *row = NULL;
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_store_get_copy(a.store, "run_tool_call", call, &row, NULL));
    char *out = call_output(a.store, call);
    ASSERT_STREQ(out, "{\"result\":\"2\"}");
    free(out);
    int64_t removed = 0;
    ASSERT_OK(vg_journal_prune_activity(a.store, run_id, 1, &removed, E));
    ASSERT_EQ(removed, 2); /* two progress records; the call's start and end are kept */
    out = call_output(a.store, call);
    ASSERT_STREQ(out, "{\"result\":\"2\"}");
    free(out);
    /* A row as stores written before hold it: its own output is the one read. */
    char *text = NULL;
    ASSERT_OK(vg_journal_run_tool(a.store, call, &text, E));
    json_t *b = json_loads(text, 0, NULL);
    vg_free(text);
    json_object_set_new(b, "output", json_pack("{s:s}", "result", "own"));
    text = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
    struct vg_record r = {.kind = "run_tool_call",
                          .id = call,
                          .owner = FX_AGENT,
                          .k1 = run_id,
                          .k2 = "succeeded",
                          .seq = json_integer_value(json_object_get(b, "started_sequence")),
                          .body = text};
    ASSERT_OK(vg_store_put(a.store, &r, 0, NULL, E));
    out = call_output(a.store, call);
    ASSERT_STREQ(out, "{\"result\":\"own\"}");
    free(out);
    char *page = NULL;
    ASSERT_OK(vg_journal_run_tools(a.store, run_id, NULL, 0, &page, E));
    ASSERT_CONTAINS(page, "own"); /* a run that has rows is listed from them */
    vg_free(page);
    free(text);
    json_decref(b);
    fx_close(&a);
}

/* The end record of the run's tool call (k2 activity.updated, tool_call.status not running),
 * as stored. */
static int end_record_cb(void *user, const struct vg_record *r)
{
    if (strstr(r->body, "\"succeeded\"") && !*(char **)user)
        *(char **)user = strdup(r->body);
    return 0;
}

static char *stored_end_record(struct vg_store *s, const char *run_id)
{
    char *body = NULL;
    struct vg_query q = {.kind = "journal", .owner = FX_AGENT, .k1 = run_id};
    ASSERT_OK(vg_store_scan(s, &q, end_record_cb, &body, E));
    ASSERT(body != NULL);
    return body;
}

/* The toolResult message the loop writes before a call's end: its content is the output. */
static void put_result_message(struct fx *f, const char *id, int64_t seq, const char *content)
{
    json_t *b = json_pack("{s:s,s:s}", "content", content, "kind", "toolResult");
    char *text = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
    struct vg_record m = {.kind = "message",
                          .id = id,
                          .owner = FX_AGENT,
                          .k1 = "thread-1",
                          .k2 = "toolResult",
                          .seq = seq,
                          .at = 1,
                          .body = text};
    ASSERT_OK(vg_store_put(f->store, &m, 0, NULL, E));
    free(text);
    json_decref(b);
}

/* A call's output that its toolResult message holds is stored there only: the end record
 * names the message, and every reader (the tool call readers, replay, export, import's
 * comparison) gives the output as the record said it. An output no message holds stays in
 * the record. */
TEST(a_tool_calls_output_lives_in_its_result_message)
{
    struct fx a;
    fx_open(&a, "jr_output_ref", 9);
    const char *envelope = "{\"action_id\":\"x\",\"result\":\"2\",\"status\":\"success\"}";
    char call[37], other[37], run_id[37];
    struct vg_run *run = fx_run(&a, FX_AGENT, "ref-key");
    snprintf(run_id, sizeof run_id, "%s", vg_journal_run_id(run));
    ASSERT_OK(vg_journal_tool_call_started(run, "add", "op-1", "{\"a\":1}", call, E));
    put_result_message(&a, "0190aaaa-0000-7000-8000-0000000000a1", 1, envelope);
    ASSERT_OK(vg_journal_tool_call_finished(run, call, "succeeded", envelope, NULL, 3, E));
    char *end = stored_end_record(a.store, run_id);
    ASSERT(strstr(end, "\"output_message\":\"0190aaaa-0000-7000-8000-0000000000a1\"") != NULL);
    ASSERT(strstr(end, "\"output\":") == NULL);
    free(end);
    /* a second call whose output the newest message does not hold keeps it in its record */
    ASSERT_OK(vg_journal_tool_call_started(run, "add", "op-2", "{\"a\":2}", other, E));
    ASSERT_OK(vg_journal_tool_call_finished(run, other, "failed", "{\"e\":1}", "boom", 1, E));
    ASSERT_OK(vg_journal_run_close(run, VG_RUN_COMPLETED, NULL, NULL, E));
    vg_journal_run_free(run);

    char *out = call_output(a.store, call);
    ASSERT_STREQ(out, "{\"action_id\":\"x\",\"result\":\"2\",\"status\":\"success\"}");
    free(out);
    out = call_output(a.store, other);
    ASSERT_STREQ(out, "{\"e\":1}");
    free(out);
    char *live = NULL, *replayed = projection_text(a.store, run_id);
    ASSERT_OK(vg_journal_stored_projection(a.store, run_id, &live, E));
    ASSERT_STREQ(replayed, live);
    vg_free(live);
    vg_free(replayed);

    char folder[4300], path[4400], *data = NULL;
    size_t len = 0;
    int64_t added = -1;
    snprintf(folder, sizeof folder, "%s/export", vg_test_tmpdir("jr_output_ref_out"));
    ASSERT_OK(vg_journal_export(a.store, folder, FX_AGENT, NULL, E));
    ASSERT_OK(vg_journal_path(folder, FX_AGENT, path, sizeof path, E));
    ASSERT_OK(vg_fs_read_file(path, 1 << 20, &data, &len, E));
    ASSERT(strstr(data, "output_message") == NULL);
    ASSERT(
        strstr(data, "\"output\":{\"action_id\":\"x\",\"result\":\"2\",\"status\":\"success\"}") !=
        NULL);
    /* the same records imported again are the ones stored: nothing added, nothing refused */
    ASSERT_OK(vg_journal_import_text(a.store, data, len, FX_AGENT, &added, E));
    ASSERT_EQ(added, 0);
    vg_free(data);
    fx_close(&a);
}

int main(void)
{
    RUN(deterministic);
    RUN(signals_project_through_their_registry_row);
    RUN(pruning_keeps_replay);
    RUN(independent_of_live_state);
    RUN(a_differing_projection_names_its_fields);
    RUN(damaged_journal_refused);
    RUN(a_run_stored_in_the_full_form_replays);
    RUN(a_projection_stored_with_long_reals_still_matches);
    RUN(a_tool_calls_output_is_stored_once);
    RUN(a_tool_calls_output_lives_in_its_result_message);
    return 0;
}
