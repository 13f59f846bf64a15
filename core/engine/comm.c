/* core/engine/comm.c — the implementations of core/engine/comm.h's groups: null, self, MPI on host
 * buffers, host-staged MPI for device buffers, and NCCL (the calls themselves: comm_nccl.c). A group's
 * implementation is chosen once, when the group is made; the public calls trace the collective and
 * hand it to that implementation, which moves the data and counts it in the group's context.
 * Reduce-scatter over MPI picks MPI_Reduce_scatter_block or MPI_Allreduce + copy by group and size
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

#define MPI_CHECK(call) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) { \
    char s_[MPI_MAX_ERROR_STRING]; int l_ = 0; MPI_Error_string(rc_, s_, &l_); \
    fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, s_); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

#define COMM_KIND_NAME_(id, name) name,
const char *const comm_kind_names[COMM_NKIND] = {COMM_KINDS(COMM_KIND_NAME_)};
#undef COMM_KIND_NAME_

/* How a group moves data. n counts elements of t bytes; the implementation counts what it moved. */
struct comm_impl {
    const char *name;
    void (*all_reduce)(comm_group *g, void *buf, size_t n, dtype_t t, int is_max);
    void (*all_gather)(comm_group *g, void *recv, const void *send, size_t n, dtype_t t);
    /* sets r->active when there is something to wait for (else it completed at once) */
    void (*all_gather_start)(comm_group *g, comm_req *r, void *recv, const void *send, size_t n, dtype_t t);
    /* an in-place sum, started: likewise */
    void (*all_reduce_start)(comm_group *g, comm_req *r, void *buf, size_t n, dtype_t t);
    void (*reduce_scatter)(comm_group *g, void *recv, void *buf, size_t n, dtype_t t);
    /* started, with buf freed by the caller at once (comm.h); NULL: reduce_scatter, blocking */
    void (*reduce_scatter_start)(comm_group *g, comm_req *r, void *recv, void *buf, size_t n, dtype_t t);
    void (*broadcast)(comm_group *g, float *buf, size_t n, int root);
    void (*wait)(comm_req *r);
};

/* ------------------------------------------------------------------ context and groups */
void comm_ctx_init(comm_ctx *c, const ops_t *dev) {
    memset(c, 0, sizeof *c);
    c->dev = dev; c->rs = COMM_RS_AUTO; c->poll = -1;
}

void comm_ctx_free(comm_ctx *c) {
    for (int k = 0; k < 2; k++) { free(c->host[k]); c->host[k] = NULL; c->host_bytes[k] = 0; }
}

