/* kernels/cuda/attention_bwd.cu — causal GQA attention backward on tensor cores (bf16, head dims 64 and 128).
 *
 * What it is: FlashAttention-2's backward structure on mma.sync.m16n8k16 (shared pieces:
 * attention_tile.cuh), in up to four launches:
 *   prep    D = rowsum(dO ⊙ O) per query row, fp32, once (into the workspace); 16-byte loads.
 *   dk, dv  (query heads) x (key blocks of 64) x (batches) blocks, longest first across heads
 *           (att_longest_first: key block 0 of every head first): one block walks the query tiles
 *           of ONE query head from its diagonal on (tiles above it never load): the serial path is
 *           one key block's query tiles, the GQA group is split across blocks. Sᵀ = K·Qᵀ and
 *           dPᵀ = V·dOᵀ (K, V by plain ldmatrix from the block's tiles, Q and dO streamed through
 *           two cp.async stages), Pᵀ = 2^(s·scale·log2 e − lse·log2 e), dSᵀ = Pᵀ ⊙ (dPᵀ − D), then
 *           dV += Pᵀ·dO and dK += dSᵀ·Q (dO and Q by ldmatrix .trans). With GQA each query head's
 *           dK, dV go to fp32 partial sums in the workspace;
 *   reduce  ... which one element-wise pass adds, head by head in order, into dk and dv (MHA: the
 *           dk/dv kernel adds into them directly and there is no reduce).
 *   dq      H x (query blocks of 64) x B blocks, the last query block of every head first: key tiles
 *           up to the diagonal through two cp.async
 *           stages, S and dP recomputed, dQ += scale · dS·K (K by ldmatrix .trans).
 * dQ has its own pass instead of FlashAttention-2's atomics: every output element is written by
 * one thread, in a fixed order, so results are deterministic (the price: S and dP are computed
 * twice, 7 tile products instead of 5). With the deterministic mode off (attention.cu,
 * --deterministic off) and all three gradients wanted, dq is folded into the dk/dv pass instead
 * (its DQ instantiation): dS goes through a shared tile, dQ += scale·dS·K is added to an fp32 dQ in
 * the workspace by atomics, and one element-wise pass adds that into dq; the deterministic
 * instantiation is the kernel as it was. Scores are s = scale · Σ_d q_d·k_d summed by the mma in
 * increasing d in all kernels, so the backward recomputes the forward's probabilities from its lse;
 * P and dS are rounded to bf16 as mma operands (as FlashAttention does); D, lse and every
 * accumulator are fp32. Workspace: attention_flash_ws_floats(B, T, H, KV, hd) floats (kernels.h).
 * What it is not: wgmma/TMA; a split of the dq pass over keys.
 */
#include "kernels/cuda/attention_tile.cuh"

/* 8 consecutive bf16 (16 bytes when vec) as floats */
static __device__ __forceinline__ void load8(float f[8], const bf16s *p, bool vec) {
    if (vec) {
        const bf16x8 x = *reinterpret_cast<const bf16x8 *>(p);
#pragma unroll
        for (int u = 0; u < 4; u++) {
            f[2 * u] = __uint_as_float(x.w[u] << 16);
            f[2 * u + 1] = __uint_as_float(x.w[u] & 0xffff0000u);
        }
        return;
    }
#pragma unroll
    for (int u = 0; u < 8; u++) f[u] = cload(p, u);
}
static __device__ __forceinline__ void store8(bf16s *p, const float f[8], bool vec) {
    if (vec) {
        bf16x8 x;
#pragma unroll
        for (int u = 0; u < 4; u++) x.w[u] = pack2f(f[2 * u], f[2 * u + 1]);
        *reinterpret_cast<bf16x8 *>(p) = x;
        return;
    }
#pragma unroll
    for (int u = 0; u < 8; u++) cstore(p, u, f[u]);
}

