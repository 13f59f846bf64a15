/* tests/test_cuda_bf16.c — every op of the mixed-precision table ops_cuda_bf16 against the CPU reference.
 *
 * What it is: for each op, random fp32 inputs (fixed seed) are rounded to bf16 on the host; ops_cpu
 * runs on those rounded values in fp32, ops_cuda_bf16 on their bf16 bit patterns (compute-precision
 * arguments) or on the same fp32 values (fp32 arguments, see kernels/cuda/ops_cuda_bf16.cu). Both
 * backends therefore see identical inputs, and the only differences left are the roundings of
 * what the bf16 table stores, plus fp32 summation order. Metric as tests/test_cuda_kernels.c:
 * max_i |got−want| / (|want| + rms(want)); any NaN fails. Tolerances:
 *   TOL_BF  1e-2 for outputs stored in bf16. Each store rounds once to nearest: bf16 keeps 8
 *           significant bits, so the error is at most 2^-8 (3.9e-3) relative to |want|, and below
 *           that in this metric; accumulating gradients included (the previous gradient is bf16 on
 *           both sides, the sum is rounded once). Measured in the emulator: at most 3.0e-3 for
 *           every bf16 output. The rest of the margin (2.5 roundings) covers fp32 differences
 *           before the rounding (other summation orders in GEMM, attention and the CE sums, ~1e-6);
 *           any indexing, masking or accumulate-vs-assign bug is an O(1) error.
 *   TOL_F32 1e-3 for fp32 outputs computed from bf16 inputs (rstd, lse, CE statistics, weight
 *           gradients): the inputs are identical, so only fp32 sums in another order differ
 *           (long ones: GEMM dw over N rows, atomics in rmsnorm/embedding dw); the bound of
 *           tests/test_cuda_kernels.c for GEMM and attention. Measured in the emulator: <= 6e-7.
 *   exact   for what is a copy (embedding forward, copy) or a conversion (to_compute: bit-exact
 *           round-to-nearest-even against a host implementation, with ties, infinities, NaN,
 *           subnormals and overflow).
 * A tolerance of 1e-2 would not see stores that truncate instead of rounding (error < 2^-8), so
 * one check also measures the mean signed relative error of a large bf16 output (swiglu): about 0
 * for round-to-nearest, about −3e-3 for truncation.
 * Covers GQA and MQA, T not a multiple of the kernels' block sizes, head dims 16..256 (more than
 * 48 KiB of shared memory at 256), NULL gradients, accumulation into non-zero gradients, in-place
 * RoPE, padded vocabulary columns, a shard of padding only, dlogits aliasing logits, the fp32 ops
 * the table inherits from ops_cuda, cbytes and to_compute.
 * What it is not: a finite-difference check (tests/test_kernels.c checks ops_cpu that way), nor a
 * test of fp32 ops_cuda (tests/test_cuda_kernels.c), nor a benchmark.
 * Without CUDA in the build it prints one skip line; without a GPU, one skip line per op group.
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
#define TOL_F32 1e-3
#define TOL_FP32_OPS 1e-4 /* inherited fp32 ops (adamw, scale): as tests/test_cuda_kernels.c */

static const ops_t *D;                  /* backend under test: ops_cuda_bf16 */
static const ops_t *const R = &ops_cpu; /* reference */

/* ---- helpers -------------------------------------------------------------------------------- */

