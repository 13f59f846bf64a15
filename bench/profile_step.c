/* bench/profile_step.c — per-kernel time breakdown of one 1-rank training step (build/profile_step).
 *
 * What it is: a benchmark harness that replays the op sequence of core/engine/model.c's forward+backward
 * at tp = dp = 1 (plus grad zeroing, the grad-norm sum of squares and AdamW) by calling ops_cpu
 * directly with the model's shapes, on buffers allocated once, and prints a markdown table of the
 * median time per op kind per step (thread CPU time, so a loaded machine inflates it less than wall
 * time) with the GEMM FLOP rate next to the measured single-thread SGEMM rate.
 * What it is not: the engine (no allocator, no FSDP, no run record) nor a test; its numbers are only
 * as good as the mirror of model.c below, which must be updated if model.c's op sequence changes.
 * Usage: build/profile_step [--model NAME|PATH.json] [--batch-size B] [--seq-len T] [--reps R]
 *        build/profile_step --sgemm     only the single-thread SGEMM rate, in wall and in CPU time
 */
#include "core/formats/config.h"
#include "kernels/kernels.h"
#include "core/common/parse.h"
#include "core/job/catalog.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    K_MM_FWD, K_MM_BWD, K_ATT_FWD, K_ATT_BWD, K_NORM_FWD, K_NORM_BWD, K_ROPE, K_SWIGLU_FWD, K_SWIGLU_BWD,
    K_EMB, K_CE, K_ADD, K_ZERO_COPY, K_ADAMW, K_SUMSQ, K_COUNT
};
static const char *const k_names[K_COUNT] = {
    "matmul forward (q,k,v,o,gate,up,down,lm_head)", "matmul backward (din + dW)", "attention forward",
    "attention backward", "rmsnorm forward", "rmsnorm backward", "rope forward+backward",
    "swiglu forward (incl. recompute in backward)", "swiglu backward", "embedding fwd+bwd",
    "cross-entropy (rowmax, sumexp, target, loss, backward)", "residual add", "zero + copy (calloc'd grads, copies)",
    "adamw", "grad-norm sumsq"};

#define MAXREP 64
static double g_acc[K_COUNT];

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* time one call into bucket k */
#define T(k, call) do { double t0_ = cpu_now(); call; g_acc[k] += cpu_now() - t0_; } while (0)

/* single-thread n×n×n SGEMM for about `seconds` of thread CPU time: GFLOP/s against CPU time and
 * against wall time (cpu_sgemm_gflops in kernels/cpu measures wall only, which a loaded machine
 * drags down) */
static void sgemm_rates(int n, double seconds, double *g_cpu, double *g_wall) {
    size_t nn = (size_t)n * (size_t)n;
    float *a = malloc(nn * sizeof(float)), *b = malloc(nn * sizeof(float)), *c = malloc(nn * sizeof(float));
    if (!a || !b || !c) { fprintf(stderr, "profile_step: out of memory\n"); exit(1); }
    for (size_t i = 0; i < nn; i++) { a[i] = (float)(i % 17) * 0.01f; b[i] = (float)(i % 13) * 0.01f; c[i] = 0; }
#define SGEMM_NN cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n)
    SGEMM_NN; /* warm-up; NN as cpu_sgemm_gflops, the engine's MFU peak */
    long calls = 0;
    double c0 = cpu_now(), w0 = wall_now(), ct;
    do { SGEMM_NN; calls++; ct = cpu_now() - c0; } while (ct < seconds);
    double wt = wall_now() - w0, fl = 2.0 * (double)n * n * n * (double)calls;
    *g_cpu = fl / ct * 1e-9;
    *g_wall = fl / wt * 1e-9;
    free(a); free(b); free(c);
}

/* every buffer, freed at the end */
#define MAXBUF 8192 /* 35 per layer + 30: enough for 200+ layers */
static float *g_bufs[MAXBUF];
static int g_nbufs;

