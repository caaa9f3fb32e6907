/*
 * rows.c: a step's messages in one row (docs/internals/STORE.md, "A step's messages in one
 * row"). An action or toolResult message whose id was made from the thought before it (the
 * thought's id with its last hex digit 1..f in place of 0) is not a row of its own: it is
 * appended to that thought's row when the row is its thread's last, so a thread's rows never
 * overlap in (seq, id). The wrappers (store.c) give every reader one record a message, with the
 * columns and body it was written with.
 *
 * A row with members is stored as {"~":[[k,dseq,dat,"a",flags,MEMBER],...],REST}: {REST} is the
 * thought's own stored body (body.h), k the member id's digit, dseq and dat its seq and time less
 * the row's, "a" an action and "t" a toolResult, MEMBER its body as body.h stores a message's,
 * less its prev_id when that is the record before it in the row (flags bit 1) and its run_id when
 * that is the thought's (bit 2); its shapes' PREV holes stand for that prev_id. With bit 4 the
 * entry is [k,dseq,dat,"t",flags,[at,from,len],MEMBER]: a quoted string of the member as packed
 * (its operation id, which the action before it holds too) is left out at byte `at` of MEMBER
 * and read from bytes from..from+len of the member before it, as stored. A plain row whose
 * stored text begins with {"~": is stored behind {"~":[], (read back by taking that off).
 *
 * Sections: ids and the row's text; a row's records; reads; the thread's last row, as this
 * connection wrote it; writes.
 */
#include "base/common.h"

#include <errno.h>

#include "os/ids.h"
#include "store/body.h"
#include "store/store.h"
#include "store/store_int.h"

#define ROW_KIND "message"
#define MARK "{\"~\":["
#define MARK_LEN 6
#define MEMBERS_MAX 15
#define FLAG_PREV 1
#define FLAG_RUN 2
#define FLAG_REF 4
/* The least length of a string a member names in the member before it rather than repeating it:
 * a reference costs some 12 bytes; a step's repeated ids are 22 (a UUID's) or 43 (a SHA-256's). */
#define REF_MIN 20
#define ID_LEN 36
#define RUN_ID_MAX 201 /* an id of the store: at most 200 bytes */
/* A host's least seq (an agent's messages count from 1): a read from a seq_min at or below it
 * has no row below it to look into. */
#define HOST_SEQ_MIN 1

/* ---- ids and the row's text ------------------------------------------------------------------ */

int vg_rows_on(struct vg_store *s, const char *kind)
{
    if (strcmp(kind, ROW_KIND) != 0)
        return 0;
    if (s->member_rows == 0)
        s->member_rows =
            s->methods->control(s, VG_STORE_CTRL_MEMBER_ROWS, &s->member_refs, NULL) == VIGIL_OK
                ? 1
                : -1;
    return s->member_rows > 0;
}

static int hex_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The digit (1..15) of a member id, its host's id into host; 0 for any other id. */
static int member_of(const char *id, char host[ID_LEN + 1])
{
    if (strlen(id) != ID_LEN || !vg_id_valid(id))
        return 0;
    int k = hex_value(id[ID_LEN - 1]);
    if (k <= 0)
        return 0;
    memcpy(host, id, ID_LEN + 1);
    host[ID_LEN - 1] = '0';
    return k;
}

static void member_id(const char *host, int k, char out[ID_LEN + 1])
{
    memcpy(out, host, ID_LEN + 1);
    out[ID_LEN - 1] = "0123456789abcdef"[k];
}

static int member_type(const char *k2)
{
    return k2 && (!strcmp(k2, "action") || !strcmp(k2, "toolResult"));
}

struct entry {
    int k, flags;
    int64_t dseq, dat;
    char type;
    const char *body; /* the member's stored text, blen bytes (not terminated) */
    size_t blen;
    int64_t ref_at, ref_from, ref_len; /* FLAG_REF: the string left out of body (0 0 0 without) */
};

struct row {
    int marked, n;
    struct entry e[MEMBERS_MAX];
    const char *rest; /* after the list: ",..." or "}" */
};

static int read_int(const char **p, int64_t *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(*p, &end, 10);
    if (end == *p || errno || *end != ',')
        return 0;
    *v = x;
    *p = end + 1;
    return 1;
}

/* A reference [at,from,len], at *p (after the flags): 0 when it does not parse. */
static int read_ref(const char **p, struct entry *e)
{
    const char *q = *p;
    char *end;
    if (*q++ != '[' || !read_int(&q, &e->ref_at) || !read_int(&q, &e->ref_from))
        return 0;
    errno = 0;
    e->ref_len = strtoll(q, &end, 10);
    if (end == q || errno || end[0] != ']' || end[1] != ',' || e->ref_at < 1 || e->ref_from < 0 ||
        e->ref_len < 2)
        return 0;
    *p = end + 2;
    return 1;
}

/* One entry [k,dseq,dat,"a",flags,MEMBER] (or [...,flags,[at,from,len],MEMBER]) at *p. */
static int read_entry(const char **p, const char *end, struct entry *e)
{
    int64_t k, flags;
    const char *q = *p;
    if (*q++ != '[' || !read_int(&q, &k) || !read_int(&q, &e->dseq) || !read_int(&q, &e->dat))
        return 0;
    if (q[0] != '"' || (q[1] != 'a' && q[1] != 't') || q[2] != '"' || q[3] != ',')
        return 0;
    e->type = q[1];
    q += 4;
    e->ref_at = e->ref_from = e->ref_len = 0;
    if (!read_int(&q, &flags) || k < 1 || k > MEMBERS_MAX)
        return 0;
    if ((flags & FLAG_REF) && !read_ref(&q, e))
        return 0;
    if (*q != '{')
        return 0;
    const char *v = vg_body_value_end(q, end);
    if (!v || v == q || *v != ']')
        return 0;
    e->k = (int)k;
    e->flags = (int)flags;
    e->body = q;
    e->blen = (size_t)(v - q);
    *p = v + 1;
    return 1;
}

