/*
 * main.c: the `vigil` command: global options, the command table, and the helpers every
 * command group uses (opening the store, printing errors and JSON, parsing options).
 */
#include "cli.h"
#include "base/json.h"

#include "config/config.h"
#include "os/fs.h"
#include "os/ids.h"

#include <stdarg.h>
#include <unistd.h>

static int cmd_help(struct cli *c, int argc, char **argv);

static const struct cli_command commands[] = {
    {"help", cmd_help, "this overview; `vigil help COMMAND` for a command's usage"},
    {"init", cmd_init, "create the store (default: $XDG_DATA_HOME/vigil/vigil.db)"},
    {"agent", cmd_agent, "create, list, show, pause, resume, destroy and delete agents"},
    {"chat", cmd_chat, "talk with an agent (interactive, or one turn with -m)"},
    {"runs", cmd_runs, "run history: list, show, messages, message, tools, tool"},
    {"task", cmd_task, "task graph: add, block, list, show, graph, cancel, dispatch"},
    {"todo", cmd_todo, "the reference task domain: categories, tasks, checklists, task agents"},
    {"replay", cmd_replay, "rebuild a run from its journal and check the stored state"},
    {"journal", cmd_journal, "export or import an agent's run journals (JSON lines)"},
    {"approvals", cmd_approvals, "list pending and resolved approvals of tool calls"},
    {"approve", cmd_approve, "approve a pending tool call"},
    {"reject", cmd_reject, "reject a pending tool call with a reason"},
    {"indoubt", cmd_indoubt, "operations a crash left in doubt: list, show, resolve"},
    {"tool", cmd_tool, "list the tools an agent may call; call one through the full gate"},
    {"sandbox", cmd_sandbox,
     "code sandbox: what this machine offers; run a Lua or TypeScript program"},
    {"mcp", cmd_mcp, "MCP servers of the config file: list, tools, call one by hand"},
    {"prune", cmd_prune, "give up what is past its retention; holds (hold, release, holds)"},
    {"kill", cmd_kill, "kill switches: stop mutating tools and new wakes (on, off, status)"},
    {"memory", cmd_memory, "list, search and show memory; approve or reject pending changes"},
    {"report", cmd_report, "an agent's report of a scope, with its confidence, sources and age"},
    {"subscription", cmd_subscription_group, "add, list and remove subscriptions that wake agents"},
    {"timer", cmd_timer_group, "add, list, re-zone and remove timers (RRULE, cron, one-shot)"},
    {"wake", cmd_wake, "wake an agent now (manual, or with -m as the user)"},
    {"notify", cmd_notify, "raise notification tokens"},
    {"wakes", cmd_wakes, "the wake-run log: queued, started, completed, skipped, failed"},
    {"status", cmd_status,
     "the store and its daemons, the queue, what waits for a person, what needs attention"},
    {"slo", cmd_slo, "service levels of recent runs: success, side effects, latency, cost"},
    {"serve", cmd_serve, "run the daemon: notifications, timers, the wake queue and workers"},
    {"eval", cmd_eval, "run golden and adversarial scenarios against fake tools; a scorecard"},
    {"sync", cmd_sync, "sync this store with another device's store, both ways"},
    {"token", cmd_token, "print the HTTP API's bearer token (creating it if needed)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: vigil [--store PATH] COMMAND [ARGS...]\n\n"
               "vigil is a durable runtime for persistent AI agents.\n\ncommands:\n");
    for (size_t i = 0; i < VG_ARRAY_LEN(commands); i++)
        fprintf(f, "  %-14s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\noptions:\n"
               "  --store PATH   the store file or postgres:// URI (or $VIGIL_STORE, or the\n"
               "                 config file's store:); default\n"
               "                 $XDG_DATA_HOME/vigil/vigil.db (~/.local/share/vigil/vigil.db);\n"
               "                 it may also follow the command\n"
               "  --version      print the version\n"
               "  -h, --help     this help; `vigil help COMMAND` or `vigil COMMAND --help` for a\n"
               "                 command\n");
}

