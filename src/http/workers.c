/*
 * workers.c: the threads that run what may wait for a whole turn (a chat, an MCP call, a
 * streamed chat turn) off libmicrohttpd's small pool. They are kept between requests: a
 * thread started per request cost a clone, its start and its exit on every chat turn
 * (docs/internals/PERF.md, Session 23). A job never waits for a thread: when none is idle (or
 * returning from a job, about to look for the next) a new one starts, so long turns never queue
 * behind each other. A thread idle for WORKER_IDLE_S ends, so a burst of turns does not keep
 * its threads.
 */
#include "base/common.h"

#include "http/http_int.h"

#include <errno.h>
#include <time.h>

#define WORKER_IDLE_S 30

struct vg_http_job {
    void (*fn)(void *arg), (*then)(void *arg);
    void *arg;
    struct vg_http_job *next;
};

void vg_http_workers_init(struct vg_http_workers *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    vg_http_cond_init(&w->cv);
    vg_http_cond_init(&w->gone);
}

/* The next job (under w->mu), waiting for one at most WORKER_IDLE_S; NULL: end the thread. */
static struct vg_http_job *next_job(struct vg_http_workers *w)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += WORKER_IDLE_S;
    while (!w->head && !w->stopping) {
        w->idle++;
        int rc = pthread_cond_timedwait(&w->cv, &w->mu, &until);
        w->idle--;
        if (rc == ETIMEDOUT)
            break;
    }
    struct vg_http_job *j = w->head;
    if (j) {
        w->head = j->next;
        if (!w->head)
            w->tail = NULL;
        w->queued--;
    }
    return j;
}

static void *worker_main(void *arg)
{
    struct vg_http_workers *w = arg;
    struct vg_http_job *j;
    pthread_mutex_lock(&w->mu);
    while ((j = next_job(w))) {
        pthread_mutex_unlock(&w->mu);
        j->fn(j->arg);
        if (j->then) {
            /* Idle before the answer goes out: the next request of its client comes within
             * microseconds, and found none idle (a new thread started, or the longest-idle one
             * woken, with colder caches) while this one was still on its way back to next_job,
             * which takes a job queued meanwhile without waiting. */
            pthread_mutex_lock(&w->mu);
            w->returning++;
            pthread_mutex_unlock(&w->mu);
            j->then(j->arg);
            pthread_mutex_lock(&w->mu);
            w->returning--;
            pthread_mutex_unlock(&w->mu);
        }
        vg_free(j);
        pthread_mutex_lock(&w->mu);
    }
    w->threads--;
    pthread_cond_broadcast(&w->gone);
    pthread_mutex_unlock(&w->mu); /* w is not touched after this */
    return NULL;
}

/* A new thread for the queue (under w->mu); 0 when it started. */
static int add_thread(struct vg_http_workers *w)
{
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    int failed = pthread_create(&t, &a, worker_main, w);
    pthread_attr_destroy(&a);
    if (!failed)
        w->threads++;
    return failed;
}

int vg_http_work(struct vg_http_workers *w, void (*fn)(void *arg), void (*then)(void *arg),
                 void *arg)
{
    struct vg_http_job *j = vg_calloc(1, sizeof *j);
    if (!j)
        return -1;
    j->fn = fn;
    j->then = then;
    j->arg = arg;
    pthread_mutex_lock(&w->mu);
    int ready = w->idle + w->returning;
    if (w->stopping || (ready <= w->queued && add_thread(w) && w->threads == 0)) {
        pthread_mutex_unlock(&w->mu); /* no thread will ever take it */
        vg_free(j);
        return -1;
    }
    /* (A thread that could not start leaves the job to a busy one: it comes after its turn.) */
    if (w->tail)
        w->tail->next = j;
    else
        w->head = j;
    w->tail = j;
    w->queued++;
    /* A returning thread takes the job without a wake-up: a waiting one is woken only for the
     * jobs they leave. */
    int wake = w->queued > w->returning;
    pthread_mutex_unlock(&w->mu);
    /* After the unlock: a thread woken under the lock would only block on it again (a futex
     * wait and wake more in every chat turn's hand-off). */
    if (wake)
        pthread_cond_signal(&w->cv);
    return 0;
}

void vg_http_workers_stop(struct vg_http_workers *w)
{
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    pthread_cond_broadcast(&w->cv);
    while (w->threads > 0)
        pthread_cond_wait(&w->gone, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

/* After libmicrohttpd stopped: until then a request may still offload (and be refused). */
void vg_http_workers_free(struct vg_http_workers *w)
{
    pthread_cond_destroy(&w->cv);
    pthread_cond_destroy(&w->gone);
    pthread_mutex_destroy(&w->mu);
}
