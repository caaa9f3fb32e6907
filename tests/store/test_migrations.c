/*
 * test_migrations.c: SQLite schema upgrades. For every earlier schema version a store is made at
 * that version (the target_version option), filled with records of several kinds, closed and
 * reopened by this vigil: the data is preserved, every query shape works and the version is the
 * latest. A store from a newer vigil is refused with EVERSION and left byte-for-byte untouched.
 * (PostgreSQL's migrations are tested in test_conformance_pg.c.)
 */
#include "helpers/test.h"

#include "os/fs.h"
#include "store/store.h"

#include <sqlite3.h>
#include <sys/stat.h>

static char dir[4096];

static int schema_version(struct vg_store *s)
{
    int v = -1;
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_SCHEMA_VERSION, &v, E));
    return v;
}

static int latest_version(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/latest.db", dir);
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_store *s = NULL;
    ASSERT_OK(vg_store_open(path, &o, &s, E));
    int v = schema_version(s);
    vg_store_close(s);
    return v;
}

static int sqlite_int(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    ASSERT_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ASSERT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    int v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* The records written at the old version, and a brute-force answer for any query over them. */
struct row {
    const char *kind, *id, *owner, *k1, *k2;
    int64_t seq;
};

static const struct row rows[] = {
    {"message", "m1", "a", "t1", "user", 1},
    {"message", "m2", "a", "t1", "thought", 2},
    {"message", "m3", "a", "t2", "user", 2},
    {"message", "m4", "b", "t1", "user", 3},
    {"message", "m5", "b", "t2", "action", 4},
    {"message", "m6", "", "", "", 5},
    {"message", "m7", "a", "t1", "user", 6},
    {"message", "m8", "a", "t2", "observation", 7},
    {"message", "m9", "b", "t1", "observation", 8},
    {"link", "l1", "a", "m1", "m2", 1},
    {"link", "l2", "a", "m2", "m3", 2},
    {"link", "l3", "b", "m4", "m5", 3},
    /* a pointer: its relation leads its keys, its seq stays 0 */
    {"link", "agent_head_message:a", "a", "agent_head_message:a", "agent_head_message:m7", 0},
    {"journal", "j1", "a", "run-1", "model_call", 1},
    {"journal", "j2", "a", "run-1", "tool_call", 2},
    {"journal", "j3", "b", "run-2", "model_call", 1},
    {"run_tool_call", "c1", "a", "run-1", "succeeded", 2},
    {"journal_key", "run-1:obs:m1", "a", "run-1", "", 3},
    {"agent_change", "ch1", "a", "agent", "a", 1},
    {"agent_change", "ch2", "a", "agent", "a", 2},
    {"agent_change", "ch3", "b", "agent", "b", 1},
    {"state", "s-a", "a", "", "", 0},
    {"journal.record", "j1", "run-1", "r", "", 1},
    {"task", "t-1", "", "ready", "worker", 1},
    {"task", "t-2", "", "done", "", 2},
    {"wake_run", "w-1", "a", "queued", "user", 1},
    {"wake_run", "w-2", "a", "started", "timer", 2},
    {"agent_lease", "b", "b", "holder-1", "", 9000},
    {"sync_log", "m1@h:0000000000000001", "", "h", "message", 1},
    {"sync_clock", "a/agent", "a", "agent", "", 0},
};

static int row_cmp(const void *x, const void *y)
{
    const struct row *a = *(const struct row *const *)x, *b = *(const struct row *const *)y;
    if (a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    return strcmp(a->id, b->id);
}

static void expect(const struct vg_query *q, char *out, size_t n)
{
    const struct row *hit[VG_ARRAY_LEN(rows)];
    size_t k = 0, len = 0;
    int emitted = 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(rows); i++) {
        const struct row *r = &rows[i];
        if (strcmp(r->kind, q->kind) || (q->owner && strcmp(r->owner, q->owner)) ||
            (q->k1 && strcmp(r->k1, q->k1)) || (q->k2 && strcmp(r->k2, q->k2)) ||
            (q->has_seq_min && r->seq < q->seq_min) || (q->has_seq_max && r->seq > q->seq_max))
            continue;
        hit[k++] = r;
    }
    qsort(hit, k, sizeof hit[0], row_cmp);
    out[0] = '\0';
    for (size_t j = 0; j < k; j++) {
        const struct row *r = hit[q->descending ? k - 1 - j : j];
        if (q->has_after) {
            int c = r->seq != q->after_seq ? (r->seq < q->after_seq ? -1 : 1)
                                           : strcmp(r->id, q->after_id);
            if (q->descending ? c >= 0 : c <= 0)
                continue;
        }
        if (q->limit > 0 && emitted >= q->limit)
            break;
        len += (size_t)snprintf(out + len, n - len, "%s,", r->id);
        emitted++;
    }
}

static int join(void *user, const struct vg_record *r)
{
    char *out = user;
    size_t len = strlen(out);
    snprintf(out + len, 1024 - len, "%s,", r->id);
    return 0;
}

/* One query shape (owner, k1, k2, min, max, cursor, direction, limit: a bit each of sh) on one
 * kind: the migrated indexes must serve it with the right answer. */
static void check_shape(struct vg_store *s, const char *kind, const char *k1, const char *k2,
                        unsigned sh)
{
    char got[1024], want[1024];
    struct vg_query q = {.kind = kind};
    q.owner = sh & 1 ? "a" : NULL;
    q.k1 = sh & 2 ? k1 : NULL;
    q.k2 = sh & 4 ? k2 : NULL;
    q.has_seq_min = (sh & 8) != 0;
    q.seq_min = 2;
    q.has_seq_max = (sh & 16) != 0;
    q.seq_max = 5;
    q.has_after = (sh & 32) != 0;
    q.after_seq = 2;
    q.after_id = "m2";
    q.descending = (sh & 64) != 0;
    q.limit = sh & 128 ? 2 : 0;
    got[0] = '\0';
    ASSERT_OK(vg_store_scan(s, &q, join, got, E));
    expect(&q, want, sizeof want);
    if (strcmp(got, want) != 0)
        TEST_FAIL_("%s shape %u: got \"%s\", want \"%s\"", kind, sh, got, want);
    int64_t n = -1;
    ASSERT_OK(vg_store_count(s, &q, &n, E));
    q.has_after = 0;
    q.limit = 0;
    expect(&q, want, sizeof want);
    int commas = 0;
    for (const char *p = want; *p; p++)
        commas += *p == ',';
    ASSERT_EQ(n, commas);
}

/* Every shape on each kind whose indexes a migration changed, with a k1 and a k2 of its rows. */
static void check_all_shapes(struct vg_store *s)
{
    static const struct {
        const char *kind, *k1, *k2;
    } kinds[] = {{"message", "t1", "user"},
                 {"message", "t2", "observation"},
                 {"link", "m1", "m2"},
                 {"journal", "run-1", "model_call"},
                 {"run_tool_call", "run-1", "succeeded"},
                 {"journal_key", "run-1", ""},
                 {"task", "ready", "worker"},
                 {"wake_run", "queued", "user"},
                 {"agent_change", "agent", "a"},
                 {"agent_lease", "holder-1", ""},
                 {"sync_log", "h", "message"}};
    for (size_t k = 0; k < VG_ARRAY_LEN(kinds); k++)
        for (unsigned sh = 0; sh < 256; sh++)
            check_shape(s, kinds[k].kind, kinds[k].k1, kinds[k].k2, sh);
}

/* proves: S0-155 (migrations are stable across upgrade paths and preserve existing data) */
TEST(upgrade_from_every_version)
{
    int latest = latest_version();
    ASSERT(latest >= 2);
    char path[4200], body[64];
    for (int v = 1; v < latest; v++) {
        snprintf(path, sizeof path, "%s/v%d.db", dir, v);
        struct vg_store_options o = {.create_if_missing = 1, .target_version = v};
        struct vg_store *s = NULL;
        ASSERT_OK(vg_store_open(path, &o, &s, E));
        ASSERT_EQ(schema_version(s), v);
        ASSERT_OK(vg_store_begin(s, E));
        for (size_t i = 0; i < VG_ARRAY_LEN(rows); i++) {
            snprintf(body, sizeof body, "{\"i\":%zu,\"v\":%d}", i, v);
            struct vg_record r = {
                rows[i].kind, rows[i].id, rows[i].owner,     rows[i].k1, rows[i].k2,
                rows[i].seq,  0,          1000 + (int64_t)i, body};
            ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
        }
        struct vg_record u = {"state", "s-a", "a", "", "", 1, 0, 5, "{\"updated\":1}"};
        ASSERT_OK(vg_store_update(s, &u, 1, E));
        ASSERT_OK(vg_store_commit(s, E));
        vg_store_close(s);
        ASSERT_EQ(sqlite_int(path, "PRAGMA user_version"), v);
        if (v == 1) /* the version-2 indexes really are missing at version 1 */
            ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM sqlite_schema WHERE name = "
                                       "'records_k2'"),
                      0);

        /* A read-only open cannot upgrade. */
        struct vg_store_options ro = {.read_only = 1};
        vigil_error err = {0};
        ASSERT_CODE(VIGIL_EDENIED, vg_store_open(path, &ro, &s, &err));
        ASSERT_CONTAINS(err.message, "read-only");

        struct vg_store_options now = {0};
        ASSERT_OK(vg_store_open(path, &now, &s, E));
        ASSERT_EQ(schema_version(s), latest);
        for (size_t i = 0; i < VG_ARRAY_LEN(rows); i++) {
            struct vg_record *g = NULL;
            ASSERT_OK(vg_store_get_copy(s, rows[i].kind, rows[i].id, &g, E));
            ASSERT_STREQ(g->owner, rows[i].owner);
            ASSERT_STREQ(g->k1, rows[i].k1);
            ASSERT_STREQ(g->k2, rows[i].k2);
            if (strcmp(rows[i].kind, "state") == 0) {
                ASSERT_EQ(g->rev, 2);
                ASSERT_EQ(g->at, 5);
                ASSERT_STREQ(g->body, "{\"updated\":1}");
            } else {
                ASSERT_EQ(g->seq, rows[i].seq);
                ASSERT_EQ(g->rev, 1);
                ASSERT_EQ(g->at, 1000 + (int64_t)i);
                snprintf(body, sizeof body, "{\"i\":%zu,\"v\":%d}", i, v);
                ASSERT_STREQ(g->body, body);
            }
            vg_free(g);
        }
        check_all_shapes(s);
        int64_t removed = 0;
        /* The kinds moved to the owner index are in it, and only they; schema 8 moved the
         * messages, journal records and tool calls on to the agent index, and schema 9 the
         * journal keys and agent change records. */
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records INDEXED BY records_owner "
                                   "WHERE owner = 'a' AND ix & 32"),
                  4);
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE ix & 32 AND kind NOT IN "
                                   "('link', 'agent_lease', 'sync_clock')"),
                  0);
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records INDEXED BY records_agent "
                                   "WHERE owner = 'a' AND ix & 64"),
                  13);
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE ix & 64 AND kind NOT IN "
                                   "('message', 'journal', 'run_tool_call', 'journal_key', "
                                   "'agent_change', 'wake_run')"),
                  0);
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE (ix & ~128) <> 64 AND kind "
                                   "IN ('message', 'journal', 'run_tool_call', 'journal_key', "
                                   "'agent_change')"),
                  0);
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE ix & 1 AND kind IN "
                                   "('message', 'journal', 'link', 'run_tool_call')"),
                  0);
        /* Schema 7: of the messages only the observations are in a k2 index; schema 10 moved
         * them from records_k2 to the one that leads with the agent. The identity index leads
         * with the id. */
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE ix & 8 AND kind = "
                                   "'message'"),
                  0);
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE ix & 128 AND kind <> "
                                   "'message'"),
                  0);
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records INDEXED BY records_agent_k2 "
                                   "WHERE owner = 'a' AND kind = 'message' AND k2 = "
                                   "'observation' AND ix & 128"),
                  1);
        /* Schema 26: the meta table and its index are gone. */
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM sqlite_schema WHERE tbl_name = "
                                   "'vigil_meta'"),
                  0);
        ASSERT_EQ(sqlite_int(path, "SELECT name = 'id' FROM pragma_index_info('records_id') "
                                   "WHERE seqno = 0"),
                  1);
        /* Schema 12: tasks are in the status, seq and (kind, owner, seq) indexes only. Schema
         * 25: wakes in the agent and status indexes only (in every one but the k2 index from
         * 12 to 24). */
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE kind = 'task' AND ix <> "
                                   "(1 | 4 | 16)"),
                  0);
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE kind = 'wake_run' AND ix "
                                   "<> (64 | 4)"),
                  0);
        /* Schema 22: a lease is in the owner and k1 indexes only; a release (its holder and
         * its expiry moved) is found under its new keys and in no index under the old. */
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE kind = 'agent_lease' AND "
                                   "ix <> (32 | 4)"),
                  0);
        /* Schema 23: sync's log entries are in the k1 index only, record clocks in the owner
         * index only. */
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE kind = 'sync_log' AND "
                                   "ix <> 4"),
                  0);
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE kind = 'sync_clock' AND "
                                   "ix <> 32"),
                  0);
        /* Schema 27: links are in the k2 index too, but for pointers, whose k2 moves. */
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records INDEXED BY records_k2 WHERE "
                                   "kind = 'link' AND ix & 8 AND k2 IN ('m2', 'm3', 'm5')"),
                  3);
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE kind = 'link' AND ix & 8 "
                                   "AND k2 = 'agent_head_message:m7'"),
                  0);
        struct vg_record rel = {"agent_lease", "b", "b", "", "", 0, 0, 7, "{\"released\":1}"};
        ASSERT_OK(vg_store_update(s, &rel, 1, E));
        struct vg_query held = {.kind = "agent_lease", .k1 = "holder-1"};
        struct vg_query free_q = {.kind = "agent_lease", .k1 = ""};
        int64_t n_held = -1, n_free = -1;
        ASSERT_OK(vg_store_count(s, &held, &n_held, E));
        ASSERT_OK(vg_store_count(s, &free_q, &n_free, E));
        ASSERT_EQ(n_held, 0);
        ASSERT_EQ(n_free, 1);
        ASSERT_OK(vg_store_remove_owner(s, "b", &removed, E));
        ASSERT_EQ(removed, 7); /* three messages, a link, a journal record, a change, a lease */
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE owner = 'b'"), 0);
        /* Every kind of an agent goes with it, its wakes too (schema 25: found by the agent
         * index, no longer by (kind, owner, seq)). */
        ASSERT_OK(vg_store_remove_owner(s, "a", &removed, E));
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE owner = 'a'"), 0);
        ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, E));
        vg_store_close(s);
        ASSERT_EQ(sqlite_int(path, "PRAGMA user_version"), latest);
    }
}

