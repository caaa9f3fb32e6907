/*
 * cmd-wake.c: the wake commands: `vigil subscription`, `vigil timer`, `vigil wake`,
 * `vigil notify`, `vigil wakes` and `vigil serve`. Besides include/vigil.h it uses os/fs.h
 * (vg_fs_exists, vg_os_getenv; docs/ARCHITECTURE.md says why).
 *
 * `vigil wake` and `vigil notify` always write to the store's durable queue. When a daemon
 * serves the store it picks the work up within its poll interval; when none does, the command
 * runs the work itself, in this process, before it exits.
 */
#include "cli.h"
#include "base/json.h"

#include "os/clock.h"
#include "os/fs.h"
#include "os/say.h"

/* ---- shared ---------------------------------------------------------------------------------- */

/* Collect every value of a repeatable option (--token T --token U) and remove them from argv. */
static int take_multi(int *argc, char **argv, const char *name, json_t *into)
{
    size_t n = strlen(name);
    int k = 1;
    for (int i = 1; i < *argc; i++) {
        if (!strcmp(argv[i], name)) {
            if (i + 1 >= *argc)
                return cli_usage("option %s needs a value", name);
            json_array_append_new(into, json_string(argv[++i]));
        } else if (!strncmp(argv[i], name, n) && argv[i][n] == '=') {
            json_array_append_new(into, json_string(argv[i] + n + 1));
        } else {
            argv[k++] = argv[i];
        }
    }
    *argc = k;
    return 0;
}

static int daemon_note(struct cli *c, int quiet)
{
    long pid = 0;
    if (vigil_daemon_running(c->store_path, &pid)) {
        vigil_daemon_poke(c->store_path);
        if (!quiet)
            fprintf(stderr, "vigil: queued for the running daemon (pid %ld)\n", pid);
        return 1;
    }
    return 0;
}

/* When nothing ran here, the wakes still queued: a change that joined a wake due later (a
 * retry after a failure) would otherwise read as one no agent watches. */
static void say_still_queued(struct cli *c)
{
    vigil_error err = {0};
    char *text = NULL, when[32];
    if (vigil_wake_runs(c->rt, NULL, "queued", 1000, &text, &err))
        return;
    json_t *v = cli_parse_json_text(text), *w;
    size_t i;
    int64_t next = 0;
    json_array_foreach (v, i, w) {
        int64_t due = json_integer_value(json_object_get(w, "not_before_ms"));
        if (!next || due < next)
            next = due;
    }
    if (json_array_size(v)) {
        vg_time_format_ms(when, next);
        fprintf(stderr,
                "vigil: %zu wake(s) wait in the queue, the next not before %s (a retry waits "
                "a while after a failure): `vigil serve` runs them\n",
                json_array_size(v), when);
    }
    json_decref(v);
}

/* No daemon: do the work here. */
static int process_here(struct cli *c)
{
    vigil_error err = {0};
    int ran = 0;
    if (vigil_wake_process(c->rt, 0, &ran, &err))
        return cli_fail(&err);
    fprintf(stderr, "vigil: no daemon running: ran %d wake(s) in this process\n", ran);
    if (!ran)
        say_still_queued(c);
    return 0;
}

/* A wake run here that failed is said, exit 1: rc 0 would read as done (wakes.md). */
static int wake_failed_here(struct cli *c, const char *agent_id, const char *key)
{
    vigil_error err = {0};
    char *text = NULL;
    if (vigil_wake_runs(c->rt, agent_id, "failed", 0, &text, &err))
        return cli_fail(&err);
    json_t *v = cli_parse_json_text(text), *r;
    size_t i;
    int status = 0;
    json_array_foreach (v, i, r) {
        const char *k = json_string_value(json_object_get(r, "run_key"));
        if (status || !k || strcmp(k, key))
            continue;
        const char *why = json_string_value(json_object_get(r, "error"));
        fprintf(stderr, "vigil: the wake failed: %s (vigil wakes --agent %s)\n",
                why ? why : "no error recorded", agent_id);
        status = 1;
    }
    json_decref(v);
    return status;
}

int cli_run_queued(struct cli *c)
{
    return daemon_note(c, 0) ? 0 : process_here(c);
}

