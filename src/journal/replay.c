/*
 * replay.c: rebuilding a run from its journal records alone. Records are read in sequence
 * order, each is validated by the registry and folded through the same function the live
 * writer uses, so the replayed projection must equal the stored live one byte for byte. Also
 * here: pruning old activity.updated records (replay keeps only the latest one, so pruning
 * changes nothing it reports) and rebuilding a run's derived records after an import.
 */
#include "base/common.h"

#include "journal/journal_int.h"
#include "os/clock.h"
#include "os/ids.h"
#include "store/store.h"

struct load_ctx {
    struct vg_store *store;
    json_t *arr;
    int bad; /* a body that is not JSON */
    int oom;
    vigil_code follow_rc; /* following a stored output's name (output_ref.c) */
    vigil_error follow_err;
};

static int load_cb(void *user, const struct vg_record *r)
{
    struct load_ctx *c = user;
    json_error_t je;
    json_t *v = vg_jload(r->body, strlen(r->body), JSON_REJECT_DUPLICATES, &je);
    if (!v) {
        if (vg_json_oom(&je))
            c->oom = 1;
        else
            c->bad = 1;
        return 1;
    }
    if ((c->follow_rc = vg_journal_follow_output(c->store, v, &c->follow_err))) {
        json_decref(v);
        return 1;
    }
    if (json_array_append_new(c->arr, v)) {
        c->oom = 1;
        return 1;
    }
    return 0;
}

vigil_code vg_journal_run_owner(struct vg_store *s, const char *run_id, char **owner,
                                vigil_error *err)
{
    static const char *const kinds[] = {RUN_KIND, PROJECTION_KIND};
    *owner = NULL;
    for (size_t i = 0; i < VG_ARRAY_LEN(kinds); i++) {
        struct vg_record *r = NULL;
        vigil_code rc = vg_store_get_copy(s, kinds[i], run_id, &r, err);
        if (rc == VIGIL_ENOTFOUND)
            continue;
        if (rc)
            return rc;
        *owner = vg_strdup(r->owner);
        vg_free(r);
        return *owner ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a run");
    }
    return VIGIL_OK;
}

vigil_code vg_journal_load(struct vg_store *s, const char *owner, const char *run_id, json_t **out,
                           vigil_error *err)
{
    struct load_ctx c = {.store = s, .arr = json_array()};
    if (!c.arr)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a journal");
    struct vg_query q = {.kind = JOURNAL_KIND, .owner = owner, .k1 = run_id};
    vigil_code rc = vg_journal_scan(s, &q, load_cb, &c, err);
    if (rc == VIGIL_OK && c.follow_rc) {
        rc = c.follow_rc;
        if (err)
            *err = c.follow_err;
    }
    if (rc == VIGIL_OK && c.bad)
        rc = VG_FAIL(err, VIGIL_ECORRUPT, "a stored journal record of run \"%s\" is not JSON",
                     run_id);
    if (rc == VIGIL_OK && c.oom)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a journal");
    if (rc) {
        json_decref(c.arr);
        return rc;
    }
    *out = c.arr;
    return VIGIL_OK;
}

static int count_cb(void *user, const struct vg_record *r)
{
    json_t *b = vg_jload(r->body, strlen(r->body), 0, NULL);
    *(int64_t *)user = vg_jint(b, "count");
    json_decref(b);
    return 0;
}

/* How many activity records of the run were pruned (gaps replay accepts). */
static vigil_code pruned_count(struct vg_store *s, const char *run_id, int64_t *out,
                               vigil_error *err)
{
    char key[200];
    snprintf(key, sizeof key, "%s:pruned", run_id);
    *out = 0;
    vigil_code rc = vg_store_get(s, KEY_KIND, key, count_cb, out, NULL);
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK;
    if (rc)
        return vg_store_get(s, KEY_KIND, key, count_cb, out, err);
    return VIGIL_OK;
}

/*
 * Fold records (an array) from an empty projection with clean-slate validation. gaps_allowed:
 * how many missing sequence numbers are tolerated (pruned activity records); *gaps gets the
 * count found. On success f->proj is set (owned by f).
 */
