/* core/engine/model.c — Llama forward and backward composed from kernels, core/engine/tp and core/engine/fsdp.
 * Buffer lifetimes (category):
 *   activations  saved for backward: per layer x, rstd1, h1, q, k, v, ao, lse, xmid, rstd2, h2, gate, up;
 *                the final norm's xL, rstdf, hf; the step's tokens. Of a checkpointed layer (every
 *                layer, or every K-th: model_layer_checkpointed) only x is kept and the rest is
 *                recomputed in backward. With sequence parallel and sp_local (the
 *                default, --sp-activations local) h1 and h2, the all-gathered inputs of q/k/v and
 *                gate/up, are not saved: they are workspace in forward, and backward recomputes the
 *                rank's shard rmsnorm(x) / rmsnorm(xmid) (rstd is saved) and all-gathers it again
 *                for the weight-gradient GEMMs (Megatron-LM's choice; one extra all-gather of [Nt,d] per
 *                block and step). That all-gather is started before the input-gradient GEMMs, which do
 *                not read it, and waited for before the weight-gradient GEMMs (column_backward): it
 *                overlaps them where the backend has streams (NCCL's, ordered with events); over MPI
 *                it progresses in the wait.
 *   workspace    temporaries: norm outputs before the SP gather, row-parallel partial sums, the attention
 *                scratch, the SwiGLU output, logits chunks and CE statistics, every backward gradient
 *                of an activation; and, for the whole run, the RoPE cos/sin table (computed once).
 * Tied embeddings (tie_word_embeddings): the root unit has no lm_head segment; head_seg() names the
 * embedding instead, so the head's matmul reads the embedding's rows (both vocabulary-parallel by
 * rows: one shard layout) and its backward accumulates into the embedding's gradient, where
 * embed_backward adds the lookup's part later in the same grad_begin/grad_end of the root: the
 * gradient is the sum of both uses, and being one segment it is decayed once and counted once in
 * the gradient norm. Everything else (init, --init, --save, the planner) follows the segment table.
 * Shapes: Nt = B*T rows (full sequence), Ns = B*T/tp rows (sequence shard with SP, else Nt). */
#include "core/engine/model.h"
#include "core/engine/init.h"
#include "core/engine/mem.h"
#include "core/common/parse.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { S_IN, S_Q, S_K, S_V, S_O, S_POST, S_GATE, S_UP, S_DOWN };   /* layer unit segments */
enum { R_EMB, R_NORM, R_HEAD };                                      /* root segments, in HF order */

/* The root's FSDP units. Untied (split_root): unit L is the embedding alone (gathered for the forward
 * lookup and released; its backward is a scatter-add into the gradient that reads no weight, so it is
 * not gathered again), unit L+1 the head, final norm and lm_head (gathered after the last layer's
 * forward, prefetched during it, reduce-scattered and released right after its own backward). Tied
 * embeddings: one root unit L (embedding, norm, lm_head) gathered from the lookup to the end of the
 * step, as the one tensor serves both ends. */
static int split_root(const model_t *M) { return !M->cfg.tie_word_embeddings; }
static int emb_unit(const model_t *M) { return M->L; }
static int head_unit(const model_t *M) { return M->L + split_root(M); }
/* segment index of the final norm and lm_head inside head_unit */
static int norm_seg(const model_t *M) { return R_NORM - split_root(M); }
static int lm_seg(const model_t *M) { return R_HEAD - split_root(M); }

#define ACT(n) mem_alloc(&M->E->mem, MEM_ACTIVATIONS, (size_t)(n) * engine_cbytes(M->E))
#define ACT32(n) mem_alloc(&M->E->mem, MEM_ACTIVATIONS, (size_t)(n) * sizeof(float))
#define WS(n) mem_alloc(&M->E->mem, MEM_WORKSPACE, (size_t)(n) * engine_cbytes(M->E))
#define WSZ(n) mem_calloc(&M->E->mem, MEM_WORKSPACE, (size_t)(n) * engine_cbytes(M->E))
#define WS32(n) mem_alloc(&M->E->mem, MEM_WORKSPACE, (size_t)(n) * sizeof(float))
#define FREE(p) mem_free(&M->E->mem, (p))

/* The unit tables: one row per HF tensor, in HF order. Norm weights are replicated on every TP rank;
 * q, k, v, gate, up, the embedding and lm_head are split by rows (column parallel), o and down by
 * columns (row parallel). Fields left out are zero. */
