/*
 * todo.h: the reference host domain (DESIGN 3.14, docs/todo.md): a small task domain kept in
 * an SQLite database of its own (tasks.db), apart from the agent store. Categories, tasks
 * (title, estimate, due date, priority, status), each task's checklist items, time entries,
 * day plans with blocks, and ratings.
 *
 * Not part of libvigil: a static library the command links (like src/mcpserve). It is an
 * embedding of the public API: its operations become tools through vigil_tool_register, the
 * category of a target comes from vigil_tool_set_scope_resolver, and a person's edits raise
 * their tokens through vigil_notify. It uses include/vigil.h, src/base and src/os (clock, ids),
 * nothing else of vigil.
 *
 * Every change answers by the tool reply protocol (docs/tools.md): {"result": ...,
 * "changed_entity_ids": [...], "changed_tokens": [...]} or {"error": {"code", "message"}}. The
 * tokens are the changed entities' ids and the semantic keys TASK, CHECKLIST, TIME_ENTRY,
 * DAY_PLAN and RATING.
 */
#ifndef VG_TODO_H
#define VG_TODO_H

#include "base/common.h"

#include <jansson.h>

struct vg_clock;
struct vg_ids;
struct vg_todo;

/* Open (create_if_missing: creating) the task database at path. clock and ids are borrowed
 * (NULL: the real ones); they give entity ids and the times a change records. */
vigil_code vg_todo_open(const char *path, int create_if_missing, struct vg_clock *clock,
                        struct vg_ids *ids, struct vg_todo **out, vigil_error *err);
void vg_todo_close(struct vg_todo *t);

/*
 * Apply one operation (a tool's name, or a person's: create_category, create_task, rate_task) with
 * its arguments (borrowed), in one transaction of the task database. *reply (owned) is the reply
 * object. operation_id (NULL: a person's edit) is recorded with the change in that transaction:
 * a second apply with the same id changes nothing and answers the first reply, so a tool call
 * retried after a crash never applies twice. A refused change (unknown entity, bad argument)
 * is an "error" reply, not a vigil_code; the return value reports only the database's failure.
 */
vigil_code vg_todo_apply(struct vg_todo *t, const char *op, const char *operation_id,
                         const json_t *args, json_t **reply, vigil_error *err);

/* 1 if the change with this operation id was applied (its reply in *reply, owned, when asked). */
vigil_code vg_todo_applied(struct vg_todo *t, const char *operation_id, int *found, json_t **reply,
                           vigil_error *err);

/* The scope of an entity (a task, or a checklist item's task) into out, CATEGORY/TASK_ID: an
 * agent allowed the category may touch every task of it, one allowed CATEGORY/TASK_ID that
 * task alone (docs/tools.md). 1, or 0 when the entity is unknown. The scope resolver of the
 * domain's tools. */
int vg_todo_scope_of(struct vg_todo *t, const char *entity_id, char *out, size_t n);

/* Register the domain's tools on rt (and its scope resolver and wake context, which take the
 * runtime's one slot of each). t is borrowed and must outlive rt's use of the tools. */
vigil_code vg_todo_register_tools(vigil_runtime *rt, struct vg_todo *t, vigil_error *err);

/* Raise a reply's tokens (its changed ids and keys) on rt: a person's edit wakes the agents
 * subscribed to what it changed. An error reply raises nothing. */
vigil_code vg_todo_notify(vigil_runtime *rt, const json_t *reply, vigil_error *err);

/*
 * A person's edit (a tool's operation or a person's own: create_task, delete_task, ...) with
 * args (borrowed) on t, and what it means for the task's agent (the one named "task TASK_ID",
 * vg_todo_agent_create's): a task being deleted turns its agent dormant first, a restored one
 * makes it active again, a concluded one retires it (dormant) and gives the follow-up, if the
 * open items made one, an agent of its own. Then the change's tokens are raised on rt, with
 * person.OP besides, so the woken agent reads what a person did. *reply (owned): the domain's
 * reply (a refusal is an "error" reply, "missing": true when what it names is not there), with
 * "agents": [{id, name, lifecycle, reason}] for each agent it moved or made. The one path of
 * `vigil todo` and the daemon's HTTP routes.
 */
vigil_code vg_todo_person_apply(vigil_runtime *rt, struct vg_todo *t, const char *op,
                                const json_t *args, json_t **reply, vigil_error *err);

/* A person's read (get_task, list_tasks_in_scope) with args (borrowed): *reply (owned) as
 * vg_todo_apply's, get_task's result with "agent": {id, name, lifecycle} when the task has one
 * (no member when it has none). */
vigil_code vg_todo_person_read(vigil_runtime *rt, struct vg_todo *t, const char *op,
                               const json_t *args, json_t **reply, vigil_error *err);

/* A task agent for task_id (docs/todo.md): kind task_agent, autonomous, named "task TASK_ID",
 * allowed the task's scope alone, subscribed to the task. Its id into id. ENOTFOUND (no such
 * task), EEXISTS (the task has one), and vigil_agent_create's errors. */
vigil_code vg_todo_agent_create(vigil_runtime *rt, struct vg_todo *t, const char *task_id,
                                char id[37], vigil_error *err);
/* The id of the task's live (not destroyed) agent into id, *found 1; 0 when it has none. */
vigil_code vg_todo_agent_find(vigil_runtime *rt, const char *task_id, char id[64], int *found,
                              vigil_error *err);

#endif
