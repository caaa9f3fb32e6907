/*
 * conformance.c: every behaviour the store port (src/store/port.h) promises, checked through the
 * wrappers of store.h against an in-memory model, so that each adapter and each variation (a
 * fault-wrapped store, PostgreSQL) is held to the same contract. The runners are
 * tests/store/test_conformance_*.c.
 *
 * Sections: helpers; records; revisions; scans against a model; cursors; transactions; nested
 * statements; remove_owner; the full-text index; limits and validation; durability; concurrent
 * writers; the entry point.
 */
#include "helpers/test.h"

#include "conformance/store/conformance.h"

#include <sys/wait.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------------------------- */

static const struct vg_conf_opener *opener;

static struct vg_store *open_store(int fresh)
{
    struct vg_store *s = NULL;
    ASSERT_OK(opener->open(opener->user, fresh, &s, E));
    ASSERT(s != NULL);
    return s;
}

static struct vg_record rec(const char *kind, const char *id, const char *owner, const char *k1,
                            const char *k2, int64_t seq, const char *body)
{
    struct vg_record r = {.kind = kind,
                          .id = id,
                          .owner = owner,
                          .k1 = k1,
                          .k2 = k2,
                          .seq = seq,
                          .at = 1700000000000 + seq,
                          .body = body};
    return r;
}

static void put(struct vg_store *s, const char *kind, const char *id, const char *owner,
                int64_t seq)
{
    struct vg_record r = rec(kind, id, owner, "", "", seq, "{}");
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
}

static int exists(struct vg_store *s, const char *kind, const char *id)
{
    struct vg_record *r = NULL;
    vigil_error err = {0};
    vigil_code rc = vg_store_get_copy(s, kind, id, &r, &err);
    if (rc == VIGIL_ENOTFOUND)
        return 0;
    if (rc != VIGIL_OK)
        TEST_FAIL_("get %s/%s: %s", kind, id, err.message);
    vg_free(r);
    return 1;
}

static int64_t count_kind(struct vg_store *s, const char *kind, const char *owner)
{
    struct vg_query q = {.kind = kind, .owner = owner};
    int64_t n = -1;
    ASSERT_OK(vg_store_count(s, &q, &n, E));
    return n;
}

/* Collected scan output: ids joined with ',' plus the records' keys for order checks. */
struct ids {
    char text[16384];
    int n;
    int64_t seqs[512];
    char idv[512][208];
};

static int collect(void *user, const struct vg_record *r)
{
    struct ids *c = user;
    size_t len = strlen(c->text);
    snprintf(c->text + len, sizeof c->text - len, "%s,", r->id);
    if (c->n < 512) {
        c->seqs[c->n] = r->seq;
        snprintf(c->idv[c->n], sizeof c->idv[0], "%s", r->id);
    }
    c->n++;
    return 0;
}

static int stop_after_three(void *user, const struct vg_record *r)
{
    int *seen = user;
    return ++*seen >= 3;
}

static void scan_ids(struct vg_store *s, const struct vg_query *q, struct ids *out)
{
    memset(out, 0, sizeof *out);
    ASSERT_OK(vg_store_scan(s, q, collect, out, E));
}

/* ---- records ------------------------------------------------------------------------------- */

static int copy_one(void *user, const struct vg_record *r)
{
    struct vg_record **out = user;
    *out = vg_record_dup(r);
    return 0;
}

TEST(put_get_update_remove)
{
    struct vg_store *s = open_store(1);
    struct vg_record r = rec("message", "m1", "agent-1", "thread-1", "user", -42, "{\"a\":1}");
    r.at = INT64_MAX;
    r.rev = 99; /* ignored: the store sets revision 1 */
    int inserted = -1;
    ASSERT_OK(vg_store_put(s, &r, 0, &inserted, E));
    ASSERT_EQ(inserted, 1);

    struct vg_record *g = NULL;
    ASSERT_OK(vg_store_get(s, "message", "m1", copy_one, &g, E));
    ASSERT(g != NULL);
    ASSERT_STREQ(g->kind, "message");
    ASSERT_STREQ(g->id, "m1");
    ASSERT_STREQ(g->owner, "agent-1");
    ASSERT_STREQ(g->k1, "thread-1");
    ASSERT_STREQ(g->k2, "user");
    ASSERT_EQ(g->seq, -42);
    ASSERT_EQ(g->rev, 1);
    ASSERT(g->at == INT64_MAX);
    ASSERT_STREQ(g->body, "{\"a\":1}");
    vg_free(g);

    /* NULL index strings are stored as "". */
    struct vg_record n = {.kind = "message", .id = "m-null", .seq = INT64_MIN, .body = "[]"};
    ASSERT_OK(vg_store_put(s, &n, 0, NULL, E));
    ASSERT_OK(vg_store_get_copy(s, "message", "m-null", &g, E));
    ASSERT_STREQ(g->owner, "");
    ASSERT_STREQ(g->k1, "");
    ASSERT_STREQ(g->k2, "");
    ASSERT(g->seq == INT64_MIN);
    vg_free(g);

    /* The same id in another kind is another record. */
    struct vg_record o = rec("state", "m1", "agent-2", "", "", 7, "{\"b\":2}");
    ASSERT_OK(vg_store_put(s, &o, 0, NULL, E));

    /* Update changes k1, k2, seq, at and body; owner stays; revision goes up by one. */
    struct vg_record u = rec("message", "m1", "someone-else", "thread-2", "done", 5, "{\"a\":2}");
    u.at = 123;
    ASSERT_OK(vg_store_update(s, &u, 1, E));
    ASSERT_OK(vg_store_get_copy(s, "message", "m1", &g, E));
    ASSERT_STREQ(g->owner, "agent-1");
    ASSERT_STREQ(g->k1, "thread-2");
    ASSERT_STREQ(g->k2, "done");
    ASSERT_EQ(g->seq, 5);
    ASSERT_EQ(g->at, 123);
    ASSERT_EQ(g->rev, 2);
    ASSERT_STREQ(g->body, "{\"a\":2}");
    vg_free(g);
    ASSERT_OK(vg_store_get_copy(s, "state", "m1", &g, E));
    ASSERT_STREQ(g->body, "{\"b\":2}");
    ASSERT_EQ(g->rev, 1);
    vg_free(g);

    /* Remove: gone, and a second remove is ENOTFOUND; the other kind's m1 stays. */
    ASSERT_OK(vg_store_remove(s, "message", "m1", E));
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_store_remove(s, "message", "m1", NULL));
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_store_get(s, "message", "m1", copy_one, &g, NULL));
    ASSERT(exists(s, "state", "m1"));
    /* A removed id can be inserted again and starts at revision 1. */
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    ASSERT_OK(vg_store_get_copy(s, "message", "m1", &g, E));
    ASSERT_EQ(g->rev, 1);
    vg_free(g);
    vg_store_close(s);
}

TEST(put_if_absent)
{
    struct vg_store *s = open_store(1);
    struct vg_record r = rec("link", "l1", "a", "from", "to", 1, "{\"v\":1}");
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    /* A plain put of an existing id is EEXISTS and changes nothing. */
    struct vg_record r2 = rec("link", "l1", "b", "x", "y", 2, "{\"v\":2}");
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EEXISTS, vg_store_put(s, &r2, 0, NULL, &err));
    ASSERT_CONTAINS(err.message, "l1");
    int inserted = -1;
    ASSERT_OK(vg_store_put(s, &r2, VG_PUT_IF_ABSENT, &inserted, E));
    ASSERT_EQ(inserted, 0);
    ASSERT_OK(vg_store_put(s, &r2, VG_PUT_IF_ABSENT, NULL, E)); /* inserted may be NULL */
    struct vg_record *g = NULL;
    ASSERT_OK(vg_store_get_copy(s, "link", "l1", &g, E));
    ASSERT_STREQ(g->body, "{\"v\":1}");
    ASSERT_STREQ(g->owner, "a");
    vg_free(g);
    r2.id = "l2";
    ASSERT_OK(vg_store_put(s, &r2, VG_PUT_IF_ABSENT, &inserted, E));
    ASSERT_EQ(inserted, 1);
    ASSERT_EQ(count_kind(s, "link", NULL), 2);
    vg_store_close(s);
}

/* ---- revisions ----------------------------------------------------------------------------- */

/* proves: S0-086 (a write based on a stale revision is rejected) */
TEST(revision_cas)
{
    struct vg_store *s = open_store(1);
    struct vg_record r = rec("state", "st", "a", "", "", 0, "{\"n\":0}");
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    r.body = "{\"n\":1}";
    ASSERT_OK(vg_store_update(s, &r, 1, E));
    r.body = "{\"n\":2}";
    ASSERT_OK(vg_store_update(s, &r, 2, E));
    /* Two writers read revision 3; the first wins, the second is told. */
    r.body = "{\"n\":3}";
    ASSERT_OK(vg_store_update(s, &r, 3, E));
    r.body = "{\"n\":99}";
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_ECONFLICT, vg_store_update(s, &r, 3, &err));
    ASSERT_CONTAINS(err.message, "st");
    ASSERT_CODE(VIGIL_ECONFLICT, vg_store_update(s, &r, 5, NULL)); /* future revision too */
    ASSERT_CODE(VIGIL_ECONFLICT, vg_store_update(s, &r, 0, NULL));
    struct vg_record *g = NULL;
    ASSERT_OK(vg_store_get_copy(s, "state", "st", &g, E));
    ASSERT_EQ(g->rev, 4);
    ASSERT_STREQ(g->body, "{\"n\":3}");
    vg_free(g);
    struct vg_record missing = rec("state", "nope", "a", "", "", 0, "{}");
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_store_update(s, &missing, 1, NULL));
    /* The same id in another kind does not count. */
    struct vg_record other = rec("agent", "st", "a", "", "", 0, "{}");
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_store_update(s, &other, 1, NULL));
    vg_store_close(s);
}

/* A task's and a wake's updates usually move only their status (k1); the SQLite adapter
 * guesses so (docs/internals/STORE.md). Whatever an update changes, the row is found under
 * its new keys and no longer under its old ones, and a stale revision still conflicts. */
TEST(status_updates_find_the_row_under_its_new_keys)
{
    static const char *const kinds[] = {"task", "wake_run"};
    struct vg_store *s = open_store(1);
    for (size_t k = 0; k < VG_ARRAY_LEN(kinds); k++) {
        const char *kind = kinds[k];
        struct vg_record r = rec(kind, "x1", "a", "pending", "worker", 5, "{\"n\":0}");
        ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
        r.k1 = "ready"; /* the status alone */
        ASSERT_OK(vg_store_update(s, &r, 1, E));
        r.k1 = "ready"; /* nothing indexed */
        r.body = "{\"n\":2}";
        ASSERT_OK(vg_store_update(s, &r, 2, E));
        r.k1 = "running"; /* status, k2 and seq at once */
        r.k2 = "writer";
        r.seq = 9;
        ASSERT_OK(vg_store_update(s, &r, 3, E));
        r.k1 = "done"; /* k2 alone */
        r.k2 = "";
        ASSERT_OK(vg_store_update(s, &r, 4, E));
        ASSERT_CODE(VIGIL_ECONFLICT, vg_store_update(s, &r, 4, NULL));
        struct vg_query by_old = {.kind = kind, .k1 = "ready"};
        struct vg_query by_new = {.kind = kind, .owner = "a", .k1 = "done"};
        struct vg_query by_k2 = {.kind = kind, .k2 = "writer"};
        struct vg_query by_seq = {.kind = kind, .has_seq_min = 1, .seq_min = 9};
        static struct ids got;
        scan_ids(s, &by_old, &got);
        ASSERT_EQ(got.n, 0);
        scan_ids(s, &by_k2, &got);
        ASSERT_EQ(got.n, 0);
        scan_ids(s, &by_new, &got);
        ASSERT_STREQ(got.text, "x1,");
        scan_ids(s, &by_seq, &got);
        ASSERT_STREQ(got.text, "x1,");
        struct vg_record *g = NULL;
        ASSERT_OK(vg_store_get_copy(s, kind, "x1", &g, E));
        ASSERT_EQ(g->rev, 5);
        ASSERT_STREQ(g->k1, "done");
        ASSERT_STREQ(g->k2, "");
        ASSERT_EQ(g->seq, 9);
        vg_free(g);
    }
    vg_store_close(s);
}

