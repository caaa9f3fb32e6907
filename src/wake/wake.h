/*
 * wake.h: what wakes an agent (docs/wakes.md): notification batches matched against persisted
 * subscriptions, persisted timers, user turns and manual requests; the durable wake queue (the
 * wake_run log), the per-agent lease that makes runs single-flight and fences stale writers,
 * recovery after a crash, the failure policy, and the runner seam the agent loop plugs into.
 *
 * Record kinds (store/port.h columns: owner, k1, k2, seq):
 *   subscription  id=sub id       owner=agent  k1=""             k2=""        seq=created ms
 *   sub_token     id=H(sub,tok)   owner=agent  k1=class:token    k2=sub id    seq=0
 *   timer         id=timer id     owner=agent  k1="on"|"done"    k2=kind      seq=next run ms
 *   wake_run      id=run key      owner=agent  k1=status         k2=reason    seq=created ms
 *   agent_lease   id=agent id     owner=agent  k1=holder         k2=""        seq=expiry ms
 *                 (body: epoch, expires_ms, the holder's host, pid and process start, beat_ms
 *                 of its last take or renewal, beat_timeout_ms when it beats)
 *   wake_batch    id=batch ident  owner=""     k1=""             k2=""        seq=consumed ms
 *   notification  id=uuid         owner=""     k1="pending"      k2=source    seq=raised ms
 *                 (k1 "taken", seq=taken ms: a daemon on a shared store took it to match)
 * The wake_run log is the queue: records with k1 "queued" are waiting, oldest first.
 */
#ifndef VG_WAKE_H
#define VG_WAKE_H

#include "env/env.h"

#include <jansson.h>

/* ---- tokens and batches ---------------------------------------------------------------------- */

enum vg_token_class {
    VG_TOKEN_KEY,     /* semantic key: UPPER_SNAKE, e.g. TASK */
    VG_TOKEN_SUBTYPE, /* subtype token: dotted lowercase, e.g. workout.running */
    VG_TOKEN_ENTITY   /* anything else: an entity id (UUIDs and host ids) */
};

enum vg_token_class vg_token_classify(const char *token);
const char *vg_token_class_name(enum vg_token_class c); /* "key", "subtype", "entity" */
int vg_token_class_parse(const char *name, enum vg_token_class *out);

enum vg_batch_origin { VG_ORIGIN_LOCAL = 0, VG_ORIGIN_SYNC = 1 };

/* A debounced notification batch: a sorted set of distinct tokens. */
struct vg_wake_batch {
    char **tokens; /* sorted, distinct, owned */
    size_t n;
    char *source; /* agent whose tool raised them, or NULL (owned) */
    enum vg_batch_origin origin;
    char identity[65]; /* H(sorted tokens, sequence) */
    char *sequence;    /* what makes the identity unique (owned) */
    char **record_ids; /* durable notification records folded into it (owned) */
    size_t n_records;
};

void vg_wake_batch_release(struct vg_wake_batch *b);
/* Build a batch from tokens (copied, sorted, deduplicated) and compute its identity. */
vigil_code vg_wake_batch_build(struct vg_wake_batch *b, const char *const *tokens, size_t n,
                               const char *source, const char *sequence, vigil_error *err);

/*
 * Entity lookup for predicates: called at most once per batch, with all entity-id tokens of
 * the batch (never semantic keys or subtypes). Fill *out (owned by the caller of the callback
 * afterwards) with an object mapping id -> entity object; ids not found are left out. An entity
 * object's fields are compared by `where` predicates; its "links" array of ids serves `linked`.
 */
typedef vigil_code (*vg_entity_lookup_fn)(void *user, struct vg_env *env, const char *const *ids,
                                          size_t n, json_t **out, vigil_error *err);
/* The default lookup: records of kind "host_entity" whose id is the entity id. */
vigil_code vg_entity_lookup_store(void *user, struct vg_env *env, const char *const *ids, size_t n,
                                  json_t **out, vigil_error *err);

/* ---- the wake context ------------------------------------------------------------------------ */

/* Kill-switch query; the tool layer provides vg_kill_active, the runtime plugs it in (the
 * host's kill). Non-zero *on: no new wakes. */
