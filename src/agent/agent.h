/*
 * agent.h: the record spine of the agent domain (docs/ARCHITECTURE.md): agent identity and
 * lifecycle, durable state snapshots, local-only runtime state, immutable messages with their
 * thread heads and payloads, reports with heads per scope, typed links and tombstones.
 *
 * Every mutation runs in one store transaction, writes immutable records plus small pointer or
 * snapshot updates (never a record that grows with history), appends an `agent_change` record
 * carrying the new snapshot (so projections can be rebuilt from records alone: see
 * vg_spine_verify) and raises notification tokens that are delivered after the commit.
 *
 * Record kinds (store/port.h columns: owner, k1, k2, seq):
 *   agent          id=agent id   owner=agent  k1=lifecycle    k2=kind         seq=created ms
 *   agent_state    id=state id   owner=agent  k1=""           k2=""           seq=0
 *   agent_runtime  id=agent id   owner=agent  (local only: never synced, never replayed)
 *   agent_change   id=uuid       owner=agent  k1=target kind  k2=target id    seq=target rev
 *   message        id=uuid       owner=agent  k1=thread id    k2=message kind seq=agent msg no.
 *   message_payload id=uuid      owner=agent  k1=message id
 *   report         id=uuid       owner=agent  k1=scope        seq=report no. per agent
 *   link           id=see below  owner=agent  k1=type:from    k2=type:to      seq=created ms
 *   tombstone      id=kind:id    owner=agent  k1=kind         k2=id
 *   source_ref     id=agent|type|source id  owner=agent  k1=type  k2=type:source id  seq=ms
 * Pointer links (agent_state, agent_head_message per thread, agent_report_head per scope) have
 * stable ids and are updated in place; the other link types are immutable.
 */
#ifndef VG_AGENT_H
#define VG_AGENT_H

#include "env/env.h"

#include <jansson.h>

/* ---- identity and lifecycle ---------------------------------------------------------------- */

const char *vg_lifecycle_name(vigil_lifecycle lc);
int vg_lifecycle_parse(const char *name, vigil_lifecycle *out);

/*
 * Take the lock of agents' names for the open transaction: the transactions that look for an
 * agent by name and create one when none has it (manifest apply) take turns, so two of them
 * never both find a name free (PostgreSQL runs them at once under READ COMMITTED; SQLite's
 * write transaction already holds the store). The lock is a record put once if absent.
 */
vigil_code vg_agent_names_lock(struct vg_env *env, vigil_error *err);
/* The id of a live (not destroyed) agent named `name` other than `except` (NULL: none) into
 * found, or "" when there is none. Under vg_agent_names_lock to act on the answer. */
vigil_code vg_agent_name_holder(struct vg_env *env, const char *name, const char *except,
                                char found[37], vigil_error *err);

/* Put an idle runtime state for an agent whose records were brought from another store (the
 * runtime state is local: never exported); an existing one is left alone. */
vigil_code vg_agent_runtime_put_idle(struct vg_env *env, const char *agent_id, vigil_error *err);

/* Whether an agent name holds a control character (C0, DEL, or a UTF-8 encoded C1 such as
 * CSI): names are printed on terminals, where one could move the cursor, set the clipboard or
 * hide what was printed before (trial H2). Create and a manifest refuse such a name. */
int vg_agent_name_has_control(const char *name);
#define VG_AGENT_NAME_CONTROL_MESSAGE                                                              \
    "an agent name may not hold a control character (escape sequences in it would act on the "     \
    "terminal of whoever lists agents)"

/* Create an agent (lifecycle created) with its state, runtime state and agent_state link.
 * EINVAL for a name of no byte or over 200, or with a control character. */
vigil_code vg_agent_create(struct vg_env *env, const vigil_agent_spec *spec, char out_id[37],
                           vigil_error *err);
/* The agent record's body (owned, json_decref). ENOTFOUND. Optional *rev. */
vigil_code vg_agent_get(struct vg_env *env, const char *agent_id, json_t **out, int64_t *rev,
                        vigil_error *err);
/* The same, to read only: *out may be shared with the env's memo and must not be changed
 * (json_decref it). What the hot paths that read an agent's config each step use. */