static vigil_code fold_all(struct fold *f, const json_t *records, int64_t gaps_allowed,
                           int64_t *gaps, vigil_error *err)
{
    size_t i;
    json_t *rec;
    int64_t g = 0;
    f->proj = vg_journal_proj_new();
    if (!f->proj)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory replaying");
    json_array_foreach (records, i, rec) {
        vigil_code rc = vg_journal_validate(rec, err);
        if (rc == VIGIL_OK) {
            int64_t last = vg_jint(f->proj, "last_sequence"), seq = vg_jint(rec, "sequence");
            if (seq > last + 1)
                g += seq - last - 1;
            if (g > gaps_allowed)
                rc =
                    VG_FAIL(err, VIGIL_EINVAL, "sequence gap before sequence %lld", (long long)seq);
        }
        if (rc == VIGIL_OK)
            rc = vg_journal_fold(f, rec, err);
        if (rc) {
            char why[256];
            snprintf(why, sizeof why, "%s", err ? err->message : "");
            return VG_FAIL(err, rc, "invalid journal record %zu: %s", i + 1, why);
        }
    }
    if (json_array_size(records) == 0)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "the journal has no records");
    if (gaps)
        *gaps = g;
    return VIGIL_OK;
}

static void fold_release(struct fold *f)
{
    json_decref(f->proj);
    json_decref(f->full_messages);
    json_decref(f->full_observations);
    json_decref(f->full_timeline);
    memset(f, 0, sizeof *f);
}

static int text_cb(void *user, const struct vg_record *r)
{
    *(char **)user = vg_strdup(r->body);
    return 0;
}

vigil_code vg_journal_stored_projection(struct vg_store *store, const char *run_id, char **out,
                                        vigil_error *err)
{
    char *text = NULL;
    vg_alloc_install_json();
    if (!run_id || !vg_id_valid(run_id))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid run id \"%.60s\"", run_id ? run_id : "");
    vigil_code rc = vg_store_get(store, PROJECTION_KIND, run_id, text_cb, &text, NULL);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "run \"%s\" not found", run_id);
    if (rc)
        return vg_store_get(store, PROJECTION_KIND, run_id, text_cb, &text, err);
    if (!text)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a projection");
    *out = text;
    return VIGIL_OK;
}

/* Replay a run into f (with the full lists); *count gets the record count. */
static vigil_code replay_fold(struct vg_store *store, const char *run_id, struct fold *f,
                              size_t *count, vigil_error *err)
{
    json_t *records = NULL;
    int64_t allowed = 0;
    vigil_code rc;
    vg_alloc_install_json();
    if (!run_id || !vg_id_valid(run_id))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid run id \"%.60s\"", run_id ? run_id : "");
    char *owner = NULL;
    if ((rc = pruned_count(store, run_id, &allowed, err)) ||
        (rc = vg_journal_run_owner(store, run_id, &owner, err)))
        return rc;
    rc = vg_journal_load(store, owner, run_id, &records, err);
    vg_free(owner);
    if (rc)
        return rc;
    if (json_array_size(records) == 0) {
        json_decref(records);
        return VG_FAIL(err, VIGIL_ENOTFOUND, "run \"%s\" not found", run_id);
    }
    f->full_messages = json_array();
    f->full_observations = json_array();
    f->full_timeline = json_array();
    if (!f->full_messages || !f->full_observations || !f->full_timeline)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory replaying");
    else
        rc = fold_all(f, records, allowed, NULL, err);
    if (count)
        *count = json_array_size(records);
    json_decref(records);
    return rc;
}

vigil_code vg_journal_replay_projection(struct vg_store *store, const char *run_id, char **out,
                                        vigil_error *err)
{
    struct fold f = {0};
    vigil_code rc = replay_fold(store, run_id, &f, NULL, err);
    if (rc == VIGIL_OK) {
        char *text = vg_journal_canonical(f.proj);
        if (!text)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory encoding a projection");
        else
            *out = text;
    }
    fold_release(&f);
    return rc;
}

/* A run whose trace was pruned (prune.c) keeps what its state comes from: its replay must give
 * the stored projection's lifecycle, attention and input request (requirement S1-036). */
static int state_matches(const char *stored, const json_t *proj)
{
    static const char *const fields[] = {"lifecycle", "attention", "current_input_request_id"};
    json_t *s = stored ? vg_jload(stored, strlen(stored), 0, NULL) : NULL;
    int same = s != NULL;
    for (size_t i = 0; same && i < VG_ARRAY_LEN(fields); i++) {
        const json_t *a = json_object_get(s, fields[i]), *b = json_object_get(proj, fields[i]);
        same = a == b || json_equal(a, b);
    }
    json_decref(s);
    return same;
}

