/*
 * cmd-runctl.c: `vigil runs cancel RUN` and `vigil runs rerun RUN [--prompt TEXT]`
 * (vigil_run_cancel, vigil_run_rerun; docs/runs.md).
 */
#include "cli.h"

int cmd_runs_control(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--prompt=", "--by=", "--json", NULL};
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
        if (cli_opt(&o, spec, "--prompt"))
            return cli_usage("--prompt is for runs rerun");
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
    /* rerun: the same agent afresh; resume: a sub-agent's conversation, continued. */
    vigil_code (*again)(vigil_runtime *, const char *, const char *, char[65], vigil_error *) =
        !strcmp(verb, "resume") ? vigil_run_resume : vigil_run_rerun;
    if (again(c->rt, o.positional[0], cli_opt(&o, spec, "--prompt"), key, &err))
        return cli_fail(&err);
    if (json)
        printf("{\"run_key\": \"%s\"}\n", key);
    else
        printf("%s\n", key);
    return 0;
}
