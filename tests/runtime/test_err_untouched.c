/*
 * test_err_untouched.c: vigil.h's error convention, "a successful call leaves `err` and every
 * out-parameter untouched, so several calls can be chained and checked once", over a table of
 * the main API functions an embedding program calls: each succeeds and leaves a report it was
 * given byte for byte as it was. An inner lookup's expected miss (an agent's first state
 * pointer, a lease not yet taken) once wrote "not found" into the caller's report of a call
 * that succeeded (trial F, F1).
 */
#include "helpers/test.h"

#include <jansson.h>

#include "os/fs.h"

struct ctx {
    vigil_runtime *rt;
    char path[4200];
    char agent[37];
    char run_id[37];
    char run_key[65];
};

static vigil_code echo_tool(void *user, const vigil_tool_call_info *call, const char *args_json,
                            char **out_result_json, vigil_error *err)
{
    *out_result_json = strdup("{\"ok\":true}");
    return *out_result_json ? VIGIL_OK : VIGIL_ENOMEM;
}

/* Each step is one public call; owned results are freed here, not by the table. */
static vigil_code step_open(struct ctx *c, vigil_error *err)
{
    vigil_runtime_options ro;
    vigil_runtime_options_default(&ro);
    ro.store_uri = c->path;
    ro.create_if_missing = 1;
    return vigil_runtime_open(&ro, &c->rt, err);
}

static vigil_code step_register(struct ctx *c, vigil_error *err)
{
    vigil_tool_def def = {.name = "echo", .description = "Answer ok."};
    return vigil_tool_register(c->rt, &def, echo_tool, NULL, err);
}

static vigil_code step_create(struct ctx *c, vigil_error *err)
{
    vigil_agent_spec spec = {.name = "P1", .config_json = "{\"tools\":[\"set_report\",\"echo\"]}"};
    return vigil_agent_create(c->rt, &spec, c->agent, err);
}

static vigil_code step_show(struct ctx *c, vigil_error *err)
{
    char *out = NULL;
    vigil_code rc = vigil_agent_show(c->rt, c->agent, &out, err);
    vigil_free(out);
    return rc;
}

static vigil_code step_list(struct ctx *c, vigil_error *err)
{
    char *out = NULL;
    vigil_code rc = vigil_agent_list(c->rt, NULL, 0, &out, err);
    vigil_free(out);
    return rc;
}

static vigil_code step_chat(struct ctx *c, vigil_error *err)
{
    char *out = NULL;
    vigil_code rc = vigil_chat(c->rt, c->agent, NULL, "hi", NULL, &out, err);
    json_t *o = rc ? NULL : json_loads(out, 0, NULL);
    const char *id = json_string_value(json_object_get(o, "run_id"));
    snprintf(c->run_id, sizeof c->run_id, "%s", id ? id : "");
    json_decref(o);
    vigil_free(out);
    return rc;
}

static vigil_code step_chat_again(struct ctx *c, vigil_error *err)
{
    char *out = NULL;
    vigil_code rc = vigil_chat(c->rt, c->agent, "other", "and again", NULL, &out, err);
    vigil_free(out);
    return rc;
}

static vigil_code step_runs_list(struct ctx *c, vigil_error *err)
{
    char *out = NULL;
    vigil_code rc = vigil_runs_list(c->rt, c->agent, NULL, NULL, 0, &out, err);
    vigil_free(out);
    return rc;
}

static vigil_code step_run_show(struct ctx *c, vigil_error *err)
{
    char *out = NULL;
    vigil_code rc = vigil_run_show(c->rt, c->run_id, &out, err);
    vigil_free(out);
    return rc;
}

static vigil_code step_run_tools(struct ctx *c, vigil_error *err)
{
    char *out = NULL;
    vigil_code rc = vigil_run_tools(c->rt, c->run_id, NULL, 0, &out, err);
    vigil_free(out);
    return rc;
}

