/* kernels/cuda/attention_tile.cuh — what the tensor-core attention kernels (attention_fwd.cu,
 * attention_bwd.cu) share: tile shapes, asynchronous tile loads, ldmatrix fragment loads, bf16
 * packing and the row reductions of the 4 lanes that hold one row of an mma accumulator.
 *
 * What it is: private to kernels/cuda. The kernels are FlashAttention-2 on mma.sync.m16n8k16 (bf16
 * operands, fp32 accumulation), each warp owning 16 rows of its block's tile; fragments follow the
 * PTX ISA tables (tests/emu/cuda_emu_mma.cuh, cuda_emu_ptx.cuh emulate them from those tables):
 * groupID g = lane >> 2 and t = lane % 4 hold rows g and g+8, columns 2t, 2t+1 (and +8).
 * Shared tiles are bf16 rows of HD + 8 elements: 144 or 272 bytes, so a row starts 16-byte aligned
 * (ldmatrix, cp.async) and the 8 rows one ldmatrix matrix reads fall in 8 different 4-bank groups.
 * Global → shared copies are cp.async.cg of 16 bytes with zero fill past the last row; tensors whose
 * rows are not 16-byte aligned take plain 2-byte loads and stores instead (same tile, same barriers).
 * What it is not: a general GEMM tile library; the shapes are those of the three kernels.
 */
#ifndef MESHSWEEP_ATTENTION_TILE_CUH
#define MESHSWEEP_ATTENTION_TILE_CUH
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ptx.cuh"

#define TC_ROWS 64   /* rows of a block's own tile: 4 warps x 16 (queries in forward and dq, keys in dk/dv) */
#define TC_WARPS 4
#define ATT_LOG2E 1.4426950408889634f
#define ATT_LN2 0.6931471805599453f

/* the other tile: keys per forward step, keys per dq step, queries per dk/dv step. Head dim 128
 * halves the backward's streamed tile to keep the accumulators (dQ, or dK and dV) in registers. */
template <int HD> struct att_shape {
    static constexpr int LDS = HD + 8;
    static constexpr int FWD_KEYS = 64;
    static constexpr int DQ_KEYS = HD == 64 ? 64 : 32;
    static constexpr int DKV_QUERIES = HD == 64 ? 64 : 32;
};

/* Longest first across heads. The blocks of a causal pass do unequal work (a query tile's grows with
 * its index, a key tile's shrinks), and the device hands out blocks in the order of their linear
 * index (x fastest). The passes run on a grid of H x tiles x B blocks: heads vary fastest, then the
 * tile's rank by length, so within a batch every head gets its longest tile before any gets its
 * second, and the shortest tiles of all heads fill the tail of the pass instead of a whole head's
 * long ones. The indices stay plain blockIdx reads (no division, nothing held in registers). Rank 0
 * is the longest. */
struct att_block { int rank, h, b; };
static __host__ __device__ __forceinline__ unsigned att_tiles_of(int T, int rows) { return (unsigned)((T + rows - 1) / rows); }
static __host__ __device__ __forceinline__ unsigned att_tiles(int T) { return att_tiles_of(T, TC_ROWS); }
static __device__ __forceinline__ att_block att_longest_first() {
    return att_block{(int)blockIdx.y, (int)blockIdx.x, (int)blockIdx.z};
}
/* the grid of a pass */
static inline dim3 att_grid_rows(int B, int T, int H, int rows) { return dim3((unsigned)H, att_tiles_of(T, rows), (unsigned)B); }
static inline dim3 att_grid(int B, int T, int H) { return att_grid_rows(B, T, H, TC_ROWS); }
/* query rows of a forward block: 128 (32 a warp) at head dim 64 past one 64-row tile, else 64 */
static inline int att_fwd_rows(int hd, int T) { return hd == 64 && T > TC_ROWS ? 2 * TC_ROWS : TC_ROWS; }

/* the causal row range [0, end) of keys a query block [q0, q0 + TC_ROWS) reads */
static __device__ __forceinline__ int att_key_end(int q0, int T) { return imin(q0 + TC_ROWS, T); }

/* two bf16 as one 32-bit operand register, the first in the low half */
static __device__ __forceinline__ uint32_t pack2f(float lo, float hi) {
    return bf16_round_bits(lo) | (uint32_t)bf16_round_bits(hi) << 16;
}
/* an mma accumulator pair of n-tiles (16 x 16) as the A operand of the next mma */
static __device__ __forceinline__ void acc_to_a(uint32_t a[4], const float lo[4], const float hi[4]) {
    a[0] = pack2f(lo[0], lo[1]);
    a[1] = pack2f(lo[2], lo[3]);
    a[2] = pack2f(hi[0], hi[1]);
    a[3] = pack2f(hi[2], hi[3]);
}

/* ---- fragments from shared tiles (ldmatrix) ----------------------------------------------------
 * A (16 x 16): rows row0.., columns col0.. of a row-major tile: matrices (rows +0, cols +0),
 * (+8, +0), (+0, +8), (+8, +8) = a0..a3. Lane l addresses row l % 16, column 8·(l / 16). */
static __device__ __forceinline__ void lds_a(uint32_t a[4], const bf16s *tile, int lds, int row0, int col0) {
    const int l = threadIdx.x & 31;
    ldsm_x4(a, tile + (row0 + (l & 15)) * lds + col0 + 8 * (l >> 4));
}
/* B fragments of the n-tiles n0 (b[0..1]) and n0 + 8 (b[2..3]) for the k-step k0.., where B = tileᵀ:
 * tile row n holds B's column n along k (K for S = Q·Kᵀ, Q for Sᵀ = K·Qᵀ). Plain ldmatrix. */
