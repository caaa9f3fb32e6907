/*
 * journal_int.h: private to src/journal: the two registries (record types and signals) as
 * tables, the projection fold they drive, and small JSON helpers shared by the files.
 */
#ifndef VG_JOURNAL_INT_H
#define VG_JOURNAL_INT_H

#include <jansson.h>

#include "journal/journal.h"
#include "store/port.h"

#define JOURNAL_KIND "journal"
#define RUN_KIND "run"
#define PROJECTION_KIND "run_projection"
#define TOOL_KIND "run_tool_call"
#define KEY_KIND "journal_key"
#define LINK_KIND "run_link" /* parent -> child: owner = agent, k1 = parent run id */

#define JOURNAL_SCHEMA_VERSION 1
#define JOURNAL_HEADER_KIND "agent-execution-interaction-journal"
#define JOURNAL_MAX_LINE ((size_t)4 << 20) /* one record's JSON text */
#define JOURNAL_MAX_ID 128                 /* message/observation/decision ids */
#define TIMELINE_KEEP 50                   /* timeline items kept in the live projection */

/* Payload field types of the schema tables. */
enum jtype {
    JT_STR = 1,  /* non-empty string */
    JT_TEXT,     /* string, may be empty */
    JT_STR_NULL, /* string or null */
    JT_INT,      /* integer >= 0 */
    JT_BOOL,
    JT_OBJ,   /* object; validated by sub when set */
    JT_ARR,   /* array; each item an object validated by sub when set */
    JT_ANY,   /* any JSON value */
    JT_ENUM,  /* string from enums */
    JT_SIGNAL /* object validated through the signal registry */
};

struct jfield {
    const char *name;
    enum jtype type;
    int required;
    const char *const *enums; /* JT_ENUM: NULL-terminated */
    /* JT_OBJ: fields of the object; JT_ARR: of each item (terminated by a NULL name) */
    const struct jfield *sub;
};

struct fold;

/* One row of the record registry: validation, writability and replay routing. */
struct jrecord_type {
    const char *name;
    int schema_version;
    int writable;                /* 0: reserved, refused for writing (projection.recorded) */
    const struct jfield *fields; /* payload fields (terminated by a NULL name) */
    /* Cross-field rules beyond the table; NULL if none. */
    vigil_code (*check)(const json_t *rec, vigil_error *err);
    /* Replay routing: fold the record into the projection. */
    vigil_code (*apply)(struct fold *f, const json_t *rec, vigil_error *err);
};

/* How replay projects a signal into the timeline. */
enum signal_projection {
    SP_NONE = 0,
    SP_PROGRESS,
    SP_STATUS,
    SP_NEEDS_INPUT,
    SP_BLOCKED,
    SP_CLAIM,
    SP_FAILURE,
    SP_CHAT
};

/* One row of the signal registry: payload schema, surfacing and replay projection. */
struct jsignal {
    const char *name;
    const char *schema_key; /* "agent-signal.progress.v1"; NULL: none */
    int surfaced;           /* listed in the protocol descriptor */
    enum signal_projection projection;
    const char *text_field; /* the payload field the timeline item quotes */
    const struct jfield *fields;
};

const struct jrecord_type *vg_journal_type_find(const char *name);
const struct jsignal *vg_journal_signal_find(const char *name);
const char *vg_journal_projection_item(enum signal_projection p);
/* Validate one record object (base + payload). */
vigil_code vg_journal_validate(const json_t *rec, vigil_error *err);
/* vg_journal_validate for a record append() built: its base fields come from the run (checked
 * in full in its header) or from the journal itself, so only their sequence rule is checked. */
vigil_code vg_journal_validate_built(const json_t *rec, vigil_error *err);
/* The protocol descriptor of the header: surfaced signals and message types (a new reference
 * to one object shared by every run: not to be changed). */
json_t *vg_journal_protocol_descriptor(void);

