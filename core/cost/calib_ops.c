/* core/cost/calib_ops.c — timing the ops of a workload through a backend's op table, and the machine's
 * compute figures derived from them (see calibrate.h). Each op gets its own buffers of the sizes its
 * dimensions imply, filled with values that keep every kernel on its ordinary path (no denormals, no
 * overflow, valid token ids). */
#include "core/cost/calibrate.h"
#include "core/engine/comm.h"
#include <mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { NBUF = 10 };
typedef struct bufs { float *f[NBUF]; size_t nf[NBUF]; int32_t *tok; size_t ntok; void *host; } bufs;

/* floats per buffer role, and int32 token ids (< limit) */
static void layout(const cost_event *e, size_t f[NBUF], size_t *ntok, int64_t *limit) {
    const int64_t *d = e->dim;
    memset(f, 0, NBUF * sizeof *f);
    *ntok = 0; *limit = 1;
    size_t a = (size_t)d[0], b = (size_t)d[1], c = (size_t)d[2];
    switch ((cost_op_kind)e->kind) {
    case COST_GEMM_FWD: case COST_GEMM_FWD_F32: f[0] = a * b; f[1] = a * c; f[2] = b * c; break;
    case COST_GEMM_DIN: f[0] = a * b; f[1] = a * c; f[2] = c * b; break;
    case COST_GEMM_DW: f[0] = a * b; f[1] = c * a; f[2] = c * b; break;
    case COST_ATTN_FWD: case COST_ATTN_BWD: {
        size_t B = a, T = b, H = c, KV = (size_t)d[3], hd = (size_t)d[4];
        size_t q = B * T * H * hd, kv = B * T * KV * hd;
        size_t r[NBUF] = {q, kv, kv, 2 * T * T, q, q, B * H * T, q, kv, kv};
        memcpy(f, r, sizeof r);
        break;
    }
    case COST_RMSNORM_FWD: case COST_RMSNORM_BWD: f[0] = a * b; f[1] = b; f[2] = a * b; f[3] = a * b; f[4] = b; f[5] = a; break;
    case COST_ROPE_FWD: case COST_ROPE_BWD: f[0] = a; f[1] = b; break;
    case COST_SWIGLU_FWD: case COST_SWIGLU_BWD: case COST_ADAMW: for (int i = 0; i < 5; i++) f[i] = a; break;
    case COST_EMBED_FWD: case COST_EMBED_BWD: f[0] = a * b; f[1] = c * b; *ntok = a; *limit = (int64_t)c; break;
    case COST_CE_ROWMAX: case COST_CE_SUMEXP: case COST_CE_TARGET: case COST_CE_LOSS: case COST_CE_BWD:
        f[0] = a * (b ? b : 1); f[1] = a * (b ? b : 1); f[2] = a; f[3] = a; f[4] = a; *ntok = a; *limit = b ? (int64_t)b : 1;
        break;
    case COST_SUMSQ: case COST_ADD: case COST_SCALE: case COST_TO_COMPUTE: f[0] = a; f[1] = a; break;
    case COST_ZERO: case COST_COPY: case COST_TO_HOST: case COST_FROM_HOST: f[0] = a / 4 + 1; f[1] = a / 4 + 1; break;
    default: break;
    }
}

static void free_bufs(const ops_t *o, bufs *b) {
    for (int i = 0; i < NBUF; i++) if (b->f[i]) o->dev_free(b->f[i]);
    if (b->tok) o->dev_free(b->tok);
    free(b->host);
    memset(b, 0, sizeof *b);
}

