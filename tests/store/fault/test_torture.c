/*
 * test_torture.c: one representative scenario (transactions with puts, updates, removes, nested
 * savepoints rolled back and released, scans, counts, a deliberate rollback, large bodies) run
 * again and again with a failure injected at every possible point in turn:
 *   1. the fault store wrapper fails port call 1, 2, 3, ...;
 *   2. allocation n fails (vg_alloc_fail_at; SQLite allocates through vg_malloc too);
 *   3. the fault VFS fails write/sync/truncate n with EIO or EFULL.
 * each until a run completes without hitting the fault. Every run must end in a clean error
 * code (never a crash), show exactly the transactions that committed (checked against a model),
 * leak nothing (the ASan build checks) and leave a store that reopens and passes its integrity
 * check. Labelled "store" and "fault" by its folder.
 *
 * Loops 2 and 3 run again across the store's fast paths combined (as tests/store/
 * test_sqlite_matrix.c runs the conformance suite): every commit mode (durable, group commit,
 * shared syncs, folded rounds) with the log VFS on and off and the record cache on and off.
 */
#include "helpers/test.h"

#include "helpers/fault_vfs.h"
#include "helpers/fault_store.h"
#include "os/fiber.h"
#include "store/store.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

/* The combination of fast paths the loops run under. */
enum mode { DURABLE, GROUP, SHARED, FOLD, N_MODES };
static const char *const mode_name[N_MODES] = {"durable", "group", "shared", "fold"};
static struct {
    enum mode mode;
    int no_log_vfs, no_record_cache;
    struct vg_fiber_batch *batch; /* the open store's, under shared syncs */
} cfg;

/* ---- the model ----------------------------------------------------------------------------- */

#define MAX_RECS 32

struct mrec {
    char id[16];
    int64_t rev;
    char body[40];
};

struct model {
    struct mrec r[MAX_RECS];
    int n;
};

static struct mrec *find(struct model *m, const char *id)
{
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->r[i].id, id) == 0)
            return &m->r[i];
    return NULL;
}

/* The committed state and a stack of pending states, one per open level. */
struct tracker {
    struct model committed;
    struct model level[4];
    int depth;
};

static struct model *cur(struct tracker *t)
{
    return t->depth ? &t->level[t->depth - 1] : &t->committed;
}

/* ---- operations that keep the model in step ------------------------------------------------ */

static char big[4200];

static vigil_code t_begin(struct vg_store *s, struct tracker *t, vigil_error *err)
{
    vigil_code rc = vg_store_begin(s, err);
    if (rc == VIGIL_OK) {
        t->level[t->depth] = *cur(t);
        t->depth++;
    }
    return rc;
}

/* Commit or roll back the innermost level like vg_store_end, and mirror it in the model. */
static vigil_code t_end(struct vg_store *s, struct tracker *t, vigil_code rc, vigil_error *err)
{
    vigil_code out = vg_store_end(s, rc, err);
    t->depth--;
    /* A shared sync that failed after its commit fails the commit, which stays. */
    if (out == VIGIL_OK || (t->depth == 0 && rc == VIGIL_OK && vg_store_committed(s))) {
        if (t->depth == 0)
            t->committed = t->level[0];
        else
            t->level[t->depth - 1] = t->level[t->depth];
    }
    return out;
}

/* Under folded commits a write outside a transaction gets one of its own, which stays when
 * the shared sync after its commit fails (vg_store_share_syncs): the write then fails too. */
static int lone_write_stayed(struct vg_store *s, const struct tracker *t, vigil_code rc)
{
    return rc != VIGIL_OK && t->depth == 0 && cfg.mode == FOLD && vg_store_committed(s);
}

static vigil_code t_put(struct vg_store *s, struct tracker *t, const char *id, const char *body,
                        vigil_error *err)
{
    struct vg_record r = {
        .kind = "t", .id = id, .owner = id[0] == 'b' ? "B" : "A", .seq = id[1], .body = body};
    vigil_code rc = vg_store_put(s, &r, 0, NULL, err);
    if (rc == VIGIL_OK || lone_write_stayed(s, t, rc)) {
        struct model *m = cur(t);
        struct mrec *x = &m->r[m->n++];
        snprintf(x->id, sizeof x->id, "%s", id);
        x->rev = 1;
        snprintf(x->body, sizeof x->body, "%.39s", body);
    }
    return rc;
}

static vigil_code t_update(struct vg_store *s, struct tracker *t, const char *id, const char *body,
                           vigil_error *err)
{
    struct mrec *x = find(cur(t), id);
    if (!x)
        VG_BUG("scenario updates a missing record %s", id);
    struct vg_record r = {.kind = "t", .id = id, .seq = 50, .body = body};
    vigil_code rc = vg_store_update(s, &r, x->rev, err);
    if (rc == VIGIL_OK) {
        x->rev++;
        snprintf(x->body, sizeof x->body, "%.39s", body);
    }
    return rc;
}