/* Whether the stored projection text is the replayed one: byte for byte, or, where they differ,
 * as values. A projection stored before session 37 has its reals (tool arguments) as %.17g,
 * 0.80000000000000004, which reads as the same double the canonical writer now writes 0.8. */
static int same_projection(const char *stored, const char *mine, const json_t *proj)
{
    if (!stored || !mine)
        return 0;
    if (!strcmp(stored, mine))
        return 1;
    json_t *s = vg_jload(stored, strlen(stored), 0, NULL);
    int same = s && json_equal(s, proj);
    json_decref(s);
    return same;
}

/* Where the stored projection and the replayed one part: one {field, stored, replayed} per
 * field whose values differ (a field one side lacks is null there), in the replay's field
 * order, then the stored projection's other fields. With the trace pruned only the state fields
 * state_matches compares are looked at. An operator reads what to look into, not just "differs".
 * NULL on out of memory. */
static json_t *differences(const char *stored, const json_t *proj, int pruned)
{
    static const char *const state_fields[] = {"lifecycle", "attention",
                                               "current_input_request_id"};
    json_t *s = stored ? vg_jload(stored, strlen(stored), 0, NULL) : NULL;
    json_t *out = json_array(), *fields = json_array(), *v;
    const char *key;
    if (pruned) {
        for (size_t i = 0; i < VG_ARRAY_LEN(state_fields); i++)
            json_array_append_new(fields, json_string(state_fields[i]));
    } else {
        json_object_foreach ((json_t *)proj, key, v)
            json_array_append_new(fields, json_string(key));
        json_object_foreach (s, key, v)
            if (!json_object_get(proj, key))
                json_array_append_new(fields, json_string(key));
    }
    size_t i;
    json_array_foreach (fields, i, v) {
        const char *f = json_string_value(v);
        json_t *a = json_object_get(s, f), *b = json_object_get(proj, f);
        if (out && f && !(a == b || (a && b && json_equal(a, b))) &&
            json_array_append_new(
                out, json_pack("{s:s, s:O?, s:O?}", "field", f, "stored", a, "replayed", b))) {
            json_decref(out);
            out = NULL;
        }
    }
    json_decref(fields);
    json_decref(s);
    return out;
}

vigil_code vg_journal_replay(struct vg_store *store, const char *run_id, char **out_json,
                             vigil_error *err)
{
    struct fold f = {0};
    size_t count = 0;
    char *stored = NULL, *mine = NULL, *text = NULL;
    json_t *o = NULL;
    vigil_code rc = replay_fold(store, run_id, &f, &count, err);
    if (rc)
        goto out;
    rc = vg_journal_stored_projection(store, run_id, &stored, NULL);
    if (rc != VIGIL_OK && rc != VIGIL_ENOTFOUND) {
        rc = vg_journal_stored_projection(store, run_id, &stored, err);
        goto out;
    }
    int64_t pruned_at = 0, pruned_n = 0;
    if ((rc = vg_journal_trace_pruned(store, run_id, &pruned_at, &pruned_n, err)))
        goto out;
    mine = vg_journal_canonical(f.proj);
    int match = pruned_at ? state_matches(stored, f.proj) : same_projection(stored, mine, f.proj);
    o = json_pack("{s:O,s:O,s:O,s:O,s:I,s:b,s:b}", "projection", f.proj, "processed_message_ids",
                  f.full_messages, "processed_observation_ids", f.full_observations, "timeline",
                  f.full_timeline, "record_count", (json_int_t)count, "stored_projection_found",
                  stored != NULL, "stored_projection_matches", match);
    /* A stored projection that differs names its differences; none stored says just that. */
    if (o && stored && !match &&
        json_object_set_new(o, "differences", differences(stored, f.proj, pruned_at != 0))) {
        json_decref(o);
        o = NULL;
    }
    if (o && pruned_at)
        json_object_set_new(o, "trace_pruned",
                            json_pack("{s:I,s:I}", "at_ms", (json_int_t)pruned_at, "records",
                                      (json_int_t)pruned_n));
    text = o ? vg_journal_canonical(o) : NULL;
    if (!mine || !text) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory encoding a replay");
        goto out;
    }
    *out_json = text;
    text = NULL;
    rc = VIGIL_OK;
out:
    vg_free(stored);
    vg_free(mine);
    vg_free(text);
    json_decref(o);
    fold_release(&f);
    return rc;
}

