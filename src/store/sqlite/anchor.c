/*
 * anchor.c: the process's read lock on a store (anchor.h says why).
 *
 * The anchor's connection is used only under its mutex, which readers only ever try: a reader
 * that finds it taken goes on without moving the anchor. What tells the anchor it is behind is
 * the log's shared index, read where SQLite maps it (the log VFS hands out the address): its
 * change counter, which every commit of any process moves before the commit returns, and its
 * checkpoint position (after a full checkpoint, new readers take read mark 0 and no longer the
 * one the anchor holds). Both are only a hint of when to move: a stale or torn value costs a
 * move or a few fcntl calls, never a read's freshness, which SQLite's own read transaction
 * gives every read.
 */
#include "base/common.h"

#include "store/sqlite/anchor.h"
#include "store/sqlite/log_vfs.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sqlite3.h>
#include <stdint.h>
#include <sys/stat.h>

/* The wal-index header's change counter and the checkpoint's backfill position (SQLite's
 * documented wal-index format: the header's iChange at byte 8, nBackfill at byte 96). */
#define WALINDEX_CHANGE 8
#define WALINDEX_MX_FRAME 16
#define WALINDEX_N_BACKFILL 96

/* A log this long is one the next checkpoints will copy and start over (the store's
 * connections checkpoint at 10,000 pages, sqlite.c): while it is written to, the anchor stays
 * off, since a reader on its newest frames would keep the log from starting over once copied,
 * and it grew past its checkpoint size under a daemon's steady commits. It comes back once a
 * read finds the log as it was at the last one (no commit between), or started over. */
#define LONG_LOG 5000

struct vg_sqlite_anchor {
    struct vg_sqlite_anchor *next;
    dev_t dev;
    ino_t ino;
    int refs;        /* under anchors_mu */
    int paused;      /* under mu */
    atomic_int held; /* written under mu: a read transaction is open */
    pthread_mutex_t mu;
    sqlite3 *db; /* used under mu only */
    sqlite3_stmt *st_begin, *st_read, *st_end;
    const volatile unsigned char *index; /* the shared index's first page, once mapped */
    _Atomic uint64_t stamp;              /* the index's stamp when the held snapshot was taken */
};

static pthread_mutex_t anchors_mu = PTHREAD_MUTEX_INITIALIZER;
static struct vg_sqlite_anchor *anchors;

static uint64_t index_stamp(const volatile unsigned char *index)
{
    uint32_t change =
        __atomic_load_n((const volatile uint32_t *)(index + WALINDEX_CHANGE), __ATOMIC_ACQUIRE);
    uint32_t backfill =
        __atomic_load_n((const volatile uint32_t *)(index + WALINDEX_N_BACKFILL), __ATOMIC_ACQUIRE);
    return (uint64_t)change << 32 | backfill;
}

static uint32_t index_frames(const volatile unsigned char *index)
{
    return __atomic_load_n((const volatile uint32_t *)(index + WALINDEX_MX_FRAME),
                           __ATOMIC_ACQUIRE);
}

/* End the held read transaction (under mu). */
static void let_go(struct vg_sqlite_anchor *a)
{
    if (a->held && !sqlite3_get_autocommit(a->db))
        (void)sqlite3_step(a->st_end);
    sqlite3_reset(a->st_end);
    a->held = 0;
}

/* Take a read transaction on the newest snapshot (under mu). The stamp is read first: a commit
 * between it and the snapshot only makes the next read move the anchor once more. */
static void take_newest(struct vg_sqlite_anchor *a)
{
    let_go(a);
    uint64_t stamp = a->index ? index_stamp(a->index) : 0;
    if (sqlite3_step(a->st_begin) != SQLITE_DONE) {
        sqlite3_reset(a->st_begin);
        return;
    }
    sqlite3_reset(a->st_begin);
    int rc = sqlite3_step(a->st_read); /* the read that opens the snapshot */
    sqlite3_reset(a->st_read);
    if (rc != SQLITE_ROW) {
        (void)sqlite3_step(a->st_end);
        sqlite3_reset(a->st_end);
        return;
    }
    a->held = 1;
    if (!a->index) {
        void *index = NULL;
        if (sqlite3_file_control(a->db, "main", VG_LOG_FCNTL_INDEX, &index) == SQLITE_OK)
            a->index = index;
        stamp = 0; /* unknown when taken: the next read moves it once more */
    }
    atomic_store(&a->stamp, stamp);
}

