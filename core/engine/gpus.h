/* core/engine/gpus.h — what a device really holds, for `--mem-budget auto` (docs/memory.md): the free memory
 * once the CUDA context, cuBLAS and the NCCL communicators exist, minus the reserve (default 1 GiB,
 * --mem-reserve); and which device a rank takes: its local rank, from the launcher (gpus_local_rank).
 * Not here: the table of named devices and what --plan --gpu NAME budgets against (core/job/catalog.h,
 * core/job/job.h), the allocator (core/engine/mem.c). */
#ifndef MESHSWEEP_GPUS_H
#define MESHSWEEP_GPUS_H
#include <stddef.h>
#include <stdint.h>
#include "core/engine/engine.h"
#include "kernels/kernels.h"


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
/* On the engine's device, once context, cuBLAS and NCCL exist: warms the compute libraries
 * (gpus_warm_runtime), reads free/total and, when is_auto, sets *budget = (free − reserve) /
 * ranks_per_gpu (ranks that share one GPU share its free memory). Fills *m either way (runtime
 * overhead = total − free). -1 with a reason when the device cannot be read or nothing is left (with
 * is_auto), and on a device of host memory (nothing to measure). */
int gpus_measure_device(const engine_t *E, int ranks_per_gpu, uint64_t reserve, int is_auto, uint64_t *budget,
                        gpus_device_mem *m, char *err, size_t errlen);

/* The local rank of this process, i.e. the GPU it takes with one GPU per rank: the launcher's own
 * number for it when it set one in [0, local_size) — OMPI_COMM_WORLD_LOCAL_RANK (mpirun; Open MPI
 * under srun), else SLURM_LOCALID (srun) — otherwise mpi_local_rank (this rank's index among the
 * ranks MPI finds on its host). Open MPI's first: under mpirun inside a Slurm allocation the ranks
 * inherit SLURM_LOCALID of the step that started Open MPI's daemons (0 on every rank).
 * *from (if not NULL) names the source: the variable, or "mpi". */
int gpus_local_rank(int mpi_local_rank, int local_size, const char **from);
#endif
