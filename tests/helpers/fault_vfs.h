/*
 * fault_vfs.h: a SQLite VFS shim for tests that fails the Nth write, sync or truncate with "disk
 * full" or an I/O error, the way SQLite's own test VFSes do. Install it once (it goes under the
 * log VFS, log_vfs.h, passing everything through while unarmed; stores opened from then on
 * write through it), then arm it.
 */
#ifndef VG_TEST_FAULT_VFS_H
#define VG_TEST_FAULT_VFS_H

enum vg_fault_vfs_ops {
    VG_FAULT_WRITE = 1 << 0,
    VG_FAULT_SYNC = 1 << 1,
    VG_FAULT_TRUNCATE = 1 << 2,
    VG_FAULT_ALL = 7,
    /* Not in ALL: a lock taken on the log index's shared memory (xShmLock, SQLITE_SHM_LOCK), a
     * read or write transaction's round trip to the kernel (two fcntl calls with its release),
     * counted by tests of how many a piece of work takes. */
    VG_FAULT_SHM_LOCK = 1 << 3
};

/* Register the "vigil-fault" VFS under the log VFS (see above). Idempotent. */
vigil_code vg_sqlite_fault_vfs_install(vigil_error *err);
/* From now, the nth operation among ops fails (nth = 0: off) with VIGIL_EFULL (SQLITE_FULL) or
 * VIGIL_EIO (SQLITE_IOERR_WRITE/FSYNC/TRUNCATE); with sticky, every later one fails too (a
 * disk that stays full). Resets the counters. */
void vg_sqlite_fault_vfs_arm(long nth, unsigned ops, vigil_code what, int sticky);
/* Operations among the armed ops seen since arming, and whether a failure was injected. */
long vg_sqlite_fault_vfs_count(void);
int vg_sqlite_fault_vfs_hit(void);

#endif
