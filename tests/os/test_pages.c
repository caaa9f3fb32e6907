/*
 * test_pages.c: the pages of libraries' read-only segments are handed back (src/os/pages.h):
 * after a release they are no longer resident, the library still works, and what it wrote
 * (its writable segments) is kept; libcurl's load releases what it and OpenSSL's start-up
 * touched, so the process keeps only its writable pages.
 */
#include "helpers/test.h"

#include "os/libcurl.h"
#include "os/pages.h"

#include <jansson.h>
#include <link.h>

/* The start addresses of the read-only segments (code, constants, tables) of the objects
 * whose path contains a name: a mapping of /proc/self/smaps that starts at one is one of them.
 * The RELRO part of a library's writable segment also reads r--p there, but its pages were
 * written and are never released. */
struct segments {
    const char *name;
    unsigned long starts[64];
    int n;
};

static int note_segments(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct segments *s = arg;
    if (!info->dlpi_name || !strstr(info->dlpi_name, s->name))
        return 0;
    for (int p = 0; p < info->dlpi_phnum && s->n < 64; p++)
        if (info->dlpi_phdr[p].p_type == PT_LOAD && !(info->dlpi_phdr[p].p_flags & PF_W))
            s->starts[s->n++] = (info->dlpi_addr + info->dlpi_phdr[p].p_vaddr) & ~4095UL;
    return 0;
}

/* Resident KiB of the read-only segments of the objects whose path contains name; -1 when none
 * is loaded. */
static long readonly_resident_kib(const char *name)
{
    struct segments s = {.name = name};
    dl_iterate_phdr(note_segments, &s);
    if (!s.n)
        return -1;
    FILE *f = fopen("/proc/self/smaps", "r");
    ASSERT(f != NULL);
    char line[1024];
    long kib = 0;
    int counting = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            counting = 0;
            for (int i = 0; i < s.n; i++)
                counting |= s.starts[i] == lo;
        } else if (counting && !strncmp(line, "Rss:", 4)) {
            kib += strtol(line + 4, NULL, 10);
        }
    }
    fclose(f);
    return kib;
}

/* At most what reading an object's program headers maps back: the page, and the neighbours the
 * kernel maps with a fault (64 KiB by default). */
#define LISTING_KIB 64

TEST(released_pages_leave_and_come_back_unchanged)
{
    /* jansson's hash seed lives in its writable data: were it lost, the keys below would no
     * longer be found. */
    json_t *o = json_object();
    char key[16];
    for (int i = 0; i < 64; i++) {
        snprintf(key, sizeof key, "k%d", i);
        ASSERT_EQ(json_object_set_new(o, key, json_integer(i)), 0);
    }
    long before = readonly_resident_kib("/libjansson.so");
    const char *const names[] = {"/libjansson.so", NULL};
    ASSERT(vg_release_library_pages(NULL, names) > 0);
    long after = readonly_resident_kib("/libjansson.so");
    fprintf(stderr, "libjansson's read-only pages: %ld KiB resident, %ld KiB after\n", before,
            after);
    /* What remains is the page of its program headers, which listing the segments reads. */
    ASSERT(after < before);
    ASSERT(after <= LISTING_KIB);
    for (int i = 0; i < 64; i++) {
        snprintf(key, sizeof key, "k%d", i);
        ASSERT_EQ(json_integer_value(json_object_get(o, key)), i);
    }
    json_decref(o);
    ASSERT(readonly_resident_kib("/libjansson.so") > 0); /* its code came back */
}

TEST(objects_listed_before_are_kept)
{
    struct vg_loaded_objects before;
    ASSERT_OK(vg_loaded_objects_list(&before, E));
    ASSERT(before.n > 1); /* the program, the C library, ... */
    json_t *o = json_pack("{s:i}", "a", 1);
    ASSERT(readonly_resident_kib("/libjansson.so") > 0);
    ASSERT_EQ(vg_release_library_pages(&before, NULL), 0);
    ASSERT(readonly_resident_kib("/libjansson.so") > 0);
    json_decref(o);
    vg_loaded_objects_free(&before);
}

/* What loading libcurl leaves resident of OpenSSL's libcrypto: with Debian's libcurl it is one
 * of the 32 libraries the load maps; with the static one it is linked, and started by
 * curl_global_init. Either way, 1.5 to 3 MB of its read-only pages were resident before. */
TEST(libcurl_keeps_little_of_what_its_load_touched)
{
    ASSERT_OK(vg_libcurl_load(E));
    long kib = readonly_resident_kib("/libcrypto.so");
    if (kib < 0) {
        fprintf(stderr, "skip: libcurl loads no libcrypto here\n");
        return;
    }
    ASSERT(kib <= LISTING_KIB);
    /* It still works: a handle made and a URL parsed (code that comes back as it runs). */
    CURL *c = curl_easy_init();
    ASSERT(c != NULL);
    ASSERT_EQ(curl_easy_setopt(c, CURLOPT_URL, "http://127.0.0.1:1/"), CURLE_OK);
    curl_easy_cleanup(c);
    ASSERT(curl_version_info(CURLVERSION_NOW)->version != NULL);
}

int main(void)
{
    RUN(released_pages_leave_and_come_back_unchanged);
    RUN(objects_listed_before_are_kept);
    RUN(libcurl_keeps_little_of_what_its_load_touched);
    return 0;
}
