/*
 * test_daemon_app_tools.c: a program that embeds libvigil runs the daemon in its own process
 * (vigil_daemon_run) and has its C tools on every runtime the daemon opens, through
 * vigil_daemon_options.on_runtime: a queued wake of an agent whose model calls the program's
 * tool runs on a daemon worker and the tool answers (without the hook the call was recorded as
 * unknown_tool, trial F's F21). The program stops the daemon with vigil_daemon_stop, without a
 * signal to the whole process; a stop asked while the daemon starts is kept, and one for a
 * store no daemon of the process serves is ENOTFOUND.
 */
#include "helpers/test.h"

#include <pthread.h>

#include <jansson.h>

#include "os/fs.h"

/* What the program's tool and hook saw (the daemon calls them on its threads). */
struct app {
    pthread_mutex_t mu;
    int hooked;     /* runtimes handed to on_runtime */
    int tool_calls; /* calls of get_weather */
    char city[64];  /* its argument */
    const char *store;
    vigil_daemon_options opts;
    vigil_code daemon_rc;
    vigil_error daemon_err;
};

static vigil_code get_weather(void *user, const vigil_tool_call_info *call, const char *args_json,
                              char **out_result_json, vigil_error *err)
{
    struct app *a = user;
    json_t *args = json_loads(args_json, 0, NULL);
    const char *city = json_string_value(json_object_get(args, "city"));
    pthread_mutex_lock(&a->mu);
    a->tool_calls++;
    snprintf(a->city, sizeof a->city, "%s", city ? city : "");
    pthread_mutex_unlock(&a->mu);
    json_decref(args);
    *out_result_json = strdup("{\"forecast\":\"sunny\",\"celsius\":21}");
    return *out_result_json ? VIGIL_OK : VIGIL_ENOMEM;
}

static vigil_code register_tools(vigil_runtime *rt, struct app *a, vigil_error *err)
{
    vigil_tool_def def = {.name = "get_weather",
                          .description = "The weather in a city.",
                          .input_schema_json = "{\"type\":\"object\",\"properties\":{\"city\":"
                                               "{\"type\":\"string\"}},\"required\":[\"city\"]}"};
    return vigil_tool_register(rt, &def, get_weather, a, err);
}

/* The daemon's hook: the program's tools on the daemon's runtime, as after its own open. */
static vigil_code on_runtime(void *user, vigil_runtime *rt, vigil_error *err)
{
    struct app *a = user;
    pthread_mutex_lock(&a->mu);
    a->hooked++;
    pthread_mutex_unlock(&a->mu);
    return register_tools(rt, a, err);
}

static void *daemon_thread(void *arg)
{
    struct app *a = arg;
    a->daemon_rc = vigil_daemon_run(a->store, &a->opts, &a->daemon_err);
    return NULL;
}

/* The scripted model answers from a cassette in dir. */
static void use_cassette(const char *dir, const char *exchanges)
{
    char path[4200], text[2048];
    snprintf(path, sizeof path, "%s/model.json", dir);
    snprintf(text, sizeof text, "{\"vigil_cassette\":1,\"exchanges\":%s}", exchanges);
    ASSERT_OK(vg_fs_write_file(path, text, strlen(text), E));
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    setenv("VIGIL_MODEL_CASSETTE", path, 1);
    unsetenv("VIGIL_CONFIG");
}

static vigil_runtime *open_store(const char *path)
{
    vigil_runtime_options ro;
    vigil_runtime *rt = NULL;
    vigil_runtime_options_default(&ro);
    ro.store_uri = path;
    ro.create_if_missing = 1;
    ASSERT_OK(vigil_runtime_open(&ro, &rt, E));
    return rt;
}

/* The status of the run under run_key ("queued" before it starts). */
static int run_ended(vigil_runtime *rt, const char *run_key)
{
    char *out = NULL;
    ASSERT_OK(vigil_run_show(rt, run_key, &out, E));
    json_t *run = json_loads(out, 0, NULL);
    const char *status = json_string_value(json_object_get(run, "status"));
    int ended = status && strcmp(status, "queued") != 0 && strcmp(status, "running") != 0;
    json_decref(run);
    vigil_free(out);
    return ended;
}

/* Wait for the daemon's run to end: after each commit of this process (the daemon's threads
 * are in it), look again; no timed sleep. */
static void wait_for_run(vigil_runtime *rt, const char *run_key)
{
    for (;;) {
        vigil_stats st;
        vigil_stats_read(&st);
        if (run_ended(rt, run_key))
            return;
        (void)vigil_stats_wait_commit(st.commits, 1000);
    }
}

