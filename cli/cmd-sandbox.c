/*
 * cmd-sandbox.c: `vigil sandbox check|run`: what confinement this machine offers the code
 * sandbox, and one execution as the execute_code tool runs it (docs/sandbox.md).
 */
#include "cli.h"
#include "base/json.h"

#include <errno.h>

static const char sandbox_help[] =
    "usage: vigil sandbox check [--json]\n"
    "       vigil sandbox run FILE.lua|FILE.ts [--agent ID [--run-key KEY]] [--json]\n"
    "\n"
    "check  which confinement layers the kernel offers, which a run applies, and whether a\n"
    "       layer the config requires is missing (then execute_code refuses to run; list it\n"
    "       in sandbox.accept_missing to run with less). Exit 1 when it cannot run.\n"
    "run    run FILE as execute_code would: with --agent, through that agent's gate, limits and\n"
    "       working directory; without, with the config's limits and no host tools. Prints\n"
    "       {\"ok\": true, \"result\": ..., \"output\": ...} or {\"ok\": false, \"error\":\n"
    "       {\"code\": ..., \"message\": ...}}; exit 1 when the program failed, 10 when the\n"
    "       agent may not run code (policy), 3 when the file or agent does not exist. A .ts\n"
    "       file is TypeScript, run by Deno (sandbox.deno, VIGIL_DENO or PATH); a .lua file\n"
    "       Lua; a name without an extension, the agent's or the config's sandbox.language;\n"
    "       another extension is refused (exit 2). When the agent's execute_code needs a\n"
    "       person's approval (exit 10), the refusal prints the run key: once approved, repeat\n"
    "       the same run with --run-key KEY to run it.\n";

static int sandbox_check(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--json", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    char *text = NULL;
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional)
        return cli_usage("sandbox check takes no arguments");
    if (vigil_sandbox_check(NULL, &text, &err))
        return cli_fail(&err);
    json_t *v = cli_parse_json_text(text);
    int can_run = json_is_true(json_object_get(v, "can_run"));
    if (cli_opt(&o, spec, "--json")) {
        char *s = vg_json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS);
        printf("%s\n", s ? s : "{}");
        free(s);
    } else {
        static const char *const keys[] = {"offered", "applied", "missing", "required_missing"};
        for (size_t k = 0; k < 4; k++) {
            json_t *a = json_object_get(v, keys[k]), *x;
            size_t i;
            printf("%-17s", keys[k]);
            json_array_foreach (a, i, x)
                printf(" %s", json_string_value(x));
            printf("\n");
        }
        printf("%-17s %s\n", "notes", json_string_value(json_object_get(v, "notes")));
        json_t *d = json_object_get(v, "deno");
        printf("%-17s %s%s\n", "typescript",
               json_is_true(json_object_get(d, "available")) ? "yes, " : "no: ",
               json_is_true(json_object_get(d, "available"))
                   ? json_string_value(json_object_get(d, "version"))
                   : json_string_value(json_object_get(d, "why")));
        printf("%-17s %s\n", "can_run", can_run ? "yes" : "no");
    }
    json_decref(v);
    return can_run ? 0 : 1;
}

/* The most a program file may hold: far above any sandbox's code limit in use, so a longer
 * file is refused here rather than read whole into memory. */
#define PROGRAM_FILE_MAX ((size_t)1 << 30)

/* The whole file, never a part of it: a program cut short would run as another program. -1
 * with errno on a read error; EFBIG when the file is longer than PROGRAM_FILE_MAX. */
static int read_program(const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 65536, n = 0;
    char *b = malloc(cap);
    size_t r;
    int too_big = 0;
    while (b && (r = fread(b + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n < cap)
            continue;
        if (cap >= PROGRAM_FILE_MAX) {
            too_big = fgetc(f) != EOF;
            break;
        }
        char *nb = realloc(b, cap *= 2);
        if (!nb)
            free(b);
        b = nb;
    }
    int read_error = ferror(f) ? errno : too_big ? EFBIG : b ? 0 : ENOMEM;
    fclose(f); /* a directory opens, then fails to read */
    if (read_error) {
        free(b);
        errno = read_error;
        return -1;
    }
    *out = b;
    *len = n;
    return 0;
}

/* The language a file's name says: .ts TypeScript, .js JavaScript, .lua Lua, no extension the
 * agent's or the config's (NULL). Another extension sets *unknown: f.py would otherwise run as Lua
 * and fail with a Lua syntax error that says nothing of the real mistake. */
static const char *file_language(const char *path, int *unknown)
{
    const char *base = strrchr(path, '/'), *dot;
    base = base ? base + 1 : path;
    dot = strrchr(base, '.');
    *unknown = 0;
    if (!dot || dot == base) /* no extension (a leading dot names a hidden file) */
        return NULL;
    if (!strcmp(dot, ".ts"))
        return "typescript";
    if (!strcmp(dot, ".js"))
        return "javascript";
    if (!strcmp(dot, ".lua"))
        return "lua";
    *unknown = 1;
    return NULL;
}

/* Refused before it ran: the answer too with --json, then the code; one waiting for approval
 * names the run key to repeat it with once approved. */
static int sandbox_refused(const vigil_error *err, char *text, int as_json)
{
    json_t *v = text ? cli_parse_json_text(text) : NULL; /* frees text */
    if (v && as_json) {
        cli_add_repeat_hint(v, json_string_value(json_object_get(v, "run_key")));
        char *s = vg_json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS);
        printf("%s\n", s ? s : "{}");
        free(s);
    }
    const char *key = json_string_value(json_object_get(v, "run_key"));
    int status = key ? cli_fail_needs_approval(err, v, key) : -1;
    json_decref(v);
    return status >= 0 ? status : cli_fail(err);
}

