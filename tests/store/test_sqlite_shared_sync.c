/*
 * test_sqlite_shared_sync.c: durable commits that share a log sync (vg_store_share_syncs with a
 * fiber batch, as vigil serve's workers use it). What must hold: every durable commit returns
 * only after a sync that began after it, so many fibers' commits in one round cost one sync
 * where they cost one each before; a commit under group commit and a transaction that wrote
 * nothing do not wait; a sync that fails fails every commit that waited for it, with the disk's
 * error; and turning sharing off gives each durable commit its own sync again. Syncs are
 * counted by the fault VFS, which sees every sync SQLite (or the store) makes of the files.
 */
#include "helpers/test.h"

#include "os/fiber.h"
#include "helpers/fault_vfs.h"
#include "store/store.h"

static struct vg_store *open_store(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/s.db", vg_test_tmpdir(dir));
    return vg_test_store_open(path, 2000);
}

static vigil_code put_one(struct vg_store *s, const char *id, vigil_error *err)
{
    struct vg_record r = {.kind = "note", .id = id, .owner = "a", .seq = 1, .body = "{}"};
    vigil_code rc = vg_store_begin(s, err);
    if (rc == VIGIL_OK)
        rc = vg_store_end(s, vg_store_put(s, &r, 0, NULL, err), err);
    return rc;
}

static int sync_runs; /* times the batch ran its operation */
static vigil_code sync_store(void *user, vigil_error *err)
{
    sync_runs++;
    return vg_store_sync(user, err);
}

static int waits;
static vigil_code join_batch(void *user, vigil_error *err)
{
    waits++;
    return vg_fiber_batch_join(user, err);
}

/* Counting syncs: the fault VFS armed far beyond reach counts without failing. */
static void count_syncs(void)
{
    vg_sqlite_fault_vfs_arm(1L << 40, VG_FAULT_SYNC, VIGIL_EIO, 0);
}

struct committer {
    struct vg_store *s;
    char id[16];
    vigil_code rc;
    vigil_error err;
};

static void commits(void *arg)
{
    struct committer *c = arg;
    c->rc = put_one(c->s, c->id, &c->err);
}

static int guard_no_tx(void *user)
{
    return !vg_store_in_tx(user);
}

/* Runs n fibers that each commit one record durably; returns the syncs the files saw. */
static long commit_on_fibers(struct vg_store *s, struct committer *c, int n)
{
    struct vg_fiber_sched *sched = NULL;
    if (vg_fiber_sched_new(&sched, NULL) != VIGIL_OK)
        return -1;
    vg_fiber_sched_set_guard(sched, guard_no_tx, s);
    count_syncs();
    for (int i = 0; i < n; i++)
        if (vg_fiber_spawn(sched, commits, &c[i], NULL) != VIGIL_OK)
            return -1;
    vg_fiber_sched_run(sched);
    long syncs = vg_sqlite_fault_vfs_count();
    vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
    vg_fiber_sched_free(sched);
    return syncs;
}

TEST(fibers_durable_commits_share_one_log_sync)
{
    ASSERT_OK(vg_sqlite_fault_vfs_install(E));
    struct vg_store *s = open_store("shared_sync_round");
    struct vg_fiber_batch *b = NULL;
    struct committer c[6];
    ASSERT(s);
    for (int i = 0; i < 6; i++) {
        c[i] = (struct committer){.s = s, .rc = -1};
        snprintf(c[i].id, sizeof c[i].id, "n%d", i);
    }
    /* Each its own sync first: the baseline the sharing is measured against. */
    ASSERT_EQ(commit_on_fibers(s, c, 3), 3);
    for (int i = 0; i < 3; i++)
        ASSERT_OK(c[i].rc);

    ASSERT_OK(vg_fiber_batch_new(&b, sync_store, s, E));
    ASSERT_OK(vg_store_share_syncs(s, join_batch, b, E));
    waits = sync_runs = 0;
    ASSERT_EQ(commit_on_fibers(s, c + 3, 3), 1);
    ASSERT_EQ(waits, 3);
    ASSERT_EQ(sync_runs, 1);
    for (int i = 3; i < 6; i++)
        ASSERT_OK(c[i].rc);
    ASSERT_EQ(vg_test_store_count(s, "note"), 6);

    /* Off a fiber a durable commit syncs at once. */
    count_syncs();
    ASSERT_OK(put_one(s, "alone", E));
    ASSERT_EQ(vg_sqlite_fault_vfs_count(), 1);
    ASSERT_EQ(sync_runs, 2);

    ASSERT_OK(vg_store_share_syncs(s, NULL, NULL, E));
    vg_fiber_batch_free(b);
    count_syncs();
    ASSERT_OK(put_one(s, "own-sync-again", E));
    ASSERT_EQ(vg_sqlite_fault_vfs_count(), 1);
    vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
    vg_store_close(s);
}