/* Whether entry e's reference lies within its text and the text of the entry before it (b,
 * NULL for the first). */
static int ref_valid(const struct entry *e, const struct entry *b)
{
    if (!(e->flags & FLAG_REF))
        return 1;
    return b && (uint64_t)e->ref_at < e->blen && (uint64_t)e->ref_from <= b->blen &&
           (uint64_t)e->ref_len <= b->blen - (uint64_t)e->ref_from;
}

/* Member e's text as packed: its stored text with the string it names put back (b the entry
 * before it, checked by ref_valid). */
static void member_text(const struct entry *e, const struct entry *b, struct vg_buf *out)
{
    if (!(e->flags & FLAG_REF)) {
        vg_buf_append(out, e->body, e->blen);
        return;
    }
    vg_buf_append(out, e->body, (size_t)e->ref_at);
    vg_buf_append(out, b->body + e->ref_from, (size_t)e->ref_len);
    vg_buf_append(out, e->body + e->ref_at, e->blen - (size_t)e->ref_at);
}

/* Parse a stored row's text: 1 (marked or not), 0 when a marked text does not parse (it is then
 * read as stored). */
static int row_parse(const char *body, struct row *r)
{
    r->marked = r->n = 0;
    if (strncmp(body, MARK, MARK_LEN) != 0)
        return 1;
    const char *p = body + MARK_LEN, *end = body + strlen(body);
    while (*p != ']') {
        if (r->n == MEMBERS_MAX || !read_entry(&p, end, &r->e[r->n]) ||
            !ref_valid(&r->e[r->n], r->n ? &r->e[r->n - 1] : NULL))
            return 0;
        r->n++;
        if (*p == ',')
            p++;
        else if (*p != ']')
            return 0;
    }
    p++;
    if (*p != ',' && *p != '}')
        return 0;
    r->rest = p;
    r->marked = 1;
    return 1;
}

/* The host's own stored text of a marked row. */
static void host_stored(const struct row *pr, struct vg_buf *out)
{
    vg_buf_putc(out, '{');
    vg_buf_puts(out, pr->rest[0] == ',' ? pr->rest + 1 : "}");
}

/* ---- a row's records ------------------------------------------------------------------------- */

struct records {
    int n;
    struct vg_record rec[MEMBERS_MAX + 1];
    char ids[MEMBERS_MAX + 1][ID_LEN + 1];
    struct vg_buf body[MEMBERS_MAX + 1];
};

static void records_release(struct records *rs)
{
    for (int i = 0; i < rs->n; i++)
        vg_buf_release(&rs->body[i]);
    rs->n = 0;
}

/* stored's body as written into out (body.h), prev the PREV holes' text (or NULL). */
static void unpack_into(const struct vg_record *stored, const char *prev, struct vg_buf *out)
{
    if (!vg_body_unpack_prev(stored, prev, out))
        vg_buf_puts(out, stored->body);
}

/* Member e of row sr as written (b the entry before it, NULL for the first), its prev the
 * record before it, run the host's run_id. */
static void member_written(const struct vg_record *sr, const struct entry *e, const struct entry *b,
                           const char *id, const char *prev, const char *run, struct vg_record *m,
                           struct vg_buf *out)
{
    struct vg_buf text, a;
    vg_buf_init(&text, VG_BUF_DEFAULT_MAX);
    vg_buf_init(&a, VG_BUF_DEFAULT_MAX);
    *m = *sr;
    m->id = id;
    m->k2 = e->type == 'a' ? "action" : "toolResult";
    m->seq = sr->seq + e->dseq;
    m->at = sr->at + e->dat;
    m->rev = 1;
    member_text(e, b, &text);
    m->body = text.data ? text.data : "";
    unpack_into(m, prev, &a);
    vg_buf_reset(&text);
    if (!(e->flags & FLAG_PREV) ||
        !vg_body_add_string(a.data ? a.data : "", "prev_id", prev, &text))
        vg_buf_puts(&text, a.data ? a.data : "");
    if (!(e->flags & FLAG_RUN) ||
        !vg_body_add_string(text.data ? text.data : "", "run_id", run, out))
        vg_buf_puts(out, text.data ? text.data : "");
    if (text.fail || a.fail)
        out->fail = VIGIL_ENOMEM;
    vg_buf_release(&text);
    vg_buf_release(&a);
}

/* The records of stored row sr (parsed as pr, marked), bodies as written: 0 when out of memory. */
static int row_records(const struct vg_record *sr, const struct row *pr, struct records *rs)
{
    struct vg_buf stored;
    char run[RUN_ID_MAX] = "";
    vg_buf_init(&stored, VG_BUF_DEFAULT_MAX);
    host_stored(pr, &stored);
    rs->n = pr->n + 1;
    for (int i = 0; i < rs->n; i++)
        vg_buf_init(&rs->body[i], VG_BUF_DEFAULT_MAX);
    rs->rec[0] = *sr;
    rs->rec[0].rev = 1;
    rs->rec[0].body = stored.data ? stored.data : "";
    unpack_into(&rs->rec[0], NULL, &rs->body[0]);
    int ok = !stored.fail && !rs->body[0].fail;
    vg_buf_release(&stored);
    rs->rec[0].body = rs->body[0].data;
    if (ok)
        vg_body_string_of(rs->rec[0].body, "run_id", run, sizeof run);
    for (int i = 0; ok && i < pr->n; i++) {
        member_id(sr->id, pr->e[i].k, rs->ids[i + 1]);
        const char *prev = i == 0 ? sr->id : rs->ids[i];
        member_written(sr, &pr->e[i], i ? &pr->e[i - 1] : NULL, rs->ids[i + 1], prev, run,
                       &rs->rec[i + 1], &rs->body[i + 1]);
        rs->rec[i + 1].body = rs->body[i + 1].data;
        ok = !rs->body[i + 1].fail;
    }
    if (!ok)
        records_release(rs);
    return ok;
}

