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
 * would give with the engine's FLOPs/token (core/job/metrics) against the device's datasheet peak.
 * AdamW and the norm are timed on at most 2^28 elements and scaled to the parameter count.
 * What it is not: the engine: the sum leaves out communication, allocation and launch gaps; the
 * engine's own step time is what bench/gpu_bench.sh measures with build/train next to it.
 * --small uses toy shapes so that the program can run through the host emulator (a test does; the
 * times printed there are host times of an emulation and mean nothing).
 * Usage: build/gpu_bench [--model NAME|PATH] [--batch-size B] [--seq-len T] [--reps R] [--json FILE]
 *        build/gpu_bench --small [--json FILE]
 */
#include "core/formats/config.h"
#include "core/job/metrics.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef MESHSWEEP_CUDA
#include "kernels/cuda/cuda_backend.h"
#include "core/engine/comm_nccl.h"
#include "core/common/parse.h"
#include "core/job/catalog.h"

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
    float *pc; /* the fused AdamW's bf16 copy [nopt] */
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
static void b_adamw_fused(void *p) { /* as the engine at dp = 1: the bf16 copy out, the gradient zeroed */
    ctx_t *c = p;
    D->adamw_fused(c->p, c->pc, c->g, c->m, c->vv, c->nopt, 0.8f, 1, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 0.5f);
}
static void b_copy(void *p) { /* device to device, the bandwidth reference */
    ctx_t *c = p;
    D->copy(c->m, c->vv, c->nopt * sizeof(float));
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
    double per_step; /* calls per training step (scaled for AdamW/sumsq); 0: not part of the step */
    const char *step_group;
} rec_t;
#define MAXREC 64
static rec_t recs[MAXREC];
static int nrec;

static rec_t *add(const char *name, const char *group, double per_step, double ms) {
    if (nrec == MAXREC) { fprintf(stderr, "gpu_bench: more than %d records\n", MAXREC); exit(1); }
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
static double tflops_of(double flops, double ms) { return flops / (ms * 1e-3) * 1e-12; }
static double gbs_of(double bytes, double ms) { return bytes / (ms * 1e-3) * 1e-9; }

/* what the report needs besides the records */
typedef struct {
    const char *dev;
    double peak_tflops, gemm_peak_tflops, peak_gbs, copy_gbs, fpt, fpt_causal;
    double step_ms, tok_s, mfu, mfu_causal, mfu_gemm, mfu_causal_gemm;
} summary_t;

static int usage(void) {
    printf("usage: build/gpu_bench [--model NAME|PATH] [--batch-size B] [--seq-len T] [--reps R] [--json FILE]\n"
           "       build/gpu_bench --small [--json FILE]   toy shapes (what the emulator test runs)\n"
           "       build/gpu_bench --versions   one line: driver, runtime, cuBLAS and NCCL versions; exit 0 with a\n"
           "                                    device, 1 without, 3 when the driver is too old for the runtime\n"
           "Per-kernel times of the bf16 CUDA ops at the model's shapes (CUDA events, median of 3 trials),\n"
           "GEMMs against cublasGemmEx alone, attention TFLOP/s (also swept over head dims 64, 128 and T 2048,\n"
           "8192), the fused AdamW's bandwidth, and the step those times add up to, with its MFU in two\n"
           "conventions against the datasheet and the measured GEMM peak.\n"
           "Defaults: --model llama3.2-1b --batch-size 1 --seq-len 2048 --reps 10.\n");
    return 0;
}

/* the GPU kit's first line (gpukit/gpu_check.sh, stage versions): what this machine runs the build with */
static int print_versions(void) {
    char cu[160], why[256], nccl[64];
    int r = cuda_versions(cu, sizeof cu, why, sizeof why);
    comm_nccl_version(nccl, sizeof nccl);
    printf("%s, NCCL %s%s%s\n", cu, nccl, why[0] ? ": " : "", why);
    return r == 2 ? 3 : r;
}

typedef struct {
    const char *model, *json;
    long long B, T, reps;
    int small;
} bench_opts;

/* 0: go on; else the exit status (after --help: 0 is returned through *done) */
static int parse_args(int argc, char **argv, bench_opts *o, int *done) {
    *o = (bench_opts){.model = "llama3.2-1b", .B = 1, .T = 2048, .reps = 10};
    *done = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help")) { *done = 1; return usage(); }
        if (!strcmp(a, "--versions")) { *done = 1; return print_versions(); }
        if (!strcmp(a, "--small")) { o->small = 1; continue; }
        if (strcmp(a, "--model") && strcmp(a, "--batch-size") && strcmp(a, "--seq-len") && strcmp(a, "--reps") &&
            strcmp(a, "--json")) {
            fprintf(stderr, "gpu_bench: unknown option %s (see --help)\n", a);
            return 2;
        }
        if (!v) { fprintf(stderr, "gpu_bench: %s needs a value\n", a); return 2; }
        i++;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--json")) o->json = v;
        else {
            long long *dst = !strcmp(a, "--batch-size") ? &o->B : !strcmp(a, "--seq-len") ? &o->T : &o->reps;
            if (parse_int(v, 1, 1 << 20, dst)) {
                fprintf(stderr, "gpu_bench: %s: expected a positive integer, got '%s'\n", a, v);
                return 2;
            }
        }
    }
    if (o->small) { /* T not a multiple of the attention tiles; head dims the tensor cores take */
        o->model = "tiny";
        o->B = 1;
        o->T = 80;
        o->reps = 1;
    }
    return 0;
}

