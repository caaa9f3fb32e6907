/*
 * anthropic.c: the Anthropic Messages API adapter. Encodes the normalized request (system
 * prompt, tools, tool_use / tool_result blocks, prompt-caching markers on the stable prefix),
 * parses the JSON answer or the SSE stream (message_start, content_block_start/delta/stop with
 * text_delta and input_json_delta, message_delta, message_stop, ping, error) into the
 * normalized response. A stream without message_stop, or with an error event, is an error.
 */
#include "base/common.h"

#include "base/json.h"

#include <jansson.h>

#include "model/anthropic/anthropic.h"
#include "model/http.h"
#include "model/sse.h"
#include "os/fs.h"

#define DEFAULT_BASE_URL "https://api.anthropic.com/v1"
#define DEFAULT_VERSION "2023-06-01"
#define DEFAULT_MAX_TOKENS 1024

struct vg_model_anthropic {
    struct vg_model base; /* must stay first */
    char *url;
    char *key_header;
    char *version_header;
    long timeout_ms, connect_timeout_ms;
    size_t max_response;
};

static vigil_code oom(vigil_error *err)
{
    return VG_FAIL(err, VIGIL_ENOMEM, "out of memory in the anthropic adapter");
}

/* ---- request ---- */

/* Arguments text of an earlier tool call back to the object Anthropic wants. Text that is not
 * a JSON object (a model's broken output) is sent as {} rather than failing the conversation. */
static json_t *args_object(const char *text)
{
    json_t *v = text ? json_loads(text, JSON_PRESERVE_ORDER, NULL) : NULL;
    if (json_is_object(v))
        return v;
    json_decref(v);
    return json_object();
}

/* A tool call's arguments as the object Anthropic wants, written compactly (args_object). */
static int put_args(struct vg_buf *b, const char *text)
{
    json_t *v = args_object(text);
    int bad = !v || vg_json_put_compact(b, v) != 0;
    json_decref(v);
    return bad;
}

static const char cache_marker[] = "\"cache_control\":{\"type\":\"ephemeral\"}";

/* The body being written: bad is set once some text could not be encoded (the body is then
 * dropped); turns counts the messages written; user_open says a user turn of content blocks
 * (tool results, then text) is still open. */
struct body {
    struct vg_buf b;
    int bad;
    int turns, user_open;
};

static void put_system(struct body *w, const struct vg_model_request *req)
{
    if (!req->system)
        return;
    vg_buf_puts(&w->b,
                req->cache_prompt ? ",\"system\":[{\"type\":\"text\",\"text\":" : ",\"system\":");
    w->bad |= vg_json_put_text(&w->b, req->system);
    if (req->cache_prompt) {
        vg_buf_putc(&w->b, ',');
        vg_buf_puts(&w->b, cache_marker);
        vg_buf_puts(&w->b, "}]");
    }
}

/* One tool of the "tools" array; its schema is sent as given when already dumped compactly. */
static vigil_code put_tool(struct body *w, const struct vg_model_request *req, size_t i,
                           vigil_error *err)
{
    const struct vg_model_tool *t = &req->tools[i];
    json_error_t je;
    int as_is = t->input_schema && t->schema_dumped;
    json_t *schema = as_is             ? NULL
                     : t->input_schema ? json_loads(t->input_schema, JSON_PRESERVE_ORDER, &je)
                                       : json_pack("{s:s, s:{}}", "type", "object", "properties");
    if (!as_is && !json_is_object(schema)) {
        json_decref(schema);
        return VG_FAIL(err, VIGIL_EINVAL, "input schema of tool \"%s\" is not a JSON object",
                       t->name ? t->name : "");
    }
    vg_buf_puts(&w->b, i ? ",{\"name\":" : "{\"name\":");
    w->bad |= vg_json_put_text(&w->b, t->name ? t->name : "");
    if (t->description) {
        vg_buf_puts(&w->b, ",\"description\":");
        w->bad |= vg_json_put_text(&w->b, t->description);
    }
    vg_buf_puts(&w->b, ",\"input_schema\":");
    if (as_is)
        vg_buf_puts(&w->b, t->input_schema);
    else
        w->bad |= vg_json_put_compact(&w->b, schema) != 0;
    json_decref(schema);
    /* Tools come before the system prompt in the cached prefix: with no system prompt the
     * marker goes on the last tool. */
    if (req->cache_prompt && !req->system && i + 1 == req->n_tools) {
        vg_buf_putc(&w->b, ',');
        vg_buf_puts(&w->b, cache_marker);
    }
    vg_buf_putc(&w->b, '}');
    return VIGIL_OK;
}

