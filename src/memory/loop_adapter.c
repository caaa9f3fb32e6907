/*
 * loop_adapter.c: memory for the agent loop. The context prefix follows docs/memory.md: the
 * agent's prompt and core blocks, the current report, the observation notes, the loaded working
 * blocks, the summaries of older spans and the latest summaries of the agent's other threads,
 * within the token budget vg_memory_assemble keeps.
 * The loop keeps the hot messages itself (its in-memory window), so the assembler is asked for
 * none here.
 */
#include "base/common.h"

#include "embed/embed.h"
#include "memory/compact.h"
#include "memory/loop_adapter.h"
#include "memory/memory.h"

struct vg_memory_loop {
    struct vg_env *env;
    struct vg_embedder *emb;
    struct vg_memory *m;
    struct vg_compaction_policy policy;
};

vigil_code vg_memory_loop_new(struct vg_env *env, struct vg_embedder *emb,
                              struct vg_memory_loop **out, vigil_error *err)
{
    struct vg_memory_loop *ml = vg_calloc(1, sizeof *ml);
    if (!ml) {
        vg_embed_close(emb);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory opening memory");
    }
    ml->env = env;
    ml->emb = emb;
    vigil_code rc = vg_memory_new(env, ml->emb, &ml->m, err);
    if (rc) {
        vg_memory_loop_free(ml);
        return rc;
    }
    vg_compact_keep_tallies(env, &ml->policy);
    *out = ml;
    return VIGIL_OK;
}

void vg_memory_loop_free(struct vg_memory_loop *ml)
{
    if (!ml)
        return;
    vg_memory_free(ml->m);
    vg_embed_close(ml->emb);
    vg_free(ml);
}

vigil_code vg_memory_loop_embed_pending(struct vg_memory_loop *ml, int max, int *done,
                                        vigil_error *err)
{
    int n = 0;
    vigil_code rc = vg_memory_embed_pending(ml->m, NULL, max, &n, err);
    if (done)
        *done = n;
    return rc;
}

static int found_one(void *user, const struct vg_record *r)
{
    (void)r;
    *(int *)user = 1;
    return 1;
}

vigil_code vg_memory_loop_work_waiting(struct vg_memory_loop *ml, int *waiting, vigil_error *err)
{
    /* What vg_compact_claim takes (pending, or running past its lease) and embed_pending reads. */
    int64_t now = vg_env_now(ml->env);
    struct vg_query q[] = {
        {.kind = "compaction_job", .k2 = "pending", .has_seq_max = 1, .seq_max = now, .limit = 1},
        {.kind = "compaction_job", .k2 = "running", .has_seq_max = 1, .seq_max = now, .limit = 1},
        {.kind = "memory_embed_todo", .limit = 1}};
    *waiting = 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(q) && !*waiting; i++) {
        vigil_code rc = vg_store_scan(ml->env->store, &q[i], found_one, waiting, err);
        if (rc)
            return rc;
    }
    return VIGIL_OK;
}

/* The default session already got its system message when the person decided; other threads
 * learn of it at their next run. */
static int is_default_session(const char *agent_id, const char *thread_id)
{
    char def[VG_RECORD_ID_MAX];
    snprintf(def, sizeof def, "%s:session:default", agent_id);
    return strcmp(def, thread_id) == 0;
}

static vigil_code start(void *self, struct vg_env *env, const char *agent_id, const char *thread_id,
                        json_t **notes, vigil_error *err)
{
    struct vg_memory_loop *ml = self;
    json_t *outcomes = NULL, *list = json_array();
    int seeded = 0;
    vigil_error ignore = {0};
    if (!list)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting memory");
    /* First run: seed the core blocks from the persona file. A missing persona file leaves the
     * agent with its prompt alone; it is not a reason to refuse the run. */
    vg_memory_seed(ml->m, agent_id, NULL, &seeded, &ignore);
    vigil_code rc = vg_memory_outcomes_take(ml->m, agent_id, &outcomes, err);
    for (size_t i = 0; !rc && i < json_array_size(outcomes); i++) {
        if (is_default_session(agent_id, thread_id))
            break;
        json_t *o = json_array_get(outcomes, i);
        const char *label = json_string_value(json_object_get(o, "label"));
        const char *status = json_string_value(json_object_get(o, "status"));
        const char *reason = json_string_value(json_object_get(o, "reason"));
        struct vg_buf b;
        vg_buf_init(&b, 0);
        vg_buf_printf(&b, "A person %s your change to memory block \"%s\"%s%s.",
                      status ? status : "resolved", label ? label : "?", reason ? ": " : "",
                      reason ? reason : "");
        if (!b.fail && json_array_append_new(list, json_string(b.data)))
            b.fail = VIGIL_ENOMEM;
        rc = vg_buf_finish(&b, err);
        vg_buf_release(&b);
    }
    json_decref(outcomes);
    if (rc) {
        json_decref(list);
        return rc;
    }
    *notes = list;
    return VIGIL_OK;
}