/* the model's config (the toy one with --small) */
static int resolve_model(const bench_opts *o, model_config *mc) {
    char err[256];
    if (catalog_model(mc, o->model, err, sizeof err) || config_validate(mc, err, sizeof err)) {
        fprintf(stderr, "gpu_bench: %s\n", err);
        return 2;
    }
    if (o->small) {
        mc->hidden_size = 128;
        mc->num_attention_heads = 2;
        mc->num_key_value_heads = 1;
        mc->intermediate_size = 256;
        mc->vocab_size = 300;
        mc->num_hidden_layers = 2;
    }
    return 0;
}

/* every buffer of one layer and of the head, filled with small random values */
static void ctx_alloc(ctx_t *c, const model_config *mc, int B, int T) {
    memset(c, 0, sizeof *c);
    c->B = B; c->T = T; c->N = B * T;
    c->d = mc->hidden_size; c->f = mc->intermediate_size; c->V = mc->vocab_size;
    c->H = mc->num_attention_heads; c->KV = mc->num_key_value_heads;
    c->hd = c->d / c->H; c->nq = c->H * c->hd; c->nkv = c->KV * c->hd;
    c->eps = (float)mc->rms_norm_eps;
    const size_t N = (size_t)c->N, fd = (size_t)(c->f > c->d ? c->f : c->d);
    const size_t wmax = (size_t)c->V * c->d > (size_t)c->f * c->d ? (size_t)c->V * c->d : (size_t)c->f * c->d;
    const size_t amax = fd > (size_t)c->nq ? fd : (size_t)c->nq;
    c->x = cbuf(N * c->d); c->h = cbuf(N * (amax > (size_t)c->V ? amax : (size_t)c->V)); c->dx = cbuf(N * c->d);
    c->q = cbuf(N * c->nq); c->k = cbuf(N * c->nkv); c->v = cbuf(N * c->nkv); c->att = cbuf(N * c->nq);
    c->dq = cbuf(N * c->nq); c->dk = cbuf(N * c->nkv); c->dv = cbuf(N * c->nkv);
    c->gate = cbuf(N * c->f); c->up = cbuf(N * c->f); c->act = cbuf(N * c->f);
    c->dgate = cbuf(N * c->f); c->dup = cbuf(N * c->f);
    c->w = cbuf(wmax); c->din = cbuf(N * amax); c->in = cbuf(N * amax); c->logits = cbuf(N * c->V);
    c->wnorm = cbuf(c->d);
    c->rstd = fbuf(N); c->lse = fbuf((size_t)c->B * c->H * c->T);
    c->ws = fbuf(attention_flash_ws_floats(c->B, c->T, c->H, c->KV, c->hd));
    c->dw = fbuf(wmax); c->logits32 = fbuf(N * c->V);
    c->mx = fbuf(N); c->se = fbuf(N); c->tl = fbuf(N); c->loss = fbuf(N);
    const int64_t nparams = config_num_params(mc);
    c->nopt = (size_t)nparams < ((size_t)1 << 28) ? (size_t)nparams : ((size_t)1 << 28);
    c->p = fbuf(c->nopt); c->g = fbuf(c->nopt); c->m = fbuf(c->nopt); c->vv = fbuf(c->nopt); c->pc = cbuf(c->nopt);
    double *inv = malloc((size_t)c->hd / 2 * sizeof(double));
    float *tab = malloc((size_t)c->T * c->hd * sizeof(float));
    int32_t *ht = malloc(N * sizeof(int32_t));
    if (!inv || !tab || !ht) { fprintf(stderr, "gpu_bench: out of host memory\n"); exit(1); }
    config_rope_inv_freq(mc, inv);
    rope_table_fill(tab, inv, c->T, c->hd);
    c->rope = fbuf((size_t)c->T * c->hd);
    D->from_host(c->rope, tab, (size_t)c->T * c->hd * sizeof(float));
    c->tok = dalloc(N * sizeof(int32_t));
    for (size_t i = 0; i < N; i++) ht[i] = (int32_t)((i * 2654435761u) % (unsigned)c->V);
    D->from_host(c->tok, ht, N * sizeof(int32_t));
    free(inv); free(tab); free(ht);
    fill(c->x, N * c->d, 1.0f); fill(c->q, N * c->nq, 1.0f); fill(c->k, N * c->nkv, 1.0f); fill(c->v, N * c->nkv, 1.0f);
    fill(c->w, wmax, 0.02f); fill(c->in, N * amax, 1.0f); fill(c->gate, N * c->f, 1.0f); fill(c->up, N * c->f, 1.0f);
    fill(c->logits, N * c->V, 1.0f); fill(c->wnorm, c->d, 1.0f); fill(c->att, N * c->nq, 1.0f);
    D->synchronize();
}

