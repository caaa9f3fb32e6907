/*
 * chat.c: POST /v1/agents/{id}/chat. Whole: the turn runs on the request's thread and the
 * outcome is the answer. Streamed (Accept: text/event-stream): the turn runs on a thread of its
 * own with a runtime from the pool, its callbacks append server-sent events to a buffer, and
 * libmicrohttpd's content reader sends them as they come. A client that goes away cancels the
 * turn (the chat's cancel callback), which ends as vigil_chat documents for a cancel.
 */
#include "base/common.h"

#include "http/http_int.h"

#include <microhttpd.h>
#include <time.h>

struct chat_stream {
    pthread_mutex_t mu;
    struct vg_buf out; /* events not yet sent */
    size_t sent;       /* bytes of out already sent */
    int done, gone, refs;
    /* Its connection waits suspended for the turn's next event (no pool thread waits for it);
     * whoever clears suspended resumes it. */
    struct MHD_Connection *conn;
    int suspended;
    struct vg_http *h;
    char agent[256], *session, *text;
};

static void stream_unref(struct chat_stream *s)
{
    pthread_mutex_lock(&s->mu);
    int last = --s->refs == 0;
    pthread_mutex_unlock(&s->mu);
    if (!last)
        return;
    vg_buf_release(&s->out);
    vg_free(s->session);
    vg_free(s->text);
    pthread_mutex_destroy(&s->mu);
    vg_free(s);
}

/* Resume the connection if it waits (called with s->mu held, which it releases): the resume
 * itself runs outside the lock, libmicrohttpd's lock never under ours. The connection stays
 * suspended, so open, until then. */
static void stream_wake_unlock(struct chat_stream *s)
{
    int resume = s->suspended;
    s->suspended = 0;
    pthread_mutex_unlock(&s->mu);
    if (resume)
        MHD_resume_connection(s->conn);
}

/* Append one event: "event: NAME\ndata: JSON\n\n" (the JSON has no raw newline). */
static void stream_event(struct chat_stream *s, const char *name, json_t *data)
{
    char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
    json_decref(data);
    pthread_mutex_lock(&s->mu);
    vg_buf_printf(&s->out, "event: %s\ndata: %s\n\n", name, text ? text : "{}");
    stream_wake_unlock(s);
    free(text);
}

static void on_text(void *user, const char *delta, size_t len)
{
    stream_event(user, "text", json_pack("{s:s%}", "delta", delta, len));
}

static void on_tool(void *user, const char *name, const char *args_json)
{
    stream_event(user, "tool",
                 json_pack("{s:s, s:o?}", "name", name, "arguments",
                           json_loads(args_json ? args_json : "null", JSON_DECODE_ANY, NULL)));
}

static void on_tool_done(void *user, const char *name, int is_error, const char *result_json)
{
    stream_event(user, "tool_done",
                 json_pack("{s:s, s:b, s:o?}", "name", name, "is_error", is_error, "result",
                           json_loads(result_json ? result_json : "null", JSON_DECODE_ANY, NULL)));
}

static int on_cancel(void *user)
{
    struct chat_stream *s = user;
    pthread_mutex_lock(&s->mu);
    int gone = s->gone || atomic_load(&s->h->stopping);
    pthread_mutex_unlock(&s->mu);
    return gone;
}

/* The answer for a turn's outcome (owned): the outcome itself, or the error body of the code it
 * amounts to with the outcome under "turn". *code is that code (0: an answer). */
static json_t *turn_answer(const char *out, vigil_code *code)
{
    json_t *outcome = json_loads(out ? out : "null", JSON_DECODE_ANY, NULL);
    const char *message = NULL;
    /* The same mapping as `vigil chat`'s exit status (vigil_turn_code, vigil.h). */
    *code = vigil_turn_code(out, &message);
    if (!*code)
        return outcome;
    return json_pack("{s:s, s:s, s:i, s:o}", "code", vigil_code_name(*code), "message", message,
                     "status", vigil_code_http_status(*code), "turn", outcome);
}