/* D[(b·H + h)·T + t] = Σ_d dO·O of row (b, t, h): HD/8 lanes a row, 8 elements each */
template <int HD>
static __global__ void __launch_bounds__(256)
attention_bwd_prep_kernel(float *D, const bf16s *dout, const bf16s *out, int T, int H, size_t rows, int vec) {
    constexpr int LPR = HD / 8, RPW = 32 / LPR; /* lanes a row, rows a warp */
    const int lane = threadIdx.x & 31, sub = lane / LPR, part = lane % LPR;
    const size_t warp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const size_t nwarps = (size_t)gridDim.x * blockDim.x / 32;
    for (size_t base = warp * RPW; base < rows; base += nwarps * RPW) { /* warp-uniform */
        const size_t r = base + sub;
        float s = 0.0f;
        if (r < rows) {
            float a[8], o[8];
            load8(a, dout + r * HD + part * 8, vec);
            load8(o, out + r * HD + part * 8, vec);
#pragma unroll
            for (int u = 0; u < 8; u++) s += a[u] * o[u];
        }
#pragma unroll
        for (int off = LPR / 2; off > 0; off >>= 1) s += __shfl_xor_sync(FULL_MASK, s, off);
        if (part == 0 && r < rows) { /* row r = (b·T + t)·H + h */
            const size_t h = r % (size_t)H, bt = r / (size_t)H, b = bt / (size_t)T, t = bt % (size_t)T;
            D[(b * H + h) * T + t] = s;
        }
    }
}

/* ---- dk, dv ---------------------------------------------------------------------------------- */
/* The A fragments of the warp's 16 keys of K and V (Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ) are the same for every
 * query tile: at head dim 64 they stay in registers (2 x 16), loaded once, and each query tile reads
 * only Q and dO from shared memory in its first half (8 of 24 ldmatrix.x4 of a warp and tile fewer).
 * At 128 (2 x 32 registers) the kernel would spill: they are read from shared memory every tile. */
template <int HD> struct dkv_frags {
    static constexpr bool REGS = HD == 64;
    uint32_t k[REGS ? HD / 16 : 1][4], v[REGS ? HD / 16 : 1][4];
};
/* row stride of the dS tile of the folded dq ([queries][TC_ROWS keys] bf16; 144 bytes, 16-byte aligned rows) */
static constexpr int DS_LDS = TC_ROWS + 8;

/* The folded dq (--deterministic off): dQ[t0.., :] += scale · dS·K for the query tile t0 from the
 * key block's dS (dSs, every warp's 16 key columns) and K (Ks), added to the fp32 dq32 by atomics.
 * Warp w takes the columns [w·HD/4, (w+1)·HD/4) of all the tile's rows; k-step kk reads the keys of
 * warp kk, skipped where that warp had no query of the tile (its dS columns are stale). Every warp
 * calls it (it follows a barrier). */
