/*
 * test_judge.c: how the dispatcher picks an agent (docs/orchestration.md, "Picking the agent"):
 * the rules (kind and tags, then load, then id), and the model asked when they tie and a judge
 * model is configured: the real runtime's judge, answered by the scripted provider from a
 * cassette written here.
 */
#include "helpers/rt.h"

#include <stdio.h>

#include "orch/task.h"
#include "runtime/runtime.h"

static const char *jstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static json_t *task_of(struct test_rt *t, const char *id)
{
    json_t *v = NULL;
    ASSERT_OK(vg_task_get(t->env, id, &v, NULL, E));
    return v;
}

static void agent(struct test_rt *t, const char *name, const char *config, char id[37])
{
    vigil_agent_spec s = {.name = name, .kind = "worker", .config_json = config};
    ASSERT_OK(vigil_agent_create(t->rt, &s, id, E));
}

static void tagged(struct test_rt *t, const char *title, const char *const *tags, size_t n,
                   char id[37])
{
    ASSERT_OK(vigil_task_add_tagged(t->rt, title, "worker", tags, n, NULL, 0, id, E));
}

/* A cassette whose exchanges answer with these texts, in order (or an error for NULL). */
static void cassette(const char *name, const char *const *answers, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/judge.json", vg_test_tmpdir(name));
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fprintf(f, "{\"vigil_cassette\": 1, \"exchanges\": [");
    for (size_t i = 0; i < n; i++)
        if (answers[i])
            fprintf(f, "%s{\"response\": {\"text\": \"%s\"}}", i ? "," : "", answers[i]);
        else
            fprintf(f, "%s{\"error\": {\"code\": \"EAUTH\", \"message\": \"bad key\"}}",
                    i ? "," : "");
    fprintf(f, "]}\n");
    ASSERT(fclose(f) == 0);
    setenv("VIGIL_MODEL_CASSETTE", path, 1);
}

TEST(a_task_goes_only_to_an_agent_holding_all_its_tags)
{
    struct test_rt t;
    char cpu[37], gpu[37], a[37], b[37], c[37];
    unsetenv("VIGIL_DISPATCH_JUDGE_MODEL");
    test_rt_open(&t, "judge_tags");
    agent(&t, "cpu", "{\"tags\": [\"cpu\"]}", cpu);
    agent(&t, "gpu", "{\"tags\": [\"gpu\", \"big\"]}", gpu);
    const char *one[] = {"gpu"}, *two[] = {"big", "gpu"}, *none[] = {"tpu"};
    tagged(&t, "a", one, 1, a);
    tagged(&t, "b", two, 2, b);
    tagged(&t, "c", none, 1, c);
    int started = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 8, &started, E));
    ASSERT_EQ(started, 2); /* c: no agent holds "tpu", it waits ready */
    json_t *ta = task_of(&t, a), *tb = task_of(&t, b), *tc = task_of(&t, c);
    ASSERT_STREQ(jstr(ta, "agent"), gpu); /* the rules alone would give the first by id */
    ASSERT_STREQ(jstr(tb, "agent"), gpu);
    ASSERT_STREQ(jstr(tc, "status"), "ready");
    ASSERT(strstr(jstr(ta, "selection"), "rule") != NULL);
    ASSERT(json_object_get(ta, "judgement") == NULL);
    json_decref(ta);
    json_decref(tb);
    json_decref(tc);
    const char *bad[] = {"Not a tag"};
    ASSERT_CODE(VIGIL_EINVAL, vigil_task_add_tagged(t.rt, "x", NULL, bad, 1, NULL, 0, a, NULL));
    test_rt_close(&t);
}

/* Without a judge the tie goes to the first agent by id; with one, to the agent its answer
 * names, recorded in the task: in a dispatch round and in the round a run's end starts. */