/* the seven projections of a layer and lm_head, forward and backward, next to cublasGemmEx alone */
static void bench_gemms(ctx_t *c, int W, int R, double L) {
    static const char *const fwd[] = {"q_proj forward", "k_proj forward", "v_proj forward", "o_proj forward",
                                      "gate_proj forward", "up_proj forward", "down_proj forward",
                                      "lm_head forward (fp32 logits)"};
    static const char *const bwd[] = {"q_proj backward", "k_proj backward", "v_proj backward", "o_proj backward",
                                      "gate_proj backward", "up_proj backward", "down_proj backward",
                                      "lm_head backward"};
    const int in[] = {c->d, c->d, c->d, c->nq, c->d, c->d, c->f, c->d};
    const int out[] = {c->nq, c->nkv, c->nkv, c->d, c->f, c->f, c->d, c->V};
    for (int j = 0; j < 8; j++) {
        c->mm_cin = in[j];
        c->mm_cout = out[j];
        const double fl = 2.0 * (double)c->N * in[j] * out[j], per = j < 7 ? L : 1.0;
        rec_t *r = add(fwd[j], "matmul forward", per, cuda_time_ms(j < 7 ? b_mm_fwd : b_lm_f32, c, W, R));
        snprintf(r->shape, sizeof r->shape, "%dx%dx%d", c->N, in[j], out[j]);
        r->tflops = tflops_of(fl, r->ms);
        r->cublas_ms = cuda_cublas_gemm_bf16_ms(c->N, in[j], out[j], W, R);
        r = add(bwd[j], "matmul backward", per, cuda_time_ms(b_mm_bwd, c, W, R)); /* din and dW */
        snprintf(r->shape, sizeof r->shape, "%dx%dx%d", c->N, in[j], out[j]);
        r->tflops = tflops_of(2.0 * fl, r->ms);
    }
}

