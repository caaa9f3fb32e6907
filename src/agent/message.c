/*
 * message.c: immutable messages. An append writes the message (which names the thread's
 * previous message in prev_id: the message_prev relation, read through vg_link_targets), a
 * payload record for long content, and moves two small pointers (the thread's head and the
 * agent's head, which also carries the agent's message counter).
 * Nothing that holds earlier messages is rewritten, so an append costs the same at the 10th and
 * the 1,000,000th message, and so does reading the latest N of a thread (one index range).
 */
#include "base/common.h"

#include "agent/agent_int.h"
#include "base/json.h"

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
    /* 144: the thread's head pointer id "agent_head_message:<agent>:<thread>" must fit the
     * 200-byte id limit. */
    if (n == 0 || n > 144)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f)
            return 0;
    return 1;
}

/*
 * A journal member's text, as src/journal gives it: [sequence, occurred_at ms, stored form],
 * and for a tool call's end a last string, the prev_id its form was made for. The message takes
 * the time of the first member it keeps as its own (its created_at and its row's time), and
 * writes each member without what the message already says: the time when it is the message's,
 * the prev_id when it is the message's own. The record's readers take them from the message
 * (docs/internals/JOURNAL.md, "The record's time and its call's id from the message").
 */
struct member_cut {
    size_t at_from, at_to;     /* the time and its comma: [at_from, at_to) */
    size_t prev_from, prev_to; /* the comma and the prev_id string (prev_to == prev_from: none) */
    int64_t at;
    int has_at;
};

static struct member_cut member_cut_of(const char *text)
{
    struct member_cut c = {0};
    size_t n = strlen(text), i = 1;
    if (n < 2 || text[0] != '[' || text[n - 1] != ']')
        return c;
    while (i < n && text[i] >= '0' && text[i] <= '9')
        i++;
    if (i == 1 || text[i] != ',')
        return c;
    size_t from = ++i;
    int64_t at = 0;
    while (i < n && text[i] >= '0' && text[i] <= '9' && at < INT64_MAX / 10 - 9)
        at = at * 10 + (text[i++] - '0');
    if (i > from && i - from <= 15 && text[i] == ',') {
        c.at_from = from;
        c.at_to = i + 1;
        c.at = at;
        c.has_at = 1;
    }
    c.prev_from = c.prev_to = n - 1;
    if (text[n - 2] == '"') { /* a last string: an id, written without escapes */
        size_t q = n - 3;
        while (q > 0 && text[q] != '"' && text[q] != '\\')
            q--;
        if (q > 1 && text[q] == '"' && text[q - 1] == ',') {
            c.prev_from = q - 1;
            c.prev_to = n - 1;
        }
    }
    return c;
}

/* Member text as the message keeps it (member_cut), its time at and its prev_id prev. */
static void put_member(struct vg_buf *b, const char *key, const char *text, int64_t at,
                       const char *prev)
{
    struct member_cut c = member_cut_of(text);
    vg_buf_puts(b, key);
    if (!c.has_at || c.at != at) {
        vg_buf_puts(b, text); /* a member the message's time does not fit, kept as it is */
        return;
    }
    size_t plen = c.prev_to > c.prev_from ? c.prev_to - c.prev_from - 3 : 0;
    int own_prev = plen && strlen(prev) == plen && !memcmp(text + c.prev_from + 2, prev, plen);
    vg_buf_append(b, text, c.at_from);
    vg_buf_append(b, text + c.at_to, (own_prev ? c.prev_from : c.prev_to) - c.at_to);
    vg_buf_putc(b, ']');
}

/* The message's time: the first journal member's (its record's), else the clock's. */
static int64_t message_time(struct vg_env *env, const struct vg_message_in *m)
{
    const char *members[] = {m->journal_call, m->journal_end, m->journal_start};
    for (size_t i = 0; i < VG_ARRAY_LEN(members); i++) {
        if (!members[i])
            continue;
        struct member_cut c = member_cut_of(members[i]);
        if (c.has_at)
            return c.at;
    }
    return vg_env_now(env);
}

