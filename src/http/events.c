/*
 * events.c: the live event stream, GET /v1/events (server-sent events).
 *
 * One poller thread, with a runtime of its own, reads what changed in the store as soon as a
 * transaction of this process commits a write (vigil_stats_wait_commit), and every
 * events_poll_ms for other processes' writes, through include/vigil.h: new runs and their end,
 * each new message and tool call of a running run, approvals requested and resolved, memory
 * changes pending and resolved, and kill switch changes. Reading the store (rather than hooking the
 * writers) sees every writer: the daemon's workers, `vigil chat` in another process, the API
 * itself.
 *
 * The events of one poll are appended to the store's event log (vigil_events_append) in one
 * transaction, which gives each its position: store-wide, increasing. The position is the
 * event's id, so Last-Event-ID resumes from the log after a restart too (a restart's first
 * append starts above every position given before, past a hole: vigil_events_append). The
 * append is not synced at its commit (the turns' own durable commits sync it along, Session 23
 * of docs/internals/PERF.md); the poller syncs the log itself once no events came for a second. The
 * newest events are also kept in a ring of events_ring (the clients' fast path). The poller never
 * waits for a client: a stream keeps its own position, and one behind the ring (a slow or stuck
 * client, or a Last-Event-ID from before it) gets a `gap` event and then reads on from the log, on
 * its own connection's thread, until it is back in the ring; resume_at > missed_from in the gap
 * says that the log was trimmed past what it missed. Heartbeats (an SSE comment) keep idle
 * streams and their proxies alive.
 */
#include "base/common.h"
#include "base/json.h"

#include "http/http_int.h"
#include "http/mhd.h"

#include <errno.h>
#include <time.h>

#define RING_SIZE 4096
#define MAX_TRACKED 256
#define LOG_KEEP 100000    /* events the log keeps; older ones are trimmed */
#define LOG_PAGE 200       /* events a lagging stream reads from the log at a time */
#define BATCH_MAX 100000   /* events held while the log cannot be written, before dropping */
#define QUIET_SYNC_MS 1000 /* no events for this long: the poller syncs the log's appends */

struct event {
    int64_t id;
    char kind[32];
    char agent[40];
    char *data; /* JSON text */
};

/* Upper bounds (seconds) of the run-duration histogram's buckets. */
static const double duration_bounds[] = {0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300};

struct tracked_run {
    char run_id[40], agent_id[40], status[16];
    size_t n_msgs, n_tools;
    /* The journal sequences of the newest message and tool call seen: the next look reads only
     * what comes after them (vigil_run_follow), so a running run's items are read once. */
    int64_t after[2];
    int seen;    /* in the latest listing */
    int spawned; /* it called spawn_agents: its decisions are events at its end */
    /* Tool calls first seen still running: counted in /metrics by how they ended, once the run
     * has (a call counted as first seen would never count as failed: trial J3). */
    char open_calls[8][40];
    int n_open;
};

struct vg_events {
    struct vg_http *h;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping;
    struct event ring[RING_SIZE];
    int ring_size;             /* events kept in the ring: h->o.events_ring, at most RING_SIZE */
    int64_t first_id, next_id; /* ids in the ring: [max(first_id, next_id - ring_size), next_id) */
    /* Events of this poll, not yet in the log (poller thread only): their strings owned, the
     * data as the text the log and the ring keep. */
    vigil_event *batch;
    size_t n_batch, batch_cap;
    int unsynced;           /* events appended since the last vigil_events_sync (poller) */
    int64_t appended_ms;    /* when the last were (monotonic; poller) */
    long dropped;           /* events lost because the log could not be written (under mu) */
    long long events_total; /* events of the log taken into the ring (under mu) */
    /* Lagging streams read the log through their own runtime, one at a time. */
    pthread_mutex_t log_mu;
    vigil_runtime *log_rt;
    /* poller state (poller thread only) */
    vigil_runtime *rt;
    struct tracked_run runs[MAX_TRACKED];
    int n_runs, baseline_done;
    /* Ended runs forgotten lately (a ring): a longer listing that shows one again must not
     * take it for new (its events again, its end counted twice in /metrics). */
    char forgotten[MAX_TRACKED][40];
    int forgotten_next;
    json_t *approvals, *memory_pending, *indoubt; /* id -> agent, pending at the last poll */
    json_t *tasks; /* task id -> status at the last poll (under mu: /metrics reads it) */
    int64_t task_counts[VIGIL_TASK_STATUSES]; /* vigil_task_counts when tasks was read */
    json_t *child_open; /* a child's run key -> its agent: still running when its run ended */
    json_t *spawns_by_decision, *children_by_status; /* counters for /metrics (under mu) */
    char *kill_text;
    /* counters for /metrics (under mu) */
    long streams, gaps;
    struct stream *all; /* the open streams (under mu) */
    json_t *runs_by_outcome, *tools_by_status;
    json_t *tool_failures;  /* failed tool calls by tool name */
    json_t *usage_by_model; /* model -> {input_tokens, output_tokens, cost_micros, model_calls} */
    long duration_buckets[VG_ARRAY_LEN(duration_bounds) + 1];
    double duration_sum;
    long duration_count;
};

static int64_t mono_ms(void);
static const char *item_id(json_t *it);
static json_t *load(vigil_code rc, char *text);

static int64_t oldest_id(const struct vg_events *ev)
{
    return VG_MAX(ev->first_id, ev->next_id - ev->ring_size);
}

static void batch_clear(struct vg_events *ev)
{
    for (size_t i = 0; i < ev->n_batch; i++) {
        vg_free((char *)ev->batch[i].kind);
        vg_free((char *)ev->batch[i].agent_id);
        vg_free((char *)ev->batch[i].key);
        vg_free((char *)ev->batch[i].data_json);
    }
    ev->n_batch = 0;
}

/* Room for one more event in the batch; 0 when it is full or memory ran out. */
static int batch_room(struct vg_events *ev)
{
    if (ev->n_batch == BATCH_MAX)
        return 0;
    if (ev->n_batch < ev->batch_cap)
        return 1;
    size_t cap = ev->batch_cap ? 2 * ev->batch_cap : 64;
    vigil_event *more = vg_realloc(ev->batch, cap * sizeof *more);
    if (!more)
        return 0;
    ev->batch = more;
    ev->batch_cap = cap;
    return 1;
}

/* Queue an event for the log (poller thread only); takes data (owned), kept as its text, which
 * the log and then the ring keep as they are. An event about one thing (a run, message, tool
 * call, approval...) is keyed by its kind and that thing's id, so that several daemons deriving
 * it from one store append it once (vigil_events_append). The id is what names the fact the
 * event tells: the item's own id (item_id), or one the caller makes when the item's id names
 * something several events tell of (a task's every status, a call's every decision). */
static void emit_as(struct vg_events *ev, const char *kind, const char *agent, json_t *data,
                    const char *id)
{
    char key[200];
    snprintf(key, sizeof key, "%s:%s", kind, id);
    int keyed = *id && strlen(id) < 150;
    char *text =
        data && batch_room(ev) ? vg_json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(data);
    if (text) {
        vigil_event e = {.kind = vg_strdup(kind),
                         .agent_id = agent && *agent ? vg_strdup(agent) : NULL,
                         .key = keyed ? vg_strdup(key) : NULL,
                         .data_json = text};
        if (e.kind && (e.agent_id || !(agent && *agent)) && (e.key || !keyed)) {
            ev->batch[ev->n_batch++] = e;
            return;
        }
        vg_free((char *)e.kind); /* out of memory for its strings */
        vg_free((char *)e.agent_id);
        vg_free((char *)e.key);
        vg_free(text);
    }
    if (!data)
        return;
    pthread_mutex_lock(&ev->mu);
    ev->dropped++;
    pthread_mutex_unlock(&ev->mu);
}

static void emit(struct vg_events *ev, const char *kind, const char *agent, json_t *data)
{
    emit_as(ev, kind, agent, data, data ? item_id(data) : "");
}

