/*
 * deno_runtime.c: the TypeScript adapter of the code-runtime port. Each execution is a fresh
 * `deno run` in a confined child: the host writes the program (wrapped so a top-level `return`
 * gives its value) and the prelude (deno_prelude.c) into a scratch folder of its own, spawns the
 * child with the Deno variant of the layers (deno_confine.c), and the child execs deno with
 * permission flags that grant nothing but reading and writing the working directory. The host's
 * half is the Lua adapter's (vg_code_exec): the same bridge, the same limits, the same answers.
 */
#include "base/common.h"

#include "sandbox/deno.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct deno_runtime {
    struct vg_code_runtime base; /* must stay first */
    char deno[PATH_MAX];         /* "": found at each run (vg_deno_find) */
};

const char *vg_deno_find(char *out, size_t n)
{
    const char *env = getenv("VIGIL_DENO");
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return access(out, X_OK) == 0 ? out : NULL;
    }
    const char *path = getenv("PATH");
    while (path && *path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        snprintf(out, n, "%.*s/deno", (int)len, path);
        if (len && access(out, X_OK) == 0)
            return out;
        path = end ? end + 1 : NULL;
    }
    return NULL;
}

int vg_deno_version(const char *deno, char *version, size_t n)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC))
        return snprintf(version, n, "no pipe: %s", strerror(errno)), -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    char *argv[] = {(char *)deno, "--version", NULL};
    char *envp[] = {"NO_COLOR=1", "DENO_NO_UPDATE_CHECK=1", NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, deno, &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    char buf[256] = "";
    ssize_t got = rc ? -1 : read(p[0], buf, sizeof buf - 1);
    close(p[0]);
    int st = 0;
    if (!rc)
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
    if (rc || got <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) || strncmp(buf, "deno ", 5)) {
        snprintf(version, n, "%s did not run: %s", deno, rc ? strerror(rc) : "no version");
        return -1;
    }
    buf[got] = 0;
    snprintf(version, n, "%.*s", (int)strcspn(buf + 5, " \n"), buf + 5);
    return 0;
}

/* The ELF interpreter (the dynamic loader) deno asks for: Landlock must let it run too. */
static void elf_interp(const char *path, char *out, size_t n)
{
    *out = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    Elf64_Ehdr eh;
    if (fd < 0)
        return;
    if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh &&
        !memcmp(eh.e_ident, ELFMAG, SELFMAG) && eh.e_ident[EI_CLASS] == ELFCLASS64) {
        for (unsigned i = 0; i < eh.e_phnum; i++) {
            Elf64_Phdr ph;
            off_t at = (off_t)eh.e_phoff + (off_t)i * eh.e_phentsize;
            if (pread(fd, &ph, sizeof ph, at) != (ssize_t)sizeof ph)
                break;
            if (ph.p_type == PT_INTERP && ph.p_filesz < n) {
                ssize_t r = pread(fd, out, ph.p_filesz, (off_t)ph.p_offset);
                out[r > 0 ? (size_t)r : 0] = 0;
                out[n - 1] = 0;
                break;
            }
        }
    }
    close(fd);
}

/* ---- one execution ------------------------------------------------------------------------ */

struct deno_exec {
    char deno[PATH_MAX], interp[PATH_MAX], scratch[PATH_MAX], workdir[PATH_MAX];
    char work[PATH_MAX + 8]; /* scratch/work, the working directory as deno sees it */
    char main_path[PATH_MAX + 16];
    char allow_read[PATH_MAX + 32], allow_write[PATH_MAX + 32], v8_flags[96];
    char env_dir[PATH_MAX + 16], env_home[PATH_MAX + 16];
    char *argv[24];
    char *envp[8];
    struct vg_deno_child child;
};

static int child_main(void *user)
{
    const struct vg_deno_child *d = user;
    execve(d->deno, d->argv, d->envp);
    char msg[PATH_MAX + 64];
    int n =
        snprintf(msg, sizeof msg, "sandbox: could not start %s: %s\n", d->deno, strerror(errno));
    ssize_t w = write(2, msg, (size_t)VG_MIN(n, (int)sizeof msg - 1));
    (void)w;
    return 125;
}

