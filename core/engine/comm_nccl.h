/* core/engine/comm_nccl.h — NCCL collectives for core/engine/comm.c (private to it, but for comm_nccl_version,
 * which bench/gpu_bench.c prints in the GPU kit's versions line). Present in CUDA builds; in
 * other builds comm_nccl_available() is 0 and nothing else is called. Streams: one per communicator,
 * i.e. per kind of traffic (TP; FSDP all-gathers and reduce-scatters), so a prefetched all-gather
 * never delays a TP collective; a collective first waits (event) for the compute stream, and the
 * compute stream waits (event) for it afterwards — no host synchronisation. A started all-gather or
 * all-reduce returns its completion event; comm_nccl_wait() makes the compute stream wait on it. Times come from
 * CUDA events, collected by comm_nccl_collect_ms() when the statistics are read. The communicators
 * are destroyed in MPI_Finalize (aborted after a failed call); when rank 0 of a group cannot make
 * a unique id, or one rank's init fails, every rank gets -1 and a message. */
#ifndef MESHSWEEP_COMM_NCCL_H
#define MESHSWEEP_COMM_NCCL_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
int comm_nccl_available(void);
/* NCCL's version as "2.27.3" into buf (ncclGetVersion: the library loaded, not the headers);
 * "none (built without CUDA)" in other builds. */
void comm_nccl_version(char *buf, size_t len);
/* create a communicator over the MPI communicator *mpi_comm (MPI_Comm*), with a stream of its own
 * (the device's highest priority when critical: the TP group's); -1 with message on error.
 * Collective over MPI_COMM_WORLD (every rank creates its communicators in the same sequence, as
 * the engine does: TP group, then DP group): a failure on any rank fails it on every rank. */
int comm_nccl_init(void *mpi_comm, int size, int rank, int critical, void **out, char *err, size_t errlen);
/* esz: element bytes, 4 (fp32) or 2 (bf16) */
void comm_nccl_all_reduce(void *c, void *buf, size_t n, int is_max, int esz);
/* a started in-place sum (HSDP's replica all-reduce): *event for comm_nccl_wait */
void comm_nccl_all_reduce_start(void *c, void *buf, size_t n, int esz, void **event);
void comm_nccl_all_gather(void *c, void *recv, const void *send, size_t n, int esz, void **event);
void comm_nccl_reduce_scatter(void *c, void *recv, const void *send, size_t n, int esz);
/* started (FSDP's gradient): *event for comm_nccl_wait; send's next free returns it to the device pool in this
 * group's stream order (cuda_free_after, kernels/cuda/cuda_backend.h): the caller frees it right after */
void comm_nccl_reduce_scatter_start(void *c, void *recv, const void *send, size_t n, int esz, void **event);
void comm_nccl_broadcast(void *c, float *buf, size_t n, int root);
void comm_nccl_wait(void *event);
/* add the collectives' times measured with events since the last call to ms[COMM_NKIND]
 * (waits for their end events: call it after the step's synchronisation) */
void comm_nccl_collect_ms(double *ms);
#ifdef __cplusplus
}
#endif
#endif
