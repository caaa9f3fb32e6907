/*
 * log_vfs.c: the "vigil" SQLite VFS, a shim over the platform's that writes a write-ahead log's
 * frames with one system call per commit.
 *
 * SQLite writes each log frame as two writes, its 24-byte header and then the page, so an agent
 * step's two commits (some 27 pages) cost about 55 pwrite calls; the kernel's work per call,
 * not the bytes, was about a fifth of a step's CPU. Here the frames of a log are gathered in a
 * buffer while they arrive in sequence and written in one call:
 *
 *  - when the page of a commit frame arrives (the WAL format marks a transaction's last frame
 *    by a non-zero database size in its header), so the commit's write fails, if it fails, as
 *    the write SQLite made, and SQLite rolls the transaction back as it would have;
 *  - before anything that must see the file as written: a read of the log, a sync, a truncate,
 *    a size query, the close, a write elsewhere in the file;
 *  - and at the memory barrier SQLite raises on the database file just before it publishes a
 *    new log end to other connections in the shared index (between writing the index header's
 *    two copies; readers accept a header only when both agree). Nothing is normally left by
 *    then: this covers frames rewritten in place after a large transaction spilled its cache.
 *
 * The log is also made to grow ahead of its frames. A sync of a file that grew since the last
 * one must write the file's new size and allocate its new blocks as well as sync the data: on
 * ext4 that is a second write to wait for, and about a third of a lone agent's step. So when a
 * writer's frames come near the file's end, zeros are appended after them (a quarter MiB at
 * first, then as much as the file holds, at most 4 MiB at a time), and the commits that follow
 * overwrite blocks the file already has. Zeros past the last frame are what SQLite finds after
 * any log's last commit (a frame that fails its checksum ends the log), and they are only ever
 * appended past the file's end, by the writer, so they never overwrite a frame. A failed append
 * is not an error: the log then grows by its frames, as it would have. Once SQLite has filled
 * the log to its checkpoint size it starts again at the beginning and the file stops growing;
 * a checkpoint that truncates the log starts the growth over.
 *
 * And the log is kept when its last connection closes. SQLite deletes it then, after that
 * connection's checkpoint has copied every frame into the database file and synced it, so the
 * next process to open the store started a new log and paid for its growth again, every time:
 * a step of an agent on a store reopened cost an eighth more CPU and a fifth more wall time
 * than one on a store whose log had its blocks. SQLite asks the database file whether to keep
 * the log (SQLITE_FCNTL_PERSIST_WAL) at exactly that point, holding the database file's
 * exclusive lock; the answer here is yes, and the log is emptied in place instead of deleted:
 * every byte of it is overwritten with zeros (the header last, after a sync of the rest), so no
 * page image of a deleted row outlives the close (secure delete covers the log too), and a log
 * whose header is zeros is one SQLite reads as having no frames (the same check that ends a log
 * after a crash): the next connection starts it afresh over blocks the file already has. A
 * close that finds the header zero already (the store was only read) writes nothing. Zeros over
 * cached, allocated blocks cost a fraction of growing the file by them. That is done only while the
 * database file is locked exclusively and the shared index says every frame is copied (its mxFrame
 * equals its nBackfill, in the wal-index format SQLite documents); for a log bigger than
 * KEEP_MAX, or if a write or the sync fails, the answer is no and SQLite deletes the log as it
 * always did. A crash while the zeros are written leaves a log whose frames are all in the
 * database file already, its header intact: SQLite's recovery reads them as the same pages,
 * and the next close empties it again.
 *
 * Frames not yet written are frames no reader can see, so a crash that loses the buffer loses
 * only what a crash before the writes would have. A failed write that SQLite is told of in a
 * write of its own fails the transaction being written, which its pager then rolls back whole:
 * its frames are dropped (a full disk would otherwise fail every later read of the log that
 * tries them again). One that fails elsewhere (a read, a sync, the barrier) leaves them in the
 * buffer, to be tried again at the next flush point, so nothing SQLite believes written is
 * skipped. Rollback journals and database files pass straight through.
 */
#include "base/common.h"

#include "store/sqlite/log_vfs.h"
#include "store/sqlite/shim.h"

#include "base/alloc.h"
#include "base/stats.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A commit larger than this is written in pieces of this size (an agent step's commits are
 * 40-90 KB). The buffer is kept while its log is open: one per connection. It stays below
 * 128 KiB: SQLite's unix VFS writes at most 0x1ffff bytes in one call (it masks the count). */
