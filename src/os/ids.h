/*
 * ids.h: the id-source port. Every record id and every random number vigil uses comes from a
 * struct vg_ids, so tests get the same ids on every run (their seeded source,
 * tests/helpers/seeded_ids.h) while production gets time-ordered UUIDv7 with libsodium
 * randomness (vg_ids_real).
 */
#ifndef VG_IDS_H
#define VG_IDS_H

#include <stddef.h>
#include <stdint.h>

struct vg_clock;
struct vg_ids;

struct vg_ids_methods {
    int version;      /* 1: every method below */
    const char *name; /* "uuidv7"; tests' seeded source: "seeded" */
    /* Write a new id: 36 characters + NUL. Ids from one source sort in creation order. */
    void (*new_id)(struct vg_ids *ids, char out[37]);
    /* Fill buf with random bytes (jitter, tokens). */
    void (*random_bytes)(struct vg_ids *ids, void *buf, size_t n);
    void (*destroy)(struct vg_ids *ids);
};

struct vg_ids {
    const struct vg_ids_methods *methods; /* must stay first */
};

/* UUIDv7 from the given clock (borrowed; must outlive the source). Free with vg_ids_free. */
struct vg_ids *vg_ids_real(struct vg_clock *clock);
/* UUIDv7 whose random bits (and random_bytes) come from fill(user, ...), called under the
 * source's lock; user must outlive the source. A deterministic fill gives the same ids on every
 * run with a test clock. NULL without fill. */
struct vg_ids *vg_ids_uuid7_from(struct vg_clock *clock,
                                 void (*fill)(void *user, void *buf, size_t n), void *user);
void vg_ids_free(struct vg_ids *ids);

static inline void vg_ids_new(struct vg_ids *ids, char out[37])
{
    ids->methods->new_id(ids, out);
}
static inline void vg_ids_random(struct vg_ids *ids, void *buf, size_t n)
{
    ids->methods->random_bytes(ids, buf, n);
}
uint64_t vg_ids_random_u64(struct vg_ids *ids);

/* True if text is a canonical lowercase UUID (8-4-4-4-12 hex). */
int vg_id_valid(const char *text);

#endif
