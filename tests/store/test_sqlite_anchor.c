/*
 * test_sqlite_anchor.c: the process's read anchor of a SQLite store (src/store/sqlite/anchor.h),
 * joined with VG_STORE_CTRL_READ_ANCHOR. What must hold: a read through a joined connection
 * sees every commit that finished before it, made by another connection of the process or by
 * another process, at once; the anchor holds a read lock between reads (what spares the readers'
 * fcntl calls); it follows the store, so that a checkpoint can copy every frame and the log can
 * start over; and a TRUNCATE checkpoint does not wait for it.
 */
#include "helpers/test.h"

#include "store/port.h"
#include "store/store.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static vigil_code put(struct vg_store *s, const char *id, vigil_error *err)
{
    struct vg_record r = {.kind = "note", .id = id, .owner = "a", .seq = 1, .body = "{}"};
    vigil_code rc = vg_store_begin(s, err);
    if (rc == VIGIL_OK)
        rc = vg_store_end(s, vg_store_put(s, &r, 0, NULL, err), err);
    return rc;
}

static struct vg_store *open_joined(const char *path)
{
    struct vg_store *s = vg_test_store_open(path, 2000);
    if (s)
        vg_store_read_anchor(s, 1);
    return s;
}

/* Write one note from a new process with its own connection; 0 when it did. */
static int put_in_child(const char *path, const char *id)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct vg_store *s = vg_test_store_open(path, 5000);
        int ok = s && put(s, id, NULL) == VIGIL_OK;
        vg_store_close(s);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

/* SQLite's own answer to a checkpoint of another connection of this process, through the
 * platform's VFS: whether it was kept from finishing (busy), the log's frames and those copied. */
struct ckpt {
    int busy, log, copied;
};

static struct ckpt checkpoint(const char *path, const char *mode)
{
    struct ckpt c = {-1, -1, -1};
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA wal_checkpoint(%s)", mode);
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        c = (struct ckpt){sqlite3_column_int(st, 0), sqlite3_column_int(st, 1),
                          sqlite3_column_int(st, 2)};
    sqlite3_finalize(st);
    sqlite3_close(db);
    return c;
}

/* Reads through a joined connection see another connection's commit and another process's at
 * once, ten times over (each commit moves the store on from the anchor's snapshot), in a read
 * batch and out of one. */
TEST(a_joined_read_sees_every_commit_that_finished_before_it)
{
    char path[4200], id[32];
    snprintf(path, sizeof path, "%s/a.db", vg_test_tmpdir("sqlite_anchor_fresh"));
    struct vg_store *reader = open_joined(path), *other = vg_test_store_open(path, 2000);
    ASSERT(reader && other);
    ASSERT_EQ(vg_test_store_count(reader, "note"), 0);
    for (int i = 0; i < 10; i++) {
        snprintf(id, sizeof id, "conn-%d", i);
        ASSERT_OK(put(other, id, E));
        ASSERT_EQ(vg_test_store_count(reader, "note"), 2 * i + 1);
        snprintf(id, sizeof id, "proc-%d", i);
        ASSERT_EQ(put_in_child(path, id), 0);
        vg_store_read_batch(reader, 1);
        ASSERT_EQ(vg_test_store_count(reader, "note"), 2 * i + 2);
        vg_store_read_batch(reader, 0);
    }
    vg_store_close(other);
    vg_store_close(reader);
}

/* Between reads the process still holds a read lock on the log (the anchor's): a RESTART
 * checkpoint, which needs every reader gone from the log, is kept from finishing. Without the
 * anchor no reader is left once the read ended. */
TEST(the_anchor_holds_a_read_lock_between_reads)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/a.db", vg_test_tmpdir("sqlite_anchor_held"));
    struct vg_store *reader = open_joined(path), *other = vg_test_store_open(path, 2000);
    ASSERT(reader && other);
    ASSERT_OK(put(other, "n1", E));
    ASSERT_EQ(vg_test_store_count(reader, "note"), 1);
    ASSERT_OK(put(other, "n2", E));
    ASSERT_EQ(vg_test_store_count(reader, "note"), 2); /* the anchor moves to the newest */
    struct ckpt c = checkpoint(path, "RESTART");
    ASSERT_EQ(c.busy, 1);
    vg_store_read_anchor(reader, 0); /* the last to leave it: the lock goes */
    c = checkpoint(path, "RESTART");
    ASSERT_EQ(c.busy, 0);
    vg_store_close(other);
    vg_store_close(reader);
}

/* The anchor follows the store: after another process's commit and one read through a joined
 * connection, a passive checkpoint copies every frame of the log (an anchor left on its old
 * snapshot would keep the newest frames from being copied), and after that checkpoint one read
 * more lets the log start over (the next commit writes from its beginning). */
