/* tests/test_cuda_kernels.c — every op of ops_cuda against the CPU reference ops_cpu.
 *
 * What it is: for each op, random inputs (fixed seed) go through ops_cpu on the host and through
 * ops_cuda on the device (from_host / to_host); forward outputs and accumulated gradients must agree:
 * max_i |got−want| / (|want| + rms(want)) <= 1e-4 for element-wise ops, 1e-3 for GEMM and
 * attention; any NaN fails. Covers GQA and MQA (KV < H), T not a multiple of the kernels' block
 * sizes, head dims 16..256, NULL gradients, accumulation into non-zero gradients, in-place RoPE,
 * padded vocabulary columns and dlogits aliasing logits in the cross-entropy, overlapping copies,
 * and the bf16 GEMM path.
 * What it is not: a finite-difference check (tests/test_kernels.c checks ops_cpu that way, so
 * agreement with it is agreement with the mathematics), nor a benchmark.
 * Without CUDA in the build it prints one skip line; without a GPU, one skip line per op group.
 * MESHSWEEP_CUDA_TEST_BACKEND=cpu runs the same comparisons with ops_cpu as the backend under test:
 * a self-check of this harness on machines without a GPU (every line must be ok).
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
#endif

#define TOL_EW 1e-4   /* element-wise ops */
#define TOL_MM 1e-3   /* GEMM, attention: long fp32 sums in a different order */

static const ops_t *D;                 /* backend under test */
static const ops_t *const R = &ops_cpu; /* reference */

/* ---- helpers -------------------------------------------------------------------------------- */

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint64_t rng_next(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float frand(void) { return (float)((double)(rng_next() >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0); }

static void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        printf("FAIL cuda_harness: host malloc of %zu bytes\n", bytes);
        exit(1);
    }
    return p;
}
static float *rnd(size_t n, float scale) {
    float *p = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = scale * frand();
    return p;
}
static float *hcopy(const float *h, size_t n) {
    float *p = xmalloc(n * sizeof(float));
    memcpy(p, h, n * sizeof(float));
    return p;
}
static void *dbytes(const void *h, size_t bytes) {
    void *d = D->dev_alloc(bytes);
    if (!d) {
        printf("FAIL cuda_harness: dev_alloc of %zu bytes returned NULL\n", bytes);
        exit(1);
    }
    if (h) D->from_host(d, h, bytes);
    return d;
}
static float *dev(const float *h, size_t n) { return dbytes(h, n * sizeof(float)); }
static float *dev_fill(size_t n, float v) { /* device buffer of n copies of v (NaN: must be overwritten) */
    float *h = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = v;
    float *d = dev(h, n);
    free(h);
    return d;
}

/* compare a device array with a host reference; returns 1 when within tolerance */
static int cmp(const char *name, const float *dgot, const float *want, size_t n, double tol) {
    float *got = xmalloc(n * sizeof(float));
    D->to_host(got, dgot, n * sizeof(float));
    double ss = 0.0;
    size_t nf = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(want[i])) { ss += (double)want[i] * want[i]; nf++; }
    const double ref = nf ? sqrt(ss / (double)nf) : 0.0;
    double worst = 0.0;
    size_t wi = 0;
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i++) {
        double e;
        if (isnan(got[i]) || isnan(want[i])) { e = INFINITY; bad = 1; }
        else if (isinf(want[i]) || isinf(got[i])) e = got[i] == want[i] ? 0.0 : INFINITY;
        else e = fabs((double)got[i] - want[i]) / (fabs((double)want[i]) + ref + 1e-30);
        if (e > worst || bad) { worst = e; wi = i; }
    }
    int ok = worst <= tol;
    CHECK(ok, name, "max rel err %.3g at [%zu] (got %.9g, want %.9g; rms %.3g), tol %.1g, n %zu", worst, wi,
          n ? (double)got[wi] : 0.0, n ? (double)want[wi] : 0.0, ref, tol, n);
    free(got);
    return ok;
}

static void name_of(char *buf, size_t len, const char *op, const char *cfg) { snprintf(buf, len, "%s %s", op, cfg); }

/* ---- matmul ------------------------------------------------------------------------------- */

