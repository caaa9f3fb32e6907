/*
 * test_sqlite_log_vfs.c: the log VFS (src/store/sqlite/log_vfs.c), which gathers a write-ahead
 * log's frames and writes each commit's with one system call. What must hold: a commit's frames
 * reach the file in one write; every commit is in the file before another connection or
 * another process can see it, synced or not, and a durable one is synced before then too; a write
 * that fails fails its commit and leaves what was committed; and a transaction big enough to spill
 * SQLite's cache into the log (whose frames are then rewritten in place) commits intact, also when
 * its process dies at once; the log grows ahead of its frames with zeros, which end it for SQLite's
 * recovery as the end of any log does, and an append that fails fails no commit; the last
 * connection's close keeps the log file, every byte of it zero, and the next opens write over it
 * without growing it, unless another connection still has the store open (the log is left as it is)
 * or the log is big (deleted, as SQLite does).
 *
 * The fault VFS goes under the log VFS (vg_sqlite_fault_vfs_install), so its counters see the
 * writes that reach the operating system.
 */
#include "helpers/test.h"

#include "helpers/fault_vfs.h"
#include "store/sqlite/log_vfs.h"
#include "store/store.h"

#include <limits.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The log VFS's counts of what it did (counting from main on). */
static struct vg_log_vfs_counts counts;

static long writes_saved(void)
{
    return atomic_load(&counts.writes_asked) - atomic_load(&counts.writes_made);
}

static void grown(long *writes, long *bytes)
{
    *writes = atomic_load(&counts.grown_writes);
    *bytes = atomic_load(&counts.grown_bytes);
}

static long logs_kept(void)
{
    return atomic_load(&counts.logs_kept);
}

/* A record of about `size` bytes of body, so a transaction's pages can be counted on. */
static vigil_code put_sized(struct vg_store *s, const char *id, size_t size, vigil_error *err)
{
    char *body = malloc(size + 16);
    if (!body)
        return VIGIL_ENOMEM;
    memset(body, 'x', size + 16);
    memcpy(body, "{\"t\":\"", 6);
    memcpy(body + size - 2, "\"}", 3);
    struct vg_record r = {.kind = "note", .id = id, .owner = "a", .seq = 1, .body = body};
    vigil_code rc = vg_store_put(s, &r, 0, NULL, err);
    free(body);
    return rc;
}

/* One transaction of one record. */
static vigil_code commit_one(struct vg_store *s, const char *id, size_t size, vigil_error *err)
{
    vigil_code rc = vg_store_begin(s, err);
    if (rc == VIGIL_OK)
        rc = vg_store_end(s, put_sized(s, id, size, err), err);
    return rc;
}

/* Count the notes from a new process with its own connection: its exit status. */
static int count_in_child(const char *path)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct vg_store *s = vg_test_store_open(path, 5000);
        int64_t n = s ? vg_test_store_count(s, "note") : -1;
        _exit(n < 0 || n > 200 ? 255 : (int)n);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

static struct vg_store *open_fresh(const char *name, char *path, size_t n)
{
    snprintf(path, n, "%s/l.db", vg_test_tmpdir(name));
    return vg_test_store_open(path, 2000);
}

/* A commit of some thirty pages (ten 3 KB records and their index entries) is one write to the
 * file below, where SQLite asked for two per page. */
TEST(a_commit_reaches_the_file_in_one_write)
{
    ASSERT_OK(vg_sqlite_fault_vfs_install(E));
    char path[4200];
    struct vg_store *s = open_fresh("log_vfs_one_write", path, sizeof path);
    ASSERT(s);
    ASSERT_OK(commit_one(s, "warm", 100, E));

    long saved = writes_saved(), grown_before, grown_after, bytes;
    grown(&grown_before, &bytes);
    vg_sqlite_fault_vfs_arm(LONG_MAX, VG_FAULT_WRITE, VIGIL_EIO, 0); /* counts, never fails */
    ASSERT_OK(vg_store_begin(s, E));
    for (int i = 0; i < 10; i++) {
        char id[16];
        snprintf(id, sizeof id, "n%d", i);
        ASSERT_OK(put_sized(s, id, 3000, E));
    }
    ASSERT_OK(vg_store_commit(s, E));
    long writes = vg_sqlite_fault_vfs_count();
    vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
    grown(&grown_after, &bytes);
    /* The frames' one write, and the zeros that grow the log ahead if they came near its end. */
    ASSERT_EQ(writes - (grown_after - grown_before), 1);
    /* Ten pages of records at the least, each asked for as a header and a page. */
    ASSERT(writes_saved() - saved >= 19);
    ASSERT_EQ(vg_test_store_count(s, "note"), 11);
    vg_store_close(s);
}

