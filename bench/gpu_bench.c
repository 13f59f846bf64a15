/* bench/gpu_bench.c — per-kernel GPU times of the bf16 CUDA table at a model's shapes, and the step
 * they add up to (build/gpu_bench; run by bench/gpu_bench.sh).
 *
 * What it is: for one model (default llama3.2-1b), batch B and sequence T it allocates the tensors of
 * one layer and of the head once, times every op of ops_cuda_bf16 the training step uses with CUDA
 * events (kernels/cuda/timing.cu: warm-up, median of 3 trials), and prints a '#'-headed table and,
 * with --json FILE, the same records as JSON. GEMMs are shown next to cublasGemmEx alone at the same
 * shape; attention forward/backward as TFLOP/s with the causal FLOP count (forward 4·B·H·T²·hd/2,
 * backward 2.5× that, the FlashAttention convention). Then a step breakdown: each op's time times
 * its calls per step (the op sequence of one dp = tp = 1 step: L layers forward and backward, the
 * head, the loss, AdamW and the grad norm over all parameters), their sum, and the MFU that sum
 * would give with the engine's FLOPs/token (core/run/metrics) against the device's datasheet peak.
 * AdamW and the norm are timed on at most 2^28 elements and scaled to the parameter count.
 * What it is not: the engine: the sum leaves out communication, allocation and launch gaps; the
 * engine's own step time is what bench/gpu_bench.sh measures with build/train next to it.
 * --small uses toy shapes so that the program can run through the host emulator (a test does; the
 * times printed there are host times of an emulation and mean nothing).
 * Usage: build/gpu_bench [--model NAME|PATH] [--batch-size B] [--seq-len T] [--reps R] [--json FILE]
 *        build/gpu_bench --small [--json FILE]
 */
#include "core/formats/config.h"
#include "core/run/metrics.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef MESHSWEEP_CUDA
#include "kernels/cuda/cuda_backend.h"

static const ops_t *D = &ops_cuda_bf16;

/* ---- the tensors of one layer and of the head -------------------------------------------------- */
typedef struct {
    int B, T, N, d, f, V, H, KV, hd, nq, nkv;
    float eps;
    float *rope;  /* RoPE cos/sin table [T, hd] fp32, as the engine builds it once per run */
    /* compute-precision (bf16) buffers, typed float* as ops_t passes them */
    float *x, *h, *in, *q, *k, *v, *att, *gate, *up, *act, *dx, *dq, *dk, *dv, *dgate, *dup, *w, *din, *logits;
    float *wnorm;
    /* fp32 */
    float *rstd, *lse, *ws, *dw, *logits32, *mx, *se, *tl, *loss, *p, *g, *m, *vv;
    int32_t *tok;
    size_t nopt; /* elements AdamW and sumsq are timed on */
    /* the GEMM being timed */
    int mm_cin, mm_cout;
} ctx_t;