static vigil_code put_tools(struct body *w, const struct vg_model_request *req, vigil_error *err)
{
    if (w->bad || !req->n_tools)
        return VIGIL_OK;
    vg_buf_puts(&w->b, ",\"tools\":[");
    for (size_t i = 0; !w->bad && i < req->n_tools; i++) {
        vigil_code rc = put_tool(w, req, i, err);
        if (rc)
            return rc;
    }
    vg_buf_putc(&w->b, ']');
    return VIGIL_OK;
}

static void put_tool_choice(struct body *w, const struct vg_model_request *req)
{
    static const char *types[] = {"auto", "auto", "none", "any", "tool"};
    if (w->bad || !(req->tool_choice || req->parallel_tool_calls < 0))
        return;
    vg_buf_puts(&w->b, ",\"tool_choice\":{\"type\":\"");
    vg_buf_puts(&w->b, types[(unsigned)req->tool_choice % 5]);
    vg_buf_putc(&w->b, '"');
    if (req->tool_choice == VG_MODEL_TOOL_CHOICE_TOOL) {
        vg_buf_puts(&w->b, ",\"name\":");
        w->bad |= vg_json_put_text(&w->b, req->tool_choice_name ? req->tool_choice_name : "");
    }
    if (req->parallel_tool_calls < 0)
        vg_buf_puts(&w->b, ",\"disable_parallel_tool_use\":true");
    vg_buf_putc(&w->b, '}');
}

/* A tool result: a tool_result block of the open user turn (opening one if needed). */
static void put_tool_message(struct body *w, const struct vg_model_message *m)
{
    if (!w->user_open) {
        vg_buf_puts(&w->b, w->turns++ ? ",{\"role\":\"user\",\"content\":["
                                      : "{\"role\":\"user\",\"content\":[");
        w->user_open = 1;
    } else {
        vg_buf_putc(&w->b, ',');
    }
    vg_buf_puts(&w->b, "{\"type\":\"tool_result\",\"tool_use_id\":");
    w->bad |= vg_json_put_text(&w->b, m->tool_call_id ? m->tool_call_id : "");
    vg_buf_puts(&w->b, ",\"content\":");
    if (m->is_error) {
        vg_buf_puts(&w->b, "[{\"type\":\"text\",\"text\":");
        w->bad |= vg_json_put_text(&w->b, m->text ? m->text : "");
        vg_buf_puts(&w->b, "}],\"is_error\":true}");
    } else {
        w->bad |= vg_json_put_text(&w->b, m->text ? m->text : "");
        vg_buf_putc(&w->b, '}');
    }
}

static void put_user_message(struct body *w, const struct vg_model_message *m)
{
    if (w->user_open) { /* text after tool results joins the same user turn */
        vg_buf_puts(&w->b, ",{\"type\":\"text\",\"text\":");
    } else {
        vg_buf_puts(&w->b, w->turns++ ? ",{\"role\":\"user\",\"content\":"
                                      : "{\"role\":\"user\",\"content\":");
    }
    w->bad |= vg_json_put_text(&w->b, m->text ? m->text : "");
    vg_buf_putc(&w->b, '}');
}

