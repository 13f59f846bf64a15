/* kernels/cuda/ops_cuda.cu — `ops_cuda`: the CUDA backend of kernels/kernels.h, and its
 * element-wise, normalisation, RoPE, embedding, cross-entropy, AdamW and memory ops.
 *
 * What it is: fp32 kernels with the semantics of the CPU reference (kernels/cpu/ops_cpu.c) op for
 * op — backward accumulates, NULL gradients are skipped, rope and ce_backward assign — on device
 * memory, on the legacy default stream. Matmul lives in matmul.cu (cuBLAS), attention in
 * attention.cu. Reductions that feed a result the engine compares across meshes (sumsq) have a
 * fixed order, so they are deterministic; the weight-gradient reductions of rmsnorm and embedding
 * use float atomics (order may vary in the last bits between runs).
 * The kernels of the ops whose arguments have the compute precision are templates on the storage
 * type S (cuda_common.cuh): S = float is ops_cuda, S = bf16s is what ops_cuda_bf16.cu builds its
 * table from (load to float, compute in float, round once on store). cload/cstore are the identity
 * for float, so the fp32 instantiation computes exactly what the untemplated fp32 code did.
 * What it is not: the bf16 table (ops_cuda_bf16.cu), nor the tracking: dev_alloc takes memory from
 * the device's stream-ordered pool (cudaMallocAsync, never managed memory) and core/engine/mem tracks it.
 */
#include "kernels/cuda/cuda_common.cuh"

#include <string.h>

/* ---- [rows, columns] element-wise loops -------------------------------------------------------
 * Row-major [N, C] kernels walk rows with blockIdx.y and columns with the x-blocks' threads, both
 * grid-strided, so no element index is ever divided (a 64-bit division is a long software
 * sequence on the GPU); the flat index is n·C + c, a multiply. */
#define ROWS_COLS(n, c, N, C)                                                                      \
    for (int n = (int)blockIdx.y; n < (N); n += (int)gridDim.y)                                    \
        for (int c = (int)(blockIdx.x * blockDim.x + threadIdx.x); c < (C); c += (int)(gridDim.x * blockDim.x))
static dim3 grid_rows_cols(int N, int C) {
    const unsigned ycap = GRID_CAP < 65535u ? GRID_CAP : 65535u;
    return dim3(grid_for((size_t)C, 256), (unsigned)N < ycap ? (unsigned)N : ycap);
}

/* ---- embedding --------------------------------------------------------------------------- */

template <typename S>
static __global__ void embedding_forward_kernel(S *out, const int32_t *tok, const S *table, int N, int C,
                                                int v_start, int v_count) {
    ROWS_COLS(n, c, N, C) {
        const int64_t r = (int64_t)tok[n] - v_start;
        cstore(out, (size_t)n * C + c, (r >= 0 && r < v_count) ? cload(table, (size_t)r * C + c) : 0.0f);
    }
}

/* rows of repeated tokens collide: atomics */
template <typename S>
static __global__ void embedding_backward_kernel(float *dtable, const S *dout, const int32_t *tok, int N, int C,
                                                 int v_start, int v_count) {
    ROWS_COLS(n, c, N, C) {
        const int64_t r = (int64_t)tok[n] - v_start;
        if (r >= 0 && r < v_count) atomicAdd(&dtable[(size_t)r * C + c], cload(dout, (size_t)n * C + c));
    }
}

template <typename S>
void cuda_embedding_forward_t(S *out, const int32_t *tok, const S *table, int N, int C, int v_start, int v_count) {
    if (N <= 0 || C <= 0) return;
    LAUNCH(embedding_forward_kernel<S>, grid_rows_cols(N, C), 256, 0, out, tok, table, N, C, v_start, v_count);
}

template <typename S>
void cuda_embedding_backward_t(float *dtable, const S *dout, const int32_t *tok, int N, int C, int v_start,
                               int v_count) {
    if (!dtable || N <= 0 || C <= 0) return;
    LAUNCH(embedding_backward_kernel<S>, grid_rows_cols(N, C), 256, 0, dtable, dout, tok, N, C, v_start, v_count);
}

/* ---- RMSNorm: one block per row (grid-stride over rows) ------------------------------------- */

#define ROW_THREADS 256

template <typename S>
static __global__ void __launch_bounds__(ROW_THREADS)
rmsnorm_forward_kernel(S *out, float *rstd, const S *x, const S *w, int N, int C, float eps) {
    __shared__ float sh[32];
    for (int n = blockIdx.x; n < N; n += gridDim.x) { /* block-uniform */
        const S *xn = x + (size_t)n * C;
        S *on = out + (size_t)n * C;
        float ss = 0.0f;
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            const float xc = cload(xn, c);
            ss += xc * xc;
        }
        ss = block_sum(ss, sh);
        const float r = 1.0f / sqrtf(ss / (float)C + eps);
        if (threadIdx.x == 0) rstd[n] = r;
        for (int c = threadIdx.x; c < C; c += blockDim.x) cstore(on, c, cload(xn, c) * r * cload(w, c));
    }
}

