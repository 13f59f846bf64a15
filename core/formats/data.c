/* core/formats/data.c — token files read through read-only memory maps (llm.c, NumPy .npy, Megatron-LM
 * indexed datasets, headerless uint16), synthetic tokens, and the batch layout of docs/semantics.md#data-order
 * (sequential, rank-major, identical global batch on every mesh).
 * Every header field is checked against the file's size before a token is read; ids are checked
 * against the vocabulary by one vectorised pass over the mapping at open time (docs/formats.md, "Token files"
 * states its rate). The mapping is file-backed page cache, not process memory: a rank keeps only
 * the pages it touches, and the kernel may drop them again.
 * Not: tokenisation (bench/mkdata.c), writing the formats (core/formats/data_write.c), shuffling, prefetch. */
#include "core/formats/data.h"
#include "core/common/errmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "data.c reads little-endian token files directly from their mapping"
#endif

/* the id scan's max-reductions vectorise only with the full vectoriser (-O2 uses the very cheap one) */
#pragma GCC optimize("tree-vectorize")

#define DATA_SYNTHETIC_SEQUENCES ((int64_t)1 << 30)

const char *const data_format_names[DATA_NFORMATS] = {"nanogpt", "llmc", "npy", "megatron", "synthetic"};
const char *const data_dtype_names[DATA_NDTYPES] = {"u8", "i8", "u16", "i16", "u32", "i32", "i64"};

int data_dtype_bytes(data_dtype t) {
    static const int b[DATA_NDTYPES] = {1, 1, 2, 2, 4, 4, 8};
    _Static_assert(sizeof b / sizeof b[0] == DATA_NDTYPES, "one size per dtype");
    return (unsigned)t < DATA_NDTYPES ? b[t] : 0;
}

/* Unaligned views: npy data offsets and Megatron pointers need not be aligned to the element size. */
typedef uint16_t u16u __attribute__((aligned(1), may_alias));
typedef uint32_t u32u __attribute__((aligned(1), may_alias));
typedef uint64_t u64u __attribute__((aligned(1), may_alias));
typedef int16_t i16u __attribute__((aligned(1), may_alias));
typedef int32_t i32u __attribute__((aligned(1), may_alias));
typedef int64_t i64u __attribute__((aligned(1), may_alias));

static int64_t load(const unsigned char *p, data_dtype t) {
    switch (t) {
    case DATA_U8: return *p;
    case DATA_I8: return (int8_t)*p;
    case DATA_U16: return *(const u16u *)p;
    case DATA_I16: return *(const i16u *)p;
    case DATA_U32: return *(const u32u *)p;
    case DATA_I32: return *(const i32u *)p;
    default: return *(const i64u *)p;
    }
}

/* splitmix64 finaliser */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Token at absolute index k*T+t of the synthetic stream: element idx of a splitmix64 sequence whose
 * start is the mixed seed. A pure function of (seed, idx), so a target equals the next position's
 * input and every rank/mesh sees the same tokens. The mod-V bias is below 2^-47 for V <= 2^17. */
static int32_t synthetic_token(uint64_t seed, uint64_t idx, int V) {
    uint64_t state = mix64(seed + 0x9e3779b97f4a7c15ull) + (idx + 1) * 0x9e3779b97f4a7c15ull;
    return (int32_t)(mix64(state) % (uint64_t)V);
}

/* ---- mapping ------------------------------------------------------------------------------- */

/* Map a regular, non-empty file read-only. */
static int map_file(const char *path, void **map, size_t *bytes, char *err, size_t errlen) {
    /* checked before open as well: opening a FIFO would block until someone writes to it */
    struct stat pre;
    if (stat(path, &pre) == 0 && !S_ISREG(pre.st_mode)) {
        errmsg_set(err, errlen, "data: %s is not a regular file", path);
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        errmsg_set(err, errlen, "data: cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        errmsg_set(err, errlen, "data: %s is not a regular file", path);
        close(fd);
        return -1;
    }
    if (sb.st_size == 0) {
        errmsg_set(err, errlen, "data: %s is empty", path);
        close(fd);
        return -1;
    }
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd); /* the mapping keeps the file */
    if (m == MAP_FAILED) {
        errmsg_set(err, errlen, "data: cannot map %s: %s", path, strerror(e));
        return -1;
    }
    madvise(m, (size_t)sb.st_size, MADV_SEQUENTIAL);
    *map = m;
    *bytes = (size_t)sb.st_size;
    return 0;
}

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}
static int is_file(const char *p) { struct stat sb; return stat(p, &sb) == 0; }

