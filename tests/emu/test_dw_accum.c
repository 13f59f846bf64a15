/* tests/emu/test_dw_accum.c — the bf16 step's weight gradients summed over 4 micro-batches, through the whole
 * engine on the CUDA backend compiled for the host emulator (tests/emu/), against the fp32 CPU engine. Built
 * and run by tests/t_cuda_engine_emu.sh (linked with the emulator's engine objects), one rank, dp = 1.
 *
 * What it is: the same tiny model (same initial parameters, same 4 micro-batches of B x T tokens) run by the
 * CPU engine in fp32 and by the emulated CUDA engine in bf16 (ops_cuda_bf16: bf16 activations, fp32 weight
 * gradients). The bf16 engine runs each micro-batch alone (gradient g_k, no step in between, so the
 * parameters stay the same) and then the 4 accumulated (G, the step's gradient). S = sum_k g_k in double and
 * A = sum_k |g_k| per element. Checked:
 *   - G is S to fp32 rounding: every element receives at most B*T + 1 fp32 additions per micro-batch (the
 *     embedding's scatter-add one per token, every other weight one GEMM or norm reduction, which rounds
 *     once: the emulator's GEMM sums in double), each off by at most 2^-24 of a partial sum <= A, so
 *     |G - S| <= (B*T + 1) * 4 * 2^-24 * A = 4.05e-6 A, here by hand. The sum the issue feared, kept in bf16
 *     (each micro-batch's partial sum rounded to bf16: Bs = bf16(Bs + g_k), computed here on the host from
 *     the same g_k, the kindest form of it: one rounding per micro-batch), is off by up to 2^-9 of its
 *     partial sums: it must be more than 100 times that bound, or this test could not tell them apart.
 *   - both against the fp32 CPU run (rms of the difference over rms of the CPU gradient): G within 5e-2
 *     (what bf16 activations allow), and the bf16 sum further from it than G (printed side by side).
 * What it is not: a test of the kernels one by one (test_cuda_bf16 does that, with 16 micro-batches of one
 * GEMM) or of dp > 1 (the reduce-scatter's sums: t_cuda_engine_emu's runs). */
#include "tests/check.h"
#include "core/engine/engine.h"
#include "core/engine/model.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

enum { B = 2, T = 8, K = 4 };
static int32_t in[K][B * T], tg[K][B * T];

static model_config cfg(void) {
    model_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "dwaccum");
    c.vocab_size = 37; c.hidden_size = 32; c.intermediate_size = 48; c.num_hidden_layers = 2;
    c.num_attention_heads = 4; c.num_key_value_heads = 2; c.rms_norm_eps = 1e-5; c.rope_theta = 10000;
    c.max_position_embeddings = 64; c.initializer_range = 0.2;
    return c;
}

typedef struct { engine_t E; model_t M; comm_group g1, g2; } net;

static void build(net *n, const char *backend, dtype_t t) {
    char err[256];
    const device_t *dev = engine_device(backend);
    if (!dev || (dev->select && dev->select(0, err, sizeof err))) { printf("FAIL dw_accum_emu_%s: no device\n", backend); exit(1); }
    if (engine_init(&n->E, dev, t, err, sizeof err)) { printf("FAIL dw_accum_emu_%s: %s\n", backend, err); exit(1); }
    mesh_t m;
    mesh_init(&m, 1, 0, 1, err, sizeof err);
    comm_null_group(&n->g1, &n->E.comm, 1, 0);
    comm_null_group(&n->g2, &n->E.comm, 1, 0);
    model_config c = cfg();
    model_opts o = {.B = B, .T = T, .prefetch = 1};
    if (model_init(&n->M, &n->E, &c, &m, &n->g1, &n->g2, &o, err, sizeof err)) {
        printf("FAIL dw_accum_emu_%s: model_init: %s\n", backend, err);
        exit(1);
    }
    model_init_params(&n->M, 11);
}

/* micro-batches first..first+count-1 accumulated as one step of `count`; their gradient into out (host,
 * every unit's owned segments, in order); returns the number of elements */
