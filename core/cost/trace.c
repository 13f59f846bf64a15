/* core/cost/trace.c — the step recorder of core/cost/trace.h: an op table that computes nothing and appends
 * one event per kernel call, a sink on the null communicators (core/engine/comm.h) that appends one per
 * collective, and the replay of one rank's step through both. The op table touches no memory: every
 * pointer it sees is a planning address of core/engine/mem. */
#include "core/cost/trace.h"
#include "core/engine/mem.h"
#include "core/engine/mesh.h"
#include "core/engine/optim.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const cost_op_names[COST_NOPS] = {
    "gemm_fwd", "gemm_fwd_f32", "gemm_din", "gemm_dw", "attention_fwd", "attention_bwd",
    "rmsnorm_fwd", "rmsnorm_bwd", "rope_fwd", "rope_bwd", "swiglu_fwd", "swiglu_bwd",
    "embedding_fwd", "embedding_bwd", "ce_rowmax", "ce_sumexp", "ce_target", "ce_loss", "ce_bwd",
    "adamw", "sumsq", "add", "scale", "zero", "copy", "to_compute", "to_host", "from_host"};
const char *const cost_class_names[COST_NCLASS] = {"gemm", "attention", "norm", "pointwise", "loss", "optimizer",
                                                   "memory"};
const char *const cost_group_names[COST_NGROUPS] = {"tp", "dp", "world"};

cost_op_class cost_op_class_of(cost_op_kind k) {
    switch (k) {
    case COST_GEMM_FWD: case COST_GEMM_FWD_F32: case COST_GEMM_DIN: case COST_GEMM_DW: return COST_CLASS_GEMM;
    case COST_ATTN_FWD: case COST_ATTN_BWD: return COST_CLASS_ATTENTION;
    case COST_RMSNORM_FWD: case COST_RMSNORM_BWD: return COST_CLASS_NORM;
    case COST_ROPE_FWD: case COST_ROPE_BWD: case COST_SWIGLU_FWD: case COST_SWIGLU_BWD: case COST_ADD:
    case COST_SCALE: return COST_CLASS_POINTWISE;
    case COST_CE_ROWMAX: case COST_CE_SUMEXP: case COST_CE_TARGET: case COST_CE_LOSS: case COST_CE_BWD:
    case COST_EMBED_FWD: case COST_EMBED_BWD: return COST_CLASS_LOSS;
    case COST_ADAMW: case COST_SUMSQ: return COST_CLASS_OPTIMIZER;
    default: return COST_CLASS_MEMORY;
    }
}
int cost_op_is_gemm(cost_op_kind k) { return cost_op_class_of(k) == COST_CLASS_GEMM; }

void cost_trace_free(cost_trace *t) {
    free(t->ev);
    memset(t, 0, sizeof *t);
}

/* FLOPs and bytes: a GEMM of m×n outputs over k does 2mnk; every other op is counted by the bytes it
 * must read and write at least (its elements of compute precision cb, fp32 where the op keeps fp32:
 * statistics, logits, gradients of parameters, optimizer state). */
