/*
 * orch.h: the orchestrator (docs/orchestration.md). Agents
 * discover each other with `list_available_agents` and delegate with `spawn_agents`, which only
 * emits typed spawn requests: the orchestrator alone admits or denies each one (deny by
 * default) and instantiates the child run as a wake of the child agent, under the child's own
 * manifest. A parent holds nothing while its children run: its run ends, and the last child to
 * finish enqueues the parent's next wake with every child's result. docs/orchestration.md.
 *
 * Record kinds (store/port.h columns: owner, k1, k2, seq):
 *   spawn_call      id=<group>          owner=parent agent  k1=waiting (a child it queued has
 *                   not started yet) | admitted (any request admitted or queued) |
 *                   awaiting_approval (else any awaiting) | denied (all denied)
 *                   k2=parent run key   seq=ms; body {group, depth, parent_run_key,
 *                   decisions: [{index, decision, reason, child_agent, run_key, request}],
 *                   waiting?: [spawn_child body, status waiting]}: every decision of one call,
 *                   written once at its end, and the children it queued for a slot: each gets
 *                   its spawn_child record only when it starts (k1 becomes admitted with the
 *                   last). Readers (child.c, tree.c) take a kept child for a waiting record.
 *   spawn_decision  id=<group>:<index>:approval  owner, k2, seq as above, k1=admitted|denied:
 *                   a person's answer to a high-risk request, a second decision of it. A store
 *                   written before spawn_call also holds each decision of a call as one of these
 *                   (id=<group>:<index>, k1 also awaiting_approval); readers (tree.c) read both
 *   spawn_child     id=child run key    owner=parent agent  k1=approval|waiting (approved, or
 *                   a store written before schema 18)|running|completed|failed|cancelled|denied
 *                   k2=group            seq=ms admitted (the order waiting children start in)
 * A group is one spawn_agents call: the first 32 hex digits of its operation id, so a replayed
 * call finds the same group and the same child run keys (no child runs twice).
 */
#ifndef VG_ORCH_H
#define VG_ORCH_H

#include "tool/tool.h" /* brings struct vg_env */
#include "wake/wake.h"

#include <jansson.h>

/* Depth of a spawned run: 1 for a top-level agent's child. Never more than this. */
#define VG_ORCH_MAX_DEPTH 2
/* Children of one parent running at once (manifest spawn.max_concurrent overrides, 1..64). */
#define VG_ORCH_PER_PARENT_DEFAULT 4
/* Spawned children running at once in the whole store. */
#define VG_ORCH_GLOBAL_DEFAULT 64

/* ---- admission (admit.c): a pure decision over facts gathered by the caller ---------------- */

enum vg_orch_verdict {
    VG_ORCH_DENIED = 0,       /* the default */
    VG_ORCH_ADMITTED,         /* start now */
    VG_ORCH_QUEUED,           /* admitted; starts when a slot of its parent (or the store) frees */
    VG_ORCH_AWAITING_APPROVAL /* high risk: an approval is asked; admitted or denied by a person */
};

/* What admission looks at for one request. Zero-initialize: every zero denies. */
struct vg_orch_facts {
    int spawn_enabled;      /* the parent's manifest: spawn.enabled */
    int granted;            /* depth > 0: the parent's own spawn granted spawn_agents */
    int parent_depth;       /* 0: the parent is not a spawned run */
    int child_found;        /* the requested kind or agent names a live agent */
    int child_is_parent;    /* an agent may not spawn itself */
    int child_not_listed;   /* the parent's spawn.agents names other agents (nonzero denies) */
    int kill_switch;        /* global, the parent's or the child's switch is on */
    int high_risk;          /* risk_tier high */
    int approved;           /* a person approved this high-risk request */
    int64_t cooldown_ms;    /* the parent's spawn.cooldown_ms */
    int64_t since_last_ms;  /* since the parent's last admitted spawn; -1: never */
    const char *budget_out; /* name of an exhausted budget of the parent, or NULL */
    int64_t cost_left;      /* the parent's remaining cost (micro-dollars) after reservations;
                               -1: unlimited */
    int64_t cost_asked;     /* the request's cost budget (micro-dollars); 0: none asked */
    int64_t tokens_left;    /* the parent's remaining tokens today after reservations; -1:
                               unlimited */
    int64_t tokens_asked;   /* the request's token budget; 0: none asked (never denies) */
    int approval_required;  /* the request's required_approvals: a person approves it first */
    int running_parent, cap_parent; /* the parent's running children, its cap */
    int running_global, cap_global;
};

