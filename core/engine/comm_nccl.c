/* core/engine/comm_nccl.c — see comm_nccl.h. Compiled in every build; the NCCL part only with MESHSWEEP_CUDA.
 * With MESHSWEEP_CUDA_EMU (tests/t_cuda_engine_emu.sh) it is compiled as C++ against the host
 * emulator's CUDA runtime and NCCL (tests/emu/nccl_emu.cuh): the same code, run without GPUs. */
#include "core/engine/comm_nccl.h"
#include "core/engine/comm.h"
#include <stdio.h>

#ifdef MESHSWEEP_CUDA
#include <cuda_runtime.h>   /* in emulator builds: the tests' host emulator (-Itests/emu/include) */
#include <nccl.h>
#include <mpi.h>
#include "kernels/cuda/cuda_backend.h"   /* cuda_free_after */
#include <stdlib.h>
#include <string.h>

/* One communicator per group, each with a stream of its own: one stream per kind of traffic. The
 * TP group's collectives sit on the step's critical path (their stream has the device's highest
 * priority); the DP group's carry the FSDP all-gathers (prefetched) and reduce-scatters. So a
 * prefetched all-gather still in flight never queues a TP collective behind it. Every stream is
 * ordered against the compute (legacy default) stream by events, in both directions.
 * Communicators made here: destroyed at MPI_Finalize, aborted when a call failed. */
#define MAX_COMMS 16
typedef struct nccl_group {
    ncclComm_t comm;
    cudaStream_t stream;
    cudaEvent_t ready; /* compute stream -> this stream */
} nccl_group;
static nccl_group g_groups[MAX_COMMS];
static int g_ncomms;
static void abort_all(void) {
    for (int i = 0; i < g_ncomms; i++) ncclCommAbort(g_groups[i].comm);
    g_ncomms = 0;
}

#define NCCL_CHECK(call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) { \
    fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_)); \
    abort_all(); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
    abort_all(); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

/* ---- timing: comm_ms from events, read when the stats are read (after the step's sync) ----
 * A blocking collective counts from its start to its end on its group's stream; a started
 * all-gather or all-reduce counts the time the compute stream waits for it (end minus the moment the compute
 * stream reaches comm_nccl_wait, 0 when it was already done) — what the MPI path counts too. */
typedef struct { cudaEvent_t start, end; int kind; } timing;
static timing *g_pend;
static size_t g_npend, g_cap_pend;
static cudaEvent_t *g_spare;     /* timing events ready for reuse */
static size_t g_nspare, g_cap_spare;
static void *grow(void *p, size_t *cap, size_t need, size_t esz) {
    if (need <= *cap) return p;
    size_t c = *cap ? *cap * 2 : 64;
    while (c < need) c *= 2;
    void *q = realloc(p, c * esz);
    if (!q) { fprintf(stderr, "comm_nccl: out of host memory\n"); abort_all(); MPI_Abort(MPI_COMM_WORLD, 1); }
    *cap = c;
    return q;
}
static cudaEvent_t ev_get(void) {
    if (g_nspare) return g_spare[--g_nspare];
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreate(&e));
    return e;
}
static void ev_put(cudaEvent_t e) {
    g_spare = (cudaEvent_t *)grow(g_spare, &g_cap_spare, g_nspare + 1, sizeof *g_spare);
    g_spare[g_nspare++] = e;
}
static void pend(cudaEvent_t start, cudaEvent_t end, int kind) {
    g_pend = (timing *)grow(g_pend, &g_cap_pend, g_npend + 1, sizeof *g_pend);
    timing *t = &g_pend[g_npend++];
    t->start = start; t->end = end; t->kind = kind;
}
void comm_nccl_collect_ms(double *ms) {
    for (size_t i = 0; i < g_npend; i++) {
        timing *t = &g_pend[i];
        float e = 0;
        CUDA_CHECK(cudaEventSynchronize(t->end));
        CUDA_CHECK(cudaEventSynchronize(t->start));
        CUDA_CHECK(cudaEventElapsedTime(&e, t->start, t->end));
        if (e > 0) ms[t->kind] += e;
        ev_put(t->start);
        ev_put(t->end);
    }
    g_npend = 0;
}

static void shutdown_all(void) {
    if (g_npend) { double ms[COMM_NKIND] = {0}; comm_nccl_collect_ms(ms); }
    for (int i = 0; i < g_ncomms; i++) {
        NCCL_CHECK(ncclCommDestroy(g_groups[i].comm));
        cudaEventDestroy(g_groups[i].ready);
        cudaStreamDestroy(g_groups[i].stream);
    }
    g_ncomms = 0;
    for (size_t i = 0; i < g_nspare; i++) cudaEventDestroy(g_spare[i]);
    g_nspare = 0;
}
/* MPI deletes the attributes of MPI_COMM_SELF first thing in MPI_Finalize, with MPI still usable:
 * the communicators go before MPI does, whichever way the program ends normally */
