/* core/engine/optim.h — learning-rate schedule, global gradient-norm clipping and the AdamW step over the
 * mesh (docs/semantics.md#loss-and-optimizer). The per-element update is kernels' adamw; which slices it runs on is core/engine/fsdp. */
#ifndef MESHSWEEP_OPTIM_H
#define MESHSWEEP_OPTIM_H
#include "core/engine/model.h"

typedef struct optim_cfg {
    double lr, weight_decay, beta1, beta2, eps, grad_clip, min_lr_ratio;
    int warmup, cosine;
} optim_cfg;

/* lr at 0-based step s of `total`: constant, or linear warmup over `warmup` steps then cosine down
 * to lr*min_lr_ratio at the last step */
double optim_lr(const optim_cfg *c, int s, int total);
/* global L2 norm of all gradients over the mesh, replicated (TP) parameters counted once; clips as
 * torch.nn.utils.clip_grad_norm_ (coefficient C/(norm+1e-6) when below 1); AdamW with step t = s+1.
 * Returns the norm before clipping. */
double optim_step(model_t *M, comm_group *world, const optim_cfg *c, int s, int total, double *lr_out);
#endif
