/*
 * error.h: raising errors into a caller's vigil_error. VG_FAIL records the code and a formatted
 * message and evaluates to the code, so `return VG_FAIL(err, VIGIL_EINVAL, "bad x \"%s\"", x);`
 * works. In debug builds the origin (file:line) goes into err->detail when detail is empty.
 */
#ifndef VG_ERROR_H
#define VG_ERROR_H

#include <stdarg.h>

vigil_code vg_error_set(vigil_error *err, vigil_code code, const char *file, int line,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Set the detail text (the system call, statement or adapter message behind an error). */
void vg_error_detail(vigil_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Copy an error report (src may equal dst: no-op). */
void vg_error_copy(vigil_error *dst, const vigil_error *src);
/* Mark err as a model call's failure (vigil_error_from_provider): its detail is prefixed
 * "model provider". */
void vg_error_mark_provider(vigil_error *err);
/* For a lookup whose "not found" is an expected answer, made into a scratch report `miss`: a
 * real failure (rc neither VIGIL_OK nor VIGIL_ENOTFOUND) is copied into err, the miss is not, so
 * a call that succeeds leaves its caller's report untouched (vigil.h). Returns rc. */
vigil_code vg_error_unless_missing(vigil_error *err, const vigil_error *miss, vigil_code rc);

#define VG_FAIL(err, code, ...) vg_error_set((err), (code), __FILE__, __LINE__, __VA_ARGS__)

/* An internal invariant is broken: print and abort. Never for bad input or failed I/O. */
#define VG_BUG(...) vg_bug(__FILE__, __LINE__, __VA_ARGS__)
_Noreturn void vg_bug(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