static float *fbuf(size_t n) {
    float *p = g_nbufs < MAXBUF ? ops_cpu.dev_alloc(n * sizeof(float)) : NULL;
    if (!p) { fprintf(stderr, "profile_step: out of memory (%zu floats)\n", n); exit(1); }
    g_bufs[g_nbufs++] = p;
    for (size_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u) % 1000u) * 2e-5f - 0.01f;
    return p;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct {
    float *x, *rstd1, *h1, *q, *k, *v, *ao, *lse, *xmid, *rstd2, *h2, *gate, *up;
    float *wq, *wk, *wv, *wo, *wg, *wu, *wd, *win, *wpost;
    float *gq, *gk, *gv, *go, *gg, *gu, *gd, *gin, *gpost;
} layer_t;

/* the model's shapes and every buffer of the replayed step */
typedef struct {
    int d, f, L, H, KV, V, hd, T, Bi, N;
    float eps;
    float *rope;                                                          /* RoPE cos/sin table [T, hd] */
    size_t nd, nq, nk, nf, nparam;
    layer_t *ly;
    float *emb, *gemb, *head, *ghead, *wnorm, *gnorm;                     /* root weights and gradients */
    float *xL, *rstdf, *hf, *logits, *stats, *ws, *part, *act, *dact, *dgate, *dup, *dh, *dx, *dx2, *dao, *dq, *dk, *dv,
          *loss;                                                          /* activations and scratch */
    float *P, *Gr, *Mm, *Vv;                                              /* flat params, grads, AdamW moments */
    int32_t *tok, *tgt;
} prof_t;

/* the options; -1 to go on, else the exit code */
static int parse_args(int argc, char **argv, const char **model, long long *B, long long *Tq, long long *reps) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help")) {
            printf("usage: build/profile_step [--model NAME|PATH.json] [--batch-size B] [--seq-len T] [--reps R]\n"
                   "       build/profile_step --sgemm   (single-thread 512^3 SGEMM GFLOP/s, CPU time and wall)\n");
            return 0;
        }
        if (!strcmp(a, "--sgemm")) {
            double gc, gw;
            cpu_blas_init();
            sgemm_rates(512, 1.0, &gc, &gw);
            printf("sgemm_gflops_cpu %.2f\nsgemm_gflops_wall %.2f\n", gc, gw);
            return 0;
        }
        if (strcmp(a, "--model") && strcmp(a, "--batch-size") && strcmp(a, "--seq-len") && strcmp(a, "--reps")) {
            fprintf(stderr, "profile_step: unknown option %s (see --help)\n", a);
            return 2;
        }
        if (!v) { fprintf(stderr, "profile_step: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "--model")) *model = v;
        else if (!strcmp(a, "--batch-size")) { if (parse_int(v, 1, 4096, B)) { fprintf(stderr, "profile_step: --batch-size: expected 1..4096, got '%s'\n", v); return 2; } }
        else if (!strcmp(a, "--seq-len")) { if (parse_int(v, 1, 65536, Tq)) { fprintf(stderr, "profile_step: --seq-len: expected 1..65536, got '%s'\n", v); return 2; } }
        else if (!strcmp(a, "--reps")) { if (parse_int(v, 1, MAXREP, reps)) { fprintf(stderr, "profile_step: --reps: expected 1..%d, got '%s'\n", MAXREP, v); return 2; } }
        else { fprintf(stderr, "profile_step: unknown option %s\n", a); return 2; }
        i++;
    }
    return -1;
}