/* ---- scans against a model ----------------------------------------------------------------- */

#define MODEL_N 216

/* The kinds of the model: two plain ones, and kinds an adapter may store leaner (the SQLite
 * adapter leaves the hot kinds of an agent step out of indexes they never query; every query
 * must still return the same records). */
static const char *const MODEL_KINDS[] = {"msg",     "other", "message",
                                          "journal", "run",   "run_projection"};
#define MODEL_KINDS_N ((int)(sizeof MODEL_KINDS / sizeof MODEL_KINDS[0]))

struct model_rec {
    char kind[16], id[48], owner[8], k1[8], k2[16];
    int64_t seq;
};

static struct model_rec model[MODEL_N];
static int model_n;

/* Deterministic data: owners, keys and sequence numbers repeat so that every filter and the
 * (seq, id) tie-break matter; some ids are multi-byte UTF-8 so order is by bytes. */
static void model_fill(struct vg_store *s)
{
    static const char *owners[] = {"a", "b", "", "ab"};
    static const char *k1s[] = {"t1", "t2", ""};
    /* "observation": the one k2 by which messages are in SQLite's k2 index (STORE.md) */
    static const char *k2s[] = {"observation", "y", ""};
    static const char *prefixes[] = {"m", "é", "日本", "M", "m-"};
    uint32_t x = 12345;
    model_n = 0;
    for (int i = 0; i < MODEL_N; i++) {
        struct model_rec *m = &model[model_n++];
        x = x * 1103515245u + 12345u;
        snprintf(m->kind, sizeof m->kind, "%s", MODEL_KINDS[i % MODEL_KINDS_N]);
        snprintf(m->id, sizeof m->id, "%s%02d", prefixes[(x >> 8) % 5], (int)((x >> 12) % 97));
        /* ids must be unique per kind: append the index when the draw repeats */
        for (int j = 0; j < model_n - 1; j++)
            if (strcmp(model[j].id, m->id) == 0 && strcmp(model[j].kind, m->kind) == 0) {
                size_t len = strlen(m->id);
                snprintf(m->id + len, sizeof m->id - len, "-%d", i);
                break;
            }
        snprintf(m->owner, sizeof m->owner, "%s", owners[(x >> 16) % 4]);
        snprintf(m->k1, sizeof m->k1, "%s", k1s[(x >> 18) % 3]);
        snprintf(m->k2, sizeof m->k2, "%s", k2s[(x >> 20) % 3]);
        m->seq = (int64_t)((x >> 22) % 7) - 1; /* -1..5, many ties */
        struct vg_record r = rec(m->kind, m->id, m->owner, m->k1, m->k2, m->seq, "{}");
        ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    }
}

/* Then a third of the records are updated: some keep every key column, some change one of
 * k1, k2 or seq (an adapter may write an update that keeps its indexed keys more narrowly:
 * the scans must see the new keys either way). */
static void model_update(struct vg_store *s)
{
    static const char *keys[] = {"t1", "t2", "", "observation", "y", ""}; /* k1s, then k2s */
    ASSERT_OK(vg_store_begin(s, E));
    for (int i = 0; i < model_n; i++) {
        struct model_rec *m = &model[i];
        uint32_t h = (uint32_t)i * 2654435761u >> 20; /* spread over kinds and cases */
        if (h % 3)
            continue;
        char *key = NULL;
        const char *const *from = NULL;
        switch ((h / 3) % 4) {
        case 0:
            break; /* the body only */
        case 1:
            key = m->k1, from = keys;
            break;
        case 2:
            key = m->k2, from = keys + 3;
            break;
        default:
            m->seq = (m->seq + 4) % 7 - 1; /* -1..5 again, never the same */
            break;
        }
        for (int k = 0; key && k < 3; k++)
            if (strcmp(key, from[k]) == 0) { /* the next value of the key, never the same */
                snprintf(key, key == m->k2 ? sizeof m->k2 : sizeof m->k1, "%s", from[(k + 1) % 3]);
                break;
            }
        struct vg_record r = rec(m->kind, m->id, m->owner, m->k1, m->k2, m->seq, "{\"u\":1}");
        ASSERT_OK(vg_store_update(s, &r, 1, E));
    }
    ASSERT_OK(vg_store_commit(s, E));
}

static int key_cmp(int64_t sa, const char *ia, int64_t sb, const char *ib)
{
    if (sa != sb)
        return sa < sb ? -1 : 1;
    return strcmp(ia, ib); /* bytes, as the port promises */
}

static int model_cmp(const void *a, const void *b)
{
    const struct model_rec *x = *(const struct model_rec *const *)a;
    const struct model_rec *y = *(const struct model_rec *const *)b;
    return key_cmp(x->seq, x->id, y->seq, y->id);
}

/* What a scan must return, as "id,id,..." (count: ignore cursor and limit). */
static int model_query(const struct vg_query *q, int for_count, char *out, size_t n)
{
    const struct model_rec *hits[MODEL_N];
    int k = 0, emitted = 0;
    for (int i = 0; i < model_n; i++) {
        const struct model_rec *m = &model[i];
        if (strcmp(m->kind, q->kind) != 0 || (q->owner && strcmp(m->owner, q->owner) != 0) ||
            (q->k1 && strcmp(m->k1, q->k1) != 0) || (q->k2 && strcmp(m->k2, q->k2) != 0) ||
            (q->has_seq_min && m->seq < q->seq_min) || (q->has_seq_max && m->seq > q->seq_max))
            continue;
        hits[k++] = m;
    }
    qsort(hits, (size_t)k, sizeof hits[0], model_cmp);
    out[0] = '\0';
    size_t len = 0;
    for (int j = 0; j < k; j++) {
        const struct model_rec *m = hits[q->descending && !for_count ? k - 1 - j : j];
        if (!for_count && q->has_after) {
            int c = key_cmp(m->seq, m->id, q->after_seq, q->after_id);
            if (q->descending ? c >= 0 : c <= 0)
                continue;
        }
        if (!for_count && q->limit > 0 && emitted >= q->limit)
            break;
        len += (size_t)snprintf(out + len, n - len, "%s,", m->id);
        emitted++;
    }
    return emitted;
}

static void describe(const struct vg_query *q, char *out, size_t n)
{
    snprintf(out, n, "kind=%s owner=%s k1=%s k2=%s min=%s%lld max=%s%lld desc=%d limit=%d", q->kind,
             q->owner ? q->owner : "*", q->k1 ? q->k1 : "*", q->k2 ? q->k2 : "*",
             q->has_seq_min ? "" : "-", (long long)q->seq_min, q->has_seq_max ? "" : "-",
             (long long)q->seq_max, q->descending, q->limit);
}

/* Page through q with a keyset cursor, page size `page`, and return the concatenation. */
static void paginate(struct vg_store *s, struct vg_query q, int page, char *out, size_t n)
{
    static struct ids got;
    char last_id[208];
    out[0] = '\0';
    q.limit = page;
    q.has_after = 0;
    for (int guard = 0; guard < 1000; guard++) {
        scan_ids(s, &q, &got);
        size_t len = strlen(out);
        snprintf(out + len, n - len, "%s", got.text);
        if (got.n < page)
            return;
        snprintf(last_id, sizeof last_id, "%s", got.idv[got.n - 1]);
        q.has_after = 1;
        q.after_seq = got.seqs[got.n - 1];
        q.after_id = last_id;
    }
    TEST_FAIL_("pagination does not end");
}

TEST(scans_match_model)
{
    struct vg_store *s = open_store(1);
    model_fill(s);
    model_update(s);
    static const char *owners[] = {NULL, "a", "b", "", "ab"};
    static const char *k1s[] = {NULL, "t1", ""};
    static const char *k2s[] = {NULL, "observation", "y", ""};
    static struct ids got;
    static char want[16384], paged[16384], what[256];
    int checked = 0;
    for (int kind = 0; kind < MODEL_KINDS_N; kind++)
        for (int o = 0; o < 5; o++)
            for (int a = 0; a < 3; a++)
                for (int b = 0; b < 4; b++)
                    for (int bounds = 0; bounds < 4; bounds++)
                        for (int desc = 0; desc < 2; desc++)
                            for (int lim = 0; lim < 2; lim++) {
                                struct vg_query q = {.kind = MODEL_KINDS[kind],
                                                     .owner = owners[o],
                                                     .k1 = k1s[a],
                                                     .k2 = k2s[b],
                                                     .descending = desc,
                                                     .limit = lim ? 5 : 0};
                                q.has_seq_min = bounds & 1;
                                q.seq_min = 1;
                                q.has_seq_max = (bounds & 2) != 0;
                                q.seq_max = 3;
                                describe(&q, what, sizeof what);
                                model_query(&q, 0, want, sizeof want);
                                scan_ids(s, &q, &got);
                                if (strcmp(got.text, want) != 0)
                                    TEST_FAIL_("scan %s: got \"%s\", want \"%s\"", what, got.text,
                                               want);
                                int64_t cnt = -1;
                                ASSERT_OK(vg_store_count(s, &q, &cnt, E));
                                int expect = model_query(&q, 1, want, sizeof want);
                                if (cnt != expect)
                                    TEST_FAIL_("count %s: got %lld, want %d", what, (long long)cnt,
                                               expect);
                                if (lim) {
                                    /* the whole result again, four records per page */
                                    q.limit = 0;
                                    model_query(&q, 0, want, sizeof want);
                                    paginate(s, q, 4, paged, sizeof paged);
                                    if (strcmp(paged, want) != 0)
                                        TEST_FAIL_("pages %s: got \"%s\", want \"%s\"", what, paged,
                                                   want);
                                }
                                checked++;
                            }
    ASSERT_EQ(checked, MODEL_KINDS_N * 5 * 3 * 4 * 4 * 2 * 2);

    /* A cursor with no limit, and a cursor between two records of equal seq. */
    struct vg_query q = {.kind = "msg", .has_after = 1, .after_seq = 2, .after_id = "m"};
    model_query(&q, 0, want, sizeof want);
    scan_ids(s, &q, &got);
    ASSERT_STREQ(got.text, want);
    q.descending = 1;
    model_query(&q, 0, want, sizeof want);
    scan_ids(s, &q, &got);
    ASSERT_STREQ(got.text, want);

    /* The callback can stop a scan. */
    struct vg_query all = {.kind = "msg"};
    int seen = 0;
    ASSERT_OK(vg_store_scan(s, &all, stop_after_three, &seen, E));
    ASSERT_EQ(seen, 3);
    /* A kind nobody wrote (a new record kind needs no migration) is simply empty.
     * proves: S3-023 */
    all.kind = "never_written";
    scan_ids(s, &all, &got);
    ASSERT_EQ(got.n, 0);
    ASSERT_EQ(count_kind(s, "never_written", NULL), 0);
    vg_store_close(s);
}

