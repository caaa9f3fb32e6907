/*
 * test_exchange.c: multi-device sync between stores (src/sync/capture.c, exchange.c): each store a
 * device with its own host id, doing its own work through the spine's real write paths, then
 * exchanging in various orders. What every device must end with is compared as a digest of its
 * synced records (the agent-domain records, their log entries and clocks, and the projections
 * rebuilt from them), with each device's own fields (local revision, wake counter) left out.
 */
#include "helpers/test.h"

#include "helpers/pg_env.h"
#include "helpers/seeded_ids.h"

#include "agent/agent.h"
#include "loop/window_cache.h"
#include "memory/compact.h"
#include "os/clock.h"
#include "os/fs.h"
#include "runtime/runtime.h"
#include "store/store.h"
#include "sync/sync.h"
#include "wake/wake.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct device {
    struct vg_test_clock clock;
    vigil_runtime *rt;
    struct vg_env *env;
    char path[4200];
};

/* Each device's store: a file in the test's folder, or with VIGIL_TEST_RT_PG set (CTest's
 * sync_test_exchange_pg) a fresh schema of the test PostgreSQL server. */
static void device_open(struct device *d, const char *name, uint64_t seed)
{
    vigil_error err = {0};
    memset(d, 0, sizeof *d);
    vg_test_clock_init(&d->clock, 1767225600000);
    snprintf(d->path, sizeof d->path, "%s/agent.db", vg_test_tmpdir(name));
    if (getenv("VIGIL_TEST_RT_PG"))
        vg_test_pg_schema_uri(name, 1, d->path, sizeof d->path);
    vigil_runtime_options o = {.size = sizeof o, .store_uri = d->path, .create_if_missing = 1};
    if (vg_runtime_open_with(&o, &d->clock.base, vg_ids_seeded(&d->clock.base, seed), &d->rt, &err))
        TEST_FAIL_("could not open device %s: %s", name, err.message);
    d->env = vg_runtime_env(d->rt);
    ASSERT_OK(vg_sync_join(d->env, E));
}

static void device_close(struct device *d)
{
    vigil_runtime_close(d->rt);
    d->rt = NULL;
}

static void push(struct device *from, struct device *to, struct vg_sync_stats *st)
{
    ASSERT_OK(vg_sync_push(from->env, to->env, st, E));
}

static void both(struct device *a, struct device *b)
{
    ASSERT_OK(vg_sync_between(a->env, b->env, NULL, NULL, E));
}

static void create_agent(struct device *d, const char *name, char id[37])
{
    vigil_agent_spec spec = {.name = name, .kind = "task_agent", .prompt = "watch the task"};
    ASSERT_OK(vigil_agent_create(d->rt, &spec, id, E));
}

static void say(struct device *d, const char *agent, const char *thread, const char *text)
{
    struct vg_message_in m = {
        .agent_id = agent, .thread_id = thread, .kind = VG_MSG_USER, .content = text};
    ASSERT_OK(vg_message_append(d->env, &m, NULL, E));
    vg_test_clock_advance(&d->clock, 1000);
}

static void set_state(struct device *d, const char *agent, const char *changes_json)
{
    json_t *changes = json_loads(changes_json, 0, NULL);
    ASSERT(changes != NULL);
    ASSERT_OK(vg_state_update(d->env, agent, changes, VG_STATE_ANY_REVISION, NULL, E));
    json_decref(changes);
    vg_test_clock_advance(&d->clock, 1000);
}

/* ---- the digest ---------------------------------------------------------------------------- */

struct digest_ctx {
    json_t *out;
};

/* Each device's own fields of a record's body, left out of the comparison. */
static void drop_own_fields(const char *kind, json_t *body)
{
    static const char *const state_own[] = {"revision", "updated_at", "wake_counter",
                                            "last_wake_at"};
    if (!strcmp(kind, "agent_state"))
        for (size_t i = 0; i < VG_ARRAY_LEN(state_own); i++)
            json_object_del(body, state_own[i]);
}

static int digest_cb(void *user, const struct vg_record *r)
{
    struct digest_ctx *c = user;
    char key[512];
    snprintf(key, sizeof key, "%s/%s", r->kind, r->id);
    int pointer = !strcmp(r->kind, "link") && !strchr(r->id, '|') && strchr(r->id, ':');
    /* A timer's k1 says whether it fires on this device (only on its home). */
    int own_k1 = pointer || !strcmp(r->kind, "timer");
    json_t *body = pointer ? json_object() : json_loads(r->body, 0, NULL);
    ASSERT(body != NULL);
    drop_own_fields(r->kind, body);
    json_object_set_new(c->out, key,
                        json_pack("{s:s, s:s, s:s, s:I, s:o}", "owner", r->owner, "k1",
                                  own_k1 ? "" : r->k1, "k2", r->k2, "seq", (json_int_t)r->seq,
                                  "body", body));
    return 0;
}

/* Every synced record, log entry, clock and projection of the store (owned). */
static json_t *digest(struct device *d)
{
    static const char *const kinds[] = {
        "agent", "agent_state", "message",   "message_payload", "report",
        "link",  "tombstone",   "operation", "subscription",    "sub_token",
        "timer", "source_ref",  "sync_log",  "sync_clock"};
    struct digest_ctx c = {json_object()};
    for (size_t i = 0; i < VG_ARRAY_LEN(kinds); i++) {
        struct vg_query q = {.kind = kinds[i]};
        ASSERT_OK(vg_store_scan(d->env->store, &q, digest_cb, &c, E));
    }
    return c.out;
}

static void expect_same(struct device *a, struct device *b)
{
    json_t *da = digest(a), *db = digest(b);
    if (!json_equal(da, db)) {
        const char *k;
        json_t *v;
        json_object_foreach (da, k, v)
            if (!json_equal(v, json_object_get(db, k))) {
                char *x = json_dumps(v, JSON_COMPACT),
                     *y = json_dumps(json_object_get(db, k), JSON_COMPACT);
                fprintf(stderr, "%s\n  %s\n  %s\n", k, x, y ? y : "(absent)");
                vg_free(x);
                vg_free(y);
            }
        json_object_foreach (db, k, v)
            if (!json_object_get(da, k))
                fprintf(stderr, "%s only on the second device\n", k);
        TEST_FAIL_("the devices differ");
    }
    json_decref(da);
    json_decref(db);
}

/* The thread's message ids in reading order, as one string. */
static void thread_order(struct device *d, const char *agent, const char *thread, char *out,
                         size_t n)
{
    json_t *msgs = NULL, *m;
    size_t i;
    ASSERT_OK(vg_message_latest(d->env, agent, thread, 1000, &msgs, E));
    size_t len = 0;
    out[0] = '\0';
    json_array_foreach (msgs, i, m)
        if (len < n)
            len += (size_t)snprintf(out + len, n - len, "%s,",
                                    json_string_value(json_object_get(m, "id")));
    json_decref(msgs);
}

static int64_t count_kind(struct device *d, const char *kind, const char *k1)
{
    int64_t n = 0;
    struct vg_query q = {.kind = kind, .k1 = k1};
    ASSERT_OK(vg_store_count(d->env->store, &q, &n, E));
    return n;
}

/* ---- tests --------------------------------------------------------------------------------- */

/* proves: S0-175 */
TEST(messages_appended_on_one_device_appear_on_the_other_and_forks_are_both_kept)
{
    struct device a, b;
    char agent[37], ta[8192], tb[8192];
    device_open(&a, "sync_fork_a", 11);
    device_open(&b, "sync_fork_b", 22);
    create_agent(&a, "fork", agent);
    say(&a, agent, "t1", "first, on the laptop");
    both(&a, &b);
    thread_order(&b, agent, "t1", tb, sizeof tb);
    thread_order(&a, agent, "t1", ta, sizeof ta);
    ASSERT_STREQ(ta, tb);
    /* Both append to the thread before they meet again: a fork. */
    say(&a, agent, "t1", "laptop 1");
    say(&a, agent, "t1", "laptop 2");
    say(&b, agent, "t1", "desktop 1");
    both(&b, &a);
    thread_order(&a, agent, "t1", ta, sizeof ta);
    thread_order(&b, agent, "t1", tb, sizeof tb);
    ASSERT_STREQ(ta, tb); /* one reading order on both */
    ASSERT_EQ(count_kind(&a, "message", "t1"), 4);
    ASSERT_EQ(count_kind(&b, "message", "t1"), 4);
    expect_same(&a, &b);
    /* The next append comes after everything the device has seen and joins the fork. */
    say(&b, agent, "t1", "desktop after the exchange");
    json_t *last = NULL;
    ASSERT_OK(vg_message_latest(b.env, agent, "t1", 2, &last, E));
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(last, 1), "content")),
                 "desktop after the exchange");
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(last, 1), "prev_id")),
                 json_string_value(json_object_get(json_array_get(last, 0), "id")));
    json_decref(last);
    both(&a, &b);
    expect_same(&a, &b);
    device_close(&a);
    device_close(&b);
}