static void *host_buf(comm_ctx *c, int k, size_t bytes) {
    if (bytes > c->host_bytes[k]) {
        free(c->host[k]);
        c->host[k] = malloc(bytes);
        if (!c->host[k]) mem_host_failed("comm: staging", bytes);
        c->host_bytes[k] = bytes;
    }
    return c->host[k];
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
static void count(comm_group *g, comm_kind k, size_t bytes, double ms) {
    comm_stats *s = &g->ctx->stats;
    s->calls[k]++; s->bytes[k] += bytes; s->ms[k] += ms;
}
/* NCCL collectives are timed with CUDA events on their stream (comm_nccl.c): their times are
 * added here, when the statistics are read after the step's synchronisation; their calls count
 * 0 ms of host time (enqueueing them is not communicating) */
const comm_stats *comm_get_stats(comm_ctx *c) { comm_nccl_collect_ms(c->stats.ms); return &c->stats; }
void comm_reset_stats(comm_ctx *c) { memset(&c->stats, 0, sizeof c->stats); }
void comm_set_rs_algo(comm_ctx *c, comm_rs_algo a) { c->rs = a; }
comm_rs_algo comm_get_rs_algo(const comm_ctx *c) { return c->rs; }

/* Waiting for a collective: MPI_Wait by default. Open MPI yields the core while it waits when the
 * node is oversubscribed (--oversubscribe, or OMPI_MCA_mpi_yield_when_idle=1, which the sweep sets),
 * so a waiting rank gives the core back to a rank that still computes. Polling with MPI_Test and a
 * 20 us sleep was the default on oversubscribed nodes until it was measured side by side: 8 ranks
 * on 2 cores, tiny model, the 1x8 step took 370 ms sleep-polling against 160 ms in MPI_Wait (TP 8
 * at B 18 200 / 90 ms, 8x1 123 / 70 ms; two runs at once 10.5 / 7.9 s wall): each wake-up preempts
 * a computing rank. MESHSWEEP_COMM_POLL=1 still sleep-polls (build/commbench, comparisons);
 * decided once per context, when its first MPI group is made. */
static void decide_poll(comm_ctx *c) {
    if (c->poll >= 0) return;
    const char *e = getenv("MESHSWEEP_COMM_POLL");
    c->poll = e && *e == '1';
}
static void wait_req(const comm_group *g, MPI_Request *q) {
    if (!g->ctx->poll) { MPI_CHECK(MPI_Wait(q, MPI_STATUS_IGNORE)); return; }
    for (int i = 0;; i++) {
        int done = 0;
        MPI_CHECK(MPI_Test(q, &done, MPI_STATUS_IGNORE));
        if (done) return;
        if (i >= 8) { struct timespec ts = {0, 20000}; nanosleep(&ts, NULL); }
    }
}

static const comm_impl impl_null, impl_self, impl_mpi, impl_staged, impl_nccl;

/* an MPI group of this context: self for one rank, MPI on host or staged device buffers otherwise */
static void mpi_group(comm_ctx *c, comm_group *g, MPI_Comm *mc) {
    memset(g, 0, sizeof *g);
    g->mpi = mc; g->ctx = c;
    MPI_CHECK(MPI_Comm_size(*mc, &g->size)); MPI_CHECK(MPI_Comm_rank(*mc, &g->rank));
    g->impl = g->size == 1 ? &impl_self : c->dev ? &impl_staged : &impl_mpi;
}

int comm_mpi_groups(comm_ctx *c, comm_group *tpg, comm_group *dpg, int tp) {
    int rank, world;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
    MPI_Comm *t = malloc(sizeof *t), *d = malloc(sizeof *d);
    if (!t || !d) mem_host_failed("comm: the group tables", 2 * sizeof(MPI_Comm));
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank / tp, rank % tp, t)); /* consecutive ranks */
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank % tp, rank / tp, d)); /* strided ranks */
    mpi_group(c, tpg, t);
    mpi_group(c, dpg, d);
    decide_poll(c);
    return 0;
}

int comm_mpi_hsdp_groups(comm_ctx *c, comm_group *shard_group, comm_group *rep_group, int tp, int shard) {
    int rank;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_Comm *s = malloc(sizeof *s), *r = malloc(sizeof *r);
    if (!s || !r) mem_host_failed("comm: the group tables", 2 * sizeof(MPI_Comm));
    int st = shard * tp; /* ranks per replica */
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank / st * tp + rank % tp, rank / tp % shard, s)); /* stride tp */
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank % st, rank / st, r));                        /* stride S*tp */
    mpi_group(c, shard_group, s);
    mpi_group(c, rep_group, r);
    decide_poll(c);
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

void comm_mpi_world(comm_ctx *c, comm_group *g) {
    static MPI_Comm w;
    w = MPI_COMM_WORLD;
    mpi_group(c, g, &w);
    decide_poll(c);
}

void comm_null_group(comm_group *g, comm_ctx *c, int size, int rank) {
    memset(g, 0, sizeof *g); g->size = size; g->rank = rank; g->ctx = c; g->impl = &impl_null;
}

int comm_nccl_attach(comm_group *g, int critical, char *err, size_t errlen) {
    if (!g->mpi || g->size == 1) return 0;
    if (comm_nccl_init(g->mpi, g->size, g->rank, critical, &g->nccl, err, errlen)) return -1;
    g->impl = &impl_nccl;
    return 0;
}