static int alloc_bufs(const ops_t *o, const cost_event *e, bufs *b) {
    memset(b, 0, sizeof *b);
    size_t f[NBUF], ntok;
    int64_t limit;
    layout(e, f, &ntok, &limit);
    size_t most = ntok;
    for (int i = 0; i < NBUF; i++) most = f[i] > most ? f[i] : most;
    float *fill = malloc((most + 1) * sizeof(float));
    int32_t *ids = ntok ? malloc(ntok * sizeof *ids) : NULL;
    if (!fill || (ntok && !ids)) { free(fill); free(ids); return -1; }
    /* 0.5 .. 1: positive (sums of exponentials, second moments), never denormal; bf16 tables get
     * 0.75 in both halves of every word */
    uint32_t bf = 0x3F403F40u;
    for (size_t i = 0; i <= most; i++) {
        if (o->cbytes == 2) memcpy(&fill[i], &bf, 4);
        else fill[i] = 0.5f + (float)((i * 2654435761u) % 1000u) / 2000.0f;
    }
    for (size_t i = 0; i < ntok; i++) ids[i] = (int32_t)((i * 40503u) % (uint64_t)(limit > 0 ? limit : 1));
    int rc = 0;
    for (int i = 0; i < NBUF && !rc; i++) {
        if (!f[i]) continue;
        b->nf[i] = f[i];
        if (!(b->f[i] = o->dev_alloc(f[i] * sizeof(float)))) rc = -1;
        else o->from_host(b->f[i], fill, f[i] * sizeof(float));
    }
    if (!rc && ntok) {
        b->ntok = ntok;
        if (!(b->tok = o->dev_alloc(ntok * sizeof *ids))) rc = -1;
        else o->from_host(b->tok, ids, ntok * sizeof *ids);
    }
    if (!rc && (e->kind == COST_TO_HOST || e->kind == COST_FROM_HOST) && !(b->host = malloc(f[0] * sizeof(float)))) rc = -1;
    free(fill); free(ids);
    if (rc) free_bufs(o, b);
    return rc;
}

static void run_op(const ops_t *o, const cost_event *e, bufs *b) {
    const int64_t *d = e->dim;
    float **f = b->f;
    int A = (int)d[0], B = (int)d[1], C = (int)d[2], D = (int)d[3], E = (int)d[4];
    switch ((cost_op_kind)e->kind) {
    case COST_GEMM_FWD: o->matmul_forward(f[0], f[1], f[2], A, C, B, D); break;
    case COST_GEMM_FWD_F32: o->matmul_forward_f32out(f[0], f[1], f[2], A, C, B); break;
    case COST_GEMM_DIN: o->matmul_backward(f[0], NULL, f[1], NULL, f[2], A, B, C); break;
    case COST_GEMM_DW: o->matmul_backward(NULL, f[0], f[1], f[2], NULL, C, B, A); break;
    case COST_ATTN_FWD: o->attention_forward(f[5], f[6], o == &ops_cpu ? f[3] : NULL, f[0], f[1], f[2], A, B, C, D, E); break;
    case COST_ATTN_BWD:
        o->attention_backward(f[7], f[8], f[9], o == &ops_cpu ? f[3] : NULL, f[4], f[5], f[6], f[0], f[1], f[2], A, B, C, D, E);
        break;
    case COST_RMSNORM_FWD: o->rmsnorm_forward(f[0], f[5], f[2], f[4], A, B, 1e-5f); break;
    case COST_RMSNORM_BWD: o->rmsnorm_backward(f[0], f[1], f[2], f[3], f[4], f[5], A, B); break;
    case COST_ROPE_FWD: o->rope_forward(f[0], f[0], f[1], C, D, E, B / D); break;
    case COST_ROPE_BWD: o->rope_backward(f[0], f[0], f[1], C, D, E, B / D); break;
    case COST_SWIGLU_FWD: o->swiglu_forward(f[0], f[1], f[2], (size_t)d[0]); break;
    case COST_SWIGLU_BWD: o->swiglu_backward(f[0], f[1], f[2], f[3], f[4], (size_t)d[0]); break;
    case COST_EMBED_FWD: o->embedding_forward(f[0], b->tok, f[1], A, B, 0, C); break;
    case COST_EMBED_BWD: o->embedding_backward(f[1], f[0], b->tok, A, B, 0, C); break;
    case COST_CE_ROWMAX: o->ce_rowmax(f[2], f[1], A, B, C); break;
    case COST_CE_SUMEXP: o->ce_sumexp(f[3], f[1], f[2], A, B, C); break;
    case COST_CE_TARGET: o->ce_target(f[4], f[1], b->tok, A, B, 0); break;
    case COST_CE_LOSS: o->ce_loss(f[0], f[2], f[3], f[4], A); break;
    case COST_CE_BWD: o->ce_backward(f[0], f[1], f[2], f[3], b->tok, 1e-3f, A, B, 0, C); break;
    case COST_ADAMW: o->adamw(f[0], f[1], f[2], f[3], (size_t)d[0], 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.1f, 0.05f); break;
    case COST_SUMSQ: { const float *x[1] = {f[0]}; size_t n[1] = {(size_t)d[0]}; (void)o->sumsq(x, n, 1); break; }
    case COST_ADD: o->add_inplace(f[0], f[1], (size_t)d[0]); break;
    case COST_SCALE: o->scale_inplace(f[0], 1.0f, (size_t)d[0]); break;
    case COST_ZERO: o->zero(f[0], (size_t)d[0]); break;
    case COST_COPY: o->copy(f[0], f[1], (size_t)d[0]); break;
    case COST_TO_COMPUTE: o->to_compute(f[0], f[1], (size_t)d[0]); break;
    case COST_TO_HOST: o->to_host(b->host, f[0], (size_t)d[0]); break;
    case COST_FROM_HOST: o->from_host(f[0], b->host, (size_t)d[0]); break;
    default: break;
    }
}