vigil_code vg_agent_get_shared(struct vg_env *env, const char *agent_id, json_t **out,
                               vigil_error *err);
/* The agent's current lifecycle. ENOTFOUND. */
vigil_code vg_agent_lifecycle(struct vg_env *env, const char *agent_id, vigil_lifecycle *out,
                              vigil_error *err);
/* The same, and whether the agent is of `kind` now (NULL: any; *of_kind may be NULL): one
 * read of the record's index columns. */
vigil_code vg_agent_lifecycle_kind(struct vg_env *env, const char *agent_id, const char *kind,
                                   vigil_lifecycle *out, int *of_kind, vigil_error *err);
/* The agent's interaction mode ("autonomous", "interactive", "hybrid") into mode. One read of
 * the record, whose body is scanned for its top-level "mode" without building a tree (the wake
 * queue asks it for every subscription's and timer's wake). ENOTFOUND. */
vigil_code vg_agent_mode(struct vg_env *env, const char *agent_id, char mode[16], vigil_error *err);
/* Move to `to` if the lifecycle allows it; ESTATE names the current state otherwise. */
vigil_code vg_agent_transition(struct vg_env *env, const char *agent_id, vigil_lifecycle to,
                               const char *reason, vigil_error *err);
/* Activate an agent whose record (`agent`, at revision rev) the caller read in the open
 * transaction, as vg_agent_transition to active would, without reading it again; `agent` is
 * changed to the record as written. */
vigil_code vg_agent_activate_loaded(struct vg_env *env, const char *agent_id, json_t *agent,
                                    int64_t rev, const char *reason, vigil_error *err);
/* Set the record fields present in `fields` (borrowed): name, kind, mode, prompt, model (a
 * string or null), visibility (external, project, internal; the old public and private are
 * taken as external and internal) and config (an object, replaced
 * whole), in one transaction with its change record. EINVAL for another field or a bad value;
 * ESTATE for a destroyed agent. */
vigil_code vg_agent_update(struct vg_env *env, const char *agent_id, const json_t *fields,
                           vigil_error *err);
/* Hard delete of a destroyed agent: removes every record it owns. */
vigil_code vg_agent_delete(struct vg_env *env, const char *agent_id, vigil_error *err);
/* One page of agents, oldest first: {"items":[...],"next_cursor":...}. *out owned. */
vigil_code vg_agent_list(struct vg_env *env, const char *cursor, int limit, json_t **out,
                         vigil_error *err);
/* Every agent, oldest first, page by page, to fn (the agent's body borrowed); a code other than
 * VIGIL_OK from fn stops the walk and is returned. */
vigil_code vg_agent_each(struct vg_env *env,
                         vigil_code (*fn)(void *user, json_t *agent, vigil_error *err), void *user,
                         vigil_error *err);
/* The same, without the internal agents when listed_only (what people and outside surfaces see:
 * `vigil agent list` without --all, GET /v1/agents without all=1). */
vigil_code vg_agent_list_some(struct vg_env *env, const char *cursor, int limit, int listed_only,
                              json_t **out, vigil_error *err);
/* The same, of the agents in one lifecycle only (created, active, dormant, destroyed) when
 * lifecycle is not NULL: an index scan of that lifecycle (its name is the records' k1). */
vigil_code vg_agent_list_in(struct vg_env *env, const char *lifecycle, const char *cursor,
                            int limit, int listed_only, json_t **out, vigil_error *err);

/*
 * Visibility (issue 31): external (also exposed by `vigil mcp serve`), project (the default:
 * listed to people) or internal (hidden from listings unless asked for). It restricts only
 * human and outside surfaces: agents see each other whatever it says. Records of schema 1 used
 * internal (then the default) | public | private; reading a record moves it to schema 2.
 * Schema 3: the record's top-level allowed_scopes is its config's (records before it always
 * said []); reading an older record mirrors them.
 */
#define VG_AGENT_SCHEMA_VERSION 3
/* The schema-2 name of a visibility value: public -> external, private -> internal. */
const char *vg_agent_visibility_name(const char *v);
/* 1 unless the agent (a record as read) is internal. */
int vg_agent_listed(const json_t *agent);
/* Agent, state and runtime state as one object (the `show` view). *out owned, and to be read
 * only: its parts are the env memo's own values. */