static uint64_t rng_state = 0x13198A2E03707344ull;
static uint64_t rng_next(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float frand(void) { return (float)((double)(rng_next() >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0); }

/* the documented conversion: round to nearest, ties to even; NaN -> quiet NaN */
static uint16_t f2b(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float b2f(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static float bround(float f) { return b2f(f2b(f)); }

static void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        printf("FAIL cuda_bf16_harness: host malloc of %zu bytes\n", bytes);
        exit(1);
    }
    return p;
}
/* n random values in [-scale, scale], already rounded to bf16 (so both backends see them exactly) */
static float *rnd(size_t n, float scale) {
    float *p = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = bround(scale * frand());
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
        printf("FAIL cuda_bf16_harness: dev_alloc of %zu bytes returned NULL\n", bytes);
        exit(1);
    }
    if (h) D->from_host(d, h, bytes);
    return d;
}
/* fp32 device copy of a host array */
static float *devf(const float *h, size_t n) { return dbytes(h, n * sizeof(float)); }
/* bf16 device copy of a host array (typed float*, as ops_t passes it) */
static float *devb(const float *h, size_t n) {
    uint16_t *b = xmalloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) b[i] = f2b(h[i]);
    float *d = dbytes(b, n * sizeof(uint16_t));
    free(b);
    return d;
}
/* device buffers of NaN: an output that is not written shows */
static float *devf_nan(size_t n) {
    float *h = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = NAN;
    float *d = devf(h, n);
    free(h);
    return d;
}
static float *devb_nan(size_t n) {
    uint16_t *b = xmalloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) b[i] = 0x7fc0u;
    float *d = dbytes(b, n * sizeof(uint16_t));
    free(b);
    return d;
}
static void setb(float *d, const float *h, size_t n) { /* overwrite a bf16 device buffer */
    uint16_t *b = xmalloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) b[i] = f2b(h[i]);
    D->from_host(d, b, n * sizeof(uint16_t));
    free(b);
}
static float *getb(const float *d, size_t n) { /* bf16 device buffer -> host floats */
    uint16_t *b = xmalloc(n * sizeof(uint16_t));
    D->to_host(b, d, n * sizeof(uint16_t));
    float *h = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = b2f(b[i]);
    free(b);
    return h;
}
static float *getf(const float *d, size_t n) {
    float *h = xmalloc(n * sizeof(float));
    D->to_host(h, d, n * sizeof(float));
    return h;
}

static int cmp_host(const char *name, const float *got, const float *want, size_t n, double tol) {
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
    return ok;
}
/* compare a bf16 (cmpb) or fp32 (cmpf) device array with a host reference */
static int cmpb(const char *name, const float *d, const float *want, size_t n, double tol) {
    float *got = getb(d, n);
    int ok = cmp_host(name, got, want, n, tol);
    free(got);
    return ok;
}
static int cmpf(const char *name, const float *d, const float *want, size_t n, double tol) {
    float *got = getf(d, n);
    int ok = cmp_host(name, got, want, n, tol);
    free(got);
    return ok;
}

static void nm2(char *buf, size_t len, const char *op, const char *cfg) { snprintf(buf, len, "%s %s", op, cfg); }

/* ---- matmul: bf16 in/out with fp32 accumulation; dw fp32 ------------------------------------ */