/* An assistant turn: plain text, or content blocks (its text, then one tool_use per call). */
static void put_assistant_message(struct body *w, const struct vg_model_message *m)
{
    if (w->user_open) {
        vg_buf_puts(&w->b, "]}");
        w->user_open = 0;
    }
    vg_buf_puts(&w->b, w->turns++ ? ",{\"role\":\"assistant\",\"content\":"
                                  : "{\"role\":\"assistant\",\"content\":");
    if (!m->n_tool_calls) {
        w->bad |= vg_json_put_text(&w->b, m->text ? m->text : "");
        vg_buf_putc(&w->b, '}');
        return;
    }
    vg_buf_putc(&w->b, '[');
    int blocks = 0;
    if (m->text && m->text[0]) {
        vg_buf_puts(&w->b, "{\"type\":\"text\",\"text\":");
        w->bad |= vg_json_put_text(&w->b, m->text);
        vg_buf_putc(&w->b, '}');
        blocks++;
    }
    for (size_t j = 0; !w->bad && j < m->n_tool_calls; j++) {
        const struct vg_model_tool_call *c = &m->tool_calls[j];
        vg_buf_puts(&w->b, blocks++ ? ",{\"type\":\"tool_use\",\"id\":"
                                    : "{\"type\":\"tool_use\",\"id\":");
        w->bad |= vg_json_put_text(&w->b, c->id ? c->id : "");
        vg_buf_puts(&w->b, ",\"name\":");
        w->bad |= vg_json_put_text(&w->b, c->name ? c->name : "");
        vg_buf_puts(&w->b, ",\"input\":");
        w->bad |= put_args(&w->b, c->arguments);
        vg_buf_putc(&w->b, '}');
    }
    vg_buf_puts(&w->b, "]}");
}

static vigil_code put_messages(struct body *w, const struct vg_model_request *req, vigil_error *err)
{
    vg_buf_puts(&w->b, ",\"messages\":[");
    for (size_t i = 0; !w->bad && i < req->n_messages; i++) {
        const struct vg_model_message *m = &req->messages[i];
        if (m->role == VG_MODEL_TOOL)
            put_tool_message(w, m);
        else if (m->role == VG_MODEL_USER)
            put_user_message(w, m);
        else if (m->role == VG_MODEL_ASSISTANT)
            put_assistant_message(w, m);
        else
            return VG_FAIL(err, VIGIL_EINVAL, "message %zu has an unknown role", i);
    }
    if (w->user_open)
        vg_buf_puts(&w->b, "]}");
    vg_buf_putc(&w->b, ']');
    return VIGIL_OK;
}

/* temperature, stop_sequences and stream, after the messages. */
static void put_options(struct body *w, const struct vg_model_request *req, int stream)
{
    if (req->has_temperature) {
        vg_buf_puts(&w->b, ",\"temperature\":");
        vg_json_put_real(&w->b, req->temperature);
    }
    if (req->n_stop) {
        vg_buf_puts(&w->b, ",\"stop_sequences\":[");
        for (size_t i = 0; i < req->n_stop; i++) {
            if (i)
                vg_buf_putc(&w->b, ',');
            w->bad |= vg_json_put_text(&w->b, req->stop[i] ? req->stop[i] : "");
        }
        vg_buf_putc(&w->b, ']');
    }
    if (stream)
        vg_buf_puts(&w->b, ",\"stream\":true");
}

/* The request body written straight into text, key for key and byte for byte what building it
 * as a jansson tree and dumping it compactly wrote before (as in the OpenAI adapter). Tool
 * results in a row, and user text after them, share one user turn. */
