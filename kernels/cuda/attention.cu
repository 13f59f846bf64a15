/* kernels/cuda/attention.cu — causal GQA attention, forward and backward, flash-style: tensor-core kernels
 * for bf16 at head dims 64 and 128, scalar fp32-arithmetic kernels for everything else.
 *
 * What it is: two sets of kernels that never materialise a [T,T] score matrix (no workspace: the
 * ws argument of the interface is ignored).
 * 1. Tensor cores (the bf16 table, hd 64 and 128, i.e. the Llama 3 models): mma.sync m16n8k16 with
 *    bf16 operands and fp32 accumulation, FlashAttention-2 style; described above the kernels below.
 * 2. Scalar (fp32 table, and bf16 at other head dims, e.g. the tiny test models):
 *   forward  one block per (batch, query head, ATT_QROWS query rows), one warp per query row; key/value
 *            tiles of 32 rows go through shared memory; lane l scores key t0+l, an online softmax
 *            (running max m, running sum l) rescales the output accumulator, which each lane keeps
 *            for head-dim elements d = lane + 32·i. Writes out and lse = m + log(l) per row.
 *   dq       same decomposition; P = exp(s − lse) recomputed from the saved lse,
 *            dS = P ⊙ (dO·vᵀ − D) with D = rowsum(dO ⊙ O) computed by the row's warp,
 *            dQ += scale · dS · K.
 *   dk, dv   one block per (batch, kv head, ATT_KROWS key rows), one warp per key row; query tiles of
 *            32 rows (for every query head of the GQA group) go through shared memory, lane l
 *            handles query t0+l: dV += Pᵀ·dO, dK += scale · dSᵀ·Q.
 * Every output row is owned by exactly one warp, so there are no atomics and results are
 * deterministic; the scores are recomputed once in each backward kernel (the price of that).
 * All scores are computed as Σ_d (q_d·scale)·k_d in increasing d in all three scalar kernels, so the
 * probabilities the backward recomputes are those the forward normalised.
 * The scalar kernels are templates on the storage type S of q, k, v, out, dout and the gradients
 * (cuda_common.cuh): S = float for ops_cuda, S = bf16s for ops_cuda_bf16. Either way every value is
 * loaded to float, shared memory, scores, softmax and accumulators are fp32 and lse is fp32; only
 * the stores round (once, for bf16).
 * What it is not: tuned (no ldmatrix, cp.async, double buffering or wgmma yet; their speed is for
 * bench/gpu_bench.sh to measure). Head dimension up to 256.
 */
#include "kernels/cuda/cuda_common.cuh"

#include <type_traits>

#define ATT_TILE 32   /* keys (forward, dq) or queries (dk/dv) per shared tile: one per lane */
#define ATT_QROWS 8   /* query rows per block in forward and dq: one warp each */
#define ATT_KROWS 16  /* key rows per block in dk/dv: one warp each */
#define ATT_MAX_HD 256

/* Shared layout of forward and dq: Ks, Vs [ATT_TILE][hd+1] (the +1 makes lane-per-row reads hit
 * 32 different banks), Qs (scaled q), dOs [ATT_QROWS][hd]. */
static size_t smem_rows_kernel(int hd) {
    return (2u * ATT_TILE * (size_t)(hd + 1) + 2u * ATT_QROWS * (size_t)hd) * sizeof(float);
}
/* Shared layout of dk/dv: Qs (scaled q), dOs [ATT_TILE][hd+1], Ks, Vs [ATT_KROWS][hd], Ls, Ds [ATT_TILE]. */
static size_t smem_dkv_kernel(int hd) {
    return (2u * ATT_TILE * (size_t)(hd + 1) + 2u * ATT_KROWS * (size_t)hd + 2u * ATT_TILE) * sizeof(float);
}

/* Forward. DPL = head-dim elements per lane (hd <= 32·DPL). grid (ceil(T/ATT_QROWS), H, B). */
template <int DPL, typename S>
static __global__ void __launch_bounds__(ATT_QROWS * 32)
attention_forward_kernel(S *out, float *lse, const S *q, const S *k, const S *v, int T, int H, int KV, int hd,
                         float scale) {
    DYNAMIC_SMEM(float, smem);
    const int ld = hd + 1;
    float *Ks = smem;                    /* [ATT_TILE][ld] */
    float *Vs = Ks + ATT_TILE * ld;      /* [ATT_TILE][ld] */
    float *Qs = Vs + ATT_TILE * ld;      /* [ATT_QROWS][hd] */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int b = blockIdx.z, h = blockIdx.y, kvh = h / (H / KV);
    /* the last query blocks have the most key tiles: start them first */
    const int q0 = (gridDim.x - 1 - blockIdx.x) * ATT_QROWS;
    const int qi = q0 + warp;
    const bool active = qi < T; /* warp-uniform */
    const size_t ldq = (size_t)H * hd, ldk = (size_t)KV * hd;
    const S *kb = k + (size_t)b * T * ldk + (size_t)kvh * hd;
    const S *vb = v + (size_t)b * T * ldk + (size_t)kvh * hd;
    float *qs = Qs + warp * hd;
    if (active) {
        const S *qrow = q + ((size_t)b * T + qi) * ldq + (size_t)h * hd;
        for (int d = lane; d < hd; d += 32) qs[d] = cload(qrow, d) * scale;
    }
    float m = -INFINITY, l = 0.0f, acc[DPL];
#pragma unroll
    for (int i = 0; i < DPL; i++) acc[i] = 0.0f;
    const int qlast = imin(q0 + ATT_QROWS, T) - 1; /* last query row of this block */
    for (int t0 = 0; t0 <= qlast; t0 += ATT_TILE) {
        __syncthreads(); /* the previous tile is consumed (and qs is written) */
        for (int idx = threadIdx.x; idx < ATT_TILE * hd; idx += blockDim.x) {
            const int r = idx / hd, d = idx - r * hd, kj = t0 + r;
            float kx = 0.0f, vx = 0.0f; /* rows past T are zero, never garbage */
            if (kj < T) {
                kx = cload(kb, (size_t)kj * ldk + d);
                vx = cload(vb, (size_t)kj * ldk + d);
            }
            Ks[r * ld + d] = kx;
            Vs[r * ld + d] = vx;
        }
        __syncthreads();
        if (active && t0 <= qi) { /* warp-uniform: shuffles below see all 32 lanes */
            const int kj = t0 + lane;
            const float *ks = Ks + lane * ld;
            float s = 0.0f;
            for (int d = 0; d < hd; d++) s += qs[d] * ks[d];
            const bool valid = kj <= qi; /* causal; kj <= qi < T so also in range */
            s = valid ? s : -INFINITY;
            const float mnew = fmaxf(m, warp_max(s)); /* finite: key t0 <= qi is valid */
            const float corr = expf(m - mnew);        /* 0 on the first tile (m = -inf) */
            const float p = valid ? expf(s - mnew) : 0.0f;
            l = l * corr + warp_sum(p);
            m = mnew;
#pragma unroll
            for (int i = 0; i < DPL; i++) acc[i] *= corr;
            const int nkeys = imin(ATT_TILE, qi - t0 + 1);
            for (int j = 0; j < nkeys; j++) {
                const float pj = __shfl_sync(FULL_MASK, p, j);
                const float *vs = Vs + j * ld;
#pragma unroll
                for (int i = 0; i < DPL; i++) {
                    const int d = lane + 32 * i;
                    if (d < hd) acc[i] += pj * vs[d];
                }
            }
        }
    }
    if (active) {
        const float inv = 1.0f / l;
        S *orow = out + ((size_t)b * T + qi) * ldq + (size_t)h * hd;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            const int d = lane + 32 * i;
            if (d < hd) cstore(orow, d, acc[i] * inv);
        }
        if (lane == 0) lse[((size_t)b * H + h) * T + qi] = m + logf(l);
    }
}