static void *chat_thread(void *arg)
{
    struct chat_stream *s = arg;
    vigil_error err = {0};
    char *out = NULL;
    vigil_code rc;
    vigil_chat_callbacks cb = {.user = s,
                               .on_text = on_text,
                               .on_tool = on_tool,
                               .on_tool_done = on_tool_done,
                               .cancel = on_cancel};
    vigil_runtime *rt = vg_rt_pool_take(&s->h->pool, &err);
    rc = rt ? vigil_chat(rt, s->agent, s->session, s->text, &cb, &out, &err) : err.code;
    vg_rt_pool_give(&s->h->pool, rt);
    if (rc)
        stream_event(s, "error",
                     json_pack("{s:s, s:s, s:i}", "code", vigil_code_name(rc), "message",
                               err.message, "status", vigil_code_http_status(rc)));
    else {
        json_t *v = turn_answer(out, &rc);
        stream_event(s, rc ? "error" : "done", v);
    }
    vigil_free(out);
    struct vg_http *h = s->h;
    pthread_mutex_lock(&s->mu);
    s->done = 1;
    stream_wake_unlock(s);
    stream_unref(s);
    pthread_mutex_lock(&h->pool.mu); /* vg_http_stop waits for this */
    h->chat_threads--;
    pthread_cond_broadcast(&h->pool.cv);
    pthread_mutex_unlock(&h->pool.mu);
    return NULL;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct chat_stream *s = cls;
    VG_UNUSED(pos);
    pthread_mutex_lock(&s->mu);
    if (s->sent == s->out.len && !s->done) {
        /* Nothing yet: wait suspended for the turn's next event or its end (a stop cancels
         * the turn, which then ends). A resume before the suspend cancels it. */
        s->suspended = 1;
        pthread_mutex_unlock(&s->mu);
        MHD_suspend_connection(s->conn);
        return 0;
    }
    size_t n = VG_MIN(max, s->out.len - s->sent);
    memcpy(buf, s->out.data + s->sent, n);
    s->sent += n;
    int end = n == 0 && s->done;
    pthread_mutex_unlock(&s->mu);
    return end ? MHD_CONTENT_READER_END_OF_STREAM : (ssize_t)n;
}

static void stream_free(void *cls)
{
    struct chat_stream *s = cls;
    pthread_mutex_lock(&s->mu);
    s->gone = 1; /* the turn, if still running, is canceled */
    pthread_mutex_unlock(&s->mu);
    stream_unref(s);
}

static void chat_streamed(struct vg_req *r, const char *session, const char *text)
{
    struct chat_stream *s = vg_calloc(1, sizeof *s);
    pthread_t t;
    if (!s) {
        vg_req_error(r, VIGIL_ENOMEM, NULL);
        return;
    }
    pthread_mutex_init(&s->mu, NULL);
    vg_buf_init(&s->out, 0);
    s->h = r->h;
    s->conn = r->conn;
    s->refs = 2;
    snprintf(s->agent, sizeof s->agent, "%s", r->params[0]);
    s->session = session ? vg_strdup(session) : NULL;
    s->text = vg_strdup(text);
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, s, stream_free);
    pthread_mutex_lock(&r->h->pool.mu);
    r->h->chat_threads++;
    pthread_mutex_unlock(&r->h->pool.mu);
    if (!resp || pthread_create(&t, NULL, chat_thread, s) != 0) {
        pthread_mutex_lock(&r->h->pool.mu);
        r->h->chat_threads--;
        pthread_mutex_unlock(&r->h->pool.mu);
        if (resp)
            MHD_destroy_response(resp); /* stream_free drops one reference */
        else
            s->refs--;
        stream_unref(s);
        vg_req_error(r, VIGIL_ENOMEM, "could not start the chat turn");
        return;
    }
    pthread_detach(t);
    vg_req_respond(r, resp, "text/event-stream");
}

void vg_http_chat_route(struct vg_req *r)
{
    vigil_error err = {0};
    int bad = 0;
    const char *text = vg_req_str(r, "text", &bad), *session = vg_req_str(r, "session", &bad);
    const char *accept = vg_req_header(r, "Accept");
    char *out = NULL;
    if (bad || !text || !*text) {
        vg_req_error(r, VIGIL_EINVAL, "send {\"text\": \"...\"} (and optionally \"session\")");
        return;
    }
    if (accept && strstr(accept, "text/event-stream")) {
        /* Refuse what the turn would refuse before promising a stream. */
        vigil_code rc = vigil_agent_show(r->rt, r->params[0], &out, &err);
        vigil_free(out);
        if (rc) {
            vg_req_fail(r, rc, &err);
            return;
        }
        chat_streamed(r, session, text);
        return;
    }
    vigil_code rc = vigil_chat(r->rt, r->params[0], session, text, NULL, &out, &err);
    if (rc) {
        vg_req_answer(r, rc, out, &err);
        return;
    }
    /* An answer goes out as vigil_chat wrote it, not parsed and printed again. */
    if (vigil_turn_code(out, NULL) == VIGIL_OK) {
        vg_req_json(r, 200, out);
        return;
    }
    json_t *v = turn_answer(out, &rc);
    vigil_free(out);
    vg_req_value(r, rc ? vigil_code_http_status(rc) : 200, v);
}
