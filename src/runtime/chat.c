/*
 * chat.c: the model and chat sections of include/vigil.h: the runtime's model provider, built
 * from the config on first use, and one user turn through the agent loop.
 */
#include "base/common.h"

#include "base/hash.h"
#include "base/json.h"
#include "config/config.h"
#include "loop/loop.h"
#include "memory/loop_adapter.h"
#include "memory/memory.h"
#include "model/model.h"
#include "runtime/recover.h"
#include "runtime/runtime_int.h"
#include "tool/tool.h"
#include "wake/wake.h"

static vigil_code ensure_model(vigil_runtime *rt, vigil_error *err)
{
    vigil_code rc;
    if (rt->model)
        return VIGIL_OK;
    if (!rt->config && (rc = vg_config_load(rt->config_path, &rt->config, err)))
        return rc;
    return vg_model_from_config(rt->config, rt->env.clock, rt->env.ids, &rt->model, err);
}

/* The gated tool executor, built on first use; its first use settles operations a crash left
 * in doubt, so no side effect is repeated and none is lost silently, and closes the runs of
 * agents whose process died (recover.c). */
static vigil_code ensure_tools(vigil_runtime *rt, vigil_error *err)
{
    struct vg_tool_executor *tools = NULL;
    vigil_code rc;
    if (rt->executor)
        return VIGIL_OK;
    if ((rc = vg_runtime_tools(rt, &tools, err)) || (rc = vg_runtime_recover_start(rt, err)))
        return rc;
    vg_tool_loop_executor(tools, &rt->loop_exec);
    rt->executor = &rt->loop_exec;
    return VIGIL_OK;
}

/* The lease a run that compacts after itself still holds (agent_id NULL: none). */
struct held_lease {
    const char *agent_id;
    int64_t epoch;
};

/* Compaction's commit writes the agent's summary, cursor and state: under its lease, like a
 * run's writes (docs/scale-out.md). The run's own agent: under the run's lease, checked at its
 * epoch; another agent: held for the commit's transaction, unless a run holds it. */
static vigil_code compaction_hold(void *user, struct vg_env *env, const char *agent_id,
                                  int *held_by_run, vigil_error *err)
{
    const struct held_lease *own = user;
    if (own && own->agent_id && !strcmp(own->agent_id, agent_id))
        return vg_wake_lease_check(env, agent_id, own->epoch, err);
    int got = 0;
    vigil_code rc = vg_wake_lease_hold_tx(env, agent_id, "compaction", &got, err);
    if (rc == VIGIL_ECONFLICT || (!rc && !got)) {
        *held_by_run = 1; /* only this puts the job off; a busy store fails the attempt */
        return VIGIL_OK;
    }
    return rc;
}

static vigil_code ensure_memory(vigil_runtime *rt, vigil_error *err)
{
    struct vg_embedder *emb = NULL;
    vigil_code rc;
    if (rt->memory)
        return VIGIL_OK;
    /* The embedder the config names (loaded by ensure_model already, else here). */
    if ((rc = vg_runtime_embedder(rt, &emb, err)) ||
        (rc = vg_memory_loop_new(&rt->env, emb, &rt->memory, err)))
        return rc;
    vg_memory_loop_interface(rt->memory, &rt->loop_memory);
    vg_memory_loop_hold(rt->memory, compaction_hold);
    return VIGIL_OK;
}

vigil_code vg_runtime_prepare_model(vigil_runtime *rt, vigil_error *err)
{
    return ensure_model(rt, err);
}

vigil_code vg_runtime_prepare_memory(vigil_runtime *rt, vigil_error *err)
{
    vigil_code rc = ensure_model(rt, err);
    return rc ? rc : ensure_memory(rt, err);
}

vigil_code vg_runtime_prepare(vigil_runtime *rt, vigil_error *err)
{
    vigil_code rc;
    if ((rc = ensure_model(rt, err)) || (rc = ensure_tools(rt, err)) ||
        (rc = ensure_memory(rt, err)))
        return rc;
    return VIGIL_OK;
}

void vg_runtime_after_run(vigil_runtime *rt)
{
    vg_runtime_after_run_of(rt, NULL, 0);
}

