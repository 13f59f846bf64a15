/* core/formats/data_write.h — writing token files in every format core/formats/data.h reads (nanoGPT uint16, llm.c,
 * NumPy .npy v1, Megatron-LM indexed dataset), for build/mkdata, conversion and tests.
 * Each file is written to a temp name, fsynced and renamed: an interrupted or failed write leaves
 * no half-written token file. Not: reading (core/formats/data.h), tokenisation. */
#ifndef MESHSWEEP_DATA_WRITE_H
#define MESHSWEEP_DATA_WRITE_H
#include "core/formats/data.h"

/* tokens [first, first+n) of the source into dst; 0, or -1 with one line in err (the write fails) */
typedef int (*data_src_fn)(void *ctx, int64_t first, int64_t n, int64_t *dst, char *err, size_t errlen);

/* Is dtype writable in fmt? (nanogpt: u16; llmc: u16, u32; npy: any but u32 is '<u4';
 * megatron: u8, i8, i16, i32, i64, u16 — it has no uint32 code.) */
int data_write_dtype_ok(data_format fmt, data_dtype t);
/* the dtype written when none is asked for: u16 when every id < 65536, else u32 (llmc, npy) or i32 (megatron) */
data_dtype data_write_default_dtype(data_format fmt, int64_t max_id);
/* file name(s) of fmt for a stem: "STEM.bin" (nanogpt, llmc), "STEM.npy", "STEM.bin" + "STEM.idx" (megatron) */
const char *data_write_ext(data_format fmt);

/* Write ntokens tokens from src as fmt/dtype to stem + data_write_ext(fmt) (and stem.idx for Megatron).
 * Megatron sequences end at seq_ends[0..nseq) (increasing, last = ntokens; one document each); with
 * seq_ends NULL they are blocks of at most 2^20 tokens. A token that does not fit dtype, or a count the
 * format cannot hold, is an error. Returns 0, or -1 with one line in err (nothing left behind). */
int data_write(const char *stem, data_format fmt, data_dtype dtype, data_src_fn src, void *ctx, int64_t ntokens,
               const int64_t *seq_ends, int64_t nseq, char *err, size_t errlen);
#endif
