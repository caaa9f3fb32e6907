/*
 * test_todo_story.c: the quick-start story on the reference host domain (docs/todo.md), under
 * the scripted model: create a task agent, a person edits the task, the agent wakes, calls the
 * domain's tools, sets its report, and the report is read back without a model call. The
 * agent's own change to the task does not wake it again.
 */
#include "helpers/test.h"

#include "loop/watch_model.h"
#include "os/fs.h"
#include "runtime/runtime_int.h"
#include "store/store.h"
#include "todo/todo.h"

#include <jansson.h>

/* The tools a task agent of examples/todo is given. */
#define TASK_AGENT_TOOLS                                                                           \
    "[\"get_task\",\"set_task_title\",\"update_task_estimate\",\"update_task_due_date\","          \
    "\"update_task_priority\",\"add_multiple_checklist_items\",\"update_checklist_items\","        \
    "\"set_report\",\"record_observations\"]"

static json_t *apply(struct vg_todo *todo, const char *op, const char *args)
{
    json_t *a = json_loads(args, 0, NULL), *reply = NULL;
    ASSERT(a);
    ASSERT_OK(vg_todo_apply(todo, op, NULL, a, &reply, E));
    json_decref(a);
    ASSERT(json_object_get(reply, "result"));
    return reply;
}

/* The model's turns: read the task, set its estimate, write the report, end; at the next wake,
 * a word. */
static void write_cassette(const char *path, const char *task)
{
    json_t *c = json_pack(
        "{s:i, s:[{s:{s:[{s:s, s:s, s:{s:s}}]}}, {s:{s:[{s:s, s:s, s:{s:s, s:i}}]}},"
        " {s:{s:[{s:s, s:s, s:{s:s, s:s}}]}}, {s:{s:s}}, {s:{s:s}}]}",
        "vigil_cassette", 1, "exchanges", "response", "tool_calls", "id", "c1", "name", "get_task",
        "arguments", "task_id", task, "response", "tool_calls", "id", "c2", "name",
        "update_task_estimate", "arguments", "task_id", task, "estimate_minutes", 120, "response",
        "tool_calls", "id", "c3", "name", "set_report", "arguments", "scope", "current", "markdown",
        "## Write the report\n2 checklist items open; estimate set to 2 h.", "response", "text",
        "done", "response", "text", "an item is done");
    ASSERT(c);
    char *text = json_dumps(c, JSON_COMPACT);
    json_decref(c);
    ASSERT_OK(vg_fs_write_file(path, text, strlen(text), E));
    free(text);
}

static json_t *shown(vigil_runtime *rt, const char *agent)
{
    char *out = NULL;
    ASSERT_OK(vigil_agent_show(rt, agent, &out, E));
    json_t *v = json_loads(out, 0, NULL);
    vigil_free(out);
    ASSERT(v);
    return v;
}

/* How many records of kind the agent owns in the agent store at path, as the store gives them
 * (a row may hold several of a step's messages: docs/internals/STORE.md). */
static int64_t owned(const char *path, const char *agent, const char *kind)
{
    struct vg_store_options o = {.read_only = 1};
    struct vg_store *s = NULL;
    struct vg_query q = {.kind = kind, .owner = agent};
    int64_t n = -1;
    ASSERT_OK(vg_store_open(path, &o, &s, E));
    ASSERT_OK(vg_store_count(s, &q, &n, E));
    vg_store_close(s);
    return n;
}

/* The task agent owns, in the agent store, its report, its messages, its wake
 * history and the records of its tool calls (its runs' journals and its tool gate's
 * operations): each is a record whose owner is the agent. proves: S3-002 */
static void owns_its_records(const char *path, const char *agent)
{
    ASSERT_EQ(owned(path, agent, "report"), 1);   /* the first wake set it */
    ASSERT_EQ(owned(path, agent, "wake_run"), 2); /* the two wakes */
    ASSERT_EQ(owned(path, agent, "run"), 2);      /* the runs they ran */
    ASSERT(owned(path, agent, "message") >= 8);   /* two wakes' turns */
    ASSERT(owned(path, agent, "operation") >= 2); /* its tool calls through the gate */
    ASSERT(owned(path, agent, "journal") >= 4);   /* its runs' journals */
    ASSERT_EQ(owned(path, "", "report") + owned(path, "", "wake_run"), 0);
}

