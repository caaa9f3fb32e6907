/*
 * banned.h: functions vigil never calls, because a bounded alternative exists (snprintf,
 * vg_buf, strtol). Using one fails to compile. Modeled on git's banned.h.
 */
#ifndef VG_BANNED_H
#define VG_BANNED_H

#define VG_BANNED(func) sorry_##func##_is_a_banned_function

#undef strcpy
#define strcpy(x, y) VG_BANNED(strcpy)
#undef strcat
#define strcat(x, y) VG_BANNED(strcat)
#undef strncpy
#define strncpy(x, y, n) VG_BANNED(strncpy)
#undef strncat
#define strncat(x, y, n) VG_BANNED(strncat)
#undef sprintf
#define sprintf(...) VG_BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) VG_BANNED(vsprintf)
#undef strtok
#define strtok(x, y) VG_BANNED(strtok)
#undef gets
#define gets(x) VG_BANNED(gets)
#undef atoi
#define atoi(x) VG_BANNED(atoi)
#undef atol
#define atol(x) VG_BANNED(atol)

#endif
