/*
 * fault_store.h: a store adapter for tests that wraps another and fails the Nth port call with
 * a chosen code (fault_store.c). Test code: it lives in the test library, not in libvigil.
 */
#ifndef VG_TEST_FAULT_STORE_H
#define VG_TEST_FAULT_STORE_H

#include "store/store.h"

/* Wrap a store so that the nth port call from now fails with code (fault injection).
 * The wrapper owns inner and closes it. */
vigil_code vg_store_fault_wrap(struct vg_store *inner, struct vg_store **out, vigil_error *err);
void vg_store_fault_arm(struct vg_store *fault, long nth, vigil_code code);
long vg_store_fault_calls(struct vg_store *fault);
/* Count the scans and gets of records of `kind` (NULL: none) from now on, and at each arm: how
 * many. */
void vg_store_fault_watch(struct vg_store *fault, const char *kind);
long vg_store_fault_scans(struct vg_store *fault);
long vg_store_fault_gets(struct vg_store *fault);

#endif
