/* core/formats/data.h — token files and the batch layout of docs/semantics.md#data-order.
 * Formats, detected by content (docs/formats.md, "Token files"): llm.c (256 x int32 header, magic 20240520 v1
 * uint16 or 20240801 v7 uint32), NumPy .npy v1/2/3 (1-D, C order, little-endian u1/u2/u4/i2/i4/i8),
 * Megatron-LM / NeMo indexed datasets (PREFIX.bin + PREFIX.idx, "MMIDIDX", the sequences concatenated
 * in index order), and headerless little-endian uint16 (nanoGPT). Every file is memory-mapped
 * read-only: opening costs constant memory whatever the file's size (a Megatron index whose sequences
 * are not adjacent in the .bin adds 16 bytes per discontinuity). Ids are checked against vocab_size
 * at open time with a vectorised scan.
 * Batches: sequence k is tokens [k*T, k*T+T] (T+1 tokens: inputs the first T, targets the last T);
 * N = floor((ntokens-1)/T); step s of global batch G uses sequences (s*G + j) mod N, j = 0..G-1,
 * and DP rank r takes j in [r*b, (r+1)*b). "synthetic" gives uniformly random tokens in [0, V) from a
 * counter-based hash of (seed, absolute token index), with N = 1<<30 sequences, reading no file.
 * Writing the formats is core/formats/data_write.h. */
#ifndef MESHSWEEP_DATA_H
#define MESHSWEEP_DATA_H
#include <stddef.h>
#include <stdint.h>

typedef enum { DATA_NANOGPT = 0, DATA_LLMC, DATA_NPY, DATA_MEGATRON, DATA_SYNTHETIC, DATA_NFORMATS } data_format;
extern const char *const data_format_names[DATA_NFORMATS]; /* "nanogpt", "llmc", "npy", "megatron", "synthetic" */

/* element types of the token stream */
typedef enum { DATA_U8 = 0, DATA_I8, DATA_U16, DATA_I16, DATA_U32, DATA_I32, DATA_I64, DATA_NDTYPES } data_dtype;
extern const char *const data_dtype_names[DATA_NDTYPES]; /* "u8", "i8", "u16", "i16", "u32", "i32", "i64" */
int data_dtype_bytes(data_dtype t);

/* one run of the token stream that is contiguous in the mapped file */
typedef struct data_run {
    int64_t start;                /* stream index of the run's first token */
    const unsigned char *p;       /* its first byte in the mapping */
} data_run;

typedef struct data_file {
    char path[4096];              /* the token file (for Megatron the .bin) */
    data_format format;
    int synthetic;
    uint64_t seed;                /* synthetic only */
    int vocab_size;
    data_dtype dtype;
    int elem_bytes;
    int64_t ntokens;
    /* the stream: nruns runs, run i covering [run[i].start, run[i+1].start) (the last to ntokens) */
    int64_t nruns;
    data_run *run;                /* host memory; one entry unless a Megatron index jumps */
    data_run one;                 /* storage when nruns == 1 */
    void *map, *idx_map;          /* read-only mappings of the token file and the Megatron index */
    size_t map_bytes, idx_bytes;
} data_file;

/* Open, map and validate the file (format, header against the file size, every id in [0, vocab_size),
 * at least T+1 tokens). On error one line in err naming the file, returns -1, nothing left mapped. */
int data_open(data_file *d, const char *path, int vocab_size, int T, uint64_t seed, char *err, size_t errlen);
void data_close(data_file *d);
/* what was detected, for the record and the first progress line: "llmc u16" (format and token type;
 * "synthetic" for synthetic tokens) */
void data_describe(const data_file *d, char *out, size_t cap);
int64_t data_num_sequences(const data_file *d, int T);
/* tokens [first, first+n) of the stream into dst (first + n <= ntokens; synthetic: any range). 0, or -1
 * with one line in err when the file shrank under its mapping since it was opened (another process
 * truncated it: the read would raise SIGBUS); dst is zeros then. */
int data_read(const data_file *d, int64_t first, int64_t n, int64_t *dst, char *err, size_t errlen);
/* Fill inputs/targets [b*T] (int32) of DP rank r for global step `step` with global batch G = dp*b.
 * 0, or -1 as data_read (both buffers zeros then: valid ids, so the step's collectives can still run). */
int data_batch(const data_file *d, int64_t step, int G, int dp_rank, int b, int T, int32_t *inputs, int32_t *targets,
               char *err, size_t errlen);
#endif