/* The verdict; *reason gets a static sentence saying why (also for admissions). */
enum vg_orch_verdict vg_orch_admit(const struct vg_orch_facts *f, const char **reason);
/* "denied", "admitted", "queued", "awaiting_approval" */
const char *vg_orch_verdict_name(enum vg_orch_verdict v);

/* ---- the tools (tools.c, spawn.c) ---------------------------------------------------------- */

/* The provider of list_available_agents and spawn_agents (a static instance). Both require the
 * capability "spawn", which an agent holds when its manifest says spawn: {enabled: true}. */
struct vg_tool_provider *vg_orch_tool_provider(void);
json_t *vg_orch_tool_contracts(void);

/* Every live agent as {id, name, kind, visibility, description}, whatever its visibility. */
vigil_code vg_orch_list_agents(struct vg_env *env, const char *kind, json_t **out,
                               vigil_error *err);
/* Admit or deny each request of one spawn_agents call (inside the caller's transaction): r
 * gets the answer (its tree and its text) and the decisions for the calling run's journal. */
vigil_code vg_orch_spawn(struct vg_env *env, const struct vg_tool_request *q,
                         struct vg_tool_response *r, vigil_error *err);

/* ---- arbitration (arbitrate.c) ------------------------------------------------------------- */

/*
 * When children disagree (S0-142): results are a results wake's ({index, status, result,
 * request_id, decision_key?}, borrowed). For each decision_key that two or more of them name
 * and at least one answered (completed), a verdict {decision_key, agreed, chosen_index,
 * chosen_request_id, answer (as compared: trimmed, white space collapsed, ASCII lower case),
 * votes, voters, policy}: the answer most of them gave, ties to the lowest request index; a
 * failed or cancelled child has no vote. A new array ([] when no key is shared); NULL when out
 * of memory. The same results give the same verdicts.
 */
json_t *vg_orch_arbitrate(json_t *results);

/* ---- children (child.c) -------------------------------------------------------------------- */

/* The spawn_child record of a run key (*out owned), or ENOTFOUND when the run is no child. */
vigil_code vg_orch_child_get(struct vg_env *env, const char *run_key, json_t **out, int64_t *rev,
                             vigil_error *err);

/* A spawned run's limits: its manifest's max_steps, else VG_ORCH_CHILD_MAX_STEPS (a top-level
 * run has no step limit by default), narrowed by its request's (within the parent's steps
 * budget left at admission); its request's max_runtime_ms when lower than its manifest's. Not a
 * child: unchanged. */
#define VG_ORCH_CHILD_MAX_STEPS 50
struct vg_loop_limits;
vigil_code vg_orch_child_limits(struct vg_env *env, const char *run_key,
                                struct vg_loop_limits *limits, vigil_error *err);

/* What a finished child run spent and said. */
struct vg_orch_outcome {
    const char *status; /* "completed", "failed" or "cancelled" (by a person) */
    const char *text;   /* the child's last answer or error text */
    int steps;
    int64_t tokens;
    int64_t cost_micros;
    const char *run_id; /* the run that spent it (NULL: none ran); its spend is counted once */
    /* Optional, for a completed run: its claimed wake, which the end of a task's run finishes
     * (vg_wake_finish, completed) in the transaction that records the end, one commit for both
     * and the end fenced by the wake's lease; *finished (0 before) is then set to 1. Any other
     * run's wake, or one whose end and finish together failed, stays the caller's to finish. */
    const struct vg_wake_job *job;
    int *finished;
    /* A completed run's calls left in doubt (vigil indoubt list): its task waits for a person
     * (doubt.c) instead of being done. */
    int in_doubt;
};

/*
 * A run ended: when it is a spawned child, record its result and charge its spend to the
 * parent, start the parent's next waiting children, and when it was the last of its group,
 * enqueue the parent's wake carrying every child's result. One transaction; calling it again
 * for the same run changes nothing. w: a wake state on env (NULL: one is made for the call).
 */
vigil_code vg_orch_run_ended(struct vg_env *env, struct vg_wake *w, const char *run_key,
                             const struct vg_orch_outcome *o, vigil_error *err);