/* dQ += scale · dS · K. grid (ceil(T/ATT_QROWS), H, B). */
template <int DPL, typename S>
static __global__ void __launch_bounds__(ATT_QROWS * 32)
attention_backward_dq_kernel(S *dq, const S *dout, const S *out, const float *lse, const S *q, const S *k,
                             const S *v, int T, int H, int KV, int hd, float scale) {
    DYNAMIC_SMEM(float, smem);
    const int ld = hd + 1;
    float *Ks = smem;                     /* [ATT_TILE][ld] */
    float *Vs = Ks + ATT_TILE * ld;       /* [ATT_TILE][ld] */
    float *Qs = Vs + ATT_TILE * ld;       /* [ATT_QROWS][hd] */
    float *dOs = Qs + ATT_QROWS * hd;     /* [ATT_QROWS][hd] */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int b = blockIdx.z, h = blockIdx.y, kvh = h / (H / KV);
    const int q0 = (gridDim.x - 1 - blockIdx.x) * ATT_QROWS;
    const int qi = q0 + warp;
    const bool active = qi < T;
    const size_t ldq = (size_t)H * hd, ldk = (size_t)KV * hd;
    const S *kb = k + (size_t)b * T * ldk + (size_t)kvh * hd;
    const S *vb = v + (size_t)b * T * ldk + (size_t)kvh * hd;
    const size_t rowoff = ((size_t)b * T + (active ? qi : 0)) * ldq + (size_t)h * hd;
    float *qs = Qs + warp * hd, *dos = dOs + warp * hd;
    float D = 0.0f, Li = 0.0f;
    if (active) { /* warp-uniform */
        float part = 0.0f;
        for (int d = lane; d < hd; d += 32) {
            qs[d] = cload(q, rowoff + d) * scale;
            const float g = cload(dout, rowoff + d);
            dos[d] = g;
            part += g * cload(out, rowoff + d);
        }
        D = warp_sum(part);
        Li = lse[((size_t)b * H + h) * T + qi];
    }
    float acc[DPL];
#pragma unroll
    for (int i = 0; i < DPL; i++) acc[i] = 0.0f;
    const int qlast = imin(q0 + ATT_QROWS, T) - 1;
    for (int t0 = 0; t0 <= qlast; t0 += ATT_TILE) {
        __syncthreads();
        for (int idx = threadIdx.x; idx < ATT_TILE * hd; idx += blockDim.x) {
            const int r = idx / hd, d = idx - r * hd, kj = t0 + r;
            float kx = 0.0f, vx = 0.0f;
            if (kj < T) {
                kx = cload(kb, (size_t)kj * ldk + d);
                vx = cload(vb, (size_t)kj * ldk + d);
            }
            Ks[r * ld + d] = kx;
            Vs[r * ld + d] = vx;
        }
        __syncthreads();
        if (active && t0 <= qi) {
            const int kj = t0 + lane;
            const float *ks = Ks + lane * ld, *vs = Vs + lane * ld;
            float s = 0.0f, dp = 0.0f;
            for (int d = 0; d < hd; d++) s += qs[d] * ks[d];
            for (int d = 0; d < hd; d++) dp += dos[d] * vs[d];
            const bool valid = kj <= qi;
            const float p = valid ? expf(s - Li) : 0.0f;
            const float ds = valid ? p * (dp - D) : 0.0f;
            const int nkeys = imin(ATT_TILE, qi - t0 + 1);
            for (int j = 0; j < nkeys; j++) {
                const float dsj = __shfl_sync(FULL_MASK, ds, j);
                const float *kr = Ks + j * ld;
#pragma unroll
                for (int i = 0; i < DPL; i++) {
                    const int d = lane + 32 * i;
                    if (d < hd) acc[i] += dsj * kr[d];
                }
            }
        }
    }
    if (active) {
        S *dqrow = dq + rowoff;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            const int d = lane + 32 * i;
            if (d < hd) cstore(dqrow, d, cload(dqrow, d) + scale * acc[i]);
        }
    }
}

/* dV += Pᵀ·dO, dK += scale · dSᵀ·Q over every query head of the kv head's group.
 * grid (ceil(T/ATT_KROWS), KV, B). */
