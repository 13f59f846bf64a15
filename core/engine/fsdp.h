/* core/engine/fsdp.h — FSDP / ZeRO-3 along the mesh's dp dimension (docs/semantics.md#fsdp).
 * Units: each decoder layer, the embedding and the head (final norm, lm_head); core/engine/model sets them up. A unit's TP-local
 * parameters live in one flat buffer (segments = HF tensors, layer-major), padded to a multiple of dp;
 * DP rank r owns the contiguous slice [r*shard, (r+1)*shard) and keeps the fp32 master values,
 * gradient and AdamW moments of that slice only. Before use a unit is all-gathered (optionally
 * prefetched with a non-blocking all-gather); after backward its gradient is reduce-scattered into the
 * owned slice. With dp = 1 nothing is sharded: the gathered view is the parameter buffer itself (fp32)
 * or a persistent bf16 compute copy, rewritten from the masters by the fused AdamW of each step (bf16).
 * Tensor parallelism is core/tp; this file only knows flat buffers and segments. */
#ifndef MESHSWEEP_FSDP_H
#define MESHSWEEP_FSDP_H
#include <stdint.h>
#include "core/engine/comm.h"
#include "core/engine/engine.h"

enum { SPLIT_NONE = 0, SPLIT_ROWS = 1, SPLIT_COLS = 2 };

/* One HF tensor's TP-local piece inside a unit. Local [rows, cols] element (r, c) is full-tensor
 * element (row0 + r, col0 + c) of the HF tensor [full_rows, full_cols]; rows >= valid_rows are
 * vocabulary padding (no HF element, kept at zero). */
typedef struct fsdp_seg {
    char name[96];
    int64_t off, rows, cols;
    int64_t full_rows, full_cols, row0, col0, valid_rows;
    int split;
    int decay;         /* weight decay applies (matrices) */
    int replicated;    /* identical on every TP rank (norm weights): counted once in the grad norm */
    int ndim;          /* HF rank: 1 for norm weights, 2 for matrices */
} fsdp_seg;

#define FSDP_MAX_SEGS 10
typedef struct fsdp_unit {
    char name[32];
    int nseg;
    fsdp_seg seg[FSDP_MAX_SEGS];
    int64_t numel, padded, shard;
    float *p, *g, *m, *v;   /* owned slice: master params, grads, AdamW moments [shard] */
    floatX *full;           /* gathered params [padded] in compute precision while gathered; at dp = 1 always: == p in fp32, the
                             * persistent compute copy (MEM_GATHERED, written by the fused AdamW) in bf16 */
    float *full_g;          /* unsharded gradient [padded] during backward (== g when dp == 1) */
    comm_req req;           /* the prefetch all-gather */
    comm_req sreq;          /* the started reduce-scatter into g (NCCL; zeroed when none is in flight) */
    comm_req rreq;          /* HSDP: the started replica all-reduce of g (zeroed when none is in flight) */
    int state;              /* 0 released, 1 gathering, 2 gathered (always at dp = 1) */
    int g_zero;             /* dp = 1: g is known to be zero (allocation, or the fused AdamW zeroed it) */
} fsdp_unit;

/* Gradient accumulation (fsdp_accum_begin): a step of nmicro micro-batches sums their gradients.
 * reduce_last 0 (--accum-reduce each): every micro-batch's unsharded gradient is reduce-scattered into
 * the owned slice, the slice's sum so far seeded into this rank's part of the unsharded buffer first,
 * so the reduce-scatter adds it once; 1 (last): the unsharded gradient of every unit is kept over the
 * micro-batches and reduce-scattered once, after the last. carry_replicated 0: the gradients of
 * replicated segments are summed over another group after each micro-batch's backward (TP with
 * sequence parallel: core/engine/tp's norm sync) and this rank must not bring its copy of the sum so
 * far into that sum (another rank of the group does).
 * HSDP (mesh R x S x tp): dp is the shard group (S ranks) that shards, gathers and reduce-scatters; rep,
 * when set with more than one rank, is the replica group: after the last micro-batch's reduce-scatter
 * (at S = 1: its backward) the owned slice is all-reduced (summed: every rank's contribution is already
 * its part of the global mean) across the R replicas, as FSDP2's HYBRID_SHARD does: started there, so
 * it overlaps the rest of the backward, and completed by fsdp_grad_wait before the gradient is read. */
