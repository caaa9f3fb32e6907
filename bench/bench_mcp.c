/*
 * bench_mcp.c: the CPU vigil spends per MCP tool call over stdio, the server's time left out.
 * The server is a child process, so getrusage(RUSAGE_SELF) around N calls counts vigil's own
 * user+system time only (writing the request, waiting in poll, reading and parsing the answer,
 * building the result for the model); the server's CPU over the same calls is read from
 * /proc/PID/stat for comparison, and the wall time per call is printed too. Target (issue 28):
 * at most 50 us of vigil CPU per call.
 *
 *
 * Then an MCP tool on the user's path: every call through the public API, vigil_tool_call —
 * the gate (allowlist, schema check, kill switches, budgets, operation id), the journal (action
 * and toolResult messages, the operation record, synced) and the client — beside a C tool of
 * the same contract through the same path, so what MCP adds to a gated call shows as the
 * difference. And the cost of declared servers that are not used: the time to open a runtime
 * and list the tools of an agent that calls no MCP tool (what a daemon does before its first
 * run), then to the first MCP call, with 0, 1 and 10 servers declared, with the number of
 * server processes running after each (lazy: only a used server starts). And what the config
 * file's declarations cost a starting process: its three loads of the file, per server.
 *
 *   bench_mcp [COUNT] [SERVER_ARGV...]
 *     default server for the client figure: the everything server of scripts/npm.sh (tool
 *     echo), else vigil's fault server (tests/mcp/fault_server.js, tool ok); with the
 *     everything server and no SERVER_ARGV, the client alone over Streamable HTTP too (the
 *     same server in its streamableHttp mode on a loopback port); the gated figures always use
 *     the fault server (tool ok), so that no npm package is needed
 */
#include "base/common.h"

#include "config/config.h"
#include "helpers/test.h"
#include "mcp/mcp.h"
#include "bench_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* utime + stime of a process, in seconds. */
static double proc_cpu_s(int pid)
{
    return (double)bench_proc_cpu_us(pid) / 1e6;
}

static char dir[1024];

/* What a section measures from bench_mark_begin to bench_mark_end. */
static struct {
    int pid;
    double server, cpu, sys, wall;
} mark;

static void bench_mark_begin(int server_pid)
{
    mark.pid = server_pid;
    mark.server = proc_cpu_s(server_pid);
    mark.cpu = bench_cpu_s(), mark.sys = bench_sys_s(), mark.wall = bench_wall_s();
}

/* Prints the section's figures; the server's CPU a call, in microseconds. */
static double bench_mark_end(const char *what, const char *tool, int count)
{
    double c1 = bench_cpu_s(), k1 = bench_sys_s(), w1 = bench_wall_s(), s1 = proc_cpu_s(mark.pid);
    printf("%s (%s, %d calls): vigil CPU %.1f us/call (system %.1f), server CPU %.1f us/call, "
           "wall %.1f us/call\n",
           what, tool, count, (c1 - mark.cpu) * 1e6 / count, (k1 - mark.sys) * 1e6 / count,
           (s1 - mark.server) * 1e6 / count, (w1 - mark.wall) * 1e6 / count);
    return (s1 - mark.server) * 1e6 / count;
}

/* The pids of this process's children (the servers), up to max; how many. */
static int children(int *pids, int max)
{
    char path[64];
    int n = 0;
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    FILE *f = fopen(path, "r");
    while (f && n < max && fscanf(f, "%d", &pids[n]) == 1)
        n++;
    if (f)
        fclose(f);
    return n;
}

/* A config declaring n fault servers s0..s{n-1}; its path in out. */
static void write_config(int n, char *out, size_t len)
{
    snprintf(out, len, "%s/config-%d.json", dir, n);
    FILE *f = fopen(out, "w");
    if (!f)
        exit(1);
    fputs("{\"mcp_servers\": {", f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\"s%d\": {\"command\": [\"node\", \"%s/tests/mcp/fault_server.js\"]}",
                i ? ", " : "", i, VIGIL_SOURCE_DIR);
    fputs("}}", f);
    fclose(f);
}