static size_t grads(net *n, int first, int count, double *out) {
    const float scale = 1.0f / (float)(B * T * K);
    for (int k = 0; k < count; k++) {
        model_accum_begin(&n->M, k, count);
        model_forward_backward(&n->M, in[first + k], tg[first + k], scale);
    }
    size_t m = 0;
    for (int i = 0; i < n->M.fsdp.n; i++) {
        fsdp_unit *u = &n->M.fsdp.u[i];
        float *h = malloc((size_t)u->shard * sizeof(float));
        if (!h) { printf("FAIL dw_accum_emu_host_memory\n"); exit(1); }
        n->E.ops->to_host(h, u->g, (size_t)u->shard * sizeof(float));
        for (int s = 0; s < u->nseg; s++)
            for (int64_t j = 0; j < u->seg[s].rows * u->seg[s].cols; j++) out[m++] = h[u->seg[s].off + j];
        free(h);
    }
    return m;
}

static float bround(float f) { /* fp32 -> bf16 -> fp32, nearest even (finite values) */
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

int main(void) {
    uint64_t s = 12345;
    for (int k = 0; k < K; k++)
        for (int i = 0; i < B * T; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            in[k][i] = (int32_t)((s >> 33) % 37);
            tg[k][i] = (int32_t)((s >> 45) % 37);
        }
    static net cpu, gpu;
    build(&cpu, "cpu", DTYPE_F32);
    build(&gpu, "cuda", DTYPE_BF16);
    size_t cap = 0;
    for (int i = 0; i < gpu.M.fsdp.n; i++) cap += (size_t)gpu.M.fsdp.u[i].padded;
    double *ref = calloc(cap, sizeof(double)), *G = calloc(cap, sizeof(double)), *g = calloc(cap, sizeof(double));
    double *S = calloc(cap, sizeof(double)), *A = calloc(cap, sizeof(double));
    float *bs = calloc(cap, sizeof(float));
    if (!ref || !G || !g || !S || !A || !bs) { printf("FAIL dw_accum_emu_host_memory\n"); return 1; }
    size_t n = grads(&cpu, 0, K, ref);
    for (int k = 0; k < K; k++) {
        grads(&gpu, k, 1, g);
        for (size_t i = 0; i < n; i++) { S[i] += g[i]; A[i] += fabs(g[i]); bs[i] = bround(bs[i] + (float)g[i]); }
    }
    size_t n2 = grads(&gpu, 0, K, G);
    CHECK(n2 == n && n > 1000, "dw_accum_emu_same_segments", "%zu elements on CUDA, %zu on the CPU", n2, n);
    const double bound = (double)(B * T + 1) * K * ldexp(1.0, -24);
    double e_new = 0, e_old = 0, d_new = 0, d_old = 0, rr = 0;
    for (size_t i = 0; i < n; i++) {
        if (A[i] > 0) {
            const double a = fabs(G[i] - S[i]) / A[i], b = fabs((double)bs[i] - S[i]) / A[i];
            if (!(a <= e_new)) e_new = a; /* a NaN sticks */
            if (b > e_old) e_old = b;
        }
        d_new += (G[i] - ref[i]) * (G[i] - ref[i]);
        d_old += ((double)bs[i] - ref[i]) * ((double)bs[i] - ref[i]);
        rr += ref[i] * ref[i];
    }
    d_new = sqrt(d_new / rr); d_old = sqrt(d_old / rr);
    printf("# %zu weight-gradient elements, %d micro-batches of %d x %d tokens\n", n, K, B, T);
    printf("# max |sum - exact| / sum|g_k|: the step's fp32 sum %.3g (bound %.3g), a bf16 sum %.3g\n", e_new, bound, e_old);
    printf("# rms difference / rms against the fp32 CPU run: the step %.4g, a bf16 sum %.4g\n", d_new, d_old);
    CHECK(e_new <= bound, "dw_accum_emu_fp32_sum_within_bound", "%.3g > %.3g of sum|g_k|", e_new, bound);
    CHECK(e_old > 100 * bound, "dw_accum_emu_bf16_sum_differs",
          "a bf16 sum is off by %.3g, not 100x the fp32 bound %.3g: the test cannot tell them apart", e_old, bound);
    CHECK(d_new <= 5e-2, "dw_accum_emu_against_cpu", "the step's gradient is %.3g (rms) from the fp32 CPU run", d_new);
    CHECK(d_old > d_new, "dw_accum_emu_bf16_sum_further_from_cpu",
          "a bf16 sum %.4g is not further from the CPU run than the step's %.4g", d_old, d_new);
    free(ref); free(G); free(g); free(S); free(A); free(bs);
    model_free(&gpu.M); engine_release(&gpu.E);
    model_free(&cpu.M); engine_release(&cpu.E);
    return check_exit();
}
