/*
 * fault_vfs.c: a test VFS shim over SQLite's default VFS that fails the Nth xWrite, xSync or
 * xTruncate (SQLITE_FULL or SQLITE_IOERR_*), so tests can prove that a full disk or a failing
 * device ends in a clean EFULL/EIO with no partial record visible and a store that reopens.
 * Every other call passes straight through to the wrapped VFS and file.
 */
#include "base/common.h"

#include "store/sqlite/fault_vfs.h"
#include "store/sqlite/log_vfs.h"
#include "store/store_int.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>

struct fault_file {
    sqlite3_file base;  /* must stay first */
    sqlite3_file *real; /* lives right after this struct */
};

static sqlite3_vfs *real_vfs;
static atomic_long armed_nth, seen;
static atomic_uint armed_ops;
static atomic_int armed_code, armed_sticky, hit;

#define REAL(f) (((struct fault_file *)(f))->real)

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

static int f_close(sqlite3_file *f)
{
    return REAL(f)->pMethods->xClose(REAL(f));
}

static int f_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off)
{
    return REAL(f)->pMethods->xRead(REAL(f), buf, n, off);
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

static int f_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    return REAL(f)->pMethods->xFileSize(REAL(f), size);
}

static int f_lock(sqlite3_file *f, int l)
{
    return REAL(f)->pMethods->xLock(REAL(f), l);
}

static int f_unlock(sqlite3_file *f, int l)
{
    return REAL(f)->pMethods->xUnlock(REAL(f), l);
}

static int f_check_reserved(sqlite3_file *f, int *out)
{
    return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}

static int f_file_control(sqlite3_file *f, int op, void *arg)
{
    return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}

static int f_sector_size(sqlite3_file *f)
{
    return REAL(f)->pMethods->xSectorSize(REAL(f));
}

static int f_device_characteristics(sqlite3_file *f)
{
    return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}

static int f_shm_map(sqlite3_file *f, int pg, int sz, int extend, void volatile **out)
{
    return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, extend, out);
}

static int f_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
    return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}

static void f_shm_barrier(sqlite3_file *f)
{
    REAL(f)->pMethods->xShmBarrier(REAL(f));
}

static int f_shm_unmap(sqlite3_file *f, int del)
{
    return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}

static int f_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **out)
{
    return REAL(f)->pMethods->xFetch(REAL(f), off, n, out);
}

static int f_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
    return REAL(f)->pMethods->xUnfetch(REAL(f), off, p);
}

static const sqlite3_io_methods fault_io = {
    3,
    f_close,
    f_read,
    f_write,
    f_truncate,
    f_sync,
    f_file_size,
    f_lock,
    f_unlock,
    f_check_reserved,
    f_file_control,
    f_sector_size,
    f_device_characteristics,
    f_shm_map,
    f_shm_lock,
    f_shm_barrier,
    f_shm_unmap,
    f_fetch,
    f_unfetch,
};

static int v_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out_flags)
{
    struct fault_file *ff = (struct fault_file *)f;
    ff->real = (sqlite3_file *)(ff + 1);
    int rc = real_vfs->xOpen(real_vfs, name, ff->real, flags, out_flags);
    /* SQLite calls xClose only when pMethods is set: mirror what the real open left. */
    ff->base.pMethods = ff->real->pMethods ? &fault_io : NULL;
    return rc;
}

static int v_delete(sqlite3_vfs *v, const char *name, int sync_dir)
{
    return real_vfs->xDelete(real_vfs, name, sync_dir);
}

static int v_access(sqlite3_vfs *v, const char *name, int flags, int *out)
{
    return real_vfs->xAccess(real_vfs, name, flags, out);
}

static int v_full_pathname(sqlite3_vfs *v, const char *name, int n, char *out)
{
    return real_vfs->xFullPathname(real_vfs, name, n, out);
}

static void *v_dlopen(sqlite3_vfs *v, const char *name)
{
    return real_vfs->xDlOpen(real_vfs, name);
}

static void v_dlerror(sqlite3_vfs *v, int n, char *out)
{
    real_vfs->xDlError(real_vfs, n, out);
}

static void (*v_dlsym(sqlite3_vfs *v, void *h, const char *sym))(void)
{
    return real_vfs->xDlSym(real_vfs, h, sym);
}

static void v_dlclose(sqlite3_vfs *v, void *h)
{
    real_vfs->xDlClose(real_vfs, h);
}

static int v_randomness(sqlite3_vfs *v, int n, char *out)
{
    return real_vfs->xRandomness(real_vfs, n, out);
}

static int v_sleep(sqlite3_vfs *v, int us)
{
    return real_vfs->xSleep(real_vfs, us);
}

static int v_current_time(sqlite3_vfs *v, double *out)
{
    return real_vfs->xCurrentTime(real_vfs, out);
}

static int v_last_error(sqlite3_vfs *v, int n, char *out)
{
    return real_vfs->xGetLastError(real_vfs, n, out);
}

static int v_current_time64(sqlite3_vfs *v, sqlite3_int64 *out)
{
    return real_vfs->xCurrentTimeInt64(real_vfs, out);
}

static sqlite3_vfs fault_vfs = {
    .iVersion = 2,
    .zName = "vigil-fault",
    .xOpen = v_open,
    .xDelete = v_delete,
    .xAccess = v_access,
    .xFullPathname = v_full_pathname,
    .xDlOpen = v_dlopen,
    .xDlError = v_dlerror,
    .xDlSym = v_dlsym,
    .xDlClose = v_dlclose,
    .xRandomness = v_randomness,
    .xSleep = v_sleep,
    .xCurrentTime = v_current_time,
    .xGetLastError = v_last_error,
    .xCurrentTimeInt64 = v_current_time64,
};

static int install_rc = SQLITE_OK;

static void install(void)
{
    vg_store_sqlite_setup(); /* before registering, which initializes SQLite */
    /* Under the log VFS, so that what fails is a write that reaches the operating system (one
     * per commit's frames there), as a full disk fails it. */
    real_vfs = vg_sqlite_log_vfs_base();
    if (!real_vfs) {
        install_rc = SQLITE_ERROR;
        return;
    }
    fault_vfs.szOsFile = (int)sizeof(struct fault_file) + real_vfs->szOsFile;
    fault_vfs.mxPathname = real_vfs->mxPathname;
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
