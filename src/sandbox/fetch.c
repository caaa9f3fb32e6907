/*
 * fetch.c: vigil.fetch, a URL fetched by the host for the program (the child has no network).
 * Only http and https; the host must be on sandbox.fetch.allow_hosts ("name", "*.suffix" or
 * "*"); every address the name resolves to must be public — loopback, link-local (the cloud
 * metadata service), private, carrier-grade NAT, unspecified, multicast, reserved, and any of
 * those embedded in an IPv6 address (mapped, compatible, NAT64, 6to4) are refused whatever the
 * URL's spelling, since the check is on the resolved address — unless the address is listed in
 * sandbox.fetch.allow_addresses. The connection goes to the address that was checked
 * (CURLOPT_RESOLVE pins it; the open-socket callback checks it again), so a second DNS answer
 * cannot rebind it; redirects are not followed by libcurl but checked and fetched hop by hop.
 * libcurl is used directly: the pinning and the socket check are this module's and the model
 * layer's wrapper (src/model/http.c) has no use for them.
 */
#include "base/common.h"

#include "os/clock.h"
#include "os/libcurl.h"
#include "sandbox/fetch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>

static int v4_refused(uint32_t a)
{
    static const uint32_t nets[][2] = {
        {0x00000000, 8},  {0x0A000000, 8},  {0x64400000, 10}, {0x7F000000, 8},  {0xA9FE0000, 16},
        {0xAC100000, 12}, {0xC0000000, 24}, {0xC0000200, 24}, {0xC0A80000, 16}, {0xC6120000, 15},
        {0xC6336400, 24}, {0xCB007100, 24}, {0xE0000000, 4},  {0xF0000000, 4}};
    for (size_t i = 0; i < VG_ARRAY_LEN(nets); i++) {
        uint32_t mask = nets[i][1] ? ~0u << (32 - nets[i][1]) : 0;
        if ((a & mask) == nets[i][0])
            return 1;
    }
    return 0;
}

static uint32_t v4_at(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static int v6_refused(const unsigned char *b)
{
    static const unsigned char zero[12] = {0};
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const unsigned char nat64[12] = {0, 0x64, 0xff, 0x9b};
    if (!memcmp(b, zero, 12) || !memcmp(b, mapped, 12) || !memcmp(b, nat64, 12))
        return v4_refused(v4_at(b + 12)) || !memcmp(b, zero, 12); /* ::, ::1, ::a.b.c.d */
    if (b[0] == 0x20 && b[1] == 0x02)                             /* 6to4 carries an IPv4 address */
        return v4_refused(v4_at(b + 2));
    if ((b[0] & 0xfe) == 0xfc || (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) ||
        (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) || b[0] == 0xff)
        return 1; /* unique local (fd00:ec2::254), link-local, site-local, multicast */
    if (b[0] == 0x20 && b[1] == 0x01 && ((b[2] == 0x0d && b[3] == 0xb8) || (!b[2] && !b[3])))
        return 1; /* documentation, Teredo */
    if (b[0] == 0x01 && !b[1] && !b[2] && !b[3] && !b[4] && !b[5] && !b[6] && !b[7])
        return 1; /* discard-only */
    return 0;
}

static int listed(const json_t *list, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach (list, i, v)
        if (json_is_string(v) && !strcasecmp(json_string_value(v), s))
            return 1;
    return 0;
}

int vg_fetch_address_refused(const struct sockaddr *sa, const json_t *allow_addresses)
{
    char text[INET6_ADDRSTRLEN] = "";
    int refused;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        refused = v4_refused(ntohl(in->sin_addr.s_addr));
        inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in = (const struct sockaddr_in6 *)sa;
        refused = v6_refused(in->sin6_addr.s6_addr);
        inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof text);
    } else {
        return 1;
    }
    return refused && !listed(allow_addresses, text);
}

int vg_fetch_host_allowed(const json_t *allow_hosts, const char *host)
{
    size_t i, n = strlen(host);
    json_t *v;
    json_array_foreach (allow_hosts, i, v) {
        const char *p = json_string_value(v);
        if (!p)
            continue;
        if (!strcmp(p, "*") || !strcasecmp(p, host))
            return 1;
        size_t m = strlen(p);
        if (m > 2 && p[0] == '*' && p[1] == '.' && n > m - 1 &&
            !strcasecmp(host + n - (m - 1), p + 1))
            return 1;
    }
    return 0;
}

/* ---- one fetch ---------------------------------------------------------------------------- */

struct fetch {
    const json_t *policy;
    char *body;
    size_t len, max;
    int too_large;
    char pin[600]; /* "host:port:address" for CURLOPT_RESOLVE */
    char code[32], msg[256];
    int64_t deadline_ns; /* 0: none; else no hop runs past it (the execution's wall time) */
};