template <int DPL, typename S>
static __global__ void __launch_bounds__(ATT_KROWS * 32)
attention_backward_dkv_kernel(S *dk, S *dv, const S *dout, const S *out, const float *lse, const S *q, const S *k,
                              const S *v, int T, int H, int KV, int hd, float scale) {
    DYNAMIC_SMEM(float, smem);
    const int ld = hd + 1;
    float *Qs = smem;                     /* [ATT_TILE][ld], q·scale */
    float *dOs = Qs + ATT_TILE * ld;      /* [ATT_TILE][ld] */
    float *Ks = dOs + ATT_TILE * ld;      /* [ATT_KROWS][hd] */
    float *Vs = Ks + ATT_KROWS * hd;      /* [ATT_KROWS][hd] */
    float *Ls = Vs + ATT_KROWS * hd;      /* [ATT_TILE] lse of the tile's queries */
    float *Ds = Ls + ATT_TILE;            /* [ATT_TILE] rowsum(dO ⊙ O) of the tile's queries */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int b = blockIdx.z, kvh = blockIdx.y, group = H / KV;
    const int k0 = blockIdx.x * ATT_KROWS; /* block 0 has the most query tiles and starts first */
    const int kj = k0 + warp;
    const bool active = kj < T;
    const size_t ldq = (size_t)H * hd, ldk = (size_t)KV * hd;
    const size_t krow = ((size_t)b * T + (active ? kj : 0)) * ldk + (size_t)kvh * hd;
    float *ks = Ks + warp * hd, *vs = Vs + warp * hd;
    if (active)
        for (int d = lane; d < hd; d += 32) {
            ks[d] = cload(k, krow + d);
            vs[d] = cload(v, krow + d);
        }
    float accK[DPL], accV[DPL];
#pragma unroll
    for (int i = 0; i < DPL; i++) accK[i] = accV[i] = 0.0f;
    const int tstart = (k0 / ATT_TILE) * ATT_TILE; /* earlier query tiles lie wholly above the diagonal */
    for (int g = 0; g < group; g++) {
        const int h = kvh * group + g;
        for (int t0 = tstart; t0 < T; t0 += ATT_TILE) {
            __syncthreads(); /* previous tile consumed (and ks/vs written) */
            for (int idx = threadIdx.x; idx < ATT_TILE * hd; idx += blockDim.x) {
                const int r = idx / hd, d = idx - r * hd, qi = t0 + r;
                float qx = 0.0f, gx = 0.0f;
                if (qi < T) {
                    const size_t o = ((size_t)b * T + qi) * ldq + (size_t)h * hd + d;
                    qx = cload(q, o) * scale; /* the forward's scaled q: identical scores */
                    gx = cload(dout, o);
                }
                Qs[r * ld + d] = qx;
                dOs[r * ld + d] = gx;
            }
            /* one warp per query row of the tile: D = dO·O, and its lse */
            for (int r = warp; r < ATT_TILE; r += ATT_KROWS) {
                const int qi = t0 + r;
                float part = 0.0f;
                if (qi < T) {
                    const size_t o = ((size_t)b * T + qi) * ldq + (size_t)h * hd;
                    for (int d = lane; d < hd; d += 32) part += cload(dout, o + d) * cload(out, o + d);
                }
                part = warp_sum(part);
                if (lane == 0) {
                    Ds[r] = part;
                    Ls[r] = qi < T ? lse[((size_t)b * H + h) * T + qi] : 0.0f;
                }
            }
            __syncthreads();
            if (active && t0 + ATT_TILE - 1 >= kj) { /* warp-uniform: some query of the tile is >= kj */
                const int qi = t0 + lane;
                const float *qr = Qs + lane * ld, *gr = dOs + lane * ld;
                float s = 0.0f, dp = 0.0f;
                for (int d = 0; d < hd; d++) s += qr[d] * ks[d];
                for (int d = 0; d < hd; d++) dp += gr[d] * vs[d];
                const bool valid = qi >= kj && qi < T;
                const float p = valid ? expf(s - Ls[lane]) : 0.0f;
                const float ds = valid ? p * (dp - Ds[lane]) : 0.0f;
                const int jlo = kj > t0 ? kj - t0 : 0, jhi = imin(ATT_TILE, T - t0);
                for (int j = jlo; j < jhi; j++) {
                    const float pj = __shfl_sync(FULL_MASK, p, j);
                    const float dsj = __shfl_sync(FULL_MASK, ds, j);
                    const float *qj = Qs + j * ld, *gj = dOs + j * ld;
#pragma unroll
                    for (int i = 0; i < DPL; i++) {
                        const int d = lane + 32 * i;
                        if (d < hd) {
                            accV[i] += pj * gj[d];
                            accK[i] += dsj * qj[d];
                        }
                    }
                }
            }
        }
    }
    if (active) {
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            const int d = lane + 32 * i;
            if (d < hd) {
                if (dv) cstore(dv, krow + d, cload(dv, krow + d) + accV[i]);
                if (dk) cstore(dk, krow + d, cload(dk, krow + d) + accK[i]); /* Qs already carries the scale */
            }
        }
    }
}

/* ==== tensor-core kernels (bf16, head dims 64 and 128) ========================================
 * Flash attention 2 on mma.sync.m16n8k16 (bf16 operands, fp32 accumulation). Each warp owns 16
 * rows of the block's tile and keeps its operands as the fragments of the PTX ISA table (see
 * tests/emu/cuda_emu_mma.cuh, which emulates the instruction from that table): groupID
 * g = lane >> 2 and t = lane % 4 hold rows g and g+8, columns 2t, 2t+1 (and +8). The fp32
 * accumulator of a score tile S = Q·Kᵀ has the layout of an A operand once rounded to bf16 pairs,
 * so P and dS feed the next mma straight from registers. Shared tiles are bf16 rows of HD + 8
 * elements (the pad puts the 8 rows a fragment load touches in different banks). Scores are
 * s = scale · Σ_d q_d·k_d, summed by the mma in increasing d in all three kernels, so the backward
 * recomputes the forward's probabilities from its lse. P and dS are rounded to bf16 as mma
 * operands (as FlashAttention does); row sums, max, lse, D and every accumulator are fp32.
 *   forward  block = 64 query rows (4 warps) of one (b, h); key tiles of 64 up to the diagonal
 *            (tiles above it are never loaded), online softmax, out and lse as the scalar kernel.
 *   dq       block = 64 query rows; key tiles of 32 up to the diagonal; D = rowsum(dO ⊙ O) from
 *            the fragments; dQ += scale · dS·K.
 *   dk, dv   block = 64 key rows of one (b, kv head); query tiles of 32 from the diagonal on, for
 *            every query head of the GQA group; dV += Pᵀ·dO, dK += scale · dSᵀ·Q.
 * Each output row belongs to one warp: no atomics, deterministic results. */
#define TC_ROWS 64 /* rows of a block: 4 warps x 16 */
#define TC_FWD_KEYS 64
#define TC_BWD_TILE 32

#ifndef MESHSWEEP_CUDA_EMU
/* D = A·B + C for one warp; the emulator defines the same function from the documented layout */
static __device__ __forceinline__ void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                                         const float c[4]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11,%12,%13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
                   "f"(c[2]), "f"(c[3]));
}
#endif