/* ---- llm.c --------------------------------------------------------------------------------- */
#define LLMC_HEADER_BYTES 1024
static int open_llmc(data_file *d, const unsigned char *m, size_t bytes, char *err, size_t errlen) {
    if (bytes < LLMC_HEADER_BYTES) {
        errmsg_set(err, errlen, "data: %s: llm.c magic but only %zu bytes (the header alone is 1024)", d->path, bytes);
        return -1;
    }
    int32_t h[3];
    memcpy(h, m, sizeof h);
    int want = h[0] == 20240520 ? 1 : 7;
    if (h[1] != want) {
        errmsg_set(err, errlen, "data: %s: llm.c magic %d with version %d (expected %d)", d->path, h[0], h[1], want);
        return -1;
    }
    d->dtype = want == 1 ? DATA_U16 : DATA_U32;
    d->elem_bytes = data_dtype_bytes(d->dtype);
    uint64_t have = (bytes - LLMC_HEADER_BYTES) / (uint64_t)d->elem_bytes;
    if (h[2] < 0 || (uint64_t)h[2] * d->elem_bytes != bytes - LLMC_HEADER_BYTES) {
        errmsg_set(err, errlen, "data: %s: llm.c header says %d tokens but the file holds %llu%s", d->path, h[2],
                   (unsigned long long)have, (bytes - LLMC_HEADER_BYTES) % d->elem_bytes ? " and a partial one" : "");
        return -1;
    }
    d->format = DATA_LLMC;
    d->ntokens = h[2];
    d->one.p = m + LLMC_HEADER_BYTES;
    return 0;
}

/* ---- NumPy .npy ---------------------------------------------------------------------------- */
/* The .npy header, parsed strictly: a Python dict literal of exactly the keys 'descr' (a string),
 * 'fortran_order' (True or False) and 'shape' (a tuple of integers), each once, in any order, with
 * either quote, an optional trailing comma, then only spaces and the closing newline. Anything else
 * ('Falsey', a fourth key, text after the brace) is refused: a header read loosely would turn a
 * damaged file into wrong tokens. -1 with the reason in why. */
typedef struct npy_header { char descr[16]; int fortran; int ndim; long long shape0; } npy_header;
static const char *npy_ws(const char *p) { while (*p == ' ') p++; return p; }
static const char *npy_str(const char *p, char *out, size_t cap) {
    char q = *p;
    if (q != '\'' && q != '"') return NULL;
    const char *e = strchr(p + 1, q);
    if (!e || (size_t)(e - p - 1) >= cap) return NULL;
    memcpy(out, p + 1, (size_t)(e - p - 1));
    out[e - p - 1] = 0;
    return e + 1;
}
static int npy_parse(const char *h, npy_header *o, const char **why) {
    memset(o, 0, sizeof *o);
    o->ndim = -1, o->fortran = -1;
    const char *p = npy_ws(h);
    if (*p++ != '{') return *why = "is not a dictionary", -1;
    int seen = 0;
    for (p = npy_ws(p); *p != '}';) {
        char key[32];
        if (!(p = npy_str(p, key, sizeof key))) return *why = "has a key that is not a quoted name", -1;
        p = npy_ws(p);
        if (*p++ != ':') return *why = "has a key without ':'", -1;
        p = npy_ws(p);
        int k = !strcmp(key, "descr") ? 1 : !strcmp(key, "fortran_order") ? 2 : !strcmp(key, "shape") ? 4 : 0;
        if (!k) return *why = "has a key other than descr, fortran_order and shape", -1;
        if (seen & k) return *why = "names a key twice", -1;
        seen |= k;
        if (k == 1 && !(p = npy_str(p, o->descr, sizeof o->descr))) return *why = "has a descr that is not a short string", -1;
        if (k == 2) {
            if (!strncmp(p, "True", 4)) o->fortran = 1, p += 4;
            else if (!strncmp(p, "False", 5)) o->fortran = 0, p += 5;
            else return *why = "has a fortran_order that is not True or False", -1;
        }
        if (k == 4) {
            if (*p++ != '(') return *why = "has a shape that is not a tuple", -1;
            o->ndim = 0;
            int comma = 0;
            for (p = npy_ws(p); *p != ')';) {
                if (*p < '0' || *p > '9') return *why = "has a shape that is not a tuple of integers", -1;
                errno = 0;
                char *e;
                long long v = strtoll(p, &e, 10);
                if (errno) return *why = "has a shape entry out of range", -1;
                if (o->ndim++ == 0) o->shape0 = v;
                p = npy_ws(e);
                if (*p == ',') p = npy_ws(p + 1), comma = 1;
                else if (*p != ')') return *why = "has a shape that is not a tuple of integers", -1;
            }
            if (o->ndim == 1 && !comma) return *why = "has a shape that is not a tuple ('(N,)')", -1;
            p++;
        }
        p = npy_ws(p);
        if (*p == ',') p = npy_ws(p + 1);
        else if (*p != '}') return *why = "has entries not separated by ','", -1; /* 'Falsey' stops here */
    }
    for (p++; *p == ' ' || *p == '\n'; p++) {}
    if (*p) return *why = "has text after the dictionary", -1;
    if (seen != 7) return *why = "lacks one of descr, fortran_order and shape", -1;
    return 0;
}

