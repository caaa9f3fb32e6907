/*
 * cmd-memory.c: `vigil memory ...`: list, show, search and history of an agent's memory
 * blocks, a person's own changes (set, delete), the pending mutations of familiar blocks and
 * their approval or rejection, and first-run seeding from a persona file.
 */
#include "cli.h"

#include "os/fs.h"

static const char memory_help[] =
    "usage: vigil memory list AGENT [--tier T] [--json]\n"
    "       vigil memory show AGENT LABEL [--json]\n"
    "       vigil memory search AGENT QUERY [--limit N] [--json]\n"
    "       vigil memory history AGENT LABEL [--json]\n"
    "       vigil memory set AGENT LABEL (--content TEXT | --file PATH) [--tier T]\n"
    "                        [--permission P] [--json]\n"
    "       vigil memory delete AGENT LABEL [--json]\n"
    "       vigil memory pending [--agent ID] [--json]\n"
    "       vigil memory approve ID [--json]\n"
    "       vigil memory reject ID --reason TEXT [--json]\n"
    "       vigil memory seed AGENT [--persona FILE]\n"
    "\n"
    "Tiers: core (always in the prompt), working (loaded while needed), archival (searched).\n"
    "Permissions: read_only, familiar (changes wait for your approval), append, read_write.\n"
    "A rejection's reason is handed to the agent as feedback.\n"
    "set and delete are yours: they apply at once whatever the permission (a new block is core,\n"
    "read_write unless --tier/--permission say otherwise) and history records them by human.\n";

static const char *const spec[] = {
    "--json",     "--tier=",    "--agent=", "--reason=",     "--limit=",
    "--persona=", "--content=", "--file=",  "--permission=", NULL};

static int print_or_fail(vigil_code rc, const vigil_error *err, char *text, int json,
                         void (*human)(json_t *))
{
    if (rc)
        return cli_fail(err);
    if (json || !human) {
        cli_print_json_text(text);
        return 0;
    }
    json_t *v = cli_parse_json_text(text);
    human(v);
    json_decref(v);
    return 0;
}

static const char *s(json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "";
}

/* One line of text, at most n bytes, newlines shown as spaces. */
static void oneline(const char *text, int n)
{
    for (int i = 0; i < n && text[i]; i++)
        putchar(text[i] == '\n' || text[i] == '\r' ? ' ' : text[i]);
}

static void human_list(json_t *v)
{
    printf("%-9s  %-10s  %-6s  %-24s  %s\n", "TIER", "PERMISSION", "PINNED", "LABEL", "CONTENT");
    if (json_array_size(v) == 0)
        fprintf(stderr, "no memory blocks (seed them with `vigil memory seed AGENT`)\n");
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *b = json_array_get(v, i);
        printf("%-9s  %-10s  %-6s  %-24s  ", s(b, "tier"), s(b, "permission"),
               json_is_true(json_object_get(b, "pinned")) ? "yes" : "no", s(b, "label"));
        oneline(s(b, "content"), 60);
        putchar('\n');
    }
}

static void human_show(json_t *b)
{
    printf("label:      %s\ntier:       %s\npermission: %s\npinned:     %s\nupdated:    %s\n\n%s\n",
           s(b, "label"), s(b, "tier"), s(b, "permission"),
           json_is_true(json_object_get(b, "pinned")) ? "yes" : "no", s(b, "updated_at"),
           s(b, "content"));
}

/* How a hit matched: by its words (the keyword index), by likeness of meaning (the embedder's
 * cosine, shown so a weak likeness reads as weak), or both. */
static void match_how(json_t *h, char *out, size_t n)
{
    json_t *sim = json_object_get(h, "similarity");
    int words = json_object_get(h, "keyword_rank") != NULL;
    if (sim)
        snprintf(out, n, "%slike %.2f", words ? "words, " : "", json_number_value(sim));
    else
        snprintf(out, n, "%s", words ? "words" : "-");
}

static void human_search(json_t *v)
{
    if (json_array_size(v) == 0) {
        printf("no match\n");
        return;
    }
    printf("    %-8s %-24s  %-16s  %s\n", "TIER", "LABEL", "MATCHED BY", "CONTENT");
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *h = json_array_get(v, i);
        const char *where = json_object_get(h, "label") ? s(h, "label") : s(h, "thread_id");
        char how[32];
        match_how(h, how, sizeof how);
        printf("%2zu. %-8s %-24s  %-16s  ", i + 1,
               strcmp(s(h, "kind"), "message") ? s(h, "tier") : "history", where, how);
        oneline(s(h, "content"), 60);
        putchar('\n');
    }
}

