/*
 * compact.h: compaction of thread history into summary messages (docs/internals/MEMORY.md).
 *
 * A thread's raw messages are never changed. When the part of a thread not yet covered by a
 * summary passes its token budget, a compaction job is persisted for the oldest uncovered span;
 * a worker (never the run itself) claims it, asks a summarizer for the text and commits, in one
 * transaction: the summary message (id derived from agent, thread, start, end and depth, so a
 * replay or a second worker can never make a second one), its summary_start/summary_end links,
 * the thread's compaction cursor, the agent state's latest_summary_message_id, and the job's
 * done status. Summaries go to the thread's summary thread ("<thread>~summaries"); when enough
 * depth-1 summaries pile up there, they are summarized again at depth 2.
 *
 * Record kinds:
 *   compaction_job    id=cj_<span hash>  owner=agent k1=<thread key> k2=status seq=next attempt ms
 *   compaction_cursor id=cc_<thread hash> owner=agent k1=thread seq=last summary ms (covered
 *                     seq, counts, level-2 progress, latest_summary_id)
 * Jobs and cursors are local execution state: never synced (S0-030).
 */
#ifndef VG_MEMORY_COMPACT_H
#define VG_MEMORY_COMPACT_H

#include "memory/memory.h"

/* ---- summarizers ---------------------------------------------------------------------------- */

struct vg_summarizer;

struct vg_summarizer_methods {
    int version; /* 1 */
    const char *name;
    /*
     * Summarize `messages` (borrowed array of message objects, oldest first; for depth 2 they
     * are summaries) into at most max_tokens tokens of text (*out owned, vg_free). Failures:
     * ERATELIMIT / EBUDGET (the fallback runs at once), anything else (retried with backoff).
     */
    vigil_code (*summarize)(struct vg_summarizer *s, json_t *messages, int depth, int max_tokens,
                            char **out, vigil_error *err);
};

struct vg_summarizer {
    const struct vg_summarizer_methods *methods; /* must stay first */
};

vigil_code vg_summarize(struct vg_summarizer *s, json_t *messages, int depth, int max_tokens,
                        char **out, vigil_error *err);
/* The deterministic fallback: the first sentence of each message (role-tagged), bounded. */
struct vg_summarizer *vg_summarizer_extractive(void);
/* The fixed prompt contract the LLM summarizer sends (S0-034); %d: the token limit. */
extern const char vg_summary_prompt[];

/* The LLM summarizer over a model provider (borrowed). Embed it, init it, pass &s->base. */
struct vg_model;
struct vg_summarizer_model {
    struct vg_summarizer base; /* must stay first */
    struct vg_model *model;
};
void vg_summarizer_model_init(struct vg_summarizer_model *s, struct vg_model *model);

/* ---- policy --------------------------------------------------------------------------------- */

/* See vg_compaction_policy.hold. */
typedef vigil_code (*vg_compact_hold_fn)(void *user, struct vg_env *env, const char *agent_id,
                                         int *held_by_run, vigil_error *err);

struct vg_compaction_policy {
    int64_t thread_budget;   /* uncovered tokens that trigger compaction; 0: 0.8 * 128000 / 2 */
    int64_t keep_tokens;     /* newest uncovered tokens left raw; 0: thread_budget / 2 */
    int span_max;            /* most messages per span; 0: 200 */
    int summary_tokens;      /* summary length limit; 0: 400 */
    int level2_fanout;       /* depth-1 summaries per depth-2 summary; 0: 8 */
    int max_attempts;        /* then failed_terminal; 0: 5 */
    int fallback_after;      /* failed model attempts before the fallback runs; 0: 2 */
    int64_t backoff_base_ms; /* 0: 1000 */
    int64_t backoff_max_ms;  /* 0: 300000 */
    int64_t lease_ms;        /* a running job not finished by then is claimable again; 0: 120000 */
    /* Holds the agent's lease for the commit's transaction, so the commit is fenced like a
     * run's writes (the runtime's: vg_wake_lease_hold_tx). Called in that transaction before it
     * writes; *held_by_run 1 (and OK) when a run holds the agent: the job goes back to pending
     * for a while, its attempt not counted. Any error (a busy store too) fails the attempt as
     * any other. NULL: the commit holds nothing (one process, no runs). */
    vg_compact_hold_fn hold;
    void *hold_user;
};

/* The summary thread of a thread (where its summaries are appended). */
void vg_compact_summary_thread(const char *thread_id, char out[VG_RECORD_ID_MAX]);
/* The cursor of a thread (owned), or a fresh zero cursor when it has none. */
vigil_code vg_compact_cursor(struct vg_env *env, const char *agent_id, const char *thread_id,
                             json_t **out, int64_t *rev, vigil_error *err);
/* What the cursor covers, read only (0 and 0 when it has none): the raw messages up to
 * *covered and the depth-1 summaries up to *l2_covered. What a context and the check after a
 * run read, without a cursor of their own. */
vigil_code vg_compact_covered(struct vg_env *env, const char *agent_id, const char *thread_id,
                              int64_t *covered, int64_t *l2_covered, vigil_error *err);

/*
 * Consider a thread after a run (S0-044): when the uncovered history passes the budget and no
 * job of the thread is open, persist a pending job for the oldest span (or a depth-2 job when
 * depth-1 summaries pile up). Cheap and bounded. *job_id (optional, VG_RECORD_ID_MAX) gets the
 * job scheduled, "" when none.
 */
vigil_code vg_compact_consider(struct vg_env *env, const char *agent_id, const char *thread_id,
                               const struct vg_compaction_policy *p, char *job_id,
                               vigil_error *err);

/*
 * From now on, count in env each thread's messages as this process appends them, for checks
 * under policy p: a thread's first message starts its count (otherwise the first check after a
 * run reads the thread). A process whose conversations all start before any run has ended
 * (vigil_chat_many, the daemon's first turn) then reads back only each thread's newest message.
 */
void vg_compact_keep_tallies(struct vg_env *env, const struct vg_compaction_policy *p);

/*
 * Run one ready job (pending with next attempt due, or running with an expired lease): claim it
 * (revision-guarded), summarize outside any transaction, commit. primary may be NULL (fallback
 * only). *ran: 1 when a job was processed (done, retried or failed), 0 when none was ready.
 */
vigil_code vg_compact_run_one(struct vg_env *env, struct vg_summarizer *primary,
                              const struct vg_compaction_policy *p, int *ran, vigil_error *err);

/* A job's body (owned) or ENOTFOUND. */
vigil_code vg_compact_job_get(struct vg_env *env, const char *job_id, json_t **out,
                              vigil_error *err);
/* Put a failed_terminal job back to pending with its attempts reset (manual retry, S0-040). */
vigil_code vg_compact_job_retry(struct vg_env *env, const char *job_id, vigil_error *err);

/* Steps of run_one, exposed so tests can replay and interleave workers. */
vigil_code vg_compact_claim(struct vg_env *env, const struct vg_compaction_policy *p,
                            char job_id[VG_RECORD_ID_MAX], json_t **job, vigil_error *err);
vigil_code vg_compact_commit(struct vg_env *env, json_t *job, const char *summary,
                             const char *summarizer, vigil_error *err);
/* The same, holding the agent's lease through p->hold first (p may be NULL); EBUSY (nothing
 * written) when a run holds the agent. */
vigil_code vg_compact_commit_held(struct vg_env *env, const struct vg_compaction_policy *p,
                                  json_t *job, const char *summary, const char *summarizer,
                                  int *held_by_run, vigil_error *err);

#endif
