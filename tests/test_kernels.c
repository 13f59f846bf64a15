/* tests/test_kernels.c — every op of ops_cpu against a naive double-precision reference, every
 * backward by finite differences, and the ops_null table.
 *
 * What it is: small random shapes (GQA with KV < H, non-square, odd sizes, T = 1, more than one
 * attention row block, more than one RoPE frequency chunk, attention scores beyond exp's float
 * range), one CHECK line per property.
 * What it is not: a benchmark (the SGEMM rate is printed as a '#' line, never asserted) nor a test
 * of the CUDA backend.
 *
 * Gradient checks: L = Σ out ⊙ R for a fixed random R. The analytic gradient comes from the fp32
 * backward kernel; the numerical one is a central difference, h = 1e-4, of the DOUBLE reference
 * forward. In double the FD error is ~h²·|f'''| + 1e-16·|L|/h ≈ 1e-8, far below fp32's ~1e-6, so
 * the comparison measures the kernel and nothing else; a wrong formula gives errors of order 1.
 * Errors are normalised by the largest reference magnitude: max|got − ref| / max|ref|. Forward
 * tolerance 2e-5, gradient tolerance 1e-4 (fp32 accumulation over ≤ a few hundred terms).
 * Backward kernels are called on gradients pre-filled with random values, and the pre-fill is
 * subtracted before comparing: that checks the accumulate (+=) semantics in the same breath.
 */
#include "kernels/device.h"
#include "kernels/kernels.h"
#include "tests/check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL_FWD 2e-5
#define TOL_GRAD 1e-4
#define FD_H 1e-4

/* ------------------------------------------------------------------------------------------ */
/* random numbers, buffers, comparisons                                                       */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double urand(void) { return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0; }
static int irand(int n) { return (int)(rng_next() % (uint64_t)n); }

static void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) { fprintf(stderr, "test_kernels: out of memory (%zu bytes)\n", bytes); exit(1); }
    return p;
}
static float *frand(size_t n, double scale) {
    float *p = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = (float)(scale * urand());
    return p;
}
static float *fdup(const float *a, size_t n) {
    float *p = xmalloc(n * sizeof(float));
    memcpy(p, a, n * sizeof(float));
    return p;
}
static double *todouble(const float *a, size_t n) {
    double *p = xmalloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) p[i] = a[i];
    return p;
}
static double *dzeros(size_t n) {
    double *p = xmalloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) p[i] = 0.0;
    return p;
}

/* max|got − ref| / max|ref| (absolute when ref is all zero) */
static double relerr(const float *got, const double *ref, size_t n) {
    double e = 0.0, m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (!(d <= e)) e = d; /* NaN propagates into e */
        if (fabs(ref[i]) > m) m = fabs(ref[i]);
    }
    return m > 0.0 ? e / m : e;
}
/* the same for (got − prefill) against ref: the accumulated part of a backward */
static double relerr_acc(const float *got, const float *prefill, const double *ref, size_t n) {
    float *d = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) d[i] = got[i] - prefill[i];
    double e = relerr(d, ref, n);
    free(d);
    return e;
}

static void check_err(const char *name, double err, double tol) {
    CHECK(err <= tol, name, "normalised error %.3g > %.1g", err, tol);
}

/* central differences of obj() with respect to every element of x (double) */
typedef double (*objective_fn)(void *ctx);
static void fd_grad(double *grad, double *x, size_t n, objective_fn obj, void *ctx) {
    for (size_t i = 0; i < n; i++) {
        double x0 = x[i];
        x[i] = x0 + FD_H;
        double lp = obj(ctx);
        x[i] = x0 - FD_H;
        double lm = obj(ctx);
        x[i] = x0;
        grad[i] = (lp - lm) / (2.0 * FD_H);
    }
}
static double dot_d(const double *a, const double *r, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += a[i] * r[i];
    return s;
}

/* ------------------------------------------------------------------------------------------ */
/* matmul                                                                                     */

static void ref_matmul(double *out, const double *in, const double *w, int N, int Cin, int Cout) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < Cout; o++) {
            double s = 0.0;
            for (int c = 0; c < Cin; c++) s += in[(size_t)n * Cin + c] * w[(size_t)o * Cin + c];
            out[(size_t)n * Cout + o] = s;
        }
}
typedef struct { double *in, *w, *out, *R; int N, Cin, Cout; } mm_ctx;
static double mm_obj(void *p) {
    mm_ctx *c = p;
    ref_matmul(c->out, c->in, c->w, c->N, c->Cin, c->Cout);
    return dot_d(c->out, c->R, (size_t)c->N * c->Cout);
}

static void test_matmul(int N, int Cin, int Cout) {
    char name[128];
    size_t ni = (size_t)N * Cin, nw = (size_t)Cout * Cin, no = (size_t)N * Cout;
    float *in = frand(ni, 1.0), *w = frand(nw, 1.0), *out = xmalloc(no * sizeof(float));
    double *din = todouble(in, ni), *dw = todouble(w, nw), *ref = dzeros(no);
    ref_matmul(ref, din, dw, N, Cin, Cout);

    for (size_t i = 0; i < no; i++) out[i] = NAN; /* accumulate = 0 must overwrite, even NaN */
    ops_cpu.matmul_forward(out, in, w, N, Cin, Cout, 0);
    snprintf(name, sizeof name, "matmul_forward N=%d Cin=%d Cout=%d", N, Cin, Cout);
    check_err(name, relerr(out, ref, no), TOL_FWD);

    float *pre = frand(no, 1.0), *acc = fdup(pre, no);
    ops_cpu.matmul_forward(acc, in, w, N, Cin, Cout, 1);
    snprintf(name, sizeof name, "matmul_forward accumulate N=%d Cin=%d Cout=%d", N, Cin, Cout);
    check_err(name, relerr_acc(acc, pre, ref, no), TOL_FWD);

    /* backward against FD */
    float *R = frand(no, 1.0);
    double *dR = todouble(R, no), *gin = dzeros(ni), *gw = dzeros(nw), *tmp = dzeros(no);
    mm_ctx c = {din, dw, tmp, dR, N, Cin, Cout};
    fd_grad(gin, din, ni, mm_obj, &c);
    fd_grad(gw, dw, nw, mm_obj, &c);
    float *pin = frand(ni, 1.0), *pw = frand(nw, 1.0), *gi = fdup(pin, ni), *gwk = fdup(pw, nw);
    ops_cpu.matmul_backward(gi, gwk, R, in, w, N, Cin, Cout);
    snprintf(name, sizeof name, "matmul_backward din (FD, +=) N=%d Cin=%d Cout=%d", N, Cin, Cout);
    check_err(name, relerr_acc(gi, pin, gin, ni), TOL_GRAD);
    snprintf(name, sizeof name, "matmul_backward dw (FD, +=) N=%d Cin=%d Cout=%d", N, Cin, Cout);
    check_err(name, relerr_acc(gwk, pw, gw, nw), TOL_GRAD);

    /* NULL din: dw alone, same result */
    float *gw2 = fdup(pw, nw);
    ops_cpu.matmul_backward(NULL, gw2, R, in, w, N, Cin, Cout);
    snprintf(name, sizeof name, "matmul_backward din=NULL N=%d Cin=%d Cout=%d", N, Cin, Cout);
    check_err(name, relerr_acc(gw2, pw, gw, nw), TOL_GRAD);

    free(in); free(w); free(out); free(din); free(dw); free(ref); free(pre); free(acc); free(R); free(dR);
    free(gin); free(gw); free(tmp); free(pin); free(pw); free(gi); free(gwk); free(gw2);
}