/* attention at the model's shape, the norms, rope, swiglu, residual, embedding, loss, optimizer */
static void bench_layer_ops(ctx_t *c, int W, int R, double L, double opt_scale) {
    const double att_fl = 4.0 * c->B * c->H * (double)c->T * c->T * c->hd / 2.0;
    rec_t *r = add("attention forward", "attention forward", L, cuda_time_ms(b_att_fwd, c, W, R));
    snprintf(r->shape, sizeof r->shape, "B%d T%d H%d KV%d hd%d", c->B, c->T, c->H, c->KV, c->hd);
    r->tflops = tflops_of(att_fl, r->ms);
    r = add("attention backward", "attention backward", L, cuda_time_ms(b_att_bwd, c, W, R));
    snprintf(r->shape, sizeof r->shape, "B%d T%d H%d KV%d hd%d", c->B, c->T, c->H, c->KV, c->hd);
    r->tflops = tflops_of(2.5 * att_fl, r->ms);
    /* the same backward with dQ folded into the dK/dV pass (fp32 atomics, --deterministic off): beside the
     * step, not in it (the default run is deterministic) */
    float *ws = c->ws;
    c->ws = fbuf(attention_flash_fold_ws_floats(c->B, c->T, c->H, c->KV, c->hd));
    const int was = cuda_attention_set_deterministic(0);
    r = add("attention backward, dQ folded (--deterministic off)", "reference", 0, cuda_time_ms(b_att_bwd, c, W, R));
    cuda_attention_set_deterministic(was);
    D->dev_free(c->ws);
    c->ws = ws;
    snprintf(r->shape, sizeof r->shape, "B%d T%d H%d KV%d hd%d", c->B, c->T, c->H, c->KV, c->hd);
    r->tflops = tflops_of(2.5 * att_fl, r->ms);
    const double act = (double)c->N * c->d * D->cbytes, actf = (double)c->N * c->f * D->cbytes;
    struct { const char *name, *group; double per; void (*fn)(void *); double bytes; int wide; } ops[] = {
        {"rmsnorm forward", "norms", 2 * L + 1, b_norm_fwd, 2 * act, 0},
        {"rmsnorm backward", "norms", 2 * L + 1, b_norm_bwd, 4 * act, 0},
        {"rope forward (q and k)", "rope", L, b_rope_fwd, NAN, 2},
        {"rope backward (q and k)", "rope", L, b_rope_bwd, NAN, 2},
        {"swiglu forward", "swiglu", 2 * L, b_swiglu_fwd, 3 * actf, 1}, /* and its recompute */
        {"swiglu backward", "swiglu", L, b_swiglu_bwd, 7 * actf, 1},
        {"residual add", "residual add", 4 * L, b_add, 3 * act, 0},
        {"embedding forward+backward", "embedding", 1, b_emb, NAN, 0},
        /* 4 fp32 reads and 1 compute-precision write of the logits */
        {"cross-entropy (fp32 logits)", "cross-entropy", 1, b_ce, (4.0 * 4 + D->cbytes) * c->N * c->V, 3},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        r = add(ops[i].name, ops[i].group, ops[i].per, cuda_time_ms(ops[i].fn, c, W, R));
        if (ops[i].wide == 2) snprintf(r->shape, sizeof r->shape, "%dx(%d+%d)", c->N, c->nq, c->nkv);
        else snprintf(r->shape, sizeof r->shape, "%dx%d", c->N, ops[i].wide == 1 ? c->f : ops[i].wide ? c->V : c->d);
        r->gbs = gbs_of(ops[i].bytes, r->ms);
    }
    const double n = (double)c->nopt;
    /* p, g, m, v read; p, m, v written; the bf16 copy written; g zeroed */
    r = add("adamw fused (bf16 copy, zero g)", "optimizer", opt_scale, cuda_time_ms(b_adamw_fused, c, W, R));
    snprintf(r->shape, sizeof r->shape, "%zu", c->nopt);
    r->gbs = gbs_of((28.0 + D->cbytes + 4.0) * n, r->ms);
    r = add("grad-norm sumsq", "optimizer", opt_scale, cuda_time_ms(b_sumsq, c, W, R));
    snprintf(r->shape, sizeof r->shape, "%zu", c->nopt);
    r->gbs = gbs_of(4.0 * n, r->ms);
    r = add("adamw (unfused, reference)", "reference", 0, cuda_time_ms(b_adamw, c, W, R));
    snprintf(r->shape, sizeof r->shape, "%zu", c->nopt);
    r->gbs = gbs_of(28.0 * n, r->ms);
}