/* An op timed in a loop over one set of buffers runs from its core's caches, where a step's op finds
 * its inputs only in part: a step reads each layer's weights and activations once and moves on. So the
 * loop goes round enough sets of buffers, allocated apart, that together they are 4x the core's L2
 * cache (4 MiB where it is not known): each op then reads from the shared cache or memory, as in a
 * step. (Measured on the 2-core machine of results/bench/prediction.md, one rank, the small model:
 * one set predicted a step 13 % fast, 64 MiB of sets 4-9 % slow, 4x L2 within 1 %.) A device backend
 * goes round 256 MiB, past any GPU's L2, as a step's weights are. At most NSETS sets, fewer when
 * memory runs out. */
static double cold_bytes(const ops_t *o) {
    if (o != &ops_cpu) return 256.0 * 1024 * 1024;
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return 4.0 * (double)(l2 > 0 ? l2 : 1024L * 1024);
}
enum { NSETS = 64 };
typedef struct sets { bufs s[NSETS]; int n; } sets;

static double set_bytes(const cost_event *e) {
    size_t f[NBUF], ntok;
    int64_t limit;
    layout(e, f, &ntok, &limit);
    double b = 4.0 * (double)ntok;
    for (int i = 0; i < NBUF; i++) b += 4.0 * (double)f[i];
    if (e->kind == COST_TO_HOST || e->kind == COST_FROM_HOST) b += 4.0 * (double)f[0];
    return b;
}
static void free_sets(const ops_t *o, sets *v) {
    for (int i = 0; i < v->n; i++) free_bufs(o, &v->s[i]);
    v->n = 0;
}
static int alloc_sets(const ops_t *o, const cost_event *e, sets *v) {
    double one = set_bytes(e);
    int want = one > 0 ? (int)ceil(cold_bytes(o) / one) : 1;
    want = want < 1 ? 1 : want > NSETS ? NSETS : want;
    v->n = 0;
    while (v->n < want && alloc_bufs(o, e, &v->s[v->n]) == 0) v->n++;
    return v->n ? 0 : -1;
}
/* rep r of a loop: the next set */
static void run_rep(const ops_t *o, const cost_event *e, sets *v, long r) { run_op(o, e, &v->s[r % v->n]); }

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the loop length that takes at least target_ms: doubling (or scaled) from one call */
static long reps_for(const ops_t *o, const cost_event *e, sets *b, double target_ms) {
    long reps = 1;
    for (;;) {
        double t0 = comm_now_ms();
        for (long r = 0; r < reps; r++) run_rep(o, e, b, r);
        o->synchronize();
        double dt = comm_now_ms() - t0;
        if (dt >= target_ms || reps >= (1L << 22)) return reps;
        long next = dt > 0 ? (long)(reps * (target_ms / dt) * 1.2) + 1 : reps * 8;
        reps = next > reps * 8 ? reps * 8 : next > reps ? next : reps + 1;
    }
}