const char *comm_impl_name(const comm_group *g) { return g->impl->name; }

/* ------------------------------------------------------------------ helpers */
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
static MPI_Datatype mpi_type(dtype_t t) { return t == DTYPE_BF16 ? MPI_UINT16_T : MPI_FLOAT; }
static MPI_Op mpi_op(dtype_t t, int is_max) { return is_max ? MPI_MAX : t == DTYPE_BF16 ? bf16_sum_op() : MPI_SUM; }
#define COMM(g) (*(MPI_Comm *)(g)->mpi)
#define AT(p, i, esz) ((void *)((char *)(p) + (size_t)(i) * (esz)))

/* local copy between buffers of the group's memory */
static void dcopy(const comm_group *g, void *dst, const void *src, size_t bytes) {
    if (dst == src) return;
    const ops_t *dev = g->ctx ? g->ctx->dev : NULL;
    if (dev) dev->copy(dst, src, bytes); else memcpy(dst, src, bytes);
}

static int rs_native(const comm_group *g, size_t all_bytes) {
    comm_rs_algo a = g->ctx->rs;
    return a == COMM_RS_NATIVE || (a == COMM_RS_AUTO && (g->size == 2 || all_bytes <= 65536));
}

/* ------------------------------------------------------------------ null: nothing moves */
static void null_all_reduce(comm_group *g, void *buf, size_t n, dtype_t t, int is_max) {
    (void)g; (void)buf; (void)n; (void)t; (void)is_max;
}
static void null_all_gather(comm_group *g, void *recv, const void *send, size_t n, dtype_t t) {
    (void)g; (void)recv; (void)send; (void)n; (void)t;
}
static void null_all_gather_start(comm_group *g, comm_req *r, void *recv, const void *send, size_t n, dtype_t t) {
    (void)g; (void)r; (void)recv; (void)send; (void)n; (void)t;
}
static void null_all_reduce_start(comm_group *g, comm_req *r, void *buf, size_t n, dtype_t t) {
    (void)g; (void)r; (void)buf; (void)n; (void)t;
}
static void null_reduce_scatter(comm_group *g, void *recv, void *buf, size_t n, dtype_t t) {
    (void)g; (void)recv; (void)buf; (void)n; (void)t;
}
static void null_broadcast(comm_group *g, float *buf, size_t n, int root) { (void)g; (void)buf; (void)n; (void)root; }
static void null_wait(comm_req *r) { (void)r; }
static const comm_impl impl_null = {"null", null_all_reduce, null_all_gather, null_all_gather_start,
                                    null_all_reduce_start, null_reduce_scatter, NULL, null_broadcast, null_wait};

/* ------------------------------------------------------------------ self: one rank, local copies */
static void self_all_gather(comm_group *g, void *recv, const void *send, size_t n, dtype_t t) {
    dcopy(g, recv, send, n * (size_t)t);
}
static void self_all_gather_start(comm_group *g, comm_req *r, void *recv, const void *send, size_t n, dtype_t t) {
    (void)r;
    dcopy(g, recv, send, n * (size_t)t);
}
static void self_reduce_scatter(comm_group *g, void *recv, void *buf, size_t n, dtype_t t) {
    dcopy(g, recv, buf, n * (size_t)t);
}
static const comm_impl impl_self = {"self", null_all_reduce, self_all_gather, self_all_gather_start,
                                    null_all_reduce_start, self_reduce_scatter, NULL, null_broadcast, null_wait};

