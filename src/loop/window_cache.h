/*
 * window_cache.h: a thread's hot window kept between runs, so a turn reads and parses only the
 * messages added since the window was last read, not the thread's whole recent history (that
 * parse was a third of a chat turn's instructions: docs/internals/PERF.md, "Session 24").
 *
 * Each env (one store connection: a runtime, or a daemon's worker) keeps a few windows, keyed
 * by agent, thread and token budget, each with the seq and id of the newest message it holds.
 * A run catches its window up with the thread's messages newer than that seq, whoever wrote
 * them (this process, another process, another daemon). Messages are never changed: a thread
 * only grows, and compaction writes its summaries to another thread (memory/compact.h). The
 * first message caught up must name the kept newest as its prev_id, else the window is read
 * again from scratch. A window is kept only when it is settled (window.h: no exchange waiting
 * for results, nothing held), so catching up pushes exactly what a fresh read would push after
 * it, and only when read outside a transaction (a rollback could take back what it holds); the
 * run itself works on a copy.
 */
#ifndef VG_LOOP_WINDOW_CACHE_H
#define VG_LOOP_WINDOW_CACHE_H

#include "env/env.h"
#include "loop/window.h"

/* Windows kept per env, and the tokens they may hold together (the oldest used leave first). */
#define VG_WINDOW_CACHE_MAX 32
#define VG_WINDOW_CACHE_TOKENS (1000 * 1000)

/* The window of (agent, thread) with `budget` tokens (window.h), initialized here: the kept
 * one caught up, else read from the store (vg_message_recent). On failure w is empty. */
vigil_code vg_window_cache_read(struct vg_env *env, const char *agent_id, const char *thread_id,
                                int64_t budget, struct vg_window *w, vigil_error *err);

#endif
