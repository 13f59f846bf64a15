/* core/data.c — token files (headerless little-endian uint16, nanoGPT format), synthetic tokens, and
 * the batch layout of design 4.3 (sequential, rank-major, identical global batch on every mesh).
 * The whole file lives in host memory: it is the host-side loader, not engine (device) memory.
 * Not: tokenisation (bench/mkdata.c writes the files), shuffling, prefetch threads. */
#include "core/data.h"
#include "core/errmsg.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "data.c reads little-endian uint16 token files directly into memory"
#endif

#define DATA_SYNTHETIC_SEQUENCES ((int64_t)1 << 30)

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

static int open_tokens(data_file *d, const char *path, int vocab_size, int T, uint64_t seed, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    if (!path || !*path) {
        errmsg_set(err, errlen, "data: empty path");
        return -1;
    }
    if (vocab_size <= 0 || T <= 0) {
        errmsg_set(err, errlen, "data: %s: vocab_size %d and sequence length %d must be positive", path, vocab_size, T);
        return -1;
    }
    if (snprintf(d->path, sizeof d->path, "%s", path) >= (int)sizeof d->path) {
        errmsg_set(err, errlen, "data: path too long");
        return -1;
    }
    d->vocab_size = vocab_size;
    if (strcmp(path, "synthetic") == 0) {
        d->synthetic = 1;
        d->seed = seed;
        d->ntokens = DATA_SYNTHETIC_SEQUENCES * T + 1; /* so that data_num_sequences gives 2^30 */
        return 0;
    }
    /* checked before fopen as well: opening a FIFO would block until someone writes to it */
    struct stat pre;
    if (stat(path, &pre) == 0 && !S_ISREG(pre.st_mode)) {
        errmsg_set(err, errlen, "data: %s is not a regular file", path);
        return -1;
    }
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        errmsg_set(err, errlen, "data: cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0) {
        errmsg_set(err, errlen, "data: cannot stat %s: %s", path, strerror(errno));
        fclose(fp);
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        errmsg_set(err, errlen, "data: %s is not a regular file", path);
        fclose(fp);
        return -1;
    }
    uint64_t bytes = (uint64_t)sb.st_size;
    if (bytes == 0) {
        errmsg_set(err, errlen, "data: %s is empty", path);
        fclose(fp);
        return -1;
    }
    if (bytes % 2) {
        errmsg_set(err, errlen, "data: %s has odd length %llu bytes (uint16 tokens expected)", path,
                (unsigned long long)bytes);
        fclose(fp);
        return -1;
    }
    int64_t n = (int64_t)(bytes / 2);
    if (n < (int64_t)T + 1) {
        errmsg_set(err, errlen, "data: %s has %lld tokens, need at least T+1 = %lld", path, (long long)n,
                (long long)T + 1);
        fclose(fp);
        return -1;
    }
    uint16_t *tok = malloc((size_t)bytes);
    if (!tok) {
        errmsg_set(err, errlen, "data: %s: out of host memory for %llu bytes", path, (unsigned long long)bytes);
        fclose(fp);
        return -1;
    }
    size_t got = fread(tok, 2, (size_t)n, fp);
    if (got != (size_t)n) {
        errmsg_set(err, errlen, "data: cannot read %s: %s", path,
                ferror(fp) ? strerror(errno) : "file shorter than its size");
        free(tok);
        fclose(fp);
        return -1;
    }
    if (fclose(fp) != 0) {
        errmsg_set(err, errlen, "data: cannot close %s: %s", path, strerror(errno));
        free(tok);
        return -1;
    }
    for (int64_t i = 0; i < n; i++)
        if (tok[i] >= vocab_size) {
            errmsg_set(err, errlen, "data: %s token %u at index %lld >= vocab_size %d", path, (unsigned)tok[i],
                    (long long)i, vocab_size);
            free(tok);
            return -1;
        }
    d->tokens = tok;
    d->ntokens = n;
    return 0;
}

int data_open(data_file *d, const char *path, int vocab_size, int T, uint64_t seed, char *err, size_t errlen) {
    int rc = open_tokens(d, path, vocab_size, T, seed, err, errlen);
    if (rc != 0) errmsg_one_line(err, errlen);
    return rc;
}

void data_close(data_file *d) {
    if (!d) return;
    free(d->tokens);
    d->tokens = NULL;
    d->ntokens = 0;
}

int64_t data_num_sequences(const data_file *d, int T) {
    if (T <= 0) return 0;
    if (d->synthetic) return DATA_SYNTHETIC_SEQUENCES;
    return (d->ntokens - 1) / T;
}

void data_batch(const data_file *d, int64_t step, int G, int dp_rank, int b, int T, int32_t *inputs,
                int32_t *targets) {
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
        int32_t *in = inputs + (size_t)i * T, *tg = targets + (size_t)i * T;
        if (d->synthetic) {
            for (int t = 0; t < T; t++) {
                in[t] = synthetic_token(d->seed, (uint64_t)(start + t), d->vocab_size);
                tg[t] = synthetic_token(d->seed, (uint64_t)(start + t + 1), d->vocab_size);
            }
        } else {
            const uint16_t *src = d->tokens + start;
            for (int t = 0; t < T; t++) {
                in[t] = src[t];
                tg[t] = src[t + 1];
            }
        }
    }
}