static int write_scratch(struct deno_exec *e, const char *name, const char *a, size_t alen,
                         const char *b, size_t blen, const char *c)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/%s", e->scratch, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return errno;
    int rc = 0;
    const char *parts[3] = {a, b, c};
    size_t lens[3] = {alen, blen, c ? strlen(c) : 0};
    for (int i = 0; i < 3 && !rc; i++) {
        size_t off = 0;
        while (parts[i] && off < lens[i] && !rc) {
            ssize_t w = write(fd, parts[i] + off, lens[i] - off);
            rc = w < 0 ? (errno == EINTR ? 0 : errno) : 0;
            off += w > 0 ? (size_t)w : 0;
        }
    }
    close(fd);
    return rc;
}

static void remove_scratch(struct deno_exec *e)
{
    char path[PATH_MAX + 16];
    static const char *const names[] = {"main.ts", "vigil.ts"};
    for (size_t i = 0; i < VG_ARRAY_LEN(names); i++) {
        snprintf(path, sizeof path, "%s/%s", e->scratch, names[i]);
        unlink(path);
    }
    rmdir(e->work);
    rmdir(e->scratch);
}

/* The program goes on the wrapper's first line, so its line numbers are its own. */
static const char wrap_head[] = "import { run } from \"./vigil.ts\"; run(async () => {";
static const char wrap_tail[] = "\n});\n";

static vigil_code make_scratch(struct deno_exec *e, const struct vg_code_request *q,
                               vigil_error *err)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(e->scratch, sizeof e->scratch, "%s/vigil-deno-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(e->scratch))
        return VG_FAIL(err, VIGIL_EIO, "could not make a scratch folder for deno in %s: %s",
                       tmp && *tmp ? tmp : "/tmp", strerror(errno));
    /* Read by the child's uid, which is not the host's when the host is root. */
    int rc = chmod(e->scratch, 0755) ? errno : 0;
    snprintf(e->work, sizeof e->work, "%s/work", e->scratch);
    if (!rc && mkdir(e->work, 0755))
        rc = errno;
    if (!rc)
        rc = write_scratch(e, "vigil.ts", vg_deno_prelude, strlen(vg_deno_prelude), NULL, 0, NULL);
    if (!rc)
        rc = write_scratch(e, "main.ts", wrap_head, sizeof wrap_head - 1, q->code, q->code_len,
                           wrap_tail);
    if (rc) {
        remove_scratch(e);
        return VG_FAIL(err, VIGIL_EIO, "could not write the program for deno into %s: %s",
                       e->scratch, strerror(rc));
    }
    return VIGIL_OK;
}

static int probe_mountns(void)
{
    struct vg_sandbox_probe p;
    vg_sandbox_probe(&p);
    return (p.offered & VG_SBX_MOUNTNS) != 0;
}

static void build_command(struct deno_exec *e, const struct vg_code_request *q)
{
    snprintf(e->main_path, sizeof e->main_path, "%s/main.ts", e->scratch);
    /* With a mount namespace the working directory is bound on scratch/work (vg_deno_enter). */
    const char *dir = probe_mountns() ? e->work : e->workdir;
    snprintf(e->allow_read, sizeof e->allow_read, "--allow-read=%s", dir);
    snprintf(e->allow_write, sizeof e->allow_write, "--allow-write=%s", dir);
    snprintf(e->v8_flags, sizeof e->v8_flags, "--v8-flags=--jitless,--max-old-space-size=%zu",
             VG_MAX(q->lim.memory_bytes >> 20, (size_t)16));
    /* The seed's flags: nothing granted but the working directory; no config, lock file, remote
     * module, npm package or prompt; the rest denied outright. */
    char *argv[] = {e->deno,        "run",        "--quiet",       "--no-config", "--no-lock",
                    "--no-remote",  "--no-npm",   "--cached-only", "--no-prompt", "--deny-net",
                    "--deny-env",   "--deny-run", "--deny-ffi",    "--deny-sys",  e->allow_read,
                    e->allow_write, e->v8_flags,  e->main_path,    NULL};
    memcpy(e->argv, argv, sizeof argv);
    /* Deno's own caches point at the read-only scratch folder: it writes nothing anywhere. */
    snprintf(e->env_dir, sizeof e->env_dir, "DENO_DIR=%s", e->scratch);
    snprintf(e->env_home, sizeof e->env_home, "HOME=%s", e->scratch);
    char *envp[] = {e->env_dir, e->env_home, "NO_COLOR=1", "DENO_NO_UPDATE_CHECK=1", NULL};
    memcpy(e->envp, envp, sizeof envp);
    e->child = (struct vg_deno_child){.deno = e->deno,
                                      .work = e->work,
                                      .interp = e->interp,
                                      .scratch = e->scratch,
                                      .argv = e->argv,
                                      .envp = e->envp};
}

