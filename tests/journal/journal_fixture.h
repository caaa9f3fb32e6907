/*
 * journal_fixture.h: a store, a test clock and seeded ids for the journal tests, and a helper
 * that opens a run with a standard launch contract.
 */
#ifndef VG_JOURNAL_FIXTURE_H
#define VG_JOURNAL_FIXTURE_H

#include "helpers/test.h"

#include "journal/journal.h"
#include "os/clock.h"
#include "os/ids.h"
#include "helpers/fault_store.h"
#include "store/store.h"

#define FX_AGENT "0190aaaa-0000-7000-8000-000000000001"

struct fx {
    struct vg_test_clock clock;
    struct vg_ids *ids;
    struct vg_store *store;
    char path[4200];
};

/* Fresh store under a new temp dir named name; seed fixes the ids. */
void fx_open(struct fx *f, const char *name, uint64_t seed);
/* Close and reopen the store (a fresh "process" view of the same file). */
void fx_reopen(struct fx *f);
void fx_close(struct fx *f);
/* Put the fault wrapper (vg_store_fault_wrap) between the fixture and its store; returns it
 * for arming. */
struct vg_store *fx_wrap_faults(struct fx *f);
/* Open a run for agent with run key key. */
struct vg_run *fx_run(struct fx *f, const char *agent, const char *key);
/* Number of records of kind (any owner) in the store. */
int64_t fx_count(struct vg_store *s, const char *kind, const char *k1);

#endif
