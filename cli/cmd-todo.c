/*
 * cmd-todo.c: `vigil todo`: a person's side of the reference host domain (src/todo,
 * docs/todo.md). Each edit is applied to the task database and its tokens raised on the store,
 * so the agents subscribed to what changed wake (in this process when no daemon runs, as after
 * `vigil notify`). Also where the command attaches the domain's tools to the runtimes it opens.
 */
#include "cli.h"

#include "config/config.h"
#include "os/fs.h"
#include "todo/todo.h"

static const char todo_help[] =
    "usage: vigil todo category add ID [--name NAME]\n"
    "       vigil todo add CATEGORY TITLE [--estimate MIN] [--due YYYY-MM-DD] [--priority P]\n"
    "       vigil todo edit TASK [--title T] [--estimate MIN] [--due YYYY-MM-DD|none]\n"
    "                            [--priority low|normal|high|urgent]\n"
    "       vigil todo item add TASK TEXT...\n"
    "       vigil todo item done|undo TASK ITEM\n"
    "       vigil todo conclude TASK\n"
    "       vigil todo rate TASK 1-5 [--note TEXT]\n"
    "       vigil todo list CATEGORY [--all] [--json]\n"
    "       vigil todo show TASK [--json]\n"
    "       vigil todo agent TASK\n"
    "       vigil todo delete|restore TASK\n"
    "\n"
    "The reference task domain, kept in its own database (tasks.db beside the store, or the\n"
    "config's todo.path). Every edit wakes the agents subscribed to what it changed; `todo\n"
    "agent` makes a task agent for a task: it wakes when the task changes, may use the task\n"
    "tools on that task only, and keeps a report (`vigil agent show AGENT`). `todo delete`\n"
    "keeps the task, marked deleted, and turns its agent dormant; `todo restore` brings both\n"
    "back.\n";

/* Where the task database is: the config's todo.path, else tasks.db beside a file store.
 * 0, or 1 when there is no place for it (a PostgreSQL store and no todo.path). */
static int todo_path(struct cli *c, char *out, size_t n)
{
    struct vg_config *cfg = NULL;
    vigil_error err = {0};
    const char *p = NULL;
    if (vg_config_load(NULL, &cfg, &err) == VIGIL_OK)
        p = vg_config_get_string(cfg, "todo.path", NULL);
    if (p && *p)
        snprintf(out, n, "%s", p);
    vg_config_free(cfg);
    if (p && *p)
        return 0;
    if (strstr(c->store_path, "://"))
        return 1;
    char dir[4096];
    vg_fs_dirname(c->store_path, dir, sizeof dir);
    snprintf(out, n, "%s/tasks.db", dir);
    return 0;
}

static vigil_code attach(struct cli *c, vigil_runtime *rt, int create, vigil_error *err)
{
    char path[4200];
    vigil_code rc;
    if (!c->todo) {
        if (todo_path(c, path, sizeof path))
            return create ? VG_FAIL(err, VIGIL_EINVAL,
                                    "the task database needs todo.path in the config file "
                                    "when the store is not a file")
                          : VIGIL_OK;
        if (!create && !vg_fs_exists(path))
            return VIGIL_OK; /* the domain is off until its database exists */
        if ((rc = vg_todo_open(path, create, NULL, NULL, &c->todo, err)))
            return rc;
    }
    if (c->todo_attached || !rt)
        return VIGIL_OK;
    c->todo_attached = 1;
    return vg_todo_register_tools(rt, c->todo, err);
}

/*
 * Registering the domain's tools builds the runtime's whole tool executor and parses 15
 * contracts: 10.8 M instructions, 3.5 times what `vigil agent list` costs without it
 * (docs/internals/PERF.md, "Session 34: the task domain's tools"). These commands never call a
 * tool, run an agent or list tools, so they go without (a subcommand NULL: every one).
 */
static const struct {
    const char *command, *subcommand;
} without_tools[] = {
    {"init", NULL},      {"help", NULL},       {"token", NULL},     {"wakes", NULL},
    {"indoubt", NULL},   {"approvals", NULL},  {"kill", NULL},      {"prune", NULL},
    {"journal", NULL},   {"replay", NULL},     {"memory", NULL},    {"subscription", NULL},
    {"timer", NULL},     {"agent", "list"},    {"agent", "show"},   {"agent", "pause"},
    {"agent", "resume"}, {"agent", "destroy"}, {"agent", "delete"}, {"agent", "export"},
    {"agent", "tree"},   {"runs", "list"},     {"runs", "show"},    {"runs", "messages"},
    {"runs", "message"}, {"runs", "tools"},    {"runs", "tool"},    {"runs", "cancel"},
};