vigil_code vg_agent_show(struct vg_env *env, const char *agent_id, json_t **out, vigil_error *err);

/* ---- durable state -------------------------------------------------------------------------- */

/* The state snapshot (owned) and its revision. */
vigil_code vg_state_get(struct vg_env *env, const char *agent_id, json_t **out, int64_t *revision,
                        vigil_error *err);
/*
 * The agent's wake counter (S3-021): a small record of its own (kind wake_count, id and owner
 * the agent, the number as text), so enqueueing a wake does not rewrite the agent's state
 * snapshot. The state's wake_counter field shows it (vg_state_get, vg_agent_show); before the
 * first wake it is the snapshot's own. Read: its value and the record's revision (0: none yet),
 * the record locked for the caller's transaction first. Write: the new value if the record is
 * still at rev (ECONFLICT when a racing writer moved it).
 */
vigil_code vg_wake_counter_read(struct vg_env *env, const char *agent_id, int64_t *n, int64_t *rev,
                                vigil_error *err);
vigil_code vg_wake_counter_write(struct vg_env *env, const char *agent_id, int64_t n, int64_t rev,
                                 vigil_error *err);
/* The same, before writing it back in the open transaction: the row is locked first, so a
 * writer in another process (PostgreSQL) waits for this transaction instead of making its
 * compare-and-swap fail. */
vigil_code vg_state_get_for_write(struct vg_env *env, const char *agent_id, json_t **out,
                                  int64_t *revision, vigil_error *err);
/*
 * Replace the snapshot's fields present in `changes` (borrowed) if the stored revision is still
 * expected_revision; ECONFLICT otherwise (a stale write). VG_STATE_ANY_REVISION: whatever the
 * revision is when the row is locked for write here (a caller that merges fields without
 * having read the snapshot, such as a wake's finish). Slots given in changes.slots get a new
 * per-slot update stamp. *new_revision (may be NULL) receives the new revision.
 */
#define VG_STATE_ANY_REVISION (-1)
vigil_code vg_state_update(struct vg_env *env, const char *agent_id, json_t *changes,
                           int64_t expected_revision, int64_t *new_revision, vigil_error *err);

/* ---- runtime state (local only) ------------------------------------------------------------- */

vigil_code vg_runtime_state_get(struct vg_env *env, const char *agent_id, json_t **out,
                                int64_t *rev, vigil_error *err);
/* Merge `changes` (borrowed) into the runtime state. Not synced, not replayed, no change
 * record. */
vigil_code vg_runtime_state_update(struct vg_env *env, const char *agent_id, json_t *changes,
                                   vigil_error *err);
/* The same for a holder of the runtime state (a run, between its start and its close): merge
 * into `held`, the body it read or last wrote at revision *rev, and write it without reading
 * the row again; *rev follows the write. ECONFLICT when the row moved since: `held` is then
 * stale (it has the changes merged), and the holder reads the state again. */
vigil_code vg_runtime_state_update_held(struct vg_env *env, const char *agent_id, json_t *held,
                                        int64_t *rev, json_t *changes, vigil_error *err);

/* ---- messages ------------------------------------------------------------------------------- */

enum vg_message_kind {
    VG_MSG_OBSERVATION,
    VG_MSG_USER,
    VG_MSG_THOUGHT,
    VG_MSG_ACTION,
    VG_MSG_TOOL_RESULT,
    VG_MSG_SUMMARY,
    VG_MSG_SYSTEM,
    VG_MSG_KIND_COUNT
};

const char *vg_message_kind_name(enum vg_message_kind k); /* "observation", "toolResult", ... */
int vg_message_kind_parse(const char *name, enum vg_message_kind *out);

/* Bytes for any record id and its NUL. */
#define VG_RECORD_ID_MAX 201

/* Content longer than this goes to a separate payload record linked from the message. */
#define VG_MESSAGE_INLINE_MAX 4096

