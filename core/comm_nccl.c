/* core/comm_nccl.c — see comm_nccl.h. Compiled in every build; the NCCL part only with MESHSWEEP_CUDA. */
#include "core/comm_nccl.h"
#include <stdio.h>

#ifdef MESHSWEEP_CUDA
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <stdlib.h>

#define NCCL_CHECK(call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) { \
    fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_)); \
    MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
    MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

static cudaStream_t g_stream;
static cudaEvent_t g_ready;      /* compute stream -> NCCL stream */

int comm_nccl_available(void) { return 1; }

int comm_nccl_init(void *mpi_comm, int size, int rank, void **out, char *err, size_t errlen) {
    MPI_Comm c = *(MPI_Comm *)mpi_comm;
    ncclUniqueId id;
    if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) { snprintf(err, errlen, "ncclGetUniqueId failed"); return -1; }
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, c);
    ncclComm_t *nc = malloc(sizeof *nc);
    if (!nc) { snprintf(err, errlen, "out of host memory"); return -1; }
    ncclResult_t r = ncclCommInitRank(nc, size, id, rank);
    if (r != ncclSuccess) { snprintf(err, errlen, "ncclCommInitRank: %s", ncclGetErrorString(r)); free(nc); return -1; }
    if (!g_stream) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreateWithFlags(&g_ready, cudaEventDisableTiming));
    }
    *out = nc;
    return 0;
}

/* order the NCCL stream after everything queued on the compute (legacy default) stream */
static void enter(void) {
    CUDA_CHECK(cudaEventRecord(g_ready, 0));
    CUDA_CHECK(cudaStreamWaitEvent(g_stream, g_ready, 0));
}
/* returns an event completed after the collective; the compute stream waits on it (now or later) */
static cudaEvent_t leave(void) {
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(e, g_stream));
    return e;
}
void comm_nccl_wait(void *event) {
    cudaEvent_t e = (cudaEvent_t)event;
    CUDA_CHECK(cudaStreamWaitEvent(0, e, 0));
    CUDA_CHECK(cudaEventDestroy(e));
}

static ncclDataType_t dtype(int esz) { return esz == 2 ? ncclBfloat16 : ncclFloat32; }

void comm_nccl_all_reduce(void *c, void *buf, size_t n, int is_max, int esz) {
    enter();
    NCCL_CHECK(ncclAllReduce(buf, buf, n, dtype(esz), is_max ? ncclMax : ncclSum, *(ncclComm_t *)c, g_stream));
    comm_nccl_wait(leave());
}
void comm_nccl_all_gather(void *c, void *recv, const void *send, size_t n, int esz, void **event) {
    enter();
    NCCL_CHECK(ncclAllGather(send, recv, n, dtype(esz), *(ncclComm_t *)c, g_stream));
    cudaEvent_t e = leave();
    if (event) *event = e; else comm_nccl_wait(e);
}
void comm_nccl_reduce_scatter(void *c, void *recv, const void *send, size_t n, int esz) {
    enter();
    NCCL_CHECK(ncclReduceScatter(send, recv, n, dtype(esz), ncclSum, *(ncclComm_t *)c, g_stream));
    comm_nccl_wait(leave());
}
void comm_nccl_broadcast(void *c, float *buf, size_t n, int root) {
    enter();
    NCCL_CHECK(ncclBroadcast(buf, buf, n, ncclFloat32, root, *(ncclComm_t *)c, g_stream));
    comm_nccl_wait(leave());
}
#else
int comm_nccl_available(void) { return 0; }
int comm_nccl_init(void *mpi_comm, int size, int rank, void **out, char *err, size_t errlen) {
    (void)mpi_comm; (void)size; (void)rank; (void)out;
    snprintf(err, errlen, "--comm nccl: this build has no CUDA/NCCL (nvcc was not found at build time)");
    return -1;
}
void comm_nccl_all_reduce(void *c, void *buf, size_t n, int is_max, int esz) { (void)c; (void)buf; (void)n; (void)is_max; (void)esz; }
void comm_nccl_all_gather(void *c, void *recv, const void *send, size_t n, int esz, void **event) {
    (void)c; (void)recv; (void)send; (void)n; (void)esz; (void)event;
}
void comm_nccl_reduce_scatter(void *c, void *recv, const void *send, size_t n, int esz) {
    (void)c; (void)recv; (void)send; (void)n; (void)esz;
}
void comm_nccl_broadcast(void *c, float *buf, size_t n, int root) { (void)c; (void)buf; (void)n; (void)root; }
void comm_nccl_wait(void *event) { (void)event; }
#endif
