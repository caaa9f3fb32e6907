/*
 * test_sqlite_record_cache.c: the records the SQLite adapter keeps between transactions
 * (src/store/sqlite/record_cache.h). What must hold: a read inside a transaction returns what
 * the database holds at that moment, never what the cache kept from before: after another
 * connection's commit, after this connection's own updates, inserts and deletes, and after any
 * rollback, whole or to a savepoint. And the cache itself: bounded, least recently used out
 * first, big records not kept.
 */
#include "helpers/test.h"

#include "helpers/fault_vfs.h"
#include "store/sqlite/record_cache.h"
#include "store/store.h"

struct seen {
    char body[256];
    int64_t rev;
};

static int seen_cb(void *user, const struct vg_record *r)
{
    struct seen *s = user;
    snprintf(s->body, sizeof s->body, "%s", r->body);
    s->rev = r->rev;
    return 1;
}

/* The body of note X as a read on s sees it now; "" when there is none. */
static struct seen read_x(struct vg_store *s)
{
    struct seen out = {"", 0};
    vigil_error err = {0};
    vigil_code rc = vg_store_get(s, "note", "x", seen_cb, &out, &err);
    if (rc && rc != VIGIL_ENOTFOUND)
        fprintf(stderr, "read x: %s\n", err.message);
    return out;
}

static vigil_code write_x(struct vg_store *s, const char *body, int64_t rev, vigil_error *err)
{
    struct vg_record r = {
        .kind = "note", .id = "x", .owner = "a", .k1 = "", .k2 = "", .seq = 1, .body = body};
    return rev ? vg_store_update(s, &r, rev, err) : vg_store_put(s, &r, 0, NULL, err);
}

static struct vg_store *open_store(const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/c.db", vg_test_tmpdir(name));
    return vg_test_store_open(path, 60000);
}

/* A record read (and kept) in one transaction, then changed by another connection: the next
 * transaction reads the new version. */
TEST(a_record_another_connection_changed_is_read_fresh)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/c.db", vg_test_tmpdir("record_cache_other"));
    struct vg_store *a = vg_test_store_open(path, 60000), *b = vg_test_store_open(path, 60000);
    ASSERT(a && b);
    ASSERT_OK(write_x(a, "{\"v\":1}", 0, E));
    for (int round = 0; round < 3; round++) {
        ASSERT_OK(vg_store_begin(a, E));
        struct seen s = read_x(a);
        ASSERT_EQ(s.rev, round + 1);
        ASSERT_OK(vg_store_commit(a, E));
        char body[32];
        snprintf(body, sizeof body, "{\"v\":%d}", round + 2);
        ASSERT_OK(write_x(b, body, round + 1, E));
        ASSERT_OK(vg_store_begin(a, E));
        s = read_x(a);
        ASSERT_STREQ(s.body, body);
        ASSERT_EQ(s.rev, round + 2);
        ASSERT_OK(vg_store_commit(a, E));
    }
    vg_store_close(a);
    vg_store_close(b);
}

/* A read batch's reads (vg_store_read_batch) may be served from what the cache kept, but only
 * while nothing was committed since: a record kept in a write transaction, then changed by
 * another connection, is read fresh in the next batch, whether it is the batch's first read or
 * follows others. */
TEST(a_read_batch_reads_a_record_another_connection_changed_fresh)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/c.db", vg_test_tmpdir("record_cache_batch"));
    struct vg_store *a = vg_test_store_open(path, 60000), *b = vg_test_store_open(path, 60000);
    ASSERT(a && b);
    ASSERT_OK(write_x(a, "{\"v\":1}", 0, E));
    for (int round = 0; round < 4; round++) {
        ASSERT_OK(vg_store_begin(a, E));
        ASSERT_EQ(read_x(a).rev, round + 1); /* kept */
        ASSERT_OK(vg_store_commit(a, E));
        vg_store_read_batch(a, 1);
        ASSERT_EQ(read_x(a).rev, round + 1);
        ASSERT_EQ(read_x(a).rev, round + 1);
        vg_store_read_batch(a, 0);
        char body[32];
        snprintf(body, sizeof body, "{\"v\":%d}", round + 2);
        ASSERT_OK(write_x(b, body, round + 1, E));
        vg_store_read_batch(a, 1);
        if (round % 2) { /* the batch's snapshot taken first by another read */
            struct seen other = {"", 0};
            ASSERT_CODE(VIGIL_ENOTFOUND, vg_store_get(a, "note", "y", seen_cb, &other, NULL));
        }
        struct seen s = read_x(a);
        ASSERT_STREQ(s.body, body);
        ASSERT_EQ(s.rev, round + 2);
        vg_store_read_batch(a, 0);
    }
    vg_store_close(a);
    vg_store_close(b);
}

