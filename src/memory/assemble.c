/*
 * assemble.c: the context for one model call, within a token budget (default 80% of the
 * model's window). Every part is read through a bounded, indexed query (a point read, or the
 * newest N of a thread), so the cost is the same with 10 or 1,000,000 messages of history.
 *
 * Fill order, by priority: the agent's prompt and core blocks, the current report and the wake
 * delta (always); pinned working blocks; unpinned working blocks, most recently used first, up
 * to 30% of the budget (the least recently used leave first and are named in `evicted`);
 * summaries of older spans; observation notes (newest first); then hot raw messages of the
 * thread, newest first, until the budget is spent; then, thread-first (seed 000, "Thread
 * policy"), the latest summary of each of the agent's most recently summarized other threads
 * (its earlier sessions and wakes), in what the hot messages left. A caller that keeps its own
 * hot messages (the loop) gets those within a tenth of the budget.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "memory/compact.h"
#include "memory/memory_int.h"

static int64_t tok(const char *s)
{
    return vg_token_estimate(s);
}

void vg_context_release(struct vg_context *c)
{
    vg_free(c->system);
    vg_free(c->report);
    vg_free(c->delta);
    json_decref(c->observations);
    json_decref(c->working);
    json_decref(c->evicted);
    json_decref(c->summaries);
    json_decref(c->prior);
    json_decref(c->hot);
    memset(c, 0, sizeof *c);
}

static int by_recency(const void *a, const void *b)
{
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    json_int_t ux = json_integer_value(json_object_get(x, "last_used_ms"));
    json_int_t uy = json_integer_value(json_object_get(y, "last_used_ms"));
    if (ux != uy)
        return ux < uy ? 1 : -1;
    return strcmp(vg_memory_str(x, "label"), vg_memory_str(y, "label"));
}

/* The system texts of the agents whose context was assembled last, each with the store's marks
 * of agent and memory_block records it was built under (VG_STORE_CTRL_CHANGE_MARK): the text is
 * the agent's prompt and core blocks, which rarely change, and with many agents taking turns
 * (vigil_chat_many, the daemon) the one agent's listing kept in listed[] was another agent's at
 * nearly every call, so each call parsed its three core blocks again: a seventh of such a call
 * (docs/internals/PERF.md, session 39). An agent's text takes one of two slots (the older one
 * is replaced); a text longer than SYSTEM_KEPT_MAX is not kept, so the table stays under 1 MB. */
#define SYSTEMS_SLOTS 128
#define SYSTEM_KEPT_MAX 8192

struct vg_memory_systems {
    struct system_kept {
        char agent_id[VG_RECORD_ID_MAX];
        char *text; /* owned; NULL: a free slot */
        struct vg_store_change_mark agent_mark, block_mark;
        uint64_t used;
    } slot[SYSTEMS_SLOTS];
    uint64_t tick;
};

void vg_memory_systems_free(struct vg_memory_systems *k)
{
    if (!k)
        return;
    for (size_t i = 0; i < SYSTEMS_SLOTS; i++)
        vg_free(k->slot[i].text);
    vg_free(k);
}

/* The store's marks of agent and memory_block records now; 0 when it cannot say. */
static int system_marks(struct vg_memory *m, struct vg_store_change_mark *agent,
                        struct vg_store_change_mark *block)
{
    vigil_error ignored = {0};
    agent->kind = "agent";
    block->kind = "memory_block";
    return vg_store_control(m->env->store, VG_STORE_CTRL_CHANGE_MARK, agent, &ignored) ==
               VIGIL_OK &&
           vg_store_control(m->env->store, VG_STORE_CTRL_CHANGE_MARK, block, &ignored) == VIGIL_OK;
}

static int same_mark(const struct vg_store_change_mark *a, const struct vg_store_change_mark *b)
{
    return a->foreign == b->foreign && a->own == b->own;
}