typedef vigil_code (*vg_kill_query_fn)(void *user, struct vg_env *env, const char *agent_id,
                                       int *on, vigil_error *err);

struct vg_wake_config {
    int64_t debounce_local_ms; /* 100 */
    int64_t debounce_sync_ms;  /* 1000 */
    int64_t lease_ms;          /* how long a claim holds an agent without renewal: 300000 */
    int64_t backoff_base_ms;   /* first retry delay after a failure: 30000 */
    int64_t backoff_max_ms;    /* cap of the delay: 3600000 */
    int max_failures;          /* consecutive failures before dormancy: 5 */
    int64_t suppress_ttl_ms;   /* self-suppression memory of mutated entity ids: 5000 */
    /* How often a holder that beats renews its leases (the daemon's loop thread, whatever its
     * runs are doing); its lease is abandoned, from any host, once VG_WAKE_BEATS_MISSED beats
     * are missed, long before it expires. 0 (the default): the holder does not beat (a chat, a
     * vigil_wake_process run: they renew between phases), and only expiry or, on the same host,
     * its process being gone frees the lease. vg_wake_heartbeat_ms gives the daemon's value. */
    int64_t heartbeat_ms;
};

#define VG_WAKE_BEATS_MISSED 3
/* The heartbeat of a beating holder for a lease of lease_ms: a thirtieth of it (10 s for the
 * 5-minute lease), at least 1 ms. */
int64_t vg_wake_heartbeat_ms(int64_t lease_ms);

void vg_wake_config_defaults(struct vg_wake_config *c);

struct vg_suppress; /* per-agent recently mutated entity ids (the untagged fallback) */

/* How a run ended, for vg_wake_finish (below). STOPPED: policy ended the run (a spent budget,
 * a kill switch): not a failure to retry, not a completion either; the entry says `stopped`
 * with why (trial F11). */
enum vg_wake_outcome {
    VG_WAKE_COMPLETED,
    VG_WAKE_FAILED,
    VG_WAKE_INTERRUPTED,
    VG_WAKE_CANCELLED,
    VG_WAKE_STOPPED,
    /* failed in a way waiting does not mend (the model provider refused its key or the model
     * name): the entry says `failed`, but no recovery wake is queued and the failure streak that
     * turns the agent dormant is left as it is (trial F22) */
    VG_WAKE_FAILED_FINAL,
    /* Only a runner returns it: the run completed and the runner finished its wake itself
     * (vg_wake_finish, completed) in the transaction that recorded the run's end (a task's run:
     * src/orch/dispatch.c), so vg_wake_run_one writes nothing more. */
    VG_WAKE_FINISHED
};

/* Per-process wake state shared by intake, matching and the queue. Not thread-safe. */
struct vg_wake {
    struct vg_env *env; /* borrowed */
    struct vg_wake_config cfg;
    vg_entity_lookup_fn lookup; /* default vg_entity_lookup_store */
    void *lookup_user;
    vg_kill_query_fn kill; /* NULL (vg_wake_init's): no kill switches */
    void *kill_user;
    char holder[128];             /* lease holder name of this process */
    struct vg_suppress *suppress; /* owned */
    /* debounce: pending batches, one per (origin, source) */
    struct pending *pending; /* owned list */
    uint64_t batch_counter;  /* in-process sequence for batch identities */
    char instance[37];       /* makes in-process sequences unique across processes */
    /* What the last vg_wake_run_one ended with, for the daemon's log: the outcome, its error
     * text, and whether the agent turned dormant with it. */
    enum vg_wake_outcome last_outcome;
    char last_error[256];
    int last_dormant;
};

vigil_code vg_wake_init(struct vg_wake *w, struct vg_env *env, const struct vg_wake_config *cfg,
                        vigil_error *err);
void vg_wake_release(struct vg_wake *w);

/* ---- notification intake (debounce) -----------------------------------------------------------
 */

/* Take tokens into the debounce window of (origin, source). tokens are copied. */
vigil_code vg_wake_intake(struct vg_wake *w, const char *const *tokens, size_t n,
                          const char *source, enum vg_batch_origin origin, vigil_error *err);