/* ------------------------------------------------------------------------------------------ */
/* embedding                                                                                  */

static void ref_embedding(double *out, const int32_t *tok, const double *table, int N, int C, int v_start,
                          int v_count) {
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            int r = tok[n] - v_start;
            out[(size_t)n * C + c] = (r >= 0 && r < v_count) ? table[(size_t)r * C + c] : 0.0;
        }
}
typedef struct { double *table, *out, *R; const int32_t *tok; int N, C, v_start, v_count; } emb_ctx;
static double emb_obj(void *p) {
    emb_ctx *c = p;
    ref_embedding(c->out, c->tok, c->table, c->N, c->C, c->v_start, c->v_count);
    return dot_d(c->out, c->R, (size_t)c->N * c->C);
}

static void test_embedding(void) {
    const int N = 13, C = 5, V = 10, v_start = 3, v_count = 4;
    int32_t tok[13];
    for (int n = 0; n < N; n++) tok[n] = irand(V);
    tok[0] = 4; tok[1] = 4; /* a repeated owned token: its gradient rows must add */
    tok[2] = 0; tok[3] = 9; /* not owned on either side */
    size_t nt = (size_t)v_count * C, no = (size_t)N * C;
    float *table = frand(nt, 1.0), *out = frand(no, 1.0);
    double *dt = todouble(table, nt), *ref = dzeros(no);
    ref_embedding(ref, tok, dt, N, C, v_start, v_count);
    ops_cpu.embedding_forward(out, tok, table, N, C, v_start, v_count);
    check_err("embedding_forward (vocab shard, unowned rows zero)", relerr(out, ref, no), 0.0);

    float *R = frand(no, 1.0), *pre = frand(nt, 1.0), *g = fdup(pre, nt);
    double *dR = todouble(R, no), *gt = dzeros(nt), *tmp = dzeros(no);
    emb_ctx c = {dt, tmp, dR, tok, N, C, v_start, v_count};
    fd_grad(gt, dt, nt, emb_obj, &c);
    ops_cpu.embedding_backward(g, R, tok, N, C, v_start, v_count);
    check_err("embedding_backward dtable (FD, +=)", relerr_acc(g, pre, gt, nt), TOL_GRAD);
    free(table); free(out); free(dt); free(ref); free(R); free(pre); free(g); free(dR); free(gt); free(tmp);
}

/* ------------------------------------------------------------------------------------------ */
/* RMSNorm                                                                                    */

static void ref_rmsnorm(double *out, double *rstd, const double *x, const double *w, int N, int C, double eps) {
    for (int n = 0; n < N; n++) {
        double s = 0.0;
        for (int c = 0; c < C; c++) s += x[(size_t)n * C + c] * x[(size_t)n * C + c];
        double r = 1.0 / sqrt(s / C + eps);
        if (rstd) rstd[n] = r;
        for (int c = 0; c < C; c++) out[(size_t)n * C + c] = x[(size_t)n * C + c] * r * w[c];
    }
}
typedef struct { double *x, *w, *out, *R; int N, C; double eps; } rms_ctx;
static double rms_obj(void *p) {
    rms_ctx *c = p;
    ref_rmsnorm(c->out, NULL, c->x, c->w, c->N, c->C, c->eps);
    return dot_d(c->out, c->R, (size_t)c->N * c->C);
}

static void test_rmsnorm(int N, int C) {
    char name[128];
    const float eps = 1e-5f;
    size_t nx = (size_t)N * C;
    float *x = frand(nx, 2.0), *w = frand((size_t)C, 1.5), *out = xmalloc(nx * sizeof(float));
    float *rstd = xmalloc((size_t)N * sizeof(float));
    double *dx = todouble(x, nx), *dw = todouble(w, (size_t)C), *ref = dzeros(nx), *rref = dzeros((size_t)N);
    ref_rmsnorm(ref, rref, dx, dw, N, C, eps);
    ops_cpu.rmsnorm_forward(out, rstd, x, w, N, C, eps);
    snprintf(name, sizeof name, "rmsnorm_forward out N=%d C=%d", N, C);
    check_err(name, relerr(out, ref, nx), TOL_FWD);
    snprintf(name, sizeof name, "rmsnorm_forward rstd N=%d C=%d", N, C);
    check_err(name, relerr(rstd, rref, (size_t)N), TOL_FWD);

    float *R = frand(nx, 1.0), *px = frand(nx, 1.0), *pw = frand((size_t)C, 1.0);
    float *gx = fdup(px, nx), *gw = fdup(pw, (size_t)C);
    double *dR = todouble(R, nx), *fx = dzeros(nx), *fw = dzeros((size_t)C), *tmp = dzeros(nx);
    rms_ctx c = {dx, dw, tmp, dR, N, C, eps};
    fd_grad(fx, dx, nx, rms_obj, &c);
    fd_grad(fw, dw, (size_t)C, rms_obj, &c);
    ops_cpu.rmsnorm_backward(gx, gw, R, x, w, rstd, N, C);
    snprintf(name, sizeof name, "rmsnorm_backward dx (FD, +=) N=%d C=%d", N, C);
    check_err(name, relerr_acc(gx, px, fx, nx), TOL_GRAD);
    snprintf(name, sizeof name, "rmsnorm_backward dw (FD, +=) N=%d C=%d", N, C);
    check_err(name, relerr_acc(gw, pw, fw, (size_t)C), TOL_GRAD);
    float *gx2 = fdup(px, nx);
    ops_cpu.rmsnorm_backward(gx2, NULL, R, x, w, rstd, N, C);
    snprintf(name, sizeof name, "rmsnorm_backward dw=NULL N=%d C=%d", N, C);
    check_err(name, relerr_acc(gx2, px, fx, nx), TOL_GRAD);
    free(x); free(w); free(out); free(rstd); free(dx); free(dw); free(ref); free(rref); free(R); free(px);
    free(pw); free(gx); free(gw); free(dR); free(fx); free(fw); free(tmp); free(gx2);
}