/* A record read as absent is kept as absent, and read fresh once it exists: inserted by another
 * connection (in a later transaction or read batch) or by this one. A kill switch is such a
 * record: absent on every step, until someone turns it on. */
TEST(an_absent_record_is_read_fresh_once_it_exists)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/c.db", vg_test_tmpdir("record_cache_absent"));
    struct vg_store *a = vg_test_store_open(path, 60000), *b = vg_test_store_open(path, 60000);
    ASSERT(a && b);
    ASSERT_OK(vg_store_begin(a, E));
    ASSERT_STREQ(read_x(a).body, ""); /* kept as absent */
    ASSERT_STREQ(read_x(a).body, "");
    ASSERT_OK(vg_store_commit(a, E));
    vg_store_read_batch(a, 1);
    ASSERT_STREQ(read_x(a).body, "");
    ASSERT_STREQ(read_x(a).body, "");
    vg_store_read_batch(a, 0);
    ASSERT_OK(write_x(b, "{\"v\":1}", 0, E)); /* another connection inserts it */
    vg_store_read_batch(a, 1);
    ASSERT_STREQ(read_x(a).body, "{\"v\":1}");
    vg_store_read_batch(a, 0);
    ASSERT_OK(vg_store_begin(a, E));
    ASSERT_STREQ(read_x(a).body, "{\"v\":1}");
    ASSERT_OK(vg_store_remove(a, "note", "x", E));
    ASSERT_STREQ(read_x(a).body, "");
    ASSERT_OK(write_x(a, "{\"v\":2}", 0, E)); /* this connection inserts it over its absence */
    ASSERT_STREQ(read_x(a).body, "{\"v\":2}");
    ASSERT_OK(vg_store_commit(a, E));
    vg_store_close(a);
    vg_store_close(b);
}

/* This connection's own writes: an update is read back as written; a rollback, whole or to a
 * savepoint, takes the read back to what is committed. */
TEST(own_updates_and_rollbacks_are_read_exactly)
{
    struct vg_store *a = open_store("record_cache_own");
    ASSERT(a);
    ASSERT_OK(write_x(a, "{\"v\":1}", 0, E));

    ASSERT_OK(vg_store_begin(a, E));
    ASSERT_STREQ(read_x(a).body, "{\"v\":1}");
    ASSERT_OK(write_x(a, "{\"v\":2}", 1, E));
    struct seen s = read_x(a);
    ASSERT_STREQ(s.body, "{\"v\":2}");
    ASSERT_EQ(s.rev, 2);
    ASSERT_OK(vg_store_rollback(a, E));

    ASSERT_OK(vg_store_begin(a, E));
    s = read_x(a);
    ASSERT_STREQ(s.body, "{\"v\":1}");
    ASSERT_EQ(s.rev, 1);
    ASSERT_OK(vg_store_begin(a, E)); /* a savepoint */
    ASSERT_OK(write_x(a, "{\"v\":3}", 1, E));
    ASSERT_STREQ(read_x(a).body, "{\"v\":3}");
    ASSERT_OK(vg_store_rollback(a, E));
    ASSERT_STREQ(read_x(a).body, "{\"v\":1}");
    ASSERT_OK(write_x(a, "{\"v\":4}", 1, E));
    ASSERT_OK(vg_store_commit(a, E));

    ASSERT_OK(vg_store_begin(a, E));
    s = read_x(a);
    ASSERT_STREQ(s.body, "{\"v\":4}");
    ASSERT_EQ(s.rev, 2);
    /* A stale revision still fails: the update checks the row, not what was read. */
    ASSERT_CODE(VIGIL_ECONFLICT, write_x(a, "{\"v\":5}", 1, NULL));
    ASSERT_STREQ(read_x(a).body, "{\"v\":4}");
    ASSERT_OK(vg_store_commit(a, E));
    vg_store_close(a);
}