TEST(the_daemon_runs_a_wake_that_calls_the_programs_tool)
{
    struct app a = {.mu = PTHREAD_MUTEX_INITIALIZER};
    char dir[4096], path[4200], id[37], run_key[65];
    snprintf(dir, sizeof dir, "%s", vg_test_tmpdir("daemon_app_tools"));
    snprintf(path, sizeof path, "%s/app.db", dir);
    use_cassette(dir, "[{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"get_weather\","
                      "\"arguments\":{\"city\":\"Paris\"}}]}},"
                      "{\"response\":{\"text\":\"Sunny in Paris.\"}}]");
    vigil_runtime *rt = open_store(path);
    ASSERT_OK(register_tools(rt, &a, E));
    vigil_agent_spec spec = {.name = "Wb", .config_json = "{\"tools\":[\"get_weather\"]}"};
    ASSERT_OK(vigil_agent_create(rt, &spec, id, E));
    ASSERT_OK(vigil_wake_agent(rt, id, "Weather in Paris?", NULL, run_key, E));

    a.store = path;
    vigil_daemon_options_default(&a.opts);
    a.opts.workers = 1;
    a.opts.grace_ms = 600000; /* the stop waits for the run; it never has to cut it */
    a.opts.on_runtime = on_runtime;
    a.opts.on_runtime_user = &a;
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, daemon_thread, &a), 0);
    wait_for_run(rt, run_key);
    ASSERT_OK(vigil_daemon_stop(path, E));
    pthread_join(th, NULL);
    if (a.daemon_rc)
        fprintf(stderr, "  daemon: %s\n", a.daemon_err.message);
    ASSERT_EQ(a.daemon_rc, VIGIL_OK);

    /* The loop thread's runtime and the one worker's: each got the program's tools. */
    ASSERT_EQ(a.hooked, 2);
    ASSERT_EQ(a.tool_calls, 1);
    ASSERT_STREQ(a.city, "Paris");
    char *out = NULL;
    ASSERT_OK(vigil_run_tools(rt, run_key, NULL, 0, &out, E));
    ASSERT_CONTAINS(out, "\"name\":\"get_weather\"");
    ASSERT_CONTAINS(out, "\"status\":\"succeeded\"");
    ASSERT(!strstr(out, "unknown_tool"));
    vigil_free(out);
    ASSERT_OK(vigil_run_show(rt, run_key, &out, E));
    ASSERT_CONTAINS(out, "\"status\":\"completed\"");
    vigil_free(out);
    vigil_runtime_close(rt);
}

/* A hook that fails stops the daemon before it serves, with the hook's error. */
static vigil_code refuse(void *user, vigil_runtime *rt, vigil_error *err)
{
    err->code = VIGIL_EINVAL;
    snprintf(err->message, sizeof err->message, "the program's tools could not be registered");
    return VIGIL_EINVAL;
}

TEST(a_failing_hook_stops_the_daemon_with_its_error)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/app.db", vg_test_tmpdir("daemon_hook_fails"));
    vigil_runtime_close(open_store(path));
    vigil_daemon_options o;
    vigil_daemon_options_default(&o);
    o.on_runtime = refuse;
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EINVAL, vigil_daemon_run(path, &o, &err));
    ASSERT_STREQ(err.message, "the program's tools could not be registered");
    ASSERT_EQ(vigil_daemon_running(path, NULL), 0);
}

/* Asked to stop from the hook itself, while the daemon is still starting: the stop is kept,
 * and the daemon returns once it serves. */
static vigil_code stop_at_once(void *user, vigil_runtime *rt, vigil_error *err)
{
    return vigil_daemon_stop(user, err);
}

TEST(a_stop_asked_while_the_daemon_starts_stops_it)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/app.db", vg_test_tmpdir("daemon_stop_early"));
    vigil_runtime_close(open_store(path));
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_ENOTFOUND, vigil_daemon_stop(path, &err));
    ASSERT_CONTAINS(err.message, "no daemon of this process serves store");
    vigil_daemon_options o;
    vigil_daemon_options_default(&o);
    o.on_runtime = stop_at_once;
    o.on_runtime_user = path;
    ASSERT_OK(vigil_daemon_run(path, &o, E));
    ASSERT_CODE(VIGIL_ENOTFOUND, vigil_daemon_stop(path, NULL)); /* it has returned */
}

int main(void)
{
    RUN(the_daemon_runs_a_wake_that_calls_the_programs_tool);
    RUN(a_failing_hook_stops_the_daemon_with_its_error);
    RUN(a_stop_asked_while_the_daemon_starts_stops_it);
    return 0;
}
