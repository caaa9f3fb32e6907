/*
 * compact.c: compaction jobs (see compact.h): scheduling, claiming with a lease, summarizing
 * outside any transaction, and the one-transaction commit that makes a summary and moves the
 * pointers. Nothing here is called from a run: the loop calls vg_compact_consider after a run
 * (a few indexed reads and at most one insert) and a worker calls vg_compact_run_one.
 */
#include "base/common.h"

#include "base/hash.h"
#include "base/jscan.h"
#include "memory/compact.h"
#include "memory/memory_int.h"

struct policy {
    int64_t budget, keep, backoff_base, backoff_max, lease;
    int span_max, summary_tokens, fanout, max_attempts, fallback_after;
};

static struct policy resolve_policy(const struct vg_compaction_policy *p)
{
    static const struct vg_compaction_policy zero;
    if (!p)
        p = &zero;
    struct policy r;
    r.budget = p->thread_budget > 0 ? p->thread_budget : 51200;
    r.keep = p->keep_tokens > 0 ? p->keep_tokens : r.budget / 2;
    if (r.keep >= r.budget)
        r.keep = r.budget / 2;
    r.span_max = p->span_max > 0 ? p->span_max : 200;
    r.summary_tokens = p->summary_tokens > 0 ? p->summary_tokens : 400;
    r.fanout = p->level2_fanout > 1 ? p->level2_fanout : 8;
    r.max_attempts = p->max_attempts > 0 ? p->max_attempts : 5;
    r.fallback_after = p->fallback_after > 0 ? p->fallback_after : 2;
    r.backoff_base = p->backoff_base_ms > 0 ? p->backoff_base_ms : 1000;
    r.backoff_max = p->backoff_max_ms > 0 ? p->backoff_max_ms : 300000;
    r.lease = p->lease_ms > 0 ? p->lease_ms : 120000;
    return r;
}

vigil_code vg_summarize(struct vg_summarizer *s, json_t *messages, int depth, int max_tokens,
                        char **out, vigil_error *err)
{
    return s->methods->summarize(s, messages, depth, max_tokens, out, err);
}

void vg_compact_summary_thread(const char *thread_id, char out[VG_RECORD_ID_MAX])
{
    if (strlen(thread_id) + 11 <= 150) {
        snprintf(out, VG_RECORD_ID_MAX, "%s~summaries", thread_id);
    } else {
        char hex[VG_SHA256_HEX_LEN + 1];
        vg_sha256_hex(hex, thread_id, strlen(thread_id));
        snprintf(out, VG_RECORD_ID_MAX, "summaries:%.64s", hex);
    }
}

static void hashed_id(const char *prefix, const char *const *parts, size_t n,
                      char out[VG_RECORD_ID_MAX])
{
    char hex[VG_SHA256_HEX_LEN + 1];
    vg_sha256_hex_parts(hex, parts, n);
    snprintf(out, VG_RECORD_ID_MAX, "%s%s", prefix, hex);
}

static void cursor_id(const char *agent_id, const char *thread_id, char out[VG_RECORD_ID_MAX])
{
    const char *parts[] = {agent_id, thread_id};
    hashed_id("cc_", parts, 2, out);
}

vigil_code vg_compact_cursor(struct vg_env *env, const char *agent_id, const char *thread_id,
                             json_t **out, int64_t *rev, vigil_error *err)
{
    char id[VG_RECORD_ID_MAX];
    cursor_id(agent_id, thread_id, id);
    vigil_code rc = vg_env_get_json(env, "compaction_cursor", id, out, rev, err);
    if (rc != VIGIL_ENOTFOUND)
        return rc;
    *rev = 0;
    *out = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:n}", "id", id, "agent_id", agent_id,
                     "thread_id", thread_id, "covered_seq", (json_int_t)0, "l2_covered_seq",
                     (json_int_t)0, "summaries", (json_int_t)0, "latest_summary_id");
    return *out ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a cursor");
}

static void cursor_id_kept(struct vg_env *env, const char *agent_id, const char *thread_id,
                           char out[VG_RECORD_ID_MAX]);

vigil_code vg_compact_covered(struct vg_env *env, const char *agent_id, const char *thread_id,
                              int64_t *covered, int64_t *l2_covered, vigil_error *err)
{
    char id[VG_RECORD_ID_MAX];
    json_t *cursor = NULL;
    cursor_id_kept(env, agent_id, thread_id, id);
    *covered = *l2_covered = 0;
    vigil_error miss = {0};
    vigil_code rc = vg_error_unless_missing(
        err, &miss, vg_env_get_json_shared(env, "compaction_cursor", id, &cursor, &miss));
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK; /* nothing covered yet: most threads */
    if (rc)
        return rc;
    *covered = json_integer_value(json_object_get(cursor, "covered_seq"));
    *l2_covered = json_integer_value(json_object_get(cursor, "l2_covered_seq"));
    json_decref(cursor);
    return VIGIL_OK;
}

/* ---- scheduling ----------------------------------------------------------------------------- */

