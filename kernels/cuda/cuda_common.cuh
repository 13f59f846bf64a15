/* kernels/cuda/cuda_common.cuh — private to the .cu files of kernels/cuda: error checks, launch helpers,
 * warp/block reductions and the internal entry points the .cu files share.
 *
 * What it is: the small amount of glue every CUDA file needs. Every runtime and cuBLAS call goes
 * through cudaCheck/cublasCheck (file:line, the error string, exit 1); every kernel launch goes
 * through LAUNCH, which checks the launch. LAUNCH and DYNAMIC_SMEM exist so that the same sources
 * also compile as host C++ against the host emulator of the tests (MESHSWEEP_CUDA_EMU, tests/emu/), an emulator
 * that runs each CUDA thread as a host thread: that is how these kernels are executed on machines
 * without a GPU.
 * What it is not: public. The engine sees kernels/kernels.h and kernels/cuda/cuda_backend.h only.
 */
#ifndef MESHSWEEP_CUDA_COMMON_CUH
#define MESHSWEEP_CUDA_COMMON_CUH
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>

/* in emulator builds these names resolve to the host emulator (-Itests/emu/include) */
#include <cuda_runtime.h>
#include <cublas_v2.h>

extern "C" {
#include "kernels/kernels.h"
#include "kernels/device.h"
#include "kernels/cuda/cuda_backend.h"
}

/* ---- error checks ------------------------------------------------------------------------ */
static inline void cuda_check_(cudaError_t e, const char *what, const char *file, int line) {
    if (e != cudaSuccess) {
        fprintf(stderr, "CUDA error at %s:%d: %s (in %s)\n", file, line, cudaGetErrorString(e), what);
        exit(1);
    }
}
static inline void cublas_check_(cublasStatus_t s, const char *what, const char *file, int line) {
    if (s != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cuBLAS error at %s:%d: %s (status %d, in %s)\n", file, line, cublasGetStatusString(s),
                (int)s, what);
        exit(1);
    }
}
#define cudaCheck(call) cuda_check_((call), #call, __FILE__, __LINE__)
#define cublasCheck(call) cublas_check_((call), #call, __FILE__, __LINE__)

/* ---- launches ----------------------------------------------------------------------------- */
#ifdef MESHSWEEP_CUDA_EMU
#define LAUNCH(kernel, grid, block, smem, ...)                                         \
    do {                                                                               \
        emu_launch((grid), (block), (smem), (cudaStream_t)0, #kernel,                 \
                   [](auto... a_) { kernel(a_...); }, __VA_ARGS__);                    \
        cudaCheck(cudaGetLastError());                                                 \
    } while (0)
#define DYNAMIC_SMEM(type, name) type *name = (type *)emu_dynamic_smem()
/* small grids in the emulator: every grid-stride loop then takes several trips */
#define GRID_CAP 3u
#else
#define LAUNCH(kernel, grid, block, smem, ...)                                         \
    do {                                                                               \
        kernel<<<(grid), (block), (smem)>>>(__VA_ARGS__);                              \
        cudaCheck(cudaGetLastError());                                                 \
    } while (0)
#define DYNAMIC_SMEM(type, name) extern __shared__ type name[]
#define GRID_CAP 65536u
#endif

#define FULL_MASK 0xffffffffu
/* grid-stride loop over [0, n): correct for any grid size, so grids can be capped */
#define GRID_STRIDE(i, n)                                                              \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n);      \
         i += (size_t)gridDim.x * blockDim.x)

/* blocks for n items at `per_block` items each, capped (callers use grid-stride loops) */
static inline unsigned grid_for(size_t n, unsigned per_block) {
    size_t g = (n + per_block - 1) / per_block;
    if (g > GRID_CAP) g = GRID_CAP;
    return g == 0 ? 1u : (unsigned)g;
}

static __device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }

/* ---- reductions (blockDim.x a multiple of 32, 1-D blocks) ---------------------------------- */
template <typename T> static __device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}
static __device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}
/* Sum over the block, returned to every thread; sh is __shared__ T[32]. Every thread of the
 * block must call it (it synchronises). Every warp adds the partials in the same order, so all
 * threads get the identical value. The leading barrier makes back-to-back calls with the same sh
 * safe. */
