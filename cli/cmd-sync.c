/*
 * cmd-sync.c: `vigil sync --with OTHER_STORE`: two stores of one person's devices exchange what
 * the other lacks, both ways (docs/sync.md).
 */
#include "cli.h"

#include "os/fs.h"

#include <errno.h>

static const char sync_help[] =
    "usage: vigil sync --with OTHER_STORE [--json]\n"
    "       vigil sync --with http://HOST:PORT --token-file FILE [--json]\n"
    "\n"
    "Syncs this store with OTHER_STORE (a file or a postgresql:// URI), both ways: each gets the\n"
    "agents, states, messages, reports, links and tool operations it lacks, and each merges\n"
    "what it gets the same way, so both end holding the same agents. A store syncs for the\n"
    "first time by joining: it gets a host id of its own and logs what it holds. Runs, wakes\n"
    "and leases stay with their store. Syncing again sends nothing new twice.\n"
    "\n"
    "With http://HOST:PORT the other store is the one of the `vigil serve --listen` there,\n"
    "reached over its HTTP API; FILE holds its token (`vigil token` on that machine). An\n"
    "exchange cut off midway is taken up where it stopped by the next `vigil sync`.\n"
    "\n"
    "Prints what went each way; --json prints {host, peer_host, sent, received, holes,\n"
    "duplicate_names}.\n"
    "holes counts log entries still missing: a third store that holds them must sync first.\n"
    "Exit status: 0 synced; 2 usage; 3 OTHER_STORE or FILE does not exist; 4 both stores have\n"
    "one host id (one is a copy of the other: see docs/sync.md); 5 a store failed; 9 the\n"
    "daemon could not be reached or refused the token.\n";

/* The token in file: its first line, at most 100 bytes. */
static int read_token(const char *file, char token[128])
{
    FILE *f = fopen(file, "r");
    if (!f) {
        fprintf(stderr, "vigil: could not read the token file \"%s\": %s\n", file, strerror(errno));
        return vigil_code_exit_status(errno == ENOENT ? VIGIL_ENOTFOUND : VIGIL_EIO);
    }
    if (!fgets(token, 128, f))
        token[0] = '\0';
    fclose(f);
    token[strcspn(token, "\r\n")] = '\0';
    if (!*token || strlen(token) > 100)
        return cli_usage("the token file holds the daemon's token on its first line");
    return 0;
}

/* Sync this store with the other (a store, or a daemon when token is not NULL). */
static int sync_run(struct cli *c, const char *other, const char *token, char **text)
{
    vigil_error err = {0};
    vigil_runtime *peer = NULL;
    cli_open(c, 0);
    if (token) {
        vigil_code rc = vigil_sync_remote(c->rt, other, token, text, &err);
        return rc ? cli_fail(&err) : 0;
    }
    vigil_runtime_options ro = {.size = sizeof ro, .store_uri = other};
    if (vigil_runtime_open(&ro, &peer, &err) || vigil_sync_with(c->rt, peer, text, &err)) {
        vigil_runtime_close(peer);
        return cli_fail(&err);
    }
    vigil_runtime_close(peer);
    return 0;
}

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
    static const char *const spec[] = {"--with=", "--token-file=", "--json", NULL};
    struct cli_opts o;
    char *text = NULL, token[128];
    if (cli_wants_help(argc, argv)) {
        fputs(sync_help, stdout);
        return 0;
    }
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    const char *other = cli_opt(&o, spec, "--with"),
               *token_file = cli_opt(&o, spec, "--token-file");
    if (o.n_positional || !other || !*other)
        return cli_usage("sync needs --with OTHER_STORE and nothing else");
    int daemon = !strncmp(other, "http://", 7) || !strncmp(other, "https://", 8);
    if (daemon != (token_file != NULL))
        return cli_usage(daemon ? "a daemon (--with http://...) needs --token-file FILE"
                                : "--token-file goes with --with http://HOST:PORT");
    if (!daemon && !strstr(other, "://") && !vg_fs_exists(other)) {
        fprintf(stderr, "vigil: store \"%s\" does not exist\n", other);
        return vigil_code_exit_status(VIGIL_ENOTFOUND);
    }
    int rc = daemon ? read_token(token_file, token) : 0;
    if (!rc)
        rc = sync_run(c, other, daemon ? token : NULL, &text);
    if (rc)
        return rc;
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
    size_t i, j;
    json_t *d, *id;
    json_array_foreach (json_object_get(v, "duplicate_names"), i, d) {
        printf("%zu agents are named \"%s\" (made apart on two devices): name them by id:",
               json_array_size(json_object_get(d, "ids")),
               json_string_value(json_object_get(d, "name")));
        json_array_foreach (json_object_get(d, "ids"), j, id)
            printf(" %s", json_string_value(id));
        putchar('\n');
    }
    json_decref(v);
    return 0;
}
