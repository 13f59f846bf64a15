/* core/common/parse.c — see parse.h. */
#include "core/common/parse.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int parse_size(const char *s, uint64_t *out) {
    if (!s || !*s) return -1;
    const char *p = s;
    uint64_t ip = 0, frac = 0, frac_scale = 1;
    int nd = 0;
    while (*p >= '0' && *p <= '9') {
        if (__builtin_mul_overflow(ip, 10u, &ip) || __builtin_add_overflow(ip, (uint64_t)(*p - '0'), &ip))
            return -1;
        p++, nd++;
    }
    if (*p == '.') {
        p++;
        int nf = 0;
        while (*p >= '0' && *p <= '9') {
            if (nf >= 18) return -1; /* more precision than bytes need; keeps frac_scale in range */
            frac = frac * 10 + (uint64_t)(*p - '0');
            frac_scale *= 10;
            p++, nf++;
        }
        if (nf == 0) return -1;
        nd += nf;
    }
    if (nd == 0) return -1;
    static const struct { const char *suf; uint64_t mult; } sufs[] = {
        {"", 1}, {"B", 1},
        {"KB", 1000ull}, {"MB", 1000000ull}, {"GB", 1000000000ull}, {"TB", 1000000000000ull},
        {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40},
    };
    uint64_t mult = 0;
    for (size_t i = 0; i < sizeof sufs / sizeof sufs[0]; i++)
        if (strcmp(p, sufs[i].suf) == 0) mult = sufs[i].mult;
    if (!mult) return -1;
    uint64_t whole;
    if (__builtin_mul_overflow(ip, mult, &whole)) return -1;
    if (frac) {
        /* exact: frac/frac_scale * mult must be a whole number of bytes */
        unsigned __int128 num = (unsigned __int128)frac * mult;
        if (num % frac_scale != 0) return -1;
        unsigned __int128 add = num / frac_scale;
        if (add > UINT64_MAX || __builtin_add_overflow(whole, (uint64_t)add, &whole)) return -1;
    }
    *out = whole;
    return 0;
}

int parse_int(const char *s, long long lo, long long hi, long long *out) {
    if (!s || !*s || !(*s == '-' || *s == '+' || (*s >= '0' && *s <= '9'))) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int parse_double(const char *s, double *out) {
    if (!s || !*s || !(*s == '-' || *s == '+' || *s == '.' || (*s >= '0' && *s <= '9'))) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || end == s || !isfinite(v) || (errno == ERANGE && fabs(v) > 1.0)) return -1;
    *out = v;
    return 0;
}
