/* core/engine/init.h — mesh-independent initialisation (docs/semantics.md#initialisation): every element of every full HF tensor
 * is a pure function of (seed, tensor name, element index): splitmix64 hashing of the three gives two
 * uniforms, Box–Muller (cosine branch) a standard normal. Any mesh generates exactly its own elements.
 *
 * init_fill generates a rank's owned range of one tensor block; it splits the range over host threads
 * (pthreads), each element computed by the same scalar code, so the values are bit for bit those of
 * init_normal whatever the thread count. Not here: which elements a rank owns (core/engine/fsdp.c), and a
 * device kernel — the device's double-precision log and cos are not glibc's, so it could not promise
 * the same bits. */
#ifndef MESHSWEEP_INIT_H
#define MESHSWEEP_INIT_H
#include <stdint.h>
uint64_t init_name_hash(const char *name);
/* standard normal N(0,1) for (seed, name hash, element index) */
double init_normal(uint64_t seed, uint64_t name_hash, uint64_t index);
uint64_t init_splitmix64(uint64_t x);

/* A local block [rows, cols] of an HF tensor [full_rows, full_cols] (full_rows implied): local
 * element (r, c) is HF element (row0 + r, col0 + c). Rows >= valid_rows are padding (0); ndim 1 is a
 * norm weight (all ones). */
typedef struct init_block {
    uint64_t seed, name_hash;
    double std;
    int64_t cols, full_cols, row0, col0, valid_rows;
    int ndim;
} init_block;
/* dst[e - first] = value of local flat element e, for e in [first, first + count), with `threads`
 * host threads (<= 1: the calling thread only; ranges under 64 Ki elements never split). */
void init_fill(const init_block *b, int64_t first, int64_t count, float *dst, int threads);
/* Host threads for initialisation: MESHSWEEP_INIT_THREADS when set, else the CPUs this process may
 * run on divided by the ranks of this host that Open MPI, MPICH or Slurm report (at least 1). */
int init_threads(void);
#endif