/* ---- reads ----------------------------------------------------------------------------------- */

struct waiting;

struct mscan {
    const struct vg_query *q; /* the caller's (NULL for a get) */
    const char *only_id;      /* a get: the one record wanted */
    vg_record_cb cb;
    void *user;
    int given, stopped, oom;
    int hold; /* keep the records (held, or held_to's) instead of giving them */
    struct waiting *held_to;
    struct vg_record **held;
    size_t n_held, cap_held;
    struct vg_buf body; /* a plain row's body as written */
};

static int cmp_key(int64_t seq, const char *id, int64_t seq2, const char *id2)
{
    return seq != seq2 ? (seq < seq2 ? -1 : 1) : strcmp(id, id2);
}

static int wanted(const struct mscan *m, const struct vg_record *r)
{
    const struct vg_query *q = m->q;
    if (m->only_id)
        return !strcmp(r->id, m->only_id);
    if ((q->owner && strcmp(q->owner, r->owner)) || (q->k1 && strcmp(q->k1, r->k1)) ||
        (q->k2 && strcmp(q->k2, r->k2)))
        return 0;
    if ((q->has_seq_min && r->seq < q->seq_min) || (q->has_seq_max && r->seq > q->seq_max))
        return 0;
    if (!q->has_after)
        return 1;
    int c = cmp_key(r->seq, r->id, q->after_seq, q->after_id);
    return q->descending ? c < 0 : c > 0;
}

static int wait_add(struct waiting *w, const struct vg_record *r);

static int hold(struct mscan *m, const struct vg_record *r)
{
    if (m->held_to)
        return wait_add(m->held_to, r) ? 0 : (m->oom = 1);
    if (m->n_held == m->cap_held) {
        size_t cap = m->cap_held ? m->cap_held * 2 : 32;
        struct vg_record **p = vg_realloc(m->held, cap * sizeof *p);
        if (!p)
            return m->oom = 1;
        m->held = p;
        m->cap_held = cap;
    }
    if (!(m->held[m->n_held] = vg_record_dup(r)))
        return m->oom = 1;
    m->n_held++;
    return 0;
}

/* Give one record to the caller (or hold it); non-zero stops the read. */
static int give(struct mscan *m, const struct vg_record *r)
{
    if (!wanted(m, r))
        return 0;
    if (m->hold)
        return hold(m, r);
    m->given++;
    if (m->cb(m->user, r) || (m->q && m->q->limit && m->given >= m->q->limit))
        return m->stopped = 1;
    return 0;
}

/* A stored row: its records given in the read's direction. */
static int row_cb(void *user, const struct vg_record *sr)
{
    struct mscan *m = user;
    struct row pr;
    if (!row_parse(sr->body, &pr) || !pr.marked) {
        vg_buf_reset(&m->body);
        if (!vg_body_unpack(sr, &m->body))
            return give(m, sr);
        if (m->body.fail)
            return m->oom = 1;
        struct vg_record written = *sr;
        written.body = m->body.data;
        return give(m, &written);
    }
    struct records rs;
    if (!row_records(sr, &pr, &rs))
        return m->oom = 1;
    int desc = m->q && m->q->descending, stop = 0;
    for (int i = 0; !stop && i < rs.n; i++)
        stop = give(m, &rs.rec[desc ? rs.n - 1 - i : i]);
    records_release(&rs);
    return stop;
}

static vigil_code scan_end(struct mscan *m, vigil_code rc, vigil_error *err)
{
    for (size_t i = 0; i < m->n_held; i++)
        vg_free(m->held[i]);
    vg_free(m->held);
    vg_buf_release(&m->body);
    if (rc == VIGIL_OK && m->oom)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading message records");
    return rc;
}

vigil_code vg_rows_get(struct vg_store *s, const char *kind, const char *id, vg_record_cb cb,
                       void *user, vigil_error *err)
{
    struct mscan m = {.only_id = id, .cb = cb, .user = user};
    char host[ID_LEN + 1];
    vg_buf_init(&m.body, VG_BUF_DEFAULT_MAX);
    vigil_code rc = s->methods->get(s, kind, id, row_cb, &m, err);
    if (rc == VIGIL_ENOTFOUND && member_of(id, host)) {
        vigil_error e = {0};
        vigil_code hrc = s->methods->get(s, kind, host, row_cb, &m, &e);
        if (hrc == VIGIL_OK && m.given) {
            rc = VIGIL_OK;
            if (err)
                vigil_error_clear(err);
        } else if (hrc != VIGIL_OK && hrc != VIGIL_ENOTFOUND) {
            rc = hrc;
            if (err)
                *err = e;
        }
    }
    return scan_end(&m, rc, err);
}

static int by_key_up(const void *a, const void *b)
{
    const struct vg_record *x = *(struct vg_record *const *)a, *y = *(struct vg_record *const *)b;
    return cmp_key(x->seq, x->id, y->seq, y->id);
}

static int by_key_down(const void *a, const void *b)
{
    return by_key_up(b, a);
}

/* The records held back from an ascending read without a thread (a row's members wait for the
 * rows of other threads that come between them), in (seq, id) order. */
struct waiting {
    struct mscan *m;
    struct vg_record **rec;
    size_t n, cap;
};

static int wait_add(struct waiting *w, const struct vg_record *r)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        struct vg_record **p = vg_realloc(w->rec, cap * sizeof *p);
        if (!p)
            return 0;
        w->rec = p;
        w->cap = cap;
    }
    struct vg_record *c = vg_record_dup(r);
    if (!c)
        return 0;
    size_t i = w->n;
    while (i > 0 && cmp_key(w->rec[i - 1]->seq, w->rec[i - 1]->id, c->seq, c->id) > 0) {
        w->rec[i] = w->rec[i - 1];
        i--;
    }
    w->rec[i] = c;
    w->n++;
    return 1;
}