/* The thread as the model reads it (the run's window: vg_message_recent), contents joined. */
static void window_text(struct device *d, const char *agent, const char *thread, char *out,
                        size_t n)
{
    json_t *msgs = NULL, *m;
    size_t i, len = 0;
    ASSERT_OK(vg_message_recent(d->env, agent, thread, 100000, &msgs, E));
    out[0] = '\0';
    json_array_foreach (msgs, i, m)
        if (len < n)
            len += (size_t)snprintf(out + len, n - len, "%s|",
                                    json_string_value(json_object_get(m, "content")));
    json_decref(msgs);
}

/* A fork is read branch by branch, the same on both devices: each device's conversation whole,
 * the branch that holds the head (and what comes after the exchange) last; not interleaved
 * message by message as (number, id) orders them (trial K2: the model got the other device's
 * message between a question and its answer). */
TEST(a_forked_thread_is_read_branch_by_branch)
{
    struct device a, b;
    char agent[37], wa[4096], wb[4096];
    device_open(&a, "sync_branch_a", 11);
    device_open(&b, "sync_branch_b", 22);
    create_agent(&a, "branchy", agent);
    say(&a, agent, "t1", "first");
    both(&a, &b);
    say(&a, agent, "t1", "laptop 1");
    say(&a, agent, "t1", "laptop 2");
    say(&a, agent, "t1", "laptop 3");
    say(&b, agent, "t1", "desktop 1");
    say(&b, agent, "t1", "desktop 2");
    both(&b, &a);
    window_text(&a, agent, "t1", wa, sizeof wa);
    window_text(&b, agent, "t1", wb, sizeof wb);
    ASSERT_STREQ(wa, wb);
    ASSERT_STREQ(wa, "first|desktop 1|desktop 2|laptop 1|laptop 2|laptop 3|");
    say(&b, agent, "t1", "desktop after the exchange"); /* joins the head: laptop 3 */
    both(&a, &b);
    window_text(&a, agent, "t1", wa, sizeof wa);
    window_text(&b, agent, "t1", wb, sizeof wb);
    ASSERT_STREQ(wa, wb);
    ASSERT_STREQ(wa, "first|desktop 1|desktop 2|laptop 1|laptop 2|laptop 3|"
                     "desktop after the exchange|");
    device_close(&a);
    device_close(&b);
}

/* A small random program of one device's work on the shared agent. */
static void random_work(struct device *d, const char *agent, unsigned *seed, int step)
{
    char text[64], changes[160];
    unsigned r = (*seed = *seed * 1103515245u + 12345u) >> 16;
    vigil_lifecycle lc;
    ASSERT_OK(vg_agent_lifecycle(d->env, agent, &lc, E));
    switch (r % 8) {
    case 0:
    case 1:
        snprintf(text, sizeof text, "step %d", step);
        if (lc != VIGIL_LIFECYCLE_DESTROYED)
            say(d, agent, r % 2 ? "t1" : "t2", text);
        break;
    case 2:
        if (lc == VIGIL_LIFECYCLE_DESTROYED)
            break;
        snprintf(changes, sizeof changes,
                 "{\"slots\": {\"goals\": \"goal %d\"}, \"sleep_until\": "
                 "\"2026-01-0%dT00:00:00Z\"}",
                 step, 1 + (int)(r % 8));
        set_state(d, agent, changes);
        break;
    case 3:
        if (lc == VIGIL_LIFECYCLE_DESTROYED)
            break;
        snprintf(changes, sizeof changes, "{\"processed_counter_by_host\": {\"h%u\": %d}}", r % 3,
                 step);
        set_state(d, agent, changes);
        break;
    case 4:
        if (lc == VIGIL_LIFECYCLE_CREATED || lc == VIGIL_LIFECYCLE_DORMANT)
            ASSERT_OK(vg_agent_transition(d->env, agent, VIGIL_LIFECYCLE_ACTIVE, "resume", E));
        else if (lc == VIGIL_LIFECYCLE_ACTIVE)
            ASSERT_OK(vg_agent_transition(d->env, agent, VIGIL_LIFECYCLE_DORMANT, "pause", E));
        break;
    case 6: /* the agent's config: a last-writer record */
        if (lc != VIGIL_LIFECYCLE_DESTROYED) {
            json_t *f = json_pack("{s:{s:i, s:i}}", "config", "step", step, "by", (int)(r % 1000));
            ASSERT_OK(vg_agent_update(d->env, agent, f, E));
            json_decref(f);
        }
        break;
    case 7: /* the same tool call (one operation id) made on whichever devices reach it */
        snprintf(text, sizeof text, "op-%d", step);
        snprintf(changes, sizeof changes, "{\"status\":\"succeeded\",\"by\":%u}", r % 1000);
        ASSERT_OK(vg_env_put_text(d->env, "operation", text, agent, "succeeded", "t", 0, changes,
                                  VG_PUT_IF_ABSENT, E));
        break;
    default:
        snprintf(text, sizeof text, "report %d", step);
        if (lc != VIGIL_LIFECYCLE_DESTROYED)
            ASSERT_OK(vg_report_set(d->env, agent, "current", text, NULL, NULL, NULL, E));
        if (r % 50 == 7 && lc != VIGIL_LIFECYCLE_DESTROYED)
            ASSERT_OK(vg_agent_transition(d->env, agent, VIGIL_LIFECYCLE_DESTROYED, "done", E));
        break;
    }
}

/* Three devices work on one agent at once and exchange pairwise in a random order, many times;
 * then every pair exchanges until nothing moves. Whatever the order, all three hold the same.
 * proves: S0-087 S0-180 */
TEST(three_devices_doing_concurrent_work_converge_in_any_order)
{
    for (unsigned trial = 0; trial < 6; trial++) {
        struct device d[3];
        char agent[37], name[64];
        unsigned seed = 7 + trial * 101;
        for (int i = 0; i < 3; i++) {
            snprintf(name, sizeof name, "sync_three_%u_%d", trial, i);
            device_open(&d[i], name, 100 * (trial + 1) + (uint64_t)i);
        }
        create_agent(&d[0], "shared", agent);
        both(&d[0], &d[1]);
        both(&d[1], &d[2]);
        for (int round = 0; round < 8; round++) {
            for (int i = 0; i < 3; i++)
                for (int k = 0; k < 3; k++)
                    random_work(&d[i], agent, &seed, round * 10 + k);
            unsigned r = (seed = seed * 1103515245u + 12345u) >> 16;
            int x = (int)(r % 3), y = (int)((r / 3 + 1 + r % 2) % 3);
            if (x != y)
                push(&d[x], &d[y], NULL);
        }
        /* Then exchange in one of several orders until all agree. */
        static const int orders[3][3][2] = {
            {{0, 1}, {1, 2}, {2, 0}}, {{2, 1}, {0, 2}, {1, 0}}, {{1, 2}, {0, 1}, {0, 2}}};
        for (int pass = 0; pass < 2; pass++)
            for (int p = 0; p < 3; p++)
                both(&d[orders[trial % 3][p][0]], &d[orders[trial % 3][p][1]]);
        expect_same(&d[0], &d[1]);
        expect_same(&d[1], &d[2]);
        vigil_lifecycle l0, l2;
        ASSERT_OK(vg_agent_lifecycle(d[0].env, agent, &l0, E));
        ASSERT_OK(vg_agent_lifecycle(d[2].env, agent, &l2, E));
        ASSERT_EQ(l0, l2);
        for (int i = 0; i < 3; i++)
            device_close(&d[i]);
    }
}

/* Concurrent lifecycle changes meet by precedence; one seen before another by order.
 * proves: S0-180 */
