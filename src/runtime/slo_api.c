/*
 * slo_api.c: vigil_slo, the service levels of a window of runs measured from the runs' own
 * records (`vigil slo`, docs/operations.md, "Service levels"): the success rate of the runs that
 * ended, the side-effect correctness of their tool calls (the share whose effect is known: not
 * left in doubt), run latency (p50, p95, max) and cost (total, per run), each against its
 * objective from the config file's `slo` section. The runs are read newest first, a page at a
 * time, through the run history's own list, until one started before the window: the cost is
 * the window's runs, not the history kept.
 */
#include "base/common.h"

#include <math.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/json.h"
#include "config/config.h"
#include "os/clock.h"
#include "runtime/runtime.h"
#include "runtime/runtime_int.h"

#define SLO_PAGE 500
/* The objectives when the config names none (docs/operations.md). */
#define SLO_SUCCESS_RATE 0.95
#define SLO_SIDE_EFFECTS 1.0
#define SLO_LATENCY_P95_MS 60000

struct slo_window {
    int64_t since;   /* ms: runs started at or after it */
    int64_t started; /* runs started in the window, any status */
    int64_t completed, failed, interrupted, crashed, canceled, unfinished;
    int64_t tool_calls, in_doubt, cost_micros;
    int64_t *durations; /* of the ended runs */
    size_t n, cap;
};

static int keep_duration(struct slo_window *w, int64_t ms)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        int64_t *d = vg_realloc(w->durations, cap * sizeof *d);
        if (!d)
            return -1;
        w->durations = d;
        w->cap = cap;
    }
    w->durations[w->n++] = ms;
    return 0;
}

/* One run of the list into the window's figures; 1 when it started before the window (the
 * list is newest first: nothing after it is in the window), -1 on out of memory. */
static int count_run(struct slo_window *w, json_t *run)
{
    int64_t at = 0;
    const char *started = json_string_value(json_object_get(run, "started_at"));
    if (started && vg_time_parse_ms(started, &at) == 0 && at < w->since)
        return 1;
    const char *st = json_string_value(json_object_get(run, "status"));
    w->started++;
    w->tool_calls += json_integer_value(json_object_get(run, "tool_calls"));
    w->cost_micros += json_integer_value(json_object_get(run, "cost_micros"));
    int64_t *bucket = !st                          ? &w->unfinished
                      : !strcmp(st, "completed")   ? &w->completed
                      : !strcmp(st, "failed")      ? &w->failed
                      : !strcmp(st, "interrupted") ? &w->interrupted
                      : !strcmp(st, "crashed")     ? &w->crashed
                      : !strncmp(st, "cancel", 6)  ? &w->canceled
                                                   : &w->unfinished;
    (*bucket)++;
    if (bucket != &w->unfinished && bucket != &w->canceled)
        return keep_duration(w, json_integer_value(json_object_get(run, "duration_ms")));
    return 0;
}

/* Every run of the window, page by page. */
static vigil_code read_runs(vigil_runtime *rt, const char *agent_id, struct slo_window *w,
                            vigil_error *err)
{
    char *cursor = NULL;
    vigil_code rc = VIGIL_OK;
    for (int done = 0; !done && !rc;) {
        char *text = NULL;
        if ((rc = vigil_runs_list(rt, agent_id, NULL, cursor, SLO_PAGE, &text, err)))
            break;
        json_t *page = json_loads(text, 0, NULL), *run;
        vigil_free(text);
        if (!page) {
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading runs");
            break;
        }
        size_t i;
        json_array_foreach (json_object_get(page, "items"), i, run) {
            int r = count_run(w, run);
            if (r < 0)
                rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading runs");
            if (r)
                done = 1;
            if (r)
                break;
        }
        const char *next = json_string_value(json_object_get(page, "next_cursor"));
        vg_free(cursor);
        cursor = next && !done ? vg_strdup(next) : NULL;
        done = done || !cursor;
        json_decref(page);
    }
    vg_free(cursor);
    return rc;
}

/* The window's operations still in doubt: tool calls whose effect nobody knows. */
static vigil_code read_in_doubt(vigil_runtime *rt, const char *agent_id, struct slo_window *w,
                                vigil_error *err)
{
    char *text = NULL;
    vigil_code rc = vigil_indoubt_list(rt, agent_id, &text, err);
    if (rc)
        return rc;
    json_t *list = json_loads(text, 0, NULL), *item;
    vigil_free(text);
    if (!list)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading operations in doubt");
    size_t i;
    json_array_foreach (list, i, item) {
        int64_t at = 0;
        const char *when = json_string_value(json_object_get(item, "created_at"));
        if (!when || vg_time_parse_ms(when, &at) != 0 || at >= w->since)
            w->in_doubt++;
    }
    json_decref(list);
    return VIGIL_OK;
}

