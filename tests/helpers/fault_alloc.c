/*
 * fault_alloc.c: the failing allocator port of fault_alloc.h.
 */
#include "base/common.h"

#include "helpers/fault_alloc.h"

#include <stdatomic.h>

static atomic_long alloc_count;
static atomic_long fail_at;
static atomic_int fail_sticky;
static atomic_int fail_happened;

static int should_fail(void)
{
    long target = atomic_load(&fail_at);
    long n = atomic_fetch_add(&alloc_count, 1) + 1;
    if (n == target || (n > target && atomic_load(&fail_sticky))) {
        atomic_store(&fail_happened, 1);
        return 1;
    }
    return 0;
}

static void *fault_malloc(void *user, size_t n)
{
    (void)user;
    return should_fail() ? NULL : malloc(n);
}

static void *fault_calloc(void *user, size_t count, size_t size)
{
    (void)user;
    return should_fail() ? NULL : calloc(count, size);
}

static void *fault_realloc(void *user, void *p, size_t n)
{
    (void)user;
    return should_fail() ? NULL : realloc(p, n);
}

static const struct vg_alloc_port fault_port = {
    .malloc = fault_malloc, .calloc = fault_calloc, .realloc = fault_realloc};

void vg_alloc_fail_at(long n, int sticky)
{
    vg_alloc_set_port(NULL);
    atomic_store(&alloc_count, 0);
    atomic_store(&fail_happened, 0);
    atomic_store(&fail_sticky, sticky);
    atomic_store(&fail_at, n);
    if (n > 0)
        vg_alloc_set_port(&fault_port);
}

long vg_alloc_count(void)
{
    return atomic_load(&alloc_count);
}

int vg_alloc_failed(void)
{
    return atomic_load(&fail_happened);
}
