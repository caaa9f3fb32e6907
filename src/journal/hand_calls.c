/*
 * hand_calls.c: the tool calls an agent made outside any run: `vigil tool call`,
 * vigil_tool_call, POST /v1/agents/{id}/tools/{name}/call, `vigil sandbox run --agent`. Each
 * is recorded as its action and toolResult messages in a thread of its own and as its
 * operation record (the tool gate's: src/tool/executor.c), with no run record, so no run
 * listing shows it. They are read here from the agent's operation records whose run_id is null,
 * newest first, paged like the run listings (a cursor past a record's sequence and id). A call
 * the gate refused before it became an operation (an unknown tool, a tool the agent may not
 * call, invalid arguments) is not listed: its caller got the refusal at once.
 */
#include "base/common.h"
#include "base/json.h"

#include "journal/journal_int.h"
#include "store/store.h"

#define HAND_PREVIEW_BYTES 200
#define HAND_DEFAULT_LIMIT 50
#define HAND_MAX_LIMIT 1000

struct hand_page {
    json_t *items;
    int limit, more, failed;
    int64_t last_seq;
    char last_id[201];
};

/* The text cut to HAND_PREVIEW_BYTES on a UTF-8 boundary, into it as key, and whether it was
 * cut as flag. */
static int put_preview(json_t *it, const char *key, const char *flag, char *text)
{
    size_t len = text ? strlen(text) : 0;
    size_t n = vg_utf8_cut(text, len, (size_t)HAND_PREVIEW_BYTES);
    int bad = json_object_set_new(it, key, text ? json_stringn(text, n) : json_null()) ||
              json_object_set_new(it, flag, json_boolean(n < len));
    vg_free(text);
    return bad;
}

/* How a call ended in the words a run's tool calls use (succeeded, failed: vg_journal_run_tools),
 * from its outcome's status as stored ("success", "partial", "error": the envelope the model
 * reads, which stays as written); NULL while it has no outcome. */
static json_t *result_status(const json_t *outcome)
{
    const char *s = json_string_value(json_object_get(outcome, "status"));
    if (!s)
        return json_null();
    return json_string(strcmp(s, "success") == 0 || strcmp(s, "partial") == 0 ? "succeeded"
                                                                              : "failed");
}

/* One listing item from an operation body: what was called, how it ended, when. */
static json_t *hand_item(const json_t *op)
{
    static const char *const keys[] = {"operation_id", "tool",        "status",   "run_key",
                                       "started_at",   "finished_at", "action_id"};
    const json_t *outcome = json_object_get(op, "outcome");
    json_t *it = json_object();
    int bad = !it;
    for (size_t i = 0; i < VG_ARRAY_LEN(keys) && !bad; i++) {
        json_t *v = json_object_get(op, keys[i]);
        bad = json_object_set(it, keys[i], v ? v : json_null());
    }
    json_t *code = json_object_get(outcome, "error_code");
    if (!bad)
        bad = json_object_set_new(it, "result_status", result_status(outcome)) ||
              json_object_set(it, "error_code", code ? code : json_null()) ||
              put_preview(it, "arguments_preview", "arguments_truncated",
                          vg_journal_canonical(json_object_get(op, "arguments")));
    if (bad) {
        json_decref(it);
        return NULL;
    }
    return it;
}

static int hand_cb(void *user, const struct vg_record *r)
{
    struct hand_page *p = user;
    json_t *op = json_loads(r->body, 0, NULL);
    int by_hand = op && json_is_null(json_object_get(op, "run_id"));
    if (by_hand && json_array_size(p->items) == (size_t)p->limit) {
        p->more = 1;
        json_decref(op);
        return 1;
    }
    if (by_hand && json_array_append_new(p->items, hand_item(op))) {
        p->failed = 1;
        json_decref(op);
        return 1;
    }
    if (by_hand) {
        p->last_seq = r->seq;
        snprintf(p->last_id, sizeof p->last_id, "%s", r->id);
    }
    json_decref(op);
    return 0;
}

vigil_code vg_journal_hand_calls(struct vg_store *store, const char *agent_id, const char *cursor,
                                 int limit, char **out_json, vigil_error *err)
{
    char after[201], next[600];
    struct hand_page p = {.items = json_array(), .limit = limit ? limit : HAND_DEFAULT_LIMIT};
    struct vg_query q = {.kind = "operation", .owner = agent_id, .descending = 1};
    vigil_code rc = p.items ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading calls");
    if (!rc && (p.limit < 1 || p.limit > HAND_MAX_LIMIT))
        rc = VG_FAIL(err, VIGIL_EINVAL, "limit must be 1..%d", HAND_MAX_LIMIT);
    if (!rc && cursor && *cursor &&
        !(rc = vg_journal_cursor_decode(cursor, &q.after_seq, after, sizeof after, err))) {
        q.has_after = 1;
        q.after_id = after;
    }
    if (!rc)
        rc = vg_store_scan(store, &q, hand_cb, &p, err);
    if (!rc && p.failed)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading calls");
    if (!rc && p.more)
        vg_journal_cursor_encode(next, sizeof next, p.last_seq, p.last_id);
    json_t *page =
        rc ? NULL : json_pack("{s:O, s:s?}", "items", p.items, "next_cursor", p.more ? next : NULL);
    json_decref(p.items);
    if (!rc && !page)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading calls");
    if (!rc && !(*out_json = vg_journal_canonical(page)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading calls");
    json_decref(page);
    return rc;
}