/* shapes from the model, buffers allocated and filled once; 0 or the exit code */
static int setup(prof_t *b, const model_config *c, int Bi, int T) {
    const int d = c->hidden_size, f = c->intermediate_size, L = c->num_hidden_layers, H = c->num_attention_heads,
              KV = c->num_key_value_heads, V = c->vocab_size, hd = d / H, N = Bi * T;
    const size_t nd = (size_t)N * d, nq = (size_t)N * H * hd, nk = (size_t)N * KV * hd, nf = (size_t)N * f;
    *b = (prof_t){.d = d, .f = f, .L = L, .H = H, .KV = KV, .V = V, .hd = hd, .T = T, .Bi = Bi, .N = N,
                  .eps = (float)c->rms_norm_eps, .nd = nd, .nq = nq, .nk = nk, .nf = nf};
    layer_t *ly = calloc((size_t)L, sizeof *ly);
    double *inv = malloc((size_t)(hd / 2 + 1) * sizeof *inv);
    if (!ly || !inv) { fprintf(stderr, "profile_step: out of memory\n"); free(ly); free(inv); return 1; }
    b->rope = fbuf(rope_table_floats(T, hd) + 1); /* once, as the engine does (rope_scaling applied) */
    config_rope_inv_freq(c, inv);
    rope_table_fill(b->rope, inv, T, hd);
    free(inv);
    for (int i = 0; i < L; i++) {
        layer_t *l = &ly[i];
        l->x = fbuf(nd); l->rstd1 = fbuf(N); l->h1 = fbuf(nd); l->q = fbuf(nq); l->k = fbuf(nk); l->v = fbuf(nk);
        l->ao = fbuf(nq); l->lse = fbuf((size_t)Bi * H * T); l->xmid = fbuf(nd); l->rstd2 = fbuf(N); l->h2 = fbuf(nd);
        l->gate = fbuf(nf); l->up = fbuf(nf);
        l->wq = fbuf((size_t)H * hd * d); l->wk = fbuf((size_t)KV * hd * d); l->wv = fbuf((size_t)KV * hd * d);
        l->wo = fbuf((size_t)d * H * hd); l->wg = fbuf((size_t)f * d); l->wu = fbuf((size_t)f * d);
        l->wd = fbuf((size_t)d * f); l->win = fbuf(d); l->wpost = fbuf(d);
        l->gq = fbuf((size_t)H * hd * d); l->gk = fbuf((size_t)KV * hd * d); l->gv = fbuf((size_t)KV * hd * d);
        l->go = fbuf((size_t)d * H * hd); l->gg = fbuf((size_t)f * d); l->gu = fbuf((size_t)f * d);
        l->gd = fbuf((size_t)d * f); l->gin = fbuf(d); l->gpost = fbuf(d);
    }
    float *emb = fbuf((size_t)V * d), *gemb = fbuf((size_t)V * d), *head = fbuf((size_t)V * d),
          *ghead = fbuf((size_t)V * d), *wnorm = fbuf(d), *gnorm = fbuf(d);
    float *xL = fbuf(nd), *rstdf = fbuf(N), *hf = fbuf(nd), *logits = fbuf((size_t)N * V), *stats = fbuf(4 * (size_t)N);
    float *ws = fbuf(attention_ws_floats(T)), *part = fbuf(nd), *act = fbuf(nf), *dact = fbuf(nf), *dgate = fbuf(nf),
          *dup = fbuf(nf), *dh = fbuf(nd), *dx = fbuf(nd), *dx2 = fbuf(nd), *dao = fbuf(nq), *dq = fbuf(nq),
          *dk = fbuf(nk), *dv = fbuf(nk), *loss = fbuf(N);
    size_t nparam = (size_t)2 * V * d + d;
    for (int i = 0; i < L; i++) nparam += (size_t)2 * d + (size_t)2 * H * hd * d + (size_t)2 * KV * hd * d + (size_t)3 * f * d;
    float *P = fbuf(nparam), *Gr = fbuf(nparam), *Mm = fbuf(nparam), *Vv = fbuf(nparam);
    for (size_t i = 0; i < nparam; i++) Vv[i] = Vv[i] * Vv[i];
    int32_t *tok = malloc((size_t)N * sizeof *tok), *tgt = malloc((size_t)N * sizeof *tgt);
    if (!tok || !tgt) { fprintf(stderr, "profile_step: out of memory\n"); free(tok); free(tgt); free(ly); return 1; }
    for (int n = 0; n < N; n++) { tok[n] = (int32_t)((n * 7919u) % (unsigned)V); tgt[n] = (int32_t)((n * 104729u + 1) % (unsigned)V); }
    b->ly = ly; b->tok = tok; b->tgt = tgt; b->nparam = nparam;
    b->emb = emb; b->gemb = gemb; b->head = head; b->ghead = ghead; b->wnorm = wnorm; b->gnorm = gnorm; b->xL = xL;
    b->rstdf = rstdf; b->hf = hf; b->logits = logits; b->stats = stats; b->ws = ws; b->part = part; b->act = act;
    b->dact = dact; b->dgate = dgate; b->dup = dup; b->dh = dh; b->dx = dx; b->dx2 = dx2; b->dao = dao; b->dq = dq;
    b->dk = dk; b->dv = dv; b->loss = loss; b->P = P; b->Gr = Gr; b->Mm = Mm; b->Vv = Vv;
    return 0;
}

