/*
 * fuzz_timer_spec.c: libFuzzer target for the timer schedule parser (user input from
 * `vigil timer add` and the API): RRULE, cron and one-shot times in arbitrary IANA zone names,
 * then next-run computation from a few instants, and the token classifier on the same bytes.
 * Input: byte 0 picks the kind, bytes up to the first newline are the zone, the rest the rule.
 */
#include "base/common.h"

#include "wake/wake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char tz[80], text[700];
    struct vg_timer_spec s;
    vigil_error err = {0};
    if (size < 2 || size > 600)
        return 0;
    enum vg_timer_kind kind = (enum vg_timer_kind)(data[0] % 3);
    const uint8_t *nl = memchr(data + 1, '\n', size - 1);
    size_t tz_len = nl ? (size_t)(nl - data - 1) : 0;
    if (tz_len >= sizeof tz)
        return 0;
    memcpy(tz, data + 1, tz_len);
    tz[tz_len] = '\0';
    size_t off = nl ? (size_t)(nl - data) + 1 : 1;
    memcpy(text, data + off, size - off);
    text[size - off] = '\0';
    if (strlen(tz) != tz_len || strlen(text) != size - off)
        return 0; /* embedded NULs cannot come through the C API */
    (void)vg_token_classify(text);
    static const int64_t anchors[] = {0, 1767225600000, 1774746000000 /* DST change */,
                                      4102444800000};
    if (vg_timer_spec_parse(&s, kind, text, tz_len ? tz : NULL, anchors[data[0] % 4], &err))
        return 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(anchors); i++) {
        int64_t at = anchors[i], next = 0;
        for (int k = 0; k < 3; k++) {
            int found = 0;
            if (vg_timer_spec_next(&s, at, &next, &found, &err) || !found)
                break;
            if (next <= at)
                __builtin_trap(); /* the next run must lie strictly after */
            at = next;
        }
    }
    return 0;
}
