/*
 * metrics.c: GET /metrics in the Prometheus text format (version 0.0.4). Gauges are read from
 * the store when scraped (wake queue, approvals and memory changes pending, kill switches, store
 * size); counters of runs and tool calls come from the event poller (since the daemon
 * started), the step and model-call latency histograms and the log syncs from the process's
 * own counters (vigil_stats_read), and the HTTP counters from the server.
 */
#include "base/common.h"

#include "base/stats.h"
#include "http/http_int.h"
#include "http/mhd.h"
#include "mcpserve/mcpserve.h"

#include <sys/stat.h>
#include <time.h>

static void gauge(struct vg_buf *b, const char *name, const char *help, double v)
{
    vg_buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n%s %.17g\n", name, help, name, name, v);
}

/* Items of a JSON array answer, -1 when the call failed. */
static long array_len(vigil_code rc, char *text)
{
    json_t *v = rc ? NULL : json_loads(text, 0, NULL);
    long n = json_is_array(v) ? (long)json_array_size(v) : -1;
    json_decref(v);
    vigil_free(text);
    return n;
}

/* How many switches of a vigil_kill_status list are on: one set and then cleared stays in
 * the list (its history), and a dashboard alert on "any switch set" must clear with it. */
static long switches_on(vigil_code rc, char *text)
{
    json_t *v = rc ? NULL : json_loads(text, 0, NULL), *it;
    long n = json_is_array(v) ? 0 : -1;
    size_t i;
    json_array_foreach (v, i, it)
        n += json_is_true(json_object_get(it, "on"));
    json_decref(v);
    vigil_free(text);
    return n;
}

static void wake_queue(struct vg_req *r, struct vg_buf *b)
{
    vigil_error err = {0};
    char *text = NULL;
    json_t *v = NULL, *it;
    size_t i;
    double oldest = -1;
    struct timespec now;
    if (vigil_wake_runs(r->rt, NULL, "queued", 1000, &text, &err) == VIGIL_OK)
        v = json_loads(text, 0, NULL);
    vigil_free(text);
    clock_gettime(CLOCK_REALTIME, &now);
    double now_ms = (double)now.tv_sec * 1000 + (double)now.tv_nsec / 1e6;
    json_array_foreach (v, i, it) {
        json_int_t c = json_integer_value(json_object_get(it, "created_ms"));
        if (c > 0 && (oldest < 0 || c < oldest))
            oldest = (double)c;
    }
    gauge(b, "vigil_wake_queue_depth", "Wakes queued and not yet started (counted up to 1000).",
          (double)json_array_size(v));
    gauge(b, "vigil_wake_queue_oldest_age_seconds", "Age of the oldest queued wake.",
          oldest < 0 ? 0 : (now_ms - oldest) / 1000);
    json_decref(v);
}

static void store_size(struct vg_req *r, struct vg_buf *b)
{
    char wal[4200];
    struct stat st;
    double size = 0;
    if (stat(r->h->store_path, &st) == 0)
        size += (double)st.st_size;
    snprintf(wal, sizeof wal, "%s-wal", r->h->store_path);
    if (stat(wal, &st) == 0)
        size += (double)st.st_size;
    gauge(b, "vigil_store_bytes", "Bytes of the store file and its write-ahead log.", size);
}

/* A label value: the records are the store's, so \\, \" and newlines are escaped as the
 * text format asks. */
static void label(struct vg_buf *b, const char *s)
{
    for (; s && *s; s++)
        vg_buf_printf(b, "%s%c", strchr("\\\"\n", *s) ? "\\" : "", *s == '\n' ? 'n' : *s);
}

/* Per-daemon health on a shared store (PostgreSQL): one series per daemon record, labelled
 * with its holder name, host and pid. A daemon killed without stopping keeps its record, its
 * beat age growing: that is the alarm. */