TEST(lifecycle_changes_sync_and_concurrent_ones_meet_by_precedence)
{
    struct device a, b;
    char agent[37];
    vigil_lifecycle lc;
    device_open(&a, "sync_lc_a", 31);
    device_open(&b, "sync_lc_b", 32);
    create_agent(&a, "lc", agent);
    ASSERT_OK(vg_agent_transition(a.env, agent, VIGIL_LIFECYCLE_ACTIVE, "start", E));
    ASSERT_OK(vg_agent_transition(a.env, agent, VIGIL_LIFECYCLE_DORMANT, "pause", E));
    both(&a, &b);
    ASSERT_OK(vg_agent_lifecycle(b.env, agent, &lc, E));
    ASSERT_EQ(lc, VIGIL_LIFECYCLE_DORMANT);
    /* B resumes after seeing the pause: its later write wins over the pause. */
    ASSERT_OK(vg_agent_transition(b.env, agent, VIGIL_LIFECYCLE_ACTIVE, "resume", E));
    both(&a, &b);
    ASSERT_OK(vg_agent_lifecycle(a.env, agent, &lc, E));
    ASSERT_EQ(lc, VIGIL_LIFECYCLE_ACTIVE);
    /* Concurrently A pauses and B destroys: destroyed wins on both. */
    ASSERT_OK(vg_agent_transition(a.env, agent, VIGIL_LIFECYCLE_DORMANT, "pause", E));
    ASSERT_OK(vg_agent_transition(b.env, agent, VIGIL_LIFECYCLE_DESTROYED, "gone", E));
    both(&a, &b);
    ASSERT_OK(vg_agent_lifecycle(a.env, agent, &lc, E));
    ASSERT_EQ(lc, VIGIL_LIFECYCLE_DESTROYED);
    ASSERT_OK(vg_agent_lifecycle(b.env, agent, &lc, E));
    ASSERT_EQ(lc, VIGIL_LIFECYCLE_DESTROYED);
    expect_same(&a, &b);
    device_close(&a);
    device_close(&b);
}

/* The agent's revision counts local writes only. B changes the agent six times (its revision far
 * above A's); A takes that, then renames the agent. B's offer replayed to A afterwards (a stale
 * copy in transit) leaves the rename; B takes the rename although its revision is higher.
 * proves: S0-087 */
TEST(the_clock_decides_not_the_local_revision)
{
    struct device a, b;
    char agent[37];
    json_t *hello = NULL, *stale = NULL, *ag = NULL;
    device_open(&a, "sync_rev_a", 41);
    device_open(&b, "sync_rev_b", 42);
    create_agent(&a, "rev", agent);
    both(&a, &b);
    for (int i = 0; i < 6; i++) {
        json_t *f = json_pack("{s:{s:i}}", "config", "n", i);
        ASSERT_OK(vg_agent_update(b.env, agent, f, E));
        json_decref(f);
    }
    ASSERT_OK(vg_sync_hello(a.env, &hello, E));
    ASSERT_OK(vg_sync_offer(b.env, hello, &stale, E));
    ASSERT_OK(vg_sync_apply(a.env, stale, NULL, E));
    json_t *f = json_pack("{s:s}", "name", "renamed-on-a");
    ASSERT_OK(vg_agent_update(a.env, agent, f, E));
    json_decref(f);
    int64_t rev_a = 0, rev_b = 0;
    ASSERT_OK(vg_agent_get(a.env, agent, &ag, &rev_a, E));
    json_decref(ag);
    ASSERT_OK(vg_agent_get(b.env, agent, &ag, &rev_b, E));
    json_decref(ag);
    ASSERT(rev_b > rev_a);
    ASSERT_OK(vg_sync_apply(a.env, stale, NULL, E));
    ASSERT_OK(vg_agent_get(a.env, agent, &ag, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(ag, "name")), "renamed-on-a");
    json_decref(ag);
    both(&a, &b);
    ASSERT_OK(vg_agent_get(b.env, agent, &ag, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(ag, "name")), "renamed-on-a");
    ASSERT_EQ(json_integer_value(json_object_get(json_object_get(ag, "config"), "n")), 5);
    json_decref(ag);
    expect_same(&a, &b);
    json_decref(hello);
    json_decref(stale);
    device_close(&a);
    device_close(&b);
}

/* proves: S0-165 */
TEST(a_replayed_exchange_changes_nothing)
{
    struct device a, b;
    char agent[37];
    json_t *hello = NULL, *offer = NULL, *old_offer = NULL;
    struct vg_sync_stats st = {0};
    device_open(&a, "sync_replay_a", 51);
    device_open(&b, "sync_replay_b", 52);
    create_agent(&a, "replay", agent);
    say(&a, agent, "t", "one");
    ASSERT_OK(vg_sync_hello(b.env, &hello, E));
    ASSERT_OK(vg_sync_offer(a.env, hello, &old_offer, E));
    ASSERT_OK(vg_sync_apply(b.env, old_offer, &st, E));
    ASSERT(st.records_changed > 0);
    say(&a, agent, "t", "two");
    set_state(&a, agent, "{\"sleep_until\": \"2026-02-01T00:00:00Z\"}");
    json_decref(hello);
    ASSERT_OK(vg_sync_hello(b.env, &hello, E));
    ASSERT_OK(vg_sync_offer(a.env, hello, &offer, E));
    ASSERT_OK(vg_sync_apply(b.env, offer, NULL, E));
    json_t *before = digest(&b);
    /* The same offer again, and the older one after the newer: nothing moves. */
    memset(&st, 0, sizeof st);
    ASSERT_OK(vg_sync_apply(b.env, offer, &st, E));
    ASSERT_OK(vg_sync_apply(b.env, old_offer, &st, E));
    ASSERT_EQ(st.records_changed, 0);
    ASSERT_EQ(st.entries_new, 0);
    json_t *after = digest(&b);
    ASSERT(json_equal(before, after));
    expect_same(&a, &b);
    json_decref(before);
    json_decref(after);
    json_decref(hello);
    json_decref(offer);
    json_decref(old_offer);
    device_close(&a);
    device_close(&b);
}

/* An offer that lost an entry in transit: the receiver finds the hole in A's sequence, asks for
 * it in its next hello, and gets that entry alone; the sender records the confirmation.
 * proves: S0-163 */
TEST(a_hole_in_a_hosts_sequence_is_found_and_backfilled)
{
    struct device a, b;
    char agent[37];
    json_t *hello = NULL, *offer = NULL;
    struct vg_sync_stats st = {0};
    device_open(&a, "sync_gap_a", 61);
    device_open(&b, "sync_gap_b", 62);
    create_agent(&a, "gap", agent);
    for (int i = 0; i < 5; i++)
        say(&a, agent, "t", "m");
    ASSERT_OK(vg_sync_hello(b.env, &hello, E));
    ASSERT_OK(vg_sync_offer(a.env, hello, &offer, E));
    /* Lose the third message's entry and record on the way. */
    json_t *entries = json_object_get(offer, "entries"),
           *records = json_object_get(offer, "records");
    size_t i, lost_at = 0;
    json_t *e;
    const char *lost_id = NULL;
    int seen = 0;
    json_array_foreach (entries, i, e)
        if (!strcmp(json_string_value(json_array_get(e, 2)), "message") && ++seen == 3) {
            lost_at = i;
            lost_id = json_string_value(json_array_get(e, 3));
        }
    ASSERT(lost_id != NULL);
    char lost[64];
    snprintf(lost, sizeof lost, "%s", lost_id);
    int64_t lost_seq = json_integer_value(json_array_get(json_array_get(entries, lost_at), 1));
    json_array_remove(entries, lost_at);
    json_array_foreach (records, i, e)
        if (!strcmp(json_string_value(json_object_get(e, "id")), lost)) {
            json_array_remove(records, i);
            break;
        }
    ASSERT_OK(vg_sync_apply(b.env, offer, &st, E));
    ASSERT_EQ(st.holes, 1);
    json_decref(hello);
    ASSERT_OK(vg_sync_hello(b.env, &hello, E));
    json_t *holes = json_object_get(json_object_get(hello, "holes"), vg_sync_host(a.env));
    ASSERT_EQ(json_array_size(holes), 1);
    ASSERT_EQ(json_integer_value(json_array_get(holes, 0)), lost_seq);
    /* The backfill: the next offer carries that entry and its record, nothing else. */
    json_decref(offer);
    ASSERT_OK(vg_sync_offer(a.env, hello, &offer, E));
    ASSERT_EQ(json_array_size(json_object_get(offer, "entries")), 1);
    ASSERT_EQ(json_array_size(json_object_get(offer, "records")), 1);
    ASSERT_STREQ(json_string_value(
                     json_object_get(json_array_get(json_object_get(offer, "records"), 0), "id")),
                 lost);
    memset(&st, 0, sizeof st);
    ASSERT_OK(vg_sync_apply(b.env, offer, &st, E));
    ASSERT_EQ(st.holes, 0);
    json_decref(hello);
    ASSERT_OK(vg_sync_hello(b.env, &hello, E));
    ASSERT_EQ(json_object_size(json_object_get(hello, "holes")), 0);
    /* Phase two: A records what B now holds. */
    ASSERT_OK(vg_sync_confirm(a.env, hello, E));
    json_t *peer = NULL;
    ASSERT_OK(vg_env_get_json(a.env, "sync_peer", vg_sync_host(b.env), &peer, NULL, E));
    ASSERT_EQ(
        json_integer_value(json_object_get(peer, vg_sync_host(a.env))),
        json_integer_value(json_object_get(json_object_get(hello, "marks"), vg_sync_host(a.env))));
    json_decref(peer);
    ASSERT_EQ(count_kind(&b, "message", "t"), 5);
    expect_same(&a, &b);
    json_decref(hello);
    json_decref(offer);
    device_close(&a);
    device_close(&b);
}

