/*
 * openai.c: the OpenAI-compatible Chat Completions adapter (OpenAI, Ollama /v1, llama.cpp
 * server, vLLM, Kimi: anything that speaks the format at a base URL). Encodes the normalized
 * request, parses the JSON answer or the SSE stream (tool-call deltas keyed by index, arguments
 * split over many chunks, usage in the last chunk when stream_options.include_usage is sent,
 * "[DONE]"), and maps everything to the normalized response. A stream that ends without a
 * finish reason or [DONE] is an error, never a half response.
 */
#include "base/common.h"

#include "base/json.h"
#include "base/jscan.h"

#include <jansson.h>

#include "model/http.h"
#include "model/openai/openai.h"
#include "model/sse.h"
#include "os/fs.h"

#define DEFAULT_BASE_URL "https://api.openai.com/v1"

struct vg_model_openai {
    struct vg_model base; /* must stay first */
    char *url;            /* base_url + /chat/completions */
    char *auth_header;    /* "Authorization: Bearer ..." or NULL */
    int stream_usage;
    long timeout_ms, connect_timeout_ms;
    size_t max_response;
};

/* ---- request ---- */

static vigil_code schema_json(const char *text, const char *tool, json_t **out, vigil_error *err)
{
    json_error_t je;
    if (!text) {
        *out = json_pack("{s:s, s:{}}", "type", "object", "properties");
    } else {
        *out = json_loads(text, JSON_REJECT_DUPLICATES, &je);
        if (*out && !json_is_object(*out)) {
            json_decref(*out);
            return VG_FAIL(err, VIGIL_EINVAL, "input schema of tool \"%s\" is not an object", tool);
        }
        if (!*out)
            return VG_FAIL(err, VIGIL_EINVAL, "input schema of tool \"%s\" is not JSON: %s", tool,
                           je.text);
    }
    return *out ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory encoding a tool");
}

/* The message writers below each write one message without its closing '}' and return
 * non-zero when some text could not be encoded (invalid UTF-8 or out of memory). */

static int put_user_message(struct vg_buf *b, const struct vg_model_message *m)
{
    vg_buf_puts(b, "{\"role\":\"user\",\"content\":");
    return vg_json_put_text(b, m->text ? m->text : "");
}

/* Text (null when there are tool calls and no text), then the tool calls as functions. */
static int put_assistant_message(struct vg_buf *b, const struct vg_model_message *m)
{
    int bad = 0;
    vg_buf_puts(b, "{\"role\":\"assistant\",\"content\":");
    if (m->text)
        bad |= vg_json_put_text(b, m->text);
    else
        vg_buf_puts(b, m->n_tool_calls ? "null" : "\"\"");
    if (!m->n_tool_calls)
        return bad;
    vg_buf_puts(b, ",\"tool_calls\":[");
    for (size_t j = 0; j < m->n_tool_calls; j++) {
        const struct vg_model_tool_call *c = &m->tool_calls[j];
        vg_buf_puts(b, j ? ",{\"id\":" : "{\"id\":");
        bad |= vg_json_put_text(b, c->id ? c->id : "");
        vg_buf_puts(b, ",\"type\":\"function\",\"function\":{\"name\":");
        bad |= vg_json_put_text(b, c->name ? c->name : "");
        vg_buf_puts(b, ",\"arguments\":");
        bad |= vg_json_put_text(b, c->arguments && c->arguments[0] ? c->arguments : "{}");
        vg_buf_puts(b, "}}");
    }
    vg_buf_putc(b, ']');
    return bad;
}

static int put_tool_message(struct vg_buf *b, const struct vg_model_message *m)
{
    int bad = 0;
    /* No error flag in Chat Completions: say it in the content. */
    vg_buf_puts(b, "{\"role\":\"tool\",\"tool_call_id\":");
    bad |= vg_json_put_text(b, m->tool_call_id ? m->tool_call_id : "");
    vg_buf_puts(b, ",\"content\":");
    if (!m->is_error)
        return bad | vg_json_put_text(b, m->text ? m->text : "");
    struct vg_buf t;
    vg_buf_init(&t, 0);
    vg_buf_puts(&t, "ERROR: ");
    vg_buf_puts(&t, m->text ? m->text : "");
    bad |= t.fail != VIGIL_OK || vg_json_put_text(b, t.data);
    vg_buf_release(&t);
    return bad;
}

