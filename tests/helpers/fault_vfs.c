/*
 * fault_vfs.c: a test VFS shim, under the log VFS and over the platform's, that fails the Nth
 * xWrite, xSync or xTruncate (SQLITE_FULL or SQLITE_IOERR_*), so tests can prove that a full
 * disk or a failing device ends in a clean EFULL/EIO with no partial record visible and a store
 * that reopens; it also counts the log index's locks (VG_FAULT_SHM_LOCK). Every other call passes
 * straight through to the wrapped VFS and file (shim.h).
 */
#include "base/common.h"

#include "helpers/fault_vfs.h"
#include "store/sqlite/log_vfs.h"
#include "store/sqlite/shim.h"
#include "store/store_int.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>

static sqlite3_vfs fault_vfs;
static atomic_long armed_nth, seen;
static atomic_uint armed_ops;
static atomic_int armed_code, armed_sticky, hit;

#define REAL(f) VG_SHIM_REAL(f)

/* Should this operation fail? Returns the SQLite code to return, or SQLITE_OK. */
static int trip(unsigned op, int ioerr)
{
    long nth = atomic_load(&armed_nth);
    if (nth <= 0 || !(atomic_load(&armed_ops) & op))
        return SQLITE_OK;
    long n = atomic_fetch_add(&seen, 1) + 1;
    if (n == nth || (n > nth && atomic_load(&armed_sticky))) {
        atomic_store(&hit, 1);
        return atomic_load(&armed_code) == VIGIL_EFULL ? SQLITE_FULL : ioerr;
    }
    return SQLITE_OK;
}

static int f_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off)
{
    int rc = trip(VG_FAULT_WRITE, SQLITE_IOERR_WRITE);
    return rc ? rc : REAL(f)->pMethods->xWrite(REAL(f), buf, n, off);
}

static int f_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    int rc = trip(VG_FAULT_TRUNCATE, SQLITE_IOERR_TRUNCATE);
    return rc ? rc : REAL(f)->pMethods->xTruncate(REAL(f), size);
}

static int f_sync(sqlite3_file *f, int flags)
{
    int rc = trip(VG_FAULT_SYNC, SQLITE_IOERR_FSYNC);
    return rc ? rc : REAL(f)->pMethods->xSync(REAL(f), flags);
}

static int f_shm_lock(sqlite3_file *f, int offset, int n, int flags)
{
    int rc = (flags & SQLITE_SHM_LOCK) ? trip(VG_FAULT_SHM_LOCK, SQLITE_IOERR_SHMLOCK) : SQLITE_OK;
    return rc ? rc : REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags);
}

static const sqlite3_io_methods fault_io = {
    3,
    vg_shim_close,
    vg_shim_read,
    f_write,
    f_truncate,
    f_sync,
    vg_shim_file_size,
    vg_shim_lock,
    vg_shim_unlock,
    vg_shim_check_reserved,
    vg_shim_file_control,
    vg_shim_sector_size,
    vg_shim_device_characteristics,
    vg_shim_shm_map,
    f_shm_lock,
    vg_shim_shm_barrier,
    vg_shim_shm_unmap,
    vg_shim_fetch,
    vg_shim_unfetch,
};

static int v_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out_flags)
{
    return vg_shim_open(v->pAppData, &fault_io, sizeof(struct vg_shim_file), name, f, flags,
                        out_flags);
}

static int install_rc = SQLITE_OK;

static void install(void)
{
    vg_store_sqlite_setup(); /* before registering, which initializes SQLite */
    /* Under the log VFS, so that what fails is a write that reaches the operating system (one
     * per commit's frames there), as a full disk fails it. */
    sqlite3_vfs *below = vg_sqlite_log_vfs_base();
    if (!below) {
        install_rc = SQLITE_ERROR;
        return;
    }
    vg_shim_vfs_init(&fault_vfs, "vigil-fault", below, v_open, sizeof(struct vg_shim_file),
                     below->szOsFile);
    install_rc = sqlite3_vfs_register(&fault_vfs, 0);
    if (install_rc == SQLITE_OK)
        install_rc = vg_sqlite_log_vfs_set_base(&fault_vfs);
}

vigil_code vg_sqlite_fault_vfs_install(vigil_error *err)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install);
    if (install_rc != SQLITE_OK)
        return VG_FAIL(err, VIGIL_ESTORE, "could not register the fault VFS: %s",
                       sqlite3_errstr(install_rc));
    return VIGIL_OK;
}

void vg_sqlite_fault_vfs_arm(long nth, unsigned ops, vigil_code what, int sticky)
{
    atomic_store(&armed_nth, 0);
    atomic_store(&seen, 0);
    atomic_store(&hit, 0);
    atomic_store(&armed_ops, ops);
    atomic_store(&armed_code, (int)what);
    atomic_store(&armed_sticky, sticky);
    atomic_store(&armed_nth, nth);
}

long vg_sqlite_fault_vfs_count(void)
{
    return atomic_load(&seen);
}

int vg_sqlite_fault_vfs_hit(void)
{
    return atomic_load(&hit);
}
