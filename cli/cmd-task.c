/*
 * cmd-task.c: `vigil task ...`, the task graph (vigil_task_*; docs/orchestration.md).
 */
#include "cli.h"

#include <time.h>

static const char task_help[] =
    "usage: vigil task add --title T [--blocks ID]... [--kind K] [--tag T]... [--json]\n"
    "                                 a new task that blocks each ID, for an agent of kind K\n"
    "                                 whose manifest tags hold every T\n"
    "       vigil task block A B      add the edge \"A blocks B\" (refused if it closes a cycle)\n"
    "       vigil task list [--status S] [--json]\n"
    "       vigil task show ID [--json]  its fields, and the tasks on its edges with titles\n"
    "       vigil task graph [--json] every task with its status and title, then every edge,\n"
    "                                 one \"A -> B  (TITLE A -> TITLE B)\" a line\n"
    "       vigil task cancel ID      cancel it (and its run) and every task it blocks\n"
    "       vigil task dispatch [--slots N] [--json]\n"
    "                                 start ready tasks as wakes of agents of their kind\n"
    "\n"
    "A task is ready once every task that blocks it is done. Statuses: pending, ready, running,\n"
    "attention (its run left a call in doubt: vigil indoubt list), done, failed, cancelled.\n";

#define MAX_BLOCKS 64
#define MAX_TAGS 16

/* An option that may repeat (--blocks ID, --tag T): take it out of argv before the common
 * parser sees it. */
static int take_repeated(int *argc, char **argv, const char *name, const char *what,
                         const char **vals, size_t max, size_t *n)
{
    int out = 0;
    size_t len = strlen(name);
    *n = 0;
    for (int i = 0; i < *argc; i++) {
        const char *v = NULL;
        if (!strcmp(argv[i], name) && i + 1 < *argc)
            v = argv[++i];
        else if (!strncmp(argv[i], name, len) && argv[i][len] == '=')
            v = argv[i] + len + 1;
        else if (!strcmp(argv[i], name))
            return cli_usage("%s needs %s", name, what);
        else {
            argv[out++] = argv[i];
            continue;
        }
        if (*n == max)
            return cli_usage("at most %zu %s", max, name);
        vals[(*n)++] = v;
    }
    *argc = out;
    return 0;
}

static int task_add(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--title=", "--kind=", "--json", NULL};
    const char *blocks[MAX_BLOCKS], *tags[MAX_TAGS];
    size_t n = 0, n_tags = 0;
    struct cli_opts o;
    vigil_error err = {0};
    char id[37];
    if (take_repeated(&argc, argv, "--blocks", "a task id", blocks, MAX_BLOCKS, &n) ||
        take_repeated(&argc, argv, "--tag", "a tag", tags, MAX_TAGS, &n_tags) ||
        cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional || !cli_opt(&o, spec, "--title"))
        return cli_usage("task add needs --title and takes no positional arguments");
    cli_open(c, 1);
    if (vigil_task_add_tagged(c->rt, cli_opt(&o, spec, "--title"), cli_opt(&o, spec, "--kind"),
                              tags, n_tags, blocks, n, id, &err))
        return cli_fail(&err);
    if (cli_opt(&o, spec, "--json"))
        printf("{\"id\": \"%s\"}\n", id);
    else
        printf("%s\n", id);
    return 0;
}

/* A string field of a task, "" when absent. */
static const char *tstr(const json_t *t, const char *key)
{
    const char *v = json_string_value(json_object_get(t, key));
    return v ? v : "";
}

/* The task of tasks (a vigil_task_list array) with this id; NULL if none. */
static json_t *task_in(json_t *tasks, const char *id)
{
    size_t i;
    json_t *t;
    json_array_foreach (tasks, i, t)
        if (id && !strcmp(tstr(t, "id"), id))
            return t;
    return NULL;
}

static const char *title_of(json_t *tasks, const char *id)
{
    json_t *t = task_in(tasks, id);
    return t ? tstr(t, "title") : "?";
}

