/*
 * ends.c: a tool call's end record kept in its toolResult message's row, its start record in its
 * action message's row (the same way: "journal_start", the message's id the call's), and a model
 * call's record in the row of the thought message that holds the model's answer
 * ("journal_call", the message's id the record's). Under
 * the loop a call's result message and the journal's end of the call are written in one
 * transaction; the end record was a row of its own, some 240 bytes a tool step with its keys, row
 * header and index entries (docs/internals/PERF.md, "Session 30: the finished record merged"). Its
 * id is now the message's, and the message carries it as the member "journal_end": [sequence,
 * occurred_at ms, the record's stored form], the stored form being what the store keeps of a
 * journal row's body (store/body.h: without the values its columns hold, its trace objects as
 * shapes), so reading it back with the row's columns gives the record's bytes.
 *
 * Every reader of a run's journal rows reads through vg_journal_scan and vg_journal_count,
 * which put such ends back among the rows at their sequence, as rows of their own would have
 * been: replay and vg_journal_load, export, the record count, pruning, the tool call readers,
 * recovery's open calls and the event poller's follow. A row at the same sequence wins (an
 * import of an exported end writes it as a row). docs/internals/JOURNAL.md, "A tool call's end
 * in its result message".
 */
#include "base/common.h"

#include "base/jscan.h"
#include "base/json.h"
#include "journal/journal_int.h"
#include "store/body.h"
#include "store/store.h"

#define MESSAGE_KIND "message"
#define RESULT_TYPE "toolResult"
#define END_MEMBER "journal_end"
#define ACTION_TYPE "action"
#define START_MEMBER "journal_start"
#define THOUGHT_TYPE "thought"
#define CALL_MEMBER "journal_call"
#define END_TYPE "activity.updated"
/* A run's messages are written after its start; a message older than this before the run's
 * start time ends the search (clock reads of two ports may differ by a little). */
#define START_SLACK_MS 1000
#define ID_MAX 201 /* a record id's bytes and its NUL */

vigil_code vg_journal_end_pack(const char *agent_id, const char *run_id, const char *record_id,
                               int64_t seq, int64_t at, const char *text, const char *prev,
                               char **out, vigil_error *err)
{
    struct vg_record r = {.kind = JOURNAL_KIND,
                          .id = record_id,
                          .owner = agent_id,
                          .k1 = run_id,
                          .k2 = END_TYPE,
                          .seq = seq,
                          .at = at,
                          .body = text};
    struct vg_buf packed, b;
    vg_buf_init(&packed, VG_BUF_DEFAULT_MAX);
    vg_buf_init(&b, VG_BUF_DEFAULT_MAX);
    int differs = vg_body_pack_prev(&r, prev, &packed);
    vg_buf_putc(&b, '[');
    vg_json_put_int(&b, seq);
    vg_buf_putc(&b, ',');
    vg_json_put_int(&b, at);
    vg_buf_putc(&b, ',');
    vg_buf_puts(&b, differs ? packed.data : text);
    if (differs == 2) { /* the form stands for prev: the message's reader must know which */
        vg_buf_putc(&b, ',');
        vg_json_put_string(&b, prev);
    }
    vg_buf_putc(&b, ']');
    vigil_code rc = packed.fail
                        ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory storing a tool call's end")
                        : vg_buf_finish(&b, err);
    vg_buf_release(&packed);
    if (rc == VIGIL_OK)
        *out = vg_buf_detach(&b, NULL);
    else
        vg_buf_release(&b);
    return rc;
}

/* ---- reading them back ------------------------------------------------------------------------
 */

struct end {
    int64_t seq, at;
    char id[ID_MAX];
    char *body; /* the record's text */
};

struct ends {
    struct end *v;
    size_t n, cap;
    int64_t counted; /* records counted without reading them (KEPT_COUNT) */
};

/* Which kept records a reader asks for (ends_of_run). */
enum {
    KEPT_ENDS = 1,   /* tool calls' ends, in toolResult messages */
    KEPT_STARTS = 2, /* tool calls' starts, in action messages */
    KEPT_CALLS = 4,  /* model calls, in thought messages */
    KEPT_ALL = 7,
    KEPT_COUNT = 8 /* counted only (ends.counted), none read */
};

