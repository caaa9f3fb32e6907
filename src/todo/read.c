/*
 * read.c: the task domain's reads (list a category's tasks, resolve a reference to ranked
 * candidates, read one task in full) and its time entries.
 */
#include "todo/todo_int.h"

#include "base/json.h"
#include "os/clock.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One task row (id, title, status, priority, estimate, due, follow_up_of) as an object. */
static json_t *task_row(sqlite3_stmt *st)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "task_id", sqlite3_column_text(st, 0), "title",
                          sqlite3_column_text(st, 1), "status", sqlite3_column_text(st, 2),
                          "priority", sqlite3_column_text(st, 3));
    if (!o)
        return NULL;
    json_object_set_new(o, "estimate_minutes",
                        sqlite3_column_type(st, 4) == SQLITE_NULL
                            ? json_null()
                            : json_integer(sqlite3_column_int64(st, 4)));
    json_object_set_new(o, "due_date",
                        sqlite3_column_type(st, 5) == SQLITE_NULL
                            ? json_null()
                            : json_string((const char *)sqlite3_column_text(st, 5)));
    json_object_set_new(o, "follow_up_of",
                        sqlite3_column_type(st, 6) == SQLITE_NULL
                            ? json_null()
                            : json_string((const char *)sqlite3_column_text(st, 6)));
    return o;
}

#define TASK_COLUMNS "id, title, status, priority, estimate_minutes, due_date, follow_up_of"

/* Every row of st (task rows) appended to out. */
static vigil_code task_rows(sqlite3_stmt *st, json_t *out, vigil_error *err)
{
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW)
        if (json_array_append_new(out, task_row(st)))
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing tasks");
    return step == SQLITE_DONE ? VIGIL_OK
                               : VG_FAIL(err, VIGIL_ESTORE, "task database: reading tasks failed");
}

/* Whether category id is there (into *yes). */
static vigil_code category_exists(struct vg_todo *t, const char *id, int *yes, vigil_error *err)
{
    sqlite3_stmt *st = NULL;
    vigil_code rc = todo_prepare(t, "SELECT 1 FROM categories WHERE id = ?", &st, err, "s", id);
    *yes = !rc && sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return rc;
}

