/*
 * ops.c: the task domain's changes to tasks and their checklists. Each checks its own
 * arguments (a person's edit reaches it without the tool gate's schema check) and the
 * entities it touches: a checklist item named with a task must be that task's, whatever the
 * caller says, so an agent whose gate admitted task A cannot reach an item of task B by naming
 * it under A.
 */
#include "todo/todo_int.h"

static const char *str_arg(const json_t *args, const char *name)
{
    const char *s = json_string_value(json_object_get(args, name));
    return s && *s ? s : NULL;
}

/* Whether a title or a checklist item's text is longer than the 500 characters (code points,
 * as the tools' maxLength counts) a person's edit and an agent's call alike may write: every
 * get_task hands the text to the model. */
static int too_long(const char *s)
{
    size_t chars = 0;
    for (; s && *s; s++)
        chars += ((unsigned char)*s & 0xc0) != 0x80;
    return chars > TODO_TEXT_MAX;
}

/* The category of the task named by args[name]; a refusal when there is none. */
static vigil_code need_task(struct vg_todo *t, const json_t *args, const char *name,
                            struct todo_change *c, char category[128], vigil_error *err)
{
    const char *id = str_arg(args, name);
    int found = 0;
    vigil_code rc;
    category[0] = '\0';
    if (!id)
        return todo_refuse(c, "invalid_arguments", "\"%s\" must name a task", name);
    if ((rc = todo_task_category(t, id, category, 128, &found, err)))
        return rc;
    if (!found)
        return todo_refuse_missing(c, "no task \"%s\"", id);
    return VIGIL_OK;
}

static vigil_code touch_task(struct vg_todo *t, const char *id, struct todo_change *c,
                             vigil_error *err)
{
    vigil_code rc =
        todo_exec(t, "UPDATE tasks SET updated_ms = ?, version = version + 1 WHERE id = ?", err,
                  "is", todo_now_ms(t), id);
    return rc ? rc : todo_changed(c, id, "TASK", err);
}

/* ---- a task's own fields -------------------------------------------------------------------- */

int todo_valid_date(const char *s)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (!s || strlen(s) != 10 || s[4] != '-' || s[7] != '-')
        return 0;
    for (int i = 0; i < 10; i++)
        if (i != 4 && i != 7 && (s[i] < '0' || s[i] > '9'))
            return 0;
    int y = (int)strtol(s, NULL, 10), m = (int)strtol(s + 5, NULL, 10),
        d = (int)strtol(s + 8, NULL, 10);
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m >= 1 && m <= 12 && d >= 1 && d <= days[m - 1] + (m == 2 && leap);
}

static int valid_priority(const char *s)
{
    static const char *const all[] = {"low", "normal", "high", "urgent"};
    for (size_t i = 0; s && i < VG_ARRAY_LEN(all); i++)
        if (!strcmp(s, all[i]))
            return 1;
    return 0;
}

/* The optional task fields of args, checked: 0, or a refusal written to c. */
static int check_task_fields(const json_t *args, struct todo_change *c)
{
    json_t *est = json_object_get(args, "estimate_minutes"),
           *due = json_object_get(args, "due_date");
    json_t *prio = json_object_get(args, "priority");
    if (est && !json_is_null(est) && (!json_is_integer(est) || json_integer_value(est) < 0))
        return todo_refuse(c, "invalid_arguments", "estimate_minutes must be minutes, >= 0"), 1;
    if (due && !json_is_null(due) && !todo_valid_date(json_string_value(due)))
        return todo_refuse(c, "invalid_arguments", "due_date must be YYYY-MM-DD or null"), 1;
    if (prio && !valid_priority(json_string_value(prio)))
        return todo_refuse(c, "invalid_arguments", "priority must be low|normal|high|urgent"), 1;
    return 0;
}

vigil_code todo_insert_task(struct vg_todo *t, const char *category, const char *title,
                            const json_t *args, const char *follow_up_of, char id_out[64],
                            vigil_error *err)
{
    const json_t *est = json_object_get(args, "estimate_minutes");
    const char *prio = json_string_value(json_object_get(args, "priority"));
    int64_t now = todo_now_ms(t);
    todo_new_id(t, "task", id_out);
    return todo_exec(t,
                     "INSERT INTO tasks(id, category_id, title, estimate_minutes, due_date,"
                     " priority, follow_up_of, created_ms, updated_ms)"
                     " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     err, "sssjsssii", id_out, category, title, est,
                     json_string_value(json_object_get(args, "due_date")), prio ? prio : "normal",
                     follow_up_of, now, now);
}

