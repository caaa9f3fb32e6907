/*
 * env.c: the notifier that holds tokens until their transaction ends, and the JSON record
 * helpers every domain module uses to read and write the store.
 */
#include "base/common.h"

#include "base/json.h"

#include "env/env.h"

#include <jansson.h>

/*
 * Tokens raised inside a transaction are kept with it, in a batch the store tells how the
 * transaction ended (vg_store_defer): delivered when it committed, dropped when it rolled back,
 * so nobody hears of data that was rolled back. A batch belongs to one transaction, not to the
 * runtime: under folded commits (vigil serve's workers) a fiber's transaction ends only when its
 * round does, while other fibers' transactions raise tokens of their own.
 */
struct vg_note_batch {
    struct vg_env *env;
    char **tokens; /* owned */
    size_t n, cap;
    int overflow; /* an allocation failed: deliver a coarse "RESYNC" token instead */
};

static void batch_free(struct vg_note_batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        vg_free(b->tokens[i]);
    vg_free(b->tokens);
    vg_free(b);
}

static void deliver(struct vg_notifier *nt, const char *const *tokens, size_t n, int overflow)
{
    static const char *const resync[] = {"RESYNC"};
    if (nt->fn && overflow)
        nt->fn(nt->fn_user, resync, 1);
    else if (nt->fn && n)
        nt->fn(nt->fn_user, tokens, n);
}

static vigil_code batch_pending(void *user, enum vg_store_pending phase, vigil_error *err)
{
    struct vg_note_batch *b = user;
    struct vg_notifier *nt = &b->env->notify;
    (void)err;
    if (phase != VG_PENDING_DONE && phase != VG_PENDING_ABORT)
        return VIGIL_OK; /* kept until the outermost level ends */
    if (nt->open == b)
        nt->open = NULL;
    if (phase == VG_PENDING_DONE)
        deliver(nt, (const char *const *)b->tokens, b->n, b->overflow);
    if (nt->spare) {
        batch_free(b);
        return VIGIL_OK;
    }
    /* Kept for the next transaction: most of them raise tokens. */
    for (size_t i = 0; i < b->n; i++)
        vg_free(b->tokens[i]);
    b->n = 0;
    b->overflow = 0;
    nt->spare = b;
    return VIGIL_OK;
}

/* The open transaction's batch, made and handed to the store on its first token. */
static struct vg_note_batch *open_batch(struct vg_env *env)
{
    struct vg_notifier *nt = &env->notify;
    if (nt->open && vg_store_deferred(env->store, batch_pending, nt->open))
        return nt->open;
    struct vg_note_batch *b = nt->spare ? nt->spare : vg_calloc(1, sizeof *b);
    if (!b)
        return NULL;
    nt->spare = NULL;
    b->env = env;
    if (vg_store_defer(env->store, batch_pending, b, NULL) != VIGIL_OK) {
        nt->spare = b;
        return NULL;
    }
    nt->open = b;
    return b;
}

void vg_env_notify(struct vg_env *env, const char *const *tokens, size_t n)
{
    struct vg_notifier *nt = &env->notify;
    if (!vg_store_in_tx(env->store)) {
        deliver(nt, tokens, n, 0);
        return;
    }
    struct vg_note_batch *b = open_batch(env);
    if (!b) {
        /* Nowhere to keep them: a coarse resync when some transaction commits instead. */
        if (nt->open)
            nt->open->overflow = 1;
        return;
    }
    for (size_t i = 0; i < n && !b->overflow; i++) {
        if (b->n == b->cap) {
            size_t cap = b->cap ? b->cap * 2 : 16;
            char **p = vg_realloc(b->tokens, cap * sizeof *p);
            if (!p) {
                b->overflow = 1;
                break;
            }
            b->tokens = p;
            b->cap = cap;
        }
        if (!(b->tokens[b->n] = vg_strdup(tokens[i])))
            b->overflow = 1;
        else
            b->n++;
    }
}

/*
 * Parsed bodies, by their text. A step reads the same few records again and again (the agent,
 * its budget usage, its memory blocks, its lease), and jansson's parse of a record costs
 * several times a deep copy of the parsed value: parsing was most of a step's instructions on
 * the user's path (the figures: docs/internals/PERF.md). Keyed by the whole text, compared
 * byte for byte, a hit is what parsing that text gives, whatever wrote it and however the
 * store numbers its revisions. Direct-mapped and bounded: at most MEMO_SLOTS bodies of at most
 * MEMO_TEXT_MAX bytes each, a new body taking its slot from the old one.
 */