/* ---- pruning ------------------------------------------------------------------------------- */

struct prune_ctx {
    int keep;
    int seen;
    int oom;
    json_t *ids;
};

/* A tool call's records are the call (tool_calls.c): its start holds its input, its end the
 * output (also for its row, in a store written before Session 29). */
static int has_a_tool_call(const struct vg_record *r)
{
    if (!strstr(r->body, "\"tool_call\":{"))
        return 0;
    json_t *b = vg_jload(r->body, strlen(r->body), 0, NULL);
    int has = vg_jstr(json_object_get(b, "tool_call"), "tool_call_id") != NULL;
    json_decref(b);
    return has;
}

static int prune_cb(void *user, const struct vg_record *r)
{
    struct prune_ctx *c = user;
    if (c->seen++ < c->keep || has_a_tool_call(r))
        return 0;
    if (json_array_append_new(c->ids, json_string(r->id))) {
        c->oom = 1;
        return 1;
    }
    return 0;
}

static int no_row_cb(void *user, const struct vg_record *r)
{
    (void)r;
    *(int *)user = 0;
    return 1;
}

/* Remove one record: its row, or a model call kept in its thought message (ends.c). */
static vigil_code prune_one(struct vg_store *store, const char *id, vigil_error *err)
{
    int kept = 1;
    vigil_error e = {0};
    vigil_code rc = vg_store_get(store, JOURNAL_KIND, id, no_row_cb, &kept, &e);
    if (rc && rc != VIGIL_ENOTFOUND) {
        if (err)
            *err = e;
        return rc;
    }
    return kept ? vg_journal_kept_drop(store, id, err)
                : vg_store_remove(store, JOURNAL_KIND, id, err);
}

vigil_code vg_journal_prune_activity(struct vg_store *store, const char *run_id, int keep_last_n,
                                     int64_t *removed, vigil_error *err)
{
    vg_alloc_install_json();
    if (keep_last_n < 1)
        return VG_FAIL(err, VIGIL_EINVAL, "pruning keeps at least the latest activity record");
    if (!run_id || !vg_id_valid(run_id))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid run id \"%.60s\"", run_id ? run_id : "");
    struct prune_ctx c = {.keep = keep_last_n, .ids = json_array()};
    if (!c.ids)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory pruning");
    int64_t before = 0;
    char key[200], *text = NULL;
    snprintf(key, sizeof key, "%s:pruned", run_id);
    char *owner = NULL;
    vigil_code rc = vg_store_begin(store, err);
    if (rc)
        goto out;
    rc = vg_journal_run_owner(store, run_id, &owner, err);
    struct vg_query q = {.kind = JOURNAL_KIND,
                         .owner = owner,
                         .k1 = run_id,
                         .k2 = "activity.updated",
                         .descending = 1};
    if (rc == VIGIL_OK)
        rc = vg_journal_scan(store, &q, prune_cb, &c, err);
    if (rc == VIGIL_OK && c.oom)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory pruning");
    size_t i;
    json_t *id;
    json_array_foreach (c.ids, i, id) {
        if (rc)
            break;
        rc = prune_one(store, json_string_value(id), err);
    }
    if (rc == VIGIL_OK && json_array_size(c.ids) > 0) {
        struct vg_record *old = NULL;
        rc = vg_store_get_copy(store, KEY_KIND, key, &old, NULL);
        if (rc == VIGIL_OK || rc == VIGIL_ENOTFOUND) {
            json_t *b = old ? vg_jload(old->body, strlen(old->body), 0, NULL) : NULL;
            before = vg_jint(b, "count");
            json_decref(b);
            json_t *nb =
                json_pack("{s:I}", "count", (json_int_t)(before + (int64_t)json_array_size(c.ids)));
            text = nb ? vg_journal_canonical(nb) : NULL;
            json_decref(nb);
            if (!text) {
                rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory pruning");
            } else {
                struct vg_record r = {.kind = KEY_KIND,
                                      .id = key,
                                      .owner = "",
                                      .k1 = run_id,
                                      .k2 = "",
                                      .seq = 0,
                                      .at = 0,
                                      .body = text};
                if (old) {
                    r.owner = old->owner;
                    r.at = old->at;
                    rc = vg_store_update(store, &r, old->rev, err);
                } else {
                    rc = vg_store_put(store, &r, 0, NULL, err);
                }
            }
        } else {
            rc = vg_store_get_copy(store, KEY_KIND, key, &old, err);
        }
        vg_free(old);
    }
    rc = vg_store_end(store, rc, err);
    if (rc == VIGIL_OK && removed)
        *removed = (int64_t)json_array_size(c.ids);