/* one step of model.c's op sequence at tp = dp = 1, each op timed into its bucket of g_acc */
static void step(const prof_t *b) {
    float *emb = b->emb, *gemb = b->gemb, *head = b->head, *ghead = b->ghead, *wnorm = b->wnorm, *gnorm = b->gnorm,
          *xL = b->xL, *rstdf = b->rstdf, *hf = b->hf, *logits = b->logits, *stats = b->stats, *ws = b->ws,
          *part = b->part, *act = b->act, *dact = b->dact, *dgate = b->dgate, *dup = b->dup, *dh = b->dh, *dx = b->dx,
          *dx2 = b->dx2, *dao = b->dao, *dq = b->dq, *dk = b->dk, *dv = b->dv, *loss = b->loss, *P = b->P, *Gr = b->Gr,
          *Mm = b->Mm, *Vv = b->Vv;
    const int d = b->d, f = b->f, L = b->L, H = b->H, KV = b->KV, V = b->V, hd = b->hd, T = b->T, Bi = b->Bi,
          N = b->N;
    const float eps = b->eps, *rope = b->rope;
    const size_t nd = b->nd, nq = b->nq, nk = b->nk, nf = b->nf, nparam = b->nparam;
    layer_t *ly = b->ly;
    int32_t *tok = b->tok, *tgt = b->tgt;
    const ops_t *o = &ops_cpu;
    /* grads zeroed at the start of backward (fsdp_grad_begin at dp = 1) */
    T(K_ZERO_COPY, o->zero(Gr, nparam * sizeof(float)));
    T(K_EMB, o->embedding_forward(ly[0].x, tok, emb, N, d, 0, V));
    for (int i = 0; i < L; i++) {
        layer_t *l = &ly[i];
        float *xo = i + 1 < L ? ly[i + 1].x : xL;
        T(K_NORM_FWD, o->rmsnorm_forward(l->h1, l->rstd1, l->x, l->win, N, d, eps));
        T(K_MM_FWD, o->matmul_forward(l->q, l->h1, l->wq, N, d, H * hd, 0));
        T(K_MM_FWD, o->matmul_forward(l->k, l->h1, l->wk, N, d, KV * hd, 0));
        T(K_MM_FWD, o->matmul_forward(l->v, l->h1, l->wv, N, d, KV * hd, 0));
        T(K_ROPE, o->rope_forward(l->q, l->q, rope, Bi, T, H, hd));
        T(K_ROPE, o->rope_forward(l->k, l->k, rope, Bi, T, KV, hd));
        T(K_ATT_FWD, o->attention_forward(l->ao, l->lse, ws, l->q, l->k, l->v, Bi, T, H, KV, hd));
        T(K_MM_FWD, o->matmul_forward(part, l->ao, l->wo, N, H * hd, d, 0));
        T(K_ZERO_COPY, o->copy(l->xmid, part, nd * sizeof(float))); /* tp_exit at tp = 1 */
        T(K_ADD, o->add_inplace(l->xmid, l->x, nd));
        T(K_NORM_FWD, o->rmsnorm_forward(l->h2, l->rstd2, l->xmid, l->wpost, N, d, eps));
        T(K_MM_FWD, o->matmul_forward(l->gate, l->h2, l->wg, N, d, f, 0));
        T(K_MM_FWD, o->matmul_forward(l->up, l->h2, l->wu, N, d, f, 0));
        T(K_SWIGLU_FWD, o->swiglu_forward(act, l->gate, l->up, nf));
        T(K_MM_FWD, o->matmul_forward(part, act, l->wd, N, f, d, 0));
        T(K_ZERO_COPY, o->copy(xo, part, nd * sizeof(float)));
        T(K_ADD, o->add_inplace(xo, l->xmid, nd));
    }
    T(K_NORM_FWD, o->rmsnorm_forward(hf, rstdf, xL, wnorm, N, d, eps));
    /* head + loss + head backward (one chunk: N*V <= 4 Mi floats for the small presets) */
    T(K_ZERO_COPY, o->zero(dh, nd * sizeof(float)));
    T(K_MM_FWD, o->matmul_forward(logits, hf, head, N, d, V, 0));
    T(K_CE, o->ce_rowmax(stats, logits, N, V, V));
    T(K_CE, o->ce_sumexp(stats + N, logits, stats, N, V, V));
    T(K_CE, o->ce_target(stats + (size_t)2 * N, logits, tgt, N, V, 0));
    T(K_CE, o->ce_loss(loss, stats, stats + N, stats + (size_t)2 * N, N));
    T(K_CE, o->ce_backward(logits, logits, stats, stats + N, tgt, 1.0f / (float)N, N, V, 0, V));
    T(K_MM_BWD, o->matmul_backward(dh, ghead, logits, hf, head, N, d, V));
    T(K_ZERO_COPY, o->zero(dx, nd * sizeof(float)));
    T(K_NORM_BWD, o->rmsnorm_backward(dx, gnorm, dh, xL, wnorm, rstdf, N, d));
    for (int i = L - 1; i >= 0; i--) {
        layer_t *l = &ly[i];
        T(K_SWIGLU_FWD, o->swiglu_forward(act, l->gate, l->up, nf));
        T(K_ZERO_COPY, o->zero(dact, nf * sizeof(float)));
        T(K_MM_BWD, o->matmul_backward(dact, l->gd, dx, act, l->wd, N, f, d));
        T(K_ZERO_COPY, o->zero(dgate, nf * sizeof(float)));
        T(K_ZERO_COPY, o->zero(dup, nf * sizeof(float)));
        T(K_SWIGLU_BWD, o->swiglu_backward(dgate, dup, dact, l->gate, l->up, nf));
        T(K_ZERO_COPY, o->zero(dh, nd * sizeof(float)));
        T(K_MM_BWD, o->matmul_backward(dh, l->gg, dgate, l->h2, l->wg, N, d, f));
        T(K_MM_BWD, o->matmul_backward(dh, l->gu, dup, l->h2, l->wu, N, d, f));
        T(K_ZERO_COPY, o->copy(dx2, dx, nd * sizeof(float)));
        T(K_NORM_BWD, o->rmsnorm_backward(dx2, l->gpost, dh, l->xmid, l->wpost, l->rstd2, N, d));
        T(K_ZERO_COPY, o->zero(dao, nq * sizeof(float)));
        T(K_MM_BWD, o->matmul_backward(dao, l->go, dx2, l->ao, l->wo, N, H * hd, d));
        T(K_ZERO_COPY, o->zero(dq, nq * sizeof(float)));
        T(K_ZERO_COPY, o->zero(dk, nk * sizeof(float)));
        T(K_ZERO_COPY, o->zero(dv, nk * sizeof(float)));
        T(K_ATT_BWD, o->attention_backward(dq, dk, dv, ws, dao, l->ao, l->lse, l->q, l->k, l->v, Bi, T, H, KV, hd));
        T(K_ROPE, o->rope_backward(dq, dq, rope, Bi, T, H, hd));
        T(K_ROPE, o->rope_backward(dk, dk, rope, Bi, T, KV, hd));
        T(K_ZERO_COPY, o->zero(dh, nd * sizeof(float)));
        T(K_MM_BWD, o->matmul_backward(dh, l->gq, dq, l->h1, l->wq, N, d, H * hd));
        T(K_MM_BWD, o->matmul_backward(dh, l->gk, dk, l->h1, l->wk, N, d, KV * hd));
        T(K_MM_BWD, o->matmul_backward(dh, l->gv, dv, l->h1, l->wv, N, d, KV * hd));
        T(K_ZERO_COPY, o->copy(dx, dx2, nd * sizeof(float)));
        T(K_NORM_BWD, o->rmsnorm_backward(dx, l->gin, dh, l->x, l->win, l->rstd1, N, d));
    }
    T(K_EMB, o->embedding_backward(gemb, dx, tok, N, d, 0, V));
    const float *gr = Gr;
    T(K_SUMSQ, (void)o->sumsq(&gr, &nparam, 1));
    T(K_ADAMW, o->adamw(P, Gr, Mm, Vv, nparam, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.1f, 0.05f));
}

