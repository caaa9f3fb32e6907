/*
 * test_sqlite_layout.c: where the SQLite adapter puts rows in the file, which decides how many
 * pages a commit writes to the log. The rows a run rewrites at most of its commits (its record
 * and projection, head pointers, the thread's step count: the "hot" kinds of sqlite.c) are
 * inserted at the table's left end, apart from the rows that are only appended, so a commit
 * that rewrites them writes one or two leaves, not one for each.
 */
#include "helpers/test.h"

#include "base/alloc.h"
#include "helpers/fault_alloc.h"
#include "store/store.h"

#include <limits.h>

#include <sqlite3.h>
#include <string.h>

static const char *const HOT[] = {"run", "run_projection", "link", "link", "loop_thread"};
#define N_HOT 5
#define N_RUNS 6

static void hot_id(char *id, size_t n, int run, int i)
{
    snprintf(id, n, "r%d-%s-%d", run, HOT[i], i);
}

/* A body of exactly `size` bytes of JSON, its letter telling versions apart. */
static void body_of(char *body, size_t size, char letter)
{
    memset(body, letter, size);
    memcpy(body, "{\"t\":\"", 6);
    memcpy(body + size - 2, "\"}", 3);
}

static vigil_code put(struct vg_store *s, const char *kind, const char *id, const char *owner,
                      size_t size, vigil_error *err)
{
    char body[1024];
    body_of(body, size, 'a');
    struct vg_record r = {
        .kind = kind, .id = id, .owner = owner, .k1 = "t", .seq = 1, .body = body};
    return vg_store_put(s, &r, 0, NULL, err);
}

/* A run as the loop writes one: its hot rows created among messages and journal records. */
static vigil_code write_run(struct vg_store *s, int run, vigil_error *err)
{
    char id[64], owner[32];
    snprintf(owner, sizeof owner, "agent-%d", run % 2);
    vigil_code rc = vg_store_begin(s, err);
    for (int i = 0; i < N_HOT && rc == VIGIL_OK; i++) {
        hot_id(id, sizeof id, run, i);
        rc = put(s, HOT[i], id, owner, 300, err);
        for (int j = 0; j < 4 && rc == VIGIL_OK; j++) {
            snprintf(id, sizeof id, "r%d-m%d-%d", run, i, j);
            rc = put(s, j % 2 ? "message" : "journal", id, owner, 600, err);
        }
    }
    return vg_store_end(s, rc, err);
}

/* Frames in the log now, from a connection of SQLite's own. */
static int log_frames(sqlite3 *db)
{
    int frames = -1, done = -1;
    if (sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, &frames, &done) != SQLITE_OK)
        return -1;
    return frames;
}

TEST(a_commit_that_rewrites_a_runs_hot_rows_writes_one_or_two_leaves)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/layout.db", vg_test_tmpdir("sqlite_layout"));
    struct vg_store *s = vg_test_store_open(path, 2000);
    ASSERT(s);
    for (int run = 0; run < N_RUNS; run++)
        ASSERT_OK(write_run(s, run, E));

    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_CHECKPOINT, NULL, E)); /* an empty log */
    sqlite3 *db = NULL;
    ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
    /* A first read opens the connection's log (a checkpoint before it reports none). */
    ASSERT_EQ(sqlite3_exec(db, "SELECT count(*) FROM records", NULL, NULL, NULL), SQLITE_OK);
    ASSERT_EQ(log_frames(db), 0);

    /* The last run's hot rows, each rewritten at the same size (no index entry moves). */
    ASSERT_OK(vg_store_begin(s, E));
    for (int i = 0; i < N_HOT; i++) {
        char id[64], body[1024];
        hot_id(id, sizeof id, N_RUNS - 1, i);
        body_of(body, 300, 'b');
        struct vg_record r = {
            .kind = HOT[i], .id = id, .owner = "agent-1", .k1 = "t", .seq = 1, .body = body};
        ASSERT_OK(vg_store_update(s, &r, 1, E));
    }
    ASSERT_OK(vg_store_commit(s, E));
    int frames = log_frames(db);
    /* Among the 20 rows of 600 bytes created between them, the five would be on three to four
     * leaves; together they take 1.5 KB, on one leaf or across the border of two. */
    ASSERT(frames >= 1 && frames <= 2);

    /* The hot rows are apart from the others: every one below every appended row. */
    sqlite3_stmt *st = NULL;
    ASSERT_EQ(sqlite3_prepare_v2(db,
                                 "SELECT (SELECT max(rowid) FROM records WHERE kind IN ('run', "
                                 "'run_projection', 'link', 'loop_thread')) < (SELECT min(rowid) "
                                 "FROM records WHERE kind IN ('message', 'journal'))",
                                 -1, &st, NULL),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    ASSERT_EQ(sqlite3_column_int(st, 0), 1);
    sqlite3_finalize(st);
    sqlite3_close(db);

    /* Everything reads back where the store's queries look for it, after reopening too. */
    vg_store_close(s);
    s = vg_test_store_open(path, 2000);
    ASSERT(s);
    ASSERT_EQ(vg_test_store_count(s, "link"), 2 * N_RUNS);
    ASSERT_EQ(vg_test_store_count(s, "run"), N_RUNS);
    ASSERT_EQ(vg_test_store_count(s, "message"), 10 * N_RUNS);
    struct vg_record *got = NULL;
    char id[64];
    hot_id(id, sizeof id, N_RUNS - 1, 1);
    ASSERT_OK(vg_store_get_copy(s, "run_projection", id, &got, E));
    ASSERT_EQ(got->rev, 2);
    ASSERT(strstr(got->body, "bbbb") != NULL);
    vg_free(got);
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, E));
    vg_store_close(s);
}

