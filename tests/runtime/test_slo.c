/*
 * test_slo.c: service levels measured from run data (vigil_slo): a window's runs counted by how
 * they ended, the success rate among those that ended, the share of tool calls whose effect is
 * known, latency percentiles from the runs' own start and end (a provider's retry-after waited
 * out on the test clock makes one run slow), the cost, each against the config's objective; an
 * older window has nothing to measure, and one agent's levels are its own.
 */
#include "helpers/rt.h"

#include <stdio.h>

#include "os/fs.h"

static json_t *levels(struct test_rt *t, const char *agent, int64_t window_ms)
{
    char *text = NULL;
    ASSERT_OK(vigil_slo(t->rt, agent, window_ms, &text, E));
    json_t *v = json_loads(text, 0, NULL);
    vigil_free(text);
    ASSERT(v != NULL);
    return v;
}

static json_t *objective(json_t *v, const char *name)
{
    json_t *o;
    size_t i;
    json_array_foreach (json_object_get(v, "objectives"), i, o)
        if (!strcmp(json_string_value(json_object_get(o, "name")), name))
            return o;
    return NULL;
}

static int64_t figure(json_t *v, const char *group, const char *key)
{
    return json_integer_value(
        json_object_get(json_object_get(json_object_get(v, "figures"), group), key));
}

static vigil_code note(void *user, const vigil_tool_call_info *call, const char *args_json,
                       char **out_result_json, vigil_error *err)
{
    (void)user;
    (void)call;
    (void)args_json;
    (void)err;
    *out_result_json = strdup("{\"noted\":true}");
    return *out_result_json ? VIGIL_OK : VIGIL_ENOMEM;
}

static void write_file(const char *path, const char *text)
{
    ASSERT_OK(vg_fs_write_file(path, text, strlen(text), E));
}

/* proves: S0-150 */
TEST(service_levels_are_measured_from_the_runs_against_their_objectives)
{
    struct test_rt t;
    char dir[4300], cfg[4400], cassette[4400], agent[37], other[37], *out = NULL;
    snprintf(dir, sizeof dir, "%s", vg_test_tmpdir("slo_config"));
    snprintf(cfg, sizeof cfg, "%s/config.yaml", dir);
    snprintf(cassette, sizeof cassette, "%s/slo.json", dir);
    write_file(cfg, "slo:\n  success_rate: 0.9\n  latency_p95_ms: 5000\n"
                    "  cost_per_run_usd: 0.01\n");
    write_file(
        cassette,
        "{\"vigil_cassette\":1,\"exchanges\":["
        "{\"response\":{\"text\":\"one\"}},"
        "{\"error\":{\"code\":\"ERATELIMIT\",\"message\":\"slow down\","
        "\"retry_after_ms\":3000}},"
        "{\"response\":{\"text\":\"two, late\"}},"
        "{\"response\":{\"tool_calls\":[{\"id\":\"n1\",\"name\":\"note\",\"arguments\":{}}]}},"
        "{\"response\":{\"text\":\"three\"}},"
        "{\"error\":{\"code\":\"EAUTH\",\"message\":\"key refused\"}},"
        "{\"response\":{\"text\":\"elsewhere\"}}]}");
    setenv("VIGIL_CONFIG", cfg, 1);
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    setenv("VIGIL_MODEL_CASSETTE", cassette, 1);
    setenv("VIGIL_MODEL_MAX_RETRIES", "1", 1);
    test_rt_open(&t, "slo");
    vigil_agent_spec spec = {.name = "measured", .config_json = "{\"tools\":[\"note\"]}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    vigil_agent_spec spec2 = {.name = "other"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec2, other, E));
    vigil_tool_def def = {.name = "note",
                          .description = "Take a note.",
                          .input_schema_json = "{\"type\":\"object\"}",
                          .contract_json = "{\"idempotency\":\"idempotent\"}"};
    ASSERT_OK(vigil_tool_register(t.rt, &def, note, NULL, E));

    /* before any run: nothing to measure, no objective missed */
    json_t *v = levels(&t, NULL, 3600000);
    ASSERT(json_is_null(json_object_get(objective(v, "success_rate"), "met")));
    json_decref(v);

    static const char *const turns[] = {"first", "second", "third", "fourth"};
    for (size_t i = 0; i < 4; i++) {
        vigil_chat(t.rt, agent, NULL, turns[i], NULL, &out, NULL); /* the fourth fails */
        vigil_free(out);
        out = NULL;
    }
    ASSERT_OK(vigil_chat(t.rt, other, NULL, "hello", NULL, &out, E));
    vigil_free(out);

    v = levels(&t, agent, 3600000);
    ASSERT_EQ(figure(v, "runs", "started"), 4);
    ASSERT_EQ(figure(v, "runs", "ended"), 4);
    ASSERT_EQ(figure(v, "runs", "completed"), 3);
    ASSERT_EQ(figure(v, "runs", "failed"), 1);
    ASSERT_EQ(figure(v, "tool_calls", "total"), 1);
    ASSERT_EQ(figure(v, "tool_calls", "in_doubt"), 0);
    ASSERT(figure(v, "latency_ms", "max") >= 3000); /* the run that waited out the retry-after */
    ASSERT(figure(v, "latency_ms", "p50") < 3000);
    json_t *success = objective(v, "success_rate");
    ASSERT(json_number_value(json_object_get(success, "target")) == 0.9);
    ASSERT(json_number_value(json_object_get(success, "actual")) == 0.75);
    ASSERT(json_is_false(json_object_get(success, "met")));
    json_t *effects = objective(v, "side_effect_correctness");
    ASSERT(json_number_value(json_object_get(effects, "actual")) == 1.0);
    ASSERT(json_is_true(json_object_get(effects, "met")));
    json_t *latency = objective(v, "latency_p95");
    ASSERT(json_number_value(json_object_get(latency, "actual")) >= 3000);
    ASSERT(json_is_true(json_object_get(latency, "met"))); /* within 5000 ms */
    ASSERT(json_is_true(json_object_get(objective(v, "cost_per_run"), "met")));
    json_decref(v);

    /* all agents: the other's run counts too */
    v = levels(&t, NULL, 3600000);
    ASSERT_EQ(figure(v, "runs", "completed"), 4);
    json_decref(v);

    /* two days on, the last day has no run */
    vg_test_clock_advance(&t.clock, 2 * 86400000LL);
    v = levels(&t, NULL, 86400000);
    ASSERT_EQ(figure(v, "runs", "started"), 0);
    ASSERT(json_is_null(json_object_get(objective(v, "latency_p95"), "actual")));
    json_decref(v);
    ASSERT_CODE(VIGIL_EINVAL, vigil_slo(t.rt, NULL, 0, &out, NULL));
    ASSERT_CODE(VIGIL_ENOTFOUND,
                vigil_slo(t.rt, "01a2292f-0000-7000-8000-000000000000", 1000, &out, NULL));
    test_rt_close(&t);
    unsetenv("VIGIL_MODEL_MAX_RETRIES");
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
}

int main(void)
{
    RUN(service_levels_are_measured_from_the_runs_against_their_objectives);
    return 0;
}