/* two bf16 as one 32-bit operand register, the first in the low half */
static __device__ __forceinline__ uint32_t pack2(const bf16s *p) { return p[0].bits | (uint32_t)p[1].bits << 16; }
static __device__ __forceinline__ uint32_t pack2s(const bf16s *p, size_t stride) {
    return p[0].bits | (uint32_t)p[stride].bits << 16;
}
static __device__ __forceinline__ uint32_t pack2f(float lo, float hi) {
    return bf16_round_bits(lo) | (uint32_t)bf16_round_bits(hi) << 16;
}

/* A fragment of rows r0 = base + g, r1 = r0 + 8 (in [0, nrows), else zero), columns c..c+15 of a
 * row-major bf16 matrix with leading dimension ld */
static __device__ __forceinline__ void load_a(uint32_t a[4], const bf16s *m, size_t ld, int r0, int nrows, int c) {
    const int tq = (threadIdx.x & 31) & 3, r1 = r0 + 8;
    const bf16s *p0 = m + (size_t)r0 * ld + c + 2 * tq, *p1 = m + (size_t)r1 * ld + c + 2 * tq;
    a[0] = r0 < nrows ? pack2(p0) : 0u;
    a[1] = r1 < nrows ? pack2(p1) : 0u;
    a[2] = r0 < nrows ? pack2(p0 + 8) : 0u;
    a[3] = r1 < nrows ? pack2(p1 + 8) : 0u;
}
/* B fragment (16 x 8) whose column n is row n0 + n of a row-major shared tile (B = tileᵀ), k = c.. */
static __device__ __forceinline__ void load_b_rows(uint32_t b[2], const bf16s *tile, int ld, int n0, int c) {
    const int lane = threadIdx.x & 31;
    const bf16s *p = tile + (size_t)(n0 + (lane >> 2)) * ld + c + 2 * (lane & 3);
    b[0] = pack2(p);
    b[1] = pack2(p + 8);
}
/* B fragment (16 x 8) that is the block rows k0.., columns n0.. of a row-major shared tile */
static __device__ __forceinline__ void load_b_cols(uint32_t b[2], const bf16s *tile, int ld, int k0, int n0) {
    const int lane = threadIdx.x & 31;
    const bf16s *p = tile + (size_t)(k0 + 2 * (lane & 3)) * ld + n0 + (lane >> 2);
    b[0] = pack2s(p, (size_t)ld);
    b[1] = pack2s(p + 8 * ld, (size_t)ld);
}
/* rows [r0, r0 + n) of hd = HD columns of a global bf16 matrix (leading dimension ld) into a
 * shared tile of row stride HD + 8; rows at or past `rows` are zero. 16-byte copies (8 elements)
 * when the global rows are 16-byte aligned (always for the engine's buffers), else 2-byte ones. */
struct alignas(16) bf16x8 {
    uint32_t w[4];
};
template <int HD>
static __device__ __forceinline__ void tile_load(bf16s *tile, const bf16s *g, size_t ld, int r0, int n, int rows) {
    if (((uintptr_t)g & 15u) == 0 && (ld & 7u) == 0) { /* uniform over the block */
        constexpr int PER_ROW = HD / 8;
        for (int idx = threadIdx.x; idx < n * PER_ROW; idx += blockDim.x) {
            const int r = idx / PER_ROW, c = (idx - r * PER_ROW) * 8; /* PER_ROW is a power of two */
            bf16x8 x = {{0u, 0u, 0u, 0u}};
            if (r0 + r < rows) x = *reinterpret_cast<const bf16x8 *>(g + (size_t)(r0 + r) * ld + c);
            *reinterpret_cast<bf16x8 *>(tile + r * (HD + 8) + c) = x;
        }
        return;
    }
    for (int idx = threadIdx.x; idx < n * HD; idx += blockDim.x) {
        const int r = idx / HD, d = idx - r * HD;
        bf16s x;
        x.bits = 0;
        if (r0 + r < rows) x = g[(size_t)(r0 + r) * ld + d];
        tile[r * (HD + 8) + d] = x;
    }
}
/* the 4 lanes of a group hold one row between them */
static __device__ __forceinline__ float group_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, 1));
    return fmaxf(v, __shfl_xor_sync(FULL_MASK, v, 2));
}
static __device__ __forceinline__ float group_sum(float v) {
    v += __shfl_xor_sync(FULL_MASK, v, 1);
    return v + __shfl_xor_sync(FULL_MASK, v, 2);
}