/* What one appended message costs to sync, after 10 and after 1,000 messages of history: the
 * same entries and records, and bytes that differ only by the digits of larger numbers.
 * proves: S0-004 S0-164 */
TEST(sync_cost_per_appended_message_does_not_grow_with_history)
{
    struct device a, b;
    char agent[37];
    struct vg_sync_stats early = {0}, late = {0};
    device_open(&a, "sync_cost_a", 71);
    device_open(&b, "sync_cost_b", 72);
    create_agent(&a, "cost", agent);
    for (int i = 0; i < 10; i++)
        say(&a, agent, "t", "a message of some length, the same every time");
    both(&a, &b);
    say(&a, agent, "t", "a message of some length, the same every time");
    push(&a, &b, &early);
    for (int i = 0; i < 1000; i++)
        say(&a, agent, "t", "a message of some length, the same every time");
    both(&a, &b);
    say(&a, agent, "t", "a message of some length, the same every time");
    push(&a, &b, &late);
    ASSERT_EQ(early.entries_sent, 1);
    ASSERT_EQ(early.records_sent, 1);
    ASSERT_EQ(late.entries_sent, early.entries_sent);
    ASSERT_EQ(late.records_sent, early.records_sent);
    ASSERT(late.bytes_sent <= early.bytes_sent + 16);
    fprintf(stderr, "one message: %lld bytes after 11, %lld after 1,012\n",
            (long long)early.bytes_sent, (long long)late.bytes_sent);
    expect_same(&a, &b);
    device_close(&a);
    device_close(&b);
}

/* The same tool call made on two devices (one operation id, from its run key) is one operation
 * once they meet.
 * proves: S0-176 */
TEST(one_operation_executed_on_two_devices_converges_to_one_mutation)
{
    struct device a, b;
    char agent[37];
    device_open(&a, "sync_op_a", 81);
    device_open(&b, "sync_op_b", 82);
    create_agent(&a, "op", agent);
    both(&a, &b);
    const char *op = "op-run-key-0001";
    ASSERT_OK(vg_env_put_text(a.env, "operation", op, agent, "succeeded", "set_task_title", 0,
                              "{\"status\":\"succeeded\",\"device\":\"laptop\"}", 0, E));
    ASSERT_OK(vg_env_put_text(b.env, "operation", op, agent, "succeeded", "set_task_title", 0,
                              "{\"status\":\"succeeded\",\"device\":\"desktop\"}", 0, E));
    both(&a, &b);
    struct vg_query q = {.kind = "operation", .owner = agent};
    int64_t na = 0, nb = 0;
    ASSERT_OK(vg_store_count(a.env->store, &q, &na, E));
    ASSERT_OK(vg_store_count(b.env->store, &q, &nb, E));
    ASSERT_EQ(na, 1);
    ASSERT_EQ(nb, 1);
    expect_same(&a, &b);
    device_close(&a);
    device_close(&b);
}

/* Shared state fields travel; the runtime state never does, and an offer carrying it is refused.
 * proves: S0-105 */
TEST(shared_state_syncs_and_runtime_state_never_does)
{
    struct device a, b;
    char agent[37];
    json_t *hello = NULL, *offer = NULL, *st = NULL, *rt = NULL;
    device_open(&a, "sync_rt_a", 91);
    device_open(&b, "sync_rt_b", 92);
    create_agent(&a, "rt", agent);
    both(&a, &b);
    set_state(&a, agent,
              "{\"sleep_until\": \"2026-03-01T00:00:00Z\", \"slots\": {\"goals\": \"ship it\"}}");
    json_t *busy = json_pack("{s:s, s:i}", "run_status", "running", "failure_streak", 3);
    ASSERT_OK(vg_runtime_state_update(a.env, agent, busy, E));
    json_decref(busy);
    ASSERT_OK(vg_sync_hello(b.env, &hello, E));
    ASSERT_OK(vg_sync_offer(a.env, hello, &offer, E));
    size_t i;
    json_t *r;
    json_array_foreach (json_object_get(offer, "records"), i, r)
        ASSERT(strcmp(json_string_value(json_object_get(r, "kind")), "agent_runtime") != 0);
    ASSERT_OK(vg_sync_apply(b.env, offer, NULL, E));
    ASSERT_OK(vg_state_get(b.env, agent, &st, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(st, "sleep_until")), "2026-03-01T00:00:00Z");
    ASSERT_STREQ(json_string_value(json_object_get(
                     json_object_get(json_object_get(st, "slots"), "goals"), "value")),
                 "ship it");
    ASSERT_OK(vg_runtime_state_get(b.env, agent, &rt, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(rt, "run_status")), "idle");
    ASSERT_EQ(json_integer_value(json_object_get(rt, "failure_streak")), 0);
    /* A peer that sends runtime state is refused whole. */
    json_array_append_new(json_object_get(offer, "records"),
                          json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:s}", "kind",
                                    "agent_runtime", "id", agent, "owner", agent, "k1", "", "k2",
                                    "", "seq", 0, "at", 0, "body", "{\"run_status\":\"running\"}"));
    vigil_error err = {0};
    ASSERT_EQ(vg_sync_apply(b.env, offer, NULL, &err), VIGIL_EINVAL);
    ASSERT_CONTAINS(err.message, "do not sync");
    json_decref(st);
    json_decref(rt);
    json_decref(hello);
    json_decref(offer);
    device_close(&a);
    device_close(&b);
}

/* Every synced record written after the join has an entry in the host's log and, changed in
 * place, a clock; each update is an entry of its own; one payload type names each record's
 * subtype and carries the body the store holds. (Subscriptions, timers, source references and
 * report heads: the test subscriptions_timers_and_source_refs_sync_with_their_log_entries.)
 * proves: S3-019 S0-090 */
