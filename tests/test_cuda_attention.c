/* tests/test_cuda_attention.c — the tensor-core attention of the bf16 CUDA table against the CPU reference.
 *
 * What it is: first the warp-level mma itself (cuda_mma_selftest: one warp computes D = A·B + C for
 * a random 16x16x8 bf16 tile, its fragments filled by scalar loads and by cp.async + ldmatrix as the
 * kernels fill them): D must match a host product, and the same tile with a wrong layout (A
 * transposed; B by the plain ldmatrix instead of .trans) must NOT match, so a wrong fragment layout
 * cannot pass (in the emulator, tests/emu/cuda_emu_mma.cuh and cuda_emu_ptx.cuh rebuild the
 * matrices from the documented per-lane layouts; on a GPU it is the real instructions). Then
 * causal attention forward
 * (out, lse) and backward (dq, dk, dv accumulated into non-zero gradients, and each gradient alone
 * with the others NULL) at head dims 64 and 128, with GQA and MQA, T a multiple of the 64-row tile,
 * T not one, and several batches; each case also checks that the tensor-core kernels ran (the bf16
 * table takes them at hd 64 and 128). Inputs are random fp32 rounded to bf16 on the host, so both
 * sides see identical values; metric max_i |got−want| / (|want| + rms(want)), any NaN fails.
 * Tolerances: 1e-2 for the bf16 outputs and 1e-3 for lse, the bounds of tests/test_cuda_bf16.c;
 * besides the final bf16 store the tensor-core kernels round P and dS to bf16 as mma operands
 * (relative 2^-9 each, averaged over a row), which stays far below the first bound; any indexing,
 * masking or fragment error is O(1). The measured errors are printed as `#` lines.
 * What it is not: a finite-difference check (tests/test_kernels.c checks the CPU reference that
 * way; this compares with that reference), nor a benchmark (bench/gpu_bench.sh times the kernels).
 * Without CUDA in the build it prints one skip line; without a GPU, one per group.
 */
#include "kernels/kernels.h"
#include "tests/check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef MESHSWEEP_CUDA
#include "kernels/cuda/cuda_backend.h"

#define TOL_BF 1e-2
#define TOL_LSE 1e-3

static const ops_t *D;
static const ops_t *const R = &ops_cpu;

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static float frand(void) { /* splitmix64 -> [-1, 1) */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}
static uint16_t f2b(float f) { /* round to nearest even (finite inputs only here) */
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float b2f(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        printf("FAIL cuda_attention_harness: host malloc of %zu bytes\n", bytes);
        exit(1);
    }
    return p;
}
static float *rnd(size_t n, float scale) {
    float *p = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = b2f(f2b(scale * frand()));
    return p;
}
static void *dev(const void *h, size_t bytes) {
    void *d = D->dev_alloc(bytes);
    if (!d) {
        printf("FAIL cuda_attention_harness: dev_alloc of %zu bytes returned NULL\n", bytes);
        exit(1);
    }
    if (h) D->from_host(d, h, bytes);
    return d;
}
/* bf16 device copy, typed float* as ops_t passes it; with g_off = 1 it starts one element past an
 * allocation (not 16-byte aligned: the kernels' 2-byte load path) */
static int g_off;
static float *devb(const float *h, size_t n) {
    uint16_t *b = xmalloc((n + 1) * sizeof(uint16_t));
    b[0] = b[n] = 0x7fc0u;
    for (size_t i = 0; i < n; i++) b[i + g_off] = h ? f2b(h[i]) : 0x7fc0u; /* NULL: NaN, to see unwritten outputs */
    char *d = dev(b, (n + 1) * sizeof(uint16_t));
    free(b);
    return (float *)(d + g_off * sizeof(uint16_t));
}
static void freeb(float *d) { D->dev_free((char *)d - g_off * sizeof(uint16_t)); }
static double err_metric(const float *got, const float *want, size_t n) {
    double ss = 0.0, worst = 0.0;
    for (size_t i = 0; i < n; i++) ss += (double)want[i] * want[i];
    const double rms = sqrt(ss / (double)(n ? n : 1));
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i])) return INFINITY;
        const double e = fabs((double)got[i] - want[i]) / (fabs((double)want[i]) + rms);
        if (e > worst) worst = e;
    }
    return worst;
}
static void cmp(const char *name, const float *got, const float *want, size_t n, double tol) {
    const double e = err_metric(got, want, n);
    printf("# %s: max err %.3g\n", name, e);
    CHECK(e <= tol, name, "max err %.3g > %.3g", e, tol);
}
static void cmpb(const char *name, const float *d, const float *want, size_t n, double tol) {
    uint16_t *b = xmalloc(n * sizeof(uint16_t));
    float *h = xmalloc(n * sizeof(float));
    D->to_host(b, d, n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) h[i] = b2f(b[i]);
    cmp(name, h, want, n, tol);
    free(b);
    free(h);
}

