/*
 * cmd-runs.c: run history with progressive disclosure (`vigil runs list|show|messages|message|
 * tools|tool`), `vigil replay RUN`, and `vigil journal export|import`. Lists page by cursor.
 */
#include "cli.h"
#include "base/json.h"

#include <dirent.h>
#include <errno.h>
#include <unistd.h>

static const char runs_help[] =
    "usage: vigil runs list [--agent ID] [--status S] [--cursor C] [--limit N] [--json]\n"
    "       vigil runs show RUN [--json]\n"
    "       vigil runs messages RUN [--cursor C] [--limit N] [--json]\n"
    "       vigil runs message ID [--json]\n"
    "       vigil runs tools RUN [--cursor C] [--limit N] [--json]\n"
    "       vigil runs tool ID [--json]\n"
    "       vigil runs cancel RUN [--by NAME] [--json]   a queued run never starts; a running\n"
    "                                                  one stops at its next safe point\n"
    "       vigil runs rerun RUN [--prompt TEXT] [--model NAME] [--tools LIST] [--queue]\n"
    "                                                  run it again (prints the new run key)\n"
    "       vigil runs resume RUN [--prompt TEXT] [--queue] continue a sub-agent's ended run in\n"
    "                                                  its own conversation\n"
    "\n"
    "Runs newest first; S is queued, running, completed, failed, interrupted, canceled (or\n"
    "cancelled, as wakes and tasks spell it) or crashed.\n"
    "Lists show previews and a cursor for the next page; `message` and `tool` show one item\n"
    "in full. See docs/runs.md.\n";

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "-";
}

static long long num(json_t *o, const char *k)
{
    return (long long)json_integer_value(json_object_get(o, k));
}

static int parse_limit(const char *v, int *out)
{
    char *end = NULL;
    long n = v ? strtol(v, &end, 10) : 0;
    if (v && (*end || n < 1 || n > 1000))
        return cli_usage("--limit takes a number from 1 to 1000");
    *out = (int)n;
    return 0;
}

static void next_hint(json_t *v, const char *cmd)
{
    const char *next = json_string_value(json_object_get(v, "next_cursor"));
    if (next)
        fprintf(stderr, "more: vigil %s --cursor %s\n", cmd, next);
}

/* Print a page: JSON as is, or a table via the row printer: its header always, the note
 * that it is empty on stderr. */
static int page(char *text, int json, const char *cmd, const char *empty, void (*header)(void),
                void (*row)(json_t *))
{
    if (json) {
        cli_print_json_text(text);
        return 0;
    }
    json_t *v = cli_parse_json_text(text), *items = json_object_get(v, "items");
    header();
    if (!json_array_size(items))
        fprintf(stderr, "%s\n", empty);
    for (size_t i = 0; i < json_array_size(items); i++)
        row(json_array_get(items, i));
    next_hint(v, cmd);
    json_decref(v);
    return 0;
}

static void runs_header(void)
{
    printf("%-36s  %-11s  %-12s  %-24s  %5s  %5s  %s\n", "RUN", "STATUS", "REASON", "STARTED",
           "STEPS", "TOOLS", "SUMMARY");
}

static void runs_row(json_t *r)
{
    char why[128];
    printf("%-36s  %-11s  %-12s  %-24s  %5lld  %5lld  %.60s\n", str(r, "run_id"), str(r, "status"),
           str(r, "wake_reason"), str(r, "started_at"), num(r, "steps"), num(r, "tool_calls"),
           str(r, "summary_preview"));
    if (cli_gone_holder(r, why, sizeof why)) /* on stderr: the table stays one row a run */
        fprintf(stderr, "run %s reads running, but %s\n", str(r, "run_id"), why);
}

static void messages_header(void)
{
    printf("%-36s  %4s  %-10s  %s\n", "ID", "SEQ", "ROLE", "PREVIEW");
}

static void messages_row(json_t *m)
{
    const char *preview = str(m, "preview");
    if (!strcmp(preview, "-"))
        preview = str(m, "content_preview");
    printf("%-36s  %4lld  %-10s  %.100s%s\n", str(m, "record_id"), num(m, "sequence"),
           str(m, "role"), preview, json_is_true(json_object_get(m, "truncated")) ? "…" : "");
}

