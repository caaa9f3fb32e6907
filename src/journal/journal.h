/*
 * journal.h: the interaction journal of a run (one agent execution) and the run history read
 * from it. What other modules use: open a run (journal.header is written first, or the run does
 * not start), append through one function per write path, close it; replay a run from its
 * records alone; export/import newline-delimited JSON per owner; read run history as JSON text
 * with keyset cursors. Everything goes through the store port; nothing here writes SQL.
 *
 * Store kinds written: "journal" (one record per journal entry; owner = agent, k1 = run id,
 * k2 = history class, seq = sequence in the run), "run" (owner = agent, k1 = status, k2 = "",
 * seq = start time ms), "run_link" (parent -> child), "run_projection" (id = run id) and
 * "journal_key" (idempotency keys and the pruned-activity count). A tool call is its start and
 * end records (the start's record id is the call's id); stores written before Session 29 also
 * hold a "run_tool_call" row per call (owner = agent, k1 = run id, seq = sequence of the start
 * record), which a run that has them is read from.
 */
#ifndef VG_JOURNAL_H
#define VG_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

struct vg_store;
struct vg_clock;
struct vg_ids;
struct vg_run;

/* ---- run status ---------------------------------------------------------------------------- */

enum vg_run_status {
    VG_RUN_QUEUED = 0,
    VG_RUN_RUNNING = 1,
    VG_RUN_COMPLETED = 2,
    VG_RUN_FAILED = 3,
    VG_RUN_INTERRUPTED = 4,
    VG_RUN_CANCELED = 5,
    VG_RUN_CRASHED = 6 /* its process died; closed by the run that took its agent over */
};

/* "queued", "running", ...; NULL for an unknown value. */
const char *vg_run_status_name(enum vg_run_status s);
/* Parse a status name; 0 on success. */
int vg_run_status_parse(const char *name, enum vg_run_status *out);

/* ---- opening and closing a run ------------------------------------------------------------- */

/* The launch contract frozen into journal.header. Zero-initialize; borrowed for the call. */
struct vg_run_launch {
    const char *agent_id;          /* required: the owner of the run */
    const char *run_key;           /* required: the idempotency key of the wake/run */
    const char *wake_reason;       /* required: why the run started ("message", "timer", ...) */
    const char *thread_id;         /* optional */
    const char *parent_run_id;     /* optional: the spawning run */
    const char *model;             /* optional: the model id */
    const char *limits_json;       /* optional JSON object text: max steps, timeout, budget... */
    const char *working_directory; /* optional */
    const char *scope;             /* owner kind: "agent" (NULL), "system", "task", "artifact" */
};

/*
 * Open a run: in one transaction write journal.header (sequence 1) FIRST, then the run record
 * (status running) and its live projection. If the header cannot be written nothing is left
 * and the error says "run not started: journal header not written: ...". store, clock and ids
 * are borrowed and must outlive the run. *out is owned: vg_journal_run_free.
 */
vigil_code vg_journal_run_open(struct vg_store *store, struct vg_clock *clock, struct vg_ids *ids,
                               const struct vg_run_launch *launch, struct vg_run **out,
                               vigil_error *err);
/* Reattach to an existing run (another process, after a restart) from its durable state. */
vigil_code vg_journal_run_attach(struct vg_store *store, struct vg_clock *clock, struct vg_ids *ids,
                                 const char *run_id, struct vg_run **out, vigil_error *err);
/* Reload the in-memory state from the store (after an outer transaction rolled back). */
vigil_code vg_journal_run_reload(struct vg_run *run, vigil_error *err);
/*
 * Close: state.changed with the final lifecycle (completed, failed, interrupted, canceled),
 * attention none and the summary/error, and the run record's status and end time.
 * summary and error may be NULL. ESTATE if already closed or status is not final.
 */
vigil_code vg_journal_run_close(struct vg_run *run, enum vg_run_status status, const char *summary,
                                const char *error, vigil_error *err);
void vg_journal_run_free(struct vg_run *run);

const char *vg_journal_run_id(const struct vg_run *run);
/* The sequence number the next record will get. */
int64_t vg_journal_run_next_sequence(const struct vg_run *run);

/* ---- write paths --------------------------------------------------------------------------- */

/* What an idempotent append reports: the record that holds the id. */
struct vg_journal_ack {
    int duplicate;      /* 1: the id was already journaled; nothing was appended */
    int64_t sequence;   /* sequence of the record holding the id */
    char record_id[37]; /* its record id */
};

