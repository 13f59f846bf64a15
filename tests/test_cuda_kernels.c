/* tests/test_cuda_kernels.c — every op of ops_cuda against the CPU reference ops_cpu.
 *
 * What it is: for each op, random inputs (fixed seed) go through ops_cpu on the host and through
 * ops_cuda on the device (from_host / to_host); forward outputs and accumulated gradients must agree:
 * max_i |got−want| / (|want| + rms(want)) <= 1e-4 for element-wise ops, 1e-3 for GEMM and
 * attention; any NaN fails. Covers GQA and MQA (KV < H), T not a multiple of the kernels' block
 * sizes, head dims 16..256, NULL gradients, accumulation into non-zero gradients, in-place RoPE,
 * padded vocabulary columns and dlogits aliasing logits in the cross-entropy, overlapping copies,
 * and the bf16 GEMM path.
 * The helpers, the metric and the op tests shared with tests/test_cuda_bf16.c are tests/cuda_check.h;
 * this file adds adamw, add/scale/sumsq, memory and the bf16 GEMM path.
 * What it is not: a finite-difference check (tests/test_kernels.c checks ops_cpu that way, so
 * agreement with it is agreement with the mathematics), nor a benchmark.
 * Without CUDA in the build it prints one skip line; without a GPU, one skip line per op group.
 * MESHSWEEP_CUDA_TEST_BACKEND=cpu runs the same comparisons with ops_cpu as the backend under test:
 * a self-check of this harness on machines without a GPU (every line must be ok).
 */
#define CK_SEED 0x243F6A8885A308D3ull
#include "tests/cuda_check.h"

#define TOL_EW 1e-4   /* element-wise ops */
#define TOL_MM 1e-3   /* GEMM, attention: long fp32 sums in a different order */

/* ---- adamw --------------------------------------------------------------------------------- */

static void test_adamw(void) {
    const size_t n = 70001;
    float *p = rnd(n, 1.0f), *g = rnd(n, 1e-2f), *m = rnd(n, 1e-3f), *v = rnd(n, 1e-4f);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    float *d_p = devf(p, n), *d_g = devf(g, n), *d_m = devf(m, n), *d_v = devf(v, n);
    ck_adamw(p, g, m, v, d_p, d_g, d_m, d_v, n, "", TOL_EW);
    ck_adamw_fused(n, 0, TOL_EW);
    ck_adamw_fused(1003, 1, TOL_EW);
    free(p); free(g); free(m); free(v);
    D->dev_free(d_p); D->dev_free(d_g); D->dev_free(d_m); D->dev_free(d_v);
}

/* ---- add / scale / sumsq ------------------------------------------------------------------------ */

static void test_helpers(void) {
    const size_t n = 300007;
    float *x, *y, *d_x, *d_y;
    ck_add_inplace(n, &x, &y, &d_x, &d_y);
    R->scale_inplace(y, -0.37f, n);
    D->scale_inplace(d_y, -0.37f, n);
    cmpf("cuda_scale_inplace", d_y, y, n, TOL_EW);
    const size_t sizes[4] = {n, 1, 257, 0};
    const float *hx = x, *dx = d_x;
    for (int i = 0; i < 4; i++) {
        double want = R->sumsq(&hx, &sizes[i], 1), got = D->sumsq(&dx, &sizes[i], 1);
        double err = fabs(got - want) / (fabs(want) + 1e-300);
        char nm[64];
        snprintf(nm, sizeof nm, "cuda_sumsq n%zu", sizes[i]);
        CHECK(isfinite(got) && (sizes[i] == 0 ? got == 0.0 : err < 1e-9), nm, "got %.17g want %.17g", got, want);
    }
    /* deterministic: the same bits twice */
    double a = D->sumsq(&dx, &n, 1), b = D->sumsq(&dx, &n, 1);
    CHECK(a == b, "cuda_sumsq_deterministic", "%.17g then %.17g", a, b);
    /* segments (one empty), one result: each segment's sum added in order, as the reference */
    const float *hs[4] = {x, x + 1000, x + 5000, x + 9000}, *ds[4] = {d_x, d_x + 1000, d_x + 5000, d_x + 9000};
    const size_t ns[4] = {1000, 0, 4000, n - 9000};
    double want = R->sumsq(hs, ns, 4), got = D->sumsq(ds, ns, 4);
    CHECK(isfinite(got) && fabs(got - want) <= 1e-9 * fabs(want), "cuda_sumsq_segments", "got %.17g want %.17g", got, want);
    const size_t none[2] = {0, 0};
    CHECK(D->sumsq(ds, none, 2) == 0.0 && D->sumsq(ds, ns, 0) == 0.0, "cuda_sumsq_no_elements", "not 0");
    free(x); free(y);
    D->dev_free(d_x); D->dev_free(d_y);
}

/* ---- memory ----------------------------------------------------------------------------------- */

