/*
 * gate.c: the in-process writer gate of a SQLite file (see gate.h). Gates live in a list keyed by
 * the file's device and inode, so two paths to one file share a gate.
 */
#include "base/common.h"

#include "store/sqlite/gate.h"

#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

struct vg_sqlite_gate {
    struct vg_sqlite_gate *next;
    dev_t dev;
    ino_t ino;
    int refs;
    pthread_mutex_t mu;
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
        pthread_mutex_init(&g->mu, NULL);
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
        pthread_mutex_destroy(&g->mu);
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
    if (pthread_mutex_timedlock(&g->mu, &until) != 0)
        return VG_GATE_TIMEOUT;
    held[slot] = g;
    return VG_GATE_ENTERED;
}

void vg_sqlite_gate_leave(struct vg_sqlite_gate *g)
{
    for (int i = 0; i < HELD_MAX; i++)
        if (held[i] == g) {
            held[i] = NULL;
            pthread_mutex_unlock(&g->mu);
            return;
        }
}
