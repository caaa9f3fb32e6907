/*
 * graph.c: the task graph over HTTP, as `vigil task ...` (cli/cmd-task.c,
 * docs/orchestration.md): GET /v1/tasks (?status=), GET /v1/tasks/graph, GET /v1/tasks/{task};
 * POST /v1/tasks (add), POST /v1/tasks/{task}/blocks/{blocked} (an edge),
 * POST /v1/tasks/{task}/cancel and POST /v1/tasks/dispatch.
 * An agent's lineage, GET /v1/agents/{agent}/tree, is vigil_agent_tree as it is (the route
 * table's by-id form). Kept apart from routes.c so the task routes stay one block.
 */
#include "base/common.h"

#include "http/http_int.h"

/* GET /v1/tasks?status=S: every task, oldest first (an unknown status is 400, naming the
 * valid ones). */
void vg_http_tasks_list(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    vigil_code rc = vigil_task_list(r->rt, vg_req_query(r, "status"), &out, &err);
    vg_req_answer(r, rc, out, &err);
}

/* GET /v1/tasks/graph: every task as a node and every "blocks" edge, as `vigil task graph`. */
void vg_http_tasks_graph(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    vigil_code rc = vigil_task_graph(r->rt, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

/* The task as it is now (200), after a write that succeeded. */
static void answer_task(struct vg_req *r, const char *id, int status)
{
    vigil_error err = {0};
    char *out = NULL;
    vigil_code rc = vigil_task_show(r->rt, id, &out, &err);
    if (rc) {
        vg_req_answer(r, rc, NULL, &err);
        return;
    }
    vg_req_json(r, status, out);
}

/* The strings of an optional array member (at most max): 0, or 1 when it is not one. */
static int string_list(json_t *body, const char *key, size_t max, const char **out, size_t *n)
{
    json_t *a = body ? json_object_get(body, key) : NULL;
    *n = json_array_size(a);
    if (a && (!json_is_array(a) || *n > max))
        return 1;
    for (size_t i = 0; i < *n; i++)
        if (!(out[i] = json_string_value(json_array_get(a, i))))
            return 1;
    return 0;
}

/* POST /v1/tasks {"title", "kind"?, "tags"?: [...], "blocks"?: [task ids]}: 201 with the new
 * task. */
void vg_http_task_add(struct vg_req *r)
{
    vigil_error err = {0};
    int bad = 0;
    const char *title = vg_req_str(r, "title", &bad), *kind = vg_req_str(r, "kind", &bad);
    const char *ids[100], *tags[16];
    char id[37];
    size_t n = 0, n_tags = 0;
    if (bad || !title || string_list(r->body, "blocks", 100, ids, &n) ||
        string_list(r->body, "tags", 16, tags, &n_tags)) {
        vg_req_error(r, VIGIL_EINVAL,
                     "send {\"title\": \"...\"} (and optionally \"kind\", \"tags\": an array of "
                     "at most 16 strings, \"blocks\": an array of at most 100 task ids)");
        return;
    }
    vigil_code rc = vigil_task_add_tagged(r->rt, title, kind, tags, n_tags, ids, n, id, &err);
    if (rc) {
        vg_req_fail(r, rc, &err);
        return;
    }
    answer_task(r, id, 201);
}

/* POST /v1/tasks/{task}/blocks/{blocked}: the edge "task blocks blocked"; one that would
 * close a cycle is 400, writing nothing. An edge already there changes nothing. */
void vg_http_task_block(struct vg_req *r)
{
    vigil_error err = {0};
    vigil_code rc = vigil_task_block(r->rt, r->params[0], r->params[1], &err);
    if (rc) {
        vg_req_fail(r, rc, &err);
        return;
    }
    answer_task(r, r->params[0], 200);
}

/* POST /v1/tasks/{task}/cancel: it and every task it blocks, transitively; an ended task is
 * 409. */
void vg_http_task_cancel(struct vg_req *r)
{
    vigil_error err = {0};
    vigil_code rc = vigil_task_cancel(r->rt, r->params[0], &err);
    if (rc) {
        vg_req_fail(r, rc, &err);
        return;
    }
    answer_task(r, r->params[0], 200);
}

/* POST /v1/tasks/dispatch {"slots"?: 1..1000}: start ready tasks; {"started": N}. */
void vg_http_task_dispatch(struct vg_req *r)
{
    vigil_error err = {0};
    int started = 0;
    json_t *slots = r->body ? json_object_get(r->body, "slots") : NULL;
    json_int_t n = json_integer_value(slots);
    if (slots && (!json_is_integer(slots) || n < 1 || n > 1000)) {
        vg_req_error(r, VIGIL_EINVAL, "\"slots\" is a number from 1 to 1000");
        return;
    }
    vigil_code rc = vigil_task_dispatch(r->rt, (int)n, &started, &err);
    if (rc) {
        vg_req_fail(r, rc, &err);
        return;
    }
    if (started && r->h->o.poke) /* the wakes it queued: the daemon looks now */
        r->h->o.poke(r->h->o.poke_user);
    vg_req_value(r, 200, json_pack("{s:i}", "started", started));
}