/* Into the ring (under ev->mu): the event at position pos, its data text taken. */
static void ring_put_text(struct vg_events *ev, int64_t pos, const char *kind, const char *agent,
                          char *text)
{
    if (pos != ev->next_id) /* another writer of the log: the ring starts over here */
        ev->first_id = ev->next_id = pos;
    struct event *e = &ev->ring[pos % ev->ring_size];
    free(e->data);
    e->id = ev->next_id++;
    snprintf(e->kind, sizeof e->kind, "%s", kind ? kind : "");
    snprintf(e->agent, sizeof e->agent, "%s", agent ? agent : "");
    e->data = text;
    ev->events_total++;
}

/* Into the ring (under ev->mu): the event read from the log at position pos. */
static void ring_put(struct vg_events *ev, int64_t pos, json_t *it)
{
    char *text = vg_json_dumps(json_object_get(it, "data"), JSON_COMPACT | JSON_ENCODE_ANY);
    if (text)
        ring_put_text(ev, pos, json_string_value(json_object_get(it, "kind")),
                      json_string_value(json_object_get(it, "agent_id")), text);
}

static void resume_streams(struct vg_events *ev, int beats_only);

/* The log's events past the ring into the ring: this daemon's, and those other daemons on
 * one PostgreSQL store appended (each event is in the log once, whoever derived it first). */
static void catch_up(struct vg_events *ev)
{
    for (int page = 0; page < 100; page++) {
        char *text = NULL;
        vigil_error err = {0};
        vigil_code rc = vigil_events_read(ev->rt, ev->next_id - 1, NULL, 1000, &text, &err);
        json_t *items = load(rc, text), *it;
        size_t i, n = json_array_size(items);
        pthread_mutex_lock(&ev->mu);
        json_array_foreach (items, i, it)
            ring_put(ev, json_integer_value(json_object_get(it, "position")), it);
        if (n)
            pthread_cond_broadcast(&ev->cv);
        pthread_mutex_unlock(&ev->mu);
        if (n)
            resume_streams(ev, 0);
        json_decref(items);
        if (n < 1000)
            return;
    }
}

/* The appended events into the ring at once, when they follow it (no other writer appended
 * in between: the log's newest was the ring's last), their texts moved there: reading them
 * back from the log cost every poll a decoding and an encoding of each (Session 26 of
 * docs/internals/PERF.md). Otherwise catch_up reads them from the log with the others'. */
static void ring_append(struct vg_events *ev)
{
    size_t i = 0, put = 0;
    while (i < ev->n_batch && !ev->batch[i].position)
        i++;
    pthread_mutex_lock(&ev->mu);
    if (i < ev->n_batch && ev->batch[i].position == ev->next_id)
        for (; i < ev->n_batch; i++) {
            vigil_event *e = &ev->batch[i];
            if (!e->position)
                continue;
            ring_put_text(ev, e->position, e->kind, e->agent_id, (char *)e->data_json);
            e->data_json = NULL;
            put++;
        }
    if (put)
        pthread_cond_broadcast(&ev->cv);
    pthread_mutex_unlock(&ev->mu);
    if (put)
        resume_streams(ev, 0);
}

/* The poll's events into the log, which gives their positions, then into the ring (and the
 * log's events past the ring, other daemons'). When the log cannot be written they wait for the
 * next poll. Returns the commits it made (the append, a trim), which the poller must not take
 * for news. */
static int flush(struct vg_events *ev)
{
    size_t n = ev->n_batch;
    int64_t first = 0, given = 0;
    vigil_error err = {0};
    if (n && vigil_events_append_list(ev->rt, ev->batch, n, &err) != VIGIL_OK)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (ev->batch[i].position) {
            first = first ? first : ev->batch[i].position;
            given++;
        }
    if (given)
        ring_append(ev);
    catch_up(ev);
    batch_clear(ev);
    if (!n) {
        /* Quiet for QUIET_SYNC_MS: what the last polls appended made durable now, off the
         * turns' path (while turns go on, their own durable commits sync it along). */
        vigil_error serr = {0};
        if (ev->unsynced && mono_ms() - ev->appended_ms >= QUIET_SYNC_MS &&
            vigil_events_sync(ev->rt, &serr) == VIGIL_OK)
            ev->unsynced = 0;
        return 0;
    }
    ev->unsynced = 1;
    ev->appended_ms = mono_ms();
    int64_t newest = first + given - 1;
    if (given && newest / 1024 != (first - 1) / 1024 && newest > LOG_KEEP) /* now and then */
        return 1 + (vigil_events_trim(ev->rt, newest - LOG_KEEP, &err) == VIGIL_OK);
    return 1;
}

static void count(struct vg_events *ev, json_t *counts, const char *key)
{
    pthread_mutex_lock(&ev->mu);
    json_t *v = json_object_get(counts, key ? key : "unknown");
    json_object_set_new(counts, key ? key : "unknown", json_integer(json_integer_value(v) + 1));
    pthread_mutex_unlock(&ev->mu);
}

/* ---- the poller -------------------------------------------------------------------------------
 */

static const char *item_id(json_t *it)
{
    static const char *const keys[] = {"record_id", "tool_call_id", "id", "operation_id", "run_id"};
    for (size_t i = 0; i < VG_ARRAY_LEN(keys); i++)
        if (json_is_string(json_object_get(it, keys[i])))
            return json_string_value(json_object_get(it, keys[i]));
    return "";
}

static json_t *load(vigil_code rc, char *text)
{
    json_t *v = rc ? NULL : json_loads(text ? text : "null", JSON_DECODE_ANY, NULL);
    vigil_free(text);
    return v;
}

static const char *call_id(json_t *call)
{
    const char *id = json_string_value(json_object_get(call, "tool_call_id"));
    return id ? id : "";
}

static void count_outcome(struct vg_events *ev, json_t *call)
{
    const char *status = json_string_value(json_object_get(call, "status"));
    count(ev, ev->tools_by_status, status);
    if (status && !strcmp(status, "failed"))
        count(ev, ev->tool_failures, json_string_value(json_object_get(call, "name")));
}

/* A tool call of the run in /metrics by its outcome: at once when it has ended, else at the
 * run's end (ended_calls), when its outcome is known; more than open_calls holds at once are
 * counted as they stand. */
static void count_call(struct vg_events *ev, struct tracked_run *t, json_t *call)
{
    const char *status = json_string_value(json_object_get(call, "status"));
    const char *id = call_id(call);
    if (status && !strcmp(status, "running") && *id && strlen(id) < sizeof t->open_calls[0] &&
        t->n_open < (int)VG_ARRAY_LEN(t->open_calls)) {
        snprintf(t->open_calls[t->n_open++], sizeof t->open_calls[0], "%s", id);
        return;
    }
    count_outcome(ev, call);
}

/* The calls first seen running, counted by how they ended now that their run has. */
static void ended_calls(struct vg_events *ev, struct tracked_run *t)
{
    char *text = NULL;
    vigil_error err = {0};
    int n = t->n_open;
    t->n_open = 0;
    if (!n)
        return;
    vigil_code rc = vigil_run_tools(ev->rt, t->run_id, NULL, 1000, &text, &err);
    json_t *o = load(rc, text); /* text read after the call, not as its sibling */
    json_t *items = json_object_get(o, "items"), *call;
    size_t i;
    json_array_foreach (items, i, call)
        for (int k = 0; k < n; k++)
            if (t->open_calls[k][0] && !strcmp(t->open_calls[k], call_id(call))) {
                count_outcome(ev, call); /* as it stands at the run's end */
                t->open_calls[k][0] = '\0';
            }
    for (int k = 0; k < n; k++) /* not in the listing: counted as first seen */
        if (t->open_calls[k][0])
            count(ev, ev->tools_by_status, "running");
    json_decref(o);
}

/* One of a run's new items (a message or a tool call) as an event. */
static void run_item(struct vg_events *ev, struct tracked_run *t, json_t *it, int tool, int quiet)
{
    (*(tool ? &t->n_tools : &t->n_msgs))++;
    if (tool)
        count_call(ev, t, it);
    const char *name = tool ? json_string_value(json_object_get(it, "name")) : NULL;
    if (name && !strcmp(name, "spawn_agents"))
        t->spawned = 1;
    if (quiet)
        return;
    json_object_set_new(it, "run_id", json_string(t->run_id));
    json_object_set_new(it, "agent_id", json_string(t->agent_id));
    emit(ev, tool ? "tool_call" : "message", t->agent_id, json_incref(it));
}