static vigil_code open_jobs(struct vg_env *env, const char *agent_id, const char *thread_id,
                            int64_t *n, vigil_error *err)
{
    static const char *const open[] = {"pending", "running"};
    *n = 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(open); i++) {
        int64_t c = 0;
        struct vg_query q = {
            .kind = "compaction_job", .owner = agent_id, .k1 = thread_id, .k2 = open[i]};
        vigil_code rc = vg_store_count(env->store, &q, &c, err);
        if (rc)
            return rc;
        *n += c;
    }
    return VIGIL_OK;
}

struct span_ctx {
    int64_t limit_tokens, tokens, total, seen; /* seen: messages counted into total */
    int max, n, depth_filter; /* depth_filter: only summaries of this depth (0: any) */
    char start_id[VG_RECORD_ID_MAX], end_id[VG_RECORD_ID_MAX];
    int64_t start_seq, end_seq;
    int over; /* the scan passed limit_tokens */
};

/* An integer member's value, as json_integer_value reads it: 0 when it is no integer. */
static int scan_int_member(struct vg_jscan *s, int64_t *v)
{
    if (vg_jscan_peek(s) == '0')
        return vg_jscan_int(s, v);
    *v = 0;
    return vg_jscan_skip(s);
}

/* A message's "tokens" and "metadata"."depth" read with the scanner, without building the
 * message (jansson's tree was a measured share of a chat turn here, after every turn:
 * docs/internals/PERF.md);
 * -1 when the scanner declines, and jansson reads it. */
static int span_fields_scan(const char *body, int64_t *tokens, int64_t *depth)
{
    struct vg_jscan s;
    const char *key;
    size_t len;
    int r, r2 = 0;
    *tokens = *depth = 0;
    vg_jscan_init(&s, body, strlen(body));
    if (vg_jscan_enter(&s, '{') < 0)
        return -1;
    while ((r = vg_jscan_next(&s, &key, &len)) == 1) {
        if (vg_jscan_key_is(key, len, "tokens")) {
            r = scan_int_member(&s, tokens);
        } else if (vg_jscan_key_is(key, len, "metadata") && vg_jscan_peek(&s) == '{') {
            *depth = 0; /* a later "metadata" replaces an earlier one, as in jansson */
            r = vg_jscan_enter(&s, '{');
            while (r >= 0 && (r2 = vg_jscan_next(&s, &key, &len)) == 1)
                r = vg_jscan_key_is(key, len, "depth") ? scan_int_member(&s, depth)
                                                       : vg_jscan_skip(&s);
            if (r >= 0 && r2 < 0)
                r = -1;
        } else {
            if (vg_jscan_key_is(key, len, "metadata"))
                *depth = 0;
            r = vg_jscan_skip(&s);
        }
        if (r < 0)
            return -1;
    }
    return r < 0 || vg_jscan_end(&s) < 0 ? -1 : 0;
}

static int span_fields(const char *body, int64_t *tokens, int64_t *depth)
{
    if (span_fields_scan(body, tokens, depth) == 0)
        return 0;
    json_error_t je;
    json_t *b = json_loads(body, 0, &je);
    if (!b)
        return -1;
    *tokens = json_integer_value(json_object_get(b, "tokens"));
    *depth = json_integer_value(json_object_get(json_object_get(b, "metadata"), "depth"));
    json_decref(b);
    return 0;
}

/* One message more, oldest first, into the span and the total. */
static void span_add(struct span_ctx *s, const struct vg_record *r, int64_t t)
{
    s->total += t;
    s->seen++;
    /* The span: oldest messages while they fit limit_tokens (at least one), at most max. */
    if (s->n < s->max && (s->n == 0 || s->tokens + t <= s->limit_tokens)) {
        if (s->n == 0) {
            snprintf(s->start_id, sizeof s->start_id, "%s", r->id);
            s->start_seq = r->seq;
        }
        snprintf(s->end_id, sizeof s->end_id, "%s", r->id);
        s->end_seq = r->seq;
        s->tokens += t;
        s->n++;
    } else {
        s->over = 1;
    }
}

static int span_cb(void *user, const struct vg_record *r)
{
    struct span_ctx *s = user;
    int64_t t, depth;
    if (span_fields(r->body, &t, &depth))
        return 1;
    if (!s->depth_filter || (int)depth == s->depth_filter)
        span_add(s, r, t);
    return 0;
}

