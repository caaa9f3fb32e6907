/*
 * judge.c: the dispatcher's judge (docs/orchestration.md, "Picking the agent"). When the rules
 * (kind and tags, then load) leave several agents tied for a ready task and a judge model is
 * configured, the round leaves the task ready and its caller asks here, outside any
 * transaction: the question names the task and the tied agents, the model answers with one of
 * them, and the answer is recorded in the task (`judgement`) before the next round follows it.
 * A failed or unusable answer is recorded too, and the rules decide: a task is judged once.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "base/json.h"
#include "orch/orch_int.h"
#include "orch/task.h"

#define JUDGE_TEXT_MAX 500

/* What the judge is told of one tied agent. */
static json_t *candidate(struct vg_env *env, const char *id, const struct vg_task_pool *p)
{
    json_t *a = NULL, *tags;
    int load = 0;
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->c[i].id, id))
            load = p->c[i].load;
    if (vg_agent_get(env, id, &a, NULL, NULL))
        return json_pack("{s:s, s:i}", "id", id, "load", load);
    const char *prompt = json_string_value(json_object_get(a, "prompt"));
    size_t n = prompt ? strcspn(prompt, "\n") : 0;
    tags = json_object_get(json_object_get(a, "config"), "tags");
    json_t *c =
        json_pack("{s:s, s:O, s:O, s:O, s:s%, s:i}", "id", id, "name", json_object_get(a, "name"),
                  "kind", json_object_get(a, "kind"), "tags", tags ? tags : json_null(),
                  "description", prompt ? prompt : "", n > 300 ? (size_t)300 : n, "load", load);
    json_decref(a);
    return c;
}

static json_t *question(struct vg_env *env, json_t *task, json_t *ids, const struct vg_task_pool *p)
{
    json_t *tags = json_object_get(task, "tags");
    json_t *q =
        json_pack("{s:{s:O, s:O, s:O, s:O}, s:[]}", "task", "id", json_object_get(task, "id"),
                  "title", json_object_get(task, "title"), "kind", json_object_get(task, "kind"),
                  "tags", tags ? tags : json_null(), "candidates");
    size_t i;
    json_t *id;
    json_array_foreach (ids, i, id)
        if (!q || json_array_append_new(json_object_get(q, "candidates"),
                                        candidate(env, json_string_value(id), p))) {
            json_decref(q);
            return NULL;
        }
    return q;
}

static int among(json_t *ids, const char *agent)
{
    size_t i;
    json_t *id;
    json_array_foreach (ids, i, id)
        if (agent && !strcmp(json_string_value(id), agent))
            return 1;
    return 0;
}

/* The judgement as recorded: the model's choice when it named a candidate, else "" and why. */
static json_t *judgement(struct vg_env *env, json_t *ids, json_t *answer, vigil_code asked,
                         const vigil_error *jerr)
{
    const char *agent = json_string_value(json_object_get(answer, "agent"));
    const char *text = json_string_value(json_object_get(answer, "text"));
    size_t n = text ? strlen(text) : 0;
    const char *why = asked ? jerr->message
                      : !among(ids, agent)
                          ? "the answer named none of the candidates: the rules decided"
                          : NULL;
    json_t *j =
        json_pack("{s:s, s:O, s:s%, s:O, s:O, s:I}", "agent", why ? "" : agent, "model",
                  answer ? json_object_get(answer, "model") : json_null(), "text", text ? text : "",
                  n > JUDGE_TEXT_MAX ? (size_t)JUDGE_TEXT_MAX : n, "candidates", ids, "tokens",
                  answer ? json_object_get(answer, "tokens") : json_null(), "at_ms",
                  (json_int_t)vg_env_now(env));
    if (j && why)
        json_object_set_new(j, "error", json_string(why));
    return j;
}

/* Move the task, if it is still ready at the version the question read, to `to` with patch
 * (borrowed) merged in; a task given up ("failed") cancels what it blocks. */
static vigil_code record(struct vg_env *env, const char *id, int64_t version, json_t *patch,
                         const char *to, vigil_error *err)
{
    json_t *t = NULL;
    int64_t now_version = 0;
    vigil_code rc = patch ? vg_store_begin(env->store, err)
                          : VG_FAIL(err, VIGIL_ENOMEM, "out of memory judging a task");
    if (rc)
        return rc;
    if (!(rc = vg_task_graph_lock(env, err)) &&
        !(rc = vg_task_get(env, id, &t, &now_version, err)) && now_version == version &&
        !strcmp(json_string_value(json_object_get(t, "status")), "ready")) {
        rc = vg_task_move(env, t, version, to, patch, err);
        if (!rc && !strcmp(to, "failed"))
            rc = vg_task_after_failed(env, id, "a task it waits for failed", err);
    }
    json_decref(t);
    return vg_store_end(env->store, rc, err);
}

int vg_task_triage_pending(json_t *task)
{
    return json_is_true(json_object_get(json_object_get(task, "triage"), "pending"));
}