/* dx += r·w·g − x·r³/C·Σ(w⊙g⊙x) (as the CPU reference) */
template <typename S>
static __global__ void __launch_bounds__(ROW_THREADS)
rmsnorm_backward_dx_kernel(S *dx, const S *dout, const S *x, const S *w, const float *rstd, int N, int C) {
    __shared__ float sh[32];
    for (int n = blockIdx.x; n < N; n += gridDim.x) {
        const S *xn = x + (size_t)n * C, *gn = dout + (size_t)n * C;
        S *dn = dx + (size_t)n * C;
        const float r = rstd[n];
        float s = 0.0f;
        for (int c = threadIdx.x; c < C; c += blockDim.x) s += cload(w, c) * cload(gn, c) * cload(xn, c);
        s = block_sum(s, sh);
        const float kk = s * r * r * r / (float)C;
        for (int c = threadIdx.x; c < C; c += blockDim.x)
            cstore(dn, c, cload(dn, c) + (r * cload(w, c) * cload(gn, c) - kk * cload(xn, c)));
    }
}

/* dw[c] += Σ_n g[n,c]·x[n,c]·r[n]: block (32 columns × 8 row lanes) over a strip of columns and a
 * stride of rows, reduced in shared memory, one atomic per column per block */
template <typename S>
static __global__ void rmsnorm_backward_dw_kernel(float *dw, const S *dout, const S *x, const float *rstd, int N,
                                                  int C) {
    __shared__ float sh[8][33];
    const int c = blockIdx.x * 32 + threadIdx.x;
    float acc = 0.0f;
    if (c < C)
        for (int n = blockIdx.y * 8 + threadIdx.y; n < N; n += gridDim.y * 8) {
            const size_t o = (size_t)n * C + c;
            acc += cload(dout, o) * cload(x, o) * rstd[n];
        }
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float s = 0.0f;
        for (int y = 0; y < 8; y++) s += sh[y][threadIdx.x];
        atomicAdd(&dw[c], s);
    }
}

template <typename S>
void cuda_rmsnorm_forward_t(S *out, float *rstd, const S *x, const S *w, int N, int C, float eps) {
    if (N <= 0 || C <= 0) return;
    LAUNCH(rmsnorm_forward_kernel<S>, grid_for((size_t)N, 1), ROW_THREADS, 0, out, rstd, x, w, N, C, eps);
}

template <typename S>
void cuda_rmsnorm_backward_t(S *dx, float *dw, const S *dout, const S *x, const S *w, const float *rstd, int N,
                             int C) {
    if (N <= 0 || C <= 0) return;
    if (dx) LAUNCH(rmsnorm_backward_dx_kernel<S>, grid_for((size_t)N, 1), ROW_THREADS, 0, dx, dout, x, w, rstd, N, C);
    if (dw) {
        unsigned gy = grid_for((size_t)N, 64); /* about 64 rows per block */
        if (gy > 256) gy = 256;
        const dim3 grid((unsigned)((C + 31) / 32), gy), block(32, 8);
        LAUNCH(rmsnorm_backward_dw_kernel<S>, grid, block, 0, dw, dout, x, rstd, N, C);
    }
}

/* ---- RoPE (HF rotate_half), positions 0..T-1 -----------------------------------------------
 * cos/sin come from the fp32 table built once per run (rope_table_fill, kernels/kernels.h). One block
 * per token row b·T + t: threadIdx.x walks the rotated pairs (x[i], x[i+hd/2]) of a head,
 * threadIdx.y the heads, so the only division is the block's t = row mod T (32-bit). sign −1 gives
 * the transpose rotation (backward). In place is safe: each thread reads both elements of its pair
 * before writing them. */
template <typename S>
static __global__ void rope_kernel(S *out, const S *x, const float *tab, int T, int nh, int hd, float sign) {
    const int half = hd / 2;
    const unsigned row = blockIdx.x; /* b·T + t */
    const float *cs = tab + (size_t)(row % (unsigned)T) * (size_t)(2 * half), *sn = cs + half;
    const size_t base = (size_t)row * (size_t)nh * (size_t)hd;
    for (int h = threadIdx.y; h < nh; h += blockDim.y)
        for (int i = threadIdx.x; i < half; i += blockDim.x) {
            const size_t off = base + (size_t)h * hd + i;
            const float c = cs[i], s = sign * sn[i];
            const float a1 = cload(x, off), a2 = cload(x, off + half);
            cstore(out, off, a1 * c - a2 * s);
            cstore(out, off + half, a2 * c + a1 * s);
        }
}

