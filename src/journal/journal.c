/*
 * journal.c: runs and their write paths. A run owns the next sequence number and the live
 * projection; every append builds the full record, validates it through the registry, folds it
 * into a copy of the projection and then, in one store transaction, writes the record, the
 * idempotency key (messages, observations), the projection and whatever run totals changed.
 * Only after the commit does the in-memory state move on, so a failed append leaves the run
 * exactly as it was. Opening a run writes journal.header first; no header, no run.
 */
#include "base/common.h"

#include "base/json.h"
#include "journal/journal_int.h"
#include "os/clock.h"
#include "os/ids.h"
#include "store/store.h"

/* What finishing a tool call needs of its start: the fields of its start record, and of its row
 * (kind run_tool_call) when it was started by a version that wrote one (rev > 0). */
struct call_start {
    char id[37];
    char *name;
    char *operation_id; /* NULL: none */
    char *input;        /* canonical JSON text */
    char started_at[32];
    int64_t started_seq;
    int64_t seq, rev; /* the row's sort key and revision (0: no row) */
};

static void call_start_free(struct call_start *c)
{
    if (!c)
        return;
    vg_free(c->name);
    vg_free(c->operation_id);
    vg_free(c->input);
    vg_free(c);
}

struct vg_run {
    struct vg_store *store; /* borrowed */
    struct vg_clock *clock; /* borrowed */
    struct vg_ids *ids;     /* borrowed */
    char run_id[37];
    char *agent_id;
    char *scope;
    int64_t next_seq;
    json_t *proj; /* the live projection (owned) */
    int64_t proj_rev;
    json_t *body; /* the run record's body (owned) */
    int64_t run_rev;
    int64_t run_seq; /* start time ms: the run record's sort key */
    int closed;
    int stale; /* a failed append: reload before the next one */
    /* The tool call this handle started last, as stored (revision 1), so finishing it does not
     * read and parse it back; cleared once finished, or after any failure. */
    struct call_start *call;
    /* The projection's latest_activity as canonical text, when the newest activity record was
     * built as text (the traces of every step); NULL when the tree in proj holds it. */
    char *la_text;
    /* The projection's text as last written whole, and where its last_sequence and
     * latest_activity values are in it: the step's traces change only those two, so the next
     * writes copy the rest instead of writing the tree again. NULL once anything else in the
     * tree may have changed (any record folded as a tree, a reload). */
    char *ptext;
    size_t ptext_len, seq_at, seq_end, la_at, la_end;
    /* Inside a caller's transaction the projection and the run record are written once, just
     * before it commits (flush_pending), however many records the run appends in it. */
    int pending;       /* registered with the store for the open transaction */
    int pending_level; /* the deepest store level holding a kept-back record */
    int proj_dirty;    /* the projection changed since it was last written */
    int body_dirty;    /* the run record's body too */
    int poisoned;      /* the projection kept back no longer matches what would commit */
    /* A tool call's start kept for its action message, or a model call's record for its thought
     * message (ends.c), written in this transaction: the message takes it
     * (vg_journal_kept_take), else flush_pending writes it as a row. */
    struct kept_start *kept;
};

struct kept_start {
    char id[37];
    int64_t seq, at;
    char *text; /* the record's text, for a row */
};

static void kept_free(struct vg_run *run)
{
    if (run->kept)
        vg_free(run->kept->text);
    vg_free(run->kept);
    run->kept = NULL;
}

static const char *const STATUS_NAMES[] = {"queued",      "running",  "completed", "failed",
                                           "interrupted", "canceled", "crashed"};

const char *vg_run_status_name(enum vg_run_status s)
{
    return (unsigned)s < VG_ARRAY_LEN(STATUS_NAMES) ? STATUS_NAMES[s] : NULL;
}

int vg_run_status_parse(const char *name, enum vg_run_status *out)
{
    for (size_t i = 0; name && i < VG_ARRAY_LEN(STATUS_NAMES); i++)
        if (strcmp(STATUS_NAMES[i], name) == 0) {
            *out = (enum vg_run_status)i;
            return 0;
        }
    return -1;
}

const char *vg_journal_run_id(const struct vg_run *run)
{
    return run->run_id;
}

int64_t vg_journal_run_next_sequence(const struct vg_run *run)
{
    return run->next_seq;
}

void vg_journal_run_free(struct vg_run *run)
{
    if (!run)
        return;
    if (run->pending) /* freed inside the transaction that needed its writes: undo it */
        vg_store_defer_cancel(run->store, run);
    kept_free(run);
    json_decref(run->proj);
    json_decref(run->body);
    call_start_free(run->call);
    vg_free(run->la_text);
    vg_free(run->ptext);
    vg_free(run->agent_id);
    vg_free(run->scope);
    vg_free(run);
}

/* ---- one append ---------------------------------------------------------------------------- */

/* What an append writes besides the record itself. */
struct extra {
    const char *key_id;       /* idempotency key id, or NULL */
    json_t *new_body;         /* the run record's new body (borrowed), or NULL */
    struct vg_record *put;    /* another record to insert (tool call start), or NULL */
    struct vg_record *update; /* another record to update (tool call end), or NULL */
    int64_t update_rev;
    /* A tool call's end kept in its result message (ends.c): no row; its member text here,
     * its form made for a message whose prev_id is end_prev (the call's action), when given. */
    char **end_out;
    const char *end_prev;
    /* A tool call's start (or model call) kept for its message (run->kept) when in a
     * transaction. */
    int keep_start;
};

/* Keep a tool call's start (its text taken) for its action message, or for a row at the commit. */
static vigil_code keep_start(struct vg_run *run, const char *rid, int64_t seq, int64_t at,
                             char **text, vigil_error *err)
{
    struct kept_start *k = vg_calloc(1, sizeof *k);
    if (!k)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory keeping a tool call's start");
    snprintf(k->id, sizeof k->id, "%s", rid);
    k->seq = seq;
    k->at = at;
    k->text = *text;
    *text = NULL;
    run->kept = k;
    return VIGIL_OK;
}

/* Insert or update a record whose body is already text. */
static vigil_code put_text(struct vg_store *s, const char *kind, const char *id, const char *owner,
                           const char *k1, const char *k2, int64_t seq, int64_t at,
                           const char *text, unsigned flags, int *inserted, vigil_error *err)
{
    struct vg_record r = {.kind = kind,
                          .id = id,
                          .owner = owner,
                          .k1 = k1,
                          .k2 = k2,
                          .seq = seq,
                          .at = at,
                          .body = text};
    return vg_store_put(s, &r, flags, inserted, err);
}

static vigil_code update_text(struct vg_store *s, const char *kind, const char *id,
                              const char *owner, const char *k1, const char *k2, int64_t seq,
                              int64_t at, const char *text, int64_t rev, vigil_error *err)
{
    struct vg_record r = {.kind = kind,
                          .id = id,
                          .owner = owner,
                          .k1 = k1,
                          .k2 = k2,
                          .seq = seq,
                          .at = at,
                          .body = text};
    return vg_store_update(s, &r, rev, err);
}

/* The same with a body written as canonical JSON first. */
static vigil_code put_record(struct vg_store *s, const char *kind, const char *id,
                             const char *owner, const char *k1, const char *k2, int64_t seq,
                             int64_t at, const json_t *body, unsigned flags, int *inserted,
                             vigil_error *err)
{
    char *text = vg_journal_canonical(body);
    if (!text)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory encoding a %s record", kind);
    vigil_code rc = put_text(s, kind, id, owner, k1, k2, seq, at, text, flags, inserted, err);
    vg_free(text);
    return rc;
}

static vigil_code update_record(struct vg_store *s, const char *kind, const char *id,
                                const char *owner, const char *k1, const char *k2, int64_t seq,
                                int64_t at, const json_t *body, int64_t rev, vigil_error *err)
{
    char *text = vg_journal_canonical(body);
    if (!text)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory encoding a %s record", kind);
    vigil_code rc = update_text(s, kind, id, owner, k1, k2, seq, at, text, rev, err);
    vg_free(text);
    return rc;
}

/* The projection's text: the tree written whole, or, while only the two values the traces
 * change have changed since it was (ptext), the last text with those two put in. */
static vigil_code projection_text(struct vg_run *run, struct vg_buf *b, vigil_error *err)
{
    char seq[24];
    snprintf(seq, sizeof seq, "%lld", (long long)vg_jint(run->proj, "last_sequence"));
    if (run->ptext) {
        const char *t = run->ptext;
        vg_buf_append(b, t, run->seq_at);
        vg_buf_puts(b, seq);
        vg_buf_append(b, t + run->seq_end, run->la_at - run->seq_end);
        if (run->la_text)
            vg_buf_puts(b, run->la_text);
        else /* still the tree's, unchanged since the text was made */
            vg_buf_append(b, t + run->la_at, run->la_end - run->la_at);
        vg_buf_append(b, t + run->la_end, run->ptext_len - run->la_end);
    } else {
        struct vg_json_splice sp[2] = {{"last_sequence", seq, 0, 0},
                                       {"latest_activity", run->la_text, 0, 0}};
        if (vg_json_put_canonical_splice(b, run->proj, sp, 2) != 0)
            return VG_FAIL(err, VIGIL_EINVAL, "the run's projection holds text that is not UTF-8");
        if (b->fail == VIGIL_OK && sp[0].end && sp[1].end && sp[0].end < sp[1].start &&
            (run->ptext = vg_malloc(b->len + 1)) != NULL) {
            memcpy(run->ptext, b->data, b->len + 1);
            run->ptext_len = b->len;
            run->seq_at = sp[0].start;
            run->seq_end = sp[0].end;
            run->la_at = sp[1].start;
            run->la_end = sp[1].end;
        }
    }
    vigil_code rc = vg_buf_finish(b, err);
#ifndef NDEBUG
    /* Debug builds: the copied text must be what writing the tree makes. */
    if (rc == VIGIL_OK) {
        struct vg_buf whole;
        struct vg_json_splice sp[1] = {{"latest_activity", run->la_text, 0, 0}};
        vg_buf_init(&whole, VG_BUF_DEFAULT_MAX);
        if (vg_json_put_canonical_splice(&whole, run->proj, sp, 1) == 0 && whole.fail == VIGIL_OK &&
            strcmp(whole.data, b->data) != 0)
            rc = VG_FAIL(err, VIGIL_ECORRUPT, "the run's projection text went stale");
        vg_buf_release(&whole);
    }
#endif
    return rc;
}