void cost_op_work(cost_op_kind k, const int64_t d[5], int cb, double *flops, double *bytes) {
    double a = (double)d[0], b = (double)d[1], c = (double)d[2], e = (double)d[3], h = (double)d[4];
    double f = 0, by = 0;
    switch (k) {
    case COST_GEMM_FWD: f = 2 * a * b * c; by = (a * c + b * c + a * b * (1 + (d[3] != 0))) * cb; break;
    case COST_GEMM_FWD_F32: f = 2 * a * b * c; by = (a * c + b * c) * cb + a * b * 4; break;
    case COST_GEMM_DIN: f = 2 * a * b * c; by = (a * c + c * b + 2 * a * b) * cb; break;
    case COST_GEMM_DW: f = 2 * a * b * c; by = (c * a + c * b) * cb + 2 * a * b * 4; break;
    /* causal attention over T positions: T(T+1)/2 query-key pairs per head, 4·hd FLOPs each forward
     * (scores and the weighted sum), 10·hd backward (scores again, dP, dV, dQ, dK) */
    case COST_ATTN_FWD:
        f = 4 * a * c * h * b * (b + 1) / 2;
        by = a * b * (2 * c + 2 * e) * h * cb + a * c * b * 4;
        break;
    case COST_ATTN_BWD:
        f = 10 * a * c * h * b * (b + 1) / 2;
        by = a * b * (4 * c + 4 * e) * h * cb + a * c * b * 4;
        break;
    case COST_RMSNORM_FWD: f = 4 * a * b; by = 2 * a * b * cb + b * cb + a * 4; break;
    case COST_RMSNORM_BWD: f = 8 * a * b; by = 4 * a * b * cb + a * 4 + 2 * b * 4; break;
    case COST_ROPE_FWD: case COST_ROPE_BWD: f = 3 * a; by = 2 * a * cb + b * 4; break;
    case COST_SWIGLU_FWD: f = 6 * a; by = 3 * a * cb; break;
    case COST_SWIGLU_BWD: f = 12 * a; by = 7 * a * cb; break;
    case COST_EMBED_FWD: by = 2 * a * b * cb + a * 4; break;
    case COST_EMBED_BWD: by = a * b * (cb + 8) + a * 4; break;
    case COST_CE_ROWMAX: f = a * b; by = a * b * 4 + a * 4; break;
    case COST_CE_SUMEXP: f = 2 * a * b; by = a * b * 4 + 2 * a * 4; break;
    case COST_CE_TARGET: by = a * 12; break;
    case COST_CE_LOSS: f = 3 * a; by = a * 16; break;
    case COST_CE_BWD: f = 3 * a * b; by = a * b * (4 + cb) + 3 * a * 4; break;
    case COST_ADAMW: f = 12 * a; by = 7 * a * 4; break;
    case COST_SUMSQ: f = 2 * a; by = 4 * a; break;
    case COST_ADD: f = a; by = 3 * a * cb; break;
    case COST_SCALE: f = a; by = 2 * a * 4; break;
    case COST_ZERO: case COST_TO_HOST: case COST_FROM_HOST: by = a; break;
    case COST_COPY: by = 2 * a; break;
    case COST_TO_COMPUTE: by = a * (4 + cb); break;
    default: break;
    }
    *flops = f; *bytes = by;
}

/* ---- the recorder ---------------------------------------------------------------------------- */

static cost_trace *g_rec;           /* where events go; NULL: not recording (set-up, tear-down) */
static const comm_group *g_grp[COST_NGROUPS];

static cost_event *push(void) {
    cost_trace *t = g_rec;
    if (!t || t->oom) return NULL;
    if (t->n == t->cap) {
        size_t c = t->cap ? t->cap * 2 : 1024;
        cost_event *e = realloc(t->ev, c * sizeof *e);
        if (!e) { t->oom = 1; return NULL; }
        t->ev = e; t->cap = c;
    }
    cost_event *e = &t->ev[t->n++];
    memset(e, 0, sizeof *e);
    return e;
}

static void op(cost_op_kind k, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e, int host) {
    cost_event *ev = push();
    if (!ev) return;
    ev->type = COST_EV_OP; ev->kind = (uint8_t)k; ev->host = (uint8_t)host;
    ev->dim[0] = a; ev->dim[1] = b; ev->dim[2] = c; ev->dim[3] = d; ev->dim[4] = e;
    cost_op_work(k, ev->dim, g_rec->cbytes, &ev->flops, &ev->bytes);
}

static void sink(void *ctx, const comm_group *g, comm_kind k, size_t bytes, int phase, int host, uint64_t id) {
    (void)ctx;
    cost_event *ev = push();
    if (!ev) return;
    ev->type = phase == COMM_SINK_START ? COST_EV_START : phase == COMM_SINK_WAIT ? COST_EV_WAIT : COST_EV_COLL;
    ev->kind = (uint8_t)k; ev->host = (uint8_t)host; ev->id = (uint32_t)id; ev->bytes = (double)bytes;
    ev->group = COST_GROUP_WORLD;
    for (int i = 0; i < COST_NGROUPS; i++) if (g && g == g_grp[i]) ev->group = (uint8_t)i;
    ev->ranks = g ? g->size : 0;
}