/* ------------------------------------------------------------------ MPI on host buffers */
static void mpi_all_reduce(comm_group *g, void *buf, size_t n, dtype_t t, int is_max) {
    double t0 = comm_now_ms();
    MPI_Request q;
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, mpi_type(t), mpi_op(t, is_max), COMM(g), &q));
    wait_req(g, &q);
    count(g, COMM_ALL_REDUCE, n * (size_t)t, comm_now_ms() - t0);
}
static void mpi_all_gather(comm_group *g, void *recv, const void *send, size_t n, dtype_t t) {
    double t0 = comm_now_ms();
    const void *s = (send == AT(recv, (size_t)g->rank * n, (size_t)t)) ? MPI_IN_PLACE : send;
    MPI_Request q;
    MPI_CHECK(MPI_Iallgather(s, (int)n, mpi_type(t), recv, (int)n, mpi_type(t), COMM(g), &q));
    wait_req(g, &q);
    count(g, COMM_ALL_GATHER, n * g->size * (size_t)t, comm_now_ms() - t0);
}
static MPI_Request *new_req(void) {
    MPI_Request *q = malloc(sizeof *q);
    if (!q) mem_host_failed("comm: a request", sizeof(MPI_Request));
    return q;
}
static void mpi_all_gather_start(comm_group *g, comm_req *r, void *recv, const void *send, size_t n, dtype_t t) {
    MPI_Request *q = new_req();
    const void *s = (send == AT(recv, (size_t)g->rank * n, (size_t)t)) ? MPI_IN_PLACE : send;
    MPI_CHECK(MPI_Iallgather(s, (int)n, mpi_type(t), recv, (int)n, mpi_type(t), COMM(g), q));
    r->active = 1; r->mpi_req = q;
}
/* in place: MPI reads and writes buf until the wait, so the caller leaves it alone until then */
static void mpi_all_reduce_start(comm_group *g, comm_req *r, void *buf, size_t n, dtype_t t) {
    MPI_Request *q = new_req();
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, mpi_type(t), mpi_op(t, 0), COMM(g), q));
    r->active = 1; r->mpi_req = q;
}
/* the time counted for a non-blocking collective is the time spent waiting for it (not its
 * wall time since start, which overlaps compute) */
static void mpi_wait(comm_req *r) {
    double t0 = comm_now_ms();
    wait_req(r->g, (MPI_Request *)r->mpi_req);
    free(r->mpi_req);
    count(r->g, r->kind, r->bytes, comm_now_ms() - t0);
}
/* reduce-scatter of b (host) into r (host) */
static void mpi_rs_host(comm_group *g, void *r, void *b, size_t n, dtype_t t) {
    size_t esz = (size_t)t, all = n * g->size;
    MPI_Request q;
    if (rs_native(g, all * esz)) {
        MPI_CHECK(MPI_Ireduce_scatter_block(b, r, (int)n, mpi_type(t), mpi_op(t, 0), COMM(g), &q));
        wait_req(g, &q);
    } else {
        MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, b, (int)all, mpi_type(t), mpi_op(t, 0), COMM(g), &q));
        wait_req(g, &q);
        memcpy(r, AT(b, (size_t)g->rank * n, esz), n * esz);
    }
}
static void mpi_reduce_scatter(comm_group *g, void *recv, void *buf, size_t n, dtype_t t) {
    double t0 = comm_now_ms();
    mpi_rs_host(g, recv, buf, n, t);
    count(g, COMM_REDUCE_SCATTER, n * g->size * (size_t)t, comm_now_ms() - t0);
}
static void mpi_broadcast(comm_group *g, float *buf, size_t n, int root) {
    double t0 = comm_now_ms();
    MPI_CHECK(MPI_Bcast(buf, (int)n, MPI_FLOAT, root, COMM(g)));
    count(g, COMM_BROADCAST, n * sizeof(float), comm_now_ms() - t0);
}
static const comm_impl impl_mpi = {"mpi", mpi_all_reduce, mpi_all_gather, mpi_all_gather_start,
                                   mpi_all_reduce_start, mpi_reduce_scatter, NULL, mpi_broadcast, mpi_wait};

/* ------------------------------------------------------------------ MPI staged through host memory
 * Device buffers without NCCL (ranks sharing a GPU): to_host, MPI, from_host. A started all-gather
 * or all-reduce completes at once (no overlap in this fallback: the host staging is shared). */
