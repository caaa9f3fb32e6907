/*
 * link.c: typed links between records, one record kind for every relation (S0-025). Immutable
 * links (message_payload, report_source_span, tool_effect, summary spans, host references such
 * as agent_task) are keyed by (type, from, to), so adding one twice stores it once, and are
 * read from either end by type: k1 "<type>:<from>" (vg_link_targets), k2 "<type>:<to>"
 * (vg_link_sources), both indexed (docs/internals/STORE.md, migration 27). The
 * message_prev link is the one relation not stored: every message already names its thread's
 * previous message (prev_id), so a row would repeat it and cost every append an insert with
 * three index entries; vg_link_targets answers it from the message. Pointer links (agent_state,
 * agent_head_message, agent_report_head) have a stable id per (type, key) and are moved with a
 * revision check. They are looked up by id, and what moves (the target in k2, the counter in
 * the body) is in no index of links (the SQLite adapter keeps pointers out of the k2 one), so
 * moving one rewrites its row only: its seq column stays 0
 * (every index of links ends in seq). Removing a link marks it deleted and writes a tombstone
 * record, so a synced peer learns of the removal.
 */
#include "base/common.h"

#include "agent/agent_int.h"
#include "base/hash.h"
#include "base/json.h"

/* Relations answered from the records they connect, never stored as link rows. */
static int link_derived(const char *type)
{
    return strcmp(type, "message_prev") == 0;
}

static vigil_code link_keys(const char *type, const char *from, const char *to, char *k1, char *k2,
                            size_t n, vigil_error *err)
{
    if (link_derived(type))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "a %s link follows from the message's prev_id; it is neither added nor "
                       "removed",
                       type);
    if (vg_join(k1, n, type, ':', from) < 0 || vg_join(k2, n, type, ':', to) < 0)
        return VG_FAIL(err, VIGIL_EINVAL, "link %s from \"%s\" is too long", type, from);
    return VIGIL_OK;
}

/*
 * An immutable link's id is its triple, "<type>|<from>|<to>": deterministic (adding it twice
 * stores it once) and, since `from` is usually a time-ordered message id, appended at the end of
 * the id index rather than at a random place in it, which keeps appends cheap at millions of
 * links. A triple too long for an id is hashed instead.
 */
static void link_id(char out[VG_RECORD_ID_MAX], const char *type, const char *from, const char *to)
{
    int n = snprintf(out, VG_RECORD_ID_MAX, "%s|%s|%s", type, from, to);
    if (n < 0 || n >= VG_RECORD_ID_MAX) {
        const char *parts[] = {type, from, to};
        vg_sha256_hex_parts(out, parts, 3);
    }
}

vigil_code vg_link_add(struct vg_env *env, const char *agent_id, const char *type, const char *from,
                       const char *to, json_t *meta, vigil_error *err)
{
    char id[VG_RECORD_ID_MAX], k1[512], k2[512], at[32];
    vigil_code rc = link_keys(type, from, to, k1, k2, sizeof k1, err);
    if (rc)
        return rc;
    link_id(id, type, from, to);
    vg_time_format_ms(at, vg_env_now(env));
    json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:O?, s:s, s:n}", "id", id, "type", type, "from",
                             from, "to", to, "meta", meta, "created_at", at, "deleted_at");
    if (!body)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory adding a link");
    rc = vg_env_put_json(env, "link", id, agent_id, k1, k2, vg_env_now(env), body, VG_PUT_IF_ABSENT,
                         err);
    json_decref(body);
    return rc;
}

vigil_code vg_link_add_text(struct vg_env *env, const char *agent_id, const char *type,
                            const char *from, const char *to, const char *meta_json,
                            vigil_error *err)
{
    char id[VG_RECORD_ID_MAX], k1[512], k2[512], at[32];
    struct vg_buf b;
    vigil_code rc = link_keys(type, from, to, k1, k2, sizeof k1, err);
    if (rc)
        return rc;
    link_id(id, type, from, to);
    vg_time_format_ms(at, vg_env_now(env));
    /* Keys in sorted order, as jansson's JSON_SORT_KEYS would write them. */
    vg_buf_init(&b, 0);
    vg_buf_puts(&b, "{\"created_at\":");
    vg_json_put_string(&b, at);
    vg_buf_puts(&b, ",\"deleted_at\":null,\"from\":");
    vg_json_put_string(&b, from);
    vg_buf_puts(&b, ",\"id\":");
    vg_json_put_string(&b, id);
    vg_buf_puts(&b, ",\"meta\":");
    vg_buf_puts(&b, meta_json ? meta_json : "null");
    vg_buf_puts(&b, ",\"to\":");
    vg_json_put_string(&b, to);
    vg_buf_puts(&b, ",\"type\":");
    vg_json_put_string(&b, type);
    vg_buf_putc(&b, '}');
    rc = vg_buf_finish(&b, err);
    if (!rc)
        rc = vg_env_put_text(env, "link", id, agent_id, k1, k2, vg_env_now(env), b.data,
                             VG_PUT_IF_ABSENT, err);
    vg_buf_release(&b);
    return rc;
}