/* ---- attention sweep: head dims 64 and 128 at T 2048 and 8192 ------------------------------------ */
typedef struct {
    int B, T, H, hd;
    float *q, *k, *v, *o, *g, *dq, *dk, *dv, *lse, *ws;
} att_ctx;
static void b_sweep_fwd(void *p) {
    att_ctx *a = p;
    D->attention_forward(a->o, a->lse, NULL, a->q, a->k, a->v, a->B, a->T, a->H, a->H, a->hd);
}
static void b_sweep_bwd(void *p) {
    att_ctx *a = p;
    D->attention_backward(a->dq, a->dk, a->dv, a->ws, a->g, a->o, a->lse, a->q, a->k, a->v, a->B, a->T, a->H, a->H,
                          a->hd);
}
/* MHA over `tokens` tokens of width `width` (FlashAttention-2's benchmark: 16384 tokens, 2048) */
static void bench_attention_sweep(int small, int W, int R) {
    static char names[12][56]; /* "attention sweep forward hd64 T2048": record names live as long as the records */
    const int hds[2] = {64, 128}, Ts[2] = {2048, 8192}, width = small ? 128 : 2048, tokens = small ? 64 : 16384;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < (small ? 1 : 2); j++) {
            att_ctx a;
            a.T = small ? 64 : Ts[j];
            a.B = tokens / a.T > 0 ? tokens / a.T : 1;
            a.hd = hds[i];
            a.H = width / a.hd;
            const size_t n = (size_t)a.B * a.T * a.H * a.hd;
            float **bufs[] = {&a.q, &a.k, &a.v, &a.o, &a.g, &a.dq, &a.dk, &a.dv};
            for (size_t b = 0; b < sizeof bufs / sizeof bufs[0]; b++) {
                *bufs[b] = cbuf(n);
                if (b < 5) fill(*bufs[b], n, 1.0f);
            }
            a.lse = fbuf((size_t)a.B * a.H * a.T);
            a.ws = fbuf(attention_flash_fold_ws_floats(a.B, a.T, a.H, a.H, a.hd)); /* either backward's */
            const double fl = 4.0 * a.B * a.H * (double)a.T * a.T * a.hd / 2.0;
            for (int k = 0; k < 3; k++) { /* forward, backward, backward with dQ folded (--deterministic off) */
                char *nm = names[(i * 2 + j) * 3 + k];
                snprintf(nm, sizeof names[0], "attention sweep %s hd%d T%d",
                         k == 2 ? "backward dQ folded" : k ? "backward" : "forward", a.hd, a.T);
                const int was = cuda_attention_set_deterministic(k != 2);
                const double ms = cuda_time_ms(k ? b_sweep_bwd : b_sweep_fwd, &a, W, R);
                cuda_attention_set_deterministic(was);
                rec_t *r = add(nm, "attention sweep", 0, ms);
                snprintf(r->shape, sizeof r->shape, "B%d T%d H%d hd%d causal", a.B, a.T, a.H, a.hd);
                r->tflops = tflops_of(k ? 2.5 * fl : fl, r->ms);
            }
            for (size_t b = 0; b < sizeof bufs / sizeof bufs[0]; b++) D->dev_free(*bufs[b]);
            D->dev_free(a.lse);
            D->dev_free(a.ws);
        }
}

/* the measured references: the bf16 GEMM peak (8192³; 256³ with --small) and a device copy */
static void bench_references(ctx_t *c, int small, int W, int R, summary_t *s) {
    const int n = small ? 256 : 8192;
    rec_t *r = add("cublas bf16 GEMM peak", "reference", 0, cuda_cublas_gemm_bf16_ms(n, n, n, W, R));
    snprintf(r->shape, sizeof r->shape, "%dx%dx%d", n, n, n);
    r->tflops = tflops_of(2.0 * n * (double)n * n, r->ms);
    s->gemm_peak_tflops = r->tflops;
    r = add("device copy (bandwidth reference)", "reference", 0, cuda_time_ms(b_copy, c, W, R));
    snprintf(r->shape, sizeof r->shape, "%zu", c->nopt);
    r->gbs = gbs_of(8.0 * (double)c->nopt, r->ms);
    s->copy_gbs = r->gbs;
}