static vigil_code t_remove(struct vg_store *s, struct tracker *t, const char *id, vigil_error *err)
{
    vigil_code rc = vg_store_remove(s, "t", id, err);
    if (rc == VIGIL_OK) {
        struct model *m = cur(t);
        struct mrec *x = find(m, id);
        *x = m->r[--m->n];
    }
    return rc;
}

static int count_cb(void *user, const struct vg_record *r)
{
    (*(int *)user)++;
    return 0;
}

#define TRY(call)                                                                                  \
    do {                                                                                           \
        if ((rc = (call)) != VIGIL_OK)                                                             \
            goto fail;                                                                             \
    } while (0)

/* The scenario. On the first failure every open level is ended (rolled back) and the code
 * returned; the tracker then holds exactly what must be in the store. */
static vigil_code scenario(struct vg_store *s, struct tracker *t, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    char id[16];
    /* 1: five appends in one transaction */
    TRY(t_begin(s, t, err));
    for (int i = 1; i <= 5; i++) {
        snprintf(id, sizeof id, "a%d", i);
        TRY(t_put(s, t, id, "{\"v\":1}", err));
    }
    TRY(t_end(s, t, VIGIL_OK, err));
    /* 2: savepoints: one rolled back (with an update inside), one released */
    TRY(t_begin(s, t, err));
    TRY(t_put(s, t, "b1", "{\"b\":1}", err));
    TRY(t_begin(s, t, err));
    TRY(t_put(s, t, "b2", "{\"b\":2}", err));
    TRY(t_update(s, t, "a1", "{\"v\":2}", err));
    TRY(t_end(s, t, VIGIL_ECANCELED, err) == VIGIL_ECANCELED ? VIGIL_OK : VIGIL_ERROR);
    TRY(t_begin(s, t, err));
    TRY(t_put(s, t, "b3", "{\"b\":3}", err));
    TRY(t_end(s, t, VIGIL_OK, err));
    TRY(t_end(s, t, VIGIL_OK, err));
    /* 3: update, remove, scan and count inside one transaction */
    TRY(t_begin(s, t, err));
    TRY(t_update(s, t, "a2", "{\"v\":3}", err));
    TRY(t_remove(s, t, "a3", err));
    int seen = 0;
    struct vg_query q = {.kind = "t", .owner = "A"};
    TRY(vg_store_scan(s, &q, count_cb, &seen, err));
    int64_t n = 0;
    TRY(vg_store_count(s, &q, &n, err));
    if (n != seen)
        VG_BUG("count %lld != scan %d", (long long)n, seen);
    TRY(t_end(s, t, VIGIL_OK, err));
    /* 4: outside any transaction */
    TRY(t_put(s, t, "c1", "{\"c\":1}", err));
    struct vg_record *g = NULL;
    TRY(vg_store_get_copy(s, "t", "a1", &g, err));
    vg_free(g);
    /* 5: a deliberate rollback */
    TRY(t_begin(s, t, err));
    TRY(t_put(s, t, "d1", "{\"d\":1}", err));
    TRY(t_end(s, t, VIGIL_ECANCELED, err) == VIGIL_ECANCELED ? VIGIL_OK : VIGIL_ERROR);
    /* 6: large bodies that spill pages, three levels deep */
    TRY(t_begin(s, t, err));
    TRY(t_begin(s, t, err));
    TRY(t_begin(s, t, err));
    for (int i = 1; i <= 3; i++) {
        snprintf(id, sizeof id, "e%d", i);
        TRY(t_put(s, t, id, big, err));
    }
    TRY(t_end(s, t, VIGIL_OK, err));
    TRY(t_update(s, t, "b1", "{\"b\":9}", err));
    TRY(t_end(s, t, VIGIL_OK, err));
    TRY(t_end(s, t, VIGIL_OK, err));
    return VIGIL_OK;
fail:
    while (t->depth > 0)
        t_end(s, t, rc, NULL);
    return rc;
}

/* ---- checks -------------------------------------------------------------------------------- */

struct check_ctx {
    struct model *m;
    int seen, bad;
};

static int check_cb(void *user, const struct vg_record *r)
{
    struct check_ctx *c = user;
    struct mrec *x = find(c->m, r->id);
    c->seen++;
    if (!x || x->rev != r->rev || strncmp(x->body, r->body, 39) != 0) {
        fprintf(stderr, "record %s rev %lld is not in the model\n", r->id, (long long)r->rev);
        c->bad++;
    }
    return 0;
}

