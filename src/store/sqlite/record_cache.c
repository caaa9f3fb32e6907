/*
 * record_cache.c: a few hundred small records kept by key in sets of four, the least recently
 * used of a set out first (record_cache.h says when the SQLite adapter may trust them).
 */
#include "base/common.h"

#include "store/sqlite/record_cache.h"

/* A string's bytes folded into h eight at a time (a multiply and a rotation a word); its length
 * goes in too, so "ab" + "c" and "a" + "bc" differ. Byte-at-a-time FNV cost several times as
 * much for a pointer's long id, and the adapter hashes a key at every read, write and update of
 * a transaction (docs/internals/PERF.md, "Store memory"). */
static uint64_t fold(uint64_t h, const char *s)
{
    size_t n = strlen(s);
    uint64_t w;
    h ^= n;
    for (; n >= 8; n -= 8, s += 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        h = h << 29 | h >> 35;
    }
    w = 0;
    memcpy(&w, s, n);
    return (h ^ w) * 0x9e3779b97f4a7c15ull;
}

/* Kind and id hashed, then mixed so that every bit of the result depends on every input bit
 * (MurmurHash3's finalizer): the set is picked from the high bits. */
static uint64_t key_hash(const char *kind, const char *id)
{
    uint64_t h = fold(fold(0x243f6a8885a308d3ull, kind), id);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

static struct vg_record_cache_entry *set_of(struct vg_record_cache *c, uint64_t h)
{
    return &c->slot[(h >> 40) % VG_RECORD_CACHE_SETS * VG_RECORD_CACHE_WAYS];
}

static struct vg_record_cache_entry *lookup(struct vg_record_cache *c, uint64_t h, const char *kind,
                                            const char *id)
{
    if (!c->slot)
        return NULL;
    struct vg_record_cache_entry *set = set_of(c, h);
    for (int i = 0; i < VG_RECORD_CACHE_WAYS; i++) {
        struct vg_record_cache_entry *e = &set[i];
        if (e->mem && e->hash == h && !strcmp(e->r.id, id) && !strcmp(e->r.kind, kind))
            return e;
    }
    return NULL;
}

static void entry_free(struct vg_record_cache *c, struct vg_record_cache_entry *e)
{
    c->bytes -= e->size;
    vg_free(e->mem);
    memset(e, 0, sizeof *e);
}

const struct vg_record *vg_record_cache_find(struct vg_record_cache *c, const char *kind,
                                             const char *id)
{
    struct vg_record_cache_entry *e = lookup(c, key_hash(kind, id), kind, id);
    if (!e)
        return NULL;
    e->last_use = ++c->clock;
    return &e->r;
}

/* A missing string is stored as "", as the adapter binds it. */
static const char *text(const char *s)
{
    return s ? s : "";
}

/* The record's strings back to back in mem (record_size bytes). */
static void pack(char *mem, const struct vg_record *r, struct vg_record *out)
{
    const char *src[6] = {text(r->kind), text(r->id), text(r->owner),
                          text(r->k1),   text(r->k2), text(r->body)};
    const char **dst[6] = {&out->kind, &out->id, &out->owner, &out->k1, &out->k2, &out->body};
    *out = *r;
    for (int i = 0; i < 6; i++) {
        size_t n = strlen(src[i]) + 1;
        memcpy(mem, src[i], n);
        *dst[i] = mem;
        mem += n;
    }
}

static size_t record_size(const struct vg_record *r)
{
    return strlen(text(r->kind)) + strlen(text(r->id)) + strlen(text(r->owner)) +
           strlen(text(r->k1)) + strlen(text(r->k2)) + strlen(text(r->body)) + 6;
}

/* Keep r in e (e's key, or a slot given up for it); on failure the slot ends empty. */
static void keep_in(struct vg_record_cache *c, struct vg_record_cache_entry *e,
                    const struct vg_record *r, uint64_t h, size_t size)
{
    if (!(e->mem && e->size >= size && e->size <= 2 * size)) { /* else reused as it is */
        if (e->mem)
            entry_free(c, e);
        if (c->bytes + size > VG_RECORD_CACHE_BUDGET || !(e->mem = vg_malloc(size)))
            return;
        e->size = size;
        c->bytes += size;
    }
    pack(e->mem, r, &e->r);
    e->hash = h;
    e->last_use = ++c->clock;
}

void vg_record_cache_keep(struct vg_record_cache *c, const struct vg_record *r)
{
    /* off, or a row SQLite could not give whole (out of memory) */
    if (c->off || !r->kind || !r->id)
        return;
    uint64_t h = key_hash(r->kind, r->id);
    struct vg_record_cache_entry *e = lookup(c, h, r->kind, r->id);
    size_t size = record_size(r);
    if (size > VG_RECORD_CACHE_MAX) {
        if (e)
            entry_free(c, e);
        return;
    }
    if (!c->slot && !(c->slot = vg_calloc(VG_RECORD_CACHE_SLOTS, sizeof *c->slot)))
        return;
    if (!e) { /* a free slot of the set, else its least recently used */
        struct vg_record_cache_entry *set = set_of(c, h);
        e = &set[0];
        for (int i = 1; i < VG_RECORD_CACHE_WAYS && e->mem; i++)
            if (!set[i].mem || set[i].last_use < e->last_use)
                e = &set[i];
    }
    keep_in(c, e, r, h, size);
}

void vg_record_cache_refresh(struct vg_record_cache *c, const struct vg_record *r, int64_t rev)
{
    uint64_t h = key_hash(r->kind, r->id);
    struct vg_record_cache_entry *e = lookup(c, h, r->kind, r->id);
    if (!e)
        return;
    size_t size = record_size(r);
    if (size > VG_RECORD_CACHE_MAX) {
        entry_free(c, e);
        return;
    }
    struct vg_record now = *r;
    now.rev = rev;
    keep_in(c, e, &now, h, size);
}

void vg_record_cache_forget(struct vg_record_cache *c, const char *kind, const char *id)
{
    struct vg_record_cache_entry *e = lookup(c, key_hash(kind, id), kind, id);
    if (e)
        entry_free(c, e);
}

void vg_record_cache_clear(struct vg_record_cache *c)
{
    for (int i = 0; c->slot && c->bytes && i < VG_RECORD_CACHE_SLOTS; i++)
        if (c->slot[i].mem)
            entry_free(c, &c->slot[i]);
}

void vg_record_cache_release(struct vg_record_cache *c)
{
    vg_record_cache_clear(c);
    vg_free(c->slot);
    c->slot = NULL;
}

int vg_record_cache_serve(const struct vg_record *kept, vg_record_cb cb, void *user)
{
    char small[1024], *mem = small;
    size_t size = record_size(kept);
    if (size > sizeof small && !(mem = vg_malloc(size)))
        return -1;
    struct vg_record copy;
    pack(mem, kept, &copy);
    cb(user, &copy);
    if (mem != small)
        vg_free(mem);
    return 0;
}
