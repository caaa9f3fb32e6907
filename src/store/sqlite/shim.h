/*
 * shim.h: what vigil's SQLite VFS shims (log_vfs.c, fault_vfs.c) share: a file that wraps the
 * file of the VFS below, io methods that pass straight to that file, and a VFS whose methods
 * other than xOpen pass straight to the VFS below (its pAppData).
 */
#ifndef VG_STORE_SQLITE_SHIM_H
#define VG_STORE_SQLITE_SHIM_H

#include <sqlite3.h>
#include <stddef.h>

/* The start of a shim's file; the shim's own fields follow, then the file of the VFS below. */
struct vg_shim_file {
    sqlite3_file base;  /* must stay first */
    sqlite3_file *real; /* the file of the VFS below */
};

#define VG_SHIM_REAL(f) (((struct vg_shim_file *)(f))->real)

/* Open `name` through `below` into the shim file f, `own_size` bytes long (the real file goes
 * right after it). f's methods become `io` when the real open set methods (SQLite calls xClose
 * only then). */
int vg_shim_open(sqlite3_vfs *below, const sqlite3_io_methods *io, size_t own_size,
                 const char *name, sqlite3_file *f, int flags, int *out_flags);

/* Make v the VFS `name` over `below`: v->pAppData = below, every method but `open` passes to
 * it, and its files have room for `own_size` bytes and `below_room` bytes of the file below. */
void vg_shim_vfs_init(sqlite3_vfs *v, const char *name, sqlite3_vfs *below,
                      int (*open)(sqlite3_vfs *, const char *, sqlite3_file *, int, int *),
                      size_t own_size, int below_room);

/* Pass-through io methods, for the places of a shim's table where it has nothing to add. */
int vg_shim_close(sqlite3_file *f);
int vg_shim_read(sqlite3_file *f, void *out, int n, sqlite3_int64 off);
int vg_shim_write(sqlite3_file *f, const void *data, int n, sqlite3_int64 off);
int vg_shim_truncate(sqlite3_file *f, sqlite3_int64 size);
int vg_shim_sync(sqlite3_file *f, int flags);
int vg_shim_file_size(sqlite3_file *f, sqlite3_int64 *size);
int vg_shim_lock(sqlite3_file *f, int l);
int vg_shim_unlock(sqlite3_file *f, int l);
int vg_shim_check_reserved(sqlite3_file *f, int *out);
int vg_shim_file_control(sqlite3_file *f, int op, void *arg);
int vg_shim_sector_size(sqlite3_file *f);
int vg_shim_device_characteristics(sqlite3_file *f);
int vg_shim_shm_map(sqlite3_file *f, int pg, int sz, int extend, void volatile **out);
int vg_shim_shm_lock(sqlite3_file *f, int off, int n, int flags);
void vg_shim_shm_barrier(sqlite3_file *f);
int vg_shim_shm_unmap(sqlite3_file *f, int del);
int vg_shim_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **out);
int vg_shim_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p);

#endif
