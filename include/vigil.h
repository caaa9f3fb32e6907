/*
 * vigil.h: the whole public API of libvigil, a durable runtime for persistent AI agents.
 *
 * This header is the manual. Conventions that hold for every function below:
 *
 * - Errors. Every function that can fail returns a vigil_code; VIGIL_OK (0) is success. The last
 *   argument is a caller-owned `vigil_error *err` (may be NULL) that receives the code, an
 *   adapter sub-code and a printable one-line message. A successful call leaves `err` and every
 *   out-parameter untouched, so several calls can be chained and checked once.
 * - Ownership. A returned `char *` documented as "owned" is freed with vigil_free(). A pointer
 *   documented as "borrowed" stays valid until the event the comment names. Every destructor
 *   accepts NULL.
 * - Threads. A vigil_runtime may be used by one thread at a time unless a function says
 *   otherwise. Open one runtime per thread to work in parallel on one store.
 * - Ids are text: UUIDv7 strings of 36 characters, time ordered.
 *
 * Sections: version, codes and errors, memory, runtime, agents, notifications.
 * Modules that come later (journal, models, tools, wakes, memory) add their sections at the
 * markers near the end of this file.
 */
#ifndef VIGIL_H
#define VIGIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(VIGIL_BUILDING) && defined(__GNUC__)
#define VIGIL_API __attribute__((visibility("default")))
#else
#define VIGIL_API
#endif

/* ---- version ------------------------------------------------------------------------------ */

#define VIGIL_VERSION "0.1.0"
#define VIGIL_VERSION_NUMBER 1000 /* major*1000000 + minor*1000 + patch */

/* The version of the library actually linked; compare with VIGIL_VERSION_NUMBER. */
VIGIL_API const char *vigil_version(void);
VIGIL_API int vigil_version_number(void);

/* ---- codes and errors --------------------------------------------------------------------- */

/*
 * The one list of result codes: X(NAME, value, text, http status, cli exit code).
 * Values are only appended, never renumbered or reused. The low byte is the category a caller
 * handles; higher bits may later carry detail (code & 0xff gives the category).
 */
#define VIGIL_CODE_LIST(X)                                                                         \
    X(OK, 0, "ok", 200, 0)                                                                         \
    X(ERROR, 1, "internal error", 500, 1)                                                          \
    X(ENOMEM, 2, "out of memory", 503, 1)                                                          \
    X(EINVAL, 3, "invalid argument", 400, 2)                                                       \
    X(ENOTFOUND, 4, "not found", 404, 3)                                                           \
    X(EEXISTS, 5, "already exists", 409, 4)                                                        \
    X(ECONFLICT, 6, "conflicting write (stale revision)", 409, 4)                                  \
    X(ESTATE, 7, "not allowed in the current state", 409, 4)                                       \
    X(ESTORE, 8, "storage failure", 500, 5)                                                        \
    X(ECORRUPT, 9, "store file is corrupt or not a vigil store", 500, 5)                           \
    X(EVERSION, 10, "store was written by a newer vigil", 500, 5)                                  \
    X(EBUSY, 11, "resource is busy or locked", 503, 6)                                             \
    X(EFULL, 12, "disk or quota is full", 507, 5)                                                  \
    X(EIO, 13, "input/output error", 500, 5)                                                       \
    X(ETIMEOUT, 14, "timed out", 504, 7)                                                           \
    X(EPARSE, 15, "malformed input", 400, 2)                                                       \
    X(ETOOBIG, 16, "size limit exceeded", 413, 2)                                                  \
    X(ECANCELED, 17, "canceled", 499, 8)                                                           \
    X(EUNSUPPORTED, 18, "not supported", 501, 1)                                                   \
    X(EPROVIDER, 19, "model provider error", 502, 9)                                               \
    X(EAUTH, 20, "authentication failed", 401, 9)                                                  \
    X(ERATELIMIT, 21, "rate limited", 429, 9)                                                      \
    X(EOVERLOAD, 22, "service overloaded", 503, 9)                                                 \
    X(ENETWORK, 23, "network error", 502, 9)                                                       \
    X(EDENIED, 24, "permission denied", 403, 10)                                                   \
    X(EKILLED, 25, "stopped by a kill switch", 423, 10)                                            \
    X(EBUDGET, 26, "budget exceeded", 429, 10)                                                     \
    X(ECONFIRM, 27, "confirmation required", 409, 10)