static int needs_tools(const struct cli *c)
{
    for (size_t i = 0; c->command && i < VG_ARRAY_LEN(without_tools); i++)
        if (!strcmp(c->command, without_tools[i].command) &&
            (!without_tools[i].subcommand ||
             (c->subcommand && !strcmp(c->subcommand, without_tools[i].subcommand))))
            return 0;
    return 1;
}

int cli_todo_attach(struct cli *c)
{
    vigil_error err = {0};
    if (!needs_tools(c))
        return 0;
    if (attach(c, c->rt, 0, &err))
        return cli_fail(&err);
    return 0;
}

void cli_todo_close(struct cli *c)
{
    vg_todo_close(c->todo);
    c->todo = NULL;
}

vigil_code cli_todo_on_runtime(void *user, vigil_runtime *rt, vigil_error *err)
{
    struct cli *c = user;
    return c->todo ? vg_todo_register_tools(rt, c->todo, err) : VIGIL_OK;
}

/* Open the store and the task database (creating it). Exits on failure. */
static void open_todo(struct cli *c)
{
    vigil_error err = {0};
    cli_open(c, 0);
    if (attach(c, c->rt, 1, &err))
        exit(cli_fail(&err));
}

/* Apply op; print the result (or the refusal, as the exit status); raise the tokens and run
 * the wakes they queued. */
/* Apply op with args (taken) on the task database: 0 with *reply (owned), or the exit status
 * of a failure, or of a refusal (refused: its code), said on stderr. */
static int apply_op(struct cli *c, const char *op, json_t *args, vigil_code refused, json_t **reply)
{
    vigil_error err = {0};
    json_t *fault;
    *reply = NULL;
    open_todo(c);
    vigil_code rc = vg_todo_apply(c->todo, op, NULL, args, reply, &err);
    json_decref(args);
    if (rc)
        return cli_fail(&err);
    if ((fault = json_object_get(*reply, "error"))) {
        fprintf(stderr, "vigil: %s\n", json_string_value(json_object_get(fault, "message")));
        json_decref(*reply);
        *reply = NULL;
        return vigil_code_exit_status(refused);
    }
    return 0;
}

static int change(struct cli *c, const char *op, json_t *args, int quiet)
{
    vigil_error err = {0};
    json_t *reply = NULL;
    int status = apply_op(c, op, args, VIGIL_EINVAL, &reply);
    if (status)
        return status;
    if (!quiet) {
        char *text = json_dumps(json_object_get(reply, "result"), JSON_INDENT(2));
        if (text)
            puts(text);
        free(text);
    }
    vigil_code rc = vg_todo_notify(c->rt, reply, &err);
    json_decref(reply);
    return rc ? cli_fail(&err) : cli_run_queued(c);
}

/* The task fields of the options into args (owned, NULL after a usage error). */
static json_t *task_fields(json_t *args, const char *est, const char *due, const char *prio)
{
    char *end = NULL;
    long minutes = est ? strtol(est, &end, 10) : 0;
    if (est && (end == est || *end || minutes < 0)) {
        json_decref(args);
        cli_usage("--estimate takes whole minutes");
        return NULL;
    }
    if (est)
        json_object_set_new(args, "estimate_minutes", json_integer(minutes));
    if (due)
        json_object_set_new(args, "due_date", strcmp(due, "none") ? json_string(due) : json_null());
    if (prio)
        json_object_set_new(args, "priority", json_string(prio));
    return args;
}

static int todo_add(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--estimate=", "--due=", "--priority=", NULL};
    struct cli_opts o;
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional != 2)
        return cli_usage("todo add needs CATEGORY and TITLE");
    json_t *args = task_fields(
        json_pack("{s:s, s:s}", "category_id", o.positional[0], "title", o.positional[1]),
        cli_opt(&o, spec, "--estimate"), cli_opt(&o, spec, "--due"),
        cli_opt(&o, spec, "--priority"));
    return args ? change(c, "create_task", args, 0) : CLI_USAGE;
}