/* The answer is an error: code and message. */
#define FAIL(r, code, ...)                                                                         \
    ((r)->ok = 0, snprintf((r)->error_code, sizeof(r)->error_code, "%s", code),                    \
     snprintf((r)->error_message, sizeof(r)->error_message, __VA_ARGS__))

/* Where a dump of the runtime's own starts in the output (one of marks, at its line's start),
 * or NULL. */
static char *dump_start(char *out, const char *const *marks, size_t n)
{
    char *first = NULL;
    for (size_t i = 0; i < n; i++) {
        char *at = strstr(out, marks[i]);
        if (at && (!first || at < first))
            first = at;
    }
    while (first && first > out && first[-1] != '\n')
        first--;
    return first;
}

/* The line after "panicked at FILE:LINE:COL:" in a Rust panic report: what went wrong. */
static void panic_reason(const char *dump, char *why, size_t n)
{
    const char *at = strstr(dump, "panicked at ");
    const char *line = at ? strchr(at, '\n') : NULL;
    if (!line || !line[1]) {
        snprintf(why, n, "it was stopped before it said why");
        return;
    }
    snprintf(why, n, "%.*s", (int)VG_MIN(strcspn(line + 1, "\n"), (size_t)300), line + 1);
}

/* A Deno panic ("Deno has panicked. This is a bug in Deno ...", with vigil's paths and flags)
 * or V8's fatal report (the last collections, "Fatal JavaScript out of memory", a C stack) is
 * the runtime's, not the program's output: it is cut from the output and said in one line,
 * a thread or process cap as process_limit, the descriptor cap as fd_limit (trial E13).
 * Whether anything was cut. */
static int summarize_abort(struct vg_code_result *r)
{
    static const char *const panic[] = {"Deno has panicked"};
    static const char *const fatal[] = {"<--- Last few GCs --->", "# Fatal JavaScript",
                                        "# Fatal error in", "FATAL ERROR:"};
    if (r->ok || !r->output) /* a program that gave its answer printed what it printed */
        return 0;
    char *out = r->output, *p = dump_start(out, panic, 1), why[320] = "";
    char *f = dump_start(out, fatal, VG_ARRAY_LEN(fatal));
    if (p) /* the banner's rule of '=' comes first */
        while (p > out && (p[-1] == '=' || p[-1] == '\n'))
            p--;
    char *cut = p && (!f || p < f) ? p : f;
    if (!cut)
        return 0;
    int oom = f && (strstr(f, "out of memory") || strstr(f, "heap limit"));
    if (p)
        panic_reason(p, why, sizeof why);
    int threads = r->cg_pids_refused > 0 || strstr(why, "os error 11") ||
                  strstr(why, "Resource temporarily unavailable") || strstr(why, "spawn");
    int fds = strstr(why, "os error 24") || strstr(why, "Too many open files");
    while (cut > out && cut[-1] == '\n') /* the blank lines the report starts with */
        cut--;
    *cut = 0;
    r->output_len = (size_t)(cut - out);
    if (p && threads)
        FAIL(r, "process_limit",
             "the program started more threads than the sandbox allows (%d processes and threads "
             "in all; each Worker takes some): the TypeScript runtime aborted",
             VG_CG_MAX_PIDS);
    else if (p && fds)
        FAIL(r, "fd_limit",
             "the program opened more descriptors than the sandbox allows (limits.fds, at least 64 "
             "for TypeScript; each Worker takes some): the TypeScript runtime aborted");
    else if (oom)
        FAIL(r, "memory_limit", "the program used more memory than its limit");
    else if (p)
        FAIL(r, "runtime_error", "the TypeScript runtime aborted: %s", why);
    else
        FAIL(r, "runtime_error", "the TypeScript runtime aborted (V8 reported a fatal error)");
    return 1;
}