#define MEMO_SLOTS 256
#define MEMO_TEXT_MAX 2048

struct memo_slot {
    uint64_t hash;
    uint64_t seen; /* hash of the last other text that fell here once: kept if it comes again */
    size_t len;
    char *text;    /* owned copy of the body */
    json_t *value; /* what parsing it gave; handed out as deep copies */
};

struct vg_json_memo {
    struct memo_slot slot[MEMO_SLOTS];
};

static void memo_clear_slot(struct memo_slot *s)
{
    vg_free(s->text);
    json_decref(s->value);
    memset(s, 0, sizeof *s);
}

static void memo_free(struct vg_json_memo *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < MEMO_SLOTS; i++)
        memo_clear_slot(&m->slot[i]);
    vg_free(m);
}

static uint64_t fnv1a(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
    return h;
}

/* Keep text's parsed value in its slot; a failure only means no memo. */
static void memo_keep(struct memo_slot *s, uint64_t h, const char *text, size_t len, json_t *value)
{
    char *copy = vg_malloc(len + 1);
    if (!copy)
        return;
    memcpy(copy, text, len + 1);
    memo_clear_slot(s);
    s->hash = h;
    s->len = len;
    s->text = copy;
    s->value = json_incref(value);
}

/* shared: the memo's own value (referenced) instead of a copy, for a caller that only reads. */
static vigil_code parse_memo(struct vg_env *env, const char *text, json_t **out, int shared)
{
    size_t len = strlen(text);
    json_error_t je;
    if (len > MEMO_TEXT_MAX)
        goto parse;
    if (!env->memo && !(env->memo = vg_calloc(1, sizeof *env->memo)))
        goto parse;
    uint64_t h = fnv1a(text, len);
    struct memo_slot *s = &env->memo->slot[h % MEMO_SLOTS];
    if (s->text && s->hash == h && s->len == len && !memcmp(s->text, text, len)) {
        *out = shared ? json_incref(s->value) : json_deep_copy(s->value);
        return *out ? VIGIL_OK : VIGIL_ENOMEM;
    }
    /* A text seen once is only noted: it takes the slot from the one there only when it comes
     * again. With a hundred agents' records passing, most texts come once in a while, and
     * keeping each (a copy of its text and of its value) cost more than the hits saved. */
    if (s->seen != h) {
        s->seen = h;
        goto parse;
    }
    json_t *v = json_loads(text, 0, &je);
    if (!v)
        return json_error_code(&je) == json_error_out_of_memory ? VIGIL_ENOMEM : VIGIL_EPARSE;
    /* The memo keeps the first value and the caller gets a copy (callers change what they get),
     * or the same value when it only reads. */
    json_t *mine = shared ? json_incref(v) : json_deep_copy(v);
    if (!mine) {
        json_decref(v);
        return VIGIL_ENOMEM;
    }
    memo_keep(s, h, text, len, v);
    json_decref(v);
    *out = mine;
    return VIGIL_OK;
parse:
    if ((*out = json_loads(text, 0, &je)))
        return VIGIL_OK;
    return json_error_code(&je) == json_error_out_of_memory ? VIGIL_ENOMEM : VIGIL_EPARSE;
}

static int key_order(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b); /* vg_json_dump's order */
}

/* What parsing value's sorted encoding gives, built from value: the same tree with every
 * object's keys in sorted order (jansson keeps keys in the order they were set; a parse sets
 * them in the text's order), or NULL when that cannot be promised cheaply: a real (its text is
 * a rounding of it) or a string holding a NUL (the parse refuses \u0000). */
