/*
 * test_history.c: run history with progressive disclosure and keyset cursors. Lists filter by
 * agent and status, come newest first, and stay stable while runs are inserted between page
 * fetches (no item skipped or repeated); one run shows its parent, children, timings, usage
 * and counts; message and tool-call lists show previews with a truncation flag, and the
 * single-item calls show everything.
 */
#include "journal/journal_fixture.h"

#include "base/buf.h"
#include "base/json.h"

#include <jansson.h>
#include <pthread.h>

#define AGENT_B "0190aaaa-0000-7000-8000-000000000002"

static json_t *parse(char *text)
{
    json_t *v = json_loads(text, 0, NULL);
    ASSERT(v);
    vg_free(text);
    return v;
}

static char *open_close(struct fx *f, const char *agent, const char *key, enum vg_run_status st)
{
    static char id[37];
    struct vg_run *run = fx_run(f, agent, key);
    snprintf(id, sizeof id, "%s", vg_journal_run_id(run));
    vg_test_clock_advance(&f->clock, 1000);
    if (st != VG_RUN_RUNNING)
        ASSERT_OK(vg_journal_run_close(run, st, "ok", NULL, E));
    vg_journal_run_free(run);
    return id;
}

TEST(list_filters_and_order)
{
    /* proves: S2-018 */
    struct fx f;
    fx_open(&f, "jh_list", 11);
    for (int i = 0; i < 6; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        open_close(&f, i % 2 ? AGENT_B : FX_AGENT, key,
                   i % 3 == 0 ? VG_RUN_FAILED : VG_RUN_COMPLETED);
    }
    char *t = NULL;
    ASSERT_OK(vg_journal_runs_list(f.store, NULL, NULL, NULL, 0, &t, E));
    json_t *all = parse(t);
    json_t *items = json_object_get(all, "items");
    ASSERT_EQ(json_array_size(items), 6);
    ASSERT(json_is_null(json_object_get(all, "next_cursor")));
    /* newest first */
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(items, 0), "run_key")), "k5");
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(items, 5), "run_key")), "k0");
    ASSERT_EQ(json_integer_value(json_object_get(json_array_get(items, 0), "duration_ms")), 1000);
    json_decref(all);
    ASSERT_OK(vg_journal_runs_list(f.store, FX_AGENT, NULL, NULL, 0, &t, E));
    all = parse(t);
    ASSERT_EQ(json_array_size(json_object_get(all, "items")), 3);
    json_decref(all);
    ASSERT_OK(vg_journal_runs_list(f.store, NULL, "failed", NULL, 0, &t, E));
    all = parse(t);
    ASSERT_EQ(json_array_size(json_object_get(all, "items")), 2); /* k0, k3 */
    json_decref(all);
    ASSERT_OK(vg_journal_runs_list(f.store, AGENT_B, "failed", NULL, 0, &t, E));
    all = parse(t);
    ASSERT_EQ(json_array_size(json_object_get(all, "items")), 1); /* k3 */
    ASSERT_STREQ(json_string_value(
                     json_object_get(json_array_get(json_object_get(all, "items"), 0), "run_key")),
                 "k3");
    json_decref(all);
    vigil_error e = {0};
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_runs_list(f.store, NULL, "sleeping", NULL, 0, &t, &e));
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_runs_list(f.store, NULL, NULL, NULL, 1001, &t, &e));
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_runs_list(f.store, NULL, NULL, "c1zz", 5, &t, &e));
    ASSERT_CONTAINS(e.message, "invalid cursor");
    ASSERT_CODE(VIGIL_EINVAL, vg_journal_runs_list(f.store, NULL, NULL, "garbage", 5, &t, &e));
    fx_close(&f);
}

/* A listed run says why it failed or was interrupted (its error), so the runs list, the web
 * page and the event stream's run.ended tell a budget-stopped run from a killed one (trial F15);
 * a completed run's error is null. */
TEST(a_listed_run_says_why_it_ended)
{
    struct fx f;
    fx_open(&f, "jh_error", 11);
    struct vg_run *run = fx_run(&f, FX_AGENT, "spent");
    ASSERT_OK(vg_journal_run_close(run, VG_RUN_INTERRUPTED, NULL,
                                   "stopped: its tokens budget is spent", E));
    vg_journal_run_free(run);
    open_close(&f, FX_AGENT, "fine", VG_RUN_COMPLETED);
    char *t = NULL;
    ASSERT_OK(vg_journal_runs_list(f.store, FX_AGENT, NULL, NULL, 0, &t, E));
    json_t *all = parse(t), *items = json_object_get(all, "items");
    ASSERT_EQ(json_array_size(items), 2);
    ASSERT(json_is_null(json_object_get(json_array_get(items, 0), "error")));
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(items, 1), "error")),
                 "stopped: its tokens budget is spent");
    json_decref(all);
    fx_close(&f);
}