static void ends_free(struct ends *e)
{
    for (size_t i = 0; i < e->n; i++)
        vg_free(e->v[i].body);
    vg_free(e->v);
}

struct run_facts {
    char owner[ID_MAX], thread[256];
    int64_t start_ms, tool_calls, model_calls;
    int found;
};

/* A count member's value as vg_jint reads it: an integer's, else 0 (a real declines: jansson
 * reads it). */
static int scan_count(struct vg_jscan *sc, int64_t *v)
{
    *v = 0;
    return vg_jscan_peek(sc) == '0' ? vg_jscan_int(sc, v) : vg_jscan_skip_span(sc);
}

/* thread_id (*thread: where it starts in b, (size_t)-1 when absent or not a string),
 * tool_calls and model_calls of a run's body read without building its tree: the event poller
 * reads each run's facts a few times a turn, and decoding the whole record for three members
 * was about 110,000 instructions each time (docs/internals/PERF.md, session 38). -1: the scan
 * declined (jansson then reads it, with the same answers). */
static int facts_scan(const char *body, struct vg_buf *b, size_t *thread, int64_t *tools,
                      int64_t *models)
{
    struct vg_jscan sc;
    const char *key;
    size_t len;
    int r;
    *thread = (size_t)-1;
    *tools = *models = 0;
    vg_jscan_init(&sc, body, strlen(body));
    if (vg_jscan_enter(&sc, '{') < 0)
        return -1;
    while ((r = vg_jscan_next(&sc, &key, &len)) == 1) {
        if (vg_jscan_key_is(key, len, "thread_id")) {
            *thread = (size_t)-1;
            r = vg_jscan_peek(&sc) == '"' ? vg_jscan_string(&sc, b, thread)
                                          : vg_jscan_skip_span(&sc);
        } else if (vg_jscan_key_is(key, len, "tool_calls")) {
            r = scan_count(&sc, tools);
        } else if (vg_jscan_key_is(key, len, "model_calls")) {
            r = scan_count(&sc, models);
        } else {
            r = vg_jscan_skip_span(&sc);
        }
        if (r < 0)
            return -1;
    }
    return r < 0 || vg_jscan_end(&sc) < 0 ? -1 : 0;
}

/* The run's thread and owner from a record of it (its run record or its header row); header:
 * the start is the row's time and there is no count to stop at. */
static int facts_from(struct run_facts *f, const struct vg_record *r, int header)
{
    struct vg_buf b;
    size_t at;
    int64_t tools, models;
    json_t *o = NULL;
    const char *thread;
    vg_buf_init(&b, 0);
    if (facts_scan(r->body, &b, &at, &tools, &models) == 0 && !b.fail) {
        thread = at == (size_t)-1 ? NULL : b.data + at;
    } else {
        o = vg_jload(r->body, strlen(r->body), 0, NULL);
        thread = vg_jstr(o, "thread_id");
        tools = vg_jint(o, "tool_calls");
        models = vg_jint(o, "model_calls");
    }
    if (thread && strlen(thread) < sizeof f->thread && strlen(r->owner) < sizeof f->owner) {
        snprintf(f->thread, sizeof f->thread, "%s", thread);
        snprintf(f->owner, sizeof f->owner, "%s", r->owner);
        f->start_ms = header ? r->at : r->seq;
        f->tool_calls = header ? INT64_MAX : tools;
        f->model_calls = header ? INT64_MAX : models;
        f->found = 1;
    }
    json_decref(o);
    vg_buf_release(&b);
    return 1;
}

static int run_cb(void *user, const struct vg_record *r)
{
    return facts_from(user, r, 0);
}

/* A run without its run record yet (an import rebuilds it from the journal it reads here): the
 * thread, owner and start time from its header row, and no count to stop at. */
static int header_cb(void *user, const struct vg_record *r)
{
    return facts_from(user, r, 1);
}

