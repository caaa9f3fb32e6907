/*
 * wake_runner.c: a claimed wake becomes one run of the agent loop. The input is the user's
 * message for a user wake, or else the wake delta (why it woke, the merged trigger tokens, a
 * timer's catch-up count) as an observation. Every write phase of the run checks the wake's
 * lease epoch, so a run presumed dead cannot write after its successor started; the daemon's
 * shutdown flag cancels the run between model calls.
 */
#include "base/common.h"
#include "base/json.h"

#include "loop/loop.h"
#include "model/model.h"
#include "orch/orch.h"
#include "orch/task.h"
#include "runtime/recover.h"
#include "runtime/runtime_int.h"
#include "runtime/retention.h"
#include "runtime/wake_runner.h"
#include "store/store.h"
#include "tool/tool.h"
#include "wake/wake.h"

/* A run that keeps losing compare-and-swaps is failed after this many claims (kills and
 * recoveries count too): a conflict that comes back every time is not a race. */
#define CONFLICT_REQUEUES_MAX 16

struct fence_ctx {
    const struct vg_wake_job *job;
    int64_t lease_ms;   /* how long a renewal holds the agent */
    int64_t renewed_ms; /* when the lease was last taken or renewed */
};

/* Every write phase checks the lease is still this run's; past half its time it is renewed,
 * so a long run keeps its agent whether or not a daemon renews for it. */
static vigil_code fence(void *user, struct vg_env *env, vigil_error *err)
{
    struct fence_ctx *f = user;
    int64_t now = vg_env_now(env);
    if (now - f->renewed_ms > f->lease_ms / 2) {
        f->renewed_ms = now;
        return vg_wake_lease_renew(env, f->job->agent_id, f->job->epoch, f->lease_ms, err);
    }
    return vg_wake_lease_check(env, f->job->agent_id, f->job->epoch, err);
}

/* A run that failed with rc: failed (retried under a new run key, counted against the agent),
 * or back to the queue under its run key, as after a crash, when nothing of the failing phase
 * was applied and running it again can succeed:
 *  - the connection to a server store went (a restart, a network cut) and took the phase's
 *    transaction with it;
 *  - another writer moved a row the run had read (it lost a compare-and-swap); its next claim
 *    reads everything again and replays what it already did. */
static enum vg_wake_outcome failed_or_requeued(struct vg_env *env, const struct vg_wake_job *job,
                                               vigil_code rc)
{
    if (rc == VIGIL_EIO && (env->store->methods->caps & VG_STORE_CAP_RECONNECTS))
        return VG_WAKE_INTERRUPTED;
    if (rc == VIGIL_ECONFLICT && job->attempt < CONFLICT_REQUEUES_MAX)
        return VG_WAKE_INTERRUPTED;
    return VG_WAKE_FAILED;
}

/* What the loop asks before each model call (and while a response streams in): the daemon
 * stopping, or a person cancelling this run (src/orch/runctl.c): one point read of the store,
 * skipped while a transaction is open on the connection (another fiber's, in a worker). */
struct stop_ctx {
    const volatile int *stop;
    struct vg_env *env;
    const char *run_key;
    int cancelled;
    char by[64]; /* who cancelled it (runs cancel --by) */
};

static int stopped(void *user)
{
    struct stop_ctx *s = user;
    if (!s->cancelled && !vg_store_in_tx(s->env->store))
        s->cancelled = vg_run_cancel_requested(s->env, s->run_key, s->by, sizeof s->by);
    return s->cancelled || (s->stop && *s->stop);
}

/* The run record's "canceled by NAME": a person's cancel names them; a stopping daemon, none. */
static const char *cancelled_by(void *user)
{
    struct stop_ctx *s = user;
    return s->cancelled ? s->by : NULL;
}

/*
 * At most this much of the changed tokens goes into the wake input, the rest counted: a batch
 * can name many thousands of entities, and a model needs the gist, not a megabyte it would pay
 * for on every turn (and that would fail the wake on every retry).
 */
#define WAKE_DELTA_TOKENS_MAX (64 * 1024)

static void put_changed_tokens(struct vg_buf *b, json_t *tokens)
{
    size_t n = json_array_size(tokens), shown_n = 0, used = 2;
    json_t *shown = json_array();
    if (!n || !shown) {
        json_decref(shown);
        return;
    }
    for (; shown_n < n; shown_n++) {
        json_t *tok = json_array_get(tokens, shown_n);
        const char *text = json_string_value(tok);
        size_t len = (text ? strlen(text) : 0) + 3; /* quotes and comma */
        if (used + len > WAKE_DELTA_TOKENS_MAX || json_array_append(shown, tok))
            break;
        used += len;
    }
    char *text = vg_json_dumps(shown, JSON_COMPACT);
    vg_buf_printf(b, " Changed since your last wake: %s", text ? text : "[]");
    if (shown_n < n)
        vg_buf_printf(b, " and %zu more", n - shown_n);
    vg_buf_puts(b, ".");
    vg_free(text);
    json_decref(shown);
}

