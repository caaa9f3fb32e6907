/*
 * sandbox.h: code execution (docs/sandbox.md). The code-runtime port runs one program
 * per call in a fresh, confined child process; its default adapter is Lua 5.4. The child talks
 * to the host only through the bridge: JSON lines over pipes (bridge.c). docs/sandbox.md
 * describes the layers of confinement and what each one stops.
 *
 * Confinement (spawn.c, confine.c) is in layers, none trusted alone; vg_sandbox_probe says what
 * the kernel offers, and a run refuses to start when a required layer is missing.
 */
#ifndef VG_SANDBOX_H
#define VG_SANDBOX_H

#include "base/common.h"

#include <jansson.h>
#include <sys/types.h>

/* ---- confinement layers ------------------------------------------------------------------- */

enum vg_sandbox_layer {
    VG_SBX_USERNS = 1u << 0,   /* new user namespace, a non-root uid inside */
    VG_SBX_PIDNS = 1u << 1,    /* new PID namespace: no other process visible or signalled */
    VG_SBX_MOUNTNS = 1u << 2,  /* new mount namespace */
    VG_SBX_NETNS = 1u << 3,    /* new network namespace: no interface but a down loopback */
    VG_SBX_IPCNS = 1u << 4,    /* new IPC and UTS namespaces */
    VG_SBX_SECCOMP = 1u << 5,  /* seccomp-bpf allowlist, default: kill the process */
    VG_SBX_LANDLOCK = 1u << 6, /* files only under the working directory, no TCP */
    VG_SBX_RLIMITS = 1u << 7,  /* memory, CPU, processes, file size, descriptors */
    VG_SBX_NONEWPRIVS = 1u << 8,
    VG_SBX_CGROUP = 1u << 9,    /* a cgroup of its own: memory, processes, CPU (cgroup.c) */
    VG_SBX_FDS = 1u << 10,      /* every descriptor but the bridge's closed, empty environment */
    VG_SBX_PDEATHSIG = 1u << 11 /* killed when the host dies; its process group killed at a limit */
};
#define VG_SBX_LAYER_COUNT 12
/* What a run needs unless the config accepts less: every layer but the cgroup. */
#define VG_SBX_REQUIRED_DEFAULT (((1u << VG_SBX_LAYER_COUNT) - 1) & ~(unsigned)VG_SBX_CGROUP)

/* "userns", "pidns", ... for one bit; NULL for none. */
const char *vg_sandbox_layer_name(unsigned bit);
/* The bit of a layer name, 0 when unknown. */
unsigned vg_sandbox_layer_parse(const char *name);
/* The names of the bits set in mask as a new JSON array. */
json_t *vg_sandbox_layers_json(unsigned mask);

/* The cgroup layer's ground (cgroup.c): a cgroup per execution with a memory, a process and a
 * CPU cap, made where this process may: a delegated cgroup v2 subtree (its own cgroup writable,
 * with the memory, pids and cpu controllers), else writable cgroup v1 hierarchies of those
 * three controllers (a hybrid or v1-only host, as root). */
enum { VG_CG_MEMORY, VG_CG_PIDS, VG_CG_CPU, VG_CG_COUNT };
struct vg_sandbox_cgroup {
    int v1;                /* a cgroup v1 hierarchy is mounted */
    char v2_mount[256];    /* where cgroup2 is mounted; "" when it is not */
    char own[512];         /* this process's cgroup in it ("/..."), "" when unknown */
    char controllers[256]; /* its cgroup.controllers */
    int delegated;         /* its cgroup, cgroup.procs and cgroup.subtree_control are writable */
    /* v1: this process's cgroup in the memory, pids and cpu hierarchies ("" when a hierarchy
     * is missing or not writable) */
    char v1_dir[VG_CG_COUNT][512];
    int use_v1;    /* executions get v1 cgroups (v2 does not qualify, every v1_dir does) */
    int usable;    /* a cgroup per execution can be made here (v2, else v1) */
    char why[256]; /* when not usable: what is missing */
};
void vg_sandbox_cgroup_probe(struct vg_sandbox_cgroup *c);
/* {mode (none, v1, v2, hybrid), used (v1, v2, none), v1_mounted, v2_mount, own, controllers,
 * delegated, v1_dirs, usable, why}. */