struct vg_message_in {
    const char *agent_id;  /* required */
    const char *thread_id; /* required: "<agent>:run:<wake>" or "<agent>:session:<name>" */
    enum vg_message_kind kind;
    const char *content;      /* text; may be NULL or empty */
    const char *content_type; /* NULL: "text/plain" */
    json_t *metadata;         /* borrowed, optional: action / toolResult envelope and extension */
    /* Or the metadata already as text, an object as vg_json_dump(v, 1) writes it (the loop
     * writes its envelopes so, with vg_json_put_fields); used when metadata is NULL. */
    const char *metadata_json;
    const char *run_id; /* optional: the run that wrote it */
    const char *id;     /* optional: a caller-derived id (e.g. a summary over a span) */
    /* The caller already saw, in the transaction this append joins, that the agent is not
     * destroyed (the loop's action after the turn's thought): the check is not read again. */
    int lifecycle_checked;
    /* Optional: a toolResult message's journal end (the journal's text, written as the member
     * "journal_end" and read by src/journal alone: docs/internals/JOURNAL.md, "A tool call's
     * end in its result message"). */
    const char *journal_end;
    /* Optional: an action message's journal start of its call, the member "journal_start" (the
     * same contract: "A tool call's start in its action message"); the message's id is the
     * call's. */
    const char *journal_start;
    /* Optional: a thought message's journal record of the model call it answers, the member
     * "journal_call" (the same contract: "A model call in its thought message"); the message's
     * id is the record's. */
    const char *journal_call;
};

/*
 * Append one immutable message: the message record (its prev_id is the message_prev relation),
 * its payload record when content is long, and the thread's and the agent's head pointers, in
 * one transaction. out_id (37 bytes) may be NULL; it must hold VG_RECORD_ID_MAX bytes when
 * m->id is longer than a UUID. With an explicit id that already exists: EEXISTS and nothing
 * written.
 */
vigil_code vg_message_append(struct vg_env *env, const struct vg_message_in *m, char *out_id,
                             vigil_error *err);
/* One message with its full content (payload resolved). *out owned. */
vigil_code vg_message_get(struct vg_env *env, const char *message_id, json_t **out,
                          vigil_error *err);
/*
 * The latest `limit` messages of a thread as a JSON array, oldest first, content resolved.
 * Costs the same whatever the length of history (one indexed range read). *out owned.
 */
vigil_code vg_message_latest(struct vg_env *env, const char *agent_id, const char *thread_id,
                             int limit, json_t **out, vigil_error *err);
/*
 * The recent messages of a thread as a JSON array, oldest first, content resolved: every message
 * back to the newest user or observation message (the current turn, whatever its length), then
 * older ones until their estimated tokens (with the turn's) pass `tokens`. What a run's context
 * window starts from. A thread two synced devices appended to apart (a fork: two messages with
 * one prev_id) comes branch by branch (vg_message_branch_order). *out owned.
 */
/*
 * Messages oldest first in (message number, id) order, as a thread is read, put in place branch
 * by branch where the thread forked: each message follows its prev_id's message, and of the
 * branches from one message, the one whose newest message sorts first comes first, so the branch
 * that holds the head (and what was appended after the fork) comes last. A thread two devices
 * appended to apart interleaves the two conversations message by message in (number, id) order:
 * read so, the model got each branch's tool result after the other branch's message (as if
 * interrupted) and a question followed by another's answer (trial K2). Items whose prev_id is not
 * among them are roots, ordered the same way. Unchanged (one pass) when nothing forked; -1 when
 * out of memory (the items as they were).
 */
int vg_message_branch_order(json_t *items);
vigil_code vg_message_recent(struct vg_env *env, const char *agent_id, const char *thread_id,
                             int64_t tokens, json_t **out, vigil_error *err);
/*
 * The messages of a thread newer than seq `after` (the agent's message counter), oldest first,
 * content resolved, as a JSON array (*out owned): what a window kept between runs reads to
 * catch up (src/loop/window_cache.c). Messages are never changed, so those at or below `after`
 * are the ones the caller already has. At most max messages (the oldest of them).
 */
vigil_code vg_message_after(struct vg_env *env, const char *agent_id, const char *thread_id,
                            int64_t after, int max, json_t **out, vigil_error *err);
/* Rough token estimate of a text (about 4 bytes per token). */
int64_t vg_token_estimate(const char *text);

/* ---- reports -------------------------------------------------------------------------------- */

