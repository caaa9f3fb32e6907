/*
 * orch_int.h: what the orchestrator's files share.
 */
#ifndef VG_ORCH_INT_H
#define VG_ORCH_INT_H

#include "orch/orch.h"

/* Enqueue the wake of an admitted child (its spawn_child body, borrowed) on w: a user-kind
 * wake whose session is the child's own, so its run key is fixed at admission. */
vigil_code vg_orch_enqueue_child(struct vg_wake *w, const char *run_key, json_t *child,
                                 vigil_error *err);

/* The child's run key (or a later run continuing it) runs under its request's grant of tools
 * and scopes, when it names any (vg_tool_grant_put): never wider than its own manifest. */
vigil_code vg_orch_grant(struct vg_env *env, const char *run_key, json_t *child, vigil_error *err);

/* Count records of a kind (owner, k1, k2 may be NULL). */
vigil_code vg_orch_count(struct vg_env *env, const char *kind, const char *owner, const char *k1,
                         const char *k2, int *out, vigil_error *err);

/* The per-parent cap of an agent's config (spawn.max_concurrent), else the default. */
int vg_orch_parent_cap(json_t *config);
/* A qsort order of [seq, key, ...] arrays: by seq, then key (the order a scan of spawn_child
 * records gives, which children kept in their call must read in as well). */
int vg_orch_by_seq_then_key(const void *a, const void *b);

int64_t vg_orch_jint(json_t *o, const char *key);
/* A wake service of the orchestrator's own (when its caller gave none) that honours kill
 * switches as the runtime's does: a task is never given to an agent under one. */
vigil_code vg_orch_wake_init(struct vg_wake *w, struct vg_env *env, vigil_error *err);

/* child.c: a child record's new status (rec changed and written at revision rev); start the
 * parent's waiting children while it and the store have slots; and when no child of rec's
 * group is open any more, enqueue the parent's wake with every result. */
/* The running children of parent and of the whole store. Served from what the last spawn call
 * left (vg_orch_running_keep) while no spawn_child record was written since, by any connection
 * (VG_STORE_CTRL_CHANGE_MARK); else counted. */
vigil_code vg_orch_running_children(struct vg_env *env, const char *parent, int *of_parent,
                                    int *all, vigil_error *err);
/* After the open transaction's last spawn_child write: the counts the store now holds. */
void vg_orch_running_keep(struct vg_env *env, const char *parent, int of_parent, int all);
/* The children queued for a slot that a spawn_call record of owner keeps (k1 `waiting`; only
 * those of calls whose k2 is parent_run_key, when not NULL) and that have not started, that
 * is have no spawn_child record yet: fn gets each one's spawn_child body as it would be stored
 * (status `waiting`; borrowed) and its admission time (the record's seq), oldest call first. */
typedef vigil_code (*vg_orch_waiting_fn)(void *user, json_t *child, int64_t seq, vigil_error *err);
vigil_code vg_orch_waiting_each(struct vg_env *env, const char *owner, const char *parent_run_key,
                                vg_orch_waiting_fn fn, void *user, vigil_error *err);
/* Whether the spawn_call record of a group exists (a replayed call's). */
vigil_code vg_orch_call_recorded(struct vg_env *env, const char *group, int *recorded,
                                 vigil_error *err);
vigil_code vg_orch_child_set_status(struct vg_env *env, const char *key, json_t *rec, int64_t rev,
                                    const char *status, vigil_error *err);
vigil_code vg_orch_start_waiting(struct vg_env *env, struct vg_wake *w, const char *parent,
                                 vigil_error *err);
vigil_code vg_orch_finish_group(struct vg_env *env, struct vg_wake *w, json_t *rec,
                                vigil_error *err);

/* A child's on_complete (its spawn_child body, borrowed): wake_on_all (its request's default),
 * wake_on_each or none. */
const char *vg_orch_on_complete(json_t *child);

/* approve.c: ask a person about a high-risk child (its spawn_child body, borrowed): a pending
 * approval of the parent agent whose request names the child's run key. */
vigil_code vg_orch_approval_ask(struct vg_env *env, json_t *child, vigil_error *err);

/* The oldest `want` (0: all) ready tasks, each with "version" (new array): the stored ready
 * ones and the stored pending ones ready by derivation (task.c derive_ready). */
vigil_code vg_task_ready_oldest(struct vg_env *env, size_t want, json_t **out, vigil_error *err);

/* A task failed or was cancelled: what it blocks is cancelled, `why` saying which. (One that
 * is done needs no write: what it blocks is ready by derivation, task.c derive_ready.) */
vigil_code vg_task_after_failed(struct vg_env *env, const char *id, const char *why,
                                vigil_error *err);

/* doubt.c: a task whose run completed with `calls` of it in doubt (t read in the caller's
 * transaction at version v, patch its result) waits as `attention` for a person. */