TEST(every_synced_record_has_its_log_entry_and_clock)
{
    struct device a, b;
    char agent[37];
    device_open(&a, "sync_log_a", 95);
    device_open(&b, "sync_log_b", 96);
    create_agent(&a, "log", agent);
    char big[6000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    say(&a, agent, "t", big); /* a payload record and its link */
    /* A link whose id is too long to lead its log entry's id. */
    char far[81]; /* a link id of 172 bytes */
    memset(far, 'h', sizeof far - 1);
    far[sizeof far - 1] = '\0';
    ASSERT_OK(vg_link_add(a.env, agent, "agent_task", far, far, NULL, E));
    ASSERT_OK(vg_report_set(a.env, agent, "current", "all well", NULL, NULL, NULL, E));
    int64_t before = count_kind(&a, "sync_log", vg_sync_host(a.env));
    set_state(&a, agent, "{\"sleep_until\": \"2026-03-01T00:00:00Z\"}");
    set_state(&a, agent, "{\"sleep_until\": \"2026-03-02T00:00:00Z\"}");
    ASSERT_EQ(count_kind(&a, "sync_log", vg_sync_host(a.env)), before + 2);
    static const char *const kinds[] = {"agent",           "agent_state", "message",
                                        "message_payload", "report",      "link"};
    json_t *d = digest(&a);
    const char *key;
    json_t *v;
    int checked = 0;
    json_object_foreach (d, key, v) {
        char kind[64];
        const char *slash = strchr(key, '/');
        snprintf(kind, sizeof kind, "%.*s", (int)(slash - key), key);
        enum vg_sync_class cls = vg_sync_class_of(kind, slash + 1);
        if (cls == VG_SYNC_LOCAL)
            continue;
        /* Its entry names it. */
        int found = 0;
        const char *k2;
        json_t *w;
        json_object_foreach (d, k2, w)
            if (!strncmp(k2, "sync_log/", 9) &&
                ((!strncmp(k2 + 9, slash + 1, strlen(slash + 1)) &&
                  k2[9 + strlen(slash + 1)] == '@') ||
                 (k2[9] == '@' && /* an id too long to lead the entry's is in its body */
                  !strcmp(json_string_value(json_object_get(json_object_get(w, "body"), "id")),
                          slash + 1))) &&
                !strcmp(json_string_value(json_object_get(w, "k2")), kind))
                found = 1;
        if (!found)
            TEST_FAIL_("%s has no log entry", key);
        if (cls != VG_SYNC_IMMUTABLE) {
            char cid[VG_RECORD_ID_MAX], ck[300];
            vg_sync_clock_id(cid, kind, slash + 1);
            snprintf(ck, sizeof ck, "sync_clock/%s", cid);
            if (!json_object_get(d, ck))
                TEST_FAIL_("%s has no clock", key);
        }
        checked++;
    }
    ASSERT(checked >= (int)VG_ARRAY_LEN(kinds));
    int fallbacks = 0;
    json_object_foreach (d, key, v)
        fallbacks += !strncmp(key, "sync_log/@", 10);
    ASSERT_EQ(fallbacks, 1); /* the long link's entry */
    json_decref(d);
    /* The offer: one payload type, each record's subtype its kind, its body the store's. */
    json_t *hello = NULL, *offer = NULL;
    ASSERT_OK(vg_sync_hello(b.env, &hello, E));
    ASSERT_OK(vg_sync_offer(a.env, hello, &offer, E));
    ASSERT_EQ(json_integer_value(json_object_get(offer, "v")), 1);
    size_t i;
    json_t *r;
    int subtypes = 0;
    json_array_foreach (json_object_get(offer, "records"), i, r) {
        const char *kind = json_string_value(json_object_get(r, "kind"));
        struct vg_record *stored = NULL;
        ASSERT_OK(vg_store_get_copy(a.env->store, kind, json_string_value(json_object_get(r, "id")),
                                    &stored, E));
        ASSERT_STREQ(json_string_value(json_object_get(r, "body")), stored->body);
        vg_free(stored);
        for (size_t k = 0; k < VG_ARRAY_LEN(kinds); k++)
            subtypes += !strcmp(kind, kinds[k]);
    }
    ASSERT_EQ(subtypes, (int)json_array_size(json_object_get(offer, "records")));
    ASSERT_OK(vg_sync_apply(b.env, offer, NULL, E));
    json_t *targets = NULL;
    ASSERT_OK(vg_link_targets(b.env, "agent_task", far, &targets, E));
    ASSERT_EQ(json_array_size(targets), 1);
    json_decref(targets);
    expect_same(&a, &b);
    json_decref(hello);
    json_decref(offer);
    device_close(&a);
    device_close(&b);
}

/* ---- subscriptions, timers, source references and deletions ---------------------------- */

static void add_sub(struct device *d, const char *agent, const char *id, const char *token)
{
    const char *tokens[] = {token};
    struct vg_sub_spec spec = {.id = id, .agent_id = agent, .tokens = tokens, .n_tokens = 1};
    ASSERT_OK(vg_sub_add(d->env, &spec, NULL, E));
    vg_test_clock_advance(&d->clock, 1000);
}

static void add_timer(struct device *d, const char *agent, char id[37])
{
    ASSERT_OK(vg_timer_add(d->env, agent, VG_TIMER_CRON, "0 7 * * *", "UTC", id, E));
    vg_test_clock_advance(&d->clock, 1000);
}

/* The record's k1 on d, "" when d does not hold it. */
static void k1_of(struct device *d, const char *kind, const char *id, char out[64])
{
    struct vg_record *r = NULL;
    vigil_error miss = {0};
    out[0] = '\0';
    if (vg_store_get_copy(d->env->store, kind, id, &r, &miss) == VIGIL_OK)
        snprintf(out, 64, "%s", r->k1);
    vg_free(r);
}

static int holds(struct device *d, const char *kind, const char *id)
{
    struct vg_record *r = NULL;
    vigil_error miss = {0};
    int found = vg_store_get_copy(d->env->store, kind, id, &r, &miss) == VIGIL_OK;
    vg_free(r);
    return found;
}

/* The subscriptions whose index matches token on d (their ids, comma-separated). */
static void subs_matching(struct device *d, const char *token, char *out, size_t n)
{
    char k1[256];
    struct vg_id_list ids = {0};
    snprintf(k1, sizeof k1, "key:%s", token);
    struct vg_query q = {.kind = "sub_token", .k1 = k1};
    ASSERT_OK(vg_store_scan_ids(d->env->store, &q, &ids, E));
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < ids.n && len < n; i++) {
        struct vg_record *r = NULL;
        ASSERT_OK(vg_store_get_copy(d->env->store, "sub_token", ids.ids[i], &r, E));
        len += (size_t)snprintf(out + len, n - len, "%s,", r->k2);
        vg_free(r);
    }
    vg_id_list_release(&ids);
}

/* Subscriptions, timers, source references and report heads are agent-domain records like the
 * others: each write has its entry in the host's log and goes in the one payload type under
 * its subtype (with messages, which the tests above send, every subtype of seed 000's); a
 * subscription arrives with its token index, so a notification on the other device matches
 * it; a timer arrives held, not firing (its home device fires it), and an edit made on the
 * other device comes back to its home.
 * proves: S0-091 S0-162 */
TEST(subscriptions_timers_and_source_refs_sync_with_their_log_entries)
{
    struct device a, b;
    char agent[37], timer[37], k1[64], subs[512];
    device_open(&a, "sync_subs_a", 201);
    device_open(&b, "sync_subs_b", 202);
    create_agent(&a, "watcher", agent);
    int64_t before = count_kind(&a, "sync_log", vg_sync_host(a.env));
    add_sub(&a, agent, "sub-1", "TASK");
    add_timer(&a, agent, timer);
    ASSERT_OK(vg_source_ref_add(a.env, agent, "task", "t-42", E));
    /* Each write an entry of its own (a subscription, a timer, a source reference). */
    ASSERT_EQ(count_kind(&a, "sync_log", vg_sync_host(a.env)), before + 3);
    /* A report and its scope's head, two. */
    ASSERT_OK(vg_report_set(a.env, agent, "current", "all well", NULL, NULL, NULL, E));
    ASSERT_EQ(count_kind(&a, "sync_log", vg_sync_host(a.env)), before + 5);
    json_t *hello = NULL, *offer = NULL;
    ASSERT_OK(vg_sync_hello(b.env, &hello, E));
    ASSERT_OK(vg_sync_offer(a.env, hello, &offer, E));
    int seen = 0;
    size_t i;
    json_t *r, *e;
    json_array_foreach (json_object_get(offer, "records"), i, r) {
        const char *kind = json_string_value(json_object_get(r, "kind"));
        const char *id = json_string_value(json_object_get(r, "id"));
        seen |= !strcmp(kind, "subscription") ? 1
                : !strcmp(kind, "timer")      ? 2
                : !strcmp(kind, "source_ref") ? 4
                                              : 0;
        seen |= !strcmp(kind, "agent") ? 8 : !strcmp(kind, "agent_state") ? 16 : 0;
        seen |= !strcmp(kind, "report") ? 32 : !strncmp(id, "agent_report_head:", 18) ? 64 : 0;
    }
    ASSERT_EQ(seen, 127); /* seed 000's subtypes but the message (the tests above send those) */
    seen = 0;
    json_array_foreach (json_object_get(offer, "entries"), i, e) {
        const char *kind = json_string_value(json_array_get(e, 2));
        seen |= !strcmp(kind, "subscription") ? 1
                : !strcmp(kind, "timer")      ? 2
                : !strcmp(kind, "source_ref") ? 4
                                              : 0;
    }
    ASSERT_EQ(seen, 7);
    json_decref(hello);
    json_decref(offer);
    both(&a, &b);
    subs_matching(&b, "TASK", subs, sizeof subs);
    ASSERT_STREQ(subs, "sub-1,");
    json_t *refs = NULL;
    ASSERT_OK(vg_source_refs(b.env, agent, "task", &refs, E));
    ASSERT_EQ(json_array_size(refs), 1);
    json_decref(refs);
    /* The timer fires on a only: b holds it aside. */
    k1_of(&a, "timer", timer, k1);
    ASSERT_STREQ(k1, "on");
    k1_of(&b, "timer", timer, k1);
    ASSERT_STREQ(k1, "away");
    int64_t due = 0;
    ASSERT_OK(vg_timer_next_deadline(b.env, &due, E));
    ASSERT_EQ(due, -1);
    expect_same(&a, &b);
    /* Edited on b (its zone, its tokens): still held there, and the edit reaches a. */
    ASSERT_OK(vg_timer_set_zone(b.env, timer, "Europe/Berlin", E));
    add_sub(&b, agent, "sub-1", "PROJECT");
    k1_of(&b, "timer", timer, k1);
    ASSERT_STREQ(k1, "away");
    both(&a, &b);
    k1_of(&a, "timer", timer, k1);
    ASSERT_STREQ(k1, "on");
    json_t *t = NULL;
    ASSERT_OK(vg_env_get_json(a.env, "timer", timer, &t, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(t, "tz")), "Europe/Berlin");
    json_decref(t);
    subs_matching(&a, "TASK", subs, sizeof subs);
    ASSERT_STREQ(subs, "");
    subs_matching(&a, "PROJECT", subs, sizeof subs);
    ASSERT_STREQ(subs, "sub-1,");
    expect_same(&a, &b);
    device_close(&a);
    device_close(&b);
}

