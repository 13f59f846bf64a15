/* core/engine/comm.h — the collectives meshsweep uses, behind one small interface (design 5).
 * A comm_group is one communicator (the TP group or the DP group of this rank). Implementations:
 * MPI (here), NCCL (with the CUDA backend), and null (for --plan: sizes and ranks only, no data moves).
 * Every call is counted per kind (calls, bytes, wall ms) for the run record. Buffers are floats of
 * the compute backend. Which parallel dimension uses what is decided in core/engine/tp.c and core/engine/fsdp.c. */
#ifndef MESHSWEEP_COMM_H
#define MESHSWEEP_COMM_H
#include <stddef.h>
#include <stdint.h>

typedef enum { COMM_ALL_REDUCE, COMM_ALL_GATHER, COMM_REDUCE_SCATTER, COMM_BROADCAST, COMM_NKIND } comm_kind;
extern const char *const comm_kind_names[COMM_NKIND];

/* element type of device data in a collective: fp32, or bf16 (2-byte compute copies, CUDA bf16) */
typedef enum { COMM_F32 = 4, COMM_BF16 = 2 } comm_dtype;

typedef struct comm_stats { uint64_t calls[COMM_NKIND], bytes[COMM_NKIND]; double ms[COMM_NKIND]; } comm_stats;

/* How a reduce-scatter is carried out over MPI (measured by build/commbench): an in-place
 * MPI_Allreduce of the whole buffer followed by a copy of the owned part, or MPI_Reduce_scatter_block.
 * AUTO (the default) takes the native call for 2-rank groups and for buffers up to 64 KiB, and the
 * all-reduce route otherwise: with Open MPI 4.1 on shared memory the native call is faster there and
 * 1.1-3.5x slower for larger buffers on 4+ ranks (results/bench/commbench.md). */
typedef enum { COMM_RS_ALLREDUCE = 0, COMM_RS_NATIVE = 1, COMM_RS_AUTO = 2 } comm_rs_algo;

typedef struct comm_group {
    int size, rank;
    int null;                 /* plan mode: no data moves */
    void *mpi;                /* MPI_Comm* */
    void *nccl;               /* ncclComm_t* when the group runs on NCCL (CUDA builds), else NULL */
} comm_group;

typedef struct comm_req { int active; void *mpi_req; comm_kind kind; size_t bytes; void *event; double t0; } comm_req;

/* MPI setup: split MPI_COMM_WORLD into this rank's TP group (consecutive) and DP group (strided). */
int comm_mpi_groups(comm_group *tp_group, comm_group *dp_group, int tp);
/* frees the two communicators comm_mpi_groups made (before MPI_Finalize) */
void comm_mpi_groups_free(comm_group *tp_group, comm_group *dp_group);
void comm_null_group(comm_group *g, int size, int rank);
/* MPI_COMM_WORLD as a group */
void comm_mpi_world(comm_group *g);
void comm_set_rs_algo(comm_rs_algo a);
/* Buffers live on a device (ops != &ops_cpu): MPI collectives then stage through host memory
 * (to_host, MPI, from_host) — the fallback when ranks share a GPU and NCCL cannot be used. */
struct ops;
void comm_set_device_ops(const struct ops *ops);
/* NCCL (CUDA builds): one communicator per TP group and per DP group, unique ids broadcast over the
 * MPI groups; collectives run on their own stream, ordered against the compute stream with events.
 * Returns -1 with a message when NCCL is unavailable in this build or fails to initialise. */
int comm_nccl_attach(comm_group *g, char *err, size_t errlen);
/* Ranks on this node and this rank's index among them (MPI_COMM_TYPE_SHARED, i.e. by host). */
void comm_local_rank(int *local_rank, int *local_size);
comm_rs_algo comm_get_rs_algo(void);
/* The components of an Open MPI framework ("pml", "btl") this process has open after MPI_Init, as
 * the MPI tool interface lists their control variables (<framework>_<component>_<name>): Open MPI
 * closes what it did not select (every pml but one, the btls that did not start), and their variables
 * go with them. out: sorted, comma-separated ("self,tcp,vader"); "" and 0 where the MPI has no such
 * variables (not Open MPI). Returns how many. After MPI_Init, before MPI_Finalize. */
int comm_mpi_components(const char *framework, char *out, size_t cap);

void comm_all_reduce_sum(comm_group *g, float *buf, size_t n);
void comm_all_reduce_max(comm_group *g, float *buf, size_t n);
void comm_all_reduce_sum_f64(comm_group *g, double *buf, size_t n);
/* recv[size*n] <- every rank's send[n], in rank order; send may point into recv at rank*n (in place) */
void comm_all_gather(comm_group *g, float *recv, const float *send, size_t n);
/* buf[size*n] summed over the group; this rank's part (rank*n .. +n) lands in recv[n].
 * buf is clobbered. */
void comm_reduce_scatter(comm_group *g, float *recv, float *buf, size_t n);
/* the same with an element type (n counts elements; bf16 sums accumulate each pair in fp32) */
void comm_all_gather_t(comm_group *g, void *recv, const void *send, size_t n, comm_dtype t);
void comm_reduce_scatter_t(comm_group *g, void *recv, void *buf, size_t n, comm_dtype t);
void comm_all_reduce_sum_t(comm_group *g, void *buf, size_t n, comm_dtype t);
void comm_broadcast(comm_group *g, float *buf, size_t n, int root);
/* all-gather of HOST buffers over MPI whatever the backend (checkpoint I/O) */
void comm_all_gather_host(comm_group *g, float *recv, const float *send, size_t n);
/* non-blocking all-gather (FSDP prefetch); comm_wait completes it (and counts its time) */
void comm_all_gather_start(comm_group *g, comm_req *r, float *recv, const float *send, size_t n);
void comm_all_gather_start_t(comm_group *g, comm_req *r, void *recv, const void *send, size_t n, comm_dtype t);
void comm_wait(comm_req *r);

const comm_stats *comm_get_stats(void);
void comm_reset_stats(void);
double comm_now_ms(void);
#endif