static vigil_runtime *open_rt(const char *config, const char *store)
{
    vigil_runtime_options o = {
        .size = sizeof o, .store_uri = store, .create_if_missing = 1, .config_path = config};
    vigil_runtime *rt = NULL;
    vigil_error err = {0};
    if (vigil_runtime_open(&o, &rt, &err)) {
        fprintf(stderr, "bench_mcp_gate: %s\n", err.message);
        exit(1);
    }
    return rt;
}

static void agent(vigil_runtime *rt, const char *tools_json, char id[37])
{
    vigil_agent_spec spec = {.name = "bench", .config_json = tools_json};
    vigil_error err = {0};
    if (vigil_agent_create(rt, &spec, id, &err)) {
        fprintf(stderr, "bench_mcp_gate: %s\n", err.message);
        exit(1);
    }
}

static void call(vigil_runtime *rt, const char *id, const char *tool, int i)
{
    char key[32], *out = NULL;
    vigil_error err = {0};
    snprintf(key, sizeof key, "run-%d", i); /* a new operation each time: nothing replayed */
    if (vigil_tool_call(rt, id, key, tool, "{}", &out, &err)) {
        fprintf(stderr, "bench_mcp_gate: %s: %s\n", tool, err.message);
        exit(1);
    }
    vigil_free(out);
}

/* A C tool of the same contract as the fault server's ok (read-only, non-idempotent), so the
 * gate and journal's own cost per call can be told from the MCP client's. */
static vigil_code local_ok(void *user, const vigil_tool_call_info *call, const char *args_json,
                           char **out_result_json, vigil_error *err)
{
    (void)user, (void)call, (void)args_json, (void)err;
    *out_result_json = vg_strdup("{\"text\": \"ok\"}");
    return VIGIL_OK;
}

static void timed_calls(vigil_runtime *rt, const char *id, const char *tool, int first, int count,
                        int server_pid, const char *what)
{
    bench_mark_begin(server_pid);
    for (int i = 0; i < count; i++)
        call(rt, id, tool, first + i);
    bench_mark_end(what, tool, count);
}

static void per_call(int count)
{
    char config[1200], store[1200], id[37];
    int pids[16];
    write_config(1, config, sizeof config);
    snprintf(store, sizeof store, "%s/calls.db", dir);
    vigil_runtime *rt = open_rt(config, store);
    agent(rt, "{\"tools\": [\"s0__*\"], \"budgets\": {\"tool_calls\": null}}", id);
    for (int i = 0; i < 200; i++) /* start, list, warm the server's JIT */
        call(rt, id, "s0__ok", i);
    int pid = children(pids, 16) ? pids[0] : 0;
    timed_calls(rt, id, "s0__ok", 1000, count, pid,
                "MCP tool through vigil_tool_call (gate + journal + client)");
    vigil_tool_def def = {.name = "local_ok",
                          .description = "ok, in process",
                          .contract_json = "{\"mutating\": false}"};
    vigil_error err = {0};
    char other[37];
    if (vigil_tool_register(rt, &def, local_ok, NULL, &err)) {
        fprintf(stderr, "bench_mcp_gate: %s\n", err.message);
        exit(1);
    }
    agent(rt, "{\"tools\": [\"local_ok\"], \"budgets\": {\"tool_calls\": null}}", other);
    for (int i = 0; i < 200; i++)
        call(rt, other, "local_ok", i);
    timed_calls(rt, other, "local_ok", 1000, count, 0,
                "C tool through vigil_tool_call (gate + journal only)  ");
    vigil_runtime_close(rt);
}

/* Open + list an agent's tools (no MCP tool allowed), then the first MCP call, with n
 * servers declared. */