/* Why the config file, asked for its `store:`, did not load (code 0: it did, or was not
 * asked): a store chosen without it could be the wrong one. */
static vigil_error store_config_err;
/* $VIGIL_STORE set but empty: almost always a script's unset variable, never a store to guess. */
static int store_env_empty;

static void default_store(struct cli *c)
{
    const char *env = vg_os_getenv("VIGIL_STORE");
    const char *xdg = vg_os_getenv("XDG_DATA_HOME");
    const char *home = vg_os_getenv("HOME");
    struct vg_config *cfg = NULL;
    const char *configured = NULL;
    /* The config file's `store:` comes after $VIGIL_STORE. A config that does not load is
     * reported when the store is opened (cli_open) unless --store names it: its `store:`, if
     * any, is unknown, and the default store in its place would be a silent guess. */
    if (!(env && *env) && vg_config_load(NULL, &cfg, &store_config_err) == VIGIL_OK)
        configured = vg_config_get_string(cfg, "store", NULL);
    store_env_empty = env && !*env;
    if (env && *env) {
        c->store_path = env;
    } else if (configured && *configured) {
        snprintf(c->store_buf, sizeof c->store_buf, "%s", configured);
        c->store_path = c->store_buf;
    } else if (xdg && *xdg) {
        snprintf(c->store_buf, sizeof c->store_buf, "%s/vigil/vigil.db", xdg);
        c->store_path = c->store_buf;
    } else {
        snprintf(c->store_buf, sizeof c->store_buf, "%s/.local/share/vigil/vigil.db",
                 home && *home ? home : ".");
        c->store_path = c->store_buf;
    }
    vg_config_free(cfg);
}

/*
 * A store file this process may not write, or a folder it may not create files in (the store
 * itself, or its write-ahead log): "permission denied", exit 10, whoever finds out first —
 * this check, the folder's creation or the store refusing a write. NULL while writable.
 */
static const char *read_only_what, *read_only_path;
static char read_only_buf[4096];

static int deny(void)
{
    fprintf(stderr, "vigil: permission denied: the %s \"%s\" is read-only\n", read_only_what,
            read_only_path);
    return vigil_code_exit_status(VIGIL_EDENIED);
}

/* Note whether the store file (or its folder) is read-only. init makes or upgrades the
 * store: a read-only one, or none yet in a read-only folder, fails at once. */
static void check_writable(const char *store, const char *dir, int create)
{
    int exists = vg_fs_exists(store);
    /* access() asks the kernel, so an immutable file or a read-only mount counts too. */
    int store_ro = exists && access(store, W_OK) != 0;
    int dir_ro = access(dir, W_OK) != 0;
    if (store_ro) {
        read_only_what = "store";
        read_only_path = store;
    } else if (dir_ro) {
        snprintf(read_only_buf, sizeof read_only_buf, "%s", dir);
        read_only_what = "folder";
        read_only_path = read_only_buf;
    }
    if (create && (store_ro || (!exists && dir_ro)))
        exit(deny());
}

int cli_require_writable(struct cli *c)
{
    char dir[4096];
    if (strstr(c->store_path, "://"))
        return 0;
    vg_fs_dirname(c->store_path, dir, sizeof dir);
    check_writable(c->store_path, dir, 0);
    return read_only_path ? deny() : 0;
}