/* One edit a field at a time: each is a tool's own change, with its own tokens. */
static int todo_edit(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--title=", "--estimate=", "--due=", "--priority=", NULL};
    static const char *const ops[] = {"set_task_title", "update_task_estimate",
                                      "update_task_due_date", "update_task_priority"};
    struct cli_opts o;
    int rc = 0, any = 0;
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional != 1)
        return cli_usage("todo edit needs TASK");
    for (size_t i = 0; i < VG_ARRAY_LEN(ops) && !rc; i++) {
        const char *v = o.values[i];
        if (!v)
            continue;
        json_t *args = json_pack("{s:s}", "task_id", o.positional[0]);
        if (i == 0)
            json_object_set_new(args, "title", json_string(v));
        else if (!(args =
                       task_fields(args, i == 1 ? v : NULL, i == 2 ? v : NULL, i == 3 ? v : NULL)))
            return CLI_USAGE;
        any = 1;
        rc = change(c, ops[i], args, 0);
    }
    return any ? rc : cli_usage("todo edit needs one of --title, --estimate, --due, --priority");
}

static int todo_item(struct cli *c, int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "add")) {
        json_t *items = json_array();
        for (int i = 3; i < argc; i++)
            json_array_append_new(items, json_string(argv[i]));
        return change(c, "add_multiple_checklist_items",
                      json_pack("{s:s, s:o}", "task_id", argv[2], "items", items), 0);
    }
    if (argc == 4 && (!strcmp(argv[1], "done") || !strcmp(argv[1], "undo")))
        return change(c, "update_checklist_items",
                      json_pack("{s:s, s:[{s:s, s:b}]}", "task_id", argv[2], "items", "id", argv[3],
                                "done", !strcmp(argv[1], "done")),
                      0);
    return cli_usage("todo item add TASK TEXT... | todo item done|undo TASK ITEM");
}

/* A read: the result as JSON, or (for list) a table. */
/* `todo show`: the task's agent when it has one (`vigil todo agent`'s, named "task TASK"):
 * {id, name, lifecycle}; no member at all when there is none. */
static void add_task_agent(struct cli *c, json_t *task)
{
    char name[128], *text = NULL;
    vigil_error err = {0};
    snprintf(name, sizeof name, "task %s", json_string_value(json_object_get(task, "task_id")));
    if (vigil_agent_show(c->rt, cli_agent(c, name), &text, &err))
        return;
    json_t *shown = json_loads(text, 0, NULL), *a = json_object_get(shown, "agent");
    vigil_free(text);
    json_object_set_new(task, "agent",
                        json_pack("{s:O?, s:O?, s:O?}", "id", json_object_get(a, "id"), "name",
                                  json_object_get(a, "name"), "lifecycle",
                                  json_object_get(a, "lifecycle")));
    json_decref(shown);
}

static int todo_read(struct cli *c, const char *op, json_t *args, int json)
{
    json_t *reply = NULL, *t;
    size_t i;
    int status = apply_op(c, op, args, VIGIL_ENOTFOUND, &reply);
    if (status)
        return status;
    json_t *result = json_object_get(reply, "result");
    if (!strcmp(op, "get_task"))
        add_task_agent(c, result);
    if (json || strcmp(op, "list_tasks_in_scope")) {
        char *text = json_dumps(result, JSON_INDENT(2));
        if (text)
            puts(text);
        free(text);
    } else {
        printf("%-41s  %-9s  %-8s  %-10s  %s\n", "TASK", "STATUS", "PRIORITY", "DUE", "TITLE");
        json_array_foreach (json_object_get(result, "tasks"), i, t) {
            const char *due = json_string_value(json_object_get(t, "due_date"));
            printf("%-41s  %-9s  %-8s  %-10s  %s\n",
                   json_string_value(json_object_get(t, "task_id")),
                   json_string_value(json_object_get(t, "status")),
                   json_string_value(json_object_get(t, "priority")), due ? due : "-",
                   json_string_value(json_object_get(t, "title")));
        }
    }
    json_decref(reply);
    return 0;
}

/* The task agent's tools (S3-045), and get_task to read its task. */
#define TASK_AGENT_TOOLS                                                                           \
    "[\"get_task\",\"set_task_title\",\"update_task_estimate\",\"update_task_due_date\","          \
    "\"update_task_priority\",\"add_multiple_checklist_items\",\"update_checklist_items\","        \
    "\"set_report\",\"record_observations\"]"

