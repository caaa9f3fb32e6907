/*
 * shim.c: the pass-through parts of vigil's SQLite VFS shims (shim.h).
 */
#include "base/common.h"

#include "store/sqlite/shim.h"

#include <string.h>

#define REAL(f) VG_SHIM_REAL(f)
#define BELOW(v) ((sqlite3_vfs *)(v)->pAppData)

int vg_shim_open(sqlite3_vfs *below, const sqlite3_io_methods *io, size_t own_size,
                 const char *name, sqlite3_file *f, int flags, int *out_flags)
{
    struct vg_shim_file *sf = (struct vg_shim_file *)f;
    memset(sf, 0, own_size);
    sf->real = (sqlite3_file *)((char *)f + own_size);
    int rc = below->xOpen(below, name, sf->real, flags, out_flags);
    sf->base.pMethods = sf->real->pMethods ? io : NULL;
    return rc;
}

int vg_shim_close(sqlite3_file *f)
{
    return REAL(f)->pMethods->xClose(REAL(f));
}

int vg_shim_read(sqlite3_file *f, void *out, int n, sqlite3_int64 off)
{
    return REAL(f)->pMethods->xRead(REAL(f), out, n, off);
}

int vg_shim_write(sqlite3_file *f, const void *data, int n, sqlite3_int64 off)
{
    return REAL(f)->pMethods->xWrite(REAL(f), data, n, off);
}

int vg_shim_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    return REAL(f)->pMethods->xTruncate(REAL(f), size);
}

int vg_shim_sync(sqlite3_file *f, int flags)
{
    return REAL(f)->pMethods->xSync(REAL(f), flags);
}

int vg_shim_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
    return REAL(f)->pMethods->xFileSize(REAL(f), size);
}

int vg_shim_lock(sqlite3_file *f, int l)
{
    return REAL(f)->pMethods->xLock(REAL(f), l);
}

int vg_shim_unlock(sqlite3_file *f, int l)
{
    return REAL(f)->pMethods->xUnlock(REAL(f), l);
}

int vg_shim_check_reserved(sqlite3_file *f, int *out)
{
    return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}

int vg_shim_file_control(sqlite3_file *f, int op, void *arg)
{
    return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}

int vg_shim_sector_size(sqlite3_file *f)
{
    return REAL(f)->pMethods->xSectorSize(REAL(f));
}

int vg_shim_device_characteristics(sqlite3_file *f)
{
    return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}

int vg_shim_shm_map(sqlite3_file *f, int pg, int sz, int extend, void volatile **out)
{
    return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, extend, out);
}

int vg_shim_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
    return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}

void vg_shim_shm_barrier(sqlite3_file *f)
{
    REAL(f)->pMethods->xShmBarrier(REAL(f));
}

int vg_shim_shm_unmap(sqlite3_file *f, int del)
{
    return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}

int vg_shim_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **out)
{
    return REAL(f)->pMethods->xFetch(REAL(f), off, n, out);
}

int vg_shim_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
    return REAL(f)->pMethods->xUnfetch(REAL(f), off, p);
}

/* ---- the VFS: everything but xOpen to the VFS below ---------------------------------------- */

static int v_delete(sqlite3_vfs *v, const char *name, int sync_dir)
{
    return BELOW(v)->xDelete(BELOW(v), name, sync_dir);
}

static int v_access(sqlite3_vfs *v, const char *name, int flags, int *out)
{
    return BELOW(v)->xAccess(BELOW(v), name, flags, out);
}

static int v_full_pathname(sqlite3_vfs *v, const char *name, int n, char *out)
{
    return BELOW(v)->xFullPathname(BELOW(v), name, n, out);
}

static void *v_dlopen(sqlite3_vfs *v, const char *name)
{
    return BELOW(v)->xDlOpen(BELOW(v), name);
}

static void v_dlerror(sqlite3_vfs *v, int n, char *out)
{
    BELOW(v)->xDlError(BELOW(v), n, out);
}

static void (*v_dlsym(sqlite3_vfs *v, void *h, const char *sym))(void)
{
    return BELOW(v)->xDlSym(BELOW(v), h, sym);
}

static void v_dlclose(sqlite3_vfs *v, void *h)
{
    BELOW(v)->xDlClose(BELOW(v), h);
}

static int v_randomness(sqlite3_vfs *v, int n, char *out)
{
    return BELOW(v)->xRandomness(BELOW(v), n, out);
}

static int v_sleep(sqlite3_vfs *v, int us)
{
    return BELOW(v)->xSleep(BELOW(v), us);
}

static int v_current_time(sqlite3_vfs *v, double *out)
{
    return BELOW(v)->xCurrentTime(BELOW(v), out);
}

static int v_last_error(sqlite3_vfs *v, int n, char *out)
{
    return BELOW(v)->xGetLastError(BELOW(v), n, out);
}

static int v_current_time64(sqlite3_vfs *v, sqlite3_int64 *out)
{
    return BELOW(v)->xCurrentTimeInt64(BELOW(v), out);
}

void vg_shim_vfs_init(sqlite3_vfs *v, const char *name, sqlite3_vfs *below,
                      int (*open)(sqlite3_vfs *, const char *, sqlite3_file *, int, int *),
                      size_t own_size, int below_room)
{
    *v = (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = (int)own_size + below_room,
        .mxPathname = below->mxPathname,
        .zName = name,
        .pAppData = below,
        .xOpen = open,
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
}