static void test_matmul_case(int N, int Cin, int Cout) {
    char cfg[64], nm[256];
    snprintf(cfg, sizeof cfg, "N%d Cin%d Cout%d", N, Cin, Cout);
    const size_t ni = (size_t)N * Cin, nw = (size_t)Cout * Cin, no = (size_t)N * Cout;
    float *in = rnd(ni, 1.0f), *w = rnd(nw, 1.0f), *out0 = rnd(no, 1.0f), *dout = rnd(no, 1.0f);
    float *din0 = rnd(ni, 1.0f), *dw0 = rnd(nw, 1.0f);
    float *d_in = dev(in, ni), *d_w = dev(w, nw), *d_dout = dev(dout, no);

    /* overwrite: the device output starts as NaN, so reading C with beta = 0 would show */
    float *want = hcopy(out0, no), *d_out = dev_fill(no, NAN);
    R->matmul_forward(want, in, w, N, Cin, Cout, 0);
    D->matmul_forward(d_out, d_in, d_w, N, Cin, Cout, 0);
    name_of(nm, sizeof nm, "cuda_matmul_forward", cfg);
    cmp(nm, d_out, want, no, TOL_MM);
    /* accumulate */
    memcpy(want, out0, no * sizeof(float));
    D->from_host(d_out, out0, no * sizeof(float));
    R->matmul_forward(want, in, w, N, Cin, Cout, 1);
    D->matmul_forward(d_out, d_in, d_w, N, Cin, Cout, 1);
    name_of(nm, sizeof nm, "cuda_matmul_forward_accumulate", cfg);
    cmp(nm, d_out, want, no, TOL_MM);

    /* backward into non-zero gradients: both, then each alone */
    for (int mode = 0; mode < 3; mode++) {
        float *wdin = hcopy(din0, ni), *wdw = hcopy(dw0, nw);
        float *d_din = dev(din0, ni), *d_dw = dev(dw0, nw);
        R->matmul_backward(mode == 2 ? NULL : wdin, mode == 1 ? NULL : wdw, dout, in, w, N, Cin, Cout);
        D->matmul_backward(mode == 2 ? NULL : d_din, mode == 1 ? NULL : d_dw, d_dout, d_in, d_w, N, Cin, Cout);
        static const char *const tag[3] = {"", " (dw NULL)", " (din NULL)"};
        char c2[160];
        snprintf(c2, sizeof c2, "%s%s", cfg, tag[mode]);
        name_of(nm, sizeof nm, "cuda_matmul_backward_din", c2);
        cmp(nm, d_din, wdin, ni, TOL_MM); /* unchanged din0 when skipped */
        name_of(nm, sizeof nm, "cuda_matmul_backward_dw", c2);
        cmp(nm, d_dw, wdw, nw, TOL_MM);
        free(wdin); free(wdw);
        D->dev_free(d_din); D->dev_free(d_dw);
    }
    free(in); free(w); free(out0); free(dout); free(din0); free(dw0); free(want);
    D->dev_free(d_in); D->dev_free(d_w); D->dev_free(d_dout); D->dev_free(d_out);
}

static void test_matmul(void) {
    test_matmul_case(37, 67, 45);
    test_matmul_case(128, 96, 160);
    test_matmul_case(1, 5, 3);
}

/* ---- embedding ------------------------------------------------------------------------------- */

static void test_embedding(void) {
    const int N = 64, C = 40, v_start = 10, v_count = 25;
    int32_t tok[64];
    for (int n = 0; n < N; n++) tok[n] = (int32_t)(rng_next() % 50); /* 0..49: some below, some above */
    tok[0] = tok[1] = 12;                                             /* a repeated owned token */
    const size_t nt = (size_t)v_count * C, no = (size_t)N * C;
    float *table = rnd(nt, 1.0f), *dout = rnd(no, 1.0f), *dt0 = rnd(nt, 1.0f);
    int32_t *d_tok = dbytes(tok, sizeof tok);
    float *d_table = dev(table, nt), *d_dout = dev(dout, no);
    float *want = xmalloc(no * sizeof(float)), *d_out = dev_fill(no, NAN);
    R->embedding_forward(want, tok, table, N, C, v_start, v_count);
    D->embedding_forward(d_out, d_tok, d_table, N, C, v_start, v_count);
    cmp("cuda_embedding_forward", d_out, want, no, TOL_EW);
    float *wdt = hcopy(dt0, nt), *d_dt = dev(dt0, nt);
    R->embedding_backward(wdt, dout, tok, N, C, v_start, v_count);
    D->embedding_backward(d_dt, d_dout, d_tok, N, C, v_start, v_count);
    cmp("cuda_embedding_backward", d_dt, wdt, nt, TOL_EW);
    D->embedding_backward(NULL, d_dout, d_tok, N, C, v_start, v_count); /* skipped, must not crash */
    D->synchronize();
    free(table); free(dout); free(dt0); free(want); free(wdt);
    D->dev_free(d_tok); D->dev_free(d_table); D->dev_free(d_dout); D->dev_free(d_out); D->dev_free(d_dt);
}

/* ---- rmsnorm ------------------------------------------------------------------------------- */