TEST(a_listed_run_shows_its_change_when_listed_again)
{
    /* Run items are kept per thread between listings: a run that changed is listed as it is. */
    struct fx f;
    fx_open(&f, "jh_relist", 11);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k0");
    char *t = NULL;
    ASSERT_OK(vg_journal_runs_list(f.store, FX_AGENT, NULL, NULL, 0, &t, E));
    json_t *page = parse(t);
    json_t *it = json_array_get(json_object_get(page, "items"), 0);
    ASSERT_STREQ(json_string_value(json_object_get(it, "status")), "running");
    ASSERT(json_is_null(json_object_get(it, "summary_preview")));
    json_decref(page);
    vg_test_clock_advance(&f.clock, 1000);
    ASSERT_OK(vg_journal_run_close(run, VG_RUN_COMPLETED, "done now", NULL, E));
    vg_journal_run_free(run);
    ASSERT_OK(vg_journal_runs_list(f.store, FX_AGENT, NULL, NULL, 0, &t, E));
    page = parse(t);
    it = json_array_get(json_object_get(page, "items"), 0);
    ASSERT_STREQ(json_string_value(json_object_get(it, "status")), "completed");
    ASSERT_STREQ(json_string_value(json_object_get(it, "summary_preview")), "done now");
    ASSERT_EQ(json_integer_value(json_object_get(it, "duration_ms")), 1000);
    json_decref(page);
    fx_close(&f);
}

TEST(pagination_stable_under_inserts)
{
    /* proves: S2-021 S1-045 */
    struct fx f;
    fx_open(&f, "jh_pages", 12);
    json_t *seen = json_object();
    for (int i = 0; i < 25; i++) {
        char key[16];
        snprintf(key, sizeof key, "old%d", i);
        json_object_set_new(seen, open_close(&f, FX_AGENT, key, VG_RUN_COMPLETED), json_integer(0));
    }
    char *cursor = NULL;
    int pages = 0, got = 0, inserted = 0;
    for (;;) {
        char *t = NULL;
        ASSERT_OK(vg_journal_runs_list(f.store, FX_AGENT, NULL, cursor, 4, &t, E));
        json_t *page = parse(t);
        size_t i;
        json_t *it;
        json_array_foreach (json_object_get(page, "items"), i, it) {
            const char *id = json_string_value(json_object_get(it, "run_id"));
            json_t *n = json_object_get(seen, id);
            ASSERT(n);                           /* only runs that existed at the first page */
            ASSERT_EQ(json_integer_value(n), 0); /* never twice */
            json_object_set_new(seen, id, json_integer(1));
            got++;
        }
        vg_free(cursor);
        cursor = NULL;
        const char *next = json_string_value(json_object_get(page, "next_cursor"));
        if (next)
            cursor = vg_strdup(next);
        json_decref(page);
        pages++;
        /* new runs arrive between page fetches */
        for (int k = 0; k < 3; k++, inserted++) {
            char key[16];
            snprintf(key, sizeof key, "new%d", inserted);
            open_close(&f, FX_AGENT, key, VG_RUN_RUNNING);
        }
        if (!cursor)
            break;
    }
    ASSERT_EQ(got, 25); /* none skipped */
    ASSERT_EQ(pages, 7);
    json_decref(seen);
    fx_close(&f);
}

