/*
 * chat.c: POST /v1/agents/{id}/chat. Whole: the turn runs on the request's thread (a kept one:
 * server.c, workers.c) and the outcome is the answer. Streamed (Accept: text/event-stream): the
 * turn runs on a thread of its own with a runtime from the pool (stream.c), its callbacks append
 * server-sent events to the stream, which sends them as they come. A client that goes away
 * cancels the turn (the chat's cancel callback), which ends as vigil_chat documents for a
 * cancel. The daemon stopping cancels every turn, whole or streamed.
 */
#include "base/common.h"
#include "base/json.h"

#include "http/http_int.h"
#include "os/clock.h"

#define DAY_MS 86400000LL

/* A spent budget is refused until the next UTC day, when budgets reset (docs/tools.md): the
 * seconds until then, for Retry-After, so a retrying client waits instead of hammering. */
static int64_t budget_reset_s(void)
{
    int64_t now = vg_clock_now_ms(vg_clock_real());
    return (DAY_MS - now % DAY_MS + 999) / 1000;
}

/* A streamed turn's request, for its thread. */
struct chat_job {
    char agent[256], *session, *text, *key; /* key: the Idempotency-Key header's, or NULL */
};

static void job_free(void *arg)
{
    struct chat_job *j = arg;
    vg_free(j->session);
    vg_free(j->text);
    vg_free(j->key);
    vg_free(j);
}

/* Append one event: "event: NAME\ndata: JSON\n\n" (compact JSON text: no raw newline). */
static void stream_text(struct vg_http_stream *s, const char *name, const char *json)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    vg_buf_printf(&b, "event: %s\ndata: %s\n\n", name, json ? json : "{}");
    vg_http_stream_write(s, b.data, b.len);
    vg_buf_release(&b);
}

static void stream_event(struct vg_http_stream *s, const char *name, json_t *data)
{
    char *text = data ? vg_json_dumps(data, JSON_COMPACT) : NULL;
    json_decref(data);
    stream_text(s, name, text);
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
    return vg_http_stream_gone(user);
}

static int server_stopping(void *user)
{
    struct vg_http *h = user;
    return atomic_load(&h->stopping);
}

/* Whether a turn's outcome (vigil_chat's text) is an answer: read without parsing it when it
 * says so the one way vigil_chat writes a completed turn, the member "end":"completed" of its
 * compact text. Only the outcome's top level has an "end" member, and a string in it cannot hold
 * those bytes (its quotes are escaped); any other outcome takes vigil_turn_code's whole reading.
 * Parsing the outcome, reply and all, was half of what the HTTP path added to a short whole
 * turn (54,000 of 108,000 instructions; more for a longer reply: docs/internals/PERF.md,
 * session 35). */