static vigil_code op_create_task(struct vg_todo *t, const json_t *args, struct todo_change *c,
                                 vigil_error *err)
{
    const char *cat = str_arg(args, "category_id"), *title = str_arg(args, "title");
    char id[64];
    int found = 0;
    vigil_code rc;
    sqlite3_stmt *st = NULL;
    if (!cat || !title)
        return todo_refuse(c, "invalid_arguments", "a task needs category_id and title");
    if (too_long(title))
        return todo_refuse(c, "invalid_arguments", "a title is at most %d characters",
                           TODO_TEXT_MAX);
    if (check_task_fields(args, c))
        return VIGIL_OK;
    if ((rc = todo_prepare(t, "SELECT 1 FROM categories WHERE id = ?", &st, err, "s", cat)))
        return rc;
    found = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    if (!found)
        return todo_refuse_missing(c, "no category \"%s\"", cat);
    if ((rc = todo_insert_task(t, cat, title, args, NULL, id, err)) ||
        (rc = todo_changed(c, id, "TASK", err)))
        return rc;
    c->result = json_pack("{s:s, s:s}", "task_id", id, "category_id", cat);
    return c->result ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
}

static vigil_code op_create_category(struct vg_todo *t, const json_t *args, struct todo_change *c,
                                     vigil_error *err)
{
    const char *id = str_arg(args, "id"), *name = str_arg(args, "name");
    sqlite3_stmt *st = NULL;
    vigil_code rc;
    if (!id || strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789-_") != strlen(id) ||
        strlen(id) > 64)
        return todo_refuse(c, "invalid_arguments", "a category id is 1 to 64 of a-z, 0-9, - and _");
    if ((rc = todo_prepare(t, "SELECT 1 FROM categories WHERE id = ?", &st, err, "s", id)))
        return rc;
    int exists = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    if (exists)
        return todo_refuse(c, "invalid_arguments", "category \"%s\" exists", id);
    if ((rc = todo_exec(t, "INSERT INTO categories(id, name, created_ms) VALUES(?, ?, ?)", err,
                        "ssi", id, name ? name : id, todo_now_ms(t))) ||
        (rc = todo_changed(c, id, "CATEGORY", err)))
        return rc;
    c->result = json_pack("{s:s}", "category_id", id);
    return c->result ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
}

/* A person deletes a task: it is kept, marked deleted, so it can come back (restore_task);
 * until then no read shows it and no tool reaches it (its scope resolves to nothing). */
static vigil_code op_delete_task(struct vg_todo *t, const json_t *args, struct todo_change *c,
                                 vigil_error *err)
{
    char category[128];
    const char *id = str_arg(args, "task_id");
    vigil_code rc = need_task(t, args, "task_id", c, category, err);
    if (rc || c->code[0])
        return rc;
    if ((rc = todo_exec(t, "UPDATE tasks SET deleted_ms = ? WHERE id = ?", err, "is",
                        todo_now_ms(t), id)) ||
        (rc = touch_task(t, id, c, err)))
        return rc;
    c->result = json_pack("{s:s, s:s, s:b}", "task_id", id, "category_id", category, "deleted", 1);
    return c->result ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
}

