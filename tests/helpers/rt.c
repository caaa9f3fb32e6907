/*
 * rt.c: test runtimes with a test clock and seeded ids.
 */
#include "helpers/rt.h"

#include "helpers/pg_env.h"

#include <ctype.h>
#include <jansson.h>
#include <string.h>

static void open_at(struct test_rt *t, uint64_t seed)
{
    vigil_error err = {0};
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t->path, .create_if_missing = 1};
    struct vg_ids *ids = vg_ids_seeded(&t->clock.base, seed);
    if (vg_runtime_open_with(&o, &t->clock.base, ids, &t->rt, &err) != VIGIL_OK)
        TEST_FAIL_("could not open test runtime: %s", err.message);
    t->env = vg_runtime_env(t->rt);
}

void test_rt_open(struct test_rt *t, const char *name)
{
    memset(t, 0, sizeof *t);
    vg_test_clock_init(&t->clock, 1767225600000); /* 2026-01-01T00:00:00Z */
    snprintf(t->path, sizeof t->path, "%s/agent.db", vg_test_tmpdir(name));
    if (getenv("VIGIL_TEST_RT_PG")) { /* the same test on a PostgreSQL store: a fresh schema */
        char schema[64];
        size_t n = 0;
        for (const char *p = name; *p && n < 40; p++)
            schema[n++] = isalnum((unsigned char)*p) ? (char)tolower((unsigned char)*p) : '_';
        snprintf(schema + n, sizeof schema - n, "_rt");
        vg_test_pg_schema_uri(schema, 1, t->path, sizeof t->path);
    }
    t->opens = 1;
    open_at(t, t->opens);
}

void test_rt_reopen(struct test_rt *t)
{
    vigil_runtime_close(t->rt);
    open_at(t, ++t->opens); /* each new process gets other random bits */
}

void test_rt_close(struct test_rt *t)
{
    vigil_runtime_close(t->rt);
    t->rt = NULL;
}

int test_rt_decisions_saying(struct test_rt *t, const char *agent, const char *decision)
{
    char *text = NULL;
    ASSERT_OK(vigil_agent_tree(t->rt, agent, &text, E));
    json_t *tree = json_loads(text, 0, NULL), *d;
    vigil_free(text);
    size_t i;
    int n = 0;
    json_array_foreach (json_object_get(tree, "decisions"), i, d) {
        const char *said = json_string_value(json_object_get(d, "decision"));
        n += said && !strcmp(said, decision);
    }
    json_decref(tree);
    return n;
}