static int turn_answered(const char *out)
{
    return out && (strstr(out, "\"end\":\"completed\"") || vigil_turn_code(out, NULL) == VIGIL_OK);
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

/* The error body of a turn that failed: the code's (a model provider's failure as upstream:
 * vigil_error_http_status, trial F5, F9), and, when the turn's run began and was journaled
 * failed (vigil_chat names it first in err.detail, "run_id=ID"), its run_id, so the client can
 * link the error to the run (docs/http.md). */
static json_t *turn_error(vigil_code rc, const vigil_error *err)
{
    json_t *v = json_pack("{s:s, s:s, s:i, s:s?}", "code", vigil_code_name(rc), "message",
                          err->message, "status", vigil_error_http_status(err), "upstream",
                          vigil_error_from_provider(err) ? "model provider" : NULL);
    if (v && !strncmp(err->detail, "run_id=", 7) && strlen(err->detail) >= 7 + 36)
        json_object_set_new(v, "run_id", json_stringn(err->detail + 7, 36));
    return v;
}

static void chat_thread(struct vg_http_stream *s, void *arg)
{
    struct chat_job *j = arg;
    struct vg_http *h = vg_http_stream_server(s);
    vigil_error err = {0};
    char *out = NULL;
    vigil_code rc;
    vigil_chat_callbacks cb = {.user = s,
                               .on_text = on_text,
                               .on_tool = on_tool,
                               .on_tool_done = on_tool_done,
                               .cancel = on_cancel};
    vigil_runtime *rt = vg_rt_pool_take(&h->pool, 1, &err);
    vigil_runtime_defer_upkeep(rt, 1); /* the turn's upkeep after its last event (vigil.h) */
    rc = rt ? vigil_chat_keyed(rt, j->agent, j->session, j->key, j->text, &cb, &out, &err)
            : err.code;
    if (rc)
        stream_event(s, "error", turn_error(rc, &err));
    else if (turn_answered(out)) /* as vigil_chat wrote it: compact, no raw newline */
        stream_text(s, "done", out);
    else {
        json_t *v = turn_answer(out, &rc);
        stream_event(s, rc ? "error" : "done", v);
    }
    vigil_free(out);
    vg_http_stream_end(s);
    vigil_runtime_upkeep(rt);
    vigil_runtime_defer_upkeep(rt, 0);
    vg_rt_pool_give(&h->pool, rt);
}

static void chat_streamed(struct vg_req *r, const char *session, const char *key, const char *text)
{
    struct chat_job *j = vg_calloc(1, sizeof *j);
    if (!j) {
        vg_req_error(r, VIGIL_ENOMEM, NULL);
        return;
    }
    snprintf(j->agent, sizeof j->agent, "%s", r->params[0]);
    j->session = session ? vg_strdup(session) : NULL;
    j->key = key ? vg_strdup(key) : NULL;
    j->text = vg_strdup(text);
    if ((key && !j->key) || !j->text) { /* a turn without its key would not be the same turn */
        job_free(j);
        vg_req_error(r, VIGIL_ENOMEM, NULL);
        return;
    }
    vg_http_stream_start(r, "text/event-stream", chat_thread, j, job_free);
}

void vg_http_chat_route(struct vg_req *r)
{
    vigil_error err = {0};
    int bad = 0;
    const char *text = vg_req_str(r, "text", &bad), *session = vg_req_str(r, "session", &bad);
    const char *accept = vg_req_header(r, "Accept");
    /* A retry of the same turn sends the same key: it is not run twice (vigil_chat_keyed). */
    const char *key = vg_req_header(r, "Idempotency-Key");
    char *out = NULL;
    if (bad || !text || !*text) {
        vg_req_error(r, VIGIL_EINVAL, "send {\"text\": \"...\"} (and optionally \"session\")");
        return;
    }
    if (accept && strstr(accept, "text/event-stream")) {
        /* Refuse what the turn would refuse before promising a stream: an agent not stored.
         * Its lifecycle alone says so; vigil_agent_show read, decoded and encoded the whole
         * agent to be thrown away (180,000 instructions a streamed turn: docs/internals/PERF.md,
         * session 36). */
        vigil_lifecycle lc;
        vigil_code rc = vigil_agent_lifecycle(r->rt, r->params[0], &lc, &err);
        if (rc) {
            vg_req_fail(r, rc, &err);
            return;
        }
        chat_streamed(r, session, key, text);
        return;
    }
    /* A whole turn has no stream to watch: it ends canceled when the daemon stops, so stopping
     * never waits out a long model call or retry. */
    vigil_chat_callbacks cb = {.user = r->h, .cancel = server_stopping};
    vigil_code rc = vigil_chat_keyed(r->rt, r->params[0], session, key, text, &cb, &out, &err);
    if (rc && !strncmp(err.detail, "run_id=", 7)) {
        vigil_free(out);
        vg_req_value(r, vigil_error_http_status(&err), turn_error(rc, &err));
        return;
    }
    if (rc) {
        vg_req_answer(r, rc, out, &err);
        return;
    }
    /* An answer goes out as vigil_chat wrote it, not parsed and printed again. */
    if (turn_answered(out)) {
        vg_req_json(r, 200, out);
        return;
    }
    json_t *v = turn_answer(out, &rc);
    vigil_free(out);
    if (rc == VIGIL_EBUDGET)
        r->retry_after_s = budget_reset_s();
    vg_req_value(r, rc ? vigil_code_http_status(rc) : 200, v);
}
