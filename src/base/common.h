/*
 * common.h: included first by every .c file of vigil. It fixes the feature-test macros, pulls in
 * the public header and the few base helpers every module uses, and bans the C functions that
 * invite overflows (see banned.h).
 */
#ifndef VG_COMMON_H
#define VG_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VIGIL_BUILDING 1
#include "vigil.h"

#include "base/alloc.h"
#include "base/error.h"

#define VG_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* VG_ASAN: built with AddressSanitizer (gcc says so with a macro, clang through __has_feature). */
#if defined(__SANITIZE_ADDRESS__)
#define VG_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VG_ASAN 1
#endif
#endif
#define VG_MIN(a, b) ((a) < (b) ? (a) : (b))
#define VG_MAX(a, b) ((a) > (b) ? (a) : (b))
#define VG_UNUSED(x) ((void)(x))

/* "<a><sep><b>" into out (size bytes with the NUL), what snprintf(out, size, "%s:%s", a, b)
 * makes for sep ':' without printf's cost: keys built on every store call. The length made, or
 * -1 when it does not fit (out then holds as much as fits). */
static inline int vg_join(char *out, size_t size, const char *a, char sep, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    if (na + 1 + nb >= size) {
        if (size)
            snprintf(out, size, "%s%c%s", a, sep, b);
        return -1;
    }
    memcpy(out, a, na);
    out[na] = sep;
    memcpy(out + na + 1, b, nb + 1);
    return (int)(na + 1 + nb);
}

/* A status filter's word for the cancelled state, in the spelling `want` of the list it
 * filters: runs say "canceled", the wake log and tasks "cancelled", and a filter takes either
 * (trial C14 of session 30). Any other status comes back as it is. */
static inline const char *vg_cancel_spelling(const char *status, const char *want)
{
    if (status && (!strcmp(status, "canceled") || !strcmp(status, "cancelled")))
        return want;
    return status;
}

/* Length of a canonical UUID text without its NUL. */
#define VG_ID_LEN 36

#include "base/banned.h"

#endif
