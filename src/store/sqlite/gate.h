/*
 * gate.h: one in-process gate per SQLite database file, held by the connection that has the
 * write transaction open. SQLite lets one writer in at a time and makes the others wait in its
 * busy handler, which sleeps 1, 2, 5, 10... ms between tries: with many threads of one process
 * writing (the daemon's workers, a hundred agents) most of a run's wall time went to those
 * sleeps. Waiting on a mutex instead wakes the next writer the moment the lock is free. Other
 * processes still meet SQLite's own lock and busy timeout.
 */
#ifndef VG_STORE_SQLITE_GATE_H
#define VG_STORE_SQLITE_GATE_H

struct vg_sqlite_gate;

/* The gate of the file at path (shared by every connection to it), or NULL when the file
 * cannot be identified (not created yet, not a plain file): such a store works without one. */
struct vg_sqlite_gate *vg_sqlite_gate_get(const char *path);
void vg_sqlite_gate_put(struct vg_sqlite_gate *g);

enum vg_gate_entry {
    VG_GATE_ENTERED = 0, /* this connection holds the gate: leave it when the transaction ends */
    VG_GATE_MINE = 1,    /* this thread already holds it through another connection: go on
                          * without it (SQLite's own lock decides, as before) */
    VG_GATE_TIMEOUT = 2  /* another writer kept it longer than timeout_ms */
};
enum vg_gate_entry vg_sqlite_gate_enter(struct vg_sqlite_gate *g, int timeout_ms);
void vg_sqlite_gate_leave(struct vg_sqlite_gate *g);

#endif
