/*
 * test_command.c: command tools are real processes: a well-behaved one answers through the
 * gate; one that hangs is killed at its timeout with its whole process group; one that floods
 * stdout is cut at the cap; a non-zero exit and invalid JSON are tool_failed. Each case is
 * recorded as an action/toolResult pair with the right code.
 */
#include "tool/tool_helpers.h"

#include "os/fiber.h"
#include "os/fs.h"
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#define CFG "{\"tools\":[\"cmd_*\"],\"allowed_scopes\":[\"cat-a\"]}"

static void reg_as(struct test_rt *t, const char *name, const char *script, int timeout_ms,
                   size_t cap, const char *contract)
{
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    vigil_tool_def d = {.name = name,
                        .description = "a command tool",
                        .input_schema_json = "{\"type\":\"object\"}",
                        .contract_json = contract};
    ASSERT_OK(vigil_tool_register_command(t->rt, &d, argv, timeout_ms, cap, E));
}

static void reg(struct test_rt *t, const char *name, const char *script, int timeout_ms, size_t cap)
{
    reg_as(t, name, script, timeout_ms, cap, "{\"tool_class\":\"commands\"}");
}

static void expect(struct test_rt *t, const char *a, const char *tool, const char *args,
                   enum vg_tool_code code, const char *msg_part, struct vg_tool_outcome *o)
{
    int before = count_msgs(t, a, "c", "toolResult");
    call_tool(t, a, "c", tool, args, o);
    if (o->code != code)
        TEST_FAIL_("%s: got %s (%s), expected %s", tool, o->error_code, o->error_message,
                   vg_tool_code_name(code));
    if (msg_part)
        ASSERT_CONTAINS(o->error_message, msg_part);
    ASSERT_EQ(count_msgs(t, a, "c", "toolResult"), before + 1);
    ASSERT_EQ(count_msgs(t, a, "c", "action"), before + 1);
}

static long read_pid(const char *path)
{
    char *text = NULL;
    size_t n = 0;
    ASSERT_OK(vg_fs_read_file(path, 4096, &text, &n, E));
    long pid = strtol(text, NULL, 10);
    vg_free(text);
    return pid;
}

/* Does a /proc/<pid>/status text show SIGKILL pending, for the process or its group? */
static int sigkill_pending(const char *status)
{
    static const char *const keys[] = {"\nSigPnd:", "\nShdPnd:"};
    for (size_t i = 0; i < 2; i++) {
        const char *p = strstr(status, keys[i]);
        if (p && (strtoull(p + strlen(keys[i]), NULL, 16) & (1ull << (SIGKILL - 1))))
            return 1;
    }
    return 0;
}