static json_t *parsed_copy(const json_t *value, int depth)
{
    if (depth > 32)
        return NULL;
    if (json_is_real(value))
        return NULL;
    if (json_is_string(value))
        return strlen(json_string_value(value)) == json_string_length(value)
                   ? json_stringn_nocheck(json_string_value(value), json_string_length(value))
                   : NULL;
    if (json_is_array(value)) {
        json_t *a = json_array(), *v;
        size_t i;
        json_array_foreach (value, i, v)
            if (!a || json_array_append_new(a, parsed_copy(v, depth + 1))) {
                json_decref(a);
                return NULL;
            }
        return a;
    }
    if (!json_is_object(value))
        return json_deep_copy(value); /* an integer, true, false, null */
    size_t n = json_object_size(value), i = 0;
    const char **keys = vg_malloc((n ? n : 1) * sizeof *keys);
    json_t *o = keys ? json_object() : NULL;
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)value, k, v)
        if (keys)
            keys[i++] = k;
    if (o && n)
        qsort(keys, n, sizeof *keys, key_order);
    for (i = 0; o && i < n; i++)
        if (json_object_set_new_nocheck(o, keys[i],
                                        parsed_copy(json_object_get(value, keys[i]), depth + 1))) {
            json_decref(o);
            o = NULL;
        }
    vg_free(keys);
    return o;
}

/* Whether value is what parsing its sorted encoding gives (parsed_copy's conditions, and
 * every object's keys in sorted order already): then it can be kept as it is. */
static int parse_ordered(const json_t *value, int depth)
{
    const char *k, *prev = NULL;
    json_t *v;
    size_t i;
    if (depth > 32 || json_is_real(value))
        return 0;
    if (json_is_string(value))
        return strlen(json_string_value(value)) == json_string_length(value);
    if (json_is_array(value)) {
        json_array_foreach (value, i, v)
            if (!parse_ordered(v, depth + 1))
                return 0;
        return 1;
    }
    json_object_foreach ((json_t *)value, k, v) {
        if ((prev && strcmp(prev, k) >= 0) || !parse_ordered(v, depth + 1))
            return 0;
        prev = k;
    }
    return 1;
}

/* A body this process wrote (text, from value, which its writer no longer changes): kept in
 * the memo as parsing text would give it (value itself when it is that already, else a copy in
 * that order), so that the next read of the same text copies it instead of parsing it. */
static void memo_note(struct vg_env *env, const char *text, json_t *value)
{
    size_t len = strlen(text);
    if (len > MEMO_TEXT_MAX || (!env->memo && !(env->memo = vg_calloc(1, sizeof *env->memo))))
        return;
    json_t *v = parse_ordered(value, 0) ? json_incref(value) : parsed_copy(value, 0);
    uint64_t h = fnv1a(text, len);
    if (v)
        memo_keep(&env->memo->slot[h % MEMO_SLOTS], h, text, len, v);
    json_decref(v);
}

vigil_code vg_env_parse_json(struct vg_env *env, const char *text, json_t **out)
{
    return parse_memo(env, text, out, 0);
}

vigil_code vg_env_parse_json_shared(struct vg_env *env, const char *text, json_t **out)
{
    return parse_memo(env, text, out, 1);
}

static void kept_clear(struct vg_env_kept_read *k)
{
    json_decref(k->value);
    memset(k, 0, sizeof *k);
}

void vg_env_release(struct vg_env *env)
{
    memo_free(env->memo);
    env->memo = NULL;
    /* The store, closed first, ended every transaction and with it every batch but the one
     * kept for the next. */
    env->notify.open = NULL;
    if (env->notify.spare)
        batch_free(env->notify.spare);
    env->notify.spare = NULL;
    vg_free(env->pointers);
    env->pointers = NULL;
    if (env->task_graph_free)
        env->task_graph_free(env->task_graph);
    env->task_graph = NULL;
    env->task_graph_free = NULL;
    if (env->spawn_agents_free)
        env->spawn_agents_free(env->spawn_agents);
    env->spawn_agents = NULL;
    env->spawn_agents_free = NULL;
    if (env->agent_names_free)
        env->agent_names_free(env->agent_names);
    env->agent_names = NULL;
    env->agent_names_free = NULL;
    if (env->lease_epochs_free)
        env->lease_epochs_free(env->lease_epochs);
    env->lease_epochs = NULL;
    env->lease_epochs_free = NULL;
    if (env->task_ends_free)
        env->task_ends_free(env->task_ends);
    env->task_ends = NULL;
    env->task_ends_free = NULL;
    if (env->sync_free)
        env->sync_free(env->sync);
    env->sync = NULL;
    env->sync_free = NULL;
    if (env->windows_free)
        env->windows_free(env->windows);
    env->windows = NULL;
    env->windows_free = NULL;
    if (env->compact_tallies_free)
        env->compact_tallies_free(env->compact_tallies);
    env->compact_tallies = NULL;
    env->compact_tallies_free = NULL;
    env->compact_tallies_note = NULL;
    for (unsigned i = 0; env->kept_agents && i < VG_ENV_KEPT_AGENTS; i++)
        json_decref(env->kept_agents[i].value);
    vg_free(env->kept_agents);
    env->kept_agents = NULL;
    json_decref(env->kept_cursors);
    env->kept_cursors = NULL;
    for (unsigned i = 0; i < VG_ENV_KEPT_READS; i++)
        kept_clear(&env->kept_reads[i]);
}

