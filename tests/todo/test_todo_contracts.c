/*
 * test_todo_contracts.c: the task domain's tools do what their contracts (docs/todo.md) say,
 * called by an agent through the gate: a follow-up carries the open items and closes its source
 * when asked; a retrospective time entry keeps its start and end with their UTC offsets and
 * the host record it came from; moved checklist items keep their done mark unless told not
 * to; a day plan's deletions and upserts apply together or not at all; and no mutating tool
 * writes to anything but an explicit task id.
 */
#include "tool/tool_helpers.h"

#include "os/clock.h"
#include "todo/todo.h"

#include <jansson.h>
#include <sqlite3.h>
#include <string.h>
#include <time.h>

/* The nine capabilities of the domain's tools: an agent given them all may call every one. */
#define ALL_CAPABILITIES                                                                           \
    "[\"categoryRead\",\"taskRead\",\"taskWrite\",\"checklistWrite\",\"timeWrite\","               \
    "\"dayPlanRead\",\"dayPlanWrite\",\"ratingRead\",\"ratingWrite\"]"
#define CFG_WORK                                                                                   \
    "{\"tools\":[\"*\"],\"allowed_scopes\":[\"work\"],\"capabilities\":" ALL_CAPABILITIES "}"

/* A task database beside the test's store, with the test's clock. */
static struct vg_todo *open_todo(struct test_rt *t)
{
    char path[4300];
    struct vg_todo *todo = NULL;
    snprintf(path, sizeof path, "%s.tasks.db", t->path);
    ASSERT_OK(vg_todo_open(path, 1, &t->clock.base, NULL, &todo, E));
    return todo;
}

/* A person's operation (the reply, owned). */
static json_t *apply(struct vg_todo *todo, const char *op, json_t *args)
{
    json_t *reply = NULL;
    ASSERT(args);
    ASSERT_OK(vg_todo_apply(todo, op, NULL, args, &reply, E));
    json_decref(args);
    return reply;
}

static const char *field(const json_t *o, const char *name)
{
    return json_string_value(json_object_get(o, name));
}

/* A person's create_task in work (its id into id). */
static void add_task(struct vg_todo *todo, const char *title, char id[64])
{
    json_t *r =
        apply(todo, "create_task", json_pack("{s:s, s:s}", "category_id", "work", "title", title));
    snprintf(id, 64, "%s", field(json_object_get(r, "result"), "task_id"));
    json_decref(r);
}

/* get_task's result (owned). */
static json_t *task(struct vg_todo *todo, const char *id)
{
    json_t *r = apply(todo, "get_task", json_pack("{s:s}", "task_id", id));
    json_t *t = json_incref(json_object_get(r, "result"));
    json_decref(r);
    ASSERT(t);
    return t;
}

/* A runtime with the domain's tools, categories work and home, and an agent allowed work. */
static struct vg_todo *setup(struct test_rt *t, const char *name, char agent[37])
{
    test_rt_open(t, name);
    struct vg_todo *todo = open_todo(t);
    json_decref(apply(todo, "create_category", json_pack("{s:s}", "id", "work")));
    json_decref(apply(todo, "create_category", json_pack("{s:s}", "id", "home")));
    ASSERT_OK(vg_todo_register_tools(t->rt, todo, E));
    make_agent(t, CFG_WORK, agent);
    return todo;
}

/* An agent's call through the gate (args taken); the outcome in o, its code returned. */
static enum vg_tool_code gate(struct test_rt *t, const char *agent, const char *rk,
                              const char *tool, json_t *args, struct vg_tool_outcome *o)
{
    ASSERT(args);
    char *text = json_dumps(args, JSON_COMPACT);
    json_decref(args);
    call_tool(t, agent, rk, tool, text, o);
    free(text);
    return o->code;
}

