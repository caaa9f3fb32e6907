/*
 * history.c: run history read with progressive disclosure: runs -> one run -> its messages ->
 * one message in full -> its tool calls -> one tool call in full. Every list is a keyset page
 * over the store's (seq, id) order with an opaque cursor, never an offset, so rows inserted
 * while a reader pages are neither skipped nor repeated. Lists carry previews (truncated with
 * a flag); the single-item calls return everything. All results are JSON text owned by the
 * caller.
 */
#include "base/common.h"

#include "base/buf.h"
#include "base/json.h"
#include "journal/journal_int.h"
#include "os/clock.h"
#include "os/ids.h"
#include "store/store.h"

#include <errno.h>
#include <pthread.h>

#define PREVIEW_BYTES 200
#define DEFAULT_LIMIT 50
#define MAX_LIMIT 1000
#define CHILDREN_MAX 100

/* ---- cursors ------------------------------------------------------------------------------- */

/* "c1" + hex of "<seq>:<id>": opaque to callers, cheap to check. */
void vg_journal_cursor_encode(char *out, size_t n, int64_t seq, const char *id)
{
    static const char hex[] = "0123456789abcdef";
    char raw[260];
    int w = snprintf(raw, sizeof raw, "%lld:%s", (long long)seq, id);
    size_t o = 0;
    if (n < 3 || w < 0)
        return;
    out[o++] = 'c';
    out[o++] = '1';
    for (int i = 0; i < w && o + 2 < n; i++) {
        out[o++] = hex[(unsigned char)raw[i] >> 4];
        out[o++] = hex[(unsigned char)raw[i] & 15];
    }
    out[o] = '\0';
}

static int unhex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* One message for every way a cursor is wrong: it is opaque, so the fix is the same. */
static vigil_code bad_cursor(const char *c, vigil_error *err)
{
    return VG_FAIL(err, VIGIL_EINVAL, "invalid cursor \"%.64s\": pass a next_cursor value",
                   c ? c : "");
}

vigil_code vg_journal_cursor_decode(const char *c, int64_t *seq, char *id, size_t idn,
                                    vigil_error *err)
{
    char raw[260];
    size_t len = c ? strlen(c) : 0;
    if (len < 6 || len % 2 != 0 || c[0] != 'c' || c[1] != '1' || (len - 2) / 2 >= sizeof raw)
        return bad_cursor(c, err);
    size_t n = 0;
    for (size_t i = 2; i < len; i += 2) {
        int hi = unhex(c[i]), lo = unhex(c[i + 1]);
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
            return bad_cursor(c, err);
        raw[n++] = (char)(hi << 4 | lo);
    }
    raw[n] = '\0';
    char *colon = strchr(raw, ':'), *end = NULL;
    if (!colon || colon == raw || !colon[1] || strlen(colon + 1) >= idn)
        return bad_cursor(c, err);
    *colon = '\0';
    errno = 0;
    long long v = strtoll(raw, &end, 10);
    if (errno || *end)
        return bad_cursor(c, err);
    *seq = v;
    snprintf(id, idn, "%s", colon + 1);
    return VIGIL_OK;
}

/* ---- pages --------------------------------------------------------------------------------- */

/* A page item from its record, appended to out as canonical JSON text: 0, or -1 on failure, err
 * set when the store failed (else: memory). */
typedef int (*item_fn)(struct vg_store *s, const struct vg_record *r, struct vg_buf *out,
                       vigil_error *err);

/* A page is built as text: the items' canonical JSON, comma-separated, then the page's object
 * around them, which is what encoding the page's tree canonically gives (its keys are written
 * in sorted order). A run listing's items come as text from the memo (run_item): encoding a page
 * of 20 runs' trees again was half of a listing's cost (Session 26 of docs/internals/PERF.md). */
struct page {
    struct vg_buf text; /* the items, comma-separated */
    int n;              /* items in text */
    int limit;
    int more;
    int failed;
    int running; /* records whose k1 is "running": in a run listing, its running runs */
    int64_t last_seq;
    char last_id[201];
    item_fn make;
    struct vg_store *store;
    vigil_error err; /* why make failed, when the store said */
};

static void page_init(struct page *p, struct vg_store *s, int limit, item_fn make)
{
    *p = (struct page){.limit = limit, .make = make, .store = s};
    vg_buf_init(&p->text, VG_BUF_DEFAULT_MAX);
}

static int page_cb(void *user, const struct vg_record *r)
{
    struct page *p = user;
    if (p->n == p->limit) {
        p->more = 1;
        return 1;
    }
    if (p->n)
        vg_buf_putc(&p->text, ',');
    p->running += r->k1 && !strcmp(r->k1, "running");
    if (p->make(p->store, r, &p->text, &p->err) != 0 || p->text.fail) {
        p->failed = 1;
        return 1;
    }
    p->n++;
    p->last_seq = r->seq;
    size_t n = VG_MIN(strlen(r->id), sizeof p->last_id - 1); /* ids are 1..200 bytes */
    memcpy(p->last_id, r->id, n);
    p->last_id[n] = '\0';
    return 0;
}

/* it (taken; NULL: failed) appended to out as canonical JSON. */
static int put_item(struct vg_buf *out, json_t *it)
{
    int rc = it ? vg_json_put_canonical(out, it) : -1;
    json_decref(it);
    return rc;
}

