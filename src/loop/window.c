/*
 * window.c: the hot window (window.h). A message is one block: the struct, its tool calls,
 * then every string it points to.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "base/alloc.h"
#include "base/jscan.h"
#include "base/json.h"
#include "loop/window.h"

void vg_window_init(struct vg_window *w, int64_t budget)
{
    memset(w, 0, sizeof *w);
    w->budget = budget > 0 ? budget : 0;
    w->turn = VG_WINDOW_NONE;
}

void vg_window_release(struct vg_window *w)
{
    for (size_t i = 0; i < w->n; i++)
        vg_free(w->msgs[i]);
    for (size_t i = 0; i < w->n_held; i++)
        vg_free(w->held[i]);
    vg_free(w->msgs);
    vg_free(w->held);
    memset(w, 0, sizeof *w);
    w->turn = VG_WINDOW_NONE;
}

static int is_kind(const struct vg_window_msg *m, const char *kind)
{
    return strcmp(m->kind, kind) == 0;
}

static int is_exchange(const struct vg_window_msg *m)
{
    return m->n_calls > 0 && is_kind(m, "thought");
}

size_t vg_window_unit_start(const struct vg_window *w, size_t i)
{
    if (!is_kind(w->msgs[i], "toolResult"))
        return i;
    size_t j = i;
    while (j > 0 && is_kind(w->msgs[j - 1], "toolResult"))
        j--;
    return j > 0 && is_exchange(w->msgs[j - 1]) ? j - 1 : i;
}

static int64_t unit_tokens(const struct vg_window *w, size_t from, size_t to)
{
    int64_t t = 0;
    for (size_t i = from; i < to; i++)
        t += w->msgs[i]->tokens;
    return t;
}

void vg_window_fit(const struct vg_window *w, int64_t budget, struct vg_window_span *out)
{
    size_t t = w->turn, lo = t == VG_WINDOW_NONE ? 0 : t + 1, k = w->n;
    int64_t left = budget - (t == VG_WINDOW_NONE ? 0 : w->msgs[t]->tokens);
    /* The current turn, newest unit first; the newest always goes, whatever its size. */
    while (k > lo) {
        size_t u = vg_window_unit_start(w, k - 1);
        int64_t c = unit_tokens(w, u, k);
        if (c > left && k < w->n)
            break;
        left -= c;
        k = u;
    }
    out->turn_from = k;
    if (t == VG_WINDOW_NONE) {
        out->older_from = out->input_end = k;
        return;
    }
    out->input_end = t + 1;
    /* Older turns only when the whole current turn is in. */
    size_t j = t;
    while (k == lo && j > 0) {
        size_t u = vg_window_unit_start(w, j - 1);
        int64_t c = unit_tokens(w, u, j);
        if (c > left)
            break;
        left -= c;
        j = u;
    }
    out->older_from = j;
}

/* Drop from memory what the window's own budget leaves out (a request's budget, smaller,
 * chooses among what stays: fitting is monotone in the budget). */
static void evict(struct vg_window *w)
{
    struct vg_window_span s;
    if (!w->budget || w->tokens <= w->budget)
        return;
    vg_window_fit(w, w->budget, &s);
    size_t out = 0;
    for (size_t i = 0; i < w->n; i++) {
        int keep = (i >= s.older_from && i < s.input_end) || i >= s.turn_from;
        if (keep) {
            w->msgs[out++] = w->msgs[i];
        } else {
            w->tokens -= w->msgs[i]->tokens;
            vg_free(w->msgs[i]);
        }
    }
    if (w->turn != VG_WINDOW_NONE)
        w->turn -= s.older_from;
    w->n = out;
}

static size_t len0(const char *s)
{
    return s ? strlen(s) + 1 : 0;
}

/* Copies s into the block at *at and returns the copy (NULL stays NULL). */
static const char *put(char **at, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *copy = memcpy(*at, s, n);
    *at += n;
    return copy;
}

/*
 * The call a result answers in the exchange in progress, or NULL (a result the model was never
 * shown the call of, or a second result of one call). Without an id: the first call after the
 * last answered one that has the result's tool name (any name when NULL) and no result yet.
 */