/* The kinds whose keys an update is taken to keep (sqlite.c tries first the statement that sets
 * neither k1 nor k2) still take new keys when an update brings them, and their updates still
 * check the revision and the record's existence. */
TEST(an_update_that_changes_keys_taken_to_stay_writes_them)
{
    static const char *const kinds[] = {"run_projection", "loop_thread", "run", "note"};
    char path[4200];
    snprintf(path, sizeof path, "%s/keys.db", vg_test_tmpdir("sqlite_layout_keys"));
    struct vg_store *s = vg_test_store_open(path, 2000);
    ASSERT(s);
    for (size_t i = 0; i < VG_ARRAY_LEN(kinds); i++) {
        struct vg_record r = {.kind = kinds[i],
                              .id = "x",
                              .owner = "agent-1",
                              .k1 = "a",
                              .k2 = "p",
                              .seq = 1,
                              .body = "{\"v\":1}"};
        ASSERT_OK(vg_store_begin(s, E));
        ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
        r.body = "{\"v\":2}"; /* keys kept */
        ASSERT_OK(vg_store_update(s, &r, 1, E));
        r.k1 = "b"; /* keys changed */
        r.k2 = "q";
        r.body = "{\"v\":3}";
        ASSERT_OK(vg_store_update(s, &r, 2, E));
        ASSERT_CODE(VIGIL_ECONFLICT, vg_store_update(s, &r, 2, NULL));
        r.id = "missing";
        ASSERT_CODE(VIGIL_ENOTFOUND, vg_store_update(s, &r, 1, NULL));
        ASSERT_OK(vg_store_commit(s, E));
        struct vg_record *got = NULL;
        ASSERT_OK(vg_store_get_copy(s, kinds[i], "x", &got, E));
        ASSERT_STREQ(got->k1, "b");
        ASSERT_STREQ(got->k2, "q");
        ASSERT_STREQ(got->body, "{\"v\":3}");
        ASSERT_EQ(got->rev, 3);
        vg_free(got);
    }
    vg_store_close(s);
    /* And so after reopening (nothing cached). */
    s = vg_test_store_open(path, 2000);
    ASSERT(s);
    for (size_t i = 0; i < VG_ARRAY_LEN(kinds); i++) {
        struct vg_record *got = NULL;
        ASSERT_OK(vg_store_get_copy(s, kinds[i], "x", &got, E));
        ASSERT_STREQ(got->k1, "b");
        ASSERT_STREQ(got->k2, "q");
        vg_free(got);
    }
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, E));
    vg_store_close(s);
}

struct obs_seen {
    int n;
    int64_t last_seq;
    int wrong;
};

