/* core/cost/calib_comm.c — timing the engine's collectives for the machine model (see calibrate.h): every
 * kind, every group size n of the world (consecutive groups of n; on one host a DP group of n strided
 * ranks has the same shape), all groups at once as in training, through core/engine/comm itself, so
 * its algorithm choices (reduce-scatter by size), its host staging and its sleep-polling are measured
 * with it. Time of a size = max over ranks of the mean over the iterations (nccl-tests' convention), the
 * median of that over rounds, each across every point, which build/calibrate spreads over the calibration
 * (between the op table's rounds: calib_run.c). */
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

/* A calibration's collectives, between cost_calib_coll_begin and cost_calib_coll_end: every (group size, kind,
 * size) point, warmed up once at the start; then rounds, each over all the points, which the caller may
 * spread over the calibration (calib_run.c: between the op table's rounds). */
typedef struct { int gi, kind, started, iters; double S, t[8]; } point;
enum { MAXG = 16 };
struct cost_calib_coll {
    const ops_t *ops;
    int dev, ng, np, rounds, done, ls;
    double t_first, t_last;   /* when the first and the last round began (ms) */
    float *a, *b;
    comm_ctx cc;
    comm_group g[MAXG], other[MAXG];
    int gn[MAXG];
    point *pt;
};

void cost_calib_coll_free(cost_calib_coll *s) {
    if (!s) return;
    free(s->pt);
    for (int gi = 0; gi < s->ng; gi++) comm_mpi_groups_free(&s->g[gi], &s->other[gi]);
    comm_ctx_free(&s->cc);
    release(s->ops, s->dev, s->a, s->b);
    free(s);
}

cost_calib_coll *cost_calib_coll_begin(const ops_t *ops, const cost_workload *w, const double *grid, int ngrid, int iters_scale,
                                       char *err, size_t errlen) {
    int world, lr = 0, ls = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    comm_local_rank(&lr, &ls);
    double most = 8;
    for (int i = 0; i < ngrid; i++) most = grid[i] > most ? grid[i] : most;
    for (size_t i = 0; i < w->ncolls; i++) most = w->colls[i].bytes > most ? w->colls[i].bytes : most;
    size_t nf = (size_t)(most / 4) + (size_t)world * 4 + 16;
    int dev = ops && ops != &ops_cpu, rc = 0;
    cost_calib_coll *s = calloc(1, sizeof *s);
    float *a = dev ? ops->dev_alloc(nf * sizeof *a) : malloc(nf * sizeof *a);
    float *b = dev ? ops->dev_alloc(nf * sizeof *b) : malloc(nf * sizeof *b);
    if (!s || !a || !b) {
        release(ops, dev, a, b);
        free(s);
        s = NULL; a = b = NULL;
        snprintf(err, errlen, "out of host memory for %.0f-byte collective buffers", most);
        rc = -1;
    }
    /* every rank returns NULL when one could not start (the others would wait in the rounds) */
    int all = rc;
    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all || !s) {
        if (s) { snprintf(err, errlen, "another rank could not allocate the collective buffers"); free(s); release(ops, dev, a, b); }
        return NULL;
    }
    s->ops = ops; s->dev = dev; s->a = a; s->b = b; s->ls = ls;
    /* the modes: all-reduce, all-gather, reduce-scatter, and the all-gather started and waited for */
    int nk = 4;
    s->rounds = iters_scale >= 4 ? 5 : 1;
    if (dev) {
        float *h = malloc(nf * sizeof *h);
        if (h) {
            for (size_t i = 0; i < nf; i++) h[i] = 1.0f;
            ops->from_host(a, h, nf * sizeof *h);
            ops->from_host(b, h, nf * sizeof *h);
            free(h);
        } else {
            rc = -1;
            snprintf(err, errlen, "out of host memory");
        }
    } else {
        for (size_t i = 0; i < nf; i++) a[i] = b[i] = 1.0f;
    }
    int nccl = cost_calib_uses_nccl(ops);
    comm_ctx_init(&s->cc, dev ? ops : NULL);   /* the groups' staging and statistics: device buffers staged through ops without NCCL */
    /* the groups of every size n dividing the world, made once: consecutive groups of n, as the TP group
     * (on NCCL its stream is the critical one) */
    for (int n = 2; n <= world && s->ng < MAXG; n++) {
        if (world % n) continue;
        comm_mpi_groups(&s->cc, &s->g[s->ng], &s->other[s->ng], n);
        s->gn[s->ng++] = n;
        if (!rc && nccl && comm_nccl_attach(&s->g[s->ng - 1], 1, err, errlen)) rc = -1;
    }
    int cap = s->ng * nk * COST_MAX_POINTS;
    s->pt = calloc((size_t)(cap ? cap : 1), sizeof *s->pt);
    if (!rc && !s->pt) { snprintf(err, errlen, "out of host memory"); rc = -1; }
    int mine = rc;
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rc || !s->pt) {
        if (!mine) snprintf(err, errlen, "another rank could not set up the collectives (NCCL or host memory)");
        cost_calib_coll_free(s);
        return NULL;
    }
    for (int gi = 0; gi < s->ng; gi++)
        for (int mode = 0; mode < nk; mode++) {
            int kind = mode == 3 ? COMM_ALL_GATHER : mode;
            double sz[COST_MAX_POINTS];
            int ns = sizes_for(w, grid, ngrid, kind, s->gn[gi], sz, COST_MAX_POINTS);
            for (int i = 0; i < ns; i++)
                s->pt[s->np++] = (point){gi, kind, mode == 3, iters_of(sz[i], iters_scale), sz[i], {0}};
        }
    for (int i = 0; i < s->np; i++) call(&s->g[s->pt[i].gi], s->pt[i].kind, s->pt[i].started, a, b, (size_t)s->pt[i].S);
    return s;
}