/* Give the waiting records before (seq, id) (all of them when id is NULL); non-zero stops. */
static int wait_give(struct waiting *w, int64_t seq, const char *id)
{
    size_t i = 0;
    int stop = 0;
    while (i < w->n && !stop && (!id || cmp_key(w->rec[i]->seq, w->rec[i]->id, seq, id) <= 0))
        stop = give(w->m, w->rec[i++]);
    for (size_t j = 0; j < i; j++)
        vg_free(w->rec[j]);
    if (i > 0 && i < w->n) /* nothing waiting: w->rec may be NULL */
        memmove(w->rec, w->rec + i, (w->n - i) * sizeof *w->rec);
    w->n -= i;
    return stop;
}

/* A stored row of an ascending read without a thread: rows come in (seq, id) order and every
 * record of a row comes after the row's own key, so the records waiting up to this row's key are
 * given, and this row's records wait for the next row. */
static int merge_cb(void *user, const struct vg_record *sr)
{
    struct waiting *w = user;
    struct mscan *m = w->m;
    m->hold = 1;
    m->held_to = w;
    int stop = row_cb(m, sr);
    m->hold = 0;
    m->held_to = NULL;
    return stop || m->oom || wait_give(w, sr->seq, sr->id);
}

/* Without a thread, rows of several threads interleave with a host's members. Ascending (verify,
 * move, a store joining sync: reads of every message an agent has), the rows are merged as they
 * come, holding only the members that rows of other threads come between; descending (no reader
 * asks), the records are read whole, sorted and given then. */
static vigil_code scan_held(struct vg_store *s, struct mscan *m, vigil_error *err)
{
    const struct vg_query *q = m->q;
    struct vg_query a = {.kind = q->kind,
                         .owner = q->owner,
                         .k1 = q->k1,
                         .has_seq_max = q->has_seq_max,
                         .seq_max = q->seq_max};
    vigil_code rc;
    if (!q->descending) {
        struct waiting w = {.m = m};
        rc = s->methods->scan(s, &a, merge_cb, &w, err);
        if (!rc && !m->oom && !m->stopped)
            wait_give(&w, 0, NULL);
        for (size_t i = 0; i < w.n; i++)
            vg_free(w.rec[i]);
        vg_free(w.rec);
        return rc;
    }
    m->hold = 1;
    rc = s->methods->scan(s, &a, row_cb, m, err);
    m->hold = 0;
    if (rc || m->oom)
        return rc;
    if (m->n_held > 1)
        qsort(m->held, m->n_held, sizeof *m->held, by_key_down);
    for (size_t i = 0; i < m->n_held && !m->stopped; i++)
        give(m, m->held[i]);
    return VIGIL_OK;
}

/* The row before a scan's lower bound whose members may lie past it (at most one: a thread's
 * rows do not overlap). */
static vigil_code straddler(struct vg_store *s, struct mscan *m, vigil_error *err)
{
    const struct vg_query *q = m->q;
    struct vg_query b = {
        .kind = q->kind, .owner = q->owner, .k1 = q->k1, .descending = 1, .limit = 1};
    char host[ID_LEN + 1];
    if (q->has_after && !q->descending && (!q->has_seq_min || q->after_seq >= q->seq_min)) {
        /* The cursor's own row (a host or a plain row), or its host's row. */
        vigil_error e = {0};
        vigil_code rc = s->methods->get(s, q->kind, q->after_id, row_cb, m, &e);
        if (rc == VIGIL_ENOTFOUND && member_of(q->after_id, host))
            rc = s->methods->get(s, q->kind, host, row_cb, m, &e);
        if (rc != VIGIL_ENOTFOUND) {
            if (rc && err)
                *err = e;
            return rc;
        }
        b.has_after = 1;
        b.after_seq = q->after_seq;
        b.after_id = q->after_id;
    } else {
        if (!q->has_seq_min || q->seq_min <= HOST_SEQ_MIN) /* below it no row holds members */
            return VIGIL_OK;
        b.has_seq_max = 1;
        b.seq_max = q->seq_min - 1;
    }
    return s->methods->scan(s, &b, row_cb, m, err);
}

/* A thread's rows in order: each row's records are in (seq, id) order among the others'. */
static vigil_code scan_thread(struct vg_store *s, struct mscan *m, vigil_error *err)
{
    const struct vg_query *q = m->q;
    struct vg_query a = *q;
    if (member_type(q->k2)) { /* members are in their host's row: a row of any kind may hold one */
        a.k2 = NULL;
        a.limit = 0;
    }
    vigil_code rc = VIGIL_OK;
    int lower = q->has_seq_min || (q->has_after && !q->descending);
    if (lower && !q->descending)
        rc = straddler(s, m, err);
    if (!rc && !m->stopped && !m->oom)
        rc = s->methods->scan(s, &a, row_cb, m, err);
    if (!rc && !m->stopped && !m->oom && q->descending && q->has_seq_min)
        rc = straddler(s, m, err);
    return rc;
}

vigil_code vg_rows_scan(struct vg_store *s, const struct vg_query *q, vg_record_cb cb, void *user,
                        vigil_error *err)
{
    struct mscan m = {.q = q, .cb = cb, .user = user};
    vg_buf_init(&m.body, VG_BUF_DEFAULT_MAX);
    vigil_code rc;
    if (q->k2 && !member_type(q->k2)) /* a thought or a plain row's kind: one record a row */
        rc = s->methods->scan(s, q, row_cb, &m, err);
    else if (!q->owner || !q->k1)
        rc = scan_held(s, &m, err);
    else
        rc = scan_thread(s, &m, err);
    return scan_end(&m, rc, err);
}

