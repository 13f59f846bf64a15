/* core/engine/comm.c — MPI, host-staged MPI and NCCL dispatch of core/engine/comm.h (NCCL itself: comm_nccl.c).
 * Reduce-scatter picks MPI_Reduce_scatter_block or MPI_Allreduce + copy by group and size
 * (comm_rs_algo in comm.h; build/commbench measures both). */
#include "core/engine/comm.h"
#include "core/engine/comm_nccl.h"
#include "core/engine/mem.h"
#include "kernels/kernels.h"
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MPI_CHECK(call) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) { \
    char s_[MPI_MAX_ERROR_STRING]; int l_ = 0; MPI_Error_string(rc_, s_, &l_); \
    fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, s_); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

const char *const comm_kind_names[COMM_NKIND] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast"};
static comm_stats g_stats;
static comm_rs_algo g_rs = COMM_RS_AUTO;
static const ops_t *g_dev;          /* non-NULL: buffers are device memory, MPI stages through host */
static void *g_host[2];             /* host staging buffers (not engine memory: they hold no device bytes) */
static size_t g_host_bytes[2];

void comm_set_device_ops(const ops_t *ops) { g_dev = (ops && ops != &ops_cpu) ? ops : NULL; }

static void *host_buf(int k, size_t bytes) {
    if (bytes > g_host_bytes[k]) {
        free(g_host[k]);
        g_host[k] = malloc(bytes);
        if (!g_host[k]) mem_host_failed("comm: staging", bytes);
        g_host_bytes[k] = bytes;
    }
    return g_host[k];
}

void comm_local_rank(int *local_rank, int *local_size) {
    MPI_Comm node;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_rank(node, local_rank));
    MPI_CHECK(MPI_Comm_size(node, local_size));
    MPI_CHECK(MPI_Comm_free(&node));
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int comm_mpi_components(const char *framework, char *out, size_t cap) {
    enum { MAXC = 32 };
    char names[MAXC][32];
    char *sorted[MAXC];
    int n = 0, provided, nvar = 0;
    if (cap) out[0] = 0;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return 0;
    size_t fl = strlen(framework);
    if (MPI_T_cvar_get_num(&nvar) != MPI_SUCCESS) nvar = 0;
    for (int i = 0; i < nvar && n < MAXC; i++) {
        char name[256], comp[32], desc[8];
        int nl = sizeof name, verb, bind, scope, dl = sizeof desc;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_T_cvar_get_info(i, name, &nl, &verb, &dt, &en, desc, &dl, &bind, &scope) != MPI_SUCCESS) continue;
        if (strncmp(name, framework, fl) || name[fl] != '_' || sscanf(name + fl + 1, "%31[a-z0-9]", comp) != 1) continue;
        if (!strcmp(comp, "base") || name[fl + 1 + strlen(comp)] != '_') continue;
        int seen = 0;
        for (int k = 0; k < n && !seen; k++) seen = !strcmp(names[k], comp);
        if (!seen) { snprintf(names[n], sizeof names[n], "%s", comp); sorted[n] = names[n]; n++; }
    }
    MPI_T_finalize();
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_str);
    size_t o = 0;
    for (int k = 0; k < n && cap; k++) {
        int w = snprintf(out + o, cap - o, "%s%s", k ? "," : "", sorted[k]);
        if (w < 0 || (size_t)w >= cap - o) break;
        o += (size_t)w;
    }
    return n;
}

double comm_now_ms(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}
static void count(comm_kind k, size_t bytes, double ms) { g_stats.calls[k]++; g_stats.bytes[k] += bytes; g_stats.ms[k] += ms; }
/* NCCL collectives are timed with CUDA events on their stream (comm_nccl.c): their times are
 * added here, when the statistics are read after the step's synchronisation; their calls count
 * 0 ms of host time (enqueueing them is not communicating) */
const comm_stats *comm_get_stats(void) { comm_nccl_collect_ms(g_stats.ms); return &g_stats; }
void comm_reset_stats(void) { memset(&g_stats, 0, sizeof g_stats); }
void comm_set_rs_algo(comm_rs_algo a) { g_rs = a; }
comm_rs_algo comm_get_rs_algo(void) { return g_rs; }