static void add_layer_unit(model_t *M, fsdp_unit *u, int i) {
    const model_config *c = &M->cfg;
    int d = c->hidden_size, hd = M->hd, t = M->mesh.tp_rank;
    int H = c->num_attention_heads, KV = c->num_key_value_heads, f = c->intermediate_size;
    const tp_shape *s = &M->sh;
    const int64_t q = (int64_t)s->Hl * hd, kv = (int64_t)s->KVl * hd, fl = s->fl, qf = (int64_t)H * hd, kvf = (int64_t)KV * hd;
    const fsdp_seg seg[] = {
        [S_IN]   = {.name = "input_layernorm.weight",          .rows = 1,  .cols = d,  .split = SPLIT_NONE, .full_rows = 1,   .full_cols = d,                 .valid_rows = 1,  .replicated = 1, .ndim = 1},
        [S_Q]    = {.name = "self_attn.q_proj.weight",         .rows = q,  .cols = d,  .split = SPLIT_ROWS, .full_rows = qf,  .full_cols = d,  .row0 = t * q,  .valid_rows = q,  .decay = 1,      .ndim = 2},
        [S_K]    = {.name = "self_attn.k_proj.weight",         .rows = kv, .cols = d,  .split = SPLIT_ROWS, .full_rows = kvf, .full_cols = d,  .row0 = t * kv, .valid_rows = kv, .decay = 1,      .ndim = 2},
        [S_V]    = {.name = "self_attn.v_proj.weight",         .rows = kv, .cols = d,  .split = SPLIT_ROWS, .full_rows = kvf, .full_cols = d,  .row0 = t * kv, .valid_rows = kv, .decay = 1,      .ndim = 2},
        [S_O]    = {.name = "self_attn.o_proj.weight",         .rows = d,  .cols = q,  .split = SPLIT_COLS, .full_rows = d,   .full_cols = qf, .col0 = t * q,  .valid_rows = d,  .decay = 1,      .ndim = 2},
        [S_POST] = {.name = "post_attention_layernorm.weight", .rows = 1,  .cols = d,  .split = SPLIT_NONE, .full_rows = 1,   .full_cols = d,                 .valid_rows = 1,  .replicated = 1, .ndim = 1},
        [S_GATE] = {.name = "mlp.gate_proj.weight",            .rows = fl, .cols = d,  .split = SPLIT_ROWS, .full_rows = f,   .full_cols = d,  .row0 = t * fl, .valid_rows = fl, .decay = 1,      .ndim = 2},
        [S_UP]   = {.name = "mlp.up_proj.weight",              .rows = fl, .cols = d,  .split = SPLIT_ROWS, .full_rows = f,   .full_cols = d,  .row0 = t * fl, .valid_rows = fl, .decay = 1,      .ndim = 2},
        [S_DOWN] = {.name = "mlp.down_proj.weight",            .rows = d,  .cols = fl, .split = SPLIT_COLS, .full_rows = d,   .full_cols = f,  .col0 = t * fl, .valid_rows = d,  .decay = 1,      .ndim = 2},
    };
    _Static_assert(sizeof seg / sizeof seg[0] == S_DOWN + 1, "one row per layer segment");
    snprintf(u->name, sizeof u->name, "layer%d", i);
    for (int k = 0; k <= S_DOWN; k++) {
        fsdp_seg g = seg[k];
        snprintf(g.name, sizeof g.name, "model.layers.%d.%.60s", i, seg[k].name);
        fsdp_add_seg(u, &g);
    }
}

/* the head-unit segment lm_head reads: its own, or with tied embeddings the embedding */
static int head_seg(const model_t *M) { return M->cfg.tie_word_embeddings ? R_EMB : lm_seg(M); }

static void add_root_units(model_t *M, fsdp_unit *u) {
    const tp_shape *s = &M->sh;
    int d = M->d, V = M->cfg.vocab_size;
    const fsdp_seg seg[] = {
        [R_EMB]  = {.name = "model.embed_tokens.weight", .rows = s->Vl, .cols = d, .split = SPLIT_ROWS, .full_rows = V, .full_cols = d, .row0 = s->v_start, .valid_rows = s->v_valid, .decay = 1,      .ndim = 2},
        [R_NORM] = {.name = "model.norm.weight",         .rows = 1,     .cols = d, .split = SPLIT_NONE, .full_rows = 1, .full_cols = d,                      .valid_rows = 1,          .replicated = 1, .ndim = 1},
        [R_HEAD] = {.name = "lm_head.weight",            .rows = s->Vl, .cols = d, .split = SPLIT_ROWS, .full_rows = V, .full_cols = d, .row0 = s->v_start, .valid_rows = s->v_valid, .decay = 1,      .ndim = 2},
    };
    _Static_assert(sizeof seg / sizeof seg[0] == R_HEAD + 1, "one row per root segment");
    if (split_root(M)) {
        snprintf(u[0].name, sizeof u[0].name, "embedding");
        fsdp_add_seg(&u[0], &seg[R_EMB]);
        snprintf(u[1].name, sizeof u[1].name, "head");
        for (int k = R_NORM; k <= R_HEAD; k++) fsdp_add_seg(&u[1], &seg[k]);
        return;
    }
    snprintf(u->name, sizeof u->name, "root");
    for (int k = 0; k <= R_HEAD; k++)
        if (k != R_HEAD) fsdp_add_seg(u, &seg[k]);   /* tied: lm_head reads the embedding */
}

