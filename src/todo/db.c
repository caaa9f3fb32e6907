/*
 * db.c: the task database (tasks.db): its schema, opening it, the SQL helpers, and applying one
 * operation in one transaction together with the record of its operation id.
 */
#include "todo/todo_int.h"
#include "base/json.h"

#include "os/clock.h"
#include "os/ids.h"

#include <stdarg.h>

/* The host schema's own version, independent of the agent store's (S3-027). */
#define TODO_SCHEMA_VERSION 3

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS todo_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS categories(id TEXT PRIMARY KEY, name TEXT NOT NULL,"
    " created_ms INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS tasks(id TEXT PRIMARY KEY,"
    " category_id TEXT NOT NULL REFERENCES categories(id), title TEXT NOT NULL,"
    " estimate_minutes INTEGER, due_date TEXT, priority TEXT NOT NULL DEFAULT 'normal'"
    " CHECK(priority IN ('low','normal','high','urgent')),"
    " status TEXT NOT NULL DEFAULT 'open' CHECK(status IN ('open','done','cancelled')),"
    " follow_up_of TEXT REFERENCES tasks(id), created_ms INTEGER NOT NULL,"
    " updated_ms INTEGER NOT NULL, version INTEGER NOT NULL DEFAULT 1, deleted_ms INTEGER);"
    "CREATE INDEX IF NOT EXISTS tasks_by_category ON tasks(category_id, status);"
    "CREATE TABLE IF NOT EXISTS checklist_items(id TEXT PRIMARY KEY,"
    " task_id TEXT NOT NULL REFERENCES tasks(id), text TEXT NOT NULL,"
    " done INTEGER NOT NULL DEFAULT 0, position INTEGER NOT NULL, updated_ms INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS items_by_task ON checklist_items(task_id, position);"
    "CREATE TABLE IF NOT EXISTS time_entries(id TEXT PRIMARY KEY,"
    " task_id TEXT NOT NULL REFERENCES tasks(id), started_at TEXT NOT NULL,"
    " minutes INTEGER NOT NULL, note TEXT NOT NULL DEFAULT '', created_ms INTEGER NOT NULL,"
    " ended_at TEXT, source_entry_id TEXT);"
    "CREATE INDEX IF NOT EXISTS time_by_task ON time_entries(task_id);"
    "CREATE TABLE IF NOT EXISTS day_plan_blocks(id TEXT PRIMARY KEY, day TEXT NOT NULL,"
    " category_id TEXT NOT NULL REFERENCES categories(id), start_time TEXT NOT NULL,"
    " end_time TEXT NOT NULL, task_id TEXT REFERENCES tasks(id), label TEXT NOT NULL DEFAULT '',"
    " UNIQUE(day, category_id, start_time));"
    "CREATE TABLE IF NOT EXISTS ratings(id TEXT PRIMARY KEY,"
    " task_id TEXT NOT NULL REFERENCES tasks(id), score INTEGER NOT NULL"
    " CHECK(score BETWEEN 1 AND 5), note TEXT NOT NULL DEFAULT '', created_ms INTEGER NOT NULL);"
    /* The operation ids of the tool calls applied, with their replies: written in the
     * transaction of the change itself, so the change and its record never disagree. */
    "CREATE TABLE IF NOT EXISTS applied_operations(operation_id TEXT PRIMARY KEY,"
    " operation TEXT NOT NULL, reply TEXT NOT NULL, applied_ms INTEGER NOT NULL);";

vigil_code todo_db_fail(struct vg_todo *t, vigil_error *err, const char *what)
{
    return VG_FAIL(err, VIGIL_ESTORE, "task database: %s: %s", what, sqlite3_errmsg(t->db));
}

static vigil_code bind_args(struct vg_todo *t, sqlite3_stmt *st, const char *fmt, va_list ap,
                            vigil_error *err)
{
    int i = 1, rc = SQLITE_OK;
    for (const char *f = fmt; f && *f && rc == SQLITE_OK; f++, i++) {
        if (*f == 's') {
            const char *s = va_arg(ap, const char *);
            rc = s ? sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
        } else if (*f == 'i') {
            rc = sqlite3_bind_int64(st, i, va_arg(ap, int64_t));
        } else if (*f == 'j') {
            const json_t *v = va_arg(ap, const json_t *);
            rc = json_is_integer(v) ? sqlite3_bind_int64(st, i, json_integer_value(v))
                 : json_is_string(v)
                     ? sqlite3_bind_text(st, i, json_string_value(v), -1, SQLITE_TRANSIENT)
                     : sqlite3_bind_null(st, i);
        } else {
            rc = sqlite3_bind_null(st, i);
        }
    }
    return rc == SQLITE_OK ? VIGIL_OK : todo_db_fail(t, err, "binding a value");
}

vigil_code todo_prepare(struct vg_todo *t, const char *sql, sqlite3_stmt **out, vigil_error *err,
                        const char *fmt, ...)
{
    va_list ap;
    vigil_code rc;
    *out = NULL;
    if (sqlite3_prepare_v2(t->db, sql, -1, out, NULL) != SQLITE_OK)
        return todo_db_fail(t, err, "preparing a statement");
    va_start(ap, fmt);
    rc = bind_args(t, *out, fmt, ap, err);
    va_end(ap);
    if (rc) {
        sqlite3_finalize(*out);
        *out = NULL;
    }
    return rc;
}

vigil_code todo_exec(struct vg_todo *t, const char *sql, vigil_error *err, const char *fmt, ...)
{
    sqlite3_stmt *st = NULL;
    va_list ap;
    vigil_code rc;
    if (sqlite3_prepare_v2(t->db, sql, -1, &st, NULL) != SQLITE_OK)
        return todo_db_fail(t, err, "preparing a statement");
    va_start(ap, fmt);
    rc = bind_args(t, st, fmt, ap, err);
    va_end(ap);
    if (!rc && sqlite3_step(st) != SQLITE_DONE)
        rc = todo_db_fail(t, err, "writing");
    sqlite3_finalize(st);
    return rc;
}

void todo_new_id(struct vg_todo *t, const char *prefix, char out[64])
{
    char uuid[37];
    vg_ids_new(t->ids, uuid);
    snprintf(out, 64, "%s-%s", prefix, uuid);
}

int64_t todo_now_ms(struct vg_todo *t)
{
    return vg_clock_now_ms(t->clock);
}

/* The columns later versions of the schema added, by version. A table the schema made at this
 * open has them already (CREATE TABLE writes the newest form), so a column is added only where
 * it is missing. */
static const struct {
    int version;
    const char *table, *column;
} added_columns[] = {
    /* 2: a deleted task is kept, marked, so it can come back (todo delete, restore). */
    {2, "tasks", "deleted_ms INTEGER"},
    /* 3: a time entry keeps when it ended, as written (its UTC offset too), and the host record
     * it was logged from (create_retrospective_time_entry's source_entry_id). */
    {3, "time_entries", "ended_at TEXT"},
    {3, "time_entries", "source_entry_id TEXT"},
};

/* Whether table has a column named as the start of decl (up to its space). */
static int has_column(struct vg_todo *t, const char *table, const char *decl)
{
    sqlite3_stmt *st = NULL;
    vigil_error ignored = {0};
    int yes = 0;
    if (todo_prepare(t, "SELECT name FROM pragma_table_info(?)", &st, &ignored, "s", table))
        return 0;
    while (!yes && sqlite3_step(st) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        size_t n = strlen(name);
        yes = !strncmp(decl, name, n) && decl[n] == ' ';
    }
    sqlite3_finalize(st);
    return yes;
}

/* Bring a database of schema version v up to this vigil's, in one transaction. */
static vigil_code migrate(struct vg_todo *t, int64_t v, vigil_error *err)
{
    char sql[256];
    vigil_code rc = VIGIL_OK;
    if (v >= TODO_SCHEMA_VERSION)
        return VIGIL_OK;
    if (sqlite3_exec(t->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return todo_db_fail(t, err, "moving the schema on");
    for (size_t i = 0; !rc && i < VG_ARRAY_LEN(added_columns); i++) {
        if (added_columns[i].version <= v ||
            has_column(t, added_columns[i].table, added_columns[i].column))
            continue;
        snprintf(sql, sizeof sql, "ALTER TABLE %s ADD COLUMN %s", added_columns[i].table,
                 added_columns[i].column);
        rc = todo_exec(t, sql, err, "");
    }
    if (!rc)
        rc = todo_exec(t, "UPDATE todo_meta SET value = ? WHERE key = 'schema_version'", err, "i",
                       (int64_t)TODO_SCHEMA_VERSION);
    if (rc || sqlite3_exec(t->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        rc = rc ? rc : todo_db_fail(t, err, "moving the schema on");
        sqlite3_exec(t->db, "ROLLBACK", NULL, NULL, NULL);
    }
    return rc;
}

static vigil_code check_version(struct vg_todo *t, vigil_error *err)
{
    sqlite3_stmt *st = NULL;
    vigil_code rc =
        todo_prepare(t, "SELECT value FROM todo_meta WHERE key='schema_version'", &st, err, "");
    if (rc)
        return rc;
    if (sqlite3_step(st) == SQLITE_ROW) {
        int64_t v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        if (v > TODO_SCHEMA_VERSION)
            return VG_FAIL(err, VIGIL_ESTATE,
                           "task database: schema version %lld is newer than this vigil's (%d)",
                           (long long)v, TODO_SCHEMA_VERSION);
        return migrate(t, v, err);
    }
    sqlite3_finalize(st);
    return todo_exec(t, "INSERT INTO todo_meta(key, value) VALUES('schema_version', ?)", err, "i",
                     (int64_t)TODO_SCHEMA_VERSION);
}

static vigil_code open_db(struct vg_todo *t, const char *path, int create, vigil_error *err)
{
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
    if (sqlite3_open_v2(path, &t->db, flags, NULL) != SQLITE_OK) {
        vigil_code code = create ? VIGIL_ESTORE : VIGIL_ENOTFOUND;
        return VG_FAIL(err, code, "task database %s: %s", path,
                       t->db ? sqlite3_errmsg(t->db) : "out of memory");
    }
    /* Another process (the command, the daemon) may write the same file: WAL lets readers go
     * on, and a writer waits its turn for up to 5 s instead of failing at once. */
    sqlite3_busy_timeout(t->db, 5000);
    if (sqlite3_exec(t->db, "PRAGMA journal_mode=WAL; PRAGMA foreign_keys=ON;", NULL, NULL, NULL) !=
            SQLITE_OK ||
        sqlite3_exec(t->db, schema_sql, NULL, NULL, NULL) != SQLITE_OK)
        return todo_db_fail(t, err, "creating the schema");
    return check_version(t, err);
}

vigil_code vg_todo_open(const char *path, int create_if_missing, struct vg_clock *clock,
                        struct vg_ids *ids, struct vg_todo **out, vigil_error *err)
{
    struct vg_todo *t = vg_calloc(1, sizeof *t);
    vigil_code rc;
    *out = NULL;
    if (!t)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory opening the task database");
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&t->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    t->clock = clock ? clock : vg_clock_real();
    t->ids = ids;
    if (!t->ids && !(t->ids = t->own_ids = vg_ids_real(t->clock))) {
        vg_free(t);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory opening the task database");
    }
    if ((rc = open_db(t, path, create_if_missing, err))) {
        vg_todo_close(t);
        return rc;
    }
    *out = t;
    return VIGIL_OK;
}

void vg_todo_close(struct vg_todo *t)
{
    if (!t)
        return;
    sqlite3_close(t->db);
    if (t->own_ids)
        vg_ids_free(t->own_ids);
    pthread_mutex_destroy(&t->lock);
    vg_free(t);
}

static vigil_code applied(struct vg_todo *t, const char *operation_id, int *found, json_t **reply,
                          vigil_error *err)
{
    sqlite3_stmt *st = NULL;
    vigil_code rc = todo_prepare(t, "SELECT reply FROM applied_operations WHERE operation_id = ?",
                                 &st, err, "s", operation_id);
    *found = 0;
    if (reply)
        *reply = NULL;
    if (rc)
        return rc;
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        *found = 1;
        if (reply && !(*reply = json_loads((const char *)sqlite3_column_text(st, 0), 0, NULL)))
            rc = VG_FAIL(err, VIGIL_ECORRUPT, "task database: a recorded reply is not JSON");
    } else if (step != SQLITE_DONE) {
        rc = todo_db_fail(t, err, "reading an applied operation");
    }
    sqlite3_finalize(st);
    return rc;
}

vigil_code todo_task_category(struct vg_todo *t, const char *task_id, char *out, size_t n,
                              int *found, vigil_error *err)
{
    sqlite3_stmt *st = NULL;
    vigil_code rc =
        todo_prepare(t, "SELECT category_id FROM tasks WHERE id = ? AND deleted_ms IS NULL", &st,
                     err, "s", task_id);
    *found = 0;
    if (rc)
        return rc;
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        *found = 1;
        snprintf(out, n, "%s", (const char *)sqlite3_column_text(st, 0));
    } else if (step != SQLITE_DONE) {
        rc = todo_db_fail(t, err, "reading a task");
    }
    sqlite3_finalize(st);
    return rc;
}

vigil_code vg_todo_applied(struct vg_todo *t, const char *operation_id, int *found, json_t **reply,
                           vigil_error *err)
{
    pthread_mutex_lock(&t->lock);
    vigil_code rc = applied(t, operation_id, found, reply, err);
    pthread_mutex_unlock(&t->lock);
    return rc;
}

static int scope_of(struct vg_todo *t, const char *entity_id, char *out, size_t n)
{
    static const char sql[] =
        "SELECT category_id || '/' || id FROM tasks WHERE id = ?1 AND deleted_ms IS NULL UNION ALL "
        "SELECT t.category_id || '/' || t.id FROM checklist_items i "
        "JOIN tasks t ON t.id = i.task_id WHERE i.id = ?1 AND t.deleted_ms IS NULL LIMIT 1";
    sqlite3_stmt *st = NULL;
    vigil_error e = {0};
    int found = 0;
    if (todo_prepare(t, sql, &st, &e, "s", entity_id))
        return 0; /* fail closed: the gate refuses an unresolvable target */
    if (sqlite3_step(st) == SQLITE_ROW) {
        snprintf(out, n, "%s", (const char *)sqlite3_column_text(st, 0));
        found = 1;
    }
    sqlite3_finalize(st);
    return found;
}

int vg_todo_scope_of(struct vg_todo *t, const char *entity_id, char *out, size_t n)
{
    pthread_mutex_lock(&t->lock);
    int found = scope_of(t, entity_id, out, n);
    pthread_mutex_unlock(&t->lock);
    return found;
}

vigil_code todo_refuse(struct todo_change *c, const char *code, const char *fmt, ...)
{
    va_list ap;
    snprintf(c->code, sizeof c->code, "%s", code);
    va_start(ap, fmt);
    vsnprintf(c->message, sizeof c->message, fmt, ap);
    va_end(ap);
    return VIGIL_OK;
}

vigil_code todo_refuse_missing(struct todo_change *c, const char *fmt, ...)
{
    va_list ap;
    snprintf(c->code, sizeof c->code, "invalid_arguments");
    va_start(ap, fmt);
    vsnprintf(c->message, sizeof c->message, fmt, ap);
    va_end(ap);
    c->missing = 1;
    return VIGIL_OK;
}

static int array_has(const json_t *a, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach (a, i, v)
        if (!strcmp(json_string_value(v), s))
            return 1;
    return 0;
}

vigil_code todo_changed(struct todo_change *c, const char *id, const char *key, vigil_error *err)
{
    if ((id && !array_has(c->ids, id) && json_array_append_new(c->ids, json_string(id))) ||
        (key && !array_has(c->keys, key) && json_array_append_new(c->keys, json_string(key))))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory noting a change");
    return VIGIL_OK;
}

/* The reply of a finished operation (owned), by the tool reply protocol. */
static json_t *reply_of(struct todo_change *c)
{
    if (c->code[0] && c->missing)
        return json_pack("{s:{s:s, s:s, s:b}}", "error", "code", c->code, "message", c->message,
                         "missing", 1);
    if (c->code[0])
        return json_pack("{s:{s:s, s:s}}", "error", "code", c->code, "message", c->message);
    return json_pack("{s:O?, s:O, s:O}", "result", c->result, "changed_entity_ids", c->ids,
                     "changed_tokens", c->keys);
}

/* Record the applied operation with its reply, in the change's own transaction. */
static vigil_code record_applied(struct vg_todo *t, const char *op, const char *operation_id,
                                 const json_t *reply, vigil_error *err)
{
    char *text = vg_json_dumps(reply, JSON_COMPACT | JSON_SORT_KEYS);
    vigil_code rc;
    if (!text)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory recording an operation");
    rc = todo_exec(t,
                   "INSERT INTO applied_operations(operation_id, operation, reply, applied_ms) "
                   "VALUES(?, ?, ?, ?)",
                   err, "sssi", operation_id, op, text, todo_now_ms(t));
    free(text);
    return rc;
}

/* An agent's edit of a task that is no longer open (op->open_task_only): refused in c. A task
 * that is not there is left to the operation, which says so. */
static vigil_code refuse_closed_task(struct vg_todo *t, const json_t *args, struct todo_change *c,
                                     vigil_error *err)
{
    static const char *const names[] = {"task_id", "from_task_id", "to_task_id"};
    for (size_t i = 0; i < VG_ARRAY_LEN(names) && !c->code[0]; i++) {
        const char *id = json_string_value(json_object_get(args, names[i]));
        sqlite3_stmt *st = NULL;
        if (!id)
            continue;
        vigil_code rc = todo_prepare(
            t, "SELECT status FROM tasks WHERE id = ? AND deleted_ms IS NULL", &st, err, "s", id);
        if (rc)
            return rc;
        if (sqlite3_step(st) == SQLITE_ROW &&
            strcmp((const char *)sqlite3_column_text(st, 0), "open"))
            todo_refuse(c, "unsafe_target",
                        "task \"%s\" is %s: it takes no more changes from an agent", id,
                        (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    return VIGIL_OK;
}

/* Inside the open transaction: the recorded reply of operation_id, or run op and record it. */
static vigil_code apply_in_tx(struct vg_todo *t, const struct todo_op *o, const char *operation_id,
                              const json_t *args, json_t **reply, vigil_error *err)
{
    struct todo_change c = {.ids = json_array(), .keys = json_array()};
    int found = 0;
    vigil_code rc = VIGIL_OK;
    if (operation_id && (rc = applied(t, operation_id, &found, reply, err)))
        goto out;
    if (found)
        goto out;
    if (!c.ids || !c.keys) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory applying %s", o->name);
        goto out;
    }
    if (operation_id && o->open_task_only && (rc = refuse_closed_task(t, args, &c, err)))
        goto out;
    if (!c.code[0] && (rc = o->fn(t, args, &c, err)))
        goto out;
    if (!(*reply = reply_of(&c)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory answering %s", o->name);
    else if (!c.code[0] && operation_id)
        rc = record_applied(t, o->name, operation_id, *reply, err);
out:
    if (!rc && !found && c.code[0])
        rc = VIGIL_ECANCELED; /* a refusal: roll back whatever the operation wrote */
    json_decref(c.result);
    json_decref(c.ids);
    json_decref(c.keys);
    return rc;
}

static vigil_code apply_locked(struct vg_todo *t, const struct todo_op *o, const char *operation_id,
                               const json_t *args, json_t **reply, vigil_error *err);

vigil_code vg_todo_apply(struct vg_todo *t, const char *op, const char *operation_id,
                         const json_t *args, json_t **reply, vigil_error *err)
{
    const struct todo_op *o = todo_op_find(op);
    vigil_code rc;
    *reply = NULL;
    if (!o)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "the task domain has no operation \"%s\"", op);
    pthread_mutex_lock(&t->lock);
    rc = apply_locked(t, o, operation_id, args, reply, err);
    pthread_mutex_unlock(&t->lock);
    return rc;
}

/* vg_todo_apply under the lock: one transaction, committed or rolled back whole. */
static vigil_code apply_locked(struct vg_todo *t, const struct todo_op *o, const char *operation_id,
                               const json_t *args, json_t **reply, vigil_error *err)
{
    vigil_code rc;
    /* IMMEDIATE: the write lock is taken before the first read, so the check of the operation
     * id and the write it guards cannot interleave with another process's. */
    if (sqlite3_exec(t->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return todo_db_fail(t, err, "beginning a transaction");
    rc = apply_in_tx(t, o, operation_id, args, reply, err);
    if (rc == VIGIL_ECANCELED && *reply) {
        sqlite3_exec(t->db, "ROLLBACK", NULL, NULL, NULL);
        return VIGIL_OK;
    }
    if (rc) {
        sqlite3_exec(t->db, "ROLLBACK", NULL, NULL, NULL);
        json_decref(*reply);
        *reply = NULL;
        return rc;
    }
    if (sqlite3_exec(t->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        rc = todo_db_fail(t, err, "committing");
        sqlite3_exec(t->db, "ROLLBACK", NULL, NULL, NULL);
        json_decref(*reply);
        *reply = NULL;
    }
    return rc;
}