static void *dalloc(size_t bytes) {
    void *p = D->dev_alloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "gpu_bench: out of device memory (%zu bytes)\n", bytes);
        exit(1);
    }
    D->zero(p, bytes);
    return p;
}
static float *cbuf(size_t n) { return dalloc(n * D->cbytes); }
static float *fbuf(size_t n) { return dalloc(n * sizeof(float)); }
/* small random bf16 values (so no op sees infinities or NaN) */
static void fill(float *dst, size_t n, float scale) {
    float *h = malloc(n * sizeof(float));
    if (!h) { fprintf(stderr, "gpu_bench: out of host memory\n"); exit(1); }
    uint64_t s = 0x9E3779B97F4A7C15ull ^ n;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        h[i] = scale * ((float)(s >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
    }
    float *tmp = fbuf(n);
    D->from_host(tmp, h, n * sizeof(float));
    D->to_compute(dst, tmp, n);
    D->dev_free(tmp);
    free(h);
}

/* ---- the timed calls ---------------------------------------------------------------------------- */
static void b_mm_fwd(void *p) {
    ctx_t *c = p;
    D->matmul_forward(c->h, c->in, c->w, c->N, c->mm_cin, c->mm_cout, 0);
}
static void b_mm_bwd(void *p) {
    ctx_t *c = p;
    D->matmul_backward(c->din, c->dw, c->h, c->in, c->w, c->N, c->mm_cin, c->mm_cout);
}
static void b_lm_f32(void *p) {
    ctx_t *c = p;
    D->matmul_forward_f32out(c->logits32, c->x, c->w, c->N, c->d, c->V);
}
static void b_att_fwd(void *p) {
    ctx_t *c = p;
    D->attention_forward(c->att, c->lse, NULL, c->q, c->k, c->v, c->B, c->T, c->H, c->KV, c->hd);
}
static void b_att_bwd(void *p) {
    ctx_t *c = p;
    D->attention_backward(c->dq, c->dk, c->dv, c->ws, c->att, c->att, c->lse, c->q, c->k, c->v, c->B, c->T, c->H,
                          c->KV, c->hd);
}
static void b_norm_fwd(void *p) {
    ctx_t *c = p;
    D->rmsnorm_forward(c->h, c->rstd, c->x, c->wnorm, c->N, c->d, c->eps);
}
static void b_norm_bwd(void *p) {
    ctx_t *c = p;
    D->rmsnorm_backward(c->dx, c->dw, c->h, c->x, c->wnorm, c->rstd, c->N, c->d);
}
static void b_rope_fwd(void *p) { /* q and k */
    ctx_t *c = p;
    D->rope_forward(c->q, c->q, c->rope, c->B, c->T, c->H, c->hd);
    D->rope_forward(c->k, c->k, c->rope, c->B, c->T, c->KV, c->hd);
}
static void b_rope_bwd(void *p) {
    ctx_t *c = p;
    D->rope_backward(c->dq, c->dq, c->rope, c->B, c->T, c->H, c->hd);
    D->rope_backward(c->dk, c->dk, c->rope, c->B, c->T, c->KV, c->hd);
}
static void b_swiglu_fwd(void *p) {
    ctx_t *c = p;
    D->swiglu_forward(c->act, c->gate, c->up, (size_t)c->N * c->f);
}
static void b_swiglu_bwd(void *p) {
    ctx_t *c = p;
    D->swiglu_backward(c->dgate, c->dup, c->act, c->gate, c->up, (size_t)c->N * c->f);
}
static void b_add(void *p) {
    ctx_t *c = p;
    D->add_inplace(c->dx, c->x, (size_t)c->N * c->d);
}
static void b_emb(void *p) { /* forward and backward */
    ctx_t *c = p;
    D->embedding_forward(c->x, c->tok, c->w, c->N, c->d, 0, c->V);
    D->embedding_backward(c->dw, c->x, c->tok, c->N, c->d, 0, c->V);
}
static void b_ce(void *p) { /* the loss pieces on fp32 logits, and the bf16 logit gradient (as the step) */
    ctx_t *c = p;
    D->ce_rowmax(c->mx, c->logits32, c->N, c->V, c->V);
    D->ce_sumexp(c->se, c->logits32, c->mx, c->N, c->V, c->V);
    D->ce_target(c->tl, c->logits32, c->tok, c->N, c->V, 0);
    D->ce_loss(c->loss, c->mx, c->se, c->tl, c->N);
    D->ce_backward(c->logits, c->logits32, c->mx, c->se, c->tok, 1.0f / (float)c->N, c->N, c->V, 0, c->V);
}
static void b_adamw(void *p) {
    ctx_t *c = p;
    D->adamw(c->p, c->g, c->m, c->vv, c->nopt, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 0.5f);
}
static void b_sumsq(void *p) {
    ctx_t *c = p;
    const float *g = c->g;
    (void)D->sumsq(&g, &c->nopt, 1);
}

/* ---- records ------------------------------------------------------------------------------------ */
typedef struct {
    const char *name;
    char shape[64];
    double ms, tflops, gbs, cublas_ms;
    double per_step; /* calls per training step (scaled for AdamW/sumsq) */
    const char *step_group;
} rec_t;
#define MAXREC 32
static rec_t recs[MAXREC];
static int nrec;

static rec_t *add(const char *name, const char *group, double per_step, double ms) {
    rec_t *r = &recs[nrec++];
    memset(r, 0, sizeof *r);
    r->name = name;
    r->step_group = group;
    r->per_step = per_step;
    r->ms = ms;
    r->cublas_ms = NAN;
    r->tflops = NAN;
    r->gbs = NAN;
    return r;
}

static int usage(void) {
    printf("usage: build/gpu_bench [--model NAME|PATH] [--batch-size B] [--seq-len T] [--reps R] [--json FILE]\n"
           "       build/gpu_bench --small [--json FILE]   toy shapes (what the emulator test runs)\n"
           "Per-kernel times of the bf16 CUDA ops at the model's shapes (CUDA events, median of 3 trials),\n"
           "GEMMs against cublasGemmEx alone, attention TFLOP/s, and the step those times add up to.\n"
           "Defaults: --model llama3.2-1b --batch-size 1 --seq-len 2048 --reps 10.\n");
    return 0;
}

int main(int argc, char **argv) {
    const char *model = "llama3.2-1b", *json = NULL;
    long long B = 1, T = 2048, reps = 10;
    int small = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help")) return usage();
        if (!strcmp(a, "--small")) { small = 1; continue; }
        if (strcmp(a, "--model") && strcmp(a, "--batch-size") && strcmp(a, "--seq-len") && strcmp(a, "--reps") &&
            strcmp(a, "--json")) {
            fprintf(stderr, "gpu_bench: unknown option %s (see --help)\n", a);
            return 2;
        }
        if (!v) { fprintf(stderr, "gpu_bench: %s needs a value\n", a); return 2; }
        i++;
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--json")) json = v;
        else {
            long long *dst = !strcmp(a, "--batch-size") ? &B : !strcmp(a, "--seq-len") ? &T : &reps;
            if (parse_int(v, 1, 1 << 20, dst)) {
                fprintf(stderr, "gpu_bench: %s: expected a positive integer, got '%s'\n", a, v);
                return 2;
            }
        }
    }
    model_config mc;
    char err[256];
    if (small) {
        model = "tiny";
        B = 1;
        T = 80; /* not a multiple of the attention tiles */
        reps = 1;
    }
    if (config_resolve(&mc, model, err, sizeof err) || config_validate(&mc, err, sizeof err)) {
        fprintf(stderr, "gpu_bench: %s\n", err);
        return 2;
    }
    if (small) { /* head dims the tensor-core attention takes, at toy sizes */
        mc.hidden_size = 128;
        mc.num_attention_heads = 2;
        mc.num_key_value_heads = 1;
        mc.intermediate_size = 256;
        mc.vocab_size = 300;
        mc.num_hidden_layers = 2;
    }
    if (cuda_device_count() == 0) {
        fprintf(stderr, "gpu_bench: no CUDA device\n");
        return 1;
    }
    if (cuda_select_device(0, err, sizeof err)) {
        fprintf(stderr, "gpu_bench: %s\n", err);
        return 1;
    }
    const char *dev = cuda_device_name();
    const double peak = cuda_peak_bf16_tflops(dev);
    ctx_t c;
    memset(&c, 0, sizeof c);
    c.B = (int)B;
    c.T = (int)T;
    c.N = (int)(B * T);
    c.d = mc.hidden_size;
    c.f = mc.intermediate_size;
    c.V = mc.vocab_size;
    c.H = mc.num_attention_heads;
    c.KV = mc.num_key_value_heads;
    c.hd = c.d / c.H;
    c.nq = c.H * c.hd;
    c.nkv = c.KV * c.hd;
    c.eps = (float)mc.rms_norm_eps;
    const size_t N = (size_t)c.N, wmax = (size_t)c.V * c.d > (size_t)c.f * c.d ? (size_t)c.V * c.d : (size_t)c.f * c.d;
    const size_t amax = (size_t)(c.f > c.d ? c.f : c.d) > (size_t)c.nq ? (size_t)(c.f > c.d ? c.f : c.d) : (size_t)c.nq;
    c.x = cbuf(N * c.d); c.h = cbuf(N * (amax > (size_t)c.V ? amax : (size_t)c.V)); c.dx = cbuf(N * c.d);
    c.q = cbuf(N * c.nq); c.k = cbuf(N * c.nkv); c.v = cbuf(N * c.nkv); c.att = cbuf(N * c.nq);
    c.dq = cbuf(N * c.nq); c.dk = cbuf(N * c.nkv); c.dv = cbuf(N * c.nkv);
    c.gate = cbuf(N * c.f); c.up = cbuf(N * c.f); c.act = cbuf(N * c.f); c.dgate = cbuf(N * c.f); c.dup = cbuf(N * c.f);
    c.w = cbuf(wmax); c.din = cbuf(N * amax); c.in = cbuf(N * amax); c.logits = cbuf(N * c.V); c.wnorm = cbuf(c.d);
    c.rstd = fbuf(N); c.lse = fbuf((size_t)c.B * c.H * c.T);
    c.ws = fbuf(attention_flash_ws_floats(c.B, c.T, c.H, c.KV, c.hd)); c.dw = fbuf(wmax); c.logits32 = fbuf(N * c.V);
    c.mx = fbuf(N); c.se = fbuf(N); c.tl = fbuf(N); c.loss = fbuf(N);
    const int64_t nparams = config_num_params(&mc);
    c.nopt = (size_t)nparams < ((size_t)1 << 28) ? (size_t)nparams : ((size_t)1 << 28);
    c.p = fbuf(c.nopt); c.g = fbuf(c.nopt); c.m = fbuf(c.nopt); c.vv = fbuf(c.nopt);
    {
        double *inv = malloc((size_t)c.hd / 2 * sizeof(double));
        float *tab = malloc((size_t)c.T * c.hd * sizeof(float));
        if (!inv || !tab) { fprintf(stderr, "gpu_bench: out of host memory\n"); return 1; }
        config_rope_inv_freq(&mc, inv);
        rope_table_fill(tab, inv, c.T, c.hd);
        c.rope = fbuf((size_t)c.T * c.hd);
        D->from_host(c.rope, tab, (size_t)c.T * c.hd * sizeof(float));
        free(inv); free(tab);
    }
    c.tok = dalloc(N * sizeof(int32_t));
    {
        int32_t *ht = malloc(N * sizeof(int32_t));
        if (!ht) { fprintf(stderr, "gpu_bench: out of host memory\n"); return 1; }
        for (size_t i = 0; i < N; i++) ht[i] = (int32_t)((i * 2654435761u) % (unsigned)c.V);
        D->from_host(c.tok, ht, N * sizeof(int32_t));
        free(ht);
    }
    fill(c.x, N * c.d, 1.0f); fill(c.q, N * c.nq, 1.0f); fill(c.k, N * c.nkv, 1.0f); fill(c.v, N * c.nkv, 1.0f);
    fill(c.w, wmax, 0.02f); fill(c.in, N * amax, 1.0f); fill(c.gate, N * c.f, 1.0f); fill(c.up, N * c.f, 1.0f);
    fill(c.logits, N * c.V, 1.0f); fill(c.wnorm, c.d, 1.0f); fill(c.att, N * c.nq, 1.0f);
    D->synchronize();
    const int W = small ? 0 : 2, R = (int)reps;
    const double L = mc.num_hidden_layers;

    /* GEMMs: the seven projections of a layer and lm_head */
    static const char *const mm_fwd[] = {"q_proj forward", "k_proj forward", "v_proj forward", "o_proj forward",
                                         "gate_proj forward", "up_proj forward", "down_proj forward",
                                         "lm_head forward (fp32 logits)"};
    static const char *const mm_bwd[] = {"q_proj backward", "k_proj backward", "v_proj backward",
                                         "o_proj backward", "gate_proj backward", "up_proj backward",
                                         "down_proj backward", "lm_head backward"};
    const int mm_in[] = {c.d, c.d, c.d, c.nq, c.d, c.d, c.f, c.d};
    const int mm_out[] = {c.nq, c.nkv, c.nkv, c.d, c.f, c.f, c.d, c.V};
    for (int j = 0; j < 8; j++) {
        c.mm_cin = mm_in[j];
        c.mm_cout = mm_out[j];
        const double fl = 2.0 * (double)N * mm_in[j] * mm_out[j], per = j < 7 ? L : 1.0;
        rec_t *r = add(mm_fwd[j], "matmul forward", per, cuda_time_ms(j < 7 ? b_mm_fwd : b_lm_f32, &c, W, R));
        snprintf(r->shape, sizeof r->shape, "%dx%dx%d", c.N, mm_in[j], mm_out[j]);
        r->tflops = fl / (r->ms * 1e-3) * 1e-12;
        r->cublas_ms = cuda_cublas_gemm_bf16_ms(c.N, mm_in[j], mm_out[j], W, R);
        r = add(mm_bwd[j], "matmul backward", per, cuda_time_ms(b_mm_bwd, &c, W, R)); /* din and dW */
        snprintf(r->shape, sizeof r->shape, "%dx%dx%d", c.N, mm_in[j], mm_out[j]);
        r->tflops = 2.0 * fl / (r->ms * 1e-3) * 1e-12;
    }
    const double att_fl = 4.0 * c.B * c.H * (double)c.T * c.T * c.hd / 2.0;
    rec_t *r = add("attention forward", "attention forward", L, cuda_time_ms(b_att_fwd, &c, W, R));
    snprintf(r->shape, sizeof r->shape, "B%d T%d H%d KV%d hd%d", c.B, c.T, c.H, c.KV, c.hd);
    r->tflops = att_fl / (r->ms * 1e-3) * 1e-12;
    r = add("attention backward", "attention backward", L, cuda_time_ms(b_att_bwd, &c, W, R));
    snprintf(r->shape, sizeof r->shape, "B%d T%d H%d KV%d hd%d", c.B, c.T, c.H, c.KV, c.hd);
    r->tflops = 2.5 * att_fl / (r->ms * 1e-3) * 1e-12;
    const double act = (double)N * c.d * D->cbytes, actf = (double)N * c.f * D->cbytes;
    r = add("rmsnorm forward", "norms", 2 * L + 1, cuda_time_ms(b_norm_fwd, &c, W, R));
    snprintf(r->shape, sizeof r->shape, "%dx%d", c.N, c.d);
    r->gbs = 2 * act / (r->ms * 1e-3) * 1e-9;
    r = add("rmsnorm backward", "norms", 2 * L + 1, cuda_time_ms(b_norm_bwd, &c, W, R));
    snprintf(r->shape, sizeof r->shape, "%dx%d", c.N, c.d);
    r->gbs = 4 * act / (r->ms * 1e-3) * 1e-9;
    r = add("rope forward (q and k)", "rope", L, cuda_time_ms(b_rope_fwd, &c, W, R));
    snprintf(r->shape, sizeof r->shape, "%dx(%d+%d)", c.N, c.nq, c.nkv);
    r = add("rope backward (q and k)", "rope", L, cuda_time_ms(b_rope_bwd, &c, W, R));
    snprintf(r->shape, sizeof r->shape, "%dx(%d+%d)", c.N, c.nq, c.nkv);
    r = add("swiglu forward", "swiglu", 2 * L, cuda_time_ms(b_swiglu_fwd, &c, W, R)); /* and its recompute */
    snprintf(r->shape, sizeof r->shape, "%dx%d", c.N, c.f);
    r->gbs = 3 * actf / (r->ms * 1e-3) * 1e-9;
    r = add("swiglu backward", "swiglu", L, cuda_time_ms(b_swiglu_bwd, &c, W, R));
    snprintf(r->shape, sizeof r->shape, "%dx%d", c.N, c.f);
    r->gbs = 7 * actf / (r->ms * 1e-3) * 1e-9;
    r = add("residual add", "residual add", 4 * L, cuda_time_ms(b_add, &c, W, R));
    snprintf(r->shape, sizeof r->shape, "%dx%d", c.N, c.d);
    r->gbs = 3 * act / (r->ms * 1e-3) * 1e-9;
    r = add("embedding forward+backward", "embedding", 1, cuda_time_ms(b_emb, &c, W, R));
    snprintf(r->shape, sizeof r->shape, "%dx%d", c.N, c.d);
    r = add("cross-entropy (fp32 logits)", "cross-entropy", 1, cuda_time_ms(b_ce, &c, W, R));
    snprintf(r->shape, sizeof r->shape, "%dx%d", c.N, c.V);
    r->gbs = (4.0 * 4 + D->cbytes) * N * c.V / (r->ms * 1e-3) * 1e-9; /* 4 fp32 reads + 1 write of the logits */
    const double scale = (double)nparams / (double)c.nopt;
    r = add("adamw", "optimizer", scale, cuda_time_ms(b_adamw, &c, W, R));
    snprintf(r->shape, sizeof r->shape, "%zu", c.nopt);
    r->gbs = 28.0 * c.nopt / (r->ms * 1e-3) * 1e-9; /* p, g, m, v read; p, m, v written */
    r = add("grad-norm sumsq", "optimizer", scale, cuda_time_ms(b_sumsq, &c, W, R));
    snprintf(r->shape, sizeof r->shape, "%zu", c.nopt);
    r->gbs = 4.0 * c.nopt / (r->ms * 1e-3) * 1e-9;

    /* ---- report ---- */
    printf("# gpu_bench: %s, model %s, B %d T %d, bf16 table%s\n", dev, mc.name, c.B, c.T,
           small ? " (toy shapes; emulated times mean nothing)" : "");
    printf("# %-28s %-24s %10s %9s %9s %10s %8s\n", "kernel", "shape", "ms", "TFLOP/s", "GB/s", "cublas_ms",
           "per_step");
    printf("# %-28s %-24s %10s %9s %9s %10s %8s\n", "-", "-", "ms", "1e12/s", "1e9B/s", "ms", "calls");
    for (int i = 0; i < nrec; i++)
        printf("  %-28s %-24s %10.4f %9.2f %9.1f %10.4f %8.1f\n", recs[i].name, recs[i].shape, recs[i].ms,
               recs[i].tflops, recs[i].gbs, recs[i].cublas_ms, recs[i].per_step);
    /* step breakdown by group */
    static const char *const groups[] = {"matmul forward", "matmul backward", "attention forward",
                                         "attention backward", "norms", "rope", "swiglu", "residual add",
                                         "embedding", "cross-entropy", "optimizer"};
    const int ng = (int)(sizeof groups / sizeof groups[0]);
    double gms[16] = {0}, total = 0.0;
    for (int i = 0; i < nrec; i++)
        for (int g = 0; g < ng; g++)
            if (!strcmp(recs[i].step_group, groups[g])) gms[g] += recs[i].ms * recs[i].per_step;
    for (int g = 0; g < ng; g++) total += gms[g];
    const double fpt = metrics_flops_per_token(&mc, c.T);
    const double tok_s = (double)N / (total * 1e-3);
    const double mfu = peak > 0 ? metrics_mfu(fpt, tok_s, peak * 1e12) : NAN;
    printf("# step breakdown (sum of kernel times x calls per step; no communication or gaps)\n");
    printf("# %-28s %10s %7s\n", "group", "ms/step", "share");
    for (int g = 0; g < ng; g++) printf("  %-28s %10.3f %6.1f%%\n", groups[g], gms[g], 100.0 * gms[g] / total);
    printf("# kernel-sum step %.3f ms, %.0f tok/s, MFU %.1f%% (peak %.0f TFLOP/s, %.4g FLOPs/token)\n", total, tok_s,
           100.0 * mfu, peak, fpt);
    if (json) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", json);
        FILE *fp = fopen(tmp, "w");
        if (!fp) { fprintf(stderr, "gpu_bench: cannot write %s\n", tmp); return 1; }
#define JNUM(x) (isfinite(x) ? (x) : -1.0)
        fprintf(fp, "{\n  \"device\": \"%s\", \"model\": \"%s\", \"batch_size\": %d, \"seq_len\": %d, \"small\": %s,\n",
                dev, mc.name, c.B, c.T, small ? "true" : "false");
        fprintf(fp, "  \"peak_tflops\": %.1f, \"flops_per_token\": %.6g,\n  \"kernels\": [\n", peak, fpt);
        for (int i = 0; i < nrec; i++)
            fprintf(fp,
                    "    {\"name\": \"%s\", \"group\": \"%s\", \"shape\": \"%s\", \"ms\": %.6g, \"tflops\": %.6g, "
                    "\"gb_s\": %.6g, \"cublas_ms\": %.6g, \"per_step\": %.6g}%s\n",
                    recs[i].name, recs[i].step_group, recs[i].shape, recs[i].ms, JNUM(recs[i].tflops),
                    JNUM(recs[i].gbs), JNUM(recs[i].cublas_ms), recs[i].per_step, i + 1 < nrec ? "," : "");
        fprintf(fp, "  ],\n  \"step\": {\"groups\": [\n");
        for (int g = 0; g < ng; g++)
            fprintf(fp, "    {\"group\": \"%s\", \"ms\": %.6g}%s\n", groups[g], gms[g], g + 1 < ng ? "," : "");
        fprintf(fp, "  ], \"kernel_sum_ms\": %.6g, \"tok_s\": %.6g, \"mfu\": %.6g}\n}\n", total, tok_s, JNUM(mfu));
        if (fclose(fp) != 0 || rename(tmp, json) != 0) { fprintf(stderr, "gpu_bench: cannot write %s\n", json); return 1; }
    }
    return 0;
}
#else
int main(void) {
    fprintf(stderr, "gpu_bench: built without CUDA\n");
    return 1;
}
#endif