/* Input to the run (message.accepted). Borrowed for the call. */
struct vg_journal_message {
    const char *message_id;   /* NULL: a new id */
    const char *source;       /* "operator", "daemon", "system", "owner" */
    const char *message_type; /* "prompt", "chat", "command", "wake-delta", ... */
    const char *payload_json; /* any JSON text; NULL: null */
    int mutates_context;
};
vigil_code vg_journal_message_accept(struct vg_run *run, const struct vg_journal_message *m,
                                     struct vg_journal_ack *ack, vigil_error *err);
/* A delivery attempt of an accepted message. status: attempted, delivered, failed, skipped;
 * transport: model, process, adapter, none; reason optional. */
vigil_code vg_journal_message_delivery(struct vg_run *run, const char *message_id,
                                       const char *status, const char *transport,
                                       const char *reason, vigil_error *err);

/* A normalized observation (observation.recorded). Borrowed for the call. */
struct vg_journal_observation {
    const char *observation_id; /* required: the idempotency key */
    const char *source;         /* pty, mcp, sdk, provider-output, terminal-heuristic, ... */
    const char *confidence;     /* authoritative, high, medium, low, diagnostic */
    const char *signal_json;    /* optional: {"type":"progress",...} from the signal registry */
    const char *raw_text;       /* optional */
    const char *payload_json;   /* optional JSON object text */
};
/* A duplicate observation id is acknowledged from the durable journal (ack->duplicate = 1). */
vigil_code vg_journal_observe(struct vg_run *run, const struct vg_journal_observation *o,
                              struct vg_journal_ack *ack, vigil_error *err);

struct vg_journal_decision {
    const char *decision_id;    /* NULL: a new id */
    const char *observation_id; /* optional */
    const char *message_id;     /* optional */
    const char *action; /* reject, record-only, emit-message, update-state, route-owner-effect */
    const char *reason; /* optional */
};
vigil_code vg_journal_decide(struct vg_run *run, const struct vg_journal_decision *d,
                             vigil_error *err);

/* A semantic transition (state.changed). NULL fields do not change. */
struct vg_journal_state {
    const char *lifecycle; /* queued, running, completed, failed, interrupted, canceled, crashed */
    const char *attention; /* none, autonomous, awaiting-operator, awaiting-system, blocked */
    const char *activity;  /* idle, planning, reasoning, communicating, editing, ... */
    const char *input_request_id; /* sets the current input request */
    int clear_input_request;      /* 1: current input request becomes null */
};
vigil_code vg_journal_state_change(struct vg_run *run, const struct vg_journal_state *s,
                                   vigil_error *err);
/* Awaiting input: lifecycle running + attention awaiting-operator + the request id. */
vigil_code vg_journal_await_input(struct vg_run *run, const char *request_id, vigil_error *err);

/* Noisy progress and telemetry (activity.updated); the run's usage totals are added. */
struct vg_journal_activity {
    const char *activity;            /* optional, as in state */
    const char *progress_json;       /* optional {"summary","detail","units":{...}} */
    const char *capabilities_json;   /* optional {"terminal_attached",...} */
    const char *current_target_json; /* optional {"kind","label","path"} */
    const char *active_tool_name;    /* optional */
};
vigil_code vg_journal_activity(struct vg_run *run, const struct vg_journal_activity *a,
                               vigil_error *err);

struct vg_journal_owner_effect {
    const char *effect_id;                           /* NULL: a new id */
    const char *observation_id;                      /* optional */
    const char *owner_entity;                        /* system, agent, task, artifact */
    const char *effect_type;                         /* required */
    const char *workflow_event_id, *entity_event_id; /* optional */
    const char *payload_json;                        /* optional object */
};
vigil_code vg_journal_owner_effect(struct vg_run *run, const struct vg_journal_owner_effect *e,
                                   vigil_error *err);

/*
 * Append a record given as a JSON object text of its payload fields (no base fields): the
 * registry validates it like any other. For callers with a ready payload, and for tests.
 */
vigil_code vg_journal_append_json(struct vg_run *run, const char *type, const char *payload_json,
                                  vigil_error *err);

/* ---- traces -------------------------------------------------------------------------------- */

struct vg_model_call_trace {
    const char *provider, *model; /* required */
    int64_t latency_ms;
    int64_t input_tokens, output_tokens, cached_tokens;
    int64_t cost_micros;     /* cost in millionths of a US dollar */
    int attempts;            /* 1 + retries */
    const char *stop_reason; /* optional: "end_turn", "tool_use", "max_tokens", ... */
    const char *error_code;  /* optional: "ERATELIMIT" when the call failed */
};
vigil_code vg_journal_model_call(struct vg_run *run, const struct vg_model_call_trace *t,
                                 vigil_error *err);