static void tools_header(void)
{
    printf("%-36s  %-20s  %-20s  %6s  %s\n", "ID", "TOOL", "STATUS", "MS", "INPUT");
}

/* The status with the error code that says why (`denied out_of_scope`), as `vigil eval` names
 * a call: the status alone does not say which refusal, nor how a tool failed. */
static void tools_row(json_t *t)
{
    const char *id = str(t, "tool_call_id");
    const char *code = json_string_value(json_object_get(t, "error_code"));
    char status[96];
    snprintf(status, sizeof status, "%s%s%s", str(t, "status"), code ? " " : "", code ? code : "");
    /* A call a program made through the sandbox's bridge says which execution made it: the
     * tail of its key, code/<execute_code's operation>/<n> (the run key before it is this run's).
     */
    const char *via = json_string_value(json_object_get(t, "via")), *tail = NULL;
    for (const char *p = via; p && (p = strstr(p, "/code/")); p++)
        tail = p + 1;
    printf("%-36s  %-20s  %-20s  %6lld  %s%s%s%.60s\n", id, str(t, "name"), status,
           num(t, "duration_ms"), tail ? "[by " : "", tail ? tail : "", tail ? "] " : "",
           str(t, "input_preview"));
}

/* One "label  value" line; strings as they are, other JSON compact, absent or null as "-". */
static void field(const char *label, json_t *v)
{
    if (json_is_string(v)) {
        printf("%-12s %s\n", label, json_string_value(v));
        return;
    }
    char *t = v && !json_is_null(v)
                  ? vg_json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY)
                  : NULL;
    printf("%-12s %s\n", label, t ? t : "-");
    vigil_free(t);
}

