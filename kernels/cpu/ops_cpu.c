/* kernels/cpu/ops_cpu.c — the fp32 CPU backend of kernels/kernels.h (`ops_cpu`).
 *
 * What it is: every op of ops_t on host memory, single-threaded per rank (one MPI rank per core),
 * GEMM-shaped work through OpenBLAS cblas_sgemm, the rest as plain loops written so that gcc can
 * vectorise them. Attention is flash-style in what it keeps (only lse[B,H,T]), computed per
 * (batch, head) and per block of query rows so that the masked upper triangle is never multiplied.
 * What it is not: parallel (no threads, no collectives — one BLAS thread per rank, see
 * cpu_blas_init), nor an allocator policy beyond keeping freed memory in the process (dev_alloc is
 * aligned malloc with glibc told not to trim, see cpu_malloc_tune; core/engine/mem does the tracking).
 * The exact semantics of each op are documented in kernels/kernels.h; tests/test_kernels.c checks
 * every op against naive double-precision references and every backward by finite differences.
 */
#include "kernels/device.h"
#include "kernels/kernels.h"

#include <cblas.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The element-wise loops below (exp, silu, AdamW, RoPE) only vectorise when gcc may if-convert
 * comparisons, which it refuses under the default -ftrapping-math; we never inspect FP exception
 * flags, so turning that off here changes no result. Likewise sqrtf only becomes vsqrtps when it
 * need not set errno (AdamW stayed scalar, with a libm call per element, until no-math-errno):
 * IEEE sqrt is exact either way, and nothing reads errno. -O2 alone uses gcc 12's "very cheap"
 * vectoriser, which skips any loop needing an epilogue. */
#pragma GCC optimize("tree-vectorize", "no-trapping-math", "no-math-errno")

/* ------------------------------------------------------------------------------------------ */
/* helpers                                                                                    */

/* exp(x) for float, branch-free so it vectorises (libm's expf does not without -ffast-math):
 * Cephes' expf polynomial on x - n·ln2 with n = round(x/ln2), then scaled by 2^n through the
 * exponent bits. Relative error about 2e-7 (two ulp) over the clamped range; inputs below -87.3
 * give ~1e-38 rather than a denormal or 0, which no softmax here can tell apart; ±inf and NaN
 * give NaN (only a diverged run produces them, and it is caught by its non-finite loss). */
static inline float fexp(float x) {
    /* clamp written as x + max(lo − x, 0) rather than x < lo ? lo : x: with the latter gcc folds
       the whole function to a constant on the clamped arm and then evaluates the caller's
       arithmetic on that constant in every vector lane, producing denormals (6x slower silu) */
    float lo = -87.3f - x, hi = x - 88.3f;
    x += lo > 0.0f ? lo : 0.0f;
    x -= hi > 0.0f ? hi : 0.0f;
    /* round to nearest integer: adding 1.5·2^23 pushes the fraction bits out */
    float t = x * 1.44269504088896341f + 12582912.0f, n = t - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* 2^n in two halves so that n = 128 (x near 88.3) does not overflow the exponent field */
    /* n as an integer from t's low mantissa bits (t = 1.5*2^23 + n), not by converting a float that
     * may be NaN (undefined behaviour); the shifts are unsigned, so a NaN's garbage exponent is defined
     * too (the result is NaN through p either way) */
    union { float f; int32_t i; } tb = {t};
    int32_t ni = tb.i - 0x4B400000;
    int32_t n1 = ni / 2, n2 = ni - n1;
    union { int32_t i; float f; } s1, s2;
    s1.i = (int32_t)((uint32_t)(n1 + 127) << 23);
    s2.i = (int32_t)((uint32_t)(n2 + 127) << 23);
    return p * s1.f * s2.f;
}

/* The loops around fexp are the main non-GEMM cost (softmax, silu, cross-entropy): they and the
 * other streaming loops (RMSNorm, residual add, grad scaling, sum of squares) get AVX-512 and AVX2
 * clones chosen at load time (ifunc), since the Makefile builds for baseline x86-64 (SSE2, 4 lanes). No FMA in any clone (-std=c11 keeps fp-contract off) and reductions
 * keep their written order, so every clone gives the same bits. */
#define SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

/* The softmax rows have every length 1..T, so a plain loop spent a quarter of its time in its
 * scalar epilogue. These helpers run blocks of EXP_W elements (a fixed trip count gcc vectorises
 * whole: one zmm, two ymm or four xmm) and pass the tail through the same block on a padded
 * copy, so every element gets the vector code and the same bits whatever its position. */
#define EXP_W 16