static int count_cb(void *user, const struct vg_record *r)
{
    (void)r;
    ++*(int64_t *)user;
    return 0;
}

vigil_code vg_rows_count(struct vg_store *s, const struct vg_query *q, int64_t *out,
                         vigil_error *err)
{
    if (q->k2 && !member_type(q->k2))
        return s->methods->count(s, q, out, err);
    struct vg_query all = *q; /* a count, like the adapter's, ignores the cursor and the limit */
    all.limit = 0;
    all.has_after = 0;
    *out = 0;
    return vg_rows_scan(s, &all, count_cb, out, err);
}

/* ---- the thread's last row, as this connection wrote it ------------------------------------ */

/* The message row this connection wrote last, when it was its thread's last row, under the change
 * mark of messages taken just after (VG_STORE_CTRL_CHANGE_MARK): while the mark stays, no message
 * was written since, by this connection or another, nor a write undone, so the row is still its
 * thread's last and as kept. A step's put of a member and of the next thought then read no row
 * to learn their thread's last (docs/internals/STORE.md, "The write"). PostgreSQL keeps no marks:
 * its puts always read. */
struct vg_rows_last {
    struct vg_record *row; /* as the adapter holds it (rev included) */
    struct vg_store_change_mark mark;
    int run_known; /* run: the row's run_id as written (host_run) */
    char run[RUN_ID_MAX];
    const struct vg_record *end; /* the row's last record's key: (end->seq, end->id) */
};

void vg_rows_forget(struct vg_store *s)
{
    if (s->rows_last) {
        if (s->rows_last->end != s->rows_last->row)
            vg_free((void *)s->rows_last->end);
        vg_free(s->rows_last->row);
    }
    vg_free(s->rows_last);
    s->rows_last = NULL;
}

static void messages_mark(struct vg_store *s, struct vg_store_change_mark *m, int *ok)
{
    memset(m, 0, sizeof *m);
    m->kind = ROW_KIND;
    *ok = s->methods->control(s, VG_STORE_CTRL_CHANGE_MARK, m, NULL) == VIGIL_OK;
}

/* row (its revision rev) is now its thread's last row as stored, its last record member (NULL:
 * the row's own); same_host: the row known last before with a member more (its host's run_id, if
 * known, still holds). */
static void remember_last(struct vg_store *s, const struct vg_record *row, int64_t rev,
                          const struct vg_record *member, int same_host)
{
    int ok;
    struct vg_store_change_mark m;
    messages_mark(s, &m, &ok);
    if (!ok || (!s->rows_last && !(s->rows_last = vg_calloc(1, sizeof *s->rows_last)))) {
        vg_rows_forget(s);
        return;
    }
    struct vg_record *copy = vg_record_dup(row), *end = member ? vg_record_dup(member) : NULL;
    struct vg_rows_last *l = s->rows_last;
    l->run_known = l->run_known && same_host && copy;
    vg_free(l->row);
    if (l->end != l->row)
        vg_free((void *)l->end);
    l->row = copy;
    l->end = member ? end : copy;
    l->mark = m;
    if (copy)
        l->row->rev = rev;
    if (!copy || !l->end)
        vg_rows_forget(s);
}

void vg_rows_wrote_last(struct vg_store *s, const struct vg_record *stored)
{
    remember_last(s, stored, 1, NULL, 0);
}

/* The last row of r's thread when this connection knows it (see above), else NULL. */
static const struct vg_record *known_last(struct vg_store *s, const struct vg_record *r)
{
    struct vg_rows_last *l = s->rows_last;
    if (!l || !l->row || strcmp(l->row->owner ? l->row->owner : "", r->owner ? r->owner : "") ||
        strcmp(l->row->k1 ? l->row->k1 : "", r->k1 ? r->k1 : ""))
        return NULL;
    int ok;
    struct vg_store_change_mark m;
    messages_mark(s, &m, &ok);
    return ok && m.foreign == l->mark.foreign && m.own == l->mark.own ? l->row : NULL;
}

/* Whether every record of stored row sr comes before r (0 when its text does not parse). */
static int row_before(const struct vg_record *sr, const struct vg_record *r)
{
    struct row pr;
    if (!row_parse(sr->body, &pr))
        return 0;
    if (!pr.marked || pr.n == 0)
        return cmp_key(sr->seq, sr->id, r->seq, r->id) < 0;
    char last[ID_LEN + 1];
    member_id(sr->id, pr.e[pr.n - 1].k, last);
    return cmp_key(sr->seq + pr.e[pr.n - 1].dseq, last, r->seq, r->id) < 0;
}

/* ---- writes ---------------------------------------------------------------------------------- */

static int copy_cb(void *user, const struct vg_record *r)
{
    struct vg_record **c = user;
    *c = vg_record_dup(r);
    return 1;
}

/* One stored row as an owned copy: *out NULL when there is none (or out of memory: oom). */
static vigil_code raw_get(struct vg_store *s, const char *id, struct vg_record **out,
                          vigil_error *err)
{
    vigil_error e = {0};
    *out = NULL;
    vigil_code rc = s->methods->get(s, ROW_KIND, id, copy_cb, out, &e);
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK;
    if (rc && err)
        *err = e;
    if (!rc && !*out)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading message \"%s\"", id);
    return rc;
}

static vigil_code raw_scan_one(struct vg_store *s, const struct vg_query *q, struct vg_record **out,
                               vigil_error *err)
{
    *out = NULL;
    return s->methods->scan(s, q, copy_cb, out, err);
}

void vg_rows_escape(const char *stored, struct vg_buf *out)
{
    vg_buf_puts(out, MARK "],");
    vg_buf_puts(out, stored + 1);
}

int vg_rows_needs_escape(const char *stored)
{
    return strncmp(stored, "{\"~\":", 5) == 0;
}

