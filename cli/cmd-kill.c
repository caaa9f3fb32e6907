/*
 * cmd-kill.c: `vigil kill on|off|status`: the global kill switch, one agent's, or one tool
 * class's. While a switch applies, mutating tools are refused (`killed`), the loop ends runs
 * and no new wake starts.
 */
#include "cli.h"
#include "base/json.h"

static const char kill_help[] =
    "usage: vigil kill on [--agent ID | --tool-class CLASS] [--reason TEXT]\n"
    "       vigil kill off [--agent ID | --tool-class CLASS]\n"
    "       vigil kill status [--agent ID] [--tool-class CLASS] [--json]\n"
    "\n"
    "Without --agent or --tool-class, `on` and `off` flip the global switch. `status` lists every\n"
    "switch; with --agent or --tool-class it also says whether that agent or class is stopped\n"
    "(by its own switch or the global one).\n";

/* The agent's lifecycle name (owned JSON string); not-found for an unknown agent. */
static vigil_code agent_lifecycle(struct cli *c, const char *agent, json_t **out, vigil_error *err)
{
    char *text = NULL;
    vigil_code rc = vigil_agent_show(c->rt, agent, &text, err);
    if (rc)
        return rc;
    json_t *show = cli_parse_json_text(text);
    json_t *lc = json_object_get(json_object_get(show, "agent"), "lifecycle");
    *out = json_is_string(lc) ? json_incref(lc) : json_string("unknown");
    json_decref(show);
    return VIGIL_OK;
}

/* After `kill on --tool-class CLS`: a class that no tool the runtime knows has (a typo, or a
 * switch set before the tools that will carry it) stops nothing yet, which the person pulling
 * the switch must hear (trial H9). The classes are those of the tools `vigil tool list` shows;
 * MCP tools are all of class "mcp", known before any server lists its tools, so it never warns. */
static void warn_unknown_class(struct cli *c, const char *cls)
{
    char *text = NULL;
    vigil_error err = {0};
    if (!strcmp(cls, "mcp") || vigil_tool_list_for_agent(c->rt, NULL, &text, &err))
        return;
    json_t *tools = cli_parse_json_text(text), *t, *classes = json_object();
    size_t i;
    json_array_foreach (tools, i, t) {
        const char *tc = json_string_value(json_object_get(t, "tool_class"));
        if (tc && classes)
            json_object_set_new(classes, tc, json_true());
    }
    if (classes && !json_object_get(classes, cls)) {
        const char *k;
        json_t *v;
        fprintf(stderr,
                "vigil: warning: no tool has the class \"%s\" now, so this switch stops "
                "nothing until one does; the classes are:",
                cls);
        json_object_foreach (classes, k, v)
            fprintf(stderr, " %s", k);
        fprintf(stderr, " (and mcp)\n");
    }
    json_decref(classes);
    json_decref(tools);
}

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
        agent = cli_agent(c, agent);
        if (vigil_kill_set(c->rt, agent, cls, on, cli_opt(&o, spec, "--reason"), &err))
            return cli_fail(&err);
        printf("kill switch %s%s %s\n",
               agent ? "for agent "
               : cls ? "for tool class "
                     : "global",
               agent ? agent
               : cls ? cls
                     : "",
               on ? "on: mutating tools and new wakes stop" : "off");
        if (on && cls)
            warn_unknown_class(c, cls);
        return 0;
    }
    if (strcmp(verb, "status") != 0)
        return cli_usage("unknown kill command \"%s\" (on, off, status)", verb);
    char *text = NULL;
    int active = 0;
    json_t *lifecycle = json_null();
    cli_open(c, 0);
    agent = cli_agent(c, agent);
    if (vigil_kill_status(c->rt, &text, &err) ||
        ((agent || cls) && vigil_kill_active(c->rt, agent, cls, &active, &err)) ||
        (agent && agent_lifecycle(c, agent, &lifecycle, &err))) {
        vigil_free(text);
        return cli_fail(&err);
    }
    json_t *v = cli_parse_json_text(text), *s;
    size_t i;
    if (json) {
        json_t *out =
            json_pack("{s:O, s:o, s:o}", "switches", v, "stopped",
                      agent || cls ? json_boolean(active) : json_null(), "lifecycle", lifecycle);
        vg_json_dumpf(out, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
        fputc('\n', stdout);
        json_decref(out);
        json_decref(v);
        return 0;
    }
    int any = 0;
    printf("%-48s  %-3s  %s\n", "SWITCH", "ON", "REASON");
    json_array_foreach (v, i, s) {
        printf("%-48s  %-3s  %s\n", json_string_value(json_object_get(s, "id")),
               json_is_true(json_object_get(s, "on")) ? "on" : "off",
               json_string_value(json_object_get(s, "reason"))
                   ? json_string_value(json_object_get(s, "reason"))
                   : "");
        any = 1;
    }
    if (!any)
        fprintf(stderr, "no kill switch has been set\n");
    /* Whether a switch stops it, and for an agent its lifecycle: a dormant agent is not
     * "running" just because no switch is on. */
    if (agent)
        printf("agent %s: %s, %s\n", agent, json_string_value(lifecycle),
               active ? "stopped by a kill switch" : "no kill switch applies");
    else if (cls)
        printf("tool class %s: %s\n", cls,
               active ? "stopped by a kill switch" : "no kill switch applies");
    json_decref(lifecycle);
    json_decref(v);
    return 0;
}