static const char task_agent_prompt[] =
    "You look after one task of a person's to-do list: task %s. You wake when it changes. "
    "Read it with get_task, then improve what clearly needs it with your tools (a vague title, "
    "a missing estimate, checklist items that are done or missing); change nothing you are "
    "unsure of. Then write a short markdown report with set_report (scope current): where the "
    "task stands, what is left, what you changed and why. Keep private notes for your next "
    "wake with record_observations.";

/* `vigil todo agent TASK`: a task agent for the task (examples/todo/task-agent.yaml says the
 * same as a manifest). Its name is derived from the task id, and a name belongs to one live
 * agent: a second agent for the same task is refused (EEXISTS), even by a concurrent create. */
static int todo_agent(struct cli *c, const char *task)
{
    vigil_error err = {0};
    char scope[256], name[128], prompt[1024], config[1024], spec_json[256], id[37];
    char *sub = NULL;
    open_todo(c);
    /* The task's own scope, CATEGORY/TASK: the agent may touch its task and nothing else of
     * the category (docs/todo.md). */
    if (!vg_todo_scope_of(c->todo, task, scope, sizeof scope)) {
        fprintf(stderr, "vigil: no task \"%s\"\n", task);
        return vigil_code_exit_status(VIGIL_ENOTFOUND);
    }
    snprintf(name, sizeof name, "task %s", task);
    snprintf(prompt, sizeof prompt, task_agent_prompt, task);
    json_t *scopes = json_pack("[s]", scope);
    char *scopes_text = json_dumps(scopes, JSON_COMPACT);
    json_decref(scopes);
    snprintf(config, sizeof config,
             "{\"tools\":" TASK_AGENT_TOOLS
             ",\"allowed_scopes\":%s,\"limits\":{\"max_tool_rounds\":5}}",
             scopes_text ? scopes_text : "[]");
    free(scopes_text);
    vigil_agent_spec spec = {.name = name,
                             .kind = "task_agent",
                             .mode = "autonomous",
                             .prompt = prompt,
                             .config_json = config};
    if (vigil_agent_create(c->rt, &spec, id, &err))
        return cli_fail(&err);
    /* The task is what the agent relies on: `todo delete` finds its agents from it. */
    if (vigil_source_ref_add(c->rt, id, "task", task, &err))
        return cli_fail(&err);
    snprintf(spec_json, sizeof spec_json, "{\"id\":\"watch-%s\",\"tokens\":[\"%s\"]}", task, task);
    if (vigil_subscription_add(c->rt, id, spec_json, &sub, &err))
        return cli_fail(&err);
    vigil_free(sub);
    puts(id);
    return 0;
}

static int todo_reads(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--all", "--json", NULL};
    struct cli_opts o;
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    int json = cli_opt(&o, spec, "--json") != NULL;
    if (o.n_positional != 1)
        return cli_usage("todo %s needs one argument", argv[0]);
    if (!strcmp(argv[0], "list"))
        return todo_read(c, "list_tasks_in_scope",
                         json_pack("{s:s, s:s}", "category_id", o.positional[0], "status",
                                   cli_opt(&o, spec, "--all") ? "all" : "open"),
                         json);
    if (!strcmp(argv[0], "show"))
        return todo_read(c, "get_task", json_pack("{s:s}", "task_id", o.positional[0]), 1);
    if (!strcmp(argv[0], "conclude"))
        return change(c, "conclude_task_with_rollover",
                      json_pack("{s:s}", "task_id", o.positional[0]), 0);
    return todo_agent(c, o.positional[0]);
}

static int todo_rate(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--note=", NULL};
    struct cli_opts o;
    char *end = NULL;
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    long score = o.n_positional == 2 ? strtol(o.positional[1], &end, 10) : 0;
    if (o.n_positional != 2 || *end || score < 1 || score > 5)
        return cli_usage("todo rate needs TASK and a score of 1 to 5");
    const char *note = cli_opt(&o, spec, "--note");
    return change(c, "rate_task",
                  json_pack("{s:s, s:i, s:s}", "task_id", o.positional[0], "score", (int)score,
                            "note", note ? note : ""),
                  0);
}

/* One agent relying on the task turned dormant when its task is deleted, before the change (so
 * no wake of it acts on a task that is gone), and active again when it comes back, before the
 * change that wakes it to look at its task. Its report, memory and history stay; an agent that
 * is not there, or not in a state to change, is left as is. */