out:
    vg_free(owner);
    vg_free(text);
    json_decref(c.ids);
    return rc;
}

/* ---- derived records after import ---------------------------------------------------------- */

json_t *vg_journal_run_body_from_projection(const json_t *proj)
{
    const json_t *la = json_object_get(proj, "latest_activity");
    const json_t *t = json_object_get(la, "telemetry");
    json_t *b = json_pack(
        "{s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:{s:I,s:I,s:I},s:I,"
        "s:I,s:I}",
        "run_id", json_object_get(proj, "run_id"), "agent_id", json_object_get(proj, "agent_id"),
        "scope", json_object_get(proj, "scope"), "run_key", json_object_get(proj, "run_key"),
        "wake_reason", json_object_get(proj, "wake_reason"), "status",
        json_object_get(proj, "lifecycle"), "started_at", json_object_get(proj, "started_at"),
        "ended_at", json_object_get(proj, "ended_at"), "summary", json_object_get(proj, "summary"),
        "error", json_object_get(proj, "error"), "model", json_object_get(proj, "model"), "usage",
        "input_tokens", (json_int_t)vg_jint(t, "input_tokens"), "output_tokens",
        (json_int_t)vg_jint(t, "output_tokens"), "cached_tokens",
        (json_int_t)vg_jint(t, "cached_tokens"), "cost_micros",
        (json_int_t)vg_jint(t, "cost_micros"), "model_calls", (json_int_t)vg_jint(t, "model_calls"),
        "tool_calls", (json_int_t)vg_jint(t, "tool_calls"));
    if (!b)
        return NULL;
    if (json_is_null(json_object_get(b, "model")))
        json_object_del(b, "model");
    if ((vg_jstr(proj, "thread_id") && vg_jset_str(b, "thread_id", vg_jstr(proj, "thread_id"))) ||
        (vg_jstr(proj, "parent_run_id") &&
         vg_jset_str(b, "parent_run_id", vg_jstr(proj, "parent_run_id")))) {
        json_decref(b);
        return NULL;
    }
    return b;
}

static vigil_code put_json(struct vg_store *s, const char *kind, const char *id, const char *owner,
                           const char *k1, const char *k2, int64_t seq, int64_t at,
                           const json_t *body, vigil_error *err)
{
    char *text = vg_journal_canonical(body);
    if (!text)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory encoding a %s record", kind);
    struct vg_record r = {.kind = kind,
                          .id = id,
                          .owner = owner,
                          .k1 = k1 ? k1 : "",
                          .k2 = k2 ? k2 : "",
                          .seq = seq,
                          .at = at,
                          .body = text};
    vigil_code rc = vg_store_put(s, &r, VG_PUT_IF_ABSENT, NULL, err);
    vg_free(text);
    return rc;
}

/* Whether a run's calls are stored as rows: exported by a version that wrote a row per call,
 * whose start records have ids of their own (or were pruned). Since Session 29 a call's start
 * record has the call's id, and its calls are read from the records (tool_calls.c). */
static int calls_as_rows(const json_t *records)
{
    size_t i;
    json_t *rec;
    json_t *seen = json_object();
    int rows = !seen;
    json_array_foreach (records, i, rec) {
        const json_t *tc = json_object_get(rec, "tool_call");
        const char *id = vg_jstr(tc, "tool_call_id"), *status = vg_jstr(tc, "status");
        if (!id || !status)
            continue;
        if (!strcmp(status, "running"))
            rows |= strcmp(id, vg_jstr(rec, "record_id") ? vg_jstr(rec, "record_id") : "") ||
                    json_object_set_new(seen, id, json_true());
        else
            rows |= !json_object_get(seen, id); /* its start pruned */
    }
    json_decref(seen);
    return rows;
}

/* Tool call rows from the retained activity records (started, then finished), for a run
 * whose calls were stored as rows. */