static void section_list(struct vg_buf *b, const char *title, json_t *items, const char *field,
                         const char *label_field)
{
    if (!json_array_size(items))
        return;
    vg_buf_printf(b, "\n\n# %s\n", title);
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *it = json_array_get(items, i);
        const char *text = json_string_value(json_object_get(it, field));
        const char *label =
            label_field ? json_string_value(json_object_get(it, label_field)) : NULL;
        if (label)
            vg_buf_printf(b, "<memory label=\"%s\">\n%s\n</memory>\n", label, text ? text : "");
        else
            vg_buf_printf(b, "- %s\n", text ? text : "");
    }
}

static vigil_code prefix(void *self, struct vg_env *env, const char *agent_id,
                         const char *thread_id, const char *prompt, char **out, vigil_error *err)
{
    struct vg_memory_loop *ml = self;
    struct vg_context ctx = {0};
    /* The loop keeps its own window of the thread's messages: none from here. */
    struct vg_assemble_opts o = {.agent_id = agent_id, .thread_id = thread_id, .hot_max = -1};
    vigil_code rc = vg_memory_assemble(ml->m, &o, &ctx, err);
    if (rc)
        return rc;
    struct vg_buf b;
    vg_buf_init(&b, 0);
    vg_buf_puts(&b, ctx.system ? ctx.system : "");
    if (ctx.report)
        vg_buf_printf(&b, "\n\n# Your current report\n%s", ctx.report);
    section_list(&b, "Your notes from earlier wakes", ctx.observations, "content", NULL);
    section_list(&b, "Working memory", ctx.working, "content", "label");
    section_list(&b, "Summaries of earlier conversation", ctx.summaries, "content", NULL);
    section_list(&b, "Summaries of your other conversations", ctx.prior, "content", NULL);
    if (json_array_size(ctx.evicted))
        vg_buf_printf(&b, "\n\n(%zu working blocks were left out to fit the context.)",
                      json_array_size(ctx.evicted));
    rc = vg_buf_finish(&b, err);
    if (!rc && !(*out = vg_buf_detach(&b, NULL)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory assembling context");
    vg_buf_release(&b);
    vg_context_release(&ctx);
    return rc;
}

/* The thread's compaction budget follows the run's context (half of it, as the default 51,200
 * is half of 0.8 x 128k) unless the policy sets one: with a small model's window the turns
 * that left it went unsummarized until 51,200 tokens piled up, so the model knew neither them
 * nor a summary of them (trial K6). */
static vigil_code after_run(void *self, struct vg_env *env, const char *agent_id,
                            const char *thread_id, int64_t context_tokens, vigil_error *err)
{
    struct vg_memory_loop *ml = self;
    struct vg_compaction_policy policy = ml->policy;
    char job[VG_RECORD_ID_MAX] = "";
    if (policy.thread_budget <= 0 && context_tokens > 0)
        policy.thread_budget = context_tokens / 2;
    return vg_compact_consider(env, agent_id, thread_id, &policy, job, err);
}

void vg_memory_loop_interface(struct vg_memory_loop *ml, struct vg_loop_memory *out)
{
    *out = (struct vg_loop_memory){
        .self = ml, .start = start, .prefix = prefix, .after_run = after_run};
}

void vg_memory_loop_hold(struct vg_memory_loop *ml, vg_compact_hold_fn hold)
{
    ml->policy.hold = hold;
}

vigil_code vg_memory_loop_compact(struct vg_memory_loop *ml, struct vg_model *model, int max,
                                  void *hold_user, int *ran, vigil_error *err)
{
    struct vg_summarizer_model sm;
    struct vg_compaction_policy policy = ml->policy; /* this pass's: fibers share ml */
    int n = 0;
    policy.hold_user = hold_user;
    if (model)
        vg_summarizer_model_init(&sm, model);
    for (int i = 0; i < max; i++) {
        int one = 0;
        vigil_code rc = vg_compact_run_one(ml->env, model ? &sm.base : NULL, &policy, &one, err);
        if (rc)
            return rc;
        if (!one)
            break;
        n++;
    }
    if (ran)
        *ran = n;
    return VIGIL_OK;
}