/* "current", "daily", "weekly", "monthly". */
int vg_report_scope_valid(const char *scope);
/*
 * Write a new immutable report for a scope and move the scope's head to it in one transaction.
 * span_start/span_end: optional message ids the report was made from (report_source_span).
 */
vigil_code vg_report_set(struct vg_env *env, const char *agent_id, const char *scope,
                         const char *markdown, const char *span_start, const char *span_end,
                         char out_id[37], vigil_error *err);
/* The report the scope's head points to (owned). ENOTFOUND when the scope has none. */
vigil_code vg_report_current(struct vg_env *env, const char *agent_id, const char *scope,
                             json_t **out, vigil_error *err);

#define VG_REPORT_MAX_SOURCES 32
#define VG_REPORT_MAX_SOURCE_BYTES 500

/* A report to write. confidence (0 to 1) only with has_confidence; sources (borrowed, optional)
 * an array of at most VG_REPORT_MAX_SOURCES texts of 1 to VG_REPORT_MAX_SOURCE_BYTES bytes. */
struct vg_report_in {
    const char *scope, *markdown;
    const char *span_start, *span_end; /* optional message ids (report_source_span) */
    int has_confidence;
    double confidence;
    const json_t *sources;
};
/* vg_report_set with every field: EINVAL for a confidence or sources out of those bounds. */
vigil_code vg_report_write(struct vg_env *env, const char *agent_id, const struct vg_report_in *in,
                           char out_id[37], vigil_error *err);
/* How long a report of scope stays fresh for an agent of this config (borrowed): its
 * reports.fresh_for.SCOPE, else the scope's default (current: never, daily: 1 d, weekly: 7 d,
 * monthly: 31 d); -1 for never. */
int64_t vg_report_fresh_for_ms(const json_t *agent_config, const char *scope);
/* The report as readers show it (new reference, NULL when out of memory): its record plus
 * stale_at (the time it turns stale, null for never) and stale (now_ms at or past stale_at). */
json_t *vg_report_view(const json_t *report, const json_t *agent_config, int64_t now_ms);
/* A scope's reports, newest first, at most limit (0: all) (owned array of their records). */
vigil_code vg_report_history(struct vg_env *env, const char *agent_id, const char *scope, int limit,
                             json_t **out, vigil_error *err);
/* {"agent_id", "scope", "report": VIEW, "history": [VIEW...]}: the scope's report as readers see
 * it and, when history > 0, up to that many earlier ones, newest first. ENOTFOUND for an agent
 * that does not exist or a scope with no report yet, EINVAL for an unknown scope. */
vigil_code vg_report_get(struct vg_env *env, const char *agent_id, const char *scope, int history,
                         json_t **out, vigil_error *err);

/* ---- links and tombstones ------------------------------------------------------------------- */

/*
 * Add an immutable typed link (message_payload, report_source_span, tool_effect, summary_start,
 * summary_end, agent_task and other host references). Idempotent: the same (type, from, to) is
 * stored once. meta (borrowed, optional) is kept in the link's body. message_prev is answered
 * from the message's prev_id and is refused here (EINVAL), as by vg_link_remove.
 */
vigil_code vg_link_add(struct vg_env *env, const char *agent_id, const char *type, const char *from,
                       const char *to, json_t *meta, vigil_error *err);
/* Target ids of live links of a type from `from`, as a JSON array of strings (owned); for
 * message_prev, the message's prev_id (empty for a thread's first message or no message). */
vigil_code vg_link_targets(struct vg_env *env, const char *type, const char *from, json_t **out,
                           vigil_error *err);
/* Source ids of live links of a type to `to`, oldest first, as a JSON array of strings (owned):
 * what links to a record (the reports citing a message, the summaries covering it, the tool
 * results that touched a task). Pointers are not answered (read them by key), nor message_prev
 * (EINVAL: the next message is the thread's). */
vigil_code vg_link_sources(struct vg_env *env, const char *type, const char *to, json_t **out,
                           vigil_error *err);
/* The target of a pointer link ("agent_state", "agent_head_message", "agent_report_head")
 * keyed by `key` (agent id, or agent id + ":" + thread/scope); ENOTFOUND if unset. */
vigil_code vg_link_pointer_get(struct vg_env *env, const char *type, const char *key, char *out_to,
                               size_t out_size, vigil_error *err);