/* Write the live projection: its tree, with the newest activity from its text when a record
 * built as text set it (la_text). */
static vigil_code write_projection(struct vg_run *run, int64_t now, vigil_error *err)
{
    struct vg_buf b;
    vg_buf_init(&b, VG_BUF_DEFAULT_MAX);
    vigil_code rc = projection_text(run, &b, err);
    if (rc == VIGIL_OK)
        rc = update_text(run->store, PROJECTION_KIND, run->run_id, run->agent_id, run->run_id, "",
                         0, now, b.data, run->proj_rev, err);
    vg_buf_release(&b);
    return rc;
}

static const char *body_status(const json_t *body)
{
    return vg_jstr(body, "status");
}

/* The run record just written with body: once the run has ended, it and its 2 KB projection are
 * rarely rewritten, and the store may place them with the appended rows (vg_store_settle). The
 * record shrinks when the run ends (its packed form, store/body.c), so left among the hot rows
 * it kept a leaf part empty once the next run's rows had split it (docs/internals/PERF.md,
 * sessions 25 and 36). */
static vigil_code settle_if_ended(struct vg_run *run, const json_t *body, vigil_error *err)
{
    const char *st = body_status(body);
    if (!st || strcmp(st, "queued") == 0 || strcmp(st, "running") == 0)
        return VIGIL_OK;
    vigil_code rc = vg_store_settle(run->store, PROJECTION_KIND, run->run_id, err);
    return rc ? rc : vg_store_settle(run->store, RUN_KIND, run->run_id, err);
}

static int copy_ack_cb(void *user, const struct vg_record *r)
{
    struct vg_journal_ack *ack = user;
    json_t *b = vg_jload(r->body, strlen(r->body), 0, NULL);
    ack->sequence = -1; /* stays -1 if the key cannot be read */
    if (b) {
        ack->sequence = vg_jint(b, "sequence");
        snprintf(ack->record_id, sizeof ack->record_id, "%s",
                 vg_jstr(b, "record_id") ? vg_jstr(b, "record_id") : "");
        json_decref(b);
    }
    return 0;
}

