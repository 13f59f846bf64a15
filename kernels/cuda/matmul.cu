/* kernels/cuda/matmul.cu — the linear layers on cuBLAS: fp32 (ops_cuda.matmul_*) and the bf16
 * path with fp32 accumulation (cuda_matmul_*_bf16 in cuda_backend.h), plus bf16 conversions.
 *
 * What it is: the row-major [N,C] <-> column-major mapping, worked out once and commented here.
 * What it is not: a GEMM implementation; cuBLAS picks the algorithm.
 *
 * The mapping. A row-major matrix X[r,c] (leading dimension c) occupies the same bytes as the
 * column-major matrix Xᵀ (c rows, r columns, leading dimension c). So every row-major product
 * is computed as its transpose in cuBLAS's column-major world:
 *
 *   forward   out[N,Cout] = in[N,Cin] · w[Cout,Cin]ᵀ
 *             ⇔ outᵀ (Cout×N, ld Cout) = w (Cout×Cin) · inᵀ (Cin×N)
 *             w's bytes are the column-major Cin×Cout matrix wᵀ (ld Cin): op = T gives w;
 *             in's bytes are the column-major Cin×N matrix inᵀ (ld Cin): op = N.
 *             gemm(T, N, m=Cout, n=N, k=Cin, A=w lda=Cin, B=in ldb=Cin, C=out ldc=Cout)
 *   din       din[N,Cin] += dout[N,Cout] · w[Cout,Cin]
 *             ⇔ dinᵀ (Cin×N, ld Cin) += wᵀ (Cin×Cout) · doutᵀ (Cout×N)
 *             w's bytes are wᵀ (ld Cin): op = N; dout's bytes are doutᵀ (Cout×N, ld Cout): op = N.
 *             gemm(N, N, m=Cin, n=N, k=Cout, A=w lda=Cin, B=dout ldb=Cout, C=din ldc=Cin, beta=1)
 *   dw        dw[Cout,Cin] += dout[N,Cout]ᵀ · in[N,Cin]
 *             ⇔ dwᵀ (Cin×Cout, ld Cin) += inᵀ (Cin×N) · dout (N×Cout)
 *             in's bytes are inᵀ (ld Cin): op = N; dout's bytes are doutᵀ (Cout×N, ld Cout): op = T.
 *             gemm(N, T, m=Cin, n=Cout, k=N, A=in lda=Cin, B=dout ldb=Cout, C=dw ldc=Cin, beta=1)
 * (the same three calls as llm.c's matmul_forward/backward, which use the same layouts)
 */
#include "kernels/cuda/cuda_common.cuh"

#include <string.h>

/* ---- fp32 ---------------------------------------------------------------------------------- */

void cuda_matmul_forward(float *out, const float *in, const float *w, int N, int Cin, int Cout, int accumulate) {
    if (N <= 0 || Cout <= 0) return;
    if (Cin <= 0) { /* empty sum; cuBLAS would reject lda = 0 */
        if (!accumulate) cudaCheck(cudaMemset(out, 0, (size_t)N * (size_t)Cout * sizeof(float)));
        return;
    }
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    cublasCheck(cublasSgemm(cuda_cublas(), CUBLAS_OP_T, CUBLAS_OP_N, Cout, N, Cin, &one, w, Cin, in, Cin, &beta,
                            out, Cout));
}

void cuda_matmul_backward(float *din, float *dw, const float *dout, const float *in, const float *w, int N,
                          int Cin, int Cout) {
    if (N <= 0 || Cin <= 0 || Cout <= 0) return;
    const float one = 1.0f;
    if (din)
        cublasCheck(cublasSgemm(cuda_cublas(), CUBLAS_OP_N, CUBLAS_OP_N, Cin, N, Cout, &one, w, Cin, dout, Cout,
                                &one, din, Cin));
    if (dw)
        cublasCheck(cublasSgemm(cuda_cublas(), CUBLAS_OP_N, CUBLAS_OP_T, Cin, Cout, N, &one, in, Cin, dout, Cout,
                                &one, dw, Cin));
}