/* ---- report ------------------------------------------------------------------------------------- */
static const char *const groups[] = {"matmul forward", "matmul backward", "attention forward", "attention backward",
                                     "norms", "rope", "swiglu", "residual add", "embedding", "cross-entropy",
                                     "optimizer"};
#define NGROUPS ((int)(sizeof groups / sizeof groups[0]))

static void step_sum(const model_config *mc, const ctx_t *c, summary_t *s, double gms[NGROUPS]) {
    double total = 0.0;
    for (int g = 0; g < NGROUPS; g++) gms[g] = 0.0;
    for (int i = 0; i < nrec; i++)
        for (int g = 0; g < NGROUPS; g++)
            if (!strcmp(recs[i].step_group, groups[g])) gms[g] += recs[i].ms * recs[i].per_step;
    for (int g = 0; g < NGROUPS; g++) total += gms[g];
    s->step_ms = total;
    s->tok_s = (double)c->N / (total * 1e-3);
    s->fpt = metrics_flops_per_token(mc, c->T);
    s->fpt_causal = metrics_flops_per_token_causal(mc, c->T);
    const double pk = s->peak_tflops * 1e12, gp = s->gemm_peak_tflops * 1e12;
    s->mfu = pk > 0 ? metrics_mfu(s->fpt, s->tok_s, pk) : NAN;
    s->mfu_causal = pk > 0 ? metrics_mfu(s->fpt_causal, s->tok_s, pk) : NAN;
    s->mfu_gemm = gp > 0 ? metrics_mfu(s->fpt, s->tok_s, gp) : NAN;
    s->mfu_causal_gemm = gp > 0 ? metrics_mfu(s->fpt_causal, s->tok_s, gp) : NAN;
}

static void print_report(const model_config *mc, const ctx_t *c, int small, const summary_t *s,
                         const double gms[NGROUPS]) {
    printf("# gpu_bench: %s, model %s, B %d T %d, bf16 table%s\n", s->dev, mc->name, c->B, c->T,
           small ? " (toy shapes; emulated times mean nothing)" : "");
    printf("# %-36s %-24s %10s %9s %9s %10s %8s\n", "kernel", "shape", "ms", "TFLOP/s", "GB/s", "cublas_ms",
           "per_step");
    printf("# %-36s %-24s %10s %9s %9s %10s %8s\n", "-", "-", "ms", "1e12/s", "1e9B/s", "ms", "calls");
    for (int i = 0; i < nrec; i++)
        printf("  %-36s %-24s %10.4f %9.2f %9.1f %10.4f %8.1f\n", recs[i].name, recs[i].shape, recs[i].ms,
               recs[i].tflops, recs[i].gbs, recs[i].cublas_ms, recs[i].per_step);
    printf("# step breakdown (sum of kernel times x calls per step; no communication or gaps)\n");
    printf("# %-28s %10s %7s\n", "group", "ms/step", "share");
    for (int g = 0; g < NGROUPS; g++)
        printf("  %-28s %10.3f %6.1f%%\n", groups[g], gms[g], 100.0 * gms[g] / s->step_ms);
    printf("# references: datasheet %.0f TFLOP/s bf16, %.0f GB/s; measured GEMM peak %.1f TFLOP/s, device copy "
           "%.1f GB/s\n",
           s->peak_tflops, s->peak_gbs, s->gemm_peak_tflops, s->copy_gbs);
    printf("# kernel-sum step %.3f ms, %.0f tok/s, MFU %.1f%% (peak %.0f TFLOP/s, %.4g FLOPs/token)\n", s->step_ms,
           s->tok_s, 100.0 * s->mfu, s->peak_tflops, s->fpt);
    printf("# kernel-sum MFU: 6N+12LdT %.1f%% of the datasheet, %.1f%% of the GEMM peak; causal half (6N+6LdT, "
           "%.4g FLOPs/token) %.1f%% / %.1f%%\n",
           100.0 * s->mfu, 100.0 * s->mfu_gemm, s->fpt_causal, 100.0 * s->mfu_causal, 100.0 * s->mfu_causal_gemm);
}