static int obs_cb(void *user, const struct vg_record *r)
{
    struct obs_seen *o = user;
    o->wrong |= strcmp(r->owner, "agent-a") != 0 || strcmp(r->k2, "observation") != 0 ||
                (o->n > 0 && r->seq >= o->last_seq);
    o->last_seq = r->seq;
    o->n++;
    return 0;
}

/* The first column of the first row of a query on the store at path. */
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

/* SQLite's plan of a query on the store at path, its steps' details joined by ";". */
static void query_plan(const char *path, const char *sql, char *plan, size_t size)
{
    char explain[1024];
    snprintf(explain, sizeof explain, "EXPLAIN QUERY PLAN %s", sql);
    sqlite3 *db = NULL;
    ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    ASSERT_EQ(sqlite3_prepare_v2(db, explain, -1, &st, NULL), SQLITE_OK);
    size_t len = 0;
    plan[0] = '\0';
    while (sqlite3_step(st) == SQLITE_ROW && len < size - 1)
        len += (size_t)snprintf(plan + len, size - len, "%s;",
                                (const char *)sqlite3_column_text(st, 3));
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* An agent's newest observations (what every model call's context reads) are found in an index
 * that leads with the agent: their cost does not grow with other agents' notes. Before schema
 * 10 they were walked out of (kind, k2, seq, id), every agent's notes newest first, and
 * `vigil serve` took longer on every turn. */
TEST(an_agents_observations_are_read_without_walking_other_agents)
{
    char path[4200], id[64];
    snprintf(path, sizeof path, "%s/obs.db", vg_test_tmpdir("sqlite_layout_obs"));
    struct vg_store *s = vg_test_store_open(path, 2000);
    ASSERT(s);
    ASSERT_OK(vg_store_begin(s, E));
    for (int i = 0; i < 300; i++) {
        snprintf(id, sizeof id, "m%04d", i);
        const char *owner = i % 100 == 7 ? "agent-a" : "agent-b";
        struct vg_record r = {.kind = "message",
                              .id = id,
                              .owner = owner,
                              .k1 = "t",
                              .k2 = i % 3 ? "observation" : "thought",
                              .seq = i + 1,
                              .body = "{}"};
        ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    }
    ASSERT_OK(vg_store_commit(s, E));
    struct obs_seen seen = {0};
    struct vg_query q = {
        .kind = "message", .owner = "agent-a", .k2 = "observation", .descending = 1, .limit = 50};
    ASSERT_OK(vg_store_scan(s, &q, obs_cb, &seen, E));
    ASSERT_EQ(seen.n, 2); /* m0007 is a thought; m0107 and m0207 are agent-a's notes */
    ASSERT_EQ(seen.wrong, 0);
    vg_store_close(s);

    /* The plan of that query, as the adapter words it for messages (their index bits named). */
    char plan[512];
    query_plan(path,
               "SELECT id FROM records WHERE kind='message' AND ix & 64 AND ix & 128 AND "
               "owner='agent-a' AND k2='observation' ORDER BY seq DESC, id DESC LIMIT 50",
               plan, sizeof plan);
    ASSERT_CONTAINS(plan, "records_agent_k2 (owner=? AND kind=? AND k2=?)");
    ASSERT(!strstr(plan, "TEMP B-TREE"));
}

/* A store of `runs` runs as the loop writes them: a run record and a 1.8 KB projection rewritten
 * at each of 8 commits among the run's appended rows, and, with settle, both settled once the
 * run has ended (VG_STORE_CTRL_SETTLE). Its pages. */
