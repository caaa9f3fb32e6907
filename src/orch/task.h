/*
 * task.h: the task-graph dispatcher (docs/orchestration.md, "The task graph"). Tasks with `blocks`
 * edges are records; an edge that would close a cycle is refused when it is added; a task is
 * ready once every task that blocks it is done, and the dispatcher starts ready tasks as wakes
 * of agents picked by rules (kind, then load), never more at once than its slots. A start
 * writes the task's wake only, under a run key of the task and its attempt, so two dispatchers
 * racing on one task cannot both start it (the second insert is a duplicate); every other
 * transition is a compare-and-swap on the task's revision (its version). docs/orchestration.md.
 *
 * Record kinds (store/port.h columns: owner, k1, k2, seq):
 *   task       id=uuid      owner=""  k1=pending|ready|running|attention|done|failed|cancelled
 *                           k2=kind ("" for any)  seq=created ms  (k1 pending with every
 *                           blocker done reads as ready: task.c derive_ready; k1
 *                           pending or ready with its next attempt's wake reads as
 *                           running: vg_task_derive_running)
 *   task_run   id=run key   owner=agent  k1=task id   (a re-run of a task's run; a dispatched
 *              run has none: its wake's session is "task:ID")
 *   task_slots id=default   body {slots}              (the dispatcher's cap, default 4)
 */
#ifndef VG_ORCH_TASK_H
#define VG_ORCH_TASK_H

#include "orch/orch.h"

#define VG_TASK_SLOTS_DEFAULT 4
#define VG_TASK_MAX_RETRIES 2
/* A failed task's next attempt waits VG_TASK_RETRY_BASE_MS, doubled each attempt up to
 * VG_TASK_RETRY_MAX_MS, half of it jitter (vg_task_retry_backoff_ms). */
#define VG_TASK_RETRY_BASE_MS 2000
#define VG_TASK_RETRY_MAX_MS 60000
#define VG_TASK_MAX_TAGS 16
#define VG_TASK_SELECTION "rule: kind and tags, then load, then id"
#define VG_TASK_SELECTION_JUDGE "judge: the model's answer (see judgement)"

/* How the task's agent was picked: by the judge when its recorded judgement chose agent, else
 * by the rules (VG_TASK_SELECTION). */
const char *vg_task_selection(json_t *t, const char *agent);

/* The turn id of a task's attempt (1, 2, ...), "attempt-N": its wake's turn and a part of its
 * run key. */
void vg_task_attempt_turn(char out[32], int64_t attempt);
/* The run key of a task's attempt (1, 2, ...): its wake's id, derived from the task alone. */
void vg_task_run_key(char out[65], const char *task_id, int64_t attempt);
/* t (a task's body as stored, with "id", "status", "attempts") stored pending or ready whose
 * next attempt's wake exists: set running, with the wake's agent, run key and attempt. */
vigil_code vg_task_derive_running(struct vg_env *env, json_t *t, vigil_error *err);

/* The backoff before the attempt after `attempt` (1, 2, ...) of a task failed, in ms:
 * exponential with a cap, half of it jitter drawn from the task id and attempt. */
int64_t vg_task_retry_backoff_ms(const char *task_id, int64_t attempt);

/* A new task that blocks each of blocks[0..n) (their ids); tags[0..n_tags), at most
 * VG_TASK_MAX_TAGS, are what its agent's manifest `tags` must all hold. *out_id 37 bytes.
 * ENOTFOUND for an unknown blocked task; a finished or cancelled one is EINVAL. */
vigil_code vg_task_add(struct vg_env *env, const char *title, const char *kind,
                       const char *const *tags, size_t n_tags, const char *const *blocks, size_t n,
                       char out_id[37], vigil_error *err);
/* 1 when tag is a valid task or agent tag: 1 to 64 of a-z 0-9 _ -. */
int vg_task_tag_valid(const char *tag);
/* The edge "a blocks b". EINVAL, writing nothing, when b already reaches a (a cycle). */
vigil_code vg_task_block(struct vg_env *env, const char *a, const char *b, vigil_error *err);
/* One task (*out owned, with "version"), ENOTFOUND. */
vigil_code vg_task_get(struct vg_env *env, const char *id, json_t **out, int64_t *version,
                       vigil_error *err);
/* Tasks, oldest first, optionally of one status (new array). */
vigil_code vg_task_list(struct vg_env *env, const char *status, json_t **out, vigil_error *err);
/*
 * Move a task from one status to another if its version is still `version` (ECONFLICT when
 * another writer moved it first; ESTATE when it is not in `from`). patch (borrowed, may be
 * NULL) is merged into its body. The serializable step every change goes through.
 */
vigil_code vg_task_transition(struct vg_env *env, const char *id, const char *from, const char *to,
                              int64_t version, json_t *patch, vigil_error *err);
/* Cancel a task that has not finished, and every task it blocks, transitively. */
vigil_code vg_task_cancel(struct vg_env *env, const char *id, vigil_error *err);
/*
 * Start ready tasks while fewer than `slots` run (slots <= 0: the stored cap). A task with no
 * agent of its kind stays ready. When nothing is ready or running but tasks are pending, the
 * pending graph is checked for cycles and each task in one fails. *started may be NULL.
 */
vigil_code vg_task_dispatch(struct vg_env *env, struct vg_wake *w, int slots, int *started,
                            vigil_error *err);
/* A daemon's look for tasks added while it runs (trial L9), each second or so: when the graph's
 * stamp moved since *seen and its last writer was outside every dispatcher (a task added, an
 * edge, a cancel: `vigil task add`, POST /v1/tasks), a dispatch round starts what is ready, as
 * `vigil task dispatch` would. Only once the dispatcher was started on the store (one `vigil
 * task dispatch`), so a graph built before it starts nothing half-built. A start another
 * dispatcher won (another daemon) is not an error: the next look tries again. */
vigil_code vg_task_dispatch_added(struct vg_env *env, struct vg_wake *w, int64_t *seen,
                                  vigil_error *err);
/* A run ended: when it worked on a task, the task is done (or retried, or failed, its
 * dependents cancelled), its dependents that became ready are marked so, and the dispatcher
 * fills the freed slot. Not a task's run: nothing. */
vigil_code vg_task_run_ended(struct vg_env *env, struct vg_wake *w, const char *run_key,
                             const struct vg_orch_outcome *o, vigil_error *err);

/* Runs that ended together (a batch of what vg_task_run_ended does for one): their tasks move
 * on, what they unblock becomes ready, and the freed slots are refilled in one transaction
 * and one dispatch round. */
struct vg_task_end {
    const char *run_key;
    const struct vg_orch_outcome *outcome;
};
vigil_code vg_task_runs_ended(struct vg_env *env, struct vg_wake *w, const struct vg_task_end *ends,
                              size_t n, vigil_error *err);

/* A person answered an in-doubt call of agent's run run_key (vigil indoubt resolve): when the
 * run's task waits in `attention` and no call of the run is in doubt any more, it is done (every
 * call applied) or, a call not applied, tried again (or failed, its retries spent). Not a
 * task's run, or a task not waiting: nothing. docs/orchestration.md. */
vigil_code vg_task_doubt_settled(struct vg_env *env, const char *agent, const char *run_key,
                                 vigil_error *err);

/* A re-run (new_key) of a task's run (old_key): the task waits for it instead when it was
 * waiting for the old one, so the re-run's end settles it. Not a task's run: nothing. */
vigil_code vg_task_run_replaced(struct vg_env *env, const char *old_key, const char *new_key,
                                const char *agent, vigil_error *err);

#endif
