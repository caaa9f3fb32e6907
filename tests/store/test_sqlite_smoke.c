/*
 * test_sqlite_smoke.c: the SQLite adapter opens, migrates, and round-trips records through put,
 * get, update (with a stale-revision refusal), scan with a keyset cursor, and nested
 * transactions. The full conformance suite lives in tests/conformance/store/.
 */
#include "helpers/test.h"

#include "store/store.h"

#include <sqlite3.h>
#include <string.h>

static int collect(void *user, const struct vg_record *r)
{
    char *out = user;
    size_t n = strlen(out);
    snprintf(out + n, 256 - n, "%s,", r->id);
    return 0;
}

TEST(round_trip)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/s.db", vg_test_tmpdir("sqlite_smoke"));
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_store *s = NULL;
    ASSERT_OK(vg_store_open(path, &o, &s, E));
    struct vg_record r = {.kind = "message",
                          .id = "m1",
                          .owner = "a",
                          .k1 = "t",
                          .seq = 1,
                          .at = 5,
                          .body = "{\"x\":1}"};
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    ASSERT_CODE(VIGIL_EEXISTS, vg_store_put(s, &r, 0, NULL, NULL));
    int ins = -1;
    ASSERT_OK(vg_store_put(s, &r, VG_PUT_IF_ABSENT, &ins, E));
    ASSERT_EQ(ins, 0);
    r.id = "m2";
    r.seq = 2;
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    r.id = "m3";
    r.seq = 3;
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    ASSERT_OK(vg_store_begin(s, E)); /* savepoint */
    r.id = "m4";
    r.seq = 4;
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    ASSERT_OK(vg_store_rollback(s, E)); /* m4 gone, m3 stays */
    ASSERT_OK(vg_store_commit(s, E));

    char ids[256] = "";
    struct vg_query q = {.kind = "message", .owner = "a", .k1 = "t"};
    ASSERT_OK(vg_store_scan(s, &q, collect, ids, E));
    ASSERT_STREQ(ids, "m1,m2,m3,");
    ids[0] = '\0';
    q.has_after = 1;
    q.after_seq = 1;
    q.after_id = "m1";
    q.limit = 1;
    ASSERT_OK(vg_store_scan(s, &q, collect, ids, E));
    ASSERT_STREQ(ids, "m2,");

    struct vg_record *got = NULL;
    ASSERT_OK(vg_store_get_copy(s, "message", "m2", &got, E));
    ASSERT_EQ(got->rev, 1);
    got->body = "{\"x\":2}";
    ASSERT_OK(vg_store_update(s, got, 1, E));
    ASSERT_CODE(VIGIL_ECONFLICT, vg_store_update(s, got, 1, NULL));
    vg_free(got);
    ASSERT_OK(vg_store_get_copy(s, "message", "m2", &got, E));
    ASSERT_EQ(got->rev, 2);
    ASSERT_STREQ(got->body, "{\"x\":2}");
    vg_free(got);
    int64_t removed = 0;
    ASSERT_OK(vg_store_remove_owner(s, "a", &removed, E));
    ASSERT_EQ(removed, 3);
    vg_store_close(s);
}

/* Whether the file holds the bytes of needle: 1 or 0 (0 when there is no such file), -1 when it
 * is too big to read whole here (a partial read must not pass for a clean file). */
static int file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    static char data[1 << 20];
    size_t n = fread(data, 1, sizeof data, f), k = strlen(needle);
    int whole = feof(f) != 0;
    fclose(f);
    if (!whole)
        return -1;
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(data + i, needle, k) == 0)
            return 1;
    return 0;
}

/* Removed and overwritten rows leave no trace of their text in the file (secure delete, set by
 * vigil whichever SQLite is linked): erasing an agent erases its words. */
TEST(deleted_and_overwritten_rows_are_zeroed)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/z.db", vg_test_tmpdir("sqlite_zeroed"));
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_store *s = NULL;
    ASSERT_OK(vg_store_open(path, &o, &s, E));
    struct vg_record keep = {.kind = "message",
                             .id = "k1",
                             .owner = "kept",
                             .k1 = "t",
                             .seq = 1,
                             .at = 5,
                             .body = "{\"text\":\"still here\"}"};
    struct vg_record gone = {.kind = "message",
                             .id = "g1",
                             .owner = "erased",
                             .k1 = "t",
                             .seq = 1,
                             .at = 5,
                             .body = "{\"text\":\"erase-me-7f3a\"}"};
    struct vg_record edited = {.kind = "note",
                               .id = "n1",
                               .owner = "kept",
                               .k1 = "t",
                               .seq = 1,
                               .at = 5,
                               .body = "{\"text\":\"old-version-9c1e\"}"};
    ASSERT_OK(vg_store_put(s, &keep, 0, NULL, E));
    ASSERT_OK(vg_store_put(s, &gone, 0, NULL, E));
    ASSERT_OK(vg_store_put(s, &edited, 0, NULL, E));
    edited.body = "{\"text\":\"new\"}";
    ASSERT_OK(vg_store_update(s, &edited, 1, E));
    int64_t removed = 0;
    ASSERT_OK(vg_store_remove_owner(s, "erased", &removed, E));
    ASSERT_EQ(removed, 1);
    vg_store_close(s);
    ASSERT_EQ(file_contains(path, "still here"), 1); /* the search itself works */
    ASSERT_EQ(file_contains(path, "erase-me-7f3a"), 0);
    ASSERT_EQ(file_contains(path, "old-version-9c1e"), 0);
    /* The log, if closing left one, holds neither. */
    char wal[4300];
    snprintf(wal, sizeof wal, "%s-wal", path);
    ASSERT_EQ(file_contains(wal, "erase-me-7f3a"), 0);
    ASSERT_EQ(file_contains(wal, "old-version-9c1e"), 0);
}

