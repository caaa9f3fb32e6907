/*
 * loop.h: the agent loop. One call runs one run of an agent on one thread: it opens the run's
 * journal (header first), appends the input, assembles context, calls the model, executes the
 * tool calls it asks for through a tool executor, feeds the results back and repeats, within
 * the limits below. Every turn (input, assistant message, action, tool result) is appended to
 * the store as it happens, so a crash loses at most the model call in flight, and a failed model
 * call leaves no half-applied turn.
 *
 * The loop sees only ports: the store (through struct vg_env), the model port, the tool
 * executor interface below, the clock and the ids.
 */
#ifndef VG_LOOP_H
#define VG_LOOP_H

#include "env/env.h"

#include <jansson.h>

struct vg_model;
struct vg_config;
struct vg_run;

/* ---- the tool executor interface ---------------------------------------------------------- */

/* Who is calling a tool: borrowed for the call. */
/* What a model call used, charged to the agent's budgets (one step with it). */
struct vg_loop_charge {
    int64_t tokens, cost_micros, wall_ms;
};

struct vg_loop_call_ctx {
    const char *agent_id;
    const char *run_id;
    const char *run_key;
    const char *operation_key; /* vg_loop_input's */
    const char *thread_id;
    const char *wake_reason;
    const char *tool_call_id; /* the model's id for this call (changes when it re-plans) */
    const volatile int *halt; /* vg_loop_observer's */
    /* Optional: vg_loop_observer's cancel and its user, for a tool that can stop at once when
     * the run is cancelled while it runs (vigil's own sandbox kills its program: trial L6). */
    int (*cancelled)(void *user);
    void *cancelled_user;
    /* The run's journal: a tool that makes calls of its own (the sandbox's bridge) records them
     * in it beside the model's (vg_tool_call_ctx.journal_run). */
    struct vg_run *run;
    /* The run's fence (vg_loop_input.fence), or NULL: the executor calls it inside the
     * transaction that records an operation as started, so a run presumed dead cannot start
     * an effect its successor may already have run. */
    vigil_code (*fence)(void *user, struct vg_env *env, vigil_error *err);
    void *fence_user;
    /* With an executor that fences effects: the loop's transaction holding the call's start
     * (with the turn, for its first call) is still open, for the executor to commit durably
     * with its started operation as the barrier before the effect; a call it refuses or ends
     * before that returns with the transaction open (the outcome's tx_open). */
    int start_open;
    /* Optional: the executor tells it once the call's start is durable, before the effect and
     * outside any transaction. */
    void (*started)(void *user);
    void *started_user;
    /* With an executor that takes the turn's charge (takes_turn_charge), for the turn's first
     * call (start_open): the model call's charge, held back from the turn's transaction, for the
     * executor to write with the call's own; it sets *turn_charge_written once it is in that
     * transaction, else the loop writes it. NULL: none held back. */
    const struct vg_loop_charge *turn_charge;
    int *turn_charge_written;
    /* With an executor that records messages: the journal's end of the call, for the
     * toolResult message it writes (vg_tool_call_ctx's result_end, the same contract). */
    vigil_code (*result_end)(void *user, char message_id[37], const char *content, int is_error,
                             const char *error_code, int has_decisions, char **end_json,
                             vigil_error *err);
    void *result_end_user;
    /* With an executor that records messages: the journal's start of the call, for the action
     * message it writes (vg_tool_call_ctx's action_start, the same contract). */
    vigil_code (*action_start)(void *user, char message_id[37], char **start_json,
                               vigil_error *err);
    void *action_start_user;
};

/* A tool's answer. content is owned by the outcome (vg_free); the loop frees it. */
struct vg_loop_tool_outcome {
    int is_error;          /* the result is an error the model should see */
    char *content;         /* result text, journaled as given (JSON text by convention);
                              the model reads the gate's envelope as its answer (window.h) */
    char error_code[32];   /* standard code ("invalid_arguments", "killed", ...) or "" */
    char operation_id[65]; /* the runtime-minted operation id, or "" */
    int stop_run;          /* the executor asks the loop to end the run (kill switch) */
    int tx_open;           /* the executor left the transaction recording the call's end open:
                              the loop's own end of the call joins it and commits it */
    json_t *decisions;     /* owned, or NULL: policy decisions the tool made, [{kind, reason}],
                              journaled as one record of the run
                              (vg_journal_policy_decisions) */
};

/*
 * The tool executor. visible_tools lists what the model may see for this agent in this run (a
 * spawned child's run sees only what its grant allows), as a JSON array
 * of {"name","description","input_schema"} (owned by the caller). call runs one tool call
 * (args_json is the model's arguments text, possibly invalid) and fills *out; a tool failure is
 * an outcome with is_error set, not a vigil_code: a non-OK return means the executor itself
 * broke and the run fails. records_messages: the executor appends the action and toolResult
 * messages itself (the gated executor does); otherwise the loop appends them.
 * fences_effects: the executor makes everything durable before a tool's effect itself (one
 * durable commit, holding the call's started operation, just before the effect) and otherwise
 * commits in the mode the loop leaves (group commit): the loop then commits the turn and the
 * call's records lazily instead of making its own durable barrier before the call.
 * takes_turn_charge (with fences_effects): the executor may write a turn's charge with its
 * first call's own (vg_loop_call_ctx.turn_charge), and the loop holds it back for that.
 */
