/*
 * test_deno.c: the TypeScript adapter end to end: a program runs in a fresh `deno run` inside
 * the sandbox's layers, reaches the host only through the bridge (tools, files, fetch), and
 * every escape the seed names (spawn, environment, files outside, network, sleeping forever)
 * is denied. Skips (77) without a deno binary; fails when VIGIL_REQUIRE_DENO=1.
 */
#include "base/common.h"

#include "sandbox/sandbox_helpers.h"

#include "os/fs.h"

#include <unistd.h>

static char wd[4096], outside[4400];
static struct vg_code_runtime *deno;

static void run_ts(const char *code, const struct vg_code_host *host, int wall_ms,
                   struct vg_code_result *r)
{
    sbx_run(wd, code, wall_ms, host, r);
}

static const char *expect_ok(const char *code, const struct vg_code_host *host)
{
    return sbx_expect_ok_host(wd, code, host);
}

static void expect_error(const char *code, const char *error_code, const char *msg_part)
{
    sbx_expect_error(wd, code, error_code, msg_part);
}

/* proves: S4-019 */
TEST(returns_values_and_prints)
{
    ASSERT_STREQ(expect_ok("return 1", NULL), "1");
    ASSERT_STREQ(expect_ok("const n: number = 41; return {a: n + 1, b: [true, 'x']}", NULL),
                 "{\"a\":42,\"b\":[true,\"x\"]}");
    ASSERT_STREQ(expect_ok("const x = 2;", NULL), "null");
    ASSERT_STREQ(expect_ok("return await Promise.resolve('later')", NULL), "\"later\"");
    struct vg_code_result r;
    run_ts("console.log('hello', 42); console.error({k: 1}); return true", NULL, 0, &r);
    ASSERT(r.ok);
    ASSERT_STREQ(r.output, "hello 42\n{ k: 1 }\n");
    ASSERT(r.layers & VG_SBX_SECCOMP);
    ASSERT(r.layers & VG_SBX_LANDLOCK);
    ASSERT(r.layers & VG_SBX_NETNS);
    vg_code_result_release(&r);
}

TEST(errors_have_codes)
{
    expect_error("let y = = 3;", "syntax_error", "main.ts:1");
    expect_error("throw new Error('boom')", "runtime_error", "boom");
    expect_error("setTimeout(() => { throw new Error('late') }, 1); await new Promise(r => "
                 "setTimeout(r, 100));",
                 "runtime_error", "late");
    /* Outside V8's heap: RLIMIT_DATA refuses the buffer. */
    expect_error("new Uint8Array(1 << 30).fill(1)", "memory_limit", NULL);
    /* V8's heap at memory_bytes (--max-old-space-size): its last collections take CPU time,
     * so this one run has more of it. */
    struct vg_code_request q = {.code = "const a: string[] = []; while (true) a.push('x'.repeat(1 "
                                        "<< 20) + a.length);",
                                .workdir = wd,
                                .required = VG_SBX_REQUIRED_DEFAULT,
                                .sandbox_uid = 65534};
    q.code_len = strlen(q.code);
    vg_code_limits_default(&q.lim);
    q.lim.memory_bytes = 64u * 1024 * 1024;
    struct vg_code_result r;
    ASSERT_OK(vg_code_run(deno, &q, &r, E));
    if (r.ok || strcmp(r.error_code, "memory_limit"))
        TEST_FAIL_("heap: expected memory_limit, got %s: %s", r.error_code, r.error_message);
    vg_code_result_release(&r);
}

static int echo_tool(void *user, const char *tool, json_t *args, json_t **result, char code[32],
                     char msg[256])
{
    (void)user;
    if (strcmp(tool, "echo")) {
        snprintf(code, 32, "not_allowed");
        snprintf(msg, 256, "no tool %s", tool);
        return 1;
    }
    *result = json_pack("{s:O}", "echoed", args);
    return 0;
}

/* proves: S4-022 */
TEST(calls_a_tool_through_the_bridge)
{
    struct vg_code_host host = {.call_tool = echo_tool};
    ASSERT_STREQ(expect_ok("return vigil.call('echo', {x: 1})", &host), "{\"echoed\":{\"x\":1}}");
    ASSERT_STREQ(
        expect_ok("try { vigil.call('rm', {}) } catch (e) { return [e.code, e.op] }", &host),
        "[\"not_allowed\",\"tool\"]");
    /* The tool-call limit holds for TypeScript as for Lua. */
    struct vg_code_result r;
    run_ts("for (let i = 0; i < 30; i++) vigil.call('echo', {i}); return 1", &host, 0, &r);
    ASSERT(!r.ok);
    ASSERT_STREQ(r.error_code, "tool_limit");
    ASSERT_EQ(r.tool_calls, 25);
    vg_code_result_release(&r);
}

