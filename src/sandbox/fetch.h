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
/* 1 when the address may not be connected to (loopback, private, link-local, reserved, or
 * one of those inside an IPv6 address) and is not in allow_addresses. */
int vg_fetch_address_refused(const struct sockaddr *sa, const json_t *allow_addresses);
/* 1 when host matches an entry of allow_hosts ("name", "*.suffix", "*"). */
int vg_fetch_host_allowed(const json_t *allow_hosts, const char *host);

#endif
