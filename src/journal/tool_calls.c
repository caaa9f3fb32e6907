/*
 * tool_calls.c: a run's tool calls read from its journal records. A call is two activity
 * records, its start (`tool_call.status` "running", whose record id is the call's id) and its
 * end (the final status, paired by `tool_call_id`); a row of kind run_tool_call repeated both
 * (264 bytes and an insert and an update a tool step: docs/internals/PERF.md, Session 28), and
 * is written no more. Stores written before keep their rows, and a run that has rows is read
 * from them, so it reads as it did (docs/internals/JOURNAL.md, "Tool calls").
 */
#include "base/common.h"

#include "base/jscan.h"
#include "journal/journal_int.h"
#include "store/store.h"

/* The fields of a call's row as journal.c wrote them, nulls where the call has not got so far. */
static json_t *call_row_new(const char *id, const char *run_id, const json_t *tc)
{
    return json_pack("{s:s,s:s,s:O,s:s,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n}", "tool_call_id", id,
                     "run_id", run_id, "name", json_object_get(tc, "name"), "status", "running",
                     "operation_id", "input", "output", "error_code", "duration_ms", "started_at",
                     "ended_at", "started_sequence", "finished_sequence");
}

int vg_journal_call_fold(json_t *calls, const json_t *rec, const char *run_id)
{
    const json_t *tc = json_object_get(rec, "tool_call");
    const char *id = vg_jstr(tc, "tool_call_id"), *status = vg_jstr(tc, "status");
    if (!id || !status)
        return 0;
    json_t *b = json_object_get(calls, id);
    int start = strcmp(status, "running") == 0;
    if (!b && (!(b = call_row_new(id, run_id, tc)) || json_object_set_new(calls, id, b)))
        return -1;
    static const char *const keys[] = {"status",     "operation_id", "input", "output",
                                       "error_code", "duration_ms",  "via"};
    int bad = 0;
    for (size_t k = 0; k < VG_ARRAY_LEN(keys); k++)
        if (json_object_get(tc, keys[k]))
            bad |= json_object_set(b, keys[k], json_object_get(tc, keys[k]));
    bad |=
        json_object_set(b, start ? "started_at" : "ended_at", json_object_get(rec, "occurred_at"));
    bad |= json_object_set(b, start ? "started_sequence" : "finished_sequence",
                           json_object_get(rec, "sequence"));
    return bad ? -1 : 0;
}

/* ---- a run's calls from its records --------------------------------------------------------- */

struct derive {
    struct vg_store *store;
    const char *run_id;
    struct vg_calls_want want;
    json_t *calls; /* tool_call_id -> row body, in order of start */
    json_t *first; /* the first want.max calls started, while any of them runs */
    int started;   /* calls started */
    int running;   /* of the first want.max, those not ended yet */
    vigil_code rc;
    vigil_error err;
};

/* Whether the record (a call's start when start) is one of the calls wanted. */
static int wanted(struct derive *d, const char *id, int start)
{
    if (d->want.only)
        return strcmp(id, d->want.only) == 0;
    /* An end read from a sequence on is of a call started there only. */
    return start || !d->want.from || json_object_get(d->calls, id);
}

/* A page's calls are all there once one more has started and each of the page's has ended. */
static int page_done(struct derive *d, const char *id, int start)
{
    if (!d->want.max)
        return 0;
    if (start && ++d->started <= d->want.max) {
        d->running++;
        if (json_object_set_new(d->first, id, json_true()))
            d->rc = VG_FAIL(&d->err, VIGIL_ENOMEM, "out of memory reading tool calls");
    } else if (!start && json_object_get(d->first, id)) {
        d->running--;
    }
    return d->started > d->want.max && d->running == 0;
}

/* The operation id of a call whose records do not name it, from the output it answered: the
 * tool gate makes the id after the call's start is journaled, and its envelope ({"action_id",
 * "operation_id", "replayed", "result", "status", ...}) names it. The end record does not repeat
 * it: its 64 digits would cost a step's stored end its compact form (docs/internals/PERF.md,
 * Session 33). Trial F, F4: every view of the call names the id its tool was given. */
static int name_operation(json_t *row)
{
    const json_t *out = json_object_get(row, "output");
    const json_t *op = json_object_get(out, "operation_id");
    if (!json_is_null(json_object_get(row, "operation_id")) || !json_is_string(op) ||
        !json_is_boolean(json_object_get(out, "replayed")))
        return 0;
    return json_object_set(row, "operation_id", (json_t *)op);
}

static void derive_one(struct derive *d, json_t *rec, int *done)
{
    const json_t *tc = json_object_get(rec, "tool_call");
    const char *id = vg_jstr(tc, "tool_call_id"), *status = vg_jstr(tc, "status");
    if (!id || !status)
        return;
    int start = strcmp(status, "running") == 0;
    if (!wanted(d, id, start))
        return;
    d->rc = vg_journal_follow_output(d->store, rec, &d->err);
    if (!d->rc && (vg_journal_call_fold(d->calls, rec, d->run_id) ||
                   (!start && name_operation(json_object_get(d->calls, id)))))
        d->rc = VG_FAIL(&d->err, VIGIL_ENOMEM, "out of memory reading tool calls");
    /* One call's end is the last record of it. */
    *done = (d->want.only && !start) || page_done(d, id, start);
}