/* The message body, keys in sorted order (the canonical form jansson's JSON_SORT_KEYS gives),
 * written straight into a buffer: no tree is built on the append path. */
static void message_body(struct vg_buf *b, const struct vg_message_in *m, const char *id,
                         int64_t seq, const char *prev, int64_t at_ms, const char *content,
                         const char *ctype, const char *payload_id, int64_t tokens,
                         const char *metadata)
{
    char at[32];
    vg_time_format_ms(at, at_ms);
    vg_buf_puts(b, "{\"agent_id\":");
    vg_json_put_string(b, m->agent_id);
    vg_buf_puts(b, ",\"content\":");
    vg_json_put_string(b, payload_id ? NULL : content);
    vg_buf_puts(b, ",\"content_type\":");
    vg_json_put_string(b, ctype);
    vg_buf_puts(b, ",\"created_at\":");
    vg_json_put_string(b, at);
    vg_buf_puts(b, ",\"id\":");
    vg_json_put_string(b, id);
    if (m->journal_call)
        put_member(b, ",\"journal_call\":", m->journal_call, at_ms, prev);
    if (m->journal_end)
        put_member(b, ",\"journal_end\":", m->journal_end, at_ms, prev);
    if (m->journal_start)
        put_member(b, ",\"journal_start\":", m->journal_start, at_ms, prev);
    vg_buf_puts(b, ",\"kind\":");
    vg_json_put_string(b, vg_message_kind_name(m->kind));
    vg_buf_puts(b, ",\"metadata\":");
    vg_buf_puts(b, metadata ? metadata : "null");
    vg_buf_puts(b, ",\"payload_id\":");
    vg_json_put_string(b, payload_id);
    vg_buf_puts(b, ",\"prev_id\":");
    vg_json_put_string(b, prev[0] ? prev : NULL);
    if (payload_id) {
        /* A preview keeps lists readable without loading the payload. */
        char preview[241];
        size_t n = strlen(content) < 240 ? strlen(content) : 240;
        while (n > 0 && n < strlen(content) && ((unsigned char)content[n] & 0xc0) == 0x80)
            n--; /* do not cut a UTF-8 sequence */
        memcpy(preview, content, n);
        preview[n] = '\0';
        vg_buf_puts(b, ",\"preview\":");
        vg_json_put_string(b, preview);
    }
    vg_buf_puts(b, ",\"run_id\":");
    vg_json_put_string(b, m->run_id);
    vg_buf_puts(b, ",\"seq\":");
    vg_json_put_int(b, seq);
    vg_buf_puts(b, ",\"thread_id\":");
    vg_json_put_string(b, m->thread_id);
    vg_buf_puts(b, ",\"tokens\":");
    vg_json_put_int(b, tokens);
    vg_buf_putc(b, '}');
}

