/* tests/emu/cuda_emu_cublas.cuh — the cuBLAS calls of kernels/cuda (cublasSgemm, cublasGemmEx) for the
 * host emulator: naive column-major loops with the reference BLAS argument checks, queued on the
 * legacy stream like any other work.
 *
 * What it is: included by cuda_emu.cuh (MESHSWEEP_CUDA_EMU builds only); the documented semantics
 * the row-major mapping of kernels/cuda/matmul.cu relies on (see cuda_emu.cuh's header).
 * What it is not: cuBLAS's algorithms, accumulation order or speed; sums here are in double.
 */
#ifndef MESHSWEEP_CUDA_EMU_CUBLAS_CUH
#define MESHSWEEP_CUDA_EMU_CUBLAS_CUH

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
/* the emulated cuBLAS says it is 13.0.0 (the version of the runtime it stands beside) */
enum libraryPropertyType { MAJOR_VERSION = 0, MINOR_VERSION = 1, PATCH_LEVEL = 2 };
inline cublasStatus_t cublasGetProperty(libraryPropertyType t, int *v) {
    *v = t == MAJOR_VERSION ? 13 : 0;
    return CUBLAS_STATUS_SUCCESS;
}

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
/* checked now, run when the handle's stream (the legacy stream: cublasSetStream is not used)
 * reaches it; alpha and beta are host scalars, read at the call (CUBLAS_POINTER_MODE_HOST) */
inline cublasStatus_t emu_gemm_queued(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                                      const void *A, cudaDataType_t at, int lda, const void *B, cudaDataType_t bt,
                                      int ldb, float beta, void *C, cudaDataType_t ct, int ldc) {
    const int arows = ta == CUBLAS_OP_N ? m : k, brows = tb == CUBLAS_OP_N ? k : n;
    if (m < 0 || n < 0 || k < 0 || lda < (arows > 1 ? arows : 1) || ldb < (brows > 1 ? brows : 1) ||
        ldc < (m > 1 ? m : 1)) {
        fprintf(stderr, "emu: gemm argument error m=%d n=%d k=%d lda=%d ldb=%d ldc=%d\n", m, n, k, lda, ldb, ldc);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    std::vector<uint64_t> refs;
    emu_ref(refs, A, "cublas gemm");
    emu_ref(refs, B, "cublas gemm");
    emu_ref(refs, C, "cublas gemm");
    emu_enqueue(0, "cublas gemm", [=] {
        emu_gemm(ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc);
        return 1;
    }, std::move(refs));
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const float *alpha, const float *A, int lda, const float *B, int ldb,
                                  const float *beta, float *C, int ldc) {
    return emu_gemm_queued(ta, tb, m, n, k, *alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, *beta, C, CUDA_R_32F,
                           ldc);
}
inline cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                   const void *alpha, const void *A, cudaDataType_t at, int lda, const void *B,
                                   cudaDataType_t bt, int ldb, const void *beta, void *C, cudaDataType_t ct, int ldc,
                                   cublasComputeType_t, cublasGemmAlgo_t) {
    return emu_gemm_queued(ta, tb, m, n, k, *(const float *)alpha, A, at, lda, B, bt, ldb, *(const float *)beta, C,
                           ct, ldc);
}

#endif
