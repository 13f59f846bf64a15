/* kernels/cuda/attention_fwd.cu — causal GQA attention forward on tensor cores (bf16, head dims 64 and 128).
 *
 * What it is: FlashAttention-2's forward on mma.sync.m16n8k16 (shared pieces: attention_tile.cuh).
 * A block is 64 query rows (4 warps x 16) of one (batch, query head); at head dim 64 with T past
 * one 64-row tile, 128 rows (4 warps x 32, two m-tiles a warp: every K and V fragment a warp reads
 * from shared memory serves 32 rows, half the shared-memory reads a row; 224 registers, 2 blocks
 * an SM, 54 KiB with Q's own tile). It walks the key tiles of 64
 * up to the diagonal (tiles above it are never loaded) through two shared stages: tile j + 1 is in
 * flight (cp.async) while tile j is computed, one commit group per tile, wait_group 1 before use.
 * Q is loaded once into registers (ldmatrix), through V's second stage (a tile of its own in
 * 128-row blocks). S = Q·Kᵀ takes K by plain
 * ldmatrix; O += P·V takes V by ldmatrix .trans; P comes from the S accumulators in registers.
 * Scores are kept in the log2 domain: s₂ = (q·k)·scale·log2(e), one FMUL folded into the score, so
 * every exponential is one ex2.approx; lse = (m₂ + log2 l)·ln 2 is stored in the natural log the
 * interface and the backward expect. Tile shape for occupancy: 128 threads, 36 KiB (hd 64) or
 * 68 KiB (hd 128) of shared memory, registers capped by __launch_bounds__ at 168 (3 blocks, 12
 * warps an SM; at 4 blocks, 128 registers, hd 64 spills on sm_90; the 128-row kernel at 2 blocks,
 * 255); tests/t_cuda_sass.sh checks the
 * SASS has no spills.
 * What it is not: wgmma/TMA (sm_90 only) or a split over keys (flash-decoding); the launch puts the
 * longest rows first, the only load balancing.
 */
#include "kernels/cuda/attention_tile.cuh"


/* one key tile for the MT m-tiles (16 rows each) of this warp: S = Q·Kᵀ (log2 domain, masked on the
 * diagonal tile), the online softmax update of m, l and O, then O += P·V. Each K and V fragment read
 * from shared memory serves all MT m-tiles. Rows r[mt][0], r[mt][1] of this lane; keys t0.. */
template <int HD, int MT>
static __device__ __forceinline__ void fwd_tile(float (&o)[MT][HD / 8][4], float (&m)[MT][2], float (&l)[MT][2],
                                                const uint32_t (&qf)[MT][HD / 16][4], const bf16s *Kt,
                                                const bf16s *Vt, int t0, const int (&r)[MT][2], bool diag, float sl2) {
    constexpr int LDS = att_shape<HD>::LDS, BN = att_shape<HD>::FWD_KEYS, NT = BN / 8;
    const int tq = threadIdx.x & 3;
    float s[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++)
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            uint32_t bf[4];
            lds_b_rows(bf, Kt, LDS, np * 16, kk * 16);
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                mma_m16n8k16_bf16(s[mt][2 * np], qf[mt][kk], bf, s[mt][2 * np]);
                mma_m16n8k16_bf16(s[mt][2 * np + 1], qf[mt][kk], bf + 2, s[mt][2 * np + 1]);
            }
        }
    uint32_t pa[MT][BN / 16][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                float x = s[mt][nt][i] * sl2;
                /* keys past T only occur in the diagonal tile, and only for rows past T (key <= row) */
                if (diag && t0 + nt * 8 + 2 * tq + (i & 1) > r[mt][i >> 1]) x = -INFINITY;
                s[mt][nt][i] = x;
                if (i < 2) mx0 = fmaxf(mx0, x);
                else mx1 = fmaxf(mx1, x);
            }
        const float mn0 = fmaxf(m[mt][0], group_max(mx0)), mn1 = fmaxf(m[mt][1], group_max(mx1));
        /* a row with no valid key yet keeps m = -inf without computing inf - inf */
        const float ref0 = mn0 == -INFINITY ? 0.0f : mn0, ref1 = mn1 == -INFINITY ? 0.0f : mn1;
        const float c0 = ex2_approx(m[mt][0] - ref0), c1 = ex2_approx(m[mt][1] - ref1); /* 0 while m was -inf */
        m[mt][0] = mn0;
        m[mt][1] = mn1;
        l[mt][0] *= c0;
        l[mt][1] *= c1;