static void verify(struct vg_store *s, struct model *m, const char *when)
{
    struct check_ctx c = {.m = m};
    struct vg_query q = {.kind = "t"};
    ASSERT_OK(vg_store_scan(s, &q, check_cb, &c, E));
    if (c.bad || c.seen != m->n)
        TEST_FAIL_("%s: store has %d records (%d unexpected), model %d", when, c.seen, c.bad, m->n);
}

static char dir[4096];
static int run_no;

static vigil_code round_end(void *user, vigil_error *err)
{
    return vg_store_round_end(user, err);
}

static vigil_code join_batch(void *user, vigil_error *err)
{
    return vg_fiber_batch_join(user, err);
}

static void set_mode(struct vg_store *s)
{
    if (cfg.mode == GROUP)
        ASSERT_OK(vg_store_durable_commits(s, 0, E));
    if (cfg.mode == SHARED || cfg.mode == FOLD) {
        ASSERT_OK(vg_fiber_batch_new(&cfg.batch, round_end, s, E));
        ASSERT_OK(vg_store_share_syncs(s, join_batch, cfg.batch, E));
    }
    if (cfg.mode == FOLD)
        ASSERT_OK(vg_store_fold_commits(s, 1, E));
}

static void close_store(struct vg_store *s)
{
    vg_store_close(s);
    vg_fiber_batch_free(cfg.batch);
    cfg.batch = NULL;
}

static vigil_code open_fresh(struct vg_store **out, char *path, size_t n)
{
    snprintf(path, n, "%s/run-%d.db", dir, ++run_no);
    struct vg_store_options o = {.create_if_missing = 1,
                                 .no_log_vfs = cfg.no_log_vfs,
                                 .no_record_cache = cfg.no_record_cache};
    vigil_error err = {0};
    vigil_code rc = vg_store_open(path, &o, out, &err);
    if (rc)
        TEST_FAIL_("open %s: %s", path, err.message);
    set_mode(*out);
    return rc;
}

/* A run's store with its write-ahead log and shared memory: left behind, they fill /dev/shm
 * (gigabytes over the matrix's thousands of runs). */
static void remove_run_files(const char *path)
{
    static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
    char f[4300];
    for (size_t i = 0; i < VG_ARRAY_LEN(suffix); i++) {
        snprintf(f, sizeof f, "%s%s", path, suffix[i]);
        unlink(f);
    }
}

/* Whatever a run that failed before its check left in the test's folder. */
static void remove_dir_files(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char f[4400];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(f, sizeof f, "%s/%s", dir, e->d_name);
        unlink(f);
    }
    if (d)
        closedir(d);
}

static void reopen_and_check(const char *path, struct model *m, const char *when)
{
    struct vg_store *s = NULL;
    ASSERT_OK(vg_store_open(path, &(struct vg_store_options){0}, &s, E));
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, E));
    verify(s, m, when);
    vg_store_close(s);
    remove_run_files(path);
}

static void clean_code(vigil_code rc, const vigil_error *err, const char *when)
{
    if (rc == VIGIL_OK)
        return;
    if (err->code != rc || !err->message[0])
        TEST_FAIL_("%s: %s without an error report", when, vigil_code_name(rc));
}

/* ---- the three loops ----------------------------------------------------------------------- */

TEST(fail_each_port_call)
{
    long n;
    for (n = 1;; n++) {
        char path[4200], when[64];
        struct vg_store *inner = NULL, *s = NULL;
        open_fresh(&inner, path, sizeof path);
        ASSERT_OK(vg_store_fault_wrap(inner, &s, E));
        struct tracker t = {0};
        vg_store_fault_arm(s, n, n % 2 ? VIGIL_EIO : VIGIL_EBUSY);
        vigil_error err = {0};
        vigil_code rc = scenario(s, &t, &err);
        long calls = vg_store_fault_calls(s);
        vg_store_fault_arm(s, 0, VIGIL_OK);
        snprintf(when, sizeof when, "port call %ld", n);
        clean_code(rc, &err, when);
        ASSERT(!vg_store_in_tx(s));
        verify(s, &t.committed, when);
        vg_store_close(s);
        reopen_and_check(path, &t.committed, when);
        if (calls < n) { /* the scenario finished before call n: every point was covered */
            ASSERT_OK(rc);
            break;
        }
        ASSERT(rc != VIGIL_OK);
    }
    fprintf(stderr, "  %ld port-call failure points\n", n - 1);
    ASSERT(n > 20);
}

