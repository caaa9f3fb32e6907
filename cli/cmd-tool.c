/*
 * cmd-tool.c: `vigil tool list AGENT` and `vigil tool call AGENT TOOL [ARGS_JSON]`: the tools an
 * agent may call, and one call through the same gate the agent loop uses (manifest, schema,
 * kill switches, scope, budgets, approvals), recorded in the agent's history.
 */
#include "cli.h"
#include "base/json.h"

#include "os/clock.h"
#include "os/ids.h"

static const char tool_help[] =
    "usage: vigil tool list [AGENT] [--json]\n"
    "       vigil tool call AGENT TOOL [ARGS_JSON] [--run-key KEY]\n"
    "       vigil tool calls AGENT [--cursor C] [--limit N] [--json]\n"
    "\n"
    "`call` prints the outcome envelope as JSON and exits non-zero when the tool was refused or\n"
    "failed (the error_code field names the standard code), with the run key it used. The same\n"
    "agent, --run-key, tool and arguments form the same operation: a repeat returns the recorded\n"
    "result (\"replayed\"). Without --run-key each call gets a fresh run key (cli-<uuid>).\n"
    "`list` shows each tool's source (built-in, command, mcp:SERVER, registered), risk and\n"
    "whether it mutates; without AGENT, every tool. Listing starts the MCP servers whose tools\n"
    "it shows, the first time, to learn their tools.\n"
    "`calls` lists the calls made by hand (not by a run: `tool call`, the HTTP API's tool call,\n"
    "`sandbox run --agent`), newest first; a call refused before it ran is not among them.\n";

/* "cli-" and a new UUIDv7: the run key of a call given none. */
static const char *fresh_run_key(char out[64])
{
    char id[37];
    struct vg_ids *ids = vg_ids_real(vg_clock_real());
    vg_ids_new(ids, id);
    vg_ids_free(ids);
    snprintf(out, 64, "cli-%s", id);
    return out;
}

/* `vigil tool list [AGENT]`: the agent's tools (no agent: every registered tool), where each
 * comes from and the main points of its contract. */
/* A column's width: w, or the length of the string s when longer. */
static int wider(int w, const json_t *s)
{
    size_t n = json_is_string(s) ? json_string_length(s) : 0;
    return n > (size_t)w ? (int)n : w;
}

/* Why an agent's tool list is empty: its manifest grants none, or what it grants matches no
 * tool served now; the latter is not the manifest's fault when it names an MCP server whose
 * list is empty or was never fetched (trial H13: "set tools in its manifest" for ["v__*"]). */
static void say_no_tools(struct cli *c, const char *agent)
{
    vigil_error err = {0};
    char *text = NULL;
    if (!agent) {
        fprintf(stderr, "no tools are registered\n");
        return;
    }
    json_t *a = vigil_agent_show(c->rt, agent, &text, &err) ? NULL : cli_parse_json_text(text);
    json_t *tools =
        json_object_get(json_object_get(json_object_get(a, "agent"), "config"), "tools");
    json_t *t;
    size_t i;
    if (!json_array_size(tools)) {
        fprintf(stderr, "this agent may call no tools (set tools in its manifest)\n");
        json_decref(a);
        return;
    }
    fprintf(stderr, "this agent may call no tools: no tool served now matches its tools (");
    json_array_foreach (tools, i, t)
        fprintf(stderr, "%s%s", i ? ", " : "", json_string_value(t));
    fprintf(stderr, "); an MCP server's tools are those it last listed, none when it listed none "
                    "or was never asked (`vigil mcp list --check` asks each)\n");
    json_decref(a);
}

static int tool_list(struct cli *c, struct cli_opts *o, const char *const *spec)
{
    vigil_error err = {0};
    char *text = NULL;
    if (o->n_positional > 1)
        return cli_usage("tool list takes at most one agent id");
    cli_open(c, 0);
    const char *agent = cli_agent(c, o->n_positional ? o->positional[0] : NULL);
    if (vigil_tool_list_for_agent(c->rt, agent, &text, &err))
        return cli_fail(&err);
    if (cli_opt(o, spec, "--json")) {
        cli_print_json_text(text);
        return 0;
    }
    json_t *v = cli_parse_json_text(text), *t;
    size_t i;
    int name_w = 32, source_w = 16; /* widened to the longest, so long MCP names stay aligned */
    json_array_foreach (v, i, t) {
        name_w = wider(name_w, json_object_get(t, "name"));
        source_w = wider(source_w, json_object_get(t, "source"));
    }
    printf("%-*s  %-*s  %-6s  %-8s  %s\n", name_w, "TOOL", source_w, "SOURCE", "RISK", "MUTATING",
           "DESCRIPTION");
    if (!json_array_size(v))
        say_no_tools(c, agent);
    json_array_foreach (v, i, t) {
        const char *risk = json_string_value(json_object_get(t, "risk"));
        printf("%-*s  %-*s  %-6s  %-8s  %s\n", name_w,
               json_string_value(json_object_get(t, "name")), source_w,
               json_string_value(json_object_get(t, "source")), risk ? risk : "low",
               json_is_true(json_object_get(t, "mutating")) ? "yes" : "no",
               json_string_value(json_object_get(t, "description")));
    }
    json_decref(v);
    return 0;
}

