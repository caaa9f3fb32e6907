/*
 * cmd-mcp.c: `vigil mcp list|tools|call`: the MCP servers declared in the config file and in
 * applied agents' manifests (`mcp_servers`, docs/mcp.md), checked by hand. The store is read
 * (vigil_mcp_servers) only when it exists, so the config file's servers work without one; a
 * server is started for the command and stopped before it exits. Uses the internal headers
 * config/config.h (the config file without a store), mcp/mcp.h and os/fs.h.
 */
#include "cli.h"
#include "base/json.h"

#include "config/config.h"
#include "mcp/mcp.h"
#include "os/fs.h"

static const char mcp_help[] =
    "usage: vigil mcp list [--check] [--json]\n"
    "       vigil mcp tools SERVER [--json]\n"
    "       vigil mcp call SERVER TOOL [ARGS_JSON] [--json]\n"
    "       vigil mcp serve [--page-size N]   (vigil's public agents as an MCP server)\n"
    "\n"
    "The servers are those of the config file's mcp_servers and of every applied agent's\n"
    "manifest (--agent ID: the config file's and that agent's only; docs/mcp.md); `list`\n"
    "shows where each is declared. `list --check`\n"
    "starts each server and counts its tools (exit 9 when one does not answer). `tools` prints "
    "each tool with the contract vigil\n"
    "gives it (its vigil name is SERVER__TOOL). `call` calls TOOL (the server's own name for\n"
    "it, or vigil's) directly, without an agent or the gate, prints the result as JSON and exits 1 "
    "when the\n"
    "tool reported an error.\n";

/* A command asks and exits: what a server would say on a stream of its own comes too late. */
static const struct vg_mcp_options one_shot = {.no_own_stream = 1};

struct mcp_cli {
    struct vg_config *cfg;
    struct vg_mcp_conf *conf;
    json_t *declared_in; /* server name -> where it is declared */
    json_t *clashes;     /* server name -> why no agent is served it (declared twice) */
    vigil_runtime *rt;   /* the store's runtime, or NULL (the config file's servers only) */
};

/* What a server listed becomes the tool list agents are offered (trial E8): a tool it gained
 * is callable at once, without waiting for some chat turn to start it. */
static void remember(const struct mcp_cli *m, const char *server, json_t *tools)
{
    vigil_error err = {0};
    char *text = m->rt ? vg_json_dumps(tools, JSON_COMPACT) : NULL;
    if (text && vigil_mcp_remember_tools(m->rt, server, text, &err))
        fprintf(stderr, "vigil: note: could not store the tool list of \"%s\": %s\n", server,
                err.message);
    free(text);
}

/* The servers the store knows (config file and manifests) when there is a store, else the
 * config file's. */
static int declared(struct cli *cl, struct mcp_cli *m, const char *agent, json_t **decls,
                    vigil_error *err)
{
    json_t *v, *servers = vg_config_get(m->cfg, "mcp_servers");
    const char *name;
    char *text = NULL;
    *decls = json_object();
    m->declared_in = json_object();
    m->clashes = json_object();
    if (!agent && !strstr(cl->store_path, "://") && !vg_fs_exists(cl->store_path)) {
        json_object_foreach (json_is_object(servers) ? servers : NULL, name, v) {
            json_object_set(*decls, name, v);
            json_object_set_new(m->declared_in, name, json_string("the config file"));
        }
        return 0;
    }
    cli_open(cl, 0);
    m->rt = cl->rt;
    agent = cli_agent(cl, agent);
    if (vigil_mcp_servers(cl->rt, agent, &text, err))
        return 1;
    json_t *all = json_loads(text, 0, NULL);
    vigil_free(text);
    json_object_foreach (all, name, v) {
        json_object_set(*decls, name, json_object_get(v, "declaration"));
        json_object_set(m->declared_in, name, json_object_get(v, "declared_in"));
        if (json_is_string(json_object_get(v, "clash"))) /* null: none ("(null)" in H13) */
            json_object_set(m->clashes, name, json_object_get(v, "clash"));
    }
    json_decref(all);
    return 0;
}