/* Deno ended without the prelude's last word: it could not parse the program (the prelude
 * never ran), or V8 ran out of its heap. Its own message is the last thing it printed; the
 * answer keeps its first line and where in main.ts it points. */
void vg_deno_classify_end(struct vg_code_result *r)
{
    if (summarize_abort(r))
        return;
    if (r->ok || strcmp(r->error_code, "runtime_error") ||
        !strstr(r->error_message, "ended without a result"))
        return;
    const char *out = r->output ? r->output : "";
    const char *said = strstr(out, "error: ");
    if (strstr(out, "out of memory") || strstr(out, "heap limit")) {
        FAIL(r, "memory_limit", "the program used more memory than its limit");
        return;
    }
    if (!said)
        return;
    said += 7;
    const char *at = strstr(said, "main.ts:");
    int line_len = (int)strcspn(said, "\n"), at_len = at ? (int)strcspn(at, " \n)") : 0;
    int syntax = strstr(said, "SyntaxError") || strstr(said, "parse");
    FAIL(r, syntax ? "syntax_error" : "runtime_error", "%.*s%s%.*s%s", VG_MIN(line_len, 400), said,
         at ? " (at " : "", VG_MIN(at_len, 64), at ? at : "", at ? ")" : "");
}

static vigil_code deno_prepare(struct deno_exec *e, struct deno_runtime *rt,
                               const struct vg_code_request *q, struct vg_code_result *r,
                               vigil_error *err)
{
    char found[PATH_MAX];
    const char *deno = *rt->deno ? rt->deno : vg_deno_find(found, sizeof found);
    if (!deno || !realpath(deno, e->deno)) {
        FAIL(r, "sandbox_unavailable",
             "deno was not found%s%.300s: install it (npm package deno) and set sandbox.deno or "
             "VIGIL_DENO to its path",
             deno ? " at " : "", deno ? deno : "");
        return VIGIL_OK;
    }
    if (!realpath(q->workdir, e->workdir))
        return VG_FAIL(err, VIGIL_EIO, "could not open the working directory %s: %s", q->workdir,
                       strerror(errno));
    elf_interp(e->deno, e->interp, sizeof e->interp);
    int fe = vg_deno_prepare();
    if (fe)
        return VG_FAIL(err, VIGIL_EIO, "could not compile the Deno seccomp filter: %s",
                       strerror(fe));
    return make_scratch(e, q, err);
}

static vigil_code deno_run(struct vg_code_runtime *base, const struct vg_code_request *q,
                           struct vg_code_result *r, vigil_error *err)
{
    memset(r, 0, sizeof *r);
    if (q->code_len > q->lim.code_bytes) {
        FAIL(r, "code_too_large", "the program is %zu bytes; the limit is %zu", q->code_len,
             q->lim.code_bytes);
        return VIGIL_OK;
    }
    struct deno_exec *e = vg_calloc(1, sizeof *e);
    if (!e)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting deno");
    vigil_code rc = deno_prepare(e, (struct deno_runtime *)base, q, r, err);
    if (rc || !*e->scratch) {
        vg_free(e);
        return rc;
    }
    build_command(e, q);
    struct vg_code_child c = {.main = child_main,
                              .user = &e->child,
                              .confine = vg_deno_confine,
                              .enter = vg_deno_enter,
                              .confine_user = &e->child,
                              .direct_files = 1,
                              .syscall_listener = 1};
    rc = vg_code_exec(q, &c, r, err);
    if (!rc)
        vg_deno_classify_end(r);
    remove_scratch(e);
    vg_free(e);
    return rc;
}

static void deno_destroy(struct vg_code_runtime *base)
{
    vg_free(base);
}

static const struct vg_code_runtime_methods deno_methods = {
    .name = "typescript", .run = deno_run, .destroy = deno_destroy};

struct vg_code_runtime *vg_code_runtime_deno(const char *deno)
{
    struct deno_runtime *rt = vg_calloc(1, sizeof *rt);
    if (!rt)
        return NULL;
    rt->base.methods = &deno_methods;
    if (deno)
        snprintf(rt->deno, sizeof rt->deno, "%s", deno);
    return &rt->base;
}