vigil_code vg_message_append(struct vg_env *env, const struct vg_message_in *m, char *out_id,
                             vigil_error *err)
{
    vigil_code rc;
    struct vg_pointer agent_head, thread_head;
    struct vg_buf body, payload;
    char id[VG_RECORD_ID_MAX], payload_id[37], thread_key[256];
    char *metadata = NULL;
    vigil_lifecycle lc;
    const char *content = m->content ? m->content : "";
    const char *ctype = m->content_type ? m->content_type : "text/plain";
    size_t clen = strlen(content);
    int64_t tokens = vg_token_estimate(content);

    if (!m->agent_id || !*m->agent_id)
        return VG_FAIL(err, VIGIL_EINVAL, "a message needs an agent id");
    if (!thread_id_valid(m->thread_id))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid thread id: 1 to 144 printable bytes");
    if ((unsigned)m->kind >= VG_MSG_KIND_COUNT)
        return VG_FAIL(err, VIGIL_EINVAL, "unknown message kind %d", (int)m->kind);
    if (m->metadata && !json_is_object(m->metadata))
        return VG_FAIL(err, VIGIL_EINVAL, "message metadata must be a JSON object");
    if (!m->metadata && m->metadata_json && m->metadata_json[0] != '{')
        return VG_FAIL(err, VIGIL_EINVAL, "message metadata must be a JSON object");
    if (m->id) {
        if (!*m->id || strlen(m->id) > 200)
            return VG_FAIL(err, VIGIL_EINVAL, "a message id must have 1 to 200 bytes");
        snprintf(id, sizeof id, "%s", m->id);
    } else {
        vg_ids_new(env->ids, id);
    }
    vg_join(thread_key, sizeof thread_key, m->agent_id, ':', m->thread_id);
    if (m->metadata && !(metadata = vg_json_dump(m->metadata, 1)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory appending a message");
    vg_buf_init(&body, 0);
    vg_buf_init(&payload, 0);

    if ((rc = vg_store_begin(env->store, err)))
        goto done;
    if (m->lifecycle_checked && vg_store_depth(env->store) > 1)
        lc = VIGIL_LIFECYCLE_ACTIVE; /* checked in the transaction this one joins */
    else if ((rc = vg_agent_lifecycle(env, m->agent_id, &lc, err)))
        goto out;
    if (lc == VIGIL_LIFECYCLE_DESTROYED) {
        rc = VG_FAIL(err, VIGIL_ESTATE, "agent \"%s\" is destroyed and takes no messages",
                     m->agent_id);
        goto out;
    }
    if ((rc = vg_pointer_read(env, "agent_head_message", m->agent_id, &agent_head, err)) ||
        (rc = vg_pointer_read(env, "agent_head_message", thread_key, &thread_head, err)))
        goto out;
    int64_t seq = agent_head.seq + 1;
    const char *prev = thread_head.exists ? thread_head.to : "";

    int64_t at = message_time(env, m);
    int to_payload = clen > VG_MESSAGE_INLINE_MAX;
    if (to_payload)
        vg_ids_new(env->ids, payload_id);
    message_body(&body, m, id, seq, prev, at, content, ctype, to_payload ? payload_id : NULL,
                 tokens, metadata ? metadata : m->metadata_json);
    if ((rc = vg_buf_finish(&body, err)))
        goto out;
    struct vg_record row = {.kind = "message",
                            .id = id,
                            .owner = m->agent_id,
                            .k1 = m->thread_id,
                            .k2 = vg_message_kind_name(m->kind),
                            .seq = seq,
                            .at = at, /* the body's created_at: stored once, as the row's */
                            .body = body.data};
    rc = vg_store_put(env->store, &row, 0, NULL, err);
    if (rc == VIGIL_EEXISTS) {
        rc = VG_FAIL(err, VIGIL_EEXISTS, "message \"%s\" already exists", id);
        goto out;
    }
    if (!rc && to_payload) {
        vg_buf_puts(&payload, "{\"content\":");
        vg_json_put_string(&payload, content);
        vg_buf_puts(&payload, ",\"content_type\":");
        vg_json_put_string(&payload, ctype);
        vg_buf_puts(&payload, ",\"id\":");
        vg_json_put_string(&payload, payload_id);
        vg_buf_puts(&payload, ",\"message_id\":");
        vg_json_put_string(&payload, id);
        vg_buf_putc(&payload, '}');
        rc = vg_buf_finish(&payload, err);
        if (!rc)
            rc = vg_env_put_text(env, "message_payload", payload_id, m->agent_id, id, "", seq,
                                 payload.data, 0, err);
        if (!rc)
            rc = vg_link_add_text(env, m->agent_id, "message_payload", id, payload_id, NULL, err);
    }
    if (!rc)
        rc = vg_pointer_write(env, m->agent_id, "agent_head_message", thread_key, id,
                              thread_head.seq + 1, &thread_head, err);
    if (!rc)
        rc = vg_pointer_write(env, m->agent_id, "agent_head_message", m->agent_id, id, seq,
                              &agent_head, err);
    if (!rc) {
        const char *tokens_out[] = {VIGIL_TOKEN_AGENT_MESSAGE_APPENDED, m->agent_id, id};
        vg_env_notify(env, tokens_out, VG_ARRAY_LEN(tokens_out));
        struct vg_message_note note = {m->agent_id, m->thread_id, id, prev, seq, tokens};
        vg_env_message_appended(env, &note);
    }
out:
    rc = vg_store_end(env->store, rc, err);
    if (!rc && out_id)
        memcpy(out_id, id, strlen(id) + 1);
done:
    vg_free(metadata);
    vg_buf_release(&body);
    vg_buf_release(&payload);
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
    int failed, newest_first;
};

static int latest_cb(void *user, const struct vg_record *r)
{
    struct latest_ctx *c = user;
    json_error_t je;
    json_t *body = json_loads(r->body, 0, &je);
    /* A scan newest first inserts at the front, to return oldest first. */
    if (!body || (c->newest_first ? json_array_insert_new(c->items, 0, body)
                                  : json_array_append_new(c->items, body))) {
        c->failed = 1;
        return 1;
    }
    return 0;
}

/* Replace every payload reference of a list of message bodies by its content. */
static vigil_code resolve_payloads(struct vg_env *env, json_t *items, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    for (size_t i = 0; !rc && i < json_array_size(items); i++)
        rc = resolve_payload(env, json_array_get(items, i), err);
    return rc;
}

/* The messages a scan finds, oldest first, content resolved, as a JSON array (*out owned). */
static vigil_code scan_bodies(struct vg_env *env, const struct vg_query *q, json_t **out,
                              vigil_error *err)
{
    struct latest_ctx c = {json_array(), 0, q->descending};
    if (!c.items)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading messages");
    vigil_code rc = vg_store_scan(env->store, q, latest_cb, &c, err);
    if (!rc && c.failed)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading messages");
    if (!rc)
        rc = resolve_payloads(env, c.items, err);
    if (rc) {
        json_decref(c.items);
        return rc;
    }
    *out = c.items;
    return VIGIL_OK;
}

vigil_code vg_message_latest(struct vg_env *env, const char *agent_id, const char *thread_id,
                             int limit, json_t **out, vigil_error *err)
{
    if (limit <= 0 || limit > 10000)
        return VG_FAIL(err, VIGIL_EINVAL, "message limit %d is out of range 1..10000", limit);
    struct vg_query q = {
        .kind = "message", .owner = agent_id, .k1 = thread_id, .descending = 1, .limit = limit};
    return scan_bodies(env, &q, out, err);
}

struct recent_ctx {
    json_t *items;
    int64_t budget, used;
    int turn_seen, failed;
};

/* What a message costs in a model's context, as the loop's window counts it: its content, its
 * tool calls, a little for the message itself; nothing for an action (its assistant message
 * carries the call). */
static int64_t context_cost(json_t *body, const char *kind)
{
    if (kind && !strcmp(kind, "action"))
        return 0;
    int64_t t = json_integer_value(json_object_get(body, "tokens")) + 8;
    json_t *calls = json_object_get(json_object_get(body, "metadata"), "tool_calls");
    for (size_t i = 0; i < json_array_size(calls); i++) {
        json_t *c = json_array_get(calls, i);
        t += vg_token_estimate(json_string_value(json_object_get(c, "name"))) +
             vg_token_estimate(json_string_value(json_object_get(c, "arguments"))) + 4;
    }
    return t;
}

static int recent_cb(void *user, const struct vg_record *r)
{
    struct recent_ctx *c = user;
    json_error_t je;
    json_t *body = json_loads(r->body, 0, &je);
    if (!body || json_array_insert_new(c->items, 0, body)) {
        c->failed = 1;
        return 1;
    }
    const char *kind = json_string_value(json_object_get(body, "kind"));
    c->used += context_cost(body, kind);
    c->turn_seen |= kind && (!strcmp(kind, "user") || !strcmp(kind, "observation"));
    return c->turn_seen && c->used >= c->budget;
}

static const char *item_str(json_t *items, size_t i, const char *key)
{
    const char *v = json_string_value(json_object_get(json_array_get(items, i), key));
    return v ? v : "";
}

/* Whether every item follows the one before it: no fork among them (the usual case). */
static int one_branch(json_t *items)
{
    for (size_t i = 1; i < json_array_size(items); i++)
        if (strcmp(item_str(items, i, "prev_id"), item_str(items, i - 1, "id")))
            return 0;
    return 1;
}

/* Push the children of node (or the roots, node -1) on stack, the one whose subtree's newest
 * sorts last first, so that the oldest is taken first. kids[node + 1] heads node's children in
 * index order, linked through sib. Fan-outs are small (a fork is two or three branches). */
static void push_children(const long *kids, const long *sib, const long *last, long node,
                          long *stack, long *top)
{
    long first = *top;
    for (long c = kids[node + 1]; c >= 0; c = sib[c]) {
        long at = (*top)++;
        while (at > first && last[stack[at - 1]] < last[c]) { /* insertion, descending */
            stack[at] = stack[at - 1];
            at--;
        }
        stack[at] = c;
    }
}

/* The branch order over n items: parent[i] the index of i's prev_id among them (-1: a root;
 * a child sorts after its parent, appended after its device saw it). Walked depth first, the
 * children of a message (and the roots) by their subtree's newest index, into order. */
static void branch_walk(const long *parent, long *work, long *order, long n)
{
    long *last = work, *kids = work + n, *sib = work + 2 * n + 1, *stack = work + 3 * n + 1;
    long top = 0, out = 0;
    for (long i = 0; i <= n; i++)
        kids[i] = -1;
    for (long i = n - 1; i >= 0; i--) {
        last[i] = i > last[i] ? i : last[i];
        if (parent[i] >= 0 && last[i] > last[parent[i]])
            last[parent[i]] = last[i];
        sib[i] = kids[parent[i] + 1];
        kids[parent[i] + 1] = i;
    }
    push_children(kids, sib, last, -1, stack, &top);
    while (top > 0) {
        long node = stack[--top];
        order[out++] = node;
        push_children(kids, sib, last, node, stack, &top);
    }
}

int vg_message_branch_order(json_t *items)
{
    long n = (long)json_array_size(items);
    if (one_branch(items))
        return 0;
    long *buf = vg_malloc(sizeof(long) * ((size_t)n * 6 + 1));
    json_t *index = json_object(), *sorted = json_array();
    int bad = !buf || !index || !sorted;
    long *parent = buf, *order = buf + n, *work = buf + 2 * n;
    for (long i = 0; !bad && i < n; i++)
        bad = json_object_set_new(index, item_str(items, (size_t)i, "id"), json_integer(i));
    for (long i = 0; !bad && i < n; i++) {
        json_t *p = json_object_get(index, item_str(items, (size_t)i, "prev_id"));
        parent[i] = p && json_integer_value(p) < i ? (long)json_integer_value(p) : -1;
        work[i] = -1; /* last: set by the walk */
    }
    if (!bad)
        branch_walk(parent, work, order, n);
    for (long i = 0; !bad && i < n; i++)
        bad = json_array_append(sorted, json_array_get(items, (size_t)order[i]));
    if (!bad) {
        json_array_clear(items);
        bad = json_array_extend(items, sorted);
    }
    vg_free(buf);
    json_decref(index);
    json_decref(sorted);
    return bad ? -1 : 0;
}

vigil_code vg_message_recent(struct vg_env *env, const char *agent_id, const char *thread_id,
                             int64_t tokens, json_t **out, vigil_error *err)
{
    struct recent_ctx c = {.items = json_array(), .budget = tokens};
    if (!c.items)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading messages");
    struct vg_query q = {.kind = "message", .owner = agent_id, .k1 = thread_id, .descending = 1};
    vigil_code rc = vg_store_scan(env->store, &q, recent_cb, &c, err);
    if (!rc && (c.failed || vg_message_branch_order(c.items)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading messages");
    if (!rc)
        rc = resolve_payloads(env, c.items, err);
    if (rc) {
        json_decref(c.items);
        return rc;
    }
    *out = c.items;
    return VIGIL_OK;
}

vigil_code vg_message_after(struct vg_env *env, const char *agent_id, const char *thread_id,
                            int64_t after, int max, json_t **out, vigil_error *err)
{
    struct vg_query q = {.kind = "message",
                         .owner = agent_id,
                         .k1 = thread_id,
                         .has_seq_min = 1,
                         .seq_min = after + 1,
                         .limit = max};
    return scan_bodies(env, &q, out, err);
}