json_t *vg_sandbox_cgroup_json(const struct vg_sandbox_cgroup *c);

/* One execution's cgroup: made and the child placed in it before it runs untrusted code,
 * removed after its reap, its counters read first. */
struct vg_sandbox_cg {
    int made;
    char dir[VG_CG_COUNT][900]; /* v2: the same directory three times */
    int v2;
    /* read at removal: times the memory cap was hit (v1 memory.failcnt, v2 memory.events
     * "max"), processes killed by the OOM killer in it (v2 oom_kill; v1 under_oom events
     * are not counted), forks refused at pids.max (pids.events "max"), peak memory (v1) */
    long long memory_hits, oom_kills, pids_refused, memory_peak;
    int counted; /* the counters were read (vg_sandbox_cg_read) */
};
/* Make a cgroup for one execution: memory cap memory_bytes, at most pids processes and
 * threads, one CPU's worth of time. 0 or an errno (nothing left made). */
int vg_sandbox_cg_make(struct vg_sandbox_cg *cg, size_t memory_bytes, int pids);
/* Move pid into it; 0 or an errno. */
int vg_sandbox_cg_place(const struct vg_sandbox_cg *cg, pid_t pid);
/* Change its memory cap; 0 or an errno. */
int vg_sandbox_cg_set_memory(const struct vg_sandbox_cg *cg, size_t memory_bytes);
/* Read its counters into cg now (they are final once the execution gave its result). */
void vg_sandbox_cg_read(struct vg_sandbox_cg *cg);
/* Read its counters into cg (unless read already) and remove it (its processes have been
 * reaped). */
void vg_sandbox_cg_remove(struct vg_sandbox_cg *cg);
/* The memory cap a cgroup adds over the runtime's own heap cap (memory_bytes): the
 * interpreter, its image's copied pages, the page cache of the files it writes. */
#define VG_CG_MEMORY_ROOM ((size_t)128 * 1024 * 1024)
/* Processes and threads in one execution's cgroup (Deno runs threads; Lua has RLIMIT_NPROC 1). */
#define VG_CG_MAX_PIDS 64

/* What this machine's kernel offers (probed once per process, then cached). */
struct vg_sandbox_probe {
    unsigned offered; /* layers that can be applied */
    int landlock_abi; /* 0: none */
    int userns;       /* 1: an unprivileged-style user namespace can be made here */
    int host_root;    /* the host runs as uid 0 */
    char notes[512];  /* why a layer is missing, for `vigil sandbox check` */
    struct vg_sandbox_cgroup cgroup;
};
void vg_sandbox_probe(struct vg_sandbox_probe *out);
/* The probe as JSON: {offered:[...], applied:[...], missing:[...], landlock_abi, cgroup:{...}}
 * where applied = what a run with `required` would apply. */
json_t *vg_sandbox_probe_json(const struct vg_sandbox_probe *p, unsigned required);

/* ---- limits ------------------------------------------------------------------------------- */

struct vg_code_limits {
    size_t code_bytes;   /* 50 KB */
    int wall_ms;         /* 60000 */
    int cpu_ms;          /* 30000 (rounded up to whole seconds by RLIMIT_CPU) */
    size_t memory_bytes; /* 256 MiB: the Lua heap; the address space gets this plus the image */
    size_t output_bytes; /* 1 MiB, then truncated with a marker */
    int tool_calls;      /* 25 bridge calls of host tools */
    size_t file_bytes;   /* 16 MiB: largest file written (RLIMIT_FSIZE and bridge writes) */
    int fds;             /* 16 descriptors */
    size_t dir_bytes;    /* 256 MiB: the working directory's total, as vg_sandbox_dir_cost counts */
};
void vg_code_limits_default(struct vg_code_limits *l);
/* Overlay the keys present in obj ("code_bytes", "wall_ms", ...) on l; EINVAL names a bad one. */
vigil_code vg_code_limits_from_json(const json_t *obj, struct vg_code_limits *l, vigil_error *err);

/* The Lua heap's own arena at most (lua_child.c); the address-space limit adds room for it. */
#define VG_LUA_ARENA_MAX (8u * 1024 * 1024)

