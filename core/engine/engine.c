/* core/engine/engine.c — making and releasing the engine value (see engine.h). */
#include "core/engine/engine.h"
#include <string.h>

void engine_init(engine_t *E, const ops_t *ops, uint64_t budget) {
    memset(E, 0, sizeof *E);
    E->ops = ops;
    mem_arena_init(&E->mem, ops, 0, budget);
    comm_ctx_init(&E->comm, ops != &ops_cpu ? ops : NULL);
}

void engine_init_plan(engine_t *E, uint64_t budget) {
    memset(E, 0, sizeof *E);
    E->ops = &ops_null;
    E->plan = 1;
    mem_arena_init(&E->mem, NULL, 1, budget);
    comm_ctx_init(&E->comm, NULL);
}

void engine_release(engine_t *E) {
    mem_arena_release(&E->mem);
    comm_ctx_free(&E->comm);
}