/* A COMMIT that fails (the disk refuses the log's write, or its sync) rolls the transaction
 * back: what the cache kept of its writes is gone with it, under every commit mode's path. */
TEST(a_failed_commit_leaves_nothing_of_its_writes_kept)
{
    ASSERT_OK(vg_sqlite_fault_vfs_install(E));
    struct vg_store *a = open_store("record_cache_failed_commit");
    ASSERT(a);
    ASSERT_OK(write_x(a, "{\"v\":1}", 0, E));
    unsigned ops[] = {VG_FAULT_WRITE, VG_FAULT_SYNC};
    for (size_t i = 0; i < VG_ARRAY_LEN(ops); i++) {
        ASSERT_OK(vg_store_begin(a, E));
        ASSERT_STREQ(read_x(a).body, "{\"v\":1}"); /* kept */
        ASSERT_OK(write_x(a, "{\"v\":2}", 1, E));  /* the kept copy refreshed */
        ASSERT_EQ(read_x(a).rev, 2);
        vg_sqlite_fault_vfs_arm(1, ops[i], VIGIL_EIO, 1);
        vigil_error err = {0};
        ASSERT_CODE(VIGIL_EIO, vg_store_commit(a, &err));
        ASSERT(vg_sqlite_fault_vfs_hit());
        vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
        ASSERT_OK(vg_store_begin(a, E));
        struct seen s = read_x(a);
        ASSERT_STREQ(s.body, "{\"v\":1}");
        ASSERT_EQ(s.rev, 1);
        ASSERT_OK(vg_store_commit(a, E));
    }
    vg_store_close(a);
}

/* Deletes and inserts over a kept record: the read follows the table. */
TEST(deletes_and_inserts_are_read_exactly)
{
    struct vg_store *a = open_store("record_cache_delete");
    ASSERT(a);
    ASSERT_OK(write_x(a, "{\"v\":1}", 0, E));

    ASSERT_OK(vg_store_begin(a, E));
    ASSERT_STREQ(read_x(a).body, "{\"v\":1}");
    ASSERT_OK(vg_store_remove(a, "note", "x", E));
    ASSERT_STREQ(read_x(a).body, "");
    ASSERT_OK(write_x(a, "{\"v\":9}", 0, E)); /* inserted again: revision 1 again */
    struct seen s = read_x(a);
    ASSERT_STREQ(s.body, "{\"v\":9}");
    ASSERT_EQ(s.rev, 1);
    ASSERT_OK(vg_store_commit(a, E));

    /* An insert that finds the record keeps the stored one. */
    ASSERT_OK(vg_store_begin(a, E));
    ASSERT_STREQ(read_x(a).body, "{\"v\":9}");
    struct vg_record r = {.kind = "note",
                          .id = "x",
                          .owner = "a",
                          .k1 = "",
                          .k2 = "",
                          .seq = 1,
                          .body = "{\"v\":10}"};
    int inserted = 1;
    ASSERT_OK(vg_store_put(a, &r, VG_PUT_IF_ABSENT, &inserted, E));
    ASSERT_EQ(inserted, 0);
    ASSERT_STREQ(read_x(a).body, "{\"v\":9}");
    /* Every record of the owner deleted at once. */
    int64_t removed = 0;
    ASSERT_OK(vg_store_remove_owner(a, "a", &removed, E));
    ASSERT(removed >= 1);
    ASSERT_STREQ(read_x(a).body, "");
    ASSERT_OK(vg_store_rollback(a, E));
    ASSERT_STREQ(read_x(a).body, "{\"v\":9}");
    vg_store_close(a);
}