vigil_code todo_op_list_tasks_in_scope(struct vg_todo *t, const json_t *args, struct todo_change *c,
                                       vigil_error *err)
{
    const char *cat = json_string_value(json_object_get(args, "category_id"));
    const char *status = json_string_value(json_object_get(args, "status"));
    sqlite3_stmt *st = NULL;
    int known = 0;
    vigil_code rc = category_exists(t, cat ? cat : "", &known, err);
    if (rc)
        return rc;
    /* A category that is not there is said so: a misspelled one would read as an empty list. */
    if (!known)
        return todo_refuse_missing(c, "no category \"%s\"", cat ? cat : "");
    json_t *tasks = json_array();
    if (!tasks)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    status = status ? status : "open";
    rc = todo_prepare(t,
                      "SELECT " TASK_COLUMNS " FROM tasks WHERE category_id = ?"
                      " AND deleted_ms IS NULL AND (? = 'all' OR status = ?)"
                      " ORDER BY created_ms, id",
                      &st, err, "sss", cat, status, status);
    if (!rc)
        rc = task_rows(st, tasks, err);
    sqlite3_finalize(st);
    if (!rc && !(c->result = json_pack("{s:s?, s:O}", "category_id", cat, "tasks", tasks)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    json_decref(tasks);
    return rc;
}

/* How well title matches reference: 90 equal (case aside), 70 a prefix, 50 contained, 0. */
static int title_score(const char *title, const char *ref)
{
    size_t n = strlen(ref);
    if (!strcasecmp(title, ref))
        return 90;
    if (!strncasecmp(title, ref, n))
        return 70;
    for (const char *p = title; *p; p++)
        if (!strncasecmp(p, ref, n))
            return 50;
    return 0;
}

/* How many candidates a resolution answers. */
#define TOP_CANDIDATES 5

/* Put a candidate into the ranked top (best first; among equals, the one met first stays
 * ahead), dropping what falls off its end. cand is taken (owned). */
static void keep_top(json_t *top[], int score[], size_t *n, json_t *cand, int s)
{
    size_t p = 0;
    while (p < *n && score[p] >= s)
        p++;
    if (p == TOP_CANDIDATES) {
        json_decref(cand);
        return;
    }
    if (*n == TOP_CANDIDATES)
        json_decref(top[--*n]);
    memmove(top + p + 1, top + p, (*n - p) * sizeof *top);
    memmove(score + p + 1, score + p, (*n - p) * sizeof *score);
    top[p] = cand, score[p] = s, ++*n;
}

/* The best candidates of one category, best first, every task of it considered. */
static vigil_code rank(struct vg_todo *t, const char *cat, const char *ref, json_t *out,
                       vigil_error *err)
{
    sqlite3_stmt *st = NULL;
    json_t *top[TOP_CANDIDATES];
    int score[TOP_CANDIDATES];
    size_t n = 0;
    vigil_code rc = todo_prepare(t,
                                 "SELECT id, title, status FROM tasks WHERE category_id = ?"
                                 " AND deleted_ms IS NULL ORDER BY created_ms, id",
                                 &st, err, "s", cat);
    if (rc)
        return rc;
    while (!rc && sqlite3_step(st) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(st, 0);
        int s = !strcmp(id, ref) ? 100 : title_score((const char *)sqlite3_column_text(st, 1), ref);
        json_t *cand = s ? json_pack("{s:s, s:s, s:s, s:i}", "task_id", id, "title",
                                     sqlite3_column_text(st, 1), "status",
                                     sqlite3_column_text(st, 2), "score", s)
                         : NULL;
        if (s && !cand)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
        else if (cand)
            keep_top(top, score, &n, cand, s);
    }
    sqlite3_finalize(st);
    for (size_t i = 0; i < n; i++)
        if (json_array_append_new(out, top[i]) && !rc)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    return rc;
}

vigil_code todo_op_resolve_task_reference(struct vg_todo *t, const json_t *args,
                                          struct todo_change *c, vigil_error *err)
{
    const char *cat = json_string_value(json_object_get(args, "category_id"));
    const char *ref = json_string_value(json_object_get(args, "reference"));
    json_t *cands = json_array();
    vigil_code rc;
    if (!cands)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    if (!cat || !ref || !*ref) {
        json_decref(cands);
        return todo_refuse(c, "invalid_arguments", "category_id and reference are required");
    }
    rc = rank(t, cat, ref, cands, err);
    json_t *a = json_array_get(cands, 0), *b = json_array_get(cands, 1);
    /* Ambiguous: the best two tie. A caller must not write to a target picked from a tie. */
    int tie = a && b && json_equal(json_object_get(a, "score"), json_object_get(b, "score"));
    if (!rc && !(c->result = json_pack(
                     "{s:O, s:b, s:s?}", "candidates", cands, "ambiguous", tie, "task_id",
                     a && !tie ? json_string_value(json_object_get(a, "task_id")) : NULL)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    json_decref(cands);
    return rc;
}

/* The rows of one query on task_id as objects named by cols (text, or 'i' integer columns). */
static json_t *rows_of(struct vg_todo *t, const char *sql, const char *task_id,
                       const char *const *cols, const char *kinds, vigil_error *err)
{
    sqlite3_stmt *st = NULL;
    json_t *out = json_array();
    if (!out || todo_prepare(t, sql, &st, err, "s", task_id)) {
        json_decref(out);
        return NULL;
    }
    while (sqlite3_step(st) == SQLITE_ROW) {
        json_t *o = json_object();
        for (int i = 0; o && cols[i]; i++)
            json_object_set_new(o, cols[i],
                                sqlite3_column_type(st, i) == SQLITE_NULL ? json_null()
                                : kinds[i] == 'i' ? json_integer(sqlite3_column_int64(st, i))
                                : kinds[i] == 'b'
                                    ? json_boolean(sqlite3_column_int(st, i))
                                    : json_string((const char *)sqlite3_column_text(st, i)));
        json_array_append_new(out, o);
    }
    sqlite3_finalize(st);
    return out;
}

/* Time entries by the instant they started: their texts keep the offsets they were written in,
 * so "T04:00+05:00" is before "T19:00-05:00" of the day before; the text, then the id, break
 * ties. */
static int entry_start_cmp(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    const char *sx = json_string_value(json_object_get(x, "started_at"));
    const char *sy = json_string_value(json_object_get(y, "started_at"));
    int64_t mx = 0, my = 0;
    vg_time_parse_ms(sx, &mx);
    vg_time_parse_ms(sy, &my);
    if (mx != my)
        return mx < my ? -1 : 1;
    int c = strcmp(sx ? sx : "", sy ? sy : "");
    return c ? c
             : strcmp(json_string_value(json_object_get(x, "id")),
                      json_string_value(json_object_get(y, "id")));
}

static vigil_code read_task(struct vg_todo *t, const char *id, json_t **out, vigil_error *err)
{
    static const char *const item_cols[] = {"id", "text", "done", NULL};
    static const char *const time_cols[] = {"id",   "started_at",      "ended_at", "minutes",
                                            "note", "source_entry_id", NULL};
    static const char *const next_cols[] = {"task_id", "title", "status", NULL};
    sqlite3_stmt *st = NULL;
    vigil_code rc = todo_prepare(t,
                                 "SELECT " TASK_COLUMNS ", category_id FROM tasks WHERE id = ?"
                                 " AND deleted_ms IS NULL",
                                 &st, err, "s", id);
    *out = NULL;
    if (rc)
        return rc;
    if (sqlite3_step(st) == SQLITE_ROW && (*out = task_row(st)))
        json_object_set_new(*out, "category_id",
                            json_string((const char *)sqlite3_column_text(st, 7)));
    sqlite3_finalize(st);
    if (!*out)
        return VIGIL_OK;
    json_object_set_new(*out, "checklist",
                        rows_of(t,
                                "SELECT id, text, done FROM checklist_items WHERE task_id = ?"
                                " ORDER BY position",
                                id, item_cols, "ssb", err));
    json_t *entries = rows_of(t,
                              "SELECT id, started_at, ended_at, minutes, note,"
                              " source_entry_id FROM time_entries WHERE task_id = ?",
                              id, time_cols, "sssiss", err);
    if (entries)
        vg_json_array_sort(entries, entry_start_cmp); /* out of memory: as stored, still whole */
    json_object_set_new(*out, "time_entries", entries);
    json_object_set_new(*out, "follow_ups",
                        rows_of(t,
                                "SELECT id, title, status FROM tasks WHERE follow_up_of = ?"
                                " AND deleted_ms IS NULL ORDER BY created_ms",
                                id, next_cols, "sss", err));
    return VIGIL_OK;
}

vigil_code todo_op_get_task(struct vg_todo *t, const json_t *args, struct todo_change *c,
                            vigil_error *err)
{
    const char *id = json_string_value(json_object_get(args, "task_id"));
    vigil_code rc = read_task(t, id ? id : "", &c->result, err);
    if (!rc && !c->result)
        return todo_refuse_missing(c, "no task \"%s\"", id ? id : "");
    return rc;
}

/* end_ms written in the UTC offset of started (RFC 3339, "Z" or "+hh:mm"), as a person would
 * read it beside started: 2026-02-17T16:00:00-05:00 and 60 minutes end 2026-02-17T17:00:00-05:00.
 */
static void format_in_offset(char out[40], int64_t end_ms, const char *started)
{
    size_t n = strlen(started);
    const char *zone =
        n > 6 && (started[n - 6] == '+' || started[n - 6] == '-') ? started + n - 6 : "Z";
    int off_min = 0;
    if (*zone != 'Z')
        off_min = (int)(strtol(zone + 1, NULL, 10) * 60 + strtol(zone + 4, NULL, 10)) *
                  (*zone == '-' ? -1 : 1);
    time_t secs = (time_t)(end_ms / 1000) + (time_t)off_min * 60;
    struct tm tm;
    gmtime_r(&secs, &tm);
    snprintf(out, 40, "%04d-%02d-%02dT%02d:%02d:%02d%s", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, zone);
}

/* A session's span from args: started_at, and ended_at or minutes (both: they must agree), into
 * *minutes and ended (as written, or made in started_at's offset). 0, or a refusal in c. */
static int session_span(const json_t *args, json_int_t *minutes, char ended[40],
                        struct todo_change *c)
{
    const char *at = json_string_value(json_object_get(args, "started_at"));
    const char *end = json_string_value(json_object_get(args, "ended_at"));
    json_t *given = json_object_get(args, "minutes");
    int64_t start = 0, stop = 0;
    if (!at || vg_time_parse_ms(at, &start) || (end && vg_time_parse_ms(end, &stop)))
        return todo_refuse(c, "invalid_arguments",
                           "started_at and ended_at are RFC 3339 times with a UTC offset"),
               1;
    if (!end && !given)
        return todo_refuse(c, "invalid_arguments", "a session needs ended_at or minutes"), 1;
    if (end && (stop <= start || (stop - start) % 60000))
        return todo_refuse(c, "invalid_arguments",
                           "ended_at must be whole minutes after started_at"),
               1;
    *minutes = end ? (json_int_t)((stop - start) / 60000) : json_integer_value(given);
    if (end && given && json_integer_value(given) != *minutes)
        return todo_refuse(c, "invalid_arguments", "minutes and ended_at disagree"), 1;
    if (*minutes < 1 || *minutes > 1440)
        return todo_refuse(c, "invalid_arguments", "a session lasts 1 to 1440 minutes"), 1;
    if (end)
        snprintf(ended, 40, "%s", end);
    else
        format_in_offset(ended, start + (int64_t)*minutes * 60000, at);
    return 0;
}

vigil_code todo_op_create_retrospective_time_entry(struct vg_todo *t, const json_t *args,
                                                   struct todo_change *c, vigil_error *err)
{
    const char *task = json_string_value(json_object_get(args, "task_id"));
    const char *at = json_string_value(json_object_get(args, "started_at"));
    const char *note = json_string_value(json_object_get(args, "note"));
    const char *source = json_string_value(json_object_get(args, "source_entry_id"));
    json_int_t minutes = 0;
    char category[128], id[64], ended[40];
    int found = 0;
    int64_t start = 0;
    vigil_code rc = todo_task_category(t, task ? task : "", category, sizeof category, &found, err);
    if (rc)
        return rc;
    if (!found)
        return todo_refuse_missing(c, "no task \"%s\"", task ? task : "");
    if (session_span(args, &minutes, ended, c))
        return VIGIL_OK;
    vg_time_parse_ms(at, &start);
    /* Retrospective: the session has ended by now; a future one is a plan, not a log. */
    if (start + (int64_t)minutes * 60000 > todo_now_ms(t))
        return todo_refuse(c, "invalid_arguments", "the session ends after now: log it once done");
    todo_new_id(t, "time", id);
    if ((rc = todo_exec(t,
                        "INSERT INTO time_entries(id, task_id, started_at, ended_at, minutes,"
                        " note, source_entry_id, created_ms) VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
                        err, "ssssissi", id, task, at, ended, (int64_t)minutes, note ? note : "",
                        source && *source ? source : NULL, todo_now_ms(t))) ||
        (rc = todo_changed(c, id, "TIME_ENTRY", err)) || (rc = todo_changed(c, task, "TASK", err)))
        return rc;
    c->result = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s?}", "time_entry_id", id, "task_id", task,
                          "started_at", at, "ended_at", ended, "minutes", (json_int_t)minutes,
                          "source_entry_id", source && *source ? source : NULL);
    return c->result ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
}
