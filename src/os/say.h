/*
 * say.h: a line on stderr for a person watching a long-running process (`vigil serve`), begun
 * with the wall time (UTC, milliseconds), so a log kept for months says when each thing
 * happened (trial G11). Under journald the time is there twice; a plain `> serve.log` has
 * no other.
 */
#ifndef VG_SAY_H
#define VG_SAY_H

/* fmt is printf's and ends with its own newline, as fprintf's would. */
void vg_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