void vg_runtime_after_run_of(vigil_runtime *rt, const char *agent_id, int64_t epoch)
{
    struct held_lease own = {agent_id, epoch};
    /* A scripted model is not asked to summarize (its cassette is the conversation); the
     * deterministic summarizer does it. */
    vigil_error ignore = {0};
    if (!rt->memory || !rt->model)
        return;
    struct vg_model *summarizer =
        (vg_model_caps(rt->model) & VG_MODEL_CAP_SCRIPTED) ? NULL : rt->model;
    vg_memory_loop_compact(rt->memory, summarizer, 4, &own, NULL, &ignore);
    /* Blocks written while the embedder was down get their vectors now that it may be back. */
    vg_memory_loop_embed_pending(rt->memory, 16, NULL, &ignore);
}

/*
 * A turn's upkeep (vigil_runtime_defer_upkeep, vigil.h): the compaction check of its thread,
 * which the loop makes after a run's close, and the compactor asked for a pass. Neither is part
 * of what the turn confirms (its run, messages and outcome are durable before it returns), so
 * a caller that answers someone first loses nothing by a crash before it: the thread's next
 * run checks it again. The check runs as the loop runs it: its reads in one read transaction,
 * its writes tagged with the agent (vg_loop_run).
 */
static void upkeep_run(vigil_runtime *rt)
{
    vigil_error ignore = {0};
    rt->upkeep.due = 0; /* first: nothing it calls can run it again */
    if (rt->upkeep.check && rt->loop_memory.after_run) {
        const char *source = rt->env.notify.source;
        rt->env.notify.source = rt->upkeep.agent_id;
        vg_store_read_batch(rt->env.store, 1);
        rt->loop_memory.after_run(rt->loop_memory.self, &rt->env, rt->upkeep.agent_id,
                                  rt->upkeep.thread_id, rt->upkeep.context_tokens, &ignore);
        vg_store_read_batch(rt->env.store, 0);
        rt->env.notify.source = source;
    }
    if (rt->upkeep.ask)
        vg_runtime_compact_soon(rt);
}

void vigil_runtime_defer_upkeep(vigil_runtime *rt, int on)
{
    if (rt)
        rt->upkeep_deferred = on != 0;
}

int vigil_runtime_upkeep(vigil_runtime *rt)
{
    if (!rt || !rt->upkeep.due)
        return 0;
    upkeep_run(rt);
    return 1;
}

/* The turn's upkeep, now or left for vigil_runtime_upkeep: check, its run began (the loop did
 * not check its thread: chat_turn took the check out); ask, the turn succeeded. */
static void upkeep_after_turn(vigil_runtime *rt, const char *agent_id, const char *thread_id,
                              int64_t context_tokens, int check, int ask)
{
    vigil_runtime_upkeep(rt); /* one left waiting (turns on fibers, vigil_chat_many) goes first */
    rt->upkeep.check = check;
    rt->upkeep.ask = ask;
    rt->upkeep.context_tokens = context_tokens;
    int fits = snprintf(rt->upkeep.agent_id, sizeof rt->upkeep.agent_id, "%s", agent_id) <
                   (int)sizeof rt->upkeep.agent_id &&
               snprintf(rt->upkeep.thread_id, sizeof rt->upkeep.thread_id, "%s", thread_id) <
                   (int)sizeof rt->upkeep.thread_id;
    rt->upkeep.due = check || ask;
    if (rt->upkeep.due && (!rt->upkeep_deferred || !fits))
        upkeep_run(rt);
}

vigil_code vigil_model_describe(vigil_runtime *rt, char **out_json, vigil_error *err)
{
    vigil_code rc = ensure_model(rt, err);
    if (rc)
        return rc;
    const char *name = vg_model_name(rt->model);
    int scripted = (vg_model_caps(rt->model) & VG_MODEL_CAP_SCRIPTED) != 0;
    const char *cassette =
        scripted ? vg_config_get_string(rt->config, "model.cassette", NULL) : NULL;
    json_t *v = json_pack("{s:s, s:s?, s:b, s:s?}", "provider", name, "model",
                          vg_model_default_model(rt->model), "scripted", scripted, "cassette",
                          cassette && *cassette ? cassette : NULL);
    if (!v)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory describing the model");
    return vg_runtime_json_out(v, out_json, err);
}

struct chat_bridge {
    const vigil_chat_callbacks *cb;
};

/* A chat turn holds the agent's lease; every write phase checks it is still ours, and renews
 * it when half of it has passed, so a long turn keeps the agent. */
#define CHAT_LEASE_MS 300000

struct chat_fence {
    const char *agent_id;
    int64_t epoch;
    int64_t renewed_ms;
};