static void test_memory(void) {
    const size_t n = 1000;
    float *x = rnd(n, 1.0f), *d_x = devf(x, n), *zeros = xmalloc(n * sizeof(float));
    memset(zeros, 0, n * sizeof(float));
    float *d_y = devf_nan(n);
    D->copy(d_y, d_x, n * sizeof(float));
    cmpf("cuda_copy", d_y, x, n, 0.0);
    /* overlapping copies have memmove semantics, like the CPU backend's */
    float *want = hcopy(x, n);
    memmove(want, want + 3, 900 * sizeof(float));
    D->copy(d_x, d_x + 3, 900 * sizeof(float));
    cmpf("cuda_copy_overlap_down", d_x, want, n, 0.0);
    memmove(want + 5, want, 900 * sizeof(float));
    D->copy(d_x + 5, d_x, 900 * sizeof(float));
    cmpf("cuda_copy_overlap_up", d_x, want, n, 0.0);
    D->zero(d_y, n * sizeof(float));
    cmpf("cuda_zero", d_y, zeros, n, 0.0);
    void *z = D->dev_alloc(0);
    CHECK(z != NULL, "cuda_dev_alloc_zero_bytes", "dev_alloc(0) returned NULL");
    D->dev_free(z);
    void *huge = D->dev_alloc((size_t)1 << 60);
    CHECK(huge == NULL, "cuda_dev_alloc_too_large", "dev_alloc(2^60) returned %p", huge);
    if (huge) D->dev_free(huge);
    /* the failed allocation must not poison later calls */
    D->add_inplace(d_y, d_x, n);
    D->synchronize();
    cmpf("cuda_after_failed_alloc", d_y, want, n, 0.0);
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
    float *d_in = devf(in, ni), *d_w = devf(w, nw), *d_dout = devf(dout, no);
    uint16_t *b_in = dbytes(NULL, ni * 2), *b_w = dbytes(NULL, nw * 2), *b_dout = dbytes(NULL, no * 2);
    cuda_f32_to_bf16(b_in, d_in, ni);
    cuda_f32_to_bf16(b_w, d_w, nw);
    cuda_f32_to_bf16(b_dout, d_dout, no);
    /* round trip equals host rounding exactly */
    for (size_t i = 0; i < ni; i++) in[i] = bf16_round(in[i]);
    for (size_t i = 0; i < nw; i++) w[i] = bf16_round(w[i]);
    for (size_t i = 0; i < no; i++) dout[i] = bf16_round(dout[i]);
    float *d_back = devf_nan(ni);
    cuda_bf16_to_f32(d_back, b_in, ni);
    cmpf("cuda_bf16_roundtrip", d_back, in, ni, 0.0);
    /* forward with fp32 output: the products of bf16 values are exact in fp32 */
    float *want = xmalloc(no * sizeof(float)), *d_out = devf_nan(no);
    R->matmul_forward(want, in, w, N, Cin, Cout, 0);
    cuda_matmul_forward_bf16_f32out(d_out, b_in, b_w, N, Cin, Cout, 0);
    cmpf("cuda_matmul_forward_bf16_f32out", d_out, want, no, TOL_MM);
    /* forward with bf16 output: one bf16 rounding (relative 2^-9) */
    uint16_t *b_out = dbytes(NULL, no * 2);
    cuda_matmul_forward_bf16(b_out, b_in, b_w, N, Cin, Cout, 0);
    cuda_bf16_to_f32(d_out, b_out, no);
    cmpf("cuda_matmul_forward_bf16", d_out, want, no, 5e-3);
    /* backward: din (bf16) from zero, dw (fp32) accumulated onto dw0 */
    float *wdin = xmalloc(ni * sizeof(float)), *wdw = hcopy(dw0, nw), *d_dw = devf(dw0, nw);
    memset(wdin, 0, ni * sizeof(float));
    uint16_t *b_din = dbytes(NULL, ni * 2);
    D->zero(b_din, ni * 2);
    R->matmul_backward(wdin, wdw, dout, in, w, N, Cin, Cout);
    cuda_matmul_backward_bf16(b_din, d_dw, b_dout, b_in, b_w, N, Cin, Cout);
    cuda_bf16_to_f32(d_back, b_din, ni);
    cmpf("cuda_matmul_backward_bf16_din", d_back, wdin, ni, 5e-3);
    cmpf("cuda_matmul_backward_bf16_dw", d_dw, wdw, nw, TOL_MM);
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

static float same(float f) { return f; }
static void setf(float *d, const float *h, size_t n) { D->from_host(d, h, n * sizeof(float)); }
static const ck_prec fp32 = {.prefix = "cuda_", .round = same, .dev_c = devf, .dev_c_nan = devf_nan, .set_c = setf,
                             .get_c = getf, .tol_c_ew = TOL_EW, .tol_c_mm = TOL_MM, .tol_c_copy = TOL_EW,
                             .tol_f_ew = TOL_EW, .tol_f_mm = TOL_MM};

int main(void) {
    P = &fp32;
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
    const char *name = NULL;
    int st = ck_select_device(groups, sizeof groups / sizeof groups[0], &name);
    if (st) return st > 0 ? check_exit() : 1;
    printf("# device: %s (bf16 peak %.0f TFLOP/s)\n", name, cuda_peak_bf16_tflops(name));
    CHECK(cuda_peak_bf16_tflops("NVIDIA H100 80GB HBM3") == 989.0 && cuda_peak_bf16_tflops("NVIDIA A100-SXM4-80GB") ==
              312.0 && cuda_peak_bf16_tflops("Tesla T4") == 0.0,
          "cuda_peak_bf16_tflops", "datasheet table wrong");
    CHECK(cuda_peak_bw_gbs("NVIDIA H200") == 4800.0 && cuda_peak_bw_gbs("NVIDIA H100 80GB HBM3") == 3350.0 &&
              cuda_peak_bw_gbs("NVIDIA GH200 480GB") == 4000.0 && cuda_peak_bw_gbs("NVIDIA A100-SXM4-80GB") == 2039.0 &&
              cuda_peak_bw_gbs("Tesla T4") == 0.0,
          "cuda_peak_bw_gbs", "datasheet table wrong");
    size_t fr = 0, tot = 0;
    cuda_mem_info(&fr, &tot);
    CHECK(tot > 0 && fr <= tot, "cuda_mem_info", "free %zu total %zu", fr, tot);
    D = &ops_cuda;
    /* every case in the emulator too (tests/emu/cuda_emu.cuh: its fibers make the largest one seconds) */
    run_all(1, 0);
    return check_exit();
#endif
}