static void staged_all_reduce(comm_group *g, void *buf, size_t n, dtype_t t, int is_max) {
    const ops_t *dev = g->ctx->dev;
    double t0 = comm_now_ms();
    size_t bytes = n * (size_t)t;
    void *h = host_buf(g->ctx, 0, bytes);
    dev->to_host(h, buf, bytes);
    MPI_Request q;
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, h, (int)n, mpi_type(t), mpi_op(t, is_max), COMM(g), &q));
    wait_req(g, &q);
    dev->from_host(buf, h, bytes);
    count(g, COMM_ALL_REDUCE, bytes, comm_now_ms() - t0);
}
static void staged_all_gather(comm_group *g, void *recv, const void *send, size_t n, dtype_t t) {
    const ops_t *dev = g->ctx->dev;
    double t0 = comm_now_ms();
    size_t esz = (size_t)t;
    char *h = host_buf(g->ctx, 0, n * g->size * esz);
    dev->to_host(h + (size_t)g->rank * n * esz, send, n * esz);
    MPI_Request q;
    MPI_CHECK(MPI_Iallgather(MPI_IN_PLACE, (int)n, mpi_type(t), h, (int)n, mpi_type(t), COMM(g), &q));
    wait_req(g, &q);
    dev->from_host(recv, h, n * g->size * esz);
    count(g, COMM_ALL_GATHER, n * g->size * esz, comm_now_ms() - t0);
}
static void staged_all_gather_start(comm_group *g, comm_req *r, void *recv, const void *send, size_t n, dtype_t t) {
    (void)r;
    staged_all_gather(g, recv, send, n, t);
}
static void staged_all_reduce_start(comm_group *g, comm_req *r, void *buf, size_t n, dtype_t t) {
    (void)r;
    staged_all_reduce(g, buf, n, t, 0);
}
static void staged_reduce_scatter(comm_group *g, void *recv, void *buf, size_t n, dtype_t t) {
    const ops_t *dev = g->ctx->dev;
    double t0 = comm_now_ms();
    size_t esz = (size_t)t, all = n * g->size;
    void *b = host_buf(g->ctx, 0, all * esz), *r = host_buf(g->ctx, 1, n * esz);
    dev->to_host(b, buf, all * esz);
    mpi_rs_host(g, r, b, n, t);
    dev->from_host(recv, r, n * esz);
    count(g, COMM_REDUCE_SCATTER, all * esz, comm_now_ms() - t0);
}
static void staged_broadcast(comm_group *g, float *buf, size_t n, int root) {
    const ops_t *dev = g->ctx->dev;
    double t0 = comm_now_ms();
    float *h = host_buf(g->ctx, 0, n * sizeof(float));
    dev->to_host(h, buf, n * sizeof(float));
    MPI_CHECK(MPI_Bcast(h, (int)n, MPI_FLOAT, root, COMM(g)));
    dev->from_host(buf, h, n * sizeof(float));
    count(g, COMM_BROADCAST, n * sizeof(float), comm_now_ms() - t0);
}
static const comm_impl impl_staged = {"mpi-staged", staged_all_reduce, staged_all_gather, staged_all_gather_start,
                                      staged_all_reduce_start, staged_reduce_scatter, NULL, staged_broadcast,
                                      null_wait};

/* ------------------------------------------------------------------ NCCL (comm_nccl.c)
 * Enqueueing is not communicating: calls count 0 ms of host time here, their event times are added
 * when the statistics are read. A started collective returns an event the compute stream waits on. */
