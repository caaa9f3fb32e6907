/*
 * mhd.c: libmicrohttpd's functions, loaded when the HTTP API starts (mhd.h says why it is not
 * linked).
 */
#include "base/common.h"

#include "http/mhd.h"
#include "os/dl.h"

struct vg_mhd vg_mhd;

/* The members are named without "MHD_": mhd.h's macros take libmicrohttpd's own names. */
#define SYM(member)                                                                                \
    {                                                                                              \
        "MHD_" #member, (void **)&vg_mhd.member                                                    \
    }
static const struct vg_dl_symbol symbols[] = {
    SYM(start_daemon),
    SYM(stop_daemon),
    SYM(get_daemon_info),
    SYM(get_connection_info),
    SYM(lookup_connection_value),
    SYM(suspend_connection),
    SYM(resume_connection),
    SYM(create_response_from_buffer),
    SYM(create_response_from_buffer_with_free_callback),
    SYM(create_response_from_callback),
    SYM(add_response_header),
    SYM(queue_response),
    SYM(destroy_response),
};
#undef SYM

static struct vg_dl_library libmhd = {
    .file = "libmicrohttpd.so.12", /* the soname Debian's libmicrohttpd12 installs */
    .env = "VIGIL_LIBMICROHTTPD",
    .needed = "the HTTP API needs libmicrohttpd",
    .package = "libmicrohttpd12",
    .symbols = symbols,
    .n_symbols = VG_ARRAY_LEN(symbols),
};

vigil_code vg_mhd_load(vigil_error *err)
{
    return vg_dl_load(&libmhd, err);
}
