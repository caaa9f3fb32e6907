/*
 * test_sqlite_fold.c: folded commits (vg_store_fold_commits on top of shared syncs, as vigil
 * serve's workers and bench_loop's fibers use them). The fibers' transactions are savepoints of
 * one SQLite transaction, a round, that the shared sync's batch commits for all of them. What
 * must hold: a commit returns only once its round has committed (another connection sees the
 * record by then) and synced when it was durable, and only then do its kept-back writes' owner
 * and the end-of-transaction hook hear that it committed; a round costs one SQLite commit and
 * one sync however many transactions it holds; a rollback, even of a flat transaction whose
 * inner level failed, undoes only its own transaction; a round that cannot commit fails every
 * commit in it and keeps none of their records, and the store goes on; commits under group
 * commit join rounds but cause no sync; a write outside a transaction gets one of its own.
 */
#include "helpers/test.h"

#include "os/fiber.h"
#include "helpers/fault_vfs.h"
#include "store/store.h"

static char path[4200];

struct fixture {
    struct vg_store *s;     /* the fibers' connection */
    struct vg_store *other; /* another connection: what is committed */
    struct vg_fiber_batch *b;
    struct vg_fiber_sched *sched;
};

static int rounds_ended;
static vigil_code end_round(void *user, vigil_error *err)
{
    rounds_ended++;
    return vg_store_round_end(user, err);
}

static vigil_code join_batch(void *user, vigil_error *err)
{
    return vg_fiber_batch_join(user, err);
}

static int guard_no_tx(void *user)
{
    return !vg_store_in_tx(user);
}

static int64_t seen_by_other;
static struct fixture *hooked;
static int hook_calls, hook_committed;
/* The end-of-transaction hook: by the time it hears "committed", so must another connection. */
static void on_tx_end(void *user, int committed)
{
    (void)user;
    hook_calls++;
    hook_committed += committed;
    if (committed)
        seen_by_other = vg_test_store_count(hooked->other, "note");
}

static void fixture_open(struct fixture *f, const char *name)
{
    ASSERT_OK(vg_sqlite_fault_vfs_install(E));
    snprintf(path, sizeof path, "%s/s.db", vg_test_tmpdir(name));
    f->s = vg_test_store_open(path, 2000);
    f->other = vg_test_store_open(path, 2000);
    ASSERT(f->s && f->other);
    ASSERT_OK(vg_fiber_batch_new(&f->b, end_round, f->s, E));
    vigil_error e = {0};
    ASSERT_CODE(VIGIL_ESTATE, vg_store_fold_commits(f->s, 1, &e)); /* needs shared syncs */
    ASSERT_OK(vg_store_share_syncs(f->s, join_batch, f->b, E));
    ASSERT_OK(vg_store_fold_commits(f->s, 1, E));
    ASSERT_OK(vg_fiber_sched_new(&f->sched, E));
    vg_fiber_sched_set_guard(f->sched, guard_no_tx, f->s);
    hooked = f;
    hook_calls = hook_committed = 0;
    rounds_ended = 0;
    vg_store_set_tx_hook(f->s, on_tx_end, NULL);
}

static void fixture_close(struct fixture *f)
{
    vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
    vg_fiber_sched_free(f->sched);
    ASSERT_OK(vg_store_share_syncs(f->s, NULL, NULL, E)); /* ends folding too */
    vg_fiber_batch_free(f->b);
    vg_store_close(f->s);
    vg_store_close(f->other);
}

static int pending_done, pending_abort;
static vigil_code pending_fn(void *user, enum vg_store_pending phase, vigil_error *err)
{
    (void)user;
    (void)err;
    pending_done += phase == VG_PENDING_DONE;
    pending_abort += phase == VG_PENDING_ABORT;
    return VIGIL_OK;
}

enum how { COMMIT, ROLLBACK, FLAT_INNER_FAILS, NO_TX, GROUP_COMMIT };

struct job {
    struct fixture *f;
    char id[16];
    enum how how;
    vigil_code rc;
    vigil_error err;
    int64_t seen_after; /* records another connection saw when the commit returned */
    int durable;        /* saved while parked */
};