/* Notifications raised by the wake system's own bookkeeping carry this source; the intake
 * ignores them, so counting or finishing a wake never wakes anyone (a caller that finishes a
 * wake inside a transaction of its own tags that transaction so: src/orch/dispatch.c). */
#define VG_WAKE_SOURCE_SELF "vigil:wake"
/* A vg_notify_fn for env->notify.fn: takes committed tokens with env->notify.source. */
void vg_wake_intake_hook(void *user, const char *const *tokens, size_t n);
/* Earliest debounce deadline in ms (wall), or -1 if nothing is pending. */
int64_t vg_wake_intake_deadline(struct vg_wake *w);
/* Flush every batch whose window has closed (all with force) and process them. */
vigil_code vg_wake_intake_flush(struct vg_wake *w, int force, int *n_batches, vigil_error *err);

/* Durable notifications (another process raised them; the daemon picks them up). */
vigil_code vg_wake_notify_durable(struct vg_env *env, const char *const *tokens, size_t n,
                                  const char *source, vigil_error *err);
/* Move pending durable notification records into the intake (at most limit). */
vigil_code vg_wake_intake_durable(struct vg_wake *w, int limit, int *taken, vigil_error *err);

/* On a server store, durable notifications a daemon took (k1 "taken") but did not match
 * before older_than_ms (it died) go back to pending for any daemon to take. */
vigil_code vg_wake_untake_stale(struct vg_env *env, int64_t older_than_ms, int *n,
                                vigil_error *err);

/*
 * Remove consumed-batch identity records older than older_than_ms (at most limit). A batch
 * redelivered after that would run again; the daemon keeps them 7 days.
 */
vigil_code vg_wake_prune_batches(struct vg_env *env, int64_t older_than_ms, int limit, int *n,
                                 vigil_error *err);

/* ---- matching ---------------------------------------------------------------------------------
 */

struct vg_match_stats {
    int matched_subs; /* subscriptions whose tokens and predicates matched */
    int suppressed;   /* dropped by self-notification suppression */
    int enqueued;     /* new wake_run records */
    int merged;       /* merged into an agent's queued wake */
    int duplicate;    /* the batch identity had been consumed before */
    int broken;       /* skipped: the subscription or its agent is gone or unreadable */
};

/*
 * Process one batch: consume its identity (a batch seen before does nothing), match it through
 * the sub_token index (one indexed lookup per token), apply suppression and predicates, and
 * enqueue one wake per matched subscription (coalesced per agent), all in one transaction.
 */
vigil_code vg_wake_batch_process(struct vg_wake *w, const struct vg_wake_batch *b,
                                 struct vg_match_stats *st, vigil_error *err);

/* ---- subscriptions ----------------------------------------------------------------------------
 */

struct vg_sub_spec {
    const char *id; /* NULL: a new id; an existing id is replaced */
    const char *agent_id;
    const char *const *tokens; /* match when any of them is in the batch */
    size_t n_tokens;
    const char *const *require; /* and all of these too (e.g. a subtype) */
    size_t n_require;
    const char *const *where; /* "field=value" predicates on a changed entity */
    size_t n_where;
    const char *linked_to; /* a changed entity must link to this id */
};

vigil_code vg_sub_add(struct vg_env *env, const struct vg_sub_spec *s, char out_id[201],
                      vigil_error *err);
vigil_code vg_sub_remove(struct vg_env *env, const char *sub_id, vigil_error *err);
/* Subscriptions (of one agent, or all with agent_id NULL) as a JSON array (owned). */
vigil_code vg_sub_list(struct vg_env *env, const char *agent_id, json_t **out, vigil_error *err);
/* Remove every timer and subscription of the agent (a destroyed agent is never woken again:
 * they would only fire into nothing). *removed (may be NULL) gets how many. */
vigil_code vg_wake_forget_agent(struct vg_env *env, const char *agent_id, int *removed,
                                vigil_error *err);

/* ---- timers -----------------------------------------------------------------------------------
 */

enum vg_timer_kind { VG_TIMER_RRULE, VG_TIMER_CRON, VG_TIMER_AT };

