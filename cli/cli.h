/*
 * cli.h: what the command groups of the `vigil` command share. The command line uses only
 * include/vigil.h and src/base helpers (plus the few internal headers named in each file).
 * Primary output, --json included, goes to stdout; progress and errors go to stderr. A failure
 * prints one line "vigil: <what failed>" and exits with the code's exit status.
 */
#ifndef VIGIL_CLI_H
#define VIGIL_CLI_H

#include "base/common.h"

#include <jansson.h>

/* Exit status for a command line that cannot be understood. */
#define CLI_USAGE 2

struct cli {
    const char *prog;       /* "vigil" */
    const char *store_path; /* --store, $VIGIL_STORE, or the XDG default */
    char store_buf[4096];   /* backing for a computed store path */
    vigil_runtime *rt;      /* opened on demand by cli_open */
    const char *command;    /* the command group and its first word after it (or NULL) */
    const char *subcommand;
    struct vg_todo *todo; /* the task database (cmd-todo.c), opened when it exists */
    int todo_attached;    /* its tools are registered on rt */
};

/* One command group: `vigil NAME ...`. */
struct cli_command {
    const char *name;
    int (*run)(struct cli *c, int argc, char **argv); /* argv[0] is the group name */
    const char *summary;                              /* one line for `vigil --help` */
};

/* Open the runtime on the store (creating it only when create is set). Exits on failure. */
int cli_open(struct cli *c, int create);
/* A command that writes whatever it does (`vigil serve`): the store file or its folder
 * read-only is "permission denied: the store ... is read-only", exit 10, as any refused write
 * (0: writable, or not a file store). */
int cli_require_writable(struct cli *c);
/* The agent id arg names: arg itself when it is shaped as an id (a UUID) or names no agent
 * (the API then answers `no agent "X"`), else the id of the one agent named arg (the one not
 * destroyed, when destroyed ones share the name). Several of that name: exits with a usage
 * error listing their ids. NULL stays NULL. Opens the store. */
const char *cli_agent(struct cli *c, const char *arg);
/* The id of a live (not destroyed) agent named name, into id; 0 when there is none. */
int cli_agent_named(struct cli *c, const char *name, char id[64]);
/* After queueing wakes (cmd-wake.c): a running daemon is told to look now ("queued for the
 * running daemon"); with none, this process runs what is queued ("no daemon running: ran N
 * wake(s) in this process"). Returns the exit status. */
int cli_run_queued(struct cli *c);
/* After work was queued that only a daemon runs (a chat's spawned children, a dispatched task's
 * run): with no daemon serving the store, says so on stderr, "vigil: no daemon running: N WHAT
 * queued: start `vigil serve` to run them", as `vigil wake` says what it did (trial C1, C20 of
 * session 30). Nothing when n is 0 or a daemon runs. */
void cli_note_queued(struct cli *c, int n, const char *what);
/* Print "vigil: message" for an error report and return its exit status. */
int cli_fail(const vigil_error *err);
/* A call refused until a person approves it, when answer (a tool outcome's JSON) names the
 * approval: the gate's whole message and the run key to repeat it with, on one line never cut
 * to the error's fixed size. -1 when answer names no approval (then report err as usual). */
int cli_fail_needs_approval(const vigil_error *err, const json_t *answer, const char *run_key);
/* A call waiting for approval: its JSON answer gets "hint", what the stderr line of
 * cli_fail_needs_approval says (repeat it with --run-key once approved), so a script reading
 * only stdout learns it too (trial H13). Nothing for any other answer. */
void cli_add_repeat_hint(json_t *answer, const char *run_key);
/* Print "vigil: <formatted>" (and a hint to use --help) and return CLI_USAGE. */
int cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* 0 if value is NULL or one of the NULL-terminated allowed values; otherwise a usage error
 * naming option and the allowed values (CLI_USAGE). */
int cli_check_choice(const char *option, const char *value, const char *const *allowed);
/* True if argv holds -h or --help. */
int cli_wants_help(int argc, char **argv);
/* Print owned JSON text (compact) parsed and re-printed indented; frees text. */
void cli_print_json_text(char *text);
/* Why a run that reads running runs nowhere ("holder_gone" on obj: its process is gone, trials
 * G2, G9), or NULL. buf holds the text. */
const char *cli_gone_holder(const json_t *obj, char *buf, size_t size);
/* Parse owned JSON text into a value (owned); frees text. Exits the process on bad JSON. */
json_t *cli_parse_json_text(char *text);

/*
 * A small option parser for subcommands: options may come before or after positionals.
 * spec: NULL-terminated list like {"--json", "--limit=", "-m=", NULL}; "=" means it takes a
 * value. Returns 0 on success or prints a usage error and returns CLI_USAGE.
 */
