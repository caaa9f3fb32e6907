/*
 * todo_int.h: private to src/todo: the open database, what one operation changes while it runs,
 * and the SQL helpers the operations share.
 */
#ifndef VG_TODO_INT_H
#define VG_TODO_INT_H

#include "todo/todo.h"

#include <pthread.h>
#include <sqlite3.h>

struct vg_todo {
    sqlite3 *db;
    /* One connection serves the runtimes of every daemon worker (vigil_daemon_options'
     * on_runtime): calls take turns, each whole transaction under the lock. Recursive: an
     * operation reads through the same public functions it is called from. */
    pthread_mutex_t lock;
    struct vg_clock *clock;
    struct vg_ids *ids;
    struct vg_ids *own_ids; /* ids made here (freed at close), or NULL */
};

/* What one operation did: its result, the entities it changed and the semantic keys it
 * raises; or a refusal (code set), after which the transaction rolls back. */
struct todo_change {
    json_t *result; /* owned, or NULL */
    json_t *ids;    /* owned array of changed entity ids */
    json_t *keys;   /* owned array of semantic keys */
    char code[32];  /* "": applied; else a tool error code (invalid_arguments, unsafe_target) */
    char message[256];
    /* The refusal is of a task or category that is not there: a person's command says so with
     * exit 3 and the HTTP API with 404, as for any missing thing (the tool's code stays
     * invalid_arguments: the gate's table has no code for it). */
    int missing;
};

/* Refuse the operation: code is a tool error code. Returns VIGIL_OK (a refusal is an answer). */
vigil_code todo_refuse(struct todo_change *c, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Refuse the operation because what it names is not there (invalid_arguments, missing). */
vigil_code todo_refuse_missing(struct todo_change *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Note an entity id and a semantic key (NULL: none) as changed. */
vigil_code todo_changed(struct todo_change *c, const char *id, const char *key, vigil_error *err);

/* One operation: what it is named and does, and its contract (docs/tools.md) when it is a tool
 * (NULL contract: a person's operation only). */
typedef vigil_code (*todo_op_fn)(struct vg_todo *t, const json_t *args, struct todo_change *c,
                                 vigil_error *err);
struct todo_op {
    const char *name;
    todo_op_fn fn;
    const char *description;
    const char *input_schema;
    const char *contract;
    /* 1: an edit of an open task. An agent's call (one with an operation id) on a task that is
     * done or cancelled is refused, so a task agent stops changing a task once it is concluded
     * (a person may still correct it). */
    int open_task_only;
};
/* The reads and time entries (read.c). */
vigil_code todo_op_resolve_task_reference(struct vg_todo *t, const json_t *args,
                                          struct todo_change *c, vigil_error *err);
vigil_code todo_op_list_tasks_in_scope(struct vg_todo *t, const json_t *args, struct todo_change *c,
                                       vigil_error *err);
vigil_code todo_op_get_task(struct vg_todo *t, const json_t *args, struct todo_change *c,
                            vigil_error *err);
vigil_code todo_op_create_retrospective_time_entry(struct vg_todo *t, const json_t *args,
                                                   struct todo_change *c, vigil_error *err);
/* Day plans and ratings (plan.c). */
vigil_code todo_op_upsert_day_plan_blocks(struct vg_todo *t, const json_t *args,
                                          struct todo_change *c, vigil_error *err);
vigil_code todo_op_get_day_plan(struct vg_todo *t, const json_t *args, struct todo_change *c,
                                vigil_error *err);
vigil_code todo_op_rate_task(struct vg_todo *t, const json_t *args, struct todo_change *c,
                             vigil_error *err);
vigil_code todo_op_get_ratings_summary(struct vg_todo *t, const json_t *args, struct todo_change *c,
                                       vigil_error *err);
/* Install the domain's wake context on rt (context.c): an agent relying on a task wakes with
 * it. */
void vg_todo_set_wake_context(vigil_runtime *rt, struct vg_todo *t);
/* The operations (ops.c), ended by a NULL name. */
extern const struct todo_op todo_ops[];
const struct todo_op *todo_op_find(const char *name);

/* SQL helpers (db.c). A prepared statement with args bound from a format: 's' text (NULL:
 * SQL NULL), 'i' int64, 'j' a json_t * (an integer, a string, anything else SQL NULL), 'n'
 * SQL NULL (no argument). *out owned (sqlite3_finalize). */
vigil_code todo_prepare(struct vg_todo *t, const char *sql, sqlite3_stmt **out, vigil_error *err,
                        const char *fmt, ...);
/* Run a statement that returns no rows (prepared, bound, stepped, finalized). */
vigil_code todo_exec(struct vg_todo *t, const char *sql, vigil_error *err, const char *fmt, ...);
/* SQLite's failure as a vigil error. */
vigil_code todo_db_fail(struct vg_todo *t, vigil_error *err, const char *what);
/* A new entity id: prefix + "-" + a UUID. */
void todo_new_id(struct vg_todo *t, const char *prefix, char out[64]);
int64_t todo_now_ms(struct vg_todo *t);
/* The longest title or checklist item text, in characters (the tools' schemas say 500 too). */
#define TODO_TEXT_MAX 500
/* Whether s is a calendar day, YYYY-MM-DD (2026-02-30 is not). */
int todo_valid_date(const char *s);
/* The category of task_id into out (1), or 0 when there is no such task. */
vigil_code todo_task_category(struct vg_todo *t, const char *task_id, char *out, size_t n,
                              int *found, vigil_error *err);
/* Insert a task (id written to id_out) in category with the optional fields of args
 * (estimate_minutes, due_date, priority) and follow_up_of (NULL: none). */
vigil_code todo_insert_task(struct vg_todo *t, const char *category, const char *title,
                            const json_t *args, const char *follow_up_of, char id_out[64],
                            vigil_error *err);

#endif