vigil_code vg_anthropic_build_body(const struct vg_model_request *req, const char *model,
                                   int stream, char **out, vigil_error *err)
{
    struct body w = {.bad = 0};
    vigil_code rc;
    *out = NULL;
    if (!model || !model[0])
        return VG_FAIL(err, VIGIL_EINVAL, "no model id: set model.name or VIGIL_MODEL");
    vg_buf_init(&w.b, 0);
    vg_buf_puts(&w.b, "{\"model\":");
    w.bad |= vg_json_put_text(&w.b, model);
    vg_buf_puts(&w.b, ",\"max_tokens\":");
    vg_buf_put_i64(&w.b, req->max_tokens > 0 ? req->max_tokens : DEFAULT_MAX_TOKENS);
    put_system(&w, req);
    if ((rc = put_tools(&w, req, err)))
        goto out;
    put_tool_choice(&w, req);
    if ((rc = put_messages(&w, req, err)))
        goto out;
    put_options(&w, req, stream);
    vg_buf_putc(&w.b, '}');
    if (w.bad)
        rc = VG_FAIL(err, VIGIL_EINVAL,
                     "cannot encode the request (invalid UTF-8 text or out of memory)");
    else if (w.b.fail != VIGIL_OK || !(*out = vg_buf_detach(&w.b, NULL)))
        rc = oom(err);
out:
    vg_buf_release(&w.b);
    return rc;
}

/* ---- shared mapping ---- */

static enum vg_model_stop map_stop(const char *s)
{
    int v = vg_model_stop_parse(s);
    if (v < 0 || v == VG_MODEL_STOP_OTHER)
        return VG_MODEL_STOP_OTHER;
    return (enum vg_model_stop)v;
}

static void read_usage(json_t *u, struct vg_model_usage *usage)
{
    json_t *v;
    if (!json_is_object(u))
        return;
    if (json_is_integer(v = json_object_get(u, "input_tokens")))
        usage->input_tokens = json_integer_value(v);
    if (json_is_integer(v = json_object_get(u, "output_tokens")))
        usage->output_tokens = json_integer_value(v);
    if (json_is_integer(v = json_object_get(u, "cache_read_input_tokens")))
        usage->cache_read_tokens = json_integer_value(v);
    if (json_is_integer(v = json_object_get(u, "cache_creation_input_tokens")))
        usage->cache_write_tokens = json_integer_value(v);
}

static vigil_code error_object(json_t *e, vigil_error *err)
{
    const char *type = json_string_value(json_object_get(e, "type"));
    const char *msg = json_string_value(json_object_get(e, "message"));
    return VG_FAIL(err, vg_model_error_type_code(type), "anthropic: %s: \"%s\"",
                   type ? type : "error", msg ? msg : "no message");
}

vigil_code vg_anthropic_parse_response(const char *body, size_t len, struct vg_model_response **out,
                                       vigil_error *err)
{
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_PRESERVE_ORDER, &je), *block;
    struct vg_model_response *r = NULL;
    vigil_code rc = VIGIL_OK;
    size_t i;

    if (!root && VG_JSON_OOM(&je)) {
        rc = oom(err);
        goto out;
    }
    if (!json_is_object(root)) {
        rc = VG_FAIL(err, VIGIL_EPARSE, "anthropic: malformed response body: %s",
                     root ? "not an object" : je.text);
        goto out;
    }
    if (json_is_object(json_object_get(root, "error"))) {
        rc = error_object(json_object_get(root, "error"), err);
        goto out;
    }
    json_t *content = json_object_get(root, "content");
    if (!json_is_array(content)) {
        rc = VG_FAIL(err, VIGIL_EPARSE, "anthropic: response has no content array");
        goto out;
    }
    if (!(r = vg_model_response_new("anthropic")))
        goto nomem;
    json_array_foreach (content, i, block) {
        const char *type = json_string_value(json_object_get(block, "type"));
        if (!type)
            continue;
        if (strcmp(type, "text") == 0) {
            const char *t = json_string_value(json_object_get(block, "text"));
            if (t && vg_model_response_add_text(r, t, strlen(t)))
                goto nomem;
        } else if (strcmp(type, "tool_use") == 0) {
            const char *name = json_string_value(json_object_get(block, "name"));
            if (!name) {
                rc = VG_FAIL(err, VIGIL_EPARSE, "anthropic: tool_use block %zu has no name", i);
                goto out;
            }
            json_t *input = json_object_get(block, "input");
            char *args =
                input ? vg_json_dumps(input, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY)
                      : NULL;
            rc = vg_model_response_add_tool(r, json_string_value(json_object_get(block, "id")),
                                            name, args);
            vg_free(args);
            if (rc != VIGIL_OK)
                goto nomem;
        }
    }
    const char *stop = json_string_value(json_object_get(root, "stop_reason"));
    r->stop_reason = map_stop(stop);
    read_usage(json_object_get(root, "usage"), &r->usage);
    rc = vg_model_response_done(r, stop, json_string_value(json_object_get(root, "model")),
                                json_string_value(json_object_get(root, "id")), out, err);
    json_decref(root);
    return rc;
