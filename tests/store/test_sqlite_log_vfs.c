/*
 * test_sqlite_log_vfs.c: the log VFS (src/store/sqlite/log_vfs.c), which gathers a write-ahead
 * log's frames and writes each commit's with one system call. What must hold: a commit's frames
 * reach the file in one write; every commit is in the file before another connection or
 * another process can see it, synced or not; a write that fails fails its commit and leaves
 * what was committed; and a transaction big enough to spill SQLite's cache into the log (whose
 * frames are then rewritten in place) commits intact, also when its process dies at once.
 *
 * The fault VFS goes under the log VFS (vg_sqlite_fault_vfs_install), so its counters see the
 * writes that reach the operating system.
 */
#include "helpers/test.h"

#include "store/sqlite/fault_vfs.h"
#include "store/sqlite/log_vfs.h"
#include "store/store.h"

#include <limits.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

    long saved = vg_sqlite_log_vfs_writes_saved();
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
    ASSERT_EQ(writes, 1);
    /* Ten pages of records at the least, each asked for as a header and a page. */
    ASSERT(vg_sqlite_log_vfs_writes_saved() - saved >= 19);
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

int main(void)
{
    RUN(a_commit_reaches_the_file_in_one_write);
    RUN(every_commit_is_visible_at_once_to_other_connections_and_processes);
    RUN(a_failed_write_fails_its_commit_and_keeps_what_was_committed);
    RUN(a_transaction_that_spills_into_the_log_commits_whole);
    RUN(a_commit_is_whole_in_the_log_when_its_process_dies_at_once);
    return 0;
}