static int open_npy(data_file *d, const unsigned char *m, size_t bytes, char *err, size_t errlen) {
    if (bytes < 10) {
        errmsg_set(err, errlen, "data: %s: .npy magic but only %zu bytes", d->path, bytes);
        return -1;
    }
    int major = m[6], minor = m[7];
    if (major < 1 || major > 3 || minor != 0) {
        errmsg_set(err, errlen, "data: %s: .npy format version %d.%d (expected 1.0, 2.0 or 3.0)", d->path, major, minor);
        return -1;
    }
    size_t pre = major == 1 ? 10 : 12;
    if (bytes < pre) {
        errmsg_set(err, errlen, "data: %s: .npy header truncated", d->path);
        return -1;
    }
    uint64_t hlen = major == 1 ? (uint64_t)(m[8] | m[9] << 8) : (uint64_t)*(const u32u *)(m + 8);
    if (hlen > bytes - pre || hlen > 65536) {
        errmsg_set(err, errlen, "data: %s: .npy header length %llu is larger than the file", d->path,
                   (unsigned long long)hlen);
        return -1;
    }
    char h[65537];
    memcpy(h, m + pre, hlen);
    h[hlen] = 0;
    npy_header nh;
    const char *why = "";
    if (strlen(h) != hlen || npy_parse(h, &nh, &why)) {
        errmsg_set(err, errlen, "data: %s: .npy header %s", d->path, strlen(h) != hlen ? "holds a NUL byte" : why);
        return -1;
    }
    static const struct { const char *descr; data_dtype t; } types[] = {
        {"<u2", DATA_U16}, {"<u4", DATA_U32}, {"<i4", DATA_I32}, {"<i8", DATA_I64},
        {"|u1", DATA_U8}, {"|i1", DATA_I8}, {"<i2", DATA_I16},
    };
    int ti = -1;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strcmp(nh.descr, types[i].descr) == 0) ti = (int)i;
    if (ti < 0) {
        errmsg_set(err, errlen, "data: %s: .npy dtype '%s' is not a token type (expected <u2, <u4, <i4 or <i8%s)",
                   d->path, nh.descr, nh.descr[0] == '>' ? "; big-endian is not read" : "");
        return -1;
    }
    if (nh.fortran) {
        errmsg_set(err, errlen, "data: %s: .npy array must be in C order (fortran_order False)", d->path);
        return -1;
    }
    long long n = nh.ndim == 1 ? nh.shape0 : -1;
    if (n < 0) {
        errmsg_set(err, errlen, "data: %s: .npy array must be one-dimensional, shape (N,)", d->path);
        return -1;
    }
    d->dtype = types[ti].t;
    d->elem_bytes = data_dtype_bytes(d->dtype);
    size_t off = pre + (size_t)hlen, have = (bytes - off) / (size_t)d->elem_bytes;
    if ((uint64_t)n > (uint64_t)(bytes - off) / (uint64_t)d->elem_bytes || (bytes - off) % (size_t)d->elem_bytes ||
        (size_t)n != have) {
        errmsg_set(err, errlen, "data: %s: .npy shape says %lld tokens but the file holds %zu%s", d->path, n, have,
                   (bytes - off) % (size_t)d->elem_bytes ? " and a partial one" : "");
        return -1;
    }
    d->format = DATA_NPY;
    d->ntokens = n;
    d->one.p = m + off;
    return 0;
}

