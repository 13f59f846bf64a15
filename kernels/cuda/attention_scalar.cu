/* kernels/cuda/attention_scalar.cu — causal GQA attention, forward and backward, scalar (fp32 arithmetic)
 * flash-style kernels: the fp32 table, and the bf16 table at head dims without tensor-core kernels.
 *
 * What it is: kernels that never materialise a [T,T] score matrix and need no workspace:
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
 * All scores are computed as Σ_d (q_d·scale)·k_d in increasing d in all three kernels, so the
 * probabilities the backward recomputes are those the forward normalised.
 * The kernels are templates on the storage type S of q, k, v, out, dout and the gradients
 * (cuda_common.cuh): S = float for ops_cuda, S = bf16s for ops_cuda_bf16. Either way every value is
 * loaded to float, shared memory, scores, softmax and accumulators are fp32 and lse is fp32; only
 * the stores round (once, for bf16).
 * What it is not: the fast path (the tensor-core kernels of attention_fwd.cu / attention_bwd.cu
 * take bf16 at head dims 64 and 128). Head dimension up to 256 (checked by attention.cu).
 */
#include "kernels/cuda/attention_tile.cuh"

#define ATT_TILE 32   /* keys (forward, dq) or queries (dk/dv) per shared tile: one per lane */
#define ATT_QROWS 8   /* query rows per block in forward and dq: one warp each */
#define ATT_KROWS 16  /* key rows per block in dk/dv: one warp each */

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

/* ---- host side ---------------------------------------------------------------------------- */

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

template <typename S>
void attention_scalar_forward(S *out, float *lse, const S *q, const S *k, const S *v, int B, int T, int H, int KV,
                              int hd) {
    if (hd <= 32) forward_launch<1>(out, lse, q, k, v, B, T, H, KV, hd);
    else if (hd <= 64) forward_launch<2>(out, lse, q, k, v, B, T, H, KV, hd);
    else if (hd <= 128) forward_launch<4>(out, lse, q, k, v, B, T, H, KV, hd);
    else forward_launch<8>(out, lse, q, k, v, B, T, H, KV, hd);
}

template <typename S>
void attention_scalar_backward(S *dq, S *dk, S *dv, const S *dout, const S *out, const float *lse, const S *q,
                               const S *k, const S *v, int B, int T, int H, int KV, int hd) {
    if (hd <= 32) backward_launch<1>(dq, dk, dv, dout, out, lse, q, k, v, B, T, H, KV, hd);
    else if (hd <= 64) backward_launch<2>(dq, dk, dv, dout, out, lse, q, k, v, B, T, H, KV, hd);
    else if (hd <= 128) backward_launch<4>(dq, dk, dv, dout, out, lse, q, k, v, B, T, H, KV, hd);
    else backward_launch<8>(dq, dk, dv, dout, out, lse, q, k, v, B, T, H, KV, hd);
}

template void attention_scalar_forward<float>(float *, float *, const float *, const float *, const float *, int, int,
                                              int, int, int);
template void attention_scalar_forward<bf16s>(bf16s *, float *, const bf16s *, const bf16s *, const bf16s *, int, int,
                                              int, int, int);
template void attention_scalar_backward<float>(float *, float *, float *, const float *, const float *, const float *,
                                               const float *, const float *, const float *, int, int, int, int, int);
template void attention_scalar_backward<bf16s>(bf16s *, bf16s *, bf16s *, const bf16s *, const bf16s *,
                                               const float *, const bf16s *, const bf16s *, const bf16s *, int, int,
                                               int, int, int);
