/*
 * cmd-runctl.c: `vigil runs cancel RUN`, `vigil runs rerun RUN [--prompt TEXT] [--model NAME]
 * [--tools LIST]` and `vigil runs resume RUN [--prompt TEXT]`
 * (vigil_run_cancel, vigil_run_rerun; docs/runs.md).
 */
#include "cli.h"

#include <fnmatch.h>

/* --tools that matches none of the agent's tools leaves the re-run with no tools at all: most
 * likely a typo, so say so (trial C7 of session 30: it was queued without a word). A warning
 * only: an allowlist of none is a choice a person may make ("" says it plainly). */
static void warn_no_tool(struct cli *c, const char *run, const char *const *names, size_t n)
{
    vigil_error err = {0};
    char *text = NULL;
    if (!n || vigil_run_show(c->rt, run, &text, &err))
        return;
    json_t *shown = cli_parse_json_text(text), *tools = NULL, *t;
    const char *agent = json_string_value(json_object_get(shown, "agent_id"));
    size_t i, matched = 0;
    if (agent && !vigil_tool_list_for_agent(c->rt, agent, &text, &err))
        tools = cli_parse_json_text(text);
    json_array_foreach (tools, i, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        for (size_t k = 0; name && k < n; k++)
            matched += fnmatch(names[k], name, 0) == 0;
    }
    if (tools && !json_array_size(tools))
        fprintf(stderr, "vigil: warning: the agent may call no tools (its manifest lists none): "
                        "--tools gives the re-run none\n");
    else if (tools && !matched)
        fprintf(stderr,
                "vigil: warning: --tools names none of the agent's %zu tools: the re-run has no "
                "tools (vigil tool list %s lists them)\n",
                json_array_size(tools), agent);
    json_decref(tools);
    json_decref(shown);
}

/* `runs rerun`: the override from --prompt, --model and --tools (a comma-separated list of
 * names or globs; "" allows none). */
static vigil_code rerun(struct cli *c, struct cli_opts *o, const char *const *spec, char key[65],
                        vigil_error *err)
{
    const char *tools = cli_opt(o, spec, "--tools"), *names[100];
    char buf[4096];
    vigil_run_override ov = {.prompt = cli_opt(o, spec, "--prompt"),
                             .model = cli_opt(o, spec, "--model")};
    if (tools) {
        if (strlen(tools) >= sizeof buf)
            return VG_FAIL(err, VIGIL_EINVAL, "--tools is longer than %zu characters",
                           sizeof buf - 1);
        snprintf(buf, sizeof buf, "%s", tools);
        ov.tools = names;
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (ov.n_tools == VG_ARRAY_LEN(names))
                return VG_FAIL(err, VIGIL_EINVAL, "--tools names more than %zu tools",
                               VG_ARRAY_LEN(names));
            names[ov.n_tools++] = t;
        }
    }
    vigil_code rc = vigil_run_rerun_with(c->rt, o->positional[0], &ov, key, err);
    if (!rc && tools)
        warn_no_tool(c, o->positional[0], names, ov.n_tools);
    return rc;
}

int cmd_runs_control(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {
        "--prompt=", "--by=", "--json", "--model=", "--tools=", "--queue", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    const char *verb = argv[0];
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional != 1)
        return cli_usage("runs %s needs exactly one run (its run key or run id)", verb);
    int json = cli_opt(&o, spec, "--json") != NULL;
    cli_open(c, 0);
    if (!strcmp(verb, "cancel")) {
        int queued = 0;
        if (cli_opt(&o, spec, "--prompt") || cli_opt(&o, spec, "--model") ||
            cli_opt(&o, spec, "--tools"))
            return cli_usage("--prompt, --model and --tools are for runs rerun");
        if (vigil_run_cancel(c->rt, o.positional[0], cli_opt(&o, spec, "--by"), &queued, &err))
            return cli_fail(&err);
        if (json)
            printf("{\"cancelled\": \"%s\"}\n", queued ? "queued" : "requested");
        else
            fprintf(stderr, "%s\n",
                    queued ? "cancelled: it will not start"
                           : "cancel requested: it stops at its next safe point");
        return 0;
    }
    char key[65];
    if (cli_opt(&o, spec, "--by"))
        return cli_usage("--by is for runs cancel");
    const char *prompt = cli_opt(&o, spec, "--prompt");
    /* rerun: the same agent afresh; resume: a sub-agent's conversation, continued. */
    if (!strcmp(verb, "resume")) {
        if (cli_opt(&o, spec, "--model") || cli_opt(&o, spec, "--tools"))
            return cli_usage("--model and --tools are for runs rerun");
        if (vigil_run_resume(c->rt, o.positional[0], prompt, key, &err))
            return cli_fail(&err);
    } else if (rerun(c, &o, spec, key, &err))
        return cli_fail(&err);
    if (json)
        printf("{\"run_key\": \"%s\"}\n", key);
    else
        printf("%s\n", key);
    fflush(stdout);
    if (cli_opt(&o, spec, "--queue")) { /* only queued: the daemon runs it when it starts */
        fprintf(stderr, "vigil: queued (vigil serve runs it)\n");
        return 0;
    }
    return cli_run_queued(c); /* as `vigil wake`: the daemon runs it, or this process does */
}