static void nccl_all_reduce(comm_group *g, void *buf, size_t n, dtype_t t, int is_max) {
    comm_nccl_all_reduce(g->nccl, buf, n, is_max, (int)t);
    count(g, COMM_ALL_REDUCE, n * (size_t)t, 0.0);
}
static void nccl_all_gather(comm_group *g, void *recv, const void *send, size_t n, dtype_t t) {
    comm_nccl_all_gather(g->nccl, recv, send, n, (int)t, NULL);
    count(g, COMM_ALL_GATHER, n * g->size * (size_t)t, 0.0);
}
static void nccl_all_gather_start(comm_group *g, comm_req *r, void *recv, const void *send, size_t n, dtype_t t) {
    comm_nccl_all_gather(g->nccl, recv, send, n, (int)t, &r->event);
    r->active = 1;
}
static void nccl_all_reduce_start(comm_group *g, comm_req *r, void *buf, size_t n, dtype_t t) {
    comm_nccl_all_reduce_start(g->nccl, buf, n, (int)t, &r->event);
    r->active = 1;
}
static void nccl_reduce_scatter(comm_group *g, void *recv, void *buf, size_t n, dtype_t t) {
    comm_nccl_reduce_scatter(g->nccl, recv, buf, n, (int)t);
    count(g, COMM_REDUCE_SCATTER, n * g->size * (size_t)t, 0.0);
}
static void nccl_reduce_scatter_start(comm_group *g, comm_req *r, void *recv, void *buf, size_t n, dtype_t t) {
    comm_nccl_reduce_scatter_start(g->nccl, recv, buf, n, (int)t, &r->event);
    r->active = 1;
}
static void nccl_broadcast(comm_group *g, float *buf, size_t n, int root) {
    comm_nccl_broadcast(g->nccl, buf, n, root);
    count(g, COMM_BROADCAST, n * sizeof(float), 0.0);
}
static void nccl_wait(comm_req *r) {
    comm_nccl_wait(r->event);
    count(r->g, r->kind, r->bytes, 0.0);
}
static const comm_impl impl_nccl = {"nccl", nccl_all_reduce, nccl_all_gather, nccl_all_gather_start,
                                    nccl_all_reduce_start, nccl_reduce_scatter, nccl_reduce_scatter_start, nccl_broadcast,
                                    nccl_wait};

/* ------------------------------------------------------------------ the calls */
static void trace_id(const comm_group *g, comm_kind k, size_t bytes, comm_phase ph, int host, uint64_t id) {
    if (g->ctx && g->ctx->trace) g->ctx->trace->collective(g->ctx->trace->ctx, g, k, bytes, ph, host, id);
}
static void trace(const comm_group *g, comm_kind k, size_t bytes, comm_phase ph) { trace_id(g, k, bytes, ph, 0, 0); }

void comm_all_reduce_sum_t(comm_group *g, void *buf, size_t n, dtype_t t) {
    if (n == 0) return;
    trace(g, COMM_ALL_REDUCE, n * (size_t)t, COMM_BLOCKING);
    g->impl->all_reduce(g, buf, n, t, 0);
}
void comm_all_reduce_sum(comm_group *g, float *buf, size_t n) { comm_all_reduce_sum_t(g, buf, n, DTYPE_F32); }
void comm_all_reduce_max(comm_group *g, float *buf, size_t n) {
    if (n == 0) return;
    trace(g, COMM_ALL_REDUCE, n * sizeof(float), COMM_BLOCKING);
    g->impl->all_reduce(g, buf, n, DTYPE_F32, 1);
}

/* host doubles (loss sums, norms): always MPI on host memory, whatever carries the device data */
void comm_all_reduce_sum_f64(comm_group *g, double *buf, size_t n) {
    if (n == 0) return;
    trace_id(g, COMM_ALL_REDUCE, n * sizeof(double), COMM_BLOCKING, 1, 0);
    if (!g->mpi || g->size == 1) return;
    double t0 = comm_now_ms();
    MPI_Request q;
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, COMM(g), &q));
    wait_req(g, &q);
    count(g, COMM_ALL_REDUCE, n * sizeof(double), comm_now_ms() - t0);
}

void comm_all_gather_t(comm_group *g, void *recv, const void *send, size_t n, dtype_t t) {
    trace(g, COMM_ALL_GATHER, n * g->size * (size_t)t, COMM_BLOCKING);
    g->impl->all_gather(g, recv, send, n, t);
}
void comm_all_gather(comm_group *g, float *recv, const float *send, size_t n) { comm_all_gather_t(g, recv, send, n, DTYPE_F32); }

