/* kernels/device.h — the device a backend's op tables run on, as the engine asks it: how
 * many there are, which one a rank uses, its memory and name, its peak for MFU, the figures of the
 * memory pool behind its allocations, and its op tables by compute precision.
 *   device_cpu   host memory, ops_cpu (fp32); the peak is the measured single-thread SGEMM rate
 *   device_null  the planner's: ops_null for every precision, nothing to select or measure
 *   device_cuda  CUDA builds (kernels/cuda/device.cu): ops_cuda (fp32) and ops_cuda_bf16 (bf16)
 * What it is not: the allocator (core/engine/mem, through the table's dev_alloc) or the collectives
 * (core/engine/comm). core/engine/engine.h holds one device in each engine value. */
#ifndef MESHSWEEP_DEVICE_H
#define MESHSWEEP_DEVICE_H
#include <stddef.h>
#include <stdint.h>
#include "kernels/kernels.h"

typedef struct device {
    const char *name;          /* the --backend name: cpu, cuda (null: the planner's) */
    int host_memory;           /* 1: its memory is host memory (MPI reads it; nothing to measure) */
    const ops_t *fp32, *bf16;  /* its op tables by compute precision; NULL: none in this build */
    /* devices of this kind on this host; 0 (never an abort) when there is no driver or device */
    int (*count)(void);
    /* make device local_rank % count this process's own and create its context; 0, or -1 with a reason */
    int (*select)(int local_rank, char *err, size_t errlen);
    /* free and total bytes of the selected device as its runtime reports them (0, 0: unknown) */
    void (*mem_info)(size_t *free_b, size_t *total_b);
    /* its name as the runtime reports it */
    const char *(*device_name)(void);
    /* peak FLOP/s of one rank for MFU (0: unknown, --peak-tflops needed) */
    double (*peak_flops)(void);
    /* bytes the pool behind dev_alloc reserves now and its high-water mark (0, 0: no pool) */
    void (*pool_reserved)(uint64_t *now_b, uint64_t *high_b);
} device_t;

/* the table of compute precision dtype, or NULL when this device has none */
static inline const ops_t *device_ops(const device_t *d, dtype_t t) { return t == DTYPE_BF16 ? d->bf16 : d->fp32; }

extern const device_t device_cpu;
extern const device_t device_null;
#ifdef MESHSWEEP_CUDA
extern const device_t device_cuda;
#endif
#endif
