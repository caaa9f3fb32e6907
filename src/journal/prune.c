/*
 * prune.c: the trace of a finished run given up to retention (docs/storage.md, "Growth and
 * retention"). What a run's replayed lifecycle, attention and input request come from stays:
 * its journal.header, its state.changed records and its tool calls (their records are where
 * `runs tools` reads a call). What goes is the rest of the trace: accepted messages and their
 * deliveries, activity and telemetry updates, observations, decisions, model-call traces, and
 * the run's idempotency keys (a finished run takes no more input), and from its stored
 * projection the timeline and the processed ids that only those records made. A marker says
 * when and how much, so the run reads as pruned, not as a journal with holes.
 */
#include "base/common.h"

#include "journal/journal_int.h"
#include "os/ids.h"
#include "store/store.h"

struct trace_ctx {
    json_t *ids;
    int64_t bytes;
    int oom;
};

/* The records replay needs for the run's lifecycle, attention and input request. */
static int kept_by_trace_prune(const struct vg_record *r)
{
    if (!strcmp(r->k2, "journal.header") || !strcmp(r->k2, "state.changed"))
        return 1;
    return strstr(r->body, "\"tool_call\":{") != NULL;
}

/* The counters this module keeps (`RUN:pruned`, `RUN:trace_pruned`) stay. */
static int is_counter(const char *id)
{
    size_t n = strlen(id);
    return (n > 7 && !strcmp(id + n - 7, ":pruned")) ||
           (n > 13 && !strcmp(id + n - 13, ":trace_pruned"));
}

static int trace_cb(void *user, const struct vg_record *r)
{
    struct trace_ctx *c = user;
    if (!strcmp(r->kind, JOURNAL_KIND) ? kept_by_trace_prune(r) : is_counter(r->id))
        return 0;
    c->bytes += (int64_t)(strlen(r->body) + strlen(r->id) + strlen(r->k1) + strlen(r->k2));
    if (json_array_append_new(c->ids, json_pack("[ss]", r->kind, r->id))) {
        c->oom = 1;
        return 1;
    }
    return 0;
}

static vigil_code trace_marker_key(const char *run_id, char *key, size_t n)
{
    snprintf(key, n, "%s:trace_pruned", run_id);
    return VIGIL_OK;
}

vigil_code vg_journal_trace_pruned(struct vg_store *store, const char *run_id, int64_t *at_ms,
                                   int64_t *records, vigil_error *err)
{
    char key[200];
    struct vg_record *r = NULL;
    trace_marker_key(run_id, key, sizeof key);
    *at_ms = 0;
    if (records)
        *records = 0;
    vigil_code rc = vg_store_get_copy(store, KEY_KIND, key, &r, NULL);
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK;
    if (rc)
        return vg_store_get_copy(store, KEY_KIND, key, &r, err);
    json_t *b = vg_jload(r->body, strlen(r->body), 0, NULL);
    *at_ms = vg_jint(b, "at");
    if (records)
        *records = vg_jint(b, "count");
    json_decref(b);
    vg_free(r);
    return VIGIL_OK;
}

/* Add n to a counter record of the run (its pruned-activity count, its trace marker). */
static vigil_code bump_key(struct vg_store *s, const char *key, const char *owner,
                           const char *run_id, int64_t n, int64_t at_ms, vigil_error *err)
{
    struct vg_record *old = NULL;
    vigil_code rc = vg_store_get_copy(s, KEY_KIND, key, &old, NULL);
    if (rc && rc != VIGIL_ENOTFOUND)
        return vg_store_get_copy(s, KEY_KIND, key, &old, err);
    json_t *b = old ? vg_jload(old->body, strlen(old->body), 0, NULL) : NULL;
    json_t *nb = at_ms ? json_pack("{s:I,s:I}", "at", (json_int_t)at_ms, "count",
                                   (json_int_t)(vg_jint(b, "count") + n))
                       : json_pack("{s:I}", "count", (json_int_t)(vg_jint(b, "count") + n));
    json_decref(b);
    char *text = nb ? vg_journal_canonical(nb) : NULL;
    json_decref(nb);
    struct vg_record r = {.kind = KEY_KIND,
                          .id = key,
                          .owner = old ? old->owner : owner,
                          .k1 = run_id,
                          .k2 = "",
                          .at = old ? old->at : at_ms,
                          .body = text};
    if (!text)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory pruning");
    else
        rc = old ? vg_store_update(s, &r, old->rev, err) : vg_store_put(s, &r, 0, NULL, err);
    vg_free(text);
    vg_free(old);
    return rc;
}

