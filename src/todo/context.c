/*
 * context.c: the task domain's context for a wake (vigil_set_wake_context): an agent that
 * relies on a task (its source reference "task", as `vigil todo agent` records it) wakes with
 * the task as it is now, in full (fields, checklist, time spent, follow-ups), its linked tasks
 * (the one it follows up, its follow-ups) with the latest report of each one's agent, the
 * entities of its task among the tokens that woke it (the delta, highlighted), and what to do
 * with them: a first report and observations at its first wake, an update at the later ones
 * (seed 003 sections 4.4, 5.3 to 5.5). Only include/vigil.h, as an embedding program writes it.
 */
#include "todo/todo_int.h"

#include "base/buf.h"
#include "base/json.h"

/* The longest report of a linked task given in full; a longer one is cut, saying so. */
#define LINKED_REPORT_MAX 1000

/* A person's read (get_task) of id: its result (owned), or NULL when it is not there. */
static json_t *read_task(struct vg_todo *t, const char *id)
{
    json_t *args = json_pack("{s:s}", "task_id", id), *reply = NULL, *out = NULL;
    vigil_error ignored = {0};
    if (args && !vg_todo_apply(t, "get_task", NULL, args, &reply, &ignored))
        out = json_incref(json_object_get(reply, "result"));
    json_decref(args);
    json_decref(reply);
    return out;
}

/* The current report's markdown of the agent (owned), or NULL when it has none. */
static char *current_report(vigil_runtime *rt, const char *agent_id)
{
    char *text = NULL, *md = NULL;
    vigil_error ignored = {0};
    if (vigil_report_get(rt, agent_id, "current", 0, &text, &ignored))
        return NULL;
    json_t *v = json_loads(text, 0, NULL);
    vigil_free(text);
    const char *s = json_string_value(json_object_get(json_object_get(v, "report"), "markdown"));
    md = s ? strdup(s) : NULL;
    json_decref(v);
    return md;
}

/* A linked task as {task_id, title, status, link, latest_report} (owned): latest_report is its
 * agent's current report, cut to LINKED_REPORT_MAX bytes, or null. */
static json_t *linked(vigil_runtime *rt, const json_t *task, const char *link)
{
    const char *id = json_string_value(json_object_get(task, "task_id"));
    char agent[64];
    int found = 0;
    vigil_error ignored = {0};
    char *report = NULL;
    if (id && !vg_todo_agent_find(rt, id, agent, &found, &ignored) && found)
        report = current_report(rt, agent);
    if (report && strlen(report) > LINKED_REPORT_MAX)
        snprintf(report + LINKED_REPORT_MAX - 6, 7, " [cut]");
    json_t *o = json_pack("{s:s?, s:O?, s:O?, s:s, s:s?}", "task_id", id, "title",
                          json_object_get(task, "title"), "status", json_object_get(task, "status"),
                          "link", link, "latest_report", report);
    free(report);
    return o;
}

/* The task's linked tasks: the one it follows up, then its follow-ups (owned array). */
static json_t *linked_tasks(vigil_runtime *rt, struct vg_todo *t, const json_t *task)
{
    json_t *out = json_array(), *one;
    size_t i;
    const char *parent = json_string_value(json_object_get(task, "follow_up_of"));
    json_t *p = parent ? read_task(t, parent) : NULL;
    if (p)
        json_array_append_new(out, linked(rt, p, "this task follows it up"));
    json_decref(p);
    json_array_foreach (json_object_get(task, "follow_ups"), i, one)
        json_array_append_new(out, linked(rt, one, "a follow-up of this task"));
    return out;
}

/* Whether tok names the task or an entity of it (an item, a time entry, a linked task). */
static int of_task(const json_t *task, const char *tok)
{
    static const char *const lists[] = {"checklist", "time_entries"};
    size_t i;
    json_t *one;
    if (!strcmp(tok, json_string_value(json_object_get(task, "task_id"))))
        return 1;
    for (size_t l = 0; l < VG_ARRAY_LEN(lists); l++)
        json_array_foreach (json_object_get(task, lists[l]), i, one)
            if (!strcmp(tok, json_string_value(json_object_get(one, "id"))))
                return 1;
    json_array_foreach (json_object_get(task, "follow_ups"), i, one)
        if (!strcmp(tok, json_string_value(json_object_get(one, "task_id"))))
            return 1;
    const char *parent = json_string_value(json_object_get(task, "follow_up_of"));
    return parent && !strcmp(tok, parent);
}

/* The context's text (owned) for an agent's task as it is now. */
static char *task_text(vigil_runtime *rt, struct vg_todo *t, const char *agent_id, json_t *task,
                       const char *const *tokens, size_t n)
{
    json_t *changed = json_array(), *links = linked_tasks(rt, t, task);
    for (size_t i = 0; changed && i < n; i++)
        if (tokens[i] && of_task(task, tokens[i]))
            json_array_append_new(changed, json_string(tokens[i]));
    char *task_json = vg_json_dumps(task, JSON_COMPACT),
         *links_json = vg_json_dumps(links, JSON_COMPACT),
         *changed_json = vg_json_dumps(changed, JSON_COMPACT),
         *report = current_report(rt, agent_id);
    struct vg_buf b;
    vg_buf_init(&b, 0);
    vg_buf_printf(&b,
                  "Your task as it is now: %s\nLinked tasks, with the latest report of each one's "
                  "agent: %s\n",
                  task_json ? task_json : "{}", links_json ? links_json : "[]");
    if (json_array_size(changed))
        vg_buf_printf(&b, "Changed in your task since your last wake: %s\n", changed_json);
    else
        vg_buf_puts(&b, "Nothing of your task itself is among the changes.\n");
    vg_buf_puts(&b, report ? "Your report and observations of earlier wakes are in your context: "
                             "update the report with set_report for what changed, and record new "
                             "observations with record_observations."
                           : "This is your first wake: you have no report yet. Write an initial "
                             "report of the task with set_report, and record what you notice "
                             "with record_observations.");
    vg_free(task_json), vg_free(links_json), vg_free(changed_json), free(report);
    json_decref(changed);
    json_decref(links);
    char *out = vg_buf_detach(&b, NULL);
    if (!out)
        vg_buf_release(&b);
    return out;
}

static int wake_context(void *user, vigil_runtime *rt, const char *agent_id,
                        const char *const *tokens, size_t n_tokens, char **out_text)
{
    struct vg_todo *t = user;
    char *refs = NULL, *text = NULL;
    vigil_error ignored = {0};
    *out_text = NULL;
    if (vigil_source_refs(rt, agent_id, "task", &refs, &ignored))
        return 0;
    json_t *list = json_loads(refs, 0, NULL);
    vigil_free(refs);
    const char *task_id = json_string_value(json_object_get(json_array_get(list, 0), "source_id"));
    json_t *task = task_id ? read_task(t, task_id) : NULL;
    json_decref(list);
    if (!task)
        return 0; /* not a task's agent, or its task is gone: nothing to add */
    text = task_text(rt, t, agent_id, task, tokens, n_tokens);
    json_decref(task);
    /* vigil frees the text with free(): hand it a copy made by malloc. */
    *out_text = text ? strdup(text) : NULL;
    vg_free(text);
    return 0;
}

void vg_todo_set_wake_context(vigil_runtime *rt, struct vg_todo *t)
{
    vigil_set_wake_context(rt, wake_context, t);
}