/* Key values of UUID rows, as a step writes them: ids, an agent, a thread key that begins with
 * the agent's id, and values that only look like UUIDs (which stay text). */
#define U_AGENT "01a21e9d-75df-70be-99bb-c23c2307e196"
#define U_RUN "01a21e9d-75f2-735f-b5b7-cbde1aa4f155"
static const struct row uuid_rows[] = {
    {"message", "01a21e9d-7684-73a2-92ba-def6659cbefb", U_AGENT, U_AGENT ":session:c0", "thought",
     1},
    {"message", "01a21e9d-7685-7123-92c7-3184f44a1258", U_AGENT, U_AGENT ":session:c0", "action",
     2},
    {"message", "01a21e9d-7685-7123-92c7-3184f44a1250", U_AGENT, U_AGENT ":session:c0", "user", 2},
    {"journal", "01a21e9d-7684-73a4-912e-43e69fcefaf2", U_AGENT, U_RUN, "activity.updated", 1},
    {"run_tool_call", "01a21e9d-7684-73a3-a696-f8f5436298ea", U_AGENT, U_RUN, "succeeded", 1},
    {"link", "01A21E9D-7684-73A3-A696-F8F5436298EA", U_AGENT, U_RUN, U_AGENT, 1}, /* upper case */
    {"link", "01a21e9d-7684-73a3-a696-f8f5436298e", U_AGENT, "x" U_RUN, "", 2},   /* too short */
    {"link", "01a21e9d_7684-73a3-a696-f8f5436298ea", "", U_RUN "x", "g" U_AGENT, 3},
};

