/*
 * cmd-agent.c: `vigil agent ...`: create, list, show, pause, resume, destroy, delete, erase, and
 * the manifest commands apply and export (docs/manifests.md).
 */
#include "cli.h"
#include "base/json.h"

static const char agent_help[] =
    "usage: vigil agent create --name NAME [--kind KIND] [--mode MODE] [--prompt TEXT]\n"
    "                          [--model MODEL] [--config JSON] [--json]\n"
    "       vigil agent list [--all] [--lifecycle L] [--limit N] [--cursor C] [--json]\n"
    "       vigil agent show ID [--json]\n"
    "       vigil agent pause ID [--reason TEXT]     active -> dormant\n"
    "       vigil agent resume ID [--reason TEXT]    created|dormant -> active\n"
    "       vigil agent destroy ID [--reason TEXT]   -> destroyed (final)\n"
    "       vigil agent delete ID                    remove every record of a destroyed agent\n"
    "       vigil agent erase ID     user-requested erasure: destroy, delete, and give the\n"
    "                                space back so the store's files keep none of it\n"
    "       vigil agent apply FILE|DIR... [--dry-run] [--json]\n"
    "                                  create or update agents from manifests, by name\n"
    "       vigil agent export ID       print the agent's manifest (YAML)\n"
    "       vigil agent tree ID [--json] the runs it spawned, theirs, and every spawn decision\n"
    "\n"
    "Lifecycle: created -> active <-> dormant -> destroyed. A transition the lifecycle does not\n"
    "allow fails with the agent's current state. MODE is autonomous, interactive or hybrid.\n";

static int agent_create(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {
        "--name=", "--kind=", "--mode=", "--prompt=", "--model=", "--config=", "--json", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    char id[37];
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional)
        return cli_usage("agent create takes options only (did you mean --name?)");
    vigil_agent_spec s = {.name = cli_opt(&o, spec, "--name"),
                          .kind = cli_opt(&o, spec, "--kind"),
                          .mode = cli_opt(&o, spec, "--mode"),
                          .prompt = cli_opt(&o, spec, "--prompt"),
                          .model = cli_opt(&o, spec, "--model"),
                          .config_json = cli_opt(&o, spec, "--config")};
    if (!s.name)
        return cli_usage("agent create needs --name NAME");
    /* The same fields a manifest sets, checked the same way: what is stored exports to a
     * manifest that applies again (docs/manifests.md). */
    if (vigil_agent_config_check(s.config_json, &err))
        return cli_fail(&err);
    cli_open(c, 0);
    /* Names reach agents wherever ids do (docs/cli.md): a second live agent of one name would
     * make the name unusable for both. */
    char taken[64];
    if (cli_agent_named(c, s.name, taken)) {
        fprintf(stderr,
                "vigil: an agent named \"%s\" already exists (%s): use it, pick another --name, "
                "or destroy it first (vigil agent destroy %s)\n",
                s.name, taken, taken);
        return vigil_code_exit_status(VIGIL_EEXISTS);
    }
    if (vigil_agent_create(c->rt, &s, id, &err))
        return cli_fail(&err);
    if (cli_opt(&o, spec, "--json"))
        printf("{\"id\": \"%s\"}\n", id);
    else
        printf("%s\n", id);
    return 0;
}