/* ------------------------------------------------------------------------------------------ */
/* RoPE                                                                                       */

static void ref_rope(double *out, const double *x, int B, int T, int nh, int hd, double theta) {
    int half = hd / 2;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < nh; h++) {
                const double *xi = x + (((size_t)b * T + t) * nh + h) * hd;
                double *o = out + (((size_t)b * T + t) * nh + h) * hd;
                for (int i = 0; i < half; i++) {
                    double a = t * pow(theta, -2.0 * i / hd), c = cos(a), s = sin(a);
                    o[i] = xi[i] * c - xi[i + half] * s;
                    o[i + half] = xi[i + half] * c + xi[i] * s;
                }
            }
}
typedef struct { double *x, *out, *R; int B, T, nh, hd; double theta; } rope_ctx;
static double rope_obj(void *p) {
    rope_ctx *c = p;
    ref_rope(c->out, c->x, c->B, c->T, c->nh, c->hd, c->theta);
    return dot_d(c->out, c->R, (size_t)c->B * c->T * c->nh * c->hd);
}

/* the table of plain RoPE (no rope_scaling; tests/test_rope.c covers the scaled frequencies) */
static float *plain_rope_table(int T, int hd, double theta) {
    double *f = malloc((size_t)(hd / 2 + 1) * sizeof *f);
    float *tab = malloc((rope_table_floats(T, hd) + 1) * sizeof *tab);
    for (int i = 0; i < hd / 2; i++) f[i] = pow(theta, -2.0 * i / hd);
    rope_table_fill(tab, f, T, hd);
    free(f);
    return tab;
}

static void test_rope(int B, int T, int nh, int hd, float theta) {
    char name[160];
    size_t n = (size_t)B * T * nh * hd;
    float *tab = plain_rope_table(T, hd, theta);
    float *x = frand(n, 1.0), *out = frand(n, 1.0);
    double *dx = todouble(x, n), *ref = dzeros(n);
    ref_rope(ref, dx, B, T, nh, hd, theta);
    ops_cpu.rope_forward(out, x, tab, B, T, nh, hd);
    snprintf(name, sizeof name, "rope_forward B=%d T=%d nh=%d hd=%d", B, T, nh, hd);
    check_err(name, relerr(out, ref, n), TOL_FWD);
    float *inplace = fdup(x, n);
    ops_cpu.rope_forward(inplace, inplace, tab, B, T, nh, hd);
    snprintf(name, sizeof name, "rope_forward in place B=%d T=%d nh=%d hd=%d", B, T, nh, hd);
    check_err(name, relerr(inplace, ref, n), TOL_FWD);

    /* backward: assigns; din pre-filled with garbage that must vanish */
    float *R = frand(n, 1.0), *din = frand(n, 100.0);
    double *dR = todouble(R, n), *fx = dzeros(n), *tmp = dzeros(n);
    rope_ctx c = {dx, tmp, dR, B, T, nh, hd, theta};
    fd_grad(fx, dx, n, rope_obj, &c);
    ops_cpu.rope_backward(din, R, tab, B, T, nh, hd);
    snprintf(name, sizeof name, "rope_backward (FD, assigns) B=%d T=%d nh=%d hd=%d", B, T, nh, hd);
    check_err(name, relerr(din, fx, n), TOL_GRAD);
    float *din2 = fdup(R, n);
    ops_cpu.rope_backward(din2, din2, tab, B, T, nh, hd);
    snprintf(name, sizeof name, "rope_backward in place B=%d T=%d nh=%d hd=%d", B, T, nh, hd);
    check_err(name, relerr(din2, fx, n), TOL_GRAD);
    /* a rotation: backward(forward(x)) = x */
    ops_cpu.rope_backward(inplace, inplace, tab, B, T, nh, hd);
    snprintf(name, sizeof name, "rope backward∘forward = identity hd=%d", hd);
    check_err(name, relerr(inplace, dx, n), TOL_FWD);
    free(x); free(out); free(dx); free(ref); free(inplace); free(R); free(din); free(dR); free(fx); free(tmp);
    free(din2); free(tab);
}

/* ------------------------------------------------------------------------------------------ */
/* attention                                                                                  */

static void ref_attention(double *out, double *lse, const double *q, const double *k, const double *v, int B,
                          int T, int H, int KV, int hd) {
    double scale = 1.0 / sqrt((double)hd);
    double *s = xmalloc((size_t)T * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            int kh = h / (H / KV);
            for (int i = 0; i < T; i++) {
                const double *qi = q + ((size_t)b * T + i) * H * hd + (size_t)h * hd;
                double m = -INFINITY;
                for (int j = 0; j <= i; j++) {
                    const double *kj = k + ((size_t)b * T + j) * KV * hd + (size_t)kh * hd;
                    double d = 0.0;
                    for (int e = 0; e < hd; e++) d += qi[e] * kj[e];
                    s[j] = d * scale;
                    if (s[j] > m) m = s[j];
                }
                double sum = 0.0;
                for (int j = 0; j <= i; j++) { s[j] = exp(s[j] - m); sum += s[j]; }
                if (lse) lse[((size_t)b * H + h) * T + i] = m + log(sum);
                double *o = out + ((size_t)b * T + i) * H * hd + (size_t)h * hd;
                for (int e = 0; e < hd; e++) o[e] = 0.0;
                for (int j = 0; j <= i; j++) {
                    const double *vj = v + ((size_t)b * T + j) * KV * hd + (size_t)kh * hd;
                    for (int e = 0; e < hd; e++) o[e] += s[j] / sum * vj[e];
                }
            }
        }
    free(s);
}
typedef struct { double *q, *k, *v, *out, *R; int B, T, H, KV, hd; } att_ctx;
static double att_obj(void *p) {
    att_ctx *c = p;
    ref_attention(c->out, NULL, c->q, c->k, c->v, c->B, c->T, c->H, c->KV, c->hd);
    return dot_d(c->out, c->R, (size_t)c->B * c->T * c->H * c->hd);
}