/* ---- Megatron-LM / NeMo indexed dataset ---------------------------------------------------- */
#define MMIDIDX_HEADER_BYTES 34 /* magic 9, version 8, dtype 1, sequence count 8, document count 8 */
static int open_megatron(data_file *d, const char *idx_path, char *err, size_t errlen) {
    if (map_file(idx_path, &d->idx_map, &d->idx_bytes, err, errlen)) return -1;
    const unsigned char *x = d->idx_map;
    size_t xb = d->idx_bytes;
    if (xb < MMIDIDX_HEADER_BYTES || memcmp(x, "MMIDIDX\0\0", 9) != 0) {
        errmsg_set(err, errlen, "data: %s: not a Megatron index (magic MMIDIDX expected%s)", idx_path,
                   xb < MMIDIDX_HEADER_BYTES ? ", file too short" : "");
        return -1;
    }
    uint64_t version = *(const u64u *)(x + 9), S = *(const u64u *)(x + 18), D = *(const u64u *)(x + 26);
    int code = x[17];
    if (version != 1) {
        errmsg_set(err, errlen, "data: %s: Megatron index version %llu (expected 1)", idx_path,
                   (unsigned long long)version);
        return -1;
    }
    static const int code_dtype[9] = {-1, DATA_U8, DATA_I8, DATA_I16, DATA_I32, DATA_I64, -1, -1, DATA_U16};
    if (code < 1 || code > 8 || code_dtype[code] < 0) {
        errmsg_set(err, errlen, "data: %s: Megatron dtype code %d is not a token type (1 uint8, 3 int16, 4 int32, "
                   "5 int64, 8 uint16%s)", idx_path, code, code == 6 || code == 7 ? "; 6 and 7 are floats" : "");
        return -1;
    }
    d->dtype = (data_dtype)code_dtype[code];
    d->elem_bytes = data_dtype_bytes(d->dtype);
    uint64_t rest = xb - MMIDIDX_HEADER_BYTES;
    if (S > rest / 12 || D > (rest - 12 * S) / 8 || 12 * S + 8 * D != rest) {
        errmsg_set(err, errlen, "data: %s: index size %zu bytes does not match its %llu sequences and %llu documents "
                   "(34 + 12*sequences + 8*documents bytes expected)", idx_path, xb, (unsigned long long)S,
                   (unsigned long long)D);
        return -1;
    }
    const unsigned char *lens = x + MMIDIDX_HEADER_BYTES, *ptrs = lens + 4 * S, *docs = ptrs + 8 * S;
    int64_t prev = 0;
    for (uint64_t i = 0; i < D; i++) {
        int64_t v = *(const i64u *)(docs + 8 * i);
        if (v < prev || (uint64_t)v > S || (i == 0 && v != 0) || (i + 1 == D && (uint64_t)v != S)) {
            errmsg_set(err, errlen, "data: %s: document index %llu is %lld (expected non-decreasing from 0 to the "
                       "sequence count %llu)", idx_path, (unsigned long long)i, (long long)v, (unsigned long long)S);
            return -1;
        }
        prev = v;
    }
    if (map_file(d->path, &d->map, &d->map_bytes, err, errlen)) return -1;
    uint64_t bb = d->map_bytes, total = 0, runs = 0, run_end = UINT64_MAX;
    /* pass 1: every sequence inside the .bin; count the runs the stream needs */
    if (d->elem_bytes <= 0) {
        errmsg_set(err, errlen, "data: %s: no element size for its dtype", idx_path);
        return -1;
    }
    for (uint64_t i = 0; i < S; i++) {
        int64_t len = *(const i32u *)(lens + 4 * i), ptr = *(const i64u *)(ptrs + 8 * i);
        if (len < 0) {
            errmsg_set(err, errlen, "data: %s: sequence %llu has a negative length %lld", idx_path,
                       (unsigned long long)i, (long long)len);
            return -1;
        }
        if (ptr < 0 || (uint64_t)ptr > bb || (uint64_t)len > (bb - (uint64_t)ptr) / (uint64_t)d->elem_bytes) {
            errmsg_set(err, errlen, "data: %s: sequence %llu (%lld tokens at byte %lld) lies outside %s (%llu bytes)",
                       idx_path, (unsigned long long)i, (long long)len, (long long)ptr, d->path,
                       (unsigned long long)bb);
            return -1;
        }
        if (len == 0) continue;
        if ((uint64_t)ptr != run_end) runs++;
        run_end = (uint64_t)ptr + (uint64_t)len * d->elem_bytes;
        total += (uint64_t)len;
    }
    d->format = DATA_MEGATRON;
    d->ntokens = (int64_t)total;
    if (runs <= 1) {
        d->nruns = 1;
        d->one.p = (const unsigned char *)d->map;
        for (uint64_t i = 0; i < S; i++)
            if (*(const i32u *)(lens + 4 * i) > 0) { d->one.p += *(const i64u *)(ptrs + 8 * i); break; }
        return 0;
    }
    d->run = malloc(runs * sizeof *d->run);
    if (!d->run) {
        errmsg_set(err, errlen, "data: %s: out of host memory for %llu runs", idx_path, (unsigned long long)runs);
        return -1;
    }
    /* pass 2: the runs, in index order */
    int64_t nr = 0, pos = 0;
    run_end = UINT64_MAX;
    if (d->elem_bytes <= 0) {
        errmsg_set(err, errlen, "data: %s: no element size for its dtype", idx_path);
        return -1;
    }
    for (uint64_t i = 0; i < S; i++) {
        int64_t len = *(const i32u *)(lens + 4 * i), ptr = *(const i64u *)(ptrs + 8 * i);
        if (len == 0) continue;
        if ((uint64_t)ptr != run_end) d->run[nr++] = (data_run){pos, (const unsigned char *)d->map + ptr};
        run_end = (uint64_t)ptr + (uint64_t)len * d->elem_bytes;
        pos += len;
    }
    d->nruns = nr;
    return 0;
}