/* A run's messages and tool calls added since the last look, as events: only the journal's
 * records past the sequences seen are read (about a million instructions a poll went to
 * reading and decoding a running run's items again, Session 23 of docs/internals/PERF.md). */
static void run_items(struct vg_events *ev, struct tracked_run *t, int quiet)
{
    for (int page = 0; page < 100; page++) {
        char *text = NULL;
        vigil_error err = {0};
        vigil_code rc = vigil_run_follow(ev->rt, t->run_id, t->after, 200, &text, &err);
        json_t *o = load(rc, text); /* (text is read after the call, not as its sibling) */
        json_t *after = json_object_get(o, "after"), *it;
        size_t i;
        json_array_foreach (json_object_get(o, "messages"), i, it)
            run_item(ev, t, it, 0, quiet);
        json_array_foreach (json_object_get(o, "tool_calls"), i, it)
            run_item(ev, t, it, 1, quiet);
        if (json_array_size(after) == 2) {
            t->after[0] = json_integer_value(json_array_get(after, 0));
            t->after[1] = json_integer_value(json_array_get(after, 1));
        }
        int more = json_is_true(json_object_get(o, "more"));
        json_decref(o);
        if (!more)
            break;
    }
}

/* An ended run's usage into the counters by model and the duration histogram, from its listing
 * item (or its vigil_run_show): both carry model, usage, cost and duration (showing each ended
 * run again cost about 2.2 M instructions a chat turn, Session 25 of docs/internals/PERF.md). */
static void account_run(struct vg_events *ev, json_t *run)
{
    static const char *const keys[] = {"input_tokens", "output_tokens"};
    const char *model = json_string_value(json_object_get(run, "model"));
    double secs = (double)json_integer_value(json_object_get(run, "duration_ms")) / 1000;
    json_t *usage = json_object_get(run, "usage");
    pthread_mutex_lock(&ev->mu);
    json_t *m = json_object_get(ev->usage_by_model, model ? model : "default");
    if (!m)
        json_object_set_new(ev->usage_by_model, model ? model : "default", m = json_object());
    for (size_t i = 0; i < VG_ARRAY_LEN(keys); i++)
        json_object_set_new(m, keys[i],
                            json_integer(json_integer_value(json_object_get(m, keys[i])) +
                                         json_integer_value(json_object_get(usage, keys[i]))));
    json_object_set_new(m, "cost_micros",
                        json_integer(json_integer_value(json_object_get(m, "cost_micros")) +
                                     json_integer_value(json_object_get(run, "cost_micros"))));
    json_object_set_new(m, "model_calls",
                        json_integer(json_integer_value(json_object_get(m, "model_calls")) +
                                     json_integer_value(json_object_get(run, "model_calls"))));
    size_t b = 0;
    while (b < VG_ARRAY_LEN(duration_bounds) && secs > duration_bounds[b])
        b++;
    ev->duration_buckets[b]++;
    ev->duration_sum += secs;
    ev->duration_count++;
    pthread_mutex_unlock(&ev->mu);
}

static int final_status(const char *s)
{
    return strcmp(s, "running") && strcmp(s, "queued");
}

static struct tracked_run *track(struct vg_events *ev, json_t *run)
{
    const char *id = json_string_value(json_object_get(run, "run_id"));
    if (!id)
        return NULL;
    for (int i = 0; i < ev->n_runs; i++)
        if (!strcmp(ev->runs[i].run_id, id))
            return &ev->runs[i];
    if (ev->n_runs == MAX_TRACKED)
        return NULL;
    struct tracked_run *t = &ev->runs[ev->n_runs++];
    memset(t, 0, sizeof *t);
    snprintf(t->run_id, sizeof t->run_id, "%s", id);
    snprintf(t->agent_id, sizeof t->agent_id, "%s",
             json_string_value(json_object_get(run, "agent_id"))
                 ? json_string_value(json_object_get(run, "agent_id"))
                 : "");
    return t;
}

/* The run as it started, for run.started: the poller may first see a run after it ended (a
 * fast turn between two polls), and a started event that says "completed" misleads whoever
 * keys on its status. What the run did comes with its items and run.ended. */
static json_t *as_started(json_t *run)
{
    json_t *v = json_copy(run);
    static const char *const spent[] = {"steps", "model_calls", "tool_calls", "cost_micros"};
    if (!v)
        return NULL;
    json_object_set_new(v, "status", json_string("running"));
    json_object_set_new(v, "ended_at", json_null());
    json_object_set_new(v, "duration_ms", json_null());
    json_object_set_new(v, "usage", json_null());
    json_object_set_new(v, "summary_preview", json_null());
    json_object_set_new(v, "summary_truncated", json_false());
    json_object_set_new(v, "error", json_null());
    for (size_t i = 0; i < VG_ARRAY_LEN(spent); i++)
        if (json_object_get(v, spent[i]))
            json_object_set_new(v, spent[i], json_integer(0));
    return v;
}

/* ---- delegation and the task graph, read from the records that exist -------------------------
 * Nothing is written for them on the orchestrator's paths: a run that called spawn_agents has its
 * decisions read at its end (spawn.admitted, spawn.queued, spawn.awaiting_approval,
 * spawn.denied); a spawned child's end is read from its lineage when a run of it ends
 * (child.ended); tasks are listed each poll and a changed status is task.status. */

/* The decisions of a run that spawned, as spawn.<decision> events. */
static void spawn_events(struct vg_events *ev, struct tracked_run *t)
{
    vigil_error err = {0};
    char *text = NULL, kind[48];
    vigil_code rc = vigil_run_show(ev->rt, t->run_id, &text, &err);
    json_t *run = load(rc, text), *d;
    size_t i;
    json_array_foreach (json_object_get(run, "spawn_decisions"), i, d) {
        const char *decision = json_string_value(json_object_get(d, "decision"));
        snprintf(kind, sizeof kind, "spawn.%s", decision ? decision : "denied");
        count(ev, ev->spawns_by_decision, decision ? decision : "denied");
        json_t *e = json_deep_copy(d);
        json_object_del(e, "request");
        json_object_set_new(e, "run_id", json_string(t->run_id));
        json_object_set_new(e, "agent_id", json_string(t->agent_id));
        /* one per request: keyed by the run alone, a call's second decision of a kind was
         * taken for the first and left out of the log (trial M5) */
        char id[96];
        const char *group = json_string_value(json_object_get(d, "group"));
        snprintf(id, sizeof id, "%s/%lld", group ? group : "",
                 (long long)json_integer_value(json_object_get(d, "index")));
        emit_as(ev, kind, t->agent_id, e, id);
    }
    json_decref(run);
}

static int child_final(const char *status)
{
    return status && strcmp(status, "running") && strcmp(status, "waiting") &&
           strcmp(status, "approval");
}

/* Does the child (run key ck) have children of its own still open, in the agent's tree? */
static int open_grandchildren(json_t *tree, const char *ck)
{
    json_t *k;
    size_t i;
    json_array_foreach (json_object_get(tree, "children"), i, k) {
        const char *prk = json_string_value(json_object_get(k, "parent_run_key"));
        if (prk && !strcmp(prk, ck) &&
            !child_final(json_string_value(json_object_get(k, "status"))))
            return 1;
    }
    return 0;
}

/* The child's end a run's end makes: its record is written just after the run's (the poller may
 * see the run first); an interrupted or crashed run is run again, no end. */
static const char *end_of(const char *run_status)
{
    if (!run_status)
        return NULL;
    if (!strcmp(run_status, "completed") || !strcmp(run_status, "failed"))
        return run_status;
    return strcmp(run_status, "canceled") ? NULL : "cancelled";
}

/* A run of a spawned child ended (its own, reason spawn, or the wake that brought its children's
 * results, reason children): the children of the agent that ended are child.ended events. A
 * child that spawned is finished only by its results wake: until then it is remembered open. */