int comm_mpi_groups(comm_group *tpg, comm_group *dpg, int tp) {
    int rank, world;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
    MPI_Comm *t = malloc(sizeof *t), *d = malloc(sizeof *d);
    if (!t || !d) mem_host_failed("comm: the group tables", 2 * sizeof(MPI_Comm));
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank / tp, rank % tp, t)); /* consecutive ranks */
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank % tp, rank / tp, d)); /* strided ranks */
    memset(tpg, 0, sizeof *tpg); memset(dpg, 0, sizeof *dpg);
    tpg->mpi = t; dpg->mpi = d;
    MPI_CHECK(MPI_Comm_size(*t, &tpg->size)); MPI_CHECK(MPI_Comm_rank(*t, &tpg->rank));
    MPI_CHECK(MPI_Comm_size(*d, &dpg->size)); MPI_CHECK(MPI_Comm_rank(*d, &dpg->rank));
    return 0;
}

void comm_mpi_groups_free(comm_group *tpg, comm_group *dpg) {
    comm_group *g[2] = {tpg, dpg};
    for (int i = 0; i < 2; i++) {
        MPI_Comm *c = g[i]->mpi;
        if (!c) continue;
        MPI_Comm_free(c);
        free(c);
        g[i]->mpi = NULL;
    }
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

/* Waiting for a collective. With more ranks than cores on a node (the CPU default: 8 ranks on a
 * laptop), a rank spinning in MPI_Wait takes a core from a rank that still computes; polling with
 * MPI_Test and a short sleep gives it back. Decided once: oversubscribed nodes sleep-poll,
 * others wait normally. MESHSWEEP_COMM_POLL=0|1 overrides (build/commbench and the benchmarks). */
static int g_poll = -1;
static int poll_mode(void) {
    if (g_poll >= 0) return g_poll;
    const char *e = getenv("MESHSWEEP_COMM_POLL");
    if (e && (*e == '0' || *e == '1')) return g_poll = *e == '1';
    int lr = 0, ls = 1;
    comm_local_rank(&lr, &ls);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return g_poll = cores > 0 && ls > cores;
}
static void wait_req(MPI_Request *q) {
    if (!poll_mode()) { MPI_CHECK(MPI_Wait(q, MPI_STATUS_IGNORE)); return; }
    for (int i = 0;; i++) {
        int done = 0;
        MPI_CHECK(MPI_Test(q, &done, MPI_STATUS_IGNORE));
        if (done) return;
        if (i >= 8) { struct timespec ts = {0, 20000}; nanosleep(&ts, NULL); }
    }
}

int comm_nccl_attach(comm_group *g, char *err, size_t errlen) {
    if (g->null || g->size == 1) return 0;
    return comm_nccl_init(g->mpi, g->size, g->rank, &g->nccl, err, errlen);
}

/* bf16 sum for MPI (no native bf16 type): each pair added in fp32, rounded to nearest even */
static float bf16_to_f32(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static uint16_t f32_to_bf16(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN stays NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static void bf16_sum_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    const uint16_t *a = in; uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = f32_to_bf16(bf16_to_f32(a[i]) + bf16_to_f32(b[i]));
}
static MPI_Op bf16_sum_op(void) {
    static MPI_Op op = MPI_OP_NULL;
    if (op == MPI_OP_NULL) MPI_CHECK(MPI_Op_create(bf16_sum_fn, 1, &op));
    return op;
}
static MPI_Datatype mpi_type(comm_dtype t) { return t == COMM_BF16 ? MPI_UINT16_T : MPI_FLOAT; }
static MPI_Op mpi_sum(comm_dtype t) { return t == COMM_BF16 ? bf16_sum_op() : MPI_SUM; }
#define AT(p, i, esz) ((void *)((char *)(p) + (size_t)(i) * (esz)))

/* local copy between buffers of the backend */
static void dcopy(void *dst, const void *src, size_t bytes) {
    if (dst == src) return;
    if (g_dev) g_dev->copy(dst, src, bytes); else memcpy(dst, src, bytes);
}

static void all_reduce(comm_group *g, void *buf, size_t n, MPI_Datatype t, MPI_Op op, size_t esz, int device) {
    if (g->null || g->size == 1 || n == 0) return;
    double t0 = comm_now_ms();
    if (device && g->nccl) {
        comm_nccl_all_reduce(g->nccl, buf, n, op == MPI_MAX, (int)esz);
        t0 = comm_now_ms();
    } else if (device && g_dev) {
        void *h = host_buf(0, n * esz);
        g_dev->to_host(h, buf, n * esz);
        MPI_Request q;
        MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, h, (int)n, t, op, COMM(g), &q));
        wait_req(&q);
        g_dev->from_host(buf, h, n * esz);
    } else {
        MPI_Request q;
        MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, t, op, COMM(g), &q));
        wait_req(&q);
    }
    count(COMM_ALL_REDUCE, n * esz, comm_now_ms() - t0);
}
void comm_all_reduce_sum(comm_group *g, float *buf, size_t n) { all_reduce(g, buf, n, MPI_FLOAT, MPI_SUM, 4, 1); }
void comm_all_reduce_max(comm_group *g, float *buf, size_t n) { all_reduce(g, buf, n, MPI_FLOAT, MPI_MAX, 4, 1); }
void comm_all_reduce_sum_t(comm_group *g, void *buf, size_t n, comm_dtype t) {
    if (g->null || g->size == 1 || n == 0) return; /* before mpi_sum(): no MPI call in plan mode */
    all_reduce(g, buf, n, mpi_type(t), mpi_sum(t), (size_t)t, 1);
}
/* host doubles (loss sums, norms): always MPI on host memory */
void comm_all_reduce_sum_f64(comm_group *g, double *buf, size_t n) { all_reduce(g, buf, n, MPI_DOUBLE, MPI_SUM, 8, 0); }