static void start_cost(int n)
{
    char config[1200], store[1200], a[37], b[37], *out = NULL;
    int pids[64];
    vigil_error err = {0};
    write_config(n, config, sizeof config);
    snprintf(store, sizeof store, "%s/start-%d.db", dir, n);
    vigil_runtime *rt = open_rt(config, store); /* create the store and the agents first */
    agent(rt, "{\"tools\": [\"set_report\"]}", a);
    agent(rt, "{\"tools\": [\"s0__*\"]}", b);
    vigil_runtime_close(rt);
    double w0 = bench_wall_s();
    rt = open_rt(config, store);
    if (vigil_tool_list_for_agent(rt, a, &out, &err)) {
        fprintf(stderr, "bench_mcp_gate: %s\n", err.message);
        exit(1);
    }
    vigil_free(out);
    double w1 = bench_wall_s();
    int before = children(pids, 64);
    if (n)
        call(rt, b, "s0__ok", 0);
    double w2 = bench_wall_s();
    printf("%2d servers declared: open + tool list %.2f ms (%d servers running); first MCP "
           "call %.1f ms after (%d running)\n",
           n, (w1 - w0) * 1e3, before, n ? (w2 - w1) * 1e3 : 0.0, children(pids, 64));
    vigil_runtime_close(rt);
}

/* The config file's YAML with n servers declared as bench_mcp_serve.sh writes them, round
 * noted in a comment so that each round is a new text (a process's first load). */
static void write_yaml_config(const char *path, int n, int round)
{
    FILE *f = fopen(path, "w");
    if (!f)
        exit(1);
    fprintf(f, "# round %d\nmcp_servers:\n", round);
    for (int i = 0; i < n; i++)
        fprintf(f,
                "  s%d:\n    command: [node, \"%s/tests/mcp/fault_server.js\"]\n"
                "    env: {FAULT_STARTS_FILE: \"%s/starts\"}\n",
                i, VIGIL_SOURCE_DIR, dir);
    fclose(f);
}

/* The config loads of a starting daemon (three of the same file: each runtime it opens by its
 * first wake loads it), rounds times with n servers declared in YAML; the CPU per
 * round. parse_each: the file is rewritten (a new comment) before each load, so each load
 * parses, as every load did before session 23. */
static double config_loads(int n, int rounds, int parse_each)
{
    char path[1200];
    double cpu = 0;
    snprintf(path, sizeof path, "%s/config-%d.yaml", dir, n);
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 3; k++) {
            if (k == 0 || parse_each)
                write_yaml_config(path, n, r * 3 + k);
            struct vg_config *cfg = NULL;
            vigil_error err = {0};
            double c0 = bench_cpu_s();
            if (vg_config_load(path, &cfg, &err)) {
                fprintf(stderr, "bench_mcp: %s\n", err.message);
                exit(1);
            }
            vg_config_free(cfg);
            cpu += bench_cpu_s() - c0;
        }
    }
    return cpu / rounds;
}

static void config_cost(int rounds)
{
    for (int parse_each = 1; parse_each >= 0; parse_each--) {
        double none = config_loads(0, rounds, parse_each);
        double ten = config_loads(10, rounds, parse_each);
        printf("config loads at a start (3, YAML, %s, %d rounds): %.1f us with 0 servers, "
               "%.1f us with 10: %.1f us per declared server\n",
               parse_each ? "each parsed" : "one text", rounds, none * 1e6, ten * 1e6,
               (ten - none) * 1e6 / 10);
    }
}

static void quiet(void *user, const char *server, const char *line)
{
    (void)user, (void)server, (void)line;
}

/* The MCP client alone: count tools/call of tool with args_text on the server decl declares
 * ({"bench": {...}}), after 200 to start it and warm its JIT; server_pid: the server's process
 * when the client does not own it (HTTP), else 0 (the client's child). */
