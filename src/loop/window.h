/*
 * window.h: the hot window of a thread, the newest messages a run shows the model.
 *
 * A run reads it from the store once, then extends it with what it appends, trimmed to the
 * newest hot_messages, so assembling context reads no store and parses no JSON per turn. Each
 * message keeps only what context assembly reads, in one allocation: a run waiting on its model
 * holds about its messages' text, not a tree of JSON objects (about 1 KB a message less, which
 * 100 concurrent agents feel).
 */
#ifndef VG_LOOP_WINDOW_H
#define VG_LOOP_WINDOW_H

#include "base/common.h"
#include "model/model.h"

#include <jansson.h>

struct vg_window_msg {
    const char *kind;    /* "user", "thought", "action", "toolResult", "observation", ... */
    const char *content; /* "" when the message has none */
    /* toolResult: the call it answers (NULL when unknown) and whether it reports a failure. */
    const char *tool_call_id;
    int is_error;
    /* thought: the tool calls the model asked for, each with id, name and arguments. */
    struct vg_model_tool_call *calls;
    size_t n_calls;
};

struct vg_window {
    struct vg_window_msg **msgs; /* oldest first; each one allocation with its strings */
    size_t n, cap;
    size_t max; /* the newest max messages are kept */
};

/* An empty window keeping at most max messages (max >= 1). */
void vg_window_init(struct vg_window *w, size_t max);
void vg_window_release(struct vg_window *w);

/* Appends a message, dropping the oldest beyond max. The strings are copied; content and
 * tool_call_id may be NULL, kind and every call's id, name and arguments may not (EINVAL);
 * calls may be NULL when n_calls is 0. A failure leaves the window as it was. */
vigil_code vg_window_push(struct vg_window *w, const char *kind, const char *content,
                          const char *tool_call_id, int is_error,
                          const struct vg_model_tool_call *calls, size_t n_calls,
                          vigil_error *err);

/* Appends a message body as the store keeps it ({kind, content, metadata}, metadata holding
 * tool_calls [{id, name, arguments}], tool_call_id and is_error). Tool calls missing a string
 * member are left out; a body without a kind is skipped. */
vigil_code vg_window_push_body(struct vg_window *w, json_t *body, vigil_error *err);

#endif