/* proves: S3-072 S3-042 (an item's change raises its task's id: a new item is watched with no
 * rebuild) */
TEST(create_a_task_agent_edit_the_task_the_agent_wakes_and_its_report_updates)
{
    const char *dir = vg_test_tmpdir("todo_story");
    char path[4200], cassette[4200], task[64], agent[37], sub_spec[200], *sub = NULL;
    struct vg_todo *todo = NULL;
    snprintf(path, sizeof path, "%s/tasks.db", dir);
    ASSERT_OK(vg_todo_open(path, 1, NULL, NULL, &todo, E));
    json_decref(apply(todo, "create_category", "{\"id\":\"work\"}"));
    json_t *r =
        apply(todo, "create_task", "{\"category_id\":\"work\",\"title\":\"Write the report\"}");
    snprintf(task, sizeof task, "%s",
             json_string_value(json_object_get(json_object_get(r, "result"), "task_id")));
    json_decref(r);

    snprintf(cassette, sizeof cassette, "%s/model.json", dir);
    write_cassette(cassette, task);
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    setenv("VIGIL_MODEL_CASSETTE", cassette, 1);
    unsetenv("VIGIL_CONFIG");
    unsetenv("VIGIL_WAKE_RUNNER");
    snprintf(path, sizeof path, "%s/app.db", dir);
    vigil_runtime_options ro;
    vigil_runtime_options_default(&ro);
    ro.store_uri = path;
    ro.create_if_missing = 1;
    vigil_runtime *rt = NULL;
    ASSERT_OK(vigil_runtime_open(&ro, &rt, E));
    ASSERT_OK(vg_todo_register_tools(rt, todo, E));

    /* Create the task agent as `vigil todo agent` does: its task alone, subscribed to it. */
    char config[600];
    snprintf(config, sizeof config,
             "{\"tools\":" TASK_AGENT_TOOLS ",\"allowed_scopes\":[\"work/%s\"],\"capabilities\":"
             "[\"taskRead\",\"taskWrite\",\"checklistWrite\"]}",
             task);
    vigil_agent_spec spec = {.name = "report-task", .config_json = config};
    ASSERT_OK(vigil_agent_create(rt, &spec, agent, E));
    snprintf(sub_spec, sizeof sub_spec, "{\"tokens\":[\"%s\"]}", task);
    ASSERT_OK(vigil_subscription_add(rt, agent, sub_spec, &sub, E));
    vigil_free(sub);

    /* A person edits the task. */
    char args[300];
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"items\":[\"outline\",\"draft\"]}", task);
    r = apply(todo, "add_multiple_checklist_items", args);
    ASSERT_OK(vg_todo_notify(rt, r, E));
    char item[64];
    snprintf(item, sizeof item, "%s",
             json_string_value(
                 json_array_get(json_object_get(json_object_get(r, "result"), "item_ids"), 0)));
    json_decref(r);

    /* The agent wakes, calls the tools, sets its report. */
    int ran = 0;
    ASSERT_OK(vigil_wake_process(rt, 0, &ran, E));
    ASSERT_EQ(ran, 1);
    snprintf(args, sizeof args, "{\"task_id\":\"%s\"}", task);
    r = apply(todo, "get_task", args);
    ASSERT_EQ(json_integer_value(json_object_get(json_object_get(r, "result"), "estimate_minutes")),
              120);
    json_decref(r);

    /* Inspect it: the report is read back without a model call. */
    json_t *v = shown(rt, agent);
    json_t *rep = json_object_get(v, "report");
    ASSERT_CONTAINS(json_string_value(json_object_get(rep, "markdown")), "estimate set to 2 h");
    json_decref(v);

    /* The agent's own change to its task does not wake it again. */
    ASSERT_OK(vigil_wake_process(rt, 0, &ran, E));
    ASSERT_EQ(ran, 0);

    /* An item added after the agent was made is watched as well: a person ticking it wakes
     * the agent (its change raises the task's id, which the subscription names). */
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"items\":[{\"id\":\"%s\",\"done\":true}]}",
             task, item);
    r = apply(todo, "update_checklist_items", args);
    ASSERT_OK(vg_todo_notify(rt, r, E));
    json_decref(r);
    ASSERT_OK(vigil_wake_process(rt, 0, &ran, E));
    ASSERT_EQ(ran, 1);
    owns_its_records(path, agent);
    vigil_runtime_close(rt);
    vg_todo_close(todo);
}

