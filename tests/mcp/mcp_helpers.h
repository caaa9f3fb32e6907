/*
 * mcp_helpers.h: what the MCP tests share: a clock that can step on its own (a hang times out
 * without the test sleeping), where node and the npm servers are, and the skip rule (exit 77
 * locally, a failure when VIGIL_REQUIRE_MCP=1 as scripts/test.sh sets).
 */
#ifndef VG_TEST_MCP_HELPERS_H
#define VG_TEST_MCP_HELPERS_H

#include <stddef.h>

#include "os/clock.h"

/* A test clock whose monotonic time also moves step_ms at every read when step_ms > 0. */
struct step_clock {
    struct vg_clock base; /* must stay first */
    int64_t mono_ns;
    int64_t step_ms;
};
void step_clock_init(struct step_clock *c);
void step_clock_advance(struct step_clock *c, int64_t ms);

/* Exit 77 (skip) with why, or fail when VIGIL_REQUIRE_MCP=1. */
void mcp_skip(const char *why);
/* The folder scripts/npm.sh installed into ($VIGIL_MCP_NPM_DIR, else <source>/.deps/npm) when
 * it holds node_modules/.bin/<bin>, else mcp_skip. */
const char *mcp_npm_bin(const char *bin, char *out, size_t n);
/* node on PATH, else mcp_skip. */
void mcp_need_node(void);

struct vg_mcp_client;
struct vg_mcp_conf;
/* The servers declared in a JSON text (an mcp_servers object); fails the test when it does not
 * parse. Owned (vg_mcp_conf_free). */
struct vg_mcp_conf *mcp_conf_of(const char *json);
/* A log function that drops the servers' lines (the tests' own servers are noisy). */
void mcp_quiet(void *user, const char *server, const char *line);
/* tools/call of tool with args (JSON text); fails the test on error. The result, owned. */
struct json_t *mcp_call(struct vg_mcp_client *c, const char *tool, const char *args);
/* How many lines a file has (0 when it does not exist): the fault servers' start logs. */
int mcp_count_lines(const char *path);
/* The text of the first content block of a CallToolResult (borrowed), or NULL. */
const char *mcp_first_text(struct json_t *res);

#endif