static vigil_code limit_check(int *limit, vigil_error *err)
{
    if (*limit == 0)
        *limit = DEFAULT_LIMIT;
    if (*limit < 1 || *limit > MAX_LIMIT)
        return VG_FAIL(err, VIGIL_EINVAL, "limit must be 1..%d", MAX_LIMIT);
    return VIGIL_OK;
}

/* A page scan's outcome: the store's failure, the item builder's, or memory. */
static vigil_code page_scanned(struct page *p, vigil_code rc, vigil_error *err)
{
    if (rc == VIGIL_OK && p->failed && p->err.code) { /* the store failed, not memory */
        vg_error_copy(err, &p->err);
        rc = p->err.code;
    } else if (rc == VIGIL_OK && (p->failed || p->text.fail)) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading history");
    }
    return rc;
}

/* The text b holds into *out (b released either way). */
static vigil_code page_out(struct vg_buf *b, char **out, vigil_error *err)
{
    if (b->fail) {
        vg_buf_release(b);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading history");
    }
    *out = vg_buf_detach(b, NULL);
    return VIGIL_OK;
}

/* A page's items closed with its cursor into *out (rc: how filling it went). */
static vigil_code page_close(struct page *p, vigil_code rc, char **out, vigil_error *err)
{
    char next[600];
    if (rc) {
        vg_buf_release(&p->text);
        return rc;
    }
    vg_buf_puts(&p->text, "],\"next_cursor\":"); /* a cursor is hex digits: nothing to escape */
    if (p->more) {
        vg_journal_cursor_encode(next, sizeof next, p->last_seq, p->last_id);
        vg_buf_putc(&p->text, '"');
        vg_buf_puts(&p->text, next);
        vg_buf_puts(&p->text, "\"}");
    } else {
        vg_buf_puts(&p->text, "null}");
    }
    return page_out(&p->text, out, err);
}

typedef vigil_code (*scan_fn)(struct vg_store *s, const struct vg_query *q, vg_record_cb cb,
                              void *user, vigil_error *err);

/* The page's text is reserved at PAGE_ITEM_GUESS bytes an item (a run's item is about 580),
 * up to PAGE_RESERVE_MAX (below malloc's mmap threshold): grown from 1 KiB by doubling, a page
 * of 20 runs was four reallocations, some 11,000 instructions of a 172,000-instruction listing
 * (docs/internals/PERF.md, session 38). */
#define PAGE_ITEM_GUESS 640
#define PAGE_RESERVE_MAX ((size_t)64 << 10)

/* Run one keyset page of q and produce {"items":[...],"next_cursor":...}; scan: vg_store_scan,
 * or vg_store_scan_stored for a make that takes records as stored. *running (may be NULL): how
 * many of the page's records have k1 "running". */
static vigil_code run_page(struct vg_store *s, struct vg_query *q, const char *cursor, int limit,
                           scan_fn scan, item_fn make, char **out, int *running, vigil_error *err)
{
    char after[201];
    vigil_code rc = limit_check(&limit, err);
    if (rc)
        return rc;
    if (cursor && *cursor) {
        if ((rc = vg_journal_cursor_decode(cursor, &q->after_seq, after, sizeof after, err)))
            return rc;
        q->has_after = 1;
        q->after_id = after;
    }
    struct page p;
    page_init(&p, s, limit, make);
    vg_buf_room(&p.text, VG_MIN((size_t)limit * PAGE_ITEM_GUESS, PAGE_RESERVE_MAX));
    vg_buf_puts(&p.text, "{\"items\":[");
    q->limit = limit + 1; /* one more tells whether a next page exists */
    rc = page_scanned(&p, scan(s, q, page_cb, &p, err), err);
    if (running)
        *running = p.running;
    return page_close(&p, rc, out, err);
}

/* ---- previews ------------------------------------------------------------------------------ */

/* Cut text to at most PREVIEW_BYTES without splitting a UTF-8 sequence. */
static int set_preview(json_t *o, const char *key, const char *flag, const char *text)
{
    size_t len = text ? strlen(text) : 0;
    if (!text)
        return json_object_set_new(o, key, json_null()) ||
               json_object_set_new(o, flag, json_false());
    size_t n = vg_utf8_cut(text, len, PREVIEW_BYTES);
    return json_object_set_new(o, key, json_stringn(text, n)) ||
           json_object_set_new(o, flag, json_boolean(n < len));
}

/* A JSON value as display text: strings as they are, everything else as canonical JSON. */
static char *display(const json_t *v)
{
    if (!v || json_is_null(v))
        return NULL;
    if (json_is_string(v))
        return vg_strdup(json_string_value(v));
    return vg_journal_canonical(v);
}

static int64_t duration_ms(const json_t *o, const char *from, const char *to)
{
    int64_t a, b;
    if (!vg_jstr(o, from) || !vg_jstr(o, to) || vg_time_parse_ms(vg_jstr(o, from), &a) ||
        vg_time_parse_ms(vg_jstr(o, to), &b))
        return -1;
    return b - a;
}

