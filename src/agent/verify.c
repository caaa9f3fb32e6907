/*
 * verify.c: the replay property of the record spine. Every projection the store keeps for an
 * agent (its identity record, its state snapshot, the head of each thread, the agent's message
 * counter and the head of each report scope) is rebuilt here from immutable records alone
 * (agent_change, message, report) and compared with what the store holds. A difference means a
 * write path forgot its record or moved a pointer without one.
 */
#include "base/common.h"
#include "base/json.h"

#include "agent/agent_int.h"

#include <stdarg.h>

struct verify_ctx {
    struct vg_env *env;
    const char *agent_id;
    struct vg_buf *diff;
    int mismatches;
    int failed;      /* out of memory or an unreadable record */
    json_t *threads; /* thread id -> {"to", "seq": messages in it} rebuilt from messages */
    json_t *scopes;  /* scope -> {"to", "seq"} rebuilt from reports */
    char last_message[201];
    int64_t last_seq;
};

static void mismatch(struct verify_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void mismatch(struct verify_ctx *c, const char *fmt, ...)
{
    va_list ap;
    c->mismatches++;
    if (!c->diff)
        return;
    va_start(ap, fmt);
    vg_buf_vprintf(c->diff, fmt, ap);
    va_end(ap);
    vg_buf_putc(c->diff, '\n');
}

static char *canonical(json_t *v)
{
    return vg_json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

/* Keeps the parsed body of the first record a scan returns. */
struct first_ctx {
    json_t *body;
    int bad;
};

static int first_cb(void *user, const struct vg_record *r)
{
    struct first_ctx *f = user;
    json_error_t je;
    f->body = json_loads(r->body, 0, &je);
    f->bad = f->body == NULL;
    return 1;
}

/* The newest agent_change of a target must hold the stored record and its revision. */
static void check_snapshot(struct verify_ctx *c, const char *kind, const char *id)
{
    json_t *stored = NULL;
    int64_t rev = 0;
    vigil_error err = {0};
    struct first_ctx f = {0};
    struct vg_query q = {
        .kind = "agent_change", .owner = c->agent_id, .k2 = id, .descending = 1, .limit = 1};
    if (vg_env_get_json(c->env, kind, id, &stored, &rev, &err) != VIGIL_OK) {
        mismatch(c, "%s %s: cannot read the stored record: %s", kind, id, err.message);
        return;
    }
    if (vg_store_scan(c->env->store, &q, first_cb, &f, &err) != VIGIL_OK || f.bad) {
        c->failed = 1;
    } else if (!f.body) {
        mismatch(c, "%s %s: no change record holds it", kind, id);
    } else {
        char *a = canonical(json_object_get(f.body, "snapshot")), *b = canonical(stored);
        if (!a || !b)
            c->failed = 1;
        else if (strcmp(a, b) != 0)
            mismatch(c, "%s %s: stored %s but its records rebuild %s", kind, id, b, a);
        if (json_integer_value(json_object_get(f.body, "rev")) != rev)
            mismatch(c, "%s %s: stored revision %lld, change records end at %lld", kind, id,
                     (long long)rev, (long long)json_integer_value(json_object_get(f.body, "rev")));
        vg_free(a);
        vg_free(b);
    }
    json_decref(f.body);
    json_decref(stored);
}

static int message_cb(void *user, const struct vg_record *r)
{
    struct verify_ctx *c = user;
    json_error_t je;
    json_t *m = json_loads(r->body, 0, &je);
    if (!m) {
        c->failed = 1;
        return 1;
    }
    const char *thread = json_string_value(json_object_get(m, "thread_id"));
    const char *prev = json_string_value(json_object_get(m, "prev_id"));
    json_t *t = thread ? json_object_get(c->threads, thread) : NULL;
    const char *expect_prev = t ? json_string_value(json_object_get(t, "to")) : NULL;
    if (r->seq != c->last_seq + 1)
        mismatch(c, "message %s: number %lld follows %lld", r->id, (long long)r->seq,
                 (long long)c->last_seq);
    if ((prev || expect_prev) && (!prev || !expect_prev || strcmp(prev, expect_prev) != 0))
        mismatch(c, "message %s: previous is %s, thread order says %s", r->id, prev ? prev : "none",
                 expect_prev ? expect_prev : "none");
    json_int_t count = t ? json_integer_value(json_object_get(t, "seq")) : 0;
    json_t *nt = json_pack("{s:s, s:I}", "to", r->id, "seq", count + 1);
    if (!thread || !nt || json_object_set_new(c->threads, thread, nt))
        c->failed = 1;
    c->last_seq = r->seq;
    snprintf(c->last_message, sizeof c->last_message, "%s", r->id);
    json_decref(m);
    return c->failed;
}

static int report_cb(void *user, const struct vg_record *r)
{
    struct verify_ctx *c = user;
    json_t *s = json_pack("{s:s, s:I}", "to", r->id, "seq", (json_int_t)r->seq);
    if (!s || json_object_set_new(c->scopes, r->k1, s))
        c->failed = 1;
    return c->failed;
}

/* A stored pointer must name what the records say (`expect` {"to", "seq"}, NULL: unset). */
static void check_pointer(struct verify_ctx *c, const char *type, const char *key, json_t *expect)
{
    struct vg_pointer p;
    vigil_error err = {0};
    if (vg_pointer_read(c->env, type, key, &p, &err) != VIGIL_OK) {
        c->failed = 1;
        return;
    }
    if (!p.exists && !expect)
        return;
    if (!p.exists) {
        mismatch(c, "%s %s: missing, records say it points at %s", type, key,
                 json_string_value(json_object_get(expect, "to")));
        return;
    }
    if (!expect) {
        mismatch(c, "%s %s: points at %s but no record supports it", type, key, p.to);
        return;
    }
    const char *to = json_string_value(json_object_get(expect, "to"));
    json_int_t seq = json_integer_value(json_object_get(expect, "seq"));
    if (!to || strcmp(to, p.to) != 0)
        mismatch(c, "%s %s: points at %s, records say %s", type, key, p.to, to ? to : "none");
    if (seq != p.seq)
        mismatch(c, "%s %s: counter is %lld, records say %lld", type, key, (long long)p.seq,
                 (long long)seq);
}

/* Every thread-head pointer must belong to a thread the messages know. */
static int pointer_cb(void *user, const struct vg_record *r)
{
    struct verify_ctx *c = user;
    json_error_t je;
    json_t *l = json_loads(r->body, 0, &je);
    if (!l) {
        c->failed = 1;
        return 1;
    }
    const char *type = json_string_value(json_object_get(l, "type"));
    const char *from = json_string_value(json_object_get(l, "from"));
    size_t n = strlen(c->agent_id);
    /* Thread heads are keyed "<agent>:<thread>"; the agent's own head is keyed "<agent>". */
    if (type && !strcmp(type, "agent_head_message") && from && strlen(from) > n + 1 &&
        !json_object_get(c->threads, from + n + 1))
        mismatch(c, "thread head of %s exists but the thread has no messages", from + n + 1);
    json_decref(l);
    return 0;
}

vigil_code vg_spine_verify(struct vg_env *env, const char *agent_id, struct vg_buf *diff,
                           vigil_error *err)
{
    struct verify_ctx c = {.env = env, .agent_id = agent_id, .diff = diff};
    char state_id[201], key[512];
    json_t *agent = NULL, *expect = NULL;
    vigil_code rc = vg_agent_get(env, agent_id, &agent, NULL, err);
    if (rc)
        return rc;
    json_decref(agent);
    c.threads = json_object();
    c.scopes = json_object();
    if (!c.threads || !c.scopes) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory verifying agent \"%s\"", agent_id);
        goto out;
    }

    check_snapshot(&c, "agent", agent_id);
    if ((rc = vg_link_pointer_get(env, "agent_state", agent_id, state_id, sizeof state_id, err)))
        goto out;
    check_snapshot(&c, "agent_state", state_id);

    struct vg_query mq = {.kind = "message", .owner = agent_id};
    if ((rc = vg_store_scan(env->store, &mq, message_cb, &c, err)))
        goto out;
    const char *thread;
    json_t *t;
    json_object_foreach (c.threads, thread, t) {
        snprintf(key, sizeof key, "%s:%s", agent_id, thread);
        check_pointer(&c, "agent_head_message", key, t);
    }
    if (c.last_seq > 0)
        expect = json_pack("{s:s, s:I}", "to", c.last_message, "seq", (json_int_t)c.last_seq);
    check_pointer(&c, "agent_head_message", agent_id, expect);

    struct vg_query lq = {.kind = "link", .owner = agent_id};
    if ((rc = vg_store_scan(env->store, &lq, pointer_cb, &c, err)))
        goto out;

    struct vg_query rq = {.kind = "report", .owner = agent_id};
    if ((rc = vg_store_scan(env->store, &rq, report_cb, &c, err)))
        goto out;
    for (size_t i = 0; i < 4; i++) {
        static const char *const scopes[] = {"current", "daily", "weekly", "monthly"};
        snprintf(key, sizeof key, "%s:%s", agent_id, scopes[i]);
        check_pointer(&c, "agent_report_head", key, json_object_get(c.scopes, scopes[i]));
    }

    if (c.failed)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "could not read every record of agent \"%s\"", agent_id);
    else if (c.mismatches)
        rc = VG_FAIL(err, VIGIL_ECORRUPT,
                     "agent \"%s\": %d projection(s) differ from what the records rebuild",
                     agent_id, c.mismatches);
out:
    json_decref(expect);
    json_decref(c.threads);
    json_decref(c.scopes);
    return rc;
}