/* An agent's name for a person (trial L11: a graph of two kinds reads by name), looked up once
 * an agent and kept in names (id -> name); its id when it has no name or is not found. --json
 * keeps the id. */
static const char *agent_label(struct cli *c, json_t *names, const char *id)
{
    if (!id || !*id)
        return id;
    const char *known = json_string_value(json_object_get(names, id));
    if (known)
        return known;
    char *text = NULL;
    json_t *a = vigil_agent_show(c->rt, id, &text, NULL) ? NULL : cli_parse_json_text(text);
    const char *name = json_string_value(json_object_get(json_object_get(a, "agent"), "name"));
    json_object_set_new(names, id, json_string(name && *name ? name : id));
    json_decref(a);
    known = json_string_value(json_object_get(names, id));
    return known ? known : id;
}

static void print_task_line(struct cli *c, json_t *names, json_t *t)
{
    const char *agent = agent_label(c, names, json_string_value(json_object_get(t, "agent")));
    printf("%-36s  %-9s %-36s  %s\n", json_string_value(json_object_get(t, "id")),
           json_string_value(json_object_get(t, "status")), agent ? agent : "-",
           json_string_value(json_object_get(t, "title")));
}

static int task_list_or_graph(struct cli *c, const struct cli_opts *o, const char *status, int json,
                              int graph)
{
    static const char *const statuses[] = {"pending", "ready",  "running",   "attention",
                                           "done",    "failed", "cancelled", NULL};
    vigil_error err = {0};
    char *text = NULL;
    if (o->n_positional)
        return cli_usage("task %s takes no positional arguments", graph ? "graph" : "list");
    status = vg_cancel_spelling(status, "cancelled"); /* either spelling, as runs list */
    if (cli_check_choice("--status", status, statuses))
        return CLI_USAGE;
    cli_open(c, 0);
    /* --json of the graph: its nodes and edges, as GET /v1/tasks/graph answers */
    if (json && graph ? vigil_task_graph(c->rt, &text, &err)
                      : vigil_task_list(c->rt, status, &text, &err))
        return cli_fail(&err);
    if (json) {
        cli_print_json_text(text);
        return 0;
    }
    json_t *v = cli_parse_json_text(text), *t, *b, *names = json_object();
    size_t i, j;
    if (!json_array_size(v))
        fputs("(no tasks)\n", stderr);
    else if (!graph)
        printf("%-36s  %-9s %-36s  TITLE\n", "ID", "STATUS", "AGENT");
    json_array_foreach (v, i, t) {
        if (!graph) {
            print_task_line(c, names, t);
            continue;
        }
        printf("%s [%s] %s\n", tstr(t, "id"), tstr(t, "status"), tstr(t, "title"));
        json_array_foreach (json_object_get(t, "blocks"), j, b)
            printf("%s -> %s  (%s -> %s)\n", tstr(t, "id"), json_string_value(b), tstr(t, "title"),
                   title_of(v, json_string_value(b)));
    }
    json_decref(names);
    json_decref(v);
    return 0;
}

/* "blocks:" or "blocked by:", then each task on that edge with its status and title. */
static void print_edges(const char *label, json_t *ids, json_t *all)
{
    size_t i;
    json_t *id;
    if (!json_array_size(ids))
        printf("%-11s (none)\n", label);
    json_array_foreach (ids, i, id) {
        json_t *t = task_in(all, json_string_value(id));
        printf("%-11s %s [%s] %s\n", i ? "" : label, json_string_value(id),
               t ? tstr(t, "status") : "?", t ? tstr(t, "title") : "?");
    }
}

/* `task show`: one labelled field a line; result and reason only when the task has them. */
static void print_tags(json_t *tags)
{
    size_t i;
    json_t *tag;
    if (!json_array_size(tags))
        return;
    printf("%-11s", "tags:");
    json_array_foreach (tags, i, tag)
        printf(" %s", json_string_value(tag));
    printf("\n");
}