nomem:
    rc = oom(err);
out:
    json_decref(root);
    vg_model_response_free(r);
    return rc;
}

/* ---- streaming ---- */

enum block_type { BLOCK_OTHER = 0, BLOCK_TEXT, BLOCK_TOOL };

struct block {
    enum block_type type;
    struct vg_buf buf; /* text, or the tool's input JSON */
    char *id;
    char *name;
    char *initial_input; /* the input of content_block_start when it was not empty */
    size_t tool_ordinal;
};

struct vg_anthropic_stream {
    struct vg_sse sse;
    const struct vg_model_stream_cb *cb;
    struct block *blocks;
    size_t n_blocks;
    size_t n_tools;
    char *id, *model, *stop;
    struct vg_model_usage usage;
    int started, stopped;
};

#define MAX_BLOCKS 4096

static struct block *block_at(struct vg_anthropic_stream *s, json_t *index, int create)
{
    if (!json_is_integer(index))
        return NULL;
    json_int_t i = json_integer_value(index);
    if (i < 0 || i >= MAX_BLOCKS)
        return NULL;
    if ((size_t)i >= s->n_blocks) {
        if (!create)
            return NULL;
        struct block *b = vg_realloc(s->blocks, ((size_t)i + 1) * sizeof(*b));
        if (!b)
            return NULL;
        for (size_t k = s->n_blocks; k <= (size_t)i; k++) {
            memset(&b[k], 0, sizeof(b[k]));
            vg_buf_init(&b[k].buf, 0);
        }
        s->blocks = b;
        s->n_blocks = (size_t)i + 1;
    }
    return &s->blocks[i];
}

