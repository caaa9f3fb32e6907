/*
 * test_sqlite_gate.c: the in-process writer gate of the SQLite adapter (src/store/sqlite/gate.h).
 * Connections of one process to one file queue for writing on a mutex instead of SQLite's
 * sleeping busy handler. What must hold: a waiting writer gets in once the holder's
 * transaction ends, however it ends (commit, rollback, a failed commit); a thread that writes
 * through two connections at once gets EBUSY, never a deadlock; and the gate never changes
 * what is committed.
 */
#include "helpers/test.h"

#include "helpers/fault_vfs.h"
#include "store/store.h"

#include <pthread.h>

static vigil_code put(struct vg_store *s, const char *id, vigil_error *err)
{
    struct vg_record r = {.kind = "note", .id = id, .owner = "a", .seq = 1, .body = "{}"};
    return vg_store_put(s, &r, 0, NULL, err);
}

/* A second writer on its own thread and connection: one whole transaction. */
struct writer {
    struct vg_store *s;
    const char *id;
    vigil_code rc;
    vigil_error err;
};

static void *write_one(void *arg)
{
    struct writer *w = arg;
    w->rc = vg_store_begin(w->s, &w->err);
    if (w->rc == VIGIL_OK) {
        w->rc = put(w->s, w->id, &w->err);
        w->rc = vg_store_end(w->s, w->rc, &w->err);
    }
    return NULL;
}

static vigil_code write_on_thread(struct vg_store *s, const char *id, vigil_error *err)
{
    struct writer w = {.s = s, .id = id};
    pthread_t t;
    if (pthread_create(&t, NULL, write_one, &w) != 0)
        return VIGIL_ERROR;
    pthread_join(t, NULL);
    if (err)
        *err = w.err;
    return w.rc;
}

/* A writer started while another connection holds the write transaction waits for it (a
 * generous busy timeout) and commits after it: both transactions are in the file. */
TEST(a_second_writer_waits_and_then_commits)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/g.db", vg_test_tmpdir("sqlite_gate_wait"));
    struct vg_store *a = vg_test_store_open(path, 60000), *b = vg_test_store_open(path, 60000);
    ASSERT(a && b);
    ASSERT_OK(vg_store_begin(a, E));
    ASSERT_OK(put(a, "from-a", E));
    struct writer w = {.s = b, .id = "from-b"};
    pthread_t t;
    ASSERT(pthread_create(&t, NULL, write_one, &w) == 0);
    ASSERT_OK(vg_store_commit(a, E));
    pthread_join(t, NULL);
    if (w.rc != VIGIL_OK)
        TEST_FAIL_("the waiting writer failed: %s", w.err.message);
    ASSERT_EQ(vg_test_store_count(a, "note"), 2);
    vg_store_close(a);
    vg_store_close(b);
}

/* One thread, two connections, both writing: the second cannot wait for the first (it would
 * wait for itself), so it gets EBUSY after the busy timeout, and works once the first ends. */
TEST(one_thread_on_two_connections_gets_busy_not_a_deadlock)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/g.db", vg_test_tmpdir("sqlite_gate_self"));
    struct vg_store *a = vg_test_store_open(path, 50), *b = vg_test_store_open(path, 50);
    ASSERT(a && b);
    ASSERT_OK(vg_store_begin(a, E));
    ASSERT_OK(put(a, "from-a", E));
    ASSERT_CODE(VIGIL_EBUSY, vg_store_begin(b, NULL));
    ASSERT_OK(vg_store_commit(a, E));
    ASSERT_OK(vg_store_begin(b, E));
    ASSERT_OK(put(b, "from-b", E));
    ASSERT_OK(vg_store_commit(b, E));
    ASSERT_EQ(vg_test_store_count(a, "note"), 2);
    vg_store_close(a);
    vg_store_close(b);
}

/* Another thread's writer gets in after each way a transaction can end: commit, rollback, a
 * failed statement then rollback, and a commit that fails on a failing disk. If any path kept
 * the gate, that writer would wait out its busy timeout and fail with EBUSY. */
TEST(the_gate_is_released_however_a_transaction_ends)
{
    ASSERT_OK(vg_sqlite_fault_vfs_install(E));
    char path[4200];
    snprintf(path, sizeof path, "%s/g.db", vg_test_tmpdir("sqlite_gate_release"));
    struct vg_store *a = vg_test_store_open(path, 2000), *b = vg_test_store_open(path, 2000);
    ASSERT(a && b);

    ASSERT_OK(vg_store_begin(a, E));
    ASSERT_OK(put(a, "committed", E));
    ASSERT_OK(vg_store_commit(a, E));
    ASSERT_OK(write_on_thread(b, "after-commit", E));

    ASSERT_OK(vg_store_begin(a, E));
    ASSERT_OK(put(a, "rolled-back", E));
    ASSERT_OK(vg_store_rollback(a, E));
    ASSERT_OK(write_on_thread(b, "after-rollback", E));

    ASSERT_OK(vg_store_begin(a, E));
    ASSERT_CODE(VIGIL_EEXISTS, put(a, "committed", NULL));
    ASSERT_OK(vg_store_rollback(a, E));
    ASSERT_OK(write_on_thread(b, "after-failed-put", E));

    ASSERT_OK(vg_store_begin(a, E));
    ASSERT_OK(put(a, "lost-to-the-disk", E));
    vg_sqlite_fault_vfs_arm(1, VG_FAULT_SYNC, VIGIL_EIO, 1);
    vigil_code rc = vg_store_commit(a, NULL);
    int hit = vg_sqlite_fault_vfs_hit();
    vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
    ASSERT(hit);
    ASSERT_CODE(VIGIL_EIO, rc);
    ASSERT_OK(write_on_thread(b, "after-failed-commit", E));

    ASSERT_EQ(vg_test_store_count(b, "note"), 5);
    vg_store_close(a);
    vg_store_close(b);
}

int main(void)
{
    RUN(a_second_writer_waits_and_then_commits);
    RUN(one_thread_on_two_connections_gets_busy_not_a_deadlock);
    RUN(the_gate_is_released_however_a_transaction_ends);
    return 0;
}
