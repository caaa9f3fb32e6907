/*
 * message.c: immutable messages. An append writes the message, a message_prev link to the
 * thread's previous message, a payload record for long content, and moves two small pointers
 * (the thread's head and the agent's head, which also carries the agent's message counter).
 * Nothing that holds earlier messages is rewritten, so an append costs the same at the 10th and
 * the 1,000,000th message, and so does reading the latest N of a thread (one index range).
 */
#include "base/common.h"

#include "agent/agent_int.h"

static const char *const kind_names[VG_MSG_KIND_COUNT] = {
    "observation", "user", "thought", "action", "toolResult", "summary", "system"};

const char *vg_message_kind_name(enum vg_message_kind k)
{
    return (unsigned)k < VG_MSG_KIND_COUNT ? kind_names[k] : "unknown";
}

int vg_message_kind_parse(const char *name, enum vg_message_kind *out)
{
    for (int i = 0; name && i < VG_MSG_KIND_COUNT; i++) {
        if (strcmp(name, kind_names[i]) == 0) {
            *out = (enum vg_message_kind)i;
            return 0;
        }
    }
    return -1;
}

int64_t vg_token_estimate(const char *text)
{
    size_t n = text ? strlen(text) : 0;
    return (int64_t)((n + 3) / 4);
}

static int thread_id_valid(const char *t)
{
    size_t n = t ? strlen(t) : 0;
    if (n == 0 || n > 150)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f)
            return 0;
    return 1;
}

static json_int_t int_field(json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

vigil_code vg_message_append(struct vg_env *env, const struct vg_message_in *m, char *out_id,
                             vigil_error *err)
{
    vigil_code rc;
    json_t *agent_head = NULL, *thread_head = NULL, *msg = NULL, *payload = NULL, *extra = NULL;
    char id[201], payload_id[37], thread_key[256], at[32], prev[201] = "";
    vigil_lifecycle lc;
    const char *content = m->content ? m->content : "";
    const char *ctype = m->content_type ? m->content_type : "text/plain";
    size_t clen = strlen(content);
    int64_t tokens = vg_token_estimate(content);

    if (!m->agent_id || !*m->agent_id)
        return VG_FAIL(err, VIGIL_EINVAL, "a message needs an agent id");
    if (!thread_id_valid(m->thread_id))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid thread id: 1 to 150 printable bytes");
    if ((unsigned)m->kind >= VG_MSG_KIND_COUNT)
        return VG_FAIL(err, VIGIL_EINVAL, "unknown message kind %d", (int)m->kind);
    if (m->metadata && !json_is_object(m->metadata))
        return VG_FAIL(err, VIGIL_EINVAL, "message metadata must be a JSON object");
    if (m->id) {
        if (!*m->id || strlen(m->id) > 200)
            return VG_FAIL(err, VIGIL_EINVAL, "a message id must have 1 to 200 bytes");
        snprintf(id, sizeof id, "%s", m->id);
    } else {
        vg_ids_new(env->ids, id);
    }
    snprintf(thread_key, sizeof thread_key, "%s:%s", m->agent_id, m->thread_id);

    if ((rc = vg_store_begin(env->store, err)))
        return rc;
    if ((rc = vg_agent_lifecycle(env, m->agent_id, &lc, err)))
        goto out;
    if (lc == VIGIL_LIFECYCLE_DESTROYED) {
        rc = VG_FAIL(err, VIGIL_ESTATE, "agent \"%s\" is destroyed and takes no messages",
                     m->agent_id);
        goto out;
    }
    rc = vg_pointer_get_json(env, "agent_head_message", m->agent_id, &agent_head, err);
    if (rc && rc != VIGIL_ENOTFOUND)
        goto out;
    rc = vg_pointer_get_json(env, "agent_head_message", thread_key, &thread_head, err);
    if (rc && rc != VIGIL_ENOTFOUND)
        goto out;
    rc = VIGIL_OK;
    int64_t seq = agent_head ? int_field(agent_head, "seq") + 1 : 1;
    if (thread_head)
        snprintf(prev, sizeof prev, "%s", json_string_value(json_object_get(thread_head, "to")));

    int64_t now = vg_env_now(env);
    vg_time_format_ms(at, now);
    int to_payload = clen > VG_MESSAGE_INLINE_MAX;
    if (to_payload)
        vg_ids_new(env->ids, payload_id);
    msg = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s?, s:s, s:s?, s:s, s:s?, s:I, s:s?, s:O?}",
                    "id", id, "agent_id", m->agent_id, "thread_id", m->thread_id, "kind",
                    vg_message_kind_name(m->kind), "seq", (json_int_t)seq, "prev_id",
                    prev[0] ? prev : NULL, "created_at", at, "content",
                    to_payload ? NULL : content, "content_type", ctype, "payload_id",
                    to_payload ? payload_id : NULL, "tokens", (json_int_t)tokens, "run_id",
                    m->run_id, "metadata", m->metadata);
    if (!msg) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory appending a message");
        goto out;
    }
    if (to_payload) {
        /* A preview keeps lists readable without loading the payload. */
        char preview[241];
        snprintf(preview, sizeof preview, "%.240s", content);
        if (json_object_set_new(msg, "preview", json_string(preview))) {
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory appending a message");
            goto out;
        }
    }
    rc = vg_env_put_json(env, "message", id, m->agent_id, m->thread_id,
                         vg_message_kind_name(m->kind), seq, msg, 0, err);
    if (rc == VIGIL_EEXISTS) {
        rc = VG_FAIL(err, VIGIL_EEXISTS, "message \"%s\" already exists", id);
        goto out;
    }
    if (!rc && to_payload) {
        payload = json_pack("{s:s, s:s, s:s, s:s}", "id", payload_id, "message_id", id,
                            "content_type", ctype, "content", content);
        if (!payload)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory appending a message");
        if (!rc)
            rc = vg_env_put_json(env, "message_payload", payload_id, m->agent_id, id, "", seq,
                                 payload, 0, err);
        if (!rc)
            rc = vg_link_add(env, m->agent_id, "message_payload", id, payload_id, NULL, err);
    }
    if (!rc && prev[0])
        rc = vg_link_add(env, m->agent_id, "message_prev", id, prev, NULL, err);
    if (!rc) {
        json_int_t count = thread_head ? int_field(thread_head, "count") : 0;
        json_int_t ttok = thread_head ? int_field(thread_head, "tokens") : 0;
        extra = json_pack("{s:I, s:I, s:I, s:s}", "seq", (json_int_t)seq, "count", count + 1,
                          "tokens", ttok + tokens, "thread_id", m->thread_id);
        if (!extra)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory appending a message");
    }
    if (!rc)
        rc = vg_pointer_set(env, m->agent_id, "agent_head_message", thread_key, id, extra, err);
    if (!rc) {
        json_object_del(extra, "count");
        json_object_del(extra, "tokens");
        json_object_del(extra, "thread_id");
        rc = vg_pointer_set(env, m->agent_id, "agent_head_message", m->agent_id, id, extra, err);
    }
    if (!rc) {
        const char *tokens_out[] = {VIGIL_TOKEN_AGENT_MESSAGE_APPENDED, m->agent_id, id};
        vg_env_notify(env, tokens_out, VG_ARRAY_LEN(tokens_out));
    }