/* The facts ends_of_run needs of run_id: from its run record, else from its header row. */
static vigil_code run_facts_get(struct vg_store *s, const char *owner, const char *run_id,
                                struct run_facts *f, vigil_error *err)
{
    vigil_code rc = vg_store_get(s, RUN_KIND, run_id, run_cb, f, err);
    if (rc != VIGIL_ENOTFOUND)
        return rc;
    struct vg_query q = {
        .kind = JOURNAL_KIND, .owner = owner, .k1 = run_id, .k2 = "journal.header", .limit = 1};
    return vg_store_scan(s, &q, header_cb, f, err);
}

struct collect {
    const char *run_id;
    const struct run_facts *run;
    struct ends *e;
    const char *type;   /* the messages' kind (k2) */
    const char *member; /* the member that keeps a record in them */
    int64_t found;      /* records found in this kind of message */
    int64_t most;       /* the run's records of the kind its messages keep (calls) */
    int count_only;     /* count them (found), read none */
    vigil_code rc;
    vigil_error err;
};

/* The member a message of kind k2 keeps a journal record in, or NULL. */
static const char *member_of(const char *k2)
{
    return !strcmp(k2, RESULT_TYPE)    ? END_MEMBER
           : !strcmp(k2, ACTION_TYPE)  ? START_MEMBER
           : !strcmp(k2, THOUGHT_TYPE) ? CALL_MEMBER
                                       : NULL;
}

/* What a message says of the record it keeps: the member's text, the run's id and the
 * message's prev_id (its action, for a tool call's end). */
struct kept_in {
    const char *text; /* the member's value in the body, len bytes (0: none) */
    size_t len;
    size_t run_at, prev_at; /* where the run id and prev_id are in buf (prev: -1 for none) */
    struct vg_buf buf;
};

/* The message's kept record (member), run id and prev_id, read with the scanner; the member
 * is taken as its text, so a real number in it (a tool's arguments) is stepped over. */
static int end_member(const char *body, const char *member, struct kept_in *k)
{
    struct vg_jscan sc;
    const char *key;
    size_t len, at = (size_t)-1;
    int r;
    k->len = 0;
    k->prev_at = (size_t)-1;
    vg_buf_reset(&k->buf);
    vg_jscan_init(&sc, body, strlen(body));
    if (vg_jscan_enter(&sc, '{') < 0)
        return -1;
    while ((r = vg_jscan_next(&sc, &key, &len)) == 1) {
        if (vg_jscan_key_is(key, len, member)) {
            k->text = (const char *)sc.p;
            if (vg_jscan_skip_span(&sc) < 0)
                return -1;
            k->len = (size_t)((const char *)sc.p - k->text);
        } else if (vg_jscan_key_is(key, len, "prev_id")) {
            if (vg_jscan_string(&sc, &k->buf, &k->prev_at) < 0)
                return -1;
        } else if (vg_jscan_key_is(key, len, "run_id")) {
            if (vg_jscan_string(&sc, &k->buf, &at) < 0 || at == (size_t)-1)
                return -1;
        } else if (vg_jscan_skip_span(&sc) < 0) {
            return -1;
        }
    }
    if (r < 0 || at == (size_t)-1 || k->buf.fail)
        return -1;
    k->run_at = at;
    return 0;
}

/* A kept record's parts, from the member's text [seq, at, form] (a message's of before Session
 * 34), or without at when it is the message's, and with a last string when the form stands for a
 * prev_id other than the message's: [seq, (at,) form (, "prev")]. */
struct kept_parts {
    int64_t seq, at;
    int has_at;
    const char *form;
    size_t form_len;
    struct vg_buf prev; /* the last string's value (len 0: none) */
};

static int end_parts(const char *text, size_t n, struct kept_parts *p)
{
    struct vg_jscan sc;
    const char *key;
    size_t len, at;
    vg_jscan_init(&sc, text, n);
    if (vg_jscan_enter(&sc, '[') < 0 || vg_jscan_next(&sc, &key, &len) != 1 ||
        vg_jscan_int(&sc, &p->seq) < 0 || vg_jscan_next(&sc, &key, &len) != 1)
        return -1;
    p->has_at = vg_jscan_peek(&sc) == '0';
    if (p->has_at && (vg_jscan_int(&sc, &p->at) < 0 || vg_jscan_next(&sc, &key, &len) != 1))
        return -1;
    p->form = (const char *)sc.p;
    if (vg_jscan_peek(&sc) != '{' || vg_jscan_skip_span(&sc) < 0)
        return -1;
    p->form_len = (size_t)((const char *)sc.p - p->form);
    int r = vg_jscan_next(&sc, &key, &len);
    if (r == 1 && (vg_jscan_string(&sc, &p->prev, &at) < 0 || at != 0 || !p->prev.len ||
                   vg_jscan_next(&sc, &key, &len) != 0))
        return -1;
    return r < 0 ? -1 : 0;
}