/* ---- id scan ------------------------------------------------------------------------------- */
/* Largest element of p[0..n) read as unsigned of its width: a negative signed id becomes huge, so
 * one unsigned comparison with V finds both kinds of bad id. Fixed-size blocks let gcc vectorise. */
#define SCAN_BLOCK 4096
#define SCAN_MAX(T, p, n, out)                                                                              \
    do {                                                                                                    \
        const T *q_ = (const T *)(p);                                                                       \
        T m_ = 0;                                                                                           \
        for (int64_t i_ = 0; i_ < (n); i_++) m_ = q_[i_] > m_ ? q_[i_] : m_;                                \
        (out) = m_;                                                                                         \
    } while (0)
static uint64_t block_umax(const unsigned char *p, int64_t n, data_dtype t) {
    uint64_t m = 0;
    switch (t) {
    case DATA_U8: case DATA_I8: SCAN_MAX(uint8_t, p, n, m); break;
    case DATA_U16: case DATA_I16: SCAN_MAX(u16u, p, n, m); break;
    case DATA_U32: case DATA_I32: SCAN_MAX(u32u, p, n, m); break;
    default: SCAN_MAX(u64u, p, n, m); break;
    }
    return m;
}

/* first stream index in [start, start+n) of the run at p whose id is outside [0, V), or -1 */
static int64_t scan_run(const unsigned char *p, int64_t start, int64_t n, data_dtype t, int eb, int V) {
    for (int64_t b = 0; b < n; b += SCAN_BLOCK) {
        int64_t m = n - b < SCAN_BLOCK ? n - b : SCAN_BLOCK;
        if (block_umax(p + b * eb, m, t) < (uint64_t)V) continue;
        for (int64_t i = 0; i < m; i++) {
            int64_t v = load(p + (b + i) * eb, t);
            if (v < 0 || v >= V) return start + b + i;
        }
    }
    return -1;
}

static int64_t run_count(const data_file *d, int64_t r) {
    return (r + 1 < d->nruns ? d->run[r + 1].start : d->ntokens) - d->run[r].start;
}

static int check_ids(const data_file *d, char *err, size_t errlen) {
    for (int64_t r = 0; r < d->nruns; r++) {
        const data_run *u = &d->run[r];
        int64_t bad = scan_run(u->p, u->start, run_count(d, r), d->dtype, d->elem_bytes, d->vocab_size);
        if (bad < 0) continue;
        int64_t v = load(u->p + (bad - u->start) * d->elem_bytes, d->dtype);
        if (v < 0)
            errmsg_set(err, errlen, "data: %s token %lld at index %lld is negative", d->path, (long long)v,
                       (long long)bad);
        else
            errmsg_set(err, errlen, "data: %s token %lld at index %lld >= vocab_size %d", d->path, (long long)v,
                       (long long)bad, d->vocab_size);
        return -1;
    }
    return 0;
}

/* ---- files that are almost a known format --------------------------------------------------- */
/* A damaged header read as headerless uint16 data would train on the header's bytes as tokens: a
 * file that is not a known format but carries the marks of one is refused, naming the format. An
 * llm.c header has four marks: the magic, the version (1 or 7), the count (header[2] x 2 or 4 =
 * the bytes after the 1024-byte header) and 253 zero words after them; a magic a little off (within
 * 1000, or one byte changed) or two of the other marks say "llm.c". A .npy file is its 6 magic bytes
 * and a dict starting {'descr' at byte 10 or 12: four of six magic bytes, or the dict, say ".npy".
 * safetensors (a header length then '{"') and zip/gzip archives (.npz) are not token files either.
 * Chance hits are negligible for real token data: each test needs 4-8 specific bytes. */
