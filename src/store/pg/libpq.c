/*
 * libpq.c: loads libpq on first use (see libpq.h for why it is not linked).
 *
 * Loaded once per process under pthread_once and never unloaded: PGconn and PGresult values
 * must not outlive their library, and stores are opened and closed many times.
 */
#include "base/common.h"

#include "store/pg/libpq.h"

#include <dlfcn.h>
#include <pthread.h>

#define LIBPQ_DEFAULT "libpq.so.5" /* the soname Debian's libpq5 package installs */

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
struct vg_libpq vg_libpq;
static int loaded;
static char why[512]; /* the failure, repeated to every caller when loading failed */

/* One entry per member of struct vg_libpq: its symbol and where to store it. */
#define SYM(name) {#name, (void **)&vg_libpq.name}
static const struct {
    const char *name;
    void **slot;
} symbols[] = {
    SYM(PQconnectdb),    SYM(PQfinish),       SYM(PQstatus),         SYM(PQtransactionStatus),
    SYM(PQerrorMessage), SYM(PQdb),           SYM(PQsetNoticeProcessor), SYM(PQexec),
    SYM(PQexecParams),   SYM(PQresultStatus), SYM(PQresultErrorField), SYM(PQcmdStatus),
    SYM(PQcmdTuples),    SYM(PQntuples),      SYM(PQgetvalue),       SYM(PQgetisnull),
    SYM(PQclear),
};
#undef SYM

static void load(void)
{
    const char *file = getenv("VIGIL_LIBPQ");
    if (!file || !*file)
        file = LIBPQ_DEFAULT;
    void *lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(why, sizeof why,
                 "the PostgreSQL store needs libpq (%s); install it (apt-get install libpq5) or "
                 "set VIGIL_LIBPQ to its file",
                 e ? e : file);
        return;
    }
    for (size_t i = 0; i < VG_ARRAY_LEN(symbols); i++) {
        /* POSIX: a function pointer converts through void * (dlsym's own contract). */
        *symbols[i].slot = dlsym(lib, symbols[i].name);
        if (!*symbols[i].slot) {
            snprintf(why, sizeof why, "%s is not a usable libpq: it has no %s", file,
                     symbols[i].name);
            dlclose(lib);
            return;
        }
    }
    loaded = 1;
}

vigil_code vg_libpq_load(vigil_error *err)
{
    pthread_once(&load_once, load);
    return loaded ? VIGIL_OK : VG_FAIL(err, VIGIL_EUNSUPPORTED, "%s", why);
}
