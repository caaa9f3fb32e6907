/*
 * test_lease_takeover.c: a lease whose holder's process is gone is free at once (same host: the
 * lease names the holder's host, pid and process start), for a chat's take and for a wake claim
 * with recovery, and is taken over under a new epoch; a live holder's lease stays held. A holder
 * on another host that beats is known gone once it misses its beats, long before its lease
 * ends. The test clock is moved by hand: nothing here waits for time.
 */
#include "helpers/rt.h"

#include "agent/agent.h"
#include "wake/wake.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void make_agent(struct test_rt *t, char id[37])
{
    vigil_agent_spec spec = {.name = "held", .kind = "task_agent", .mode = "autonomous"};
    ASSERT_OK(vigil_agent_create(t->rt, &spec, id, E));
    ASSERT_OK(vg_agent_transition(t->env, id, VIGIL_LIFECYCLE_ACTIVE, "test", E));
}

/* A child process opens the store, takes the agent's lease (or claims its queued wake) for an
 * hour and dies holding it. Returns the epoch it took. */
static int64_t child_takes_and_dies(struct test_rt *t, const char *agent, int claim)
{
    int fd[2];
    int64_t epoch = 0;
    ASSERT(pipe(fd) == 0);
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        vigil_runtime *rt = NULL;
        vigil_error err = {0};
        vigil_runtime_options o = {.size = sizeof o, .store_uri = t->path};
        int got = 0;
        if (vg_runtime_open_with(&o, &t->clock.base, NULL, &rt, &err))
            _exit(3);
        if (claim) {
            struct vg_wake w;
            struct vg_wake_job job;
            struct vg_wake_config cfg;
            vg_wake_config_defaults(&cfg);
            cfg.lease_ms = 3600000;
            if (vg_wake_init(&w, vg_runtime_env(rt), &cfg, &err) ||
                vg_wake_claim(&w, &job, &got, &err) || !got)
                _exit(4);
            epoch = job.epoch;
        } else if (vg_wake_lease_take(vg_runtime_env(rt), agent, "chat:child", 3600000, &epoch,
                                      &got, &err) ||
                   !got) {
            _exit(4);
        }
        if (write(fd[1], &epoch, sizeof epoch) != (ssize_t)sizeof epoch)
            _exit(5);
        raise(SIGKILL);
    }
    close(fd[1]);
    ASSERT(read(fd[0], &epoch, sizeof epoch) == (ssize_t)sizeof epoch);
    close(fd[0]);
    int status = 0;
    ASSERT(waitpid(pid, &status, 0) == pid);
    ASSERT(WIFSIGNALED(status));
    return epoch;
}

TEST(a_dead_holders_lease_is_taken_over_at_once)
{
    struct test_rt t;
    char a[37];
    int64_t epoch = 0;
    int got = 0;
    test_rt_open(&t, "lease_takeover_take");
    make_agent(&t, a);
    int64_t dead = child_takes_and_dies(&t, a, 0);
    ASSERT_OK(vg_wake_lease_take(t.env, a, "chat:next", 300000, &epoch, &got, E));
    ASSERT_EQ(got, 1);
    ASSERT_EQ(epoch, dead + 1); /* a new fencing epoch: the dead holder can write nothing */
    ASSERT_CODE(VIGIL_ESTATE, vg_wake_lease_check(t.env, a, dead, NULL));
    /* a live holder (this process) keeps it */
    int64_t again = 0;
    ASSERT_OK(vg_wake_lease_take(t.env, a, "chat:third", 300000, &again, &got, E));
    ASSERT_EQ(got, 0);
    test_rt_close(&t);
}

TEST(a_dead_holders_wake_run_is_recovered_and_claimed_at_once)
{
    struct test_rt t;
    struct vg_wake w;
    struct vg_wake_job job;
    char a[37], key[65];
    int got = 0, n = 0;
    test_rt_open(&t, "lease_takeover_claim");
    make_agent(&t, a);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    struct vg_wake_req req = {.reason = VG_REASON_MANUAL, .agent_id = a};
    enum vg_enqueue_result res;
    ASSERT_OK(vg_wake_enqueue(&w, &req, key, &res, E));
    int64_t dead = child_takes_and_dies(&t, a, 1);
    /* without recovery the run is still "started" under the dead epoch: nothing to claim */
    ASSERT_OK(vg_wake_claim(&w, &job, &got, E));
    ASSERT_EQ(got, 0);
    ASSERT_OK(vg_wake_recover(&w, NULL, &n, E));
    ASSERT_EQ(n, 1);
    ASSERT_OK(vg_wake_claim(&w, &job, &got, E));
    ASSERT_EQ(got, 1);
    ASSERT_STREQ(job.run_key, key);
    ASSERT(job.epoch > dead);
    ASSERT_EQ(job.attempt, 2);
    ASSERT_OK(vg_wake_finish(&w, &job, VG_WAKE_COMPLETED, NULL, E));
    vg_wake_job_release(&job);
    vg_wake_release(&w);
    test_rt_close(&t);
}

/* The lease as a holder on another machine would leave it: its host, a pid that means nothing
 * here, and (beat_timeout_ms > 0) a heartbeat it promised. */
