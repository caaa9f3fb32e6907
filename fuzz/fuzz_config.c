/*
 * fuzz_config.c: arbitrary bytes as a config file, read as YAML or JSON (chosen by the first
 * byte), then every lookup kind on a few keys. Must never crash or leak.
 */
#include "base/common.h"

#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct vg_config *c = NULL;
    vigil_error err = {0};
    if (size == 0)
        return 0;
    const char *name = data[0] & 1 ? "fuzz.json" : "fuzz.yaml";
    if (vg_config_parse((const char *)data + 1, size - 1, name, &c, &err) != VIGIL_OK)
        return 0;
    const char *keys[] = {"model", "model.provider", "model.max_retries", "a.b.c", "", "."};
    for (size_t i = 0; i < VG_ARRAY_LEN(keys); i++) {
        (void)vg_config_get_string(c, keys[i], NULL);
        (void)vg_config_get_int(c, keys[i], 0);
        (void)vg_config_get_double(c, keys[i], 0);
        (void)vg_config_get_bool(c, keys[i], 0);
    }
    vg_config_free(c);
    return 0;
}