/* A parsed schedule intent. Plain data, no resources. */
struct vg_timer_spec {
    enum vg_timer_kind kind;
    char text[512];   /* the rule as given (RRULE, cron) */
    char tz[64];      /* IANA zone */
    char dtstart[16]; /* local anchor "YYYYMMDDTHHMMSS" (RRULE) */
    int64_t at_ms;    /* one-shot instant (AT) */
    /* cron, as bit sets */
    uint64_t minutes;
    uint32_t hours, doms;
    uint16_t months;
    uint8_t dows;
    int dom_any, dow_any;
};

const char *vg_timer_kind_name(enum vg_timer_kind k); /* "rrule", "cron", "at" */
/*
 * Parse a schedule: text is an RRULE ("FREQ=DAILY;BYHOUR=7;BYMINUTE=0"), a 5-field cron line
 * or @daily-style macro, or a time (RFC 3339, or local "YYYY-MM-DDTHH:MM[:SS]" in tz). tz is an
 * IANA zone ("UTC" if NULL). anchor_ms fixes the RRULE's DTSTART (local midnight of that day).
 */
vigil_code vg_timer_spec_parse(struct vg_timer_spec *s, enum vg_timer_kind kind, const char *text,
                               const char *tz, int64_t anchor_ms, vigil_error *err);
/* The first firing strictly after after_ms; *found 0 when there is none (a past one-shot). */
vigil_code vg_timer_spec_next(const struct vg_timer_spec *s, int64_t after_ms, int64_t *next,
                              int *found, vigil_error *err);
/* 1 if the zone is known. */
int vg_timer_zone_valid(const char *tz);

vigil_code vg_timer_add(struct vg_env *env, const char *agent_id, enum vg_timer_kind kind,
                        const char *text, const char *tz, char out_id[37], vigil_error *err);
vigil_code vg_timer_remove(struct vg_env *env, const char *timer_id, vigil_error *err);
vigil_code vg_timer_list(struct vg_env *env, const char *agent_id, json_t **out, vigil_error *err);
/* Change a timer's zone: the wall-clock intent stays, the next run is recomputed. */
vigil_code vg_timer_set_zone(struct vg_env *env, const char *timer_id, const char *tz,
                             vigil_error *err);
/* Recompute every timer's next run from its intent (after a clock jump). *n: timers changed. */
vigil_code vg_timer_recompute_all(struct vg_env *env, int *n, vigil_error *err);
/* Earliest next run of any live timer, or -1. */
vigil_code vg_timer_next_deadline(struct vg_env *env, int64_t *out, vigil_error *err);
/*
 * Fire every timer due at the clock's now (at most limit): each one enqueues ONE wake (missed
 * firings coalesce into it with timer_catchup metadata) and advances in the same transaction.
 */
vigil_code vg_timer_fire_due(struct vg_wake *w, int limit, int *fired, vigil_error *err);

/* ---- wakes and the run log --------------------------------------------------------------------
 */

enum vg_wake_reason {
    VG_REASON_SUBSCRIPTION,
    VG_REASON_TIMER,
    VG_REASON_USER,
    VG_REASON_MANUAL,
    VG_REASON_RECOVERY
};
const char *vg_wake_reason_name(enum vg_wake_reason r); /* "subscription", ..., "user" */
/* A turn's wake: one that carries its own input in a session (a person's "user" turn, or what
 * vigil queues the same way: "spawn", "children", "task", "rerun", "resume"). Never merged
 * into another wake, and retried as a turn. */
int vg_wake_reason_is_turn(const char *reason);