/* s[j] = exp(s[j] − shift), in place (the backward recompute of P from lse) */
SIMD_CLONES static void exp_shift_inplace(float *restrict s, int n, float shift) {
    int j = 0;
    for (; j + EXP_W <= n; j += EXP_W)
        for (int u = 0; u < EXP_W; u++) s[j + u] = fexp(s[j + u] - shift);
    if (j < n) {
        float t[EXP_W];
        for (int u = 0; u < EXP_W; u++) t[u] = j + u < n ? s[j + u] : shift;
        for (int u = 0; u < EXP_W; u++) t[u] = fexp(t[u] - shift);
        for (int u = 0; u < n - j; u++) s[j + u] = t[u];
    }
}

/* s[j] = exp(s[j] − shift) in place, returning their sum (EXP_W partial sums, combined pairwise);
 * the forward softmax in one pass instead of two */
SIMD_CLONES static float exp_shift_sum(float *restrict s, int n, float shift) {
    float acc[EXP_W] = {0};
    int j = 0;
    for (; j + EXP_W <= n; j += EXP_W)
        for (int u = 0; u < EXP_W; u++) {
            float e = fexp(s[j + u] - shift);
            s[j + u] = e;
            acc[u] += e;
        }
    if (j < n) {
        float t[EXP_W];
        for (int u = 0; u < EXP_W; u++) t[u] = j + u < n ? s[j + u] : shift;
        for (int u = 0; u < EXP_W; u++) t[u] = fexp(t[u] - shift);
        for (int u = 0; u < n - j; u++) { s[j + u] = t[u]; acc[u] += t[u]; }
    }
    for (int w = EXP_W / 2; w > 0; w /= 2)
        for (int u = 0; u < w; u++) acc[u] += acc[u + w];
    return acc[0];
}

/* D[i] = Σ_c a[i·ld + c]·b[i·ld + c] for i < m, c < n: the rowsum(dO ⊙ O) of a query block, eight
 * partial sums per row as dotf (one call per block, cloned, instead of a call per row) */
SIMD_CLONES static void rows_dot(float *restrict D, const float *restrict a, const float *restrict b, int m, int n,
                                 int ld) {
    for (int i = 0; i < m; i++) {
        const float *x = a + (size_t)i * ld, *y = b + (size_t)i * ld;
        float acc[8] = {0};
        int c = 0;
        for (; c + 8 <= n; c += 8)
            for (int u = 0; u < 8; u++) acc[u] += x[c + u] * y[c + u];
        float s = 0.0f;
        for (; c < n; c++) s += x[c] * y[c];
        D[i] = s + ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    }
}

/* ds[j] = p[j]·(ds[j] − D) for j < n: the softmax backward row (cloned: the attention loops around
 * it are not) */
SIMD_CLONES static void softmax_grad_row(float *restrict ds, const float *restrict p, float D, int n) {
    for (int j = 0; j < n; j++) ds[j] = p[j] * (ds[j] - D);
}

/* sum a[i]*b[i] with eight float partial sums: vectorisable without reassociation flags and
 * more accurate than one running float sum. Always inlined, so that the cloned RMSNorm gets it
 * at its own vector width rather than calling the baseline SSE copy once per row. */
static inline __attribute__((always_inline)) float dotf(const float *restrict a, const float *restrict b, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int u = 0; u < 8; u++) acc[u] += a[i + u] * b[i + u];
    float s = 0.0f;
    for (; i < n; i++) s += a[i] * b[i];
    return s + ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/* eight running maxima: one running max is a chain of dependent maxss (4 cycles each) that
 * made this loop the largest cost of attention_forward */
SIMD_CLONES static float maxf(const float *restrict a, int n) {
    float acc[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int u = 0; u < 8; u++) acc[u] = a[i + u] > acc[u] ? a[i + u] : acc[u];
    float m = -INFINITY;
    for (; i < n; i++) m = a[i] > m ? a[i] : m;
    for (int u = 0; u < 8; u++) m = acc[u] > m ? acc[u] : m;
    return m;
}

/* ------------------------------------------------------------------------------------------ */
/* matmul                                                                                     */

static void cpu_matmul_forward(float *out, const float *in, const float *w, int N, int Cin, int Cout,
                               int accumulate) {
    if (N <= 0 || Cout <= 0) return;
    if (Cin <= 0) { /* empty sum: BLAS rejects lda = 0 */
        if (!accumulate) memset(out, 0, (size_t)N * (size_t)Cout * sizeof(float));
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, Cout, Cin, 1.0f, in, Cin, w, Cin,
                accumulate ? 1.0f : 0.0f, out, Cout);
}

static void cpu_matmul_forward_f32out(float *out, const float *in, const float *w, int N, int Cin, int Cout) {
    cpu_matmul_forward(out, in, w, N, Cin, Cout, 0);
}

static void cpu_matmul_backward(float *din, float *dw, const float *dout, const float *in, const float *w,
                                int N, int Cin, int Cout) {
    if (N <= 0 || Cin <= 0 || Cout <= 0) return;
    if (din)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, Cin, Cout, 1.0f, dout, Cout, w, Cin,
                    1.0f, din, Cin);
    if (dw)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Cout, Cin, N, 1.0f, dout, Cout, in, Cin,
                    1.0f, dw, Cin);
}

