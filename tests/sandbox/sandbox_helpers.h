/* sandbox_helpers.h: running one program in the sandbox from a test. */
#ifndef VG_TEST_SANDBOX_HELPERS_H
#define VG_TEST_SANDBOX_HELPERS_H

#include "helpers/test.h"
#include "sandbox/sandbox.h"

/* A fresh working directory for name (inside the test tmp tree). */
const char *sbx_workdir(const char *name, char *buf, size_t n);
/* A working directory `name` with the traps an earlier run or another process could plant:
 * outside.txt ("secret") beside it (its path into outside), and inside: link-out (symlink to
 * it), hard (a hardlink to it), dirlink and sub/dirlink (symlinks to the parent directory),
 * fifo, and an empty sub/. */
void sbx_plant(const char *name, char *wd, size_t n, char *outside, size_t on);
/* The runtime sbx_run uses: NULL (the default) for Lua. */
extern struct vg_code_runtime *sbx_runtime;
/* Run code with the default limits (wall_ms if > 0) in workdir; the host may be NULL. */
void sbx_run(const char *workdir, const char *code, int wall_ms, const struct vg_code_host *host,
             struct vg_code_result *r);
/* Run and expect failure with this error code; message part may be NULL. */
void sbx_expect_error(const char *workdir, const char *code, const char *error_code,
                      const char *msg_part);
/* Run and expect success; returns the result as compact JSON text (static buffer), and
 * sets sbx_last_refusals to the refusals the result recorded. */
extern int sbx_last_refusals;
const char *sbx_expect_ok(const char *workdir, const char *code);
/* The same with a host for the program's tool calls. */
const char *sbx_expect_ok_host(const char *workdir, const char *code,
                               const struct vg_code_host *host);
/* The deno binary the Deno tests use: $VIGIL_DENO, else the one scripts/npm.sh installed in the
 * source tree. Without a working one the test skips (exit 77), or fails when
 * VIGIL_REQUIRE_DENO=1. */
const char *sbx_deno_path(void);
/* A run (Lua) that requires the cgroup layer where the machine does not offer it: refused
 * before anything starts (sandbox_unavailable, naming the layer and accept_missing), and no
 * child is left. */
void sbx_expect_cgroup_refused(const char *workdir);
/* No process of the sandbox uid is left (the host's children all reaped). */
void sbx_assert_no_children(void);

#endif