static void child_events(struct vg_events *ev, struct tracked_run *t, json_t *run)
{
    vigil_error err = {0};
    char *text = NULL;
    const char *key = json_string_value(json_object_get(run, "run_key"));
    const char *reason = json_string_value(json_object_get(run, "wake_reason"));
    int spawn = reason && !strcmp(reason, "spawn");
    if (!key || !reason || (!spawn && strcmp(reason, "children")))
        return;
    vigil_code rc = vigil_agent_tree(ev->rt, t->agent_id, &text, &err);
    json_t *tree = load(rc, text), *c;
    size_t i;
    json_array_foreach (json_object_get(tree, "spawned_by"), i, c) {
        const char *ck = json_string_value(json_object_get(c, "run_key"));
        const char *st = json_string_value(json_object_get(c, "status"));
        if (!ck || !(spawn ? !strcmp(ck, key) : json_object_get(ev->child_open, ck) != NULL))
            continue;
        if (!child_final(st) && !open_grandchildren(tree, ck))
            st = end_of(json_string_value(json_object_get(run, "status")));
        if (!child_final(st) || !st) {
            json_object_set_new(ev->child_open, ck, json_string(t->agent_id));
            continue;
        }
        json_object_del(ev->child_open, ck);
        count(ev, ev->children_by_status, st);
        emit(ev, "child.ended", t->agent_id,
             json_pack("{s:s, s:s, s:s, s:O, s:O, s:s}", "run_key", ck, "agent_id", t->agent_id,
                       "status", st, "parent_agent_id", json_object_get(c, "parent_agent"),
                       "parent_run_key", json_object_get(c, "parent_run_key"), "run_id",
                       t->run_id));
    }
    json_decref(tree);
}

static void delegation_events(struct vg_events *ev, struct tracked_run *t, json_t *run)
{
    if (t->spawned)
        spawn_events(ev, t);
    child_events(ev, t, run);
}

/* Each task whose status changed since the last poll (or that is new) as task.status. The list
 * is read only when the counts by status changed: every change of a task's status moves it
 * towards an end (or adds it), so it changes them; listing 100 tasks at every poll cost about
 * 4.5 M instructions a poll (docs/internals/PERF.md, Session 31). */
static void poll_tasks(struct vg_events *ev)
{
    vigil_error err = {0};
    char *text = NULL;
    int64_t counts[VIGIL_TASK_STATUSES] = {0};
    if (vigil_task_counts(ev->rt, counts, &err) ||
        (ev->tasks && !memcmp(counts, ev->task_counts, sizeof counts)))
        return;
    vigil_code rc = vigil_task_list(ev->rt, NULL, &text, &err);
    json_t *list = load(rc, text), *it, *now = json_object();
    size_t i;
    if (!json_is_array(list) || !now) {
        json_decref(list);
        json_decref(now);
        return;
    }
    json_array_foreach (list, i, it) {
        const char *id = json_string_value(json_object_get(it, "id"));
        json_t *st = json_object_get(it, "status");
        if (!id || !json_is_string(st))
            continue;
        json_object_set(now, id, st);
        json_t *was = ev->tasks ? json_object_get(ev->tasks, id) : NULL;
        if (ev->baseline_done && (!was || !json_equal(was, st))) {
            json_t *e = json_deep_copy(it);
            json_object_set(e, "previous", was ? was : json_null());
            /* each status a task reaches: keyed by the task alone, every change after its
             * first was taken for that one and left out of the log (trial M2) */
            char key[128];
            snprintf(key, sizeof key, "%s/%s/%lld/%lld", id, json_string_value(st),
                     (long long)json_integer_value(json_object_get(it, "version")),
                     (long long)json_integer_value(json_object_get(it, "attempts")));
            emit_as(ev, "task.status", json_string_value(json_object_get(it, "agent")), e, key);
        }
    }
    json_decref(list);
    memcpy(ev->task_counts, counts, sizeof counts);
    pthread_mutex_lock(&ev->mu);
    json_decref(ev->tasks);
    ev->tasks = now;
    pthread_mutex_unlock(&ev->mu);
}

/* One run of the listing (or shown alone): its start, new items and end as events. */
static void poll_run(struct vg_events *ev, json_t *run, int quiet)
{
    const char *status = json_string_value(json_object_get(run, "status"));
    int fresh = 0;
    struct tracked_run *t = track(ev, run);
    if (!status)
        status = "unknown";
    if (!t)
        return;
    t->seen = 1;
    if (!t->status[0]) {
        fresh = 1;
        if (!quiet)
            emit(ev, "run.started", t->agent_id, as_started(run));
    }
    if (!strcmp(t->status, status) && final_status(status))
        return; /* ended before and nothing new */
    if (!quiet || !final_status(status)) {
        run_items(ev, t, quiet);
    }
    if (final_status(status) && (fresh ? !quiet : 1)) {
        ended_calls(ev, t);
        count(ev, ev->runs_by_outcome, status);
        account_run(ev, run);
        emit(ev, "run.ended", t->agent_id, json_incref(run));
        delegation_events(ev, t, run);
    }
    snprintf(t->status, sizeof t->status, "%s", status);
}

/* A page of the newest runs: limit of them after cursor (NULL: from the newest); *next the
 * cursor of the page after it (owned; NULL at the end). */
static json_t *list_runs(struct vg_events *ev, const char *cursor, int limit, char **next)
{
    vigil_error err = {0};
    char *text = NULL;
    vigil_code rc = vigil_runs_list(ev->rt, NULL, NULL, cursor, limit, &text, &err);
    json_t *o = load(rc, text);
    json_t *items = json_object_get(o, "items");
    const char *after = json_string_value(json_object_get(o, "next_cursor"));
    *next = after ? vg_strdup(after) : NULL;
    json_incref(items);
    json_decref(o);
    return items;
}

/* Whether the poller knows the run: tracked, or an ended run forgotten lately. */
static int known(const struct vg_events *ev, const char *id)
{
    for (int k = 0; k < ev->n_runs; k++)
        if (!strcmp(ev->runs[k].run_id, id))
            return 1;
    for (int k = 0; k < MAX_TRACKED; k++)
        if (!strcmp(ev->forgotten[k], id))
            return 1;
    return 0;
}

/* Whether every run of a full page is new: more runs may have begun since the last poll, on
 * the pages after it. */
static int all_new(const struct vg_events *ev, json_t *page, int limit)
{
    json_t *oldest = json_array_get(page, json_array_size(page) - 1);
    const char *id = json_string_value(json_object_get(oldest, "run_id"));
    return (int)json_array_size(page) == limit && id && !known(ev, id);
}

/* Whether run is an ended run forgotten lately (still ended: nothing new). */
static int forgotten(const struct vg_events *ev, json_t *run)
{
    const char *id = json_string_value(json_object_get(run, "run_id"));
    const char *status = json_string_value(json_object_get(run, "status"));
    if (!id || !status || !final_status(status))
        return 0;
    for (int k = 0; k < MAX_TRACKED; k++)
        if (!strcmp(ev->forgotten[k], id))
            return 1;
    return 0;
}

/* The newest runs, RUNS_SHORT first (most polls find none or one new: reading and decoding a
 * longer listing was most of a poll's cost, Session 25 of docs/internals/PERF.md), then, while
 * a page's runs are all new, the pages after it, each making the listing four times as long,
 * up to RUNS_MAX: every run is read once, and only as far back as the newest run known (a
 * listing made longer from the top again read the new runs twice, and took forgotten runs for
 * new: 2, then 8, then 50 runs for two new ones, Session 26). The baseline reads RUNS_BASE. */
#define RUNS_SHORT 2
#define RUNS_BASE 50
#define RUNS_MAX 200 /* below MAX_TRACKED: a burst this long between polls is followed whole */
static json_t *newest_runs(struct vg_events *ev, int quiet)
{
    char *cursor = NULL;
    int limit = quiet ? RUNS_BASE : RUNS_SHORT;
    json_t *items = list_runs(ev, NULL, limit, &cursor);
    for (int total = limit; !quiet && cursor && total < RUNS_MAX && all_new(ev, items, total);) {
        char *next = NULL;
        limit = VG_MIN(3 * total, RUNS_MAX - total);
        json_t *page = list_runs(ev, cursor, limit, &next);
        vg_free(cursor);
        cursor = next;
        if (!page || json_array_extend(items, page)) {
            json_decref(page);
            break;
        }
        json_decref(page);
        total += limit;
    }
    vg_free(cursor);
    return items;
}