/* ---- a step's messages in one row ------------------------------------------------------------ */

/* A step's action and toolResult messages, their ids made from the thought's (its last hex digit
 * 1..f for 0), are kept in the thought's row (docs/internals/STORE.md, "A step's messages in one
 * row"); every read still gives one record a message, with the body and columns written. */
#define STEP_BODIES 64
static char step_body[STEP_BODIES][400];
static char step_id[STEP_BODIES][64];
static const char *step_thread[STEP_BODIES];

/* A message as src/agent/message.c writes its body (canonical: keys ascending). */
static void step_put(struct vg_store *s, int i, const char *owner, const char *thread,
                     const char *k2, int64_t seq, const char *prev, const char *run, unsigned flags)
{
    snprintf(step_body[i], sizeof step_body[i],
             "{\"agent_id\":\"%s\",\"content\":\"c%d\",\"id\":\"%s\",\"kind\":\"%s\","
             "\"prev_id\":%s%s%s,\"run_id\":\"%s\",\"seq\":%lld,\"thread_id\":\"%s\"}",
             owner, i, step_id[i], k2, prev ? "\"" : "", prev ? prev : "null", prev ? "\"" : "",
             run, (long long)seq, thread);
    struct vg_record r = rec("message", step_id[i], owner, thread, k2, seq, step_body[i]);
    int added = 0;
    step_thread[i] = thread;
    ASSERT_OK(vg_store_put(s, &r, flags, &added, E));
    ASSERT_EQ(added, 1);
    struct model_rec *m = &model[model_n++];
    snprintf(m->kind, sizeof m->kind, "message");
    snprintf(m->id, sizeof m->id, "%s", step_id[i]);
    snprintf(m->owner, sizeof m->owner, "%s", owner);
    snprintf(m->k1, sizeof m->k1, "%s", thread);
    snprintf(m->k2, sizeof m->k2, "%s", k2);
    m->seq = seq;
}

/* Two agents; agent "oa" takes turns between two threads at one message counter, so a thread's
 * step lies apart in seq. Steps of one and two calls, a user message between (its id ends in a
 * digit other than 0: it only looks like a member), a member that names another prev and run. */
static int steps_fill(struct vg_store *s)
{
    static const char *const threads[] = {"oa:t1", "oa:t2", "ob:t1"};
    int64_t seq[2] = {0, 0};
    int n = 0;
    char last[3][64] = {"", "", ""}, host[3][64];
    model_n = 0;
    for (int step = 0; step < 4; step++) {
        for (int t = 0; t < 3; t++) {
            const char *owner = t < 2 ? "oa" : "ob";
            int o = t < 2 ? 0 : 1;
            snprintf(step_id[n], sizeof step_id[n], "0190aaaa-0000-7000-8000-%05d%03d%03d7", step,
                     t, n);
            step_put(s, n, owner, threads[t], "user", ++seq[o], last[t][0] ? last[t] : NULL, "r",
                     0);
            snprintf(last[t], sizeof last[t], "%s", step_id[n++]);
        }
        for (int t = 0; t < 3; t++) { /* the thoughts, then their members, threads interleaved */
            const char *owner = t < 2 ? "oa" : "ob";
            int o = t < 2 ? 0 : 1;
            snprintf(step_id[n], sizeof step_id[n], "0190aaaa-0000-7000-8000-%05d%03d%03d0", step,
                     t, n);
            step_put(s, n, owner, threads[t], "thought", ++seq[o], last[t], "r", 0);
            snprintf(host[t], sizeof host[t], "%s", step_id[n]);
            snprintf(last[t], sizeof last[t], "%s", step_id[n++]);
        }
        int calls = 1 + step % 2;
        for (int k = 1; k <= 2 * calls; k++)
            for (int t = 0; t < 3; t++) {
                const char *owner = t < 2 ? "oa" : "ob";
                int o = t < 2 ? 0 : 1;
                snprintf(step_id[n], sizeof step_id[n], "%.35s%x", host[t], k);
                const char *prev = step == 2 && t == 1 && k == 2 ? "elsewhere" : last[t];
                step_put(s, n, owner, threads[t], k % 2 ? "action" : "toolResult", ++seq[o], prev,
                         step == 3 && k == 1 ? "r2" : "r", 0);
                snprintf(last[t], sizeof last[t], "%s", step_id[n++]);
            }
    }
    return n;
}

static int body_cb(void *user, const struct vg_record *r)
{
    for (int i = 0; i < STEP_BODIES; i++)
        if (!strcmp(step_id[i], r->id)) {
            if (strcmp(step_body[i], r->body) != 0 || r->rev != 1 ||
                r->at != 1700000000000 + r->seq)
                TEST_FAIL_("message %s reads back as %s (rev %lld)", r->id, r->body,
                           (long long)r->rev);
            ++*(int *)user;
            return 0;
        }
    TEST_FAIL_("a message nobody wrote: %s", r->id);
    return 1;
}

static int rows_cb(void *user, const struct vg_record *r)
{
    (void)r;
    ++*(int *)user;
    return 0;
}

/* Every query shape over hosts, members and plain rows: as the model says, counted alike, paged
 * alike. */
static void steps_queries(struct vg_store *s)
{
    static const char *owners[] = {NULL, "oa", "ob"};
    static const char *k1s[] = {NULL, "oa:t1", "oa:t2"};
    static const char *k2s[] = {NULL, "thought", "action", "toolResult", "user"};
    static struct ids got;
    static char want[16384], paged[16384], what[256];
    for (int o = 0; o < 3; o++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 5; b++)
                for (int bounds = 0; bounds < 4; bounds++)
                    for (int desc = 0; desc < 2; desc++)
                        for (int lim = 0; lim < 2; lim++) {
                            struct vg_query q = {.kind = "message",
                                                 .owner = owners[o],
                                                 .k1 = k1s[a],
                                                 .k2 = k2s[b],
                                                 .descending = desc,
                                                 .limit = lim ? 3 : 0,
                                                 .has_seq_min = bounds & 1,
                                                 .seq_min = 8,
                                                 .has_seq_max = (bounds & 2) != 0,
                                                 .seq_max = 20};
                            describe(&q, what, sizeof what);
                            model_query(&q, 0, want, sizeof want);
                            scan_ids(s, &q, &got);
                            if (strcmp(got.text, want) != 0)
                                TEST_FAIL_("scan %s: got \"%s\", want \"%s\"", what, got.text,
                                           want);
                            int64_t cnt = -1;
                            ASSERT_OK(vg_store_count(s, &q, &cnt, E));
                            if (cnt != model_query(&q, 1, want, sizeof want))
                                TEST_FAIL_("count %s: got %lld", what, (long long)cnt);
                            for (int page = 1; lim && page <= 3; page++) {
                                q.limit = 0;
                                model_query(&q, 0, want, sizeof want);
                                paginate(s, q, page, paged, sizeof paged);
                                if (strcmp(paged, want) != 0)
                                    TEST_FAIL_("pages of %d %s: got \"%s\", want \"%s\"", page,
                                               what, paged, want);
                            }
                        }
}

/* The model's record id removed. */
static void model_drop(const char *id)
{
    for (int i = 0; i < model_n; i++)
        if (!strcmp(model[i].id, id)) {
            model[i] = model[--model_n];
            return;
        }
}

TEST(a_steps_messages_share_a_row_and_read_one_record_each)
{
    struct vg_store *s = open_store(1);
    int n = steps_fill(s), seen = 0, rows = 0;
    struct vg_query all = {.kind = "message"};
    ASSERT_OK(vg_store_scan(s, &all, body_cb, &seen, E));
    ASSERT_EQ(seen, n);
    ASSERT_OK(vg_store_scan_stored(s, &all, rows_cb, &rows, E));
    ASSERT(rows < n - 20); /* the members were not rows of their own */
    for (int i = 0; i < n; i++) {
        seen = 0;
        ASSERT_OK(vg_store_get(s, "message", step_id[i], body_cb, &seen, E));
        ASSERT_EQ(seen, 1);
    }
    steps_queries(s);

    /* One message an id: a member's id is taken; put if absent leaves it. */
    struct vg_record again = rec("message", step_id[n - 1], "oa", "oa:t2", "toolResult", 99, "{}");
    int added = 1;
    ASSERT_CODE(VIGIL_EEXISTS, vg_store_put(s, &again, 0, NULL, NULL));
    ASSERT_OK(vg_store_put(s, &again, VG_PUT_IF_ABSENT, &added, E));
    ASSERT_EQ(added, 0);
    seen = 0;
    ASSERT_OK(vg_store_get(s, "message", step_id[n - 1], body_cb, &seen, E));
    ASSERT_EQ(seen, 1);

    /* A message of another store's (a sync's) lands inside a step's span: order holds. */
    snprintf(step_id[n], sizeof step_id[n], "0190bbbb-0000-7000-8000-000000000001");
    int64_t inside = 0;
    for (int i = 0; i < model_n; i++)
        if (!strcmp(model[i].k1, "oa:t1") && !strcmp(model[i].k2, "action"))
            inside = model[i].seq;
    step_put(s, n, "oa", "oa:t1", "user", inside, NULL, "r", VG_PUT_IF_ABSENT);
    n++;
    steps_queries(s);

    /* A member and a host removed; a host updated: the others read as before. */
    ASSERT_OK(vg_store_remove(s, "message", step_id[n - 2], E));
    model_drop(step_id[n - 2]);
    for (int i = 0; i < n; i++)
        if (step_id[i][35] == '0' && !strcmp(step_thread[i], "oa:t2")) {
            ASSERT_OK(vg_store_remove(s, "message", step_id[i], E));
            model_drop(step_id[i]);
            break;
        }
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_store_remove(s, "message", step_id[n - 2], NULL));
    steps_queries(s);
    for (int i = 0; i < n; i++)
        if (step_id[i][35] == '0' && exists(s, "message", step_id[i])) {
            struct vg_record u = rec("message", step_id[i], "x", "", "thought", 0, "{\"u\":1}");
            struct vg_record *g = NULL;
            ASSERT_OK(vg_store_get_copy(s, "message", step_id[i], &g, E));
            u.owner = g->owner, u.k1 = g->k1, u.seq = g->seq;
            ASSERT_OK(vg_store_update(s, &u, 1, E));
            vg_free(g);
            ASSERT_OK(vg_store_get_copy(s, "message", step_id[i], &g, E));
            ASSERT_STREQ(g->body, "{\"u\":1}");
            ASSERT_EQ(g->rev, 2);
            vg_free(g);
            snprintf(step_body[i], sizeof step_body[i], "{\"u\":1}");
            break;
        }
    steps_queries(s);

    /* An agent's removal counts every message. */
    int64_t removed = 0, want = 0;
    for (int i = 0; i < model_n; i++)
        want += !strcmp(model[i].owner, "ob");
    ASSERT_OK(vg_store_remove_owner(s, "ob", &removed, E));
    ASSERT_EQ(removed, want);
    vg_store_close(s);
}

static int stored_cb(void *user, const struct vg_record *r)
{
    snprintf(user, 4096, "%s", r->body);
    return 0;
}

/* The times a string occurs in text. */
static int occurrences(const char *text, const char *s)
{
    int n = 0;
    for (const char *p = strstr(text, s); p; p = strstr(p + 1, s))
        n++;
    return n;
}

