/*
 * cmd-slo.c: `vigil slo [--agent ID] [--since DUR] [--json]`: the service levels of the runs of
 * a window against their objectives (vigil_slo; docs/operations.md, "Service levels"). It exits
 * CLI_SLO_MISSED when an objective is missed, so a monitor can run it as it runs `vigil status`.
 */
#include "cli.h"
#include "base/json.h"
#include "os/clock.h"

/* The levels were measured and at least one objective is missed. */
#define CLI_SLO_MISSED 11

static const char slo_help[] =
    "usage: vigil slo [--agent ID] [--since DUR] [--json]\n"
    "\n"
    "The service levels of the runs started in the last DUR (default 24h; 30m, 7d, ...), of one\n"
    "agent or all, measured from their records: success rate (completed among the runs that\n"
    "ended), side-effect correctness (tool calls whose effect is known, none in doubt), latency\n"
    "(p50, p95, max) and cost (total, per run), each objective with its target from the config\n"
    "file's `slo` section and whether it is met.\n"
    "\n"
    "Exit status: 0 every objective met (or nothing to measure); 11 one or more missed;\n"
    "otherwise the error's.\n";

static void print_objective(json_t *o)
{
    const char *unit = json_string_value(json_object_get(o, "unit"));
    json_t *actual = json_object_get(o, "actual"), *met = json_object_get(o, "met");
    double target = json_number_value(json_object_get(o, "target"));
    char want[48], got[48];
    if (!strcmp(unit, "share")) {
        snprintf(want, sizeof want, ">= %.2f%%", target * 100);
        snprintf(got, sizeof got, "%.2f%%", json_number_value(actual) * 100);
    } else if (!strcmp(unit, "ms")) {
        snprintf(want, sizeof want, "<= %.0f ms", target);
        snprintf(got, sizeof got, "%.0f ms", json_number_value(actual));
    } else {
        snprintf(want, sizeof want, "<= $%.4f", target);
        snprintf(got, sizeof got, "$%.4f", json_number_value(actual));
    }
    printf("  %-24s %-14s %-12s %s\n", json_string_value(json_object_get(o, "name")),
           json_is_null(actual) ? "-" : got, want,
           json_is_null(met)   ? "no data"
           : json_is_true(met) ? "met"
                               : "MISSED");
}

static void print_levels(json_t *v)
{
    json_t *f = json_object_get(v, "figures"), *runs = json_object_get(f, "runs");
    json_t *calls = json_object_get(f, "tool_calls"), *lat = json_object_get(f, "latency_ms");
    json_t *cost = json_object_get(f, "cost_usd"), *o;
#define N(obj, key) ((long long)json_integer_value(json_object_get(obj, key)))
    printf("since        %s\n", json_string_value(json_object_get(v, "since")));
    printf("runs         %lld started, %lld ended: %lld completed, %lld failed, %lld interrupted, "
           "%lld crashed; %lld canceled, %lld not ended\n",
           N(runs, "started"), N(runs, "ended"), N(runs, "completed"), N(runs, "failed"),
           N(runs, "interrupted"), N(runs, "crashed"), N(runs, "canceled"), N(runs, "unfinished"));
    printf("tool calls   %lld, %lld in doubt\n", N(calls, "total"), N(calls, "in_doubt"));
    printf("latency      p50 %lld ms, p95 %lld ms, max %lld ms\n", N(lat, "p50"), N(lat, "p95"),
           N(lat, "max"));
#undef N
    printf("cost         $%.4f, $%.4f a run\n", json_number_value(json_object_get(cost, "total")),
           json_number_value(json_object_get(cost, "per_run")));
    printf("objectives:\n");
    size_t i;
    json_array_foreach (json_object_get(v, "objectives"), i, o)
        print_objective(o);
}

int cmd_slo(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--json", "--agent=", "--since=", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    char *text = NULL;
    int64_t window = 24LL * 3600 * 1000;
    if (cli_wants_help(argc, argv)) {
        fputs(slo_help, stdout);
        return 0;
    }
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional)
        return cli_usage("slo takes options only");
    const char *since = cli_opt(&o, spec, "--since");
    if (since && (vg_duration_parse_ms(since, &window) != 0 || window <= 0))
        return cli_usage("--since takes a duration such as 30m, 24h or 7d, not \"%s\"", since);
    cli_open(c, 0);
    if (vigil_slo(c->rt, cli_agent(c, cli_opt(&o, spec, "--agent")), window, &text, &err))
        return cli_fail(&err);
    json_t *v = cli_parse_json_text(text), *obj;
    int missed = 0;
    size_t i;
    json_array_foreach (json_object_get(v, "objectives"), i, obj)
        missed |= json_is_false(json_object_get(obj, "met"));
    if (cli_opt(&o, spec, "--json")) {
        vg_json_dumpf(v, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
        fputc('\n', stdout);
    } else {
        print_levels(v);
    }
    json_decref(v);
    return missed ? CLI_SLO_MISSED : 0;
}