static void test_rmsnorm_case(int N, int C) {
    char cfg[64], nm[256];
    snprintf(cfg, sizeof cfg, "N%d C%d", N, C);
    const size_t n = (size_t)N * C;
    const float eps = 1e-5f;
    float *x = rnd(n, 3.0f), *w = rnd((size_t)C, 1.0f), *dout = rnd(n, 1.0f), *dx0 = rnd(n, 1.0f),
          *dw0 = rnd((size_t)C, 1.0f);
    float *out = xmalloc(n * sizeof(float)), *rstd = xmalloc((size_t)N * sizeof(float));
    float *d_x = dev(x, n), *d_w = dev(w, (size_t)C), *d_dout = dev(dout, n);
    float *d_out = dev_fill(n, NAN), *d_rstd = dev_fill((size_t)N, NAN);
    R->rmsnorm_forward(out, rstd, x, w, N, C, eps);
    D->rmsnorm_forward(d_out, d_rstd, d_x, d_w, N, C, eps);
    name_of(nm, sizeof nm, "cuda_rmsnorm_forward", cfg);
    cmp(nm, d_out, out, n, TOL_EW);
    name_of(nm, sizeof nm, "cuda_rmsnorm_rstd", cfg);
    cmp(nm, d_rstd, rstd, (size_t)N, TOL_EW);
    /* backward from the reference rstd on both sides, into non-zero gradients */
    D->from_host(d_rstd, rstd, (size_t)N * sizeof(float));
    for (int mode = 0; mode < 2; mode++) {
        float *wdx = hcopy(dx0, n), *wdw = hcopy(dw0, (size_t)C);
        float *d_dx = dev(dx0, n), *d_dw = dev(dw0, (size_t)C);
        R->rmsnorm_backward(mode ? NULL : wdx, wdw, dout, x, w, rstd, N, C);
        D->rmsnorm_backward(mode ? NULL : d_dx, d_dw, d_dout, d_x, d_w, d_rstd, N, C);
        char c2[160];
        snprintf(c2, sizeof c2, "%s%s", cfg, mode ? " (dx NULL)" : "");
        name_of(nm, sizeof nm, "cuda_rmsnorm_backward_dx", c2);
        cmp(nm, d_dx, wdx, n, TOL_EW);
        /* dw sums over N rows in another order: GEMM-like tolerance */
        name_of(nm, sizeof nm, "cuda_rmsnorm_backward_dw", c2);
        cmp(nm, d_dw, wdw, (size_t)C, TOL_MM);
        free(wdx); free(wdw);
        D->dev_free(d_dx); D->dev_free(d_dw);
    }
    free(x); free(w); free(dout); free(dx0); free(dw0); free(out); free(rstd);
    D->dev_free(d_x); D->dev_free(d_w); D->dev_free(d_dout); D->dev_free(d_out); D->dev_free(d_rstd);
}

static void test_rmsnorm(void) {
    test_rmsnorm_case(33, 300);
    test_rmsnorm_case(300, 40);
    test_rmsnorm_case(3, 7);
}

/* ---- rope ---------------------------------------------------------------------------------- */

static void test_rope_case(int B, int T, int nh, int hd, float theta) {
    char cfg[96], nm[256];
    snprintf(cfg, sizeof cfg, "B%d T%d nh%d hd%d theta%g", B, T, nh, hd, (double)theta);
    const size_t n = (size_t)B * T * nh * hd;
    float *x = rnd(n, 1.0f), *want = xmalloc(n * sizeof(float));
    float *d_x = dev(x, n), *d_out = dev_fill(n, NAN);
    R->rope_forward(want, x, B, T, nh, hd, theta);
    D->rope_forward(d_out, d_x, B, T, nh, hd, theta);
    name_of(nm, sizeof nm, "cuda_rope_forward", cfg);
    cmp(nm, d_out, want, n, TOL_EW);
    D->rope_forward(d_x, d_x, B, T, nh, hd, theta); /* in place */
    name_of(nm, sizeof nm, "cuda_rope_forward_inplace", cfg);
    cmp(nm, d_x, want, n, TOL_EW);
    D->from_host(d_x, x, n * sizeof(float));
    R->rope_backward(want, x, B, T, nh, hd, theta);
    D->rope_backward(d_out, d_x, B, T, nh, hd, theta);
    name_of(nm, sizeof nm, "cuda_rope_backward", cfg);
    cmp(nm, d_out, want, n, TOL_EW);
    D->rope_backward(d_x, d_x, B, T, nh, hd, theta);
    name_of(nm, sizeof nm, "cuda_rope_backward_inplace", cfg);
    cmp(nm, d_x, want, n, TOL_EW);
    free(x); free(want);
    D->dev_free(d_x); D->dev_free(d_out);
}

