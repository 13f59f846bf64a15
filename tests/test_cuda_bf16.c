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
 * The helpers, the metric and the op tests shared with tests/test_cuda_kernels.c are
 * tests/cuda_check.h; this file gives them the bf16 buffers and tolerances and adds the fp32 ops the
 * table inherits, add_inplace, to_compute, cbytes and byte-based memory ops.
 * What it is not: a finite-difference check (tests/test_kernels.c checks ops_cpu that way), nor a
 * test of fp32 ops_cuda (tests/test_cuda_kernels.c), nor a benchmark.
 * Without CUDA in the build it prints one skip line; without a GPU, one skip line per op group.
 */
#include "kernels/kernels.h"
#include "tests/check.h"

#ifdef MESHSWEEP_CUDA
#define CK_SEED 0x13198A2E03707344ull
#include "tests/cuda_check.h"

#define TOL_BF 1e-2
#define TOL_F32 1e-3
#define TOL_FP32_OPS 1e-4 /* inherited fp32 ops (adamw, scale): as tests/test_cuda_kernels.c */

/* ---- bf16 buffers ------------------------------------------------------------------------------ */

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

/* bf16 device copy of a host array (typed float*, as ops_t passes it) */
static float *devb(const float *h, size_t n) {
    uint16_t *b = xmalloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) b[i] = f2b(h[i]);
    float *d = dbytes(b, n * sizeof(uint16_t));
    free(b);
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

/* the bf16 store rounds to nearest */
static void swiglu_rounding(const float *d_out, const float *out, size_t n) {
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
}

static const ck_prec bf16 = {.prefix = "cuda_bf16_", .round = bround, .dev_c = devb, .dev_c_nan = devb_nan, .set_c = setb,
                             .get_c = getb, .tol_c_ew = TOL_BF, .tol_c_mm = TOL_BF, .tol_c_copy = 0.0,
                             .tol_f_ew = TOL_F32, .tol_f_mm = TOL_F32, .swiglu_extra = swiglu_rounding};

/* ---- weight gradients summed over micro-batches -------------------------------------------------
 * The bf16 step keeps weight gradients in fp32 (docs/gpu.md#the-bf16-step): each micro-batch's dw
 * GEMM (bf16 operands, fp32 compute) adds into the fp32 dw with beta = 1, so the sum over K
 * micro-batches is rounded to fp32 once per micro-batch. Against a double reference of the same
 * bf16 inputs it stays at fp32 accuracy; the alternative the bf16 step does not take, the sum kept
 * in bf16 (each micro-batch's partial sum rounded to bf16, computed here on the host), is printed
 * next to it and must be far worse, or this test could not tell the two apart. */
