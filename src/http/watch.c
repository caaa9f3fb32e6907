/*
 * watch.c: the header deadline against slowloris clients. libmicrohttpd's timeout counts idle
 * time only, so a client that trickles its headers a byte at a time would hold its connection
 * (and its thread) for ever. Each connection is noted when it opens; a watcher thread shuts
 * down the socket of one whose request headers have not all arrived within the timeout of its
 * opening or of the end of its previous request. shutdown() (never close()) under the lock,
 * and libmicrohttpd says a connection closed before it closes the descriptor, so the watcher
 * never touches a descriptor that was reused. The same list counts the open connections for
 * the connection limit (libmicrohttpd's own is per thread of its pool), and those of each
 * thread of the pool (server.c runs a long route on the thread that read it only when that
 * connection is the thread's one).
 */
#include "base/common.h"

#include "http/http_int.h"
#include "http/mhd.h"

#include <sys/socket.h>
#include <time.h>

struct vg_conn_watch {
    int fd;
    /* Set by the connection's own thread at each request's start and end without the lock
     * (twice a request), read by the watcher under it. */
    atomic_int in_request; /* its headers came: a handler (or a stream) has it */
    int cut;
    _Atomic int64_t since_ms; /* opened, or its previous request ended */
    atomic_int *thread_conns; /* the count of the pool's thread that holds it */
    struct vg_conn_watch *prev, *next;
};

/* Connections each pool thread accepted itself (libmicrohttpd's pool: a connection stays on
 * the thread that accepted it), so the count is the thread's own. */
static _Thread_local struct {
    const struct vg_http *h;
    atomic_int *conns;
} pool_thread;

atomic_int *vg_http_thread_conns(struct vg_http *h)
{
    if (pool_thread.h == h)
        return pool_thread.conns;
    int slot = atomic_fetch_add(&h->n_pool_slots, 1);
    pool_thread.h = h;
    pool_thread.conns = slot < VG_HTTP_POOL_MAX ? &h->pool_conns[slot] : NULL;
    return pool_thread.conns;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void vg_http_watch_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct vg_http *h = cls;
    struct vg_conn_watch *w = *socket_context;
    atomic_int *conns = toe == MHD_CONNECTION_NOTIFY_STARTED ? vg_http_thread_conns(h) : NULL;
    pthread_mutex_lock(&h->watch_mu);
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        /* Counted before anything can fail: out of memory, the close is not seen and the
         * count never comes down, so no long route runs on this thread from then on. */
        if (conns)
            atomic_fetch_add(conns, 1);
        if (info && (w = vg_calloc(1, sizeof *w))) { /* out of memory: only the idle timeout */
            w->thread_conns = conns;
            w->fd = info->connect_fd;
            w->since_ms = now_ms();
            /* The connection limit, over the whole pool: libmicrohttpd's own is split between
             * its threads. One past it is closed unanswered. */
            if (++h->n_watched > h->o.max_connections) {
                shutdown(w->fd, SHUT_RDWR);
                w->cut = 1;
            }
            w->next = h->watched;
            if (h->watched)
                h->watched->prev = w;
            h->watched = w;
            *socket_context = w;
        }
    } else if (w) {
        if (w->thread_conns)
            atomic_fetch_sub(w->thread_conns, 1);
        h->n_watched--;
        if (w->prev)
            w->prev->next = w->next;
        else
            h->watched = w->next;
        if (w->next)
            w->next->prev = w->prev;
        vg_free(w);
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&h->watch_mu);
}

void vg_http_watch_request(struct vg_http *h, struct MHD_Connection *conn, int in_request)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct vg_conn_watch *w = info ? info->socket_context : NULL;
    VG_UNUSED(h);
    if (!w)
        return;
    /* The time first: the watcher, seeing the request ended, never reads the old time. */
    atomic_store(&w->since_ms, now_ms());
    atomic_store(&w->in_request, in_request);
}

static void *watcher(void *arg)
{
    struct vg_http *h = arg;
    int64_t deadline = (int64_t)h->o.timeout_s * 1000;
    pthread_mutex_lock(&h->watch_mu);
    while (!h->watch_stop) {
        struct timespec until;
        vg_http_deadline(&until, 250); /* the deadline is kept to within a quarter second */
        pthread_cond_timedwait(&h->watch_cv, &h->watch_mu, &until);
        int64_t now = now_ms();
        for (struct vg_conn_watch *w = h->watched; w; w = w->next)
            if (!atomic_load(&w->in_request) && !w->cut &&
                now - atomic_load(&w->since_ms) > deadline) {
                shutdown(w->fd, SHUT_RDWR);
                w->cut = 1;
                atomic_fetch_add(&h->header_deadline_cuts, 1);
            }
    }
    pthread_mutex_unlock(&h->watch_mu);
    return NULL;
}

vigil_code vg_http_watch_start(struct vg_http *h, vigil_error *err)
{
    if (pthread_create(&h->watch_thread, NULL, watcher, h))
        return VG_FAIL(err, VIGIL_ENOMEM, "could not start the HTTP header watch");
    h->watch_started = 1;
    return VIGIL_OK;
}

void vg_http_watch_stop(struct vg_http *h)
{
    if (!h->watch_started)
        return;
    pthread_mutex_lock(&h->watch_mu);
    h->watch_stop = 1;
    pthread_cond_signal(&h->watch_cv);
    pthread_mutex_unlock(&h->watch_mu);
    pthread_join(h->watch_thread, NULL);
    h->watch_started = 0;
}