static void test_attention(int B, int T, int H, int KV, int hd, int do_fd) {
    char name[160], shape[80];
    snprintf(shape, sizeof shape, "B=%d T=%d H=%d KV=%d hd=%d", B, T, H, KV, hd);
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, nl = (size_t)B * H * T;
    float *q = frand(nq, 1.5), *k = frand(nk, 1.5), *v = frand(nk, 1.0);
    float *out = frand(nq, 1.0), *lse = frand(nl, 1.0), *ws = frand(attention_ws_floats(T), 1.0);
    double *dq = todouble(q, nq), *dk = todouble(k, nk), *dv = todouble(v, nk);
    double *ref = dzeros(nq), *rl = dzeros(nl);
    ref_attention(ref, rl, dq, dk, dv, B, T, H, KV, hd);
    ops_cpu.attention_forward(out, lse, ws, q, k, v, B, T, H, KV, hd);
    snprintf(name, sizeof name, "attention_forward out %s", shape);
    check_err(name, relerr(out, ref, nq), TOL_FWD);
    snprintf(name, sizeof name, "attention_forward lse %s", shape);
    check_err(name, relerr(lse, rl, nl), TOL_FWD);
    if (!do_fd) goto done;

    float *R = frand(nq, 1.0);
    float *pq = frand(nq, 1.0), *pk = frand(nk, 1.0), *pv = frand(nk, 1.0);
    float *gq = fdup(pq, nq), *gk = fdup(pk, nk), *gv = fdup(pv, nk);
    double *dR = todouble(R, nq), *fq = dzeros(nq), *fk = dzeros(nk), *fv = dzeros(nk), *tmp = dzeros(nq);
    att_ctx c = {dq, dk, dv, tmp, dR, B, T, H, KV, hd};
    fd_grad(fq, dq, nq, att_obj, &c);
    fd_grad(fk, dk, nk, att_obj, &c);
    fd_grad(fv, dv, nk, att_obj, &c);
    for (size_t i = 0; i < attention_ws_floats(T); i++) ws[i] = NAN; /* backward must not read stale ws */
    ops_cpu.attention_backward(gq, gk, gv, ws, R, out, lse, q, k, v, B, T, H, KV, hd);
    snprintf(name, sizeof name, "attention_backward dq (FD, +=) %s", shape);
    check_err(name, relerr_acc(gq, pq, fq, nq), TOL_GRAD);
    snprintf(name, sizeof name, "attention_backward dk (FD, +=) %s", shape);
    check_err(name, relerr_acc(gk, pk, fk, nk), TOL_GRAD);
    snprintf(name, sizeof name, "attention_backward dv (FD, +=) %s", shape);
    check_err(name, relerr_acc(gv, pv, fv, nk), TOL_GRAD);

    /* NULL gradients are skipped and do not change the others */
    float *gv2 = fdup(pv, nk), *gq2 = fdup(pq, nq), *gk2 = fdup(pk, nk);
    ops_cpu.attention_backward(NULL, NULL, gv2, ws, R, out, lse, q, k, v, B, T, H, KV, hd);
    ops_cpu.attention_backward(gq2, NULL, NULL, ws, R, out, lse, q, k, v, B, T, H, KV, hd);
    ops_cpu.attention_backward(NULL, gk2, NULL, ws, R, out, lse, q, k, v, B, T, H, KV, hd);
    snprintf(name, sizeof name, "attention_backward one gradient at a time %s", shape);
    double e = relerr_acc(gv2, pv, fv, nk), e2 = relerr_acc(gq2, pq, fq, nq), e3 = relerr_acc(gk2, pk, fk, nk);
    check_err(name, fmax(e, fmax(e2, e3)), TOL_GRAD);

    free(R); free(pq); free(pk); free(pv); free(gq); free(gk); free(gv); free(dR); free(fq); free(fk); free(fv);
    free(tmp); free(gv2); free(gq2); free(gk2);
done:
    free(q); free(k); free(v); free(out); free(lse); free(ws); free(dq); free(dk); free(dv); free(ref); free(rl);
}

/* Attention backward along random unit directions of q, k and v (central differences of the double
 * reference, step 1e-4) against <grad, u>: for a realistic head size and several row blocks (the
 * transposed-K/V GEMM path), where per-element FD is too slow. tag names the inputs in the checks. */
static void check_directional(const char *tag, const float *q, const float *k, const float *v, int B, int T, int H,
                              int KV, int hd) {
    char name[200];
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, nl = (size_t)B * H * T;
    float *R = frand(nq, 1.0);
    float *out = frand(nq, 1.0), *lse = frand(nl, 1.0), *ws = frand(attention_ws_floats(T), 1.0);
    float *gq = calloc(nq, sizeof(float)), *gk = calloc(nk, sizeof(float)), *gv = calloc(nk, sizeof(float));
    ops_cpu.attention_forward(out, lse, ws, q, k, v, B, T, H, KV, hd);
    ops_cpu.attention_backward(gq, gk, gv, ws, R, out, lse, q, k, v, B, T, H, KV, hd);
    double *dq = todouble(q, nq), *dk = todouble(k, nk), *dv = todouble(v, nk), *dR = todouble(R, nq), *tmp = dzeros(nq);
    att_ctx c = {dq, dk, dv, tmp, dR, B, T, H, KV, hd};
    double *xs[3] = {dq, dk, dv};
    float *gs[3] = {gq, gk, gv};
    size_t ns[3] = {nq, nk, nk};
    const char *nm[3] = {"dq", "dk", "dv"};
    for (int w = 0; w < 3; w++) {
        float *u = frand(ns[w], 1.0);
        double un = 0, gu = 0, h = 1e-4;
        for (size_t i = 0; i < ns[w]; i++) un += (double)u[i] * u[i];
        un = sqrt(un);
        for (size_t i = 0; i < ns[w]; i++) gu += gs[w][i] * (u[i] / un);
        for (size_t i = 0; i < ns[w]; i++) xs[w][i] += h * u[i] / un;
        double lp = att_obj(&c);
        for (size_t i = 0; i < ns[w]; i++) xs[w][i] -= 2 * h * u[i] / un;
        double lm = att_obj(&c);
        for (size_t i = 0; i < ns[w]; i++) xs[w][i] += h * u[i] / un;
        double fd = (lp - lm) / (2 * h);
        snprintf(name, sizeof name, "attention_backward %s directional (FD)%s B=%d T=%d H=%d KV=%d hd=%d", nm[w], tag, B, T,
                 H, KV, hd);
        check_err(name, fabs(fd - gu) / fmax(fabs(fd), 1e-3), 1e-3);
        free(u);
    }
    free(R); free(out); free(lse); free(ws); free(gq); free(gk); free(gv);
    free(dq); free(dk); free(dv); free(dR); free(tmp);
}

static void test_attention_directional(int B, int T, int H, int KV, int hd) {
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd;
    float *q = frand(nq, 1.5), *k = frand(nk, 1.5), *v = frand(nk, 1.0);
    check_directional("", q, k, v, B, T, H, KV, hd);
    free(q); free(k); free(v);
}