/* One top-level member of a record for call_parts: the tool_call object parsed alone, the two
 * scalars read; -1 when the scanner declines (or a key repeats). */
static int call_part(struct vg_jscan *s, const char *key, size_t len, json_t **tc,
                     struct vg_buf *at_buf, size_t *at, int64_t *seq)
{
    if (vg_jscan_key_is(key, len, "tool_call")) {
        if (*tc || vg_jscan_peek(s) != '{')
            return -1;
        const char *from = (const char *)s->p;
        if (vg_jscan_skip(s) != 0)
            return -1;
        *tc = vg_jload(from, (size_t)((const char *)s->p - from), 0, NULL);
        return *tc ? 0 : -1;
    }
    if (vg_jscan_key_is(key, len, "occurred_at"))
        return *at != (size_t)-1 ? -1 : vg_jscan_string(s, at_buf, at);
    if (vg_jscan_key_is(key, len, "sequence"))
        return *seq >= 0 ? -1 : vg_jscan_int(s, seq);
    return vg_jscan_skip(s);
}

/* What a call's row takes of a journal record (its tool_call, occurred_at and sequence) as a
 * record of those three, read with the scanner and only the tool_call parsed: parsing the whole
 * record with jansson was most of a listing's cost (about 137,000 instructions a record,
 * callgrind). NULL when the scanner declines; the caller then parses the record whole. */
static json_t *call_parts(const char *body)
{
    struct vg_jscan s;
    struct vg_buf at_buf;
    json_t *tc = NULL, *rec = NULL;
    size_t at = (size_t)-1, klen;
    int64_t seq = -1;
    const char *key;
    int r = -1;
    vg_buf_init(&at_buf, VG_BUF_DEFAULT_MAX);
    vg_jscan_init(&s, body, strlen(body));
    if (vg_jscan_enter(&s, '{') == 0)
        while ((r = vg_jscan_next(&s, &key, &klen)) == 1 &&
               call_part(&s, key, klen, &tc, &at_buf, &at, &seq) == 0)
            ;
    if (r == 0 && vg_jscan_end(&s) == 0 && tc && at != (size_t)-1 && seq >= 0 && !at_buf.fail)
        rec = json_pack("{s:O,s:s,s:I}", "tool_call", tc, "occurred_at", at_buf.data + at,
                        "sequence", (json_int_t)seq);
    json_decref(tc);
    vg_buf_release(&at_buf);
    return rec;
}

static int derive_cb(void *user, const struct vg_record *r)
{
    struct derive *d = user;
    /* Most activity records are a step's reasoning: only a tool call's are parsed. */
    if (!strstr(r->body, "\"tool_call\":{"))
        return 0;
    if (d->want.only && !strstr(r->body, d->want.only))
        return 0;
    json_error_t je = {0};
    json_t *rec = call_parts(r->body);
    if (!rec)
        rec = vg_jload(r->body, strlen(r->body), 0, &je);
    int done = 0;
    if (rec)
        derive_one(d, rec, &done);
    else if (vg_json_oom(&je))
        d->rc = VG_FAIL(&d->err, VIGIL_ENOMEM, "out of memory reading tool calls");
    else
        d->rc =
            VG_FAIL(&d->err, VIGIL_ECORRUPT, "stored journal record \"%.60s\" is not JSON", r->id);
    json_decref(rec);
    return d->rc != VIGIL_OK || done;
}

vigil_code vg_journal_calls_derive(struct vg_store *s, const char *owner, const char *run_id,
                                   const struct vg_calls_want *want, json_t **out, vigil_error *err)
{
    struct derive d = {.store = s,
                       .run_id = run_id,
                       .want = *want,
                       .calls = json_object(),
                       .first = json_object()};
    vigil_code rc = VIGIL_OK;
    struct vg_query q = {.kind = JOURNAL_KIND,
                         .owner = owner,
                         .k1 = run_id,
                         .k2 = "activity.updated",
                         .has_seq_min = want->from > 0,
                         .seq_min = want->from};
    if (!d.calls || !d.first)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading tool calls");
    if (!rc)
        rc = vg_journal_scan_tool_records(s, &q, derive_cb, &d, err);
    if (rc == VIGIL_OK && d.rc) {
        rc = d.rc;
        if (err)
            *err = d.err;
    }
    json_decref(d.first);
    if (rc) {
        json_decref(d.calls);
        return rc;
    }
    *out = d.calls;
    return VIGIL_OK;
}

static int any_cb(void *user, const struct vg_record *r)
{
    (void)r;
    *(int *)user = 1;
    return 1;
}

vigil_code vg_journal_run_has_call_rows(struct vg_store *s, const char *owner, const char *run_id,
                                        int *has, vigil_error *err)
{
    struct vg_query q = {.kind = TOOL_KIND, .owner = owner, .k1 = run_id, .limit = 1};
    *has = 0;
    return vg_store_scan(s, &q, any_cb, has, err);
}

