/* core/common/errmsg.h — the one-line error messages of the input parsers (configs, token files,
 * safetensors, sweep specs): format into the caller's buffer, and keep it one line. */
#ifndef MESHSWEEP_ERRMSG_H
#define MESHSWEEP_ERRMSG_H
#include <stddef.h>
/* vsnprintf into err (nothing when err is NULL or errlen 0) */
void errmsg_set(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* control characters a caller passed in (a model name, a path, a key with "\n" in it) become '?',
 * so the message cannot break into several lines */
void errmsg_one_line(char *err, size_t errlen);
#endif