/* odd hd (never for Llama): the unpaired last element passes through, as on the CPU */
template <typename S> static __global__ void rope_odd_tail_kernel(S *out, const S *x, int hd, size_t nrows) {
    GRID_STRIDE(r, nrows) out[r * hd + hd - 1] = x[r * hd + hd - 1];
}

template <typename S>
static void rope_apply(S *out, const S *x, const float *tab, int B, int T, int nh, int hd, float sign) {
    if (B <= 0 || T <= 0 || nh <= 0 || hd <= 0) return;
    const size_t nrows = (size_t)B * T * nh;
    const dim3 block(32, 8);
    if (hd >= 2) LAUNCH(rope_kernel<S>, (unsigned)((size_t)B * T), block, 0, out, x, tab, T, nh, hd, sign);
    if ((hd % 2) && out != x) LAUNCH(rope_odd_tail_kernel<S>, grid_for(nrows, 256), 256, 0, out, x, hd, nrows);
}

template <typename S>
void cuda_rope_forward_t(S *out, const S *x, const float *tab, int B, int T, int nh, int hd) {
    rope_apply(out, x, tab, B, T, nh, hd, 1.0f);
}

template <typename S>
void cuda_rope_backward_t(S *din, const S *dout, const float *tab, int B, int T, int nh, int hd) {
    rope_apply(din, dout, tab, B, T, nh, hd, -1.0f);
}

/* ---- SwiGLU ----------------------------------------------------------------------------------- */

static __device__ __forceinline__ float swiglu1(float g, float u) { return g / (1.0f + expf(-g)) * u; }
/* the gradients' increments: silu'(g) = σ(g)·(1 + g·(1 − σ(g))) */
static __device__ __forceinline__ void swiglu_grad1(float d, float g, float u, float *dg, float *du) {
    const float sg = 1.0f / (1.0f + expf(-g));
    *dg = d * u * sg * (1.0f + g * (1.0f - sg));
    *du = d * g * sg;
}

/* vec: every pointer 16-byte aligned: 8 elements a thread (ld8/st8), the n % 8 tail one by one */
template <typename S>
static __global__ void swiglu_forward_kernel(S *out, const S *gate, const S *up, size_t n, int vec) {
    const size_t n8 = vec ? n / 8 : 0;
    GRID_STRIDE(c, n8) {
        float g[8], u[8];
        ld8(g, gate + 8 * c);
        ld8(u, up + 8 * c);
#pragma unroll
        for (int k = 0; k < 8; k++) g[k] = swiglu1(g[k], u[k]);
        st8(out + 8 * c, g);
    }
    GRID_STRIDE(j, n - 8 * n8) {
        const size_t i = 8 * n8 + j;
        cstore(out, i, swiglu1(cload(gate, i), cload(up, i)));
    }
}

template <typename S>
static __global__ void swiglu_backward_kernel(S *dgate, S *dup, const S *dout, const S *gate, const S *up, size_t n,
                                              int vec) {
    const size_t n8 = vec ? n / 8 : 0;
    GRID_STRIDE(c, n8) {
        float d[8], g[8], u[8], a[8], b[8];
        ld8(d, dout + 8 * c);
        ld8(g, gate + 8 * c);
        ld8(u, up + 8 * c);
        if (dgate) ld8(a, dgate + 8 * c);
        if (dup) ld8(b, dup + 8 * c);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            float dg, du;
            swiglu_grad1(d[k], g[k], u[k], &dg, &du);
            a[k] = dgate ? a[k] + dg : 0.0f;
            b[k] = dup ? b[k] + du : 0.0f;
        }
        if (dgate) st8(dgate + 8 * c, a);
        if (dup) st8(dup + 8 * c, b);
    }
    GRID_STRIDE(j, n - 8 * n8) {
        const size_t i = 8 * n8 + j;
        float dg, du;
        swiglu_grad1(cload(dout, i), cload(gate, i), cload(up, i), &dg, &du);
        if (dgate) cstore(dgate, i, cload(dgate, i) + dg);
        if (dup) cstore(dup, i, cload(dup, i) + du);
    }
}

template <typename S> void cuda_swiglu_forward_t(S *out, const S *gate, const S *up, size_t n) {
    if (n == 0) return;
    const int vec = al16(out) && al16(gate) && al16(up);
    LAUNCH(swiglu_forward_kernel<S>, grid_for(vec ? (n + 7) / 8 : n, 256), 256, 0, out, gate, up, n, vec);
}