static const char *answered_call(const struct vg_window *w, const char *id, const char *tool)
{
    if (!w->n)
        return NULL;
    size_t u = vg_window_unit_start(w, w->n - 1);
    const struct vg_window_msg *x = w->msgs[u];
    if (!is_exchange(x))
        return NULL;
    size_t from = 0;
    for (size_t k = 0; !id && w->n - 1 > u && k < x->n_calls; k++)
        if (!strcmp(x->calls[k].id, w->msgs[w->n - 1]->tool_call_id))
            from = k + 1;
    for (size_t k = id ? 0 : from; k < x->n_calls; k++) {
        const struct vg_model_tool_call *c = &x->calls[k];
        if (id ? strcmp(c->id, id) != 0 : tool && strcmp(c->name, tool) != 0)
            continue;
        int done = 0;
        for (size_t r = u + 1; r < w->n && !done; r++)
            done = !strcmp(w->msgs[r]->tool_call_id, c->id);
        if (!done)
            return c->id;
        if (id)
            return NULL;
    }
    return NULL;
}

static int str_is(json_t *v, const char *s)
{
    return json_is_string(v) && !strcmp(json_string_value(v), s);
}

/* The keys of the gated executor's outcome envelope (vg_tool_outcome_json). */
static const char *const envelope_keys[] = {"action_id",      "approval_id", "changed_entity_ids",
                                            "changed_tokens", "error_code",  "error_message",
                                            "operation_id",   "replayed",    "result",
                                            "result_id",      "status"};

static int known_status(const char *s)
{
    return s && (!strcmp(s, "success") || !strcmp(s, "error") || !strcmp(s, "partial"));
}

/* What the model reads of an envelope: the result (canonical JSON text, NULL: none), or the
 * error's code and message. NULL when out of memory or not UTF-8. */
static char *write_answer(const char *status, const char *code, const char *message,
                          const char *result, int *is_error)
{
    struct vg_buf b;
    int bad = 0;
    vg_buf_init(&b, 0);
    if (!strcmp(status, "error")) {
        const struct vg_jfield f[] = {{"error", VG_JF_STR, code, 0},
                                      {"message", VG_JF_STR, message, 0}};
        bad = vg_json_put_fields(&b, f, VG_ARRAY_LEN(f));
    } else if (!strcmp(status, "partial")) {
        const struct vg_jfield f[] = {{"result", VG_JF_RAW, result ? result : "null", 0},
                                      {"status", VG_JF_STR, "partial", 0}};
        bad = vg_json_put_fields(&b, f, VG_ARRAY_LEN(f));
    } else {
        vg_buf_puts(&b, result ? result : "null");
    }
    *is_error = !strcmp(status, "error");
    char *text = !bad && vg_buf_finish(&b, NULL) == VIGIL_OK ? vg_buf_detach(&b, NULL) : NULL;
    vg_buf_release(&b);
    return text;
}

/* The envelope read without a tree (base/jscan.h), as a tool result is read at every step:
 * 1 with *out set, 0 when the content is no envelope, -1 when the scanner declines (then
 * jansson reads it). The envelope is canonical JSON (both the executor and its loop adapter
 * write it so), and so is the result's text within it. */