static void poll_runs(struct vg_events *ev)
{
    int quiet = !ev->baseline_done;
    json_t *items = newest_runs(ev, quiet);
    size_t i;
    for (int k = 0; k < ev->n_runs; k++)
        ev->runs[k].seen = 0;
    for (i = json_array_size(items); i-- > 0;) /* oldest first */
        if (!forgotten(ev, json_array_get(items, i)))
            poll_run(ev, json_array_get(items, i), quiet);
    json_decref(items);
    for (int k = 0; k < ev->n_runs; k++) {
        char *text = NULL;
        vigil_error err = {0};
        if (ev->runs[k].seen || final_status(ev->runs[k].status))
            continue;
        vigil_code rc = vigil_run_show(ev->rt, ev->runs[k].run_id, &text, &err);
        json_t *run = load(rc, text); /* text read after the call: not an argument beside it */
        if (run)
            poll_run(ev, run, quiet); /* may track no new run: k stays valid */
        json_decref(run);
    }
    /* Forget ended runs that left the listing. */
    for (int k = 0; k < ev->n_runs;)
        if (!ev->runs[k].seen && final_status(ev->runs[k].status)) {
            memcpy(ev->forgotten[ev->forgotten_next], ev->runs[k].run_id, 40);
            ev->forgotten_next = (ev->forgotten_next + 1) % MAX_TRACKED;
            ev->runs[k] = ev->runs[--ev->n_runs];
        } else
            k++;
}

/* Compare a pending list with the last one: new items are `<what>.requested`, gone ones
 * `<what>.resolved`. */
static void poll_pending(struct vg_events *ev, json_t *now, json_t **last, const char *req,
                         const char *res)
{
    json_t *ids = json_object(), *it;
    size_t i;
    const char *id;
    json_t *agent;
    json_array_foreach (now, i, it) {
        id = item_id(it);
        agent = json_object_get(it, "agent_id");
        json_object_set(ids, id, agent ? agent : json_null());
        if (*last && !json_object_get(*last, id))
            emit(ev, req, json_string_value(json_object_get(it, "agent_id")), json_incref(it));
    }
    if (*last) {
        void *tmp;
        json_object_foreach_safe (*last, tmp, id, agent) {
            if (!json_object_get(ids, id))
                emit(ev, res, json_string_value(agent),
                     json_pack("{s:s, s:O}", "id", id, "agent_id", agent));
        }
    }
    json_decref(*last);
    *last = ids;
}

static void poll_once(struct vg_events *ev)
{
    vigil_error err = {0};
    char *text = NULL;
    poll_runs(ev);
    poll_tasks(ev);
    vigil_code rc = vigil_approval_list(ev->rt, NULL, "pending", &text, &err);
    json_t *a = load(rc, text);
    if (json_is_array(a))
        poll_pending(ev, a, &ev->approvals, "approval.requested", "approval.resolved");
    json_decref(a);
    text = NULL;
    rc = vigil_memory_pending(ev->rt, NULL, &text, &err);
    json_t *m = load(rc, text);
    if (json_is_array(m))
        poll_pending(ev, m, &ev->memory_pending, "memory.pending", "memory.resolved");
    json_decref(m);
    text = NULL;
    rc = vigil_indoubt_list(ev->rt, NULL, &text, &err);
    json_t *d = load(rc, text);
    if (json_is_array(d))
        poll_pending(ev, d, &ev->indoubt, "indoubt.pending", "indoubt.resolved");
    json_decref(d);
    text = NULL;
    if (vigil_kill_status(ev->rt, &text, &err) == VIGIL_OK) {
        if (ev->kill_text && strcmp(ev->kill_text, text))
            emit(ev, "kill", NULL, json_pack("{s:o}", "switches", json_loads(text, 0, NULL)));
        vigil_free(ev->kill_text);
        ev->kill_text = text;
    }
    ev->baseline_done = 1;
}

static int stopping(struct vg_events *ev)
{
    pthread_mutex_lock(&ev->mu);
    int stop = ev->stopping;
    pthread_mutex_unlock(&ev->mu);
    return stop;
}

/* Poll again soon after a transaction of this process that wrote commits (the daemon's
 * workers, the API), or after events_poll_ms for the writes of other processes (`vigil chat`),
 * which no in-process signal reaches. The poller's own commits (flush) are not news. A commit
 * brings the poll forward to COALESCE_MS after the last one: a chat turn commits several times
 * (its run, each message, its end), and a poll per commit would cost the turn more CPU than it
 * spends itself, with a log append for each poll that found something; the events of those
 * commits come in one poll and one append instead, at most COALESCE_MS later. Once a poll is
 * brought forward, or while no stream is open, the poller stops listening for commits
 * (quiet_wait): each commit it listens for wakes it (a futex wake in the committing turn and a
 * context switch, five a chat turn), and without a stream nobody waits for the news: the log
 * and /metrics get them at the next events_poll_ms, as for other processes' writes (Session 27
 * of docs/internals/PERF.md). A stream opening wakes it; the commits it did not listen for are
 * news then. The commit count is read before a poll, so a commit during the poll is not slept
 * through. The waits are in slices of at most STOP_CHECK_MS so that a stop is seen soon. */
#define STOP_CHECK_MS 200
#define COALESCE_MS 25

/* Wait up to ms without listening for commits: a stop or a stream opening ends it early.
 * Returns whether a stream is open. */
static int quiet_wait(struct vg_events *ev, int64_t ms)
{
    struct timespec until;
    vg_http_deadline(&until, ms);
    pthread_mutex_lock(&ev->mu);
    if (!ev->stopping && ms > 0)
        pthread_cond_timedwait(&ev->cv, &ev->mu, &until);
    int open = ev->all != NULL;
    pthread_mutex_unlock(&ev->mu);
    return open;
}

static int streams_open(struct vg_events *ev)
{
    pthread_mutex_lock(&ev->mu);
    int open = ev->all != NULL;
    pthread_mutex_unlock(&ev->mu);
    return open;
}

static void *poller_main(void *arg)
{
    struct vg_events *ev = arg;
    vigil_stats st;
    while (!stopping(ev)) {
        int64_t polled = mono_ms();
        vigil_stats_read(&st);
        uint64_t seen = st.commits;
        poll_once(ev);
        seen += (uint64_t)flush(ev);
        int64_t due = polled + ev->h->o.events_poll_ms;
        int hurried = 0, listen = streams_open(ev);
        for (int64_t left; (left = due - mono_ms()) > 0 && !stopping(ev);) {
            resume_streams(ev, 1); /* the heartbeats due */
            int64_t slice = VG_MIN(left, STOP_CHECK_MS);
            if (hurried || !listen) {
                listen = quiet_wait(ev, slice);
                continue;
            }
            uint64_t now = vigil_stats_wait_commit(seen, (int)slice);
            if (now != seen) {
                hurried = 1;
                due = VG_MIN(due, polled + COALESCE_MS);
            }
        }
    }
    return NULL;
}

