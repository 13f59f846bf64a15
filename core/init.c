/* core/init.c — counter-based normal generator (see init.h). */
#include "core/init.h"
#include <math.h>

uint64_t init_splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t init_name_hash(const char *name) { /* FNV-1a 64 */
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) { h ^= *p; h *= 0x100000001b3ull; }
    return h;
}

double init_normal(uint64_t seed, uint64_t name_hash, uint64_t index) {
    uint64_t a = init_splitmix64(seed ^ init_splitmix64(name_hash ^ init_splitmix64(index)));
    uint64_t b = init_splitmix64(a);
    double u1 = ((a >> 11) + 1) * (1.0 / 9007199254740992.0);  /* (0, 1] */
    double u2 = (b >> 11) * (1.0 / 9007199254740992.0);        /* [0, 1) */
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
