/*
 * test_lease_takeover.c: a lease whose holder's process is gone is free at once (same host: the
 * lease names the holder's host, pid and process start), for a chat's take and for a wake claim
 * with recovery, and is taken over under a new epoch; a live holder's lease stays held. The
 * test clock never moves: nothing here waits for an expiry.
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
        vigil_runtime_options o = {.store_uri = t->path};
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

int main(void)
{
    RUN(a_dead_holders_lease_is_taken_over_at_once);
    RUN(a_dead_holders_wake_run_is_recovered_and_claimed_at_once);
    return 0;
}
