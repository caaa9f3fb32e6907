/*
 * test_deno_end.c: how the TypeScript adapter reads the end of a deno that died without the
 * prelude's last word (vg_deno_classify_end), on the very reports deno 2.9.6 and V8 print: a
 * panic or a fatal V8 report is the runtime's, never the program's output, and the answer says
 * in one line what happened (trial E13). No deno is needed: the reports are given as output.
 */
#include "base/common.h"

#include "helpers/test.h"
#include "sandbox/deno.h"

/* What a run that died gave: the output, and the code the host's end put first. */
static void ended(struct vg_code_result *r, const char *output, const char *code)
{
    memset(r, 0, sizeof *r);
    r->output = vg_strdup(output);
    r->output_len = strlen(output);
    snprintf(r->error_code, sizeof r->error_code, "%s", code);
    snprintf(r->error_message, sizeof r->error_message, "%s",
             !strcmp(code, "runtime_error") ? "the program ended without a result (signal 6)"
                                            : "the program made a system call the sandbox forbids");
}

#define BANNER                                                                                     \
    "\n============================================================\n"                             \
    "Deno has panicked. This is a bug in Deno. Please report this\n"                               \
    "at https://github.com/denoland/deno/issues/new.\n"                                            \
    "If you can reliably reproduce this panic, include the\n"                                      \
    "reproduction steps and the stack trace URL below in your report.\n\n"                         \
    "Platform: linux x86_64\nVersion: 2.9.6\n"                                                     \
    "Args: [\"/opt/deno\", \"run\", \"--allow-read=/tmp/vigil-deno-Ab12Cd/work\", "                \
    "\"/tmp/vigil-deno-Ab12Cd/main.ts\"]\n\n"

/* Nothing of the banner (vigil's paths and flags, "a bug in Deno") reaches the model. */
static void assert_banner_gone(const struct vg_code_result *r)
{
    ASSERT(!strstr(r->output, "panicked"));
    ASSERT(!strstr(r->output, "--allow-read"));
    ASSERT(!strstr(r->error_message, "--allow-read"));
    ASSERT(!strstr(r->error_message, "bug in Deno"));
    ASSERT_EQ(r->output_len, strlen(r->output));
}

TEST(a_panic_at_the_descriptor_cap_is_fd_limit)
{
    struct vg_code_result r;
    ended(&r,
          "started 12\n" BANNER "thread 'main' panicked at runtime/worker.rs:88:10:\n"
          "called `Result::unwrap()` on an `Err` value: Os { code: 24, kind: Uncategorized, "
          "message: \"Too many open files\" }\n"
          "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
          "sandbox_violation");
    vg_deno_classify_end(&r);
    ASSERT_STREQ(r.error_code, "fd_limit");
    ASSERT_STREQ(r.output, "started 12");
    assert_banner_gone(&r);
    vg_code_result_release(&r);
}

TEST(a_panic_at_the_thread_cap_is_process_limit)
{
    struct vg_code_result r;
    ended(&r,
          BANNER "thread 'main' panicked at std/thread.rs:1:1:\nfailed to spawn thread: Os { code: "
                 "11, kind: WouldBlock, message: \"Resource temporarily unavailable\" }\n",
          "runtime_error");
    vg_deno_classify_end(&r);
    ASSERT_STREQ(r.error_code, "process_limit");
    ASSERT_STREQ(r.output, "");
    assert_banner_gone(&r);
    vg_code_result_release(&r);
    /* The cgroup counted a refused thread, and the report was cut short. */
    ended(&r, BANNER, "sandbox_violation");
    r.cg_pids_refused = 3;
    vg_deno_classify_end(&r);
    ASSERT_STREQ(r.error_code, "process_limit");
    vg_code_result_release(&r);
}

TEST(any_other_panic_is_the_runtime_aborting)
{
    struct vg_code_result r;
    ended(&r, "a\nb\n" BANNER, "sandbox_violation");
    vg_deno_classify_end(&r);
    ASSERT_STREQ(r.error_code, "runtime_error");
    ASSERT_STREQ(r.error_message,
                 "the TypeScript runtime aborted: it was stopped before it said why");
    ASSERT_STREQ(r.output, "a\nb");
    assert_banner_gone(&r);
    vg_code_result_release(&r);
    ended(&r, BANNER "thread 'tokio' panicked at x.rs:2:3:\nsomething odd\n", "runtime_error");
    vg_deno_classify_end(&r);
    ASSERT_STREQ(r.error_message, "the TypeScript runtime aborted: something odd");
    vg_code_result_release(&r);
}

TEST(v8s_fatal_out_of_memory_report_is_memory_limit)
{
    struct vg_code_result r;
    ended(&r,
          "grew\n\n<--- Last few GCs --->\n\n[1:0x5a]  8123 ms: Mark-Compact 255.1 (258.9) -> "
          "254.9 (259.1) MB\n\n<--- JS stacktrace --->\n\n\n#\n# Fatal JavaScript out of memory: "
          "Ineffective mark-compacts near heap limit\n#\n==== C stack trace "
          "===============================\n\n    /opt/deno(+0x2d1b0a3) [0x5a]\n",
          "runtime_error");
    vg_deno_classify_end(&r);
    ASSERT_STREQ(r.error_code, "memory_limit");
    ASSERT_STREQ(r.output, "grew");
    ASSERT(!strstr(r.output, "stack trace"));
    vg_code_result_release(&r);
}

/* A program that gave its answer printed what it printed, whatever the words. */
TEST(the_output_of_a_program_that_answered_is_its_own)
{
    struct vg_code_result r;
    ended(&r, "FATAL ERROR: just a string\nDeno has panicked (said the program)\n", "");
    r.ok = 1;
    vg_deno_classify_end(&r);
    ASSERT(r.ok);
    ASSERT_STREQ(r.output, "FATAL ERROR: just a string\nDeno has panicked (said the program)\n");
    vg_code_result_release(&r);
}

int main(void)
{
    RUN(a_panic_at_the_descriptor_cap_is_fd_limit);
    RUN(a_panic_at_the_thread_cap_is_process_limit);
    RUN(any_other_panic_is_the_runtime_aborting);
    RUN(v8s_fatal_out_of_memory_report_is_memory_limit);
    RUN(the_output_of_a_program_that_answered_is_its_own);
    return 0;
}