/*
 * The lease is taken and given back as group commits on a local store (SQLite; a server store
 * takes it durably, lease_take_lazily): no log sync of their own. A power loss
 * can take either only while nothing that needed it is durable: the turn's first durable commit
 * (before a tool acts, or its close) syncs the log, and with it the take before it; a lost
 * give-back leaves a lease whose holder is gone, which the next taker finds free at once
 * (queue.c, lease_held). A process crash loses neither: they are committed. A run that closes
 * gives the lease back in its close's transaction instead (chat_close). (A PostgreSQL
 * server that crashes may lose a give-back while its process lives on: the lease then runs to
 * its expiry, as one does whose give-back found the server down.)
 */
static vigil_code lease_take_lazily(vigil_runtime *rt, const char *agent_id, const char *holder,
                                    int64_t *epoch, int *got, vigil_error *err)
{
    /* A server store (PostgreSQL) can lose a commit it did not flush while this process lives
     * on: a lost take would let another turn take the same epoch and pass every fence beside
     * this one. There the take is durable; only a local store's loss takes this process too. */
    int durable = vg_store_durable(rt->env.store);
    vigil_code rc = vg_store_durable_commits(
        rt->env.store, vg_store_loses_group_commits_alone(rt->env.store), err);
    if (!rc)
        rc = vg_wake_lease_take(&rt->env, agent_id, holder, CHAT_LEASE_MS, epoch, got, err);
    (void)vg_store_durable_commits(rt->env.store, durable, NULL);
    return rc;
}

static void lease_give_back_lazily(vigil_runtime *rt, const char *agent_id, int64_t epoch)
{
    int durable = vg_store_durable(rt->env.store);
    if (vg_store_durable_commits(rt->env.store, 0, NULL) == VIGIL_OK)
        vg_wake_lease_give_back(&rt->env, agent_id, epoch, NULL);
    (void)vg_store_durable_commits(rt->env.store, durable, NULL);
}

static vigil_code chat_fence(void *user, struct vg_env *env, vigil_error *err)
{
    struct chat_fence *f = user;
    int64_t now = vg_env_now(env);
    if (now - f->renewed_ms > CHAT_LEASE_MS / 2) {
        f->renewed_ms = now;
        return vg_wake_lease_renew(env, f->agent_id, f->epoch, CHAT_LEASE_MS, err);
    }
    return vg_wake_lease_check(env, f->agent_id, f->epoch, err);
}

/* The lease goes back with the run's close, in its transaction (vg_loop_input.on_close): one
 * commit, durable as the close is, instead of a write transaction of its own after it. */
static vigil_code chat_close(void *user, struct vg_env *env, vigil_error *err)
{
    const struct chat_fence *f = user;
    return vg_wake_lease_give_back(env, f->agent_id, f->epoch, err);
}

static void on_text(void *user, const char *delta, size_t len)
{
    struct chat_bridge *b = user;
    if (b->cb->on_text)
        b->cb->on_text(b->cb->user, delta, len);
}

static void on_tool_start(void *user, const char *name, const char *args)
{
    struct chat_bridge *b = user;
    if (b->cb->on_tool)
        b->cb->on_tool(b->cb->user, name, args);
}

static void on_tool_done(void *user, const char *name, int is_error, const char *content)
{
    struct chat_bridge *b = user;
    if (b->cb->on_tool_done)
        b->cb->on_tool_done(b->cb->user, name, is_error, content);
}

static int on_cancel(void *user)
{
    struct chat_bridge *b = user;
    return b->cb->cancel ? b->cb->cancel(b->cb->user) : 0;
}

/* A turn that failed after its run began (a provider error, a cut stream) left that run in the
 * journal, ended failed: its id goes first in err->detail as "run_id=ID" (vigil.h), so the
 * caller can link the error to it; a detail already there follows after "; ". */
static void name_failed_run(vigil_error *err, const char *run_id)
{
    char was[sizeof err->detail];
    if (!err)
        return;
    snprintf(was, sizeof was, "%s", err->detail);
    vg_error_detail(err, "run_id=%s%s%.200s", run_id, was[0] ? "; " : "", was);
}

/* A keyed turn's record (kind chat_turn, id its run key): the text's digest and the outcome it
 * answered, written once the turn completed, so a retry with the same key answers that outcome
 * instead of running the turn again (vigil_chat_keyed). */
#define CHAT_TURN_KIND "chat_turn"

/* The outcome a completed turn of this run key answered (*out_json owned, "replayed" added), or
 * NULL when none did; EINVAL when the key was used for another text. */