static vigil_code step_tool_call(struct ctx *c, vigil_error *err)
{
    char *out = NULL;
    vigil_code rc = vigil_tool_call(c->rt, c->agent, "by-hand-1", "echo", "{}", &out, err);
    vigil_free(out);
    return rc;
}

static vigil_code step_subscribe(struct ctx *c, vigil_error *err)
{
    char *out = NULL;
    vigil_code rc = vigil_subscription_add(c->rt, c->agent, "{\"tokens\":[\"TASK\"]}", &out, err);
    vigil_free(out);
    return rc;
}

static vigil_code step_notify(struct ctx *c, vigil_error *err)
{
    const char *tokens[] = {"TASK", "task-1"};
    return vigil_notify(c->rt, tokens, 2, err);
}

static vigil_code step_wake(struct ctx *c, vigil_error *err)
{
    return vigil_wake_agent(c->rt, c->agent, NULL, NULL, c->run_key, err);
}

static vigil_code step_process(struct ctx *c, vigil_error *err)
{
    int ran = 0;
    return vigil_wake_process(c->rt, 0, &ran, err);
}

static vigil_code step_budget(struct ctx *c, vigil_error *err)
{
    char *out = NULL;
    vigil_code rc = vigil_budget_usage(c->rt, c->agent, &out, err);
    vigil_free(out);
    return rc;
}

static vigil_code step_tools_for_agent(struct ctx *c, vigil_error *err)
{
    char *out = NULL;
    vigil_code rc = vigil_tool_list_for_agent(c->rt, c->agent, &out, err);
    vigil_free(out);
    return rc;
}

static vigil_code step_describe(struct ctx *c, vigil_error *err)
{
    char *out = NULL;
    vigil_code rc = vigil_model_describe(c->rt, &out, err);
    vigil_free(out);
    return rc;
}

static const struct {
    const char *name;
    vigil_code (*call)(struct ctx *c, vigil_error *err);
} steps[] = {
    {"vigil_runtime_open", step_open},
    {"vigil_tool_register", step_register},
    {"vigil_agent_create", step_create},
    {"vigil_agent_show", step_show},
    {"vigil_agent_list", step_list},
    {"vigil_model_describe", step_describe},
    {"vigil_chat (first turn)", step_chat},
    {"vigil_chat (a new session)", step_chat_again},
    {"vigil_runs_list", step_runs_list},
    {"vigil_run_show", step_run_show},
    {"vigil_run_tools", step_run_tools},
    {"vigil_tool_call", step_tool_call},
    {"vigil_tool_list_for_agent", step_tools_for_agent},
    {"vigil_budget_usage", step_budget},
    {"vigil_subscription_add", step_subscribe},
    {"vigil_notify", step_notify},
    {"vigil_wake_agent", step_wake},
    {"vigil_wake_process", step_process},
};

TEST(successful_calls_leave_the_error_report_untouched)
{
    struct ctx c = {0};
    snprintf(c.path, sizeof c.path, "%s/app.db", vg_test_tmpdir("err_untouched"));
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    int leaks = 0;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        /* A report the program filled before: it must come back as it was. */
        vigil_error err, before;
        memset(&err, 0x5a, sizeof err);
        err.code = VIGIL_OK;
        snprintf(err.message, sizeof err.message, "untouched");
        before = err;
        vigil_code rc = steps[i].call(&c, &err);
        if (rc != VIGIL_OK)
            TEST_FAIL_("%s failed: %s %s", steps[i].name, vigil_code_name(rc), err.message);
        if (memcmp(&err, &before, sizeof err) != 0) {
            fprintf(stderr, "  %s succeeded but wrote %s \"%s\" into err\n", steps[i].name,
                    vigil_code_name(err.code), err.message);
            leaks++;
        }
    }
    ASSERT_EQ(leaks, 0);
    vigil_runtime_close(c.rt);
}

int main(void)
{
    RUN(successful_calls_leave_the_error_report_untouched);
    return 0;
}