static void anchor_free(struct vg_sqlite_anchor *a)
{
    if (a->db)
        let_go(a);
    sqlite3_finalize(a->st_begin);
    sqlite3_finalize(a->st_read);
    sqlite3_finalize(a->st_end);
    sqlite3_close_v2(a->db);
    pthread_mutex_destroy(&a->mu);
    vg_free(a);
}

static struct vg_sqlite_anchor *anchor_open(const char *uri, const char *vfs)
{
    struct vg_sqlite_anchor *a = vg_calloc(1, sizeof *a);
    if (!a)
        return NULL;
    pthread_mutex_init(&a->mu, NULL);
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI;
    if (sqlite3_open_v2(uri, &a->db, flags, vfs) != SQLITE_OK ||
        sqlite3_prepare_v2(a->db, "BEGIN", -1, &a->st_begin, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(a->db, "PRAGMA schema_version", -1, &a->st_read, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(a->db, "COMMIT", -1, &a->st_end, NULL) != SQLITE_OK) {
        anchor_free(a);
        return NULL;
    }
    take_newest(a);
    if (!a->index) { /* not through the log VFS, or not a log in WAL mode: nothing to follow */
        anchor_free(a);
        return NULL;
    }
    return a;
}

static struct vg_sqlite_anchor *find_locked(dev_t dev, ino_t ino)
{
    struct vg_sqlite_anchor *a = anchors;
    while (a && (a->dev != dev || a->ino != ino))
        a = a->next;
    return a;
}

struct vg_sqlite_anchor *vg_sqlite_anchor_get(const char *path, const char *uri, const char *vfs)
{
    struct stat st;
    if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return NULL;
    pthread_mutex_lock(&anchors_mu);
    struct vg_sqlite_anchor *a = find_locked(st.st_dev, st.st_ino);
    if (!a && (a = anchor_open(uri, vfs))) {
        a->dev = st.st_dev;
        a->ino = st.st_ino;
        a->next = anchors;
        anchors = a;
    }
    if (a)
        a->refs++;
    pthread_mutex_unlock(&anchors_mu);
    return a;
}

void vg_sqlite_anchor_put(struct vg_sqlite_anchor *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&anchors_mu);
    int last = --a->refs == 0;
    if (last) {
        struct vg_sqlite_anchor **p = &anchors;
        while (*p != a)
            p = &(*p)->next;
        *p = a->next;
    }
    pthread_mutex_unlock(&anchors_mu);
    if (last)
        anchor_free(a);
}

void vg_sqlite_anchor_follow(struct vg_sqlite_anchor *a)
{
    uint64_t stamp = index_stamp(a->index);
    if (atomic_load_explicit(&a->held, memory_order_relaxed) &&
        stamp == atomic_load_explicit(&a->stamp, memory_order_relaxed))
        return;
    if (pthread_mutex_trylock(&a->mu) != 0)
        return;
    if (!a->paused && index_frames(a->index) >= LONG_LOG && stamp != atomic_load(&a->stamp)) {
        let_go(a); /* written to, and near its checkpoint: off until the log is quiet */
        atomic_store(&a->stamp, stamp);
    } else if (!a->paused) {
        take_newest(a);
    }
    pthread_mutex_unlock(&a->mu);
}

struct vg_sqlite_anchor *vg_sqlite_anchor_pause(const char *path)
{
    struct stat st;
    if (!path || stat(path, &st) != 0)
        return NULL;
    pthread_mutex_lock(&anchors_mu);
    struct vg_sqlite_anchor *a = find_locked(st.st_dev, st.st_ino);
    if (a)
        a->refs++;
    pthread_mutex_unlock(&anchors_mu);
    if (!a)
        return NULL;
    pthread_mutex_lock(&a->mu);
    a->paused++;
    let_go(a);
    pthread_mutex_unlock(&a->mu);
    return a;
}

void vg_sqlite_anchor_resume(struct vg_sqlite_anchor *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    a->paused--;
    pthread_mutex_unlock(&a->mu);
    vg_sqlite_anchor_put(a);
}