static void job_run(void *arg)
{
    struct job *j = arg;
    struct vg_store *s = j->f->s;
    struct vg_record r = {.kind = "note", .id = j->id, .owner = "a", .seq = 1, .body = "{}"};
    if (j->how == NO_TX) {
        ASSERT_OK(vg_store_durable_commits(s, j->durable, E));
        j->rc = vg_store_put(s, &r, 0, NULL, &j->err);
        j->seen_after = vg_test_store_count(j->f->other, "note");
        return;
    }
    ASSERT_OK(vg_store_durable_commits(s, j->durable, E));
    j->rc =
        j->how == FLAT_INNER_FAILS ? vg_store_begin_flat(s, &j->err) : vg_store_begin(s, &j->err);
    if (j->rc == VIGIL_OK)
        j->rc = vg_store_defer(s, pending_fn, j, &j->err);
    if (j->rc == VIGIL_OK)
        j->rc = vg_store_put(s, &r, 0, NULL, &j->err);
    if (j->rc == VIGIL_OK && j->how == FLAT_INNER_FAILS) {
        ASSERT_OK(vg_store_begin(s, E));
        ASSERT_OK(vg_store_rollback(s, E)); /* a flat level cannot be undone alone */
        ASSERT_CODE(VIGIL_ESTATE, vg_store_put(s, &r, 0, NULL, NULL));
    }
    if (j->rc == VIGIL_OK && (j->how == COMMIT || j->how == GROUP_COMMIT))
        j->rc = vg_store_commit(s, &j->err);
    else
        vg_store_rollback(s, NULL);
    j->seen_after = vg_test_store_count(j->f->other, "note");
}

/* Each fiber's durability is its own while it is parked, as a worker's runs' are. */
static void save_durability(void *user, void *arg)
{
    struct job *j = arg;
    j->durable = vg_store_durable(user);
}

static void restore_durability(void *user, void *arg)
{
    struct job *j = arg;
    ASSERT_OK(vg_store_durable_commits(user, j->durable, E));
}

static void run_jobs(struct fixture *f, struct job *j, int n)
{
    vg_fiber_sched_set_context(f->sched, save_durability, restore_durability, f->s);
    for (int i = 0; i < n; i++)
        ASSERT_OK(vg_fiber_spawn(f->sched, job_run, &j[i], E));
    vg_fiber_sched_run(f->sched);
}

static struct job job(struct fixture *f, const char *id, enum how how)
{
    struct job j = {.f = f, .how = how, .rc = -1, .durable = how != GROUP_COMMIT};
    snprintf(j.id, sizeof j.id, "%s", id);
    return j;
}

TEST(a_round_commits_many_transactions_at_once)
{
    /* proves: S4-066 */
    struct fixture f;
    fixture_open(&f, "fold_round");
    struct job j[5];
    for (int i = 0; i < 5; i++) {
        char id[8];
        snprintf(id, sizeof id, "n%d", i);
        j[i] = job(&f, id, COMMIT);
    }
    pending_done = pending_abort = 0;
    vg_sqlite_fault_vfs_arm(1L << 40, VG_FAULT_SYNC, VIGIL_EIO, 0); /* counts syncs */
    run_jobs(&f, j, 5);
    long syncs = vg_sqlite_fault_vfs_count();
    for (int i = 0; i < 5; i++) {
        ASSERT_OK(j[i].rc);
        ASSERT_EQ(j[i].seen_after, 5); /* the whole round was committed when it returned */
    }
    ASSERT_EQ(rounds_ended, 1);
    ASSERT_EQ(syncs, 1);
    ASSERT_EQ(pending_done, 5);
    ASSERT_EQ(pending_abort, 0);
    ASSERT_EQ(hook_committed, 5);
    ASSERT_EQ(seen_by_other, 5);
    ASSERT_EQ(vg_test_store_count(f.other, "note"), 5);
    fixture_close(&f);
}

TEST(a_rollback_in_a_round_undoes_only_its_own_transaction)
{
    /* proves: S3-024 */
    struct fixture f;
    fixture_open(&f, "fold_rollback");
    struct job j[5] = {job(&f, "kept1", COMMIT), job(&f, "undone", ROLLBACK),
                       job(&f, "kept2", COMMIT), job(&f, "flat", FLAT_INNER_FAILS),
                       job(&f, "kept3", COMMIT)};
    pending_done = pending_abort = 0;
    run_jobs(&f, j, 5);
    ASSERT_OK(j[0].rc);
    ASSERT_OK(j[2].rc);
    ASSERT_OK(j[4].rc);
    ASSERT_EQ(vg_test_store_count(f.other, "note"), 3);
    struct vg_record *g = NULL;
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_store_get_copy(f.other, "note", "undone", &g, NULL));
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_store_get_copy(f.other, "note", "flat", &g, NULL));
    ASSERT_OK(vg_store_get_copy(f.other, "note", "kept2", &g, E));
    vg_free(g);
    ASSERT_EQ(pending_done, 3);
    ASSERT_EQ(pending_abort, 2);
    ASSERT_EQ(hook_calls, 5);
    ASSERT_EQ(hook_committed, 3);
    fixture_close(&f);
}

