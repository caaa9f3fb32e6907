/*
 * pages.c: releasing the pages of libraries' read-only segments (pages.h says why and which).
 */
#include "base/common.h"

#include "os/pages.h"

#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int add_base(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct vg_loaded_objects *out = arg;
    uintptr_t *grown = vg_realloc(out->bases, (out->n + 1) * sizeof *grown);
    if (!grown)
        return 1;
    out->bases = grown;
    out->bases[out->n++] = info->dlpi_addr;
    return 0;
}

vigil_code vg_loaded_objects_list(struct vg_loaded_objects *out, vigil_error *err)
{
    *out = (struct vg_loaded_objects){0};
    if (dl_iterate_phdr(add_base, out)) {
        vg_loaded_objects_free(out);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing the loaded libraries");
    }
    return VIGIL_OK;
}

void vg_loaded_objects_free(struct vg_loaded_objects *objects)
{
    vg_free(objects->bases);
    *objects = (struct vg_loaded_objects){0};
}

struct release {
    const struct vg_loaded_objects *before;
    const char *const *names;
    size_t advised;
};

static int listed(const struct vg_loaded_objects *objects, uintptr_t base)
{
    for (size_t i = 0; objects && i < objects->n; i++)
        if (objects->bases[i] == base)
            return 1;
    return 0;
}

static int name_matches(const char *const *names, const char *file)
{
    if (!names)
        return 1;
    for (; *names; names++)
        if (strstr(file, *names))
            return 1;
    return 0;
}

/* Whether the object's dynamic section says its code is relocated in place (written). */
static int has_text_relocations(const struct dl_phdr_info *info)
{
    for (int p = 0; p < info->dlpi_phnum; p++) {
        if (info->dlpi_phdr[p].p_type != PT_DYNAMIC)
            continue;
        const ElfW(Dyn) *d = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[p].p_vaddr);
        for (; d->d_tag != DT_NULL; d++)
            if (d->d_tag == DT_TEXTREL || (d->d_tag == DT_FLAGS && (d->d_un.d_val & DF_TEXTREL)))
                return 1;
    }
    return 0;
}

/* The end of the read-only range [start, end) cut back to the first page a writable segment of
 * the same object maps, should one begin inside it: that page may hold written data. */
static uintptr_t before_writable(const struct dl_phdr_info *info, uintptr_t start, uintptr_t end,
                                 uintptr_t page)
{
    for (int p = 0; p < info->dlpi_phnum; p++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[p];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W))
            continue;
        uintptr_t w = (info->dlpi_addr + ph->p_vaddr) & ~(page - 1);
        if (w >= start && w < end)
            end = w;
    }
    return end;
}

static int release_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct release *r = arg;
    const char *file = info->dlpi_name;
    /* The main program has no name here; the vDSO is not a file's pages. */
    if (!file || !*file || strstr(file, "linux-vdso") || listed(r->before, info->dlpi_addr) ||
        !name_matches(r->names, file) || has_text_relocations(info))
        return 0;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (int p = 0; p < info->dlpi_phnum; p++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[p];
        if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W))
            continue;
        uintptr_t start = (info->dlpi_addr + ph->p_vaddr) & ~(page - 1);
        uintptr_t end = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + page - 1) & ~(page - 1);
        end = before_writable(info, start, end, page);
        if (end <= start)
            continue;
        /* A failure (a locked page, say) leaves the pages resident, as they were. */
        if (madvise((void *)start, end - start, MADV_DONTNEED) == 0)
            r->advised += end - start;
    }
    return 0;
}

size_t vg_release_library_pages(const struct vg_loaded_objects *before, const char *const *names)
{
    struct release r = {.before = before, .names = names};
    dl_iterate_phdr(release_object, &r);
    return r.advised;
}