/* The wake inputs of an agent's runs, oldest first, read through the run history API (the
 * first message of each run, in full), into out[]; how many. */
static int wake_inputs(vigil_runtime *rt, const char *agent, char out[][8192], int max)
{
    char *text = NULL;
    size_t i;
    json_t *run;
    int n = 0;
    ASSERT_OK(vigil_runs_list(rt, agent, NULL, NULL, 100, &text, E));
    json_t *runs = json_loads(text, 0, NULL);
    vigil_free(text);
    size_t total = json_array_size(json_object_get(runs, "items"));
    for (i = total; i-- > 0 && n < max;) { /* newest first: walk back */
        run = json_array_get(json_object_get(runs, "items"), i);
        const char *run_id = json_string_value(json_object_get(run, "run_id"));
        ASSERT_OK(vigil_run_messages(rt, run_id, NULL, 1, &text, E));
        json_t *msgs = json_loads(text, 0, NULL);
        vigil_free(text);
        const char *rec = json_string_value(
            json_object_get(json_array_get(json_object_get(msgs, "items"), 0), "record_id"));
        ASSERT(rec);
        ASSERT_OK(vigil_run_message(rt, rec, &text, E));
        json_decref(msgs);
        json_t *m = json_loads(text, 0, NULL);
        vigil_free(text);
        const char *content = json_string_value(json_object_get(m, "content"));
        snprintf(out[n++], 8192, "%s", content ? content : "");
        json_decref(m);
    }
    json_decref(runs);
    return n;
}

/* The model's turns of the next story: the first agent's first wake writes its report; the
 * follow-up's agent and the first agent's second wake only answer. */
static void write_context_cassette(const char *path)
{
    json_t *c = json_pack("{s:i, s:[{s:{s:[{s:s, s:s, s:{s:s, s:s}}]}}, {s:{s:s}}, {s:{s:s}},"
                          " {s:{s:s}}]}",
                          "vigil_cassette", 1, "exchanges", "response", "tool_calls", "id", "c1",
                          "name", "set_report", "arguments", "scope", "current", "markdown",
                          "Launch plan drafted, venue open", "response", "text", "reported",
                          "response", "text", "looked", "response", "text", "updated");
    ASSERT(c);
    char *text = json_dumps(c, JSON_COMPACT);
    json_decref(c);
    ASSERT_OK(vg_fs_write_file(path, text, strlen(text), E));
    free(text);
}

/* A task agent wakes with its task as it is now, in full, and the entities of it that changed
 * highlighted; its first wake asks for a first report and observations, a later one for an
 * update; and a follow-up's agent sees the task it follows up with that task's latest report.
 * proves: S3-005 S3-039 S3-052 */
