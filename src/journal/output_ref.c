/*
 * output_ref.c: a tool call's output stored once. The loop records a tool's answer as the
 * toolResult message's content; the journal's end record of the call held the same envelope
 * again (some 250 bytes a tool step). When the newest message of the run's thread holds exactly
 * that text, the end record names the message (`tool_call.output_message`) instead, and every
 * reader of journal records (replay, export, import's comparison, the tool call readers) puts
 * the output back from it, so each gives what the record said. Messages are never removed apart
 * from their agent, whose journal goes with them, so the name stays good; pruning keeps end
 * records (replay.c). docs/internals/JOURNAL.md, "A tool call's output once".
 */
#include "base/common.h"

#include "base/jscan.h"
#include "journal/journal_int.h"
#include "store/store.h"

#define MESSAGE_KIND "message"
#define RESULT_TYPE "toolResult"

struct result_find {
    const char *output;
    char *id; /* out: the message's id, owned */
};

/* Whether the message body's top-level content is a string equal to output. Read with the
 * scanner, not a tree, on every tool step (jansson took some 117,000 instructions for this
 * body: callgrind); a body the scanner declines counts as different. */
static int content_is(const char *body, const char *output)
{
    struct vg_jscan sc;
    struct vg_buf b;
    const char *key;
    size_t len, at;
    int same = 0, r;
    vg_jscan_init(&sc, body, strlen(body));
    if (vg_jscan_enter(&sc, '{') < 0)
        return 0;
    vg_buf_init(&b, VG_BUF_DEFAULT_MAX);
    while ((r = vg_jscan_next(&sc, &key, &len)) == 1) {
        if (!vg_jscan_key_is(key, len, "content")) {
            if (vg_jscan_skip(&sc) < 0)
                break;
            continue;
        }
        same = vg_jscan_string(&sc, &b, &at) == 0 && at != (size_t)-1 && !b.fail &&
               strcmp(b.data + at, output) == 0;
        break;
    }
    vg_buf_release(&b);
    return same;
}

static int result_cb(void *user, const struct vg_record *r)
{
    struct result_find *f = user;
    if (r->k2 && strcmp(r->k2, RESULT_TYPE) == 0 && content_is(r->body, f->output))
        f->id = vg_strdup(r->id);
    return 1;
}

char *vg_journal_output_message(struct vg_store *s, const char *agent_id, const char *thread_id,
                                const char *output)
{
    if (!agent_id || !thread_id || !output)
        return NULL;
    struct result_find f = {.output = output};
    struct vg_query q = {
        .kind = MESSAGE_KIND, .owner = agent_id, .k1 = thread_id, .descending = 1, .limit = 1};
    if (vg_store_scan(s, &q, result_cb, &f, NULL) != VIGIL_OK) {
        vg_free(f.id);
        return NULL; /* the output is then stored in the record, as before */
    }
    return f.id;
}

vigil_code vg_journal_follow_output(struct vg_store *s, json_t *rec, vigil_error *err)
{
    json_t *tc = json_object_get(rec, "tool_call");
    const char *id = vg_jstr(tc, "output_message");
    if (!id)
        return VIGIL_OK;
    struct vg_record *m = NULL;
    vigil_code rc = vg_store_get_copy(s, MESSAGE_KIND, id, &m, err);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ECORRUPT,
                       "the message \"%s\" that holds tool call \"%s\"'s output is missing", id,
                       vg_jstr(tc, "tool_call_id") ? vg_jstr(tc, "tool_call_id") : "");
    if (rc)
        return rc;
    json_t *b = vg_jload(m->body, strlen(m->body), 0, NULL);
    const char *content = vg_jstr(b, "content");
    json_t *out = content ? vg_jload(content, strlen(content), JSON_DECODE_ANY, NULL) : NULL;
    vg_free(m);
    json_decref(b);
    if (!out)
        return VG_FAIL(err, VIGIL_ECORRUPT,
                       "the message \"%s\" that holds a tool call's output has no JSON content",
                       id);
    if (json_object_set_new(tc, "output", out) || json_object_del(tc, "output_message"))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a tool call's output");
    return VIGIL_OK;
}

vigil_code vg_journal_follow_text(struct vg_store *s, const char *body, char **out,
                                  vigil_error *err)
{
    *out = NULL;
    if (!strstr(body, "\"output_message\":"))
        return VIGIL_OK;
    json_t *rec = vg_jload(body, strlen(body), 0, NULL);
    if (!rec)
        return VIGIL_OK; /* not JSON: the caller reads it as stored */
    vigil_code rc = vg_journal_follow_output(s, rec, err);
    if (rc == VIGIL_OK && !(*out = vg_journal_canonical(rec)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a journal record");
    json_decref(rec);
    return rc;
}