/* A person answered an approval (approve.c): when it is a high-risk child's, the child starts
 * (approved) or is denied with the person's reason (rejected or expired), in one transaction;
 * any other approval, or a pending one, changes nothing. Calling it again changes nothing.
 * w: a wake state on env (NULL: one is made for the call). */
vigil_code vg_orch_approval_settle(struct vg_env *env, struct vg_wake *w, const char *approval_id,
                                   vigil_error *err);

/* The sweep of children awaiting approval (approve.c): each whose approval expired unanswered
 * has the expiry recorded and is settled as vg_orch_approval_settle does (denied, with the
 * reason, the parent woken when it was the last of its group); one answered but not settled
 * yet (a crash in between) is settled too. The daemon runs it once a second (its host's
 * sweep), so an approval nobody looks at still expires. *settled (may be NULL): how many. */
vigil_code vg_orch_approvals_sweep(struct vg_env *env, struct vg_wake *w, int *settled,
                                   vigil_error *err);

/* Lineage of an agent's runs (tree.c): {agent, name, kind, children: [...], decisions: [...]},
 * each child {run_key, agent, name, status, depth, request, result, children: [...]}. */
vigil_code vg_orch_tree(struct vg_env *env, const char *agent_id, json_t **out, vigil_error *err);

/* The spawn decisions a run's spawn_agents calls got, admitted or denied, oldest first (new
 * array): {group, index, decision, reason, child_agent, run_key, depth, request, at_ms}. A
 * child's later runs give the decisions of the child's whole run. */
vigil_code vg_orch_run_decisions(struct vg_env *env, const char *run_key, json_t **out,
                                 vigil_error *err);
/* A run's lineage from the spawn records (a spawned run's journal names no parent run): *parent
 * {run_key, agent_id} of the run that spawned it (NULL when no spawn made it; a child's later
 * runs have its parent), *children [{run_key, agent_id, status}] that the run of run_key, of
 * agent_id, spawned, oldest first, their status as `agent tree` says it. Both owned. */
vigil_code vg_orch_run_lineage(struct vg_env *env, const char *agent_id, const char *run_key,
                               json_t **parent, json_t **children, vigil_error *err);

/* ---- run controls (runctl.c) --------------------------------------------------------------- */

/* Cancel a run (run key or run id): a queued one never starts (*was_queued = 1); one under way
 * is asked to stop at its next safe point. ESTATE for a run that ended. */
vigil_code vg_run_cancel(struct vg_env *env, const char *run, const char *by, int *was_queued,
                         vigil_error *err);
/* 1 when a person asked the run of this key to stop; by (n bytes, may be NULL) gets who (the
 * --by name, "human" when none was given). */
int vg_run_cancel_requested(struct vg_env *env, const char *run_key, char *by, size_t n);
/* The wake-log entry of a run named as vg_run_cancel takes it (a run key, a unique start of one
 * of 8+ characters, or a run id): *out owned. ENOTFOUND when nothing matches. */
vigil_code vg_run_wake_entry(struct vg_env *env, const char *run, json_t **out, vigil_error *err);
/* Queue the run again as a new run of the same agent, linked to the old one; out_key (65) gets
 * the new run key. override: {"prompt"?: its input (else the old run's), "model"?: the model
 * name its loop uses, "tools"?: an allowlist written as the run's grant (never wider than the
 * agent's)}, kept in the wake log (meta.override) and the run_rerun link. */
vigil_code vg_run_rerun(struct vg_env *env, const char *run, json_t *override, char out_key[65],
                        vigil_error *err);
/* The model name a re-run's override names for its run (the job's wake meta), or NULL. */
const char *vg_run_override_model(json_t *wake_meta);

/* Resume a sub-agent's ended run (run key or run id): a new run of the child in its own session,
 * so its exact conversation continues, whose input states what the run did (its status, steps
 * and tokens) and then `prompt` (may be NULL). Linked to the old run (run_resume record) and
 * under the same grant; the parent is not woken again. EINVAL for a run that is not a child's,
 * ESTATE for one still queued or running. out_key (65) gets the new run key. */
vigil_code vg_run_resume(struct vg_env *env, const char *run, const char *prompt, char out_key[65],
                         vigil_error *err);

#endif
