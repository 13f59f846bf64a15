/* core/cost/calib_comm.c — timing the engine's collectives for the machine model (see calibrate.h): every
 * kind, every group size n of the world (consecutive groups of n; on one host a DP group of n strided
 * ranks has the same shape), all groups at once as in training, through core/engine/comm itself, so
 * its algorithm choices (reduce-scatter by size), its host staging and its sleep-polling are measured
 * with it. Time of a size = max over ranks of the mean over the iterations (nccl-tests' convention), the
 * median of that over rounds taken one after another across every point. */
#include "core/cost/calibrate.h"
#include "core/engine/comm.h"
#ifdef MESHSWEEP_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void cost_calib_idle_barrier(void) {
    MPI_Request q;
    MPI_Ibarrier(MPI_COMM_WORLD, &q);
    for (;;) {
        int done = 0;
        MPI_Test(&q, &done, MPI_STATUS_IGNORE);
        if (done) return;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void release(const ops_t *ops, int dev, float *a, float *b) {
    if (dev) { if (a) ops->dev_free(a); if (b) ops->dev_free(b); }
    else { free(a); free(b); }
}

/* 1 when some host has more ranks than GPUs (NCCL needs one GPU per rank: build/train then uses
 * host-staged MPI on every rank, and so does this) */
static int shared_gpu(void) {
    int lr = 0, ls = 1, ndev = 1, mine;
#ifdef MESHSWEEP_CUDA
    ndev = cuda_device_count();
#endif
    comm_local_rank(&lr, &ls);
    mine = ls > ndev;
    MPI_Allreduce(MPI_IN_PLACE, &mine, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return mine;
}

int cost_calib_uses_nccl(const ops_t *ops) {
    int world;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int shared = shared_gpu();
    return ops && ops != &ops_cpu && world > 1 && !shared;
}

/* one collective of S bytes (nccl-tests' S: the whole array) over g; started: as the engine's prefetch and
 * re-gather run it, comm_all_gather_start then comm_wait (MPI progresses it only while waited for, so
 * waiting at once is what a rank does after the compute between the two) */
static void call(comm_group *g, int kind, int started, float *a, float *b, size_t S) {
    size_t n = S / 4, per = n / (size_t)g->size;
    if (started) {
        comm_req r;
        comm_all_gather_start(g, &r, a, b, per ? per : 1);
        comm_wait(&r);
    } else if (kind == COMM_ALL_REDUCE) {
        if (S == 8) { double d = 1.0; comm_all_reduce_sum_f64(g, &d, 1); }
        else comm_all_reduce_sum(g, a, n ? n : 1);
    } else if (kind == COMM_ALL_GATHER) {
        comm_all_gather(g, a, b, per ? per : 1);
    } else {
        comm_reduce_scatter(g, b, a, per ? per : 1);
    }
}

/* the sizes to measure for (kind, n): the grid and the workload's, sorted, distinct, each a whole number
 * of floats per rank */
static int sizes_for(const cost_workload *w, const double *grid, int ngrid, int kind, int n, double *out, int cap) {
    int k = 0;
    for (int i = 0; i < ngrid && k < cap; i++) out[k++] = grid[i];
    for (size_t i = 0; i < w->ncolls && k < cap; i++)
        if (w->colls[i].kind == kind && w->colls[i].ranks == n && !w->colls[i].host) out[k++] = w->colls[i].bytes;
    if (kind == COMM_ALL_REDUCE && k < cap) out[k++] = 8; /* the host doubles: loss and gradient norm */
    for (int i = 0; i < k; i++) {
        double q = kind == COMM_ALL_REDUCE ? 4 : 4.0 * n;
        if (out[i] != 8) out[i] = ceil(out[i] / q) * q;
    }
    qsort(out, (size_t)k, sizeof *out, cmp_dbl);
    int u = 0;
    for (int i = 0; i < k; i++) if (!u || out[i] != out[u - 1]) out[u++] = out[i];
    return u;
}

static int iters_of(double S, int scale) {
    int it = S <= 65536 ? 20 : S <= (1 << 20) ? 10 : S <= (8 << 20) ? 5 : 3;
    it = it * scale / 4;
    return it < 2 ? 2 : it;
}

/* one loop of iters calls of one size on every group at once: the max over ranks of its mean (us). The
 * idle barrier sleep-polls in 1 ms naps, so its ranks leave it up to a nap apart: one untimed call first
 * lines the group's ranks up, as the collectives before it line a step's ranks up. (Without it the first
 * timed call waited for the last rank's nap: on 2 ranks of the 2-core host every size up to 64 KiB measured
 * ~57 us against build/commbench's 2-3 us, and a TP step of tiny was priced ~5 ms slow.) */
static double time_loop(comm_group *g, int kind, int started, float *a, float *b, double S, int iters) {
    cost_calib_idle_barrier();
    call(g, kind, started, a, b, (size_t)S);
    double t0 = comm_now_ms();
    for (int i = 0; i < iters; i++) call(g, kind, started, a, b, (size_t)S);
    double t = (comm_now_ms() - t0) * 1e3 / iters;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return t;
}

/* latency: the smallest size's time; bus bandwidth: from the two largest sizes */
static void fit(cost_coll *c) {
    int n = c->npts;
    c->latency_us = c->us[0];
    double f = cost_busbw_factor(c->kind, c->ranks), dt = c->us[n - 1] - (n > 1 ? c->us[n - 2] : 0);
    double db = c->bytes[n - 1] - (n > 1 ? c->bytes[n - 2] : 0);
    double bw = dt > 0 ? db * f / dt / 1e3 : 0;
    if (!(bw > 0)) bw = c->bytes[n - 1] * f / c->us[n - 1] / 1e3;
    c->busbw_gbs = bw > 0 ? bw : 1e-3;
}

int cost_calib_collectives(const ops_t *ops, const cost_workload *w, const double *grid, int ngrid, int iters_scale, cost_machine *m,
                           int verbose, char *err, size_t errlen) {
    int world, rank, lr = 0, ls = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    comm_local_rank(&lr, &ls);
    double most = 8;
    for (int i = 0; i < ngrid; i++) most = grid[i] > most ? grid[i] : most;
    for (size_t i = 0; i < w->ncolls; i++) most = w->colls[i].bytes > most ? w->colls[i].bytes : most;
    size_t nf = (size_t)(most / 4) + (size_t)world * 4 + 16;
    int dev = ops && ops != &ops_cpu;
    float *a = dev ? ops->dev_alloc(nf * sizeof *a) : malloc(nf * sizeof *a);
    float *b = dev ? ops->dev_alloc(nf * sizeof *b) : malloc(nf * sizeof *b);
    /* the modes: all-reduce, all-gather, reduce-scatter, and the all-gather started and waited for */
    int nk = 4, maxc = m->ncoll + nk * world + 4, rounds = iters_scale >= 4 ? 5 : 1;
    cost_coll *cl = realloc(m->coll, (size_t)maxc * sizeof *cl);
    if (cl) m->coll = cl;   /* a failed realloc leaves the old table in place */
    if (!a || !b || !cl) {
        release(ops, dev, a, b);
        snprintf(err, errlen, "out of host memory for %.0f-byte collective buffers", most);
        return -1;
    }
    if (dev) {
        float *h = malloc(nf * sizeof *h);
        if (!h) { release(ops, dev, a, b); snprintf(err, errlen, "out of host memory"); return -1; }
        for (size_t i = 0; i < nf; i++) h[i] = 1.0f;
        ops->from_host(a, h, nf * sizeof *h);
        ops->from_host(b, h, nf * sizeof *h);
        free(h);
    } else {
        for (size_t i = 0; i < nf; i++) a[i] = b[i] = 1.0f;
    }
    int nccl = cost_calib_uses_nccl(ops);
    comm_ctx cc;   /* the groups' staging and statistics: device buffers staged through ops without NCCL */
    comm_ctx_init(&cc, dev ? ops : NULL);
    /* the groups of every size n dividing the world, made once: consecutive groups of n, as the TP group
     * (on NCCL its stream is the critical one) */
    enum { MAXG = 16 };
    comm_group g[MAXG], other[MAXG];
    int gn[MAXG] = {0}, ng = 0, rc = 0;
    for (int n = 2; n <= world && ng < MAXG && !rc; n++) {
        if (world % n) continue;
        comm_mpi_groups(&cc, &g[ng], &other[ng], n);
        gn[ng++] = n;
        if (nccl && comm_nccl_attach(&g[ng - 1], 1, err, errlen)) rc = -1;
    }
    /* every rank stops when one could not attach (the others would wait in the timed loops) */
    int mine = rc;
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rc && !mine) snprintf(err, errlen, "another rank could not set up NCCL for the collectives");
    /* every (group size, kind, size) point, warmed up once; then the rounds, one after another over all
     * the points, so that a slow spell of a shared machine spoils one round of many points rather than
     * every round of a few (the median over the rounds drops it) */
    typedef struct { int gi, kind, started, iters; double S, t[8]; } point;
    int cap = ng * nk * COST_MAX_POINTS, np = 0;
    point *pt = rc ? NULL : calloc((size_t)(cap ? cap : 1), sizeof *pt);
    if (!rc && !pt) { snprintf(err, errlen, "out of host memory"); rc = -1; }
    for (int gi = 0; gi < ng && !rc; gi++)
        for (int mode = 0; mode < nk; mode++) {
            int kind = mode == 3 ? COMM_ALL_GATHER : mode;
            double sz[COST_MAX_POINTS];
            int ns = sizes_for(w, grid, ngrid, kind, gn[gi], sz, COST_MAX_POINTS);
            for (int i = 0; i < ns; i++)
                pt[np++] = (point){gi, kind, mode == 3, iters_of(sz[i], iters_scale), sz[i], {0}};
        }
    for (int i = 0; i < np; i++) call(&g[pt[i].gi], pt[i].kind, pt[i].started, a, b, (size_t)pt[i].S);
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < np; i++) pt[i].t[r] = time_loop(&g[pt[i].gi], pt[i].kind, pt[i].started, a, b, pt[i].S, pt[i].iters);
    /* the tables: per group size and mode, the median over the rounds of each size */
    for (int i = 0; i < np;) {
        cost_coll *c = &m->coll[m->ncoll];
        int n = gn[pt[i].gi];
        memset(c, 0, sizeof *c);
        c->kind = pt[i].kind; c->started = pt[i].started; c->ranks = n; c->ranks_per_host = n <= ls ? n : ls; c->host_ranks = ls;
        c->scope = c->ranks_per_host >= n ? COST_SCOPE_INTRA : COST_SCOPE_INTER;
        int j = i;
        for (; j < np && pt[j].gi == pt[i].gi && pt[j].kind == pt[i].kind && pt[j].started == pt[i].started; j++) {
            qsort(pt[j].t, (size_t)rounds, sizeof *pt[j].t, cmp_dbl);
            double us = pt[j].t[rounds / 2];
            c->bytes[c->npts] = pt[j].S;
            c->us[c->npts++] = us > 0.01 ? us : 0.01;
        }
        fit(c);
        if (verbose && rank == 0)
            fprintf(stderr, "calibrate: %-14s%s groups of %d: %d sizes, latency %.1f us, busbw %.3f GB/s\n",
                    comm_kind_names[c->kind], c->started ? " (started)" : "", n, c->npts, c->latency_us, c->busbw_gbs);
        m->ncoll++;
        i = j;
    }
    free(pt);
    for (int gi = 0; gi < ng; gi++) comm_mpi_groups_free(&g[gi], &other[gi]);
    comm_ctx_free(&cc);
    release(ops, dev, a, b);
    return rc;
}
