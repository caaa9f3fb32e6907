/*
 * test_http_sync.c: multi-device sync between machines (docs/sync.md, "Between machines"): two
 * live daemons over loopback, each a device with its own store, and `vigil sync --with
 * http://HOST:PORT --token-file F` run on one's store against the other's HTTP API
 * (POST /v1/sync/{hello,offer,apply,confirm}). Agents made through either daemon's API reach
 * the other, both ways, while both daemons keep running (their runtimes opened before their
 * stores joined); an exchange cut off midway is taken up where it stopped; a wrong token is
 * refused.
 */
#include "base/common.h"

#include "helpers/http_server.h"
#include "helpers/live_http.h"
#include "helpers/test.h"

#include <fcntl.h>
#include <jansson.h>
#include <sys/wait.h>
#include <unistd.h>

static struct live A, B; /* the laptop's daemon and the desktop's */

/* A request that must answer want; the parsed body (owned). */
static json_t *call(struct live *L, long want, const char *method, const char *path,
                    const char *body)
{
    struct live_resp r;
    long got = live_req(L, method, path, body, NULL, 1, &r);
    if (got != want)
        TEST_FAIL_("%s %s: status %ld, expected %ld: %s", method, path, got, want, r.body);
    json_t *v = json_loads(r.body, JSON_DECODE_ANY, NULL);
    if (!v)
        TEST_FAIL_("%s %s: the answer is not JSON: %.200s", method, path, r.body);
    live_resp_free(&r);
    return v;
}

/* Whether the daemon's agent list holds an agent of this name. */
static int has_agent(struct live *L, const char *name)
{
    json_t *list = call(L, 200, "GET", "/v1/agents?limit=1000", NULL), *a;
    size_t i;
    int found = 0;
    json_array_foreach (json_object_get(list, "items"), i, a)
        found |= !strcmp(json_string_value(json_object_get(a, "name")), name);
    json_decref(list);
    return found;
}

/* The daemon's token in a file of its folder (mode 0600); its path into out. */
static void token_file(struct live *L, const char *token, char *out, size_t n)
{
    snprintf(out, n, "%s/peer-token", L->dir);
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT(fd >= 0);
    ASSERT_EQ(write(fd, token, strlen(token)), (ssize_t)strlen(token));
    close(fd);
}

/* `vigil sync --with http://127.0.0.1:PORT --token-file F --json` on from's store against to's
 * daemon; the summary (owned) when it exits 0, NULL otherwise; *status its exit status. */
static json_t *sync_cli(struct live *from, struct live *to, const char *token, int *status)
{
    char tok[4300], cmd[10000], out[8192] = "";
    const char *cli = getenv("VIGIL_CLI");
    ASSERT(cli);
    token_file(from, token, tok, sizeof tok);
    snprintf(cmd, sizeof cmd,
             "VIGIL_STORE='%s' '%s' sync --with http://127.0.0.1:%d --token-file '%s' --json "
             "2>&1",
             from->store, cli, to->port, tok);
    FILE *p = popen(cmd, "r");
    ASSERT(p);
    size_t len = fread(out, 1, sizeof out - 1, p);
    out[len] = '\0';
    int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    json_t *v = *status == 0 ? json_loads(out, 0, NULL) : NULL;
    if (*status == 0 && !v)
        TEST_FAIL_("vigil sync printed no JSON: %s", out);
    return v;
}

static json_int_t part(const json_t *summary, const char *dir, const char *key)
{
    return json_integer_value(json_object_get(json_object_get(summary, dir), key));
}

static json_t *synced(struct live *from, struct live *to)
{
    int status = 0;
    json_t *v = sync_cli(from, to, to->token, &status);
    ASSERT_EQ(status, 0);
    return v;
}

/* Agents made through either daemon reach the other, both ways, while both run; a second round
 * sends what is new, a third nothing. proves: S0-164 */