static struct vg_record note(const char *id, const char *body)
{
    return (struct vg_record){.kind = "note",
                              .id = id,
                              .owner = "o",
                              .k1 = "k",
                              .k2 = "",
                              .seq = 7,
                              .rev = 3,
                              .at = 5,
                              .body = body};
}

/* The cache alone: a copy of every field, bounded in slots and bytes, the least recently used
 * of a set given up first (a record used after every keep outlives thousands of others), a
 * record too big not kept, a refresh only of what is kept. */
TEST(the_cache_keeps_copies_within_its_bounds)
{
    struct vg_record_cache c = {0};
    char body[64], id[32];
    snprintf(body, sizeof body, "{\"n\":0}");
    struct vg_record first = note("first", body);
    vg_record_cache_keep(&c, &first);
    body[0] = 'X'; /* kept apart from the caller's strings */
    const struct vg_record *k = vg_record_cache_find(&c, "note", "first");
    ASSERT(k);
    ASSERT_STREQ(k->body, "{\"n\":0}");
    ASSERT_STREQ(k->owner, "o");
    ASSERT_STREQ(k->k1, "k");
    ASSERT_EQ(k->seq, 7);
    ASSERT_EQ(k->rev, 3);
    ASSERT_EQ(k->at, 5);
    ASSERT(!vg_record_cache_find(&c, "other", "first")); /* the kind is part of the key */

    int kept = 0;
    for (int i = 0; i < 8 * VG_RECORD_CACHE_SLOTS; i++) {
        snprintf(id, sizeof id, "id-%d", i);
        snprintf(body, sizeof body, "{\"n\":%d}", i);
        struct vg_record r = note(id, body);
        vg_record_cache_keep(&c, &r);
        ASSERT(vg_record_cache_find(&c, "note", "first")); /* used after every keep */
        ASSERT(vg_record_cache_find(&c, "note", id));      /* the newest is always there */
        ASSERT(c.bytes <= VG_RECORD_CACHE_BUDGET);
    }
    for (int i = 0; i < 8 * VG_RECORD_CACHE_SLOTS; i++) {
        snprintf(id, sizeof id, "id-%d", i);
        kept += vg_record_cache_find(&c, "note", id) != NULL;
    }
    ASSERT(kept > VG_RECORD_CACHE_SLOTS / 2 && kept < VG_RECORD_CACHE_SLOTS);

    /* Big records: never past the byte budget, whatever comes. */
    static char big[VG_RECORD_CACHE_MAX - 100];
    memset(big, 'a', sizeof big - 1);
    for (int i = 0; i < VG_RECORD_CACHE_SLOTS; i++) {
        snprintf(id, sizeof id, "big-%d", i);
        struct vg_record r = note(id, big);
        vg_record_cache_keep(&c, &r);
        ASSERT(c.bytes <= VG_RECORD_CACHE_BUDGET);
    }
    char huge[VG_RECORD_CACHE_MAX + 1];
    memset(huge, 'a', sizeof huge - 1);
    huge[sizeof huge - 1] = '\0';
    struct vg_record r = note("first", huge);
    vg_record_cache_keep(&c, &r); /* too big: the key is forgotten, not left stale */
    ASSERT(!vg_record_cache_find(&c, "note", "first"));

    struct vg_record fresh = note("first", "{}");
    vg_record_cache_refresh(&c, &fresh, 9); /* not kept: stays out */
    ASSERT(!vg_record_cache_find(&c, "note", "first"));
    fresh = note("first", "{\"n\":\"new\"}");
    vg_record_cache_keep(&c, &fresh);
    fresh.body = "{\"n\":\"newer\"}";
    vg_record_cache_refresh(&c, &fresh, 9);
    ASSERT_STREQ(vg_record_cache_find(&c, "note", "first")->body, "{\"n\":\"newer\"}");
    ASSERT_EQ(vg_record_cache_find(&c, "note", "first")->rev, 9);

    vg_record_cache_forget(&c, "note", "first");
    ASSERT(!vg_record_cache_find(&c, "note", "first"));
    vg_record_cache_clear(&c);
    ASSERT_EQ(c.bytes, 0);
    for (int i = 0; i < 8 * VG_RECORD_CACHE_SLOTS; i++) {
        snprintf(id, sizeof id, "id-%d", i);
        ASSERT(!vg_record_cache_find(&c, "note", id));
    }
    vg_record_cache_release(&c);
}