/* Add the base fields to payload (borrowed) to make a full record. */
static vigil_code build_record(struct vg_run *run, const char *type, json_t *rec, int64_t now,
                               vigil_error *err)
{
    char rid[37], at[32];
    vg_ids_new(run->ids, rid);
    vg_time_format_ms(at, now);
    /* The keys are ASCII constants, and the id, the type (a registry name), the run id (checked
     * when the run was opened) and the time are ASCII that vigil made: no UTF-8 checks. */
    if (json_object_set_new_nocheck(rec, "record_id", json_string_nocheck(rid)) ||
        json_object_set_new_nocheck(rec, "sequence", json_integer(run->next_seq)) ||
        json_object_set_new_nocheck(rec, "type", json_string_nocheck(type)) ||
        json_object_set_new_nocheck(rec, "schema_version", json_integer(JOURNAL_SCHEMA_VERSION)) ||
        json_object_set_new_nocheck(rec, "run_id", json_string_nocheck(run->run_id)) ||
        json_object_set_new_nocheck(rec, "owner_id", json_string(run->agent_id)) ||
        json_object_set_new_nocheck(rec, "scope", json_string(run->scope)) ||
        json_object_set_new_nocheck(rec, "occurred_at", json_string_nocheck(at)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory building a %s record", type);
    return VIGIL_OK;
}

static const char *body_status(const json_t *body);
static vigil_code settle_if_ended(struct vg_run *run, const json_t *body, vigil_error *err);

/* The store's call at the end of a transaction in which the run kept its projection and run
 * record back (vg_store_defer). */
static vigil_code flush_pending(void *user, enum vg_store_pending phase, vigil_error *err)
{
    struct vg_run *run = user;
    vigil_code rc = VIGIL_OK;
    int64_t now;
    switch (phase) {
    case VG_PENDING_FLUSH:
        now = vg_clock_now_ms(run->clock);
        if (run->poisoned)
            return VG_FAIL(err, VIGIL_ESTATE,
                           "a journal append of run \"%s\" failed in this transaction, which "
                           "therefore cannot commit",
                           run->run_id);
        if (run->proj_dirty)
            rc = write_projection(run, now, err);
        if (rc == VIGIL_OK && run->body_dirty)
            rc = update_record(run->store, RUN_KIND, run->run_id, run->agent_id,
                               body_status(run->body), "", run->run_seq, now, run->body,
                               run->run_rev, err);
        if (rc == VIGIL_OK && run->body_dirty)
            rc = settle_if_ended(run, run->body, err);
        if (rc == VIGIL_OK && run->kept) /* no message took it: a row of its own */
            rc = put_text(run->store, JOURNAL_KIND, run->kept->id, run->agent_id, run->run_id,
                          "activity.updated", run->kept->seq, run->kept->at, run->kept->text, 0,
                          NULL, err);
        kept_free(run);
        return rc; /* the store then says DONE or ABORT */
    case VG_PENDING_DONE:
        run->proj_rev += run->proj_dirty;
        run->run_rev += run->body_dirty;
        break;
    case VG_PENDING_ABORT:
        run->stale = 1; /* the records folded in memory were rolled back */
        kept_free(run);
        break;
    case VG_PENDING_RELEASE:
    case VG_PENDING_PARTIAL:
        /* A released savepoint's records now belong to the level below. A rolled-back one
         * that held a record folded in memory leaves a projection that no longer matches
         * what can commit: the transaction must not. */
        if (run->pending_level > vg_store_depth(run->store)) {
            run->poisoned |= phase == VG_PENDING_PARTIAL;
            run->pending_level = vg_store_depth(run->store);
        }
        return VIGIL_OK;
    }
    run->pending = run->pending_level = run->proj_dirty = run->body_dirty = run->poisoned = 0;
    return VIGIL_OK;
}

/* An activity.updated record's payload as a list of fields whose values are text (the traces
 * of every step: a model call, a tool call's start and end), written without a jansson tree. */
struct text_payload {
    const struct vg_jfield *f;
    size_t n;
    /* NULL, or what the projection's latest_activity shows instead (as many fields): a record
     * that names where a value is stored shows the value there (output_ref.c) */
    const struct vg_jfield *la_f;
    const char *rid; /* NULL, or the record's id (a tool call's start has the call's id) */
};

/* A record's base fields (record_id ... occurred_at), and the most payload fields a trace has. */
enum { BASE_FIELDS = 8, PAYLOAD_FIELDS_MAX = 6 };

/*
 * Build a text payload's record: its canonical text into rec_out and what folding it makes the
 * projection's latest_activity (the record without record_id, type, schema_version, run_id,
 * owner_id and scope) into la_out, both owned; rid gets the record's id. The values are checked
 * by the callers as the registry would (tests/journal compares every such record with what
 * validation and the canonical writer make of it, and debug builds check each one).
 */
static vigil_code build_text(struct vg_run *run, const struct text_payload *tp, int64_t now,
                             char rid[37], char **rec_out, char **la_out, vigil_error *err)
{
    char at[32];
    struct vg_jfield f[BASE_FIELDS + PAYLOAD_FIELDS_MAX];
    if (tp->n > PAYLOAD_FIELDS_MAX)
        return VG_FAIL(err, VIGIL_EINVAL, "too many fields in an activity record");
    if (tp->rid)
        memcpy(rid, tp->rid, 37);
    else
        vg_ids_new(run->ids, rid);
    vg_time_format_ms(at, now);
    memcpy(f, tp->la_f ? tp->la_f : tp->f, tp->n * sizeof *f);
    size_t n = tp->n;
    f[n++] = (struct vg_jfield){"occurred_at", VG_JF_STR, at, 0};
    f[n++] = (struct vg_jfield){"sequence", VG_JF_INT, NULL, run->next_seq};
    struct vg_buf la, rec;
    vg_buf_init(&la, VG_BUF_DEFAULT_MAX);
    vg_buf_init(&rec, VG_BUF_DEFAULT_MAX);
    int bad = vg_json_put_fields(&la, f, n);
    if (tp->la_f)
        memcpy(f, tp->f, tp->n * sizeof *f);
    f[n++] = (struct vg_jfield){"record_id", VG_JF_STR, rid, 0};
    f[n++] = (struct vg_jfield){"type", VG_JF_STR, "activity.updated", 0};
    f[n++] = (struct vg_jfield){"schema_version", VG_JF_INT, NULL, JOURNAL_SCHEMA_VERSION};
    f[n++] = (struct vg_jfield){"run_id", VG_JF_STR, run->run_id, 0};
    f[n++] = (struct vg_jfield){"owner_id", VG_JF_STR, run->agent_id, 0};
    f[n++] = (struct vg_jfield){"scope", VG_JF_STR, run->scope, 0};
    bad = bad || vg_json_put_fields(&rec, f, n);
    vigil_code rc = bad ? VG_FAIL(err, VIGIL_EINVAL, "an activity record's text is not UTF-8")
                        : vg_buf_finish(&rec, err);
    if (rc == VIGIL_OK)
        rc = vg_buf_finish(&la, err);
#ifndef NDEBUG
    if (rc == VIGIL_OK)
        rc = vg_journal_check_text(rec.data, err);
#endif
    if (rc) {
        vg_buf_release(&la);
        vg_buf_release(&rec);
        return rc;
    }
    *rec_out = vg_buf_detach(&rec, NULL);
    *la_out = vg_buf_detach(&la, NULL);
    return VIGIL_OK;
}

/* What folding a text-built activity record does to the projection (apply_activity and the
 * fold's sequence): the newest activity is kept as its text (la, taken). */
static vigil_code fold_text(struct vg_run *run, int64_t seq, char *la, vigil_error *err)
{
    if (json_object_set_new_nocheck(run->proj, "latest_activity", json_null()) ||
        json_object_set_new_nocheck(run->proj, "last_sequence", json_integer(seq))) {
        vg_free(la);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory folding activity");
    }
    vg_free(run->la_text);
    run->la_text = la;
    return VIGIL_OK;
}

/*
 * Append one record whose payload is rec (borrowed; base fields are added), or, with rec NULL,
 * the activity record whose payload tp gives as text. On a duplicate idempotency key nothing is
 * written and ack says where the id already is.
 */
static vigil_code append_any(struct vg_run *run, const char *type, json_t *rec,
                             const struct text_payload *tp, struct extra *x,
                             struct vg_journal_ack *ack, vigil_error *err)
{
    vigil_code rc;
    int folded = 0;
    int64_t now = vg_clock_now_ms(run->clock);
    const struct jrecord_type *t = vg_journal_type_find(type);
    if (!t)
        return VG_FAIL(err, VIGIL_EINVAL, "unknown journal record type \"%.60s\"", type);
    if (!t->writable)
        return VG_FAIL(err, VIGIL_EINVAL, "journal record type \"%s\" is reserved and not written",
                       type);
    /* A failed append left the in-memory state unknown: take it from the store again. */
    if (run->stale) {
        if ((rc = vg_journal_run_reload(run, err)))
            return rc;
        run->stale = 0;
    }
    if (run->closed)
        return VG_FAIL(err, VIGIL_ESTATE, "run \"%s\" is closed", run->run_id);
    char tid[37], *text = NULL, *la = NULL;
    const char *rid = tid;
    if (rec) {
        if ((rc = build_record(run, type, rec, now, err)) ||
            (rc = vg_journal_validate_built(rec, err)))
            return rc;
        rid = vg_jstr(rec, "record_id");
    } else if ((rc = build_text(run, tp, now, tid, &text, &la, err))) {
        return rc;
    }

    int64_t seq = run->next_seq;
    /* In a caller's transaction (another owner keeping writes back: write them at once). */
    int defer = vg_store_in_tx(run->store) &&
                (run->pending || vg_store_defer(run->store, flush_pending, run, NULL) == VIGIL_OK);
    if (defer) {
        int level = vg_store_depth(run->store);
        if (!run->pending || level > run->pending_level)
            run->pending_level = level;
        run->pending = 1;
    }
    if ((rc = vg_store_begin(run->store, err))) {
        vg_free(text);
        vg_free(la);
        return rc;
    }
    if (x && x->key_id) {
        int inserted = 0;
        json_t *kb = json_pack("{s:s,s:I}", "record_id", rid, "sequence", (json_int_t)seq);
        rc = kb ? put_record(run->store, KEY_KIND, x->key_id, run->agent_id, run->run_id, "", seq,
                             now, kb, VG_PUT_IF_ABSENT, &inserted, err)
                : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
        json_decref(kb);
        if (rc == VIGIL_OK && !inserted) {
            /* Already journaled: acknowledge from the durable key, append nothing. */
            struct vg_journal_ack a = {.duplicate = 1};
            rc = vg_store_get(run->store, KEY_KIND, x->key_id, copy_ack_cb, &a, err);
            if (rc == VIGIL_OK && a.sequence < 0)
                rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading an idempotency key");
            rc = vg_store_end(run->store, rc, err);
            if (rc == VIGIL_OK && ack)
                *ack = a;
            vg_free(text); /* a text payload has no key: NULL */
            vg_free(la);
            return rc;
        }
    }
    /* Fold into the live projection in place (no copy per append); any failure from here on
     * marks the run stale so the next call reloads the committed state. */
    folded = 1;
    if (rc == VIGIL_OK && rec) {
        vg_free(run->ptext); /* the fold may change anything in the tree */
        run->ptext = NULL;
        rc = vg_journal_fold(&(struct fold){.proj = run->proj}, rec, err);
        if (rc == VIGIL_OK && strcmp(type, "activity.updated") == 0) {
            vg_free(run->la_text); /* the tree holds the newest activity again */
            run->la_text = NULL;
        }
    } else if (rc == VIGIL_OK) {
        rc = fold_text(run, seq, la, err);
        la = NULL;
    }
    if (rc == VIGIL_OK && rec)
        rc = put_record(run->store, JOURNAL_KIND, rid, run->agent_id, run->run_id,
                        vg_journal_class(rec), seq, now, rec, 0, NULL, err);
    else if (rc == VIGIL_OK && x && x->end_out)
        rc = vg_journal_end_pack(run->agent_id, run->run_id, rid, seq, now, text, x->end_prev,
                                 x->end_out, err);
    else if (rc == VIGIL_OK && x && x->keep_start && defer && !run->kept)
        rc = keep_start(run, rid, seq, now, &text, err);
    else if (rc == VIGIL_OK)
        rc = put_text(run->store, JOURNAL_KIND, rid, run->agent_id, run->run_id, type, seq, now,
                      text, 0, NULL, err);
    vg_free(text);
    vg_free(la);
    if (rc == VIGIL_OK && !defer)
        rc = write_projection(run, now, err);
    if (rc == VIGIL_OK && x && x->new_body && !defer)
        rc = update_record(run->store, RUN_KIND, run->run_id, run->agent_id,
                           body_status(x->new_body), "", run->run_seq, now, x->new_body,
                           run->run_rev, err);
    if (rc == VIGIL_OK && x && x->new_body && !defer)
        rc = settle_if_ended(run, x->new_body, err);
    if (rc == VIGIL_OK && x && x->put)
        rc = vg_store_put(run->store, x->put, 0, NULL, err);
    if (rc == VIGIL_OK && x && x->update)
        rc = vg_store_update(run->store, x->update, x->update_rev, err);
    rc = vg_store_end(run->store, rc, err);
    if (rc && run->kept && run->kept->seq == seq)
        kept_free(run); /* its record did not append */
    if (rc) {
        if (folded) {
            /* Its folds kept back for the transaction can no longer be told apart. */
            run->poisoned = run->pending;
            run->stale = 1;
            if (vg_journal_run_reload(run, NULL) == VIGIL_OK)
                run->stale = 0;
        }
        return rc;
    }

    /* Durable (or, kept back, written at the transaction's commit): now the run moves on. */
    run->next_seq++;
    if (defer) {
        run->proj_dirty = 1;
        run->body_dirty |= x && x->new_body;
    } else {
        run->proj_rev++;
        run->run_rev += x && x->new_body;
    }
    if (x && x->new_body && x->new_body != run->body) {
        json_decref(run->body);
        run->body = json_incref(x->new_body);
    }
    if (ack) {
        ack->duplicate = 0;
        ack->sequence = seq;
        snprintf(ack->record_id, sizeof ack->record_id, "%s", rid);
    }
    return VIGIL_OK;
}

static vigil_code append(struct vg_run *run, const char *type, json_t *rec, struct extra *x,
                         struct vg_journal_ack *ack, vigil_error *err)
{
    return append_any(run, type, rec, NULL, x, ack, err);
}

/* ---- open, attach, close ------------------------------------------------------------------- */

static vigil_code launch_check(const struct vg_run_launch *l, vigil_error *err)
{
    if (!l || !l->agent_id || !*l->agent_id || strlen(l->agent_id) > 200)
        return VG_FAIL(err, VIGIL_EINVAL, "run launch needs an agent id of 1..200 bytes");
    if (!l->run_key || !*l->run_key)
        return VG_FAIL(err, VIGIL_EINVAL, "run launch needs a run key");
    if (!l->wake_reason || !*l->wake_reason)
        return VG_FAIL(err, VIGIL_EINVAL, "run launch needs a wake reason");
    return VIGIL_OK;
}

static json_t *new_body(const struct vg_run *run, const struct vg_run_launch *l, const char *at)
{
    /* Keys in sorted order (s* leaves an absent one out): jansson keeps them where they were
     * set, so the canonical writer, which sorts, finds them in order when it writes the record
     * again at every step. */
    return json_pack("{s:s,s:i,s:n,s:n,s:s*,s:i,s:s*,s:i,s:s,s:s,s:s,s:s,s:s,s:n,s:s*,s:i,"
                     "s:{s:i,s:i,s:i},s:s}",
                     "agent_id", run->agent_id, "cost_micros", 0, "ended_at", "error", "model",
                     l->model, "model_calls", 0, "parent_run_id", l->parent_run_id,
                     "pruned_activity", 0, "run_id", run->run_id, "run_key", l->run_key, "scope",
                     run->scope, "started_at", at, "status", "running", "summary", "thread_id",
                     l->thread_id, "tool_calls", 0, "usage", "cached_tokens", 0, "input_tokens", 0,
                     "output_tokens", 0, "wake_reason", l->wake_reason);
}

vigil_code vg_journal_run_open(struct vg_store *store, struct vg_clock *clock, struct vg_ids *ids,
                               const struct vg_run_launch *launch, struct vg_run **out,
                               vigil_error *err)
{
    vigil_code rc;
    json_t *hdr = NULL, *limits = NULL;
    struct fold f = {0};
    vg_alloc_install_json();
    if ((rc = launch_check(launch, err)))
        return rc;
    if ((rc = vg_jparse(launch->limits_json, "run limits", &limits, err)))
        return rc;
    if (limits && !json_is_object(limits)) {
        json_decref(limits);
        return VG_FAIL(err, VIGIL_EINVAL, "run limits must be a JSON object");
    }
    struct vg_run *run = vg_calloc(1, sizeof *run);
    if (!run) {
        json_decref(limits);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory opening a run");
    }
    run->store = store;
    run->clock = clock;
    run->ids = ids;
    run->next_seq = 1;
    vg_ids_new(ids, run->run_id);
    run->agent_id = vg_strdup(launch->agent_id);
    run->scope = vg_strdup(launch->scope ? launch->scope : "agent");
    run->proj = vg_journal_proj_new();
    hdr = json_pack("{s:s,s:s,s:s,s:s,s:o}", "kind", JOURNAL_HEADER_KIND, "agent_id",
                    launch->agent_id, "run_key", launch->run_key, "wake_reason",
                    launch->wake_reason, "protocol_descriptor", vg_journal_protocol_descriptor());
    if (!run->agent_id || !run->scope || !run->proj || !hdr ||
        vg_jset_str(hdr, "thread_id", launch->thread_id) ||
        vg_jset_str(hdr, "parent_run_id", launch->parent_run_id) ||
        vg_jset_str(hdr, "model", launch->model) ||
        vg_jset_str(hdr, "working_directory", launch->working_directory) ||
        (limits && json_object_set(hdr, "limits", limits))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory opening a run");
        goto out;
    }
    int64_t now = vg_clock_now_ms(clock);
    run->run_seq = now;
    if ((rc = build_record(run, "journal.header", hdr, now, err)) ||
        (rc = vg_journal_validate(hdr, err)))
        goto out;
    /* Folded in place: a run that fails to open is freed with its projection. */
    f.proj = run->proj;
    if ((rc = vg_journal_fold(&f, hdr, err)))
        goto out;
    run->body = new_body(run, launch, vg_jstr(hdr, "occurred_at"));
    if (!run->body) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory opening a run");
        goto out;
    }

    /* The header is the first write of the run; the run record and projection follow it in
     * the same transaction, so a failed header leaves nothing at all. */
    if ((rc = vg_store_begin(store, err)) == VIGIL_OK) {
        rc = put_record(store, JOURNAL_KIND, vg_jstr(hdr, "record_id"), run->agent_id, run->run_id,
                        "journal.header", 1, now, hdr, 0, NULL, err);
        if (rc == VIGIL_OK)
            rc = put_record(store, RUN_KIND, run->run_id, run->agent_id, "running", "", now, now,
                            run->body, 0, NULL, err);
        if (rc == VIGIL_OK)
            rc = put_record(store, PROJECTION_KIND, run->run_id, run->agent_id, run->run_id, "", 0,
                            now, f.proj, 0, NULL, err);
        if (rc == VIGIL_OK && launch->parent_run_id) {
            json_t *lb = json_pack("{s:s,s:s}", "run_id", run->run_id, "parent_run_id",
                                   launch->parent_run_id);
            rc = lb ? put_record(store, LINK_KIND, run->run_id, run->agent_id,
                                 launch->parent_run_id, "", now, now, lb, 0, NULL, err)
                    : VG_FAIL(err, VIGIL_ENOMEM, "out of memory opening a run");
            json_decref(lb);
        }
        rc = vg_store_end(store, rc, err);
    }
    if (rc) {
        char why[256];
        snprintf(why, sizeof why, "%s", err ? err->message : "");
        rc = VG_FAIL(err, rc, "run not started: journal header not written: %s", why);
        goto out;
    }
    run->proj_rev = 1;
    run->run_rev = 1;
    run->next_seq = 2;
    *out = run;
    run = NULL;
out:
    json_decref(hdr);
    json_decref(limits);
    vg_journal_run_free(run);
    return rc;
}

struct loaded {
    json_t *body;
    int64_t rev, seq;
    int oom;
};

static int load_cb(void *user, const struct vg_record *r)
{
    struct loaded *l = user;
    json_error_t je;
    l->body = vg_jload(r->body, strlen(r->body), 0, &je);
    l->oom = !l->body && vg_json_oom(&je);
    l->rev = r->rev;
    l->seq = r->seq;
    return 0;
}

/* Read a record's body as JSON; ENOTFOUND if absent. */
static vigil_code load_json(struct vg_store *s, const char *kind, const char *id, struct loaded *l,
                            vigil_error *err)
{
    memset(l, 0, sizeof *l);
    vigil_code rc = vg_store_get(s, kind, id, load_cb, l, err);
    if (rc)
        return rc;
    if (!l->body && l->oom)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading %s \"%s\"", kind, id);
    if (!l->body)
        return VG_FAIL(err, VIGIL_ECORRUPT, "stored %s \"%s\" is not valid JSON", kind, id);
    return VIGIL_OK;
}