#define LOG_BUF_MAX (124 * 1024)
/* Growing ahead (above): the first append, the most appended at once, the piece written per
 * call, and how near the file's end the frames must come to start an append. */
#define GROW_MIN (256 * 1024)
#define GROW_MAX (4 * 1024 * 1024)
#define GROW_PIECE (64 * 1024)
#define GROW_NEAR GROW_PIECE
/* A log larger than this at the last close is deleted, not kept: emptying it would cost the
 * close more than its growth costs the next process (SQLite's checkpoint lets it reach about
 * 40 MB, a bulk load more). */
#define KEEP_MAX (16 * 1024 * 1024)
/* The wal-index fields the keeping checks (SQLite's wal-index format: native byte order, the
 * first copy of the header at 0, the checkpoint information after both copies). */
#define WALINDEX_MX_FRAME 16
#define WALINDEX_N_BACKFILL 96
/* Room for the file of the VFS below and one more shim under it (the tests' fault VFS). */
#define BASE_ROOM(vfs) (2 * (vfs)->szOsFile + 64)

struct log_file {
    struct vg_shim_file shim; /* must stay first; the file below follows this struct */
    int is_log;               /* a write-ahead log: its writes are gathered */
    int commit_header;        /* the last write gathered was the header of a commit frame */
    unsigned char *buf;       /* gathered bytes, contiguous in the file from buf_off */
    int len;                  /* bytes in buf */
    sqlite3_int64 buf_off;
    int published;           /* buf holds a published commit's bytes: the barrier failed */
    struct log_file *log;    /* a database file: its log while that is open */
    struct log_file *db;     /* a log: its database file */
    sqlite3_int64 size_seen; /* the log file's size when last looked at or grown */
    int lock;                /* a database file: the lock level it holds (SQLITE_LOCK_...) */
    int commit_sync;         /* a database file: its log is synced as each commit is written */
};

static sqlite3_vfs log_vfs; /* its pAppData is the VFS below */
/* Where to count what the VFS does (log_vfs.h): NULL, nowhere, unless a program asks. */
static _Atomic(struct vg_log_vfs_counts *) counts;
#define COUNT(field, n)                                                                            \
    do {                                                                                           \
        struct vg_log_vfs_counts *c_ = atomic_load_explicit(&counts, memory_order_acquire);        \
        if (c_)                                                                                    \
            atomic_fetch_add_explicit(&c_->field, (n), memory_order_relaxed);                      \
    } while (0)
/* Never written: the pages read from it are the kernel's shared zero page, not resident memory
 * of the process. */
static unsigned char zeros[GROW_PIECE];

#define REAL(f) VG_SHIM_REAL(f)

/* Write what is gathered. On failure the bytes stay, for the next flush point to retry. */
static int flush(struct log_file *lf)
{
    if (lf->len == 0)
        return SQLITE_OK;
    int rc = REAL(lf)->pMethods->xWrite(REAL(lf), lf->buf, lf->len, lf->buf_off);
    if (rc == SQLITE_OK) {
        lf->len = 0;
        lf->published = 0;
        COUNT(writes_made, 1);
    }
    return rc;
}

/* Frames now reach `end` of the log: when that is near the file's end, append zeros (see the
 * top of the file). Only the writer calls this, from SQLite's own write of the log, so nothing
 * else appends meanwhile; the size is asked of the file, not assumed, because another
 * connection may have truncated or grown it. */
static void grow_ahead(struct log_file *lf, sqlite3_int64 end)
{
    sqlite3_int64 size;
    if (end + GROW_NEAR <= lf->size_seen)
        return;
    if (REAL(lf)->pMethods->xFileSize(REAL(lf), &size) != SQLITE_OK)
        return;
    lf->size_seen = size;
    if (end + GROW_NEAR <= size)
        return;
    sqlite3_int64 off = size > end ? size : end;
    sqlite3_int64 more = size < GROW_MIN ? GROW_MIN : size > GROW_MAX ? GROW_MAX : size;
    sqlite3_int64 target = (off + more + GROW_PIECE - 1) / GROW_PIECE * GROW_PIECE;
    while (off < target) {
        int n = (int)(GROW_PIECE - off % GROW_PIECE);
        if (REAL(lf)->pMethods->xWrite(REAL(lf), zeros, n, off) != SQLITE_OK)
            return; /* the log grows by its frames instead */
        off += n;
        lf->size_seen = off;
        COUNT(grown_writes, 1);
        COUNT(grown_bytes, n);
    }
}