template <int HD>
static __device__ __forceinline__ void dq_from_ds(float *dq32, const bf16s *dSs, const bf16s *Ks, int t0, int k0,
                                                  int T, size_t ldq, float scale) {
    constexpr int LDS = att_shape<HD>::LDS, BM = att_shape<HD>::DKV_QUERIES, MT = BM / 16, NP = HD / 64;
    const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, tq = threadIdx.x & 3;
#pragma unroll
    for (int np = 0; np < NP; np++) {
        const int n0 = warp * (HD / 4) + np * 16;
        float acc[MT][2][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[mt][0][i] = acc[mt][1][i] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < TC_ROWS / 16; kk++) {
            if (t0 + BM - 1 < k0 + kk * 16) continue; /* block-uniform: warp kk skipped this tile */
            uint32_t bf[4];
            lds_b_cols(bf, Ks, LDS, kk * 16, n0);
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                uint32_t da[4];
                lds_a(da, dSs, DS_LDS, mt * 16, kk * 16);
                mma_m16n8k16_bf16(acc[mt][0], da, bf, acc[mt][0]);
                mma_m16n8k16_bf16(acc[mt][1], da, bf + 2, acc[mt][1]);
            }
        }
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int row = t0 + mt * 16 + g + (i < 2 ? 0 : 8), col = n0 + 2 * tq + (i & 1);
                if (row >= T) continue;
                atomicAdd(dq32 + (size_t)row * ldq + col, scale * acc[mt][0][i]);
                atomicAdd(dq32 + (size_t)row * ldq + col + 8, scale * acc[mt][1][i]);
            }
    }
}
/* one query tile of the key block: lane rows r0, r1 (keys), queries t0.. (Qt, Gt, Lt, Dt) */
template <int HD, bool DQ>
static __device__ __forceinline__ void dkv_tile(float (&aK)[HD / 8][4], float (&aV)[HD / 8][4],
                                                const dkv_frags<HD> &F, const bf16s *Ks, const bf16s *Vs, const bf16s *Qt, const bf16s *Gt, const float *Lt,
                                                const float *Dt, bf16s *dSs, int t0, int r0, int r1, bool mask, int T,
                                                float sl2, bool want_k, bool want_v) {
    constexpr int LDS = att_shape<HD>::LDS, BM = att_shape<HD>::DKV_QUERIES, NT = BM / 8;
    const int warp = threadIdx.x >> 5, tq = threadIdx.x & 3;
    float s[NT][4], dp[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++) s[nt][i] = dp[nt][i] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
        uint32_t ka[4], va[4];
        if constexpr (dkv_frags<HD>::REGS) {
#pragma unroll
            for (int r = 0; r < 4; r++) ka[r] = F.k[kk][r], va[r] = F.v[kk][r];
        } else {
            lds_a(ka, Ks, LDS, warp * 16, kk * 16);
            if (want_k) lds_a(va, Vs, LDS, warp * 16, kk * 16);
        }
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            uint32_t bf[4];
            lds_b_rows(bf, Qt, LDS, np * 16, kk * 16);
            mma_m16n8k16_bf16(s[2 * np], ka, bf, s[2 * np]); /* Sᵀ = K·Qᵀ */
            mma_m16n8k16_bf16(s[2 * np + 1], ka, bf + 2, s[2 * np + 1]);
            if (want_k) { /* dPᵀ = V·dOᵀ, only dS needs it */
                lds_b_rows(bf, Gt, LDS, np * 16, kk * 16);
                mma_m16n8k16_bf16(dp[2 * np], va, bf, dp[2 * np]);
                mma_m16n8k16_bf16(dp[2 * np + 1], va, bf + 2, dp[2 * np + 1]);
            }
        }
    }
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int c = nt * 8 + 2 * tq + (i & 1), qi = t0 + c;
            const bool valid = !mask || (qi >= (i < 2 ? r0 : r1) && qi < T);
            const float p = valid ? ex2_approx(fmaf(s[nt][i], sl2, -Lt[c] * ATT_LOG2E)) : 0.0f;
            s[nt][i] = p;
            dp[nt][i] = valid ? p * (dp[nt][i] - Dt[c]) : 0.0f; /* dSᵀ */
            if constexpr (DQ) /* dS[query c][key], rounded as the mma operand below rounds it */
                dSs[c * DS_LDS + warp * 16 + (threadIdx.x & 31) / 4 + (i < 2 ? 0 : 8)].bits =
                    bf16_round_bits(dp[nt][i]);
        }
#pragma unroll
    for (int kk = 0; kk < BM / 16; kk++) {
        uint32_t pa[4], da[4];
        acc_to_a(pa, s[2 * kk], s[2 * kk + 1]);
        acc_to_a(da, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
        for (int dt = 0; dt < HD / 16; dt++) {
            uint32_t bf[4];
            if (want_v) {
                lds_b_cols(bf, Gt, LDS, kk * 16, dt * 16);
                mma_m16n8k16_bf16(aV[2 * dt], pa, bf, aV[2 * dt]);
                mma_m16n8k16_bf16(aV[2 * dt + 1], pa, bf + 2, aV[2 * dt + 1]);
            }
            if (want_k) {
                lds_b_cols(bf, Qt, LDS, kk * 16, dt * 16);
                mma_m16n8k16_bf16(aK[2 * dt], da, bf, aK[2 * dt]);
                mma_m16n8k16_bf16(aK[2 * dt + 1], da, bf + 2, aK[2 * dt + 1]);
            }
        }
    }
}