/* agent_id's slot: the one holding its text, or the one its text would take. */
static struct system_kept *system_slot(struct vg_memory_systems *k, const char *agent_id)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)agent_id; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    struct system_kept *a = &k->slot[h % SYSTEMS_SLOTS];
    struct system_kept *b = &k->slot[(h / SYSTEMS_SLOTS) % SYSTEMS_SLOTS];
    if (a->text && !strcmp(a->agent_id, agent_id))
        return a;
    if (b->text && !strcmp(b->agent_id, agent_id))
        return b;
    return !a->text ? a : !b->text ? b : a->used <= b->used ? a : b;
}

/* The kept text of agent_id into c->system when nothing it was built from may have changed. */
static int system_kept(struct vg_memory *m, const char *agent_id, struct vg_context *c)
{
    struct vg_store_change_mark agent, block;
    struct vg_memory_systems *k = m->systems;
    if (!k || strlen(agent_id) >= VG_RECORD_ID_MAX)
        return 0;
    struct system_kept *s = system_slot(k, agent_id);
    if (!s->text || strcmp(s->agent_id, agent_id) || !system_marks(m, &agent, &block) ||
        !same_mark(&agent, &s->agent_mark) || !same_mark(&block, &s->block_mark))
        return 0;
    if (!(c->system = vg_strdup(s->text)))
        return 0;
    s->used = ++k->tick;
    return 1;
}

/* Keep c->system as agent_id's, under the marks taken now: after the reads it was built from,
 * so a change made since them is seen at the next call. Out of memory keeps nothing. */
static void system_keep(struct vg_memory *m, const char *agent_id, const struct vg_context *c)
{
    if (strlen(agent_id) >= VG_RECORD_ID_MAX || strlen(c->system) > SYSTEM_KEPT_MAX)
        return;
    if (!m->systems && !(m->systems = vg_calloc(1, sizeof *m->systems)))
        return;
    struct system_kept *s = system_slot(m->systems, agent_id);
    vg_free(s->text);
    s->text = NULL;
    if (!system_marks(m, &s->agent_mark, &s->block_mark) || !(s->text = vg_strdup(c->system)))
        return;
    snprintf(s->agent_id, sizeof s->agent_id, "%s", agent_id);
    s->used = ++m->systems->tick;
}