/* A JSON value in full, indented under a heading. */
static void block(const char *heading, json_t *v)
{
    printf("\n%s:\n", heading);
    if (json_is_string(v)) {
        printf("%s\n", json_string_value(v));
        return;
    }
    vg_json_dumpf(v, stdout, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    fputc('\n', stdout);
}

/* A decision's reason, unless it only repeats the verdict (`admitted (admitted)`, trial C2). */
static const char *said_reason(json_t *d)
{
    const char *verdict = json_string_value(json_object_get(d, "decision"));
    const char *why = json_string_value(json_object_get(d, "reason"));
    return why && *why && (!verdict || strcmp(why, verdict)) ? why : NULL;
}

/* The run that spawned this one, and the runs it spawned: run key (first 16 characters, as
 * `vigil wakes`), agent and status (trial C2, C5 of session 30). */
static void show_lineage(json_t *r)
{
    json_t *parent = json_object_get(r, "parent"), *kids = json_object_get(r, "children"), *k;
    size_t i;
    const char *pkey = json_string_value(json_object_get(parent, "run_key"));
    const char *pagent = json_string_value(json_object_get(parent, "agent_id"));
    if (pkey)
        printf("%-12s run %.16s%s%s\n", "parent", pkey, pagent ? " of agent " : "",
               pagent ? pagent : "");
    else
        field("parent", json_object_get(parent, "run_id"));
    printf("%-12s %zu%s\n", "children", json_array_size(kids), json_array_size(kids) ? ":" : "");
    json_array_foreach (kids, i, k)
        printf("%-12s run %.16s  %-10s %s\n", "", str(k, "run_key"), str(k, "status"),
               str(k, "agent_id"));
}

static void show_decisions(json_t *r)
{
    json_t *d;
    size_t i;
    json_array_foreach (json_object_get(r, "spawn_decisions"), i, d) {
        const char *child = json_string_value(json_object_get(d, "child_agent"));
        const char *verdict = json_string_value(json_object_get(d, "decision"));
        const char *why = said_reason(d);
        printf("%-12s %s %s%s%s\n", i ? "" : "spawns", verdict ? verdict : "?",
               child ? child : "(no agent)", why ? ": " : "", why ? why : "");
    }
}

/* A re-run's override, as `runs rerun` took it, and the run it re-ran (trial C9). */
static void show_override(json_t *r)
{
    json_t *ov = json_object_get(r, "override"), *tools = json_object_get(ov, "tools");
    const char *of = json_string_value(json_object_get(r, "rerun_of"));
    if (!of)
        return;
    printf("%-12s run %.16s", "re-run of", of);
    if (json_string_value(json_object_get(ov, "model")))
        printf("; model %s", json_string_value(json_object_get(ov, "model")));
    if (tools) {
        char *t = vg_json_dumps(tools, JSON_COMPACT);
        printf("; tools %s", t ? t : "?");
        vigil_free(t);
    }
    if (json_string_value(json_object_get(ov, "prompt")))
        printf("; prompt %.60s", json_string_value(json_object_get(ov, "prompt")));
    printf("\n");
}

/* What a recovery run recovers (trial G12): a failed run it retries, or a run of its key cut
 * short; and the reason the work was first queued for. */
static void show_recovers(json_t *r)
{
    json_t *rec = json_object_get(r, "recovers");
    if (!json_is_object(rec))
        return;
    if (!strcmp(str(rec, "kind"), "retry")) {
        printf("%-12s a retry of failed run %.16s", "recovers", str(rec, "failed_run_key"));
        if (json_is_string(json_object_get(rec, "failed_run_id")))
            printf(" (run %s)", str(rec, "failed_run_id"));
        if (strcmp(str(rec, "first_run_key"), str(rec, "failed_run_key")))
            printf(", first attempt %.16s", str(rec, "first_run_key"));
    } else {
        printf("%-12s the run of this run key cut short (a crash, or a stop past its grace)",
               "recovers");
    }
    printf("; first queued as %s\n", str(rec, "original_reason"));
}

/* A run no worker has started: its wake-log entry (trial C6 of session 30). */
static void show_unstarted(json_t *r)
{
    const char *f[][2] = {{"run", "run_id"},       {"agent", "agent_id"},
                          {"status", "status"},    {"reason", "wake_reason"},
                          {"run key", "run_key"},  {"thread", "thread_id"},
                          {"queued", "queued_at"}, {"model", "model"},
                          {"input", "input"},      {"error", "error"}};
    for (size_t i = 0; i < VG_ARRAY_LEN(f); i++)
        field(f[i][0], json_object_get(r, f[i][1]));
    show_override(r);
    show_lineage(r);
    if (!strcmp(str(r, "status"), "queued"))
        printf("\nnot started yet: a running daemon (`vigil serve`) starts it\n");
}

static void show_run(json_t *r)
{
    json_t *counts = json_object_get(r, "counts"), *usage = json_object_get(r, "usage");
    if (json_is_false(json_object_get(r, "started"))) {
        show_unstarted(r);
        return;
    }
    const char *f[][2] = {
        {"run", "run_id"},         {"agent", "agent_id"},     {"status", "status"},
        {"reason", "wake_reason"}, {"model", "model"},        {"run key", "run_key"},
        {"thread", "thread_id"},   {"started", "started_at"}, {"ended", "ended_at"}};
    char why[128];
    for (size_t i = 0; i < VG_ARRAY_LEN(f); i++)
        field(f[i][0], json_object_get(r, f[i][1]));
    if (cli_gone_holder(r, why, sizeof why))
        printf("%-12s %s\n", "", why);
    show_recovers(r);
    show_override(r);
    printf("%-12s %lld ms\n", "duration", num(r, "duration_ms"));
    printf("%-12s %lld model calls, %lld tool calls, %lld messages, %lld records\n", "counts",
           num(counts, "model_calls"), num(counts, "tool_calls"), num(counts, "messages"),
           num(counts, "records"));
    printf("%-12s %lld in, %lld out, %lld cached; cost $%.6f\n", "tokens",
           num(usage, "input_tokens"), num(usage, "output_tokens"), num(usage, "cached_tokens"),
           (double)num(r, "cost_micros") / 1e6);
    show_lineage(r);
    field("error", json_object_get(r, "error"));
    json_t *pruned = json_object_get(r, "trace_pruned");
    if (json_is_object(pruned))
        printf("%-12s pruned at %s (%lld records; its state and tool calls are kept)\n", "trace",
               str(pruned, "at"), num(pruned, "records"));
    field("journal", json_object_get(json_object_get(r, "journal"), "export_path"));
    field("summary", json_object_get(r, "summary"));
    show_decisions(r);
}

static void show_tool(json_t *t)
{
    const char *f[][2] = {
        {"tool call", "tool_call_id"}, {"tool", "name"},        {"run", "run_id"},
        {"status", "status"},          {"error", "error_code"}, {"operation", "operation_id"},
        {"started", "started_at"},     {"ended", "ended_at"}};
    for (size_t i = 0; i < VG_ARRAY_LEN(f); i++)
        field(f[i][0], json_object_get(t, f[i][1]));
    if (json_object_get(t, "via")) /* made by a program through the sandbox's bridge */
        field("via", json_object_get(t, "via"));
    printf("%-12s %lld ms\n", "duration", num(t, "duration_ms"));
    block("input", json_object_get(t, "input"));
    block("output", json_object_get(t, "output"));
}

static void show_message(json_t *m)
{
    const char *f[][2] = {{"record", "record_id"},
                          {"run", "run_id"},
                          {"type", "type"},
                          {"role", "role"},
                          {"occurred", "occurred_at"}};
    for (size_t i = 0; i < VG_ARRAY_LEN(f); i++)
        field(f[i][0], json_object_get(m, f[i][1]));
    json_t *id = json_object_get(m, "message_id");
    field("id", id ? id : json_object_get(m, "observation_id"));
    block("content", json_object_get(m, "content"));
}

int cmd_runs(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {
        "--agent=", "--status=", "--cursor=", "--limit=", "--json", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    char *text = NULL;
    int limit = 0;
    if (argc < 2 || cli_wants_help(argc, argv)) {
        fputs(runs_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : 0;
    }
    const char *verb = argv[1];
    if (!strcmp(verb, "cancel") || !strcmp(verb, "rerun") || !strcmp(verb, "resume"))
        return cmd_runs_control(c, argc - 1, argv + 1);
    if (cli_parse(argc - 1, argv + 1, spec, &o) ||
        parse_limit(cli_opt(&o, spec, "--limit"), &limit))
        return CLI_USAGE;
    int json = cli_opt(&o, spec, "--json") != NULL;
    const char *cursor = cli_opt(&o, spec, "--cursor");
    int want_args = !strcmp(verb, "list") ? 0 : 1;
    if (o.n_positional != want_args)
        return cli_usage(want_args ? "runs %s needs exactly one id" : "runs %s takes no ids", verb);
    if (strcmp(verb, "list") && (cli_opt(&o, spec, "--agent") || cli_opt(&o, spec, "--status")))
        return cli_usage("--agent and --status are for runs list");
    static const char *const statuses[] = {"queued",      "running",  "completed", "failed",
                                           "interrupted", "canceled", "crashed",   NULL};
    /* Either spelling of the cancelled state (wakes and tasks say "cancelled"). */
    const char *status = vg_cancel_spelling(cli_opt(&o, spec, "--status"), "canceled");
    if (cli_check_choice("--status", status, statuses))
        return CLI_USAGE;
    const char *id = want_args ? o.positional[0] : NULL;
    vigil_code rc;
    char cmd[300];
    cli_open(c, 0);
    if (!strcmp(verb, "list")) {
        rc = vigil_runs_list(c->rt, cli_agent(c, cli_opt(&o, spec, "--agent")), status, cursor,
                             limit, &text, &err);
        if (rc)
            return cli_fail(&err);
        return page(text, json, "runs list", "no runs", runs_header, runs_row);
    }
    if (!strcmp(verb, "messages") || !strcmp(verb, "tools")) {
        rc = !strcmp(verb, "messages") ? vigil_run_messages(c->rt, id, cursor, limit, &text, &err)
                                       : vigil_run_tools(c->rt, id, cursor, limit, &text, &err);
        if (rc)
            return cli_fail(&err);
        snprintf(cmd, sizeof cmd, "runs %s %s", verb, id);
        return !strcmp(verb, "messages")
                   ? page(text, json, cmd, "no messages", messages_header, messages_row)
                   : page(text, json, cmd, "no tool calls", tools_header, tools_row);
    }
    if (cursor || limit)
        return cli_usage("--cursor and --limit are for lists");
    void (*show)(json_t *) = NULL;
    if (!strcmp(verb, "show")) {
        rc = vigil_run_show(c->rt, id, &text, &err);
        show = show_run;
    } else if (!strcmp(verb, "message")) {
        rc = vigil_run_message(c->rt, id, &text, &err);
        show = show_message;
    } else if (!strcmp(verb, "tool")) {
        rc = vigil_run_tool(c->rt, id, &text, &err);
        show = show_tool;
    } else {
        return cli_usage("unknown runs command \"%s\"", verb);
    }
    if (rc)
        return cli_fail(&err);
    if (json) {
        cli_print_json_text(text);
        return 0;
    }
    json_t *v = cli_parse_json_text(text);
    show(v);
    json_decref(v);
    return 0;
}

/* Each field where the stored projection and the replay part, both values cut to a line. */
static void print_differences(json_t *diffs)
{
    size_t i;
    json_t *d;
    json_array_foreach (diffs, i, d) {
        char *a = json_object_get(d, "stored")
                      ? vg_json_dumps(json_object_get(d, "stored"), JSON_COMPACT | JSON_ENCODE_ANY)
                      : NULL;
        char *b = json_object_get(d, "replayed") ? vg_json_dumps(json_object_get(d, "replayed"),
                                                                 JSON_COMPACT | JSON_ENCODE_ANY)
                                                 : NULL;
        printf("  %s: stored %.120s, replayed %.120s\n", str(d, "field"), a ? a : "(none)",
               b ? b : "(none)");
        vigil_free(a);
        vigil_free(b);
    }
}

int cmd_replay(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--json", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    char *text = NULL;
    if (cli_wants_help(argc, argv)) {
        printf("usage: vigil replay RUN [--json]\n\n"
               "Rebuild a run from its journal records alone, print the reconstructed state and\n"
               "timeline, and check it against the projection stored while the run was live.\n"
               "Exits 0 when they match, 5 when they differ (or no projection was stored).\n");
        return 0;
    }
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional != 1)
        return cli_usage("replay needs exactly one run (its run id or run key)");
    cli_open(c, 0);
    if (vigil_run_replay(c->rt, o.positional[0], &text, &err))
        return cli_fail(&err);
    json_t *v = cli_parse_json_text(text);
    int match = json_is_true(json_object_get(v, "stored_projection_matches"));
    if (cli_opt(&o, spec, "--json")) {
        vg_json_dumpf(v, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
        fputc('\n', stdout);
    } else {
        json_t *p = json_object_get(v, "projection"), *tl = json_object_get(v, "timeline");
        printf("run %s: %lld records\n", o.positional[0], num(v, "record_count"));
        printf("lifecycle %s, attention %s, activity %s\n", str(p, "lifecycle"),
               str(p, "attention"), str(p, "activity"));
        printf("processed messages %zu, observations %zu\n",
               json_array_size(json_object_get(v, "processed_message_ids")),
               json_array_size(json_object_get(v, "processed_observation_ids")));
        printf("timeline (%zu):\n", json_array_size(tl));
        for (size_t i = 0; i < json_array_size(tl); i++) {
            json_t *it = json_array_get(tl, i);
            char *t = vg_json_dumps(it, JSON_COMPACT | JSON_SORT_KEYS);
            printf("  %.160s\n", t ? t : "?");
            vigil_free(t);
        }
        json_t *pruned = json_object_get(v, "trace_pruned");
        if (pruned)
            printf("trace pruned (%lld records): lifecycle, attention and input request replayed "
                   "from what is kept\n",
                   num(pruned, "records"));
        printf("stored projection: %s\n",
               match ? "matches the replay" : "DIFFERS from the replay (or is missing)");
        print_differences(json_object_get(v, "differences"));
    }
    json_decref(v);
    if (!match) {
        if (!cli_opt(&o, spec, "--json"))
            fprintf(stderr, "vigil: run %s: stored projection differs from its replay\n",
                    o.positional[0]);
        return vigil_code_exit_status(VIGIL_ECORRUPT);
    }
    return 0;
}

/* The name an export's agent file gives its agent (its first line is the agent's record), into
 * name; "" when the file has none. */
static void exported_name(const char *path, char *name, size_t n)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    name[0] = '\0';
    if (f && getline(&line, &cap, f) > 0) {
        json_t *rec = json_loads(line, 0, NULL);
        const char *body = json_string_value(json_object_get(rec, "body"));
        json_t *agent = body ? json_loads(body, 0, NULL) : NULL;
        const char *kind = json_string_value(json_object_get(rec, "kind"));
        const char *nm = json_string_value(json_object_get(agent, "name"));
        if (kind && !strcmp(kind, "agent") && nm)
            snprintf(name, n, "%s", nm);
        json_decref(agent);
        json_decref(rec);
    }
    free(line);
    if (f)
        fclose(f);
}

/* An import given a name no agent here has: the exported agent of that name in the folder, its
 * id into id (1), when exactly one agent file there names it; 0 otherwise. */
static int exported_by_name(const char *arg, const char *dir, char id[64])
{
    char folder[4150], path[4500], name[256];
    int found = 0;
    snprintf(folder, sizeof folder, "%s/agent-journals", dir);
    DIR *d = opendir(folder);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char *end = strstr(e->d_name, ".agent.jsonl");
        if (!end || end[strlen(".agent.jsonl")] || end - e->d_name >= 64)
            continue;
        snprintf(path, sizeof path, "%s/%s", folder, e->d_name);
        exported_name(path, name, sizeof name);
        if (strcmp(name, arg) == 0 && found++ == 0)
            snprintf(id, 64, "%.*s", (int)(end - e->d_name), e->d_name);
    }
    if (d)
        closedir(d);
    return found == 1;
}

/* An import names the exported agent by its id (the file's name): a name that no agent here
 * has (it was exported from another store) names no file either. Says so, with the ids the
 * folder holds, and returns 1; 0 when the file is there (or the import says what else is
 * wrong). */
static int no_export_of(const char *agent, const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/agent-journals/%s.interaction.jsonl", dir, agent);
    if (access(path, F_OK) == 0 || errno != ENOENT)
        return 0;
    char folder[4150], ids[200] = "";
    snprintf(folder, sizeof folder, "%s/agent-journals", dir);
    DIR *d = opendir(folder);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char *end = strstr(e->d_name, ".interaction.jsonl");
        if (end && strlen(ids) + (size_t)(end - e->d_name) + 3 < sizeof ids)
            snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%.*s", ids[0] ? ", " : "",
                     (int)(end - e->d_name), e->d_name);
    }
    if (d)
        closedir(d);
    fprintf(stderr, "vigil: no export of \"%s\" in %s: give the exported agent's id (%s)\n", agent,
            folder, ids[0] ? ids : "the folder holds none");
    return 1;
}