static size_t on_body(char *p, size_t size, size_t n, void *user)
{
    struct fetch *f = user;
    size_t k = size * n;
    if (f->len + k > f->max) {
        f->too_large = 1;
        return 0;
    }
    char *b = vg_realloc(f->body, f->len + k + 1);
    if (!b)
        return 0;
    memcpy(b + f->len, p, k);
    f->body = b;
    f->len += k;
    return k;
}

/* The socket libcurl opens goes only to an address the policy allows (the pinned one). */
static curl_socket_t on_open_socket(void *user, curlsocktype purpose, struct curl_sockaddr *a)
{
    struct fetch *f = user;
    if (purpose != CURLSOCKTYPE_IPCXN ||
        vg_fetch_address_refused(&a->addr, json_object_get(f->policy, "allow_addresses")))
        return CURL_SOCKET_BAD;
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static int refuse(struct fetch *f, const char *code, const char *fmt, const char *arg)
{
    snprintf(f->code, sizeof f->code, "%s", code);
    snprintf(f->msg, sizeof f->msg, fmt, arg);
    return -1;
}

/* Check one URL: scheme, host on the list, every address public; pin the first one. */
static int check_url(struct fetch *f, const char *url)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL;
    int rc = 0;
    if (!u || curl_url_set(u, CURLUPART_URL, url, 0) ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) ||
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT))
        rc = refuse(f, "denied", "not a URL the sandbox fetches: %.200s", url);
    else if (strcmp(scheme, "http") && strcmp(scheme, "https"))
        rc = refuse(f, "denied", "only http and https: %.200s", url);
    else if (!vg_fetch_host_allowed(json_object_get(f->policy, "allow_hosts"), host))
        rc = refuse(f, "denied", "host %.200s is not on sandbox.fetch.allow_hosts", host);
    char name[300] = "";
    if (!rc) { /* an IPv6 literal comes bracketed */
        size_t n = strlen(host);
        snprintf(name, sizeof name, "%.*s", host[0] == '[' ? (int)n - 2 : (int)n,
                 host[0] == '[' ? host + 1 : host);
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (!rc && getaddrinfo(name, NULL, &hints, &res))
        rc = refuse(f, "failed", "cannot resolve %.200s", name);
    for (struct addrinfo *a = res; !rc && a; a = a->ai_next)
        if (vg_fetch_address_refused(a->ai_addr, json_object_get(f->policy, "allow_addresses")))
            rc = refuse(f, "denied",
                        "%.120s resolves to a loopback, private, link-local or "
                        "reserved address",
                        name);
    if (!rc) {
        char addr[INET6_ADDRSTRLEN] = "";
        const void *raw = res->ai_family == AF_INET
                              ? (const void *)&((struct sockaddr_in *)res->ai_addr)->sin_addr
                              : (const void *)&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr;
        inet_ntop(res->ai_family, raw, addr, sizeof addr);
        snprintf(f->pin, sizeof f->pin, "%s:%s:%s%s%s", host, port,
                 res->ai_family == AF_INET6 ? "[" : "", addr,
                 res->ai_family == AF_INET6 ? "]" : "");
    }
    if (res)
        freeaddrinfo(res);
    curl_free(scheme), curl_free(host), curl_free(port);
    curl_url_cleanup(u);
    return rc;
}

/* One hop: *status, and *next (owned) when it is a redirect. */
static int fetch_once(struct fetch *f, const char *url, long *status, char **next)
{
    CURL *h = curl_easy_init();
    struct curl_slist *pin = curl_slist_append(NULL, f->pin);
    char errbuf[CURL_ERROR_SIZE] = "";
    int64_t timeout = json_integer_value(json_object_get(f->policy, "timeout_ms"));
    if (timeout <= 0)
        timeout = 10000;
    if (f->deadline_ns) {
        int64_t left = (f->deadline_ns - vg_clock_mono_ns(vg_clock_real())) / 1000000;
        timeout = VG_MAX(VG_MIN(timeout, left), 1);
    }
    if (!h || !pin) {
        curl_slist_free_all(pin);
        curl_easy_cleanup(h);
        return refuse(f, "failed", "%s", "out of memory");
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_RESOLVE, pin);
    curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
    curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, f);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_PROXY, ""); /* never a proxy from the environment */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "vigil-sandbox/" VIGIL_VERSION);
    f->len = 0;
    CURLcode cc = curl_easy_perform(h);
    int rc = 0;
    char *loc = NULL;
    if (f->too_large)
        rc = refuse(f, "too_large", "the response is larger than %s", "sandbox.fetch.max_bytes");
    else if (cc != CURLE_OK)
        rc = refuse(f, "failed", "fetch failed: %.200s",
                    errbuf[0] ? errbuf : curl_easy_strerror(cc));
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    if (!rc && *status >= 300 && *status < 400 &&
        curl_easy_getinfo(h, CURLINFO_REDIRECT_URL, &loc) == CURLE_OK && loc)
        *next = vg_strdup(loc);
    curl_slist_free_all(pin);
    curl_easy_cleanup(h);
    return rc;
}