vigil_code vg_journal_run_reload(struct vg_run *run, vigil_error *err)
{
    struct loaded b, p;
    vigil_code rc = load_json(run->store, RUN_KIND, run->run_id, &b, err);
    if (rc)
        return rc;
    rc = load_json(run->store, PROJECTION_KIND, run->run_id, &p, err);
    if (rc) {
        json_decref(b.body);
        return rc;
    }
    json_decref(run->body);
    json_decref(run->proj);
    call_start_free(run->call); /* the call's record may have been rolled back */
    run->call = NULL;
    vg_free(run->la_text); /* the stored projection holds the newest activity as a tree */
    run->la_text = NULL;
    vg_free(run->ptext);
    run->ptext = NULL;
    run->body = b.body;
    run->run_rev = b.rev;
    run->run_seq = b.seq;
    run->proj = p.body;
    run->proj_rev = p.rev;
    run->next_seq = vg_jint(p.body, "last_sequence") + 1;
    const char *st = body_status(b.body);
    run->closed = st && strcmp(st, "running") != 0 && strcmp(st, "queued") != 0;
    return VIGIL_OK;
}

vigil_code vg_journal_run_attach(struct vg_store *store, struct vg_clock *clock, struct vg_ids *ids,
                                 const char *run_id, struct vg_run **out, vigil_error *err)
{
    vg_alloc_install_json();
    if (!run_id || !vg_id_valid(run_id))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid run id \"%.60s\"", run_id ? run_id : "");
    struct vg_run *run = vg_calloc(1, sizeof *run);
    if (!run)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory attaching a run");
    run->store = store;
    run->clock = clock;
    run->ids = ids;
    snprintf(run->run_id, sizeof run->run_id, "%s", run_id);
    vigil_code rc = vg_journal_run_reload(run, err);
    if (rc == VIGIL_OK) {
        run->agent_id = vg_strdup(vg_jstr(run->body, "agent_id"));
        run->scope = vg_strdup(vg_jstr(run->body, "scope") ? vg_jstr(run->body, "scope") : "agent");
        if (!run->agent_id || !run->scope)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory attaching a run");
    }
    if (rc) {
        vg_journal_run_free(run);
        return rc;
    }
    *out = run;
    return VIGIL_OK;
}

/* A copy of the run's body to change: its fields are shared but "usage", the one object the
 * appends change inside (the others replace fields whole). */
/* The run record's body for an append that changes it (a new reference to run->body itself,
 * taken from the store first if a failure left it stale): changed in place, so every failure
 * after that must mark the run stale (its next append reloads it). A copy per model call and
 * per tool call cost more than the rest of building their records. */
static vigil_code body_in_place(struct vg_run *run, json_t **out, vigil_error *err)
{
    if (run->stale) {
        vigil_code rc = vg_journal_run_reload(run, err);
        if (rc)
            return rc;
        run->stale = 0;
    }
    *out = json_incref(run->body);
    return VIGIL_OK;
}

static vigil_code body_copy(struct vg_run *run, json_t **out, vigil_error *err)
{
    json_t *usage = json_object_get(run->body, "usage");
    *out = json_copy(run->body);
    if (*out && usage && json_object_set_new(*out, "usage", json_deep_copy(usage))) {
        json_decref(*out);
        *out = NULL;
    }
    return *out ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory copying the run");
}