/* Q, dO, lse, D of the query tile t0 into one stage */
template <int HD>
static __device__ __forceinline__ void dkv_load_queries(bf16s *Qt, bf16s *Gt, float *Lt, float *Dt, const bf16s *qb,
                                                        const bf16s *gb, const float *lb, const float *db,
                                                        size_t ldq, int t0, int T, bool vec) {
    constexpr int BM = att_shape<HD>::DKV_QUERIES;
    tile_load<HD>(Qt, qb, ldq, t0, BM, T, vec);
    tile_load<HD>(Gt, gb, ldq, t0, BM, T, vec);
    vec_load(Lt, lb, t0, BM, T);
    vec_load(Dt, db, t0, BM, T);
}

/* grid (ceil(T/64), H, B), 128 threads. partial: add scale·dK, dV of this query head into pk, pv
 * ([B][T][H][HD] fp32, NULL when not wanted) instead of into dk, dv (NULL when not wanted).
 * DQ (the folded dq, all three gradients wanted): also dq32 ([B][T][H][HD] fp32, zeroed) += scale·dS·K
 * by atomics, through a dS tile after the query stages. */
template <int HD, bool DQ>
static __global__ void __launch_bounds__(128, 2)
attention_backward_dkv_tc_kernel(bf16s *dk, bf16s *dv, float *pk, float *pv, float *dq32, int partial,
                                 const bf16s *dout, const float *lse, const float *Dr, const bf16s *q, const bf16s *k,
                                 const bf16s *v, int T, int H, int KV, float sl2, float scale, int vec) {
    constexpr int LDS = att_shape<HD>::LDS, BM = att_shape<HD>::DKV_QUERIES, ND = HD / 8;
    DYNAMIC_SMEM(float, smem);
    bf16s *Ks = reinterpret_cast<bf16s *>(smem); /* [TC_ROWS][LDS] */
    bf16s *Vs = Ks + TC_ROWS * LDS;              /* [TC_ROWS][LDS] */
    bf16s *Qs = Vs + TC_ROWS * LDS;              /* [2][BM][LDS] */
    bf16s *Gs = Qs + 2 * BM * LDS;               /* [2][BM][LDS], dO */
    float *Ls = reinterpret_cast<float *>(Gs + 2 * BM * LDS); /* [2][BM] lse */
    float *Ds = Ls + 2 * BM;                                   /* [2][BM] D */
    bf16s *dSs = reinterpret_cast<bf16s *>(Ds + 2 * BM);       /* DQ: [BM][DS_LDS] dS */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3;
    const att_block blk = att_longest_first(); /* key tile 0 has the most query tiles: first */
    const int b = blk.b, h = blk.h, kvh = h / (H / KV);
    const int k0 = blk.rank * TC_ROWS, kfirst = k0 + warp * 16;
    const int r0 = kfirst + g, r1 = r0 + 8;                         /* this lane's key rows */
    const size_t ldq = (size_t)H * HD, ldk = (size_t)KV * HD;
    const size_t koff = (size_t)b * T * ldk + (size_t)kvh * HD, qoff = (size_t)b * T * ldq + (size_t)h * HD;
    const float *lb = lse + ((size_t)b * H + h) * T, *db = Dr + ((size_t)b * H + h) * T;
    const bool want_k = partial ? pk != nullptr : dk != nullptr, want_v = partial ? pv != nullptr : dv != nullptr;
    tile_load<HD>(Ks, k + koff, ldk, k0, TC_ROWS, T, vec);
    tile_load<HD>(Vs, v + koff, ldk, k0, TC_ROWS, T, vec);
    dkv_frags<HD> F;
    if constexpr (dkv_frags<HD>::REGS) { /* K and V first, in their own group, into registers */
        cp_async_commit();
        dkv_load_queries<HD>(Qs, Gs, Ls, Ds, q + qoff, dout + qoff, lb, db, ldq, k0, T, vec);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
            lds_a(F.k[kk], Ks, LDS, warp * 16, kk * 16);
            lds_a(F.v[kk], Vs, LDS, warp * 16, kk * 16);
        }
    } else {
        dkv_load_queries<HD>(Qs, Gs, Ls, Ds, q + qoff, dout + qoff, lb, db, ldq, k0, T, vec);
        cp_async_commit();
    }
    float aK[ND][4], aV[ND][4];
