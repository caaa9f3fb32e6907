/*
 * cmd-init.c: `vigil init`: create the store file (and its folder) and report where it is.
 */
#include "cli.h"
#include "base/json.h"

int cmd_init(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--json", "--help", "-h", NULL};
    struct cli_opts o;
    if (cli_wants_help(argc, argv)) {
        printf("usage: vigil [--store PATH] init [--json]\n\n"
               "Create the store if it does not exist (an existing store is opened and upgraded\n"
               "to this version's schema). Prints the store's path.\n");
        return 0;
    }
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional)
        return cli_usage("init takes no arguments");
    cli_open(c, 1);
    if (cli_opt(&o, spec, "--json")) {
        json_t *v = json_pack("{s:s, s:s}", "store", c->store_path, "version", vigil_version());
        vg_json_dumpf(v, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
        json_decref(v);
    } else {
        printf("store ready: %s\n", c->store_path);
    }
    return 0;
}