static int sandbox_run(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--agent=", "--run-key=", "--json", NULL};
    struct cli_opts o;
    vigil_error err = {0};
    char *text = NULL, *code = NULL;
    size_t len = 0;
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional != 1)
        return cli_usage("sandbox run needs exactly one program file");
    if (read_program(o.positional[0], &code, &len)) {
        if (errno == EFBIG) {
            fprintf(stderr,
                    "vigil: \"%s\" is longer than %zu bytes: no sandbox runs a program "
                    "that long\n",
                    o.positional[0], PROGRAM_FILE_MAX);
            return vigil_code_exit_status(VIGIL_ETOOBIG);
        }
        fprintf(stderr, "vigil: could not read \"%s\": %s\n", o.positional[0], strerror(errno));
        return 3;
    }
    const char *run_key = cli_opt(&o, spec, "--run-key");
    if (run_key && !cli_opt(&o, spec, "--agent")) {
        free(code);
        return cli_usage("--run-key needs --agent: a run without an agent has no gate to repeat");
    }
    int unknown;
    const char *language = file_language(o.positional[0], &unknown);
    if (unknown) {
        free(code);
        return cli_usage("\"%s\": use a .lua (Lua), .ts (TypeScript) or .js (JavaScript) file, "
                         "or a name without an extension for the configured sandbox.language "
                         "(Python is not offered: docs/sandbox.md)",
                         o.positional[0]);
    }
    cli_open(c, 0);
    vigil_code rc = vigil_sandbox_run_keyed(c->rt, cli_agent(c, cli_opt(&o, spec, "--agent")),
                                            run_key, language, code, len, &text, &err);
    free(code);
    if (rc) /* refused by policy before it ran */
        return sandbox_refused(&err, text, cli_opt(&o, spec, "--json") != NULL);
    json_t *v = cli_parse_json_text(text);
    int ok = json_is_true(json_object_get(v, "ok"));
    /* Over the code limit: refused whole before it ran, a size refusal as ETOOBIG is. */
    const char *code_name = json_string_value(json_object_get(json_object_get(v, "error"), "code"));
    int too_large = !ok && code_name && !strcmp(code_name, "code_too_large");
    if (cli_opt(&o, spec, "--json")) {
        char *s = vg_json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS); /* as every --json (cli.md) */
        printf("%s\n", s ? s : "{}");
        free(s);
    } else {
        const char *out = json_string_value(json_object_get(v, "output"));
        fputs(out ? out : "", stdout);
        json_t *e = json_object_get(v, "error");
        char *r = vg_json_dumps(json_object_get(v, "result"), JSON_ENCODE_ANY | JSON_COMPACT);
        if (ok)
            printf("%s\n", r ? r : "null");
        else
            fprintf(stderr, "vigil: %s: %s%s\n", json_string_value(json_object_get(e, "code")),
                    json_string_value(json_object_get(e, "message")),
                    too_large ? " (raise sandbox.limits.code_bytes in the config, docs/sandbox.md)"
                              : "");
        free(r);
    }
    json_decref(v);
    return ok ? 0 : too_large ? vigil_code_exit_status(VIGIL_ETOOBIG) : 1;
}

int cmd_sandbox(struct cli *c, int argc, char **argv)
{
    if (argc < 2 || cli_wants_help(argc, argv)) {
        fputs(sandbox_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : 0;
    }
    if (!strcmp(argv[1], "check"))
        return sandbox_check(c, argc - 1, argv + 1);
    if (!strcmp(argv[1], "run"))
        return sandbox_run(c, argc - 1, argv + 1);
    return cli_usage("unknown sandbox command \"%s\" (check, run)", argv[1]);
}