/* ------------------------------------------------------------------------------------------ */
/* embedding (vocab-parallel: rows of the table this rank owns)                               */

static void cpu_embedding_forward(float *restrict out, const int32_t *restrict tok, const float *restrict table,
                                  int N, int C, int v_start, int v_count) {
    for (int n = 0; n < N; n++) {
        float *o = out + (size_t)n * C;
        int64_t r = (int64_t)tok[n] - v_start;
        if (r >= 0 && r < v_count) memcpy(o, table + (size_t)r * C, (size_t)C * sizeof(float));
        else memset(o, 0, (size_t)C * sizeof(float));
    }
}

static void cpu_embedding_backward(float *restrict dtable, const float *restrict dout, const int32_t *restrict tok,
                                   int N, int C, int v_start, int v_count) {
    if (!dtable) return;
    for (int n = 0; n < N; n++) {
        int64_t r = (int64_t)tok[n] - v_start;
        if (r < 0 || r >= v_count) continue;
        float *d = dtable + (size_t)r * C;
        const float *g = dout + (size_t)n * C;
        for (int c = 0; c < C; c++) d[c] += g[c];
    }
}

/* ------------------------------------------------------------------------------------------ */
/* RMSNorm                                                                                    */

SIMD_CLONES static void cpu_rmsnorm_forward(float *restrict out, float *restrict rstd, const float *restrict x,
                                const float *restrict w, int N, int C, float eps) {
    for (int n = 0; n < N; n++) {
        const float *xn = x + (size_t)n * C;
        float *on = out + (size_t)n * C;
        float r = 1.0f / sqrtf(dotf(xn, xn, C) / (float)C + eps);
        rstd[n] = r;
        for (int c = 0; c < C; c++) on[c] = xn[c] * r * w[c];
    }
}

/* y = x·r·w with r = (mean(x²)+eps)^-1/2:  dx = r·(w⊙g) − x·r³/C·Σ(w⊙g⊙x),  dw = Σ_n g⊙x·r */
SIMD_CLONES static void cpu_rmsnorm_backward(float *restrict dx, float *restrict dw, const float *restrict dout,
                                 const float *restrict x, const float *restrict w, const float *restrict rstd,
                                 int N, int C) {
    for (int n = 0; n < N; n++) {
        const float *xn = x + (size_t)n * C, *gn = dout + (size_t)n * C;
        float r = rstd[n];
        if (dw)
            for (int c = 0; c < C; c++) dw[c] += gn[c] * xn[c] * r;
        if (dx) {
            float *dn = dx + (size_t)n * C;
            float acc[8] = {0};
            int c = 0;
            for (; c + 8 <= C; c += 8)
                for (int u = 0; u < 8; u++) acc[u] += w[c + u] * gn[c + u] * xn[c + u];
            float s = 0.0f;
            for (; c < C; c++) s += w[c] * gn[c] * xn[c];
            s += ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
            float k = s * r * r * r / (float)C;
            for (c = 0; c < C; c++) dn[c] += r * w[c] * gn[c] - k * xn[c];
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* RoPE (HF rotate_half)                                                                      */

/* The table (rope_table_fill) holds cos and sin of every (position, frequency): computed once per run,
 * so the op itself is two multiply-adds per element, each table row reused over every batch row and
 * head. */
void rope_table_fill(float *tab, const double *inv_freq, int T, int hd) {
    int half = hd / 2;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            double a = (double)t * inv_freq[i];
            tab[(size_t)t * 2 * half + i] = (float)cos(a);
            tab[(size_t)t * 2 * half + half + i] = (float)sin(a);
        }
}

/* sign = +1: forward rotation R; sign = -1: its transpose (backward). out may equal x. */
static void rope_apply(float *out, const float *x, const float *tab, int B, int T, int nh, int hd, float sign) {
    int half = hd / 2;
    size_t row = (size_t)nh * hd;
    for (int t = 0; t < T; t++) {
        const float *cs = tab + (size_t)t * 2 * half, *s0 = cs + half;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < nh; h++) {
                size_t off = ((size_t)b * T + t) * row + (size_t)h * hd;
                const float *x1 = x + off, *x2 = x + off + half;
                float *o1 = out + off, *o2 = out + off + half;
                for (int i = 0; i < half; i++) {
                    float a1 = x1[i], a2 = x2[i], sn = sign * s0[i];
                    o1[i] = a1 * cs[i] - a2 * sn;
                    o2[i] = a2 * cs[i] + a1 * sn;
                }
            }
    }
    /* odd hd (never for Llama): the unpaired last element is passed through unrotated */
    if (hd % 2 && out != x)
        for (size_t n = 0; n < (size_t)B * T * nh; n++) out[n * hd + hd - 1] = x[n * hd + hd - 1];
}

static void cpu_rope_forward(float *out, const float *x, const float *tab, int B, int T, int nh, int hd) {
    rope_apply(out, x, tab, B, T, nh, hd, 1.0f);
}

static void cpu_rope_backward(float *din, const float *dout, const float *tab, int B, int T, int nh, int hd) {
    rope_apply(din, dout, tab, B, T, nh, hd, -1.0f);
}

/* ------------------------------------------------------------------------------------------ */
/* causal GQA attention                                                                       */

/* Query rows are processed in blocks of ATT_BLOCK: block [r0,r1) only needs key columns [0,r1),
 * so about half of the T×T score matrix (the masked triangle) is never computed. 64 measured best
 * (32 equal, 128 and 256 slower) on tiny/small shapes. H % KV == 0 is the caller's contract
 * (core/formats/config validates it). */
#define ATT_BLOCK 64

/* The score products Q·Kᵀ and dO·Vᵀ have the head dimension as their inner one (16 or 32 here).
 * OpenBLAS runs such M×N×hd products about 1.8x faster as NN than as NT (its small-matrix NT
 * kernel reaches ~90 GFLOP/s, NN ~170, single thread, hot caches), so K and V of each kv head are
 * transposed once into the workspace (hd×T, ld T: hd·T floats each, against T² of scores) and the
 * products taken as NN. Where the workspace has no room (hd > T forward; min(T, ATT_BLOCK) + hd > T
 * backward, i.e. short sequences) the NT products are used directly. */
static void transpose_head(float *restrict dst, const float *restrict src, int T, int hd, int ld) {
    for (int j = 0; j < T; j++)
        for (int d = 0; d < hd; d++) dst[(size_t)d * T + j] = src[(size_t)j * ld + d];
}

/* S[M, n] = alpha·A[M, hd]·Bᵀ, B given either transposed (Bt: hd×T, ld T) or as rows (B: n×hd, ld ldb) */
static void scores(float *S, float alpha, const float *A, int lda, const float *Bt, const float *B, int ldb,
                   int M, int n, int T, int hd) {
    if (Bt)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, n, hd, alpha, A, lda, Bt, T, 0.0f, S, T);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, n, hd, alpha, A, lda, B, ldb, 0.0f, S, T);
}

