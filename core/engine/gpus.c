/* core/engine/gpus.c — the device's memory and the local rank of core/engine/gpus.h. */
#include "core/engine/gpus.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gpus_auto_budget(uint64_t total, uint64_t free_b, uint64_t reserve, gpus_device_mem *out, char *err,
                     size_t errlen) {
    memset(out, 0, sizeof *out);
    out->total = total; out->free_after_setup = free_b; out->reserve = reserve;
    out->runtime_overhead = total > free_b ? total - free_b : 0;
    if (total == 0) { snprintf(err, errlen, "--mem-budget auto: the device reports no memory"); return -1; }
    if (free_b <= reserve) {
        snprintf(err, errlen, "--mem-budget auto: only %llu bytes free on the device after set-up, not more than "
                 "--mem-reserve %llu", (unsigned long long)free_b, (unsigned long long)reserve);
        return -1;
    }
    out->budget = free_b - reserve;
    return 0;
}

void gpus_warm_runtime(const ops_t *ops) {
    if (!ops || !ops->dev_alloc || !ops->matmul_forward) return;
    /* 16x16 of 4-byte elements covers both the fp32 and the bf16 tables (2-byte elements) */
    enum { N = 16 };
    const size_t bytes = (size_t)N * N * 4;
    float *a = ops->dev_alloc(bytes), *w = ops->dev_alloc(bytes), *o = ops->dev_alloc(bytes);
    float *dw = ops->dev_alloc(bytes), *din = ops->dev_alloc(bytes);
    float zero[N * N] = {0};
    ops->from_host(a, zero, sizeof zero); ops->from_host(w, zero, sizeof zero);
    ops->from_host(dw, zero, sizeof zero); ops->from_host(din, zero, sizeof zero);
    ops->matmul_forward(o, a, w, N, N, N, 0);
    if (ops->matmul_backward) ops->matmul_backward(din, dw, o, a, w, N, N, N);
    if (ops->synchronize) ops->synchronize();
    ops->dev_free(a); ops->dev_free(w); ops->dev_free(o); ops->dev_free(dw); ops->dev_free(din);
    if (ops->synchronize) ops->synchronize();
}

int gpus_measure_device(const engine_t *E, int ranks_per_gpu, uint64_t reserve, int is_auto, uint64_t *budget,
                        gpus_device_mem *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    if (E->dev->host_memory) {
        snprintf(err, errlen, "--mem-budget auto: the %s backend has no device memory to measure", E->dev->name);
        return -1;
    }
    gpus_warm_runtime(E->ops);
    size_t f = 0, t = 0;
    E->dev->mem_info(&f, &t);
    gpus_device_mem d;
    if (gpus_auto_budget(t, f, reserve, &d, err, errlen)) {
        if (!is_auto) { *m = d; return 0; } /* a fixed budget: only the figures are wanted */
        *m = d;
        return -1;
    }
    if (ranks_per_gpu > 1) d.budget /= (uint64_t)ranks_per_gpu;
    *m = d;
    if (is_auto) *budget = d.budget;
    return 0;
}

/* a launcher variable holding a local rank: digits only, in [0, local_size); else -1 */
static int env_local_rank(const char *name, int local_size) {
    const char *v = getenv(name);
    if (!v || !*v || strlen(v) > 9 || strspn(v, "0123456789") != strlen(v)) return -1;
    int r = atoi(v);
    return r < local_size ? r : -1;
}

int gpus_local_rank(int mpi_local_rank, int local_size, const char **from) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        int r = env_local_rank(vars[i], local_size);
        if (r >= 0) {
            if (from) *from = vars[i];
            return r;
        }
    }
    if (from) *from = "mpi";
    return mpi_local_rank;
}
