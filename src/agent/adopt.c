/*
 * adopt.c: records another device wrote, once multi-device sync (src/sync) has stored them here,
 * taken into this store's projections: a message moves its thread's head and the agent's head
 * (the agent's message counter) when it sorts last, a report its scope's head, a new agent gets
 * its idle runtime state and a new state its pointer. The projections are never sent: each
 * device derives them from the records it holds, so devices holding the same records agree
 * (docs/internals/SYNC.md, "Pointers are projections").
 */
#include "base/common.h"

#include "agent/agent_int.h"

/* Whether (seq_a, id_a) sorts after (seq_b, id_b): the order a thread is read in. */
static int sorts_after(int64_t seq_a, const char *id_a, int64_t seq_b, const char *id_b)
{
    return seq_a > seq_b || (seq_a == seq_b && strcmp(id_a, id_b) > 0);
}

struct seq_ctx {
    int64_t seq;
};

static int seq_cb(void *user, const struct vg_record *r)
{
    ((struct seq_ctx *)user)->seq = r->seq;
    return 1;
}

/* The message number of the message `id` (0 when this store does not hold it). */
static vigil_code message_number(struct vg_env *env, const char *id, int64_t *out, vigil_error *err)
{
    struct seq_ctx c = {0};
    vigil_error miss = {0};
    vigil_code rc = vg_error_unless_missing(
        err, &miss, vg_store_get(env->store, "message", id, seq_cb, &c, &miss));
    *out = c.seq;
    return rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc;
}

/* A message new to this store: the agent's head counts it as a Lamport clock counts an event it
 * hears of (the next local message numbers above it), and the thread's head names whichever of
 * its messages sorts last. A thread's head counts its messages. */
static vigil_code adopt_message(struct vg_env *env, const struct vg_record *r, vigil_error *err)
{
    struct vg_pointer agent_head, thread_head;
    char thread_key[256];
    if (vg_join(thread_key, sizeof thread_key, r->owner, ':', r->k1) < 0)
        return VG_FAIL(err, VIGIL_EINVAL, "thread id of message \"%s\" is too long", r->id);
    vigil_code rc = vg_pointer_read(env, "agent_head_message", r->owner, &agent_head, err);
    if (!rc && (!agent_head.exists || sorts_after(r->seq, r->id, agent_head.seq, agent_head.to)))
        rc = vg_pointer_write(env, r->owner, "agent_head_message", r->owner, r->id, r->seq,
                              &agent_head, err);
    if (!rc)
        rc = vg_pointer_read(env, "agent_head_message", thread_key, &thread_head, err);
    if (rc)
        return rc;
    const char *to = r->id;
    if (thread_head.exists) {
        int64_t head_number = 0;
        if ((rc = message_number(env, thread_head.to, &head_number, err)))
            return rc;
        if (!sorts_after(r->seq, r->id, head_number, thread_head.to))
            to = thread_head.to;
    }
    return vg_pointer_write(env, r->owner, "agent_head_message", thread_key, to,
                            thread_head.exists ? thread_head.seq + 1 : 1, &thread_head, err);
}

/* A report new to this store: its scope's head names the report that sorts last, and its counter
 * (the next report's number) stays at the highest. */
static vigil_code adopt_report(struct vg_env *env, const struct vg_record *r, vigil_error *err)
{
    struct vg_pointer head;
    char key[256];
    if (vg_join(key, sizeof key, r->owner, ':', r->k1) < 0)
        return VG_FAIL(err, VIGIL_EINVAL, "scope of report \"%s\" is too long", r->id);
    vigil_code rc = vg_pointer_read(env, "agent_report_head", key, &head, err);
    if (!rc && (!head.exists || sorts_after(r->seq, r->id, head.seq, head.to)))
        rc = vg_pointer_write(env, r->owner, "agent_report_head", key, r->id, r->seq, &head, err);
    return rc;
}

/* A subscription's token index follows its body: dropped and written again. */
static vigil_code adopt_subscription(struct vg_env *env, const struct vg_record *r,
                                     vigil_error *err)
{
    json_t *body = json_loads(r->body, 0, NULL);
    vigil_code rc = body ? vg_sub_index_drop(env, r->id, err)
                         : VG_FAIL(err, VIGIL_ECORRUPT, "subscription \"%s\" is not JSON", r->id);
    if (!rc)
        rc = vg_sub_index_put(env, r->id, r->owner, json_object_get(body, "tokens"), err);
    json_decref(body);
    return rc;
}

vigil_code vg_spine_adopt_change(struct vg_env *env, const struct vg_record *r, vigil_error *err)
{
    return strcmp(r->kind, "subscription") ? VIGIL_OK : adopt_subscription(env, r, err);
}

vigil_code vg_spine_adopt_removal(struct vg_env *env, const char *kind, const char *id,
                                  vigil_error *err)
{
    return strcmp(kind, "subscription") ? VIGIL_OK : vg_sub_index_drop(env, id, err);
}

vigil_code vg_spine_adopt(struct vg_env *env, const struct vg_record *r, vigil_error *err)
{
    if (!strcmp(r->kind, "subscription"))
        return adopt_subscription(env, r, err);
    if (!strcmp(r->kind, "message"))
        return adopt_message(env, r, err);
    if (!strcmp(r->kind, "report"))
        return adopt_report(env, r, err);
    if (!strcmp(r->kind, "agent"))
        return vg_agent_runtime_put_idle(env, r->id, err);
    if (!strcmp(r->kind, "agent_state"))
        return vg_pointer_set(env, r->owner, "agent_state", r->owner, r->id, 0, err);
    return VIGIL_OK;
}
