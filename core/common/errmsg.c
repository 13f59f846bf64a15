/* core/common/errmsg.c — see errmsg.h. */
#include "core/common/errmsg.h"
#include <stdarg.h>
#include <stdio.h>

void errmsg_set(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

void errmsg_one_line(char *err, size_t errlen) {
    if (!err || errlen == 0) return;
    for (char *p = err; *p && (size_t)(p - err) < errlen; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
}