#pragma unroll
    for (int i = 0; i < ND; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) aK[i][e] = aV[i][e] = 0.0f;
    const int ntiles = (T - k0 + BM - 1) / BM;
    for (int j = 0; j < ntiles; j++) {
        const int st = j & 1, nx = st ^ 1, t0 = k0 + j * BM;
        if (j + 1 < ntiles)
            dkv_load_queries<HD>(Qs + nx * BM * LDS, Gs + nx * BM * LDS, Ls + nx * BM, Ds + nx * BM, q + qoff,
                                 dout + qoff, lb, db, ldq, t0 + BM, T, vec);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        if (t0 + BM - 1 >= kfirst) { /* warp-uniform: some query of the tile sees these keys */
            const bool mask = t0 < kfirst + 15 || t0 + BM > T;
            dkv_tile<HD, DQ>(aK, aV, F, Ks, Vs, Qs + st * BM * LDS, Gs + st * BM * LDS, Ls + st * BM, Ds + st * BM,
                             dSs, t0, r0, r1, mask, T, sl2, want_k, want_v);
        }
        if constexpr (DQ) {
            __syncthreads(); /* every warp's dS columns are written */
            dq_from_ds<HD>(dq32 + qoff, dSs, Ks, t0, k0, T, ldq, scale);
        }
        __syncthreads();
    }
#pragma unroll
    for (int dt = 0; dt < ND; dt++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int row = i < 2 ? r0 : r1, d = dt * 8 + 2 * tq + (i & 1);
            if (row >= T) continue;
            if (partial) {
                const size_t o = ((size_t)(b * T + row) * H + h) * HD + d;
                if (pv) pv[o] = aV[dt][i];
                if (pk) pk[o] = scale * aK[dt][i];
            } else {
                const size_t o = koff + (size_t)row * ldk + d;
                if (dv) cstore(dv, o, cload(dv, o) + aV[dt][i]);
                if (dk) cstore(dk, o, cload(dk, o) + scale * aK[dt][i]);
            }
        }
}

/* dk[b, t, j, :] += Σ_g pk[b, t, j·group + g, :] over the group, g in order; the same for dv.
 * n = B·T·KV·HD / 8 items of 8 elements. */
static __global__ void __launch_bounds__(256)
attention_group_reduce_kernel(bf16s *dk, bf16s *dv, const float *pk, const float *pv, size_t n, int H, int KV, int hd,
                              int vec) {
    const int group = H / KV;
    GRID_STRIDE(i, n) {
        const size_t e = i * 8, d = e % (size_t)hd, row = e / (size_t)hd; /* row = (b·T + t)·KV + j */
        const size_t src = ((row / (size_t)KV) * H + (row % (size_t)KV) * group) * hd + d;
        for (int w = 0; w < 2; w++) {
            bf16s *dst = w ? dv : dk;
            const float *p = w ? pv : pk;
            if (!dst) continue;
            float acc[8];
            load8(acc, dst + e, vec);
            for (int gh = 0; gh < group; gh++)
#pragma unroll
                for (int u = 0; u < 8; u++) acc[u] += p[src + (size_t)gh * hd + u];
            store8(dst + e, acc, vec);
        }
    }
}

/* dq[e] += dq32[e] for the folded dq's fp32 sums, 8 elements an item: n = B·T·H·HD / 8 */
static __global__ void __launch_bounds__(256) attention_dq_add_kernel(bf16s *dq, const float *dq32, size_t n, int vec) {
    GRID_STRIDE(i, n) {
        float acc[8];
        load8(acc, dq + i * 8, vec);
#pragma unroll
        for (int u = 0; u < 8; u++) acc[u] += dq32[i * 8 + u];
        store8(dq + i * 8, acc, vec);
    }
}