/* Where old and new content part, less some context, when that is past what a line shows: an
 * append's old and new lines read the same from their start (trial E16). 0: from the start.
 * On a UTF-8 character's first byte. */
static size_t change_start(json_t *e)
{
    const char *a = s(e, "old_content"), *b = s(e, "new_content");
    size_t n = 0;
    if (!json_is_string(json_object_get(e, "old_content")) ||
        !json_is_string(json_object_get(e, "new_content")))
        return 0;
    while (a[n] && a[n] == b[n])
        n++;
    if (n < 80)
        return 0;
    n -= 40;
    while (n > 0 && ((unsigned char)a[n] & 0xC0) == 0x80)
        n--;
    return n;
}

static void human_history(json_t *v)
{
    if (json_array_size(v) == 0) {
        printf("no history\n");
        return;
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *e = json_array_get(v, i);
        printf("%s  %-8s  by %-6s", s(e, "at"), s(e, "type"),
               json_object_get(e, "actor") ? s(e, "actor") : "agent");
        if (json_object_get(e, "pending_id"))
            printf("  pending %s", s(e, "pending_id"));
        putchar('\n');
        size_t from = change_start(e);
        if (json_is_string(json_object_get(e, "old_content"))) {
            printf("    old: %s", from ? "..." : "");
            oneline(s(e, "old_content") + from, 100);
            putchar('\n');
        }
        if (json_is_string(json_object_get(e, "new_content"))) {
            printf("    new: %s", from ? "..." : "");
            oneline(s(e, "new_content") + from, 100);
            putchar('\n');
        }
        if (*s(e, "reason")) /* an approval without a reason stores "" */
            printf("    reason: %s\n", s(e, "reason"));
    }
}

static void human_set(json_t *b)
{
    printf("%s memory block \"%s\" (%s, %s)\n", s(b, "change"), s(b, "label"), s(b, "tier"),
           s(b, "permission"));
}

static void human_deleted(json_t *b)
{
    printf("deleted memory block \"%s\" (%s, %s)\n", s(b, "label"), s(b, "tier"),
           s(b, "permission"));
}

/* memory set: the content from --content or --file (the file's whole text), never both. */
static int memory_set(struct cli *c, struct cli_opts *o, int json)
{
    const char *content = cli_opt(o, spec, "--content"), *file = cli_opt(o, spec, "--file");
    const char *tier = cli_opt(o, spec, "--tier"), *perm = cli_opt(o, spec, "--permission");
    static const char *const tiers[] = {"core", "working", "archival", NULL};
    static const char *const perms[] = {"read_only", "familiar", "append", "read_write", NULL};
    vigil_error err = {0};
    char *text = NULL, *read = NULL;
    size_t len = 0;
    if (o->n_positional != 2)
        return cli_usage("memory set takes AGENT LABEL");
    if (!content == !file)
        return cli_usage("memory set takes the content as --content TEXT or --file PATH");
    if (cli_check_choice("--tier", tier, tiers) || cli_check_choice("--permission", perm, perms))
        return CLI_USAGE;
    /* Read at most one byte past the library's cap (256 KiB): past it, ETOOBIG either way. */
    if (file && vg_fs_read_file(file, 256 * 1024 + 1, &read, &len, &err))
        return cli_fail(&err);
    cli_open(c, 0);
    vigil_code rc = vigil_memory_set(c->rt, cli_agent(c, o->positional[0]), o->positional[1],
                                     file ? read : content, tier, perm, &text, &err);
    vg_free(read);
    return print_or_fail(rc, &err, text, json, human_set);
}

static void human_pending(json_t *v)
{
    if (json_array_size(v) == 0) {
        printf("no pending memory changes\n");
        return;
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *p = json_array_get(v, i);
        printf("%s  agent %s  %s of \"%s\" (%s)\n    proposed: ", s(p, "id"), s(p, "agent_id"),
               s(p, "op"), s(p, "label"), s(p, "created_at"));
        oneline(s(p, "text"), 100);
        printf("\n    approve: vigil memory approve %s\n    reject:  vigil memory reject %s "
               "--reason TEXT\n",
               s(p, "id"), s(p, "id"));
    }
}

static void human_resolved(json_t *p)
{
    if (json_is_true(json_object_get(p, "already")))
        printf("%s: %s of \"%s\" was already %s by %s at %s; nothing changed\n", s(p, "id"),
               s(p, "op"), s(p, "label"), s(p, "status"), s(p, "resolved_by"), s(p, "resolved_at"));
    else
        printf("%s: %s of \"%s\" %s\n", s(p, "id"), s(p, "op"), s(p, "label"), s(p, "status"));
}

