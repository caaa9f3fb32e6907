/*
 * intake.c: notification intake. Tokens arrive from the runtime's own commits (through the
 * notifier hook, tagged with env->notify.source), from durable "notification" records other
 * processes wrote (`vigil notify`, vigil_notify), and from tests. They wait in a debounce window
 * per (origin, source) - local ~100 ms, sync ~1 s, fixed from the first token so latency stays
 * bounded - and leave as one batch. Windows are measured with the clock port only.
 */
#include "base/common.h"

#include "wake/wake_int.h"

struct pending {
    struct pending *next;
    enum vg_batch_origin origin;
    char *source;  /* owned or NULL */
    char **tokens; /* owned, may repeat until the batch is built */
    size_t n, cap;
    char **records; /* durable notification ids folded in (owned) */
    size_t n_records, cap_records;
    int64_t deadline_ms; /* window closes at this wall time */
};

static void pending_free(struct pending *p)
{
    for (size_t i = 0; i < p->n; i++)
        vg_free(p->tokens[i]);
    for (size_t i = 0; i < p->n_records; i++)
        vg_free(p->records[i]);
    vg_free(p->tokens);
    vg_free(p->records);
    vg_free(p->source);
    vg_free(p);
}

void vg_wake_release(struct vg_wake *w)
{
    if (!w || !w->env)
        return;
    while (w->pending) {
        struct pending *p = w->pending;
        w->pending = p->next;
        pending_free(p);
    }
    vg_suppress_free(w->suppress);
    w->suppress = NULL;
}

static int push(char ***v, size_t *n, size_t *cap, const char *s)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        char **p = vg_realloc(*v, c * sizeof *p);
        if (!p)
            return -1;
        *v = p;
        *cap = c;
    }
    if (!((*v)[*n] = vg_strdup(s)))
        return -1;
    (*n)++;
    return 0;
}

static struct pending *window(struct vg_wake *w, const char *source, enum vg_batch_origin origin,
                              vigil_error *err)
{
    struct pending *p;
    for (p = w->pending; p; p = p->next)
        if (p->origin == origin &&
            ((!p->source && !source) || (p->source && source && !strcmp(p->source, source))))
            return p;
    if (!(p = vg_calloc(1, sizeof *p)) || (source && !(p->source = vg_strdup(source)))) {
        vg_free(p);
        VG_FAIL(err, VIGIL_ENOMEM, "out of memory taking notifications");
        return NULL;
    }
    p->origin = origin;
    p->deadline_ms = vg_env_now(w->env) + (origin == VG_ORIGIN_SYNC ? w->cfg.debounce_sync_ms
                                                                    : w->cfg.debounce_local_ms);
    p->next = w->pending;
    w->pending = p;
    return p;
}

vigil_code vg_wake_intake(struct vg_wake *w, const char *const *tokens, size_t n,
                          const char *source, enum vg_batch_origin origin, vigil_error *err)
{
    if (source && !strcmp(source, VG_WAKE_SOURCE_SELF))
        return VIGIL_OK; /* wake bookkeeping never wakes anyone */
    if (!n)
        return VIGIL_OK;
    struct pending *p = window(w, source, origin, err);
    if (!p)
        return VIGIL_ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (push(&p->tokens, &p->n, &p->cap, tokens[i]))
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory taking notifications");
    return VIGIL_OK;
}

void vg_wake_intake_hook(void *user, const char *const *tokens, size_t n)
{
    struct vg_wake *w = user;
    vigil_error err = {0};
    /* Out of memory here loses the tokens; the RESYNC token path of the notifier covers the
     * case where the notifier itself ran out. */
    (void)vg_wake_intake(w, tokens, n, w->env->notify.source, VG_ORIGIN_LOCAL, &err);
}

int64_t vg_wake_intake_deadline(struct vg_wake *w)
{
    int64_t d = -1;
    for (struct pending *p = w->pending; p; p = p->next)
        if (d < 0 || p->deadline_ms < d)
            d = p->deadline_ms;
    return d;
}

