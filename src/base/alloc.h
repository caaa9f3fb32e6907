/*
 * alloc.h: every heap allocation of libvigil goes through these wrappers, so the torture tests
 * can fail the Nth allocation and prove that each failure ends in a clean VIGIL_ENOMEM with no
 * leak. jansson is routed through them too (vg_alloc_install_json).
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
 * Fault injection (tests only). vg_alloc_fail_at(n): the nth allocation from now fails (1 is the
 * next one), and so does every later one while `sticky` is set; n = 0 turns injection off.
 * vg_alloc_count() is the number of allocations since the last vg_alloc_fail_at call (counted
 * only while armed: arm with LONG_MAX to count without failing), and
 * vg_alloc_failed() tells whether an injected failure happened since then.
 */
void vg_alloc_fail_at(long n, int sticky);
long vg_alloc_count(void);
int vg_alloc_failed(void);
/* Whether injection is armed: a cache that hands out memory without vg_malloc steps aside. */
int vg_alloc_injecting(void);

/*
 * How many allocations have returned NULL on this thread so far (injected or real). A caller
 * of a library that may swallow an allocation failure (jansson's parser drops the byte it
 * could not store) compares the count before and after the call.
 */
unsigned long vg_alloc_failures(void);

/* Route jansson's allocations through vg_malloc/vg_free. Idempotent. */
void vg_alloc_install_json(void);

#endif