/* Scores far outside exp's float range (|s| = 100..1000, both signs in every head and row block): the
 * softmax is exact only if each row is shifted by its maximum before exp, which the small random
 * inputs above never need (exp(1000) overflows, exp(-1000) underflows to the clamp, and both make
 * every weight of a row equal). The scores are exact in fp32 so the kernel's only error is its own:
 * integer q and k, hd = 16 (scale 1/4), key dimension 0 = 4 and query dimension 0 = the row's offset
 * +-(100..1000), the other dimensions -2..2, so s = offset + (a spread of a few units: a softmax
 * over several keys, not one). Outputs and lse must be finite and equal the max-shifted double
 * reference; the backward, which recomputes P from lse, is checked along directions. */
static void test_attention_large_scores(int B, int T, int H, int KV) {
    const int hd = 16;
    char name[160], shape[80];
    snprintf(shape, sizeof shape, "B=%d T=%d H=%d KV=%d hd=%d", B, T, H, KV, hd);
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, nl = (size_t)B * H * T;
    float *q = xmalloc(nq * sizeof(float)), *k = xmalloc(nk * sizeof(float)), *v = frand(nk, 1.0);
    for (size_t r = 0; r < nq / hd; r++) {
        int sign = (r + r / H) % 2 ? -1 : 1;   /* alternating over heads and over positions */
        q[r * hd] = (float)(sign * (100 + irand(901)));
        for (int e = 1; e < hd; e++) q[r * hd + e] = (float)(irand(5) - 2);
    }
    for (size_t r = 0; r < nk / hd; r++) {
        k[r * hd] = 4.0f;
        for (int e = 1; e < hd; e++) k[r * hd + e] = (float)(irand(5) - 2);
    }
    float *out = frand(nq, 1.0), *lse = frand(nl, 1.0), *ws = frand(attention_ws_floats(T), 1.0);
    double *dq = todouble(q, nq), *dk = todouble(k, nk), *dv = todouble(v, nk);
    double *ref = dzeros(nq), *rl = dzeros(nl);
    ref_attention(ref, rl, dq, dk, dv, B, T, H, KV, hd);
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < nl; i++) { lo = fmin(lo, rl[i]); hi = fmax(hi, rl[i]); }
    ops_cpu.attention_forward(out, lse, ws, q, k, v, B, T, H, KV, hd);
    int finite = 1;
    for (size_t i = 0; i < nq; i++) finite &= isfinite(out[i]) != 0;
    for (size_t i = 0; i < nl; i++) finite &= isfinite(lse[i]) != 0;
    snprintf(name, sizeof name, "attention_forward large scores finite %s", shape);
    CHECK(finite && lo < -99 && hi > 99, name, "a non-finite output or lse (lse of the reference %.1f..%.1f)", lo, hi);
    snprintf(name, sizeof name, "attention_forward large scores out %s", shape);
    check_err(name, relerr(out, ref, nq), TOL_FWD);
    snprintf(name, sizeof name, "attention_forward large scores lse %s", shape);
    check_err(name, relerr(lse, rl, nl), TOL_FWD);
    check_directional(" large scores", q, k, v, B, T, H, KV, hd);
    free(q); free(k); free(v); free(out); free(lse); free(ws); free(dq); free(dk); free(dv); free(ref); free(rl);
}

/* ------------------------------------------------------------------------------------------ */
/* SwiGLU                                                                                     */

typedef struct { double *g, *u, *R; size_t n; } sw_ctx;
static double sw_obj(void *p) {
    sw_ctx *c = p;
    double s = 0.0;
    for (size_t i = 0; i < c->n; i++) s += c->g[i] / (1.0 + exp(-c->g[i])) * c->u[i] * c->R[i];
    return s;
}

static void test_swiglu(void) {
    const size_t n = 61;
    float *g = frand(n, 6.0), *u = frand(n, 2.0), *out = frand(n, 1.0);
    g[0] = -95.0f; g[1] = 95.0f; g[2] = 0.0f; /* saturated ends of the sigmoid */
    double *dg = todouble(g, n), *du = todouble(u, n), *ref = dzeros(n);
    for (size_t i = 0; i < n; i++) ref[i] = dg[i] / (1.0 + exp(-dg[i])) * du[i];
    ops_cpu.swiglu_forward(out, g, u, n);
    check_err("swiglu_forward", relerr(out, ref, n), TOL_FWD);

    float *R = frand(n, 1.0), *pg = frand(n, 1.0), *pu = frand(n, 1.0), *gg = fdup(pg, n), *gu = fdup(pu, n);
    double *dR = todouble(R, n), *fg = dzeros(n), *fu = dzeros(n);
    sw_ctx c = {dg, du, dR, n};
    fd_grad(fg, dg, n, sw_obj, &c);
    fd_grad(fu, du, n, sw_obj, &c);
    ops_cpu.swiglu_backward(gg, gu, R, g, u, n);
    check_err("swiglu_backward dgate (FD, +=)", relerr_acc(gg, pg, fg, n), TOL_GRAD);
    check_err("swiglu_backward dup (FD, +=)", relerr_acc(gu, pu, fu, n), TOL_GRAD);
    float *gg2 = fdup(pg, n), *gu2 = fdup(pu, n);
    ops_cpu.swiglu_backward(gg2, NULL, R, g, u, n);
    ops_cpu.swiglu_backward(NULL, gu2, R, g, u, n);
    check_err("swiglu_backward one gradient at a time",
              fmax(relerr_acc(gg2, pg, fg, n), relerr_acc(gu2, pu, fu, n)), TOL_GRAD);
    free(g); free(u); free(out); free(dg); free(du); free(ref); free(R); free(pg); free(pu); free(gg); free(gu);
    free(dR); free(fg); free(fu); free(gg2); free(gu2);
}

/* ------------------------------------------------------------------------------------------ */
/* vocab-parallel cross-entropy                                                               */

static void ref_ce(double *loss, const double *logits, const int32_t *tgt, int N, int V) {
    for (int n = 0; n < N; n++) {
        const double *l = logits + (size_t)n * V;
        double m = -INFINITY, s = 0.0;
        for (int j = 0; j < V; j++) m = l[j] > m ? l[j] : m;
        for (int j = 0; j < V; j++) s += exp(l[j] - m);
        loss[n] = log(s) + m - l[tgt[n]];
    }
}
typedef struct { double *logits, *loss; const int32_t *tgt; int N, V; double scale; } ce_ctx;
static double ce_obj(void *p) {
    ce_ctx *c = p;
    ref_ce(c->loss, c->logits, c->tgt, c->N, c->V);
    double s = 0.0;
    for (int n = 0; n < c->N; n++) s += c->scale * c->loss[n];
    return s;
}

/* V columns split over tp shards of Vloc = ceil(V/tp) columns; the last shards carry padding
 * columns, filled with a large value that would dominate max and sum if not masked. */