struct targets_ctx {
    json_t *out;
    const char *end; /* the body's field to collect: "to" (targets) or "from" (sources) */
    int failed;
};

static int targets_cb(void *user, const struct vg_record *r)
{
    struct targets_ctx *c = user;
    json_error_t je;
    json_t *body = json_loads(r->body, 0, &je);
    if (!body) {
        c->failed = 1;
        return 1;
    }
    if (json_is_null(json_object_get(body, "deleted_at")) &&
        json_array_append(c->out, json_object_get(body, c->end)))
        c->failed = 1;
    json_decref(body);
    return c->failed;
}

/* The message_prev target of a message: its prev_id (none for a thread's first message). */
static vigil_code message_prev_targets(struct vg_env *env, const char *from, json_t *out,
                                       vigil_error *err)
{
    json_t *msg = NULL;
    vigil_code rc = vg_env_get_json(env, "message", from, &msg, NULL, err);
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK; /* no such message, no link: as for a stored relation */
    if (rc)
        return rc;
    json_t *prev = json_object_get(msg, "prev_id");
    if (json_is_string(prev) && json_array_append(out, prev))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading links");
    json_decref(msg);
    return rc;
}

/* The links q finds, as an array of each one's `end` field ("to" or "from"), oldest first. */
static vigil_code links_scan(struct vg_env *env, const struct vg_query *q, const char *end,
                             json_t **out, vigil_error *err)
{
    struct targets_ctx c = {json_array(), end, 0};
    if (!c.out)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading links");
    vigil_code rc = vg_store_scan(env->store, q, targets_cb, &c, err);
    if (!rc && c.failed)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading links");
    if (rc) {
        json_decref(c.out);
        return rc;
    }
    *out = c.out;
    return VIGIL_OK;
}

vigil_code vg_link_targets(struct vg_env *env, const char *type, const char *from, json_t **out,
                           vigil_error *err)
{
    if (link_derived(type)) {
        json_t *targets = json_array();
        if (!targets)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading links");
        vigil_code rc = message_prev_targets(env, from, targets, err);
        if (rc) {
            json_decref(targets);
            return rc;
        }
        *out = targets;
        return VIGIL_OK;
    }
    char k1[512];
    if (snprintf(k1, sizeof k1, "%s:%s", type, from) >= (int)sizeof k1)
        return VG_FAIL(err, VIGIL_EINVAL, "link %s from \"%s\" is too long", type, from);
    struct vg_query q = {.kind = "link", .k1 = k1};
    return links_scan(env, &q, "to", out, err);
}

/*
 * The other way: the links of a type to `to`, by k2 ("<type>:<to>"), which both adapters index
 * for links that are not pointers (SQLite from schema 27). Oldest first, as stored.
 */
vigil_code vg_link_sources(struct vg_env *env, const char *type, const char *to, json_t **out,
                           vigil_error *err)
{
    if (link_derived(type))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "a %s link follows from the message's prev_id: read the thread instead",
                       type);
    char k2[512];
    if (vg_join(k2, sizeof k2, type, ':', to) < 0)
        return VG_FAIL(err, VIGIL_EINVAL, "link %s to \"%s\" is too long", type, to);
    struct vg_query q = {.kind = "link", .k2 = k2};
    return links_scan(env, &q, "from", out, err);
}

vigil_code vg_link_remove(struct vg_env *env, const char *agent_id, const char *type,
                          const char *from, const char *to, vigil_error *err)
{
    char id[VG_RECORD_ID_MAX], k1[512], k2[512], at[32];
    json_t *body = NULL;
    int64_t rev = 0;
    vigil_code rc = link_keys(type, from, to, k1, k2, sizeof k1, err);
    if (rc)
        return rc;
    link_id(id, type, from, to);
    if ((rc = vg_store_begin(env->store, err)))
        return rc;
    if ((rc = vg_env_get_json(env, "link", id, &body, &rev, err)))
        goto out;
    if (!json_is_null(json_object_get(body, "deleted_at")))
        goto out; /* already removed: removal is idempotent */
    vg_time_format_ms(at, vg_env_now(env));
    if (json_object_set_new(body, "deleted_at", json_string(at))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory removing a link");
        goto out;
    }
    rc = vg_env_update_json(env, "link", id, agent_id, k1, k2, vg_env_now(env), body, rev, err);
    if (!rc) /* written again when made anew and removed again, so it travels again */
        rc = vg_tombstone_put(env, agent_id, "link", id, err);
out:
    rc = vg_store_end(env->store, rc, err);
    json_decref(body);
    return rc;
}

