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

/* Length of a canonical UUID text without its NUL. */
#define VG_ID_LEN 36

#include "base/banned.h"

#endif