template <typename S>
void cuda_swiglu_backward_t(S *dgate, S *dup, const S *dout, const S *gate, const S *up, size_t n) {
    if (n == 0 || (!dgate && !dup)) return;
    const int vec = al16(dgate) && al16(dup) && al16(dout) && al16(gate) && al16(up);
    LAUNCH(swiglu_backward_kernel<S>, grid_for(vec ? (n + 7) / 8 : n, 256), 256, 0, dgate, dup, dout, gate, up, n,
           vec);
}

/* ---- vocab-parallel cross-entropy pieces -------------------------------------------------------
 * nv = min(v_valid, Vloc) real columns; the rest is padding and never enters a max or a sum. */

template <typename S>
static __global__ void __launch_bounds__(ROW_THREADS)
ce_rowmax_kernel(float *mx, const S *logits, int N, int Vloc, int nv) {
    __shared__ float sh[32];
    for (int n = blockIdx.x; n < N; n += gridDim.x) {
        const S *l = logits + (size_t)n * Vloc;
        float m = -INFINITY; /* a rank owning only padding reports -inf, as the CPU */
        for (int j = threadIdx.x; j < nv; j += blockDim.x) m = fmaxf(m, cload(l, j));
        m = block_max(m, sh);
        if (threadIdx.x == 0) mx[n] = m;
    }
}

template <typename S>
static __global__ void __launch_bounds__(ROW_THREADS)
ce_sumexp_kernel(float *se, const S *logits, const float *mx, int N, int Vloc, int nv) {
    __shared__ float sh[32];
    for (int n = blockIdx.x; n < N; n += gridDim.x) {
        const S *l = logits + (size_t)n * Vloc;
        const float m = mx[n];
        float s = 0.0f;
        for (int j = threadIdx.x; j < nv; j += blockDim.x) s += expf(cload(l, j) - m);
        s = block_sum(s, sh);
        if (threadIdx.x == 0) se[n] = s;
    }
}

template <typename S>
static __global__ void ce_target_kernel(float *tl, const S *logits, const int32_t *tgt, int N, int Vloc,
                                        int v_start) {
    GRID_STRIDE(n, (size_t)N) {
        const int64_t j = (int64_t)tgt[n] - v_start;
        tl[n] = (j >= 0 && j < Vloc) ? cload(logits, n * (size_t)Vloc + (size_t)j) : 0.0f;
    }
}

static __global__ void ce_loss_kernel(float *loss, const float *mx, const float *se, const float *tl, int N) {
    GRID_STRIDE(n, (size_t)N) loss[n] = logf(se[n]) + mx[n] - tl[n];
}

/* no __restrict__: dlogits may alias logits; each element is read then written by one thread
 * (for bf16 too: an element is 2 whole bytes, never shared with a neighbour's store) */
template <typename Dt, typename S>
static __global__ void ce_backward_kernel(Dt *dlogits, const S *logits, const float *mx, const float *se,
                                          const int32_t *tgt, float scale, int N, int Vloc, int v_start, int nv) {
    ROWS_COLS(n, j, N, Vloc) {
        const size_t i = (size_t)n * Vloc + j;
        float d = 0.0f;
        if (j < nv) {
            d = (scale / se[n]) * expf(cload(logits, i) - mx[n]);
            if ((int64_t)tgt[n] - v_start == (int64_t)j) d -= scale;
        }
        cstore(dlogits, i, d);
    }
}

static int valid_cols(int Vloc, int v_valid) {
    const int nv = v_valid < Vloc ? v_valid : Vloc;
    return nv < 0 ? 0 : nv;
}

template <typename S> void cuda_ce_rowmax_t(float *mx, const S *logits, int N, int Vloc, int v_valid) {
    if (N <= 0) return;
    LAUNCH(ce_rowmax_kernel<S>, grid_for((size_t)N, 1), ROW_THREADS, 0, mx, logits, N, Vloc, valid_cols(Vloc, v_valid));
}

template <typename S>
void cuda_ce_sumexp_t(float *se, const S *logits, const float *mx, int N, int Vloc, int v_valid) {
    if (N <= 0) return;
    LAUNCH(ce_sumexp_kernel<S>, grid_for((size_t)N, 1), ROW_THREADS, 0, se, logits, mx, N, Vloc,
           valid_cols(Vloc, v_valid));
}

template <typename S>
void cuda_ce_target_t(float *tl, const S *logits, const int32_t *tgt, int N, int Vloc, int v_start) {
    if (N <= 0) return;
    LAUNCH(ce_target_kernel<S>, grid_for((size_t)N, 256), 256, 0, tl, logits, tgt, N, Vloc, v_start);
}

static void cu_ce_loss(float *loss, const float *mx, const float *se, const float *tl, int N) {
    if (N <= 0) return;
    LAUNCH(ce_loss_kernel, grid_for((size_t)N, 256), 256, 0, loss, mx, se, tl, N);
}