static double client_alone(const char *what, json_t *decl, const char *tool, const char *args_text,
                           int count, int server_pid)
{
    struct vg_mcp_conf *conf = NULL;
    struct vg_mcp_client *c = NULL;
    struct vg_mcp_options o = {.log = quiet};
    vigil_error err = {0};
    json_t *args = json_loads(args_text, 0, NULL);
    if (vg_mcp_conf_parse(decl, &conf, &err) ||
        vg_mcp_client_new(&conf->servers[0], &o, &c, &err)) {
        fprintf(stderr, "bench_mcp: %s\n", err.message);
        exit(1);
    }
    for (int i = 0; i < 200 + count; i++) {
        json_t *res = NULL;
        if (i == 200) {
            int pid = server_pid ? server_pid : vg_mcp_client_pid(c);
            bench_mark_begin(pid);
        }
        if (vg_mcp_client_call(c, tool, args, &res, &err)) {
            fprintf(stderr, "bench_mcp: %s\n", err.message);
            exit(1);
        }
        json_t *model = vg_mcp_result_for_model(res, 64 << 10); /* what the provider adds */
        json_decref(model);
        json_decref(res);
    }
    double server_us = bench_mark_end(what, tool, count);
    json_decref(args);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
    return server_us;
}

/* Busy for us microseconds of this thread's CPU. */
static void spin_us(double us)
{
    int64_t end = bench_clock_ns(CLOCK_THREAD_CPUTIME_ID) + (int64_t)(us * 1000);
    while (bench_clock_ns(CLOCK_THREAD_CPUTIME_ID) < end)
        ;
}

/* The floor's server: reads a request, spins server_us, answers reply_len bytes; until EOF. */
static void floor_server(int in, int out, double server_us, size_t reply_len)
{
    char buf[4096];
    memset(buf, 'x', sizeof buf);
    while (read(in, buf, sizeof buf) > 0) {
        spin_us(server_us);
        if (write(out, buf, reply_len) != (ssize_t)reply_len)
            break;
    }
    _exit(0);
}

/* count bare exchanges (request_len bytes written, a poll, the answer read) over to and from. */
static void floor_exchanges(int to, int from, size_t request_len, int count, double *cpu,
                            double *sys)
{
    char buf[4096];
    memset(buf, 'x', sizeof buf);
    double c0 = bench_cpu_s(), k0 = bench_sys_s();
    for (int i = 0; i < count; i++) {
        struct pollfd p = {.fd = from, .events = POLLIN};
        if (write(to, buf, request_len) != (ssize_t)request_len || poll(&p, 1, 1000) != 1 ||
            read(from, buf, sizeof buf) <= 0)
            exit(1);
    }
    *cpu = (bench_cpu_s() - c0) * 1e6 / count, *sys = (bench_sys_s() - k0) * 1e6 / count;
}

static void floor_print(const char *shape, double server_us, double cpu, double sys)
{
    printf("  the machine's floor, %s: a bare client (write, poll, read) to a child answering "
           "after %.0f us of CPU: %.1f us/call (system %.1f)\n",
           shape, server_us, cpu, sys);
}

/* The machine's floor under an MCP call over stdio: the same exchange made bare, with a child
 * that answers after spinning as long as the real server's CPU a call, so that the kernel's
 * part (going to sleep in poll and being woken, on this paravirtualised VM) is what a client
 * doing nothing at all pays. vigil's figure less this one is vigil's own work. The server's
 * stdin is a socket pair and its stdout a pipe, as vigil starts stdio servers. */
static void stdio_floor(double server_us, int count)
{
    int in[2], out[2], st;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, in) || pipe(out))
        exit(1);
    pid_t pid = fork();
    if (pid == 0) {
        close(in[0]), close(out[0]);
        floor_server(in[1], out[1], server_us, 84);
    }
    close(in[1]), close(out[1]);
    double cpu, sys;
    floor_exchanges(in[0], out[0], 133, count, &cpu, &sys);
    close(in[0]), close(out[0]);
    waitpid(pid, &st, 0);
    floor_print("stdio", server_us, cpu, sys);
}

/* The same over a loopback TCP connection, with the sizes of a Streamable HTTP call (a 430-byte
 * POST, a 607-byte answer): the kernel's part of an HTTP call; libcurl's own work on top of it
 * is bench_floor's "one HTTP exchange". */