vigil_code vg_task_hold_in_doubt(struct vg_env *env, json_t *t, int64_t v, json_t *patch, int calls,
                                 vigil_error *err);
/* The task a run worked on (a dispatched run's, or a re-run's), id[0] 0 when none. */
vigil_code vg_task_of_run(struct vg_env *env, const char *run_key, char id[101], vigil_error *err);

/* vg_task_transition for a task the caller read in its transaction (t, with "version"): no
 * second read; the write still fails with ECONFLICT when another writer moved it since. On
 * success t is the task as written (its "version" one more). */
vigil_code vg_task_move(struct vg_env *env, json_t *t, int64_t version, const char *to,
                        json_t *patch, vigil_error *err);

/* The same without marking the task graph changed: for graph.c, whose transactions stamp it
 * once each (vg_task_graph_seal). */
vigil_code vg_task_move_quiet(struct vg_env *env, json_t *t, int64_t version, const char *to,
                              json_t *patch, vigil_error *err);
/* Its write alone: t (with its new status set, without "version") stored at version, ECONFLICT
 * when another writer moved it first. t is left as it is. */
vigil_code vg_task_store_moved(struct vg_env *env, json_t *t, int64_t version, vigil_error *err);
/* The most of a run's text a task keeps as its result, in bytes. */
#define VG_TASK_RESULT_MAX 16000

/*
 * graph.c: the open task graph kept in memory between transactions (the env's task_graph),
 * the store staying the truth. vg_task_graph_sync, inside the caller's transaction, returns
 * the view, rebuilt from the store when any other writer changed a task since the view last
 * wrote (or, while that rebuild is not yet worth its cost, invalid: the caller reads the store);
 * vg_task_graph_seal, before that transaction ends, stamps what the view wrote in it. Any other
 * write of a task calls vg_task_graph_changed (task.c), which stamps it as not the view's. A failed
 * move leaves the view invalid (rebuilt next time).
 */
struct vg_task_node {
    char id[101]; /* vg_task_get's bound */
    char status[12];
    int64_t version, seq;
    int waiting;  /* blockers not done yet */
    json_t *body; /* the task as stored, without "version"; NULL once it left the view */
};
/* The agents a round may give tasks to, of one kind, with their loads (wakes queued or
 * running): dispatch.c's. Kept with the view between transactions (a hint: the wake's enqueue
 * checks the agent's lifecycle and kill switch again, and a refusal drops the pool), so it is
 * read again when it is older than VG_TASK_POOL_MAX_MS of the env's clock or has served
 * VG_TASK_POOL_MAX_ROUNDS rounds, when an agent refused, when it has no agent, and whenever
 * the view is rebuilt or its transaction rolled back. */
struct vg_task_pool {
    int valid;
    char kind[65];
    size_t n, cap;
    struct vg_task_candidate {
        char id[37];
        int load;
        char *tags; /* owned: ",a,b," of the agent's manifest `tags`; NULL: none */
    } * c;
    /* The round's tasks whose rules tied with a judge configured, left ready for it (task
     * ids; borrowed from the round's caller, NULL: no judge is asked in this round). */
    json_t *judge;
    int deferred;          /* a task of this round waits for the judge: the round stops there */
    const char *selection; /* how the last pick was made, as the task records it */
    int rounds;            /* rounds served since it was read */
    int held;        /* kept as it is until the round ends (read, or an agent refused, in it) */
    int64_t read_ms; /* the env's clock when it was read */
    vg_kill_query_fn kill; /* the kill-switch query it was read with (the wake service's) */
    void *kill_user;
};
/* Frees what the pool holds (not the pool itself). */
void vg_task_pool_clear(struct vg_task_pool *p);
/* A task's wake started on (+1) or ended (-1) on agent: the load the pool counts. */
void vg_task_pool_charge(struct vg_task_pool *p, const char *agent, int delta);
/* The ids of the live agents the rules rank first for task (its kind and tags, then the least
 * load), a new array: more than one is a tie, which a configured judge decides (judge.c). */
vigil_code vg_task_pool_tied(struct vg_env *env, struct vg_wake *w, struct vg_task_pool *p,
                             json_t *task, json_t **ids, vigil_error *err);
/* 1 when the task failed a run and waits for the judge's triage (retry or give up). */
int vg_task_triage_pending(json_t *task);
/* Ask the judge about each deferred task (ids), outside any transaction, and record its
 * judgement (or its triage of a failed run) in the task (the next round follows it). */
vigil_code vg_task_judge_deferred(struct vg_env *env, struct vg_wake *w, json_t *ids,
                                  vigil_error *err);
#define VG_TASK_JUDGE_ROUNDS 64
#define VG_TASK_POOL_MAX_MS 1000
#define VG_TASK_POOL_MAX_ROUNDS 64
/* The most tasks a stamp lists for the views behind it, and the most earlier stamps it lists
 * them after (graph.c, "catching up"). */
