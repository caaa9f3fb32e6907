/*
 * test_executor.c: the gated executor end to end: recorded action/toolResult pairs, every
 * refusal code, operation replay, kill switches and budgets flipped mid-sequence, approvals
 * that survive restarts and expire by the test clock, and crash replay at every point of a
 * call with no side effect repeated.
 */
#include "tool/tool_helpers.h"

#include "base/hash.h"
#include "base/json.h"
#include "loop/loop.h"
#include "wake/wake.h"

#define CFG_ALL                                                                                    \
    "{\"tools\":[\"host_*\",\"set_report\",\"record_observations\"],"                              \
    "\"capabilities\":[\"taskWrite\",\"taskRead\"],\"allowed_scopes\":[\"cat-a\"]}"

static struct {
    char tokens[64][128];
    int n;
} heard;

static void hear(void *user, const char *const *tokens, size_t n)
{
    for (size_t i = 0; i < n && heard.n < 64; i++)
        snprintf(heard.tokens[heard.n++], 128, "%s", tokens[i]);
}

static int heard_token(const char *tok)
{
    for (int i = 0; i < heard.n; i++)
        if (!strcmp(heard.tokens[i], tok))
            return 1;
    return 0;
}

static void open_rt(struct test_rt *t, const char *name)
{
    test_rt_open(t, name);
    host_reset();
    register_host_tools(t->rt);
}