static void test_matmul_case(int N, int Cin, int Cout) {
    char cfg[64], nm[256];
    snprintf(cfg, sizeof cfg, "N%d Cin%d Cout%d", N, Cin, Cout);
    const size_t ni = (size_t)N * Cin, nw = (size_t)Cout * Cin, no = (size_t)N * Cout;
    float *in = rnd(ni, 1.0f), *w = rnd(nw, 1.0f), *out0 = rnd(no, 1.0f), *dout = rnd(no, 1.0f);
    float *din0 = rnd(ni, 1.0f), *dw0 = rnd(nw, 1.0f);
    float *d_in = devb(in, ni), *d_w = devb(w, nw), *d_dout = devb(dout, no);
    float *want = hcopy(out0, no), *d_out = devb_nan(no); /* beta = 0 must not read the NaNs */
    R->matmul_forward(want, in, w, N, Cin, Cout, 0);
    D->matmul_forward(d_out, d_in, d_w, N, Cin, Cout, 0);
    nm2(nm, sizeof nm, "cuda_bf16_matmul_forward", cfg);
    cmpb(nm, d_out, want, no, TOL_BF);
    memcpy(want, out0, no * sizeof(float));
    setb(d_out, out0, no);
    R->matmul_forward(want, in, w, N, Cin, Cout, 1);
    D->matmul_forward(d_out, d_in, d_w, N, Cin, Cout, 1);
    nm2(nm, sizeof nm, "cuda_bf16_matmul_forward_accumulate", cfg);
    cmpb(nm, d_out, want, no, TOL_BF);
    for (int mode = 0; mode < 3; mode++) {
        float *wdin = hcopy(din0, ni), *wdw = hcopy(dw0, nw);
        float *d_din = devb(din0, ni), *d_dw = devf(dw0, nw);
        R->matmul_backward(mode == 2 ? NULL : wdin, mode == 1 ? NULL : wdw, dout, in, w, N, Cin, Cout);
        D->matmul_backward(mode == 2 ? NULL : d_din, mode == 1 ? NULL : d_dw, d_dout, d_in, d_w, N, Cin, Cout);
        static const char *const tag[3] = {"", " (dw NULL)", " (din NULL)"};
        char c2[160];
        snprintf(c2, sizeof c2, "%s%s", cfg, tag[mode]);
        nm2(nm, sizeof nm, "cuda_bf16_matmul_backward_din", c2);
        cmpb(nm, d_din, wdin, ni, TOL_BF);
        nm2(nm, sizeof nm, "cuda_bf16_matmul_backward_dw", c2);
        cmpf(nm, d_dw, wdw, nw, TOL_F32);
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

/* ---- embedding: table bf16 -> out bf16 (a copy: exact); dtable fp32 --------------------------- */

static void test_embedding(void) {
    const int N = 64, C = 40, v_start = 10, v_count = 25;
    int32_t tok[64];
    for (int n = 0; n < N; n++) tok[n] = (int32_t)(rng_next() % 50); /* some below, some above the shard */
    tok[0] = tok[1] = 12;                                             /* a repeated owned token */
    const size_t nt = (size_t)v_count * C, no = (size_t)N * C;
    float *table = rnd(nt, 1.0f), *dout = rnd(no, 1.0f), *dt0 = rnd(nt, 1.0f);
    int32_t *d_tok = dbytes(tok, sizeof tok);
    float *d_table = devb(table, nt), *d_dout = devb(dout, no);
    float *want = xmalloc(no * sizeof(float)), *d_out = devb_nan(no);
    R->embedding_forward(want, tok, table, N, C, v_start, v_count);
    D->embedding_forward(d_out, d_tok, d_table, N, C, v_start, v_count);
    cmpb("cuda_bf16_embedding_forward", d_out, want, no, 0.0);
    float *wdt = hcopy(dt0, nt), *d_dt = devf(dt0, nt);
    R->embedding_backward(wdt, dout, tok, N, C, v_start, v_count);
    D->embedding_backward(d_dt, d_dout, d_tok, N, C, v_start, v_count);
    cmpf("cuda_bf16_embedding_backward", d_dt, wdt, nt, TOL_F32);
    D->embedding_backward(NULL, d_dout, d_tok, N, C, v_start, v_count); /* skipped, must not crash */
    D->synchronize();
    free(table); free(dout); free(dt0); free(want); free(wdt);
    D->dev_free(d_tok); D->dev_free(d_table); D->dev_free(d_dout); D->dev_free(d_out); D->dev_free(d_dt);
}

/* ---- rmsnorm: x, w, out, dx bf16; rstd, dw fp32 ------------------------------------------------- */

static void test_rmsnorm_case(int N, int C) {
    char cfg[64], nm[256];
    snprintf(cfg, sizeof cfg, "N%d C%d", N, C);
    const size_t n = (size_t)N * C;
    const float eps = 1e-5f;
    float *x = rnd(n, 3.0f), *w = rnd((size_t)C, 1.0f), *dout = rnd(n, 1.0f), *dx0 = rnd(n, 1.0f),
          *dw0 = rnd((size_t)C, 1.0f);
    float *out = xmalloc(n * sizeof(float)), *rstd = xmalloc((size_t)N * sizeof(float));
    float *d_x = devb(x, n), *d_w = devb(w, (size_t)C), *d_dout = devb(dout, n);
    float *d_out = devb_nan(n), *d_rstd = devf_nan((size_t)N);
    R->rmsnorm_forward(out, rstd, x, w, N, C, eps);
    D->rmsnorm_forward(d_out, d_rstd, d_x, d_w, N, C, eps);
    nm2(nm, sizeof nm, "cuda_bf16_rmsnorm_forward", cfg);
    cmpb(nm, d_out, out, n, TOL_BF);
    nm2(nm, sizeof nm, "cuda_bf16_rmsnorm_rstd", cfg);
    cmpf(nm, d_rstd, rstd, (size_t)N, TOL_F32);
    D->from_host(d_rstd, rstd, (size_t)N * sizeof(float)); /* backward from the reference rstd */
    for (int mode = 0; mode < 2; mode++) {
        float *wdx = hcopy(dx0, n), *wdw = hcopy(dw0, (size_t)C);
        float *d_dx = devb(dx0, n), *d_dw = devf(dw0, (size_t)C);
        R->rmsnorm_backward(mode ? NULL : wdx, wdw, dout, x, w, rstd, N, C);
        D->rmsnorm_backward(mode ? NULL : d_dx, d_dw, d_dout, d_x, d_w, d_rstd, N, C);
        char c2[160];
        snprintf(c2, sizeof c2, "%s%s", cfg, mode ? " (dx NULL)" : "");
        nm2(nm, sizeof nm, "cuda_bf16_rmsnorm_backward_dx", c2);
        cmpb(nm, d_dx, wdx, n, TOL_BF);
        nm2(nm, sizeof nm, "cuda_bf16_rmsnorm_backward_dw", c2);
        cmpf(nm, d_dw, wdw, (size_t)C, TOL_F32);
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

/* ---- rope: bf16 in and out, fp32 rotation ----------------------------------------------------- */

static void test_rope_case(int B, int T, int nh, int hd, float theta) {
    char cfg[96], nm[256];
    snprintf(cfg, sizeof cfg, "B%d T%d nh%d hd%d theta%g", B, T, nh, hd, (double)theta);
    const size_t n = (size_t)B * T * nh * hd;
    float *x = rnd(n, 1.0f), *want = xmalloc(n * sizeof(float));
    float *d_x = devb(x, n), *d_out = devb_nan(n);
    R->rope_forward(want, x, B, T, nh, hd, theta);
    D->rope_forward(d_out, d_x, B, T, nh, hd, theta);
    nm2(nm, sizeof nm, "cuda_bf16_rope_forward", cfg);
    cmpb(nm, d_out, want, n, TOL_BF);
    D->rope_forward(d_x, d_x, B, T, nh, hd, theta);
    nm2(nm, sizeof nm, "cuda_bf16_rope_forward_inplace", cfg);
    cmpb(nm, d_x, want, n, TOL_BF);
    setb(d_x, x, n);
    R->rope_backward(want, x, B, T, nh, hd, theta);
    D->rope_backward(d_out, d_x, B, T, nh, hd, theta);
    nm2(nm, sizeof nm, "cuda_bf16_rope_backward", cfg);
    cmpb(nm, d_out, want, n, TOL_BF);
    D->rope_backward(d_x, d_x, B, T, nh, hd, theta);
    nm2(nm, sizeof nm, "cuda_bf16_rope_backward_inplace", cfg);
    cmpb(nm, d_x, want, n, TOL_BF);
    free(x); free(want);
    D->dev_free(d_x); D->dev_free(d_out);
}

static void test_rope(void) {
    test_rope_case(2, 37, 3, 64, 10000.0f);
    test_rope_case(1, 300, 2, 128, 500000.0f);
    test_rope_case(1, 5, 2, 7, 10000.0f); /* odd hd: the last element passes through */
}

/* ---- attention: q, k, v, out, dout, dq, dk, dv bf16; lse fp32 ---------------------------------- */

static void test_attention_case(int B, int T, int H, int KV, int hd) {
    char cfg[96], nm[256];
    snprintf(cfg, sizeof cfg, "B%d T%d H%d KV%d hd%d", B, T, H, KV, hd);
    const size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, nl = (size_t)B * H * T;
    const size_t nws = attention_ws_floats(T);
    float *q = rnd(nq, 1.5f), *k = rnd(nk, 1.5f), *v = rnd(nk, 1.0f), *dout = rnd(nq, 1.0f);
    float *dq0 = rnd(nq, 1.0f), *dk0 = rnd(nk, 1.0f), *dv0 = rnd(nk, 1.0f);
    float *out = xmalloc(nq * sizeof(float)), *lse = xmalloc(nl * sizeof(float)), *ws = xmalloc(nws * sizeof(float));
    float *d_q = devb(q, nq), *d_k = devb(k, nk), *d_v = devb(v, nk), *d_dout = devb(dout, nq);
    float *d_out = devb_nan(nq), *d_lse = devf_nan(nl);
    R->attention_forward(out, lse, ws, q, k, v, B, T, H, KV, hd);
    D->attention_forward(d_out, d_lse, NULL, d_q, d_k, d_v, B, T, H, KV, hd); /* ws: ignored */
    nm2(nm, sizeof nm, "cuda_bf16_attention_forward", cfg);
    cmpb(nm, d_out, out, nq, TOL_BF);
    nm2(nm, sizeof nm, "cuda_bf16_attention_lse", cfg);
    cmpf(nm, d_lse, lse, nl, TOL_F32);
    /* backward from the reference out (rounded to bf16, as the bf16 engine keeps it) and lse on
       both sides, into non-zero gradients */
    for (size_t i = 0; i < nq; i++) out[i] = bround(out[i]);
    setb(d_out, out, nq);
    D->from_host(d_lse, lse, nl * sizeof(float));
    for (int mode = 0; mode < 2; mode++) {
        float *wdq = hcopy(dq0, nq), *wdk = hcopy(dk0, nk), *wdv = hcopy(dv0, nk);
        float *d_dq = devb(dq0, nq), *d_dk = devb(dk0, nk), *d_dv = devb(dv0, nk);
        if (mode == 0) {
            R->attention_backward(wdq, wdk, wdv, ws, dout, out, lse, q, k, v, B, T, H, KV, hd);
            D->attention_backward(d_dq, d_dk, d_dv, NULL, d_dout, d_out, d_lse, d_q, d_k, d_v, B, T, H, KV, hd);
        } else { /* dq only, then dv only: each kernel on its own, the other gradients untouched */
            R->attention_backward(wdq, NULL, NULL, ws, dout, out, lse, q, k, v, B, T, H, KV, hd);
            R->attention_backward(NULL, NULL, wdv, ws, dout, out, lse, q, k, v, B, T, H, KV, hd);
            D->attention_backward(d_dq, NULL, NULL, NULL, d_dout, d_out, d_lse, d_q, d_k, d_v, B, T, H, KV, hd);
            D->attention_backward(NULL, NULL, d_dv, NULL, d_dout, d_out, d_lse, d_q, d_k, d_v, B, T, H, KV, hd);
        }
        char c2[160];
        snprintf(c2, sizeof c2, "%s%s", cfg, mode ? " (separately)" : "");
        nm2(nm, sizeof nm, "cuda_bf16_attention_backward_dq", c2);
        cmpb(nm, d_dq, wdq, nq, TOL_BF);
        nm2(nm, sizeof nm, "cuda_bf16_attention_backward_dk", c2);
        cmpb(nm, d_dk, wdk, nk, TOL_BF);
        nm2(nm, sizeof nm, "cuda_bf16_attention_backward_dv", c2);
        cmpb(nm, d_dv, wdv, nk, TOL_BF);
        free(wdq); free(wdk); free(wdv);
        D->dev_free(d_dq); D->dev_free(d_dk); D->dev_free(d_dv);
    }
    free(q); free(k); free(v); free(dout); free(dq0); free(dk0); free(dv0); free(out); free(lse); free(ws);
    D->dev_free(d_q); D->dev_free(d_k); D->dev_free(d_v); D->dev_free(d_dout); D->dev_free(d_out);
    D->dev_free(d_lse);
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

/* ---- swiglu ---------------------------------------------------------------------------------- */

static void test_swiglu(void) {
    const size_t n = 100003;
    float *g = rnd(n, 10.0f), *u = rnd(n, 1.0f), *dout = rnd(n, 1.0f), *dg0 = rnd(n, 1.0f), *du0 = rnd(n, 1.0f);
    float *out = xmalloc(n * sizeof(float));
    float *d_g = devb(g, n), *d_u = devb(u, n), *d_dout = devb(dout, n), *d_out = devb_nan(n);
    R->swiglu_forward(out, g, u, n);
    D->swiglu_forward(d_out, d_g, d_u, n);
    cmpb("cuda_bf16_swiglu_forward", d_out, out, n, TOL_BF);
    /* rounding to nearest: the mean signed relative error of the stored magnitudes is about 0
       (|mean| ~ 1e-5 here); truncation would make it about -3e-3 */
    float *got = getb(d_out, n);
    double bias = 0.0;
    size_t cnt = 0;
    for (size_t i = 0; i < n; i++)
        if (fabsf(out[i]) > 1e-6f) {
            bias += (fabs((double)got[i]) - fabs((double)out[i])) / fabs((double)out[i]);
            cnt++;
        }
    bias = cnt ? bias / (double)cnt : 1.0;
    CHECK(fabs(bias) < 3e-4, "cuda_bf16_store_rounds_to_nearest", "mean signed relative error %.3g over %zu values",
          bias, cnt);
    free(got);
    static const char *const tag[3][2] = {
        {"cuda_bf16_swiglu_backward_dgate", "cuda_bf16_swiglu_backward_dup"},
        {"cuda_bf16_swiglu_backward_dgate (dup NULL)", "cuda_bf16_swiglu_backward_dup (dup NULL)"},
        {"cuda_bf16_swiglu_backward_dgate (dgate NULL)", "cuda_bf16_swiglu_backward_dup (dgate NULL)"}};
    for (int mode = 0; mode < 3; mode++) {
        float *wdg = hcopy(dg0, n), *wdu = hcopy(du0, n), *d_dg = devb(dg0, n), *d_du = devb(du0, n);
        R->swiglu_backward(mode == 2 ? NULL : wdg, mode == 1 ? NULL : wdu, dout, g, u, n);
        D->swiglu_backward(mode == 2 ? NULL : d_dg, mode == 1 ? NULL : d_du, d_dout, d_g, d_u, n);
        cmpb(tag[mode][0], d_dg, wdg, n, TOL_BF);
        cmpb(tag[mode][1], d_du, wdu, n, TOL_BF);
        free(wdg); free(wdu);
        D->dev_free(d_dg); D->dev_free(d_du);
    }
    free(g); free(u); free(dout); free(dg0); free(du0); free(out);
    D->dev_free(d_g); D->dev_free(d_u); D->dev_free(d_dout); D->dev_free(d_out);
}

/* ---- cross-entropy: logits and dlogits bf16, statistics fp32 ------------------------------------ */

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
    float *d_logits = devb(logits, nl), *d_mx = devf_nan((size_t)N), *d_se = devf_nan((size_t)N);
    float *d_tl = devf_nan((size_t)N), *d_loss = devf_nan((size_t)N), *d_dl = devb_nan(nl);
    int32_t *d_tgt = dbytes(tgt, (size_t)N * sizeof(int32_t));

    R->ce_rowmax(mx, logits, N, Vloc, v_valid);
    D->ce_rowmax(d_mx, d_logits, N, Vloc, v_valid);
    nm2(nm, sizeof nm, "cuda_bf16_ce_rowmax", cfg);
    cmpf(nm, d_mx, mx, (size_t)N, TOL_F32);
    if (nv == 0) goto done; /* the rest needs a finite max */
    D->from_host(d_mx, mx, (size_t)N * sizeof(float));
    R->ce_sumexp(se, logits, mx, N, Vloc, v_valid);
    D->ce_sumexp(d_se, d_logits, d_mx, N, Vloc, v_valid);
    nm2(nm, sizeof nm, "cuda_bf16_ce_sumexp", cfg);
    cmpf(nm, d_se, se, (size_t)N, TOL_F32);
    D->from_host(d_se, se, (size_t)N * sizeof(float));
    R->ce_target(tl, logits, tgt, N, Vloc, v_start);
    D->ce_target(d_tl, d_logits, d_tgt, N, Vloc, v_start);
    nm2(nm, sizeof nm, "cuda_bf16_ce_target", cfg);
    cmpf(nm, d_tl, tl, (size_t)N, TOL_F32);
    D->from_host(d_tl, tl, (size_t)N * sizeof(float));
    R->ce_loss(loss, mx, se, tl, N);
    D->ce_loss(d_loss, d_mx, d_se, d_tl, N);
    nm2(nm, sizeof nm, "cuda_bf16_ce_loss", cfg);
    cmpf(nm, d_loss, loss, (size_t)N, TOL_F32);
    const float scale = 1.0f / 37.0f;
    R->ce_backward(dl, logits, mx, se, tgt, scale, N, Vloc, v_start, v_valid);
    D->ce_backward(d_dl, d_logits, d_mx, d_se, d_tgt, scale, N, Vloc, v_start, v_valid);
    nm2(nm, sizeof nm, "cuda_bf16_ce_backward", cfg);
    cmpb(nm, d_dl, dl, nl, TOL_BF);
    D->ce_backward(d_logits, d_logits, d_mx, d_se, d_tgt, scale, N, Vloc, v_start, v_valid); /* aliased */
    nm2(nm, sizeof nm, "cuda_bf16_ce_backward_inplace", cfg);
    cmpb(nm, d_logits, dl, nl, TOL_BF);
done:
    free(logits); free(tgt); free(mx); free(se); free(tl); free(loss); free(dl);
    D->dev_free(d_logits); D->dev_free(d_mx); D->dev_free(d_se); D->dev_free(d_tl); D->dev_free(d_loss);
    D->dev_free(d_dl); D->dev_free(d_tgt);
}

static void test_ce(void) {
    test_ce_case(20, 50, 43, 100);  /* 7 padding columns */
    test_ce_case(9, 1000, 1000, 0); /* no padding, wide rows */
    test_ce_case(5, 30, 40, 7);     /* v_valid past Vloc: clamped */
    test_ce_case(4, 16, 0, 64);     /* a shard of padding only: max is -inf */
}

/* ---- the fp32 ops the table keeps: adamw, scale_inplace, sumsq --------------------------------- */

static void test_fp32_ops(void) {
    const size_t n = 10007;
    float *p = rnd(n, 1.0f), *g = rnd(n, 1e-2f), *m = rnd(n, 1e-3f), *v = rnd(n, 1e-4f);
    for (size_t i = 0; i < n; i++) { /* fp32 values that are not bf16: an fp32 op must keep their bits */
        p[i] += 1e-5f * frand();
        v[i] = fabsf(v[i]);
    }
    float *d_p = devf(p, n), *d_g = devf(g, n), *d_m = devf(m, n), *d_v = devf(v, n);
    const float lr = 3e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
    const float bc1 = 1.0f - powf(b1, 3.0f), bc2 = 1.0f - powf(b2, 3.0f);
    R->adamw(p, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2);
    D->adamw(d_p, d_g, d_m, d_v, n, lr, b1, b2, eps, wd, bc1, bc2);
    cmpf("cuda_bf16_adamw_param (fp32)", d_p, p, n, TOL_FP32_OPS);
    cmpf("cuda_bf16_adamw_m (fp32)", d_m, m, n, TOL_FP32_OPS);
    cmpf("cuda_bf16_adamw_v (fp32)", d_v, v, n, TOL_FP32_OPS);
    R->scale_inplace(p, -0.37f, n);
    D->scale_inplace(d_p, -0.37f, n);
    cmpf("cuda_bf16_scale_inplace (fp32)", d_p, p, n, TOL_FP32_OPS);
    const double want = R->sumsq(p, n), got = D->sumsq(d_p, n);
    CHECK(isfinite(got) && fabs(got - want) <= 1e-9 * fabs(want), "cuda_bf16_sumsq (fp32)", "got %.17g want %.17g",
          got, want);
    free(p); free(g); free(m); free(v);
    D->dev_free(d_p); D->dev_free(d_g); D->dev_free(d_m); D->dev_free(d_v);
}

/* ---- add_inplace (bf16), to_compute, cbytes, memory ---------------------------------------------- */

static void test_helpers(void) {
    CHECK(D->cbytes == 2, "cuda_bf16_cbytes", "cbytes %zu, want 2", D->cbytes);
    CHECK(strcmp(D->name, "cuda_bf16") == 0, "cuda_bf16_name", "name '%s'", D->name);
    const size_t n = 300007;
    float *x = rnd(n, 2.0f), *y = rnd(n, 1.0f);
    float *d_x = devb(x, n), *d_y = devb(y, n);
    R->add_inplace(y, x, n);
    D->add_inplace(d_y, d_x, n);
    cmpb("cuda_bf16_add_inplace", d_y, y, n, TOL_BF);

    /* to_compute: bit-exact round to nearest even, over random values and the hard cases */
    const size_t nc = 4099;
    float *src = xmalloc(nc * sizeof(float));
    for (size_t i = 0; i < nc; i++) src[i] = 100.0f * frand() * frand(); /* not bf16-rounded */
    const uint32_t special[] = {
        0x3f808000u, /* 1 + 2^-8: a tie, rounds down to even 1.0 */
        0x3f818000u, /* a tie rounding up to even */
        0x3f808001u, /* just above a tie: up */
        0xbf808000u, /* negative tie */
        0x7f7fffffu, /* FLT_MAX: rounds to +inf */
        0x7f800000u, 0xff800000u, /* +-inf */
        0x7fc00000u, 0xffc00001u, 0x7f800001u, /* NaNs (the last a signalling one) */
        0x00000001u, 0x807fffffu, /* subnormals */
        0x00000000u, 0x80000000u, /* +-0 */
    };
    const size_t ns = sizeof special / sizeof special[0];
    for (size_t i = 0; i < ns; i++) memcpy(&src[i], &special[i], 4);
    float *d_src = devf(src, nc), *d_dst = devb_nan(nc);
    D->to_compute(d_dst, d_src, nc);
    D->to_compute(d_dst, d_src, 0); /* nothing, must not crash */
    uint16_t *bits = xmalloc(nc * sizeof(uint16_t));
    D->to_host(bits, d_dst, nc * sizeof(uint16_t));
    size_t bad = nc;
    for (size_t i = 0; i < nc && bad == nc; i++)
        if (bits[i] != f2b(src[i])) bad = i;
    CHECK(bad == nc, "cuda_bf16_to_compute_exact", "element %zu: 0x%04x, want 0x%04x (from %.9g)", bad,
          bad < nc ? bits[bad] : 0u, bad < nc ? f2b(src[bad]) : 0u, bad < nc ? (double)src[bad] : 0.0);

    /* memory ops are byte-based: an odd number of bf16 elements, copy and zero */
    float *d_c = devb_nan(nc);
    D->copy(d_c, d_dst, nc * sizeof(uint16_t));
    uint16_t *cb = xmalloc(nc * sizeof(uint16_t));
    D->to_host(cb, d_c, nc * sizeof(uint16_t));
    CHECK(memcmp(cb, bits, nc * sizeof(uint16_t)) == 0, "cuda_bf16_copy_bytes", "copy of %zu bf16 differs", nc);
    D->zero(d_c, 3 * sizeof(uint16_t));
    D->to_host(cb, d_c, nc * sizeof(uint16_t));
    CHECK(cb[0] == 0 && cb[1] == 0 && cb[2] == 0 && cb[3] == bits[3], "cuda_bf16_zero_bytes",
          "zero of 6 bytes: %04x %04x %04x %04x", cb[0], cb[1], cb[2], cb[3]);
    free(x); free(y); free(src); free(bits); free(cb);
    D->dev_free(d_x); D->dev_free(d_y); D->dev_free(d_src); D->dev_free(d_dst); D->dev_free(d_c);
}

static const char *const groups[] = {"cuda_bf16_matmul", "cuda_bf16_embedding", "cuda_bf16_rmsnorm",
                                     "cuda_bf16_rope",   "cuda_bf16_attention", "cuda_bf16_swiglu",
                                     "cuda_bf16_ce",     "cuda_bf16_fp32_ops",  "cuda_bf16_helpers"};
#endif /* MESHSWEEP_CUDA */

int main(void) {
#ifndef MESHSWEEP_CUDA
    SKIP("cuda_bf16_kernels", "built without CUDA");
    return check_exit();
#else
    /* referencing the table makes the link fail if ops_cuda_bf16.cu is missing from the library */
    printf("# backend under test: %s (cbytes %zu)\n", ops_cuda_bf16.name, ops_cuda_bf16.cbytes);
    if (cuda_device_count() == 0) {
        for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) SKIP(groups[i], "no GPU");
        return check_exit();
    }
    char err[256];
    if (cuda_select_device(0, err, sizeof err) != 0) {
        printf("FAIL cuda_bf16_select_device: %s\n", err);
        return 1;
    }
    const char *name = cuda_device_name();
    printf("# device: %s\n", name);
    D = &ops_cuda_bf16;
    test_matmul();
    test_embedding();
    test_rmsnorm();
    test_rope();
    /* the emulator (kernels/cuda/cuda_emu.cuh) runs one host thread per CUDA thread: skip the
       largest attention case there */
    test_attention(strcmp(name, "emulated device") == 0);
    test_swiglu();
    test_ce();
    test_fp32_ops();
    test_helpers();
    return check_exit();
#endif
}