template <typename T> static __device__ __forceinline__ T block_sum(T v, T *sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : (T)0;
    return warp_sum(v);
}
static __device__ __forceinline__ float block_max(float v, float *sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : -INFINITY;
    return warp_max(v);
}

/* ---- storage types: fp32 and bf16 ----------------------------------------------------------
 * The kernels of ops_cuda.cu and attention_scalar.cu are templates on the storage type S of their
 * compute-precision (C-typed) arguments: S = float for ops_cuda, S = bf16s for ops_cuda_bf16.
 * They always load into float, compute in float and store through cstore, so the fp32
 * instantiation is the plain fp32 code (cload/cstore are the identity there). bf16s is a struct,
 * not a bare uint16_t, so that no integer arithmetic or conversion can touch it by accident. */
struct bf16s {
    uint16_t bits;
};
static_assert(sizeof(bf16s) == 2, "bf16s must be exactly the 2 bytes of a bf16");

/* round to nearest, ties to even; NaN stays a (quiet) NaN (the rule of cuda_f32_to_bf16) */
static __device__ __forceinline__ uint16_t bf16_round_bits(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static __device__ __forceinline__ float cload(const float *p, size_t i) { return p[i]; }
static __device__ __forceinline__ float cload(const bf16s *p, size_t i) {
    return __uint_as_float((uint32_t)p[i].bits << 16);
}
static __device__ __forceinline__ void cstore(float *p, size_t i, float v) { p[i] = v; }
static __device__ __forceinline__ void cstore(bf16s *p, size_t i, float v) { p[i].bits = bf16_round_bits(v); }

/* ---- 16-byte accesses of 8 consecutive elements ---------------------------------------------
 * ld8 / st8 move 8 elements of storage type S between memory and 8 floats: one 16-byte access for
 * bf16, two for fp32. p must be 16-byte aligned (al16 on the host decides a kernel's path; the
 * element-wise kernels take it when every pointer is aligned and fall back to 1-element accesses
 * otherwise). The arithmetic per element is the same either way. */
struct alignas(16) vec16 {
    uint32_t w[4];
};
static __device__ __forceinline__ void ld8(float f[8], const bf16s *p) {
    const vec16 x = *reinterpret_cast<const vec16 *>(p);
#pragma unroll
    for (int u = 0; u < 4; u++) {
        f[2 * u] = __uint_as_float(x.w[u] << 16);
        f[2 * u + 1] = __uint_as_float(x.w[u] & 0xffff0000u);
    }
}
static __device__ __forceinline__ void ld8(float f[8], const float *p) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const vec16 x = *reinterpret_cast<const vec16 *>(p + 4 * h);
#pragma unroll
        for (int u = 0; u < 4; u++) f[4 * h + u] = __uint_as_float(x.w[u]);
    }
}
static __device__ __forceinline__ void st8(bf16s *p, const float f[8]) {
    vec16 x;
#pragma unroll
    for (int u = 0; u < 4; u++) x.w[u] = bf16_round_bits(f[2 * u]) | (uint32_t)bf16_round_bits(f[2 * u + 1]) << 16;
    *reinterpret_cast<vec16 *>(p) = x;
}
static __device__ __forceinline__ void st8(float *p, const float f[8]) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
        vec16 x;
#pragma unroll
        for (int u = 0; u < 4; u++) x.w[u] = __float_as_uint(f[4 * h + u]);
        *reinterpret_cast<vec16 *>(p + 4 * h) = x;
    }
}
/* NULL counts as aligned (an absent optional argument) */
static inline bool al16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* ---- internal entry points shared between the .cu files ------------------------------------ */
/* device.cu: the process's cuBLAS handle, created on first use */
cublasHandle_t cuda_cublas(void);
/* matmul.cu */
void cuda_matmul_forward(float *out, const float *in, const float *w, int N, int Cin, int Cout, int accumulate);
void cuda_matmul_backward(float *din, float *dw, const float *dout, const float *in, const float *w, int N, int Cin,
                          int Cout);
