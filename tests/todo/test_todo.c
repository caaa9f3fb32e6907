/*
 * test_todo.c: the reference host domain (src/todo, docs/todo.md): its changes persist in a
 * database of their own and raise their tokens; its operations are tools of the gate whose
 * category scope the domain decides; a call retried after a crash applies once; concluding a
 * task carries its open checklist items to a follow-up (S0-168).
 */
#include "tool/tool_helpers.h"

#include "todo/todo.h"

#include <jansson.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

/* The nine capabilities of the domain's tools: an agent given them all may call every one. */
#define ALL_CAPABILITIES                                                                           \
    "[\"categoryRead\",\"taskRead\",\"taskWrite\",\"checklistWrite\",\"timeWrite\","               \
    "\"dayPlanRead\",\"dayPlanWrite\",\"ratingRead\",\"ratingWrite\"]"
#define CFG_WORK                                                                                   \
    "{\"tools\":[\"*\"],\"allowed_scopes\":[\"work\"],\"capabilities\":" ALL_CAPABILITIES "}"

static struct {
    char tokens[64][128];
    int n;
} heard;

static void hear(void *user, const char *const *tokens, size_t n)
{
    VG_UNUSED(user);
    for (size_t i = 0; i < n && heard.n < 64; i++)
        snprintf(heard.tokens[heard.n++], 128, "%s", tokens[i]);
}

static int heard_token(const char *tok)
{
    for (int i = 0; i < heard.n; i++)
        if (!strcmp(heard.tokens[i], tok))
            return 1;
    return 0;
}

/* A task database beside the test's store, with the test's clock. */
static struct vg_todo *open_todo(struct test_rt *t)
{
    char path[4300];
    struct vg_todo *todo = NULL;
    snprintf(path, sizeof path, "%s.tasks.db", t->path);
    ASSERT_OK(vg_todo_open(path, 1, &t->clock.base, NULL, &todo, E));
    return todo;
}

/* Apply a person's (or, with op_id, a tool's) operation; the reply (owned). */
static json_t *apply(struct vg_todo *todo, const char *op, const char *op_id, const char *args)
{
    json_t *a = json_loads(args, 0, NULL), *reply = NULL;
    ASSERT(a);
    ASSERT_OK(vg_todo_apply(todo, op, op_id, a, &reply, E));
    json_decref(a);
    return reply;
}

/* The result's string field of an applied reply (into out). */
static void result_str(json_t *reply, const char *field, char out[64])
{
    const char *s = json_string_value(json_object_get(json_object_get(reply, "result"), field));
    ASSERT(s);
    snprintf(out, 64, "%s", s);
}

/* Categories work and home, one task in each: ids into work_task and home_task. */
static void seed(struct vg_todo *todo, char work_task[64], char home_task[64])
{
    json_decref(apply(todo, "create_category", NULL, "{\"id\":\"work\"}"));
    json_decref(apply(todo, "create_category", NULL, "{\"id\":\"home\"}"));
    json_t *r = apply(todo, "create_task", NULL,
                      "{\"category_id\":\"work\",\"title\":\"Write the report\"}");
    result_str(r, "task_id", work_task);
    json_decref(r);
    r = apply(todo, "create_task", NULL, "{\"category_id\":\"home\",\"title\":\"Fix the sink\"}");
    result_str(r, "task_id", home_task);
    json_decref(r);
}

/* get_task's result for id (owned). */
static json_t *task(struct vg_todo *todo, const char *id)
{
    char args[200];
    snprintf(args, sizeof args, "{\"task_id\":\"%s\"}", id);
    json_t *r = apply(todo, "get_task", NULL, args);
    json_t *t = json_incref(json_object_get(r, "result"));
    json_decref(r);
    ASSERT(t);
    return t;
}

static const char *field(json_t *o, const char *name)
{
    return json_string_value(json_object_get(o, name));
}

/* A tool call through the gate as agent with run key rk; the outcome's code. */
static enum vg_tool_code gate(struct test_rt *t, const char *agent, const char *rk,
                              const char *tool, const char *args, struct vg_tool_outcome *o)
{
    call_tool(t, agent, rk, tool, args, o);
    return o->code;
}

TEST(a_change_is_kept_in_the_task_database_and_names_its_tokens)
{
    struct test_rt t;
    char work[64], home[64], args[300];
    test_rt_open(&t, "todo_change");
    struct vg_todo *todo = open_todo(&t);
    seed(todo, work, home);
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"title\":\"Write the Q4 report\"}", work);
    json_t *r = apply(todo, "set_task_title", NULL, args);
    json_t *ids = json_object_get(r, "changed_entity_ids"),
           *keys = json_object_get(r, "changed_tokens");
    ASSERT_EQ(json_array_size(ids), 1);
    ASSERT_STREQ(json_string_value(json_array_get(ids, 0)), work);
    ASSERT_STREQ(json_string_value(json_array_get(keys, 0)), "TASK");
    json_decref(r);
    /* A bad value is refused and changes nothing. */
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"priority\":\"whenever\"}", work);
    r = apply(todo, "update_task_priority", NULL, args);
    ASSERT_STREQ(field(json_object_get(r, "error"), "code"), "invalid_arguments");
    json_decref(r);
    /* Closed and opened again: the change is in the file, apart from the agent store. */
    vg_todo_close(todo);
    todo = open_todo(&t);
    json_t *w = task(todo, work);
    ASSERT_STREQ(field(w, "title"), "Write the Q4 report");
    ASSERT_STREQ(field(w, "priority"), "normal");
    ASSERT_STREQ(field(w, "category_id"), "work");
    json_decref(w);
    vg_todo_close(todo);
    test_rt_close(&t);
}

TEST(a_tool_call_through_the_gate_changes_the_task_and_raises_its_tokens)
{
    struct test_rt t;
    char work[64], home[64], agent[37], args[300];
    struct vg_tool_outcome o = {0};
    test_rt_open(&t, "todo_gate");
    struct vg_todo *todo = open_todo(&t);
    seed(todo, work, home);
    ASSERT_OK(vg_todo_register_tools(t.rt, todo, E));
    make_agent(&t, CFG_WORK, agent);
    heard.n = 0;
    vigil_set_notify_hook(t.rt, hear, NULL);
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"due_date\":\"2026-12-24\"}", work);
    ASSERT_EQ(gate(&t, agent, "wake-1", "update_task_due_date", args, &o), VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    ASSERT(heard_token(work));
    ASSERT(heard_token("TASK"));
    json_t *w = task(todo, work);
    ASSERT_STREQ(field(w, "due_date"), "2026-12-24");
    json_decref(w);
    vg_todo_close(todo);
    test_rt_close(&t);
}