static int collect_ids(void *user, const struct vg_record *r)
{
    char *out = user;
    size_t len = strlen(out);
    snprintf(out + len, 4096 - len, "%s,", r->id);
    return 0;
}

/* Every UUID row reads back as written, by id and by each of its keys. */
static void check_uuid_rows(struct vg_store *s)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(uuid_rows); i++) {
        const struct row *w = &uuid_rows[i];
        struct vg_record *g = NULL;
        ASSERT_OK(vg_store_get_copy(s, w->kind, w->id, &g, E));
        ASSERT_STREQ(g->id, w->id);
        ASSERT_STREQ(g->owner, w->owner);
        ASSERT_STREQ(g->k1, w->k1);
        ASSERT_STREQ(g->k2, w->k2);
        vg_free(g);
        char got[4096] = "";
        struct vg_query q = {.kind = w->kind, .owner = w->owner, .k1 = w->k1, .k2 = w->k2};
        ASSERT_OK(vg_store_scan(s, &q, collect_ids, got, E));
        ASSERT_CONTAINS(got, w->id);
    }
    /* A thread's messages in (seq, id) order, and the cursor after the first of seq 2. */
    char got[4096] = "";
    struct vg_query q = {.kind = "message", .owner = U_AGENT, .k1 = U_AGENT ":session:c0"};
    ASSERT_OK(vg_store_scan(s, &q, collect_ids, got, E));
    ASSERT_STREQ(got, "01a21e9d-7684-73a2-92ba-def6659cbefb,01a21e9d-7685-7123-92c7-3184f44a1250,"
                      "01a21e9d-7685-7123-92c7-3184f44a1258,");
    q.has_after = 1;
    q.after_seq = 2;
    q.after_id = "01a21e9d-7685-7123-92c7-3184f44a1250";
    got[0] = '\0';
    ASSERT_OK(vg_store_scan(s, &q, collect_ids, got, E));
    ASSERT_STREQ(got, "01a21e9d-7685-7123-92c7-3184f44a1258,");
}