/* Deleting a synced record leaves a tombstone, and the deletion reaches the other devices: a
 * subscription (its index with it), a timer (removed on a device that is not its home) and a
 * source reference. A record made again under the same id after its deletion (a manifest's
 * subscription "manifest-AGENT-N") comes back; one a third device still holds from before the
 * deletion does not.
 * proves: S0-179 */
TEST(a_deletion_on_one_device_removes_the_record_on_the_others)
{
    struct device a, b, c;
    char agent[37], timer[37], subs[512];
    device_open(&a, "sync_del_a", 211);
    device_open(&b, "sync_del_b", 212);
    device_open(&c, "sync_del_c", 213);
    create_agent(&a, "watcher", agent);
    add_sub(&a, agent, "sub-1", "TASK");
    add_timer(&a, agent, timer);
    ASSERT_OK(vg_source_ref_add(a.env, agent, "task", "t-42", E));
    both(&a, &b);
    both(&a, &c);
    ASSERT(holds(&b, "subscription", "sub-1") && holds(&c, "subscription", "sub-1"));
    ASSERT_OK(vg_sub_remove(a.env, "sub-1", E));
    ASSERT_OK(vg_timer_remove(b.env, timer, E)); /* removed where it does not fire */
    ASSERT_OK(vg_source_ref_remove(a.env, agent, "task", "t-42", E));
    ASSERT(holds(&a, "tombstone", "subscription:sub-1"));
    char tomb[64];
    snprintf(tomb, sizeof tomb, "timer:%s", timer);
    ASSERT(holds(&b, "tombstone", tomb));
    both(&a, &b);
    ASSERT(!holds(&b, "subscription", "sub-1"));
    ASSERT(holds(&b, "tombstone", "subscription:sub-1"));
    ASSERT(!holds(&a, "timer", timer));
    json_t *refs = NULL;
    ASSERT_OK(vg_source_refs(b.env, agent, "task", &refs, E));
    ASSERT_EQ(json_array_size(refs), 0);
    json_decref(refs);
    subs_matching(&b, "TASK", subs, sizeof subs);
    ASSERT_STREQ(subs, "");
    expect_same(&a, &b);
    /* c still holds them from before: syncing with b brings the deletions, not the records. */
    both(&c, &b);
    ASSERT(!holds(&b, "subscription", "sub-1") && !holds(&c, "subscription", "sub-1"));
    ASSERT(!holds(&c, "timer", timer) && !holds(&b, "timer", timer));
    expect_same(&b, &c);
    /* Made again under its id after the deletion: it comes back everywhere; deleted again, it
     * goes again. */
    add_sub(&b, agent, "sub-1", "PROJECT");
    both(&b, &c);
    both(&c, &a);
    ASSERT(holds(&a, "subscription", "sub-1"));
    subs_matching(&a, "PROJECT", subs, sizeof subs);
    ASSERT_STREQ(subs, "sub-1,");
    ASSERT_OK(vg_sub_remove(a.env, "sub-1", E));
    both(&a, &b);
    ASSERT(!holds(&b, "subscription", "sub-1"));
    /* So does a source reference (its second deletion too). */
    ASSERT_OK(vg_source_ref_add(a.env, agent, "task", "t-42", E));
    both(&a, &b);
    ASSERT_OK(vg_source_refs(b.env, agent, "task", &refs, E));
    ASSERT_EQ(json_array_size(refs), 1);
    json_decref(refs);
    ASSERT_OK(vg_source_ref_remove(a.env, agent, "task", "t-42", E));
    both(&a, &b);
    ASSERT_OK(vg_source_refs(b.env, agent, "task", &refs, E));
    ASSERT_EQ(json_array_size(refs), 0);
    json_decref(refs);
    /* A deletion and an edit made apart: one of them is kept, the same on every device. */
    add_sub(&a, agent, "sub-2", "TASK");
    both(&a, &b);
    both(&b, &c);
    ASSERT_OK(vg_sub_remove(a.env, "sub-2", E));
    add_sub(&c, agent, "sub-2", "PROJECT");
    both(&a, &b);
    both(&b, &c);
    both(&a, &b);
    expect_same(&a, &b);
    expect_same(&b, &c);
    device_close(&a);
    device_close(&b);
    device_close(&c);
}

/* A person's message and the agent's answer. */
static void turn(struct device *d, const char *agent, const char *thread, const char *q,
                 const char *a)
{
    say(d, agent, thread, q);
    struct vg_message_in m = {
        .agent_id = agent, .thread_id = thread, .kind = VG_MSG_THOUGHT, .content = a};
    ASSERT_OK(vg_message_append(d->env, &m, NULL, E));
    vg_test_clock_advance(&d->clock, 1000);
}

/* The contents of the window a runtime keeps of the thread, one string ("a1|b1|..."). */
static void kept_window(struct vg_env *env, const char *agent, const char *thread, char *out,
                        size_t n)
{
    struct vg_window w;
    ASSERT_OK(vg_window_cache_read(env, agent, thread, 100000, &w, E));
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < w.n && len < n; i++)
        len += (size_t)snprintf(out + len, n - len, "%s|", w.msgs[i]->content);
    vg_window_release(&w);
}

/* Trial K: a runtime that keeps a thread's window between runs (a daemon's) caught it up with
 * the messages numbered after its newest; messages another device wrote before the exchange,
 * which sync stores here numbered below that, were never in it. Here another runtime on the
 * store (as `vigil sync`, or a daemon's sync route on another of its threads) applies them. */
TEST(a_kept_window_takes_in_messages_sync_stored_below_its_newest)
{
    struct device a, b;
    char agent[37], text[2048];
    device_open(&a, "sync_window_a", 221);
    device_open(&b, "sync_window_b", 222);
    create_agent(&a, "pal", agent);
    turn(&a, agent, "t", "q0", "a0");
    both(&a, &b);
    vigil_runtime_options o = {.size = sizeof o, .store_uri = a.path};
    vigil_runtime *daemon = NULL;
    ASSERT_OK(
        vg_runtime_open_with(&o, &a.clock.base, vg_ids_seeded(&a.clock.base, 223), &daemon, E));
    struct vg_env *kept = vg_runtime_env(daemon);
    /* Apart: two turns on a, one on b; b's messages number below a's newest. */
    turn(&a, agent, "t", "qa1", "a1");
    turn(&a, agent, "t", "qa2", "a2");
    turn(&b, agent, "t", "qb1", "b1");
    kept_window(kept, agent, "t", text, sizeof text);
    ASSERT_STREQ(text, "q0|a0|qa1|a1|qa2|a2|");
    both(&a, &b);
    kept_window(kept, agent, "t", text, sizeof text);
    ASSERT(strstr(text, "qb1|b1|") != NULL);
    ASSERT(strstr(text, "qa1|a1|qa2|a2|") != NULL);
    /* And what a fresh read gives, which the kept one then follows. */
    char fresh[2048];
    vigil_runtime_close(daemon);
    ASSERT_OK(
        vg_runtime_open_with(&o, &a.clock.base, vg_ids_seeded(&a.clock.base, 224), &daemon, E));
    kept_window(vg_runtime_env(daemon), agent, "t", fresh, sizeof fresh);
    ASSERT_STREQ(text, fresh);
    vigil_runtime_close(daemon);
    device_close(&a);
    device_close(&b);
}

/* "NUMBER:markdown,..." of the agent's current report and its history on d. */
static void report_numbers(struct device *d, const char *agent, char *out, size_t n)
{
    json_t *v = NULL, *h;
    size_t i, len = 0;
    ASSERT_OK(vg_report_get(d->env, agent, "current", 5, &v, E));
    json_t *all = json_array();
    json_array_append(all, json_object_get(v, "report"));
    json_array_foreach (json_object_get(v, "history"), i, h)
        json_array_append(all, h);
    out[0] = '\0';
    json_array_foreach (all, i, h)
        len += (size_t)snprintf(out + len, n - len, "%s:%s,",
                                json_string_value(json_object_get(h, "number")),
                                json_string_value(json_object_get(h, "markdown")));
    json_decref(all);
    json_decref(v);
}