/* The record's text from its stored form (owned, freed here), read with the row's columns. */
static char *end_unpack(struct collect *c, const struct vg_record *m, int64_t seq, int64_t at,
                        const char *prev, char *stored, vigil_code *rc)
{
    struct vg_record r = {.kind = JOURNAL_KIND,
                          .id = m->id,
                          .owner = m->owner,
                          .k1 = c->run_id,
                          .k2 = END_TYPE,
                          .seq = seq,
                          .at = at,
                          .body = stored};
    struct vg_buf b;
    vg_buf_init(&b, VG_BUF_DEFAULT_MAX);
    if (vg_body_unpack_prev(&r, prev, &b)) {
        vg_free(stored);
        stored = b.fail ? NULL : vg_buf_detach(&b, NULL);
        if (!stored)
            *rc = VG_FAIL(&c->err, VIGIL_ENOMEM, "out of memory reading a run's journal");
    }
    vg_buf_release(&b);
    return stored;
}

static vigil_code end_add(struct collect *c, const struct vg_record *m, const struct kept_in *k)
{
    struct kept_parts p = {0};
    vg_buf_init(&p.prev, VG_BUF_DEFAULT_MAX);
    if (end_parts(k->text, k->len, &p) < 0) {
        vg_buf_release(&p.prev);
        return VG_FAIL(&c->err, VIGIL_ECORRUPT, "message \"%s\" holds an unreadable journal end",
                       m->id);
    }
    /* The record's time and its call's id, when the member leaves them out, are the message's */
    int64_t at = p.has_at ? p.at : m->at;
    const char *prev = p.prev.len                 ? p.prev.data
                       : k->prev_at != (size_t)-1 ? k->buf.data + k->prev_at
                                                  : NULL;
    vigil_code rc = VIGIL_OK;
    struct ends *e = c->e;
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 16;
        struct end *v = vg_realloc(e->v, cap * sizeof *v);
        if (!v)
            rc = VG_FAIL(&c->err, VIGIL_ENOMEM, "out of memory reading a run's journal");
        else
            e->v = v, e->cap = cap;
    }
    char *stored = rc ? NULL : vg_malloc(p.form_len + 1);
    if (!rc && !stored)
        rc = VG_FAIL(&c->err, VIGIL_ENOMEM, "out of memory reading a run's journal");
    if (!rc) {
        memcpy(stored, p.form, p.form_len);
        stored[p.form_len] = '\0';
        stored = end_unpack(c, m, p.seq, at, prev, stored, &rc);
    }
    if (!rc) {
        struct end *d = &e->v[e->n++];
        d->seq = p.seq;
        d->at = at;
        snprintf(d->id, sizeof d->id, "%s", m->id);
        d->body = stored;
    }
    vg_buf_release(&p.prev);
    return rc;
}
static int collect_cb(void *user, const struct vg_record *r)
{
    struct collect *c = user;
    if (r->at < c->run->start_ms - START_SLACK_MS)
        return 1; /* older than the run */
    char key[32];
    snprintf(key, sizeof key, "\"%s\":", c->member);
    if (strcmp(r->k2, c->type) != 0 || !strstr(r->body, key))
        return 0;
    struct kept_in k;
    vg_buf_init(&k.buf, VG_BUF_DEFAULT_MAX);
    int bad = end_member(r->body, c->member, &k) < 0;
    if (!bad && k.len && strcmp(k.buf.data + k.run_at, c->run_id) == 0) {
        c->rc = c->count_only ? VIGIL_OK : end_add(c, r, &k);
        c->found++;
    }
    vg_buf_release(&k.buf);
    if (bad)
        c->rc = VG_FAIL(&c->err, VIGIL_ECORRUPT, "message \"%s\" cannot be read", r->id);
    return c->rc != VIGIL_OK || c->found >= c->most;
}