static vigil_code keyed_outcome(vigil_runtime *rt, const char *run_key, const char *turn_key,
                                const char *text, char **out_json, vigil_error *err)
{
    json_t *b = NULL;
    char digest[65];
    const char *parts[] = {text};
    vigil_error probe = {0}; /* not there: the key's first turn, no error of the caller's */
    vigil_code rc = vg_env_get_json(&rt->env, CHAT_TURN_KIND, run_key, &b, NULL, &probe);
    *out_json = NULL;
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK;
    if (rc) {
        vg_error_copy(err, &probe);
        return rc;
    }
    vg_sha256_hex_parts(digest, parts, 1);
    json_t *outcome = json_object_get(b, "outcome");
    const char *was = json_string_value(json_object_get(b, "text_sha256"));
    if (!was || strcmp(digest, was) != 0)
        rc = VG_FAIL(err, VIGIL_EINVAL,
                     "turn key \"%s\" was used for another text: a retry sends the same text, a "
                     "new turn a new key",
                     turn_key);
    else if (!json_is_object(outcome) || json_object_set_new(outcome, "replayed", json_true()))
        rc = VG_FAIL(err, VIGIL_ECORRUPT, "chat turn \"%s\" has no outcome", turn_key);
    else
        rc = vg_runtime_json_out(json_incref(outcome), out_json, err);
    json_decref(b);
    return rc;
}

/* Keeps a keyed turn's outcome for its retries. A failure is not the turn's: a retry then runs
 * the turn again, under the same run key (its tool calls answered from their records). */
static void keep_keyed_outcome(vigil_runtime *rt, const char *agent_id, const char *run_key,
                               const char *text, const char *out_json)
{
    char digest[65];
    const char *parts[] = {text};
    vigil_error ignored = {0};
    vg_sha256_hex_parts(digest, parts, 1);
    json_t *b =
        json_pack("{s:s, s:o}", "text_sha256", digest, "outcome", json_loads(out_json, 0, NULL));
    if (b)
        (void)vg_env_put_json(&rt->env, CHAT_TURN_KIND, run_key, agent_id, "", "",
                              vg_env_now(&rt->env), b, 0, &ignored);
    json_decref(b);
}

/* What a turn reads before it takes the agent's lease: that the agent exists, the runtime's
 * parts (built at the first turn), the agent's tool sources and limits. One read batch: the
 * agent's record is read by all three, and each read on its own takes the store's read lock
 * apart (two fcntl calls a read transaction on SQLite). */
static vigil_code turn_reads(vigil_runtime *rt, const char *agent_id, struct vg_loop_limits *limits,
                             vigil_error *err)
{
    vigil_code rc;
    vg_store_read_batch(rt->env.store, 1);
    if (!(rc = vg_runtime_agent_check(rt, agent_id, err)) && !(rc = vg_runtime_prepare(rt, err)) &&
        !(rc = vg_runtime_tool_sources_refresh(rt, agent_id, err)))
        rc = vg_runtime_agent_limits(&rt->env, agent_id, limits, err);
    vg_store_read_batch(rt->env.store, 0);
    return rc;
}

/* A completed turn's outcome (vigil.h): written as text, the keys in the canonical order the
 * runtime's other answers use, with no jansson tree built only to be dumped. */
static vigil_code turn_outcome(vigil_runtime *rt, const struct vg_loop_result *res, char **out_json,
                               vigil_error *err)
{
    struct vg_buf usage, cost, b;
    vg_buf_init(&usage, 0);
    vg_buf_init(&cost, 0);
    vg_buf_init(&b, 0);
    struct vg_jfield u[] = {{"input_tokens", VG_JF_INT, NULL, res->input_tokens},
                            {"output_tokens", VG_JF_INT, NULL, res->output_tokens},
                            {"cached_tokens", VG_JF_INT, NULL, res->cached_tokens}};
    int bad = vg_json_put_fields(&usage, u, VG_ARRAY_LEN(u));
    vg_json_put_real(&cost, res->cost_usd);
    int scripted = res->scripted || (vg_model_caps(rt->model) & VG_MODEL_CAP_SCRIPTED);
    struct vg_jfield f[] = {
        {"run_id", VG_JF_STR, res->run_id, 0},
        {"reply", VG_JF_STR, res->final_text ? res->final_text : "", 0},
        {"end", VG_JF_STR, vg_loop_end_name(res->end), 0},
        {"steps", VG_JF_INT, NULL, res->steps},
        {"tool_calls", VG_JF_INT, NULL, res->tool_calls},
        {"usage", VG_JF_RAW, usage.data, 0},
        {"cost_usd", VG_JF_RAW, cost.data, 0},
        {"scripted", VG_JF_BOOL, NULL, scripted},
        {"stop_reason", VG_JF_STR, res->stop_reason[0] ? res->stop_reason : NULL, 0}};
    if (!bad && !usage.fail && !cost.fail)
        bad = vg_json_put_fields(&b, f, VG_ARRAY_LEN(f));
    vigil_code rc = VIGIL_OK;
    if (bad || usage.fail || cost.fail || b.fail) {
        rc = bad ? VG_FAIL(err, VIGIL_EPROVIDER, "the model's reply is not valid UTF-8")
                 : VG_FAIL(err, VIGIL_ENOMEM, "out of memory reporting a chat turn");
        vg_buf_release(&b);
    } else {
        *out_json = vg_buf_detach(&b, NULL);
    }
    vg_buf_release(&usage);
    vg_buf_release(&cost);
    return rc;
}

