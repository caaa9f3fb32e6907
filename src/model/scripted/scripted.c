/*
 * scripted.c: the scripted provider and the record wrapper. The scripted provider replays a
 * cassette (docs/models.md has the format) one exchange per call, deterministically, optionally
 * checking each request against the recorded one, and streams replies through the same
 * callbacks as a real provider. Every response it makes has scripted = 1 so the CLI can label
 * it. Without a cassette it answers every turn with a fixed, labelled echo (the offline quick
 * start). The record wrapper forwards to a real adapter and appends each successful exchange to
 * a cassette file, rewritten atomically after every exchange so a crash keeps what was recorded.
 */
#include "base/common.h"
#include "base/json.h"

#include "base/buf.h"
#include "model/scripted/scripted.h"
#include "os/fs.h"

#include <pthread.h>

#define MAX_CASSETTE_BYTES ((size_t)64 << 20)

/*
 * The position in a cassette is the process's, not a model instance's: every runtime of the
 * process that replays the same cassette file (the daemon keeps one per worker thread and per
 * HTTP thread) takes the next exchange from one shared position, in the order the calls reach
 * the model. It starts at the first exchange when the first of them opens the cassette and
 * starts again once the last has closed it. (Each runtime used to keep its own, so which
 * exchange a run got depended on which daemon thread ran it: trial C4 of session 30.)
 */
struct cassette_pos {
    char *path;
    size_t next;
    int refs;
    struct cassette_pos *later;
};

static pthread_mutex_t positions_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cassette_pos *positions;

static struct cassette_pos *position_take(const char *path)
{
    pthread_mutex_lock(&positions_lock);
    struct cassette_pos *p = positions;
    while (p && strcmp(p->path, path))
        p = p->later;
    if (!p && (p = vg_calloc(1, sizeof *p)) && !(p->path = vg_strdup(path))) {
        vg_free(p);
        p = NULL;
    } else if (p && !p->refs) {
        p->later = positions;
        positions = p;
    }
    if (p)
        p->refs++;
    pthread_mutex_unlock(&positions_lock);
    return p;
}

static void position_drop(struct cassette_pos *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&positions_lock);
    if (--p->refs == 0) {
        struct cassette_pos **at = &positions;
        while (*at != p)
            at = &(*at)->later;
        *at = p->later;
        vg_free(p->path);
        vg_free(p);
    }
    pthread_mutex_unlock(&positions_lock);
}

/* The index of the exchange this call takes (0-based), the position moved past it. */
static size_t position_next(struct cassette_pos *p)
{
    pthread_mutex_lock(&positions_lock);
    size_t i = p->next++;
    pthread_mutex_unlock(&positions_lock);
    return i;
}

struct vg_model_scripted {
    struct vg_model base; /* must stay first */
    json_t *exchanges;    /* owned array; NULL: echo mode */
    char *path;
    struct cassette_pos *pos; /* shared by the process's models on this cassette */
    int check;
};

/* ---- cassette encoding ---- */

