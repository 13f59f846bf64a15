/* core/engine/engine.h — the engine as a value (design 13): what the model, its FSDP units, its TP
 * collectives and the planner compute with, carried together in one struct that model_init takes and
 * fsdp_t and tp_ctx point to. A run has one live engine; the planner makes its own, so a plan and a
 * live engine coexist in one process (the budget gate plans while the run's engine exists).
 * What it is not: the run (core/run/run.c), or a place for figures of a step (those are the arena's
 * and the collectives' statistics). */
#ifndef MESHSWEEP_ENGINE_H
#define MESHSWEEP_ENGINE_H
#include "core/engine/comm.h"
#include "core/engine/mem.h"
#include "kernels/kernels.h"

typedef struct engine {
    const ops_t *ops;     /* the compute op table */
    mem_arena mem;        /* every engine buffer comes from here */
    comm_ctx comm;        /* what its communication groups share: staging, statistics, trace */
    int plan;             /* a planner: ops_null and a plan arena; nothing is computed or allocated */
} engine_t;

/* A live engine computing with ops; its arena allocates through ops (budget 0: none; mem_set_budget
 * sets it before the first allocation), its groups move buffers of ops. */
void engine_init(engine_t *E, const ops_t *ops, uint64_t budget);
/* A planner: ops_null, a plan arena with the given budget, null groups. */
void engine_init_plan(engine_t *E, uint64_t budget);
/* Release every buffer of the engine (its arena) and its groups' staging; init it again to reuse it. */
void engine_release(engine_t *E);
#endif
