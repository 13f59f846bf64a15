/* core/data.h — token files (nanoGPT format: headerless little-endian uint16) and the batch layout of
 * design 4.3. Sequence k is tokens [k*T, k*T+T] (T+1 tokens: inputs the first T, targets the last T);
 * N = floor((ntokens-1)/T); step s of global batch G uses sequences (s*G + j) mod N, j = 0..G-1,
 * and DP rank r takes j in [r*b, (r+1)*b). "synthetic" gives uniformly random tokens in [0, V) from a
 * counter-based hash of (seed, absolute token index), with N = 1<<30 sequences, reading no file. */
#ifndef MESHSWEEP_DATA_H
#define MESHSWEEP_DATA_H
#include <stddef.h>
#include <stdint.h>

typedef struct data_file {
    char path[4096];
    int synthetic;
    uint64_t seed;        /* synthetic only */
    int vocab_size;
    uint16_t *tokens;     /* whole file in host memory (not engine memory: the host-side loader) */
    int64_t ntokens;
} data_file;

/* Open and validate: file exists and is readable, even byte length, non-empty, every id < vocab_size,
 * at least T+1 tokens. On error one line in err, returns -1 (nothing left allocated). */
int data_open(data_file *d, const char *path, int vocab_size, int T, uint64_t seed, char *err, size_t errlen);
void data_close(data_file *d);
int64_t data_num_sequences(const data_file *d, int T);
/* Fill inputs/targets [b*T] (int32) of DP rank r for global step `step` with global batch G = dp*b. */
void data_batch(const data_file *d, int64_t step, int G, int dp_rank, int b, int T, int32_t *inputs, int32_t *targets);
#endif