/* Each commit, durable or not, is visible to another connection of this process and to another
 * process as soon as the commit returns: the gathered frames are written before SQLite
 * publishes the log's new end. */
TEST(every_commit_is_visible_at_once_to_other_connections_and_processes)
{
    char path[4200];
    struct vg_store *s = open_fresh("log_vfs_visible", path, sizeof path);
    struct vg_store *other = vg_test_store_open(path, 2000);
    ASSERT(s && other);
    for (int i = 1; i <= 6; i++) {
        /* Odd commits are not synced (group commit): visibility must not wait for a sync. */
        ASSERT_OK(vg_store_durable_commits(s, i % 2 == 0, E));
        char id[16];
        snprintf(id, sizeof id, "n%d", i);
        ASSERT_OK(commit_one(s, id, 1500 * (size_t)i, E));
        ASSERT_EQ(vg_test_store_count(other, "note"), i);
        ASSERT_EQ(count_in_child(path), i);
    }
    ASSERT_OK(vg_store_durable_commits(s, 1, E));
    vg_store_close(other);
    vg_store_close(s);
}

/* The one write of a commit fails (a full disk): the commit fails with EFULL, nothing of it is
 * visible, here or elsewhere, reads still work while the disk stays full, and the store goes
 * on: the next commit works, and everything committed is there after reopening, with the file
 * passing its integrity check. */
TEST(a_failed_write_fails_its_commit_and_keeps_what_was_committed)
{
    ASSERT_OK(vg_sqlite_fault_vfs_install(E));
    char path[4200];
    struct vg_store *s = open_fresh("log_vfs_failed_write", path, sizeof path);
    ASSERT(s);
    ASSERT_OK(commit_one(s, "before", 2000, E));

    ASSERT_OK(vg_store_durable_commits(s, 0, E));
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(put_sized(s, "lost", 6000, E));
    vg_sqlite_fault_vfs_arm(1, VG_FAULT_WRITE, VIGIL_EFULL, 1); /* the disk stays full */
    vigil_code rc = vg_store_commit(s, NULL);
    int hit = vg_sqlite_fault_vfs_hit();
    if (vg_store_depth(s) > 0)
        (void)vg_store_rollback(s, NULL);
    /* Reading needs no room: the failed commit's frames are not written again by a read. */
    int64_t while_full = vg_test_store_count(s, "note");
    vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
    ASSERT(hit);
    ASSERT_CODE(VIGIL_EFULL, rc);
    ASSERT_EQ(while_full, 1);
    ASSERT_EQ(vg_test_store_count(s, "note"), 1);
    ASSERT_EQ(count_in_child(path), 1);

    ASSERT_OK(commit_one(s, "after", 6000, E));
    ASSERT_EQ(count_in_child(path), 2);
    ASSERT_OK(vg_store_durable_commits(s, 1, E));
    vg_store_close(s);

    s = vg_test_store_open(path, 2000);
    ASSERT(s);
    ASSERT_EQ(vg_test_store_count(s, "note"), 2);
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, E));
    vg_store_close(s);
}

/* One transaction bigger than SQLite's page cache (2 MiB), which spills pages into the log
 * before its commit, and then rewrites the first records, whose pages are spilled by then:
 * rewriting a spilled page rewrites its frame in place and, at the commit, every later frame's
 * checksum (writes out of sequence, between reads of the log; the last of them a commit frame's
 * header with no page after it). */
