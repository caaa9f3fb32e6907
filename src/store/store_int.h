/*
 * store_int.h: private to src/store: the adapters' method tables and instance sizes, for the
 * registry in store.c.
 */
#ifndef VG_STORE_INT_H
#define VG_STORE_INT_H

#include "store/port.h"

extern const struct vg_store_methods vg_store_sqlite_methods;
extern const size_t vg_store_sqlite_instance_size;
/* Process-wide SQLite setup (its allocator goes through vg_malloc); runs once, before any other
 * use of SQLite by vigil. */
void vg_store_sqlite_setup(void);

extern const struct vg_store_methods vg_store_pg_methods;
extern const size_t vg_store_pg_instance_size;
/* sqlite.c: the FTS5 query for plain terms, each quoted (exposed for the fuzz target). */
struct vg_buf;
int vg_sqlite_fts_query(const char *const *terms, size_t n, struct vg_buf *out);

#endif