static int scan_envelope(const char *content, char **out, int *is_error)
{
    struct vg_jscan sc;
    struct vg_buf t; /* the strings read, and the result's text */
    size_t status = (size_t)-1, code = (size_t)-1, msg = (size_t)-1, result = (size_t)-1, klen;
    const char *key;
    int op = 0, replayed = 0, envelope = 1;
    vg_jscan_init(&sc, content, strlen(content));
    vg_buf_init(&t, 0);
    int more = vg_jscan_enter(&sc, '{') == 0 ? vg_jscan_next(&sc, &key, &klen) : -1;
    while (more == 1 && envelope) {
        int known = 0, r;
        for (size_t i = 0; i < VG_ARRAY_LEN(envelope_keys); i++)
            known |= vg_jscan_key_is(key, klen, envelope_keys[i]);
        envelope = known;
        if (vg_jscan_key_is(key, klen, "status"))
            r = vg_jscan_string(&sc, &t, &status);
        else if (vg_jscan_key_is(key, klen, "error_code"))
            r = vg_jscan_string(&sc, &t, &code);
        else if (vg_jscan_key_is(key, klen, "error_message"))
            r = vg_jscan_string(&sc, &t, &msg);
        else if (vg_jscan_key_is(key, klen, "result")) {
            const unsigned char *from = sc.p;
            r = vg_jscan_skip(&sc);
            while (from < sc.p && (*from == ' ' || *from == '\n' || *from == '\t' || *from == '\r'))
                from++;
            result = t.len;
            vg_buf_append(&t, from, (size_t)(sc.p - from));
            vg_buf_putc(&t, '\0');
        } else {
            op |= vg_jscan_key_is(key, klen, "operation_id") && vg_jscan_peek(&sc) == '"';
            replayed |= vg_jscan_key_is(key, klen, "replayed") &&
                        (vg_jscan_peek(&sc) == 't' || vg_jscan_peek(&sc) == 'f');
            r = vg_jscan_skip(&sc);
        }
        more = r ? -1 : vg_jscan_next(&sc, &key, &klen);
    }
    int got = more == -1 || t.fail ? -1 : 0;
    if (!got && more == 0 && vg_jscan_end(&sc))
        got = -1;
    if (!got && envelope && op && replayed && status != (size_t)-1 &&
        known_status(t.data + status)) {
        if (result != (size_t)-1 && !vg_json_is_canonical(t.data + result, strlen(t.data + result)))
            got = -1;
        else if ((*out = write_answer(t.data + status, code == (size_t)-1 ? NULL : t.data + code,
                                      msg == (size_t)-1 ? NULL : t.data + msg,
                                      result == (size_t)-1 ? NULL : t.data + result, is_error)))
            got = 1;
    }
    vg_buf_release(&t);
    return got;
}

/*
 * A tool result as the model reads it. The gated executor's envelope (status, operation_id,
 * replayed, and at most its other bookkeeping keys) becomes the result itself, or the error's
 * code and message: the ids are for the journal, and a model would pay for them again on every
 * later request of the turn. Returns NULL when content is not such an envelope.
 */
char *vg_window_tool_answer(const char *content, int *is_error)
{
    char *text = NULL;
    if (content[0] != '{' || !strstr(content, "\"operation_id\"") || !strstr(content, "\"status\""))
        return NULL;
    int scanned = scan_envelope(content, &text, is_error);
    if (scanned >= 0)
        return text;
    json_t *v = json_loads(content, 0, NULL), *val;
    const char *key;
    int envelope = json_is_string(json_object_get(v, "operation_id")) &&
                   json_is_boolean(json_object_get(v, "replayed"));
    json_object_foreach (v, key, val) {
        int known = 0;
        for (size_t i = 0; i < VG_ARRAY_LEN(envelope_keys); i++)
            known |= !strcmp(key, envelope_keys[i]);
        envelope &= known;
    }
    const char *status = json_string_value(json_object_get(v, "status"));
    json_t *r = json_object_get(v, "result");
    char *result = r && !json_is_null(r) ? vg_json_dump(r, 1) : NULL;
    if (envelope && known_status(status) && (result || !r || json_is_null(r)))
        text =
            write_answer(status, json_string_value(json_object_get(v, "error_code")),
                         json_string_value(json_object_get(v, "error_message")), result, is_error);
    vg_free(result);
    json_decref(v);
    return text;
}

/* The message as one block: the struct, its tool calls, then its strings. NULL: no memory. */
static struct vg_window_msg *new_msg(const char *kind, const char *content,
                                     const char *tool_call_id, int is_error,
                                     const struct vg_model_tool_call *calls, size_t n_calls)
{
    size_t size = sizeof(struct vg_window_msg) + n_calls * sizeof *calls + len0(kind) +
                  len0(content) + len0(tool_call_id);
    int64_t tokens = vg_token_estimate(content) + 8;
    for (size_t i = 0; i < n_calls; i++) {
        size += len0(calls[i].id) + len0(calls[i].name) + len0(calls[i].arguments);
        tokens += vg_token_estimate(calls[i].name) + vg_token_estimate(calls[i].arguments) + 4;
    }
    struct vg_window_msg *m = vg_malloc(size);
    if (!m)
        return NULL;
    memset(m, 0, sizeof *m);
    char *at = (char *)(m + 1) + n_calls * sizeof *calls;
    if (n_calls) {
        m->calls = (struct vg_model_tool_call *)(m + 1);
        m->n_calls = n_calls;
        for (size_t i = 0; i < n_calls; i++) {
            m->calls[i].id = put(&at, calls[i].id);
            m->calls[i].name = put(&at, calls[i].name);
            m->calls[i].arguments = put(&at, calls[i].arguments);
        }
    }
    m->kind = put(&at, kind);
    m->content = put(&at, content);
    m->tool_call_id = put(&at, tool_call_id);
    m->is_error = is_error;
    m->tokens = tokens;
    return m;
}