/* ---- bf16 conversions ------------------------------------------------------------------------
 * Written out on the bit patterns rather than through cuda_bf16.h so the rounding is explicit:
 * round to nearest, ties to even; NaN stays a (quiet) NaN. */

static __device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* vec: both 16-byte aligned, 8 elements a thread (32 bytes in, 16 out), the n % 8 tail one by one */
static __global__ void f32_to_bf16_kernel(uint16_t *dst, const float *src, size_t n, int vec) {
    const size_t n8 = vec ? n / 8 : 0;
    GRID_STRIDE(c, n8) {
        float f[8];
        ld8(f, src + 8 * c);
        st8(reinterpret_cast<bf16s *>(dst) + 8 * c, f);
    }
    GRID_STRIDE(j, n - 8 * n8) dst[8 * n8 + j] = f32_to_bf16_bits(src[8 * n8 + j]);
}

static __global__ void bf16_to_f32_kernel(float *dst, const uint16_t *src, size_t n) {
    GRID_STRIDE(i, n) dst[i] = __uint_as_float((uint32_t)src[i] << 16);
}

extern "C" void cuda_f32_to_bf16(uint16_t *dst, const float *src, size_t n) {
    if (n == 0) return;
    const int vec = al16(dst) && al16(src);
    LAUNCH(f32_to_bf16_kernel, grid_for(vec ? (n + 7) / 8 : n, 256), 256, 0, dst, src, n, vec);
}

extern "C" void cuda_bf16_to_f32(float *dst, const uint16_t *src, size_t n) {
    if (n == 0) return;
    LAUNCH(bf16_to_f32_kernel, grid_for(n, 256), 256, 0, dst, src, n);
}

/* ---- bf16 GEMMs: bf16 inputs, fp32 compute (CUBLAS_COMPUTE_32F), output bf16 or fp32 ---------
 * Same mapping as the fp32 calls above. */

static void gemm_bf16(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *A, int lda,
                      const void *B, int ldb, float beta, void *C, cudaDataType_t ctype, int ldc) {
    const float one = 1.0f;
    cublasCheck(cublasGemmEx(cuda_cublas(), ta, tb, m, n, k, &one, A, CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb, &beta,
                             C, ctype, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static void matmul_forward_bf16_any(void *out, cudaDataType_t otype, size_t osize, const uint16_t *in,
                                    const uint16_t *w, int N, int Cin, int Cout, int accumulate) {
    if (N <= 0 || Cout <= 0) return;
    if (Cin <= 0) {
        if (!accumulate) cudaCheck(cudaMemset(out, 0, (size_t)N * (size_t)Cout * osize));
        return;
    }
    gemm_bf16(CUBLAS_OP_T, CUBLAS_OP_N, Cout, N, Cin, w, Cin, in, Cin, accumulate ? 1.0f : 0.0f, out, otype, Cout);
}

extern "C" void cuda_matmul_forward_bf16(uint16_t *out, const uint16_t *in, const uint16_t *w, int N, int Cin,
                                         int Cout, int accumulate) {
    matmul_forward_bf16_any(out, CUDA_R_16BF, sizeof(uint16_t), in, w, N, Cin, Cout, accumulate);
}

extern "C" void cuda_matmul_forward_bf16_f32out(float *out, const uint16_t *in, const uint16_t *w, int N, int Cin,
                                                int Cout, int accumulate) {
    matmul_forward_bf16_any(out, CUDA_R_32F, sizeof(float), in, w, N, Cin, Cout, accumulate);
}

extern "C" void cuda_matmul_backward_bf16(uint16_t *din, float *dw, const uint16_t *dout, const uint16_t *in,
                                          const uint16_t *w, int N, int Cin, int Cout) {
    if (N <= 0 || Cin <= 0 || Cout <= 0) return;
    if (din) gemm_bf16(CUBLAS_OP_N, CUBLAS_OP_N, Cin, N, Cout, w, Cin, dout, Cout, 1.0f, din, CUDA_R_16BF, Cin);
    if (dw) gemm_bf16(CUBLAS_OP_N, CUBLAS_OP_T, Cin, Cout, N, in, Cin, dout, Cout, 1.0f, dw, CUDA_R_32F, Cin);
}