/*
 * vg_journal_model_call for a call whose answer's thought message the caller writes next, in the
 * same transaction, with the id message_id: the record, its id message_id, is folded into the
 * run and kept back; the message's writer takes it (vg_journal_kept_take) and writes it as the
 * message's member "journal_call", so it needs no row of its own (docs/internals/JOURNAL.md, "A
 * model call in its thought message"). When no message takes it by the transaction's commit, it
 * is written as a row then. Outside a transaction, a row at once.
 */
vigil_code vg_journal_model_call_in(struct vg_run *run, const struct vg_model_call_trace *t,
                                    const char *message_id, vigil_error *err);
/* A tool call starts: input_json is any JSON text. out_id receives the tool call id. */
vigil_code vg_journal_tool_call_started(struct vg_run *run, const char *name,
                                        const char *operation_id, const char *input_json,
                                        char out_id[37], vigil_error *err);
/*
 * A tool call made not by the model but through another call of the run: a program's
 * vigil.call in the sandbox (execute_code's bridge). via names where it came from, the bridge's
 * key "<run key>/code/<operation>/<n>" (<operation>: the start of execute_code's operation id,
 * <n>: the program's nth call); the record carries it as tool_call.via, so the run's tool
 * calls list it beside the model's, marked (docs/internals/JOURNAL.md, "Calls a program
 * made"). Finished with vg_journal_tool_call_finished.
 */
vigil_code vg_journal_tool_call_started_via(struct vg_run *run, const char *name, const char *via,
                                            const char *input_json, char out_id[37],
                                            vigil_error *err);
/* status: succeeded, failed, denied, canceled, crashed (its run's process died; closed by the
 * run that recovered it); output_json any JSON text or NULL. */
/* The status of a call that ended with error_code (NULL or "": none): "denied" when vigil's
 * gate refused it before the tool ran (not_allowed, out_of_scope, killed, budget_exceeded,
 * confirmation_required, rejected), else "failed" for an error and "succeeded" otherwise. */
const char *vg_journal_tool_status_of(int is_error, const char *error_code);
vigil_code vg_journal_tool_call_finished(struct vg_run *run, const char *tool_call_id,
                                         const char *status, const char *output_json,
                                         const char *error_code, int64_t duration_ms,
                                         vigil_error *err);
/*
 * vg_journal_tool_call_started for a call whose action message is written next, in the same
 * transaction: the start record is folded into the run and kept back; the message's writer
 * takes it (vg_journal_kept_take) and writes it as the message's member "journal_start", the
 * message's id the record's (the call's), so it needs no row of its own (docs/internals/
 * JOURNAL.md, "A tool call's start in its action message"). When no message takes it by the
 * transaction's commit, it is written as a row then. Outside a transaction, as
 * vg_journal_tool_call_started.
 */
vigil_code vg_journal_tool_call_started_in(struct vg_run *run, const char *name,
                                           const char *operation_id, const char *input_json,
                                           char out_id[37], vigil_error *err);
/* vg_journal_tool_call_started_in with the call's id chosen by the caller (a UUID): the loop's,
 * made from its step's thought id (docs/internals/STORE.md, "A step's messages in one row"). */
vigil_code vg_journal_tool_call_started_as(struct vg_run *run, const char *name,
                                           const char *operation_id, const char *input_json,
                                           const char *id, vigil_error *err);
/* The record kept by vg_journal_tool_call_started_in (record_id the call's id) or
 * vg_journal_model_call_in (the thought's id), for its message being written with record_id as
 * its id: the member's text (*kept_json, owned); NULL when that record is not kept (written as a
 * row, or taken). run may be NULL. */
vigil_code vg_journal_kept_take(struct vg_run *run, const char *record_id, char **kept_json,
                                vigil_error *err);
/*
 * vg_journal_tool_call_finished for a call whose toolResult message the caller writes next, in
 * the same transaction, with the id message_id and output_json as its content: the end record
 * (its id message_id, its output named by that message) is folded into the run, but no row of
 * its own is written: *end_json (owned) receives it for the message (vg_message_in's
 * journal_end), where readers of the run's journal find it (docs/internals/JOURNAL.md, "A tool
 * call's end in its result message"). When output_json is not canonical JSON text, or the call
 * has a row of a store written before Session 29, the record is written as a row of its own with
 * the output in it, and *end_json is NULL.
 */
