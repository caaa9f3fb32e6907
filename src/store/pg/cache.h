/*
 * cache.h: records of a few kinds kept between statements by one PostgreSQL connection.
 *
 * A run reads the same few records again and again (its cancel request, the agent, the kill
 * switches: a quarter of a wake's round trips, measured), and on a server each read is a round
 * trip. These kinds are written rarely, and every write of one, by any connection of any
 * daemon, makes a trigger NOTIFY their channel (pg.c, install_record_signal) with "kind:id";
 * each connection LISTENs, reads the notifications libpq has received before every cached
 * read (no round trip) and forgets what they name; a read during which a notification
 * arrived is not kept. Outside a transaction a cached record is at most one notification's
 * delivery behind a commit of another connection: the same as reading it a moment earlier.
 * Inside one, PostgreSQL holds notifications back until it ends, so a cached record may be as
 * old as the transaction (milliseconds): the same as reading it when the transaction began. Never a
 * kind whose staleness could let a fenced writer write (leases, wake runs, budgets): those are
 * always read from the server.
 */
#ifndef VG_STORE_PG_CACHE_H
#define VG_STORE_PG_CACHE_H

#include "store/port.h"

#define VG_PG_CACHE_SLOTS 256
/* The kinds kept, as SQL for the trigger's WHEN clause. */
#define VG_PG_CACHED_KINDS_SQL "('agent', 'kill_switch', 'run_cancel')"

struct vg_pg_cache_entry {
    char *key;               /* "kind\nid" (owned), NULL: empty slot */
    struct vg_record *found; /* owned copy, NULL: the record is absent */
};

struct vg_pg_cache {
    struct vg_pg_cache_entry slot[VG_PG_CACHE_SLOTS];
    int wrote; /* the open transaction wrote a cached kind: a rollback forgets everything */
    long hits, misses;
};

/* 1 when records of kind are kept. */
int vg_pg_cache_kind(const char *kind);
/* The entry of (kind, id), or NULL when not cached. */
const struct vg_pg_cache_entry *vg_pg_cache_find(const struct vg_pg_cache *c, const char *kind,
                                                 const char *id);
/* Keep r (copied; NULL: absent) for (kind, id). Out of memory keeps nothing. */
void vg_pg_cache_put(struct vg_pg_cache *c, const char *kind, const char *id,
                     const struct vg_record *r);
/* Forget (kind, id); "kind:id" as a notification's payload in vg_pg_cache_forget_payload. */
void vg_pg_cache_forget(struct vg_pg_cache *c, const char *kind, const char *id);
void vg_pg_cache_forget_payload(struct vg_pg_cache *c, const char *payload);
void vg_pg_cache_clear(struct vg_pg_cache *c);

#endif