/* Every row of every table of an SQLite file as one text: what it holds, to compare. */
static char *file_rows(const char *path, const char *tables_sql)
{
    sqlite3 *db = NULL;
    ASSERT_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    ASSERT_EQ(sqlite3_prepare_v2(db, tables_sql, -1, &st, NULL), SQLITE_OK);
    struct vg_buf all;
    vg_buf_init(&all, 0);
    while (sqlite3_step(st) == SQLITE_ROW) {
        char sql[300];
        sqlite3_stmt *rows = NULL;
        snprintf(sql, sizeof sql, "SELECT * FROM \"%s\"", sqlite3_column_text(st, 0));
        ASSERT_EQ(sqlite3_prepare_v2(db, sql, -1, &rows, NULL), SQLITE_OK);
        vg_buf_printf(&all, "[%s]", sqlite3_column_text(st, 0));
        while (sqlite3_step(rows) == SQLITE_ROW)
            for (int c = 0; c < sqlite3_column_count(rows); c++) {
                const char *v = (const char *)sqlite3_column_text(rows, c);
                vg_buf_printf(&all, "%s|", v ? v : "(null)");
            }
        sqlite3_finalize(rows);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    ASSERT_OK(vg_buf_finish(&all, E));
    return vg_buf_detach(&all, NULL);
}

/* Operations scanned: how many, and how many name the task by its id in their arguments. */
struct named_task {
    const char *task;
    int ops, named;
};

static int op_names_task(void *user, const struct vg_record *r)
{
    struct named_task *nt = user;
    json_t *b = json_loads(r->body, 0, NULL);
    ASSERT(b != NULL);
    nt->ops++;
    const char *tid = field(json_object_get(b, "arguments"), "task_id");
    nt->named += tid && !strcmp(tid, nt->task);
    json_decref(b);
    return 0;
}

#define TABLES_SQL "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"

/* One integer a statement gives on an SQLite file. */
static int64_t file_int(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    ASSERT_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ASSERT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* The agent domain and the host domain each keep to a store of their own, each versioned by
 * its own schema number: the task database holds no agent record and the agent store no host
 * table; what the agent keeps of a task is the task's id (no key across the two); the agent's
 * report, state, runtime state and messages change nothing of the host's data, which only a
 * tool's effect changes (a task agent's set_task_title and update_task_due_date, through the
 * domain's handlers); and the agent's records are removed without touching a task.
 * proves: S0-005 S0-006 S3-027 S3-004 */
TEST(the_agent_and_host_domains_keep_to_their_own_stores)
{
    struct test_rt t;
    char work[64], home[64], agent[37], args[300], tasks_db[4300], thread[128];
    struct vg_tool_outcome o = {0};
    test_rt_open(&t, "todo_domains");
    snprintf(tasks_db, sizeof tasks_db, "%s.tasks.db", t.path);
    struct vg_todo *todo = open_todo(&t);
    seed(todo, work, home);
    ASSERT_OK(vg_todo_register_tools(t.rt, todo, E));
    ASSERT_OK(vg_todo_agent_create(t.rt, todo, work, agent, E)); /* a task agent */
    char *host_before = file_rows(tasks_db, TABLES_SQL);

    /* The agent's own writes: a report, its state, its runtime state, messages. */
    ASSERT_OK(vg_report_set(t.env, agent, "current", "# The report is due", NULL, NULL, NULL, E));
    json_t *ch = json_pack("{s:{s:s}}", "slots", "active_task", work);
    ASSERT_OK(vg_state_update(t.env, agent, ch, VG_STATE_ANY_REVISION, NULL, E));
    json_decref(ch);
    ch = json_pack("{s:i}", "failure_streak", 1);
    ASSERT_OK(vg_runtime_state_update(t.env, agent, ch, E));
    json_decref(ch);
    snprintf(thread, sizeof thread, "%s:session:s", agent);
    struct vg_message_in m = {.agent_id = agent,
                              .thread_id = thread,
                              .kind = VG_MSG_THOUGHT,
                              .content = "the report task is due soon"};
    ASSERT_OK(vg_message_append(t.env, &m, NULL, E));
    char *host_after = file_rows(tasks_db, TABLES_SQL);
    ASSERT_STREQ(host_after, host_before);
    vg_free(host_after);

    /* A tool's effect is what changes the host's data. */
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"due_date\":\"2026-12-24\"}", work);
    ASSERT_EQ(gate(&t, agent, "wake-1", "update_task_due_date", args, &o), VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"title\":\"Write the Q4 report\"}", work);
    ASSERT_EQ(gate(&t, agent, "wake-1", "set_task_title", args, &o), VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    host_after = file_rows(tasks_db, TABLES_SQL);
    ASSERT(strcmp(host_after, host_before) != 0);
    vg_free(host_after);
    vg_free(host_before);

    /* Each file holds its own domain's tables, each with its own schema number. */
    ASSERT_EQ(file_int(tasks_db, "SELECT count(*) FROM sqlite_master WHERE name = 'records'"), 0);
    ASSERT_EQ(file_int(tasks_db, "PRAGMA user_version"), 0);
    ASSERT_EQ(file_int(tasks_db, "SELECT value FROM todo_meta WHERE key = 'schema_version'"), 3);
    ASSERT_EQ(file_int(t.path, "SELECT count(*) FROM sqlite_master WHERE name IN"
                               " ('tasks', 'categories', 'checklist_items', 'todo_meta')"),
              0);
    int agent_schema = 0;
    ASSERT_OK(vg_store_control(t.env->store, VG_STORE_CTRL_SCHEMA_VERSION, &agent_schema, E));
    ASSERT(agent_schema > 2);
    ASSERT_EQ(file_int(t.path, "PRAGMA user_version"), agent_schema);
    ASSERT_EQ(file_int(t.path, "SELECT count(*) FROM pragma_foreign_key_list('records')"), 0);

    /* The agent keeps the task by its id: its operation names it in its arguments. */
    struct vg_query q = {.kind = "operation", .owner = agent};
    struct named_task nt = {.task = work};
    ASSERT_OK(vg_store_scan(t.env->store, &q, op_names_task, &nt, E));
    ASSERT_EQ(nt.ops, 2);
    ASSERT_EQ(nt.named, 2);

    /* The agent's records go, every task stays as it was. */
    host_before = file_rows(tasks_db, TABLES_SQL);
    ASSERT_OK(vigil_agent_destroy(t.rt, agent, "done", E));
    ASSERT_OK(vg_agent_delete(t.env, agent, E));
    host_after = file_rows(tasks_db, TABLES_SQL);
    ASSERT_STREQ(host_after, host_before);
    vg_free(host_after);
    vg_free(host_before);
    json_t *w = task(todo, work);
    ASSERT_STREQ(field(w, "due_date"), "2026-12-24");
    json_decref(w);
    vg_todo_close(todo);
    test_rt_close(&t);
}

/* A due date is a day of the calendar: the 30th of February is refused like the 13th month, and
 * the 29th only in a leap year. */
TEST(a_due_date_that_is_no_day_is_refused)
{
    static const char *const bad[] = {"2026-02-30", "2026-02-29", "2026-04-31", "2026-13-01",
                                      "2026-00-10", "2026-1-011", "+202-01-01", "2026-01-00"};
    static const char *const good[] = {"2028-02-29", "2000-02-29", "2026-12-31", "2026-04-30"};
    struct test_rt t;
    char work[64], home[64], args[300];
    test_rt_open(&t, "todo_due");
    struct vg_todo *todo = open_todo(&t);
    seed(todo, work, home);
    for (size_t i = 0; i < VG_ARRAY_LEN(bad); i++) {
        snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"due_date\":\"%s\"}", work, bad[i]);
        json_t *r = apply(todo, "update_task_due_date", NULL, args);
        ASSERT_STREQ(field(json_object_get(r, "error"), "code"), "invalid_arguments");
        json_decref(r);
    }
    for (size_t i = 0; i < VG_ARRAY_LEN(good); i++) {
        snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"due_date\":\"%s\"}", work, good[i]);
        json_decref(apply(todo, "update_task_due_date", NULL, args));
        json_t *w = task(todo, work);
        ASSERT_STREQ(field(w, "due_date"), good[i]);
        json_decref(w);
    }
    vg_todo_close(todo);
    test_rt_close(&t);
}