static void test_rope(void) {
    test_rope_case(2, 37, 3, 64, 10000.0f);
    test_rope_case(1, 300, 2, 128, 500000.0f);
    test_rope_case(1, 5, 2, 7, 10000.0f); /* odd hd: the last element passes through */
}

/* ---- attention ----------------------------------------------------------------------------- */

static void test_attention_case(int B, int T, int H, int KV, int hd) {
    char cfg[96], nm[256];
    snprintf(cfg, sizeof cfg, "B%d T%d H%d KV%d hd%d", B, T, H, KV, hd);
    const size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, nl = (size_t)B * H * T;
    const size_t nws = attention_ws_floats(T);
    float *q = rnd(nq, 1.5f), *k = rnd(nk, 1.5f), *v = rnd(nk, 1.0f), *dout = rnd(nq, 1.0f);
    float *dq0 = rnd(nq, 1.0f), *dk0 = rnd(nk, 1.0f), *dv0 = rnd(nk, 1.0f);
    float *out = xmalloc(nq * sizeof(float)), *lse = xmalloc(nl * sizeof(float)), *ws = xmalloc(nws * sizeof(float));
    float *d_q = dev(q, nq), *d_k = dev(k, nk), *d_v = dev(v, nk), *d_dout = dev(dout, nq);
    float *d_out = dev_fill(nq, NAN), *d_lse = dev_fill(nl, NAN), *d_ws = dev_fill(nws, NAN);
    R->attention_forward(out, lse, ws, q, k, v, B, T, H, KV, hd);
    D->attention_forward(d_out, d_lse, d_ws, d_q, d_k, d_v, B, T, H, KV, hd);
    name_of(nm, sizeof nm, "cuda_attention_forward", cfg);
    cmp(nm, d_out, out, nq, TOL_MM);
    name_of(nm, sizeof nm, "cuda_attention_lse", cfg);
    cmp(nm, d_lse, lse, nl, TOL_MM);
    /* backward from the reference out and lse on both sides, into non-zero gradients */
    D->from_host(d_out, out, nq * sizeof(float));
    D->from_host(d_lse, lse, nl * sizeof(float));
    for (int mode = 0; mode < 2; mode++) {
        float *wdq = hcopy(dq0, nq), *wdk = hcopy(dk0, nk), *wdv = hcopy(dv0, nk);
        float *d_dq = dev(dq0, nq), *d_dk = dev(dk0, nk), *d_dv = dev(dv0, nk);
        /* mode 1: dq only, then dk and dv only (the two kernels each on their own) */
        if (mode == 0) {
            R->attention_backward(wdq, wdk, wdv, ws, dout, out, lse, q, k, v, B, T, H, KV, hd);
            D->attention_backward(d_dq, d_dk, d_dv, d_ws, d_dout, d_out, d_lse, d_q, d_k, d_v, B, T, H, KV, hd);
        } else {
            R->attention_backward(wdq, NULL, NULL, ws, dout, out, lse, q, k, v, B, T, H, KV, hd);
            R->attention_backward(NULL, NULL, wdv, ws, dout, out, lse, q, k, v, B, T, H, KV, hd);
            D->attention_backward(d_dq, NULL, NULL, d_ws, d_dout, d_out, d_lse, d_q, d_k, d_v, B, T, H, KV, hd);
            D->attention_backward(NULL, NULL, d_dv, d_ws, d_dout, d_out, d_lse, d_q, d_k, d_v, B, T, H, KV, hd);
        }
        char c2[160];
        snprintf(c2, sizeof c2, "%s%s", cfg, mode ? " (separately)" : "");
        name_of(nm, sizeof nm, "cuda_attention_backward_dq", c2);
        cmp(nm, d_dq, wdq, nq, TOL_MM);
        name_of(nm, sizeof nm, "cuda_attention_backward_dk", c2);
        cmp(nm, d_dk, wdk, nk, TOL_MM); /* mode 1: dk0 untouched on both sides */
        name_of(nm, sizeof nm, "cuda_attention_backward_dv", c2);
        cmp(nm, d_dv, wdv, nk, TOL_MM);
        free(wdq); free(wdk); free(wdv);
        D->dev_free(d_dq); D->dev_free(d_dk); D->dev_free(d_dv);
    }
    free(q); free(k); free(v); free(dout); free(dq0); free(dk0); free(dv0); free(out); free(lse); free(ws);
    D->dev_free(d_q); D->dev_free(d_k); D->dev_free(d_v); D->dev_free(d_dout); D->dev_free(d_out);
    D->dev_free(d_lse); D->dev_free(d_ws);
}