static int by_seq(const void *a, const void *b)
{
    const struct end *x = a, *y = b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The records of run_id kept in its messages (the kinds what names), by ascending sequence
 * (none for a run without a thread, or owned by another than owner when owner is set). */
static vigil_code ends_of_run(struct vg_store *s, const char *owner, const char *run_id,
                              unsigned what, struct ends *e, vigil_error *err)
{
    struct run_facts f = {.found = 0};
    memset(e, 0, sizeof *e);
    vigil_code rc = run_facts_get(s, owner, run_id, &f, err);
    if (rc == VIGIL_ENOTFOUND || (!rc && (!f.found || (owner && strcmp(owner, f.owner) != 0))))
        return VIGIL_OK;
    if (rc || (f.tool_calls <= 0 && f.model_calls <= 0))
        return rc;
    /* By k2: the store reads (and puts together) only the result, action and thought messages'
     * bodies: the calls' ends, their starts and the model calls. */
    static const char *const types[] = {RESULT_TYPE, ACTION_TYPE, THOUGHT_TYPE};
    for (size_t i = 0; !rc && i < VG_ARRAY_LEN(types); i++) {
        int64_t most = i < 2 ? f.tool_calls : f.model_calls;
        if (most <= 0 || !(what & (1u << i)))
            continue;
        struct collect c = {.run_id = run_id,
                            .run = &f,
                            .e = e,
                            .type = types[i],
                            .member = member_of(types[i]),
                            .most = most,
                            .count_only = (what & KEPT_COUNT) != 0};
        struct vg_query q = {.kind = MESSAGE_KIND,
                             .owner = f.owner,
                             .k1 = f.thread,
                             .k2 = types[i],
                             .descending = 1};
        rc = vg_store_scan(s, &q, collect_cb, &c, err);
        if (!rc && c.rc) {
            rc = c.rc;
            if (err)
                *err = c.err;
        }
        if (c.count_only)
            e->counted += c.found;
    }
    if (rc) {
        ends_free(e);
        memset(e, 0, sizeof *e);
        return rc;
    }
    if (e->n > 1) /* found newest first, by kind */
        qsort(e->v, e->n, sizeof *e->v, by_seq);
    return VIGIL_OK;
}

/* ---- the merged scan ------------------------------------------------------------------------ */

/* Whether a query over journal rows may see a run's ends at all. */
static int may_hold_ends(const struct vg_query *q)
{
    return strcmp(q->kind, JOURNAL_KIND) == 0 && q->k1 && (!q->k2 || strcmp(q->k2, END_TYPE) == 0);
}

/* Whether an end passes the query's bounds and cursor. */
static int end_wanted(const struct vg_query *q, const struct end *d)
{
    if ((q->has_seq_min && d->seq < q->seq_min) || (q->has_seq_max && d->seq > q->seq_max))
        return 0;
    if (!q->has_after)
        return 1;
    int cmp = d->seq < q->after_seq ? -1 : d->seq > q->after_seq ? 1 : strcmp(d->id, q->after_id);
    return q->descending ? cmp < 0 : cmp > 0;
}

struct merge {
    const struct vg_query *q;
    struct ends *e;
    size_t left; /* ends not yet given (from the front ascending, the back descending) */
    size_t i;    /* the next end's index */
    int given;   /* records given */
    int stopped; /* the caller's callback stopped the scan, or the limit was reached */
    vg_record_cb cb;
    void *user;
    const char *owner;
};

static int give(struct merge *m, const struct vg_record *r)
{
    if (m->stopped)
        return 1;
    if (m->cb(m->user, r))
        m->stopped = 1;
    if (m->q->limit > 0 && ++m->given >= m->q->limit)
        m->stopped = 1;
    return m->stopped;
}

/* The next end in the scan's direction, or NULL. */
static const struct end *peek_end(struct merge *m)
{
    if (!m->left)
        return NULL;
    return &m->e->v[m->q->descending ? m->left - 1 : m->e->n - m->left];
}

/* Give the ends that come before a row at seq (all of them when last), dropping one at the
 * row's own sequence (the row wins). */
static int give_ends_before(struct merge *m, int64_t seq, int last)
{
    const struct end *d;
    while ((d = peek_end(m)) != NULL) {
        int before = m->q->descending ? d->seq > seq : d->seq < seq;
        if (!last && !before) {
            if (d->seq == seq)
                m->left--; /* a row at its sequence */
            break;
        }
        m->left--;
        if (!end_wanted(m->q, d))
            continue;
        struct vg_record r = {.kind = JOURNAL_KIND,
                              .id = d->id,
                              .owner = m->owner,
                              .k1 = m->q->k1,
                              .k2 = END_TYPE,
                              .seq = d->seq,
                              .rev = 1,
                              .at = d->at,
                              .body = d->body};
        if (give(m, &r))
            return 1;
    }
    return 0;
}

static int merge_cb(void *user, const struct vg_record *r)
{
    struct merge *m = user;
    if (give_ends_before(m, r->seq, 0))
        return 1;
    return give(m, r);
}

/* vg_journal_scan of the rows and the kept records what names. */
static vigil_code scan_kept(struct vg_store *s, const struct vg_query *q, unsigned what,
                            vg_record_cb cb, void *user, vigil_error *err)
{
    struct ends e;
    vigil_code rc;
    if (!may_hold_ends(q))
        return vg_store_scan(s, q, cb, user, err);
    if ((rc = ends_of_run(s, q->owner, q->k1, what, &e, err)))
        return rc;
    if (e.n == 0)
        return vg_store_scan(s, q, cb, user, err);
    char owner[ID_MAX];
    snprintf(owner, sizeof owner, "%s", q->owner ? q->owner : "");
    struct vg_query all = *q;
    all.limit = 0; /* the merge counts what it gives */
    struct merge m = {.q = q, .e = &e, .left = e.n, .cb = cb, .user = user, .owner = owner};
    if (!q->owner) { /* every end's owner is its run's */
        struct run_facts f = {.found = 0};
        if ((rc = run_facts_get(s, NULL, q->k1, &f, err)) == VIGIL_OK)
            snprintf(owner, sizeof owner, "%s", f.owner);
    }
    if (!rc)
        rc = vg_store_scan(s, &all, merge_cb, &m, err);
    if (!rc && !m.stopped)
        give_ends_before(&m, 0, 1);
    ends_free(&e);
    return rc;
}

vigil_code vg_journal_scan(struct vg_store *s, const struct vg_query *q, vg_record_cb cb,
                           void *user, vigil_error *err)
{
    return scan_kept(s, q, KEPT_ALL, cb, user, err);
}

vigil_code vg_journal_scan_tool_records(struct vg_store *s, const struct vg_query *q,
                                        vg_record_cb cb, void *user, vigil_error *err)
{
    return scan_kept(s, q, KEPT_ENDS | KEPT_STARTS, cb, user, err);
}

vigil_code vg_journal_count(struct vg_store *s, const struct vg_query *q, int64_t *out,
                            vigil_error *err)
{
    struct ends e;
    vigil_code rc = vg_store_count(s, q, out, err);
    if (rc || !may_hold_ends(q) || q->has_after || q->has_seq_min || q->has_seq_max)
        return rc; /* bounded counts are not asked of a run's journal */
    if ((rc = ends_of_run(s, q->owner, q->k1, KEPT_ALL | KEPT_COUNT, &e, err)))
        return rc;
    *out += e.counted; /* no row repeats a kept record: import writes none for one (export.c) */
    ends_free(&e);
    return VIGIL_OK;
}

/* The record kept in one message (for its run_id, or any run when run_id is NULL: then
 * c->run_id is set to the message's run, held in k.buf). */
struct find {
    struct collect c;
    struct kept_in k;
    char owner[ID_MAX];
};

static int find_cb(void *user, const struct vg_record *r)
{
    struct find *fd = user;
    struct collect *c = &fd->c;
    const char *member = member_of(r->k2);
    int bad = !member || end_member(r->body, member, &fd->k) < 0;
    const char *run = fd->k.buf.data + fd->k.run_at;
    if (!bad && fd->k.len && (!c->run_id || strcmp(run, c->run_id) == 0)) {
        c->run_id = run;
        snprintf(fd->owner, sizeof fd->owner, "%s", r->owner);
        c->rc = end_add(c, r, &fd->k);
    }
    return 1;
}

/* The record kept in message record_id (of run_id, or any run when NULL): e holds it, or none. */
static vigil_code kept_find(struct vg_store *s, const char *record_id, const char *run_id,
                            struct find *fd, struct ends *e, vigil_error *err)
{
    memset(fd, 0, sizeof *fd);
    fd->c.run_id = run_id;
    fd->c.e = e;
    vg_buf_init(&fd->k.buf, VG_BUF_DEFAULT_MAX);
    vigil_code rc = vg_store_get(s, MESSAGE_KIND, record_id, find_cb, fd, err);
    if (rc == VIGIL_ENOTFOUND)
        rc = VIGIL_OK;
    if (!rc && fd->c.rc) {
        rc = fd->c.rc;
        if (err)
            *err = fd->c.err;
    }
    return rc;
}

vigil_code vg_journal_end_find(struct vg_store *s, const char *record_id, const char *run_id,
                               char **out, vigil_error *err)
{
    struct ends e = {0};
    struct find fd;
    *out = NULL;
    if (!record_id || !run_id)
        return VIGIL_OK;
    vigil_code rc = kept_find(s, record_id, run_id, &fd, &e, err);
    if (!rc && e.n) {
        *out = e.v[0].body;
        e.v[0].body = NULL;
    }
    vg_buf_release(&fd.k.buf);
    ends_free(&e);
    return rc;
}

vigil_code vg_journal_kept_get(struct vg_store *s, const char *record_id, vg_record_cb cb,
                               void *user, vigil_error *err)
{
    struct ends e = {0};
    struct find fd;
    vigil_code rc = kept_find(s, record_id, NULL, &fd, &e, err);
    if (!rc && !e.n)
        rc = VG_FAIL(err, VIGIL_ENOTFOUND, "journal record \"%.60s\" not found", record_id);
    if (!rc) {
        struct vg_record r = {.kind = JOURNAL_KIND,
                              .id = e.v[0].id,
                              .owner = fd.owner,
                              .k1 = fd.c.run_id,
                              .k2 = END_TYPE,
                              .seq = e.v[0].seq,
                              .rev = 1,
                              .at = e.v[0].at,
                              .body = e.v[0].body};
        cb(user, &r);
    }
    vg_buf_release(&fd.k.buf);
    ends_free(&e);
    return rc;
}

/* Pruning a model call's record kept in its thought message: the message without its
 * "journal_call" member (the record goes as its row would; the message's own fields stay). */
vigil_code vg_journal_kept_drop(struct vg_store *s, const char *record_id, vigil_error *err)
{
    struct vg_record *m = NULL;
    vigil_code rc = vg_store_get_copy(s, MESSAGE_KIND, record_id, &m, err);
    if (rc)
        return rc;
    static const char key[] = ",\"" CALL_MEMBER "\":";
    struct kept_in k;
    struct vg_buf b;
    vg_buf_init(&k.buf, VG_BUF_DEFAULT_MAX);
    vg_buf_init(&b, VG_BUF_DEFAULT_MAX);
    const char *text = NULL;
    size_t n = 0;
    if (strcmp(m->k2, THOUGHT_TYPE) == 0 && end_member(m->body, CALL_MEMBER, &k) == 0)
        text = k.text, n = k.len;
    if (!n || text - m->body < (ptrdiff_t)(sizeof key - 1) ||
        memcmp(text - (sizeof key - 1), key, sizeof key - 1) != 0) {
        rc = VG_FAIL(err, VIGIL_ENOTFOUND, "journal record \"%.60s\" not found", record_id);
    } else {
        vg_buf_append(&b, m->body, (size_t)(text - m->body) - (sizeof key - 1));
        vg_buf_puts(&b, text + n);
        if (!(rc = vg_buf_finish(&b, err))) {
            struct vg_record r = *m;
            r.body = b.data;
            rc = vg_store_update(s, &r, m->rev, err);
        }
    }
    vg_buf_release(&k.buf);
    vg_buf_release(&b);
    vg_free(m);
    return rc;
}