/* grid (ceil(T/64), H, B), 128 threads */
template <int HD>
static __global__ void __launch_bounds__(128)
attention_forward_tc_kernel(bf16s *out, float *lse, const bf16s *q, const bf16s *k, const bf16s *v, int T, int H,
                            int KV, float scale) {
    constexpr int LDS = HD + 8, NT = TC_FWD_KEYS / 8, KD = HD / 16, ND = HD / 8;
    DYNAMIC_SMEM(float, smem);
    bf16s *Ks = reinterpret_cast<bf16s *>(smem); /* [TC_FWD_KEYS][LDS] */
    bf16s *Vs = Ks + TC_FWD_KEYS * LDS;          /* [TC_FWD_KEYS][LDS] */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3;
    const int b = blockIdx.z, h = blockIdx.y, kvh = h / (H / KV);
    const int q0 = (gridDim.x - 1 - blockIdx.x) * TC_ROWS; /* the longest rows first */
    const int r0 = q0 + warp * 16 + g, r1 = r0 + 8;
    const size_t ldq = (size_t)H * HD, ldk = (size_t)KV * HD;
    const bf16s *qb = q + (size_t)b * T * ldq + (size_t)h * HD;
    const bf16s *kb = k + (size_t)b * T * ldk + (size_t)kvh * HD;
    const bf16s *vb = v + (size_t)b * T * ldk + (size_t)kvh * HD;
    uint32_t qf[KD][4];
#pragma unroll
    for (int kk = 0; kk < KD; kk++) load_a(qf[kk], qb, ldq, r0, T, kk * 16);
    float o[ND][4];
#pragma unroll
    for (int i = 0; i < ND; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f; /* rows r0, r1; l is this lane's part */
    const int qend = imin(q0 + TC_ROWS, T);
    for (int t0 = 0; t0 < qend; t0 += TC_FWD_KEYS) { /* tiles above the diagonal: never */
        __syncthreads();                              /* the previous tile is consumed */
        tile_load<HD>(Ks, kb, ldk, t0, TC_FWD_KEYS, T);
        tile_load<HD>(Vs, vb, ldk, t0, TC_FWD_KEYS, T);
        __syncthreads();
        float s[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KD; kk++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                uint32_t bf[2];
                load_b_rows(bf, Ks, LDS, nt * 8, kk * 16);
                mma_m16n8k16_bf16(s[nt], qf[kk], bf, s[nt]);
            }
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int key = t0 + nt * 8 + 2 * tq + (i & 1), row = i < 2 ? r0 : r1;
                const float x = key <= row && key < T ? s[nt][i] * scale : -INFINITY;
                s[nt][i] = x;
                if (i < 2) mx0 = fmaxf(mx0, x);
                else mx1 = fmaxf(mx1, x);
            }
        const float mn0 = fmaxf(m0, group_max(mx0)), mn1 = fmaxf(m1, group_max(mx1));
        /* a row without a valid key so far keeps m = -inf: subtract 0 then, never inf - inf */
        const float ref0 = mn0 == -INFINITY ? 0.0f : mn0, ref1 = mn1 == -INFINITY ? 0.0f : mn1;
        const float c0 = expf(m0 - ref0), c1 = expf(m1 - ref1); /* 0 while m was -inf */
        m0 = mn0;
        m1 = mn1;
        l0 *= c0;
        l1 *= c1;
#pragma unroll
        for (int i = 0; i < ND; i++) {
            o[i][0] *= c0;
            o[i][1] *= c0;
            o[i][2] *= c1;
            o[i][3] *= c1;
        }
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            s[nt][0] = expf(s[nt][0] - ref0);
            s[nt][1] = expf(s[nt][1] - ref0);
            s[nt][2] = expf(s[nt][2] - ref1);
            s[nt][3] = expf(s[nt][3] - ref1);
            l0 += s[nt][0] + s[nt][1];
            l1 += s[nt][2] + s[nt][3];
        }
#pragma unroll
        for (int kk = 0; kk < TC_FWD_KEYS / 16; kk++) {
            const uint32_t pa[4] = {pack2f(s[2 * kk][0], s[2 * kk][1]), pack2f(s[2 * kk][2], s[2 * kk][3]),
                                    pack2f(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                    pack2f(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int dt = 0; dt < ND; dt++) {
                uint32_t bf[2];
                load_b_cols(bf, Vs, LDS, kk * 16, dt * 8);
                mma_m16n8k16_bf16(o[dt], pa, bf, o[dt]);
            }
        }
    }
    l0 = group_sum(l0);
    l1 = group_sum(l1);
    const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
    bf16s *ob = out + (size_t)b * T * ldq + (size_t)h * HD;
#pragma unroll
    for (int dt = 0; dt < ND; dt++) {
        const int c = dt * 8 + 2 * tq;
        if (r0 < T) {
            cstore(ob, (size_t)r0 * ldq + c, o[dt][0] * inv0);
            cstore(ob, (size_t)r0 * ldq + c + 1, o[dt][1] * inv0);
        }
        if (r1 < T) {
            cstore(ob, (size_t)r1 * ldq + c, o[dt][2] * inv1);
            cstore(ob, (size_t)r1 * ldq + c + 1, o[dt][3] * inv1);
        }
    }
    float *lb = lse + ((size_t)b * H + h) * T;
    if (tq == 0 && r0 < T) lb[r0] = m0 + logf(l0);
    if (tq == 0 && r1 < T) lb[r1] = m1 + logf(l1);
}

/* dQ += scale · dS·K. grid (ceil(T/64), H, B), 128 threads. */
template <int HD>
static __global__ void __launch_bounds__(128)
attention_backward_dq_tc_kernel(bf16s *dq, const bf16s *dout, const bf16s *out, const float *lse, const bf16s *q,
                                const bf16s *k, const bf16s *v, int T, int H, int KV, float scale) {
    constexpr int LDS = HD + 8, NT = TC_BWD_TILE / 8, KD = HD / 16, ND = HD / 8;
    DYNAMIC_SMEM(float, smem);
    bf16s *Ks = reinterpret_cast<bf16s *>(smem); /* [TC_BWD_TILE][LDS] */
    bf16s *Vs = Ks + TC_BWD_TILE * LDS;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3;
    const int b = blockIdx.z, h = blockIdx.y, kvh = h / (H / KV);
    const int q0 = (gridDim.x - 1 - blockIdx.x) * TC_ROWS;
    const int r0 = q0 + warp * 16 + g, r1 = r0 + 8;
    const size_t ldq = (size_t)H * HD, ldk = (size_t)KV * HD;
    const size_t qoff = (size_t)b * T * ldq + (size_t)h * HD;
    const bf16s *kb = k + (size_t)b * T * ldk + (size_t)kvh * HD;
    const bf16s *vb = v + (size_t)b * T * ldk + (size_t)kvh * HD;
    uint32_t qf[KD][4], gf[KD][4];
    float D0 = 0.0f, D1 = 0.0f; /* rowsum(dO ⊙ O) over this lane's columns, then the group's */
#pragma unroll
    for (int kk = 0; kk < KD; kk++) {
        load_a(qf[kk], q + qoff, ldq, r0, T, kk * 16);
        load_a(gf[kk], dout + qoff, ldq, r0, T, kk * 16);
#pragma unroll
        for (int e = 0; e < 4; e++) { /* columns kk·16 + 2t + {0, 1} (e < 2) and + 8 */
            const int c = kk * 16 + 2 * tq + (e & 1) + (e >= 2 ? 8 : 0);
            if (r0 < T) D0 += cload(dout, qoff + (size_t)r0 * ldq + c) * cload(out, qoff + (size_t)r0 * ldq + c);
            if (r1 < T) D1 += cload(dout, qoff + (size_t)r1 * ldq + c) * cload(out, qoff + (size_t)r1 * ldq + c);
        }
    }
    D0 = group_sum(D0);
    D1 = group_sum(D1);
    const float *lb = lse + ((size_t)b * H + h) * T;
    const float L0 = r0 < T ? lb[r0] : 0.0f, L1 = r1 < T ? lb[r1] : 0.0f;
    float acc[ND][4];
#pragma unroll
    for (int i = 0; i < ND; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
    const int qend = imin(q0 + TC_ROWS, T);
    for (int t0 = 0; t0 < qend; t0 += TC_BWD_TILE) {
        __syncthreads();
        tile_load<HD>(Ks, kb, ldk, t0, TC_BWD_TILE, T);
        tile_load<HD>(Vs, vb, ldk, t0, TC_BWD_TILE, T);
        __syncthreads();
        float s[NT][4], dp[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) s[nt][i] = dp[nt][i] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KD; kk++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                uint32_t bf[2];
                load_b_rows(bf, Ks, LDS, nt * 8, kk * 16);
                mma_m16n8k16_bf16(s[nt], qf[kk], bf, s[nt]);
                load_b_rows(bf, Vs, LDS, nt * 8, kk * 16);
                mma_m16n8k16_bf16(dp[nt], gf[kk], bf, dp[nt]);
            }
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int key = t0 + nt * 8 + 2 * tq + (i & 1), row = i < 2 ? r0 : r1;
                const bool valid = key <= row && row < T; /* key <= row < T: the key is in range */
                const float p = valid ? expf(s[nt][i] * scale - (i < 2 ? L0 : L1)) : 0.0f;
                s[nt][i] = valid ? p * (dp[nt][i] - (i < 2 ? D0 : D1)) : 0.0f; /* dS */
            }
#pragma unroll
        for (int kk = 0; kk < TC_BWD_TILE / 16; kk++) {
            const uint32_t da[4] = {pack2f(s[2 * kk][0], s[2 * kk][1]), pack2f(s[2 * kk][2], s[2 * kk][3]),
                                    pack2f(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                    pack2f(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int dt = 0; dt < ND; dt++) {
                uint32_t bf[2];
                load_b_cols(bf, Ks, LDS, kk * 16, dt * 8);
                mma_m16n8k16_bf16(acc[dt], da, bf, acc[dt]);
            }
        }
    }
    bf16s *db = dq + qoff;
#pragma unroll
    for (int dt = 0; dt < ND; dt++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int row = i < 2 ? r0 : r1;
            const size_t o = (size_t)row * ldq + dt * 8 + 2 * tq + (i & 1);
            if (row < T) cstore(db, o, cload(db, o) + scale * acc[dt][i]);
        }
}

/* dV += Pᵀ·dO, dK += scale · dSᵀ·Q over the query heads of one kv head. grid (ceil(T/64), KV, B). */
template <int HD>
static __global__ void __launch_bounds__(128)
attention_backward_dkv_tc_kernel(bf16s *dk, bf16s *dv, const bf16s *dout, const bf16s *out, const float *lse,
                                 const bf16s *q, const bf16s *k, const bf16s *v, int T, int H, int KV, float scale) {
    constexpr int LDS = HD + 8, NT = TC_BWD_TILE / 8, KD = HD / 16, ND = HD / 8;
    DYNAMIC_SMEM(float, smem);
    bf16s *Ks = reinterpret_cast<bf16s *>(smem); /* [TC_ROWS][LDS] */
    bf16s *Vs = Ks + TC_ROWS * LDS;              /* [TC_ROWS][LDS] */
    bf16s *Qs = Vs + TC_ROWS * LDS;              /* [TC_BWD_TILE][LDS] */
    bf16s *Gs = Qs + TC_BWD_TILE * LDS;          /* [TC_BWD_TILE][LDS], dO */
    float *Ls = reinterpret_cast<float *>(Gs + TC_BWD_TILE * LDS); /* [TC_BWD_TILE] lse */
    float *Ds = Ls + TC_BWD_TILE;                                   /* [TC_BWD_TILE] rowsum(dO ⊙ O) */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3;
    const int b = blockIdx.z, kvh = blockIdx.y, group = H / KV;
    const int k0 = blockIdx.x * TC_ROWS, kfirst = k0 + warp * 16;
    const int r0 = kfirst + g, r1 = r0 + 8; /* this lane's key rows */
    const size_t ldq = (size_t)H * HD, ldk = (size_t)KV * HD;
    const size_t koff = (size_t)b * T * ldk + (size_t)kvh * HD;
    tile_load<HD>(Ks, k + koff, ldk, k0, TC_ROWS, T);
    tile_load<HD>(Vs, v + koff, ldk, k0, TC_ROWS, T);
    float aK[ND][4], aV[ND][4];
#pragma unroll
    for (int i = 0; i < ND; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) aK[i][e] = aV[i][e] = 0.0f;
    for (int gh = 0; gh < group; gh++) {
        const int h = kvh * group + gh;
        const size_t qoff = (size_t)b * T * ldq + (size_t)h * HD;
        const float *lb = lse + ((size_t)b * H + h) * T;
        for (int t0 = k0; t0 < T; t0 += TC_BWD_TILE) { /* query tiles wholly above the diagonal: never */
            __syncthreads(); /* the previous tile is consumed (and Ks, Vs are written) */
            tile_load<HD>(Qs, q + qoff, ldq, t0, TC_BWD_TILE, T);
            tile_load<HD>(Gs, dout + qoff, ldq, t0, TC_BWD_TILE, T);
            for (int r = warp; r < TC_BWD_TILE; r += 4) { /* one warp per query row: D and lse */
                const int qi = t0 + r;
                float part = 0.0f;
                if (qi < T)
                    for (int d = lane; d < HD; d += 32)
                        part += cload(dout, qoff + (size_t)qi * ldq + d) * cload(out, qoff + (size_t)qi * ldq + d);
                part = warp_sum(part);
                if (lane == 0) {
                    Ds[r] = part;
                    Ls[r] = qi < T ? lb[qi] : 0.0f;
                }
            }
            __syncthreads();
            if (t0 + TC_BWD_TILE - 1 < kfirst) continue; /* warp-uniform: no query of the tile sees these keys */
            float s[NT][4], dp[NT][4];
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++) s[nt][i] = dp[nt][i] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KD; kk++) {
                uint32_t ka[4], va[4];
                load_a(ka, Ks, LDS, warp * 16 + g, TC_ROWS, kk * 16);
                load_a(va, Vs, LDS, warp * 16 + g, TC_ROWS, kk * 16);
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    uint32_t bf[2];
                    load_b_rows(bf, Qs, LDS, nt * 8, kk * 16);
                    mma_m16n8k16_bf16(s[nt], ka, bf, s[nt]); /* Sᵀ = K·Qᵀ */
                    load_b_rows(bf, Gs, LDS, nt * 8, kk * 16);
                    mma_m16n8k16_bf16(dp[nt], va, bf, dp[nt]); /* dPᵀ = V·dOᵀ */
                }
            }
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int c = nt * 8 + 2 * tq + (i & 1), qi = t0 + c, key = i < 2 ? r0 : r1;
                    const bool valid = qi >= key && qi < T;
                    const float p = valid ? expf(s[nt][i] * scale - Ls[c]) : 0.0f;
                    s[nt][i] = p;
                    dp[nt][i] = valid ? p * (dp[nt][i] - Ds[c]) : 0.0f; /* dSᵀ */
                }
#pragma unroll
            for (int kk = 0; kk < TC_BWD_TILE / 16; kk++) {
                const uint32_t pa[4] = {pack2f(s[2 * kk][0], s[2 * kk][1]), pack2f(s[2 * kk][2], s[2 * kk][3]),
                                        pack2f(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                        pack2f(s[2 * kk + 1][2], s[2 * kk + 1][3])};
                const uint32_t da[4] = {pack2f(dp[2 * kk][0], dp[2 * kk][1]), pack2f(dp[2 * kk][2], dp[2 * kk][3]),
                                        pack2f(dp[2 * kk + 1][0], dp[2 * kk + 1][1]),
                                        pack2f(dp[2 * kk + 1][2], dp[2 * kk + 1][3])};
#pragma unroll
                for (int dt = 0; dt < ND; dt++) {
                    uint32_t bf[2];
                    load_b_cols(bf, Gs, LDS, kk * 16, dt * 8);
                    mma_m16n8k16_bf16(aV[dt], pa, bf, aV[dt]);
                    load_b_cols(bf, Qs, LDS, kk * 16, dt * 8);
                    mma_m16n8k16_bf16(aK[dt], da, bf, aK[dt]);
                }
            }
        }
    }