void cli_note_queued(struct cli *c, int n, const char *what)
{
    fflush(stdout); /* after what the command printed */
    if (n > 0 && !daemon_note(c, 1))
        fprintf(stderr, "vigil: no daemon running: %d %s queued: start `vigil serve` to run %s\n",
                n, what, n == 1 ? "it" : "them");
}

/* The agent a list is for: --agent, or one positional (as `timer add AGENT` takes it), not
 * both. 1 after a usage error. */
static int list_agent(const struct cli_opts *o, const char *flag, const char *what,
                      const char **agent)
{
    if (o->n_positional > 1 || (o->n_positional && flag)) {
        cli_usage("%s list takes one agent (AGENT or --agent AGENT)", what);
        return 1;
    }
    *agent = o->n_positional ? o->positional[0] : flag;
    return 0;
}

/* A list: JSON as is, or its header line, then a row each (the note that it is empty on
 * stderr). */
static void print_list(char *text, int json, const char *header, const char *empty,
                       void (*row)(json_t *))
{
    if (json) {
        cli_print_json_text(text);
        return;
    }
    json_t *v = cli_parse_json_text(text);
    printf("%s\n", header);
    if (!json_array_size(v))
        fprintf(stderr, "%s\n", empty);
    for (size_t i = 0; i < json_array_size(v); i++)
        row(json_array_get(v, i));
    json_decref(v);
}

static const char *js(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "-";
}

/* The AGENT column: the agent's name, as a person gave it (its id when it has none left). */
static const char *agent_col(json_t *o)
{
    const char *name = json_string_value(json_object_get(o, "agent_name"));
    return name && *name ? name : js(o, "agent_id");
}

/* ---- subscription ---------------------------------------------------------------------------- */

static const char sub_help[] =
    "usage: vigil subscription add AGENT --token T [--token T2...] [--require T]\n"
    "                              [--where FIELD=VALUE...] [--linked-to ID] [--id ID] [--json]\n"
    "       vigil subscription list [AGENT | --agent AGENT] [--json]\n"
    "       vigil subscription remove ID\n"
    "\n"
    "A subscription wakes AGENT when a notification batch carries any of its tokens (semantic\n"
    "keys like TASK, subtype tokens like workout.running, or entity ids), every --require\n"
    "token too, and - with --where/--linked-to - when a changed entity matches.\n";

static const char sub_header[] =
    "ID                                    AGENT                                 "
    "  TOKENS";

static void sub_row(json_t *s)
{
    json_t *toks = json_object_get(s, "tokens"), *t;
    size_t i;
    printf("%-36s  %-36s ", js(s, "id"), agent_col(s));
    json_array_foreach (toks, i, t)
        printf(" %s", js(t, "token"));
    json_array_foreach (json_object_get(s, "where"), i, t)
        printf(" [%s=%s]", js(t, "field"), js(t, "equals"));
    if (json_is_string(json_object_get(s, "linked_to")))
        printf(" [linked to %s]", js(s, "linked_to"));
    printf("\n");
}

