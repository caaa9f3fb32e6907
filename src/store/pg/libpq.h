/*
 * libpq.h: the PostgreSQL client library, loaded when the first PostgreSQL store is opened.
 *
 * vigil does not link libpq. Debian's libpq pulls in Kerberos, LDAP, SASL and GnuTLS, whose
 * loading and start-up cost every process about 3 MB of resident memory and a few milliseconds,
 * and most processes (every one on the default SQLite store) never talk to PostgreSQL. So the
 * adapter reaches libpq through this table, filled by dlopen/dlsym on first use. The member
 * names are libpq's own, so the calls read as in libpq's documentation.
 */
#ifndef VG_STORE_PG_LIBPQ_H
#define VG_STORE_PG_LIBPQ_H

#include "base/error.h"

#include <libpq-fe.h>

struct vg_libpq {
    PGconn *(*PQconnectdb)(const char *conninfo);
    void (*PQfinish)(PGconn *conn);
    ConnStatusType (*PQstatus)(const PGconn *conn);
    PGTransactionStatusType (*PQtransactionStatus)(const PGconn *conn);
    char *(*PQerrorMessage)(const PGconn *conn);
    char *(*PQdb)(const PGconn *conn);
    PQnoticeProcessor (*PQsetNoticeProcessor)(PGconn *conn, PQnoticeProcessor proc, void *arg);
    PGresult *(*PQexec)(PGconn *conn, const char *query);
    PGresult *(*PQexecParams)(PGconn *conn, const char *command, int nParams, const Oid *paramTypes,
                              const char *const *paramValues, const int *paramLengths,
                              const int *paramFormats, int resultFormat);
    ExecStatusType (*PQresultStatus)(const PGresult *res);
    char *(*PQresultErrorField)(const PGresult *res, int fieldcode);
    char *(*PQcmdStatus)(PGresult *res);
    char *(*PQcmdTuples)(PGresult *res);
    int (*PQntuples)(const PGresult *res);
    char *(*PQgetvalue)(const PGresult *res, int tup_num, int field_num);
    int (*PQgetisnull)(const PGresult *res, int tup_num, int field_num);
    void (*PQclear)(PGresult *res);
    /* reconnecting and LISTEN (pg.c: lost connections, VG_STORE_CTRL_AWAIT_WORK) */
    void (*PQreset)(PGconn *conn);
    int (*PQsocket)(const PGconn *conn);
    int (*PQconsumeInput)(PGconn *conn);
    PGnotify *(*PQnotifies)(PGconn *conn);
    void (*PQfreemem)(void *ptr);
    /* pipeline mode (pg.c: a transaction's BEGIN goes with its first statement) */
    int (*PQenterPipelineMode)(PGconn *conn);
    int (*PQexitPipelineMode)(PGconn *conn);
    int (*PQpipelineSync)(PGconn *conn);
    int (*PQsendQueryParams)(PGconn *conn, const char *command, int nParams, const Oid *paramTypes,
                             const char *const *paramValues, const int *paramLengths,
                             const int *paramFormats, int resultFormat);
    PGresult *(*PQgetResult)(PGconn *conn);
    /* prepared statements (pg.c: a statement the connection sends again is parsed once) */
    int (*PQsendPrepare)(PGconn *conn, const char *stmtName, const char *query, int nParams,
                         const Oid *paramTypes);
    PGresult *(*PQexecPrepared)(PGconn *conn, const char *stmtName, int nParams,
                                const char *const *paramValues, const int *paramLengths,
                                const int *paramFormats, int resultFormat);
    int (*PQsendQueryPrepared)(PGconn *conn, const char *stmtName, int nParams,
                               const char *const *paramValues, const int *paramLengths,
                               const int *paramFormats, int resultFormat);
};

/* The table, filled by the first successful vg_libpq_load; not to be called before one. */
extern struct vg_libpq vg_libpq;

/*
 * Loads libpq into vg_libpq, or fails with VIGIL_EUNSUPPORTED when it is not installed or lacks
 * a function. Loads once per process; later calls give the same result. The library is
 * `libpq.so.5`, or the file named by the environment variable VIGIL_LIBPQ.
 */
vigil_code vg_libpq_load(vigil_error *err);

#endif
