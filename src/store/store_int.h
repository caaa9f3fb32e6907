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

/* rows.c: a step's messages in one row (docs/internals/STORE.md). The wrappers call these for
 * kind "message" when vg_rows_on says the store may hold such rows. */
struct vg_buf;
int vg_rows_on(struct vg_store *s, const char *kind);
vigil_code vg_rows_get(struct vg_store *s, const char *kind, const char *id, vg_record_cb cb,
                       void *user, vigil_error *err);
vigil_code vg_rows_scan(struct vg_store *s, const struct vg_query *q, vg_record_cb cb, void *user,
                        vigil_error *err);
vigil_code vg_rows_count(struct vg_store *s, const struct vg_query *q, int64_t *out,
                         vigil_error *err);
/* Before a put: *handled = 1 when it is done here (appended to its host's row, or a member of
 * that id is there: *added 0, EEXISTS unless VG_PUT_IF_ABSENT); else the caller puts the row
 * (the row before it in its thread split first when it reached past it), and *last = 1 when the
 * row it puts will be its thread's last (then vg_rows_wrote_last after the put). */
vigil_code vg_rows_put(struct vg_store *s, const struct vg_record *r, unsigned flags, int *added,
                       int *handled, int *last, vigil_error *err);
/* Before an update or a removal of message id: the row holding it split, so that it is a row of
 * its own; *expected_rev (NULL for a removal) turned from what readers saw to the row's. */
vigil_code vg_rows_before_change(struct vg_store *s, const char *id, int64_t *expected_rev,
                                 vigil_error *err);
/* How many members the owner's message rows hold (counted in a removal of the owner's records). */
vigil_code vg_rows_members_of_owner(struct vg_store *s, const char *owner, int64_t *n,
                                    vigil_error *err);
/* After a put that vg_rows_put left to the caller (*last set): stored, the row as the adapter now
 * holds it, is its thread's last row. */
void vg_rows_wrote_last(struct vg_store *s, const struct vg_record *stored);
/* Frees what rows.c keeps for the store (at its close). */
void vg_rows_forget(struct vg_store *s);
/* A stored text that reads as a row with members (1), and its escaped form. */
int vg_rows_needs_escape(const char *stored);
void vg_rows_escape(const char *stored, struct vg_buf *out);

#endif