/* The change mark of one kind (VG_STORE_CTRL_CHANGE_MARK) stays while nothing of that kind is
 * written, moves with this connection's write of it, with any rollback and with another
 * connection's commit (seen at the next snapshot, also a read batch's), and cannot be had
 * outside a snapshot. */
TEST(a_change_mark_moves_with_every_write_that_may_change_its_kind)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/c.db", vg_test_tmpdir("record_cache_mark"));
    struct vg_store *a = vg_test_store_open(path, 60000), *b = vg_test_store_open(path, 60000);
    ASSERT(a && b);
    struct vg_store_change_mark m0 = {.kind = "note"}, m1 = {.kind = "note"};
    vigil_error err = {0};
    ASSERT_EQ(vg_store_control(a, VG_STORE_CTRL_CHANGE_MARK, &m0, &err), VIGIL_ESTATE);
    ASSERT_OK(vg_store_begin(a, E));
    ASSERT_OK(write_x(a, "{\"v\":1}", 0, E));
    ASSERT_OK(vg_store_control(a, VG_STORE_CTRL_CHANGE_MARK, &m0, E));
    struct vg_record other = {
        .kind = "task", .id = "t", .owner = "a", .k1 = "", .k2 = "", .seq = 1, .body = "{}"};
    ASSERT_OK(vg_store_put(a, &other, 0, NULL, E));
    ASSERT_OK(vg_store_control(a, VG_STORE_CTRL_CHANGE_MARK, &m1, E));
    ASSERT(m1.foreign == m0.foreign && m1.own == m0.own); /* another kind */
    ASSERT_OK(write_x(a, "{\"v\":2}", 1, E));
    ASSERT_OK(vg_store_control(a, VG_STORE_CTRL_CHANGE_MARK, &m1, E));
    ASSERT(m1.own != m0.own);
    ASSERT_OK(vg_store_commit(a, E));
    /* a read batch after this connection's commit: the same mark as at the commit */
    vg_store_read_batch(a, 1);
    ASSERT_STREQ(read_x(a).body, "{\"v\":2}");
    ASSERT_OK(vg_store_control(a, VG_STORE_CTRL_CHANGE_MARK, &m0, E));
    ASSERT(m0.foreign == m1.foreign && m0.own == m1.own);
    vg_store_read_batch(a, 0);
    /* a savepoint rolled back undoes a write: the mark moves */
    ASSERT_OK(vg_store_begin(a, E));
    ASSERT_OK(vg_store_begin(a, E));
    ASSERT_OK(vg_store_control(a, VG_STORE_CTRL_CHANGE_MARK, &m0, E));
    ASSERT_OK(vg_store_rollback(a, E));
    ASSERT_OK(vg_store_control(a, VG_STORE_CTRL_CHANGE_MARK, &m1, E));
    ASSERT(m1.own != m0.own);
    ASSERT_OK(vg_store_commit(a, E));
    /* another connection commits: a's next read batch's snapshot moves the mark (a connection
     * that only reads has marks too), and a's next transaction keeps it, nothing new since */
    ASSERT_OK(write_x(b, "{\"v\":3}", 2, E));
    vg_store_read_batch(a, 1);
    ASSERT_STREQ(read_x(a).body, "{\"v\":3}");
    ASSERT_OK(vg_store_control(a, VG_STORE_CTRL_CHANGE_MARK, &m0, E));
    ASSERT(m0.foreign != m1.foreign);
    vg_store_read_batch(a, 0);
    ASSERT_OK(vg_store_begin(a, E));
    ASSERT_OK(vg_store_control(a, VG_STORE_CTRL_CHANGE_MARK, &m1, E));
    ASSERT(m1.foreign == m0.foreign && m1.own == m0.own);
    ASSERT_OK(vg_store_commit(a, E));
    /* and again: each commit of another connection moves it once */
    ASSERT_OK(write_x(b, "{\"v\":4}", 3, E));
    vg_store_read_batch(a, 1);
    ASSERT_STREQ(read_x(a).body, "{\"v\":4}");
    ASSERT_OK(vg_store_control(a, VG_STORE_CTRL_CHANGE_MARK, &m0, E));
    ASSERT(m0.foreign != m1.foreign);
    vg_store_read_batch(a, 0);
    vg_store_close(a);
    vg_store_close(b);
}