/* A plain row put as the adapter stores it: body.h's form, escaped when it reads as marked. */
static vigil_code put_plain(struct vg_store *s, const struct vg_record *r, vigil_error *err)
{
    struct vg_buf packed, esc;
    struct vg_record st = *r;
    vg_buf_init(&packed, VG_BUF_DEFAULT_MAX);
    vg_buf_init(&esc, VG_BUF_DEFAULT_MAX);
    if (vg_body_pack(r, &packed))
        st.body = packed.data ? packed.data : "";
    if (vg_rows_needs_escape(st.body)) {
        vg_rows_escape(st.body, &esc);
        st.body = esc.data ? esc.data : "";
    }
    vigil_code rc = packed.fail || esc.fail
                        ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing a message")
                        : s->methods->put(s, &st, 0, NULL, err);
    vg_buf_release(&packed);
    vg_buf_release(&esc);
    return rc;
}

/* Give every member of row sr a row of its own, the host keeping its (with no members). */
static vigil_code split(struct vg_store *s, const struct vg_record *sr, vigil_error *err)
{
    struct row pr;
    struct records rs;
    if (!row_parse(sr->body, &pr) || !pr.marked || pr.n == 0)
        return VIGIL_OK;
    if (!row_records(sr, &pr, &rs))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory splitting a message row");
    vigil_code rc = VIGIL_OK;
    for (int i = 1; !rc && i < rs.n; i++)
        rc = put_plain(s, &rs.rec[i], err);
    struct vg_buf body;
    vg_buf_init(&body, VG_BUF_DEFAULT_MAX);
    vg_buf_puts(&body, MARK "]");
    vg_buf_puts(&body, pr.rest);
    struct vg_record host = *sr;
    host.body = body.data ? body.data : "";
    if (!rc)
        rc = body.fail ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory splitting a message row")
                       : s->methods->update(s, &host, sr->rev, err);
    vg_buf_release(&body);
    records_release(&rs);
    return rc;
}

/* Whether row sr holds member k. */
static int holds(const struct vg_record *sr, int k)
{
    struct row pr;
    if (!sr || !row_parse(sr->body, &pr))
        return 0;
    for (int i = 0; i < pr.n; i++)
        if (pr.e[i].k == k)
            return 1;
    return 0;
}

/* The member id's row, split so that the member has a row of its own; *found 0 when no row holds
 * it. */
static vigil_code split_holder(struct vg_store *s, const char *id, int *found, vigil_error *err)
{
    char host[ID_LEN + 1];
    struct vg_record *hr = NULL;
    int k = member_of(id, host);
    *found = 0;
    vigil_code rc = k ? raw_get(s, host, &hr, err) : VIGIL_OK;
    if (!rc && holds(hr, k)) {
        *found = 1;
        rc = split(s, hr, err);
    }
    vg_free(hr);
    return rc;
}

/* A plain put must not land inside a row's span: the row before it in its thread is split when
 * its members reach past it (an import or a sync's message, with a seq of its own). *last = 1
 * when r comes after every record of its thread: the thread's last row known (known_last), or
 * read, comes before it. */
static vigil_code keep_apart(struct vg_store *s, const struct vg_record *r, int *last,
                             vigil_error *err)
{
    struct vg_query b = {.kind = ROW_KIND,
                         .owner = r->owner ? r->owner : "",
                         .k1 = r->k1 ? r->k1 : "",
                         .descending = 1,
                         .limit = 1};
    struct vg_record *before = NULL;
    struct row pr;
    const struct vg_record *known = known_last(s, r);
    const struct vg_record *end = known ? s->rows_last->end : NULL;
    *last = 0;
    if (known && cmp_key(end->seq, end->id, r->seq, r->id) < 0)
        return *last = 1, VIGIL_OK;
    vigil_code rc = known ? VIGIL_OK : raw_scan_one(s, &b, &before, err);
    if (!rc && !known && (!before || row_before(before, r))) {
        *last = 1; /* the thread's last row ends before r: nothing to split */
        vg_free(before);
        return VIGIL_OK;
    }
    if (!rc && before && cmp_key(before->seq, before->id, r->seq, r->id) >= 0) {
        vg_free(before); /* the thread's last row is after r: the row just before r, then */
        before = NULL;
    }
    b.has_after = 1;
    b.after_seq = r->seq;
    b.after_id = r->id;
    if (!rc && !before)
        rc = raw_scan_one(s, &b, &before, err);
    if (!rc && before && row_parse(before->body, &pr) && pr.marked && pr.n > 0 &&
        !row_before(before, r))
        rc = split(s, before, err);
    vg_free(before);
    return rc;
}

/* The first quoted string of packed (len bytes) of at least REF_MIN id characters (base64url or
 * hex: no escapes) that entry b's text holds too, quotes included: 1 with its place in packed
 * (*at, *len) and in b's text (*from). A tool result's envelope names its operation id, 43
 * characters, which its action's metadata holds. */
static int id_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

static int find_ref(const char *packed, size_t len, const struct entry *b, size_t *at, size_t *from,
                    size_t *n)
{
    /* String by string: only a whole string is left out, so the text left keeps its strings and
     * brackets (read_entry finds the member's end by them). */
    for (size_t i = 0; i < len; i++) {
        if (packed[i] != '"')
            continue;
        size_t j = i + 1;
        int plain = 1;
        for (; j < len && packed[j] != '"'; j++) {
            plain = plain && id_char(packed[j]);
            if (packed[j] == '\\')
                j++; /* an escaped character: never the string's end */
        }
        if (j >= len)
            return 0;
        const char *hit =
            plain && j - i - 1 >= REF_MIN ? memmem(b->body, b->blen, packed + i, j - i + 1) : NULL;
        if (hit) {
            *at = i;
            *from = (size_t)(hit - b->body);
            *n = j - i + 1;
            return 1;
        }
        i = j; /* past the string's closing quote */
    }
    return 0;
}