TEST(fail_each_allocation)
{
    long n;
    for (n = 1;; n++) {
        char path[4200], when[64];
        struct vg_store *s = NULL;
        open_fresh(&s, path, sizeof path);
        struct tracker t = {0};
        vigil_error err = {0};
        vg_alloc_fail_at(n, 0);
        vigil_code rc = scenario(s, &t, &err);
        int failed = vg_alloc_failed();
        vg_alloc_fail_at(0, 0);
        snprintf(when, sizeof when, "allocation %ld", n);
        clean_code(rc, &err, when);
        ASSERT(!vg_store_in_tx(s));
        verify(s, &t.committed, when);
        close_store(s);
        reopen_and_check(path, &t.committed, when);
        if (!failed) {
            ASSERT_OK(rc);
            break;
        }
    }
    fprintf(stderr, "  %ld allocation failure points\n", n - 1);
    ASSERT(n > 20);
}

TEST(fail_each_io)
{
    ASSERT_OK(vg_sqlite_fault_vfs_install(E));
    long n;
    int errors = 0;
    for (n = 1;; n++) {
        char path[4200], when[64];
        struct vg_store *s = NULL;
        open_fresh(&s, path, sizeof path);
        struct tracker t = {0};
        vigil_error err = {0};
        vigil_code what = n % 2 ? VIGIL_EIO : VIGIL_EFULL;
        vg_sqlite_fault_vfs_arm(n, VG_FAULT_ALL, what, 0);
        vigil_code rc = scenario(s, &t, &err);
        int hit = vg_sqlite_fault_vfs_hit();
        vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
        snprintf(when, sizeof when, "I/O operation %ld", n);
        clean_code(rc, &err, when);
        if (rc != VIGIL_OK) {
            errors++;
            /* the injected failure, or the refusal of a transaction it already ended */
            if (rc != what && rc != VIGIL_ESTATE)
                TEST_FAIL_("%s: %s: %s", when, vigil_code_name(rc), err.message);
        }
        ASSERT(!vg_store_in_tx(s));
        verify(s, &t.committed, when);
        close_store(s);
        reopen_and_check(path, &t.committed, when);
        if (!hit) {
            ASSERT_OK(rc);
            break;
        }
    }
    fprintf(stderr, "  %ld I/O failure points, %d ended the scenario\n", n - 1, errors);
    ASSERT(n > 5);
    ASSERT(errors > 0);
}

int main(void)
{
    /* fsync-heavy loops: on tmpfs when there is one, else under the test directory */
    struct stat st;
    if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0) {
        snprintf(dir, sizeof dir, "/dev/shm/vigil-torture-%ld", (long)getpid());
        ASSERT_EQ(mkdir(dir, 0700), 0);
    } else {
        snprintf(dir, sizeof dir, "%s", vg_test_tmpdir("torture"));
    }
    memset(big, 'x', sizeof big - 1);
    big[0] = '"';
    big[sizeof big - 2] = '"';
    /* The default combination, durable/log/cache, with the port-call loop: left out when
     * VIGIL_MATRIX names another single combination, to reproduce that one alone. */
    const char *only = getenv("VIGIL_MATRIX");
    if (!only || !*only || strcmp(only, "all") == 0 || strcmp(only, "durable/log/cache") == 0) {
        RUN(fail_each_port_call);
        RUN(fail_each_allocation);
        RUN(fail_each_io);
    }
    /* The matrix (the default combination, durable/log/cache, ran above). The allocation
     * loop where memory is used differently (each commit mode; the fold without the record
     * cache), the I/O loop where the files are written differently (each commit mode, with
     * and without the log VFS): each loop costs a few seconds, so not every one of the 16 runs
     * both. VIGIL_MATRIX=MODE/VFS/CACHE (e.g. fold/nolog/cache) runs both loops in that one
     * combination, VIGIL_MATRIX=all in all 16. */
    for (int mode = 0; mode < N_MODES; mode++)
        for (int no_log = 0; no_log <= 1; no_log++)
            for (int no_cache = 0; no_cache <= 1; no_cache++) {
                char name[64];
                snprintf(name, sizeof name, "%s/%s/%s", mode_name[mode], no_log ? "nolog" : "log",
                         no_cache ? "nocache" : "cache");
                int chosen = only && *only && (strcmp(only, "all") == 0 || strcmp(only, name) == 0);
                int alloc = chosen || (!only && !no_log && (!no_cache || mode == FOLD));
                int io = chosen || (!only && !no_cache) || (!only && mode == FOLD && no_log);
                if (mode == DURABLE && !no_log && !no_cache) /* ran above */
                    continue;
                cfg.mode = (enum mode)mode;
                cfg.no_log_vfs = no_log;
                cfg.no_record_cache = no_cache;
                if (alloc || io)
                    fprintf(stderr, "matrix %s:\n", name);
                if (alloc)
                    RUN(fail_each_allocation);
                if (io)
                    RUN(fail_each_io);
            }
    remove_dir_files();
    rmdir(dir);
    return 0;
}