/* The gate asks the domain the category of a target; the domain checks the items named under
 * it. proves: S0-058 S0-059 */
TEST(an_agent_granted_one_category_cannot_touch_another)
{
    struct test_rt t;
    char work[64], home[64], agent[37], args[400], item[64];
    struct vg_tool_outcome o = {0};
    test_rt_open(&t, "todo_scope");
    struct vg_todo *todo = open_todo(&t);
    seed(todo, work, home);
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"items\":[\"buy a washer\"]}", home);
    json_t *r = apply(todo, "add_multiple_checklist_items", NULL, args);
    snprintf(item, sizeof item, "%s",
             json_string_value(
                 json_array_get(json_object_get(json_object_get(r, "result"), "item_ids"), 0)));
    json_decref(r);
    ASSERT_OK(vg_todo_register_tools(t.rt, todo, E));
    make_agent(&t, CFG_WORK, agent);
    /* The home task: the gate asks the domain its category, whatever the model says. */
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"title\":\"taken over\"}", home);
    ASSERT_EQ(gate(&t, agent, "wake-1", "set_task_title", args, &o), VG_TOOL_OUT_OF_SCOPE);
    vg_tool_outcome_release(&o);
    /* An unknown task has no category: refused, fail closed. */
    ASSERT_EQ(gate(&t, agent, "wake-1", "set_task_title",
                   "{\"task_id\":\"task-none\",\"title\":\"x\"}", &o),
              VG_TOOL_OUT_OF_SCOPE);
    vg_tool_outcome_release(&o);
    /* Listing another category is refused too. */
    ASSERT_EQ(gate(&t, agent, "wake-1", "list_tasks_in_scope", "{\"category_id\":\"home\"}", &o),
              VG_TOOL_OUT_OF_SCOPE);
    vg_tool_outcome_release(&o);
    /* A home item named under the work task the gate admitted: the domain refuses it. */
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"items\":[{\"id\":\"%s\",\"done\":true}]}",
             work, item);
    ASSERT_EQ(gate(&t, agent, "wake-1", "update_checklist_items", args, &o), VG_TOOL_UNSAFE_TARGET);
    vg_tool_outcome_release(&o);
    json_t *h = task(todo, home);
    ASSERT_STREQ(field(h, "title"), "Fix the sink");
    ASSERT(
        json_is_false(json_object_get(json_array_get(json_object_get(h, "checklist"), 0), "done")));
    json_decref(h);
    /* Its own category it may list. */
    ASSERT_EQ(gate(&t, agent, "wake-1", "list_tasks_in_scope", "{\"category_id\":\"work\"}", &o),
              VG_TOOL_OK);
    ASSERT_EQ(json_array_size(json_object_get(o.result, "tasks")), 1);
    vg_tool_outcome_release(&o);
    vg_todo_close(todo);
    test_rt_close(&t);
}

/* A task agent is allowed its task's own scope (CATEGORY/TASK, what `vigil todo agent` gives):
 * it reads and edits that task and its checklist, and cannot read, list or change another
 * task of the same category, nor move its items there. An agent allowed the category still
 * reaches every task of it. proves: S3-001 S3-008 */
TEST(a_task_agent_reaches_its_task_and_nothing_else_of_its_category)
{
    struct test_rt t;
    char work[64], home[64], other[64], agent[37], cfg[600], args[400], scope[256];
    struct vg_tool_outcome o = {0};
    test_rt_open(&t, "todo_task_scope");
    struct vg_todo *todo = open_todo(&t);
    seed(todo, work, home);
    json_t *r = apply(todo, "create_task", NULL, "{\"category_id\":\"work\",\"title\":\"Budget\"}");
    result_str(r, "task_id", other);
    json_decref(r);
    ASSERT_OK(vg_todo_register_tools(t.rt, todo, E));
    ASSERT(vg_todo_scope_of(todo, work, scope, sizeof scope));
    ASSERT(!strncmp(scope, "work/", 5) && !strcmp(scope + 5, work));
    snprintf(cfg, sizeof cfg,
             "{\"tools\":[\"*\"],\"allowed_scopes\":[\"%s\"],\"capabilities\":" ALL_CAPABILITIES
             "}",
             scope);
    make_agent(&t, cfg, agent);
    snprintf(args, sizeof args, "{\"task_id\":\"%s\"}", work);
    ASSERT_EQ(gate(&t, agent, "w-1", "get_task", args, &o), VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"items\":[\"outline\"]}", work);
    ASSERT_EQ(gate(&t, agent, "w-1", "add_multiple_checklist_items", args, &o), VG_TOOL_OK);
    char item[64];
    snprintf(item, sizeof item, "%s",
             json_string_value(json_array_get(json_object_get(o.result, "item_ids"), 0)));
    vg_tool_outcome_release(&o);
    /* Another task of the same category: neither read nor changed, nor listed. */
    snprintf(args, sizeof args, "{\"task_id\":\"%s\"}", other);
    ASSERT_EQ(gate(&t, agent, "w-1", "get_task", args, &o), VG_TOOL_OUT_OF_SCOPE);
    vg_tool_outcome_release(&o);
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"title\":\"taken over\"}", other);
    ASSERT_EQ(gate(&t, agent, "w-1", "set_task_title", args, &o), VG_TOOL_OUT_OF_SCOPE);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(gate(&t, agent, "w-1", "list_tasks_in_scope", "{\"category_id\":\"work\"}", &o),
              VG_TOOL_OUT_OF_SCOPE);
    vg_tool_outcome_release(&o);
    snprintf(args, sizeof args,
             "{\"from_task_id\":\"%s\",\"to_task_id\":\"%s\",\"item_ids\":[\"%s\"]}", work, other,
             item);
    ASSERT_EQ(gate(&t, agent, "w-1", "move_checklist_items", args, &o), VG_TOOL_OUT_OF_SCOPE);
    vg_tool_outcome_release(&o);
    json_t *b = task(todo, other);
    ASSERT_STREQ(field(b, "title"), "Budget");
    ASSERT_EQ(json_array_size(json_object_get(b, "checklist")), 0);
    json_decref(b);
    /* The category's agent reaches both. */
    char planner[37];
    make_agent(&t, CFG_WORK, planner);
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"title\":\"Budget 2027\"}", other);
    ASSERT_EQ(gate(&t, planner, "p-1", "set_task_title", args, &o), VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    vg_todo_close(todo);
    test_rt_close(&t);
}