/* ---- pointers ------------------------------------------------------------------------------ */

static vigil_code pointer_id(char *id, size_t n, const char *type, const char *key,
                             vigil_error *err)
{
    if (vg_join(id, n, type, ':', key) < 0)
        return VG_FAIL(err, VIGIL_EINVAL, "pointer %s of \"%s\" is too long", type, key);
    return VIGIL_OK;
}

struct pointer_ctx {
    struct vg_pointer *p;
    size_t prefix; /* strlen(type) + 1: the "<type>:" before the target in k2 */
    int bad;
};

static int pointer_cb(void *user, const struct vg_record *r)
{
    struct pointer_ctx *c = user;
    size_t n = strlen(r->k2);
    if (n <= c->prefix || n - c->prefix >= sizeof c->p->to) {
        c->bad = 1;
        return 1;
    }
    memcpy(c->p->to, r->k2 + c->prefix, n - c->prefix + 1);
    /* The counter is the body's "seq" (the column, before pointers kept it at 0). The body is
     * vg_pointer_write's canonical text, where this key follows "kind" and no string value can
     * hold the pattern: every quote inside one is escaped. */
    static const char key[] = ",\"kind\":\"pointer\",\"seq\":";
    const char *at = strstr(r->body, key);
    char *end = NULL;
    long long seq = at ? strtoll(at + sizeof key - 1, &end, 10) : 0;
    c->p->seq = at && end != at + sizeof key - 1 ? (int64_t)seq : r->seq;
    c->p->rev = r->rev;
    c->p->exists = 1;
    return 1;
}

/*
 * Pointers moved inside a flat transaction (the loop's phases: all or nothing) are kept here and
 * written once, just before its commit (vg_store_defer). A turn's thought and its first action
 * share one such transaction, and each append reads and moves the thread's head and the agent's
 * head: half of those reads and writes were of rows the transaction had just written. A read
 * of a pointer kept here answers from here. Nothing else reads pointer rows: link scans skip
 * them (they have no "deleted_at"), and vg_spine_verify's scan only looks for heads of threads
 * without messages. In any other transaction, or when the slots are full, pointers are read and
 * written at once.
 */
#define POINTER_SLOTS 4

struct pointer_slot {
    char id[VG_RECORD_ID_MAX];
    char type[64];
    char key[VG_RECORD_ID_MAX];
    char owner[VG_RECORD_ID_MAX];
    char at[32];              /* the time of the last move */
    struct vg_pointer stored; /* the row as the store has it: its revision for the update */
    /* As the transaction left it. Its revision counts every move, kept back or not, as the
     * store counts updates, so a caller moving it from a stale view still fails (ECONFLICT);
     * it can run ahead of the row's (moves written as one), and the slot is gone at the end of
     * the transaction, when readers go back to the row. */
    struct vg_pointer now;
    int dirty;
};

struct vg_pointer_cache {
    struct vg_env *env;
    int n; /* slots of the transaction it is registered with (vg_store_deferred) */
    struct pointer_slot slots[POINTER_SLOTS];
};

static vigil_code store_write(struct vg_env *env, const char *agent_id, const char *type,
                              const char *key, const char *to, int64_t seq, const char *at,
                              const struct vg_pointer *seen, vigil_error *err);

/* Write the moved pointers now; they stay known (clean) for the rest of the transaction. */
static vigil_code cache_write(struct vg_pointer_cache *c, vigil_error *err)
{
    for (int i = 0; i < c->n; i++) {
        struct pointer_slot *sl = &c->slots[i];
        if (!sl->dirty)
            continue;
        vigil_code rc = store_write(c->env, sl->owner, sl->type, sl->key, sl->now.to, sl->now.seq,
                                    sl->at, &sl->stored, err);
        if (rc)
            return rc;
        sl->stored.rev = sl->stored.exists ? sl->stored.rev + 1 : 1;
        sl->stored.exists = 1;
        sl->dirty = 0;
    }
    return VIGIL_OK;
}