static vigil_code chat_turn(vigil_runtime *rt, const char *agent_id, const char *session,
                            const char *turn_key, const char *text, const vigil_chat_callbacks *cb,
                            char **out_json, vigil_error *err)
{
    char thread[256], turn[37], run_key[65], keyed[80], *replay = NULL;
    struct vg_loop_result res = {0};
    vigil_code rc;
    if (!rt || !agent_id || !text || !out_json)
        return VG_FAIL(err, VIGIL_EINVAL, "chat needs a runtime, an agent, text and an output");
    if (session && (!*session || strlen(session) > 64 || strchr(session, ':')))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid session name \"%s\": 1 to 64 bytes without ':'",
                       session);
    if (turn_key && (!*turn_key || strlen(turn_key) > 64 || strchr(turn_key, ':')))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid turn key \"%.80s\": 1 to 64 bytes without ':'",
                       turn_key);
    vigil_runtime_upkeep(rt);           /* the last turn's, when its caller did not ask for it */
    struct vg_loop_limits limits = {0}; /* the agent's manifest's */
    if ((rc = turn_reads(rt, agent_id, &limits, err)))
        return rc;
    if (!session)
        session = "default";
    vg_loop_session_thread(thread, sizeof thread, agent_id, session);
    vg_ids_new(rt->env.ids, turn);
    snprintf(keyed, sizeof keyed, "key:%s", turn_key ? turn_key : "");
    vg_loop_user_run_key(run_key, agent_id, session, turn_key ? keyed : turn);

    /* Single flight: wait while another run (the daemon, another chat) holds the agent. */
    struct chat_fence fence = {.agent_id = agent_id};
    char holder[64];
    int got = 0;
    snprintf(holder, sizeof holder, "chat:%s", turn);
    for (int waited = 0;; waited++) {
        if ((rc = lease_take_lazily(rt, agent_id, holder, &fence.epoch, &got, err)))
            return rc;
        if (got)
            break;
        if (cb && cb->cancel && cb->cancel(cb->user))
            return VG_FAIL(err, VIGIL_ECANCELED, "canceled while agent \"%s\" was busy", agent_id);
        if (waited >= 600)
            return VG_FAIL(err, VIGIL_EBUSY,
                           "agent \"%s\" is busy with another run; try again shortly", agent_id);
        vg_clock_sleep_ms(rt->env.clock, 100);
    }
    fence.renewed_ms = vg_env_now(&rt->env);
    /* A run the agent's last holder left (its process died) is settled before this one; a
     * keyed turn that already completed answers as it did (read under the lease: a retry sent
     * while the first try runs waits for it). */
    vg_store_read_batch(rt->env.store, 1); /* one read transaction unless something is settled */
    if (!(rc = vg_runtime_recover_agent(rt, agent_id, run_key, err)) && turn_key)
        rc = keyed_outcome(rt, run_key, turn_key, text, &replay, err);
    vg_store_read_batch(rt->env.store, 0);
    if (rc || replay) {
        lease_give_back_lazily(rt, agent_id, fence.epoch);
        if (replay)
            *out_json = replay;
        return rc;
    }

    struct chat_bridge bridge = {cb};
    /* Only what the caller watches: an on_text makes the model stream, which costs more than
     * one complete answer and is worth it only to someone watching the words arrive. */
    struct vg_loop_observer obs = {.user = &bridge};
    if (cb) {
        obs.on_text = cb->on_text ? on_text : NULL;
        obs.on_tool_start = cb->on_tool ? on_tool_start : NULL;
        obs.on_tool_done = cb->on_tool_done ? on_tool_done : NULL;
        obs.cancel = cb->cancel ? on_cancel : NULL;
    }
    /* The thread's compaction check is the turn's upkeep, after it (upkeep_after_turn). */
    struct vg_loop_memory memory = rt->loop_memory;
    memory.after_run = NULL;
    struct vg_loop_input in = {.agent_id = agent_id,
                               .thread_id = thread,
                               .run_key = run_key,
                               .wake_reason = "user",
                               .input = text,
                               .model = rt->model,
                               .config = rt->config,
                               .executor = rt->executor,
                               .memory = &memory,
                               .observer = cb ? &obs : NULL,
                               .fence = chat_fence,
                               .fence_user = &fence,
                               .on_close = chat_close,
                               .limits = limits};
    rc = vg_loop_run(&rt->env, &in, &res, err);
    if (!res.closed_with) /* the run did not start, or its close failed */
        lease_give_back_lazily(rt, agent_id, fence.epoch);
    if (rc != VIGIL_OK && res.run_id[0])
        name_failed_run(err, res.run_id);
    if (rc == VIGIL_OK)
        rc = turn_outcome(rt, &res, out_json, err);
    if (!rc && turn_key && (res.end == VG_LOOP_COMPLETED || res.end == VG_LOOP_SOFT_STOPPED))
        keep_keyed_outcome(rt, agent_id, run_key, text, *out_json);
    /* After the turn, and not in its time: what grew past its budget is summarized by the
     * runtime's compactor, while the caller has the answer already (compactor.c); a caller
     * that asked runs the check and the call itself, once it has answered. */
    upkeep_after_turn(rt, agent_id, thread, res.context_tokens, res.run_id[0] != '\0',
                      rc == VIGIL_OK);
    vg_loop_result_release(&res);
    return rc;
}