/*
 * The projection fold. proj is the canonical live projection (bounded timeline, digests of the
 * processed id sets); when full is set, the unbounded lists are collected there too (replay).
 */
struct fold {
    json_t *proj;          /* owned */
    json_t *full_messages; /* NULL or array */
    json_t *full_observations;
    json_t *full_timeline;
};
/* A fresh projection for a run (owned). */
json_t *vg_journal_proj_new(void);
/* Fold one validated record. */
vigil_code vg_journal_fold(struct fold *f, const json_t *rec, vigil_error *err);
/* Is s a tool call status a finished call may have (not "running")? */
int vg_journal_tool_status_final(const char *s);
/* Debug builds: a record built as text must be what the registry validates and the canonical
 * writer writes; VIGIL_ECORRUPT naming the difference if not. */
vigil_code vg_journal_check_text(const char *text, vigil_error *err);
/* Canonical text (sorted keys, compact); owned, NULL on OOM. */
char *vg_journal_canonical(const json_t *v);

/* output_ref.c: a finished tool call's output stored once, in its toolResult message. */
/* The id of the newest message of the thread when it is a toolResult whose content is exactly
 * output (owned), else NULL (the output is then stored in the record). */
char *vg_journal_output_message(struct vg_store *s, const char *agent_id, const char *thread_id,
                                const char *output);
/* A record (rec) whose tool_call names the message holding its output gets that output back in
 * place of the name; other records are left as they are. */
vigil_code vg_journal_follow_output(struct vg_store *s, json_t *rec, vigil_error *err);
/* The same for a record's text: *out is the record's text with its output (owned), or NULL when
 * the text holds no such name (read body as it is). */
vigil_code vg_journal_follow_text(struct vg_store *s, const char *body, char **out,
                                  vigil_error *err);

/* ends.c: a tool call's end record kept in its toolResult message's row (its id the
 * message's), read back among the run's rows. */
/* The message's member for the record text (its row's columns as given): *out owned,
 * [seq, at, stored form]. prev (optional): the prev_id of the message the record goes in when it
 * is what the caller expects (a tool call's end: its action); the form may then stand for it,
 * and the text ends with it as a string: [seq, at, form, "prev"] (the message drops it when its
 * prev_id is that, and its time when it takes the record's: src/agent/message.c). */
vigil_code vg_journal_end_pack(const char *agent_id, const char *run_id, const char *record_id,
                               int64_t seq, int64_t at, const char *text, const char *prev,
                               char **out, vigil_error *err);
/* vg_store_scan of journal rows, with the run's ends kept in its messages among them at their
 * sequence (a query naming a run, k2 NULL or "activity.updated"; any other is the store's). */
vigil_code vg_journal_scan(struct vg_store *s, const struct vg_query *q, vg_record_cb cb,
                           void *user, vigil_error *err);
/* vg_journal_scan for readers of tool calls alone (tool_calls.c): model calls kept in thought
 * messages are not read (their rows, of stores written before, still are). */
vigil_code vg_journal_scan_tool_records(struct vg_store *s, const struct vg_query *q,
                                        vg_record_cb cb, void *user, vigil_error *err);
/* The end record kept in message record_id for run_id: its text (*out owned), or *out NULL when
 * that message keeps none. */
vigil_code vg_journal_end_find(struct vg_store *s, const char *record_id, const char *run_id,
                               char **out, vigil_error *err);
/* vg_store_get of a journal record kept in a message (a tool call's start or end), as its row
 * would be read: ENOTFOUND when no message keeps one with that id. */
vigil_code vg_journal_kept_get(struct vg_store *s, const char *record_id, vg_record_cb cb,
                               void *user, vigil_error *err);
/* Remove the model call record record_id kept in its thought message (pruning): ENOTFOUND when
 * no thought message keeps it. */
vigil_code vg_journal_kept_drop(struct vg_store *s, const char *record_id, vigil_error *err);
/* vg_store_count the same way (unbounded queries: no cursor, no sequence bounds). */
vigil_code vg_journal_count(struct vg_store *s, const struct vg_query *q, int64_t *out,
                            vigil_error *err);