/* `vigil tool calls AGENT`: the calls made outside runs, newest first, a page at a time. */
static int tool_calls(struct cli *c, struct cli_opts *o, const char *const *spec)
{
    vigil_error err = {0};
    char *text = NULL, *end = NULL;
    const char *lim = cli_opt(o, spec, "--limit");
    long limit = lim ? strtol(lim, &end, 10) : 0;
    if (o->n_positional != 1)
        return cli_usage("tool calls takes one AGENT");
    if (lim && (*end || limit < 1 || limit > 1000))
        return cli_usage("--limit takes a number from 1 to 1000");
    cli_open(c, 0);
    if (vigil_tool_calls_by_hand(c->rt, cli_agent(c, o->positional[0]),
                                 cli_opt(o, spec, "--cursor"), (int)limit, &text, &err))
        return cli_fail(&err);
    if (cli_opt(o, spec, "--json")) {
        cli_print_json_text(text);
        return 0;
    }
    json_t *v = cli_parse_json_text(text), *it;
    size_t i;
    printf("%-24s  %-24s  %-21s  %-40s  %s\n", "STARTED", "TOOL", "RESULT", "RUN KEY", "ARGUMENTS");
    if (!json_array_size(json_object_get(v, "items")))
        fputs("(no tool calls made by hand)\n", stderr);
    json_array_foreach (json_object_get(v, "items"), i, it) {
        const char *result = json_string_value(json_object_get(it, "result_status"));
        const char *code = json_string_value(json_object_get(it, "error_code"));
        printf("%-24s  %-24s  %-21s  %-40s  %s\n",
               json_string_value(json_object_get(it, "started_at")),
               json_string_value(json_object_get(it, "tool")),
               code     ? code
               : result ? result
                        : json_string_value(json_object_get(it, "status")),
               json_string_value(json_object_get(it, "run_key")),
               json_string_value(json_object_get(it, "arguments_preview")));
    }
    const char *next = json_string_value(json_object_get(v, "next_cursor"));
    if (next)
        fprintf(stderr, "more: vigil tool calls %s --cursor %s\n", o->positional[0], next);
    json_decref(v);
    return 0;
}

int cmd_tool(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--run-key=", "--json", "--cursor=", "--limit=", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    char *text = NULL;
    if (argc < 2 || cli_wants_help(argc, argv)) {
        fputs(tool_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : 0;
    }
    const char *verb = argv[1];
    if (cli_parse(argc - 1, argv + 1, spec, &o))
        return CLI_USAGE;
    if (!strcmp(verb, "list"))
        return tool_list(c, &o, spec);
    if (!strcmp(verb, "calls"))
        return tool_calls(c, &o, spec);
    if (strcmp(verb, "call") != 0)
        return cli_usage("unknown tool command \"%s\" (list, call, calls)", verb);
    if (o.n_positional < 2 || o.n_positional > 3)
        return cli_usage("tool call needs AGENT TOOL [ARGS_JSON]");
    char fresh[64];
    const char *key = cli_opt(&o, spec, "--run-key");
    if (!key) /* a call of its own: a constant key would replay another call's result */
        key = fresh_run_key(fresh);
    cli_open(c, 0);
    vigil_code rc = vigil_tool_call(c->rt, cli_agent(c, o.positional[0]), key, o.positional[1],
                                    o.n_positional == 3 ? o.positional[2] : "{}", &text, &err);
    json_t *v = text ? cli_parse_json_text(text) : NULL;
    if (v) {
        json_object_set_new(v, "run_key", json_string(key)); /* to repeat it, e.g. once approved */
        cli_add_repeat_hint(v, key);
        vg_json_dumpf(v, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
        fputc('\n', stdout);
    }
    /* No run waits for the approval behind a call made by hand: say what runs it once given. */
    int status = rc ? cli_fail_needs_approval(&err, v, key) : 0;
    json_decref(v);
    return status >= 0 ? status : cli_fail(&err);
}