/* proves: S2-033 */
TEST(a_tie_goes_to_the_agent_the_judge_model_names_and_its_answer_is_recorded)
{
    struct test_rt t;
    char w0[37], w1[37], w2[37], a[37], b[37], say[2][128];
    unsetenv("VIGIL_DISPATCH_JUDGE_MODEL");
    test_rt_open(&t, "judge_off");
    agent(&t, "w0", NULL, w0);
    agent(&t, "w1", NULL, w1);
    tagged(&t, "a", NULL, 0, a);
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, NULL, E));
    json_t *ta = task_of(&t, a);
    ASSERT_STREQ(jstr(ta, "agent"), strcmp(w0, w1) < 0 ? w0 : w1); /* the rules: first by id */
    json_decref(ta);
    test_rt_close(&t);

    test_rt_open(&t, "judge_on");
    agent(&t, "w0", NULL, w0);
    agent(&t, "w1", NULL, w1);
    agent(&t, "w2", NULL, w2);
    snprintf(say[0], sizeof say[0], "The third one: %s", w2);
    snprintf(say[1], sizeof say[1], "w1"); /* by name */
    const char *answers[] = {say[0], say[1]};
    cassette("judge_on_cassette", answers, 2);
    setenv("VIGIL_DISPATCH_JUDGE_MODEL", "cheap-model", 1);
    test_rt_reopen(&t); /* the config is read with the judge's settings */
    tagged(&t, "a", NULL, 0, a);
    tagged(&t, "b", NULL, 0, b);
    int started = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, &started, E));
    ta = task_of(&t, a);
    ASSERT_EQ(started, 1);
    ASSERT_STREQ(jstr(ta, "agent"), w2);
    json_t *j = json_object_get(ta, "judgement");
    ASSERT_STREQ(jstr(j, "agent"), w2);
    ASSERT_STREQ(jstr(j, "model"), "cheap-model");
    ASSERT_STREQ(jstr(j, "text"), say[0]);
    ASSERT_EQ(json_array_size(json_object_get(j, "candidates")), 3);
    ASSERT(strstr(jstr(ta, "selection"), "judge") != NULL);
    /* a's run ends: b is started in that round, the judge asked between w0 and w1 (w2 busy) */
    struct vg_orch_outcome ok = {.status = "completed", .text = "ok"};
    ASSERT_OK(vg_task_run_ended(t.env, NULL, jstr(ta, "run_key"), &ok, E));
    json_t *tb = task_of(&t, b);
    ASSERT_STREQ(jstr(tb, "status"), "running");
    ASSERT_STREQ(jstr(tb, "agent"), w1);
    j = json_object_get(tb, "judgement");
    ASSERT_EQ(json_array_size(json_object_get(j, "candidates")), 2);
    json_decref(ta);
    json_decref(tb);
    test_rt_close(&t);
    unsetenv("VIGIL_DISPATCH_JUDGE_MODEL");
    unsetenv("VIGIL_MODEL_CASSETTE");
}

/* A judge that fails, or names no candidate, leaves the choice to the rules: the task still
 * starts, and the judgement says why. */
TEST(a_failed_or_unusable_judgement_falls_back_to_the_rules)
{
    struct test_rt t;
    char w0[37], w1[37], a[37], b[37];
    test_rt_open(&t, "judge_fail");
    agent(&t, "w0", NULL, w0);
    agent(&t, "w1", NULL, w1);
    const char *answers[] = {NULL, "nobody I know"};
    cassette("judge_fail_cassette", answers, 2);
    setenv("VIGIL_DISPATCH_JUDGE_MODEL", "default", 1);
    setenv("VIGIL_MODEL_MAX_RETRIES", "0", 1);
    test_rt_reopen(&t);
    tagged(&t, "a", NULL, 0, a);
    tagged(&t, "b", NULL, 0, b);
    int started = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 2, &started, E));
    ASSERT_EQ(started, 2);
    json_t *ta = task_of(&t, a), *tb = task_of(&t, b);
    ASSERT_STREQ(jstr(ta, "agent"), strcmp(w0, w1) < 0 ? w0 : w1);
    ASSERT_STREQ(jstr(json_object_get(ta, "judgement"), "agent"), "");
    ASSERT(strstr(jstr(json_object_get(ta, "judgement"), "error"), "bad key") != NULL);
    ASSERT(strstr(jstr(ta, "selection"), "rule") != NULL);
    /* b: w0 or w1 busy with a, so no tie and no question: the other one */
    ASSERT(strcmp(jstr(tb, "agent"), jstr(ta, "agent")) != 0);
    json_decref(ta);
    json_decref(tb);
    /* a third task, both agents at load 1: a tie, and an answer naming no one */
    char c[37];
    tagged(&t, "c", NULL, 0, c);
    ASSERT_OK(vigil_task_dispatch(t.rt, 3, &started, E));
    json_t *tc = task_of(&t, c);
    ASSERT_STREQ(jstr(tc, "status"), "running");
    ASSERT_STREQ(jstr(json_object_get(tc, "judgement"), "text"), "nobody I know");
    ASSERT(strstr(jstr(json_object_get(tc, "judgement"), "error"), "none of the candidates"));
    json_decref(tc);
    test_rt_close(&t);
    unsetenv("VIGIL_DISPATCH_JUDGE_MODEL");
    unsetenv("VIGIL_MODEL_MAX_RETRIES");
    unsetenv("VIGIL_MODEL_CASSETTE");
}

/* A failed run with retries left: a configured judge is asked first whether to run it again.
 * FAIL gives the task up (what it blocks is cancelled); RETRY runs it again. Both answers are
 * recorded in the task's triage. */
