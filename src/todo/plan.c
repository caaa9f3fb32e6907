/*
 * plan.c: day plans (blocks of a day, per category) and ratings of tasks: the person rates a
 * task, an agent reads the ratings summary and plans blocks of a day.
 */
#include "todo/todo_int.h"

/* "HH:MM" on a 24-hour clock. */
static int valid_time(const char *s)
{
    int h, m;
    char tail;
    return s && strlen(s) == 5 && sscanf(s, "%2d:%2d%c", &h, &m, &tail) == 2 && h >= 0 && h <= 23 &&
           m >= 0 && m <= 59 && s[2] == ':';
}

/* The day's blocks of a category, by start time (owned array). */
static json_t *day_blocks(struct vg_todo *t, const char *day, const char *cat, vigil_error *err)
{
    sqlite3_stmt *st = NULL;
    json_t *out = json_array();
    if (!out || todo_prepare(t,
                             "SELECT id, start_time, end_time, task_id, label FROM day_plan_blocks"
                             " WHERE day = ? AND category_id = ? ORDER BY start_time",
                             &st, err, "ss", day, cat)) {
        json_decref(out);
        return NULL;
    }
    while (sqlite3_step(st) == SQLITE_ROW)
        json_array_append_new(
            out,
            json_pack("{s:s, s:s, s:s, s:s?, s:s}", "block_id", sqlite3_column_text(st, 0), "start",
                      sqlite3_column_text(st, 1), "end", sqlite3_column_text(st, 2), "task_id",
                      sqlite3_column_text(st, 3), "label", sqlite3_column_text(st, 4)));
    sqlite3_finalize(st);
    return out;
}

/* A block named by its id (it must be of the day's plan of cat) takes b's times, task and
 * label; a block of the plan that starts at b's new start gives way, as an upsert replaces it. */
static vigil_code rewrite_block(struct vg_todo *t, const char *day, const char *cat,
                                const char *block_id, const json_t *b, struct todo_change *c,
                                vigil_error *err)
{
    const char *start = json_string_value(json_object_get(b, "start"));
    const char *label = json_string_value(json_object_get(b, "label"));
    sqlite3_stmt *st = NULL;
    vigil_code rc = todo_prepare(
        t, "SELECT 1 FROM day_plan_blocks WHERE id = ? AND day = ? AND category_id = ?", &st, err,
        "sss", block_id, day, cat);
    if (rc)
        return rc;
    int mine = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    if (!mine)
        return todo_refuse(c, "unsafe_target", "block \"%s\" is not a block of the %s plan of %s",
                           block_id, cat, day);
    if ((rc = todo_exec(t,
                        "DELETE FROM day_plan_blocks WHERE day = ? AND category_id = ?"
                        " AND start_time = ? AND id != ?",
                        err, "ssss", day, cat, start, block_id)) ||
        (rc = todo_exec(t,
                        "UPDATE day_plan_blocks SET start_time = ?, end_time = ?, task_id = ?,"
                        " label = ? WHERE id = ?",
                        err, "sssss", start, json_string_value(json_object_get(b, "end")),
                        json_string_value(json_object_get(b, "task_id")), label ? label : "",
                        block_id)))
        return rc;
    return todo_changed(c, block_id, "DAY_PLAN", err);
}

/* One block: checked (its task must be of the plan's category), then written over the block of
 * the same start, if any. */