/* The "messages" array: the system prompt first, then the conversation. */
static vigil_code put_messages(struct vg_buf *b, const struct vg_model_request *req, int *bad,
                               vigil_error *err)
{
    vg_buf_puts(b, ",\"messages\":[");
    if (req->system) {
        vg_buf_puts(b, "{\"role\":\"system\",\"content\":");
        *bad |= vg_json_put_text(b, req->system);
        vg_buf_putc(b, '}');
    }
    for (size_t i = 0; !*bad && i < req->n_messages; i++) {
        const struct vg_model_message *m = &req->messages[i];
        if (i || req->system)
            vg_buf_putc(b, ',');
        switch (m->role) {
        case VG_MODEL_USER:
            *bad |= put_user_message(b, m);
            break;
        case VG_MODEL_ASSISTANT:
            *bad |= put_assistant_message(b, m);
            break;
        case VG_MODEL_TOOL:
            *bad |= put_tool_message(b, m);
            break;
        default:
            return VG_FAIL(err, VIGIL_EINVAL, "message %zu has an unknown role", i);
        }
        vg_buf_putc(b, '}');
    }
    vg_buf_putc(b, ']');
    return VIGIL_OK;
}

/* The "tools" array of functions; a schema already dumped compactly is sent as given. */
static vigil_code put_tools(struct vg_buf *b, const struct vg_model_request *req, int *bad,
                            vigil_error *err)
{
    if (*bad || !req->n_tools)
        return VIGIL_OK;
    vg_buf_puts(b, ",\"tools\":[");
    for (size_t i = 0; !*bad && i < req->n_tools; i++) {
        const struct vg_model_tool *t = &req->tools[i];
        json_t *schema = NULL;
        vigil_code rc;
        if (!(t->input_schema && t->schema_dumped) &&
            (rc = schema_json(t->input_schema, t->name ? t->name : "", &schema, err)))
            return rc;
        vg_buf_puts(b, i ? ",{\"type\":\"function\",\"function\":{\"name\":"
                         : "{\"type\":\"function\",\"function\":{\"name\":");
        *bad |= vg_json_put_text(b, t->name ? t->name : "");
        if (t->description) {
            vg_buf_puts(b, ",\"description\":");
            *bad |= vg_json_put_text(b, t->description);
        }
        vg_buf_puts(b, ",\"parameters\":");
        if (schema)
            *bad |= vg_json_put_compact(b, schema);
        else
            vg_buf_puts(b, t->input_schema);
        json_decref(schema);
        vg_buf_puts(b, "}}");
    }
    vg_buf_putc(b, ']');
    return VIGIL_OK;
}

static int put_tool_choice(struct vg_buf *b, const struct vg_model_request *req)
{
    int bad = 0;
    switch (req->tool_choice) {
    case VG_MODEL_TOOL_CHOICE_AUTO:
        vg_buf_puts(b, ",\"tool_choice\":\"auto\"");
        break;
    case VG_MODEL_TOOL_CHOICE_NONE:
        vg_buf_puts(b, ",\"tool_choice\":\"none\"");
        break;
    case VG_MODEL_TOOL_CHOICE_ANY:
        vg_buf_puts(b, ",\"tool_choice\":\"required\"");
        break;
    case VG_MODEL_TOOL_CHOICE_TOOL:
        vg_buf_puts(b, ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":");
        bad |= vg_json_put_text(b, req->tool_choice_name ? req->tool_choice_name : "");
        vg_buf_puts(b, "}}");
        break;
    default:
        break;
    }
    if (req->parallel_tool_calls)
        vg_buf_puts(b, req->parallel_tool_calls > 0 ? ",\"parallel_tool_calls\":true"
                                                    : ",\"parallel_tool_calls\":false");
    return bad;
}

/* max_completion_tokens, temperature, stop and the stream switches, after the tools. */
static int put_options(struct vg_buf *b, const struct vg_model_request *req, int stream,
                       int stream_usage)
{
    int bad = 0;
    if (req->max_tokens > 0) {
        vg_buf_puts(b, ",\"max_completion_tokens\":");
        vg_buf_put_i64(b, (long long)req->max_tokens);
    }
    if (req->has_temperature) {
        vg_buf_puts(b, ",\"temperature\":");
        vg_json_put_real(b, req->temperature);
    }
    if (req->n_stop) {
        vg_buf_puts(b, ",\"stop\":[");
        for (size_t i = 0; i < req->n_stop; i++) {
            if (i)
                vg_buf_putc(b, ',');
            if (req->stop[i])
                bad |= vg_json_put_text(b, req->stop[i]);
            else
                vg_buf_puts(b, "null");
        }
        vg_buf_putc(b, ']');
    }
    if (stream) {
        vg_buf_puts(b, ",\"stream\":true");
        if (stream_usage >= 0)
            vg_buf_puts(b, ",\"stream_options\":{\"include_usage\":true}");
    }
    return bad;
}

