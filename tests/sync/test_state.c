/*
 * test_state.c: the multi-device merge of an agent's shared state, rule by rule, then devices
 * that write and exchange at random and must end with one state.
 * proves: S0-158 (the merge rules covered by unit tests before the runtime uses them)
 */
#include "helpers/test.h"

#include "sync/state.h"

#include <jansson.h>
#include <string.h>

static vigil_error err;

static json_t *state(void)
{
    json_t *s = vg_sync_state_new();
    ASSERT(s != NULL);
    return s;
}

static void set(json_t *s, const char *host, const char *field, json_t *value, int64_t rank)
{
    vigil_code rc = vg_sync_state_set(s, host, field, value, rank, &err);
    json_decref(value);
    if (rc)
        TEST_FAIL_("set %s on %s: %s", field, host, err.message);
}

static void merge(json_t *into, const json_t *from)
{
    ASSERT_OK(vg_sync_state_check(from, &err));
    ASSERT_OK(vg_sync_state_merge(into, from, &err));
    ASSERT_OK(vg_sync_state_check(into, &err));
}

static json_t *copy(const json_t *s)
{
    json_t *c = json_deep_copy(s);
    ASSERT(c != NULL);
    return c;
}

static const char *text(const json_t *s, const char *field)
{
    const json_t *v = vg_sync_state_value(s, field);
    return v && json_is_string(v) ? json_string_value(v) : v ? "(null)" : "(unset)";
}

/* Both devices start from the state they last exchanged, then write apart. */
static void fork_state(json_t **a, json_t **b)
{
    *a = state();
    set(*a, "A", "lifecycle", json_string("active"), 0);
    *b = copy(*a);
}

/* Merging both ways gives one state, and its field reads as want. */
static void expect_both_ways(json_t *a, json_t *b, const char *field, const char *want)
{
    json_t *ab = copy(a), *ba = copy(b);
    merge(ab, b);
    merge(ba, a);
    ASSERT(json_equal(ab, ba));
    ASSERT_STREQ(text(ab, field), want);
    json_decref(ab);
    json_decref(ba);
}

TEST(a_local_write_supersedes_what_the_device_has_seen)
{
    json_t *s = state();
    ASSERT(vg_sync_state_value(s, "lifecycle") == NULL);
    set(s, "A", "lifecycle", json_string("active"), 0);
    set(s, "A", "lifecycle", json_string("dormant"), 0);
    ASSERT_STREQ(text(s, "lifecycle"), "dormant");
    ASSERT_EQ(json_array_size(json_object_get(json_object_get(s, "fields"), "lifecycle")), 1);
    ASSERT_EQ(json_integer_value(json_object_get(json_object_get(s, "clock"), "A")), 2);
    ASSERT_OK(vg_sync_state_check(s, &err));
    json_decref(s);
}

/* proves: S0-106 */
TEST(a_dominating_clock_wins_the_whole_snapshot)
{
    json_t *a, *b;
    fork_state(&a, &b);
    set(a, "A", "slot:mood", json_string("calm"), 0);
    merge(b, a); /* B has seen all of A */
    set(b, "B", "slot:mood", json_string("busy"), 0);
    set(a, "A", "lifecycle", json_string("dormant"), 0); /* concurrent with B's write */
    merge(b, a);
    set(b, "B", "lifecycle", json_string("active"), 0); /* resumed after seeing dormant */
    ASSERT_EQ(vg_sync_clock_compare(json_object_get(b, "clock"), json_object_get(a, "clock")),
              VG_CLOCK_AFTER);
    json_t *before = copy(b);
    merge(a, b);
    merge(b, before);
    ASSERT(json_equal(a, b));
    ASSERT(json_equal(a, before)); /* the dominating snapshot, whole: no field merged apart */
    ASSERT_STREQ(text(a, "lifecycle"), "active");
    ASSERT_STREQ(text(a, "slot:mood"), "busy");
    json_decref(before);
    json_decref(a);
    json_decref(b);
}

/* proves: S0-107 */
TEST(processed_counters_merge_by_per_host_maximum)
{
    json_t *a, *b;
    fork_state(&a, &b);
    ASSERT_OK(vg_sync_state_count(a, "A", 7, &err));
    ASSERT_OK(vg_sync_state_count(a, "B", 2, &err));
    ASSERT_OK(vg_sync_state_count(b, "B", 5, &err));
    ASSERT_OK(vg_sync_state_count(b, "A", 3, &err));
    ASSERT_OK(vg_sync_state_count(b, "B", 4, &err)); /* never back */
    merge(a, b);
    json_t *c = json_object_get(a, "processed_counter_by_host");
    ASSERT_EQ(json_integer_value(json_object_get(c, "A")), 7);
    ASSERT_EQ(json_integer_value(json_object_get(c, "B")), 5);
    json_decref(a);
    json_decref(b);
}

