/*
 * daemon_api.c: the daemon section of include/vigil.h: `vigil serve` is the wake layer's daemon
 * (src/wake/daemon.c) run with the runtime's host port (wake_runner.c) filled in here, the
 * composition root.
 */
#include "base/common.h"

#include "runtime/options.h"
#include "runtime/wake_runner.h"
#include "wake/wake.h"

void vigil_daemon_options_default(vigil_daemon_options *o)
{
    struct vg_wake_config cfg;
    if (!o)
        return;
    vg_wake_config_defaults(&cfg);
    *o = (vigil_daemon_options){.size = sizeof *o,
                                .workers = 2,
                                .runs_per_worker = 16,
                                .grace_ms = 10000,
                                .poll_ms = 200,
                                .max_failures = cfg.max_failures,
                                .debounce_ms = cfg.debounce_local_ms,
                                .sync_debounce_ms = cfg.debounce_sync_ms,
                                .lease_ms = cfg.lease_ms};
}

vigil_code vigil_daemon_run(const char *store_uri, const vigil_daemon_options *opts_in,
                            vigil_error *err)
{
    if (!store_uri || !*store_uri || !opts_in)
        return VG_FAIL(err, VIGIL_EINVAL, "the daemon needs a store and its options");
    vigil_daemon_options given, *opts = &given;
    vigil_daemon_options_default(&given);
    vigil_code rc = vg_options_read(opts_in, opts_in->size, &given, sizeof given,
                                    VIGIL_DAEMON_OPTIONS_SIZE_0_1, "vigil_daemon_options", err);
    if (rc != VIGIL_OK)
        return rc;
    struct vg_daemon_options d = {.store_path = store_uri,
                                  .workers = opts->workers,
                                  .runs_per_worker = opts->runs_per_worker,
                                  .grace_ms = opts->grace_ms,
                                  .poll_ms = opts->poll_ms,
                                  .runner = opts->runner,
                                  .host = vg_runtime_wake_host(),
                                  .on_runtime = opts->on_runtime,
                                  .on_runtime_user = opts->on_runtime_user};
    struct vg_daemon_service service;
    if (opts->service) {
        service = (struct vg_daemon_service){.user = opts->service->user,
                                             .start = opts->service->start,
                                             .stop = opts->service->stop};
        d.service = &service;
    }
    vg_wake_config_defaults(&d.cfg);
    d.cfg.max_failures = opts->max_failures;
    d.cfg.debounce_local_ms = opts->debounce_ms;
    d.cfg.debounce_sync_ms = opts->sync_debounce_ms;
    if (opts->lease_ms > 0)
        d.cfg.lease_ms = opts->lease_ms;
    return vg_daemon_run(&d, err);
}

vigil_code vigil_daemon_stop(const char *store_uri, vigil_error *err)
{
    return vg_daemon_stop(store_uri, err);
}

vigil_code vigil_daemon_on_runtime(const char *store_uri, vigil_runtime *rt, vigil_error *err)
{
    return vg_daemon_on_runtime(store_uri, rt, err);
}

int vigil_daemon_running(const char *store_uri, long *pid)
{
    return store_uri && vg_daemon_running(store_uri, pid);
}

void vigil_daemon_poke(const char *store_uri)
{
    if (store_uri)
        vg_daemon_poke(store_uri);
}
