/*
 * person.c: a person's edits of the task domain with what they mean for the task's agent, one
 * path for `vigil todo` and the daemon's HTTP routes (docs/todo.md): the change is applied,
 * the task agent follows its task (dormant when the task is deleted or concluded, active again
 * when it is restored, and a concluded task's follow-up gets an agent of its own), and the
 * change's tokens are raised with one more, person.OPERATION, which tells the woken agent what a
 * person did. Only include/vigil.h, as any embedding program would write it.
 */
#include "todo/todo_int.h"
#include "base/json.h"

/* The task agent's tools (S3-045), and get_task to read its task. */
#define TASK_AGENT_TOOLS                                                                           \
    "[\"get_task\",\"set_task_title\",\"update_task_estimate\",\"update_task_due_date\","          \
    "\"update_task_priority\",\"add_multiple_checklist_items\",\"update_checklist_items\","        \
    "\"set_report\",\"record_observations\"]"

/* The capabilities those tools need (S0-055): reading and editing its task and checklist. */
#define TASK_AGENT_CAPABILITIES "[\"taskRead\",\"taskWrite\",\"checklistWrite\"]"

static const char task_agent_prompt[] =
    "You look after one task of a person's to-do list: task %s. You wake when it changes; a "
    "token person.OPERATION among the changes says a person made that change (person.set_task_"
    "title: the title, person.add_multiple_checklist_items: new checklist items, ...), any other "
    "change came from a tool. Your wake input shows the task as it is now (get_task reads it "
    "again); improve what clearly needs it with your tools (a vague title, a missing estimate, "
    "checklist items that are done or missing); "
    "change nothing you are unsure of. Then write a short markdown report with set_report "
    "(scope current): where the task stands, what is left, what you changed and why. Keep "
    "private notes for your next wake with record_observations.";

/* The name of the task's agent: a name belongs to one live agent, so a task has at most one. */
static void agent_name(const char *task_id, char out[128])
{
    snprintf(out, 128, "task %s", task_id);
}

vigil_code vg_todo_agent_find(vigil_runtime *rt, const char *task_id, char id[64], int *found,
                              vigil_error *err)
{
    char name[128], *cursor = NULL;
    vigil_code rc = VIGIL_OK;
    agent_name(task_id, name);
    *found = 0;
    do {
        char *text = NULL;
        size_t i;
        json_t *a;
        if ((rc = vigil_agent_list(rt, cursor, 1000, &text, err)))
            break;
        json_t *page = json_loads(text, 0, NULL);
        vigil_free(text);
        free(cursor);
        cursor = NULL;
        json_array_foreach (json_object_get(page, "items"), i, a) {
            const char *n = json_string_value(json_object_get(a, "name"));
            const char *lc = json_string_value(json_object_get(a, "lifecycle"));
            if (!*found && n && !strcmp(n, name) && lc && strcmp(lc, "destroyed")) {
                snprintf(id, 64, "%s", json_string_value(json_object_get(a, "id")));
                *found = 1;
            }
        }
        const char *next = json_string_value(json_object_get(page, "next_cursor"));
        if (next && !*found && !(cursor = strdup(next)))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing agents");
        json_decref(page);
    } while (cursor);
    free(cursor);
    return rc;
}

vigil_code vg_todo_agent_create(vigil_runtime *rt, struct vg_todo *t, const char *task_id,
                                char id[37], vigil_error *err)
{
    char scope[256], name[128], prompt[1024], config[1024], spec_json[256];
    char *sub = NULL;
    /* The task's own scope, CATEGORY/TASK: the agent may touch its task and nothing else of
     * the category. */
    if (!vg_todo_scope_of(t, task_id, scope, sizeof scope))
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no task \"%s\"", task_id);
    agent_name(task_id, name);
    snprintf(prompt, sizeof prompt, task_agent_prompt, task_id);
    json_t *scopes = json_pack("[s]", scope);
    char *scopes_text = vg_json_dumps(scopes, JSON_COMPACT);
    json_decref(scopes);
    /* At most 5 model turns a wake (seed 003's maxTurns): 4 rounds of tools, then the turn the
     * loop's soft stop gives the model, without tools, to wrap up. */
    snprintf(config, sizeof config,
             "{\"tools\":" TASK_AGENT_TOOLS ",\"capabilities\":" TASK_AGENT_CAPABILITIES
             ",\"allowed_scopes\":%s,\"limits\":{\"max_tool_rounds\":4}}",
             scopes_text ? scopes_text : "[]");
    free(scopes_text);
    vigil_agent_spec spec = {.name = name,
                             .kind = "task_agent",
                             .mode = "autonomous",
                             .prompt = prompt,
                             .config_json = config};
    vigil_code rc = vigil_agent_create(rt, &spec, id, err);
    /* The task is what the agent relies on: a deletion finds its agents from it. */
    if (rc || (rc = vigil_source_ref_add(rt, id, "task", task_id, err)))
        return rc;
    /* Its active-task slot is the task (S3-044): what it works on, in its durable state. */
    json_t *slot = json_pack("{s:s}", "active_task", task_id);
    char *slot_text = slot ? vg_json_dumps(slot, JSON_COMPACT) : NULL;
    json_decref(slot);
    rc = slot_text ? vigil_agent_slots_set(rt, id, slot_text, err)
                   : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    vg_free(slot_text);
    if (rc)
        return rc;
    snprintf(spec_json, sizeof spec_json, "{\"id\":\"watch-%s\",\"tokens\":[\"%s\"]}", task_id,
             task_id);
    rc = vigil_subscription_add(rt, id, spec_json, &sub, err);
    vigil_free(sub);
    return rc;
}

