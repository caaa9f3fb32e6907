/*
 * confine.h: the pieces of confine.c that a runtime with its own confinement reuses (the Deno
 * adapter, deno_confine.c): the descriptors and environment step, one rlimit, the Landlock
 * ruleset with every right of the running ABI handled, and the seccomp allowlist every child
 * starts from.
 */
#ifndef VG_SANDBOX_CONFINE_H
#define VG_SANDBOX_CONFINE_H

#include "sandbox/sandbox.h"

#include <linux/filter.h>
#include <linux/landlock.h>
#include <sys/resource.h>

/* The build machine's header may predate the running kernel's ABI: the values are fixed. */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

/* What the working directory allows: read, write, make files and directories, remove, truncate. */
#define VG_SBX_LANDLOCK_WORKDIR                                                                    \
    (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_DIR |  \
     LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |                              \
     LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_TRUNCATE)

/* A ruleset handling every right the running ABI knows (*abi set); -errno when none. */
int vg_sandbox_landlock_open(int *abi);
/* Allow access (masked to the ABI's rights) beneath path, a directory or a file; 0 or errno. */
int vg_sandbox_landlock_allow(int rs, int abi, const char *path, uint64_t access);
/* soft = hard = v; 0 or errno. */
int vg_sandbox_set_limit(int which, rlim_t v);
/* fd_in/out/err become 0/1/2, every other descriptor is closed, the environment emptied. */
int vg_sandbox_settle_fds(const struct vg_sandbox_spec *s);

/* The finished BPF program of a libseccomp filter (a scmp_filter_ctx, released here; NULL: its
 * making failed) into *out: 0 or an errno. Done once in the host, loaded by each child. */
int vg_sandbox_export_filter(void *seccomp_ctx, struct sock_fprog *out);
/* In the child: load f (compile_err: why it is missing, if it is); 0 or an errno. */
int vg_sandbox_load_filter(const struct sock_fprog *f, int compile_err);

/* The system calls every child may make (the Lua allowlist, without mmap/mprotect/rt_sigaction,
 * which carry conditions). */
extern const int vg_sandbox_base_calls[];
extern const size_t vg_sandbox_base_call_count;

#endif