out:
    rc = vg_store_end(env->store, rc, err);
    if (!rc && out_id)
        memcpy(out_id, id, strlen(id) + 1);
    json_decref(agent_head);
    json_decref(thread_head);
    json_decref(msg);
    json_decref(payload);
    json_decref(extra);
    return rc;
}

/* Replace a message body's payload reference by its content. */
static vigil_code resolve_payload(struct vg_env *env, json_t *msg, vigil_error *err)
{
    const char *pid = json_string_value(json_object_get(msg, "payload_id"));
    if (!pid)
        return VIGIL_OK;
    json_t *payload = NULL;
    vigil_code rc = vg_env_get_json(env, "message_payload", pid, &payload, NULL, err);
    if (rc)
        return rc;
    if (json_object_set(msg, "content", json_object_get(payload, "content")))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a message");
    json_decref(payload);
    return rc;
}

vigil_code vg_message_get(struct vg_env *env, const char *message_id, json_t **out,
                          vigil_error *err)
{
    json_t *msg = NULL;
    vigil_code rc = vg_env_get_json(env, "message", message_id, &msg, NULL, err);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no message \"%s\"", message_id);
    if (rc)
        return rc;
    if ((rc = resolve_payload(env, msg, err))) {
        json_decref(msg);
        return rc;
    }
    *out = msg;
    return VIGIL_OK;
}

struct latest_ctx {
    json_t *items;
    int failed;
};

static int latest_cb(void *user, const struct vg_record *r)
{
    struct latest_ctx *c = user;
    json_error_t je;
    json_t *body = json_loads(r->body, 0, &je);
    /* Newest first from the store; insert at the front to return oldest first. */
    if (!body || json_array_insert_new(c->items, 0, body)) {
        c->failed = 1;
        return 1;
    }
    return 0;
}

vigil_code vg_message_latest(struct vg_env *env, const char *agent_id, const char *thread_id,
                             int limit, json_t **out, vigil_error *err)
{
    if (limit <= 0 || limit > 10000)
        return VG_FAIL(err, VIGIL_EINVAL, "message limit %d is out of range 1..10000", limit);
    struct latest_ctx c = {json_array(), 0};
    if (!c.items)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading messages");
    struct vg_query q = {.kind = "message", .owner = agent_id, .k1 = thread_id,
                         .descending = 1, .limit = limit};
    vigil_code rc = vg_store_scan(env->store, &q, latest_cb, &c, err);
    if (!rc && c.failed)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading messages");
    for (size_t i = 0; !rc && i < json_array_size(c.items); i++)
        rc = resolve_payload(env, json_array_get(c.items, i), err);
    if (rc) {
        json_decref(c.items);
        return rc;
    }
    *out = c.items;
    return VIGIL_OK;
}