json_t *vg_sandbox_fetch(const json_t *policy, const char *url, char code[32], char msg[256])
{
    return vg_sandbox_fetch_until(policy, url, 0, code, msg);
}

json_t *vg_sandbox_fetch_until(const json_t *policy, const char *url, int64_t deadline_ns,
                               char code[32], char msg[256])
{
    struct fetch f = {.policy = policy, .deadline_ns = deadline_ns};
    int64_t max = json_integer_value(json_object_get(policy, "max_bytes"));
    int64_t hops = json_object_get(policy, "max_redirects")
                       ? json_integer_value(json_object_get(policy, "max_redirects"))
                       : 5;
    f.max = max > 0 ? (size_t)max : 1024 * 1024;
    char *cur = vg_strdup(url);
    long status = 0;
    json_t *out = NULL;
    vigil_error err = {0};
    int rc = cur ? 0 : refuse(&f, "failed", "%s", "out of memory");
    if (!rc && vg_libcurl_load(&err))
        rc = refuse(&f, "failed", "%s", err.message);
    for (int64_t hop = 0; !rc; hop++) {
        char *next = NULL;
        if ((rc = check_url(&f, cur)) || (rc = fetch_once(&f, cur, &status, &next)))
            break;
        if (!next)
            break;
        vg_free(cur);
        cur = next;
        if (hop + 1 > hops)
            rc = refuse(&f, "denied", "more than %s redirects", "sandbox.fetch.max_redirects");
    }
    if (!rc && !(out = json_pack("{s:i, s:s, s:s%}", "status", (int)status, "url", cur, "body",
                                 f.body ? f.body : "", f.len)))
        refuse(&f, "failed", "%s", "the response is not UTF-8 text");
    vg_free(cur);
    vg_free(f.body);
    if (!out) {
        snprintf(code, 32, "%s", f.code);
        snprintf(msg, 256, "%s", f.msg);
    }
    return out;
}

/* ---- a fetch on a thread of its own ------------------------------------------------------- */

struct vg_fetch_job {
    pthread_t thread;
    pthread_mutex_t lock;
    int ended, abandoned; /* under lock */
    json_t *policy;       /* a copy: the thread's own */
    char *url;
    int64_t deadline_ns;
    int done[2]; /* the thread writes one byte to done[1] when it ends */
    json_t *value;
    char code[32], msg[256];
};

static void job_free(struct vg_fetch_job *j)
{
    json_decref(j->policy);
    json_decref(j->value);
    vg_free(j->url);
    for (int i = 0; i < 2; i++)
        if (j->done[i] >= 0)
            close(j->done[i]);
    pthread_mutex_destroy(&j->lock);
    vg_free(j);
}

static void *fetch_thread(void *arg)
{
    struct vg_fetch_job *j = arg;
    j->value = vg_sandbox_fetch_until(j->policy, j->url, j->deadline_ns, j->code, j->msg);
    pthread_mutex_lock(&j->lock);
    j->ended = 1;
    int abandoned = j->abandoned;
    if (!abandoned) {
        char b = 1;
        ssize_t w = write(j->done[1], &b, 1);
        (void)w;
    }
    pthread_mutex_unlock(&j->lock);
    if (abandoned) /* nobody waits: the thread was detached and frees its own job */
        job_free(j);
    return NULL;
}

struct vg_fetch_job *vg_fetch_start(const json_t *policy, const char *url, int64_t deadline_ns)
{
    struct vg_fetch_job *j = vg_calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->done[0] = j->done[1] = -1;
    pthread_mutex_init(&j->lock, NULL);
    j->deadline_ns = deadline_ns;
    j->policy = json_deep_copy(policy);
    j->url = vg_strdup(url);
    if (!j->policy || !j->url || pipe2(j->done, O_CLOEXEC) ||
        pthread_create(&j->thread, NULL, fetch_thread, j)) {
        job_free(j);
        return NULL;
    }
    return j;
}

int vg_fetch_done_fd(const struct vg_fetch_job *j)
{
    return j->done[0];
}

json_t *vg_fetch_finish(struct vg_fetch_job *j, char code[32], char msg[256])
{
    pthread_join(j->thread, NULL);
    json_t *v = j->value;
    j->value = NULL;
    if (!v) {
        snprintf(code, 32, "%s", j->code);
        snprintf(msg, 256, "%s", j->msg);
    }
    job_free(j);
    return v;
}

void vg_fetch_abandon(struct vg_fetch_job *j)
{
    pthread_mutex_lock(&j->lock);
    j->abandoned = 1;
    int ended = j->ended;
    pthread_mutex_unlock(&j->lock);
    if (ended) {
        pthread_join(j->thread, NULL);
        job_free(j);
    } else {
        pthread_detach(j->thread);
    }
}
