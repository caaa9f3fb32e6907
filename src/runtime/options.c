/*
 * options.c: see options.h.
 */
#include "base/common.h"

#include "runtime/options.h"

vigil_code vg_options_read(const void *in, size_t in_size, void *out, size_t out_size,
                           size_t first_size, const char *name, vigil_error *err)
{
    if (in_size < first_size)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "%s.size is %zu, not the size of a layout this vigil (%s) knows (at least "
                       "%zu): set it to sizeof(%s), or fill the options with %s_default",
                       name, in_size, VIGIL_VERSION, first_size, name, name);
    for (size_t i = out_size; i < in_size; i++)
        if (((const unsigned char *)in)[i] != 0)
            return VG_FAIL(err, VIGIL_EVERSION,
                           "the %s set a field this vigil (%s) does not know: the program was "
                           "built for a newer one",
                           name, VIGIL_VERSION);
    memcpy(out, in, in_size < out_size ? in_size : out_size);
    return VIGIL_OK;
}