template <typename Dt, typename S>
void cuda_ce_backward_t(Dt *dlogits, const S *logits, const float *mx, const float *se, const int32_t *tgt,
                        float scale, int N, int Vloc, int v_start, int v_valid) {
    if (N <= 0 || Vloc <= 0) return;
    LAUNCH((ce_backward_kernel<Dt, S>), grid_rows_cols(N, Vloc), 256, 0, dlogits, logits, mx, se, tgt, scale, N, Vloc,
           v_start, valid_cols(Vloc, v_valid));
}

/* ---- AdamW (PyTorch order, as the CPU reference) and small helpers ---------------------------- */

static __global__ void adamw_kernel(float *p, const float *g, float *m, float *v, size_t n, float beta1, float beta2,
                                    float a1, float a2, float eps, float decay, float step, float bc2s) {
    GRID_STRIDE(i, n) {
        const float gi = g[i];
        const float mi = beta1 * m[i] + a1 * gi;
        const float vi = beta2 * v[i] + a2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - step * mi / (sqrtf(vi) / bc2s + eps);
    }
}

static void cu_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                     float eps, float wd, float bc1, float bc2) {
    if (n == 0) return;
    /* the same float scalars the CPU reference derives */
    const float decay = 1.0f - lr * wd, step = lr / bc1, bc2s = sqrtf(bc2);
    const float a1 = 1.0f - beta1, a2 = 1.0f - beta2;
    LAUNCH(adamw_kernel, grid_for(n, 256), 256, 0, p, g, m, v, n, beta1, beta2, a1, a2, eps, decay, step, bc2s);
}

/* AdamW of one element on the gradient g (already scaled); k: the constants of cu_adamw */
struct adamw_k {
    float beta1, beta2, a1, a2, eps, decay, step, bc2s;
};
static __device__ __forceinline__ void adamw1(float &p, float &m, float &v, float g, const adamw_k &k) {
    m = k.beta1 * m + k.a1 * g;
    v = k.beta2 * v + k.a2 * g * g;
    p = p * k.decay - k.step * m / (sqrtf(v) / k.bc2s + k.eps);
}
/* the engine's step: AdamW on g·gscale, the new p also into pc (compute precision C) when pc is
 * set, g left scaled, or zeroed when zero_g; one pass, 8 elements a thread when vec */
template <typename C>
static __global__ void adamw_fused_kernel(float *p, C *pc, float *g, float *m, float *v, size_t n, float gscale,
                                          int zero_g, adamw_k k, int vec) {
    const size_t n8 = vec ? n / 8 : 0;
    GRID_STRIDE(c, n8) {
        const size_t i = 8 * c;
        float pp[8], gg[8], mm[8], vv[8];
        ld8(pp, p + i);
        ld8(gg, g + i);
        ld8(mm, m + i);
        ld8(vv, v + i);
#pragma unroll
        for (int u = 0; u < 8; u++) adamw1(pp[u], mm[u], vv[u], gg[u] * gscale, k);
        st8(p + i, pp);
        st8(m + i, mm);
        st8(v + i, vv);
        if (pc) st8(pc + i, pp);
        if (zero_g || gscale != 1.0f) { /* g ends scaled (as scale_inplace leaves it) or zero */
#pragma unroll
            for (int u = 0; u < 8; u++) gg[u] = zero_g ? 0.0f : gg[u] * gscale;
            st8(g + i, gg);
        }
    }
    GRID_STRIDE(j, n - 8 * n8) {
        const size_t i = 8 * n8 + j;
        float pi = p[i], mi = m[i], vi = v[i];
        const float gi = g[i] * gscale;
        adamw1(pi, mi, vi, gi, k);
        p[i] = pi;
        m[i] = mi;
        v[i] = vi;
        if (pc) cstore(pc, i, pi);
        if (zero_g || gscale != 1.0f) g[i] = zero_g ? 0.0f : gi;
    }
}
template <typename C>
void cuda_adamw_fused_t(float *p, C *pc, float *g, float *m, float *v, size_t n, float gscale, int zero_g, float lr,
                        float beta1, float beta2, float eps, float wd, float bc1, float bc2) {
    if (n == 0) return;
    /* the same float scalars as cu_adamw and the CPU reference */
    const adamw_k k = {beta1, beta2, 1.0f - beta1, 1.0f - beta2, eps, 1.0f - lr * wd, lr / bc1, sqrtf(bc2)};
    const int vec = al16(p) && al16(pc) && al16(g) && al16(m) && al16(v);
    LAUNCH(adamw_fused_kernel<C>, grid_for(vec ? (n + 7) / 8 : n, 256), 256, 0, p, pc, g, m, v, n, gscale, zero_g, k,
           vec);
}
static void cu_adamw_fused(float *p, void *pc, float *g, float *m, float *v, size_t n, float gscale, int zero_g,
                           float lr, float beta1, float beta2, float eps, float wd, float bc1, float bc2) {
    cuda_adamw_fused_t<float>(p, static_cast<float *>(pc), g, m, v, n, gscale, zero_g, lr, beta1, beta2, eps, wd,
                              bc1, bc2);
}