static void cpu_attention_forward(float *out, float *lse, float *ws, const float *q, const float *k,
                                  const float *v, int B, int T, int H, int KV, int hd) {
    if (B <= 0 || T <= 0 || H <= 0 || KV <= 0 || hd <= 0) return;
    const int ldq = H * hd, ldk = KV * hd, group = H / KV;
    const float scale = 1.0f / sqrtf((float)hd);
    float *S = ws;
    /* scores use rows [0, T) of the first T×T of ws; Kᵀ goes in the second when it fits */
    const int packed = hd <= T;
    float *Kt = ws + (size_t)T * T; /* used only when packed */
    float inv[ATT_BLOCK];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const int kh = h / group;
            const float *Q = q + (size_t)b * T * ldq + (size_t)h * hd;
            const float *K = k + (size_t)b * T * ldk + (size_t)kh * hd;
            const float *V = v + (size_t)b * T * ldk + (size_t)kh * hd;
            float *O = out + (size_t)b * T * ldq + (size_t)h * hd;
            float *L = lse + ((size_t)b * H + h) * T;
            if (packed && h % group == 0) transpose_head(Kt, K, T, hd, ldk); /* once per kv head */
            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
                const int r1 = r0 + ATT_BLOCK < T ? r0 + ATT_BLOCK : T, M = r1 - r0;
                float *Sb = S + (size_t)r0 * T;
                scores(Sb, scale, Q + (size_t)r0 * ldq, ldq, packed ? Kt : NULL, K, ldk, M, r1, T, hd);
                /* P is left unnormalised (exp(s − max)); each output row is divided by its sum
                   after P·V instead: hd multiplies per row rather than i+1 */
                for (int i = r0; i < r1; i++) {
                    float *s = S + (size_t)i * T;
                    const int n = i + 1;
                    const float mx = maxf(s, n);
                    const float sum = exp_shift_sum(s, n, mx);
                    if (n < r1) memset(s + n, 0, (size_t)(r1 - n) * sizeof(float));
                    inv[i - r0] = 1.0f / sum;
                    L[i] = mx + logf(sum);
                }
                float *Ob = O + (size_t)r0 * ldq;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, hd, r1, 1.0f, Sb, T, V, ldk, 0.0f, Ob, ldq);
                for (int i = 0; i < M; i++) {
                    float *o = Ob + (size_t)i * ldq;
                    const float c = inv[i];
                    for (int j = 0; j < hd; j++) o[j] *= c;
                }
            }
        }
}