static void tcp_floor(double server_us, int count)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int one = 1, st, lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 1) ||
        getsockname(lfd, (struct sockaddr *)&a, &len))
        exit(1);
    pid_t pid = fork();
    if (pid == 0) {
        int s = accept(lfd, NULL, NULL);
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        floor_server(s, s, server_us, 607);
    }
    close(lfd);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a))
        exit(1);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    double cpu, sys;
    floor_exchanges(fd, fd, 430, count, &cpu, &sys);
    close(fd);
    waitpid(pid, &st, 0);
    floor_print("loopback TCP", server_us, cpu, sys);
}

/* A port nothing listens on now (the kernel's pick for an ephemeral bind). */
static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) ||
        getsockname(fd, (struct sockaddr *)&a, &len))
        exit(1);
    close(fd);
    return ntohs(a.sin_port);
}

/* The everything server in its streamableHttp mode on port, once it says it listens; its pid. */
static int start_http_server(const char *everything, int port)
{
    int errp[2];
    char portstr[16], buf[4096] = "";
    size_t got = 0;
    if (pipe(errp))
        exit(1);
    snprintf(portstr, sizeof portstr, "%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        dup2(errp[1], 2);
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0), dup2(null, 1);
        setenv("PORT", portstr, 1);
        execl(everything, everything, "streamableHttp", (char *)NULL);
        _exit(127);
    }
    close(errp[1]);
    while (!strstr(buf, "listening on port")) {
        struct pollfd p = {.fd = errp[0], .events = POLLIN};
        ssize_t n = poll(&p, 1, 60000) == 1 ? read(errp[0], buf + got, sizeof buf - 1 - got) : -1;
        if (n <= 0 || got + (size_t)n >= sizeof buf - 1) {
            fprintf(stderr, "bench_mcp: the HTTP server did not start\n");
            exit(1);
        }
        got += (size_t)n;
        buf[got] = '\0';
    }
    close(errp[0]);
    return (int)pid;
}

static void http_alone(const char *everything, int count)
{
    char text[256];
    int port = free_port(), pid = start_http_server(everything, port), st;
    snprintf(text, sizeof text, "{\"bench\": {\"url\": \"http://127.0.0.1:%d/mcp\"}}", port);
    json_t *decl = json_loads(text, 0, NULL);
    double server_us =
        client_alone("mcp HTTP call", decl, "echo", "{\"message\":\"hi\"}", count, pid);
    tcp_floor(server_us, count);
    json_decref(decl);
    kill(-pid, SIGKILL);
    waitpid(pid, &st, 0);
}

int main(int argc, char **argv)
{
    int count = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 2000;
    char everything[1024], fault[1024];
    const char *tool = "echo", *args_text = "{\"message\":\"hi\"}";
    json_t *argv_json = json_array();
    int have_everything;
    signal(SIGPIPE, SIG_IGN);
    snprintf(everything, sizeof everything, "%s/.deps/npm/node_modules/.bin/mcp-server-everything",
             VIGIL_SOURCE_DIR);
    snprintf(fault, sizeof fault, "%s/tests/mcp/fault_server.js", VIGIL_SOURCE_DIR);
    have_everything = access(everything, X_OK) == 0;
    if (argc > 2) {
        for (int i = 2; i < argc; i++)
            json_array_append_new(argv_json, json_string(argv[i]));
    } else if (have_everything) {
        json_array_append_new(argv_json, json_string(everything));
    } else {
        json_array_append_new(argv_json, json_string("node"));
        json_array_append_new(argv_json, json_string(fault));
        tool = "ok";
        args_text = "{}";
    }
    json_t *decl = json_pack("{s:{s:o}}", "bench", "command", argv_json);
    stdio_floor(client_alone("mcp stdio call", decl, tool, args_text, count, 0), count);
    json_decref(decl);
    if (have_everything && argc <= 2)
        http_alone(everything, count);
    snprintf(dir, sizeof dir, "%s", vg_test_tmpdir("bench_mcp"));
    per_call(count);
    start_cost(0);
    start_cost(1);
    start_cost(10);
    config_cost(count / 10 > 10 ? count / 10 : 10);
    return 0;
}