/* The judge's answer when the rules tied (docs/orchestration.md, "Picking the agent"). */
static void print_judgement(json_t *j)
{
    if (!j)
        return;
    const char *agent = tstr(j, "agent"), *error = tstr(j, "error");
    printf("%-11s %s%s (model %s, %zu candidates)\n", "judgement:", *agent ? "chose " : "",
           *agent ? agent : "none", *tstr(j, "model") ? tstr(j, "model") : "-",
           json_array_size(json_object_get(j, "candidates")));
    if (*error)
        printf("%-11s %s\n", "", error);
    if (*tstr(j, "text"))
        printf("%-11s answered \"%s\"\n", "", tstr(j, "text"));
}

/* The backoff a failed attempt set before the next (docs/orchestration.md, trial L10). */
static void print_retry(json_t *r)
{
    if (!r)
        return;
    char at[32] = "";
    time_t secs = (time_t)(json_integer_value(json_object_get(r, "not_before_ms")) / 1000);
    struct tm tm;
    if (gmtime_r(&secs, &tm))
        strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
    printf("%-11s attempt %lld not before %s (a backoff of %.1f s after attempt %lld failed: "
           "%s)\n",
           "retry:", (long long)json_integer_value(json_object_get(r, "after_attempt")) + 1, at,
           (double)json_integer_value(json_object_get(r, "backoff_ms")) / 1000.0,
           (long long)json_integer_value(json_object_get(r, "after_attempt")), tstr(r, "error"));
}

/* Why a task needs attention: its run completed with calls in doubt (trial L3). */
static void print_in_doubt(json_t *t)
{
    json_t *d = json_object_get(t, "in_doubt");
    if (!d || strcmp(tstr(t, "status"), "attention"))
        return;
    printf(
        "%-11s %lld call(s) of run %.16s in doubt: its result waits (and what it blocks) until "
        "each is settled: vigil indoubt list, vigil indoubt resolve OP --applied|--not-applied\n",
        "in doubt:", (long long)json_integer_value(json_object_get(d, "calls")),
        tstr(d, "run_key"));
}

static void print_task_fields(struct cli *c, json_t *t, json_t *all)
{
    json_t *names = json_object();
    const char *agent = agent_label(c, names, tstr(t, "agent"));
    char created[32] = "";
    time_t secs = (time_t)(json_integer_value(json_object_get(t, "created_ms")) / 1000);
    struct tm tm;
    if (gmtime_r(&secs, &tm))
        strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    printf("%-11s %s\n%-11s %s\n%-11s %s\n", "id:", tstr(t, "id"), "title:", tstr(t, "title"),
           "status:", tstr(t, "status"));
    printf("%-11s %s\n", "kind:", *tstr(t, "kind") ? tstr(t, "kind") : "(any)");
    print_tags(json_object_get(t, "tags"));
    if (*agent && strcmp(agent, tstr(t, "agent")))
        printf("%-11s %s (%s)%s%s\n", "agent:", agent, tstr(t, "agent"),
               *tstr(t, "run_key") ? "  run " : "", tstr(t, "run_key"));
    else
        printf("%-11s %s%s%s\n", "agent:", *agent ? agent : "(not dispatched)",
               *tstr(t, "run_key") ? "  run " : "", tstr(t, "run_key"));
    json_decref(names); /* agent is not used past here */
    printf("%-11s %lld\n%-11s %lld\n%-11s %s\n",
           "attempts:", (long long)json_integer_value(json_object_get(t, "attempts")),
           "version:", (long long)json_integer_value(json_object_get(t, "version")),
           "created:", created);
    print_edges("blocked by:", json_object_get(t, "blocked_by"), all);
    print_edges("blocks:", json_object_get(t, "blocks"), all);
    if (json_is_string(json_object_get(t, "result")))
        printf("%-11s %s\n", "result:", tstr(t, "result"));
    if (json_is_string(json_object_get(t, "reason")))
        printf("%-11s %s\n", "reason:", tstr(t, "reason"));
    print_retry(json_object_get(t, "retry"));
    print_in_doubt(t);
    if (*tstr(t, "selection"))
        printf("%-11s %s\n", "picked by:", tstr(t, "selection"));
    print_judgement(json_object_get(t, "judgement"));
}

