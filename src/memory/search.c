/*
 * search.c: hybrid search over an agent's memory. Keyword hits come from the store's text
 * index (FTS5 on SQLite); vector hits from an exact cosine top-k over the agent's vectors,
 * which are kept decoded in one contiguous float array per agent and reloaded only when the
 * agent's vector generation (bumped in every transaction that changes a vector) moves. The two
 * rankings are fused by reciprocal rank (score = sum of 1 / (60 + rank)), which needs no score
 * calibration between BM25 and cosine.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "memory/memory_int.h"

#include <ctype.h>

#define RRF_K 60.0
#define CANDIDATES 50
#define CACHE_SLOTS 8
#define MAX_TERMS 32

/* ---- query terms ---------------------------------------------------------------------------- */

/* Words too common to say what a query is about: as keywords they matched a block on "in" or
 * "the" alone and labelled it `words` (E15 of session 31's trial). English only, as the
 * built-in embedder's word pieces are; a query of nothing else searches by likeness alone. */
static int stop_word(const char *w)
{
    static const char *const words[] = {
        "a",    "an",   "and",  "are",  "as",   "at",   "be",    "but",  "by",    "can",
        "did",  "do",   "does", "for",  "from", "had",  "has",   "have", "how",   "i",
        "if",   "in",   "is",   "it",   "its",  "me",   "my",    "no",   "not",   "of",
        "on",   "or",   "our",  "so",   "that", "the",  "their", "them", "then",  "there",
        "they", "this", "to",   "was",  "we",   "were", "what",  "when", "where", "which",
        "who",  "why",  "will", "with", "you",  "your"};
    for (size_t i = 0; i < VG_ARRAY_LEN(words); i++)
        if (!strcmp(w, words[i]))
            return 1;
    return 0;
}

vigil_code vg_memory_query_terms(const char *text, json_t **out, vigil_error *err)
{
    json_t *terms = json_array();
    if (!terms)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a query");
    const unsigned char *p = (const unsigned char *)(text ? text : "");
    while (*p && json_array_size(terms) < MAX_TERMS) {
        while (*p && !(isalnum(*p) || *p >= 0x80))
            p++;
        char word[65];
        size_t n = 0;
        while (*p && (isalnum(*p) || *p >= 0x80)) {
            if (n < sizeof word - 1)
                word[n++] = (char)tolower(*p);
            p++;
        }
        if (!n)
            break;
        word[n] = '\0';
        int dup = stop_word(word);
        for (size_t i = 0; !dup && i < json_array_size(terms); i++)
            dup |= strcmp(json_string_value(json_array_get(terms, i)), word) == 0;
        /* A cut UTF-8 sequence would not be valid text: jansson refuses it, so skip it. */
        json_t *s = dup ? NULL : json_string(word);
        if (s && json_array_append_new(terms, s)) {
            json_decref(terms);
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a query");
        }
    }
    *out = terms;
    return VIGIL_OK;
}

/* ---- the vector cache ----------------------------------------------------------------------- */

struct vec_slot {
    char agent[VG_RECORD_ID_MAX];
    char model[128];
    int64_t gen;
    int dim;
    int64_t n, cap;
    float *m; /* n rows of dim floats */
    char (*ids)[VG_BLOCK_ID_LEN];
    uint64_t used; /* for replacement */
};

struct vg_vec_cache {
    struct vec_slot slots[CACHE_SLOTS];
    uint64_t tick;
};

static void slot_clear(struct vec_slot *s)
{
    vg_free(s->m);
    vg_free(s->ids);
    memset(s, 0, sizeof *s);
}

void vg_vec_cache_free(struct vg_vec_cache *c)
{
    if (!c)
        return;
    for (int i = 0; i < CACHE_SLOTS; i++)
        slot_clear(&c->slots[i]);
    vg_free(c);
}

struct load_ctx {
    struct vec_slot *s;
    vigil_code rc;
    vigil_error *err;
};

