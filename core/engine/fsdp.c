/* core/engine/fsdp.c — FSDP units, gathers, gradient reduce-scatter and the sharded optimizer (see fsdp.h). */
#include "core/engine/fsdp.h"
#include "core/engine/mem.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fsdp_add_seg(fsdp_unit *u, const fsdp_seg *s) {
    if (u->nseg >= FSDP_MAX_SEGS) { fprintf(stderr, "fsdp: too many segments in %s\n", u->name); exit(1); }
    fsdp_seg *d = &u->seg[u->nseg++];
    *d = *s;
    d->off = u->numel;
    u->numel += s->rows * s->cols;
}

/* dp = 1: nothing is sharded and the gathered view is persistent: the parameter buffer itself in
 * fp32 (aliased), a compute copy (bf16) otherwise, which the fused AdamW rewrites from the masters
 * at every step, so no unit is converted in a step's forward or backward. dp > 1: a gathered copy
 * is all-gathered per use. */
static int persistent(const fsdp_t *f) { return f->dp->size == 1; }
static int aliased(const fsdp_t *f) { return persistent(f) && f->E->dtype == DTYPE_F32; }

void fsdp_alloc_state(fsdp_t *f) {
    int dp = f->dp->size;
    for (int i = 0; i < f->n; i++) {
        fsdp_unit *u = &f->u[i];
        u->padded = (u->numel + dp - 1) / dp * dp;
        u->shard = u->padded / dp;
        size_t b = (size_t)u->shard * sizeof(float);
        u->p = mem_calloc(&f->E->mem, MEM_PARAMS, b);
        u->g = mem_calloc(&f->E->mem, MEM_GRADS, b);
        u->m = mem_calloc(&f->E->mem, MEM_OPTIMIZER, b);
        u->v = mem_calloc(&f->E->mem, MEM_OPTIMIZER, b);
        size_t copy_b = (size_t)u->padded * dtype_bytes(f->E->dtype);
        u->full = aliased(f) ? u->p : persistent(f) ? mem_calloc(&f->E->mem, MEM_GATHERED, copy_b) : NULL;
        u->full_g = NULL;
        u->state = persistent(f) ? 2 : 0;
        u->g_zero = 1;
    }
}

void fsdp_free_state(fsdp_t *f) {
    fsdp_grad_wait(f);   /* MPI may still be writing a gradient (a backward without its step) */
    for (int i = 0; i < f->n; i++) {
        fsdp_unit *u = &f->u[i];
        if (!persistent(f)) fsdp_release(f, i);
        else if (!aliased(f)) mem_free(&f->E->mem, u->full);
        mem_free(&f->E->mem, u->p); mem_free(&f->E->mem, u->g); mem_free(&f->E->mem, u->m); mem_free(&f->E->mem, u->v);
        u->p = u->g = u->m = u->v = u->full = NULL;
    }
}

/* intersection of the owned slice with segment s, in segment-local indices */
static int owned_range(const fsdp_unit *u, const fsdp_seg *s, int dp_rank, int64_t *first, int64_t *count) {
    int64_t lo = (int64_t)dp_rank * u->shard, hi = lo + u->shard;
    int64_t a = s->off > lo ? s->off : lo, e = s->off + s->rows * s->cols;
    int64_t b = e < hi ? e : hi;
    if (b <= a) return 0;
    *first = a - s->off; *count = b - a;
    return 1;
}

void fsdp_fill_params(fsdp_t *f, fsdp_fill_fn fill, void *ctx) {
    int r = f->dp->rank;
    for (int i = 0; i < f->n; i++) {
        fsdp_unit *u = &f->u[i];
        float *host = calloc((size_t)u->shard ? (size_t)u->shard : 1, sizeof(float));
        if (!host) mem_host_failed("fsdp: filling a unit", (size_t)u->shard * sizeof(float));
        for (int k = 0; k < u->nseg; k++) {
            int64_t first, count;
            if (!owned_range(u, &u->seg[k], r, &first, &count)) continue;
            fill(ctx, &u->seg[k], first, count, host + (u->seg[k].off + first - (int64_t)r * u->shard));
        }
        f->E->ops->from_host(u->p, host, (size_t)u->shard * sizeof(float));
        if (persistent(f) && !aliased(f)) f->E->ops->to_compute(u->full, u->p, (size_t)u->shard);
        free(host);
    }
}