/* A tool result's envelope names the operation id its action holds: the row keeps the id once,
 * the result naming it in its action's text (rows.c, FLAG_REF), and both read back as written.
 * A string with escapes, or one that only holds the id, is kept as it is. */
TEST(a_result_keeps_once_the_string_its_action_holds_and_reads_back_as_written)
{
    struct vg_store *s = open_store(1);
    static const char op[] = "\"RGuvZ2-Cy6IlVPh9DNP19zZbPjguR4uQLk2a1myW93o\"";
    const char *ids[] = {"0190dddd-0000-7000-8000-000000000010",
                         "0190dddd-0000-7000-8000-000000000011",
                         "0190dddd-0000-7000-8000-000000000012"};
    const char *k2s[] = {"thought", "action", "toolResult"};
    static char bodies[3][512], stored[4096];
    for (int i = 0; i < 3; i++) {
        snprintf(bodies[i], sizeof bodies[i],
                 "{\"agent_id\":\"od\",\"content\":\"c%d\",\"id\":\"%s\",\"kind\":\"%s\","
                 "\"note\":\"a \\\"%.43s\\\" b\",\"op\":%s,\"prev_id\":%s%s%s,\"run_id\":\"r\","
                 "\"seq\":%d,\"thread_id\":\"od:t\"}",
                 i, ids[i], k2s[i], op + 1, i ? op : "\"short\"", i ? "\"" : "",
                 i ? ids[i - 1] : "null", i ? "\"" : "", i + 1);
        struct vg_record r = rec("message", ids[i], "od", "od:t", k2s[i], i + 1, bodies[i]);
        ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    }
    struct vg_query thread = {.kind = "message", .owner = "od", .k1 = "od:t"};
    ASSERT_OK(vg_store_scan_stored(s, &thread, stored_cb, stored, E));
    ASSERT_EQ(occurrences(stored, op), 1);           /* the action's; the result names it */
    ASSERT_EQ(occurrences(stored, ",\"t\",7,["), 1); /* bit 4 and its reference */
    for (int i = 0; i < 3; i++) {
        struct vg_record *g = NULL;
        ASSERT_OK(vg_store_get_copy(s, "message", ids[i], &g, E));
        ASSERT_STREQ(g->body, bodies[i]);
        vg_free(g);
    }
    static struct ids got;
    scan_ids(s, &thread, &got);
    char want[256];
    snprintf(want, sizeof want, "%s,%s,%s,", ids[0], ids[1], ids[2]);
    ASSERT_STREQ(got.text, want);
    vg_store_close(s);
}

/* A member joins its thought's row only while that row is its thread's last: a message another
 * connection wrote into the thread after the thought, or a thought this connection wrote in a
 * transaction it rolled back, is seen (what the store knows of the row it wrote last does not
 * outlive a write of a message by anyone, nor an undoing). */
TEST(a_member_joins_its_thought_only_while_that_row_is_its_threads_last)
{
    struct vg_store *s = open_store(1), *w = open_store(0);
    struct vg_query thread = {.kind = "message", .owner = "oc", .k1 = "oc:t"};
    static struct ids got;
    int rows = 0, seen = 0;
    model_n = 0;
    snprintf(step_id[0], sizeof step_id[0], "0190cccc-0000-7000-8000-000000000010");
    snprintf(step_id[1], sizeof step_id[1], "0190cccc-0000-7000-8000-00000000003f");
    snprintf(step_id[2], sizeof step_id[2], "0190cccc-0000-7000-8000-000000000011");
    ASSERT_OK(vg_store_begin(s, E)); /* as the loop writes: in transactions */
    step_put(s, 0, "oc", "oc:t", "thought", 1, NULL, "r", 0);
    ASSERT_OK(vg_store_commit(s, E));
    step_put(w, 1, "oc", "oc:t", "user", 2, step_id[0], "r", 0);
    ASSERT_OK(vg_store_begin(s, E));
    step_put(s, 2, "oc", "oc:t", "action", 3, step_id[1], "r", 0);
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_OK(vg_store_scan_stored(s, &thread, rows_cb, &rows, E));
    ASSERT_EQ(rows, 3);
    scan_ids(s, &thread, &got);
    char want[256];
    snprintf(want, sizeof want, "%s,%s,%s,", step_id[0], step_id[1], step_id[2]);
    ASSERT_STREQ(got.text, want);

    /* A thought put and rolled back: its member, put next, is a row of its own. */
    snprintf(step_id[3], sizeof step_id[3], "0190cccc-0000-7000-8000-000000000020");
    snprintf(step_id[4], sizeof step_id[4], "0190cccc-0000-7000-8000-000000000021");
    ASSERT_OK(vg_store_begin(s, E));
    step_put(s, 3, "oc", "oc:t", "thought", 4, step_id[2], "r", 0);
    ASSERT_OK(vg_store_rollback(s, E));
    model_n--;
    step_put(s, 4, "oc", "oc:t", "action", 5, step_id[3], "r", 0);
    seen = 0;
    ASSERT_OK(vg_store_scan(s, &thread, body_cb, &seen, E));
    ASSERT_EQ(seen, 4);
    rows = 0;
    ASSERT_OK(vg_store_scan_stored(s, &thread, rows_cb, &rows, E));
    ASSERT_EQ(rows, 4);
    vg_store_close(w);
    vg_store_close(s);
}

/* ---- cursors ------------------------------------------------------------------------------- */

/* Keyset pages stay exact while another connection inserts between pages: every record that
 * existed is returned once, records inserted ahead of the cursor appear once, and records
 * inserted behind it never do. */
static void cursor_run(struct vg_store *s, struct vg_store *w, int desc)
{
    const char *kind = desc ? "page_desc" : "page_asc";
    char id[64], ahead[64][240], behind[64][240];
    int n_ahead = 0, n_behind = 0;
    for (int i = 1; i <= 30; i++) {
        snprintf(id, sizeof id, "p%03d", i);
        put(s, kind, id, "o", 10 * i);
    }
    static struct ids page;
    static char seen[512][208];
    static int64_t seen_seq[512];
    int n_seen = 0;
    struct vg_query q = {.kind = kind, .owner = "o", .descending = desc, .limit = 5};
    char cursor_id[208];
    for (int guard = 0;; guard++) {
        ASSERT(guard < 100);
        scan_ids(s, &q, &page);
        for (int i = 0; i < page.n; i++) {
            ASSERT(n_seen < 512);
            snprintf(seen[n_seen], sizeof seen[0], "%s", page.idv[i]);
            seen_seq[n_seen++] = page.seqs[i];
        }
        if (page.n < q.limit)
            break;
        int64_t cs = page.seqs[page.n - 1];
        snprintf(cursor_id, sizeof cursor_id, "%s", page.idv[page.n - 1]);
        q.has_after = 1;
        q.after_seq = cs;
        q.after_id = cursor_id;
        /* Four inserts by the other connection: a later and an earlier seq, and two ties with
         * the cursor's seq that sort after and before its id. */
        int k = guard;
        int64_t fwd = desc ? -5 : 5;
        snprintf(ahead[n_ahead], sizeof ahead[0], "f%02d", k);
        put(w, kind, ahead[n_ahead++], "o", cs + fwd);
        snprintf(behind[n_behind], sizeof behind[0], "b%02d", k);
        put(w, kind, behind[n_behind++], "o", cs - fwd);
        snprintf(desc ? behind[n_behind++] : ahead[n_ahead++], 240, "%s-t%02d", cursor_id, k);
        put(w, kind, desc ? behind[n_behind - 1] : ahead[n_ahead - 1], "o", cs);
        snprintf(desc ? ahead[n_ahead++] : behind[n_behind++], 240, "a%02d", k);
        put(w, kind, desc ? ahead[n_ahead - 1] : behind[n_behind - 1], "o", cs);
        /* a record of another owner never shows */
        snprintf(id, sizeof id, "x%02d", k);
        put(w, kind, id, "other-owner", cs + fwd);
    }
    for (int i = 1; i < n_seen; i++) {
        int c = key_cmp(seen_seq[i - 1], seen[i - 1], seen_seq[i], seen[i]);
        if (desc ? c <= 0 : c >= 0)
            TEST_FAIL_("%s: out of order or repeated at %s, %s", kind, seen[i - 1], seen[i]);
    }
    for (int i = 1; i <= 30; i++) {
        snprintf(id, sizeof id, "p%03d", i);
        int hits = 0;
        for (int j = 0; j < n_seen; j++)
            hits += strcmp(seen[j], id) == 0;
        if (hits != 1)
            TEST_FAIL_("%s: %s seen %d times", kind, id, hits);
    }
    for (int i = 0; i < n_ahead; i++) {
        int hits = 0;
        for (int j = 0; j < n_seen; j++)
            hits += strcmp(seen[j], ahead[i]) == 0;
        if (hits != 1)
            TEST_FAIL_("%s: %s (inserted ahead of the cursor) seen %d times", kind, ahead[i], hits);
    }
    for (int i = 0; i < n_behind; i++)
        for (int j = 0; j < n_seen; j++)
            if (strcmp(seen[j], behind[i]) == 0)
                TEST_FAIL_("%s: %s (inserted behind the cursor) was returned", kind, behind[i]);
    ASSERT_EQ(n_seen, 30 + n_ahead);
}

TEST(cursor_stable_under_inserts)
{
    struct vg_store *s = open_store(1);
    struct vg_store *w = open_store(0);
    cursor_run(s, w, 0);
    cursor_run(s, w, 1);
    vg_store_close(w);
    vg_store_close(s);
}

/* ---- transactions -------------------------------------------------------------------------- */

struct hook_log {
    int calls, commits, rollbacks;
};

static void hook(void *user, int committed)
{
    struct hook_log *h = user;
    h->calls++;
    if (committed)
        h->commits++;
    else
        h->rollbacks++;
}