static vigil_code cache_pending(void *user, enum vg_store_pending phase, vigil_error *err)
{
    struct vg_pointer_cache *c = user;
    switch (phase) {
    case VG_PENDING_FLUSH:
        return cache_write(c, err);
    case VG_PENDING_DONE:
    case VG_PENDING_ABORT:
        /* Under folded commits this may be the end of an earlier transaction, whose round
         * ended while a later one keeps its own pointers here: those stay. */
        if (!vg_store_deferred(c->env->store, cache_pending, c))
            c->n = 0;
        break;
    case VG_PENDING_RELEASE:
    case VG_PENDING_PARTIAL: /* not in a flat transaction: a failed level rolls back all */
        break;
    }
    return VIGIL_OK;
}

/* The cache, when the open transaction may keep pointers back; NULL to go to the store. */
static struct vg_pointer_cache *cache_for(struct vg_env *env)
{
    if (!vg_store_flat(env->store))
        return NULL;
    if (!env->pointers && !(env->pointers = vg_calloc(1, sizeof *env->pointers)))
        return NULL;
    struct vg_pointer_cache *c = env->pointers;
    /* Not yet kept for this transaction (an earlier one's end may still be on its way: folded
     * commits tell it when their round ends, and the cache serves every fiber of a worker). */
    if (!vg_store_deferred(env->store, cache_pending, c)) {
        c->env = env;
        c->n = 0;
        if (vg_store_defer(env->store, cache_pending, c, NULL) != VIGIL_OK)
            return NULL;
    }
    return c;
}

static struct pointer_slot *cache_find(struct vg_pointer_cache *c, const char *id)
{
    for (int i = 0; c && i < c->n; i++)
        if (strcmp(c->slots[i].id, id) == 0)
            return &c->slots[i];
    return NULL;
}

/* Write now what the transaction kept back. */
static vigil_code pointers_to_store(struct vg_env *env, vigil_error *err)
{
    struct vg_pointer_cache *c = env->pointers;
    return c && vg_store_deferred(env->store, cache_pending, c) ? cache_write(c, err) : VIGIL_OK;
}

vigil_code vg_pointer_read(struct vg_env *env, const char *type, const char *key,
                           struct vg_pointer *out, vigil_error *err)
{
    char id[VG_RECORD_ID_MAX];
    struct pointer_ctx c = {out, strlen(type) + 1, 0};
    memset(out, 0, sizeof *out);
    vigil_code rc = pointer_id(id, sizeof id, type, key, err);
    if (rc)
        return rc;
    struct vg_pointer_cache *cache = cache_for(env);
    struct pointer_slot *sl = cache_find(cache, id);
    if (sl) {
        *out = sl->now;
        return VIGIL_OK;
    }
    /* A pointer not set yet is an answer (out->exists stays 0), not an error: the store's
     * "not found" goes to a report of its own, so the caller's stays untouched. */
    vigil_error miss = {0};
    rc = vg_error_unless_missing(err, &miss,
                                 vg_store_get(env->store, "link", id, pointer_cb, &c, &miss));
    if (rc == VIGIL_ENOTFOUND)
        rc = VIGIL_OK;
    if (rc)
        return rc;
    if (c.bad)
        return VG_FAIL(err, VIGIL_ECORRUPT, "pointer %s of \"%s\" has no valid target", type, key);
    if (cache && cache->n < POINTER_SLOTS && strlen(type) < sizeof cache->slots[0].type) {
        sl = &cache->slots[cache->n++];
        memcpy(sl->id, id, strlen(id) + 1);
        memcpy(sl->type, type, strlen(type) + 1);
        memcpy(sl->key, key, strlen(key) + 1);
        sl->stored = sl->now = *out;
        sl->dirty = 0;
    }
    return VIGIL_OK;
}

vigil_code vg_link_pointer_get_counted(struct vg_env *env, const char *type, const char *key,
                                       char *out_to, size_t out_size, int64_t *count,
                                       vigil_error *err)
{
    struct vg_pointer p;
    vigil_code rc = vg_pointer_read(env, type, key, &p, err);
    if (rc)
        return rc;
    if (!p.exists)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "pointer %s of \"%s\" is not set", type, key);
    if (strlen(p.to) >= out_size)
        return VG_FAIL(err, VIGIL_EINVAL, "pointer target is longer than the buffer");
    memcpy(out_to, p.to, strlen(p.to) + 1);
    if (count)
        *count = p.seq;
    return VIGIL_OK;
}