int model_init(model_t *M, engine_t *E, const model_config *cfg, const mesh_t *mesh, comm_group *tpg,
               comm_group *dpg, const model_opts *opt, char *err, size_t errlen) {
    memset(M, 0, sizeof *M);
    M->cfg = *cfg; M->mesh = *mesh; M->E = E; M->opt = *opt;
    engine_attention_fold(E, opt->attention_flash && opt->nondeterministic);
    if (tp_shape_of(&M->sh, cfg, mesh->tp, mesh->tp_rank, err, errlen)) return -1;
    int sp = opt->sequence_parallel && mesh->tp > 1;
    if (sp && opt->T % mesh->tp) {
        snprintf(err, errlen, "--seq-len %d is not divisible by --tp %d (required with sequence parallel; "
                 "use --no-sequence-parallel)", opt->T, mesh->tp);
        return -1;
    }
    M->L = cfg->num_hidden_layers; M->d = cfg->hidden_size; M->hd = cfg->hidden_size / cfg->num_attention_heads;
    tp_init(&M->tp, E, tpg, sp, opt->B, opt->T);
    M->Nt = opt->B * opt->T; M->Ns = opt->B * M->tp.Tl;
    M->units = calloc((size_t)M->L + 2, sizeof *M->units);
    M->acts = calloc((size_t)M->L, sizeof *M->acts);
    M->loss_host = calloc((size_t)M->Nt, sizeof(float));
    if (!M->units || !M->acts || !M->loss_host) { snprintf(err, errlen, "out of host memory"); return -1; }
    for (int i = 0; i < M->L; i++) add_layer_unit(M, &M->units[i], i);
    add_root_units(M, &M->units[M->L]);
    /* with sequence parallel the norm weights' gradients are summed over TP after each micro-batch
     * (tp_norm_grad_sync): TP rank 0 alone carries their sum so far into that sum */
    M->fsdp = (fsdp_t){.n = head_unit(M) + 1, .u = M->units, .dp = dpg, .E = E, .prefetch = opt->prefetch, .nmicro = 1,
                       .reduce_last = opt->accum_reduce_last, .carry_replicated = !(sp && mesh->tp_rank != 0)};
    fsdp_alloc_state(&M->fsdp);
    /* RoPE table, once per run: frequencies with rope_scaling (core/formats/config), cos/sin in double. A
     * planner computes nothing: only its bytes count. */
    size_t nrope = rope_table_floats(opt->T, M->hd);
    M->rope = mem_alloc(&E->mem, MEM_WORKSPACE, nrope * sizeof(float));
    if (!E->plan) {
        double *inv = malloc((size_t)(M->hd / 2 + 1) * sizeof *inv);
        float *tab = malloc((nrope + 1) * sizeof *tab);
        if (!inv || !tab) { free(inv); free(tab); snprintf(err, errlen, "out of host memory"); return -1; }
        config_rope_inv_freq(cfg, inv);
        rope_table_fill(tab, inv, opt->T, M->hd);
        E->ops->from_host(M->rope, tab, nrope * sizeof(float));
        free(inv); free(tab);
    }
    return 0;
}

void model_free(model_t *M) {
    if (M->rope) FREE(M->rope);
    M->rope = NULL;
    if (M->units) fsdp_free_state(&M->fsdp);
    free(M->units); free(M->acts); free(M->loss_host);
    M->units = NULL; M->acts = NULL; M->loss_host = NULL;
}

typedef struct { uint64_t seed; double std; int threads; } init_ctx;
static void fill_init(void *ctx, const fsdp_seg *s, int64_t first, int64_t count, float *dst) {
    const init_ctx *c = ctx;
    init_block b = {.seed = c->seed, .name_hash = init_name_hash(s->name), .std = c->std, .cols = s->cols,
                    .full_cols = s->full_cols, .row0 = s->row0, .col0 = s->col0, .valid_rows = s->valid_rows,
                    .ndim = s->ndim};
    init_fill(&b, first, count, dst, c->threads);
}
void model_init_params(model_t *M, uint64_t seed) {
    init_ctx c = {seed, M->cfg.initializer_range, init_threads()};
    fsdp_fill_params(&M->fsdp, fill_init, &c);
}