/* flush() on SQLite's own write: the failure fails the transaction being written, so its
 * frames go, unless the buffer holds bytes of a commit already published. */
static int flush_in_write(struct log_file *lf)
{
    sqlite3_int64 end = lf->buf_off + lf->len;
    int rc = flush(lf);
    if (rc != SQLITE_OK && !lf->published)
        lf->len = 0;
    if (rc == SQLITE_OK && end > lf->buf_off)
        grow_ahead(lf, end);
    return rc;
}

static int l_close(sqlite3_file *f)
{
    struct log_file *lf = (struct log_file *)f;
    int rc = flush(lf);
    if (lf->db)
        lf->db->log = NULL;
    if (lf->log)
        lf->log->db = NULL;
    vg_free(lf->buf);
    lf->buf = NULL;
    int rc2 = REAL(lf)->pMethods->xClose(REAL(lf));
    return rc != SQLITE_OK ? rc : rc2;
}

static int l_read(sqlite3_file *f, void *out, int n, sqlite3_int64 off)
{
    struct log_file *lf = (struct log_file *)f;
    int rc = flush(lf);
    return rc != SQLITE_OK ? rc : REAL(lf)->pMethods->xRead(REAL(lf), out, n, off);
}

/* Is this the 24-byte header of a frame that ends a transaction (its second big-endian word,
 * the database size after the commit, is not zero)? */
static int commit_frame_header(const unsigned char *p, int n)
{
    return n == 24 && (p[4] | p[5] | p[6] | p[7]) != 0;
}

/* A commit's frames are all in the file: when its connection asked for durable commits
 * (VG_LOG_FCNTL_COMMIT_SYNC), sync the log now, inside SQLite's write of the commit frame. That
 * is where synchronous=FULL syncs (after the frames, before the index publishes the new log
 * end), so a commit is visible only once durable, and a failed sync fails the commit, which
 * SQLite rolls back as FULL's would be; the syncs SQLite makes itself (the log's header when
 * it starts over, the checkpoints) are the same under NORMAL. */
static int commit_written(struct log_file *lf)
{
    if (!lf->db || !lf->db->commit_sync)
        return SQLITE_OK;
    vg_stats_log_sync();
    return REAL(lf)->pMethods->xSync(REAL(lf), SQLITE_SYNC_NORMAL);
}

static int l_write(sqlite3_file *f, const void *data, int n, sqlite3_int64 off)
{
    struct log_file *lf = (struct log_file *)f;
    if (!lf->is_log)
        return REAL(lf)->pMethods->xWrite(REAL(lf), data, n, off);
    COUNT(writes_asked, 1);
    int rc;
    if (lf->len && (off != lf->buf_off + lf->len || lf->len + n > LOG_BUF_MAX) &&
        (rc = flush_in_write(lf)) != SQLITE_OK)
        return rc;
    if (!lf->buf && n <= LOG_BUF_MAX)
        lf->buf = vg_malloc(LOG_BUF_MAX); /* without it, writes pass through one by one */
    if (!lf->buf || n > LOG_BUF_MAX) {
        int commit_page = lf->commit_header;
        lf->commit_header = commit_frame_header(data, n);
        COUNT(writes_made, 1);
        rc = REAL(lf)->pMethods->xWrite(REAL(lf), data, n, off);
        return rc == SQLITE_OK && commit_page ? commit_written(lf) : rc;
    }
    if (lf->len == 0)
        lf->buf_off = off;
    memcpy(lf->buf + lf->len, data, (size_t)n);
    lf->len += n;
    if (lf->commit_header) {
        lf->commit_header = 0;
        /* the commit frame's page: the transaction is all here */
        rc = flush_in_write(lf);
        return rc == SQLITE_OK ? commit_written(lf) : rc;
    }
    lf->commit_header = commit_frame_header(data, n);
    return SQLITE_OK;
}

static int l_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    struct log_file *lf = (struct log_file *)f;
    int rc = flush(lf);
    if (rc == SQLITE_OK)
        rc = REAL(f)->pMethods->xTruncate(REAL(f), size);
    if (size < lf->size_seen)
        lf->size_seen = size; /* even on failure: a size too small only costs a look */
    return rc;
}

static int l_sync(sqlite3_file *f, int flags)
{
    int rc = flush((struct log_file *)f);
    return rc != SQLITE_OK ? rc : REAL(f)->pMethods->xSync(REAL(f), flags);
}