/* The request body written straight into text, key for key and byte for byte what building it
 * as a jansson tree and dumping it compactly wrote before, without a tree of every message of
 * the conversation to allocate and free on every call. Strings are checked as jansson would
 * check them (valid UTF-8); a tool's input schema is parsed, so it must be a JSON object. */
vigil_code vg_openai_build_body(const struct vg_model_request *req, const char *model, int stream,
                                int stream_usage, char **out, vigil_error *err)
{
    struct vg_buf b;
    vigil_code rc;
    int bad = 0;
    *out = NULL;
    if (!model || !model[0])
        return VG_FAIL(err, VIGIL_EINVAL, "no model id: set model.name or VIGIL_MODEL");
    vg_buf_init(&b, 0);
    vg_buf_puts(&b, "{\"model\":");
    bad |= vg_json_put_text(&b, model);
    if ((rc = put_messages(&b, req, &bad, err)) || (rc = put_tools(&b, req, &bad, err)))
        goto out;
    bad |= put_tool_choice(&b, req);
    bad |= put_options(&b, req, stream, stream_usage);
    vg_buf_putc(&b, '}');
    if (bad)
        rc = VG_FAIL(err, VIGIL_EINVAL,
                     "cannot encode the request (invalid UTF-8 text or out of memory)");
    else if (b.fail != VIGIL_OK || !(*out = vg_buf_detach(&b, NULL)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory encoding the request");
out:
    vg_buf_release(&b);
    return rc;
}

/* ---- shared mapping ---- */

static enum vg_model_stop map_finish(const char *f, size_t n_tools)
{
    if (!f)
        return VG_MODEL_STOP_OTHER;
    if (strcmp(f, "tool_calls") == 0 || strcmp(f, "function_call") == 0)
        return VG_MODEL_STOP_TOOL_USE;
    if (strcmp(f, "stop") == 0) /* some local servers say "stop" after tool calls */
        return n_tools ? VG_MODEL_STOP_TOOL_USE : VG_MODEL_STOP_END_TURN;
    if (strcmp(f, "length") == 0)
        return VG_MODEL_STOP_MAX_TOKENS;
    if (strcmp(f, "content_filter") == 0)
        return VG_MODEL_STOP_REFUSAL;
    return VG_MODEL_STOP_OTHER;
}

/* OpenAI's counts in vigil's terms: input counts what was not read from the cache. */
static void set_usage(struct vg_model_usage *usage, int64_t prompt, int64_t cached,
                      int64_t completion)
{
    if (cached < 0 || cached > prompt)
        cached = 0;
    usage->input_tokens = prompt - cached;
    usage->cache_read_tokens = cached;
    usage->output_tokens = completion;
    usage->cache_write_tokens = 0;
}

static void read_usage(json_t *u, struct vg_model_usage *usage)
{
    if (!json_is_object(u))
        return;
    set_usage(usage, json_integer_value(json_object_get(u, "prompt_tokens")),
              json_integer_value(
                  json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens")),
              json_integer_value(json_object_get(u, "completion_tokens")));
}

/* A 200 body that carries {"error": ...} (some compatible servers do this mid-stream too). */
static vigil_code body_error(json_t *e, vigil_error *err)
{
    const char *msg = NULL, *type = NULL;
    if (json_is_object(e)) {
        msg = json_string_value(json_object_get(e, "message"));
        type = json_string_value(json_object_get(e, "type"));
        if (!type)
            type = json_string_value(json_object_get(e, "code"));
    } else {
        msg = json_string_value(e);
    }
    vigil_code code = vg_model_error_type_code(type);
    return VG_FAIL(err, code, "openai: provider error%s%s%s: \"%s\"", type ? " (" : "",
                   type ? type : "", type ? ")" : "", msg ? msg : "no message");
}

/* What both readers of an answer share once its tool calls are in r. r is freed on failure. */
static vigil_code answer_done(struct vg_model_response *r, const char *content, const char *refusal,
                              const char *finish, const struct vg_model_usage *usage,
                              const char *model, const char *id, struct vg_model_response **out,
                              vigil_error *err)
{
    if ((content && vg_model_response_add_text(r, content, strlen(content))) ||
        (refusal && vg_model_response_add_text(r, refusal, strlen(refusal)))) {
        vg_model_response_free(r);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading the openai response");
    }
    r->stop_reason = refusal ? VG_MODEL_STOP_REFUSAL : map_finish(finish, r->n_tool_calls);
    r->usage = *usage;
    return vg_model_response_done(r, finish, model, id, out, err);
}

/*
 * The usual answer read without a jansson tree (base/jscan.h): one pass over the text, its
 * strings decoded into one buffer. It reads only an answer of the usual shape (no error, a
 * first choice whose message is an object, strings where strings belong, integer counts, no
 * key of interest twice); anything else, well-formed or not, it leaves to the jansson reader
 * below, which makes the same response of what this one reads (fuzz/fuzz_openai_stream.c holds
 * the two together) and gives the errors.
 */
#define FAST_CALLS_MAX 64
#define NONE ((size_t)-1)

struct fast_answer {
    struct vg_buf text; /* every decoded string, NUL-terminated, back to back */
    size_t content, refusal, finish, model, id;
    struct {
        size_t id, name, args;
    } calls[FAST_CALLS_MAX];
    size_t n_calls;
    int64_t prompt, completion, cached;
};

/* A key of interest in an object and how its value is read: a string (or null) into the
 * answer's buffer, an integer, or by another reader. */
struct fast_key {
    const char *key;
    size_t *str;
    int64_t *num;
    int (*read)(struct vg_jscan *s, struct fast_answer *a);
};

/* Walk an object: each key of interest read once (a key given twice goes to jansson, whose
 * last one wins), every other value stepped over; *seen gets bit i for keys[i] met. */
static int fast_object(struct vg_jscan *s, struct fast_answer *a, const struct fast_key *keys,
                       size_t n, unsigned *seen)
{
    const char *k;
    size_t len;
    int r;
    *seen = 0;
    if (vg_jscan_enter(s, '{'))
        return -1;
    while ((r = vg_jscan_next(s, &k, &len)) == 1) {
        size_t i = 0;
        while (i < n && !vg_jscan_key_is(k, len, keys[i].key))
            i++;
        if (i == n) {
            if (vg_jscan_skip(s))
                return -1;
            continue;
        }
        if (*seen & 1u << i)
            return -1;
        *seen |= 1u << i;
        if (keys[i].str   ? vg_jscan_string(s, &a->text, keys[i].str)
            : keys[i].num ? vg_jscan_int(s, keys[i].num)
                          : keys[i].read(s, a))
            return -1;
    }
    return r;
}

/* A value that may be null (as good as absent) or an object read by `read`. */
static int null_or(struct vg_jscan *s, struct fast_answer *a,
                   int (*read)(struct vg_jscan *s, struct fast_answer *a))
{
    return vg_jscan_peek(s) == 'n' ? vg_jscan_skip(s) : read(s, a);
}

static int decline_value(struct vg_jscan *s, struct fast_answer *a)
{
    (void)s;
    (void)a;
    return -1;
}

static int fast_function(struct vg_jscan *s, struct fast_answer *a)
{
    const struct fast_key keys[] = {{"name", &a->calls[a->n_calls].name, NULL, NULL},
                                    {"arguments", &a->calls[a->n_calls].args, NULL, NULL}};
    unsigned seen;
    /* A call without a name is the jansson reader's error to give. */
    return fast_object(s, a, keys, VG_ARRAY_LEN(keys), &seen) == 0 &&
                   a->calls[a->n_calls].name != NONE
               ? 0
               : -1;
}

static int fast_calls_list(struct vg_jscan *s, struct fast_answer *a)
{
    int r;
    if (vg_jscan_enter(s, '['))
        return -1;
    while ((r = vg_jscan_next(s, NULL, NULL)) == 1) {
        if (a->n_calls == FAST_CALLS_MAX)
            return -1;
        a->calls[a->n_calls].id = a->calls[a->n_calls].name = a->calls[a->n_calls].args = NONE;
        const struct fast_key keys[] = {{"id", &a->calls[a->n_calls].id, NULL, NULL},
                                        {"function", NULL, NULL, fast_function}};
        unsigned seen;
        if (fast_object(s, a, keys, VG_ARRAY_LEN(keys), &seen) != 0 || !(seen & 2))
            return -1;
        a->n_calls++;
    }
    return r;
}

static int fast_calls(struct vg_jscan *s, struct fast_answer *a)
{
    return null_or(s, a, fast_calls_list);
}

static int fast_message(struct vg_jscan *s, struct fast_answer *a)
{
    const struct fast_key keys[] = {{"content", &a->content, NULL, NULL},
                                    {"refusal", &a->refusal, NULL, NULL},
                                    {"tool_calls", NULL, NULL, fast_calls}};
    unsigned seen;
    return fast_object(s, a, keys, VG_ARRAY_LEN(keys), &seen);
}

static int fast_choices(struct vg_jscan *s, struct fast_answer *a)
{
    const struct fast_key keys[] = {{"message", NULL, NULL, fast_message},
                                    {"finish_reason", &a->finish, NULL, NULL}};
    int r, index = 0;
    if (vg_jscan_enter(s, '['))
        return -1;
    while ((r = vg_jscan_next(s, NULL, NULL)) == 1) {
        unsigned seen;
        if (index++ > 0) { /* only the first choice is read */
            if (vg_jscan_skip(s))
                return -1;
        } else if (fast_object(s, a, keys, VG_ARRAY_LEN(keys), &seen) != 0 || !(seen & 1)) {
            return -1;
        }
    }
    return r == 0 && index > 0 ? 0 : -1;
}

static int fast_details(struct vg_jscan *s, struct fast_answer *a)
{
    const struct fast_key keys[] = {{"cached_tokens", NULL, &a->cached, NULL}};
    unsigned seen;
    return fast_object(s, a, keys, VG_ARRAY_LEN(keys), &seen);
}

static int fast_details_or_null(struct vg_jscan *s, struct fast_answer *a)
{
    return null_or(s, a, fast_details);
}

static int fast_usage_object(struct vg_jscan *s, struct fast_answer *a)
{
    const struct fast_key keys[] = {{"prompt_tokens", NULL, &a->prompt, NULL},
                                    {"completion_tokens", NULL, &a->completion, NULL},
                                    {"prompt_tokens_details", NULL, NULL, fast_details_or_null}};
    unsigned seen;
    return fast_object(s, a, keys, VG_ARRAY_LEN(keys), &seen);
}

static int fast_usage(struct vg_jscan *s, struct fast_answer *a)
{
    return null_or(s, a, fast_usage_object);
}

static int fast_read(struct vg_jscan *s, struct fast_answer *a)
{
    const struct fast_key keys[] = {{"choices", NULL, NULL, fast_choices},
                                    {"usage", NULL, NULL, fast_usage},
                                    {"model", &a->model, NULL, NULL},
                                    {"id", &a->id, NULL, NULL},
                                    /* the jansson reader says what the provider's error is */
                                    {"error", NULL, NULL, decline_value}};
    unsigned seen;
    return fast_object(s, a, keys, VG_ARRAY_LEN(keys), &seen) == 0 && (seen & 1) &&
                   vg_jscan_end(s) == 0
               ? 0
               : -1;
}

static const char *fast_str(const struct fast_answer *a, size_t at)
{
    return at == NONE ? NULL : a->text.data + at;
}

/* 1: not an answer this reader takes (the jansson reader's turn); else the result. */
static int fast_response(const char *body, size_t len, struct vg_model_response **out,
                         vigil_code *rc, vigil_error *err)
{
    struct vg_jscan s;
    struct fast_answer a;
    a.content = a.refusal = a.finish = a.model = a.id = NONE;
    a.n_calls = 0;
    a.prompt = a.completion = a.cached = 0;
    vg_buf_init(&a.text, len + 1);
    vg_jscan_init(&s, body, len);
    if (fast_read(&s, &a) != 0) {
        int oom = a.text.fail == VIGIL_ENOMEM;
        vg_buf_release(&a.text);
        if (!oom)
            return 1;
        *rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading the openai response");
        return 0;
    }
    struct vg_model_response *r = vg_model_response_new("openai");
    *rc = r ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading the openai response");
    for (size_t i = 0; *rc == VIGIL_OK && i < a.n_calls; i++)
        if (vg_model_response_add_tool(r, fast_str(&a, a.calls[i].id),
                                       fast_str(&a, a.calls[i].name),
                                       fast_str(&a, a.calls[i].args))) {
            vg_model_response_free(r);
            *rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading the openai response");
        }
    if (*rc == VIGIL_OK) {
        struct vg_model_usage usage = {0};
        set_usage(&usage, a.prompt, a.cached, a.completion);
        *rc =
            answer_done(r, fast_str(&a, a.content), fast_str(&a, a.refusal), fast_str(&a, a.finish),
                        &usage, fast_str(&a, a.model), fast_str(&a, a.id), out, err);
    }
    vg_buf_release(&a.text);
    return 0;
}

vigil_code vg_openai_parse_response(const char *body, size_t len, struct vg_model_response **out,
                                    vigil_error *err)
{
    vigil_code rc;
    if (!fast_response(body, len, out, &rc, err))
        return rc;
    return vg_openai_parse_response_tree(body, len, out, err);
}

vigil_code vg_openai_parse_response_tree(const char *body, size_t len,
                                         struct vg_model_response **out, vigil_error *err)
{
    json_error_t je;
    json_t *root = json_loadb(body, len, 0, &je);
    struct vg_model_response *r = NULL;
    vigil_code rc = VIGIL_OK;

    if (!root && VG_JSON_OOM(&je)) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading the openai response");
        goto out;
    }
    if (!json_is_object(root)) {
        rc = VG_FAIL(err, VIGIL_EPARSE, "openai: malformed response body: %s",
                     root ? "not an object" : je.text);
        goto out;
    }
    if (json_object_get(root, "error")) {
        rc = body_error(json_object_get(root, "error"), err);
        goto out;
    }
    json_t *choice = json_array_get(json_object_get(root, "choices"), 0);
    json_t *msg = json_object_get(choice, "message");
    if (!json_is_object(msg)) {
        rc = VG_FAIL(err, VIGIL_EPARSE, "openai: response has no choices[0].message");
        goto out;
    }
    r = vg_model_response_new("openai");
    if (!r)
        goto oom;
    json_t *calls = json_object_get(msg, "tool_calls"), *c;
    size_t i;
    json_array_foreach (calls, i, c) {
        json_t *fn = json_object_get(c, "function");
        const char *args = json_string_value(json_object_get(fn, "arguments"));
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (!name) {
            rc = VG_FAIL(err, VIGIL_EPARSE, "openai: tool call %zu has no function name", i);
            goto out;
        }
        if (vg_model_response_add_tool(r, json_string_value(json_object_get(c, "id")), name, args))
            goto oom;
    }
    struct vg_model_usage usage = {0};
    read_usage(json_object_get(root, "usage"), &usage);
    rc = answer_done(r, json_string_value(json_object_get(msg, "content")),
                     json_string_value(json_object_get(msg, "refusal")),
                     json_string_value(json_object_get(choice, "finish_reason")), &usage,
                     json_string_value(json_object_get(root, "model")),
                     json_string_value(json_object_get(root, "id")), out, err);
    json_decref(root);
    return rc;
oom:
    rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading the openai response");
out:
    json_decref(root);
    vg_model_response_free(r);
    return rc;
}

/* ---- streaming ---- */

struct tool_slot {
    json_int_t wire_index;
    char *id;
    char *name;
    struct vg_buf args;
    int started;
};

struct vg_openai_stream {
    struct vg_sse sse;
    const struct vg_model_stream_cb *cb;
    struct vg_buf text;
    struct vg_buf refusal;
    struct tool_slot *tools;
    size_t n_tools;
    char *finish;
    char *id;
    char *model;
    struct vg_model_usage usage;
    int done;
};

static vigil_code oom(vigil_error *err)
{
    return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading the openai stream");
}

static struct tool_slot *slot_for(struct vg_openai_stream *s, json_int_t wire)
{
    for (size_t i = 0; i < s->n_tools; i++)
        if (s->tools[i].wire_index == wire)
            return &s->tools[i];
    if (s->n_tools >= 1024)
        return NULL;
    struct tool_slot *t = vg_realloc(s->tools, (s->n_tools + 1) * sizeof(*t));
    if (!t)
        return NULL;
    s->tools = t;
    t = &s->tools[s->n_tools++];
    memset(t, 0, sizeof(*t));
    t->wire_index = wire;
    vg_buf_init(&t->args, 0);
    return t;
}

static vigil_code on_tool_delta(struct vg_openai_stream *s, json_t *tc, size_t pos,
                                vigil_error *err)
{
    json_t *idx = json_object_get(tc, "index");
    json_int_t wire = json_is_integer(idx) ? json_integer_value(idx) : (json_int_t)pos;
    struct tool_slot *t = slot_for(s, wire);
    if (!t)
        return VG_FAIL(err, VIGIL_EPARSE, "openai: too many tool calls in one response");
    size_t ordinal = (size_t)(t - s->tools);
    json_t *fn = json_object_get(tc, "function");
    const char *id = json_string_value(json_object_get(tc, "id"));
    const char *name = json_string_value(json_object_get(fn, "name"));
    const char *args = json_string_value(json_object_get(fn, "arguments"));

    if (id && id[0] && !t->id && !(t->id = vg_strdup(id)))
        return oom(err);
    if (name && name[0] && !t->name && !(t->name = vg_strdup(name)))
        return oom(err);
    if (args) {
        vg_buf_puts(&t->args, args);
        if (t->args.fail)
            return vg_buf_finish(&t->args, err);
    }
    if (!t->started && t->name) {
        t->started = 1;
        if (s->cb && s->cb->on_tool_start)
            s->cb->on_tool_start(s->cb->user, ordinal, t->id ? t->id : "", t->name);
        /* Arguments that came before the name are delivered now, in one piece. */
        if (t->args.len && s->cb && s->cb->on_tool_args)
            s->cb->on_tool_args(s->cb->user, ordinal, t->args.data, t->args.len);
    } else if (t->started && args && args[0] && s->cb && s->cb->on_tool_args) {
        s->cb->on_tool_args(s->cb->user, ordinal, args, strlen(args));
    }
    return VIGIL_OK;
}

static vigil_code on_event(void *user, const struct vg_sse_event *ev, vigil_error *err)
{
    struct vg_openai_stream *s = user;
    json_error_t je;
    vigil_code rc = VIGIL_OK;

    if (s->done)
        return VIGIL_OK; /* nothing counts after [DONE] */
    if (ev->data_len == 6 && memcmp(ev->data, "[DONE]", 6) == 0) {
        s->done = 1;
        return VIGIL_OK;
    }
    json_t *root = json_loadb(ev->data, ev->data_len, 0, &je);
    if (!root && VG_JSON_OOM(&je))
        return oom(err);
    if (!json_is_object(root)) {
        json_decref(root);
        return VG_FAIL(err, VIGIL_EPARSE, "openai: malformed stream chunk: %s",
                       root ? "not an object" : je.text);
    }
    if (json_object_get(root, "error")) {
        rc = body_error(json_object_get(root, "error"), err);
        goto out;
    }
    const char *id = json_string_value(json_object_get(root, "id"));
    const char *model = json_string_value(json_object_get(root, "model"));
    if ((id && !s->id && !(s->id = vg_strdup(id))) ||
        (model && !s->model && !(s->model = vg_strdup(model)))) {
        rc = oom(err);
        goto out;
    }
    json_t *usage = json_object_get(root, "usage");
    if (json_is_object(usage))
        read_usage(usage, &s->usage);

    json_t *choice = json_array_get(json_object_get(root, "choices"), 0);
    json_t *delta = json_object_get(choice, "delta");
    const char *content = json_string_value(json_object_get(delta, "content"));
    if (content && content[0]) {
        vg_buf_puts(&s->text, content);
        if (s->text.fail) {
            rc = vg_buf_finish(&s->text, err);
            goto out;
        }
        if (s->cb && s->cb->on_text)
            s->cb->on_text(s->cb->user, content, strlen(content));
    }
    const char *refusal = json_string_value(json_object_get(delta, "refusal"));
    if (refusal && refusal[0]) {
        vg_buf_puts(&s->refusal, refusal);
        if (s->cb && s->cb->on_text)
            s->cb->on_text(s->cb->user, refusal, strlen(refusal));
    }
    json_t *calls = json_object_get(delta, "tool_calls"), *tc;
    size_t i;
    json_array_foreach (calls, i, tc) {
        rc = on_tool_delta(s, tc, i, err);
        if (rc != VIGIL_OK)
            goto out;
    }
    const char *finish = json_string_value(json_object_get(choice, "finish_reason"));
    if (finish && !s->finish && !(s->finish = vg_strdup(finish)))
        rc = oom(err);
out:
    json_decref(root);
    return rc;
}

vigil_code vg_openai_stream_new(const struct vg_model_stream_cb *cb, struct vg_openai_stream **out,
                                vigil_error *err)
{
    struct vg_openai_stream *s = vg_calloc(1, sizeof(*s));
    if (!s)
        return oom(err);
    s->cb = cb;
    vg_sse_init(&s->sse, 0, on_event, s);
    vg_buf_init(&s->text, 0);
    vg_buf_init(&s->refusal, 0);
    *out = s;
    return VIGIL_OK;
}

void vg_openai_stream_free(struct vg_openai_stream *s)
{
    if (!s)
        return;
    vg_sse_release(&s->sse);
    vg_buf_release(&s->text);
    vg_buf_release(&s->refusal);
    for (size_t i = 0; i < s->n_tools; i++) {
        vg_free(s->tools[i].id);
        vg_free(s->tools[i].name);
        vg_buf_release(&s->tools[i].args);
    }
    vg_free(s->tools);
    vg_free(s->finish);
    vg_free(s->id);
    vg_free(s->model);
    vg_free(s);
}

vigil_code vg_openai_stream_feed(struct vg_openai_stream *s, const char *data, size_t len,
                                 vigil_error *err)
{
    return vg_sse_feed(&s->sse, data, len, err);
}

vigil_code vg_openai_stream_finish(struct vg_openai_stream *s, struct vg_model_response **out,
                                   vigil_error *err)
{
    struct vg_model_response *r = NULL;
    vigil_code rc = vg_sse_finish(&s->sse, err);
    if (rc != VIGIL_OK)
        return rc;
    if (!s->done && !s->finish)
        return VG_FAIL(err, VIGIL_ENETWORK,
                       "openai: stream ended before the response was complete");
    if (s->refusal.fail || s->text.fail)
        return oom(err);
    r = vg_model_response_new("openai");
    if (!r)
        return oom(err);
    if (vg_model_response_add_text(r, s->text.data, s->text.len) ||
        vg_model_response_add_text(r, s->refusal.data, s->refusal.len))
        goto fail;
    for (size_t i = 0; i < s->n_tools; i++) {
        struct tool_slot *t = &s->tools[i];
        if (!t->name) {
            vg_model_response_free(r);
            return VG_FAIL(err, VIGIL_EPARSE, "openai: tool call %zu never got a name", i);
        }
        if (vg_model_response_add_tool(r, t->id, t->name, t->args.data))
            goto fail;
    }
    r->stop_reason = s->refusal.len ? VG_MODEL_STOP_REFUSAL : map_finish(s->finish, s->n_tools);
    r->usage = s->usage;
    return vg_model_response_done(r, s->finish, s->model, s->id, out, err);
fail:
    vg_model_response_free(r);
    return oom(err);
}

/* ---- the adapter ---- */

static vigil_code wire_feed(void *stream, const char *data, size_t len, vigil_error *err)
{
    return vg_openai_stream_feed(stream, data, len, err);
}

static vigil_code wire_finish(void *stream, struct vg_model_response **out, vigil_error *err)
{
    return vg_openai_stream_finish(stream, out, err);
}

static const struct vg_model_wire wire = {"openai", wire_feed, wire_finish,
                                          vg_openai_parse_response};

static vigil_code turn(struct vg_model *base, const struct vg_model_request *req,
                       const struct vg_model_stream_cb *cb, struct vg_model_response **out,
                       struct vg_model_attempt *att, vigil_error *err)
{
    struct vg_model_openai *m = (struct vg_model_openai *)base;
    const char *model = req->model ? req->model : base->default_model;
    struct vg_model_request sent = *req; /* with the configured max_tokens when it sets none */
    if (sent.max_tokens <= 0)
        sent.max_tokens = base->max_tokens;
    struct vg_openai_stream *s = NULL;
    char *body = NULL;
    const char *headers[4];
    size_t nh = 0;
    vigil_code rc = vg_openai_build_body(&sent, model, cb != NULL, m->stream_usage, &body, err);
    if (rc == VIGIL_OK && cb)
        rc = vg_openai_stream_new(cb, &s, err);
    if (rc == VIGIL_OK) {
        headers[nh++] = "Content-Type: application/json";
        headers[nh++] = cb ? "Accept: text/event-stream" : "Accept: application/json";
        if (m->auth_header)
            headers[nh++] = m->auth_header;
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
    vg_openai_stream_free(s);
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
    struct vg_model_openai *m = (struct vg_model_openai *)base;
    vg_free(m->url);
    vg_free(m->auth_header);
    vg_free(m);
}

static const struct vg_model_methods openai_methods = {
    .version = 1,
    .name = "openai",
    .caps = VG_MODEL_CAP_TOOLS | VG_MODEL_CAP_STREAM | VG_MODEL_CAP_NAMED_MODEL,
    .complete = complete,
    .stream = stream,
    .destroy = destroy,
};

vigil_code vg_model_openai_create(const struct vg_model_options *opts, struct vg_model **out,
                                  vigil_error *err)
{
    struct vg_model_openai *m = vg_calloc(1, sizeof(*m));
    struct vg_buf b;
    const char *base_url = opts->base_url && opts->base_url[0] ? opts->base_url : DEFAULT_BASE_URL;
    const char *key = opts->api_key ? opts->api_key : vg_os_getenv("OPENAI_API_KEY");

    /* The hosted API refuses every request without a key: say so now, not after a run
     * started and its first call came back 401. A server of one's own may need none. */
    if (!(opts->base_url && opts->base_url[0]) && !(key && key[0])) {
        vg_free(m);
        return VG_FAIL(err, VIGIL_EINVAL,
                       "OPENAI_API_KEY is not set: api.openai.com needs a key (a server set by "
                       "VIGIL_MODEL_BASE_URL or model.base_url may need none)");
    }
    vg_alloc_install_json();
    if (!m)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating the openai provider");
    m->base.methods = &openai_methods;
    vg_buf_init(&b, 8192);
    size_t n = strlen(base_url);
    while (n && base_url[n - 1] == '/')
        n--;
    vg_buf_append(&b, base_url, n);
    vg_buf_puts(&b, "/chat/completions");
    m->url = vg_buf_detach(&b, NULL);
    if (key && key[0]) {
        vg_buf_printf(&b, "Authorization: Bearer %s", key);
        m->auth_header = vg_buf_detach(&b, NULL);
    }
    vg_buf_release(&b);
    if (!m->url || (key && key[0] && !m->auth_header)) {
        destroy(&m->base);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating the openai provider");
    }
    m->stream_usage = opts->stream_usage;
    m->timeout_ms = opts->timeout_ms;
    m->connect_timeout_ms = opts->connect_timeout_ms;
    m->max_response = opts->max_response_bytes;
    *out = &m->base;
    return VIGIL_OK;
}