/* ---- spawning a confined child (spawn.c, confine.c) --------------------------------------- */

struct vg_sandbox_spec {
    const char *workdir; /* existing directory: the child's cwd and only file tree */
    struct vg_code_limits lim;
    unsigned required;         /* layers that must be applied (refuse otherwise) */
    uid_t sandbox_uid;         /* host runs as root: the uid outside the namespace (65534) */
    int fd_in, fd_out, fd_err; /* become the child's 0, 1 and 2; nothing else stays open */
    /* Bytes received with the request after the early layers measured the mapping (a spare's
     * payload): counted in the address-space limit beside what was mapped then. */
    size_t received_bytes;
    /* A runtime's own set of layers in place of vg_sandbox_confine (the Deno adapter's); NULL:
     * the default. enter, when set, runs first, in the working directory while the child is
     * still the namespaces' root (0 or an errno). confine_user is for both. */
    int (*confine)(const struct vg_sandbox_spec *s, unsigned mask, const char **step);
    int (*enter)(const struct vg_sandbox_spec *s, unsigned mask);
    const void *confine_user;
};

struct vg_sandbox_child {
    pid_t pid;               /* also its process group */
    int pidfd;               /* readable when it exits; -1 when the kernel has no pidfd */
    int go_fd;               /* held open until the reap: the child checks the host still lives */
    unsigned applied;        /* layers applied */
    struct vg_sandbox_cg cg; /* its cgroup when applied has VG_SBX_CGROUP; removed at the reap */
    uint64_t from_zygote;    /* the zygote whose spare this was (its start's number), which
                              * waits to hear of its end; 0: not a zygote's */
};

/* The program the child runs once confined; its return value is the exit status. */
typedef int (*vg_sandbox_main_fn)(void *user);

/*
 * Start fn(user) in a new confined child. EUNSUPPORTED when a required layer is not offered
 * (the message names it). The child dies with the calling thread (PR_SET_PDEATHSIG): call from
 * a thread that outlives the execution.
 */
vigil_code vg_sandbox_spawn(const struct vg_sandbox_spec *s, vg_sandbox_main_fn fn, void *user,
                            struct vg_sandbox_child *out, vigil_error *err);
/*
 * The same, through the zygote (zygote.c) when the namespaces are applied: fn gets a copy of
 * payload (payload_len bytes, no pointers into the host) in a fresh child of the host, in its
 * own PID namespace and the zygote's user, mount, network and IPC namespaces. Much faster than
 * vg_sandbox_spawn; the same layers. Without namespaces it is vg_sandbox_spawn.
 */
vigil_code vg_sandbox_spawn_flat(const struct vg_sandbox_spec *s, vg_sandbox_main_fn fn,
                                 const void *payload, size_t payload_len,
                                 struct vg_sandbox_child *out, vigil_error *err);
/* The zygote's pid, -1 while there is none (none is started before the first execution). */
pid_t vg_sandbox_zygote_pid(void);
/* The spare the zygote keeps ready for the next execution (a child of the host, waiting for
 * its request), once the zygote has said its pid; -1 when there is no zygote. */
pid_t vg_sandbox_spare_pid(void);
/* The spare the zygote makes while that one waits (also a child of the host), once the zygote
 * has said its pid; -1 when there is no zygote. */
pid_t vg_sandbox_next_spare_pid(void);
/* 0 once the spare made after the ready one (vg_sandbox_next_spare_pid) has warmed, so that no
 * spare's making runs (what a request after a pause finds); -1 when there is no zygote. */
int vg_sandbox_next_spare_warm(void);
/* The execution of c, a zygote's spare, was answered (at the latest at its reap, which calls
 * this): the zygote may make the next spare without taking the execution's core (it holds that
 * making back until then). Once per child; a no-op for any other child. */
void vg_sandbox_zygote_answered(struct vg_sandbox_child *c);
/* What each spare runs before it waits for its request (warm(NULL)), so that the pages every
 * execution writes first are copied off its path; set once, before the first execution. */
void vg_sandbox_zygote_warm(vg_sandbox_main_fn warm);
/* Off an execution's path (the reaper thread, after each reap): with the cgroup layer, make
 * the spare's cgroup and place it there before its request. A no-op without a zygote. */