#define JNUM(x) (isfinite(x) ? (x) : -1.0)
static int write_json(const char *json, const model_config *mc, const ctx_t *c, int small, const summary_t *s,
                      const double gms[NGROUPS]) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", json);
    FILE *fp = fopen(tmp, "w");
    if (!fp) { fprintf(stderr, "gpu_bench: cannot write %s\n", tmp); return 1; }
    fprintf(fp, "{\n  \"device\": \"%s\", \"model\": \"%s\", \"batch_size\": %d, \"seq_len\": %d, \"small\": %s,\n",
            s->dev, mc->name, c->B, c->T, small ? "true" : "false");
    fprintf(fp, "  \"peak_tflops\": %.1f, \"gemm_peak_tflops\": %.6g, \"peak_gb_s\": %.1f, \"copy_gb_s\": %.6g,\n",
            s->peak_tflops, JNUM(s->gemm_peak_tflops), s->peak_gbs, JNUM(s->copy_gbs));
    fprintf(fp, "  \"flops_per_token\": %.6g, \"flops_per_token_causal\": %.6g,\n  \"kernels\": [\n", s->fpt,
            s->fpt_causal);
    for (int i = 0; i < nrec; i++)
        fprintf(fp,
                "    {\"name\": \"%s\", \"group\": \"%s\", \"shape\": \"%s\", \"ms\": %.6g, \"tflops\": %.6g, "
                "\"gb_s\": %.6g, \"cublas_ms\": %.6g, \"per_step\": %.6g}%s\n",
                recs[i].name, recs[i].step_group, recs[i].shape, recs[i].ms, JNUM(recs[i].tflops), JNUM(recs[i].gbs),
                JNUM(recs[i].cublas_ms), recs[i].per_step, i + 1 < nrec ? "," : "");
    fprintf(fp, "  ],\n  \"step\": {\"groups\": [\n");
    for (int g = 0; g < NGROUPS; g++)
        fprintf(fp, "    {\"group\": \"%s\", \"ms\": %.6g}%s\n", groups[g], gms[g], g + 1 < NGROUPS ? "," : "");
    fprintf(fp, "  ], \"kernel_sum_ms\": %.6g, \"tok_s\": %.6g, \"mfu\": %.6g, \"mfu_causal\": %.6g, "
                "\"mfu_gemm_peak\": %.6g, \"mfu_causal_gemm_peak\": %.6g}\n}\n",
            s->step_ms, s->tok_s, JNUM(s->mfu), JNUM(s->mfu_causal), JNUM(s->mfu_gemm), JNUM(s->mfu_causal_gemm));
    if (fclose(fp) != 0 || rename(tmp, json) != 0) { fprintf(stderr, "gpu_bench: cannot write %s\n", json); return 1; }
    return 0;
}

int main(int argc, char **argv) {
    bench_opts o;
    int done = 0, rc = parse_args(argc, argv, &o, &done);
    if (rc || done) return rc;
    model_config mc;
    if ((rc = resolve_model(&o, &mc))) return rc;
    char err[256];
    if (cuda_device_count() == 0) {
        fprintf(stderr, "gpu_bench: no CUDA device\n");
        return 1;
    }
    if (cuda_select_device(0, err, sizeof err)) {
        fprintf(stderr, "gpu_bench: %s\n", err);
        return 1;
    }
    summary_t s;
    memset(&s, 0, sizeof s);
    s.dev = cuda_device_name();
    s.peak_tflops = cuda_peak_bf16_tflops(s.dev);
    s.peak_gbs = cuda_peak_bw_gbs(s.dev);
    ctx_t c;
    ctx_alloc(&c, &mc, (int)o.B, (int)o.T);
    const int W = o.small ? 0 : 2, R = (int)o.reps;
    const double L = mc.num_hidden_layers;
    bench_gemms(&c, W, R, L);
    bench_layer_ops(&c, W, R, L, (double)config_num_params(&mc) / (double)c.nopt);
    bench_attention_sweep(o.small, W, R);
    bench_references(&c, o.small, W, R, &s);
    double gms[NGROUPS];
    step_sum(&mc, &c, &s, gms);
    print_report(&mc, &c, o.small, &s, gms);
    return o.json ? write_json(o.json, &mc, &c, o.small, &s, gms) : 0;
}
#else
int main(void) {
    fprintf(stderr, "gpu_bench: built without CUDA\n");
    return 1;
}
#endif