/* With P = softmax(scale·QKᵀ) recomputed from lse:  dV += Pᵀ·dO,  dP = dO·Vᵀ,
 * dS = P ⊙ (dP − rowsum(dO ⊙ O)),  dQ += scale·dS·K,  dK += scale·dSᵀ·Q. */
static void cpu_attention_backward(float *dq, float *dk, float *dv, float *ws, const float *dout,
                                   const float *out, const float *lse, const float *q, const float *k,
                                   const float *v, int B, int T, int H, int KV, int hd) {
    if (B <= 0 || T <= 0 || H <= 0 || KV <= 0 || hd <= 0) return;
    if (!dq && !dk && !dv) return;
    const int ldq = H * hd, ldk = KV * hd, group = H / KV;
    const float scale = 1.0f / sqrtf((float)hd);
    /* one block of P and one of dS at a time (rows of the current query block, ld T), then Kᵀ and
       Vᵀ when they fit: 2·Mb·T + 2·hd·T <= 2·T² */
    const int Mb = T < ATT_BLOCK ? T : ATT_BLOCK;
    float *Pb = ws, *dSb = ws + (size_t)Mb * T;
    const int packed = Mb + hd <= T;
    /* Kt is at most one past the end of ws; Vt is formed only when it lies inside */
    float *Kt = ws + (size_t)2 * Mb * T, *Vt = packed ? Kt + (size_t)hd * T : Kt; /* used only when packed */
    float Dr[ATT_BLOCK];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const int kh = h / group;
            const size_t qo = (size_t)b * T * ldq + (size_t)h * hd, ko = (size_t)b * T * ldk + (size_t)kh * hd;
            const float *Q = q + qo, *K = k + ko, *V = v + ko, *O = out + qo, *dO = dout + qo;
            const float *L = lse + ((size_t)b * H + h) * T;
            if (packed && h % group == 0) { /* once per kv head */
                transpose_head(Kt, K, T, hd, ldk);
                if (dq || dk) transpose_head(Vt, V, T, hd, ldk);
            }
            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
                const int r1 = r0 + ATT_BLOCK < T ? r0 + ATT_BLOCK : T, M = r1 - r0;
                scores(Pb, scale, Q + (size_t)r0 * ldq, ldq, packed ? Kt : NULL, K, ldk, M, r1, T, hd);
                for (int i = r0; i < r1; i++) {
                    float *p = Pb + (size_t)(i - r0) * T;
                    const float li = L[i];
                    exp_shift_inplace(p, i + 1, li);
                    if (i + 1 < r1) memset(p + i + 1, 0, (size_t)(r1 - i - 1) * sizeof(float));
                }
                if (dv)
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1, hd, M, 1.0f, Pb, T,
                                dO + (size_t)r0 * ldq, ldq, 1.0f, dv + ko, ldk);
                if (!dq && !dk) continue;
                scores(dSb, 1.0f, dO + (size_t)r0 * ldq, ldq, packed ? Vt : NULL, V, ldk, M, r1, T, hd);
                rows_dot(Dr, dO + (size_t)r0 * ldq, O + (size_t)r0 * ldq, M, hd, ldq);
                for (int i = r0; i < r1; i++) {
                    const float *p = Pb + (size_t)(i - r0) * T;
                    float *ds = dSb + (size_t)(i - r0) * T;
                    const float D = Dr[i - r0];
                    softmax_grad_row(ds, p, D, i + 1);
                    if (i + 1 < r1) memset(ds + i + 1, 0, (size_t)(r1 - i - 1) * sizeof(float));
                }
                if (dq)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, hd, r1, scale, dSb, T, K, ldk, 1.0f,
                                dq + qo + (size_t)r0 * ldq, ldq);
                if (dk)
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1, hd, M, scale, dSb, T,
                                Q + (size_t)r0 * ldq, ldq, 1.0f, dk + ko, ldk);
            }
        }
}

/* ------------------------------------------------------------------------------------------ */
/* SwiGLU                                                                                     */

SIMD_CLONES static void cpu_swiglu_forward(float *restrict out, const float *restrict gate, const float *restrict up, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + fexp(-g)) * up[i];
    }
}

/* silu'(g) = σ(g)·(1 + g·(1 − σ(g))) */
SIMD_CLONES static void cpu_swiglu_backward(float *restrict dgate, float *restrict dup, const float *restrict dout,
                                const float *restrict gate, const float *restrict up, size_t n) {
    if (dgate && dup)
        for (size_t i = 0; i < n; i++) {
            float g = gate[i], sg = 1.0f / (1.0f + fexp(-g));
            dgate[i] += dout[i] * up[i] * sg * (1.0f + g * (1.0f - sg));
            dup[i] += dout[i] * g * sg;
        }
    else if (dgate)
        for (size_t i = 0; i < n; i++) {
            float g = gate[i], sg = 1.0f / (1.0f + fexp(-g));
            dgate[i] += dout[i] * up[i] * sg * (1.0f + g * (1.0f - sg));
        }
    else if (dup)
        for (size_t i = 0; i < n; i++) {
            float g = gate[i], sg = 1.0f / (1.0f + fexp(-g));
            dup[i] += dout[i] * g * sg;
        }
}