/* proves: S0-108 */
TEST(concurrent_lifecycles_merge_by_precedence)
{
    static const char *const cases[][3] = {
        {"dormant", "active", "dormant"},  {"destroyed", "dormant", "destroyed"},
        {"active", "created", "active"},   {"destroyed", "active", "destroyed"},
        {"dormant", "dormant", "dormant"},
    };
    for (size_t i = 0; i < VG_ARRAY_LEN(cases); i++) {
        json_t *a, *b;
        fork_state(&a, &b);
        set(a, "A", "lifecycle", json_string(cases[i][0]), 0);
        set(b, "B", "lifecycle", json_string(cases[i][1]), 0);
        ASSERT_EQ(vg_sync_clock_compare(json_object_get(a, "clock"), json_object_get(b, "clock")),
                  VG_CLOCK_CONCURRENT);
        expect_both_ways(a, b, "lifecycle", cases[i][2]);
        json_decref(a);
        json_decref(b);
    }
}

/* proves: S0-109 */
TEST(pointers_prefer_the_descendant_then_the_rank_then_host_and_id)
{
    json_t *a, *b;
    fork_state(&a, &b);
    /* Known ancestry: B saw A's head m1 and moved past it; A's later write elsewhere does not
     * bring m1 back. */
    set(a, "A", "recent_head_message_id", json_string("m1"), 10);
    merge(b, a);
    set(b, "B", "recent_head_message_id", json_string("m2"), 11);
    set(a, "A", "slot:x", json_integer(1), 0);
    expect_both_ways(a, b, "recent_head_message_id", "m2");
    /* Concurrent: the record made later in causal order (its clock's sum) wins, whichever host. */
    set(a, "A", "latest_summary_message_id", json_string("s-a"), 40);
    set(b, "B", "latest_summary_message_id", json_string("s-b"), 30);
    expect_both_ways(a, b, "latest_summary_message_id", "s-a");
    /* Equal rank: the host id decides, not the time either device thought it was. */
    set(a, "A", "latest_summary_message_id", json_string("s-a2"), 50);
    set(b, "B", "latest_summary_message_id", json_string("s-b2"), 50);
    expect_both_ways(a, b, "latest_summary_message_id", "s-b2");
    json_decref(a);
    json_decref(b);
}

/* proves: S0-110 */
TEST(slots_merge_one_by_one_by_stamp_then_host)
{
    json_t *a, *b;
    fork_state(&a, &b);
    set(a, "A", "slot:topic", json_string("a-topic"), 0);
    set(b, "B", "slot:focus", json_string("b-focus"), 0);
    expect_both_ways(a, b, "slot:topic", "a-topic"); /* each slot kept: no whole-map winner */
    expect_both_ways(a, b, "slot:focus", "b-focus");
    set(b, "B", "slot:topic", json_string("b-topic"), 0); /* B has written more: ranks higher */
    expect_both_ways(a, b, "slot:topic", "b-topic");
    set(a, "A", "slot:topic", json_string("a-again"), 5); /* equal rank: host B wins over A */
    set(b, "B", "slot:topic", json_string("b-again"), 5);
    expect_both_ways(a, b, "slot:topic", "b-again");
    json_decref(a);
    json_decref(b);
}

/* proves: S0-111 */
TEST(scheduling_keeps_the_earliest_wake_and_the_latest_barrier)
{
    json_t *a, *b;
    fork_state(&a, &b);
    set(a, "A", "next_wake_at", json_string("2026-11-29T10:00:00Z"), 0);
    set(b, "B", "next_wake_at", json_string("2026-11-29T09:30:00.000+00:00"), 0);
    set(a, "A", "sleep_until", json_string("2026-11-29T08:00:00Z"), 0);
    set(b, "B", "sleep_until", json_string("2026-11-29T07:00:00Z"), 0);
    expect_both_ways(a, b, "next_wake_at", "2026-11-29T09:30:00.000+00:00");
    expect_both_ways(a, b, "sleep_until", "2026-11-29T08:00:00Z");
    set(a, "A", "next_wake_at", json_null(), 0); /* a cleared wake yields to a set one */
    set(b, "B", "sleep_until", json_null(), 0);
    expect_both_ways(a, b, "next_wake_at", "2026-11-29T09:30:00.000+00:00");
    expect_both_ways(a, b, "sleep_until", "2026-11-29T08:00:00Z");
    json_decref(a);
    json_decref(b);
}