#define VG_TASK_DELTA_MAX 24
#define VG_TASK_CHAIN_MAX 8
/* Room for a stamp's text: its tags, VG_TASK_CHAIN_MAX earlier stamps and VG_TASK_DELTA_MAX
 * task ids of 36 bytes. */
#define VG_TASK_STAMP_MAX 2048
/* How many of its transactions a view lists its moves for after it last saw another view's
 * stamp. */
#define VG_TASK_SHARED_ROUNDS 256

struct vg_task_graph {
    struct vg_task_pool pool;
    int valid, wrote;
    int slots;     /* the dispatcher's cap, read once per view (0: not read yet) */
    int running;   /* tasks running */
    int pending;   /* tasks pending */
    size_t served; /* syncs since the last rebuild */
    int64_t stamp_rev;
    char stamp_tag[37]; /* the stamp's "by": the view that wrote it ("" for any other writer) */
    /* What this transaction moved through the view (node indexes), which its seal lists in the
     * stamp for the views behind. delta_ok 0: it also wrote tasks outside the view, changed the
     * cap, or moved more than VG_TASK_DELTA_MAX: the stamp lists nothing. */
    size_t moved[VG_TASK_DELTA_MAX], nmoved;
    int delta_ok, in_tx;
    /* The list in the stamp this view wrote last, which its next stamp extends while it writes
     * the stamps in a row (the oldest dropped past the caps): the earlier stamps, each with the
     * place in chain_ids of the first task moved after it, and those tasks (node indexes). */
    struct vg_task_chain {
        int64_t rev;
        char tag[37];
        size_t first;
    } chain[VG_TASK_CHAIN_MAX];
    size_t chain_ids[VG_TASK_DELTA_MAX], chain_nlog, chain_nids;
    /* Transactions left in which to list: another view's stamp was seen lately (a writer alone
     * lists nothing, and its stamp stays small). */
    int shared;
    struct vg_task_node *node;
    size_t len, cap;
    json_t *by_id;  /* id -> node index, the open tasks */
    json_t *by_run; /* run key -> node index, the running tasks */
    size_t *heap;   /* the ready tasks, oldest first */
    size_t nheap, capheap;
};
vigil_code vg_task_graph_sync(struct vg_env *env, struct vg_task_graph **g, vigil_error *err);
/* Before the transaction's commit: the stamp. */
vigil_code vg_task_graph_seal(struct vg_env *env, struct vg_task_graph *g, vigil_error *err);
vigil_code vg_task_graph_changed(struct vg_env *env, vigil_error *err);
/* Lock the graph's stamp for the open transaction (PostgreSQL: FOR UPDATE), as sync and changed
 * do: a transaction that writes tasks takes it before its first task write, so task writers
 * on different connections take turns instead of failing a compare-and-swap, and take the
 * stamp and the tasks in one order. Nothing to lock while the stamp was never written. */
vigil_code vg_task_graph_lock(struct vg_env *env, vigil_error *err);
void vg_task_graph_drop(struct vg_env *env);
/* The graph's stamp as stored, outside a transaction: its revision (0: never written) and
 * whether its last writer was outside every dispatcher's view (*outside 1: a task added, an
 * edge, a cancel; 0: a dispatch round or a run's end, which dispatched in it). */
vigil_code vg_task_graph_stamp(struct vg_env *env, int64_t *rev, int *outside, vigil_error *err);
int vg_task_graph_pop_ready(struct vg_task_graph *g, size_t *node);
vigil_code vg_task_graph_push_ready(struct vg_task_graph *g, size_t node, vigil_error *err);
/* Node i started on agent under run_key, its attempt `attempts`, picked by `selection` (its
 * wake written; the task is not: running in memory, those fields set in its body as a reader
 * derives them, the stamp moved at the seal); the node running under run_key (0: none). */
vigil_code vg_task_graph_started(struct vg_task_graph *g, size_t i, const char *agent,
                                 const char *run_key, int64_t attempts, const char *selection,
                                 vigil_error *err);
int vg_task_graph_find_run(struct vg_task_graph *g, const char *run_key, size_t *node);
/* Outside a transaction: the task the env's last view holds as running under run_key (task
 * empty: none). A run key names its task for good (its session is "task:ID"), so a view that
 * is stale still answers right; a re-run's old key may be answered and is then ignored by
 * the end, which checks the task's run key. */
void vg_task_graph_task_of_run(struct vg_env *env, const char *run_key, char task[101]);
/* Node i's run (run_key) completed with the text result: written done with it (its first
 * VG_TASK_RESULT_MAX bytes), what it blocks counted down, the tasks that became ready queued
 * (not written: stored pending, they are ready by derivation). */
vigil_code vg_task_graph_done(struct vg_env *env, struct vg_task_graph *g, size_t i,
                              const char *run_key, const char *result, vigil_error *err);

#endif