struct vg_loop_executor {
    void *self;
    int records_messages;
    int fences_effects;
    int takes_turn_charge;
    vigil_code (*visible_tools)(void *self, struct vg_env *env, const char *agent_id,
                                const char *run_key, json_t **out, vigil_error *err);
    vigil_code (*call)(void *self, struct vg_env *env, const struct vg_loop_call_ctx *ctx,
                       const char *name, const char *args_json, struct vg_loop_tool_outcome *out,
                       vigil_error *err);
    /* Optional (NULL: none). Before each model call: why the run must stop now (a kill switch,
     * an exhausted budget) written to stop (n bytes), or "" to go on. */
    vigil_code (*gate)(void *self, struct vg_env *env, const char *agent_id, char *stop, size_t n,
                       vigil_error *err);
    /* Optional. After each model call: charge what it used to the agent's budgets. */
    vigil_code (*charge)(void *self, struct vg_env *env, const char *agent_id, int64_t tokens,
                         int64_t cost_micros, int64_t wall_ms, vigil_error *err);
    /* Optional. At the start of a run: what was decided while the agent was away (resolved
     * approvals and what the approved operations did), as a JSON array (owned) of
     * {"note": text, "tool_call"?: {name, operation_id, input, output (JSON text), is_error,
     * error_code?, approval (who approved it)}}: the loop appends each note to the thread as a
     * system message, so the model sees it, and journals each approved call that ran as a tool
     * call of this run with its approval, so the run's views and export show it (trial F12). */
    vigil_code (*notes)(void *self, struct vg_env *env, const struct vg_loop_call_ctx *ctx,
                        json_t **out, vigil_error *err);
};

/* ---- the memory interface ----------------------------------------------------------------- */

/*
 * Where the agent's memory comes from (src/memory fills it in; every member may be NULL).
 * start: at the beginning of a run (seed a first-run agent's core memory; what a person decided
 * about pending memory changes, as a JSON array of texts (owned) the loop appends as system
 * messages). prefix: before each model call, the system text (prompt and core memory, current
 * report, observation notes, working memory, summaries of older spans) within the token budget;
 * owned, vg_free. after_run: when the run has closed (schedule compaction of the thread);
 * context_tokens is the run's context budget (vg_loop_limits.context_tokens), which the turns
 * that leave the window must not wait far past to be summarized.
 */
struct vg_loop_memory {
    void *self;
    vigil_code (*start)(void *self, struct vg_env *env, const char *agent_id, const char *thread_id,
                        json_t **notes, vigil_error *err);
    vigil_code (*prefix)(void *self, struct vg_env *env, const char *agent_id,
                         const char *thread_id, const char *prompt, char **out, vigil_error *err);
    vigil_code (*after_run)(void *self, struct vg_env *env, const char *agent_id,
                            const char *thread_id, int64_t context_tokens, vigil_error *err);
};

/* ---- limits ------------------------------------------------------------------------------- */

#define VG_LOOP_TIMEOUT_MS 600000 /* a run's wall time when its limits set none */

struct vg_loop_limits {
    int max_steps;        /* model calls before the soft stop; 0: no limit (the journal: null) */
    int hard_extra_steps; /* model calls allowed after the soft stop; 0: 1 */
    int max_tool_rounds;  /* turns that ask for tools before the soft stop; 0: 20 */
    int64_t timeout_ms;   /* run wall time before the soft stop; 0: VG_LOOP_TIMEOUT_MS */
    int64_t grace_ms;     /* after the timeout, time to finish before the hard stop; 0: 30000 */
    int doom_warn;        /* identical consecutive tool calls that get an error result; 0: 3 */
    int doom_stop;        /* identical consecutive tool calls that end the run; 0: 5 */
    int total_steps_cap;  /* model calls over every run of a thread; 0: 500 */
    /* Token budget of each model call's context (system text, tools, messages); 0: the agent's
     * config.context_tokens, else agent.context_budget (0.8) of the model's context window
     * (config model.context_window, else known from the model id, else 128k: 102400). */
    int64_t context_tokens;
    int max_tokens; /* per model call; 0: the provider default */
    /* What the run may spend (a spawned child's token_budget and cost_budget_usd, less what
     * its earlier runs spent): once its answered calls reach either, the run stops hard before
     * its next model call, as when a daily budget is spent (stop reason budget_exceeded:tokens
     * or budget_exceeded:cost). Tokens count input and output. 0: no limit; negative: spent
     * already (the run stops before its first model call). */
    int64_t spend_tokens;
    int64_t spend_cost_micros;
};

/* ---- one run ------------------------------------------------------------------------------ */