TEST(a_round_that_cannot_commit_fails_every_commit_in_it)
{
    /* proves: S4-066 */
    struct fixture f;
    fixture_open(&f, "fold_fail");
    struct job j[3] = {job(&f, "f0", COMMIT), job(&f, "f1", COMMIT), job(&f, "f2", COMMIT)};
    pending_done = pending_abort = 0;
    /* The round's commit writes its frames to the log first: the disk is full for it. */
    vg_sqlite_fault_vfs_arm(1, VG_FAULT_WRITE, VIGIL_EFULL, 1);
    run_jobs(&f, j, 3);
    int hit = vg_sqlite_fault_vfs_hit();
    vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
    ASSERT(hit);
    for (int i = 0; i < 3; i++) {
        ASSERT(j[i].rc != VIGIL_OK);
        ASSERT_EQ(j[i].seen_after, 0);
    }
    ASSERT_EQ(pending_done, 0);
    ASSERT_EQ(pending_abort, 3);
    ASSERT_EQ(hook_committed, 0);
    ASSERT_EQ(vg_test_store_count(f.other, "note"), 0);
    ASSERT_EQ(vg_test_store_count(f.s, "note"), 0);
    /* The store goes on with the next round. */
    struct job k[2] = {job(&f, "after0", COMMIT), job(&f, "after1", COMMIT)};
    run_jobs(&f, k, 2);
    ASSERT_OK(k[0].rc);
    ASSERT_OK(k[1].rc);
    ASSERT_EQ(vg_test_store_count(f.other, "note"), 2);
    fixture_close(&f);
}

TEST(group_commits_join_rounds_without_a_sync_and_lone_writes_get_a_transaction)
{
    /* proves: S4-066 */
    struct fixture f;
    fixture_open(&f, "fold_group");
    struct job j[4] = {job(&f, "g0", GROUP_COMMIT), job(&f, "g1", GROUP_COMMIT),
                       job(&f, "g2", NO_TX), job(&f, "g3", GROUP_COMMIT)};
    j[2].durable = 0;
    vg_sqlite_fault_vfs_arm(1L << 40, VG_FAULT_SYNC, VIGIL_EIO, 0); /* counts syncs */
    run_jobs(&f, j, 4);
    long syncs = vg_sqlite_fault_vfs_count();
    for (int i = 0; i < 4; i++) {
        ASSERT_OK(j[i].rc);
        ASSERT_EQ(j[i].seen_after, 4); /* each returned once the round had committed */
    }
    ASSERT_EQ(syncs, 0);
    ASSERT_EQ(vg_test_store_count(f.other, "note"), 4);
    ASSERT_OK(vg_store_durable_commits(f.s, 1, E));
    /* Off a fiber a commit ends its round at once. */
    vg_sqlite_fault_vfs_arm(1L << 40, VG_FAULT_SYNC, VIGIL_EIO, 0);
    struct job lone = job(&f, "lone", COMMIT);
    job_run(&lone);
    ASSERT_OK(lone.rc);
    ASSERT_EQ(lone.seen_after, 5);
    ASSERT_EQ(vg_sqlite_fault_vfs_count(), 1);
    fixture_close(&f);
}

TEST(a_failed_sync_fails_only_the_durable_commits_of_its_round)
{
    /* proves: S4-066 */
    struct fixture f;
    fixture_open(&f, "fold_sync_fail");
    struct job j[3] = {job(&f, "d0", COMMIT), job(&f, "lazy", GROUP_COMMIT), job(&f, "d1", COMMIT)};
    vg_sqlite_fault_vfs_arm(1, VG_FAULT_SYNC, VIGIL_EIO, 0);
    run_jobs(&f, j, 3);
    int hit = vg_sqlite_fault_vfs_hit();
    vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
    ASSERT(hit);
    ASSERT_CODE(VIGIL_EIO, j[0].rc);
    ASSERT_CODE(VIGIL_EIO, j[2].rc);
    ASSERT_CONTAINS(j[0].err.message, "may not survive a power loss");
    ASSERT_OK(j[1].rc); /* it never promised more than the commit */
    /* The round committed: every record is there, and each commit says so. */
    ASSERT_EQ(vg_test_store_count(f.other, "note"), 3);
    ASSERT_EQ(hook_committed, 3);
    ASSERT(vg_store_committed(f.s));
    ASSERT_OK(vg_store_durable_commits(f.s, 1, E));
    fixture_close(&f);
}

/*
 * A transaction waiting for its round may resume only after many later rounds have ended (its
 * fiber is woken, then others run first). It must still learn its own round's outcome: here
 * its round commits, and then 64 more rounds run before it resumes, the last of which fails.
 * No fibers: the wait itself ends the round and runs the later ones, as the batch's run and
 * the other fibers would.
 */