/* proves: S3-024 (transactions are atomic, roll back on error and nest through savepoints) */
TEST(nested_transactions)
{
    struct vg_store *s = open_store(1);
    struct hook_log h = {0};
    vg_store_set_tx_hook(s, hook, &h);

    /* A savepoint rolled back keeps the outer level and later savepoints. */
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT(vg_store_in_tx(s));
    put(s, "tx", "x1", "a", 1);
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "tx", "x2", "a", 2);
    ASSERT(exists(s, "tx", "x2")); /* a transaction reads its own writes */
    ASSERT_OK(vg_store_rollback(s, E));
    ASSERT(!exists(s, "tx", "x2"));
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "tx", "x3", "a", 3);
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_EQ(h.calls, 0); /* inner levels do not fire the hook */
    ASSERT_EQ(count_kind(s, "tx", "a"), 2);
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT(!vg_store_in_tx(s));
    ASSERT_EQ(h.calls, 1);
    ASSERT_EQ(h.commits, 1);
    ASSERT(exists(s, "tx", "x1") && !exists(s, "tx", "x2") && exists(s, "tx", "x3"));

    /* An outer rollback drops everything, released savepoints included. */
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "tx", "y1", "a", 1);
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "tx", "y2", "a", 2);
    struct vg_record u = rec("tx", "x1", "a", "", "", 9, "{\"changed\":true}");
    ASSERT_OK(vg_store_update(s, &u, 1, E));
    ASSERT_OK(vg_store_remove(s, "tx", "x3", E));
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_OK(vg_store_rollback(s, E));
    ASSERT_EQ(h.calls, 2);
    ASSERT_EQ(h.rollbacks, 1);
    ASSERT(!exists(s, "tx", "y1") && !exists(s, "tx", "y2") && exists(s, "tx", "x3"));
    struct vg_record *g = NULL;
    ASSERT_OK(vg_store_get_copy(s, "tx", "x1", &g, E));
    ASSERT_EQ(g->rev, 1);
    ASSERT_STREQ(g->body, "{}");
    vg_free(g);

    /* Three levels; the innermost rolled back, an update inside it undone. */
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "tx", "z1", "a", 1);
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "tx", "z2", "a", 2);
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(vg_store_update(s, &u, 1, E));
    put(s, "tx", "z3", "a", 3);
    ASSERT_OK(vg_store_rollback(s, E));
    ASSERT_OK(vg_store_get_copy(s, "tx", "x1", &g, E));
    ASSERT_EQ(g->rev, 1);
    vg_free(g);
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_EQ(h.calls, 3);
    ASSERT_EQ(h.commits, 2);
    ASSERT(exists(s, "tx", "z1") && exists(s, "tx", "z2") && !exists(s, "tx", "z3"));

    /* Expected refusals inside a transaction leave it usable (EEXISTS, ECONFLICT, ENOTFOUND). */
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "tx", "w1", "a", 1);
    struct vg_record dup = rec("tx", "w1", "a", "", "", 1, "{}");
    ASSERT_CODE(VIGIL_EEXISTS, vg_store_put(s, &dup, 0, NULL, NULL));
    ASSERT_CODE(VIGIL_ECONFLICT, vg_store_update(s, &dup, 7, NULL));
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_store_remove(s, "tx", "absent", NULL));
    put(s, "tx", "w2", "a", 2);
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT(exists(s, "tx", "w1") && exists(s, "tx", "w2"));

    /* vg_store_end commits on OK and rolls back (keeping the caller's code) otherwise. */
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "tx", "e1", "a", 1);
    ASSERT_OK(vg_store_end(s, VIGIL_OK, E));
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "tx", "e2", "a", 1);
    ASSERT_CODE(VIGIL_EINVAL, vg_store_end(s, VIGIL_EINVAL, NULL));
    ASSERT(exists(s, "tx", "e1") && !exists(s, "tx", "e2"));
    ASSERT_EQ(h.calls, 6);
    ASSERT_EQ(h.commits, 4);
    ASSERT_EQ(h.rollbacks, 2);

    /* Commit or rollback with nothing open is refused and fires nothing. */
    ASSERT_CODE(VIGIL_ESTATE, vg_store_commit(s, NULL));
    ASSERT_CODE(VIGIL_ESTATE, vg_store_rollback(s, NULL));
    ASSERT_EQ(h.calls, 6);
    /* Writes outside a transaction commit on their own and fire no hook. */
    put(s, "tx", "auto", "a", 1);
    ASSERT_EQ(h.calls, 6);
    vg_store_set_tx_hook(s, NULL, NULL);
    vg_store_close(s);

    /* Closing with a transaction open rolls it back. */
    s = open_store(0);
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "tx", "lost", "a", 1);
    vg_store_close(s);
    s = open_store(0);
    ASSERT(!exists(s, "tx", "lost"));
    ASSERT(exists(s, "tx", "auto"));
    vg_store_close(s);
}

/* Levels in the orders an adapter may send late (PostgreSQL sends a level's SAVEPOINT with its
 * first statement and its RELEASE with the next one): each level keeps or drops exactly its own
 * writes, whatever was sent when. */
TEST(savepoints_in_every_order)
{
    struct vg_store *s = open_store(1);
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "sp", "outer", "a", 1);
    /* Levels in which nothing was written, released and rolled back. */
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT(exists(s, "sp", "outer"));
    ASSERT_OK(vg_store_rollback(s, E));
    /* A level released, then one at the same depth rolled back: the first one's write stays. */
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "sp", "kept", "a", 2);
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "sp", "undone", "a", 3);
    ASSERT_OK(vg_store_rollback(s, E));
    ASSERT(exists(s, "sp", "kept") && !exists(s, "sp", "undone"));
    /* A deeper level released, then the level around it rolled back: both go. */
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "sp", "mid", "a", 4);
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "sp", "deep", "a", 5);
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_OK(vg_store_rollback(s, E));
    ASSERT(!exists(s, "sp", "mid") && !exists(s, "sp", "deep"));
    /* Twelve levels deep, nothing written until the innermost, which rolls back; the level
     * around it writes after, and every level is released. */
    for (int i = 0; i < 12; i++)
        ASSERT_OK(vg_store_begin(s, E));
    put(s, "sp", "deepest", "a", 6);
    ASSERT_OK(vg_store_rollback(s, E));
    put(s, "sp", "eleventh", "a", 7);
    for (int i = 0; i < 11; i++)
        ASSERT_OK(vg_store_commit(s, E));
    ASSERT(!exists(s, "sp", "deepest") && exists(s, "sp", "eleventh"));
    /* An expected refusal inside a level, then the level rolled back: the transaction goes on. */
    ASSERT_OK(vg_store_begin(s, E));
    struct vg_record dup = rec("sp", "outer", "a", "", "", 1, "{}");
    ASSERT_CODE(VIGIL_EEXISTS, vg_store_put(s, &dup, 0, NULL, NULL));
    ASSERT_OK(vg_store_rollback(s, E));
    put(s, "sp", "after", "a", 8);
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_EQ(count_kind(s, "sp", "a"), 4); /* outer, kept, eleventh, after */
    /* A level released just before the outer rollback: all of it goes. */
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "sp", "gone", "a", 9);
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_OK(vg_store_rollback(s, E));
    ASSERT(!exists(s, "sp", "gone"));
    ASSERT_EQ(count_kind(s, "sp", "a"), 4);
    vg_store_close(s);
}

/* A statement the server refuses (PostgreSQL: a body that is not UTF-8; an adapter may also
 * take it) as the first statement of a level, in a transaction whose first statement also
 * carries what the connection owed (PostgreSQL: the session's commit durability, sent again
 * after a rolled-back transaction or a switch of durability): the level still rolls back and
 * the transaction goes on. */
TEST(refused_statement_in_a_level_after_a_rollback_or_a_switch)
{
    struct vg_store *s = open_store(1);
    put(s, "sr", "x", "a", 1);
    struct vg_record bad = rec("sr", "bad", "a", "", "", 1, "{\"t\": \"\xff\xfe\"}");
    for (int round = 0; round < 2; round++) {
        if (round == 0) { /* a transaction that wrote, rolled back */
            ASSERT_OK(vg_store_begin(s, E));
            put(s, "sr", "undone", "a", 2);
            ASSERT_OK(vg_store_rollback(s, E));
        } else { /* group commit switched on between transactions */
            ASSERT_OK(vg_store_durable_commits(s, 0, E));
        }
        ASSERT_OK(vg_store_begin(s, E));
        ASSERT_OK(vg_store_begin(s, E));
        (void)vg_store_put(s, &bad, 0, NULL, NULL); /* refused or taken: rolled back next */
        ASSERT_OK(vg_store_rollback(s, E));
        put(s, "sr", round ? "after1" : "after0", "a", 3 + round);
        ASSERT_OK(vg_store_commit(s, E));
    }
    ASSERT_OK(vg_store_durable_commits(s, 1, E));
    ASSERT(exists(s, "sr", "after0") && exists(s, "sr", "after1"));
    ASSERT(!exists(s, "sr", "undone") && !exists(s, "sr", "bad"));
    vg_store_close(s);
}

/* The phases a flat transaction's kept-back writes go through (vg_store_defer). */
struct pending_log {
    int flush, done, abort, release, partial;
};

static vigil_code pending_cb(void *user, enum vg_store_pending phase, vigil_error *err)
{
    (void)err;
    struct pending_log *p = user;
    p->flush += phase == VG_PENDING_FLUSH;
    p->done += phase == VG_PENDING_DONE;
    p->abort += phase == VG_PENDING_ABORT;
    p->release += phase == VG_PENDING_RELEASE;
    p->partial += phase == VG_PENDING_PARTIAL;
    return VIGIL_OK;
}

/* A flat transaction (vg_store_begin_flat) is all or nothing: its nested levels commit with it,
 * and a nested level that rolls back takes the whole transaction with it. */
TEST(flat_transactions)
{
    struct vg_store *s = open_store(1);
    struct hook_log h = {0};
    vg_store_set_tx_hook(s, hook, &h);

    /* Nested levels commit with the outer level, and it reads its own writes. */
    ASSERT_OK(vg_store_begin_flat(s, E));
    put(s, "flat", "a1", "o", 1);
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "flat", "a2", "o", 2);
    ASSERT_OK(vg_store_begin_flat(s, E)); /* inside a transaction: a plain nested level */
    put(s, "flat", "a3", "o", 3);
    ASSERT_EQ(vg_store_depth(s), 3);
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT(exists(s, "flat", "a2") && exists(s, "flat", "a3"));
    ASSERT_EQ(h.calls, 0);
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_EQ(h.commits, 1);
    ASSERT_EQ(count_kind(s, "flat", "o"), 3);

    /* A nested level rolled back takes the outer level's earlier writes with it; every later
     * write, level and commit of the transaction is refused; ending every level leaves the
     * store as before and usable. */
    struct pending_log p = {0};
    ASSERT_OK(vg_store_begin_flat(s, E));
    ASSERT_OK(vg_store_defer(s, pending_cb, &p, E));
    put(s, "flat", "b1", "o", 1);
    struct vg_record u = rec("flat", "a1", "o", "", "", 9, "{\"changed\":true}");
    ASSERT_OK(vg_store_update(s, &u, 1, E));
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "flat", "b2", "o", 2);
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_EQ(p.release, 1); /* the owner hears of a level's end as with savepoints */
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "flat", "b3", "o", 3);
    ASSERT_OK(vg_store_rollback(s, E));
    ASSERT_EQ(p.partial, 0); /* not "the rest stays": none of it does */
    struct vg_record b4 = rec("flat", "b4", "o", "", "", 4, "{}");
    ASSERT_CODE(VIGIL_ESTATE, vg_store_put(s, &b4, 0, NULL, NULL));
    ASSERT_CODE(VIGIL_ESTATE, vg_store_begin(s, NULL));
    ASSERT_CODE(VIGIL_ESTATE, vg_store_commit(s, NULL));
    ASSERT(!vg_store_in_tx(s));
    ASSERT_EQ(p.flush, 0);
    ASSERT_EQ(p.abort, 1);
    ASSERT_EQ(p.done, 0);
    ASSERT_EQ(h.rollbacks, 1);
    ASSERT(!exists(s, "flat", "b1") && !exists(s, "flat", "b2") && !exists(s, "flat", "b3") &&
           !exists(s, "flat", "b4"));
    struct vg_record *g = NULL;
    ASSERT_OK(vg_store_get_copy(s, "flat", "a1", &g, E));
    ASSERT_EQ(g->rev, 1);
    vg_free(g);
    ASSERT_OK(vg_store_begin_flat(s, E)); /* the next transaction starts clean */
    put(s, "flat", "c1", "o", 1);
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT(exists(s, "flat", "c1"));

    /* The same when the caller ends the outer level with a rollback instead of a commit. */
    ASSERT_OK(vg_store_begin_flat(s, E));
    put(s, "flat", "d1", "o", 1);
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_CODE(VIGIL_EINVAL, vg_store_end(s, VIGIL_EINVAL, NULL));
    ASSERT_OK(vg_store_rollback(s, E));
    ASSERT(!vg_store_in_tx(s));
    ASSERT(!exists(s, "flat", "d1"));

    /* Expected refusals leave a flat transaction usable, as any other. */
    ASSERT_OK(vg_store_begin_flat(s, E));
    struct vg_record dup = rec("flat", "c1", "o", "", "", 1, "{}");
    ASSERT_CODE(VIGIL_EEXISTS, vg_store_put(s, &dup, 0, NULL, NULL));
    put(s, "flat", "e1", "o", 1);
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT(exists(s, "flat", "e1"));

    /* Inside a plain transaction, a level begun flat is a savepoint of it. */
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "flat", "f1", "o", 1);
    ASSERT_OK(vg_store_begin_flat(s, E));
    put(s, "flat", "f2", "o", 2);
    ASSERT_OK(vg_store_rollback(s, E));
    put(s, "flat", "f3", "o", 3);
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT(exists(s, "flat", "f1") && !exists(s, "flat", "f2") && exists(s, "flat", "f3"));

    vg_store_set_tx_hook(s, NULL, NULL);
    vg_store_close(s);
}

