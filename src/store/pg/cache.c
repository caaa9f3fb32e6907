/*
 * cache.c: see cache.h. Open addressing would need tombstones; a collision simply replaces
 * the slot's entry (a miss later costs one round trip, never a wrong answer).
 */
#include "base/common.h"

#include "store/pg/cache.h"
#include "store/store.h"

static const char *const kinds[] = {"agent", "kill_switch", "run_cancel"};

int vg_pg_cache_kind(const char *kind)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(kinds); i++)
        if (!strcmp(kind, kinds[i]))
            return 1;
    return 0;
}

/* FNV-1a of "kind\nid". */
static size_t slot_of(const char *kind, const char *id)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = kind; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h = (h ^ '\n') * 1099511628211ull;
    for (const char *p = id; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return (size_t)(h % VG_PG_CACHE_SLOTS);
}

static int same_key(const char *key, const char *kind, const char *id)
{
    size_t n = strlen(kind);
    return key && !strncmp(key, kind, n) && key[n] == '\n' && !strcmp(key + n + 1, id);
}

static void drop(struct vg_pg_cache_entry *e)
{
    vg_free(e->key);
    vg_free(e->found);
    e->key = NULL;
    e->found = NULL;
}

const struct vg_pg_cache_entry *vg_pg_cache_find(const struct vg_pg_cache *c, const char *kind,
                                                 const char *id)
{
    const struct vg_pg_cache_entry *e = &c->slot[slot_of(kind, id)];
    return same_key(e->key, kind, id) ? e : NULL;
}

void vg_pg_cache_put(struct vg_pg_cache *c, const char *kind, const char *id,
                     const struct vg_record *r)
{
    struct vg_pg_cache_entry *e = &c->slot[slot_of(kind, id)];
    drop(e);
    size_t n = strlen(kind) + strlen(id) + 2;
    e->key = vg_malloc(n);
    e->found = r ? vg_record_dup(r) : NULL;
    if (!e->key || (r && !e->found)) {
        drop(e);
        return;
    }
    snprintf(e->key, n, "%s\n%s", kind, id);
}

void vg_pg_cache_forget(struct vg_pg_cache *c, const char *kind, const char *id)
{
    struct vg_pg_cache_entry *e = &c->slot[slot_of(kind, id)];
    if (same_key(e->key, kind, id))
        drop(e);
}

void vg_pg_cache_forget_payload(struct vg_pg_cache *c, const char *payload)
{
    const char *colon = payload ? strchr(payload, ':') : NULL;
    char kind[64];
    if (!colon || (size_t)(colon - payload) >= sizeof kind) {
        vg_pg_cache_clear(c); /* not ours to parse: forget everything */
        return;
    }
    memcpy(kind, payload, (size_t)(colon - payload));
    kind[colon - payload] = '\0';
    vg_pg_cache_forget(c, kind, colon + 1);
}

void vg_pg_cache_clear(struct vg_pg_cache *c)
{
    for (size_t i = 0; i < VG_PG_CACHE_SLOTS; i++)
        drop(&c->slot[i]);
}
