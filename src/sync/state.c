/*
 * state.c: an agent's shared state as multi-value registers under one vector clock, merged as
 * state.h says.
 */
#include "sync/state.h"

#include "base/common.h"
#include "base/json.h"
#include "os/clock.h"

#include <inttypes.h>
#include <jansson.h>
#include <string.h>

#define MAX_COUNTER (INT64_C(1) << 53) /* exact in every JSON reader */
#define MAX_HOSTS 1024
#define MAX_FIELDS 1024
#define MAX_WRITES 64 /* concurrent writes kept for one field: one per device at most */
#define MAX_NAME 64

enum field_kind { F_LIFECYCLE, F_NEXT_WAKE, F_SLEEP_UNTIL, F_POINTER, F_SLOT };

static const char *const lifecycles[] = {"created", "active", "dormant", "destroyed"};

static int valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > MAX_NAME)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x21 || s[i] > 0x7e)
            return 0;
    return 1;
}

/* The field's kind, or -1 for a name that is no shared field. */
static int field_kind(const char *field)
{
    if (!strcmp(field, "lifecycle"))
        return F_LIFECYCLE;
    if (!strcmp(field, "next_wake_at"))
        return F_NEXT_WAKE;
    if (!strcmp(field, "sleep_until"))
        return F_SLEEP_UNTIL;
    if (!strcmp(field, "recent_head_message_id") || !strcmp(field, "latest_summary_message_id"))
        return F_POINTER;
    if (!strncmp(field, "slot:", 5) && valid_name(field + 5))
        return F_SLOT;
    return -1;
}

static int lifecycle_rank(const char *s)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(lifecycles); i++)
        if (!strcmp(s, lifecycles[i]))
            return (int)i;
    return -1;
}

static vigil_code check_value(int kind, const char *field, const json_t *v, vigil_error *err)
{
    int64_t ms;
    switch (kind) {
    case F_LIFECYCLE:
        if (!json_is_string(v) || lifecycle_rank(json_string_value(v)) < 0)
            return VG_FAIL(err, VIGIL_EINVAL,
                           "lifecycle must be created, active, dormant or destroyed");
        return VIGIL_OK;
    case F_NEXT_WAKE:
    case F_SLEEP_UNTIL:
        if (json_is_null(v) ||
            (json_is_string(v) && vg_time_parse_ms(json_string_value(v), &ms) == 0))
            return VIGIL_OK;
        return VG_FAIL(err, VIGIL_EINVAL, "%s must be an RFC 3339 time or null", field);
    case F_POINTER:
        if (json_is_null(v) || (json_is_string(v) && valid_name(json_string_value(v))))
            return VIGIL_OK;
        return VG_FAIL(err, VIGIL_EINVAL, "%s must be a record id or null", field);
    default: /* a slot holds any JSON value */
        return v ? VIGIL_OK : VG_FAIL(err, VIGIL_EINVAL, "%s has no value", field);
    }
}

static int valid_counter(const json_t *n, int64_t min)
{
    return json_is_integer(n) && json_integer_value(n) >= min &&
           json_integer_value(n) <= MAX_COUNTER;
}

/* A host -> counter object: the clock (counters from 1) or the processed counters (from 0). */
static vigil_code check_counters(const json_t *m, const char *what, int64_t min, vigil_error *err)
{
    const char *host;
    json_t *n;
    if (!json_is_object(m))
        return VG_FAIL(err, VIGIL_EINVAL, "%s must be an object of host counters", what);
    if (json_object_size(m) > MAX_HOSTS)
        return VG_FAIL(err, VIGIL_EINVAL, "%s names more than %d hosts", what, MAX_HOSTS);
    json_object_foreach ((json_t *)m, host, n) {
        if (!valid_name(host))
            return VG_FAIL(err, VIGIL_EINVAL, "%s: invalid host id \"%.64s\"", what, host);
        if (!valid_counter(n, min))
            return VG_FAIL(err, VIGIL_EINVAL, "%s: the counter of host \"%s\" is out of range",
                           what, host);
    }
    return VIGIL_OK;
}

static int64_t clock_of(const json_t *clock, const char *host)
{
    return json_integer_value(json_object_get(clock, host)); /* absent: 0 */
}

static const char *dot_host(const json_t *w)
{
    return json_string_value(json_array_get(json_object_get(w, "dot"), 0));
}

static int64_t dot_counter(const json_t *w)
{
    return json_integer_value(json_array_get(json_object_get(w, "dot"), 1));
}

