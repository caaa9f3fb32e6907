/*
 * graph.c: the task graph over HTTP, read: GET /v1/tasks (?status=), GET /v1/tasks/graph and
 * GET /v1/tasks/{task}, as `vigil task list|graph|show` (cli/cmd-task.c, docs/orchestration.md).
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

/* The graph of a task list: {"nodes":[{id, title, status, kind, agent}], "edges":[{from, to}]},
 * an edge "from blocks to". NULL when memory ran out. */
static json_t *graph_of(json_t *tasks)
{
    json_t *nodes = json_array(), *edges = json_array(), *t, *b;
    size_t i, j;
    json_array_foreach (tasks, i, t) {
        json_array_append_new(
            nodes,
            json_pack("{s:O?, s:O?, s:O?, s:O?, s:O?}", "id", json_object_get(t, "id"), "title",
                      json_object_get(t, "title"), "status", json_object_get(t, "status"), "kind",
                      json_object_get(t, "kind"), "agent", json_object_get(t, "agent")));
        json_array_foreach (json_object_get(t, "blocks"), j, b)
            json_array_append_new(
                edges, json_pack("{s:O?, s:O}", "from", json_object_get(t, "id"), "to", b));
    }
    if (nodes && edges && json_array_size(nodes) == json_array_size(tasks))
        return json_pack("{s:o, s:o}", "nodes", nodes, "edges", edges);
    json_decref(nodes);
    json_decref(edges);
    return NULL;
}

/* GET /v1/tasks/graph: every task as a node and every "blocks" edge, as `vigil task graph`. */
void vg_http_tasks_graph(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    vigil_code rc = vigil_task_list(r->rt, NULL, &out, &err);
    if (rc) {
        vg_req_answer(r, rc, out, &err);
        return;
    }
    json_t *tasks = json_loads(out, 0, NULL);
    vigil_free(out);
    json_t *g = tasks ? graph_of(tasks) : NULL;
    json_decref(tasks);
    if (!g) {
        vg_req_error(r, VIGIL_ENOMEM, "out of memory building the task graph");
        return;
    }
    vg_req_value(r, 200, g);
}