vigil_code vg_events_start(struct vg_http *h, struct vg_events **out, vigil_error *err)
{
    struct vg_events *ev = vg_calloc(1, sizeof *ev);
    if (!ev)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting the event stream");
    ev->h = h;
    pthread_mutex_init(&ev->mu, NULL);
    pthread_mutex_init(&ev->log_mu, NULL);
    vg_http_cond_init(&ev->cv);
    ev->ring_size =
        h->o.events_ring > 0 && h->o.events_ring <= RING_SIZE ? h->o.events_ring : RING_SIZE;
    ev->runs_by_outcome = json_object();
    ev->tools_by_status = json_object();
    ev->tool_failures = json_object();
    ev->usage_by_model = json_object();
    ev->child_open = json_object();
    ev->spawns_by_decision = json_object();
    ev->children_by_status = json_object();
    *out = ev; /* vg_events_stop frees it, also on the failures below */
    vigil_code rc = vg_http_runtime_open(h->store_path, &ev->rt, err);
    int64_t oldest = 0, newest = 0;
    if (!rc)
        rc = vg_http_runtime_open(h->store_path, &ev->log_rt, err);
    /* The poller's reads, every poll even when no request comes, move the process's read
     * anchor on after other processes' commits, so it never holds an old snapshot long. */
    vigil_runtime_read_anchor(ev->rt, 1);
    if (!rc)
        rc = vigil_events_bounds(ev->rt, &oldest, &newest, err);
    if (rc)
        return rc;
    ev->first_id = ev->next_id = newest + 1; /* the ring starts empty; the log has the rest */
    poll_once(ev);                           /* the baseline: what is there now is not news */
    batch_clear(ev);
    if (pthread_create(&ev->thread, NULL, poller_main, ev) != 0)
        return VG_FAIL(err, VIGIL_ENOMEM, "could not start the event poller");
    ev->started = 1;
    return VIGIL_OK;
}

void vg_events_stop(struct vg_events *ev)
{
    if (!ev)
        return;
    pthread_mutex_lock(&ev->mu);
    ev->stopping = 1;
    pthread_cond_broadcast(&ev->cv);
    pthread_mutex_unlock(&ev->mu);
    resume_streams(ev, 0); /* they end their streams */
    if (ev->started)
        pthread_join(ev->thread, NULL);
    ev->started = 0;
    vigil_error err = {0};
    if (ev->unsynced && ev->rt && vigil_events_sync(ev->rt, &err) == VIGIL_OK)
        ev->unsynced = 0;
}

void vg_events_free(struct vg_events *ev)
{
    if (!ev)
        return;
    vg_events_stop(ev);
    for (int i = 0; i < RING_SIZE; i++)
        free(ev->ring[i].data);
    json_decref(ev->approvals);
    json_decref(ev->memory_pending);
    json_decref(ev->indoubt);
    json_decref(ev->runs_by_outcome);
    json_decref(ev->tools_by_status);
    json_decref(ev->tool_failures);
    json_decref(ev->usage_by_model);
    json_decref(ev->tasks);
    json_decref(ev->child_open);
    json_decref(ev->spawns_by_decision);
    json_decref(ev->children_by_status);
    batch_clear(ev);
    vg_free(ev->batch);
    vigil_free(ev->kill_text);
    vigil_runtime_close(ev->rt);
    vigil_runtime_close(ev->log_rt);
    pthread_mutex_destroy(&ev->log_mu);
    pthread_cond_destroy(&ev->cv);
    pthread_mutex_destroy(&ev->mu);
    vg_free(ev);
}

/* ---- metrics ----------------------------------------------------------------------------------
 */

static void put_counts(struct vg_buf *b, const char *name, const char *help, const char *label,
                       json_t *counts)
{
    const char *key;
    json_t *v;
    vg_buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
    json_object_foreach (counts, key, v) {
        vg_buf_printf(b, "%s{%s=\"", name, label);
        for (const char *c = key; *c; c++) /* a label value's escapes (a tool's name) */
            if (*c == '\\' || *c == '"')
                vg_buf_printf(b, "\\%c", *c);
            else if (*c == '\n')
                vg_buf_puts(b, "\\n");
            else
                vg_buf_putc(b, *c);
        vg_buf_printf(b, "\"} %lld\n", (long long)json_integer_value(v));
    }
}

static void put_usage(struct vg_events *ev, struct vg_buf *b)
{
    const char *model;
    json_t *m;
    long cumulative = 0;
    vg_buf_puts(b, "# HELP vigil_tokens_total Model tokens of runs seen ending, by model.\n"
                   "# TYPE vigil_tokens_total counter\n");
    json_object_foreach (ev->usage_by_model, model, m) {
        vg_buf_printf(b, "vigil_tokens_total{model=\"%s\",direction=\"input\"} %lld\n", model,
                      (long long)json_integer_value(json_object_get(m, "input_tokens")));
        vg_buf_printf(b, "vigil_tokens_total{model=\"%s\",direction=\"output\"} %lld\n", model,
                      (long long)json_integer_value(json_object_get(m, "output_tokens")));
    }
    vg_buf_puts(b, "# HELP vigil_cost_usd_total Model cost of runs seen ending, by model.\n"
                   "# TYPE vigil_cost_usd_total counter\n");
    json_object_foreach (ev->usage_by_model, model, m)
        vg_buf_printf(b, "vigil_cost_usd_total{model=\"%s\"} %.6f\n", model,
                      (double)json_integer_value(json_object_get(m, "cost_micros")) / 1e6);
    vg_buf_puts(b, "# HELP vigil_model_calls_total Model calls of runs seen ending, by model.\n"
                   "# TYPE vigil_model_calls_total counter\n");
    json_object_foreach (ev->usage_by_model, model, m)
        vg_buf_printf(b, "vigil_model_calls_total{model=\"%s\"} %lld\n", model,
                      (long long)json_integer_value(json_object_get(m, "model_calls")));
    vg_buf_puts(b, "# HELP vigil_run_duration_seconds Wall time of runs seen ending.\n"
                   "# TYPE vigil_run_duration_seconds histogram\n");
    for (size_t i = 0; i <= VG_ARRAY_LEN(duration_bounds); i++) {
        cumulative += ev->duration_buckets[i];
        if (i < VG_ARRAY_LEN(duration_bounds))
            vg_buf_printf(b, "vigil_run_duration_seconds_bucket{le=\"%g\"} %ld\n",
                          duration_bounds[i], cumulative);
        else
            vg_buf_printf(b, "vigil_run_duration_seconds_bucket{le=\"+Inf\"} %ld\n", cumulative);
    }
    vg_buf_printf(b, "vigil_run_duration_seconds_sum %.6f\nvigil_run_duration_seconds_count %ld\n",
                  ev->duration_sum, ev->duration_count);
}

/* Spawn decisions and children's ends seen since the start; tasks by status now (as of the last
 * poll), every status written, 0 included, so a series does not vanish when it empties. */
static void put_delegation(struct vg_events *ev, struct vg_buf *b)
{
    /* attention: a task whose run completed with a call in doubt, held for a person */
    static const char *const statuses[] = {"pending", "ready",  "running",  "attention",
                                           "done",    "failed", "cancelled"};
    const char *id;
    json_t *st;
    long n[VG_ARRAY_LEN(statuses)] = {0};
    put_counts(b, "vigil_spawn_decisions_total",
               "Spawn decisions of runs seen ending, by decision.", "decision",
               ev->spawns_by_decision);
    put_counts(b, "vigil_children_ended_total", "Spawned children seen ending, by status.",
               "status", ev->children_by_status);
    json_object_foreach (ev->tasks, id, st)
        for (size_t i = 0; i < VG_ARRAY_LEN(statuses); i++)
            n[i] += json_string_value(st) && !strcmp(json_string_value(st), statuses[i]);
    vg_buf_puts(b, "# HELP vigil_tasks Tasks of the task graph, by status.\n"
                   "# TYPE vigil_tasks gauge\n");
    for (size_t i = 0; i < VG_ARRAY_LEN(statuses); i++)
        vg_buf_printf(b, "vigil_tasks{status=\"%s\"} %ld\n", statuses[i], n[i]);
}

void vg_events_metrics(struct vg_events *ev, struct vg_buf *b)
{
    pthread_mutex_lock(&ev->mu);
    put_usage(ev, b);
    put_counts(b, "vigil_runs_ended_total", "Runs seen ending since the daemon started.", "outcome",
               ev->runs_by_outcome);
    put_counts(b, "vigil_tool_calls_total",
               "Tool calls seen since the daemon started, by how they ended.", "outcome",
               ev->tools_by_status);
    put_counts(b, "vigil_tool_calls_failed_total",
               "Tool calls that failed since the daemon started, by tool.", "tool",
               ev->tool_failures);
    put_delegation(ev, b);
    vg_buf_printf(b,
                  "# HELP vigil_events_total Events of the event log this daemon streams.\n"
                  "# TYPE vigil_events_total counter\nvigil_events_total %lld\n"
                  "# HELP vigil_event_streams Clients on the live stream now.\n"
                  "# TYPE vigil_event_streams gauge\nvigil_event_streams %ld\n"
                  "# HELP vigil_event_gaps_total Gap events sent to clients that fell behind.\n"
                  "# TYPE vigil_event_gaps_total counter\nvigil_event_gaps_total %ld\n"
                  "# HELP vigil_events_dropped_total Events lost: the event log could not be "
                  "written for too long.\n"
                  "# TYPE vigil_events_dropped_total counter\nvigil_events_dropped_total %ld\n",
                  ev->events_total, ev->streams, ev->gaps, ev->dropped);
    pthread_mutex_unlock(&ev->mu);
}