/* The member's text packed into out, less the string it names in entry b (when b is not NULL
 * and one is found): its flags with FLAG_REF and the reference written first as
 * "[at,from,len],". */
static int member_ref(const struct vg_buf *packed, const struct entry *b, int flags,
                      struct vg_buf *out)
{
    size_t at = 0, from = 0, n = 0;
    int ref = b && packed->data && find_ref(packed->data, packed->len, b, &at, &from, &n);
    vg_buf_put_i64(out, ref ? flags | FLAG_REF : flags);
    vg_buf_putc(out, ',');
    if (!ref) {
        vg_buf_append(out, packed->data, packed->len);
        return 0;
    }
    vg_buf_putc(out, '[');
    vg_buf_put_i64(out, (long long)at);
    vg_buf_putc(out, ',');
    vg_buf_put_i64(out, (long long)from);
    vg_buf_putc(out, ',');
    vg_buf_put_i64(out, (long long)n);
    vg_buf_puts(out, "],");
    vg_buf_append(out, packed->data, at);
    vg_buf_append(out, packed->data + at + n, packed->len - at - n);
    return 1;
}

/* The member's entry [k,dseq,dat,"a",flags,MEMBER] for host row sr, prev the record before it,
 * run the host's run_id as written, b the row's last entry when the member may name a string of
 * it (NULL when not): 0 when r's body is not a flat object (nothing written). */
static int member_entry(const struct vg_record *r, const struct vg_record *sr, int k,
                        const char *prev, const char *run, const struct entry *b,
                        struct vg_buf *out)
{
    static const char *const keys[] = {"prev_id", "run_id"}; /* bits FLAG_PREV, FLAG_RUN */
    const char *vals[] = {prev, run};
    struct vg_buf packed;
    vg_buf_init(&packed, VG_BUF_DEFAULT_MAX);
    int flags = vg_body_pack_less(r, prev, keys, vals, 2, &packed);
    if (flags < 0) {
        vg_buf_release(&packed);
        return 0;
    }
    vg_buf_putc(out, '[');
    vg_buf_put_i64(out, k);
    vg_buf_putc(out, ',');
    vg_buf_put_i64(out, (long long)(r->seq - sr->seq));
    vg_buf_putc(out, ',');
    vg_buf_put_i64(out, (long long)(r->at - sr->at));
    vg_buf_puts(out, strcmp(r->k2, "action") ? ",\"t\"," : ",\"a\",");
    member_ref(&packed, b, flags, out);
    vg_buf_putc(out, ']');
    if (packed.fail)
        out->fail = VIGIL_ENOMEM;
    vg_buf_release(&packed);
    return 1;
}

/* The run_id of host row sr (parsed as pr) as written, "" when it has none, read from its stored
 * text (as written, or its UUID hole's text: body.h) without unpacking it; kept with the row
 * this connection knows last, so a step's members read it once. */
static void host_run(struct vg_store *s, const struct vg_record *sr, const struct row *pr,
                     char run[RUN_ID_MAX])
{
    struct vg_rows_last *l = s->rows_last;
    if (l && l->row == sr && l->run_known) {
        memcpy(run, l->run, sizeof l->run);
        return;
    }
    char stored[RUN_ID_MAX];
    struct vg_buf host;
    vg_buf_init(&host, VG_BUF_DEFAULT_MAX);
    run[0] = '\0';
    if (pr->marked)
        host_stored(pr, &host);
    else
        vg_buf_puts(&host, sr->body);
    if (!host.fail && vg_body_string_of(host.data, "run_id", stored, sizeof stored)) {
        if (!vg_body_message_run_hole(host.data))
            memcpy(run, stored, strlen(stored) + 1);
        else if (!vg_body_uuid_text(stored, run))
            run[0] = '\0';
    }
    if (l && l->row == sr && !host.fail) {
        memcpy(l->run, run, sizeof l->run);
        l->run_known = 1;
    }
    vg_buf_release(&host);
}

/* The row's text with r appended as member k: 0 when r cannot be a member (its body is not a
 * flat object). */
static int appended(struct vg_store *s, const struct vg_record *r, const struct vg_record *sr,
                    const struct row *pr, int k, struct vg_buf *out)
{
    char prev[ID_LEN + 1], run[RUN_ID_MAX];
    if (pr->n)
        member_id(sr->id, pr->e[pr->n - 1].k, prev);
    else
        memcpy(prev, sr->id, ID_LEN + 1);
    host_run(s, sr, pr, run);
    vg_buf_puts(out, MARK);
    if (pr->marked) {
        vg_buf_append(out, sr->body + MARK_LEN, (size_t)(pr->rest - 1 - (sr->body + MARK_LEN)));
        if (pr->n)
            vg_buf_putc(out, ',');
    }
    const struct entry *b = s->member_refs && pr->n ? &pr->e[pr->n - 1] : NULL;
    if (!member_entry(r, sr, k, prev, run, b, out))
        return 0;
    vg_buf_putc(out, ']');
    const char *rest = pr->marked ? pr->rest : sr->body + 1;
    if (rest[0] != '}' && rest[0] != ',')
        vg_buf_putc(out, ',');
    vg_buf_puts(out, rest);
    return 1;
}

#ifndef NDEBUG
/* Debug builds read the member back from the new row and compare: every test of the sanitizer
 * build so checks each member it writes. */
static void check_member(const struct vg_record *r, const struct vg_record *row)
{
    struct mscan m = {.only_id = r->id, .cb = copy_cb};
    struct vg_record *back = NULL;
    m.user = &back;
    vg_buf_init(&m.body, VG_BUF_DEFAULT_MAX);
    row_cb(&m, row);
    if (back && (strcmp(back->body, r->body) || back->seq != r->seq || back->at != r->at ||
                 strcmp(back->k2, r->k2)))
        VG_BUG("message \"%s\": its member form does not read back", r->id);
    vg_free(back);
    vg_buf_release(&m.body);
}
#endif

