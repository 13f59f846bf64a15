/* core/engine/tp.h — Megatron tensor parallelism along the mesh's tp dimension (docs/semantics.md#tensor-parallel): the collectives
 * around column- and row-parallel blocks, in both sequence-parallel and plain mode, the vocab-parallel
 * cross-entropy, and the TP-local shapes of every weight. The model calls these; it never calls
 * core/engine/comm itself. FSDP (the dp dimension) is core/engine/fsdp.
 *
 *   tp_enter   before a column-parallel block: SP all-gather [B,T/tp,C] -> [B,T,C]; plain: identity
 *   tp_exit    after a row-parallel block:     SP reduce-scatter [B,T,C] -> [B,T/tp,C]; plain: all-reduce
 * and their backward (all-gather <-> reduce-scatter; identity <-> all-reduce). */
#ifndef MESHSWEEP_TP_H
#define MESHSWEEP_TP_H
#include "core/engine/comm.h"
#include "core/engine/engine.h"
#include "core/formats/config.h"

typedef struct tp_ctx {
    comm_group *g;
    engine_t *E;         /* the op table, the compute precision, the arena of the staging buffers */
    int tp, rank;
    int sp;              /* sequence parallel on */
    int B, T, Tl;        /* Tl = T/tp with SP, T without */
} tp_ctx;

/* TP-local shapes of a model on tp ranks */
typedef struct tp_shape {
    int Hl, KVl, fl;     /* local heads, kv heads, ffn width */
    int Vp, Vl;          /* vocabulary padded to a multiple of tp, and the local part */
    int v_start, v_valid;/* first global vocab id held here; how many local rows are real */
} tp_shape;

/* -1 with a message if H, KV or f is not divisible by tp */
int tp_shape_of(tp_shape *s, const model_config *c, int tp, int tp_rank, char *err, size_t errlen);
/* activations are of the engine's compute precision */
void tp_init(tp_ctx *t, engine_t *E, comm_group *g, int sp, int B, int T);

/* full [B*T,C] <- local [B*Tl,C] (SP all-gather); plain mode: copies when the pointers differ */
void tp_enter(tp_ctx *t, floatX *full, const floatX *local, int C);
/* tp_enter in two halves, so that the SP all-gather runs while the caller computes something that
 * does not read `full` (where the backend has streams: NCCL's stream, ordered with events; over MPI
 * the gather progresses in the wait). `local` must stay valid until tp_enter_finish. */
typedef struct tp_req { comm_req r; void *stage; floatX *full; int C; } tp_req;
void tp_enter_start(tp_ctx *t, tp_req *q, floatX *full, const floatX *local, int C);
void tp_enter_finish(tp_ctx *t, tp_req *q);
/* local [B*Tl,C] <- sum over the group of full [B*T,C] (SP reduce-scatter; full is clobbered);
 * plain mode: all-reduce full in place and copy to local when the pointers differ */
void tp_exit(tp_ctx *t, floatX *local, floatX *full, int C);
/* gradient of tp_enter: dlocal <- dfull summed over the group (SP reduce-scatter, plain all-reduce) */
void tp_enter_backward(tp_ctx *t, floatX *dlocal, floatX *dfull, int C);
/* gradient of tp_exit: dfull <- dlocal (SP all-gather, plain identity/copy) */
void tp_exit_backward(tp_ctx *t, floatX *dfull, const floatX *dlocal, int C);
/* replicated norm weights: with SP each rank saw only its sequence shard, so the gradient is summed */
void tp_norm_grad_sync(tp_ctx *t, float *dw, int C);

/* Vocab-parallel cross-entropy over one chunk of `rows` tokens with local fp32 logits [rows, Vl].
 * Combines max, sum of exponentials and the target logit across the TP group and writes the
 * per-token loss into loss[rows], on the device: nothing here waits for the device, so the caller
 * copies the losses of all chunks to the host once. With dlogits != NULL also writes
 * dloss/dlogits * scale there (compute precision; dlogits == logits allowed in fp32 tables).
 * stats: device workspace of 3*rows floats. */
void tp_cross_entropy(tp_ctx *t, const tp_shape *s, const float *logits, floatX *dlogits, const int32_t *targets,
                      int rows, float scale, float *stats, float *loss);
#endif
