/*
 * cmd-prune.c: `vigil prune`: give up what is past its retention (docs/storage.md, "Growth and
 * retention"), and the holds that keep an agent or a run whole.
 */
#include "cli.h"

static const char prune_help[] =
    "usage: vigil prune [--agent A] [--dry-run] [--vacuum] [--budget SIZE] [--json]\n"
    "       vigil prune hold AGENT|RUN\n"
    "       vigil prune release AGENT|RUN\n"
    "       vigil prune holds [--json]\n"
    "\n"
    "Removes what is past its class's time to live (the config's `retention` block, an agent's\n"
    "manifest `retention:` over it) in the order runtime, trace, action, report, summary, and\n"
    "prints what went by class with the bytes freed. Over the storage budget (the config's\n"
    "retention.budget, or --budget such as 500MB), whatever is finished goes in that order,\n"
    "oldest first, until the store fits. --dry-run removes nothing; --vacuum then gives the\n"
    "space back to the file system. Nothing of an agent or a run on hold is pruned.\n";

/* "500MB", "2GB", "750KB" or a byte count; -1 when it is none of these. */
static int64_t parse_size(const char *t)
{
    static const char *const units[] = {"", "KB", "MB", "GB", "TB"};
    char *end = NULL;
    long long n = strtoll(t, &end, 10);
    if (end == t || n <= 0)
        return -1;
    int64_t scale = 1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++, scale *= 1024)
        if (!strcmp(end, units[i]))
            return n < (1LL << 50) / scale ? n * scale : -1;
    return -1;
}

static void print_report(char *text)
{
    json_t *v = cli_parse_json_text(text);
    int dry = json_is_true(json_object_get(v, "dry_run"));
    static const char *const order[] = {"runtime", "trace", "action", "report", "summary"};
    printf("%-10s %10s %12s\n", "class", dry ? "would go" : "removed", "bytes");
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        json_t *c = json_object_get(json_object_get(v, "classes"), order[i]);
        printf("%-10s %10lld %12lld\n", order[i],
               (long long)json_integer_value(json_object_get(c, "records")),
               (long long)json_integer_value(json_object_get(c, "bytes")));
    }
    printf("%-10s %10lld %12lld\n", "total",
           (long long)json_integer_value(json_object_get(v, "records")),
           (long long)json_integer_value(json_object_get(v, "bytes")));
    printf("runs whose trace %s: %lld; agents on hold: %lld\n", dry ? "would go" : "went",
           (long long)json_integer_value(json_object_get(v, "runs_pruned")),
           (long long)json_integer_value(json_object_get(v, "agents_held")));
    json_t *used = json_object_get(v, "used_bytes");
    if (json_is_object(used))
        printf("bytes in use: %lld before, %lld after%s\n",
               (long long)json_integer_value(json_object_get(used, "before")),
               (long long)json_integer_value(json_object_get(used, "after")),
               json_is_true(json_object_get(v, "over_budget")) ? " (over the budget)" : "");
    if (json_is_true(json_object_get(v, "vacuumed")))
        printf("store vacuumed: the space is given back\n");
    json_decref(v);
}

static int prune_holds(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--json", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    char *text = NULL;
    const char *verb = argv[0];
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    cli_open(c, 0);
    if (!strcmp(verb, "holds")) {
        if (o.n_positional)
            return cli_usage("prune holds takes no arguments");
        if (vigil_retention_holds(c->rt, &text, &err))
            return cli_fail(&err);
        if (cli_opt(&o, spec, "--json")) {
            cli_print_json_text(text);
            return 0;
        }
        json_t *v = cli_parse_json_text(text), *h;
        size_t i;
        json_array_foreach (v, i, h)
            printf("%s\n", json_string_value(json_object_get(h, "target")));
        if (!json_array_size(v))
            printf("no holds\n");
        json_decref(v);
        return 0;
    }
    if (o.n_positional != 1)
        return cli_usage("prune %s needs one agent or run", verb);
    const char *target = cli_agent(c, o.positional[0]);
    int on = !strcmp(verb, "hold");
    if (vigil_retention_hold(c->rt, target, on, &err))
        return cli_fail(&err);
    printf("%s %s: %s\n", target, on ? "on hold" : "released",
           on ? "nothing of it is pruned or erased" : "retention applies to it again");
    return 0;
}

int cmd_prune(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--agent=",  "--dry-run", "--vacuum",
                                       "--budget=", "--json",    NULL};
    struct cli_opts o;
    vigil_error err = {0};
    if (cli_wants_help(argc, argv)) {
        fputs(prune_help, stdout);
        return 0;
    }
    if (argc > 1 &&
        (!strcmp(argv[1], "hold") || !strcmp(argv[1], "release") || !strcmp(argv[1], "holds")))
        return prune_holds(c, argc - 1, argv + 1);
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional)
        return cli_usage("unknown prune command \"%s\" (hold, release, holds)", o.positional[0]);
    vigil_prune_options po = {.dry_run = cli_opt(&o, spec, "--dry-run") != NULL,
                              .vacuum = cli_opt(&o, spec, "--vacuum") != NULL};
    const char *budget = cli_opt(&o, spec, "--budget");
    if (budget && (po.budget_bytes = parse_size(budget)) < 0)
        return cli_usage("--budget: a size such as 500MB, 2GB or a byte count");
    cli_open(c, 0);
    po.agent_id = cli_agent(c, cli_opt(&o, spec, "--agent"));
    char *text = NULL;
    if (vigil_prune(c->rt, &po, &text, &err))
        return cli_fail(&err);
    if (cli_opt(&o, spec, "--json"))
        cli_print_json_text(text);
    else
        print_report(text);
    return 0;
}