static int64_t pages_after_runs(const char *path, int runs, int settle)
{
    struct vg_store *s = vg_test_store_open(path, 2000);
    vigil_error e = {0};
    vigil_code rc = s ? VIGIL_OK : VIGIL_EIO;
    char id[64], body[2048];
    for (int run = 0; rc == VIGIL_OK && run < runs; run++) {
        static const char *const kinds[] = {"run", "run_projection"};
        static const size_t sizes[] = {60, 1800};
        for (int step = 0; rc == VIGIL_OK && step < 8; step++) {
            rc = vg_store_begin(s, &e);
            for (int k = 0; rc == VIGIL_OK && k < 2; k++) {
                snprintf(id, sizeof id, "run-%d", run);
                body_of(body, sizes[k], (char)('a' + step));
                struct vg_record r = {.kind = kinds[k],
                                      .id = id,
                                      .owner = "agent",
                                      .k1 = "t",
                                      .seq = 1,
                                      .body = body};
                rc = step ? vg_store_update(s, &r, step, &e) : vg_store_put(s, &r, 0, NULL, &e);
            }
            for (int j = 0; rc == VIGIL_OK && j < 4; j++) {
                snprintf(id, sizeof id, "r%d-s%d-%d", run, step, j);
                rc = put(s, j % 2 ? "message" : "journal", id, "agent", 300, &e);
            }
            snprintf(id, sizeof id, "run-%d", run);
            if (rc == VIGIL_OK && settle && step == 7)
                rc = vg_store_settle(s, "run", id, &e);
            if (rc == VIGIL_OK && settle && step == 7)
                rc = vg_store_settle(s, "run_projection", id, &e);
            rc = vg_store_end(s, rc, &e);
        }
    }
    int64_t size = -1;
    if (rc == VIGIL_OK)
        rc = vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, &e);
    if (rc == VIGIL_OK)
        rc = vg_store_control(s, VG_STORE_CTRL_FILE_SIZE, &size, &e);
    if (rc != VIGIL_OK)
        fprintf(stderr, "pages_after_runs: %s\n", e.message);
    if (s)
        vg_store_close(s);
    return rc == VIGIL_OK ? size / 4096 : -1;
}

/* A finished run's record and projection, settled, leave the left end: the next runs' hot rows
 * no longer split a leaf that then keeps a finished run's two rows nearly empty. */
TEST(a_finished_runs_settled_rows_leave_no_leaf_nearly_empty)
{
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/kept.db", vg_test_tmpdir("sqlite_layout_settle"));
    snprintf(b, sizeof b, "%s/settled.db", vg_test_tmpdir("sqlite_layout_settle"));
    int64_t kept = pages_after_runs(a, 40, 0), settled = pages_after_runs(b, 40, 1);
    fprintf(stderr, "# pages: kept %lld, settled %lld\n", (long long)kept, (long long)settled);
    ASSERT(kept > 0 && settled > 0);
    /* 40 runs: 188 pages kept, 172 settled when written (the same rows: deterministic). */
    ASSERT(settled + 10 < kept);

    /* The settled rows read and update as before, after reopening too. */
    struct vg_store *s = vg_test_store_open(b, 2000);
    ASSERT(s);
    struct vg_record *got = NULL;
    ASSERT_OK(vg_store_get_copy(s, "run_projection", "run-3", &got, E));
    ASSERT_EQ(got->rev, 8);
    ASSERT(strstr(got->body, "hhhh") != NULL);
    char body[2048];
    body_of(body, 1800, 'z');
    struct vg_record r = {.kind = "run_projection",
                          .id = "run-3",
                          .owner = "agent",
                          .k1 = "t",
                          .seq = 1,
                          .body = body};
    ASSERT_OK(vg_store_update(s, &r, 8, E));
    ASSERT_OK(vg_store_settle(s, "run_projection", "run-3", E)); /* settled already: no move */
    ASSERT_OK(vg_store_settle(s, "run", "no-such-run", E));      /* absent: nothing to do */
    ASSERT_EQ(vg_test_store_count(s, "run"), 40);
    vg_free(got);
    ASSERT_OK(vg_store_get_copy(s, "run_projection", "run-3", &got, E));
    ASSERT(strstr(got->body, "zzzz") != NULL);
    vg_free(got);
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, E));
    vg_store_close(s);
}

/* Frames in the log now, from a connection of SQLite's own opened at the first call. */
static int frames_now(const char *path, sqlite3 **db)
{
    if (!*db) {
        ASSERT_EQ(sqlite3_open(path, db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(*db, "SELECT count(*) FROM records", NULL, NULL, NULL), SQLITE_OK);
    }
    return log_frames(*db);
}

static void empty_log(struct vg_store *s, const char *path, sqlite3 **db)
{
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_CHECKPOINT, NULL, E));
    ASSERT_EQ(frames_now(path, db), 0);
}

/* Rows of 600 bytes of a kind only ever appended, between the others (a DAG's tasks, the
 * wakes of runs): about six a leaf. */