/* ------------------------------------------------------------------------------------------ */
/* vocab-parallel cross-entropy pieces                                                        */

static void cpu_ce_rowmax(float *restrict mx, const float *restrict logits, int N, int Vloc, int v_valid) {
    int nv = v_valid < Vloc ? v_valid : Vloc;
    for (int n = 0; n < N; n++) mx[n] = nv > 0 ? maxf(logits + (size_t)n * Vloc, nv) : -INFINITY;
}

SIMD_CLONES static void cpu_ce_sumexp(float *restrict se, const float *restrict logits, const float *restrict mx, int N,
                          int Vloc, int v_valid) {
    int nv = v_valid < Vloc ? v_valid : Vloc;
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * Vloc, m = mx[n];
        float acc[8] = {0};
        int j = 0;
        for (; j + 8 <= nv; j += 8)
            for (int u = 0; u < 8; u++) acc[u] += fexp(l[j + u] - m);
        float s = 0.0f;
        for (; j < nv; j++) s += fexp(l[j] - m);
        se[n] = s + ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    }
}

static void cpu_ce_target(float *restrict tl, const float *restrict logits, const int32_t *restrict tgt, int N,
                          int Vloc, int v_start) {
    for (int n = 0; n < N; n++) {
        int64_t j = (int64_t)tgt[n] - v_start;
        tl[n] = (j >= 0 && j < Vloc) ? logits[(size_t)n * Vloc + j] : 0.0f;
    }
}

static void cpu_ce_loss(float *restrict loss, const float *restrict mx, const float *restrict se,
                        const float *restrict tl, int N) {
    for (int n = 0; n < N; n++) loss[n] = logf(se[n]) + mx[n] - tl[n];
}