/* A deleted task is kept but out of every read and of the scope resolver, so no tool reaches
 * it; restored, it is back as it was. A task database of schema 1 gains the column on open. */
TEST(a_deleted_task_leaves_every_read_and_comes_back_as_it_was)
{
    struct test_rt t;
    char work[64], home[64], args[200], scope[256];
    test_rt_open(&t, "todo_delete");
    struct vg_todo *todo = open_todo(&t);
    seed(todo, work, home);
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"items\":[\"a\"]}", work);
    json_decref(apply(todo, "add_multiple_checklist_items", NULL, args));
    snprintf(args, sizeof args, "{\"task_id\":\"%s\"}", work);
    json_decref(apply(todo, "delete_task", NULL, args));
    ASSERT(!vg_todo_scope_of(todo, work, scope, sizeof scope));
    json_t *r = apply(todo, "get_task", NULL, args);
    ASSERT(json_object_get(r, "error"));
    json_decref(r);
    r = apply(todo, "list_tasks_in_scope", NULL, "{\"category_id\":\"work\",\"status\":\"all\"}");
    ASSERT_EQ(json_array_size(json_object_get(json_object_get(r, "result"), "tasks")), 0);
    json_decref(r);
    r = apply(todo, "resolve_task_reference", NULL,
              "{\"category_id\":\"work\",\"reference\":\"report\"}");
    ASSERT(json_is_null(json_object_get(json_object_get(r, "result"), "task_id")));
    json_decref(r);
    r = apply(todo, "set_task_title", NULL, args);
    ASSERT(json_object_get(r, "error")); /* a deleted task takes no change */
    json_decref(r);
    json_decref(apply(todo, "restore_task", NULL, args));
    ASSERT(vg_todo_scope_of(todo, work, scope, sizeof scope));
    json_t *w = task(todo, work);
    ASSERT_STREQ(field(w, "title"), "Write the report");
    ASSERT_EQ(json_array_size(json_object_get(w, "checklist")), 1);
    json_decref(w);
    r = apply(todo, "restore_task", NULL, args);
    ASSERT(json_object_get(r, "error")); /* not deleted */
    json_decref(r);
    vg_todo_close(todo);

    /* A database of schema 1 (no deleted_ms) opens at 2, its tasks live. */
    char path[4300];
    snprintf(path, sizeof path, "%s.v1.db", t.path);
    sqlite3 *db = NULL;
    ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "CREATE TABLE todo_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                           "INSERT INTO todo_meta VALUES('schema_version', '1');"
                           "CREATE TABLE categories(id TEXT PRIMARY KEY, name TEXT NOT NULL,"
                           " created_ms INTEGER NOT NULL);"
                           "INSERT INTO categories VALUES('old', 'old', 1);"
                           "CREATE TABLE tasks(id TEXT PRIMARY KEY, category_id TEXT NOT NULL,"
                           " title TEXT NOT NULL, estimate_minutes INTEGER, due_date TEXT,"
                           " priority TEXT NOT NULL DEFAULT 'normal', status TEXT NOT NULL"
                           " DEFAULT 'open', follow_up_of TEXT, created_ms INTEGER NOT NULL,"
                           " updated_ms INTEGER NOT NULL, version INTEGER NOT NULL DEFAULT 1);"
                           "INSERT INTO tasks(id, category_id, title, created_ms, updated_ms)"
                           " VALUES('task-old', 'old', 'Kept', 1, 1);",
                           NULL, NULL, NULL),
              SQLITE_OK);
    sqlite3_close(db);
    ASSERT_OK(vg_todo_open(path, 0, &t.clock.base, NULL, &todo, E));
    ASSERT(vg_todo_scope_of(todo, "task-old", scope, sizeof scope));
    ASSERT_STREQ(scope, "old/task-old");
    json_decref(apply(todo, "delete_task", NULL, "{\"task_id\":\"task-old\"}"));
    ASSERT(!vg_todo_scope_of(todo, "task-old", scope, sizeof scope));
    vg_todo_close(todo);
    test_rt_close(&t);
}

/* The number of checklist items of a task. */
static size_t items_of(struct vg_todo *todo, const char *id)
{
    json_t *w = task(todo, id);
    size_t n = json_array_size(json_object_get(w, "checklist"));
    json_decref(w);
    return n;
}

TEST(an_operation_id_applies_once)
{
    struct test_rt t;
    char work[64], home[64], args[300];
    test_rt_open(&t, "todo_once");
    struct vg_todo *todo = open_todo(&t);
    seed(todo, work, home);
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"items\":[\"a\",\"b\"]}", work);
    json_t *r1 = apply(todo, "add_multiple_checklist_items", "op-1", args);
    json_t *r2 = apply(todo, "add_multiple_checklist_items", "op-1", args);
    ASSERT(json_equal(r1, r2)); /* the first reply, ids and all */
    ASSERT_EQ(items_of(todo, work), 2);
    int found = 0;
    ASSERT_OK(vg_todo_applied(todo, "op-1", &found, NULL, E));
    ASSERT_EQ(found, 1);
    json_decref(apply(todo, "add_multiple_checklist_items", "op-2", args));
    ASSERT_EQ(items_of(todo, work), 4);
    json_decref(r1);
    json_decref(r2);
    vg_todo_close(todo);
    test_rt_close(&t);
}