/* ---------------------------------------------------------------- helpers */
/* compute-precision pointer arithmetic: activations and gathered copies hold elements of the engine's dtype */
static floatX *CP(const model_t *M, floatX *p, size_t i) { return (floatX *)((char *)p + i * engine_cbytes(M->E)); }
static floatX *W(model_t *M, int unit, int seg) {
    return CP(M, M->units[unit].full, (size_t)M->units[unit].seg[seg].off);
}
static float *G(model_t *M, int unit, int seg) { return M->units[unit].full_g + M->units[unit].seg[seg].off; }

/* rmsnorm of the local rows x[Ns,d], then (SP) gathered to out[Nt,d] */
static void norm_enter(model_t *M, floatX *out, float *rstd, const floatX *x, const floatX *w) {
    const ops_t *o = M->E->ops;
    if (M->tp.sp) {
        floatX *n = WS((size_t)M->Ns * M->d);
        o->rmsnorm_forward(n, rstd, x, w, M->Ns, M->d, (float)M->cfg.rms_norm_eps);
        tp_enter(&M->tp, out, n, M->d);
        FREE(n);
    } else {
        o->rmsnorm_forward(out, rstd, x, w, M->Ns, M->d, (float)M->cfg.rms_norm_eps);
    }
}

/* sp_local: the column-parallel blocks' gathered inputs are workspace, not saved */
static int sp_local(const model_t *M) { return M->tp.sp && M->opt.sp_local; }
static floatX *NORM_OUT(model_t *M) {
    size_t n = (size_t)M->Nt * M->d;
    return sp_local(M) ? WS(n) : ACT(n);
}

/* Backward of the column-parallel GEMMs that share one input h [Nt,d] (q/k/v, or gate/up):
 * din += Σ dout_k · W_k, then dW_k += dout_kᵀ · h. With sp_local, h is the all-gathered norm output
 * again: the rank's shard is recomputed from the saved layer input x and rstd (rmsnorm_forward
 * rewrites rstd with the same values), its all-gather is started before the input-gradient GEMMs,
 * which do not read h, and waited for before the weight-gradient GEMMs, so it overlaps them where
 * the backend has streams. */
static void column_backward(model_t *M, int i, floatX *din, int nb, const int *slot, floatX *const *dout,
                            const int *cout, floatX *h, const floatX *x, int norm_slot, float *rstd) {
    const ops_t *o = M->E->ops;
    int d = M->d, Nt = M->Nt;
    floatX *n = NULL;
    tp_req q;
    if (sp_local(M)) {
        h = WS((size_t)Nt * d);
        n = WS((size_t)M->Ns * d);
        o->rmsnorm_forward(n, rstd, x, W(M, i, norm_slot), M->Ns, d, (float)M->cfg.rms_norm_eps);
        tp_enter_start(&M->tp, &q, h, n, d);
    }
    for (int k = 0; k < nb; k++) o->matmul_backward(din, NULL, dout[k], NULL, W(M, i, slot[k]), Nt, d, cout[k]);
    if (n) tp_enter_finish(&M->tp, &q);
    for (int k = 0; k < nb; k++) o->matmul_backward(NULL, G(M, i, slot[k]), dout[k], h, NULL, Nt, d, cout[k]);
    if (n) { FREE(n); FREE(h); }
}

/* dx[Ns,d] += rmsnorm backward of the full-row gradient dfull[Nt,d] (reduced over TP first) */
static void norm_enter_backward(model_t *M, floatX *dx, float *dw, floatX *dfull, const floatX *x, const floatX *w,
                                const float *rstd) {
    floatX *dn = dfull;
    if (M->tp.sp) dn = WS((size_t)M->Ns * M->d);
    tp_enter_backward(&M->tp, dn, dfull, M->d);
    M->E->ops->rmsnorm_backward(dx, dw, dn, x, w, rstd, M->Ns, M->d);
    if (dn != dfull) FREE(dn);
}