static void hand_lease_elsewhere(struct test_rt *t, const char *agent, int64_t beat_timeout_ms)
{
    json_t *lease = NULL;
    int64_t rev = 0;
    ASSERT_OK(vg_env_get_json(t->env, "agent_lease", agent, &lease, &rev, E));
    ASSERT(!json_object_set_new(lease, "host", json_string("elsewhere.invalid")) &&
           !json_object_set_new(lease, "pid", json_integer(1)) &&
           !json_object_set_new(lease, "pid_start", json_string("1")) &&
           !json_object_set_new(lease, "holder", json_string("daemon:elsewhere")) &&
           !json_object_set_new(lease, "beat_timeout_ms", json_integer(beat_timeout_ms)));
    ASSERT_OK(vg_env_update_json(t->env, "agent_lease", agent, agent, "daemon:elsewhere", "",
                                 json_integer_value(json_object_get(lease, "expires_ms")), lease,
                                 rev, E));
    json_decref(lease);
}

static int take(struct test_rt *t, const char *agent, int64_t *epoch)
{
    int got = 0;
    ASSERT_OK(vg_wake_lease_take(t->env, agent, "chat:here", 300000, epoch, &got, E));
    return got;
}

TEST(a_holder_elsewhere_that_stops_beating_is_taken_over_long_before_its_lease_ends)
{
    struct test_rt t;
    char a[37];
    int64_t epoch = 0, next = 0;
    test_rt_open(&t, "lease_heartbeat");
    make_agent(&t, a);
    ASSERT(take(&t, a, &epoch));
    hand_lease_elsewhere(&t, a, 30000); /* a 5-minute lease, beats due every 10 s */
    vg_test_clock_advance(&t.clock, 29000);
    ASSERT(!take(&t, a, &next));                                /* its last beat is recent: alive */
    ASSERT_OK(vg_wake_lease_renew(t.env, a, epoch, 300000, E)); /* it beats */
    vg_test_clock_advance(&t.clock, 29000);
    ASSERT(!take(&t, a, &next));
    vg_test_clock_advance(&t.clock, 2000); /* 31 s since its last beat, 4 min before expiry */
    ASSERT(take(&t, a, &next));
    ASSERT_EQ(next, epoch + 1);
    ASSERT_CODE(VIGIL_ESTATE, vg_wake_lease_renew(t.env, a, epoch, 300000, NULL));
    test_rt_close(&t);
}

TEST(a_holder_elsewhere_that_does_not_beat_keeps_its_lease_until_it_expires)
{
    struct test_rt t;
    char a[37];
    int64_t epoch = 0, next = 0;
    test_rt_open(&t, "lease_no_heartbeat");
    make_agent(&t, a);
    ASSERT(take(&t, a, &epoch));
    hand_lease_elsewhere(&t, a, 0); /* a chat over there: no beat promised */
    vg_test_clock_advance(&t.clock, 299000);
    ASSERT(!take(&t, a, &next));
    vg_test_clock_advance(&t.clock, 1001);
    ASSERT(take(&t, a, &next));
    test_rt_close(&t);
}

TEST(a_claim_by_a_holder_that_beats_records_its_heartbeat)
{
    struct test_rt t;
    struct vg_wake w;
    struct vg_wake_job job;
    struct vg_wake_config cfg;
    char a[37], key[65];
    int got = 0;
    json_t *lease = NULL;
    test_rt_open(&t, "lease_heartbeat_claim");
    make_agent(&t, a);
    vg_wake_config_defaults(&cfg);
    cfg.heartbeat_ms = vg_wake_heartbeat_ms(cfg.lease_ms);
    ASSERT_EQ(cfg.heartbeat_ms, 10000);
    ASSERT_OK(vg_wake_init(&w, t.env, &cfg, E));
    struct vg_wake_req req = {.reason = VG_REASON_MANUAL, .agent_id = a};
    enum vg_enqueue_result res;
    ASSERT_OK(vg_wake_enqueue(&w, &req, key, &res, E));
    ASSERT_OK(vg_wake_claim(&w, &job, &got, E));
    ASSERT_EQ(got, 1);
    ASSERT_OK(vg_env_get_json(t.env, "agent_lease", a, &lease, NULL, E));
    ASSERT_EQ(json_integer_value(json_object_get(lease, "beat_timeout_ms")),
              10000 * VG_WAKE_BEATS_MISSED);
    ASSERT_EQ(json_integer_value(json_object_get(lease, "beat_ms")), vg_env_now(t.env));
    json_decref(lease);
    ASSERT_OK(vg_wake_finish(&w, &job, VG_WAKE_COMPLETED, NULL, E));
    vg_wake_job_release(&job);
    vg_wake_release(&w);
    test_rt_close(&t);
}

int main(void)
{
    RUN(a_dead_holders_lease_is_taken_over_at_once);
    RUN(a_dead_holders_wake_run_is_recovered_and_claimed_at_once);
    RUN(a_holder_elsewhere_that_stops_beating_is_taken_over_long_before_its_lease_ends);
    RUN(a_holder_elsewhere_that_does_not_beat_keeps_its_lease_until_it_expires);
    RUN(a_claim_by_a_holder_that_beats_records_its_heartbeat);
    return 0;
}
