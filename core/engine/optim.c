/* core/engine/optim.c — schedule, clipping and AdamW over the owned shards (see optim.h). */
#include "core/engine/optim.h"
#include <math.h>

double optim_lr(const optim_cfg *c, int s, int total) {
    if (!c->cosine) return c->lr;
    if (s < c->warmup) return c->lr * (s + 1) / c->warmup;
    double lo = c->lr * c->min_lr_ratio;
    int span = total - 1 - c->warmup;
    double p = span > 0 ? (double)(s - c->warmup) / span : 1.0;
    if (p > 1) p = 1;
    return lo + 0.5 * (c->lr - lo) * (1.0 + cos(M_PI * p));
}

double optim_step(model_t *M, comm_group *world, const optim_cfg *c, int s, int total, double *lr_out) {
    /* HSDP: the replica all-reduces started in the backward end here, on every rank (only replica 0 reads
     * the gradient for the norm; every replica's AdamW does) */
    fsdp_grad_wait(&M->fsdp);
    /* every replica holds the same summed shards: the first alone counts them (HSDP) */
    double sq = M->mesh.rep_rank == 0 ? fsdp_grad_sumsq(&M->fsdp, M->mesh.tp_rank == 0) : 0.0;
    comm_all_reduce_sum_f64(world, &sq, 1);
    double norm = sqrt(sq);
    float gscale = 1.0f; /* the clipping coefficient, applied inside the fused AdamW */
    if (c->grad_clip > 0) {
        double coef = c->grad_clip / (norm + 1e-6);
        if (coef < 1.0) gscale = (float)coef;
    }
    double lr = optim_lr(c, s, total);
    fsdp_adamw(&M->fsdp, gscale, (float)lr, (float)c->beta1, (float)c->beta2, (float)c->eps, (float)c->weight_decay,
               s + 1);
    if (lr_out) *lr_out = lr;
    return norm;
}
