/*
 * queue.c: the durable wake queue and run log (wake_run records), run keys and thread ids,
 * per-agent coalescing, the per-agent lease with its fencing epoch, claiming, finishing with the
 * failure policy (exponential backoff, dormancy after N failures) and crash recovery.
 *
 * Every state change is one transaction. The wake counter increment, the run-key derivation and
 * the wake_run insert commit together (docs/internals/WAKE.md), so the counter never advances
 * without a log entry and two batches never share a counter value.
 *
 * Sections: setup; helpers; run keys; enqueue; lease; claim; finish; recovery.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "base/hash.h"
#include "base/json.h"
#include "os/proc.h"
#include "wake/wake_int.h"

/* ---- setup ----------------------------------------------------------------------------------- */

void vg_wake_config_defaults(struct vg_wake_config *c)
{
    c->debounce_local_ms = 100;
    c->debounce_sync_ms = 1000;
    c->lease_ms = 300000;
    c->backoff_base_ms = 30000;
    c->backoff_max_ms = 3600000;
    c->max_failures = 5;
    c->suppress_ttl_ms = 5000;
    c->heartbeat_ms = 0;
}

int64_t vg_wake_heartbeat_ms(int64_t lease_ms)
{
    return lease_ms >= 30 ? lease_ms / 30 : 1;
}

vigil_code vg_wake_init(struct vg_wake *w, struct vg_env *env, const struct vg_wake_config *cfg,
                        vigil_error *err)
{
    memset(w, 0, sizeof *w);
    w->env = env;
    if (cfg)
        w->cfg = *cfg;
    else
        vg_wake_config_defaults(&w->cfg);
    if (w->cfg.max_failures < 1)
        w->cfg.max_failures = 1;
    w->lookup = vg_entity_lookup_store;
    if (!(w->suppress = vg_suppress_new()))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory setting up wakes");
    vg_ids_new(env->ids, w->instance);
    snprintf(w->holder, sizeof w->holder, "proc:%s", w->instance);
    return VIGIL_OK;
}

/* ---- helpers --------------------------------------------------------------------------------- */

vigil_code vg_wake_tx_begin(struct vg_env *env, int *tagged, const char **saved, vigil_error *err)
{
    *tagged = !vg_store_in_tx(env->store);
    *saved = env->notify.source;
    vigil_code rc = vg_store_begin(env->store, err);
    if (!rc && *tagged)
        env->notify.source = VG_WAKE_SOURCE_SELF;
    return rc;
}

vigil_code vg_wake_tx_end(struct vg_env *env, vigil_code rc, int tagged, const char *saved,
                          vigil_error *err)
{
    rc = vg_store_end(env->store, rc, err);
    if (tagged)
        env->notify.source = saved;
    return rc;
}

