/* core/engine/engine.h — the engine as a value: what the model, its FSDP units, its TP
 * collectives and the planner compute with, carried together in one struct that model_init takes and
 * fsdp_t and tp_ctx point to: the device, the compute op table, the compute precision, the allocator
 * arena and what the engine's communication groups share. A run has one live engine; the planner
 * makes its own for each replay, so a plan and a live engine coexist in one process (the budget gate
 * plans while the run's engine exists; tests/test_plan_live.c plans beside a stepped engine).
 * What it is not: the run (core/run/run.c), or a place for figures of a step (those are the arena's
 * and the communication context's statistics). */
#ifndef MESHSWEEP_ENGINE_H
#define MESHSWEEP_ENGINE_H
#include "core/engine/comm.h"
#include "core/engine/mem.h"
#include "kernels/device.h"
#include "kernels/kernels.h"

/* An optional recorder of what an engine does — what a step-time model of the plan attaches: each op
 * of a planner's replay with its arguments (ops_null calls the hooks, kernels/cpu/null.c), and each
 * collective of the engine's groups with its group, bytes and phase (core/engine/comm.c). A planner
 * records into the trace of the engine it plans for. */
typedef struct engine_trace {
    const ops_trace *ops;
    const comm_trace *comm;
} engine_trace;

typedef struct engine {
    const device_t *dev;  /* the device: selection, memory figures, name, peak, pool (kernels/device.h) */
    const ops_t *ops;     /* the compute op table: the device's table of dtype */
    dtype_t dtype;        /* compute precision of activations, workspace and gathered copies: the one copy */
    mem_arena mem;        /* every engine buffer comes from here */
    comm_ctx comm;        /* what its communication groups share: staging, statistics, trace */
    int plan;             /* a planner: device_null, ops_null, a plan arena, null groups; nothing is computed */
    const engine_trace *trace;  /* NULL: nothing recorded */
} engine_t;

/* The device of --backend NAME in this build (cpu; cuda in CUDA builds), or NULL. */
const device_t *engine_device(const char *backend);
/* A live engine on dev computing in dtype; its arena allocates through the device's table (budget:
 * mem_set_budget before the first allocation), its groups move the table's buffers. -1 with a reason
 * when the device has no table of that precision in this build. */
int engine_init(engine_t *E, const device_t *dev, dtype_t dtype, char *err, size_t errlen);
/* A planner for an engine computing in dtype: a plan arena with the given budget. */
void engine_init_plan(engine_t *E, dtype_t dtype, uint64_t budget);
/* Attach a recorder (NULL: none) to the engine and its groups' context. */
void engine_set_trace(engine_t *E, const engine_trace *t);
/* --deterministic off with the flash attention: the CUDA backward folds dq into its dk/dv pass (fp32
 * atomics); set once per model, for the process (other backends: nothing) */
void engine_attention_fold(const engine_t *E, int fold);
/* Release every buffer of the engine (its arena) and its groups' staging; init it again to reuse it. */
void engine_release(engine_t *E);
/* bytes of one element of compute precision */
static inline size_t engine_cbytes(const engine_t *E) { return dtype_bytes(E->dtype); }
#endif