/* ---- a stream ---------------------------------------------------------------------------------
 */

struct stream {
    struct vg_events *ev;
    int64_t pos;      /* the next event id this client wants */
    int64_t beat_due; /* monotonic ms */
    char agent[64];
    char kinds[256]; /* comma-separated kinds or prefixes ("run" matches run.started) */
    int hello;
    int lagging;       /* behind the ring, reading the log (its gap event sent) */
    struct vg_buf out; /* formatted events, sent from offset sent */
    size_t sent;
    /* Waiting for news: its connection is suspended (no pool thread waits for it) until an
     * event, its heartbeat or the stop resumes it (resume_streams). Under ev->mu. */
    struct MHD_Connection *conn;
    int suspended;
    struct stream *prev, *next; /* ev->all */
};

static int64_t mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* A stream of one agent gets its agent's events and the kill switches' (which name no agent:
 * the global and class switches stop this agent too; trial J2 of session 36). */
static int wanted(const struct stream *s, const struct event *e)
{
    if (s->agent[0] && strcmp(s->agent, e->agent) && strcmp(e->kind, "kill"))
        return 0;
    if (!s->kinds[0])
        return 1;
    size_t kl = strlen(e->kind);
    for (const char *k = s->kinds; *k;) {
        size_t n = strcspn(k, ",");
        if ((n == kl && !strncmp(k, e->kind, n)) ||
            (n < kl && !strncmp(k, e->kind, n) && e->kind[n] == '.'))
            return 1;
        k += n + (k[n] == ',');
    }
    return 0;
}

static void put_event(struct stream *s, const struct event *e)
{
    if (wanted(s, e))
        vg_buf_printf(&s->out, "id: %lld\nevent: %s\ndata: %s\n\n", (long long)e->id, e->kind,
                      e->data);
}

/* The stream's first lines, once: the client's reconnection delay and a comment. */
static void put_hello(struct stream *s)
{
    if (!s->hello)
        vg_buf_puts(&s->out, "retry: 2000\n: vigil events\n\n");
    s->hello = 1;
}

/* A gap event: what the stream wanted from s->pos on comes from resume_at on. */
static void put_gap(struct stream *s, int64_t resume_at)
{
    vg_buf_printf(&s->out, "event: gap\ndata: {\"missed_from\":%lld,\"resume_at\":%lld}\n\n",
                  (long long)s->pos, (long long)resume_at);
}

/* The log's oldest and newest positions, read through the streams' runtime. */
static vigil_code log_bounds(struct vg_events *ev, int64_t *oldest, int64_t *newest)
{
    vigil_error err = {0};
    pthread_mutex_lock(&ev->log_mu);
    vigil_code rc = vigil_events_bounds(ev->log_rt, oldest, newest, &err);
    pthread_mutex_unlock(&ev->log_mu);
    return rc;
}

/* The gap event of a stream that fell behind the ring: it goes on from the log at resume_at,
 * which is later than missed_from only when the log was trimmed past it. */
static void stream_gap(struct stream *s)
{
    struct vg_events *ev = s->ev;
    int64_t oldest = 0, newest = 0;
    vigil_code rc = log_bounds(ev, &oldest, &newest);
    int64_t resume = rc ? s->pos : VG_MAX(s->pos, oldest);
    put_gap(s, resume);
    s->pos = resume;
    s->lagging = 1;
    pthread_mutex_lock(&ev->mu);
    ev->gaps++;
    pthread_mutex_unlock(&ev->mu);
}

/* Behind the ring (ring_oldest): the next page of the log into s->out, read without holding
 * ev->mu, so the poller and the other streams go on meanwhile. The page is of every agent,
 * filtered by put_event as the ring is: the kill events an agent's stream gets name no agent. */
static void stream_catch_up(struct stream *s, int64_t ring_oldest)
{
    struct vg_events *ev = s->ev;
    char *text = NULL;
    vigil_error err = {0};
    json_t *it;
    size_t i;
    if (!s->lagging)
        stream_gap(s);
    pthread_mutex_lock(&ev->log_mu);
    vigil_code rc = vigil_events_read(ev->log_rt, s->pos - 1, NULL, LOG_PAGE, &text, &err);
    pthread_mutex_unlock(&ev->log_mu);
    json_t *page = rc ? NULL : json_loads(text, 0, NULL);
    vigil_free(text);
    json_array_foreach (page, i, it) {
        struct event e = {.id = json_integer_value(json_object_get(it, "position"))};
        const char *agent = json_string_value(json_object_get(it, "agent_id"));
        snprintf(e.kind, sizeof e.kind, "%s", json_string_value(json_object_get(it, "kind")));
        snprintf(e.agent, sizeof e.agent, "%s", agent ? agent : "");
        e.data = vg_json_dumps(json_object_get(it, "data"), JSON_COMPACT | JSON_ENCODE_ANY);
        if (e.data && e.id >= s->pos)
            put_event(s, &e);
        free(e.data);
        s->pos = VG_MAX(s->pos, e.id + 1);
    }
    /* A short page leaves nothing of the log before the ring. A log that cannot be read
     * (the store failing) is a gap up to the ring, said as such. */
    if (!page && s->pos < ring_oldest)
        put_gap(s, ring_oldest);
    if (json_array_size(page) < LOG_PAGE)
        s->pos = VG_MAX(s->pos, ring_oldest);
    json_decref(page);
}

/* Format what is due into s->out (under ev->mu): the hello, the wanted events of the ring. */
static void stream_format(struct stream *s)
{
    struct vg_events *ev = s->ev;
    put_hello(s);
    if (s->pos < oldest_id(ev))
        return; /* the log first (stream_read) */
    s->lagging = 0;
    while (s->pos < ev->next_id && s->out.len < 16384) {
        const struct event *e = &ev->ring[s->pos % ev->ring_size];
        put_event(s, e);
        s->pos++;
    }
}

/* Copy what is formatted and not yet sent into buf; 0 when nothing is. */
static size_t stream_fill(struct stream *s, char *buf, size_t max)
{
    if (s->sent == s->out.len) {
        vg_buf_reset(&s->out);
        s->sent = 0;
        stream_format(s);
    }
    size_t n = VG_MIN(max, s->out.len - s->sent);
    memcpy(buf, s->out.data + s->sent, n);
    s->sent += n;
    return n;
}

/* Resume the suspended streams (beats_only: those whose heartbeat is due). Each is marked
 * resumed under ev->mu and resumed after it is released: libmicrohttpd's own lock is never taken
 * under ours. A suspended connection is not closed by libmicrohttpd, so it is still there. */
static void resume_streams(struct vg_events *ev, int beats_only)
{
    struct MHD_Connection *few[64], **conns = few;
    size_t n = 0, cap = VG_ARRAY_LEN(few);
    int64_t now = mono_ms();
    pthread_mutex_lock(&ev->mu);
    for (struct stream *s = ev->all; s; s = s->next) {
        if (!s->suspended || (beats_only && now < s->beat_due))
            continue;
        if (n == cap) {
            struct MHD_Connection **more =
                vg_malloc(2 * cap * sizeof *more); /* out of memory: the next pass resumes them */
            if (!more)
                break;
            memcpy(more, conns, n * sizeof *more);
            if (conns != few)
                vg_free(conns);
            conns = more;
            cap *= 2;
        }
        s->suspended = 0;
        conns[n++] = s->conn;
    }
    pthread_mutex_unlock(&ev->mu);
    for (size_t i = 0; i < n; i++)
        MHD_resume_connection(conns[i]);
    if (conns != few)
        vg_free(conns);
}

