/* kernels/cuda/cuda_emu.cuh — a host emulator for the subset of CUDA, the runtime and cuBLAS that
 * the .cu files of kernels/cuda use, so the kernels can be *executed* on machines without a GPU.
 *
 * What it is: with MESHSWEEP_CUDA_EMU defined, cuda_common.cuh includes this instead of the CUDA
 * headers and the .cu files compile as ordinary C++20. Each block runs with one host thread per
 * CUDA thread; __syncthreads is a barrier over the block, shuffles exchange through a per-warp
 * slot array between two warp barriers, so a shuffle or __syncthreads reached by only part of a
 * warp/block deadlocks here (run it under `timeout`) instead of silently working. Blocks run one
 * after another, which is what lets `__shared__` be a function-static. Device memory is host
 * memory; cudaMemcpy refuses overlapping ranges (UB on the device); cublasSgemm/GemmEx are naive
 * column-major loops checking the BLAS leading-dimension rules, i.e. the documented semantics
 * the row-major mapping in matmul.cu relies on.
 * What it is not: a timing model, nor part of the library build (the Makefile compiles the .cu files
 * with nvcc). Build of the CUDA test against it (from the repository root):
 *   for f in kernels/cuda/[a-z]*.cu; do g++ -std=c++20 -O1 -g -x c++ -DMESHSWEEP_CUDA -DMESHSWEEP_CUDA_EMU \
 *       -I. -Wall -Wextra -Wno-unknown-pragmas -c $f -o /tmp/emu_$(basename $f .cu).o; done
 *   gcc -std=c11 -D_GNU_SOURCE -O2 -I. -I/usr/include/x86_64-linux-gnu/openblas-pthread -DMESHSWEEP_CUDA \
 *       tests/test_cuda_kernels.c kernels/cpu/ops_cpu.c /tmp/emu_*.o -lopenblas -lm -lstdc++ \
 *       -o /tmp/test_cuda_emu && timeout 600 /tmp/test_cuda_emu
 */
#ifndef MESHSWEEP_CUDA_EMU_CUH
#define MESHSWEEP_CUDA_EMU_CUH
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

/* ---- thread and block coordinates ---------------------------------------------------------- */
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct emu_uint3 { unsigned x, y, z; };
inline thread_local emu_uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

struct emu_block {
    std::barrier<> *block;
    std::barrier<> *warp[32];
    uint64_t slot[32][32];
};
inline emu_block *emu_cur;
inline std::vector<unsigned char> emu_smem_buf(228 * 1024);
inline size_t emu_smem_limit = 48 * 1024; /* raised by cudaFuncSetAttribute, as on the device */
inline void *emu_dynamic_smem() { return emu_smem_buf.data(); }

inline int emu_tid() { return (int)(threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y); }
inline void __syncthreads() { emu_cur->block->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_cur->warp[emu_tid() / 32]->arrive_and_wait(); }

template <typename T> inline T emu_shfl(T v, int src) {
    static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
    const int t = emu_tid(), w = t / 32, lane = t % 32;
    uint64_t u = 0;
    memcpy(&u, &v, sizeof(T));
    emu_cur->slot[w][lane] = u;
    emu_cur->warp[w]->arrive_and_wait();
    T r;
    memcpy(&r, &emu_cur->slot[w][src & 31], sizeof(T));
    emu_cur->warp[w]->arrive_and_wait();
    return r;
}
template <typename T> inline T __shfl_sync(unsigned, T v, int src) { return emu_shfl(v, src); }
template <typename T> inline T __shfl_xor_sync(unsigned, T v, int mask) { return emu_shfl(v, (emu_tid() % 32) ^ mask); }
template <typename T> inline T __shfl_down_sync(unsigned, T v, unsigned delta) {
    const int lane = emu_tid() % 32;
    return emu_shfl(v, lane + (int)delta < 32 ? lane + (int)delta : lane);
}

inline std::mutex emu_atomic_mutex;
inline float atomicAdd(float *p, float v) {
    std::lock_guard<std::mutex> g(emu_atomic_mutex);
    float old = *p;
    *p = old + v;
    return old;
}
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }

/* ---- runtime --------------------------------------------------------------------------------- */
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2,
                   cudaErrorLaunchFailure = 719 };
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                      cudaMemcpyDeviceToDevice, cudaMemcpyDefault };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
struct cudaDeviceProp { char name[256]; };
inline cudaError_t emu_last_error = cudaSuccess;
inline const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidValue: return "invalid argument";
    default: return "unspecified launch failure";
    }
}
inline cudaError_t cudaGetLastError() { cudaError_t e = emu_last_error; emu_last_error = cudaSuccess; return e; }
inline cudaError_t emu_fail(cudaError_t e) { emu_last_error = e; return e; }
inline cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
inline cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : emu_fail(cudaErrorInvalidValue); }
inline cudaError_t cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
    snprintf(p->name, sizeof p->name, "emulated device");
    return cudaSuccess;
}
inline cudaError_t cudaMemGetInfo(size_t *f, size_t *t) { *f = (size_t)1 << 30; *t = (size_t)2 << 30; return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaMalloc(void **p, size_t bytes) {
    /* a guard against absurd requests that malloc might grant lazily */
    *p = bytes > ((size_t)1 << 40) ? nullptr : malloc(bytes);
    return *p ? cudaSuccess : emu_fail(cudaErrorMemoryAllocation);
}
inline cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
inline cudaError_t cudaMemset(void *p, int v, size_t n) { memset(p, v, n); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) {
    const char *dc = (const char *)d, *sc = (const char *)s;
    if (n && dc < sc + n && sc < dc + n) {
        fprintf(stderr, "emu: cudaMemcpy with overlapping ranges\n");
        abort();
    }
    memcpy(d, s, n);
    return cudaSuccess;
}
template <typename T> inline cudaError_t cudaMemcpyFromSymbol(void *dst, const T &sym, size_t n, size_t off = 0,
                                                              cudaMemcpyKind = cudaMemcpyDeviceToHost) {
    memcpy(dst, (const char *)&sym + off, n);
    return cudaSuccess;
}
template <typename F> inline cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int v) {
    if ((size_t)v > emu_smem_buf.size()) return emu_fail(cudaErrorInvalidValue);
    if ((size_t)v > emu_smem_limit) emu_smem_limit = (size_t)v;
    return cudaSuccess;
}