void vg_sandbox_zygote_prepare(void);
/* When the zygote has died: wait until its keeper has killed and reaped its spares and it. */
void vg_sandbox_zygote_settle(void);
/* SIGKILL the child's process group and the child. */
void vg_sandbox_kill(const struct vg_sandbox_child *c);
/* Reap the child (blocking); *status as waitpid's, *cpu_ms its CPU time. Closes the pidfd and
 * go_fd. */
void vg_sandbox_reap(struct vg_sandbox_child *c, int *status, int64_t *cpu_ms);
/* Kill the child now and reap it (and remove its cgroup) on the sandbox's reaper thread, so a
 * result goes back without waiting for the kernel to tear the process down; *c is emptied.
 * Nothing of the child runs once this returns: SIGKILL is sent before. */
void vg_sandbox_reap_later(struct vg_sandbox_child *c);
/* Wait until every child given to vg_sandbox_reap_later is reaped and its cgroup removed, and
 * a dead zygote's spares too (a daemon stopping, a check that no process is left). */
void vg_sandbox_reap_wait(void);
/* The CPU time pid has used so far into *ms: a child's, before its reap. 0 or an errno (one
 * that already exited may have no clock left). */
int vg_sandbox_cpu_ms(pid_t pid, int64_t *ms);

/* In the host, before a spawn (vg_sandbox_spawn calls it): compile the seccomp filter once.
 * 0 or an errno. */
int vg_sandbox_prepare(void);
/* In the child (confine.c): apply the layers in mask that act inside the process. Returns 0 or
 * the errno of the step that failed, whose name goes to *step. */
int vg_sandbox_confine(const struct vg_sandbox_spec *s, unsigned mask, const char **step);
/* In a zygote's spare, before its request: what every execution applies whatever its limits
 * (the fixed rlimits, no_new_privs, a first seccomp stage), so vg_sandbox_confine does only
 * the rest. 0 or an errno (its step's name in *step). */
int vg_sandbox_confine_early(unsigned mask, const char **step);

/* ---- the bridge (bridge.c) ---------------------------------------------------------------- */

/* The largest message either way: a file of 1 MiB base64-free in JSON, and some room. */
#define VG_BRIDGE_MAX_LINE (2u * 1024 * 1024 + 4096)

enum vg_bridge_op {
    VG_BRIDGE_BAD = 0,
    VG_BRIDGE_TOOL,   /* {"id":N,"op":"tool","name":S,"args":{...}} */
    VG_BRIDGE_READ,   /* {"id":N,"op":"read","path":S} */
    VG_BRIDGE_WRITE,  /* {"id":N,"op":"write","path":S,"data":S,"append":B} */
    VG_BRIDGE_LIST,   /* {"id":N,"op":"list","path":S} */
    VG_BRIDGE_REMOVE, /* {"id":N,"op":"remove","path":S} */
    VG_BRIDGE_FETCH,  /* {"id":N,"op":"fetch","url":S} */
    VG_BRIDGE_RESULT, /* {"op":"result","value":V}: the program's answer, last */
    VG_BRIDGE_ERROR   /* {"op":"error","code":S,"message":S}: the program failed, last */
};

/* One message from the child, checked for shape. */
struct vg_bridge_msg {
    enum vg_bridge_op op;
    json_int_t id;    /* request id (>= 0) */
    const char *name; /* tool name (borrowed from root) */
    const char *path; /* relative path; fetch: the URL */
    const char *data; /* write: the text */
    size_t data_len;
    int append;
    json_t *value;       /* tool args, result value (borrowed) */
    const char *code;    /* error code */
    const char *message; /* error message */
    json_t *root;        /* owned: vg_bridge_msg_release */
    char why[128];       /* VG_BRIDGE_BAD: what is wrong */
};
/* Parse one line (without its newline). Never fails hard: a bad line is VG_BRIDGE_BAD. */
enum vg_bridge_op vg_bridge_msg_parse(const char *line, size_t len, struct vg_bridge_msg *m);
void vg_bridge_msg_release(struct vg_bridge_msg *m);