static vigil_code schedule(struct vg_env *env, const char *agent_id, const char *thread_id,
                           int depth, const struct span_ctx *s, char *job_id, vigil_error *err)
{
    char id[VG_RECORD_ID_MAX], start_s[32], end_s[32], depth_s[8], at[32];
    snprintf(start_s, sizeof start_s, "%lld", (long long)s->start_seq);
    snprintf(end_s, sizeof end_s, "%lld", (long long)s->end_seq);
    snprintf(depth_s, sizeof depth_s, "%d", depth);
    const char *parts[] = {agent_id, thread_id, s->start_id, s->end_id, depth_s};
    hashed_id("cj_", parts, VG_ARRAY_LEN(parts), id);
    int64_t now = vg_env_now(env);
    vg_time_format_ms(at, now);
    json_t *job =
        json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:I, s:I, s:i, s:I, s:s, s:i, s:I, "
                  "s:s, s:n, s:n}",
                  "id", id, "agent_id", agent_id, "thread_id", thread_id, "depth", depth,
                  "start_id", s->start_id, "end_id", s->end_id, "start_seq",
                  (json_int_t)s->start_seq, "end_seq", (json_int_t)s->end_seq, "messages", s->n,
                  "span_tokens", (json_int_t)s->tokens, "status", "pending", "attempts", 0,
                  "next_attempt_ms", (json_int_t)now, "created_at", at, "last_error", "summarizer");
    if (!job)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory scheduling compaction");
    vigil_code rc = vg_env_put_json(env, "compaction_job", id, agent_id, thread_id, "pending", now,
                                    job, VG_PUT_IF_ABSENT, err);
    json_decref(job);
    if (!rc && job_id)
        snprintf(job_id, VG_RECORD_ID_MAX, "%s", id);
    return rc;
}

/* ---- the uncovered tally ------------------------------------------------------------------- */

/* Threads whose tally an env keeps: the conversations of `vigil_chat_many` or of the daemon's
 * worker at once (100 agents, each its thread; with 32 each tally was gone by its check), the
 * slots allocated as they are taken. */
#define TALLY_MAX 128

/* The tokens of a thread's messages past its cursor's covered_seq and the oldest span of them,
 * as a scan of them oldest first makes them (at most `limit` messages): kept between runs so
 * that the check after a run reads only the messages added since (by any process), not every
 * uncovered one (5.0 M instructions a turn at 264 uncovered messages: docs/internals/PERF.md,
 * Session 25). */
struct tally {
    char *agent_id, *thread_id;
    int64_t covered, limit, n, last_seq, used;
    char last_id[VG_RECORD_ID_MAX]; /* the newest message counted, "" when n is 0 */
    struct span_ctx s;              /* the span and total as a fresh scan makes them */
};

struct tallies {
    struct tally *slots;
    int n, cap;
    int64_t tick;
    /* The last check's limits: what a thread's tally started by its first message takes. */
    int64_t limit;
    struct span_ctx fresh;
    /* The cursor id last made (a hash of the agent and thread), asked again at every model
     * call of the thread's turn (vg_compact_covered). */
    int cursor_kept;
    char cursor_agent[VG_RECORD_ID_MAX], cursor_thread[VG_RECORD_ID_MAX], cursor[VG_RECORD_ID_MAX];
};

static void tally_clear(struct tally *t)
{
    vg_free(t->agent_id);
    vg_free(t->thread_id);
    memset(t, 0, sizeof *t);
}

static void tallies_free(void *p)
{
    struct tallies *c = p;
    for (int i = 0; c && i < c->n; i++)
        tally_clear(&c->slots[i]);
    if (c)
        vg_free(c->slots);
    vg_free(c);
}

/* The thread's kept tally, or the slot a new one takes (the least recently used): *found says
 * which. */
static struct tally *tally_slot(struct tallies *c, const char *agent_id, const char *thread_id,
                                int *found)
{
    int at = 0;
    for (int i = 0; i < c->n; i++) {
        struct tally *t = &c->slots[i];
        if (!strcmp(t->agent_id, agent_id) && !strcmp(t->thread_id, thread_id)) {
            t->used = ++c->tick;
            *found = 1;
            return t;
        }
        if (t->used < c->slots[at].used)
            at = i;
    }
    *found = 0;
    if (c->n == c->cap && c->cap < TALLY_MAX) {
        int cap = c->cap ? c->cap * 2 : 8;
        struct tally *more = vg_realloc(c->slots, (size_t)cap * sizeof *more);
        if (more) {
            memset(more + c->cap, 0, (size_t)(cap - c->cap) * sizeof *more);
            c->slots = more;
            c->cap = cap;
        }
    }
    return c->n < c->cap ? &c->slots[c->n] : c->n ? &c->slots[at] : NULL;
}

/* A fresh tally (n = 0, covered = -1) for the thread in slot t; NULL when out of memory. */
static struct tally *tally_start(struct tallies *c, struct tally *t, const char *agent_id,
                                 const char *thread_id)
{
    if (!t)
        return NULL; /* no slot could be allocated */
    if (t == &c->slots[c->n])
        c->n++;
    tally_clear(t);
    t->agent_id = vg_strdup(agent_id);
    t->thread_id = vg_strdup(thread_id);
    t->covered = -1;
    t->used = ++c->tick;
    if (!t->agent_id || !t->thread_id) {
        tally_clear(t);
        *t = c->slots[--c->n];
        memset(&c->slots[c->n], 0, sizeof c->slots[0]); /* its strings now belong to slot t */
        return NULL;
    }
    return t;
}

static void tally_count(struct tally *t, const struct vg_record *r, int64_t tokens)
{
    span_add(&t->s, r, tokens);
    t->n++;
    t->last_seq = r->seq;
    snprintf(t->last_id, sizeof t->last_id, "%s", r->id);
}

