/* spawn_int.h: what spawn.c shares with zygote.c inside src/sandbox. */
#ifndef VG_SANDBOX_SPAWN_INT_H
#define VG_SANDBOX_SPAWN_INT_H

#include "sandbox/sandbox.h"

#include <sched.h>

#define VG_SBX_INSIDE_ID 1000
#define VG_SBX_NS_FLAGS                                                                            \
    (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
#define VG_SBX_NS_LAYERS                                                                           \
    (VG_SBX_USERNS | VG_SBX_PIDNS | VG_SBX_MOUNTNS | VG_SBX_NETNS | VG_SBX_IPCNS)

/* One new process: cloned with ns_flags (when mask has userns) as the calling thread's child,
 * given its uid map, then confined with mask (when confine) before fn(user) runs. */
struct vg_sandbox_launch {
    const struct vg_sandbox_spec *s;
    unsigned mask;
    unsigned long ns_flags;
    int confine; /* 0: the zygote, which confines each child it makes instead */
    vg_sandbox_main_fn fn;
    void *user;
};
vigil_code vg_sandbox_launch(const struct vg_sandbox_launch *l, struct vg_sandbox_child *out,
                             vigil_error *err);

/* Refuse when a required layer is missing; *mask: the layers a run applies. Compiles the
 * seccomp filter and, as root, gives the working directory to the sandbox uid. */
vigil_code vg_sandbox_check_layers(const struct vg_sandbox_spec *s, unsigned *mask,
                                   vigil_error *err);

/* In the host, before the child c (its pid and applied set) runs untrusted code: make its
 * cgroup and place it there when applied has the cgroup layer. One that cannot be made is
 * dropped from applied, or is EUNSUPPORTED when s requires it. */
vigil_code vg_sandbox_cg_enter(const struct vg_sandbox_spec *s, struct vg_sandbox_child *c,
                               vigil_error *err);

/* When the child's cgroup could not be made or set up (e, an errno; 0: it was): the layer is
 * dropped from c->applied, or EUNSUPPORTED when s requires it. */
vigil_code vg_sandbox_cg_missing(const struct vg_sandbox_spec *s, struct vg_sandbox_child *c, int e,
                                 vigil_error *err);

/* In a child: say on descriptor 2 which step failed, and exit 125. */
_Noreturn void vg_sandbox_child_fail(const char *step, int e);

#endif
