/*
 * test_http_upkeep.c: the daemon answers a chat turn before the turn's upkeep (its thread's
 * compaction check: vigil_runtime_defer_upkeep, include/vigil.h) and runs it after the answer
 * is sent (a whole turn) or the stream has ended (a streamed one). What that must keep: the
 * check still happens for every turn, so a thread taken past its compaction budget over HTTP
 * gets its compaction job, as through the C API.
 */
#include "base/common.h"

#include "helpers/live_http.h"
#include "helpers/test.h"

#include "runtime/runtime_int.h"
#include "store/store.h"

static struct live L;

/* An agent of a small context: its compaction budget (half of it) is passed within a few
 * turns of 2,000 characters. */
static void small_agent(const char *name, char *id, size_t n)
{
    char body[256];
    struct live_resp r;
    snprintf(body, sizeof body,
             "{\"name\":\"%s\",\"prompt\":\"You help.\",\"limits\":{\"context_tokens\":4000}}",
             name);
    ASSERT_EQ(live_req(&L, "POST", "/v1/agents", body, NULL, 1, &r), 200);
    json_t *v = json_loads(r.body, 0, NULL);
    snprintf(id, n, "%s", json_string_value(json_object_get(json_array_get(v, 0), "id")));
    json_decref(v);
    live_resp_free(&r);
}

/* Turns over HTTP (whole, or streamed), each message its own. */
static void turns(const char *agent, int n, int streamed)
{
    static const char *const sse[] = {"Accept: text/event-stream", NULL};
    char path[128], body[2100];
    struct live_resp r;
    snprintf(path, sizeof path, "/v1/agents/%s/chat", agent);
    for (int i = 0; i < n; i++) {
        char text[2001];
        memset(text, 'w', sizeof text - 1);
        text[sizeof text - 1] = '\0';
        text[0] = (char)('a' + i);
        snprintf(body, sizeof body, "{\"text\":\"%s\"}", text);
        ASSERT_EQ(live_req(&L, "POST", path, body, streamed ? sse : NULL, 1, &r), 200);
        ASSERT_CONTAINS(r.body, streamed ? "event: done" : "\"end\":\"completed\"");
        live_resp_free(&r);
    }
}

static int64_t jobs(vigil_runtime *rt, const char *agent)
{
    char thread[200];
    int64_t n = 0;
    snprintf(thread, sizeof thread, "%s:session:default", agent);
    struct vg_query q = {.kind = "compaction_job", .owner = agent, .k1 = thread};
    ASSERT_OK(vg_store_count(rt->env.store, &q, &n, E));
    return n;
}

/* Six turns pass the budget (the C API's tests: within two to five), whole or streamed: once
 * the daemon has stopped (every turn's upkeep run, after its answer or at the latest as its
 * runtime closes), each agent's thread has its job: a chat turn over HTTP is considered for
 * compaction after its run and scheduled past its budget. proves: S0-044 */
TEST(turns_over_http_still_get_their_compaction_check)
{
    char whole[64], streamed[64];
    small_agent("whole", whole, sizeof whole);
    small_agent("streamed", streamed, sizeof streamed);
    turns(whole, 6, 0);
    turns(streamed, 6, 1);
    live_stop(&L);
    vigil_runtime_options o = {.size = sizeof o, .store_uri = L.store};
    vigil_runtime *rt = NULL;
    ASSERT_OK(vigil_runtime_open(&o, &rt, E));
    ASSERT(jobs(rt, whole) >= 1);
    ASSERT(jobs(rt, streamed) >= 1);
    vigil_runtime_close(rt);
}

int main(void)
{
    live_start(&L, "http-upkeep", NULL);
    RUN(turns_over_http_still_get_their_compaction_check);
    return 0;
}