/* proves: S3-082 */
TEST(command_tools_answer_and_misbehaving_ones_are_contained)
{
    struct test_rt t;
    char a[37], script[1024];
    struct vg_tool_outcome o;
    test_rt_open(&t, "tool_command");
    const char *dir = vg_test_tmpdir("tool_command_pids");
    make_agent(&t, CFG, a);

    /* echoes its arguments and its operation id back: stdin in, JSON out */
    reg(&t, "cmd_echo",
        "a=$(cat); printf '{\"result\":{\"got\":%s,\"op\":\"%s\",\"tool\":\"%s\"},"
        "\"changed_entity_ids\":[\"file-1\"]}' \"$a\" \"$VIGIL_OPERATION_ID\" \"$VIGIL_TOOL\"",
        5000, 0);
    expect(&t, a, "cmd_echo", "{\"n\":7,\"s\":\"x\"}", VG_TOOL_OK, NULL, &o);
    ASSERT_EQ(json_integer_value(json_object_get(json_object_get(o.result, "got"), "n")), 7);
    ASSERT_STREQ(json_string_value(json_object_get(o.result, "op")), o.operation_id);
    ASSERT_STREQ(json_string_value(json_object_get(o.result, "tool")), "cmd_echo");
    ASSERT_STREQ(json_string_value(json_array_get(o.changed_entity_ids, 0)), "file-1");
    vg_tool_outcome_release(&o);

    /* hangs, with a grandchild: killed at the timeout, the whole group gone. The timeout leaves
     * the shell time to write both pid files even on a loaded machine (at 300 ms one run in a
     * parallel suite once found a file missing). */
    snprintf(script, sizeof script, "echo $$ > %s/leader; sleep 30 & echo $! > %s/child; wait", dir,
             dir);
    /* (idempotent: a timeout is then only a timeout; a non-idempotent one is in doubt, below) */
    reg_as(&t, "cmd_hang", script, 1000, 0,
           "{\"tool_class\":\"commands\",\"idempotency\":\"idempotent\"}");
    expect(&t, a, "cmd_hang", "{}", VG_TOOL_TIMEOUT, "1000 ms", &o);
    vg_tool_outcome_release(&o);
    char p1[4200], p2[4200];
    snprintf(p1, sizeof p1, "%s/leader", dir);
    snprintf(p2, sizeof p2, "%s/child", dir);
    long leader = read_pid(p1), child = read_pid(p2);
    ASSERT(leader > 0 && child > 0);
    ASSERT_EQ(kill((pid_t)leader, 0), -1);
    ASSERT_EQ(errno, ESRCH);
    /* the grandchild was killed by the group kill; once its parent died it was reparented and
     * reaped by init, so it no longer exists, or is a zombie being reaped, or (on a loaded
     * machine, the instant after the kill) still has the SIGKILL pending on its way out */
    int gone = kill((pid_t)child, 0) == -1 && errno == ESRCH;
    if (!gone) {
        char stat[64], *st = NULL;
        size_t n = 0;
        snprintf(stat, sizeof stat, "/proc/%ld/stat", child);
        if (vg_fs_read_file(stat, 4096, &st, &n, NULL) == VIGIL_OK && !strstr(st, ") Z")) {
            vg_free(st);
            st = NULL;
            snprintf(stat, sizeof stat, "/proc/%ld/status", child);
            if (vg_fs_read_file(stat, 8192, &st, &n, NULL) == VIGIL_OK)
                ASSERT(sigkill_pending(st));
        }
        vg_free(st);
    }

    /* a non-idempotent mutating tool that times out may have done its effect before it was
     * killed: in doubt for a person, not a timeout to retry (E9 of session 31's trial) */
    reg(&t, "cmd_slow_write", "sleep 30", 300, 0);
    expect(&t, a, "cmd_slow_write", "{}", VG_TOOL_IN_DOUBT, "may have taken effect", &o);
    vg_tool_outcome_release(&o);
    json_t *pending = NULL;
    ASSERT_OK(vg_tool_in_doubt_list(t.env, a, &pending, E));
    ASSERT_EQ(json_array_size(pending), 1);
    ASSERT_CONTAINS(json_string_value(json_object_get(json_array_get(pending, 0), "reason")),
                    "stopped after its request was sent");
    json_decref(pending);

    /* killed by a signal someone else sent (here the program itself): a non-idempotent
     * mutating call may have acted before the signal, so it is in doubt as a timeout is (H14
     * of session 34's trial); an idempotent one is only a failure, which a retry may repeat */
    reg(&t, "cmd_signalled", "kill -TERM $$; sleep 30", 60000, 0);
    expect(&t, a, "cmd_signalled", "{}", VG_TOOL_IN_DOUBT, "killed by signal 15", &o);
    vg_tool_outcome_release(&o);
    ASSERT_OK(vg_tool_in_doubt_list(t.env, a, &pending, E));
    ASSERT_EQ(json_array_size(pending), 2);
    json_decref(pending);
    reg_as(&t, "cmd_signalled_idem", "kill -TERM $$; sleep 30", 60000, 0,
           "{\"tool_class\":\"commands\",\"idempotency\":\"idempotent\"}");
    expect(&t, a, "cmd_signalled_idem", "{}", VG_TOOL_FAILED, "killed by signal 15", &o);
    vg_tool_outcome_release(&o);

    /* floods stdout: cut at the cap and killed */
    reg(&t, "cmd_flood", "yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 5000, 4096);
    expect(&t, a, "cmd_flood", "{}", VG_TOOL_FAILED, "more than 4096 bytes", &o);
    vg_tool_outcome_release(&o);

    /* exits non-zero: the stderr tail is in the message */
    reg(&t, "cmd_fail", "cat >/dev/null; echo 'disk on fire' >&2; exit 3", 5000, 0);
    expect(&t, a, "cmd_fail", "{}", VG_TOOL_FAILED, "exited with status 3: disk on fire", &o);
    vg_tool_outcome_release(&o);

    /* prints invalid JSON */
    reg(&t, "cmd_garbage", "echo 'this is not json'", 5000, 0);
    expect(&t, a, "cmd_garbage", "{}", VG_TOOL_FAILED, "invalid JSON", &o);
    vg_tool_outcome_release(&o);

    /* answers with a standard error code of its own */
    reg(&t, "cmd_unsafe",
        "echo '{\"error\":{\"code\":\"unsafe_target\",\"message\":\"ambiguous task\"}}'", 5000, 0);
    expect(&t, a, "cmd_unsafe", "{}", VG_TOOL_UNSAFE_TARGET, "ambiguous task", &o);
    vg_tool_outcome_release(&o);

    /* a program that does not exist */
    const char *argv[] = {"/nonexistent/vigil-tool", NULL};
    vigil_tool_def d = {.name = "cmd_missing", .description = "missing"};
    ASSERT_OK(vigil_tool_register_command(t.rt, &d, argv, 5000, 0, E));
    expect(&t, a, "cmd_missing", "{}", VG_TOOL_FAILED, "status 127", &o);
    vg_tool_outcome_release(&o);

    /* the failed operations are recorded: the same call in the same run replays the error */
    call_tool(&t, a, "c", "cmd_fail", "{}", &o);
    ASSERT_EQ(o.replayed, 1);
    ASSERT_EQ(o.code, VG_TOOL_FAILED);
    vg_tool_outcome_release(&o);
    test_rt_close(&t);
}

/* On a fiber (as `vigil serve` runs agents) a command tool's wait parks the fiber, not the
 * thread: while one fiber's command waits on a FIFO, another fiber of the same thread writes
 * to it. Were the thread blocked, the command would wait out its 4 s timeout and fail. */
struct fifo_call {
    struct test_rt *t;
    const char *agent;
    struct vg_tool_outcome o;
    int done;
};

struct fifo_feed {
    const char *path;
    struct fifo_call *call;
    int fed;
};

static void calls_the_fifo_tool(void *arg)
{
    struct fifo_call *c = arg;
    call_tool(c->t, c->agent, "f", "cmd_fifo", "{}", &c->o);
    c->done = 1;
}

static void feeds_the_fifo(void *arg)
{
    struct fifo_feed *f = arg;
    int fd = open(f->path, O_RDWR | O_CLOEXEC); /* Linux: does not wait for a reader */
    f->fed = fd >= 0 && write(fd, "go\n", 3) == 3;
    while (!f->call->done) /* the FIFO stays open until the command has read it */
        vg_fiber_yield();
    if (fd >= 0)
        close(fd);
}

static int outside_transactions(void *user)
{
    struct test_rt *t = user;
    return !vg_store_in_tx(t->env->store);
}

TEST(a_command_tool_on_a_fiber_lets_the_other_fibers_run)
{
    struct test_rt t;
    char a[37], script[4300], fifo[4200];
    test_rt_open(&t, "tool_command_fiber");
    make_agent(&t, CFG, a);
    snprintf(fifo, sizeof fifo, "%s/fifo", vg_test_tmpdir("tool_command_fifo"));
    unlink(fifo);
    ASSERT_EQ(mkfifo(fifo, 0600), 0);
    snprintf(script, sizeof script,
             "read line < %s && printf '{\"result\":{\"line\":\"%%s\"}}' \"$line\"", fifo);
    reg(&t, "cmd_fifo", script, 4000, 0);

    struct vg_fiber_sched *s = NULL;
    ASSERT_OK(vg_fiber_sched_new(&s, E));
    vg_fiber_sched_set_guard(s, outside_transactions, &t);
    struct fifo_call call = {.t = &t, .agent = a};
    struct fifo_feed feed = {.path = fifo, .call = &call};
    ASSERT_OK(vg_fiber_spawn(s, calls_the_fifo_tool, &call, E));
    ASSERT_OK(vg_fiber_spawn(s, feeds_the_fifo, &feed, E));
    vg_fiber_sched_run(s);
    vg_fiber_sched_free(s);
    ASSERT(feed.fed);
    if (call.o.code != VG_TOOL_OK)
        TEST_FAIL_("cmd_fifo: %s (%s)", call.o.error_code, call.o.error_message);
    ASSERT_STREQ(json_string_value(json_object_get(call.o.result, "line")), "go");
    vg_tool_outcome_release(&call.o);
    unlink(fifo);
    test_rt_close(&t);
}

/* A daemon past its grace period (halt set) does not wait for a command tool: the program is
 * killed at once, and a non-idempotent mutating call is then in doubt, as after a timeout
 * (trial G4: a stop waited 20 s for the program in a 10 s grace). Without the check the call
 * waits the program's 30 s out and answers it as a failed reply. */
TEST(a_halted_host_kills_a_running_command_tool)
{
    struct test_rt t;
    char a[37];
    struct vg_tool_outcome o;
    test_rt_open(&t, "tool_command_halt");
    make_agent(&t, CFG, a);
    reg(&t, "cmd_slow", "sleep 30", 60000, 0);
    volatile int halt = 1;
    json_t *args = json_object();
    struct vg_tool_call_ctx ctx = {.agent_id = a, .run_key = "c", .halt = &halt};
    ASSERT_OK(vg_tool_executor_call(executor(&t), &ctx, "cmd_slow", args, &o, E));
    json_decref(args);
    ASSERT_EQ(o.code, VG_TOOL_IN_DOUBT);
    json_t *pending = NULL;
    ASSERT_OK(vg_tool_in_doubt_list(t.env, a, &pending, E));
    ASSERT_EQ(json_array_size(pending), 1);
    ASSERT_CONTAINS(json_string_value(json_object_get(json_array_get(pending, 0), "reason")),
                    "vigil stopped while it ran");
    json_decref(pending);
    vg_tool_outcome_release(&o);
    test_rt_close(&t);
}

/* Whether the store's files (the database and its log) hold these bytes anywhere. */
static int store_holds(const char *store_path, const char *needle)
{
    static const char *const suffixes[] = {"", "-wal"};
    int found = 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(suffixes) && !found; i++) {
        char path[4300], *bytes = NULL;
        size_t n = 0;
        snprintf(path, sizeof path, "%s%s", store_path, suffixes[i]);
        if (access(path, F_OK) != 0)
            continue;
        ASSERT_OK(vg_fs_read_file(path, (size_t)1 << 30, &bytes, &n, E));
        found = memmem(bytes, n, needle, strlen(needle)) != NULL;
        vg_free(bytes);
    }
    return found;
}

