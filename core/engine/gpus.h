/* core/engine/gpus.h — what a device really holds, for `--mem-budget auto` (on the device) and
 * `--plan --gpu NAME` (without one) (docs/memory.md).
 *
 * One table of devices (core/engine/gpus.c): the capacity the CUDA runtime reports (cudaMemGetInfo's total,
 * which is what PyTorch prints as "total capacity", a little under the marketing GB) and a typical
 * runtime overhead (CUDA context, cuBLAS workspace, NCCL communicator buffers), each with its source.
 * Planning budget = usable − overhead − reserve; on a live device the budget is what is free once the
 * context, cuBLAS and the NCCL communicators exist, minus the reserve (default 1 GiB, --mem-reserve).
 * Also which device a rank takes: its local rank, from the launcher (gpus_local_rank).
 * Not here: the allocator (core/engine/mem.c) or the option wiring (the programs). */
#ifndef MESHSWEEP_GPUS_H
#define MESHSWEEP_GPUS_H
#include <stddef.h>
#include <stdint.h>
#include "core/engine/engine.h"
#include "kernels/kernels.h"

#define GPUS_DEFAULT_RESERVE_BYTES (1ull << 30)

typedef struct gpu_spec {
    const char *name;         /* --gpu NAME: h100-80gb, ... */
    const char *device;       /* how the runtime names it (cudaGetDeviceProperties) */
    uint64_t usable_bytes;    /* total capacity as the runtime reports it */
    uint64_t overhead_bytes;  /* typical runtime overhead of one training rank */
} gpu_spec;

/* the table entry named `name` (case-insensitive), or NULL */
const gpu_spec *gpus_find(const char *name);
/* "h100-80gb, h200-141gb, a100-80gb, a100-40gb" */
void gpus_names(char *buf, size_t len);
int gpus_count(void);
const gpu_spec *gpus_at(int i);

/* Budget to plan against device g: usable − overhead − reserve. -1 with a reason when nothing is left. */
int gpus_plan_budget(const gpu_spec *g, uint64_t reserve, uint64_t *budget, char *err, size_t errlen);

/* What the device says once the runtime is set up, and the budget `auto` derives from it. */
typedef struct gpus_device_mem {
    uint64_t total, free_after_setup;   /* cudaMemGetInfo after context, cuBLAS and NCCL exist */
    uint64_t runtime_overhead;          /* total − free_after_setup (includes other processes' use) */
    uint64_t reserve, budget;           /* budget = free_after_setup − reserve */
} gpus_device_mem;
/* budget from the free bytes: free − reserve; -1 with a reason when the reserve takes it all */
int gpus_auto_budget(uint64_t total, uint64_t free_b, uint64_t reserve, gpus_device_mem *out, char *err, size_t errlen);
/* Make the compute libraries set up what they keep for the whole run (cuBLAS/cuBLASLt handles and
 * workspace) by one tiny matmul forward and backward through `ops`, outside the tracked allocator,
 * then synchronise: call it before measuring the free memory. */
void gpus_warm_runtime(const ops_t *ops);
/* "auto" (any case) as a --mem-budget value */
int gpus_is_auto(const char *s);

/* The budget options of a program, resolved and checked (one line in err on bad usage, exit 2):
 *   --mem-budget SIZE | auto, --mem-reserve SIZE (default 1 GiB), --gpu NAME.
 * With --plan: --gpu NAME plans against that device (budget = usable − overhead − reserve);
 * `auto` needs --gpu there; SIZE and --gpu together are refused (two budgets). On a CUDA run:
 * `auto` (or --gpu without --mem-budget) measures the device once it is set up (is_auto = 1,
 * budget 0 until gpus_measure_device fills it). On CPU: neither `auto` nor --gpu. */
typedef struct gpus_budget {
    uint64_t budget, reserve;
    int is_auto;              /* the budget comes from the device at run time */
    const gpu_spec *gpu;      /* --gpu NAME, or NULL */
} gpus_budget;
int gpus_resolve_budget(const char *mem_budget, const char *mem_reserve, const char *gpu, int plan, int cuda,
                        gpus_budget *out, char *err, size_t errlen);
/* On the engine's device, once context, cuBLAS and NCCL exist: warms the compute libraries
 * (gpus_warm_runtime), reads free/total and, when b->is_auto, sets b->budget = (free − reserve) /
 * ranks_per_gpu (ranks that share one GPU share its free memory). Fills *m either way (runtime
 * overhead = total − free). -1 with a reason when the device cannot be read or nothing is left, and
 * on a device of host memory (nothing to measure). */
int gpus_measure_device(const engine_t *E, int ranks_per_gpu, gpus_budget *b, gpus_device_mem *m, char *err,
                        size_t errlen);

/* The local rank of this process, i.e. the GPU it takes with one GPU per rank: the launcher's own
 * number for it when it set one in [0, local_size) — OMPI_COMM_WORLD_LOCAL_RANK (mpirun; Open MPI
 * under srun), else SLURM_LOCALID (srun) — otherwise mpi_local_rank (this rank's index among the
 * ranks MPI finds on its host). Open MPI's first: under mpirun inside a Slurm allocation the ranks
 * inherit SLURM_LOCALID of the step that started Open MPI's daemons (0 on every rank).
 * *from (if not NULL) names the source: the variable, or "mpi". */
int gpus_local_rank(int mpi_local_rank, int local_size, const char **from);
#endif