static void test_attention(int small) {
    test_attention_case(2, 77, 4, 2, 32);  /* GQA, T not a multiple of 8, 16 or 32 */
    test_attention_case(1, 45, 6, 1, 64);  /* MQA */
    test_attention_case(2, 1, 2, 1, 16);   /* one token */
    test_attention_case(1, 70, 4, 4, 20);  /* MHA, head dim not a multiple of 32 */
    test_attention_case(1, 33, 2, 2, 128);
    test_attention_case(1, 40, 2, 1, 256); /* more than 48 KiB of shared memory */
    if (!small) test_attention_case(2, 300, 8, 2, 64);
}

/* ---- swiglu -------------------------------------------------------------------------------- */

static void test_swiglu(void) {
    const size_t n = 100003;
    float *g = rnd(n, 10.0f), *u = rnd(n, 1.0f), *dout = rnd(n, 1.0f), *dg0 = rnd(n, 1.0f), *du0 = rnd(n, 1.0f);
    float *out = xmalloc(n * sizeof(float));
    float *d_g = dev(g, n), *d_u = dev(u, n), *d_dout = dev(dout, n), *d_out = dev_fill(n, NAN);
    R->swiglu_forward(out, g, u, n);
    D->swiglu_forward(d_out, d_g, d_u, n);
    cmp("cuda_swiglu_forward", d_out, out, n, TOL_EW);
    static const char *const tag[3][2] = {{"cuda_swiglu_backward_dgate", "cuda_swiglu_backward_dup"},
                                          {"cuda_swiglu_backward_dgate (dup NULL)", "cuda_swiglu_backward_dup (dup NULL)"},
                                          {"cuda_swiglu_backward_dgate (dgate NULL)", "cuda_swiglu_backward_dup (dgate NULL)"}};
    for (int mode = 0; mode < 3; mode++) {
        float *wdg = hcopy(dg0, n), *wdu = hcopy(du0, n), *d_dg = dev(dg0, n), *d_du = dev(du0, n);
        R->swiglu_backward(mode == 2 ? NULL : wdg, mode == 1 ? NULL : wdu, dout, g, u, n);
        D->swiglu_backward(mode == 2 ? NULL : d_dg, mode == 1 ? NULL : d_du, d_dout, d_g, d_u, n);
        cmp(tag[mode][0], d_dg, wdg, n, TOL_EW);
        cmp(tag[mode][1], d_du, wdu, n, TOL_EW);
        free(wdg); free(wdu);
        D->dev_free(d_dg); D->dev_free(d_du);
    }
    free(g); free(u); free(dout); free(dg0); free(du0); free(out);
    D->dev_free(d_g); D->dev_free(d_u); D->dev_free(d_dout); D->dev_free(d_out);
}

/* ---- cross-entropy ----------------------------------------------------------------------------- */