static int set_duration(json_t *o, int64_t d)
{
    return json_object_set_new(o, "duration_ms", d >= 0 ? json_integer(d) : json_null());
}

/* ---- runs ---------------------------------------------------------------------------------- */

static json_t *run_item_make(const struct vg_record *r)
{
    json_t *b = vg_jload(r->body, strlen(r->body), 0, NULL);
    if (!b)
        return NULL;
    static const char *const keys[] = {"run_id",      "agent_id",   "status",      "run_key",
                                       "wake_reason", "started_at", "ended_at",    "parent_run_id",
                                       "model_calls", "tool_calls", "cost_micros", "model",
                                       "usage",       "error"};
    json_t *it = json_object();
    int bad = !it;
    for (size_t i = 0; i < VG_ARRAY_LEN(keys) && !bad; i++) {
        json_t *v = json_object_get(b, keys[i]);
        bad = json_object_set(it, keys[i], v ? v : json_null());
    }
    if (!bad)
        bad = json_object_set(it, "steps", json_object_get(b, "model_calls")) ||
              set_duration(it, duration_ms(b, "started_at", "ended_at")) ||
              set_preview(it, "summary_preview", "summary_truncated", vg_jstr(b, "summary"));
    json_decref(b);
    if (bad) {
        json_decref(it);
        return NULL;
    }
    return it;
}

/*
 * Run items as last made, per thread, as their canonical text: a page of runs is mostly the runs
 * of the page read before it, and an item is a function of its record alone, whose decoding,
 * and then the item's encoding, were nearly all of a listing's cost. A slot is found by the
 * run's id and holds the record as stored (its columns and its body in the stored form), compared
 * whole, so a changed run makes a new item (in the slot of its old one) and a kept one costs no
 * unpacking of its body (most of a page's cost after the item was kept: docs/internals/PERF.md,
 * session 37). A thread keeps at most ITEM_MEMO_SLOTS (about 2 KB each), freed when it ends.
 */
#define ITEM_MEMO_SLOTS 64
#define ITEM_MEMO_WAYS 4

struct item_slot {
    char *stored;    /* the record as stored: id, owner, k1, k2, body, each ended by NUL (owned) */
    size_t len;      /* its length */
    int64_t seq, at; /* its other columns */
    uint64_t hash;   /* of the run's id */
    uint64_t used;   /* the thread's tick at the last hit */
    char *text;      /* the item as canonical JSON (owned); NULL: an empty slot */
    size_t text_len; /* its length */
};

static pthread_key_t item_memo_key;
static pthread_once_t item_memo_once = PTHREAD_ONCE_INIT;
static int item_memo_ok;

static void item_memo_free(void *memo)
{
    struct item_slot *slots = memo;
    for (size_t i = 0; slots && i < ITEM_MEMO_SLOTS; i++) {
        vg_free(slots[i].stored);
        vg_free(slots[i].text);
    }
    vg_free(slots);
}

static void item_memo_init(void)
{
    item_memo_ok = pthread_key_create(&item_memo_key, item_memo_free) == 0;
}

static struct item_slot *item_memo(void)
{
    pthread_once(&item_memo_once, item_memo_init);
    /* Also while an allocator port is set (the torture tests): what the port returns is C heap
     * that may outlive it (base/alloc.h), so the memo's texts stay valid after it is taken
     * away, and every failure of the memo's own allocations (the slots, a record's copy) leaves
     * the item made and written, only not kept, which is what those tests should see. */
    if (!item_memo_ok)
        return NULL;
    struct item_slot *slots = pthread_getspecific(item_memo_key);
    if (!slots && (slots = vg_calloc(ITEM_MEMO_SLOTS, sizeof *slots)) &&
        pthread_setspecific(item_memo_key, slots) != 0) {
        vg_free(slots);
        slots = NULL;
    }
    return slots;
}

static uint64_t text_hash(const char *text, size_t len)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)text[i]) * 1099511628211ULL;
    return h;
}

/* The stored record's parts in a slot's order: what a body as written is made from (body.h). */
static const char *stored_part(const struct vg_record *r, int i)
{
    const char *parts[] = {r->id, r->owner, r->k1, r->k2, r->body};
    return parts[i] ? parts[i] : "";
}

#define STORED_PARTS 5

/* Does slot s hold the record r as stored? */
static int same_stored(const struct item_slot *s, const struct vg_record *r)
{
    if (!s->text || s->seq != r->seq || s->at != r->at)
        return 0;
    const char *at = s->stored, *end = s->stored + s->len;
    for (int i = 0; i < STORED_PARTS; i++) {
        size_t n = strlen(stored_part(r, i)) + 1;
        if ((size_t)(end - at) < n || memcmp(at, stored_part(r, i), n))
            return 0;
        at += n;
    }
    return at == end;
}

/* r as stored, its parts each ended by NUL, for a slot (NULL when out of memory). */
static char *stored_copy(const struct vg_record *r, size_t *len)
{
    size_t n = 0;
    for (int i = 0; i < STORED_PARTS; i++)
        n += strlen(stored_part(r, i)) + 1;
    char *copy = vg_malloc(n), *at = copy;
    for (int i = 0; copy && i < STORED_PARTS; i++) {
        size_t k = strlen(stored_part(r, i)) + 1;
        memcpy(at, stored_part(r, i), k);
        at += k;
    }
    *len = n;
    return copy;
}