static void put_filler(struct vg_store *s, const char *kind, int from, int n)
{
    char id[64];
    for (int i = from; i < from + n; i++) {
        snprintf(id, sizeof id, "%s-%d", kind, i);
        ASSERT_OK(put(s, kind, id, "", 600, E));
    }
}

/* An agent's wake counter and the task graph's stamp are hot rows (sqlite.c): made at their
 * own moments among tasks and wakes, they still share one leaf at the left end, so the
 * dispatcher's commit that starts a task (the counter of the agent it wakes) and moves the
 * graph (the stamp) writes one leaf of them, not one each. */
TEST(an_agents_wake_counter_and_the_graphs_stamp_share_a_leaf)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/counters.db", vg_test_tmpdir("sqlite_layout_counters"));
    struct vg_store *s = vg_test_store_open(path, 2000);
    ASSERT(s);
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(put(s, "task_graph", "default", "", 60, E));
    put_filler(s, "task", 0, 40);
    for (int a = 0; a < 4; a++) {
        char agent[16];
        snprintf(agent, sizeof agent, "agent-%d", a);
        ASSERT_OK(put(s, "wake_count", agent, agent, 8, E));
        put_filler(s, "wake_note", a * 20, 20);
    }
    ASSERT_OK(vg_store_commit(s, E));
    sqlite3 *db = NULL;
    empty_log(s, path, &db);
    for (int a = 0; a < 4; a++) { /* each agent's counter with the stamp, one commit each */
        char agent[16], body[64];
        snprintf(agent, sizeof agent, "agent-%d", a);
        ASSERT_OK(vg_store_begin(s, E));
        body_of(body, 60, 'b');
        struct vg_record g = {
            .kind = "task_graph", .id = "default", .owner = "", .k1 = "t", .seq = 1, .body = body};
        ASSERT_OK(vg_store_update(s, &g, (int64_t)a + 1, E));
        body_of(body, 8, 'c');
        struct vg_record c = {
            .kind = "wake_count", .id = agent, .owner = agent, .k1 = "t", .seq = 1, .body = body};
        ASSERT_OK(vg_store_update(s, &c, 1, E));
        ASSERT_OK(vg_store_commit(s, E));
        ASSERT_EQ(frames_now(path, &db), 1);
        empty_log(s, path, &db);
    }
    sqlite3_close(db);
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, E));
    vg_store_close(s);
}

/* A wake's insert writes its row, its identity entry and two index entries (by agent and
 * status, by status: schema 25), where it wrote four of the latter; each is a leaf of its
 * own index, so a page the commit writes to the log. Its queries still find it. */
TEST(a_wakes_insert_writes_two_index_entries)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/wakes.db", vg_test_tmpdir("sqlite_layout_wakes"));
    struct vg_store *s = vg_test_store_open(path, 2000);
    ASSERT(s);
    ASSERT_OK(vg_store_begin(s, E));
    put_filler(s, "wake_run", 0, 200);
    ASSERT_OK(vg_store_commit(s, E));
    sqlite3 *db = NULL;
    int fewest = 1000, most = 0;
    for (int i = 200; i < 210; i++) {
        empty_log(s, path, &db);
        ASSERT_OK(vg_store_begin(s, E));
        put_filler(s, "wake_run", i, 1);
        ASSERT_OK(vg_store_commit(s, E));
        int frames = frames_now(path, &db);
        fewest = frames < fewest ? frames : fewest;
        most = frames > most ? frames : most;
    }
    sqlite3_close(db);
    /* The table's leaf, records_id, records_agent and records_k1 (before: six, with
     * records_owner_seq, records_owner_k1 and records_seq in place of records_agent); a few
     * more when the file grows
     * (page 1) or the table's last leaf is full (a new one and its parent). */
    ASSERT_EQ(fewest, 4);
    ASSERT(most <= 7);
    struct vg_query by_status = {.kind = "wake_run", .k1 = "t"};
    struct vg_query by_agent = {.kind = "wake_run", .owner = ""};
    int64_t n = 0;
    ASSERT_OK(vg_store_count(s, &by_status, &n, E));
    ASSERT_EQ(n, 210);
    ASSERT_OK(vg_store_count(s, &by_agent, &n, E));
    ASSERT_EQ(n, 210);
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, E));
    vg_store_close(s);
}

