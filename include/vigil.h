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
 * docs/embedding.md shows how to build, install (pkg-config: vigil) and link against the
 * library, with a complete example program (examples/embed/weather.c).
 *
 * Sections: version, codes and errors, memory (vigil_free), runtime, agents, the task graph,
 * manifests, notifications, run history and the journal, models and chat, tools, wakes (the
 * daemon, subscriptions, timers), memory (the agents'), code sandbox, process statistics, the
 * event log.
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
/*
 * Whether the error came from the model provider (a model call failed: its server refused the
 * key, rate-limited, answered garbage or an error), not from the caller's request or from vigil
 * itself. vigil_error_http_status and vigil_error_exit_status then answer it as an upstream
 * failure: HTTP 502 (a provider's rate limit stays 429, its overload 503, its timeout 504) and
 * exit status 9, so a provider's 401 is never read as the caller's own credentials refused, nor
 * its malformed answer as the caller's malformed request. Other errors get their code's row.
 */
VIGIL_API int vigil_error_from_provider(const vigil_error *err);
VIGIL_API int vigil_error_http_status(const vigil_error *err);
VIGIL_API int vigil_error_exit_status(const vigil_error *err);
/* Reset an error report to VIGIL_OK with empty text. */
VIGIL_API void vigil_error_clear(vigil_error *err);

/* ---- memory ------------------------------------------------------------------------------- */

/* Free a pointer the library documented as owned by the caller. NULL is a no-op. */
VIGIL_API void vigil_free(void *ptr);

/* ---- runtime ------------------------------------------------------------------------------ */

typedef struct vigil_runtime vigil_runtime;

/*
 * Options for vigil_runtime_open; fill them with vigil_runtime_options_default (or
 * zero-initialize) and set what you need. While vigil is 0.x this struct may grow: set size to
 * sizeof(vigil_runtime_options) as your program was compiled (the default does; 0 means the 0.1
 * layout, VIGIL_RUNTIME_OPTIONS_SIZE_0_1), so a newer library gives the fields your program does
 * not know their defaults, and an older one refuses (EVERSION) fields it does not know that
 * your program set. A size smaller than the 0.1 layout is refused (EINVAL).
 */
/*
 * A clock of the program's own (optional, vigil_runtime_options.clock): the runtime then reads
 * the time only through it, so a program can run agents on a time of its own, such as an
 * evaluation that lets a week of timers fire in a second (`vigil eval`'s `advance`). Timers,
 * wakes and their backoff, leases, budgets' days, reports' freshness and record times follow
 * it; model calls, MCP servers and the code sandbox keep real time for their own timeouts.
 * The runtime calls it from the thread using the runtime only: with a clock of its own, a
 * runtime compacts in that thread after a run instead of on a thread of its own (memory.md).
 */
typedef struct vigil_clock {
    int64_t (*now_ms)(void *user);  /* wall time in ms since the Unix epoch; required */
    int64_t (*mono_ns)(void *user); /* never goes back; NULL: now_ms * 1000000 */
    /* wait ms; NULL: a real sleep. A simulated clock advances itself here, so a retry's wait
     * costs no real time. */
    void (*sleep_ms)(void *user, int64_t ms);
    void *user;
} vigil_clock;

typedef struct vigil_runtime_options {
    size_t size;              /* sizeof(vigil_runtime_options), or 0 (see above) */
    const char *store_uri;    /* required: a SQLite file's path, or a postgresql:// URI */
    int create_if_missing;    /* non-zero: create the store (and its folder) if it does not exist */
    int read_only;            /* non-zero: open for reading only */
    int busy_timeout_ms;      /* wait this long for a lock held by another process; 0: 5000 */
    const char *config_path;  /* config file (YAML or JSON); NULL: $VIGIL_CONFIG or the XDG
                               * default ($XDG_CONFIG_HOME/vigil/config.yaml); see docs/models.md */
    const vigil_clock *clock; /* NULL: the real clock; copied (its user must outlive the rt) */
} vigil_runtime_options;
/* The size of the 0.1 layout: every field up to and with config_path. */
#define VIGIL_RUNTIME_OPTIONS_SIZE_0_1                                                             \
    (offsetof(vigil_runtime_options, config_path) + sizeof(const char *))
/* Every field at its default (all zero) and size set. */
VIGIL_API void vigil_runtime_options_default(vigil_runtime_options *opts);

/*
 * Open a runtime on a store. On success *out is owned by the caller and closed with
 * vigil_runtime_close. Errors: EINVAL (no store_uri), ENOTFOUND (missing file and no create),
 * ECORRUPT (not a vigil store), EVERSION (written by a newer vigil), EBUSY, ESTORE, EFULL.
 */
VIGIL_API vigil_code vigil_runtime_open(const vigil_runtime_options *opts, vigil_runtime **out,
                                        vigil_error *err);
/* Close a runtime and its store. NULL is a no-op. The memory the runtime held goes back to the
 * system (with glibc, malloc_trim: the process's free heap pages, not only the runtime's). */
VIGIL_API void vigil_runtime_close(vigil_runtime *rt);
/* A hint that the reads made on rt until the matching call with on = 0 may share one snapshot
 * of the store (SQLite: one read transaction and one shared-memory lock instead of one per
 * read). Calls nest. A write, or the end of the batch, ends the shared read first. A store
 * without it reads as before. The HTTP API wraps each GET request in one. */
VIGIL_API void vigil_runtime_read_batch(vigil_runtime *rt, int on);
/* A hint for a program whose threads read one store at once, each through a runtime of its own
 * (the daemon's HTTP threads): on = 1 joins rt to one read lock the process keeps on the store
 * (SQLite: a connection holding a read transaction on the newest snapshot, moved on after each
 * change), so that the readers' own read transactions no longer take turns at a system call
 * under a lock of the process; 0 leaves it. Every read still sees every commit that finished
 * before it began, from any process. A store without it reads as before. */
VIGIL_API void vigil_runtime_read_anchor(vigil_runtime *rt, int on);
/*
 * A chat turn's upkeep, for a program that answers someone with it (a server): after a turn's
 * run has closed (its messages, run and outcome durable), vigil_chat checks whether the turn
 * took its thread past its compaction budget, recording the compaction job if so, and asks the
 * runtime's compactor for a pass (docs/memory.md). With vigil_runtime_defer_upkeep(rt, 1) the
 * turns on rt (vigil_chat, vigil_chat_keyed, vigil_chat_many) return without it and leave it
 * waiting on rt; the program answers, then calls vigil_runtime_upkeep(rt), which runs the one
 * waiting and returns 1, or returns 0 when none waits. It runs exactly once: a waiting upkeep
 * that the program did not ask for runs at rt's next turn, before it, or at
 * vigil_runtime_close. Nothing a turn confirmed waits for it: a crash before it loses only the
 * check, which the thread's next run makes again. on = 0 (the default) makes turns run it
 * before they return again; one already waiting still waits.
 */
VIGIL_API void vigil_runtime_defer_upkeep(vigil_runtime *rt, int on);
VIGIL_API int vigil_runtime_upkeep(vigil_runtime *rt);

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
 * On success the new id (36 chars + NUL) is written to out_id. config_json is checked as
 * vigil_agent_config_check does. Names reach agents wherever ids do, so two live agents never
 * share one: EEXISTS, naming the agent, for a name a live (not destroyed) agent has (two
 * processes creating one name take turns: one gets EEXISTS).
 * Errors: EINVAL (missing or invalid fields, a config a manifest could not hold), EEXISTS,
 * ESTORE and friends.
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
 * The agent's lifecycle alone, in *out: what vigil_agent_show's "lifecycle" says, without
 * reading and encoding the rest of the agent (about a tenth of the work). Errors: ENOTFOUND.
 */
VIGIL_API vigil_code vigil_agent_lifecycle(vigil_runtime *rt, const char *agent_id,
                                           vigil_lifecycle *out, vigil_error *err);

/*
 * An agent's report of one scope ("current", "daily", "weekly" or "monthly"; NULL: current),
 * read without a model call, as JSON {agent_id, scope, report, history?}: the report is
 * {id, scope, markdown, seq, number, created_at, confidence?, sources?, stale_at, stale}
 * (stale_at null when the scope never turns stale; number: seq as text, with a letter when two
 * devices numbered reports alike: docs/memory.md, "Reports"); with history > 0, "history"
 * holds up to that many earlier reports of the scope, newest first. *out_json is owned; free
 * it with vigil_free. Errors: ENOTFOUND (no such agent, or no report of that scope yet),
 * EINVAL (an unknown scope, history < 0).
 */
VIGIL_API vigil_code vigil_report_get(vigil_runtime *rt, const char *agent_id, const char *scope,
                                      int history, char **out_json, vigil_error *err);

/* Lineage (docs/orchestration.md): the children an agent's runs spawned, theirs in turn, and
 * every spawn admission decision it got (admitted or denied, with the reason), as JSON
 * {agent, name, kind, children: [{run_key, child_agent, status, depth, request, result,
 * children}], decisions: [{index, decision, reason, child_agent, run_key, depth, request}]}.
 * VIGIL_ENOTFOUND for an unknown agent. */
VIGIL_API vigil_code vigil_agent_tree(vigil_runtime *rt, const char *agent_id, char **out_json,
                                      vigil_error *err);

/*
 * Set slots of an agent's durable state (goals, preferences, open loops, the active task, or
 * a host's own): slots_json is a JSON object of slot name to any JSON value;
 * each slot named is replaced, with an update stamp of its own (vigil_agent_show's
 * state.slots.NAME = {value, updated_at}), the others are left as they are. A host gives an
 * agent the entity it works on this way (the task domain's task agent: active_task).
 * Errors: ENOTFOUND, EINVAL (not an object, or an empty one), ESTORE and friends.
 */
VIGIL_API vigil_code vigil_agent_slots_set(vigil_runtime *rt, const char *agent_id,
                                           const char *slots_json, vigil_error *err);

/* ---- source references (docs/storage.md, "Source references") ----------------------------- */

/*
 * The host entities an agent relies on, kept in the agent store as (agent, source type, source
 * id) and nothing more of the entity: source_type is 1 to 64 of a-z, 0-9, _, - and . (such as
 * "task"); source_id is the host's id, 1 to 200 bytes without control characters (EINVAL
 * otherwise). A host asks vigil_source_ref_agents which agents rely on an entity before it
 * changes or deletes it. Adding a reference twice keeps one; removing one that is not there
 * does nothing. Errors: ENOTFOUND (no such agent), ESTATE (adding to a destroyed agent).
 * A hard-deleted agent's references go with it.
 */
VIGIL_API vigil_code vigil_source_ref_add(vigil_runtime *rt, const char *agent_id,
                                          const char *source_type, const char *source_id,
                                          vigil_error *err);
VIGIL_API vigil_code vigil_source_ref_remove(vigil_runtime *rt, const char *agent_id,
                                             const char *source_type, const char *source_id,
                                             vigil_error *err);
/* An agent's references (of source_type; NULL: every type), oldest first, as a JSON array of
 * {agent_id, source_type, source_id, created_at, schema_version}. *out_json is owned; free it
 * with vigil_free. */
VIGIL_API vigil_code vigil_source_refs(vigil_runtime *rt, const char *agent_id,
                                       const char *source_type, char **out_json, vigil_error *err);
/* The ids of the agents relying on one host entity, as a JSON array of strings, oldest
 * reference first (an empty array when none does). *out_json is owned; free it with
 * vigil_free. */
VIGIL_API vigil_code vigil_source_ref_agents(vigil_runtime *rt, const char *source_type,
                                             const char *source_id, char **out_json,
                                             vigil_error *err);

/* ---- the task graph (docs/orchestration.md) ------------------------------------------------ */

/* A new task (title 1..2000 bytes; kind: the kind of agent it goes to, NULL: any) that blocks
 * each of blocks[0..n_blocks). out_id: 37 bytes. ENOTFOUND for an unknown task; EINVAL for a
 * task that already runs or ended. */
VIGIL_API vigil_code vigil_task_add(vigil_runtime *rt, const char *title, const char *kind,
                                    const char *const *blocks, size_t n_blocks, char out_id[37],
                                    vigil_error *err);
/* The same with tags: the task goes only to an agent whose manifest `tags` hold every one of
 * tags[0..n_tags) (at most 16, each 1..64 of a-z 0-9 _ -; EINVAL otherwise). */
VIGIL_API vigil_code vigil_task_add_tagged(vigil_runtime *rt, const char *title, const char *kind,
                                           const char *const *tags, size_t n_tags,
                                           const char *const *blocks, size_t n_blocks,
                                           char out_id[37], vigil_error *err);
/* The edge "a blocks b". EINVAL, writing nothing, when it would close a cycle. */
VIGIL_API vigil_code vigil_task_block(vigil_runtime *rt, const char *a, const char *b,
                                      vigil_error *err);
/* Tasks as a JSON array, oldest first, optionally of one status (pending, ready, running,
 * attention, done, failed, cancelled or its spelling canceled); each {id, title, kind, status,
 * version, blocks, blocked_by, attempts, agent, run_key, result, reason}. EINVAL for another
 * status. */
VIGIL_API vigil_code vigil_task_list(vigil_runtime *rt, const char *status, char **out_json,
                                     vigil_error *err);
/* How many tasks each stored status has, in the order pending, ready, running, done, failed,
 * cancelled, attention (VIGIL_TASK_STATUSES of them; attention: a run that completed with a
 * call in doubt, waiting for a person), running also counting the tasks whose run is queued
 * or under way: index counts, no task read (the daemon's event poller reads the task list
 * only when they change). A task counted pending may be listed ready (its blockers are done);
 * a started task stays stored ready or pending until its run ends, so it is counted there and
 * as running. (Before session 40 out held 6, without attention.) */
#define VIGIL_TASK_STATUSES 7
VIGIL_API vigil_code vigil_task_counts(vigil_runtime *rt, int64_t out[VIGIL_TASK_STATUSES],
                                       vigil_error *err);
/* The task graph: {"nodes": [{id, title, status, kind, agent}], "edges": [{from, to}]}, an
 * edge "from blocks to" (`vigil task graph --json`, GET /v1/tasks/graph). */
VIGIL_API vigil_code vigil_task_graph(vigil_runtime *rt, char **out_json, vigil_error *err);
VIGIL_API vigil_code vigil_task_show(vigil_runtime *rt, const char *task_id, char **out_json,
                                     vigil_error *err);
/* Cancel a task that has not ended, and every task it blocks. ESTATE when it has ended. */
VIGIL_API vigil_code vigil_task_cancel(vigil_runtime *rt, const char *task_id, vigil_error *err);
/* Start ready tasks as wakes of agents picked by rules, while fewer than `slots` run (slots
 * <= 0: the stored cap, 4 at first; a positive value is stored). Each task's run ending starts
 * the next ones. *started (may be NULL): how many started. */
VIGIL_API vigil_code vigil_task_dispatch(vigil_runtime *rt, int slots, int *started,
                                         vigil_error *err);

/*
 * One page of agents as a JSON object {"items":[...],"next_cursor":"..."|null}, oldest first.
 * cursor: NULL for the first page, else the next_cursor of the previous page.
 * limit: 1..1000 (0 means 50). *out_json is owned; free it with vigil_free.
 */
VIGIL_API vigil_code vigil_agent_list(vigil_runtime *rt, const char *cursor, int limit,
                                      char **out_json, vigil_error *err);
/* The same as people and outside surfaces see it: agents whose visibility is internal are left
 * out unless include_internal (visibility: external | project | internal, docs/manifests.md). */
VIGIL_API vigil_code vigil_agent_list_visible(vigil_runtime *rt, const char *cursor, int limit,
                                              int include_internal, char **out_json,
                                              vigil_error *err);
/* The same, of the agents in one lifecycle ("created", "active", "dormant" or "destroyed"; NULL:
 * all of them, as vigil_agent_list_visible); another name is EINVAL. Destroyed agents are listed
 * until they are deleted (vigil_agent_delete). */
VIGIL_API vigil_code vigil_agent_list_lifecycle(vigil_runtime *rt, const char *lifecycle,
                                                const char *cursor, int limit, int include_internal,
                                                char **out_json, vigil_error *err);

/*
 * Lifecycle transitions. activate: created|dormant -> active; pause: active -> dormant;
 * resume: dormant|created -> active; destroy: any but destroyed -> destroyed (final).
 * reason: optional text kept with the transition. Errors: ENOTFOUND, ESTATE (transition not
 * allowed; the message names the current state).
 */
VIGIL_API vigil_code vigil_agent_pause(vigil_runtime *rt, const char *agent_id, const char *reason,
                                       vigil_error *err);
VIGIL_API vigil_code vigil_agent_resume(vigil_runtime *rt, const char *agent_id, const char *reason,
                                        vigil_error *err);
VIGIL_API vigil_code vigil_agent_destroy(vigil_runtime *rt, const char *agent_id,
                                         const char *reason, vigil_error *err);
/*
 * Hard delete: removes every record of a destroyed agent. Errors: ENOTFOUND, ESTATE (the agent
 * is not destroyed).
 */
VIGIL_API vigil_code vigil_agent_delete(vigil_runtime *rt, const char *agent_id, vigil_error *err);
/*
 * User-requested erasure: everything of the agent goes. It is destroyed first when it is not
 * (timers and subscriptions with it), every record it owns is removed, and so are the
 * notifications and matched batches of no agent whose text names it; then the store gives the
 * space back (SQLite: VACUUM and a truncated write-ahead log, so neither file keeps the
 * removed bytes; PostgreSQL: VACUUM). Errors: ENOTFOUND, ESTATE (the agent is on hold:
 * vigil_retention_hold, or its config's retention.hold).
 */
VIGIL_API vigil_code vigil_agent_erase(vigil_runtime *rt, const char *agent_id, vigil_error *err);

/* ---- retention (docs/storage.md, "Growth and retention") ------------------------------------ */

/* Options of vigil_prune; zero-initialize. */
typedef struct vigil_prune_options {
    const char *agent_id; /* NULL: every agent, and the records of no agent */
    int dry_run;          /* count what would go; remove nothing */
    int vacuum;           /* then give the space back (SQLite VACUUM; PostgreSQL VACUUM) */
    int64_t budget_bytes; /* > 0: this storage budget instead of the config's retention.budget */
} vigil_prune_options;

/*
 * Prune what is past its class's time to live (the config's `retention` block, an agent's
 * config.retention over it), in the fixed order runtime, trace, action, report, summary; then,
 * when the bytes in use exceed the storage budget, whatever is finished in that same order,
 * oldest first, until they fit. Agents and runs on hold are left whole, runs not finished too.
 * *report_json (owned, may be NULL): {"dry_run","classes":{NAME:{"records","bytes"}},
 * "records","bytes","runs_pruned","agents_held","over_budget","budget","used_bytes":{"before",
 * "after"},"vacuumed"}. Errors: ENOTFOUND (agent), EINVAL (a retention setting).
 */
VIGIL_API vigil_code vigil_prune(vigil_runtime *rt, const vigil_prune_options *o,
                                 char **report_json, vigil_error *err);
/* Put (on = 1) or take off (0) a hold on an agent or a run, named by its id: nothing of it is
 * pruned while it holds, and an agent on hold cannot be erased. ENOTFOUND. */
VIGIL_API vigil_code vigil_retention_hold(vigil_runtime *rt, const char *agent_or_run_id, int on,
                                          vigil_error *err);
/* The holds as a JSON array of {"target":"agent:ID"|"run:ID","at":ms} (owned). */
VIGIL_API vigil_code vigil_retention_holds(vigil_runtime *rt, char **json_out, vigil_error *err);

/* ---- multi-device sync (docs/sync.md) ------------------------------------------------------ */

/*
 * Sync the store of rt with the store of peer, both ways: each sends the other the agents,
 * states, messages, reports, links and operations it lacks, and each merges what it gets
 * (docs/sync.md says how two devices' changes meet). A store that has not joined sync joins
 * first: it gets a host id and every record it holds is logged once. Runtime state (runs,
 * wakes, leases) never syncs. *summary_json (owned, vigil_free) is
 * {"host","peer_host","sent":{entries,records,bytes,changed},"received":{...},"holes"}: sent
 * is rt to peer, received peer to rt, changed the records the receiver stored or changed,
 * holes the log entries still missing on either side (a third store holds them).
 * Errors: ECONFLICT when both stores have one host id (a copied store), EINVAL for a peer's
 * malformed record (nothing of that direction is written), the store's errors.
 * Not thread-safe with other calls on either runtime.
 */
VIGIL_API vigil_code vigil_sync_with(vigil_runtime *rt, vigil_runtime *peer, char **summary_json,
                                     vigil_error *err);

/*
 * As vigil_sync_with, with the store of a daemon on another machine: its HTTP API at base_url
 * ("http://HOST:PORT"), token its bearer token (`vigil token` there). The four messages go as
 * POST base_url/v1/sync/{hello,offer,apply,confirm}, each offer bounded (about 256 KiB of
 * records; the rest follow in the next), so an exchange cut off midway is taken up by the next
 * call where it stopped. Errors: ENETWORK (no answer), the daemon's errors as it answered them
 * (EAUTH: a wrong token), and those of vigil_sync_with.
 */
VIGIL_API vigil_code vigil_sync_remote(vigil_runtime *rt, const char *base_url, const char *token,
                                       char **summary_json, vigil_error *err);

/*
 * One message of the exchange, served on rt's store for another device (what the daemon's POST
 * /v1/sync/LEG runs): leg "hello" (request ignored), "offer" (request: the other's hello),
 * "apply" (request: the other's offer; answers {"entries","changed","holes"}) or "confirm"
 * (request: the other's hello after its apply). request is JSON text (request_len bytes), the
 * answer JSON text (*answer_json owned, vigil_free). The store joins sync first when it has not.
 * Errors: EINVAL (an unknown leg, a malformed message: nothing is written), ECONFLICT (the other
 * store has this one's host id), the store's errors.
 */
VIGIL_API vigil_code vigil_sync_serve(vigil_runtime *rt, const char *leg, const char *request,
                                      size_t request_len, char **answer_json, vigil_error *err);

/* ---- manifests (docs/manifests.md) --------------------------------------------------------- */

/* Flags of vigil_agent_apply. */
#define VIGIL_APPLY_DRY_RUN 1u /* report what would change; write nothing */

/*
 * Create or update agents from a manifest file, or from every *.yaml, *.yml and *.json file of
 * a directory, matched by agent name; a directory is applied in one transaction. Applying what
 * is already stored writes nothing. *out_json (owned, vigil_free) is an array with one
 * {"file","id","name","action","changes","dry_run"} per manifest, action "created", "updated"
 * or "unchanged" (with VIGIL_APPLY_DRY_RUN: what would happen; id is null for an agent not yet
 * created), and "warnings" (an array of messages) when a `tools` entry names no tool known here
 * (no built-in or command tool, no declared MCP server's SERVER__: likely a typo; applied all
 * the same). When a manifest is malformed or invalid, nothing is applied, err's message is the
 * first problem as "FILE:LINE:COLUMN: what", and *out_json (if out_json is not NULL) is
 * {"errors":[{"file","line","column","pointer","message"}, ...]} with every problem found.
 * Errors: EPARSE (syntax), EINVAL (schema or rules; an agent name used twice), ENOTFOUND (no
 * such file, or a directory without manifests), ESTORE and friends.
 */
VIGIL_API vigil_code vigil_agent_apply(vigil_runtime *rt, const char *path, unsigned flags,
                                       char **out_json, vigil_error *err);
/*
 * vigil_agent_apply of several paths (files or directories) at once: every manifest they hold,
 * in the order given (a directory's sorted), checked together and applied in one transaction,
 * as a directory's are; one problem anywhere applies nothing. An agent name in two of them is
 * an error. EINVAL when n_paths is 0 or a path is empty.
 */
VIGIL_API vigil_code vigil_agent_apply_paths(vigil_runtime *rt, const char *const *paths,
                                             size_t n_paths, unsigned flags, char **out_json,
                                             vigil_error *err);
/*
 * Check an agent's config (vigil_agent_spec.config_json) as a manifest's fields are checked:
 * only the manifest's config keys (tools, require_approval, capabilities, limits, budgets,
 * command_tools, mcp_servers, ...), each as the manifest schema and rules say, so that what is
 * stored exports to a manifest that applies again. EPARSE (not JSON), EINVAL naming the first
 * problem ("config: /limits/max_steps: expected integer, got string").
 */
VIGIL_API vigil_code vigil_agent_config_check(const char *config_json, vigil_error *err);

/*
 * The agent as a YAML manifest (owned, vigil_free) that vigil_agent_apply applies back to the
 * same agent with no change. Secrets stay ${NAME} references. Errors: ENOTFOUND.
 */
VIGIL_API vigil_code vigil_agent_export(vigil_runtime *rt, const char *agent_id, char **out_yaml,
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

/*
 * A host's context for an agent's wake: called before a wake that is not a person's turn (a
 * subscription's, a timer's, a manual or a recovery wake) runs, on the thread that runs it,
 * with the agent and the tokens that woke it (borrowed for the call). What the host writes to
 * *out_text (malloc'd; vigil frees it with free(); NULL: nothing) is added to the agent's wake
 * input after the changed tokens: the current state of what the agent looks after, read when
 * the wake runs, so the model starts from it instead of a tool call. A nonzero return leaves it
 * out and the wake runs without it. The task domain gives a task agent its task this way
 * (docs/todo.md).
 */
typedef int (*vigil_wake_context_fn)(void *user, vigil_runtime *rt, const char *agent_id,
                                     const char *const *tokens, size_t n_tokens, char **out_text);
/* Install (or with NULL remove) the host's wake context. */
VIGIL_API void vigil_set_wake_context(vigil_runtime *rt, vigil_wake_context_fn fn, void *user);

/* The semantic keys vigil itself emits. */
#define VIGIL_TOKEN_AGENT_CHANGED "AGENT_CHANGED"
#define VIGIL_TOKEN_AGENT_STATE_CHANGED "AGENT_STATE_CHANGED"
#define VIGIL_TOKEN_AGENT_MESSAGE_APPENDED "AGENT_MESSAGE_APPENDED"

/* ---- run history and the journal ---------------------------------------------------------- */

/*
 * Run history. Every run (agent execution) keeps an interaction journal; these read it with
 * progressive disclosure: runs -> one run -> its messages -> one message -> its tool calls ->
 * one tool call. Every list is a page {"items":[...],"next_cursor":"..."|null}: pass
 * next_cursor back as cursor (NULL for the first page) to get the next page; cursors are
 * opaque keyset positions, so paging never skips or repeats an item while runs are added.
 * limit is 1..1000 (0 means 50). Every *out_json is owned; free it with vigil_free.
 * Errors: EINVAL (bad status, limit or cursor), ENOTFOUND (no such run, message or tool call).
 */

/* Runs, newest first. agent_id and status ("queued", "running", "completed", "failed",
 * "interrupted", "canceled" or its spelling "cancelled", "crashed") filter when not NULL. Items:
 * run_id, agent_id, status, run_key, wake_reason, started_at, ended_at, duration_ms, steps,
 * tool_calls, cost_micros, model, usage {input,output,cached tokens}, a summary_preview with
 * summary_truncated, and error: why a failed or interrupted run ended ("stopped: its tokens
 * budget is spent", a provider's error), null for a run that completed. A crashed run's record
 * names the run key that took its agent over (recovered_by_run_key, in vigil_run_show). */
VIGIL_API vigil_code vigil_runs_list(vigil_runtime *rt, const char *agent_id, const char *status,
                                     const char *cursor, int limit, char **out_json,
                                     vigil_error *err);
/* vigil_run_show, vigil_run_messages, vigil_run_tools and vigil_run_replay take a run by its
 * run id, its run key (the newest run under that key) or a unique start of its run key of 8
 * characters or more, as vigil_run_cancel does: ENOTFOUND when nothing matches (the message
 * names the whole argument), EINVAL when the start fits several run keys. */
/* One run: summary, error, wake reason, run key, parent and children, timings, usage
 * {input,output,cached tokens}, cost_micros, model and tool call counts, record counts, and
 * spawn_decisions: each spawn request the run made, admitted or denied, with its reason. A
 * spawned run's parent is {run_key, run_id, agent_id} of the run that spawned it, and the
 * children of a run that spawned are [{run_key, run_id, agent_id, status}] (run_id null until
 * it started). A run named by its run key that has not started yet is shown from its wake-log
 * entry: started false, run_id null, status (queued, cancelled, skipped), agent_id, run_key,
 * wake_reason, thread_id, queued_at, input, model, error, meta, parent. A re-run (either kind)
 * also has rerun_of (the old run key) and override ({prompt?, model?, tools?}). */
VIGIL_API vigil_code vigil_run_show(vigil_runtime *rt, const char *run_id, char **out_json,
                                    vigil_error *err);
/* The run's messages oldest first (inputs and the agent's message signals): record_id, role,
 * sequence, time and a content preview of at most 200 bytes with a truncated flag. */
VIGIL_API vigil_code vigil_run_messages(vigil_runtime *rt, const char *run_id, const char *cursor,
                                        int limit, char **out_json, vigil_error *err);
/* One message record in full (record_id from vigil_run_messages), with its whole content. */
VIGIL_API vigil_code vigil_run_message(vigil_runtime *rt, const char *record_id, char **out_json,
                                       vigil_error *err);
/* A chat session's conversation as the agent's thread holds it (session NULL: "default"): its
 * last limit messages (1..1000, 0: 50), oldest first, whole, also those of turns that ran on
 * another device and came by `vigil sync` (their runs stay on that device, so run views do not
 * reach them); a thread two devices appended to apart comes branch by branch, as the model
 * reads it. {"agent_id", "session", "items": [{id, kind (user, thought, action, toolResult,
 * observation, ...), content, created_at, run_id, and where they apply tool_calls [{id, name,
 * arguments}], tool_call_id, tool_name, is_error}]}. A session never used has no items.
 * Errors: ENOTFOUND (no agent), EINVAL. */
VIGIL_API vigil_code vigil_session_messages(vigil_runtime *rt, const char *agent_id,
                                            const char *session, int limit, char **out_json,
                                            vigil_error *err);
/* The run's tool calls oldest first: name, status, duration, error code and input/output
 * previews with truncated flags. A call an execute_code program made through the sandbox's
 * bridge is listed after that execute_code, with "via": the bridge's key
 * "<run key>/code/<operation>/<n>" (docs/sandbox.md); the model's own calls have no "via". */
VIGIL_API vigil_code vigil_run_tools(vigil_runtime *rt, const char *run_id, const char *cursor,
                                     int limit, char **out_json, vigil_error *err);
/* The tool calls an agent made outside any run (vigil_tool_call, `vigil tool call`, the HTTP
 * API's tool call, `vigil sandbox run --agent`), newest first, one page (limit 1..1000, 0: 50):
 * {"items": [{operation_id, tool, status, result_status, error_code, run_key, started_at,
 * finished_at, action_id, arguments_preview, arguments_truncated}], "next_cursor"}. A call the
 * gate refused before it ran (unknown tool, not allowed, invalid arguments) is not listed.
 * VIGIL_ENOTFOUND for an unknown agent. */
VIGIL_API vigil_code vigil_tool_calls_by_hand(vigil_runtime *rt, const char *agent_id,
                                              const char *cursor, int limit, char **out_json,
                                              vigil_error *err);
/* What a running run added since a reader's last look, without reading again what it saw (a
 * follower such as the HTTP API's event poller): its messages whose journal sequence is above
 * after[0] and its tool calls whose start sequence is above after[1], oldest first, at most
 * limit (1..1000, 0: 50) of each, items as vigil_run_messages and vigil_run_tools give them:
 * {"messages":[...],"tool_calls":[...],"after":[M,T],"more":bool}. Pass after as [M,T] at the
 * next look ([0,0] the first time); more is true when a limit cut a list short. A tool call is
 * listed once, at the look that first finds it (running, or already ended). */
VIGIL_API vigil_code vigil_run_follow(vigil_runtime *rt, const char *run_id, const int64_t after[2],
                                      int limit, char **out_json, vigil_error *err);
/* One tool call in full, with its whole input and output. */
VIGIL_API vigil_code vigil_run_tool(vigil_runtime *rt, const char *tool_call_id, char **out_json,
                                    vigil_error *err);
/*
 * Rebuild a run from its journal records alone: {"projection":{lifecycle, attention,
 * activity, current_input_request_id, latest_activity, timeline, ...},
 * "processed_message_ids":[...], "processed_observation_ids":[...], "timeline":[...],
 * "record_count":N, "stored_projection_found":bool, "stored_projection_matches":bool}, and
 * when a stored projection does not match, "differences": [{field, stored, replayed}] (each
 * field whose values part; null on a side without the field). The
 * projection is canonical JSON: the same records always give the same bytes. Errors:
 * ENOTFOUND, EINVAL (a record fails validation: the message names it).
 */
VIGIL_API vigil_code vigil_run_replay(vigil_runtime *rt, const char *run_id, char **out_json,
                                      vigil_error *err);

/* Cancel one run (its run key or run id): a queued run never starts (*was_queued = 1, may be
 * NULL); a running one stops at its next safe point, between model calls, and its run record
 * ends canceled. by: who (NULL: "human"). ENOTFOUND; ESTATE for a run that ended, or a chat
 * turn (not in the wake log). docs/runs.md. */
VIGIL_API vigil_code vigil_run_cancel(vigil_runtime *rt, const char *run, const char *by,
                                      int *was_queued, vigil_error *err);
/* Run it again as a new run of the same agent: its input is prompt when given, else the old
 * run's; the override and the old run key are kept with the new run. out_run_key: 65 bytes. */
VIGIL_API vigil_code vigil_run_rerun(vigil_runtime *rt, const char *run, const char *prompt,
                                     char out_run_key[65], vigil_error *err);
/* What a re-run changes, each optional: its input text (prompt), the model it calls (a model
 * name of the configured provider, for this run alone), and the tools it may call (names or
 * globs, within the agent's own allowlist: never wider; tools non-NULL with n_tools 0: none). */
typedef struct vigil_run_override {
    const char *prompt; /* NULL: the old run's input */
    const char *model;  /* NULL: the agent's model */
    const char *const *tools;
    size_t n_tools; /* tools NULL: the agent's own allowlist */
} vigil_run_override;
/* vigil_run_rerun with an override (NULL: none). EINVAL for an empty or overlong model or tool
 * name. The override is kept in the new run's wake-log entry and its run_rerun link. */
VIGIL_API vigil_code vigil_run_rerun_with(vigil_runtime *rt, const char *run,
                                          const vigil_run_override *override, char out_run_key[65],
                                          vigil_error *err);
/* Resume a sub-agent's ended run: its exact conversation continues in a new run whose input
 * states the steps the run took, then prompt (may be NULL). EINVAL for a run that no spawn
 * made; ESTATE for one not ended. out_run_key: 65 bytes. docs/orchestration.md. */
VIGIL_API vigil_code vigil_run_resume(vigil_runtime *rt, const char *run, const char *prompt,
                                      char out_run_key[65], vigil_error *err);
/*
 * Export an agent with its past to <folder>/agent-journals/: <agent id>.interaction.jsonl
 * (every run's journal records, one JSON record per line), <agent id>.agent.jsonl (the agent's
 * own records: identity and config, state, threads, reports, memory, the operations of its tool
 * calls, those made by hand included) and <agent id>.sha256 (the two files' SHA-256 sums), and
 * import such an export into another store: the agent under its own id, its memory and its
 * runs (docs/storage.md, "Moving an agent to another store"). Import checks the sums (ECORRUPT
 * for a file changed after the export) and every line first, refuses the whole export on the
 * first bad one ("line N: ..."), writes nothing then, and skips records that are already
 * stored, so importing twice adds nothing. EEXISTS when the agent is new here and a live agent
 * here has its name. An export without the sums file (made before they were written) is
 * imported unchecked: vigil_journal_import_json says so. out_count (may be NULL) receives the
 * records written / added.
 */
VIGIL_API vigil_code vigil_journal_export(vigil_runtime *rt, const char *agent_id,
                                          const char *folder, int64_t *out_count, vigil_error *err);
VIGIL_API vigil_code vigil_journal_import(vigil_runtime *rt, const char *agent_id,
                                          const char *folder, int64_t *out_count, vigil_error *err);
/* vigil_journal_import, with what it did as JSON (*out_json owned, vigil_free):
 * {"agent_id", "records": journal records added, "agent_records": the agent's own records
 * added, "agent": whether the export held them, "checksums": "verified" or "absent", and with
 * the agent's records "brings": what it may run from there on, {"tools": its allowlist,
 * "command_tools": {name: command}, "mcp_servers": {name: command or url}}}. */
VIGIL_API vigil_code vigil_journal_import_json(vigil_runtime *rt, const char *agent_id,
                                               const char *folder, char **out_json,
                                               vigil_error *err);

/* ---- models and chat ---------------------------------------------------------------------- */

/*
 * The model provider the runtime uses, as {"provider","model","scripted","cassette"}: scripted
 * is true when no real provider is configured and replies come from the scripted provider (a
 * cassette, or an echo when there is none); cassette is the scripted provider's cassette path,
 * null when it echoes. The provider is built from the config on first use. *out_json is
 * owned. Errors: EINVAL/EPARSE (bad config), ENOTFOUND (a configured cassette is missing).
 */
VIGIL_API vigil_code vigil_model_describe(vigil_runtime *rt, char **out_json, vigil_error *err);

/* Callbacks for a chat turn; every member may be NULL. Pointers are borrowed for the call. */
typedef struct vigil_chat_callbacks {
    void *user;
    void (*on_text)(void *user, const char *delta, size_t len);           /* streamed reply */
    void (*on_tool)(void *user, const char *name, const char *args_json); /* a tool starts */
    void (*on_tool_done)(void *user, const char *name, int is_error, const char *result_json);
    int (*cancel)(void *user); /* polled during the turn: non-zero cancels it (Ctrl-C) */
} vigil_chat_callbacks;

/*
 * One user turn with an agent: appends the text to the session's thread
 * ("<agent>:session:<session>", session NULL: "default"), runs the agent loop (model calls and
 * tool calls, all journaled as one run) and returns the outcome as JSON text {"run_id", "reply",
 * "end", "steps", "tool_calls", "usage": {...}, "cost_usd", "scripted"}. Each call is a new run;
 * calls in a row (in one process or many) continue one conversation. A created agent becomes
 * active on its first turn; a dormant or destroyed one is refused (ESTATE). *out_json is owned.
 * Errors: ENOTFOUND, ESTATE, the model's errors (EAUTH, ERATELIMIT, ...), store errors. A turn
 * that fails after its run began (a model's error) leaves that run journaled as failed, and
 * err->detail then starts with "run_id=" and the run's id (36 characters; a detail the error
 * had follows after "; "), so the caller can link the error to the run (vigil_run_show).
 */
VIGIL_API vigil_code vigil_chat(vigil_runtime *rt, const char *agent_id, const char *session,
                                const char *text, const vigil_chat_callbacks *cb, char **out_json,
                                vigil_error *err);

/*
 * vigil_chat with a key naming the turn (turn_key: 1 to 64 bytes without ':', chosen by the
 * caller, e.g. a request id; NULL: vigil_chat), so that sending the turn again (a retry after a
 * timeout or a lost answer) does not make it twice. The turn's run key is made from the agent,
 * the session and the key. A turn of that key that completed is not run again: *out_json is the
 * outcome it answered, with "replayed": true, and nothing is added to the conversation. One that
 * did not complete (failed, canceled, stopped) runs again as a new run under the same run key:
 * its tool calls get the operation ids of the earlier try, so a call that try made is answered
 * from its record, not made twice, and the earlier try's message, never answered, stays out of
 * the model's context (docs/chat.md). A retry waits while a try of the same key runs. Errors: as
 * vigil_chat; EINVAL for an invalid key, or one a completed turn used with another text.
 */
VIGIL_API vigil_code vigil_chat_keyed(vigil_runtime *rt, const char *agent_id, const char *session,
                                      const char *turn_key, const char *text,
                                      const vigil_chat_callbacks *cb, char **out_json,
                                      vigil_error *err);

/*
 * What a finished turn amounts to, read from its outcome (vigil_chat's out_json): VIGIL_OK for an
 * answer (completed, or ended by the agent's own limits as designed); VIGIL_EKILLED when a kill
 * switch stopped it, VIGIL_EBUDGET for a spent budget, VIGIL_ERROR for a doom loop (the same
 * tool call repeated), VIGIL_EPROVIDER for an answer cut by max_tokens inside a tool call (no
 * call ran). *message (may be NULL) gets one static line saying so, or NULL for VIGIL_OK. Every
 * surface maps a turn the same way: `vigil chat` exits with vigil_code_exit_status of it, the
 * HTTP API answers vigil_code_http_status. Unparsable JSON: EINVAL.
 */
VIGIL_API vigil_code vigil_turn_code(const char *outcome_json, const char **message);

/* One turn of vigil_chat_many: the caller fills the inputs, vigil the outcome. */
typedef struct vigil_chat_turn {
    const char *agent_id; /* as for vigil_chat */
    const char *session;  /* NULL: "default" */
    const char *text;
    const vigil_chat_callbacks *cb; /* may be NULL */
    vigil_code code;                /* out: what vigil_chat would have returned */
    char *out_json;                 /* out: owned (vigil_free) when code is VIGIL_OK, else NULL */
    vigil_error error;              /* out: the turn's error when code is not VIGIL_OK */
} vigil_chat_turn;

/*
 * Run n chat turns at once on the calling thread, the way a `vigil serve` worker runs its
 * agents: each turn is a fiber sharing this runtime and its store connection, parked while its
 * model call is in flight so the others go on, and the turns' durable commits share log syncs
 * (every message is still durable before its turn goes on). Each turn is what vigil_chat would
 * do with the same arguments, its outcome in turns[i].code / out_json / error. Turns of one
 * agent run one after another (single flight); with the scripted model every turn runs alone,
 * in order. Returns once every turn has ended: VIGIL_OK then, whatever each turn's outcome;
 * EINVAL (no runtime or turns), ESTATE (called from inside a turn, e.g. a callback), ENOMEM,
 * or the model or store setup's error, with no turn run; ENOMEM when a turn could not be
 * started (the turns started before it still ran to their end; it and the later ones have that
 * code). Callbacks run on the calling thread; a callback must not call into this runtime.
 */
VIGIL_API vigil_code vigil_chat_many(vigil_runtime *rt, vigil_chat_turn *turns, size_t n,
                                     vigil_error *err);

/*
 * Environment variables that choose and tune the model provider; they override the config file
 * (docs/models.md lists every config key). API keys are read only from the environment.
 */
#define VIGIL_ENV_CONFIG "VIGIL_CONFIG"                       /* config file path */
#define VIGIL_ENV_MODEL_PROVIDER "VIGIL_MODEL_PROVIDER"       /* openai | anthropic | scripted */
#define VIGIL_ENV_MODEL_BASE_URL "VIGIL_MODEL_BASE_URL"       /* e.g. http://localhost:11434/v1 */
#define VIGIL_ENV_MODEL "VIGIL_MODEL"                         /* model id */
#define VIGIL_ENV_MODEL_CASSETTE "VIGIL_MODEL_CASSETTE"       /* scripted: cassette to replay */
#define VIGIL_ENV_MODEL_RECORD "VIGIL_MODEL_RECORD"           /* record exchanges to a cassette */
#define VIGIL_ENV_MODEL_MAX_RETRIES "VIGIL_MODEL_MAX_RETRIES" /* retries after the first try */
#define VIGIL_ENV_MODEL_TIMEOUT_MS "VIGIL_MODEL_TIMEOUT_MS"   /* whole-transfer timeout */

/* ---- tools ----------------------------------------------------------------------------------- */

/*
 * Tools an agent may call (docs/tools.md). Every call goes through one gate: the agent's manifest
 * (config.tools names and globs, config.capabilities), the input schema, kill switches, the
 * tool's allowed wake reasons, scope (config.allowed_scopes; deny by default), operation replay,
 * the daily budgets (config.budgets) and approvals. Each call is recorded as an `action` and a
 * `toolResult` message. Tool errors use the standard codes: invalid_arguments, out_of_scope,
 * confirmation_required, budget_exceeded, unsafe_target, killed, timeout, tool_failed, plus
 * not_allowed, unknown_tool, in_doubt and rejected.
 *
 * Registered tools live in the runtime (memory), not in the store: register them again after
 * every vigil_runtime_open, and in vigil_daemon_options.on_runtime for the runtimes a
 * vigil_daemon_run of the same process opens (a `vigil serve` of another process has none of
 * them: it answers their calls unknown_tool). Built-in tools (set_report, record_observations)
 * are always there.
 */

/* What a tool callback learns of the call (borrowed for the call). */
typedef struct vigil_tool_call_info {
    const char *agent_id;
    const char *tool;
    const char *operation_id; /* stable across retries and crash replays: tag effects with it */
    const char *run_key;
    int preview_only; /* describe the effect, change nothing */
} vigil_tool_call_info;

/*
 * A tool callback. args_json: the validated arguments (defaults applied), borrowed for the call.
 * On VIGIL_OK, *out_result_json is the reply: JSON text allocated with malloc() (vigil frees it
 * with free()), either any JSON value (the result), {"result": ..., "changed_entity_ids": [...],
 * "changed_tokens": [...]} or {"error": {"code": "unsafe_target", "message": "..."}}. Any other
 * return code is recorded as tool_failed with err's message. Called on the thread that called
 * the tool; it must not call back into the same runtime.
 */
typedef vigil_code (*vigil_tool_fn)(void *user, const vigil_tool_call_info *call,
                                    const char *args_json, char **out_result_json,
                                    vigil_error *err);
/*
 * Optional, for tools whose idempotency is "reconcilable": did the call with this operation id
 * take effect? Set *found and, when found, *out_result_json (as for vigil_tool_fn). Used after a
 * crash so the effect is never repeated.
 */
typedef vigil_code (*vigil_tool_lookup_fn)(void *user, const vigil_tool_call_info *call, int *found,
                                           char **out_result_json, vigil_error *err);

/* A tool's contract; zero-initialize. Strings are copied at registration. */
typedef struct vigil_tool_def {
    const char *name;              /* required: [a-z][a-z0-9_.]*, at most 64 bytes */
    const char *description;       /* required: what the model reads */
    const char *input_schema_json; /* JSON Schema of the arguments; NULL: {"type":"object"} */
    /* Optional JSON object with the other contract fields (docs/tools.md): version, risk
     * (low|medium|high), mutating (default true), idempotency (idempotent|reconcilable|
     * non_idempotent, default non_idempotent), scope ({"rule":"unscoped"|"argument"|"target",
     * "arguments":[...]}), capabilities, tool_class, allowed_wake_reasons, side_effects,
     * output_schema, requires_approval, preview. */
    const char *contract_json;
    vigil_tool_lookup_fn lookup; /* optional */
} vigil_tool_def;

/*
 * Register a C callback tool. fn and user are kept until the runtime closes (user is never
 * freed by vigil). Errors: EINVAL (bad contract or schema), EEXISTS (name taken).
 */
VIGIL_API vigil_code vigil_tool_register(vigil_runtime *rt, const vigil_tool_def *def,
                                         vigil_tool_fn fn, void *user, vigil_error *err);

/*
 * Register a command tool: argv[0] (searched in PATH) runs once per call with the arguments as a
 * JSON object on stdin and answers by the reply protocol on stdout; VIGIL_TOOL,
 * VIGIL_OPERATION_ID, VIGIL_AGENT_ID and VIGIL_PREVIEW are set in its environment. It runs in its
 * own process group, killed entirely on timeout (timeout_ms <= 0: 30 s; recorded as `timeout`)
 * or when stdout passes max_output bytes (0: 1 MiB; tool_failed). A non-zero exit or invalid
 * JSON is tool_failed. argv is copied.
 */
VIGIL_API vigil_code vigil_tool_register_command(vigil_runtime *rt, const vigil_tool_def *def,
                                                 const char *const *argv, int timeout_ms,
                                                 size_t max_output, vigil_error *err);

/*
 * Host scope resolver for tools with scope rule "target": write the scope (e.g. category id) of
 * entity_id into out (size n) and return 1, or return 0 when unknown (the call is refused with
 * out_of_scope: fail closed).
 */
typedef int (*vigil_scope_resolver_fn)(void *user, const char *entity_id, char *out, size_t n);
VIGIL_API void vigil_tool_set_scope_resolver(vigil_runtime *rt, vigil_scope_resolver_fn fn,
                                             void *user);

/*
 * Call a tool as agent_id through the full gate (wake reason "manual"). run_key names the run:
 * the same run_key, tool and arguments give the same operation id, so a repeated call returns
 * the recorded result without running the tool again. *out_result_json (owned) receives the
 * outcome envelope {"status","operation_id","result","changed_entity_ids","changed_tokens",
 * "replayed","error_code","error_message","approval_id",...} whenever the call was recorded,
 * also when the return code reports the tool's error: EINVAL invalid_arguments, EDENIED
 * out_of_scope/not_allowed/unsafe_target/rejected, ECONFIRM confirmation_required, EBUDGET,
 * EKILLED, ETIMEOUT, ENOTFOUND unknown_tool, ESTATE in_doubt, ERROR tool_failed.
 */
VIGIL_API vigil_code vigil_tool_call(vigil_runtime *rt, const char *agent_id, const char *run_key,
                                     const char *tool_name, const char *args_json,
                                     char **out_result_json, vigil_error *err);

/* The tools agent_id may call (NULL: every registered tool), as a JSON array of their
 * contracts ({name, description, input_schema, risk, mutating, idempotency, tool_class, ...})
 * each with "source": "built-in", "command", "registered" or "mcp:SERVER". Owned. Listing may
 * start the MCP servers whose tools the agent may call, to learn their tools. */
VIGIL_API vigil_code vigil_tool_list_for_agent(vigil_runtime *rt, const char *agent_id,
                                               char **out_json, vigil_error *err);

/* The MCP servers declared for the runtime (docs/mcp.md): the config file's and every live
 * agent's manifest's (agent_id set: the config file's and that agent's only), as a JSON object
 * (owned) SERVER -> {"declaration": {...} as written (${NAME}s kept, never their values),
 * "declared_in": "the config file" | "agent \"NAME\"", "clash": "..." when another agent
 * declares it differently (then it is served to no agent)}. Starts nothing. Errors: ENOTFOUND
 * (no such agent), EEXISTS (with agent_id: a name declared differently by the config file and
 * that agent), store errors. */
VIGIL_API vigil_code vigil_mcp_servers(vigil_runtime *rt, const char *agent_id, char **out_json,
                                       vigil_error *err);

/* Remember tools_json (the JSON array a tools/list of server gave, as `vigil mcp tools` asks)
 * as that server's tool list, so that agents' tool lists and calls offer its new tools (and
 * drop its removed ones) without starting it. A server not declared, or declared differently
 * by two agents, is left alone. Errors: EINVAL (not an array), store errors. */
VIGIL_API vigil_code vigil_mcp_remember_tools(vigil_runtime *rt, const char *server,
                                              const char *tools_json, vigil_error *err);

/*
 * In-doubt operations: a mutating tool call cut short by a crash whose effect cannot be known
 * (a non-idempotent tool, or a reconcilable one whose lookup kept finding nothing) waits for a
 * person. list: the pending items (agent_id NULL: every agent's), oldest first, as a JSON array
 * (owned) of {operation_id, agent_id, tool, arguments, run_key, run_id, thread_id, reason (what
 * is known), status, created_at}. show: one item, any status, with its operation record under
 * "operation" (null once a retry forgot the attempt). resolve: applied (the effect happened: the
 * operation is finished and never runs), not applied (it did not, and must not run: an
 * identical call gets a recorded error), or retry (it did not: an identical call runs it), as
 * `by` (NULL: "human"). Errors: ENOTFOUND (no such item or agent), ESTATE (already resolved;
 * the first answer stands), EINVAL.
 */
typedef enum vigil_indoubt_answer {
    VIGIL_INDOUBT_APPLIED = 1,
    VIGIL_INDOUBT_NOT_APPLIED = 2,
    VIGIL_INDOUBT_RETRY = 3
} vigil_indoubt_answer;
VIGIL_API vigil_code vigil_indoubt_list(vigil_runtime *rt, const char *agent_id, char **out_json,
                                        vigil_error *err);
VIGIL_API vigil_code vigil_indoubt_show(vigil_runtime *rt, const char *operation_id,
                                        char **out_json, vigil_error *err);
VIGIL_API vigil_code vigil_indoubt_resolve(vigil_runtime *rt, const char *operation_id,
                                           vigil_indoubt_answer answer, const char *by,
                                           vigil_error *err);

/*
 * Approvals. list: a JSON array (owned) of approvals, oldest first; agent_id and status
 * ("pending", "approved", "rejected", "expired") may be NULL for all. resolve: approve (1) or
 * reject (0) as `by` (NULL: "human") with an optional reason; resolving twice changes nothing
 * and returns the first resolution with "already": true in *out_json (owned, may be NULL).
 * Errors: ENOTFOUND, ESTATE (expired), EDENIED (an agent resolving its own request).
 */
VIGIL_API vigil_code vigil_approval_list(vigil_runtime *rt, const char *agent_id,
                                         const char *status, char **out_json, vigil_error *err);
VIGIL_API vigil_code vigil_approval_resolve(vigil_runtime *rt, const char *approval_id, int approve,
                                            const char *by, const char *reason, char **out_json,
                                            vigil_error *err);

/*
 * Kill switches: the global one (agent_id and tool_class NULL), one agent's, or one tool
 * class's. While one applies, mutating tools are refused (`killed`) and no new wake starts.
 * reason: optional. status: every switch ever set, as a JSON array (owned).
 */
VIGIL_API vigil_code vigil_kill_set(vigil_runtime *rt, const char *agent_id, const char *tool_class,
                                    int on, const char *reason, vigil_error *err);
VIGIL_API vigil_code vigil_kill_status(vigil_runtime *rt, char **out_json, vigil_error *err);
/* *on = 1 when a switch stops agent_id (may be NULL) or tool_class (may be NULL). */
VIGIL_API vigil_code vigil_kill_active(vigil_runtime *rt, const char *agent_id,
                                       const char *tool_class, int *on, vigil_error *err);

/* Today's (UTC) budget usage and limits of an agent as a JSON object (owned). */
VIGIL_API vigil_code vigil_budget_usage(vigil_runtime *rt, const char *agent_id, char **out_json,
                                        vigil_error *err);

/* Tokens the tool layer raises. */
#define VIGIL_TOKEN_TOOL_APPROVAL_PENDING "TOOL_APPROVAL_PENDING"
#define VIGIL_TOKEN_TOOL_APPROVAL_RESOLVED "TOOL_APPROVAL_RESOLVED"
#define VIGIL_TOKEN_KILL_SWITCH_CHANGED "KILL_SWITCH_CHANGED"
#define VIGIL_TOKEN_TOOL_IN_DOUBT "TOOL_IN_DOUBT"

/* ---- wakes ----------------------------------------------------------------------------------- */

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
 * Errors: ENOTFOUND (no agent), ESTATE (the agent is dormant or destroyed), EKILLED (a kill
 * switch is on, as for a chat turn); either way the wake is logged as skipped. EINVAL.
 */
VIGIL_API vigil_code vigil_wake_agent(vigil_runtime *rt, const char *agent_id, const char *message,
                                      const char *session_id, char out_run_key[65],
                                      vigil_error *err);

/*
 * Do, in this process, what the daemon does in the background: re-queue crashed runs whose
 * lease expired or whose holder's process is gone, take pending notifications, fire due
 * timers, and run queued wakes (at most max_runs; 0: until none is runnable) through the agent
 * loop, with the configured model and the registered tools ($VIGIL_WAKE_RUNNER may name "loop";
 * the test build adds "echo" and "test:...", and any other is EINVAL). A run that
 * takes an agent over from a crashed one first settles what it left (docs/runs.md). *ran (may
 * be NULL) counts runs.
 */
VIGIL_API vigil_code vigil_wake_process(vigil_runtime *rt, int max_runs, int *ran,
                                        vigil_error *err);

/*
 * The daemon (`vigil serve`): notification intake and its debounce windows, timers, and the
 * wake queue, served by worker threads (each with its own store connection) until SIGINT or
 * SIGTERM. vigil_daemon_options_default fills in the defaults below.
 */
/*
 * A service the daemon runs beside its work (`vigil serve --listen`: the HTTP API). start is
 * called once the daemon holds the store and its workers run (so a second daemon on the same
 * store never starts it), with poke(poke_user), which the service may call from any thread to
 * make the daemon look at its queue now; a failing start stops the daemon. stop runs once the
 * daemon's event loop has ended, before its workers stop. A runtime the service opens gets the
 * program's tools from vigil_daemon_on_runtime.
 */
typedef struct vigil_daemon_service {
    void *user;
    vigil_code (*start)(void *user, void (*poke)(void *), void *poke_user, vigil_error *err);
    void (*stop)(void *user);
} vigil_daemon_service;

/*
 * Options for vigil_daemon_run: fill them with vigil_daemon_options_default, then set what you
 * need. While vigil is 0.x this struct may grow, as vigil_runtime_options may: size is
 * sizeof(vigil_daemon_options) as your program was compiled (the default sets it); a newer
 * library gives the fields your program does not know their defaults, an older one refuses
 * (EVERSION) fields it does not know that your program set, and a size smaller than the first
 * layout (VIGIL_DAEMON_OPTIONS_SIZE_0_1; 0 too) is refused (EINVAL).
 */
typedef struct vigil_daemon_options {
    size_t size;              /* sizeof(vigil_daemon_options) (see above) */
    int workers;              /* worker threads (2) */
    int runs_per_worker;      /* runs a worker keeps going at once, as fibers (16) */
    int64_t grace_ms;         /* at a stop, how long running wakes may finish (10000) */
    int64_t poll_ms;          /* how often the store's durable queue is polled (200) */
    int max_failures;         /* consecutive failed runs before an agent goes dormant (5) */
    int64_t debounce_ms;      /* debounce window of this host's notifications (100) */
    int64_t sync_debounce_ms; /* debounce window of synced notifications (1000) */
    int64_t lease_ms;         /* how long a run holds its agent without renewal (300000) */
    const char *runner;       /* NULL or "loop": the agent loop (the test build adds others) */
    const struct vigil_daemon_service *service; /* NULL, or a service to run beside the daemon */
    /* NULL, or called once with each runtime the daemon opens (its loop thread's, then each
     * worker's), on the thread that called vigil_daemon_run, before anything runs on it: the
     * embedding program registers its tools there (vigil_tool_register, as after its own
     * vigil_runtime_open), so the daemon's runs can call them. rt is borrowed until the daemon
     * returns; the tools' callbacks then run on the daemon's worker threads. A failure (set err)
     * stops the daemon, which returns that error. Also called, on the service's thread, with
     * each runtime the service opens for its requests (vigil_daemon_on_runtime: `vigil serve
     * --listen`'s HTTP API and /mcp), its failure then that runtime's; never two calls at once. */
    vigil_code (*on_runtime)(void *user, vigil_runtime *rt, vigil_error *err);
    void *on_runtime_user; /* passed to on_runtime; never freed by vigil */
} vigil_daemon_options;
/* The size of the first layout with a size field: every field up to and with service. */
#define VIGIL_DAEMON_OPTIONS_SIZE_0_1                                                              \
    (offsetof(vigil_daemon_options, service) + sizeof(const void *))
VIGIL_API void vigil_daemon_options_default(vigil_daemon_options *opts);
/* Serve the store at store_uri until SIGINT/SIGTERM or vigil_daemon_stop; blocks the calling
 * thread. It logs its start and stop as "vigil serve: ..." lines on stderr. Errors: EBUSY
 * (another daemon serves the store), EINVAL (a bad runner or model configuration, or a size of
 * opts this library does not know), EVERSION (opts set a field this library does not know),
 * ESTORE, or on_runtime's error. */
VIGIL_API vigil_code vigil_daemon_run(const char *store_uri, const vigil_daemon_options *opts,
                                      vigil_error *err);
/* Stop the vigil_daemon_run of this process serving store_uri (the same text), as SIGTERM
 * would: it takes no more wakes, lets running ones finish within grace_ms, and returns
 * VIGIL_OK. Returns at once; any thread (not from a signal handler). A stop asked while
 * vigil_daemon_run is still starting is kept: the daemon stops as soon as it serves. Errors:
 * ENOTFOUND (no vigil_daemon_run of this process is under way on it, or it has not begun
 * yet: stop another process's daemon with SIGTERM to the pid vigil_daemon_running gives),
 * EINVAL. */
VIGIL_API vigil_code vigil_daemon_stop(const char *store_uri, vigil_error *err);
/* Hand rt, a runtime a service (vigil_daemon_service) opened on store_uri for its requests, to
 * the on_runtime of the vigil_daemon_run of this process serving store_uri (the same text), as
 * that daemon does with its own runtimes: then a chat turn the service runs on rt calls the
 * embedding program's tools, as the daemon's runs do. Called on the service's thread, before
 * anything runs on rt; the daemon makes the calls take turns (not from on_runtime itself).
 * VIGIL_OK when that daemon has no on_runtime. Errors: ENOTFOUND (no vigil_daemon_run of this
 * process serves store_uri: before its service starts, or after its service stopped), EINVAL,
 * or on_runtime's error. */
VIGIL_API vigil_code vigil_daemon_on_runtime(const char *store_uri, vigil_runtime *rt,
                                             vigil_error *err);
/* 1 if a daemon serves the store, with its pid in *pid (may be NULL); 0 otherwise. */
VIGIL_API int vigil_daemon_running(const char *store_uri, long *pid);
/* Tell a running daemon to look at the store's queue now; best effort. */
VIGIL_API void vigil_daemon_poke(const char *store_uri);
/* The daemons sharing the store (PostgreSQL; none are recorded on a SQLite file), as a JSON
 * array text (owned): each {holder, host, pid, started_ms, beat_ms, runs, leases} as of its
 * last beat; a killed daemon stays listed with its beats stopped. */
VIGIL_API vigil_code vigil_daemon_list(vigil_runtime *rt, char **out_json, vigil_error *err);
/* Remove the `daemon` records of daemons that are stale (as vigil_status marks them: killed, or
 * their host is down; a live daemon removes them a day after their last beat). *removed (may
 * be NULL) counts them. A live daemon whose record went writes it again at its next beat. */
VIGIL_API vigil_code vigil_daemon_prune_stale(vigil_runtime *rt, int *removed, vigil_error *err);

/*
 * The store and its fleet at a glance, for an operator (`vigil status`, GET /v1/status), as a
 * JSON object text (owned): {now_ms, store: {uri, kind ("sqlite" or "postgres"), bytes (on
 * disk), used_bytes (the records'), schema_version}, daemons: [{host, pid, stale, and on a
 * shared store holder, started_ms, beat_ms, beat_age_ms, runs, leases}] (a SQLite store's one
 * daemon comes from its lock file), kill_switches: [the switches on], agents: {created, active,
 * dormant, destroyed}, wakes: {queued, running, failed, orphaned (running, their process gone),
 * oldest_queued_ms, oldest_queued_age_ms, oldest_queued_agent_id, oldest_queued_agent_name
 * (null when none is queued)},
 * approvals_pending, in_doubt (operations), memory_pending, next_timer: {timer_id, agent_id,
 * agent_name, at, ms} or null, attention: [one line per thing that needs a person, saying
 * what to do; empty when all is well]}. Reads only. Errors: store errors, ENOMEM.
 */
VIGIL_API vigil_code vigil_status(vigil_runtime *rt, char **out_json, vigil_error *err);

/*
 * Service levels (docs/operations.md, "Service levels"), measured from the run records of the
 * last window_ms (> 0) of the runtime's clock, of one agent or (agent_id NULL) all: {agent_id,
 * since, window_ms, figures: {runs: {started, ended, completed, failed, interrupted, crashed,
 * canceled, unfinished}, tool_calls: {total, in_doubt}, latency_ms: {p50, p95, max},
 * cost_usd: {total, per_run}}, objectives: [{name, unit, target, actual, met}]}. The objectives
 * are success_rate (completed among the runs that ended; canceled ones are a person's choice
 * and left out), side_effect_correctness (the tool calls whose effect is known: not in doubt),
 * latency_p95 (ms a run took, start to end) and, when the config sets a target, cost_per_run;
 * targets from the config file's `slo` section (defaults 0.95, 1.0, 60000 ms). actual and met
 * are null when the window has nothing to measure. *out_json is owned. Errors: EINVAL,
 * ENOTFOUND (no such agent), the config file's error.
 */
VIGIL_API vigil_code vigil_slo(vigil_runtime *rt, const char *agent_id, int64_t window_ms,
                               char **out_json, vigil_error *err);

/*
 * Subscriptions. spec_json is an object: {"tokens":["TASK",...] (required), "require":[...],
 * "where":["category=gym",...], "linked_to":"ID", "id":"ID"}. Any token matches; every
 * "require" token must also be in the batch; "where" and "linked_to" must hold for one changed
 * entity. An existing id is replaced. *out_id (owned, vigil_free) receives the id.
 */
VIGIL_API vigil_code vigil_subscription_add(vigil_runtime *rt, const char *agent_id,
                                            const char *spec_json, char **out_id, vigil_error *err);
VIGIL_API vigil_code vigil_subscription_remove(vigil_runtime *rt, const char *sub_id,
                                               vigil_error *err);
/* Subscriptions of one agent (agent_id NULL: all) as a JSON array text (owned); each names its
 * agent by agent_id and agent_name (null for an agent gone). */
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
VIGIL_API vigil_code vigil_timer_remove(vigil_runtime *rt, const char *timer_id, vigil_error *err);
/* Change a timer's zone, keeping its wall-clock intent. */
VIGIL_API vigil_code vigil_timer_set_zone(vigil_runtime *rt, const char *timer_id, const char *tz,
                                          vigil_error *err);
/* Timers of one agent (agent_id NULL: all) as a JSON array text (owned); each names its agent
 * by agent_id and agent_name (null for an agent gone), and gives next_run_at. */
VIGIL_API vigil_code vigil_timer_list(vigil_runtime *rt, const char *agent_id, char **out_json,
                                      vigil_error *err);

/*
 * The wake-run log, newest first: a JSON array text (owned) of runs with run_key, agent_id,
 * reason, reason_id, thread_id, status (queued, started, completed, skipped, failed,
 * cancelled; a filter takes "canceled" too), error, times and metadata. agent_id and status may be
 * NULL; limit 1..1000 (0: 50).
 */
VIGIL_API vigil_code vigil_wake_runs(vigil_runtime *rt, const char *agent_id, const char *status,
                                     int limit, char **out_json, vigil_error *err);

/* ---- memory ------------------------------------------------------------------------------- */

/*
 * Memory blocks of an agent (tiers core, working, archival; permissions read_only, familiar,
 * append, read_write). Every call returns owned JSON text in *out_json (free with vigil_free).
 * tier: NULL for all tiers. Errors: EINVAL (unknown tier), ENOTFOUND (no such label / id).
 */
VIGIL_API vigil_code vigil_memory_list(vigil_runtime *rt, const char *agent_id, const char *tier,
                                       char **out_json, vigil_error *err);
VIGIL_API vigil_code vigil_memory_show(vigil_runtime *rt, const char *agent_id, const char *label,
                                       char **out_json, vigil_error *err);
/* Hybrid search (keywords + vectors of the configured embedder, the offline one unless
 * embed.provider names another; see docs/memory.md), fused by rank; k: 1..100 (0: 10). */
VIGIL_API vigil_code vigil_memory_search(vigil_runtime *rt, const char *agent_id, const char *query,
                                         int k, char **out_json, vigil_error *err);
/* The event log of one label, oldest first: type, old_content, new_content, at, actor... */
VIGIL_API vigil_code vigil_memory_history(vigil_runtime *rt, const char *agent_id,
                                          const char *label, char **out_json, vigil_error *err);
/* Pending mutations of familiar blocks (agent_id NULL: of every agent), oldest first. */
VIGIL_API vigil_code vigil_memory_pending(vigil_runtime *rt, const char *agent_id, char **out_json,
                                          vigil_error *err);
/*
 * Resolve a pending mutation: approval applies it, rejection keeps the block and hands the
 * reason (required) to the agent. Both tell the agent in its default session thread. Resolving
 * again the same way is a no-op; the other way is ESTATE. out_json (may be NULL): the mutation.
 */
VIGIL_API vigil_code vigil_memory_approve(vigil_runtime *rt, const char *pending_id,
                                          char **out_json, vigil_error *err);
VIGIL_API vigil_code vigil_memory_reject(vigil_runtime *rt, const char *pending_id,
                                         const char *reason, char **out_json, vigil_error *err);
/*
 * A person's change to an agent's memory: it applies at once, whatever the block's permission
 * (permissions bind the agent; a read_only block is set this way), never as a pending change,
 * and the memory history records it as made by "human". vigil_memory_set creates the block
 * (tier NULL: core; permission NULL: read_write) or changes it (NULL keeps the content, tier or
 * permission it has). *out_json (may be NULL; owned): the block as it is now, with "change":
 * "created", "updated" or "unchanged" (nothing differed: nothing written). vigil_memory_delete
 * removes a block of any tier, an archival note included; *out_json (may be NULL): the block as
 * it was. Errors: EINVAL (label, tier or permission), ETOOBIG (content over 256 KiB),
 * ENOTFOUND (no such agent; no such label to delete, or to create without content).
 */
VIGIL_API vigil_code vigil_memory_set(vigil_runtime *rt, const char *agent_id, const char *label,
                                      const char *content, const char *tier, const char *permission,
                                      char **out_json, vigil_error *err);
VIGIL_API vigil_code vigil_memory_delete(vigil_runtime *rt, const char *agent_id, const char *label,
                                         char **out_json, vigil_error *err);
/*
 * First run: give an agent without memory its core blocks (system: read_only, persona and
 * familiar: familiar) from a persona file (NULL: $VIGIL_PERSONA, else the shipped default).
 * *seeded (may be NULL): 1 when blocks were created.
 */
VIGIL_API vigil_code vigil_memory_seed(vigil_runtime *rt, const char *agent_id,
                                       const char *persona_path, int *seeded, vigil_error *err);

/* ---- code sandbox (docs/sandbox.md) ------------------------------------------------------- */

/*
 * What this machine's kernel offers for the code sandbox and what execute_code would apply:
 * {"offered":[...], "applied":[...], "missing":[...], "required":[...], "required_missing":
 * [...], "can_run": bool, "landlock_abi", "user_namespaces", "host_root", "notes", "deno":
 * {"available": bool, "path", "version" or "why"}}. rt may be NULL: the default config's
 * sandbox section is read. *out_json owned (vigil_free).
 */
VIGIL_API vigil_code vigil_sandbox_check(vigil_runtime *rt, char **out_json, vigil_error *err);
/*
 * Run one Lua program as execute_code would. agent_id set: through that agent's gate (its
 * manifest must grant execute_code), with its limits and working directory, recorded in its
 * journal; NULL: the config's limits, no host tools, the sandbox root's "_cli" directory.
 * *out_json (owned): {"ok":true,"result":...,"output":...,...} or {"ok":false,"error":{"code",
 * "message"},...}; a program's failure is not an error of this call. A refusal by the agent's
 * gate before anything ran (execute_code not granted, a budget, a kill switch) returns the
 * gate's code (EDENIED, EBUDGET, EKILLED, ...) and still sets *out_json.
 */
VIGIL_API vigil_code vigil_sandbox_run(vigil_runtime *rt, const char *agent_id, const char *code,
                                       size_t code_len, char **out_json, vigil_error *err);
/*
 * vigil_sandbox_run with the program's language: "lua", "typescript" or "javascript" (both run
 * by Deno when a deno binary is there: sandbox.deno, else $VIGIL_DENO, else PATH); NULL: the
 * agent's or the config's sandbox.language, else lua. EINVAL for another language.
 */
VIGIL_API vigil_code vigil_sandbox_run_language(vigil_runtime *rt, const char *agent_id,
                                                const char *language, const char *code,
                                                size_t code_len, char **out_json, vigil_error *err);
/*
 * vigil_sandbox_run_language under a run key (NULL: a fresh "sandbox-run:<id>" one). The same
 * agent, run key, language and program are the same operation: once a person approved it
 * (execute_code needs approval), the repeat under the run key the refusal's answer named runs it.
 * A refusal waiting for approval sets *out_json's "run_key" and its error's "approval_id".
 */
VIGIL_API vigil_code vigil_sandbox_run_keyed(vigil_runtime *rt, const char *agent_id,
                                             const char *run_key, const char *language,
                                             const char *code, size_t code_len, char **out_json,
                                             vigil_error *err);

/* ---- process statistics (the daemon's /metrics; docs/http.md) ------------------------------ */

/* Buckets of the latency histograms: VIGIL_LATENCY_BUCKETS - 1 upper bounds in seconds
 * (vigil_latency_bounds, increasing), then +Inf. */
#define VIGIL_LATENCY_BUCKETS 17
VIGIL_API extern const double vigil_latency_bounds[VIGIL_LATENCY_BUCKETS - 1];

typedef struct vigil_latency_histogram {
    uint64_t buckets[VIGIL_LATENCY_BUCKETS]; /* per bucket, not cumulative; the last is +Inf */
    uint64_t count;
    double sum_seconds;
} vigil_latency_histogram;

/* Counters of this process since it started, over all its runtimes. */
typedef struct vigil_stats {
    vigil_latency_histogram steps;       /* a loop step: model call, turn commit, tool calls */
    vigil_latency_histogram model_calls; /* an answered model call, retries included */
    uint64_t log_syncs;                  /* syncs of the store's write-ahead log (SQLite) */
    uint64_t commits;                    /* store transactions that wrote and committed */
} vigil_stats;

/* Read the counters (cheap: a few relaxed atomic loads; never blocks). */
VIGIL_API void vigil_stats_read(vigil_stats *out);
/*
 * Wait until a store transaction of this process that wrote commits: returns at once when
 * the commit count is no longer `seen` (vigil_stats.commits), else after the next such commit
 * or timeout_ms, with the count then. Writes of other processes are not seen: poll for those.
 */
VIGIL_API uint64_t vigil_stats_wait_commit(uint64_t seen, int timeout_ms);

/* ---- the event log (GET /v1/events; docs/http.md) ----------------------------------------- */

/*
 * Append events to the store's event log in one transaction. events_json: an array of
 * {"kind": "run.started", "agent_id": "..." or null, "data": {...}}. Each event gets the next
 * position of the log: store-wide, increasing by one, never reused (the log is trimmed only
 * from its oldest end), so a client's last position stays meaningful across daemon restarts.
 * *first_position (may be NULL) receives the first one given; 0 when none was.
 * An event may carry a "key" (1..200 bytes) naming the fact it reports ("run.ended:RUN_ID"):
 * an event whose key the log already holds is left out, and gets no position, so several
 * daemons deriving the same events from one store append each once (the key of a racing
 * writer's uncommitted event waits for its transaction).
 * The append's commit does not wait for a sync of the store's log: it is durable after the
 * next durable commit on the store, or vigil_events_sync. A power loss before that may lose
 * the newest events and give their positions again (the events are derived from records
 * that are durable; a reader that saw them is ahead of the log).
 */
VIGIL_API vigil_code vigil_events_append(vigil_runtime *rt, const char *events_json,
                                         int64_t *first_position, vigil_error *err);
/* One event of vigil_events_append_list. */
typedef struct vigil_event {
    const char *kind;      /* 1..100 bytes */
    const char *agent_id;  /* NULL: none */
    const char *key;       /* NULL: none; as "key" of vigil_events_append */
    const char *data_json; /* one JSON value, kept as given (send it compact) */
    int64_t position;      /* out: the position given; 0 when its key was in the log already */
} vigil_event;
/*
 * vigil_events_append for n events already apart, each with its data as JSON text: no array
 * to encode and parse again, and each event's position written back (events[i].position), so
 * that the caller knows which were given and where. Errors as vigil_events_append (EINVAL: a
 * bad kind or key, data that is not one JSON value); on an error no event is in the log and
 * the positions are 0. Borrowed pointers, read during the call only.
 */
VIGIL_API vigil_code vigil_events_append_list(vigil_runtime *rt, vigil_event *events, size_t n,
                                              vigil_error *err);
/*
 * Events of the log after position `after`, oldest first, at most limit (1..1000): a JSON
 * array of {"position", "kind", "agent_id", "data"}. agent_id (may be NULL) keeps only that
 * agent's. *out_json owned (vigil_free).
 */
VIGIL_API vigil_code vigil_events_read(vigil_runtime *rt, int64_t after, const char *agent_id,
                                       int limit, char **out_json, vigil_error *err);
/* The log's positions: *oldest the oldest kept (0 when empty), *newest the last given. */
VIGIL_API vigil_code vigil_events_bounds(vigil_runtime *rt, int64_t *oldest, int64_t *newest,
                                         vigil_error *err);
/* Make the events appended through rt so far durable (a sync of the store's log; nothing
 * when none was appended since the last one). */
VIGIL_API vigil_code vigil_events_sync(vigil_runtime *rt, vigil_error *err);
/* Drop the log's events at or before position `upto` (the oldest end). */
VIGIL_API vigil_code vigil_events_trim(vigil_runtime *rt, int64_t upto, vigil_error *err);

#ifdef __cplusplus
}
#endif

#endif /* VIGIL_H */
