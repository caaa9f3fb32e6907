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
#include "os/ids.h"
#include "runtime/runtime.h"
#include "store/store.h"
#include "helpers/fault_vfs.h"
#include "helpers/tool_crash.h"
#include "tool/tool.h"

#include <limits.h>

static char dir[4096];
static int deploys;

static struct vg_model *scripted(struct test_rt *t, const char *name, const char *exchanges)
{
    char path[4200], text[8192];
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    snprintf(text, sizeof text, "{\"vigil_cassette\":1,\"exchanges\":%s}", exchanges);
    ASSERT_OK(vg_fs_write_file(path, text, strlen(text), E));
    struct vg_model_options o = {
        .provider = "scripted", .cassette = path, .clock = &t->clock.base, .max_retries = -1};
    struct vg_model *m = NULL;
    ASSERT_OK(vg_model_new(&o, &m, E));
    return m;
}

static vigil_code deploy(void *user, const vigil_tool_call_info *call, const char *args, char **out,
                         vigil_error *err)
{
    deploys++;
    *out = strdup("{\"deployed\":true}");
    return VIGIL_OK;
}

static void setup(struct test_rt *t, const char *name, const char *config, char id[37],
                  char thread[128], struct vg_loop_executor *x)
{
    test_rt_open(t, name);
    vigil_tool_def def = {.name = "deploy",
                          .description = "Deploy the release.",
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
    struct vg_loop_input in = {.agent_id = id,
                               .thread_id = thread,
                               .run_key = "r1",
                               .wake_reason = "user",
                               .input = "ship it",
                               .model = m,
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
    vigil_tool_def def = {.name = "deploy",
                          .description = "Deploy the release.",
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

/* Every file under folder (one level of subfolders) read into one text, to look for a call. */
static void read_folder(const char *folder, struct vg_buf *all)
{
    char cmd[8500];
    snprintf(cmd, sizeof cmd, "cat '%s'/*/* '%s'/* 2>/dev/null", folder, folder);
    FILE *f = popen(cmd, "r");
    ASSERT(f != NULL);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        vg_buf_append_slow(all, chunk, n);
    pclose(f);
}

/* Trial F12: the approved call that ran at the next run's start is a tool call of that run, with
 * its approval (who, why), in the run's tool calls, its journal and the journal's export. */
TEST(an_approved_call_that_ran_is_a_tool_call_of_its_run)
{
    struct test_rt t;
    char id[37], thread[128];
    struct vg_loop_executor x;
    deploys = 0;
    setup(&t, "gate_approved_view", "{\"tools\":[\"deploy\"]}", id, thread, &x);
    struct vg_model *m =
        scripted(&t, "approved_view",
                 "[{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"deploy\",\"arguments\":"
                 "{\"target\":\"prod\"}}]}},{\"response\":{\"text\":\"waiting\"}},"
                 "{\"response\":{\"text\":\"done\"}}]");
    struct vg_loop_input in = {.agent_id = id,
                               .thread_id = thread,
                               .run_key = "r1",
                               .wake_reason = "user",
                               .input = "ship it",
                               .model = m,
                               .executor = &x};
    struct vg_loop_result r;
    ASSERT_OK(vg_loop_run(t.env, &in, &r, E));
    vg_loop_result_release(&r);
    char *list = NULL;
    ASSERT_OK(vigil_approval_list(t.rt, id, "pending", &list, E));
    json_t *pending = json_loads(list, 0, NULL);
    vigil_free(list);
    const char *aid = json_string_value(json_object_get(json_array_get(pending, 0), "id"));
    ASSERT_OK(vigil_approval_resolve(t.rt, aid, 1, "alice", "ok go", NULL, E));
    in.run_key = "r2";
    in.input = "status?";
    ASSERT_OK(vg_loop_run(t.env, &in, &r, E));
    ASSERT_EQ(deploys, 1);
    char *tools = NULL, *replay = NULL;
    ASSERT_OK(vigil_run_tools(t.rt, r.run_id, NULL, 0, &tools, E));
    ASSERT_CONTAINS(tools, "\"name\":\"deploy\"");
    ASSERT_CONTAINS(tools, "\"status\":\"succeeded\"");
    ASSERT_CONTAINS(tools, "prod"); /* its input */
    ASSERT_OK(vg_journal_replay(t.env->store, r.run_id, &replay, E));
    ASSERT_CONTAINS(replay, "approval-granted");
    ASSERT_CONTAINS(replay, "approved by alice");
    ASSERT_CONTAINS(replay, "ok go");
    char out[4200];
    snprintf(out, sizeof out, "%.4000s/export_f12", dir);
    ASSERT_OK(vigil_journal_export(t.rt, id, out, NULL, E));
    struct vg_buf all;
    vg_buf_init(&all, 0);
    read_folder(out, &all);
    ASSERT_CONTAINS(all.data, "approved by alice");
    ASSERT_CONTAINS(all.data, "deployed");
    vg_buf_release(&all);
    vigil_free(tools);
    vg_free(replay);
    json_decref(pending);
    vg_loop_result_release(&r);
    vg_model_free(m);
    test_rt_close(&t);
}

/* Trial F13: answering a run's approval queues a wake of its agent, named in the answer, so the
 * approved call runs now rather than at whatever wakes the agent next; a repeat answer queues
 * nothing more. */
TEST(answering_an_approval_wakes_its_agent)
{
    struct test_rt t;
    char id[37], thread[128];
    struct vg_loop_executor x;
    setup(&t, "gate_approval_wake", "{\"tools\":[\"deploy\"]}", id, thread, &x);
    struct vg_model *m = scripted(
        &t, "approval_wake",
        "[{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"deploy\",\"arguments\":{}}]}},"
        "{\"response\":{\"text\":\"waiting\"}}]");
    struct vg_loop_input in = {.agent_id = id,
                               .thread_id = thread,
                               .run_key = "r1",
                               .wake_reason = "user",
                               .input = "ship it",
                               .model = m,
                               .executor = &x};
    struct vg_loop_result r;
    ASSERT_OK(vg_loop_run(t.env, &in, &r, E));
    vg_loop_result_release(&r);
    char *list = NULL, *answer = NULL;
    ASSERT_OK(vigil_approval_list(t.rt, id, "pending", &list, E));
    json_t *pending = json_loads(list, 0, NULL);
    vigil_free(list);
    const char *aid = json_string_value(json_object_get(json_array_get(pending, 0), "id"));
    ASSERT_OK(vigil_approval_resolve(t.rt, aid, 1, NULL, NULL, &answer, E));
    json_t *a = json_loads(answer, 0, NULL);
    const char *key = json_string_value(json_object_get(a, "wake_run_key"));
    ASSERT(key && strlen(key) == 64);
    json_t *wake = NULL;
    ASSERT_OK(vg_env_get_json(t.env, "wake_run", key, &wake, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(wake, "agent_id")), id);
    ASSERT_STREQ(json_string_value(json_object_get(wake, "status")), "queued");
    vigil_free(answer);
    ASSERT_OK(vigil_approval_resolve(t.rt, aid, 1, NULL, NULL, &answer, E));
    ASSERT(!strstr(answer, "wake_run_key"));
    vigil_free(answer);
    json_decref(wake);
    json_decref(a);
    json_decref(pending);
    vg_model_free(m);
    test_rt_close(&t);
}

/* proves: S0-153 */
/* A tool whose approval shows its own preview: the preview is a dry run the gate rolls back
 * inside the transaction the loop left open for the call's start, and that rollback loses only
 * the dry run's level, not the turn and the start: the approval is requested, the run goes on. */
static vigil_code deploy_with_preview(void *user, const vigil_tool_call_info *call,
                                      const char *args, char **out, vigil_error *err)
{
    (void)user, (void)args, (void)err;
    if (!call->preview_only)
        deploys++;
    *out = strdup(call->preview_only ? "{\"would_deploy\":\"v2\"}" : "{\"deployed\":true}");
    return VIGIL_OK;
}

TEST(an_approval_with_the_tools_own_preview_is_requested_from_the_loop)
{
    struct test_rt t;
    char id[37], thread[128];
    struct vg_loop_executor x;
    deploys = 0;
    setup(&t, "gate_preview", "{\"tools\":[\"deploy_preview\"]}", id, thread, &x);
    vigil_tool_def def = {.name = "deploy_preview",
                          .description = "Deploy the release, previewed.",
                          .contract_json = "{\"risk\":\"high\",\"preview\":true,"
                                           "\"tool_class\":\"deploy\"}"};
    ASSERT_OK(vigil_tool_register(t.rt, &def, deploy_with_preview, NULL, E));
    struct vg_tool_executor *tools = NULL;
    ASSERT_OK(vg_runtime_tools(t.rt, &tools, E));
    vg_tool_loop_executor(tools, &x);
    struct vg_model *m = scripted(&t, "preview",
                                  "[{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":"
                                  "\"deploy_preview\",\"arguments\":{}}]}},"
                                  "{\"response\":{\"text\":\"waiting for approval\"}}]");
    struct vg_loop_input in = {.agent_id = id,
                               .thread_id = thread,
                               .run_key = "r1",
                               .wake_reason = "user",
                               .input = "ship it",
                               .model = m,
                               .executor = &x};
    struct vg_loop_result r;
    ASSERT_OK(vg_loop_run(t.env, &in, &r, E));
    ASSERT_STREQ(r.final_text, "waiting for approval");
    ASSERT_EQ(deploys, 0);
    vg_loop_result_release(&r);
    char *list = NULL;
    ASSERT_OK(vigil_approval_list(t.rt, id, "pending", &list, E));
    ASSERT_CONTAINS(list, "would_deploy");
    vigil_free(list);
    vg_model_free(m);
    test_rt_close(&t);
}

TEST(kill_switch_stops_before_the_next_model_call)
{
    struct test_rt t;
    char id[37], thread[128];
    struct vg_loop_executor x;
    setup(&t, "gate_kill", "{\"tools\":[\"deploy\"]}", id, thread, &x);
    struct vg_model *m = scripted(&t, "kill", "[{\"response\":{\"text\":\"never\"}}]");
    ASSERT_OK(vigil_kill_set(t.rt, NULL, NULL, 1, "incident", E));
    struct vg_loop_input in = {.agent_id = id,
                               .thread_id = thread,
                               .run_key = "k1",
                               .wake_reason = "user",
                               .input = "hi",
                               .model = m,
                               .executor = &x};
    struct vg_loop_result r;
    ASSERT_OK(vg_loop_run(t.env, &in, &r, E));
    ASSERT_EQ(r.end, VG_LOOP_HARD_STOPPED);
    ASSERT_STREQ(r.stop_reason, "killed");
    ASSERT_EQ(r.steps, 0);
    char *show = run_show(&t, r.run_id);
    ASSERT_CONTAINS(show, "interrupted");
    ASSERT_CONTAINS(show, "stopped by a kill switch"); /* the record says what stopped it */
    vg_free(show);
    vg_loop_result_release(&r);
    vg_model_free(m);
    test_rt_close(&t);
}

/* A kill switch or a budget changed by another connection (another process: the CLI, a daemon,
 * another run) while a turn runs: the turn's next call is refused, and the run stops before its
 * next model call. The gate's reads are served from what this connection kept (the switch read
 * as absent, the budget's usage) only while nothing was committed since, so neither check may
 * miss the change. The turn asks for two ops_write calls; the first one's effect makes the
 * change through another connection. */
static struct test_rt *mid_rt;
static const char *mid_agent;
static vigil_code (*mid_turn_change)(vigil_error *err);
static int ops_writes;

static vigil_code kill_elsewhere(vigil_error *err)
{
    struct vg_store *other = vg_test_store_open(mid_rt->path, 60000);
    struct vg_record rec = {.kind = "kill_switch",
                            .id = "global",
                            .owner = "",
                            .k1 = "on",
                            .k2 = "",
                            .body = "{\"id\":\"global\",\"on\":true,\"reason\":\"incident\"}"};
    vigil_code rc = other ? vg_store_put(other, &rec, 0, NULL, err) : VIGIL_EIO;
    vg_store_close(other);
    return rc;
}

static vigil_code spend_elsewhere(vigil_error *err)
{
    vigil_runtime_options o = {.size = sizeof o, .store_uri = mid_rt->path};
    vigil_runtime *other = NULL;
    struct vg_budget_charge spend = {{0}};
    spend.v[VG_BUDGET_TOOL_CALLS] = 10;
    vigil_code rc = vg_runtime_open_with(&o, &mid_rt->clock.base,
                                         vg_ids_seeded(&mid_rt->clock.base, 99), &other, err);
    if (!rc)
        rc = vg_budget_charge(vg_runtime_env(other), mid_agent, &spend, err);
    vigil_runtime_close(other);
    return rc;
}

static vigil_code ops_write(void *user, const vigil_tool_call_info *call, const char *args,
                            char **out, vigil_error *err)
{
    (void)user, (void)call, (void)args;
    vigil_code rc;
    if (ops_writes++ == 0 && (rc = mid_turn_change(err)))
        return rc;
    *out = strdup("{\"written\":true}");
    return VIGIL_OK;
}

static void run_two_writes(struct test_rt *t, const char *name, const char *config,
                           vigil_code (*change)(vigil_error *err), struct vg_loop_result *r)
{
    char id[37], thread[128];
    struct vg_loop_executor x;
    ops_writes = 0;
    setup(t, name, config, id, thread, &x);
    mid_rt = t;
    mid_agent = id;
    mid_turn_change = change;
    vigil_tool_def def = {.name = "ops_write",
                          .description = "Write to the ops log.",
                          .contract_json = "{\"mutating\":true,\"risk\":\"low\","
                                           "\"tool_class\":\"ops\"}"};
    ASSERT_OK(vigil_tool_register(t->rt, &def, ops_write, NULL, E));
    struct vg_tool_executor *tools = NULL;
    ASSERT_OK(vg_runtime_tools(t->rt, &tools, E));
    vg_tool_loop_executor(tools, &x);
    struct vg_model *m =
        scripted(t, name,
                 "[{\"response\":{\"tool_calls\":["
                 "{\"id\":\"c1\",\"name\":\"ops_write\",\"arguments\":{\"n\":1}},"
                 "{\"id\":\"c2\",\"name\":\"ops_write\",\"arguments\":{\"n\":2}}]}},"
                 "{\"response\":{\"text\":\"never\"}}]");
    struct vg_loop_input in = {.agent_id = id,
                               .thread_id = thread,
                               .run_key = name,
                               .wake_reason = "user",
                               .input = "write twice",
                               .model = m,
                               .executor = &x};
    ASSERT_OK(vg_loop_run(t->env, &in, r, E));
    vg_model_free(m);
    ASSERT_EQ(ops_writes, 1);
    ASSERT_EQ(r->end, VG_LOOP_HARD_STOPPED);
    ASSERT_EQ(r->steps, 1);
}

TEST(a_kill_switch_another_connection_sets_mid_turn_stops_the_next_call_and_the_run)
{
    struct test_rt t;
    struct vg_loop_result r;
    run_two_writes(&t, "gate_kill_mid_turn", "{\"tools\":[\"ops_write\"]}", kill_elsewhere, &r);
    ASSERT_STREQ(r.stop_reason, "killed");
    char *replay = NULL;
    ASSERT_OK(vg_journal_replay(t.env->store, r.run_id, &replay, E));
    ASSERT_CONTAINS(replay, "kill-switch-refusal");
    vg_free(replay);
    vg_loop_result_release(&r);
    test_rt_close(&t);
}

/* proves: S0-129 */
TEST(a_budget_another_connection_spends_mid_turn_stops_the_next_call_and_the_run)
{
    struct test_rt t;
    struct vg_loop_result r;
    run_two_writes(&t, "gate_budget_mid_turn",
                   "{\"tools\":[\"ops_write\"],\"budgets\":{\"tool_calls\":5}}", spend_elsewhere,
                   &r);
    ASSERT_CONTAINS(r.stop_reason, "budget_exceeded");
    char *show = run_show(&t, r.run_id);
    ASSERT_CONTAINS(show, "budget is spent");
    vg_free(show);
    vg_loop_result_release(&r);
    test_rt_close(&t);
}

/* proves: S0-129 */
TEST(exhausted_budget_stops_the_run)
{
    struct test_rt t;
    char id[37], thread[128];
    struct vg_loop_executor x;
    setup(&t, "gate_budget", "{\"tools\":[\"set_report\"],\"budgets\":{\"tool_calls\":1}}", id,
          thread, &x);
    struct vg_model *m = scripted(
        &t, "budget",
        "[{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"set_report\",\"arguments\":"
        "{\"scope\":\"current\",\"markdown\":\"# ok\"}}]}},"
        "{\"response\":{\"text\":\"never reached\"}}]");
    struct vg_loop_input in = {.agent_id = id,
                               .thread_id = thread,
                               .run_key = "b1",
                               .wake_reason = "user",
                               .input = "report",
                               .model = m,
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

/* ---- a step's budget charges ------------------------------------------------------------ */

static vigil_code add(void *user, const vigil_tool_call_info *call, const char *args, char **out,
                      vigil_error *err)
{
    (void)user, (void)call, (void)args, (void)err;
    *out = strdup("{\"sum\":3}");
    return VIGIL_OK;
}

static int usage_rev_cb(void *user, const struct vg_record *r)
{
    *(int64_t *)user = r->rev;
    return 1;
}

/* One run of `exchanges` by an agent with `config` allowed the `add` tool (registered with
 * `contract`): the run's end, and today's budget usage and its record's revision (the writes
 * of it: 1 after the first). */
static enum vg_loop_end charged_run(const char *name, const char *config, const char *contract,
                                    const char *exchanges, json_t **usage, int64_t *writes)
{
    struct test_rt t;
    char id[37], thread[128];
    struct vg_loop_executor x;
    test_rt_open(&t, name);
    vigil_tool_def def = {.name = "add", .description = "Add.", .contract_json = contract};
    ASSERT_OK(vigil_tool_register(t.rt, &def, add, NULL, E));
    vigil_agent_spec spec = {.name = "charged", .config_json = config};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, id, E));
    snprintf(thread, sizeof thread, "%s:session:default", id);
    struct vg_tool_executor *tools = NULL;
    ASSERT_OK(vg_runtime_tools(t.rt, &tools, E));
    vg_tool_loop_executor(tools, &x);
    struct vg_model *m = scripted(&t, name, exchanges);
    struct vg_loop_input in = {.agent_id = id,
                               .thread_id = thread,
                               .run_key = name,
                               .wake_reason = "user",
                               .input = "add",
                               .model = m,
                               .executor = &x};
    struct vg_loop_result r;
    ASSERT_OK(vg_loop_run(t.env, &in, &r, E));
    enum vg_loop_end end = r.end;
    ASSERT_OK(vg_budget_usage(t.env, id, usage, E));
    struct vg_query q = {.kind = "budget_usage", .owner = id};
    *writes = 0;
    ASSERT_OK(vg_store_scan(t.env->store, &q, usage_rev_cb, writes, E));
    vg_loop_result_release(&r);
    vg_model_free(m);
    test_rt_close(&t);
    return end;
}

static int64_t used(const json_t *usage, const char *kind)
{
    return json_integer_value(json_object_get(usage, kind));
}

#define ADD_CALL(ID, A, TOKENS)                                                                    \
    "{\"response\":{\"tool_calls\":[{\"id\":\"" ID "\",\"name\":\"add\",\"arguments\":{\"a\":" A   \
    ",\"b\":2}}],\"usage\":{\"input_tokens\":" TOKENS ",\"output_tokens\":1}}}"

/* A tool step's model call (its tokens, one step) and its tool call (one tool call) are each
 * counted once, and written together: one write of the day's usage per model call, for a
 * read-only tool and a mutating one alike (two writes a tool step when the loop and the gate
 * wrote apart). */
TEST(a_tool_steps_turn_and_call_are_charged_once_in_one_write)
{
    static const char *const contracts[] = {"{\"mutating\":false,\"idempotency\":\"idempotent\"}",
                                            "{\"tool_class\":\"math\"}"};
    for (size_t i = 0; i < VG_ARRAY_LEN(contracts); i++) {
        json_t *usage = NULL;
        int64_t writes = 0;
        enum vg_loop_end end = charged_run(
            i ? "charge_once_mutating" : "charge_once", "{\"tools\":[\"add\"]}", contracts[i],
            "[" ADD_CALL("c1", "1", "100") "," ADD_CALL(
                "c2", "2",
                "200") ","
                       "{\"response\":{\"text\":\"3 and 4\",\"usage\":{\"input_tokens\":300,"
                       "\"output_tokens\":1}}}]",
            &usage, &writes);
        ASSERT_EQ(end, VG_LOOP_COMPLETED);
        ASSERT_EQ(used(usage, "tokens"), 603);
        ASSERT_EQ(used(usage, "steps"), 3);
        ASSERT_EQ(used(usage, "tool_calls"), 2);
        ASSERT_EQ(writes, 3);
        json_decref(usage);
    }
}

/* A first call the gate refuses (an unknown tool) never starts: the turn's charge is still
 * written, once. */
TEST(a_refused_first_call_still_charges_its_turn_once)
{
    json_t *usage = NULL;
    int64_t writes = 0;
    enum vg_loop_end end = charged_run(
        "charge_refused", "{\"tools\":[\"add\"]}", NULL,
        "[{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"nope\",\"arguments\":"
        "{\"a\":1}}],\"usage\":{\"input_tokens\":100,\"output_tokens\":1}}},"
        "{\"response\":{\"tool_calls\":[{\"id\":\"c2\",\"name\":\"nope\",\"arguments\":{}}],"
        "\"usage\":{\"input_tokens\":200,\"output_tokens\":1}}},"
        "{\"response\":{\"text\":\"gave up\",\"usage\":{\"input_tokens\":300,"
        "\"output_tokens\":1}}}]",
        &usage, &writes);
    ASSERT_EQ(end, VG_LOOP_COMPLETED);
    ASSERT_EQ(used(usage, "tokens"), 603);
    ASSERT_EQ(used(usage, "steps"), 3);
    ASSERT_EQ(used(usage, "tool_calls"), 0);
    ASSERT_EQ(writes, 3);
    json_decref(usage);
}

/* The turn's own tokens, not yet written when its first call passes the gate, count there: a
 * turn that uses up the day's tokens has its call refused. */
TEST(a_turn_that_uses_up_the_tokens_has_its_call_refused)
{
    json_t *usage = NULL;
    int64_t writes = 0;
    enum vg_loop_end end = charged_run(
        "charge_exhausts", "{\"tools\":[\"add\"],\"budgets\":{\"tokens\":150}}", NULL,
        "[" ADD_CALL("c1", "1", "200") ",{\"response\":{\"text\":\"never\"}}]", &usage, &writes);
    ASSERT_EQ(end, VG_LOOP_HARD_STOPPED);
    ASSERT_EQ(used(usage, "tokens"), 201);
    ASSERT_EQ(used(usage, "steps"), 1);
    ASSERT_EQ(used(usage, "tool_calls"), 0); /* refused: never ran */
    json_decref(usage);
}

/* The log syncs of a run through the gated executor, and what its tool saw at its effect. */
static struct {
    struct vg_env *env;
    long syncs_at_last_commit;
    int last_commit_synced; /* the newest commit synced the log: everything before is durable */
    int effects;
    int synced_at_effect;  /* at the effect, everything committed was durable */
    int started_at_effect; /* and the call's operation was recorded as started */
    int commits;           /* transactions committed during the run */
} seen;

static void on_commit(void *user, int committed)
{
    long n = vg_sqlite_fault_vfs_count(); /* the durable commit's sync happens inside it */
    if (committed) {
        seen.last_commit_synced = n > seen.syncs_at_last_commit;
        seen.commits += vg_store_tx_wrote(seen.env->store);
    }
    seen.syncs_at_last_commit = n;
}

static vigil_code note(void *user, const vigil_tool_call_info *call, const char *args, char **out,
                       vigil_error *err)
{
    json_t *op = NULL;
    int64_t rev = 0;
    seen.effects++;
    seen.synced_at_effect = seen.last_commit_synced;
    if (vg_env_get_json(seen.env, "operation", call->operation_id, &op, &rev, NULL) == VIGIL_OK)
        seen.started_at_effect =
            !strcmp(json_string_value(json_object_get(op, "status")), "started");
    json_decref(op);
    *out = strdup("{\"noted\":true}");
    return VIGIL_OK;
}

/* `note` registered with its contract, one call of `tool`, then a final answer: the log syncs
 * counted. */
static long syncs_of_a_tool_step(const char *name, const char *contract, const char *tool)
{
    struct test_rt t;
    char id[37], thread[128], exchanges[512];
    struct vg_loop_executor x;
    ASSERT_OK(vg_sqlite_fault_vfs_install(E)); /* passes everything through; counts when armed */
    test_rt_open(&t, name);
    vigil_tool_def def = {.name = "note", .description = "Note a text.", .contract_json = contract};
    ASSERT_OK(vigil_tool_register(t.rt, &def, note, NULL, E));
    vigil_agent_spec spec = {.name = "syncs", .config_json = "{\"tools\":[\"note\"]}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, id, E));
    snprintf(thread, sizeof thread, "%s:session:default", id);
    struct vg_tool_executor *tools = NULL;
    ASSERT_OK(vg_runtime_tools(t.rt, &tools, E));
    vg_tool_loop_executor(tools, &x);
    snprintf(exchanges, sizeof exchanges,
             "[{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"%s\",\"arguments\":{}}]}},"
             "{\"response\":{\"text\":\"done\"}}]",
             tool);
    struct vg_model *m = scripted(&t, name, exchanges);
    struct vg_loop_input in = {.agent_id = id,
                               .thread_id = thread,
                               .run_key = name,
                               .wake_reason = "user",
                               .input = "note it",
                               .model = m,
                               .executor = &x};
    struct vg_loop_result r;
    memset(&seen, 0, sizeof seen);
    seen.env = t.env;
    vg_store_set_tx_hook(t.env->store, on_commit, NULL);
    vg_sqlite_fault_vfs_arm(LONG_MAX, VG_FAULT_SYNC, VIGIL_EIO, 0);
    ASSERT_OK(vg_loop_run(t.env, &in, &r, E));
    long syncs = vg_sqlite_fault_vfs_count();
    vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
    vg_store_set_tx_hook(t.env->store, NULL, NULL);
    ASSERT_EQ(r.end, VG_LOOP_COMPLETED);
    ASSERT_EQ(r.tool_calls, 1);
    ASSERT(vg_store_durable(t.env->store)); /* the run leaves commits durable */
    vg_loop_result_release(&r);
    vg_model_free(m);
    test_rt_close(&t);
    return syncs;
}

/* A mutating tool's step syncs the log once: the commit that records its started operation,
 * just before the effect, is durable and carries everything before it (the model's turn); the
 * saga's journal_done and the result ride the close; the run's start rides the barrier. A run
 * of one call so syncs twice, once per model call (that barrier, the close); it took three while
 * the start synced apart, six when the loop made its own barrier before the call and the
 * executor's commits after it (its start, the saga, the result) were durable too. */
TEST(a_mutating_tool_step_syncs_once_with_its_started_operation_durable)
{
    long syncs = syncs_of_a_tool_step("syncs_mutating", NULL, "note");
    ASSERT_EQ(seen.effects, 1);
    ASSERT(seen.synced_at_effect);
    ASSERT(seen.started_at_effect);
    ASSERT_EQ(syncs, 2);
}

/* A tool step is two commits. Its start is one: the loop leaves the turn's transaction (the
 * budget charge, the assistant message, the journal's start of the call) open for the
 * executor, whose started operation joins it and commits it durably as the barrier before the
 * effect. Its end is one: the executor leaves its finishing transaction (the result, the
 * finished operation, the saga's agent_done) to the loop, whose journal record of the call's
 * end joins it. Six commits for a run of one call: its start, the turn with the call's start,
 * the saga's record of the effect, the call's end, the final turn, the close; seven when the
 * turn committed before the executor's barrier, eight when the executor also committed its
 * result alone. (The saga's record was always a commit of its own, a single statement; it is a
 * transaction since it checks the operation's row, so the count sees it: saga_effect_done.) */
TEST(a_tool_step_is_two_commits)
{
    long syncs = syncs_of_a_tool_step("commits_mutating", NULL, "note");
    ASSERT_EQ(seen.effects, 1);
    ASSERT(seen.synced_at_effect);
    ASSERT(seen.started_at_effect);
    ASSERT_EQ(seen.commits, 6);
    ASSERT_EQ(syncs, 2);
}

/* A tool that changes nothing (bench_peer's `add`) gets the same one barrier before it runs:
 * what it reads may leave the process. It took five syncs, then three. */
TEST(a_read_only_tool_step_syncs_once)
{
    long syncs = syncs_of_a_tool_step(
        "syncs_read_only", "{\"mutating\":false,\"idempotency\":\"idempotent\"}", "note");
    ASSERT_EQ(seen.effects, 1);
    ASSERT(seen.synced_at_effect);
    ASSERT_EQ(syncs, 2);
}

/* A call the gate refuses has no effect to fence: only the close syncs (two while the start
 * synced apart, four before: the loop's barrier and the refusal's commit). */
TEST(a_refused_tool_step_does_not_sync)
{
    long syncs = syncs_of_a_tool_step("syncs_refused", NULL, "nope"); /* no such tool */
    ASSERT_EQ(seen.effects, 0);
    ASSERT_EQ(syncs, 1);
}

/* A reconcilable tool whose lookup notes whether a write transaction was open when asked. */
static struct {
    struct vg_env *env;
    int effects, lookups, lookup_in_tx, finds;
} ship;

static vigil_code ship_effect(void *user, const vigil_tool_call_info *call, const char *args,
                              char **out, vigil_error *err)
{
    ship.effects++;
    *out = strdup("{\"shipped\":true}");
    return VIGIL_OK;
}

static vigil_code ship_lookup(void *user, const vigil_tool_call_info *call, int *found, char **out,
                              vigil_error *err)
{
    ship.lookups++;
    ship.lookup_in_tx = vg_store_in_tx(ship.env->store);
    *found = ship.finds;
    *out = ship.finds ? strdup("{\"shipped\":true}") : NULL;
    return VIGIL_OK;
}

/* A call a crash left started is settled by the tool's lookup when its run goes on. The lookup
 * asks the outside world (an MCP server, a command) and may take long: the loop's transaction
 * left open for the call's start is committed before it, so no write transaction (SQLite's one
 * writer, on PostgreSQL the lease row) is held while it answers. It was held. */
static void a_crashed_call_looked_up(const char *name, int finds)
{
    struct test_rt t;
    char id[37], thread[128];
    struct vg_loop_executor x;
    test_rt_open(&t, name);
    memset(&ship, 0, sizeof ship);
    ship.env = t.env;
    ship.finds = finds;
    vigil_tool_def def = {.name = "ship",
                          .description = "Ship the order.",
                          .contract_json = "{\"idempotency\":\"reconcilable\"}",
                          .lookup = ship_lookup};
    ASSERT_OK(vigil_tool_register(t.rt, &def, ship_effect, NULL, E));
    vigil_agent_spec spec = {.name = "shipper", .config_json = "{\"tools\":[\"ship\"]}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, id, E));
    snprintf(thread, sizeof thread, "%s:session:default", id);
    struct vg_tool_executor *tools = NULL;
    ASSERT_OK(vg_runtime_tools(t.rt, &tools, E));
    vg_tool_loop_executor(tools, &x);
    /* The crashed run's call, the run going on (the same call, replayed), its answer. */
    struct vg_model *m = scripted(
        &t, name,
        "[{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"ship\",\"arguments\":{}}]}},"
        "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"ship\",\"arguments\":{}}]}},"
        "{\"response\":{\"text\":\"done\"}}]");
    struct vg_loop_input in = {.agent_id = id,
                               .thread_id = thread,
                               .run_key = name,
                               .wake_reason = "user",
                               .input = "ship it",
                               .model = m,
                               .executor = &x};
    struct vg_loop_result r;
    vg_tool_executor_test_crash(tools, VG_CRASH_AFTER_EFFECT);
    vigil_error crashed = {0};
    ASSERT(vg_loop_run(t.env, &in, &r, &crashed) != VIGIL_OK);
    vg_loop_result_release(&r);
    vg_tool_executor_test_crash(tools, VG_CRASH_NONE);
    ASSERT_EQ(ship.effects, 1);
    ASSERT_OK(vg_loop_run(t.env, &in, &r, E));
    ASSERT_EQ(r.end, VG_LOOP_COMPLETED);
    ASSERT_EQ(ship.lookups, 1);
    ASSERT_EQ(ship.lookup_in_tx, 0);
    /* Found: settled by the lookup, not run again. Not found: the effect never happened, and
     * the call runs now, its start its own barrier (the caller's was committed). */
    ASSERT_EQ(ship.effects, finds ? 1 : 2);
    vg_loop_result_release(&r);
    vg_model_free(m);
    test_rt_close(&t);
}

TEST(a_recovery_lookup_runs_outside_the_loops_transaction)
{
    a_crashed_call_looked_up("lookup_outside_tx", 1);
    a_crashed_call_looked_up("lookup_outside_tx_empty", 0);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s", vg_test_tmpdir("gate_cassettes"));
    RUN(approval_reaches_the_agent_and_runs_once);
    RUN(an_approval_with_the_tools_own_preview_is_requested_from_the_loop);
    RUN(an_approved_call_that_ran_is_a_tool_call_of_its_run);
    RUN(answering_an_approval_wakes_its_agent);
    RUN(kill_switch_stops_before_the_next_model_call);
    RUN(a_kill_switch_another_connection_sets_mid_turn_stops_the_next_call_and_the_run);
    RUN(a_budget_another_connection_spends_mid_turn_stops_the_next_call_and_the_run);
    RUN(exhausted_budget_stops_the_run);
    RUN(a_tool_steps_turn_and_call_are_charged_once_in_one_write);
    RUN(a_refused_first_call_still_charges_its_turn_once);
    RUN(a_turn_that_uses_up_the_tokens_has_its_call_refused);
    RUN(a_mutating_tool_step_syncs_once_with_its_started_operation_durable);
    RUN(a_read_only_tool_step_syncs_once);
    RUN(a_tool_step_is_two_commits);
    RUN(a_refused_tool_step_does_not_sync);
    RUN(a_recovery_lookup_runs_outside_the_loops_transaction);
    return 0;
}