static vigil_code system_text(struct vg_memory *m, const char *agent_id, struct vg_context *c,
                              vigil_error *err)
{
    json_t *agent = NULL, *core = NULL;
    struct vg_buf b;
    if (system_kept(m, agent_id, c))
        return VIGIL_OK;
    vg_buf_init(&b, 4u << 20);
    vigil_code rc = vg_agent_get_shared(m->env, agent_id, &agent, err);
    if (!rc)
        rc = vg_memory_list_shared(m, agent_id, "core", &core, err);
    if (!rc) {
        const char *prompt = json_string_value(json_object_get(agent, "prompt"));
        if (prompt && *prompt) {
            vg_buf_puts(&b, prompt);
            vg_buf_putc(&b, '\n');
        }
        /* puts, not printf: a block's content may be long, and vsnprintf copies it slowly */
        for (size_t i = 0; i < json_array_size(core); i++) {
            json_t *blk = json_array_get(core, i);
            vg_buf_puts(&b, b.len ? "\n<memory label=\"" : "<memory label=\"");
            vg_buf_puts(&b, vg_memory_str(blk, "label"));
            vg_buf_puts(&b, "\" permission=\"");
            vg_buf_puts(&b, vg_memory_str(blk, "permission"));
            vg_buf_puts(&b, "\">\n");
            vg_buf_puts(&b, vg_memory_str(blk, "content"));
            vg_buf_puts(&b, "\n</memory>\n");
        }
        rc = vg_buf_finish(&b, err);
    }
    if (!rc && !(c->system = vg_buf_detach(&b, NULL)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory assembling context");
    if (!rc)
        system_keep(m, agent_id, c);
    vg_buf_release(&b);
    json_decref(agent);
    json_decref(core);
    return rc;
}

static vigil_code working(struct vg_memory *m, const char *agent_id, struct vg_context *c,
                          vigil_error *err)
{
    json_t *all = NULL;
    vigil_code rc = vg_memory_list_shared(m, agent_id, "working", &all, err);
    if (rc)
        return rc;
    size_t n = json_array_size(all), k = 0;
    json_t **v = vg_calloc(n ? n : 1, sizeof *v);
    if (!v) {
        json_decref(all);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory assembling context");
    }
    for (size_t i = 0; i < n; i++) {
        json_t *b = json_array_get(all, i);
        if (json_is_true(json_object_get(b, "loaded")))
            v[k++] = b;
    }
    if (k)
        qsort(v, k, sizeof *v, by_recency);
    int64_t share = c->budget * 3 / 10;
    int64_t unpinned = 0;
    /* Pinned blocks first: they stay whatever the pressure (S4-038). */
    for (int pass = 0; !rc && pass < 2; pass++) {
        for (size_t i = 0; !rc && i < k; i++) {
            json_t *b = v[i];
            int pinned = json_is_true(json_object_get(b, "pinned"));
            if (pinned != (pass == 0))
                continue;
            int64_t t = tok(vg_memory_str(b, "content")) + 16;
            int fits = pinned || (unpinned + t <= share && c->used + t <= c->budget);
            json_t *dst = fits ? c->working : c->evicted;
            json_t *item = fits
                               ? json_pack("{s:s, s:s, s:b}", "label", vg_memory_str(b, "label"),
                                           "content", vg_memory_str(b, "content"), "pinned", pinned)
                               : json_string(vg_memory_str(b, "label"));
            if (!item || json_array_append_new(dst, item))
                rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory assembling context");
            if (fits) {
                c->used += t;
                if (!pinned)
                    unpinned += t;
            }
        }
    }
    vg_free(v);
    json_decref(all);
    return rc;
}

/* Keep the newest items of `arr` (oldest first) that fit; the rest are dropped. */
static int64_t fit_newest(json_t *arr, struct vg_context *c, int64_t cap)
{
    int64_t spent = 0, dropped = 0;
    size_t n = json_array_size(arr), keep_from = n;
    while (keep_from > 0) {
        int64_t t = tok(vg_memory_str(json_array_get(arr, keep_from - 1), "content")) + 8;
        if (spent + t > cap || c->used + t > c->budget)
            break;
        spent += t;
        c->used += t;
        keep_from--;
    }
    for (size_t i = 0; i < keep_from; i++) {
        json_array_remove(arr, 0);
        dropped++;
    }
    return dropped;
}

static int cursor_cb(void *user, const struct vg_record *r)
{
    json_t *cursor = json_loads(r->body, 0, NULL);
    const char *sid = json_string_value(json_object_get(cursor, "latest_summary_id"));
    int rc = sid && json_array_append_new(user, json_pack("[s, s]", r->k1, sid)) ? 1 : 0;
    json_decref(cursor);
    return rc;
}

static int cursors_mark(struct vg_env *env, struct vg_store_change_mark *mark)
{
    vigil_error ignored = {0};
    mark->kind = "compaction_cursor";
    return vg_store_control(env->store, VG_STORE_CTRL_CHANGE_MARK, mark, &ignored) == VIGIL_OK;
}

/* The agent's newest `n` compaction cursors as [[thread, latest summary id], ...], newest
 * first (their seq is when their thread was last summarized), borrowed from the env: one
 * indexed range, read again only when a cursor was written since (a model call of a thread
 * that was never summarized read an empty range each time: 7.5 k instructions). */
static vigil_code newest_cursors(struct vg_env *env, const char *agent_id, int n, json_t **out,
                                 vigil_error *err)
{
    struct vg_store_change_mark m;
    int marked = cursors_mark(env, &m);
    if (marked && env->kept_cursors && !strcmp(env->kept_cursors_agent, agent_id) &&
        m.foreign == env->kept_cursors_mark.foreign && m.own == env->kept_cursors_mark.own &&
        env->kept_cursors_limit == n) {
        *out = env->kept_cursors;
        return VIGIL_OK;
    }
    json_t *list = json_array();
    struct vg_query q = {
        .kind = "compaction_cursor", .owner = agent_id, .descending = 1, .limit = n};
    vigil_code rc = list ? vg_store_scan(env->store, &q, cursor_cb, list, err)
                         : VG_FAIL(err, VIGIL_ENOMEM, "out of memory assembling context");
    if (rc) {
        json_decref(list);
        return rc;
    }
    json_decref(env->kept_cursors);
    env->kept_cursors = list;
    env->kept_cursors_agent[0] = '\0';
    if (marked && strlen(agent_id) < sizeof env->kept_cursors_agent) {
        snprintf(env->kept_cursors_agent, sizeof env->kept_cursors_agent, "%s", agent_id);
        env->kept_cursors_mark = m;
        env->kept_cursors_limit = n;
    }
    *out = list;
    return VIGIL_OK;
}

/* The latest summary of each of the agent's other threads most recently summarized (at most
 * max), kept oldest first within cap tokens. A summary the store no longer has is skipped. */
static vigil_code prior_threads(struct vg_memory *m, const struct vg_assemble_opts *o, int max,
                                int64_t cap, struct vg_context *c, vigil_error *err)
{
    json_t *cursors = NULL;
    if (!(c->prior = json_array()))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory assembling context");
    vigil_code rc = newest_cursors(m->env, o->agent_id, max + 1, &cursors, err);
    int taken = 0;
    for (size_t i = 0; !rc && i < json_array_size(cursors) && taken < max; i++) {
        json_t *pair = json_array_get(cursors, i), *s = NULL;
        if (!strcmp(json_string_value(json_array_get(pair, 0)), o->thread_id))
            continue;
        vigil_error miss = {0};
        rc = vg_error_unless_missing(
            err, &miss,
            vg_message_get(m->env, json_string_value(json_array_get(pair, 1)), &s, &miss));
        if (rc == VIGIL_ENOTFOUND) {
            rc = VIGIL_OK;
            continue;
        }
        if (!rc && json_array_insert_new(c->prior, 0, s))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory assembling context");
        taken++;
    }
    if (!rc)
        fit_newest(c->prior, c, cap);
    return rc;
}

struct obs_ctx {
    json_t *items;
    int failed;
    int max; /* notes wanted */
};

/* The agent's notes, newest first: the observation messages a wake's delta is not (its input,
 * which that wake's turns held: seed 003 section 4.3 keeps earlier turns out of context). */
static int obs_cb(void *user, const struct vg_record *r)
{
    struct obs_ctx *o = user;
    json_error_t je;
    json_t *b = json_loads(r->body, 0, &je);
    if (b && json_is_true(json_object_get(json_object_get(b, "metadata"), "wake_delta"))) {
        json_decref(b);
        return 0;
    }
    if (!b || json_array_insert_new(o->items, 0, b)) {
        o->failed = 1;
        return 1;
    }
    return json_array_size(o->items) >= (size_t)o->max;
}

vigil_code vg_memory_assemble(struct vg_memory *m, const struct vg_assemble_opts *o,
                              struct vg_context *c, vigil_error *err)
{
    memset(c, 0, sizeof *c);
    if (!o || !o->agent_id || !o->thread_id)
        return VG_FAIL(err, VIGIL_EINVAL, "context assembly needs an agent and a thread");
    int64_t window = o->window > 0 ? o->window : 128000;
    double ratio = o->budget_ratio > 0 && o->budget_ratio <= 1 ? o->budget_ratio : 0.8;
    int hot_max = o->hot_max > 0 ? o->hot_max : 40;
    int summary_max = o->summary_max > 0 ? o->summary_max : 8;
    int obs_max = o->observation_max > 0 ? o->observation_max : 50;
    int prior_max = o->prior_max > 0 ? o->prior_max : 4;
    c->budget = (int64_t)((double)window * ratio);
    json_t *report = NULL;
    char sthread[VG_RECORD_ID_MAX];
    vigil_code rc = VIGIL_OK;
    if (!(c->observations = json_array()) || !(c->working = json_array()) ||
        !(c->evicted = json_array()) || !(c->summaries = json_array())) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory assembling context");
        goto out;
    }
    if ((rc = system_text(m, o->agent_id, c, err)))
        goto out;
    c->used += tok(c->system);
    rc = vg_report_current(m->env, o->agent_id, "current", &report, err);
    if (rc == VIGIL_ENOTFOUND) {
        rc = VIGIL_OK;
    } else if (!rc) {
        if (!(c->report = vg_strdup(vg_memory_str(report, "markdown"))))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory assembling context");
        else
            c->used += tok(c->report);
    }
    if (!rc && o->delta) {
        if (!(c->delta = vg_strdup(o->delta)))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory assembling context");
        else
            c->used += tok(c->delta);
    }
    if (!rc)
        rc = working(m, o->agent_id, c, err);
    if (rc)
        goto out;

    /* Summaries of older spans: the newest of the summary thread, skipping depth-1 summaries a
     * depth-2 summary already covers. */
    int64_t covered = 0, l2_covered = 0;
    if ((rc = vg_compact_covered(m->env, o->agent_id, o->thread_id, &covered, &l2_covered, err)))
        goto out;
    vg_compact_summary_thread(o->thread_id, sthread);
    json_t *sums = NULL;
    if ((rc = vg_message_latest(m->env, o->agent_id, sthread, summary_max * 2, &sums, err)))
        goto out;
    for (size_t i = 0; i < json_array_size(sums); i++) {
        json_t *s = json_array_get(sums, i);
        json_t *meta = json_object_get(s, "metadata");
        json_int_t depth = json_integer_value(json_object_get(meta, "depth"));
        json_int_t seq = json_integer_value(json_object_get(s, "seq"));
        if (depth == 1 && seq <= l2_covered)
            continue;
        json_array_append(c->summaries, s);
    }
    json_decref(sums);
    while (json_array_size(c->summaries) > (size_t)summary_max)
        json_array_remove(c->summaries, 0);
    fit_newest(c->summaries, c, c->budget / 5);

    /* The observation journal: newest notes of the agent, any thread. */
    /* A wake adds one delta beside its notes: read past a few of them, never the history. */
    struct obs_ctx oc = {c->observations, 0, obs_max};
    struct vg_query q = {.kind = "message",
                         .owner = o->agent_id,
                         .k2 = "observation",
                         .descending = 1,
                         .limit = obs_max * 4};
    if ((rc = vg_store_scan(m->env->store, &q, obs_cb, &oc, err)))
        goto out;
    if (oc.failed) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory assembling context");
        goto out;
    }
    fit_newest(c->observations, c, c->budget / 5);

    /* Hot messages: the thread's newest raw messages not yet covered by a summary. A caller
     * with its own window of them (the loop's) asks for none: reading and parsing one it then
     * dropped was a measured share of a chat step (docs/internals/PERF.md). */
    if (o->hot_max < 0) {
        if (!(c->hot = json_array()))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory assembling context");
        else
            rc = prior_threads(m, o, prior_max, c->budget / 10, c, err);
        goto out;
    }
    if ((rc = vg_message_latest(m->env, o->agent_id, o->thread_id, hot_max, &c->hot, err)))
        goto out;
    while (json_array_size(c->hot) > 0 &&
           json_integer_value(json_object_get(json_array_get(c->hot, 0), "seq")) <= covered)
        json_array_remove(c->hot, 0);
    c->dropped_hot = fit_newest(c->hot, c, c->budget);
    rc = prior_threads(m, o, prior_max, c->budget, c, err);
out:
    json_decref(report);
    if (rc)
        vg_context_release(c);
    return rc;
}
