/*
 * cmd-http.c: `vigil token` and the HTTP API options of `vigil serve` (docs/http.md). The API
 * itself is src/http; the daemon starts it through its service port (vigil_daemon_service in
 * include/vigil.h), so this file is where the two meet. Besides include/vigil.h it uses
 * http/http.h and os/fs.h.
 */
#include "base/common.h"

#include "cli.h"
#include "http/http.h"
#include "os/fs.h"

#include <sodium.h>

/* The data folder: the store file's folder, or for a store URI a folder of its own under the
 * XDG data folder, named by a hash of the URI (which holds no password: the store refuses one),
 * so that each PostgreSQL store has its own token, and none shares the local store's. */
static void data_folder(const struct cli *c, char *out, size_t n)
{
    const char *xdg = vg_os_getenv("XDG_DATA_HOME"), *home = vg_os_getenv("HOME");
    unsigned char h[8];
    if (!strstr(c->store_path, "://")) {
        vg_fs_dirname(c->store_path, out, n);
        return;
    }
    crypto_generichash(h, sizeof h, (const unsigned char *)c->store_path, strlen(c->store_path),
                       NULL, 0);
    int used = xdg && *xdg ? snprintf(out, n, "%s/vigil/store-", xdg)
                           : snprintf(out, n, "%s/.local/share/vigil/store-", home ? home : ".");
    for (size_t i = 0; i < sizeof h && used > 0 && (size_t)used + 2 < n; i++)
        used += snprintf(out + used, n - (size_t)used, "%02x", h[i]);
}

static int get_token(const struct cli *c, char token[65])
{
    char folder[4096];
    vigil_error err = {0};
    data_folder(c, folder, sizeof folder);
    if (vg_fs_mkdir_p(folder, &err) || vg_http_token(folder, 1, token, &err))
        return cli_fail(&err);
    return 0;
}

int cmd_token(struct cli *c, int argc, char **argv)
{
    char token[65];
    if (cli_wants_help(argc, argv)) {
        fputs("usage: vigil token\n\n"
              "Print the HTTP API's bearer token (creating it if needed): 64 hex characters,\n"
              "kept with mode 0600 as api-token beside the store. Clients send it as\n"
              "`Authorization: Bearer TOKEN` (docs/http.md). Delete the file to get a new one.\n",
              stdout);
        return 0;
    }
    if (argc > 1)
        return cli_usage("token takes no arguments");
    /* Only `vigil init` creates a store's folder: a store that is not there is refused with
     * the hint, before a token file is made beside nothing. */
    cli_open(c, 0);
    int rc = get_token(c, token);
    if (!rc)
        printf("%s\n", token);
    return rc;
}

static struct http_service {
    vigil_daemon_service port;
    struct vg_http_options o;
    struct vg_http *h;
    char token[65];
} service;

static vigil_code http_start(void *user, void (*poke)(void *), void *poke_user, vigil_error *err)
{
    struct http_service *s = user;
    s->o.poke = poke;
    s->o.poke_user = poke_user;
    return vg_http_start(&s->o, &s->h, err);
}

static void http_stop(void *user)
{
    struct http_service *s = user;
    vg_http_stop(s->h);
    s->h = NULL;
}

/* A number option from lo to hi into *out; CLI_USAGE when bad. */
static int number(const struct cli_opts *o, const char *const *spec, const char *name, long lo,
                  long hi, int *out)
{
    const char *v = cli_opt(o, spec, name);
    char *end = NULL;
    if (!v)
        return 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > hi)
        return cli_usage("%s takes a number from %ld to %ld", name, lo, hi);
    *out = (int)x;
    return 0;
}

int cli_http_service(struct cli *c, const struct cli_opts *o, const char *const *spec,
                     const vigil_daemon_service **out)
{
    const char *listen = cli_opt(o, spec, "--listen");
    int rc;
    *out = NULL;
    if (!listen) {
        if (cli_opt(o, spec, "--show-token") || cli_opt(o, spec, "--allow-remote") ||
            cli_opt(o, spec, "--allow-origin"))
            return cli_usage("--show-token, --allow-remote and --allow-origin go with --listen");
        return 0;
    }
    vigil_error err = {0};
    /* Before the daemon takes the store: a bad address exits 2, whoever serves the store. */
    if (vg_http_check_listen(listen, cli_opt(o, spec, "--allow-remote") != NULL, &err))
        return cli_fail(&err);
    if ((rc = get_token(c, service.token)))
        return rc;
    /* The task domain, when its database exists: /v1/todo/'s routes. */
    service.o = (struct vg_http_options){.store_path = c->store_path,
                                         .listen = listen,
                                         .token = service.token,
                                         .todo = cli_todo_domain(c)};
    service.o.allow_remote = cli_opt(o, spec, "--allow-remote") != NULL;
    service.o.allow_origin = cli_opt(o, spec, "--allow-origin");
    if ((rc = number(o, spec, "--http-timeout-s", 1, 3600, &service.o.timeout_s)) ||
        (rc = number(o, spec, "--http-max-connections", 1, 65536, &service.o.max_connections)) ||
        (rc = number(o, spec, "--events-poll-ms", 10, 60000, &service.o.events_poll_ms)) ||
        (rc = number(o, spec, "--events-ring", 1, 4096, &service.o.events_ring)))
        return rc;
    if (cli_opt(o, spec, "--show-token")) {
        printf("%s\n", service.token);
        fflush(stdout);
    }
    service.port = (vigil_daemon_service){.user = &service, .start = http_start, .stop = http_stop};
    *out = &service.port;
    return 0;
}