/* Schema 11: a key that begins with a canonical UUID is stored as its 16 bytes and the rest,
 * in a new store and in one upgraded from schema 10, whose text keys are rewritten; readers get
 * the text that was written. */
TEST(uuid_keys_stored_as_bytes_read_back_as_written)
{
    int latest = latest_version();
    ASSERT(latest >= 11);
    char path[4200];
    for (int from = 10; from <= latest; from++) {
        snprintf(path, sizeof path, "%s/uuid%d.db", dir, from);
        struct vg_store_options o = {.create_if_missing = 1, .target_version = from};
        struct vg_store *s = NULL;
        ASSERT_OK(vg_store_open(path, &o, &s, E));
        for (size_t i = 0; i < VG_ARRAY_LEN(uuid_rows); i++) {
            const struct row *w = &uuid_rows[i];
            struct vg_record r = {w->kind, w->id, w->owner, w->k1, w->k2, w->seq, 0, 1, "{}"};
            ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
        }
        check_uuid_rows(s);
        vg_store_close(s);
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE typeof(id) = 'blob'"),
                  from >= 11 ? 5 : 0);
        struct vg_store_options now = {0};
        ASSERT_OK(vg_store_open(path, &now, &s, E));
        ASSERT_EQ(schema_version(s), latest);
        check_uuid_rows(s);
        /* Other tools read the keys as text through the view records_text. */
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records_text WHERE owner = '" U_AGENT
                                   "' AND (k1 = '" U_RUN "' OR k1 = '" U_AGENT ":session:c0')"),
                  6);
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records_text WHERE id = "
                                   "'01a21e9d-7684-73a3-a696-f8f5436298ea' AND k2 = 'succeeded'"),
                  1);
        int64_t removed = 0;
        ASSERT_OK(vg_store_remove_owner(s, U_AGENT, &removed, E));
        ASSERT_EQ(removed, 7);
        vg_store_close(s);
        /* What is left: a row whose id and k2 only look like UUIDs and whose k1 begins with one. */
        ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records"), 1);
        ASSERT_EQ(
            sqlite_int(
                path,
                "SELECT typeof(id) || typeof(k1) || typeof(k2) = 'textblobtext' FROM records"),
            1);
    }
}