vigil_code vg_link_pointer_get(struct vg_env *env, const char *type, const char *key, char *out_to,
                               size_t out_size, vigil_error *err)
{
    return vg_link_pointer_get_counted(env, type, key, out_to, out_size, NULL, err);
}

vigil_code vg_pointer_write(struct vg_env *env, const char *agent_id, const char *type,
                            const char *key, const char *to, int64_t seq,
                            const struct vg_pointer *seen, vigil_error *err)
{
    char id[VG_RECORD_ID_MAX], at[32];
    vigil_code rc = pointer_id(id, sizeof id, type, key, err);
    if (rc)
        return rc;
    vg_time_format_ms(at, vg_env_now(env));
    struct pointer_slot *sl = cache_find(cache_for(env), id);
    /* Kept back only when what the caller saw is what this transaction holds (it read it
     * here); otherwise the revision check must happen now. */
    if (sl && seen && seen->exists == sl->now.exists && seen->rev == sl->now.rev &&
        strlen(to) < sizeof sl->now.to && strlen(agent_id) < sizeof sl->owner) {
        memcpy(sl->now.to, to, strlen(to) + 1);
        sl->now.seq = seq;
        sl->now.rev = sl->now.exists ? sl->now.rev + 1 : 1;
        sl->now.exists = 1;
        memcpy(sl->owner, agent_id, strlen(agent_id) + 1);
        memcpy(sl->at, at, sizeof at);
        sl->dirty = 1;
        return VIGIL_OK;
    }
    /* A view the transaction has moved past, or one from elsewhere: what was kept back goes to
     * the row first, so the update's revision check decides. */
    if (sl && (rc = pointers_to_store(env, err)))
        return rc;
    rc = store_write(env, agent_id, type, key, to, seq, at, seen, err);
    if (rc == VIGIL_OK && sl && strlen(to) < sizeof sl->now.to) {
        sl->stored.rev = seen && seen->exists ? seen->rev + 1 : 1;
        sl->stored.exists = 1;
        memcpy(sl->now.to, to, strlen(to) + 1);
        sl->now.seq = seq;
        sl->now.rev = VG_MAX(sl->now.rev + 1, sl->stored.rev);
        sl->now.exists = 1;
    } else if (rc == VIGIL_OK && sl) {
        sl->id[0] = '\0'; /* no longer known here: the next read goes to the row */
    }
    return rc;
}

static vigil_code store_write(struct vg_env *env, const char *agent_id, const char *type,
                              const char *key, const char *to, int64_t seq, const char *at,
                              const struct vg_pointer *seen, vigil_error *err)
{
    char id[VG_RECORD_ID_MAX], k2[512];
    struct vg_buf b;
    vigil_code rc = pointer_id(id, sizeof id, type, key, err);
    if (rc)
        return rc;
    if (vg_join(k2, sizeof k2, type, ':', to) < 0)
        return VG_FAIL(err, VIGIL_EINVAL, "pointer target \"%s\" is too long", to);
    vg_buf_init(&b, 0);
    vg_buf_puts(&b, "{\"from\":");
    vg_json_put_string(&b, key);
    vg_buf_puts(&b, ",\"id\":");
    vg_json_put_string(&b, id);
    vg_buf_puts(&b, ",\"kind\":\"pointer\",\"seq\":");
    vg_json_put_int(&b, seq);
    vg_buf_puts(&b, ",\"to\":");
    vg_json_put_string(&b, to);
    vg_buf_puts(&b, ",\"type\":");
    vg_json_put_string(&b, type);
    vg_buf_puts(&b, ",\"updated_at\":");
    vg_json_put_string(&b, at);
    vg_buf_putc(&b, '}');
    if ((rc = vg_buf_finish(&b, err)))
        goto out;
    /* k1 keeps "<type>:<key>" like every link's "<type>:<from>"; k2 names the target; the row's
     * seq stays 0 so no index entry moves (the counter is in the body). */
    if (seen && seen->exists)
        rc = vg_env_update_text(env, "link", id, agent_id, id, k2, 0, b.data, seen->rev, err);
    else
        rc = vg_env_put_text(env, "link", id, agent_id, id, k2, 0, b.data, 0, err);
out:
    vg_buf_release(&b);
    return rc;
}

vigil_code vg_pointer_set(struct vg_env *env, const char *agent_id, const char *type,
                          const char *key, const char *to, int64_t seq, vigil_error *err)
{
    struct vg_pointer p;
    vigil_code rc = vg_pointer_read(env, type, key, &p, err);
    if (rc)
        return rc;
    return vg_pointer_write(env, agent_id, type, key, to, seq, &p, err);
}
