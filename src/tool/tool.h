/*
 * tool.h: the tool layer (docs/tools.md): tool contracts and the registry, per-agent
 * resolution, the tool-provider port, the gated idempotent executor, approvals, kill switches
 * and budgets. The agent loop sees only vg_tool_executor_call / _visible_tools and the budget,
 * kill and approval functions below; docs/internals/TOOLS.md explains the design.
 *
 * Record kinds (store/port.h columns: owner, k1, k2, seq):
 *   operation    id=operation id  owner=agent  k1=status (started|finished)  k2=tool   seq=ms
 *   saga         id=operation id  owner=agent  k1=phase   k2=status (pending|completed|failed)
 *   in_doubt     id=operation id  owner=agent  k1=status (pending|applied|retry)  k2=tool
 *   approval     id=uuid          owner=agent  k1=status (pending|approved|rejected|expired)
 *                                              k2=operation id  seq=created ms
 *   kill_switch  id=global | agent:<id> | class:<name>   k1=on|off
 *   budget_usage id=<agent>:<yyyy-mm-dd>  owner=agent  k1=yyyy-mm-dd
 */
#ifndef VG_TOOL_H
#define VG_TOOL_H

#include "env/env.h"

#include <jansson.h>

struct vg_run; /* journal/journal.h: a run's journal, passed through to providers */

/* ---- standard error codes (one table: codes.c) --------------------------------------------- */

enum vg_tool_code {
    VG_TOOL_OK = 0,
    VG_TOOL_INVALID_ARGUMENTS,
    VG_TOOL_OUT_OF_SCOPE,
    VG_TOOL_CONFIRMATION_REQUIRED,
    VG_TOOL_BUDGET_EXCEEDED,
    VG_TOOL_UNSAFE_TARGET,
    VG_TOOL_KILLED,
    VG_TOOL_TIMEOUT,
    VG_TOOL_FAILED, /* "tool_failed" */
    VG_TOOL_NOT_ALLOWED,
    VG_TOOL_UNKNOWN_TOOL,
    VG_TOOL_IN_DOUBT,
    VG_TOOL_REJECTED,
    VG_TOOL_NOT_CONFIGURED, /* a secret the tool's declaration references is not set */
    VG_TOOL_CANCELED,       /* stopped because its run was cancelled (the sandbox's program) */
    VG_TOOL_CODE_COUNT
};

/* "invalid_arguments", ...; "" for VG_TOOL_OK. */
const char *vg_tool_code_name(enum vg_tool_code c);
/* The vigil_code a public caller sees for a tool error code (VIGIL_OK for VG_TOOL_OK). */
vigil_code vg_tool_code_vigil(enum vg_tool_code c);
int vg_tool_code_parse(const char *name, enum vg_tool_code *out);

/* ---- contracts ------------------------------------------------------------------------------ */

enum vg_tool_risk { VG_RISK_LOW, VG_RISK_MEDIUM, VG_RISK_HIGH };
enum vg_tool_idem { VG_IDEM_IDEMPOTENT, VG_IDEM_RECONCILABLE, VG_IDEM_NON_IDEMPOTENT };
/* Scope rules: agent = touches only the agent's own records; unscoped = no scoped host data;
 * argument = the named arguments ARE scope ids; target = the named arguments are entity ids
 * whose scope the host's resolver must name (unresolvable: out_of_scope). */
enum vg_tool_scope_rule { VG_SCOPE_AGENT, VG_SCOPE_UNSCOPED, VG_SCOPE_ARGUMENT, VG_SCOPE_TARGET };

struct vg_schema;

/* One tool's contract, parsed from its JSON entry (docs/tools.md lists the fields). */
struct vg_tool_def {
    json_t *contract; /* owned: the normalized contract entry (defaults filled in) */
    const char *name; /* borrowed from contract */
    const char *tool_class;
    enum vg_tool_risk risk;
    enum vg_tool_idem idem;
    enum vg_tool_scope_rule scope_rule;
    json_t *scope_args;       /* borrowed: argument names the scope rule reads */
    int mutating;             /* 1: refused by kill switches, recorded as an operation */
    int requires_approval;    /* high risk, or the contract says so */
    struct vg_schema *input;  /* compiled input schema (owned) */
    struct vg_schema *output; /* compiled output schema or NULL (owned) */
};