json_t *vg_cassette_response_to_json(const struct vg_model_response *r)
{
    json_t *o = json_object(), *blocks = json_array(), *calls = json_array();
    int bad = !o || !blocks || !calls;
    for (size_t i = 0; !bad && i < r->n_text_blocks; i++)
        bad |= json_array_append_new(blocks, json_string(r->text_blocks[i]));
    for (size_t i = 0; !bad && i < r->n_tool_calls; i++)
        bad |= json_array_append_new(calls, json_pack("{s:s, s:s, s:s}", "id", r->tool_calls[i].id,
                                                      "name", r->tool_calls[i].name, "arguments",
                                                      r->tool_calls[i].arguments));
    bad |= !o || json_object_set(o, "text_blocks", blocks);
    if (!bad && r->n_tool_calls)
        bad |= json_object_set(o, "tool_calls", calls);
    if (!bad)
        bad |=
            json_object_set_new(o, "stop_reason", json_string(vg_model_stop_name(r->stop_reason)));
    if (!bad)
        bad |= json_object_set_new(
            o, "usage",
            json_pack("{s:I, s:I, s:I, s:I}", "input_tokens", (json_int_t)r->usage.input_tokens,
                      "output_tokens", (json_int_t)r->usage.output_tokens, "cache_read_tokens",
                      (json_int_t)r->usage.cache_read_tokens, "cache_write_tokens",
                      (json_int_t)r->usage.cache_write_tokens));
    if (!bad && r->model)
        bad |= json_object_set_new(o, "model", json_string(r->model));
    if (!bad && r->response_id)
        bad |= json_object_set_new(o, "id", json_string(r->response_id));
    json_decref(blocks);
    json_decref(calls);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

vigil_code vg_cassette_response_from_json(json_t *obj, size_t step, struct vg_model_response **out,
                                          vigil_error *err)
{
    struct vg_model_response *r = vg_model_response_new("scripted");
    json_t *v, *item;
    size_t i;
    vigil_code rc = VIGIL_OK;

    if (!r)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory replaying a cassette");
    r->scripted = 1;
    if (!json_is_object(obj)) {
        rc = VG_FAIL(err, VIGIL_EPARSE, "cassette step %zu: \"response\" must be an object", step);
        goto out;
    }
    if (json_is_string(v = json_object_get(obj, "text")) &&
        vg_model_response_add_text(r, json_string_value(v), json_string_length(v)))
        goto nomem;
    json_array_foreach (json_object_get(obj, "text_blocks"), i, item) {
        if (!json_is_string(item)) {
            rc = VG_FAIL(err, VIGIL_EPARSE, "cassette step %zu: text_blocks must hold strings",
                         step);
            goto out;
        }
        if (vg_model_response_add_text(r, json_string_value(item), json_string_length(item)))
            goto nomem;
    }
    json_array_foreach (json_object_get(obj, "tool_calls"), i, item) {
        const char *name = json_string_value(json_object_get(item, "name"));
        json_t *args = json_object_get(item, "arguments");
        char *args_text = NULL;
        if (!name) {
            rc =
                VG_FAIL(err, VIGIL_EPARSE, "cassette step %zu: tool call %zu has no name", step, i);
            goto out;
        }
        if (json_is_object(args)) /* hand-written cassettes may give an object */
            args_text = vg_json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER);
        rc = vg_model_response_add_tool(r, json_string_value(json_object_get(item, "id")), name,
                                        args_text ? args_text : json_string_value(args));
        vg_free(args_text);
        if (rc != VIGIL_OK)
            goto nomem;
    }
    const char *stop = json_string_value(json_object_get(obj, "stop_reason"));
    int s = vg_model_stop_parse(stop);
    r->stop_reason = s >= 0            ? (enum vg_model_stop)s
                     : r->n_tool_calls ? VG_MODEL_STOP_TOOL_USE
                                       : VG_MODEL_STOP_END_TURN;
    json_t *u = json_object_get(obj, "usage");
    r->usage.input_tokens = json_integer_value(json_object_get(u, "input_tokens"));
    r->usage.output_tokens = json_integer_value(json_object_get(u, "output_tokens"));
    r->usage.cache_read_tokens = json_integer_value(json_object_get(u, "cache_read_tokens"));
    r->usage.cache_write_tokens = json_integer_value(json_object_get(u, "cache_write_tokens"));
    return vg_model_response_done(r, stop, json_string_value(json_object_get(obj, "model")),
                                  json_string_value(json_object_get(obj, "id")), out, err);
nomem:
    rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory replaying a cassette");
out:
    vg_model_response_free(r);
    return rc;
}

/* ---- request comparison ---- */