typedef struct fsdp {
    int n;
    fsdp_unit *u;
    comm_group *dp;
    comm_group *rep;        /* HSDP replica group, or NULL (R = 1); set after model_init */
    engine_t *E;            /* the op table, the compute precision of the gathered copies, the arena */
    int prefetch;
    int micro, nmicro;      /* the micro-batch in progress of the step's nmicro (0 of 1 unless accumulating) */
    int reduce_last;        /* --accum-reduce last */
    int carry_replicated;   /* see above; 1 unless another rank of a group carries replicated sums */
} fsdp_t;

/* append a copy of *s to a unit; its offset in the unit's buffer is computed here. Build s with
 * designated initialisers: name, local shape (rows, cols), split, full shape (full_rows, full_cols),
 * origin (row0, col0), valid_rows, decay, replicated, ndim; fields left out are zero. */
void fsdp_add_seg(fsdp_unit *u, const fsdp_seg *s);
/* pads every unit and allocates params, grads and optimizer state of the owned slices (zeroed) */
void fsdp_alloc_state(fsdp_t *f);
void fsdp_free_state(fsdp_t *f);

/* Fill the owned parameter slices. fill(ctx, seg, first, count, dst) writes `count` values of the
 * segment's local flat range [first, first+count) into host memory dst. */
typedef void (*fsdp_fill_fn)(void *ctx, const fsdp_seg *s, int64_t first, int64_t count, float *dst);
void fsdp_fill_params(fsdp_t *f, fsdp_fill_fn fill, void *ctx);

/* all-gather unit i (allocates its gathered buffer); non-blocking when prefetch is on */
void fsdp_gather_start(fsdp_t *f, int i);
/* make sure unit i is gathered (starts it if needed) */
void fsdp_gather_wait(fsdp_t *f, int i);
/* free unit i's gathered copy */
void fsdp_release(fsdp_t *f, int i);
/* the micro-batch `micro` of nmicro begins: the next grad_begin/grad_end of each unit accumulate */
void fsdp_accum_begin(fsdp_t *f, int micro, int nmicro);
/* begin / end unit i's backward: zeroed unsharded gradient (from the second micro-batch on: the sum so
 * far, see fsdp_t); then reduce-scatter into the owned slice (reduce_last: after the last micro-batch),
 * started on NCCL (the compute stream goes on with the next unit; the owned slice's readers wait for it:
 * the unit's next grad_begin, its replica all-reduce, fsdp_grad_wait), blocking elsewhere */
void fsdp_grad_begin(fsdp_t *f, int i);
void fsdp_grad_end(fsdp_t *f, int i);
/* complete every unit's started reduce-scatter and (HSDP) replica all-reduce (a no-op for units with none in flight). Every
 * rank calls it at the same point (optim_step, before the gradient norm); the gradient's readers here
 * (fsdp_grad_sumsq, fsdp_adamw, the next fsdp_grad_begin of a unit) call it too. */
void fsdp_grad_wait(fsdp_t *f);

/* sum of squared owned gradients; replicated segments only where count_replicated != 0 */
double fsdp_grad_sumsq(fsdp_t *f, int count_replicated);
/* sum of squares (in double) of this rank's owned master parameters: not finite exactly when one of
 * them is not (a float squared stays far inside double's range) */
double fsdp_param_sumsq(fsdp_t *f);
/* AdamW with step t on the owned slices, on the gradients times gscale (the clipping coefficient, or
 * 1): one fused pass (kernels' adamw_fused); at dp = 1 it rewrites the persistent compute copy and
 * zeroes the gradients for the next backward */
void fsdp_adamw(fsdp_t *f, float gscale, float lr, float beta1, float beta2, float eps, float wd, int t);

/* Full TP-local unit values on host (all-gather of the owned slices over dp), for --save.
 * host must hold u->padded floats; host_tmp u->shard floats. Host memory: checkpoint I/O is not engine memory. */
void fsdp_unit_to_host(fsdp_t *f, int i, float *host, float *host_tmp);
#endif