template <typename S> static __global__ void add_kernel(S *y, const S *x, size_t n, int vec) {
    const size_t n8 = vec ? n / 8 : 0;
    GRID_STRIDE(c, n8) {
        float a[8], b[8];
        ld8(a, y + 8 * c);
        ld8(b, x + 8 * c);
#pragma unroll
        for (int u = 0; u < 8; u++) a[u] += b[u];
        st8(y + 8 * c, a);
    }
    GRID_STRIDE(j, n - 8 * n8) {
        const size_t i = 8 * n8 + j;
        cstore(y, i, cload(y, i) + cload(x, i));
    }
}
static __global__ void scale_kernel(float *y, float s, size_t n) { GRID_STRIDE(i, n) y[i] *= s; }

template <typename S> void cuda_add_inplace_t(S *y, const S *x, size_t n) {
    if (n == 0) return;
    const int vec = al16(y) && al16(x);
    LAUNCH(add_kernel<S>, grid_for(vec ? (n + 7) / 8 : n, 256), 256, 0, y, x, n, vec);
}
static void cu_scale_inplace(float *y, float s, size_t n) {
    if (n) LAUNCH(scale_kernel, grid_for(n, 256), 256, 0, y, s, n);
}

/* sumsq in double, in a fixed order (deterministic): SUMSQ_BLOCKS partial sums, then one block adds
 * them. The partials live in static device memory: no allocation, nothing for core/engine/mem to track. */
#define SUMSQ_BLOCKS 1024
static __device__ double sumsq_partial[SUMSQ_BLOCKS];
static __device__ double sumsq_result;

static __global__ void __launch_bounds__(256) sumsq_partial_kernel(const float *x, size_t n) {
    __shared__ double sh[32];
    double acc = 0.0;
    GRID_STRIDE(i, n) {
        const double xi = (double)x[i];
        acc += xi * xi;
    }
    acc = block_sum(acc, sh);
    if (threadIdx.x == 0) sumsq_partial[blockIdx.x] = acc;
}

/* add: the segment's sum is added to the result of the segments before it (in stream order) */
static __global__ void __launch_bounds__(SUMSQ_BLOCKS) sumsq_final_kernel(unsigned nblocks, int add) {
    __shared__ double sh[32];
    double v = threadIdx.x < nblocks ? sumsq_partial[threadIdx.x] : 0.0;
    v = block_sum(v, sh);
    if (threadIdx.x == 0) sumsq_result = add ? sumsq_result + v : v;
}

/* every segment on the stream, one copy of the result (the one wait) */
static double cu_sumsq(const float *const *x, const size_t *n, int count) {
    int started = 0;
    for (int k = 0; k < count; k++) {
        if (n[k] == 0) continue;
        unsigned nb = grid_for(n[k], 256);
        if (nb > SUMSQ_BLOCKS) nb = SUMSQ_BLOCKS;
        LAUNCH(sumsq_partial_kernel, nb, 256, 0, x[k], n[k]);
        LAUNCH(sumsq_final_kernel, 1, SUMSQ_BLOCKS, 0, nb, started);
        started = 1;
    }
    if (!started) return 0.0;
    double r = 0.0;
    cudaCheck(cudaMemcpyFromSymbol(&r, sumsq_result, sizeof(double), 0, cudaMemcpyDeviceToHost));
    return r;
}

/* ---- memory ----------------------------------------------------------------------------------- */

static void cu_zero(void *dst, size_t bytes) {
    if (bytes) cudaCheck(cudaMemset(dst, 0, bytes));
}

/* cudaMemcpy does not promise anything for overlapping ranges; the CPU backend's copy is a
 * memmove, so overlapping copies go in chunks no longer than the distance between the ranges,
 * in the direction that never overwrites bytes still to be read. */
static void cu_copy(void *dst, const void *src, size_t bytes) {
    if (!bytes || dst == src) return;
    char *d = (char *)dst;
    const char *s = (const char *)src;
    const size_t gap = d > s ? (size_t)(d - s) : (size_t)(s - d);
    if (gap >= bytes) {
        cudaCheck(cudaMemcpy(d, s, bytes, cudaMemcpyDeviceToDevice));
        return;
    }
    if (d < s) {
        for (size_t off = 0; off < bytes; off += gap) {
            const size_t len = bytes - off < gap ? bytes - off : gap;
            cudaCheck(cudaMemcpy(d + off, s + off, len, cudaMemcpyDeviceToDevice));
        }
    } else {
        for (size_t end = bytes; end > 0;) {
            const size_t len = end < gap ? end : gap;
            end -= len;
            cudaCheck(cudaMemcpy(d + end, s + end, len, cudaMemcpyDeviceToDevice));
        }
    }
}