/* ---------------------------------------------------------------- layer */
static void layer_forward(model_t *M, int i, layer_acts *a, floatX *x_out) {
    const ops_t *o = M->E->ops;
    int d = M->d, hd = M->hd, Nt = M->Nt, Ns = M->Ns, B = M->opt.B, T = M->opt.T;
    int Hl = M->sh.Hl, KVl = M->sh.KVl, fl = M->sh.fl;
    a->rstd1 = ACT32(Ns);
    a->h1 = NORM_OUT(M);
    norm_enter(M, a->h1, a->rstd1, a->x, W(M, i, S_IN));
    a->q = ACT((size_t)Nt * Hl * hd);
    a->k = ACT((size_t)Nt * KVl * hd);
    a->v = ACT((size_t)Nt * KVl * hd);
    o->matmul_forward(a->q, a->h1, W(M, i, S_Q), Nt, d, Hl * hd, 0);
    o->matmul_forward(a->k, a->h1, W(M, i, S_K), Nt, d, KVl * hd, 0);
    o->matmul_forward(a->v, a->h1, W(M, i, S_V), Nt, d, KVl * hd, 0);
    if (sp_local(M)) { FREE(a->h1); a->h1 = NULL; }
    o->rope_forward(a->q, a->q, M->rope, B, T, Hl, hd);
    o->rope_forward(a->k, a->k, M->rope, B, T, KVl, hd);
    a->ao = ACT((size_t)Nt * Hl * hd);
    a->lse = ACT32((size_t)B * Hl * T);
    float *ws = M->opt.attention_flash ? NULL : WS32(attention_ws_floats(T)); /* CUDA: none */
    o->attention_forward(a->ao, a->lse, ws, a->q, a->k, a->v, B, T, Hl, KVl, hd);
    FREE(ws);
    floatX *part = WS((size_t)Nt * d);
    o->matmul_forward(part, a->ao, W(M, i, S_O), Nt, Hl * hd, d, 0);
    a->xmid = ACT((size_t)Ns * d);
    tp_exit(&M->tp, a->xmid, part, d);
    FREE(part);
    o->add_inplace(a->xmid, a->x, (size_t)Ns * d);
    a->rstd2 = ACT32(Ns);
    a->h2 = NORM_OUT(M);
    norm_enter(M, a->h2, a->rstd2, a->xmid, W(M, i, S_POST));
    a->gate = ACT((size_t)Nt * fl);
    a->up = ACT((size_t)Nt * fl);
    o->matmul_forward(a->gate, a->h2, W(M, i, S_GATE), Nt, d, fl, 0);
    o->matmul_forward(a->up, a->h2, W(M, i, S_UP), Nt, d, fl, 0);
    if (sp_local(M)) { FREE(a->h2); a->h2 = NULL; }
    floatX *act = WS((size_t)Nt * fl);
    o->swiglu_forward(act, a->gate, a->up, (size_t)Nt * fl);
    part = WS((size_t)Nt * d);
    o->matmul_forward(part, act, W(M, i, S_DOWN), Nt, fl, d, 0);
    FREE(act);
    tp_exit(&M->tp, x_out, part, d);
    FREE(part);
    o->add_inplace(x_out, a->xmid, (size_t)Ns * d);
}

/* free everything a layer saved except its input x */
static void layer_free_saved(model_t *M, layer_acts *a) {
    float **p[] = {&a->rstd1, &a->h1, &a->q, &a->k, &a->v, &a->ao, &a->lse, &a->xmid, &a->rstd2, &a->h2,
                   &a->gate, &a->up};
    for (size_t k = sizeof p / sizeof p[0]; k-- > 0;) { FREE(*p[k]); *p[k] = NULL; }
}

