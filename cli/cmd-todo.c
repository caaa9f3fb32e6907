/*
 * cmd-todo.c: `vigil todo`: a person's side of the reference host domain (src/todo,
 * docs/todo.md). Each edit is applied to the task database and its tokens raised on the store,
 * so the agents subscribed to what changed wake (in this process when no daemon runs, as after
 * `vigil notify`). Also where the command attaches the domain's tools to the runtimes it opens.
 */
#include "cli.h"
#include "base/json.h"

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

struct vg_todo *cli_todo_domain(struct cli *c)
{
    vigil_error err = {0};
    if (attach(c, NULL, 0, &err))
        exit(cli_fail(&err));
    return c->todo;
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

/* A refused operation's reply said on stderr; the exit status: 3 when what it names is not
 * there (a missing thing, as everywhere in the command), else refused's. */
static int refusal(const json_t *fault, vigil_code refused)
{
    fprintf(stderr, "vigil: %s\n", json_string_value(json_object_get(fault, "message")));
    return vigil_code_exit_status(json_is_true(json_object_get(fault, "missing")) ? VIGIL_ENOTFOUND
                                                                                  : refused);
}

/* Apply the read op with args (taken) on the task database: 0 with *reply (owned), or the exit
 * status of a failure or a refusal, said on stderr. */
static int apply_read(struct cli *c, const char *op, json_t *args, json_t **reply)
{
    vigil_error err = {0};
    json_t *fault;
    *reply = NULL;
    open_todo(c);
    vigil_code rc = vg_todo_person_read(c->rt, c->todo, op, args, reply, &err);
    json_decref(args);
    if (rc)
        return cli_fail(&err);
    if ((fault = json_object_get(*reply, "error"))) {
        int status = refusal(fault, VIGIL_ENOTFOUND);
        json_decref(*reply);
        *reply = NULL;
        return status;
    }
    return 0;
}

/* A person's edit op with args (taken), through the domain's one path for people
 * (vg_todo_person_apply: the task's agent follows its task, the tokens are raised); the result
 * printed, what became of an agent said on stderr, and the wakes it queued run when no daemon
 * runs. */
static int change(struct cli *c, const char *op, json_t *args, int quiet)
{
    vigil_error err = {0};
    json_t *reply = NULL, *fault, *a;
    size_t i;
    open_todo(c);
    vigil_code rc = vg_todo_person_apply(c->rt, c->todo, op, args, &reply, &err);
    json_decref(args);
    json_array_foreach (json_object_get(reply, "agents"), i, a)
        fprintf(stderr, "vigil: agent \"%s\" is %s: %s\n",
                json_string_value(json_object_get(a, "name")),
                json_string_value(json_object_get(a, "lifecycle")),
                json_string_value(json_object_get(a, "reason")));
    if (!rc && (fault = json_object_get(reply, "error"))) {
        int status = refusal(fault, VIGIL_EINVAL);
        json_decref(reply);
        return status;
    }
    if (!rc && !quiet) {
        char *text = vg_json_dumps(json_object_get(reply, "result"), JSON_INDENT(2));
        if (text)
            puts(text);
        free(text);
    }
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
static int todo_read(struct cli *c, const char *op, json_t *args, int json)
{
    json_t *reply = NULL, *t;
    size_t i;
    int status = apply_read(c, op, args, &reply);
    if (status)
        return status;
    json_t *result = json_object_get(reply, "result");
    if (json || strcmp(op, "list_tasks_in_scope")) {
        char *text = vg_json_dumps(result, JSON_INDENT(2));
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

/* `vigil todo agent TASK`: a task agent for the task (vg_todo_agent_create; the manifest
 * examples/todo/task-agent.yaml says the same). Its name is derived from the task id, and a
 * name belongs to one live agent: a second agent for the same task is refused (EEXISTS), even
 * by a concurrent create. */
static int todo_agent(struct cli *c, const char *task)
{
    vigil_error err = {0};
    char id[37];
    open_todo(c);
    if (vg_todo_agent_create(c->rt, c->todo, task, id, &err))
        return cli_fail(&err);
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

static int todo_delete_restore(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {NULL};
    struct cli_opts o;
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional != 1)
        return cli_usage("todo %s needs one task", argv[0]);
    return change(c, strcmp(argv[0], "delete") ? "restore_task" : "delete_task",
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