struct vg_wake_req {
    enum vg_wake_reason reason;
    const char *agent_id;
    const char *reason_id;      /* subscription or timer id, session id */
    const char *batch_identity; /* subscription */
    int64_t scheduled_ms;       /* timer */
    const char *session_id;     /* user */
    const char *turn_id;        /* user */
    /* A user-kind wake that no person asked for, recorded under this reason instead of "user":
     * "spawn" (a spawned child's run), "children" (a parent woken with its children's
     * results), "task" (a task's run), "rerun", "resume". NULL: "user". */
    const char *label;
    const char *const *tokens; /* trigger tokens (copied) */
    size_t n_tokens;
    json_t *seed_input; /* borrowed: user text or manual message */
    json_t *meta;       /* borrowed: e.g. {"timer_catchup":{...}} */
    const char *source; /* suppression tag for notifications raised while enqueuing */
    /* NULL, or the kind the agent must be of (a task's: the dispatcher picked the agent from
     * a kept list of that kind's agents); another kind is refused as a dormant agent is. */
    const char *kind;
    /* 1: a refusal (agent dormant, destroyed, gone, of another kind, or under a kill switch)
     * writes nothing and fails nothing: *res VG_ENQ_SKIPPED, out_key "". The dispatcher's
     * rounds (one flat transaction, no savepoint a task) then leave the task ready. */
    int refuse_quietly;
    /* NULL, or the run key to use (64 hex digits) instead of the one derived from the reason:
     * a task's run is keyed by its task and attempt (src/orch: the task's running state is
     * its wake's existence, found by that key). A second enqueue under it is a duplicate. */
    const char *run_key;
    /* 0, or the wall time (ms) before which the wake is not claimed (a task's retry waits out
     * its backoff this way, as a failed wake's recovery does). */
    int64_t not_before_ms;
};

enum vg_enqueue_result { VG_ENQ_NEW, VG_ENQ_MERGED, VG_ENQ_DUPLICATE, VG_ENQ_SKIPPED };
/* A skipped wake's reason when a kill switch stopped it, which callers answer as EKILLED (the
 * same code as a chat turn the switch stopped) rather than as the agent's state. */
#define VG_WAKE_SKIP_KILLED "kill switch is on"
/* A skipped wake's reason when its agent is dormant (paused, or after repeated failures). */
#define VG_WAKE_SKIP_DORMANT "agent is dormant"
/* The skip reason of a subscription's or timer's wake of an interactive agent. */
#define VG_WAKE_SKIP_INTERACTIVE "agent is interactive: its subscriptions and timers do not wake it"

/*
 * Enqueue a wake: in one transaction, increment the agent's wake counter (revision-guarded),
 * derive the run key and insert the wake_run record as queued; or merge into the agent's
 * queued wake; or refuse (skipped record) for a dormant/destroyed agent or an active kill
 * switch. out_key (65) receives the run key (the queued one when merged).
 */
vigil_code vg_wake_enqueue(struct vg_wake *w, const struct vg_wake_req *req, char out_key[65],
                           enum vg_enqueue_result *res, vigil_error *err);

/* Run keys (hex SHA-256) and thread ids as docs/internals/WAKE.md defines them. */
void vg_run_key_subscription(char out[65], const char *agent, const char *sub,
                             const char *batch_identity, int64_t wake_counter);
void vg_run_key_timer(char out[65], const char *agent, const char *timer, int64_t scheduled_ms);
void vg_run_key_user(char out[65], const char *agent, const char *session, const char *turn);

/* A claimed wake: what a runner gets. */
struct vg_wake_job {
    char agent_id[37];
    char run_key[65];
    char thread_id[160];
    char reason[16];
    char original_reason[16]; /* a recovery's first reason ("" when not a recovery) */
    /* A failed run's retry: the first attempt's run key, which the retry's operation ids derive
     * from so that an effect the failed attempt had is not done again ("" otherwise). */
    char operation_key[65];
    char reason_id[201];
    char session_id[201];
    json_t *tokens;       /* array of merged trigger tokens (owned by the job) */
    json_t *seed_input;   /* or NULL (owned) */
    json_t *meta;         /* wake metadata, e.g. timer_catchup (owned object) */
    int64_t epoch;        /* lease epoch: pass to vg_wake_lease_check in every write */
    int attempt;          /* 1 on the first start, 2 after a recovery, ... */
    struct vg_wake *wake; /* borrowed, may be NULL: report mutated ids with
                             vg_wake_note_mutations(job->wake, ...) */
    /* The wake-log entry as the claim wrote it, and its revision then (owned): the finish
     * writes the run's end from it instead of reading it back. Only the wake module's. */
    json_t *run;
    int64_t run_rev;
    /* The agent's lease as the claim wrote it, and its revision then (owned; NULL: the claim
     * made the agent's first lease): the finish releases it from that when nothing wrote the
     * lease since (a renewal or a recovery moves the revision), instead of parsing it again.
     * Only the wake module's. */
    json_t *lease;
    int64_t lease_rev;
};
void vg_wake_job_release(struct vg_wake_job *j);

