/*
 * test_env.c: the env's record reads. A body read again is served from the memo of parsed
 * bodies, and that changes nothing a reader can see: every read gives a value of its own (a
 * caller that changes its copy changes no other read), a record written anew reads as written,
 * and text that is not JSON is refused as before.
 */
#include "helpers/rt.h"

#include "agent/agent.h"

#include <jansson.h>

static const char body[] = "{\"name\":\"a\",\"n\":1,\"list\":[1,2.5,\"x\"],\"o\":{\"k\":null}}";

TEST(every_read_is_a_value_of_its_own)
{
    struct test_rt t;
    json_t *a = NULL, *b = NULL, *c = NULL;
    test_rt_open(&t, "env_memo_copies");
    ASSERT_OK(vg_env_put_text(t.env, "thing", "t1", "", "", "", 0, body, 0, E));
    ASSERT_OK(vg_env_get_json(t.env, "thing", "t1", &a, NULL, E));
    /* The first reader changes what it got, deep inside too. */
    json_object_set_new(a, "n", json_integer(99));
    json_array_append_new(json_object_get(a, "list"), json_integer(3));
    json_object_set_new(json_object_get(a, "o"), "k", json_true());
    ASSERT_OK(vg_env_get_json(t.env, "thing", "t1", &b, NULL, E));
    json_t *want = json_loads(body, 0, NULL);
    ASSERT(json_equal(b, want));
    ASSERT(b != a);
    /* Keys keep their order: the same text out as in. */
    char *text = json_dumps(b, JSON_COMPACT);
    ASSERT_STREQ(text, body);
    free(text);
    /* A parse of the same text elsewhere (a scan) is also its own value, however the reads
     * before it changed theirs (a text is memoized from its second reading on). */
    json_object_set_new(json_object_get(b, "o"), "k", json_false());
    json_array_clear(json_object_get(b, "list"));
    for (int i = 0; i < 3; i++) {
        ASSERT_OK(vg_env_parse_json(t.env, body, &c));
        ASSERT(json_equal(c, want) && c != b);
        json_object_set_new(c, "name", json_string("changed"));
        json_decref(c);
    }
    ASSERT_OK(vg_env_parse_json(t.env, body, &c));
    ASSERT(json_equal(c, want));
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(want);
    test_rt_close(&t);
}

TEST(a_record_written_anew_reads_as_written)
{
    struct test_rt t;
    json_t *v = NULL;
    int64_t rev = 0;
    test_rt_open(&t, "env_memo_update");
    ASSERT_OK(vg_env_put_text(t.env, "thing", "t1", "", "", "", 0, "{\"n\":1}", 0, E));
    ASSERT_OK(vg_env_get_json(t.env, "thing", "t1", &v, &rev, E));
    json_object_set_new(v, "n", json_integer(2));
    ASSERT_OK(vg_env_update_json(t.env, "thing", "t1", "", "", "", 0, v, rev, E));
    json_decref(v);
    ASSERT_OK(vg_env_get_json(t.env, "thing", "t1", &v, NULL, E));
    ASSERT_EQ(json_integer_value(json_object_get(v, "n")), 2);
    json_decref(v);
    test_rt_close(&t);
}

TEST(text_that_is_not_json_is_refused)
{
    struct test_rt t;
    json_t *v = NULL;
    test_rt_open(&t, "env_memo_bad");
    ASSERT_CODE(VIGIL_EPARSE, vg_env_parse_json(t.env, "{\"n\":", &v));
    ASSERT(v == NULL);
    ASSERT_OK(vg_env_parse_json(t.env, "{\"n\":1}", &v));
    json_decref(v);
    /* Bodies past the memo's size are parsed each time, the same way. */
    char big[5000];
    memset(big, ' ', sizeof big);
    memcpy(big, "{\"n\":7", 6);
    big[sizeof big - 2] = '}';
    big[sizeof big - 1] = '\0';
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(vg_env_parse_json(t.env, big, &v));
        ASSERT_EQ(json_integer_value(json_object_get(v, "n")), 7);
        json_decref(v);
    }
    test_rt_close(&t);
}

/* A read-only read of a record read lately is the memo's value itself: no parse and no copy
 * (what an agent's config read on every step costs), while a read for changing still gets a
 * value of its own, and a changed record is read as changed. */