static void test_ce(int N, int V, int tp) {
    char name[128];
    const int Vloc = (V + tp - 1) / tp;
    const float scale = 1.0f / (float)N, pad = 60.0f;
    int32_t *tgt = xmalloc((size_t)N * sizeof(int32_t));
    for (int n = 0; n < N; n++) tgt[n] = irand(V);
    tgt[0] = V - 1; /* a target in the last (padded) shard */
    float *full = frand((size_t)N * V, 4.0);
    double *dfull = todouble(full, (size_t)N * V), *rloss = dzeros((size_t)N), *rgrad = dzeros((size_t)N * V);
    ref_ce(rloss, dfull, tgt, N, V);
    double *tmp = dzeros((size_t)N);
    ce_ctx c = {dfull, tmp, tgt, N, V, scale};
    fd_grad(rgrad, dfull, (size_t)N * V, ce_obj, &c);

    float *shard[8], *mxl = xmalloc((size_t)N * sizeof(float)), *sel = xmalloc((size_t)N * sizeof(float));
    float *tll = xmalloc((size_t)N * sizeof(float));
    float *gmx = xmalloc((size_t)N * sizeof(float)), *gse = xmalloc((size_t)N * sizeof(float));
    float *gtl = xmalloc((size_t)N * sizeof(float)), *loss = xmalloc((size_t)N * sizeof(float));
    double rowmax_err = 0.0, target_err = 0.0;
    for (int n = 0; n < N; n++) { gmx[n] = -INFINITY; gse[n] = 0.0f; gtl[n] = 0.0f; }
    for (int s = 0; s < tp; s++) {
        int v_start = s * Vloc, v_valid = V - v_start < Vloc ? V - v_start : Vloc;
        if (v_valid < 0) v_valid = 0;
        shard[s] = xmalloc((size_t)N * Vloc * sizeof(float));
        for (int n = 0; n < N; n++)
            for (int j = 0; j < Vloc; j++)
                shard[s][(size_t)n * Vloc + j] = j < v_valid ? full[(size_t)n * V + v_start + j] : pad;
        ops_cpu.ce_rowmax(mxl, shard[s], N, Vloc, v_valid);
        for (int n = 0; n < N; n++) {
            float m = -INFINITY;
            for (int j = 0; j < v_valid; j++) m = fmaxf(m, full[(size_t)n * V + v_start + j]);
            if (mxl[n] != m) rowmax_err = 1.0;
            gmx[n] = fmaxf(gmx[n], mxl[n]); /* the TP group's MAX */
        }
        ops_cpu.ce_target(tll, shard[s], tgt, N, Vloc, v_start);
        for (int n = 0; n < N; n++) {
            int owned = tgt[n] >= v_start && tgt[n] < v_start + Vloc;
            float want = owned ? full[(size_t)n * V + tgt[n]] : 0.0f;
            if (tll[n] != want) target_err = 1.0;
            gtl[n] += tll[n]; /* SUM */
        }
    }
    snprintf(name, sizeof name, "ce_rowmax per shard, padding masked V=%d tp=%d", V, tp);
    CHECK(rowmax_err == 0.0, name, "a shard's max differs from the max of its valid columns");
    snprintf(name, sizeof name, "ce_target owned or zero V=%d tp=%d", V, tp);
    CHECK(target_err == 0.0, name, "a target logit differs");
    for (int s = 0; s < tp; s++) {
        int v_start = s * Vloc, v_valid = V - v_start < Vloc ? V - v_start : Vloc;
        ops_cpu.ce_sumexp(sel, shard[s], gmx, N, Vloc, v_valid);
        for (int n = 0; n < N; n++) gse[n] += sel[n]; /* SUM, already at the global max */
    }
    ops_cpu.ce_loss(loss, gmx, gse, gtl, N);
    snprintf(name, sizeof name, "ce pieces combined = full-vocab loss V=%d tp=%d", V, tp);
    check_err(name, relerr(loss, rloss, (size_t)N), TOL_FWD);

    /* dlogits per shard, assembled, against FD of the full-vocab loss; padding exactly zero;
       then once more in place (dlogits aliasing logits) */
    float *grad = xmalloc((size_t)N * V * sizeof(float)), *d = frand((size_t)N * Vloc, 9.0);
    int pad_ok = 1, alias_ok = 1;
    for (int s = 0; s < tp; s++) {
        int v_start = s * Vloc, v_valid = V - v_start < Vloc ? V - v_start : Vloc;
        ops_cpu.ce_backward(d, shard[s], gmx, gse, tgt, scale, N, Vloc, v_start, v_valid);
        for (int n = 0; n < N; n++)
            for (int j = 0; j < Vloc; j++) {
                if (j < v_valid) grad[(size_t)n * V + v_start + j] = d[(size_t)n * Vloc + j];
                else if (d[(size_t)n * Vloc + j] != 0.0f) pad_ok = 0;
            }
        ops_cpu.ce_backward(shard[s], shard[s], gmx, gse, tgt, scale, N, Vloc, v_start, v_valid);
        if (memcmp(shard[s], d, (size_t)N * Vloc * sizeof(float)) != 0) alias_ok = 0;
    }
    snprintf(name, sizeof name, "ce_backward assembled (FD of full loss) V=%d tp=%d", V, tp);
    check_err(name, relerr(grad, rgrad, (size_t)N * V), TOL_GRAD);
    snprintf(name, sizeof name, "ce_backward padding columns zero V=%d tp=%d", V, tp);
    CHECK(pad_ok, name, "a padding column got a non-zero gradient");
    snprintf(name, sizeof name, "ce_backward in place (dlogits = logits) V=%d tp=%d", V, tp);
    CHECK(alias_ok, name, "in-place result differs from out-of-place");

    for (int s = 0; s < tp; s++) free(shard[s]);
    free(tgt); free(full); free(dfull); free(rloss); free(rgrad); free(tmp); free(mxl); free(sel); free(tll);
    free(gmx); free(gse); free(gtl); free(loss); free(grad); free(d);
}

/* a shard of nothing but padding contributes nothing: max -inf, sumexp 0 */
static void test_ce_empty_shard(void) {
    float logits[2 * 3] = {5, 6, 7, 8, 9, 10}, mx[2], se[2], gmx[2] = {1.0f, 2.0f};
    ops_cpu.ce_rowmax(mx, logits, 2, 3, 0);
    ops_cpu.ce_sumexp(se, logits, gmx, 2, 3, 0);
    CHECK(isinf(mx[0]) && mx[0] < 0 && isinf(mx[1]) && se[0] == 0.0f && se[1] == 0.0f,
          "ce all-padding shard: max -inf, sumexp 0", "mx %g %g se %g %g", mx[0], mx[1], se[0], se[1]);
}

/* ------------------------------------------------------------------------------------------ */
/* AdamW and helpers                                                                          */