/*
 * Claim the oldest runnable queued wake: take the agent's lease (a new epoch), mark the run
 * started and the runtime state running, in one transaction. *got 0 when nothing is runnable.
 * Wakes of dormant or destroyed agents, or under a kill switch, become skipped on the way.
 */
vigil_code vg_wake_claim(struct vg_wake *w, struct vg_wake_job *job, int *got, vigil_error *err);

/* 1 when the lease's holder ran on this host and its process is gone (lease records name
 * their holder's host, pid and process start). */
int vg_wake_lease_holder_gone(json_t *lease);
/* Fencing: ESTATE unless `epoch` is still the agent's current lease epoch. */
vigil_code vg_wake_lease_check(struct vg_env *env, const char *agent_id, int64_t epoch,
                               vigil_error *err);
/* Extend a held lease and record a heartbeat (the daemon renews running jobs every
 * cfg.heartbeat_ms). ESTATE when it was lost. */
vigil_code vg_wake_lease_renew(struct vg_env *env, const char *agent_id, int64_t epoch,
                               int64_t lease_ms, vigil_error *err);

/*
 * An interactive turn (`vigil chat`) holds the agent's lease for the turn, outside the wake
 * queue, so single-flight per agent holds between chats, the daemon and other processes.
 * take: *got = 1 and the new epoch when the lease was free (or expired); 0 when another run
 * holds it. give_back: release it if `epoch` still holds it (a later holder is left alone).
 */
vigil_code vg_wake_lease_take(struct vg_env *env, const char *agent_id, const char *holder,
                              int64_t lease_ms, int64_t *epoch, int *got, vigil_error *err);
vigil_code vg_wake_lease_give_back(struct vg_env *env, const char *agent_id, int64_t epoch,
                                   vigil_error *err);

/*
 * Inside the caller's write transaction (a write that is not a run's, such as memory
 * compaction's commit): hold the agent's lease until that transaction ends. The lease row is
 * locked for write, so no claim or take gets it meanwhile; its epoch moves on, so an earlier
 * holder presumed dead is fenced off from then on; and it is left free again in the same
 * transaction. *got 0 (nothing written) when a live run holds the agent. ECONFLICT when
 * another process inserted the agent's first lease meanwhile.
 */
vigil_code vg_wake_lease_hold_tx(struct vg_env *env, const char *agent_id, const char *holder,
                                 int *got, vigil_error *err);

/* VG_WAKE_CANCELLED: a person stopped the run under way (src/orch/runctl.c); it ended, is not
 * run again, and its wake-log entry says `cancelled` (with who, in its error), not `completed`. */

/* A queued run that a person cancelled (src/orch/runctl.c): its wake-log entry `run` (as the
 * caller read it at revision rev, in its transaction; changed to what is written) becomes
 * cancelled with `why`, which no claim takes, so it never starts. ESTATE unless it is queued;
 * ECONFLICT when it moved since it was read. */
vigil_code vg_wake_cancel_queued(struct vg_env *env, json_t *run, int64_t rev, const char *why,
                                 vigil_error *err);

/*
 * End a claimed run (lease-checked): completed; cancelled or stopped (as completed, but the
 * entry says `cancelled` or `stopped` with error_text, and the failure streak is left as it
 * is); failed (error text recorded, failure streak, exponential backoff through a recovery
 * wake, dormancy after max_failures); failed for good (FAILED_FINAL: the error, no more); or
 * interrupted
 * (re-queued under the same run key). The lease is released.
 */
vigil_code vg_wake_finish(struct vg_wake *w, const struct vg_wake_job *job,
                          enum vg_wake_outcome outcome, const char *error_text, vigil_error *err);

/*
 * Recovery at start: runs left started whose lease has expired, or whose holder is in
 * dead_holders_prefix (e.g. the previous daemon), are re-queued with the same run key and
 * reason recovery; their lease epoch moves on so the dead run cannot write. *n: re-queued.
 */