TEST(a_shared_read_is_the_memos_value_and_a_private_read_is_not)
{
    struct test_rt t;
    json_t *a = NULL, *b = NULL, *c = NULL, *mine = NULL;
    int64_t rev = 0;
    test_rt_open(&t, "env_memo_shared");
    ASSERT_OK(vg_env_put_text(t.env, "thing", "t1", "", "", "", 0, "{\"n\":1}", 0, E));
    ASSERT_OK(vg_env_get_json_shared(t.env, "thing", "t1", &a, E)); /* noted */
    ASSERT_OK(vg_env_get_json_shared(t.env, "thing", "t1", &b, E)); /* memoized */
    ASSERT_OK(vg_env_get_json_shared(t.env, "thing", "t1", &c, E));
    ASSERT(b == c);
    ASSERT_EQ(json_integer_value(json_object_get(c, "n")), 1);
    ASSERT_OK(vg_env_get_json(t.env, "thing", "t1", &mine, &rev, E));
    ASSERT(mine != c);
    json_object_set_new(mine, "n", json_integer(2)); /* the shared value is not touched */
    ASSERT_EQ(json_integer_value(json_object_get(c, "n")), 1);
    ASSERT_OK(vg_env_update_json(t.env, "thing", "t1", "", "", "", 0, mine, rev, E));
    json_decref(mine);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    ASSERT_OK(vg_env_get_json_shared(t.env, "thing", "t1", &a, E));
    ASSERT_EQ(json_integer_value(json_object_get(a, "n")), 2);
    json_decref(a);
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_env_get_json_shared(t.env, "thing", "none", &a, NULL));
    test_rt_close(&t);
}

/* Keys in the order they are met, as text: "a,b,c" (nested objects in brackets). */
static void key_order(const json_t *v, char *out, size_t size)
{
    const char *k;
    json_t *x;
    size_t i;
    if (json_is_array(v))
        json_array_foreach (v, i, x)
            key_order(x, out, size);
    if (!json_is_object(v))
        return;
    json_object_foreach ((json_t *)v, k, x) {
        size_t n = strlen(out);
        snprintf(out + n, size - n, "%s,", k);
        if (json_is_object(x) || json_is_array(x)) {
            n = strlen(out);
            snprintf(out + n, size - n, "[");
            key_order(x, out, size);
            n = strlen(out);
            snprintf(out + n, size - n, "]");
        }
    }
}

/* The shared read of (kind, id) read twice: the memo's own value both times (the same
 * pointer), what parsing the stored text gives, its keys in the text's order. */
static void read_back_as_parsed(struct vg_env *env, const char *kind, const char *id, int noted)
{
    json_t *a = NULL, *b = NULL, *want = NULL;
    struct vg_record *r = NULL;
    char got_keys[512] = "", want_keys[512] = "";
    ASSERT_OK(vg_store_get_copy(env->store, kind, id, &r, E));
    ASSERT((want = json_loads(r->body, 0, NULL)) != NULL);
    ASSERT_OK(vg_env_get_json_shared(env, kind, id, &a, E));
    ASSERT_OK(vg_env_get_json_shared(env, kind, id, &b, E));
    /* a text only parsed is noted at its first reading and kept from its second: then a and b
     * are two values */
    ASSERT_EQ(a == b, noted);
    ASSERT(json_equal(a, want) && json_equal(b, want));
    key_order(want, want_keys, sizeof want_keys);
    key_order(a, got_keys, sizeof got_keys);
    ASSERT_STREQ(got_keys, want_keys);
    json_decref(a);
    json_decref(b);
    json_decref(want);
    vg_free(r);
}

/* A body written by vg_env_update_json_noted is served to the next read of its text from the
 * memo, without parsing it, and as parsing it would give it: keys in the text's (sorted)
 * order whatever order they were set in, the caller's own value when it is that already
 * (released by the caller, it lives on in the memo). A value the parse would not give back
 * the same (a real, rounded in its text) is not kept: its text is parsed as before. An
 * agent's runtime state is written so (the claim, the run and the finish read it in turn). */
TEST(a_body_written_noted_is_read_back_unparsed_as_the_parse_gives_it)
{
    struct test_rt t;
    json_t *v = NULL, *mine = NULL;
    int64_t rev = 0;
    char agent[37];
    test_rt_open(&t, "env_memo_noted");
    ASSERT_OK(vg_env_put_text(t.env, "thing", "t1", "", "", "", 0, "{\"n\":1}", 0, E));
    ASSERT_OK(vg_env_get_json(t.env, "thing", "t1", &v, &rev, E));
    /* set out of order, nested too */
    json_object_set_new(
        v, "z", json_pack("{s:i, s:[{s:i, s:i}], s:s}", "y", 1, "b", "q", 2, "c", 3, "a", "x"));
    json_object_set_new(v, "m", json_true());
    ASSERT_OK(vg_env_update_json_noted(t.env, "thing", "t1", "", "", "", 0, v, rev, E));
    json_decref(v);
    read_back_as_parsed(t.env, "thing", "t1", 1);
    /* already in order: kept as it is, and a private read is still a copy of its own */
    ASSERT_OK(vg_env_get_json(t.env, "thing", "t1", &v, &rev, E));
    json_object_set_new(v, "n", json_integer(2));
    ASSERT_OK(vg_env_update_json_noted(t.env, "thing", "t1", "", "", "", 0, v, rev, E));
    json_decref(v);
    ASSERT_OK(vg_env_get_json(t.env, "thing", "t1", &mine, &rev, E));
    json_object_set_new(mine, "n", json_integer(3));
    json_decref(mine);
    read_back_as_parsed(t.env, "thing", "t1", 1);
    ASSERT_OK(vg_env_get_json(t.env, "thing", "t1", &v, &rev, E));
    ASSERT_EQ(json_integer_value(json_object_get(v, "n")), 2);
    /* a real: parsed again */
    json_object_set_new(v, "r", json_real(0.1));
    ASSERT_OK(vg_env_update_json_noted(t.env, "thing", "t1", "", "", "", 0, v, rev, E));
    json_decref(v);
    read_back_as_parsed(t.env, "thing", "t1", 0);
    /* the runtime state */
    vigil_agent_spec s = {.name = "w", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, agent, E));
    json_t *ch = json_pack("{s:s, s:s}", "run_status", "running", "active_run_id", "k1");
    ASSERT_OK(vg_runtime_state_update(t.env, agent, ch, E));
    json_decref(ch);
    read_back_as_parsed(t.env, "agent_runtime", agent, 1);
    test_rt_close(&t);
}

