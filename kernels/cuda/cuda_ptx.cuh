/* kernels/cuda/cuda_ptx.cuh — the PTX instructions of the tensor-core kernels as inline functions:
 * mma.sync m16n8k16 (bf16 in, fp32 accumulate), cp.async (ca 4/8/16 bytes, cg 16 bytes, with
 * src-size zero fill), commit_group / wait_group, ldmatrix m8n8 x1/x2/x4 (.trans) and
 * ex2.approx.ftz.f32.
 *
 * What it is: private to kernels/cuda (included by attention_tile.cuh). In the emulator build
 * (MESHSWEEP_CUDA_EMU) the same names come from tests/emu/cuda_emu_mma.cuh and
 * cuda_emu_ptx.cuh, which execute them with the ISA's semantics (fragment layouts, a cp.async
 * destination undefined until its wait_group), so a kernel written against these names is run
 * and checked there. Pointers to shared memory are generic pointers; they are converted with
 * __cvta_generic_to_shared here.
 * What it is not: TMA, cp.async.bulk or wgmma (sm_90 only; the kernels stay sm_80-compatible).
 */
#ifndef MESHSWEEP_CUDA_PTX_CUH
#define MESHSWEEP_CUDA_PTX_CUH
#ifndef MESHSWEEP_CUDA_EMU

/* D = A·B + C for one warp; fragments as in cuda_emu_mma.cuh */
static __device__ __forceinline__ void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                                         const float c[4]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11,%12,%13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
                   "f"(c[2]), "f"(c[3]));
}

static __device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
/* copies of BYTES (4, 8, 16) through L1; src_bytes < BYTES zero-fills the rest (0: reads nothing) */
template <int BYTES> static __device__ __forceinline__ void cp_async_ca(void *dst, const void *src, int src_bytes) {
    static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async.ca copies 4, 8 or 16 bytes");
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem_addr(dst)), "l"(src), "n"(BYTES),
                 "r"(src_bytes)
                 : "memory");
}
/* 16 bytes bypassing L1 (the tiles are read once per block) */
static __device__ __forceinline__ void cp_async_cg(void *dst, const void *src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes)
                 : "memory");
}
static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/* at most N of this thread's committed groups still in flight afterwards */
template <int N> static __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* lane 8i + r gives row r of matrix i (16 bytes of shared memory, 16-byte aligned) */
static __device__ __forceinline__ void ldsm_x1(uint32_t r[1], const void *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(smem_addr(row)));
}
static __device__ __forceinline__ void ldsm_x2(uint32_t r[2], const void *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_addr(row)));
}
static __device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row)));
}
static __device__ __forceinline__ void ldsm_x1_trans(uint32_t r[1], const void *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(smem_addr(row)));
}
static __device__ __forceinline__ void ldsm_x2_trans(uint32_t r[2], const void *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_addr(row)));
}
static __device__ __forceinline__ void ldsm_x4_trans(uint32_t r[4], const void *row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row)));
}

/* 2^x, flush-to-zero, about 2 ulp (MUFU.EX2) */
static __device__ __forceinline__ float ex2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

#endif /* !MESHSWEEP_CUDA_EMU */
#endif