/* ---- one call by its id --------------------------------------------------------------------- */

struct start_rec {
    char *owner, *run_id;
    int64_t seq;
    int is_start;
    int oom;
};

static int start_cb(void *user, const struct vg_record *r)
{
    struct start_rec *st = user;
    json_error_t je;
    int tool = strstr(r->body, "\"tool_call\":{") != NULL;
    json_t *rec = tool ? vg_jload(r->body, strlen(r->body), 0, &je) : NULL;
    st->oom = tool && !rec && vg_json_oom(&je);
    const json_t *tc = json_object_get(rec, "tool_call");
    const char *id = vg_jstr(tc, "tool_call_id"), *status = vg_jstr(tc, "status");
    st->is_start = id && status && !strcmp(id, r->id) && !strcmp(status, "running");
    st->owner = vg_strdup(r->owner);
    st->run_id = vg_strdup(r->k1);
    st->seq = r->seq;
    json_decref(rec);
    return 0;
}

vigil_code vg_journal_call_find(struct vg_store *s, const char *tool_call_id, json_t **row,
                                int64_t *seq, vigil_error *err)
{
    struct start_rec st = {0};
    json_t *calls = NULL;
    vigil_code rc = vg_store_get(s, JOURNAL_KIND, tool_call_id, start_cb, &st, err);
    if (rc == VIGIL_ENOTFOUND) /* no row: kept in its action message (ends.c) */
        rc = vg_journal_kept_get(s, tool_call_id, start_cb, &st, err);
    if (rc == VIGIL_OK && (!st.owner || !st.run_id || st.oom))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading tool call \"%.60s\"", tool_call_id);
    else if (rc == VIGIL_OK && !st.is_start)
        rc = VG_FAIL(err, VIGIL_ENOTFOUND, "tool call \"%.60s\" not found", tool_call_id);
    if (rc == VIGIL_OK)
        rc = vg_journal_calls_derive(s, st.owner, st.run_id,
                                     &(struct vg_calls_want){st.seq, tool_call_id, 0}, &calls, err);
    json_t *b = calls ? json_object_get(calls, tool_call_id) : NULL;
    if (rc == VIGIL_OK && !b)
        rc = VG_FAIL(err, VIGIL_ENOTFOUND, "tool call \"%.60s\" not found", tool_call_id);
    if (rc == VIGIL_OK) {
        *row = json_incref(b);
        *seq = st.seq;
    }
    json_decref(calls);
    vg_free(st.owner);
    vg_free(st.run_id);
    return rc;
}

/* ---- the calls a crashed run left running --------------------------------------------------- */

struct open_rows {
    vg_journal_open_call_fn fn;
    void *user;
    int stop;
};

static int open_row_cb(void *user, const struct vg_record *r)
{
    struct open_rows *o = user;
    json_t *b = vg_jload(r->body, strlen(r->body), 0, NULL);
    o->stop = !b || o->fn(o->user, r->id, r->k1 ? r->k1 : "", vg_jstr(b, "operation_id"));
    json_decref(b);
    return o->stop;
}

/* The open calls of one running run that has no rows, from its journal records. */
static vigil_code open_calls_of_run(struct vg_store *s, const char *agent_id, const char *run_id,
                                    struct open_rows *o, vigil_error *err)
{
    int has = 0;
    json_t *calls = NULL;
    vigil_code rc = vg_journal_run_has_call_rows(s, agent_id, run_id, &has, err);
    if (rc || has) /* its rows were read with the agent's */
        return rc;
    if ((rc = vg_journal_calls_derive(s, agent_id, run_id, &(struct vg_calls_want){0, NULL, 0},
                                      &calls, err)))
        return rc;
    const char *id;
    json_t *b;
    json_object_foreach (calls, id, b) {
        if (!o->stop && !strcmp(vg_jstr(b, "status"), "running"))
            o->stop = o->fn(o->user, id, run_id, vg_jstr(b, "operation_id"));
    }
    json_decref(calls);
    return VIGIL_OK;
}

vigil_code vg_journal_open_calls(struct vg_store *s, const char *agent_id,
                                 vg_journal_open_call_fn fn, void *user, vigil_error *err)
{
    struct open_rows o = {fn, user, 0};
    struct vg_query rq = {.kind = TOOL_KIND, .owner = agent_id, .k2 = "running"};
    vigil_code rc = vg_store_scan(s, &rq, open_row_cb, &o, err);
    struct vg_id_list runs = {0};
    struct vg_query q = {.kind = RUN_KIND, .owner = agent_id, .k1 = "running"};
    if (!rc && !o.stop)
        rc = vg_store_scan_ids(s, &q, &runs, err);
    for (size_t i = 0; !rc && !o.stop && i < runs.n; i++)
        rc = open_calls_of_run(s, agent_id, runs.ids[i], &o, err);
    vg_id_list_release(&runs);
    if (!rc && o.stop)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a crashed run's tool calls");
    return rc;
}