static int at_finalize(MPI_Comm c, int key, void *val, void *extra) {
    (void)c; (void)key; (void)val; (void)extra;
    shutdown_all();
    return MPI_SUCCESS;
}
static int hook_finalize(void) {
    static int done;
    if (done) return 0;
    int key;
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, at_finalize, &key, NULL) != MPI_SUCCESS ||
        MPI_Comm_set_attr(MPI_COMM_SELF, key, NULL) != MPI_SUCCESS)
        return -1;
    done = 1;
    return 0;
}

int comm_nccl_available(void) { return 1; }

void comm_nccl_version(char *buf, size_t len) {
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess || v <= 0) { snprintf(buf, len, "unknown"); return; }
    /* 10000·major + 100·minor + patch since NCCL 2.9; 1000·major + 100·minor + patch before */
    if (v >= 20900) snprintf(buf, len, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    else snprintf(buf, len, "%d.%d.%d", v / 1000, v / 100 % 10, v % 100);
}

/* the lowest status over every rank: setup fails everywhere or nowhere, so no rank is left
 * waiting in a later group's setup for a rank that gave up */
static int world_min(int v) {
    int m = v;
    if (MPI_Allreduce(&v, &m, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) return 0;
    return m;
}

int comm_nccl_init(void *mpi_comm, int size, int rank, int critical, void **out, char *err, size_t errlen) {
    MPI_Comm c = *(MPI_Comm *)mpi_comm;
    /* rank 0 always takes part in the broadcast: with the id, or with why it has none */
    struct { ncclUniqueId id; int ok; char why[120]; } msg;
    memset(&msg, 0, sizeof msg);
    if (rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&msg.id);
        msg.ok = r == ncclSuccess;
        if (!msg.ok) snprintf(msg.why, sizeof msg.why, "%s", ncclGetErrorString(r));
    }
    if (MPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, c) != MPI_SUCCESS) msg.ok = 0;
    if (g_ncomms == MAX_COMMS || hook_finalize()) { msg.ok = 0; snprintf(msg.why, sizeof msg.why, "too many communicators"); }
    if (!world_min(msg.ok)) {
        if (msg.ok) snprintf(err, errlen, "NCCL: ncclGetUniqueId failed on another rank");
        else snprintf(err, errlen, "NCCL: ncclGetUniqueId failed on the first rank of this rank's group: %s", msg.why);
        return -1;
    }
    ncclComm_t nc = NULL;
    ncclResult_t r = ncclCommInitRank(&nc, size, msg.id, rank);
    /* a rank whose init failed says so to the others, which then abort theirs (no half-made mesh) */
    if (!world_min(r == ncclSuccess)) {
        if (r == ncclSuccess) {
            ncclCommAbort(nc);
            snprintf(err, errlen, "NCCL: ncclCommInitRank failed on another rank");
        } else {
            snprintf(err, errlen, "NCCL: ncclCommInitRank failed: %s", ncclGetErrorString(r));
        }
        abort_all();
        return -1;
    }
    nccl_group *g = &g_groups[g_ncomms++];
    g->comm = nc;
    int least = 0, greatest = 0; /* "greatest" is the numerically lowest, the highest priority */
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CUDA_CHECK(cudaStreamCreateWithPriority(&g->stream, cudaStreamNonBlocking, critical ? greatest : least));
    CUDA_CHECK(cudaEventCreateWithFlags(&g->ready, cudaEventDisableTiming));
    *out = (void *)g;
    return 0;
}

/* order the group's stream after everything queued on the compute (legacy default) stream */
static void enter(nccl_group *g) {
    CUDA_CHECK(cudaEventRecord(g->ready, 0));
    CUDA_CHECK(cudaStreamWaitEvent(g->stream, g->ready, 0));
}
/* a blocking collective: timed on its group's stream, and the compute stream waits for its end */
#define BLOCKING(g, kind, call) do { \
    enter(g); \
    cudaEvent_t b_ = ev_get(), f_ = ev_get(); \
    CUDA_CHECK(cudaEventRecord(b_, (g)->stream)); \
    NCCL_CHECK(call); \
    CUDA_CHECK(cudaEventRecord(f_, (g)->stream)); \
    CUDA_CHECK(cudaStreamWaitEvent(0, f_, 0)); \
    pend(b_, f_, (kind)); } while (0)

static ncclDataType_t dtype(int esz) { return esz == 2 ? ncclBfloat16 : ncclFloat32; }