/* What the imported agent may run (trial H12: the sums are not a signature, so an export
 * changed on the way may grant more than the agent had): its tools allowlist, then each
 * command tool's command and each MCP server's command or URL, as JSON. */
static void print_brings(json_t *brings)
{
    json_t *tools = json_object_get(brings, "tools"), *how, *t;
    const char *name;
    size_t i;
    printf("the agent may call %s", json_array_size(tools) ? "" : "no tools");
    json_array_foreach (tools, i, t)
        printf("%s%s", i ? ", " : "", json_string_value(t));
    printf("\n");
    static const char *const kinds[][2] = {{"command_tools", "command tool"},
                                           {"mcp_servers", "MCP server"}};
    for (size_t k = 0; k < 2; k++) {
        json_object_foreach (json_object_get(brings, kinds[k][0]), name, how) {
            char *text = vg_json_dumps(how, JSON_COMPACT | JSON_ENCODE_ANY);
            printf("  %s \"%s\" runs %s\n", kinds[k][1], name, text ? text : "?");
            vigil_free(text);
        }
    }
}

/* An import, said: what it added, what the agent may run, and a warning when the export had no
 * checksums to check. */
static int journal_import(struct cli *c, const char *agent, const char *dir, int json)
{
    vigil_error err = {0};
    char *text = NULL;
    if (vigil_journal_import_json(c->rt, agent, dir, &text, &err))
        return cli_fail(&err);
    json_t *o = json_loads(text, 0, NULL);
    const char *sums = json_string_value(json_object_get(o, "checksums"));
    if (sums && !strcmp(sums, "absent"))
        fprintf(stderr,
                "vigil: warning: %s/agent-journals holds no checksums for \"%s\" (an export made "
                "before vigil wrote them): its files were imported unchecked\n",
                dir, agent);
    long long records = json_integer_value(json_object_get(o, "records"));
    long long own = json_integer_value(json_object_get(o, "agent_records"));
    if (json) {
        json_t *j = json_pack("{s:I, s:I, s:s, s:O?}", "imported", (json_int_t)(records + own),
                              "agent_records", (json_int_t)own, "checksums", sums ? sums : "",
                              "brings", json_object_get(o, "brings"));
        char *one = j ? vg_json_dumps(j, JSON_PRESERVE_ORDER) : NULL;
        printf("%s\n", one ? one : "{}");
        vigil_free(one);
        json_decref(j);
    } else if (json_is_true(json_object_get(o, "agent"))) {
        printf("imported %lld records from %s (%lld of the agent's own)\n", records + own, dir,
               own);
        print_brings(json_object_get(o, "brings"));
    } else {
        printf("imported %lld records from %s\n", records, dir);
    }
    json_decref(o);
    vigil_free(text);
    return 0;
}