/* dx_out: gradient of the layer output [Ns,d]; returns the gradient of its input [Ns,d] (workspace) */
static floatX *layer_backward(model_t *M, int i, layer_acts *a, floatX *dx_out) {
    const ops_t *o = M->E->ops;
    int d = M->d, hd = M->hd, Nt = M->Nt, Ns = M->Ns, B = M->opt.B, T = M->opt.T;
    int Hl = M->sh.Hl, KVl = M->sh.KVl, fl = M->sh.fl;
    if (model_layer_checkpointed(&M->opt, i)) {
        floatX *scratch = WS((size_t)Ns * d);
        layer_forward(M, i, a, scratch);
        FREE(scratch);
    }
    /* MLP */
    floatX *df = M->tp.sp ? WS((size_t)Nt * d) : dx_out;
    tp_exit_backward(&M->tp, df, dx_out, d);
    floatX *act = WS((size_t)Nt * fl);
    o->swiglu_forward(act, a->gate, a->up, (size_t)Nt * fl);
    floatX *dact = WSZ((size_t)Nt * fl);
    o->matmul_backward(dact, G(M, i, S_DOWN), df, act, W(M, i, S_DOWN), Nt, fl, d);
    FREE(act);
    if (df != dx_out) FREE(df);
    floatX *dgate = WSZ((size_t)Nt * fl), *dup = WSZ((size_t)Nt * fl);
    o->swiglu_backward(dgate, dup, dact, a->gate, a->up, (size_t)Nt * fl);
    FREE(dact);
    floatX *dh2 = WSZ((size_t)Nt * d);
    column_backward(M, i, dh2, 2, (const int[]){S_GATE, S_UP}, (floatX *const[]){dgate, dup}, (const int[]){fl, fl},
                    a->h2, a->xmid, S_POST, a->rstd2);
    FREE(dup); FREE(dgate);
    floatX *dxmid = WS((size_t)Ns * d);
    o->copy(dxmid, dx_out, (size_t)Ns * d * engine_cbytes(M->E));
    norm_enter_backward(M, dxmid, G(M, i, S_POST), dh2, a->xmid, W(M, i, S_POST), a->rstd2);
    FREE(dh2);
    /* attention */
    df = M->tp.sp ? WS((size_t)Nt * d) : dxmid;
    tp_exit_backward(&M->tp, df, dxmid, d);
    floatX *dao = WSZ((size_t)Nt * Hl * hd);
    o->matmul_backward(dao, G(M, i, S_O), df, a->ao, W(M, i, S_O), Nt, Hl * hd, d);
    if (df != dxmid) FREE(df);
    floatX *dq = WSZ((size_t)Nt * Hl * hd), *dk = WSZ((size_t)Nt * KVl * hd), *dv = WSZ((size_t)Nt * KVl * hd);
    /* CUDA with --deterministic off: dq folded into the dk/dv pass, summed by fp32 atomics in its workspace */
    const int fold = M->opt.attention_flash && M->opt.nondeterministic;
    float *ws = WS32(!M->opt.attention_flash ? attention_ws_floats(T)
                     : fold                  ? attention_flash_fold_ws_floats(B, T, Hl, KVl, hd)
                                             : attention_flash_ws_floats(B, T, Hl, KVl, hd));
    o->attention_backward(dq, dk, dv, ws, dao, a->ao, a->lse, a->q, a->k, a->v, B, T, Hl, KVl, hd);
    FREE(ws); FREE(dao);
    o->rope_backward(dq, dq, M->rope, B, T, Hl, hd);
    o->rope_backward(dk, dk, M->rope, B, T, KVl, hd);
    floatX *dh1 = WSZ((size_t)Nt * d);
    column_backward(M, i, dh1, 3, (const int[]){S_Q, S_K, S_V}, (floatX *const[]){dq, dk, dv},
                    (const int[]){Hl * hd, KVl * hd, KVl * hd}, a->h1, a->x, S_IN, a->rstd1);
    FREE(dv); FREE(dk); FREE(dq);
    floatX *dx = WS((size_t)Ns * d);
    o->copy(dx, dxmid, (size_t)Ns * d * engine_cbytes(M->E));
    norm_enter_backward(M, dx, G(M, i, S_IN), dh1, a->x, W(M, i, S_IN), a->rstd1);
    FREE(dh1); FREE(dxmid);
    tp_norm_grad_sync(&M->tp, G(M, i, S_IN), d);
    tp_norm_grad_sync(&M->tp, G(M, i, S_POST), d);
    return dx;
}

/* ---------------------------------------------------------------- whole model */
static void embed_forward(model_t *M, floatX *x0) {
    int root = emb_unit(M), d = M->d;
    if (M->mesh.tp == 1) {
        M->E->ops->embedding_forward(x0, M->tok, W(M, root, R_EMB), M->Nt, d, M->sh.v_start, M->sh.Vl);
        return;
    }
    floatX *full = WS((size_t)M->Nt * d);
    M->E->ops->embedding_forward(full, M->tok, W(M, root, R_EMB), M->Nt, d, M->sh.v_start, M->sh.Vl);
    tp_exit(&M->tp, x0, full, d);
    FREE(full);
}

static void embed_backward(model_t *M, floatX *dx0) {
    int root = emb_unit(M), d = M->d;
    floatX *df = M->tp.sp ? WS((size_t)M->Nt * d) : dx0;
    tp_exit_backward(&M->tp, df, dx0, d);
    M->E->ops->embedding_backward(G(M, root, R_EMB), df, M->tok, M->Nt, d, M->sh.v_start, M->sh.Vl);
    if (df != dx0) FREE(df);
}

