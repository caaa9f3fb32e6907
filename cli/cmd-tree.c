/*
 * cmd-tree.c: `vigil agent tree ID [--json]`, the lineage of an agent's spawned runs and its
 * spawn admission decisions (vigil_agent_tree; docs/orchestration.md).
 */
#include "cli.h"

static void print_children(json_t *kids, int indent)
{
    size_t i;
    json_t *k;
    json_array_foreach (kids, i, k) {
        const char *name = json_string_value(json_object_get(k, "child_name"));
        printf("%*s- %s (%s) run %.16s  %s, depth %lld\n", indent, "", name ? name : "?",
               json_string_value(json_object_get(k, "child_agent")),
               json_string_value(json_object_get(k, "run_key")),
               json_string_value(json_object_get(k, "status")),
               (long long)json_integer_value(json_object_get(k, "depth")));
        print_children(json_object_get(k, "children"), indent + 2);
    }
}

/* The scopes a decision granted its child (none: it may touch no scoped data), then the line's
 * end; a decision that granted none (denied, or recorded before session 40) says nothing. */
static void print_scopes(json_t *scopes)
{
    size_t i;
    json_t *s;
    if (json_is_array(scopes))
        printf(", scopes: %s", json_array_size(scopes) ? "" : "none");
    json_array_foreach (scopes, i, s)
        printf("%s%s", i ? ", " : "", json_string_value(s) ? json_string_value(s) : "?");
    putchar('\n');
}

int cmd_agent_tree(struct cli *c, const struct cli_opts *o, int json)
{
    vigil_error err = {0};
    char *text = NULL;
    if (o->n_positional != 1)
        return cli_usage("agent tree needs exactly one agent id");
    cli_open(c, 0);
    if (vigil_agent_tree(c->rt, cli_agent(c, o->positional[0]), &text, &err))
        return cli_fail(&err);
    if (json) {
        cli_print_json_text(text);
        return 0;
    }
    json_t *v = cli_parse_json_text(text), *d;
    size_t i;
    const char *name = json_string_value(json_object_get(v, "name"));
    printf("%s (%s)\n", name ? name : "?", json_string_value(json_object_get(v, "agent")));
    json_array_foreach (json_object_get(v, "spawned_by"), i, d) {
        const char *pn = json_string_value(json_object_get(d, "parent_name"));
        printf("  spawned by %s (%s), run %.16s  %s\n", pn ? pn : "?",
               json_string_value(json_object_get(d, "parent_agent")),
               json_string_value(json_object_get(d, "run_key")),
               json_string_value(json_object_get(d, "status")));
    }
    print_children(json_object_get(v, "children"), 2);
    json_array_foreach (json_object_get(v, "decisions"), i, d) {
        const char *child = json_string_value(json_object_get(d, "child_agent"));
        const char *verdict = json_string_value(json_object_get(d, "decision"));
        const char *why = json_string_value(json_object_get(d, "reason"));
        int said =
            why && *why && (!verdict || strcmp(why, verdict)); /* not "admitted (admitted)" */
        printf("decision %s #%lld: %s%s%s%s -> %s", json_string_value(json_object_get(d, "group")),
               (long long)json_integer_value(json_object_get(d, "index")), verdict ? verdict : "?",
               said ? " (" : "", said ? why : "", said ? ")" : "", child ? child : "no child");
        print_scopes(json_object_get(d, "granted_scopes"));
    }
    json_decref(v);
    return 0;
}
