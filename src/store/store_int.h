/*
 * store_int.h: private to src/store: the adapters' method tables and instance sizes, for the
 * registry in store.c.
 */
#ifndef VG_STORE_INT_H
#define VG_STORE_INT_H

#include "store/port.h"

extern const struct vg_store_methods vg_store_sqlite_methods;
extern const size_t vg_store_sqlite_instance_size;

#ifdef VG_HAVE_PG_ADAPTER
extern const struct vg_store_methods vg_store_pg_methods;
extern const size_t vg_store_pg_instance_size;
/* sqlite.c: the FTS5 query for plain terms, each quoted (exposed for the fuzz target). */
struct vg_buf;
int vg_sqlite_fts_query(const char *const *terms, size_t n, struct vg_buf *out);

#endif

/* sqlite.c: the FTS5 query for plain terms, each quoted (exposed for the fuzz target). */
struct vg_buf;
int vg_sqlite_fts_query(const char *const *terms, size_t n, struct vg_buf *out);

#endif