static int load_cb(void *user, const struct vg_record *r)
{
    struct load_ctx *c = user;
    struct vec_slot *s = c->s;
    if (r->seq != s->dim)
        return 0; /* written by another configuration of the model: not comparable */
    if (s->n == s->cap) {
        int64_t cap = s->cap ? s->cap * 2 : 256;
        float *m = vg_realloc(s->m, sizeof *m * (size_t)cap * (size_t)s->dim);
        if (m)
            s->m = m;
        char(*ids)[VG_BLOCK_ID_LEN] = m ? vg_realloc(s->ids, sizeof *ids * (size_t)cap) : NULL;
        if (!m || !ids) {
            c->rc = VG_FAIL(c->err, VIGIL_ENOMEM, "out of memory loading vectors");
            return 1;
        }
        s->ids = ids;
        s->cap = cap;
    }
    float *row = s->m + (size_t)s->n * (size_t)s->dim;
    vigil_error e = {0};
    /* Fast path: the body is written with sorted keys, so "v" (base64: no escapes) comes
     * last; decode it in place instead of building a JSON tree for a 2 KB string. */
    const char *v = strstr(r->body, "\"v\":\"");
    const char *end = v ? strchr(v + 5, '"') : NULL;
    int ok = 0;
    if (end && (size_t)(end - (v + 5)) < 1u << 20) {
        char *text = vg_strndup(v + 5, (size_t)(end - (v + 5)));
        ok = text && vg_vec_decode(text, s->dim, row, &e) == VIGIL_OK;
        vg_free(text);
    }
    if (!ok) {
        json_error_t je;
        json_t *body = json_loads(r->body, 0, &je);
        ok = body && vg_vec_decode(json_string_value(json_object_get(body, "v")), s->dim, row,
                                   &e) == VIGIL_OK;
        json_decref(body);
    }
    if (!ok)
        return 0; /* a damaged vector only costs that block its vector hit */
    snprintf(s->ids[s->n], VG_BLOCK_ID_LEN, "%s", r->id);
    s->n++;
    return 0;
}