/* Trial K11: two devices that each wrote a report apart both numbered it #2. The rule: a
 * number several reports of a scope share gets a letter per report, in the order of their ids,
 * so every device that holds them reads the same labels ("2a", "2b"), and a person can say
 * which one is meant. */
TEST(reports_numbered_alike_on_two_devices_are_told_apart_the_same_way)
{
    struct device a, b;
    char agent[37], on_a[512], on_b[512];
    device_open(&a, "sync_k11_a", 231);
    device_open(&b, "sync_k11_b", 232);
    create_agent(&a, "pal", agent);
    ASSERT_OK(vg_report_set(a.env, agent, "current", "one", NULL, NULL, NULL, E));
    both(&a, &b);
    ASSERT_OK(vg_report_set(a.env, agent, "current", "laptop", NULL, NULL, NULL, E));
    ASSERT_OK(vg_report_set(b.env, agent, "current", "desktop", NULL, NULL, NULL, E));
    report_numbers(&a, agent, on_a, sizeof on_a);
    ASSERT_STREQ(on_a, "2:laptop,1:one,");
    both(&a, &b);
    report_numbers(&a, agent, on_a, sizeof on_a);
    report_numbers(&b, agent, on_b, sizeof on_b);
    ASSERT_STREQ(on_a, on_b);
    ASSERT(strstr(on_a, "2a:") && strstr(on_a, "2b:") && strstr(on_a, "1:one,"));
    /* The next report numbers above both. */
    ASSERT_OK(vg_report_set(b.env, agent, "current", "after", NULL, NULL, NULL, E));
    report_numbers(&b, agent, on_b, sizeof on_b);
    ASSERT(!strncmp(on_b, "3:after,", 8));
    device_close(&a);
    device_close(&b);
}

/* Trial K9: two agents made apart under one name both keep it after a sync (nothing could
 * decide which one a person means by it), and a lookup by that name is refused (give an id); so
 * the sync names them, the same way from either side: duplicate_names, by name, ids sorted. */
TEST(a_sync_names_the_agents_two_devices_made_under_one_name)
{
    struct device a, b;
    char pal_a[37], pal_b[37], other[37], want[256];
    device_open(&a, "sync_k9_a", 241);
    device_open(&b, "sync_k9_b", 242);
    create_agent(&a, "Pal", pal_a);
    create_agent(&b, "Pal", pal_b);
    create_agent(&b, "Solo", other);
    char *text = NULL;
    ASSERT_OK(vigil_sync_with(a.rt, b.rt, &text, E));
    json_t *v = json_loads(text, 0, NULL);
    vigil_free(text);
    snprintf(want, sizeof want, "[{\"name\": \"Pal\", \"ids\": [\"%s\", \"%s\"]}]",
             strcmp(pal_a, pal_b) < 0 ? pal_a : pal_b, strcmp(pal_a, pal_b) < 0 ? pal_b : pal_a);
    json_t *expected = json_loads(want, 0, NULL);
    ASSERT(json_equal(json_object_get(v, "duplicate_names"), expected));
    json_decref(v);
    ASSERT_OK(vigil_sync_with(b.rt, a.rt, &text, E));
    v = json_loads(text, 0, NULL);
    vigil_free(text);
    ASSERT(json_equal(json_object_get(v, "duplicate_names"), expected));
    json_decref(v);
    /* Destroyed, one is no longer a duplicate. */
    ASSERT_OK(vg_agent_transition(a.env, pal_a, VIGIL_LIFECYCLE_DESTROYED, "one is enough", E));
    ASSERT_OK(vigil_sync_with(a.rt, b.rt, &text, E));
    v = json_loads(text, 0, NULL);
    vigil_free(text);
    ASSERT_EQ(json_array_size(json_object_get(v, "duplicate_names")), 0);
    json_decref(v);
    json_decref(expected);
    device_close(&a);
    device_close(&b);
}

/* A store copied to a second machine has its original's host id: the exchange refuses it. */
/* Item 7 of SYNC.md's list: a runtime opened on a store before another runtime (another
 * process: `vigil sync`, a daemon's sync route) joined it logs what it writes from then on, so
 * a daemon need not be restarted; a runtime on a store that never joins logs nothing. */
TEST(a_runtime_opened_before_its_store_joined_logs_its_writes)
{
    struct device early;
    vigil_error err = {0};
    vigil_runtime *joiner = NULL;
    char before[37], after[37];
    memset(&early, 0, sizeof early);
    vg_test_clock_init(&early.clock, 1767225600000);
    snprintf(early.path, sizeof early.path, "%s/agent.db", vg_test_tmpdir("sync_late_join"));
    if (getenv("VIGIL_TEST_RT_PG"))
        vg_test_pg_schema_uri("sync_late_join", 1, early.path, sizeof early.path);
    vigil_runtime_options o = {.size = sizeof o, .store_uri = early.path, .create_if_missing = 1};
    ASSERT_OK(vg_runtime_open_with(&o, &early.clock.base, vg_ids_seeded(&early.clock.base, 31),
                                   &early.rt, &err));
    early.env = vg_runtime_env(early.rt);
    create_agent(&early, "before", before);
    ASSERT_EQ(count_kind(&early, "sync_log", NULL), 0); /* not joined: nothing logged */
    vigil_runtime_options jo = {.size = sizeof jo, .store_uri = early.path};
    ASSERT_OK(vigil_runtime_open(&jo, &joiner, &err));
    ASSERT_OK(vg_sync_join(vg_runtime_env(joiner), E));
    const char *host = vg_sync_host(vg_runtime_env(joiner));
    int64_t joined = count_kind(&early, "sync_log", host);
    ASSERT(joined >= 2); /* the join's snapshot: the agent and its state at least */
    create_agent(&early, "after", after); /* the early runtime, after the join */
    ASSERT(count_kind(&early, "sync_log", host) > joined);
    ASSERT_STREQ(vg_sync_host(early.env), host);
    struct device peer;
    device_open(&peer, "sync_late_join_peer", 32);
    ASSERT_OK(vg_sync_between(vg_runtime_env(joiner), peer.env, NULL, NULL, E));
    struct vg_record *r = NULL;
    ASSERT_OK(vg_store_get_copy(peer.env->store, "agent", after, &r, E));
    vg_free(r);
    vigil_runtime_close(joiner);
    device_close(&peer);
    device_close(&early);
}

/* Offers bounded in bytes (a network peer's): each direction goes in several offers, each
 * applied as it comes; a direction cut off after its first offer leaves the receiver holding
 * a prefix of the log without a hole, and the next exchange sends only the rest (S0-164). */
TEST(bounded_offers_cut_off_midway_are_taken_up_where_they_stopped)
{
    struct device a, b;
    char agent[37];
    device_open(&a, "sync_bounded_a", 41);
    device_open(&b, "sync_bounded_b", 42);
    create_agent(&a, "talker", agent);
    for (int i = 0; i < 20; i++)
        say(&a, agent, "t1", "a line of the conversation, long enough to count in bytes");
    int64_t total = count_kind(&a, "sync_log", vg_sync_host(a.env));
    /* The first offer alone, as a connection cut after it would leave it. */
    json_t *hello = NULL, *offer = NULL;
    struct vg_sync_stats first = {0};
    ASSERT_OK(vg_sync_hello(b.env, &hello, E));
    json_object_set_new(hello, "max_bytes", json_integer(2000));
    ASSERT_OK(vg_sync_offer(a.env, hello, &offer, E));
    ASSERT(json_is_true(json_object_get(offer, "more")));
    int64_t sent_first = (int64_t)json_array_size(json_object_get(offer, "entries"));
    ASSERT(sent_first > 0 && sent_first < total);
    ASSERT_OK(vg_sync_apply(b.env, offer, &first, E));
    ASSERT_EQ(first.holes, 0); /* a prefix: the mark moved over all of it */
    json_decref(offer);
    json_decref(hello);
    /* Taken up in bounded offers: only the rest is sent, in more than one. */
    struct vg_sync_peer peer = vg_sync_local_peer(b.env);
    peer.max_bytes = 2000;
    struct vg_sync_stats sent = {0}, received = {0};
    ASSERT_OK(vg_sync_exchange(a.env, &peer, &sent, &received, NULL, E));
    ASSERT_EQ(sent.entries_sent, total - sent_first);
    ASSERT_EQ(sent.holes, 0);
    expect_same(&a, &b);
    device_close(&a);
    device_close(&b);
}

