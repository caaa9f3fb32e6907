/*
 * alloc.h: every heap allocation of libvigil goes through these wrappers, so a program can put
 * its own allocator under them (the port below): the torture tests fail the Nth allocation
 * there and prove that each failure ends in a clean VIGIL_ENOMEM with no leak. jansson is
 * routed through them too (vg_alloc_install_json).
 */
#ifndef VG_ALLOC_H
#define VG_ALLOC_H

#include <stddef.h>

void *vg_malloc(size_t n);
void *vg_calloc(size_t count, size_t size);
void *vg_realloc(void *p, size_t n);
void vg_free(void *p);
char *vg_strdup(const char *s);
char *vg_strndup(const char *s, size_t n);

/*
 * The allocator port: while one is set, vg_malloc, vg_calloc and vg_realloc ask it instead of
 * the C library (sizes are never 0 by then). What it returns must be C-library heap memory or
 * NULL: vg_free frees it with free(), and it may outlive the port. libvigil sets none; the
 * torture tests set one that fails the Nth allocation (tests/helpers/fault_alloc.h). Set it
 * while no other thread depends on which allocator it gets; NULL goes back to the C library.
 */
struct vg_alloc_port {
    void *(*malloc)(void *user, size_t n);
    void *(*calloc)(void *user, size_t count, size_t size);
    void *(*realloc)(void *user, void *p, size_t n);
    void *user;
};
void vg_alloc_set_port(const struct vg_alloc_port *port);
/* Whether a port is set: a cache that hands out memory without vg_malloc steps aside, so the
 * port sees every allocation. */
int vg_alloc_has_port(void);

/*
 * How many allocations have returned NULL on this thread so far (injected or real). A caller
 * of a library that may swallow an allocation failure (jansson's parser drops the byte it
 * could not store) compares the count before and after the call.
 */
unsigned long vg_alloc_failures(void);

/*
 * Hands the C library's free heap pages back to the system (glibc's malloc_trim; nothing
 * elsewhere). Freed memory otherwise stays resident in the process: a closed runtime's (some
 * 8 MB after a hundred agents' turns) then lay under everything the process did later, its
 * libraries' exit handlers included (docs/internals/PERF.md, "Session 35").
 */
void vg_alloc_release_free(void);

/*
 * Settles the small blocks this thread freed (glibc: folds its arena's fastbins into the free
 * lists) now. glibc does that at the thread's next allocation of 1 KiB or more, whenever it
 * comes: after a chat turn (thousands of small blocks freed) and an idle wait that left them
 * out of the cache, that was 15 to 200 us of the next request's time, before it reached its
 * route (docs/internals/PERF.md, session 39). A server thread calls it once its answer is out,
 * while they are still in the cache. Nothing elsewhere.
 */
void vg_alloc_settle_thread(void);

/* Route jansson's allocations through vg_malloc/vg_free. Idempotent. */
void vg_alloc_install_json(void);

#endif