TEST(show_messages_tools)
{
    /* proves: S2-018 S2-019 S2-020 S1-045 */
    struct fx f;
    fx_open(&f, "jh_show", 13);
    struct vg_run *parent = fx_run(&f, FX_AGENT, "parent");
    char pid[37];
    snprintf(pid, sizeof pid, "%s", vg_journal_run_id(parent));
    struct vg_run_launch l = {
        .agent_id = FX_AGENT, .run_key = "child-1", .wake_reason = "spawn", .parent_run_id = pid};
    struct vg_run *child = NULL;
    ASSERT_OK(vg_journal_run_open(f.store, &f.clock.base, f.ids, &l, &child, E));
    char cid[37];
    snprintf(cid, sizeof cid, "%s", vg_journal_run_id(child));
    vg_journal_run_free(child);

    /* messages: a long one gets a truncated preview */
    char long_text[1200];
    memset(long_text, 'x', sizeof long_text);
    memcpy(long_text, "\"long", 5);
    long_text[sizeof long_text - 2] = '"';
    long_text[sizeof long_text - 1] = '\0';
    for (int i = 0; i < 5; i++) {
        char mid[16];
        snprintf(mid, sizeof mid, "m%d", i);
        struct vg_journal_message m = {.message_id = mid,
                                       .source = "operator",
                                       .message_type = "chat",
                                       .payload_json = i == 2 ? long_text : "\"short\""};
        ASSERT_OK(vg_journal_message_accept(parent, &m, NULL, E));
        ASSERT_OK(vg_journal_message_delivery(parent, mid, "delivered", "model", NULL, E));
    }
    struct vg_model_call_trace mc = {.provider = "p", .model = "m", .attempts = 1};
    ASSERT_OK(vg_journal_model_call(parent, &mc, E));
    struct vg_journal_observation o = {.observation_id = "reply",
                                       .source = "provider-output",
                                       .confidence = "authoritative",
                                       .signal_json = "{\"type\":\"message\",\"text\":\"done\"}"};
    ASSERT_OK(vg_journal_observe(parent, &o, NULL, E));
    char tool[37];
    char big_out[3100];
    snprintf(big_out, sizeof big_out, "{\"stdout\":\"%02990d\"}", 7);
    for (int i = 0; i < 3; i++) {
        ASSERT_OK(
            vg_journal_tool_call_started(parent, "shell", NULL, "{\"cmd\":\"make\"}", tool, E));
        ASSERT_OK(vg_journal_tool_call_finished(parent, tool, i == 1 ? "failed" : "succeeded",
                                                i == 2 ? big_out : "\"ok\"", i == 1 ? "EIO" : NULL,
                                                10 + i, E));
    }
    vg_test_clock_advance(&f.clock, 2500);
    ASSERT_OK(vg_journal_run_close(parent, VG_RUN_COMPLETED, "built it", NULL, E));

    char *t = NULL;
    ASSERT_OK(vg_journal_run_show(f.store, pid, &t, E));
    json_t *show = parse(t);
    ASSERT_EQ(json_integer_value(json_object_get(show, "duration_ms")), 2500);
    ASSERT_STREQ(json_string_value(json_object_get(
                     json_array_get(json_object_get(show, "children"), 0), "run_id")),
                 cid);
    ASSERT_STREQ(json_string_value(json_object_get(show, "summary")), "built it");
    json_t *counts = json_object_get(show, "counts");
    ASSERT_EQ(json_integer_value(json_object_get(counts, "messages")), 6);
    ASSERT_EQ(json_integer_value(json_object_get(counts, "tool_calls")), 3);
    /* proves: S1-007 */
    json_t *jref = json_object_get(show, "journal");
    ASSERT_STREQ(json_string_value(json_object_get(jref, "journal_id")), pid);
    ASSERT_STREQ(json_string_value(json_object_get(jref, "owner_kind")), "agent");
    ASSERT_STREQ(json_string_value(json_object_get(jref, "owner_id")), FX_AGENT);
    ASSERT_EQ(json_integer_value(json_object_get(jref, "record_count")),
              json_integer_value(json_object_get(counts, "records")));
    ASSERT_EQ(json_integer_value(json_object_get(jref, "last_sequence")),
              json_integer_value(json_object_get(counts, "records")));
    ASSERT_STREQ(json_string_value(json_object_get(jref, "export_path")),
                 "agent-journals/" FX_AGENT ".interaction.jsonl");
    json_decref(show);
    ASSERT_OK(vg_journal_run_show(f.store, cid, &t, E));
    show = parse(t);
    ASSERT_STREQ(json_string_value(json_object_get(json_object_get(show, "parent"), "run_id")),
                 pid);
    ASSERT_STREQ(json_string_value(json_object_get(show, "wake_reason")), "spawn");
    json_decref(show);

    /* messages in pages of 4, oldest first */
    ASSERT_OK(vg_journal_run_messages(f.store, pid, NULL, 4, &t, E));
    json_t *p1 = parse(t);
    json_t *items = json_object_get(p1, "items");
    ASSERT_EQ(json_array_size(items), 4);
    json_t *m2 = json_array_get(items, 2);
    ASSERT_EQ(json_is_true(json_object_get(m2, "truncated")), 1);
    ASSERT_EQ(strlen(json_string_value(json_object_get(m2, "preview"))), 200);
    ASSERT_EQ(json_is_true(json_object_get(json_array_get(items, 0), "truncated")), 0);
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(items, 0), "role")), "operator");
    char rid[64];
    snprintf(rid, sizeof rid, "%s", json_string_value(json_object_get(m2, "record_id")));
    ASSERT_OK(vg_journal_run_messages(
        f.store, pid, json_string_value(json_object_get(p1, "next_cursor")), 4, &t, E));
    json_t *p2 = parse(t);
    items = json_object_get(p2, "items");
    ASSERT_EQ(json_array_size(items), 2);
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(items, 1), "role")), "agent");
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(items, 1), "preview")), "done");
    ASSERT_EQ(json_integer_value(json_object_get(json_array_get(items, 1), "step")), 1);
    ASSERT_EQ(json_integer_value(json_object_get(json_array_get(items, 0), "step")), 0);
    ASSERT(json_is_null(json_object_get(p2, "next_cursor")));
    json_decref(p1);
    json_decref(p2);
    /* one message in full */
    ASSERT_OK(vg_journal_run_message(f.store, rid, &t, E));
    json_t *full = parse(t);
    ASSERT_EQ(strlen(json_string_value(json_object_get(full, "content"))), sizeof long_text - 3);
    ASSERT_STREQ(json_string_value(json_object_get(full, "message_id")), "m2");
    json_decref(full);
    vigil_error e = {0};
    ASSERT_CODE(VIGIL_ENOTFOUND,
                vg_journal_run_message(f.store, "0190aaaa-0000-7000-8000-00000000ffff", &t, &e));

    /* tool calls: previews, then one in full */
    ASSERT_OK(vg_journal_run_tools(f.store, pid, NULL, 0, &t, E));
    json_t *tl = parse(t);
    items = json_object_get(tl, "items");
    ASSERT_EQ(json_array_size(items), 3);
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(items, 1), "status")), "failed");
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(items, 1), "error_code")), "EIO");
    ASSERT_EQ(json_integer_value(json_object_get(json_array_get(items, 1), "duration_ms")), 11);
    ASSERT_EQ(json_is_true(json_object_get(json_array_get(items, 2), "output_truncated")), 1);
    char tid[64];
    snprintf(tid, sizeof tid, "%s",
             json_string_value(json_object_get(json_array_get(items, 2), "tool_call_id")));
    json_decref(tl);
    ASSERT_OK(vg_journal_run_tool(f.store, tid, &t, E));
    json_t *one = parse(t);
    ASSERT_EQ(strlen(json_string_value(json_object_get(json_object_get(one, "output"), "stdout"))),
              2990);
    ASSERT_STREQ(json_string_value(json_object_get(json_object_get(one, "input"), "cmd")), "make");
    json_decref(one);
    ASSERT_CODE(VIGIL_ENOTFOUND,
                vg_journal_run_show(f.store, "0190aaaa-0000-7000-8000-00000000ffff", &t, NULL));
    vg_journal_run_free(parent);
    fx_close(&f);
}

