/*
 * libpq.c: libpq's functions, loaded on first use (libpq.h says why it is not linked).
 */
#include "base/common.h"

#include "os/dl.h"
#include "store/pg/libpq.h"

struct vg_libpq vg_libpq;

#define SYM(name)                                                                                  \
    {                                                                                              \
#name, (void **)&vg_libpq.name                                                             \
    }
static const struct vg_dl_symbol symbols[] = {
    SYM(PQconnectdb),
    SYM(PQfinish),
    SYM(PQstatus),
    SYM(PQtransactionStatus),
    SYM(PQerrorMessage),
    SYM(PQdb),
    SYM(PQsetNoticeProcessor),
    SYM(PQexec),
    SYM(PQexecParams),
    SYM(PQresultStatus),
    SYM(PQresultErrorField),
    SYM(PQcmdStatus),
    SYM(PQcmdTuples),
    SYM(PQntuples),
    SYM(PQgetvalue),
    SYM(PQgetisnull),
    SYM(PQclear),
    SYM(PQreset),
    SYM(PQsocket),
    SYM(PQconsumeInput),
    SYM(PQnotifies),
    SYM(PQfreemem),
    SYM(PQenterPipelineMode),
    SYM(PQexitPipelineMode),
    SYM(PQpipelineSync),
    SYM(PQsendQueryParams),
    SYM(PQgetResult),
    SYM(PQsendPrepare),
    SYM(PQexecPrepared),
    SYM(PQsendQueryPrepared),
};
#undef SYM

static struct vg_dl_library libpq = {
    .file = "libpq.so.5", /* the soname Debian's libpq5 installs */
    .env = "VIGIL_LIBPQ",
    .needed = "the PostgreSQL store needs libpq",
    .package = "libpq5",
    .symbols = symbols,
    .n_symbols = VG_ARRAY_LEN(symbols),
};

vigil_code vg_libpq_load(vigil_error *err)
{
    return vg_dl_load(&libpq, err);
}