/* Appends m (owned from here on, freed on failure) to msgs (or to held, n and cap the list's). */
static vigil_code add(struct vg_window_msg ***list, size_t *n, size_t *cap, struct vg_window_msg *m,
                      vigil_error *err)
{
    if (m && *n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        struct vg_window_msg **p = vg_realloc(*list, c * sizeof *p);
        if (p) {
            *list = p;
            *cap = c;
        }
    }
    if (!m || *n == *cap) {
        vg_free(m);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory keeping the context window");
    }
    (*list)[(*n)++] = m;
    return VIGIL_OK;
}

/* A person's message the agent never answered (no assistant message after it before the next
 * one: its turn failed, or was canceled or stopped before any reply) leaves the window when the
 * next arrives: a failed turn's question stays in the store and its run's journal, but later
 * requests do not ask it again, however often the turn was retried (trial F, F6). A turn that
 * got as far as a tool call has an assistant message and keeps its question. */
static void drop_unanswered(struct vg_window *w)
{
    size_t i = w->n - 1; /* the person's message just added */
    while (i > 0 && !is_kind(w->msgs[i - 1], "user") && !is_kind(w->msgs[i - 1], "thought"))
        i--;
    if (i == 0 || !is_kind(w->msgs[i - 1], "user"))
        return;
    w->tokens -= w->msgs[i - 1]->tokens;
    vg_free(w->msgs[i - 1]);
    memmove(&w->msgs[i - 1], &w->msgs[i], (w->n - i) * sizeof *w->msgs);
    w->n--;
}

static vigil_code append(struct vg_window *w, struct vg_window_msg *m, int may_start_turn,
                         vigil_error *err)
{
    vigil_code rc = add(&w->msgs, &w->n, &w->cap, m, err);
    if (rc)
        return rc;
    if (may_start_turn && is_kind(m, "user"))
        drop_unanswered(w);
    if (may_start_turn && (is_kind(m, "user") || is_kind(m, "observation")))
        w->turn = w->n - 1;
    w->tokens += m->tokens;
    evict(w);
    return VIGIL_OK;
}

/* Is the newest unit an exchange still waiting for results? */
static int exchange_open(const struct vg_window *w)
{
    if (!w->n)
        return 0;
    size_t u = vg_window_unit_start(w, w->n - 1);
    return is_exchange(w->msgs[u]) && w->n - 1 - u < w->msgs[u]->n_calls;
}

vigil_code vg_window_flush(struct vg_window *w, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    size_t i = 0;
    for (; i < w->n_held && !rc; i++)
        rc = append(w, w->held[i], 0, err);
    for (; i < w->n_held; i++)
        vg_free(w->held[i]);
    w->n_held = 0;
    return rc;
}

/* vg_window_push with the result's tool name (for a result recorded without its call's id);
 * hold: keep the message aside until the exchange in progress has its results. */