static vigil_code flush_one(struct vg_wake *w, struct pending *p, vigil_error *err)
{
    struct vg_wake_batch b;
    struct vg_buf seq;
    vigil_code rc;
    vg_buf_init(&seq, 1 << 20);
    if (p->n_records) { /* durable: the records' ids make the identity stable across restarts */
        for (size_t i = 0; i < p->n_records; i++)
            vg_buf_printf(&seq, "%s%s", i ? "," : "", p->records[i]);
    } else {
        vg_buf_printf(&seq, "%s:%llu", w->instance, (unsigned long long)++w->batch_counter);
    }
    if ((rc = vg_buf_finish(&seq, err))) {
        vg_buf_release(&seq);
        return rc;
    }
    rc = vg_wake_batch_build(&b, (const char *const *)p->tokens, p->n, p->source, seq.data, err);
    vg_buf_release(&seq);
    if (rc)
        return rc;
    b.record_ids = p->records; /* lent for the call */
    b.n_records = p->n_records;
    rc = vg_wake_batch_process(w, &b, NULL, err);
    b.record_ids = NULL;
    b.n_records = 0;
    vg_wake_batch_release(&b);
    return rc;
}

vigil_code vg_wake_intake_flush(struct vg_wake *w, int force, int *n_batches, vigil_error *err)
{
    int64_t now = vg_env_now(w->env);
    int count = 0;
    vigil_code rc = VIGIL_OK;
    struct pending **pp = &w->pending;
    while (*pp) {
        struct pending *p = *pp;
        if (!force && p->deadline_ms > now) {
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        vigil_code r = flush_one(w, p, err);
        pending_free(p);
        if (r && !rc)
            rc = r; /* keep going: one bad batch does not hold back the others */
        count++;
    }
    if (n_batches)
        *n_batches = count;
    return rc;
}

/* ---- durable notifications ------------------------------------------------------------------- */

vigil_code vg_wake_notify_durable(struct vg_env *env, const char *const *tokens, size_t n,
                                  const char *source, vigil_error *err)
{
    char id[37];
    json_t *body = NULL, *toks = NULL;
    vigil_code rc;
    if (!n)
        return VG_FAIL(err, VIGIL_EINVAL, "no notification tokens given");
    for (size_t i = 0; i < n; i++)
        if (!tokens[i] || !*tokens[i] || strlen(tokens[i]) > 190)
            return VG_FAIL(err, VIGIL_EINVAL,
                           "invalid notification token \"%.40s\": use 1 to "
                           "190 bytes",
                           tokens[i] ? tokens[i] : "");
    if (!(toks = vg_wake_json_strings(tokens, n)) ||
        !(body = json_pack("{s:O, s:s?}", "tokens", toks, "source", source))) {
        json_decref(toks);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory recording notifications");
    }
    vg_ids_new(env->ids, id);
    rc = vg_env_put_json(env, "notification", id, "", "pending", source ? source : "",
                         vg_env_now(env), body, 0, err);
    json_decref(body);
    json_decref(toks);
    return rc;
}

struct durable_ctx {
    struct vg_wake *w;
    int limit, taken, skipped;
    vigil_code rc;
    vigil_error *err;
};

static int taken_already(struct vg_wake *w, const char *id)
{
    for (struct pending *p = w->pending; p; p = p->next)
        for (size_t i = 0; i < p->n_records; i++)
            if (!strcmp(p->records[i], id))
                return 1;
    return 0;
}

/* On a server store several daemons serve (PostgreSQL), each notification is taken by one: its
 * k1 moves from "pending" to "taken" (compare and swap), and another daemon's take finds it
 * moved and passes it by; its batch removes it once matched. One left taken by a daemon that
 * died first goes back to pending (vg_wake_untake_stale). *took 0: another daemon has it. */
static vigil_code take_durable(struct vg_wake *w, const struct vg_record *r, int *took,
                               vigil_error *err)
{
    struct vg_record u = *r;
    u.k1 = "taken";
    u.seq = u.at = vg_env_now(w->env);
    vigil_code rc = vg_store_update(w->env->store, &u, r->rev, err);
    *took = rc == VIGIL_OK;
    return rc == VIGIL_ECONFLICT || rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc;
}

static int durable_cb(void *user, const struct vg_record *r)
{
    struct durable_ctx *c = user;
    int took = 1;
    if (taken_already(c->w, r->id))
        return 0;
    if ((c->w->env->store->methods->caps & VG_STORE_CAP_RECONNECTS) &&
        (c->rc = take_durable(c->w, r, &took, c->err)))
        return 1;
    if (!took)
        return 0;
    json_t *b = json_loads(r->body, 0, NULL), *t;
    const char *source = json_string_value(json_object_get(b, "source"));
    size_t i;
    struct pending *p = window(c->w, source, VG_ORIGIN_LOCAL, c->err);
    if (!p || push(&p->records, &p->n_records, &p->cap_records, r->id)) {
        c->rc = VG_FAIL(c->err, VIGIL_ENOMEM, "out of memory taking notifications");
        json_decref(b);
        return 1;
    }
    json_array_foreach (json_object_get(b, "tokens"), i, t)
        if (json_is_string(t) && push(&p->tokens, &p->n, &p->cap, json_string_value(t))) {
            c->rc = VG_FAIL(c->err, VIGIL_ENOMEM, "out of memory taking notifications");
            break;
        }
    json_decref(b);
    return c->rc || ++c->taken >= c->limit;
}

vigil_code vg_wake_intake_durable(struct vg_wake *w, int limit, int *taken, vigil_error *err)
{
    struct durable_ctx c = {.w = w, .limit = limit > 0 ? limit : 1000, .err = err};
    struct vg_query q = {.kind = "notification", .k1 = "pending"};
    vigil_code rc = vg_store_scan(w->env->store, &q, durable_cb, &c, err);
    if (!rc)
        rc = c.rc;
    if (taken)
        *taken = c.taken;
    return rc;
}

vigil_code vg_wake_untake_stale(struct vg_env *env, int64_t older_than_ms, int *n, vigil_error *err)
{
    struct vg_query q = {.kind = "notification",
                         .k1 = "taken",
                         .has_seq_max = 1,
                         .seq_max = older_than_ms,
                         .limit = 1000};
    struct vg_id_list ids = {0};
    int count = 0;
    vigil_code rc = vg_store_scan_ids(env->store, &q, &ids, err);
    for (size_t i = 0; !rc && i < ids.n; i++) {
        struct vg_record *r = NULL;
        if ((rc = vg_store_get_copy(env->store, "notification", ids.ids[i], &r, err))) {
            rc = rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc; /* matched meanwhile */
            continue;
        }
        int64_t rev = r->rev;
        r->k1 = "pending";
        r->seq = r->at = vg_env_now(env);
        rc = vg_store_update(env->store, r, rev, err);
        count += rc == VIGIL_OK;
        if (rc == VIGIL_ECONFLICT || rc == VIGIL_ENOTFOUND)
            rc = VIGIL_OK;
        vg_free(r);
    }
    vg_id_list_release(&ids);
    if (!rc && n)
        *n = count;
    return rc;
}

/* ---- pruning --------------------------------------------------------------------------------- */

vigil_code vg_wake_prune_batches(struct vg_env *env, int64_t older_than_ms, int limit, int *n,
                                 vigil_error *err)
{
    struct vg_query q = {.kind = "wake_batch",
                         .has_seq_max = 1,
                         .seq_max = older_than_ms,
                         .limit = limit > 0 ? limit : 1000};
    struct vg_id_list ids = {0};
    int count = 0;
    vigil_code rc = vg_store_scan_ids(env->store, &q, &ids, err);
    if (!rc && ids.n && !(rc = vg_store_begin(env->store, err))) {
        for (size_t i = 0; !rc && i < ids.n; i++) {
            rc = vg_store_remove(env->store, "wake_batch", ids.ids[i], err);
            if (rc == VIGIL_ENOTFOUND)
                rc = VIGIL_OK;
            else if (!rc)
                count++;
        }
        rc = vg_store_end(env->store, rc, err);
    }
    vg_id_list_release(&ids);
    if (!rc && n)
        *n = count;
    return rc;
}