/* ---- nested statements --------------------------------------------------------------------- */

struct nested_ctx {
    struct vg_store *s;
    const char *side; /* kind the callback writes */
    int visited;
};

static int inner_first(void *user, const struct vg_record *r)
{
    int *n = user;
    (*n)++;
    return 1;
}

static int nested_cb(void *user, const struct vg_record *r)
{
    struct nested_ctx *c = user;
    char id[256];
    c->visited++;
    /* Read the same record, count, run a second scan, and write another kind, all while the
     * outer scan is open. */
    struct vg_record *g = NULL;
    ASSERT_OK(vg_store_get_copy(c->s, r->kind, r->id, &g, E));
    ASSERT_STREQ(g->id, r->id);
    ASSERT_EQ(g->seq, r->seq);
    vg_free(g);
    int64_t n = -1;
    struct vg_query q = {.kind = "msg", .owner = "a"};
    ASSERT_OK(vg_store_count(c->s, &q, &n, E));
    ASSERT(n > 0);
    int inner = 0;
    q.limit = 1;
    ASSERT_OK(vg_store_scan(c->s, &q, inner_first, &inner, E));
    ASSERT_EQ(inner, 1);
    snprintf(id, sizeof id, "side-%s", r->id);
    struct vg_record side = rec(c->side, id, "a", r->id, "", r->seq, "{}");
    ASSERT_OK(vg_store_put(c->s, &side, 0, NULL, E));
    /* the record the scan is on can change too */
    struct vg_record u = *r;
    u.body = "{\"touched\":1}";
    ASSERT_OK(vg_store_update(c->s, &u, r->rev, E));
    return 0;
}

TEST(nested_statements_in_scan)
{
    struct vg_store *s = open_store(1);
    model_fill(s);
    static char want[16384];
    struct vg_query q = {.kind = "msg", .owner = "a"};
    int expect = model_query(&q, 0, want, sizeof want);
    ASSERT(expect > 3);
    /* once on its own, once inside a transaction */
    for (int in_tx = 0; in_tx < 2; in_tx++) {
        struct nested_ctx c = {.s = s, .side = in_tx ? "side_tx" : "side"};
        if (in_tx)
            ASSERT_OK(vg_store_begin(s, E));
        ASSERT_OK(vg_store_scan(s, &q, nested_cb, &c, E));
        ASSERT_EQ(c.visited, expect);
        if (in_tx)
            ASSERT_OK(vg_store_commit(s, E));
        ASSERT_EQ(count_kind(s, c.side, "a"), expect);
        static struct ids got;
        scan_ids(s, &q, &got);
        ASSERT_STREQ(got.text, want);
    }
    vg_store_close(s);
}

/* ---- remove_owner -------------------------------------------------------------------------- */

TEST(remove_owner_every_kind)
{
    struct vg_store *s = open_store(1);
    static const char *kinds[] = {"agent", "message", "link", "journal.record", "memory_block"};
    char id[32];
    for (size_t k = 0; k < VG_ARRAY_LEN(kinds); k++)
        for (int i = 0; i < 5; i++) {
            snprintf(id, sizeof id, "a-%d", i);
            put(s, kinds[k], id, "agent-a", i);
            snprintf(id, sizeof id, "b-%d", i);
            put(s, kinds[k], id, "agent-b", i);
            snprintf(id, sizeof id, "ab-%d", i);
            put(s, kinds[k], id, "agent-ab", i); /* owner "agent-a" is no prefix match */
            snprintf(id, sizeof id, "none-%d", i);
            put(s, kinds[k], id, "", i);
        }
    int64_t removed = -1;
    ASSERT_OK(vg_store_remove_owner(s, "agent-a", &removed, E));
    ASSERT_EQ(removed, 25);
    for (size_t k = 0; k < VG_ARRAY_LEN(kinds); k++) {
        ASSERT_EQ(count_kind(s, kinds[k], "agent-a"), 0);
        ASSERT_EQ(count_kind(s, kinds[k], "agent-b"), 5);
        ASSERT_EQ(count_kind(s, kinds[k], "agent-ab"), 5);
        ASSERT_EQ(count_kind(s, kinds[k], ""), 5);
    }
    ASSERT_OK(vg_store_remove_owner(s, "agent-a", &removed, E));
    ASSERT_EQ(removed, 0);
    ASSERT_OK(vg_store_remove_owner(s, "nobody", NULL, E));
    /* The empty owner is never a bulk target. */
    ASSERT_CODE(VIGIL_EINVAL, vg_store_remove_owner(s, "", &removed, NULL));
    ASSERT_CODE(VIGIL_EINVAL, vg_store_remove_owner(s, NULL, &removed, NULL));
    ASSERT_EQ(count_kind(s, "agent", ""), 5);
    /* Inside a rolled-back transaction nothing is removed. */
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(vg_store_remove_owner(s, "agent-b", &removed, E));
    ASSERT_EQ(removed, 25);
    ASSERT_OK(vg_store_rollback(s, E));
    ASSERT_EQ(count_kind(s, "link", "agent-b"), 5);
    vg_store_close(s);
}

/* ---- full-text index (port version 2) ----------------------------------------------------- */

/* Hits of one search: ids joined with ',' and their scores in callback order. */
struct hits {
    char text[2048];
    int n;
    double score[64];
    int stop_at; /* non-zero: stop after this many hits */
};

static int collect_hit(void *user, const char *id, double score)
{
    struct hits *h = user;
    size_t len = strlen(h->text);
    snprintf(h->text + len, sizeof h->text - len, "%s,", id);
    if (h->n < 64)
        h->score[h->n] = score;
    h->n++;
    return h->stop_at && h->n >= h->stop_at;
}

/* Search kind/owner for the given terms (NULL-terminated list) into *h; the hits' scores must
 * never rise (best first). */
static void search(struct vg_store *s, const char *kind, const char *owner, int limit,
                   struct hits *h, const char *const *terms)
{
    size_t n = 0;
    while (terms[n])
        n++;
    int stop_at = h->stop_at;
    memset(h, 0, sizeof *h);
    h->stop_at = stop_at;
    ASSERT_OK(vg_store_text_search(s, kind, owner, terms, n, limit, collect_hit, h, E));
    for (int i = 1; i < h->n && i < 64; i++)
        if (h->score[i] > h->score[i - 1])
            TEST_FAIL_("hits not best first: %s (score %d: %g > %g)", h->text, i, h->score[i],
                       h->score[i - 1]);
}

#define TERMS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void text_put(struct vg_store *s, const char *kind, const char *id, const char *owner,
                     const char *text)
{
    ASSERT_OK(vg_store_text_index(s, kind, id, owner, text, E));
}

TEST(text_index_and_search)
{
    struct vg_store *s = open_store(1);
    struct hits h = {0};
    text_put(s, "memory_block", "b1", "agent-a", "The Quick brown fox jumps over the lazy dog");
    text_put(s, "memory_block", "b2", "agent-a", "a slow green turtle");
    /* Found by any word, case-insensitively; a word in no document finds nothing. */
    search(s, "memory_block", "agent-a", 10, &h, TERMS("quick"));
    ASSERT_STREQ(h.text, "b1,");
    search(s, "memory_block", "agent-a", 10, &h, TERMS("TURTLE"));
    ASSERT_STREQ(h.text, "b2,");
    search(s, "memory_block", "agent-a", 10, &h, TERMS("zebra"));
    ASSERT_STREQ(h.text, "");
    /* Terms are ORed: either word finds its document (ids tie-broken or ranked, so sort). */
    search(s, "memory_block", "agent-a", 10, &h, TERMS("zebra", "fox", "turtle"));
    ASSERT_EQ(h.n, 2);
    ASSERT(strstr(h.text, "b1,") && strstr(h.text, "b2,"));
    /* No terms, or only empty ones: no hits, no error. */
    search(s, "memory_block", "agent-a", 10, &h, TERMS(""));
    ASSERT_EQ(h.n, 0);
    ASSERT_OK(vg_store_text_search(s, "memory_block", "agent-a", NULL, 0, 10, collect_hit, &h, E));
    ASSERT_EQ(h.n, 0);

    /* Re-indexing replaces: the old words are gone, the new ones found. */
    text_put(s, "memory_block", "b1", "agent-a", "an orange cat");
    search(s, "memory_block", "agent-a", 10, &h, TERMS("fox"));
    ASSERT_STREQ(h.text, "");
    search(s, "memory_block", "agent-a", 10, &h, TERMS("cat"));
    ASSERT_STREQ(h.text, "b1,");
    /* NULL text removes; removing what is not indexed is no error. */
    text_put(s, "memory_block", "b1", "agent-a", NULL);
    search(s, "memory_block", "agent-a", 10, &h, TERMS("cat", "orange"));
    ASSERT_STREQ(h.text, "");
    text_put(s, "memory_block", "never", "agent-a", NULL);
    /* The index is separate from the records: no record b2 exists, and none is made. */
    ASSERT(!exists(s, "memory_block", "b2"));

    /* Owner and kind filter: the same word under another owner or kind is not a hit. */
    text_put(s, "memory_block", "o1", "agent-b", "a slow green turtle");
    text_put(s, "memory_block", "o2", "agent-ab", "a slow green turtle");
    text_put(s, "message", "m1", "agent-a", "a slow green turtle");
    search(s, "memory_block", "agent-a", 10, &h, TERMS("turtle"));
    ASSERT_STREQ(h.text, "b2,");
    search(s, "memory_block", "agent-b", 10, &h, TERMS("turtle"));
    ASSERT_STREQ(h.text, "o1,");
    search(s, "message", "agent-a", 10, &h, TERMS("turtle"));
    ASSERT_STREQ(h.text, "m1,");
    search(s, "message", "agent-b", 10, &h, TERMS("turtle"));
    ASSERT_STREQ(h.text, "");
    /* Re-indexing under another owner moves the entry. */
    text_put(s, "message", "m1", "agent-b", "a slow green turtle");
    search(s, "message", "agent-a", 10, &h, TERMS("turtle"));
    ASSERT_STREQ(h.text, "");
    search(s, "message", "agent-b", 10, &h, TERMS("turtle"));
    ASSERT_STREQ(h.text, "m1,");
    vg_store_close(s);
}

