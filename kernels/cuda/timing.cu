/* kernels/cuda/timing.cu — kernel timing for bench/gpu_bench.c: CUDA events around a host callback that
 * launches work, and the plain cuBLAS bf16 GEMM the engine's matmul is compared with.
 *
 * What it is: cuda_time_ms runs the callback `warmup` times, then TIMING_TRIALS trials of `reps`
 * calls each between two events on the legacy default stream (the stream the ops launch on), and
 * returns the median trial's milliseconds per call. cuda_cublas_gemm_bf16_ms times cublasGemmEx
 * itself (bf16 in and out, fp32 compute, no wrapper) at the transposes of the engine's forward
 * matmul (kernels/cuda/matmul.cu), on buffers of its own.
 * In the emulator build (MESHSWEEP_CUDA_EMU) the events are replaced by the host clock after a
 * device synchronisation: that only lets the benchmark run end to end there; an emulated time
 * says nothing about a GPU.
 * What it is not: a profiler, nor part of any op.
 */
#include "kernels/cuda/cuda_common.cuh"

#include <algorithm>
#include <chrono>

#define TIMING_TRIALS 3

static double trial_ms(void (*fn)(void *), void *arg, int reps) {
#ifdef MESHSWEEP_CUDA_EMU
    cudaCheck(cudaDeviceSynchronize());
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; i++) fn(arg);
    cudaCheck(cudaDeviceSynchronize());
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
#else
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&b));
    cudaCheck(cudaEventRecord(a, 0));
    for (int i = 0; i < reps; i++) fn(arg);
    cudaCheck(cudaEventRecord(b, 0));
    cudaCheck(cudaEventSynchronize(b));
    float ms = 0.0f;
    cudaCheck(cudaEventElapsedTime(&ms, a, b));
    cudaCheck(cudaEventDestroy(a));
    cudaCheck(cudaEventDestroy(b));
    return (double)ms;
#endif
}

extern "C" double cuda_time_ms(void (*fn)(void *), void *arg, int warmup, int reps) {
    if (reps < 1) reps = 1;
    for (int i = 0; i < warmup; i++) fn(arg);
    double t[TIMING_TRIALS];
    for (int i = 0; i < TIMING_TRIALS; i++) t[i] = trial_ms(fn, arg, reps) / reps;
    std::sort(t, t + TIMING_TRIALS);
    return t[TIMING_TRIALS / 2];
}

struct gemm_args {
    int m, n, k;
    void *A, *B, *C;
};
static void gemm_call(void *p) {
    const gemm_args *g = static_cast<const gemm_args *>(p);
    const float one = 1.0f, zero = 0.0f;
    cublasCheck(cublasGemmEx(cuda_cublas(), CUBLAS_OP_T, CUBLAS_OP_N, g->m, g->n, g->k, &one, g->A, CUDA_R_16BF,
                             g->k, g->B, CUDA_R_16BF, g->k, &zero, g->C, CUDA_R_16BF, g->m, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT));
}

/* out[N,Cout] = in[N,Cin]·w[Cout,Cin]ᵀ as cuBLAS alone computes it: gemm(T, N, Cout, N, Cin) */
extern "C" double cuda_cublas_gemm_bf16_ms(int N, int Cin, int Cout, int warmup, int reps) {
    gemm_args g = {Cout, N, Cin, nullptr, nullptr, nullptr};
    cudaCheck(cudaMalloc(&g.A, (size_t)Cout * Cin * 2));
    cudaCheck(cudaMalloc(&g.B, (size_t)N * Cin * 2));
    cudaCheck(cudaMalloc(&g.C, (size_t)N * Cout * 2));
    cudaCheck(cudaMemset(g.A, 0x3c, (size_t)Cout * Cin * 2)); /* bf16 0x3c3c, about 0.0115: finite sums */
    cudaCheck(cudaMemset(g.B, 0x3c, (size_t)N * Cin * 2));
    const double ms = cuda_time_ms(gemm_call, &g, warmup, reps);
    cudaCheck(cudaFree(g.A));
    cudaCheck(cudaFree(g.B));
    cudaCheck(cudaFree(g.C));
    return ms;
}