static struct vg_store *behind_store;
static int behind_depth;
static vigil_code behind_wait(void *user, vigil_error *err)
{
    (void)user;
    if (behind_depth++ > 0) { /* a later round's own wait: end it (the 64th fails) */
        behind_depth--;
        return vg_store_round_end(behind_store, err);
    }
    ASSERT_OK(vg_store_round_end(behind_store, E)); /* the waiter's round: committed */
    for (int i = 1; i <= 64; i++) {
        char id[16];
        snprintf(id, sizeof id, "later%d", i);
        struct vg_record r = {.kind = "note", .id = id, .owner = "a", .seq = 1, .body = "{}"};
        ASSERT_OK(vg_store_begin(behind_store, E));
        ASSERT_OK(vg_store_put(behind_store, &r, 0, NULL, E));
        if (i == 64)
            vg_sqlite_fault_vfs_arm(1, VG_FAULT_WRITE, VIGIL_EIO, 1);
        vigil_code rc = vg_store_commit(behind_store, NULL);
        vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
        ASSERT_EQ(rc, i == 64 ? VIGIL_EIO : VIGIL_OK);
    }
    behind_depth--;
    return VIGIL_OK;
}

TEST(a_commit_that_resumes_rounds_later_learns_its_own_rounds_outcome)
{
    ASSERT_OK(vg_sqlite_fault_vfs_install(E));
    snprintf(path, sizeof path, "%s/s.db", vg_test_tmpdir("fold_behind"));
    struct vg_store *s = vg_test_store_open(path, 2000), *other = vg_test_store_open(path, 2000);
    ASSERT(s && other);
    behind_store = s;
    ASSERT_OK(vg_store_share_syncs(s, behind_wait, NULL, E));
    ASSERT_OK(vg_store_fold_commits(s, 1, E));
    struct vg_record r = {.kind = "note", .id = "first", .owner = "a", .seq = 1, .body = "{}"};
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    ASSERT_OK(vg_store_commit(s, E)); /* its round committed, 64 rounds ago */
    ASSERT(vg_store_committed(s));
    ASSERT_EQ(vg_test_store_count(other, "note"), 64); /* first and later1..63 */
    ASSERT_OK(vg_store_share_syncs(s, NULL, NULL, E));
    vg_store_close(s);
    vg_store_close(other);
}

/*
 * A write outside a transaction under folded commits starts one of its own. When that start
 * fails (here: another connection holds the write lock; in the torture test, an allocation of
 * its savepoint), nothing was written, and vg_store_committed must say so rather than repeat
 * the previous transaction's outcome: a caller that keeps a failed lone write whose commit
 * stayed (a shared sync that failed after it) would otherwise keep this one too.
 */
static vigil_code end_round_now(void *user, vigil_error *err)
{
    return vg_store_round_end(user, err);
}

TEST(a_lone_write_that_cannot_start_its_transaction_says_nothing_committed)
{
    snprintf(path, sizeof path, "%s/s.db", vg_test_tmpdir("fold_lone_busy"));
    struct vg_store *s = vg_test_store_open(path, 1), *other = vg_test_store_open(path, 2000);
    ASSERT(s && other);
    ASSERT_OK(vg_store_share_syncs(s, end_round_now, s, E));
    ASSERT_OK(vg_store_fold_commits(s, 1, E));
    struct vg_record r = {.kind = "note", .id = "kept", .owner = "a", .seq = 1, .body = "{}"};
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    ASSERT(vg_store_committed(s));
    ASSERT_OK(vg_store_begin(other, E)); /* holds the write lock */
    r.id = "refused";
    ASSERT_CODE(VIGIL_EBUSY, vg_store_put(s, &r, 0, NULL, NULL));
    ASSERT(!vg_store_committed(s));
    ASSERT(!vg_store_in_tx(s));
    ASSERT_OK(vg_store_rollback(other, E));
    ASSERT_EQ(vg_test_store_count(other, "note"), 1);
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E)); /* the store goes on */
    ASSERT(vg_store_committed(s));
    ASSERT_EQ(vg_test_store_count(other, "note"), 2);
    ASSERT_OK(vg_store_share_syncs(s, NULL, NULL, E));
    vg_store_close(s);
    vg_store_close(other);
}

int main(void)
{
    RUN(a_round_commits_many_transactions_at_once);
    RUN(a_rollback_in_a_round_undoes_only_its_own_transaction);
    RUN(a_round_that_cannot_commit_fails_every_commit_in_it);
    RUN(group_commits_join_rounds_without_a_sync_and_lone_writes_get_a_transaction);
    RUN(a_failed_sync_fails_only_the_durable_commits_of_its_round);
    RUN(a_commit_that_resumes_rounds_later_learns_its_own_rounds_outcome);
    RUN(a_lone_write_that_cannot_start_its_transaction_says_nothing_committed);
    return 0;
}
