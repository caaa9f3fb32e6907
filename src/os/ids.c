/*
 * ids.c: UUIDv7 (RFC 9562) id sources. Within one millisecond the 12-bit rand_a field is a
 * counter seeded at random, so ids of one source stay strictly increasing (RFC 9562 6.2,
 * method 1); if the counter runs out the timestamp is borrowed from the next millisecond.
 */
#include "base/common.h"

#include "os/clock.h"
#include "os/ids.h"

#include <pthread.h>
#include <sodium.h>

struct uuid7_source {
    struct vg_ids base;
    struct vg_clock *clock;
    pthread_mutex_t lock;
    int64_t last_ms;
    uint32_t counter; /* 12-bit sequence within last_ms */
    /* Randomness of the caller's (vg_ids_uuid7_from), else the system's. */
    void (*fill)(void *user, void *buf, size_t n);
    void *fill_user;
    /* Random bytes for ids, drawn from the system 256 at a time: one getrandom() per id was
     * ten system calls per agent step. Refilled after a fork, so a child never repeats the
     * parent's ids. */
    unsigned char pool[256];
    size_t pool_left;
    unsigned pool_fork_gen;
};

static volatile unsigned fork_gen;

static void forked_child(void)
{
    fork_gen++;
}

static void watch_forks(void)
{
    pthread_atfork(NULL, NULL, forked_child);
}

static void fill_random(struct uuid7_source *src, void *buf, size_t n)
{
    if (src->fill)
        src->fill(src->fill_user, buf, n);
    else
        randombytes_buf(buf, n);
}

/* Random bytes for an id: from the pool (system randomness), or the caller's source. */
static void id_random(struct uuid7_source *src, void *buf, size_t n)
{
    if (src->fill || n > sizeof src->pool) {
        fill_random(src, buf, n);
        return;
    }
    if (src->pool_left < n || src->pool_fork_gen != fork_gen) {
        randombytes_buf(src->pool, sizeof src->pool);
        src->pool_left = sizeof src->pool;
        src->pool_fork_gen = fork_gen;
    }
    memcpy(buf, src->pool + sizeof src->pool - src->pool_left, n);
    src->pool_left -= n;
}

static void uuid7_new(struct vg_ids *ids, char out[37])
{
    struct uuid7_source *src = (struct uuid7_source *)ids;
    unsigned char b[16];
    pthread_mutex_lock(&src->lock);
    int64_t ms = vg_clock_now_ms(src->clock);
    if (ms > src->last_ms) {
        src->last_ms = ms;
        uint16_t r;
        id_random(src, &r, sizeof r);
        src->counter = r & 0x3ff; /* leave headroom in the 12-bit field */
    } else {
        src->counter++;
        if (src->counter > 0xfff) {
            src->last_ms++;
            src->counter = 0;
        }
    }
    ms = src->last_ms;
    uint32_t counter = src->counter;
    id_random(src, b + 8, 8);
    pthread_mutex_unlock(&src->lock);

    for (int i = 0; i < 6; i++)
        b[i] = (unsigned char)((uint64_t)ms >> (40 - 8 * i));
    b[6] = (unsigned char)(0x70 | ((counter >> 8) & 0x0f));
    b[7] = (unsigned char)(counter & 0xff);
    b[8] = (unsigned char)(0x80 | (b[8] & 0x3f));

    static const char hex[] = "0123456789abcdef";
    int o = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = '\0';
}

static void uuid7_random(struct vg_ids *ids, void *buf, size_t n)
{
    struct uuid7_source *src = (struct uuid7_source *)ids;
    pthread_mutex_lock(&src->lock);
    fill_random(src, buf, n);
    pthread_mutex_unlock(&src->lock);
}

static void uuid7_destroy(struct vg_ids *ids)
{
    struct uuid7_source *src = (struct uuid7_source *)ids;
    pthread_mutex_destroy(&src->lock);
    vg_free(src);
}

static const struct vg_ids_methods real_methods = {
    .version = 1,
    .name = "uuidv7",
    .new_id = uuid7_new,
    .random_bytes = uuid7_random,
    .destroy = uuid7_destroy,
};

static struct vg_ids *make_source(struct vg_clock *clock,
                                  void (*fill)(void *user, void *buf, size_t n), void *user)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (!fill && sodium_init() < 0)
        return NULL;
    pthread_once(&once, watch_forks);
    struct uuid7_source *src = vg_calloc(1, sizeof *src);
    if (!src)
        return NULL;
    src->base.methods = &real_methods;
    src->clock = clock;
    pthread_mutex_init(&src->lock, NULL);
    src->last_ms = INT64_MIN;
    src->fill = fill;
    src->fill_user = user;
    return &src->base;
}

struct vg_ids *vg_ids_real(struct vg_clock *clock)
{
    return make_source(clock, NULL, NULL);
}

struct vg_ids *vg_ids_uuid7_from(struct vg_clock *clock,
                                 void (*fill)(void *user, void *buf, size_t n), void *user)
{
    return fill ? make_source(clock, fill, user) : NULL;
}

void vg_ids_free(struct vg_ids *ids)
{
    if (ids)
        ids->methods->destroy(ids);
}

uint64_t vg_ids_random_u64(struct vg_ids *ids)
{
    uint64_t v;
    vg_ids_random(ids, &v, sizeof v);
    return v;
}

int vg_id_valid(const char *t)
{
    if (!t || strlen(t) != 36)
        return 0;
    for (int i = 0; i < 36; i++) {
        char c = t[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-')
                return 0;
        } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return 0;
        }
    }
    return 1;
}