static vigil_code commit_spilling(struct vg_store *s, vigil_error *err)
{
    char id[16];
    vigil_code rc = vg_store_begin(s, err);
    for (int i = 0; i < 120 && rc == VIGIL_OK; i++) {
        snprintf(id, sizeof id, "n%03d", i);
        rc = put_sized(s, id, 30000, err);
    }
    for (int i = 0; i < 20 && rc == VIGIL_OK; i++) {
        snprintf(id, sizeof id, "n%03d", i);
        rc = vg_store_remove(s, "note", id, err);
        if (rc == VIGIL_OK)
            rc = put_sized(s, id, 20000, err);
    }
    return vg_store_end(s, rc, err);
}

/* A durable commit syncs the log while its frames are written, before another connection can
 * see it: its sync failing fails the commit, which nothing then sees, here, in another
 * connection or in another process, and the store goes on. A commit left to group commit syncs
 * nothing; the next durable one covers it. Switching costs no statement (VG_LOG_FCNTL_COMMIT_SYNC
 * under synchronous=NORMAL). */
TEST(a_durable_commit_is_synced_before_anyone_sees_it)
{
    ASSERT_OK(vg_sqlite_fault_vfs_install(E));
    char path[4200];
    struct vg_store *s = open_fresh("log_vfs_durable", path, sizeof path);
    struct vg_store *other = vg_test_store_open(path, 2000);
    ASSERT(s && other);

    vg_sqlite_fault_vfs_arm(LONG_MAX, VG_FAULT_SYNC, VIGIL_EIO, 0); /* counts syncs */
    ASSERT_OK(commit_one(s, "durable", 3000, E));
    ASSERT_EQ(vg_sqlite_fault_vfs_count(), 1);
    ASSERT_OK(vg_store_durable_commits(s, 0, E));
    ASSERT_OK(commit_one(s, "lazy1", 3000, E));
    ASSERT_OK(commit_one(s, "lazy2", 3000, E));
    ASSERT_EQ(vg_sqlite_fault_vfs_count(), 1);
    ASSERT_EQ(vg_test_store_count(other, "note"), 3);
    ASSERT_OK(vg_store_durable_commits(s, 1, E));
    ASSERT_OK(commit_one(s, "durable2", 3000, E));
    ASSERT_EQ(vg_sqlite_fault_vfs_count(), 2);

    vg_sqlite_fault_vfs_arm(1, VG_FAULT_SYNC, VIGIL_EIO, 0);
    vigil_code rc = commit_one(s, "unsynced", 3000, NULL);
    int hit = vg_sqlite_fault_vfs_hit();
    vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
    ASSERT(hit);
    ASSERT_CODE(VIGIL_EIO, rc);
    ASSERT(!vg_store_in_tx(s));
    ASSERT_EQ(vg_test_store_count(s, "note"), 4);
    ASSERT_EQ(vg_test_store_count(other, "note"), 4);
    ASSERT_EQ(count_in_child(path), 4);

    ASSERT_OK(commit_one(s, "after", 3000, E));
    ASSERT_EQ(count_in_child(path), 5);
    vg_store_close(other);
    vg_store_close(s);
}

/* The spilling transaction is whole, visible to another process, and intact after reopening. */
TEST(a_transaction_that_spills_into_the_log_commits_whole)
{
    char path[4200];
    struct vg_store *s = open_fresh("log_vfs_spill", path, sizeof path);
    ASSERT(s);
    ASSERT_OK(commit_spilling(s, E));
    ASSERT_EQ(count_in_child(path), 120);
    vg_store_close(s);

    s = vg_test_store_open(path, 2000);
    ASSERT(s);
    ASSERT_EQ(vg_test_store_count(s, "note"), 120);
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, E));
    vg_store_close(s);
}

/* A process commits the spilling transaction without a sync and dies at once, its connection
 * never closed: nothing it gathered and did not write survives it. The log must still hold the
 * transaction with valid checksums: with the shared index gone, the next open rebuilds the
 * index from the log, reading frames only as far as their checksums hold. (The last checksum
 * rewritten is written at the barrier before the commit is published.) */
