/*
 * journal.c: an agent's run journals over HTTP, as `vigil journal export|import`
 * (docs/runs.md): GET /v1/agents/{agent}/journal answers the export file's bytes
 * (application/x-ndjson, one JSON record a line: what `vigil journal export` writes), and POST
 * takes such a file as its body and imports it (the whole file is checked first; a bad line
 * refuses it whole and writes nothing; records already stored are skipped). The library reads
 * and writes folders: each request gets a private temporary one (mode 0700, under $TMPDIR),
 * removed before the answer goes out.
 */
#include "base/common.h"

#include "http/http_int.h"
#include "http/mhd.h"
#include "os/fs.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#define JOURNAL_FILE_MAX ((size_t)1 << 30)

/* A private folder for one request's file: 0, or -1 with the answer in r. */
static int temp_folder(struct vg_req *r, char *dir, size_t n)
{
    const char *tmp = vg_os_getenv("TMPDIR");
    snprintf(dir, n, "%s/vigil-journal-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(dir))
        return 0;
    vg_req_error(r, VIGIL_EIO, "could not make a temporary folder for the journal");
    return -1;
}

/* The folder and what the library put in it (agent-journals/ and its files) removed. */
static void temp_remove(const char *dir)
{
    char sub[4200], path[4600];
    snprintf(sub, sizeof sub, "%s/agent-journals", dir);
    DIR *d = opendir(sub);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", sub, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(sub);
    rmdir(dir);
}

/* The journal file an export wrote into dir/agent-journals (beside it: the agent's own
 * records and the checksums, which this route does not send): its path into out, or -1. */
static int exported_file(const char *dir, char *out, size_t n)
{
    char sub[4200];
    int found = -1;
    snprintf(sub, sizeof sub, "%s/agent-journals", dir);
    DIR *d = opendir(sub);
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.' && found < 0 && strstr(e->d_name, ".interaction.jsonl"))
            found = snprintf(out, n, "%s/%s", sub, e->d_name) < (int)n ? 0 : -1;
    if (d)
        closedir(d);
    return found;
}

void vg_http_journal_export(struct vg_req *r)
{
    vigil_error err = {0};
    char dir[4096], file[4600], *text = NULL;
    size_t len = 0;
    int64_t count = 0;
    if (temp_folder(r, dir, sizeof dir))
        return;
    vigil_code rc = vigil_journal_export(r->rt, r->params[0], dir, &count, &err);
    if (!rc && exported_file(dir, file, sizeof file))
        rc = VG_FAIL(&err, VIGIL_EIO, "the export wrote no file");
    if (!rc)
        rc = vg_fs_read_file(file, JOURNAL_FILE_MAX, &text, &len, &err);
    temp_remove(dir);
    if (rc) {
        vg_req_fail(r, rc, &err);
        return;
    }
    struct MHD_Response *resp =
        MHD_create_response_from_buffer_with_free_callback(len, text, vg_free);
    if (!resp)
        vg_free(text);
    vg_req_respond(r, resp, "application/x-ndjson");
}

void vg_http_journal_import(struct vg_req *r)
{
    vigil_error err = {0};
    char dir[4096], file[4600];
    int64_t count = 0;
    const char *id = r->params[0];
    if (!r->raw_len) {
        vg_req_error(r, VIGIL_EINVAL,
                     "send an export as the body: one JSON record a line, as `vigil journal "
                     "export` writes it (GET of this route)");
        return;
    }
    if (strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") !=
        strlen(id)) {
        vg_req_error(r, VIGIL_EINVAL, "give the exported agent's id (the export's file name)");
        return;
    }
    if (temp_folder(r, dir, sizeof dir))
        return;
    snprintf(file, sizeof file, "%s/agent-journals", dir);
    vigil_code rc = mkdir(file, 0700) ? VG_FAIL(&err, VIGIL_EIO,
                                                "could not make a temporary folder for the journal")
                                      : VIGIL_OK;
    snprintf(file, sizeof file, "%s/agent-journals/%s.interaction.jsonl", dir, id);
    if (!rc)
        rc = vg_fs_write_file(file, r->raw, r->raw_len, &err);
    if (!rc)
        rc = vigil_journal_import(r->rt, id, dir, &count, &err);
    temp_remove(dir);
    if (rc) {
        vg_req_fail(r, rc, &err);
        return;
    }
    vg_req_value(r, 200, json_pack("{s:I}", "imported", (json_int_t)count));
}