vigil_code vg_wake_recover(struct vg_wake *w, const char *dead_holders_prefix, int *n,
                           vigil_error *err);

/* Self-suppression fallback: the entity ids an agent's run mutated (kept for suppress_ttl). */
void vg_wake_note_mutations(struct vg_wake *w, const char *agent_id, const char *const *ids,
                            size_t n);

/* ---- runners ----------------------------------------------------------------------------------
 */

struct vg_wake_runner;

struct vg_wake_runner_methods {
    int version;      /* 1 */
    const char *name; /* "echo", "test", "loop" */
    unsigned caps;
    /*
     * Run one claimed wake on env. Every write transaction of the run must call
     * vg_wake_lease_check(env, job->agent_id, job->epoch, err) first. stop becomes non-zero when
     * the daemon shuts down past its grace period: return VG_WAKE_INTERRUPTED soon after.
     * On VG_WAKE_FAILED put the reason in error_text; on VG_WAKE_CANCELLED, who cancelled.
     */
    enum vg_wake_outcome (*run)(struct vg_wake_runner *r, struct vg_env *env,
                                const struct vg_wake_job *job, const volatile int *stop,
                                struct vg_buf *error_text);
    void (*destroy)(struct vg_wake_runner *r);
    /* Optional: called once before the daemon serves, on its own runtime's env. A failure stops
     * `vigil serve` at start with that error instead of failing every wake after it. */
    vigil_code (*check)(struct vg_wake_runner *r, struct vg_env *env, vigil_error *err);
    /* Optional: called once a run's end is committed and its lease given back, on the env it
     * ran on: best-effort work the run made due, which must not hold up the worker's next run
     * (the agent loop's: compaction, handed to a thread of the runtime's own). */
    void (*after)(struct vg_wake_runner *r, struct vg_env *env);
};

struct vg_wake_runner {
    const struct vg_wake_runner_methods *methods; /* must stay first */
};

static inline enum vg_wake_outcome vg_wake_runner_run(struct vg_wake_runner *r, struct vg_env *env,
                                                      const struct vg_wake_job *job,
                                                      const volatile int *stop,
                                                      struct vg_buf *error_text)
{
    return r->methods->run(r, env, job, stop, error_text);
}
void vg_wake_runner_free(struct vg_wake_runner *r);

/*
 * Runner by description: NULL, "" or "loop": loop, the agent loop's runner the runtime gives
 * (borrowed; EINVAL when NULL); another one from the factory given to vg_wake_runner_provide
 * (the tests' "echo" and "test:...", tests/helpers/wake_runners.h); EINVAL when none knows it.
 */
vigil_code vg_wake_runner_new(const char *desc, struct vg_wake_runner *loop,
                              struct vg_wake_runner **out, vigil_error *err);
/* A factory of runners by description: VIGIL_ENOTFOUND (err untouched) for one it does not
 * know. */
typedef vigil_code (*vg_wake_runner_factory)(const char *desc, struct vg_wake_runner **out,
                                             vigil_error *err);
/* Runners beyond the agent loop for this process (the tests'); NULL: none. */
void vg_wake_runner_provide(vg_wake_runner_factory factory);

/* Claim and run wakes until none is runnable; *ran counts runs. For in-process use. */
vigil_code vg_wake_drain(struct vg_wake *w, struct vg_wake_runner *r, int max_runs, int *ran,
                         vigil_error *err);

/* ---- the host ---------------------------------------------------------------------------------
 */

/*
 * What the daemon needs of the runtime above it. The composition root fills it in
 * (runtime/wake_runner.h, vg_runtime_wake_host), so the wake layer opens runtimes, runs wakes
 * through the agent loop and honours kill switches without including a layer above it.
 */