/* The process dies after the domain committed and before the gate recorded the call's end:
 * the gate runs the idempotent call again after the restart, and the domain answers its first
 * reply instead of adding the items twice. proves: S0-075 */
TEST(a_call_cut_short_after_its_effect_applies_once_after_the_restart)
{
    struct test_rt t;
    char work[64], home[64], agent[37], args[300];
    struct vg_tool_outcome o = {0};
    test_rt_open(&t, "todo_crash");
    struct vg_todo *todo = open_todo(&t);
    seed(todo, work, home);
    ASSERT_OK(vg_todo_register_tools(t.rt, todo, E));
    make_agent(&t, CFG_WORK, agent);
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"items\":[\"draft\",\"review\"]}", work);
    json_t *a = json_loads(args, 0, NULL);
    struct vg_tool_call_ctx ctx = {.agent_id = agent, .run_key = "wake-7"};
    vg_tool_executor_test_crash(executor(&t), VG_CRASH_AFTER_EFFECT);
    ASSERT_CODE(
        VIGIL_ECANCELED,
        vg_tool_executor_call(executor(&t), &ctx, "add_multiple_checklist_items", a, &o, NULL));
    vg_tool_outcome_release(&o);
    ASSERT_EQ(items_of(todo, work), 2); /* the effect happened */
    test_rt_reopen(&t);
    ASSERT_OK(vg_todo_register_tools(t.rt, todo, E));
    int settled = 0;
    ASSERT_OK(vg_tool_executor_recover(executor(&t), &settled, E));
    ASSERT_OK(vg_tool_executor_call(executor(&t), &ctx, "add_multiple_checklist_items", a, &o, E));
    ASSERT_EQ(o.code, VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    json_decref(a);
    ASSERT_EQ(items_of(todo, work), 2);
    /* and the gate's record of it is finished */
    struct vg_query q = {.kind = "operation", .k1 = "started"};
    int64_t n = -1;
    ASSERT_OK(vg_store_count(t.env->store, &q, &n, E));
    ASSERT_EQ(n, 0);
    vg_todo_close(todo);
    test_rt_close(&t);
}

static const char *refusal(struct vg_todo *todo, const char *op, json_t *args);

/* A planner concludes a task; its open checklist items go to a follow-up task in the same
 * category, its done ones stay. proves: S0-168 S0-069 */
TEST(concluding_a_task_carries_its_open_items_to_a_follow_up)
{
    struct test_rt t;
    char work[64], home[64], agent[37], args[400], next[64];
    struct vg_tool_outcome o = {0};
    test_rt_open(&t, "todo_rollover");
    struct vg_todo *todo = open_todo(&t);
    seed(todo, work, home);
    ASSERT_OK(vg_todo_register_tools(t.rt, todo, E));
    make_agent(&t, CFG_WORK, agent);
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"items\":[\"outline\",\"draft\",\"send\"]}",
             work);
    ASSERT_EQ(gate(&t, agent, "plan-1", "add_multiple_checklist_items", args, &o), VG_TOOL_OK);
    const char *outline =
        json_string_value(json_array_get(json_object_get(o.result, "item_ids"), 0));
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"items\":[{\"id\":\"%s\",\"done\":true}]}",
             work, outline);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(gate(&t, agent, "plan-1", "update_checklist_items", args, &o), VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    snprintf(args, sizeof args, "{\"task_id\":\"%s\"}", work);
    ASSERT_EQ(gate(&t, agent, "plan-1", "conclude_task_with_rollover", args, &o), VG_TOOL_OK);
    snprintf(next, sizeof next, "%s", field(o.result, "follow_up_task_id"));
    ASSERT_EQ(json_array_size(json_object_get(o.result, "moved_item_ids")), 2);
    vg_tool_outcome_release(&o);
    json_t *w = task(todo, work), *f = task(todo, next);
    ASSERT_STREQ(field(w, "status"), "done");
    ASSERT_EQ(json_array_size(json_object_get(w, "checklist")), 1); /* outline, done, stays */
    ASSERT_STREQ(field(f, "status"), "open");
    ASSERT_STREQ(field(f, "category_id"), "work");
    ASSERT_STREQ(field(f, "follow_up_of"), work);
    ASSERT_STREQ(field(f, "title"), "Follow-up: Write the report");
    json_t *fc = json_object_get(f, "checklist");
    ASSERT_EQ(json_array_size(fc), 2);
    ASSERT_STREQ(field(json_array_get(fc, 0), "text"), "draft");
    ASSERT_STREQ(field(json_array_get(fc, 1), "text"), "send");
    json_decref(w);
    json_decref(f);
    /* A concluded task cannot be concluded again. */
    ASSERT_EQ(gate(&t, agent, "plan-2", "conclude_task_with_rollover", args, &o),
              VG_TOOL_UNSAFE_TARGET);
    vg_tool_outcome_release(&o);
    /* Nor changed by an agent any more (its checklist, its fields, its time), while a person
     * may still correct it. */
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"items\":[\"one more\"]}", work);
    ASSERT_EQ(gate(&t, agent, "plan-3", "add_multiple_checklist_items", args, &o),
              VG_TOOL_UNSAFE_TARGET);
    ASSERT(strstr(o.error_message, "takes no more changes from an agent"));
    vg_tool_outcome_release(&o);
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"estimate_minutes\":99999}", work);
    ASSERT_EQ(gate(&t, agent, "plan-4", "update_task_estimate", args, &o), VG_TOOL_UNSAFE_TARGET);
    vg_tool_outcome_release(&o);
    w = task(todo, work);
    ASSERT_EQ(json_array_size(json_object_get(w, "checklist")), 1);
    ASSERT(json_is_null(json_object_get(w, "estimate_minutes")));
    json_decref(w);
    ASSERT(!refusal(todo, "update_task_estimate",
                    json_pack("{s:s, s:i}", "task_id", work, "estimate_minutes", 30)));
    vg_todo_close(todo);
    test_rt_close(&t);
}

/* An agent's lifecycle (into out). */
static void lifecycle_of(struct test_rt *t, const char *agent, char out[32])
{
    char *text = NULL;
    ASSERT_OK(vigil_agent_show(t->rt, agent, &text, E));
    json_t *v = json_loads(text, 0, NULL);
    vigil_free(text);
    snprintf(out, 32, "%s", field(json_object_get(v, "agent"), "lifecycle"));
    json_decref(v);
}