/* True if a failed jansson load ran out of memory (some paths fail before setting a text). */
static inline int vg_json_oom(const json_error_t *je)
{
    return json_error_code(je) == json_error_out_of_memory || je->text[0] == '\0';
}

/* JSON helpers. */
/* json_loadb with one retry: jansson reports some allocation failures as syntax errors, and a
 * second attempt tells a transient failure from bad text. je may be NULL. */
json_t *vg_jload(const char *text, size_t len, size_t flags, json_error_t *je);
const char *vg_jstr(const json_t *o, const char *key); /* NULL if absent or not a string */
int64_t vg_jint(const json_t *o, const char *key);     /* 0 if absent */
/* Parse optional JSON text into a new reference; NULL text gives *out = NULL. */
vigil_code vg_jparse(const char *text, const char *what, json_t **out, vigil_error *err);
/* Set key to a string copy unless s is NULL. Returns -1 on OOM. */
int vg_jset_str(json_t *o, const char *key, const char *s);

/* Build a history class for the k2 column of a journal record. */
const char *vg_journal_class(const json_t *rec);

/* Derive the run record body from a replay (import). New reference. */
json_t *vg_journal_run_body_from_projection(const json_t *proj);

/* Write a whole run's derived records after import (keys, projection, run, tool calls). */
vigil_code vg_journal_rebuild_run(struct vg_store *s, const char *owner_id, const char *run_id,
                                  vigil_error *err);

/* tool_calls.c: a run's tool calls from its journal records (stores written before Session 29
 * keep a row of kind run_tool_call per call, read instead when a run has them). */
/* Fold a journal record (rec, with its output followed) into calls, tool_call_id -> the call's
 * row as journal.c wrote rows; a record without a tool call is left out. -1: out of memory. */
int vg_journal_call_fold(json_t *calls, const json_t *rec, const char *run_id);
/* Which of a run's calls to read: those started from sequence from on (0: all), or only the
 * call named only; max > 0: the reading stops once max + 1 calls have started and the first max
 * have ended (a page of max, and whether more follow). */
struct vg_calls_want {
    int64_t from;
    const char *only;
    int max;
};
/* The run's calls as want says, as rows with their outputs, in order of start (*out a new
 * object, tool_call_id -> row). */
vigil_code vg_journal_calls_derive(struct vg_store *s, const char *owner, const char *run_id,
                                   const struct vg_calls_want *want, json_t **out,
                                   vigil_error *err);
/* Whether the run's calls are stored as rows (written before Session 29). */
vigil_code vg_journal_run_has_call_rows(struct vg_store *s, const char *owner, const char *run_id,
                                        int *has, vigil_error *err);
/* A call that has no row, by its id (its start record's): its row as derived (*row new) and the
 * sequence of its start; ENOTFOUND when no start record has that id. */
vigil_code vg_journal_call_find(struct vg_store *s, const char *tool_call_id, json_t **row,
                                int64_t *seq, vigil_error *err);

/* Read every journal record of a run in sequence order, validated; *out new array. */
/* The agent that owns a run, from its run record or projection (owned; NULL when neither is
 * stored). A run's journal records and tool calls are read with it: the SQLite store indexes
 * them under their agent (STORE.md), so a query by run alone walks the whole kind. */
vigil_code vg_journal_run_owner(struct vg_store *s, const char *run_id, char **owner,
                                vigil_error *err);
vigil_code vg_journal_load(struct vg_store *s, const char *owner, const char *run_id, json_t **out,
                           vigil_error *err);

/* Encode/decode the opaque keyset cursor. */
void vg_journal_cursor_encode(char *out, size_t n, int64_t seq, const char *id);
vigil_code vg_journal_cursor_decode(const char *c, int64_t *seq, char *id, size_t idn,
                                    vigil_error *err);

#endif