/* Whether r can be appended to stored row sr, its thread's last row: sr is r's host, a thought,
 * with room for r after all of it. */
static int appendable(const struct vg_record *r, const char *host, int k,
                      const struct vg_record *sr, struct row *pr)
{
    return !strcmp(sr->id, host) && !strcmp(sr->k2, "thought") && sr->seq >= HOST_SEQ_MIN &&
           sr->body[0] == '{' && row_parse(sr->body, pr) && pr->n < MEMBERS_MAX &&
           (!pr->n || pr->e[pr->n - 1].k < k) &&
           r->seq > sr->seq + (pr->n ? pr->e[pr->n - 1].dseq : 0);
}

/* Append r to its host's row when that row is its thread's last and r comes after all of it. */
static vigil_code try_append(struct vg_store *s, const struct vg_record *r, const char *host, int k,
                             int *done, vigil_error *err)
{
    struct vg_query q = {.kind = ROW_KIND,
                         .owner = r->owner ? r->owner : "",
                         .k1 = r->k1 ? r->k1 : "",
                         .descending = 1,
                         .limit = 1};
    struct vg_record *read = NULL;
    struct row pr;
    *done = 0;
    const struct vg_record *sr = known_last(s, r);
    vigil_code rc = sr ? VIGIL_OK : raw_scan_one(s, &q, &read, err);
    if (!sr)
        sr = read;
    if (rc || !sr || !appendable(r, host, k, sr, &pr)) {
        vg_free(read);
        return rc;
    }
    struct vg_buf body;
    vg_buf_init(&body, VG_BUF_DEFAULT_MAX);
    if (!appended(s, r, sr, &pr, k, &body)) { /* not a member: a row of its own */
        vg_buf_release(&body);
        vg_free(read);
        return VIGIL_OK;
    }
    struct vg_record row = *sr;
    row.body = body.data ? body.data : "";
    if (body.fail) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory appending message \"%s\"", r->id);
    } else {
#ifndef NDEBUG
        check_member(r, &row);
#endif
        rc = s->methods->update(s, &row, sr->rev, err);
        *done = rc == VIGIL_OK;
        if (*done)
            remember_last(s, &row, sr->rev + 1, r, sr != read); /* may free sr: its last use */
    }
    vg_buf_release(&body);
    vg_free(read);
    return rc;
}

vigil_code vg_rows_put(struct vg_store *s, const struct vg_record *r, unsigned flags, int *added,
                       int *handled, int *last, vigil_error *err)
{
    char host[ID_LEN + 1];
    int k = member_of(r->id, host), found = 0;
    vigil_code rc = VIGIL_OK;
    *handled = *last = 0;
    if (k && !(flags & VG_PUT_IF_ABSENT) && member_type(r->k2)) {
        if ((rc = try_append(s, r, host, k, handled, err)) || *handled) {
            *added = *handled;
            return rc;
        }
    }
    if (k) { /* one message an id: a member of that id is there already */
        struct vg_record *hr = NULL;
        rc = raw_get(s, host, &hr, err);
        found = !rc && holds(hr, k);
        vg_free(hr);
    }
    if (!rc && found) {
        *handled = 1;
        *added = 0;
        return flags & VG_PUT_IF_ABSENT
                   ? VIGIL_OK
                   : VG_FAIL(err, VIGIL_EEXISTS, "%s \"%s\" already exists", r->kind, r->id);
    }
    return rc ? rc : keep_apart(s, r, last, err);
}

/* A marked row that is about to be updated becomes a plain row of revision 1, as readers saw
 * it, its members rows of their own: the update then makes it revision 2, as for any record. */
static vigil_code unmark(struct vg_store *s, const struct vg_record *sr, const struct row *pr,
                         vigil_error *err)
{
    struct records rs;
    struct row host_only = *pr;
    host_only.n = 0;
    if (!row_records(sr, &host_only, &rs))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory updating message \"%s\"", sr->id);
    vigil_code rc = split(s, sr, err);
    if (!rc)
        rc = s->methods->remove(s, ROW_KIND, sr->id, err);
    if (!rc)
        rc = put_plain(s, &rs.rec[0], err);
    records_release(&rs);
    return rc;
}

vigil_code vg_rows_before_change(struct vg_store *s, const char *id, int64_t *expected_rev,
                                 vigil_error *err)
{
    struct vg_record *sr = NULL;
    struct row pr;
    int found = 0;
    vigil_code rc = raw_get(s, id, &sr, err);
    if (!rc && sr && row_parse(sr->body, &pr) && pr.marked) {
        if (!expected_rev) /* a removal: the members keep rows of their own */
            rc = split(s, sr, err);
        else if (*expected_rev != 1) /* a marked row reads as revision 1 */
            rc = VG_FAIL(err, VIGIL_ECONFLICT, "%s \"%s\" changed: revision 1, not %lld", ROW_KIND,
                         id, (long long)*expected_rev);
        else
            rc = unmark(s, sr, &pr, err);
    } else if (!rc && !sr) {
        rc = split_holder(s, id, &found, err);
    }
    vg_free(sr);
    return rc;
}

static int members_cb(void *user, const struct vg_record *r)
{
    struct row pr;
    if (row_parse(r->body, &pr))
        *(int64_t *)user += pr.n;
    return 0;
}

vigil_code vg_rows_members_of_owner(struct vg_store *s, const char *owner, int64_t *n,
                                    vigil_error *err)
{
    struct vg_query q = {.kind = ROW_KIND, .owner = owner};
    *n = 0;
    return s->methods->scan(s, &q, members_cb, n, err);
}