/* The slot holding this record, or the one to take for it: of the ITEM_MEMO_WAYS slots from the
 * id's hash (FNV's low bits mix poorly, so its top), the run's own (an older state of it), else
 * an empty one, else the least recently used one. */
static struct item_slot *item_slot_for(struct item_slot *slots, const struct vg_record *r,
                                       uint64_t h, int *hit)
{
    static _Thread_local uint64_t tick;
    struct item_slot *own = NULL, *empty = NULL, *oldest = NULL;
    size_t base = (size_t)(h >> 40) % ITEM_MEMO_SLOTS;
    tick++;
    for (size_t w = 0; w < ITEM_MEMO_WAYS; w++) {
        struct item_slot *s = &slots[(base + w) % ITEM_MEMO_SLOTS];
        if (s->text && s->hash == h && same_stored(s, r)) {
            s->used = tick;
            *hit = 1;
            return s;
        }
        if (s->text && s->hash == h)
            own = s;
        else if (!s->text && !empty)
            empty = s;
        else if (s->text && (!oldest || s->used < oldest->used))
            oldest = s;
    }
    struct item_slot *pick = own ? own : empty ? empty : oldest;
    pick->used = tick;
    *hit = 0;
    return pick;
}

/* The item of r as stored (vg_store_scan_stored), its body unpacked, as canonical JSON text. */
static char *run_item_text(const struct vg_record *r)
{
    struct vg_buf body;
    vg_buf_init(&body, VG_BUF_DEFAULT_MAX);
    struct vg_record written = *r;
    written.body = vg_store_written_body(r, &body);
    json_t *it = written.body ? run_item_make(&written) : NULL;
    char *text = it ? vg_journal_canonical(it) : NULL;
    json_decref(it);
    vg_buf_release(&body);
    return text;
}

/* The run's item appended to out: the memo's text, or made, encoded, and kept in the memo. r is
 * as stored (vg_store_scan_stored). */
static int run_item(struct vg_store *store, const struct vg_record *r, struct vg_buf *out,
                    vigil_error *err)
{
    (void)store;
    (void)err;
    uint64_t h = text_hash(r->id, strlen(r->id));
    struct item_slot *slots = item_memo();
    int hit = 0;
    struct item_slot *s = slots ? item_slot_for(slots, r, h, &hit) : NULL;
    if (hit) {
        vg_buf_append(out, s->text, s->text_len);
        return 0;
    }
    char *text = run_item_text(r);
    if (!text)
        return -1;
    size_t text_len = strlen(text), len = 0;
    vg_buf_append(out, text, text_len);
    char *stored = s ? stored_copy(r, &len) : NULL;
    if (!stored) {
        vg_free(text);
        return 0;
    }
    vg_free(s->stored);
    vg_free(s->text);
    *s = (struct item_slot){stored, len, r->seq, r->at, h, s->used, text, text_len};
    return 0;
}

vigil_code vg_journal_runs_page(struct vg_store *store, const char *agent_id, const char *status,
                                const char *cursor, int limit, char **out_json, int *running,
                                vigil_error *err)
{
    enum vg_run_status st;
    vg_alloc_install_json();
    if (status && vg_run_status_parse(status, &st) != 0)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "unknown run status \"%.40s\": use queued, running, completed, failed, "
                       "interrupted, canceled or crashed",
                       status);
    struct vg_query q = {.kind = RUN_KIND, .owner = agent_id, .k1 = status, .descending = 1};
    /* Every run has k2 "": with no other filter, that selects the (kind, k2, seq) index
     * instead of sorting all runs. */
    if (!agent_id && !status)
        q.k2 = "";
    return run_page(store, &q, cursor, limit, vg_store_scan_stored, run_item, out_json, running,
                    err);
}

vigil_code vg_journal_runs_list(struct vg_store *store, const char *agent_id, const char *status,
                                const char *cursor, int limit, char **out_json, vigil_error *err)
{
    return vg_journal_runs_page(store, agent_id, status, cursor, limit, out_json, NULL, err);
}

struct got {
    json_t *body;
    int oom;
};

static int body_cb(void *user, const struct vg_record *r)
{
    struct got *g = user;
    json_error_t je;
    g->body = vg_jload(r->body, strlen(r->body), 0, &je);
    g->oom = !g->body && vg_json_oom(&je);
    return 0;
}

/* Read a record body as JSON; what names the thing for a not-found message. */
static vigil_code get_body(struct vg_store *s, const char *kind, const char *id, const char *what,
                           json_t **out, vigil_error *err)
{
    struct got g = {0};
    if (!id || !*id || strlen(id) > 200)
        return VG_FAIL(err, VIGIL_EINVAL, "invalid %s id", what);
    /* One read: asking again for the failure's message could succeed (a passing fault) and
     * answer OK with no body, the first read's body leaked. */
    vigil_code rc = vg_store_get(s, kind, id, body_cb, &g, err);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "%s \"%.60s\" not found", what, id);
    if (rc) {
        json_decref(g.body);
        return rc;
    }
    json_t *b = g.body;
    if (!b && g.oom)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading %s \"%.60s\"", what, id);
    if (!b)
        return VG_FAIL(err, VIGIL_ECORRUPT, "stored %s \"%.60s\" is not valid JSON", what, id);
    *out = b;
    return VIGIL_OK;
}