/* A person concludes a task that has a task agent: the agent retires (dormant, its report and
 * memory kept) and the follow-up that took the open items gets an agent of its own, allowed that
 * task alone. The same path (vg_todo_person_apply) deletes and restores. */
TEST(a_person_concluding_a_task_retires_its_agent_and_hands_the_follow_up_on)
{
    struct test_rt t;
    char work[64], home[64], agent[37], next_agent[64], next[64], lc[32];
    int found = 0;
    json_t *reply = NULL, *args;
    test_rt_open(&t, "todo_handover");
    struct vg_todo *todo = open_todo(&t);
    seed(todo, work, home);
    ASSERT_OK(vg_todo_register_tools(t.rt, todo, E));
    ASSERT_OK(vg_todo_agent_create(t.rt, todo, work, agent, E));
    vigil_error refused = {0};
    ASSERT_CODE(VIGIL_EEXISTS, vg_todo_agent_create(t.rt, todo, work, next_agent, &refused));
    ASSERT_CODE(VIGIL_ENOTFOUND,
                vg_todo_agent_create(t.rt, todo, "task-nope", next_agent, &refused));
    ASSERT(!refusal(todo, "add_multiple_checklist_items",
                    json_pack("{s:s, s:[s]}", "task_id", work, "items", "left open")));
    args = json_pack("{s:s}", "task_id", work);
    ASSERT_OK(vg_todo_person_apply(t.rt, todo, "conclude_task_with_rollover", args, &reply, E));
    json_decref(args);
    snprintf(next, sizeof next, "%s", field(json_object_get(reply, "result"), "follow_up_task_id"));
    json_t *moved = json_object_get(reply, "agents");
    ASSERT_EQ(json_array_size(moved), 2);
    ASSERT_STREQ(field(json_array_get(moved, 0), "lifecycle"), "dormant");
    ASSERT_STREQ(field(json_array_get(moved, 1), "lifecycle"), "created");
    json_decref(reply);
    lifecycle_of(&t, agent, lc);
    ASSERT_STREQ(lc, "dormant");
    ASSERT_OK(vg_todo_agent_find(t.rt, next, next_agent, &found, E));
    ASSERT(found);
    char *shown = NULL, scope[200];
    ASSERT_OK(vigil_agent_show(t.rt, next_agent, &shown, E));
    snprintf(scope, sizeof scope, "\"work/%s\"", next);
    ASSERT(strstr(shown, scope));
    vigil_free(shown);
    /* The done task deleted and restored: its retired agent stays dormant (it was retired for
     * the task being done, which a restore does not undo). */
    args = json_pack("{s:s}", "task_id", work);
    ASSERT_OK(vg_todo_person_apply(t.rt, todo, "delete_task", args, &reply, E));
    json_decref(reply);
    ASSERT_OK(vg_todo_person_apply(t.rt, todo, "restore_task", args, &reply, E));
    json_decref(args);
    ASSERT(!json_object_get(reply, "agents"));
    json_decref(reply);
    lifecycle_of(&t, agent, lc);
    ASSERT_STREQ(lc, "dormant");
    /* A refusal moves no agent: a task that is not there says so, "missing". */
    args = json_pack("{s:s}", "task_id", "task-nope");
    ASSERT_OK(vg_todo_person_apply(t.rt, todo, "delete_task", args, &reply, E));
    json_decref(args);
    ASSERT(json_is_true(json_object_get(json_object_get(reply, "error"), "missing")));
    ASSERT(!json_object_get(reply, "agents"));
    json_decref(reply);
    vg_todo_close(todo);
    test_rt_close(&t);
}

/* What `vigil todo agent` makes for a task: kind task_agent, autonomous, allowed its task's
 * scope (CATEGORY/TASK: the task's category, narrowed to the task), its active-task slot the
 * task, and the seed's tools: the six editing tools and record_observations (with get_task to
 * read its task and set_report for its report), at most 4 tool rounds a wake (5 model turns).
 * proves: S3-044 S3-045 */
TEST(a_task_agent_is_made_for_its_task)
{
    static const char *const seed_tools[] = {
        "set_task_title",       "update_task_estimate",         "update_task_due_date",
        "update_task_priority", "add_multiple_checklist_items", "update_checklist_items",
        "record_observations"};
    struct test_rt t;
    char work[64], home[64], agent[37], scope[200], *text = NULL;
    test_rt_open(&t, "todo_agent_made");
    struct vg_todo *todo = open_todo(&t);
    seed(todo, work, home);
    ASSERT_OK(vg_todo_register_tools(t.rt, todo, E));
    ASSERT_OK(vg_todo_agent_create(t.rt, todo, work, agent, E));
    ASSERT_OK(vigil_agent_show(t.rt, agent, &text, E));
    json_t *v = json_loads(text, 0, NULL), *a = json_object_get(v, "agent");
    vigil_free(text);
    json_t *config = json_object_get(a, "config");
    ASSERT_STREQ(field(a, "kind"), "task_agent");
    ASSERT_STREQ(field(a, "mode"), "autonomous");
    json_t *scopes = json_object_get(config, "allowed_scopes");
    snprintf(scope, sizeof scope, "work/%s", work);
    ASSERT_EQ(json_array_size(scopes), 1);
    ASSERT_STREQ(json_string_value(json_array_get(scopes, 0)), scope);
    json_t *slot =
        json_object_get(json_object_get(json_object_get(v, "state"), "slots"), "active_task");
    ASSERT_STREQ(field(slot, "value"), work);
    ASSERT(field(slot, "updated_at"));
    json_t *tools = json_object_get(config, "tools");
    ASSERT_EQ(json_array_size(tools), VG_ARRAY_LEN(seed_tools) + 2);
    for (size_t i = 0; i < VG_ARRAY_LEN(seed_tools); i++) {
        size_t k;
        json_t *one;
        int has = 0;
        json_array_foreach (tools, k, one)
            has |= !strcmp(json_string_value(one), seed_tools[i]);
        ASSERT(has);
    }
    ASSERT_EQ(
        json_integer_value(json_object_get(json_object_get(config, "limits"), "max_tool_rounds")),
        4);
    json_decref(v);
    /* And it may call them: each is among the tools the gate lets it call. */
    ASSERT_OK(vigil_tool_list_for_agent(t.rt, agent, &text, E));
    for (size_t i = 0; i < VG_ARRAY_LEN(seed_tools); i++) {
        char quoted[80];
        snprintf(quoted, sizeof quoted, "\"name\":\"%s\"", seed_tools[i]);
        ASSERT(strstr(text, quoted));
    }
    vigil_free(text);
    vg_todo_close(todo);
    test_rt_close(&t);
}