/* no restrict on dlogits/logits: they may alias (the logits buffer becomes its own gradient) */
SIMD_CLONES static void cpu_ce_backward(float *dlogits, const float *logits, const float *mx, const float *se,
                            const int32_t *tgt, float scale, int N, int Vloc, int v_start, int v_valid) {
    int nv = v_valid < Vloc ? v_valid : Vloc;
    if (nv < 0) nv = 0;
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * Vloc;
        float *d = dlogits + (size_t)n * Vloc;
        const float m = mx[n], k = scale / se[n];
        for (int j = 0; j < nv; j++) d[j] = k * fexp(l[j] - m);
        for (int j = nv; j < Vloc; j++) d[j] = 0.0f;
        int64_t jt = (int64_t)tgt[n] - v_start;
        if (jt >= 0 && jt < nv) d[jt] -= scale;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* AdamW and small helpers                                                                    */

/* PyTorch's single-tensor AdamW order: decay p·(1 − lr·wd) first, moments, then
 * p −= (lr/bc1)·m / (sqrt(v)/sqrt(bc2) + eps).
 * gcc will not vectorise sqrtf without -fno-math-errno (which neither `#pragma GCC optimize` nor
 * the optimize attribute turns on), and scalar sqrt + two divisions per element made this the
 * largest element-wise op of a step; so the bulk runs through explicit AVX-512 / AVX2 bodies,
 * chosen once by CPUID. Every body does the same IEEE operations in the same order, without FMA
 * (sqrt and division are correctly rounded), so all give the bits of the scalar loop. */
#define ADAMW_SCALAR(i)                                                                                   \
    do {                                                                                                  \
        float gi = g[i];                                                                                  \
        float mi = beta1 * m[i] + a1 * gi;                                                                \
        float vi = beta2 * v[i] + a2 * gi * gi;                                                           \
        m[i] = mi;                                                                                        \
        v[i] = vi;                                                                                        \
        p[i] = p[i] * decay - step * mi / (sqrtf(vi) / bc2s + eps);                                       \
    } while (0)

/* one body per vector ISA: W lanes, type VT, intrinsic prefix PF (_mm512 / _mm256) */
#define ADAMW_BODY(W, VT, PF)                                                                             \
    const VT vb1 = PF##_set1_ps(beta1), va1 = PF##_set1_ps(a1), vb2 = PF##_set1_ps(beta2),                \
             va2 = PF##_set1_ps(a2), vdec = PF##_set1_ps(decay), vstep = PF##_set1_ps(step),              \
             vbc = PF##_set1_ps(bc2s), veps = PF##_set1_ps(eps);                                          \
    size_t i = 0;                                                                                         \
    for (; i + (W) <= n; i += (W)) {                                                                      \
        VT gi = PF##_loadu_ps(g + i);                                                                     \
        VT mi = PF##_add_ps(PF##_mul_ps(vb1, PF##_loadu_ps(m + i)), PF##_mul_ps(va1, gi));                \
        VT vi = PF##_add_ps(PF##_mul_ps(vb2, PF##_loadu_ps(v + i)), PF##_mul_ps(PF##_mul_ps(va2, gi), gi)); \
        PF##_storeu_ps(m + i, mi);                                                                        \
        PF##_storeu_ps(v + i, vi);                                                                        \
        VT den = PF##_add_ps(PF##_div_ps(PF##_sqrt_ps(vi), vbc), veps);                                   \
        VT pi = PF##_sub_ps(PF##_mul_ps(PF##_loadu_ps(p + i), vdec), PF##_div_ps(PF##_mul_ps(vstep, mi), den)); \
        PF##_storeu_ps(p + i, pi);                                                                        \
    }                                                                                                     \
    for (; i < n; i++) ADAMW_SCALAR(i);

#define ADAMW_ARGS float *restrict p, const float *restrict g, float *restrict m, float *restrict v, size_t n, \
                   float beta1, float beta2, float eps, float decay, float step, float bc2s
#define ADAMW_PRE const float a1 = 1.0f - beta1, a2 = 1.0f - beta2;

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx512f"))) static void adamw_avx512(ADAMW_ARGS) { ADAMW_PRE ADAMW_BODY(16, __m512, _mm512) }
__attribute__((target("avx2"))) static void adamw_avx2(ADAMW_ARGS) { ADAMW_PRE ADAMW_BODY(8, __m256, _mm256) }
#endif
static void adamw_scalar(ADAMW_ARGS) {
    ADAMW_PRE
    for (size_t i = 0; i < n; i++) ADAMW_SCALAR(i);
}

static void cpu_adamw(float *restrict p, const float *restrict g, float *restrict m, float *restrict v, size_t n,
                      float lr, float beta1, float beta2, float eps, float wd, float bc1, float bc2) {
    static void (*body)(ADAMW_ARGS);
    if (!body) {
        body = adamw_scalar;
#if defined(__x86_64__) && defined(__GNUC__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f")) body = adamw_avx512;
        else if (__builtin_cpu_supports("avx2")) body = adamw_avx2;
#endif
    }
    body(p, g, m, v, n, beta1, beta2, eps, 1.0f - lr * wd, lr / bc1, sqrtf(bc2));
}

SIMD_CLONES static void cpu_add_inplace(float *restrict y, const float *restrict x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

SIMD_CLONES static void cpu_scale_inplace(float *restrict y, float s, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] *= s;
}

/* the composition the op promises (the CPU table has no compute copy of its own: pc is a plain copy) */
static void cpu_adamw_fused(float *p, void *pc, float *g, float *m, float *v, size_t n, float gscale, int zero_g,
                            float lr, float beta1, float beta2, float eps, float wd, float bc1, float bc2) {
    if (gscale != 1.0f) cpu_scale_inplace(g, gscale, n);
    cpu_adamw(p, g, m, v, n, lr, beta1, beta2, eps, wd, bc1, bc2);
    if (pc && n) memcpy(pc, p, n * sizeof(float));
    if (zero_g && n) memset(g, 0, n * sizeof(float));
}

/* eight double partial sums: breaks the add latency chain without changing the precision class,
 * and is one zmm of doubles in the AVX-512 clone (four scalar sums did not vectorise) */
SIMD_CLONES static double cpu_sumsq1(const float *restrict x, size_t n) {
    double a[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int u = 0; u < 8; u++) a[u] += (double)x[i + u] * (double)x[i + u];
    for (; i < n; i++) a[0] += (double)x[i] * x[i];
    return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}
static double cpu_sumsq(const float *const *x, const size_t *n, int count) {
    double s = 0.0;
    for (int k = 0; k < count; k++) s += cpu_sumsq1(x[k], n[k]);
    return s;
}

static void cpu_zero(void *dst, size_t bytes) { if (bytes) memset(dst, 0, bytes); }
/* memmove: "device to device" copies may be asked to overlap; on CPU that costs nothing extra */
static void cpu_copy(void *dst, const void *src, size_t bytes) { if (bytes) memmove(dst, src, bytes); }
static void cpu_to_host(void *dst, const void *src, size_t bytes) { if (bytes) memcpy(dst, src, bytes); }
static void cpu_from_host(void *dst, const void *src, size_t bytes) { if (bytes) memcpy(dst, src, bytes); }

/* The engine frees every activation and temporary at the end of a step and allocates them again
 * in the next one. With glibc's defaults the freed top of the heap is returned to the kernel
 * (trim threshold 2x the largest freed block, a few MB here) and blocks above the mmap threshold
 * are unmapped, so every step page-faulted its ~110 MB of activations back in (28k faults, 12% of
 * a `small` step). Keeping freed memory in the process (no trimming, mmap only above 32 MiB, the
 * largest threshold glibc allows) removes that; the process holds its peak, which it reached anyway.
 * mallopt fixes both thresholds (it turns off glibc's dynamic adjustment), once, on first use. */
static void cpu_malloc_tune(void) {
    static int done;
    if (done) return;
    done = 1;
#if defined(__SANITIZE_ADDRESS__)
    return; /* ASan's allocator has no such thresholds and its mallopt refuses everything (SAN=1 builds) */
#endif
    /* failures only mean the default policy stays: slower, not wrong */
    if (!mallopt(M_MMAP_THRESHOLD, 32 << 20) || !mallopt(M_TRIM_THRESHOLD, INT_MAX))
        fprintf(stderr, "ops_cpu: mallopt refused; freed memory may be returned to the OS each step\n");
}

/* 64-byte alignment (cache line, AVX-512 width); a zero-byte request still gets a unique
 * pointer so that NULL only ever means out of memory. aligned_alloc wants a multiple of 64. */
static void *cpu_dev_alloc(size_t bytes) {
    cpu_malloc_tune();
    size_t rounded = bytes == 0 ? 64 : bytes + 63;
    if (rounded < bytes) return NULL; /* overflow */
    return aligned_alloc(64, rounded & ~(size_t)63);
}
static void cpu_dev_free(void *p) { free(p); }
static void cpu_synchronize(void) {}

static void cpu_to_compute(void *dst, const float *src, size_t n) { memmove(dst, src, n * sizeof(float)); }

/* every op of OPS_LIST is cpu_<op> above: an op added to the list fails to compile here until written */
#define CPU_ENTRY_(ret, name, params, args, prec) .name = cpu_##name,
#define CPU_DEVICE_ENTRY_(ret, name, params) .name = cpu_##name,
const ops_t ops_cpu = {
    .name = "cpu",
    .cbytes = 4,
    OPS_LIST(CPU_ENTRY_)
    OPS_DEVICE(CPU_DEVICE_ENTRY_)
};
#undef CPU_ENTRY_
#undef CPU_DEVICE_ENTRY_

/* ------------------------------------------------------------------------------------------ */
/* BLAS setup and the measured peak                                                           */

void cpu_blas_init(void) { openblas_set_num_threads(1); }
const char *cpu_blas_config(void) { return openblas_get_config(); }
const char *cpu_blas_core(void) { return openblas_get_corename(); }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The CPU "peak" for MFU: n×n×n SGEMM repeated for about `seconds` after one warm-up call,
 * 2n³ FLOPs per call. Scratch comes from malloc: it is a measurement, not engine memory.
 * Returns 0 (with a line on stderr) when n is invalid or memory is short. */
double cpu_sgemm_gflops(int n, double seconds) {
    if (n <= 0) {
        fprintf(stderr, "cpu_sgemm_gflops: n must be positive, got %d\n", n);
        return 0.0;
    }
    size_t nn = (size_t)n * (size_t)n;
    float *a = malloc(nn * sizeof(float)), *b = malloc(nn * sizeof(float)), *c = malloc(nn * sizeof(float));
    if (!a || !b || !c) {
        fprintf(stderr, "cpu_sgemm_gflops: cannot allocate 3 x %zu floats for n=%d\n", nn, n);
        free(a); free(b); free(c);
        return 0.0;
    }
    for (size_t i = 0; i < nn; i++) {
        a[i] = (float)((i * 7 + 3) % 17) * 0.01f;
        b[i] = (float)((i * 5 + 1) % 13) * 0.01f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    long calls = 0;
    double t0 = now_s(), t;
    do {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        calls++;
        t = now_s() - t0;
    } while (t < seconds);
    free(a); free(b); free(c);
    return t > 0.0 ? 2.0 * (double)n * (double)n * (double)n * (double)calls / t * 1e-9 : 0.0;
}

/* ------------------------------------------------------------------------------------------ */
/* the device: host memory, one per rank                                                     */

static int cpu_count(void) { return 1; }
static int cpu_select(int local_rank, char *err, size_t errlen) { (void)local_rank; (void)err; (void)errlen; return 0; }
static void cpu_mem_info(size_t *free_b, size_t *total_b) { *free_b = 0; *total_b = 0; }
static const char *cpu_device_name(void) { return "cpu"; }
static double cpu_peak_flops(void) { return cpu_sgemm_gflops(512, 0.3) * 1e9; }
static void cpu_pool_reserved(uint64_t *now_b, uint64_t *high_b) { *now_b = 0; *high_b = 0; }

const device_t device_cpu = {
    .name = "cpu", .host_memory = 1, .fp32 = &ops_cpu, .bf16 = NULL,
    .count = cpu_count, .select = cpu_select, .mem_info = cpu_mem_info, .device_name = cpu_device_name,
    .peak_flops = cpu_peak_flops, .pool_reserved = cpu_pool_reserved,
};