/* ---- the mma instruction and its fragment layout ---------------------------------------------- */
static void test_mma(void) {
    uint16_t a[256], b[128];
    float af[256], bf[128], c[128], want[128], got[128];
    for (int i = 0; i < 256; i++) af[i] = b2f(a[i] = f2b(frand()));
    for (int i = 0; i < 128; i++) bf[i] = b2f(b[i] = f2b(frand()));
    for (int i = 0; i < 128; i++) c[i] = frand();
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) {
            double s = c[r * 8 + n];
            for (int k = 0; k < 16; k++) s += (double)af[r * 16 + k] * bf[k * 8 + n];
            want[r * 8 + n] = (float)s;
        }
    void *da = dev(a, sizeof a), *db = dev(b, sizeof b), *dc = dev(c, sizeof c), *dd = dev(NULL, sizeof got);
    static const char *const what[] = {"scalar loads", "A transposed", "cp.async + ldmatrix", "B by plain ldmatrix"};
    static const char *const names[] = {"cuda_mma_m16n8k16_layout", "cuda_mma_m16n8k16_wrong_layout_fails",
                                        "cuda_mma_ldmatrix_layout", "cuda_mma_ldmatrix_wrong_variant_fails"};
    for (int mode = 0; mode < 4; mode++) {
        cuda_mma_selftest(dd, da, db, dc, mode);
        D->to_host(got, dd, sizeof got);
        double worst = 0.0;
        for (int i = 0; i < 128; i++) {
            const double e = isnan(got[i]) ? INFINITY : fabs((double)got[i] - want[i]);
            if (e > worst) worst = e;
        }
        printf("# mma m16n8k16, fragments by %s: max |D - A·B - C| = %.3g\n", what[mode], worst);
        if (mode % 2 == 0)
            CHECK(worst <= 1e-5, names[mode], "D differs from A·B + C by %.3g", worst);
        else
            CHECK(worst >= 0.05, names[mode], "a wrong fragment layout gave D within %.3g of A·B + C: not checked",
                  worst);
    }
    D->dev_free(da); D->dev_free(db); D->dev_free(dc); D->dev_free(dd);
}