/* Items added to a task by a person; their ids into ids[]. */
static void add_items(struct vg_todo *todo, const char *task_id, json_t *texts, char ids[][64])
{
    json_t *r = apply(todo, "add_multiple_checklist_items",
                      json_pack("{s:s, s:o}", "task_id", task_id, "items", texts));
    json_t *got = json_object_get(json_object_get(r, "result"), "item_ids"), *id;
    size_t i;
    json_array_foreach (got, i, id)
        snprintf(ids[i], 64, "%s", json_string_value(id));
    json_decref(r);
}

static void mark_done(struct vg_todo *todo, const char *task_id, const char *item)
{
    json_decref(apply(
        todo, "update_checklist_items",
        json_pack("{s:s, s:[{s:s, s:b}]}", "task_id", task_id, "items", "id", item, "done", 1)));
}

/* create_follow_up_task with carry_over_open_items and close_source_as: the open items are the
 * follow-up's, the done ones stay, the source has the status given and the follow-up its
 * category. Without them the source is left as it was. proves: S0-065 */
TEST(a_follow_up_carries_the_open_items_and_closes_its_source_when_asked)
{
    struct test_rt t;
    char agent[37], src[64], plain[64], items[3][64];
    struct vg_tool_outcome o = {0};
    struct vg_todo *todo = setup(&t, "todo_c_follow", agent);
    add_task(todo, "Ship v1", src);
    add_items(todo, src, json_pack("[s, s, s]", "spec", "code", "docs"), items);
    mark_done(todo, src, items[0]);

    /* No flags: a follow-up, and the source as it was. */
    ASSERT_EQ(gate(&t, agent, "f-1", "create_follow_up_task",
                   json_pack("{s:s, s:s}", "task_id", src, "title", "Ship v1.1"), &o),
              VG_TOOL_OK);
    snprintf(plain, sizeof plain, "%s", field(o.result, "task_id"));
    ASSERT_EQ(json_array_size(json_object_get(o.result, "moved_item_ids")), 0);
    vg_tool_outcome_release(&o);
    json_t *s = task(todo, src);
    ASSERT_STREQ(field(s, "status"), "open");
    ASSERT_EQ(json_array_size(json_object_get(s, "checklist")), 3);
    json_decref(s);

    ASSERT_EQ(gate(&t, agent, "f-1", "create_follow_up_task",
                   json_pack("{s:s, s:s, s:b, s:s}", "task_id", src, "title", "Ship v2",
                             "carry_over_open_items", 1, "close_source_as", "done"),
                   &o),
              VG_TOOL_OK);
    char next[64];
    snprintf(next, sizeof next, "%s", field(o.result, "task_id"));
    ASSERT_STREQ(field(o.result, "source_status"), "done");
    vg_tool_outcome_release(&o);
    json_t *n = task(todo, next), *nc = json_object_get(n, "checklist");
    ASSERT_STREQ(field(n, "title"), "Ship v2");
    ASSERT_STREQ(field(n, "category_id"), "work");
    ASSERT_STREQ(field(n, "follow_up_of"), src);
    ASSERT_EQ(json_array_size(nc), 2);
    ASSERT_STREQ(field(json_array_get(nc, 0), "id"), items[1]);
    ASSERT_STREQ(field(json_array_get(nc, 1), "id"), items[2]);
    json_decref(n);
    s = task(todo, src);
    ASSERT_STREQ(field(s, "status"), "done");
    ASSERT_EQ(json_array_size(json_object_get(s, "checklist")), 1); /* spec, done, stays */
    json_decref(s);

    /* A closed source is closed once: carrying or closing again is refused, nothing made. */
    ASSERT_EQ(gate(&t, agent, "f-2", "create_follow_up_task",
                   json_pack("{s:s, s:s, s:s}", "task_id", src, "title", "again", "close_source_as",
                             "cancelled"),
                   &o),
              VG_TOOL_UNSAFE_TARGET);
    vg_tool_outcome_release(&o);
    s = task(todo, src);
    ASSERT_EQ(json_array_size(json_object_get(s, "follow_ups")), 2);
    json_decref(s);
    vg_todo_close(todo);
    test_rt_close(&t);
}

