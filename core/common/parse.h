/* core/common/parse.h — the strict parsers of values every program and file format shares: a memory
 * size, an integer, a decimal number, each the whole string or an error. */
#ifndef MESHSWEEP_PARSE_H
#define MESHSWEEP_PARSE_H
#include <stdint.h>

/* Parse a memory size: "96MiB", "80GB", "80GiB", "512KiB", "1.5GiB", "1000" (bytes). Suffixes:
 * B, KB/MB/GB/TB (powers of 1000), KiB/MiB/GiB/TiB (powers of 1024). Case-sensitive as written.
 * Returns 0 and *out on success, -1 on anything else (empty, negative, garbage, overflow). */
int parse_size(const char *s, uint64_t *out);
/* Strict integer / double parsing of a whole string; -1 on error. */
int parse_int(const char *s, long long lo, long long hi, long long *out);
int parse_double(const char *s, double *out);
#endif