static int dot_cmp(const json_t *a, const json_t *b)
{
    int c = strcmp(dot_host(a), dot_host(b));
    if (c)
        return c;
    return (dot_counter(a) > dot_counter(b)) - (dot_counter(a) < dot_counter(b));
}

static vigil_code check_write(int kind, const char *field, const json_t *w, const json_t *clock,
                              vigil_error *err)
{
    const json_t *dot = json_object_get(w, "dot");
    if (!json_is_object(w) || json_object_size(w) != 3 || !json_is_array(dot) ||
        json_array_size(dot) != 2 || !json_is_string(json_array_get(dot, 0)) ||
        !valid_name(json_string_value(json_array_get(dot, 0))) ||
        !valid_counter(json_array_get(dot, 1), 1) ||
        !valid_counter(json_object_get(w, "rank"), 1) || !json_object_get(w, "v"))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "%s: a write must be {\"v\": VALUE, \"dot\": [HOST, N], \"rank\": R}",
                       field);
    if (dot_counter(w) > clock_of(clock, dot_host(w)))
        return VG_FAIL(err, VIGIL_EINVAL, "%s: a write the state's clock has not seen", field);
    return check_value(kind, field, json_object_get(w, "v"), err);
}

static vigil_code check_field(const char *field, const json_t *writes, const json_t *clock,
                              vigil_error *err)
{
    int kind = field_kind(field);
    vigil_code rc;
    if (kind < 0)
        return VG_FAIL(err, VIGIL_EINVAL, "\"%.80s\" is no shared state field", field);
    if (!json_is_array(writes) || json_array_size(writes) == 0 ||
        json_array_size(writes) > MAX_WRITES)
        return VG_FAIL(err, VIGIL_EINVAL, "%s must hold 1 to %d writes", field, MAX_WRITES);
    for (size_t i = 0; i < json_array_size(writes); i++) {
        const json_t *w = json_array_get(writes, i);
        if ((rc = check_write(kind, field, w, clock, err)))
            return rc;
        if (i > 0 && dot_cmp(json_array_get(writes, i - 1), w) >= 0)
            return VG_FAIL(err, VIGIL_EINVAL, "%s: writes must be sorted by dot, once each", field);
    }
    return VIGIL_OK;
}

vigil_code vg_sync_state_check(const json_t *v, vigil_error *err)
{
    const json_t *clock = json_object_get(v, "clock"), *fields = json_object_get(v, "fields");
    const char *field;
    json_t *writes;
    vigil_code rc;
    if (!json_is_object(v) || json_object_size(v) != 3 || !json_is_object(fields))
        return VG_FAIL(
            err, VIGIL_EINVAL,
            "a shared state must be {\"clock\", \"fields\", \"processed_counter_by_host\"}");
    if ((rc = check_counters(clock, "clock", 1, err)) ||
        (rc = check_counters(json_object_get(v, "processed_counter_by_host"),
                             "processed_counter_by_host", 0, err)))
        return rc;
    if (json_object_size(fields) > MAX_FIELDS)
        return VG_FAIL(err, VIGIL_EINVAL, "a shared state holds at most %d fields", MAX_FIELDS);
    json_object_foreach ((json_t *)fields, field, writes)
        if ((rc = check_field(field, writes, clock, err)))
            return rc;
    return VIGIL_OK;
}

json_t *vg_sync_state_new(void)
{
    return json_pack("{s:{}, s:{}, s:{}}", "clock", "fields", "processed_counter_by_host");
}

int64_t vg_sync_clock_sum(const json_t *clock)
{
    const char *host;
    json_t *n;
    int64_t sum = 0;
    json_object_foreach ((json_t *)clock, host, n)
        sum += json_integer_value(n);
    return sum;
}

/* Whether every counter of a is at most b's. */
static int clock_le(const json_t *a, const json_t *b)
{
    const char *host;
    json_t *n;
    json_object_foreach ((json_t *)a, host, n)
        if (json_integer_value(n) > clock_of(b, host))
            return 0;
    return 1;
}

enum vg_clock_order vg_sync_clock_compare(const json_t *a, const json_t *b)
{
    int le = clock_le(a, b), ge = clock_le(b, a);
    if (le && ge)
        return VG_CLOCK_EQUAL;
    return le ? VG_CLOCK_BEFORE : ge ? VG_CLOCK_AFTER : VG_CLOCK_CONCURRENT;
}