/* What a read of (kind, id) answers now, inside a read batch as the loop reads: 0 absent, else
 * the body's "n". */
static int64_t n_now(struct vg_env *env, int shared)
{
    json_t *v = NULL;
    int64_t rev = 0;
    vigil_error err = {0};
    vg_store_read_batch(env->store, 1);
    vigil_code rc = shared ? vg_env_get_json_shared(env, "thing", "k", &v, &err)
                           : vg_env_get_json(env, "thing", "k", &v, &rev, &err);
    vg_store_read_batch(env->store, 0);
    int64_t n = rc == VIGIL_ENOTFOUND ? 0 : rc ? -1 : json_integer_value(json_object_get(v, "n"));
    if (!rc && !shared) /* a private read's value is the caller's to change */
        json_object_set_new(v, "n", json_integer(-99));
    json_decref(v);
    return n;
}

static vigil_code write_n(struct vg_env *env, int64_t n, int64_t rev, vigil_error *err)
{
    char text[64];
    snprintf(text, sizeof text, "{\"n\":%lld}", (long long)n);
    return rev ? vg_env_update_text(env, "thing", "k", "", "", "", 0, text, rev, err)
               : vg_env_put_text(env, "thing", "k", "", "", "", 0, text, 0, err);
}

/* A record read again is served as it was last read while its kind's change mark holds (the
 * lease, kill switches, tool grant a step reads at every model call), and every writer moves
 * it: this env's own write, another kind's write does not, a rolled-back write, and another
 * connection's commit (another process's, seen at the next read batch). Absent records are
 * kept too. Served without the mark's check, each change below would read as before. */
TEST(a_kept_read_follows_every_writer_while_served_between_calls)
{
    struct test_rt t;
    test_rt_open(&t, "env_kept_reads");
    struct vg_store *other = vg_test_store_open(t.path, 60000);
    ASSERT(other);
    struct vg_env oe = {.store = other, .clock = t.env->clock, .ids = t.env->ids};
    for (int shared = 0; shared < 2; shared++) {
        int64_t base = shared * 100;
        ASSERT_EQ(n_now(t.env, shared), 0);
        ASSERT_EQ(n_now(t.env, shared), 0); /* absent, kept */
        ASSERT_OK(write_n(t.env, base + 1, 0, E));
        ASSERT_EQ(n_now(t.env, shared), base + 1);
        ASSERT_EQ(n_now(t.env, shared), base + 1); /* kept; the private copy changed is not */
        /* another kind written: still served, still right */
        ASSERT_OK(vg_env_put_text(t.env, "other", shared ? "o2" : "o1", "", "", "", 0, "{}", 0, E));
        ASSERT_EQ(n_now(t.env, shared), base + 1);
        /* this env's own write */
        ASSERT_OK(write_n(t.env, base + 2, 1, E));
        ASSERT_EQ(n_now(t.env, shared), base + 2);
        /* a write rolled back, read inside its transaction, then after it */
        ASSERT_OK(vg_store_begin(t.env->store, E));
        ASSERT_OK(write_n(t.env, base + 3, 2, E));
        ASSERT_EQ(n_now(t.env, shared), base + 3);
        ASSERT_OK(vg_store_rollback(t.env->store, E));
        ASSERT_EQ(n_now(t.env, shared), base + 2);
        /* another connection's commit */
        ASSERT_OK(write_n(&oe, base + 4, 2, E));
        ASSERT_EQ(n_now(t.env, shared), base + 4);
        ASSERT_EQ(n_now(t.env, shared), base + 4);
        /* and its removal */
        ASSERT_OK(vg_store_remove(other, "thing", "k", E));
        ASSERT_EQ(n_now(t.env, shared), 0);
    }
    vg_env_release(&oe);
    vg_store_close(other);
    test_rt_close(&t);
}

int main(void)
{
    RUN(every_read_is_a_value_of_its_own);
    RUN(a_record_written_anew_reads_as_written);
    RUN(text_that_is_not_json_is_refused);
    RUN(a_shared_read_is_the_memos_value_and_a_private_read_is_not);
    RUN(a_kept_read_follows_every_writer_while_served_between_calls);
    RUN(a_body_written_noted_is_read_back_unparsed_as_the_parse_gives_it);
    return 0;
}
