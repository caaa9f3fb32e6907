/*
 * fleet.c: the `daemon` records of a shared store (PostgreSQL), one per daemon, rewritten at
 * each of its beats (daemon.c): which are stale, and removing them. A daemon that stops removes
 * its own; one killed with -9 (or whose host died) cannot, so its record would stay forever
 * (trial G7). `vigil status` says which are stale and `vigil status --prune-stale` removes them
 * at once; every live daemon removes those whose beat is older than VG_DAEMON_RECORD_KEEP_MS,
 * so a record of a dead daemon is seen for a day, then goes. A live daemon whose record was
 * removed (it was stopped past three beats, then resumed) writes it again at its next beat.
 */
#include "base/common.h"

#include "os/proc.h"
#include "store/store.h"
#include "wake/wake.h"

int vg_daemon_record_stale(const json_t *d, int64_t now_ms)
{
    struct vg_wake_config cfg;
    vg_wake_config_defaults(&cfg);
    int64_t beat = json_integer_value(json_object_get(d, "beat_ms"));
    int64_t late = VG_WAKE_BEATS_MISSED * vg_wake_heartbeat_ms(cfg.lease_ms);
    /* On this host a pid that runs no more (or runs another process) is dead at once; from
     * another host only the missed beats tell. */
    return now_ms - beat > late || vg_proc_gone(json_string_value(json_object_get(d, "host")),
                                                (long)json_integer_value(json_object_get(d, "pid")),
                                                json_string_value(json_object_get(d, "pid_start")));
}

struct prune_ctx {
    int64_t now, before; /* before: remove records whose beat is older; 0: the stale ones */
    char (*ids)[200];    /* the records to remove, owned */
    int n, cap, oom;
};

static int prune_cb(void *user, const struct vg_record *r)
{
    struct prune_ctx *c = user;
    json_t *d = json_loads(r->body, 0, NULL);
    int take = d && (c->before ? json_integer_value(json_object_get(d, "beat_ms")) < c->before
                               : vg_daemon_record_stale(d, c->now));
    json_decref(d);
    if (!take)
        return 0;
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 8;
        void *more = vg_realloc(c->ids, (size_t)cap * sizeof *c->ids);
        if (!more) {
            c->oom = 1;
            return 1;
        }
        c->ids = more;
        c->cap = cap;
    }
    snprintf(c->ids[c->n++], sizeof c->ids[0], "%s", r->id);
    return 0;
}

vigil_code vg_daemon_records_prune(struct vg_env *env, int64_t beat_before_ms, int *removed,
                                   vigil_error *err)
{
    struct prune_ctx c = {.now = vg_env_now(env), .before = beat_before_ms};
    struct vg_query q = {.kind = "daemon"};
    int n = 0;
    vigil_code rc = vg_store_scan(env->store, &q, prune_cb, &c, err);
    if (!rc && c.oom)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing daemon records");
    for (int i = 0; !rc && i < c.n; i++) {
        vigil_error miss = {0};
        /* Another process may have removed it first: gone is what was asked. */
        vigil_code one = vg_store_remove(env->store, "daemon", c.ids[i], &miss);
        if (one == VIGIL_OK)
            n++;
        else if (one != VIGIL_ENOTFOUND)
            rc = vg_error_unless_missing(err, &miss, one);
    }
    vg_free(c.ids);
    if (!rc && removed)
        *removed = n;
    return rc;
}