/* The SQLite linked is built as vigil needs, whichever it is: its header and library agree (a
 * build that found the system's header first would not), stores open through vigil's log VFS,
 * whose platform VFS below writes with pwrite (without its configure's results SQLite seeks,
 * then writes: twice the system calls), and it has FTS5 (the text index). When scripts/sqlite.sh
 * built it (VIGIL_OWN_SQLITE), it has the options that build promises: lookaside on, no
 * pre-update hook or session extension. The store opened first (round_trip) installed vigil's
 * SQLite settings. */
TEST(linked_sqlite_is_the_one_built)
{
    ASSERT_EQ(sqlite3_libversion_number(), SQLITE_VERSION_NUMBER);
    ASSERT_STREQ(sqlite3_sourceid(), SQLITE_SOURCE_ID);
    /* Stores open through the log VFS (src/store/sqlite/log_vfs.c), by name: the process's
     * default VFS stays the platform's. */
    ASSERT(sqlite3_vfs_find("vigil") != NULL);
    ASSERT(strcmp(sqlite3_vfs_find(NULL)->zName, "vigil") != 0);
    sqlite3_vfs *vfs = sqlite3_vfs_find("unix");
    ASSERT(vfs && vfs->iVersion >= 3);
    ASSERT(vfs->xGetSystemCall(vfs, "pwrite64") || vfs->xGetSystemCall(vfs, "pwrite"));
    ASSERT(sqlite3_compileoption_used("ENABLE_FTS5"));
#ifdef VIGIL_OWN_SQLITE
    ASSERT(!sqlite3_compileoption_used("OMIT_LOOKASIDE"));
    ASSERT(!sqlite3_compileoption_used("ENABLE_PREUPDATE_HOOK"));
    ASSERT(!sqlite3_compileoption_used("ENABLE_SESSION"));
    ASSERT(sqlite3_compileoption_used("THREADSAFE=1"));
    /* Lookaside really serves a statement's small allocations, except under AddressSanitizer,
     * where vigil turns it off so that ASan sees every allocation. */
    sqlite3 *db = NULL;
    int cur = 0, high = 0;
    ASSERT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
    ASSERT_EQ(
        sqlite3_exec(db, "CREATE TABLE t(a, b); INSERT INTO t VALUES (1, 'x');", NULL, NULL, NULL),
        SQLITE_OK);
    ASSERT_EQ(sqlite3_db_status(db, SQLITE_DBSTATUS_LOOKASIDE_USED, &cur, &high, 0), SQLITE_OK);
#ifdef VG_ASAN
    ASSERT_EQ(high, 0);
#else
    ASSERT(high > 0);
#endif
    sqlite3_close(db);
#endif
}

TEST(the_page_cache_is_sized_on_request)
{
    /* The daemon's connections keep a small page cache each (VG_STORE_DAEMON_CACHE_KIB); what that
     * saves is a figure of bench/bench_serve.sh (docs/internals/PERF.md). */
    char path[4200];
    snprintf(path, sizeof path, "%s/c.db", vg_test_tmpdir("sqlite_cache"));
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_store *s = NULL;
    ASSERT_OK(vg_store_open(path, &o, &s, E));
    int kib = VG_STORE_DAEMON_CACHE_KIB, tiny = 8;
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_CACHE_KIB, &kib, E));
    ASSERT_CODE(VIGIL_EINVAL, vg_store_control(s, VG_STORE_CTRL_CACHE_KIB, &tiny, NULL));
    struct vg_record r = {.kind = "k", .id = "a", .seq = 1, .body = "{}"};
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E)); /* and the store goes on */
    vg_store_close(s);
}

int main(void)
{
    RUN(round_trip);
    RUN(the_page_cache_is_sized_on_request);
    RUN(linked_sqlite_is_the_one_built);
    RUN(deleted_and_overwritten_rows_are_zeroed);
    return 0;
}