/* The triage as recorded: the decision ("retry" when the answer gave none), the model, its
 * words, and why the rules decided when they did. */
static int triage_answered(json_t *triage, json_t *answer, vigil_code asked,
                           const vigil_error *jerr, const char *decision)
{
    const char *text = json_string_value(json_object_get(answer, "text"));
    json_t *model = json_object_get(answer, "model");
    text = text ? text : "";
    return json_object_set_new(triage, "pending", json_false()) ||
           json_object_set_new(triage, "decision", json_string(*decision ? decision : "retry")) ||
           json_object_set(triage, "model", model ? model : json_null()) ||
           json_object_set_new(triage, "text",
                               json_stringn(text, vg_utf8_cut(text, strlen(text), 500))) ||
           (!*decision &&
            json_object_set_new(triage, "error",
                                json_string(asked ? jerr->message
                                                  : "the answer said neither RETRY nor FAIL: the "
                                                    "rules retry")));
}

static vigil_code triage_one(struct vg_env *env, json_t *t, int64_t version, vigil_error *err)
{
    json_t *q = json_pack("{s:{s:O, s:O, s:O}, s:O}", "task", "id", json_object_get(t, "id"),
                          "title", json_object_get(t, "title"), "kind", json_object_get(t, "kind"),
                          "triage", json_object_get(t, "triage"));
    json_t *answer = NULL, *triage = json_deep_copy(json_object_get(t, "triage"));
    vigil_error jerr = {0};
    vigil_code asked = q && triage ? env->task_judge_ask(env->task_judge_user, q, &answer, &jerr)
                                   : VG_FAIL(&jerr, VIGIL_ENOMEM, "out of memory asking the judge");
    const char *decision = asked ? NULL : json_string_value(json_object_get(answer, "decision"));
    decision =
        decision && (!strcmp(decision, "fail") || !strcmp(decision, "retry")) ? decision : "";
    /* "fail" gives the task up now (failed, what it blocks cancelled); "retry", or anything
     * else (a failed or unclear answer: the rules' retry), lets it run again */
    int give_up = !strcmp(decision, "fail");
    json_t *patch = triage ? json_pack("{s:O}", "triage", triage) : NULL;
    if (patch && give_up)
        json_object_set_new(patch, "reason",
                            json_string("the judge gave it up after a failed run"));
    vigil_code rc = !patch || triage_answered(triage, answer, asked, &jerr, decision)
                        ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory judging a task")
                        : record(env, json_string_value(json_object_get(t, "id")), version, patch,
                                 give_up ? "failed" : "ready", err);
    json_decref(patch);
    json_decref(q);
    json_decref(answer);
    json_decref(triage);
    return rc;
}

static vigil_code judge_one(struct vg_env *env, struct vg_wake *w, const char *id, vigil_error *err)
{
    json_t *t = NULL, *ids = NULL, *q = NULL, *answer = NULL, *j = NULL;
    int64_t version = 0;
    struct vg_task_pool p = {0};
    vigil_error jerr = {0};
    vigil_code rc = vg_task_get(env, id, &t, &version, err);
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK;
    if (!rc && !strcmp(json_string_value(json_object_get(t, "status")), "ready") &&
        vg_task_triage_pending(t)) {
        rc = triage_one(env, t, version, err);
        goto out;
    }
    if (rc || strcmp(json_string_value(json_object_get(t, "status")), "ready") ||
        json_object_get(t, "judgement"))
        goto out; /* moved on, or judged already */
    if ((rc = vg_task_pool_tied(env, w, &p, t, &ids, err)))
        goto out;
    vigil_code asked = VIGIL_EINVAL;
    if (json_array_size(ids) < 2) /* recorded all the same: the next round must not wait again */
        (void)VG_FAIL(&jerr, VIGIL_EINVAL,
                      "no tie any more when the judge was to be asked: the rules decided");
    else if (!(q = question(env, t, ids, &p)))
        (void)VG_FAIL(&jerr, VIGIL_ENOMEM, "out of memory asking the judge");
    else
        asked = env->task_judge_ask(env->task_judge_user, q, &answer, &jerr);
    json_t *patch =
        (j = judgement(env, ids, answer, asked, &jerr)) ? json_pack("{s:O}", "judgement", j) : NULL;
    rc = record(env, id, version, patch, "ready", err);
    json_decref(patch);
out:
    vg_task_pool_clear(&p);
    json_decref(t);
    json_decref(ids);
    json_decref(q);
    json_decref(answer);
    json_decref(j);
    return rc;
}

vigil_code vg_task_judge_deferred(struct vg_env *env, struct vg_wake *w, json_t *ids,
                                  vigil_error *err)
{
    size_t i;
    json_t *id;
    vigil_code rc = VIGIL_OK;
    if (!env->task_judge_ask)
        return VIGIL_OK;
    json_array_foreach (ids, i, id)
        if (!rc)
            rc = judge_one(env, w, json_string_value(id), err);
    return rc;
}
