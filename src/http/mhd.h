/*
 * mhd.h: libmicrohttpd for the daemon's HTTP API, loaded when `vigil serve` starts it. Include
 * it instead of <microhttpd.h>.
 *
 * The command does not link libmicrohttpd. Debian's is built with GnuTLS, which brings eight
 * more libraries (nettle, hogweed, gmp, p11-kit, libtasn1, libidn2, libunistring, libffi), about
 * 3 700 relocations and a constructor that initializes GnuTLS, all at the start of every
 * command, and only `vigil serve` with its HTTP API uses it. So the calls go through a table
 * filled by dlopen/dlsym (src/os/dl.h) in vg_http_start, before anything else of this module
 * can reach libmicrohttpd (every other call is made for a connection of the started server).
 * As in src/os/libcurl.h, each function keeps its name: a macro for the table's entry, and the
 * variadic MHD_start_daemon passes its option list through unchanged.
 */
#ifndef VG_HTTP_MHD_H
#define VG_HTTP_MHD_H

#include "base/error.h"

#include <microhttpd.h>

/* The functions the server calls, each typed as the installed header declares it. */
struct vg_mhd {
    __typeof__(MHD_start_daemon) *start_daemon;
    __typeof__(MHD_stop_daemon) *stop_daemon;
    __typeof__(MHD_get_daemon_info) *get_daemon_info;
    __typeof__(MHD_get_connection_info) *get_connection_info;
    __typeof__(MHD_lookup_connection_value) *lookup_connection_value;
    __typeof__(MHD_suspend_connection) *suspend_connection;
    __typeof__(MHD_resume_connection) *resume_connection;
    __typeof__(MHD_create_response_from_buffer) *create_response_from_buffer;
    __typeof__(MHD_create_response_from_buffer_with_free_callback)
        *create_response_from_buffer_with_free_callback;
    __typeof__(MHD_create_response_from_callback) *create_response_from_callback;
    __typeof__(MHD_add_response_header) *add_response_header;
    __typeof__(MHD_queue_response) *queue_response;
    __typeof__(MHD_destroy_response) *destroy_response;
};

/* The table, filled by the first successful vg_mhd_load; not to be called before one. */
extern struct vg_mhd vg_mhd;

/*
 * Loads libmicrohttpd into vg_mhd once per process (thread-safe), or fails with
 * VIGIL_EUNSUPPORTED, saying to install libmicrohttpd12, when it is not installed or lacks a
 * function. The library is `libmicrohttpd.so.12`, or the file named by VIGIL_LIBMICROHTTPD.
 */
vigil_code vg_mhd_load(vigil_error *err);

#define MHD_start_daemon vg_mhd.start_daemon
#define MHD_stop_daemon vg_mhd.stop_daemon
#define MHD_get_daemon_info vg_mhd.get_daemon_info
#define MHD_get_connection_info vg_mhd.get_connection_info
#define MHD_lookup_connection_value vg_mhd.lookup_connection_value
#define MHD_suspend_connection vg_mhd.suspend_connection
#define MHD_resume_connection vg_mhd.resume_connection
#define MHD_create_response_from_buffer vg_mhd.create_response_from_buffer
#define MHD_create_response_from_buffer_with_free_callback                                         \
    vg_mhd.create_response_from_buffer_with_free_callback
#define MHD_create_response_from_callback vg_mhd.create_response_from_callback
#define MHD_add_response_header vg_mhd.add_response_header
#define MHD_queue_response vg_mhd.queue_response
#define MHD_destroy_response vg_mhd.destroy_response

#endif
