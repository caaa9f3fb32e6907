/*
 * cmd-sync.c: `vigil sync --with OTHER_STORE`: two stores of one person's devices exchange what
 * the other lacks, both ways (docs/sync.md).
 */
#include "cli.h"

#include "os/fs.h"

static const char sync_help[] =
    "usage: vigil sync --with OTHER_STORE [--json]\n"
    "\n"
    "Syncs this store with OTHER_STORE (a file or a postgresql:// URI), both ways: each gets the\n"
    "agents, states, messages, reports, links and tool operations it lacks, and each merges\n"
    "what it gets the same way, so both end holding the same agents. A store syncs for the\n"
    "first time by joining: it gets a host id of its own and logs what it holds. Runs, wakes\n"
    "and leases stay with their store. Syncing again sends nothing new twice.\n"
    "\n"
    "Prints what went each way; --json prints {host, peer_host, sent, received, holes}.\n"
    "holes counts log entries still missing: a third store that holds them must sync first.\n"
    "Exit status: 0 synced; 2 usage; 3 OTHER_STORE does not exist; 4 both stores have one host\n"
    "id (one is a copy of the other: see docs/sync.md); 5 a store failed.\n";

static void print_direction(const char *what, const json_t *d)
{
    printf("%-9s %lld log entries, %lld records (%lld bytes), %lld stored or changed\n", what,
           (long long)json_integer_value(json_object_get(d, "entries")),
           (long long)json_integer_value(json_object_get(d, "records")),
           (long long)json_integer_value(json_object_get(d, "bytes")),
           (long long)json_integer_value(json_object_get(d, "changed")));
}

int cmd_sync(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--with=", "--json", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    vigil_runtime *peer = NULL;
    char *text = NULL;
    if (cli_wants_help(argc, argv)) {
        fputs(sync_help, stdout);
        return 0;
    }
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    const char *other = cli_opt(&o, spec, "--with");
    if (o.n_positional || !other || !*other)
        return cli_usage("sync needs --with OTHER_STORE and nothing else");
    if (!strstr(other, "://") && !vg_fs_exists(other)) {
        fprintf(stderr, "vigil: store \"%s\" does not exist\n", other);
        return vigil_code_exit_status(VIGIL_ENOTFOUND);
    }
    cli_open(c, 0);
    vigil_runtime_options ro = {.size = sizeof ro, .store_uri = other};
    if (vigil_runtime_open(&ro, &peer, &err) || vigil_sync_with(c->rt, peer, &text, &err)) {
        vigil_runtime_close(peer);
        return cli_fail(&err);
    }
    vigil_runtime_close(peer);
    if (cli_opt(&o, spec, "--json")) {
        cli_print_json_text(text);
        return 0;
    }
    json_t *v = cli_parse_json_text(text);
    printf("this store %s, the other %s\n", json_string_value(json_object_get(v, "host")),
           json_string_value(json_object_get(v, "peer_host")));
    print_direction("sent", json_object_get(v, "sent"));
    print_direction("received", json_object_get(v, "received"));
    json_int_t holes = json_integer_value(json_object_get(v, "holes"));
    if (holes)
        printf("%lld log entries are still missing: another store holds them; sync with it\n",
               (long long)holes);
    json_decref(v);
    return 0;
}