int cli_open(struct cli *c, int create)
{
    vigil_error err = {0};
    char dir[4096];
    if (c->rt)
        return 0;
    if (store_env_empty && c->store_path == c->store_buf)
        exit(cli_usage("VIGIL_STORE is set but empty: give it a store path, or unset it for the "
                       "default store"));
    if (store_config_err.code && c->store_path == c->store_buf)
        exit(cli_fail(&store_config_err));
    if (!strstr(c->store_path, "://")) {
        vg_fs_dirname(c->store_path, dir, sizeof dir);
        if (create && vg_fs_mkdir_p(dir, &err) != VIGIL_OK) {
            if (err.code != VIGIL_EDENIED)
                exit(cli_fail(&err));
            fprintf(stderr, "vigil: permission denied: could not create the folder \"%s\"\n", dir);
            exit(vigil_code_exit_status(VIGIL_EDENIED));
        }
        if (!create && !vg_fs_exists(c->store_path)) {
            fprintf(stderr, "vigil: store \"%s\" does not exist (create it with `vigil init`)\n",
                    c->store_path);
            exit(vigil_code_exit_status(VIGIL_ENOTFOUND));
        }
        check_writable(c->store_path, dir, create);
    }
    vigil_runtime_options o = {
        .size = sizeof o, .store_uri = c->store_path, .create_if_missing = create};
    if (vigil_runtime_open(&o, &c->rt, &err) != VIGIL_OK)
        exit(cli_fail(&err));
    int rc = cli_todo_attach(c);
    if (rc)
        exit(rc);
    return 0;
}

/* The agents named name, into ids (those not destroyed first); how many there are. */
struct named {
    char live[4][64], gone[4][64];
    int n_live, n_gone;
};

static void collect_named(struct cli *c, const char *name, struct named *m)
{
    char *cursor = NULL;
    do {
        char *text = NULL;
        vigil_error err = {0};
        if (vigil_agent_list(c->rt, cursor, 1000, &text, &err))
            exit(cli_fail(&err));
        vg_free(cursor);
        cursor = NULL;
        json_t *v = cli_parse_json_text(text), *a;
        size_t i;
        json_array_foreach (json_object_get(v, "items"), i, a) {
            const char *n = json_string_value(json_object_get(a, "name"));
            const char *lc = json_string_value(json_object_get(a, "lifecycle"));
            int gone = lc && !strcmp(lc, "destroyed");
            int *k = gone ? &m->n_gone : &m->n_live;
            if (n && !strcmp(n, name) && (*k)++ < 4)
                snprintf(gone ? m->gone[*k - 1] : m->live[*k - 1], 64, "%s",
                         json_string_value(json_object_get(a, "id")));
        }
        const char *next = json_string_value(json_object_get(v, "next_cursor"));
        cursor = next ? vg_strdup(next) : NULL;
        json_decref(v);
    } while (cursor);
}

int cli_agent_named(struct cli *c, const char *name, char id[64])
{
    struct named m = {0};
    cli_open(c, 0);
    collect_named(c, name, &m);
    if (m.n_live)
        snprintf(id, 64, "%s", m.live[0]);
    return m.n_live > 0;
}

const char *cli_agent(struct cli *c, const char *arg)
{
    static char ids[4][64];
    static int next_id;
    if (!arg || vg_id_valid(arg))
        return arg;
    cli_open(c, 0);
    struct named m = {0};
    collect_named(c, arg, &m);
    int n = m.n_live ? m.n_live : m.n_gone;
    char(*named)[64] = m.n_live ? m.live : m.gone;
    if (n > 1) {
        fprintf(stderr, "vigil: %d %sagents are named \"%s\" (%s, %s%s): give an id\n", n,
                m.n_live ? "" : "destroyed ", arg, named[0], named[1], n > 2 ? ", ..." : "");
        exit(CLI_USAGE);
    }
    if (!n)
        return arg; /* no agent of that name: the API says `no agent "X"` */
    const char *id = named[0];
    char *out = ids[next_id++ % 4];
    snprintf(out, 64, "%s", id);
    return out;
}

int cli_fail(const vigil_error *err)
{
    /* The store's own words for a refused write ("attempt to write a readonly database",
     * "unable to open database file") differ by what was refused; a person needs one. */
    if (read_only_path &&
        (err->code == VIGIL_EDENIED || err->code == VIGIL_EIO || err->code == VIGIL_ESTORE))
        return deny();
    fprintf(stderr, "vigil: %s\n", err->message[0] ? err->message : vigil_strerror(err->code));
    /* A model provider's failure is exit 9 whatever its code (EPARSE is not a usage error). */
    return vigil_error_exit_status(err);
}