/* A newer vigil's store: refused with a message that says what to do, and not modified. */
TEST(newer_schema_refused_untouched)
{
    int latest = latest_version();
    char path[4200], wal[4300], sql[64];
    snprintf(path, sizeof path, "%s/newer.db", dir);
    snprintf(wal, sizeof wal, "%s-wal", path);
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_store *s = NULL;
    ASSERT_OK(vg_store_open(path, &o, &s, E));
    struct vg_record r = {.kind = "message", .id = "m1", .seq = 1, .body = "{}"};
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    vg_store_close(s);
    sqlite3 *db = NULL;
    ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
    snprintf(sql, sizeof sql, "PRAGMA user_version=%d", latest + 3);
    ASSERT_EQ(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    ASSERT(!vg_fs_exists(wal));

    char *before = NULL, *after = NULL;
    size_t n_before = 0, n_after = 0;
    ASSERT_OK(vg_fs_read_file(path, 1 << 24, &before, &n_before, E));
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EVERSION, vg_store_open(path, &o, &s, &err));
    ASSERT_CONTAINS(err.message, "upgrade vigil");
    ASSERT_CONTAINS(err.message, "newer.db");
    ASSERT_CODE(VIGIL_EVERSION,
                vg_store_open(path, &(struct vg_store_options){.read_only = 1}, &s, NULL));
    ASSERT_OK(vg_fs_read_file(path, 1 << 24, &after, &n_after, E));
    ASSERT_EQ(n_after, n_before);
    ASSERT(memcmp(before, after, n_before) == 0);
    /* SQLite may leave an empty write-ahead log beside it after a read: no frame was written */
    struct stat st;
    ASSERT(stat(wal, &st) != 0 || st.st_size == 0);
    ASSERT_EQ(sqlite_int(path, "PRAGMA user_version"), latest + 3);
    vg_free(before);
    vg_free(after);
}

