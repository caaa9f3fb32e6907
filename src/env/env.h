/*
 * env.h: the bundle of ports every domain module works with: the store, the clock, the id
 * source and the notifier. The runtime owns one; tests build one from a test clock and seeded
 * ids. Domain functions take `struct vg_env *` first and see nothing else of the runtime.
 */
#ifndef VG_ENV_H
#define VG_ENV_H

#include "base/buf.h"
#include "os/clock.h"
#include "os/ids.h"
#include "store/store.h"

struct vg_env;

/* Receives each committed batch of notification tokens (borrowed for the call). */
typedef void (*vg_notify_fn)(void *user, const char *const *tokens, size_t n);

/*
 * Tokens raised inside a transaction wait here until the outermost transaction ends: they are
 * delivered when it commits and dropped when it rolls back, so no listener ever hears of a
 * change that did not become durable.
 */
/* The tokens one transaction raised, delivered when it commits (env.c). */
struct vg_note_batch;

struct vg_notifier {
    struct vg_note_batch *open;  /* the open transaction's tokens, or NULL */
    struct vg_note_batch *spare; /* an ended transaction's, kept for the next one */
    vg_notify_fn fn;             /* the listener, or NULL */
    void *fn_user;               /* passed to fn */
    const char *source;          /* origin tag (an agent id while its tools run) or NULL */
};

/* A message as its append wrote it (agent/message.c), for a module that keeps a count of a
 * thread's messages. prev_id is "" for a thread's first message. */
struct vg_message_note {
    const char *agent_id, *thread_id, *id, *prev_id;
    int64_t seq, tokens;
};

struct json_t;

/* How many records get_json keeps (struct vg_env, kept_reads), and the longest kind and id it
 * keeps (the store's own limits). */
#define VG_ENV_KEPT_READS 8
#define VG_ENV_KEPT_KIND_MAX 40
#define VG_ENV_KEPT_ID_MAX 200
/* How many agent records vg_agent_get_shared keeps (struct vg_env, kept_agents). */
#define VG_ENV_KEPT_AGENTS 128