int cmd_journal(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--dir=", "--json", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    int64_t n = 0;
    if (argc < 2 || cli_wants_help(argc, argv)) {
        fputs("usage: vigil journal export AGENT --dir DIR [--json]\n"
              "       vigil journal import AGENT --dir DIR [--json]\n\n"
              "export writes AGENT with its past to DIR/agent-journals/: <ID>.interaction.jsonl\n"
              "(its runs), <ID>.agent.jsonl (the agent, its threads and memory) and <ID>.sha256\n"
              "(their checksums). import brings them into this store under the same id, after\n"
              "checking the checksums and every line (a changed file is refused, exit 5, and\n"
              "nothing is written); records already stored are skipped, so importing twice adds\n"
              "nothing. docs/storage.md: moving an agent to another store.\n",
              argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : 0;
    }
    if (cli_parse(argc - 1, argv + 1, spec, &o))
        return CLI_USAGE;
    const char *dir = cli_opt(&o, spec, "--dir");
    if (o.n_positional != 1 || !dir)
        return cli_usage("journal %s needs an agent id and --dir DIR", argv[1]);
    int export = !strcmp(argv[1], "export");
    if (!export && strcmp(argv[1], "import"))
        return cli_usage("unknown journal command \"%s\"", argv[1]);
    cli_open(c, 0);
    const char *agent = cli_agent(c, o.positional[0]);
    char named[64];
    if (!export && agent == o.positional[0] && exported_by_name(agent, dir, named))
        agent = named; /* a name the store does not know yet, of an agent the export holds */
    if (!export && no_export_of(agent, dir))
        return 3;
    if (!export)
        return journal_import(c, agent, dir, cli_opt(&o, spec, "--json") != NULL);
    if (vigil_journal_export(c->rt, agent, dir, &n, &err))
        return cli_fail(&err);
    if (cli_opt(&o, spec, "--json"))
        printf("{\"exported\": %lld}\n", (long long)n);
    else
        printf("exported %lld records to %s\n", (long long)n, dir);
    return 0;
}
