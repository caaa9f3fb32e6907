/*
 * judge.c: the model the task dispatcher asks when its rules tie (docs/orchestration.md,
 * "Picking the agent"; the orchestrator's side is src/orch/judge.c). Configured by
 * `dispatch.judge_model` (or VIGIL_DISPATCH_JUDGE_MODEL): a model id of the configured
 * provider, so a cheaper model than the agents' may answer, or `default` for the provider's
 * own. Without it no model is asked and the rules' first agent takes the task.
 */
#include "base/common.h"

#include "config/config.h"
#include "model/model.h"
#include "orch/task.h"
#include "runtime/runtime_int.h"

#define JUDGE_MAX_TOKENS 64

static const char *judge_model(vigil_runtime *rt)
{
    return rt->config ? vg_config_get_string(rt->config, "dispatch.judge_model", NULL) : NULL;
}

/* Looked at once a runtime: the config is read here if nothing read it yet (a config that
 * cannot be read has no judge; the command that needs the config says what is wrong). */
static int judge_on(void *user)
{
    vigil_runtime *rt = user;
    vigil_error err = {0};
    if (!rt->judge_state) {
        if (!rt->config)
            (void)vg_config_load(rt->config_path, &rt->config, &err);
        const char *m = judge_model(rt);
        rt->judge_state = m && *m ? 2 : 1;
    }
    return rt->judge_state == 2;
}

/* The question as the model reads it: the task, then one line per tied agent. */
static void ask_text(struct vg_buf *b, json_t *q)
{
    json_t *task = json_object_get(q, "task"), *c;
    size_t i;
    vg_buf_printf(b, "Task: %s\n", json_string_value(json_object_get(task, "title")));
    if (json_string_length(json_object_get(task, "kind")))
        vg_buf_printf(b, "Kind of agent: %s\n", json_string_value(json_object_get(task, "kind")));
    vg_buf_puts(b, "Agents that could take it (equally free):\n");
    json_array_foreach (json_object_get(q, "candidates"), i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        const char *desc = json_string_value(json_object_get(c, "description"));
        vg_buf_printf(b, "- id %s, name %s, %d run(s) queued or running%s%s\n",
                      json_string_value(json_object_get(c, "id")), name ? name : "?",
                      (int)json_integer_value(json_object_get(c, "load")),
                      desc && *desc ? ": " : "", desc ? desc : "");
    }
}

/* A failed run's triage: the task, the attempt and the error. */
static void triage_text(struct vg_buf *b, json_t *q)
{
    json_t *task = json_object_get(q, "task"), *tr = json_object_get(q, "triage");
    vg_buf_printf(b,
                  "Task: %s\nIts run (attempt %lld of %d) on agent %s failed: %s\nAnswer RETRY to "
                  "run it again, or FAIL to give it up (the tasks waiting for it are then "
                  "cancelled).\n",
                  json_string_value(json_object_get(task, "title")),
                  (long long)json_integer_value(json_object_get(tr, "attempt")),
                  VG_TASK_MAX_RETRIES + 1, json_string_value(json_object_get(tr, "agent")),
                  json_string_value(json_object_get(tr, "error")));
}

/* "fail" or "retry" as the answer's first of the two words says, "" when it says neither. */
static const char *decision_of(const char *text)
{
    const char *f = strcasestr(text, "fail"), *r = strcasestr(text, "retry");
    if (f && (!r || f < r))
        return "fail";
    return r ? "retry" : "";
}

/* The candidate the answer names first, by id or by name; "" when it names none. */
static const char *named(json_t *q, const char *text)
{
    const char *best = "", *hit;
    size_t at = (size_t)-1, i;
    json_t *c;
    json_array_foreach (json_object_get(q, "candidates"), i, c) {
        const char *keys[2] = {json_string_value(json_object_get(c, "id")),
                               json_string_value(json_object_get(c, "name"))};
        for (int k = 0; k < 2; k++)
            if (keys[k] && *keys[k] && (hit = strstr(text, keys[k])) && (size_t)(hit - text) < at) {
                at = (size_t)(hit - text);
                best = keys[0];
            }
    }
    return best;
}

static vigil_code judge_ask(void *user, json_t *q, json_t **answer, vigil_error *err)
{
    vigil_runtime *rt = user;
    struct vg_buf text;
    struct vg_model_response *resp = NULL;
    vigil_code rc = vg_runtime_prepare_model(rt, err);
    if (rc)
        return rc;
    const char *model = judge_model(rt);
    int triage = json_object_get(q, "triage") != NULL;
    vg_buf_init(&text, 64 << 10);
    if (triage)
        triage_text(&text, q);
    else
        ask_text(&text, q);
    struct vg_model_message m = {.role = VG_MODEL_USER, .text = text.data};
    struct vg_model_request req = {
        .model = model && strcmp(model, "default") ? model : NULL,
        .system = triage ? "A task's run failed. Decide whether to run it again. Answer RETRY or "
                           "FAIL, and nothing else."
                         : "You assign a task to one of several agents. Answer with the id of the "
                           "agent best suited to it, and nothing else.",
        .messages = &m,
        .n_messages = 1,
        .max_tokens = JUDGE_MAX_TOKENS};
    if (!(rc = vg_buf_finish(&text, err)) &&
        !(rc = vg_model_complete(rt->model, &req, &resp, err))) {
        const char *said = resp->text ? resp->text : "";
        const char *by = resp->model ? resp->model
                         : req.model ? req.model
                                     : vg_model_default_model(rt->model);
        *answer = json_pack("{s:s, s:s, s:s, s:s, s:I}", "agent", triage ? "" : named(q, said),
                            "decision", triage ? decision_of(said) : "", "model", by ? by : "",
                            "text", said, "tokens",
                            (json_int_t)(resp->usage.input_tokens + resp->usage.output_tokens));
        if (!*answer)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading the judge's answer");
    }
    vg_model_response_free(resp);
    vg_buf_release(&text);
    return rc;
}

void vg_runtime_judge_wire(vigil_runtime *rt)
{
    rt->env.task_judge_on = judge_on;
    rt->env.task_judge_ask = judge_ask;
    rt->env.task_judge_user = rt;
}