vigil_code vg_journal_tool_call_finished_in(struct vg_run *run, const char *tool_call_id,
                                            const char *status, const char *output_json,
                                            const char *error_code, int64_t duration_ms,
                                            const char *message_id, char **end_json,
                                            vigil_error *err);
/* kind: approval-requested, approval-granted, approval-denied, budget-refusal,
 * kill-switch-refusal, and the orchestrator's spawn-admitted, spawn-denied,
 * spawn-awaiting-approval. Refusals and denials are recorded as decision action reject. */
vigil_code vg_journal_policy_decision(struct vg_run *run, const char *kind, const char *tool,
                                      const char *operation_id, const char *reason,
                                      vigil_error *err);
/* One of a tool call's policy decisions (vg_journal_policy_decisions). */
struct vg_journal_policy {
    const char *kind, *reason;
};
/* A tool call's several policy decisions (n >= 1) as one decisions.recorded record, each item
 * what vg_journal_policy_decision records: one row and one fold for the call, not one a
 * decision. */
vigil_code vg_journal_policy_decisions(struct vg_run *run, const struct vg_journal_policy *d,
                                       size_t n, const char *tool, const char *operation_id,
                                       vigil_error *err);

/* ---- registries (validation) --------------------------------------------------------------- */

/* Validate one complete record (base fields + payload) given as JSON text. */
vigil_code vg_journal_validate_text(const char *text, size_t len, vigil_error *err);
/* Number of record types / signals, and their names by index (for tests and docs). */
size_t vg_journal_type_count(void);
const char *vg_journal_type_name(size_t i);
size_t vg_journal_signal_count(void);
const char *vg_journal_signal_name(size_t i);
int vg_journal_signal_surfaced(const char *name); /* -1: unknown */

/* ---- replay, pruning ----------------------------------------------------------------------- */

/*
 * Rebuild a run from its journal records alone. *out_json (owned, vg_free) is
 * {"projection":{...},"processed_message_ids":[...],"processed_observation_ids":[...],
 *  "timeline":[...],"record_count":N,"stored_projection_matches":true|false}.
 * projection is canonical JSON (sorted keys); same records give byte-identical output.
 */
vigil_code vg_journal_replay(struct vg_store *store, const char *run_id, char **out_json,
                             vigil_error *err);
/* Only the canonical projection text (owned). */
vigil_code vg_journal_replay_projection(struct vg_store *store, const char *run_id, char **out,
                                        vigil_error *err);
/* The stored live projection text (owned). */
vigil_code vg_journal_stored_projection(struct vg_store *store, const char *run_id, char **out,
                                        vigil_error *err);
/* A tool call still running: its id, its run's and its operation's (NULL: none). Nonzero
 * stops the listing, which then fails as out of memory. */
typedef int (*vg_journal_open_call_fn)(void *user, const char *tool_call_id, const char *run_id,
                                       const char *operation_id);
/* The agent's tool calls still running: the rows of stores written before Session 29, then the
 * calls started and not finished in the journal of each of its runs marked running. */
vigil_code vg_journal_open_calls(struct vg_store *s, const char *agent_id,
                                 vg_journal_open_call_fn fn, void *user, vigil_error *err);
/* Remove all but the newest keep_last_n (>= 1) activity.updated records of a run; a tool
 * call's records stay (its start and end are where the call is read from). */
vigil_code vg_journal_prune_activity(struct vg_store *store, const char *run_id, int keep_last_n,
                                     int64_t *removed, vigil_error *err);
/*
 * Give up the trace of a finished run (retention class `trace`, prune.c): every journal record
 * but its journal.header, its state.changed records and its tool calls, its idempotency keys,
 * and its stored projection's timeline and processed ids, in one transaction; a marker records
 * at_ms and the count, so replay reports the run as pruned (vg_journal_trace_pruned) and still
 * rebuilds its lifecycle, attention and input request. dry_run: only count. *removed and *bytes
 * (may be NULL): rows and bytes of record text that go (or would). ENOTFOUND for an unknown run;
 * the caller checks it is finished.
 */
vigil_code vg_journal_prune_trace(struct vg_store *store, const char *run_id, int64_t at_ms,
                                  int dry_run, int64_t *removed, int64_t *bytes, vigil_error *err);
/* When the run's trace was pruned (*at_ms, 0: never) and how many records went (may be NULL). */
vigil_code vg_journal_trace_pruned(struct vg_store *store, const char *run_id, int64_t *at_ms,
                                   int64_t *records, vigil_error *err);

/* ---- export / import ----------------------------------------------------------------------- */