/* ---- dq -------------------------------------------------------------------------------------- */
template <int HD>
static __device__ __forceinline__ void dq_tile(float (&acc)[HD / 8][4], const bf16s *Qs, const bf16s *Gs,
                                               const bf16s *Kt, const bf16s *Vt, int t0, int r0, int r1, bool diag,
                                               float L0, float L1, float D0, float D1, float sl2) {
    constexpr int LDS = att_shape<HD>::LDS, BN = att_shape<HD>::DQ_KEYS, NT = BN / 8;
    const int warp = threadIdx.x >> 5, tq = threadIdx.x & 3;
    float s[NT][4], dp[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++) s[nt][i] = dp[nt][i] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
        uint32_t qa[4], ga[4];
        lds_a(qa, Qs, LDS, warp * 16, kk * 16);
        lds_a(ga, Gs, LDS, warp * 16, kk * 16);
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            uint32_t bf[4];
            lds_b_rows(bf, Kt, LDS, np * 16, kk * 16);
            mma_m16n8k16_bf16(s[2 * np], qa, bf, s[2 * np]); /* S = Q·Kᵀ */
            mma_m16n8k16_bf16(s[2 * np + 1], qa, bf + 2, s[2 * np + 1]);
            lds_b_rows(bf, Vt, LDS, np * 16, kk * 16);
            mma_m16n8k16_bf16(dp[2 * np], ga, bf, dp[2 * np]); /* dP = dO·Vᵀ */
            mma_m16n8k16_bf16(dp[2 * np + 1], ga, bf + 2, dp[2 * np + 1]);
        }
    }
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int key = t0 + nt * 8 + 2 * tq + (i & 1);
            /* key <= row: rows past T (zero Q, dO, lse, D) give dS = 0 and are never stored */
            const bool valid = !diag || key <= (i < 2 ? r0 : r1);
            const float p = valid ? ex2_approx(fmaf(s[nt][i], sl2, -(i < 2 ? L0 : L1))) : 0.0f;
            s[nt][i] = valid ? p * (dp[nt][i] - (i < 2 ? D0 : D1)) : 0.0f; /* dS */
        }
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) {
        uint32_t da[4];
        acc_to_a(da, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
        for (int dt = 0; dt < HD / 16; dt++) {
            uint32_t bf[4];
            lds_b_cols(bf, Kt, LDS, kk * 16, dt * 16);
            mma_m16n8k16_bf16(acc[2 * dt], da, bf, acc[2 * dt]);
            mma_m16n8k16_bf16(acc[2 * dt + 1], da, bf + 2, acc[2 * dt + 1]);
        }
    }
}

/* dQ += scale · dS·K. grid (ceil(T/64), H, B), 128 threads; 3 blocks an SM at hd 64, 2 at hd 128
 * (at 3, 168 registers, it spills on sm_90) */