static vigil_code rebuild_tools(struct vg_store *s, const char *owner, const char *run_id,
                                const json_t *records, int64_t now, vigil_error *err)
{
    size_t i;
    json_t *rec;
    vigil_code rc = VIGIL_OK;
    if (!calls_as_rows(records))
        return VIGIL_OK;
    json_t *calls = json_object();
    if (!calls)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory rebuilding tool calls");
    json_array_foreach (records, i, rec) {
        if (vg_journal_call_fold(calls, rec, run_id)) {
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory rebuilding tool calls");
            break;
        }
    }
    const char *id;
    json_t *b;
    json_object_foreach (calls, id, b) {
        if (rc)
            break;
        int64_t seq = vg_jint(b, "started_sequence");
        if (!seq)
            seq = vg_jint(b, "finished_sequence");
        if (strcmp(vg_jstr(b, "status"), "running") != 0) /* as journal.c stores it */
            json_object_del(b, "output");
        rc = put_json(s, TOOL_KIND, id, owner, run_id, vg_jstr(b, "status"), seq, now, b, err);
    }
    json_decref(calls);
    return rc;
}

vigil_code vg_journal_rebuild_run(struct vg_store *s, const char *owner_id, const char *run_id,
                                  vigil_error *err)
{
    json_t *records = NULL, *body = NULL;
    struct fold f = {0};
    int64_t gaps = 0, started = 0;
    vigil_code rc = vg_journal_load(s, owner_id, run_id, &records, err);
    if (rc)
        return rc;
    if ((rc = fold_all(&f, records, INT64_MAX, &gaps, err)))
        goto out;
    const char *owner = vg_jstr(f.proj, "agent_id");
    const char *at = vg_jstr(f.proj, "started_at");
    if (!at || vg_time_parse_ms(at, &started) != 0) {
        rc = VG_FAIL(err, VIGIL_EINVAL, "run \"%s\" has no start time", run_id);
        goto out;
    }
    body = vg_journal_run_body_from_projection(f.proj);
    if (!body) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory rebuilding a run");
        goto out;
    }
    rc = put_json(s, RUN_KIND, run_id, owner, vg_jstr(body, "status"), "", started, started, body,
                  err);
    if (rc == VIGIL_OK && vg_jstr(body, "parent_run_id")) {
        json_t *lb = json_pack("{s:s,s:s}", "run_id", run_id, "parent_run_id",
                               vg_jstr(body, "parent_run_id"));
        rc = lb ? put_json(s, LINK_KIND, run_id, owner, vg_jstr(body, "parent_run_id"), "", started,
                           started, lb, err)
                : VG_FAIL(err, VIGIL_ENOMEM, "out of memory rebuilding a run");
        json_decref(lb);
    }
    if (rc == VIGIL_OK)
        rc = put_json(s, PROJECTION_KIND, run_id, owner, run_id, "", 0, started, f.proj, err);
    if (rc == VIGIL_OK && gaps > 0) {
        char key[200];
        snprintf(key, sizeof key, "%s:pruned", run_id);
        json_t *kb = json_pack("{s:I}", "count", (json_int_t)gaps);
        rc = kb ? put_json(s, KEY_KIND, key, owner, run_id, "", 0, started, kb, err)
                : VG_FAIL(err, VIGIL_ENOMEM, "out of memory rebuilding a run");
        json_decref(kb);
    }
    /* Idempotency keys, so a duplicate after import is still acknowledged. */
    size_t i;
    json_t *rec;
    json_array_foreach (records, i, rec) {
        if (rc)
            break;
        const char *type = vg_jstr(rec, "type");
        const char *mid = NULL, *tag = NULL;
        if (strcmp(type, "message.accepted") == 0) {
            mid = vg_jstr(rec, "message_id");
            tag = "msg";
        } else if (strcmp(type, "observation.recorded") == 0) {
            mid = vg_jstr(rec, "observation_id");
            tag = "obs";
        }
        if (!mid)
            continue;
        char key[200];
        snprintf(key, sizeof key, "%s:%s:%s", run_id, tag, mid);
        json_t *kb = json_pack("{s:O,s:O}", "record_id", json_object_get(rec, "record_id"),
                               "sequence", json_object_get(rec, "sequence"));
        rc = kb ? put_json(s, KEY_KIND, key, owner, run_id, "", vg_jint(rec, "sequence"), started,
                           kb, err)
                : VG_FAIL(err, VIGIL_ENOMEM, "out of memory rebuilding a run");
        json_decref(kb);
    }
    if (rc == VIGIL_OK)
        rc = rebuild_tools(s, owner, run_id, records, started, err);
out:
    json_decref(body);
    json_decref(records);
    fold_release(&f);
    return rc;
}