/* Streaming callbacks for interactive use (all optional). */
struct vg_loop_observer {
    void *user;
    void (*on_text)(void *user, const char *delta, size_t len);
    void (*on_tool_start)(void *user, const char *name, const char *args_json);
    void (*on_tool_done)(void *user, const char *name, int is_error, const char *content);
    int (*cancel)(void *user); /* non-zero: cancel the current turn (Ctrl-C) */
    /* Optional: after cancel said yes, who or what cancelled, for the run record's error
     * ("canceled by NAME"); NULL or "" leaves the error empty. */
    const char *(*cancel_reason)(void *user);
    /* Optional: non-zero once the host stops for good (a daemon past its grace period; cancel
     * says yes then too): the run ends interrupted (it runs again later), not canceled, unless
     * a person's cancel (cancel_reason names them) came first; a running command tool is
     * killed. */
    const volatile int *halt;
};

struct vg_loop_input {
    const char *agent_id;  /* required */
    const char *thread_id; /* required */
    const char *run_key;   /* required: the idempotency key of this run */
    /* Optional: what the run's operation ids derive from instead of run_key (a failed run's
     * retry: the first attempt's key, so its effects are answered from their records). */
    const char *operation_key;
    const char *wake_reason; /* required: "user", "timer", "subscription", "manual", ... */
    const char *input;       /* the new input (user text or the wake delta); may be NULL */
    /* The input's kind and who wrote it: "user" (default: a person's words), "daemon" (a turn
     * vigil built: a spawned child's goal, its children's results, a task; the model reads it
     * as a user message, the journal says the daemon sent it) or "observation" (a wake delta) */
    const char *input_kind;
    const char *parent_run_id; /* optional */
    struct vg_model *model;    /* borrowed */
    const char *model_name;    /* optional: this run's model name (a re-run's override), over the
                                * agent's */
    const struct vg_config *config;          /* borrowed, optional: prices for cost */
    const struct vg_loop_executor *executor; /* borrowed, optional: no tools when NULL */
    const struct vg_loop_memory *memory;     /* borrowed, optional: the prompt alone */
    /* Optional fencing: called inside every write transaction of the run, before its writes;
     * an error aborts the phase and fails the run (the wake system's lease epoch check, so a
     * run presumed dead never writes after its successor started). */
    vigil_code (*fence)(void *user, struct vg_env *env, vigil_error *err);
    void *fence_user;
    /* Optional: called with fence_user inside the run's close transaction, after the close's
     * writes, in a savepoint of its own (vigil_chat gives the agent's lease back there: one
     * commit with the close instead of one more). vg_loop_result.closed_with says whether its
     * writes committed with the close; a failure of its own undoes only them. */
    vigil_code (*on_close)(void *user, struct vg_env *env, vigil_error *err);
    const struct vg_loop_observer *observer; /* borrowed, optional */
    struct vg_loop_limits limits;
};

enum vg_loop_end {
    VG_LOOP_COMPLETED = 0, /* the model answered without asking for more tools */
    VG_LOOP_SOFT_STOPPED,  /* a limit asked the model to summarize and stop, and it did */
    VG_LOOP_HARD_STOPPED,  /* a limit ended the run */
    VG_LOOP_DOOM_LOOP,     /* the same tool call repeated doom_stop times */
    VG_LOOP_CANCELED,      /* the observer canceled */
    VG_LOOP_FAILED,        /* the model or the store failed; see the error */
    VG_LOOP_MAX_TOKENS     /* the model's answer was cut by max_tokens inside its tool calls;
                            * none of them ran */
};

const char *vg_loop_end_name(enum vg_loop_end e);

struct vg_loop_result {
    enum vg_loop_end end;
    char run_id[37];
    char *final_text; /* owned (vg_free): the last assistant text, "" if none */
    int steps;        /* model calls made */
    int tool_calls;   /* tool calls executed (or refused) */
    int64_t input_tokens, output_tokens, cached_tokens;
    double cost_usd;      /* 0 when the model has no price */
    int scripted;         /* a scripted model answered (label it as such) */
    char stop_reason[64]; /* why a stop happened ("max_steps", "timeout", ...) or "" */
    int closed_with;      /* vg_loop_input.on_close's writes committed with the run's close */
    /* The run's context budget as resolved (0 when it did not start): what the memory's
     * after_run is given, for a caller that runs it later (a turn's deferred upkeep). */
    int64_t context_tokens;
};

/*
 * Run the loop. Returns VIGIL_OK when the run ended in an orderly way (completed, stopped,
 * doom loop, canceled: see out->end) and an error when it could not start (the journal header
 * could not be written, the agent is not runnable) or the model/store failed mid-way (the run
 * is closed as failed and out->end is VG_LOOP_FAILED). out->final_text must be freed with
 * vg_loop_result_release in every case.
 */
vigil_code vg_loop_run(struct vg_env *env, const struct vg_loop_input *in,
                       struct vg_loop_result *out, vigil_error *err);
void vg_loop_result_release(struct vg_loop_result *r);

/* The thread id conventions: "<agent>:session:<name>" and "<agent>:run:<run key>". */
void vg_loop_session_thread(char *out, size_t n, const char *agent_id, const char *session);
/* The run key of a user turn: SHA-256 of agent, session and turn id. */
void vg_loop_user_run_key(char out[65], const char *agent_id, const char *session,
                          const char *turn_id);

#endif
