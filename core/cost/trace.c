/* core/cost/trace.c — the step recorder of core/cost/trace.h: a planner engine (core/engine/engine.h)
 * replays one rank's step, and its trace appends one event per op ops_null is asked for (the ops_trace
 * hooks) and one per collective of its null groups (the comm_trace). Nothing is dereferenced: every
 * pointer the hooks see is a planning address of core/engine/mem. */
#include "core/cost/trace.h"
#include "core/engine/engine.h"
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
const char *const cost_group_names[COST_NGROUPS] = {"tp", "dp", "world", "replica"};

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

typedef struct recorder {
    cost_trace *t;                          /* where events go; NULL: not recording (set-up, tear-down) */
    const comm_group *grp[COST_NGROUPS];    /* the replay's groups, to name an event's group */
} recorder;

static cost_event *push(recorder *r) {
    cost_trace *t = r->t;
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

static void op(void *ctx, cost_op_kind k, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e, int host) {
    recorder *r = ctx;
    cost_event *ev = push(r);
    if (!ev) return;
    ev->type = COST_EV_OP; ev->kind = (uint8_t)k; ev->host = (uint8_t)host;
    ev->dim[0] = a; ev->dim[1] = b; ev->dim[2] = c; ev->dim[3] = d; ev->dim[4] = e;
    cost_op_work(k, ev->dim, r->t->cbytes, &ev->flops, &ev->bytes);
}

/* a collective of the replay's groups (core/engine/comm.h's trace); a group of one rank moves nothing
 * and costs nothing: neither its call nor its start and wait are recorded */
static void r_collective(void *ctx, const comm_group *g, comm_kind k, size_t bytes, comm_phase phase, int host,
                         uint64_t id) {
    recorder *r = ctx;
    if (g->size <= 1) return;
    cost_event *ev = push(r);
    if (!ev) return;
    ev->type = phase == COMM_STARTED ? COST_EV_START : phase == COMM_WAITED ? COST_EV_WAIT : COST_EV_COLL;
    ev->kind = (uint8_t)k; ev->host = (uint8_t)host; ev->id = (uint32_t)id; ev->bytes = (double)bytes;
    ev->group = COST_GROUP_WORLD;
    for (int i = 0; i < COST_NGROUPS; i++) if (g == r->grp[i]) ev->group = (uint8_t)i;
    ev->ranks = g->size;
}

/* the op hooks (ops_trace, kernels/kernels.h): the op's own arguments, nothing dereferenced */
static void r_mm_fwd(void *x, floatX *o, const floatX *i, const floatX *w, int N, int Cin, int Cout, int acc) {
    (void)o; (void)i; (void)w;
    op(x, COST_GEMM_FWD, N, Cout, Cin, acc, 0, 0);
}
static void r_mm_bwd(void *x, floatX *din, float *dw, const floatX *dout, const floatX *in, const floatX *w, int N,
                     int Cin, int Cout) {
    (void)dout; (void)in; (void)w;
    if (N <= 0 || Cin <= 0 || Cout <= 0) return;
    if (din) op(x, COST_GEMM_DIN, N, Cin, Cout, 0, 0, 0);
    if (dw) op(x, COST_GEMM_DW, Cout, Cin, N, 0, 0, 0);
}
static void r_mm_f32(void *x, float *o, const floatX *i, const floatX *w, int N, int Cin, int Cout) {
    (void)o; (void)i; (void)w;
    op(x, COST_GEMM_FWD_F32, N, Cout, Cin, 0, 0, 0);
}
static void r_emb_fwd(void *x, floatX *o, const int32_t *t, const floatX *tab, int N, int C, int vs, int vc) {
    (void)o; (void)t; (void)tab; (void)vs;
    op(x, COST_EMBED_FWD, N, C, vc, 0, 0, 0);
}
static void r_emb_bwd(void *x, float *dt, const floatX *dout, const int32_t *t, int N, int C, int vs, int vc) {
    (void)dt; (void)dout; (void)t; (void)vs;
    op(x, COST_EMBED_BWD, N, C, vc, 0, 0, 0);
}
static void r_norm_fwd(void *x, floatX *o, float *rstd, const floatX *in, const floatX *w, int N, int C, float eps) {
    (void)o; (void)rstd; (void)in; (void)w; (void)eps;
    op(x, COST_RMSNORM_FWD, N, C, 0, 0, 0, 0);
}
static void r_norm_bwd(void *x, floatX *dx, float *dw, const floatX *dout, const floatX *in, const floatX *w,
                       const float *rstd, int N, int C) {
    (void)dx; (void)dw; (void)dout; (void)in; (void)w; (void)rstd;
    op(x, COST_RMSNORM_BWD, N, C, 0, 0, 0, 0);
}
static void r_rope_fwd(void *x, floatX *o, const floatX *in, const float *tab, int B, int T, int nh, int hd) {
    (void)o; (void)in; (void)tab;
    op(x, COST_ROPE_FWD, (int64_t)B * T * nh * hd, (int64_t)T * hd, B, T, nh, 0);
}
static void r_rope_bwd(void *x, floatX *o, const floatX *in, const float *tab, int B, int T, int nh, int hd) {
    (void)o; (void)in; (void)tab;
    op(x, COST_ROPE_BWD, (int64_t)B * T * nh * hd, (int64_t)T * hd, B, T, nh, 0);
}
static void r_attn_fwd(void *x, floatX *o, float *lse, float *ws, const floatX *q, const floatX *k, const floatX *v,
                       int B, int T, int H, int KV, int hd) {
    (void)o; (void)lse; (void)ws; (void)q; (void)k; (void)v;
    op(x, COST_ATTN_FWD, B, T, H, KV, hd, 0);
}
static void r_attn_bwd(void *x, floatX *dq, floatX *dk, floatX *dv, float *ws, const floatX *dout, const floatX *out,
                       const float *lse, const floatX *q, const floatX *k, const floatX *v, int B, int T, int H, int KV,
                       int hd) {
    (void)dq; (void)dk; (void)dv; (void)ws; (void)dout; (void)out; (void)lse; (void)q; (void)k; (void)v;
    op(x, COST_ATTN_BWD, B, T, H, KV, hd, 0);
}
static void r_swiglu_fwd(void *x, floatX *o, const floatX *g, const floatX *u, size_t n) {
    (void)o; (void)g; (void)u;
    op(x, COST_SWIGLU_FWD, (int64_t)n, 0, 0, 0, 0, 0);
}
static void r_swiglu_bwd(void *x, floatX *dg, floatX *du, const floatX *dout, const floatX *g, const floatX *u, size_t n) {
    (void)dg; (void)du; (void)dout; (void)g; (void)u;
    op(x, COST_SWIGLU_BWD, (int64_t)n, 0, 0, 0, 0, 0);
}
static void r_ce_rowmax(void *x, float *mx, const float *l, int N, int V, int vv) {
    (void)mx; (void)l;
    op(x, COST_CE_ROWMAX, N, V, vv, 0, 0, 0);
}
static void r_ce_sumexp(void *x, float *se, const float *l, const float *mx, int N, int V, int vv) {
    (void)se; (void)l; (void)mx;
    op(x, COST_CE_SUMEXP, N, V, vv, 0, 0, 0);
}
static void r_ce_target(void *x, float *tl, const float *l, const int32_t *t, int N, int V, int vs) {
    (void)tl; (void)l; (void)t; (void)vs;
    op(x, COST_CE_TARGET, N, V, 0, 0, 0, 0);
}
static void r_ce_loss(void *x, float *loss, const float *mx, const float *se, const float *tl, int N) {
    (void)loss; (void)mx; (void)se; (void)tl;
    op(x, COST_CE_LOSS, N, 0, 0, 0, 0, 0);
}
static void r_ce_bwd(void *x, floatX *dl, const float *l, const float *mx, const float *se, const int32_t *t, float s,
                     int N, int V, int vs, int vv) {
    (void)dl; (void)l; (void)mx; (void)se; (void)t; (void)s; (void)vs;
    op(x, COST_CE_BWD, N, V, vv, 0, 0, 0);
}
static void r_adamw(void *x, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                    float eps, float wd, float bc1, float bc2) {
    (void)p; (void)g; (void)m; (void)v; (void)lr; (void)b1; (void)b2; (void)eps; (void)wd; (void)bc1; (void)bc2;
    op(x, COST_ADAMW, (int64_t)n, 0, 0, 0, 0, 0);
}
/* the engine's optimizer pass: the AdamW update, and the work it folds in — the gradient scale (a clipped
 * step), the compute copy (dp = 1) and the gradient zeroing (dp = 1) — each as the op it replaces */
static void r_adamw_fused(void *x, float *p, void *pc, float *g, float *m, float *v, size_t n, float gscale, int zero_g,
                          float lr, float b1, float b2, float eps, float wd, float bc1, float bc2) {
    (void)p; (void)g; (void)m; (void)v; (void)lr; (void)b1; (void)b2; (void)eps; (void)wd; (void)bc1; (void)bc2;
    if (gscale != 1.0f) op(x, COST_SCALE, (int64_t)n, 0, 0, 0, 0, 0);
    op(x, COST_ADAMW, (int64_t)n, 0, 0, 0, 0, 0);
    if (pc) op(x, COST_TO_COMPUTE, (int64_t)n, 0, 0, 0, 0, 0);
    if (zero_g) op(x, COST_ZERO, (int64_t)(n * sizeof(float)), 0, 0, 0, 0, 0);
}
static void r_add(void *x, floatX *y, const floatX *in, size_t n) { (void)y; (void)in; op(x, COST_ADD, (int64_t)n, 0, 0, 0, 0, 0); }
static void r_scale(void *x, float *y, float s, size_t n) { (void)y; (void)s; op(x, COST_SCALE, (int64_t)n, 0, 0, 0, 0, 0); }
static void r_sumsq(void *x, const float *const *in, const size_t *n, int count) {
    (void)in;
    int64_t t = 0;
    for (int i = 0; i < count; i++) t += (int64_t)n[i];
    op(x, COST_SUMSQ, t, count, 0, 0, 0, 1); /* the result goes to the host: it waits */
}
static void r_zero(void *x, void *d, size_t b) { (void)d; op(x, COST_ZERO, (int64_t)b, 0, 0, 0, 0, 0); }
static void r_copy(void *x, void *d, const void *s, size_t b) { (void)d; (void)s; op(x, COST_COPY, (int64_t)b, 0, 0, 0, 0, 0); }
static void r_to_host(void *x, void *d, const void *s, size_t b) {
    (void)d; (void)s;
    op(x, COST_TO_HOST, (int64_t)b, 0, 0, 0, 0, 1);
}
static void r_from_host(void *x, void *d, const void *s, size_t b) {
    (void)d; (void)s;
    op(x, COST_FROM_HOST, (int64_t)b, 0, 0, 0, 0, 0);
}
static void r_to_compute(void *x, void *d, const float *s, size_t n) {
    (void)d; (void)s;
    op(x, COST_TO_COMPUTE, (int64_t)n, 0, 0, 0, 0, 0);
}

/* The step as core/run/run.c times it (its step loop): forward and backward, the loss summed over the DP
 * group on the host, the optimizer step with its gradient-norm all-reduce over the world — replayed by
 * a planner engine (ops_null, a plan arena, null groups) whose trace appends the events; set-up
 * (model_init) and tear-down are not part of the step and are not recorded. */
int cost_record_step(const model_config *cfg, int world, int tp, int rank, dtype_t dtype, const model_opts *o,
                     cost_trace *t, char *err, size_t errlen) {
    return cost_record_step_mem(cfg, world, tp, rank, dtype, o, 0, t, NULL, NULL, err, errlen);
}

int cost_record_step_mem(const model_config *cfg, int world, int tp, int rank, dtype_t dtype, const model_opts *o,
                         uint64_t budget, cost_trace *t, mem_stats *mem, size_t *micro_end, char *err, size_t errlen) {
    mesh_t m;
    if (mesh_init_hsdp(&m, world, rank, o->replicate > 1 ? o->replicate : 1, tp, err, errlen)) return -1;
    t->n = 0, t->oom = 0;   /* the events' buffer is kept: a caller recording rank after rank grows it once */
    t->cbytes = (int)dtype_bytes(dtype);
    recorder rec = {0};
    ops_trace ot = {
        .ctx = &rec, .matmul_forward = r_mm_fwd, .matmul_backward = r_mm_bwd, .matmul_forward_f32out = r_mm_f32,
        .embedding_forward = r_emb_fwd, .embedding_backward = r_emb_bwd, .rmsnorm_forward = r_norm_fwd,
        .rmsnorm_backward = r_norm_bwd, .rope_forward = r_rope_fwd, .rope_backward = r_rope_bwd,
        .attention_forward = r_attn_fwd, .attention_backward = r_attn_bwd, .swiglu_forward = r_swiglu_fwd,
        .swiglu_backward = r_swiglu_bwd, .ce_rowmax = r_ce_rowmax, .ce_sumexp = r_ce_sumexp, .ce_target = r_ce_target,
        .ce_loss = r_ce_loss, .ce_backward = r_ce_bwd, .adamw = r_adamw, .adamw_fused = r_adamw_fused,
        .add_inplace = r_add, .scale_inplace = r_scale, .sumsq = r_sumsq, .zero = r_zero, .copy = r_copy,
        .to_host = r_to_host, .from_host = r_from_host, .to_compute = r_to_compute};
    comm_trace ct = {.ctx = &rec, .collective = r_collective};
    engine_trace tr = {.ops = &ot, .comm = &ct};
    engine_t P;
    engine_init_plan(&P, dtype, budget);
    engine_set_trace(&P, &tr);
    const ops_trace *was = ops_null_bind(&ot);
    comm_group tpg, dpg, shg, repg, wg;
    comm_null_group(&tpg, &P.comm, m.tp, m.tp_rank);
    comm_null_group(&dpg, &P.comm, m.dp, m.dp_rank);
    comm_null_group(&shg, &P.comm, m.shard, m.shard_rank);
    comm_null_group(&repg, &P.comm, m.rep, m.rep_rank);
    comm_null_group(&wg, &P.comm, m.world, m.rank);
    /* HSDP: FSDP's collectives run on the shard group (priced as dp), the gradient's all-reduce on the replica
     * group; the loss's 8-byte sum over all dp ranks is then priced as a world collective */
    int hsdp = m.rep > 1;
    rec.grp[COST_GROUP_TP] = &tpg; rec.grp[COST_GROUP_DP] = hsdp ? &shg : &dpg; rec.grp[COST_GROUP_WORLD] = &wg;
    rec.grp[COST_GROUP_REPLICA] = &repg;
    model_t M;
    int rc = model_init(&M, &P, cfg, &m, &tpg, hsdp ? &shg : &dpg, o, err, errlen);
    if (rc == 0) {
        if (hsdp) M.fsdp.rep = &repg;
        rec.t = t;
        /* every micro-batch of the step, as core/run/run.c runs it, then the optimizer */
        double loss = 0;
        int n = model_micro_batches(o);
        for (int k = 0; k < n; k++) {
            model_accum_begin(&M, k, n);
            loss += model_forward_backward(&M, NULL, NULL, 1.0f);
            if (micro_end) micro_end[k] = t->n;
        }
        comm_all_reduce_sum_f64(&dpg, &loss, 1);
        optim_cfg oc = {.lr = 0, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
        optim_step(&M, &wg, &oc, 0, 1, NULL);
        rec.t = NULL;
        if (mem) *mem = *mem_get_stats(&P.mem);
    }
    model_free(&M);
    ops_null_bind(was);
    engine_release(&P);
    if (rc == 0 && t->oom) {
        snprintf(err, errlen, "out of host memory recording the step (%zu events)", t->n);
        rc = -1;
    }
    return rc;
}
