/* seeded_ids.c: the tests' seeded id source (seeded_ids.h), a UUIDv7 source of libvigil fed
 * by splitmix64, wrapped so freeing it frees the generator's state too. */
#include "helpers/seeded_ids.h"

#include "base/alloc.h"

#include <string.h>

struct seeded {
    struct vg_ids base; /* must stay first */
    struct vg_ids *uuid7;
    uint64_t state;
};

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Called under the UUIDv7 source's lock. */
static void fill(void *user, void *buf, size_t n)
{
    struct seeded *s = user;
    unsigned char *p = buf;
    while (n) {
        uint64_t v = splitmix64(&s->state);
        size_t k = n < 8 ? n : 8;
        memcpy(p, &v, k);
        p += k;
        n -= k;
    }
}

static void seeded_new(struct vg_ids *ids, char out[37])
{
    vg_ids_new(((struct seeded *)ids)->uuid7, out);
}

static void seeded_random(struct vg_ids *ids, void *buf, size_t n)
{
    vg_ids_random(((struct seeded *)ids)->uuid7, buf, n);
}

static void seeded_destroy(struct vg_ids *ids)
{
    struct seeded *s = (struct seeded *)ids;
    vg_ids_free(s->uuid7);
    vg_free(s);
}

static const struct vg_ids_methods seeded_methods = {
    .version = 1,
    .name = "seeded",
    .new_id = seeded_new,
    .random_bytes = seeded_random,
    .destroy = seeded_destroy,
};

struct vg_ids *vg_ids_seeded(struct vg_clock *clock, uint64_t seed)
{
    struct seeded *s = vg_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->base.methods = &seeded_methods;
    s->state = seed;
    s->uuid7 = vg_ids_uuid7_from(clock, fill, s);
    if (!s->uuid7) {
        vg_free(s);
        return NULL;
    }
    return &s->base;
}
