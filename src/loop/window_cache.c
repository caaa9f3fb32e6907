/*
 * window_cache.c: windows kept between runs (window_cache.h).
 */
#include "base/common.h"

#include "agent/agent.h"
#include "base/alloc.h"
#include "loop/window_cache.h"
#include "store/store.h"

/* The most messages a kept window catches up by; more are read as a fresh window is. */
#define CATCH_UP_MAX 256

struct kept {
    char *agent_id, *thread_id;
    int64_t budget, last_seq, used;
    int64_t counted; /* the thread's message count (its head's counter) when last read */
    char last_id[VG_RECORD_ID_MAX];
    struct vg_window w;
};

struct window_cache {
    struct kept *slots[VG_WINDOW_CACHE_MAX];
    size_t n;
    int64_t tick;
};

static void kept_free(struct kept *k)
{
    if (!k)
        return;
    vg_window_release(&k->w);
    vg_free(k->agent_id);
    vg_free(k->thread_id);
    vg_free(k);
}

static void cache_free(void *p)
{
    struct window_cache *c = p;
    for (size_t i = 0; c && i < c->n; i++)
        kept_free(c->slots[i]);
    vg_free(c);
}

/* The env's cache, made at first use; NULL when out of memory (runs then read from scratch). */
static struct window_cache *cache_of(struct vg_env *env)
{
    if (!env->windows && (env->windows = vg_calloc(1, sizeof(struct window_cache))))
        env->windows_free = cache_free;
    return env->windows;
}

static struct kept *take_at(struct window_cache *c, size_t i)
{
    struct kept *k = c->slots[i];
    c->slots[i] = c->slots[--c->n];
    return k;
}

/* Takes the kept window of (agent, thread, budget) out of the cache: a run (or a fiber's run)
 * works on it alone until it is put back. NULL when none is kept. */
static struct kept *take(struct window_cache *c, const char *agent_id, const char *thread_id,
                         int64_t budget)
{
    for (size_t i = 0; c && i < c->n; i++) {
        struct kept *k = c->slots[i];
        if (k->budget == budget && !strcmp(k->agent_id, agent_id) &&
            !strcmp(k->thread_id, thread_id))
            return take_at(c, i);
    }
    return NULL;
}

/* Keeps k, making room by dropping the least recently used windows. */
static void put_back(struct window_cache *c, struct kept *k)
{
    int64_t tokens = k->w.tokens;
    for (size_t i = 0; i < c->n; i++)
        tokens += c->slots[i]->w.tokens;
    while (c->n && (c->n == VG_WINDOW_CACHE_MAX || tokens > VG_WINDOW_CACHE_TOKENS)) {
        size_t old = 0;
        for (size_t i = 1; i < c->n; i++)
            if (c->slots[i]->used < c->slots[old]->used)
                old = i;
        struct kept *gone = take_at(c, old);
        tokens -= gone->w.tokens;
        kept_free(gone);
    }
    if (k->w.tokens > VG_WINDOW_CACHE_TOKENS) {
        kept_free(k);
        return;
    }
    k->used = ++c->tick;
    c->slots[c->n++] = k;
}

static struct kept *kept_new(const char *agent_id, const char *thread_id, int64_t budget)
{
    struct kept *k = vg_calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->agent_id = vg_strdup(agent_id);
    k->thread_id = vg_strdup(thread_id);
    k->budget = budget;
    vg_window_init(&k->w, budget);
    if (!k->agent_id || !k->thread_id) {
        kept_free(k);
        return NULL;
    }
    return k;
}

/* Pushes message bodies (oldest first), noting the newest one's seq and id. */
static vigil_code push_bodies(struct kept *k, json_t *bodies, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    for (size_t i = 0; !rc && i < json_array_size(bodies); i++) {
        json_t *b = json_array_get(bodies, i);
        const char *id = json_string_value(json_object_get(b, "id"));
        rc = vg_window_push_body(&k->w, b, err);
        k->last_seq = json_integer_value(json_object_get(b, "seq"));
        snprintf(k->last_id, sizeof k->last_id, "%s", id ? id : "");
    }
    return rc ? rc : vg_window_flush(&k->w, err);
}

