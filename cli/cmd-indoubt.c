/*
 * cmd-indoubt.c: `vigil indoubt list|show|resolve`: the person's side of operations a crash left
 * in doubt (docs/tools.md). A mutating tool call cut short whose effect nobody can know waits
 * here until someone says whether it happened.
 */
#include "cli.h"
#include "base/json.h"

static const char indoubt_help[] =
    "usage: vigil indoubt list [--agent ID] [--json]\n"
    "       vigil indoubt show ID [--json]\n"
    "       vigil indoubt resolve ID --applied|--not-applied|--retry [--by NAME]\n"
    "\n"
    "A tool call cut short by a crash whose effect cannot be known (a non-idempotent tool, or a\n"
    "reconcilable one whose lookup kept finding nothing) waits as an in-doubt operation. Check\n"
    "the effect where it would be, then answer:\n"
    "  --applied      it happened: the operation is finished and never runs again\n"
    "  --not-applied  it did not, and must not run: an identical call gets an error\n"
    "  --retry        it did not: the next identical call runs it\n"
    "A second answer is refused (exit 4); the first stands.\n";

static void print_item(json_t *it)
{
    char *args = vg_json_dumps(json_object_get(it, "arguments"),
                               JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    printf("%-64s  %-11s  %-20s  %-36s  %s\n",
           json_string_value(json_object_get(it, "operation_id")),
           json_string_value(json_object_get(it, "status")),
           json_string_value(json_object_get(it, "tool")),
           json_string_value(json_object_get(it, "agent_id")), args ? args : "");
    free(args);
}

static int indoubt_list(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--agent=", "--json", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    char *text = NULL;
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional)
        return cli_usage("indoubt list takes no arguments");
    cli_open(c, 0);
    if (vigil_indoubt_list(c->rt, cli_agent(c, cli_opt(&o, spec, "--agent")), &text, &err))
        return cli_fail(&err);
    if (cli_opt(&o, spec, "--json")) {
        cli_print_json_text(text);
        return 0;
    }
    json_t *v = cli_parse_json_text(text), *it;
    size_t i;
    printf("%-64s  %-11s  %-20s  %-36s  %s\n", "OPERATION", "STATUS", "TOOL", "AGENT", "ARGUMENTS");
    json_array_foreach (v, i, it)
        print_item(it);
    if (!json_array_size(v))
        fprintf(stderr, "no operations in doubt\n");
    json_decref(v);
    return 0;
}

static const char *str_or(json_t *o, const char *k, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : dflt;
}

static int indoubt_show(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--json", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    char *text = NULL;
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional != 1)
        return cli_usage("indoubt show needs exactly one operation id");
    cli_open(c, 0);
    if (vigil_indoubt_show(c->rt, o.positional[0], &text, &err))
        return cli_fail(&err);
    if (cli_opt(&o, spec, "--json")) {
        cli_print_json_text(text);
        return 0;
    }
    json_t *v = cli_parse_json_text(text);
    char *args = vg_json_dumps(json_object_get(v, "arguments"),
                               JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    printf("operation  %s\nstatus     %s\ntool       %s\narguments  %s\nagent      %s\n"
           "run        %s (run key %s)\nthread     %s\nraised     %s\nknown      %s\n",
           str_or(v, "operation_id", ""), str_or(v, "status", ""), str_or(v, "tool", ""),
           args ? args : "", str_or(v, "agent_id", ""), str_or(v, "run_id", "-"),
           str_or(v, "run_key", "-"), str_or(v, "thread_id", "-"), str_or(v, "created_at", ""),
           str_or(v, "reason", ""));
    if (json_object_get(v, "resolved_by"))
        printf("resolved   %s by %s at %s\n", str_or(v, "status", ""), str_or(v, "resolved_by", ""),
               str_or(v, "resolved_at", ""));
    free(args);
    json_decref(v);
    return 0;
}

static int indoubt_resolve(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--applied", "--not-applied", "--retry", "--by=", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional != 1)
        return cli_usage("indoubt resolve needs exactly one operation id");
    int applied = !!cli_opt(&o, spec, "--applied"), not = !!cli_opt(&o, spec, "--not-applied");
    int retry = !!cli_opt(&o, spec, "--retry");
    if (applied + not +retry != 1)
        return cli_usage("indoubt resolve needs one of --applied, --not-applied or --retry");
    vigil_indoubt_answer a = applied ? VIGIL_INDOUBT_APPLIED
                             : not   ? VIGIL_INDOUBT_NOT_APPLIED
                                     : VIGIL_INDOUBT_RETRY;
    cli_open(c, 0);
    if (vigil_indoubt_resolve(c->rt, o.positional[0], a, cli_opt(&o, spec, "--by"), &err))
        return cli_fail(&err);
    printf("resolved %s: %s\n", o.positional[0],
           applied ? "applied"
           : not   ? "not applied"
                   : "retry");
    return 0;
}

int cmd_indoubt(struct cli *c, int argc, char **argv)
{
    if (argc < 2 || cli_wants_help(argc, argv)) {
        fputs(indoubt_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : 0;
    }
    if (!strcmp(argv[1], "list"))
        return indoubt_list(c, argc - 1, argv + 1);
    if (!strcmp(argv[1], "show"))
        return indoubt_show(c, argc - 1, argv + 1);
    if (!strcmp(argv[1], "resolve"))
        return indoubt_resolve(c, argc - 1, argv + 1);
    return cli_usage("unknown indoubt command \"%s\": list, show or resolve", argv[1]);
}
