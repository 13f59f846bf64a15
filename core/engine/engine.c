/* core/engine/engine.c — making and releasing the engine value (see engine.h). The one place that
 * knows which backends this build has. */
#include "core/engine/engine.h"
#ifdef MESHSWEEP_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif
#include <stdio.h>
#include <string.h>

const device_t *engine_device(const char *backend) {
    if (!strcmp(backend, device_cpu.name)) return &device_cpu;
#ifdef MESHSWEEP_CUDA
    if (!strcmp(backend, device_cuda.name)) return &device_cuda;
#endif
    return NULL;
}

int engine_init(engine_t *E, const device_t *dev, dtype_t dtype, char *err, size_t errlen) {
    memset(E, 0, sizeof *E);
    const ops_t *ops = device_ops(dev, dtype);
    if (!ops || ops->cbytes != dtype_bytes(dtype)) {
        snprintf(err, errlen, "--dtype %s is not available on --backend %s in this build", dtype_name(dtype), dev->name);
        return -1;
    }
    E->dev = dev; E->ops = ops; E->dtype = dtype;
    mem_arena_init(&E->mem, ops, 0, 0);
    comm_ctx_init(&E->comm, dev->host_memory ? NULL : ops);
    return 0;
}

void engine_init_plan(engine_t *E, dtype_t dtype, uint64_t budget) {
    memset(E, 0, sizeof *E);
    E->dev = &device_null; E->ops = &ops_null; E->dtype = dtype;
    E->plan = 1;
    mem_arena_init(&E->mem, NULL, 1, budget);
    comm_ctx_init(&E->comm, NULL);
}

void engine_set_trace(engine_t *E, const engine_trace *t) {
    E->trace = t;
    E->comm.trace = t ? t->comm : NULL;
}

void engine_attention_fold(const engine_t *E, int fold) {
#ifdef MESHSWEEP_CUDA
    if (E->dev == &device_cuda) cuda_attention_set_deterministic(!fold);
#else
    (void)E; (void)fold;
#endif
}

void engine_release(engine_t *E) {
    mem_arena_release(&E->mem);
    comm_ctx_free(&E->comm);
}
