/*
 * fuzz_manifest.c: arbitrary bytes as a manifest file, read as YAML or JSON (chosen by the
 * first byte) and validated; a manifest that reads is written back as YAML, which must read
 * again to the same manifest. Must never crash, hang or leak. Seeds: fuzz/corpus/manifest
 * (a first byte "0" for YAML, "1" for JSON).
 */
#include "base/common.h"

#include "manifest/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc = NULL, *again = NULL, *problems = json_array();
    vigil_error err = {0};
    if (size == 0 || !problems) {
        json_decref(problems);
        return 0;
    }
    vg_alloc_install_json();
    const char *name = data[0] & 1 ? "fuzz.json" : "fuzz.yaml";
    if (vg_manifest_parse((const char *)data + 1, size - 1, name, &doc, NULL, problems, &err) ==
        VIGIL_OK) {
        char *yaml = vg_manifest_to_yaml(doc);
        if (yaml && vg_manifest_parse(yaml, strlen(yaml), "again.yaml", &again, NULL, problems,
                                      &err) != VIGIL_OK)
            abort(); /* what export writes must read back */
        if (again && !json_equal(doc, again))
            abort();
        vg_free(yaml);
    }
    json_decref(doc);
    json_decref(again);
    json_decref(problems);
    return 0;
}
