/*
 * todo.c: the task domain's person routes under /v1/todo/ (docs/http.md, docs/todo.md): what
 * `vigil todo` does for a person (add, edit, checklist items, conclude, delete, restore, show,
 * list), for an application's backend. Each edit goes through the domain's one path for
 * people, vg_todo_person_apply, as the command does: the same change in tasks.db, the same
 * agent moves (a deleted or concluded task's agent dormant, a follow-up's agent made), the same
 * tokens raised, and the daemon poked to run the wakes they queue. Not /v1/tasks, which is
 * the orchestrator's task graph (docs/orchestration.md).
 */
#include "base/common.h"

#include "http/http_int.h"
#include "todo/todo.h"

/* The domain's database, or an answer saying it is off (NULL). */
static struct vg_todo *domain(struct vg_req *r)
{
    if (!r->h->o.todo)
        vg_req_error(r, VIGIL_ENOTFOUND,
                     "the task domain is off: its database is made by the first `vigil todo` "
                     "command (a category: `vigil todo category add ID`), and `vigil serve` "
                     "takes it at its next start");
    return r->h->o.todo;
}

/* A domain reply as the answer: its result (with "agents" when one moved) with ok_status, or
 * its refusal: 404 for a task or category that is not there, else 400 with the message. */
static void answer(struct vg_req *r, json_t *reply, int ok_status)
{
    json_t *fault = json_object_get(reply, "error"), *result = json_object_get(reply, "result");
    if (fault) {
        vg_req_error(
            r, json_is_true(json_object_get(fault, "missing")) ? VIGIL_ENOTFOUND : VIGIL_EINVAL,
            json_string_value(json_object_get(fault, "message")));
    } else {
        json_t *out = json_is_object(result) ? json_deep_copy(result) : json_object();
        if (json_object_get(reply, "agents"))
            json_object_set(out, "agents", json_object_get(reply, "agents"));
        vg_req_value(r, ok_status, out);
    }
    json_decref(reply);
}

/* Apply a person's edit op with args (taken); the reply (owned), or NULL after an answer. */
static json_t *edit(struct vg_req *r, struct vg_todo *t, const char *op, json_t *args)
{
    vigil_error err = {0};
    json_t *reply = NULL;
    vigil_code rc = args ? vg_todo_person_apply(r->rt, t, op, args, &reply, &err)
                         : VG_FAIL(&err, VIGIL_ENOMEM, "out of memory");
    json_decref(args);
    if (rc) {
        vg_req_fail(r, rc, &err);
        return NULL;
    }
    /* The wakes the change queued run now, not at the daemon's next poll. */
    if (!json_object_get(reply, "error") && r->h->o.poke)
        r->h->o.poke(r->h->o.poke_user);
    return reply;
}

static void one_edit(struct vg_req *r, const char *op, json_t *args, int ok_status)
{
    struct vg_todo *t = domain(r);
    json_t *reply = t ? edit(r, t, op, args) : NULL;
    if (!t)
        json_decref(args);
    if (reply)
        answer(r, reply, ok_status);
}

/* A copy of the body (an empty object without one), with more members set by the caller. */
static json_t *body_copy(struct vg_req *r)
{
    return r->body ? json_deep_copy(r->body) : json_object();
}

/* POST /v1/todo/categories/{category}/tasks {title, estimate_minutes?, due_date?, priority?} */
void vg_http_todo_add(struct vg_req *r)
{
    json_t *args = body_copy(r);
    json_object_set_new(args, "category_id", json_string(r->params[0]));
    one_edit(r, "create_task", args, r->route->ok_status);
}

/* GET /v1/todo/categories/{category}/tasks?status=open|done|cancelled|all */
void vg_http_todo_list(struct vg_req *r)
{
    vigil_error err = {0};
    struct vg_todo *t = domain(r);
    const char *status = vg_req_query(r, "status");
    json_t *reply = NULL;
    if (!t)
        return;
    json_t *args =
        json_pack("{s:s, s:s}", "category_id", r->params[0], "status", status ? status : "open");
    vigil_code rc = vg_todo_person_read(r->rt, t, "list_tasks_in_scope", args, &reply, &err);
    json_decref(args);
    if (rc)
        vg_req_fail(r, rc, &err);
    else
        answer(r, reply, 200);
}

