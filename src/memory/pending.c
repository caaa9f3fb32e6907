/*
 * pending.c: pending mutations of familiar blocks and their resolution by a human.
 *
 * Resolution is one transaction: the mutation's status moves (revision-guarded, so two
 * resolvers cannot both win), the block changes on approval, the event is written, and a system
 * message tells the agent in its default thread. The mutation then waits as "undelivered" until
 * the loop takes the outcome (vg_memory_outcomes_take), so an outcome reaches the agent once
 * even across restarts. Resolving twice the same way returns the stored outcome.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "memory/memory_int.h"

vigil_code vg_memory_pending_list(struct vg_memory *m, const char *agent_id, json_t **out,
                                  vigil_error *err)
{
    json_t *items = json_array();
    if (!items)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing pending mutations");
    struct vg_query q = {.kind = "memory_pending", .owner = agent_id, .k1 = "pending"};
    vigil_code rc = vg_memory_collect(m, &q, items, err);
    if (rc) {
        json_decref(items);
        return rc;
    }
    *out = items;
    return VIGIL_OK;
}

static vigil_code tell_agent(struct vg_memory *m, json_t *p, vigil_error *err)
{
    char thread[VG_RECORD_ID_MAX];
    const char *agent = vg_memory_str(p, "agent_id");
    const char *status = vg_memory_str(p, "status");
    struct vg_buf text;
    vg_buf_init(&text, 8192);
    if (strcmp(status, "approved") == 0)
        vg_buf_printf(&text, "The human approved your %s of memory block \"%s\"; it is applied.",
                      vg_memory_str(p, "op"), vg_memory_str(p, "label"));
    else
        vg_buf_printf(&text,
                      "The human rejected your %s of memory block \"%s\"; the block is "
                      "unchanged. Their feedback: %.4000s",
                      vg_memory_str(p, "op"), vg_memory_str(p, "label"),
                      vg_memory_str(p, "reason"));
    vigil_code rc = vg_buf_finish(&text, err);
    json_t *meta = json_pack("{s:s, s:s, s:s}", "memory_pending_id", vg_memory_str(p, "id"),
                             "status", status, "label", vg_memory_str(p, "label"));
    if (!rc && !meta)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory telling the agent");
    if (!rc) {
        vg_memory_default_thread(agent, thread);
        struct vg_message_in in = {.agent_id = agent,
                                   .thread_id = thread,
                                   .kind = VG_MSG_SYSTEM,
                                   .content = text.data,
                                   .metadata = meta};
        rc = vg_message_append(m->env, &in, NULL, err);
    }
    json_decref(meta);
    vg_buf_release(&text);
    return rc;
}

static vigil_code resolve(struct vg_memory *m, const char *pending_id, int approve,
                          const char *reason, const char *actor, json_t **out, vigil_error *err)
{
    const char *want = approve ? "approved" : "rejected";
    if (!pending_id || !*pending_id)
        return VG_FAIL(err, VIGIL_EINVAL, "no pending change id given");
    if (!approve && (!reason || !*reason))
        return VG_FAIL(err, VIGIL_EINVAL, "a rejection needs a reason for the agent");
    for (int attempt = 0; attempt < 8; attempt++) {
        json_t *p = NULL, *block = NULL, *extra = NULL;
        int64_t prev = 0, brev = 0;
        char *content = NULL;
        float *vec = NULL;
        vigil_error local = {0};
        vigil_code rc = vg_env_get_json(m->env, "memory_pending", pending_id, &p, &prev, &local);
        if (rc == VIGIL_ENOTFOUND)
            return VG_FAIL(err, VIGIL_ENOTFOUND,
                           "no pending change \"%s\" (vigil memory pending lists them)",
                           pending_id);
        if (rc) {
            vg_error_copy(err, &local);
            return rc;
        }
        const char *status = vg_memory_str(p, "status");
        if (strcmp(status, "pending") != 0) {
            if (strcmp(status, want) == 0) { /* already resolved this way: idempotent */
                json_object_set_new(p, "already", json_true()); /* said, never stored */
                if (out)
                    *out = p;
                else
                    json_decref(p);
                return VIGIL_OK;
            }
            rc = VG_FAIL(err, VIGIL_ESTATE, "the change \"%s\" was already %s", pending_id, status);
            json_decref(p);
            return rc;
        }
        const char *agent = vg_memory_str(p, "agent_id"), *label = vg_memory_str(p, "label");
        const char *op = vg_memory_str(p, "op");
        if (approve) {
            rc = vg_memory_read_block(m, agent, label, &block, &brev, &local);
            if (rc == VIGIL_ENOTFOUND)
                rc = VG_FAIL(&local, VIGIL_ESTATE,
                             "memory block \"%s\" no longer exists: reject the change instead",
                             label);
            if (!rc && strcmp(op, "append") == 0)
                content = vg_memory_join(vg_memory_str(block, "content"), vg_memory_str(p, "text"));
            else if (!rc && strcmp(op, "write") == 0)
                content = vg_strdup(vg_memory_str(p, "text"));
            if (!rc && strcmp(op, "delete") != 0 && !content)
                rc = VG_FAIL(&local, VIGIL_ENOMEM, "out of memory applying a change");
            if (!rc && content)
                vec = vg_memory_embed_text(m, label, content);
        }
        char at[32];
        vg_time_format_ms(at, vg_env_now(m->env));
        if (!rc && (json_object_set_new(p, "status", json_string(want)) ||
                    json_object_set_new(p, "resolved_at", json_string(at)) ||
                    json_object_set_new(p, "resolved_by", json_string(actor ? actor : "human")) ||
                    json_object_set_new(p, "delivery", json_string("undelivered")) ||
                    (reason && json_object_set_new(p, "reason", json_string(reason)))))
            rc = VG_FAIL(&local, VIGIL_ENOMEM, "out of memory resolving a change");
        if (!rc && !(extra = json_pack("{s:s, s:s, s:s, s:s?}", "pending_id", pending_id, "op", op,
                                       "actor", actor ? actor : "human", "reason", reason)))
            rc = VG_FAIL(&local, VIGIL_ENOMEM, "out of memory resolving a change");
        if (!rc && !(rc = vg_store_begin(m->env->store, &local))) {
            struct vg_record *cur = NULL;
            rc = vg_store_get_copy(m->env->store, "memory_pending", pending_id, &cur, &local);
            if (!rc)
                rc = vg_env_update_json(m->env, "memory_pending", pending_id, agent, want,
                                        "undelivered", cur->seq, p, prev, &local);
            vg_free(cur);
            if (!rc && approve && strcmp(op, "delete") == 0) {
                /* Deleting goes through the block's own removal so vectors and index follow. */
                rc = vg_store_remove(m->env->store, "memory_block", vg_memory_str(block, "id"),
                                     &local);
                if (!rc)
                    rc = vg_memory_event(m, agent, vg_memory_str(block, "id"), label, "approved",
                                         vg_memory_str(block, "content"), NULL, extra, &local);
                if (!rc)
                    rc = vg_store_text_index(m->env->store, "memory_block",
                                             vg_memory_str(block, "id"), agent, NULL, &local);
                if (!rc) {
                    vigil_code r2 = vg_store_remove(m->env->store, "memory_vector",
                                                    vg_memory_str(block, "id"), &local);
                    if (r2 && r2 != VIGIL_ENOTFOUND)
                        rc = r2;
                    else if (!r2)
                        rc = vg_memory_meta_bump(m, agent, 1, NULL, &local);
                }
            } else if (!rc && approve) {
                rc = vg_memory_apply(m, block, brev, content, "approved", extra, vec, &local);
            } else if (!rc) {
                rc = vg_memory_event(m, agent, vg_memory_str(p, "block_id"), label, "rejected",
                                     vg_memory_str(p, "old_content"),
                                     strcmp(op, "delete") ? vg_memory_str(p, "text") : NULL, extra,
                                     &local);
            }
            if (!rc)
                rc = tell_agent(m, p, &local);
            rc = vg_store_end(m->env->store, rc, &local);
        }
        json_decref(block);
        json_decref(extra);
        vg_free(content);
        vg_free(vec);
        if (rc == VIGIL_ECONFLICT) {
            json_decref(p);
            continue; /* the mutation or the block moved: decide again */
        }
        if (rc) {
            json_decref(p);
            vg_error_copy(err, &local);
            return rc;
        }
        if (out)
            *out = p;
        else
            json_decref(p);
        return VIGIL_OK;
    }
    return VG_FAIL(err, VIGIL_EBUSY, "pending mutation \"%s\" keeps changing: try again",
                   pending_id);
}