/* attention.cu: the fp32 entry points of ops_cuda and the bf16 ones of ops_cuda_bf16; lse and ws
 * are fp32 in both (ws: attention_flash_ws_floats floats, needed by the bf16 tensor-core backward) */
void cuda_attention_forward(float *out, float *lse, float *ws, const float *q, const float *k, const float *v, int B,
                            int T, int H, int KV, int hd);
void cuda_attention_backward(float *dq, float *dk, float *dv, float *ws, const float *dout, const float *out,
                             const float *lse, const float *q, const float *k, const float *v, int B, int T, int H,
                             int KV, int hd);
void cuda_attention_forward_bf16(bf16s *out, float *lse, const bf16s *q, const bf16s *k, const bf16s *v, int B, int T,
                                 int H, int KV, int hd);
void cuda_attention_backward_bf16(bf16s *dq, bf16s *dk, bf16s *dv, float *ws, const bf16s *dout, const bf16s *out,
                                  const float *lse, const bf16s *q, const bf16s *k, const bf16s *v, int B, int T,
                                  int H, int KV, int hd);
/* ops_cuda.cu: the ops whose arguments have the compute precision, as templates on the storage
 * type S (defined for S = float and S = bf16s; the fp32 ones are what ops_cuda holds). Arguments
 * typed float stay fp32 for both: rstd, the weight gradients of embedding and rmsnorm, the
 * cross-entropy statistics. Semantics as in kernels/kernels.h. */
template <typename S>
void cuda_embedding_forward_t(S *out, const int32_t *tok, const S *table, int N, int C, int v_start, int v_count);
template <typename S>
void cuda_embedding_backward_t(float *dtable, const S *dout, const int32_t *tok, int N, int C, int v_start,
                               int v_count);
template <typename S>
void cuda_rmsnorm_forward_t(S *out, float *rstd, const S *x, const S *w, int N, int C, float eps);
template <typename S>
void cuda_rmsnorm_backward_t(S *dx, float *dw, const S *dout, const S *x, const S *w, const float *rstd, int N,
                             int C);
template <typename S> void cuda_rope_forward_t(S *out, const S *x, const float *tab, int B, int T, int nh, int hd);
template <typename S> void cuda_rope_backward_t(S *din, const S *dout, const float *tab, int B, int T, int nh, int hd);
template <typename S> void cuda_swiglu_forward_t(S *out, const S *gate, const S *up, size_t n);
template <typename S>
void cuda_swiglu_backward_t(S *dgate, S *dup, const S *dout, const S *gate, const S *up, size_t n);
template <typename S> void cuda_ce_rowmax_t(float *mx, const S *logits, int N, int Vloc, int v_valid);
template <typename S>
void cuda_ce_sumexp_t(float *se, const S *logits, const float *mx, int N, int Vloc, int v_valid);
template <typename S>
void cuda_ce_target_t(float *tl, const S *logits, const int32_t *tgt, int N, int Vloc, int v_start);
template <typename Dt, typename S>
void cuda_ce_backward_t(Dt *dlogits, const S *logits, const float *mx, const float *se, const int32_t *tgt,
                        float scale, int N, int Vloc, int v_start, int v_valid);
template <typename S> void cuda_add_inplace_t(S *y, const S *x, size_t n);
/* the fused AdamW of kernels.h (adamw_fused) with the compute copy pc of storage type C (defined for
 * C = float and C = bf16s) */
template <typename C>
void cuda_adamw_fused_t(float *p, C *pc, float *g, float *m, float *v, size_t n, float gscale, int zero_g, float lr,
                        float beta1, float beta2, float eps, float wd, float bc1, float bc2);
/* a fresh copy of the ops_cuda table (built at the call, so another translation unit may use it
 * during its own static initialisation, when ops_cuda itself may not be initialised yet) */
ops_t cuda_ops_fp32_table(void);

#endif
