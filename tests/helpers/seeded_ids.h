/*
 * seeded_ids.h: the tests' id source (src/os/ids.h): UUIDv7-shaped ids and random bytes drawn
 * from a seed (splitmix64), so a test with a test clock gets the same ids on every run. Not part
 * of libvigil, which makes these through vg_ids_uuid7_from with the test's randomness.
 */
#ifndef VG_SEEDED_IDS_H
#define VG_SEEDED_IDS_H

#include "os/ids.h"

#include <stdint.h>

/* Free with vg_ids_free. NULL when out of memory. */
struct vg_ids *vg_ids_seeded(struct vg_clock *clock, uint64_t seed);

#endif