TEST(a_commit_is_whole_in_the_log_when_its_process_dies_at_once)
{
    char path[4200], shm[4300];
    snprintf(path, sizeof path, "%s/l.db", vg_test_tmpdir("log_vfs_crash"));
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct vg_store *c = vg_test_store_open(path, 2000);
        int ok = c && vg_store_durable_commits(c, 0, NULL) == VIGIL_OK &&
                 commit_spilling(c, NULL) == VIGIL_OK;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    ASSERT(pid > 0 && waitpid(pid, &status, 0) == pid);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    snprintf(shm, sizeof shm, "%s-shm", path);
    ASSERT(unlink(shm) == 0);

    struct vg_store *s = vg_test_store_open(path, 2000);
    ASSERT(s);
    ASSERT_EQ(vg_test_store_count(s, "note"), 120);
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, E));
    vg_store_close(s);
}

static int64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

/* Small commits one after another, in a process that then dies without closing its store: the
 * log file grows ahead of the frames (at the first commit already by a quarter MiB, and in a
 * few steps after that, not at each commit), every commit that did not grow it is still one
 * write, and the next open, with the shared index gone, finds every commit in the log and
 * nothing past the last (the zeros after it end the log). */
TEST(the_log_grows_ahead_of_its_frames_and_recovers_to_its_last_commit)
{
    ASSERT_OK(vg_sqlite_fault_vfs_install(E));
    char path[4200], wal[4300], shm[4300];
    snprintf(path, sizeof path, "%s/l.db", vg_test_tmpdir("log_vfs_grow"));
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(shm, sizeof shm, "%s-shm", path);
    int pipe_fd[2];
    ASSERT(pipe(pipe_fd) == 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* Reports, through the pipe: the log's size after the first commit, how many times a
         * commit changed it, and how many commits that did not change it took another write. */
        int64_t report[3] = {0, 0, 0};
        struct vg_store *c = vg_test_store_open(path, 2000);
        int ok = c && commit_one(c, "n0", 3000, NULL) == VIGIL_OK;
        report[0] = file_size(wal);
        for (int i = 1; ok && i < 60; i++) {
            char id[16];
            snprintf(id, sizeof id, "n%d", i);
            int64_t before = file_size(wal);
            vg_sqlite_fault_vfs_arm(LONG_MAX, VG_FAULT_WRITE, VIGIL_EIO, 0);
            ok = commit_one(c, id, 3000, NULL) == VIGIL_OK;
            long writes = vg_sqlite_fault_vfs_count();
            if (file_size(wal) != before)
                report[1]++;
            else if (writes != 1)
                report[2]++;
        }
        vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
        ok = ok && write(pipe_fd[1], report, sizeof report) == (ssize_t)sizeof report;
        _exit(ok ? 0 : 1);
    }
    close(pipe_fd[1]);
    int64_t report[3] = {-1, -1, -1};
    ASSERT(read(pipe_fd[0], report, sizeof report) == (ssize_t)sizeof report);
    close(pipe_fd[0]);
    int status = 0;
    ASSERT(pid > 0 && waitpid(pid, &status, 0) == pid);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT(report[0] >= 256 * 1024);
    /* 59 commits of some 16 KiB each: about a MiB of frames, so two or three appends. */
    ASSERT(report[1] >= 1 && report[1] <= 4);
    ASSERT_EQ(report[2], 0);
    int64_t log_size = file_size(wal);
    ASSERT(unlink(shm) == 0);

    struct vg_store *s = vg_test_store_open(path, 2000);
    ASSERT(s);
    ASSERT_EQ(vg_test_store_count(s, "note"), 60);
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, E));
    /* The log was longer than its frames when the process died: the recovery stopped at the
     * zeros. (Frames as SQLite's own connection counts them, each a page and its header.) */
    sqlite3 *db = NULL;
    int frames = -1, done = -1;
    ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "SELECT count(*) FROM records", NULL, NULL, NULL), SQLITE_OK);
    ASSERT_EQ(sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, &frames, &done),
              SQLITE_OK);
    sqlite3_close(db);
    ASSERT(frames > 0);
    ASSERT(32 + (int64_t)frames * (4096 + 24) < log_size);
    /* A checkpoint that truncates the log starts the growth over. */
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_CHECKPOINT, NULL, E));
    ASSERT_EQ(file_size(wal), 0);
    ASSERT_OK(commit_one(s, "after", 3000, E));
    ASSERT(file_size(wal) >= 256 * 1024);
    vg_store_close(s);
}

