/*
 * proc.h: an MCP server's child process (stdio.c), shared by client.c only.
 */
#ifndef VG_MCP_PROC_H
#define VG_MCP_PROC_H

#include "mcp/mcp.h"

#include <sys/types.h>

struct vg_mcp_proc {
    pid_t pid; /* the child, leader of its own process group; 0 when none */
    int in;    /* its stdin (a socket: a write to a dead child is EPIPE, never SIGPIPE) */
    int out;   /* its stdout */
    int err;   /* its stderr */
};

/* Start the server of s: argv in its own process group, working directory s->cwd, environment
 * HOME LOGNAME PATH SHELL TERM USER from vigil's plus s->env interpolated (the interpolated
 * copies are wiped once the child has them). The three descriptors are non-blocking. */
vigil_code vg_mcp_proc_start(const struct vg_mcp_server_conf *s, struct vg_mcp_proc *p,
                             vigil_error *err);
/* Stop: close stdin, wait up to grace_ms for the exit, SIGTERM the group, wait again,
 * SIGKILL the group; the child is reaped and the descriptors closed. *status gets the wait
 * status (may be NULL). A stopped proc (pid 0) is left alone. */
void vg_mcp_proc_stop(struct vg_mcp_proc *p, struct vg_clock *clock, int grace_ms, int *status);

#endif
