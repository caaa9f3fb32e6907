/*
 * test_loop_gate.c: the agent loop with the real gated tool executor: an approval requested in
 * one run is resolved by a person and reaches the agent in its next run (the approved operation
 * runs exactly once); a kill switch and an exhausted budget stop a run before its next model
 * call, recorded in the journal.
 */
#include "helpers/rt.h"

#include "agent/agent.h"
#include "journal/journal.h"
#include "loop/loop.h"
#include "model/model.h"
#include "os/fs.h"
#include "tool/tool.h"

static char dir[4096];
static int deploys;

static struct vg_model *scripted(struct test_rt *t, const char *name, const char *exchanges)
{
    char path[4200], text[8192];
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    snprintf(text, sizeof text, "{\"vigil_cassette\":1,\"exchanges\":%s}", exchanges);
    ASSERT_OK(vg_fs_write_file(path, text, strlen(text), E));
    struct vg_model_options o = {.provider = "scripted", .cassette = path,
                                 .clock = &t->clock.base, .max_retries = -1};
    struct vg_model *m = NULL;
    ASSERT_OK(vg_model_new(&o, &m, E));
    return m;
}

static vigil_code deploy(void *user, const vigil_tool_call_info *call, const char *args,
                         char **out, vigil_error *err)
{
    deploys++;
    *out = strdup("{\"deployed\":true}");
    return VIGIL_OK;
}

static void setup(struct test_rt *t, const char *name, const char *config, char id[37],
                  char thread[128], struct vg_loop_executor *x)
{
    test_rt_open(t, name);
    vigil_tool_def def = {.name = "deploy", .description = "Deploy the release.",
                          .contract_json = "{\"risk\":\"high\",\"tool_class\":\"deploy\"}"};
    ASSERT_OK(vigil_tool_register(t->rt, &def, deploy, NULL, E));
    vigil_agent_spec spec = {.name = "gated", .config_json = config};
    ASSERT_OK(vigil_agent_create(t->rt, &spec, id, E));
    snprintf(thread, 128, "%s:session:default", id);
    struct vg_tool_executor *tools = NULL;
    ASSERT_OK(vg_runtime_tools(t->rt, &tools, E));
    vg_tool_loop_executor(tools, x);
}

static char *run_show(struct test_rt *t, const char *run_id)
{
    char *show = NULL;
    ASSERT_OK(vg_journal_run_show(t->env->store, run_id, &show, E));
    return show;
}

/* proves: S0-133 */
TEST(approval_reaches_the_agent_and_runs_once)
{
    struct test_rt t;
    char id[37], thread[128];
    struct vg_loop_executor x;
    deploys = 0;
    setup(&t, "gate_approval", "{\"tools\":[\"deploy\"]}", id, thread, &x);
    struct vg_model *m = scripted(
        &t, "approval",
        "[{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"deploy\",\"arguments\":{}}]}},"
        "{\"response\":{\"text\":\"waiting for approval\"}},"
        "{\"response\":{\"text\":\"deployed, thanks\"}}]");
    struct vg_loop_input in = {.agent_id = id, .thread_id = thread, .run_key = "r1",
                               .wake_reason = "user", .input = "ship it", .model = m,
                               .executor = &x};
    struct vg_loop_result r;
    ASSERT_OK(vg_loop_run(t.env, &in, &r, E));
    ASSERT_STREQ(r.final_text, "waiting for approval");
    ASSERT_EQ(deploys, 0);
    /* The run's journal holds the policy decision. */
    char *replay = NULL;
    ASSERT_OK(vg_journal_replay(t.env->store, r.run_id, &replay, E));
    ASSERT_CONTAINS(replay, "approval-requested");
    vg_free(replay);
    vg_loop_result_release(&r);

    char *list = NULL;
    ASSERT_OK(vigil_approval_list(t.rt, id, "pending", &list, E));
    json_t *pending = json_loads(list, 0, NULL);
    vigil_free(list);
    ASSERT_EQ(json_array_size(pending), 1);
    const char *aid = json_string_value(json_object_get(json_array_get(pending, 0), "id"));
    ASSERT_OK(vigil_approval_resolve(t.rt, aid, 1, NULL, "go ahead", NULL, E));
    json_decref(pending);

    /* The next run (a new process here) learns of it first thing, and the operation runs. */
    test_rt_reopen(&t);
    struct vg_tool_executor *tools = NULL;
    vigil_tool_def def = {.name = "deploy", .description = "Deploy the release.",
                          .contract_json = "{\"risk\":\"high\",\"tool_class\":\"deploy\"}"};
    ASSERT_OK(vigil_tool_register(t.rt, &def, deploy, NULL, E));
    ASSERT_OK(vg_runtime_tools(t.rt, &tools, E));
    vg_tool_loop_executor(tools, &x);
    in.run_key = "r2";
    in.input = "status?";
    ASSERT_OK(vg_loop_run(t.env, &in, &r, E));
    ASSERT_EQ(deploys, 1);
    vg_loop_result_release(&r);
    json_t *msgs = NULL;
    ASSERT_OK(vg_message_latest(t.env, id, thread, 50, &msgs, E));
    int notes = 0;
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        json_t *msg = json_array_get(msgs, i);
        const char *c = json_string_value(json_object_get(msg, "content"));
        if (!strcmp(json_string_value(json_object_get(msg, "kind")), "system") && c &&
            strstr(c, "approved") && strstr(c, "deployed"))
            notes++;
    }
    ASSERT_EQ(notes, 1);
    json_decref(msgs);
    /* A third run does not run it again. */
    in.run_key = "r3";
    vg_model_free(m);
    m = scripted(&t, "approval3", "[{\"response\":{\"text\":\"ok\"}}]");
    in.model = m;
    ASSERT_OK(vg_loop_run(t.env, &in, &r, E));
    ASSERT_EQ(deploys, 1);
    vg_loop_result_release(&r);
    vg_model_free(m);
    test_rt_close(&t);
}

