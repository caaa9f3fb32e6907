/*
 * alloc.c: the allocation wrappers and their allocator port. The port is read atomically: a
 * program may set it while other threads allocate.
 */
#include "base/common.h"

#include <jansson.h>
#include <stdatomic.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* The allocator port (alloc.h): NULL, the C library's, unless a program set one. */
static _Atomic(const struct vg_alloc_port *) port;

void vg_alloc_set_port(const struct vg_alloc_port *p)
{
    atomic_store(&port, p);
}

int vg_alloc_has_port(void)
{
    return atomic_load_explicit(&port, memory_order_relaxed) != NULL;
}

/* Allocations that returned NULL on this thread, injected or real (see vg_alloc_failures). */
static _Thread_local unsigned long thread_failures;

static void *counted(void *p)
{
    if (!p)
        thread_failures++;
    return p;
}

/* Unset (the normal case): one load (a plain one on x86), then the C library. */
void *vg_malloc(size_t n)
{
    const struct vg_alloc_port *p = atomic_load_explicit(&port, memory_order_acquire);
    n = n ? n : 1;
    return counted(p ? p->malloc(p->user, n) : malloc(n));
}

void *vg_calloc(size_t count, size_t size)
{
    const struct vg_alloc_port *p = atomic_load_explicit(&port, memory_order_acquire);
    count = count ? count : 1;
    size = size ? size : 1;
    return counted(p ? p->calloc(p->user, count, size) : calloc(count, size));
}

void *vg_realloc(void *ptr, size_t n)
{
    const struct vg_alloc_port *p = atomic_load_explicit(&port, memory_order_acquire);
    n = n ? n : 1;
    return counted(p ? p->realloc(p->user, ptr, n) : realloc(ptr, n));
}

void vg_alloc_release_free(void)
{
#ifdef __GLIBC__
    (void)malloc_trim(0);
#endif
}

/* Above glibc's per-thread cache (1,032 bytes) and its small bins (under 1,024): an allocation
 * from the large bins, the one that consolidates the fastbins first. */
#define SETTLE_SIZE 1100

void vg_alloc_settle_thread(void)
{
#ifdef __GLIBC__
    void *volatile block = malloc(SETTLE_SIZE); /* volatile: not a pair the compiler may drop */
    free(block);
#endif
}

unsigned long vg_alloc_failures(void)
{
    return thread_failures;
}

void vg_free(void *p)
{
    free(p);
}

char *vg_strdup(const char *s)
{
    return s ? vg_strndup(s, strlen(s)) : NULL;
}

char *vg_strndup(const char *s, size_t n)
{
    if (!s)
        return NULL;
    size_t len = strnlen(s, n);
    char *d = vg_malloc(len + 1);
    if (!d)
        return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

static void *json_malloc(size_t n)
{
    return vg_malloc(n);
}

void vg_alloc_install_json(void)
{
    json_set_alloc_funcs(json_malloc, vg_free);
}

void vigil_free(void *ptr)
{
    vg_free(ptr);
}
