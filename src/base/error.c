/*
 * error.c: the code table behind vigil_strerror and friends, and the helpers that fill a
 * vigil_error. The table is generated from VIGIL_CODE_LIST in vigil.h, the single source of
 * every code's name, text, HTTP status and exit status.
 */
#include "base/common.h"

#include <stdarg.h>

struct code_info {
    vigil_code code;
    const char *name;
    const char *text;
    int http;
    int exit_status;
};

static const struct code_info code_table[] = {
#define X(name, value, text, http, exit) {VIGIL_##name, #name, text, http, exit},
    VIGIL_CODE_LIST(X)
#undef X
};

static const struct code_info *code_find(vigil_code code)
{
    vigil_code category = (vigil_code)(code & 0xff);
    for (size_t i = 0; i < VG_ARRAY_LEN(code_table); i++)
        if (code_table[i].code == category)
            return &code_table[i];
    return NULL;
}

const char *vigil_strerror(vigil_code code)
{
    const struct code_info *ci = code_find(code);
    return ci ? ci->text : "unknown error code";
}

const char *vigil_code_name(vigil_code code)
{
    const struct code_info *ci = code_find(code);
    return ci ? ci->name : "UNKNOWN";
}

int vigil_code_http_status(vigil_code code)
{
    const struct code_info *ci = code_find(code);
    return ci ? ci->http : 500;
}

int vigil_code_exit_status(vigil_code code)
{
    const struct code_info *ci = code_find(code);
    return ci ? ci->exit_status : 1;
}

/* The detail's prefix that marks a model call's failure (vg_error_mark_provider). */
#define PROVIDER_MARK "model provider"
#define RUN_ID_NOTE "run_id="

/* The detail past a failed turn's run id, which vigil_chat puts first ("run_id=ID; ..."). */
static const char *past_run_id(const char *detail)
{
    size_t n = strlen(RUN_ID_NOTE) + 36;
    if (strncmp(detail, RUN_ID_NOTE, strlen(RUN_ID_NOTE)) || strlen(detail) < n)
        return detail;
    return detail + n + (strncmp(detail + n, "; ", 2) ? 0 : 2);
}

void vg_error_mark_provider(vigil_error *err)
{
    if (!err || !strncmp(past_run_id(err->detail), PROVIDER_MARK, strlen(PROVIDER_MARK)))
        return;
    char was[sizeof err->detail];
    snprintf(was, sizeof was, "%s", err->detail);
    snprintf(err->detail, sizeof err->detail, PROVIDER_MARK "%s%.200s", was[0] ? ": " : "", was);
}

int vigil_error_from_provider(const vigil_error *err)
{
    return err && err->code &&
           !strncmp(past_run_id(err->detail), PROVIDER_MARK, strlen(PROVIDER_MARK));
}

int vigil_error_http_status(const vigil_error *err)
{
    vigil_code code = err && err->code ? err->code : VIGIL_ERROR;
    if (!vigil_error_from_provider(err))
        return vigil_code_http_status(code);
    switch (code) {
    case VIGIL_ERATELIMIT:
        return 429;
    case VIGIL_EOVERLOAD:
        return 503;
    case VIGIL_ETIMEOUT:
        return 504;
    default:
        return 502;
    }
}

int vigil_error_exit_status(const vigil_error *err)
{
    vigil_code code = err && err->code ? err->code : VIGIL_ERROR;
    return vigil_error_from_provider(err) ? 9 : vigil_code_exit_status(code);
}

void vigil_error_clear(vigil_error *err)
{
    if (!err)
        return;
    err->code = VIGIL_OK;
    err->subcode = 0;
    err->message[0] = '\0';
    err->detail[0] = '\0';
}

vigil_code vg_error_set(vigil_error *err, vigil_code code, const char *file, int line,
                        const char *fmt, ...)
{
    if (!err)
        return code;
    err->code = code;
    err->subcode = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
#ifndef NDEBUG
    snprintf(err->detail, sizeof err->detail, "raised at %s:%d", file, line);
#else
    (void)file;
    (void)line;
    err->detail[0] = '\0';
#endif
    return code;
}

void vg_error_detail(vigil_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->detail, sizeof err->detail, fmt, ap);
    va_end(ap);
}

void vg_error_copy(vigil_error *dst, const vigil_error *src)
{
    if (!dst || !src || dst == src)
        return;
    memcpy(dst, src, sizeof *dst);
}

vigil_code vg_error_unless_missing(vigil_error *err, const vigil_error *miss, vigil_code rc)
{
    if (rc != VIGIL_OK && rc != VIGIL_ENOTFOUND)
        vg_error_copy(err, miss);
    return rc;
}

void vg_bug(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "vigil: BUG at %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

const char *vigil_version(void)
{
    return VIGIL_VERSION;
}

int vigil_version_number(void)
{
    return VIGIL_VERSION_NUMBER;
}