/* At most this much of a host's context goes into the wake input. */
#define WAKE_CONTEXT_MAX (64 * 1024)

/* The host's context for the wake (vigil_set_wake_context), after the delta. */
static void put_host_context(struct vg_buf *b, vigil_runtime *rt, const struct vg_wake_job *job)
{
    const char *tokens[256];
    size_t n = 0;
    char *text = NULL;
    if (!rt || !rt->wake_context)
        return;
    for (; n < json_array_size(job->tokens) && n < VG_ARRAY_LEN(tokens); n++)
        tokens[n] = json_string_value(json_array_get(job->tokens, n));
    /* Bounded as the delta is: a host's context is the gist of a few entities, and what goes
     * past the bound is cut, saying so. */
    if (!rt->wake_context(rt->wake_context_user, rt, job->agent_id, tokens, n, &text) && text) {
        size_t len = strlen(text);
        vg_buf_printf(b, "\n\n%.*s%s", (int)(len > WAKE_CONTEXT_MAX ? WAKE_CONTEXT_MAX : len), text,
                      len > WAKE_CONTEXT_MAX ? " [cut]" : "");
    }
    free(text);
}

/* The wake delta the agent reads as its input. */
static char *wake_delta(vigil_runtime *rt, const struct vg_wake_job *job)
{
    struct vg_buf b;
    /* Escaping can make the tokens' text up to six times longer: room enough for that. */
    vg_buf_init(&b, 8 * WAKE_DELTA_TOKENS_MAX + WAKE_CONTEXT_MAX + 64);
    vg_buf_printf(&b, "You woke up: reason %s%s%s.", job->reason, *job->reason_id ? " " : "",
                  job->reason_id);
    put_changed_tokens(&b, job->tokens);
    json_t *catchup = job->meta ? json_object_get(job->meta, "timer_catchup") : NULL;
    if (catchup) {
        char *c = vg_json_dumps(catchup, JSON_COMPACT | JSON_ENCODE_ANY);
        vg_buf_printf(&b, " Timer catch-up after downtime: %s.", c ? c : "yes");
        vg_free(c);
    }
    put_host_context(&b, rt, job);
    return vg_buf_detach(&b, NULL);
}

struct key_seen {
    char needle[2][100];
    int seen;
};

static int run_key_cb(void *user, const struct vg_record *r)
{
    struct key_seen *k = user;
    for (int i = 0; i < 2; i++)
        if (k->needle[i][0] && strstr(r->body, k->needle[i]))
            return k->seen = 1;
    return 0;
}

/*
 * Did an earlier run of this wake (a crashed or interrupted one under the same run key, or the
 * failed run this retry repeats) start? Its start committed the user's message with its header,
 * so the message is in the thread already and is not appended a second time.
 */
static vigil_code input_recorded(struct vg_env *env, const struct vg_wake_job *job, int *seen,
                                 vigil_error *err)
{
    struct key_seen k = {0};
    struct vg_query q = {.kind = "run", .owner = job->agent_id};
    snprintf(k.needle[0], sizeof k.needle[0], "\"run_key\":\"%s\"", job->run_key);
    if (job->reason_id[0] && strlen(job->reason_id) < 80)
        snprintf(k.needle[1], sizeof k.needle[1], "\"run_key\":\"%.80s\"", job->reason_id);
    vigil_code rc = vg_store_scan(env->store, &q, run_key_cb, &k, err);
    *seen = k.seen;
    return rc;
}

/* How many calls of the run wait in doubt (vigil indoubt list): a task's run that completed
 * with one is not done until a person settles it (src/orch/doubt.c, trial L3). Only a run that
 * called a tool, or took over an earlier attempt's (a recovery), can have left one: any other
 * reads nothing. A failed read counts none, as before. */
static int calls_in_doubt(struct vg_env *env, const struct vg_wake_job *job,
                          const struct vg_loop_result *res)
{
    json_t *items = NULL, *it;
    size_t i;
    int n = 0;
    vigil_error e = {0};
    if ((res->tool_calls <= 0 && job->attempt <= 1) ||
        vg_tool_in_doubt_list(env, job->agent_id, &items, &e))
        return 0;
    json_array_foreach (items, i, it) {
        const char *key = json_string_value(json_object_get(it, "run_key"));
        n += key && !strcmp(key, job->run_key);
    }
    json_decref(items);
    return n;
}

