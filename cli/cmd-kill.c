/*
 * cmd-kill.c: `vigil kill on|off|status`: the global kill switch, one agent's, or one tool
 * class's. While a switch applies, mutating tools are refused (`killed`), the loop ends runs
 * and no new wake starts.
 */
#include "cli.h"

static const char kill_help[] =
    "usage: vigil kill on [--agent ID | --tool-class CLASS] [--reason TEXT]\n"
    "       vigil kill off [--agent ID | --tool-class CLASS]\n"
    "       vigil kill status [--agent ID] [--tool-class CLASS] [--json]\n"
    "\n"
    "Without --agent or --tool-class, `on` and `off` flip the global switch. `status` lists every\n"
    "switch; with --agent or --tool-class it also says whether that agent or class is stopped\n"
    "(by its own switch or the global one).\n";

int cmd_kill(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--agent=", "--tool-class=", "--reason=", "--json", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    if (argc < 2 || cli_wants_help(argc, argv)) {
        fputs(kill_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : 0;
    }
    const char *verb = argv[1];
    if (cli_parse(argc - 1, argv + 1, spec, &o))
        return CLI_USAGE;
    if (o.n_positional)
        return cli_usage("kill %s takes options only", verb);
    const char *agent = cli_opt(&o, spec, "--agent"), *cls = cli_opt(&o, spec, "--tool-class");
    int json = cli_opt(&o, spec, "--json") != NULL;
    if (!strcmp(verb, "on") || !strcmp(verb, "off")) {
        int on = !strcmp(verb, "on");
        if (agent && cls)
            return cli_usage("a switch is global, per agent or per tool class: not both");
        if (json)
            return cli_usage("--json is for `kill status`");
        cli_open(c, 0);
        if (vigil_kill_set(c->rt, agent, cls, on, cli_opt(&o, spec, "--reason"), &err))
            return cli_fail(&err);
        printf("kill switch %s%s %s\n", agent ? "for agent " : cls ? "for tool class " : "global",
               agent ? agent : cls ? cls : "", on ? "on: mutating tools and new wakes stop"
                                                 : "off");
        return 0;
    }
    if (strcmp(verb, "status") != 0)
        return cli_usage("unknown kill command \"%s\" (on, off, status)", verb);
    char *text = NULL;
    int active = 0;
    cli_open(c, 0);
    if (vigil_kill_status(c->rt, &text, &err) ||
        ((agent || cls) && vigil_kill_active(c->rt, agent, cls, &active, &err)))
        return cli_fail(&err);
    json_t *v = cli_parse_json_text(text), *s;
    size_t i;
    if (json) {
        json_t *out = json_pack("{s:O, s:o}", "switches", v,
                                "stopped", agent || cls ? json_boolean(active) : json_null());
        json_dumpf(out, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
        fputc('\n', stdout);
        json_decref(out);
        json_decref(v);
        return 0;
    }
    int any = 0;
    json_array_foreach(v, i, s)
    {
        printf("%-48s  %-3s  %s\n", json_string_value(json_object_get(s, "id")),
               json_is_true(json_object_get(s, "on")) ? "on" : "off",
               json_string_value(json_object_get(s, "reason")) ? json_string_value(json_object_get(s, "reason")) : "");
        any = 1;
    }
    if (!any)
        printf("no kill switch has been set\n");
    if (agent || cls)
        printf("%s %s: %s\n", agent ? "agent" : "tool class", agent ? agent : cls,
               active ? "stopped" : "running");
    json_decref(v);
    return 0;
}