vigil_code vg_journal_run_close(struct vg_run *run, enum vg_run_status status, const char *summary,
                                const char *error, vigil_error *err)
{
    if (status == VG_RUN_QUEUED || status == VG_RUN_RUNNING || !vg_run_status_name(status))
        return VG_FAIL(err, VIGIL_ESTATE,
                       "a run closes as completed, failed, interrupted, canceled or "
                       "crashed");
    if (run->closed)
        return VG_FAIL(err, VIGIL_ESTATE, "run \"%s\" is already closed", run->run_id);
    json_t *rec = NULL, *body = NULL;
    vigil_code rc = body_copy(run, &body, err);
    if (rc)
        return rc;
    char at[32];
    vg_time_format_ms(at, vg_clock_now_ms(run->clock));
    rec = json_pack("{s:s,s:s}", "lifecycle", vg_run_status_name(status), "attention", "none");
    if (!rec || vg_jset_str(rec, "summary", summary) || vg_jset_str(rec, "error", error) ||
        (!json_is_null(json_object_get(run->proj, "current_input_request_id")) &&
         json_object_set_new(rec, "current_input_request_id", json_null())) ||
        json_object_set_new(body, "status", json_string(vg_run_status_name(status))) ||
        json_object_set_new(body, "ended_at", json_string(at)) ||
        (summary && vg_jset_str(body, "summary", summary)) ||
        (error && vg_jset_str(body, "error", error))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory closing a run");
        goto out;
    }
    struct extra x = {.new_body = body};
    rc = append(run, "state.changed", rec, &x, NULL, err);
    if (rc == VIGIL_OK) {
        /* The run record's end time is the close record's time. */
        run->closed = 1;
    }
out:
    json_decref(rec);
    json_decref(body);
    return rc;
}

/* ---- write paths --------------------------------------------------------------------------- */

static vigil_code id_check(const char *what, const char *id, vigil_error *err)
{
    if (!id || !*id || strlen(id) > JOURNAL_MAX_ID)
        return VG_FAIL(err, VIGIL_EINVAL, "%s must be 1..%d bytes", what, JOURNAL_MAX_ID);
    return VIGIL_OK;
}

vigil_code vg_journal_message_accept(struct vg_run *run, const struct vg_journal_message *m,
                                     struct vg_journal_ack *ack, vigil_error *err)
{
    char gen[37], key[200];
    const char *mid = m->message_id;
    json_t *payload = NULL, *rec = NULL;
    if (!mid) {
        vg_ids_new(run->ids, gen);
        mid = gen;
    }
    vigil_code rc = id_check("message id", mid, err);
    if (rc || (rc = vg_jparse(m->payload_json, "message payload", &payload, err)))
        return rc;
    /* step: model calls made so far, the position in the conversation (history lists it) */
    rec = json_pack("{s:s,s:s?,s:s?,s:o,s:b,s:I}", "message_id", mid, "source", m->source,
                    "message_type", m->message_type, "payload", payload ? payload : json_null(),
                    "mutates_context", m->mutates_context, "step",
                    (json_int_t)vg_jint(run->body, "model_calls"));
    if (!rec)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory building a message");
    snprintf(key, sizeof key, "%s:msg:%s", run->run_id, mid);
    struct extra x = {.key_id = key};
    rc = append(run, "message.accepted", rec, &x, ack, err);
    json_decref(rec);
    return rc;
}

vigil_code vg_journal_message_delivery(struct vg_run *run, const char *message_id,
                                       const char *status, const char *transport,
                                       const char *reason, vigil_error *err)
{
    vigil_code rc = id_check("message id", message_id, err);
    if (rc)
        return rc;
    json_t *rec = json_pack("{s:s,s:s?,s:s?}", "message_id", message_id, "status", status,
                            "transport", transport);
    if (!rec || vg_jset_str(rec, "reason", reason)) {
        json_decref(rec);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory building a delivery");
    }
    rc = append(run, "message.delivery", rec, NULL, NULL, err);
    json_decref(rec);
    return rc;
}

vigil_code vg_journal_observe(struct vg_run *run, const struct vg_journal_observation *o,
                              struct vg_journal_ack *ack, vigil_error *err)
{
    char key[200];
    json_t *sig = NULL, *payload = NULL, *rec = NULL;
    vigil_code rc = id_check("observation id", o->observation_id, err);
    if (rc || (rc = vg_jparse(o->signal_json, "observation signal", &sig, err)) ||
        (rc = vg_jparse(o->payload_json, "observation payload", &payload, err)))
        goto out;
    rec = json_pack("{s:s,s:s?,s:s?,s:I}", "observation_id", o->observation_id, "source", o->source,
                    "confidence", o->confidence, "step",
                    (json_int_t)vg_jint(run->body, "model_calls"));
    if (!rec || (sig && json_object_set(rec, "signal", sig)) ||
        (payload && json_object_set(rec, "payload", payload)) ||
        vg_jset_str(rec, "raw_text", o->raw_text)) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory building an observation");
        goto out;
    }
    snprintf(key, sizeof key, "%s:obs:%s", run->run_id, o->observation_id);
    struct extra x = {.key_id = key};
    rc = append(run, "observation.recorded", rec, &x, ack, err);
out:
    json_decref(sig);
    json_decref(payload);
    json_decref(rec);
    return rc;
}

static vigil_code decide(struct vg_run *run, const struct vg_journal_decision *d, json_t *policy,
                         vigil_error *err)
{
    char gen[37];
    const char *did = d->decision_id;
    if (!did) {
        vg_ids_new(run->ids, gen);
        did = gen;
    }
    json_t *rec = json_pack("{s:s,s:s?}", "decision_id", did, "action", d->action);
    if (!rec || vg_jset_str(rec, "observation_id", d->observation_id) ||
        vg_jset_str(rec, "message_id", d->message_id) || vg_jset_str(rec, "reason", d->reason) ||
        (policy && json_object_set(rec, "policy", policy))) {
        json_decref(rec);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory building a decision");
    }
    vigil_code rc = append(run, "decision.recorded", rec, NULL, NULL, err);
    json_decref(rec);
    return rc;
}

vigil_code vg_journal_decide(struct vg_run *run, const struct vg_journal_decision *d,
                             vigil_error *err)
{
    return decide(run, d, NULL, err);
}

vigil_code vg_journal_state_change(struct vg_run *run, const struct vg_journal_state *s,
                                   vigil_error *err)
{
    json_t *rec = json_object();
    if (!rec || vg_jset_str(rec, "lifecycle", s->lifecycle) ||
        vg_jset_str(rec, "attention", s->attention) || vg_jset_str(rec, "activity", s->activity) ||
        vg_jset_str(rec, "current_input_request_id", s->input_request_id) ||
        (s->clear_input_request &&
         json_object_set_new(rec, "current_input_request_id", json_null()))) {
        json_decref(rec);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory building a state change");
    }
    vigil_code rc = append(run, "state.changed", rec, NULL, NULL, err);
    json_decref(rec);
    return rc;
}

vigil_code vg_journal_await_input(struct vg_run *run, const char *request_id, vigil_error *err)
{
    struct vg_journal_state s = {
        .lifecycle = "running", .attention = "awaiting-operator", .input_request_id = request_id};
    vigil_code rc = id_check("input request id", request_id, err);
    return rc ? rc : vg_journal_state_change(run, &s, err);
}

/* The run's cumulative usage as the fields of an activity's telemetry object; how many. */
static size_t telemetry_fields(const json_t *body, const char *active_tool, struct vg_jfield f[8])
{
    const json_t *u = json_object_get(body, "usage");
    int64_t in = vg_jint(u, "input_tokens"), outt = vg_jint(u, "output_tokens");
    f[0] = (struct vg_jfield){"input_tokens", VG_JF_INT, NULL, in};
    f[1] = (struct vg_jfield){"output_tokens", VG_JF_INT, NULL, outt};
    f[2] = (struct vg_jfield){"cached_tokens", VG_JF_INT, NULL, vg_jint(u, "cached_tokens")};
    f[3] = (struct vg_jfield){"total_tokens", VG_JF_INT, NULL, in + outt};
    f[4] = (struct vg_jfield){"cost_micros", VG_JF_INT, NULL, vg_jint(body, "cost_micros")};
    f[5] = (struct vg_jfield){"model_calls", VG_JF_INT, NULL, vg_jint(body, "model_calls")};
    f[6] = (struct vg_jfield){"tool_calls", VG_JF_INT, NULL, vg_jint(body, "tool_calls")};
    f[7] = (struct vg_jfield){"active_tool_name", VG_JF_STR, active_tool, 0};
    return active_tool ? 8 : 7;
}

/* The same as a telemetry object (new ref). */
static json_t *telemetry(const json_t *body, const char *active_tool)
{
    struct vg_jfield f[8];
    size_t n = telemetry_fields(body, active_tool, f);
    json_t *t = json_object();
    for (size_t i = 0; t && i < n; i++) {
        json_t *v = f[i].type == VG_JF_INT ? json_integer(f[i].i) : json_string(f[i].s);
        if (json_object_set_new_nocheck(t, f[i].key, v)) {
            json_decref(t);
            t = NULL;
        }
    }
    return t;
}