/* ---- attention --------------------------------------------------------------------------------- */
static void test_case(int B, int T, int H, int KV, int hd, int off) {
    char cfg[80], nm[192];
    g_off = off;
    snprintf(cfg, sizeof cfg, "B%d_T%d_H%d_KV%d_hd%d%s", B, T, H, KV, hd, off ? "_unaligned" : "");
    const size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, nl = (size_t)B * H * T;
    float *q = rnd(nq, 1.5f), *k = rnd(nk, 1.5f), *v = rnd(nk, 1.0f), *dout = rnd(nq, 1.0f);
    float *dq0 = rnd(nq, 1.0f), *dk0 = rnd(nk, 1.0f), *dv0 = rnd(nk, 1.0f);
    float *out = xmalloc(nq * sizeof(float)), *lse = xmalloc(nl * sizeof(float));
    float *ws = xmalloc(attention_ws_floats(T) * sizeof(float));
    float *d_ws = dev(NULL, attention_flash_ws_floats(B, T, H, KV, hd) * sizeof(float));
    float *d_q = devb(q, nq), *d_k = devb(k, nk), *d_v = devb(v, nk), *d_dout = devb(dout, nq);
    float *d_out = devb(NULL, nq), *d_lse = dev(NULL, nl * sizeof(float));
    const long l0 = cuda_attention_tc_launches();
    R->attention_forward(out, lse, ws, q, k, v, B, T, H, KV, hd);
    D->attention_forward(d_out, d_lse, NULL, d_q, d_k, d_v, B, T, H, KV, hd);
    snprintf(nm, sizeof nm, "cuda_tc_attention_forward_%s", cfg);
    cmpb(nm, d_out, out, nq, TOL_BF);
    float *hl = xmalloc(nl * sizeof(float));
    D->to_host(hl, d_lse, nl * sizeof(float));
    snprintf(nm, sizeof nm, "cuda_tc_attention_lse_%s", cfg);
    cmp(nm, hl, lse, nl, TOL_LSE);
    /* backward from the reference out rounded to bf16 (what the bf16 engine keeps) and lse */
    for (size_t i = 0; i < nq; i++) out[i] = b2f(f2b(out[i]));
    freeb(d_out);
    d_out = devb(out, nq);
    D->from_host(d_lse, lse, nl * sizeof(float));
    for (int mode = 0; mode < 4; mode++) { /* all three; dq alone; dk alone; dv alone */
        const int wq = mode == 0 || mode == 1, wk = mode == 0 || mode == 2, wv = mode == 0 || mode == 3;
        float *rq = xmalloc(nq * sizeof(float)), *rk = xmalloc(nk * sizeof(float)), *rv = xmalloc(nk * sizeof(float));
        memcpy(rq, dq0, nq * sizeof(float));
        memcpy(rk, dk0, nk * sizeof(float));
        memcpy(rv, dv0, nk * sizeof(float));
        float *d_dq = devb(dq0, nq), *d_dk = devb(dk0, nk), *d_dv = devb(dv0, nk);
        R->attention_backward(wq ? rq : NULL, wk ? rk : NULL, wv ? rv : NULL, ws, dout, out, lse, q, k, v, B, T, H,
                              KV, hd);
        D->attention_backward(wq ? d_dq : NULL, wk ? d_dk : NULL, wv ? d_dv : NULL, d_ws, d_dout, d_out, d_lse, d_q,
                              d_k, d_v, B, T, H, KV, hd);
        static const char *const modes[] = {"", "_alone", "_alone", "_alone"};
        snprintf(nm, sizeof nm, "cuda_tc_attention_backward_dq%s_%s", modes[mode], cfg);
        if (mode != 2 && mode != 3) cmpb(nm, d_dq, rq, nq, TOL_BF);
        snprintf(nm, sizeof nm, "cuda_tc_attention_backward_dk%s_%s", modes[mode], cfg);
        if (mode != 1 && mode != 3) cmpb(nm, d_dk, rk, nk, TOL_BF);
        snprintf(nm, sizeof nm, "cuda_tc_attention_backward_dv%s_%s", modes[mode], cfg);
        if (mode != 1 && mode != 2) cmpb(nm, d_dv, rv, nk, TOL_BF);
        if (mode) { /* the gradients not asked for are untouched */
            snprintf(nm, sizeof nm, "cuda_tc_attention_backward_untouched%d_%s", mode, cfg);
            float *u0 = wq ? dk0 : dq0, *du = wq ? d_dk : d_dq;
            const size_t nu = wq ? nk : nq;
            cmpb(nm, du, u0, nu, 0.0);
        }
        free(rq); free(rk); free(rv);
        freeb(d_dq); freeb(d_dk); freeb(d_dv);
    }
    /* 1 forward + 2 (all three gradients) + 3 x 1 (each alone) tensor-core launches */
    const long launched = cuda_attention_tc_launches() - l0;
    snprintf(nm, sizeof nm, "cuda_tc_attention_used_%s", cfg);
    CHECK(launched == 6, nm, "%ld tensor-core launches, want 6 (hd %d takes the tensor-core kernels)", launched, hd);
    free(q); free(k); free(v); free(dout); free(dq0); free(dk0); free(dv0); free(out); free(lse); free(ws); free(hl);
    freeb(d_q); freeb(d_k); freeb(d_v); freeb(d_dout); freeb(d_out);
    D->dev_free(d_lse);
    D->dev_free(d_ws);
}