static int mark_moved(struct vg_store *s, struct vg_store_change_mark *m)
{
    struct vg_store_change_mark now = {.kind = m->kind};
    vigil_error err = {0};
    if (vg_store_control(s, VG_STORE_CTRL_CHANGE_MARK, &now, &err))
        return -1;
    int moved = now.foreign != m->foreign || now.own != m->own;
    *m = now;
    return moved;
}

static vigil_code put_kind(struct vg_store *s, const char *kind, vigil_error *err)
{
    struct vg_record r = {
        .kind = kind, .id = "x", .owner = "a", .k1 = "", .k2 = "", .seq = 1, .body = "{}"};
    return vg_store_put(s, &r, VG_PUT_IF_ABSENT, NULL, err);
}

/* Each kind's mark moves with the writes of that kind only: a step's writes of its budget usage
 * and agent state leave the agent record's mark where it was (they shared a counter with it,
 * and the agent kept under its mark was read again every step), and so for as many kinds as a
 * process writes. Past the connection's slots, the kinds that found none share one count: their
 * marks move too often, never too rarely. */
TEST(a_change_mark_stays_while_only_other_kinds_are_written)
{
    struct vg_store *a = open_store("record_cache_kinds");
    ASSERT(a);
    ASSERT_OK(vg_store_begin(a, E));
    struct vg_store_change_mark agent = {.kind = "agent"}, policy = {.kind = "tool_policy"};
    ASSERT_EQ(mark_moved(a, &agent), 1);
    ASSERT_EQ(mark_moved(a, &policy), 1);
    static const char *const step[] = {"budget_usage", "agent_state", "memory_meta", "journal",
                                       "message",      "link",        "kill_switch", "run"};
    for (size_t i = 0; i < sizeof step / sizeof *step; i++) {
        ASSERT_OK(put_kind(a, step[i], E));
        ASSERT_EQ(mark_moved(a, &agent), 0);
        ASSERT_EQ(mark_moved(a, &policy), 0);
    }
    ASSERT_OK(put_kind(a, "agent", E));
    ASSERT_EQ(mark_moved(a, &agent), 1);
    ASSERT_EQ(mark_moved(a, &policy), 0);
    /* a hundred kinds more than the slots: every write still moves its own kind's mark */
    char kinds[100][16];
    struct vg_store_change_mark marks[100];
    for (int i = 0; i < 100; i++) {
        snprintf(kinds[i], sizeof kinds[i], "kind_%d", i);
        marks[i] = (struct vg_store_change_mark){.kind = kinds[i]};
        ASSERT(mark_moved(a, &marks[i]) >= 0);
    }
    for (int i = 0; i < 100; i++) {
        ASSERT_OK(put_kind(a, kinds[i], E));
        ASSERT_EQ(mark_moved(a, &marks[i]), 1);
        ASSERT_EQ(mark_moved(a, &agent), 0);
    }
    ASSERT_OK(vg_store_commit(a, E));
    vg_store_close(a);
}

int main(void)
{
    RUN(a_record_another_connection_changed_is_read_fresh);
    RUN(a_read_batch_reads_a_record_another_connection_changed_fresh);
    RUN(an_absent_record_is_read_fresh_once_it_exists);
    RUN(own_updates_and_rollbacks_are_read_exactly);
    RUN(deletes_and_inserts_are_read_exactly);
    RUN(a_failed_commit_leaves_nothing_of_its_writes_kept);
    RUN(the_cache_keeps_copies_within_its_bounds);
    RUN(a_change_mark_moves_with_every_write_that_may_change_its_kind);
    RUN(a_change_mark_stays_while_only_other_kinds_are_written);
    return 0;
}