struct vg_env {
    struct vg_store *store;    /* owned by the runtime */
    struct vg_clock *clock;    /* borrowed */
    struct vg_ids *ids;        /* owned by the runtime */
    struct vg_notifier notify; /* pending tokens of the open transaction */
    void *owner;               /* the vigil_runtime this env belongs to, or NULL */
    /* Pointers moved in the open flat transaction, written at its commit (agent/link.c): one
     * block, allocated at first use, freed by vg_env_release. */
    struct vg_pointer_cache *pointers;
    /* Parsed record bodies by their text (vg_env_parse_json): allocated at first use. */
    struct vg_json_memo *memo;
    /* A higher module's state kept between transactions (the orchestrator's task graph,
     * src/orch/graph.c): allocated at first use, freed by vg_env_release through its own
     * function, since this layer cannot name its type. */
    void *task_graph;
    void (*task_graph_free)(void *graph);
    /* The agents as a spawn call's admission reads them (src/orch/spawn.c: id, kind, lifecycle,
     * name), the same way, with the store's change mark of agent records they were read under:
     * a later call takes them while that mark holds instead of scanning every agent again. */
    void *spawn_agents;
    void (*spawn_agents_free)(void *agents);
    struct vg_store_change_mark spawn_agents_mark;
    /* The live agents' names as a create's check found them (src/agent/agent.c), the same
     * way, with the store's change mark of agent records they were read under: the next create
     * checks its name against them instead of reading every agent again. */
    void *agent_names;
    void (*agent_names_free)(void *names);
    /* The lease epochs the fence checks of runs found lately, per agent (src/wake/queue.c),
     * with the store's change mark of agent_lease records they were read under: a run's phases
     * check its lease without reading it again while that mark holds. */
    void *lease_epochs;
    void (*lease_epochs_free)(void *epochs);
    /* The ends of task runs gathered from the fibers of this env's thread, recorded together
     * (src/orch/dispatch.c, vg_task_run_ended), the same way. */
    void *task_ends;
    void (*task_ends_free)(void *ends);
    /* The task graph's stamp revision a daemon's loop last looked at for tasks added while it
     * runs (src/orch/dispatch.c, vg_task_dispatch_added). */
    int64_t task_stamp_seen;
    /* The loop's context windows kept between runs (src/loop/window_cache.c), the same way. */
    void *windows;
    void (*windows_free)(void *windows);
    /* Multi-device sync's capture (src/sync/capture.c): this store's host id and the write
     * hook's state, set when the store has joined sync; freed by vg_env_release through its
     * own function. NULL: the store does not sync. */
    void *sync;
    void (*sync_free)(void *sync);
    /* The store's host id (NULL: it has not joined sync), for a module that records which
     * device made something (a timer fires on its home device only, src/wake/timer.c); set
     * with sync. It notices a join another process made. */
    const char *(*sync_host_of)(void *sync);
    /* Compaction's tallies of the tokens not yet covered by a summary, per thread
     * (src/memory/compact.c), the same way. */
    void *compact_tallies;
    void (*compact_tallies_free)(void *tallies);
    /* Told of each message this process appends (vg_env_message_appended), so that a kept
     * tally counts it without reading it back; set with compact_tallies. */
    void (*compact_tallies_note)(void *tallies, const struct vg_message_note *note);
    /* The dispatcher's judge (docs/orchestration.md, "Picking the agent"): a model asked which
     * agent takes a task when the rules tie. Set by the runtime, which owns the model; on
     * NULL or answering 0: no judge configured, the rules' first agent is taken. ask's
     * question is {task: {id, title, kind, tags}, candidates: [{id, name, kind, tags,
     * description, load}]}; *answer (owned) {agent (an id, "" when the answer named none),
     * model, text, tokens}. Called outside any transaction: it waits for a model. */
    int (*task_judge_on)(void *user);
    vigil_code (*task_judge_ask)(void *user, struct json_t *question, struct json_t **answer,
                                 vigil_error *err);
    void *task_judge_user;
    /* The records get_json read last (env.c: vg_env_get_json and _shared), present or absent,
     * each with the store's change mark of its kind it was read under: served again while that
     * mark holds. A step reads its agent's lease, kill switches, tool grant and compaction
     * cursor at every model call, and none of them changes between (docs/internals/PERF.md,
     * Session 33). */
    struct vg_env_kept_read {
        char kind[VG_ENV_KEPT_KIND_MAX + 1], id[VG_ENV_KEPT_ID_MAX + 1]; /* kind "": free */
        struct json_t *value; /* the record's body, never changed; NULL: the record is absent */
        int64_t rev;
        struct vg_store_change_mark mark;
    } kept_reads[VG_ENV_KEPT_READS];
    unsigned kept_reads_next; /* the slot a new record takes, round robin */
    /* The agent records vg_agent_get_shared read last (agent/agent.c), each with the store's
     * change mark of agent records it was read under: served again while that mark holds.
     * VG_ENV_KEPT_AGENTS slots, allocated at first use: agents taking turns in one thread
     * (vigil_chat_many, the daemon's loop thread) each find theirs. */
    struct vg_env_kept_agent {
        char id[64];          /* a longer id is not kept */
        struct json_t *value; /* NULL: a free slot */
        struct vg_store_change_mark mark;
        uint64_t used;
        int64_t rev;   /* the record's revision, */
        size_t len;    /* its text's length */
        uint64_t hash; /* and hash (FNV-1a), to tell it unchanged when the mark moved */
    } * kept_agents;
    uint64_t kept_agents_tick;
    /* The running children (spawn_child records "running") of one parent and of the store, as a
     * spawn call left them (orch/child.c), with the store's change mark of spawn_child records
     * after its writes: served while that mark holds. */
    char kept_running_parent[64];
    int kept_running_of_parent, kept_running_all, kept_running_valid;
    struct vg_store_change_mark kept_running_mark;
    /* One agent's newest compaction cursors as context assembly read them (memory/assemble.c:
     * [[thread, latest summary id], ...], newest first), with the store's change mark of
     * compaction cursors they were read under: served again while that mark holds. */
    struct json_t *kept_cursors;
    int kept_cursors_limit; /* the most they were read for */
    char kept_cursors_agent[64];
    struct vg_store_change_mark kept_cursors_mark;
};