int cmd_memory(struct cli *c, int argc, char **argv)
{
    struct cli_opts o;
    vigil_error err = {0};
    char *text = NULL;
    if (argc < 2 || cli_wants_help(argc, argv)) {
        fputs(memory_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : 0;
    }
    const char *verb = argv[1];
    if (cli_parse(argc - 1, argv + 1, spec, &o))
        return CLI_USAGE;
    int json = cli_opt(&o, spec, "--json") != NULL;
    const char *a0 = o.n_positional > 0 ? o.positional[0] : NULL;
    const char *a1 = o.n_positional > 1 ? o.positional[1] : NULL;
    if (!strcmp(verb, "list")) {
        if (o.n_positional != 1)
            return cli_usage("memory list takes one AGENT");
        cli_open(c, 0);
        vigil_code rc =
            vigil_memory_list(c->rt, cli_agent(c, a0), cli_opt(&o, spec, "--tier"), &text, &err);
        return print_or_fail(rc, &err, text, json, human_list);
    }
    if (!strcmp(verb, "show") || !strcmp(verb, "history")) {
        if (o.n_positional != 2)
            return cli_usage("memory %s takes AGENT LABEL", verb);
        cli_open(c, 0);
        int show = !strcmp(verb, "show");
        vigil_code rc = show ? vigil_memory_show(c->rt, cli_agent(c, a0), a1, &text, &err)
                             : vigil_memory_history(c->rt, cli_agent(c, a0), a1, &text, &err);
        return print_or_fail(rc, &err, text, json, show ? human_show : human_history);
    }
    if (!strcmp(verb, "search")) {
        if (o.n_positional != 2)
            return cli_usage("memory search takes AGENT QUERY (quote a query of several words)");
        long k = 10;
        if (cli_opt(&o, spec, "--limit")) {
            char *end = NULL;
            k = strtol(cli_opt(&o, spec, "--limit"), &end, 10);
            if (*end || k < 1 || k > 100)
                return cli_usage("--limit takes a number from 1 to 100");
        }
        cli_open(c, 0);
        vigil_code rc = vigil_memory_search(c->rt, cli_agent(c, a0), a1, (int)k, &text, &err);
        return print_or_fail(rc, &err, text, json, human_search);
    }
    if (!strcmp(verb, "set"))
        return memory_set(c, &o, json);
    if (!strcmp(verb, "delete")) {
        if (o.n_positional != 2)
            return cli_usage("memory delete takes AGENT LABEL");
        cli_open(c, 0);
        vigil_code rc = vigil_memory_delete(c->rt, cli_agent(c, a0), a1, &text, &err);
        return print_or_fail(rc, &err, text, json, human_deleted);
    }
    if (!strcmp(verb, "pending")) {
        if (o.n_positional)
            return cli_usage("memory pending takes no arguments (filter with --agent ID)");
        cli_open(c, 0);
        vigil_code rc =
            vigil_memory_pending(c->rt, cli_agent(c, cli_opt(&o, spec, "--agent")), &text, &err);
        return print_or_fail(rc, &err, text, json, human_pending);
    }
    if (!strcmp(verb, "approve") || !strcmp(verb, "reject")) {
        if (o.n_positional != 1)
            return cli_usage("memory %s takes one pending mutation ID", verb);
        const char *reason = cli_opt(&o, spec, "--reason");
        int approve = !strcmp(verb, "approve");
        if (!approve && (!reason || !*reason))
            return cli_usage("memory reject needs --reason TEXT (the agent gets it as feedback)");
        if (approve && reason)
            return cli_usage("memory approve takes no --reason");
        cli_open(c, 0);
        vigil_code rc = approve ? vigil_memory_approve(c->rt, a0, &text, &err)
                                : vigil_memory_reject(c->rt, a0, reason, &text, &err);
        return print_or_fail(rc, &err, text, json, human_resolved);
    }
    if (!strcmp(verb, "seed")) {
        if (o.n_positional != 1)
            return cli_usage("memory seed takes one AGENT");
        int seeded = 0;
        cli_open(c, 0);
        if (vigil_memory_seed(c->rt, cli_agent(c, a0), cli_opt(&o, spec, "--persona"), &seeded,
                              &err))
            return cli_fail(&err);
        printf(seeded ? "seeded core memory (system, persona, familiar)\n"
                      : "the agent already has memory: nothing seeded\n");
        return 0;
    }
    return cli_usage("unknown memory command \"%s\"", verb);
}