/* A spawned child's or a task's run's end goes to the orchestrator: its result to its parent
 * or its task (src/orch). A run a person cancelled ends "cancelled", not "completed". A
 * failure to record it fails the wake (so its retry records it), or, when the failing
 * transaction was lost whole (a lost compare-and-swap, a lost connection), re-queues it under
 * its run key, as failed_or_requeued does: its next claim replays the finished run and records
 * its end again (an end recorded already, of the task or of the child, is left as it is).
 * A completed task's run has its wake finished with its end, in one transaction (*finished). */
static vigil_code child_ended(struct vg_env *env, const struct vg_wake_job *job,
                              const struct vg_loop_result *res, enum vg_wake_outcome outcome,
                              int cancelled, struct vg_buf *error_text, int *finished)
{
    vigil_error err = {0};
    /* A stopped run answered what it could before the stop, as it did before trial F11; its
     * result first says it was stopped and why: "completed" with what it had answered (often
     * nothing) told a parent nothing of a refund the kill switch stopped (trial M4). */
    int ok = outcome == VG_WAKE_COMPLETED || outcome == VG_WAKE_STOPPED;
    struct vg_buf stopped;
    vg_buf_init(&stopped, 0);
    if (outcome == VG_WAKE_STOPPED)
        vg_buf_printf(&stopped, "[%s before it finished]%s%s", error_text->data,
                      res->final_text && *res->final_text ? "\n" : "",
                      res->final_text ? res->final_text : ""); /* first: a long result is cut */
    struct vg_orch_outcome o = {.status = cancelled ? "cancelled"
                                          : ok      ? "completed"
                                                    : "failed",
                                .text = outcome == VG_WAKE_STOPPED ? stopped.data
                                        : ok                       ? res->final_text
                                                                   : error_text->data,
                                .steps = res->steps,
                                .tokens = res->input_tokens + res->output_tokens,
                                .cost_micros = (int64_t)(res->cost_usd * 1e6),
                                .run_id = res->run_id,
                                .job = outcome == VG_WAKE_COMPLETED && !cancelled ? job : NULL,
                                .finished = finished};
    if (ok && !cancelled && (o.in_doubt = calls_in_doubt(env, job, res)))
        o.job = NULL; /* its task is held, not done: the wake is finished as any other run's */
    vigil_code rc = vg_orch_run_ended(env, job->wake, job->run_key, &o, &err);
    vg_buf_release(&stopped);
    if (rc)
        vg_buf_printf(error_text, "%sthe child's end could not be recorded: %s",
                      error_text->len ? "; " : "", err.message);
    return rc;
}

/* The reason the run record names: the wake's; for a retried or recovered turn, the reason it
 * was first queued for (a spawned child's retry said "user": trial C11 of session 30). */
static const char *run_reason(const struct vg_wake_job *job, int user)
{
    if (!user || vg_wake_reason_is_turn(job->reason))
        return job->reason;
    return vg_wake_reason_is_turn(job->original_reason) ? job->original_reason : "user";
}

/* Whether a turn's input is one vigil built rather than a person's words: a spawned child's
 * goal (spawn), its children's results (children), a task's (task). A person's turn, a re-run's
 * or a resume's prompt (rerun, resume) is the operator's. */
static int built_by_daemon(const struct vg_wake_job *job, int user)
{
    static const char *const built[] = {"spawn", "children", "task"};
    const char *reason = run_reason(job, user);
    for (size_t i = 0; reason && i < VG_ARRAY_LEN(built); i++)
        if (!strcmp(reason, built[i]))
            return 1;
    return 0;
}

/* A model provider's refusal that waiting does not mend: its key (EAUTH, EDENIED), the model's
 * name or the request (EINVAL, ENOTFOUND); models.md lists them as not retried. A retry as a
 * recovery wake would fail the same way until the agent turned dormant (trial F22). */
static int provider_refused(const vigil_error *err)
{
    vigil_code c = err->code;
    return vigil_error_from_provider(err) &&
           (c == VIGIL_EAUTH || c == VIGIL_EDENIED || c == VIGIL_EINVAL || c == VIGIL_ENOTFOUND);
}

/* Whether a hard stop was policy (a spent budget, a kill switch: the loop's stop reasons
 * budget_exceeded:KIND and killed), saying which in error_text, as the run's error says it. */