/* Schema 21 stores a message's ids (prev_id, run_id, an operation id) as their bytes and a
 * finished run's projection as its shapes' holes (store/body.c); a store of schema 20 holds them
 * as text. Such a store, upgraded, reads every body as it was written, its rows as they were
 * stored (nothing is rewritten), and the same bodies written again take the new form. */
#define S20_ACTION "0190aaaa-0000-7000-8000-0000000000a1"
#define S20_ACTION_B64 "AZCqqgAAcACAAAAAAAAAoQ"
#define S20_RUN "0190aaaa-0000-7000-8000-0000000000b1"
#define S20_OP "06586399f210e25e657d910d17bf17a7f850d60b15c9a97bddef1cb6a19eb349"
static const char s20_result_stored[] =
    "{\"\":24576,\"content\":[\"" S20_OP
    "\",\"\\\"12\\\"\"],\"metadata\":[\"add\"],\"prev_id\":\"" S20_ACTION "\",\"run_id\":\"" S20_RUN
    "\",\"tokens\":57}";
static const char s20_result[] =
    "{\"content\":\"{\\\"action_id\\\":\\\"" S20_ACTION "\\\",\\\"changed_entity_ids\\\":[],"
    "\\\"changed_tokens\\\":[],\\\"operation_id\\\":\\\"" S20_OP "\\\",\\\"replayed\\\":false,"
    "\\\"result\\\":\\\"12\\\",\\\"status\\\":\\\"success\\\"}\",\"metadata\":{\"actionRefId\":"
    "\"" S20_ACTION "\",\"toolName\":\"add\"},\"prev_id\":\"" S20_ACTION "\",\"run_id\":\"" S20_RUN
    "\",\"tokens\":57}";
static const char s20_projection[] =
    "{\"activity\":\"idle\",\"ended_at\":\"1970-01-01T00:00:01.000Z\","
    "\"run_key\":\"" S20_OP "\"}";