static int load(struct cli *cl, struct mcp_cli *m, const char *agent)
{
    vigil_error err = {0};
    json_t *decls = NULL;
    int bad = vg_config_load(NULL, &m->cfg, &err) || declared(cl, m, agent, &decls, &err) ||
              vg_mcp_conf_parse(decls, &m->conf, &err);
    json_decref(decls);
    return bad ? cli_fail(&err) : 0;
}

static int open_client(struct mcp_cli *m, const char *name, struct vg_mcp_client **c)
{
    vigil_error err = {0};
    const struct vg_mcp_server_conf *s = vg_mcp_conf_find(m->conf, name);
    if (!s) {
        fprintf(stderr,
                "vigil: no MCP server \"%s\" is declared in the config file's mcp_servers "
                "or in an applied agent's manifest (see `vigil mcp list`)\n",
                name);
        return vigil_code_exit_status(VIGIL_ENOTFOUND);
    }
    if (vg_mcp_client_new(s, &one_shot, c, &err))
        return cli_fail(&err);
    return 0;
}

static json_t *server_row(const struct mcp_cli *m, const struct vg_mcp_server_conf *s, int check)
{
    json_t *row =
        json_pack("{s:s, s:s, s:O}", "name", s->name, "transport", s->url ? "http" : "stdio",
                  "declared_in", json_object_get(m->declared_in, s->name));
    if (s->url)
        json_object_set_new(row, "url", json_string(s->url));
    else {
        json_t *argv = json_array();
        for (size_t i = 0; s->argv[i]; i++)
            json_array_append_new(argv, json_string(s->argv[i]));
        json_object_set_new(row, "command", argv);
    }
    json_object_set_new(row, "state", json_string("not started"));
    if (json_object_get(m->clashes, s->name))
        json_object_set(row, "clash", json_object_get(m->clashes, s->name));
    if (check) {
        struct vg_mcp_client *c = NULL;
        json_t *tools = NULL;
        vigil_error err = {0};
        if (!vg_mcp_client_new(s, &one_shot, &c, &err) && !vg_mcp_client_tools(c, &tools, &err)) {
            json_object_set_new(row, "tools", json_integer((json_int_t)json_array_size(tools)));
            remember(m, s->name, tools);
        } else
            json_object_set_new(row, "error", json_string(err.message));
        json_object_set_new(row, "state", json_string(c ? vg_mcp_client_state(c) : "down"));
        vg_mcp_client_free(c);
    }
    return row;
}