/* the markdown table of median times per op kind, with GEMM and attention FLOP rates */
static void report(const prof_t *b, const char *model, long long reps, const double *med, double total, double scpu,
                   double swall) {
    const int d = b->d, f = b->f, L = b->L, H = b->H, KV = b->KV, V = b->V, hd = b->hd, T = b->T, Bi = b->Bi,
          N = b->N;
    /* GEMM FLOPs per step: forward 2·N·in·out per linear, backward twice that; attention counted apart */
    double lin = (double)L * ((double)d * H * hd * 2 + (double)d * KV * hd * 2 + 3.0 * d * f) + (double)d * V;
    double mm_fwd_fl = 2.0 * N * lin, mm_bwd_fl = 4.0 * N * lin;
    /* causal attention as computed (blocks of 64 rows against keys [0, r1)): count the full T×T
       the model-FLOPs convention uses, halved for causality; fwd 2 GEMMs, bwd 4 (plus recompute 1) */
    double att = 2.0 * (double)Bi * H * (double)T * T * hd * 0.5 * L;
    double att_fwd_fl = 2.0 * att, att_bwd_fl = 5.0 * att;
    double peak, peak_wall;
    sgemm_rates(512, 0.5, &peak, &peak_wall);

    printf("profile_step: model %s (d=%d f=%d L=%d H=%d KV=%d V=%d), B=%d T=%d, %lld reps, thread CPU time\n",
           model, d, f, L, H, KV, V, Bi, T, reps);
    printf("single-thread SGEMM (512^3 NN, as the engine's MFU peak): %.1f GFLOP/s (thread CPU time; %.1f wall)\n\n",
           peak, peak_wall);
    printf("| op | ms/step | share | GFLOP/s |\n|---|---:|---:|---:|\n");
    for (int k = 0; k < K_COUNT; k++) {
        char rate[32] = "";
        double fl = k == K_MM_FWD ? mm_fwd_fl : k == K_MM_BWD ? mm_bwd_fl : k == K_ATT_FWD ? att_fwd_fl
                  : k == K_ATT_BWD ? att_bwd_fl : 0;
        if (fl > 0 && med[k] > 0) snprintf(rate, sizeof rate, "%.1f", fl / med[k] * 1e-9);
        printf("| %s | %.2f | %.1f%% | %s |\n", k_names[k], med[k] * 1e3, 100.0 * med[k] / total, rate);
    }
    printf("| **sum of ops** | **%.2f** | 100%% | |\n\n", total * 1e3);
    printf("step (median of %lld): %.2f ms thread CPU, %.2f ms wall; GEMM share %.1f%%\n", reps, scpu * 1e3,
           swall * 1e3, 100.0 * (med[K_MM_FWD] + med[K_MM_BWD]) / total);
}

