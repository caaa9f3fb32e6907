/*
 * sync_int.h: private to src/sync: what capture.c and exchange.c share.
 */
#ifndef VG_SYNC_INT_H
#define VG_SYNC_INT_H

#include "sync/sync.h"

#include "store/store.h"

/* The state kept in env->sync from the runtime's open: watching for a join (another runtime's,
 * another process's) until the store has joined, then capturing. */
struct vg_sync_ctx {
    struct vg_env *env;
    char host[VG_SYNC_HOST_SIZE]; /* "" until the store has joined */
    int applying;                 /* an apply is writing: its writes are another device's */
    uint64_t checked_tx;          /* watching: the transaction (vg_store_tx_serial) checked */
};

/* The sequence log's entry id: "ID@HOST:SEQ" for the entry (HOST, SEQ) naming record ID, SEQ as
 * 16 hex digits; "@HOST:SEQ" when that is too long. One entry always has one id, so putting it
 * again is a no-op. */
void vg_sync_entry_id(char *out, size_t size, const char *host, int64_t seq, const char *id);
/* Put the entry (host, seq) naming (kind, id) if absent; *added (may be NULL): whether it was.
 * Entries have no owner: removing an agent's records (a hard delete) leaves the log whole, so
 * no peer waits for ever for a hole. */
vigil_code vg_sync_entry_put(struct vg_store *s, const char *host, int64_t seq, const char *kind,
                             const char *id, int *added, vigil_error *err);
/* The host's highest entry in this store's log (0: none). */
vigil_code vg_sync_top_seq(struct vg_store *s, const char *host, int64_t *out, vigil_error *err);

/* The sidecar (kind sync_clock) of the in-place record (kind, id): *out owned, NULL when it has
 * none; *rev its revision (0: none). */
vigil_code vg_sync_sidecar_get(struct vg_store *s, const char *kind, const char *id,
                               struct json_t **out, int64_t *rev, vigil_error *err);
/* Write it: put when rev is 0, else update from rev. */
vigil_code vg_sync_sidecar_put(struct vg_store *s, const char *kind, const char *id,
                               const char *owner, const struct json_t *body, int64_t rev,
                               vigil_error *err);

/* Whether the record (kind, id) is a projection that is logged and sent but whose value each
 * store derives from the records it holds (a report head: agent/adopt.c): an apply merges its
 * clock and keeps the local value. */
int vg_sync_derived(const char *kind, const char *id);

/* Whether s holds the record (kind, id). */
vigil_code vg_sync_record_present(struct vg_store *s, const char *kind, const char *id,
                                  int *present, vigil_error *err);

/* The fields of an agent's state body that are shared (the rest are this device's own). */
extern const char *const vg_sync_state_scalars[4];

#endif