static int agent_list(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--limit=", "--cursor=",    "--json",
                                       "--all",    "--lifecycle=", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    char *text = NULL, *end = NULL;
    long limit = 50;
    const char *lifecycle = NULL;
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional)
        return cli_usage("agent list takes no arguments");
    if (cli_opt(&o, spec, "--limit")) {
        limit = strtol(cli_opt(&o, spec, "--limit"), &end, 10);
        if (*end || limit < 1 || limit > 1000)
            return cli_usage("--limit takes a number from 1 to 1000");
    }
    lifecycle = cli_opt(&o, spec, "--lifecycle");
    cli_open(c, 0);
    if (vigil_agent_list_lifecycle(c->rt, lifecycle, cli_opt(&o, spec, "--cursor"), (int)limit,
                                   cli_opt(&o, spec, "--all") != NULL, &text, &err))
        return cli_fail(&err);
    if (cli_opt(&o, spec, "--json")) {
        cli_print_json_text(text);
        return 0;
    }
    json_t *v = cli_parse_json_text(text), *items = json_object_get(v, "items");
    printf("%-36s  %-10s  %-12s  %s\n", "ID", "LIFECYCLE", "KIND", "NAME");
    if (json_array_size(items) == 0)
        fprintf(stderr, "no agents (create one with `vigil agent create --name NAME`)\n");
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *a = json_array_get(items, i);
        const char *f[4] = {json_string_value(json_object_get(a, "id")),
                            json_string_value(json_object_get(a, "lifecycle")),
                            json_string_value(json_object_get(a, "kind")),
                            json_string_value(json_object_get(a, "name"))};
        printf("%-36s  %-10s  %-12s  %s\n", f[0] ? f[0] : "-", f[1] ? f[1] : "-", f[2] ? f[2] : "-",
               f[3] ? f[3] : "-");
    }
    const char *next = json_string_value(json_object_get(v, "next_cursor"));
    if (next)
        fprintf(stderr, "more: vigil agent list%s%s%s --cursor %s\n",
                cli_opt(&o, spec, "--all") ? " --all" : "", lifecycle ? " --lifecycle " : "",
                lifecycle ? lifecycle : "", next);
    json_decref(v);
    return 0;
}

static void show_field(json_t *obj, const char *label, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (json_is_string(v))
        printf("%-22s %s\n", label, json_string_value(v));
    else if (json_is_integer(v))
        printf("%-22s %lld\n", label, (long long)json_integer_value(v));
    else if (v && !json_is_null(v)) {
        char *t = vg_json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        printf("%-22s %s\n", label, t ? t : "?");
        vigil_free(t);
    }
}

static int agent_show(struct cli *c, const struct cli_opts *o, int json)
{
    vigil_error err = {0};
    char *text = NULL;
    if (o->n_positional != 1)
        return cli_usage("agent show needs exactly one agent id");
    cli_open(c, 0);
    if (vigil_agent_show(c->rt, cli_agent(c, o->positional[0]), &text, &err))
        return cli_fail(&err);
    if (json) {
        cli_print_json_text(text);
        return 0;
    }
    json_t *v = cli_parse_json_text(text);
    json_t *a = json_object_get(v, "agent"), *s = json_object_get(v, "state"),
           *r = json_object_get(v, "runtime");
    show_field(a, "id", "id");
    show_field(a, "name", "name");
    show_field(a, "kind", "kind");
    show_field(a, "mode", "mode");
    show_field(a, "lifecycle", "lifecycle");
    show_field(a, "lifecycle reason", "lifecycle_reason");
    show_field(a, "model", "model");
    show_field(a, "prompt", "prompt");
    show_field(a, "created", "created_at");
    show_field(a, "updated", "updated_at");
    show_field(a, "destroyed", "destroyed_at");
    show_field(s, "state revision", "revision");
    show_field(s, "last wake", "last_wake_at");
    if (json_is_string(json_object_get(s, "next_wake_at")))
        show_field(s, "next wake", "next_wake_at");
    else if (json_is_string(json_object_get(s, "next_timer_at"))) /* trial G12 */
        printf("%-22s %s (timer %s)\n", "next wake",
               json_string_value(json_object_get(s, "next_timer_at")),
               json_string_value(json_object_get(s, "next_timer_id")));
    show_field(s, "sleep until", "sleep_until");
    show_field(s, "wake counter", "wake_counter");
    show_field(s, "slots", "slots");
    char why[128];
    if (cli_gone_holder(r, why, sizeof why))
        printf("%-22s running (%s)\n", "run status", why);
    else
        show_field(r, "run status", "run_status");
    show_field(r, "active run", "active_run_id");
    show_field(r, "failure streak", "failure_streak");
    json_t *rep = json_object_get(v, "report");
    if (json_is_object(rep)) {
        putchar('\n');
        cli_print_report(rep);
    }
    json_decref(v);
    return 0;
}