/* text is the canonical encoding of what it holds: pages are built as text (history.c). */
static void assert_canonical(const char *text)
{
    json_t *v = json_loads(text, 0, NULL);
    ASSERT(v);
    struct vg_buf again;
    vg_buf_init(&again, 0);
    ASSERT_EQ(vg_json_put_canonical(&again, v), 0);
    ASSERT_STREQ(again.data, text);
    vg_buf_release(&again);
    json_decref(v);
}

struct listing {
    struct vg_store *store;
    int limit;
    struct vg_buf pages; /* every page's text, one after the other */
};

/* Every page of FX_AGENT's runs, limit at a time, into l->pages; each checked canonical. */
static void *list_all(void *arg)
{
    struct listing *l = arg;
    char *cursor = NULL;
    vg_buf_reset(&l->pages);
    do {
        char *t = NULL;
        ASSERT_OK(vg_journal_runs_list(l->store, FX_AGENT, NULL, cursor, l->limit, &t, E));
        assert_canonical(t);
        vg_buf_puts(&l->pages, t);
        json_t *page = json_loads(t, 0, NULL);
        const char *next = json_string_value(json_object_get(page, "next_cursor"));
        vg_free(cursor);
        cursor = next ? vg_strdup(next) : NULL;
        json_decref(page);
        vg_free(t);
    } while (cursor);
    return NULL;
}

/* The same listing by a thread of its own: its kept items start empty. */
static void list_fresh(struct listing *l)
{
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, list_all, l), 0);
    ASSERT_EQ(pthread_join(th, NULL), 0);
}