/* The thread's head: its newest message's id ("" when it has none) and how many messages the
 * thread holds. One point read, which the record cache serves while nothing changed. */
static vigil_code thread_head(struct vg_env *env, const char *agent_id, const char *thread_id,
                              char head[VG_RECORD_ID_MAX], int64_t *count, vigil_error *err)
{
    char key[VG_RECORD_ID_MAX];
    snprintf(key, sizeof key, "%s:%s", agent_id, thread_id);
    *count = 0;
    vigil_code rc = vg_link_pointer_get_counted(env, "agent_head_message", key, head,
                                                VG_RECORD_ID_MAX, count, err);
    if (rc == VIGIL_ENOTFOUND) {
        head[0] = '\0';
        return VIGIL_OK;
    }
    return rc;
}

/* Is the kept window still the start of the thread? The first newer message follows its newest;
 * with no newer message, its newest is the thread's head. The head is asked because a window
 * read outside a transaction while a round of folded commits was open (store.h) holds the
 * round's released writes: when that round failed, a later message took the rolled-back one's
 * sequence, and no message "after" it would ever show the difference. And the thread must hold
 * as many messages as the window saw plus the newer ones: a message another device wrote,
 * stored here by multi-device sync, may number below the kept newest (a forked thread,
 * docs/sync.md), where no read "after" it finds it, but it counts in the head's counter. */
static int still_follows(const struct kept *k, json_t *newer, const char *head, int64_t count)
{
    json_t *first = json_array_get(newer, 0);
    if (count != k->counted + (int64_t)json_array_size(newer))
        return 0;
    if (first) {
        const char *prev = json_string_value(json_object_get(first, "prev_id"));
        return !strcmp(prev ? prev : "", k->last_id);
    }
    return !strcmp(head, k->last_id);
}

vigil_code vg_window_cache_read(struct vg_env *env, const char *agent_id, const char *thread_id,
                                int64_t budget, struct vg_window *w, vigil_error *err)
{
    struct window_cache *c = cache_of(env);
    struct kept *k = take(c, agent_id, thread_id, budget);
    json_t *bodies = NULL;
    char head[VG_RECORD_ID_MAX];
    int64_t count = 0;
    int follows = 1;
    vg_window_init(w, budget);
    /* The head first: a message appended after it is read makes the count disagree, and the
     * window is read again (never one that misses a message). */
    vigil_code rc = thread_head(env, agent_id, thread_id, head, &count, err);
    if (rc)
        goto out;
    /* More newer messages than a catch-up is for (another process posting to the thread):
     * read from scratch, which stops at the token budget. */
    if (k && (rc = vg_message_after(env, agent_id, thread_id, k->last_seq, CATCH_UP_MAX + 1,
                                    &bodies, err)))
        goto out;
    if (k)
        follows = json_array_size(bodies) <= CATCH_UP_MAX && still_follows(k, bodies, head, count);
    if (k && !follows) {
        kept_free(k);
        k = NULL;
        json_decref(bodies);
        bodies = NULL;
    }
    if (!k && !(k = kept_new(agent_id, thread_id, budget))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory keeping the context window");
        goto out;
    }
    if (!bodies && (rc = vg_message_recent(env, agent_id, thread_id, budget, &bodies, err)))
        goto out;
    k->counted = count;
    if ((rc = push_bodies(k, bodies, err)) || (rc = vg_window_copy(w, &k->w, err)))
        goto out;
    /* Read inside an open transaction, it may hold what a rollback takes back: not kept. */
    if (c && vg_window_settled(&k->w) && vg_store_depth(env->store) == 0) {
        put_back(c, k);
        k = NULL;
    }
out:
    json_decref(bodies);
    kept_free(k);
    return rc;
}
