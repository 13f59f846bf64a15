/* tests/cuda_check.h — the harness shared by tests/test_cuda_kernels.c (ops_cuda, fp32) and
 * tests/test_cuda_bf16.c (ops_cuda_bf16): random inputs, device copies, the comparison metric
 * max_i |got−want| / (|want| + rms(want)) (any NaN fails), and the op tests both tables have —
 * matmul (and its fp32-output form), embedding, rmsnorm, rope, attention, swiglu, cross-entropy on
 * fp32 logits — written once against a precision description (ck_prec): how a compute-precision buffer is made and read, what inputs are
 * rounded to, and the tolerance of each kind of output. Each test program defines CK_SEED before
 * including this file, one ck_prec, and sets P and D before the first test. Not here: the tests one
 * table alone has (fp32: adamw, helpers, memory, the bf16 GEMM path; bf16: to_compute, the fp32 ops)
 * and each program's main. */
#ifndef MESHSWEEP_CUDA_CHECK_H
#define MESHSWEEP_CUDA_CHECK_H
#include "kernels/kernels.h"
#include "tests/check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How the backend under test stores compute-precision values, and the tolerances. Outputs are of two
 * kinds: compute precision (c: activations and activation gradients) and fp32 (f: statistics such as
 * rstd, lse and the CE sums, and weight gradients). _ew: element-wise results, _mm: long sums
 * (GEMM, attention, dw over rows), _copy: the embedding forward, a copy. */
typedef struct ck_prec {
    const char *prefix;                              /* check names: "cuda_" or "cuda_bf16_" */
    float (*round)(float);                           /* what inputs are rounded to (fp32: unchanged) */
    float *(*dev_c)(const float *h, size_t n);       /* compute-precision device copy of host floats */
    float *(*dev_c_nan)(size_t n);                   /* compute-precision device buffer of NaN */
    void (*set_c)(float *d, const float *h, size_t n); /* overwrite a compute-precision device buffer */
    float *(*get_c)(const float *d, size_t n);       /* host floats of a compute-precision buffer */
    double tol_c_ew, tol_c_mm, tol_c_copy, tol_f_ew, tol_f_mm;
    void (*swiglu_extra)(const float *d_out, const float *want, size_t n); /* extra check, or NULL */
} ck_prec;

static const ck_prec *P;                 /* precision of the backend under test */
static const ops_t *D;                   /* backend under test */
static const ops_t *const R = &ops_cpu;  /* reference */

/* ---- helpers -------------------------------------------------------------------------------- */