struct vg_wake_host {
    /* Open a runtime on the store at store_path with the real clock; *env: its ports. Closed
     * with vigil_runtime_close. */
    vigil_code (*open)(const char *store_path, vigil_runtime **out, struct vg_env **env,
                       vigil_error *err);
    /* 1 when runs on rt may take turns (park) on one worker; 0 while its model answers one
     * conversation in order (a capability bit of the model port). */
    int (*runs_may_interleave)(vigil_runtime *rt);
    vg_kill_query_fn kill;              /* the tool layer's kill switches */
    struct vg_wake_runner *loop_runner; /* the default runner: the agent loop */
    /* Optional: the upper layers' own sweeps, run by the daemon's loop once a second (the
     * orchestrator's expired approvals). A failure is reported and retried next time. */
    vigil_code (*sweep)(struct vg_env *env, struct vg_wake *w, vigil_error *err);
};

/* ---- the daemon -------------------------------------------------------------------------------
 */

/*
 * A service run beside the daemon (the HTTP API, src/http): the daemon knows it only through
 * this port. start runs once the daemon holds the store's lock and its workers run (so a second
 * daemon never binds anything); a failure stops the daemon. stop runs once the loop has ended,
 * before the workers stop. poke(poke_user) asks the daemon to look at its queue now.
 */
struct vg_daemon_service {
    void *user;
    vigil_code (*start)(void *user, void (*poke)(void *), void *poke_user, vigil_error *err);
    void (*stop)(void *user);
};

struct vg_daemon_options {
    const char *store_path;
    int workers;         /* 2: threads, each with its own store connection */
    int runs_per_worker; /* 16: runs a worker keeps going at once, as fibers (os/fiber.h) */
    int64_t grace_ms;    /* 10000 */
    int64_t poll_ms;     /* 200: how often the store's durable queue is polled */
    const char *runner;  /* runner description; NULL: "loop" (the agent loop) */
    struct vg_wake_config cfg;
    const struct vg_wake_host *host;         /* required: the runtime's (vg_runtime_wake_host) */
    const struct vg_daemon_service *service; /* optional */
    /* Optional: called with each runtime the daemon opens (its loop thread's, then each
     * worker's), on the calling thread, before anything runs on it (the embedding program's
     * tools), and with each its service opens (vg_daemon_on_runtime, on the service's thread),
     * one call at a time. A failure stops the daemon with that error (a service's runtime: the
     * service gets it). */
    vigil_code (*on_runtime)(void *user, vigil_runtime *rt, vigil_error *err);
    void *on_runtime_user;
};

/* Serve until SIGINT/SIGTERM or vg_daemon_stop. EBUSY when another daemon holds the store's
 * lock file. */
vigil_code vg_daemon_run(const struct vg_daemon_options *o, vigil_error *err);
/* Stop the daemons of this process serving store_path (its text as given to vg_daemon_run),
 * as SIGTERM would, without a signal; any thread. ENOTFOUND when none does. */
vigil_code vg_daemon_stop(const char *store_path, vigil_error *err);
/* Hand rt (opened by a service of the daemon of this process serving store_path) to that
 * daemon's on_runtime, as its own runtimes are: calls take turns. VIGIL_OK when it has none;
 * ENOTFOUND when no daemon of this process serves store_path (before its service starts, or
 * once it stops), else the hook's error. */
vigil_code vg_daemon_on_runtime(const char *store_path, vigil_runtime *rt, vigil_error *err);
/* 1 if a daemon holds the store's lock, with its pid in *pid (may be NULL). */
int vg_daemon_running(const char *store_path, long *pid);
/* Tell a running daemon to look at the store's queue now (its control socket); best effort. */
void vg_daemon_poke(const char *store_path);

/* The `daemon` records of a shared store (fleet.c). A record is stale when its beat is
 * VG_WAKE_BEATS_MISSED beats old (default lease) or, on this host, its process is gone. */
int vg_daemon_record_stale(const json_t *d, int64_t now_ms);
/* How long a live daemon keeps another's record past its last beat before removing it: a day,
 * so `vigil status` shows a killed daemon for that long. */
#define VG_DAEMON_RECORD_KEEP_MS (24 * 3600 * 1000LL)
/* Remove the daemon records whose beat is before beat_before_ms, or (beat_before_ms 0) the
 * stale ones; *removed (may be NULL) counts them. One already gone is not an error. */
vigil_code vg_daemon_records_prune(struct vg_env *env, int64_t beat_before_ms, int *removed,
                                   vigil_error *err);

#endif