#pragma unroll
        for (int i = 0; i < HD / 8; i++) {
            o[mt][i][0] *= c0;
            o[mt][i][1] *= c0;
            o[mt][i][2] *= c1;
            o[mt][i][3] *= c1;
        }
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            s[mt][nt][0] = ex2_approx(s[mt][nt][0] - ref0);
            s[mt][nt][1] = ex2_approx(s[mt][nt][1] - ref0);
            s[mt][nt][2] = ex2_approx(s[mt][nt][2] - ref1);
            s[mt][nt][3] = ex2_approx(s[mt][nt][3] - ref1);
            l[mt][0] += s[mt][nt][0] + s[mt][nt][1];
            l[mt][1] += s[mt][nt][2] + s[mt][nt][3];
        }
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) acc_to_a(pa[mt][kk], s[mt][2 * kk], s[mt][2 * kk + 1]);
    }
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++)
#pragma unroll
        for (int dp = 0; dp < HD / 16; dp++) {
            uint32_t bf[4];
            lds_b_cols(bf, Vt, LDS, kk * 16, dp * 16);
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                mma_m16n8k16_bf16(o[mt][2 * dp], pa[mt][kk], bf, o[mt][2 * dp]);
                mma_m16n8k16_bf16(o[mt][2 * dp + 1], pa[mt][kk], bf + 2, o[mt][2 * dp + 1]);
            }
        }
}

/* H x ceil(T/(64·MT)) x B blocks, the longest (last) query tile of every head first (att_longest_first),
 * 128 threads, each warp 16·MT consecutive rows of the block's 64·MT; sl2 = scale·log2(e). MT = 1: Q
 * comes through V's second stage; MT = 2: through a tile of its own after the stages. */
template <int HD, int MT>
static __global__ void __launch_bounds__(128, MT == 1 ? 3 : 2)
attention_forward_tc_kernel(bf16s *out, float *lse, const bf16s *q, const bf16s *k, const bf16s *v, int T, int H,
                            int KV, float sl2, int vec) {
    constexpr int LDS = att_shape<HD>::LDS, BN = att_shape<HD>::FWD_KEYS, KD = HD / 16, ND = HD / 8;
    constexpr int ROWS = TC_ROWS * MT, WROWS = 16 * MT;
    static_assert(BN == TC_ROWS, "with MT = 1, Q is loaded through a key stage");
    DYNAMIC_SMEM(float, smem);
    bf16s *Ks = reinterpret_cast<bf16s *>(smem); /* [2][BN][LDS] */
    bf16s *Vs = Ks + 2 * BN * LDS;               /* [2][BN][LDS] */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3;
    const att_block blk = att_longest_first(); /* the longest query tiles of every head first */
    const int b = blk.b, h = blk.h, kvh = h / (H / KV);
    const int q0 = ((int)att_tiles_of(T, ROWS) - 1 - blk.rank) * ROWS, w0 = q0 + warp * WROWS;
    int r[MT][2]; /* this lane's rows: g and g + 8 of each m-tile */
#pragma unroll
    for (int mt = 0; mt < MT; mt++) r[mt][0] = w0 + mt * 16 + g, r[mt][1] = r[mt][0] + 8;
    const size_t ldq = (size_t)H * HD, ldk = (size_t)KV * HD;
    const bf16s *qb = q + (size_t)b * T * ldq + (size_t)h * HD;
    const bf16s *kb = k + (size_t)b * T * ldk + (size_t)kvh * HD;
    const bf16s *vb = v + (size_t)b * T * ldk + (size_t)kvh * HD;
    bf16s *Qs = MT == 1 ? Vs + BN * LDS : Vs + 2 * BN * LDS; /* MT 1: V's second stage, free until tile 1 loads */
    tile_load<HD>(Qs, qb, ldq, q0, ROWS, T, vec);
    cp_async_commit();
    tile_load<HD>(Ks, kb, ldk, 0, BN, T, vec);
    tile_load<HD>(Vs, vb, ldk, 0, BN, T, vec);
    cp_async_commit();
    cp_async_wait<1>(); /* Q */
    __syncthreads();
    uint32_t qf[MT][KD][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int kk = 0; kk < KD; kk++) lds_a(qf[mt][kk], Qs, LDS, warp * WROWS + mt * 16, kk * 16);
    if (MT == 1) __syncthreads(); /* every warp holds its Q: the stage is free */
    float o[MT][ND][4], m[MT][2], l[MT][2]; /* rows r[mt][0..1]; l is this lane's part */
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int i = 0; i < ND; i++) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.0f;
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.0f;
    }
    const int ntiles = (imin(q0 + ROWS, T) + BN - 1) / BN;
    for (int j = 0; j < ntiles; j++) {
        const int st = j & 1;
        if (j + 1 < ntiles) { /* into the stage tile j - 1 used; the barrier ending j - 1 freed it */
            tile_load<HD>(Ks + (st ^ 1) * BN * LDS, kb, ldk, (j + 1) * BN, BN, T, vec);
            tile_load<HD>(Vs + (st ^ 1) * BN * LDS, vb, ldk, (j + 1) * BN, BN, T, vec);
        }
        cp_async_commit(); /* one group per iteration, empty on the last */
        cp_async_wait<1>(); /* all but the newest: tile j has landed (for this thread) */
        __syncthreads();    /* ... and for every thread */
        const int t0 = j * BN;
        /* warp-uniform: with MT = 2 the last tile can lie wholly above a warp's rows (nothing to add) */
        if (MT == 1 || t0 <= w0 + WROWS - 1) {
            const bool diag = t0 + BN - 1 > w0; /* some key of the tile > some row of the warp */
            fwd_tile<HD, MT>(o, m, l, qf, Ks + st * BN * LDS, Vs + st * BN * LDS, t0, r, diag, sl2);
        }
        __syncthreads(); /* stage st is consumed before iteration j + 1 refills it */
    }
    bf16s *ob = out + (size_t)b * T * ldq + (size_t)h * HD;
    float *lb = lse + ((size_t)b * H + h) * T;
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        const float l0 = group_sum(l[mt][0]), l1 = group_sum(l[mt][1]);
        const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
        const int r0 = r[mt][0], r1 = r[mt][1];