#pragma unroll
    for (int dt = 0; dt < ND; dt++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int row = i < 2 ? r0 : r1;
            const size_t o = koff + (size_t)row * ldk + dt * 8 + 2 * tq + (i & 1);
            if (row >= T) continue;
            if (dv) cstore(dv, o, cload(dv, o) + aV[dt][i]);
            if (dk) cstore(dk, o, cload(dk, o) + scale * aK[dt][i]);
        }
}

/* One warp: D = A·B + C with A [16][16], B [16][8], C and D [16][8] row-major in global memory, the
 * fragments filled by the documented layout (or, with `transposed`, with A's rows and columns
 * swapped: a wrong layout the test must see fail). */
static __global__ void __launch_bounds__(32)
mma_selftest_kernel(float *d, const bf16s *a, const bf16s *bm, const float *c, int transposed) {
    const int lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
    uint32_t af[4], bf[2];
    if (!transposed) load_a(af, a, 16, g, 16, 0);
    else
        for (int r = 0; r < 4; r++) { /* element (row, col) read from a[col][row] */
            const int row = g + ((r & 1) ? 8 : 0), col = 2 * tq + ((r & 2) ? 8 : 0);
            af[r] = pack2s(a + (size_t)col * 16 + row, 16);
        }
    load_b_cols(bf, bm, 8, 0, 0);
    float cf[4], df[4];
    for (int i = 0; i < 4; i++) cf[i] = c[(i < 2 ? g : g + 8) * 8 + 2 * tq + (i & 1)];
    mma_m16n8k16_bf16(df, af, bf, cf);
    for (int i = 0; i < 4; i++) d[(i < 2 ? g : g + 8) * 8 + 2 * tq + (i & 1)] = df[i];
}

