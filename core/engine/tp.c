/* core/engine/tp.c — tensor-parallel collectives and vocab-parallel cross-entropy (see tp.h).
 * Sequence-parallel layout: a rank holds, for every sequence b, the positions [rank*Tl, (rank+1)*Tl),
 * i.e. a [B, Tl, C] block. MPI gathers rank-major ([tp, B, Tl, C]), so for B > 1 the gathered rows
 * are permuted into [B, T, C] through a staging buffer (category comm). */
#include "core/engine/tp.h"
#include "core/engine/mem.h"
#include <stdio.h>
#include <string.h>

int tp_shape_of(tp_shape *s, const model_config *c, int tp, int tp_rank, char *err, size_t errlen) {
    int H = c->num_attention_heads, KV = c->num_key_value_heads, f = c->intermediate_size, V = c->vocab_size;
    if (H % tp) { snprintf(err, errlen, "--tp %d does not divide num_attention_heads %d", tp, H); return -1; }
    if (KV % tp) { snprintf(err, errlen, "--tp %d does not divide num_key_value_heads %d", tp, KV); return -1; }
    if (f % tp) { snprintf(err, errlen, "--tp %d does not divide intermediate_size %d", tp, f); return -1; }
    s->Hl = H / tp; s->KVl = KV / tp; s->fl = f / tp;
    s->Vp = (V + tp - 1) / tp * tp; s->Vl = s->Vp / tp;
    s->v_start = tp_rank * s->Vl;
    int valid = V - s->v_start;
    s->v_valid = valid < 0 ? 0 : (valid > s->Vl ? s->Vl : valid);
    return 0;
}

void tp_init(tp_ctx *t, comm_group *g, const ops_t *ops, int sp, int B, int T, int esz) {
    t->g = g; t->ops = ops; t->tp = g->size; t->rank = g->rank;
    t->dt = esz == 2 ? COMM_BF16 : COMM_F32;
    t->sp = sp && g->size > 1;
    t->B = B; t->T = T; t->Tl = t->sp ? T / g->size : T;
}

/* [tp, B, Tl, C] (rank-major) <-> [B, T, C] */
static void permute(tp_ctx *t, float *dst, const float *src, int C, int to_bt) {
    size_t esz = (size_t)t->dt, blk = (size_t)t->Tl * C;
    char *d = (char *)dst;
    const char *s = (const char *)src;
    for (int r = 0; r < t->tp; r++)
        for (int b = 0; b < t->B; b++) {
            size_t rm = ((size_t)r * t->B + b) * blk * esz;               /* rank-major offset */
            size_t bt = ((size_t)b * t->T + (size_t)r * t->Tl) * C * esz; /* [B,T,C] offset */
            if (to_bt) t->ops->copy(d + bt, s + rm, blk * esz);
            else t->ops->copy(d + rm, s + bt, blk * esz);
        }
}

static void copy_if(tp_ctx *t, float *dst, const float *src, int C) {
    if (dst != src) t->ops->copy(dst, src, (size_t)t->B * t->T * C * (size_t)t->dt);
}

static void sp_gather(tp_ctx *t, float *full, const float *local, int C) {
    size_t n = (size_t)t->B * t->Tl * C;
    if (t->B == 1) { comm_all_gather_t(t->g, full, local, n, t->dt); return; }
    float *stage = mem_alloc(MEM_COMM, n * t->tp * (size_t)t->dt);
    comm_all_gather_t(t->g, stage, local, n, t->dt);
    permute(t, full, stage, C, 1);
    mem_free(stage);
}

void tp_enter_start(tp_ctx *t, tp_req *q, float *full, const float *local, int C) {
    q->stage = NULL; q->full = full; q->C = C;
    memset(&q->r, 0, sizeof q->r);
    if (!t->sp) { copy_if(t, full, local, C); return; }
    size_t n = (size_t)t->B * t->Tl * C;
    if (t->B > 1) q->stage = mem_alloc(MEM_COMM, n * t->tp * (size_t)t->dt);
    comm_all_gather_start_t(t->g, &q->r, q->stage ? q->stage : (void *)full, local, n, t->dt);
}
void tp_enter_finish(tp_ctx *t, tp_req *q) {
    comm_wait(&q->r);
    if (q->stage) { permute(t, q->full, q->stage, q->C, 1); mem_free(q->stage); q->stage = NULL; }
}

static void sp_reduce_scatter(tp_ctx *t, float *local, float *full, int C) {
    size_t n = (size_t)t->B * t->Tl * C;
    if (t->B == 1) { comm_reduce_scatter_t(t->g, local, full, n, t->dt); return; }
    float *stage = mem_alloc(MEM_COMM, n * t->tp * (size_t)t->dt);
    permute(t, stage, full, C, 0);
    comm_reduce_scatter_t(t->g, local, stage, n, t->dt);
    mem_free(stage);
}

void tp_enter(tp_ctx *t, float *full, const float *local, int C) {
    if (t->sp) sp_gather(t, full, local, C); else copy_if(t, full, local, C);
}
void tp_exit(tp_ctx *t, float *local, float *full, int C) {
    if (t->sp) { sp_reduce_scatter(t, local, full, C); return; }
    comm_all_reduce_sum_t(t->g, full, (size_t)t->B * t->T * C, t->dt);
    copy_if(t, local, full, C);
}
void tp_enter_backward(tp_ctx *t, float *dlocal, float *dfull, int C) { tp_exit(t, dlocal, dfull, C); }
void tp_exit_backward(tp_ctx *t, float *dfull, const float *dlocal, int C) { tp_enter(t, dfull, dlocal, C); }

void tp_norm_grad_sync(tp_ctx *t, float *dw, int C) {
    if (t->sp) comm_all_reduce_sum(t->g, dw, (size_t)C);
}

void tp_cross_entropy(tp_ctx *t, const tp_shape *s, const float *logits, float *dlogits, const int32_t *targets,
                      int rows, float scale, float *stats, float *loss) {
    const ops_t *o = t->ops;
    float *mx = stats, *se = stats + rows, *tl = stats + 2 * (size_t)rows;
    o->ce_rowmax(mx, logits, rows, s->Vl, s->v_valid);
    comm_all_reduce_max(t->g, mx, (size_t)rows);
    o->ce_sumexp(se, logits, mx, rows, s->Vl, s->v_valid);
    o->ce_target(tl, logits, targets, rows, s->Vl, s->v_start);
    comm_all_reduce_sum(t->g, se, 2 * (size_t)rows); /* se and tl are adjacent */
    o->ce_loss(loss, mx, se, tl, rows);
    if (dlogits) o->ce_backward(dlogits, logits, mx, se, targets, scale, rows, s->Vl, s->v_start, s->v_valid);
}
