/* core/engine/comm.h — the collectives meshsweep uses, behind one small interface (docs/gpu.md).
 * A comm_group is one communicator (the TP group or the DP group of this rank) and carries its
 * implementation, chosen once when the group is made: null (--plan: sizes and ranks only, no data
 * moves), self (a group of one rank: local copies), MPI on host buffers, host-staged MPI (device
 * buffers copied through host memory: ranks sharing a GPU), or NCCL (the CUDA backend, attached after
 * the MPI group exists). An engine's groups share a comm_ctx: how device data is copied and staged,
 * where every call is counted per kind (calls, bytes, wall ms) for the run record, and an optional
 * trace of each collective. Which parallel dimension uses what is decided in core/engine/tp.c and
 * core/engine/fsdp.c. */
#ifndef MESHSWEEP_COMM_H
#define MESHSWEEP_COMM_H
#include <stddef.h>
#include <stdint.h>
#include "kernels/kernels.h"

/* X(ID, "name"): the kinds of collective, the one list (the enumeration, the names of the record's
 * comm object, core/run/record) */
#define COMM_KINDS(X) X(ALL_REDUCE, "all_reduce") X(ALL_GATHER, "all_gather") X(REDUCE_SCATTER, "reduce_scatter") \
    X(BROADCAST, "broadcast")
#define COMM_KIND_ENUM_(id, name) COMM_##id,
typedef enum { COMM_KINDS(COMM_KIND_ENUM_) COMM_NKIND } comm_kind;
#undef COMM_KIND_ENUM_
extern const char *const comm_kind_names[COMM_NKIND];

/* element type of device data in a collective (dtype_t, kernels/kernels.h): fp32, or bf16 (2-byte
 * compute copies, CUDA bf16); n counts elements of that type */

typedef struct comm_stats { uint64_t calls[COMM_NKIND], bytes[COMM_NKIND]; double ms[COMM_NKIND]; } comm_stats;

/* How a reduce-scatter is carried out over MPI (measured by build/commbench): an in-place
 * MPI_Allreduce of the whole buffer followed by a copy of the owned part, or MPI_Reduce_scatter_block.
 * AUTO (the default) takes the native call for 2-rank groups and for buffers up to 64 KiB, and the
 * all-reduce route otherwise: with Open MPI 4.1 on shared memory the native call is faster there and
 * 1.1-3.5x slower for larger buffers on 4+ ranks (results/bench/commbench.md). */
typedef enum { COMM_RS_ALLREDUCE = 0, COMM_RS_NATIVE = 1, COMM_RS_AUTO = 2 } comm_rs_algo;

struct comm_group;
/* A collective as the trace sees it: blocking, started (a prefetch, HSDP's replica all-reduce) or waited
 * for (its start's completion). bytes is the figure the statistics count for it (all-gather and reduce-scatter: the
 * whole array, as nccl-tests' S). host: the buffer is host memory (the f64 all-reduces: MPI on every
 * backend). id: 0 for a blocking call; a started collective and its wait carry the same id, distinct
 * among the starts of one context (a prefetch may be waited for after later starts). */
typedef enum { COMM_BLOCKING, COMM_STARTED, COMM_WAITED } comm_phase;
typedef struct comm_trace {
    void *ctx;
    void (*collective)(void *ctx, const struct comm_group *g, comm_kind kind, size_t bytes, comm_phase phase, int host,
                       uint64_t id);
} comm_trace;

/* What the groups of one engine share (core/engine/engine.h holds it). */
typedef struct comm_ctx {
    const ops_t *dev;    /* device buffers: copies and host staging through this table; NULL: host memory */
    comm_stats stats;         /* every call of these groups (NCCL times are added when read) */
    comm_rs_algo rs;
    int poll;                 /* waits sleep-poll (oversubscribed node); -1 until the first MPI group decides */
    const comm_trace *trace;  /* optional: each collective of these groups as it is issued, NULL: none */
    uint64_t trace_next;      /* the id of the last traced start */
    void *host[2];            /* host staging (not engine memory: it holds no device bytes) */
    size_t host_bytes[2];
} comm_ctx;

typedef struct comm_impl comm_impl;   /* how a group moves data (comm.c) */
typedef struct comm_group {
    int size, rank;
    const comm_impl *impl;    /* chosen when the group is made; comm_nccl_attach may make it NCCL */
    comm_ctx *ctx;            /* may be NULL for a null group (nothing counted or traced) */
    void *mpi;                /* MPI_Comm*; NULL in a null group */
    void *nccl;               /* its NCCL communicator and stream (comm_nccl.c) on NCCL (CUDA builds), else NULL */
} comm_group;