static void test_ce_case(int N, int Vloc, int v_valid, int v_start) {
    char cfg[96], nm[256];
    snprintf(cfg, sizeof cfg, "N%d Vloc%d valid%d start%d", N, Vloc, v_valid, v_start);
    const size_t nl = (size_t)N * Vloc;
    const int nv = v_valid < Vloc ? (v_valid < 0 ? 0 : v_valid) : Vloc;
    float *logits = rnd(nl, 4.0f);
    for (int n = 0; n < N; n++) /* padding holds the largest values: masking must ignore them */
        for (int j = nv; j < Vloc; j++) logits[(size_t)n * Vloc + j] = 50.0f;
    int32_t *tgt = xmalloc((size_t)N * sizeof(int32_t));
    for (int n = 0; n < N; n++) /* owned (valid columns) and not owned, either side */
        tgt[n] = n % 3 == 0 ? v_start - 1 - (int32_t)(rng_next() % 5)
               : n % 3 == 1 && nv > 0 ? v_start + (int32_t)(rng_next() % (uint64_t)nv)
                                      : v_start + Vloc + (int32_t)(rng_next() % 5);
    float *mx = xmalloc((size_t)N * sizeof(float)), *se = xmalloc((size_t)N * sizeof(float));
    float *tl = xmalloc((size_t)N * sizeof(float)), *loss = xmalloc((size_t)N * sizeof(float));
    float *dl = xmalloc(nl * sizeof(float));
    float *d_logits = dev(logits, nl), *d_mx = dev_fill((size_t)N, NAN), *d_se = dev_fill((size_t)N, NAN);
    float *d_tl = dev_fill((size_t)N, NAN), *d_loss = dev_fill((size_t)N, NAN), *d_dl = dev_fill(nl, NAN);
    int32_t *d_tgt = dbytes(tgt, (size_t)N * sizeof(int32_t));

    R->ce_rowmax(mx, logits, N, Vloc, v_valid);
    D->ce_rowmax(d_mx, d_logits, N, Vloc, v_valid);
    name_of(nm, sizeof nm, "cuda_ce_rowmax", cfg);
    cmp(nm, d_mx, mx, (size_t)N, TOL_EW);
    if (nv == 0) goto done; /* the rest needs a finite max */
    D->from_host(d_mx, mx, (size_t)N * sizeof(float));
    R->ce_sumexp(se, logits, mx, N, Vloc, v_valid);
    D->ce_sumexp(d_se, d_logits, d_mx, N, Vloc, v_valid);
    name_of(nm, sizeof nm, "cuda_ce_sumexp", cfg);
    cmp(nm, d_se, se, (size_t)N, TOL_EW);
    D->from_host(d_se, se, (size_t)N * sizeof(float));
    R->ce_target(tl, logits, tgt, N, Vloc, v_start);
    D->ce_target(d_tl, d_logits, d_tgt, N, Vloc, v_start);
    name_of(nm, sizeof nm, "cuda_ce_target", cfg);
    cmp(nm, d_tl, tl, (size_t)N, TOL_EW);
    D->from_host(d_tl, tl, (size_t)N * sizeof(float));
    R->ce_loss(loss, mx, se, tl, N);
    D->ce_loss(d_loss, d_mx, d_se, d_tl, N);
    name_of(nm, sizeof nm, "cuda_ce_loss", cfg);
    cmp(nm, d_loss, loss, (size_t)N, TOL_EW);
    const float scale = 1.0f / 37.0f;
    R->ce_backward(dl, logits, mx, se, tgt, scale, N, Vloc, v_start, v_valid);
    D->ce_backward(d_dl, d_logits, d_mx, d_se, d_tgt, scale, N, Vloc, v_start, v_valid);
    name_of(nm, sizeof nm, "cuda_ce_backward", cfg);
    cmp(nm, d_dl, dl, nl, TOL_EW);
    D->ce_backward(d_logits, d_logits, d_mx, d_se, d_tgt, scale, N, Vloc, v_start, v_valid); /* aliased */
    name_of(nm, sizeof nm, "cuda_ce_backward_inplace", cfg);
    cmp(nm, d_logits, dl, nl, TOL_EW);
done:
    free(logits); free(tgt); free(mx); free(se); free(tl); free(loss); free(dl);
    D->dev_free(d_logits); D->dev_free(d_mx); D->dev_free(d_se); D->dev_free(d_tl); D->dev_free(d_loss);
    D->dev_free(d_dl); D->dev_free(d_tgt);
}

static void test_ce(void) {
    test_ce_case(20, 50, 43, 100);   /* 7 padding columns */
    test_ce_case(9, 1000, 1000, 0);  /* no padding, wide rows */
    test_ce_case(5, 30, 40, 7);      /* v_valid past Vloc: clamped */
    test_ce_case(4, 16, 0, 64);      /* a shard of padding only: max is -inf */
}

/* ---- adamw --------------------------------------------------------------------------------- */

static void test_adamw(void) {
    const size_t n = 70001;
    float *p = rnd(n, 1.0f), *g = rnd(n, 1e-2f), *m = rnd(n, 1e-3f), *v = rnd(n, 1e-4f);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    float *d_p = dev(p, n), *d_g = dev(g, n), *d_m = dev(m, n), *d_v = dev(v, n);
    const float lr = 3e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
    const float bc1 = 1.0f - powf(b1, 3.0f), bc2 = 1.0f - powf(b2, 3.0f);
    R->adamw(p, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2);
    D->adamw(d_p, d_g, d_m, d_v, n, lr, b1, b2, eps, wd, bc1, bc2);
    cmp("cuda_adamw_param", d_p, p, n, TOL_EW);
    cmp("cuda_adamw_m", d_m, m, n, TOL_EW);
    cmp("cuda_adamw_v", d_v, v, n, TOL_EW);
    free(p); free(g); free(m); free(v);
    D->dev_free(d_p); D->dev_free(d_g); D->dev_free(d_m); D->dev_free(d_v);
}

/* ---- add / scale / sumsq ------------------------------------------------------------------------ */

