/*
 * test_runctl.c: a person's controls over one run: cancel a queued run (it never starts), cancel
 * a running one (it stops at its next safe point, between model calls, and is not run again),
 * and re-run a run with an override (a new run, linked to the old, its input the override).
 */
#include "helpers/rt.h"

#include "agent/agent.h"
#include "orch/orch.h"
#include "orch/task.h"
#include "os/fs.h"
#include "runtime/wake_runner.h"
#include "wake/wake.h"

static vigil_runtime *g_rt;
static int g_presses; /* press_cancel's calls */

/* A tool whose call is a person pressing "cancel" on the run making it. */
static vigil_code press_cancel(void *user, const vigil_tool_call_info *call, const char *args_json,
                               char **out, vigil_error *err)
{
    int queued = 1;
    g_presses++;
    vigil_code rc = vigil_run_cancel(g_rt, call->run_key, "tester", &queued, err);
    *out = strdup(queued ? "{\"result\":\"queued?\"}" : "{\"result\":\"requested\"}");
    return rc ? rc : (*out ? VIGIL_OK : VIGIL_ENOMEM);
}

static void open_with(struct test_rt *t, const char *name, const char *exchanges)
{
    char path[4300], text[4096], dir[200];
    snprintf(dir, sizeof dir, "%s_cassette", name);
    snprintf(path, sizeof path, "%s/c.json", vg_test_tmpdir(dir));
    snprintf(text, sizeof text, "{\"vigil_cassette\":1,\"exchanges\":[%s]}", exchanges);
    ASSERT_OK(vg_fs_write_file(path, text, strlen(text), E));
    setenv("VIGIL_MODEL_CASSETTE", path, 1);
    test_rt_open(t, name);
    g_rt = t->rt;
    vigil_tool_def d = {.name = "press_cancel",
                        .description = "Cancel this run.",
                        .input_schema_json = "{\"type\":\"object\"}"};
    ASSERT_OK(vigil_tool_register(t->rt, &d, press_cancel, NULL, E));
}

/* A store whose one agent `a` presses cancel on its own run, then would answer (never asked). */
static void open_pressing_cancel(struct test_rt *t, const char *name, char a[37])
{
    open_with(t, name,
              "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"press_cancel\","
              "\"arguments\":\"{}\"}],\"stop_reason\":\"tool_use\"}},"
              "{\"response\":{\"text\":\"this answer must never be asked for\"}}");
    vigil_agent_spec s = {.name = "a", .config_json = "{\"tools\":[\"press_cancel\"]}"};
    ASSERT_OK(vigil_agent_create(t->rt, &s, a, E));
}

static void wake(struct vg_wake *w, const char *agent, const char *turn, char key[65])
{
    enum vg_enqueue_result res;
    json_t *seed = json_string("do it");
    struct vg_wake_req r = {.reason = VG_REASON_USER,
                            .agent_id = agent,
                            .session_id = "s",
                            .turn_id = turn,
                            .seed_input = seed};
    ASSERT_OK(vg_wake_enqueue(w, &r, key, &res, E));
    json_decref(seed);
}

static const char *wake_status(struct test_rt *t, const char *key)
{
    static char st[32];
    json_t *r = NULL;
    ASSERT_OK(vg_env_get_json(t->env, "wake_run", key, &r, NULL, E));
    snprintf(st, sizeof st, "%s", json_string_value(json_object_get(r, "status")));
    json_decref(r);
    return st;
}

TEST(a_cancelled_queued_run_never_starts_and_a_running_one_stops_at_its_next_safe_point)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], k1[65], k2[65];
    open_pressing_cancel(&t, "runctl_cancel", a);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    wake(&w, a, "t1", k1);
    int queued = 0, ran = 0;
    ASSERT_OK(vigil_run_cancel(t.rt, k1, NULL, &queued, E));
    ASSERT_EQ(queued, 1);
    ASSERT_STREQ(wake_status(&t, k1), "cancelled");
    ASSERT_CODE(VIGIL_ESTATE, vigil_run_cancel(t.rt, k1, NULL, NULL, NULL));
    /* The running one cancels itself through its tool: the next model call never happens. */
    wake(&w, a, "t2", k2);
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 0, &ran, E));
    ASSERT_EQ(ran, 1);
    /* Ended, not queued again, and the wake log says so, not `completed` (trial C13). */
    ASSERT_STREQ(wake_status(&t, k2), "cancelled");
    json_t *msgs = NULL;
    char thread[120];
    snprintf(thread, sizeof thread, "%s:session:s", a);
    ASSERT_OK(vg_message_latest(t.env, a, thread, 50, &msgs, E));
    char *dump = json_dumps(msgs, 0);
    ASSERT(!strstr(dump, "must never"));
    ASSERT_CONTAINS(dump, "requested");
    free(dump);
    json_decref(msgs);
    char *runs = NULL;
    ASSERT_OK(vigil_runs_list(t.rt, a, NULL, NULL, 10, &runs, E));
    ASSERT_CONTAINS(runs, "cancel");
    vigil_free(runs);
    /* Who pressed it (runs cancel --by) is in the run's error and in the wake log's. */
    ASSERT_OK(vigil_run_show(t.rt, k2, &runs, E));
    ASSERT_CONTAINS(runs, "\"status\":\"canceled\"");
    ASSERT_CONTAINS(runs, "canceled by tester");
    vigil_free(runs);
    json_t *wr = NULL;
    ASSERT_OK(vg_env_get_json(t.env, "wake_run", k2, &wr, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(wr, "error")), "cancelled by tester");
    json_decref(wr);
    ASSERT_CODE(VIGIL_ENOTFOUND, vigil_run_cancel(t.rt, "no-such-run", NULL, NULL, NULL));
    vg_wake_release(&w);
    test_rt_close(&t);
}

