/* fetch.h: URLs fetched by the host for a sandboxed program (fetch.c). */
#ifndef VG_SANDBOX_FETCH_H
#define VG_SANDBOX_FETCH_H

#include "base/common.h"

#include <jansson.h>
#include <sys/socket.h>

/*
 * Fetch url under policy (the config's sandbox.fetch: allow_hosts, allow_addresses,
 * max_bytes, timeout_ms, max_redirects). A new {"status", "url" (after redirects), "body"} or
 * NULL with code ("denied", "failed", "too_large") and msg filled.
 */
json_t *vg_sandbox_fetch(const json_t *policy, const char *url, char code[32], char msg[256]);
/* The same, no hop running past deadline_ns (monotonic; 0: none). */
json_t *vg_sandbox_fetch_until(const json_t *policy, const char *url, int64_t deadline_ns,
                               char code[32], char msg[256]);

/* The same on a thread of its own, so the caller's loop (and its fibers) go on meanwhile:
 * vg_fetch_done_fd becomes readable when it has ended; vg_fetch_finish then gives what
 * vg_sandbox_fetch would have and frees the job. Finishing earlier waits for the end, which
 * the deadline bounds. NULL: out of memory or threads. */
struct vg_fetch_job;
struct vg_fetch_job *vg_fetch_start(const json_t *policy, const char *url, int64_t deadline_ns);
int vg_fetch_done_fd(const struct vg_fetch_job *j);
json_t *vg_fetch_finish(struct vg_fetch_job *j, char code[32], char msg[256]);
/* Give up on it without waiting: it ends on its own thread by its deadline and frees itself. */
void vg_fetch_abandon(struct vg_fetch_job *j);
/* 1 when the address may not be connected to (loopback, private, link-local, reserved, or
 * one of those inside an IPv6 address) and is not in allow_addresses. */
int vg_fetch_address_refused(const struct sockaddr *sa, const json_t *allow_addresses);
/* 1 when host matches an entry of allow_hosts ("name", "*.suffix", "*"). */
int vg_fetch_host_allowed(const json_t *allow_hosts, const char *host);

#endif