int main(int argc, char **argv) {
    const char *model = "small";
    long long B = 4, Tq = 256, reps = 5;
    int rc = parse_args(argc, argv, &model, &B, &Tq, &reps);
    if (rc >= 0) return rc;
    model_config c;
    char err[256];
    if (catalog_model(&c, model, err, sizeof err) || config_validate(&c, err, sizeof err)) {
        fprintf(stderr, "profile_step: %s\n", err);
        return 2;
    }
    cpu_blas_init();
    prof_t b;
    if ((rc = setup(&b, &c, (int)B, (int)Tq))) return rc;

    double per[K_COUNT][MAXREP] = {{0}}, step_cpu[MAXREP] = {0}, step_wall[MAXREP] = {0};
    for (int r = -1; r < (int)reps; r++) { /* r = -1: warm-up */
        memset(g_acc, 0, sizeof g_acc);
        double c0 = cpu_now(), w0 = wall_now();
        step(&b);
        if (r < 0) continue;
        step_cpu[r] = cpu_now() - c0;
        step_wall[r] = wall_now() - w0;
        for (int k = 0; k < K_COUNT; k++) per[k][r] = g_acc[k];
    }
    double med[K_COUNT], total = 0;
    for (int k = 0; k < K_COUNT; k++) { med[k] = median(per[k], (int)reps); total += med[k]; }
    double scpu = median(step_cpu, (int)reps), swall = median(step_wall, (int)reps);
    report(&b, model, reps, med, total, scpu, swall);
    for (int i = 0; i < g_nbufs; i++) ops_cpu.dev_free(g_bufs[i]);
    free(b.ly); free(b.tok); free(b.tgt);
    return 0;
}