/* The agent's vectors of the embedder's model, loaded or reused (*out borrowed). */
static vigil_code vectors(struct vg_memory *m, const char *agent_id, struct vec_slot **out,
                          vigil_error *err)
{
    json_t *meta = NULL;
    int64_t gen = 0;
    vigil_code rc = vg_env_get_json(m->env, "memory_meta", agent_id, &meta, NULL, err);
    if (rc && rc != VIGIL_ENOTFOUND)
        return rc;
    if (meta)
        gen = json_integer_value(json_object_get(meta, "vec_gen"));
    json_decref(meta);
    if (!m->cache && !(m->cache = vg_calloc(1, sizeof *m->cache)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory loading vectors");
    struct vg_vec_cache *c = m->cache;
    const char *model = vg_embed_model(m->embedder);
    int dim = vg_embed_dimension(m->embedder);
    struct vec_slot *s = NULL, *victim = &c->slots[0];
    for (int i = 0; i < CACHE_SLOTS; i++) {
        struct vec_slot *x = &c->slots[i];
        if (strcmp(x->agent, agent_id) == 0 && strcmp(x->model, model) == 0 && x->dim == dim)
            s = x;
        if (x->used < victim->used)
            victim = x;
    }
    if (s && s->gen == gen) {
        s->used = ++c->tick;
        *out = s;
        return VIGIL_OK;
    }
    if (!s)
        s = victim;
    slot_clear(s);
    snprintf(s->agent, sizeof s->agent, "%s", agent_id);
    snprintf(s->model, sizeof s->model, "%s", model);
    s->dim = dim;
    s->gen = gen;
    struct load_ctx lc = {s, VIGIL_OK, err};
    struct vg_query q = {.kind = "memory_vector", .owner = agent_id, .k1 = model};
    rc = vg_store_scan(m->env->store, &q, load_cb, &lc, err);
    if (!rc)
        rc = lc.rc;
    if (rc) {
        slot_clear(s);
        return rc;
    }
    s->used = ++c->tick;
    *out = s;
    return VIGIL_OK;
}

/* ---- search --------------------------------------------------------------------------------- */

struct cand {
    char kind[16];
    char id[VG_RECORD_ID_MAX];
    int kw_rank, vec_rank; /* 1-based; 0: not in that list */
    float similarity;      /* the cosine of a vector hit */
    double score;
};

struct cands {
    struct cand *v;
    size_t n, cap;
    const char *kind; /* of the hits being added */
    int rank;
    int failed;
};

static struct cand *cand_find(struct cands *cs, const char *kind, const char *id)
{
    for (size_t i = 0; i < cs->n; i++)
        if (strcmp(cs->v[i].id, id) == 0 && strcmp(cs->v[i].kind, kind) == 0)
            return &cs->v[i];
    if (cs->n == cs->cap) {
        size_t cap = cs->cap ? cs->cap * 2 : 64;
        struct cand *v = vg_realloc(cs->v, sizeof *v * cap);
        if (!v) {
            cs->failed = 1;
            return NULL;
        }
        cs->v = v;
        cs->cap = cap;
    }
    struct cand *c = &cs->v[cs->n++];
    memset(c, 0, sizeof *c);
    snprintf(c->kind, sizeof c->kind, "%s", kind);
    snprintf(c->id, sizeof c->id, "%s", id);
    return c;
}

static int kw_hit(void *user, const char *id, double score)
{
    struct cands *cs = user;
    struct cand *c = cand_find(cs, cs->kind, id);
    if (!c)
        return 1;
    if (!c->kw_rank) {
        c->kw_rank = ++cs->rank;
        c->score += 1.0 / (RRF_K + c->kw_rank);
    }
    return 0;
}

static int by_score(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->score != y->score)
        return x->score < y->score ? 1 : -1;
    return strcmp(x->id, y->id);
}

static vigil_code keyword(struct vg_memory *m, const char *agent_id, json_t *terms,
                          struct cands *cs, vigil_error *err)
{
    size_t n = json_array_size(terms);
    const char *t[MAX_TERMS];
    for (size_t i = 0; i < n && i < MAX_TERMS; i++)
        t[i] = json_string_value(json_array_get(terms, i));
    /* Blocks and compacted history rank in one list: the interleaving is by BM25 order within
     * each kind, blocks first, which RRF then blends with the vector list. */
    static const char *const kinds[] = {"memory_block", "message"};
    cs->rank = 0;
    for (size_t k = 0; k < VG_ARRAY_LEN(kinds); k++) {
        cs->kind = kinds[k];
        vigil_code rc = vg_store_text_search(m->env->store, kinds[k], agent_id, t, n, CANDIDATES,
                                             kw_hit, cs, err);
        if (rc == VIGIL_EUNSUPPORTED)
            return VIGIL_OK; /* an adapter without a text index: vector search only */
        if (rc)
            return rc;
        if (cs->failed)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory searching memory");
    }
    return VIGIL_OK;
}
static int builtin_embedder(struct vg_memory *m)
{
    const char *model = m->embedder ? vg_embed_model(m->embedder) : NULL;
    return model && !strncmp(model, "vigil-hash", 10);
}

/* The terms joined by spaces (owned), NULL when there are none. */
static char *joined(json_t *terms)
{
    struct vg_buf b;
    size_t i;
    json_t *t;
    vg_buf_init(&b, 16384);
    json_array_foreach (terms, i, t)
        vg_buf_printf(&b, "%s%s", i ? " " : "", json_string_value(t));
    if (!b.len || b.fail) {
        vg_buf_release(&b);
        return NULL;
    }
    return vg_buf_detach(&b, NULL);
}

/* How many distinct letter trigrams of the query's words (stop words left out) the text holds,
 * counted up to want. */
static int shared_trigrams(json_t *terms, const char *text, int want)
{
    char *low = vg_strdup(text ? text : ""), tri[4] = "";
    int n = 0;
    size_t i;
    json_t *t;
    for (char *p = low; p && *p; p++)
        *p = (char)tolower((unsigned char)*p);
    json_array_foreach (terms, i, t) {
        const char *w = json_string_value(t);
        for (size_t j = 0; low && w && j + 3 <= strlen(w) && n < want; j++) {
            memcpy(tri, w + j, 3);
            n += strstr(low, tri) != NULL;
        }
    }
    vg_free(low);
    return n;
}

/* With the built-in embedder (feature hashing into 384 dimensions) a short query's few
 * features collide with unrelated text's: "xqzv" came out 0.15 like a note about Japanese
 * lessons (E15 of session 31's trial). So a hit by that likeness alone, and not a strong one,
 * must share at least two letter trigrams with the query, as its pieces say it does. A real
 * model's cosine above 0 already says something. */
#define BUILTIN_STRONG_LIKENESS 0.3
static int weak_builtin_hit(struct vg_memory *m, const struct cand *c, json_t *terms, json_t *item)
{
    if (!builtin_embedder(m) || c->kw_rank || !c->vec_rank ||
        c->similarity >= BUILTIN_STRONG_LIKENESS)
        return 0;
    return shared_trigrams(terms, json_string_value(json_object_get(item, "content")), 2) < 2;
}

static vigil_code vector(struct vg_memory *m, const char *agent_id, const char *query,
                         struct cands *cs, vigil_error *err)
{
    if (!vg_memory_may_embed(m))
        return VIGIL_OK; /* keyword results stand alone, as when the embedder is down */
    int dim = vg_embed_dimension(m->embedder);
    float *q = vg_malloc(sizeof *q * (size_t)dim);
    if (!q)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory searching memory");
    vigil_error e = {0};
    if (vg_embed(m->embedder, &query, 1, q, &e)) {
        vg_free(q);
        return VIGIL_OK; /* the embedder is down: keyword results stand alone */
    }
    struct vec_slot *s = NULL;
    vigil_code rc = vectors(m, agent_id, &s, err);
    struct vg_vec_hit hits[CANDIDATES];
    size_t nh = rc ? 0 : vg_vec_topk(s->m, s->n, dim, q, CANDIDATES, hits);
    vg_free(q);
    /* Top-k ranks every vector, however unlike: a block with no similarity at all (cosine 0 or
     * less: with the built-in embedder, not one word or word piece in common) is no match, and
     * listing it would read as one (B4 of the session 29 user trial). */
    while (nh > 0 && hits[nh - 1].score <= 0.0f)
        nh--;
    for (size_t i = 0; i < nh; i++) {
        struct cand *c = cand_find(cs, "memory_block", s->ids[hits[i].row]);
        if (!c)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory searching memory");
        c->vec_rank = (int)i + 1;
        c->similarity = hits[i].score;
        c->score += 1.0 / (RRF_K + c->vec_rank);
    }
    return rc;
}

static json_t *materialize(struct vg_memory *m, const struct cand *c)
{
    json_t *body = NULL, *o = NULL;
    vigil_error e = {0};
    if (strcmp(c->kind, "memory_block") == 0) {
        if (vg_env_get_json(m->env, "memory_block", c->id, &body, NULL, &e))
            return NULL; /* deleted since it was indexed */
        o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "kind", "memory_block", "id", c->id,
                      "label", vg_memory_str(body, "label"), "tier", vg_memory_str(body, "tier"),
                      "permission", vg_memory_str(body, "permission"), "content",
                      vg_memory_str(body, "content"));
    } else {
        if (vg_message_get(m->env, c->id, &body, &e))
            return NULL;
        o = json_pack("{s:s, s:s, s:s, s:s, s:s}", "kind", "message", "id", c->id, "message_kind",
                      vg_memory_str(body, "kind"), "thread_id", vg_memory_str(body, "thread_id"),
                      "content", vg_memory_str(body, "content"));
    }
    json_decref(body);
    if (o) {
        json_object_set_new(o, "score", json_real(c->score));
        if (c->kw_rank)
            json_object_set_new(o, "keyword_rank", json_integer(c->kw_rank));
        if (c->vec_rank) {
            json_object_set_new(o, "vector_rank", json_integer(c->vec_rank));
            json_object_set_new(o, "similarity", json_real((double)c->similarity));
        }
    }
    return o;
}

