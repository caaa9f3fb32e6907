/*
 * conformance.h: the store port's conformance suite. Every adapter (and every wrapper or
 * variation of one) runs the same behaviours through vg_store_conformance, given an opener that
 * makes fresh stores of that adapter.
 */
#ifndef VG_CONFORMANCE_STORE_H
#define VG_CONFORMANCE_STORE_H

#include "store/store.h"

struct vg_conf_opener {
    const char *label; /* printed with each case: "sqlite", "sqlite+fault", "postgres" */
    /* Open a store. fresh = 1: a new, empty store; fresh = 0: the last fresh one again (for
     * durability checks and for a second writer in a child process). */
    vigil_code (*open)(void *user, int fresh, struct vg_store **out, vigil_error *err);
    void *user;
};

/* Run every case; a failed assertion exits the process (test.h). */
void vg_store_conformance(const struct vg_conf_opener *op);

#endif
