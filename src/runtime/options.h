/*
 * options.h: reading a public option struct that carries its size (include/vigil.h, while vigil
 * is 0.x), so that programs built against an older or a newer layout keep working.
 */
#ifndef VG_RUNTIME_OPTIONS_H
#define VG_RUNTIME_OPTIONS_H

#include <stddef.h>

#include "vigil.h"

/*
 * The caller's options `in`, whose layout is `in_size` bytes (its size field), over `out`
 * (out_size bytes, this library's layout, filled with the defaults beforehand): the fields the
 * caller's layout has are copied, the others keep their defaults. EINVAL when in_size is below
 * first_size (the first layout that had a size field), naming `name`'s size field; EVERSION
 * when the caller set a field this library does not know (a newer layout).
 */
vigil_code vg_options_read(const void *in, size_t in_size, void *out, size_t out_size,
                           size_t first_size, const char *name, vigil_error *err);

#endif