/* The rows to remove: journal records but the kept ones, and the run's idempotency keys. */
static vigil_code trace_rows(struct vg_store *s, const char *owner, const char *run_id,
                             struct trace_ctx *c, vigil_error *err)
{
    struct vg_query q = {.kind = JOURNAL_KIND, .owner = owner, .k1 = run_id};
    vigil_code rc = vg_store_scan(s, &q, trace_cb, c, err);
    struct vg_query keys = {.kind = KEY_KIND, .owner = owner, .k1 = run_id};
    if (!rc)
        rc = vg_store_scan(s, &keys, trace_cb, c, err);
    if (!rc && c->oom)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory pruning");
    return rc;
}

/* Remove the listed rows; the count of journal records among them. */
static int64_t remove_rows(struct vg_store *s, const json_t *ids, vigil_code *rc, vigil_error *err)
{
    size_t i;
    json_t *pair;
    int64_t journal_rows = 0;
    json_array_foreach (ids, i, pair) {
        const char *kind = json_string_value(json_array_get(pair, 0));
        const char *id = json_string_value(json_array_get(pair, 1));
        if ((*rc = vg_store_remove(s, kind, id, err)))
            return journal_rows;
        journal_rows += !strcmp(kind, JOURNAL_KIND);
    }
    return journal_rows;
}

/* The run's stored projection without what only the pruned records made: the timeline and the
 * ids of the processed messages and observations. *saved: the bytes that go. */
static vigil_code slim_projection(struct vg_store *s, const char *run_id, int dry_run,
                                  int64_t *saved, vigil_error *err)
{
    static const char *const details[] = {"timeline", "processed_messages",
                                          "processed_observations"};
    struct vg_record *old = NULL;
    *saved = 0;
    vigil_code rc = vg_store_get_copy(s, PROJECTION_KIND, run_id, &old, NULL);
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK;
    if (rc)
        return vg_store_get_copy(s, PROJECTION_KIND, run_id, &old, err);
    json_t *p = vg_jload(old->body, strlen(old->body), 0, NULL);
    for (size_t i = 0; p && i < VG_ARRAY_LEN(details); i++)
        json_object_del(p, details[i]);
    char *text = p ? vg_journal_canonical(p) : NULL;
    json_decref(p);
    if (!text)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory pruning");
    else
        *saved = (int64_t)strlen(old->body) - (int64_t)strlen(text);
    if (!rc && !dry_run && *saved > 0) {
        struct vg_record r = *old;
        r.body = text;
        rc = vg_store_update(s, &r, old->rev, err);
    }
    vg_free(text);
    vg_free(old);
    return rc;
}

vigil_code vg_journal_prune_trace(struct vg_store *store, const char *run_id, int64_t at_ms,
                                  int dry_run, int64_t *removed, int64_t *bytes, vigil_error *err)
{
    vg_alloc_install_json();
    if (!run_id || !vg_id_valid(run_id))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid run id \"%.60s\"", run_id ? run_id : "");
    struct trace_ctx c = {.ids = json_array()};
    char *owner = NULL, key[200];
    if (!c.ids)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory pruning");
    vigil_code rc = vg_store_begin(store, err);
    if (!rc && !(rc = vg_journal_run_owner(store, run_id, &owner, err)) && !owner)
        rc = VG_FAIL(err, VIGIL_ENOTFOUND, "run \"%s\" not found", run_id);
    if (!rc)
        rc = trace_rows(store, owner, run_id, &c, err);
    int64_t journal_rows = 0, saved = 0;
    if (!rc)
        rc = slim_projection(store, run_id, dry_run, &saved, err);
    c.bytes += saved;
    if (!rc && !dry_run && json_array_size(c.ids) > 0) {
        journal_rows = remove_rows(store, c.ids, &rc, err);
        snprintf(key, sizeof key, "%s:pruned", run_id);
        if (!rc && journal_rows)
            rc = bump_key(store, key, owner, run_id, journal_rows, 0, err);
        trace_marker_key(run_id, key, sizeof key);
        if (!rc)
            rc = bump_key(store, key, owner, run_id, journal_rows, at_ms, err);
    }
    rc = vg_store_end(store, rc, err);
    if (!rc && removed)
        *removed = (int64_t)json_array_size(c.ids);
    if (!rc && bytes)
        *bytes = c.bytes;
    vg_free(owner);
    json_decref(c.ids);
    return rc;
}