/* The loss streams the vocabulary by rows: chunks of max(HEAD_CHUNK_MIN_ROWS, HEAD_CHUNK_BYTES / (Vl·lb))
 * rows (at most Nt), lb = 4 bytes of the fp32 logit plus, when training in a 2-byte compute precision,
 * the logit gradient's cbytes (an fp32 table writes the gradient over the logits). The lm_head weight
 * is read once per 2048 or more tokens (one chunk for llama3.2-1b at 1 x 2048), and the logits
 * workspace stays under max(2048·Vl·lb, 512 MiB) bytes. */
#define HEAD_CHUNK_MIN_ROWS 2048
#define HEAD_CHUNK_BYTES ((int64_t)512 << 20)
static int head_logit_bytes(const model_t *M, int train) {
    return 4 + (train && M->E->dtype != DTYPE_F32 ? (int)engine_cbytes(M->E) : 0);
}
static int head_chunk_rows(const model_t *M, int train) {
    int64_t rows = HEAD_CHUNK_BYTES / ((int64_t)(M->sh.Vl > 0 ? M->sh.Vl : 1) * head_logit_bytes(M, train));
    if (rows < HEAD_CHUNK_MIN_ROWS) rows = HEAD_CHUNK_MIN_ROWS;
    return rows > M->Nt ? M->Nt : (int)rows;
}

/* lm_head + vocab-parallel loss over hf[Nt,d]; with dhf != NULL also the lm_head backward. The CE reads
 * fp32 logits (matmul_forward_f32out) and keeps its statistics and the per-token losses on the device;
 * the one host copy (and wait) is the losses of all Nt tokens, after the last chunk. */
static double head_loss(model_t *M, floatX *dhf, float scale) {
    const ops_t *o = M->E->ops;
    int root = head_unit(M), d = M->d, Vl = M->sh.Vl, chunk = head_chunk_rows(M, dhf != NULL);
    float *logits = WS32((size_t)chunk * Vl);
    floatX *dlogits = !dhf ? NULL : M->E->dtype == DTYPE_F32 ? logits : WS((size_t)chunk * Vl);
    float *stats = WS32(3 * (size_t)chunk);
    float *loss = WS32((size_t)M->Nt);
    for (int r0 = 0; r0 < M->Nt; r0 += chunk) {
        int rows = M->Nt - r0 < chunk ? M->Nt - r0 : chunk;
        const floatX *h = CP(M, M->hf, (size_t)r0 * d);
        o->matmul_forward_f32out(logits, h, W(M, root, head_seg(M)), rows, d, Vl);
        tp_cross_entropy(&M->tp, &M->sh, logits, dlogits, M->tgt + r0, rows, scale, stats, loss + r0);
        if (dhf) o->matmul_backward(CP(M, dhf, (size_t)r0 * d), G(M, root, head_seg(M)), dlogits, h, W(M, root, head_seg(M)),
                                    rows, d, Vl);
    }
    o->to_host(M->loss_host, loss, (size_t)M->Nt * sizeof(float));
    double sum = 0;   /* a plan's copy moved nothing: no loss to sum */
    if (!M->E->mem.plan)
        for (int r = 0; r < M->Nt; r++) sum += M->loss_host[r];
    FREE(loss); FREE(stats);
    if (dlogits != logits) FREE(dlogits);
    FREE(logits);
    return sum;
}

static void load_tokens(model_t *M, const int32_t *inputs, const int32_t *targets) {
    M->tok = mem_alloc(&M->E->mem, MEM_ACTIVATIONS, (size_t)M->Nt * sizeof(int32_t));
    M->tgt = mem_alloc(&M->E->mem, MEM_ACTIVATIONS, (size_t)M->Nt * sizeof(int32_t));
    M->E->ops->from_host(M->tok, inputs, (size_t)M->Nt * sizeof(int32_t));
    M->E->ops->from_host(M->tgt, targets, (size_t)M->Nt * sizeof(int32_t));
}

/* forward through the layers; train: keep what backward needs (only x of a checkpointed layer) */
static void forward_layers(model_t *M, int train) {
    fsdp_t *F = &M->fsdp;
    int Ns = M->Ns, d = M->d, head = head_unit(M);
    fsdp_gather_wait(F, emb_unit(M));
    if (F->prefetch) fsdp_gather_start(F, M->L > 0 ? 0 : head);
    floatX *x = ACT((size_t)Ns * d);
    embed_forward(M, x);
    if (split_root(M)) fsdp_release(F, emb_unit(M));
    for (int i = 0; i < M->L; i++) {
        fsdp_gather_wait(F, i);
        if (F->prefetch) fsdp_gather_start(F, i + 1 < M->L ? i + 1 : head);
        layer_acts *a = &M->acts[i];
        a->x = x;
        x = ACT((size_t)Ns * d);
        layer_forward(M, i, a, x);
        if (!train || model_layer_checkpointed(&M->opt, i)) layer_free_saved(M, a);
        if (!train) { FREE(a->x); a->x = NULL; }
        fsdp_release(F, i);
    }
    M->xL = x;
    M->rstdf = ACT32(Ns);
    M->hf = ACT((size_t)M->Nt * d);
    fsdp_gather_wait(F, head);
    norm_enter(M, M->hf, M->rstdf, M->xL, W(M, head, norm_seg(M)));
}