TEST(a_listing_from_kept_items_is_what_a_fresh_thread_makes)
{
    /* More runs than a thread keeps items for (64), some changing between listings: the pages
     * a thread gives from its kept items are byte for byte those of a thread with none. */
    struct fx f;
    fx_open(&f, "jh_kept", 14);
    struct vg_run *running[10];
    for (int i = 0; i < 90; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        if (i % 9 == 0) {
            running[i / 9] = fx_run(&f, FX_AGENT, key);
            continue;
        }
        open_close(&f, FX_AGENT, key, i % 4 ? VG_RUN_COMPLETED : VG_RUN_FAILED);
    }
    struct listing warm = {.store = f.store}, fresh = {.store = f.store};
    vg_buf_init(&warm.pages, 0);
    vg_buf_init(&fresh.pages, 0);
    static const int limits[] = {7, 30, 100};
    for (int round = 0; round <= 3; round++) {
        for (size_t k = 0; k < VG_ARRAY_LEN(limits); k++) {
            warm.limit = fresh.limit = limits[k];
            list_all(&warm);
            list_all(&warm); /* the second time from the kept items */
            list_fresh(&fresh);
            ASSERT_EQ(warm.pages.len, fresh.pages.len);
            ASSERT_STREQ(warm.pages.data, fresh.pages.data);
        }
        for (int i = round; round < 3 && i < 10; i += 3) { /* some runs end: items change */
            char summary[32];
            snprintf(summary, sizeof summary, "ended in round %d", round);
            vg_test_clock_advance(&f.clock, 10);
            ASSERT_OK(vg_journal_run_close(running[i], VG_RUN_COMPLETED, summary, NULL, E));
            vg_journal_run_free(running[i]);
        }
    }
    ASSERT(strstr(warm.pages.data, "\"summary_preview\":\"ended in round 2\""));
    ASSERT(!strstr(warm.pages.data, "\"running\""));
    vg_buf_release(&warm.pages);
    vg_buf_release(&fresh.pages);
    fx_close(&f);
}

TEST(message_tool_and_follow_pages_are_canonical)
{
    struct fx f;
    fx_open(&f, "jh_canon", 15);
    struct vg_run *run = fx_run(&f, FX_AGENT, "k0");
    char id[37], tool[37], *t = NULL;
    snprintf(id, sizeof id, "%s", vg_journal_run_id(run));
    for (int i = 0; i < 3; i++) {
        char mid[16];
        snprintf(mid, sizeof mid, "m%d", i);
        struct vg_journal_message m = {.message_id = mid,
                                       .source = "operator",
                                       .message_type = "chat",
                                       .payload_json = "\"say \\\"hi\\\" \\u00e9\""};
        ASSERT_OK(vg_journal_message_accept(run, &m, NULL, E));
        ASSERT_OK(vg_journal_tool_call_started(run, "shell", NULL, "{\"z\":1,\"a\":[2]}", tool, E));
        ASSERT_OK(vg_journal_tool_call_finished(run, tool, "succeeded", "\"ok\"", NULL, 3, E));
    }
    ASSERT_OK(vg_journal_run_messages(f.store, id, NULL, 2, &t, E));
    assert_canonical(t);
    ASSERT_CONTAINS(t, "\"next_cursor\":\"c1");
    vg_free(t);
    ASSERT_OK(vg_journal_run_tools(f.store, id, NULL, 0, &t, E));
    assert_canonical(t);
    ASSERT_CONTAINS(t, "\"next_cursor\":null}");
    vg_free(t);
    int64_t after[2] = {0, 0};
    ASSERT_OK(vg_journal_run_follow(f.store, id, after, 2, &t, E));
    assert_canonical(t);
    ASSERT_CONTAINS(t, "\"more\":true");
    json_t *o = parse(t);
    after[0] = json_integer_value(json_array_get(json_object_get(o, "after"), 0));
    after[1] = json_integer_value(json_array_get(json_object_get(o, "after"), 1));
    json_decref(o);
    ASSERT_OK(vg_journal_run_follow(f.store, id, after, 2, &t, E));
    assert_canonical(t);
    ASSERT_CONTAINS(t, "\"more\":false");
    vg_free(t);
    vg_journal_run_free(run);
    fx_close(&f);
}

int main(void)
{
    RUN(list_filters_and_order);
    RUN(a_listed_run_says_why_it_ended);
    RUN(a_listed_run_shows_its_change_when_listed_again);
    RUN(pagination_stable_under_inserts);
    RUN(a_listing_from_kept_items_is_what_a_fresh_thread_makes);
    RUN(message_tool_and_follow_pages_are_canonical);
    RUN(show_messages_tools);
    return 0;
}