TEST(two_daemons_sync_both_ways_over_http)
{
    char north[64], south[64], east[64], west[64];
    live_agent_create(&A, "north", north, sizeof north);
    live_chat(&A, north, "hello from the laptop");
    live_agent_create(&B, "south", south, sizeof south);
    /* Every request thread of both daemons keeps a runtime opened before the join. */
    for (int i = 0; i < 8; i++)
        ASSERT(!has_agent(&A, "none") && !has_agent(&B, "none"));
    json_t *s = synced(&A, &B);
    ASSERT(part(s, "sent", "entries") > 0 && part(s, "received", "entries") > 0);
    ASSERT(part(s, "sent", "changed") > 0 && part(s, "received", "changed") > 0);
    ASSERT(json_string_length(json_object_get(s, "peer_host")) == 16);
    ASSERT_EQ(json_integer_value(json_object_get(s, "holes")), 0);
    json_decref(s);
    ASSERT(has_agent(&B, "north") && has_agent(&A, "south"));
    /* Written through the daemons' own runtimes after their stores joined (A's by the command,
     * B's by its sync route): logged without a restart, and sent alone. */
    live_agent_create(&A, "east", east, sizeof east);
    live_agent_create(&B, "west", west, sizeof west);
    for (int i = 0; i < 4; i++) { /* on each request thread */
        char name[32], id[64];
        snprintf(name, sizeof name, "east%d", i);
        live_agent_create(&A, name, id, sizeof id);
        snprintf(name, sizeof name, "west%d", i);
        live_agent_create(&B, name, id, sizeof id);
    }
    s = synced(&A, &B);
    ASSERT(part(s, "sent", "entries") > 0);
    ASSERT(part(s, "received", "entries") > 0);
    json_decref(s);
    for (int i = 0; i < 4; i++) {
        char name[32];
        snprintf(name, sizeof name, "east%d", i);
        ASSERT(has_agent(&B, name));
        snprintf(name, sizeof name, "west%d", i);
        ASSERT(has_agent(&A, name));
    }
    ASSERT(has_agent(&B, "east") && has_agent(&A, "west"));
    s = synced(&A, &B);
    ASSERT_EQ(part(s, "sent", "entries"), 0);
    ASSERT_EQ(part(s, "received", "entries"), 0);
    json_decref(s);
}

/* A's log top of its own host as B's hello says B holds it, or A's own. */
static json_int_t top_of(struct live *L, const char *host)
{
    json_t *h = call(L, 200, "POST", "/v1/sync/hello", NULL);
    json_int_t top = json_integer_value(json_object_get(json_object_get(h, "tops"), host));
    json_decref(h);
    return top;
}

/* One bounded offer of A applied on B, then the connection "cut": no more offers and no
 * confirmation; an apply whose body was cut is refused whole (nothing written). The next `vigil
 * sync` sends only the rest. */
TEST(an_exchange_cut_off_midway_is_taken_up_where_it_stopped)
{
    char chatty[64];
    live_agent_create(&A, "chatty", chatty, sizeof chatty);
    for (int i = 0; i < 4; i++)
        live_chat(&A, chatty, "tell me something long enough to fill an offer");
    json_t *ha = call(&A, 200, "POST", "/v1/sync/hello", NULL);
    const char *a_host = json_string_value(json_object_get(ha, "host"));
    json_int_t a_top = top_of(&A, a_host), b_had = top_of(&B, a_host);
    ASSERT(a_top > b_had);
    json_t *hello = call(&B, 200, "POST", "/v1/sync/hello", NULL);
    json_object_set_new(hello, "max_bytes", json_integer(1500));
    char *text = json_dumps(hello, JSON_COMPACT);
    json_t *offer = call(&A, 200, "POST", "/v1/sync/offer", text);
    free(text);
    ASSERT(json_is_true(json_object_get(offer, "more")));
    text = json_dumps(offer, JSON_COMPACT);
    /* The body cut in the middle: not a sync offer, refused before anything is written. */
    char *cut = strdup(text);
    cut[strlen(cut) / 2] = '\0';
    json_decref(call(&B, 400, "POST", "/v1/sync/apply", cut));
    free(cut);
    ASSERT_EQ(top_of(&B, a_host), b_had);
    json_t *applied = call(&B, 200, "POST", "/v1/sync/apply", text);
    free(text);
    ASSERT(json_integer_value(json_object_get(applied, "entries")) > 0);
    ASSERT_EQ(json_integer_value(json_object_get(applied, "holes")), 0);
    json_decref(applied);
    json_int_t b_now = top_of(&B, a_host);
    ASSERT(b_now > b_had && b_now < a_top);
    /* Taken up: exactly the entries B still lacks go. */
    json_t *s = synced(&A, &B);
    ASSERT_EQ(part(s, "sent", "entries"), a_top - b_now);
    ASSERT_EQ(json_integer_value(json_object_get(s, "holes")), 0);
    json_decref(s);
    ASSERT_EQ(top_of(&B, a_host), a_top);
    ASSERT(has_agent(&B, "chatty"));
    json_decref(offer);
    json_decref(hello);
    json_decref(ha);
}