static void test_helpers(void) {
    const size_t n = 300007;
    float *x = rnd(n, 2.0f), *y = rnd(n, 1.0f);
    float *d_x = dev(x, n), *d_y = dev(y, n);
    R->add_inplace(y, x, n);
    D->add_inplace(d_y, d_x, n);
    cmp("cuda_add_inplace", d_y, y, n, TOL_EW);
    R->scale_inplace(y, -0.37f, n);
    D->scale_inplace(d_y, -0.37f, n);
    cmp("cuda_scale_inplace", d_y, y, n, TOL_EW);
    const size_t sizes[4] = {n, 1, 257, 0};
    for (int i = 0; i < 4; i++) {
        double want = R->sumsq(x, sizes[i]), got = D->sumsq(d_x, sizes[i]);
        double err = fabs(got - want) / (fabs(want) + 1e-300);
        char nm[64];
        snprintf(nm, sizeof nm, "cuda_sumsq n%zu", sizes[i]);
        CHECK(isfinite(got) && (sizes[i] == 0 ? got == 0.0 : err < 1e-9), nm, "got %.17g want %.17g", got, want);
    }
    /* deterministic: the same bits twice */
    double a = D->sumsq(d_x, n), b = D->sumsq(d_x, n);
    CHECK(a == b, "cuda_sumsq_deterministic", "%.17g then %.17g", a, b);
    free(x); free(y);
    D->dev_free(d_x); D->dev_free(d_y);
}

/* ---- memory ----------------------------------------------------------------------------------- */

static void test_memory(void) {
    const size_t n = 1000;
    float *x = rnd(n, 1.0f), *d_x = dev(x, n), *zeros = xmalloc(n * sizeof(float));
    memset(zeros, 0, n * sizeof(float));
    float *d_y = dev_fill(n, NAN);
    D->copy(d_y, d_x, n * sizeof(float));
    cmp("cuda_copy", d_y, x, n, 0.0);
    /* overlapping copies have memmove semantics, like the CPU backend's */
    float *want = hcopy(x, n);
    memmove(want, want + 3, 900 * sizeof(float));
    D->copy(d_x, d_x + 3, 900 * sizeof(float));
    cmp("cuda_copy_overlap_down", d_x, want, n, 0.0);
    memmove(want + 5, want, 900 * sizeof(float));
    D->copy(d_x + 5, d_x, 900 * sizeof(float));
    cmp("cuda_copy_overlap_up", d_x, want, n, 0.0);
    D->zero(d_y, n * sizeof(float));
    cmp("cuda_zero", d_y, zeros, n, 0.0);
    void *z = D->dev_alloc(0);
    CHECK(z != NULL, "cuda_dev_alloc_zero_bytes", "dev_alloc(0) returned NULL");
    D->dev_free(z);
    void *huge = D->dev_alloc((size_t)1 << 60);
    CHECK(huge == NULL, "cuda_dev_alloc_too_large", "dev_alloc(2^60) returned %p", huge);
    if (huge) D->dev_free(huge);
    /* the failed allocation must not poison later calls */
    D->add_inplace(d_y, d_x, n);
    D->synchronize();
    cmp("cuda_after_failed_alloc", d_y, want, n, 0.0);
    free(x); free(zeros); free(want);
    D->dev_free(d_x); D->dev_free(d_y);
}

/* ---- bf16 GEMM path (CUDA only) ------------------------------------------------------------------ */