vigil_code vg_memory_search(struct vg_memory *m, const char *agent_id, const char *query,
                            enum vg_search_mode mode, int k, json_t **out, vigil_error *err)
{
    if (!agent_id || !*agent_id)
        return VG_FAIL(err, VIGIL_EINVAL, "a memory search needs an agent id");
    if (k <= 0 || k > 100)
        return VG_FAIL(err, VIGIL_EINVAL, "search size %d is out of range 1..100", k);
    if (!query)
        query = "";
    if (strlen(query) > 8192)
        return VG_FAIL(err, VIGIL_ETOOBIG, "a memory query is longer than 8192 bytes");
    struct cands cs = {0};
    json_t *terms = NULL, *items = NULL;
    vigil_code rc = vg_memory_query_terms(query, &terms, err);
    if (!rc && mode != VG_SEARCH_VECTOR)
        rc = keyword(m, agent_id, terms, &cs, err);
    /* The built-in embedder's pieces of "the" are as alike to "The bridge ..." as a word's
     * to itself: it embeds the query's words without the common ones (none left: no vector
     * search). A real model reads the whole question. */
    char *words = builtin_embedder(m) && !rc ? joined(terms) : NULL;
    if (!rc && mode != VG_SEARCH_KEYWORD && *(words ? words : query) &&
        !(builtin_embedder(m) && !words))
        rc = vector(m, agent_id, words ? words : query, &cs, err);
    vg_free(words);
    if (!rc && !(items = json_array()))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory searching memory");
    if (!rc) {
        if (cs.n)
            qsort(cs.v, cs.n, sizeof *cs.v, by_score);
        for (size_t i = 0; i < cs.n && json_array_size(items) < (size_t)k; i++) {
            json_t *o = materialize(m, &cs.v[i]);
            if (o && weak_builtin_hit(m, &cs.v[i], terms, o)) {
                json_decref(o);
                continue;
            }
            if (o && json_array_append_new(items, o)) {
                rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory searching memory");
                break;
            }
        }
    }
    vg_free(cs.v);
    json_decref(terms);
    if (rc) {
        json_decref(items);
        return rc;
    }
    *out = items;
    return VIGIL_OK;
}

