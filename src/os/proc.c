/*
 * proc.c: process identity for lease holders (see proc.h). Linux's /proc gives the start time
 * of any process; elsewhere a pid is checked with kill(pid, 0) and the start is unknown.
 */
#include "base/common.h"

#include "os/proc.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static char g_host[96];
static char g_boot[48];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* The first line of a small file, without its newline; "" when unreadable. */
static void first_line(const char *path, char *out, size_t n)
{
    FILE *f = fopen(path, "r");
    out[0] = '\0';
    if (!f)
        return;
    if (fgets(out, (int)n, f))
        out[strcspn(out, "\r\n")] = '\0';
    fclose(f);
}

static void read_host(void)
{
    first_line("/etc/machine-id", g_host, sizeof g_host);
    if (!g_host[0] && gethostname(g_host, sizeof g_host - 1) != 0)
        g_host[0] = '\0';
    g_host[sizeof g_host - 1] = '\0';
    first_line("/proc/sys/kernel/random/boot_id", g_boot, sizeof g_boot);
}

/*
 * Field 3 (state) and field 22 (start time) of /proc/PID/stat. The command name (field 2) is
 * in parentheses and may hold spaces or parentheses itself: the fields after it are counted
 * from its last ')'. Returns 0 when the file could not be read.
 */
static int stat_of(long pid, char *state, unsigned long long *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    /* after ')': " S ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
     * stime cutime cstime priority nice threads itrealvalue starttime" */
    int field = 2;
    char *save = NULL;
    for (char *tok = strtok_r(p + 1, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        field++;
        if (field == 3)
            *state = tok[0];
        if (field == 22) {
            *start = strtoull(tok, NULL, 10);
            return 1;
        }
    }
    return 0;
}

/* This process's start, read once a thread: a chat turn's lease take names its holder every
 * turn, and the read is three system calls and a stdio buffer. Keyed by the pid, so a forked
 * child reads its own; per thread, so no lock (one a fork could leave held). */
static _Thread_local long t_self_pid;
static _Thread_local char t_self_start[96];

void vg_proc_self(struct vg_proc_id *out)
{
    char state = 0;
    unsigned long long start = 0;
    pthread_once(&g_once, read_host);
    snprintf(out->host, sizeof out->host, "%s", g_host);
    out->pid = (long)getpid();
    if (t_self_pid != out->pid) {
        if (!stat_of(out->pid, &state, &start)) {
            out->start[0] = '\0'; /* unreadable now: read again next time */
            return;
        }
        snprintf(t_self_start, sizeof t_self_start, "%.48s:%llu", g_boot, start);
        t_self_pid = out->pid;
    }
    snprintf(out->start, sizeof out->start, "%s", t_self_start);
}

int vg_proc_gone(const char *host, long pid, const char *start)
{
    char state = 0;
    unsigned long long ticks = 0;
    pthread_once(&g_once, read_host);
    if (!host || !*host || strcmp(host, g_host) != 0 || pid <= 0)
        return 0; /* another host (or none recorded): only its lease's expiry tells */
    if (stat_of(pid, &state, &ticks)) {
        char now[96];
        snprintf(now, sizeof now, "%.48s:%llu", g_boot, ticks);
        return state == 'Z' || state == 'X' || (start && *start && strcmp(now, start) != 0);
    }
    /* No /proc entry: kill(pid, 0) still tells whether the pid exists at all. */
    return !(kill((pid_t)pid, 0) == 0 || errno == EPERM);
}