static vigil_code upsert_block(struct vg_todo *t, const char *day, const char *cat, json_t *b,
                               size_t i, struct todo_change *c, vigil_error *err)
{
    const char *start = json_string_value(json_object_get(b, "start"));
    const char *end = json_string_value(json_object_get(b, "end"));
    const char *task = json_string_value(json_object_get(b, "task_id"));
    const char *label = json_string_value(json_object_get(b, "label"));
    const char *block_id = json_string_value(json_object_get(b, "block_id"));
    char task_cat[128], id[64];
    int found = 0;
    vigil_code rc;
    if (!valid_time(start) || !valid_time(end) || strcmp(start, end) >= 0)
        return todo_refuse(c, "invalid_arguments",
                           "blocks[%zu]: start and end are HH:MM, start first", i);
    if (task) {
        if ((rc = todo_task_category(t, task, task_cat, sizeof task_cat, &found, err)))
            return rc;
        if (!found || strcmp(task_cat, cat))
            return todo_refuse(c, "unsafe_target",
                               "blocks[%zu]: task \"%s\" is not a task of \"%s\"", i, task, cat);
    }
    if (block_id)
        return rewrite_block(t, day, cat, block_id, b, c, err);
    todo_new_id(t, "block", id);
    if ((rc = todo_exec(t,
                        "INSERT INTO day_plan_blocks(id, day, category_id, start_time, end_time,"
                        " task_id, label) VALUES(?, ?, ?, ?, ?, ?, ?)"
                        " ON CONFLICT(day, category_id, start_time) DO UPDATE SET"
                        " end_time = excluded.end_time, task_id = excluded.task_id,"
                        " label = excluded.label",
                        err, "sssssss", id, day, cat, start, end, task, label ? label : "")))
        return rc;
    sqlite3_stmt *st = NULL;
    if ((rc = todo_prepare(t,
                           "SELECT id FROM day_plan_blocks WHERE day = ? AND category_id = ?"
                           " AND start_time = ?",
                           &st, err, "sss", day, cat, start)))
        return rc;
    if (sqlite3_step(st) == SQLITE_ROW)
        rc = todo_changed(c, (const char *)sqlite3_column_text(st, 0), "DAY_PLAN", err);
    sqlite3_finalize(st);
    return rc;
}

/* Delete the blocks named by ids (each must be of the day's plan of cat). */
static vigil_code delete_blocks(struct vg_todo *t, const char *day, const char *cat,
                                const json_t *ids, struct todo_change *c, vigil_error *err)
{
    size_t i;
    json_t *id;
    vigil_code rc;
    json_array_foreach (ids, i, id) {
        if ((rc = todo_exec(t,
                            "DELETE FROM day_plan_blocks WHERE id = ? AND day = ?"
                            " AND category_id = ?",
                            err, "sss", json_string_value(id), day, cat)))
            return rc;
        if (!sqlite3_changes(t->db))
            return todo_refuse(c, "unsafe_target",
                               "delete_block_ids[%zu]: \"%s\" is not a block of the %s plan of %s",
                               i, json_string_value(id) ? json_string_value(id) : "", cat, day);
        if ((rc = todo_changed(c, json_string_value(id), "DAY_PLAN", err)))
            return rc;
    }
    return VIGIL_OK;
}

vigil_code todo_op_upsert_day_plan_blocks(struct vg_todo *t, const json_t *args,
                                          struct todo_change *c, vigil_error *err)
{
    const char *cat = json_string_value(json_object_get(args, "category_id"));
    const char *day = json_string_value(json_object_get(args, "day"));
    json_t *blocks = json_object_get(args, "blocks"), *b;
    json_t *deletes = json_object_get(args, "delete_block_ids");
    size_t i;
    vigil_code rc;
    if (!cat || !todo_valid_date(day) || (!json_array_size(blocks) && !json_array_size(deletes)))
        return todo_refuse(c, "invalid_arguments",
                           "category_id, day (YYYY-MM-DD) and blocks or delete_block_ids are "
                           "required");
    /* The deletions first, so a block may take the start of one deleted in the same call; a
     * refusal of either rolls the whole call back. */
    if ((rc = delete_blocks(t, day, cat, deletes, c, err)) || c->code[0])
        return rc;
    json_array_foreach (blocks, i, b)
        if ((rc = upsert_block(t, day, cat, b, i, c, err)) || c->code[0])
            return rc;
    json_t *all = day_blocks(t, day, cat, err);
    if (!all)
        return err->code ? err->code : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    c->result = json_pack("{s:s, s:s, s:o}", "category_id", cat, "day", day, "blocks", all);
    return c->result ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
}