/* A message this process appended (env->compact_tallies_note). It is counted when it follows
 * the newest counted one, or starts a thread, so that the check after the run reads it only as
 * its anchor: the check's catch-up still finds each counted message in the store (its append
 * may have rolled back) and reads whatever another writer added. Anything else is left to the
 * catch-up's scan. */
static void tally_note(void *p, const struct vg_message_note *m)
{
    struct tallies *c = p;
    int found;
    struct tally *t = tally_slot(c, m->agent_id, m->thread_id, &found);
    if (!m->prev_id[0]) {
        if (!c->limit || !(t = tally_start(c, t, m->agent_id, m->thread_id)))
            return;
        t->covered = 0; /* a new thread has no summaries */
        t->limit = c->limit;
        t->s = c->fresh;
    } else if (!found || !t->n || t->covered < 0 || strcmp(m->prev_id, t->last_id)) {
        return;
    }
    if (t->n < t->limit) {
        struct vg_record r = {.id = m->id, .seq = m->seq};
        tally_count(t, &r, m->tokens);
    }
}

/* The env's tallies, made at first use; NULL when out of memory. */
static struct tallies *tallies_of(struct vg_env *env)
{
    if (!env->compact_tallies && (env->compact_tallies = vg_calloc(1, sizeof(struct tallies)))) {
        env->compact_tallies_free = tallies_free;
        env->compact_tallies_note = tally_note;
    }
    return env->compact_tallies;
}

static void cursor_id_kept(struct vg_env *env, const char *agent_id, const char *thread_id,
                           char out[VG_RECORD_ID_MAX])
{
    struct tallies *c = tallies_of(env);
    if (c && c->cursor_kept && !strcmp(c->cursor_agent, agent_id) &&
        !strcmp(c->cursor_thread, thread_id)) {
        memcpy(out, c->cursor, VG_RECORD_ID_MAX);
        return;
    }
    cursor_id(agent_id, thread_id, out);
    if (c && strlen(agent_id) < VG_RECORD_ID_MAX && strlen(thread_id) < VG_RECORD_ID_MAX) {
        memcpy(c->cursor, out, VG_RECORD_ID_MAX);
        snprintf(c->cursor_agent, VG_RECORD_ID_MAX, "%s", agent_id);
        snprintf(c->cursor_thread, VG_RECORD_ID_MAX, "%s", thread_id);
        c->cursor_kept = 1;
    }
}

/* What the check reads of a thread under policy p: at most *limit messages, the span's. */
static void check_limits(const struct policy *p, int64_t *limit, struct span_ctx *s)
{
    *limit = p->span_max * 4 + 64;
    *s = (struct span_ctx){.limit_tokens = p->budget - p->keep, .max = p->span_max};
}

void vg_compact_keep_tallies(struct vg_env *env, const struct vg_compaction_policy *pp)
{
    struct policy p = resolve_policy(pp);
    struct tallies *c = tallies_of(env);
    if (c)
        check_limits(&p, &c->limit, &c->fresh);
}

/* The thread's tally in the env (a fresh one, n = 0 and covered = -1, when none is kept);
 * NULL when out of memory, and the caller scans as if none were kept. */
static struct tally *tally_of(struct vg_env *env, const char *agent_id, const char *thread_id)
{
    struct tallies *c = tallies_of(env);
    if (!c)
        return NULL;
    int found;
    struct tally *t = tally_slot(c, agent_id, thread_id, &found);
    return found ? t : tally_start(c, t, agent_id, thread_id);
}

struct catch_up {
    struct tally *t;
    int had, anchored, broken; /* had: messages counted before this catch-up */
};

/* Counts a message after the tally's newest. The scan starts at the newest counted (inclusive):
 * it must still be there (a failed round of folded commits can take a message back, and a later
 * one take its sequence), or the tally is broken and a fresh scan decides. A thread's messages
 * take their sequences in order under its head pointer, so the ones after it are the new ones. */
static int catch_up_cb(void *user, const struct vg_record *r)
{
    struct catch_up *c = user;
    struct tally *t = c->t;
    int64_t tokens, depth;
    if (c->had && !c->anchored) {
        c->anchored = r->seq == t->last_seq && !strcmp(r->id, t->last_id);
        c->broken = !c->anchored;
        return c->broken;
    }
    if (t->n >= t->limit)
        return 1; /* a fresh scan reads no further either */
    if (span_fields(r->body, &tokens, &depth)) {
        c->broken = 1;
        return 1;
    }
    tally_count(t, r, tokens);
    return 0;
}

/* Brings the thread's tally up to date; *fresh is set when it cannot be (no memory, or broken)
 * and the caller scans the uncovered messages itself. */