static vigil_code dump(json_t *body, char **out, vigil_error *err)
{
    *out = vg_json_dump(body, 1);
    if (!*out)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory encoding a record");
    return VIGIL_OK;
}

vigil_code vg_env_put_json(struct vg_env *env, const char *kind, const char *id, const char *owner,
                           const char *k1, const char *k2, int64_t seq, json_t *body,
                           unsigned flags, vigil_error *err)
{
    char *text = NULL;
    vigil_code rc = dump(body, &text, err);
    if (rc)
        return rc;
    struct vg_record r = {.kind = kind,
                          .id = id,
                          .owner = owner,
                          .k1 = k1,
                          .k2 = k2,
                          .seq = seq,
                          .at = vg_env_now(env),
                          .body = text};
    rc = vg_store_put(env->store, &r, flags, NULL, err);
    vg_free(text);
    return rc;
}

static vigil_code update_json(struct vg_env *env, const char *kind, const char *id,
                              const char *owner, const char *k1, const char *k2, int64_t seq,
                              json_t *body, int64_t expected_rev, int note, vigil_error *err)
{
    char *text = NULL;
    vigil_code rc = dump(body, &text, err);
    if (rc)
        return rc;
    struct vg_record r = {.kind = kind,
                          .id = id,
                          .owner = owner,
                          .k1 = k1,
                          .k2 = k2,
                          .seq = seq,
                          .at = vg_env_now(env),
                          .body = text};
    rc = vg_store_update(env->store, &r, expected_rev, err);
    if (!rc && note)
        memo_note(env, text, body);
    vg_free(text);
    return rc;
}

vigil_code vg_env_update_json(struct vg_env *env, const char *kind, const char *id,
                              const char *owner, const char *k1, const char *k2, int64_t seq,
                              json_t *body, int64_t expected_rev, vigil_error *err)
{
    return update_json(env, kind, id, owner, k1, k2, seq, body, expected_rev, 0, err);
}

vigil_code vg_env_update_json_noted(struct vg_env *env, const char *kind, const char *id,
                                    const char *owner, const char *k1, const char *k2, int64_t seq,
                                    json_t *body, int64_t expected_rev, vigil_error *err)
{
    return update_json(env, kind, id, owner, k1, k2, seq, body, expected_rev, 1, err);
}

vigil_code vg_env_put_text(struct vg_env *env, const char *kind, const char *id, const char *owner,
                           const char *k1, const char *k2, int64_t seq, const char *body,
                           unsigned flags, vigil_error *err)
{
    struct vg_record r = {.kind = kind,
                          .id = id,
                          .owner = owner,
                          .k1 = k1,
                          .k2 = k2,
                          .seq = seq,
                          .at = vg_env_now(env),
                          .body = body};
    return vg_store_put(env->store, &r, flags, NULL, err);
}

vigil_code vg_env_update_text(struct vg_env *env, const char *kind, const char *id,
                              const char *owner, const char *k1, const char *k2, int64_t seq,
                              const char *body, int64_t expected_rev, vigil_error *err)
{
    struct vg_record r = {.kind = kind,
                          .id = id,
                          .owner = owner,
                          .k1 = k1,
                          .k2 = k2,
                          .seq = seq,
                          .at = vg_env_now(env),
                          .body = body};
    return vg_store_update(env->store, &r, expected_rev, err);
}

struct get_ctx {
    struct vg_env *env;
    json_t *body;
    int64_t rev;
    int bad;    /* 1: not a JSON object; 2: out of memory while parsing */
    int shared; /* vg_env_get_json_shared */
};

static int get_cb(void *user, const struct vg_record *r)
{
    struct get_ctx *g = user;
    vigil_code rc = parse_memo(g->env, r->body, &g->body, g->shared);
    g->rev = r->rev;
    if (rc)
        g->bad = rc == VIGIL_ENOMEM ? 2 : 1;
    else if (!json_is_object(g->body))
        g->bad = 1;
    return 1;
}