/* The same, with the counter kept with the pointer into *count (a thread head's: how many
 * messages the thread holds). */
vigil_code vg_link_pointer_get_counted(struct vg_env *env, const char *type, const char *key,
                                       char *out_to, size_t out_size, int64_t *count,
                                       vigil_error *err);
/* Soft delete of a link: marks it deleted and writes a tombstone record (for sync). */
vigil_code vg_link_remove(struct vg_env *env, const char *agent_id, const char *type,
                          const char *from, const char *to, vigil_error *err);

/* Leave the tombstone of a synced record deleted here (kind, id; S0-179): a "tombstone" record
 * "KIND:ID" (the id hashed when too long) naming it; written again when the record is deleted a
 * second time (made anew after the first), so each deletion reaches the other devices. */
vigil_code vg_tombstone_put(struct vg_env *env, const char *agent_id, const char *kind,
                            const char *id, vigil_error *err);

/* A subscription's token index (sub_token records, wake/wake.h): one record per token of the
 * subscription's body's "tokens" ([{class, token}]), and its removal. The wake layer writes it
 * with the subscription; sync rebuilds it for one another device wrote (agent/adopt.c). */
vigil_code vg_sub_index_put(struct vg_env *env, const char *sub_id, const char *agent_id,
                            const json_t *tokens, vigil_error *err);
vigil_code vg_sub_index_drop(struct vg_env *env, const char *sub_id, vigil_error *err);

/* ---- source references (source_ref.c) --------------------------------------------------- */

/*
 * The host entities an agent relies on, each as (agent, source type, source id): the type 1 to
 * 64 of a-z, 0-9, _, - and .; the id 1 to 200 bytes without control characters (EINVAL
 * otherwise). Adding one twice stores it once; ESTATE for a destroyed agent. Removing one that
 * is not there does nothing; removing one leaves a tombstone.
 */
vigil_code vg_source_ref_add(struct vg_env *env, const char *agent_id, const char *type,
                             const char *source_id, vigil_error *err);
vigil_code vg_source_ref_remove(struct vg_env *env, const char *agent_id, const char *type,
                                const char *source_id, vigil_error *err);
/* An agent's references (of one type; NULL: every type), oldest first, as an array of
 * {agent_id, source_type, source_id, created_at, schema_version} (*out owned). */
vigil_code vg_source_refs(struct vg_env *env, const char *agent_id, const char *type, json_t **out,
                          vigil_error *err);
/* The ids of the agents that rely on one host entity, oldest reference first (*out owned). */
vigil_code vg_source_ref_agents(struct vg_env *env, const char *type, const char *source_id,
                                json_t **out, vigil_error *err);

/* ---- records from another device ------------------------------------------------------------ */

/*
 * A record multi-device sync has just stored here for the first time (r as stored, borrowed),
 * taken into the projections derived from it (agent/adopt.c): a message moves its thread's head
 * and the agent's head to itself when it sorts last by (message number, id), and raises the
 * agent's message counter to its number; a report does the same for its scope's head; a new
 * agent gets an idle runtime state, a new state its agent's state pointer. Other kinds: nothing.
 * In the caller's transaction.
 */
vigil_code vg_spine_adopt(struct vg_env *env, const struct vg_record *r, vigil_error *err);
/* The same for a record sync has just changed in place here (a subscription's index is rebuilt
 * from its new body), and for one it has just removed (a deletion another device made: kind,
 * id; a subscription's index goes with it). Other kinds: nothing. */
vigil_code vg_spine_adopt_change(struct vg_env *env, const struct vg_record *r, vigil_error *err);
vigil_code vg_spine_adopt_removal(struct vg_env *env, const char *kind, const char *id,
                                  vigil_error *err);

/* ---- replay property ------------------------------------------------------------------------ */

/*
 * Rebuild every projection of an agent (identity and lifecycle, state snapshot, thread heads,
 * report heads) from its immutable records alone and compare each with what the store holds.
 * VIGIL_OK when all agree; otherwise VIGIL_ECORRUPT, with every difference written to diff
 * (optional) one per line.
 */
vigil_code vg_spine_verify(struct vg_env *env, const char *agent_id, struct vg_buf *diff,
                           vigil_error *err);

#endif
