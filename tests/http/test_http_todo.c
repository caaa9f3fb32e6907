/*
 * test_http_todo.c: the task domain's person routes of `vigil serve --listen` (/v1/todo/,
 * docs/todo.md, trial I7): an application's backend adds, edits, checks off, concludes,
 * deletes and restores to-do tasks over HTTP, through the same path as `vigil todo`: the
 * change is in tasks.db, the task agent is woken by it (its wake names person.OPERATION), and
 * follows its task (dormant when it is concluded or deleted, active when it is restored). A task
 * or category that is not there is 404, a bad value 400, and the routes are in /openapi.json.
 */
#include "base/common.h"

#include "helpers/live_http.h"
#include "helpers/test.h"

#include <jansson.h>
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

static struct live L;

/* A request that must answer want; the parsed body (owned). */
static json_t *call(long want, const char *method, const char *path, const char *body)
{
    struct live_resp r;
    long got = live_req(&L, method, path, body, NULL, 1, &r);
    if (got != want)
        TEST_FAIL_("%s %s: status %ld, expected %ld: %s", method, path, got, want, r.body);
    json_t *v = json_loads(r.body, JSON_DECODE_ANY, NULL);
    if (!v)
        TEST_FAIL_("%s %s: the answer is not JSON: %.200s", method, path, r.body);
    live_resp_free(&r);
    return v;
}