static void mpi_all_gather(comm_group *g, void *recv, const void *send, size_t n, comm_dtype t) {
    size_t esz = (size_t)t;
    if (g_dev) {
        char *h = host_buf(0, n * g->size * esz);
        g_dev->to_host(h + (size_t)g->rank * n * esz, send, n * esz);
        MPI_Request q;
        MPI_CHECK(MPI_Iallgather(MPI_IN_PLACE, (int)n, mpi_type(t), h, (int)n, mpi_type(t), COMM(g), &q));
        wait_req(&q);
        g_dev->from_host(recv, h, n * g->size * esz);
        return;
    }
    const void *s = (send == AT(recv, (size_t)g->rank * n, esz)) ? MPI_IN_PLACE : send;
    MPI_Request q;
    MPI_CHECK(MPI_Iallgather(s, (int)n, mpi_type(t), recv, (int)n, mpi_type(t), COMM(g), &q));
    wait_req(&q);
}

void comm_all_gather_t(comm_group *g, void *recv, const void *send, size_t n, comm_dtype t) {
    if (g->null) return;
    if (g->size == 1) { dcopy(recv, send, n * (size_t)t); return; }
    double t0 = comm_now_ms();
    if (g->nccl) { comm_nccl_all_gather(g->nccl, recv, send, n, (int)t, NULL); t0 = comm_now_ms(); }
    else mpi_all_gather(g, recv, send, n, t);
    count(COMM_ALL_GATHER, n * g->size * (size_t)t, comm_now_ms() - t0);
}
void comm_all_gather(comm_group *g, float *recv, const float *send, size_t n) { comm_all_gather_t(g, recv, send, n, COMM_F32); }

void comm_all_gather_host(comm_group *g, float *recv, const float *send, size_t n) {
    if (g->null) return;
    if (g->size == 1) { if (recv != send) memcpy(recv, send, n * sizeof(float)); return; }
    const void *s = (send == recv + (size_t)g->rank * n) ? MPI_IN_PLACE : send;
    MPI_CHECK(MPI_Allgather(s, (int)n, MPI_FLOAT, recv, (int)n, MPI_FLOAT, COMM(g)));
}