/* ---- the folded dq (--deterministic off) against the deterministic passes -----------------------
 * Both sum the same products: dQ = scale · Σ_k dS_qk·K_k with dS rounded to bf16 as the mma operand
 * (products of two bf16 are exact in fp32), one in the mma's order over a query tile's keys, the
 * other per key block, added by fp32 atomics in the order the blocks run. Each fp32 sum of at most T
 * terms (and the multiply by scale) is within (T + 1)·2^-24·A of the exact one, A = scale·Σ_k |dS_qk·K_kd|;
 * so the two fp32 values differ by at most (2T + 2)·2^-24·A, and after both add the same bf16 dq0 and
 * round to bf16 (half an ulp each) by at most that plus one bf16 ulp of the larger. Here A is bounded
 * from the inputs: |dS_qk| <= P_qk·(|dP_qk| + |D_q|), Σ_k P_qk = 1, |dP| <= hd·max|dO|·max|V| and
 * |D| <= hd·max|dO|·max|O|, so A <= scale·max|K|·hd·max|dO|·(max|V| + max|O|). dk and dv come from
 * the same arithmetic in both: bit-identical. A dropped or repeated key block is O(0.1): caught. */
static float maxabs(const float *x, size_t n) {
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}
static double bf16_ulp(double x) { /* the spacing of bf16 at |x| (8 significant bits) */
    int e;
    frexp(fabs(x), &e); /* |x| = f·2^e, f in [0.5, 1) */
    return x == 0.0 ? ldexp(1.0, -133) : ldexp(1.0, e - 8);
}
static void test_fold(int B, int T, int H, int KV, int hd, int off) {
    char cfg[80], nm[192];
    g_off = off;
    snprintf(cfg, sizeof cfg, "B%d_T%d_H%d_KV%d_hd%d%s", B, T, H, KV, hd, off ? "_unaligned" : "");
    const size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, nl = (size_t)B * H * T;
    float *q = rnd(nq, 1.5f), *k = rnd(nk, 1.5f), *v = rnd(nk, 1.0f), *dout = rnd(nq, 1.0f);
    float *g0[3] = {rnd(nq, 1.0f), rnd(nk, 1.0f), rnd(nk, 1.0f)};
    float *out = xmalloc(nq * sizeof(float)), *lse = xmalloc(nl * sizeof(float));
    float *ws = xmalloc(attention_ws_floats(T) * sizeof(float));
    R->attention_forward(out, lse, ws, q, k, v, B, T, H, KV, hd);
    for (size_t i = 0; i < nq; i++) out[i] = b2f(f2b(out[i]));
    float *d_ws = dev(NULL, attention_flash_fold_ws_floats(B, T, H, KV, hd) * sizeof(float));
    float *d_q = devb(q, nq), *d_k = devb(k, nk), *d_v = devb(v, nk), *d_dout = devb(dout, nq), *d_out = devb(out, nq);
    float *d_lse = dev(lse, nl * sizeof(float));
    const size_t n[3] = {nq, nk, nk};
    uint16_t *got[2][3];
    long launched[2];
    for (int fold = 0; fold < 2; fold++) {
        float *d_g[3];
        for (int w = 0; w < 3; w++) d_g[w] = devb(g0[w], n[w]);
        const int was = cuda_attention_set_deterministic(!fold);
        const long l0 = cuda_attention_tc_launches();
        D->attention_backward(d_g[0], d_g[1], d_g[2], d_ws, d_dout, d_out, d_lse, d_q, d_k, d_v, B, T, H, KV, hd);
        launched[fold] = cuda_attention_tc_launches() - l0;
        cuda_attention_set_deterministic(was);
        for (int w = 0; w < 3; w++) {
            got[fold][w] = xmalloc(n[w] * sizeof(uint16_t));
            D->to_host(got[fold][w], d_g[w], n[w] * sizeof(uint16_t));
            freeb(d_g[w]);
        }
    }
    snprintf(nm, sizeof nm, "cuda_tc_attention_fold_dq_one_pass_%s", cfg);
    CHECK(launched[0] == 2 && launched[1] == 1, nm, "tensor-core launches %ld deterministic, %ld folded (want 2, 1)",
          launched[0], launched[1]);
    const double A = 1.0 / sqrt((double)hd) * maxabs(k, nk) * hd * maxabs(dout, nq) * (maxabs(v, nk) + maxabs(out, nq));
    const double e32 = (2.0 * T + 2.0) * ldexp(1.0, -24) * A;
    double worst = 0.0, worst_abs = 0.0; /* |fold − det| / (e32 + ulp), and the largest |fold − det| */
    size_t differ = 0;
    for (size_t i = 0; i < nq; i++) {
        const double a = b2f(got[1][0][i]), d = b2f(got[0][0][i]);
        const double diff = isnan(a) || isnan(d) ? INFINITY : fabs(a - d);
        differ += got[1][0][i] != got[0][0][i];
        if (diff > worst_abs) worst_abs = diff;
        const double r = diff / (e32 + bf16_ulp(fmax(fabs(a), fabs(d))));
        if (!(r <= worst)) worst = r;
    }
    printf("# folded dq %s: %zu of %zu differ from the deterministic dq, max %.3g (bound: %.3g + one bf16 ulp), "
           "%.3g of the bound\n", cfg, differ, nq, worst_abs, e32, worst);
    snprintf(nm, sizeof nm, "cuda_tc_attention_fold_dq_%s", cfg);
    CHECK(worst <= 1.0, nm, "folded dq differs from the deterministic one by %.3g of the bound (%.3g + 1 bf16 ulp)",
          worst, e32);
    snprintf(nm, sizeof nm, "cuda_tc_attention_fold_dkdv_identical_%s", cfg);
    CHECK(!memcmp(got[0][1], got[1][1], nk * 2) && !memcmp(got[0][2], got[1][2], nk * 2), nm,
          "dk or dv changed with the folded dq");
    for (int f = 0; f < 2; f++)
        for (int w = 0; w < 3; w++) free(got[f][w]);
    for (int w = 0; w < 3; w++) free(g0[w]);
    free(q); free(k); free(v); free(dout); free(out); free(lse); free(ws);
    freeb(d_q); freeb(d_k); freeb(d_v); freeb(d_dout); freeb(d_out);
    D->dev_free(d_lse);
    D->dev_free(d_ws);
}

