/*
 * bench_mcp.c: the CPU vigil spends per MCP tool call over stdio, the server's time left out.
 * The server is a child process, so getrusage(RUSAGE_SELF) around N calls counts vigil's own
 * user+system time only (writing the request, waiting in poll, reading and parsing the answer,
 * building the result for the model); the server's CPU over the same calls is read from
 * /proc/PID/stat for comparison, and the wall time per call is printed too. Target (issue 28):
 * at most 50 us of vigil CPU per call.
 *
 *   bench_mcp [COUNT] [SERVER_ARGV...]
 *     default server: the everything server of scripts/npm.sh (tool echo), else vigil's fault
 *     server (tests/mcp/fault_server.js, tool ok)
 */
#include "base/common.h"

#include "mcp/mcp.h"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double cpu_self(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* utime + stime of a process, in seconds (fields 14 and 15 of /proc/PID/stat). */
static double cpu_of(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void quiet(void *user, const char *server, const char *line)
{
}

int main(int argc, char **argv)
{
    int count = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 2000;
    char everything[1024], fault[1024];
    const char *tool = "echo", *args_text = "{\"message\":\"hi\"}";
    json_t *argv_json = json_array();
    snprintf(everything, sizeof everything, "%s/.deps/npm/node_modules/.bin/mcp-server-everything",
             VIGIL_SOURCE_DIR);
    snprintf(fault, sizeof fault, "%s/tests/mcp/fault_server.js", VIGIL_SOURCE_DIR);
    if (argc > 2) {
        for (int i = 2; i < argc; i++)
            json_array_append_new(argv_json, json_string(argv[i]));
    } else if (access(everything, X_OK) == 0) {
        json_array_append_new(argv_json, json_string(everything));
    } else {
        json_array_append_new(argv_json, json_string("node"));
        json_array_append_new(argv_json, json_string(fault));
        tool = "ok";
        args_text = "{}";
    }
    json_t *decl = json_pack("{s:{s:o}}", "bench", "command", argv_json);
    struct vg_mcp_conf *conf = NULL;
    struct vg_mcp_client *c = NULL;
    struct vg_mcp_options o = {.log = quiet};
    vigil_error err = {0};
    json_t *args = json_loads(args_text, 0, NULL);
    if (vg_mcp_conf_parse(decl, &conf, &err) ||
        vg_mcp_client_new(&conf->servers[0], &o, &c, &err)) {
        fprintf(stderr, "bench_mcp: %s\n", err.message);
        return 1;
    }
    for (int i = 0; i < 200; i++) { /* start, list, warm the server's JIT */
        json_t *res = NULL;
        if (vg_mcp_client_call(c, tool, args, &res, &err)) {
            fprintf(stderr, "bench_mcp: %s\n", err.message);
            return 1;
        }
        json_decref(res);
    }
    int pid = vg_mcp_client_pid(c);
    double s0 = cpu_of(pid), c0 = cpu_self(), w0 = wall();
    for (int i = 0; i < count; i++) {
        json_t *res = NULL;
        if (vg_mcp_client_call(c, tool, args, &res, &err)) {
            fprintf(stderr, "bench_mcp: %s\n", err.message);
            return 1;
        }
        json_t *model = vg_mcp_result_for_model(res, 64 << 10); /* what the provider adds */
        json_decref(model);
        json_decref(res);
    }
    double c1 = cpu_self(), w1 = wall(), s1 = cpu_of(pid);
    printf("mcp stdio call (%s, %d calls): vigil CPU %.1f us/call, server CPU %.1f us/call, "
           "wall %.1f us/call\n",
           tool, count, (c1 - c0) * 1e6 / count, (s1 - s0) * 1e6 / count, (w1 - w0) * 1e6 / count);
    json_decref(args);
    json_decref(decl);
    vg_mcp_client_free(c);
    vg_mcp_conf_free(conf);
    return 0;
}