void cli_add_repeat_hint(json_t *answer, const char *run_key)
{
    const json_t *e = json_object_get(answer, "error"); /* sandbox run's shape */
    const char *aid = json_string_value(json_object_get(e ? e : answer, "approval_id"));
    if (aid && run_key)
        json_object_set_new(answer, "hint",
                            json_sprintf("once approved (vigil approve %s), repeat this call with "
                                         "--run-key %s",
                                         aid, run_key));
}

int cli_fail_needs_approval(const vigil_error *err, const json_t *answer, const char *run_key)
{
    const json_t *e = json_object_get(answer, "error"); /* sandbox run's shape */
    const char *aid = json_string_value(json_object_get(answer, "approval_id"));
    const char *msg = json_string_value(json_object_get(answer, "error_message"));
    if (e) {
        aid = json_string_value(json_object_get(e, "approval_id"));
        msg = json_string_value(json_object_get(e, "message"));
    }
    if (!aid || !msg)
        return -1;
    fprintf(stderr, "vigil: confirmation_required: %s, then repeat this call with --run-key %s\n",
            msg, run_key);
    return vigil_code_exit_status(err->code ? err->code : VIGIL_ERROR);
}

int cli_usage(const char *fmt, ...)
{
    va_list ap;
    fputs("vigil: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs(" (see --help)\n", stderr);
    return CLI_USAGE;
}

int cli_check_choice(const char *option, const char *value, const char *const *allowed)
{
    char list[256] = "";
    size_t used = 0;
    if (!value)
        return 0;
    for (int i = 0; allowed[i]; i++) {
        if (!strcmp(value, allowed[i]))
            return 0;
        int n = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", allowed[i]);
        if (n > 0 && (size_t)n < sizeof list - used)
            used += (size_t)n;
    }
    return cli_usage("%s \"%.40s\" is not one of %s", option, value, list);
}

int cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return 1;
    return 0;
}

json_t *cli_parse_json_text(char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, 0, &je);
    vigil_free(text);
    if (!v) {
        fprintf(stderr, "vigil: internal error: bad JSON from the library: %s\n", je.text);
        exit(1);
    }
    return v;
}

const char *cli_gone_holder(const json_t *obj, char *buf, size_t size)
{
    if (!json_is_true(json_object_get(obj, "holder_gone")))
        return NULL;
    snprintf(buf, size, "its process %lld is gone: recovered at the next vigil serve or vigil wake",
             (long long)json_integer_value(json_object_get(obj, "holder_pid")));
    return buf;
}

void cli_print_json_text(char *text)
{
    json_t *v = cli_parse_json_text(text);
    /* vg_json_dumpf: reals as the fewest digits that read back the same (a report's confidence
     * 0.8), where jansson's would print the double nearest to it, 0.80000000000000004. */
    vg_json_dumpf(v, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
    fputc('\n', stdout);
    json_decref(v);
}

static int spec_index(const char *const *spec, const char *arg, size_t *name_len)
{
    for (int i = 0; spec[i]; i++) {
        size_t n = strcspn(spec[i], "=");
        if (strncmp(spec[i], arg, n) == 0 && (arg[n] == '\0' || arg[n] == '=')) {
            *name_len = n;
            return i;
        }
    }
    return -1;
}

int cli_parse(int argc, char **argv, const char *const *spec, struct cli_opts *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] == '-' && a[1] != '\0') {
            size_t n = 0;
            int k = spec_index(spec, a, &n);
            if (k < 0)
                return cli_usage("unknown option \"%s\"", a);
            if (k >= (int)VG_ARRAY_LEN(out->values)) /* a spec longer than the slots: say so */
                return cli_usage("option %s: this command declares more options than vigil "
                                 "can hold (a bug: please report it)",
                                 a);
            int takes = spec[k][n] == '=';
            if (!takes) {
                if (a[n] == '=')
                    return cli_usage("option %s takes no value", spec[k]);
                out->values[k] = "1";
            } else if (a[n] == '=') {
                out->values[k] = a + n + 1;
            } else if (i + 1 < argc) {
                out->values[k] = argv[++i];
            } else {
                return cli_usage("option %.*s needs a value", (int)n, spec[k]);
            }
        } else {
            if (out->n_positional == (int)VG_ARRAY_LEN(out->positional))
                return cli_usage("too many arguments");
            out->positional[out->n_positional++] = a;
        }
    }
    return 0;
}