static vigil_code tally_catch_up(struct vg_env *env, const char *agent_id, const char *thread_id,
                                 int64_t covered, const struct span_ctx *fresh, int64_t limit,
                                 struct tally **out, vigil_error *err)
{
    struct tally *t = tally_of(env, agent_id, thread_id);
    *out = NULL;
    if (!t)
        return VIGIL_OK;
    struct tallies *kept = env->compact_tallies;
    kept->limit = limit;
    kept->fresh = *fresh;
    if (t->covered != covered || t->limit != limit || t->s.limit_tokens != fresh->limit_tokens ||
        t->s.max != fresh->max) {
        t->covered = covered; /* a summary covered some (or the policy changed): count again */
        t->limit = limit;
        t->n = 0;
        t->last_id[0] = '\0';
        t->s = *fresh;
    }
    int had = t->n > 0;
    struct catch_up c = {.t = t, .had = had};
    struct vg_query q = {.kind = "message",
                         .owner = agent_id,
                         .k1 = thread_id,
                         .has_seq_min = 1,
                         .seq_min = had ? t->last_seq : covered + 1,
                         .limit = (int)(limit - t->n) + 2};
    vigil_code rc = vg_store_scan(env->store, &q, catch_up_cb, &c, err);
    if (rc || c.broken || (had && !c.anchored)) {
        t->covered = -1;
        return rc;
    }
    *out = t;
    return VIGIL_OK;
}

vigil_code vg_compact_consider(struct vg_env *env, const char *agent_id, const char *thread_id,
                               const struct vg_compaction_policy *pp, char *job_id,
                               vigil_error *err)
{
    struct policy p = resolve_policy(pp);
    int64_t open = 0, covered = 0, l2 = 0;
    char sthread[VG_RECORD_ID_MAX];
    struct tally *t = NULL;
    if (job_id)
        job_id[0] = '\0';
    vigil_code rc = open_jobs(env, agent_id, thread_id, &open, err);
    if (rc || open > 0)
        return rc; /* single-flight: the open job finishes first, spans go in order */
    if ((rc = vg_compact_covered(env, agent_id, thread_id, &covered, &l2, err)))
        return rc;

    /* Depth 1: the uncovered raw messages oldest first, no further than the budget, as the
     * kept tally has them (read whole only when it cannot say). */
    int64_t limit;
    struct span_ctx s;
    check_limits(&p, &limit, &s);
    if ((rc = tally_catch_up(env, agent_id, thread_id, covered, &s, limit, &t, err)))
        return rc;
    if (t) {
        s = t->s;
    } else {
        struct vg_query q = {.kind = "message",
                             .owner = agent_id,
                             .k1 = thread_id,
                             .has_seq_min = 1,
                             .seq_min = covered + 1,
                             .limit = limit};
        if ((rc = vg_store_scan(env->store, &q, span_cb, &s, err)))
            return rc;
    }
    /* A check that read as many messages as it may is past the budget too: the thread's
     * uncovered history goes on beyond them, and a thread of short messages would otherwise
     * never be compacted however long it grew (trial K5). */
    if (s.n > 0 && (s.total > p.budget || s.seen >= limit))
        return schedule(env, agent_id, thread_id, 1, &s, job_id, err);

    /* Depth 2: a full group of depth-1 summaries not yet covered. */
    vg_compact_summary_thread(thread_id, sthread);
    struct span_ctx s2 = {.limit_tokens = INT64_MAX, .max = p.fanout, .depth_filter = 1};
    struct vg_query q2 = {.kind = "message",
                          .owner = agent_id,
                          .k1 = sthread,
                          .has_seq_min = 1,
                          .seq_min = l2 + 1,
                          .limit = p.fanout * 2 + 2};
    if ((rc = vg_store_scan(env->store, &q2, span_cb, &s2, err)))
        return rc;
    if (s2.n >= p.fanout)
        return schedule(env, agent_id, thread_id, 2, &s2, job_id, err);
    return VIGIL_OK;
}

/* ---- claiming ------------------------------------------------------------------------------- */

vigil_code vg_compact_job_get(struct vg_env *env, const char *job_id, json_t **out,
                              vigil_error *err)
{
    vigil_code rc = vg_env_get_json(env, "compaction_job", job_id, out, NULL, err);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no compaction job \"%s\"", job_id);
    return rc;
}

struct first_ctx {
    struct vg_record *rec;
};

static int first_cb(void *user, const struct vg_record *r)
{
    ((struct first_ctx *)user)->rec = vg_record_dup(r);
    return 1;
}