/* the op table: argument lists as kernels/kernels.h, nothing dereferenced */
static void r_mm_fwd(float *o, const float *i, const float *w, int N, int Cin, int Cout, int acc) {
    (void)o; (void)i; (void)w;
    op(COST_GEMM_FWD, N, Cout, Cin, acc, 0, 0);
}
static void r_mm_bwd(float *din, float *dw, const float *dout, const float *in, const float *w, int N, int Cin, int Cout) {
    (void)dout; (void)in; (void)w;
    if (N <= 0 || Cin <= 0 || Cout <= 0) return;
    if (din) op(COST_GEMM_DIN, N, Cin, Cout, 0, 0, 0);
    if (dw) op(COST_GEMM_DW, Cout, Cin, N, 0, 0, 0);
}
static void r_mm_f32(float *o, const float *i, const float *w, int N, int Cin, int Cout) {
    (void)o; (void)i; (void)w;
    op(COST_GEMM_FWD_F32, N, Cout, Cin, 0, 0, 0);
}
static void r_emb_fwd(float *o, const int32_t *t, const float *tab, int N, int C, int vs, int vc) {
    (void)o; (void)t; (void)tab; (void)vs;
    op(COST_EMBED_FWD, N, C, vc, 0, 0, 0);
}
static void r_emb_bwd(float *dt, const float *dout, const int32_t *t, int N, int C, int vs, int vc) {
    (void)dt; (void)dout; (void)t; (void)vs;
    op(COST_EMBED_BWD, N, C, vc, 0, 0, 0);
}
static void r_norm_fwd(float *o, float *rstd, const float *x, const float *w, int N, int C, float eps) {
    (void)o; (void)rstd; (void)x; (void)w; (void)eps;
    op(COST_RMSNORM_FWD, N, C, 0, 0, 0, 0);
}
static void r_norm_bwd(float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd,
                       int N, int C) {
    (void)dx; (void)dw; (void)dout; (void)x; (void)w; (void)rstd;
    op(COST_RMSNORM_BWD, N, C, 0, 0, 0, 0);
}
static void r_rope_fwd(float *o, const float *x, const float *tab, int B, int T, int nh, int hd) {
    (void)o; (void)x; (void)tab;
    op(COST_ROPE_FWD, (int64_t)B * T * nh * hd, (int64_t)T * hd, B, T, nh, 0);
}
static void r_rope_bwd(float *o, const float *x, const float *tab, int B, int T, int nh, int hd) {
    (void)o; (void)x; (void)tab;
    op(COST_ROPE_BWD, (int64_t)B * T * nh * hd, (int64_t)T * hd, B, T, nh, 0);
}
static void r_attn_fwd(float *o, float *lse, float *ws, const float *q, const float *k, const float *v, int B, int T,
                       int H, int KV, int hd) {
    (void)o; (void)lse; (void)ws; (void)q; (void)k; (void)v;
    op(COST_ATTN_FWD, B, T, H, KV, hd, 0);
}
static void r_attn_bwd(float *dq, float *dk, float *dv, float *ws, const float *dout, const float *out,
                       const float *lse, const float *q, const float *k, const float *v, int B, int T, int H, int KV,
                       int hd) {
    (void)dq; (void)dk; (void)dv; (void)ws; (void)dout; (void)out; (void)lse; (void)q; (void)k; (void)v;
    op(COST_ATTN_BWD, B, T, H, KV, hd, 0);
}
static void r_swiglu_fwd(float *o, const float *g, const float *u, size_t n) {
    (void)o; (void)g; (void)u;
    op(COST_SWIGLU_FWD, (int64_t)n, 0, 0, 0, 0, 0);
}
static void r_swiglu_bwd(float *dg, float *du, const float *dout, const float *g, const float *u, size_t n) {
    (void)dg; (void)du; (void)dout; (void)g; (void)u;
    op(COST_SWIGLU_BWD, (int64_t)n, 0, 0, 0, 0, 0);
}
static void r_ce_rowmax(float *mx, const float *l, int N, int V, int vv) {
    (void)mx; (void)l;
    op(COST_CE_ROWMAX, N, V, vv, 0, 0, 0);
}
static void r_ce_sumexp(float *se, const float *l, const float *mx, int N, int V, int vv) {
    (void)se; (void)l; (void)mx;
    op(COST_CE_SUMEXP, N, V, vv, 0, 0, 0);
}
static void r_ce_target(float *tl, const float *l, const int32_t *t, int N, int V, int vs) {
    (void)tl; (void)l; (void)t; (void)vs;
    op(COST_CE_TARGET, N, V, 0, 0, 0, 0);
}
static void r_ce_loss(float *loss, const float *mx, const float *se, const float *tl, int N) {
    (void)loss; (void)mx; (void)se; (void)tl;
    op(COST_CE_LOSS, N, 0, 0, 0, 0, 0);
}
static void r_ce_bwd(float *dl, const float *l, const float *mx, const float *se, const int32_t *t, float s, int N,
                     int V, int vs, int vv) {
    (void)dl; (void)l; (void)mx; (void)se; (void)t; (void)s; (void)vs;
    op(COST_CE_BWD, N, V, vv, 0, 0, 0);
}
static void r_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2, float eps,
                    float wd, float bc1, float bc2) {
    (void)p; (void)g; (void)m; (void)v; (void)lr; (void)b1; (void)b2; (void)eps; (void)wd; (void)bc1; (void)bc2;
    op(COST_ADAMW, (int64_t)n, 0, 0, 0, 0, 0);
}
static void r_add(float *y, const float *x, size_t n) { (void)y; (void)x; op(COST_ADD, (int64_t)n, 0, 0, 0, 0, 0); }
static void r_scale(float *y, float s, size_t n) { (void)y; (void)s; op(COST_SCALE, (int64_t)n, 0, 0, 0, 0, 0); }
static double r_sumsq(const float *const *x, const size_t *n, int count) {
    (void)x;
    int64_t t = 0;
    for (int i = 0; i < count; i++) t += (int64_t)n[i];
    op(COST_SUMSQ, t, count, 0, 0, 0, 1); /* the result goes to the host: it waits */
    return 0.0;
}
static void r_zero(void *d, size_t b) { (void)d; op(COST_ZERO, (int64_t)b, 0, 0, 0, 0, 0); }
static void r_copy(void *d, const void *s, size_t b) { (void)d; (void)s; op(COST_COPY, (int64_t)b, 0, 0, 0, 0, 0); }
static void r_to_host(void *d, const void *s, size_t b) { (void)d; (void)s; op(COST_TO_HOST, (int64_t)b, 0, 0, 0, 0, 1); }
static void r_from_host(void *d, const void *s, size_t b) { (void)d; (void)s; op(COST_FROM_HOST, (int64_t)b, 0, 0, 0, 0, 0); }
static void r_sync(void) {}
static void r_to_compute(void *d, const float *s, size_t n) { (void)d; (void)s; op(COST_TO_COMPUTE, (int64_t)n, 0, 0, 0, 0, 0); }