static int one_byte_off(uint32_t a, uint32_t b) {
    int diff = 0;
    for (int k = 0; k < 4; k++) diff += ((a >> (8 * k)) & 0xff) != ((b >> (8 * k)) & 0xff);
    return diff == 1;
}
static const char *near_known_format(const unsigned char *m, size_t n) {
    if (n >= 12) {
        int32_t h[3];
        memcpy(h, m, sizeof h);
        const int32_t magics[2] = {20240520, 20240801};
        int near = 0;
        for (int k = 0; k < 2; k++)
            near |= (h[0] != magics[k] && h[0] > magics[k] - 1000 && h[0] < magics[k] + 1000) ||
                    one_byte_off((uint32_t)h[0], (uint32_t)magics[k]);
        int marks = h[1] == 1 || h[1] == 7;
        if (n >= LLMC_HEADER_BYTES) {
            uint64_t body = n - LLMC_HEADER_BYTES;
            marks += h[2] > 0 && ((uint64_t)h[2] * 2 == body || (uint64_t)h[2] * 4 == body);
            int zeros = 1;
            for (size_t i = 12; i < LLMC_HEADER_BYTES && zeros; i++) zeros = m[i] == 0;
            marks += zeros;
        }
        if (near || marks >= 2) return "an llm.c token file with a damaged header (magic 20240520 or 20240801 expected)";
    }
    if (n >= 6) {
        int same = 0;
        for (int i = 0; i < 6; i++) same += m[i] == (unsigned char)"\x93NUMPY"[i];
        int dict = (n >= 18 && (!memcmp(m + 10, "{'descr'", 8) || !memcmp(m + 10, "{\"descr\"", 8))) ||
                   (n >= 20 && (!memcmp(m + 12, "{'descr'", 8) || !memcmp(m + 12, "{\"descr\"", 8)));
        if (same >= 4 || dict) return "a .npy file with a damaged header (magic \\x93NUMPY expected)";
    }
    if (n >= 10 && m[8] == '{' && m[9] == '"') {
        uint64_t hl;
        memcpy(&hl, m, 8);
        if (hl >= 2 && hl <= n - 8) return "a safetensors file (model weights, not tokens)";
    }
    if (n >= 4 && !memcmp(m, "PK\x03\x04", 4)) return "a zip archive (an .npz? unpack it to .npy)";
    if (n >= 2 && m[0] == 0x1f && m[1] == 0x8b) return "a gzip file (unpack it first)";
    return NULL;
}

/* ---- reading a mapping whose file may shrink ------------------------------------------------- */
/* A mapped file that another process truncates raises SIGBUS on the next read of a page past its new
 * end. Every read of a mapping (opening, the batches, data_read) runs armed: the handler jumps back
 * to the reader, which reports the file as changed (-1, one line) instead of the process dying with
 * no word. A SIGBUS that is not ours (not armed) goes to the disposition that was there before (the
 * handler restores it, and the faulting instruction runs again under it). The handler is installed
 * again whenever another one (MPI's) replaced it. Single-threaded readers only (the engine's). */
static sigjmp_buf g_bus_jmp;
static volatile sig_atomic_t g_bus_armed;
static struct sigaction g_bus_prev;

static void on_bus(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si, (void)uc;
    if (g_bus_armed) {
        g_bus_armed = 0;
        siglongjmp(g_bus_jmp, 1);
    }
    sigaction(SIGBUS, &g_bus_prev, NULL);
}

static void bus_handler_on(void) {
    struct sigaction cur;
    if (sigaction(SIGBUS, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_bus) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_bus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_bus_prev);
}

static void bus_fault_msg(const char *path, size_t mapped, char *err, size_t errlen) {
    struct stat sb;
    if (stat(path, &sb) == 0)
        errmsg_set(err, errlen, "data: %s changed while it was read: it is now %lld bytes, %zu when opened (truncated "
                   "by another process?)", path, (long long)sb.st_size, mapped);
    else errmsg_set(err, errlen, "data: %s changed while it was read: %s (removed or truncated by another process?)", path,
                    strerror(errno));
    errmsg_one_line(err, errlen);
}

/* ---- open ---------------------------------------------------------------------------------- */
static int set_path(char *dst, const char *src, const char *suffix, char *err, size_t errlen) {
    if (snprintf(dst, 4096, "%s%s", src, suffix) >= 4096) {
        errmsg_set(err, errlen, "data: path too long");
        return -1;
    }
    return 0;
}

