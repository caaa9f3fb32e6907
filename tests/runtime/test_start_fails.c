/*
 * test_start_fails.c: a start-up that fails part way gives back everything it had taken, so
 * that a program which embeds vigil can try again (or go on without it) in the same process.
 * Two starts are failed part way:
 *   - vigil_runtime_open at its allocations in turn (every one of the first 120, then every
 *     17th to the end: the store opened and created, its migrations run, sync attached): each
 *     failure leaves the process's descriptors and threads as they were, hands out no
 *     runtime, and leaves a store that opens (the ASan build checks that no memory leaks).
 *     Without the fix in the SQLite adapter's close, a failure at the fifth crashed;
 *   - vigil_daemon_run at its last step, its service's start, after it took the store's lock,
 *     opened its runtimes, started its event loop, control socket and worker threads: it leaves
 *     the descriptors, threads and heap as they were (glibc's count, a few bytes of caches
 *     aside), no control socket beside the store, and the lock free: the next daemon on the
 *     store starts in this process.
 * proves: S3-071
 */
#include "helpers/test.h"

#include <dirent.h>
#include <limits.h>
#include <malloc.h>
#include <sys/stat.h>

/* Entries of a /proc/self folder: the process's open descriptors or its threads. */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    ASSERT(d != NULL);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the descriptor opendir holds */
}

/* What the process holds: descriptors, threads and heap bytes in use. */
struct held {
    int fds, threads;
    size_t heap;
};

static struct held held_now(void)
{
    struct held h = {count_entries("/proc/self/fd"), count_entries("/proc/self/task") + 1, 0};
#ifndef VG_ASAN /* AddressSanitizer's heap is not glibc's: its leak check covers this */
    h.heap = mallinfo2().uordblks;
#endif
    return h;
}

/* heap_slack: what the heap may differ by (caches trading entries); -1: not compared (a
 * process-wide cache may grow with each new store's path; the ASan build checks leaks). */
static void assert_same(struct held before, struct held after, const char *what, long step,
                        long heap_slack)
{
    long heap = (long)after.heap - (long)before.heap;
    if (after.fds != before.fds || after.threads != before.threads ||
        (heap_slack >= 0 && (heap > heap_slack || heap < -heap_slack)))
        TEST_FAIL_("%s failing at step %ld kept %d descriptor(s), %d thread(s), %ld heap byte(s)",
                   what, step, after.fds - before.fds, after.threads - before.threads, heap);
}

static vigil_code open_runtime(const char *path, vigil_runtime **rt, vigil_error *err)
{
    vigil_runtime_options o;
    vigil_runtime_options_default(&o);
    o.store_uri = path;
    o.create_if_missing = 1;
    return vigil_runtime_open(&o, rt, err);
}

TEST(a_runtime_open_failing_at_any_step_gives_everything_back)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s", vg_test_tmpdir("start_fails_open"));
    vigil_runtime *rt = NULL;
    /* Once first, for what a process sets up once for its life (libraries' own state). */
    snprintf(path, sizeof path, "%s/warm.db", dir);
    ASSERT_OK(open_runtime(path, &rt, E));
    vigil_runtime_close(rt);
    rt = NULL;
    long failures = 0;
    for (long n = 1;; n += n < 120 ? 1 : 17) {
        /* A fresh store each time, so every open creates it and runs its migrations. */
        snprintf(path, sizeof path, "%s/s%ld.db", dir, n);
        struct held before = held_now();
        vigil_error err = {0};
        vg_alloc_fail_at(n, 1);
        vigil_code rc = open_runtime(path, &rt, &err);
        int injected = vg_alloc_failed();
        vg_alloc_fail_at(0, 0);
        if (!injected) {
            ASSERT_OK(rc);
            vigil_runtime_close(rt);
            break;
        }
        failures++;
        if (rc == VIGIL_OK)
            vigil_runtime_close(rt); /* a failure absorbed on the way: no step failed */
        else if (rt != NULL)
            TEST_FAIL_("a failed open (%s) handed out a runtime", err.message);
        rt = NULL;
        assert_same(before, held_now(), "vigil_runtime_open", n, -1);
        /* What it left on disk opens (the store, or nothing yet). */
        ASSERT_OK(open_runtime(path, &rt, E));
        vigil_runtime_close(rt);
        rt = NULL;
        if (n > 200000)
            TEST_FAIL_("the open never got through");
    }
    ASSERT(failures > 10);
}

/* A service that cannot start: the daemon's last step before it serves. */
static vigil_code service_refuses(void *user, void (*poke)(void *), void *poke_user,
                                  vigil_error *err)
{
    (void)user, (void)poke, (void)poke_user;
    err->code = VIGIL_EIO;
    snprintf(err->message, sizeof err->message, "the service could not listen");
    return VIGIL_EIO;
}

static void service_stop(void *user)
{
    (void)user;
}

/* Asked to stop while it starts: the daemon returns as soon as it serves. */
static vigil_code stop_at_once(void *user, vigil_runtime *rt, vigil_error *err)
{
    (void)rt;
    return vigil_daemon_stop(user, err);
}

TEST(a_daemon_failing_its_last_start_step_gives_everything_back)
{
    char path[4200], sock[4300];
    snprintf(path, sizeof path, "%s/d.db", vg_test_tmpdir("start_fails_daemon"));
    snprintf(sock, sizeof sock, "%s.sock", path);
    vigil_runtime *rt = NULL;
    ASSERT_OK(open_runtime(path, &rt, E));
    vigil_runtime_close(rt);
    vigil_daemon_options o;
    vigil_daemon_options_default(&o);
    o.workers = 2;
    o.on_runtime = stop_at_once;
    o.on_runtime_user = path;
    /* A daemon that serves and stops, first: what a process sets up once is set up. */
    ASSERT_OK(vigil_daemon_run(path, &o, E));
    struct held before = held_now();
    vigil_daemon_service refusing = {NULL, service_refuses, service_stop};
    o.service = &refusing;
    o.on_runtime = NULL;
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EIO, vigil_daemon_run(path, &o, &err));
    ASSERT_STREQ(err.message, "the service could not listen");
    assert_same(before, held_now(), "vigil_daemon_run", 0, 4096);
    struct stat st;
    ASSERT(stat(sock, &st) != 0); /* its control socket is gone */
    ASSERT_EQ(vigil_daemon_running(path, NULL), 0);
    /* The store's lock was let go: the next daemon in this process starts on it. */
    o.service = NULL;
    o.on_runtime = stop_at_once;
    ASSERT_OK(vigil_daemon_run(path, &o, E));
}

int main(void)
{
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    RUN(a_runtime_open_failing_at_any_step_gives_everything_back);
    RUN(a_daemon_failing_its_last_start_step_gives_everything_back);
    return 0;
}