static void daemons(struct vg_req *r, struct vg_buf *b)
{
    static const struct {
        const char *name, *help, *field;
    } m[] = {
        {"vigil_daemon_beat_age_seconds", "Seconds since the daemon's last beat.", "beat_ms"},
        {"vigil_daemon_runs", "Runs in flight on the daemon at its last beat.", "runs"},
        {"vigil_daemon_leases_held", "Agent leases the daemon holds.", "leases"},
    };
    vigil_error err = {0};
    char *text = NULL;
    json_t *v = NULL, *d;
    size_t i;
    struct timespec now;
    if (vigil_daemon_list(r->rt, &text, &err) == VIGIL_OK)
        v = json_loads(text, 0, NULL);
    vigil_free(text);
    clock_gettime(CLOCK_REALTIME, &now);
    double now_ms = (double)now.tv_sec * 1000 + (double)now.tv_nsec / 1e6;
    for (size_t k = 0; k < VG_ARRAY_LEN(m) && json_array_size(v); k++) {
        vg_buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", m[k].name, m[k].help, m[k].name);
        json_array_foreach (v, i, d) {
            double x = (double)json_integer_value(json_object_get(d, m[k].field));
            if (k == 0)
                x = (now_ms - x) / 1000;
            vg_buf_printf(b, "%s{holder=\"", m[k].name);
            label(b, json_string_value(json_object_get(d, "holder")));
            vg_buf_printf(b, "\",host=\"");
            label(b, json_string_value(json_object_get(d, "host")));
            vg_buf_printf(b, "\",pid=\"%lld\"} %.17g\n",
                          (long long)json_integer_value(json_object_get(d, "pid")), x);
        }
    }
    json_decref(v);
}

static void histogram(struct vg_buf *b, const char *name, const char *help,
                      const vigil_latency_histogram *h)
{
    uint64_t cumulative = 0;
    vg_buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (size_t i = 0; i < VIGIL_LATENCY_BUCKETS; i++) {
        cumulative += h->buckets[i];
        if (i + 1 < VIGIL_LATENCY_BUCKETS)
            vg_buf_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, vigil_latency_bounds[i],
                          (unsigned long long)cumulative);
        else
            vg_buf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cumulative);
    }
    vg_buf_printf(b, "%s_sum %.9f\n%s_count %llu\n", name, h->sum_seconds, name,
                  (unsigned long long)h->count);
}

/* The process's own counters (vigil_stats_read): what the loop and the store count as they
 * go, for every runtime of the daemon. */
static void process_stats(struct vg_buf *b)
{
    vigil_stats st;
    vigil_stats_read(&st);
    histogram(b, "vigil_step_duration_seconds",
              "Loop steps (a model call, its turn committed, its tool calls) in this daemon.",
              &st.steps);
    histogram(b, "vigil_model_call_duration_seconds", "Answered model calls in this daemon.",
              &st.model_calls);
    vg_buf_printf(b,
                  "# HELP vigil_log_syncs_total Syncs of the store's write-ahead log.\n"
                  "# TYPE vigil_log_syncs_total counter\nvigil_log_syncs_total %llu\n"
                  "# HELP vigil_store_commits_total Store transactions that wrote.\n"
                  "# TYPE vigil_store_commits_total counter\nvigil_store_commits_total %llu\n",
                  (unsigned long long)st.log_syncs, (unsigned long long)st.commits);
    struct vg_daemon_counts dc;
    vg_stats_daemon_read(&dc);
    vg_buf_printf(b,
                  "# HELP vigil_daemon_ticks_total Times the daemon's loop looked for work "
                  "(its poll, a poke, a timer).\n"
                  "# TYPE vigil_daemon_ticks_total counter\nvigil_daemon_ticks_total %llu\n"
                  "# HELP vigil_daemon_worker_wakeups_total Times a worker thread was woken "
                  "from idle to claim queued wakes.\n"
                  "# TYPE vigil_daemon_worker_wakeups_total counter\n"
                  "vigil_daemon_worker_wakeups_total %llu\n",
                  (unsigned long long)dc.ticks, (unsigned long long)dc.worker_wakeups);
    struct vg_dispatcher_counts tc;
    vg_stats_dispatcher_read(&tc);
    vg_buf_printf(
        b,
        "# HELP vigil_dispatcher_cpu_seconds_total Thread CPU of the task dispatcher "
        "moving runs' ends on and refilling the slots.\n"
        "# TYPE vigil_dispatcher_cpu_seconds_total counter\n"
        "vigil_dispatcher_cpu_seconds_total %.9f\n"
        "# HELP vigil_dispatcher_run_ends_total Task runs' ends the dispatcher "
        "recorded.\n"
        "# TYPE vigil_dispatcher_run_ends_total counter\n"
        "vigil_dispatcher_run_ends_total %llu\n"
        "# HELP vigil_dispatcher_calls_total The dispatcher's transactions that "
        "recorded runs' ends (ends that came together share one).\n"
        "# TYPE vigil_dispatcher_calls_total counter\nvigil_dispatcher_calls_total %llu\n",
        (double)tc.cpu_ns / 1e9, (unsigned long long)tc.ends, (unsigned long long)tc.calls);
}

