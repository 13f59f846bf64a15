/* kernels/cuda/cuda_backend.h — what the CUDA backend exports besides `ops_cuda` (kernels/kernels.h).
 *
 * What it is: plain-C declarations (extern "C") of the device helpers around the op table — how many
 * GPUs there are, which one a rank uses, its memory and name, the datasheet peak for MFU (the engine
 * reaches them through `device_cuda`, kernels/device.h; tests and bench/ call them directly) — and
 * the bf16 GEMM path (fp32 accumulation) that `--dtype bf16` builds on.
 * Only present in builds with MESHSWEEP_CUDA (the Makefile defines it when nvcc is found).
 * It also declares `ops_cuda_bf16`, the bf16 mixed-precision op table (below).
 * What it is not: an allocator: memory still goes through core/engine/mem, which calls ops_cuda.dev_alloc
 * (a stream-ordered pool, kernels/cuda/ops_cuda.cu).
 *
 * Device selection must happen before the first op: the cuBLAS handle is created lazily, on the
 * device that is current at the first matmul, and stays bound to it.
 */
#ifndef MESHSWEEP_CUDA_BACKEND_H
#define MESHSWEEP_CUDA_BACKEND_H
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices; 0 (never an abort) when there is no driver or no device. A driver
 * too old for the runtime also gives 0, after one line on stderr naming both CUDA versions. */
int cuda_device_count(void);
/* "driver CUDA 12.4, runtime CUDA 13.0, cuBLAS 13.0.2" into buf ("driver CUDA none" without a
 * driver), and into why, when no device can be used, the reason ("" otherwise). Returns 0 (a
 * device), 1 (no driver or no device), 2 (the driver is too old for the runtime:
 * cudaErrorInsufficientDriver; why names both versions). */
int cuda_versions(char *buf, size_t len, char *why, size_t whylen);
/* Select device local_rank % count for this process and create its context.
 * Returns 0, or -1 with a one-line reason in err (no device, no driver, a driver too old for the
 * runtime with both versions, a device error). */
int cuda_select_device(int local_rank, char *err, size_t errlen);
/* Free and total bytes of the current device as the runtime reports them (0, 0 on error). */
void cuda_mem_info(size_t *free_b, size_t *total_b);
/* Name of the current device ("NVIDIA H100 80GB HBM3", ...); "unknown" when it cannot be read. */
const char *cuda_device_name(void);
/* Dense bf16 tensor-core peak in TFLOP/s from the datasheet, by device name:
 * H100/H200 SXM (and GH200) 989, H100 PCIe 756, H100 NVL 835, A100 312; 0 when unknown
 * (the engine then needs --peak-tflops for MFU). */
double cuda_peak_bf16_tflops(const char *name);
/* the device memory's bandwidth in GB/s from the datasheet, by device name (same devices; 0 otherwise) */
double cuda_peak_bw_gbs(const char *name);
/* Bytes the stream-ordered pool behind ops_cuda.dev_alloc reserves on the device now, and its
 * high-water mark (0, 0 before the first allocation, or when the pool is not used). */
void cuda_pool_reserved(uint64_t *now_b, uint64_t *high_b);
/* The next ops_cuda.dev_free of p returns it to the pool in the order of `stream` (a cudaStream_t) instead of
 * the compute stream: for a buffer that work queued on that stream (a started collective) still reads when
 * the engine frees it, so the engine frees it at the same point in its program (its tracked bytes and plan
 * unchanged) and no later kernel on the compute stream is handed the memory before that work is done. The
 * caller frees p next (an entry left behind would apply to the next buffer at that address). */
void cuda_free_after(const void *p, void *stream);

/* ---- bf16 path (bf16 storage as uint16_t bit patterns, fp32 accumulation in cuBLAS) ---- */
/* dst[i] = bf16(src[i]) rounded to nearest even; and back. Device pointers. */
void cuda_f32_to_bf16(uint16_t *dst, const float *src, size_t n);
void cuda_bf16_to_f32(float *dst, const uint16_t *src, size_t n);
/* out[N,Cout] (bf16) = in[N,Cin] (bf16) · w[Cout,Cin]ᵀ (bf16); accumulate != 0 adds to out */
void cuda_matmul_forward_bf16(uint16_t *out, const uint16_t *in, const uint16_t *w, int N, int Cin, int Cout,
                              int accumulate);
/* as above with an fp32 output (e.g. logits, or a residual stream kept in fp32) */
void cuda_matmul_forward_bf16_f32out(float *out, const uint16_t *in, const uint16_t *w, int N, int Cin, int Cout,
                                     int accumulate);
/* din[N,Cin] (bf16) += dout·w ; dw[Cout,Cin] (fp32) += doutᵀ·in ; NULL gradients skipped.
   The weight gradient stays fp32 because it feeds the fp32 reduce-scatter (docs/semantics.md#mixed-precision-bf16). */
void cuda_matmul_backward_bf16(uint16_t *din, float *dw, const uint16_t *dout, const uint16_t *in,
                               const uint16_t *w, int N, int Cin, int Cout);

/* ---- the mixed-precision op table (docs/semantics.md#mixed-precision-bf16), defined in kernels/cuda/ops_cuda_bf16.cu ----
 * The same signatures as every ops_t, but the compute-precision arguments (activations, their
 * gradients, gathered parameter copies, logits) hold bf16 bit patterns; rstd, lse, the CE statistics,
 * weight gradients (matmul dw, rmsnorm dw, embedding dtable), AdamW and sumsq/scale_inplace are fp32.
 * cbytes = 2; to_compute rounds fp32 to bf16. The per-op list is at the top of ops_cuda_bf16.cu. */
extern const ops_t ops_cuda_bf16;

/* ---- attention on tensor cores (kernels/cuda/attention*.cu) ----
 * 1 when the bf16 table's attention of head dimension hd runs on the mma.sync kernels; their
 * (mma kernel) launches so far (tests check which path ran); one warp computing D[16][8] =
 * A[16][16]·B[16][8] + C[16][8] (row-major device arrays, A and B bf16) through the kernels' own
 * instructions: mode 0 fragments by scalar loads, 2 by cp.async + ldmatrix (A x4, B x2.trans) as the
 * kernels load them; 1 and 3 the same with a wrong layout (A transposed; B by the plain x2), which a
 * self-test must see fail. */
int cuda_attention_tensor_cores(int hd);
long cuda_attention_tc_launches(void);
void cuda_mma_selftest(float *d, const uint16_t *a, const uint16_t *b, const float *c, int mode);
/* on (the default): every backward output is written by one thread in a fixed order, bit-reproducible.
 * off (--deterministic off): the tensor-core backward folds dq into the dk/dv pass, summed by fp32
 * atomics in a run-dependent order (one mma pass instead of two; its workspace is then
 * attention_flash_fold_ws_floats). Process-wide; returns the previous setting. */
int cuda_attention_set_deterministic(int on);

/* ---- timing for bench/gpu_bench.c (kernels/cuda/timing.cu) ----
 * Milliseconds per call of fn(arg), which launches work on the default stream: warmup calls, then
 * the median of 3 trials of reps calls between CUDA events (host clock in the emulator build).
 * And cublasGemmEx alone (bf16, fp32 compute) at the forward matmul's shape out[N,Cout] = in·wᵀ. */
double cuda_time_ms(void (*fn)(void *), void *arg, int warmup, int reps);
double cuda_cublas_gemm_bf16_ms(int N, int Cin, int Cout, int warmup, int reps);

#ifdef __cplusplus
}
#endif
#endif