static vigil_code on_event(void *user, const struct vg_sse_event *ev, vigil_error *err)
{
    struct vg_anthropic_stream *s = user;
    json_error_t je;
    vigil_code rc = VIGIL_OK;
    json_t *root = json_loadb(ev->data, ev->data_len, JSON_PRESERVE_ORDER, &je);

    if (!root && VG_JSON_OOM(&je))
        return oom(err);
    if (!json_is_object(root)) {
        json_decref(root);
        return VG_FAIL(err, VIGIL_EPARSE, "anthropic: malformed stream event \"%s\": %s", ev->event,
                       root ? "not an object" : je.text);
    }
    const char *type = json_string_value(json_object_get(root, "type"));
    if (!type)
        type = ev->event;

    if (strcmp(type, "error") == 0) {
        rc = error_object(json_object_get(root, "error"), err);
    } else if (s->stopped || strcmp(type, "ping") == 0) {
        /* nothing */
    } else if (strcmp(type, "message_start") == 0) {
        json_t *msg = json_object_get(root, "message");
        s->started = 1;
        read_usage(json_object_get(msg, "usage"), &s->usage);
        if (vg_model_set_str(&s->id, json_string_value(json_object_get(msg, "id"))) ||
            vg_model_set_str(&s->model, json_string_value(json_object_get(msg, "model"))))
            rc = oom(err);
    } else if (strcmp(type, "content_block_start") == 0) {
        struct block *b = block_at(s, json_object_get(root, "index"), 1);
        json_t *cb = json_object_get(root, "content_block");
        const char *btype = json_string_value(json_object_get(cb, "type"));
        if (!b) {
            rc = VG_FAIL(err, VIGIL_EPARSE, "anthropic: bad content block index");
        } else if (b->type != BLOCK_OTHER || b->buf.len) {
            rc = VG_FAIL(err, VIGIL_EPARSE, "anthropic: content block started twice");
        } else if (btype && strcmp(btype, "text") == 0) {
            const char *t = json_string_value(json_object_get(cb, "text"));
            b->type = BLOCK_TEXT;
            if (t && t[0]) {
                vg_buf_puts(&b->buf, t);
                if (s->cb && s->cb->on_text)
                    s->cb->on_text(s->cb->user, t, strlen(t));
            }
        } else if (btype && strcmp(btype, "tool_use") == 0) {
            const char *id = json_string_value(json_object_get(cb, "id"));
            const char *name = json_string_value(json_object_get(cb, "name"));
            json_t *input = json_object_get(cb, "input");
            if (!name) {
                rc = VG_FAIL(err, VIGIL_EPARSE, "anthropic: tool_use block without a name");
            } else {
                b->type = BLOCK_TOOL;
                b->tool_ordinal = s->n_tools++;
                if (vg_model_set_str(&b->id, id ? id : "") || vg_model_set_str(&b->name, name))
                    rc = oom(err);
                else if (json_object_size(input) &&
                         !(b->initial_input =
                               vg_json_dumps(input, JSON_COMPACT | JSON_PRESERVE_ORDER)))
                    rc = oom(err);
                else if (s->cb && s->cb->on_tool_start)
                    s->cb->on_tool_start(s->cb->user, b->tool_ordinal, b->id, b->name);
            }
        }
    } else if (strcmp(type, "content_block_delta") == 0) {
        struct block *b = block_at(s, json_object_get(root, "index"), 0);
        json_t *d = json_object_get(root, "delta");
        const char *dtype = json_string_value(json_object_get(d, "type"));
        if (!b) {
            rc = VG_FAIL(err, VIGIL_EPARSE, "anthropic: delta for a block that never started");
        } else if (dtype && strcmp(dtype, "text_delta") == 0 && b->type == BLOCK_TEXT) {
            const char *t = json_string_value(json_object_get(d, "text"));
            if (t && t[0]) {
                vg_buf_puts(&b->buf, t);
                if (s->cb && s->cb->on_text)
                    s->cb->on_text(s->cb->user, t, strlen(t));
            }
        } else if (dtype && strcmp(dtype, "input_json_delta") == 0 && b->type == BLOCK_TOOL) {
            const char *t = json_string_value(json_object_get(d, "partial_json"));
            if (t && t[0]) {
                vg_buf_puts(&b->buf, t);
                if (s->cb && s->cb->on_tool_args)
                    s->cb->on_tool_args(s->cb->user, b->tool_ordinal, t, strlen(t));
            }
        } else if (dtype &&
                   (strcmp(dtype, "text_delta") == 0 || strcmp(dtype, "input_json_delta") == 0)) {
            rc = VG_FAIL(err, VIGIL_EPARSE, "anthropic: \"%s\" for a block of another type", dtype);
        }
        if (rc == VIGIL_OK && b && b->buf.fail)
            rc = vg_buf_finish(&b->buf, err);
    } else if (strcmp(type, "message_delta") == 0) {
        json_t *d = json_object_get(root, "delta");
        const char *stop = json_string_value(json_object_get(d, "stop_reason"));
        read_usage(json_object_get(root, "usage"), &s->usage);
        if (stop && vg_model_set_str(&s->stop, stop))
            rc = oom(err);
    } else if (strcmp(type, "message_stop") == 0) {
        s->stopped = 1;
    }
    /* content_block_stop and unknown events need nothing. */
    json_decref(root);
    return rc;
}