static int policy_stop(const char *why, struct vg_buf *error_text)
{
    if (!strncmp(why, "budget_exceeded:", 16))
        vg_buf_printf(error_text, "stopped: its %s budget is spent", why + 16);
    else if (!strcmp(why, "killed"))
        vg_buf_puts(error_text, "stopped by a kill switch (vigil kill status)");
    else
        return 0;
    return 1;
}

static enum vg_wake_outcome loop_run(struct vg_wake_runner *r, struct vg_env *env,
                                     const struct vg_wake_job *job, const volatile int *stop,
                                     struct vg_buf *error_text)
{
    vigil_error err = {0};
    vigil_runtime *rt = vg_runtime_from_env(env);
    struct vg_loop_result res = {0};
    char *delta = NULL;
    if (!rt) {
        vg_buf_puts(error_text, "the loop runner needs a runtime's environment");
        return VG_WAKE_FAILED;
    }
    /* What a crashed run of the agent left is settled before this run goes on. */
    struct vg_loop_limits limits = {0}; /* the agent's manifest's */
    vigil_code rc;
    if ((rc = vg_runtime_prepare(rt, &err)) ||
        (rc = vg_runtime_tool_sources_refresh(rt, job->agent_id, &err)) ||
        (rc = vg_runtime_recover_agent(rt, job->agent_id, job->run_key, &err)) ||
        (rc = vg_runtime_agent_limits(env, job->agent_id, &limits, &err)) ||
        (rc = vg_orch_child_limits(env, job->run_key, &limits, &err))) {
        vg_buf_puts(error_text, err.message);
        return failed_or_requeued(env, job, rc);
    }
    /* A user's turn stays one after a recovery or retry (its reason then reads "recovery"):
     * what makes it one is the message and the session it carries. */
    int user = vg_wake_reason_is_turn(job->reason) ||
               (json_is_string(job->seed_input) && job->session_id[0]);
    const char *input = user && json_is_string(job->seed_input) ? json_string_value(job->seed_input)
                                                                : (delta = wake_delta(rt, job));
    if (!input) {
        vg_buf_puts(error_text, "out of memory building the wake input");
        return VG_WAKE_FAILED;
    }
    int recorded = 0;
    if (user && input_recorded(env, job, &recorded, &err)) {
        vg_buf_puts(error_text, err.message);
        vg_free(delta);
        return VG_WAKE_FAILED;
    }
    struct fence_ctx fc = {job, job->wake ? job->wake->cfg.lease_ms : 300000, vg_env_now(env)};
    if (fc.lease_ms <= 0)
        fc.lease_ms = 300000;
    struct stop_ctx sc = {.stop = stop, .env = env, .run_key = job->run_key};
    struct vg_loop_observer obs = {
        .user = &sc, .cancel = stopped, .cancel_reason = cancelled_by, .halt = stop};
    struct vg_loop_input in = {.agent_id = job->agent_id,
                               .thread_id = job->thread_id,
                               .run_key = job->run_key,
                               .operation_key = job->operation_key[0] ? job->operation_key : NULL,
                               .wake_reason = run_reason(job, user),
                               .input = recorded ? NULL : input,
                               .input_kind = !user                        ? "observation"
                                             : built_by_daemon(job, user) ? "daemon"
                                                                          : "user",
                               .model = rt->model,
                               .model_name = vg_run_override_model(job->meta),
                               .config = rt->config,
                               .executor = rt->executor,
                               .memory = &rt->loop_memory,
                               .observer = &obs,
                               .fence = fence,
                               .fence_user = &fc,
                               .limits = limits};
    rc = vg_loop_run(env, &in, &res, &err);
    enum vg_wake_outcome outcome = VG_WAKE_COMPLETED;
    if (rc && provider_refused(&err)) {
        vg_buf_printf(error_text, "%s; not retried: fix the model's key or name, then wake it",
                      err.message);
        outcome = VG_WAKE_FAILED_FINAL;
    } else if (rc) {
        vg_buf_puts(error_text, err.message);
        outcome = failed_or_requeued(env, job, rc);
    } else if (res.end == VG_LOOP_CANCELED && sc.cancelled) {
        vg_buf_printf(error_text, "cancelled by %s", sc.by); /* ended: never run again */
        outcome = VG_WAKE_CANCELLED;
    } else if (res.end == VG_LOOP_CANCELED) {
        outcome = VG_WAKE_INTERRUPTED; /* the daemon is stopping: run it again later */
    } else if (res.end == VG_LOOP_DOOM_LOOP) {
        vg_buf_puts(error_text, "doom loop: the same tool call repeated");
        outcome = VG_WAKE_FAILED;
    } else if (res.end == VG_LOOP_HARD_STOPPED && policy_stop(res.stop_reason, error_text)) {
        outcome = VG_WAKE_STOPPED; /* not retried: waiting for a retry does not refill a budget */
    } else if (res.end == VG_LOOP_MAX_TOKENS) {
        vg_buf_puts(error_text, "the model's answer was cut by max_tokens inside a tool call; "
                                "no call ran (raise model.max_tokens)");
        outcome = VG_WAKE_FAILED;
    }
    int finished = 0;
    if (outcome != VG_WAKE_INTERRUPTED &&
        (rc = child_ended(env, job, &res, outcome, sc.cancelled, error_text, &finished)))
        outcome = failed_or_requeued(env, job, rc);
    vg_loop_result_release(&res);
    vg_free(delta);
    return finished ? VG_WAKE_FINISHED : outcome;
}