vigil_code vigil_chat(vigil_runtime *rt, const char *agent_id, const char *session,
                      const char *text, const vigil_chat_callbacks *cb, char **out_json,
                      vigil_error *err)
{
    return chat_turn(rt, agent_id, session, NULL, text, cb, out_json, err);
}

vigil_code vigil_chat_keyed(vigil_runtime *rt, const char *agent_id, const char *session,
                            const char *turn_key, const char *text, const vigil_chat_callbacks *cb,
                            char **out_json, vigil_error *err)
{
    return chat_turn(rt, agent_id, session, turn_key, text, cb, out_json, err);
}

/* The refusal a turn's ending amounts to (vigil.h). The agent's own limits (max_steps, timeout,
 * ...) end a turn as designed: an answer. Policy (the gate's stop reasons) is a refusal. */
static vigil_code turn_end_code(const char *end, const char *why, const char **message)
{
    if (!strcmp(end, "doom_loop")) {
        *message = "the run failed: the same tool call repeated (doom loop)";
        return VIGIL_ERROR;
    }
    if (!strcmp(end, "max_tokens")) {
        *message = "the model's answer was cut by max_tokens inside a tool call, so no call ran; "
                   "raise model.max_tokens or ask for less at once";
        return VIGIL_EPROVIDER;
    }
    if (strcmp(end, "hard_stopped") || !why)
        return VIGIL_OK;
    if (!strncmp(why, "killed", 6)) {
        *message = "the turn was stopped: a kill switch is on";
        return VIGIL_EKILLED;
    }
    if (!strncmp(why, "budget_exceeded", 15)) {
        *message = "the turn was stopped: the agent's budget is spent";
        return VIGIL_EBUDGET;
    }
    return VIGIL_OK;
}

VIGIL_API vigil_code vigil_turn_code(const char *outcome_json, const char **message)
{
    const char *unused;
    if (!message)
        message = &unused;
    *message = NULL;
    json_t *outcome = outcome_json ? json_loads(outcome_json, 0, NULL) : NULL;
    if (!json_is_object(outcome)) {
        json_decref(outcome);
        *message = "a turn's outcome must be a JSON object";
        return VIGIL_EINVAL;
    }
    const char *end = json_string_value(json_object_get(outcome, "end"));
    const char *why = json_string_value(json_object_get(outcome, "stop_reason"));
    vigil_code code = end ? turn_end_code(end, why, message) : VIGIL_OK;
    json_decref(outcome);
    return code;
}
