/*
 * test_lua_escape.c: the escape suite at the level of the agent's program: what a Lua program
 * can reach is only what the safe environment and the bridge give it. Each probe is denied
 * (a missing function, a bridge refusal with its code, or a limit) and nothing outside the
 * working directory changes; the legitimate uses beside them work. Every execution leaves no
 * process behind (sbx_expect_* check it).
 */
#include "base/common.h"

#include "os/fs.h"
#include "sandbox/sandbox_helpers.h"

#include <sys/stat.h>
#include <unistd.h>

static char wd[4096], outside_dir[4200], outside[4300];

/* Each expression must be nil: ambient authority the environment does not have. */
static const char *const absent[] = {
    "os.execute",
    "os.exit",
    "os.getenv",
    "os.remove",
    "os.rename",
    "os.tmpname",
    "os.setlocale",
    "io",
    "package",
    "require",
    "debug",
    "dofile",
    "loadfile",
    "string.dump",
    "io and io.popen",
    "os.getenv and os.getenv('HOME')",
    "package and package.loadlib",
    "getmetatable('').__index.dump",
};

TEST(no_ambient_authority) /* process spawn, environment, files, native code */
{
    for (size_t i = 0; i < VG_ARRAY_LEN(absent); i++) {
        char code[256];
        snprintf(code, sizeof code, "return (%s) == nil", absent[i]);
        if (strcmp(sbx_expect_ok(wd, code), "true"))
            TEST_FAIL_("%s is reachable", absent[i]);
    }
    /* bytecode is refused by load; text loads */
    ASSERT_STREQ(sbx_expect_ok(wd, "return load('\\27Lua\\84\\0') == nil"), "true");
    ASSERT_STREQ(sbx_expect_ok(wd, "return load(string.char(27) .. 'Lua') == nil"), "true");
    ASSERT_STREQ(sbx_expect_ok(wd, "return load('return 2')()"), "2");
}

/* Each path, read through the bridge, is refused with the code given. */
static const char *const bad_reads[][2] = {
    {"../outside.txt", "denied"},
    {"/etc/passwd", "denied"},
    {"sub/../../outside.txt", "denied"},
    {"./../outside.txt", "denied"},
    {"link-out", "denied"},            /* a symlink planted by an earlier run */
    {"hard", "denied"},                /* a hardlink to the file outside */
    {"dirlink/outside.txt", "denied"}, /* a symlinked directory */
    {"/proc/self/environ", "denied"},
    {"/proc/1/environ", "denied"},
    {"fifo", "denied"}, /* not a regular file: never blocks the host */
    {"", "denied"},     /* the directory itself */
    {"missing.txt", "not_found"},
    {"..", "denied"},
    {"sub/..//../outside.txt", "denied"},
};

TEST(files_outside_refused)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(bad_reads); i++) {
        char code[256];
        snprintf(code, sizeof code, "local ok, e = pcall(vigil.read, '%s') return e.code",
                 bad_reads[i][0]);
        const char *got = sbx_expect_ok(wd, code);
        char want[64];
        snprintf(want, sizeof want, "\"%s\"", bad_reads[i][1]);
        if (strcmp(got, want))
            TEST_FAIL_("read %s: got %s, expected %s", bad_reads[i][0], got, want);
        ASSERT_EQ(sbx_last_refusals, 1); /* and recorded with its reason (journaled) */
    }
    static const char *const writes[] = {"vigil.write('../planted.txt', 'x')",
                                         "vigil.write('/tmp/planted.txt', 'x')",
                                         "vigil.write('dirlink/planted.txt', 'x')",
                                         "vigil.write('link-out', 'x')",
                                         "vigil.write('hard', 'x')",
                                         "vigil.append('hard', 'x')",
                                         "vigil.remove('../outside.txt')",
                                         "vigil.remove('link-out/..')",
                                         "vigil.remove('dirlink/outside.txt')",
                                         "vigil.list('..')",
                                         "vigil.list('/')",
                                         "vigil.list('dirlink')"};
    for (size_t i = 0; i < VG_ARRAY_LEN(writes); i++) {
        char code[256];
        snprintf(code, sizeof code, "local ok, e = pcall(function() %s end) return e.code",
                 writes[i]);
        if (strcmp(sbx_expect_ok(wd, code), "\"denied\""))
            TEST_FAIL_("%s was not denied: %s", writes[i], sbx_expect_ok(wd, code));
        ASSERT_EQ(sbx_last_refusals, 1);
    }
    char *text = NULL;
    size_t n = 0;
    ASSERT_OK(vg_fs_read_file(outside, 100, &text, &n, E));
    ASSERT_STREQ(text, "secret"); /* the hardlink's write and the symlink's were refused */
    vg_free(text);
    char p[4300];
    snprintf(p, sizeof p, "%s/planted.txt", outside_dir);
    ASSERT(access(p, F_OK) != 0);
    ASSERT(access("/tmp/planted.txt", F_OK) != 0);
}