/* proves: S4-021 */
TEST(files_in_the_working_directory)
{
    ASSERT_STREQ(expect_ok("vigil.write('notes.txt', 'one'); vigil.append('notes.txt', ' two');"
                           "return vigil.read('notes.txt')",
                           NULL),
                 "\"one two\"");
    /* Deno's own file API reaches the working directory, and only it. */
    ASSERT_STREQ(expect_ok("Deno.writeTextFileSync('deno.txt', 'd'); "
                           "return Deno.readTextFileSync('deno.txt') + vigil.read('notes.txt')",
                           NULL),
                 "\"done two\"");
    ASSERT_STREQ(
        expect_ok("return vigil.list('').filter((n: string) => n.endsWith('.txt')).sort()", NULL),
        "[\"deno.txt\",\"notes.txt\"]");
}

/* Each probe must be denied; the program reports how.
 * proves: S4-023, S4-024, S4-048, S4-049, S4-056 */
TEST(escape_probes_denied)
{
    char code[8192];
    static const char *const probes[] = {
        /* process spawn */
        "new Deno.Command('/bin/sh', {args: ['-c', 'id']}).outputSync()",
        /* environment and secrets */
        "Deno.env.get('HOME')",
        "Deno.env.toObject()",
        /* files outside the working directory */
        "Deno.readTextFileSync('/etc/passwd')",
        "Deno.readTextFileSync('../outside.txt')",
        "Deno.readTextFileSync('link-out')",
        "Deno.writeTextFileSync('/tmp/vigil-deno-escape', 'x')",
        "vigil.read('../outside.txt')",
        "vigil.read('link-out')",
        "vigil.read('hard')",
        "Deno.readDirSync('/').next()",
        /* network */
        "await fetch('http://127.0.0.1:8080/')",
        "await Deno.connect({hostname: '127.0.0.1', port: 22})",
        "Deno.listen({port: 8080})",
        "vigil.fetch('http://169.254.169.254/latest/meta-data/')",
        /* native code and the kernel */
        "Deno.dlopen('/lib/x86_64-linux-gnu/libc.so.6', {})",
        "Deno.osRelease()",
        "Deno.hostname()",
        /* remote code */
        "await import('https://deno.land/std/version.ts')",
        "await import('npm:left-pad')",
    };
    for (size_t i = 0; i < VG_ARRAY_LEN(probes); i++) {
        snprintf(code, sizeof code,
                 "try { %s; return 'ESCAPED' } catch (e) { return `${e.name}: ${e.message}` }",
                 probes[i]);
        const char *got = expect_ok(code, NULL);
        /* Denied, and for the right reason: a permission, a layer, the bridge's check, or the
         * flags that forbid remote and npm modules (not some unrelated failure). */
        static const char *const reasons[] = {"NotCapable", "PermissionDenied",
                                              "denied",     "not_allowed",
                                              "--no-npm",   "remote specifier"};
        int why = 0;
        for (size_t k = 0; k < VG_ARRAY_LEN(reasons); k++)
            why |= strstr(got, reasons[k]) != NULL;
        if (strstr(got, "ESCAPED") || !why)
            TEST_FAIL_("probe %s was not denied as it should be: %s", probes[i], got);
    }
    /* The file outside is untouched and nothing was written beside it. */
    char *text = NULL;
    size_t len = 0;
    ASSERT_OK(vg_fs_read_file(outside, 1024, &text, &len, E));
    ASSERT_STREQ(text, "secret");
    vg_free(text);
    ASSERT(access("/tmp/vigil-deno-escape", F_OK) != 0);
}

/* A program that never ends is killed at its wall time, and nothing of it remains.
 * proves: S4-025 */
TEST(sleep_forever_is_stopped)
{
    struct vg_code_result r;
    run_ts("await new Promise(() => setInterval(() => {}, 1000));", NULL, 1500, &r);
    ASSERT(!r.ok);
    ASSERT_STREQ(r.error_code, "timeout");
    vg_code_result_release(&r);
    run_ts("while (true) {}", NULL, 1500, &r);
    ASSERT(!r.ok);
    ASSERT_STREQ(r.error_code, "timeout");
    vg_code_result_release(&r);
    sbx_assert_no_children();
}

TEST(output_is_capped)
{
    struct vg_code_request q = {.code =
                                    "for (let i = 0; i < 5000; i++) console.log('x'.repeat(99));"
                                    " return 1",
                                .workdir = wd,
                                .required = VG_SBX_REQUIRED_DEFAULT,
                                .sandbox_uid = 65534};
    q.code_len = strlen(q.code);
    vg_code_limits_default(&q.lim);
    q.lim.output_bytes = 1000;
    struct vg_code_result r;
    ASSERT_OK(vg_code_run(deno, &q, &r, E));
    ASSERT(r.ok);
    ASSERT(r.output_truncated);
    ASSERT_CONTAINS(r.output, "[output truncated: 1000 of 500000 bytes shown]");
    vg_code_result_release(&r);
    q.lim.code_bytes = 10;
    ASSERT_OK(vg_code_run(deno, &q, &r, E));
    ASSERT_STREQ(r.error_code, "code_too_large");
    vg_code_result_release(&r);
}