static int task_one(struct cli *c, const char *verb, const struct cli_opts *o, int json)
{
    vigil_error err = {0};
    char *text = NULL;
    if (o->n_positional != 1)
        return cli_usage("task %s needs exactly one task id", verb);
    cli_open(c, 0);
    if (!strcmp(verb, "cancel")) {
        if (vigil_task_cancel(c->rt, o->positional[0], &err))
            return cli_fail(&err);
        fprintf(stderr, "task %s cancelled\n", o->positional[0]);
        return 0;
    }
    if (vigil_task_show(c->rt, o->positional[0], &text, &err))
        return cli_fail(&err);
    if (json) {
        cli_print_json_text(text);
        return 0;
    }
    json_t *v = cli_parse_json_text(text), *all = NULL;
    /* The titles and statuses of the tasks on its edges: the list, read once. */
    if (!vigil_task_list(c->rt, NULL, &text, &err))
        all = cli_parse_json_text(text);
    print_task_fields(c, v, all);
    json_decref(all);
    json_decref(v);
    return 0;
}

static int task_dispatch(struct cli *c, const struct cli_opts *o, const char *slots, int json)
{
    vigil_error err = {0};
    int started = 0;
    char *end = NULL;
    long n = slots ? strtol(slots, &end, 10) : 0;
    if (o->n_positional || (slots && (*end || n < 1 || n > 1000)))
        return cli_usage("task dispatch takes only --slots N (1..1000)");
    cli_open(c, 0);
    if (vigil_task_dispatch(c->rt, (int)n, &started, &err))
        return cli_fail(&err);
    if (json)
        printf("{\"started\": %d}\n", started);
    else
        printf("%d task%s started%s\n", started, started == 1 ? "" : "s",
               started ? " (vigil task list --status running: the agent of each)" : "");
    /* A started task's run is a queued wake: only a daemon takes it (trial C20). */
    cli_note_queued(c, started, started == 1 ? "task run" : "task runs");
    return 0;
}

/* 1 when task a already blocks b (then `task block A B` says so instead of writing again). */
static int already_blocks(struct cli *c, const char *a, const char *b)
{
    char *text = NULL;
    int found = 0;
    if (vigil_task_show(c->rt, a, &text, NULL))
        return 0; /* the block itself reports what is wrong with a */
    json_t *v = json_loads(text, 0, NULL), *it;
    size_t i;
    json_array_foreach (json_object_get(v, "blocks"), i, it)
        found |= json_is_string(it) && !strcmp(json_string_value(it), b);
    json_decref(v);
    vigil_free(text);
    return found;
}

int cmd_task(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--json", "--status=", "--slots=", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    if (argc < 2 || cli_wants_help(argc, argv)) {
        fputs(task_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : 0;
    }
    const char *verb = argv[1];
    if (!strcmp(verb, "add"))
        return task_add(c, argc - 1, argv + 1);
    if (cli_parse(argc - 1, argv + 1, spec, &o))
        return CLI_USAGE;
    int json = cli_opt(&o, spec, "--json") != NULL;
    if (!strcmp(verb, "list") || !strcmp(verb, "graph"))
        return task_list_or_graph(c, &o, cli_opt(&o, spec, "--status"), json, verb[0] == 'g');
    if (!strcmp(verb, "show") || !strcmp(verb, "cancel"))
        return task_one(c, verb, &o, json);
    if (!strcmp(verb, "dispatch"))
        return task_dispatch(c, &o, cli_opt(&o, spec, "--slots"), json);
    if (!strcmp(verb, "block")) {
        if (o.n_positional != 2)
            return cli_usage("task block needs two task ids: A B (A blocks B)");
        cli_open(c, 0);
        if (already_blocks(c, o.positional[0], o.positional[1])) {
            fprintf(stderr, "vigil: %s already blocks %s: nothing changed\n", o.positional[0],
                    o.positional[1]);
            return 0;
        }
        if (vigil_task_block(c->rt, o.positional[0], o.positional[1], &err))
            return cli_fail(&err);
        return 0;
    }
    return cli_usage("unknown task command \"%s\"", verb);
}