/* ---- the background embedding pass ---------------------------------------------------------- */

vigil_code vg_memory_embed_pending(struct vg_memory *m, const char *agent_id, int max, int *done,
                                   vigil_error *err)
{
    if (done)
        *done = 0;
    if (!m->embedder)
        return VG_FAIL(err, VIGIL_ESTATE, "no embedder is configured");
    if (!vg_memory_may_embed(m))
        return VIGIL_OK; /* inside a transaction: the next pass outside one does it */
    if (max <= 0 || max > 10000)
        max = 100;
    json_t *todo = json_array();
    if (!todo)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory embedding memory");
    struct vg_query q = {.kind = "memory_embed_todo", .owner = agent_id, .limit = max};
    /* Record ids only: the todo bodies are empty objects. */
    vigil_code rc = vg_memory_collect_ids(m, &q, todo, err);
    int dim = vg_embed_dimension(m->embedder);
    /* Most passes find nothing to do (one runs after every turn): no vector for them. */
    float *vec = !rc && json_array_size(todo) ? vg_malloc(sizeof *vec * (size_t)dim) : NULL;
    if (!rc && json_array_size(todo) && !vec)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory embedding memory");
    for (size_t i = 0; !rc && i < json_array_size(todo); i++) {
        const char *id = json_string_value(json_array_get(todo, i));
        json_t *block = NULL;
        int64_t rev = 0;
        vigil_error e = {0};
        vigil_code r = vg_env_get_json(m->env, "memory_block", id, &block, &rev, &e);
        if (r == VIGIL_ENOTFOUND) {
            /* The block went away: its todo goes too. */
            r = vg_store_remove(m->env->store, "memory_embed_todo", id, &e);
            continue;
        }
        if (r) {
            rc = r;
            vg_error_copy(err, &e);
            break;
        }
        struct vg_buf text;
        vg_buf_init(&text, VG_MEMORY_CONTENT_MAX + 512);
        vg_buf_printf(&text, "%s\n%s", vg_memory_str(block, "label"),
                      vg_memory_str(block, "content"));
        const char *t = text.data;
        r = vg_embed(m->embedder, &t, 1, vec, &e);
        vg_buf_release(&text);
        if (r) {
            /* Still down: stop the pass, keep the todos for the next one. */
            json_decref(block);
            break;
        }
        if (!(rc = vg_store_begin(m->env->store, err))) {
            int64_t now_rev = 0;
            json_t *cur = NULL;
            rc = vg_env_get_json(m->env, "memory_block", id, &cur, &now_rev, err);
            json_decref(cur);
            if (!rc && now_rev == rev) /* else the content moved: its own write handled it */
                rc = vg_memory_put_vector(m, vg_memory_str(block, "agent_id"), id,
                                          vg_memory_str(block, "label"),
                                          vg_memory_str(block, "tier"), vec, err);
            if (rc == VIGIL_ENOTFOUND)
                rc = VIGIL_OK;
            rc = vg_store_end(m->env->store, rc, err);
        }
        json_decref(block);
        if (!rc && done)
            (*done)++;
    }
    vg_free(vec);
    json_decref(todo);
    return rc;
}