static int agent_transition(struct cli *c, const char *verb, const struct cli_opts *o,
                            const char *reason)
{
    vigil_error err = {0};
    vigil_code rc;
    if (o->n_positional != 1)
        return cli_usage("agent %s needs exactly one agent id", verb);
    cli_open(c, 0);
    const char *id = cli_agent(c, o->positional[0]);
    if (!strcmp(verb, "pause"))
        rc = vigil_agent_pause(c->rt, id, reason, &err);
    else if (!strcmp(verb, "resume"))
        rc = vigil_agent_resume(c->rt, id, reason, &err);
    else if (!strcmp(verb, "destroy"))
        rc = vigil_agent_destroy(c->rt, id, reason, &err);
    else if (!strcmp(verb, "erase"))
        rc = vigil_agent_erase(c->rt, id, &err);
    else
        rc = vigil_agent_delete(c->rt, id, &err);
    if (rc)
        return cli_fail(&err);
    static const struct {
        const char *verb, *done;
    } words[] = {{"pause", "paused (dormant)"},
                 {"resume", "resumed (active)"},
                 {"destroy", "destroyed"},
                 {"delete", "deleted with all its records"},
                 {"erase", "erased: its records are gone and the store's files keep none of them"}};
    for (size_t i = 0; i < VG_ARRAY_LEN(words); i++)
        if (!strcmp(words[i].verb, verb))
            printf("agent %s %s\n", id, words[i].done);
    return 0;
}

/* One line per manifest: what apply did (or, with --dry-run, would do). */
static void apply_print(json_t *line)
{
    const char *action = json_string_value(json_object_get(line, "action"));
    const char *id = json_string_value(json_object_get(line, "id"));
    int dry = json_is_true(json_object_get(line, "dry_run"));
    json_t *changes = json_object_get(line, "changes");
    /* A dry run says what it would do: "would create", "would update". */
    const char *verb = action;
    if (dry && !strcmp(action, "created"))
        verb = "would create";
    else if (dry && !strcmp(action, "updated"))
        verb = "would update";
    printf("%s agent \"%s\"", verb, json_string_value(json_object_get(line, "name")));
    if (id)
        printf(" (%s)", id);
    for (size_t i = 0; strcmp(action, "unchanged") && i < json_array_size(changes); i++)
        printf("%s%s", i ? ", " : ": ", json_string_value(json_array_get(changes, i)));
    /* A seed never overwrites a block the agent has: say so, rather than let "memory" (or
     * "unchanged") read as "the block now says what the file says" (trial E14). */
    json_t *kept = json_object_get(line, "memory_kept");
    for (size_t i = 0; i < json_array_size(kept); i++)
        printf("%s%s", i ? ", " : "; memory seeds not applied, existing blocks kept: ",
               json_string_value(json_array_get(kept, i)));
    if (json_array_size(kept))
        printf(" (`vigil memory set` changes a block)");
    printf("  [%s]\n", json_string_value(json_object_get(line, "file")));
}

/*
 * A `tools` entry that names no tool known here (apply's "warnings": no built-in, no command
 * tool, no declared MCP server's SERVER__) is most likely a typo: said on stderr, dry run or
 * not, never refused, since a program embedding libvigil may register it later
 * (vigil_tool_register, docs/tools.md) and the manifest is right for that program.
 */
static void warn_unknown_tools(json_t *line)
{
    json_t *w;
    size_t i;
    json_array_foreach (json_object_get(line, "warnings"), i, w)
        fprintf(stderr, "vigil: warning: agent \"%s\": %s\n",
                json_string_value(json_object_get(line, "name")), json_string_value(w));
    /* A command tool or MCP server this manifest adds that another agent's tools glob reaches
     * widens that agent's grant with nothing in its own manifest changing (trial H4): named. */
    json_array_foreach (json_object_get(line, "reaches"), i, w)
        fprintf(stderr, "vigil: note: agent \"%s\": %s\n",
                json_string_value(json_object_get(line, "name")), json_string_value(w));
}

