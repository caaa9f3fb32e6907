/*
 * test_sqlite_matrix.c: the SQLite adapter's fast paths tested together, as SQLite tests its
 * compile options: the store conformance suite (tests/conformance/store) runs once for every
 * combination of
 *   - the commit mode: durable (a sync per commit), group commit, shared syncs (the commits
 *     wait in a fiber batch that syncs once for all of them), and folded rounds (the fibers'
 *     transactions are savepoints of one round the batch commits), the last two run inside a
 *     fiber whose scheduler forbids parking inside a transaction, as vigil serve's workers do;
 *   - the log VFS on or off (vg_store_options.no_log_vfs);
 *   - the record cache on or off (vg_store_options.no_record_cache).
 * The I/O and allocation torture loops run across the same matrix in tests/store/fault/
 * test_torture.c. VIGIL_MATRIX=MODE/VFS/CACHE (e.g. fold/nolog/cache) runs one combination.
 */
#include "helpers/test.h"

#include "conformance/store/conformance.h"
#include "os/fiber.h"

enum mode { DURABLE, GROUP, SHARED, FOLD, N_MODES };
static const char *const mode_name[N_MODES] = {"durable", "group", "shared", "fold"};

struct matrix_opener {
    const char *dir;
    int n; /* fresh stores made so far */
    enum mode mode;
    int no_log_vfs, no_record_cache;
    char label[64];
    /* One batch per store opened under shared syncs; freed at the end (a store the suite
     * closes no longer uses its batch). */
    struct vg_fiber_batch *batch[256];
    int n_batch;
};

static vigil_code round_end(void *user, vigil_error *err)
{
    return vg_store_round_end(user, err);
}

static vigil_code join_batch(void *user, vigil_error *err)
{
    return vg_fiber_batch_join(user, err);
}

static vigil_code set_mode(struct matrix_opener *o, struct vg_store *s, vigil_error *err)
{
    if (o->mode == DURABLE)
        return VIGIL_OK;
    if (o->mode == GROUP)
        return vg_store_durable_commits(s, 0, err);
    if (o->n_batch >= (int)VG_ARRAY_LEN(o->batch))
        return VG_FAIL(err, VIGIL_EFULL, "the matrix test opened more stores than it keeps");
    struct vg_fiber_batch *b = NULL;
    vigil_code rc = vg_fiber_batch_new(&b, round_end, s, err);
    if (rc)
        return rc;
    o->batch[o->n_batch++] = b;
    if ((rc = vg_store_share_syncs(s, join_batch, b, err)))
        return rc;
    return o->mode == FOLD ? vg_store_fold_commits(s, 1, err) : VIGIL_OK;
}

static vigil_code open_store(void *user, int fresh, struct vg_store **out, vigil_error *err)
{
    struct matrix_opener *o = user;
    char path[4200];
    if (fresh)
        o->n++;
    snprintf(path, sizeof path, "%s/%d.db", o->dir, o->n);
    struct vg_store_options opts = {
        .create_if_missing = 1, .no_log_vfs = o->no_log_vfs, .no_record_cache = o->no_record_cache};
    struct vg_store *s = NULL;
    vigil_code rc = vg_store_open(path, &opts, &s, err);
    if (rc == VIGIL_OK && (rc = set_mode(o, s, err)) != VIGIL_OK) {
        vg_store_close(s);
        s = NULL;
    }
    *out = s;
    return rc;
}

static void suite_fiber(void *arg)
{
    struct vg_conf_opener *op = arg;
    vg_store_conformance(op);
}

static void run_one(const char *dir, enum mode mode, int no_log_vfs, int no_record_cache)
{
    static struct matrix_opener o;
    memset(&o, 0, sizeof o);
    o.dir = dir;
    o.mode = mode;
    o.no_log_vfs = no_log_vfs;
    o.no_record_cache = no_record_cache;
    snprintf(o.label, sizeof o.label, "sqlite %s/%s/%s", mode_name[mode],
             no_log_vfs ? "nolog" : "log", no_record_cache ? "nocache" : "cache");
    struct vg_conf_opener op = {o.label, open_store, &o};
    if (mode == SHARED || mode == FOLD) {
        /* On a fiber: a commit's wait parks it until the batch's run. No guard: the suite's
         * only wait is a commit's, which parks outside every transaction. */
        struct vg_fiber_sched *sched = NULL;
        ASSERT_OK(vg_fiber_sched_new(&sched, E));
        ASSERT_OK(vg_fiber_spawn(sched, suite_fiber, &op, E));
        vg_fiber_sched_run(sched);
        vg_fiber_sched_free(sched);
    } else {
        vg_store_conformance(&op);
    }
    for (int i = 0; i < o.n_batch; i++)
        vg_fiber_batch_free(o.batch[i]);
}

int main(void)
{
    const char *only = getenv("VIGIL_MATRIX");
    int ran = 0;
    for (int mode = 0; mode < N_MODES; mode++)
        for (int no_log = 0; no_log <= 1; no_log++)
            for (int no_cache = 0; no_cache <= 1; no_cache++) {
                char name[64];
                snprintf(name, sizeof name, "%s/%s/%s", mode_name[mode], no_log ? "nolog" : "log",
                         no_cache ? "nocache" : "cache");
                if (only && *only && strcmp(only, name) != 0)
                    continue;
                char tmp[96];
                snprintf(tmp, sizeof tmp, "matrix_%s_%d_%d", mode_name[mode], no_log, no_cache);
                run_one(vg_test_tmpdir(tmp), (enum mode)mode, no_log, no_cache);
                ran++;
            }
    ASSERT(ran > 0);
    fprintf(stderr, "store matrix: %d combinations\n", ran);
    return 0;
}
