/*
 * gate.c: the in-process writer gate of a SQLite file (see gate.h). Gates live in a list keyed by
 * the file's device and inode, so two paths to one file share a gate.
 */
#include "base/common.h"

#include "store/sqlite/gate.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/stat.h>
#include <time.h>

struct vg_sqlite_gate {
    struct vg_sqlite_gate *next;
    dev_t dev;
    ino_t ino;
    int refs;
    /* A binary semaphore, not a mutex: a daemon worker's fibers share one thread, and the
     * fiber that commits a round of folded transactions leaves the gate another fiber entered.
     * That is the same thread (held[] below is per thread), but a mutex has an owner, and
     * ThreadSanitizer, told of every fiber switch, reports its unlock by another fiber. */
    sem_t free;
};

static pthread_mutex_t gates_mu = PTHREAD_MUTEX_INITIALIZER;
static struct vg_sqlite_gate *gates;

/* The gates this thread holds: a thread writing through two connections to one file must not
 * wait for itself. */
#define HELD_MAX 8
static _Thread_local struct vg_sqlite_gate *held[HELD_MAX];

struct vg_sqlite_gate *vg_sqlite_gate_get(const char *path)
{
    struct stat st;
    if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return NULL;
    pthread_mutex_lock(&gates_mu);
    struct vg_sqlite_gate *g = gates;
    while (g && (g->dev != st.st_dev || g->ino != st.st_ino))
        g = g->next;
    if (!g && (g = vg_calloc(1, sizeof *g))) {
        g->dev = st.st_dev;
        g->ino = st.st_ino;
        sem_init(&g->free, 0, 1);
        g->next = gates;
        gates = g;
    }
    if (g)
        g->refs++;
    pthread_mutex_unlock(&gates_mu);
    return g;
}

void vg_sqlite_gate_put(struct vg_sqlite_gate *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&gates_mu);
    if (--g->refs == 0) {
        struct vg_sqlite_gate **p = &gates;
        while (*p != g)
            p = &(*p)->next;
        *p = g->next;
        sem_destroy(&g->free);
        vg_free(g);
    }
    pthread_mutex_unlock(&gates_mu);
}

enum vg_gate_entry vg_sqlite_gate_enter(struct vg_sqlite_gate *g, int timeout_ms)
{
    int slot = -1;
    for (int i = 0; i < HELD_MAX; i++) {
        if (held[i] == g)
            return VG_GATE_MINE;
        if (!held[i] && slot < 0)
            slot = i;
    }
    if (slot < 0)
        return VG_GATE_MINE; /* more files open for writing at once than tracked: no gate */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    int rc;
    while ((rc = sem_timedwait(&g->free, &until)) != 0 && errno == EINTR)
        ;
    if (rc != 0)
        return VG_GATE_TIMEOUT;
    held[slot] = g;
    return VG_GATE_ENTERED;
}

void vg_sqlite_gate_leave(struct vg_sqlite_gate *g)
{
    for (int i = 0; i < HELD_MAX; i++)
        if (held[i] == g) {
            held[i] = NULL;
            sem_post(&g->free);
            return;
        }
}