static int agent_apply(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--dry-run", "--json", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    char *text = NULL;
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional < 1)
        return cli_usage("agent apply needs manifest files or directories");
    int json = cli_opt(&o, spec, "--json") != NULL;
    cli_open(c, 0);
    vigil_code rc = vigil_agent_apply_paths(
        c->rt, o.positional, (size_t)o.n_positional,
        cli_opt(&o, spec, "--dry-run") ? VIGIL_APPLY_DRY_RUN : 0, &text, &err);
    json_t *v = text ? cli_parse_json_text(text) : NULL, *e;
    size_t i;
    if (rc) {
        /* Every problem, one per line, FILE:LINE:COLUMN first as compilers print them, then
         * how many; one problem is the error line itself (it names the first), not said twice. */
        json_t *problems = json_object_get(v, "errors");
        size_t n = json_array_size(problems);
        json_array_foreach (n > 1 ? problems : NULL, i, e)
            fprintf(stderr, "%s:%d:%d: %s\n", json_string_value(json_object_get(e, "file")),
                    (int)json_integer_value(json_object_get(e, "line")),
                    (int)json_integer_value(json_object_get(e, "column")),
                    json_string_value(json_object_get(e, "message")));
        json_decref(v);
        if (n > 1) {
            fprintf(stderr, "vigil: %zu problems in the manifests (above); nothing was applied\n",
                    n);
            return vigil_code_exit_status(err.code);
        }
        return cli_fail(&err);
    }
    json_array_foreach (v, i, e) {
        warn_unknown_tools(e);
        if (json) {
            char *one = vg_json_dumps(e, JSON_COMPACT | JSON_SORT_KEYS);
            printf("%s\n", one ? one : "{}");
            vigil_free(one);
        } else {
            apply_print(e);
        }
    }
    json_decref(v);
    return 0;
}

static int agent_export(struct cli *c, const struct cli_opts *o)
{
    vigil_error err = {0};
    char *yaml = NULL;
    if (o->n_positional != 1)
        return cli_usage("agent export needs exactly one agent id");
    cli_open(c, 0);
    if (vigil_agent_export(c->rt, cli_agent(c, o->positional[0]), &yaml, &err))
        return cli_fail(&err);
    fputs(yaml, stdout);
    vigil_free(yaml);
    return 0;
}

int cmd_agent(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--json", "--reason=", NULL};
    struct cli_opts o;
    if (argc < 2 || (argc == 2 && cli_wants_help(argc, argv))) {
        fputs(agent_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : 0;
    }
    const char *verb = argv[1];
    if (cli_wants_help(argc, argv)) {
        fputs(agent_help, stdout);
        return 0;
    }
    if (!strcmp(verb, "create"))
        return agent_create(c, argc - 1, argv + 1);
    if (!strcmp(verb, "list"))
        return agent_list(c, argc - 1, argv + 1);
    if (!strcmp(verb, "apply"))
        return agent_apply(c, argc - 1, argv + 1);
    if (cli_parse(argc - 1, argv + 1, spec, &o))
        return CLI_USAGE;
    if (!strcmp(verb, "show"))
        return agent_show(c, &o, cli_opt(&o, spec, "--json") != NULL);
    if (!strcmp(verb, "tree"))
        return cmd_agent_tree(c, &o, cli_opt(&o, spec, "--json") != NULL);
    if (!strcmp(verb, "export") && !cli_opt(&o, spec, "--json") && !cli_opt(&o, spec, "--reason"))
        return agent_export(c, &o);
    if (cli_opt(&o, spec, "--json"))
        return cli_usage("--json is for reads (list, show, tree, create, apply)");
    if (!strcmp(verb, "pause") || !strcmp(verb, "resume") || !strcmp(verb, "destroy") ||
        !strcmp(verb, "delete") || !strcmp(verb, "erase")) {
        if ((!strcmp(verb, "delete") || !strcmp(verb, "erase")) && cli_opt(&o, spec, "--reason"))
            return cli_usage("%s takes no --reason", verb);
        return agent_transition(c, verb, &o, cli_opt(&o, spec, "--reason"));
    }
    return cli_usage("unknown agent command \"%s\"", verb);
}