const char *cli_opt(const struct cli_opts *o, const char *const *spec, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; spec[i]; i++)
        if (strncmp(spec[i], name, n) == 0 && (spec[i][n] == '\0' || spec[i][n] == '='))
            return o->values[i];
    return NULL;
}

/* `vigil help [COMMAND]`: the overview, or the command's own --help. */
static int cmd_help(struct cli *c, int argc, char **argv)
{
    if (argc < 2) {
        usage(stdout);
        return 0;
    }
    if (argc > 2)
        return cli_usage("help takes one COMMAND");
    for (size_t k = 0; k < VG_ARRAY_LEN(commands); k++) {
        if (strcmp(argv[1], commands[k].name) == 0 && commands[k].run != cmd_help) {
            char *args[] = {argv[1], "--help", NULL};
            return commands[k].run(c, 2, args);
        }
    }
    return cli_usage("unknown command \"%s\"", argv[1]);
}

/*
 * Global options may also follow the command (`vigil agent list --store PATH`): take --store
 * out of argv[from..] wherever it stands, so the command never sees it. Returns the new argc,
 * or -1 after a usage error. (A value that is itself "--store" would need the option form
 * `-m=--store`.)
 */
static int take_global_options(struct cli *c, int argc, char **argv, int from)
{
    int out = from;
    for (int i = from; i < argc; i++) {
        if (!strcmp(argv[i], "--store")) {
            if (i + 1 >= argc) {
                cli_usage("--store needs a path");
                return -1;
            }
            c->store_path = argv[++i];
        } else if (!strncmp(argv[i], "--store=", 8)) {
            c->store_path = argv[i] + 8;
        } else {
            argv[out++] = argv[i];
        }
    }
    argv[out] = NULL;
    return out;
}

int main(int argc, char **argv)
{
    struct cli c = {.prog = "vigil"};
    int i = 1;
    default_store(&c);
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--store")) {
            if (i + 1 >= argc)
                return cli_usage("--store needs a path");
            c.store_path = argv[++i];
        } else if (!strncmp(argv[i], "--store=", 8)) {
            c.store_path = argv[i] + 8;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            printf("vigil %s\n", vigil_version());
            return 0;
        } else {
            return cli_usage("unknown option \"%s\"", argv[i]);
        }
    }
    if (i >= argc) {
        usage(stderr);
        return CLI_USAGE;
    }
    if ((argc = take_global_options(&c, argc, argv, i + 1)) < 0)
        return CLI_USAGE;
    if (!*c.store_path)
        return cli_usage("--store needs a path");
    /* `vigil mcp serve` speaks JSON-RPC on stdout: its bytes stay as the protocol wrote them. */
    if (strcmp(argv[i], "mcp") || i + 1 >= argc || strcmp(argv[i + 1], "serve"))
        cli_filter_output();
    for (size_t k = 0; k < VG_ARRAY_LEN(commands); k++) {
        if (strcmp(argv[i], commands[k].name) == 0) {
            c.command = argv[i];
            c.subcommand = i + 1 < argc ? argv[i + 1] : NULL;
            int rc = commands[k].run(&c, argc - i, argv + i);
            vigil_runtime_close(c.rt);
            cli_todo_close(&c);
            return rc;
        }
    }
    return cli_usage("unknown command \"%s\"", argv[i]);
}
