/*
 * test_watchdog.c: the daemon's watchdog (src/runtime/watchdog.c): a run under way past its
 * start + its timeout + the grace is cancelled by "watchdog", once; a run within its deadline,
 * and a queued one, are left alone. The test clock stands for the time that passes.
 */
#include "helpers/rt.h"

#include "orch/orch.h"
#include "runtime/runtime.h"
#include "wake/wake.h"

static void start_run(struct test_rt *t, struct vg_wake *w, const char *agent, char key[65],
                      struct vg_wake_job *job)
{
    enum vg_enqueue_result res;
    int got = 0;
    struct vg_wake_req req = {
        .reason = VG_REASON_USER, .agent_id = agent, .session_id = "s", .turn_id = agent};
    ASSERT_OK(vg_wake_enqueue(w, &req, key, &res, E));
    memset(job, 0, sizeof *job);
    ASSERT_OK(vg_wake_claim(w, job, &got, E));
    ASSERT_EQ(got, 1);
    ASSERT_STREQ(job->run_key, key);
    (void)t;
}

/* proves: S2-039 */
TEST(a_run_past_its_deadline_is_cancelled_by_the_watchdog_once)
{
    struct test_rt t;
    struct vg_wake w;
    struct vg_wake_job job, other;
    char a[37], b[37], key[65], key_b[65];
    int n = -1;
    test_rt_open(&t, "watchdog");
    vigil_agent_spec sa = {.name = "slow", .config_json = "{\"limits\": {\"timeout_ms\": 5000}}"};
    vigil_agent_spec sb = {.name = "default"};
    ASSERT_OK(vigil_agent_create(t.rt, &sa, a, E));
    ASSERT_OK(vigil_agent_create(t.rt, &sb, b, E));
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    start_run(&t, &w, a, key, &job);
    vg_test_clock_advance(&t.clock, 1000);
    start_run(&t, &w, b, key_b, &other); /* the loop's default timeout: 10 minutes */
    vg_test_clock_advance(&t.clock, 5000 + VG_WATCHDOG_GRACE_MS - 1000 - 1);
    ASSERT_OK(vg_runtime_watchdog(t.env, &n, E));
    ASSERT_EQ(n, 0); /* 1 ms before a's deadline */
    ASSERT(!vg_run_cancel_requested(t.env, key, NULL, 0));
    vg_test_clock_advance(&t.clock, 1);
    ASSERT_OK(vg_runtime_watchdog(t.env, &n, E));
    ASSERT_EQ(n, 1);
    ASSERT(vg_run_cancel_requested(t.env, key, NULL, 0));
    ASSERT(!vg_run_cancel_requested(t.env, key_b, NULL, 0));
    json_t *req = NULL;
    ASSERT_OK(vg_env_get_json(t.env, "run_cancel", key, &req, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(req, "by")), "watchdog");
    json_decref(req);
    vg_test_clock_advance(&t.clock, 10000);
    ASSERT_OK(vg_runtime_watchdog(t.env, &n, E));
    ASSERT_EQ(n, 0);                         /* asked once: the runner has not looked yet */
    vg_test_clock_advance(&t.clock, 600000); /* past b's default deadline too */
    ASSERT_OK(vg_runtime_watchdog(t.env, &n, E));
    ASSERT_EQ(n, 1);
    ASSERT(vg_run_cancel_requested(t.env, key_b, NULL, 0));
    vg_wake_job_release(&job);
    vg_wake_job_release(&other);
    vg_wake_release(&w);
    test_rt_close(&t);
}

int main(void)
{
    unsetenv("VIGIL_CONFIG");
    RUN(a_run_past_its_deadline_is_cancelled_by_the_watchdog_once);
    return 0;
}