struct children {
    struct vg_store *store;
    json_t *list;
};

static int child_cb(void *user, const struct vg_record *r)
{
    struct children *ch = user;
    json_t *b = NULL;
    if (get_body(ch->store, RUN_KIND, r->id, "run", &b, NULL) != VIGIL_OK)
        return 0; /* a link without its run: skip */
    json_t *c =
        b ? json_pack("{s:O,s:O,s:O,s:O}", "run_id", json_object_get(b, "run_id"), "status",
                      json_object_get(b, "status"), "run_key", json_object_get(b, "run_key"),
                      "started_at", json_object_get(b, "started_at"))
          : NULL;
    json_decref(b);
    return (!c || json_array_append_new(ch->list, c)) ? 1 : 0;
}

static vigil_code count_of(struct vg_store *s, const char *kind, const char *owner, const char *k1,
                           const char *k2, json_t *counts, const char *name, vigil_error *err)
{
    int64_t n = 0;
    struct vg_query q = {.kind = kind, .owner = owner, .k1 = k1, .k2 = k2};
    vigil_code rc = vg_journal_count(s, &q, &n, err);
    if (rc == VIGIL_OK && json_object_set_new(counts, name, json_integer(n)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a run");
    return rc;
}

/* A run's tool calls: its rows when it has them (a store written before Session 29), else its
 * record's count (each call's start adds one, as each start wrote a row). */
static vigil_code count_calls(struct vg_store *s, const json_t *run, json_t *counts,
                              vigil_error *err)
{
    const char *owner = vg_jstr(run, "agent_id"), *run_id = vg_jstr(run, "run_id");
    vigil_code rc = count_of(s, TOOL_KIND, owner, run_id, NULL, counts, "tool_calls", err);
    if (rc == VIGIL_OK && json_integer_value(json_object_get(counts, "tool_calls")) == 0 &&
        json_object_set_new(counts, "tool_calls", json_integer(vg_jint(run, "tool_calls"))))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a run");
    return rc;
}

vigil_code vg_journal_run_show(struct vg_store *store, const char *run_id, char **out_json,
                               vigil_error *err)
{
    json_t *b = NULL, *children = NULL, *counts = NULL, *parent = NULL, *proj = NULL;
    json_t *jref = NULL;
    vg_alloc_install_json();
    vigil_code rc = get_body(store, RUN_KIND, run_id, "run", &b, err);
    if (rc)
        return rc;
    children = json_array();
    counts = json_object();
    if (!children || !counts) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a run");
        goto out;
    }
    struct vg_query cq = {.kind = LINK_KIND, .k1 = run_id, .limit = CHILDREN_MAX + 1};
    struct children ch = {.store = store, .list = children};
    if ((rc = vg_store_scan(store, &cq, child_cb, &ch, err)))
        goto out;
    int more = json_array_size(children) > CHILDREN_MAX;
    if (more)
        json_array_remove(children, CHILDREN_MAX);
    const char *pid = vg_jstr(b, "parent_run_id");
    if (pid) {
        json_t *pb = NULL;
        if (get_body(store, RUN_KIND, pid, "run", &pb, NULL) == VIGIL_OK) {
            parent =
                json_pack("{s:O,s:O,s:O}", "run_id", json_object_get(pb, "run_id"), "status",
                          json_object_get(pb, "status"), "run_key", json_object_get(pb, "run_key"));
            json_decref(pb);
        } else {
            parent = json_pack("{s:s,s:n}", "run_id", pid, "status");
        }
        if (!parent) {
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a run");
            goto out;
        }
    }
    const char *owner = vg_jstr(b, "agent_id");
    if ((rc = count_of(store, JOURNAL_KIND, owner, run_id, NULL, counts, "records", err)) ||
        (rc = count_of(store, JOURNAL_KIND, owner, run_id, "message", counts, "messages", err)) ||
        (rc = count_calls(store, b, counts, err)))
        goto out;
    /* The journal reference (S1-007): identity, owner, record count and last sequence. */
    if ((rc = get_body(store, PROJECTION_KIND, run_id, "run projection", &proj, err)))
        goto out;
    char rel[700];
    if ((rc = vg_journal_path(NULL, vg_jstr(b, "agent_id"), rel, sizeof rel, err)))
        goto out;
    jref = json_pack("{s:s,s:O,s:O,s:s,s:O,s:O,s:s}", "journal_id", run_id, "owner_kind",
                     json_object_get(b, "scope"), "owner_id", json_object_get(b, "agent_id"),
                     "run_id", run_id, "record_count", json_object_get(counts, "records"),
                     "last_sequence", json_object_get(proj, "last_sequence"), "export_path", rel);
    if (!jref || json_object_set(b, "journal", jref) ||
        json_object_set(counts, "model_calls", json_object_get(b, "model_calls")) ||
        json_object_set(b, "parent", parent ? parent : json_null()) ||
        json_object_set(b, "children", children) ||
        json_object_set_new(b, "children_truncated", json_boolean(more)) ||
        json_object_set(b, "counts", counts) ||
        set_duration(b, duration_ms(b, "started_at", "ended_at"))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a run");
        goto out;
    }
    char *text = vg_journal_canonical(b);
    if (!text)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a run");
    else
        *out_json = text;
out:
    json_decref(b);
    json_decref(children);
    json_decref(counts);
    json_decref(parent);
    json_decref(proj);
    json_decref(jref);
    return rc;
}

/* ---- messages ------------------------------------------------------------------------------ */

/* The role and full content of a message record (content owned, may be NULL). */
static const char *message_parts(const json_t *rec, char **content)
{
    if (strcmp(vg_jstr(rec, "type"), "message.accepted") == 0) {
        *content = display(json_object_get(rec, "payload"));
        return vg_jstr(rec, "source");
    }
    *content = display(json_object_get(json_object_get(rec, "signal"), "text"));
    return "agent";
}

static json_t *message_item_make(const struct vg_record *r)
{
    json_t *rec = vg_jload(r->body, strlen(r->body), 0, NULL);
    if (!rec)
        return NULL;
    char *content = NULL;
    const char *role = message_parts(rec, &content);
    const json_t *id = json_object_get(rec, "message_id");
    const json_t *step = json_object_get(rec, "step");
    json_t *it = json_pack(
        "{s:O,s:O,s:O,s:O,s:s,s:O,s:O}", "record_id", json_object_get(rec, "record_id"), "sequence",
        json_object_get(rec, "sequence"), "occurred_at", json_object_get(rec, "occurred_at"),
        "type", json_object_get(rec, "type"), "role", role, "id",
        id ? id : json_object_get(rec, "observation_id"), "step", step ? step : json_null());
    if (it && set_preview(it, "preview", "truncated", content)) {
        json_decref(it);
        it = NULL;
    }
    vg_free(content);
    json_decref(rec);
    return it;
}

static int message_item(struct vg_store *store, const struct vg_record *r, struct vg_buf *out,
                        vigil_error *err)
{
    (void)store;
    (void)err;
    return put_item(out, message_item_make(r));
}

vigil_code vg_journal_run_messages(struct vg_store *store, const char *run_id, const char *cursor,
                                   int limit, char **out_json, vigil_error *err)
{
    json_t *b = NULL;
    vg_alloc_install_json();
    vigil_code rc = get_body(store, RUN_KIND, run_id, "run", &b, err);
    if (rc)
        return rc;
    struct vg_query q = {
        .kind = JOURNAL_KIND, .owner = vg_jstr(b, "agent_id"), .k1 = run_id, .k2 = "message"};
    rc = run_page(store, &q, cursor, limit, vg_store_scan, message_item, out_json, NULL, err);
    json_decref(b);
    return rc;
}

vigil_code vg_journal_run_message(struct vg_store *store, const char *record_id, char **out_json,
                                  vigil_error *err)
{
    json_t *rec = NULL;
    vg_alloc_install_json();
    vigil_code rc = get_body(store, JOURNAL_KIND, record_id, "message", &rec, err);
    if (rc)
        return rc;
    if (strcmp(vg_journal_class(rec), "message") != 0) {
        json_decref(rec);
        return VG_FAIL(err, VIGIL_ENOTFOUND, "message \"%.60s\" not found", record_id);
    }
    char *content = NULL;
    const char *role = message_parts(rec, &content);
    if (json_object_set_new(rec, "role", json_string(role)) ||
        json_object_set_new(rec, "content", content ? json_string(content) : json_null()))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a message");
    char *text = rc ? NULL : vg_journal_canonical(rec);
    if (!rc && !text)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a message");
    if (!rc)
        *out_json = text;
    vg_free(content);
    json_decref(rec);
    return rc;
}

/* ---- tool calls ---------------------------------------------------------------------------- */

struct output_find {
    struct vg_store *store;
    const char *call_id;
    json_t *output;
    vigil_code rc; /* following a stored output's name (output_ref.c) */
    vigil_error err;
};

static int output_cb(void *user, const struct vg_record *r)
{
    struct output_find *o = user;
    json_t *b = vg_jload(r->body, strlen(r->body), 0, NULL);
    o->rc = vg_journal_follow_output(o->store, b, &o->err);
    const json_t *tc = json_object_get(b, "tool_call");
    const char *id = vg_jstr(tc, "tool_call_id");
    if (id && strcmp(id, o->call_id) == 0 && json_object_get(tc, "output"))
        o->output = json_incref(json_object_get(tc, "output"));
    json_decref(b);
    return 1;
}

/* A finished tool call's row (body b) holds no output: the journal record at its
 * finished_sequence does (journal.c, put_call_row). Put it in b, as rows held it before; a row
 * that has one (a running call's null, a row stored before) keeps it. */
static vigil_code put_call_output(struct vg_store *s, const char *owner, json_t *b,
                                  vigil_error *err)
{
    const char *run_id = vg_jstr(b, "run_id"), *call_id = vg_jstr(b, "tool_call_id");
    int64_t at = vg_jint(b, "finished_sequence");
    if (json_object_get(b, "output") || !run_id || !call_id || at <= 0)
        return VIGIL_OK;
    struct output_find o = {.store = s, .call_id = call_id};
    struct vg_query q = {.kind = JOURNAL_KIND,
                         .owner = owner,
                         .k1 = run_id,
                         .has_seq_min = 1,
                         .seq_min = at,
                         .has_seq_max = 1,
                         .seq_max = at,
                         .limit = 1};
    vigil_code rc = vg_store_scan(s, &q, output_cb, &o, err);
    if (rc == VIGIL_OK && o.rc) {
        json_decref(o.output);
        o.output = NULL;
        if ((rc = o.rc) && err)
            *err = o.err;
        return rc;
    }
    if (rc == VIGIL_OK && json_object_set_new(b, "output", o.output ? o.output : json_null()))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a tool call's output");
    return rc;
}

/* A list item from a call's row (b, borrowed, with its output). */
static json_t *tool_item_of(const json_t *b)
{
    static const char *const keys[] = {"tool_call_id", "name",       "status",   "operation_id",
                                       "duration_ms",  "started_at", "ended_at", "error_code"};
    json_t *it = json_object();
    int bad = !it;
    for (size_t i = 0; i < VG_ARRAY_LEN(keys) && !bad; i++) {
        json_t *v = json_object_get(b, keys[i]);
        bad = json_object_set(it, keys[i], v ? v : json_null());
    }
    json_t *via = json_object_get(b, "via"); /* a program's call through the sandbox's bridge */
    if (via && !bad)
        bad = json_object_set(it, "via", via);
    char *in = display(json_object_get(b, "input")), *outp = display(json_object_get(b, "output"));
    if (!bad)
        bad = set_preview(it, "input_preview", "input_truncated", in) ||
              set_preview(it, "output_preview", "output_truncated", outp);
    vg_free(in);
    vg_free(outp);
    if (bad) {
        json_decref(it);
        return NULL;
    }
    return it;
}

static json_t *tool_item_make(struct vg_store *s, const struct vg_record *r, vigil_error *err)
{
    json_t *b = vg_jload(r->body, strlen(r->body), 0, NULL);
    json_t *it = b && !put_call_output(s, r->owner, b, err) ? tool_item_of(b) : NULL;
    json_decref(b);
    return it;
}

static int tool_item(struct vg_store *s, const struct vg_record *r, struct vg_buf *out,
                     vigil_error *err)
{
    return put_item(out, tool_item_make(s, r, err));
}

/* The run's calls derived from its journal (tool_calls.c) after (q->after_seq, q->after_id)
 * when q->has_after, or with a sequence from q->seq_min on when q->has_seq_min, at most
 * p->limit of them into p, in the order of their start, as their rows would list them. */
static vigil_code derived_page(struct vg_store *s, const struct vg_query *q, struct page *p,
                               vigil_error *err)
{
    json_t *calls = NULL, *b;
    /* A call's start is the only record at its sequence: after the cursor is after its start. */
    int64_t from = q->has_after ? q->after_seq + 1 : q->has_seq_min ? q->seq_min : 0;
    struct vg_calls_want want = {from, NULL, p->limit};
    vigil_code rc = vg_journal_calls_derive(s, q->owner, q->k1, &want, &calls, err);
    if (rc)
        return rc;
    const char *id;
    json_object_foreach (calls, id, b) {
        int64_t seq = vg_jint(b, "started_sequence");
        if (seq < from)
            continue;
        if (p->n == p->limit) {
            p->more = 1;
            break;
        }
        if (p->n)
            vg_buf_putc(&p->text, ',');
        if (put_item(&p->text, tool_item_of(b)) != 0) {
            p->failed = 1;
            break;
        }
        p->n++;
        p->last_seq = seq;
        snprintf(p->last_id, sizeof p->last_id, "%s", id);
    }
    json_decref(calls);
    return page_scanned(p, VIGIL_OK, err);
}

/* A page of the run's calls (q: kind TOOL_KIND, its owner and run, the page's bounds): from its
 * rows when it has them (a store written before Session 29), else from its journal. */
static vigil_code calls_page(struct vg_store *s, struct vg_query *q, struct page *p,
                             vigil_error *err)
{
    int rows = 0;
    vigil_code rc = vg_journal_run_has_call_rows(s, q->owner, q->k1, &rows, err);
    if (rc)
        return rc;
    if (!rows)
        return derived_page(s, q, p, err);
    q->limit = p->limit + 1; /* one more tells whether a next page exists */
    return page_scanned(p, vg_store_scan(s, q, page_cb, p, err), err);
}

vigil_code vg_journal_run_tools(struct vg_store *store, const char *run_id, const char *cursor,
                                int limit, char **out_json, vigil_error *err)
{
    json_t *b = NULL;
    char after[201];
    struct page p;
    vg_alloc_install_json();
    vigil_code rc = limit_check(&limit, err);
    if (!rc)
        rc = get_body(store, RUN_KIND, run_id, "run", &b, err);
    if (rc)
        return rc;
    struct vg_query q = {.kind = TOOL_KIND, .owner = vg_jstr(b, "agent_id"), .k1 = run_id};
    if (cursor && *cursor &&
        !(rc = vg_journal_cursor_decode(cursor, &q.after_seq, after, sizeof after, err))) {
        q.has_after = 1;
        q.after_id = after;
    }
    page_init(&p, store, limit, tool_item);
    vg_buf_puts(&p.text, "{\"items\":[");
    if (!rc)
        rc = calls_page(store, &q, &p, err);
    rc = page_close(&p, rc, out_json, err);
    json_decref(b);
    return rc;
}

/* ---- following a running run --------------------------------------------------------------- */

/* The items of q whose sequence is above after, at most p->limit, into p (p->last_seq: the
 * newest one's, or after when none). */
static vigil_code follow_scan(struct vg_store *s, struct vg_query *q, int64_t after, struct page *p,
                              vigil_error *err)
{
    p->last_seq = after;
    q->has_seq_min = 1;
    q->seq_min = after + 1;
    q->limit = p->limit + 1;
    return page_scanned(p, vg_store_scan(s, q, page_cb, p, err), err);
}

/* follow_scan of a run's tool calls (calls_page: its rows or its journal). */
static vigil_code follow_calls(struct vg_store *s, struct vg_query *q, int64_t after,
                               struct page *p, vigil_error *err)
{
    p->last_seq = after;
    q->has_seq_min = 1;
    q->seq_min = after + 1;
    return calls_page(s, q, p, err);
}

struct owner_of {
    char id[201];
    int found;
};

static int owner_cb(void *user, const struct vg_record *r)
{
    struct owner_of *o = user;
    size_t n = r->owner ? strlen(r->owner) : 0;
    o->found = n > 0 && n < sizeof o->id;
    if (o->found)
        memcpy(o->id, r->owner, n + 1);
    return 0;
}

/* The run's owner (its agent) from its record's column: a run's record is read on every look
 * of a follower (the event poller, a few a turn), and decoding its body for the owner alone was
 * about 100,000 instructions a look (docs/internals/PERF.md, session 38). Missing, not a run,
 * and an invalid id answer as get_body does. */
static vigil_code run_owner(struct vg_store *s, const char *run_id, struct owner_of *o,
                            vigil_error *err)
{
    if (!run_id || !*run_id || strlen(run_id) > 200)
        return VG_FAIL(err, VIGIL_EINVAL, "invalid run id");
    vigil_code rc = vg_store_get(s, RUN_KIND, run_id, owner_cb, o, err);
    if (rc == VIGIL_ENOTFOUND || (!rc && !o->found))
        return VG_FAIL(err, VIGIL_ENOTFOUND, "run \"%.60s\" not found", run_id);
    return rc;
}

vigil_code vg_journal_run_follow(struct vg_store *store, const char *run_id, const int64_t after[2],
                                 int limit, char **out_json, vigil_error *err)
{
    struct owner_of who = {0};
    struct page m, t;
    vg_alloc_install_json();
    vigil_code rc = limit_check(&limit, err);
    if (!rc)
        rc = run_owner(store, run_id, &who, err);
    if (rc)
        return rc;
    const char *owner = who.id;
    struct vg_query qm = {.kind = JOURNAL_KIND, .owner = owner, .k1 = run_id, .k2 = "message"};
    struct vg_query qt = {.kind = TOOL_KIND, .owner = owner, .k1 = run_id};
    page_init(&m, store, limit, message_item);
    page_init(&t, store, limit, tool_item);
    rc = follow_scan(store, &qm, after[0], &m, err);
    if (!rc)
        rc = follow_calls(store, &qt, after[1], &t, err);
    if (!rc) { /* written as the canonical encoding of its object would (sorted keys) */
        struct vg_buf o;
        vg_buf_init(&o, VG_BUF_DEFAULT_MAX);
        vg_buf_printf(&o, "{\"after\":[%lld,%lld],\"messages\":[", (long long)m.last_seq,
                      (long long)t.last_seq);
        vg_buf_append(&o, m.text.data, m.text.len);
        vg_buf_printf(&o, "],\"more\":%s,\"tool_calls\":[", m.more || t.more ? "true" : "false");
        vg_buf_append(&o, t.text.data, t.text.len);
        vg_buf_puts(&o, "]}");
        rc = page_out(&o, out_json, err);
    }
    vg_buf_release(&m.text);
    vg_buf_release(&t.text);
    return rc;
}

vigil_code vg_journal_run_tool(struct vg_store *store, const char *tool_call_id, char **out_json,
                               vigil_error *err)
{
    json_t *b = NULL;
    vg_alloc_install_json();
    char *owner = NULL;
    int64_t seq = 0;
    vigil_code rc = get_body(store, TOOL_KIND, tool_call_id, "tool call", &b, err);
    if (rc == VIGIL_ENOTFOUND) /* no row: the call's start record has its id (tool_calls.c) */
        rc = vg_journal_call_find(store, tool_call_id, &b, &seq, err);
    if (rc)
        return rc;
    if (!json_object_get(b, "output") && vg_jstr(b, "run_id") &&
        ((rc = vg_journal_run_owner(store, vg_jstr(b, "run_id"), &owner, err)) ||
         (rc = put_call_output(store, owner, b, err)))) {
        vg_free(owner);
        json_decref(b);
        return rc;
    }
    vg_free(owner);
    char *text = vg_journal_canonical(b);
    json_decref(b);
    if (!text)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a tool call");
    *out_json = text;
    return VIGIL_OK;
}