vigil_code vg_journal_activity(struct vg_run *run, const struct vg_journal_activity *a,
                               vigil_error *err)
{
    json_t *prog = NULL, *caps = NULL, *tgt = NULL, *rec = NULL;
    vigil_code rc;
    if ((rc = vg_jparse(a->progress_json, "activity progress", &prog, err)) ||
        (rc = vg_jparse(a->capabilities_json, "activity capabilities", &caps, err)) ||
        (rc = vg_jparse(a->current_target_json, "activity target", &tgt, err)))
        goto out;
    rec = json_object();
    if (!rec || vg_jset_str(rec, "activity", a->activity) ||
        (prog && json_object_set(rec, "progress", prog)) ||
        (caps && json_object_set(rec, "capabilities", caps)) ||
        (tgt && json_object_set(rec, "current_target", tgt)) ||
        json_object_set_new(rec, "telemetry", telemetry(run->body, a->active_tool_name))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory building an activity update");
        goto out;
    }
    rc = append(run, "activity.updated", rec, NULL, NULL, err);
out:
    json_decref(prog);
    json_decref(caps);
    json_decref(tgt);
    json_decref(rec);
    return rc;
}

vigil_code vg_journal_owner_effect(struct vg_run *run, const struct vg_journal_owner_effect *e,
                                   vigil_error *err)
{
    char gen[37];
    const char *eid = e->effect_id;
    json_t *payload = NULL;
    if (!eid) {
        vg_ids_new(run->ids, gen);
        eid = gen;
    }
    vigil_code rc = vg_jparse(e->payload_json, "owner effect payload", &payload, err);
    if (rc)
        return rc;
    json_t *rec = json_pack("{s:s,s:s?,s:s?}", "effect_id", eid, "owner_entity", e->owner_entity,
                            "effect_type", e->effect_type);
    if (!rec || vg_jset_str(rec, "observation_id", e->observation_id) ||
        vg_jset_str(rec, "workflow_event_id", e->workflow_event_id) ||
        vg_jset_str(rec, "entity_event_id", e->entity_event_id) ||
        (payload && json_object_set(rec, "payload", payload)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory building an owner effect");
    else
        rc = append(run, "owner-effect.recorded", rec, NULL, NULL, err);
    json_decref(rec);
    json_decref(payload);
    return rc;
}

vigil_code vg_journal_append_json(struct vg_run *run, const char *type, const char *payload_json,
                                  vigil_error *err)
{
    json_t *rec = NULL;
    vigil_code rc = vg_jparse(payload_json ? payload_json : "{}", "record payload", &rec, err);
    if (rc)
        return rc;
    if (!json_is_object(rec))
        rc = VG_FAIL(err, VIGIL_EINVAL, "a record payload must be a JSON object");
    else if (json_object_get(rec, "record_id") || json_object_get(rec, "sequence"))
        rc = VG_FAIL(err, VIGIL_EINVAL, "a record payload must not carry base fields");
    else if (strcmp(type ? type : "", "journal.header") == 0)
        rc = VG_FAIL(err, VIGIL_EINVAL, "journal.header is written only by opening a run");
    else
        rc = append(run, type ? type : "", rec, NULL, NULL, err);
    json_decref(rec);
    return rc;
}

/* ---- traces -------------------------------------------------------------------------------- */

static int add_int(json_t *o, const char *key, int64_t d)
{
    return json_object_set_new(o, key, json_integer(vg_jint(o, key) + d));
}

/*
 * The traces of every step (a model call, a tool call's start and end) are written as text, not
 * built as jansson trees, validated and written again: that was a large share of a step's
 * instructions (docs/internals/PERF.md). Their parts (the call object, the tool call's row, the
 * telemetry) go one after another into one buffer, each ended by a NUL, and are read back once all
 * are written.
 */
struct parts {
    struct vg_buf b;
    size_t at[4];
    int n;
    int bad; /* a string was not UTF-8 */
};

static void part_start(struct parts *p)
{
    p->at[p->n++] = p->b.len;
}

static void part_end(struct parts *p, int rc)
{
    p->bad |= rc != 0;
    vg_buf_putc(&p->b, '\0');
}

static const char *part(const struct parts *p, int i)
{
    return p->b.data + p->at[i];
}

static vigil_code parts_finish(struct parts *p, const char *what, vigil_error *err)
{
    if (p->bad)
        return VG_FAIL(err, VIGIL_EINVAL, "%s holds text that is not UTF-8", what);
    return vg_buf_finish(&p->b, err);
}

static void put_telemetry(struct parts *p, const json_t *body, const char *active_tool)
{
    struct vg_jfield f[8];
    size_t n = telemetry_fields(body, active_tool, f);
    part_start(p);
    part_end(p, vg_json_put_fields(&p->b, f, n));
}

/* A JSON value's canonical text ("null" for none) into a buffer of its own. */
static vigil_code canonical_into(struct vg_buf *b, const json_t *v, const char *what,
                                 vigil_error *err)
{
    vg_buf_init(b, VG_BUF_DEFAULT_MAX);
    if (!v)
        vg_buf_append(b, "null", 4);
    else if (vg_json_put_canonical(b, v) != 0)
        return VG_FAIL(err, VIGIL_EINVAL, "%s holds text that is not UTF-8", what);
    return vg_buf_finish(b, err);
}

/* canonical_into for JSON text (NULL: null), copied as it is when it is canonical already
 * (vg_json_is_canonical: a tool's input and output mostly are), else parsed (what_parsed names
 * it in the parse error) and written. */
static vigil_code canonical_text_into(struct vg_buf *b, const char *text, const char *what_parsed,
                                      const char *what, vigil_error *err)
{
    size_t len = text ? strlen(text) : 0;
    if (text && vg_json_is_canonical(text, len)) {
        vg_buf_init(b, VG_BUF_DEFAULT_MAX);
        vg_buf_append(b, text, len);
        return vg_buf_finish(b, err);
    }
    json_t *v = NULL;
    vigil_code rc = vg_jparse(text, what_parsed, &v, err);
    if (rc == VIGIL_OK)
        rc = canonical_into(b, v, what, err);
    json_decref(v);
    return rc;
}

/* An optional string a record holds as a non-empty string: NULL or not empty. */
static int opt_ok(const char *s)
{
    return !s || *s;
}

/* A model call's record; keep: kept for the message record_id names (vg_journal_kept_take). */
static vigil_code model_call(struct vg_run *run, const struct vg_model_call_trace *t,
                             const char *record_id, int keep, vigil_error *err)
{
    if (!t->provider || !*t->provider || !t->model || !*t->model)
        return VG_FAIL(err, VIGIL_EINVAL, "a model call trace needs provider and model");
    if (t->latency_ms < 0 || t->input_tokens < 0 || t->output_tokens < 0 || t->cached_tokens < 0 ||
        t->cost_micros < 0 || t->attempts < 0)
        return VG_FAIL(err, VIGIL_EINVAL, "model call trace figures must not be negative");
    if (!opt_ok(t->stop_reason) || !opt_ok(t->error_code))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "a model call trace's stop reason and error code must not be empty");
    json_t *body = NULL;
    struct parts p = {.n = 0};
    vg_buf_init(&p.b, VG_BUF_DEFAULT_MAX);
    vigil_code rc = body_in_place(run, &body, err);
    if (rc)
        goto out;
    json_t *usage = json_object_get(body, "usage");
    if (!usage || add_int(usage, "input_tokens", t->input_tokens) ||
        add_int(usage, "output_tokens", t->output_tokens) ||
        add_int(usage, "cached_tokens", t->cached_tokens) ||
        add_int(body, "cost_micros", t->cost_micros) || add_int(body, "model_calls", 1)) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory building a model call trace");
        goto out;
    }
    struct vg_jfield mc[10] = {{"provider", VG_JF_STR, t->provider, 0},
                               {"model", VG_JF_STR, t->model, 0},
                               {"latency_ms", VG_JF_INT, NULL, t->latency_ms},
                               {"input_tokens", VG_JF_INT, NULL, t->input_tokens},
                               {"output_tokens", VG_JF_INT, NULL, t->output_tokens},
                               {"cached_tokens", VG_JF_INT, NULL, t->cached_tokens},
                               {"cost_micros", VG_JF_INT, NULL, t->cost_micros},
                               {"attempts", VG_JF_INT, NULL, t->attempts}};
    size_t n = 8;
    if (t->stop_reason)
        mc[n++] = (struct vg_jfield){"stop_reason", VG_JF_STR, t->stop_reason, 0};
    if (t->error_code)
        mc[n++] = (struct vg_jfield){"error_code", VG_JF_STR, t->error_code, 0};
    part_start(&p);
    part_end(&p, vg_json_put_fields(&p.b, mc, n));
    put_telemetry(&p, body, NULL);
    if ((rc = parts_finish(&p, "a model call trace", err)))
        goto out;
    struct vg_jfield f[] = {{"activity", VG_JF_STR, "reasoning", 0},
                            {"model_call", VG_JF_RAW, part(&p, 0), 0},
                            {"telemetry", VG_JF_RAW, part(&p, 1), 0}};
    struct extra x = {.new_body = body, .keep_start = keep};
    rc = append_any(run, "activity.updated", NULL,
                    &(struct text_payload){f, VG_ARRAY_LEN(f), NULL, record_id}, &x, NULL, err);
out:
    run->stale |= body && rc != VIGIL_OK; /* the body was changed in place */
    vg_buf_release(&p.b);
    json_decref(body);
    return rc;
}

vigil_code vg_journal_model_call(struct vg_run *run, const struct vg_model_call_trace *t,
                                 vigil_error *err)
{
    return model_call(run, t, NULL, 0, err);
}