static void task_agent_move(struct cli *c, const char *id, const char *task, int deleted)
{
    char reason[200], *shown = NULL;
    vigil_error err = {0};
    if (vigil_agent_show(c->rt, id, &shown, &err))
        return;
    json_t *v = json_loads(shown, 0, NULL);
    vigil_free(shown);
    char name[256];
    snprintf(name, sizeof name, "%s",
             v ? json_string_value(json_object_get(json_object_get(v, "agent"), "name")) : id);
    json_decref(v);
    snprintf(reason, sizeof reason, deleted ? "its task %s was deleted" : "its task %s is back",
             task);
    vigil_code rc = deleted ? vigil_agent_pause(c->rt, id, reason, &err)
                            : vigil_agent_resume(c->rt, id, reason, &err);
    /* A task agent that never ran is still `created`, which turns dormant only through active
     * (the lifecycle's diagram): that step is taken first. */
    if (deleted && rc == VIGIL_ESTATE && !vigil_agent_resume(c->rt, id, reason, &err))
        rc = vigil_agent_pause(c->rt, id, reason, &err);
    if (!rc)
        fprintf(stderr, "vigil: agent \"%s\" is %s: %s\n", name, deleted ? "dormant" : "active",
                reason);
}

/* Every agent that relies on the task (its source references, `vigil todo agent`'s among them),
 * and the agent named "task TASK" of a store written before source references. */
static void task_agent_follow(struct cli *c, const char *task, int deleted)
{
    char name[128], *json = NULL;
    vigil_error err = {0};
    json_t *ids = NULL, *one;
    size_t i;
    if (!vigil_source_ref_agents(c->rt, "task", task, &json, &err))
        ids = json_loads(json, 0, NULL);
    vigil_free(json);
    json_array_foreach (ids, i, one)
        task_agent_move(c, json_string_value(one), task, deleted);
    char named[64];
    snprintf(name, sizeof name, "task %s", task);
    int seen = !cli_agent_named(c, name, named);
    json_array_foreach (ids, i, one)
        seen |= !strcmp(json_string_value(one), named);
    if (!seen)
        task_agent_move(c, named, task, deleted);
    json_decref(ids);
}

static int todo_delete_restore(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {NULL};
    struct cli_opts o;
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional != 1)
        return cli_usage("todo %s needs one task", argv[0]);
    int deleted = !strcmp(argv[0], "delete");
    open_todo(c);
    char scope[256];
    /* Only a task that is there (delete) or deleted (restore) moves its agent. */
    if (deleted == vg_todo_scope_of(c->todo, o.positional[0], scope, sizeof scope))
        task_agent_follow(c, o.positional[0], deleted);
    return change(c, deleted ? "delete_task" : "restore_task",
                  json_pack("{s:s}", "task_id", o.positional[0]), 0);
}

int cmd_todo(struct cli *c, int argc, char **argv)
{
    if (argc < 2 || cli_wants_help(argc, argv)) {
        fputs(todo_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : 0;
    }
    const char *verb = argv[1];
    if (!strcmp(verb, "category")) {
        static const char *const spec[] = {"--name=", NULL};
        struct cli_opts o;
        if (cli_parse(argc - 2, argv + 2, spec, &o))
            return CLI_USAGE;
        if (argc < 4 || strcmp(argv[2], "add") || o.n_positional != 1)
            return cli_usage("todo category add ID [--name NAME]");
        const char *name = cli_opt(&o, spec, "--name");
        return change(
            c, "create_category",
            json_pack("{s:s, s:s}", "id", o.positional[0], "name", name ? name : o.positional[0]),
            0);
    }
    if (!strcmp(verb, "add"))
        return todo_add(c, argc - 1, argv + 1);
    if (!strcmp(verb, "edit"))
        return todo_edit(c, argc - 1, argv + 1);
    if (!strcmp(verb, "item"))
        return todo_item(c, argc - 1, argv + 1);
    if (!strcmp(verb, "rate"))
        return todo_rate(c, argc - 1, argv + 1);
    if (!strcmp(verb, "delete") || !strcmp(verb, "restore"))
        return todo_delete_restore(c, argc - 1, argv + 1);
    if (!strcmp(verb, "list") || !strcmp(verb, "show") || !strcmp(verb, "conclude") ||
        !strcmp(verb, "agent"))
        return todo_reads(c, argc - 1, argv + 1);
    return cli_usage("unknown todo command \"%s\"", verb);
}