TEST(group_commits_and_reads_do_not_wait_for_a_sync)
{
    ASSERT_OK(vg_sqlite_fault_vfs_install(E));
    struct vg_store *s = open_store("shared_sync_lazy");
    struct vg_fiber_batch *b = NULL;
    ASSERT(s);
    ASSERT_OK(vg_fiber_batch_new(&b, sync_store, s, E));
    ASSERT_OK(vg_store_share_syncs(s, join_batch, b, E));
    waits = 0;
    count_syncs();
    ASSERT_OK(vg_store_durable_commits(s, 0, E));
    ASSERT_EQ(vg_store_durable(s), 0);
    ASSERT_OK(put_one(s, "lazy", E));
    ASSERT_OK(vg_store_durable_commits(s, 1, E));
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_EQ(vg_test_store_count(s, "note"), 1);
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_EQ(waits, 0);
    ASSERT_EQ(vg_sqlite_fault_vfs_count(), 0);
    /* The next sync makes the lazy commit durable with it. */
    ASSERT_OK(vg_store_sync(s, E));
    ASSERT_EQ(vg_sqlite_fault_vfs_count(), 1);
    ASSERT_OK(vg_store_sync(s, E)); /* nothing new: no sync */
    ASSERT_EQ(vg_sqlite_fault_vfs_count(), 1);
    vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
    ASSERT_OK(vg_store_share_syncs(s, NULL, NULL, E));
    vg_fiber_batch_free(b);
    vg_store_close(s);
}

TEST(a_failed_shared_sync_fails_every_commit_that_waited_for_it)
{
    ASSERT_OK(vg_sqlite_fault_vfs_install(E));
    struct vg_store *s = open_store("shared_sync_fail");
    struct vg_fiber_batch *b = NULL;
    struct vg_fiber_sched *sched = NULL;
    struct committer c[3];
    ASSERT(s);
    ASSERT_OK(vg_fiber_batch_new(&b, sync_store, s, E));
    ASSERT_OK(vg_store_share_syncs(s, join_batch, b, E));
    ASSERT_OK(vg_fiber_sched_new(&sched, E));
    vg_fiber_sched_set_guard(sched, guard_no_tx, s);
    for (int i = 0; i < 3; i++) {
        c[i] = (struct committer){.s = s, .rc = -1};
        snprintf(c[i].id, sizeof c[i].id, "f%d", i);
        ASSERT_OK(vg_fiber_spawn(sched, commits, &c[i], E));
    }
    vg_sqlite_fault_vfs_arm(1, VG_FAULT_SYNC, VIGIL_EIO, 0);
    vg_fiber_sched_run(sched);
    int hit = vg_sqlite_fault_vfs_hit();
    vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
    ASSERT(hit);
    for (int i = 0; i < 3; i++) {
        ASSERT_CODE(VIGIL_EIO, c[i].rc);
        ASSERT_CONTAINS(c[i].err.message, "could not sync the write-ahead log");
        ASSERT_CONTAINS(c[i].err.message, "may not survive a power loss");
    }
    /* The commits stand (the log has them); whether the disk does is what the error says is
     * unknown. The store goes on: the next durable commit syncs them all. */
    ASSERT_EQ(vg_test_store_count(s, "note"), 3);
    ASSERT_OK(put_one(s, "after", E));
    ASSERT_EQ(vg_test_store_count(s, "note"), 4);
    vg_fiber_sched_free(sched);
    ASSERT_OK(vg_store_share_syncs(s, NULL, NULL, E));
    vg_fiber_batch_free(b);
    vg_store_close(s);
}

int main(void)
{
    RUN(fibers_durable_commits_share_one_log_sync);
    RUN(group_commits_and_reads_do_not_wait_for_a_sync);
    RUN(a_failed_shared_sync_fails_every_commit_that_waited_for_it);
    return 0;
}