static void set_body(const char *path, const char *id, const char *body)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_prepare_v2(db, "UPDATE records SET body = ?1 WHERE id = ?2", -1, &st, NULL),
              SQLITE_OK);
    sqlite3_bind_text(st, 1, body, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
    ASSERT_EQ(sqlite3_step(st), SQLITE_DONE);
    ASSERT_EQ(sqlite3_changes(db), 1);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void check_body(struct vg_store *s, const char *kind, const char *id, const char *want)
{
    struct vg_record *g = NULL;
    ASSERT_OK(vg_store_get_copy(s, kind, id, &g, E));
    ASSERT_STREQ(g->body, want);
    vg_free(g);
}

TEST(a_schema_20_stores_ids_read_as_written_after_the_upgrade)
{
    int latest = latest_version();
    ASSERT(latest >= 21);
    char path[4200];
    snprintf(path, sizeof path, "%s/s20.db", dir);
    struct vg_store_options o = {.create_if_missing = 1, .target_version = 20};
    struct vg_store *s = NULL;
    ASSERT_OK(vg_store_open(path, &o, &s, E));
    struct vg_record m = {"message", "m20", "a", "t", "toolResult", 1, 0, 1000, "{}"};
    struct vg_record p = {"run_projection", "p20", "a", "p20", "", 0, 0, 1000, "{}"};
    ASSERT_OK(vg_store_put(s, &m, 0, NULL, E));
    ASSERT_OK(vg_store_put(s, &p, 0, NULL, E));
    vg_store_close(s);
    /* the rows as schema 20 stored them */
    set_body(path, "m20", s20_result_stored);
    set_body(path, "p20", s20_projection);

    struct vg_store_options now = {0};
    ASSERT_OK(vg_store_open(path, &now, &s, E));
    ASSERT_EQ(schema_version(s), latest);
    check_body(s, "message", "m20", s20_result);
    check_body(s, "run_projection", "p20", s20_projection);
    m.id = "m21";
    m.body = s20_result;
    p.id = p.k1 = "p21";
    p.body = s20_projection;
    ASSERT_OK(vg_store_put(s, &m, 0, NULL, E));
    ASSERT_OK(vg_store_put(s, &p, 0, NULL, E));
    check_body(s, "message", "m21", s20_result);
    check_body(s, "run_projection", "p21", s20_projection);
    vg_store_close(s);
    /* the old rows untouched; the new ones in the new form */
    ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE id = 'm20' AND body LIKE "
                               "'%\"prev_id\":\"" S20_ACTION "\"%'"),
              1);
    ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE id = 'p20' AND body LIKE "
                               "'{\"activity\":\"idle\"%'"),
              1);
    ASSERT_EQ(sqlite_int(path,
                         "SELECT count(*) FROM records WHERE id = 'm21' AND body LIKE "
                         "'%\"prev_id\":\"" S20_ACTION_B64 "\"%' AND body NOT LIKE '%" S20_OP "%'"),
              1);
    ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE id = 'p21' AND body NOT LIKE "
                               "'%run_key\":\"" S20_OP "%'"),
              1);
}

/* A step's messages as src/agent/message.c writes them: a thought (its id's last digit 0), then
 * its action and result (the same id with 1 and 2: ids a schema 24 store keeps in one row). */
#define STEP_AGENT "0190aaaa-0000-7000-8000-00000000a001"
#define STEP_THREAD STEP_AGENT ":session:main"
static void step_body(char *out, size_t cap, const char *id, const char *kind, const char *prev,
                      int64_t seq)
{
    snprintf(out, cap,
             "{\"agent_id\":\"" STEP_AGENT "\",\"content\":\"c%lld\",\"content_type\":"
             "\"text/plain\",\"created_at\":\"2026-11-29T00:00:0%lld.000Z\",\"id\":\"%s\","
             "\"kind\":\"%s\",\"metadata\":null,\"payload_id\":null,\"prev_id\":\"%s\","
             "\"run_id\":\"0190aaaa-0000-7000-8000-00000000b001\",\"seq\":%lld,"
             "\"thread_id\":\"" STEP_THREAD "\",\"tokens\":1}",
             (long long)seq, (long long)seq, id, kind, prev, (long long)seq);
}

static char step_bodies[6][600];
static const char *const step_ids[6] = {
    "0190aaaa-0000-7000-8000-00000000c010", "0190aaaa-0000-7000-8000-00000000c011",
    "0190aaaa-0000-7000-8000-00000000c012", "0190aaaa-0000-7000-8000-00000000d020",
    "0190aaaa-0000-7000-8000-00000000d021", "0190aaaa-0000-7000-8000-00000000d022"};

static void step_write(struct vg_store *s, int from, int to)
{
    static const char *const kinds[] = {"thought", "action", "toolResult"};
    for (int i = from; i < to; i++) {
        step_body(step_bodies[i], sizeof step_bodies[i], step_ids[i], kinds[i % 3],
                  i ? step_ids[i - 1] : "0190aaaa-0000-7000-8000-00000000c000", i + 1);
        struct vg_record r = {
            "message",     step_ids[i], STEP_AGENT, STEP_THREAD,
            kinds[i % 3],  i + 1,       0,          1795900000000 + (i + 1) * 1000,
            step_bodies[i]};
        ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    }
}