#ifdef MESHSWEEP_CUDA
static float bf16_round(float f) { /* host round-to-nearest-even, the conversion's definition */
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

static void test_bf16(void) {
    const int N = 50, Cin = 72, Cout = 40;
    const size_t ni = (size_t)N * Cin, nw = (size_t)Cout * Cin, no = (size_t)N * Cout;
    float *in = rnd(ni, 1.0f), *w = rnd(nw, 1.0f), *dout = rnd(no, 1.0f), *dw0 = rnd(nw, 1.0f);
    float *d_in = dev(in, ni), *d_w = dev(w, nw), *d_dout = dev(dout, no);
    uint16_t *b_in = dbytes(NULL, ni * 2), *b_w = dbytes(NULL, nw * 2), *b_dout = dbytes(NULL, no * 2);
    cuda_f32_to_bf16(b_in, d_in, ni);
    cuda_f32_to_bf16(b_w, d_w, nw);
    cuda_f32_to_bf16(b_dout, d_dout, no);
    /* round trip equals host rounding exactly */
    for (size_t i = 0; i < ni; i++) in[i] = bf16_round(in[i]);
    for (size_t i = 0; i < nw; i++) w[i] = bf16_round(w[i]);
    for (size_t i = 0; i < no; i++) dout[i] = bf16_round(dout[i]);
    float *d_back = dev_fill(ni, NAN);
    cuda_bf16_to_f32(d_back, b_in, ni);
    cmp("cuda_bf16_roundtrip", d_back, in, ni, 0.0);
    /* forward with fp32 output: the products of bf16 values are exact in fp32 */
    float *want = xmalloc(no * sizeof(float)), *d_out = dev_fill(no, NAN);
    R->matmul_forward(want, in, w, N, Cin, Cout, 0);
    cuda_matmul_forward_bf16_f32out(d_out, b_in, b_w, N, Cin, Cout, 0);
    cmp("cuda_matmul_forward_bf16_f32out", d_out, want, no, TOL_MM);
    /* forward with bf16 output: one bf16 rounding (relative 2^-9) */
    uint16_t *b_out = dbytes(NULL, no * 2);
    cuda_matmul_forward_bf16(b_out, b_in, b_w, N, Cin, Cout, 0);
    cuda_bf16_to_f32(d_out, b_out, no);
    cmp("cuda_matmul_forward_bf16", d_out, want, no, 5e-3);
    /* backward: din (bf16) from zero, dw (fp32) accumulated onto dw0 */
    float *wdin = xmalloc(ni * sizeof(float)), *wdw = hcopy(dw0, nw), *d_dw = dev(dw0, nw);
    memset(wdin, 0, ni * sizeof(float));
    uint16_t *b_din = dbytes(NULL, ni * 2);
    D->zero(b_din, ni * 2);
    R->matmul_backward(wdin, wdw, dout, in, w, N, Cin, Cout);
    cuda_matmul_backward_bf16(b_din, d_dw, b_dout, b_in, b_w, N, Cin, Cout);
    cuda_bf16_to_f32(d_back, b_din, ni);
    cmp("cuda_matmul_backward_bf16_din", d_back, wdin, ni, 5e-3);
    cmp("cuda_matmul_backward_bf16_dw", d_dw, wdw, nw, TOL_MM);
    free(in); free(w); free(dout); free(dw0); free(want); free(wdin); free(wdw);
    D->dev_free(d_in); D->dev_free(d_w); D->dev_free(d_dout); D->dev_free(b_in); D->dev_free(b_w);
    D->dev_free(b_dout); D->dev_free(d_back); D->dev_free(d_out); D->dev_free(b_out); D->dev_free(d_dw);
    D->dev_free(b_din);
}
#endif

/* ---------------------------------------------------------------------------------------------- */

static const char *const groups[] = {"cuda_matmul", "cuda_embedding", "cuda_rmsnorm", "cuda_rope",
                                     "cuda_attention", "cuda_swiglu", "cuda_ce", "cuda_adamw",
                                     "cuda_helpers", "cuda_memory", "cuda_bf16"};

static void run_all(int with_bf16, int small) {
    test_matmul();
    test_embedding();
    test_rmsnorm();
    test_rope();
    test_attention(small);
    test_swiglu();
    test_ce();
    test_adamw();
    test_helpers();
    test_memory();
#ifdef MESHSWEEP_CUDA
    if (with_bf16) test_bf16();
#else
    (void)with_bf16;
#endif
}

int main(void) {
    const char *self = getenv("MESHSWEEP_CUDA_TEST_BACKEND");
    if (self && strcmp(self, "cpu") == 0) { /* harness self-check */
        D = &ops_cpu;
        printf("# harness self-check: ops_cpu against itself\n");
        run_all(0, 0);
        return check_exit();
    }
#ifndef MESHSWEEP_CUDA
    (void)groups;
    SKIP("cuda_kernels", "built without CUDA");
    return check_exit();
#else
    /* referencing ops_cuda makes the link fail if the CUDA objects are missing from the library */
    printf("# backend under test: %s\n", ops_cuda.name);
    if (cuda_device_count() == 0) {
        for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) SKIP(groups[i], "no GPU");
        return check_exit();
    }
    char err[256];
    if (cuda_select_device(0, err, sizeof err) != 0) {
        printf("FAIL cuda_select_device: %s\n", err);
        return 1;
    }
    const char *name = cuda_device_name();
    printf("# device: %s (bf16 peak %.0f TFLOP/s)\n", name, cuda_peak_bf16_tflops(name));
    CHECK(cuda_peak_bf16_tflops("NVIDIA H100 80GB HBM3") == 989.0 && cuda_peak_bf16_tflops("NVIDIA A100-SXM4-80GB") ==
              312.0 && cuda_peak_bf16_tflops("Tesla T4") == 0.0,
          "cuda_peak_bf16_tflops", "datasheet table wrong");
    size_t fr = 0, tot = 0;
    cuda_mem_info(&fr, &tot);
    CHECK(tot > 0 && fr <= tot, "cuda_mem_info", "free %zu total %zu", fr, tot);
    D = &ops_cuda;
    /* the emulator (kernels/cuda/cuda_emu.cuh) runs one host thread per CUDA thread: skip the
       largest attention case there */
    run_all(1, strcmp(name, "emulated device") == 0);
    return check_exit();
#endif
}