static vigil_code job_write(struct vg_env *env, json_t *job, const char *status, int64_t seq,
                            int64_t rev, vigil_error *err)
{
    if (json_object_set_new(job, "status", json_string(status)) ||
        json_object_set_new(job, "next_attempt_ms", json_integer(seq)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory updating a compaction job");
    return vg_env_update_json(env, "compaction_job", vg_memory_str(job, "id"),
                              vg_memory_str(job, "agent_id"), vg_memory_str(job, "thread_id"),
                              status, seq, job, rev, err);
}

vigil_code vg_compact_claim(struct vg_env *env, const struct vg_compaction_policy *pp,
                            char job_id[VG_RECORD_ID_MAX], json_t **job, vigil_error *err)
{
    struct policy p = resolve_policy(pp);
    int64_t now = vg_env_now(env);
    static const char *const ready[] = {"pending", "running"}; /* running: lease expired */
    job_id[0] = '\0';
    *job = NULL;
    for (size_t i = 0; i < VG_ARRAY_LEN(ready); i++) {
        struct first_ctx f = {NULL};
        struct vg_query q = {
            .kind = "compaction_job", .k2 = ready[i], .has_seq_max = 1, .seq_max = now, .limit = 1};
        vigil_code rc = vg_store_scan(env->store, &q, first_cb, &f, err);
        if (rc)
            return rc;
        if (!f.rec)
            continue;
        json_error_t je;
        json_t *body = json_loads(f.rec->body, 0, &je);
        int64_t rev = f.rec->rev;
        vg_free(f.rec);
        if (!body)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a compaction job");
        json_int_t attempts = json_integer_value(json_object_get(body, "attempts")) + 1;
        vigil_error local = {0};
        if (json_object_set_new(body, "attempts", json_integer(attempts))) {
            json_decref(body);
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory claiming a compaction job");
        }
        rc = job_write(env, body, "running", now + p.lease, rev, &local);
        if (rc == VIGIL_ECONFLICT) { /* another worker claimed it first */
            json_decref(body);
            return VIGIL_OK;
        }
        if (rc) {
            json_decref(body);
            vg_error_copy(err, &local);
            return rc;
        }
        snprintf(job_id, VG_RECORD_ID_MAX, "%s", vg_memory_str(body, "id"));
        *job = body;
        return VIGIL_OK;
    }
    return VIGIL_OK;
}

vigil_code vg_compact_job_retry(struct vg_env *env, const char *job_id, vigil_error *err)
{
    json_t *job = NULL;
    int64_t rev = 0;
    vigil_code rc = vg_env_get_json(env, "compaction_job", job_id, &job, &rev, err);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no compaction job \"%s\"", job_id);
    if (rc)
        return rc;
    if (strcmp(vg_memory_str(job, "status"), "failed_terminal") != 0) {
        rc = VG_FAIL(err, VIGIL_ESTATE, "compaction job \"%s\" is %s, not failed_terminal", job_id,
                     vg_memory_str(job, "status"));
    } else if (json_object_set_new(job, "attempts", json_integer(0))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory retrying a compaction job");
    } else {
        rc = job_write(env, job, "pending", vg_env_now(env), rev, err);
    }
    json_decref(job);
    return rc;
}

/* ---- the span and the commit ---------------------------------------------------------------- */

static vigil_code span_messages(struct vg_env *env, json_t *job, json_t **out, vigil_error *err)
{
    const char *agent = vg_memory_str(job, "agent_id"), *thread = vg_memory_str(job, "thread_id");
    char sthread[VG_RECORD_ID_MAX];
    int depth = (int)json_integer_value(json_object_get(job, "depth"));
    if (depth == 2)
        vg_compact_summary_thread(thread, sthread);
    json_t *items = json_array();
    if (!items)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a span");
    struct vg_query q = {.kind = "message",
                         .owner = agent,
                         .k1 = depth == 2 ? sthread : thread,
                         .has_seq_min = 1,
                         .seq_min = json_integer_value(json_object_get(job, "start_seq")),
                         .has_seq_max = 1,
                         .seq_max = json_integer_value(json_object_get(job, "end_seq"))};
    struct vg_memory mm = {.env = env};
    vigil_code rc = vg_memory_collect(&mm, &q, items, err);
    /* Long contents live in payload records: resolve them for the summarizer. */
    for (size_t i = 0; !rc && i < json_array_size(items); i++) {
        json_t *msg = json_array_get(items, i);
        if (!json_object_get(msg, "payload_id"))
            continue;
        json_t *full = NULL;
        if (!(rc = vg_message_get(env, vg_memory_str(msg, "id"), &full, err)))
            json_array_set_new(items, i, full);
    }
    if (depth == 2) { /* only the depth-1 summaries the job counted */
        for (size_t i = json_array_size(items); i-- > 0;)
            if (json_integer_value(json_object_get(
                    json_object_get(json_array_get(items, i), "metadata"), "depth")) != 1)
                json_array_remove(items, i);
    }
    if (rc) {
        json_decref(items);
        return rc;
    }
    *out = items;
    return VIGIL_OK;
}

vigil_code vg_compact_commit(struct vg_env *env, json_t *job, const char *summary,
                             const char *summarizer, vigil_error *err)
{
    return vg_compact_commit_held(env, NULL, job, summary, summarizer, NULL, err);
}

vigil_code vg_compact_commit_held(struct vg_env *env, const struct vg_compaction_policy *p,
                                  json_t *job, const char *summary, const char *summarizer,
                                  int *held_by_run, vigil_error *err)
{
    const char *agent = vg_memory_str(job, "agent_id"), *thread = vg_memory_str(job, "thread_id");
    const char *job_id = vg_memory_str(job, "id");
    const char *start = vg_memory_str(job, "start_id"), *end = vg_memory_str(job, "end_id");
    int depth = (int)json_integer_value(json_object_get(job, "depth"));
    json_int_t end_seq = json_integer_value(json_object_get(job, "end_seq"));
    char sid[VG_RECORD_ID_MAX], sthread[VG_RECORD_ID_MAX], depth_s[8];
    snprintf(depth_s, sizeof depth_s, "%d", depth);
    const char *parts[] = {agent, thread, start, end, depth_s};
    hashed_id("sm_", parts, VG_ARRAY_LEN(parts), sid);
    vg_compact_summary_thread(thread, sthread);
    json_t *cur_job = NULL, *existing = NULL, *meta = NULL, *cursor = NULL, *state = NULL,
           *changes = NULL, *span = NULL;
    int64_t job_rev = 0, crev = 0, srev = 0;
    vigil_code rc = vg_store_begin(env->store, err);
    if (rc)
        return rc;
    /* The agent's lease first: the summary, the cursor and the agent's state are the agent's,
     * and no write to them lands while a run holds it or after a successor took it over. */
    int held = 0;
    if (p && p->hold && (rc = p->hold(p->hold_user, env, agent, &held, err)))
        goto out;
    if (held) {
        if (held_by_run)
            *held_by_run = 1;
        rc =
            VG_FAIL(err, VIGIL_EBUSY, "agent \"%s\" is held by a run: its compaction waits", agent);
        goto out;
    }
    /* Re-read the job inside the transaction: a replay of a finished job changes nothing. */
    if ((rc = vg_env_get_json(env, "compaction_job", job_id, &cur_job, &job_rev, err)))
        goto out;
    if (strcmp(vg_memory_str(cur_job, "status"), "done") == 0)
        goto out;
    rc = vg_env_get_json(env, "message", sid, &existing, NULL, err);
    if (rc == VIGIL_ENOTFOUND) {
        meta = json_pack("{s:i, s:s, s:s, s:I, s:I, s:s, s:s?, s:I}", "depth", depth, "start_id",
                         start, "end_id", end, "start_seq",
                         json_integer_value(json_object_get(job, "start_seq")), "end_seq", end_seq,
                         "source_thread", thread, "summarizer", summarizer, "messages",
                         json_integer_value(json_object_get(job, "messages")));
        if (!meta) {
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing a summary");
            goto out;
        }
        struct vg_message_in in = {.agent_id = agent,
                                   .thread_id = sthread,
                                   .kind = VG_MSG_SUMMARY,
                                   .content = summary,
                                   .metadata = meta,
                                   .id = sid};
        rc = vg_message_append(env, &in, NULL, err);
        if (rc == VIGIL_EEXISTS)
            rc = VIGIL_OK;
    }
    if (rc)
        goto out;
    if ((rc = vg_link_add(env, agent, "summary_start", sid, start, NULL, err)) ||
        (rc = vg_link_add(env, agent, "summary_end", sid, end, NULL, err)))
        goto out;
    /* Summarized history stays searchable (S4-042): the summary and, for depth 1, the raw
     * messages it covers go into the text index. */
    if ((rc = vg_store_text_index(env->store, "message", sid, agent, summary, err)) &&
        rc != VIGIL_EUNSUPPORTED)
        goto out;
    rc = VIGIL_OK;
    if (depth == 1) {
        if ((rc = span_messages(env, job, &span, err)))
            goto out;
        for (size_t i = 0; !rc && i < json_array_size(span); i++) {
            json_t *msg = json_array_get(span, i);
            rc = vg_store_text_index(env->store, "message", vg_memory_str(msg, "id"), agent,
                                     vg_memory_str(msg, "content"), err);
            if (rc == VIGIL_EUNSUPPORTED)
                rc = VIGIL_OK;
        }
        if (rc)
            goto out;
    }
    /* Pointers move only now, in the transaction that holds the summary (S0-038). */
    if ((rc = vg_compact_cursor(env, agent, thread, &cursor, &crev, err)))
        goto out;
    const char *field = depth == 2 ? "l2_covered_seq" : "covered_seq";
    json_int_t was = json_integer_value(json_object_get(cursor, field));
    if (json_object_set_new(cursor, field, json_integer(end_seq > was ? end_seq : was)) ||
        json_object_set_new(cursor, "latest_summary_id", json_string(sid)) ||
        json_object_set_new(
            cursor, "summaries",
            json_integer(json_integer_value(json_object_get(cursor, "summaries")) + 1))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory moving a cursor");
        goto out;
    }
    if (crev == 0)
        rc = vg_env_put_json(env, "compaction_cursor", vg_memory_str(cursor, "id"), agent, thread,
                             "", vg_env_now(env), cursor, 0, err);
    else /* seq: when the thread was last summarized (the newest first: prior threads' context) */
        rc = vg_env_update_json(env, "compaction_cursor", vg_memory_str(cursor, "id"), agent,
                                thread, "", vg_env_now(env), cursor, crev, err);
    if (rc)
        goto out;
    if ((rc = vg_state_get_for_write(env, agent, &state, &srev, err)))
        goto out;
    if (!(changes = json_pack("{s:s}", "latest_summary_message_id", sid))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory moving a pointer");
        goto out;
    }
    if ((rc = vg_state_update(env, agent, changes, srev, NULL, err)))
        goto out;
    if (json_object_set_new(cur_job, "summary_id", json_string(sid)) ||
        json_object_set_new(cur_job, "summarizer", json_string(summarizer ? summarizer : ""))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory finishing a job");
        goto out;
    }
    rc = job_write(env, cur_job, "done", INT64_MAX / 2, job_rev, err);
out:
    rc = vg_store_end(env->store, rc, err);
    json_decref(cur_job);
    json_decref(existing);
    json_decref(meta);
    json_decref(cursor);
    json_decref(state);
    json_decref(changes);
    json_decref(span);
    return rc;
}

/* The job (owned) and its revision while it is still running; *job NULL when another worker
 * finished or re-queued it meanwhile. */
static vigil_code running_job(struct vg_env *env, const char *job_id, json_t **job, int64_t *rev,
                              vigil_error *err)
{
    vigil_code rc = vg_env_get_json(env, "compaction_job", job_id, job, rev, err);
    if (!rc && strcmp(vg_memory_str(*job, "status"), "running") != 0) {
        json_decref(*job);
        *job = NULL;
    }
    return rc;
}

static vigil_code fail_job(struct vg_env *env, const char *job_id, const struct policy *p,
                           const vigil_error *why, vigil_error *err)
{
    json_t *job = NULL;
    int64_t rev = 0;
    vigil_code rc = running_job(env, job_id, &job, &rev, err);
    if (rc || !job)
        return rc;
    json_int_t attempts = json_integer_value(json_object_get(job, "attempts"));
    int terminal = attempts >= p->max_attempts;
    /* Bounded exponential backoff: base * 2^(attempts-1), at most backoff_max. */
    int64_t delay = p->backoff_base;
    for (json_int_t i = 1; i < attempts && delay < p->backoff_max; i++)
        delay *= 2;
    if (delay > p->backoff_max)
        delay = p->backoff_max;
    json_object_set_new(job, "last_error",
                        json_string(why->message[0] ? why->message : vigil_strerror(why->code)));
    rc = job_write(env, job, terminal ? "failed_terminal" : "pending",
                   terminal ? INT64_MAX / 2 : vg_env_now(env) + delay, rev, err);
    json_decref(job);
    return rc;
}

/* A job whose agent a run holds: pending again in a while (a backoff's first step), the
 * attempt it claimed not counted, since nothing failed. */
static vigil_code defer_job(struct vg_env *env, const char *job_id, const struct policy *p,
                            vigil_error *err)
{
    json_t *job = NULL;
    int64_t rev = 0;
    vigil_code rc = running_job(env, job_id, &job, &rev, err);
    if (rc || !job)
        return rc;
    json_int_t attempts = json_integer_value(json_object_get(job, "attempts"));
    rc = json_object_set_new(job, "attempts", json_integer(attempts > 0 ? attempts - 1 : 0))
             ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory deferring a compaction job")
             : job_write(env, job, "pending", vg_env_now(env) + p->backoff_base, rev, err);
    json_decref(job);
    return rc;
}

vigil_code vg_compact_run_one(struct vg_env *env, struct vg_summarizer *primary,
                              const struct vg_compaction_policy *pp, int *ran, vigil_error *err)
{
    struct policy p = resolve_policy(pp);
    char job_id[VG_RECORD_ID_MAX];
    json_t *job = NULL, *span = NULL;
    char *text = NULL;
    *ran = 0;
    vigil_code rc = vg_compact_claim(env, pp, job_id, &job, err);
    if (rc || !job)
        return rc;
    *ran = 1;
    int depth = (int)json_integer_value(json_object_get(job, "depth"));
    json_int_t attempts = json_integer_value(json_object_get(job, "attempts"));
    vigil_error why = {0};
    if ((rc = span_messages(env, job, &span, err)))
        goto out;
    struct vg_summarizer *fallback = vg_summarizer_extractive();
    struct vg_summarizer *use = primary && attempts <= p.fallback_after ? primary : fallback;
    rc = vg_summarize(use, span, depth, p.summary_tokens, &text, &why);
    if (rc && use == primary && (rc == VIGIL_ERATELIMIT || rc == VIGIL_EBUDGET)) {
        /* A refusal, not a fault: the fallback runs at once (S0-039). */
        use = fallback;
        vigil_error e2 = {0};
        rc = vg_summarize(use, span, depth, p.summary_tokens, &text, &e2);
        if (rc)
            why = e2;
    }
    if (rc) {
        /* Raw history stays the truth; only the job records the failure (S0-174). */
        rc = fail_job(env, job_id, &p, &why, err);
        goto out;
    }
    vigil_error held = {0};
    int by_run = 0;
    rc = vg_compact_commit_held(env, pp, job, text, use->methods->name, &by_run, &held);
    if (rc && by_run)
        rc = defer_job(env, job_id, &p, err);
    else if (rc)
        vg_error_copy(err, &held);
out:
    vg_free(text);
    json_decref(span);
    json_decref(job);
    return rc;
}