/* ms written at a UTC offset of off_min minutes, "YYYY-MM-DDTHH:MM:SS+hh:mm". */
static void at_offset(char out[64], int64_t ms, int off_min)
{
    time_t secs = (time_t)(ms / 1000) + (time_t)off_min * 60;
    struct tm tm;
    gmtime_r(&secs, &tm);
    int a = off_min < 0 ? -off_min : off_min;
    snprintf(out, 64, "%04d-%02d-%02dT%02d:%02d:%02d%c%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, off_min < 0 ? '-' : '+', a / 60, a % 60);
}

/* A retrospective time entry from a start and an end at UTC -05:00, a description and the id
 * of the voice note it was dictated in: the task's entry keeps them all, offsets too, and its
 * minutes. Given minutes instead, the end is written in the start's offset. proves: S0-066 */
TEST(a_retrospective_time_entry_keeps_its_span_and_its_source_entry)
{
    struct test_rt t;
    char agent[37], id[64], start[64], end[64];
    struct vg_tool_outcome o = {0};
    struct vg_todo *todo = setup(&t, "todo_c_time", agent);
    add_task(todo, "Migrate the schema", id);
    int64_t day_ago = (vg_clock_now_ms(&t.clock.base) / 60000 - 24 * 60) * 60000;
    at_offset(start, day_ago, -300);
    at_offset(end, day_ago + 2 * 3600 * 1000, -300);
    ASSERT_EQ(gate(&t, agent, "t-1", "create_retrospective_time_entry",
                   json_pack("{s:s, s:s, s:s, s:s, s:s}", "task_id", id, "started_at", start,
                             "ended_at", end, "note", "Implemented migration + fixed failing test",
                             "source_entry_id", "audio-entry-7"),
                   &o),
              VG_TOOL_OK);
    ASSERT_EQ(json_integer_value(json_object_get(o.result, "minutes")), 120);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(gate(&t, agent, "t-1", "create_retrospective_time_entry",
                   json_pack("{s:s, s:s, s:i}", "task_id", id, "started_at", end, "minutes", 30),
                   &o),
              VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    /* An end before the start, and minutes that disagree with the end, are refused. */
    ASSERT_EQ(
        gate(&t, agent, "t-1", "create_retrospective_time_entry",
             json_pack("{s:s, s:s, s:s}", "task_id", id, "started_at", end, "ended_at", start), &o),
        VG_TOOL_INVALID_ARGUMENTS);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(gate(&t, agent, "t-1", "create_retrospective_time_entry",
                   json_pack("{s:s, s:s, s:s, s:i}", "task_id", id, "started_at", start, "ended_at",
                             end, "minutes", 60),
                   &o),
              VG_TOOL_INVALID_ARGUMENTS);
    vg_tool_outcome_release(&o);

    /* An hour before the first, written at +05:00: its text sorts after the others' (its clock
     * reads ten hours later), its instant before them. Entries are listed by instant. */
    char earlier[64];
    at_offset(earlier, day_ago - 3600 * 1000, 300);
    ASSERT_EQ(
        gate(&t, agent, "t-1", "create_retrospective_time_entry",
             json_pack("{s:s, s:s, s:i}", "task_id", id, "started_at", earlier, "minutes", 15), &o),
        VG_TOOL_OK);
    vg_tool_outcome_release(&o);

    json_t *w = task(todo, id), *entries = json_object_get(w, "time_entries");
    ASSERT_EQ(json_array_size(entries), 3);
    ASSERT_STREQ(field(json_array_get(entries, 0), "started_at"), earlier);
    json_t *e = json_array_get(entries, 1);
    ASSERT_STREQ(field(e, "started_at"), start);
    ASSERT_STREQ(field(e, "ended_at"), end);
    ASSERT(strstr(field(e, "ended_at"), "-05:00"));
    ASSERT_EQ(json_integer_value(json_object_get(e, "minutes")), 120);
    ASSERT_STREQ(field(e, "note"), "Implemented migration + fixed failing test");
    ASSERT_STREQ(field(e, "source_entry_id"), "audio-entry-7");
    char half[64];
    at_offset(half, day_ago + 150 * 60 * 1000, -300);
    e = json_array_get(entries, 2);
    ASSERT_STREQ(field(e, "ended_at"), half);
    ASSERT(json_is_null(json_object_get(e, "source_entry_id")));
    json_decref(w);
    vg_todo_close(todo);
    test_rt_close(&t);
}

/* move_checklist_items keeps an item's done mark by default and when preserve_done is true,
 * and brings it unchecked when it is false. proves: S0-067 */
TEST(moved_checklist_items_keep_their_done_mark_when_asked)
{
    struct test_rt t;
    char agent[37], a[64], b[64], items[2][64];
    struct vg_tool_outcome o = {0};
    struct vg_todo *todo = setup(&t, "todo_c_move", agent);
    add_task(todo, "Old list", a);
    add_task(todo, "New list", b);
    add_items(todo, a, json_pack("[s, s]", "done one", "another done"), items);
    mark_done(todo, a, items[0]);
    mark_done(todo, a, items[1]);
    ASSERT_EQ(gate(&t, agent, "m-1", "move_checklist_items",
                   json_pack("{s:s, s:s, s:[s], s:b}", "from_task_id", a, "to_task_id", b,
                             "item_ids", items[0], "preserve_done", 1),
                   &o),
              VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(gate(&t, agent, "m-1", "move_checklist_items",
                   json_pack("{s:s, s:s, s:[s], s:b}", "from_task_id", a, "to_task_id", b,
                             "item_ids", items[1], "preserve_done", 0),
                   &o),
              VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    json_t *n = task(todo, b), *nc = json_object_get(n, "checklist");
    ASSERT_EQ(json_array_size(nc), 2);
    ASSERT_STREQ(field(json_array_get(nc, 0), "id"), items[0]);
    ASSERT(json_is_true(json_object_get(json_array_get(nc, 0), "done")));
    ASSERT_STREQ(field(json_array_get(nc, 1), "id"), items[1]);
    ASSERT(json_is_false(json_object_get(json_array_get(nc, 1), "done")));
    json_decref(n);
    n = task(todo, a);
    ASSERT_EQ(json_array_size(json_object_get(n, "checklist")), 0);
    json_decref(n);
    vg_todo_close(todo);
    test_rt_close(&t);
}

/* The blocks of a plan's reply, as "start-end label" lines joined by ';' into out. */
static void plan_text(const json_t *result, char *out, size_t n)
{
    size_t i, used = 0;
    json_t *b;
    out[0] = '\0';
    json_array_foreach (json_object_get(result, "blocks"), i, b)
        used += (size_t)snprintf(out + used, n - used, "%s-%s %s;", field(b, "start"),
                                 field(b, "end"), field(b, "label"));
}

/* One call of upsert_day_plan_blocks deletes the listed blocks and upserts others, a block
 * named by its id rewritten in place; when any part is refused, none of it applies.
 * proves: S0-068 */
TEST(a_day_plan_deletes_and_upserts_blocks_in_one_atomic_call)
{
    struct test_rt t;
    char agent[37], other[64], text[512], first[64], second[64];
    struct vg_tool_outcome o = {0};
    struct vg_todo *todo = setup(&t, "todo_c_plan", agent);
    json_t *r = apply(todo, "create_task",
                      json_pack("{s:s, s:s}", "category_id", "home", "title", "Fix the sink"));
    snprintf(other, sizeof other, "%s", field(json_object_get(r, "result"), "task_id"));
    json_decref(r);
    ASSERT_EQ(
        gate(&t, agent, "d-1", "upsert_day_plan_blocks",
             json_pack("{s:s, s:s, s:[{s:s, s:s, s:s}, {s:s, s:s, s:s}]}", "category_id", "work",
                       "day", "2026-12-01", "blocks", "start", "09:00", "end", "11:00", "label",
                       "Deep work", "start", "13:00", "end", "14:00", "label", "Email"),
             &o),
        VG_TOOL_OK);
    snprintf(first, sizeof first, "%s",
             field(json_array_get(json_object_get(o.result, "blocks"), 0), "block_id"));
    snprintf(second, sizeof second, "%s",
             field(json_array_get(json_object_get(o.result, "blocks"), 1), "block_id"));
    vg_tool_outcome_release(&o);

    /* Email goes, Deep work moves to 10:00-12:00 under its id, a review comes. */
    ASSERT_EQ(
        gate(&t, agent, "d-2", "upsert_day_plan_blocks",
             json_pack("{s:s, s:s, s:[{s:s, s:s, s:s, s:s}, {s:s, s:s, s:s}], s:[s]}",
                       "category_id", "work", "day", "2026-12-01", "blocks", "block_id", first,
                       "start", "10:00", "end", "12:00", "label", "Deep work", "start", "13:00",
                       "end", "13:30", "label", "Review", "delete_block_ids", second),
             &o),
        VG_TOOL_OK);
    plan_text(o.result, text, sizeof text);
    ASSERT_STREQ(text, "10:00-12:00 Deep work;13:00-13:30 Review;");
    ASSERT_STREQ(field(json_array_get(json_object_get(o.result, "blocks"), 0), "block_id"), first);
    vg_tool_outcome_release(&o);

    /* A deletion that is not of this plan, or an upsert of another category's task: refused,
     * and the plan stays as it was, its deletion too. */
    ASSERT_EQ(gate(&t, agent, "d-3", "upsert_day_plan_blocks",
                   json_pack("{s:s, s:s, s:[{s:s, s:s}], s:[s]}", "category_id", "work", "day",
                             "2026-12-02", "blocks", "start", "08:00", "end", "09:00",
                             "delete_block_ids", first),
                   &o),
              VG_TOOL_UNSAFE_TARGET);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(gate(&t, agent, "d-4", "upsert_day_plan_blocks",
                   json_pack("{s:s, s:s, s:[{s:s, s:s, s:s}], s:[s]}", "category_id", "work", "day",
                             "2026-12-01", "blocks", "start", "15:00", "end", "16:00", "task_id",
                             other, "delete_block_ids", first),
                   &o),
              VG_TOOL_UNSAFE_TARGET);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(gate(&t, agent, "d-5", "upsert_day_plan_blocks",
                   json_pack("{s:s, s:s, s:[], s:[]}", "category_id", "work", "day", "2026-12-01",
                             "blocks", "delete_block_ids"),
                   &o),
              VG_TOOL_INVALID_ARGUMENTS);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(
        gate(&t, agent, "d-6", "upsert_day_plan_blocks",
             json_pack("{s:s, s:s, s:[{s:s, s:s, s:s}]}", "category_id", "work", "day",
                       "2026-12-01", "blocks", "start", "13:00", "end", "13:30", "label", "Review"),
             &o),
        VG_TOOL_OK);
    plan_text(o.result, text, sizeof text);
    ASSERT_STREQ(text, "10:00-12:00 Deep work;13:00-13:30 Review;");
    vg_tool_outcome_release(&o);
    vg_todo_close(todo);
    test_rt_close(&t);
}

/* Every row of the task database's tasks, items and time entries, as one text (owned). */
static char *host_rows(struct test_rt *t)
{
    char path[4300];
    snprintf(path, sizeof path, "%s.tasks.db", t->path);
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    ASSERT_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ASSERT_EQ(sqlite3_prepare_v2(db,
                                 "SELECT group_concat(x, '|') FROM (SELECT id || title || status"
                                 " || ifnull(estimate_minutes, '') || ifnull(due_date, '') ||"
                                 " priority AS x FROM tasks UNION ALL SELECT id || task_id || text"
                                 " || done FROM checklist_items UNION ALL SELECT id FROM"
                                 " time_entries)",
                                 -1, &st, NULL),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    char *out = strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
}

/* Each mutating tool that names a task, with its other arguments. */
static const struct {
    const char *tool, *args;
} mutating[] = {
    {"set_task_title", "\"title\":\"x\""},
    {"update_task_estimate", "\"estimate_minutes\":30"},
    {"update_task_due_date", "\"due_date\":\"2026-12-24\""},
    {"update_task_priority", "\"priority\":\"high\""},
    {"add_multiple_checklist_items", "\"items\":[\"x\"]"},
    {"update_checklist_items", "\"items\":[{\"id\":\"item-x\",\"done\":true}]"},
    {"create_follow_up_task", "\"title\":\"x\""},
    {"conclude_task_with_rollover", "\"follow_up_title\":\"x\""},
    {"create_retrospective_time_entry", "\"started_at\":\"2020-01-01T09:00:00Z\",\"minutes\":30"},
};

/* A mutating tool writes only to an explicit task id: named by its title (one task has it, so
 * it is not even ambiguous), by words of it, or not at all, every one of them, the time tool
 * too, is refused and nothing of the task database changes; resolve_task_reference answers
 * candidates, and a tie names no task to write to. proves: S0-077 */
TEST(a_mutating_tool_writes_only_to_an_explicit_task_id)
{
    struct test_rt t;
    char agent[37], id[64], twin[64], args[400];
    struct vg_tool_outcome o = {0};
    struct vg_todo *todo = setup(&t, "todo_c_explicit", agent);
    add_task(todo, "Write the report", id);
    add_task(todo, "Read the report", twin);
    char *before = host_rows(&t);
    static const char *const refs[] = {"\"task_id\":\"Write the report\",",
                                       "\"task_id\":\"report\",", ""};
    for (size_t i = 0; i < VG_ARRAY_LEN(mutating); i++)
        for (size_t k = 0; k < VG_ARRAY_LEN(refs); k++) {
            snprintf(args, sizeof args, "{%s%s}", refs[k], mutating[i].args);
            call_tool(&t, agent, "x-1", mutating[i].tool, args, &o);
            ASSERT(o.code == VG_TOOL_OUT_OF_SCOPE || o.code == VG_TOOL_INVALID_ARGUMENTS);
            vg_tool_outcome_release(&o);
        }
    call_tool(&t, agent, "x-1", "move_checklist_items",
              "{\"from_task_id\":\"Write the report\",\"to_task_id\":\"Read the report\","
              "\"item_ids\":[\"item-x\"]}",
              &o);
    ASSERT_EQ(o.code, VG_TOOL_OUT_OF_SCOPE);
    vg_tool_outcome_release(&o);
    char *after = host_rows(&t);
    ASSERT_STREQ(after, before);
    free(after);
    free(before);
    /* The way to a task is its id: resolve first; a tie of candidates names none. */
    ASSERT_EQ(gate(&t, agent, "x-2", "resolve_task_reference",
                   json_pack("{s:s, s:s}", "category_id", "work", "reference", "report"), &o),
              VG_TOOL_OK);
    ASSERT(json_is_true(json_object_get(o.result, "ambiguous")));
    ASSERT(json_is_null(json_object_get(o.result, "task_id")));
    ASSERT_EQ(json_array_size(json_object_get(o.result, "candidates")), 2);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(gate(&t, agent, "x-3", "set_task_title",
                   json_pack("{s:s, s:s}", "task_id", id, "title", "Write the Q4 report"), &o),
              VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    vg_todo_close(todo);
    test_rt_close(&t);
}

/* The domain's registered tools an agent may call, as "name name ..." sorted by the listing. */
static void callable(struct test_rt *t, const char *agent, char *out, size_t n)
{
    char *text = NULL;
    size_t i, used = 0;
    json_t *tool;
    ASSERT_OK(vigil_tool_list_for_agent(t->rt, agent, &text, E));
    json_t *all = json_loads(text, 0, NULL);
    vigil_free(text);
    out[0] = '\0';
    json_array_foreach (all, i, tool)
        if (!strcmp(field(tool, "source"), "registered"))
            used += (size_t)snprintf(out + used, n - used, "%s ", field(tool, "name"));
    json_decref(all);
}

/* The seed's capability profile: each tool of the domain needs one of the nine capabilities,
 * and an agent offered every tool (tools: ["*"]) may call only those its capabilities allow;
 * another is refused not_allowed, naming the capability. The listing is every tool the domain
 * registers: the thirteen of S0-063 among them. proves: S0-055 S0-063 */
TEST(each_capability_opens_its_own_tools_of_the_domain)
{
    static const struct {
        const char *cap, *tools;
    } profile[] = {
        {"categoryRead", "list_tasks_in_scope resolve_task_reference "},
        {"taskRead", "get_task "},
        {"taskWrite", "conclude_task_with_rollover create_follow_up_task set_task_title "
                      "update_task_due_date update_task_estimate update_task_priority "},
        {"checklistWrite",
         "add_multiple_checklist_items move_checklist_items update_checklist_items "},
        {"timeWrite", "create_retrospective_time_entry "},
        {"dayPlanRead", "get_day_plan "},
        {"dayPlanWrite", "upsert_day_plan_blocks "},
        {"ratingRead", "get_ratings_summary "},
        {"ratingWrite", "rate_task "},
    };
    struct test_rt t;
    char agent[37], cfg[200], seen[1024], id[64];
    struct vg_tool_outcome o = {0};
    struct vg_todo *todo = setup(&t, "todo_c_caps", agent);
    add_task(todo, "Write the report", id);
    for (size_t i = 0; i < VG_ARRAY_LEN(profile); i++) {
        char one[37];
        snprintf(cfg, sizeof cfg,
                 "{\"tools\":[\"*\"],\"allowed_scopes\":[\"work\"],\"capabilities\":[\"%s\"]}",
                 profile[i].cap);
        make_agent(&t, cfg, one);
        callable(&t, one, seen, sizeof seen);
        ASSERT_STREQ(seen, profile[i].tools);
    }
    /* None: no tool of the domain; reading a task refused, recorded, naming what is missing. */
    char none[37];
    make_agent(&t, "{\"tools\":[\"*\"],\"allowed_scopes\":[\"work\"]}", none);
    callable(&t, none, seen, sizeof seen);
    ASSERT_STREQ(seen, "");
    ASSERT_EQ(gate(&t, none, "c-1", "get_task", json_pack("{s:s}", "task_id", id), &o),
              VG_TOOL_NOT_ALLOWED);
    ASSERT(strstr(o.error_message, "taskRead"));
    vg_tool_outcome_release(&o);
    vg_todo_close(todo);
    test_rt_close(&t);
}

int main(void)
{
    RUN(a_follow_up_carries_the_open_items_and_closes_its_source_when_asked);
    RUN(a_retrospective_time_entry_keeps_its_span_and_its_source_entry);
    RUN(moved_checklist_items_keep_their_done_mark_when_asked);
    RUN(a_day_plan_deletes_and_upserts_blocks_in_one_atomic_call);
    RUN(a_mutating_tool_writes_only_to_an_explicit_task_id);
    RUN(each_capability_opens_its_own_tools_of_the_domain);
    return 0;
}