TEST(a_rerun_with_an_override_is_a_new_run_linked_to_the_old)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], k1[65], k2[65], k3[65];
    open_with(&t, "runctl_rerun",
              "{\"response\":{\"text\":\"first\"}},{\"response\":{\"text\":\"second\"}}");
    vigil_agent_spec s = {.name = "a"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, a, E));
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    wake(&w, a, "t1", k1);
    int ran = 0;
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 0, &ran, E));
    ASSERT_OK(vigil_run_rerun(t.rt, k1, "do it differently", k2, E));
    ASSERT(strcmp(k1, k2) != 0);
    ASSERT_OK(vigil_run_rerun(t.rt, k1, NULL, k3, E));
    ASSERT(strcmp(k3, k2) != 0); /* each re-run its own key */
    json_t *r = NULL;
    ASSERT_OK(vg_env_get_json(t.env, "wake_run", k2, &r, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(json_object_get(r, "meta"), "rerun_of")), k1);
    ASSERT_STREQ(json_string_value(json_object_get(r, "seed_input")), "do it differently");
    json_decref(r);
    ASSERT_OK(vg_env_get_json(t.env, "wake_run", k3, &r, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(r, "seed_input")), "do it");
    json_decref(r);
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_STREQ(wake_status(&t, k2), "completed");
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* The model a run's list item names (runs list, newest first), by its run key. */
static const char *model_of(struct test_rt *t, const char *agent, const char *key, char *out,
                            size_t n)
{
    char *runs = NULL;
    ASSERT_OK(vigil_runs_list(t->rt, agent, NULL, NULL, 10, &runs, E));
    json_t *v = json_loads(runs, 0, NULL), *items = json_object_get(v, "items");
    snprintf(out, n, "(no run %.16s)", key);
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *it = json_array_get(items, i);
        if (!strcmp(json_string_value(json_object_get(it, "run_key")), key))
            snprintf(out, n, "%s", json_string_value(json_object_get(it, "model")));
    }
    json_decref(v);
    vigil_free(runs);
    return out;
}

/* A re-run may name its model and narrow its tools (issue 31: an explicit override of the
 * model or the tool allowlist): its run calls that model, and a tool the override leaves out is
 * refused at the gate although the agent's manifest allows it. */
TEST(a_rerun_may_name_its_model_and_narrow_its_tools)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], k1[65], k2[65], model[64];
    int ran = 0;
    open_with(&t, "runctl_override",
              "{\"response\":{\"text\":\"first\"}},"
              "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"press_cancel\","
              "\"arguments\":\"{}\"}],\"stop_reason\":\"tool_use\"}},"
              "{\"response\":{\"text\":\"done without it\"}}");
    vigil_agent_spec s = {.name = "a",
                          .config_json = "{\"tools\":[\"press_cancel\",\"memory_*\"]}"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, a, E));
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    wake(&w, a, "t1", k1);
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 0, &ran, E));
    const char *tools[] = {"memory_*"};
    vigil_run_override o = {.model = "other-model", .tools = tools, .n_tools = 1};
    ASSERT_OK(vigil_run_rerun_with(t.rt, k1, &o, k2, E));
    g_presses = 0;
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 1, &ran, E));
    ASSERT_STREQ(wake_status(&t, k2), "completed");
    ASSERT_EQ(g_presses, 0); /* refused at the gate: the override left it out */
    ASSERT_STREQ(model_of(&t, a, k2, model, sizeof model), "other-model");
    ASSERT(strcmp(model_of(&t, a, k1, model, sizeof model), "other-model") != 0);
    json_t *r = NULL;
    ASSERT_OK(vg_env_get_json(t.env, "wake_run", k2, &r, NULL, E));
    json_t *ov = json_object_get(json_object_get(r, "meta"), "override");
    ASSERT_STREQ(json_string_value(json_object_get(ov, "model")), "other-model");
    ASSERT_STREQ(json_string_value(json_array_get(json_object_get(ov, "tools"), 0)), "memory_*");
    json_decref(r);
    /* A name that is no name is refused, and nothing is queued. */
    o.model = "";
    ASSERT_CODE(VIGIL_EINVAL, vigil_run_rerun_with(t.rt, k1, &o, k2, NULL));
    vigil_run_override bad = {.prompt = "\xff\xfe not text"}; /* kept, never dropped silently */
    ASSERT_CODE(VIGIL_EINVAL, vigil_run_rerun_with(t.rt, k1, &bad, k2, NULL));
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* `vigil wakes` shows a run key's first 16 characters: that names the run, unless another
 * key starts the same (then the refusal says so). A chat turn is a run that refuses. */