vigil_code vg_anthropic_stream_new(const struct vg_model_stream_cb *cb,
                                   struct vg_anthropic_stream **out, vigil_error *err)
{
    struct vg_anthropic_stream *s = vg_calloc(1, sizeof(*s));
    if (!s)
        return oom(err);
    s->cb = cb;
    vg_sse_init(&s->sse, 0, on_event, s);
    *out = s;
    return VIGIL_OK;
}

void vg_anthropic_stream_free(struct vg_anthropic_stream *s)
{
    if (!s)
        return;
    vg_sse_release(&s->sse);
    for (size_t i = 0; i < s->n_blocks; i++) {
        vg_buf_release(&s->blocks[i].buf);
        vg_free(s->blocks[i].id);
        vg_free(s->blocks[i].name);
        vg_free(s->blocks[i].initial_input);
    }
    vg_free(s->blocks);
    vg_free(s->id);
    vg_free(s->model);
    vg_free(s->stop);
    vg_free(s);
}

vigil_code vg_anthropic_stream_feed(struct vg_anthropic_stream *s, const char *data, size_t len,
                                    vigil_error *err)
{
    return vg_sse_feed(&s->sse, data, len, err);
}

vigil_code vg_anthropic_stream_finish(struct vg_anthropic_stream *s, struct vg_model_response **out,
                                      vigil_error *err)
{
    vigil_code rc = vg_sse_finish(&s->sse, err);
    struct vg_model_response *r;
    if (rc != VIGIL_OK)
        return rc;
    if (!s->stopped)
        return VG_FAIL(err, VIGIL_ENETWORK,
                       "anthropic: stream ended before message_stop (response incomplete)");
    if (!(r = vg_model_response_new("anthropic")))
        return oom(err);
    for (size_t i = 0; i < s->n_blocks; i++) {
        struct block *b = &s->blocks[i];
        if (b->buf.fail)
            goto nomem;
        if (b->type == BLOCK_TEXT && vg_model_response_add_text(r, b->buf.data, b->buf.len))
            goto nomem;
        if (b->type == BLOCK_TOOL &&
            vg_model_response_add_tool(r, b->id, b->name,
                                       b->buf.len ? b->buf.data : b->initial_input))
            goto nomem;
    }
    r->stop_reason = map_stop(s->stop);
    r->usage = s->usage;
    return vg_model_response_done(r, s->stop, s->model, s->id, out, err);
nomem:
    vg_model_response_free(r);
    return oom(err);
}

/* ---- the adapter ---- */

static vigil_code wire_feed(void *stream, const char *data, size_t len, vigil_error *err)
{
    return vg_anthropic_stream_feed(stream, data, len, err);
}

static vigil_code wire_finish(void *stream, struct vg_model_response **out, vigil_error *err)
{
    return vg_anthropic_stream_finish(stream, out, err);
}

static const struct vg_model_wire wire = {"anthropic", wire_feed, wire_finish,
                                          vg_anthropic_parse_response};

static vigil_code turn(struct vg_model *base, const struct vg_model_request *req,
                       const struct vg_model_stream_cb *cb, struct vg_model_response **out,
                       struct vg_model_attempt *att, vigil_error *err)
{
    struct vg_model_anthropic *m = (struct vg_model_anthropic *)base;
    const char *model = req->model ? req->model : base->default_model;
    struct vg_model_request sent = *req; /* with the configured max_tokens when it sets none */
    if (sent.max_tokens <= 0)
        sent.max_tokens = base->max_tokens;
    struct vg_anthropic_stream *s = NULL;
    char *body = NULL;
    const char *headers[5];
    size_t nh = 0;
    vigil_code rc = vg_anthropic_build_body(&sent, model, cb != NULL, &body, err);
    if (rc == VIGIL_OK && cb)
        rc = vg_anthropic_stream_new(cb, &s, err);
    if (rc == VIGIL_OK) {
        if (m->key_header)
            headers[nh++] = m->key_header;
        headers[nh++] = m->version_header;
        headers[nh++] = "content-type: application/json";
        if (cb)
            headers[nh++] = "accept: text/event-stream";
        struct vg_model_http_call call = {m->url,
                                          headers,
                                          nh,
                                          body,
                                          m->timeout_ms,
                                          m->connect_timeout_ms,
                                          m->max_response,
                                          req->cancel,
                                          req->cancel_user};
        rc = vg_model_http_turn(base, &wire, &call, s, cb, out, att, err);
    }
    vg_anthropic_stream_free(s);
    vg_free(body);
    return rc;
}