TEST(a_task_agent_wakes_with_its_task_and_what_changed)
{
    const char *dir = vg_test_tmpdir("todo_context");
    char path[4200], cassette[4200], task[64], next[64], agent[37], next_agent[37], args[300];
    static char inputs[4][8192];
    struct vg_todo *todo = NULL;
    int ran = 0;
    snprintf(path, sizeof path, "%s/tasks.db", dir);
    ASSERT_OK(vg_todo_open(path, 1, NULL, NULL, &todo, E));
    json_decref(apply(todo, "create_category", "{\"id\":\"work\"}"));
    json_t *r =
        apply(todo, "create_task", "{\"category_id\":\"work\",\"title\":\"Plan the launch\"}");
    snprintf(task, sizeof task, "%s",
             json_string_value(json_object_get(json_object_get(r, "result"), "task_id")));
    json_decref(r);
    snprintf(cassette, sizeof cassette, "%s/model.json", dir);
    write_context_cassette(cassette);
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    setenv("VIGIL_MODEL_CASSETTE", cassette, 1);
    unsetenv("VIGIL_CONFIG");
    unsetenv("VIGIL_WAKE_RUNNER");
    snprintf(path, sizeof path, "%s/app.db", dir);
    vigil_runtime_options ro;
    vigil_runtime_options_default(&ro);
    ro.store_uri = path;
    ro.create_if_missing = 1;
    vigil_runtime *rt = NULL;
    ASSERT_OK(vigil_runtime_open(&ro, &rt, E));
    ASSERT_OK(vg_todo_register_tools(rt, todo, E));
    ASSERT_OK(vg_todo_agent_create(rt, todo, task, agent, E));

    /* First wake: a person adds items. */
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"items\":[\"book the venue\"]}", task);
    r = apply(todo, "add_multiple_checklist_items", args);
    ASSERT_OK(vg_todo_notify(rt, r, E));
    char item[64];
    snprintf(item, sizeof item, "%s",
             json_string_value(
                 json_array_get(json_object_get(json_object_get(r, "result"), "item_ids"), 0)));
    json_decref(r);
    ASSERT_OK(vigil_wake_process(rt, 0, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_EQ(wake_inputs(rt, agent, inputs, 4), 1);
    ASSERT_CONTAINS(inputs[0], "Your task as it is now");
    ASSERT_CONTAINS(inputs[0], "Plan the launch");
    ASSERT_CONTAINS(inputs[0], "book the venue"); /* its checklist, in full */
    ASSERT_CONTAINS(inputs[0], "time_entries");
    ASSERT_CONTAINS(inputs[0], "Changed in your task since your last wake");
    ASSERT_CONTAINS(inputs[0], item);
    ASSERT_CONTAINS(inputs[0], "This is your first wake");

    /* A follow-up of the task, with an agent of its own: it sees the task it follows up, with
     * that task's latest report. */
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"title\":\"Run the launch\"}", task);
    r = apply(todo, "create_follow_up_task", args);
    snprintf(next, sizeof next, "%s",
             json_string_value(json_object_get(json_object_get(r, "result"), "task_id")));
    json_decref(r);
    ASSERT_OK(vg_todo_agent_create(rt, todo, next, next_agent, E));
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"priority\":\"high\"}", next);
    r = apply(todo, "update_task_priority", args);
    ASSERT_OK(vg_todo_notify(rt, r, E));
    json_decref(r);
    ASSERT_OK(vigil_wake_process(rt, 0, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_EQ(wake_inputs(rt, next_agent, inputs, 4), 1);
    ASSERT_CONTAINS(inputs[0], "Run the launch");
    ASSERT_CONTAINS(inputs[0], "this task follows it up");
    ASSERT_CONTAINS(inputs[0], "Launch plan drafted, venue open");

    /* The first agent's next wake: the ticked item highlighted, an update asked for; the
     * follow-up is among its linked tasks. */
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"items\":[{\"id\":\"%s\",\"done\":true}]}",
             task, item);
    r = apply(todo, "update_checklist_items", args);
    ASSERT_OK(vg_todo_notify(rt, r, E));
    json_decref(r);
    ASSERT_OK(vigil_wake_process(rt, 0, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_EQ(wake_inputs(rt, agent, inputs, 4), 2);
    ASSERT_CONTAINS(inputs[1], "update the report");
    ASSERT_CONTAINS(inputs[1], item);
    ASSERT_CONTAINS(inputs[1], "a follow-up of this task");
    ASSERT(!strstr(inputs[1], "This is your first wake"));
    vigil_runtime_close(rt);
    vg_todo_close(todo);
}

/* A model that never stops asking for tools: each turn a different change of the estimate (no
 * doom loop), more turns than a wake may take. */
static void write_endless_cassette(const char *path, const char *task)
{
    json_t *ex = json_array();
    ASSERT(ex);
    for (int i = 0; i < 12; i++) {
        char id[16];
        snprintf(id, sizeof id, "c%d", i);
        json_array_append_new(ex, json_pack("{s:{s:[{s:s, s:s, s:{s:s, s:i}}]}}", "response",
                                            "tool_calls", "id", id, "name", "update_task_estimate",
                                            "arguments", "task_id", task, "estimate_minutes",
                                            10 * (i + 1)));
    }
    json_t *c = json_pack("{s:i, s:o}", "vigil_cassette", 1, "exchanges", ex);
    ASSERT(c);
    char *text = json_dumps(c, JSON_COMPACT);
    json_decref(c);
    ASSERT_OK(vg_fs_write_file(path, text, strlen(text), E));
    free(text);
}

/* A task agent's wake takes at most 5 model turns, by default (as `vigil todo agent` makes
 * it): a model that keeps asking for tools gets 4 rounds of them, then one turn without tools
 * to wrap up, and the run ends there. proves: S3-049 */
TEST(a_task_agents_wake_runs_at_most_five_model_turns)
{
    const char *dir = vg_test_tmpdir("todo_turns");
    char path[4200], cassette[4200], task[64], agent[37], args[300], *text = NULL;
    struct vg_todo *todo = NULL;
    int ran = 0;
    snprintf(path, sizeof path, "%s/tasks.db", dir);
    ASSERT_OK(vg_todo_open(path, 1, NULL, NULL, &todo, E));
    json_decref(apply(todo, "create_category", "{\"id\":\"work\"}"));
    json_t *r = apply(todo, "create_task", "{\"category_id\":\"work\",\"title\":\"Endless\"}");
    snprintf(task, sizeof task, "%s",
             json_string_value(json_object_get(json_object_get(r, "result"), "task_id")));
    json_decref(r);
    snprintf(cassette, sizeof cassette, "%s/model.json", dir);
    write_endless_cassette(cassette, task);
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    setenv("VIGIL_MODEL_CASSETTE", cassette, 1);
    unsetenv("VIGIL_CONFIG");
    unsetenv("VIGIL_WAKE_RUNNER");
    snprintf(path, sizeof path, "%s/app.db", dir);
    vigil_runtime_options ro;
    vigil_runtime_options_default(&ro);
    ro.store_uri = path;
    ro.create_if_missing = 1;
    vigil_runtime *rt = NULL;
    ASSERT_OK(vigil_runtime_open(&ro, &rt, E));
    ASSERT_OK(vg_todo_register_tools(rt, todo, E));
    ASSERT_OK(vg_todo_agent_create(rt, todo, task, agent, E));

    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"priority\":\"high\"}", task);
    r = apply(todo, "update_task_priority", args);
    ASSERT_OK(vg_todo_notify(rt, r, E));
    json_decref(r);
    ASSERT_OK(vigil_wake_process(rt, 1, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_OK(vigil_runs_list(rt, agent, NULL, NULL, 10, &text, E));
    json_t *runs = json_loads(text, 0, NULL);
    vigil_free(text);
    json_t *items = json_object_get(runs, "items");
    ASSERT_EQ(json_array_size(items), 1);
    json_t *run = json_array_get(items, 0);
    ASSERT_EQ(json_integer_value(json_object_get(run, "model_calls")), 5);
    /* The fifth turn's call is recorded, refused (limit_reached), and never runs. */
    ASSERT_EQ(json_integer_value(json_object_get(run, "tool_calls")), 5);
    json_decref(runs);
    /* The tools ran four times: the estimate is the fourth turn's. */
    snprintf(args, sizeof args, "{\"task_id\":\"%s\"}", task);
    r = apply(todo, "get_task", args);
    ASSERT_EQ(json_integer_value(json_object_get(json_object_get(r, "result"), "estimate_minutes")),
              40);
    json_decref(r);
    vigil_runtime_close(rt);
    vg_todo_close(todo);
}

/* The first wake: a note, a report, a word; then the re-analysis: a word. */
static const char reanalysis_cassette[] =
    "{\"vigil_cassette\":1,\"exchanges\":["
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"record_observations\","
    "\"arguments\":{\"notes\":[\"NOTE-ONE: the venue is the risk\"]}}]}},"
    "{\"response\":{\"tool_calls\":[{\"id\":\"c2\",\"name\":\"set_report\","
    "\"arguments\":{\"scope\":\"current\",\"markdown\":\"## REPORT-ONE\\nvenue open\"}}]}},"
    "{\"response\":{\"text\":\"FIRST-WAKE-WORDS\"}},"
    "{\"response\":{\"text\":\"re-read\"}}]}";

static int request_has(json_t *req, const char *needle)
{
    char *text = json_dumps(req, JSON_COMPACT);
    int found = text && strstr(text, needle);
    free(text);
    return found;
}

/* A person's re-analysis (a manual wake, `vigil wake AGENT`: no change woke it) runs the task
 * agent with its full context: its prompt, its report, every observation, and its task as it
 * is now, in full, although nothing of the task changed; the earlier wake's raw turns are not
 * replayed. proves: S3-061 */
TEST(a_manual_reanalysis_wake_runs_with_the_full_context)
{
    const char *dir = vg_test_tmpdir("todo_reanalysis");
    char path[4200], cassette[4200], task[64], agent[37], args[300], key[65];
    struct vg_todo *todo = NULL;
    struct watch_model wm;
    int ran = 0;
    snprintf(path, sizeof path, "%s/tasks.db", dir);
    ASSERT_OK(vg_todo_open(path, 1, NULL, NULL, &todo, E));
    json_decref(apply(todo, "create_category", "{\"id\":\"work\"}"));
    json_t *r =
        apply(todo, "create_task", "{\"category_id\":\"work\",\"title\":\"Plan the party\"}");
    snprintf(task, sizeof task, "%s",
             json_string_value(json_object_get(json_object_get(r, "result"), "task_id")));
    json_decref(r);
    snprintf(cassette, sizeof cassette, "%s/model.json", dir);
    ASSERT_OK(vg_fs_write_file(cassette, reanalysis_cassette, strlen(reanalysis_cassette), E));
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    setenv("VIGIL_MODEL_CASSETTE", cassette, 1);
    unsetenv("VIGIL_CONFIG");
    unsetenv("VIGIL_WAKE_RUNNER");
    snprintf(path, sizeof path, "%s/app.db", dir);
    vigil_runtime_options ro;
    vigil_runtime_options_default(&ro);
    ro.store_uri = path;
    ro.create_if_missing = 1;
    vigil_runtime *rt = NULL;
    ASSERT_OK(vigil_runtime_open(&ro, &rt, E));
    ASSERT_OK(vg_todo_register_tools(rt, todo, E));
    ASSERT_OK(vg_todo_agent_create(rt, todo, task, agent, E));
    ASSERT_OK(vg_runtime_prepare(rt, E));
    watch_model_init(&wm, rt->model);
    wm.keep = 1;
    rt->model = &wm.base;

    /* First wake: a person adds an item; the agent notes, reports, answers. */
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"items\":[\"book the venue\"]}", task);
    r = apply(todo, "add_multiple_checklist_items", args);
    ASSERT_OK(vg_todo_notify(rt, r, E));
    json_decref(r);
    ASSERT_OK(vigil_wake_process(rt, 0, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_EQ(json_array_size(wm.requests), 3);

    /* The re-analysis: woken by hand, nothing changed. */
    ASSERT_OK(vigil_wake_agent(rt, agent, NULL, NULL, key, E));
    ASSERT_OK(vigil_wake_process(rt, 0, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_EQ(json_array_size(wm.requests), 4);
    json_t *req = json_array_get(wm.requests, 3);
    ASSERT(request_has(req, "You look after one task"));         /* the prompt */
    ASSERT(request_has(req, "REPORT-ONE"));                      /* the report */
    ASSERT(request_has(req, "NOTE-ONE: the venue is the risk")); /* the observations */
    ASSERT(request_has(req, "reason manual"));
    ASSERT(request_has(req, "Your task as it is now")); /* the task, in full */
    ASSERT(request_has(req, "Plan the party"));
    ASSERT(request_has(req, "book the venue"));
    ASSERT(!request_has(req, "FIRST-WAKE-WORDS")); /* not the first wake's raw turns */
    rt->model = wm.inner;
    watch_model_release(&wm);
    vigil_runtime_close(rt);
    vg_todo_close(todo);
}

/* The task agent reaches for another task of its category: get_task of it, then a word. */
static void write_reaching_cassette(const char *path, const char *other)
{
    json_t *c = json_pack("{s:i, s:[{s:{s:[{s:s, s:s, s:{s:s}}]}}, {s:{s:s}}]}", "vigil_cassette",
                          1, "exchanges", "response", "tool_calls", "id", "c1", "name", "get_task",
                          "arguments", "task_id", other, "response", "text", "ok");
    ASSERT(c);
    char *text = json_dumps(c, JSON_COMPACT);
    json_decref(c);
    ASSERT_OK(vg_fs_write_file(path, text, strlen(text), E));
    free(text);
}

/* A task agent's model input is its own task and the tasks linked to it: woken by a batch in
 * which another task of its category changed too, and asking for that task, it is sent its own
 * task in full and the other's id at most (a token of the batch), never the other task's
 * content: the read is refused out of scope. proves: S3-007 */
TEST(a_task_agents_model_input_is_its_task_and_linked_tasks_only)
{
    const char *dir = vg_test_tmpdir("todo_bounded");
    char path[4200], cassette[4200], task[64], other[64], agent[37], args[300];
    struct vg_todo *todo = NULL;
    struct watch_model wm;
    int ran = 0;
    snprintf(path, sizeof path, "%s/tasks.db", dir);
    ASSERT_OK(vg_todo_open(path, 1, NULL, NULL, &todo, E));
    json_decref(apply(todo, "create_category", "{\"id\":\"work\"}"));
    json_t *r = apply(todo, "create_task", "{\"category_id\":\"work\",\"title\":\"OWN-TITLE\"}");
    snprintf(task, sizeof task, "%s",
             json_string_value(json_object_get(json_object_get(r, "result"), "task_id")));
    json_decref(r);
    r = apply(todo, "create_task", "{\"category_id\":\"work\",\"title\":\"OTHER-TITLE\"}");
    snprintf(other, sizeof other, "%s",
             json_string_value(json_object_get(json_object_get(r, "result"), "task_id")));
    json_decref(r);
    snprintf(cassette, sizeof cassette, "%s/model.json", dir);
    write_reaching_cassette(cassette, other);
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    setenv("VIGIL_MODEL_CASSETTE", cassette, 1);
    unsetenv("VIGIL_CONFIG");
    unsetenv("VIGIL_WAKE_RUNNER");
    snprintf(path, sizeof path, "%s/app.db", dir);
    vigil_runtime_options ro;
    vigil_runtime_options_default(&ro);
    ro.store_uri = path;
    ro.create_if_missing = 1;
    vigil_runtime *rt = NULL;
    ASSERT_OK(vigil_runtime_open(&ro, &rt, E));
    ASSERT_OK(vg_todo_register_tools(rt, todo, E));
    ASSERT_OK(vg_todo_agent_create(rt, todo, task, agent, E));
    ASSERT_OK(vg_runtime_prepare(rt, E));
    watch_model_init(&wm, rt->model);
    wm.keep = 1;
    rt->model = &wm.base;

    /* Both tasks change before the agent wakes: one batch. */
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"items\":[\"OWN-ITEM\"]}", task);
    r = apply(todo, "add_multiple_checklist_items", args);
    ASSERT_OK(vg_todo_notify(rt, r, E));
    json_decref(r);
    snprintf(args, sizeof args, "{\"task_id\":\"%s\",\"items\":[\"OTHER-ITEM\"]}", other);
    r = apply(todo, "add_multiple_checklist_items", args);
    ASSERT_OK(vg_todo_notify(rt, r, E));
    json_decref(r);
    ASSERT_OK(vigil_wake_process(rt, 0, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_EQ(json_array_size(wm.requests), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *req = json_array_get(wm.requests, i);
        ASSERT(request_has(req, "OWN-TITLE"));
        ASSERT(request_has(req, "OWN-ITEM"));
        ASSERT(!request_has(req, "OTHER-TITLE"));
        ASSERT(!request_has(req, "OTHER-ITEM"));
    }
    ASSERT(request_has(json_array_get(wm.requests, 1), "out_of_scope")); /* the read refused */
    rt->model = wm.inner;
    watch_model_release(&wm);
    vigil_runtime_close(rt);
    vg_todo_close(todo);
}

int main(void)
{
    RUN(create_a_task_agent_edit_the_task_the_agent_wakes_and_its_report_updates);
    RUN(a_task_agent_wakes_with_its_task_and_what_changed);
    RUN(a_task_agents_wake_runs_at_most_five_model_turns);
    RUN(a_manual_reanalysis_wake_runs_with_the_full_context);
    RUN(a_task_agents_model_input_is_its_task_and_linked_tasks_only);
    return 0;
}