int model_layer_checkpointed(const model_opts *o, int i) { return o->checkpoint > 0 && i % o->checkpoint == 0; }
int model_parse_checkpointing(const char *s, const model_config *c, int *checkpoint, char *err, size_t errlen) {
    long long k = 0;
    if (!strcmp(s, "none") || !strcmp(s, "full")) k = !strcmp(s, "full");
    else if (strncmp(s, "every:", 6)) {
        snprintf(err, errlen, "--checkpoint-activations must be none, full or every:K (got '%.80s')", s);
        return -1;
    } else if (parse_int(s + 6, 1, 2147483647LL, &k)) {
        snprintf(err, errlen, "--checkpoint-activations %.80s: K must be a positive integer (every:1 is full)", s);
        return -1;
    } else if (k > c->num_hidden_layers) {
        snprintf(err, errlen, "--checkpoint-activations %.80s: K is more than the %d layers of model %s (every:%d recomputes the "
                 "first layer only)", s, c->num_hidden_layers, c->name, c->num_hidden_layers);
        return -1;
    }
    *checkpoint = (int)k;
    return 0;
}
int model_micro_batches(const model_opts *o) { return o->grad_accum > 1 ? o->grad_accum : 1; }
void model_accum_begin(model_t *M, int micro, int nmicro) { fsdp_accum_begin(&M->fsdp, micro, nmicro); }

double model_forward_backward(model_t *M, const int32_t *inputs, const int32_t *targets, float loss_scale) {
    fsdp_t *F = &M->fsdp;
    int head = head_unit(M), emb = emb_unit(M), Ns = M->Ns, Nt = M->Nt, d = M->d;
    load_tokens(M, inputs, targets);
    forward_layers(M, 1);
    /* backward starts with the loss: prefetch the last layer while the head runs */
    if (F->prefetch && M->L > 0) fsdp_gather_start(F, M->L - 1);
    fsdp_grad_begin(F, head);
    floatX *dhf = WSZ((size_t)Nt * d);
    double loss = head_loss(M, dhf, loss_scale);
    FREE(M->hf); M->hf = NULL;
    floatX *dx = WSZ((size_t)Ns * d);
    norm_enter_backward(M, dx, G(M, head, norm_seg(M)), dhf, M->xL, W(M, head, norm_seg(M)), M->rstdf);
    tp_norm_grad_sync(&M->tp, G(M, head, norm_seg(M)), d);
    FREE(dhf);
    FREE(M->rstdf); FREE(M->xL); M->rstdf = M->xL = NULL;
    if (split_root(M)) { fsdp_grad_end(F, head); fsdp_release(F, head); }
    for (int i = M->L - 1; i >= 0; i--) {
        fsdp_gather_wait(F, i);
        if (F->prefetch && i > 0) fsdp_gather_start(F, i - 1);
        fsdp_grad_begin(F, i);
        layer_acts *a = &M->acts[i];
        floatX *dxi = layer_backward(M, i, a, dx);
        FREE(dx);
        dx = dxi;
        layer_free_saved(M, a);
        FREE(a->x); a->x = NULL;
        fsdp_grad_end(F, i);
        fsdp_release(F, i);
    }
    if (split_root(M)) fsdp_grad_begin(F, emb);   /* the scatter-add reads no weight: no gather */
    embed_backward(M, dx);
    FREE(dx);
    fsdp_grad_end(F, emb);
    fsdp_release(F, emb);
    FREE(M->tgt); FREE(M->tok); M->tok = M->tgt = NULL;
    return loss;
}

double model_forward_loss(model_t *M, const int32_t *inputs, const int32_t *targets) {
    load_tokens(M, inputs, targets);
    forward_layers(M, 0);
    double loss = head_loss(M, NULL, 0.0f);
    FREE(M->hf); FREE(M->rstdf); FREE(M->xL); M->hf = M->rstdf = M->xL = NULL;
    fsdp_release(&M->fsdp, head_unit(M));
    FREE(M->tgt); FREE(M->tok); M->tok = M->tgt = NULL;
    return loss;
}