static void test_dw_accumulate(void) {
    enum { K = 16, N = 64, Cin = 48, Cout = 40 };
    const size_t nw = (size_t)Cout * Cin;
    double *want = xmalloc(nw * sizeof(double));
    float *zero = xmalloc(nw * sizeof(float)), *bsum = xmalloc(nw * sizeof(float));
    for (size_t i = 0; i < nw; i++) { want[i] = 0; zero[i] = 0; bsum[i] = 0; }
    float *d_dw = devf(zero, nw);
    for (int k = 0; k < K; k++) {
        float *in = rnd((size_t)N * Cin, 1.0f), *dout = rnd((size_t)N * Cout, 1.0f);
        for (size_t i = 0; i < (size_t)N * Cin; i++) in[i] = bround(in[i]);
        for (size_t i = 0; i < (size_t)N * Cout; i++) dout[i] = bround(dout[i]);
        float *d_in = devb(in, (size_t)N * Cin), *d_dout = devb(dout, (size_t)N * Cout);
        D->matmul_backward(NULL, d_dw, d_dout, d_in, NULL, N, Cin, Cout);
        for (int o = 0; o < Cout; o++)
            for (int c = 0; c < Cin; c++) {
                double sum = 0;
                for (int n = 0; n < N; n++) sum += (double)dout[(size_t)n * Cout + o] * in[(size_t)n * Cin + c];
                want[(size_t)o * Cin + c] += sum;
                bsum[(size_t)o * Cin + c] = bround(bsum[(size_t)o * Cin + c] + (float)sum);
            }
        D->dev_free(d_in); D->dev_free(d_dout);
        free(in); free(dout);
    }
    float *got = getf(d_dw, nw);
    double rms = 0, e32 = 0, e16 = 0;
    for (size_t i = 0; i < nw; i++) rms += want[i] * want[i];
    rms = sqrt(rms / (double)nw);
    for (size_t i = 0; i < nw; i++) {
        const double a = fabs(got[i] - want[i]) / rms, b = fabs(bsum[i] - want[i]) / rms;
        if (!(a <= e32)) e32 = a; /* a NaN sticks */
        if (b > e16) e16 = b;
    }
    CHECK(e32 <= 1e-5, "cuda_bf16_dw_accumulate_fp32", "%d micro-batches: max error %.3g of rms(dw), want <= 1e-5", K, e32);
    printf("# dw over %d micro-batches, max error / rms(dw): fp32 sum (the step) %.3g, a bf16 sum would be %.3g\n", K,
           e32, e16);
    CHECK(e16 > 100 * e32, "cuda_bf16_dw_accumulate_bf16_sum_differs",
          "a bf16 sum %.3g is not far from the fp32 sum's %.3g: the test cannot tell them apart", e16, e32);
    free(want); free(zero); free(bsum); free(got);
    D->dev_free(d_dw);
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
    ck_adamw(p, g, m, v, d_p, d_g, d_m, d_v, n, " (fp32)", TOL_FP32_OPS);
    ck_adamw_fused(n, 0, TOL_FP32_OPS);
    ck_adamw_fused(1003, 1, TOL_FP32_OPS);
    R->scale_inplace(p, -0.37f, n);
    D->scale_inplace(d_p, -0.37f, n);
    cmpf("cuda_bf16_scale_inplace (fp32)", d_p, p, n, TOL_FP32_OPS);
    const float *hp = p, *dp = d_p;
    const double want = R->sumsq(&hp, &n, 1), got = D->sumsq(&dp, &n, 1);
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
    float *x, *y, *d_x, *d_y;
    ck_add_inplace(n, &x, &y, &d_x, &d_y);

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

static const char *const groups[] = {"cuda_bf16_matmul", "cuda_bf16_dw_accumulate", "cuda_bf16_embedding", "cuda_bf16_rmsnorm",
                                     "cuda_bf16_rope",   "cuda_bf16_attention", "cuda_bf16_swiglu",
                                     "cuda_bf16_ce",     "cuda_bf16_fp32_ops",  "cuda_bf16_helpers"};
#endif /* MESHSWEEP_CUDA */

int main(void) {
#ifndef MESHSWEEP_CUDA
    SKIP("cuda_bf16_kernels", "built without CUDA");
    return check_exit();
#else
    P = &bf16;
    /* referencing the table makes the link fail if ops_cuda_bf16.cu is missing from the library */
    printf("# backend under test: %s (cbytes %zu)\n", ops_cuda_bf16.name, ops_cuda_bf16.cbytes);
    const char *name = NULL;
    int st = ck_select_device(groups, sizeof groups / sizeof groups[0], &name);
    if (st) return st > 0 ? check_exit() : 1;
    printf("# device: %s\n", name);
    D = &ops_cuda_bf16;
    test_matmul();
    test_dw_accumulate();
    test_embedding();
    test_rmsnorm();
    test_rope();
    /* every case in the emulator too (tests/emu/cuda_emu.cuh: its fibers make the largest one seconds) */
    test_attention(0);
    test_swiglu();
    test_ce();
    test_fp32_ops();
    test_helpers();
    return check_exit();
#endif
}
