/*
 * sync.h: multi-device sync between stores (DESIGN 3.11; docs/internals/SYNC.md, "The exchange").
 *
 * A store that has joined sync has a host id, and every write of an agent-domain record it makes
 * is captured (the store's write hook, capture.c) into its sequence log with a vector clock.
 * Two stores exchange what the other lacks (exchange.c), one direction at a time:
 *
 *     hello  = vg_sync_hello(receiver)            marks, tops and holes per host
 *     offer  = vg_sync_offer(sender, hello)       the log entries and records it lacks
 *     vg_sync_apply(receiver, offer)              merged; holes noted for the next hello
 *     vg_sync_confirm(sender, vg_sync_hello(receiver))   the backfill's second phase
 *
 * The messages are JSON objects; a transport carries their text (vg_sync_between does it in one
 * process for `vigil sync --with`). Runtime state (agent_runtime, wakes, leases) never syncs.
 */
#ifndef VG_SYNC_H
#define VG_SYNC_H

#include "env/env.h"

struct json_t;

/* A host id made here: 16 lowercase hex digits. One from a peer may be 1 to 64 printable bytes
 * (state.h's names); VG_SYNC_HOST_SIZE holds this store's own and its NUL. */
#define VG_SYNC_HOST_DIGITS 16
#define VG_SYNC_HOST_SIZE 33

/* How a record kind syncs. */
enum vg_sync_class {
    VG_SYNC_LOCAL,     /* never synced: runtime state, projections, the log itself */
    VG_SYNC_IMMUTABLE, /* written once: its clock is the dot of its one log entry */
    VG_SYNC_LAST,      /* changed in place: a clock, the last writer by (rank, host, seq) wins */
    VG_SYNC_AGENT,     /* as VG_SYNC_LAST, its lifecycle a multi-value register (state.h) */
    VG_SYNC_STATE      /* the agent's shared state: state.h's form and merge */
};
enum vg_sync_class vg_sync_class_of(const char *kind, const char *id);

/* Install capture on env's store when the store has joined sync (its host id is read once);
 * nothing otherwise. The runtime calls it at open. */
vigil_code vg_sync_attach(struct vg_env *env, vigil_error *err);
/* Join sync: make the store's host id (from env's id port) unless it has one, install capture,
 * and log every synced record the store already holds (each gets its clock now). Idempotent:
 * a store that has joined is left as it is. */
vigil_code vg_sync_join(struct vg_env *env, vigil_error *err);
/* The store's host id, or NULL when it has not joined. Borrowed from env. */
const char *vg_sync_host(const struct vg_env *env);

/* The id of the sidecar record (kind sync_clock) holding the clock of the in-place record
 * (kind, id). out holds VG_RECORD_ID_MAX bytes. */
void vg_sync_clock_id(char *out, const char *kind, const char *id);

/* What one apply did (counts add up over calls). */
struct vg_sync_stats {
    int64_t entries_sent;    /* log entries an offer carried */
    int64_t records_sent;    /* records an offer carried (each once) */
    int64_t bytes_sent;      /* the offers' JSON text */
    int64_t entries_new;     /* entries the receiver did not hold */
    int64_t records_changed; /* records the receiver stored or changed */
    int64_t holes;           /* entries still missing on the receiver after the apply */
};

vigil_code vg_sync_hello(struct vg_env *env, struct json_t **out, vigil_error *err);
vigil_code vg_sync_offer(struct vg_env *env, const struct json_t *hello, struct json_t **out,
                         vigil_error *err);
/* Apply another store's offer (outside input: checked first; EINVAL names the first problem and
 * nothing is written). One transaction. Applying one offer twice changes nothing the second time.
 */
vigil_code vg_sync_apply(struct vg_env *env, const struct json_t *offer,
                         struct vg_sync_stats *stats, vigil_error *err);
/* The sender records the marks the receiver now has (a sync_peer record per peer host). */
vigil_code vg_sync_confirm(struct vg_env *env, const struct json_t *hello, vigil_error *err);

/*
 * The transport: the other store as the exchange reaches it, in one process (vg_sync_local_peer)
 * or over the network (the runtime's HTTP peer, POST /v1/sync/LEG on a daemon). One leg runs on
 * the peer's store as vg_sync_serve does: JSON text in, JSON text out.
 */
struct vg_sync_peer {
    /* Run leg ("hello", "offer", "apply", "confirm") on the peer's store with request (JSON
     * text; "{}" for hello); *answer: JSON text (owned, vg_free). */
    vigil_code (*call)(void *self, const char *leg, const char *request, char **answer,
                       vigil_error *err);
    void *self;
    /* > 0: an offer carries records of about this many bytes at most (the rest follow in the
     * next ones); 0: no bound. A network peer bounds what one request carries. */
    int64_t max_bytes;
};

/* One leg on this store, as a peer asks for it (outside input): "hello" (request ignored) answers
 * vg_sync_hello; "offer" (request: the asker's hello) vg_sync_offer; "apply" (request: the
 * asker's offer) applies it and answers {"entries","changed","holes"}; "confirm" (request: the
 * asker's hello after its apply) vg_sync_confirm and answers {"ok":true}. EINVAL: an unknown leg
 * or a request that is not a JSON object. */
vigil_code vg_sync_serve(struct vg_env *env, const char *leg, const char *request,
                         size_t request_len, char **answer, vigil_error *err);
/* The peer whose legs are vg_sync_serve on env (another store this process opened). */
struct vg_sync_peer vg_sync_local_peer(struct vg_env *env);

/* Both ways between this store and a peer, each direction in offers of at most peer->max_bytes
 * until nothing is missing, then confirmed: what `vigil sync --with` runs. *peer_host (may be
 * NULL): the peer's host id. ECONFLICT when the peer has this store's host id. sent and received
 * may be NULL. */
vigil_code vg_sync_exchange(struct vg_env *env, const struct vg_sync_peer *peer,
                            struct vg_sync_stats *sent, struct vg_sync_stats *received,
                            char peer_host[VG_SYNC_HOST_SIZE], vigil_error *err);

/* One direction (from -> to) through the messages' JSON text, then both: vg_sync_exchange with
 * a local peer. Both stores must have joined. stats may be NULL. */
vigil_code vg_sync_push(struct vg_env *from, struct vg_env *to, struct vg_sync_stats *stats,
                        vigil_error *err);
vigil_code vg_sync_between(struct vg_env *a, struct vg_env *b, struct vg_sync_stats *a_to_b,
                           struct vg_sync_stats *b_to_a, vigil_error *err);

#endif