typedef enum vigil_code {
#define VIGIL_CODE_ENUM_(name, value, text, http, exit) VIGIL_##name = value,
    VIGIL_CODE_LIST(VIGIL_CODE_ENUM_)
#undef VIGIL_CODE_ENUM_
} vigil_code;

/* An error report. Fixed-size buffers so reporting an error never allocates. */
typedef struct vigil_error {
    vigil_code code;   /* VIGIL_OK when nothing failed */
    int subcode;       /* adapter detail: SQLite extended code, HTTP status, errno; 0 if none */
    char message[256]; /* one line, lowercase, no final period, says what failed */
    char detail[256];  /* optional: the system call or statement that failed */
} vigil_error;

/* Static text for a code ("not found"); never NULL, even for unknown codes. */
VIGIL_API const char *vigil_strerror(vigil_code code);
/* The code's symbolic name without the prefix ("ENOTFOUND"). */
VIGIL_API const char *vigil_code_name(vigil_code code);
/* The HTTP status and the CLI exit status that go with a code. */
VIGIL_API int vigil_code_http_status(vigil_code code);
VIGIL_API int vigil_code_exit_status(vigil_code code);
/* Reset an error report to VIGIL_OK with empty text. */
VIGIL_API void vigil_error_clear(vigil_error *err);

/* ---- memory ------------------------------------------------------------------------------- */

/* Free a pointer the library documented as owned by the caller. NULL is a no-op. */
VIGIL_API void vigil_free(void *ptr);

/* ---- runtime ------------------------------------------------------------------------------ */

typedef struct vigil_runtime vigil_runtime;

/* Options for vigil_runtime_open; zero-initialize and set what you need. */
typedef struct vigil_runtime_options {
    const char *store_uri;  /* path of the SQLite store file (created if missing); required */
    int create_if_missing;  /* non-zero: create the store (and its folder) if it does not exist */
    int read_only;          /* non-zero: open for reading only */
    int busy_timeout_ms;    /* wait this long for a lock held by another process; 0: 5000 */
} vigil_runtime_options;

/*
 * Open a runtime on a store. On success *out is owned by the caller and closed with
 * vigil_runtime_close. Errors: EINVAL (no store_uri), ENOTFOUND (missing file and no create),
 * ECORRUPT (not a vigil store), EVERSION (written by a newer vigil), EBUSY, ESTORE, EFULL.
 */
VIGIL_API vigil_code vigil_runtime_open(const vigil_runtime_options *opts, vigil_runtime **out,
                                        vigil_error *err);
/* Close a runtime and its store. NULL is a no-op. */
VIGIL_API void vigil_runtime_close(vigil_runtime *rt);

/* ---- agents ------------------------------------------------------------------------------- */

/* Lifecycle: created -> active <-> dormant -> destroyed. Destroyed is final. */
typedef enum vigil_lifecycle {
    VIGIL_LIFECYCLE_CREATED = 0,
    VIGIL_LIFECYCLE_ACTIVE = 1,
    VIGIL_LIFECYCLE_DORMANT = 2,
    VIGIL_LIFECYCLE_DESTROYED = 3
} vigil_lifecycle;

/* "created", "active", "dormant", "destroyed". */
VIGIL_API const char *vigil_lifecycle_name(vigil_lifecycle lc);

/* Options for vigil_agent_create; zero-initialize and set what you need. */
typedef struct vigil_agent_spec {
    const char *name;        /* display name; required, 1..200 bytes of UTF-8 */
    const char *kind;        /* agent kind, e.g. "task_agent"; NULL: "assistant" */
    const char *mode;        /* "autonomous", "interactive" or "hybrid"; NULL: "hybrid" */
    const char *prompt;      /* system prompt; NULL: none */
    const char *model;       /* model id; NULL: the configured default */
    const char *config_json; /* extension config as a JSON object text; NULL: {} */
} vigil_agent_spec;

/*
 * Create an agent in the created state with its durable state and runtime state.
 * On success the new id (36 chars + NUL) is written to out_id.
 * Errors: EINVAL (missing or invalid fields), ESTORE and friends.
 */