void comm_reduce_scatter_t(comm_group *g, void *recv, void *buf, size_t n, comm_dtype t) {
    if (g->null) return;
    size_t esz = (size_t)t;
    if (g->size == 1) { dcopy(recv, buf, n * esz); return; }
    double t0 = comm_now_ms();
    size_t all = n * g->size;
    if (g->nccl) {
        comm_nccl_reduce_scatter(g->nccl, recv, buf, n, (int)esz);
        t0 = comm_now_ms();
    } else {
        void *b = buf;
        if (g_dev) { b = host_buf(0, all * esz); g_dev->to_host(b, buf, all * esz); }
        void *r = g_dev ? host_buf(1, n * esz) : recv;
        MPI_Request q;
        int native = g_rs == COMM_RS_NATIVE || (g_rs == COMM_RS_AUTO && (g->size == 2 || all * esz <= 65536));
        if (native) {
            MPI_CHECK(MPI_Ireduce_scatter_block(b, r, (int)n, mpi_type(t), mpi_sum(t), COMM(g), &q));
            wait_req(&q);
        } else {
            MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, b, (int)all, mpi_type(t), mpi_sum(t), COMM(g), &q));
            wait_req(&q);
            memcpy(r, AT(b, (size_t)g->rank * n, esz), n * esz);
        }
        if (g_dev) g_dev->from_host(recv, r, n * esz);
    }
    count(COMM_REDUCE_SCATTER, all * esz, comm_now_ms() - t0);
}
void comm_reduce_scatter(comm_group *g, float *recv, float *buf, size_t n) { comm_reduce_scatter_t(g, recv, buf, n, COMM_F32); }

void comm_broadcast(comm_group *g, float *buf, size_t n, int root) {
    if (g->null || g->size == 1) return;
    double t0 = comm_now_ms();
    if (g->nccl) {
        comm_nccl_broadcast(g->nccl, buf, n, root);
        t0 = comm_now_ms();
    } else if (g_dev) {
        float *h = host_buf(0, n * sizeof(float));
        g_dev->to_host(h, buf, n * sizeof(float));
        MPI_CHECK(MPI_Bcast(h, (int)n, MPI_FLOAT, root, COMM(g)));
        g_dev->from_host(buf, h, n * sizeof(float));
    } else {
        MPI_CHECK(MPI_Bcast(buf, (int)n, MPI_FLOAT, root, COMM(g)));
    }
    count(COMM_BROADCAST, n * sizeof(float), comm_now_ms() - t0);
}

/* Non-blocking all-gather for FSDP prefetch: NCCL returns an event the compute stream waits on;
 * MPI on host buffers uses MPI_Iallgather; host-staged MPI (device buffers without NCCL) completes
 * at once (no overlap in that fallback). */
void comm_all_gather_start_t(comm_group *g, comm_req *r, void *recv, const void *send, size_t n, comm_dtype t) {
    memset(r, 0, sizeof *r);
    if (g->null) return;
    size_t esz = (size_t)t;
    if (g->size == 1) { dcopy(recv, send, n * esz); return; }
    r->kind = COMM_ALL_GATHER; r->bytes = n * g->size * esz;
    r->t0 = comm_now_ms();
    if (g->nccl) {
        comm_nccl_all_gather(g->nccl, recv, send, n, (int)esz, &r->event);
        r->active = 1;
        return;
    }
    if (g_dev) { comm_all_gather_t(g, recv, send, n, t); return; }
    MPI_Request *q = malloc(sizeof *q);
    if (!q) mem_host_failed("comm: a request", sizeof(MPI_Request));
    const void *s = (send == AT(recv, (size_t)g->rank * n, esz)) ? MPI_IN_PLACE : send;
    MPI_CHECK(MPI_Iallgather(s, (int)n, mpi_type(t), recv, (int)n, mpi_type(t), COMM(g), q));
    r->active = 1; r->mpi_req = q;
}
void comm_all_gather_start(comm_group *g, comm_req *r, float *recv, const float *send, size_t n) {
    comm_all_gather_start_t(g, r, recv, send, n, COMM_F32);
}

/* the time counted for a non-blocking collective is the time spent waiting for it (not its
 * wall time since start, which overlaps compute) */
void comm_wait(comm_req *r) {
    if (!r->active) return;
    double t0 = comm_now_ms();
    if (r->event) {
        comm_nccl_wait(r->event);
        t0 = comm_now_ms();
    } else {
        wait_req((MPI_Request *)r->mpi_req);
        free(r->mpi_req);
    }
    count(r->kind, r->bytes, comm_now_ms() - t0);
    r->active = 0; r->mpi_req = NULL; r->event = NULL;
}