TEST(text_search_ranking_and_limit)
{
    struct vg_store *s = open_store(1);
    struct hits h = {0};
    /* Documents of equal length: one has both query words, the others one each. */
    text_put(s, "memory_block", "r1", "a", "alpha delta gamma kappa omega sigma");
    text_put(s, "memory_block", "r2", "a", "alpha bravo gamma kappa omega sigma");
    text_put(s, "memory_block", "r3", "a", "theta delta gamma kappa omega bravo");
    text_put(s, "memory_block", "r4", "a", "theta lambda gamma kappa omega sigma");
    search(s, "memory_block", "a", 10, &h, TERMS("alpha", "bravo"));
    ASSERT_EQ(h.n, 3);
    ASSERT(strncmp(h.text, "r2,", 3) == 0); /* the clearly better match comes first */
    ASSERT(h.score[0] > h.score[1]);
    /* The limit caps the hits, keeping the best. */
    search(s, "memory_block", "a", 1, &h, TERMS("alpha", "bravo"));
    ASSERT_STREQ(h.text, "r2,");
    for (int i = 0; i < 20; i++) {
        char id[16];
        snprintf(id, sizeof id, "many-%02d", i);
        text_put(s, "memory_block", id, "a", "common word here");
    }
    search(s, "memory_block", "a", 7, &h, TERMS("common"));
    ASSERT_EQ(h.n, 7);
    search(s, "memory_block", "a", 1000, &h, TERMS("common"));
    ASSERT_EQ(h.n, 20);
    /* A non-zero callback return stops the search. */
    h.stop_at = 3;
    search(s, "memory_block", "a", 1000, &h, TERMS("common"));
    ASSERT_EQ(h.n, 3);
    h.stop_at = 0;
    /* Limits outside 1..1000 are refused. */
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EINVAL, vg_store_text_search(s, "memory_block", "a", TERMS("common"), 1, 0,
                                                   collect_hit, &h, &err));
    ASSERT_CODE(VIGIL_EINVAL, vg_store_text_search(s, "memory_block", "a", TERMS("common"), 1, 1001,
                                                   collect_hit, &h, &err));
    vg_store_close(s);
}

TEST(text_search_terms_are_data)
{
    struct vg_store *s = open_store(1);
    struct hits h = {0};
    text_put(s, "message", "q1", "a", "do NOT panic OR worry AND near the end");
    text_put(s, "message", "q2", "a", "title x: it's a plain sentence");
    text_put(s, "message", "q3", "a", "unrelated words only");
    /* Each of these is query syntax for FTS5 or tsquery; here they must be plain data: no
     * error, and no term widens the search beyond its own words. */
    static const char *const syntax[] = {
        "\"",
        "\"\"",
        "'",
        "''",
        "*",
        "-",
        "+",
        "(",
        ")",
        "&",
        "|",
        "!",
        "<->",
        "<2>",
        ":",
        ":*",
        "^",
        "\\",
        "{",
        "}",
        "*x",
        "NEAR(a b)",
        "a\"b",
        "x' | 'unrelated",
        "unrelated\" OR \"words",
        "text:only",
        "!unrelated",
        "-unrelated",
    };
    for (size_t i = 0; i < VG_ARRAY_LEN(syntax); i++) {
        const char *t[] = {syntax[i], NULL};
        search(s, "message", "a", 10, &h, t);
        if (strstr(h.text, "q3,") && !strstr(syntax[i], "unrelated"))
            TEST_FAIL_("term \"%s\" matched q3: %s", syntax[i], h.text);
        if (strstr(h.text, "q1,"))
            TEST_FAIL_("term \"%s\" matched q1: %s", syntax[i], h.text);
    }
    /* Operator words are words: NOT, OR, AND, NEAR find the document that has them. */
    search(s, "message", "a", 10, &h, TERMS("NOT"));
    ASSERT_STREQ(h.text, "q1,");
    search(s, "message", "a", 10, &h, TERMS("or"));
    ASSERT_STREQ(h.text, "q1,");
    search(s, "message", "a", 10, &h, TERMS("AND", "NEAR"));
    ASSERT_STREQ(h.text, "q1,");
    /* A term of several words is a phrase in both adapters: "title x" and "it's" match q2,
     * "x title" does not. */
    search(s, "message", "a", 10, &h, TERMS("title:x"));
    ASSERT_STREQ(h.text, "q2,");
    search(s, "message", "a", 10, &h, TERMS("it's"));
    ASSERT_STREQ(h.text, "q2,");
    search(s, "message", "a", 10, &h, TERMS("x title"));
    ASSERT_STREQ(h.text, "");
    /* Quotes inside a term never close a quoted string: the rest stays one phrase. */
    search(s, "message", "a", 10, &h, TERMS("unrelated\" OR \"panic"));
    ASSERT_STREQ(h.text, "");
    vg_store_close(s);
}

TEST(text_index_transactions_and_remove_owner)
{
    struct vg_store *s = open_store(1);
    struct hits h = {0};
    /* Written in the open transaction: a rollback takes the entry back. */
    ASSERT_OK(vg_store_begin(s, E));
    text_put(s, "memory_block", "t1", "agent-a", "ephemeral words");
    search(s, "memory_block", "agent-a", 10, &h, TERMS("ephemeral"));
    ASSERT_STREQ(h.text, "t1,");
    ASSERT_OK(vg_store_rollback(s, E));
    search(s, "memory_block", "agent-a", 10, &h, TERMS("ephemeral"));
    ASSERT_STREQ(h.text, "");

    static const char *kinds[] = {"memory_block", "message"};
    for (size_t k = 0; k < VG_ARRAY_LEN(kinds); k++) {
        put(s, kinds[k], "rec-a", "agent-a", 1);
        text_put(s, kinds[k], "rec-a", "agent-a", "shared lexicon");
        text_put(s, kinds[k], "idx-a", "agent-a", "shared lexicon"); /* index only */
        text_put(s, kinds[k], "idx-b", "agent-b", "shared lexicon");
        text_put(s, kinds[k], "idx-ab", "agent-ab", "shared lexicon");
    }
    /* Rolled back, remove_owner leaves the index too. */
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(vg_store_remove_owner(s, "agent-a", NULL, E));
    ASSERT_OK(vg_store_rollback(s, E));
    search(s, "message", "agent-a", 10, &h, TERMS("lexicon"));
    ASSERT_EQ(h.n, 2);
    int64_t removed = -1;
    ASSERT_OK(vg_store_remove_owner(s, "agent-a", &removed, E));
    ASSERT_EQ(removed, 2); /* records only: index entries are not counted */
    for (size_t k = 0; k < VG_ARRAY_LEN(kinds); k++) {
        search(s, kinds[k], "agent-a", 10, &h, TERMS("lexicon"));
        ASSERT_STREQ(h.text, "");
        search(s, kinds[k], "agent-b", 10, &h, TERMS("lexicon"));
        ASSERT_STREQ(h.text, "idx-b,");
        search(s, kinds[k], "agent-ab", 10, &h, TERMS("lexicon"));
        ASSERT_STREQ(h.text, "idx-ab,");
    }
    /* Re-indexing after remove_owner works (nothing stale is left behind). */
    text_put(s, "message", "idx-a", "agent-a", "fresh start");
    search(s, "message", "agent-a", 10, &h, TERMS("fresh", "lexicon"));
    ASSERT_STREQ(h.text, "idx-a,");
    vg_store_close(s);
}

/* ---- limits and validation ----------------------------------------------------------------- */

/* What a storage budget is measured by (VG_STORE_CTRL_USED_BYTES) falls once records are
 * removed, and compaction (VG_STORE_CTRL_COMPACT) gives their space back and leaves the rest
 * whole (docs/storage.md, "Growth and retention"). */
TEST(used_bytes_fall_on_removal_and_compaction_keeps_the_rest)
{
    struct vg_store *s = open_store(1);
    static char body[4096 + 3];
    uint32_t x = 12345;
    char id[32];
    ASSERT_OK(vg_store_begin(s, E));
    for (int i = 0; i < 300; i++) {
        body[0] = '"';
        for (size_t j = 1; j <= 4096; j++) /* letters that do not compress */
            body[j] = (char)('a' + ((x = x * 1103515245u + 12345u) >> 16) % 26);
        body[4097] = '"';
        body[4098] = '\0';
        snprintf(id, sizeof id, "r%03d", i);
        struct vg_record r = rec("trace", id, i % 2 ? "a" : "b", "", "", i, body);
        ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    }
    ASSERT_OK(vg_store_commit(s, E));
    int64_t before = 0, after = 0;
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_USED_BYTES, &before, E));
    ASSERT(before >= 300 * 4096);
    int64_t removed = 0;
    ASSERT_OK(vg_store_remove_owner(s, "a", &removed, E));
    ASSERT_EQ(removed, 150);
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_USED_BYTES, &after, E));
    ASSERT(after <= before - 150 * 4096 / 2); /* pages shared with kept rows may stay */
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_COMPACT, NULL, E));
    struct vg_query q = {.kind = "trace"};
    int64_t n = 0;
    ASSERT_OK(vg_store_count(s, &q, &n, E));
    ASSERT_EQ(n, 150);
    struct vg_record *g = NULL;
    ASSERT_OK(vg_store_get_copy(s, "trace", "r000", &g, E));
    ASSERT_EQ(strlen(g->body), 4098);
    vg_free(g);
    vg_store_close(s);
}

TEST(large_bodies)
{
    struct vg_store *s = open_store(1);
    size_t n = 1024 * 1024;
    char *body = vg_malloc(n + 16);
    ASSERT(body != NULL);
    body[0] = '"';
    for (size_t i = 1; i < n; i++)
        body[i] = (char)('a' + (i * 7) % 26);
    body[n] = '"';
    body[n + 1] = '\0';
    struct vg_record r = rec("payload", "big", "a", "", "", 1, body);
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    struct vg_record *g = NULL;
    ASSERT_OK(vg_store_get_copy(s, "payload", "big", &g, E));
    ASSERT_EQ(strlen(g->body), n + 1);
    ASSERT(memcmp(g->body, body, n + 1) == 0);
    vg_free(g);
    /* an update to another 1 MB body, then a scan returns it whole */
    body[1] = 'Z';
    ASSERT_OK(vg_store_update(s, &r, 1, E));
    static struct ids got;
    struct vg_query q = {.kind = "payload"};
    scan_ids(s, &q, &got);
    ASSERT_EQ(got.n, 1);
    ASSERT_OK(vg_store_get_copy(s, "payload", "big", &g, E));
    ASSERT_EQ(g->body[1], 'Z');
    ASSERT_EQ(strlen(g->body), n + 1);
    vg_free(g);
    vg_free(body);
    vg_store_close(s);
}

TEST(unicode_round_trip)
{
    struct vg_store *s = open_store(1);
    const char *id = "日本語-ü-\xF0\x9F\x98\x80";
    const char *owner = "agent-ñ";
    const char *k1 = "thread-\xE2\x9C\x93";
    const char *body = "{\"text\":\"h\xC3\xA9llo \xF0\x9F\x98\x80 \\u0000 \\\"q\\\"\"}";
    struct vg_record r = rec("message", id, owner, k1, "ключ", 3, body);
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    struct vg_record *g = NULL;
    ASSERT_OK(vg_store_get_copy(s, "message", id, &g, E));
    ASSERT_STREQ(g->id, id);
    ASSERT_STREQ(g->owner, owner);
    ASSERT_STREQ(g->k1, k1);
    ASSERT_STREQ(g->k2, "ключ");
    ASSERT_STREQ(g->body, body);
    vg_free(g);
    static struct ids got;
    struct vg_query q = {.kind = "message", .owner = owner, .k1 = k1, .k2 = "ключ"};
    scan_ids(s, &q, &got);
    ASSERT_EQ(got.n, 1);
    ASSERT_STREQ(got.idv[0], id);
    /* a different normalization or case is a different key */
    q.owner = "agent-Ñ";
    scan_ids(s, &q, &got);
    ASSERT_EQ(got.n, 0);
    vg_store_close(s);
}