/* Splits a byte stream into lines of at most VG_BRIDGE_MAX_LINE. */
struct vg_bridge_reader {
    char *buf;
    size_t len, cap;
    size_t consumed; /* the line handed out last, dropped at the next call */
    int overflow;    /* a line was longer than the cap: the stream is broken */
};
/* Append bytes; ENOMEM. */
vigil_code vg_bridge_reader_feed(struct vg_bridge_reader *r, const char *p, size_t n,
                                 vigil_error *err);
/* The next whole line (not NUL-terminated; valid until the next call) or 0. */
int vg_bridge_reader_next(struct vg_bridge_reader *r, const char **line, size_t *len);
void vg_bridge_reader_free(struct vg_bridge_reader *r);

/* Files under a directory (files.c): every path is resolved beneath dirfd at use (openat2
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), and a file with more than
 * one link is refused. Errors are bridge answers: code "denied", "not_found", "too_large",
 * "failed". */
json_t *vg_sandbox_file_read(int dirfd, const char *path, size_t max, char code[32], char msg[256]);
/* room, when not NULL, is what the folder may still grow (limits.dir_bytes less its usage): a
 * write that grows it past that is refused as "dir_limit", and each write or remove moves it by
 * what it added or freed. */
int vg_sandbox_file_write(int dirfd, const char *path, const char *data, size_t len, int append,
                          size_t max, long long *room, char code[32], char msg[256]);
json_t *vg_sandbox_file_list(int dirfd, const char *path, char code[32], char msg[256]);
int vg_sandbox_file_remove(int dirfd, const char *path, long long *room, char code[32],
                           char msg[256]);

/* What an entry of the working directory counts against limits.dir_bytes: a file its size in
 * 4 KiB blocks and at least one, anything else one block, so that a flood of empty files or
 * folders counts too. */
#define VG_SBX_DIR_BLOCK 4096LL
static inline long long vg_sandbox_dir_cost(long long size)
{
    return size <= VG_SBX_DIR_BLOCK
               ? VG_SBX_DIR_BLOCK
               : (size + VG_SBX_DIR_BLOCK - 1) / VG_SBX_DIR_BLOCK * VG_SBX_DIR_BLOCK;
}
/* The folder's usage (its entries at every depth, links not followed, the folder itself not
 * counted); the walk stops once it passes stop_above, so the answer is then only "more". */
long long vg_sandbox_dir_usage(const char *dir, long long stop_above);

/* ---- the code-runtime port ---------------------------------------------------------------- */

/* The host side of the bridge's tool calls: answer one call with a new JSON value (*result)
 * or an error (code and message filled, return nonzero). */
struct vg_code_host {
    int (*call_tool)(void *user, const char *tool, json_t *args, json_t **result, char code[32],
                     char msg[256]);
    void *user;
};

struct vg_code_request {
    const char *code;
    size_t code_len;
    const char *workdir;
    struct vg_code_limits lim;
    unsigned required;
    uid_t sandbox_uid;
    const struct vg_code_host *host; /* may be NULL: tool calls are refused */
    const json_t *fetch_policy;      /* sandbox.fetch (fetch.h); NULL: fetch is refused */
    /* Optional: non-zero once the host stops for good (a daemon past its grace period): the
     * child is killed at once, checked at least once a second, and the answer is
     * "interrupted" instead of the program waiting out its wall-time limit. */
    const volatile int *halt;
    /* Optional: non-zero once a person cancelled the run the execution is a tool call of
     * (vg_tool_request.cancelled), asked about once a second: the child's process group is
     * killed and the answer is "canceled". */
    int (*cancelled)(void *user);
    void *cancelled_user;
};

/*
 * What came of one execution. ok = 1: result holds the program's value (JSON null when it
 * returned nothing). ok = 0: error_code is one of code_too_large, syntax_error, runtime_error,
 * timeout, cpu_limit, memory_limit, tool_limit, dir_limit, process_limit, fd_limit,
 * sandbox_violation, sandbox_unavailable, bridge_error, interrupted (the host stopped it:
 * vg_code_request.halt), canceled (its run was cancelled: vg_code_request.cancelled);
 * error_message says what to change.
 */
