/*
 * alloc.c: the allocation wrappers and their fault-injection hook. The counters are atomics so
 * that threads allocating at once still count exactly; injection is meant for single-threaded
 * torture tests.
 */
#include "base/common.h"

#include <jansson.h>
#include <stdatomic.h>

static atomic_long alloc_count;
static atomic_long fail_at; /* 0: injection off */
static atomic_int fail_sticky;
static atomic_int fail_happened;

static int should_fail(void)
{
    /* Disarmed (the normal case): one relaxed load, no shared counter to contend on. */
    long target = atomic_load_explicit(&fail_at, memory_order_relaxed);
    if (target <= 0)
        return 0;
    long n = atomic_fetch_add(&alloc_count, 1) + 1;
    if (n == target || (n > target && atomic_load(&fail_sticky))) {
        atomic_store(&fail_happened, 1);
        return 1;
    }
    return 0;
}

/* Allocations that returned NULL on this thread, injected or real (see vg_alloc_failures). */
static _Thread_local unsigned long thread_failures;

static void *counted(void *p)
{
    if (!p)
        thread_failures++;
    return p;
}

void *vg_malloc(size_t n)
{
    return counted(should_fail() ? NULL : malloc(n ? n : 1));
}

void *vg_calloc(size_t count, size_t size)
{
    return counted(should_fail() ? NULL : calloc(count ? count : 1, size ? size : 1));
}

void *vg_realloc(void *p, size_t n)
{
    return counted(should_fail() ? NULL : realloc(p, n ? n : 1));
}

int vg_alloc_injecting(void)
{
    return atomic_load_explicit(&fail_at, memory_order_relaxed) > 0;
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

void vg_alloc_fail_at(long n, int sticky)
{
    atomic_store(&alloc_count, 0);
    atomic_store(&fail_happened, 0);
    atomic_store(&fail_sticky, sticky);
    atomic_store(&fail_at, n);
}

long vg_alloc_count(void)
{
    return atomic_load(&alloc_count);
}

int vg_alloc_failed(void)
{
    return atomic_load(&fail_happened);
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
