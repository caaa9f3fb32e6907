/*
 * fault_alloc.h: allocation failures on demand, for the torture tests: an allocator port
 * (base/alloc.h) that fails the Nth allocation. Test code: it lives in the test library, not in
 * libvigil.
 */
#ifndef VG_TEST_FAULT_ALLOC_H
#define VG_TEST_FAULT_ALLOC_H

/*
 * vg_alloc_fail_at(n): the nth allocation from now fails (1 is the next one), and so does every
 * later one while `sticky` is set; n = 0 takes the port away. vg_alloc_count() is the number of
 * allocations since the last vg_alloc_fail_at call (counted only while armed: arm with LONG_MAX
 * to count without failing), and vg_alloc_failed() tells whether an injected failure happened
 * since then. The counters are atomics, so threads allocating at once still count exactly;
 * which thread's allocation is the nth is up to the scheduler, so arm it in single-threaded
 * tests.
 */
void vg_alloc_fail_at(long n, int sticky);
long vg_alloc_count(void);
int vg_alloc_failed(void);

#endif