/* Note in reply's "agents" what became of an agent (for the person: the CLI's stderr, the
 * HTTP answer). */
static void note_agent(json_t *notes, const char *id, const char *task_id, const char *lifecycle,
                       const char *reason)
{
    char name[128];
    json_t *list = json_object_get(notes, "agents");
    agent_name(task_id, name);
    if (!list) {
        list = json_array();
        json_object_set_new(notes, "agents", list);
    }
    json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:s}", "id", id, "name", name,
                                          "lifecycle", lifecycle, "reason", reason));
}

/* One agent turned dormant (retire) or active again, with the reason. An agent not in a state
 * to change is left as is. */
static void move_one(vigil_runtime *rt, const char *id, const char *task_id, int retire,
                     const char *reason, json_t *notes)
{
    vigil_error ignored = {0};
    vigil_code rc = retire ? vigil_agent_pause(rt, id, reason, &ignored)
                           : vigil_agent_resume(rt, id, reason, &ignored);
    /* A task agent that never ran is still `created`, which turns dormant only through active
     * (the lifecycle's diagram): that step is taken first. */
    if (retire && rc == VIGIL_ESTATE && !vigil_agent_resume(rt, id, reason, &ignored))
        rc = vigil_agent_pause(rt, id, reason, &ignored);
    if (!rc)
        note_agent(notes, id, task_id, retire ? "dormant" : "active", reason);
}

/* The task's agent, if it has one, and every other agent relying on the task (its source
 * references: an agent a program gave a reference to it), turned dormant or active again. */
static vigil_code move_agent(vigil_runtime *rt, const char *task_id, int retire, const char *why,
                             json_t *notes, int *found, vigil_error *err)
{
    char id[64], reason[256], *text = NULL;
    vigil_error ignored = {0};
    vigil_code rc = vg_todo_agent_find(rt, task_id, id, found, err);
    if (rc)
        return rc;
    snprintf(reason, sizeof reason, "its task %s %s", task_id, why);
    if (*found)
        move_one(rt, id, task_id, retire, reason, notes);
    json_t *ids = NULL, *one;
    size_t i;
    if (!vigil_source_ref_agents(rt, "task", task_id, &text, &ignored))
        ids = json_loads(text, 0, NULL);
    vigil_free(text);
    json_array_foreach (ids, i, one)
        if (json_is_string(one) && !(*found && !strcmp(json_string_value(one), id)))
            move_one(rt, json_string_value(one), task_id, retire, reason, notes);
    json_decref(ids);
    return VIGIL_OK;
}

/* After a conclusion: the task's agent retires, and when the open items went to a follow-up,
 * the follow-up gets an agent of its own, which the change's tokens (they name the follow-up)
 * wake to look at it. The retired agent keeps its report, memory and history. */
static vigil_code hand_over(vigil_runtime *rt, struct vg_todo *t, const char *task_id,
                            const json_t *result, json_t *notes, vigil_error *err)
{
    const char *next = json_string_value(json_object_get(result, "follow_up_task_id"));
    char id[37], reason[200];
    int had = 0;
    vigil_code rc = move_agent(rt, task_id, 1,
                               next ? "is done: its follow-up has an agent of its own" : "is done",
                               notes, &had, err);
    if (rc || !had || !next)
        return rc;
    if ((rc = vg_todo_agent_create(rt, t, next, id, err)))
        return rc;
    snprintf(reason, sizeof reason, "looks after %s, the follow-up of %s", next, task_id);
    note_agent(notes, id, next, "created", reason);
    return VIGIL_OK;
}

