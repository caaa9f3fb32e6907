/* deno.h: the TypeScript adapter's pieces (deno_runtime.c, deno_confine.c, deno_prelude.c). */
#ifndef VG_SANDBOX_DENO_H
#define VG_SANDBOX_DENO_H

#include "sandbox/sandbox.h"

/* What the confined child needs to become `deno run`: set up in the host before the spawn. */
struct vg_deno_child {
    const char *deno;    /* the binary, symlinks resolved */
    const char *interp;  /* its ELF interpreter (the dynamic loader), "" when static */
    const char *scratch; /* the execution's own folder: main.ts and vigil.ts, read-only */
    const char *work;    /* scratch/work: where the working directory is bind-mounted */
    char *const *argv;
    char *const *envp;
};

/* The confinement of a Deno child (deno_confine.c), in place of vg_sandbox_confine: the same
 * layers with the differences docs/sandbox.md lists. s->confine_user is a vg_deno_child. */
int vg_deno_confine(const struct vg_sandbox_spec *s, unsigned mask, const char **step);
/* Before the uid changes (vg_sandbox_spec.enter): bind the working directory on d->work. */
int vg_deno_enter(const struct vg_sandbox_spec *s, unsigned mask);
/* Compile the Deno seccomp filter once per host process: 0 or an errno. */
int vg_deno_prepare(void);

/* After an execution: a run that failed with a Deno panic or V8's fatal report in its output
 * has that report cut from r->output and said in one line (process_limit, fd_limit,
 * memory_limit, or "the TypeScript runtime aborted: ..."). Else, when deno ended without the
 * prelude's last word (r says "runtime_error: ... ended without a result"), read what it printed
 * last (r->output, the program's own output before it) for a parse error (syntax_error), V8 out
 * of memory (memory_limit) or its error line (runtime_error), one line with where in main.ts.
 * Anything else is left as it is. */
void vg_deno_classify_end(struct vg_code_result *r);

/* The prelude every program imports (deno_prelude.c): the `vigil` object over the bridge. */
extern const char vg_deno_prelude[];

#endif