/* The file of an owner: <folder>/agent-journals/<encoded owner id>.interaction.jsonl; with
 * folder NULL the relative path agent-journals/<encoded owner id>.interaction.jsonl. */
vigil_code vg_journal_path(const char *folder, const char *owner_id, char *out, size_t n,
                           vigil_error *err);
/* Export every run of an agent; *out_records (may be NULL) gets the line count. */
vigil_code vg_journal_export(struct vg_store *store, const char *folder, const char *agent_id,
                             int64_t *out_records, vigil_error *err);
/* Validate a whole .jsonl text (no store): EPARSE/EINVAL with "line N: ..." on the first bad
 * line. expect_owner may be NULL. */
vigil_code vg_journal_import_check(const char *data, size_t len, const char *expect_owner,
                                   vigil_error *err);
/* Import a .jsonl text: validated whole first, then written in one transaction; records that
 * are already stored are skipped. *out_added (may be NULL) gets the new record count. */
vigil_code vg_journal_import_text(struct vg_store *store, const char *data, size_t len,
                                  const char *expect_owner, int64_t *out_added, vigil_error *err);
/* Import <folder>/agent-journals/<agent id>.interaction.jsonl. */
vigil_code vg_journal_import(struct vg_store *store, const char *folder, const char *agent_id,
                             int64_t *out_added, vigil_error *err);

/* ---- run history (JSON text owned by the caller, vg_free) ---------------------------------- */

/* {"items":[...],"next_cursor":"..."|null}, newest first. agent_id, status, cursor: NULL for
 * any / first page; limit 1..1000 (0: 50). */
vigil_code vg_journal_runs_list(struct vg_store *store, const char *agent_id, const char *status,
                                const char *cursor, int limit, char **out_json, vigil_error *err);
/* The same, and *running (may be NULL) the page's runs stored as running: their k1, the status
 * the listing filters by, so a caller knows without reading the text. */
vigil_code vg_journal_runs_page(struct vg_store *store, const char *agent_id, const char *status,
                                const char *cursor, int limit, char **out_json, int *running,
                                vigil_error *err);
/* The run id of what names a run: its run id, its run key or a unique start of one (8+
 * characters; the newest run of that key). ENOTFOUND naming the whole argument when nothing
 * matches, EINVAL when the start fits several keys. */
vigil_code vg_journal_run_resolve(struct vg_store *store, const char *run, char out_id[37],
                                  vigil_error *err);
/* One run: summary, reason, run key, parent and children, timings, usage, cost, counts. */
vigil_code vg_journal_run_show(struct vg_store *store, const char *run_id, char **out_json,
                               vigil_error *err);
/* The run's messages (message.accepted and message signals), oldest first, previews. */
vigil_code vg_journal_run_messages(struct vg_store *store, const char *run_id, const char *cursor,
                                   int limit, char **out_json, vigil_error *err);
/* One message record in full, by its record id. */
vigil_code vg_journal_run_message(struct vg_store *store, const char *record_id, char **out_json,
                                  vigil_error *err);
/* The tool calls the agent made outside any run (hand_calls.c), newest first, paged:
 * {"items": [{operation_id, tool, status, result_status, error_code, run_key, started_at,
 * finished_at, action_id, arguments_preview, arguments_truncated}], "next_cursor"}. */
vigil_code vg_journal_hand_calls(struct vg_store *store, const char *agent_id, const char *cursor,
                                 int limit, char **out_json, vigil_error *err);
/* The run's tool calls, oldest first, input/output previews. */
vigil_code vg_journal_run_tools(struct vg_store *store, const char *run_id, const char *cursor,
                                int limit, char **out_json, vigil_error *err);
/* A running run's items past a follower's last look (the HTTP event poller): its messages whose
 * journal sequence is above after[0] and its tool calls whose start sequence is above after[1],
 * oldest first, at most limit (1..1000, 0: 50) of each, as the two readers above give them:
 * {"messages":[...],"tool_calls":[...],"after":[M,T],"more":bool}, after being where the next
 * look starts and more true when a limit cut a list short. Tool call rows are written at the
 * call's start, in sequence order, so none is passed over; a call seen running is not seen
 * again when it ends. */
vigil_code vg_journal_run_follow(struct vg_store *store, const char *run_id, const int64_t after[2],
                                 int limit, char **out_json, vigil_error *err);
/* One tool call in full (full input and output). */
vigil_code vg_journal_run_tool(struct vg_store *store, const char *tool_call_id, char **out_json,
                               vigil_error *err);

#endif