/* proves: S2-033 */
TEST(a_failed_run_is_triaged_by_the_judge_before_its_retry)
{
    struct test_rt t;
    char w0[37], a[37], b[37], c[37];
    test_rt_open(&t, "judge_triage");
    agent(&t, "w0", NULL, w0);
    const char *answers[] = {"FAIL: the source is gone", "retry it"};
    cassette("judge_triage_cassette", answers, 2);
    setenv("VIGIL_DISPATCH_JUDGE_MODEL", "cheap-model", 1);
    test_rt_reopen(&t);
    tagged(&t, "a", NULL, 0, a);
    tagged(&t, "b", NULL, 0, b);
    ASSERT_OK(vigil_task_block(t.rt, a, b, E));
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, NULL, E));
    json_t *ta = task_of(&t, a);
    struct vg_orch_outcome bad = {.status = "failed", .text = "the source is gone"};
    ASSERT_OK(vg_task_run_ended(t.env, NULL, jstr(ta, "run_key"), &bad, E));
    json_decref(ta);
    ta = task_of(&t, a);
    json_t *tb = task_of(&t, b);
    ASSERT_STREQ(jstr(ta, "status"), "failed"); /* given up after one attempt, not three */
    ASSERT_STREQ(jstr(json_object_get(ta, "triage"), "decision"), "fail");
    ASSERT_STREQ(jstr(json_object_get(ta, "triage"), "model"), "cheap-model");
    ASSERT_STREQ(jstr(tb, "status"), "cancelled");
    json_decref(ta);
    json_decref(tb);
    /* RETRY: the task runs again, its second attempt */
    tagged(&t, "c", NULL, 0, c);
    ASSERT_OK(vigil_task_dispatch(t.rt, 1, NULL, E));
    json_t *tc = task_of(&t, c);
    ASSERT_OK(vg_task_run_ended(t.env, NULL, jstr(tc, "run_key"), &bad, E));
    json_decref(tc);
    tc = task_of(&t, c);
    ASSERT_STREQ(jstr(tc, "status"), "running");
    ASSERT_EQ(json_integer_value(json_object_get(tc, "attempts")), 2);
    ASSERT_STREQ(jstr(json_object_get(tc, "triage"), "decision"), "retry");
    ASSERT(json_is_false(json_object_get(json_object_get(tc, "triage"), "pending")));
    json_decref(tc);
    test_rt_close(&t);
    unsetenv("VIGIL_DISPATCH_JUDGE_MODEL");
    unsetenv("VIGIL_MODEL_CASSETTE");
}

/* With a judge configured, the rules still decide first: a task only one agent's tags fit, and
 * a task the load settles, start without asking the model (no judgement recorded, selection by
 * rule); only the tie after them asks it, and takes the answer the cassette had ready. */
/* proves: S2-032 */
TEST(the_judge_is_asked_only_when_the_rules_leave_a_tie)
{
    struct test_rt t;
    char cpu[37], gpu[37], a[37], b[37], c[37], say[128];
    test_rt_open(&t, "judge_rules_first");
    agent(&t, "cpu", "{\"tags\": [\"cpu\"]}", cpu);
    agent(&t, "gpu", "{\"tags\": [\"gpu\"]}", gpu);
    snprintf(say, sizeof say, "%s", cpu);
    const char *answers[] = {say};
    cassette("judge_rules_first_cassette", answers, 1);
    setenv("VIGIL_DISPATCH_JUDGE_MODEL", "cheap-model", 1);
    test_rt_reopen(&t);
    const char *want_gpu[] = {"gpu"};
    tagged(&t, "a", want_gpu, 1, a); /* the tags leave one agent */
    tagged(&t, "b", NULL, 0, b);     /* either, but gpu is busy with a: the load decides */
    int started = 0;
    ASSERT_OK(vigil_task_dispatch(t.rt, 2, &started, E));
    ASSERT_EQ(started, 2);
    json_t *ta = task_of(&t, a), *tb = task_of(&t, b);
    ASSERT_STREQ(jstr(ta, "agent"), gpu);
    ASSERT_STREQ(jstr(tb, "agent"), cpu);
    ASSERT(json_object_get(ta, "judgement") == NULL);
    ASSERT(json_object_get(tb, "judgement") == NULL);
    ASSERT(strstr(jstr(ta, "selection"), "rule") != NULL);
    ASSERT(strstr(jstr(tb, "selection"), "rule") != NULL);
    json_decref(ta);
    json_decref(tb);
    /* both at load 1, no tag to tell them apart: now the judge is asked, and names cpu */
    tagged(&t, "c", NULL, 0, c);
    ASSERT_OK(vigil_task_dispatch(t.rt, 3, &started, E));
    json_t *tc = task_of(&t, c);
    ASSERT_STREQ(jstr(json_object_get(tc, "judgement"), "agent"), cpu);
    ASSERT(strstr(jstr(tc, "selection"), "judge") != NULL);
    json_decref(tc);
    test_rt_close(&t);
    unsetenv("VIGIL_DISPATCH_JUDGE_MODEL");
    unsetenv("VIGIL_MODEL_CASSETTE");
}

int main(void)
{
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    RUN(a_task_goes_only_to_an_agent_holding_all_its_tags);
    RUN(a_tie_goes_to_the_agent_the_judge_model_names_and_its_answer_is_recorded);
    RUN(a_failed_or_unusable_judgement_falls_back_to_the_rules);
    RUN(a_failed_run_is_triaged_by_the_judge_before_its_retry);
    RUN(the_judge_is_asked_only_when_the_rules_leave_a_tie);
    return 0;
}