/* `steps` steps of agent "a" in two threads taking turns at one counter: both thoughts, then both
 * actions, then both results, so each thread's row (its thought with its two members) spans the
 * other thread's row (docs/internals/STORE.md, "A step's messages in one row"). */
static vigil_code write_interleaved_steps(struct vg_store *s, int steps, vigil_error *err)
{
    static const char *const threads[] = {"t1", "t2"};
    static const char *const kinds[] = {"thought", "action", "toolResult"};
    char id[64];
    int64_t seq = 0;
    vigil_code rc = vg_store_begin(s, err);
    for (int step = 0; step < steps && !rc; step++)
        for (int k = 0; k < 3; k++)
            for (int t = 0; t < 2 && !rc; t++) {
                snprintf(id, sizeof id, "0190aaaa-0000-7000-8000-%06d%05d%x", step, t, k);
                struct vg_record r = {.kind = "message",
                                      .id = id,
                                      .owner = "a",
                                      .k1 = threads[t],
                                      .k2 = kinds[k],
                                      .seq = ++seq,
                                      .body = "{\"c\":\"x\"}"};
                rc = vg_store_put(s, &r, 0, NULL, err);
            }
    return vg_store_end(s, rc, err);
}

struct in_order {
    int n, stop_at, wrong;
    int64_t last;
};

static int in_order_cb(void *user, const struct vg_record *r)
{
    struct in_order *o = user;
    o->wrong += r->seq != o->last + 1;
    o->last = r->seq;
    return ++o->n == o->stop_at;
}

/* An ascending read of an agent's messages without a thread (the spine's verification, a move, a
 * store joining sync) gives each record as its row is read, holding back only the members that
 * rows of other threads come between: a read stopped at its first record allocates for no record
 * past the first row, where holding every record to sort it allocated for each. */
TEST(an_agents_messages_without_a_thread_are_given_as_their_rows_are_read)
{
    char path[4200];
    long allocs[2];
    const int steps[2] = {2, 64};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/steps%d.db", vg_test_tmpdir("sqlite_layout_steps"),
                 steps[i]);
        struct vg_store *s = vg_test_store_open(path, 2000);
        ASSERT(s);
        ASSERT_OK(write_interleaved_steps(s, steps[i], E));
        struct vg_query q = {.kind = "message", .owner = "a"};
        struct in_order stored = {0}, all = {0}, first = {.stop_at = 1};
        ASSERT_OK(vg_store_scan_stored(s, &q, in_order_cb, &stored, E));
        ASSERT_EQ(stored.n, 2 * steps[i]); /* a row a step and thread */
        ASSERT_OK(vg_store_scan(s, &q, in_order_cb, &all, E));
        ASSERT_EQ(all.n, 6 * steps[i]);
        ASSERT_EQ(all.wrong, 0);
        vg_alloc_fail_at(LONG_MAX, 0);
        vigil_code rc = vg_store_scan(s, &q, in_order_cb, &first, NULL);
        allocs[i] = vg_alloc_count();
        vg_alloc_fail_at(0, 0);
        ASSERT_OK(rc);
        ASSERT_EQ(first.n, 1);
        vg_store_close(s);
    }
    /* SQLite sorts an owner's rows of several threads itself (about one allocation a row); holding
     * the records took one a record more (62 x 6 here). */
    ASSERT(allocs[1] - allocs[0] < 6 * (steps[1] - steps[0]));
}

static int count_cb(void *user, const struct vg_record *r)
{
    (void)r;
    ++*(int *)user;
    return 0;
}

/* A link's row is found from either end by type: from (its k1, "type:from") through
 * records_k1, to (its k2, "type:to") through records_k2 (schema 27), so what links to a record
 * costs an index lookup, not a walk of every link. A pointer (an agent's head message, moved at
 * every append) stays out of records_k2: its target is its k2, and an entry there would be one
 * more page each of its moves writes. Its moves are read back all the same.
 * proves: S3-013 (the from and to indexes; links of one type alone: docs/internals/STORE.md) */