/* Raise tokens; delivered at the end of the outermost transaction (or at once outside one). */
void vg_env_notify(struct vg_env *env, const char *const *tokens, size_t n);
void vg_env_release(struct vg_env *env);

/* Called by the message append inside its transaction, which may still roll back: a listener
 * must check later that what it was told is in the store. */
static inline void vg_env_message_appended(struct vg_env *env, const struct vg_message_note *n)
{
    if (env->compact_tallies && env->compact_tallies_note)
        env->compact_tallies_note(env->compact_tallies, n);
}

/* This store's multi-device sync host id, or NULL when the store does not sync. */
static inline const char *vg_env_sync_host(struct vg_env *env)
{
    return env->sync && env->sync_host_of ? env->sync_host_of(env->sync) : NULL;
}

static inline int64_t vg_env_now(struct vg_env *env)
{
    return vg_clock_now_ms(env->clock);
}

/* Store helpers shared by the domain modules: a record whose body is a jansson object. */
struct json_t;
vigil_code vg_env_put_json(struct vg_env *env, const char *kind, const char *id, const char *owner,
                           const char *k1, const char *k2, int64_t seq, struct json_t *body,
                           unsigned flags, vigil_error *err);
vigil_code vg_env_update_json(struct vg_env *env, const char *kind, const char *id,
                              const char *owner, const char *k1, const char *k2, int64_t seq,
                              struct json_t *body, int64_t expected_rev, vigil_error *err);
/* vg_env_update_json for a record this process reads back soon (an agent's runtime state: a
 * wake's claim, its run and its finish each read what the one before wrote): the body is also
 * kept in the memo below under the text written, so that reading that text again copies the
 * body instead of parsing it (about 60 k instructions for a runtime state). The memo may keep
 * body itself: the caller does not change it after this call (it may release it). */
vigil_code vg_env_update_json_noted(struct vg_env *env, const char *kind, const char *id,
                                    const char *owner, const char *k1, const char *k2, int64_t seq,
                                    struct json_t *body, int64_t expected_rev, vigil_error *err);
/* Parse a record body (a JSON object or array) into a new value the caller owns, served from
 * the env's memo when the same text was parsed lately. VIGIL_EPARSE when it is not JSON,
 * VIGIL_ENOMEM; *out is untouched then. */
vigil_code vg_env_parse_json(struct vg_env *env, const char *text, struct json_t **out);
/* The same, read only: the memo's own value when it holds the text (not a copy). */
vigil_code vg_env_parse_json_shared(struct vg_env *env, const char *text, struct json_t **out);
/* Put a record whose body is already JSON text. */
vigil_code vg_env_put_text(struct vg_env *env, const char *kind, const char *id, const char *owner,
                           const char *k1, const char *k2, int64_t seq, const char *body,
                           unsigned flags, vigil_error *err);
vigil_code vg_env_update_text(struct vg_env *env, const char *kind, const char *id,
                              const char *owner, const char *k1, const char *k2, int64_t seq,
                              const char *body, int64_t expected_rev, vigil_error *err);
/* Read one record's body as a new JSON object (*out owned; json_decref). Optional rev/seq. */
vigil_code vg_env_get_json(struct vg_env *env, const char *kind, const char *id,
                           struct json_t **out, int64_t *rev, vigil_error *err);
/* The same for a caller that only reads: *out may be the env's memo's own value, so it must
 * not be changed (json_decref it as usual). A hot record read on every step (an agent's
 * config) then costs neither a parse nor a copy. */
vigil_code vg_env_get_json_shared(struct vg_env *env, const char *kind, const char *id,
                                  struct json_t **out, vigil_error *err);

#endif