/* The routes need the daemon's token; the command says so (exit 9) and changes nothing. */
TEST(a_wrong_token_is_refused)
{
    int status = 0;
    json_t *v = sync_cli(&A, &B, "0000000000000000000000000000000000000000000000000000000000000000",
                         &status);
    ASSERT(v == NULL);
    ASSERT_EQ(status, 9);
    struct live_resp r;
    ASSERT_EQ(live_req(&B, "POST", "/v1/sync/hello", "{}", NULL, 0, &r), 401);
    live_resp_free(&r);
    json_decref(call(&B, 404, "POST", "/v1/sync/nothing", "{}"));
}

/* A's model: a loopback server answering every request "done" and keeping each request. */
static struct vg_test_server *model;
static const struct vg_ts_response done_answer = {
    .headers = "Content-Type: application/json\r\n",
    .body = "{\"id\":\"c1\",\"object\":\"chat.completion\",\"model\":\"m\",\"choices\":[{"
            "\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"done\"},"
            "\"finish_reason\":\"stop\"}]}"};

/* The user messages of the last request A's model got, one string "q|q|...". */
static void last_request_users(char *out, size_t n)
{
    size_t count = vg_test_server_count(model), i, len = 0;
    ASSERT(count > 0);
    json_t *req = json_loads(vg_test_server_request(model, count - 1)->body, 0, NULL), *m;
    ASSERT(req != NULL);
    out[0] = '\0';
    json_array_foreach (json_object_get(req, "messages"), i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        const char *text = json_string_value(json_object_get(m, "content"));
        if (role && !strcmp(role, "user") && text && len < n)
            len += (size_t)snprintf(out + len, n - len, "%s|", text);
    }
    json_decref(req);
}

/* Trial K: a daemon keeps a thread's window between turns and caught it up with the messages
 * numbered after its newest; those another device wrote apart, which the sync stored numbered
 * below, never reached the model. After the sync the daemon's next turn has them. */
TEST(a_daemons_next_turn_has_the_messages_a_sync_brought)
{
    char pal[64], users[4096];
    live_agent_create(&A, "pal", pal, sizeof pal);
    live_chat(&A, pal, "q0");
    json_decref(synced(&A, &B));
    live_chat(&A, pal, "qa1");
    live_chat(&A, pal, "qa2");
    live_chat(&B, pal, "qb1");
    last_request_users(users, sizeof users);
    ASSERT_STREQ(users, "q0|qa1|qa2|");
    json_decref(synced(&A, &B));
    live_chat(&A, pal, "qa3");
    last_request_users(users, sizeof users);
    if (!strstr(users, "qb1|"))
        TEST_FAIL_("the daemon's turn after the sync misses b's message: %s", users);
}

int main(void)
{
    char config[4300], text[600];
    model = vg_test_server_start(&done_answer, 1);
    snprintf(config, sizeof config, "%s/laptop.yaml", vg_test_tmpdir("http_sync_model"));
    snprintf(text, sizeof text, "model: {provider: openai, name: m, base_url: \"%s/v1\"}\n",
             vg_test_server_url(model));
    FILE *f = fopen(config, "w");
    ASSERT(f && fputs(text, f) >= 0 && fclose(f) == 0);
    setenv("VIGIL_CONFIG", config, 1); /* the laptop daemon's model, which keeps its requests */
    live_start(&A, "http_sync_laptop", NULL);
    unsetenv("VIGIL_CONFIG");
    live_start(&B, "http_sync_desktop", NULL);
    RUN(two_daemons_sync_both_ways_over_http);
    RUN(an_exchange_cut_off_midway_is_taken_up_where_it_stopped);
    RUN(a_wrong_token_is_refused);
    RUN(a_daemons_next_turn_has_the_messages_a_sync_brought);
    live_stop(&A);
    live_stop(&B);
    vg_test_server_stop(model);
    return 0;
}