template <typename F> inline void emu_launch(dim3 grid, dim3 block, size_t smem, F f) {
    const unsigned nt = block.x * block.y * block.z;
    if (nt == 0 || nt > 1024 || nt % 32 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
        grid.z > 65535 || smem > emu_smem_limit) {
        fprintf(stderr, "emu: bad launch grid (%u,%u,%u) block (%u,%u,%u) smem %zu (limit %zu)\n", grid.x, grid.y,
                grid.z, block.x, block.y, block.z, smem, emu_smem_limit);
        emu_last_error = cudaErrorInvalidValue;
        return;
    }
    gridDim = grid;
    blockDim = block;
    /* garbage in shared memory, as on the device: reads before writes show up as wrong results */
    memset(emu_smem_buf.data(), 0x7f, emu_smem_buf.size());
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                std::barrier<> bb((std::ptrdiff_t)nt);
                std::vector<std::barrier<> *> wb;
                emu_block st;
                st.block = &bb;
                for (unsigned w = 0; w < nt / 32; w++) {
                    wb.push_back(new std::barrier<>(32));
                    st.warp[w] = wb.back();
                }
                emu_cur = &st;
                std::vector<std::thread> th;
                th.reserve(nt);
                for (unsigned t = 0; t < nt; t++)
                    th.emplace_back([=, &f] {
                        threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                        blockIdx = {bx, by, bz};
                        f();
                    });
                for (auto &x : th) x.join();
                for (auto *p : wb) delete p;
            }
}

/* ---- cuBLAS ---------------------------------------------------------------------------------- */
typedef struct emu_cublas *cublasHandle_t;
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7 };
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 };
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16BF = 14 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };
inline const char *cublasGetStatusString(cublasStatus_t s) { return s ? "CUBLAS_STATUS_INVALID_VALUE" : "CUBLAS_STATUS_SUCCESS"; }
inline cublasStatus_t cublasCreate(cublasHandle_t *h) { *h = (cublasHandle_t)&emu_smem_limit; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }

inline float emu_load(const void *p, cudaDataType_t t, size_t i) {
    if (t == CUDA_R_32F) return ((const float *)p)[i];
    return __uint_as_float((unsigned)((const uint16_t *)p)[i] << 16);
}
inline void emu_store(void *p, cudaDataType_t t, size_t i, float v) {
    if (t == CUDA_R_32F) { ((float *)p)[i] = v; return; }
    unsigned u = __float_as_uint(v);
    u += 0x7fffu + ((u >> 16) & 1u);
    ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
}
/* C = alpha·op(A)·op(B) + beta·C, column-major, with the reference BLAS argument checks
 * (A is m×k if op = N, else stored k×m; lda >= its row count; ldc >= m). beta = 0 never reads C. */
inline cublasStatus_t emu_gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                               const void *A, cudaDataType_t at, int lda, const void *B, cudaDataType_t bt, int ldb,
                               float beta, void *C, cudaDataType_t ct, int ldc) {
    const int arows = ta == CUBLAS_OP_N ? m : k, brows = tb == CUBLAS_OP_N ? k : n;
    if (m < 0 || n < 0 || k < 0 || lda < (arows > 1 ? arows : 1) || ldb < (brows > 1 ? brows : 1) ||
        ldc < (m > 1 ? m : 1)) {
        fprintf(stderr, "emu: gemm argument error m=%d n=%d k=%d lda=%d ldb=%d ldc=%d\n", m, n, k, lda, ldb, ldc);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0.0;
            for (int p = 0; p < k; p++) {
                const size_t ai = ta == CUBLAS_OP_N ? (size_t)p * lda + i : (size_t)i * lda + p;
                const size_t bi = tb == CUBLAS_OP_N ? (size_t)j * ldb + p : (size_t)p * ldb + j;
                s += (double)emu_load(A, at, ai) * (double)emu_load(B, bt, bi);
            }
            const size_t ci = (size_t)j * ldc + i;
            double r = (double)alpha * s;
            if (beta != 0.0f) r += (double)beta * emu_load(C, ct, ci);
            emu_store(C, ct, ci, (float)r);
        }
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const float *alpha, const float *A, int lda, const float *B, int ldb,
                                  const float *beta, float *C, int ldc) {
    return emu_gemm(ta, tb, m, n, k, *alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, *beta, C, CUDA_R_32F, ldc);
}
inline cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                   const void *alpha, const void *A, cudaDataType_t at, int lda, const void *B,
                                   cudaDataType_t bt, int ldb, const void *beta, void *C, cudaDataType_t ct, int ldc,
                                   cublasComputeType_t, cublasGemmAlgo_t) {
    return emu_gemm(ta, tb, m, n, k, *(const float *)alpha, A, at, lda, B, bt, ldb, *(const float *)beta, C, ct,
                    ldc);
}
#include "kernels/cuda/cuda_emu_mma.cuh" /* warp-level matrix operations (mma.sync) */
#endif