/* Parse and normalize one contract entry (borrowed). *out owned: vg_tool_def_free. */
vigil_code vg_tool_def_parse(const json_t *entry, struct vg_tool_def **out, vigil_error *err);
void vg_tool_def_free(struct vg_tool_def *d);
/* Structural check of a whole contract file ({"version":1,"tools":[...]}) beyond its schema:
 * every entry parses, names are unique. */
vigil_code vg_tool_contracts_check(const json_t *file, vigil_error *err);

/* ---- the tool-provider port ----------------------------------------------------------------- */

struct vg_tool_provider;

/* What a provider gets for one call. Everything is borrowed for the call. */
struct vg_tool_request {
    struct vg_env *env;
    const struct vg_tool_def *def;
    const char *tool;
    const char *agent_id;
    const char *run_key;
    const char *thread_id;
    const char *run_id;
    const char *wake_reason;
    const char *operation_id;
    json_t *args;     /* validated, defaults applied */
    int preview_only; /* describe the effect, change nothing */
    /* Optional: non-zero once the host stops for good (a daemon past its grace period): a
     * provider that waits (a command tool) ends the call at once, killing what it started. */
    const volatile int *halt;
    /* Optional: non-zero once a person cancelled the call's run (`vigil runs cancel`; a store
     * read, so polled about once a second at most): a provider that can stop its effect at
     * once (the sandbox kills its program) answers VG_TOOL_CANCELED. */
    int (*cancelled)(void *user);
    void *cancelled_user;
    /* Optional: the run this call is part of (vg_tool_call_ctx.journal_run), for a provider
     * whose own nested calls belong in that run's journal (the sandbox's bridge). */
    struct vg_run *journal_run;
};