static uint64_t rng_state = CK_SEED;
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
        printf("FAIL %sharness: host malloc of %zu bytes\n", P ? P->prefix : "cuda_", bytes);
        exit(1);
    }
    return p;
}
/* n random values in [-scale, scale], rounded to what the backend stores (so both see them exactly) */
static float *rnd(size_t n, float scale) {
    float *p = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = P->round(scale * frand());
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
        printf("FAIL %sharness: dev_alloc of %zu bytes returned NULL\n", P ? P->prefix : "cuda_", bytes);
        exit(1);
    }
    if (h) D->from_host(d, h, bytes);
    return d;
}
/* fp32 device copy of a host array; an fp32 device buffer of NaN (an output not written shows) */
static float *devf(const float *h, size_t n) { return dbytes(h, n * sizeof(float)); }
static float *devf_nan(size_t n) {
    float *h = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = NAN;
    float *d = devf(h, n);
    free(h);
    return d;
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
/* compare an fp32 (cmpf) or compute-precision (cmpc) device array with a host reference; 1 when
 * within tolerance */
static int cmpf(const char *name, const float *d, const float *want, size_t n, double tol) {
    float *got = getf(d, n);
    int ok = cmp_host(name, got, want, n, tol);
    free(got);
    return ok;
}
static int cmpc(const char *name, const float *d, const float *want, size_t n, double tol) {
    float *got = P->get_c(d, n);
    int ok = cmp_host(name, got, want, n, tol);
    free(got);
    return ok;
}

/* check name: prefix, op and (unless NULL) the configuration */
static void name_of(char *buf, size_t len, const char *op, const char *cfg) {
    if (cfg) snprintf(buf, len, "%s%s %s", P->prefix, op, cfg);
    else snprintf(buf, len, "%s%s", P->prefix, op);
}

/* one AdamW step (t = 3) of host p, g, m, v (updated to the reference result) and their fp32 device
 * copies; checks PREFIXadamw_{param,m,v}SUFFIX */
static void ck_adamw(float *p, const float *g, float *m, float *v, float *d_p, const float *d_g, float *d_m, float *d_v,
                     size_t n, const char *suffix, double tol) {
    const float lr = 3e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
    const float bc1 = 1.0f - powf(b1, 3.0f), bc2 = 1.0f - powf(b2, 3.0f);
    R->adamw(p, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2);
    D->adamw(d_p, d_g, d_m, d_v, n, lr, b1, b2, eps, wd, bc1, bc2);
    static const char *const what[3] = {"param", "m", "v"};
    const float *dev_of[3] = {d_p, d_m, d_v}, *host_of[3] = {p, m, v};
    for (int k = 0; k < 3; k++) {
        char nm[128];
        snprintf(nm, sizeof nm, "%sadamw_%s%s", P->prefix, what[k], suffix);
        cmpf(nm, dev_of[k], host_of[k], n, tol);
    }
}

/* the engine's fused step (adamw_fused: the clipping scale inside, the new parameters also into a
 * compute-precision copy, the gradient zeroed) against the reference composition scale_inplace +
 * adamw; the copy must be exactly the device's new parameters rounded to compute precision. off = 1
 * starts every array one element into its allocation (not 16-byte aligned: the 1-element path);
 * n odd leaves a tail after the 8-element vectors. Checks PREFIXadamw_fused_{param,m,v,copy,grad}SUFFIX. */
static void ck_adamw_fused(size_t n, int off, double tol) {
    const float lr = 3e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gscale = 0.61f;
    const float bc1 = 1.0f - powf(b1, 3.0f), bc2 = 1.0f - powf(b2, 3.0f);
    float *p = rnd(n, 1.0f), *g = rnd(n, 1e-2f), *m = rnd(n, 1e-3f), *v = rnd(n, 1e-4f);
    for (size_t i = 0; i < n; i++) { /* fp32 values that are not bf16 */
        p[i] += 1e-5f * frand();
        v[i] = fabsf(v[i]);
    }
    float *b_p = devf(NULL, n + 1), *b_g = devf(NULL, n + 1), *b_m = devf(NULL, n + 1), *b_v = devf(NULL, n + 1);
    float *b_pc = P->dev_c_nan(n + 1);
    float *d_p = b_p + off, *d_g = b_g + off, *d_m = b_m + off, *d_v = b_v + off;
    float *d_pc = (float *)((char *)b_pc + (size_t)off * D->cbytes);
    D->from_host(d_p, p, n * 4); D->from_host(d_g, g, n * 4); D->from_host(d_m, m, n * 4); D->from_host(d_v, v, n * 4);
    R->scale_inplace(g, gscale, n);
    R->adamw(p, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2);
    D->adamw_fused(d_p, d_pc, d_g, d_m, d_v, n, gscale, 1, lr, b1, b2, eps, wd, bc1, bc2);
    const char *suffix = off ? " (unaligned)" : "";
    static const char *const what[3] = {"param", "m", "v"};
    const float *dev_of[3] = {d_p, d_m, d_v}, *host_of[3] = {p, m, v};
    char nm[128];
    for (int k = 0; k < 3; k++) {
        snprintf(nm, sizeof nm, "%sadamw_fused_%s%s", P->prefix, what[k], suffix);
        cmpf(nm, dev_of[k], host_of[k], n, tol);
    }
    float *np = getf(d_p, n), *gz = getf(d_g, n);
    for (size_t i = 0; i < n; i++) np[i] = P->round(np[i]);
    snprintf(nm, sizeof nm, "%sadamw_fused_copy%s", P->prefix, suffix);
    cmpc(nm, d_pc, np, n, 0.0);
    size_t nz = 0;
    for (size_t i = 0; i < n; i++) nz += gz[i] != 0.0f;
    snprintf(nm, sizeof nm, "%sadamw_fused_grad_zeroed%s", P->prefix, suffix);
    CHECK(nz == 0, nm, "%zu of %zu gradient elements not zero", nz, n);
    free(p); free(g); free(m); free(v); free(np); free(gz);
    D->dev_free(b_p); D->dev_free(b_g); D->dev_free(b_m); D->dev_free(b_v); D->dev_free(b_pc);
}

/* add_inplace of n compute-precision values against the reference; the host arrays (y: the reference
 * result) and their device copies stay with the caller for further checks */
static void ck_add_inplace(size_t n, float **x, float **y, float **d_x, float **d_y) {
    *x = rnd(n, 2.0f); *y = rnd(n, 1.0f);
    *d_x = P->dev_c(*x, n); *d_y = P->dev_c(*y, n);
    R->add_inplace(*y, *x, n);
    D->add_inplace(*d_y, *d_x, n);
    char nm[128];
    name_of(nm, sizeof nm, "add_inplace", NULL);
    cmpc(nm, *d_y, *y, n, P->tol_c_ew);
}

#ifdef MESHSWEEP_CUDA
#include "kernels/cuda/cuda_backend.h"
/* Select device 0 for the tests: 0 selected (*name: its name), 1 no GPU (one skip line per op group
 * printed), -1 the device could not be selected (one FAIL line printed). */
static int ck_select_device(const char *const *groups, size_t ngroups, const char **name) {
    if (cuda_device_count() == 0) {
        for (size_t i = 0; i < ngroups; i++) SKIP(groups[i], "no GPU");
        return 1;
    }
    char err[256];
    if (cuda_select_device(0, err, sizeof err) != 0) {
        printf("FAIL %sselect_device: %s\n", P->prefix, err);
        return -1;
    }
    *name = cuda_device_name();
    return 0;
}
#endif


/* ---- matmul ------------------------------------------------------------------------------- */

static void test_matmul_case(int N, int Cin, int Cout) {
    char cfg[64], nm[256];
    snprintf(cfg, sizeof cfg, "N%d Cin%d Cout%d", N, Cin, Cout);
    const size_t ni = (size_t)N * Cin, nw = (size_t)Cout * Cin, no = (size_t)N * Cout;
    float *in = rnd(ni, 1.0f), *w = rnd(nw, 1.0f), *out0 = rnd(no, 1.0f), *dout = rnd(no, 1.0f);
    float *din0 = rnd(ni, 1.0f), *dw0 = rnd(nw, 1.0f);
    float *d_in = P->dev_c(in, ni), *d_w = P->dev_c(w, nw), *d_dout = P->dev_c(dout, no);

    /* overwrite: the device output starts as NaN, so reading C with beta = 0 would show */
    float *want = hcopy(out0, no), *d_out = P->dev_c_nan(no);
    R->matmul_forward(want, in, w, N, Cin, Cout, 0);
    D->matmul_forward(d_out, d_in, d_w, N, Cin, Cout, 0);
    name_of(nm, sizeof nm, "matmul_forward", cfg);
    cmpc(nm, d_out, want, no, P->tol_c_mm);
    /* accumulate */
    memcpy(want, out0, no * sizeof(float));
    P->set_c(d_out, out0, no);
    R->matmul_forward(want, in, w, N, Cin, Cout, 1);
    D->matmul_forward(d_out, d_in, d_w, N, Cin, Cout, 1);
    name_of(nm, sizeof nm, "matmul_forward_accumulate", cfg);
    cmpc(nm, d_out, want, no, P->tol_c_mm);
    /* fp32 output of compute-precision operands (the logits): overwrite, fp32 tolerance */
    float *d_out32 = devf_nan(no);
    R->matmul_forward(want, in, w, N, Cin, Cout, 0);
    D->matmul_forward_f32out(d_out32, d_in, d_w, N, Cin, Cout);
    name_of(nm, sizeof nm, "matmul_forward_f32out", cfg);
    cmpf(nm, d_out32, want, no, P->tol_f_mm);
    D->dev_free(d_out32);

    /* backward into non-zero gradients: both, then each alone */
    for (int mode = 0; mode < 3; mode++) {
        float *wdin = hcopy(din0, ni), *wdw = hcopy(dw0, nw);
        float *d_din = P->dev_c(din0, ni), *d_dw = devf(dw0, nw);
        R->matmul_backward(mode == 2 ? NULL : wdin, mode == 1 ? NULL : wdw, dout, in, w, N, Cin, Cout);
        D->matmul_backward(mode == 2 ? NULL : d_din, mode == 1 ? NULL : d_dw, d_dout, d_in, d_w, N, Cin, Cout);
        static const char *const tag[3] = {"", " (dw NULL)", " (din NULL)"};
        char c2[160];
        snprintf(c2, sizeof c2, "%s%s", cfg, tag[mode]);
        name_of(nm, sizeof nm, "matmul_backward_din", c2);
        cmpc(nm, d_din, wdin, ni, P->tol_c_mm); /* unchanged din0 when skipped */
        name_of(nm, sizeof nm, "matmul_backward_dw", c2);
        cmpf(nm, d_dw, wdw, nw, P->tol_f_mm);
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
    char nm[128];
    const int N = 64, C = 40, v_start = 10, v_count = 25;
    int32_t tok[64];
    for (int n = 0; n < N; n++) tok[n] = (int32_t)(rng_next() % 50); /* 0..49: some below, some above */
    tok[0] = tok[1] = 12;                                             /* a repeated owned token */
    const size_t nt = (size_t)v_count * C, no = (size_t)N * C;
    float *table = rnd(nt, 1.0f), *dout = rnd(no, 1.0f), *dt0 = rnd(nt, 1.0f);
    int32_t *d_tok = dbytes(tok, sizeof tok);
    float *d_table = P->dev_c(table, nt), *d_dout = P->dev_c(dout, no);
    float *want = xmalloc(no * sizeof(float)), *d_out = P->dev_c_nan(no);
    R->embedding_forward(want, tok, table, N, C, v_start, v_count);
    D->embedding_forward(d_out, d_tok, d_table, N, C, v_start, v_count);
    name_of(nm, sizeof nm, "embedding_forward", NULL);
    cmpc(nm, d_out, want, no, P->tol_c_copy);
    float *wdt = hcopy(dt0, nt), *d_dt = devf(dt0, nt);
    R->embedding_backward(wdt, dout, tok, N, C, v_start, v_count);
    D->embedding_backward(d_dt, d_dout, d_tok, N, C, v_start, v_count);
    name_of(nm, sizeof nm, "embedding_backward", NULL);
    cmpf(nm, d_dt, wdt, nt, P->tol_f_ew);
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
    float *d_x = P->dev_c(x, n), *d_w = P->dev_c(w, (size_t)C), *d_dout = P->dev_c(dout, n);
    float *d_out = P->dev_c_nan(n), *d_rstd = devf_nan((size_t)N);
    R->rmsnorm_forward(out, rstd, x, w, N, C, eps);
    D->rmsnorm_forward(d_out, d_rstd, d_x, d_w, N, C, eps);
    name_of(nm, sizeof nm, "rmsnorm_forward", cfg);
    cmpc(nm, d_out, out, n, P->tol_c_ew);
    name_of(nm, sizeof nm, "rmsnorm_rstd", cfg);
    cmpf(nm, d_rstd, rstd, (size_t)N, P->tol_f_ew);
    /* backward from the reference rstd on both sides, into non-zero gradients */
    D->from_host(d_rstd, rstd, (size_t)N * sizeof(float));
    for (int mode = 0; mode < 2; mode++) {
        float *wdx = hcopy(dx0, n), *wdw = hcopy(dw0, (size_t)C);
        float *d_dx = P->dev_c(dx0, n), *d_dw = devf(dw0, (size_t)C);
        R->rmsnorm_backward(mode ? NULL : wdx, wdw, dout, x, w, rstd, N, C);
        D->rmsnorm_backward(mode ? NULL : d_dx, d_dw, d_dout, d_x, d_w, d_rstd, N, C);
        char c2[160];
        snprintf(c2, sizeof c2, "%s%s", cfg, mode ? " (dx NULL)" : "");
        name_of(nm, sizeof nm, "rmsnorm_backward_dx", c2);
        cmpc(nm, d_dx, wdx, n, P->tol_c_ew);
        /* dw sums over N rows in another order: GEMM-like tolerance */
        name_of(nm, sizeof nm, "rmsnorm_backward_dw", c2);
        cmpf(nm, d_dw, wdw, (size_t)C, P->tol_f_mm);
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

/* the fp32 cos/sin table (rope_table_fill) of theta^(-2i/hd), every other frequency divided by `scale`
 * (so the table is not one the kernel could recompute from theta): the kernel must read it, not theta */
static float *rope_table(int T, int hd, double theta, double scale) {
    double *f = xmalloc((size_t)(hd / 2 + 1) * sizeof *f);
    float *tab = xmalloc((rope_table_floats(T, hd) + 1) * sizeof *tab);
    for (int i = 0; i < hd / 2; i++) f[i] = pow(theta, -2.0 * i / hd) / (i % 2 ? scale : 1.0);
    rope_table_fill(tab, f, T, hd);
    free(f);
    return tab;
}

static void test_rope_case(int B, int T, int nh, int hd, float theta) {
    char cfg[96], nm[256];
    snprintf(cfg, sizeof cfg, "B%d T%d nh%d hd%d theta%g", B, T, nh, hd, (double)theta);
    const size_t n = (size_t)B * T * nh * hd;
    float *x = rnd(n, 1.0f), *want = xmalloc(n * sizeof(float)), *tab = rope_table(T, hd, theta, 8.0);
    float *d_x = P->dev_c(x, n), *d_out = P->dev_c_nan(n), *d_tab = devf(tab, rope_table_floats(T, hd) + 1);
    R->rope_forward(want, x, tab, B, T, nh, hd);
    D->rope_forward(d_out, d_x, d_tab, B, T, nh, hd);
    name_of(nm, sizeof nm, "rope_forward", cfg);
    cmpc(nm, d_out, want, n, P->tol_c_ew);
    D->rope_forward(d_x, d_x, d_tab, B, T, nh, hd); /* in place */
    name_of(nm, sizeof nm, "rope_forward_inplace", cfg);
    cmpc(nm, d_x, want, n, P->tol_c_ew);
    P->set_c(d_x, x, n);
    R->rope_backward(want, x, tab, B, T, nh, hd);
    D->rope_backward(d_out, d_x, d_tab, B, T, nh, hd);
    name_of(nm, sizeof nm, "rope_backward", cfg);
    cmpc(nm, d_out, want, n, P->tol_c_ew);
    D->rope_backward(d_x, d_x, d_tab, B, T, nh, hd);
    name_of(nm, sizeof nm, "rope_backward_inplace", cfg);
    cmpc(nm, d_x, want, n, P->tol_c_ew);
    free(x); free(want); free(tab);
    D->dev_free(d_x); D->dev_free(d_out); D->dev_free(d_tab);
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
    float *d_q = P->dev_c(q, nq), *d_k = P->dev_c(k, nk), *d_v = P->dev_c(v, nk), *d_dout = P->dev_c(dout, nq);
    /* the device tables' workspace (kernels.h): the backward's D and GQA partials, NaN to start with */
    float *d_out = P->dev_c_nan(nq), *d_lse = devf_nan(nl), *d_ws = devf_nan(attention_flash_ws_floats(B, T, H, KV, hd));
    R->attention_forward(out, lse, ws, q, k, v, B, T, H, KV, hd);
    D->attention_forward(d_out, d_lse, d_ws, d_q, d_k, d_v, B, T, H, KV, hd);
    name_of(nm, sizeof nm, "attention_forward", cfg);
    cmpc(nm, d_out, out, nq, P->tol_c_mm);
    name_of(nm, sizeof nm, "attention_lse", cfg);
    cmpf(nm, d_lse, lse, nl, P->tol_f_mm);
    /* backward from the reference out (rounded as the engine keeps it) and lse on both sides, into
       non-zero gradients */
    for (size_t i = 0; i < nq; i++) out[i] = P->round(out[i]);
    P->set_c(d_out, out, nq);
    D->from_host(d_lse, lse, nl * sizeof(float));
    for (int mode = 0; mode < 2; mode++) {
        float *wdq = hcopy(dq0, nq), *wdk = hcopy(dk0, nk), *wdv = hcopy(dv0, nk);
        float *d_dq = P->dev_c(dq0, nq), *d_dk = P->dev_c(dk0, nk), *d_dv = P->dev_c(dv0, nk);
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
        name_of(nm, sizeof nm, "attention_backward_dq", c2);
        cmpc(nm, d_dq, wdq, nq, P->tol_c_mm);
        name_of(nm, sizeof nm, "attention_backward_dk", c2);
        cmpc(nm, d_dk, wdk, nk, P->tol_c_mm); /* mode 1: dk0 untouched on both sides */
        name_of(nm, sizeof nm, "attention_backward_dv", c2);
        cmpc(nm, d_dv, wdv, nk, P->tol_c_mm);
        free(wdq); free(wdk); free(wdv);
        D->dev_free(d_dq); D->dev_free(d_dk); D->dev_free(d_dv);
    }
    free(q); free(k); free(v); free(dout); free(dq0); free(dk0); free(dv0); free(out); free(lse); free(ws);
    D->dev_free(d_q); D->dev_free(d_k); D->dev_free(d_v); D->dev_free(d_dout); D->dev_free(d_out);
    D->dev_free(d_lse);
    D->dev_free(d_ws);
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
    float *d_g = P->dev_c(g, n), *d_u = P->dev_c(u, n), *d_dout = P->dev_c(dout, n), *d_out = P->dev_c_nan(n);
    R->swiglu_forward(out, g, u, n);
    D->swiglu_forward(d_out, d_g, d_u, n);
    char nm[128];
    name_of(nm, sizeof nm, "swiglu_forward", NULL);
    cmpc(nm, d_out, out, n, P->tol_c_ew);
    if (P->swiglu_extra) P->swiglu_extra(d_out, out, n);
    static const char *const tag[3] = {"", " (dup NULL)", " (dgate NULL)"};
    for (int mode = 0; mode < 3; mode++) {
        float *wdg = hcopy(dg0, n), *wdu = hcopy(du0, n), *d_dg = P->dev_c(dg0, n), *d_du = P->dev_c(du0, n);
        R->swiglu_backward(mode == 2 ? NULL : wdg, mode == 1 ? NULL : wdu, dout, g, u, n);
        D->swiglu_backward(mode == 2 ? NULL : d_dg, mode == 1 ? NULL : d_du, d_dout, d_g, d_u, n);
        snprintf(nm, sizeof nm, "%sswiglu_backward_dgate%s", P->prefix, tag[mode]);
        cmpc(nm, d_dg, wdg, n, P->tol_c_ew);
        snprintf(nm, sizeof nm, "%sswiglu_backward_dup%s", P->prefix, tag[mode]);
        cmpc(nm, d_du, wdu, n, P->tol_c_ew);
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
    /* the logits are fp32 in every table (matmul_forward_f32out), not rounded to compute precision */
    float *logits = xmalloc(nl * sizeof(float));
    for (size_t i = 0; i < nl; i++) logits[i] = 4.0f * frand();
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
    float *d_logits = devf(logits, nl), *d_mx = devf_nan((size_t)N), *d_se = devf_nan((size_t)N);
    float *d_tl = devf_nan((size_t)N), *d_loss = devf_nan((size_t)N), *d_dl = P->dev_c_nan(nl);
    int32_t *d_tgt = dbytes(tgt, (size_t)N * sizeof(int32_t));

    R->ce_rowmax(mx, logits, N, Vloc, v_valid);
    D->ce_rowmax(d_mx, d_logits, N, Vloc, v_valid);
    name_of(nm, sizeof nm, "ce_rowmax", cfg);
    cmpf(nm, d_mx, mx, (size_t)N, P->tol_f_ew);
    if (nv == 0) goto done; /* the rest needs a finite max */
    D->from_host(d_mx, mx, (size_t)N * sizeof(float));
    R->ce_sumexp(se, logits, mx, N, Vloc, v_valid);
    D->ce_sumexp(d_se, d_logits, d_mx, N, Vloc, v_valid);
    name_of(nm, sizeof nm, "ce_sumexp", cfg);
    cmpf(nm, d_se, se, (size_t)N, P->tol_f_ew);
    D->from_host(d_se, se, (size_t)N * sizeof(float));
    R->ce_target(tl, logits, tgt, N, Vloc, v_start);
    D->ce_target(d_tl, d_logits, d_tgt, N, Vloc, v_start);
    name_of(nm, sizeof nm, "ce_target", cfg);
    cmpf(nm, d_tl, tl, (size_t)N, P->tol_f_ew);
    D->from_host(d_tl, tl, (size_t)N * sizeof(float));
    R->ce_loss(loss, mx, se, tl, N);
    D->ce_loss(d_loss, d_mx, d_se, d_tl, N);
    name_of(nm, sizeof nm, "ce_loss", cfg);
    cmpf(nm, d_loss, loss, (size_t)N, P->tol_f_ew);
    const float scale = 1.0f / 37.0f;
    R->ce_backward(dl, logits, mx, se, tgt, scale, N, Vloc, v_start, v_valid);
    D->ce_backward(d_dl, d_logits, d_mx, d_se, d_tgt, scale, N, Vloc, v_start, v_valid);
    name_of(nm, sizeof nm, "ce_backward", cfg);
    cmpc(nm, d_dl, dl, nl, P->tol_c_ew);
    if (D->cbytes == 4) { /* an fp32 table may write the gradient over the logits */
        D->ce_backward(d_logits, d_logits, d_mx, d_se, d_tgt, scale, N, Vloc, v_start, v_valid);
        name_of(nm, sizeof nm, "ce_backward_inplace", cfg);
        cmpc(nm, d_logits, dl, nl, P->tol_c_ew);
    }
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

#endif