__attribute__((noinline)) static int open_tokens(data_file *d, const char *path, int vocab_size, int T, uint64_t seed, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    d->run = &d->one;
    d->nruns = 1;
    if (!path || !*path) {
        errmsg_set(err, errlen, "data: empty path");
        return -1;
    }
    if (vocab_size <= 0 || T <= 0) {
        errmsg_set(err, errlen, "data: %s: vocab_size %d and sequence length %d must be positive", path, vocab_size, T);
        return -1;
    }
    if (set_path(d->path, path, "", err, errlen)) return -1;
    d->vocab_size = vocab_size;
    if (strcmp(path, "synthetic") == 0) {
        d->synthetic = 1;
        d->format = DATA_SYNTHETIC;
        d->seed = seed;
        d->ntokens = DATA_SYNTHETIC_SEQUENCES * T + 1; /* so that data_num_sequences gives 2^30 */
        return 0;
    }
    /* Megatron: PREFIX, PREFIX.bin or PREFIX.idx names the pair PREFIX.bin + PREFIX.idx */
    char prefix[4096], idx[4096];
    int named_idx = ends_with(path, ".idx"), named_bin = ends_with(path, ".bin");
    if (set_path(prefix, path, "", err, errlen)) return -1;
    if (named_idx || named_bin) prefix[strlen(prefix) - 4] = 0;
    if (set_path(idx, prefix, ".idx", err, errlen)) return -1;
    int megatron = named_idx || (named_bin && is_file(idx));
    if (!megatron && !is_file(path) && is_file(idx)) megatron = 1;
    if (megatron) {
        if (set_path(d->path, prefix, ".bin", err, errlen) || open_megatron(d, idx, err, errlen)) return -1;
    } else {
        if (map_file(path, &d->map, &d->map_bytes, err, errlen)) return -1;
        const unsigned char *m = d->map;
        int32_t magic = 0;
        if (d->map_bytes >= 4) memcpy(&magic, m, 4);
        if (magic == 20240520 || magic == 20240801) {
            if (open_llmc(d, m, d->map_bytes, err, errlen)) return -1;
        } else if (d->map_bytes >= 6 && memcmp(m, "\x93NUMPY", 6) == 0) {
            if (open_npy(d, m, d->map_bytes, err, errlen)) return -1;
        } else {
            const char *near = near_known_format(m, d->map_bytes);
            if (near) {
                errmsg_set(err, errlen, "data: %s looks like %s: refused rather than read as headerless uint16 tokens",
                           path, near);
                return -1;
            }
            if (d->map_bytes % 2) {
                errmsg_set(err, errlen, "data: %s has odd length %zu bytes (uint16 tokens expected)", path, d->map_bytes);
                return -1;
            }
            d->format = DATA_NANOGPT;
            d->dtype = DATA_U16;
            d->elem_bytes = 2;
            d->ntokens = (int64_t)(d->map_bytes / 2);
            d->one.p = m;
        }
    }
    if (d->ntokens < (int64_t)T + 1) {
        errmsg_set(err, errlen, "data: %s has %lld tokens, need at least T+1 = %lld", d->path, (long long)d->ntokens,
                   (long long)T + 1);
        return -1;
    }
    return check_ids(d, err, errlen);
}

int data_open(data_file *d, const char *path, int vocab_size, int T, uint64_t seed, char *err, size_t errlen) {
    bus_handler_on();
    if (sigsetjmp(g_bus_jmp, 1)) { /* a mapping shrank while its header or ids were read */
        bus_fault_msg(d->path, d->map_bytes, err, errlen);
        data_close(d);
        return -1;
    }
    g_bus_armed = 1;
    int rc = open_tokens(d, path, vocab_size, T, seed, err, errlen);
    g_bus_armed = 0;
    if (rc != 0) {
        data_close(d);
        errmsg_one_line(err, errlen);
    }
    return rc;
}

void data_close(data_file *d) {
    if (!d) return;
    if (d->map) munmap(d->map, d->map_bytes);
    if (d->idx_map) munmap(d->idx_map, d->idx_bytes);
    if (d->run && d->run != &d->one) free(d->run);
    d->map = d->idx_map = NULL;
    d->map_bytes = d->idx_bytes = 0;
    d->run = NULL;
    d->nruns = 0;
    d->ntokens = 0;
}

void data_describe(const data_file *d, char *out, size_t cap) {
    if (d->synthetic) snprintf(out, cap, "synthetic");
    else snprintf(out, cap, "%s %s", data_format_names[d->format], data_dtype_names[d->dtype]);
}

int64_t data_num_sequences(const data_file *d, int T) {
    if (T <= 0) return 0;
    if (d->synthetic) return DATA_SYNTHETIC_SEQUENCES;
    return (d->ntokens - 1) / T;
}

/* ---- reading ------------------------------------------------------------------------------- */
#define COPY_RUN(T, src, n, dst)                                                                            \
    do {                                                                                                    \
        const T *s_ = (const T *)(src);                                                                     \
        for (int64_t i_ = 0; i_ < (n); i_++) (dst)[i_] = s_[i_];                                            \
    } while (0)