void comm_nccl_all_reduce(void *c, void *buf, size_t n, int is_max, int esz) {
    nccl_group *g = (nccl_group *)c;
    BLOCKING(g, COMM_ALL_REDUCE, ncclAllReduce(buf, buf, n, dtype(esz), is_max ? ncclMax : ncclSum, g->comm, g->stream));
}
/* a started collective: its end event on the group's stream, and its kind for the timing */
typedef struct { cudaEvent_t end; int kind; } started;
static void *start_end(nccl_group *g, int kind) {
    started *h = (started *)malloc(sizeof *h);
    if (!h) { fprintf(stderr, "comm_nccl: out of host memory\n"); abort_all(); MPI_Abort(MPI_COMM_WORLD, 1); }
    h->end = ev_get();
    h->kind = kind;
    CUDA_CHECK(cudaEventRecord(h->end, g->stream));
    return h;
}
void comm_nccl_all_reduce_start(void *c, void *buf, size_t n, int esz, void **event) {
    nccl_group *g = (nccl_group *)c;
    enter(g);
    NCCL_CHECK(ncclAllReduce(buf, buf, n, dtype(esz), ncclSum, g->comm, g->stream));
    *event = start_end(g, COMM_ALL_REDUCE);
}
void comm_nccl_all_gather(void *c, void *recv, const void *send, size_t n, int esz, void **event) {
    nccl_group *g = (nccl_group *)c;
    if (!event) { BLOCKING(g, COMM_ALL_GATHER, ncclAllGather(send, recv, n, dtype(esz), g->comm, g->stream)); return; }
    enter(g);
    NCCL_CHECK(ncclAllGather(send, recv, n, dtype(esz), g->comm, g->stream));
    *event = start_end(g, COMM_ALL_GATHER);
}
void comm_nccl_wait(void *event) {
    started *h = (started *)event;
    cudaEvent_t s = ev_get();
    CUDA_CHECK(cudaEventRecord(s, 0));
    CUDA_CHECK(cudaStreamWaitEvent(0, h->end, 0));
    pend(s, h->end, h->kind);
    free(h);
}
void comm_nccl_reduce_scatter(void *c, void *recv, const void *send, size_t n, int esz) {
    nccl_group *g = (nccl_group *)c;
    BLOCKING(g, COMM_REDUCE_SCATTER, ncclReduceScatter(send, recv, n, dtype(esz), ncclSum, g->comm, g->stream));
}
/* the compute stream goes on: it waits for the end only where the owned gradient is read (comm_nccl_wait),
 * and the unsharded gradient it reads is freed at once into this stream's order, after the collective */
void comm_nccl_reduce_scatter_start(void *c, void *recv, const void *send, size_t n, int esz, void **event) {
    nccl_group *g = (nccl_group *)c;
    enter(g);
    NCCL_CHECK(ncclReduceScatter(send, recv, n, dtype(esz), ncclSum, g->comm, g->stream));
    cuda_free_after(send, (void *)g->stream);
    *event = start_end(g, COMM_REDUCE_SCATTER);
}
void comm_nccl_broadcast(void *c, float *buf, size_t n, int root) {
    nccl_group *g = (nccl_group *)c;
    BLOCKING(g, COMM_BROADCAST, ncclBroadcast(buf, buf, n, ncclFloat32, root, g->comm, g->stream));
}
#else
int comm_nccl_available(void) { return 0; }
void comm_nccl_version(char *buf, size_t len) { snprintf(buf, len, "none (built without CUDA)"); }
int comm_nccl_init(void *mpi_comm, int size, int rank, int critical, void **out, char *err, size_t errlen) {
    (void)mpi_comm; (void)size; (void)rank; (void)critical; (void)out;
    snprintf(err, errlen, "--comm nccl: this build has no CUDA/NCCL (nvcc was not found at build time)");
    return -1;
}
void comm_nccl_all_reduce(void *c, void *buf, size_t n, int is_max, int esz) { (void)c; (void)buf; (void)n; (void)is_max; (void)esz; }
void comm_nccl_all_reduce_start(void *c, void *buf, size_t n, int esz, void **event) {
    (void)c; (void)buf; (void)n; (void)esz; (void)event;
}
void comm_nccl_all_gather(void *c, void *recv, const void *send, size_t n, int esz, void **event) {
    (void)c; (void)recv; (void)send; (void)n; (void)esz; (void)event;
}
void comm_nccl_reduce_scatter(void *c, void *recv, const void *send, size_t n, int esz) {
    (void)c; (void)recv; (void)send; (void)n; (void)esz;
}
void comm_nccl_reduce_scatter_start(void *c, void *recv, const void *send, size_t n, int esz, void **event) {
    (void)c; (void)recv; (void)send; (void)n; (void)esz; (void)event;
}
void comm_nccl_broadcast(void *c, float *buf, size_t n, int root) { (void)c; (void)buf; (void)n; (void)root; }
void comm_nccl_wait(void *event) { (void)event; }
void comm_nccl_collect_ms(double *ms) { (void)ms; }
#endif
