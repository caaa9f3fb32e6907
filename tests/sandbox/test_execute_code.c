/*
 * test_execute_code.c: the execute_code tool through the gate: granted only by the agent's
 * capabilities and manifest; a program calls host tools through the same executor (each call
 * recorded as the agent's own, with its operation id), reads and writes files in its agent's
 * own working directory, and its failures come back as structured errors; the toolResult in
 * the journal names the confinement layers applied.
 */
#include "base/common.h"

#include "journal/journal.h"
#include "os/fs.h"
#include "sandbox/sandbox_helpers.h"
#include "tool/tool_helpers.h"

#include <sys/stat.h>
#include <unistd.h>

#define CFG_CODE                                                                                   \
    "{\"tools\":[\"execute_code\",\"host_read\"],\"capabilities\":[\"code_execution\","            \
    "\"taskRead\"],\"sandbox\":{\"limits\":{\"wall_ms\":10000,\"cpu_ms\":1000,"                    \
    "\"memory_bytes\":33554432}}}"
#define CFG_NO_CAP "{\"tools\":[\"execute_code\"],\"capabilities\":[]}"

static char root[4096];
static struct test_rt t;

static void run(const char *agent, const char *run_key, const char *code, struct vg_tool_outcome *o)
{
    json_t *args = json_pack("{s:s}", "code", code);
    char *text = json_dumps(args, JSON_COMPACT);
    call_tool(&t, agent, run_key, "execute_code", text, o);
    free(text);
    json_decref(args);
}

/* proves: S4-059 (execute_code(code); the memory built-ins: tests/memory/test_tools.c) */
TEST(program_reads_tools_and_saves_answer)
{
    char a[37];
    make_agent(&t, CFG_CODE, a);
    struct vg_tool_outcome o;
    run(a, "r1",
        "local r = vigil.call('host_read', {})\n"
        "local n = #r.items + 41 + 1\n"
        "vigil.write('answer.txt', tostring(n))\n"
        "print('computed', n)\n"
        "return {answer = n, back = vigil.read('answer.txt')}",
        &o);
    if (o.code != VG_TOOL_OK)
        TEST_FAIL_("execute_code failed: %s %s", o.error_code, o.error_message);
    ASSERT_EQ(json_integer_value(json_object_get(json_object_get(o.result, "result"), "answer")),
              42);
    ASSERT_STREQ(json_string_value(json_object_get(json_object_get(o.result, "result"), "back")),
                 "42");
    ASSERT_STREQ(json_string_value(json_object_get(o.result, "output")), "computed\t42\n");
    /* the file is in the agent's own directory */
    char path[8300], *text = NULL;
    size_t n = 0;
    snprintf(path, sizeof path, "%s/%s/answer.txt", root, a);
    ASSERT_OK(vg_fs_read_file(path, 100, &text, &n, E));
    ASSERT_STREQ(text, "42");
    vg_free(text);
    /* the nested call is the agent's own: an action and a toolResult on the same thread */
    ASSERT_EQ(count_msgs(&t, a, "r1", "action"), 2);
    ASSERT_EQ(count_msgs(&t, a, "r1", "toolResult"), 2);
    /* and the journal's toolResult names the layers */
    json_t *m = message(&t, o.result_id);
    char *body = json_dumps(m, JSON_COMPACT);
    ASSERT_CONTAINS(body, "seccomp");
    ASSERT_CONTAINS(body, "landlock");
    free(body);
    json_decref(m);
    vg_tool_outcome_release(&o);
    sbx_assert_no_children();
}

TEST(granted_only_by_capability)
{
    char a[37];
    make_agent(&t, CFG_NO_CAP, a);
    struct vg_tool_outcome o;
    run(a, "r1", "return 1", &o);
    ASSERT_EQ(o.code, VG_TOOL_NOT_ALLOWED);
    vg_tool_outcome_release(&o);
}