static int by_value(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The nearest-rank percentile p (0..100) of the sorted durations; 0 when there are none. */
static int64_t percentile(const struct slo_window *w, double p)
{
    if (!w->n)
        return 0;
    size_t rank = (size_t)ceil(p / 100.0 * (double)w->n);
    return w->durations[rank ? rank - 1 : 0];
}

/* One objective: {name, target, actual, met}; actual null (and met null) with no data. */
static json_t *objective(const char *name, const char *unit, double target, int has_data,
                         double actual, int higher_is_better)
{
    int met = higher_is_better ? actual >= target : actual <= target;
    return json_pack("{s:s, s:s, s:f, s:o, s:o}", "name", name, "unit", unit, "target", target,
                     "actual", has_data ? json_real(actual) : json_null(), "met",
                     has_data ? json_boolean(met) : json_null());
}

static json_t *objectives(const struct vg_config *cfg, const struct slo_window *w)
{
    int64_t ended = w->completed + w->failed + w->interrupted + w->crashed;
    double success = vg_config_get_double(cfg, "slo.success_rate", SLO_SUCCESS_RATE);
    double effects = vg_config_get_double(cfg, "slo.side_effect_correctness", SLO_SIDE_EFFECTS);
    int64_t p95 = vg_config_get_int(cfg, "slo.latency_p95_ms", SLO_LATENCY_P95_MS);
    double cost = vg_config_get_double(cfg, "slo.cost_per_run_usd", -1);
    json_t *one[4] = {
        objective("success_rate", "share", success, ended > 0,
                  ended ? (double)w->completed / (double)ended : 0, 1),
        objective("side_effect_correctness", "share", effects, w->tool_calls > 0,
                  w->tool_calls ? 1.0 - (double)w->in_doubt / (double)w->tool_calls : 0, 1),
        objective("latency_p95", "ms", (double)p95, w->n > 0, (double)percentile(w, 95), 0),
        /* a cost objective only when the config sets one */
        cost < 0 ? NULL
                 : objective("cost_per_run", "usd", cost, ended > 0,
                             ended ? (double)w->cost_micros / 1e6 / (double)ended : 0, 0)};
    json_t *list = json_array();
    int oom = !list || !one[0] || !one[1] || !one[2] || (cost >= 0 && !one[3]);
    for (size_t i = 0; i < VG_ARRAY_LEN(one); i++) {
        if (oom)
            json_decref(one[i]); /* NULL is fine */
        else if (one[i] && json_array_append_new(list, one[i]))
            oom = 1; /* the append took one[i] */
    }
    if (oom) {
        json_decref(list);
        return NULL;
    }
    return list;
}

static json_t *figures(const struct slo_window *w)
{
    int64_t ended = w->completed + w->failed + w->interrupted + w->crashed;
    return json_pack(
        "{s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:{s:I, s:I}, s:{s:I, s:I, s:I}, "
        "s:{s:f, s:f}}",
        "runs", "started", (json_int_t)w->started, "ended", (json_int_t)ended, "completed",
        (json_int_t)w->completed, "failed", (json_int_t)w->failed, "interrupted",
        (json_int_t)w->interrupted, "crashed", (json_int_t)w->crashed, "canceled",
        (json_int_t)w->canceled, "unfinished", (json_int_t)w->unfinished, "tool_calls", "total",
        (json_int_t)w->tool_calls, "in_doubt", (json_int_t)w->in_doubt, "latency_ms", "p50",
        (json_int_t)percentile(w, 50), "p95", (json_int_t)percentile(w, 95), "max",
        (json_int_t)(w->n ? w->durations[w->n - 1] : 0), "cost_usd", "total",
        (double)w->cost_micros / 1e6, "per_run",
        ended ? (double)w->cost_micros / 1e6 / ended : 0.0);
}

vigil_code vigil_slo(vigil_runtime *rt, const char *agent_id, int64_t window_ms, char **out_json,
                     vigil_error *err)
{
    if (!rt || !out_json || window_ms <= 0)
        return VG_FAIL(err, VIGIL_EINVAL, "service levels need a runtime, an output and a window");
    vigil_code rc = rt->config ? VIGIL_OK : vg_config_load(rt->config_path, &rt->config, err);
    struct slo_window w = {.since = vg_env_now(&rt->env) - window_ms};
    if (!rc)
        rc = read_runs(rt, agent_id, &w, err);
    if (!rc)
        rc = read_in_doubt(rt, agent_id, &w, err);
    json_t *o = NULL;
    if (!rc) {
        if (w.n) /* qsort's array may not be NULL, even empty */
            qsort(w.durations, w.n, sizeof *w.durations, by_value);
        char since[32];
        vg_time_format_ms(since, w.since);
        o = json_pack("{s:s?, s:s, s:I, s:o, s:o}", "agent_id", agent_id, "since", since,
                      "window_ms", (json_int_t)window_ms, "figures", figures(&w), "objectives",
                      objectives(rt->config, &w));
        rc = o ? vg_runtime_json_out(o, out_json, err)
               : VG_FAIL(err, VIGIL_ENOMEM, "out of memory measuring service levels");
    }
    vg_free(w.durations);
    return rc;
}