/* A reply's error code, or NULL when it applied. */
static const char *refusal(struct vg_todo *todo, const char *op, json_t *args)
{
    static char code[64];
    json_t *reply = NULL;
    ASSERT_OK(vg_todo_apply(todo, op, NULL, args, &reply, E));
    const char *c = field(json_object_get(reply, "error"), "code");
    snprintf(code, sizeof code, "%s", c ? c : "");
    json_decref(reply);
    json_decref(args);
    return c ? code : NULL;
}

/* n copies of the character ch (owned). */
static char *repeat(const char *ch, size_t n)
{
    size_t len = strlen(ch);
    char *s = malloc(len * n + 1);
    ASSERT(s);
    for (size_t i = 0; i < n; i++)
        memcpy(s + i * len, ch, len);
    s[len * n] = '\0';
    return s;
}

/* A title or a checklist item is at most 500 characters, from a person as from an agent (the
 * tools' schemas said so, but a person's edit reached the database with any length). */
TEST(titles_and_checklist_items_are_at_most_500_characters)
{
    struct test_rt t;
    char work[64], home[64];
    test_rt_open(&t, "todo_texts");
    struct vg_todo *todo = open_todo(&t);
    seed(todo, work, home);
    char *x500 = repeat("x", 500), *x501 = repeat("x", 501);
    ASSERT_STREQ(
        refusal(todo, "create_task", json_pack("{s:s, s:s}", "category_id", "work", "title", x501)),
        "invalid_arguments");
    ASSERT_STREQ(
        refusal(todo, "set_task_title", json_pack("{s:s, s:s}", "task_id", work, "title", x501)),
        "invalid_arguments");
    ASSERT_STREQ(refusal(todo, "add_multiple_checklist_items",
                         json_pack("{s:s, s:[s]}", "task_id", work, "items", x501)),
                 "invalid_arguments");
    ASSERT(
        !refusal(todo, "set_task_title", json_pack("{s:s, s:s}", "task_id", work, "title", x500)));
    free(x500);
    free(x501);
    vg_todo_close(todo);
    test_rt_close(&t);
}

/* The follow-up of a task whose title is long in a script of 3-byte characters is titled
 * "Follow-up: TITLE" cut to 500 whole characters (it was cut at 511 bytes, in the middle of one,
 * and the follow-up could then be neither read nor listed). */
TEST(a_follow_up_of_a_long_title_keeps_whole_characters)
{
    struct test_rt t;
    char work[64], home[64], next[64];
    test_rt_open(&t, "todo_follow_title");
    struct vg_todo *todo = open_todo(&t);
    seed(todo, work, home);
    char *kanji = repeat("\xe6\x97\xa5", 200); /* 600 bytes */
    ASSERT(
        !refusal(todo, "set_task_title", json_pack("{s:s, s:s}", "task_id", work, "title", kanji)));
    ASSERT(!refusal(todo, "add_multiple_checklist_items",
                    json_pack("{s:s, s:[s]}", "task_id", work, "items", "left open")));
    json_t *args = json_pack("{s:s}", "task_id", work), *reply = NULL;
    ASSERT_OK(vg_todo_apply(todo, "conclude_task_with_rollover", NULL, args, &reply, E));
    json_decref(args);
    snprintf(next, sizeof next, "%s", field(json_object_get(reply, "result"), "follow_up_task_id"));
    json_decref(reply);
    json_t *f = task(todo, next);
    const char *title = field(f, "title");
    ASSERT(title && !strncmp(title, "Follow-up: ", 11) && !strcmp(title + 11, kanji));
    json_decref(f);
    free(kanji);
    vg_todo_close(todo);
    test_rt_close(&t);
}

/* An agent resolves a task reference and logs a retrospective work session. A reference two
 * tasks match equally is reported ambiguous, naming no task. proves: S0-167 S0-078 */
TEST(a_reference_resolves_to_ranked_candidates_and_a_session_is_logged)
{
    struct test_rt t;
    char work[64], home[64], agent[37], args[400];
    struct vg_tool_outcome o = {0};
    test_rt_open(&t, "todo_resolve");
    struct vg_todo *todo = open_todo(&t);
    seed(todo, work, home);
    json_decref(apply(todo, "create_task", NULL,
                      "{\"category_id\":\"work\",\"title\":\"Review the report\"}"));
    ASSERT_OK(vg_todo_register_tools(t.rt, todo, E));
    make_agent(&t, CFG_WORK, agent);
    ASSERT_EQ(gate(&t, agent, "r-1", "resolve_task_reference",
                   "{\"category_id\":\"work\",\"reference\":\"write the\"}", &o),
              VG_TOOL_OK);
    ASSERT_STREQ(field(o.result, "task_id"), work);
    ASSERT(json_is_false(json_object_get(o.result, "ambiguous")));
    vg_tool_outcome_release(&o);
    ASSERT_EQ(gate(&t, agent, "r-1", "resolve_task_reference",
                   "{\"category_id\":\"work\",\"reference\":\"report\"}", &o),
              VG_TOOL_OK);
    ASSERT(json_is_true(json_object_get(o.result, "ambiguous")));
    ASSERT(json_is_null(json_object_get(o.result, "task_id")));
    ASSERT_EQ(json_array_size(json_object_get(o.result, "candidates")), 2);
    vg_tool_outcome_release(&o);
    /* The test clock's now is the reference: an hour that ended before it is retrospective. */
    char at[32];
    vg_time_format_ms(at, vg_clock_now_ms(&t.clock.base) - 2 * 3600 * 1000);
    snprintf(args, sizeof args,
             "{\"task_id\":\"%s\",\"started_at\":\"%s\",\"minutes\":60,\"note\":\"draft\"}", work,
             at);
    ASSERT_EQ(gate(&t, agent, "r-1", "create_retrospective_time_entry", args, &o), VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    vg_time_format_ms(at, vg_clock_now_ms(&t.clock.base) - 30 * 60 * 1000);
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"started_at\":\"%s\",\"minutes\":60}", work,
             at);
    ASSERT_EQ(gate(&t, agent, "r-1", "create_retrospective_time_entry", args, &o),
              VG_TOOL_INVALID_ARGUMENTS); /* it would end in the future */
    vg_tool_outcome_release(&o);
    json_t *w = task(todo, work);
    ASSERT_EQ(json_array_size(json_object_get(w, "time_entries")), 1);
    json_decref(w);
    /* Every task of the category is considered: an exact title made after 70 near ones wins. */
    json_decref(apply(todo, "create_category", NULL, "{\"id\":\"bulk\"}"));
    for (int i = 0; i < 70; i++) {
        snprintf(args, sizeof args, "{\"category_id\":\"bulk\",\"title\":\"Weekly report %d\"}", i);
        json_decref(apply(todo, "create_task", NULL, args));
    }
    char exact[64];
    json_t *r = apply(todo, "create_task", NULL, "{\"category_id\":\"bulk\",\"title\":\"Report\"}");
    result_str(r, "task_id", exact);
    json_decref(r);
    r = apply(todo, "resolve_task_reference", NULL,
              "{\"category_id\":\"bulk\",\"reference\":\"report\"}");
    json_t *res = json_object_get(r, "result");
    ASSERT_STREQ(field(res, "task_id"), exact);
    ASSERT_EQ(json_array_size(json_object_get(res, "candidates")), 5);
    ASSERT_STREQ(field(json_array_get(json_object_get(res, "candidates"), 1), "title"),
                 "Weekly report 0"); /* among equals, the oldest first */
    json_decref(r);
    vg_todo_close(todo);
    test_rt_close(&t);
}

