/* core/comm_nccl.h — NCCL collectives for core/comm.c (private to it). Present in CUDA builds; in
 * other builds comm_nccl_available() is 0 and nothing else is called. Streams: every collective is
 * enqueued on one NCCL stream that first waits (event) for the compute stream, and the compute
 * stream waits (event) for it afterwards — no host synchronisation. A started all-gather returns
 * its completion event; comm_nccl_wait() makes the compute stream wait on it. */
#ifndef MESHSWEEP_COMM_NCCL_H
#define MESHSWEEP_COMM_NCCL_H
#include <stddef.h>
int comm_nccl_available(void);
/* create a communicator over the MPI communicator *mpi_comm (MPI_Comm*); -1 with message on error */
int comm_nccl_init(void *mpi_comm, int size, int rank, void **out, char *err, size_t errlen);
/* esz: element bytes, 4 (fp32) or 2 (bf16) */
void comm_nccl_all_reduce(void *c, void *buf, size_t n, int is_max, int esz);
void comm_nccl_all_gather(void *c, void *recv, const void *send, size_t n, int esz, void **event);
void comm_nccl_reduce_scatter(void *c, void *recv, const void *send, size_t n, int esz);
void comm_nccl_broadcast(void *c, float *buf, size_t n, int root);
void comm_nccl_wait(void *event);
#endif
