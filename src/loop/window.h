/*
 * window.h: the hot window of a thread, the messages a run may show the model.
 *
 * A run reads it from the store once (vg_message_recent: the current turn whole, then older
 * messages while the token budget lasts; later runs catch up a kept copy instead,
 * window_cache.h), then extends it with what it appends, so assembling
 * context reads no store and parses no JSON per turn. Each message keeps only what context
 * assembly sends, in one allocation: a run waiting on its model holds about its messages' text,
 * not a tree of JSON objects.
 *
 * The window is bounded by tokens, never by a message count. Its units are a tool exchange (an
 * assistant message with tool calls together with the results that answer them) or any other
 * single message; the current turn starts at the newest user or observation message (its
 * input). vg_window_fit chooses what fits a budget: the input always, then the current turn's
 * units newest first, then (only when the whole turn fits) older units newest first. So older
 * turns leave first, then the oldest exchanges of the current turn, each exchange whole, and the
 * turn's input never. The window drops from memory what its own budget would never send.
 *
 * A tool result is kept as the model should read it: a result in the gated executor's envelope
 * ({"status","operation_id","result","changed_entity_ids","replayed",...}) becomes its result,
 * or {"error": code, "message": text}; the envelope stays in the store and the journal.
 */
#ifndef VG_LOOP_WINDOW_H
#define VG_LOOP_WINDOW_H

#include "base/common.h"
#include "model/model.h"

#include <jansson.h>

#define VG_WINDOW_NONE ((size_t)-1)

struct vg_window_msg {
    const char *kind;    /* "user", "thought", "toolResult", "observation", "system", ... */
    const char *content; /* "" when the message has none */
    /* toolResult: the call it answers (never NULL in the window) and whether it failed. */
    const char *tool_call_id;
    int is_error;
    /* thought: the tool calls the model asked for, each with id, name and arguments. */
    struct vg_model_tool_call *calls;
    size_t n_calls;
    int64_t tokens; /* its estimated cost in context */
};

struct vg_window {
    struct vg_window_msg **msgs; /* oldest first; each one allocation with its strings */
    size_t n, cap;
    int64_t budget; /* tokens kept in memory (0: no bound) */
    int64_t tokens; /* the sum of the messages' tokens */
    size_t turn;    /* index of the current turn's input, or VG_WINDOW_NONE */
    /* Read from the store: messages added while an exchange waits for its results, and the
     * run that made the exchange (vg_window_push_body). */
    struct vg_window_msg **held;
    size_t n_held, cap_held;
    char exchange_run[64];
};

/* What fits a budget: [older_from, input_end) and [turn_from, n). */
struct vg_window_span {
    size_t older_from, input_end, turn_from;
};

/* An empty window keeping about budget tokens in memory (0: no bound). */
void vg_window_init(struct vg_window *w, int64_t budget);
void vg_window_release(struct vg_window *w);

/* Appends a message, then drops from memory what the window's budget leaves out. The strings
 * are copied; content may be NULL; kind and every call's id, name and arguments may not
 * (EINVAL); calls may be NULL when n_calls is 0. An "action" is not kept (the assistant message
 * carries the calls). A toolResult is kept only when it answers a call of the exchange in
 * progress not answered yet (providers refuse any other); tool_call_id NULL: the next call not
 * answered yet. A failure leaves the window as it was. */
vigil_code vg_window_push(struct vg_window *w, const char *kind, const char *content,
                          const char *tool_call_id, int is_error,
                          const struct vg_model_tool_call *calls, size_t n_calls, vigil_error *err);

/* Appends a message body as the store keeps it ({kind, content, run_id, metadata}, metadata
 * holding tool_calls [{id, name, arguments}], tool_call_id, toolName, is_error or status). A
 * result recorded without its call's id (the gated executor records none) answers the next
 * call of its tool not answered yet: calls run, and record their results, in the order the
 * model asked for them. A message other than a user's, an assistant's or a result, added by the
 * same run (or by no run) while an exchange waits for results, is held and kept after the
 * exchange (a tool's observations, a person's memory decision): it starts no turn. Tool calls
 * missing a string member are left out; a body without a kind is skipped. */
vigil_code vg_window_push_body(struct vg_window *w, json_t *body, vigil_error *err);

/* Keeps what push_body held (call it when the bodies read are all pushed). */
vigil_code vg_window_flush(struct vg_window *w, vigil_error *err);

/* Copies src into dst (initialized here): the same messages, turn and budget. A failure
 * leaves dst empty. */
vigil_code vg_window_copy(struct vg_window *dst, const struct vg_window *src, vigil_error *err);

/* 1 when pushing later bodies onto the window gives what pushing them after a fresh read would:
 * no exchange waits for results and nothing is held. */
int vg_window_settled(const struct vg_window *w);

/* What of the window fits `budget` tokens (see the top of this file). The newest unit and the
 * turn's input are always in, whatever their size. */
void vg_window_fit(const struct vg_window *w, int64_t budget, struct vg_window_span *out);

/* The first message of the unit holding message i (its exchange's assistant message, or i). */
size_t vg_window_unit_start(const struct vg_window *w, size_t i);

/* A stored tool result as the model reads it (owned, vg_free): the gated executor's envelope
 * becomes the result itself, or the error's code and message (*is_error set); NULL when content
 * is no such envelope (then it is read as it is). */
char *vg_window_tool_answer(const char *content, int *is_error);

#endif