/* An agent reads the ratings of its category and plans the day around the lowest-rated task;
 * a block of a task of another category is refused. proves: S0-169 */
TEST(an_agent_reads_ratings_and_plans_blocks_of_a_day)
{
    struct test_rt t;
    char work[64], home[64], other[64], agent[37], args[600];
    struct vg_tool_outcome o = {0};
    test_rt_open(&t, "todo_plan");
    struct vg_todo *todo = open_todo(&t);
    seed(todo, work, home);
    json_t *r = apply(todo, "create_task", NULL, "{\"category_id\":\"work\",\"title\":\"Budget\"}");
    result_str(r, "task_id", other);
    json_decref(r);
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"score\":2,\"note\":\"stuck on data\"}",
             work);
    json_decref(apply(todo, "rate_task", NULL, args));
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"score\":3}", work);
    json_decref(apply(todo, "rate_task", NULL, args));
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"score\":5}", other);
    json_decref(apply(todo, "rate_task", NULL, args));
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"score\":1}", home);
    json_decref(apply(todo, "rate_task", NULL, args));
    ASSERT_OK(vg_todo_register_tools(t.rt, todo, E));
    make_agent(&t, CFG_WORK, agent);
    ASSERT_EQ(gate(&t, agent, "p-1", "get_ratings_summary", "{\"category_id\":\"work\"}", &o),
              VG_TOOL_OK);
    ASSERT_EQ(json_integer_value(json_object_get(o.result, "ratings")), 3); /* home's not */
    json_t *lowest = json_array_get(json_object_get(o.result, "tasks"), 0);
    ASSERT_STREQ(field(lowest, "task_id"), work);
    ASSERT_STREQ(field(lowest, "last_note"), "");
    ASSERT(json_real_value(json_object_get(lowest, "average")) == 2.5);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(gate(&t, agent, "p-1", "get_ratings_summary", "{\"category_id\":\"home\"}", &o),
              VG_TOOL_OUT_OF_SCOPE);
    vg_tool_outcome_release(&o);
    /* The plan: the lowest-rated task first thing; moving the block's end replaces it. */
    snprintf(args, sizeof args,
             "{\"category_id\":\"work\",\"day\":\"2026-12-01\",\"blocks\":[{\"start\":"
             "\"09:00\",\"end\":\"10:30\",\"task_id\":\"%s\",\"label\":\"unblock\"}]}",
             work);
    ASSERT_EQ(gate(&t, agent, "p-1", "upsert_day_plan_blocks", args, &o), VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    snprintf(args, sizeof args,
             "{\"category_id\":\"work\",\"day\":\"2026-12-01\",\"blocks\":[{\"start\":"
             "\"09:00\",\"end\":\"11:00\",\"task_id\":\"%s\"},{\"start\":\"11:00\",\"end\":"
             "\"11:30\",\"label\":\"email\"}]}",
             work);
    ASSERT_EQ(gate(&t, agent, "p-2", "upsert_day_plan_blocks", args, &o), VG_TOOL_OK);
    json_t *blocks = json_object_get(o.result, "blocks");
    ASSERT_EQ(json_array_size(blocks), 2);
    ASSERT_STREQ(field(json_array_get(blocks, 0), "end"), "11:00");
    ASSERT_STREQ(field(json_array_get(blocks, 0), "task_id"), work);
    vg_tool_outcome_release(&o);
    /* A task of home in a work plan: the domain refuses it, the plan stays as it was. */
    snprintf(args, sizeof args,
             "{\"category_id\":\"work\",\"day\":\"2026-12-01\",\"blocks\":[{\"start\":"
             "\"13:00\",\"end\":\"14:00\"},{\"start\":\"14:00\",\"end\":\"15:00\","
             "\"task_id\":\"%s\"}]}",
             home);
    ASSERT_EQ(gate(&t, agent, "p-3", "upsert_day_plan_blocks", args, &o), VG_TOOL_UNSAFE_TARGET);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(gate(&t, agent, "p-4", "upsert_day_plan_blocks",
                   "{\"category_id\":\"work\",\"day\":\"2026-12-01\",\"blocks\":[{\"start\":"
                   "\"12:00\",\"end\":\"12:00\"}]}",
                   &o),
              VG_TOOL_INVALID_ARGUMENTS);
    vg_tool_outcome_release(&o);
    vg_todo_close(todo);
    test_rt_close(&t);
}

int main(void)
{
    RUN(a_change_is_kept_in_the_task_database_and_names_its_tokens);
    RUN(a_tool_call_through_the_gate_changes_the_task_and_raises_its_tokens);
    RUN(the_agent_and_host_domains_keep_to_their_own_stores);
    RUN(a_due_date_that_is_no_day_is_refused);
    RUN(an_agent_granted_one_category_cannot_touch_another);
    RUN(a_task_agent_reaches_its_task_and_nothing_else_of_its_category);
    RUN(a_deleted_task_leaves_every_read_and_comes_back_as_it_was);
    RUN(an_operation_id_applies_once);
    RUN(a_call_cut_short_after_its_effect_applies_once_after_the_restart);
    RUN(concluding_a_task_carries_its_open_items_to_a_follow_up);
    RUN(a_person_concluding_a_task_retires_its_agent_and_hands_the_follow_up_on);
    RUN(a_task_agent_is_made_for_its_task);
    RUN(titles_and_checklist_items_are_at_most_500_characters);
    RUN(a_follow_up_of_a_long_title_keeps_whole_characters);
    RUN(a_reference_resolves_to_ranked_candidates_and_a_session_is_logged);
    RUN(an_agent_reads_ratings_and_plans_blocks_of_a_day);
    return 0;
}