static int step_join(void *user, const struct vg_record *r)
{
    char *out = user;
    int i = 0;
    while (i < 6 && strcmp(step_ids[i], r->id) != 0)
        i++;
    ASSERT(i < 6);
    ASSERT_STREQ(r->body, step_bodies[i]);
    size_t len = strlen(out);
    snprintf(out + len, 1024 - len, "%d,", i);
    return 0;
}

/* Every message of the thread, by the thread both ways and by id. */
static void step_check(struct vg_store *s, int n, const char *up, const char *down)
{
    char got[1024] = "";
    struct vg_query q = {.kind = "message", .owner = STEP_AGENT, .k1 = STEP_THREAD};
    ASSERT_OK(vg_store_scan(s, &q, step_join, got, E));
    ASSERT_STREQ(got, up);
    got[0] = '\0';
    q.descending = 1;
    ASSERT_OK(vg_store_scan(s, &q, step_join, got, E));
    ASSERT_STREQ(got, down);
    for (int i = 0; i < n; i++) {
        got[0] = '\0';
        ASSERT_OK(vg_store_get(s, "message", step_ids[i], step_join, got, E));
    }
}

TEST(a_schema_23_stores_messages_keep_their_rows_and_new_steps_share_one)
{
    int latest = latest_version();
    ASSERT(latest >= 24);
    char path[4200];
    snprintf(path, sizeof path, "%s/s23.db", dir);
    struct vg_store_options o = {.create_if_missing = 1, .target_version = 23};
    struct vg_store *s = NULL;
    ASSERT_OK(vg_store_open(path, &o, &s, E));
    step_write(s, 0, 3); /* schema 23: a row a message, whatever the ids */
    step_check(s, 3, "0,1,2,", "2,1,0,");
    vg_store_close(s);
    ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE kind = 'message'"), 3);

    struct vg_store_options now = {0};
    ASSERT_OK(vg_store_open(path, &now, &s, E));
    ASSERT_EQ(schema_version(s), latest);
    step_check(s, 3, "0,1,2,", "2,1,0,");
    step_write(s, 3, 6); /* the next step's action and result join its thought's row */
    step_check(s, 6, "0,1,2,3,4,5,", "5,4,3,2,1,0,");
    vg_store_close(s);
    ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE kind = 'message'"), 4);
}

/* A new store keeps no page for the meta table of schema 1 (nothing reads it): made and dropped
 * on the way to the latest schema, its two pages are free, and the first rows take them rather
 * than growing the file. */
TEST(a_new_stores_first_rows_take_the_pages_of_the_dropped_meta_table)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/new-meta.db", dir);
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_store *s = NULL;
    ASSERT_OK(vg_store_open(path, &o, &s, E));
    ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM sqlite_schema WHERE tbl_name = "
                               "'vigil_meta'"),
              0);
    int pages = sqlite_int(path, "PRAGMA page_count");
    ASSERT_EQ(sqlite_int(path, "PRAGMA freelist_count"), 2);
    /* Three rows of 2,000 B: the table's root page splits into two leaves. */
    char body[2100];
    memset(body, 'x', sizeof body);
    memcpy(body, "{\"t\":\"", 6);
    memcpy(body + 1995, "\"}", 3);
    ASSERT_OK(vg_store_begin(s, E));
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "r%d", i);
        struct vg_record r = {"state", id, "a", "", "", i + 1, 0, 1000, body};
        ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    }
    ASSERT_OK(vg_store_commit(s, E));
    vg_store_close(s);
    ASSERT_EQ(sqlite_int(path, "PRAGMA freelist_count"), 0);
    ASSERT_EQ(sqlite_int(path, "PRAGMA page_count"), pages);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s", vg_test_tmpdir("migrations"));
    RUN(upgrade_from_every_version);
    RUN(uuid_keys_stored_as_bytes_read_back_as_written);
    RUN(newer_schema_refused_untouched);
    RUN(a_schema_20_stores_ids_read_as_written_after_the_upgrade);
    RUN(a_schema_23_stores_messages_keep_their_rows_and_new_steps_share_one);
    RUN(a_new_stores_first_rows_take_the_pages_of_the_dropped_meta_table);
    return 0;
}
