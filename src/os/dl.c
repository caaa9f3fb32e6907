/*
 * dl.c: loading libraries on first use (dl.h). One mutex serializes every load: loads are
 * rare, and a library's table must be complete before any thread calls through it. A library
 * already loaded is seen without the mutex: its state is published with release order after
 * the table is filled, and read with acquire order.
 */
#include "base/common.h"

#include "os/dl.h"
#include "os/fs.h"
#include "os/pages.h"

#include <dlfcn.h>
#include <pthread.h>

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

/* before: the objects loaded before this one, whose pages are not released; NULL: release none. */
static void load_file(struct vg_dl_library *lib, const char *file,
                      const struct vg_loaded_objects *before)
{
    void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(lib->why, sizeof lib->why, "%s (%s); install it (apt-get install %s)%s%s%s",
                 lib->needed, e ? e : file, lib->package, lib->env ? " or set " : "",
                 lib->env ? lib->env : "", lib->env ? " to its file" : "");
        atomic_store_explicit(&lib->state, -1, memory_order_release);
        return;
    }
    for (size_t i = 0; i < lib->n_symbols; i++) {
        /* POSIX: a function's address converts through void * (dlsym's own contract). */
        *lib->symbols[i].slot = dlsym(h, lib->symbols[i].name);
        if (!*lib->symbols[i].slot) {
            snprintf(lib->why, sizeof lib->why, "%s: %s has no %s (another version?)", lib->needed,
                     file, lib->symbols[i].name);
            for (size_t j = 0; j < i; j++)
                *lib->symbols[j].slot = NULL; /* nothing points into the closed library */
            dlclose(h);
            atomic_store_explicit(&lib->state, -1, memory_order_release);
            return;
        }
    }
    /* Released twice, the loader's pages before the start's are touched: the process's peak is
     * then the larger of the two, not their sum. */
    if (before)
        vg_release_library_pages(before, NULL);
    /* A library that fails to start stays mapped: its start may have left threads or handlers
     * behind, so closing it is not safe. Its table is never called (state -1). */
    int ok = !lib->start || !lib->start(lib);
    if (ok && before)
        vg_release_library_pages(before, NULL);
    atomic_store_explicit(&lib->state, ok ? 1 : -1, memory_order_release);
}

static void load(struct vg_dl_library *lib)
{
    const char *file = lib->env ? vg_os_getenv(lib->env) : NULL;
    if (!file || !*file)
        file = lib->file;
    /* Without the list (out of memory) nothing is released: the pages only stay resident. */
    struct vg_loaded_objects before = {0};
    int release = lib->release_pages && vg_loaded_objects_list(&before, NULL) == VIGIL_OK;
    load_file(lib, file, release ? &before : NULL);
    vg_loaded_objects_free(&before);
}

vigil_code vg_dl_load(struct vg_dl_library *lib, vigil_error *err)
{
    if (atomic_load_explicit(&lib->state, memory_order_acquire) > 0)
        return VIGIL_OK;
    pthread_mutex_lock(&load_lock);
    if (!atomic_load_explicit(&lib->state, memory_order_relaxed))
        load(lib);
    int state = atomic_load_explicit(&lib->state, memory_order_relaxed);
    pthread_mutex_unlock(&load_lock);
    return state > 0 ? VIGIL_OK : VG_FAIL(err, VIGIL_EUNSUPPORTED, "%s", lib->why);
}
