/* core/cost/trace.h — what one training step of one rank does, in order, as the step-time model sees it
 * (docs/cost-model.md): every op the model issues (kind, dimensions, FLOPs, bytes read and written) and every
 * collective (kind, bytes, group, whether it is started and waited for later, on host or device
 * memory). It is recorded from the engine itself: the real step (model_forward_backward, the loss
 * all-reduce, optim_step, as core/run/run.c times them) replayed by a planner engine, like the memory
 * plan (core/engine/plan.c), whose trace (engine_trace: ops_null's hooks, the groups' comm_trace)
 * appends the events.
 * Not here: what the events cost (core/cost/machine.h) or how they overlap (core/cost/timeline.h). */
#ifndef MESHSWEEP_COST_TRACE_H
#define MESHSWEEP_COST_TRACE_H
#include <stddef.h>
#include <stdint.h>
#include "core/engine/comm.h"
#include "core/engine/model.h"

/* Op kinds: one per distinct kernel call of kernels/kernels.h (matmul_backward is two: the input
 * gradient and the weight gradient are separate GEMMs). */
typedef enum {
    COST_GEMM_FWD, COST_GEMM_FWD_F32, COST_GEMM_DIN, COST_GEMM_DW,
    COST_ATTN_FWD, COST_ATTN_BWD,
    COST_RMSNORM_FWD, COST_RMSNORM_BWD, COST_ROPE_FWD, COST_ROPE_BWD, COST_SWIGLU_FWD, COST_SWIGLU_BWD,
    COST_EMBED_FWD, COST_EMBED_BWD,
    COST_CE_ROWMAX, COST_CE_SUMEXP, COST_CE_TARGET, COST_CE_LOSS, COST_CE_BWD,
    COST_ADAMW, COST_SUMSQ, COST_ADD, COST_SCALE, COST_ZERO, COST_COPY, COST_TO_COMPUTE,
    COST_TO_HOST, COST_FROM_HOST,
    COST_NOPS
} cost_op_kind;
extern const char *const cost_op_names[COST_NOPS];

/* Op classes of the breakdown (compute_ms by class) */
typedef enum { COST_CLASS_GEMM, COST_CLASS_ATTENTION, COST_CLASS_NORM, COST_CLASS_POINTWISE, COST_CLASS_LOSS,
               COST_CLASS_OPTIMIZER, COST_CLASS_MEMORY, COST_NCLASS } cost_op_class;
extern const char *const cost_class_names[COST_NCLASS];
cost_op_class cost_op_class_of(cost_op_kind k);
/* 1 for the GEMM kinds (their table is by shape, not by bytes) */
int cost_op_is_gemm(cost_op_kind k);

/* DP: the FSDP group (on an HSDP mesh R x S x tp the shard group of S ranks); REPLICA: HSDP's replica group
 * (R ranks, stride S·tp: its gradient all-reduce), none on 2D meshes */
typedef enum { COST_GROUP_TP, COST_GROUP_DP, COST_GROUP_WORLD, COST_GROUP_REPLICA, COST_NGROUPS } cost_group;
extern const char *const cost_group_names[COST_NGROUPS];

typedef enum {
    COST_EV_OP,        /* a kernel */
    COST_EV_COLL,      /* a blocking collective */
    COST_EV_START,     /* a non-blocking collective started (comm_*_start) */
    COST_EV_WAIT,      /* the engine waits for the started collective with the same id */
} cost_event_type;

typedef struct cost_event {
    uint8_t type;          /* cost_event_type */
    uint8_t kind;          /* cost_op_kind for ops, comm_kind for collectives */
    uint8_t group;         /* cost_group (collectives) */
    uint8_t host;          /* collective on host memory (MPI whatever the backend); op: the host waits for its result */
    int32_t ranks;         /* group size (collectives) */
    uint32_t id;           /* pairs START and WAIT */
    int64_t dim[5];        /* GEMM: m, n, k (rows of the output, its columns, the inner dimension), and for
                              gemm_fwd whether it accumulates; attention: B, T, H, KV, hd; norms: rows,
                              columns; rope: elements, T·hd, B, T, heads; embedding: rows, columns, owned
                              vocabulary rows; cross-entropy: rows, local vocabulary, valid columns;
                              others: elements (bytes for zero, copy, to_host, from_host) */
    double flops, bytes;   /* work: FLOPs, bytes read + written (collectives: nccl-tests' S, the whole array) */
} cost_event;

typedef struct cost_trace {
    cost_event *ev;
    size_t n, cap;
    int oom;               /* an event could not be stored: the trace is incomplete */
    int cbytes;            /* compute precision of the step: 4 fp32, 2 bf16 */
} cost_trace;

void cost_trace_free(cost_trace *t);

/* FLOPs and bytes of an op from its dimensions (the formulas the recorder and the calibration share);
 * dims as in cost_event.dim, cb the compute element size */
void cost_op_work(cost_op_kind k, const int64_t dim[5], int cb, double *flops, double *bytes);

/* Record the step of rank `rank` of a dp×tp mesh of `world` ranks (R x S x tp with o->replicate = R > 1)
 * computing in dtype into *t (emptied first): -1 with one line in err on an invalid shape (the messages model_init gives). */
int cost_record_step(const model_config *cfg, int world, int tp, int rank, dtype_t dtype, const model_opts *o,
                     cost_trace *t, char *err, size_t errlen);
/* The same, the replay's engine given the memory budget `budget` (0: none), and what its arena holds after the
 * step in *mem (when not NULL): the replay is the memory plan's (core/engine/plan.h, plan_rank) of the same
 * rank, so *mem equals plan_rank's statistics byte for byte (tests/t_tune.sh compares them through
 * build/train --plan); micro_end[k] (when not NULL: one per micro-batch) the number of events once micro-batch k
 * has run */
int cost_record_step_mem(const model_config *cfg, int world, int tp, int rank, dtype_t dtype, const model_opts *o,
                         uint64_t budget, cost_trace *t, mem_stats *mem, size_t *micro_end, char *err, size_t errlen);
#endif
