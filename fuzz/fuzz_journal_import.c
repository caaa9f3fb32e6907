/*
 * fuzz_journal_import.c: arbitrary bytes as an agent-journals/<id>.interaction.jsonl file,
 * through the import validator (parse, registry validation, per-run fold). It must refuse or
 * accept cleanly: no crash, no leak, no undefined behaviour. Accepted inputs are validated a
 * second time line by line to check that the whole-file and single-record paths agree.
 */
#include "base/common.h"

#include "journal/journal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vigil_error err = {0};
    if (vg_journal_import_check((const char *)data, size, NULL, &err) != VIGIL_OK)
        return 0;
    /* Accepted: every line must also pass the single-record validator. */
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (vg_journal_validate_text(p, n, &err) != VIGIL_OK)
            VG_BUG("line accepted in a file but refused alone: %s", err.message);
        p += n + 1;
    }
    return 0;
}