TEST(links_are_found_from_either_end_and_pointers_stay_out_of_the_to_index)
{
    char path[4200], id[64], k1[64], k2[64];
    snprintf(path, sizeof path, "%s/links.db", vg_test_tmpdir("sqlite_layout_links"));
    struct vg_store *s = vg_test_store_open(path, 2000);
    ASSERT(s);
    ASSERT_OK(vg_store_begin(s, E));
    for (int i = 0; i < 300; i++) {
        snprintf(id, sizeof id, "tool_effect|m%03d|task-%d", i, i % 30);
        snprintf(k1, sizeof k1, "tool_effect:m%03d", i);
        snprintf(k2, sizeof k2, "tool_effect:task-%d", i % 30);
        struct vg_record r = {
            .kind = "link", .id = id, .owner = "a", .k1 = k1, .k2 = k2, .seq = i + 1, .body = "{}"};
        ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    }
    struct vg_record head = {.kind = "link",
                             .id = "agent_head_message:a",
                             .owner = "a",
                             .k1 = "agent_head_message:a",
                             .k2 = "agent_head_message:m000",
                             .body = "{}"};
    ASSERT_OK(vg_store_put(s, &head, 0, NULL, E));
    ASSERT_OK(vg_store_commit(s, E));
    for (int i = 1; i <= 3; i++) { /* the head moves, as at each append */
        snprintf(k2, sizeof k2, "agent_head_message:m%03d", i);
        head.k2 = k2;
        ASSERT_OK(vg_store_update(s, &head, i, E));
    }

    int to_task = 0, to_head = 0, from_m7 = 0;
    struct vg_query q_to = {.kind = "link", .k2 = "tool_effect:task-7"};
    struct vg_query q_head = {.kind = "link", .k2 = "agent_head_message:m003"};
    struct vg_query q_from = {.kind = "link", .k1 = "tool_effect:m007"};
    ASSERT_OK(vg_store_scan(s, &q_to, count_cb, &to_task, E));
    ASSERT_OK(vg_store_scan(s, &q_head, count_cb, &to_head, E));
    ASSERT_OK(vg_store_scan(s, &q_from, count_cb, &from_m7, E));
    ASSERT_EQ(to_task, 10);
    ASSERT_EQ(to_head, 1); /* answered without the index, as any query of a lean kind */
    ASSERT_EQ(from_m7, 1);
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, E));
    vg_store_close(s);

    ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records INDEXED BY records_k2 WHERE "
                               "kind = 'link' AND ix & 8 AND k2 = 'tool_effect:task-7'"),
              10);
    ASSERT_EQ(sqlite_int(path, "SELECT count(*) FROM records WHERE kind = 'link' AND "
                               "ix & 8 AND id LIKE 'agent_head_message:%'"),
              0);
    /* The plans of both ends' queries, as the adapter words them for links. */
    char plan[512];
    query_plan(path,
               "SELECT id FROM records WHERE kind='link' AND ix & 4 AND ix & 8 AND ix & 32 AND "
               "k2='tool_effect:task-7' ORDER BY seq ASC, id ASC",
               plan, sizeof plan);
    ASSERT_CONTAINS(plan, "records_k2 (kind=? AND k2=?)");
    ASSERT(!strstr(plan, "TEMP B-TREE"));
    query_plan(path,
               "SELECT id FROM records WHERE kind='link' AND ix & 4 AND ix & 32 AND "
               "k1='tool_effect:m007' ORDER BY seq ASC, id ASC",
               plan, sizeof plan);
    ASSERT_CONTAINS(plan, "records_k1 (kind=? AND k1=?)");
    ASSERT(!strstr(plan, "TEMP B-TREE"));
}

int main(void)
{
    RUN(a_commit_that_rewrites_a_runs_hot_rows_writes_one_or_two_leaves);
    RUN(a_finished_runs_settled_rows_leave_no_leaf_nearly_empty);
    RUN(an_update_that_changes_keys_taken_to_stay_writes_them);
    RUN(an_agents_observations_are_read_without_walking_other_agents);
    RUN(an_agents_wake_counter_and_the_graphs_stamp_share_a_leaf);
    RUN(a_wakes_insert_writes_two_index_entries);
    RUN(an_agents_messages_without_a_thread_are_given_as_their_rows_are_read);
    RUN(links_are_found_from_either_end_and_pointers_stay_out_of_the_to_index);
    return 0;
}