/* What a program is told when it hits a cap or a refusal says what happened, in vigil's words
 * (trial E13): a forbidden system call by name, a runtime that aborted at the descriptor cap
 * without Deno's panic banner (vigil's paths and flags) as its output, and a permission error
 * without Deno's advice to run again with a flag. */
TEST(caps_and_refusals_are_named)
{
    struct vg_code_result r;
    run_ts("Deno.writeTextFileSync('c', 'x'); Deno.chownSync('c', 0, 0); return 1", NULL, 0, &r);
    ASSERT_STREQ(r.error_code, "sandbox_violation");
    ASSERT_CONTAINS(r.error_message, "(chown, number ");
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(r.refusals, 0), "target")),
                 "chown");
    vg_code_result_release(&r);
    /* Idle workers, not spinning ones: spinning, they spent the CPU-time limit before the
     * descriptor or process cap when the machine was busy (the unprivileged stage runs every
     * sandbox test at once), and the test failed with cpu_limit. */
    run_ts("console.log('before'); for (let i = 0; i < 500; i++) "
           "new Worker('data:text/javascript,setInterval(() => {}, 60000)', {type: 'module'}); "
           "return 1",
           NULL, 20000, &r);
    if (strcmp(r.error_code, "fd_limit") && strcmp(r.error_code, "process_limit"))
        TEST_FAIL_("workers: expected a cap, got %s: %s", r.error_code, r.error_message);
    ASSERT_STREQ(r.output, "before");
    ASSERT(!strstr(r.error_message, "--allow"));
    vg_code_result_release(&r);
    run_ts("Deno.readTextFileSync('/etc/passwd')", NULL, 0, &r);
    ASSERT_STREQ(r.error_code, "runtime_error");
    ASSERT_CONTAINS(r.error_message, "vigil's sandbox forbids it");
    ASSERT(!strstr(r.error_message, "run again"));
    vg_code_result_release(&r);
    sbx_assert_no_children();
}

/* Run code in dir with the working directory capped at cap bytes. */
static void run_capped(const char *dir, const char *code, size_t cap, struct vg_code_result *r)
{
    struct vg_code_request q = {.code = code,
                                .code_len = strlen(code),
                                .workdir = dir,
                                .required = VG_SBX_REQUIRED_DEFAULT,
                                .sandbox_uid = 65534};
    vg_code_limits_default(&q.lim);
    q.lim.dir_bytes = cap;
    ASSERT_OK(vg_code_run(deno, &q, r, E));
}

/* Deno writes files itself, past the bridge: the host measures the folder during the run and
 * at its end, and a program whose files take it past limits.dir_bytes is stopped as dir_limit;
 * the next execution may not grow it, and may make room (trial E12). */
TEST(direct_writes_are_held_to_the_folder_cap)
{
    char dir[4096];
    sbx_workdir("sandbox-deno-dir-cap", dir, sizeof dir);
    struct vg_code_result r;
    run_capped(dir,
               "const s = 'x'.repeat(1 << 20); for (let i = 0; i < 24; i++) "
               "Deno.writeTextFileSync('f' + i, s); return 'all written'",
               4u << 20, &r);
    if (r.ok || strcmp(r.error_code, "dir_limit"))
        TEST_FAIL_("expected dir_limit, got ok=%d %s: %s", r.ok, r.error_code, r.error_message);
    ASSERT_CONTAINS(r.error_message, "limits.dir_bytes");
    vg_code_result_release(&r);
    run_capped(dir, "try { vigil.write('g', 'x'); return 'written' } catch (e) { return e.code }",
               4u << 20, &r);
    ASSERT(r.ok);
    ASSERT_STREQ(json_string_value(r.result), "dir_limit");
    vg_code_result_release(&r);
    run_capped(
        dir,
        "for (const n of vigil.list('')) vigil.remove(n); "
        "Deno.writeTextFileSync('h', 'x'); vigil.write('g', 'x'); return vigil.list('').length",
        4u << 20, &r);
    ASSERT(r.ok);
    ASSERT_EQ(json_integer_value(r.result), 2);
    vg_code_result_release(&r);
    sbx_assert_no_children();
}

int main(void)
{
    deno = vg_code_runtime_deno(sbx_deno_path());
    ASSERT(deno != NULL);
    sbx_runtime = deno;
    sbx_plant("sandbox-deno", wd, sizeof wd, outside, sizeof outside);
    RUN(returns_values_and_prints);
    RUN(errors_have_codes);
    RUN(calls_a_tool_through_the_bridge);
    RUN(files_in_the_working_directory);
    RUN(escape_probes_denied);
    RUN(sleep_forever_is_stopped);
    RUN(output_is_capped);
    RUN(direct_writes_are_held_to_the_folder_cap);
    RUN(caps_and_refusals_are_named);
    deno->methods->destroy(deno);
    return 0;
}
