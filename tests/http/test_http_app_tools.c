/*
 * test_http_app_tools.c: a program that runs the daemon in its own process (vigil_daemon_run)
 * with its C tool registered through vigil_daemon_options.on_runtime, and the HTTP API as the
 * daemon's service (as `vigil serve --listen` runs it, cli/cmd-http.c): a chat turn over
 * POST /v1/agents/{id}/chat, whole and streamed, whose scripted model calls the program's tool
 * gets the tool's answer. The API's runtimes are opened by the service, not by the daemon;
 * without vigil_daemon_on_runtime they had none of the program's tools and the call was
 * recorded as unknown_tool (issue 29, session 35).
 */
#include "base/common.h"

#include "helpers/live_http.h"
#include "helpers/test.h"
#include "http/http.h"
#include "os/fs.h"

#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <unistd.h>

/* What the program's tool saw, the daemon's result, and where the API listens. */
struct app {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int hooked, tool_calls;
    char cities[128];
    char store[4200], log_path[4200];
    int saved_stderr, port; /* port: 0 until the API listens, -1 when it could not start */
    struct vg_http_options http;
    struct vg_http *h;
    vigil_daemon_options opts;
    vigil_code daemon_rc;
    vigil_error daemon_err;
};

static vigil_code get_weather(void *user, const vigil_tool_call_info *call, const char *args_json,
                              char **out_result_json, vigil_error *err)
{
    struct app *a = user;
    VG_UNUSED(call);
    VG_UNUSED(err);
    json_t *args = json_loads(args_json, 0, NULL);
    const char *city = json_string_value(json_object_get(args, "city"));
    pthread_mutex_lock(&a->mu);
    a->tool_calls++;
    size_t used = strlen(a->cities);
    snprintf(a->cities + used, sizeof a->cities - used, "%s;", city ? city : "");
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

static vigil_code on_runtime(void *user, vigil_runtime *rt, vigil_error *err)
{
    struct app *a = user;
    pthread_mutex_lock(&a->mu);
    a->hooked++;
    pthread_mutex_unlock(&a->mu);
    return register_tools(rt, a, err);
}

/* The port from the line the API printed once it listened ("... HTTP API on
 * http://127.0.0.1:PORT"), read back from the file stderr went to while it started. */
static int logged_port(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    int port = -1;
    if (vg_fs_read_file(path, 1 << 20, &text, &len, NULL) == VIGIL_OK) {
        const char *at = strstr(text, "HTTP API on http://127.0.0.1:");
        if (at)
            port = (int)strtol(at + strlen("HTTP API on http://127.0.0.1:"), NULL, 10);
    }
    vg_free(text);
    return port;
}

/* The service, as cli/cmd-http.c makes it; its stderr kept apart until the port is known. */
static vigil_code http_start(void *user, void (*poke)(void *), void *poke_user, vigil_error *err)
{
    struct app *a = user;
    a->http.poke = poke;
    a->http.poke_user = poke_user;
    vigil_code rc = vg_http_start(&a->http, &a->h, err);
    fflush(stderr);
    dup2(a->saved_stderr, 2);
    pthread_mutex_lock(&a->mu);
    a->port = rc ? -1 : logged_port(a->log_path);
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return rc;
}

static void http_stop(void *user)
{
    struct app *a = user;
    vg_http_stop(a->h);
    a->h = NULL;
}

static void *daemon_thread(void *arg)
{
    struct app *a = arg;
    a->daemon_rc = vigil_daemon_run(a->store, &a->opts, &a->daemon_err);
    pthread_mutex_lock(&a->mu);
    if (!a->port)
        a->port = -1; /* it stopped before its service started */
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

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

/* The last run's tool calls, as the journal recorded them. */
static char *last_run_tools(vigil_runtime *rt, const char *agent)
{
    char *runs = NULL, *out = NULL;
    ASSERT_OK(vigil_runs_list(rt, agent, NULL, NULL, 1, &runs, E));
    json_t *list = json_loads(runs, 0, NULL);
    json_t *items = json_object_get(list, "items");
    const char *run = json_string_value(json_object_get(json_array_get(items, 0), "run_id"));
    ASSERT(run != NULL);
    ASSERT_OK(vigil_run_tools(rt, run, NULL, 0, &out, E));
    json_decref(list);
    vigil_free(runs);
    return out;
}

static void start(struct app *a, const char *dir)
{
    snprintf(a->store, sizeof a->store, "%s/app.db", dir);
    snprintf(a->log_path, sizeof a->log_path, "%s/serve.log", dir);
    a->http =
        (struct vg_http_options){.store_path = a->store,
                                 .listen = "127.0.0.1:0",
                                 .token = "0123456789abcdef0123456789abcdef0123456789abcdef0123"
                                          "456789abcdef"};
    static vigil_daemon_service service;
    service = (vigil_daemon_service){.user = a, .start = http_start, .stop = http_stop};
    vigil_daemon_options_default(&a->opts);
    a->opts.workers = 1;
    a->opts.grace_ms = 600000;
    a->opts.on_runtime = on_runtime;
    a->opts.on_runtime_user = a;
    a->opts.service = &service;
    fflush(stderr);
    a->saved_stderr = dup(2);
    int fd = open(a->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT(fd >= 0 && a->saved_stderr >= 0);
    dup2(fd, 2);
    close(fd);
}

TEST(a_chat_over_http_calls_the_programs_tool)
{
    struct app a = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    char dir[4096], id[37];
    snprintf(dir, sizeof dir, "%s", vg_test_tmpdir("http_app_tools"));
    use_cassette(dir, "[{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"get_weather\","
                      "\"arguments\":{\"city\":\"Paris\"}}]}},"
                      "{\"response\":{\"text\":\"Sunny in Paris.\"}},"
                      "{\"response\":{\"tool_calls\":[{\"id\":\"c2\",\"name\":\"get_weather\","
                      "\"arguments\":{\"city\":\"Oslo\"}}]}},"
                      "{\"response\":{\"text\":\"Sunny in Oslo.\"}}]");
    start(&a, dir);
    vigil_runtime_options ro;
    vigil_runtime *rt = NULL;
    vigil_runtime_options_default(&ro);
    ro.store_uri = a.store;
    ro.create_if_missing = 1;
    ASSERT_OK(vigil_runtime_open(&ro, &rt, E));
    vigil_agent_spec spec = {.name = "Wb", .config_json = "{\"tools\":[\"get_weather\"]}"};
    ASSERT_OK(vigil_agent_create(rt, &spec, id, E));

    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, daemon_thread, &a), 0);
    pthread_mutex_lock(&a.mu);
    while (!a.port)
        pthread_cond_wait(&a.cv, &a.mu);
    pthread_mutex_unlock(&a.mu);
    ASSERT(a.port > 0);

    struct live L = {.port = a.port};
    snprintf(L.token, sizeof L.token, "%s", a.http.token);
    char path[128];
    struct live_resp r;
    snprintf(path, sizeof path, "/v1/agents/%s/chat", id);
    ASSERT_EQ(live_req(&L, "POST", path, "{\"text\":\"Weather in Paris?\"}", NULL, 1, &r), 200);
    ASSERT_CONTAINS(r.body, "Sunny in Paris.");
    live_resp_free(&r);
    char *tools = last_run_tools(rt, id);
    ASSERT_CONTAINS(tools, "\"name\":\"get_weather\"");
    ASSERT_CONTAINS(tools, "\"status\":\"succeeded\"");
    ASSERT(!strstr(tools, "unknown_tool"));
    vigil_free(tools);

    /* Streamed: the turn runs on a thread of its own, with a runtime of the API's pool. */
    static const char *const sse[] = {"Accept: text/event-stream", NULL};
    ASSERT_EQ(live_req(&L, "POST", path, "{\"text\":\"Weather in Oslo?\"}", sse, 1, &r), 200);
    ASSERT_CONTAINS(r.body, "event: tool_done");
    ASSERT_CONTAINS(r.body, "\"is_error\":false");
    ASSERT_CONTAINS(r.body, "Sunny in Oslo.");
    live_resp_free(&r);

    ASSERT_OK(vigil_daemon_stop(a.store, E));
    pthread_join(th, NULL);
    if (a.daemon_rc)
        fprintf(stderr, "  daemon: %s\n", a.daemon_err.message);
    ASSERT_EQ(a.daemon_rc, VIGIL_OK);
    close(a.saved_stderr);
    ASSERT_EQ(a.tool_calls, 2);
    ASSERT_STREQ(a.cities, "Paris;Oslo;");
    /* The daemon's two runtimes (loop, worker), and the API's: its event poller's two and at
     * least one a request ran on. */
    ASSERT(a.hooked >= 5);
    /* A service's runtime after the daemon returned has no daemon to take the hook from. */
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_ENOTFOUND, vigil_daemon_on_runtime(a.store, rt, &err));
    vigil_runtime_close(rt);
}

int main(void)
{
    RUN(a_chat_over_http_calls_the_programs_tool);
    return 0;
}