/* proves: S0-048 S0-070 S0-071 S0-072 S0-079 S0-050 */
TEST(success_records_action_and_result_with_envelopes)
{
    struct test_rt t;
    char a[37];
    struct vg_tool_outcome o;
    open_rt(&t, "tool_success");
    make_agent(&t, CFG_ALL, a);
    memset(&heard, 0, sizeof heard);
    vigil_set_notify_hook(t.rt, hear, NULL);
    call_tool(&t, a, "run-1", "set_report", "{\"scope\":\"current\",\"markdown\":\"# hi\"}", &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    ASSERT_STREQ(o.status, "success");
    ASSERT_EQ(strlen(o.operation_id), 64);
    json_t *rep = NULL;
    ASSERT_OK(vg_report_current(t.env, a, "current", &rep, E));
    const char *rid = json_string_value(json_object_get(o.result, "report_id"));
    ASSERT_STREQ(json_string_value(json_object_get(rep, "id")), rid);
    json_decref(rep);

    /* action before, toolResult after, with the envelopes */
    json_t *act = message(&t, o.action_id), *res = message(&t, o.result_id);
    json_t *am = json_object_get(act, "metadata"), *rm = json_object_get(res, "metadata");
    ASSERT_STREQ(json_string_value(json_object_get(act, "kind")), "action");
    ASSERT_STREQ(json_string_value(json_object_get(am, "actionType")), "tool_call");
    ASSERT_STREQ(json_string_value(json_object_get(am, "toolName")), "set_report");
    ASSERT_STREQ(json_string_value(json_object_get(am, "operationId")), o.operation_id);
    ASSERT_EQ(strlen(json_string_value(json_object_get(am, "argumentsHash"))), 64);
    ASSERT_STREQ(json_string_value(json_array_get(json_object_get(am, "scopeSnapshot"), 0)),
                 "cat-a");
    ASSERT_STREQ(json_string_value(json_object_get(res, "kind")), "toolResult");
    ASSERT_STREQ(json_string_value(json_object_get(rm, "actionRefId")), o.action_id);
    ASSERT_STREQ(json_string_value(json_object_get(rm, "toolName")), "set_report");
    /* One record per fact: the outcome is the content's envelope, not repeated in the metadata,
     * and the run's key and wake reason are the run's (proves nothing new: S0-071 above). */
    json_t *env = result_envelope(&t, o.result_id);
    ASSERT_STREQ(json_string_value(json_object_get(env, "status")), "success");
    ASSERT_STREQ(json_string_value(json_object_get(env, "operation_id")), o.operation_id);
    ASSERT_STREQ(json_string_value(json_object_get(env, "action_id")), o.action_id);
    ASSERT_STREQ(json_string_value(json_array_get(json_object_get(env, "changed_entity_ids"), 0)),
                 rid);
    ASSERT_STREQ(json_string_value(json_array_get(json_object_get(env, "changed_tokens"), 0)),
                 "AGENT_REPORT_CHANGED");
    ASSERT(json_object_get(env, "error_code") == NULL);
    json_decref(env);
    ASSERT_EQ(json_object_size(rm), 2);
    ASSERT_STREQ(json_string_value(json_object_get(am, "runKey")), "run-1"); /* outside a run */
    ASSERT(json_integer_value(json_object_get(act, "seq")) <
           json_integer_value(json_object_get(res, "seq")));
    json_decref(act);
    json_decref(res);

    /* tool_effect link from the result to the changed entity; tokens after commit */
    json_t *targets = NULL;
    ASSERT_OK(vg_link_targets(t.env, "tool_effect", o.result_id, &targets, E));
    ASSERT_STREQ(json_string_value(json_array_get(targets, 0)), rid);
    json_decref(targets);
    ASSERT(heard_token("AGENT_REPORT_CHANGED"));
    ASSERT(heard_token(rid));
    vg_tool_outcome_release(&o);

    /* record_observations appends observation messages on the run's thread */
    call_tool(&t, a, "run-1", "record_observations", "{\"notes\":[\"one\",\"two\"]}", &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    ASSERT_EQ(count_msgs(&t, a, "run-1", "observation"), 2);
    ASSERT_EQ(count_msgs(&t, a, "run-1", "action"), 2);
    ASSERT_EQ(count_msgs(&t, a, "run-1", "toolResult"), 2);
    vg_tool_outcome_release(&o);
    ASSERT_OK(vg_spine_verify(t.env, a, NULL, E));
    test_rt_close(&t);
}

/* One refused call: the right code, recorded as a pair, nothing applied. */
static void expect_refusal(struct test_rt *t, const char *a, const char *run, const char *tool,
                           const char *args, enum vg_tool_code code)
{
    struct vg_tool_outcome o;
    int actions = count_msgs(t, a, run, "action"), results = count_msgs(t, a, run, "toolResult");
    int applied = g_host.total;
    call_tool(t, a, run, tool, args, &o);
    if (o.code != code)
        TEST_FAIL_("%s %s: got %s (%s), expected %s", tool, args, o.error_code, o.error_message,
                   vg_tool_code_name(code));
    ASSERT_STREQ(o.status, "error");
    ASSERT_STREQ(o.error_code, vg_tool_code_name(code));
    ASSERT_EQ(count_msgs(t, a, run, "action"), actions + 1);
    ASSERT_EQ(count_msgs(t, a, run, "toolResult"), results + 1);
    json_t *env = result_envelope(t, o.result_id);
    ASSERT_STREQ(json_string_value(json_object_get(env, "error_code")), vg_tool_code_name(code));
    ASSERT_STREQ(json_string_value(json_object_get(env, "status")), "error");
    json_decref(env);
    ASSERT_EQ(g_host.total, applied);
    vg_tool_outcome_release(&o);
}

/* proves: S0-054 S0-057 S0-060 S0-061 S0-062 S3-047 S0-130 S2-004 */
TEST(refusals_get_their_code_and_are_recorded)
{
    struct test_rt t;
    char a[37], ro[37], none[37];
    open_rt(&t, "tool_refusals");
    make_agent(&t, CFG_ALL, a);
    /* schema-invalid arguments */
    expect_refusal(&t, a, "r", "host_write", "{\"category\":\"cat-a\"}", VG_TOOL_INVALID_ARGUMENTS);
    expect_refusal(&t, a, "r", "host_write", "{\"category\":\"cat-a\",\"title\":\"\"}",
                   VG_TOOL_INVALID_ARGUMENTS);
    expect_refusal(&t, a, "r", "host_write", "[1,2]", VG_TOOL_INVALID_ARGUMENTS);
    expect_refusal(&t, a, "r", "set_report", "{\"scope\":\"yearly\",\"markdown\":\"x\"}",
                   VG_TOOL_INVALID_ARGUMENTS);
    /* unknown tool */
    expect_refusal(&t, a, "r", "launch_rockets", "{}", VG_TOOL_UNKNOWN_TOOL);
    /* scope: argument rule, target rule (resolvable and not), cross-scope move */
    expect_refusal(&t, a, "r", "host_write", "{\"category\":\"cat-b\",\"title\":\"x\"}",
                   VG_TOOL_OUT_OF_SCOPE);
    expect_refusal(&t, a, "r", "host_target", "{\"task_id\":\"task-b1\"}", VG_TOOL_OUT_OF_SCOPE);
    expect_refusal(&t, a, "r", "host_target", "{\"task_id\":\"ghost-1\"}", VG_TOOL_OUT_OF_SCOPE);
    /* the callback's own refusal code and a garbage reply */
    expect_refusal(&t, a, "r", "host_write", "{\"category\":\"cat-a\",\"title\":\"fail\"}",
                   VG_TOOL_UNSAFE_TARGET);
    expect_refusal(&t, a, "r", "host_write", "{\"category\":\"cat-a\",\"title\":\"garbage\"}",
                   VG_TOOL_FAILED);
    /* allowed wake reasons: host_write runs on manual and timer wakes only */
    {
        struct vg_tool_outcome o;
        json_t *args = json_pack("{s:s, s:s}", "category", "cat-a", "title", "x");
        struct vg_tool_call_ctx ctx = {
            .agent_id = a, .run_key = "r", .wake_reason = "subscription"};
        ASSERT_OK(vg_tool_executor_call(executor(&t), &ctx, "host_write", args, &o, E));
        ASSERT_EQ(o.code, VG_TOOL_NOT_ALLOWED);
        ASSERT_EQ(g_host.total, 0);
        vg_tool_outcome_release(&o);
        ctx.wake_reason = "timer";
        ASSERT_OK(vg_tool_executor_call(executor(&t), &ctx, "host_write", args, &o, E));
        ASSERT_EQ(o.code, VG_TOOL_OK);
        ASSERT_EQ(g_host.total, 1);
        vg_tool_outcome_release(&o);
        json_decref(args);
    }
    struct vg_tool_outcome o;
    call_tool(&t, a, "r", "host_target", "{\"task_id\":\"task-a1\"}", &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    vg_tool_outcome_release(&o);

    /* an agent whose allowlist is read-only cannot call a write tool */
    make_agent(&t,
               "{\"tools\":[\"host_read\"],\"capabilities\":[\"taskRead\",\"taskWrite\"],"
               "\"allowed_scopes\":[\"cat-a\"]}",
               ro);
    expect_refusal(&t, ro, "r", "host_write", "{\"category\":\"cat-a\",\"title\":\"x\"}",
                   VG_TOOL_NOT_ALLOWED);
    /* deny by default: no allowed_scopes means no scoped write, no tools means no tools */
    make_agent(&t, "{\"tools\":[\"host_*\"],\"capabilities\":[\"taskWrite\"]}", none);
    expect_refusal(&t, none, "r", "host_write", "{\"category\":\"cat-a\",\"title\":\"x\"}",
                   VG_TOOL_OUT_OF_SCOPE);
    make_agent(&t, "{}", none);
    expect_refusal(&t, none, "r", "set_report", "{\"scope\":\"current\",\"markdown\":\"x\"}",
                   VG_TOOL_NOT_ALLOWED);
    test_rt_close(&t);
}

/* proves: S0-074 S0-075 S3-033 S3-075 */
TEST(operation_ids_replay_instead_of_rerunning)
{
    struct test_rt t;
    char a[37];
    struct vg_tool_outcome o1, o2, o3, o4;
    open_rt(&t, "tool_replay");
    make_agent(&t, CFG_ALL, a);
    call_tool(&t, a, "run-7", "host_write", "{\"category\":\"cat-a\",\"title\":\"x\"}", &o1);
    ASSERT_EQ(o1.code, VG_TOOL_OK);
    ASSERT_EQ(host_applied(o1.operation_id), 1);
    /* the model re-plans: same call, keys in another order: same id, recorded result */
    call_tool(&t, a, "run-7", "host_write", "{\"title\":\"x\",\"category\":\"cat-a\"}", &o2);
    ASSERT_STREQ(o2.operation_id, o1.operation_id);
    ASSERT_EQ(o2.replayed, 1);
    ASSERT_EQ(o2.code, VG_TOOL_OK);
    ASSERT(json_equal(o2.result, o1.result));
    ASSERT_EQ(host_applied(o1.operation_id), 1);
    ASSERT_EQ(g_host.total, 1);
    json_t *env = result_envelope(&t, o2.result_id);
    ASSERT(json_is_true(json_object_get(env, "replayed")));
    json_decref(env);
    /* another run (another wake) is another operation */
    call_tool(&t, a, "run-8", "host_write", "{\"category\":\"cat-a\",\"title\":\"x\"}", &o3);
    ASSERT(strcmp(o3.operation_id, o1.operation_id) != 0);
    ASSERT_EQ(g_host.total, 2);
    /* the id is the documented hash */
    char want[65];
    json_t *args = json_pack("{s:s, s:s}", "category", "cat-a", "title", "x");
    ASSERT_OK(
        vg_tool_operation_id(a, "run-7", "host_write", args, "cat-a", "category=cat-a;", want, E));
    ASSERT_STREQ(want, o1.operation_id);
    json_decref(args);
    /* a restart does not forget: still replayed */
    test_rt_reopen(&t);
    register_host_tools(t.rt);
    call_tool(&t, a, "run-7", "host_write", "{\"category\":\"cat-a\",\"title\":\"x\"}", &o4);
    ASSERT_EQ(o4.replayed, 1);
    ASSERT_EQ(g_host.total, 2);
    vg_tool_outcome_release(&o1);
    vg_tool_outcome_release(&o2);
    vg_tool_outcome_release(&o3);
    vg_tool_outcome_release(&o4);
    test_rt_close(&t);
}

/* Every call through the gate carries an operation id, derived from its run key, and the tool
 * is handed it to tag its effect with; a call with no run key to derive one from is refused
 * before anything runs or is recorded, through the executor as through the public API.
 * proves: S0-073 */
TEST(a_mutating_call_without_an_operation_id_is_refused)
{
    struct test_rt t;
    char a[37];
    struct vg_tool_outcome o;
    char *out = NULL;
    vigil_error err = {0};
    open_rt(&t, "tool_no_op_id");
    make_agent(&t, CFG_ALL, a);
    json_t *args = json_pack("{s:s, s:s}", "category", "cat-a", "title", "x");
    const char *no_key[] = {NULL, ""};
    for (int i = 0; i < 2; i++) {
        struct vg_tool_call_ctx ctx = {.agent_id = a, .run_key = no_key[i]};
        ASSERT_CODE(VIGIL_EINVAL,
                    vg_tool_executor_call(executor(&t), &ctx, "host_write", args, &o, &err));
        vg_tool_outcome_release(&o);
        ASSERT_CODE(VIGIL_EINVAL,
                    vigil_tool_call(t.rt, a, no_key[i], "host_write",
                                    "{\"category\":\"cat-a\",\"title\":\"x\"}", &out, &err));
        vigil_free(out);
        out = NULL;
    }
    ASSERT_EQ(g_host.total, 0);
    ASSERT_EQ(count_msgs(&t, a, "", "action"), 0);
    /* With a run key: the call's operation id reaches the tool, which applied it once. */
    call_tool(&t, a, "run-1", "host_write", "{\"category\":\"cat-a\",\"title\":\"x\"}", &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    ASSERT_EQ(strlen(o.operation_id), 64);
    ASSERT_EQ(host_applied(o.operation_id), 1);
    ASSERT_EQ(g_host.total, 1);
    vg_tool_outcome_release(&o);
    json_decref(args);
    test_rt_close(&t);
}

/* Operations are the agent's own: the same call under the same run key by another agent is
 * another operation with its own effect, never a replay of the first agent's result; the same
 * agent, run key and arguments replay, for every mutating tool kind. */
TEST(operation_ids_are_scoped_to_their_agent)
{
    static const char *const tools[] = {"host_write", "host_sync", "set_report"};
    static const char *const args[] = {"{\"category\":\"cat-a\",\"title\":\"x\"}",
                                       "{\"category\":\"cat-a\",\"title\":\"x\"}",
                                       "{\"scope\":\"current\",\"markdown\":\"# r\"}"};
    static const char *const keys[] = {"cli", "run-9"};
    struct test_rt t;
    char a[37], b[37];
    open_rt(&t, "tool_op_agent_scope");
    make_agent(&t, CFG_ALL, a);
    make_agent(&t, CFG_ALL, b);
    for (size_t ti = 0; ti < VG_ARRAY_LEN(tools); ti++) {
        for (size_t ki = 0; ki < VG_ARRAY_LEN(keys); ki++) {
            struct vg_tool_outcome oa, ob, oa2, ob2;
            call_tool(&t, a, keys[ki], tools[ti], args[ti], &oa);
            call_tool(&t, b, keys[ki], tools[ti], args[ti], &ob);
            ASSERT_EQ(oa.code, VG_TOOL_OK);
            ASSERT_EQ(ob.code, VG_TOOL_OK);
            ASSERT(strcmp(oa.operation_id, ob.operation_id) != 0);
            ASSERT_EQ(ob.replayed, 0); /* B's own effect ran */
            if (strcmp(tools[ti], "set_report") != 0) {
                ASSERT_EQ(host_applied(oa.operation_id), 1);
                ASSERT_EQ(host_applied(ob.operation_id), 1);
            } else {
                /* B's report is B's, not A's id */
                ASSERT(!json_equal(json_object_get(oa.result, "report_id"),
                                   json_object_get(ob.result, "report_id")));
            }
            /* the same agent, run key and arguments: replayed */
            call_tool(&t, a, keys[ki], tools[ti], args[ti], &oa2);
            call_tool(&t, b, keys[ki], tools[ti], args[ti], &ob2);
            ASSERT_EQ(oa2.replayed, 1);
            ASSERT_EQ(ob2.replayed, 1);
            ASSERT_STREQ(oa2.operation_id, oa.operation_id);
            ASSERT_STREQ(ob2.operation_id, ob.operation_id);
            ASSERT(json_equal(ob2.result, ob.result));
            vg_tool_outcome_release(&oa);
            vg_tool_outcome_release(&ob);
            vg_tool_outcome_release(&oa2);
            vg_tool_outcome_release(&ob2);
        }
    }
    /* two run keys of one agent are two operations */
    char k1[65], k2[65];
    json_t *j = json_loads(args[0], 0, NULL);
    ASSERT_OK(vg_tool_operation_id(a, "cli", "host_write", j, "", "", k1, E));
    ASSERT_OK(vg_tool_operation_id(a, "run-9", "host_write", j, "", "", k2, E));
    ASSERT(strcmp(k1, k2) != 0);
    ASSERT_OK(vg_tool_operation_id(b, "cli", "host_write", j, "", "", k2, E));
    ASSERT(strcmp(k1, k2) != 0);
    json_decref(j);
    test_rt_close(&t);
}

/* Arguments with reals are stored and shown short since session 37 (0.8, not jansson's
 * 0.80000000000000004), but their operation id and argument hash are taken over the text they
 * were before, so a call started before the upgrade and retried after is recognized: the id
 * below was computed by main's build of b50131f3 (vg_tool_operation_id, the same arguments). A
 * retry whose text gives a real in other digits is the same call: replayed, no second effect.
 * proves: S0-074 S0-075 */
TEST(operation_ids_of_real_arguments_stay_those_before_the_short_reals)
{
    json_t *args = json_loads("{\"scope\":\"daily\",\"confidence\":0.8,\"temperature\":21.5,"
                              "\"price\":9.99,\"tiny\":1e-300,\"least\":5e-324,"
                              "\"most\":1.7976931348623157e308,\"n\":3}",
                              0, NULL);
    char id[65];
    ASSERT_OK(vg_tool_operation_id("agent-j5", "run-j5", "set_report", args, "", "", id, E));
    ASSERT_STREQ(id, "cce349199ff9e56ef5c23e760fc82f47ed97a47719d399f87ab4857f59680ef8");
    json_decref(args);

    struct test_rt t;
    char a[37];
    struct vg_tool_outcome o1, o2;
    open_rt(&t, "tool_real_ids");
    make_agent(&t, CFG_ALL, a);
    const char *given = "{\"scope\":\"current\",\"markdown\":\"# hi\",\"confidence\":0.8}";
    call_tool(&t, a, "run-1", "set_report", given, &o1);
    ASSERT_EQ(o1.code, VG_TOOL_OK);
    json_t *act = message(&t, o1.action_id), *am = json_object_get(act, "metadata");
    /* the argument hash is jansson's text's, as main's canonical writer wrote it */
    json_t *parsed = json_loads(given, 0, NULL);
    char *jansson_text = json_dumps(parsed, JSON_COMPACT | JSON_SORT_KEYS), hash[65];
    ASSERT_CONTAINS(jansson_text, "0.80000000000000004");
    vg_sha256_hex(hash, jansson_text, strlen(jansson_text));
    ASSERT_STREQ(json_string_value(json_object_get(am, "argumentsHash")), hash);
    free(jansson_text);
    json_decref(parsed);
    json_decref(act);
    /* the same call, its real in jansson's 17 digits: the same operation, replayed */
    call_tool(&t, a, "run-1", "set_report",
              "{\"scope\":\"current\",\"markdown\":\"# hi\",\"confidence\":0.80000000000000004}",
              &o2);
    ASSERT_STREQ(o2.operation_id, o1.operation_id);
    ASSERT_EQ(o2.replayed, 1);
    json_t *rep = NULL; /* one report written, not two */
    ASSERT_OK(vg_report_get(t.env, a, "current", 5, &rep, E));
    ASSERT(json_real_value(json_object_get(json_object_get(rep, "report"), "confidence")) == 0.8);
    ASSERT_EQ(json_array_size(json_object_get(rep, "history")), 0);
    json_decref(rep);
    vg_tool_outcome_release(&o1);
    vg_tool_outcome_release(&o2);
    test_rt_close(&t);
}

/* proves: S0-152 S0-153 */
TEST(kill_switches_stop_mutating_tools_at_once)
{
    struct test_rt t;
    char a[37], b[37];
    struct vg_tool_outcome o;
    int on = 0;
    open_rt(&t, "tool_kill");
    make_agent(&t, CFG_ALL, a);
    make_agent(&t, CFG_ALL, b);
    call_tool(&t, a, "k", "host_write", "{\"category\":\"cat-a\",\"title\":\"1\"}", &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    /* per agent: a is stopped, b is not; reads still answer so a run can wind down */
    ASSERT_OK(vg_kill_set(t.env, a, NULL, 1, "incident 7", E));
    ASSERT_OK(vg_kill_active(t.env, a, NULL, &on, E));
    ASSERT_EQ(on, 1);
    ASSERT_OK(vg_kill_active(t.env, b, NULL, &on, E));
    ASSERT_EQ(on, 0);
    expect_refusal(&t, a, "k", "host_write", "{\"category\":\"cat-a\",\"title\":\"2\"}",
                   VG_TOOL_KILLED);
    expect_refusal(&t, a, "k", "set_report", "{\"scope\":\"current\",\"markdown\":\"x\"}",
                   VG_TOOL_KILLED);
    call_tool(&t, a, "k", "host_read", "{}", &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    call_tool(&t, b, "k", "host_write", "{\"category\":\"cat-a\",\"title\":\"2\"}", &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    ASSERT_OK(vg_kill_set(t.env, a, NULL, 0, NULL, E));
    /* per tool class: host_write is stopped for everyone, set_report is not */
    ASSERT_OK(vg_kill_set(t.env, NULL, "host_write", 1, NULL, E));
    expect_refusal(&t, b, "k", "host_write", "{\"category\":\"cat-a\",\"title\":\"3\"}",
                   VG_TOOL_KILLED);
    call_tool(&t, b, "k", "set_report", "{\"scope\":\"current\",\"markdown\":\"x\"}", &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    ASSERT_OK(vg_kill_set(t.env, NULL, "host_write", 0, NULL, E));
    /* global, persisted across a restart */
    ASSERT_OK(vg_kill_set(t.env, NULL, NULL, 1, "stop everything", E));
    test_rt_reopen(&t);
    register_host_tools(t.rt);
    ASSERT_OK(vg_kill_active(t.env, b, "anything", &on, E));
    ASSERT_EQ(on, 1);
    expect_refusal(&t, b, "k", "host_write", "{\"category\":\"cat-a\",\"title\":\"4\"}",
                   VG_TOOL_KILLED);
    ASSERT_OK(vg_kill_set(t.env, NULL, NULL, 0, NULL, E));
    call_tool(&t, b, "k", "host_write", "{\"category\":\"cat-a\",\"title\":\"4\"}", &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(g_host.total, 3);
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EINVAL, vg_kill_set(t.env, a, "c", 1, NULL, &err));
    test_rt_close(&t);
}

/* proves: S0-129 S0-178 */
TEST(budgets_run_out_mid_sequence_and_reset_next_day)
{
    struct test_rt t;
    char a[37];
    struct vg_tool_outcome o;
    const char *over = NULL;
    open_rt(&t, "tool_budget");
    make_agent(&t,
               "{\"tools\":[\"host_*\"],\"capabilities\":[\"taskWrite\",\"taskRead\"],"
               "\"allowed_scopes\":[\"cat-a\"],\"budgets\":{\"tool_calls\":2,\"tokens\":1000,"
               "\"cost_usd\":0.5}}",
               a);
    call_tool(&t, a, "b", "host_write", "{\"category\":\"cat-a\",\"title\":\"1\"}", &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    call_tool(&t, a, "b", "host_write", "{\"category\":\"cat-a\",\"title\":\"2\"}", &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    expect_refusal(&t, a, "b", "host_write", "{\"category\":\"cat-a\",\"title\":\"3\"}",
                   VG_TOOL_BUDGET_EXCEEDED);
    ASSERT_OK(vg_budget_check(t.env, a, &over, E));
    ASSERT_STREQ(over, "tool_calls");
    /* a replay of a finished operation costs nothing and still answers */
    call_tool(&t, a, "b", "host_write", "{\"category\":\"cat-a\",\"title\":\"1\"}", &o);
    ASSERT_EQ(o.replayed, 1);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(g_host.total, 2);
    /* the next UTC day starts fresh; the loop's token charges count too */
    vg_test_clock_advance(&t.clock, 24 * 3600 * 1000);
    ASSERT_OK(vg_budget_check(t.env, a, &over, E));
    ASSERT(over == NULL);
    struct vg_budget_charge c = {0};
    c.v[VG_BUDGET_TOKENS] = 999;
    c.v[VG_BUDGET_COST] = 1000;
    ASSERT_OK(vg_budget_charge(t.env, a, &c, E));
    call_tool(&t, a, "b2", "host_write", "{\"category\":\"cat-a\",\"title\":\"x\"}", &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    c.v[VG_BUDGET_TOKENS] = 1;
    ASSERT_OK(vg_budget_charge(t.env, a, &c, E));
    expect_refusal(&t, a, "b2", "host_write", "{\"category\":\"cat-a\",\"title\":\"y\"}",
                   VG_TOOL_BUDGET_EXCEEDED);
    json_t *u = NULL;
    ASSERT_OK(vg_budget_usage(t.env, a, &u, E));
    ASSERT_EQ(json_integer_value(json_object_get(u, "tokens")), 1000);
    ASSERT_EQ(json_integer_value(json_object_get(u, "cost_micros")), 2000);
    ASSERT_EQ(json_integer_value(json_object_get(json_object_get(u, "limits"), "cost_micros")),
              500000);
    json_decref(u);
    test_rt_close(&t);
}

/* The usage record is read with the scanner and written as text (budget.c): what it writes is
 * the canonical record jansson would have written, and a record with more than the usual fields
 * is still charged, its other fields kept. */
struct raw_text {
    char text[512];
};

static int raw_text_cb(void *user, const struct vg_record *r)
{
    snprintf(((struct raw_text *)user)->text, sizeof((struct raw_text *)user)->text, "%s", r->body);
    return 1;
}

TEST(budget_usage_is_written_canonical_and_a_record_with_more_fields_keeps_them)
{
    struct test_rt t;
    char a[37], want[512], id[300], at[32];
    struct raw_text raw = {{0}};
    struct vg_budget_charge c = {0};
    const char *over = NULL;
    open_rt(&t, "tool_budget_text");
    make_agent(&t, "{\"tools\":[\"host_*\"],\"budgets\":{\"steps\":3}}", a);
    c.v[VG_BUDGET_STEPS] = 1;
    c.v[VG_BUDGET_TOKENS] = 7;
    ASSERT_OK(vg_budget_charge(t.env, a, &c, E));
    ASSERT_OK(vg_budget_charge(t.env, a, &c, E));
    vg_time_format_ms(at, vg_env_now(t.env));
    snprintf(id, sizeof id, "%s:%.10s", a, at);
    /* the stored text itself is canonical: what the jansson writer gave before */
    ASSERT_OK(vg_store_get(t.env->store, "budget_usage", id, raw_text_cb, &raw, E));
    snprintf(want, sizeof want,
             "{\"agent_id\":\"%s\",\"cost_micros\":0,\"day\":\"%.10s\",\"steps\":2,"
             "\"tokens\":14,\"tool_calls\":0,\"wall_ms\":0}",
             a, at);
    ASSERT_STREQ(raw.text, want);
    /* a record with a field of someone else's: charged all the same, the field kept */
    json_t *b = NULL;
    int64_t rev = 0;
    ASSERT_OK(vg_env_get_json(t.env, "budget_usage", id, &b, &rev, E));
    json_object_set_new(b, "note", json_string("kept"));
    ASSERT_OK(vg_env_update_json(t.env, "budget_usage", id, a, at, "", 0, b, rev, E));
    json_decref(b);
    ASSERT_OK(vg_budget_check(t.env, a, &over, E));
    ASSERT(over == NULL);
    ASSERT_OK(vg_budget_charge(t.env, a, &c, E));
    ASSERT_OK(vg_budget_check(t.env, a, &over, E));
    ASSERT_STREQ(over, "steps");
    json_t *u = NULL;
    ASSERT_OK(vg_budget_usage(t.env, a, &u, E));
    ASSERT_EQ(json_integer_value(json_object_get(u, "steps")), 3);
    ASSERT_EQ(json_integer_value(json_object_get(u, "tokens")), 21);
    ASSERT_STREQ(json_string_value(json_object_get(u, "note")), "kept");
    json_decref(u);
    test_rt_close(&t);
}

/* A run's grant narrows that run's calls only: the agent record the gate reads is shared with
 * every later read of the agent (the env's memo), so narrowing it in place would narrow the
 * agent's other runs too. */
TEST(a_grant_narrows_its_own_run_and_no_other)
{
    struct test_rt t;
    char a[37];
    struct vg_tool_outcome o;
    open_rt(&t, "tool_grant_own_run");
    make_agent(&t,
               "{\"tools\":[\"host_*\"],\"capabilities\":[\"taskWrite\",\"taskRead\"],"
               "\"allowed_scopes\":[\"cat-a\",\"cat-b\"]}",
               a);
    json_t *scopes = json_pack("[s]", "cat-a");
    ASSERT_OK(vg_tool_grant_put(t.env, "granted", a, NULL, scopes, E));
    json_decref(scopes);
    for (int round = 0; round < 3; round++) { /* the memo keeps a body from its second read */
        expect_refusal(&t, a, "granted", "host_write", "{\"category\":\"cat-b\",\"title\":\"g\"}",
                       VG_TOOL_OUT_OF_SCOPE);
        char title[64];
        snprintf(title, sizeof title, "{\"category\":\"cat-b\",\"title\":\"%d\"}", round);
        call_tool(&t, a, "other", "host_write", title, &o);
        ASSERT_STREQ(o.error_code, "");
        ASSERT_EQ(o.code, VG_TOOL_OK);
        vg_tool_outcome_release(&o);
    }
    test_rt_close(&t);
}

/* A scope is a path: an allowed scope covers itself and what is under it, never its parent, a
 * sibling or a name it merely begins; a grant keeps the narrower of each pair that nests and
 * widens nothing. */
TEST(scopes_nest_and_a_grant_keeps_the_narrower)
{
    struct test_rt t;
    char group[37], one[37];
    struct vg_tool_outcome o;
    open_rt(&t, "tool_scope_paths");
    const char *cfg = "{\"tools\":[\"host_*\"],\"capabilities\":[\"taskWrite\",\"taskRead\"],"
                      "\"allowed_scopes\":[\"%s\"]}";
    char text[256];
    snprintf(text, sizeof text, cfg, "cat-a");
    make_agent(&t, text, group);
    snprintf(text, sizeof text, cfg, "cat-a/t1");
    make_agent(&t, text, one);
    static const struct {
        const char *agent_is, *category;
        int allowed;
    } cases[] = {
        {"group", "cat-a", 1},    {"group", "cat-a/t1", 1}, {"group", "cat-a/t1/i", 1},
        {"group", "cat-ab", 0},   {"group", "cat-b", 0},    {"one", "cat-a/t1", 1},
        {"one", "cat-a/t1/i", 1}, {"one", "cat-a", 0},      {"one", "cat-a/t2", 0},
        {"one", "cat-a/t10", 0},
    };
    for (size_t i = 0; i < VG_ARRAY_LEN(cases); i++) {
        char args[128], key[16];
        snprintf(args, sizeof args, "{\"category\":\"%s\",\"title\":\"n%zu\"}", cases[i].category,
                 i);
        snprintf(key, sizeof key, "s%zu", i);
        const char *a = strcmp(cases[i].agent_is, "one") ? group : one;
        if (cases[i].allowed) {
            call_tool(&t, a, key, "host_write", args, &o);
            if (o.code != VG_TOOL_OK)
                TEST_FAIL_("%s on %s: %s", cases[i].agent_is, cases[i].category, o.error_message);
            vg_tool_outcome_release(&o);
        } else {
            expect_refusal(&t, a, key, "host_write", args, VG_TOOL_OUT_OF_SCOPE);
        }
    }
    /* The group's agent granted one task of its group and another group: the task alone. */
    json_t *scopes = json_pack("[s,s]", "cat-a/t1", "cat-b");
    ASSERT_OK(vg_tool_grant_put(t.env, "granted", group, NULL, scopes, E));
    json_decref(scopes);
    call_tool(&t, group, "granted", "host_write", "{\"category\":\"cat-a/t1\",\"title\":\"g\"}",
              &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    expect_refusal(&t, group, "granted", "host_write", "{\"category\":\"cat-a\",\"title\":\"g\"}",
                   VG_TOOL_OUT_OF_SCOPE);
    expect_refusal(&t, group, "granted", "host_write", "{\"category\":\"cat-b\",\"title\":\"g\"}",
                   VG_TOOL_OUT_OF_SCOPE);
    test_rt_close(&t);
}

/* proves: S0-076 S0-128 S0-133 */
TEST(approvals_are_durable_idempotent_and_expire)
{
    struct test_rt t;
    char a[37], aid[37];
    struct vg_tool_outcome o;
    json_t *v = NULL;
    open_rt(&t, "tool_approval");
    make_agent(&t, CFG_ALL, a);
    const char *args = "{\"category\":\"cat-a\",\"title\":\"drop\"}";
    expect_refusal(&t, a, "ap", "host_delete", args, VG_TOOL_CONFIRMATION_REQUIRED);
    call_tool(&t, a, "ap", "host_delete", args, &o); /* asking again: the same pending item */
    ASSERT_EQ(o.code, VG_TOOL_CONFIRMATION_REQUIRED);
    snprintf(aid, sizeof aid, "%s", o.approval_id);
    vg_tool_outcome_release(&o);
    ASSERT_OK(vg_approval_list(t.env, a, "pending", &v, E));
    ASSERT_EQ(json_array_size(v), 1);
    json_t *ap = json_array_get(v, 0);
    ASSERT_STREQ(json_string_value(json_object_get(ap, "id")), aid);
    ASSERT_STREQ(json_string_value(json_object_get(json_object_get(ap, "preview"), "would")),
                 "host_delete");
    json_decref(v);
    ASSERT_EQ(g_host.total, 0);
    /* the agent goes on with other work meanwhile */
    call_tool(&t, a, "ap", "host_write", "{\"category\":\"cat-a\",\"title\":\"other\"}", &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    /* survives a restart; the agent may not approve itself; approve twice is one approval */
    test_rt_reopen(&t);
    register_host_tools(t.rt);
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EDENIED, vg_approval_resolve(t.env, aid, 1, a, NULL, &v, &err));
    ASSERT_OK(vg_approval_resolve(t.env, aid, 1, "alice", "looks fine", &v, E));
    ASSERT_STREQ(json_string_value(json_object_get(v, "status")), "approved");
    json_decref(v);
    ASSERT_OK(vg_approval_resolve(t.env, aid, 0, "bob", "no", &v, E));
    ASSERT_STREQ(json_string_value(json_object_get(v, "status")), "approved");
    ASSERT_STREQ(json_string_value(json_object_get(v, "resolved_by")), "alice");
    ASSERT(json_is_true(json_object_get(v, "already")));
    json_decref(v);
    /* the agent sees the outcome once, on its next step */
    ASSERT_OK(vg_approval_take_resolved(t.env, a, &v, E));
    ASSERT_EQ(json_array_size(v), 1);
    json_decref(v);
    ASSERT_OK(vg_approval_take_resolved(t.env, a, &v, E));
    ASSERT_EQ(json_array_size(v), 0);
    json_decref(v);
    /* approving lets the exact operation run once */
    ASSERT_OK(vg_tool_executor_run_approved(executor(&t), aid, &o, E));
    ASSERT_EQ(o.code, VG_TOOL_OK);
    ASSERT_EQ(host_applied(o.operation_id), 1);
    vg_tool_outcome_release(&o);
    ASSERT_OK(vg_tool_executor_run_approved(executor(&t), aid, &o, E));
    ASSERT_EQ(o.replayed, 1);
    ASSERT_EQ(host_applied(o.operation_id), 1);
    vg_tool_outcome_release(&o);
    call_tool(&t, a, "ap", "host_delete", args, &o);
    ASSERT_EQ(o.replayed, 1);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(g_host.total, 2);

    /* rejected: the call is refused with the reason, never run */
    const char *args2 = "{\"category\":\"cat-a\",\"title\":\"drop2\"}";
    call_tool(&t, a, "ap", "host_delete", args2, &o);
    snprintf(aid, sizeof aid, "%s", o.approval_id);
    vg_tool_outcome_release(&o);
    ASSERT_OK(vg_approval_resolve(t.env, aid, 0, "alice", "too risky", &v, E));
    json_decref(v);
    expect_refusal(&t, a, "ap", "host_delete", args2, VG_TOOL_REJECTED);
    ASSERT_CODE(VIGIL_ESTATE, vg_tool_executor_run_approved(executor(&t), aid, &o, &err));
    ASSERT_OK(vg_approval_take_resolved(t.env, a, &v, E));
    ASSERT_EQ(json_array_size(v), 1);
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(v, 0), "reason")), "too risky");
    json_decref(v);

    /* expiry by the test clock: resolving late fails cleanly, asking again makes a new one */
    const char *args3 = "{\"category\":\"cat-a\",\"title\":\"drop3\"}";
    call_tool(&t, a, "ap", "host_delete", args3, &o);
    snprintf(aid, sizeof aid, "%s", o.approval_id);
    vg_tool_outcome_release(&o);
    vg_test_clock_advance(&t.clock, 25LL * 3600 * 1000);
    ASSERT_CODE(VIGIL_ESTATE, vg_approval_resolve(t.env, aid, 1, "alice", NULL, &v, &err));
    ASSERT_CONTAINS(err.message, "expired");
    ASSERT_OK(vg_approval_get(t.env, aid, &v, E));
    ASSERT_STREQ(json_string_value(json_object_get(v, "status")), "expired");
    json_decref(v);
    ASSERT_OK(vg_approval_take_resolved(t.env, a, &v, E));
    ASSERT_EQ(json_array_size(v), 1);
    json_decref(v);
    call_tool(&t, a, "ap", "host_delete", args3, &o);
    ASSERT_EQ(o.code, VG_TOOL_CONFIRMATION_REQUIRED);
    ASSERT(strcmp(o.approval_id, aid) != 0);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(g_host.total, 2);

    /* the manifest can demand approval for a low-risk tool */
    char m[37];
    make_agent(&t,
               "{\"tools\":[\"host_*\"],\"capabilities\":[\"taskWrite\"],"
               "\"allowed_scopes\":[\"cat-a\"],\"require_approval\":[\"host_w*\"]}",
               m);
    expect_refusal(&t, m, "ap", "host_write", "{\"category\":\"cat-a\",\"title\":\"x\"}",
                   VG_TOOL_CONFIRMATION_REQUIRED);
    test_rt_close(&t);
}

/* An approved operation reaches the agent even when the process dies while running it: the
 * approval is marked seen only after the operation ran, so the next step runs it (once). */
TEST(an_approval_is_not_lost_when_its_run_is_cut_short)
{
    struct test_rt t;
    char a[37], aid[37];
    struct vg_tool_outcome o;
    json_t *v = NULL, *notes = NULL;
    open_rt(&t, "tool_approval_crash");
    make_agent(&t, CFG_ALL, a);
    const char *args = "{\"category\":\"cat-a\",\"title\":\"drop\"}";
    call_tool(&t, a, "ap", "host_delete", args, &o);
    ASSERT_EQ(o.code, VG_TOOL_CONFIRMATION_REQUIRED);
    snprintf(aid, sizeof aid, "%s", o.approval_id);
    vg_tool_outcome_release(&o);
    ASSERT_OK(vg_approval_resolve(t.env, aid, 1, "alice", NULL, &v, E));
    json_decref(v);
    /* The agent's next step starts the approved operation; the process dies before it runs. */
    struct vg_loop_executor le;
    struct vg_loop_call_ctx cc = {.agent_id = a, .run_key = "ap"};
    vg_tool_loop_executor(executor(&t), &le);
    vg_tool_executor_test_crash(executor(&t), VG_CRASH_BEFORE_STARTED);
    ASSERT_CODE(VIGIL_ECANCELED, le.notes(le.self, t.env, &cc, &notes, NULL));
    vg_tool_executor_test_crash(executor(&t), VG_CRASH_NONE);
    ASSERT_EQ(g_host.total, 0);
    test_rt_reopen(&t);
    register_host_tools(t.rt);
    /* After the restart the approval is still undelivered: it runs now, once. */
    vg_tool_loop_executor(executor(&t), &le);
    ASSERT_OK(le.notes(le.self, t.env, &cc, &notes, E));
    ASSERT_EQ(json_array_size(notes), 1);
    ASSERT_CONTAINS(json_string_value(json_object_get(json_array_get(notes, 0), "note")),
                    "approved");
    json_decref(notes);
    ASSERT_EQ(g_host.total, 1);
    ASSERT_OK(le.notes(le.self, t.env, &cc, &notes, E));
    ASSERT_EQ(json_array_size(notes), 0);
    json_decref(notes);
    ASSERT_EQ(g_host.total, 1);
    test_rt_close(&t);
}

struct lease_fence {
    const char *agent;
    int64_t epoch;
};

static vigil_code lease_fence(void *user, struct vg_env *env, vigil_error *err)
{
    struct lease_fence *f = user;
    return vg_wake_lease_check(env, f->agent, f->epoch, err);
}

/* A caller whose lease passed to a successor cannot start an operation: the fence is checked
 * in the same transaction that records it as started, before the effect. */
TEST(a_superseded_caller_cannot_start_an_operation)
{
    struct test_rt t;
    char a[37];
    struct vg_tool_outcome o = {0};
    open_rt(&t, "tool_fenced_start");
    make_agent(&t, CFG_ALL, a);
    struct lease_fence f = {a, 0};
    int got = 0;
    ASSERT_OK(vg_wake_lease_take(t.env, a, "run:old", 1000, &f.epoch, &got, E));
    ASSERT_EQ(got, 1);
    json_t *args = json_pack("{s:s, s:s}", "category", "cat-a", "title", "fenced");
    struct vg_tool_call_ctx ctx = {
        .agent_id = a, .run_key = "wake-9", .fence = lease_fence, .fence_user = &f};
    /* While the lease holds, the call runs. */
    ASSERT_OK(vg_tool_executor_call(executor(&t), &ctx, "host_write", args, &o, E));
    ASSERT_EQ(o.code, VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(g_host.total, 1);
    /* The lease expires and a successor takes the agent: the old caller is refused. */
    vg_test_clock_advance(&t.clock, 1001);
    int64_t next = 0;
    ASSERT_OK(vg_wake_lease_take(t.env, a, "run:new", 1000, &next, &got, E));
    ASSERT_EQ(got, 1);
    json_object_set_new(args, "title", json_string("late"));
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_ESTATE,
                vg_tool_executor_call(executor(&t), &ctx, "host_write", args, &o, &err));
    ASSERT_CONTAINS(err.message, "superseded");
    vg_tool_outcome_release(&o);
    ASSERT_EQ(g_host.total, 1);
    struct vg_query q = {.kind = "operation", .k1 = "started"};
    int64_t n = -1;
    ASSERT_OK(vg_store_count(t.env->store, &q, &n, E));
    ASSERT_EQ(n, 0);
    json_decref(args);
    test_rt_close(&t);
}

/*
 * Crash replay: run a sequence of three calls, crash at one point of the second, restart,
 * recover, and run the whole sequence again. Whatever the point, each effect happens at most
 * once; where the executor cannot know (a non-idempotent host tool that crashed around its
 * effect) the call is held in doubt for a human instead of repeated.
 */
static const char *const seq_tools[3] = {"host_write", "TOOL", "record_observations"};

static void run_seq(struct test_rt *t, const char *a, const char *tool, struct vg_tool_outcome o[3],
                    int crash_on_second, enum vg_tool_crash at, vigil_code *second_rc)
{
    const char *args[3] = {"{\"category\":\"cat-a\",\"title\":\"first\"}",
                           tool && !strcmp(tool, "record_observations")
                               ? "{\"notes\":[\"middle\"]}"
                               : "{\"category\":\"cat-a\",\"title\":\"second\"}",
                           "{\"notes\":[\"last\"]}"};
    for (int i = 0; i < 3; i++) {
        const char *name = i == 1 ? tool : seq_tools[i];
        json_t *j = json_loads(args[i], 0, NULL);
        struct vg_tool_call_ctx ctx = {.agent_id = a, .run_key = "wake-42"};
        vigil_error err = {0};
        vg_tool_executor_test_crash(executor(t), i == 1 && crash_on_second ? at : VG_CRASH_NONE);
        vigil_code rc = vg_tool_executor_call(executor(t), &ctx, name, j, &o[i], &err);
        json_decref(j);
        if (i == 1 && crash_on_second) {
            *second_rc = rc;
            vg_tool_executor_test_crash(executor(t), VG_CRASH_NONE);
            return; /* the process "died" */
        }
        ASSERT_OK(rc);
    }
}

static int observations(struct test_rt *t, const char *a, const char *text)
{
    char thread[200];
    json_t *arr = NULL, *m;
    size_t i;
    int n = 0;
    snprintf(thread, sizeof thread, "%s:run:wake-42", a);
    ASSERT_OK(vg_message_latest(t->env, a, thread, 1000, &arr, E));
    json_array_foreach (arr, i, m)
        if (!strcmp(json_string_value(json_object_get(m, "kind")), "observation") &&
            !strcmp(json_string_value(json_object_get(m, "content")), text))
            n++;
    json_decref(arr);
    return n;
}

/* proves: S0-173 S3-017 S3-018 S0-075 */
TEST(crash_at_every_point_repeats_no_side_effect)
{
    static const char *const tools[] = {"host_write", "host_sync", "record_observations"};
    static const enum vg_tool_crash points[] = {VG_CRASH_BEFORE_STARTED, VG_CRASH_AFTER_STARTED,
                                                VG_CRASH_AFTER_EFFECT, VG_CRASH_AFTER_JOURNAL,
                                                VG_CRASH_AFTER_FINISHED};
    for (size_t ti = 0; ti < VG_ARRAY_LEN(tools); ti++) {
        for (size_t pi = 0; pi < VG_ARRAY_LEN(points); pi++) {
            struct test_rt t;
            char a[37], name[64];
            struct vg_tool_outcome o[3] = {{0}}, r[3] = {{0}};
            vigil_code rc2 = VIGIL_OK;
            const char *tool = tools[ti];
            enum vg_tool_crash at = points[pi];
            int tx = !strcmp(tool, "record_observations");
            snprintf(name, sizeof name, "tool_crash_%zu_%zu", ti, pi);
            open_rt(&t, name);
            make_agent(&t, CFG_ALL, a);
            run_seq(&t, a, tool, o, 1, at, &rc2);
            /* the crash hook fires at every point this provider has */
            int reachable = !(tx && at == VG_CRASH_AFTER_JOURNAL);
            ASSERT_EQ(rc2, reachable ? VIGIL_ECANCELED : VIGIL_OK);
            for (int i = 0; i < 2; i++)
                vg_tool_outcome_release(&o[i]);

            /* restart: a new process, the host's effects still there */
            test_rt_reopen(&t);
            register_host_tools(t.rt);
            int settled = 0;
            ASSERT_OK(vg_tool_executor_recover(executor(&t), &settled, E));
            run_seq(&t, a, tool, r, 0, VG_CRASH_NONE, NULL);

            ASSERT_EQ(r[0].replayed, 1); /* the first call had finished before the crash */
            ASSERT_EQ(host_applied(r[0].operation_id), 1);
            ASSERT_EQ(r[2].code, VG_TOOL_OK);
            ASSERT_EQ(observations(&t, a, "last"), 1);
            int effect_ran = at >= VG_CRASH_AFTER_EFFECT && !(tx && at == VG_CRASH_AFTER_EFFECT);
            if (tx) {
                ASSERT_EQ(r[1].code, VG_TOOL_OK);
                ASSERT_EQ(observations(&t, a, "middle"), 1);
            } else if (!strcmp(tool, "host_write") &&
                       (at == VG_CRASH_AFTER_STARTED || at == VG_CRASH_AFTER_EFFECT)) {
                /* non-idempotent and unknowable: held for a human, not repeated */
                ASSERT_EQ(r[1].code, VG_TOOL_IN_DOUBT);
                ASSERT_EQ(host_applied(r[1].operation_id), effect_ran);
                json_t *items = NULL;
                ASSERT_OK(vg_tool_in_doubt_list(t.env, a, &items, E));
                ASSERT_EQ(json_array_size(items), 1);
                json_decref(items);
                /* the human decides: applied if it ran, else retry */
                ASSERT_OK(
                    vg_tool_in_doubt_resolve(t.env, r[1].operation_id, effect_ran, "alice", E));
                struct vg_tool_outcome again;
                call_tool(&t, a, "wake-42", tool, "{\"category\":\"cat-a\",\"title\":\"second\"}",
                          &again);
                ASSERT_EQ(again.code, VG_TOOL_OK);
                ASSERT_EQ(again.replayed, effect_ran);
                ASSERT_EQ(host_applied(again.operation_id), 1);
                vg_tool_outcome_release(&again);
            } else {
                ASSERT_EQ(r[1].code, VG_TOOL_OK);
                ASSERT_EQ(host_applied(r[1].operation_id), 1);
            }
            /* every operation ends finished, every saga at agent_done */
            struct vg_query q = {.kind = "operation", .k1 = "started"};
            int64_t n = -1;
            ASSERT_OK(vg_store_count(t.env->store, &q, &n, E));
            ASSERT_EQ(n, 0);
            struct vg_query qs = {.kind = "saga", .k1 = "journal_done"};
            ASSERT_OK(vg_store_count(t.env->store, &qs, &n, E));
            ASSERT_EQ(n, 0);
            for (int i = 0; i < 3; i++)
                vg_tool_outcome_release(&r[i]);
            ASSERT_OK(vg_spine_verify(t.env, a, NULL, E));
            test_rt_close(&t);
        }
    }
}

static int64_t records_of(struct test_rt *t, const char *kind)
{
    struct vg_query q = {.kind = kind};
    int64_t n = -1;
    ASSERT_OK(vg_store_count(t->env->store, &q, &n, E));
    return n;
}

/* A transactional provider's mutating call is one transaction: its start (the action, the
 * started operation, the charge), its effect and its finish commit together, so a crash before
 * that commit (here, after its start was written) leaves nothing of the call, neither an action
 * nor a started operation for recovery to settle, and the call runs once when made again.
 * Before, the start was a commit of its own and the crash left both. */
TEST(a_transactional_call_that_dies_before_its_commit_leaves_nothing)
{
    struct test_rt t;
    char a[37];
    struct vg_tool_outcome o = {0};
    open_rt(&t, "tool_tx_one_commit");
    make_agent(&t, CFG_ALL, a);
    int64_t ops = records_of(&t, "operation");
    json_t *j = json_loads("{\"notes\":[\"once\"]}", 0, NULL);
    struct vg_tool_call_ctx ctx = {.agent_id = a, .run_key = "wake-1"};
    vg_tool_executor_test_crash(executor(&t), VG_CRASH_AFTER_STARTED);
    ASSERT_CODE(VIGIL_ECANCELED,
                vg_tool_executor_call(executor(&t), &ctx, "record_observations", j, &o, NULL));
    json_decref(j);
    vg_tool_outcome_release(&o);
    test_rt_reopen(&t);
    register_host_tools(t.rt);
    ASSERT_EQ(records_of(&t, "operation"), ops);
    ASSERT_EQ(count_msgs(&t, a, "wake-1", "action"), 0);
    int settled = -1;
    ASSERT_OK(vg_tool_executor_recover(executor(&t), &settled, E));
    ASSERT_EQ(settled, 0);
    call_tool(&t, a, "wake-1", "record_observations", "{\"notes\":[\"once\"]}", &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    ASSERT_EQ(o.replayed, 0);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(count_msgs(&t, a, "wake-1", "observation"), 1);
    ASSERT_EQ(count_msgs(&t, a, "wake-1", "action"), 1);
    test_rt_close(&t);
}

/* The same call made by another process between the gate's "not run yet" and this call's write
 * (a hand call repeated: `vigil tool call` twice): the call's transaction reads the operation
 * again under the write lock and answers with the other's result, replayed; the effect ran
 * once. Before, the start rewrote the other's finished operation as started and ran the effect
 * again. */
struct racer {
    struct test_rt *t;
    const char *agent;
    int ran;
};

static vigil_code race_before_start(void *user, enum vg_tool_step step, vigil_error *err)
{
    struct racer *r = user;
    (void)err;
    if (step != VG_TOOL_STEP_BEFORE_STARTED || r->ran++)
        return VIGIL_OK;
    vigil_runtime *other = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = r->t->path};
    char *out = NULL;
    ASSERT_OK(vigil_runtime_open(&o, &other, E));
    ASSERT_OK(vigil_tool_call(other, r->agent, "wake-2", "record_observations",
                              "{\"notes\":[\"raced\"]}", &out, E));
    vigil_free(out);
    vigil_runtime_close(other);
    return VIGIL_OK;
}

TEST(a_call_another_process_finished_first_is_replayed_not_run_again)
{
    struct test_rt t;
    char a[37];
    struct vg_tool_outcome o = {0};
    open_rt(&t, "tool_tx_raced");
    make_agent(&t, CFG_ALL, a);
    struct racer r = {&t, a, 0};
    vg_tool_executor_set_step_hook(executor(&t), race_before_start, &r);
    call_tool(&t, a, "wake-2", "record_observations", "{\"notes\":[\"raced\"]}", &o);
    vg_tool_executor_set_step_hook(executor(&t), NULL, NULL);
    ASSERT_EQ(r.ran, 1);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    ASSERT_EQ(o.replayed, 1);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(count_msgs(&t, a, "wake-2", "observation"), 1);
    test_rt_close(&t);
}

/* A call answered "retry" that goes in doubt again reaches a person again, with the first answer
 * kept in its history. */
TEST(a_retried_operation_that_goes_in_doubt_again_is_raised_again)
{
    struct test_rt t;
    char a[37];
    open_rt(&t, "tool_in_doubt_twice");
    make_agent(&t, CFG_ALL, a);
    const char *args = "{\"category\":\"cat-a\",\"title\":\"twice\"}";
    char op_id[128] = "";
    for (int round = 0; round < 2; round++) {
        /* The process dies after recording "started", before the effect. */
        json_t *j = json_loads(args, 0, NULL);
        struct vg_tool_call_ctx ctx = {.agent_id = a, .run_key = "wake-7"};
        struct vg_tool_outcome o = {0};
        vg_tool_executor_test_crash(executor(&t), VG_CRASH_AFTER_STARTED);
        ASSERT_CODE(VIGIL_ECANCELED,
                    vg_tool_executor_call(executor(&t), &ctx, "host_write", j, &o, NULL));
        json_decref(j);
        vg_tool_outcome_release(&o);
        test_rt_reopen(&t);
        register_host_tools(t.rt);
        int settled = 0;
        ASSERT_OK(vg_tool_executor_recover(executor(&t), &settled, E));
        struct vg_tool_outcome held;
        call_tool(&t, a, "wake-7", "host_write", args, &held);
        ASSERT_EQ(held.code, VG_TOOL_IN_DOUBT);
        snprintf(op_id, sizeof op_id, "%s", held.operation_id);
        vg_tool_outcome_release(&held);
        json_t *items = NULL;
        ASSERT_OK(vg_tool_in_doubt_list(t.env, a, &items, E));
        ASSERT_EQ(json_array_size(items), 1);
        json_t *history = json_object_get(json_array_get(items, 0), "history");
        ASSERT_EQ(json_array_size(history), (size_t)round);
        if (round == 1)
            ASSERT_STREQ(json_string_value(json_object_get(json_array_get(history, 0), "status")),
                         "retry");
        json_decref(items);
        ASSERT_EQ(host_applied(op_id), 0);
        ASSERT_OK(vg_tool_in_doubt_resolve(t.env, op_id, 0, "alice", E));
    }
    struct vg_tool_outcome done;
    call_tool(&t, a, "wake-7", "host_write", args, &done);
    ASSERT_EQ(done.code, VG_TOOL_OK);
    ASSERT_EQ(host_applied(done.operation_id), 1);
    vg_tool_outcome_release(&done);
    test_rt_close(&t);
}

static int64_t lookups_of(struct test_rt *t, const char *op_id, const char **status)
{
    static char st[32];
    json_t *op = NULL;
    ASSERT_OK(vg_env_get_json(t->env, "operation", op_id, &op, NULL, E));
    snprintf(st, sizeof st, "%s", json_string_value(json_object_get(op, "status")));
    *status = st;
    int64_t n = json_integer_value(json_object_get(op, "lookups"));
    json_decref(op);
    return n;
}

/* A reconcilable operation whose lookup keeps finding nothing is not looked up at every start
 * forever: each miss waits a doubling backoff (on the clock), and the fifth makes it an in-doubt
 * item for a person. */
TEST(lookups_that_find_nothing_back_off_then_go_in_doubt)
{
    struct test_rt t;
    char a[37];
    open_rt(&t, "tool_lookup_backoff");
    make_agent(&t, CFG_ALL, a);
    json_t *j = json_loads("{\"category\":\"cat-a\",\"title\":\"lost\"}", 0, NULL);
    struct vg_tool_call_ctx ctx = {.agent_id = a, .run_key = "wake-9"};
    struct vg_tool_outcome o = {0};
    vg_tool_executor_test_crash(executor(&t), VG_CRASH_AFTER_STARTED);
    ASSERT_CODE(VIGIL_ECANCELED,
                vg_tool_executor_call(executor(&t), &ctx, "host_sync", j, &o, NULL));
    char op[65];
    ASSERT_OK(vg_tool_operation_id(a, "wake-9", "host_sync", j, "cat-a", "category=cat-a;", op, E));
    json_decref(j);
    vg_tool_outcome_release(&o);
    test_rt_reopen(&t);
    register_host_tools(t.rt);
    const char *status = NULL;
    int settled = -1;
    ASSERT_OK(vg_tool_executor_recover(executor(&t), &settled, E));
    ASSERT_EQ(lookups_of(&t, op, &status), 1);
    ASSERT_STREQ(status, "started");
    ASSERT_EQ(settled, 0);
    /* before its backoff has passed, a start does not ask again */
    ASSERT_OK(vg_tool_executor_recover(executor(&t), NULL, E));
    ASSERT_EQ(lookups_of(&t, op, &status), 1);
    int64_t wait = 1000;
    for (int tries = 2; tries <= 4; tries++, wait *= 2) {
        vg_test_clock_advance(&t.clock, wait - 1);
        ASSERT_OK(vg_tool_executor_recover(executor(&t), NULL, E));
        ASSERT_EQ(lookups_of(&t, op, &status), tries - 1);
        vg_test_clock_advance(&t.clock, 1);
        ASSERT_OK(vg_tool_executor_recover(executor(&t), NULL, E));
        ASSERT_EQ(lookups_of(&t, op, &status), tries);
    }
    vg_test_clock_advance(&t.clock, wait);
    ASSERT_OK(vg_tool_executor_recover(executor(&t), &settled, E));
    ASSERT_EQ(settled, 1);
    lookups_of(&t, op, &status);
    ASSERT_STREQ(status, "in_doubt");
    json_t *items = NULL;
    ASSERT_OK(vg_tool_in_doubt_list(t.env, a, &items, E));
    ASSERT_EQ(json_array_size(items), 1);
    ASSERT_CONTAINS(json_string_value(json_object_get(json_array_get(items, 0), "reason")),
                    "found no effect 5 times");
    json_decref(items);
    ASSERT_EQ(host_applied(op), 0);
    test_rt_close(&t);
}

/* proves: S3-017 */
TEST(saga_log_tracks_outside_writes)
{
    struct test_rt t;
    char a[37];
    struct vg_tool_outcome o;
    json_t *s = NULL;
    open_rt(&t, "tool_saga");
    make_agent(&t, CFG_ALL, a);
    call_tool(&t, a, "s", "host_write", "{\"category\":\"cat-a\",\"title\":\"x\"}", &o);
    ASSERT_OK(vg_env_get_json(t.env, "saga", o.operation_id, &s, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(s, "phase")), "agent_done");
    ASSERT_STREQ(json_string_value(json_object_get(s, "status")), "completed");
    ASSERT_STREQ(json_string_value(json_object_get(s, "tool_name")), "host_write");
    ASSERT_STREQ(json_string_value(json_object_get(s, "run_key")), "s");
    json_decref(s);
    vg_tool_outcome_release(&o);
    /* agent-domain tools commit with their records: no saga */
    call_tool(&t, a, "s", "set_report", "{\"scope\":\"daily\",\"markdown\":\"x\"}", &o);
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_env_get_json(t.env, "saga", o.operation_id, &s, NULL, &err));
    vg_tool_outcome_release(&o);
    test_rt_close(&t);
}

/* proves: S0-049 S0-166 */
TEST(public_api_calls_through_the_same_gate)
{
    struct test_rt t;
    char a[37];
    char *out = NULL;
    vigil_error err = {0};
    open_rt(&t, "tool_public");
    make_agent(&t, CFG_ALL, a);
    ASSERT_OK(vigil_tool_call(t.rt, a, "p", "host_write",
                              "{\"category\":\"cat-a\",\"title\":\"x\"}", &out, E));
    ASSERT_CONTAINS(out, "\"status\":\"success\"");
    vigil_free(out);
    ASSERT_CODE(VIGIL_EDENIED,
                vigil_tool_call(t.rt, a, "p", "host_write",
                                "{\"category\":\"cat-z\",\"title\":\"x\"}", &out, &err));
    ASSERT_CONTAINS(err.message, "out_of_scope");
    ASSERT_CONTAINS(out, "\"error_code\":\"out_of_scope\"");
    vigil_free(out);
    ASSERT_CODE(VIGIL_ECONFIRM,
                vigil_tool_call(t.rt, a, "p", "host_delete",
                                "{\"category\":\"cat-a\",\"title\":\"x\"}", &out, &err));
    ASSERT_CONTAINS(out, "\"approval_id\"");
    vigil_free(out);
    ASSERT_CODE(VIGIL_EPARSE, vigil_tool_call(t.rt, a, "p", "host_write", "{", &out, &err));
    ASSERT_OK(vigil_tool_list_for_agent(t.rt, a, &out, E));
    ASSERT_CONTAINS(out, "\"name\":\"host_read\"");
    ASSERT_CONTAINS(out, "\"input_schema\"");
    vigil_free(out);
    /* preview: nothing changes, recorded as a pair */
    struct vg_tool_outcome o;
    json_t *args = json_pack("{s:s, s:s}", "category", "cat-a", "title", "y");
    struct vg_tool_call_ctx ctx = {.agent_id = a, .run_key = "p", .preview_only = 1};
    ASSERT_OK(vg_tool_executor_call(executor(&t), &ctx, "host_delete", args, &o, E));
    ASSERT_EQ(o.code, VG_TOOL_OK);
    ASSERT_STREQ(json_string_value(json_object_get(o.result, "would")), "host_delete");
    ASSERT_EQ(g_host.total, 1);
    vg_tool_outcome_release(&o);
    json_decref(args);
    test_rt_close(&t);
}

/* A caller that asked for the finishing transaction (the agent loop) and died before committing
 * it loses the result, not the started operation: the next call settles it from the saga
 * without running the effect again. A direct call commits its own. */
TEST(a_finish_left_open_and_lost_settles_without_a_second_effect)
{
    struct test_rt t;
    char a[37];
    struct vg_tool_outcome o;
    json_t *op = NULL;
    open_rt(&t, "tool_finish_open");
    make_agent(&t, CFG_ALL, a);
    int before = g_host.total;
    json_t *args = json_pack("{s:s, s:s}", "category", "cat-a", "title", "open");
    struct vg_tool_call_ctx ctx = {.agent_id = a, .run_key = "fo", .finish_open = 1};
    ASSERT_OK(vg_tool_executor_call(executor(&t), &ctx, "host_write", args, &o, E));
    ASSERT_EQ(o.code, VG_TOOL_OK);
    ASSERT(o.tx_open);
    ASSERT(vg_store_in_tx(t.env->store));
    ASSERT_EQ(g_host.total, before + 1);
    char op_id[65];
    snprintf(op_id, sizeof op_id, "%s", o.operation_id);
    vg_tool_outcome_release(&o);
    ASSERT_OK(vg_store_rollback(t.env->store, E)); /* the caller died before its commit */
    ASSERT_OK(vg_env_get_json(t.env, "operation", op_id, &op, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(op, "status")), "started");
    json_decref(op);
    ctx.finish_open = 0;
    ASSERT_OK(vg_tool_executor_call(executor(&t), &ctx, "host_write", args, &o, E));
    ASSERT(!o.tx_open);
    ASSERT(!vg_store_in_tx(t.env->store));
    ASSERT_EQ(g_host.total, before + 1); /* settled, not run again */
    vg_tool_outcome_release(&o);
    ASSERT_OK(vg_env_get_json(t.env, "operation", op_id, &op, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(op, "status")), "finished");
    json_decref(op);
    json_decref(args);
    test_rt_close(&t);
}

/* proves: S0-166 S0-153 */
TEST(loop_adapter_speaks_the_loop_interface)
{
    struct test_rt t;
    char a[37];
    struct vg_loop_executor le;
    struct vg_loop_tool_outcome o = {0};
    json_t *tools = NULL;
    open_rt(&t, "tool_loop_adapter");
    make_agent(&t, CFG_ALL, a);
    vg_tool_loop_executor(executor(&t), &le);
    ASSERT_EQ(le.records_messages, 1);
    ASSERT_OK(le.visible_tools(le.self, t.env, a, NULL, &tools, E));
    ASSERT_EQ(json_array_size(tools), 7);
    json_decref(tools);
    struct vg_loop_call_ctx cc = {.agent_id = a,
                                  .run_key = "L",
                                  .wake_reason = "user",
                                  .thread_id = "loop-thread",
                                  .tool_call_id = "call_1"};
    /* the model's text that is not even JSON: refused by the schema, run continues */
    ASSERT_OK(le.call(le.self, t.env, &cc, "host_write", "{oops", &o, E));
    ASSERT_EQ(o.is_error, 1);
    ASSERT_STREQ(o.error_code, "invalid_arguments");
    ASSERT_EQ(o.stop_run, 0);
    vg_free(o.content);
    /* user wakes are user_initiated: host_write allows only manual and timer */
    ASSERT_OK(le.call(le.self, t.env, &cc, "host_write", "{\"category\":\"cat-a\",\"title\":\"x\"}",
                      &o, E));
    ASSERT_STREQ(o.error_code, "not_allowed");
    vg_free(o.content);
    ASSERT_OK(le.call(le.self, t.env, &cc, "set_report",
                      "{\"scope\":\"current\",\"markdown\":\"m\"}", &o, E));
    ASSERT_EQ(o.is_error, 0);
    ASSERT_EQ(strlen(o.operation_id), 64);
    ASSERT_CONTAINS(o.content, "report_id");
    /* what the loop gets is the recorded toolResult's content itself, encoded once: the same
     * text a later process reads back from the store */
    json_t *latest = NULL;
    ASSERT_OK(vg_message_latest(t.env, a, "loop-thread", 1, &latest, E));
    json_t *last = json_array_get(latest, json_array_size(latest) - 1);
    ASSERT_STREQ(json_string_value(json_object_get(last, "kind")), "toolResult");
    ASSERT_STREQ(json_string_value(json_object_get(last, "content")), o.content);
    json_decref(latest);
    vg_free(o.content);
    /* a kill switch asks the loop to end the run */
    ASSERT_OK(vg_kill_set(t.env, NULL, NULL, 1, NULL, E));
    ASSERT_OK(le.call(le.self, t.env, &cc, "set_report", "{\"scope\":\"daily\",\"markdown\":\"m\"}",
                      &o, E));
    ASSERT_STREQ(o.error_code, "killed");
    ASSERT_EQ(o.stop_run, 1);
    vg_free(o.content);
    test_rt_close(&t);
}

int main(void)
{
    RUN(success_records_action_and_result_with_envelopes);
    RUN(refusals_get_their_code_and_are_recorded);
    RUN(operation_ids_replay_instead_of_rerunning);
    RUN(a_mutating_call_without_an_operation_id_is_refused);
    RUN(operation_ids_are_scoped_to_their_agent);
    RUN(operation_ids_of_real_arguments_stay_those_before_the_short_reals);
    RUN(kill_switches_stop_mutating_tools_at_once);
    RUN(budgets_run_out_mid_sequence_and_reset_next_day);
    RUN(budget_usage_is_written_canonical_and_a_record_with_more_fields_keeps_them);
    RUN(a_grant_narrows_its_own_run_and_no_other);
    RUN(scopes_nest_and_a_grant_keeps_the_narrower);
    RUN(approvals_are_durable_idempotent_and_expire);
    RUN(an_approval_is_not_lost_when_its_run_is_cut_short);
    RUN(a_superseded_caller_cannot_start_an_operation);
    RUN(crash_at_every_point_repeats_no_side_effect);
    RUN(a_transactional_call_that_dies_before_its_commit_leaves_nothing);
    RUN(a_call_another_process_finished_first_is_replayed_not_run_again);
    RUN(a_retried_operation_that_goes_in_doubt_again_is_raised_again);
    RUN(lookups_that_find_nothing_back_off_then_go_in_doubt);
    RUN(saga_log_tracks_outside_writes);
    RUN(public_api_calls_through_the_same_gate);
    RUN(a_finish_left_open_and_lost_settles_without_a_second_effect);
    RUN(loop_adapter_speaks_the_loop_interface);
    return 0;
}