vigil_code vg_journal_model_call_in(struct vg_run *run, const struct vg_model_call_trace *t,
                                    const char *message_id, vigil_error *err)
{
    if (!message_id || strlen(message_id) != 36)
        return VG_FAIL(err, VIGIL_EINVAL, "a kept model call needs its message's id");
    return model_call(run, t, message_id, 1, err);
}

/* The fields of a tool call's row (kind run_tool_call); output, error_code, duration_ms,
 * ended_at and finished_sequence null while it runs (ended NULL). A finished call's row has no
 * output: the journal record at its finished_sequence holds it (the tool_call's output), and
 * readers take it from there (history.c; docs/internals/JOURNAL.md, "Tool call rows"). */
struct call_end {
    const char *status, *output, *error_code, *ended_at;
    int64_t duration_ms, finished_seq;
};

static void put_call_row(struct parts *p, const struct vg_run *run, const struct call_start *c,
                         const struct call_end *e)
{
    static const struct call_end running = {"running", "null", NULL, NULL, 0, 0};
    const struct call_end *x = e ? e : &running;
    struct vg_jfield f[] = {
        {"tool_call_id", VG_JF_STR, c->id, 0},
        {"run_id", VG_JF_STR, run->run_id, 0},
        {"name", VG_JF_STR, c->name, 0},
        {"status", VG_JF_STR, x->status, 0},
        {"input", VG_JF_RAW, c->input, 0},
        {"output", VG_JF_RAW, x->output, 0},
        {"error_code", VG_JF_STR, x->error_code, 0},
        e ? (struct vg_jfield){"duration_ms", VG_JF_INT, NULL, x->duration_ms}
          : (struct vg_jfield){"duration_ms", VG_JF_RAW, "null", 0},
        {"started_at", VG_JF_STR, c->started_at[0] ? c->started_at : NULL, 0},
        {"ended_at", VG_JF_STR, x->ended_at, 0},
        {"started_sequence", VG_JF_INT, NULL, c->started_seq},
        e ? (struct vg_jfield){"finished_sequence", VG_JF_INT, NULL, x->finished_seq}
          : (struct vg_jfield){"finished_sequence", VG_JF_RAW, "null", 0},
        {"operation_id", VG_JF_STR, c->operation_id, 0}};
    size_t n = VG_ARRAY_LEN(f);
    if (e) /* the output is the end record's: its place takes the last field */
        f[5] = f[--n];
    part_start(p);
    part_end(p, vg_json_put_fields(&p->b, f, n));
}

static vigil_code start_call(struct vg_run *run, const char *name, const char *operation_id,
                             const char *input_json, const char *via, int keep, const char *id,
                             char out_id[37], vigil_error *err)
{
    json_t *body = NULL;
    struct vg_buf in = {0};
    struct parts p = {.n = 0};
    struct call_start *c = NULL;
    vigil_code rc;
    if (!name || !*name)
        return VG_FAIL(err, VIGIL_EINVAL, "a tool call needs a tool name");
    if (!opt_ok(operation_id))
        return VG_FAIL(err, VIGIL_EINVAL, "a tool call's operation id must not be empty");
    vg_buf_init(&p.b, VG_BUF_DEFAULT_MAX);
    if ((rc = canonical_text_into(&in, input_json, "tool input", "a tool input", err)) ||
        (rc = body_in_place(run, &body, err)))
        goto out;
    c = vg_calloc(1, sizeof *c);
    if (!c || !(c->name = vg_strdup(name)) ||
        (operation_id && !(c->operation_id = vg_strdup(operation_id))) ||
        add_int(body, "tool_calls", 1)) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory building a tool call trace");
        goto out;
    }
    if (id) /* the caller's id for the call (its action message's) */
        snprintf(c->id, sizeof c->id, "%s", id);
    else
        vg_ids_new(run->ids, c->id);
    vg_time_format_ms(c->started_at, vg_clock_now_ms(run->clock));
    c->input = in.data; /* borrowed until it is taken below */
    c->started_seq = c->seq = run->next_seq;
    struct vg_jfield tc[6] = {{"tool_call_id", VG_JF_STR, c->id, 0},
                              {"name", VG_JF_STR, name, 0},
                              {"status", VG_JF_STR, "running", 0},
                              {"input", VG_JF_RAW, in.data, 0}};
    size_t n = 4;
    if (operation_id)
        tc[n++] = (struct vg_jfield){"operation_id", VG_JF_STR, operation_id, 0};
    if (via)
        tc[n++] = (struct vg_jfield){"via", VG_JF_STR, via, 0};
    part_start(&p);
    part_end(&p, vg_json_put_fields(&p.b, tc, n));
    put_telemetry(&p, body, name);
    if ((rc = parts_finish(&p, "a tool call trace", err)))
        goto out;
    struct vg_jfield f[] = {{"activity", VG_JF_STR, "executing", 0},
                            {"tool_call", VG_JF_RAW, part(&p, 0), 0},
                            {"capabilities", VG_JF_RAW, "{\"tool_call_active\":true}", 0},
                            {"telemetry", VG_JF_RAW, part(&p, 1), 0}};
    struct extra x = {.new_body = body, .keep_start = keep};
    call_start_free(run->call);
    run->call = NULL;
    /* The record is the call: its id is the call's (tool_calls.c reads calls from records). */
    rc = append_any(run, "activity.updated", NULL,
                    &(struct text_payload){f, VG_ARRAY_LEN(f), NULL, c->id}, &x, NULL, err);
    if (rc == VIGIL_OK) {
        c->input = vg_buf_detach(&in, NULL);
        if (out_id)
            memcpy(out_id, c->id, 37);
        run->call = c;
        c = NULL;
    }
out:
    run->stale |= body && rc != VIGIL_OK; /* the body was changed in place */
    if (c)
        c->input = NULL; /* still the buffer's */
    call_start_free(c);
    vg_buf_release(&in);
    vg_buf_release(&p.b);
    json_decref(body);
    return rc;
}

vigil_code vg_journal_tool_call_started(struct vg_run *run, const char *name,
                                        const char *operation_id, const char *input_json,
                                        char out_id[37], vigil_error *err)
{
    return start_call(run, name, operation_id, input_json, NULL, 0, NULL, out_id, err);
}

vigil_code vg_journal_tool_call_started_via(struct vg_run *run, const char *name, const char *via,
                                            const char *input_json, char out_id[37],
                                            vigil_error *err)
{
    if (!via || !*via)
        return VG_FAIL(err, VIGIL_EINVAL, "a call made through another needs its via key");
    return start_call(run, name, NULL, input_json, via, 0, NULL, out_id, err);
}

vigil_code vg_journal_tool_call_started_in(struct vg_run *run, const char *name,
                                           const char *operation_id, const char *input_json,
                                           char out_id[37], vigil_error *err)
{
    return start_call(run, name, operation_id, input_json, NULL, 1, NULL, out_id, err);
}

vigil_code vg_journal_tool_call_started_as(struct vg_run *run, const char *name,
                                           const char *operation_id, const char *input_json,
                                           const char *id, vigil_error *err)
{
    if (!vg_id_valid(id))
        return VG_FAIL(err, VIGIL_EINVAL, "a tool call's id must be a UUID");
    return start_call(run, name, operation_id, input_json, NULL, 1, id, NULL, err);
}

vigil_code vg_journal_kept_take(struct vg_run *run, const char *record_id, char **kept_json,
                                vigil_error *err)
{
    *kept_json = NULL;
    if (!run || !run->kept || !record_id || strcmp(run->kept->id, record_id) != 0)
        return VIGIL_OK;
    vigil_code rc = vg_journal_end_pack(run->agent_id, run->run_id, run->kept->id, run->kept->seq,
                                        run->kept->at, run->kept->text, NULL, kept_json, err);
    if (rc == VIGIL_OK)
        kept_free(run);
    return rc;
}

/* A tool call's start as its row holds it (l: the row, or the row derived from the journal
 * with rev 0), for finishing a call another handle started. */
static vigil_code call_of_row(struct vg_run *run, const char *id, struct loaded l,
                              struct call_start **out, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    const char *rid = vg_jstr(l.body, "run_id"), *status = vg_jstr(l.body, "status");
    const char *name = vg_jstr(l.body, "name"), *op = vg_jstr(l.body, "operation_id");
    const char *at = vg_jstr(l.body, "started_at");
    struct call_start *c = NULL;
    if (!rid || strcmp(rid, run->run_id) != 0 || !status || strcmp(status, "running") != 0) {
        rc = VG_FAIL(err, VIGIL_ESTATE, "tool call \"%s\" is not running in this run", id);
    } else if (!name || !*name) {
        rc = VG_FAIL(err, VIGIL_ECORRUPT, "stored tool call \"%s\" has no name", id);
    } else if (!(c = vg_calloc(1, sizeof *c)) || !(c->name = vg_strdup(name)) ||
               (op && !(c->operation_id = vg_strdup(op))) ||
               !(c->input = vg_journal_canonical(json_object_get(l.body, "input")
                                                     ? json_object_get(l.body, "input")
                                                     : json_null()))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading tool call \"%s\"", id);
    } else {
        snprintf(c->id, sizeof c->id, "%s", id);
        snprintf(c->started_at, sizeof c->started_at, "%s", at ? at : "");
        c->started_seq = vg_jint(l.body, "started_sequence");
        c->seq = l.seq;
        c->rev = l.rev;
        *out = c;
        c = NULL;
    }
    call_start_free(c);
    json_decref(l.body);
    return rc;
}

/* A tool call's start, for finishing a call another handle started: its row in a store written
 * before Session 29, else its start record (tool_calls.c). */
