/*
 * summarize_model.c: the LLM summarizer: one model call with the fixed prompt contract
 * (vg_summary_prompt) and the span as a transcript. The compaction worker falls back to the
 * extractive summarizer when this one keeps failing or is refused (rate limit, budget).
 */
#include "base/common.h"

#include "memory/compact.h"
#include "memory/memory_int.h"
#include "model/model.h"

#define TRANSCRIPT_MAX (96 * 1024)

static vigil_code model_summarize(struct vg_summarizer *s, json_t *messages, int depth,
                                  int max_tokens, char **out, vigil_error *err)
{
    struct vg_summarizer_model *sm = (struct vg_summarizer_model *)s;
    char system[1024];
    snprintf(system, sizeof system, vg_summary_prompt, max_tokens);
    struct vg_buf t;
    vg_buf_init(&t, TRANSCRIPT_MAX + 1024);
    vg_buf_printf(&t, depth >= 2 ? "Summaries of consecutive spans, oldest first:\n"
                                 : "Conversation span, oldest first:\n");
    size_t per = TRANSCRIPT_MAX / (json_array_size(messages) + 1);
    for (size_t i = 0; i < json_array_size(messages); i++) {
        json_t *m = json_array_get(messages, i);
        const char *c = vg_memory_str(m, "content");
        vg_buf_printf(&t, "\n[%s] %.*s", vg_memory_str(m, "kind"),
                      (int)(strlen(c) < per ? strlen(c) : per), c);
    }
    vigil_code rc = vg_buf_finish(&t, err);
    struct vg_model_response *r = NULL;
    if (!rc) {
        struct vg_model_message msg = {.role = VG_MODEL_USER, .text = t.data};
        struct vg_model_request req = {.system = system,
                                       .messages = &msg,
                                       .n_messages = 1,
                                       .max_tokens = max_tokens + max_tokens / 4,
                                       .tool_choice = VG_MODEL_TOOL_CHOICE_NONE};
        rc = vg_model_complete(sm->model, &req, &r, err);
    }
    if (!rc && (!r->text || !*r->text))
        rc = VG_FAIL(err, VIGIL_EPROVIDER, "the model returned an empty summary");
    if (!rc && !(*out = vg_strdup(r->text)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory summarizing");
    vg_model_response_free(r);
    vg_buf_release(&t);
    return rc;
}

static const struct vg_summarizer_methods model_methods = {
    .version = 1,
    .name = "model",
    .summarize = model_summarize,
};

void vg_summarizer_model_init(struct vg_summarizer_model *s, struct vg_model *model)
{
    s->base.methods = &model_methods;
    s->model = model;
}
