/*
 * record_cache.h: the few records a connection reads again and again, kept between its
 * transactions.
 *
 * An agent step reads the same handful of records in each of its transactions: the agent (its
 * lifecycle, before each message it appends) and its head pointers (before each append moves
 * them). Each read is a statement with two B-tree descents; a hit here is a copy
 * (docs/internals/PERF.md has the figures). The SQLite adapter keeps records it read inside a
 * write transaction, refreshes one it updates, forgets one it inserts over or deletes, and
 * forgets everything when a transaction rolls back, a statement fails, or another connection
 * may have written (sqlite.c checks SQLite's data version when a transaction begins: under
 * BEGIN IMMEDIATE nothing else writes until the commit). It is never consulted outside a
 * transaction; in a read batch's read transaction, once its snapshot is taken, and a snapshot
 * that shows another connection's commit since the records were kept forgets them first.
 */
#ifndef VG_SQLITE_RECORD_CACHE_H
#define VG_SQLITE_RECORD_CACHE_H

#include "store/port.h"

#include <stdint.h>

/* Set-associative: a key's hash picks a set of VG_RECORD_CACHE_WAYS slots, and within it the
 * least recently used slot is given up first. 512 slots hold the few hot records of a few
 * hundred agents (the daemon's fibers share one connection): a step reads three of them. */
#define VG_RECORD_CACHE_SETS 128
#define VG_RECORD_CACHE_WAYS 4
#define VG_RECORD_CACHE_SLOTS (VG_RECORD_CACHE_SETS * VG_RECORD_CACHE_WAYS)
/* A record whose strings take more than this is not kept: the cache is for small, hot ones. */
#define VG_RECORD_CACHE_MAX 4096
/* Nor is one that would take the kept bytes past this. */
#define VG_RECORD_CACHE_BUDGET (256 * 1024)

struct vg_record_cache_entry {
    char *mem; /* one allocation holding the record's strings; NULL: the slot is free */
    size_t size;
    uint64_t hash; /* of kind and id, to pass over other slots without comparing strings */
    unsigned last_use;
    struct vg_record r; /* points into mem */
};

struct vg_record_cache {
    struct vg_record_cache_entry *slot; /* [VG_RECORD_CACHE_SLOTS], made at the first keep */
    size_t bytes;                       /* held by the slots' records */
    unsigned clock;
    int off; /* keep nothing (vg_store_options.no_record_cache) */
};

/* The record kept for (kind, id), or NULL. */
const struct vg_record *vg_record_cache_find(struct vg_record_cache *c, const char *kind,
                                             const char *id);
/* Keep a copy of r (replacing what was kept for its key); revision 0 keeps the key as absent
 * (stored records begin at revision 1), forgotten like any other when this connection inserts
 * it. Out of memory or too big: the key is
 * forgotten instead, which is always safe. */
void vg_record_cache_keep(struct vg_record_cache *c, const struct vg_record *r);
/* r was written with revision rev: keep it if its key was kept, else leave the cache alone. */
void vg_record_cache_refresh(struct vg_record_cache *c, const struct vg_record *r, int64_t rev);
void vg_record_cache_forget(struct vg_record_cache *c, const char *kind, const char *id);
/* Forget everything (the slots stay allocated). */
void vg_record_cache_clear(struct vg_record_cache *c);
/* Forget everything and give the slots back. */
void vg_record_cache_release(struct vg_record_cache *c);

/* Call cb with a copy of a kept record (cb may write to the store, and so change the cache):
 * 0, or -1 when there was no memory for the copy and cb was not called. */
int vg_record_cache_serve(const struct vg_record *kept, vg_record_cb cb, void *user);

#endif