struct cli_opts {
    const char *values[24];     /* value (or "1" for flags) per spec entry; NULL when absent */
    const char *positional[64]; /* `agent apply A.yaml B.yaml ...` takes many */
    int n_positional;
};
int cli_parse(int argc, char **argv, const char *const *spec, struct cli_opts *out);
const char *cli_opt(const struct cli_opts *o, const char *const *spec, const char *name);

/* From here on stdout and stderr write control characters (but newline and tab) as \u00XX,
 * so that text an agent, a model or a manifest wrote cannot steer the reader's terminal
 * (cli/output.c). */
void cli_filter_output(void);
/* The stdout that cli_filter_output replaced (stdout itself before): for line editing, whose
 * own escape sequences are the terminal's to read. */
FILE *cli_unfiltered_stdout(void);
/* The reference host domain (cmd-todo.c): when its database exists and the command may call a
 * tool, open it and register its tools on c->rt (cli_open does). 0 or an exit status. */
int cli_todo_attach(struct cli *c);
/* vigil_daemon_options.on_runtime of `vigil serve`: the domain's tools on each worker's
 * runtime (user: the struct cli). */
vigil_code cli_todo_on_runtime(void *user, vigil_runtime *rt, vigil_error *err);
/* The task domain's database when it exists (opened, not made; NULL: the domain is off), for
 * the daemon's HTTP routes. Exits on a failure to open it. */
struct vg_todo *cli_todo_domain(struct cli *c);
/* Close what cli_todo_attach opened. */
void cli_todo_close(struct cli *c);

/* Command groups. */
int cmd_todo(struct cli *c, int argc, char **argv);
int cmd_init(struct cli *c, int argc, char **argv);
int cmd_agent(struct cli *c, int argc, char **argv);
/* `vigil agent tree ID [--json]` (cmd-tree.c). */
int cmd_agent_tree(struct cli *c, const struct cli_opts *o, int json);
int cmd_chat(struct cli *c, int argc, char **argv);
int cmd_runs(struct cli *c, int argc, char **argv);
int cmd_task(struct cli *c, int argc, char **argv);
/* `vigil runs cancel|rerun ...` (cmd-runctl.c); argv[0] is the verb. */
int cmd_runs_control(struct cli *c, int argc, char **argv);
int cmd_indoubt(struct cli *c, int argc, char **argv); /* cli/cmd-indoubt.c */
int cmd_sandbox(struct cli *c, int argc, char **argv); /* cli/cmd-sandbox.c */
int cmd_replay(struct cli *c, int argc, char **argv);
int cmd_journal(struct cli *c, int argc, char **argv);
int cmd_approve(struct cli *c, int argc, char **argv);
int cmd_reject(struct cli *c, int argc, char **argv);
int cmd_approvals(struct cli *c, int argc, char **argv);
int cmd_kill(struct cli *c, int argc, char **argv);
int cmd_prune(struct cli *c, int argc, char **argv);
int cmd_sync(struct cli *c, int argc, char **argv);
int cmd_tool(struct cli *c, int argc, char **argv);
int cmd_mcp(struct cli *c, int argc, char **argv);
int cmd_mcp_serve(struct cli *c, int argc, char **argv);
int cmd_memory(struct cli *c, int argc, char **argv);
int cmd_subscription_group(struct cli *c, int argc, char **argv);
int cmd_timer_group(struct cli *c, int argc, char **argv);
int cmd_wake(struct cli *c, int argc, char **argv);
int cmd_notify(struct cli *c, int argc, char **argv);
int cmd_wakes(struct cli *c, int argc, char **argv);
int cmd_serve(struct cli *c, int argc, char **argv);
int cmd_status(struct cli *c, int argc, char **argv); /* cli/cmd-status.c */
int cmd_slo(struct cli *c, int argc, char **argv);    /* cli/cmd-slo.c */
int cmd_token(struct cli *c, int argc, char **argv);
int cmd_eval(struct cli *c, int argc, char **argv);   /* cli/cmd-eval.c */
int cmd_report(struct cli *c, int argc, char **argv); /* cli/cmd-report.c */
/* A report as vigil_report_get shows it: a line saying its scope, when it was written, its
 * confidence and freshness, its sources, then its markdown (cmd-report.c). */
void cli_print_report(const json_t *report);
/* The HTTP API options of `vigil serve` (cmd-http.c): *out is the service to give the daemon,
 * NULL without --listen. 0 or an exit status. */
int cli_http_service(struct cli *c, const struct cli_opts *o, const char *const *spec,
                     const vigil_daemon_service **out);

#endif