static int l_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    int rc = flush((struct log_file *)f);
    return rc != SQLITE_OK ? rc : REAL(f)->pMethods->xFileSize(REAL(f), size);
}

/* Raised on the database file between the two copies of a new index header: the log's frames
 * must be in the file before the second copy lets readers use them. A failure here cannot be
 * reported; the bytes stay gathered and the log's next read, write or sync tries again. */
static void l_shm_barrier(sqlite3_file *f)
{
    struct log_file *lf = (struct log_file *)f;
    if (lf->log && flush(lf->log) != SQLITE_OK)
        lf->log->published = 1;
    vg_shim_shm_barrier(f);
}

static int l_lock(sqlite3_file *f, int level)
{
    int rc = vg_shim_lock(f, level);
    if (rc == SQLITE_OK)
        ((struct log_file *)f)->lock = level;
    return rc;
}

static int l_unlock(sqlite3_file *f, int level)
{
    int rc = vg_shim_unlock(f, level);
    if (rc == SQLITE_OK)
        ((struct log_file *)f)->lock = level;
    return rc;
}

/* Does the shared index of the database file db say every frame of its log is in the database
 * file? */
static int log_all_copied(struct log_file *db)
{
    void volatile *region = NULL;
    if (vg_shim_shm_map(&db->shim.base, 0, 32768, 0, &region) != SQLITE_OK || !region)
        return 0;
    uint32_t mx_frame, n_backfill;
    memcpy(&mx_frame, (const char *)region + WALINDEX_MX_FRAME, sizeof mx_frame);
    memcpy(&n_backfill, (const char *)region + WALINDEX_N_BACKFILL, sizeof n_backfill);
    return mx_frame == n_backfill;
}

/* The last connection's close asks whether to keep its log (see the top of the file): empty it
 * in place and say yes, or say no. The header goes last, after the rest is synced: a header of
 * zeros then means every byte after it is zero too, so a close that finds one (nothing was
 * written since the log was last emptied: a store only read) has nothing to write. */
static int keep_log(struct log_file *db)
{
    struct log_file *log = db->log;
    unsigned char header[32];
    sqlite3_int64 size, off = sizeof header;
    if (!log || db->lock != SQLITE_LOCK_EXCLUSIVE || !log_all_copied(db) ||
        flush(log) != SQLITE_OK || REAL(log)->pMethods->xFileSize(REAL(log), &size) != SQLITE_OK ||
        size > KEEP_MAX)
        return 0;
    if (size < (sqlite3_int64)sizeof header ||
        (REAL(log)->pMethods->xRead(REAL(log), header, sizeof header, 0) == SQLITE_OK &&
         memcmp(header, zeros, sizeof header) == 0))
        goto kept;
    while (off < size) {
        int n = size - off < GROW_PIECE ? (int)(size - off) : GROW_PIECE;
        if (REAL(log)->pMethods->xWrite(REAL(log), zeros, n, off) != SQLITE_OK)
            return 0;
        off += n;
    }
    if (REAL(log)->pMethods->xSync(REAL(log), SQLITE_SYNC_NORMAL | SQLITE_SYNC_DATAONLY) !=
            SQLITE_OK ||
        REAL(log)->pMethods->xWrite(REAL(log), zeros, sizeof header, 0) != SQLITE_OK)
        return 0;
kept:
    log->size_seen = size;
    COUNT(logs_kept, 1);
    return 1;
}

static int l_file_control(sqlite3_file *f, int op, void *arg)
{
    struct log_file *lf = (struct log_file *)f;
    if (op == VG_LOG_FCNTL_COMMIT_SYNC) {
        if (lf->is_log)
            return SQLITE_NOTFOUND;
        lf->commit_sync = *(int *)arg != 0;
        return SQLITE_OK;
    }
    if (op == VG_LOG_FCNTL_INDEX) {
        void volatile *region = NULL;
        if (lf->is_log || vg_shim_shm_map(f, 0, 32768, 0, &region) != SQLITE_OK)
            region = NULL;
        *(void **)arg = (void *)region;
        return lf->is_log ? SQLITE_NOTFOUND : SQLITE_OK;
    }
    if (op == SQLITE_FCNTL_PERSIST_WAL && !lf->is_log && *(int *)arg < 0) {
        int rc = vg_shim_file_control(f, op, arg);
        /* A connection that asked to keep its log keeps it as SQLite does, frames and all. */
        if (rc == SQLITE_OK && *(int *)arg != 1)
            *(int *)arg = keep_log(lf);
        return rc;
    }
    return vg_shim_file_control(f, op, arg);
}

