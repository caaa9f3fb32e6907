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

static vigil_code step_lifecycle(struct ctx *c, vigil_error *err)
{
    vigil_lifecycle lc;
    return vigil_agent_lifecycle(c->rt, c->agent, &lc, err);
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

/* More of the calls a program makes, each freeing the text it got (Session 33). */
#define OUT_STEP(fn, call)                                                                         \
    static vigil_code fn(struct ctx *c, vigil_error *err)                                          \
    {                                                                                              \
        char *out = NULL;                                                                          \
        vigil_code rc = call;                                                                      \
        vigil_free(out);                                                                           \
        return rc;                                                                                 \
    }
OUT_STEP(step_chat_keyed, vigil_chat_keyed(c->rt, c->agent, NULL, "k-1", "keyed", NULL, &out, err))
OUT_STEP(step_chat_keyed_again,
         vigil_chat_keyed(c->rt, c->agent, NULL, "k-1", "keyed", NULL, &out, err))
OUT_STEP(step_run_messages, vigil_run_messages(c->rt, c->run_id, NULL, 0, &out, err))
OUT_STEP(step_run_follow, vigil_run_follow(c->rt, c->run_id, (int64_t[2]){0, 0}, 0, &out, err))
OUT_STEP(step_run_replay, vigil_run_replay(c->rt, c->run_id, &out, err))
OUT_STEP(step_by_hand, vigil_tool_calls_by_hand(c->rt, c->agent, NULL, 0, &out, err))
OUT_STEP(step_tree, vigil_agent_tree(c->rt, c->agent, &out, err))
OUT_STEP(step_export, vigil_agent_export(c->rt, c->agent, &out, err))
OUT_STEP(step_approvals, vigil_approval_list(c->rt, c->agent, NULL, &out, err))
OUT_STEP(step_indoubt, vigil_indoubt_list(c->rt, c->agent, &out, err))
OUT_STEP(step_subscriptions, vigil_subscription_list(c->rt, c->agent, &out, err))
OUT_STEP(step_timers, vigil_timer_list(c->rt, c->agent, &out, err))
OUT_STEP(step_wake_runs, vigil_wake_runs(c->rt, c->agent, NULL, 0, &out, err))
OUT_STEP(step_memory_set,
         vigil_memory_set(c->rt, c->agent, "notes", "likes tea", NULL, NULL, &out, err))
OUT_STEP(step_memory_list, vigil_memory_list(c->rt, c->agent, NULL, &out, err))
OUT_STEP(step_memory_show, vigil_memory_show(c->rt, c->agent, "notes", &out, err))
OUT_STEP(step_memory_history, vigil_memory_history(c->rt, c->agent, "notes", &out, err))

OUT_STEP(step_memory_search, vigil_memory_search(c->rt, c->agent, "tea", 0, &out, err))
OUT_STEP(step_memory_delete, vigil_memory_delete(c->rt, c->agent, "notes", &out, err))

static vigil_code step_journal_export(struct ctx *c, vigil_error *err)
{
    char folder[4300];
    int64_t n = 0;
    snprintf(folder, sizeof folder, "%s.journal", c->path);
    return vigil_journal_export(c->rt, c->agent, folder, &n, err);
}

static vigil_code step_kill_set(struct ctx *c, vigil_error *err)
{
    return vigil_kill_set(c->rt, c->agent, NULL, 0, "not stopped", err);
}

static vigil_code step_destroy(struct ctx *c, vigil_error *err)
{
    return vigil_agent_destroy(c->rt, c->agent, "done", err);
}

static vigil_code step_timer_add(struct ctx *c, vigil_error *err)
{
    char id[37];
    return vigil_timer_add(c->rt, c->agent, "cron", "0 7 * * *", "UTC", id, err);
}

static vigil_code step_kill_active(struct ctx *c, vigil_error *err)
{
    int on = 0;
    return vigil_kill_active(c->rt, c->agent, NULL, &on, err);
}

static vigil_code step_pause(struct ctx *c, vigil_error *err)
{
    return vigil_agent_pause(c->rt, c->agent, "a break", err);
}

static vigil_code step_resume(struct ctx *c, vigil_error *err)
{
    return vigil_agent_resume(c->rt, c->agent, "back", err);
}

static const struct {
    const char *name;
    vigil_code (*call)(struct ctx *c, vigil_error *err);
} steps[] = {
    {"vigil_runtime_open", step_open},
    {"vigil_tool_register", step_register},
    {"vigil_agent_create", step_create},
    {"vigil_agent_show", step_show},
    {"vigil_agent_lifecycle", step_lifecycle},
    {"vigil_agent_list", step_list},
    {"vigil_budget_usage (nothing used yet)", step_budget},
    {"vigil_wake_runs (none yet)", step_wake_runs},
    {"vigil_timer_list (none yet)", step_timers},
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
    {"vigil_chat_keyed (first)", step_chat_keyed},
    {"vigil_chat_keyed (sent again)", step_chat_keyed_again},
    {"vigil_run_messages", step_run_messages},
    {"vigil_run_follow", step_run_follow},
    {"vigil_run_replay", step_run_replay},
    {"vigil_tool_calls_by_hand", step_by_hand},
    {"vigil_agent_tree", step_tree},
    {"vigil_agent_export", step_export},
    {"vigil_approval_list", step_approvals},
    {"vigil_indoubt_list", step_indoubt},
    {"vigil_subscription_list", step_subscriptions},
    {"vigil_timer_add", step_timer_add},
    {"vigil_timer_list", step_timers},
    {"vigil_wake_runs", step_wake_runs},
    {"vigil_kill_active", step_kill_active},
    {"vigil_memory_set", step_memory_set},
    {"vigil_memory_list", step_memory_list},
    {"vigil_memory_show", step_memory_show},
    {"vigil_memory_history", step_memory_history},
    {"vigil_agent_pause", step_pause},
    {"vigil_agent_resume", step_resume},
    {"vigil_memory_search", step_memory_search},
    {"vigil_memory_delete", step_memory_delete},
    {"vigil_journal_export", step_journal_export},
    {"vigil_kill_set (off)", step_kill_set},
    {"vigil_agent_destroy", step_destroy},
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