static ops_t recorder_ops(int cbytes) {
    return (ops_t){
        .name = "cost-recorder", .matmul_forward = r_mm_fwd, .matmul_backward = r_mm_bwd,
        .matmul_forward_f32out = r_mm_f32, .embedding_forward = r_emb_fwd, .embedding_backward = r_emb_bwd,
        .rmsnorm_forward = r_norm_fwd, .rmsnorm_backward = r_norm_bwd, .rope_forward = r_rope_fwd,
        .rope_backward = r_rope_bwd, .attention_forward = r_attn_fwd, .attention_backward = r_attn_bwd,
        .swiglu_forward = r_swiglu_fwd, .swiglu_backward = r_swiglu_bwd, .ce_rowmax = r_ce_rowmax,
        .ce_sumexp = r_ce_sumexp, .ce_target = r_ce_target, .ce_loss = r_ce_loss, .ce_backward = r_ce_bwd,
        .adamw = r_adamw, .add_inplace = r_add, .scale_inplace = r_scale, .sumsq = r_sumsq, .zero = r_zero,
        .copy = r_copy, .to_host = r_to_host, .from_host = r_from_host, .dev_alloc = NULL, .dev_free = NULL,
        .synchronize = r_sync, .cbytes = (size_t)cbytes, .to_compute = r_to_compute};
}

/* The step as core/run/run.c times it (step_loop): forward and backward, the loss summed over the DP
 * group on the host, the optimizer step with its gradient-norm all-reduce over the world. */
int cost_record_step(const model_config *cfg, int world, int tp, int rank, const model_opts *o, cost_trace *t,
                     char *err, size_t errlen) {
    mesh_t m;
    if (mesh_init(&m, world, rank, tp, err, errlen)) return -1;
    comm_group tpg, dpg, wg;
    comm_null_group(&tpg, m.tp, m.tp_rank);
    comm_null_group(&dpg, m.dp, m.dp_rank);
    comm_null_group(&wg, m.world, m.rank);
    free(t->ev);
    memset(t, 0, sizeof *t);
    t->cbytes = o->abytes ? o->abytes : 4;
    ops_t rec = recorder_ops(t->cbytes);
    g_grp[COST_GROUP_TP] = &tpg; g_grp[COST_GROUP_DP] = &dpg; g_grp[COST_GROUP_WORLD] = &wg;
    g_rec = NULL;
    comm_set_null_sink(sink, NULL);
    mem_init(&rec, 1, 0);
    model_t M;
    int rc = model_init(&M, cfg, &m, &tpg, &dpg, &rec, o, err, errlen);
    if (rc == 0) {
        g_rec = t;
        double loss = model_forward_backward(&M, NULL, NULL, 1.0f);
        comm_all_reduce_sum_f64(&dpg, &loss, 1);
        optim_cfg oc = {.lr = 0, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
        optim_step(&M, &wg, &oc, 0, 1, NULL);
        rec.synchronize();
        g_rec = NULL;
    }
    model_free(&M);
    mem_shutdown();
    comm_set_null_sink(NULL, NULL);
    memset(g_grp, 0, sizeof g_grp);
    if (rc == 0 && t->oom) {
        snprintf(err, errlen, "out of host memory recording the step (%zu events)", t->n);
        rc = -1;
    }
    return rc;
}