TEST(the_anchor_follows_so_the_log_is_copied_and_starts_over)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/a.db", vg_test_tmpdir("sqlite_anchor_follows"));
    struct vg_store *reader = open_joined(path), *other = vg_test_store_open(path, 2000);
    ASSERT(reader && other);
    ASSERT_OK(put(other, "n1", E));
    ASSERT_EQ(vg_test_store_count(reader, "note"), 1);
    for (int i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof id, "p%d", i);
        ASSERT_EQ(put_in_child(path, id), 0);
    }
    ASSERT_EQ(vg_test_store_count(reader, "note"), 6);
    struct ckpt c = checkpoint(path, "PASSIVE");
    ASSERT(c.log > 0);
    ASSERT_EQ(c.copied, c.log);
    ASSERT_EQ(vg_test_store_count(reader, "note"), 6); /* the anchor leaves the log */
    ASSERT_OK(put(other, "n2", E));
    struct ckpt after = checkpoint(path, "PASSIVE");
    ASSERT(after.log > 0 && after.log < c.log); /* the log started over */
    vg_store_close(other);
    vg_store_close(reader);
}

/* Under steady commits of another connection, each followed by a read through a joined one (a
 * daemon's workers and its HTTP threads), the log still starts over at its checkpoint size
 * (10,000 pages): an anchor kept on the newest frames would keep it from ever starting over. */
TEST(steady_commits_and_reads_still_let_the_log_start_over)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/a.db", vg_test_tmpdir("sqlite_anchor_long_log"));
    struct vg_store *reader = open_joined(path), *other = vg_test_store_open(path, 2000);
    ASSERT(reader && other);
    int durable = 0; /* group commit: the test is about the log's length, not its syncs */
    ASSERT_OK(vg_store_control(other, VG_STORE_CTRL_DURABLE_COMMITS, &durable, E));
    size_t size = 256 * 1024;
    char *body = malloc(size + 16);
    ASSERT(body);
    memset(body, 'x', size + 16);
    memcpy(body, "{\"t\":\"", 6);
    memcpy(body + size, "\"}", 3);
    for (int i = 0; i < 200; i++) { /* some 65 pages each: 13,000 frames in all */
        char id[16];
        snprintf(id, sizeof id, "n%d", i);
        struct vg_record r = {.kind = "note", .id = id, .owner = "a", .seq = 1, .body = body};
        ASSERT_OK(vg_store_begin(other, E));
        ASSERT_OK(vg_store_end(other, vg_store_put(other, &r, 0, NULL, E), E));
        ASSERT_EQ(vg_test_store_count(reader, "note"), i + 1);
    }
    free(body);
    struct ckpt c = checkpoint(path, "PASSIVE");
    ASSERT(c.log > 0 && c.log < 10000);
    vg_store_close(other);
    vg_store_close(reader);
}

/* The store's checkpoint (TRUNCATE, which waits for every reader to leave the log) finishes at
 * once while the anchor holds a snapshot, empties the log, and the anchor is taken again by the
 * next read. */
TEST(a_truncate_checkpoint_does_not_wait_for_the_anchor)
{
    char path[4200], wal[4300];
    snprintf(path, sizeof path, "%s/a.db", vg_test_tmpdir("sqlite_anchor_truncate"));
    snprintf(wal, sizeof wal, "%s-wal", path);
    struct vg_store *reader = open_joined(path), *other = vg_test_store_open(path, 2000);
    ASSERT(reader && other);
    ASSERT_OK(put(other, "n1", E));
    ASSERT_EQ(vg_test_store_count(reader, "note"), 1);
    ASSERT_OK(vg_store_control(other, VG_STORE_CTRL_CHECKPOINT, NULL, E));
    struct stat st;
    ASSERT(stat(wal, &st) == 0);
    ASSERT_EQ((long long)st.st_size, 0);
    ASSERT_OK(put(other, "n2", E));
    ASSERT_EQ(vg_test_store_count(reader, "note"), 2);
    ASSERT_EQ(checkpoint(path, "RESTART").busy, 1); /* held again */
    vg_store_close(other);
    vg_store_close(reader);
}

int main(void)
{
    RUN(a_joined_read_sees_every_commit_that_finished_before_it);
    RUN(the_anchor_holds_a_read_lock_between_reads);
    RUN(the_anchor_follows_so_the_log_is_copied_and_starts_over);
    RUN(steady_commits_and_reads_still_let_the_log_start_over);
    RUN(a_truncate_checkpoint_does_not_wait_for_the_anchor);
    return 0;
}