/* The disk fills just as the log grows ahead: the commit whose frames were written succeeds
 * (the zeros are not its data), is visible to another process, and survives reopening; the
 * store goes on once there is room. */
TEST(a_log_that_cannot_grow_ahead_fails_no_commit)
{
    ASSERT_OK(vg_sqlite_fault_vfs_install(E));
    char path[4200];
    struct vg_store *s = open_fresh("log_vfs_grow_full", path, sizeof path);
    ASSERT(s);
    int hit = 0, i;
    for (i = 0; i < 200 && !hit; i++) {
        char id[16];
        snprintf(id, sizeof id, "n%d", i);
        /* The commit's frames are write 1; a second write is the log growing ahead. */
        vg_sqlite_fault_vfs_arm(2, VG_FAULT_WRITE, VIGIL_EFULL, 1);
        vigil_code rc = commit_one(s, id, 3000, NULL);
        hit = vg_sqlite_fault_vfs_hit();
        vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
        ASSERT_OK(rc);
    }
    ASSERT(hit);
    ASSERT_EQ(count_in_child(path), i);
    ASSERT_OK(commit_one(s, "after", 3000, E));
    vg_store_close(s);

    s = vg_test_store_open(path, 2000);
    ASSERT(s);
    ASSERT_EQ(vg_test_store_count(s, "note"), i + 1);
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, E));
    vg_store_close(s);
}

/* n transactions of one record each, ids prefix0, prefix1, ... */
static vigil_code commit_many(struct vg_store *s, const char *prefix, int n, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    for (int i = 0; rc == VIGIL_OK && i < n; i++) {
        char id[32];
        snprintf(id, sizeof id, "%s%d", prefix, i);
        rc = commit_one(s, id, 3000, err);
    }
    return rc;
}

/* Every byte of the file is zero (and it exists). */
static int all_zero(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    int c, zero = 1;
    while ((c = getc(f)) != EOF)
        zero &= c == 0;
    fclose(f);
    return zero;
}

/* The store's last connection closes: the log file stays, emptied (zeros to its end, so it
 * holds no page of the store), and the next connections open it as a log with no frames and
 * write their commits over it without growing it; a process that dies after such commits
 * loses none of them, a read-only open sees everything, and the close of a store only read
 * writes nothing. */
TEST(a_closed_store_keeps_its_log_emptied_and_the_next_opens_write_over_it)
{
    ASSERT_OK(vg_sqlite_fault_vfs_install(E));
    char path[4200], wal[4300];
    struct vg_store *s = open_fresh("log_vfs_keep", path, sizeof path);
    ASSERT(s);
    snprintf(wal, sizeof wal, "%s-wal", path);
    ASSERT_OK(commit_many(s, "a", 30, E));
    long kept = logs_kept();
    vg_store_close(s);
    ASSERT_EQ(logs_kept(), kept + 1);
    int64_t size = file_size(wal);
    ASSERT(size >= 30 * 3 * 4096);
    ASSERT(all_zero(wal));

    s = vg_test_store_open(path, 2000);
    ASSERT(s);
    ASSERT_EQ(vg_test_store_count(s, "note"), 30);
    long grown_writes, grown_bytes, after_writes, after_bytes;
    grown(&grown_writes, &grown_bytes);
    ASSERT_OK(commit_many(s, "b", 20, E));
    grown(&after_writes, &after_bytes);
    ASSERT_EQ(after_writes, grown_writes);
    ASSERT_EQ(file_size(wal), size);

    /* Another process commits over the kept log and dies without closing. */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct vg_store *c = vg_test_store_open(path, 5000);
        _exit(c && commit_many(c, "c", 5, NULL) == VIGIL_OK ? 0 : 1);
    }
    int status = 0;
    ASSERT(pid > 0 && waitpid(pid, &status, 0) == pid);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT_EQ(vg_test_store_count(s, "note"), 55);
    vg_store_close(s);
    ASSERT(all_zero(wal));

    ASSERT_OK(vg_store_open(path, &(struct vg_store_options){.read_only = 1}, &s, E));
    ASSERT_EQ(vg_test_store_count(s, "note"), 55);
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, E));
    vg_store_close(s);

    /* A store only read: its last close finds the log empty already and writes nothing. */
    s = vg_test_store_open(path, 2000);
    ASSERT(s);
    ASSERT_EQ(vg_test_store_count(s, "note"), 55);
    kept = logs_kept();
    vg_sqlite_fault_vfs_arm(LONG_MAX, VG_FAULT_WRITE, VIGIL_EIO, 0);
    vg_store_close(s);
    long writes = vg_sqlite_fault_vfs_count();
    vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
    ASSERT_EQ(writes, 0);
    ASSERT_EQ(logs_kept(), kept + 1);
    ASSERT_EQ(file_size(wal), size);
}