static vigil_code push(struct vg_window *w, const char *kind, const char *content,
                       const char *tool_call_id, const char *tool, int is_error,
                       const struct vg_model_tool_call *calls, size_t n_calls, int hold,
                       vigil_error *err)
{
    if (!content)
        content = "";
    /* Context assembly compares these: a NULL would be a caller's bug, refused here. */
    int incomplete = !kind;
    for (size_t i = 0; i < n_calls; i++)
        incomplete |= !calls[i].id || !calls[i].name || !calls[i].arguments;
    if (incomplete)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "a window message needs a kind, and its tool calls an "
                       "id, a name and arguments");
    if (!strcmp(kind, "action"))
        return VIGIL_OK;
    char *answer = NULL;
    int result = !strcmp(kind, "toolResult");
    if (result) {
        if (!(tool_call_id = answered_call(w, tool_call_id, tool)))
            return VIGIL_OK;
        if ((answer = vg_window_tool_answer(content, &is_error)))
            content = answer;
    }
    struct vg_window_msg *m = new_msg(kind, content, tool_call_id, is_error, calls, n_calls);
    vg_free(answer);
    if (hold)
        return add(&w->held, &w->n_held, &w->cap_held, m, err);
    vigil_code rc = result ? VIGIL_OK : vg_window_flush(w, err);
    if (rc) {
        vg_free(m);
        return rc;
    }
    if ((rc = append(w, m, 1, err)))
        return rc;
    return result && !exchange_open(w) ? vg_window_flush(w, err) : VIGIL_OK;
}

vigil_code vg_window_push(struct vg_window *w, const char *kind, const char *content,
                          const char *tool_call_id, int is_error,
                          const struct vg_model_tool_call *calls, size_t n_calls, vigil_error *err)
{
    w->exchange_run[0] = '\0';
    return push(w, kind, content, tool_call_id, NULL, is_error, calls, n_calls, 0, err);
}

vigil_code vg_window_push_body(struct vg_window *w, json_t *body, vigil_error *err)
{
    const char *kind = json_string_value(json_object_get(body, "kind"));
    if (!kind)
        return VIGIL_OK;
    json_t *meta = json_object_get(body, "metadata");
    json_t *calls = json_object_get(meta, "tool_calls");
    size_t n = json_array_size(calls), kept = 0;
    struct vg_model_tool_call *tc = n ? vg_calloc(n, sizeof *tc) : NULL;
    if (n && !tc)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory keeping the context window");
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(calls, i);
        tc[kept].id = json_string_value(json_object_get(c, "id"));
        tc[kept].name = json_string_value(json_object_get(c, "name"));
        tc[kept].arguments = json_string_value(json_object_get(c, "arguments"));
        if (tc[kept].id && tc[kept].name && tc[kept].arguments)
            kept++;
    }
    int is_error = json_is_true(json_object_get(meta, "is_error")) ||
                   str_is(json_object_get(meta, "status"), "error");
    /* What a tool or a person adds to the thread while a run's calls are out (a tool's
     * observations, a memory decision) waits until the calls have their results: providers
     * want the results right after their calls. A message of another run ends the exchange (a
     * crash left it without some results). */
    const char *run = json_string_value(json_object_get(body, "run_id"));
    int hold = strcmp(kind, "user") && strcmp(kind, "thought") && strcmp(kind, "toolResult") &&
               exchange_open(w) && (!run || !strcmp(run, w->exchange_run));
    if (!strcmp(kind, "thought"))
        snprintf(w->exchange_run, sizeof w->exchange_run, "%s", run ? run : "");
    vigil_code rc =
        push(w, kind, json_string_value(json_object_get(body, "content")),
             json_string_value(json_object_get(meta, "tool_call_id")),
             json_string_value(json_object_get(meta, "toolName")), is_error, tc, kept, hold, err);
    vg_free(tc);
    return rc;
}

vigil_code vg_window_copy(struct vg_window *dst, const struct vg_window *src, vigil_error *err)
{
    vg_window_init(dst, src->budget);
    if (src->n && !(dst->msgs = vg_malloc(src->n * sizeof *dst->msgs)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory keeping the context window");
    dst->cap = src->n;
    for (size_t i = 0; i < src->n; i++) {
        const struct vg_window_msg *m = src->msgs[i];
        if (!(dst->msgs[i] = new_msg(m->kind, m->content, m->tool_call_id, m->is_error, m->calls,
                                     m->n_calls))) {
            vg_window_release(dst);
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory keeping the context window");
        }
        dst->n++;
    }
    dst->tokens = src->tokens;
    dst->turn = src->turn;
    memcpy(dst->exchange_run, src->exchange_run, sizeof dst->exchange_run);
    return VIGIL_OK;
}

int vg_window_settled(const struct vg_window *w)
{
    return w->n_held == 0 && !exchange_open(w);
}