static void test_adamw(float wd) {
    char name[96];
    const size_t n = 37;
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f;
    float *p = frand(n, 1.0), *m = xmalloc(n * sizeof(float)), *v = xmalloc(n * sizeof(float));
    memset(m, 0, n * sizeof(float));
    memset(v, 0, n * sizeof(float));
    double *rp = todouble(p, n), *rm = dzeros(n), *rv = dzeros(n);
    double worst = 0.0;
    for (int t = 1; t <= 3; t++) {
        float *g = frand(n, 0.5);
        g[0] = 0.0f; /* zero gradient: only the decay moves it at t = 1 */
        float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t);
        ops_cpu.adamw(p, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2);
        for (size_t i = 0; i < n; i++) {
            rp[i] -= (double)lr * wd * rp[i];
            rm[i] = b1 * rm[i] + (1.0 - b1) * g[i];
            rv[i] = b2 * rv[i] + (1.0 - b2) * (double)g[i] * g[i];
            rp[i] -= (double)lr / bc1 * rm[i] / (sqrt(rv[i]) / sqrt((double)bc2) + eps);
        }
        worst = fmax(worst, fmax(relerr(p, rp, n), fmax(relerr(m, rm, n), relerr(v, rv, n))));
        free(g);
    }
    snprintf(name, sizeof name, "adamw p,m,v over t=1..3 wd=%g", wd);
    check_err(name, worst, TOL_FWD);
    free(p); free(m); free(v); free(rp); free(rm); free(rv);
}

/* the fused step is the composition it promises, bit for bit: scale_inplace (gscale != 1), adamw,
 * the copy of the new p (pc), the zeroed g (zero_g); gscale = 1 leaves g unscaled */
static void test_adamw_fused(void) {
    const size_t n = 45;
    for (int c = 0; c < 3; c++) {
        const float gscale = c == 0 ? 1.0f : 0.37f;
        const int zero_g = c == 2, want_pc = c != 1;
        float *p = frand(n, 1.0), *g = frand(n, 0.5), *m = frand(n, 0.1), *v = frand(n, 0.1);
        for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
        float *p2 = fdup(p, n), *g2 = fdup(g, n), *m2 = fdup(m, n), *v2 = fdup(v, n), *pc = frand(n, 1.0);
        if (gscale != 1.0f) ops_cpu.scale_inplace(g2, gscale, n);
        ops_cpu.adamw(p2, g2, m2, v2, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.19f, 0.0975f);
        ops_cpu.adamw_fused(p, want_pc ? pc : NULL, g, m, v, n, gscale, zero_g, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.19f,
                            0.0975f);
        int same = !memcmp(p, p2, n * 4) && !memcmp(m, m2, n * 4) && !memcmp(v, v2, n * 4) &&
                   (!want_pc || !memcmp(pc, p2, n * 4));
        for (size_t i = 0; i < n; i++) same &= zero_g ? g[i] == 0.0f : g[i] == g2[i];
        char name[96];
        snprintf(name, sizeof name, "adamw_fused = scale, adamw, copy, zero (gscale %g, pc %d, zero_g %d)", gscale,
                 want_pc, zero_g);
        CHECK(same, name, "differs from the composition");
        free(p); free(g); free(m); free(v); free(p2); free(g2); free(m2); free(v2); free(pc);
    }
}

static void test_helpers(void) {
    const size_t n = 1001;
    float *x = frand(n, 3.0), *y = frand(n, 1.0), *y0 = fdup(y, n);
    double *ref = dzeros(n);
    for (size_t i = 0; i < n; i++) ref[i] = (double)y0[i] + x[i];
    ops_cpu.add_inplace(y, x, n);
    check_err("add_inplace", relerr(y, ref, n), 1e-7);
    for (size_t i = 0; i < n; i++) ref[i] = (double)x[i] * -0.37f;
    memcpy(y, x, n * sizeof(float));
    ops_cpu.scale_inplace(y, -0.37f, n);
    check_err("scale_inplace", relerr(y, ref, n), 1e-7);
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    const float *xs[3] = {x, x + 5, x + 17};
    size_t ns[3] = {n, 0, 3};
    double got = ops_cpu.sumsq(xs, ns, 1);
    CHECK(fabs(got - s) <= 1e-12 * s, "sumsq (double accumulation)", "got %.17g want %.17g", got, s);
    CHECK(ops_cpu.sumsq(xs, ns + 1, 1) == 0.0 && ops_cpu.sumsq(xs, ns, 0) == 0.0 && ops_cpu.sumsq(xs + 2, ns + 2, 1) > 0.0,
          "sumsq n=0, no segment and n=3", "wrong");
    /* segments: each one's double sum, added in order */
    double s3 = (double)x[17] * x[17] + (double)x[18] * x[18] + (double)x[19] * x[19];
    double seg = ops_cpu.sumsq(xs, ns, 3), want_seg = ops_cpu.sumsq(xs, ns, 1) + s3;
    CHECK(seg == want_seg, "sumsq over segments = the sum of the segments in order", "got %.17g want %.17g", seg, want_seg);

    void *a = ops_cpu.dev_alloc(n * sizeof(float)), *b = ops_cpu.dev_alloc(1), *z = ops_cpu.dev_alloc(0);
    CHECK(a && b && z && (uintptr_t)a % 64 == 0 && (uintptr_t)b % 64 == 0 && (uintptr_t)z % 64 == 0,
          "dev_alloc 64-byte aligned, 0 and 1 bytes non-NULL", "a=%p b=%p z=%p", a, b, z);
    if (a) {
        ops_cpu.from_host(a, x, n * sizeof(float));
        ops_cpu.to_host(y, a, n * sizeof(float));
        CHECK(memcmp(y, x, n * sizeof(float)) == 0, "from_host then to_host round trip", "bytes differ");
        ops_cpu.zero(a, n * sizeof(float));
        ops_cpu.to_host(y, a, n * sizeof(float));
        int zero_ok = 1;
        for (size_t i = 0; i < n; i++) zero_ok &= y[i] == 0.0f;
        CHECK(zero_ok, "zero", "a non-zero element after zero");
        ops_cpu.from_host(a, x, n * sizeof(float));
        float *fa = a;
        ops_cpu.copy(fa + 1, fa, (n - 1) * sizeof(float)); /* overlapping: must behave as memmove */
        int copy_ok = fa[0] == x[0];
        for (size_t i = 1; i < n; i++) copy_ok &= fa[i] == x[i - 1];
        CHECK(copy_ok, "copy (device to device, overlapping)", "elements differ");
    }
    ops_cpu.synchronize();
    ops_cpu.dev_free(a); ops_cpu.dev_free(b); ops_cpu.dev_free(z);
    free(x); free(y); free(y0); free(ref);
}

/* ------------------------------------------------------------------------------------------ */
/* tables                                                                                     */