vigil_code vg_memory_approve(struct vg_memory *m, const char *pending_id, const char *actor,
                             json_t **out, vigil_error *err)
{
    return resolve(m, pending_id, 1, NULL, actor, out, err);
}

vigil_code vg_memory_reject(struct vg_memory *m, const char *pending_id, const char *reason,
                            const char *actor, json_t **out, vigil_error *err)
{
    return resolve(m, pending_id, 0, reason, actor, out, err);
}

vigil_code vg_memory_outcomes_take(struct vg_memory *m, const char *agent_id, json_t **out,
                                   vigil_error *err)
{
    json_t *found = json_array(), *items = json_array();
    vigil_code rc = VIGIL_OK;
    if (!found || !items) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading outcomes");
        goto out;
    }
    struct vg_query q = {
        .kind = "memory_pending", .owner = agent_id, .k2 = "undelivered", .limit = 100};
    int64_t undelivered = 0;
    /* Asked at every run's start, and nearly always none: a read says so without the write
     * transaction (its lock, its commit) that taking them needs. */
    if ((rc = vg_store_count(m->env->store, &q, &undelivered, err)) || undelivered == 0 ||
        (rc = vg_store_begin(m->env->store, err)))
        goto out;
    rc = vg_memory_collect(m, &q, found, err);
    for (size_t i = 0; !rc && i < json_array_size(found); i++) {
        json_t *p = json_array_get(found, i);
        const char *id = vg_memory_str(p, "id");
        struct vg_record *cur = NULL;
        rc = vg_store_get_copy(m->env->store, "memory_pending", id, &cur, err);
        if (rc)
            break;
        if (json_object_set_new(p, "delivery", json_string("delivered")))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading outcomes");
        if (!rc)
            rc = vg_env_update_json(m->env, "memory_pending", id, agent_id, cur->k1, "delivered",
                                    cur->seq, p, cur->rev, err);
        vg_free(cur);
        const char *status = vg_memory_str(p, "status");
        json_t *o =
            json_pack("{s:s, s:s, s:s, s:s, s:s?, s:s?}", "pending_id", id, "label",
                      vg_memory_str(p, "label"), "status", status, "op", vg_memory_str(p, "op"),
                      "reason", json_string_value(json_object_get(p, "reason")), "new_content",
                      json_string_value(json_object_get(p, "text")));
        if (!rc && (!o || json_array_append_new(items, o)))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading outcomes");
        else if (rc)
            json_decref(o);
    }
    rc = vg_store_end(m->env->store, rc, err);
out:
    json_decref(found);
    if (rc) {
        json_decref(items);
        return rc;
    }
    *out = items;
    return VIGIL_OK;
}
