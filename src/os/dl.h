/*
 * dl.h: libraries vigil loads when a feature first needs them rather than at start-up
 * (libpq for PostgreSQL stores, libical for timers): their dependencies cost every process
 * megabytes of memory that most processes never use. The caller describes the library and
 * the functions it needs; the first vg_dl_load opens it and fills the function table, and
 * every later call gives the same result. Libraries are never unloaded.
 */
#ifndef VG_OS_DL_H
#define VG_OS_DL_H

#include "base/common.h"

#include <stdatomic.h>

struct vg_dl_symbol {
    const char *name;
    void **slot; /* where the function's address goes */
};

struct vg_dl_library {
    const char *file;    /* the soname, e.g. "libpq.so.5" */
    const char *env;     /* an environment variable naming another file, or NULL */
    const char *needed;  /* what fails without it: "the PostgreSQL store needs libpq" */
    const char *package; /* the Debian package that installs it: "libpq5" */
    const struct vg_dl_symbol *symbols;
    size_t n_symbols;
    /* Run once when every function is found, before any other thread may call one (libcurl's
     * global init, which is not thread-safe), or NULL. Nonzero: the library cannot be used,
     * and start wrote why into lib->why. */
    int (*start)(struct vg_dl_library *lib);
    /* Nonzero: once started, the resident pages of the read-only segments of every library the
     * load mapped are handed back (os/pages.h): most were read once, by the loader and the
     * library's start, and the few used later come back from the page cache at their next use. */
    int release_pages;
    /* Set by vg_dl_load. */
    atomic_int state; /* 0 not tried, 1 loaded, -1 failed */
    char why[400];
};

/* Loads lib once per process (thread-safe); VIGIL_EUNSUPPORTED, saying what to install, when
 * the library cannot be opened, lacks a function or fails to start. Once loaded, a call costs
 * one atomic read, so a caller may call it before every use. */
vigil_code vg_dl_load(struct vg_dl_library *lib, vigil_error *err);

#endif