void vg_http_metrics_route(struct vg_req *r)
{
    vigil_error err = {0};
    struct vg_buf b;
    char *text = NULL;
    int on = 0;
    vg_buf_init(&b, 0);
    vg_buf_printf(&b,
                  "# HELP vigil_build_info The vigil library serving.\n"
                  "# TYPE vigil_build_info gauge\nvigil_build_info{version=\"%s\"} 1\n",
                  vigil_version());
    wake_queue(r, &b);
    vigil_code rc = vigil_approval_list(r->rt, NULL, "pending", &text, &err);
    gauge(&b, "vigil_approvals_pending", "Tool calls waiting for a person's approval.",
          (double)array_len(rc, text));
    text = NULL;
    rc = vigil_memory_pending(r->rt, NULL, &text, &err);
    gauge(&b, "vigil_memory_changes_pending", "Memory changes waiting for a person.",
          (double)array_len(rc, text));
    (void)vigil_kill_active(r->rt, NULL, NULL, &on, &err);
    gauge(&b, "vigil_kill_switch_global", "1 while the global kill switch is on.", on);
    text = NULL;
    rc = vigil_kill_status(r->rt, &text, &err);
    gauge(&b, "vigil_kill_switches_set", "Kill switches on now (global, agent, tool class).",
          (double)switches_on(rc, text));
    store_size(r, &b);
    daemons(r, &b);
    process_stats(&b);
    vg_events_metrics(r->h->events, &b);
    gauge(&b, "vigil_mcp_sessions", "MCP sessions open at /mcp (revision 2025-11-25).",
          vg_mcpserve_sessions_count(r->h->mcp));
    vg_buf_printf(&b,
                  "# HELP vigil_http_requests_total Requests routed to a handler.\n"
                  "# TYPE vigil_http_requests_total counter\nvigil_http_requests_total %ld\n"
                  "# HELP vigil_http_refused_total Requests refused before a handler.\n"
                  "# TYPE vigil_http_refused_total counter\nvigil_http_refused_total %ld\n"
                  "# HELP vigil_http_header_deadline_cuts_total Connections cut for sending "
                  "their headers too slowly.\n# TYPE vigil_http_header_deadline_cuts_total "
                  "counter\nvigil_http_header_deadline_cuts_total %ld\n",
                  atomic_load(&r->h->requests_total), atomic_load(&r->h->refused_total),
                  atomic_load(&r->h->header_deadline_cuts));
    size_t n = 0;
    char *out = vg_buf_detach(&b, &n);
    struct MHD_Response *resp =
        out ? MHD_create_response_from_buffer_with_free_callback(n, out, vg_free) : NULL;
    if (!resp)
        vg_free(out);
    vg_req_respond(r, resp, "text/plain; version=0.0.4; charset=utf-8");
}