typedef struct comm_req {
    comm_group *g;
    int active;               /* the implementation has something to wait for */
    int traced;               /* the start was traced: the wait is too */
    uint64_t id;              /* the traced start's id (comm_trace), 0 when untraced */
    void *mpi_req, *event;
    comm_kind kind;
    size_t bytes;
    double t0;
} comm_req;

/* dev: the op table of the buffers the groups will move (NULL: host memory) */
void comm_ctx_init(comm_ctx *c, const ops_t *dev);
/* the host staging buffers */
void comm_ctx_free(comm_ctx *c);
/* MPI setup: split MPI_COMM_WORLD into this rank's TP group (consecutive) and DP group (strided). */
int comm_mpi_groups(comm_ctx *c, comm_group *tp_group, comm_group *dp_group, int tp);
/* HSDP (mesh R x S x tp, core/engine/mesh.h): this rank's shard group (the S ranks of its replica with its
 * tp_rank) and replica group (the R ranks with its shard and tp coordinates: every S*tp-th rank);
 * comm_mpi_groups_free frees them. */
int comm_mpi_hsdp_groups(comm_ctx *c, comm_group *shard_group, comm_group *rep_group, int tp, int shard);
/* frees the two communicators comm_mpi_groups (or comm_mpi_hsdp_groups) made (before MPI_Finalize) */
void comm_mpi_groups_free(comm_group *tp_group, comm_group *dp_group);
/* a group of the planner: no data moves (c may be NULL) */
void comm_null_group(comm_group *g, comm_ctx *c, int size, int rank);
/* MPI_COMM_WORLD as a group */
void comm_mpi_world(comm_ctx *c, comm_group *g);
void comm_set_rs_algo(comm_ctx *c, comm_rs_algo a);
comm_rs_algo comm_get_rs_algo(const comm_ctx *c);
/* NCCL (CUDA builds): one communicator per TP group and per DP group, unique ids broadcast over the
 * MPI groups; each group's collectives run on a stream of its own (critical: the TP group's, on the
 * step's critical path, at the highest priority), ordered against the compute stream with events.
 * Returns -1 with a message when NCCL is unavailable in this build or fails to initialise. */
int comm_nccl_attach(comm_group *g, int critical, char *err, size_t errlen);
/* the implementation's name: null, self, mpi, mpi-staged, nccl */
const char *comm_impl_name(const comm_group *g);
/* Ranks on this node and this rank's index among them (MPI_COMM_TYPE_SHARED, i.e. by host). */
void comm_local_rank(int *local_rank, int *local_size);
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
void comm_all_gather_t(comm_group *g, void *recv, const void *send, size_t n, dtype_t t);
void comm_reduce_scatter_t(comm_group *g, void *recv, void *buf, size_t n, dtype_t t);
void comm_all_reduce_sum_t(comm_group *g, void *buf, size_t n, dtype_t t);
void comm_broadcast(comm_group *g, float *buf, size_t n, int root);
/* all-gather of HOST buffers over MPI whatever the implementation (checkpoint I/O); not counted */
void comm_all_gather_host(comm_group *g, float *recv, const float *send, size_t n);
/* non-blocking all-gather (FSDP prefetch); comm_wait completes it (and counts its time) */
void comm_all_gather_start(comm_group *g, comm_req *r, float *recv, const float *send, size_t n);
void comm_all_gather_start_t(comm_group *g, comm_req *r, void *recv, const void *send, size_t n, dtype_t t);
/* non-blocking in-place sum (HSDP's replica all-reduce): buf is neither read nor written by the caller
 * until comm_wait(r), which completes it (and counts its time). Like every collective, the ranks of g
 * start theirs in the same order. */
void comm_all_reduce_sum_start(comm_group *g, comm_req *r, float *buf, size_t n);
/* non-blocking reduce-scatter (FSDP's gradient at dp > 1): buf[size*n] summed over the group, this rank's part
 * into recv[n]. NCCL starts it on the group's stream and returns at once: recv is not read until comm_wait(r)
 * (which orders the compute stream after it), and buf is freed by the caller right after this call (mem_free):
 * its device memory goes back to the pool in the collective's stream order, so the engine's allocations see
 * it free at the same point as after a blocking call (the memory plan is unchanged) while no later kernel
 * can reuse it before the collective has read it. The other implementations complete it here and trace it
 * as blocking (r is zeroed: comm_wait is a no-op). */
void comm_reduce_scatter_start(comm_group *g, comm_req *r, float *recv, float *buf, size_t n);
/* completes a started collective; a request never started, or already waited for (zeroed), is a no-op */
void comm_wait(comm_req *r);

const comm_stats *comm_get_stats(comm_ctx *c);
void comm_reset_stats(comm_ctx *c);
double comm_now_ms(void);
#endif