/* A compaction job's execution state (the job, its status and attempts, the thread's cursor)
 * stays with the store that runs it: never logged, never in an offer, refused from a peer.
 * proves: S0-030 */
TEST(compaction_job_state_is_never_sent)
{
    struct device a, b;
    char agent[37], job[VG_RECORD_ID_MAX];
    struct vg_compaction_policy policy = {.thread_budget = 200, .keep_tokens = 50, .span_max = 10};
    device_open(&a, "sync_compact_a", 101);
    device_open(&b, "sync_compact_b", 102);
    create_agent(&a, "long", agent);
    for (int i = 0; i < 30; i++)
        say(&a, agent, "t1", "a message long enough that thirty of them pass a small budget");
    ASSERT_OK(vg_compact_consider(a.env, agent, "t1", &policy, job, E));
    ASSERT(job[0]);
    int ran = 0;
    ASSERT_OK(vg_compact_run_one(a.env, NULL, &policy, &ran, E)); /* the fallback summarizer */
    ASSERT_EQ(ran, 1);
    ASSERT(count_kind(&a, "compaction_job", NULL) >= 1);
    ASSERT(count_kind(&a, "compaction_cursor", NULL) >= 1);
    json_t *hello = NULL, *offer = NULL, *r;
    ASSERT_OK(vg_sync_hello(b.env, &hello, E));
    ASSERT_OK(vg_sync_offer(a.env, hello, &offer, E));
    size_t i;
    json_array_foreach (json_object_get(offer, "records"), i, r)
        ASSERT(strncmp(json_string_value(json_object_get(r, "kind")), "compaction", 10) != 0);
    json_array_foreach (json_object_get(offer, "entries"), i, r)
        ASSERT(strncmp(json_string_value(json_array_get(r, 2)), "compaction", 10) != 0);
    ASSERT_OK(vg_sync_apply(b.env, offer, NULL, E));
    ASSERT_EQ(count_kind(&b, "compaction_job", NULL), 0);
    ASSERT_EQ(count_kind(&b, "compaction_cursor", NULL), 0);
    /* A peer that sends one is refused whole. */
    json_array_append_new(json_object_get(offer, "records"),
                          json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:s}", "kind",
                                    "compaction_job", "id", job, "owner", agent, "k1", "t1", "k2",
                                    "pending", "seq", 0, "at", 0, "body",
                                    "{\"status\":\"pending\"}"));
    vigil_error err = {0};
    ASSERT_EQ(vg_sync_apply(b.env, offer, NULL, &err), VIGIL_EINVAL);
    ASSERT_CONTAINS(err.message, "do not sync");
    json_decref(hello);
    json_decref(offer);
    device_close(&a);
    device_close(&b);
}

TEST(a_copy_of_a_store_cannot_sync_with_its_original)
{
    struct device a, b;
    json_t *hello = NULL, *offer = NULL;
    device_open(&a, "sync_copy_a", 97);
    device_open(&b, "sync_copy_b", 97); /* the same seed: the same host id */
    ASSERT_STREQ(vg_sync_host(a.env), vg_sync_host(b.env));
    ASSERT_OK(vg_sync_hello(b.env, &hello, E));
    ASSERT_OK(vg_sync_offer(a.env, hello, &offer, E));
    vigil_error err = {0};
    ASSERT_EQ(vg_sync_apply(b.env, offer, NULL, &err), VIGIL_ECONFLICT);
    json_decref(hello);
    json_decref(offer);
    device_close(&a);
    device_close(&b);
}

/* A store file's copy, with its write-ahead log (the store is closed: a backup). */
static void copy_store(const char *from, const char *to)
{
    const char *suffix[] = {"", "-wal"};
    for (size_t i = 0; i < VG_ARRAY_LEN(suffix); i++) {
        char src[4300], dst[4300], *data = NULL;
        size_t len = 0;
        snprintf(src, sizeof src, "%s%s", from, suffix[i]);
        snprintf(dst, sizeof dst, "%s%s", to, suffix[i]);
        unlink(dst);
        if (!vg_fs_exists(src))
            continue;
        ASSERT_OK(vg_fs_read_file(src, (size_t)1 << 30, &data, &len, E));
        ASSERT_OK(vg_fs_write_file(dst, data, len, E));
        vg_free(data);
    }
    char shm[4300];
    snprintf(shm, sizeof shm, "%s-shm", to);
    unlink(shm);
}

/* The device's store opened again (a restart), its ids from another seed. */
static void device_reopen(struct device *d, uint64_t seed)
{
    vigil_runtime_options o = {.size = sizeof o, .store_uri = d->path};
    ASSERT_OK(
        vg_runtime_open_with(&o, &d->clock.base, vg_ids_seeded(&d->clock.base, seed), &d->rt, E));
    d->env = vg_runtime_env(d->rt);
}

/* A store restored from a backup keeps its host id, and the peer it synced with after the
 * backup holds entries of that host the restored store does not: what the restored store
 * writes takes those SEQs again under other records, and a sync sent none of it, silently,
 * while the lost store's last turn stayed on the peer only (trial K1). The exchange refuses
 * it, and the peer is left as it was. */
TEST(a_store_restored_from_a_backup_is_refused_by_a_peer_that_saw_its_lost_writes)
{
    if (getenv("VIGIL_TEST_RT_PG"))
        return; /* the backup here is a copy of the store's file */
    struct device a, b;
    char agent[37], backup[4300];
    vigil_error err = {0};
    device_open(&a, "sync_restore_a", 101);
    device_open(&b, "sync_restore_b", 102);
    snprintf(backup, sizeof backup, "%s.backup", a.path);
    create_agent(&a, "pal", agent);
    say(&a, agent, "chat", "before the backup");
    both(&a, &b);
    device_close(&a);
    copy_store(a.path, backup);
    device_reopen(&a, 103);
    say(&a, agent, "chat", "after the backup, lost with the disk");
    both(&a, &b);
    device_close(&a);
    copy_store(backup, a.path); /* the restore */
    device_reopen(&a, 104);
    json_t *before = digest(&b);
    /* Nothing written yet: the peer holds more of this host's log than the store itself. */
    ASSERT_EQ(vg_sync_between(a.env, b.env, NULL, NULL, &err), VIGIL_ECONFLICT);
    ASSERT(strstr(err.message, "restored from a backup") != NULL);
    /* As many entries written as were lost, then more: the entry at the peer's mark differs. */
    for (int i = 0; i < 3; i++) {
        say(&a, agent, "chat", "after the restore");
        err = (vigil_error){0};
        ASSERT_EQ(vg_sync_between(a.env, b.env, NULL, NULL, &err), VIGIL_ECONFLICT);
        ASSERT(strstr(err.message, "restored from a backup") != NULL);
    }
    json_t *after = digest(&b);
    ASSERT(json_equal(before, after));
    json_decref(before);
    json_decref(after);
    device_close(&a);
    device_close(&b);
}

int main(void)
{
    RUN(messages_appended_on_one_device_appear_on_the_other_and_forks_are_both_kept);
    RUN(a_forked_thread_is_read_branch_by_branch);
    RUN(a_runtime_opened_before_its_store_joined_logs_its_writes);
    RUN(bounded_offers_cut_off_midway_are_taken_up_where_they_stopped);
    RUN(lifecycle_changes_sync_and_concurrent_ones_meet_by_precedence);
    RUN(the_clock_decides_not_the_local_revision);
    RUN(a_replayed_exchange_changes_nothing);
    RUN(a_hole_in_a_hosts_sequence_is_found_and_backfilled);
    RUN(sync_cost_per_appended_message_does_not_grow_with_history);
    RUN(one_operation_executed_on_two_devices_converges_to_one_mutation);
    RUN(shared_state_syncs_and_runtime_state_never_does);
    RUN(every_synced_record_has_its_log_entry_and_clock);
    RUN(a_copy_of_a_store_cannot_sync_with_its_original);
    RUN(a_store_restored_from_a_backup_is_refused_by_a_peer_that_saw_its_lost_writes);
    RUN(compaction_job_state_is_never_sent);
    RUN(three_devices_doing_concurrent_work_converge_in_any_order);
    RUN(subscriptions_timers_and_source_refs_sync_with_their_log_entries);
    RUN(a_deletion_on_one_device_removes_the_record_on_the_others);
    RUN(a_kept_window_takes_in_messages_sync_stored_below_its_newest);
    RUN(reports_numbered_alike_on_two_devices_are_told_apart_the_same_way);
    RUN(a_sync_names_the_agents_two_devices_made_under_one_name);
    return 0;
}