/* Whether the task is open: a restored task that was done or cancelled keeps its agent
 * retired, as concluding left it. */
static int task_is_open(struct vg_todo *t, const char *task_id)
{
    sqlite3_stmt *st = NULL;
    vigil_error ignored = {0};
    int open = 0;
    pthread_mutex_lock(&t->lock);
    if (!todo_prepare(t, "SELECT status FROM tasks WHERE id = ?", &st, &ignored, "s", task_id)) {
        open = sqlite3_step(st) == SQLITE_ROW &&
               !strcmp((const char *)sqlite3_column_text(st, 0), "open");
        sqlite3_finalize(st);
    }
    pthread_mutex_unlock(&t->lock);
    return open;
}

/* Raise the reply's tokens and person.OP: the woken agent reads what a person did. */
static vigil_code raise_tokens(vigil_runtime *rt, const char *op, const json_t *reply,
                               vigil_error *err)
{
    char who[128];
    json_t *marked = json_deep_copy(reply);
    if (!marked)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory raising a change");
    snprintf(who, sizeof who, "person.%s", op);
    json_array_append_new(json_object_get(marked, "changed_tokens"), json_string(who));
    vigil_code rc = vg_todo_notify(rt, marked, err);
    json_decref(marked);
    return rc;
}

vigil_code vg_todo_person_apply(vigil_runtime *rt, struct vg_todo *t, const char *op,
                                const json_t *args, json_t **reply, vigil_error *err)
{
    const char *task = json_string_value(json_object_get(args, "task_id"));
    int deleting = !strcmp(op, "delete_task"), restoring = !strcmp(op, "restore_task");
    char scope[256];
    int had = 0;
    vigil_code rc = VIGIL_OK;
    json_t *moved = json_object();
    *reply = NULL;
    if (!moved)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    /* The agent of a task being deleted turns dormant before the change, so no wake of it acts
     * on a task that is gone; only a task that is there (delete) or deleted (restore) moves it. */
    if (task && deleting && vg_todo_scope_of(t, task, scope, sizeof scope))
        rc = move_agent(rt, task, 1, "was deleted", moved, &had, err);
    if (!rc)
        rc = vg_todo_apply(t, op, NULL, args, reply, err);
    if (rc || json_object_get(*reply, "error"))
        goto out;
    if (restoring && task_is_open(t, task))
        rc = move_agent(rt, task, 0, "is back", moved, &had, err);
    else if (!strcmp(op, "conclude_task_with_rollover"))
        rc = hand_over(rt, t, task, json_object_get(*reply, "result"), moved, err);
    if (!rc)
        rc = raise_tokens(rt, op, *reply, err);
out:
    if (*reply && json_object_get(moved, "agents"))
        json_object_set(*reply, "agents", json_object_get(moved, "agents"));
    json_decref(moved);
    return rc;
}

/* The task's agent, when it has one, into task as "agent": {id, name, lifecycle}. */
static vigil_code add_task_agent(vigil_runtime *rt, json_t *task, vigil_error *err)
{
    char id[64], *text = NULL;
    int found = 0;
    vigil_code rc = vg_todo_agent_find(rt, json_string_value(json_object_get(task, "task_id")), id,
                                       &found, err);
    if (rc || !found || (rc = vigil_agent_show(rt, id, &text, err)))
        return rc;
    json_t *shown = json_loads(text, 0, NULL), *a = json_object_get(shown, "agent");
    vigil_free(text);
    json_object_set_new(task, "agent",
                        json_pack("{s:O?, s:O?, s:O?}", "id", json_object_get(a, "id"), "name",
                                  json_object_get(a, "name"), "lifecycle",
                                  json_object_get(a, "lifecycle")));
    json_decref(shown);
    return VIGIL_OK;
}

vigil_code vg_todo_person_read(vigil_runtime *rt, struct vg_todo *t, const char *op,
                               const json_t *args, json_t **reply, vigil_error *err)
{
    vigil_code rc = vg_todo_apply(t, op, NULL, args, reply, err);
    json_t *result = rc ? NULL : json_object_get(*reply, "result");
    if (result && !strcmp(op, "get_task") && (rc = add_task_agent(rt, result, err))) {
        json_decref(*reply);
        *reply = NULL;
    }
    return rc;
}
