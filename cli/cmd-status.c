/*
 * cmd-status.c: `vigil status [--json] [--prune-stale]`: the store and its fleet at a glance
 * (vigil_status; trial G7): what an operator otherwise put together from SQL, /metrics and a
 * dozen lists. It exits CLI_ATTENTION when something needs a person, so a monitor can run it.
 */
#include "cli.h"
#include "base/json.h"

/* The status was read and something needs a person (its "attention" lines). */
#define CLI_ATTENTION 11

static const char status_help[] =
    "usage: vigil status [--json] [--prune-stale]\n"
    "\n"
    "The store (where, kind, size, schema), the daemons serving it (stale ones: killed, or\n"
    "their host down), the kill switches on, agents by lifecycle, the wake queue (queued,\n"
    "running, orphaned, failed, the oldest queued), what waits for a person (approvals,\n"
    "operations in doubt, memory changes), the next timer firing, and what needs attention.\n"
    "--prune-stale first removes the records of stale daemons.\n"
    "\n"
    "Exit status: 0 all is well; 11 read, and something needs a person (the lines under\n"
    "\"needs attention\"); otherwise the error's (3: no store).\n";

static json_int_t num(const json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

static const char *str(const json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

/* A size for a person: bytes, kB, MB or GB (powers of 1000, as df -H). */
static const char *size_text(json_int_t n, char *buf, size_t size)
{
    static const char *const units[] = {"bytes", "kB", "MB", "GB", "TB"};
    double v = (double)n;
    size_t u = 0;
    while (v >= 1000 && u + 1 < VG_ARRAY_LEN(units)) {
        v /= 1000;
        u++;
    }
    snprintf(buf, size, u ? "%.1f %s" : "%.0f %s", v, units[u]);
    return buf;
}

/* An age for a person: "12 s", "4 min", "3 h", "2 d". */
static const char *age_text(json_int_t ms, char *buf, size_t size)
{
    json_int_t s = ms / 1000;
    if (s < 120)
        snprintf(buf, size, "%lld s", (long long)s);
    else if (s < 7200)
        snprintf(buf, size, "%lld min", (long long)(s / 60));
    else if (s < 172800)
        snprintf(buf, size, "%lld h", (long long)(s / 3600));
    else
        snprintf(buf, size, "%lld d", (long long)(s / 86400));
    return buf;
}

static void print_store(const json_t *st)
{
    char on_disk[32], used[32];
    printf("store        %s (%s, schema %lld, %s on disk, %s in records)\n", str(st, "uri"),
           str(st, "kind"), (long long)num(st, "schema_version"),
           size_text(num(st, "bytes"), on_disk, sizeof on_disk),
           size_text(num(st, "used_bytes"), used, sizeof used));
}

static void print_daemons(const json_t *daemons)
{
    size_t i, alive = 0;
    json_t *d;
    char age[32];
    json_array_foreach (daemons, i, d)
        alive += !json_is_true(json_object_get(d, "stale"));
    printf("daemons      %zu alive, %zu stale\n", alive, json_array_size(daemons) - alive);
    json_array_foreach (daemons, i, d) {
        int stale = json_is_true(json_object_get(d, "stale"));
        printf("  pid %lld on %s", (long long)num(d, "pid"), str(d, "host"));
        if (json_object_get(d, "beat_ms"))
            printf(": %s, last beat %s ago, %lld run(s), %lld lease(s)",
                   stale ? "STALE (killed, or its host is down)" : "alive",
                   age_text(num(d, "beat_age_ms"), age, sizeof age), (long long)num(d, "runs"),
                   (long long)num(d, "leases"));
        else
            printf(": alive (holds the store's lock)");
        printf("\n");
    }
}

static void print_fleet(const json_t *v)
{
    const json_t *a = json_object_get(v, "agents"), *w = json_object_get(v, "wakes");
    const json_t *sw = json_object_get(v, "kill_switches"), *t = json_object_get(v, "next_timer");
    char age[32];
    size_t i;
    json_t *s;
    printf("kill switch  %s\n", json_array_size(sw) ? "ON:" : "off");
    json_array_foreach (sw, i, s)
        printf("  %s%s%s\n", str(s, "id"), *str(s, "reason") ? ": " : "", str(s, "reason"));
    printf("agents       %lld active, %lld created, %lld dormant, %lld destroyed\n",
           (long long)num(a, "active"), (long long)num(a, "created"), (long long)num(a, "dormant"),
           (long long)num(a, "destroyed"));
    printf("wakes        %lld queued, %lld running (%lld orphaned), %lld failed\n",
           (long long)num(w, "queued"), (long long)num(w, "running"), (long long)num(w, "orphaned"),
           (long long)num(w, "failed"));
    if (json_object_get(w, "oldest_queued_agent_id") &&
        !json_is_null(json_object_get(w, "oldest_queued_agent_id")))
        printf("  oldest queued: %s ago, agent %s (%s)\n",
               age_text(num(w, "oldest_queued_age_ms"), age, sizeof age),
               *str(w, "oldest_queued_agent_name") ? str(w, "oldest_queued_agent_name") : "?",
               str(w, "oldest_queued_agent_id"));
    printf("waiting      %lld approval(s), %lld operation(s) in doubt, %lld memory change(s), "
           "%lld task(s) in attention\n",
           (long long)num(v, "approvals_pending"), (long long)num(v, "in_doubt"),
           (long long)num(v, "memory_pending"), (long long)num(v, "tasks_attention"));
    if (json_is_object(t))
        printf("next timer   %s, agent %s (%s)\n", str(t, "at"),
               *str(t, "agent_name") ? str(t, "agent_name") : "?", str(t, "agent_id"));
    else
        printf("next timer   none\n");
}

int cmd_status(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--json", "--prune-stale", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    char *text = NULL;
    int removed = 0;
    if (cli_wants_help(argc, argv)) {
        fputs(status_help, stdout);
        return 0;
    }
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional)
        return cli_usage("status takes options only");
    cli_open(c, 0);
    if (cli_opt(&o, spec, "--prune-stale")) {
        if (vigil_daemon_prune_stale(c->rt, &removed, &err))
            return cli_fail(&err);
        fprintf(stderr, "removed %d stale daemon record(s)\n", removed);
    }
    if (vigil_status(c->rt, &text, &err))
        return cli_fail(&err);
    json_t *v = cli_parse_json_text(text), *line;
    const json_t *attention = json_object_get(v, "attention");
    size_t i;
    if (cli_opt(&o, spec, "--json")) {
        vg_json_dumpf(v, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
        fputc('\n', stdout);
    } else {
        print_store(json_object_get(v, "store"));
        print_daemons(json_object_get(v, "daemons"));
        print_fleet(v);
        printf(json_array_size(attention) ? "needs attention:\n" : "all is well\n");
        json_array_foreach (attention, i, line)
            printf("  - %s\n", json_string_value(line));
    }
    int rc = json_array_size(attention) ? CLI_ATTENTION : 0;
    json_decref(v);
    return rc;
}