#pragma unroll
        for (int dt = 0; dt < ND; dt++) {
            const int c = dt * 8 + 2 * tq;
            if (r0 < T) {
                cstore(ob, (size_t)r0 * ldq + c, o[mt][dt][0] * inv0);
                cstore(ob, (size_t)r0 * ldq + c + 1, o[mt][dt][1] * inv0);
            }
            if (r1 < T) {
                cstore(ob, (size_t)r1 * ldq + c, o[mt][dt][2] * inv1);
                cstore(ob, (size_t)r1 * ldq + c + 1, o[mt][dt][3] * inv1);
            }
        }
        if (tq == 0 && r0 < T) lb[r0] = (m[mt][0] + log2f(l0)) * ATT_LN2;
        if (tq == 0 && r1 < T) lb[r1] = (m[mt][1] + log2f(l1)) * ATT_LN2;
    }
}

/* K and V in two stages; with MT = 2 a Q tile of 128 rows after them */
template <int HD, int MT> static size_t smem_forward() {
    return (4u * att_shape<HD>::FWD_KEYS + (MT == 1 ? 0u : TC_ROWS * MT)) * (size_t)att_shape<HD>::LDS * sizeof(bf16s);
}

/* 32 rows a warp (MT = 2: each K and V fragment read from shared memory serves two m-tiles, half the
 * shared-memory reads a row) at head dim 64 when there is more than one 64-row tile; 16 rows a warp
 * otherwise (at 128, two m-tiles' accumulators would spill). */
template <int HD, int MT>
static void launch_forward(bf16s *out, float *lse, const bf16s *q, const bf16s *k, const bf16s *v, int B, int T,
                           int H, int KV, float sl2, int vec) {
    const size_t smem = smem_forward<HD, MT>();
    constexpr auto kernel = attention_forward_tc_kernel<HD, MT>; /* one name: LAUNCH is a macro */
    allow_smem(kernel, smem);
    LAUNCH(kernel, att_grid_rows(B, T, H, TC_ROWS * MT), 128, smem, out, lse, q, k, v, T, H, KV, sl2, vec);
}

template <int HD>
void attention_tc_forward(bf16s *out, float *lse, const bf16s *q, const bf16s *k, const bf16s *v, int B, int T, int H,
                          int KV) {
    const float sl2 = ATT_LOG2E / sqrtf((float)HD);
    const size_t ldq = (size_t)H * HD, ldk = (size_t)KV * HD;
    const int vec = tile_vec_ok(q, ldq) && tile_vec_ok(k, ldk) && tile_vec_ok(v, ldk);
    if constexpr (HD == 64) /* no MT = 2 instantiation at 128 */
        if (att_fwd_rows(HD, T) == 2 * TC_ROWS) return launch_forward<HD, 2>(out, lse, q, k, v, B, T, H, KV, sl2, vec);
    launch_forward<HD, 1>(out, lse, q, k, v, B, T, H, KV, sl2, vec);
}

template void attention_tc_forward<64>(bf16s *, float *, const bf16s *, const bf16s *, const bf16s *, int, int, int,
                                       int);
template void attention_tc_forward<128>(bf16s *, float *, const bf16s *, const bf16s *, const bf16s *, int, int, int,
                                        int);