/* A deleted task comes back as it was. */
static vigil_code op_restore_task(struct vg_todo *t, const json_t *args, struct todo_change *c,
                                  vigil_error *err)
{
    const char *id = str_arg(args, "task_id");
    sqlite3_stmt *st = NULL;
    if (!id)
        return todo_refuse(c, "invalid_arguments", "\"task_id\" must name a task");
    vigil_code rc =
        todo_prepare(t, "SELECT category_id FROM tasks WHERE id = ? AND deleted_ms IS NOT NULL",
                     &st, err, "s", id);
    if (rc)
        return rc;
    char category[128] = "";
    if (sqlite3_step(st) == SQLITE_ROW)
        snprintf(category, sizeof category, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (!category[0])
        return todo_refuse(c, "invalid_arguments", "no deleted task \"%s\"", id);
    if ((rc = todo_exec(t, "UPDATE tasks SET deleted_ms = NULL WHERE id = ?", err, "s", id)) ||
        (rc = touch_task(t, id, c, err)))
        return rc;
    c->result = json_pack("{s:s, s:s, s:b}", "task_id", id, "category_id", category, "deleted", 0);
    return c->result ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
}

/* Set one column of a task (column is a constant of the caller, never input). */
static vigil_code set_task_column(struct vg_todo *t, const json_t *args, struct todo_change *c,
                                  const char *column, json_t *value, vigil_error *err)
{
    char category[128], sql[128];
    const char *id = str_arg(args, "task_id");
    vigil_code rc = need_task(t, args, "task_id", c, category, err);
    if (rc || c->code[0] || check_task_fields(args, c))
        return rc;
    snprintf(sql, sizeof sql, "UPDATE tasks SET %s = ? WHERE id = ?", column);
    if ((rc = todo_exec(t, sql, err, "js", value, id)) || (rc = touch_task(t, id, c, err)))
        return rc;
    c->result = json_pack("{s:s, s:O}", "task_id", id, column, value ? value : json_null());
    return c->result ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
}

static vigil_code op_set_task_title(struct vg_todo *t, const json_t *args, struct todo_change *c,
                                    vigil_error *err)
{
    json_t *title = json_object_get(args, "title");
    if (!str_arg(args, "title") || too_long(str_arg(args, "title")))
        return todo_refuse(c, "invalid_arguments",
                           "title must be a non-empty string of at most %d characters",
                           TODO_TEXT_MAX);
    return set_task_column(t, args, c, "title", title, err);
}

static vigil_code op_update_task_estimate(struct vg_todo *t, const json_t *args,
                                          struct todo_change *c, vigil_error *err)
{
    json_t *v = json_object_get(args, "estimate_minutes");
    if (!json_is_integer(v))
        return todo_refuse(c, "invalid_arguments", "estimate_minutes must be an integer");
    return set_task_column(t, args, c, "estimate_minutes", v, err);
}

static vigil_code op_update_task_due_date(struct vg_todo *t, const json_t *args,
                                          struct todo_change *c, vigil_error *err)
{
    json_t *v = json_object_get(args, "due_date");
    if (!v)
        return todo_refuse(c, "invalid_arguments", "due_date is required (null clears it)");
    return set_task_column(t, args, c, "due_date", v, err);
}

static vigil_code op_update_task_priority(struct vg_todo *t, const json_t *args,
                                          struct todo_change *c, vigil_error *err)
{
    json_t *v = json_object_get(args, "priority");
    if (!v)
        return todo_refuse(c, "invalid_arguments", "priority is required");
    return set_task_column(t, args, c, "priority", v, err);
}

/* ---- checklists ----------------------------------------------------------------------------- */

static vigil_code next_position(struct vg_todo *t, const char *task_id, int64_t *out,
                                vigil_error *err)
{
    sqlite3_stmt *st = NULL;
    vigil_code rc = todo_prepare(
        t, "SELECT COALESCE(MAX(position), 0) + 1 FROM checklist_items WHERE task_id = ?", &st, err,
        "s", task_id);
    if (rc)
        return rc;
    *out = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 1;
    sqlite3_finalize(st);
    return VIGIL_OK;
}

static vigil_code op_add_checklist_items(struct vg_todo *t, const json_t *args,
                                         struct todo_change *c, vigil_error *err)
{
    char category[128], id[64];
    const char *task = str_arg(args, "task_id");
    json_t *items = json_object_get(args, "items"), *it, *ids = NULL;
    size_t i;
    int64_t pos = 0;
    vigil_code rc = need_task(t, args, "task_id", c, category, err);
    if (rc || c->code[0])
        return rc;
    if (!json_array_size(items))
        return todo_refuse(c, "invalid_arguments", "items must be a non-empty array of texts");
    json_array_foreach (items, i, it)
        if (!json_string_length(it) || too_long(json_string_value(it)))
            return todo_refuse(c, "invalid_arguments",
                               "items[%zu] must be a non-empty text of at most %d characters", i,
                               TODO_TEXT_MAX);
    if ((rc = next_position(t, task, &pos, err)) || !(ids = json_array()))
        return rc ? rc : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    c->result = json_pack("{s:s, s:o}", "task_id", task, "item_ids", ids);
    json_array_foreach (items, i, it) {
        todo_new_id(t, "item", id);
        if ((rc = todo_exec(t,
                            "INSERT INTO checklist_items(id, task_id, text, position, updated_ms)"
                            " VALUES(?, ?, ?, ?, ?)",
                            err, "sssii", id, task, json_string_value(it), pos + (int64_t)i,
                            todo_now_ms(t))) ||
            (rc = todo_changed(c, id, "CHECKLIST", err)))
            return rc;
        json_array_append_new(ids, json_string(id));
    }
    return touch_task(t, task, c, err);
}

/* 1 if item belongs to task. */
static vigil_code item_of_task(struct vg_todo *t, const char *item, const char *task, int *yes,
                               vigil_error *err)
{
    sqlite3_stmt *st = NULL;
    vigil_code rc = todo_prepare(t, "SELECT 1 FROM checklist_items WHERE id = ? AND task_id = ?",
                                 &st, err, "ss", item, task);
    if (rc)
        return rc;
    *yes = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return VIGIL_OK;
}

static vigil_code update_one_item(struct vg_todo *t, const char *task, json_t *it, size_t i,
                                  struct todo_change *c, vigil_error *err)
{
    const char *id = str_arg(it, "id");
    json_t *text = json_object_get(it, "text"), *done = json_object_get(it, "done");
    int mine = 0;
    vigil_code rc;
    if (!id || (text && (!json_string_length(text) || too_long(json_string_value(text)))) ||
        (done && !json_is_boolean(done)))
        return todo_refuse(c, "invalid_arguments",
                           "items[%zu] must be {id, text?: non-empty, at most %d characters, "
                           "done?: boolean}",
                           i, TODO_TEXT_MAX);
    if ((rc = item_of_task(t, id, task, &mine, err)))
        return rc;
    if (!mine)
        return todo_refuse(c, "unsafe_target",
                           "checklist item \"%s\" is not an item of task \"%s\"", id, task);
    if (text && (rc = todo_exec(t, "UPDATE checklist_items SET text = ? WHERE id = ?", err, "ss",
                                json_string_value(text), id)))
        return rc;
    if (done && (rc = todo_exec(t, "UPDATE checklist_items SET done = ? WHERE id = ?", err, "is",
                                (int64_t)json_is_true(done), id)))
        return rc;
    if ((rc = todo_exec(t, "UPDATE checklist_items SET updated_ms = ? WHERE id = ?", err, "is",
                        todo_now_ms(t), id)))
        return rc;
    return todo_changed(c, id, "CHECKLIST", err);
}

static vigil_code op_update_checklist_items(struct vg_todo *t, const json_t *args,
                                            struct todo_change *c, vigil_error *err)
{
    char category[128];
    const char *task = str_arg(args, "task_id");
    json_t *items = json_object_get(args, "items"), *it;
    size_t i;
    vigil_code rc = need_task(t, args, "task_id", c, category, err);
    if (rc || c->code[0])
        return rc;
    if (!json_array_size(items))
        return todo_refuse(c, "invalid_arguments", "items must be a non-empty array");
    json_array_foreach (items, i, it)
        if ((rc = update_one_item(t, task, it, i, c, err)) || c->code[0])
            return rc;
    if ((rc = touch_task(t, task, c, err)))
        return rc;
    c->result = json_pack("{s:s, s:i}", "task_id", task, "updated", (json_int_t)i);
    return c->result ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
}

/* The ids of task's open checklist items, in order, appended to out. */
static vigil_code open_items(struct vg_todo *t, const char *task, json_t *out, vigil_error *err)
{
    sqlite3_stmt *st = NULL;
    vigil_code rc = todo_prepare(
        t, "SELECT id FROM checklist_items WHERE task_id = ? AND done = 0 ORDER BY position", &st,
        err, "s", task);
    if (rc)
        return rc;
    while (sqlite3_step(st) == SQLITE_ROW)
        if (json_array_append_new(out, json_string((const char *)sqlite3_column_text(st, 0))))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    sqlite3_finalize(st);
    return rc;
}

/* Move items (all of from's when item_ids is NULL: its open ones) to the end of to's list;
 * keep_done 0 unchecks them (move_checklist_items' preserve_done false: done there, to do
 * here). */
static vigil_code move_items(struct vg_todo *t, const char *from, const char *to,
                             const json_t *item_ids, int keep_done, json_t *moved,
                             struct todo_change *c, vigil_error *err)
{
    int64_t pos = 0;
    vigil_code rc = next_position(t, to, &pos, err);
    if (rc || (rc = item_ids ? (json_array_extend(moved, (json_t *)item_ids), VIGIL_OK)
                             : open_items(t, from, moved, err)))
        return rc;
    size_t i;
    json_t *id;
    json_array_foreach (moved, i, id) {
        int mine = 0;
        if ((rc = item_of_task(t, json_string_value(id), from, &mine, err)))
            return rc;
        if (!mine)
            return todo_refuse(c, "unsafe_target",
                               "checklist item \"%s\" is not an item of task \"%s\"",
                               json_string_value(id), from);
        if ((rc = todo_exec(t,
                            "UPDATE checklist_items SET task_id = ?, position = ?, updated_ms = ?,"
                            " done = done * ? WHERE id = ?",
                            err, "siiis", to, pos + (int64_t)i, todo_now_ms(t),
                            (int64_t)(keep_done != 0), json_string_value(id))) ||
            (rc = todo_changed(c, json_string_value(id), "CHECKLIST", err)))
            return rc;
    }
    return VIGIL_OK;
}

/* A title's bytes: TODO_TEXT_MAX characters of at most 4 bytes each. */
#define TITLE_BYTES (TODO_TEXT_MAX * 4 + 1)

/* s cut to at most max_chars characters, and never in the middle of one (a title written before
 * titles had a limit may be cut by the buffer it was read into). */
static void cut_chars(char *s, size_t max_chars)
{
    size_t chars = 0, i = 0, lead = 0;
    for (; s[i]; i++)
        if (((unsigned char)s[i] & 0xc0) != 0x80) {
            if (chars++ == max_chars)
                break;
            lead = i;
        }
    s[i] = '\0';
    unsigned char b = (unsigned char)s[lead];
    size_t want = b < 0x80 ? 1 : b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
    if (i && i - lead < want)
        s[lead] = '\0';
}

static vigil_code task_title_status(struct vg_todo *t, const char *id, char title[TITLE_BYTES],
                                    char status[16], vigil_error *err)
{
    sqlite3_stmt *st = NULL;
    vigil_code rc =
        todo_prepare(t, "SELECT title, status FROM tasks WHERE id = ?", &st, err, "s", id);
    if (rc)
        return rc;
    title[0] = status[0] = '\0';
    if (sqlite3_step(st) == SQLITE_ROW) {
        snprintf(title, TITLE_BYTES, "%s", (const char *)sqlite3_column_text(st, 0));
        cut_chars(title, TODO_TEXT_MAX);
        snprintf(status, 16, "%s", (const char *)sqlite3_column_text(st, 1));
    }
    sqlite3_finalize(st);
    return VIGIL_OK;
}

/* Where a follow-up leaves its source (create_follow_up_task's close_source_as): the source's
 * open items moved to the follow-up (carry_over_open_items) and the source closed with the
 * status given. Either needs an open source: a closed task takes no more changes from them. */
static vigil_code hand_on_source(struct vg_todo *t, const char *from, const char *next,
                                 const char *close_as, int carry, json_t *moved,
                                 struct todo_change *c, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    if (carry && (rc = move_items(t, from, next, NULL, 1, moved, c, err)))
        return rc;
    if (close_as &&
        (rc = todo_exec(t, "UPDATE tasks SET status = ? WHERE id = ?", err, "ss", close_as, from)))
        return rc;
    return touch_task(t, from, c, err);
}

static vigil_code op_create_follow_up_task(struct vg_todo *t, const json_t *args,
                                           struct todo_change *c, vigil_error *err)
{
    char category[128], id[64], title_now[TITLE_BYTES], status[16];
    const char *from = str_arg(args, "task_id"), *title = str_arg(args, "title");
    const char *close_as = str_arg(args, "close_source_as");
    int carry = json_is_true(json_object_get(args, "carry_over_open_items"));
    json_t *moved = NULL;
    vigil_code rc = need_task(t, args, "task_id", c, category, err);
    if (rc || c->code[0] || check_task_fields(args, c))
        return rc;
    if (!title || too_long(title))
        return todo_refuse(c, "invalid_arguments",
                           "title must be a non-empty string of at most %d characters",
                           TODO_TEXT_MAX);
    if (close_as && strcmp(close_as, "done") && strcmp(close_as, "cancelled"))
        return todo_refuse(c, "invalid_arguments", "close_source_as must be done or cancelled");
    if ((rc = task_title_status(t, from, title_now, status, err)))
        return rc;
    if ((carry || close_as) && strcmp(status, "open"))
        return todo_refuse(c, "unsafe_target", "task \"%s\" is %s: its items stay and it stays %s",
                           from, status, status);
    /* The follow-up takes the category of its task, never one the caller names. */
    if ((rc = todo_insert_task(t, category, title, args, from, id, err)) ||
        (rc = todo_changed(c, id, "TASK", err)))
        return rc;
    if (!(moved = json_array()))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    if (!(rc = hand_on_source(t, from, id, close_as, carry, moved, c, err)) &&
        !(c->result = json_pack("{s:s, s:s, s:s, s:s, s:O}", "task_id", id, "follow_up_of", from,
                                "category_id", category, "source_status",
                                close_as ? close_as : status, "moved_item_ids", moved)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    json_decref(moved);
    return rc;
}

static vigil_code op_conclude_task_with_rollover(struct vg_todo *t, const json_t *args,
                                                 struct todo_change *c, vigil_error *err)
{
    char category[128], title[TITLE_BYTES], status[16], next[64] = "", name[TITLE_BYTES + 16];
    const char *task = str_arg(args, "task_id"), *given = str_arg(args, "follow_up_title");
    json_t *moved = json_array();
    vigil_code rc = moved ? need_task(t, args, "task_id", c, category, err)
                          : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    if (rc || c->code[0] || (rc = task_title_status(t, task, title, status, err)))
        goto out;
    if (too_long(given)) {
        rc = todo_refuse(c, "invalid_arguments", "follow_up_title is at most %d characters",
                         TODO_TEXT_MAX);
        goto out;
    }
    if (strcmp(status, "open")) {
        rc = todo_refuse(c, "unsafe_target", "task \"%s\" is %s, not open", task, status);
        goto out;
    }
    if ((rc = todo_exec(t, "UPDATE tasks SET status = 'done' WHERE id = ?", err, "s", task)) ||
        (rc = touch_task(t, task, c, err)) || (rc = open_items(t, task, moved, err)))
        goto out;
    if (json_array_size(moved)) { /* the open items go to a follow-up in the same category */
        snprintf(name, sizeof name, "Follow-up: %s", title);
        cut_chars(name, TODO_TEXT_MAX);
        json_t *none = json_object();
        rc = todo_insert_task(t, category, given ? given : name, none, task, next, err);
        json_decref(none);
        json_array_clear(moved);
        if (rc || (rc = todo_changed(c, next, "TASK", err)) ||
            (rc = move_items(t, task, next, NULL, 1, moved, c, err)))
            goto out;
    }
    c->result = json_pack("{s:s, s:s, s:s?, s:O}", "task_id", task, "status", "done",
                          "follow_up_task_id", next[0] ? next : NULL, "moved_item_ids", moved);
    if (!c->result)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
out:
    json_decref(moved);
    return rc;
}

static vigil_code op_move_checklist_items(struct vg_todo *t, const json_t *args,
                                          struct todo_change *c, vigil_error *err)
{
    char from_cat[128], to_cat[128];
    const char *from = str_arg(args, "from_task_id"), *to = str_arg(args, "to_task_id");
    json_t *ids = json_object_get(args, "item_ids"), *moved = NULL;
    vigil_code rc = need_task(t, args, "from_task_id", c, from_cat, err);
    if (rc || c->code[0] || (rc = need_task(t, args, "to_task_id", c, to_cat, err)) || c->code[0])
        return rc;
    if (!json_array_size(ids))
        return todo_refuse(c, "invalid_arguments", "item_ids must be a non-empty array");
    if (!(moved = json_array()))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    json_t *keep = json_object_get(args, "preserve_done");
    if (!(rc = move_items(t, from, to, ids, !json_is_false(keep), moved, c, err)) && !c->code[0] &&
        !(rc = touch_task(t, from, c, err)) && !(rc = touch_task(t, to, c, err)) &&
        !(c->result = json_pack("{s:s, s:s, s:O}", "from_task_id", from, "to_task_id", to,
                                "moved_item_ids", moved)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    json_decref(moved);
    return rc;
}

#define TARGET(args) "\"scope\":{\"rule\":\"target\",\"arguments\":[" args "]}"
#define CHANGES(keys) "\"side_effects\":{\"entity_types\":[\"task\"],\"tokens\":[" keys "]}"
/* Each tool needs one capability of the seed's profile (S0-055), which an agent's manifest
 * grants (capabilities: [taskRead, ...]): categoryRead, taskRead, taskWrite, checklistWrite,
 * timeWrite, dayPlanRead, dayPlanWrite, ratingRead, ratingWrite. */
#define CAP(name) "\"capabilities\":[\"" name "\"],"
#define WRITE(cap, args, keys)                                                                     \
    "{" CAP(cap) "\"risk\":\"low\",\"idempotency\":\"idempotent\"," TARGET(args) "," CHANGES(      \
        keys) "}"
#define READ(cap, rule)                                                                            \
    "{" CAP(cap) "\"risk\":\"low\",\"mutating\":false,\"idempotency\":\"idempotent\","             \
                 "\"scope\":" rule "}"
#define BY_CATEGORY "{\"rule\":\"argument\",\"arguments\":[\"category_id\"]}"
#define BY_TASK "{\"rule\":\"target\",\"arguments\":[\"task_id\"]}"
#define S_TASK "\"task_id\":{\"type\":\"string\",\"minLength\":1}"
#define S_EST "\"estimate_minutes\":{\"type\":\"integer\",\"minimum\":0}"
#define S_DUE                                                                                      \
    "\"due_date\":{\"type\":[\"string\",\"null\"],\"pattern\":\"^[0-9]{4}-[0-9]{2}-[0-9]{2}$\"}"
#define S_PRIO                                                                                     \
    "\"priority\":{\"type\":\"string\",\"enum\":[\"low\",\"normal\",\"high\",\"urgent\"]}"
#define SCHEMA(props, req)                                                                         \
    "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{" props                   \
    "},\"required\":[" req "]}"

const struct todo_op todo_ops[] = {
    {"set_task_title", op_set_task_title, "Rename a task.",
     SCHEMA(S_TASK ",\"title\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":500}",
            "\"task_id\",\"title\""),
     WRITE("taskWrite", "\"task_id\"", "\"TASK\""), 1},
    {"update_task_estimate", op_update_task_estimate, "Set a task's estimate, in minutes.",
     SCHEMA(S_TASK "," S_EST, "\"task_id\",\"estimate_minutes\""),
     WRITE("taskWrite", "\"task_id\"", "\"TASK\""), 1},
    {"update_task_due_date", op_update_task_due_date,
     "Set a task's due date (YYYY-MM-DD), or clear it with null.",
     SCHEMA(S_TASK "," S_DUE, "\"task_id\",\"due_date\""),
     WRITE("taskWrite", "\"task_id\"", "\"TASK\""), 1},
    {"update_task_priority", op_update_task_priority,
     "Set a task's priority: low, normal, high or urgent.",
     SCHEMA(S_TASK "," S_PRIO, "\"task_id\",\"priority\""),
     WRITE("taskWrite", "\"task_id\"", "\"TASK\""), 1},
    {"add_multiple_checklist_items", op_add_checklist_items,
     "Append items to a task's checklist; answers their ids.",
     SCHEMA(S_TASK ",\"items\":{\"type\":\"array\",\"minItems\":1,\"maxItems\":50,\"items\":"
                   "{\"type\":\"string\",\"minLength\":1,\"maxLength\":500}}",
            "\"task_id\",\"items\""),
     WRITE("checklistWrite", "\"task_id\"", "\"TASK\",\"CHECKLIST\""), 1},
    {"update_checklist_items", op_update_checklist_items,
     "Change the text or the done mark of items of a task's checklist.",
     SCHEMA(S_TASK ",\"items\":{\"type\":\"array\",\"minItems\":1,\"maxItems\":50,\"items\":{"
                   "\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"id\"],"
                   "\"properties\":{\"id\":{\"type\":\"string\"},\"text\":{\"type\":\"string\","
                   "\"minLength\":1,\"maxLength\":500},\"done\":{\"type\":\"boolean\"}}}}",
            "\"task_id\",\"items\""),
     WRITE("checklistWrite", "\"task_id\"", "\"TASK\",\"CHECKLIST\""), 1},
    {"create_follow_up_task", op_create_follow_up_task,
     "Create a follow-up of a task, in the task's category; carry_over_open_items moves the "
     "task's open checklist items to it, close_source_as (done or cancelled) closes the task.",
     SCHEMA(S_TASK ",\"title\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":500}," S_EST
                   "," S_DUE "," S_PRIO ",\"carry_over_open_items\":{\"type\":\"boolean\","
                   "\"default\":false},\"close_source_as\":{\"type\":\"string\",\"enum\":"
                   "[\"done\",\"cancelled\"]}",
            "\"task_id\",\"title\""),
     WRITE("taskWrite", "\"task_id\"", "\"TASK\",\"CHECKLIST\""), 0},
    {"conclude_task_with_rollover", op_conclude_task_with_rollover,
     "Mark an open task done; its open checklist items move to a new follow-up task.",
     SCHEMA(S_TASK ",\"follow_up_title\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":500}",
            "\"task_id\""),
     WRITE("taskWrite", "\"task_id\"", "\"TASK\",\"CHECKLIST\""), 0},
    {"move_checklist_items", op_move_checklist_items,
     "Move checklist items from one task's checklist to another's; they keep their done mark "
     "unless preserve_done is false (then they arrive unchecked).",
     SCHEMA("\"from_task_id\":{\"type\":\"string\"},\"to_task_id\":{\"type\":\"string\"},"
            "\"item_ids\":{\"type\":\"array\",\"minItems\":1,\"items\":{\"type\":\"string\"}},"
            "\"preserve_done\":{\"type\":\"boolean\",\"default\":true}",
            "\"from_task_id\",\"to_task_id\",\"item_ids\""),
     WRITE("checklistWrite", "\"from_task_id\",\"to_task_id\"", "\"TASK\",\"CHECKLIST\""), 1},
    {"create_retrospective_time_entry", todo_op_create_retrospective_time_entry,
     "Log a work session on a task that has ended: when it started and ended (RFC 3339 with a "
     "UTC offset; or started_at and minutes), a note describing it, and optionally the id of "
     "the host record it was logged from (source_entry_id, e.g. a voice note).",
     SCHEMA(S_TASK ",\"started_at\":{\"type\":\"string\"},\"ended_at\":{\"type\":\"string\"},"
                   "\"minutes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1440},"
                   "\"note\":{\"type\":\"string\",\"maxLength\":2000},\"source_entry_id\":"
                   "{\"type\":\"string\",\"minLength\":1,\"maxLength\":200}",
            "\"task_id\",\"started_at\""),
     WRITE("timeWrite", "\"task_id\"", "\"TASK\",\"TIME_ENTRY\""), 1},
    {"resolve_task_reference", todo_op_resolve_task_reference,
     "Find the tasks of a category a text refers to (an id or words of a title), ranked; "
     "\"ambiguous\" when the best candidates tie.",
     SCHEMA("\"category_id\":{\"type\":\"string\"},\"reference\":{\"type\":\"string\","
            "\"minLength\":1}",
            "\"category_id\",\"reference\""),
     READ("categoryRead", BY_CATEGORY), 0},
    {"list_tasks_in_scope", todo_op_list_tasks_in_scope,
     "List the tasks of a category (open ones unless status says otherwise).",
     SCHEMA("\"category_id\":{\"type\":\"string\"},\"status\":{\"type\":\"string\",\"enum\":"
            "[\"open\",\"done\",\"cancelled\",\"all\"],\"default\":\"open\"}",
            "\"category_id\""),
     READ("categoryRead", BY_CATEGORY), 0},
    {"get_task", todo_op_get_task,
     "Read a task in full: its fields, checklist items, time entries and follow-ups.",
     SCHEMA(S_TASK, "\"task_id\""), READ("taskRead", BY_TASK), 0},
    {"upsert_day_plan_blocks", todo_op_upsert_day_plan_blocks,
     "Plan a day for a category in one atomic call: delete the blocks named in "
     "delete_block_ids, then upsert blocks, each {block_id?, start, end (HH:MM), task_id?, "
     "label?}: with block_id it rewrites that block, without it replaces the block that starts at "
     "the same time; answers the day's blocks.",
     SCHEMA("\"category_id\":{\"type\":\"string\"},\"day\":{\"type\":\"string\","
            "\"pattern\":\"^[0-9]{4}-[0-9]{2}-[0-9]{2}$\"},\"blocks\":{\"type\":\"array\","
            "\"maxItems\":48,\"items\":{\"type\":\"object\","
            "\"additionalProperties\":false,\"required\":[\"start\",\"end\"],\"properties\":{"
            "\"block_id\":{\"type\":\"string\"},"
            "\"start\":{\"type\":\"string\"},\"end\":{\"type\":\"string\"},"
            "\"task_id\":{\"type\":\"string\"},\"label\":{\"type\":\"string\"}}}},"
            "\"delete_block_ids\":{\"type\":\"array\",\"maxItems\":48,\"items\":"
            "{\"type\":\"string\"}}",
            "\"category_id\",\"day\""),
     "{" CAP(
         "dayPlanWrite") "\"risk\":\"low\",\"idempotency\":\"idempotent\",\"scope\":" BY_CATEGORY
                         ",\"side_effects\":{\"entity_types\":[\"day_plan\"],\"tokens\":[\"DAY_"
                         "PLAN\"]}}",
     0},
    {"get_ratings_summary", todo_op_get_ratings_summary,
     "The ratings of a category's tasks: how many, the average, and per rated task its average "
     "and last note, lowest average first.",
     SCHEMA("\"category_id\":{\"type\":\"string\"}", "\"category_id\""),
     READ("ratingRead", BY_CATEGORY), 0},
    {"get_day_plan", todo_op_get_day_plan,
     "The blocks of a day's plan of a category, by start time.",
     SCHEMA("\"category_id\":{\"type\":\"string\"},\"day\":{\"type\":\"string\","
            "\"pattern\":\"^[0-9]{4}-[0-9]{2}-[0-9]{2}$\"}",
            "\"category_id\",\"day\""),
     READ("dayPlanRead", BY_CATEGORY), 0},
    {"rate_task", todo_op_rate_task, "Rate a task: a score of 1 to 5 and an optional note.",
     SCHEMA(S_TASK ",\"score\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":5},"
                   "\"note\":{\"type\":\"string\",\"maxLength\":2000}",
            "\"task_id\",\"score\""),
     WRITE("ratingWrite", "\"task_id\"", "\"TASK\",\"RATING\""), 0},
    {"create_category", op_create_category, NULL, NULL, NULL, 0},
    {"create_task", op_create_task, NULL, NULL, NULL, 0},
    {"delete_task", op_delete_task, NULL, NULL, NULL, 0},
    {"restore_task", op_restore_task, NULL, NULL, NULL, 0},
    {NULL, NULL, NULL, NULL, NULL, 0},
};

const struct todo_op *todo_op_find(const char *name)
{
    for (const struct todo_op *o = todo_ops; name && o->name; o++)
        if (!strcmp(o->name, name))
            return o;
    return NULL;
}
