/*
 * output.c: what vigil prints is mostly text that agents, models, tools and manifests wrote, and
 * a terminal takes the control sequences in such text as orders: ESC ] 52 sets the clipboard,
 * ESC ] 0 the window title, ESC [ 2K and a carriage return erase what was shown (trial H2). So
 * stdout and stderr pass through a filter that writes every control character except newline
 * and tab visibly, as \u00XX: in text it reads as what it is, and inside a JSON string (where
 * jansson leaves only the C1 characters raw) it is the same character, escaped.
 */
#include "cli.h"

#include <errno.h>
#include <unistd.h>

struct filtered_fd {
    int fd;
    int held_c2; /* the last byte was 0xC2, the lead byte of a C1 character, not yet written */
};

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* C0 but newline and tab, and DEL (C1 characters are found by their lead byte 0xC2). */
static int is_c0_control(unsigned char ch)
{
    return (ch < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f;
}

static ssize_t filtered_write(void *cookie, const char *data, size_t size)
{
    struct filtered_fd *f = cookie;
    char out[1024];
    size_t n = 0;
    for (size_t i = 0; i < size; i++) {
        unsigned char ch = (unsigned char)data[i];
        if (n + 8 > sizeof out) {
            if (write_all(f->fd, out, n))
                return -1;
            n = 0;
        }
        if (f->held_c2 && ch >= 0x80 && ch <= 0x9f) { /* U+0080..U+009F: C1 */
            n += (size_t)snprintf(out + n, sizeof out - n, "\\u%04x", ch);
            f->held_c2 = 0;
            continue;
        }
        if (f->held_c2)
            out[n++] = (char)0xc2;
        f->held_c2 = ch == 0xc2;
        if (is_c0_control(ch))
            n += (size_t)snprintf(out + n, sizeof out - n, "\\u%04x", ch);
        else if (!f->held_c2)
            out[n++] = (char)ch;
    }
    if (n && write_all(f->fd, out, n))
        return -1;
    return (ssize_t)size;
}

static int filtered_close(void *cookie)
{
    struct filtered_fd *f = cookie;
    if (f->held_c2)
        write_all(f->fd, "\xc2", 1);
    f->held_c2 = 0;
    return 0;
}

static FILE *unfiltered_stdout;

FILE *cli_unfiltered_stdout(void)
{
    return unfiltered_stdout ? unfiltered_stdout : stdout;
}

void cli_filter_output(void)
{
    static struct filtered_fd out = {STDOUT_FILENO, 0}, err = {STDERR_FILENO, 0};
    cookie_io_functions_t io = {.write = filtered_write, .close = filtered_close};
    int out_mode = isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF; /* as stdio buffers fd 1 itself */
    FILE *o = fopencookie(&out, "w", io), *e = fopencookie(&err, "w", io);
    if (o && !setvbuf(o, NULL, out_mode, BUFSIZ)) {
        fflush(stdout);
        unfiltered_stdout = stdout;
        stdout = o;
    }
    if (e && !setvbuf(e, NULL, _IONBF, 0))
        stderr = e;
}