/* ---- host side ---------------------------------------------------------------------------- */

/* kernels needing more than the default 48 KiB of dynamic shared memory must opt in
 * (dk/dv from hd = 128 on, all three at hd = 256; A100 and H100 allow 163 and 227 KiB) */
template <typename K> static void allow_smem(K kernel, size_t bytes) {
    if (bytes > 48u * 1024u)
        cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

static int check_shape(const char *what, int B, int T, int H, int KV, int hd) {
    if (B <= 0 || T <= 0 || H <= 0 || KV <= 0 || hd <= 0) return 0;
    if (H % KV != 0 || hd > ATT_MAX_HD) {
        fprintf(stderr, "cuda %s: unsupported shape H=%d KV=%d hd=%d (need H %% KV == 0 and hd <= %d)\n", what,
                H, KV, hd, ATT_MAX_HD);
        exit(1);
    }
    return 1;
}

/* the launches name the kernel as kernel<DPL> and let S be deduced from the arguments: a
 * kernel<DPL, S> would split at its comma inside the LAUNCH macro */
template <int DPL, typename S>
static void forward_launch(S *out, float *lse, const S *q, const S *k, const S *v, int B, int T, int H, int KV,
                           int hd) {
    const size_t smem = smem_rows_kernel(hd);
    allow_smem(attention_forward_kernel<DPL, S>, smem);
    const dim3 grid((unsigned)((T + ATT_QROWS - 1) / ATT_QROWS), (unsigned)H, (unsigned)B);
    const float scale = 1.0f / sqrtf((float)hd);
    LAUNCH(attention_forward_kernel<DPL>, grid, ATT_QROWS * 32, smem, out, lse, q, k, v, T, H, KV, hd, scale);
}

template <int DPL, typename S>
static void backward_launch(S *dq, S *dk, S *dv, const S *dout, const S *out, const float *lse, const S *q,
                            const S *k, const S *v, int B, int T, int H, int KV, int hd) {
    const float scale = 1.0f / sqrtf((float)hd);
    if (dq) {
        const size_t smem = smem_rows_kernel(hd);
        allow_smem(attention_backward_dq_kernel<DPL, S>, smem);
        const dim3 grid((unsigned)((T + ATT_QROWS - 1) / ATT_QROWS), (unsigned)H, (unsigned)B);
        LAUNCH(attention_backward_dq_kernel<DPL>, grid, ATT_QROWS * 32, smem, dq, dout, out, lse, q, k, v, T, H,
               KV, hd, scale);
    }
    if (dk || dv) {
        const size_t smem = smem_dkv_kernel(hd);
        allow_smem(attention_backward_dkv_kernel<DPL, S>, smem);
        const dim3 grid((unsigned)((T + ATT_KROWS - 1) / ATT_KROWS), (unsigned)KV, (unsigned)B);
        LAUNCH(attention_backward_dkv_kernel<DPL>, grid, ATT_KROWS * 32, smem, dk, dv, dout, out, lse, q, k, v, T,
               H, KV, hd, scale);
    }
}

/* tensor-core launches so far: lets a test see which path ran */
static long tc_launches;

static size_t smem_tc_forward(int hd) { return 2u * TC_FWD_KEYS * (size_t)(hd + 8) * sizeof(bf16s); }
static size_t smem_tc_dq(int hd) { return 2u * TC_BWD_TILE * (size_t)(hd + 8) * sizeof(bf16s); }
static size_t smem_tc_dkv(int hd) {
    return (2u * TC_ROWS + 2u * TC_BWD_TILE) * (size_t)(hd + 8) * sizeof(bf16s) + 2u * TC_BWD_TILE * sizeof(float);
}

template <int HD>
static void forward_tc_launch(bf16s *out, float *lse, const bf16s *q, const bf16s *k, const bf16s *v, int B, int T,
                              int H, int KV) {
    const size_t smem = smem_tc_forward(HD);
    allow_smem(attention_forward_tc_kernel<HD>, smem);
    const dim3 grid((unsigned)((T + TC_ROWS - 1) / TC_ROWS), (unsigned)H, (unsigned)B);
    const float scale = 1.0f / sqrtf((float)HD);
    LAUNCH(attention_forward_tc_kernel<HD>, grid, 128, smem, out, lse, q, k, v, T, H, KV, scale);
    tc_launches++;
}

template <int HD>
static void backward_tc_launch(bf16s *dq, bf16s *dk, bf16s *dv, const bf16s *dout, const bf16s *out,
                               const float *lse, const bf16s *q, const bf16s *k, const bf16s *v, int B, int T, int H,
                               int KV) {
    const float scale = 1.0f / sqrtf((float)HD);
    const unsigned tiles = (unsigned)((T + TC_ROWS - 1) / TC_ROWS);
    if (dq) {
        const size_t smem = smem_tc_dq(HD);
        allow_smem(attention_backward_dq_tc_kernel<HD>, smem);
        LAUNCH(attention_backward_dq_tc_kernel<HD>, dim3(tiles, (unsigned)H, (unsigned)B), 128, smem, dq, dout, out,
               lse, q, k, v, T, H, KV, scale);
        tc_launches++;
    }
    if (dk || dv) {
        const size_t smem = smem_tc_dkv(HD);
        allow_smem(attention_backward_dkv_tc_kernel<HD>, smem);
        LAUNCH(attention_backward_dkv_tc_kernel<HD>, dim3(tiles, (unsigned)KV, (unsigned)B), 128, smem, dk, dv,
               dout, out, lse, q, k, v, T, H, KV, scale);
        tc_launches++;
    }
}

/* the bf16 tensor-core kernels cover these head dimensions; the others (and fp32) take the
 * scalar kernels above */
static bool tc_head_dim(int hd) { return hd == 64 || hd == 128; }

template <typename S>
void cuda_attention_forward_t(S *out, float *lse, const S *q, const S *k, const S *v, int B, int T, int H, int KV,
                              int hd) {
    if (!check_shape("attention_forward", B, T, H, KV, hd)) return;
    if constexpr (std::is_same_v<S, bf16s>) {
        if (hd == 64) return forward_tc_launch<64>(out, lse, q, k, v, B, T, H, KV);
        if (hd == 128) return forward_tc_launch<128>(out, lse, q, k, v, B, T, H, KV);
    }
    if (hd <= 32) forward_launch<1>(out, lse, q, k, v, B, T, H, KV, hd);
    else if (hd <= 64) forward_launch<2>(out, lse, q, k, v, B, T, H, KV, hd);
    else if (hd <= 128) forward_launch<4>(out, lse, q, k, v, B, T, H, KV, hd);
    else forward_launch<8>(out, lse, q, k, v, B, T, H, KV, hd);
}

template <typename S>
void cuda_attention_backward_t(S *dq, S *dk, S *dv, const S *dout, const S *out, const float *lse, const S *q,
                               const S *k, const S *v, int B, int T, int H, int KV, int hd) {
    if (!dq && !dk && !dv) return;
    if (!check_shape("attention_backward", B, T, H, KV, hd)) return;
    if constexpr (std::is_same_v<S, bf16s>) {
        if (hd == 64) return backward_tc_launch<64>(dq, dk, dv, dout, out, lse, q, k, v, B, T, H, KV);
        if (hd == 128) return backward_tc_launch<128>(dq, dk, dv, dout, out, lse, q, k, v, B, T, H, KV);
    }
    if (hd <= 32) backward_launch<1>(dq, dk, dv, dout, out, lse, q, k, v, B, T, H, KV, hd);
    else if (hd <= 64) backward_launch<2>(dq, dk, dv, dout, out, lse, q, k, v, B, T, H, KV, hd);
    else if (hd <= 128) backward_launch<4>(dq, dk, dv, dout, out, lse, q, k, v, B, T, H, KV, hd);
    else backward_launch<8>(dq, dk, dv, dout, out, lse, q, k, v, B, T, H, KV, hd);
}

template void cuda_attention_forward_t<bf16s>(bf16s *, float *, const bf16s *, const bf16s *, const bf16s *, int,
                                              int, int, int, int);
template void cuda_attention_backward_t<bf16s>(bf16s *, bf16s *, bf16s *, const bf16s *, const bf16s *,
                                               const float *, const bf16s *, const bf16s *, const bf16s *, int, int,
                                               int, int, int);

void cuda_attention_forward(float *out, float *lse, float *ws, const float *q, const float *k, const float *v, int B,
                            int T, int H, int KV, int hd) {
    (void)ws;
    cuda_attention_forward_t<float>(out, lse, q, k, v, B, T, H, KV, hd);
}

void cuda_attention_backward(float *dq, float *dk, float *dv, float *ws, const float *dout, const float *out,
                             const float *lse, const float *q, const float *k, const float *v, int B, int T, int H,
                             int KV, int hd) {
    (void)ws;
    cuda_attention_backward_t<float>(dq, dk, dv, dout, out, lse, q, k, v, B, T, H, KV, hd);
}

extern "C" int cuda_attention_tensor_cores(int hd) { return tc_head_dim(hd); }
extern "C" long cuda_attention_tc_launches(void) { return tc_launches; }

extern "C" void cuda_mma_selftest(float *d, const uint16_t *a, const uint16_t *b, const float *c, int transposed) {
    LAUNCH(mma_selftest_kernel, dim3(1), 32, 0, d, reinterpret_cast<const bf16s *>(a),
           reinterpret_cast<const bf16s *>(b), c, transposed);
}