json_t *vg_wake_json_strings(const char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_string(v[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static vigil_code oom(vigil_error *err)
{
    return VG_FAIL(err, VIGIL_ENOMEM, "out of memory in the wake queue");
}

static vigil_code put_json(struct vg_env *env, const char *kind, const char *id, const char *owner,
                           const char *k1, const char *k2, int64_t seq, json_t *body, int *inserted,
                           vigil_error *err)
{
    char *text = vg_json_dump(body, 1); /* json_dumps sorted, several times faster */
    if (!text)
        return oom(err);
    struct vg_record r = {.kind = kind,
                          .id = id,
                          .owner = owner,
                          .k1 = k1,
                          .k2 = k2,
                          .seq = seq,
                          .at = vg_env_now(env),
                          .body = text};
    vigil_code rc = vg_store_put(env->store, &r, VG_PUT_IF_ABSENT, inserted, err);
    vg_free(text);
    return rc;
}

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static int64_t jint(json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

/* Write a wake_run body back with its status as k1 and reason as k2. */
static vigil_code run_save(struct vg_env *env, json_t *run, int64_t rev, vigil_error *err)
{
    return vg_env_update_json(env, "wake_run", jstr(run, "run_key"), jstr(run, "agent_id"),
                              jstr(run, "status"), jstr(run, "reason"), jint(run, "created_ms"),
                              run, rev, err);
}

static vigil_code set_str(json_t *o, const char *k, const char *v, vigil_error *err)
{
    if (json_object_set_new(o, k, v ? json_string(v) : json_null()))
        return oom(err);
    return VIGIL_OK;
}

static vigil_code set_time(json_t *o, const char *k, int64_t ms, vigil_error *err)
{
    char at[32];
    vg_time_format_ms(at, ms);
    return set_str(o, k, at, err);
}

/* A queued wake of an agent that stays busy keeps absorbing triggers; these caps keep its
 * record small. Past them the run is told (tokens_overflow) to look at everything again. */
#define MERGE_TOKENS_MAX 512
#define MERGE_LIST_MAX 32

/* Union src tokens (array) into dst (array), keeping dst's order and appending new ones.
 * A jansson object serves as the set of tokens seen, so a merge costs O(n + m). */
static vigil_code merge_tokens(json_t *run, json_t *dst, json_t *src, vigil_error *err)
{
    size_t i;
    json_t *t, *seen = json_object();
    vigil_code rc = VIGIL_OK;
    if (!seen)
        return oom(err);
    json_array_foreach (dst, i, t)
        if (json_is_string(t) && json_object_set(seen, json_string_value(t), json_true())) {
            rc = oom(err);
            goto out;
        }
    json_array_foreach (src, i, t) {
        const char *s = json_string_value(t);
        if (!s || json_object_get(seen, s))
            continue;
        if (json_array_size(dst) >= MERGE_TOKENS_MAX) {
            if (json_object_set_new(run, "tokens_overflow", json_true()))
                rc = oom(err);
            break;
        }
        if (json_array_append(dst, t) || json_object_set(seen, s, json_true())) {
            rc = oom(err);
            break;
        }
    }
out:
    json_decref(seen);
    return rc;
}

int vg_wake_reason_is_turn(const char *reason)
{
    static const char *const turns[] = {"user", "spawn", "children", "task", "rerun", "resume"};
    for (size_t i = 0; reason && i < VG_ARRAY_LEN(turns); i++)
        if (!strcmp(reason, turns[i]))
            return 1;
    return 0;
}

/* Wakes the orchestrator queues (a spawned child's run, a parent's results, a task's run, and
 * their recovery) have nothing that would queue them again: skipped, the child stays running
 * and its parent waits for ever, the task holds its slot (trial M1). While their agent is
 * paused or under a kill switch they wait in the queue, as a sleeping agent's wakes do, and run
 * once it takes wakes again. A destroyed agent's are skipped. */
static int waits_for_agent(const char *reason, const char *original, const char *why)
{
    if (!why || (strcmp(why, VG_WAKE_SKIP_KILLED) && strcmp(why, VG_WAKE_SKIP_DORMANT)))
        return 0;
    const char *r =
        reason && !strcmp(reason, "recovery") && original && *original ? original : reason;
    return r && (!strcmp(r, "spawn") || !strcmp(r, "children") || !strcmp(r, "task"));
}

const char *vg_wake_reason_name(enum vg_wake_reason r)
{
    static const char *const names[] = {"subscription", "timer", "user", "manual", "recovery"};
    return (unsigned)r < VG_ARRAY_LEN(names) ? names[r] : "manual";
}

/* ---- run keys -------------------------------------------------------------------------------- */

void vg_run_key_subscription(char out[65], const char *agent, const char *sub,
                             const char *batch_identity, int64_t wake_counter)
{
    char counter[24];
    snprintf(counter, sizeof counter, "%lld", (long long)wake_counter);
    const char *parts[] = {agent, sub, batch_identity, counter};
    vg_sha256_hex_parts(out, parts, 4);
}

void vg_run_key_timer(char out[65], const char *agent, const char *timer, int64_t scheduled_ms)
{
    char at[32];
    vg_time_format_ms(at, scheduled_ms);
    const char *parts[] = {agent, timer, at};
    vg_sha256_hex_parts(out, parts, 3);
}

void vg_run_key_user(char out[65], const char *agent, const char *session, const char *turn)
{
    const char *parts[] = {agent, session, turn};
    vg_sha256_hex_parts(out, parts, 3);
}

/* ---- enqueue --------------------------------------------------------------------------------- */

struct find_ctx {
    char key[65];
    int found;
};

static int find_queued_cb(void *user, const struct vg_record *r)
{
    struct find_ctx *f = user;
    if (vg_wake_reason_is_turn(r->k2))
        return 0; /* a turn carries its own input: never merged */
    if (!strcmp(r->k2, "recovery")) {
        /* Nor is one re-queued by recovery (its reason now reads "recovery"). */
        json_t *b = json_loads(r->body, 0, NULL);
        int was_user = b && vg_wake_reason_is_turn(jstr(b, "original_reason"));
        json_decref(b);
        if (was_user)
            return 0;
    }
    snprintf(f->key, sizeof f->key, "%s", r->id);
    f->found = 1;
    return 1;
}

/* The agent's oldest queued autonomous wake, if any, to merge into. Inside a transaction it is
 * locked first and read again: on a store other processes write (PostgreSQL), a daemon may be
 * claiming it (locked: passed over) or may have started it since the scan (no longer queued);
 * either way the trigger gets a wake of its own instead of a merge that would fail its
 * compare-and-swap or land in a run already under way. */
static vigil_code find_queued(struct vg_env *env, const char *agent, struct find_ctx *f,
                              vigil_error *err)
{
    struct vg_query q = {.kind = "wake_run", .owner = agent, .k1 = "queued"};
    json_t *run = NULL;
    int busy = 0;
    memset(f, 0, sizeof *f);
    vigil_code rc = vg_store_scan(env->store, &q, find_queued_cb, f, err);
    if (rc || !f->found || !vg_store_in_tx(env->store))
        return rc;
    if ((rc = vg_store_lock(env->store, "wake_run", f->key, 1, &busy, err)) || busy) {
        f->found = 0;
        return rc;
    }
    vigil_error miss = {0};
    rc = vg_error_unless_missing(err, &miss,
                                 vg_env_get_json(env, "wake_run", f->key, &run, NULL, &miss));
    if (rc == VIGIL_ENOTFOUND || (!rc && strcmp(jstr(run, "status"), "queued")))
        f->found = 0;
    json_decref(run);
    return rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc;
}

/* Merge a trigger into a queued wake: tokens united, the trigger listed, metadata kept. */
static vigil_code merge_into(struct vg_env *env, const char *key, const char *reason,
                             const char *reason_id, json_t *tokens, json_t *meta,
                             int64_t not_before, vigil_error *err)
{
    json_t *run = NULL, *m = NULL;
    int64_t rev = 0;
    vigil_code rc = vg_env_get_json(env, "wake_run", key, &run, &rev, err);
    if (rc)
        return rc;
    json_t *have = json_object_get(run, "tokens"), *merged = json_object_get(run, "merged");
    if ((rc = merge_tokens(run, have, tokens, err)))
        goto out;
    m = json_pack("{s:s, s:s?, s:I}", "reason", reason, "reason_id", reason_id, "at_ms",
                  (json_int_t)vg_env_now(env));
    if (!m || (meta && json_object_update(m, meta)) ||
        (json_array_size(merged) < MERGE_LIST_MAX && json_array_append(merged, m)) ||
        json_object_set_new(
            run, "merged_total",
            json_integer(json_integer_value(json_object_get(run, "merged_total")) + 1))) {
        rc = oom(err);
        goto out;
    }
    if (meta) {
        json_t *mine = json_object_get(run, "meta");
        const char *k;
        json_t *v;
        json_object_foreach (meta, k, v)
            if (!json_object_get(mine, k) && json_object_set(mine, k, v)) {
                rc = oom(err);
                goto out;
            }
    }
    if (not_before > jint(run, "not_before_ms") &&
        json_object_set_new(run, "not_before_ms", json_integer(not_before))) {
        rc = oom(err);
        goto out;
    }
    rc = run_save(env, run, rev, err);
out:
    json_decref(m);
    json_decref(run);
    return rc;
}

static json_t *new_run(struct vg_env *env, const char *key, const char *agent, const char *reason,
                       const char *reason_id, const char *thread, const char *session,
                       json_t *tokens, json_t *seed, json_t *meta, const char *status)
{
    char at[32];
    int64_t now = vg_env_now(env);
    vg_time_format_ms(at, now);
    return json_pack("{s:s, s:s, s:s, s:s?, s:s, s:s?, s:s, s:O, s:O?, s:O, s:[], s:s, s:I, "
                     "s:n, s:n, s:n, s:n, s:i, s:i, s:I, s:n}",
                     "run_key", key, "agent_id", agent, "reason", reason, "reason_id", reason_id,
                     "thread_id", thread, "session_id", session, "status", status, "tokens", tokens,
                     "seed_input", seed, "meta", meta, "merged", "created_at", at, "created_ms",
                     (json_int_t)now, "started_at", "completed_at", "error", "skip_reason",
                     "attempts", 0, "epoch", 0, "not_before_ms", (json_int_t)0,
                     "logical_change_key");
}

/* A new wake's fields (its record's text is written from them, vg_json_put_fields, without a
 * jansson tree: the same canonical text vg_json_dump wrote of the tree before). */
struct new_wake {
    const char *key, *agent, *reason, *reason_id, *thread, *session, *status, *skip_reason;
    const char *change_key;       /* the logical change that woke it: a batch's identity, or NULL */
    json_t *tokens, *seed, *meta; /* seed may be NULL: null; meta NULL: {} */
    int timer;                    /* a timer's wake: scheduled_ms written as scheduled_at */
    int64_t scheduled_ms;
    int64_t now; /* its created_at: the reading a manual wake's run key was made of; 0: read */
    int64_t not_before_ms; /* 0: claimable at once */
};

static char *dump_or(json_t *v, const char *none)
{
    return v ? vg_json_dump(v, 1) : vg_strdup(none);
}

/* Insert the wake's record unless its run key is taken (*inserted 0: the same run already). */
static vigil_code insert_run(struct vg_env *env, const struct new_wake *nw, int *inserted,
                             vigil_error *err)
{
    char at[32], sched[32];
    int64_t now = nw->now ? nw->now : vg_env_now(env);
    char *tokens = dump_or(nw->tokens, "[]"), *seed = dump_or(nw->seed, "null"),
         *meta = dump_or(nw->meta, "{}");
    struct vg_buf b;
    vg_time_format_ms(at, now);
    vg_time_format_ms(sched, nw->scheduled_ms);
    const struct vg_jfield f[] = {{"run_key", VG_JF_STR, nw->key, 0},
                                  {"agent_id", VG_JF_STR, nw->agent, 0},
                                  {"reason", VG_JF_STR, nw->reason, 0},
                                  {"reason_id", VG_JF_STR, nw->reason_id, 0},
                                  {"thread_id", VG_JF_STR, nw->thread, 0},
                                  {"session_id", VG_JF_STR, nw->session, 0},
                                  {"status", VG_JF_STR, nw->status, 0},
                                  {"tokens", VG_JF_RAW, tokens, 0},
                                  {"seed_input", VG_JF_RAW, seed, 0},
                                  {"meta", VG_JF_RAW, meta, 0},
                                  {"merged", VG_JF_RAW, "[]", 0},
                                  {"created_at", VG_JF_STR, at, 0},
                                  {"created_ms", VG_JF_INT, NULL, now},
                                  {"started_at", VG_JF_STR, NULL, 0},
                                  {"completed_at", VG_JF_STR, NULL, 0},
                                  {"error", VG_JF_STR, NULL, 0},
                                  {"skip_reason", VG_JF_STR, nw->skip_reason, 0},
                                  {"attempts", VG_JF_INT, NULL, 0},
                                  {"epoch", VG_JF_INT, NULL, 0},
                                  {"not_before_ms", VG_JF_INT, NULL, nw->not_before_ms},
                                  {"logical_change_key", VG_JF_STR, nw->change_key, 0},
                                  {"scheduled_at", VG_JF_STR, sched, 0}};
    vg_buf_init(&b, 0); /* no cap: vg_json_dump had none */
    vigil_code rc = VIGIL_OK;
    if (!tokens || !seed || !meta || vg_json_put_fields(&b, f, VG_ARRAY_LEN(f) - !nw->timer) ||
        b.fail)
        rc = oom(err); /* a string not UTF-8 here: jansson refused it as oom before */
    struct vg_record r = {.kind = "wake_run",
                          .id = nw->key,
                          .owner = nw->agent,
                          .k1 = nw->status,
                          .k2 = nw->reason,
                          .seq = now,
                          .at = now,
                          .body = b.data};
    if (!rc)
        rc = vg_store_put(env->store, &r, VG_PUT_IF_ABSENT, inserted, err);
    vg_buf_release(&b);
    vg_free(tokens);
    vg_free(seed);
    vg_free(meta);
    return rc;
}

/* Why an agent cannot take wakes now, or NULL. */
static vigil_code refusal(struct vg_wake *w, const char *agent, const char *kind, const char **why,
                          vigil_error *err)
{
    vigil_lifecycle lc;
    int of_kind = 1;
    vigil_code rc = vg_agent_lifecycle_kind(w->env, agent, kind, &lc, &of_kind, err);
    *why = NULL;
    if (rc)
        return rc;
    if (lc == VIGIL_LIFECYCLE_DESTROYED)
        *why = "agent is destroyed";
    else if (lc == VIGIL_LIFECYCLE_DORMANT)
        *why = VG_WAKE_SKIP_DORMANT;
    else if (!of_kind)
        *why = "agent is not of the kind asked for";
    if (!*why && w->kill) {
        int on = 0;
        if ((rc = w->kill(w->kill_user, w->env, agent, &on, err)))
            return rc;
        if (on)
            *why = VG_WAKE_SKIP_KILLED;
    }
    return VIGIL_OK;
}

/* An interactive agent runs in the sessions a person starts (seed 000's interaction modes):
 * its subscriptions and timers, which would run it on their own, do not wake it; an
 * autonomous or hybrid agent takes them. Read only for those two reasons. */
static vigil_code mode_refusal(struct vg_wake *w, const struct vg_wake_req *req, const char **why,
                               vigil_error *err)
{
    char mode[16];
    if (req->reason != VG_REASON_SUBSCRIPTION && req->reason != VG_REASON_TIMER)
        return VIGIL_OK;
    vigil_code rc = vg_agent_mode(w->env, req->agent_id, mode, err);
    if (!rc && !strcmp(mode, "interactive"))
        *why = VG_WAKE_SKIP_INTERACTIVE;
    return rc;
}

/* A notification or timer firing for an agent that takes no wakes (dormant, destroyed, kill
 * switch) is logged as skipped, so an operator can see what it missed (trial G10). All such
 * triggers between two wakes of the agent share one record, merged like a queued wake's
 * (tokens and the merged list capped): a paused agent under a busy subscription does not grow
 * the log without bound. The key is the agent's wake counter, which only a new wake moves. */
static vigil_code log_dropped(struct vg_env *env, const struct vg_wake_req *req, const char *reason,
                              json_t *tokens, const char *why, vigil_error *err)
{
    int64_t counter, rev;
    int inserted = 0;
    char key[65], thread[160], n[24];
    vigil_code rc = vg_wake_counter_read(env, req->agent_id, &counter, &rev, err);
    if (rc)
        return rc;
    snprintf(n, sizeof n, "%lld", (long long)counter);
    const char *parts[] = {req->agent_id, "skipped-triggers", n};
    vg_sha256_hex_parts(key, parts, 3);
    snprintf(thread, sizeof thread, "%s:run:%s", req->agent_id, key);
    struct new_wake nw = {.key = key,
                          .agent = req->agent_id,
                          .reason = reason,
                          .reason_id = req->reason_id,
                          .thread = thread,
                          .status = "skipped",
                          .skip_reason = why,
                          .change_key = req->batch_identity,
                          .tokens = tokens,
                          .meta = req->meta,
                          .timer = req->reason == VG_REASON_TIMER,
                          .scheduled_ms = req->scheduled_ms};
    if ((rc = insert_run(env, &nw, &inserted, err)) || inserted)
        return rc;
    if (vg_store_in_tx(env->store) &&
        (rc = vg_store_lock_for_write(env->store, "wake_run", key, err)))
        return rc;
    return merge_into(env, key, reason, req->reason_id, tokens, req->meta, 0, err);
}

/* The run key of a wake asked for: the caller's own (a task's run), or derived from its reason
 * (docs/internals/WAKE.md). */
static void run_key_of(int64_t now, const struct vg_wake_req *req, int64_t counter, char key[65])
{
    char manual_turn[48];
    if (req->run_key) {
        snprintf(key, 65, "%s", req->run_key);
        return;
    }
    switch (req->reason) {
    case VG_REASON_SUBSCRIPTION:
        vg_run_key_subscription(key, req->agent_id, req->reason_id, req->batch_identity, counter);
        break;
    case VG_REASON_TIMER:
        vg_run_key_timer(key, req->agent_id, req->reason_id, req->scheduled_ms);
        break;
    case VG_REASON_USER:
        vg_run_key_user(key, req->agent_id, req->session_id, req->turn_id);
        break;
    default: { /* manual: one clock reading gives the key's time and created_at */
        snprintf(manual_turn, sizeof manual_turn, "manual:%lld:%lld", (long long)now,
                 (long long)counter);
        const char *parts[] = {req->agent_id, manual_turn};
        vg_sha256_hex_parts(key, parts, 2);
        break;
    }
    }
}

vigil_code vg_wake_enqueue(struct vg_wake *w, const struct vg_wake_req *req, char out_key[65],
                           enum vg_enqueue_result *res, vigil_error *err)
{
    struct vg_env *env = w->env;
    vigil_code rc;
    int tagged, inserted = 0;
    const char *saved, *why = NULL;
    json_t *tokens = NULL;
    char key[65], thread[160];
    int64_t rev = 0, counter;
    enum vg_enqueue_result result = VG_ENQ_NEW;
    const char *reason =
        req->reason == VG_REASON_USER && req->label ? req->label : vg_wake_reason_name(req->reason);

    if (req->label && !vg_wake_reason_is_turn(req->label))
        return VG_FAIL(err, VIGIL_EINVAL, "\"%s\" is no turn's reason", req->label);
    if (!req->agent_id || !vg_id_valid(req->agent_id))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid agent id \"%s\"",
                       req->agent_id ? req->agent_id : "");
    if (req->reason == VG_REASON_SUBSCRIPTION && (!req->reason_id || !req->batch_identity))
        return VG_FAIL(err, VIGIL_EINVAL, "a subscription wake needs a subscription and batch");
    if (req->reason == VG_REASON_TIMER && !req->reason_id)
        return VG_FAIL(err, VIGIL_EINVAL, "a timer wake needs a timer id");
    if (req->reason == VG_REASON_USER &&
        (!req->session_id || !*req->session_id || !req->turn_id || !*req->turn_id))
        return VG_FAIL(err, VIGIL_EINVAL, "a user wake needs a session and a turn id");
    if ((req->session_id && strlen(req->session_id) > 100) ||
        (req->turn_id && strlen(req->turn_id) > 100) ||
        (req->reason_id && strlen(req->reason_id) > 200))
        return VG_FAIL(err, VIGIL_EINVAL, "session and turn ids have at most 100 bytes");
    if (req->reason == VG_REASON_RECOVERY)
        return VG_FAIL(err, VIGIL_EINVAL, "recovery wakes are made by recovery only");
    if (req->run_key && (strlen(req->run_key) != 64 || req->reason != VG_REASON_USER))
        return VG_FAIL(err, VIGIL_EINVAL, "a run key of its own is 64 hex digits, for a turn");
    if (!(tokens = vg_wake_json_strings(req->tokens, req->n_tokens)))
        return oom(err);
    if ((rc = vg_wake_tx_begin(env, &tagged, &saved, err)))
        goto out;
    rc = refusal(w, req->agent_id, req->kind, &why, err);
    if (!rc && !why)
        rc = mode_refusal(w, req, &why, err);
    if (rc == VIGIL_ENOTFOUND && req->refuse_quietly) {
        rc = VIGIL_OK;
        why = "agent does not exist";
    }
    if (rc)
        goto end;
    if (why && req->refuse_quietly) {
        result = VG_ENQ_SKIPPED; /* no record: the caller tries another agent */
        goto end;
    }
    if (waits_for_agent(reason, NULL, why))
        why = NULL; /* queued: it runs once the agent takes wakes again */
    if (!why && req->reason != VG_REASON_USER) {
        struct find_ctx f;
        if ((rc = find_queued(env, req->agent_id, &f, err)))
            goto end;
        if (f.found) {
            rc = merge_into(env, f.key, reason, req->reason_id, tokens, req->meta, 0, err);
            memcpy(key, f.key, sizeof key);
            result = VG_ENQ_MERGED;
            goto end;
        }
    }
    if (why && (req->reason == VG_REASON_SUBSCRIPTION || req->reason == VG_REASON_TIMER)) {
        rc = log_dropped(env, req, reason, tokens, why, err); /* its timers still advance */
        result = VG_ENQ_SKIPPED;
        goto end;
    }
    /* The counter's own small record: the agent's state snapshot is not rewritten per wake. */
    if ((rc = vg_wake_counter_read(env, req->agent_id, &counter, &rev, err)))
        goto end;
    counter++;
    int64_t now = vg_env_now(env); /* the manual run key's time and the wake's created_at */
    run_key_of(now, req, counter, key);
    if (req->reason == VG_REASON_USER)
        snprintf(thread, sizeof thread, "%s:session:%s", req->agent_id, req->session_id);
    else
        snprintf(thread, sizeof thread, "%s:run:%s", req->agent_id, key);
    struct new_wake nw = {.key = key,
                          .agent = req->agent_id,
                          .reason = reason,
                          .reason_id =
                              req->reason == VG_REASON_USER ? req->session_id : req->reason_id,
                          .thread = thread,
                          .session = req->session_id,
                          .status = why ? "skipped" : "queued",
                          .skip_reason = why,
                          .change_key = req->batch_identity,
                          .tokens = tokens,
                          .seed = req->seed_input,
                          .meta = req->meta,
                          .timer = req->reason == VG_REASON_TIMER,
                          .scheduled_ms = req->scheduled_ms,
                          .now = now,
                          .not_before_ms = req->not_before_ms};
    if ((rc = insert_run(env, &nw, &inserted, err)))
        goto end;
    if (!inserted) {
        result = VG_ENQ_DUPLICATE; /* same run key: the same firing or turn, already logged */
        goto end;
    }
    result = why ? VG_ENQ_SKIPPED : VG_ENQ_NEW;
    rc = vg_wake_counter_write(env, req->agent_id, counter, rev, err);
end:
    rc = vg_wake_tx_end(env, rc, tagged, saved, err);
    if (!rc) {
        if (out_key)
            memcpy(out_key, result == VG_ENQ_SKIPPED && !inserted ? "" : key,
                   result == VG_ENQ_SKIPPED && !inserted ? 1 : 65);
        if (res)
            *res = result;
    }
out:
    json_decref(tokens);
    return rc;
}

/* ---- lease ----------------------------------------------------------------------------------- */

/* The epochs fence checks found, per agent, all under one change mark of agent_lease records
 * (env->lease_epochs). Agents taking turns in one thread (vigil_chat_many, a daemon's workers)
 * check their leases at every phase of a step, and the env's kept reads, a few records round
 * robin, no longer hold an agent's lease when its next phase comes: each check parsed it again
 * (docs/internals/PERF.md, Session 40). While the mark holds, no lease changed since the
 * epochs were read. A slot is an agent id and an epoch: 128 of them, some 10 KB. */
#define LEASE_EPOCHS_KEPT 128

struct lease_epochs {
    struct vg_store_change_mark mark;
    unsigned n, next;
    struct {
        char agent[64];
        int64_t epoch;
    } slot[LEASE_EPOCHS_KEPT];
};

/* The store's mark of agent_lease records now, or 0 when it cannot say (PostgreSQL, or outside
 * a transaction and a read batch). */
static int lease_mark(struct vg_env *env, struct vg_store_change_mark *mark)
{
    vigil_error ignored = {0};
    mark->kind = "agent_lease";
    return vg_store_control(env->store, VG_STORE_CTRL_CHANGE_MARK, mark, &ignored) == VIGIL_OK;
}

static int same_mark(const struct vg_store_change_mark *a, const struct vg_store_change_mark *b)
{
    return a->foreign == b->foreign && a->own == b->own;
}

/* The kept epoch of agent_id under the mark now: 1 and *epoch, else 0. */
static int lease_epoch_kept(struct vg_env *env, const char *agent_id, int64_t *epoch)
{
    struct lease_epochs *k = env->lease_epochs;
    struct vg_store_change_mark now;
    if (!k || !k->n || !lease_mark(env, &now) || !same_mark(&now, &k->mark))
        return 0;
    for (unsigned i = 0; i < k->n; i++)
        if (!strcmp(k->slot[i].agent, agent_id)) {
            *epoch = k->slot[i].epoch;
            return 1;
        }
    return 0;
}

/* Keep the epoch a read found under *before, the mark taken before it, when the mark still
 * holds after it (the read saw that state). A moved mark empties the table first. */
static void lease_epoch_keep(struct vg_env *env, const char *agent_id, int64_t epoch,
                             const struct vg_store_change_mark *before)
{
    struct vg_store_change_mark after;
    struct lease_epochs *k = env->lease_epochs;
    if (strlen(agent_id) >= sizeof k->slot[0].agent || !lease_mark(env, &after) ||
        !same_mark(before, &after))
        return;
    if (!k) {
        if (!(k = vg_calloc(1, sizeof *k)))
            return;
        env->lease_epochs = k;
        env->lease_epochs_free = vg_free;
    }
    if (!same_mark(&k->mark, &after)) {
        k->n = k->next = 0;
        k->mark = after;
    }
    unsigned i = k->n < LEASE_EPOCHS_KEPT ? k->n++ : k->next++ % LEASE_EPOCHS_KEPT;
    snprintf(k->slot[i].agent, sizeof k->slot[i].agent, "%s", agent_id);
    k->slot[i].epoch = epoch;
}

/* Whether the kept epochs are those of the store now (their mark is the mark now). */
static int lease_epochs_current(struct vg_env *env)
{
    struct lease_epochs *k = env->lease_epochs;
    struct vg_store_change_mark now;
    return k && lease_mark(env, &now) && same_mark(&now, &k->mark);
}

/* After this connection wrote agent_id's lease at epoch, when the kept epochs were current just
 * before: the write is the only change since (inside a transaction the mark moves with this
 * connection's own writes only, and an undoing moves it again), so the others still hold and
 * agent_id's is the one written. A take or give-back of one agent then leaves the other agents'
 * kept epochs standing. */
static void lease_epoch_written(struct vg_env *env, const char *agent_id, int64_t epoch)
{
    struct lease_epochs *k = env->lease_epochs;
    struct vg_store_change_mark now;
    if (!lease_mark(env, &now))
        return;
    for (unsigned i = 0; i < k->n; i++)
        if (!strcmp(k->slot[i].agent, agent_id)) {
            k->slot[i].epoch = epoch;
            k->mark = now;
            return;
        }
    struct vg_store_change_mark before = now;
    k->mark = now;
    lease_epoch_keep(env, agent_id, epoch, &before);
}

/* The fencing check. Locked first, so the epoch read still holds when the caller's
 * transaction commits: on a store many processes write (PostgreSQL), a successor's take waits
 * for it to end. (Outside a transaction the check holds only as of its read.) A caller that
 * writes the lease in the same transaction (renewal, finish) locks it exclusively from the
 * start: two transactions each holding it shared and then writing it wait for each other, and
 * PostgreSQL ends one with "deadlock detected" (the daemon's renewal against a run's finish or
 * its own fence's renewal). *out NULL: only checked, from the memo's own value; else a copy
 * the caller owns, which it writes back at *rev in the same transaction (no second read of
 * what it has just checked). */
static vigil_code lease_read_checked(struct vg_env *env, const char *agent_id, int64_t epoch,
                                     int for_write, json_t **out, int64_t *rev, vigil_error *err)
{
    json_t *lease = NULL;
    vigil_code rc = VIGIL_OK;
    int64_t kept = 0;
    struct vg_store_change_mark before;
    if (vg_store_in_tx(env->store))
        rc = for_write ? vg_store_lock_for_write(env->store, "agent_lease", agent_id, err)
                       : vg_store_lock(env->store, "agent_lease", agent_id, 0, NULL, err);
    if (!rc && !out && lease_epoch_kept(env, agent_id, &kept) && kept == epoch)
        return VIGIL_OK;
    int keep = !rc && !out && lease_mark(env, &before);
    /* Read on every phase of a run: only read, so the env's parsed value itself (no copy). */
    if (!rc)
        rc = out ? vg_env_get_json(env, "agent_lease", agent_id, &lease, rev, err)
                 : vg_env_get_json_shared(env, "agent_lease", agent_id, &lease, err);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ESTATE, "agent \"%s\" holds no lease: this run may not write",
                       agent_id);
    if (rc)
        return rc;
    int64_t cur = jint(lease, "epoch");
    if (keep)
        lease_epoch_keep(env, agent_id, cur, &before);
    if (cur != epoch) {
        json_decref(lease);
        return VG_FAIL(err, VIGIL_ESTATE,
                       "lease of agent \"%s\" moved to epoch %lld: the run at epoch %lld was "
                       "superseded and may not write",
                       agent_id, (long long)cur, (long long)epoch);
    }
    if (out)
        *out = lease;
    else
        json_decref(lease);
    return VIGIL_OK;
}

vigil_code vg_wake_lease_check(struct vg_env *env, const char *agent_id, int64_t epoch,
                               vigil_error *err)
{
    return lease_read_checked(env, agent_id, epoch, 0, NULL, NULL, err);
}

int vg_wake_lease_holder_gone(json_t *lease)
{
    return vg_proc_gone(jstr(lease, "host"), (long)jint(lease, "pid"), jstr(lease, "pid_start"));
}

/* A holder that beats and has missed its beats: gone, on whatever host it ran. */
static int lease_beat_missed(json_t *lease, int64_t now)
{
    int64_t timeout = jint(lease, "beat_timeout_ms");
    return timeout > 0 && now - jint(lease, "beat_ms") > timeout;
}

/* Held: a holder, not expired, (on this host) its process still runs, and (when it beats) its
 * heartbeat is recent. A lease whose process died is free at once, not after its expiry: a
 * killed `vigil chat` must not block the agent; one held from another host is free once its
 * heartbeat stops, a small part of the lease. */
static int lease_held(json_t *lease, int64_t now)
{
    return *jstr(lease, "holder") && jint(lease, "expires_ms") > now &&
           !vg_wake_lease_holder_gone(lease) && !lease_beat_missed(lease, now);
}

/* A new holder's heartbeat: when it beat last (now), and past when it counts as gone (0: it
 * does not beat). */
static int lease_beat(json_t *lease, int64_t now, int64_t heartbeat_ms)
{
    int64_t timeout = heartbeat_ms > 0 ? heartbeat_ms * VG_WAKE_BEATS_MISSED : 0;
    return json_object_set_new(lease, "beat_ms", json_integer(now)) ||
           json_object_set_new(lease, "beat_timeout_ms", json_integer(timeout));
}

/* Name this process as the lease's holder, so another process can tell when it is gone. */
static int lease_stamp(json_t *lease)
{
    struct vg_proc_id me;
    vg_proc_self(&me);
    return json_object_set_new(lease, "host", json_string(me.host)) ||
           json_object_set_new(lease, "pid", json_integer(me.pid)) ||
           json_object_set_new(lease, "pid_start", json_string(me.start));
}

static vigil_code lease_write(struct vg_env *env, const char *agent, json_t *lease, int64_t rev,
                              int exists, vigil_error *err)
{
    const char *holder = jstr(lease, "holder");
    int64_t expires = jint(lease, "expires_ms");
    /* Inside a transaction: a write that began one would first notice other commits. */
    int current = vg_store_in_tx(env->store) && lease_epochs_current(env);
    vigil_code rc;
    if (!exists) {
        int inserted = 0;
        rc = put_json(env, "agent_lease", agent, agent, holder, "", expires, lease, &inserted, err);
        if (!rc && !inserted) /* another process took the agent's first lease meanwhile */
            rc = VG_FAIL(err, VIGIL_ECONFLICT, "agent \"%s\" was leased meanwhile", agent);
    } else {
        /* Noted: each phase of the run that took it reads it back (vg_wake_lease_check), and
         * the next turn's take reads what the give-back wrote. */
        rc = vg_env_update_json_noted(env, "agent_lease", agent, agent, holder, "", expires, lease,
                                      rev, err);
    }
    if (!rc && current)
        lease_epoch_written(env, agent, jint(lease, "epoch"));
    return rc;
}

vigil_code vg_wake_lease_renew(struct vg_env *env, const char *agent_id, int64_t epoch,
                               int64_t lease_ms, vigil_error *err)
{
    json_t *lease = NULL;
    int64_t rev = 0;
    int tagged;
    const char *saved;
    vigil_code rc = vg_wake_tx_begin(env, &tagged, &saved, err);
    if (rc)
        return rc;
    if ((rc = lease_read_checked(env, agent_id, epoch, 1, &lease, &rev, err)))
        goto out; /* the lease as checked, locked for write: written back from this read */
    if (json_object_set_new(lease, "expires_ms", json_integer(vg_env_now(env) + lease_ms)) ||
        json_object_set_new(lease, "beat_ms", json_integer(vg_env_now(env)))) {
        rc = oom(err);
        goto out;
    }
    rc = lease_write(env, agent_id, lease, rev, 1, err);
out:
    json_decref(lease);
    return vg_wake_tx_end(env, rc, tagged, saved, err);
}

vigil_code vg_wake_lease_take(struct vg_env *env, const char *agent_id, const char *holder,
                              int64_t lease_ms, int64_t *epoch, int *got, vigil_error *err)
{
    json_t *lease = NULL;
    int64_t rev = 0, now = vg_env_now(env);
    int tagged, exists = 1;
    const char *saved;
    *got = 0;
    vigil_code rc = vg_wake_tx_begin(env, &tagged, &saved, err);
    if (rc)
        return rc;
    /* An agent's first lease: no record yet is an answer, kept out of the caller's report. */
    vigil_error miss = {0};
    rc = vg_error_unless_missing(
        err, &miss, vg_env_get_json(env, "agent_lease", agent_id, &lease, &rev, &miss));
    if (rc == VIGIL_ENOTFOUND) {
        exists = 0;
        rc = (lease = json_pack("{s:s, s:I}", "agent_id", agent_id, "epoch", (json_int_t)0))
                 ? VIGIL_OK
                 : oom(err);
    }
    if (rc)
        goto out;
    if (lease_held(lease, now))
        goto out; /* another run holds the agent */
    int64_t e = jint(lease, "epoch") + 1;
    if (lease_stamp(lease) || json_object_set_new(lease, "epoch", json_integer(e)) ||
        json_object_set_new(lease, "holder", json_string(holder)) ||
        json_object_set_new(lease, "expires_ms", json_integer(now + lease_ms)) ||
        lease_beat(lease, now, 0) || json_object_set_new(lease, "run_key", json_string(""))) {
        rc = oom(err);
        goto out;
    }
    if (!(rc = lease_write(env, agent_id, lease, rev, exists, err))) {
        *epoch = e;
        *got = 1;
    }
out:
    json_decref(lease);
    rc = vg_wake_tx_end(env, rc, tagged, saved, err);
    if (rc)
        *got = 0;
    return rc;
}

vigil_code vg_wake_lease_give_back(struct vg_env *env, const char *agent_id, int64_t epoch,
                                   vigil_error *err)
{
    json_t *lease = NULL;
    int64_t rev = 0;
    int tagged;
    const char *saved;
    vigil_code rc = vg_wake_tx_begin(env, &tagged, &saved, err);
    if (rc)
        return rc;
    rc = vg_env_get_json(env, "agent_lease", agent_id, &lease, &rev, err);
    if (!rc && jint(lease, "epoch") == epoch) {
        if (json_object_set_new(lease, "holder", json_string("")) ||
            json_object_set_new(lease, "expires_ms", json_integer(0)))
            rc = oom(err);
        else
            rc = lease_write(env, agent_id, lease, rev, 1, err);
    }
    json_decref(lease);
    return vg_wake_tx_end(env, rc, tagged, saved, err);
}

vigil_code vg_wake_lease_hold_tx(struct vg_env *env, const char *agent_id, const char *holder,
                                 int *got, vigil_error *err)
{
    int64_t epoch = 0;
    *got = 0;
    vigil_code rc = vg_store_lock_for_write(env->store, "agent_lease", agent_id, err);
    if (!rc)
        rc = vg_wake_lease_take(env, agent_id, holder, 60000, &epoch, got, err);
    if (!rc && *got && (rc = vg_wake_lease_give_back(env, agent_id, epoch, err)))
        *got = 0;
    return rc;
}

/* ---- claim ----------------------------------------------------------------------------------- */

struct cand {
    char key[65];
    char agent[37];
};

struct cand_ctx {
    struct cand c[32];
    int n;
};

static int cand_cb(void *user, const struct vg_record *r)
{
    struct cand_ctx *c = user;
    snprintf(c->c[c->n].key, sizeof c->c[c->n].key, "%s", r->id);
    snprintf(c->c[c->n].agent, sizeof c->c[c->n].agent, "%s", r->owner);
    return ++c->n == (int)VG_ARRAY_LEN(c->c);
}

void vg_wake_job_release(struct vg_wake_job *j)
{
    json_decref(j->tokens);
    json_decref(j->seed_input);
    json_decref(j->meta);
    json_decref(j->run);
    json_decref(j->lease);
    memset(j, 0, sizeof *j);
}

static vigil_code runtime_set(struct vg_env *env, const char *agent, json_t *changes,
                              vigil_error *err)
{
    if (!changes)
        return oom(err);
    vigil_code rc = vg_runtime_state_update(env, agent, changes, err);
    json_decref(changes);
    return rc;
}

/* Try to start one queued run; *started 1 if it did. */
static vigil_code try_start(struct vg_wake *w, const struct cand *c, struct vg_wake_job *job,
                            int *started, vigil_error *err)
{
    struct vg_env *env = w->env;
    json_t *run = NULL, *lease = NULL;
    int64_t run_rev = 0, lease_rev = 0, now = vg_env_now(env);
    const char *why = NULL;
    int exists = 1, busy = 0;
    /* Claimed FOR UPDATE SKIP LOCKED on PostgreSQL: a run or an agent another daemon is taking
     * right now is passed over, not waited for. */
    vigil_code rc = vg_store_lock(env->store, "wake_run", c->key, 1, &busy, err);
    *started = 0;
    if (!rc && !busy)
        rc = vg_store_lock(env->store, "agent_lease", c->agent, 1, &busy, err);
    if (rc || busy)
        return rc;
    vigil_error miss = {0};
    if ((rc = vg_error_unless_missing(
             err, &miss, vg_env_get_json(env, "wake_run", c->key, &run, &run_rev, &miss))))
        return rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc;
    if (strcmp(jstr(run, "status"), "queued") || jint(run, "not_before_ms") > now)
        goto out; /* completed runs never run again; backoff waits */
    rc = refusal(w, c->agent, NULL, &why, err);
    if (rc == VIGIL_ENOTFOUND) {
        why = "agent no longer exists";
        rc = VIGIL_OK;
    }
    if (rc || waits_for_agent(jstr(run, "reason"), jstr(run, "original_reason"), why))
        goto out;
    if (why) {
        if (set_str(run, "status", "skipped", err) || set_str(run, "skip_reason", why, err) ||
            set_time(run, "completed_at", now, err)) {
            rc = oom(err);
            goto out;
        }
        rc = run_save(env, run, run_rev, err);
        goto out;
    }
    {
        /* An agent sleeping (sleep_until in the future) keeps its wakes queued until then. */
        json_t *state = NULL;
        int64_t until = 0;
        if ((rc = vg_state_get(env, c->agent, &state, NULL, err)))
            goto out;
        const char *s = json_string_value(json_object_get(state, "sleep_until"));
        int asleep = s && !vg_time_parse_ms(s, &until) && until > now;
        json_decref(state);
        if (asleep)
            goto out;
    }
    rc = vg_env_get_json(env, "agent_lease", c->agent, &lease, &lease_rev, err);
    if (rc == VIGIL_ENOTFOUND) {
        exists = 0;
        rc = VIGIL_OK;
        if (!(lease = json_pack("{s:s, s:I}", "agent_id", c->agent, "epoch", (json_int_t)0))) {
            rc = oom(err);
            goto out;
        }
    }
    if (rc)
        goto out;
    if (lease_held(lease, now))
        goto out; /* single flight: another run holds this agent */
    int64_t epoch = jint(lease, "epoch") + 1;
    if (lease_stamp(lease) || json_object_set_new(lease, "epoch", json_integer(epoch)) ||
        json_object_set_new(lease, "holder", json_string(w->holder)) ||
        json_object_set_new(lease, "expires_ms", json_integer(now + w->cfg.lease_ms)) ||
        lease_beat(lease, now, w->cfg.heartbeat_ms) ||
        json_object_set_new(lease, "run_key", json_string(c->key)) ||
        set_str(run, "status", "started", err) || set_time(run, "started_at", now, err) ||
        json_object_set_new(run, "attempts", json_integer(jint(run, "attempts") + 1)) ||
        json_object_set_new(run, "epoch", json_integer(epoch))) {
        rc = oom(err);
        goto out;
    }
    char at[32];
    vg_time_format_ms(at, now);
    if ((rc = lease_write(env, c->agent, lease, lease_rev, exists, err)) == VIGIL_ECONFLICT) {
        rc = VIGIL_OK; /* single flight: the agent's first lease went to another process */
        goto out;
    }
    if (rc || (rc = run_save(env, run, run_rev, err)) ||
        (rc = runtime_set(env, c->agent,
                          json_pack("{s:s, s:s, s:s}", "run_status", "running", "active_run_id",
                                    c->key, "last_run_started_at", at),
                          err)))
        goto out;
    memset(job, 0, sizeof *job);
    snprintf(job->agent_id, sizeof job->agent_id, "%s", c->agent);
    snprintf(job->run_key, sizeof job->run_key, "%s", c->key);
    snprintf(job->thread_id, sizeof job->thread_id, "%s", jstr(run, "thread_id"));
    snprintf(job->reason, sizeof job->reason, "%s", jstr(run, "reason"));
    snprintf(job->original_reason, sizeof job->original_reason, "%s", jstr(run, "original_reason"));
    snprintf(job->operation_key, sizeof job->operation_key, "%s", jstr(run, "operation_key"));
    snprintf(job->reason_id, sizeof job->reason_id, "%s", jstr(run, "reason_id"));
    snprintf(job->session_id, sizeof job->session_id, "%s", jstr(run, "session_id"));
    job->tokens = json_incref(json_object_get(run, "tokens"));
    job->seed_input = json_incref(json_object_get(run, "seed_input"));
    if (json_is_null(job->seed_input)) {
        json_decref(job->seed_input);
        job->seed_input = NULL;
    }
    job->meta = json_incref(json_object_get(run, "meta"));
    job->epoch = epoch;
    job->attempt = (int)jint(run, "attempts");
    job->wake = w;
    job->run = json_incref(run);
    job->run_rev = run_rev + 1; /* run_save above moved it on by one */
    if (exists) {               /* lease_write above moved it on by one */
        job->lease = json_incref(lease);
        job->lease_rev = lease_rev + 1;
    }
    *started = 1;
out:
    json_decref(run);
    json_decref(lease);
    return rc;
}

vigil_code vg_wake_claim(struct vg_wake *w, struct vg_wake_job *job, int *got, vigil_error *err)
{
    struct vg_env *env = w->env;
    struct cand_ctx *cc = vg_calloc(1, sizeof *cc);
    struct vg_query q = {.kind = "wake_run", .k1 = "queued"};
    int tagged, started = 0;
    const char *saved;
    char after[65];
    vigil_code rc;
    *got = 0;
    if (!cc)
        return oom(err);
    /* A read first: an idle queue costs no write lock (other processes write meanwhile). */
    if (!vg_store_in_tx(env->store)) {
        struct vg_query peek = {.kind = "wake_run", .k1 = "queued", .limit = 1};
        int64_t n = 0;
        if ((rc = vg_store_count(env->store, &peek, &n, err)) || n == 0)
            goto out;
    }
    if ((rc = vg_wake_tx_begin(env, &tagged, &saved, err)))
        goto out;
    /* Oldest first (FIFO). Busy agents and waiting backoffs are passed over. */
    while (!rc && !started) {
        cc->n = 0;
        if ((rc = vg_store_scan(env->store, &q, cand_cb, cc, err)))
            break;
        for (int i = 0; !rc && !started && i < cc->n; i++)
            rc = try_start(w, &cc->c[i], job, &started, err);
        if (cc->n < (int)VG_ARRAY_LEN(cc->c))
            break;
        /* next page: strictly after the last candidate seen */
        struct vg_record *r = NULL;
        if ((rc = vg_store_get_copy(env->store, "wake_run", cc->c[cc->n - 1].key, &r, err)))
            break;
        q.has_after = 1;
        q.after_seq = r->seq;
        vg_free(r);
        snprintf(after, sizeof after, "%s", cc->c[cc->n - 1].key);
        q.after_id = after;
    }
    rc = vg_wake_tx_end(env, rc, tagged, saved, err);
    if (rc && started)
        vg_wake_job_release(job);
    else if (!rc)
        *got = started;
out:
    vg_free(cc);
    return rc;
}

/* ---- finish ---------------------------------------------------------------------------------- */

/* The lease as the finish's check read it, locked for write since: no one else wrote it. */
static vigil_code release_lease(struct vg_env *env, const char *agent, json_t *lease, int64_t rev,
                                vigil_error *err)
{
    if (json_object_set_new(lease, "holder", json_string("")) ||
        json_object_set_new(lease, "expires_ms", json_integer(0)))
        return oom(err);
    return lease_write(env, agent, lease, rev, 1, err);
}

/* The snapshot's fields merged under its write lock: read once, in vg_state_update (a read
 * here first, for its revision, read the link, the snapshot and the wake counter twice). */
static vigil_code state_set(struct vg_env *env, const char *agent, json_t *changes,
                            vigil_error *err)
{
    if (!changes)
        return oom(err);
    vigil_code rc = vg_state_update(env, agent, changes, VG_STATE_ANY_REVISION, NULL, err);
    json_decref(changes);
    return rc;
}

/* What an ended wake moves in the agent's state: the time of its last wake, no next wake (a
 * timer sets one again), and the last message the agent has seen (the head of its messages,
 * when it has any: seed 003 section 5.3). */
static json_t *ended_state(struct vg_env *env, const char *agent, const char *at, vigil_code *rc,
                           vigil_error *err)
{
    char head[VG_RECORD_ID_MAX] = "";
    vigil_error miss = {0};
    *rc = vg_error_unless_missing(
        err, &miss,
        vg_link_pointer_get(env, "agent_head_message", agent, head, sizeof head, &miss));
    if (*rc == VIGIL_ENOTFOUND)
        *rc = VIGIL_OK;
    if (*rc)
        return NULL;
    json_t *changes = json_pack("{s:s, s:n}", "last_wake_at", at, "next_wake_at");
    if (changes && head[0] &&
        json_object_set_new(changes, "recent_head_message_id", json_string(head))) {
        json_decref(changes);
        changes = NULL;
    }
    return changes;
}

static vigil_code state_set_ended(struct vg_env *env, const char *agent, const char *at,
                                  vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    json_t *changes = ended_state(env, agent, at, &rc, err);
    return rc ? rc : state_set(env, agent, changes, err);
}

/* Whether a failed run's end is the orchestrator's to act on: a spawned child's failure goes to
 * its parent (with its results), a task's run is tried again by the dispatcher up to its own
 * count. A generic retry as well ran the work again after the parent had been told, or after
 * the task had failed and its dependants were cancelled (trial C10, C19 of session 30). */
static int orchestrated(json_t *run)
{
    const char *r =
        *jstr(run, "original_reason") ? jstr(run, "original_reason") : jstr(run, "reason");
    return !strcmp(r, "spawn") || !strcmp(r, "task");
}

/* After a failure: a recovery wake carrying the same trigger, not before the backoff delay. */
static vigil_code schedule_retry(struct vg_wake *w, json_t *failed, int64_t not_before,
                                 vigil_error *err)
{
    struct vg_env *env = w->env;
    const char *agent = jstr(failed, "agent_id"), *fkey = jstr(failed, "run_key");
    int user = vg_wake_reason_is_turn(jstr(failed, "original_reason")) ||
               vg_wake_reason_is_turn(jstr(failed, "reason"));
    json_t *run = NULL;
    char key[65];
    int inserted;
    vigil_code rc;
    if (!user) {
        struct find_ctx f;
        if ((rc = find_queued(env, agent, &f, err)))
            return rc;
        if (f.found)
            return merge_into(env, f.key, "recovery", fkey, json_object_get(failed, "tokens"), NULL,
                              not_before, err);
    }
    const char *parts[] = {agent, "retry", fkey};
    vg_sha256_hex_parts(key, parts, 3);
    const char *thread = jstr(failed, "thread_id");
    char own_thread[160];
    if (!user) { /* an autonomous retry is its own run with its own thread */
        snprintf(own_thread, sizeof own_thread, "%s:run:%s", agent, key);
        thread = own_thread;
    }
    run = new_run(env, key, agent, "recovery", fkey, thread,
                  *jstr(failed, "session_id") ? jstr(failed, "session_id") : NULL,
                  json_object_get(failed, "tokens"), json_object_get(failed, "seed_input"),
                  json_object_get(failed, "meta"), "queued");
    /* The first attempt's key through a chain of retries: what it did is found, not redone. */
    const char *op_key = *jstr(failed, "operation_key") ? jstr(failed, "operation_key") : fkey;
    if (!run || json_object_set_new(run, "not_before_ms", json_integer(not_before)) ||
        set_str(run, "operation_key", op_key, err) ||
        set_str(run, "original_reason",
                *jstr(failed, "original_reason") ? jstr(failed, "original_reason")
                                                 : jstr(failed, "reason"),
                err)) {
        json_decref(run);
        return oom(err);
    }
    rc = put_json(env, "wake_run", key, agent, "queued", "recovery", jint(run, "created_ms"), run,
                  &inserted, err);
    json_decref(run);
    return rc;
}

vigil_code vg_wake_cancel_queued(struct vg_env *env, json_t *run, int64_t rev, const char *why,
                                 vigil_error *err)
{
    vigil_code rc;
    if (strcmp(jstr(run, "status"), "queued"))
        return VG_FAIL(err, VIGIL_ESTATE, "run %.64s is %s, not queued", jstr(run, "run_key"),
                       jstr(run, "status"));
    if ((rc = set_str(run, "status", "cancelled", err)) ||
        (rc = set_str(run, "skip_reason", why, err)) ||
        (rc = set_time(run, "completed_at", vg_env_now(env), err)))
        return rc;
    return run_save(env, run, rev, err);
}

/* The run's entry as its claim wrote it: a copy (the finish changes it), at the claim's
 * revision. Nothing but this run's end writes a started entry while its lease, checked and
 * locked for write before this, stays at the run's epoch (a recovery moves the epoch on in the
 * same transaction as its own write; cancelling and merging touch only queued entries), and
 * the write is a compare-and-swap at that revision all the same. A job claimed without it is
 * read from the store. */
static vigil_code claimed_run(struct vg_env *env, const struct vg_wake_job *job, json_t **run,
                              int64_t *rev, vigil_error *err)
{
    if (!job->run)
        return vg_env_get_json(env, "wake_run", job->run_key, run, rev, err);
    /* Shallow: the finish replaces top-level fields only, and the nested ones (tokens, seed
     * input, meta) are the job's already, shared (a deep copy of the entry was about 22 k
     * instructions a finish). */
    if (!(*run = json_copy(job->run)))
        return oom(err);
    *rev = job->run_rev;
    return VIGIL_OK;
}

static int rev_cb(void *user, const struct vg_record *r)
{
    *(int64_t *)user = r->rev;
    return 1;
}

/* The lease the run releases, locked for write and checked: the value its claim wrote while
 * the stored revision is still the one that write left (nothing wrote the lease since, so its
 * epoch is the run's; the body is not parsed: about 57 k instructions for a 322-byte lease),
 * else read and checked as every write phase does. */
static vigil_code claimed_lease(struct vg_env *env, const struct vg_wake_job *job, json_t **lease,
                                int64_t *rev, vigil_error *err)
{
    int64_t stored = 0;
    vigil_code rc = VIGIL_OK;
    if (job->lease && vg_store_in_tx(env->store) &&
        !(rc = vg_store_lock_for_write(env->store, "agent_lease", job->agent_id, err)) &&
        !(rc = vg_store_get(env->store, "agent_lease", job->agent_id, rev_cb, &stored, err)) &&
        stored == job->lease_rev) {
        *rev = stored;
        return (*lease = json_copy(job->lease)) ? VIGIL_OK : oom(err); /* top level changes */
    }
    if (rc && rc != VIGIL_ENOTFOUND)
        return rc;
    return lease_read_checked(env, job->agent_id, job->epoch, 1, lease, rev, err);
}

vigil_code vg_wake_finish(struct vg_wake *w, const struct vg_wake_job *job,
                          enum vg_wake_outcome outcome, const char *error_text, vigil_error *err)
{
    struct vg_env *env = w->env;
    json_t *run = NULL, *rt = NULL, *lease = NULL;
    int64_t rev = 0, lease_rev = 0, now = vg_env_now(env);
    int tagged;
    const char *saved;
    char at[32];
    vigil_code rc = vg_wake_tx_begin(env, &tagged, &saved, err);
    if (rc)
        return rc;
    vg_time_format_ms(at, now);
    /* for write: the run releases the lease below, from this read */
    if ((rc = claimed_lease(env, job, &lease, &lease_rev, err)) ||
        (rc = claimed_run(env, job, &run, &rev, err)))
        goto out;
    if (strcmp(jstr(run, "status"), "started") || jint(run, "epoch") != job->epoch) {
        rc = VG_FAIL(err, VIGIL_ESTATE, "run \"%s\" is %s, not started at epoch %lld", job->run_key,
                     jstr(run, "status"), (long long)job->epoch);
        goto out;
    }
    if (outcome == VG_WAKE_COMPLETED || outcome == VG_WAKE_CANCELLED ||
        outcome == VG_WAKE_STOPPED) {
        /* ended, but not `completed` (trial C13 for a cancel, F11 for a budget or kill switch) */
        int cancelled = outcome != VG_WAKE_COMPLETED;
        const char *status = outcome == VG_WAKE_CANCELLED ? "cancelled"
                             : outcome == VG_WAKE_STOPPED ? "stopped"
                                                          : "completed";
        if (set_str(run, "status", status, err) || set_str(run, "completed_at", at, err) ||
            (cancelled && error_text && *error_text && set_str(run, "error", error_text, err))) {
            rc = oom(err);
            goto out;
        }
        if ((rc = run_save(env, run, rev, err)) ||
            (rc = runtime_set(env, job->agent_id,
                              cancelled
                                  ? json_pack("{s:s, s:n}", "run_status", "idle", "active_run_id")
                                  : json_pack("{s:s, s:n, s:i}", "run_status", "idle",
                                              "active_run_id", "failure_streak", 0),
                              err)) ||
            (rc = state_set_ended(env, job->agent_id, at, err)))
            goto out;
    } else if (outcome == VG_WAKE_FAILED || outcome == VG_WAKE_FAILED_FINAL) {
        const char *e = error_text && *error_text ? error_text : "run failed";
        int final = outcome == VG_WAKE_FAILED_FINAL; /* no retry, no step toward dormancy */
        if ((rc = vg_runtime_state_get(env, job->agent_id, &rt, NULL, err)))
            goto out;
        int64_t streak = jint(rt, "failure_streak") + !final;
        if (set_str(run, "status", "failed", err) || set_str(run, "completed_at", at, err) ||
            set_str(run, "error", e, err) ||
            json_object_set_new(run, "failure_streak", json_integer(streak))) {
            rc = oom(err);
            goto out;
        }
        if ((rc = run_save(env, run, rev, err)) ||
            (rc = runtime_set(env, job->agent_id,
                              json_pack("{s:s, s:n, s:I}", "run_status", "idle", "active_run_id",
                                        "failure_streak", (json_int_t)streak),
                              err)))
            goto out;
        if (final) {
            /* the entry says why; nothing is scheduled */
        } else if (streak >= w->cfg.max_failures) {
            char why[300];
            snprintf(why, sizeof why, "%lld consecutive failed runs; last: %.200s",
                     (long long)streak, e);
            rc = vg_agent_transition(env, job->agent_id, VIGIL_LIFECYCLE_DORMANT, why, err);
            w->last_dormant = rc == VIGIL_OK;
            if (rc == VIGIL_ESTATE) /* already dormant or destroyed: nothing left to stop */
                rc = VIGIL_OK;
            /* a dormant agent has no next wake (trial F22) */
            if (!rc)
                rc = state_set(env, job->agent_id, json_pack("{s:n}", "next_wake_at"), err);
        } else if (!orchestrated(run)) {
            int64_t delay = w->cfg.backoff_base_ms;
            for (int64_t i = 1; i < streak && delay < w->cfg.backoff_max_ms; i++)
                delay *= 2;
            delay = VG_MIN(delay, w->cfg.backoff_max_ms);
            char next[32];
            vg_time_format_ms(next, now + delay);
            if (!(rc =
                      state_set(env, job->agent_id, json_pack("{s:s}", "next_wake_at", next), err)))
                rc = schedule_retry(w, run, now + delay, err);
        }
        if (rc)
            goto out;
    } else { /* interrupted: back to the queue under the same run key */
        if (!*jstr(run, "original_reason") &&
            set_str(run, "original_reason", jstr(run, "reason"), err)) {
            rc = oom(err);
            goto out;
        }
        if (set_str(run, "status", "queued", err) || set_str(run, "reason", "recovery", err) ||
            set_str(run, "interrupted_at", at, err)) {
            rc = oom(err);
            goto out;
        }
        if ((rc = run_save(env, run, rev, err)) ||
            (rc = runtime_set(env, job->agent_id,
                              json_pack("{s:s, s:n}", "run_status", "idle", "active_run_id"), err)))
            goto out;
    }
    rc = release_lease(env, job->agent_id, lease, lease_rev, err);
out:
    json_decref(run);
    json_decref(rt);
    json_decref(lease);
    return vg_wake_tx_end(env, rc, tagged, saved, err);
}

/* ---- recovery -------------------------------------------------------------------------------- */

vigil_code vg_wake_recover(struct vg_wake *w, const char *dead_holders_prefix, int *n,
                           vigil_error *err)
{
    struct vg_env *env = w->env;
    struct vg_id_list k = {0};
    struct vg_query q = {.kind = "wake_run", .k1 = "started"};
    int tagged, count = 0;
    const char *saved;
    int64_t now = vg_env_now(env);
    char at[32];
    vigil_code rc = vg_wake_tx_begin(env, &tagged, &saved, err);
    if (rc)
        return rc;
    vg_time_format_ms(at, now);
    if ((rc = vg_store_scan_ids(env->store, &q, &k, err)))
        goto out;
    for (size_t i = 0; !rc && i < k.n; i++) {
        json_t *run = NULL, *lease = NULL;
        int64_t rev = 0, lrev = 0;
        int busy = 0;
        if ((rc = vg_env_get_json(env, "wake_run", k.ids[i], &run, &rev, err)))
            break;
        const char *agent = jstr(run, "agent_id");
        /* Another process writing the lease or the run now (its holder's phase, renewal or
         * finish, or another daemon's recovery) is alive: pass it by. Lease first, then run:
         * the order every taker locks them in. */
        if ((rc = vg_store_lock(env->store, "agent_lease", agent, 1, &busy, err)) || busy ||
            (rc = vg_store_lock(env->store, "wake_run", k.ids[i], 1, &busy, err)) || busy) {
            json_decref(run);
            continue;
        }
        json_decref(run);
        run = NULL;
        if ((rc = vg_env_get_json(env, "wake_run", k.ids[i], &run, &rev, err)))
            break; /* read again under the lock: it may have finished meanwhile */
        if (strcmp(jstr(run, "status"), "started")) {
            json_decref(run);
            continue;
        }
        agent = jstr(run, "agent_id"); /* the same agent, from the body read now */
        rc = vg_env_get_json(env, "agent_lease", agent, &lease, &lrev, err);
        int have = rc == VIGIL_OK;
        if (rc == VIGIL_ENOTFOUND)
            rc = VIGIL_OK;
        const char *holder = have ? jstr(lease, "holder") : "";
        int dead = !have || jint(lease, "epoch") != jint(run, "epoch") || !lease_held(lease, now) ||
                   (dead_holders_prefix && *dead_holders_prefix &&
                    !strncmp(holder, dead_holders_prefix, strlen(dead_holders_prefix)) &&
                    strcmp(holder, w->holder));
        if (!rc && dead) {
            if ((!*jstr(run, "original_reason") &&
                 set_str(run, "original_reason", jstr(run, "reason"), err)) ||
                set_str(run, "status", "queued", err) || set_str(run, "reason", "recovery", err) ||
                set_str(run, "recovered_at", at, err))
                rc = oom(err);
            if (!rc)
                rc = run_save(env, run, rev, err);
            /* Move the epoch on: the presumed-dead run is fenced off even if it wakes up. Only
             * when the lease is still that run's: a newer holder (a chat turn, another run)
             * keeps its lease. */
            if (!rc && have && jint(lease, "epoch") == jint(run, "epoch") &&
                (json_object_set_new(lease, "epoch", json_integer(jint(lease, "epoch") + 1)) ||
                 json_object_set_new(lease, "holder", json_string("")) ||
                 json_object_set_new(lease, "expires_ms", json_integer(0))))
                rc = oom(err);
            if (!rc && have && jint(lease, "epoch") == jint(run, "epoch") + 1)
                rc = lease_write(env, agent, lease, lrev, 1, err);
            if (!rc)
                rc = runtime_set(env, agent,
                                 json_pack("{s:s, s:n}", "run_status", "idle", "active_run_id"),
                                 err);
            if (rc == VIGIL_ENOTFOUND) /* the agent was deleted meanwhile */
                rc = VIGIL_OK;
            count++;
        }
        json_decref(run);
        json_decref(lease);
    }
out:
    vg_id_list_release(&k);
    rc = vg_wake_tx_end(env, rc, tagged, saved, err);
    if (!rc && n)
        *n = count;
    return rc;
}