/* What a provider answers. Zero-initialize; the executor releases it. */
struct vg_tool_response {
    enum vg_tool_code code;     /* VG_TOOL_OK or the tool's error */
    int partial;                /* with VG_TOOL_OK: only part of the effect happened */
    int stopped;                /* with an error: stopped mid-run (a signal), may have acted */
    char message[256];          /* error text */
    json_t *result;             /* owned: payload or NULL */
    json_t *changed_entity_ids; /* owned: array of strings or NULL */
    json_t *changed_tokens;     /* owned: array of strings or NULL */
    /* owned, or NULL: the policy decisions the call made, [{kind, reason}] (kinds of
     * vg_journal_policy_decision), journaled in the calling run (the orchestrator's
     * admissions) */
    json_t *decisions;
    /* owned, or NULL: result's canonical text (what vg_json_dump(result, 1) writes), when the
     * provider wrote it from its fields as it built the tree. The executor encodes a result once
     * for all of its records and its caller's copy (vg_tool_outcome_text); given here, not even
     * once. It must say exactly what result says. */
    char *result_text;
};
void vg_tool_response_release(struct vg_tool_response *r);
/* Set an error answer (code and formatted message). */
void vg_tool_response_fail(struct vg_tool_response *r, enum vg_tool_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The provider's writes are agent-domain store writes: the executor runs call() inside its
 * finishing transaction, so effect and record commit together (no saga, never in doubt). */
#define VG_TOOL_PROVIDER_CAP_TRANSACTIONAL (1u << 0)

struct vg_tool_provider_methods {
    int version;      /* 1: up to destroy; 2: after_commit too */
    const char *name; /* "builtin", "callback", "command", "gate", "mcp" */
    unsigned caps;    /* VG_TOOL_PROVIDER_CAP_* */
    /* The contract entries of the tools it serves, as a new JSON array (*out owned). */
    vigil_code (*list)(struct vg_tool_provider *p, json_t **out, vigil_error *err);
    /* Run (or preview) one call. A tool failure is an answer (resp->code), not a vigil_code:
     * the return value reports only the provider's own breakage. */
    vigil_code (*call)(struct vg_tool_provider *p, const struct vg_tool_request *req,
                       struct vg_tool_response *resp, vigil_error *err);
    /* Optional (NULL): did the call with this operation id take effect? *found = 1 and
     * resp filled when it did. Makes a reconcilable tool's in-doubt operations decidable. */
    vigil_code (*lookup)(struct vg_tool_provider *p, const struct vg_tool_request *req, int *found,
                         struct vg_tool_response *resp, vigil_error *err);
    void (*destroy)(struct vg_tool_provider *p);
    /* end of version 1 */
    /* Optional (NULL): called by the executor, outside any transaction, once the transaction
     * that ran a transactional provider's mutating call and recorded its end has committed.
     * Work that must not hold the store's write lock, such as a network call, finishes here;
     * a failure is the provider's to retry later, and the call's outcome stands. */
    void (*after_commit)(struct vg_tool_provider *p, const struct vg_tool_request *req);
    /* end of version 2 */
    /* Optional (NULL): a provider whose tools are known only once it runs (an MCP server not
     * started yet) returns the prefix every one of its tool names starts with. The executor
     * then lists it not when it is added but when a tool with that prefix is first needed (a
     * call, an agent's tool list, a listing of all tools), and again at those points whenever
     * stale() says its list changed since (1: list again). */
    const char *(*deferred_prefix)(struct vg_tool_provider *p);
    int (*stale)(struct vg_tool_provider *p);
    /* Optional (NULL: derived from name): where its tools come from, for `vigil tool list`
     * ("built-in", "command", "registered", "mcp:SERVER"). */
    const char *(*source)(struct vg_tool_provider *p);
    /* end of version 3 */
    /* Optional (NULL: 0): a call names a tool with this provider's deferred prefix that its
     * list lacks, and the list is not stale. 1: list again, the tool may be new (an MCP list
     * read from the store's cache, not asked of the server by this process). */
    int (*may_serve)(struct vg_tool_provider *p, const char *name);
    /* end of version 4 */
};

struct vg_tool_provider {
    const struct vg_tool_provider_methods *methods; /* must stay first */
};

vigil_code vg_tool_provider_list(struct vg_tool_provider *p, json_t **out, vigil_error *err);
vigil_code vg_tool_provider_call(struct vg_tool_provider *p, const struct vg_tool_request *req,
                                 struct vg_tool_response *resp, vigil_error *err);
int vg_tool_provider_can_lookup(const struct vg_tool_provider *p);
vigil_code vg_tool_provider_lookup(struct vg_tool_provider *p, const struct vg_tool_request *req,
                                   int *found, struct vg_tool_response *resp, vigil_error *err);
void vg_tool_provider_after_commit(struct vg_tool_provider *p, const struct vg_tool_request *req);
void vg_tool_provider_destroy(struct vg_tool_provider *p);
/* Version 3 accessors: NULL / 0 for providers that do not say. */
const char *vg_tool_provider_deferred_prefix(struct vg_tool_provider *p);
int vg_tool_provider_stale(struct vg_tool_provider *p);
const char *vg_tool_provider_source(struct vg_tool_provider *p);
/* Version 4: 0 for providers that do not say. */
int vg_tool_provider_may_serve(struct vg_tool_provider *p, const char *name);

/* Built-ins: set_report, record_observations. */
struct vg_tool_provider *vg_tool_builtin_provider(void);
/* The built-in contracts as compiled into the library (new array; the parity test compares
 * them with docs/agent_tools/tool_contracts.json). */
json_t *vg_tool_builtin_contracts(void);

/* A C callback tool (vigil.h types): fn answers by the reply protocol of docs/tools.md; lookup
 * (optional) makes the tool reconcilable. contract borrowed (copied). */
vigil_code vg_tool_callback_provider(const json_t *contract, vigil_tool_fn fn,
                                     vigil_tool_lookup_fn lookup, void *user,
                                     struct vg_tool_provider **out, vigil_error *err);

/*
 * Parse a tool's reply text (callback or command) into r: a JSON object with "error"
 * ({"code","message"} or a string) is the tool's error; one with "result" carries the payload
 * and optional "changed_entity_ids", "changed_tokens" and "status":"partial"; any other JSON
 * value is the payload itself. Invalid JSON is tool_failed.
 */
void vg_tool_reply_parse(const char *text, size_t len, struct vg_tool_response *r);

/* A command tool: argv (copied) gets the arguments on stdin and answers JSON on stdout.
 * timeout_ms <= 0: 30000; max_output 0: 1 MiB. clock: the one that measures the timeout
 * (borrowed; NULL: the real clock). ${NAME} in argv and env_set is replaced by the
 * environment's value when a call runs (never earlier, so the value is never stored), and
 * "$${" by a literal "${"; an unset NAME fails the call with tool_failed naming NAME. */
struct vg_tool_command_options {
    const char *const *argv; /* argv[0] is the program (PATH searched), NULL-terminated */
    const char *cwd;         /* working directory; NULL: the caller's */
    /* 0: the child gets the whole environment. 1: only PATH, HOME, LANG, LC_ALL, TZ, TMPDIR
     * and the names in env_allow (NULL-terminated, may be NULL). */
    int minimal_env;
    const char *const *env_allow;
    const char *const *env_set; /* "NAME=template" set for the child, NULL-terminated or NULL */
    int timeout_ms;
    size_t max_output;
    struct vg_clock *clock;
};
vigil_code vg_tool_command_provider(const json_t *contract, const struct vg_tool_command_options *o,
                                    struct vg_tool_provider **out, vigil_error *err);

/* ---- the executor --------------------------------------------------------------------------- */

struct vg_tool_executor;

struct vg_budget_charge;

/* Who calls: all borrowed for the call. */
struct vg_tool_call_ctx {
    const char *agent_id; /* required */
    const char *run_key;  /* required: stable across crash replays of one wake */
    /* What operation ids derive from, NULL: run_key. A failed run's retry (a new run) passes the
     * first attempt's run key, so what that attempt did is answered from its record instead of
     * done again. */
    const char *operation_key;
    const char *thread_id;   /* NULL: "<agent>:run:<run_key>" */
    const char *run_id;      /* optional */
    const char *wake_reason; /* subscription, timer, user_initiated, recovery_catchup, manual;
                                NULL: manual */
    int preview_only;        /* ask for a preview: nothing changes, nothing is recorded as done */
    /* The arguments are the caller's own new tree, not read after the call (parsed for it): the
     * executor fills its defaults in place instead of copying it first. */
    int args_fresh;
    const volatile int *halt;     /* optional: vg_tool_request's */
    int (*cancelled)(void *user); /* optional: vg_tool_request's */
    void *cancelled_user;
    /* Optional: the run the call is part of (the agent loop's), handed to the provider
     * (vg_tool_request.journal_run). With journal_via too, the call is one made through
     * another call of that run (a program's vigil.call: via is the bridge's key): the executor
     * records it in the run's journal as a tool call of its own, marked via
     * (vg_journal_tool_call_started_via), as the loop records the model's. */
    struct vg_run *journal_run;
    const char *journal_via;
    /* Optional: checked inside the transaction that records a mutating operation as started
     * (the caller's lease epoch); an error there refuses to start the effect. Checked again in
     * the transaction a transactional tool's effect commits in. */
    vigil_code (*fence)(void *user, struct vg_env *env, vigil_error *err);
    void *fence_user;
    /* Leave the transaction that records a finished effect (the toolResult, the finished
     * operation) open, for the caller to commit with its own records of the call (the agent
     * loop); the outcome says when it was (tx_open). Only where no transaction was open. */
    int finish_open;
    /* The caller's open transaction (its only level) holds its own records of the call's
     * start (the agent loop's turn): the call's started records join it and it is committed
     * durably as the barrier before the effect, one commit instead of two (a transactional
     * provider's mutating call: committed in the caller's mode, no barrier being due). A call
     * refused or ended before that leaves it open, with what the gate recorded, for the caller
     * to end. */
    int start_open;
    /* Optional: told once the call's start is durable, just before the effect, outside any
     * transaction (the loop's observer hears of the call's start there). A transactional
     * provider's mutating call, whose start commits with its end, tells it after that commit,
     * or not at all when it leaves the transaction to the caller (tx_open). */
    void (*started)(void *user);
    void *started_user;
    /* Optional (with start_open): a charge of the caller's held back from its open transaction
     * (the agent loop's model call), which the budget check counts and the call's start writes
     * with its own tool-call charge: one write of the day's usage instead of two. The executor
     * sets *carry_written once the charge is in the caller's transaction (with the call's start,
     * or before it commits that transaction early); otherwise the caller writes it. */
    const struct vg_budget_charge *carry;
    int *carry_written;
    /* Optional: the caller's record of the call's end, kept in the toolResult message the
     * executor writes (the agent loop's journal end: docs/internals/JOURNAL.md, "A tool call's
     * end in its result message"). Called in the transaction that appends the message, just
     * before, with the message's id and content, whether it is an error, its error code ("":
     * none) and whether the outcome carries decisions; *end_json (owned) is then the message's
     * journal_end, or NULL. The caller may give the message an id of its choosing, written into
     * message_id first (the loop's: its step's thought's id with another last digit). */
    vigil_code (*result_end)(void *user, char message_id[37], const char *content, int is_error,
                             const char *error_code, int has_decisions, char **end_json,
                             vigil_error *err);
    void *result_end_user;
    /* Optional: the caller's record of the call's start, kept in the action message the
     * executor writes (the agent loop's journal start: docs/internals/JOURNAL.md, "A tool call's
     * start in its action message"). Called in the transaction that appends the action, just
     * before: *start_json (owned) is then the message's journal_start and *message_id the id
     * the message must have (the call's), or *start_json NULL. */
    vigil_code (*action_start)(void *user, char message_id[37], char **start_json,
                               vigil_error *err);
    void *action_start_user;
};

/* What came of one call. vg_tool_outcome_release frees the JSON. */
struct vg_tool_outcome {
    enum vg_tool_code code;
    char status[16];         /* success, error, partial */
    char error_code[32];     /* "" on success */
    char error_message[256]; /* "" on success */
    char operation_id[65];
    char action_id[201];  /* the action message */
    char result_id[201];  /* the toolResult message */
    char approval_id[37]; /* with confirmation_required: the pending approval */
    int replayed;         /* the recorded result of a finished operation */
    json_t *result;       /* owned: payload or NULL */
    json_t *changed_entity_ids;
    json_t *changed_tokens;
    json_t *decisions; /* owned: the provider's decisions (vg_tool_response), not replayed */
    /* owned, or NULL: result's canonical text, encoded once (or given by the provider) and used
     * as it is by every record of the outcome and by vg_tool_outcome_text; NULL: encode result */
    char *result_text;
    /* owned: the recorded toolResult message's content (the envelope as canonical JSON, without
     * result_id), or NULL when none was recorded; the loop hands it to the model's window
     * instead of encoding the envelope again */
    char *content;
    /* the finishing transaction is still open (ctx.finish_open): the caller ends it, commit or
     * rollback; no step hook ran after it (VG_TOOL_STEP_AFTER_FINISHED) */
    int tx_open;
};
void vg_tool_outcome_release(struct vg_tool_outcome *o);
/* The outcome as a new JSON object (the envelope the model and the public API see). */
json_t *vg_tool_outcome_json(const struct vg_tool_outcome *o);
/* The same envelope as canonical text (owned; NULL when out of memory), the result written from
 * result_text when the outcome has it: a large result (a spawn call's answers) is not encoded
 * again for each record of it. */
char *vg_tool_outcome_text(const struct vg_tool_outcome *o);

/* The steps of a call at which the executor asks its step hook (below) whether to go on. */
enum vg_tool_step {
    VG_TOOL_STEP_BEFORE_STARTED = 1, /* after the gates, before the operation is recorded */
    VG_TOOL_STEP_AFTER_STARTED,      /* operation started, side effect not run */
    VG_TOOL_STEP_AFTER_EFFECT,       /* side effect done, nothing recorded of it */
    VG_TOOL_STEP_AFTER_JOURNAL,      /* saga journal_done recorded, operation not finished */
    VG_TOOL_STEP_AFTER_FINISHED      /* everything committed, before returning */
};
/* A step hook, asked at each step of every call: a failure it returns stops the call right
 * there, leaving the store as a process that died at that step would (what recovery must
 * settle), and the call returns it. The runtime sets none; the crash tests set one that fails
 * a chosen step (tests/helpers/tool_crash.h). */
typedef vigil_code (*vg_tool_step_fn)(void *user, enum vg_tool_step step, vigil_error *err);

vigil_code vg_tool_executor_new(struct vg_env *env, struct vg_tool_executor **out,
                                vigil_error *err);
void vg_tool_executor_free(struct vg_tool_executor *x);
/* Register a provider's tools (the executor owns p from this call on, even on failure).
 * EEXISTS when a tool name is taken. */
vigil_code vg_tool_executor_add(struct vg_tool_executor *x, struct vg_tool_provider *p,
                                vigil_error *err);
/* The host's scope resolver for scope rule `target`: write the entity's scope into out and
 * return 1, or return 0 when it cannot tell (the call is then refused: out_of_scope). */
typedef int (*vg_tool_scope_fn)(void *user, const char *entity_id, char *out, size_t n);
void vg_tool_executor_set_scope_resolver(struct vg_tool_executor *x, vg_tool_scope_fn fn,
                                         void *user);
void vg_tool_executor_set_step_hook(struct vg_tool_executor *x, vg_tool_step_fn fn, void *user);
/* The registered contract of a tool (borrowed) or NULL. */
const struct vg_tool_def *vg_tool_executor_find(struct vg_tool_executor *x, const char *name);
/* Every registered contract as a new array, sorted by name. */
vigil_code vg_tool_executor_contracts(struct vg_tool_executor *x, json_t **out, vigil_error *err);
/* The contracts of the tools agent_id may call (NULL: every registered tool), each with
 * "source" (vg_tool_provider_source), as a new array sorted by name. Lists deferred providers
 * first, so it may start MCP servers. */
vigil_code vg_tool_executor_describe(struct vg_tool_executor *x, const char *agent_id, json_t **out,
                                     vigil_error *err);

/*
 * The tools an agent may call, for the model: a new JSON array of {name, description,
 * input_schema}, sorted by name. Manifest (config.tools names and globs) first, then the
 * capability profile (config.capabilities must hold every capability a tool requires), then
 * the run's grant (run_key may be NULL: no grant).
 */
vigil_code vg_tool_executor_visible_tools(struct vg_tool_executor *x, const char *agent_id,
                                          const char *run_key, json_t **tools_for_model,
                                          vigil_error *err);
/*
 * A run's grant (issue 31): the tools (names or globs) and the scopes a spawning parent allowed
 * its child's run. In that run a tool is callable only when the manifest and the grant both
 * allow it, and only scopes in both are touched: a grant never widens, and an empty one leaves
 * nothing. tools or scopes NULL: that part is not narrowed. Record kind tool_grant, id = the
 * run key (owner = the agent). The gate and the run's tool list for the model both narrow.
 */
vigil_code vg_tool_grant_put(struct vg_env *env, const char *run_key, const char *agent_id,
                             json_t *tools, json_t *scopes, vigil_error *err);
/*
 * The scopes of have that a grant leaves (a new array; NULL when out of memory): the narrower
 * of each pair that nests ("work" and "work/t1" give "work/t1"), so the result is never wider
 * than either list. What a grant of scopes does to an agent's allowed_scopes, and what the
 * orchestrator grants a child: its parent's scopes narrowed by the child's request.
 */
json_t *vg_tool_scopes_narrow(json_t *have, json_t *grant);

/* 1 if the agent may call the tool (same rule as visible_tools). */
vigil_code vg_tool_agent_may_call(struct vg_tool_executor *x, const char *agent_id,
                                  const char *tool_name, int *may, vigil_error *err);

/*
 * Run one tool call through every gate (resolution, wake reason, arguments, kill switches,
 * scope, operation replay, approval, budget), record the action message before and the
 * toolResult message after, and fill *out. args is borrowed (copied before defaults apply, unless
 * ctx->args_fresh). Returns VIGIL_OK whenever an outcome was recorded, including tool errors
 * (out->code); a vigil_code error only when recording itself failed.
 */
vigil_code vg_tool_executor_call(struct vg_tool_executor *x, const struct vg_tool_call_ctx *ctx,
                                 const char *tool_name, json_t *args, struct vg_tool_outcome *out,
                                 vigil_error *err);

/*
 * operation_id = SHA256(agent_id | run_key | SHA256(tool | canonical args | scope snapshot |
 * targets)). Ids computed before the agent was part of the hash differ: such a stored operation
 * is simply never matched again.
 */
vigil_code vg_tool_operation_id(const char *agent_id, const char *run_key, const char *tool,
                                json_t *args, const char *scope_snapshot, const char *targets,
                                char out[65], vigil_error *err);

/*
 * Start-up recovery: every operation left started by a crash (its agent's lease free, expired,
 * or held by a process that is gone) is settled without repeating a side effect: finished from
 * its saga when the effect is known, reconciled through the provider's lookup, or
 * (non-idempotent) surfaced as an in_doubt item. A lookup that finds nothing is tried again
 * after a backoff (1 s, doubling) and after 5 tries the operation goes in doubt. Idempotent ones
 * stay started and run again when called. *settled (may be NULL) gets the count.
 */
vigil_code vg_tool_executor_recover(struct vg_tool_executor *x, int *settled, vigil_error *err);
/*
 * Recovery by the run that took `agent_id` over from a crashed one (the caller holds the
 * agent's lease): the same, for that agent's operations, except that an effect that may run
 * again (idempotent, or rolled back with the crash) runs now, so every operation of the crashed
 * run is settled before the new run goes on. Only a lookup in its backoff stays started.
 */
vigil_code vg_tool_executor_recover_agent(struct vg_tool_executor *x, const char *agent_id,
                                          int *settled, vigil_error *err);

enum vg_in_doubt_answer { VG_IN_DOUBT_APPLIED = 1, VG_IN_DOUBT_NOT_APPLIED, VG_IN_DOUBT_RETRY };
/*
 * A person's answer to an in_doubt item: applied finishes the operation as done; not applied
 * finishes it as not done (an identical call replays that and never runs it); retry forgets the
 * attempt so an identical call runs it. ENOTFOUND for no such item; an item answered before is
 * left as it is (*already = 1, may be NULL).
 */
vigil_code vg_tool_in_doubt_answer(struct vg_env *env, const char *operation_id,
                                   enum vg_in_doubt_answer answer, const char *by, int *already,
                                   vigil_error *err);
/* One in_doubt item (any status) with its operation record under "operation" (null when the
 * attempt was forgotten). ENOTFOUND. */
vigil_code vg_tool_in_doubt_show(struct vg_env *env, const char *operation_id, json_t **out,
                                 vigil_error *err);
/* Resolve an in_doubt item: applied = 1 finishes the operation as done (the human saw the
 * effect); 0 clears it so the next identical call runs it again. */
vigil_code vg_tool_in_doubt_resolve(struct vg_env *env, const char *operation_id, int applied,
                                    const char *by, vigil_error *err);
/* Pending in_doubt items (new array), optionally of one agent. */
vigil_code vg_tool_in_doubt_list(struct vg_env *env, const char *agent_id, json_t **out,
                                 vigil_error *err);

/* The executor behind the agent loop's interface (src/loop/loop.h): fills *out (its self is x).
 * A killed outcome asks the loop to stop the run; the loop's "user" wake is user_initiated. */
struct vg_loop_executor;
void vg_tool_loop_executor(struct vg_tool_executor *x, struct vg_loop_executor *out);

/* ---- approvals (approval.c) ----------------------------------------------------------------- */

/* Create a pending approval for an operation (or return the pending one): *out_id 37 bytes.
 * request: {tool, arguments, run_key, thread_id, wake_reason} (borrowed); preview borrowed. */
vigil_code vg_approval_request(struct vg_env *env, const char *agent_id, const char *operation_id,
                               json_t *request, json_t *preview, int64_t ttl_ms, char out_id[37],
                               vigil_error *err);
/* The approval of an operation id, if any (owned body, latest first): ENOTFOUND. Pending ones
 * past their expiry read as expired. */
vigil_code vg_approval_for_operation(struct vg_env *env, const char *operation_id, json_t **out,
                                     vigil_error *err);
vigil_code vg_approval_get(struct vg_env *env, const char *approval_id, json_t **out,
                           vigil_error *err);
/*
 * Approve (approve = 1) or reject. Idempotent: resolving a resolved approval changes nothing and
 * reports the first resolution (*out gets the body with "already": true). An expired one is
 * ESTATE, and so is approving one of an agent destroyed (it would never act on it). by: who
 * resolves ("human" when NULL); an agent may not resolve its own request.
 */
vigil_code vg_approval_resolve(struct vg_env *env, const char *approval_id, int approve,
                               const char *by, const char *reason, json_t **out, vigil_error *err);
/* Reject every pending approval of the agent (by "destroy", reason given): a destroyed agent
 * never acts on one, so none is left for a person to approve in vain (trial H13). *n (may be
 * NULL) gets the count. Inside the caller's transaction when one is open. */
vigil_code vg_approval_reject_pending(struct vg_env *env, const char *agent_id, const char *reason,
                                      int *n, vigil_error *err);
/* Approvals (new array, oldest first): status NULL for any; agent_id NULL for all agents. */
vigil_code vg_approval_list(struct vg_env *env, const char *agent_id, const char *status,
                            json_t **out, vigil_error *err);
/* Mark pending approvals past their expiry as expired; *n (may be NULL) gets the count. */
vigil_code vg_approval_expire(struct vg_env *env, int *n, vigil_error *err);
/* Resolved (approved, rejected, expired) approvals of the agent it has not yet seen, as a new
 * array; nothing is marked. */
vigil_code vg_approval_unseen(struct vg_env *env, const char *agent_id, json_t **out,
                              vigil_error *err);
/* Mark one approval seen (its outcome reached the agent); already seen: a no-op. */
vigil_code vg_approval_mark_seen(struct vg_env *env, const char *approval_id, vigil_error *err);
/* vg_approval_unseen, each marked seen in one transaction (delivered once). The loop instead
 * marks each one only after acting on it, so a crash in between acts again (replayed). */
vigil_code vg_approval_take_resolved(struct vg_env *env, const char *agent_id, json_t **out,
                                     vigil_error *err);
/* Run the exact operation an approved approval stands for (same operation id), at most once. */
vigil_code vg_tool_executor_run_approved(struct vg_tool_executor *x, const char *approval_id,
                                         struct vg_tool_outcome *out, vigil_error *err);

/* ---- kill switches (kill.c) ----------------------------------------------------------------- */

/* Whether s can be a tool's class: a tool name's rule ([a-z][a-z0-9_.]*, at most 64 bytes). */
int vg_tool_class_name_ok(const char *s);
/* scope: "global", an agent id (agent_id set) or a tool class (tool_class set); not both. */
vigil_code vg_kill_set(struct vg_env *env, const char *agent_id, const char *tool_class, int on,
                       const char *reason, vigil_error *err);
/* 1 when the global switch, the agent's (agent_id may be NULL) or the tool class's (may be
 * NULL) is on. The wake system calls it before a wake, the loop before each step. */
vigil_code vg_kill_active(struct vg_env *env, const char *agent_id, const char *tool_class, int *on,
                          vigil_error *err);
/* Every switch that has ever been set (new array). */
vigil_code vg_kill_list(struct vg_env *env, json_t **out, vigil_error *err);
/* The switches that are on, read in one scan: for a caller that asks about many agents at once
 * (a spawn call's parent and children), one read instead of two point reads an agent. */
struct vg_kill_on {
    json_t *ids; /* owned: the ids of the switches on ("global", "agent:ID", "class:NAME") */
};
vigil_code vg_kill_read_on(struct vg_env *env, struct vg_kill_on *out, vigil_error *err);
/* vg_kill_active's answer from what vg_kill_read_on read. */
int vg_kill_on_for(const struct vg_kill_on *k, const char *agent_id, const char *tool_class);
void vg_kill_on_release(struct vg_kill_on *k);

/* ---- budgets (budget.c) --------------------------------------------------------------------- */

enum vg_budget_kind {
    VG_BUDGET_TOKENS,
    VG_BUDGET_COST, /* micro-dollars */
    VG_BUDGET_STEPS,
    VG_BUDGET_TOOL_CALLS,
    VG_BUDGET_WALL_MS,
    VG_BUDGET_KIND_COUNT
};
const char *vg_budget_kind_name(enum vg_budget_kind k); /* "tokens", "cost_micros", ... */

/* Usage to add; zero-initialize. */
struct vg_budget_charge {
    int64_t v[VG_BUDGET_KIND_COUNT];
};

/* The agent's limits (config.budgets over the defaults; -1: unlimited). */
vigil_code vg_budget_limits(struct vg_env *env, const char *agent_id,
                            int64_t limits[VG_BUDGET_KIND_COUNT], vigil_error *err);
/* Today's (UTC, from the clock port) usage, as a new object with limits. */
vigil_code vg_budget_usage(struct vg_env *env, const char *agent_id, json_t **out,
                           vigil_error *err);
/* Is any budget of today exhausted (usage >= limit)? *exceeded gets its kind name or NULL. */
vigil_code vg_budget_check(struct vg_env *env, const char *agent_id, const char **exceeded,
                           vigil_error *err);
/* The same with the agent's record already read (borrowed): the gate has it. pending (NULL:
 * none) is usage charged in the open transaction but not written yet (vg_tool_call_ctx.carry),
 * counted as if it were. */
vigil_code vg_budget_check_agent(struct vg_env *env, const char *agent_id, const json_t *agent,
                                 const struct vg_budget_charge *pending, const char **exceeded,
                                 vigil_error *err);
/* Add usage (CAS retried). The loop calls it for model tokens, cost, steps and wall time. */
vigil_code vg_budget_charge(struct vg_env *env, const char *agent_id,
                            const struct vg_budget_charge *c, vigil_error *err);

#endif