/* Write the path of the first difference between a and b into path; 0 when equal. */
static int first_diff(json_t *a, json_t *b, char *path, size_t n, size_t used)
{
    if (json_equal(a, b))
        return 0;
    if (json_is_object(a) && json_is_object(b)) {
        const char *key;
        json_t *v;
        json_object_foreach (a, key, v) {
            int w = snprintf(path + used, n - used, "%s%s", used ? "." : "", key);
            size_t u = w > 0 && (size_t)w < n - used ? used + (size_t)w : n - 1;
            if (first_diff(v, json_object_get(b, key), path, n, u))
                return 1;
        }
        json_object_foreach (b, key, v) {
            if (!json_object_get(a, key)) {
                snprintf(path + used, n - used, "%s%s", used ? "." : "", key);
                return 1;
            }
        }
    }
    if (json_is_array(a) && json_is_array(b)) {
        size_t na = json_array_size(a), nb = json_array_size(b);
        for (size_t i = 0; i < na && i < nb; i++) {
            int w = snprintf(path + used, n - used, "[%zu]", i);
            size_t u = w > 0 && (size_t)w < n - used ? used + (size_t)w : n - 1;
            if (first_diff(json_array_get(a, i), json_array_get(b, i), path, n, u))
                return 1;
        }
        snprintf(path + used, n - used, "[%zu] (length %zu != %zu)", VG_MIN(na, nb), na, nb);
        return 1;
    }
    if (!used)
        snprintf(path, n, "(whole request)");
    return 1;
}

static vigil_code check_request(struct vg_model_scripted *m, json_t *recorded,
                                const struct vg_model_request *req, size_t step, vigil_error *err)
{
    char *text = NULL;
    char path[160] = "";
    vigil_code rc = vg_model_request_to_json(req, &text, err);
    if (rc != VIGIL_OK)
        return rc;
    json_t *actual = json_loads(text, 0, NULL);
    vg_free(text);
    if (!actual)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory checking a scripted request");
    if (first_diff(recorded, actual, path, sizeof(path), 0))
        rc = VG_FAIL(err, VIGIL_EINVAL,
                     "scripted model: request %zu does not match cassette \"%s\" (first "
                     "difference at \"%s\")",
                     step, m->path ? m->path : "", path);
    json_decref(actual);
    return rc;
}

/* ---- replay ---- */

static vigil_code echo(const struct vg_model_request *req, struct vg_model_response **out,
                       vigil_error *err)
{
    struct vg_model_response *r = vg_model_response_new("scripted");
    const char *last = NULL;
    struct vg_buf b;
    for (size_t i = 0; i < req->n_messages; i++)
        if (req->messages[i].role == VG_MODEL_USER && req->messages[i].text)
            last = req->messages[i].text;
    vg_buf_init(&b, 0);
    vg_buf_printf(&b, "(scripted model, no cassette) you said: %s", last ? last : "");
    if (!r || b.fail || vg_model_response_add_text(r, b.data, b.len)) {
        vg_buf_release(&b);
        vg_model_response_free(r);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory in the scripted model");
    }
    vg_buf_release(&b);
    r->scripted = 1;
    r->stop_reason = VG_MODEL_STOP_END_TURN;
    return vg_model_response_done(r, NULL, "scripted-echo", NULL, out, err);
}