TEST(id_limits_and_invalid_input)
{
    struct vg_store *s = open_store(1);
    char id200[201], id201[202], utf200[201], kind40[41], kind41[42];
    memset(id200, 'x', 200);
    id200[200] = '\0';
    memset(id201, 'y', 201);
    id201[201] = '\0';
    for (int i = 0; i < 100; i++)
        memcpy(utf200 + 2 * i, "\xC3\xA9", 2); /* 100 x "é": 200 bytes */
    utf200[200] = '\0';
    memset(kind40, 'k', 40);
    kind40[40] = '\0';
    memset(kind41, 'k', 41);
    kind41[41] = '\0';

    struct vg_record r = rec("message", id200, "a", "", "", 1, "{}");
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    ASSERT(exists(s, "message", id200));
    r.id = utf200;
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    ASSERT(exists(s, "message", utf200));
    r.kind = kind40;
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    ASSERT(exists(s, kind40, utf200));
    r.kind = "a.b_c9";
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));

    /* Refused before reaching the adapter, with EINVAL, and nothing written. */
    vigil_error err = {0};
    r.kind = "message";
    r.id = id201;
    ASSERT_CODE(VIGIL_EINVAL, vg_store_put(s, &r, 0, NULL, &err));
    ASSERT_CODE(VIGIL_EINVAL, vg_store_update(s, &r, 1, NULL));
    ASSERT_CODE(VIGIL_EINVAL, vg_store_get(s, "message", id201, copy_one, NULL, NULL));
    ASSERT_CODE(VIGIL_EINVAL, vg_store_remove(s, "message", id201, NULL));
    r.id = "";
    ASSERT_CODE(VIGIL_EINVAL, vg_store_put(s, &r, 0, NULL, NULL));
    r.id = NULL;
    ASSERT_CODE(VIGIL_EINVAL, vg_store_put(s, &r, 0, NULL, NULL));
    r.id = "ok";
    r.body = "";
    ASSERT_CODE(VIGIL_EINVAL, vg_store_put(s, &r, 0, NULL, NULL));
    r.body = NULL;
    ASSERT_CODE(VIGIL_EINVAL, vg_store_put(s, &r, 0, NULL, NULL));
    r.body = "{}";
    static const char *bad_kinds[] = {"", "Message", "a-b", "a b", "ké", "msg/x", "msg;drop"};
    for (size_t i = 0; i <= VG_ARRAY_LEN(bad_kinds); i++) {
        const char *k = i < VG_ARRAY_LEN(bad_kinds) ? bad_kinds[i] : kind41;
        r.kind = k;
        ASSERT_CODE(VIGIL_EINVAL, vg_store_put(s, &r, 0, NULL, NULL));
        ASSERT_CODE(VIGIL_EINVAL, vg_store_update(s, &r, 1, NULL));
        ASSERT_CODE(VIGIL_EINVAL, vg_store_get(s, k, "ok", copy_one, NULL, NULL));
        ASSERT_CODE(VIGIL_EINVAL, vg_store_remove(s, k, "ok", NULL));
        struct vg_query q = {.kind = k};
        int64_t n;
        ASSERT_CODE(VIGIL_EINVAL, vg_store_scan(s, &q, collect, NULL, NULL));
        ASSERT_CODE(VIGIL_EINVAL, vg_store_count(s, &q, &n, NULL));
    }
    r.kind = NULL;
    ASSERT_CODE(VIGIL_EINVAL, vg_store_put(s, &r, 0, NULL, NULL));
    struct vg_query q = {.kind = "message", .has_after = 1};
    ASSERT_CODE(VIGIL_EINVAL, vg_store_scan(s, &q, collect, NULL, NULL));
    q.has_after = 0;
    q.limit = -1;
    ASSERT_CODE(VIGIL_EINVAL, vg_store_scan(s, &q, collect, NULL, NULL));
    ASSERT_EQ(count_kind(s, "message", NULL), 2);
    /* An unknown control op is ENOTFOUND. */
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_store_control(s, 9999, NULL, NULL));
    vg_store_close(s);
}

/* ---- durability ---------------------------------------------------------------------------- */

/* proves: S0-002 (records survive a restart unchanged) */
TEST(durable_across_reopen)
{
    struct vg_store *s = open_store(1);
    int version = 0;
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_SCHEMA_VERSION, &version, E));
    ASSERT(version > 0);
    char id[32];
    ASSERT_OK(vg_store_begin(s, E));
    for (int i = 0; i < 10; i++) {
        snprintf(id, sizeof id, "d%d", i);
        put(s, "durable", id, "a", i);
    }
    ASSERT_OK(vg_store_commit(s, E));
    put(s, "durable", "single", "a", 100);
    ASSERT_OK(vg_store_begin(s, E));
    put(s, "durable", "rolled-back", "a", 101);
    ASSERT_OK(vg_store_rollback(s, E));
    struct vg_record u = rec("durable", "d1", "a", "k", "", 1, "{\"v\":2}");
    ASSERT_OK(vg_store_update(s, &u, 1, E));
    ASSERT_OK(vg_store_remove(s, "durable", "d2", E));
    vg_store_close(s);

    s = open_store(0);
    int version2 = 0;
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_SCHEMA_VERSION, &version2, E));
    ASSERT_EQ(version2, version);
    ASSERT_EQ(count_kind(s, "durable", "a"), 10);
    ASSERT(exists(s, "durable", "single"));
    ASSERT(!exists(s, "durable", "rolled-back"));
    ASSERT(!exists(s, "durable", "d2"));
    struct vg_record *g = NULL;
    ASSERT_OK(vg_store_get_copy(s, "durable", "d1", &g, E));
    ASSERT_EQ(g->rev, 2);
    ASSERT_STREQ(g->k1, "k");
    ASSERT_STREQ(g->body, "{\"v\":2}");
    vg_free(g);
    static struct ids got;
    struct vg_query q = {.kind = "durable", .owner = "a", .descending = 1, .limit = 3};
    scan_ids(s, &q, &got);
    ASSERT_STREQ(got.text, "single,d9,d8,");
    vg_store_close(s);
}

/* ---- concurrent writers -------------------------------------------------------------------- */

#define WRITERS 2
#define WRITES 40

static long body_counter(const char *body)
{
    const char *p = strstr(body, "\"n\":");
    return p ? strtol(p + 4, NULL, 10) : -1;
}

/* One child: WRITES transactions, each a read-modify-write of a shared counter (retried on
 * ECONFLICT or EBUSY) plus an appended record. Exit status 0 when all landed. */
static int writer_child(int w)
{
    struct vg_store *s = NULL;
    vigil_error err = {0};
    if (opener->open(opener->user, 0, &s, &err) != VIGIL_OK) {
        fprintf(stderr, "writer %d: %s\n", w, err.message);
        return 2;
    }
    int status = 0;
    for (int i = 0; i < WRITES && status == 0; i++) {
        for (int attempt = 0;; attempt++) {
            struct vg_record *c = NULL;
            char body[64], id[64];
            vigil_code rc = vg_store_begin(s, &err);
            if (rc == VIGIL_OK)
                rc = vg_store_get_copy(s, "counter", "c", &c, &err);
            if (rc == VIGIL_OK) {
                snprintf(body, sizeof body, "{\"n\":%ld}", body_counter(c->body) + 1);
                struct vg_record u = *c;
                u.body = body;
                rc = vg_store_update(s, &u, c->rev, &err);
                vg_free(c);
            }
            if (rc == VIGIL_OK) {
                snprintf(id, sizeof id, "w%d-%d", w, i);
                struct vg_record a = rec("append", id, "shared", "", "", i, "{}");
                rc = vg_store_put(s, &a, 0, NULL, &err);
            }
            if (vg_store_in_tx(s))
                rc = vg_store_end(s, rc, &err);
            if (rc == VIGIL_OK)
                break;
            if ((rc != VIGIL_ECONFLICT && rc != VIGIL_EBUSY) || attempt > 1000) {
                fprintf(stderr, "writer %d: %s: %s\n", w, vigil_code_name(rc), err.message);
                status = 3;
                break;
            }
        }
    }
    vg_store_close(s);
    return status;
}

TEST(concurrent_writers)
{
    struct vg_store *s = open_store(1);
    struct vg_record c = rec("counter", "c", "shared", "", "", 0, "{\"n\":0}");
    ASSERT_OK(vg_store_put(s, &c, 0, NULL, E));
    vg_store_close(s); /* no connection crosses the fork */
    fflush(NULL);
    pid_t pids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        pids[w] = fork();
        ASSERT(pids[w] >= 0);
        if (pids[w] == 0)
            _exit(writer_child(w));
    }
    for (int w = 0; w < WRITERS; w++) {
        int st = 0;
        ASSERT(waitpid(pids[w], &st, 0) == pids[w]);
        ASSERT(WIFEXITED(st));
        ASSERT_EQ(WEXITSTATUS(st), 0);
    }
    s = open_store(0);
    struct vg_record *g = NULL;
    ASSERT_OK(vg_store_get_copy(s, "counter", "c", &g, E));
    ASSERT_EQ(body_counter(g->body), WRITERS * WRITES); /* no lost update */
    ASSERT_EQ(g->rev, 1 + WRITERS * WRITES);
    vg_free(g);
    ASSERT_EQ(count_kind(s, "append", "shared"), WRITERS * WRITES);
    vg_store_close(s);
}

/* ---- entry point --------------------------------------------------------------------------- */

#define CASE(name)                                                                                 \
    do {                                                                                           \
        vg_test_current = #name;                                                                   \
        name();                                                                                    \
        fprintf(stderr, "ok - %s: %s\n", op->label, #name);                                        \
    } while (0)

void vg_store_conformance(const struct vg_conf_opener *op)
{
    opener = op;
    CASE(put_get_update_remove);
    CASE(put_if_absent);
    CASE(revision_cas);
    CASE(status_updates_find_the_row_under_its_new_keys);
    CASE(scans_match_model);
    CASE(a_steps_messages_share_a_row_and_read_one_record_each);
    CASE(a_member_joins_its_thought_only_while_that_row_is_its_threads_last);
    CASE(a_result_keeps_once_the_string_its_action_holds_and_reads_back_as_written);
    CASE(cursor_stable_under_inserts);
    CASE(nested_transactions);
    CASE(savepoints_in_every_order);
    CASE(refused_statement_in_a_level_after_a_rollback_or_a_switch);
    CASE(flat_transactions);
    CASE(nested_statements_in_scan);
    CASE(remove_owner_every_kind);
    CASE(text_index_and_search);
    CASE(text_search_ranking_and_limit);
    CASE(text_search_terms_are_data);
    CASE(text_index_transactions_and_remove_owner);
    CASE(large_bodies);
    CASE(used_bytes_fall_on_removal_and_compaction_keeps_the_rest);
    CASE(unicode_round_trip);
    CASE(id_limits_and_invalid_input);
    CASE(durable_across_reopen);
    CASE(concurrent_writers);
    opener = NULL;
}
