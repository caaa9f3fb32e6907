/*
 * proc.h: who a process is, so a lease a process took can be told apart from a lease whose
 * process is gone. A process is named by its host (/etc/machine-id, else the host name), its
 * pid and its start (the boot id and the start time in clock ticks, /proc/PID/stat field 22):
 * a pid the kernel gave to another process since then has another start.
 */
#ifndef VG_PROC_H
#define VG_PROC_H

struct vg_proc_id {
    char host[96];
    long pid;
    char start[96]; /* "" where the platform cannot tell */
};

/* This process, read now (a forked child is its own process). */
void vg_proc_self(struct vg_proc_id *out);

/*
 * 1 when the process so named is known to be gone: it ran on this host and its pid runs no
 * more, or runs another process (its start differs), or is a zombie. 0 when it is alive or
 * cannot be known from here (another host, no pid recorded).
 */
int vg_proc_gone(const char *host, long pid, const char *start);

#endif
