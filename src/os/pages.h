/*
 * pages.h: handing back the resident pages of shared libraries that loading them touched once.
 *
 * Loading a library reads its symbol and relocation tables and runs its initialisers; OpenSSL's
 * start-up also reads its configuration and sets up its engines. Those pages stay resident in
 * the process for its life, though most are never used again: a program that only loads
 * Debian's libcurl and calls curl_global_init holds some 8 MB, of which a plain HTTP request
 * then uses about 0.6 MB (docs/internals/PERF.md, "Session 34"). The pages of a library's
 * read-only segments (its code, constants and tables) are the file's own, never written, so
 * they can be dropped from the process (madvise MADV_DONTNEED) and come back from the page
 * cache, unchanged, at their next use (a minor fault each). Writable segments (data, the GOT,
 * RELRO) are never touched, nor a library with text relocations (its code was written).
 *
 * One caveat: a debugger's breakpoint set in a released library before the release is lost
 * with its page (the page reads as the file again).
 */
#ifndef VG_OS_PAGES_H
#define VG_OS_PAGES_H

#include "base/common.h"

#include <stdint.h>

/* The shared objects loaded now, by load address, to tell later which ones a load added. */
struct vg_loaded_objects {
    uintptr_t *bases;
    size_t n;
};

/* Fills *out with the objects loaded now; ENOMEM. vg_loaded_objects_free frees it. */
vigil_code vg_loaded_objects_list(struct vg_loaded_objects *out, vigil_error *err);
void vg_loaded_objects_free(struct vg_loaded_objects *objects);

/* Releases the resident pages of the read-only segments of every shared object loaded now that
 * is not in before (NULL: none is excluded) and whose file name contains one of names (NULL:
 * any name; the main program and the kernel's vDSO are never released). Returns the bytes of
 * address space advised, resident or not. */
size_t vg_release_library_pages(const struct vg_loaded_objects *before, const char *const *names);

#endif