/* What a command tool's process writes beside its reply (its stderr: progress, debugging) is its
 * own raw output, not the run's record: the reply on stdout is journaled as the toolResult, the
 * chatter on stderr nowhere in the store. proves: S1-049 */
TEST(a_command_tools_raw_output_stays_out_of_the_journal)
{
    struct test_rt t;
    char a[37];
    struct vg_tool_outcome o;
    test_rt_open(&t, "tool_command_raw");
    make_agent(&t, CFG, a);
    reg(&t, "cmd_chatty",
        "cat >/dev/null; i=0; while [ $i -lt 50 ]; do echo \"raw-progress-line-$i\" >&2; "
        "i=$((i+1)); done; printf '{\"result\":{\"answer\":\"reply-marker-42\"}}'",
        5000, 0);
    expect(&t, a, "cmd_chatty", "{}", VG_TOOL_OK, NULL, &o);
    ASSERT_STREQ(json_string_value(json_object_get(o.result, "answer")), "reply-marker-42");
    vg_tool_outcome_release(&o);
    char path[4200];
    snprintf(path, sizeof path, "%s", t.path);
    test_rt_close(&t);
    ASSERT(store_holds(path, "reply-marker-42")); /* the journaled reply: the check can see */
    ASSERT(!store_holds(path, "raw-progress-line"));
}

int main(void)
{
    signal(SIGPIPE, SIG_DFL); /* prove the executor never relies on SIGPIPE being ignored */
    RUN(command_tools_answer_and_misbehaving_ones_are_contained);
    RUN(a_command_tool_on_a_fiber_lets_the_other_fibers_run);
    RUN(a_halted_host_kills_a_running_command_tool);
    RUN(a_command_tools_raw_output_stays_out_of_the_journal);
    return 0;
}