template <int HD>
static __global__ void __launch_bounds__(128, HD == 64 ? 3 : 2)
attention_backward_dq_tc_kernel(bf16s *dq, const bf16s *dout, const float *lse, const float *Dr, const bf16s *q,
                                const bf16s *k, const bf16s *v, int T, int H, int KV, float sl2, float scale,
                                int vec) {
    constexpr int LDS = att_shape<HD>::LDS, BN = att_shape<HD>::DQ_KEYS, ND = HD / 8;
    DYNAMIC_SMEM(float, smem);
    bf16s *Qs = reinterpret_cast<bf16s *>(smem); /* [TC_ROWS][LDS] */
    bf16s *Gs = Qs + TC_ROWS * LDS;              /* [TC_ROWS][LDS], dO */
    bf16s *Ks = Gs + TC_ROWS * LDS;              /* [2][BN][LDS] */
    bf16s *Vs = Ks + 2 * BN * LDS;               /* [2][BN][LDS] */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3;
    const att_block blk = att_longest_first(); /* the longest query tiles of every head first */
    const int b = blk.b, h = blk.h, kvh = h / (H / KV);
    const int q0 = ((int)att_tiles(T) - 1 - blk.rank) * TC_ROWS;
    const int r0 = q0 + warp * 16 + g, r1 = r0 + 8;
    const size_t ldq = (size_t)H * HD, ldk = (size_t)KV * HD;
    const size_t qoff = (size_t)b * T * ldq + (size_t)h * HD;
    const bf16s *kb = k + (size_t)b * T * ldk + (size_t)kvh * HD;
    const bf16s *vb = v + (size_t)b * T * ldk + (size_t)kvh * HD;
    tile_load<HD>(Qs, q + qoff, ldq, q0, TC_ROWS, T, vec);
    tile_load<HD>(Gs, dout + qoff, ldq, q0, TC_ROWS, T, vec);
    tile_load<HD>(Ks, kb, ldk, 0, BN, T, vec);
    tile_load<HD>(Vs, vb, ldk, 0, BN, T, vec);
    cp_async_commit();
    const float *lb = lse + ((size_t)b * H + h) * T, *db = Dr + ((size_t)b * H + h) * T;
    const float L0 = r0 < T ? lb[r0] * ATT_LOG2E : 0.0f, L1 = r1 < T ? lb[r1] * ATT_LOG2E : 0.0f;
    const float D0 = r0 < T ? db[r0] : 0.0f, D1 = r1 < T ? db[r1] : 0.0f;
    float acc[ND][4];
#pragma unroll
    for (int i = 0; i < ND; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
    const int ntiles = (att_key_end(q0, T) + BN - 1) / BN;
    for (int j = 0; j < ntiles; j++) {
        const int st = j & 1, t0 = j * BN;
        if (j + 1 < ntiles) {
            tile_load<HD>(Ks + (st ^ 1) * BN * LDS, kb, ldk, t0 + BN, BN, T, vec);
            tile_load<HD>(Vs + (st ^ 1) * BN * LDS, vb, ldk, t0 + BN, BN, T, vec);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        if (t0 <= q0 + warp * 16 + 15) /* warp-uniform: some key of the tile is at or below a row */
            dq_tile<HD>(acc, Qs, Gs, Ks + st * BN * LDS, Vs + st * BN * LDS, t0, r0, r1,
                        t0 + BN - 1 > q0 + warp * 16, L0, L1, D0, D1, sl2);
        __syncthreads();
    }
    bf16s *dqb = dq + qoff;
#pragma unroll
    for (int dt = 0; dt < ND; dt++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int row = i < 2 ? r0 : r1;
            const size_t o = (size_t)row * ldq + dt * 8 + 2 * tq + (i & 1);
            if (row < T) cstore(dqb, o, cload(dqb, o) + scale * acc[dt][i]);
        }
}

/* ---- host side ------------------------------------------------------------------------------- */
template <int HD> static size_t smem_dq() {
    return (2u * TC_ROWS + 4u * att_shape<HD>::DQ_KEYS) * (size_t)att_shape<HD>::LDS * sizeof(bf16s);
}
template <int HD, bool DQ> static size_t smem_dkv() {
    constexpr size_t BM = att_shape<HD>::DKV_QUERIES;
    return (2u * TC_ROWS + 4u * BM) * (size_t)att_shape<HD>::LDS * sizeof(bf16s) + 4u * BM * sizeof(float) +
           (DQ ? BM * DS_LDS * sizeof(bf16s) : 0u);
}

/* the dk/dv pass, with the folded dq when dq32 is not NULL (then dk and dv are not NULL either) */
template <int HD, bool DQ>
static void launch_dkv(bf16s *dk, bf16s *dv, float *pk, float *pv, float *dq32, int partial, const bf16s *dout,
                       const float *lse, const float *Dr, const bf16s *q, const bf16s *k, const bf16s *v, int B,
                       int T, int H, int KV, float sl2, float scale, int vec) {
    const size_t smem = smem_dkv<HD, DQ>();
    constexpr auto kernel = attention_backward_dkv_tc_kernel<HD, DQ>; /* one name: LAUNCH is a macro */
    allow_smem(kernel, smem);
    LAUNCH(kernel, att_grid(B, T, H), 128, smem, dk, dv, pk, pv, dq32, partial, dout, lse, Dr, q, k, v, T, H, KV, sl2,
           scale, vec);
}

template <int HD>
int attention_tc_backward(bf16s *dq, bf16s *dk, bf16s *dv, float *ws, const bf16s *dout, const bf16s *out,
                          const float *lse, const bf16s *q, const bf16s *k, const bf16s *v, int B, int T, int H,
                          int KV, bool fold_dq) {
    if (!ws) {
        fprintf(stderr, "cuda attention_backward: the tensor-core kernels need a workspace of "
                        "attention_flash_ws_floats(B, T, H, KV, hd) floats, got NULL\n");
        exit(1);
    }
    const float scale = 1.0f / sqrtf((float)HD), sl2 = scale * ATT_LOG2E;
    const size_t ldq = (size_t)H * HD, ldk = (size_t)KV * HD, rows = (size_t)B * T * H;
    const int vec = tile_vec_ok(q, ldq) && tile_vec_ok(dout, ldq) && tile_vec_ok(k, ldk) && tile_vec_ok(v, ldk);
    float *Dr = ws, *part = ws + ((size_t)B * H * T + 3) / 4 * 4;
    const int prep_vec = vec && tile_vec_ok(out, ldq);
    LAUNCH(attention_bwd_prep_kernel<HD>, grid_for(rows, 256 / 32 * (32 / (HD / 8))), 256, 0, Dr, dout, out, T, H,
           rows, prep_vec);
    int launched = 0;
    /* the folded dq needs dS, hence dP, hence the whole dk/dv pass: only when all three are wanted */
    float *dq32 = fold_dq && dq && dk && dv ? ws + attention_flash_ws_floats(B, T, H, KV, HD) : nullptr;
    if (dq32) cudaCheck(cudaMemsetAsync(dq32, 0, rows * HD * sizeof(float), 0));
    if (dq && !dq32) {
        const size_t smem = smem_dq<HD>();
        allow_smem(attention_backward_dq_tc_kernel<HD>, smem);
        LAUNCH(attention_backward_dq_tc_kernel<HD>, att_grid(B, T, H), 128, smem, dq, dout, lse,
               (const float *)Dr, q, k, v, T, H, KV, sl2, scale, vec);
        launched++;
    }
    if (dk || dv) {
        const int partial = H != KV;
        float *pk = partial && dk ? part : nullptr, *pv = partial && dv ? part + rows * HD : nullptr;
        if (dq32)
            launch_dkv<HD, true>(dk, dv, pk, pv, dq32, partial, dout, lse, Dr, q, k, v, B, T, H, KV, sl2, scale, vec);
        else
            launch_dkv<HD, false>(dk, dv, pk, pv, nullptr, partial, dout, lse, Dr, q, k, v, B, T, H, KV, sl2, scale,
                                  vec);
        launched++;
        if (partial) {
            const size_t n = (size_t)B * T * KV * HD / 8;
            const int rvec = (!dk || tile_vec_ok(dk, ldk)) && (!dv || tile_vec_ok(dv, ldk));
            LAUNCH(attention_group_reduce_kernel, grid_for(n, 256), 256, 0, dk, dv, (const float *)pk,
                   (const float *)pv, n, H, KV, HD, rvec);
        }
    }
    if (dq32) {
        const size_t n = rows * HD / 8;
        LAUNCH(attention_dq_add_kernel, grid_for(n, 256), 256, 0, dq, (const float *)dq32, n, tile_vec_ok(dq, ldq));
    }
    return launched;
}

template int attention_tc_backward<64>(bf16s *, bf16s *, bf16s *, float *, const bf16s *, const bf16s *,
                                       const float *, const bf16s *, const bf16s *, const bf16s *, int, int, int,
                                       int, bool);
template int attention_tc_backward<128>(bf16s *, bf16s *, bf16s *, float *, const bf16s *, const bf16s *,
                                        const float *, const bf16s *, const bf16s *, const bf16s *, int, int, int,
                                        int, bool);