static vigil_code complete(struct vg_model *base, const struct vg_model_request *req,
                           struct vg_model_response **out, struct vg_model_attempt *att,
                           vigil_error *err)
{
    return turn(base, req, NULL, out, att, err);
}

static vigil_code stream(struct vg_model *base, const struct vg_model_request *req,
                         const struct vg_model_stream_cb *cb, struct vg_model_response **out,
                         struct vg_model_attempt *att, vigil_error *err)
{
    return turn(base, req, cb, out, att, err);
}

static void destroy(struct vg_model *base)
{
    struct vg_model_anthropic *m = (struct vg_model_anthropic *)base;
    vg_free(m->url);
    vg_free(m->key_header);
    vg_free(m->version_header);
    vg_free(m);
}

static const struct vg_model_methods anthropic_methods = {
    .version = 1,
    .name = "anthropic",
    .caps = VG_MODEL_CAP_TOOLS | VG_MODEL_CAP_STREAM | VG_MODEL_CAP_PROMPT_CACHE |
            VG_MODEL_CAP_NAMED_MODEL,
    .complete = complete,
    .stream = stream,
    .destroy = destroy,
};

vigil_code vg_model_anthropic_create(const struct vg_model_options *opts, struct vg_model **out,
                                     vigil_error *err)
{
    struct vg_model_anthropic *m = vg_calloc(1, sizeof(*m));
    struct vg_buf b;
    const char *base_url = opts->base_url && opts->base_url[0] ? opts->base_url : DEFAULT_BASE_URL;
    const char *key = opts->api_key ? opts->api_key : vg_os_getenv("ANTHROPIC_API_KEY");

    /* The hosted API refuses every request without a key: say so now, not after a run
     * started and its first call came back 401. A server of one's own may need none. */
    if (!(opts->base_url && opts->base_url[0]) && !(key && key[0])) {
        vg_free(m);
        return VG_FAIL(err, VIGIL_EINVAL,
                       "ANTHROPIC_API_KEY is not set: api.anthropic.com needs a key (a "
                       "server set by VIGIL_MODEL_BASE_URL or model.base_url may need none)");
    }
    vg_alloc_install_json();
    if (!m)
        return oom(err);
    m->base.methods = &anthropic_methods;
    vg_buf_init(&b, 8192);
    size_t n = strlen(base_url);
    while (n && base_url[n - 1] == '/')
        n--;
    vg_buf_append(&b, base_url, n);
    vg_buf_puts(&b, "/messages");
    m->url = vg_buf_detach(&b, NULL);
    vg_buf_printf(&b, "anthropic-version: %s",
                  opts->anthropic_version ? opts->anthropic_version : DEFAULT_VERSION);
    m->version_header = vg_buf_detach(&b, NULL);
    if (key && key[0]) {
        vg_buf_printf(&b, "x-api-key: %s", key);
        m->key_header = vg_buf_detach(&b, NULL);
    }
    vg_buf_release(&b);
    if (!m->url || !m->version_header || (key && key[0] && !m->key_header)) {
        destroy(&m->base);
        return oom(err);
    }
    m->timeout_ms = opts->timeout_ms;
    m->connect_timeout_ms = opts->connect_timeout_ms;
    m->max_response = opts->max_response_bytes;
    *out = &m->base;
    return VIGIL_OK;
}
