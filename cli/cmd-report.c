/*
 * cmd-report.c: `vigil report AGENT [--scope S] [--history N] [--json]`, an agent's report of
 * one scope read without a model call (vigil_report_get; docs/memory.md, "Reports").
 */
#include "cli.h"

static const char report_help[] =
    "usage: vigil report AGENT [--scope current|daily|weekly|monthly] [--history N] [--json]\n"
    "\n"
    "The agent's latest report of a scope (default current), read without a model call: when it\n"
    "was written, how sure the agent said it was (confidence) and what it rests on (sources),\n"
    "and whether it is stale: older than the scope's freshness (the manifest's\n"
    "reports.fresh_for; by default current never, daily 1d, weekly 7d, monthly 31d).\n"
    "--history N adds up to N earlier reports of the scope, newest first.\n"
    "\n"
    "Exit status: 0 shown; 2 a bad option; 3 no such agent, or no report of that scope yet.\n";

static const char *const scopes[] = {"current", "daily", "weekly", "monthly", NULL};

void cli_print_report(const json_t *r)
{
    const json_t *conf = json_object_get(r, "confidence"), *src = json_object_get(r, "sources");
    const char *stale_at = json_string_value(json_object_get(r, "stale_at"));
    const char *number = json_string_value(json_object_get(r, "number"));
    char seq[32];
    snprintf(seq, sizeof seq, "%lld", (long long)json_integer_value(json_object_get(r, "seq")));
    printf("%s report #%s, written %s", json_string_value(json_object_get(r, "scope")),
           number ? number : seq, json_string_value(json_object_get(r, "created_at")));
    if (json_is_number(conf))
        printf(", confidence %.2f", json_number_value(conf));
    if (stale_at)
        printf(json_is_true(json_object_get(r, "stale")) ? ", STALE since %s" : ", fresh until %s",
               stale_at);
    putchar('\n');
    size_t i;
    json_t *s;
    json_array_foreach (src, i, s)
        printf("  source: %s\n", json_string_value(s));
    printf("\n%s\n", json_string_value(json_object_get(r, "markdown")));
}

int cmd_report(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--scope=", "--history=", "--json", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    char *text = NULL, *end = NULL;
    long history = 0;
    if (cli_wants_help(argc, argv)) {
        fputs(report_help, stdout);
        return 0;
    }
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional != 1)
        return cli_usage("report needs exactly one agent (its id or name)");
    const char *scope = cli_opt(&o, spec, "--scope");
    if (cli_check_choice("--scope", scope, scopes))
        return CLI_USAGE;
    if (cli_opt(&o, spec, "--history")) {
        history = strtol(cli_opt(&o, spec, "--history"), &end, 10);
        if (*end || history < 1 || history > 1000)
            return cli_usage("--history takes a number from 1 to 1000");
    }
    cli_open(c, 0);
    if (vigil_report_get(c->rt, cli_agent(c, o.positional[0]), scope, (int)history, &text, &err))
        return cli_fail(&err);
    if (cli_opt(&o, spec, "--json")) {
        cli_print_json_text(text);
        return 0;
    }
    json_t *v = cli_parse_json_text(text), *r;
    size_t i;
    cli_print_report(json_object_get(v, "report"));
    json_array_foreach (json_object_get(v, "history"), i, r) {
        printf("\n---\n");
        cli_print_report(r);
    }
    json_decref(v);
    return 0;
}