/* the median of `samples` timings of loops of reps calls, per call (us); together: every sample starts
 * on every rank at once and is the slowest rank's (collective over MPI_COMM_WORLD) */
static double timed(const ops_t *o, const cost_event *e, sets *b, long reps, int samples, int together) {
    double t[16] = {0};
    if (samples > 16) samples = 16;
    if (samples < 1) samples = 1;
    for (int s = 0; s < samples; s++) {
        if (together) cost_calib_idle_barrier();
        double t0 = comm_now_ms();
        for (long r = 0; r < reps; r++) run_rep(o, e, b, r);
        o->synchronize();
        t[s] = (comm_now_ms() - t0) * 1e3 / (double)reps;
        if (together) MPI_Allreduce(MPI_IN_PLACE, &t[s], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    qsort(t, (size_t)samples, sizeof *t, cmp_dbl);
    double us = t[samples / 2];
    return us > 1e-3 ? us : 1e-3;
}

/* An op's sets of buffers allocated and warmed, `samples` timings of a loop of *reps calls (sized for
 * target_ms when *reps is 0: by rank 0 alone when together, then given to every rank), the sets freed.
 * -1 when its buffers cannot be had (on any rank, when together). */
static double measure(const ops_t *o, const cost_event *e, double target_ms, int samples, int together, long *reps) {
    int rank = 0;
    if (together) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    sets b;
    int ok = alloc_sets(o, e, &b) == 0, all_ok = ok;
    if (together) MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) { if (ok) free_sets(o, &b); return -1; }
    for (int i = 0; i < b.n; i++) run_rep(o, e, &b, i);
    o->synchronize();
    if (!*reps) {
        if (rank == 0) *reps = reps_for(o, e, &b, target_ms);
        if (together) MPI_Bcast(reps, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    }
    double us = timed(o, e, &b, *reps, samples, together);
    free_sets(o, &b);
    return us;
}

double cost_calib_op_us(const ops_t *o, const cost_event *e, double target_ms, int samples) {
    long reps = 0;
    return measure(o, e, target_ms, samples, 0, &reps);
}

/* The op on every rank at once, as a step computes it (collective): rank 0 sizes the loop alone for
 * target_ms, then every sample starts on every rank together and lasts until the slowest rank is done,
 * as a step waits for its slowest rank at its next collective: the median over samples of the max over
 * ranks. (A rank's own time would be too fast on an oversubscribed host: the ranks that finish first
 * give their cores to the rest.) The same value on every rank. */
double cost_calib_together_us(const ops_t *o, const cost_event *e, double target_ms, int samples) {
    long reps = 0;
    return measure(o, e, target_ms, samples, 1, &reps);
}

/* One pass of a step's ops in their order (ev: COST_EV_OP events; others are skipped), each distinct op
 * (kind and dimensions) on one set of buffers of its own, whichever call of the step it is. Not the table's
 * rounds of cold sets: in a step an op reads what the op before it wrote, from the cache. (Measured on the
 * 2-core machine of results/bench/prediction.md, rank 0's step of 8x1 at B 3 of sweeps/default.json: one set
 * per op, alone, 12.3 ms where build/train's 1-rank step of the same shapes took 12.5 ms; cold rounds as the
 * table's, 16.7 ms; on 8 ranks at once 55.5 ms where 8 independent 1-rank runs took 50-58 ms a step.)
 * together: every rank runs the pass at once and it takes the slowest rank's time (collective); else this
 * rank alone. The median of SEQ_PASSES timed passes after a warm-up pass (us); -1 when buffers cannot be
 * had (on any rank, when together). (One timed pass was ±7 % from call to call on the quiet 2-core host: a
 * 2-rank calibration's factor came out 1.01–1.16 in six calibrations minutes apart.) */
enum { SEQ_PASSES = 3 };
double cost_calib_sequence_us(const ops_t *o, const cost_event *ev, size_t n, int together) {
    size_t nd = 0;
    cost_event *d = malloc((n ? n : 1) * sizeof *d);
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    int ok = d && idx;
    if (ok)
        for (size_t i = 0; i < n; i++) {
            idx[i] = (size_t)-1;
            if (ev[i].type != COST_EV_OP) continue;
            size_t k = 0;
            while (k < nd && !(d[k].kind == ev[i].kind && !memcmp(d[k].dim, ev[i].dim, sizeof d[k].dim))) k++;
            if (k == nd) d[nd++] = ev[i];
            idx[i] = k;
        }
    bufs *v = ok ? calloc(nd ? nd : 1, sizeof *v) : NULL;
    size_t got = 0;
    ok = ok && v;
    while (ok && got < nd && (ok = alloc_bufs(o, &d[got], &v[got]) == 0)) got++;
    int all_ok = ok;
    if (together) MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    double us = -1, t[SEQ_PASSES];
    if (all_ok && ok && d && idx && v) {   /* all_ok is at most ok, ok implies the rest (said for the analyser) */
        for (int pass = 0; pass <= SEQ_PASSES; pass++) {   /* pass 0 warms the code, the caches, the allocator */
            if (together) cost_calib_idle_barrier();
            double t0 = comm_now_ms();
            for (size_t i = 0; i < n; i++)
                if (idx[i] != (size_t)-1) run_op(o, &d[idx[i]], &v[idx[i]]);
            o->synchronize();
            us = (comm_now_ms() - t0) * 1e3;
            if (together) MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (pass) t[pass - 1] = us;
        }
        qsort(t, SEQ_PASSES, sizeof *t, cmp_dbl);
        us = t[SEQ_PASSES / 2];
    }
    for (size_t k = 0; k < got; k++) free_bufs(o, &v[k]);
    free(v); free(d); free(idx);
    return us;
}

double cost_calib_launch_us(const ops_t *o) {
    cost_event e = {.type = COST_EV_OP, .kind = COST_ADD, .dim = {1, 0, 0, 0, 0}};
    bufs b;
    if (alloc_bufs(o, &e, &b)) return 0;
    enum { N = 2000 };
    run_op(o, &e, &b);
    o->synchronize();
    double t0 = comm_now_ms();
    for (int i = 0; i < N; i++) run_op(o, &e, &b);
    double us = (comm_now_ms() - t0) * 1e3 / N;
    o->synchronize();
    free_bufs(o, &b);
    return us;
}

/* ---- the machine's compute figures from the measurements ------------------------------------- */

static void add_point(cost_curve *c, double x, double us) {
    for (int i = 0; i < c->n; i++)
        if (c->x[i] == x) { c->us[i] = (c->us[i] + us) / 2; return; }
    if (c->n == COST_MAX_POINTS) {   /* full: drop the point closest to its neighbours in log x */
        int drop = 1;
        for (int i = 2; i < c->n - 1; i++)
            if (log(c->x[i + 1] / c->x[i - 1]) < log(c->x[drop + 1] / c->x[drop - 1])) drop = i;
        memmove(&c->x[drop], &c->x[drop + 1], (size_t)(c->n - drop - 1) * sizeof(double));
        memmove(&c->us[drop], &c->us[drop + 1], (size_t)(c->n - drop - 1) * sizeof(double));
        c->n--;
    }
    int i = c->n++;
    while (i > 0 && c->x[i - 1] > x) { c->x[i] = c->x[i - 1]; c->us[i] = c->us[i - 1]; i--; }
    c->x[i] = x; c->us[i] = us;
}

/* A point more than 3x slower than the median rate of its neighbours (two on each side) is a timing that
 * another process interrupted on a shared machine, not the op: it gets that median rate. */
static void despike(cost_curve *c) {
    if (c->n < 3) return;
    double r[COST_MAX_POINTS], fixed[COST_MAX_POINTS];
    for (int i = 0; i < c->n; i++) r[i] = c->x[i] / c->us[i];
    for (int i = 0; i < c->n; i++) {
        double w[4] = {0};
        int k = 0;
        for (int j = i - 2; j <= i + 2; j++) if (j >= 0 && j < c->n && j != i) w[k++] = r[j];
        qsort(w, (size_t)k, sizeof *w, cmp_dbl);
        double med = k % 2 ? w[k / 2] : (w[k / 2 - 1] + w[k / 2]) / 2;
        fixed[i] = r[i] < med / 3 ? c->x[i] / med : c->us[i];
    }
    memcpy(c->us, fixed, (size_t)c->n * sizeof *fixed);
}

static void derive(cost_machine *m) {
    for (int k = 0; k < COST_NOPS; k++) despike(&m->ops[k]);
    double peak = 0;
    int ng = m->ngemm;
    double *fl = malloc((size_t)(ng ? ng : 1) * sizeof *fl), *rt = malloc((size_t)(ng ? ng : 1) * sizeof *rt);
    for (int i = 0; fl && rt && i < ng; i++) {
        const cost_gemm_point *p = &m->gemm[i];
        fl[i] = 2.0 * (double)p->m * (double)p->n * (double)p->k;
        rt[i] = fl[i] / p->us / 1e6; /* TFLOP/s */
        if (rt[i] > peak) peak = rt[i];
    }
    /* the measured rates are of calibrated_ranks computing at once; the peak is one rank's alone (what MFU
     * is against: given, or the best rate scaled by the share), the efficiencies relative to it, so that the
     * fallbacks give the measured rates back */
    if (m->peak_tflops > 0) peak = m->peak_tflops;
    else peak *= cost_machine_share(m, m->calibrated_ranks > 0 ? m->calibrated_ranks : 1);
    m->peak_tflops = peak > 0 ? peak : 1e-3;
    /* efficiency by GEMM size: the median rate of each of up to 8 bins of log FLOPs */
    m->n_eff = 0;
    if (fl && rt && ng > 0) {
        double lo = INFINITY, hi = 0;
        for (int i = 0; i < ng; i++) { lo = fl[i] < lo ? fl[i] : lo; hi = fl[i] > hi ? fl[i] : hi; }
        int nb = ng < 8 ? ng : 8;
        for (int bi = 0; bi < nb; bi++) {
            double a = lo * pow(hi / lo, (double)bi / nb), z = lo * pow(hi / lo, (double)(bi + 1) / nb);
            double v[512];
            int nv = 0;
            double xs = 0;
            for (int i = 0; i < ng && nv < 512; i++)
                if (fl[i] >= a && (fl[i] < z || (bi == nb - 1 && fl[i] <= z))) { v[nv++] = rt[i]; xs += log(fl[i]); }
            if (!nv) continue;
            qsort(v, (size_t)nv, sizeof *v, cmp_dbl);
            double x = exp(xs / nv), e = v[nv / 2] / m->peak_tflops;
            if (m->n_eff && x <= m->eff_flops[m->n_eff - 1]) continue;
            m->eff_flops[m->n_eff] = x;
            m->eff[m->n_eff++] = e > 1 ? 1 : e > 1e-6 ? e : 1e-6;
        }
    }
    if (!m->n_eff) { m->n_eff = 1; m->eff_flops[0] = 1e9; m->eff[0] = 1; }
    free(fl); free(rt);
    /* attention: its FLOP rate against the GEMM peak; memory: the copies' bandwidth */
    double ae = 0;
    int na = 0;
    for (int k = COST_ATTN_FWD; k <= COST_ATTN_BWD; k++)
        for (int i = 0; i < m->ops[k].n; i++) { ae += m->ops[k].x[i] / m->ops[k].us[i] / 1e6 / m->peak_tflops; na++; }
    m->attention_efficiency = na ? (ae / na > 1 ? 1 : ae / na > 1e-6 ? ae / na : 1e-6) : 0.5;
    const cost_curve *cp = m->ops[COST_COPY].n ? &m->ops[COST_COPY] : m->ops[COST_ZERO].n ? &m->ops[COST_ZERO] : NULL;
    m->memory_gbs = cp ? cp->x[cp->n - 1] / cp->us[cp->n - 1] / 1e3 : 10;
    m->memory_efficiency = 1;
    const cost_curve *h = m->ops[COST_TO_HOST].n ? &m->ops[COST_TO_HOST] : NULL;
    m->host_link_gbs = h ? h->x[h->n - 1] / h->us[h->n - 1] / 1e3 : m->memory_gbs;
}

int cost_calib_ops(const ops_t *ops, const cost_workload *w, double target_ms, int samples, int together,
                   cost_machine *m, int verbose) {
    return cost_calib_ops_between(ops, w, target_ms, samples, together, m, verbose, NULL, NULL);
}

int cost_calib_ops_between(const ops_t *ops, const cost_workload *w, double target_ms, int samples, int together,
                           cost_machine *m, int verbose, void (*between)(void *), void *arg) {
    free(m->gemm);
    m->gemm = calloc(w->nops ? w->nops : 1, sizeof *m->gemm);
    m->ngemm = 0;
    if (!m->gemm) return -1;
    memset(m->ops, 0, sizeof m->ops);
    if (samples > 16) samples = 16;
    if (samples < 1) samples = 1;
    size_t n = w->nops ? w->nops : 1;
    double *t = malloc(n * (size_t)samples * sizeof *t);
    long *reps = calloc(n, sizeof *reps);
    if (!t || !reps) { free(t); free(reps); return -1; }
    for (int r = 0; r < samples; r++) {
        if (r && between) between(arg);
        for (size_t i = 0; i < w->nops; i++) {
            cost_event e = w->ops[i];
            cost_op_work((cost_op_kind)e.kind, e.dim, (int)ops->cbytes, &e.flops, &e.bytes);
            double us = measure(ops, &e, target_ms, 1, together, &reps[i]);   /* one sample a round */
            if (us < 0) {
                if (verbose >= 0) fprintf(stderr, "calibrate: cannot allocate the buffers of %s (%lld x %lld x %lld)\n", cost_op_names[e.kind],
                        (long long)e.dim[0], (long long)e.dim[1], (long long)e.dim[2]);
                free(t); free(reps);
                return -1;
            }
            t[i * (size_t)samples + (size_t)r] = us;
        }
    }
    for (size_t i = 0; i < w->nops; i++) {
        cost_event e = w->ops[i];
        cost_op_work((cost_op_kind)e.kind, e.dim, (int)ops->cbytes, &e.flops, &e.bytes);
        double *ti = &t[i * (size_t)samples];
        qsort(ti, (size_t)samples, sizeof *ti, cmp_dbl);
        double us = ti[samples / 2];
        if (verbose > 1)
            fprintf(stderr, "calibrate: %-14s %8lld %8lld %8lld  %10.2f us\n", cost_op_names[e.kind], (long long)e.dim[0],
                    (long long)e.dim[1], (long long)e.dim[2], us);
        if (cost_op_is_gemm((cost_op_kind)e.kind)) {
            int dup = 0;
            for (int j = 0; j < m->ngemm && !dup; j++) {
                cost_gemm_point *p = &m->gemm[j];
                dup = p->op == e.kind && p->m == e.dim[0] && p->n == e.dim[1] && p->k == e.dim[2];
            }
            if (!dup) m->gemm[m->ngemm++] = (cost_gemm_point){e.kind, e.dim[0], e.dim[1], e.dim[2], us};
            continue;
        }
        int attn = e.kind == COST_ATTN_FWD || e.kind == COST_ATTN_BWD;
        double x = attn ? e.flops : e.bytes;
        if (x > 0) add_point(&m->ops[e.kind], x, us);
    }
    free(t); free(reps);
    derive(m);
    return 0;
}