TEST(bridge_goes_through_the_gate)
{
    char a[37];
    make_agent(&t, CFG_CODE, a);
    struct vg_tool_outcome o;
    /* host_write is not in this agent's manifest: the gate refuses it inside the program too */
    run(a, "r2",
        "local ok, e = pcall(vigil.call, 'host_write', {category = 'x'})\n"
        "return {ok = ok, code = e.code}",
        &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    ASSERT_STREQ(json_string_value(json_object_get(json_object_get(o.result, "result"), "code")),
                 "not_allowed");
    vg_tool_outcome_release(&o);
    run(a, "r3", "return vigil.call('execute_code', {code = 'return 1'})", &o);
    ASSERT_EQ(o.code, VG_TOOL_FAILED);
    ASSERT_CONTAINS(o.error_message, "bridge_error");
    vg_tool_outcome_release(&o);
}

/* Each refusal inside an execution is in the agent's journal with its reason: the toolResult
 * of execute_code lists them (op, target, code, reason), beside the layers applied. */
TEST(refusals_are_journaled)
{
    char a[37];
    make_agent(&t, CFG_CODE, a);
    struct vg_tool_outcome o;
    run(a, "r4",
        "pcall(vigil.read, '../outside.txt')\n"
        "pcall(vigil.fetch, 'http://169.254.169.254/latest/meta-data/')\n"
        "pcall(vigil.call, 'host_write', {category = 'x'})\n"
        "return 'done'",
        &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    json_t *m = message(&t, o.result_id);
    json_t *content = json_loads(json_string_value(json_object_get(m, "content")), 0, NULL);
    json_t *res = json_object_get(content, "result");
    ASSERT_EQ(json_integer_value(json_object_get(res, "refusals_total")), 3);
    static const char *const want[][4] = {
        {"read", "denied", "../outside.txt", "outside the working directory"},
        {"fetch", "not_allowed", "http://169.254.169.254/latest/meta-data/", "allow_hosts"},
        {"tool", "not_allowed", "host_write", "may not call"}};
    json_t *refusals = json_object_get(res, "refusals");
    ASSERT_EQ(json_array_size(refusals), 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *one = json_array_get(refusals, i);
        ASSERT_STREQ(json_string_value(json_object_get(one, "op")), want[i][0]);
        ASSERT_STREQ(json_string_value(json_object_get(one, "code")), want[i][1]);
        ASSERT_STREQ(json_string_value(json_object_get(one, "target")), want[i][2]);
        ASSERT_CONTAINS(json_string_value(json_object_get(one, "reason")), want[i][3]);
    }
    ASSERT(json_array_size(json_object_get(res, "layers")) > 0);
    json_decref(content);
    json_decref(m);
    vg_tool_outcome_release(&o);
    sbx_assert_no_children();
}

/* proves: S4-053 */
TEST(errors_are_structured)
{
    char a[37];
    make_agent(&t, CFG_CODE, a);
    static const char *const cases[][2] = {
        {"while true do end", "timeout"}, /* wall 10 s, CPU 1 s: the CPU cap first */
        {"return (", "syntax_error"},
        {"error('no')", "runtime_error"},
        {"local s = 'x' while true do s = s .. s end", "memory_limit"},
    };
    for (size_t i = 0; i < VG_ARRAY_LEN(cases); i++) {
        struct vg_tool_outcome o;
        char rk[16];
        snprintf(rk, sizeof rk, "e%zu", i);
        run(a, rk, cases[i][0], &o);
        ASSERT_EQ(o.code, VG_TOOL_FAILED);
        if (i == 0) /* whichever cap comes first, it is a limit, not a crash */
            ASSERT(strstr(o.error_message, "cpu_limit") || strstr(o.error_message, "timeout"));
        else
            ASSERT_CONTAINS(o.error_message, cases[i][1]);
        vg_tool_outcome_release(&o);
    }
    sbx_assert_no_children();
}

/* Says yes the second time it is asked: the run was cancelled while the program ran. */
static int cancelled_on_second_ask(void *user)
{
    int *asked = user;
    return ++*asked >= 2;
}

/* A program whose run a person cancels is killed at once, not left to run out its wall time
 * (trial L6): the call answers canceled, not a timeout and not in doubt, and what the program
 * wrote before stays in its working directory. Without the cancel poll the program runs its
 * 20 s wall time and answers timeout. */
TEST(a_program_whose_run_is_cancelled_is_killed_at_once_and_the_call_is_canceled)
{
    char a[37], path[8300], *text = NULL;
    size_t n = 0;
    int asked = 0;
    make_agent(&t,
               "{\"tools\":[\"execute_code\"],\"capabilities\":[\"code_execution\"],"
               "\"sandbox\":{\"limits\":{\"wall_ms\":20000,\"cpu_ms\":20000}}}",
               a);
    json_t *args =
        json_pack("{s:s}", "code", "vigil.write('before.txt', 'kept')\nwhile true do end");
    struct vg_tool_call_ctx ctx = {.agent_id = a,
                                   .run_key = "cancelled-run",
                                   .cancelled = cancelled_on_second_ask,
                                   .cancelled_user = &asked};
    struct vg_tool_outcome o;
    ASSERT_OK(vg_tool_executor_call(executor(&t), &ctx, "execute_code", args, &o, E));
    json_decref(args);
    ASSERT_EQ(o.code, VG_TOOL_CANCELED);
    ASSERT_STREQ(o.error_code, "canceled");
    ASSERT_CONTAINS(o.error_message, "its run was cancelled");
    ASSERT_EQ(asked, 2); /* asked once a second: killed at the second ask, about 2 s in */
    ASSERT_STREQ(vg_journal_tool_status_of(1, o.error_code), "canceled");
    snprintf(path, sizeof path, "%s/%s/before.txt", root, a);
    ASSERT_OK(vg_fs_read_file(path, 100, &text, &n, E));
    ASSERT_STREQ(text, "kept");
    vg_free(text);
    vg_tool_outcome_release(&o);
    sbx_assert_no_children();
}

int main(void)
{
    snprintf(root, sizeof root, "%s", vg_test_tmpdir("sandbox-exec-root"));
    char cfg[4200], text[4400];
    snprintf(cfg, sizeof cfg, "%s/config.json", root);
    snprintf(text, sizeof text, "{\"sandbox\":{\"root\":\"%s\"}}", root);
    ASSERT_OK(vg_fs_write_file(cfg, text, strlen(text), E));
    setenv("VIGIL_CONFIG", cfg, 1);
    test_rt_open(&t, "sandbox-exec");
    register_host_tools(t.rt);
    RUN(program_reads_tools_and_saves_answer);
    RUN(granted_only_by_capability);
    RUN(bridge_goes_through_the_gate);
    RUN(refusals_are_journaled);
    RUN(errors_are_structured);
    RUN(a_program_whose_run_is_cancelled_is_killed_at_once_and_the_call_is_canceled);
    test_rt_close(&t);
    return 0;
}