/* A small deterministic generator: the same runs on every machine. */
static uint64_t rng = 88172645463325252ULL;
static unsigned pick(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static const char *const hosts[] = {"A", "B", "C"};

static void random_write(json_t *s, const char *host)
{
    static const char *const times[] = {"2026-11-29T09:00:00Z", "2026-11-29T09:00:00+01:00",
                                        "2026-11-30T00:00:00Z", "2025-01-01T00:00:00Z"};
    static const char *const lifecycles[] = {"created", "active", "dormant", "destroyed"};
    char buf[16];
    switch (pick(7)) {
    case 0:
        set(s, host, "lifecycle", json_string(lifecycles[pick(4)]), 0);
        break;
    case 1:
        set(s, host, "next_wake_at", pick(4) ? json_string(times[pick(4)]) : json_null(), 0);
        break;
    case 2:
        set(s, host, "sleep_until", pick(4) ? json_string(times[pick(4)]) : json_null(), 0);
        break;
    case 3:
        snprintf(buf, sizeof buf, "m%u", pick(50));
        set(s, host, "recent_head_message_id", json_string(buf), 1 + pick(20));
        break;
    case 4:
        snprintf(buf, sizeof buf, "slot:s%u", pick(3));
        set(s, host, buf, json_integer(pick(100)), pick(2) ? 0 : 1 + pick(5));
        break;
    case 5:
        ASSERT_OK(vg_sync_state_count(s, host, pick(30), &err));
        break;
    default:
        set(s, host, "latest_summary_message_id", json_string(host), 0);
    }
}

/* proves: S0-112, S0-113 */
TEST(devices_that_write_and_exchange_in_any_order_converge)
{
    for (int round = 0; round < 300; round++) {
        json_t *dev[3];
        for (int i = 0; i < 3; i++)
            dev[i] = state();
        for (int step = 0; step < 40; step++) {
            unsigned i = pick(3), j = pick(3);
            if (pick(3))
                random_write(dev[i], hosts[i]);
            else if (i != j)
                merge(dev[i], dev[j]); /* a one-way exchange, at any time */
        }
        /* Everything exchanged, in an order of the round's own: each merges the others once,
         * then again, until nothing moves. */
        unsigned order = pick(6);
        for (int pass = 0; pass < 2; pass++)
            for (int k = 0; k < 3; k++) {
                int i = (int)((k + order) % 3), j = (int)((k + 1 + order / 3) % 3);
                if (i == j)
                    j = (j + 1) % 3;
                merge(dev[i], dev[j]);
                merge(dev[i], dev[3 - i - j]);
            }
        for (int i = 1; i < 3; i++)
            if (!json_equal(dev[0], dev[i])) {
                char *x = json_dumps(dev[0], JSON_SORT_KEYS),
                     *y = json_dumps(dev[i], JSON_SORT_KEYS);
                TEST_FAIL_("round %d: devices differ:\n%s\n%s", round, x, y);
            }
        for (int i = 0; i < 3; i++)
            json_decref(dev[i]);
    }
}

/* Merging is a join: the order, the grouping and repeats do not matter. */
TEST(merge_is_commutative_associative_and_idempotent)
{
    for (int round = 0; round < 200; round++) {
        json_t *base = state(), *x[3];
        for (int n = pick(4); n > 0; n--)
            random_write(base, hosts[pick(3)]);
        for (int i = 0; i < 3; i++) {
            x[i] = copy(base);
            for (int n = 1 + pick(4); n > 0; n--)
                random_write(x[i], hosts[i]);
        }
        json_t *ab_c = copy(x[0]), *a_bc = copy(x[0]), *bc = copy(x[1]), *ba = copy(x[1]);
        merge(ab_c, x[1]);
        merge(ab_c, x[2]);
        merge(bc, x[2]);
        merge(a_bc, bc);
        ASSERT(json_equal(ab_c, a_bc));
        merge(ba, x[0]);
        json_t *ab = copy(x[0]);
        merge(ab, x[1]);
        ASSERT(json_equal(ab, ba));
        json_t *again = copy(ab);
        merge(again, ab);
        merge(again, x[1]);
        ASSERT(json_equal(again, ab));
        json_t *objs[] = {base, x[0], x[1], x[2], ab_c, a_bc, bc, ba, ab, again};
        for (size_t i = 0; i < VG_ARRAY_LEN(objs); i++)
            json_decref(objs[i]);
    }
}

/* Another device's payload is outside input: each malformed part is named, nothing merged. */
TEST(a_malformed_state_is_refused_with_its_problem)
{
    static const char *const cases[][2] = {
        {"[]", "must be {"},
        {"{\"clock\":{},\"fields\":{}}", "must be {"},
        {"{\"clock\":{\"A\":0},\"fields\":{},\"processed_counter_by_host\":{}}", "out of range"},
        {"{\"clock\":{\"A B\":1},\"fields\":{},\"processed_counter_by_host\":{}}", "invalid host"},
        {"{\"clock\":{\"A\":1},\"fields\":{\"colour\":[]},\"processed_counter_by_host\":{}}",
         "no shared state field"},
        {"{\"clock\":{\"A\":1},\"fields\":{\"lifecycle\":[]},\"processed_counter_by_host\":{}}",
         "1 to 64 writes"},
        {"{\"clock\":{\"A\":1},\"fields\":{\"lifecycle\":[{\"v\":\"active\",\"dot\":[\"A\",2],"
         "\"rank\":1}]},\"processed_counter_by_host\":{}}",
         "has not seen"},
        {"{\"clock\":{\"A\":1},\"fields\":{\"lifecycle\":[{\"v\":\"asleep\",\"dot\":[\"A\",1],"
         "\"rank\":1}]},\"processed_counter_by_host\":{}}",
         "created, active"},
        {"{\"clock\":{\"A\":2},\"fields\":{\"lifecycle\":[{\"v\":\"active\",\"dot\":[\"A\",2],"
         "\"rank\":1},{\"v\":\"active\",\"dot\":[\"A\",1],\"rank\":1}]},"
         "\"processed_counter_by_host\":{}}",
         "sorted by dot"},
        {"{\"clock\":{\"A\":1},\"fields\":{\"next_wake_at\":[{\"v\":\"soon\",\"dot\":[\"A\",1],"
         "\"rank\":1}]},\"processed_counter_by_host\":{}}",
         "RFC 3339"},
        {"{\"clock\":{\"A\":1},\"fields\":{},\"processed_counter_by_host\":{\"A\":-1}}",
         "out of range"},
        {"{\"clock\":{\"A\":9007199254740993},\"fields\":{},\"processed_counter_by_host\":{}}",
         "out of range"},
    };
    for (size_t i = 0; i < VG_ARRAY_LEN(cases); i++) {
        json_t *v = json_loads(cases[i][0], 0, NULL);
        ASSERT(v != NULL);
        ASSERT_EQ(vg_sync_state_check(v, &err), VIGIL_EINVAL);
        ASSERT_CONTAINS(err.message, cases[i][1]);
        json_decref(v);
    }
    json_t *s = state();
    ASSERT_EQ(vg_sync_state_set(s, "A", "colour", json_null(), 0, &err), VIGIL_EINVAL);
    ASSERT_EQ(vg_sync_state_set(s, "", "lifecycle", json_null(), 0, &err), VIGIL_EINVAL);
    json_t *three = json_integer(3);
    ASSERT_EQ(vg_sync_state_set(s, "A", "recent_head_message_id", three, 0, &err), VIGIL_EINVAL);
    json_decref(three);
    ASSERT_EQ(json_object_size(json_object_get(s, "clock")), 0); /* nothing moved */
    json_decref(s);
}

/* Two devices that took one host id (or a store restored from a backup and written again)
 * wrote different things under one dot: the merge refuses and leaves the state as it was. */
TEST(one_dot_with_two_contents_is_a_conflict_that_changes_nothing)
{
    json_t *a, *b;
    fork_state(&a, &b);
    set(a, "A", "slot:x", json_string("from the laptop"), 0);
    set(b, "A", "slot:x", json_string("from its restored backup"), 0);
    set(b, "B", "lifecycle", json_string("dormant"), 0);
    json_t *before = copy(a);
    ASSERT_OK(vg_sync_state_check(b, &err));
    ASSERT_EQ(vg_sync_state_merge(a, b, &err), VIGIL_ECONFLICT);
    ASSERT_CONTAINS(err.message, "host \"A\" differs");
    ASSERT(json_equal(a, before));
    json_decref(before);
    json_decref(a);
    json_decref(b);
}

int main(void)
{
    RUN(a_local_write_supersedes_what_the_device_has_seen);
    RUN(a_dominating_clock_wins_the_whole_snapshot);
    RUN(processed_counters_merge_by_per_host_maximum);
    RUN(concurrent_lifecycles_merge_by_precedence);
    RUN(pointers_prefer_the_descendant_then_the_rank_then_host_and_id);
    RUN(slots_merge_one_by_one_by_stamp_then_host);
    RUN(scheduling_keeps_the_earliest_wake_and_the_latest_barrier);
    RUN(devices_that_write_and_exchange_in_any_order_converge);
    RUN(merge_is_commutative_associative_and_idempotent);
    RUN(a_malformed_state_is_refused_with_its_problem);
    RUN(one_dot_with_two_contents_is_a_conflict_that_changes_nothing);
    return 0;
}