VIGIL_API vigil_code vigil_agent_create(vigil_runtime *rt, const vigil_agent_spec *spec,
                                        char out_id[37], vigil_error *err);

/*
 * The agent as a JSON object text (identity, lifecycle, config, durable state and runtime
 * state). *out_json is owned; free it with vigil_free. Errors: ENOTFOUND.
 */
VIGIL_API vigil_code vigil_agent_show(vigil_runtime *rt, const char *agent_id, char **out_json,
                                      vigil_error *err);

/*
 * One page of agents as a JSON object {"items":[...],"next_cursor":"..."|null}, oldest first.
 * cursor: NULL for the first page, else the next_cursor of the previous page.
 * limit: 1..1000 (0 means 50). *out_json is owned; free it with vigil_free.
 */
VIGIL_API vigil_code vigil_agent_list(vigil_runtime *rt, const char *cursor, int limit,
                                      char **out_json, vigil_error *err);

/*
 * Lifecycle transitions. activate: created|dormant -> active; pause: active -> dormant;
 * resume: dormant|created -> active; destroy: any but destroyed -> destroyed (final).
 * reason: optional text kept with the transition. Errors: ENOTFOUND, ESTATE (transition not
 * allowed; the message names the current state).
 */
VIGIL_API vigil_code vigil_agent_pause(vigil_runtime *rt, const char *agent_id, const char *reason,
                                       vigil_error *err);
VIGIL_API vigil_code vigil_agent_resume(vigil_runtime *rt, const char *agent_id,
                                        const char *reason, vigil_error *err);
VIGIL_API vigil_code vigil_agent_destroy(vigil_runtime *rt, const char *agent_id,
                                         const char *reason, vigil_error *err);
/*
 * Hard delete: removes every record of a destroyed agent. Errors: ENOTFOUND, ESTATE (the agent
 * is not destroyed).
 */
VIGIL_API vigil_code vigil_agent_delete(vigil_runtime *rt, const char *agent_id,
                                        vigil_error *err);

/* ---- notifications ------------------------------------------------------------------------ */

/*
 * Called once per committed mutation batch with the notification tokens it produced (semantic
 * keys such as "AGENT_CHANGED", and the ids of the changed records). tokens is borrowed for the
 * duration of the call. Called on the thread that committed, after the commit.
 */
typedef void (*vigil_notify_cb)(void *user, const char *const *tokens, size_t n_tokens);

/* Install (or with NULL remove) the in-process notification hook. */
VIGIL_API void vigil_set_notify_hook(vigil_runtime *rt, vigil_notify_cb cb, void *user);

/* The semantic keys vigil itself emits. */
#define VIGIL_TOKEN_AGENT_CHANGED "AGENT_CHANGED"
#define VIGIL_TOKEN_AGENT_STATE_CHANGED "AGENT_STATE_CHANGED"
#define VIGIL_TOKEN_AGENT_MESSAGE_APPENDED "AGENT_MESSAGE_APPENDED"

/* ---- journal (issue: interaction journal) ------------------------------------------------- */

/* ---- models (issue: models and the agent loop) -------------------------------------------- */

/* ---- tools (issue: the tool layer) -------------------------------------------------------- */

/* ---- wakes (issue: wakes) ----------------------------------------------------------------- */

/*
 * Wakes (docs/wakes.md). An agent sleeps until a notification batch matches one of its
 * subscriptions, one of its timers comes due, a person talks to it, or someone wakes it by
 * hand. Every wake gets a deterministic run key (64 hex chars) and goes through a durable queue
 * that coalesces wakes per agent; runs are single-flight per agent.
 *
 * Tokens: semantic keys are UPPER_SNAKE ("TASK"), subtype tokens are dotted lowercase
 * ("workout.running"), anything else is an entity id. Each token has 1 to 190 bytes.
 */

/*
 * Raise notification tokens from outside vigil's own writes (the host application changed
 * something). They are recorded durably; a running daemon (`vigil serve`) takes them within its
 * poll interval, or vigil_wake_process takes them in-process. tokens are copied.
 * Errors: EINVAL (no tokens, bad token), ESTORE.
 */