static void cu_to_host(void *host_dst, const void *src, size_t bytes) {
    if (bytes) cudaCheck(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost));
}

static void cu_from_host(void *dst, const void *host_src, size_t bytes) {
    if (bytes) cudaCheck(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice));
}

/* ---- device memory: a stream-ordered pool ----------------------------------------------------
 * Every engine buffer comes from the device's default memory pool through cudaMallocAsync and goes
 * back through cudaFreeAsync, both on the legacy stream, where all the engine's kernels run: a
 * freed block is reused by the next allocation in stream order, so a step makes no cudaMalloc,
 * cudaFree or device synchronisation once the pool holds its peak (the release threshold keeps
 * the memory in the pool across synchronisations). Memory the NCCL stream uses is ordered by the
 * events of core/engine/comm_nccl.c: the legacy stream has waited for every collective before it frees,
 * except the input of a started reduce-scatter, which is freed in the NCCL stream's order (cuda_free_after).
 * MESHSWEEP_CUDA_POOL=0 uses cudaMalloc/cudaFree instead (for comparisons), as does a device
 * without memory pools. core/engine/mem still tracks what the engine asked for; the pool's reserved
 * bytes are reported by cuda_pool_reserved(). */
static cudaMemPool_t g_pool;
static int g_pool_state; /* 0 not decided, 1 pool, -1 cudaMalloc */

static int use_pool(void) {
    if (g_pool_state) return g_pool_state > 0;
    g_pool_state = -1;
    const char *e = getenv("MESHSWEEP_CUDA_POOL");
    int dev = 0, supported = 0;
    if (e && e[0] == '0') return 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, dev) != cudaSuccess || !supported ||
        cudaDeviceGetDefaultMemPool(&g_pool, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    uint64_t keep = UINT64_MAX; /* never give memory back at a synchronisation */
    cudaCheck(cudaMemPoolSetAttribute(g_pool, cudaMemPoolAttrReleaseThreshold, &keep));
    g_pool_state = 1;
    return 1;
}

/* NULL means out of memory (core/engine/mem turns it into the budget/oom path), never an abort; a zero-byte
 * request still gets a unique pointer, as on the CPU */
static void *cu_dev_alloc(size_t bytes) {
    void *p = NULL;
    if (!bytes) bytes = 256;
    if (use_pool()) {
        if (cudaMallocAsync(&p, bytes, 0) == cudaSuccess) return p;
        /* free blocks of other sizes may be what is missing: give them back and try once more
           (a synchronisation, on the way to an out-of-memory only) */
        (void)cudaGetLastError();
        cudaCheck(cudaStreamSynchronize(0));
        cudaCheck(cudaMemPoolTrimTo(g_pool, 0));
        if (cudaMallocAsync(&p, bytes, 0) == cudaSuccess) return p;
    } else if (cudaMalloc(&p, bytes) == cudaSuccess) {
        return p;
    }
    (void)cudaGetLastError(); /* clear it: an allocation failure must not poison later checks */
    return NULL;
}

/* buffers to free in another stream's order (cuda_free_after): at most one is pending in the engine (the
 * reduce-scatter's input between its start and its free); a full table waits for the stream instead */
#define FREE_AFTER_MAX 8
static struct { const void *p; cudaStream_t s; } g_free_after[FREE_AFTER_MAX];
static int g_nfree_after;
extern "C" void cuda_free_after(const void *p, void *stream) {
    if (g_nfree_after == FREE_AFTER_MAX) { cudaCheck(cudaStreamSynchronize((cudaStream_t)stream)); return; }
    g_free_after[g_nfree_after].p = p;
    g_free_after[g_nfree_after++].s = (cudaStream_t)stream;
}

/* cudaFree waits for the whole device: no stream order to keep there */
static void cu_dev_free(void *p) {
    if (!p) return;
    cudaStream_t s = 0;
    for (int i = 0; i < g_nfree_after; i++)
        if (g_free_after[i].p == p) { s = g_free_after[i].s; g_free_after[i] = g_free_after[--g_nfree_after]; break; }
    if (g_pool_state > 0) cudaCheck(cudaFreeAsync(p, s));
    else cudaCheck(cudaFree(p));
}