static vigil_code replay(struct vg_model *base, const struct vg_model_request *req,
                         struct vg_model_response **out, struct vg_model_attempt *att,
                         vigil_error *err)
{
    struct vg_model_scripted *m = (struct vg_model_scripted *)base;
    vigil_code rc;

    if (!m->exchanges)
        return echo(req, out, err);
    size_t at = position_next(m->pos), step = at + 1; /* 1-based in messages */
    json_t *ex = json_array_get(m->exchanges, at);
    if (!ex)
        return VG_FAIL(err, VIGIL_ENOTFOUND,
                       "scripted model: cassette \"%s\" has no exchange left for request %zu",
                       m->path, step);
    json_t *recorded = json_object_get(ex, "request");
    if (m->check && recorded) {
        rc = check_request(m, recorded, req, step, err);
        if (rc != VIGIL_OK)
            return rc;
    }
    json_t *e = json_object_get(ex, "error");
    if (json_is_object(e)) {
        const char *code = json_string_value(json_object_get(e, "code"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        vigil_code c = VIGIL_EPROVIDER;
        for (int i = 1; i < 64; i++)
            if (code && strcmp(vigil_code_name((vigil_code)i), code) == 0)
                c = (vigil_code)i;
        json_t *ra = json_object_get(e, "retry_after_ms");
        if (json_is_integer(ra))
            att->retry_after_ms = json_integer_value(ra);
        return VG_FAIL(err, c, "scripted model: step %zu: %s", step, msg ? msg : "scripted error");
    }
    return vg_cassette_response_from_json(json_object_get(ex, "response"), step, out, err);
}

static vigil_code complete(struct vg_model *base, const struct vg_model_request *req,
                           struct vg_model_response **out, struct vg_model_attempt *att,
                           vigil_error *err)
{
    return replay(base, req, out, att, err);
}

/* Deliver text a word at a time so a REPL shows it streaming. */
static void stream_text(const struct vg_model_stream_cb *cb, const char *t)
{
    while (*t && cb->on_text) {
        size_t n = 0;
        while (t[n] && t[n] != ' ')
            n++;
        while (t[n] == ' ')
            n++;
        cb->on_text(cb->user, t, n);
        t += n;
    }
}

static vigil_code stream(struct vg_model *base, const struct vg_model_request *req,
                         const struct vg_model_stream_cb *cb, struct vg_model_response **out,
                         struct vg_model_attempt *att, vigil_error *err)
{
    struct vg_model_response *r = NULL;
    vigil_code rc = replay(base, req, &r, att, err);
    if (rc != VIGIL_OK)
        return rc;
    for (size_t i = 0; i < r->n_text_blocks; i++) {
        if (cb->cancel && cb->cancel(cb->user))
            goto canceled;
        stream_text(cb, r->text_blocks[i]);
    }
    for (size_t i = 0; i < r->n_tool_calls; i++) {
        const struct vg_model_tool_call *c = &r->tool_calls[i];
        size_t len = strlen(c->arguments), half = len / 2;
        if (cb->cancel && cb->cancel(cb->user))
            goto canceled;
        if (cb->on_tool_start)
            cb->on_tool_start(cb->user, i, c->id, c->name);
        if (cb->on_tool_args) { /* in two pieces, like a real stream */
            if (half)
                cb->on_tool_args(cb->user, i, c->arguments, half);
            cb->on_tool_args(cb->user, i, c->arguments + half, len - half);
        }
    }
    *out = r;
    return VIGIL_OK;
canceled:
    vg_model_response_free(r);
    return VG_FAIL(err, VIGIL_ECANCELED, "model call canceled");
}

static void destroy(struct vg_model *base)
{
    struct vg_model_scripted *m = (struct vg_model_scripted *)base;
    json_decref(m->exchanges);
    position_drop(m->pos);
    vg_free(m->path);
    vg_free(m);
}

static const struct vg_model_methods scripted_methods = {
    .version = 1,
    .name = "scripted",
    .caps = VG_MODEL_CAP_TOOLS | VG_MODEL_CAP_STREAM | VG_MODEL_CAP_SCRIPTED | VG_MODEL_CAP_SERIAL,
    .complete = complete,
    .stream = stream,
    .destroy = destroy,
};

vigil_code vg_model_scripted_create(const struct vg_model_options *opts, struct vg_model **out,
                                    vigil_error *err)
{
    struct vg_model_scripted *m = vg_calloc(1, sizeof(*m));
    char *text = NULL;
    size_t len = 0;
    json_error_t je;
    vigil_code rc = VIGIL_OK;

    vg_alloc_install_json();
    if (!m)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating the scripted model");
    m->base.methods = &scripted_methods;
    m->check = opts->check_requests;
    if (opts->cassette && opts->cassette[0]) {
        if (!(m->path = vg_strdup(opts->cassette))) {
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating the scripted model");
            goto out;
        }
        if (!vg_fs_exists(opts->cassette)) {
            rc = VG_FAIL(err, VIGIL_ENOTFOUND, "cassette \"%s\" not found", opts->cassette);
            goto out;
        }
        rc = vg_fs_read_file(opts->cassette, MAX_CASSETTE_BYTES, &text, &len, err);
        if (rc != VIGIL_OK)
            goto out;
        json_t *root = json_loadb(text, len, JSON_PRESERVE_ORDER, &je);
        if (!root) {
            rc = VG_FAIL(err, VIGIL_EPARSE, "malformed cassette \"%s\" at line %d: %s",
                         opts->cassette, je.line, je.text);
            goto out;
        }
        json_t *ex = json_object_get(root, "exchanges");
        if (!json_is_array(ex)) {
            json_decref(root);
            rc = VG_FAIL(err, VIGIL_EPARSE, "malformed cassette \"%s\": no \"exchanges\" array",
                         opts->cassette);
            goto out;
        }
        m->exchanges = json_incref(ex);
        json_decref(root);
        if (!(m->pos = position_take(opts->cassette)))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating the scripted model");
    }
out:
    vg_free(text);
    if (rc != VIGIL_OK) {
        destroy(&m->base);
        return rc;
    }
    *out = &m->base;
    return VIGIL_OK;
}

/* ---- record ---- */

struct vg_model_record {
    struct vg_model base;            /* must stay first */
    struct vg_model_methods methods; /* the inner adapter's name and caps, our functions */
    struct vg_model *inner;
    char *path;
    json_t *root; /* the cassette being written */
};

static vigil_code record_one(struct vg_model_record *w, const struct vg_model_request *req,
                             const struct vg_model_response *r, vigil_error *err)
{
    char *req_text = NULL, *doc = NULL;
    vigil_code rc = vg_model_request_to_json(req, &req_text, err);
    if (rc != VIGIL_OK)
        return rc;
    json_t *reqj = json_loads(req_text, 0, NULL);
    json_t *resj = vg_cassette_response_to_json(r);
    vg_free(req_text);
    json_t *ex = reqj && resj ? json_pack("{s:o, s:o}", "request", reqj, "response", resj) : NULL;
    if (!ex) {
        if (!reqj || !resj) {
            json_decref(reqj);
            json_decref(resj);
        }
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory recording an exchange");
    }
    if (json_array_append_new(json_object_get(w->root, "exchanges"), ex) != 0 ||
        !(doc = vg_json_dumps(w->root, JSON_INDENT(2) | JSON_PRESERVE_ORDER)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory recording an exchange");
    rc = vg_fs_write_file(w->path, doc, strlen(doc), err);
    vg_free(doc);
    return rc;
}

static vigil_code rec_complete(struct vg_model *base, const struct vg_model_request *req,
                               struct vg_model_response **out, struct vg_model_attempt *att,
                               vigil_error *err)
{
    struct vg_model_record *w = (struct vg_model_record *)base;
    vigil_code rc = vg_model_attempt(w->inner, req, NULL, out, att, err);
    if (rc == VIGIL_OK && (rc = record_one(w, req, *out, err)) != VIGIL_OK) {
        vg_model_response_free(*out);
        *out = NULL;
    }
    return rc;
}

static vigil_code rec_stream(struct vg_model *base, const struct vg_model_request *req,
                             const struct vg_model_stream_cb *cb, struct vg_model_response **out,
                             struct vg_model_attempt *att, vigil_error *err)
{
    struct vg_model_record *w = (struct vg_model_record *)base;
    vigil_code rc = vg_model_attempt(w->inner, req, cb, out, att, err);
    if (rc == VIGIL_OK && (rc = record_one(w, req, *out, err)) != VIGIL_OK) {
        vg_model_response_free(*out);
        *out = NULL;
    }
    return rc;
}

static void rec_destroy(struct vg_model *base)
{
    struct vg_model_record *w = (struct vg_model_record *)base;
    vg_model_free(w->inner);
    json_decref(w->root);
    vg_free(w->path);
    vg_free(w);
}

vigil_code vg_model_record_wrap(struct vg_model *inner, const char *cassette, struct vg_model **out,
                                vigil_error *err)
{
    struct vg_model_record *w = vg_calloc(1, sizeof(*w));
    if (!w || !(w->path = vg_strdup(cassette)) ||
        !(w->root = json_pack("{s:i, s:s, s:[]}", "vigil_cassette", VG_CASSETTE_VERSION,
                              "recorded_from", inner->methods->name, "exchanges"))) {
        if (w) {
            vg_free(w->path);
            vg_free(w);
        }
        vg_model_free(inner);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating the record wrapper");
    }
    w->methods = (struct vg_model_methods){
        .version = 1,
        .name = inner->methods->name,
        .caps = inner->methods->caps,
        .complete = rec_complete,
        .stream = rec_stream,
        .destroy = rec_destroy,
    };
    w->base.methods = &w->methods;
    w->inner = inner;
    *out = &w->base;
    return VIGIL_OK;
}