/* Raises every counter of into to at least from's. */
static vigil_code join_counters(json_t *into, const json_t *from, vigil_error *err)
{
    const char *host;
    json_t *n;
    json_object_foreach ((json_t *)from, host, n)
        if ((json_integer_value(n) > clock_of(into, host) || !json_object_get(into, host)) &&
            json_object_set_new(into, host, json_integer(json_integer_value(n))))
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory merging host counters");
    return VIGIL_OK;
}

vigil_code vg_sync_state_set(json_t *state, const char *host, const char *field, json_t *value,
                             int64_t rank, vigil_error *err)
{
    json_t *clock = json_object_get(state, "clock"), *w;
    int kind = field ? field_kind(field) : -1;
    vigil_code rc;
    if (!host || !valid_name(host))
        return VG_FAIL(err, VIGIL_EINVAL, "a host id is 1 to %d printable ASCII bytes", MAX_NAME);
    if (kind < 0)
        return VG_FAIL(err, VIGIL_EINVAL, "\"%.80s\" is no shared state field", field ? field : "");
    if ((rc = check_value(kind, field, value, err)))
        return rc;
    int64_t n = clock_of(clock, host) + 1;
    if (n > MAX_COUNTER || rank < 0 || rank > MAX_COUNTER)
        return VG_FAIL(err, VIGIL_EINVAL, "a counter or rank past 2^53");
    if (json_object_set_new(clock, host, json_integer(n)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing a shared field");
    if (!rank)
        rank = vg_sync_clock_sum(clock);
    w = json_pack("[{s:O, s:[s, I], s:I}]", "v", value, "dot", host, (json_int_t)n, "rank",
                  (json_int_t)rank);
    if (!w || json_object_set_new(json_object_get(state, "fields"), field, w))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing a shared field");
    return VIGIL_OK;
}

vigil_code vg_sync_state_count(json_t *state, const char *host, int64_t n, vigil_error *err)
{
    json_t *counters = json_object_get(state, "processed_counter_by_host");
    if (!host || !valid_name(host) || n < 0 || n > MAX_COUNTER)
        return VG_FAIL(err, VIGIL_EINVAL, "a processed counter needs a host id and 0 to 2^53");
    if (n > clock_of(counters, host) && json_object_set_new(counters, host, json_integer(n)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory raising a processed counter");
    return VIGIL_OK;
}

/* writes' write with w's dot, or NULL. */
static const json_t *same_dot(const json_t *writes, const json_t *w)
{
    for (size_t i = 0; i < json_array_size(writes); i++)
        if (!dot_cmp(json_array_get(writes, i), w))
            return json_array_get(writes, i);
    return NULL;
}

static int by_dot(const void *a, const void *b)
{
    return dot_cmp(*(json_t *const *)a, *(json_t *const *)b);
}

/* The writes of one field both sides keep: a write survives when the other side holds it too,
 * or has not seen it (its clock is behind the write's dot); a write the other has seen but no
 * longer holds was superseded there. */
static vigil_code merge_field(json_t *fields, const char *field, const json_t *mine,
                              const json_t *theirs, const json_t *my_clock,
                              const json_t *their_clock, vigil_error *err)
{
    json_t *kept = json_array();
    if (!kept)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory merging %s", field);
    for (size_t i = 0; i < json_array_size(mine); i++) {
        json_t *w = json_array_get(mine, i);
        const json_t *twin = same_dot(theirs, w);
        if (twin && !json_equal(twin, w)) { /* one write, two contents: a host id used twice */
            json_decref(kept);
            return VG_FAIL(err, VIGIL_ECONFLICT,
                           "%s: write %" PRId64 " of host \"%s\" differs between the two states "
                           "(two devices with one host id, or a store restored from a backup)",
                           field, dot_counter(w), dot_host(w));
        }
        if ((twin || dot_counter(w) > clock_of(their_clock, dot_host(w))) &&
            json_array_append(kept, w))
            goto oom;
    }
    for (size_t i = 0; i < json_array_size(theirs); i++) {
        json_t *w = json_array_get(theirs, i), *copy;
        if (same_dot(mine, w) || dot_counter(w) <= clock_of(my_clock, dot_host(w)))
            continue;
        if (!(copy = json_deep_copy(w)) || json_array_append_new(kept, copy))
            goto oom;
    }
    if (json_array_size(kept) == 0) {
        json_decref(kept);
        json_object_del(fields, field);
        return VIGIL_OK;
    }
    if (json_array_size(kept) > MAX_WRITES) {
        json_decref(kept);
        return VG_FAIL(err, VIGIL_ETOOBIG, "%s: more than %d concurrent writes", field, MAX_WRITES);
    }
    if (vg_json_array_sort(kept, by_dot) || json_object_set_new(fields, field, kept))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory merging %s", field);
    return VIGIL_OK;
oom:
    json_decref(kept);
    return VG_FAIL(err, VIGIL_ENOMEM, "out of memory merging %s", field);
}

/* The merge, into out (a copy of state's, so a failure leaves state as it was). */
static vigil_code merge_into(json_t *out, const json_t *state, const json_t *other,
                             vigil_error *err)
{
    json_t *fields = json_object_get(out, "fields");
    const json_t *mine = json_object_get(state, "fields");
    const json_t *theirs = json_object_get(other, "fields");
    const json_t *my_clock = json_object_get(state, "clock");
    const json_t *their_clock = json_object_get(other, "clock");
    json_t *writes;
    const char *field;
    vigil_code rc;
    json_object_foreach ((json_t *)mine, field, writes)
        if ((rc = merge_field(fields, field, writes, json_object_get(theirs, field), my_clock,
                              their_clock, err)))
            return rc;
    json_object_foreach ((json_t *)theirs, field, writes)
        if (!json_object_get(mine, field) &&
            (rc = merge_field(fields, field, NULL, writes, my_clock, their_clock, err)))
            return rc;
    if ((rc = join_counters(json_object_get(out, "clock"), their_clock, err)))
        return rc;
    return join_counters(json_object_get(out, "processed_counter_by_host"),
                         json_object_get(other, "processed_counter_by_host"), err);
}

vigil_code vg_sync_state_merge(json_t *state, const json_t *other, vigil_error *err)
{
    json_t *out = json_deep_copy(state);
    vigil_code rc;
    if (!out)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory merging a shared state");
    if (!(rc = merge_into(out, state, other, err)) && json_object_update(state, out))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory merging a shared state");
    json_decref(out);
    return rc;
}

/* >0 when a's time is later than b's; a null time is later than any time for next_wake_at's
 * rule (the earliest wins, and a null one yields) and earlier for sleep_until's. */
static int time_cmp(const json_t *a, const json_t *b)
{
    int64_t x, y;
    if (json_is_null(a) || json_is_null(b))
        return json_is_null(a) - json_is_null(b);
    vg_time_parse_ms(json_string_value(a), &x);
    vg_time_parse_ms(json_string_value(b), &y);
    if (x != y)
        return (x > y) - (x < y);
    return strcmp(json_string_value(a), json_string_value(b)); /* one instant, two spellings */
}

/* >0 when write a wins over write b under the field's rule; never 0 for two writes of one
 * field (their dots differ). */
static int wins(int kind, const json_t *a, const json_t *b)
{
    const json_t *va = json_object_get(a, "v"), *vb = json_object_get(b, "v");
    int c = 0;
    if (kind == F_LIFECYCLE)
        c = lifecycle_rank(json_string_value(va)) - lifecycle_rank(json_string_value(vb));
    else if (kind == F_NEXT_WAKE)
        c = -time_cmp(va, vb);
    else if (kind == F_SLEEP_UNTIL)
        c = json_is_null(va) || json_is_null(vb) ? json_is_null(vb) - json_is_null(va)
                                                 : time_cmp(va, vb);
    else {
        int64_t ra = json_integer_value(json_object_get(a, "rank"));
        int64_t rb = json_integer_value(json_object_get(b, "rank"));
        c = (ra > rb) - (ra < rb);
        if (!c)
            c = strcmp(dot_host(a), dot_host(b));
        if (!c && kind == F_POINTER && json_is_string(va) && json_is_string(vb))
            c = strcmp(json_string_value(va), json_string_value(vb));
    }
    return c ? c : dot_cmp(a, b);
}

const json_t *vg_sync_state_value(const json_t *state, const char *field)
{
    const json_t *writes = json_object_get(json_object_get(state, "fields"), field);
    int kind = field_kind(field);
    const json_t *best = NULL;
    if (kind < 0)
        return NULL;
    for (size_t i = 0; i < json_array_size(writes); i++) {
        const json_t *w = json_array_get(writes, i);
        if (!best || wins(kind, w, best) > 0)
            best = w;
    }
    return best ? json_object_get(best, "v") : NULL;
}