struct vg_code_result {
    int ok;
    char error_code[32];
    char error_message[512];
    json_t *result; /* owned */
    char *output;   /* owned, NUL-terminated: what the program printed */
    size_t output_len;
    int output_truncated;
    int tool_calls;
    unsigned layers; /* applied */
    int64_t wall_ms, cpu_ms;
    /* With the cgroup layer, its counters at the end (struct vg_sandbox_cg). */
    long long cg_memory_hits, cg_oom_kills, cg_pids_refused, cg_memory_peak;
    /* What was refused, each {op, target?, code, reason}: bridge requests answered with an
     * error, the bridge's abuse, a forbidden system call. The first VG_CODE_MAX_REFUSALS. */
    json_t *refusals;
    int refusals_total;
};
#define VG_CODE_MAX_REFUSALS 64
void vg_code_result_release(struct vg_code_result *r);
/* {"ok":..., "result"|"error":..., "output":..., "output_truncated", "layers":[...], ...}. */
json_t *vg_code_result_json(const struct vg_code_result *r);

struct vg_code_runtime;
struct vg_code_runtime_methods {
    const char *name; /* "lua" */
    /* Run one program. A program's failure is an answer (r->ok = 0); the return value reports
     * only the host's own breakage (ENOMEM, EIO). */
    vigil_code (*run)(struct vg_code_runtime *rt, const struct vg_code_request *q,
                      struct vg_code_result *r, vigil_error *err);
    void (*destroy)(struct vg_code_runtime *rt);
};
struct vg_code_runtime {
    const struct vg_code_runtime_methods *methods; /* must stay first */
};

/* The Lua 5.4 adapter (lua_runtime.c); a static instance, destroy is a no-op. */
struct vg_code_runtime *vg_code_runtime_lua(void);

/* The program a child runs, for an adapter whose child speaks the bridge on its 0, 1 and 2:
 * main runs confined (by confine, or vg_sandbox_confine when NULL). */
struct vg_code_child {
    vg_sandbox_main_fn main;
    void *user;
    int (*confine)(const struct vg_sandbox_spec *s, unsigned mask, const char **step);
    int (*enter)(const struct vg_sandbox_spec *s, unsigned mask);
    const void *confine_user;
    /* Non-zero: user is a flat payload of this many bytes (no pointers into the host), and the
     * zygote makes the child (vg_sandbox_spawn_flat); zero: the host forks it with user as is
     * (vg_sandbox_spawn), as the Deno adapter's exec needs. */
    size_t payload_len;
    /* The program writes files itself (Deno's file API), not only through the bridge: the host
     * measures the working directory during the run and at its end (limits.dir_bytes). */
    int direct_files;
    /* The child sends its seccomp filter's listener over its answer socket (descriptor 0)
     * before the program runs: a forbidden call comes to the host, which names it. */
    int syscall_listener;
};
/* The host's half of one execution (lua_runtime.c): spawn the child, answer its bridge, enforce
 * the limits, reap it. The code size is the caller's to check. */
vigil_code vg_code_exec(const struct vg_code_request *q, const struct vg_code_child *c,
                        struct vg_code_result *r, vigil_error *err);

/* The TypeScript adapter (deno_runtime.c): each execution a fresh `deno run` in the same
 * layers (docs/sandbox.md, "TypeScript"). deno is the binary's path; NULL: vg_deno_find's. */
struct vg_code_runtime *vg_code_runtime_deno(const char *deno);
/* The deno binary to use: $VIGIL_DENO, else `deno` on $PATH; NULL when neither is there. The
 * path is written into out. */
const char *vg_deno_find(char *out, size_t n);
/* Whether deno can run here: its version into version ("2.9.6") or why not into version. */
int vg_deno_version(const char *deno, char *version, size_t n);
vigil_code vg_code_run(struct vg_code_runtime *rt, const struct vg_code_request *q,
                       struct vg_code_result *r, vigil_error *err);

/* Every language name a program may be given in, for the messages that refuse another. */
#define VG_CODE_LANGUAGES "lua, typescript or javascript"
/* The adapter a language name runs under: "lua", or "typescript" for typescript and javascript
 * (Deno runs plain JavaScript as the TypeScript it is a subset of); NULL for another name. */
const char *vg_code_language_adapter(const char *name);

#endif
