/*
 * model_server.h: an OpenAI-compatible model server for benchmarks, in a child process (so its
 * CPU is not the benchmark's) answering every request at once: with an `echo` tool call until
 * the conversation shows N steps done, then with a final answer. Requests under /multi/ get
 * steps_multi steps, others steps_single. When notify_fd >= 0 each request's arrival time
 * (CLOCK_MONOTONIC, int64 ns) is written to it.
 */
#ifndef VG_TEST_MODEL_SERVER_H
#define VG_TEST_MODEL_SERVER_H

#include <sys/types.h>

/* Start the server; *port receives its loopback port. Kill the returned pid to stop it. */
pid_t vg_instant_model_start(int steps_single, int steps_multi, int notify_fd, int *port);

#endif