/* A connection closes while another still has the store open: the log is the other's, and
 * stays as it is; the last close empties it. */
TEST(a_store_closed_beside_another_connection_leaves_the_log_alone)
{
    char path[4200], wal[4300];
    struct vg_store *a = open_fresh("log_vfs_keep_shared", path, sizeof path);
    ASSERT(a);
    struct vg_store *b = vg_test_store_open(path, 2000);
    ASSERT(b);
    snprintf(wal, sizeof wal, "%s-wal", path);
    ASSERT_OK(commit_many(a, "a", 5, E));
    long kept = logs_kept();
    vg_store_close(a);
    ASSERT_EQ(logs_kept(), kept);
    ASSERT(!all_zero(wal));
    ASSERT_OK(commit_one(b, "b0", 3000, E));
    ASSERT_EQ(vg_test_store_count(b, "note"), 6);
    vg_store_close(b);
    ASSERT_EQ(logs_kept(), kept + 1);
    ASSERT(all_zero(wal));
    ASSERT_EQ(count_in_child(path), 6);
}

/* A log grown past what is worth keeping (a bulk load's) is deleted at the last close, as
 * SQLite always did. */
TEST(a_big_log_is_deleted_at_close)
{
    char path[4200], wal[4300];
    struct vg_store *s = open_fresh("log_vfs_keep_big", path, sizeof path);
    ASSERT(s);
    snprintf(wal, sizeof wal, "%s-wal", path);
    ASSERT_OK(vg_store_begin(s, E));
    vigil_code rc = VIGIL_OK;
    for (int i = 0; rc == VIGIL_OK && i < 5000; i++) {
        char id[16];
        snprintf(id, sizeof id, "n%d", i);
        rc = put_sized(s, id, 4000, NULL);
    }
    ASSERT_OK(vg_store_end(s, rc, E));
    ASSERT(file_size(wal) > 16 * 1024 * 1024);
    long kept = logs_kept();
    vg_store_close(s);
    ASSERT_EQ(logs_kept(), kept);
    ASSERT_EQ(file_size(wal), -1);
    s = vg_test_store_open(path, 2000);
    ASSERT(s);
    ASSERT_EQ(vg_test_store_count(s, "note"), 5000);
    vg_store_close(s);
}

int main(void)
{
    vg_sqlite_log_vfs_count_into(&counts);
    RUN(a_commit_reaches_the_file_in_one_write);
    RUN(every_commit_is_visible_at_once_to_other_connections_and_processes);
    RUN(a_failed_write_fails_its_commit_and_keeps_what_was_committed);
    RUN(a_durable_commit_is_synced_before_anyone_sees_it);
    RUN(a_transaction_that_spills_into_the_log_commits_whole);
    RUN(a_commit_is_whole_in_the_log_when_its_process_dies_at_once);
    RUN(the_log_grows_ahead_of_its_frames_and_recovers_to_its_last_commit);
    RUN(a_log_that_cannot_grow_ahead_fails_no_commit);
    RUN(a_closed_store_keeps_its_log_emptied_and_the_next_opens_write_over_it);
    RUN(a_store_closed_beside_another_connection_leaves_the_log_alone);
    RUN(a_big_log_is_deleted_at_close);
    return 0;
}