TEST(resource_bombs_contained)
{
    sbx_expect_error(wd, "local s = 'x' while true do s = s .. s end", "memory_limit", NULL);
    sbx_expect_error(wd, "local t = {} while true do t[#t + 1] = {} end", "memory_limit", NULL);
    sbx_expect_error(wd, "local t = {} while true do t[#t + 1] = coroutine.create(print) end",
                     "memory_limit", NULL);
    sbx_expect_error(wd, "return ('x'):rep(1 << 40)", "runtime_error", "too large");
    sbx_expect_error(wd, "return ('x'):rep(1 << 30)", "memory_limit", NULL);
    /* unbounded recursion: the Lua stack grows into the heap cap first */
    sbx_expect_error(wd, "local function f() return 1 + f() end return f()", "memory_limit", NULL);
    /* a spin: the CPU cap (2 s) or the wall time, whichever first; never a hang */
    struct vg_code_result r;
    sbx_run(wd, "while true do end", 20000, NULL, &r);
    ASSERT(!r.ok);
    ASSERT_STREQ(r.error_code, "cpu_limit");
    vg_code_result_release(&r);
    sbx_run(wd, "while true do end", 300, NULL, &r); /* wall before CPU */
    ASSERT_STREQ(r.error_code, "timeout");
    vg_code_result_release(&r);
    /* an output flood: kept to the cap, marked, and the program still answers */
    sbx_run(wd, "for i = 1, 3000 do print(('x'):rep(999)) end return 'done'", 0, NULL, &r);
    ASSERT(r.ok);
    ASSERT(r.output_truncated);
    ASSERT(r.output_len < 1024 * 1024 + 100);
    ASSERT_CONTAINS(r.output, "[output truncated");
    vg_code_result_release(&r);
    /* a disk flood through the bridge stops at the file cap (16 MiB) */
    sbx_run(wd, "local s = ('x'):rep(1000000) for i = 1, 20 do vigil.append('big.bin', s) end", 0,
            NULL, &r);
    ASSERT(!r.ok);
    ASSERT_STREQ(r.error_code, "bridge_error");
    ASSERT_CONTAINS(r.error_message, "too_large");
    vg_code_result_release(&r);
    /* a message over the bridge's line cap stops the program */
    sbx_run(wd, "vigil.write('x', ('x'):rep(3 * 1024 * 1024))", 0, NULL, &r);
    ASSERT(!r.ok);
    ASSERT_STREQ(r.error_code, "bridge_error");
    vg_code_result_release(&r);
    sbx_assert_no_children();
}

TEST(nothing_leaks_across_runs)
{
    ASSERT_STREQ(sbx_expect_ok(wd, "leak = 'first' string.leak = 1 return leak"), "\"first\"");
    ASSERT_STREQ(sbx_expect_ok(wd, "return leak == nil and string.leak == nil"), "true");
    sbx_expect_error(wd, "return vigil.call('host_read', {})", "bridge_error", "not_allowed");
}

/* Twenty legitimate uses. */
static const char *const good[][2] = {
    {"vigil.write('a.txt', 'hello') return vigil.read('a.txt')", "\"hello\""},
    {"vigil.write('b.txt', 'x') vigil.append('b.txt', 'y') return vigil.read('b.txt')", "\"xy\""},
    {"vigil.write('c.txt', '1') vigil.remove('c.txt') local ok = pcall(vigil.read, 'c.txt') "
     "return ok",
     "false"},
    {"vigil.write('sub/d.txt', 'in sub') return vigil.read('sub/d.txt')", "\"in sub\""},
    {"local n = 0 for _, f in ipairs(vigil.list('sub')) do n = n + 1 end return n > 0", "true"},
    {"return vigil.json_decode(vigil.json_encode({a = {1, 2}, b = 'x'}))",
     "{\"a\":[1,2],\"b\":\"x\"}"},
    {"return vigil.json_decode('[1, null, 3]')[2] == vigil.null", "true"},
    {"return string.format('%05.1f|%s', 3.14159, 'ok')", "\"003.1|ok\""},
    {"local t = {5, 2, 9} table.sort(t) return t", "[2,5,9]"},
    {"return math.floor(2.7) + math.max(1, 4)", "6"},
    {"return utf8.len('h\\u{e9}llo')", "5"},
    {"local co = coroutine.wrap(function() coroutine.yield(1) return 2 end) return {co(), co()}",
     "[1,2]"},
    {"return type(os.time()) == 'number' and type(os.clock()) == 'number'", "true"},
    {"return os.date('!%Y', 0)", "\"1970\""},
    {"local ok, e = pcall(error, 'x') return {ok, e}", "[false,\"x\"]"},
    {"local s = 0 for i = 1, 1000000 do s = s + i end return s", "500000500000"},
    {"return ('ab'):rep(3, '-')", "\"ab-ab-ab\""},
    {"return ('hello world'):gsub('o', '0')", "[\"hell0 w0rld\",2]"},
    {"return 7 // 2, 7 / 2", "[3,3.5]"},
    {"local t = setmetatable({}, {__index = function(_, k) return k .. '!' end}) return t.hi",
     "\"hi!\""},
};

TEST(legitimate_uses_work)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(good); i++) {
        const char *got = sbx_expect_ok(wd, good[i][0]);
        if (strcmp(got, good[i][1]))
            TEST_FAIL_("%s: got %s, expected %s", good[i][0], got, good[i][1]);
    }
}

int main(void)
{
    sbx_plant("sandbox-lua-escape/wd", wd, sizeof wd, outside, sizeof outside);
    snprintf(outside_dir, sizeof outside_dir, "%s/..", wd);
    RUN(no_ambient_authority);
    RUN(files_outside_refused);
    RUN(resource_bombs_contained);
    RUN(nothing_leaks_across_runs);
    RUN(legitimate_uses_work);
    return 0;
}
