/*
 * test_http_fresh_reads.c: a read through the HTTP API sees every commit that finished before
 * the request arrived, through the daemon's read anchor and the records each pool thread's
 * connection keeps between requests (docs/storage.md; src/store/sqlite/anchor.h): a change made
 * through the API, and one made by another process (the CLI), each followed at once by reads,
 * many times over, with the event poller slowed to one poll a minute so that only the request's
 * own read can see the change.
 */
#include "helpers/live_http.h"
#include "helpers/test.h"

#include <stdlib.h>
#include <string.h>

static struct live L;
static char agent[64];

/* The agent's lifecycle as GET /v1/agents/{id} answers it now. */
static const char *lifecycle_now(char *out, size_t n)
{
    char path[128];
    struct live_resp r = {0};
    snprintf(path, sizeof path, "/v1/agents/%s", agent);
    ASSERT_EQ(live_req(&L, "GET", path, NULL, NULL, 1, &r), 200);
    /* the agent's record is one member of the answer: its lifecycle is the first one */
    const char *at = r.body ? strstr(r.body, "\"lifecycle\":\"") : NULL;
    size_t len = at ? strcspn(at + 13, "\"") : 0;
    snprintf(out, n, "%.*s", (int)len, at ? at + 13 : "");
    live_resp_free(&r);
    return out;
}

static void change_through_the_api(const char *verb)
{
    char path[128];
    struct live_resp r = {0};
    snprintf(path, sizeof path, "/v1/agents/%s/%s", agent, verb);
    ASSERT_EQ(live_req(&L, "POST", path, "{}", NULL, 1, &r), 200);
    live_resp_free(&r);
}

static void change_from_another_process(const char *verb)
{
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "VIGIL_STORE='%s' '%s' agent %s %s >/dev/null 2>&1", L.store,
             getenv("VIGIL_TEST_CLI"), verb, agent);
    ASSERT_EQ(system(cmd), 0);
}

/* Each change is read at once by several requests (new connections, so both pool threads
 * answer some), then changed back the other way. */
TEST(every_read_sees_the_change_made_just_before_it)
{
    char lc[32];
    change_through_the_api("resume");
    for (int round = 0; round < 6; round++) {
        for (int i = 0; i < 4; i++)
            ASSERT_STREQ(lifecycle_now(lc, sizeof lc), "active");
        if (round % 2)
            change_through_the_api("pause");
        else
            change_from_another_process("pause");
        for (int i = 0; i < 4; i++)
            ASSERT_STREQ(lifecycle_now(lc, sizeof lc), "dormant");
        if (round % 2)
            change_from_another_process("resume");
        else
            change_through_the_api("resume");
    }
}

int main(void)
{
    static const char *const slow_poll[] = {"--events-poll-ms", "60000", NULL};
    live_start(&L, "http-fresh-reads", slow_poll);
    live_agent_create(&L, "fresh", agent, sizeof agent);
    RUN(every_read_sees_the_change_made_just_before_it);
    live_stop(&L);
    return 0;
}