static int cmd_subscription(struct cli *c, int argc, char **argv)
{
    vigil_error err = {0};
    if (argc < 2 || cli_wants_help(argc, argv)) {
        fputs(sub_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : 0;
    }
    const char *sub = argv[1];
    argc--;
    argv++;
    if (!strcmp(sub, "add")) {
        static const char *const spec[] = {"--linked-to=", "--id=", "--json", NULL};
        json_t *s = json_pack("{s:[], s:[], s:[]}", "tokens", "require", "where");
        struct cli_opts o;
        char *id = NULL;
        int bad = take_multi(&argc, argv, "--token", json_object_get(s, "tokens")) ||
                  take_multi(&argc, argv, "--require", json_object_get(s, "require")) ||
                  take_multi(&argc, argv, "--where", json_object_get(s, "where")) ||
                  cli_parse(argc, argv, spec, &o);
        if (!bad && o.n_positional != 1)
            bad = cli_usage("subscription add needs one AGENT id");
        if (!bad && !json_array_size(json_object_get(s, "tokens")))
            bad = cli_usage("subscription add needs at least one --token");
        if (bad) {
            json_decref(s);
            return CLI_USAGE;
        }
        if (cli_opt(&o, spec, "--linked-to"))
            json_object_set_new(s, "linked_to", json_string(cli_opt(&o, spec, "--linked-to")));
        if (cli_opt(&o, spec, "--id"))
            json_object_set_new(s, "id", json_string(cli_opt(&o, spec, "--id")));
        char *text = vg_json_dumps(s, JSON_COMPACT);
        json_decref(s);
        cli_open(c, 0);
        vigil_code rc =
            vigil_subscription_add(c->rt, cli_agent(c, o.positional[0]), text, &id, &err);
        free(text);
        if (rc)
            return cli_fail(&err);
        if (cli_opt(&o, spec, "--json"))
            printf("{\"id\": \"%s\"}\n", id);
        else
            printf("%s\n", id);
        vigil_free(id);
        return 0;
    }
    if (!strcmp(sub, "list")) {
        static const char *const spec[] = {"--agent=", "--json", NULL};
        struct cli_opts o;
        char *text = NULL;
        if (cli_parse(argc, argv, spec, &o))
            return CLI_USAGE;
        const char *agent = NULL;
        if (list_agent(&o, cli_opt(&o, spec, "--agent"), "subscription", &agent))
            return CLI_USAGE;
        cli_open(c, 0);
        if (vigil_subscription_list(c->rt, cli_agent(c, agent), &text, &err))
            return cli_fail(&err);
        print_list(text, cli_opt(&o, spec, "--json") != NULL, sub_header,
                   "no subscriptions (add one with `vigil subscription add AGENT --token T`)",
                   sub_row);
        return 0;
    }
    if (!strcmp(sub, "remove")) {
        if (argc != 2)
            return cli_usage("subscription remove needs one ID");
        cli_open(c, 0);
        if (vigil_subscription_remove(c->rt, argv[1], &err))
            return cli_fail(&err);
        return 0;
    }
    return cli_usage("unknown subscription command \"%s\"", sub);
}

/* ---- timer ----------------------------------------------------------------------------------- */

static const char timer_help[] =
    "usage: vigil timer add AGENT (--rrule RULE | --cron EXPR | --at TIME) [--tz ZONE] [--json]\n"
    "       vigil timer list [AGENT | --agent AGENT] [--json]\n"
    "       vigil timer set-tz ID ZONE\n"
    "       vigil timer remove ID\n"
    "\n"
    "RULE is an RFC 5545 recurrence rule (FREQ=DAILY;BYHOUR=7;BYMINUTE=0), EXPR a 5-field cron\n"
    "line (\"0 7 * * 1-5\") or @hourly/@daily/@weekly/@monthly/@yearly, TIME an RFC 3339 time\n"
    "or a local YYYY-MM-DDTHH:MM in ZONE. ZONE is an IANA name (default $TZ, else UTC); the\n"
    "wall-clock intent holds across DST changes. Missed firings coalesce into one catch-up wake.\n";

static const char timer_header[] =
    "ID                                    AGENT                                 KIND   SPEC    "
    "              TZ                NEXT";

static void timer_row(json_t *t)
{
    printf("%-36s  %-36s  %-5s  %-20s  %-16s  next %s\n", js(t, "id"), agent_col(t), js(t, "kind"),
           js(t, "spec"), js(t, "tz"),
           json_is_string(json_object_get(t, "error")) ? "(set aside)"
           : json_is_true(json_object_get(t, "done"))  ? "(done)"
                                                       : js(t, "next_run_at"));
    if (json_is_string(json_object_get(t, "error")))
        printf("    error: %s\n", js(t, "error"));
}

static int cmd_timer(struct cli *c, int argc, char **argv)
{
    vigil_error err = {0};
    if (argc < 2 || cli_wants_help(argc, argv)) {
        fputs(timer_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : 0;
    }
    const char *sub = argv[1];
    argc--;
    argv++;
    if (!strcmp(sub, "add")) {
        static const char *const spec[] = {"--rrule=", "--cron=", "--at=", "--tz=", "--json", NULL};
        struct cli_opts o;
        char id[37];
        if (cli_parse(argc, argv, spec, &o))
            return CLI_USAGE;
        if (o.n_positional != 1)
            return cli_usage("timer add needs one AGENT id");
        const char *kinds[] = {"rrule", "cron", "at"}, *opts[] = {"--rrule", "--cron", "--at"};
        const char *kind = NULL, *text = NULL;
        for (int i = 0; i < 3; i++)
            if (cli_opt(&o, spec, opts[i])) {
                if (kind)
                    return cli_usage("give one of --rrule, --cron and --at");
                kind = kinds[i];
                text = cli_opt(&o, spec, opts[i]);
            }
        if (!kind)
            return cli_usage("timer add needs --rrule RULE, --cron EXPR or --at TIME");
        const char *tz = cli_opt(&o, spec, "--tz");
        if (!tz)
            tz = vg_os_getenv("TZ");
        if (tz && *tz == ':')
            tz++;
        cli_open(c, 0);
        if (vigil_timer_add(c->rt, cli_agent(c, o.positional[0]), kind, text,
                            tz && *tz ? tz : "UTC", id, &err))
            return cli_fail(&err);
        if (cli_opt(&o, spec, "--json"))
            printf("{\"id\": \"%s\"}\n", id);
        else
            printf("%s\n", id);
        return 0;
    }
    if (!strcmp(sub, "list")) {
        static const char *const spec[] = {"--agent=", "--json", NULL};
        struct cli_opts o;
        char *text = NULL;
        if (cli_parse(argc, argv, spec, &o))
            return CLI_USAGE;
        const char *agent = NULL;
        if (list_agent(&o, cli_opt(&o, spec, "--agent"), "timer", &agent))
            return CLI_USAGE;
        cli_open(c, 0);
        if (vigil_timer_list(c->rt, cli_agent(c, agent), &text, &err))
            return cli_fail(&err);
        print_list(text, cli_opt(&o, spec, "--json") != NULL, timer_header,
                   "no timers (add one with `vigil timer add AGENT --cron EXPR`)", timer_row);
        return 0;
    }
    if (!strcmp(sub, "set-tz")) {
        if (argc != 3)
            return cli_usage("timer set-tz needs ID and ZONE");
        cli_open(c, 0);
        if (vigil_timer_set_zone(c->rt, argv[1], argv[2], &err))
            return cli_fail(&err);
        fprintf(stderr, "timer %s now reads its schedule in %s\n", argv[1], argv[2]);
        return 0;
    }
    if (!strcmp(sub, "remove")) {
        if (argc != 2)
            return cli_usage("timer remove needs one ID");
        cli_open(c, 0);
        if (vigil_timer_remove(c->rt, argv[1], &err))
            return cli_fail(&err);
        return 0;
    }
    return cli_usage("unknown timer command \"%s\"", sub);
}

/* ---- wake, notify, runs ---------------------------------------------------------------------- */

static const char wake_help[] =
    "usage: vigil wake AGENT [-m TEXT] [--session NAME] [--json]\n"
    "\n"
    "Wake AGENT now: a manual wake, or with -m a user-initiated one whose input is TEXT, in\n"
    "session NAME (default \"default\"). With a daemon running the wake is queued for it; with\n"
    "none, it runs in this process. Prints the run key.\n";

int cmd_wake(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"-m=", "--session=", "--json", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    char key[65];
    if (cli_wants_help(argc, argv)) {
        fputs(wake_help, stdout);
        return 0;
    }
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional != 1)
        return cli_usage("wake needs one AGENT id");
    cli_open(c, 0);
    if (vigil_wake_agent(c->rt, cli_agent(c, o.positional[0]), cli_opt(&o, spec, "-m"),
                         cli_opt(&o, spec, "--session"), key, &err))
        return cli_fail(&err);
    if (cli_opt(&o, spec, "--json"))
        printf("{\"run_key\": \"%s\"}\n", key);
    else
        printf("%s\n", key);
    fflush(stdout);
    if (daemon_note(c, 0))
        return 0;
    int rc = process_here(c);
    return rc ? rc : wake_failed_here(c, cli_agent(c, o.positional[0]), key);
}

int cmd_notify(struct cli *c, int argc, char **argv)
{
    vigil_error err = {0};
    if (argc < 2)
        return cli_usage("notify needs at least one TOKEN");
    if (cli_wants_help(argc, argv)) {
        fputs("usage: vigil notify TOKEN...\n\nRaise notification tokens (semantic keys like "
              "TASK, subtype tokens like\nworkout.running, entity ids). Subscriptions that match "
              "wake their agents.\n",
              stdout);
        return 0;
    }
    cli_open(c, 0);
    if (vigil_notify(c->rt, (const char *const *)argv + 1, (size_t)argc - 1, &err))
        return cli_fail(&err);
    return cli_run_queued(c);
}

static const char wake_header[] =
    "RUN KEY           AGENT                                 REASON        STATUS     CREATED";

static void run_row(json_t *r)
{
    char why[128];
    printf("%.16s  %-36s  %-12s  %-9s  %s%s%s\n", js(r, "run_key"), js(r, "agent_id"),
           js(r, "reason"), js(r, "status"), js(r, "created_at"),
           json_is_string(json_object_get(r, "error")) ? "  error: " : "",
           json_is_string(json_object_get(r, "error")) ? js(r, "error") : "");
    if (cli_gone_holder(r, why, sizeof why)) /* on stderr: the table stays one row a wake */
        fprintf(stderr, "wake %.16s reads started, but %s\n", js(r, "run_key"), why);
}

int cmd_wakes(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--agent=", "--status=", "--limit=", "--json", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    char *text = NULL, *end = NULL;
    long limit = 50;
    if (cli_wants_help(argc, argv)) {
        fputs("usage: vigil wakes [--agent ID] [--status "
              "queued|started|completed|skipped|failed|cancelled]"
              " [--limit N] [--json]\n\nThe wake-run log, newest first.\n",
              stdout);
        return 0;
    }
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    static const char *const statuses[] = {"queued", "started",   "completed", "skipped",
                                           "failed", "cancelled", NULL};
    if (o.n_positional)
        return cli_usage("wakes takes no arguments");
    /* Either spelling of the cancelled state (runs say "canceled"). */
    const char *status = vg_cancel_spelling(cli_opt(&o, spec, "--status"), "cancelled");
    if (cli_check_choice("--status", status, statuses))
        return CLI_USAGE;
    if (cli_opt(&o, spec, "--limit")) {
        limit = strtol(cli_opt(&o, spec, "--limit"), &end, 10);
        if (*end || limit < 1 || limit > 1000)
            return cli_usage("--limit takes a number from 1 to 1000");
    }
    cli_open(c, 0);
    if (vigil_wake_runs(c->rt, cli_agent(c, cli_opt(&o, spec, "--agent")), status, (int)limit,
                        &text, &err))
        return cli_fail(&err);
    print_list(text, cli_opt(&o, spec, "--json") != NULL, wake_header, "no wakes", run_row);
    return 0;
}

/* ---- serve ----------------------------------------------------------------------------------- */

/* Before serving: a daemon whose agents would answer from the scripted provider says so, once,
 * as `vigil chat` does before its first reply. Not for a test runner, nor when a daemon
 * already serves the store (that one refuses this with its one line only). */
static int say_if_scripted(struct cli *c, const char *runner)
{
    vigil_error err = {0};
    char *text = NULL;
    long running = 0;
    if ((runner && *runner && strcmp(runner, "loop")) ||
        vigil_daemon_running(c->store_path, &running))
        return 0;
    cli_open(c, 0);
    if (vigil_model_describe(c->rt, &text, &err))
        return cli_fail(&err);
    json_t *m = cli_parse_json_text(text);
    if (json_is_true(json_object_get(m, "scripted")))
        vg_say("vigil serve: the model is scripted (no provider configured): %s; set "
               "VIGIL_MODEL_PROVIDER, see docs/models.md\n",
               json_is_string(json_object_get(m, "cassette"))
                   ? "replies are replayed from a cassette, not generated"
                   : "replies echo the input, they are not generated");
    json_decref(m);
    vigil_runtime_close(c->rt); /* the daemon opens its own */
    c->rt = NULL;
    return 0;
}

int cmd_serve(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--workers=",          "--grace-ms=",
                                       "--poll-ms=",          "--runner=",
                                       "--max-failures=",     "--debounce-ms=",
                                       "--sync-debounce-ms=", "--runs-per-worker=",
                                       "--listen=",           "--allow-remote",
                                       "--allow-origin=",     "--show-token",
                                       "--http-timeout-s=",   "--http-max-connections=",
                                       "--events-poll-ms=",   "--events-ring=",
                                       "--lease-ms=",         NULL};
    struct cli_opts o;
    vigil_error err = {0};
    vigil_daemon_options d;
    vigil_daemon_options_default(&d);
    if (cli_wants_help(argc, argv)) {
        fputs("usage: vigil serve [--workers N] [--runs-per-worker N] [--grace-ms MS]\n"
              "                   [--poll-ms MS] [--max-failures N] [--debounce-ms MS]\n"
              "                   [--sync-debounce-ms MS] [--lease-ms MS]\n"
              "                   [--listen ADDR[:PORT] [--show-token]\n"
              "                   [--allow-remote] [--allow-origin ORIGIN]]\n\n"
              "Run the daemon: notifications, subscriptions, timers and the wake queue, with N\n"
              "worker threads (default 2) running agents. Each worker keeps up to\n"
              "--runs-per-worker runs going at once (default 16): while one waits for its\n"
              "model, the others go on. One daemon per SQLite store; any number on one\n"
              "PostgreSQL store (docs/scale-out.md). SIGINT/SIGTERM stop it: running\n"
              "wakes get MS milliseconds to finish, then are checkpointed and re-queued.\n"
              "--lease-ms: how long a run holds its agent without renewal (default 300000);\n"
              "a daemon that stops beating loses its runs after a tenth of it.\n"
              "--listen serves the HTTP API there (127.0.0.1, port 7420 by default; another\n"
              "address than loopback needs --allow-remote); --show-token prints its token\n"
              "(docs/http.md).\n",
              stdout);
        return 0;
    }
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional)
        return cli_usage("serve takes no arguments");
    struct {
        const char *opt;
        int64_t *out;
        int64_t lo, hi;
    } nums[] = {{"--grace-ms", &d.grace_ms, 0, 3600000},
                {"--poll-ms", &d.poll_ms, 10, 60000},
                {"--debounce-ms", &d.debounce_ms, 0, 60000},
                {"--sync-debounce-ms", &d.sync_debounce_ms, 0, 600000},
                {"--lease-ms", &d.lease_ms, 300, 86400000}};
    for (size_t i = 0; i < VG_ARRAY_LEN(nums); i++) {
        const char *v = cli_opt(&o, spec, nums[i].opt);
        char *end = NULL;
        if (!v)
            continue;
        long long x = strtoll(v, &end, 10);
        if (*end || x < nums[i].lo || x > nums[i].hi)
            return cli_usage("%s takes a number from %lld to %lld", nums[i].opt,
                             (long long)nums[i].lo, (long long)nums[i].hi);
        *nums[i].out = x;
    }
    struct {
        const char *opt;
        int *out;
        int lo, hi;
    } ints[] = {{"--workers", &d.workers, 1, 64},
                {"--runs-per-worker", &d.runs_per_worker, 1, 1024},
                {"--max-failures", &d.max_failures, 1, 1000}};
    for (size_t i = 0; i < VG_ARRAY_LEN(ints); i++) {
        const char *v = cli_opt(&o, spec, ints[i].opt);
        char *end = NULL;
        if (!v)
            continue;
        long x = strtol(v, &end, 10);
        if (*end || x < ints[i].lo || x > ints[i].hi)
            return cli_usage("%s takes a number from %d to %d", ints[i].opt, ints[i].lo,
                             ints[i].hi);
        *ints[i].out = (int)x;
    }
    /* The runner: the agent loop. --runner (hidden) and $VIGIL_WAKE_RUNNER select a test
     * runner for the crash tests, which only the test build of the command has (vigil-test). */
    d.runner = cli_opt(&o, spec, "--runner");
    if (!d.runner)
        d.runner = vg_os_getenv("VIGIL_WAKE_RUNNER");
    if (!strstr(c->store_path, "://") && !vg_fs_exists(c->store_path)) {
        fprintf(stderr, "vigil: store \"%s\" does not exist (create it with `vigil init`)\n",
                c->store_path);
        return vigil_code_exit_status(VIGIL_ENOTFOUND);
    }
    int rc = cli_require_writable(c); /* the daemon writes: before its token file is made */
    if (rc || (rc = cli_http_service(c, &o, spec, &d.service)))
        return rc;
    rc = 0;
    if (rc || (rc = say_if_scripted(c, d.runner)))
        return rc;
    d.on_runtime = cli_todo_on_runtime; /* the task domain's tools, when it is on */
    d.on_runtime_user = c;
    if (vigil_daemon_run(c->store_path, &d, &err))
        return cli_fail(&err);
    return 0;
}

/* Command groups registered in main.c. */
int cmd_subscription_group(struct cli *c, int argc, char **argv)
{
    return cmd_subscription(c, argc, argv);
}

int cmd_timer_group(struct cli *c, int argc, char **argv)
{
    return cmd_timer(c, argc, argv);
}