void fsdp_gather_start(fsdp_t *f, int i) {
    if (i < 0 || i >= f->n) return;
    fsdp_unit *u = &f->u[i];
    if (u->state != 0) return;
    dtype_t t = f->E->dtype;
    size_t esz = dtype_bytes(t);
    u->full = mem_alloc(&f->E->mem, MEM_GATHERED, (size_t)u->padded * esz);
    const void *send = u->p;
    if (t != DTYPE_F32) {
        /* compute copies in bf16: convert the owned fp32 slice into its place in the gathered buffer,
         * then all-gather in place (half the bytes of an fp32 gather) */
        void *mine = (char *)u->full + (size_t)f->dp->rank * u->shard * esz;
        f->E->ops->to_compute(mine, u->p, (size_t)u->shard);
        send = mine;
    }
    if (f->prefetch) comm_all_gather_start_t(f->dp, &u->req, u->full, send, (size_t)u->shard, t);
    else comm_all_gather_t(f->dp, u->full, send, (size_t)u->shard, t);
    u->state = f->prefetch ? 1 : 2;
}

void fsdp_gather_wait(fsdp_t *f, int i) {
    fsdp_unit *u = &f->u[i];
    if (u->state == 0) fsdp_gather_start(f, i);
    if (u->state == 1) { comm_wait(&u->req); u->state = 2; }
}

void fsdp_release(fsdp_t *f, int i) {
    fsdp_unit *u = &f->u[i];
    if (persistent(f)) return;
    if (u->state == 1) comm_wait(&u->req);
    if (u->state != 0) { mem_free(&f->E->mem, u->full); u->full = NULL; u->state = 0; }
}

void fsdp_accum_begin(fsdp_t *f, int micro, int nmicro) { f->micro = micro; f->nmicro = nmicro; }
static int accum_last(const fsdp_t *f) { return f->micro + 1 >= f->nmicro; }

/* zero the replicated segments' part of buf, which holds unit elements [lo, lo+n), when this rank does
 * not carry their sums (fsdp_t) */
static void drop_replicated(fsdp_t *f, const fsdp_unit *u, float *buf, int64_t lo, int64_t n) {
    if (f->carry_replicated) return;
    for (int k = 0; k < u->nseg; k++) {
        const fsdp_seg *s = &u->seg[k];
        int64_t a = s->off > lo ? s->off : lo, e = s->off + s->rows * s->cols, b = e < lo + n ? e : lo + n;
        if (s->replicated && b > a) f->E->ops->zero(buf + (a - lo), (size_t)(b - a) * sizeof(float));
    }
}

void fsdp_grad_begin(fsdp_t *f, int i) {
    fsdp_unit *u = &f->u[i];
    int first = f->micro == 0;
    comm_wait(&u->sreq);   /* a backward since the last one without a step: its reduce-scatter and */
    comm_wait(&u->rreq);   /* replica sum are done first */
    if (f->dp->size == 1) {
        u->full_g = u->g;
        /* the first micro-batch: the fused AdamW zeroed it, unless a backward ran since without a step */
        if (first && !u->g_zero) f->E->ops->zero(u->g, (size_t)u->shard * sizeof(float));
        else if (!first) drop_replicated(f, u, u->g, 0, u->shard);
        u->g_zero = 0;
        return;
    }
    if (f->reduce_last && !first) { drop_replicated(f, u, u->full_g, 0, u->padded); return; } /* kept since the first */
    u->full_g = mem_calloc(&f->E->mem, MEM_GRADS, (size_t)u->padded * sizeof(float));
    if (first) return;
    /* the owned slice's sum so far into its place: the reduce-scatter adds it once */
    int64_t lo = (int64_t)f->dp->rank * u->shard;
    f->E->ops->copy(u->full_g + lo, u->g, (size_t)u->shard * sizeof(float));
    drop_replicated(f, u, u->full_g + lo, lo, u->shard);
}

/* HSDP: the step's owned slice summed across the replicas, once, after the last micro-batch (before it each
 * replica accumulates its own sum, which the next micro-batch's reduce-scatter carries). Started, not
 * blocking: it runs while the backward goes on and fsdp_grad_wait completes it. In place on the owned
 * gradient u->g, which nothing reads or writes until that wait (the rest of the backward touches other
 * units), so it needs no buffer of its own and the memory plan is the blocking one's. Order: every rank
 * runs the same backward, so the replica group's ranks start theirs in the same order — the order of the
 * units' fsdp_grad_end (the head, the layers from the last, the embedding), each after the unit's
 * reduce-scatter over the shard group; the shard group's collectives (next units' gathers and
 * reduce-scatters) go on in their own order meanwhile, on another communicator. */
