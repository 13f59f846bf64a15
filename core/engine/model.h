/* core/engine/model.h — the Llama model (docs/semantics.md#model) composed from kernels (kernels/), tensor parallelism
 * (core/engine/tp) and FSDP (core/engine/fsdp). This file holds no collective calls of its own: it says what is
 * computed in which order, and which buffers live how long (every buffer through core/engine/mem).
 * One training step = forward, loss (vocab-parallel, chunked, with the lm_head backward fused in),
 * backward; the optimizer lives in core/engine/optim. */
#ifndef MESHSWEEP_MODEL_H
#define MESHSWEEP_MODEL_H
#include "core/formats/config.h"
#include "core/engine/engine.h"
#include "core/engine/fsdp.h"
#include "core/engine/mesh.h"
#include "core/engine/tp.h"

typedef struct model_opts {
    int B, T;                 /* sequences per DP rank, sequence length */
    int sequence_parallel;    /* effective only when tp > 1 */
    int sp_local;             /* with SP: the column-parallel blocks' inputs h1, h2 are workspace in forward and
                               * recomputed from x / xmid and rstd, then all-gathered again, in backward */
    int prefetch;
    int checkpoint;           /* activation checkpointing of every K-th layer: layer i (from 0) with i mod K == 0,
                               * the first of every K, keeps only its input and is recomputed in backward;
                               * 0 none, 1 every layer (full). The first of K rather than the last: the
                               * last layer's activations are the first backward reads, so recomputing it
                               * would lower no peak. */
    int grad_accum;           /* micro-batches per optimizer step (0 or 1: none); a step is model_accum_begin and
                               * model_forward_backward per micro-batch, then the optimizer (core/engine/plan
                               * replays them all) */
    int accum_reduce_last;    /* --accum-reduce last: the unsharded gradient kept over the micro-batches and
                               * reduce-scattered once (core/engine/fsdp.h) */
    int replicate;            /* HSDP: R of the mesh R x S x tp (0 or 1: the 2D mesh); the planners build the mesh
                               * and its groups from it (core/engine/plan.c, core/cost/trace.c) */
    int attention_flash;      /* 1 on CUDA: its flash kernels need no 2·T² attention scratch (the CPU's do), the
                               * backward attention_flash_ws_floats (kernels.h) instead, the forward none */
    int nondeterministic;     /* --deterministic off: with attention_flash the backward folds dq into the dk/dv pass
                               * (fp32 atomics, attention_flash_fold_ws_floats of workspace); 0: bit-reproducible */
} model_opts;

/* what a layer saves for backward: compute precision (the engine's dtype), and fp32 statistics */
typedef struct layer_acts {
    floatX *x, *h1, *q, *k, *v, *ao, *xmid, *h2, *gate, *up;
    float *rstd1, *lse, *rstd2;
} layer_acts;

typedef struct model {
    model_config cfg;
    mesh_t mesh;
    tp_shape sh;
    tp_ctx tp;
    fsdp_t fsdp;
    fsdp_unit *units;        /* L layers, then the embedding and the head (tied: one root unit; see model.c) */
    engine_t *E;             /* the op table, the compute precision and the arena of every buffer */
    model_opts opt;          /* the options it was made with (batch, sequence, SP, prefetch, checkpointing) */
    int L, d, hd, Nt, Ns;
    layer_acts *acts;
    floatX *xL, *hf;
    float *rstdf;
    int32_t *tok, *tgt;
    float *loss_host;        /* [Nt] host */
    float *rope;             /* RoPE cos/sin of positions 0..T-1 [T, hd] fp32 (rope_table_fill), for the run */
} model_t;

/* Builds the TP-local units and allocates parameters, gradients and optimizer state.
 * -1 with one line in err on an invalid shape (H, KV, f mod tp; T mod tp with SP). */
int model_init(model_t *M, engine_t *E, const model_config *cfg, const mesh_t *mesh, comm_group *tp_group,
               comm_group *dp_group, const model_opts *opt, char *err, size_t errlen);
void model_free(model_t *M);
/* Initialise the owned parameter slices from the counter-based generator */
void model_init_params(model_t *M, uint64_t seed);

/* micro-batch `micro` of the step's nmicro begins: its gradients add to those of the micro-batches before
 * it (every model_forward_backward of a step scales the loss by 1 / the step's tokens) */
void model_accum_begin(model_t *M, int micro, int nmicro);
/* 1 when layer i (from 0) keeps only its input and is recomputed in backward */
int model_layer_checkpointed(const model_opts *o, int i);
/* --checkpoint-activations none|full|every:K of a model of c's layers as model_opts.checkpoint (0, 1, K);
 * -1 with one line in err for another value, K < 1 or K > the layers */
int model_parse_checkpointing(const char *s, const model_config *c, int *checkpoint, char *err, size_t errlen);
/* micro-batches per step of o (at least 1) */
int model_micro_batches(const model_opts *o);

/* One forward + backward on this rank's batch (host int32 [B*T] each): gradients of
 * (sum of token losses) * loss_scale land in the owned gradient slices. Returns this rank's sum of
 * token losses over the tokens it holds (every TP rank of a DP group returns the same value). */
double model_forward_backward(model_t *M, const int32_t *inputs, const int32_t *targets, float loss_scale);
/* Forward and loss only (evaluation). */
double model_forward_loss(model_t *M, const int32_t *inputs, const int32_t *targets);
#endif
