/* core/comm.c — MPI and null implementations of core/comm.h.
 * Reduce-scatter defaults to MPI_Allreduce + copy: with Open MPI 4.1 on shared memory
 * MPI_Reduce_scatter_block is slower at large sizes (build/commbench measures both; README). */
#include "core/comm.h"
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const comm_kind_names[COMM_NKIND] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast"};
static comm_stats g_stats;
static comm_rs_algo g_rs = COMM_RS_ALLREDUCE;

#define MPI_CHECK(call) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) { \
    char s_[MPI_MAX_ERROR_STRING]; int l_ = 0; MPI_Error_string(rc_, s_, &l_); \
    fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, s_); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

double comm_now_ms(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}
static void count(comm_kind k, size_t bytes, double ms) { g_stats.calls[k]++; g_stats.bytes[k] += bytes; g_stats.ms[k] += ms; }
const comm_stats *comm_get_stats(void) { return &g_stats; }
void comm_reset_stats(void) { memset(&g_stats, 0, sizeof g_stats); }
void comm_set_rs_algo(comm_rs_algo a) { g_rs = a; }
comm_rs_algo comm_get_rs_algo(void) { return g_rs; }

int comm_mpi_groups(comm_group *tpg, comm_group *dpg, int tp) {
    int rank, world;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
    MPI_Comm *t = malloc(sizeof *t), *d = malloc(sizeof *d);
    if (!t || !d) { fprintf(stderr, "comm: out of host memory\n"); exit(1); }
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank / tp, rank % tp, t)); /* consecutive ranks */
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank % tp, rank / tp, d)); /* strided ranks */
    memset(tpg, 0, sizeof *tpg); memset(dpg, 0, sizeof *dpg);
    tpg->mpi = t; dpg->mpi = d;
    MPI_CHECK(MPI_Comm_size(*t, &tpg->size)); MPI_CHECK(MPI_Comm_rank(*t, &tpg->rank));
    MPI_CHECK(MPI_Comm_size(*d, &dpg->size)); MPI_CHECK(MPI_Comm_rank(*d, &dpg->rank));
    return 0;
}

void comm_mpi_world(comm_group *g) {
    static MPI_Comm w;
    w = MPI_COMM_WORLD;
    memset(g, 0, sizeof *g); g->mpi = &w;
    MPI_CHECK(MPI_Comm_size(w, &g->size)); MPI_CHECK(MPI_Comm_rank(w, &g->rank));
}

void comm_null_group(comm_group *g, int size, int rank) {
    memset(g, 0, sizeof *g); g->size = size; g->rank = rank; g->null = 1;
}

#define COMM(g) (*(MPI_Comm *)(g)->mpi)

static void all_reduce(comm_group *g, void *buf, size_t n, MPI_Datatype t, MPI_Op op, size_t esz) {
    if (g->null || g->size == 1 || n == 0) return;
    double t0 = comm_now_ms();
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, t, op, COMM(g)));
    count(COMM_ALL_REDUCE, n * esz, comm_now_ms() - t0);
}
void comm_all_reduce_sum(comm_group *g, float *buf, size_t n) { all_reduce(g, buf, n, MPI_FLOAT, MPI_SUM, 4); }
void comm_all_reduce_max(comm_group *g, float *buf, size_t n) { all_reduce(g, buf, n, MPI_FLOAT, MPI_MAX, 4); }
void comm_all_reduce_sum_f64(comm_group *g, double *buf, size_t n) { all_reduce(g, buf, n, MPI_DOUBLE, MPI_SUM, 8); }

void comm_all_gather(comm_group *g, float *recv, const float *send, size_t n) {
    if (g->null) return;
    if (g->size == 1) { if (recv != send) memcpy(recv, send, n * sizeof(float)); return; }
    double t0 = comm_now_ms();
    const void *s = (send == recv + (size_t)g->rank * n) ? MPI_IN_PLACE : send;
    MPI_CHECK(MPI_Allgather(s, (int)n, MPI_FLOAT, recv, (int)n, MPI_FLOAT, COMM(g)));
    count(COMM_ALL_GATHER, n * g->size * sizeof(float), comm_now_ms() - t0);
}

void comm_reduce_scatter(comm_group *g, float *recv, float *buf, size_t n) {
    if (g->null) return;
    if (g->size == 1) { if (recv != buf) memcpy(recv, buf, n * sizeof(float)); return; }
    double t0 = comm_now_ms();
    if (g_rs == COMM_RS_NATIVE) {
        MPI_CHECK(MPI_Reduce_scatter_block(buf, recv, (int)n, MPI_FLOAT, MPI_SUM, COMM(g)));
    } else {
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, (int)(n * g->size), MPI_FLOAT, MPI_SUM, COMM(g)));
        memcpy(recv, buf + (size_t)g->rank * n, n * sizeof(float));
    }
    count(COMM_REDUCE_SCATTER, n * g->size * sizeof(float), comm_now_ms() - t0);
}

void comm_broadcast(comm_group *g, float *buf, size_t n, int root) {
    if (g->null || g->size == 1) return;
    double t0 = comm_now_ms();
    MPI_CHECK(MPI_Bcast(buf, (int)n, MPI_FLOAT, root, COMM(g)));
    count(COMM_BROADCAST, n * sizeof(float), comm_now_ms() - t0);
}

void comm_all_gather_start(comm_group *g, comm_req *r, float *recv, const float *send, size_t n) {
    memset(r, 0, sizeof *r);
    if (g->null) return;
    if (g->size == 1) { if (recv != send) memcpy(recv, send, n * sizeof(float)); return; }
    MPI_Request *q = malloc(sizeof *q);
    if (!q) { fprintf(stderr, "comm: out of host memory\n"); exit(1); }
    double t0 = comm_now_ms();
    const void *s = (send == recv + (size_t)g->rank * n) ? MPI_IN_PLACE : send;
    MPI_CHECK(MPI_Iallgather(s, (int)n, MPI_FLOAT, recv, (int)n, MPI_FLOAT, COMM(g), q));
    r->active = 1; r->mpi_req = q; r->kind = COMM_ALL_GATHER; r->bytes = n * g->size * sizeof(float);
    count(COMM_ALL_GATHER, 0, comm_now_ms() - t0);
    g_stats.calls[COMM_ALL_GATHER]--; /* counted once, at completion */
}

void comm_wait(comm_req *r) {
    if (!r->active) return;
    double t0 = comm_now_ms();
    MPI_CHECK(MPI_Wait((MPI_Request *)r->mpi_req, MPI_STATUS_IGNORE));
    count(r->kind, r->bytes, comm_now_ms() - t0);
    free(r->mpi_req);
    r->active = 0; r->mpi_req = NULL;
}