/* libmicrohttpd's content reader: what is due, or nothing with the connection suspended until
 * news, a heartbeat or the stop resumes it. */
static ssize_t stream_read(void *cls, uint64_t offset, char *buf, size_t max)
{
    struct stream *s = cls;
    struct vg_events *ev = s->ev;
    VG_UNUSED(offset);
    pthread_mutex_lock(&ev->mu);
    if (!ev->stopping && s->hello && s->sent == s->out.len && s->pos < oldest_id(ev)) {
        int64_t ring_oldest = oldest_id(ev);
        vg_buf_reset(&s->out);
        s->sent = 0;
        pthread_mutex_unlock(&ev->mu);
        stream_catch_up(s, ring_oldest);
        pthread_mutex_lock(&ev->mu);
    }
    if (ev->stopping) {
        pthread_mutex_unlock(&ev->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t n = stream_fill(s, buf, max);
    int64_t now = mono_ms();
    if (n || now >= s->beat_due) {
        s->beat_due = now + ev->h->o.heartbeat_ms;
        pthread_mutex_unlock(&ev->mu);
        return n ? (ssize_t)n : (ssize_t)snprintf(buf, max, ": heartbeat\n\n");
    }
    /* A resume between here and the suspend cancels it (libmicrohttpd): the reader is called
     * again at once, so no news is slept through. */
    s->suspended = 1;
    pthread_mutex_unlock(&ev->mu);
    MHD_suspend_connection(s->conn);
    return 0;
}

static void stream_free(void *cls)
{
    struct stream *s = cls;
    pthread_mutex_lock(&s->ev->mu);
    s->ev->streams--;
    if (s->prev)
        s->prev->next = s->next;
    else
        s->ev->all = s->next;
    if (s->next)
        s->next->prev = s->prev;
    pthread_mutex_unlock(&s->ev->mu);
    vg_buf_release(&s->out);
    vg_free(s);
}

/* A Last-Event-ID (id) at or past the ring's next: when it is past the log's newest too, the
 * log lost its newest events (a power loss before they were synced: vigil_events_append).
 * Their positions are not given again (the next are above every one handed out), so the stream
 * begins with a gap that says so (resume_at, the log's next, below missed_from) and goes on
 * from there: a new event's id is above the client's. */
static void stream_ahead(struct stream *s, long long id)
{
    int64_t oldest = 0, newest = 0;
    vigil_code rc = log_bounds(s->ev, &oldest, &newest);
    if (rc || id <= newest)
        return;
    put_hello(s);
    vg_buf_printf(&s->out, "event: gap\ndata: {\"missed_from\":%lld,\"resume_at\":%lld}\n\n",
                  id + 1, (long long)s->pos);
}

/* The event kinds and their prefixes a kind= filter takes: one list for the check and for the
 * refusal that names them (trial F18: the refusal's own list had fallen behind). */
static const char *const known_kinds[] = {"run",
                                          "run.started",
                                          "run.ended",
                                          "message",
                                          "tool_call",
                                          "approval",
                                          "approval.requested",
                                          "approval.resolved",
                                          "memory",
                                          "memory.pending",
                                          "memory.resolved",
                                          "indoubt",
                                          "indoubt.pending",
                                          "indoubt.resolved",
                                          "kill",
                                          "spawn",
                                          "spawn.admitted",
                                          "spawn.queued",
                                          "spawn.awaiting_approval",
                                          "spawn.denied",
                                          "child",
                                          "child.ended",
                                          "task",
                                          "task.status"};

/* Each entry of kind=a,b must name an event kind or a kind's prefix: a typo would otherwise open
 * a stream that can never send anything. */
static int kinds_known(const char *kinds)
{
    for (const char *k = kinds; *k;) {
        size_t n = strcspn(k, ","), i = 0;
        while (i < VG_ARRAY_LEN(known_kinds) &&
               (strlen(known_kinds[i]) != n || strncmp(known_kinds[i], k, n)))
            i++;
        if (i == VG_ARRAY_LEN(known_kinds))
            return 0;
        k += n + (k[n] == ',');
    }
    return 1;
}

static void kinds_refused(struct vg_req *r, const char *kind)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    vg_buf_printf(&b, "unknown event kind in \"%.40s\": use ", kind);
    for (size_t i = 0; i < VG_ARRAY_LEN(known_kinds); i++)
        vg_buf_printf(&b, "%s%s",
                      i == 0                               ? ""
                      : i + 1 == VG_ARRAY_LEN(known_kinds) ? " or "
                                                           : ", ",
                      known_kinds[i]);
    vg_buf_puts(&b, " (comma-separated)");
    vg_req_error(r, VIGIL_EINVAL, b.fail ? NULL : b.data);
    vg_buf_release(&b);
}

/* An agent filter that names no agent is refused as every other route refuses it; one that
 * names an agent by its name is that agent's id in agent_id (the events carry ids). */
static int events_filters_ok(struct vg_req *r, const char *agent, const char *kind, char *agent_id,
                             size_t agent_id_len)
{
    if (kind && !kinds_known(kind)) {
        kinds_refused(r, kind);
        return 0;
    }
    if (!agent)
        return 1;
    if (vg_http_agent_id(r, agent, agent_id, agent_id_len))
        return 0;
    char *out = NULL;
    vigil_error err = {0};
    vigil_code rc = vigil_agent_show(r->rt, agent_id, &out, &err);
    vigil_free(out);
    if (rc)
        vg_req_error(r, rc, err.message);
    return !rc;
}

/* The Last-Event-ID header as an event id into *id (-1: none, or empty as a browser may send);
 * 0, having answered 400, when it is anything but an event's id: taken as none, a client that
 * mangled its id (`abc`, `-5`, `1e3`) would silently start at now and lose what it missed. */
static int last_event_id(struct vg_req *r, const char *last, long long *id)
{
    char *end = NULL;
    if (!last || !*last)
        return 1;
    errno = 0;
    *id = strtoll(last, &end, 10);
    if (*last < '0' || *last > '9' || *end || errno || *id < 0) {
        vg_req_error(r, VIGIL_EINVAL,
                     "Last-Event-ID must be the id of an event the stream sent (a number)");
        return 0;
    }
    return 1;
}

void vg_http_events_route(struct vg_req *r)
{
    struct vg_events *ev = r->h->events;
    const char *agent = vg_req_query(r, "agent"), *kind = vg_req_query(r, "kind");
    const char *last = vg_req_header(r, "Last-Event-ID");
    struct stream *s;
    if ((agent && strlen(agent) >= sizeof s->agent) || (kind && strlen(kind) >= sizeof s->kinds)) {
        vg_req_error(r, VIGIL_EINVAL, "agent or kind filter too long");
        return;
    }
    char agent_id[sizeof s->agent] = "";
    long long id = -1;
    if (!events_filters_ok(r, agent, kind, agent_id, sizeof agent_id) ||
        !last_event_id(r, last, &id))
        return;
    if (!(s = vg_calloc(1, sizeof *s))) {
        vg_req_error(r, VIGIL_ENOMEM, NULL);
        return;
    }
    s->ev = ev;
    vg_buf_init(&s->out, 0);
    snprintf(s->agent, sizeof s->agent, "%s", agent_id);
    snprintf(s->kinds, sizeof s->kinds, "%s", kind ? kind : "");
    pthread_mutex_lock(&ev->mu);
    s->pos = ev->next_id;
    if (id >= 0 && id < ev->next_id)
        s->pos = id + 1; /* before the ring: a gap, then the log */
    ev->streams++;
    s->conn = r->conn;
    s->next = ev->all;
    if (ev->all)
        ev->all->prev = s;
    ev->all = s;
    pthread_cond_broadcast(&ev->cv); /* the poller listens for commits again (poller_main) */
    pthread_mutex_unlock(&ev->mu);
    if (id >= s->pos)
        stream_ahead(s, id);
    s->beat_due = mono_ms() + ev->h->o.heartbeat_ms;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1024, stream_read, s, stream_free);
    if (!resp)
        stream_free(s);
    vg_req_respond(r, resp, "text/event-stream");
}
