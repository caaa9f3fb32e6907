/*
 * test_deno_gate.c: execute_code with TypeScript through the gate: an agent whose manifest says
 * sandbox.language typescript runs its programs in Deno; the program's vigil.call goes through
 * the same executor (the nested call is the agent's own action and toolResult), its file lands
 * in the agent's own working directory, and the journal's toolResult names the layers. The
 * call's language argument overrides the manifest. Skips (77) without deno; fails when
 * VIGIL_REQUIRE_DENO=1.
 */
#include "base/common.h"

#include "os/fs.h"
#include "sandbox/sandbox_helpers.h"
#include "tool/tool_helpers.h"

#define CFG_TS                                                                                     \
    "{\"tools\":[\"execute_code\",\"host_read\"],\"capabilities\":[\"code_execution\","            \
    "\"taskRead\"],\"sandbox\":{\"language\":\"typescript\",\"limits\":{\"wall_ms\":30000}}}"

static char root[4096];
static struct test_rt t;

static void run(const char *agent, const char *run_key, json_t *args, struct vg_tool_outcome *o)
{
    char *text = json_dumps(args, JSON_COMPACT);
    call_tool(&t, agent, run_key, "execute_code", text, o);
    free(text);
    json_decref(args);
}

/* proves: S4-019, S4-022 */
TEST(typescript_program_calls_tools_through_the_gate)
{
    char a[37];
    make_agent(&t, CFG_TS, a);
    struct vg_tool_outcome o;
    run(a, "r1",
        json_pack("{s:s}", "code",
                  "const r = vigil.call('host_read', {});\n"
                  "const n: number = r.items.length + 42;\n"
                  "vigil.write('answer.txt', String(n));\n"
                  "console.log('computed', n);\n"
                  "return {answer: n, back: vigil.read('answer.txt')};"),
        &o);
    if (o.code != VG_TOOL_OK)
        TEST_FAIL_("execute_code failed: %s %s", o.error_code, o.error_message);
    json_t *res = json_object_get(o.result, "result");
    int64_t n = json_integer_value(json_object_get(res, "answer"));
    ASSERT(n >= 42);
    char want[32];
    snprintf(want, sizeof want, "%lld", (long long)n);
    ASSERT_STREQ(json_string_value(json_object_get(res, "back")), want);
    char out[64];
    snprintf(out, sizeof out, "computed %lld\n", (long long)n);
    ASSERT_STREQ(json_string_value(json_object_get(o.result, "output")), out);
    char path[8300], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/%s/answer.txt", root, a);
    ASSERT_OK(vg_fs_read_file(path, 100, &text, &len, E));
    ASSERT_STREQ(text, want);
    vg_free(text);
    ASSERT_EQ(count_msgs(&t, a, "r1", "action"), 2);
    ASSERT_EQ(count_msgs(&t, a, "r1", "toolResult"), 2);
    json_t *m = message(&t, o.result_id);
    char *body = json_dumps(m, JSON_COMPACT);
    ASSERT_CONTAINS(body, "seccomp");
    ASSERT_CONTAINS(body, "landlock");
    free(body);
    json_decref(m);
    vg_tool_outcome_release(&o);
    sbx_assert_no_children();
}

TEST(language_argument_overrides_the_manifest)
{
    char a[37];
    make_agent(&t, CFG_TS, a);
    struct vg_tool_outcome o;
    run(a, "r2", json_pack("{s:s, s:s}", "code", "return _VERSION", "language", "lua"), &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    ASSERT_STREQ(json_string_value(json_object_get(o.result, "result")), "Lua 5.4");
    vg_tool_outcome_release(&o);
    run(a, "r3", json_pack("{s:s}", "code", "return typeof Deno"), &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    ASSERT_STREQ(json_string_value(json_object_get(o.result, "result")), "object");
    vg_tool_outcome_release(&o);
    /* host_write is not in the manifest: refused inside the program too */
    run(a, "r4",
        json_pack("{s:s}", "code",
                  "try { vigil.call('host_write', {category: 'x'}); return 'ran' } "
                  "catch (e) { return e.code }"),
        &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    ASSERT_STREQ(json_string_value(json_object_get(o.result, "result")), "not_allowed");
    vg_tool_outcome_release(&o);
}

int main(void)
{
    const char *deno = sbx_deno_path();
    snprintf(root, sizeof root, "%s", vg_test_tmpdir("sandbox-deno-gate-root"));
    char cfg[4200], text[9000];
    snprintf(cfg, sizeof cfg, "%s/config.json", root);
    snprintf(text, sizeof text, "{\"sandbox\":{\"root\":\"%s\",\"deno\":\"%s\"}}", root, deno);
    ASSERT_OK(vg_fs_write_file(cfg, text, strlen(text), E));
    setenv("VIGIL_CONFIG", cfg, 1);
    test_rt_open(&t, "sandbox-deno-gate");
    register_host_tools(t.rt);
    RUN(typescript_program_calls_tools_through_the_gate);
    RUN(language_argument_overrides_the_manifest);
    test_rt_close(&t);
    return 0;
}