static __device__ __forceinline__ void lds_b_rows(uint32_t b[4], const bf16s *tile, int lds, int n0, int k0) {
    const int l = threadIdx.x & 31;
    ldsm_x4(b, tile + (n0 + (l & 7) + 8 * (l >> 4)) * lds + k0 + 8 * ((l >> 3) & 1));
}
/* the same where B = tile: tile row k holds B's row k along n (V for P·V, K for dS·K, dO and Q in
 * dk/dv): ldmatrix .trans */
static __device__ __forceinline__ void lds_b_cols(uint32_t b[4], const bf16s *tile, int lds, int k0, int n0) {
    const int l = threadIdx.x & 31;
    ldsm_x4_trans(b, tile + (k0 + (l & 15)) * lds + n0 + 8 * (l >> 4));
}

/* ---- global → shared -------------------------------------------------------------------------
 * rows [r0, r0 + n) of HD columns of a bf16 matrix (leading dimension ld) into a tile of row stride
 * HD + 8; rows at or past `rows` are zero. vec: the rows are 16-byte aligned (uniform; always so
 * for the engine's buffers): cp.async, to be committed and waited for by the caller; else plain
 * loads and stores, complete at once. */
struct alignas(16) bf16x8 {
    uint32_t w[4];
};
template <int HD>
static __device__ __forceinline__ void tile_load(bf16s *tile, const bf16s *g, size_t ld, int r0, int n, int rows,
                                                 bool vec) {
    constexpr int LDS = HD + 8, PER_ROW = HD / 8;
    if (vec) {
        for (int idx = threadIdx.x; idx < n * PER_ROW; idx += blockDim.x) {
            const int r = idx / PER_ROW, c = (idx - r * PER_ROW) * 8; /* PER_ROW is a power of two */
            const bool in = r0 + r < rows;
            /* a zero-filled copy reads nothing, but its address stays one of the matrix */
            cp_async_cg(tile + r * LDS + c, g + (size_t)(in ? r0 + r : 0) * ld + c, in ? 16 : 0);
        }
        return;
    }
    for (int idx = threadIdx.x; idx < n * HD; idx += blockDim.x) {
        const int r = idx / HD, d = idx - r * HD;
        bf16s x;
        x.bits = 0;
        if (r0 + r < rows) x = g[(size_t)(r0 + r) * ld + d];
        tile[r * LDS + d] = x;
    }
}
/* n fp32 values src[r0..] into dst, 0 past `rows` (lse and D of a query tile) */
static __device__ __forceinline__ void vec_load(float *dst, const float *src, int r0, int n, int rows) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const bool in = r0 + i < rows;
        cp_async_ca<4>(dst + i, src + (in ? r0 + i : 0), in ? 4 : 0);
    }
}
/* rows of a global bf16 matrix with leading dimension ld, starting at g, may take the 16-byte path */
static inline bool tile_vec_ok(const void *g, size_t ld) { return ((uintptr_t)g & 15u) == 0 && (ld & 7u) == 0; }

/* ---- the 4 lanes of a group hold one accumulator row between them ---------------------------- */
static __device__ __forceinline__ float group_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, 1));
    return fmaxf(v, __shfl_xor_sync(FULL_MASK, v, 2));
}
static __device__ __forceinline__ float group_sum(float v) {
    v += __shfl_xor_sync(FULL_MASK, v, 1);
    return v + __shfl_xor_sync(FULL_MASK, v, 2);
}

/* kernels needing more than the default 48 KiB of dynamic shared memory opt in (A100 and H100
 * allow 163 and 227 KiB a block) */
template <typename K> static void allow_smem(K kernel, size_t bytes) {
    if (bytes > 48u * 1024u)
        cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

/* ---- entry points of attention_fwd.cu / attention_bwd.cu (HD = 64, 128), called by attention.cu */
template <int HD>
void attention_tc_forward(bf16s *out, float *lse, const bf16s *q, const bf16s *k, const bf16s *v, int B, int T, int H,
                          int KV);
/* ws: attention_flash_ws_floats(B, T, H, KV, HD) floats of device memory, attention_flash_fold_ws_floats
 * with fold_dq (dq summed by fp32 atomics in the dk/dv pass when all three gradients are wanted: one
 * mma pass instead of two, in a run-dependent order); returns the number of tensor-core (mma)
 * kernels launched */
template <int HD>
int attention_tc_backward(bf16s *dq, bf16s *dk, bf16s *dv, float *ws, const bf16s *dout, const bf16s *out,
                          const float *lse, const bf16s *q, const bf16s *k, const bf16s *v, int B, int T, int H,
                          int KV, bool fold_dq);
/* attention_scalar.cu: the scalar kernels (fp32, and bf16 at other head dims) */
template <typename S>
void attention_scalar_forward(S *out, float *lse, const S *q, const S *k, const S *v, int B, int T, int H, int KV,
                              int hd);
template <typename S>
void attention_scalar_backward(S *dq, S *dk, S *dv, const S *dout, const S *out, const float *lse, const S *q,
                               const S *k, const S *v, int B, int T, int H, int KV, int hd);

#endif
