/* tests/fuzz/fuzz_size.c — libFuzzer target for the strict number parsers of core/formats/config.c:
 * parse_size ("96MiB", "80GB", "1.5GiB"), parse_int and parse_double. Beyond "no crash, no sanitizer
 * report" it checks what the parsers promise: a failed parse leaves the output untouched, an
 * accepted size prints back (as plain bytes) to the same value, an accepted integer lies in range,
 * an accepted double is finite, and an accepted size holds only digits, '.' and unit letters (the
 * sweep report pastes it into a gnuplot command). Not the option table of bench/train.c. */
#include "tests/fuzz/fuzz_common.h"

#include "core/formats/config.h"
#include "core/common/parse.h"

#include <limits.h>
#include <math.h>

int FUZZ_ENTRY(const uint8_t *data, size_t size);
int FUZZ_ENTRY(const uint8_t *data, size_t size) {
    if (size > 256) return 0; /* longer inputs add nothing a short one cannot reach */
    char *s = fuzz_cstr(data, size);
    if (!s) return 0;

    uint64_t v = 12345;
    if (parse_size(s, &v) == 0) {
        char back[32];
        uint64_t v2 = 0;
        snprintf(back, sizeof back, "%llu", (unsigned long long)v);
        FUZZ_ASSERT(parse_size(back, &v2) == 0 && v2 == v);
        snprintf(back, sizeof back, "%lluB", (unsigned long long)v);
        FUZZ_ASSERT(parse_size(back, &v2) == 0 && v2 == v);
        FUZZ_ASSERT((s[0] >= '0' && s[0] <= '9') || s[0] == '.');
        /* an accepted size is pasted into gnuplot's -e text by the sweep report: it must never
         * carry a quote, a backtick or anything but digits, '.' and a unit */
        FUZZ_ASSERT(strspn(s, "0123456789.KMGTiB") == strlen(s));
    } else {
        FUZZ_ASSERT(v == 12345);
    }

    long long iv = 777;
    if (parse_int(s, -1000000, 1000000, &iv) == 0) FUZZ_ASSERT(iv >= -1000000 && iv <= 1000000);
    else FUZZ_ASSERT(iv == 777);
    iv = 777;
    if (parse_int(s, LLONG_MIN, LLONG_MAX, &iv) != 0) FUZZ_ASSERT(iv == 777);

    double dv = 9.5;
    if (parse_double(s, &dv) == 0) FUZZ_ASSERT(isfinite(dv));
    else FUZZ_ASSERT(dv == 9.5);
    free(s);
    return 0;
}
