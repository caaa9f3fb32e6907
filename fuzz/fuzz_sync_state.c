/*
 * fuzz_sync_state.c: arbitrary bytes as a JSON array of two devices' shared states of an agent
 * (another device's sync payload is outside input). States that pass the check are merged both
 * ways: both fail or both results must pass the check, be equal (the merge is commutative), read
 * every field, and merging again must change nothing (idempotent). Must never crash, hang or leak.
 * Seeds: fuzz/corpus/sync_state.
 */
#include "base/common.h"

#include "sync/state.h"

#include <jansson.h>

static void read_every_field(const json_t *s)
{
    const char *field;
    json_t *writes;
    json_object_foreach (json_object_get(s, "fields"), field, writes)
        if (!vg_sync_state_value(s, field))
            abort(); /* a field that holds writes has a value */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vigil_error err = {0};
    json_t *pair = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    const json_t *a = json_array_get(pair, 0), *b = json_array_get(pair, 1);
    if (json_array_size(pair) == 2 && vg_sync_state_check(a, &err) == VIGIL_OK &&
        vg_sync_state_check(b, &err) == VIGIL_OK) {
        json_t *ab = json_deep_copy(a), *ba = json_deep_copy(b);
        if (!ab || !ba)
            abort();
        vigil_code x = vg_sync_state_merge(ab, b, &err), y = vg_sync_state_merge(ba, a, &err);
        if ((x == VIGIL_OK) != (y == VIGIL_OK))
            abort(); /* a conflict or a cap is found whichever side merges */
        if (x == VIGIL_OK) {
            if (vg_sync_state_check(ab, &err) || !json_equal(ab, ba))
                abort();
            read_every_field(ab);
            json_t *again = json_deep_copy(ab);
            if (!again || vg_sync_state_merge(again, ba, &err) || !json_equal(again, ab))
                abort();
            json_decref(again);
        }
        json_decref(ab);
        json_decref(ba);
    }
    json_decref(pair);
    return 0;
}