void comm_all_gather_host(comm_group *g, float *recv, const float *send, size_t n) {
    if (!g->mpi) return;
    if (g->size == 1) { if (recv != send) memcpy(recv, send, n * sizeof(float)); return; }
    const void *s = (send == recv + (size_t)g->rank * n) ? MPI_IN_PLACE : send;
    MPI_CHECK(MPI_Allgather(s, (int)n, MPI_FLOAT, recv, (int)n, MPI_FLOAT, COMM(g)));
}

void comm_reduce_scatter_t(comm_group *g, void *recv, void *buf, size_t n, dtype_t t) {
    trace(g, COMM_REDUCE_SCATTER, n * g->size * (size_t)t, COMM_BLOCKING);
    g->impl->reduce_scatter(g, recv, buf, n, t);
}
void comm_reduce_scatter(comm_group *g, float *recv, float *buf, size_t n) { comm_reduce_scatter_t(g, recv, buf, n, DTYPE_F32); }

void comm_broadcast(comm_group *g, float *buf, size_t n, int root) {
    trace(g, COMM_BROADCAST, n * sizeof(float), COMM_BLOCKING);
    g->impl->broadcast(g, buf, n, root);
}

/* a started collective's request, traced as started (its id for the wait) */
static void req_begin(comm_group *g, comm_req *r, comm_kind kind, size_t bytes) {
    memset(r, 0, sizeof *r);
    r->g = g; r->kind = kind; r->bytes = bytes;
    r->t0 = comm_now_ms();
    r->traced = g->ctx && g->ctx->trace;
    if (r->traced) {
        r->id = ++g->ctx->trace_next;
        trace_id(g, kind, bytes, COMM_STARTED, 0, r->id);
    }
}

/* Non-blocking all-gather (FSDP prefetch) and all-reduce (HSDP's replica sum): NCCL returns an event
 * the compute stream waits on; MPI on host buffers uses MPI_Iallgather / MPI_Iallreduce, which
 * progress inside later MPI calls; the others complete at once. */
void comm_all_gather_start_t(comm_group *g, comm_req *r, void *recv, const void *send, size_t n, dtype_t t) {
    req_begin(g, r, COMM_ALL_GATHER, n * g->size * (size_t)t);
    g->impl->all_gather_start(g, r, recv, send, n, t);
}
void comm_all_reduce_sum_start(comm_group *g, comm_req *r, float *buf, size_t n) {
    if (n == 0) { memset(r, 0, sizeof *r); return; }
    req_begin(g, r, COMM_ALL_REDUCE, n * sizeof(float));
    g->impl->all_reduce_start(g, r, buf, n, DTYPE_F32);
}
void comm_all_gather_start(comm_group *g, comm_req *r, float *recv, const float *send, size_t n) {
    comm_all_gather_start_t(g, r, recv, send, n, DTYPE_F32);
}
/* only NCCL starts it (comm.h); elsewhere it is the blocking call, traced as such, so a plan's trace (null
 * groups) and the cost model's replay of it see the reduce-scatter where they always did */
void comm_reduce_scatter_start(comm_group *g, comm_req *r, float *recv, float *buf, size_t n) {
    if (!g->impl->reduce_scatter_start) {
        memset(r, 0, sizeof *r);
        comm_reduce_scatter(g, recv, buf, n);
        return;
    }
    req_begin(g, r, COMM_REDUCE_SCATTER, n * g->size * sizeof(float));
    g->impl->reduce_scatter_start(g, r, recv, buf, n, DTYPE_F32);
}

void comm_wait(comm_req *r) {
    if (r->active) r->g->impl->wait(r);
    if (r->traced) trace_id(r->g, r->kind, r->bytes, COMM_WAITED, 0, r->id);
    r->active = 0; r->traced = 0; r->id = 0; r->mpi_req = NULL; r->event = NULL;
}
