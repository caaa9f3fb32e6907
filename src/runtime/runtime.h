/*
 * runtime.h: the runtime behind include/vigil.h: it owns the store, the id source and the
 * notifier, and hands modules their struct vg_env. Tests open runtimes with their own clock and
 * seeded ids through vg_runtime_open_with. The handle's fields are the runtime's own
 * (runtime_int.h): what includes this header gets no layer above env with it.
 */
#ifndef VG_RUNTIME_H
#define VG_RUNTIME_H

#include "env/env.h"

#include <jansson.h>

struct vg_loop_limits;

/*
 * Open a runtime with an explicit clock (borrowed: must outlive the runtime) and id source
 * (owned by the runtime from this call on, even when it fails; NULL: UUIDv7 from the clock).
 */
vigil_code vg_runtime_open_with(const vigil_runtime_options *opts, struct vg_clock *clock,
                                struct vg_ids *ids, vigil_runtime **out, vigil_error *err);

/* The runtime's ports (its struct vg_env, runtime_int.h). */
struct vg_env *vg_runtime_env(vigil_runtime *rt);

/* The runtime an env belongs to (NULL for an env that is not a runtime's). */
static inline vigil_runtime *vg_runtime_from_env(struct vg_env *env)
{
    return (vigil_runtime *)env->owner;
}

/* Build, on first use, what a run needs: the model from config, the gated tool executor
 * (recovering operations left in doubt) and the loop's memory. */
vigil_code vg_runtime_prepare(vigil_runtime *rt, vigil_error *err);
/* The runtime's tool executor, built on first use (tool_api.c): the built-in tools, the memory
 * tools, the command tools the config and agents' manifests declare, and the config's MCP
 * servers. Borrowed; the runtime frees it on close. */
struct vg_tool_executor;
vigil_code vg_runtime_tools(vigil_runtime *rt, struct vg_tool_executor **out, vigil_error *err);
/* A new executor (owned) with the runtime's own tools only (built-in, orch, memory,
 * execute_code): the names no declared command tool may take. */
vigil_code vg_runtime_own_tools(vigil_runtime *rt, struct vg_tool_executor **out, vigil_error *err);
/* The embedder the runtime's config names (embedder.c), its config loaded on first need: every
 * memory manager of the runtime uses it. *out owned (vg_embed_close). */
struct vg_embedder;
vigil_code vg_runtime_embedder(vigil_runtime *rt, struct vg_embedder **out, vigil_error *err);
/* Only the model from config (what `vigil serve` checks before it serves). */
vigil_code vg_runtime_prepare_model(vigil_runtime *rt, vigil_error *err);
/* After a run: run compaction jobs it made due (the deterministic summarizer when the model
 * is scripted). Failures are not reported: compaction never fails a run. Each job's commit
 * holds its agent's lease (docs/scale-out.md); _of: the run still holds agent_id's lease at
 * epoch (a wake's run before its finish), and that agent's jobs commit under it. */
void vg_runtime_after_run(vigil_runtime *rt);
void vg_runtime_after_run_of(vigil_runtime *rt, const char *agent_id, int64_t epoch);
/* The model and the memory manager from config, without the tools (what compaction needs). */
vigil_code vg_runtime_prepare_memory(vigil_runtime *rt, vigil_error *err);
/* After a run has ended (its lease given back): ask for a compaction pass and return at once;
 * a thread of the runtime's own does it on a runtime of its own (compactor.c), so the caller's
 * next run does not wait for a summarizer. A store no second connection can open (":memory:"):
 * the pass runs here, as vg_runtime_after_run. */
void vg_runtime_compact_soon(vigil_runtime *rt);
/* Wait until no pass asked for is due or under way (vigil_runtime_close does, then stops the
 * thread with vg_runtime_compactor_stop). */
void vg_runtime_compact_settle(vigil_runtime *rt);
void vg_runtime_compactor_stop(vigil_runtime *rt);

/*
 * The public API's check of an agent argument, before anything is read for it or written:
 * VIGIL_OK when agent_id names a stored agent (any lifecycle, destroyed included), ENOTFOUND
 * `no agent "X"` otherwise (an empty or malformed id too: it names no agent). NULL is EINVAL;
 * functions whose agent is an optional filter check only a given one.
 */
vigil_code vg_runtime_agent_check(vigil_runtime *rt, const char *agent_id, vigil_error *err);

/* An agent's export and import with its past (move.c; docs/storage.md): the journal, the
 * agent's own records and their checksums. Import's *out_json (owned) says what it added and
 * whether the checksums were there: {"agent_id","records","agent_records","agent","checksums"}. */
vigil_code vg_runtime_move_export(vigil_runtime *rt, const char *agent_id, const char *folder,
                                  int64_t *out_count, vigil_error *err);
vigil_code vg_runtime_move_import(vigil_runtime *rt, const char *agent_id, const char *folder,
                                  char **out_json, vigil_error *err);

/* The loop limits the agent's manifest set (limits.c); the others stay 0 (the loop's
 * defaults). ENOTFOUND for an unknown agent. */
vigil_code vg_runtime_agent_limits(struct vg_env *env, const char *agent_id,
                                   struct vg_loop_limits *out, vigil_error *err);

/* The watchdog (watchdog.c): each run under way past its start + its timeout (the agent's
 * limits, a child's max runtime, else VG_LOOP_TIMEOUT_MS) + VG_WATCHDOG_GRACE_MS is cancelled
 * by "watchdog" (*cancelled: how many, may be NULL). The daemon's sweep calls it each second. */
#define VG_WATCHDOG_GRACE_MS 60000
vigil_code vg_runtime_watchdog(struct vg_env *env, int *cancelled, vigil_error *err);

/* The MCP servers declared in the config file and in the manifests of live agents
 * (mcp_servers.c), merged by name (*out owned). A server declared twice the same way is one
 * server; declared differently, it is left out and said in clashes (borrowed object: name ->
 * {"message", "builtin": false}). Loads rt->config when not loaded yet. */
vigil_code vg_runtime_mcp_servers(vigil_runtime *rt, json_t **out, json_t *clashes,
                                  vigil_error *err);

/* The declared tool sources (tool_sources.c): the command tools and MCP servers of the config
 * file and of the agents' manifests. _sync makes x serve what is declared now (new sources
 * added, changed ones replaced, a changed MCP server stopped and started again on first use,
 * unchanged ones left alone); nothing starts. _refresh, at the start of each of an agent's
 * runs, syncs when that agent's declarations differ from what is served or from what they were
 * at its last run, so an agent applied or changed while `vigil serve` runs has its tools by its
 * next run. A name declared differently by two agents (or a command tool named like a built-in)
 * is served to no agent; _refresh fails (EEXISTS, naming both) only for an agent that declares
 * it or whose tools allowlist reaches it, so one manifest does not stop every agent. */
struct vg_tool_executor;
vigil_code vg_runtime_tool_sources_sync(vigil_runtime *rt, struct vg_tool_executor *x,
                                        vigil_error *err);
vigil_code vg_runtime_tool_sources_refresh(vigil_runtime *rt, const char *agent_id,
                                           vigil_error *err);
void vg_runtime_tool_sources_free(vigil_runtime *rt);

/* Turn a JSON value (stolen) into owned compact text for the public API. */
vigil_code vg_runtime_json_out(json_t *value, char **out, vigil_error *err);

#endif