/* A model configuration that cannot work (an unknown provider, a hosted API without its key)
 * fails `vigil serve` at start, not each wake it would then run. */
static vigil_code loop_check(struct vg_wake_runner *r, struct vg_env *env, vigil_error *err)
{
    vigil_runtime *rt = vg_runtime_from_env(env);
    (void)r;
    return rt ? vg_runtime_prepare_model(rt, err) : VIGIL_OK;
}

/* Compaction the run made due, once its end is committed and its lease given back: by the
 * runtime's compactor, so the worker's next run does not wait for a summarizer (S0-033). */
static void loop_after(struct vg_wake_runner *r, struct vg_env *env)
{
    vigil_runtime *rt = vg_runtime_from_env(env);
    (void)r;
    if (rt)
        vg_runtime_compact_soon(rt);
}

static const struct vg_wake_runner_methods loop_methods = {1,    "loop",     0,         loop_run,
                                                           NULL, loop_check, loop_after};
static struct vg_wake_runner loop_runner = {&loop_methods};

struct vg_wake_runner *vg_wake_runner_loop(void)
{
    return &loop_runner;
}

vigil_code vg_wake_kill_query(void *user, struct vg_env *env, const char *agent_id, int *on,
                              vigil_error *err)
{
    return vg_kill_active(env, agent_id, NULL, on, err);
}

vigil_code vg_runtime_wake_init(struct vg_wake *w, struct vg_env *env,
                                const struct vg_wake_config *cfg, vigil_error *err)
{
    vigil_code rc = vg_wake_init(w, env, cfg, err);
    /* Kill switches are the tool layer's; a wake under one is skipped before it starts. */
    if (!rc)
        w->kill = vg_wake_kill_query;
    return rc;
}

/* ---- the daemon's host ----------------------------------------------------------------------- */

static vigil_code host_open(const char *store_path, vigil_runtime **out, struct vg_env **env,
                            vigil_error *err)
{
    vigil_runtime_options ro = {.size = sizeof ro, .store_uri = store_path};
    vigil_code rc = vg_runtime_open_with(&ro, vg_clock_real(), NULL, out, err);
    if (!rc) {
        int kib = VG_STORE_DAEMON_CACHE_KIB;
        *env = &(*out)->env;
        (*out)->in_daemon = 1;
        (void)vg_store_control((*env)->store, VG_STORE_CTRL_CACHE_KIB, &kib, NULL); /* a hint */
    }
    return rc;
}

/* The runner builds the model before a run's first model call, so it is known by the first
 * place a run could park. */
static int host_runs_may_interleave(vigil_runtime *rt)
{
    return !rt->model || !(vg_model_caps(rt->model) & VG_MODEL_CAP_SERIAL);
}

/* High-risk children whose approval expired unanswered are denied, their parents woken; tasks
 * added since the last look are dispatched (orch/task.h: vg_task_dispatch_added); runs past
 * their deadline are cancelled (watchdog.c); what is past its retention is pruned
 * (retention.c). */
static vigil_code host_sweep(struct vg_env *env, struct vg_wake *w, vigil_error *err)
{
    vigil_code rc = vg_orch_approvals_sweep(env, w, NULL, err);
    if (!rc) /* tasks added while it runs start by themselves (trial L9) */
        rc = vg_task_dispatch_added(env, w, &env->task_stamp_seen, err);
    if (!rc)
        rc = vg_runtime_watchdog(env, NULL, err);
    return rc ? rc : vg_runtime_retention_tick(env, err); /* at retention.interval */
}

static const struct vg_wake_host wake_host = {
    .open = host_open,
    .runs_may_interleave = host_runs_may_interleave,
    .kill = vg_wake_kill_query,
    .loop_runner = &loop_runner,
    .sweep = host_sweep,
};

const struct vg_wake_host *vg_runtime_wake_host(void)
{
    return &wake_host;
}