/* every entry of a table set; returns the name of the first unset one, NULL when complete (the
 * entries are the one list of ops, kernels/kernels.h: a new op is checked without a word here) */
static const char *table_hole(const ops_t *o) {
    if (!o->name) return "name";
    if (!o->cbytes) return "cbytes";
#define HOLE(ret, name, params, args, prec) if (!o->name) return #name;
#define DEVICE_HOLE(ret, name, params) if (!o->name) return #name;
    OPS_LIST(HOLE)
    OPS_DEVICE(DEVICE_HOLE)
#undef HOLE
#undef DEVICE_HOLE
    return NULL;
}

static void test_tables(void) {
    const char *h = table_hole(&ops_cpu);
    CHECK(h == NULL, "ops_cpu: every entry set", "%s is NULL", h);
    CHECK(strcmp(ops_cpu.name, "cpu") == 0, "ops_cpu name", "got %s", ops_cpu.name);
    h = table_hole(&ops_null);
    CHECK(h == NULL, "ops_null: every entry set", "%s is NULL", h);
    CHECK(ops_null.name && strcmp(ops_null.name, "null") == 0, "ops_null name", "got %s",
          ops_null.name ? ops_null.name : "(null)");
    void *p = ops_null.dev_alloc(1024);
    CHECK(p == NULL, "ops_null dev_alloc returns NULL", "got %p", p);
    /* it computes nothing: buffers stay as they were, with NULL pointers it does not crash */
    float buf[16], keep[16];
    for (int i = 0; i < 16; i++) buf[i] = keep[i] = (float)i;
    ops_null.matmul_forward(buf, buf, buf, 4, 4, 4, 0);
    ops_null.rmsnorm_forward(buf, buf, buf, buf, 4, 4, 1e-5f);
    ops_null.swiglu_forward(buf, buf, buf, 16);
    ops_null.adamw(buf, buf, buf, buf, 16, 1.0f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.1f, 0.05f);
    ops_null.adamw_fused(buf, buf, buf, buf, buf, 16, 0.5f, 1, 1.0f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.1f, 0.05f);
    ops_null.zero(buf, sizeof buf);
    ops_null.attention_forward(NULL, NULL, NULL, NULL, NULL, NULL, 1, 4, 2, 1, 8);
    ops_null.dev_free(NULL);
    ops_null.synchronize();
    const float *bp = buf;
    size_t b16 = 16;
    double ss = ops_null.sumsq(&bp, &b16, 1);
    CHECK(memcmp(buf, keep, sizeof buf) == 0 && ss == 0.0, "ops_null computes nothing",
          "buffer changed or sumsq %g", ss);
}

/* the devices' entries, and the trace hooks ops_null hands its arguments to while they are bound */
typedef struct { int calls; int N, Cin, Cout; const float *out; } mm_seen;
static void seen_matmul(void *ctx, floatX *out, const floatX *in, const floatX *w, int N, int Cin, int Cout, int acc) {
    mm_seen *m = ctx;
    (void)in; (void)w; (void)acc;
    m->calls++; m->N = N; m->Cin = Cin; m->Cout = Cout; m->out = out;
}
static void test_devices_and_trace(void) {
    const device_t *d[2] = {&device_cpu, &device_null};
    for (int k = 0; k < 2; k++) {
        int full = d[k]->name && d[k]->fp32 && d[k]->count && d[k]->select && d[k]->mem_info && d[k]->device_name &&
                   d[k]->peak_flops && d[k]->pool_reserved && device_ops(d[k], DTYPE_F32) == d[k]->fp32;
        CHECK(full, k ? "device_null: every entry set" : "device_cpu: every entry set", "an entry is NULL");
    }
    mm_seen m = {0};
    ops_trace t = {.ctx = &m, .matmul_forward = seen_matmul};
    float buf[4] = {0};
    const ops_trace *was = ops_null_bind(&t);
    ops_null.matmul_forward(buf, buf, buf, 3, 5, 7, 0);
    ops_null.rmsnorm_forward(buf, buf, buf, buf, 1, 1, 1e-5f);   /* no hook: skipped */
    ops_null_bind(was);
    ops_null.matmul_forward(buf, buf, buf, 1, 1, 1, 0);           /* unbound: not seen */
    CHECK(m.calls == 1 && m.N == 3 && m.Cin == 5 && m.Cout == 7 && m.out == buf && was == NULL,
          "ops_null hands its arguments to the bound trace", "%d calls, N %d Cin %d Cout %d", m.calls, m.N, m.Cin, m.Cout);
}

int main(void) {
    cpu_blas_init();
    test_tables();
    test_devices_and_trace();

    test_matmul(7, 5, 3);
    test_matmul(1, 13, 9);   /* a single token */
    test_matmul(33, 17, 65); /* non-square, odd */
    test_embedding();
    test_rmsnorm(5, 7);
    test_rmsnorm(1, 19);
    test_rmsnorm(3, 64);
    test_rope(2, 5, 3, 8, 10000.0f);
    test_rope(1, 1, 2, 4, 10000.0f);    /* T = 1: position 0 is the identity */
    test_rope(1, 3, 2, 272, 500000.0f); /* hd/2 = 136 > one frequency chunk */
    test_attention(2, 5, 4, 2, 4, 1);   /* GQA */
    test_attention(1, 1, 2, 1, 8, 1);   /* T = 1 */
    test_attention(2, 7, 3, 3, 6, 1);   /* MHA, odd sizes */
    test_attention(1, 70, 4, 2, 4, 1);  /* two query row blocks */
    test_attention(1, 200, 8, 2, 16, 0); /* four row blocks, forward only (FD would be slow) */
    test_attention_directional(1, 160, 4, 2, 16);  /* realistic head size, 3 row blocks, GQA */
    test_attention_directional(2, 130, 2, 2, 32);  /* MHA, partial last block */
    test_attention_large_scores(2, 70, 4, 2);      /* GQA, two row blocks */
    test_attention_large_scores(1, 9, 3, 3);       /* MHA, one partial block */
    test_swiglu();
    test_ce(6, 11, 3);
    test_ce(5, 7, 2);
    test_ce(4, 5, 1);
    test_ce_empty_shard();
    test_adamw(0.1f);
    test_adamw(0.0f);
    test_adamw_fused();
    test_helpers();

    double g64 = cpu_sgemm_gflops(64, 0.01);
    CHECK(g64 > 0.0 && isfinite(g64), "cpu_sgemm_gflops n=64 positive", "got %g", g64);
    printf("# single-thread sgemm n=512: %.1f GFLOP/s\n", cpu_sgemm_gflops(512, 0.3));
    printf("# single-thread sgemm n=1024: %.1f GFLOP/s\n", cpu_sgemm_gflops(1024, 0.5));
    return check_exit();
}