static const sqlite3_io_methods log_io = {
    3,
    l_close,
    l_read,
    l_write,
    l_truncate,
    l_sync,
    l_file_size,
    l_lock,
    l_unlock,
    vg_shim_check_reserved,
    l_file_control,
    vg_shim_sector_size,
    vg_shim_device_characteristics,
    vg_shim_shm_map,
    vg_shim_shm_lock,
    l_shm_barrier,
    vg_shim_shm_unmap,
    vg_shim_fetch,
    vg_shim_unfetch,
};

/* Private by default: a store holds a person's conversations and memory. SQLite creates a
 * database file 0644 less the umask, and gives the log, the shared index and a rollback journal
 * it creates the database file's mode. So a database file this VFS is asked to create is made
 * here first, empty and 0600 whatever the umask (an empty file is a new database to SQLite);
 * one that exists keeps its mode. Failures are left for SQLite's own open to report. */
static void create_private(const char *name)
{
    int fd = open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
        (void)fchmod(fd, 0600);
        close(fd);
    }
}

/* SQLite sets a log's and a shared index's mode only when it creates them, and this VFS keeps
 * both past the last close (the top of the file): one made by an older vigil, or before the
 * database file's mode was changed, would keep its mode for good. At a log's open both are
 * given the database file's mode, as SQLite gives it to those it creates. */
static void log_follows_db_mode(const char *log_name)
{
    const char *db = sqlite3_filename_database(log_name);
    char shm[4200];
    struct stat ds, ls;
    if (!db || stat(db, &ds) != 0)
        return;
    if (stat(log_name, &ls) == 0 && (ls.st_mode & 0777) != (ds.st_mode & 0777))
        (void)chmod(log_name, ds.st_mode & 0777);
    if (snprintf(shm, sizeof shm, "%s-shm", db) < (int)sizeof shm && stat(shm, &ls) == 0 &&
        (ls.st_mode & 0777) != (ds.st_mode & 0777))
        (void)chmod(shm, ds.st_mode & 0777);
}

static int v_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out_flags)
{
    struct log_file *lf = (struct log_file *)f;
    sqlite3_vfs *below = __atomic_load_n(&log_vfs.pAppData, __ATOMIC_ACQUIRE);
    if (name && (flags & SQLITE_OPEN_MAIN_DB) && (flags & SQLITE_OPEN_CREATE))
        create_private(name);
    int rc = vg_shim_open(below, &log_io, sizeof *lf, name, f, flags, out_flags);
    if (rc == SQLITE_OK && f->pMethods && (flags & SQLITE_OPEN_WAL) && name) {
        lf->is_log = 1;
        log_follows_db_mode(name);
        /* Link the log to its database file, whose barrier must flush it. That file is one of
         * ours when the connection opened through this VFS, as vigil's all do. */
        sqlite3_file *db = sqlite3_database_file_object(name);
        if (db && db->pMethods == &log_io) {
            lf->db = (struct log_file *)db;
            lf->db->log = lf;
        }
    }
    return rc;
}

int vg_sqlite_log_vfs_register(void)
{
    if (sqlite3_vfs_find("vigil") == &log_vfs)
        return SQLITE_OK;
    sqlite3_vfs *below = sqlite3_vfs_find(NULL);
    if (!below)
        return SQLITE_ERROR;
    vg_shim_vfs_init(&log_vfs, "vigil", below, v_open, sizeof(struct log_file), BASE_ROOM(below));
    return sqlite3_vfs_register(&log_vfs, 0);
}

sqlite3_vfs *vg_sqlite_log_vfs_base(void)
{
    return __atomic_load_n(&log_vfs.pAppData, __ATOMIC_ACQUIRE);
}

int vg_sqlite_log_vfs_set_base(sqlite3_vfs *base)
{
    if (!base || (int)sizeof(struct log_file) + base->szOsFile > log_vfs.szOsFile ||
        base->mxPathname > log_vfs.mxPathname)
        return SQLITE_ERROR;
    __atomic_store_n(&log_vfs.pAppData, (void *)base, __ATOMIC_RELEASE);
    return SQLITE_OK;
}

void vg_sqlite_log_vfs_count_into(struct vg_log_vfs_counts *c)
{
    atomic_store(&counts, c);
}
