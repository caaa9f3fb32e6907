/*
 * cmd-approve.c: `vigil approvals`, `vigil approve ID`, `vigil reject ID [--reason TEXT]`: the
 * human side of approvals. Resolving is idempotent: a second resolution changes nothing and
 * prints the first.
 */
#include "cli.h"
#include "base/json.h"

#include <pwd.h>
#include <unistd.h>

static const char approve_help[] =
    "usage: vigil approvals [--agent ID] [--status pending|approved|rejected|expired] [--json]\n"
    "       vigil approve ID [--by NAME] [--json]\n"
    "       vigil reject ID [--reason TEXT] [--by NAME] [--json]\n"
    "\n"
    "A high-risk tool call (or one the agent's manifest marks) waits as a pending approval with\n"
    "a preview of its effect. Approving lets exactly that operation run once, on the agent's next\n"
    "step or wake; rejecting tells the agent why. A second resolution is a no-op that reports the\n"
    "first; an expired approval cannot be resolved (the agent asks again). Without --reason the\n"
    "agent is told \"no reason given\" (a high-risk child: \"a person rejected this high-risk\n"
    "child\").\n";

static void print_one(json_t *a)
{
    char *preview = vg_json_dumps(json_object_get(a, "preview"),
                                  JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    printf("%-36s  %-9s  %-20s  %-36s  %s\n", json_string_value(json_object_get(a, "id")),
           json_string_value(json_object_get(a, "status")),
           json_string_value(json_object_get(a, "tool")),
           json_string_value(json_object_get(a, "agent_id")), preview ? preview : "");
    vigil_free(preview);
}

int cmd_approvals(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--agent=", "--status=", "--json", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    char *text = NULL;
    if (cli_wants_help(argc, argv)) {
        fputs(approve_help, stdout);
        return 0;
    }
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    static const char *const statuses[] = {"pending", "approved", "rejected", "expired", NULL};
    if (o.n_positional)
        return cli_usage("approvals takes no arguments");
    if (cli_check_choice("--status", cli_opt(&o, spec, "--status"), statuses))
        return CLI_USAGE;
    cli_open(c, 0);
    if (vigil_approval_list(c->rt, cli_agent(c, cli_opt(&o, spec, "--agent")),
                            cli_opt(&o, spec, "--status"), &text, &err))
        return cli_fail(&err);
    if (cli_opt(&o, spec, "--json")) {
        cli_print_json_text(text);
        return 0;
    }
    json_t *v = cli_parse_json_text(text), *a;
    size_t i;
    printf("%-36s  %-9s  %-20s  %-36s  %s\n", "ID", "STATUS", "TOOL", "AGENT", "PREVIEW");
    if (!json_array_size(v))
        fprintf(stderr, "no approvals\n");
    json_array_foreach (v, i, a)
        print_one(a);
    json_decref(v);
    return 0;
}

/* What happens next (trial F13): the agent was woken to act on the answer, or takes it at its
 * next wake. A wake is only queued: it runs on the running daemon (poked now), and with none
 * it waits for the next one, said as `vigil wake` and a chat's spawned children say it (trial
 * G12: "woken" read as done while nothing ran). */
static void print_resolved(struct cli *c, const char *id, const json_t *v)
{
    const char *status = json_string_value(json_object_get(v, "status"));
    const char *agent = json_string_value(json_object_get(v, "agent_id"));
    const char *key = json_string_value(json_object_get(v, "wake_run_key"));
    long pid = 0;
    if (key && *key && vigil_daemon_running(c->store_path, &pid)) {
        vigil_daemon_poke(c->store_path);
        printf("approval %s %s; agent %s woken to act on it: queued for the running daemon (pid "
               "%ld, run key %.16s)\n",
               id, status, agent, pid, key);
    } else if (key && *key) {
        printf("approval %s %s; a wake of agent %s to act on it is queued (run key %.16s)\n", id,
               status, agent, key);
        fflush(stdout);
        fprintf(stderr,
                "vigil: no daemon running: the wake waits for one: start `vigil serve` (or "
                "`vigil wake %s` runs it in this process)\n",
                agent);
    } else if (key) {
        printf("approval %s %s; agent %s could not be woken now: it acts on it at its next wake\n",
               id, status, agent);
    } else {
        printf("approval %s %s\n", id, status);
    }
}

/* Who answers when --by does not say: the login of the user running the command (its real
 * uid's passwd entry, not $USER, which anyone sets), so the audit trail names a person rather
 * than "human" (trial H13). "human" only when the uid has no entry (a container's bare uid). */
static const char *login_name(void)
{
    struct passwd *pw = getpwuid(getuid());
    return pw && pw->pw_name && *pw->pw_name ? pw->pw_name : "human";
}

static int resolve(struct cli *c, int argc, char **argv, int approve)
{
    static const char *const spec[] = {"--reason=", "--by=", "--json", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    char *text = NULL;
    if (cli_wants_help(argc, argv)) {
        fputs(approve_help, stdout);
        return 0;
    }
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional != 1)
        return cli_usage("%s needs exactly one approval id", approve ? "approve" : "reject");
    /* The reason is optional, as over HTTP (trial C8 of session 30): the agent is told a stock
     * text without one (docs/tools.md). */
    const char *reason = cli_opt(&o, spec, "--reason");
    if (reason && !*reason)
        reason = NULL;
    cli_open(c, 0);
    const char *by = cli_opt(&o, spec, "--by");
    if (vigil_approval_resolve(c->rt, o.positional[0], approve, by && *by ? by : login_name(),
                               reason, &text, &err))
        return cli_fail(&err);
    if (cli_opt(&o, spec, "--json")) {
        cli_print_json_text(text);
        return 0;
    }
    json_t *v = cli_parse_json_text(text);
    const char *status = json_string_value(json_object_get(v, "status"));
    if (json_is_true(json_object_get(v, "already")))
        printf("approval %s was already %s by %s at %s; nothing changed\n", o.positional[0], status,
               json_string_value(json_object_get(v, "resolved_by")),
               json_string_value(json_object_get(v, "resolved_at")));
    else
        print_resolved(c, o.positional[0], v);
    json_decref(v);
    return 0;
}

int cmd_approve(struct cli *c, int argc, char **argv)
{
    return resolve(c, argc, argv, 1);
}

int cmd_reject(struct cli *c, int argc, char **argv)
{
    return resolve(c, argc, argv, 0);
}