/* tokens [first, first+n) into dst of element type D (int32_t or int64_t) */
#define READ_BODY(D)                                                                                        \
    do {                                                                                                    \
        if (d->synthetic) {                                                                                 \
            for (int64_t i = 0; i < n; i++) dst[i] = synthetic_token(d->seed, (uint64_t)(first + i), d->vocab_size); \
            return;                                                                                         \
        }                                                                                                   \
        int64_t lo = 0, hi = d->nruns - 1; /* last run with start <= first */                               \
        while (lo < hi) {                                                                                   \
            int64_t mid = (lo + hi + 1) / 2;                                                                \
            if (d->run[mid].start <= first) lo = mid;                                                       \
            else hi = mid - 1;                                                                              \
        }                                                                                                   \
        for (int64_t r = lo; n > 0; r++) {                                                                  \
            int64_t off = first - d->run[r].start, m = run_count(d, r) - off;                               \
            if (m > n) m = n;                                                                               \
            const unsigned char *p = d->run[r].p + off * d->elem_bytes;                                     \
            switch (d->dtype) {                                                                             \
            case DATA_U8: COPY_RUN(uint8_t, p, m, dst); break;                                              \
            case DATA_I8: COPY_RUN(int8_t, p, m, dst); break;                                               \
            case DATA_U16: COPY_RUN(u16u, p, m, dst); break;                                                \
            case DATA_I16: COPY_RUN(i16u, p, m, dst); break;                                                \
            case DATA_U32: COPY_RUN(u32u, p, m, dst); break;                                                \
            case DATA_I32: COPY_RUN(i32u, p, m, dst); break;                                                \
            default: COPY_RUN(i64u, p, m, dst); break;                                                      \
            }                                                                                               \
            dst += m, first += m, n -= m;                                                                   \
        }                                                                                                   \
    } while (0)

/* int8 files hold signed ids (negative ones are refused at open): the sign extension is meant */
static void read_i32(const data_file *d, int64_t first, int64_t n, int32_t *dst) { READ_BODY(int32_t); } // NOLINT(bugprone-signed-char-misuse)
/* not inlined into the armed readers below: nothing they hold changes between sigsetjmp and a jump */
__attribute__((noinline)) static void read_i64(const data_file *d, int64_t first, int64_t n, int64_t *dst) { READ_BODY(int64_t); } // NOLINT(bugprone-signed-char-misuse)

int data_read(const data_file *d, int64_t first, int64_t n, int64_t *dst, char *err, size_t errlen) {
    bus_handler_on();
    if (sigsetjmp(g_bus_jmp, 1)) {
        bus_fault_msg(d->path, d->map_bytes, err, errlen);
        memset(dst, 0, (size_t)n * sizeof *dst);
        return -1;
    }
    g_bus_armed = 1;
    read_i64(d, first, n, dst);
    g_bus_armed = 0;
    return 0;
}

__attribute__((noinline)) static void batch(const data_file *d, int64_t step, int G, int dp_rank, int b, int T,
                                            int32_t *inputs, int32_t *targets);
int data_batch(const data_file *d, int64_t step, int G, int dp_rank, int b, int T, int32_t *inputs, int32_t *targets,
               char *err, size_t errlen) {
    bus_handler_on();
    if (sigsetjmp(g_bus_jmp, 1)) {
        bus_fault_msg(d->path, d->map_bytes, err, errlen);
        /* valid ids (0) everywhere, so a caller that must still run the step's collectives can */
        memset(inputs, 0, (size_t)b * (size_t)T * sizeof *inputs);
        memset(targets, 0, (size_t)b * (size_t)T * sizeof *targets);
        return -1;
    }
    g_bus_armed = 1;
    batch(d, step, G, dp_rank, b, T, inputs, targets);
    g_bus_armed = 0;
    return 0;
}

__attribute__((noinline)) static void batch(const data_file *d, int64_t step, int G, int dp_rank, int b, int T,
                                            int32_t *inputs, int32_t *targets) {
    int64_t N = data_num_sequences(d, T);
    if (N <= 0) return;
    /* (step*G + j) mod N without overflow for any step: reduce each factor first */
    int64_t sm = step % N;
    if (sm < 0) sm += N;
    int64_t base = (int64_t)(((unsigned __int128)sm * (unsigned)G) % (unsigned __int128)N);
    for (int i = 0; i < b; i++) {
        int64_t j = (int64_t)dp_rank * b + i;
        int64_t k = (base + j % N) % N;
        int64_t start = k * T;
        /* ids were checked against V at open, so they fit int32 */
        read_i32(d, start, T, inputs + (size_t)i * T);
        read_i32(d, start + 1, T, targets + (size_t)i * T);
    }
}