/* GET /v1/todo/tasks/{task}: the task in full, with its agent when it has one. */
void vg_http_todo_show(struct vg_req *r)
{
    vigil_error err = {0};
    struct vg_todo *t = domain(r);
    json_t *reply = NULL;
    if (!t)
        return;
    json_t *args = json_pack("{s:s}", "task_id", r->params[0]);
    vigil_code rc = vg_todo_person_read(r->rt, t, "get_task", args, &reply, &err);
    json_decref(args);
    if (rc)
        vg_req_fail(r, rc, &err);
    else
        answer(r, reply, 200);
}

/* POST /v1/todo/tasks/{task} {title?, estimate_minutes?, due_date?, priority?}: each field a
 * change of its own (its own tokens), as `vigil todo edit`; the answer lists their results.
 * The first refused stops the rest. */
void vg_http_todo_edit(struct vg_req *r)
{
    static const char *const fields[][2] = {{"title", "set_task_title"},
                                            {"estimate_minutes", "update_task_estimate"},
                                            {"due_date", "update_task_due_date"},
                                            {"priority", "update_task_priority"}};
    struct vg_todo *t = domain(r);
    json_t *results = json_array(), *reply = NULL;
    if (!t || !results) {
        json_decref(results);
        if (t)
            vg_req_error(r, VIGIL_ENOMEM, NULL);
        return;
    }
    for (size_t i = 0; i < VG_ARRAY_LEN(fields); i++) {
        json_t *v = r->body ? json_object_get(r->body, fields[i][0]) : NULL;
        if (!v)
            continue;
        reply = edit(r, t, fields[i][1],
                     json_pack("{s:s, s:O}", "task_id", r->params[0], fields[i][0], v));
        if (!reply || json_object_get(reply, "error"))
            goto out;
        json_array_append(results, json_object_get(reply, "result"));
        json_decref(reply);
        reply = NULL;
    }
    if (!json_array_size(results))
        vg_req_error(r, VIGIL_EINVAL,
                     "an edit names one of title, estimate_minutes, due_date, priority");
    else
        vg_req_value(r, 200, json_pack("{s:s, s:O}", "task_id", r->params[0], "results", results));
out:
    if (reply)
        answer(r, reply, 200); /* the refusal */
    json_decref(results);
}

/* POST /v1/todo/tasks/{task}/items {items: [TEXT, ...]} */
void vg_http_todo_items_add(struct vg_req *r)
{
    json_t *args = body_copy(r);
    json_object_set_new(args, "task_id", json_string(r->params[0]));
    one_edit(r, "add_multiple_checklist_items", args, r->route->ok_status);
}

/* POST /v1/todo/tasks/{task}/items/{item} {text?, done?} */
void vg_http_todo_item_edit(struct vg_req *r)
{
    json_t *item = body_copy(r);
    json_object_set_new(item, "id", json_string(r->params[1]));
    one_edit(r, "update_checklist_items",
             json_pack("{s:s, s:[o]}", "task_id", r->params[0], "items", item), 200);
}

/* POST /v1/todo/tasks/{task}/conclude {follow_up_title?} */
void vg_http_todo_conclude(struct vg_req *r)
{
    json_t *args = body_copy(r);
    json_object_set_new(args, "task_id", json_string(r->params[0]));
    one_edit(r, "conclude_task_with_rollover", args, 200);
}

/* DELETE /v1/todo/tasks/{task} and POST /v1/todo/tasks/{task}/restore */
void vg_http_todo_delete_restore(struct vg_req *r)
{
    one_edit(r, strcmp(r->method, "DELETE") ? "restore_task" : "delete_task",
             json_pack("{s:s}", "task_id", r->params[0]), 200);
}