/* The store's mark of `kind` records now, or 0 when it cannot say (VG_STORE_CTRL_CHANGE_MARK:
 * outside a snapshot, or a store that keeps no marks). */
static int mark_now(struct vg_env *env, const char *kind, struct vg_store_change_mark *mark)
{
    vigil_error ignored = {0};
    mark->kind = kind;
    return vg_store_control(env->store, VG_STORE_CTRL_CHANGE_MARK, mark, &ignored) == VIGIL_OK;
}

static struct vg_env_kept_read *kept_find(struct vg_env *env, const char *kind, const char *id)
{
    for (unsigned i = 0; i < VG_ENV_KEPT_READS; i++) {
        struct vg_env_kept_read *k = &env->kept_reads[i];
        if (k->kind[0] && !strcmp(k->kind, kind) && !strcmp(k->id, id))
            return k;
    }
    return NULL;
}

/* Serve (kind, id) as it was last read, when no record of its kind may have been written since
 * (its kind's mark is the one it was read under). 1: served (*rc the answer), 0: read it. */
static int kept_serve(struct vg_env *env, const char *kind, const char *id, json_t **out,
                      int64_t *rev, int shared, vigil_code *rc, vigil_error *err)
{
    struct vg_env_kept_read *k = kept_find(env, kind, id);
    struct vg_store_change_mark now;
    if (!k || !mark_now(env, kind, &now) || now.foreign != k->mark.foreign ||
        now.own != k->mark.own)
        return 0;
    if (!k->value) {
        *rc = VG_FAIL(err, VIGIL_ENOTFOUND, "%s \"%s\" not found", kind, id);
        return 1;
    }
    *out = shared ? json_incref(k->value) : json_deep_copy(k->value);
    *rc = *out ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading %s \"%s\"", kind, id);
    if (rev)
        *rev = k->rev;
    return 1;
}

/* Keep what a read answered (value: the caller's, copied unless shared; NULL: absent) with its
 * kind's mark after the read: the snapshot is taken now, and is the one the read saw. */
static void kept_keep(struct vg_env *env, const char *kind, const char *id, const json_t *value,
                      int64_t rev, int shared)
{
    struct vg_env_kept_read *k = kept_find(env, kind, id);
    if (!k) {
        if (strlen(kind) > VG_ENV_KEPT_KIND_MAX || strlen(id) > VG_ENV_KEPT_ID_MAX)
            return;
        k = &env->kept_reads[env->kept_reads_next++ % VG_ENV_KEPT_READS];
    }
    kept_clear(k);
    if (!mark_now(env, kind, &k->mark))
        return;
    if (value && !(k->value = shared ? json_incref((json_t *)value) : json_deep_copy(value)))
        return;
    snprintf(k->kind, sizeof k->kind, "%s", kind);
    snprintf(k->id, sizeof k->id, "%s", id);
    k->rev = rev;
}

static vigil_code get_json(struct vg_env *env, const char *kind, const char *id, json_t **out,
                           int64_t *rev, int shared, vigil_error *err)
{
    struct get_ctx g = {.env = env, .shared = shared};
    vigil_code rc;
    if (kept_serve(env, kind, id, out, rev, shared, &rc, err))
        return rc;
    rc = vg_store_get(env->store, kind, id, get_cb, &g, err);
    if (rc == VIGIL_ENOTFOUND)
        kept_keep(env, kind, id, NULL, 0, shared);
    if (rc)
        return rc;
    if (g.bad == 2)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading %s \"%s\"", kind, id);
    if (g.bad) {
        json_decref(g.body);
        return VG_FAIL(err, VIGIL_ECORRUPT, "%s \"%s\" has a body that is not a JSON object", kind,
                       id);
    }
    kept_keep(env, kind, id, g.body, g.rev, shared);
    *out = g.body;
    if (rev)
        *rev = g.rev;
    return VIGIL_OK;
}

vigil_code vg_env_get_json(struct vg_env *env, const char *kind, const char *id, json_t **out,
                           int64_t *rev, vigil_error *err)
{
    return get_json(env, kind, id, out, rev, 0, err);
}

vigil_code vg_env_get_json_shared(struct vg_env *env, const char *kind, const char *id,
                                  json_t **out, vigil_error *err)
{
    return get_json(env, kind, id, out, NULL, 1, err);
}
