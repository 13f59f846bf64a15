/* tests/check.h — the tiny harness every C test uses. Each CHECK prints one line:
 *   "ok   <name>"  or  "FAIL <name>: <why>"  (or "skip <name>: <why>")
 * tests/run.sh counts those lines across all tests and prints "N passed, N failed".
 * A test program exits 1 if any check failed. */
#ifndef MESHSWEEP_CHECK_H
#define MESHSWEEP_CHECK_H
#include <stdio.h>
#include <stdarg.h>
static int check_failed_ = 0, check_passed_ = 0;
static inline void check_(int cond, const char *name, const char *fmt, ...) {
    if (cond) { printf("ok   %s\n", name); check_passed_++; }
    else {
        printf("FAIL %s: ", name);
        va_list ap; va_start(ap, fmt); vprintf(fmt, ap); va_end(ap);
        printf("\n"); check_failed_++;
    }
    fflush(stdout);
}
#define CHECK(cond, name, ...) check_((cond), (name), __VA_ARGS__)
static inline void skip_(const char *name, const char *why) { printf("skip %s: %s\n", name, why); fflush(stdout); }
#define SKIP(name, why) skip_((name), (why))
static inline int check_exit(void) { return check_failed_ ? 1 : 0; }
#endif