TEST(a_unique_prefix_of_a_run_key_names_its_run_and_a_chat_turn_refuses)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], k1[65], k2[65], prefix[17];
    int queued = 0;
    open_with(&t, "runctl_prefix", "{\"response\":{\"text\":\"first\"}}");
    vigil_agent_spec s = {.name = "a"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, a, E));
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    wake(&w, a, "t1", k1);
    snprintf(prefix, sizeof prefix, "%.16s", k1);
    ASSERT_OK(vigil_run_rerun(t.rt, prefix, "again", k2, E));
    ASSERT_OK(vigil_run_cancel(t.rt, prefix, NULL, &queued, E));
    ASSERT_EQ(queued, 1);
    ASSERT_STREQ(wake_status(&t, k1), "cancelled");
    ASSERT_CODE(VIGIL_ENOTFOUND, vigil_run_cancel(t.rt, "0000000000zz", NULL, NULL, NULL));
    /* Two keys that start alike: their common start is refused as ambiguous. */
    json_t *body = json_pack("{s:s, s:s, s:s}", "run_key", "", "agent_id", a, "status", "queued");
    ASSERT_OK(vg_env_put_json(t.env, "wake_run", "abcdef0123-one", a, "queued", "", 1, body, 0, E));
    ASSERT_OK(vg_env_put_json(t.env, "wake_run", "abcdef0123-two", a, "queued", "", 2, body, 0, E));
    json_decref(body);
    ASSERT_CODE(VIGIL_EINVAL, vigil_run_cancel(t.rt, "abcdef0123", NULL, NULL, NULL));
    /* A chat turn's run is there, but not in the wake log: refused, not "not found". */
    body = json_pack("{s:s}", "run_key", "chat-turn-key");
    ASSERT_OK(vg_env_put_json(t.env, "run", "chat-run-id", a, "", "", 3, body, 0, E));
    json_decref(body);
    ASSERT_CODE(VIGIL_ESTATE, vigil_run_cancel(t.rt, "chat-run-id", NULL, NULL, NULL));
    ASSERT_CODE(VIGIL_ESTATE, vigil_run_rerun(t.rt, "chat-run-id", NULL, k2, NULL));
    /* Resume refuses it as any run no spawn made (exit 2), saying what resume takes (trial C21
     * of session 30: ESTATE, and a message about cancel and re-run). */
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EINVAL, vigil_run_resume(t.rt, "chat-run-id", NULL, k2, &err));
    ASSERT_CONTAINS(err.message, "only a sub-agent's run can be resumed");
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* A task's run that a person cancels while it runs ends the task cancelled, not done. */
TEST(a_task_run_cancelled_while_it_runs_ends_the_task_cancelled)
{
    struct test_rt t;
    struct vg_wake w;
    char a[37], task[37];
    open_pressing_cancel(&t, "runctl_task", a);
    ASSERT_OK(vigil_task_add(t.rt, "stop me", NULL, NULL, 0, task, E));
    int started = 0, ran = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, &started, E));
    ASSERT_EQ(started, 1);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 0, &ran, E));
    ASSERT_EQ(ran, 1);
    json_t *v = NULL;
    ASSERT_OK(vg_task_get(t.env, task, &v, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(v, "status")), "cancelled");
    json_decref(v);
    vg_wake_release(&w);
    test_rt_close(&t);
}

int main(void)
{
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_CONFIG");
    RUN(a_cancelled_queued_run_never_starts_and_a_running_one_stops_at_its_next_safe_point);
    RUN(a_rerun_with_an_override_is_a_new_run_linked_to_the_old);
    RUN(a_rerun_may_name_its_model_and_narrow_its_tools);
    RUN(a_task_run_cancelled_while_it_runs_ends_the_task_cancelled);
    RUN(a_unique_prefix_of_a_run_key_names_its_run_and_a_chat_turn_refuses);
    return 0;
}