static const char *str(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* `vigil todo ARGS` on the daemon's store; its stdout's first line into out (may be NULL). */
static void todo_cli(const char *args, char *out, size_t n)
{
    char cmd[9000];
    const char *cli = getenv("VIGIL_CLI");
    ASSERT(cli);
    snprintf(cmd, sizeof cmd,
             "VIGIL_STORE='%s' VIGIL_MODEL_PROVIDER=scripted '%s' todo %s 2>/dev/null", L.store,
             cli, args);
    FILE *p = popen(cmd, "r");
    ASSERT(p);
    char line[512] = "";
    if (!fgets(line, sizeof line, p))
        line[0] = '\0';
    ASSERT_EQ(pclose(p), 0);
    line[strcspn(line, "\n")] = '\0';
    if (out)
        snprintf(out, n, "%s", line);
}

/* The wakes of agent (GET /v1/wakes?agent=), newest first (owned). */
static json_t *wakes_of(const char *agent)
{
    char path[200];
    snprintf(path, sizeof path, "/v1/wakes?agent=%s", agent);
    return call(200, "GET", path, NULL);
}

/* Whether a completed wake of the list names token among its tokens. */
static int completed_with(json_t *wakes, const char *token)
{
    size_t i, k;
    json_t *w, *t;
    json_array_foreach (wakes, i, w) {
        const char *status = str(w, "status");
        json_array_foreach (json_object_get(w, "tokens"), k, t)
            if (status && !strcmp(status, "completed") && !strcmp(json_string_value(t), token))
                return 1;
    }
    return 0;
}

/* Whether the agent had a completed wake that names token (an earlier change, the task's
 * creation, may have woken it first): the daemon takes the notification and runs the wake on its
 * own; each write to the store's folder is a moment to look again (30 s without one is a safety
 * bound, not a wait). */
static int woken_by(const char *agent, const char *token)
{
    int fd = inotify_init1(IN_CLOEXEC), found = 0;
    ASSERT(fd >= 0 && inotify_add_watch(fd, L.dir, IN_MODIFY | IN_CREATE | IN_CLOSE_WRITE) >= 0);
    for (int i = 0; i < 10000 && !found; i++) {
        json_t *v = wakes_of(agent);
        found = completed_with(v, token);
        json_decref(v);
        struct pollfd p = {fd, POLLIN, 0};
        char buf[4096];
        if (!found && (poll(&p, 1, 30000) <= 0 || read(fd, buf, sizeof buf) <= 0))
            break;
    }
    close(fd);
    return found;
}

TEST(the_domain_is_off_until_its_database_exists)
{
    json_t *v = call(404, "GET", "/v1/todo/categories/chores/tasks", NULL);
    ASSERT_STREQ(str(v, "code"), "ENOTFOUND");
    ASSERT_CONTAINS(str(v, "message"), "task domain is off");
    json_decref(v);
}

TEST(a_person_edits_tasks_over_http_and_the_task_agent_follows)
{
    char task[64], agent[64], path[300], item[64], follow[64];
    /* The database made by the command, the daemon started again to take it. */
    todo_cli("category add chores", NULL, 0);
    live_restart(&L, NULL);
    json_t *v = call(201, "POST", "/v1/todo/categories/chores/tasks",
                     "{\"title\":\"Write the report\",\"priority\":\"high\"}");
    snprintf(task, sizeof task, "%s", str(v, "task_id"));
    json_decref(v);
    json_decref(call(404, "POST", "/v1/todo/categories/nosuch/tasks", "{\"title\":\"x\"}"));
    json_decref(call(404, "GET", "/v1/todo/categories/nosuch/tasks", NULL));
    char args[200];
    snprintf(args, sizeof args, "agent %s", task);
    todo_cli(args, agent, sizeof agent);
    ASSERT_EQ(strlen(agent), 36);

    /* An item added over HTTP wakes the task's agent, whose wake says a person added items. */
    snprintf(path, sizeof path, "/v1/todo/tasks/%s/items", task);
    v = call(201, "POST", path, "{\"items\":[\"outline\",\"draft\"]}");
    snprintf(item, sizeof item, "%s",
             json_string_value(json_array_get(json_object_get(v, "item_ids"), 0)));
    json_decref(v);
    ASSERT(woken_by(agent, "person.add_multiple_checklist_items"));

    /* Edits: each field a change; a bad value 400, an unknown member 400, a missing task 404. */
    snprintf(path, sizeof path, "/v1/todo/tasks/%s", task);
    v = call(200, "POST", path, "{\"estimate_minutes\":30,\"due_date\":\"2026-12-24\"}");
    ASSERT_EQ(json_array_size(json_object_get(v, "results")), 2);
    json_decref(v);
    json_decref(call(400, "POST", path, "{\"priority\":\"sky\"}"));
    json_decref(call(400, "POST", path, "{\"due_date\":\"2026-02-30\"}"));
    json_decref(call(400, "POST", path, "{\"titel\":\"x\"}"));
    json_decref(call(404, "POST", "/v1/todo/tasks/task-nope", "{\"title\":\"x\"}"));
    json_decref(call(404, "GET", "/v1/todo/tasks/task-nope", NULL));
    snprintf(path, sizeof path, "/v1/todo/tasks/%s/items/%s", task, item);
    json_decref(call(200, "POST", path, "{\"done\":true}"));
    snprintf(path, sizeof path, "/v1/todo/tasks/%s", task);
    v = call(200, "GET", path, NULL);
    ASSERT_EQ(json_integer_value(json_object_get(v, "estimate_minutes")), 30);
    ASSERT_STREQ(str(v, "due_date"), "2026-12-24");
    ASSERT(
        json_is_true(json_object_get(json_array_get(json_object_get(v, "checklist"), 0), "done")));
    /* proves: S3-060 (a task's agent looked up by the task's id) */
    ASSERT_STREQ(str(json_object_get(v, "agent"), "id"), agent);
    json_decref(v);

    /* Concluded: the open item goes to a follow-up, the agent retires and the follow-up has
     * one of its own. */
    snprintf(path, sizeof path, "/v1/todo/tasks/%s/conclude", task);
    v = call(200, "POST", path, "{}");
    snprintf(follow, sizeof follow, "%s", str(v, "follow_up_task_id"));
    json_t *moved = json_object_get(v, "agents");
    ASSERT_EQ(json_array_size(moved), 2);
    ASSERT_STREQ(str(json_array_get(moved, 0), "id"), agent);
    ASSERT_STREQ(str(json_array_get(moved, 0), "lifecycle"), "dormant");
    json_decref(v);
    snprintf(path, sizeof path, "/v1/agents/%s", agent);
    v = call(200, "GET", path, NULL);
    ASSERT_STREQ(str(json_object_get(v, "agent"), "lifecycle"), "dormant");
    json_decref(v);
    v = call(200, "GET", "/v1/todo/categories/chores/tasks", NULL);
    ASSERT_EQ(json_array_size(json_object_get(v, "tasks")), 1); /* the follow-up, open */
    ASSERT_STREQ(str(json_array_get(json_object_get(v, "tasks"), 0), "task_id"), follow);
    json_decref(v);

    /* The follow-up deleted (its agent dormant, out of every read) and restored. */
    snprintf(path, sizeof path, "/v1/todo/tasks/%s", follow);
    v = call(200, "DELETE", path, NULL);
    ASSERT_STREQ(str(json_array_get(json_object_get(v, "agents"), 0), "lifecycle"), "dormant");
    json_decref(v);
    json_decref(call(404, "GET", path, NULL));
    json_decref(call(404, "DELETE", path, NULL));
    snprintf(path, sizeof path, "/v1/todo/tasks/%s/restore", follow);
    v = call(200, "POST", path, NULL);
    ASSERT_STREQ(str(json_array_get(json_object_get(v, "agents"), 0), "lifecycle"), "active");
    json_decref(v);
    json_decref(call(400, "POST", path, NULL)); /* not deleted */
}

TEST(the_routes_are_in_openapi)
{
    json_t *v = call(200, "GET", "/openapi.json", NULL), *paths = json_object_get(v, "paths");
    static const char *const want[] = {
        "/v1/todo/categories/{category}/tasks", "/v1/todo/tasks/{task}",
        "/v1/todo/tasks/{task}/items",          "/v1/todo/tasks/{task}/items/{item}",
        "/v1/todo/tasks/{task}/conclude",       "/v1/todo/tasks/{task}/restore"};
    for (size_t i = 0; i < VG_ARRAY_LEN(want); i++)
        if (!json_object_get(paths, want[i]))
            TEST_FAIL_("/openapi.json has no %s", want[i]);
    ASSERT(json_object_get(json_object_get(paths, "/v1/todo/tasks/{task}"), "delete"));
    json_decref(v);
}

int main(void)
{
    live_start(&L, "http-todo", NULL);
    RUN(the_domain_is_off_until_its_database_exists);
    RUN(a_person_edits_tasks_over_http_and_the_task_agent_follows);
    RUN(the_routes_are_in_openapi);
    live_stop(&L);
    return 0;
}