static void replica_reduce(fsdp_t *f, fsdp_unit *u) {
    if (!(f->rep && f->rep->size > 1 && accum_last(f))) return;
    comm_wait(&u->sreq);   /* the shard group's sum first (on NCCL: the compute stream waits for it here) */
    comm_all_reduce_sum_start(f->rep, &u->rreq, u->g, (size_t)u->shard);
}

/* every unit's started reduce-scatter and replica sum, in the units' order (requests are independent: any
 * order completes them) */
void fsdp_grad_wait(fsdp_t *f) {
    for (int i = 0; i < f->n; i++) { comm_wait(&f->u[i].sreq); comm_wait(&f->u[i].rreq); }
}

void fsdp_grad_end(fsdp_t *f, int i) {
    fsdp_unit *u = &f->u[i];
    if (f->dp->size == 1) { u->full_g = NULL; replica_reduce(f, u); return; }
    if (f->reduce_last && !accum_last(f)) return; /* accumulates on in full_g */
    /* started on NCCL: the next unit's backward overlaps it, as the gathers' prefetch overlaps compute.
     * full_g is freed at once, at the same point as after a blocking call (the memory plan is the same);
     * its device memory returns to the pool in the collective's stream order (comm.h) */
    comm_reduce_scatter_start(f->dp, &u->sreq, u->g, u->full_g, (size_t)u->shard);
    mem_free(&f->E->mem, u->full_g);
    u->full_g = NULL;
    replica_reduce(f, u);
}

/* one sumsq call over every owned segment of the gradients or the master parameters: a device backend
 * waits once, not once per segment */
static double owned_sumsq(fsdp_t *f, int count_replicated, int params) {
    if (!params) fsdp_grad_wait(f);
    int total = 0;
    for (int i = 0; i < f->n; i++) total += f->u[i].nseg;
    const float **x = malloc((size_t)(total ? total : 1) * sizeof *x);
    size_t *n = malloc((size_t)(total ? total : 1) * sizeof *n);
    if (!x || !n) mem_host_failed("fsdp: the segment list", (size_t)(total ? total : 1) * (sizeof *x + sizeof *n));
    int m = 0;
    for (int i = 0; i < f->n; i++) {
        fsdp_unit *u = &f->u[i];
        for (int k = 0; k < u->nseg; k++) {
            int64_t first, count;
            if (u->seg[k].replicated && !count_replicated) continue;
            if (!owned_range(u, &u->seg[k], f->dp->rank, &first, &count)) continue;
            x[m] = (params ? u->p : u->g) + (u->seg[k].off + first - (int64_t)f->dp->rank * u->shard);
            n[m++] = (size_t)count;
        }
    }
    double s = f->E->ops->sumsq(x, n, m);
    free(x); free(n);
    return s;
}

double fsdp_grad_sumsq(fsdp_t *f, int count_replicated) { return owned_sumsq(f, count_replicated, 0); }
double fsdp_param_sumsq(fsdp_t *f) { return owned_sumsq(f, 1, 1); }

/* one fused pass per segment (its weight decay): AdamW on g·gscale; at dp = 1 it also writes the
 * compute copy the next step's layers read and zeroes the gradient for the next backward */
void fsdp_adamw(fsdp_t *f, float gscale, float lr, float beta1, float beta2, float eps, float wd, int t) {
    float bc1 = (float)(1.0 - pow(beta1, t)), bc2 = (float)(1.0 - pow(beta2, t));
    const int zero_g = f->dp->size == 1;
    fsdp_grad_wait(f);
    for (int i = 0; i < f->n; i++) {
        fsdp_unit *u = &f->u[i];
        char *pc = persistent(f) && !aliased(f) ? (char *)u->full : NULL;
        for (int k = 0; k < u->nseg; k++) {
            int64_t first, count;
            if (!owned_range(u, &u->seg[k], f->dp->rank, &first, &count)) continue;
            size_t o = (size_t)(u->seg[k].off + first - (int64_t)f->dp->rank * u->shard);
            f->E->ops->adamw_fused(u->p + o, pc ? pc + o * dtype_bytes(f->E->dtype) : NULL, u->g + o, u->m + o, u->v + o,
                                (size_t)count, gscale, zero_g, lr, beta1, beta2, eps, u->seg[k].decay ? wd : 0.0f, bc1,
                                bc2);
        }
        if (zero_g) u->g_zero = 1;
    }
}

void fsdp_unit_to_host(fsdp_t *f, int i, float *host, float *host_tmp) {
    fsdp_unit *u = &f->u[i];
    f->E->ops->to_host(host_tmp, u->p, (size_t)u->shard * sizeof(float));
    comm_all_gather_host(f->dp, host, host_tmp, (size_t)u->shard);
}