static void test_attention(int small) {
    CHECK(cuda_attention_tensor_cores(64) && cuda_attention_tensor_cores(128) && !cuda_attention_tensor_cores(32) &&
              !cuda_attention_tensor_cores(256),
          "cuda_tc_attention_head_dims", "tensor cores claimed for hd 64 %d, 128 %d, 32 %d, 256 %d",
          cuda_attention_tensor_cores(64), cuda_attention_tensor_cores(128), cuda_attention_tensor_cores(32),
          cuda_attention_tensor_cores(256));
    test_case(1, 77, 4, 2, 64, 0);   /* GQA, T not a multiple of the 64-row tile or the 32-row tile */
    test_case(2, 130, 2, 1, 128, 0); /* MQA, three row tiles, two batches */
    test_case(1, 64, 2, 2, 128, 0);  /* MHA, T exactly one tile */
    test_case(1, 3, 4, 1, 64, 0);    /* fewer rows than a fragment */
    test_case(1, 70, 2, 1, 64, 1);   /* tensors not 16-byte aligned: the 2-byte tile loads */
    test_case(2, 200, 2, 1, 64, 0);  /* hd 64 forward in 128-row blocks: two, the second partial */
    test_fold(1, 77, 4, 2, 64, 0);   /* GQA, uneven T */
    test_fold(2, 130, 2, 1, 128, 0); /* MQA, two batches, uneven T */
    test_fold(1, 64, 2, 2, 128, 0);  /* MHA, T one tile */
    test_fold(1, 70, 2, 1, 64, 1);   /* not 16-byte aligned: the 2-byte path of the dq add */
    if (!small) {
        test_fold(2, 1000, 8, 2, 128, 0);
        test_case(2, 1000, 8, 2, 128, 0);
        test_case(1, 2048, 4, 1, 64, 0);
    }
}
#endif /* MESHSWEEP_CUDA */

int main(void) {
#ifndef MESHSWEEP_CUDA
    SKIP("cuda_tc_attention", "built without CUDA");
    return check_exit();
#else
    if (cuda_device_count() == 0) {
        SKIP("cuda_mma_m16n8k16", "no GPU");
        SKIP("cuda_tc_attention", "no GPU");
        return check_exit();
    }
    char err[256];
    if (cuda_select_device(0, err, sizeof err) != 0) {
        printf("FAIL cuda_tc_attention_select_device: %s\n", err);
        return 1;
    }
    const char *name = cuda_device_name();
    printf("# device: %s\n", name);
    D = &ops_cuda_bf16;
    test_mma();
    /* the emulator runs every CUDA thread as a fiber on one core: the long sequences only on a GPU */
    test_attention(strcmp(name, "emulated device") == 0);
    return check_exit();
#endif
}