vigil_code todo_op_get_day_plan(struct vg_todo *t, const json_t *args, struct todo_change *c,
                                vigil_error *err)
{
    const char *cat = json_string_value(json_object_get(args, "category_id"));
    const char *day = json_string_value(json_object_get(args, "day"));
    if (!cat || !todo_valid_date(day))
        return todo_refuse(c, "invalid_arguments", "category_id and day (YYYY-MM-DD) are required");
    json_t *all = day_blocks(t, day, cat, err);
    if (!all)
        return err->code ? err->code : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    c->result = json_pack("{s:s, s:s, s:o}", "category_id", cat, "day", day, "blocks", all);
    return c->result ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
}

vigil_code todo_op_rate_task(struct vg_todo *t, const json_t *args, struct todo_change *c,
                             vigil_error *err)
{
    const char *task = json_string_value(json_object_get(args, "task_id"));
    const char *note = json_string_value(json_object_get(args, "note"));
    json_int_t score = json_integer_value(json_object_get(args, "score"));
    char cat[128], id[64];
    int found = 0;
    vigil_code rc = todo_task_category(t, task ? task : "", cat, sizeof cat, &found, err);
    if (rc)
        return rc;
    if (!found)
        return todo_refuse_missing(c, "no task \"%s\"", task ? task : "");
    if (score < 1 || score > 5)
        return todo_refuse(c, "invalid_arguments", "a rating needs a score of 1 to 5");
    todo_new_id(t, "rating", id);
    if ((rc =
             todo_exec(t,
                       "INSERT INTO ratings(id, task_id, score, note, created_ms)"
                       " VALUES(?, ?, ?, ?, ?)",
                       err, "ssisi", id, task, (int64_t)score, note ? note : "", todo_now_ms(t))) ||
        (rc = todo_changed(c, id, "RATING", err)) || (rc = todo_changed(c, task, NULL, err)))
        return rc;
    c->result = json_pack("{s:s, s:s, s:I}", "rating_id", id, "task_id", task, "score", score);
    return c->result ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
}

vigil_code todo_op_get_ratings_summary(struct vg_todo *t, const json_t *args, struct todo_change *c,
                                       vigil_error *err)
{
    const char *cat = json_string_value(json_object_get(args, "category_id"));
    sqlite3_stmt *st = NULL;
    json_t *tasks = json_array();
    int64_t n = 0, sum = 0;
    vigil_code rc = tasks ? todo_prepare(t,
                                         "SELECT t.id, t.title, t.status, COUNT(*), SUM(r.score),"
                                         " (SELECT note FROM ratings WHERE task_id = t.id"
                                         "  ORDER BY created_ms DESC, rowid DESC LIMIT 1)"
                                         " FROM ratings r JOIN tasks t ON t.id = r.task_id"
                                         " WHERE t.category_id = ? AND t.deleted_ms IS NULL"
                                         " GROUP BY t.id"
                                         " ORDER BY SUM(r.score) * 1.0 / COUNT(*), t.id",
                                         &st, err, "s", cat ? cat : "")
                          : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    if (rc) {
        json_decref(tasks);
        return rc;
    }
    while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t k = sqlite3_column_int64(st, 3), s = sqlite3_column_int64(st, 4);
        n += k, sum += s;
        json_array_append_new(tasks, json_pack("{s:s, s:s, s:s, s:I, s:f, s:s}", "task_id",
                                               sqlite3_column_text(st, 0), "title",
                                               sqlite3_column_text(st, 1), "status",
                                               sqlite3_column_text(st, 2), "ratings", (json_int_t)k,
                                               "average", (double)s / (double)k, "last_note",
                                               sqlite3_column_text(st, 5)));
    }
    sqlite3_finalize(st);
    /* Lowest average first: what most needs attention leads. */
    c->result = json_pack("{s:s?, s:I, s:o?, s:o}", "category_id", cat, "ratings", (json_int_t)n,
                          "average", n ? json_real((double)sum / (double)n) : NULL, "tasks", tasks);
    return c->result ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
}