VIGIL_API vigil_code vigil_notify(vigil_runtime *rt, const char *const *tokens, size_t n_tokens,
                                  vigil_error *err);

/*
 * Wake an agent now. With message NULL the wake is manual; with a message it is user-initiated
 * in session session_id (NULL: "default"), and the message is its seed input. The run key (64
 * hex chars + NUL) goes to out_run_key (may be NULL); when the agent already had a queued
 * wake, a manual wake merges into it and that run key is returned.
 * Errors: ENOTFOUND (no agent), ESTATE (the agent is dormant or destroyed, or a kill switch is
 * on: the wake is logged as skipped), EINVAL.
 */
VIGIL_API vigil_code vigil_wake_agent(vigil_runtime *rt, const char *agent_id,
                                      const char *message, const char *session_id,
                                      char out_run_key[65], vigil_error *err);

/*
 * Do, in this process, what the daemon does in the background: re-queue crashed runs whose
 * lease expired, take pending notifications, fire due timers, and run queued wakes (at most
 * max_runs; 0: until none is runnable) with the runner named by $VIGIL_WAKE_RUNNER (default
 * "echo", the placeholder until the agent loop is built in). *ran (may be NULL) counts runs.
 */
VIGIL_API vigil_code vigil_wake_process(vigil_runtime *rt, int max_runs, int *ran,
                                        vigil_error *err);

/*
 * Subscriptions. spec_json is an object: {"tokens":["TASK",...] (required), "require":[...],
 * "where":["category=gym",...], "linked_to":"ID", "id":"ID"}. Any token matches; every
 * "require" token must also be in the batch; "where" and "linked_to" must hold for one changed
 * entity. An existing id is replaced. *out_id (owned, vigil_free) receives the id.
 */
VIGIL_API vigil_code vigil_subscription_add(vigil_runtime *rt, const char *agent_id,
                                            const char *spec_json, char **out_id,
                                            vigil_error *err);
VIGIL_API vigil_code vigil_subscription_remove(vigil_runtime *rt, const char *sub_id,
                                               vigil_error *err);
/* Subscriptions of one agent (agent_id NULL: all) as a JSON array text (owned). */
VIGIL_API vigil_code vigil_subscription_list(vigil_runtime *rt, const char *agent_id,
                                             char **out_json, vigil_error *err);

/*
 * Timers. kind is "rrule" (RFC 5545, e.g. "FREQ=DAILY;BYHOUR=7;BYMINUTE=0"), "cron" (5 fields
 * or @daily/@hourly/@weekly/@monthly/@yearly) or "at" (RFC 3339, or local
 * "YYYY-MM-DDTHH:MM" in tz). tz is an IANA zone (NULL: "UTC"); the wall-clock intent survives
 * DST and zone changes. out_id: 36 chars + NUL. Errors: EINVAL (bad rule or zone, or a time in
 * the past), ENOTFOUND (no agent).
 */
VIGIL_API vigil_code vigil_timer_add(vigil_runtime *rt, const char *agent_id, const char *kind,
                                     const char *spec, const char *tz, char out_id[37],
                                     vigil_error *err);
VIGIL_API vigil_code vigil_timer_remove(vigil_runtime *rt, const char *timer_id,
                                        vigil_error *err);
/* Change a timer's zone, keeping its wall-clock intent. */
VIGIL_API vigil_code vigil_timer_set_zone(vigil_runtime *rt, const char *timer_id,
                                          const char *tz, vigil_error *err);
VIGIL_API vigil_code vigil_timer_list(vigil_runtime *rt, const char *agent_id, char **out_json,
                                      vigil_error *err);

/*
 * The wake-run log, newest first: a JSON array text (owned) of runs with run_key, agent_id,
 * reason, reason_id, thread_id, status (queued, started, completed, skipped, failed), error,
 * times and metadata. agent_id and status may be NULL; limit 1..1000 (0: 50).
 */
VIGIL_API vigil_code vigil_wake_runs(vigil_runtime *rt, const char *agent_id, const char *status,
                                     int limit, char **out_json, vigil_error *err);


/* ---- memory (issue: memory) --------------------------------------------------------------- */

#ifdef __cplusplus
}
#endif

#endif /* VIGIL_H */