extern "C" void cuda_pool_reserved(uint64_t *now_b, uint64_t *high_b) {
    uint64_t now = 0, high = 0;
    if (g_pool_state > 0 && (cudaMemPoolGetAttribute(g_pool, cudaMemPoolAttrReservedMemCurrent, &now) != cudaSuccess ||
                             cudaMemPoolGetAttribute(g_pool, cudaMemPoolAttrReservedMemHigh, &high) != cudaSuccess)) {
        (void)cudaGetLastError();
        now = high = 0;
    }
    if (now_b) *now_b = now;
    if (high_b) *high_b = high;
}

/* the legacy stream, not the device: every engine kernel runs on it, and it has waited for every
 * collective of the NCCL stream (core/engine/comm_nccl.c) */
static void cu_synchronize(void) { cudaCheck(cudaStreamSynchronize(0)); }
static void cu_to_compute(void *dst, const float *src, size_t n) {
    if (n && dst != src) cudaCheck(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice));
}

/* ---- the table ---------------------------------------------------------------------------------
 * Built by assignment (C++17 has no designated initialisers) from the one list of ops (OPS_LIST,
 * kernels/kernels.h): op X is cu_X, defined above or named here, so an op added to the list fails
 * the build here until it is set. */
static void cu_matmul_forward_f32out(float *out, const float *in, const float *w, int N, int Cin, int Cout) {
    cuda_matmul_forward(out, in, w, N, Cin, Cout, 0);
}
#define cu_matmul_forward cuda_matmul_forward
#define cu_matmul_backward cuda_matmul_backward
#define cu_embedding_forward cuda_embedding_forward_t<float>
#define cu_embedding_backward cuda_embedding_backward_t<float>
#define cu_rmsnorm_forward cuda_rmsnorm_forward_t<float>
#define cu_rmsnorm_backward cuda_rmsnorm_backward_t<float>
#define cu_rope_forward cuda_rope_forward_t<float>
#define cu_rope_backward cuda_rope_backward_t<float>
#define cu_attention_forward cuda_attention_forward
#define cu_attention_backward cuda_attention_backward
#define cu_swiglu_forward cuda_swiglu_forward_t<float>
#define cu_swiglu_backward cuda_swiglu_backward_t<float>
#define cu_ce_rowmax cuda_ce_rowmax_t<float>
#define cu_ce_sumexp cuda_ce_sumexp_t<float>
#define cu_ce_target cuda_ce_target_t<float>
#define cu_ce_backward cuda_ce_backward_t<float, float>
#define cu_add_inplace cuda_add_inplace_t<float>

static ops_t make_ops_cuda(void) {
    ops_t o;
    memset(&o, 0, sizeof o);
    o.name = "cuda";
    o.cbytes = 4;
#define CU_SET_(ret, name, params, args, prec) o.name = cu_##name;
#define CU_DEVICE_SET_(ret, name, params) o.name = cu_##name;
    OPS_LIST(CU_SET_)
    OPS_DEVICE(CU_DEVICE_SET_)
#undef CU_SET_
#undef CU_DEVICE_SET_
    return o;
}

extern "C" const ops_t ops_cuda = make_ops_cuda();

ops_t cuda_ops_fp32_table(void) { return make_ops_cuda(); }

/* the bf16 instantiations ops_cuda_bf16.cu builds on (the fp32 ones are made by the table above) */
template void cuda_embedding_forward_t<bf16s>(bf16s *, const int32_t *, const bf16s *, int, int, int, int);
template void cuda_embedding_backward_t<bf16s>(float *, const bf16s *, const int32_t *, int, int, int, int);
template void cuda_rmsnorm_forward_t<bf16s>(bf16s *, float *, const bf16s *, const bf16s *, int, int, float);
template void cuda_rmsnorm_backward_t<bf16s>(bf16s *, float *, const bf16s *, const bf16s *, const bf16s *,
                                             const float *, int, int);
template void cuda_rope_forward_t<bf16s>(bf16s *, const bf16s *, const float *, int, int, int, int);
template void cuda_rope_backward_t<bf16s>(bf16s *, const bf16s *, const float *, int, int, int, int);
template void cuda_swiglu_forward_t<bf16s>(bf16s *, const bf16s *, const bf16s *, size_t);
template void cuda_swiglu_backward_t<bf16s>(bf16s *, bf16s *, const bf16s *, const bf16s *, const bf16s *, size_t);
template void cuda_ce_backward_t<bf16s, float>(bf16s *, const float *, const float *, const float *, const int32_t *, float,
                                        int, int, int, int);
template void cuda_add_inplace_t<bf16s>(bf16s *, const bf16s *, size_t);
template void cuda_adamw_fused_t<bf16s>(float *, bf16s *, float *, float *, float *, size_t, float, int, float, float,
                                        float, float, float, float, float);