static vigil_code load_call(struct vg_run *run, const char *id, struct call_start **out,
                            vigil_error *err)
{
    struct loaded l;
    vigil_code rc = load_json(run->store, TOOL_KIND, id, &l, err);
    if (rc == VIGIL_ENOTFOUND) {
        memset(&l, 0, sizeof l);
        rc = vg_journal_call_find(run->store, id, &l.body, &l.seq, err);
    }
    return rc ? rc : call_of_row(run, id, l, out, err);
}

/* Where a call's end goes: a row of its own (message_id NULL), or the toolResult message the
 * caller writes next with that id (*end_out, ends.c). */
struct end_place {
    const char *message_id;
    char **end_out;
};

static vigil_code finish_call(struct vg_run *run, const char *tool_call_id, const char *status,
                              const char *output_json, const char *error_code, int64_t duration_ms,
                              const struct end_place *place, vigil_error *err)
{
    struct vg_buf out = {0};
    struct parts p = {.n = 0};
    struct call_start *c = NULL;
    char at[32], *ref = NULL;
    vigil_code rc;
    if (!tool_call_id || !vg_id_valid(tool_call_id))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid tool call id");
    if (!vg_journal_tool_status_final(status))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "a finished tool call needs a final status: succeeded, failed, denied, "
                       "canceled or crashed");
    if (duration_ms < 0)
        return VG_FAIL(err, VIGIL_EINVAL, "tool call duration must not be negative");
    if (!opt_ok(error_code))
        return VG_FAIL(err, VIGIL_EINVAL, "a tool call's error code must not be empty");
    vg_buf_init(&p.b, VG_BUF_DEFAULT_MAX);
    if ((rc = canonical_text_into(&out, output_json, "tool output", "a tool output", err)))
        goto out;
    if (run->call && strcmp(run->call->id, tool_call_id) == 0) {
        /* This handle started it: its row as stored, taken over (an update that finds the row
         * changed meanwhile fails on its revision). */
        c = run->call;
        run->call = NULL;
    } else if ((rc = load_call(run, tool_call_id, &c, err))) {
        goto out;
    }
    vg_time_format_ms(at, vg_clock_now_ms(run->clock));
    /* In the message written next, when that holds exactly the output; a call with a row keeps
     * its end in a row, as such stores were written. */
    int in_message = place->message_id && !c->rev && strcmp(out.data, output_json) == 0;
    if (in_message)
        ref = vg_strdup(place->message_id);
    else if (!place->message_id) /* the output once: the toolResult message just written */
        ref = vg_journal_output_message(run->store, run->agent_id, vg_jstr(run->body, "thread_id"),
                                        out.data);
    if (in_message && !ref) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory building a tool call trace");
        goto out;
    }
    struct vg_jfield tc[7] = {{"tool_call_id", VG_JF_STR, c->id, 0},
                              {"name", VG_JF_STR, c->name, 0},
                              {"status", VG_JF_STR, status, 0},
                              ref ? (struct vg_jfield){"output_message", VG_JF_STR, ref, 0}
                                  : (struct vg_jfield){"output", VG_JF_RAW, out.data, 0},
                              {"duration_ms", VG_JF_INT, NULL, duration_ms}};
    size_t n = 5;
    if (error_code)
        tc[n++] = (struct vg_jfield){"error_code", VG_JF_STR, error_code, 0};
    if (c->operation_id)
        tc[n++] = (struct vg_jfield){"operation_id", VG_JF_STR, c->operation_id, 0};
    part_start(&p);
    part_end(&p, vg_json_put_fields(&p.b, tc, n));
    if (c->rev) { /* a row of a store written before Session 29 is finished with its call */
        put_call_row(
            &p, run, c,
            &(struct call_end){status, out.data, error_code, at, duration_ms, run->next_seq});
    } else {
        part_start(&p);
        part_end(&p, 0);
    }
    put_telemetry(&p, run->body, NULL);
    if (ref) { /* part 3: the tool call with its output, for the projection */
        tc[3] = (struct vg_jfield){"output", VG_JF_RAW, out.data, 0};
        part_start(&p);
        part_end(&p, vg_json_put_fields(&p.b, tc, n));
    }
    if ((rc = parts_finish(&p, "a tool call trace", err)))
        goto out;
    struct vg_jfield f[] = {{"tool_call", VG_JF_RAW, part(&p, 0), 0},
                            {"capabilities", VG_JF_RAW, "{\"tool_call_active\":false}", 0},
                            {"telemetry", VG_JF_RAW, part(&p, 2), 0}};
    struct vg_jfield la_f[VG_ARRAY_LEN(f)];
    memcpy(la_f, f, sizeof f);
    la_f[0].s = ref ? part(&p, 3) : la_f[0].s;
    struct vg_record tr = {.kind = TOOL_KIND,
                           .id = c->id,
                           .owner = run->agent_id,
                           .k1 = run->run_id,
                           .k2 = status,
                           .seq = c->seq,
                           .at = vg_clock_now_ms(run->clock),
                           .body = part(&p, 1)};
    struct extra x = {.update = c->rev ? &tr : NULL,
                      .update_rev = c->rev,
                      .end_out = in_message ? place->end_out : NULL,
                      .end_prev = c->id};
    rc = append_any(run, "activity.updated", NULL,
                    &(struct text_payload){f, VG_ARRAY_LEN(f), ref ? la_f : NULL,
                                           in_message ? place->message_id : NULL},
                    &x, NULL, err);
out:
    call_start_free(c);
    vg_free(ref);
    vg_buf_release(&out);
    vg_buf_release(&p.b);
    return rc;
}

vigil_code vg_journal_tool_call_finished(struct vg_run *run, const char *tool_call_id,
                                         const char *status, const char *output_json,
                                         const char *error_code, int64_t duration_ms,
                                         vigil_error *err)
{
    return finish_call(run, tool_call_id, status, output_json, error_code, duration_ms,
                       &(struct end_place){NULL, NULL}, err);
}

vigil_code vg_journal_tool_call_finished_in(struct vg_run *run, const char *tool_call_id,
                                            const char *status, const char *output_json,
                                            const char *error_code, int64_t duration_ms,
                                            const char *message_id, char **end_json,
                                            vigil_error *err)
{
    *end_json = NULL;
    if (!message_id || !vg_id_valid(message_id) || !output_json)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "a tool call's end in its message needs its id and output");
    return finish_call(run, tool_call_id, status, output_json, error_code, duration_ms,
                       &(struct end_place){message_id, end_json}, err);
}

/* Whether a policy decision of this kind rejects the effect: denials and refusals do;
 * approvals asked for or granted are recorded. */
static int policy_rejects(const char *kind)
{
    return kind && (strcmp(kind, "approval-denied") == 0 || strcmp(kind, "budget-refusal") == 0 ||
                    strcmp(kind, "kill-switch-refusal") == 0 || strcmp(kind, "spawn-denied") == 0);
}

/* A policy decision's payload (decision_id, action, reason, policy {kind, tool, operation_id}):
 * a new object, NULL when out of memory. */
static json_t *policy_payload(struct vg_run *run, const char *kind, const char *tool,
                              const char *operation_id, const char *reason)
{
    char did[37];
    vg_ids_new(run->ids, did);
    json_t *rec = json_object(), *pol = json_object();
    /* The keys are ASCII constants, and the id and action ASCII that vigil made; the kind is
     * checked against the registry's names when the record is validated. */
    if (!rec || !pol || json_object_set_new_nocheck(rec, "decision_id", json_string_nocheck(did)) ||
        json_object_set_new_nocheck(
            rec, "action", json_string_nocheck(policy_rejects(kind) ? "reject" : "record-only")) ||
        vg_jset_str(rec, "reason", reason) || vg_jset_str(pol, "kind", kind) ||
        vg_jset_str(pol, "tool", tool) || vg_jset_str(pol, "operation_id", operation_id) ||
        json_object_set_nocheck(rec, "policy", pol)) {
        json_decref(rec);
        rec = NULL;
    }
    json_decref(pol);
    return rec;
}

vigil_code vg_journal_policy_decision(struct vg_run *run, const char *kind, const char *tool,
                                      const char *operation_id, const char *reason,
                                      vigil_error *err)
{
    json_t *pol = json_pack("{s:s?}", "kind", kind);
    if (!pol || vg_jset_str(pol, "tool", tool) || vg_jset_str(pol, "operation_id", operation_id)) {
        json_decref(pol);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory building a policy decision");
    }
    struct vg_journal_decision d = {.action = policy_rejects(kind) ? "reject" : "record-only",
                                    .reason = reason};
    vigil_code rc = decide(run, &d, pol, err);
    json_decref(pol);
    return rc;
}

vigil_code vg_journal_policy_decisions(struct vg_run *run, const struct vg_journal_policy *d,
                                       size_t n, const char *tool, const char *operation_id,
                                       vigil_error *err)
{
    json_t *list = json_array(), *rec = json_object();
    int bad = !list || !rec || json_object_set_nocheck(rec, "decisions", list);
    for (size_t i = 0; i < n && !bad; i++)
        bad = json_array_append_new(
            list, policy_payload(run, d[i].kind, tool, operation_id, d[i].reason));
    json_decref(list);
    vigil_code rc = bad ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory building policy decisions")
                        : append(run, "decisions.recorded", rec, NULL, NULL, err);
    json_decref(rec);
    return rc;
}