int cost_calib_coll_rounds(const cost_calib_coll *s) { return s ? s->rounds : 0; }

/* one round over every point (nothing once every round is done) */
void cost_calib_coll_round(cost_calib_coll *s) {
    if (!s || s->done >= s->rounds) return;
    s->t_last = comm_now_ms();
    if (!s->done) s->t_first = s->t_last;
    for (int i = 0; i < s->np; i++)
        s->pt[i].t[s->done] = time_loop(&s->g[s->pt[i].gi], s->pt[i].kind, s->pt[i].started, s->a, s->b, s->pt[i].S, s->pt[i].iters);
    s->done++;
}

/* the rounds left, then the tables: per group size and mode, the median over the rounds of each size */
int cost_calib_coll_end(cost_calib_coll *s, cost_machine *m, int verbose, char *err, size_t errlen) {
    if (!s) return -1;
    while (s->done < s->rounds) cost_calib_coll_round(s);
    int rank, rounds = s->rounds;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (verbose && rank == 0)
        fprintf(stderr, "calibrate: collectives: %d round%s of %d points, begun over %.1f s\n", rounds, rounds == 1 ? "" : "s", s->np,
                (s->t_last - s->t_first) / 1e3);
    cost_coll *cl = realloc(m->coll, (size_t)(m->ncoll + s->np + 4) * sizeof *cl);
    int bad = !cl;
    if (cl) m->coll = cl;   /* a failed realloc leaves the old table in place */
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (bad) { snprintf(err, errlen, "out of host memory"); cost_calib_coll_free(s); return -1; }
    point *pt = s->pt;
    for (int i = 0; i < s->np;) {
        cost_coll *c = &m->coll[m->ncoll];
        int n = s->gn[pt[i].gi], ls = s->ls;
        memset(c, 0, sizeof *c);
        c->kind = pt[i].kind; c->started = pt[i].started; c->ranks = n; c->ranks_per_host = n <= ls ? n : ls; c->host_ranks = ls;
        c->scope = c->ranks_per_host >= n ? COST_SCOPE_INTRA : COST_SCOPE_INTER;
        int j = i;
        for (; j < s->np && pt[j].gi == pt[i].gi && pt[j].kind == pt[i].kind && pt[j].started == pt[i].started; j++) {
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
    cost_calib_coll_free(s);
    return 0;
}

int cost_calib_collectives(const ops_t *ops, const cost_workload *w, const double *grid, int ngrid, int iters_scale, cost_machine *m,
                           int verbose, char *err, size_t errlen) {
    cost_calib_coll *s = cost_calib_coll_begin(ops, w, grid, ngrid, iters_scale, err, errlen);
    return s ? cost_calib_coll_end(s, m, verbose, err, errlen) : -1;
}