static int do_list(struct mcp_cli *m, int check, int as_json)
{
    json_t *rows = json_array();
    for (size_t i = 0; i < m->conf->n; i++)
        json_array_append_new(rows, server_row(m, &m->conf->servers[i], check));
    if (as_json) {
        vg_json_dumpf(rows, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
    } else if (!m->conf->n) {
        fprintf(stderr, /* a note, not a row: stdout stays empty for scripts */
                "vigil: no MCP servers are declared (mcp_servers in the config file or in "
                "an agent's manifest, docs/mcp.md)\n");
    }
    size_t i;
    json_t *r;
    int down = 0;
    json_array_foreach (rows, i, r) {
        down += json_object_get(r, "error") != NULL;
        if (!as_json) {
            printf("%-20s %-6s %-12s", json_string_value(json_object_get(r, "name")),
                   json_string_value(json_object_get(r, "transport")),
                   json_string_value(json_object_get(r, "state")));
            if (json_object_get(r, "tools"))
                printf(" %lld tools", (long long)json_integer_value(json_object_get(r, "tools")));
            if (json_object_get(r, "error"))
                printf(" %s", json_string_value(json_object_get(r, "error")));
            printf(" (%s)", json_string_value(json_object_get(r, "declared_in")));
            if (json_is_string(json_object_get(r, "clash"))) /* served to no agent until renamed */
                printf(" %s", json_string_value(json_object_get(r, "clash")));
            printf("\n");
        }
    }
    json_decref(rows);
    /* A script checking its servers reads the exit status (trial E26 d) */
    if (down)
        fprintf(stderr, "vigil: %d of %zu MCP server(s) did not answer\n", down, m->conf->n);
    return down ? vigil_code_exit_status(VIGIL_ENETWORK) : 0;
}

/* One row of `mcp tools`: the contract vigil gives the tool, or why it refuses it. */
static json_t *tool_row(const struct vg_mcp_server_conf *s, json_t *t)
{
    vigil_error err = {0};
    json_t *c = NULL;
    const char *tname = json_string_value(json_object_get(t, "name"));
    json_t *ov = json_object_get(s->tools, tname ? tname : "");
    json_t *row = json_pack("{s:s?}", "mcp_name", tname);
    if (vg_mcp_tool_contract(s->name, t, ov, &c, &err)) {
        json_object_set_new(row, "served", json_false());
        json_object_set_new(row, "refused_because", json_string(err.message));
        json_object_set(row, "description", json_object_get(t, "description"));
        return row;
    }
    json_object_update(row, c);
    json_object_set_new(row, "served", json_true());
    json_decref(c);
    return row;
}

/* Two of a server's tools whose vigil names are the same (dup-name, dup_name): the first is
 * served, the other refused, as the provider does (trial E26 a). */
static void refuse_taken(json_t *row, json_t *first_of)
{
    const char *vname = json_string_value(json_object_get(row, "name"));
    const char *first = vname ? json_string_value(json_object_get(first_of, vname)) : NULL;
    char why[400];
    if (!json_is_true(json_object_get(row, "served")))
        return;
    if (!first) {
        json_object_set(first_of, vname, json_object_get(row, "mcp_name"));
        return;
    }
    snprintf(why, sizeof why, "its name %s is taken by %s", vname, first);
    json_object_set_new(row, "served", json_false());
    json_object_set_new(row, "refused_because", json_string(why));
}

static int do_tools(struct mcp_cli *m, const char *server, int as_json)
{
    struct vg_mcp_client *c = NULL;
    json_t *tools = NULL, *t, *rows;
    vigil_error err = {0};
    size_t i;
    int st = open_client(m, server, &c);
    if (st)
        return st;
    if (vg_mcp_client_tools(c, &tools, &err)) {
        vg_mcp_client_free(c);
        return cli_fail(&err);
    }
    remember(m, server, tools);
    rows = json_array();
    json_t *first_of = json_object(); /* vigil name -> the MCP tool served under it */
    json_array_foreach (tools, i, t) {
        json_t *row = tool_row(vg_mcp_conf_find(m->conf, server), t);
        refuse_taken(row, first_of);
        json_array_append_new(rows, row);
    }
    json_decref(first_of);
    vg_mcp_client_free(c);
    if (as_json) {
        vg_json_dumpf(rows, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
    }
    json_array_foreach (rows, i, t)
        if (!as_json) {
            if (json_is_true(json_object_get(t, "served")))
                printf("%-40s risk=%-6s mutating=%-5s %s\n",
                       json_string_value(json_object_get(t, "name")),
                       json_string_value(json_object_get(t, "risk")),
                       json_is_true(json_object_get(t, "mutating")) ? "yes" : "no",
                       json_string_value(json_object_get(t, "idempotency")));
            else
                printf("%-40s refused: %s\n", json_string_value(json_object_get(t, "mcp_name")),
                       json_string_value(json_object_get(t, "refused_because")));
        }
    json_decref(rows);
    return 0;
}

/* `mcp tools` prints vigil's name of each tool (SERVER__TOOL); `call` takes the server's own.
 * Given vigil's name, use the server's (copied to own[]): the tool list says which one it
 * stands for. */
static const char *server_name_of(struct vg_mcp_client *c, const struct vg_mcp_server_conf *s,
                                  const char *tool, char own[256])
{
    json_t *tools = NULL, *t;
    vigil_error err = {0};
    size_t i;
    if (!s || !strstr(tool, "__") || vg_mcp_client_tools(c, &tools, &err))
        return tool;
    json_array_foreach (tools, i, t) {
        json_t *row = tool_row(s, t);
        const char *vname = json_string_value(json_object_get(row, "name"));
        int same = vname && !strcmp(vname, tool);
        json_decref(row);
        if (same && json_string_value(json_object_get(t, "name"))) {
            snprintf(own, 256, "%s", json_string_value(json_object_get(t, "name")));
            return own;
        }
    }
    return tool;
}

/* `mcp call` goes around the gate; a person who switched every agent's tools off in an
 * incident hears that this call is not stopped (trial E26 b). */
static void warn_if_killed(const struct mcp_cli *m)
{
    int on = 0;
    vigil_error err = {0};
    if (m->rt && !vigil_kill_active(m->rt, NULL, "mcp", &on, &err) && on)
        fprintf(stderr, "vigil: warning: a kill switch is on; `vigil mcp call` bypasses it and "
                        "calls the tool anyway\n");
}

static int do_call(struct mcp_cli *m, const char *server, const char *tool, const char *args,
                   int compact)
{
    struct vg_mcp_client *c = NULL;
    json_t *a = NULL, *res = NULL;
    json_error_t je;
    vigil_error err = {0};
    if (args && !(a = json_loads(args, 0, &je))) {
        fprintf(stderr, "vigil: the tool arguments are not JSON: %s\n", je.text);
        return vigil_code_exit_status(VIGIL_EPARSE);
    }
    if (a && !json_is_object(a)) {
        json_decref(a);
        fprintf(stderr, "vigil: the tool arguments must be a JSON object\n");
        return vigil_code_exit_status(VIGIL_EINVAL);
    }
    char own[256];
    int st = open_client(m, server, &c);
    if (!st)
        warn_if_killed(m);
    if (!st)
        tool = server_name_of(c, vg_mcp_conf_find(m->conf, server), tool, own);
    if (!st && vg_mcp_client_call(c, tool, a, &res, &err))
        st = cli_fail(&err);
    vg_mcp_client_free(c);
    json_decref(a);
    if (st)
        return st;
    vg_json_dumpf(res, stdout, compact ? JSON_COMPACT : JSON_INDENT(2));
    fputc('\n', stdout);
    int failed = json_is_true(json_object_get(res, "isError"));
    json_decref(res);
    if (failed) {
        fprintf(stderr, "vigil: MCP tool \"%s\" of server \"%s\" reported an error\n", tool,
                server);
        return vigil_code_exit_status(VIGIL_ERROR);
    }
    return 0;
}

int cmd_mcp(struct cli *cl, int argc, char **argv)
{
    static const char *const spec[] = {"--json", "--check", "--agent=", NULL};
    struct cli_opts o;
    struct mcp_cli m = {0};
    int st;
    if (argc < 2 || cli_wants_help(argc, argv)) {
        fputs(mcp_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : 0;
    }
    const char *verb = argv[1];
    if (!strcmp(verb, "serve"))
        return cmd_mcp_serve(cl, argc - 1, argv + 1);
    if (cli_parse(argc - 1, argv + 1, spec, &o))
        return CLI_USAGE;
    int as_json = cli_opt(&o, spec, "--json") != NULL;
    if (strcmp(verb, "list") && strcmp(verb, "tools") && strcmp(verb, "call"))
        return cli_usage("unknown mcp command \"%s\" (list, tools, call, serve)", verb);
    if (!strcmp(verb, "list") && o.n_positional)
        return cli_usage("mcp list takes no arguments");
    if (!strcmp(verb, "tools") && o.n_positional != 1)
        return cli_usage("mcp tools needs exactly one SERVER");
    if (!strcmp(verb, "call") && (o.n_positional < 2 || o.n_positional > 3))
        return cli_usage("mcp call needs SERVER TOOL [ARGS_JSON]");
    if ((st = load(cl, &m, cli_opt(&o, spec, "--agent")))) {
        vg_mcp_conf_free(m.conf);
        json_decref(m.declared_in);
        json_decref(m.clashes);
        vg_config_free(m.cfg);
        return st;
    }
    if (!strcmp(verb, "list"))
        st = do_list(&m, cli_opt(&o, spec, "--check") != NULL, as_json);
    else if (!strcmp(verb, "tools"))
        st = do_tools(&m, o.positional[0], as_json);
    else
        st = do_call(&m, o.positional[0], o.positional[1],
                     o.n_positional == 3 ? o.positional[2] : NULL, as_json);
    vg_mcp_conf_free(m.conf);
    json_decref(m.declared_in);
    json_decref(m.clashes);
    vg_config_free(m.cfg);
    return st;
}