/* proves: S0-153 */
TEST(kill_switch_stops_before_the_next_model_call)
{
    struct test_rt t;
    char id[37], thread[128];
    struct vg_loop_executor x;
    setup(&t, "gate_kill", "{\"tools\":[\"deploy\"]}", id, thread, &x);
    struct vg_model *m = scripted(&t, "kill", "[{\"response\":{\"text\":\"never\"}}]");
    ASSERT_OK(vigil_kill_set(t.rt, NULL, NULL, 1, "incident", E));
    struct vg_loop_input in = {.agent_id = id, .thread_id = thread, .run_key = "k1",
                               .wake_reason = "user", .input = "hi", .model = m,
                               .executor = &x};
    struct vg_loop_result r;
    ASSERT_OK(vg_loop_run(t.env, &in, &r, E));
    ASSERT_EQ(r.end, VG_LOOP_HARD_STOPPED);
    ASSERT_STREQ(r.stop_reason, "killed");
    ASSERT_EQ(r.steps, 0);
    char *show = run_show(&t, r.run_id);
    ASSERT_CONTAINS(show, "interrupted");
    vg_free(show);
    vg_loop_result_release(&r);
    vg_model_free(m);
    test_rt_close(&t);
}

/* proves: S0-129 */
TEST(exhausted_budget_stops_the_run)
{
    struct test_rt t;
    char id[37], thread[128];
    struct vg_loop_executor x;
    setup(&t, "gate_budget", "{\"tools\":[\"set_report\"],\"budgets\":{\"tool_calls\":1}}", id, thread,
          &x);
    struct vg_model *m = scripted(
        &t, "budget",
        "[{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"set_report\",\"arguments\":"
        "{\"scope\":\"current\",\"markdown\":\"# ok\"}}]}},"
        "{\"response\":{\"text\":\"never reached\"}}]");
    struct vg_loop_input in = {.agent_id = id, .thread_id = thread, .run_key = "b1",
                               .wake_reason = "user", .input = "report", .model = m,
                               .executor = &x};
    struct vg_loop_result r;
    ASSERT_OK(vg_loop_run(t.env, &in, &r, E));
    ASSERT_EQ(r.end, VG_LOOP_HARD_STOPPED);
    ASSERT_CONTAINS(r.stop_reason, "budget_exceeded");
    ASSERT_EQ(r.steps, 1);
    /* The one step it had did its work through the gate. */
    json_t *rep = NULL;
    ASSERT_OK(vg_report_current(t.env, id, "current", &rep, E));
    ASSERT_STREQ(json_string_value(json_object_get(rep, "markdown")), "# ok");
    json_decref(rep);
    vg_loop_result_release(&r);
    vg_model_free(m);
    test_rt_close(&t);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s", vg_test_tmpdir("gate_cassettes"));
    RUN(approval_reaches_the_agent_and_runs_once);
    RUN(kill_switch_stops_before_the_next_model_call);
    RUN(exhausted_budget_stops_the_run);
    return 0;
}
