/* core/cost/timeline.c — the three-clock replay of core/cost/timeline.h. Times are microseconds inside,
 * milliseconds in the result. */
#include "core/cost/timeline.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int host_of(const cost_place *p, int r) { return p->ranks_per_host > 0 ? r / p->ranks_per_host : 0; }

/* the i-th rank of this rank's group (core/engine/mesh.h): TP consecutive, DP (the shard group) stride tp
 * within the replica, the replica group stride S·tp, the world all */
static int group_member(const cost_place *p, int group, int i, int S) {
    int tp = p->tp, tr = p->rank % tp, dr = p->rank / tp;
    switch (group) {
    case COST_GROUP_TP: return dr * tp + i;
    case COST_GROUP_DP: return (dr / S * S + i) * tp + tr;
    case COST_GROUP_REPLICA: return (i * S + dr % S) * tp + tr;
    default: return i;
    }
}

void cost_group_shape(const cost_place *p, int group, int *ranks, int *ranks_per_host, int *host_ranks) {
    int tp = p->tp, dp = p->world / p->tp, me = host_of(p, p->rank);
    int R = p->replicate > 1 && dp % p->replicate == 0 ? p->replicate : 1, S = dp / R;
    int n = group == COST_GROUP_TP ? tp : group == COST_GROUP_DP ? S : group == COST_GROUP_REPLICA ? R : p->world, local = 0;
    for (int i = 0; i < n; i++) local += host_of(p, group_member(p, group, i, S)) == me;
    int hr = 0;
    for (int r = 0; r < p->world; r++) hr += host_of(p, r) == me;
    *ranks = n; *ranks_per_host = local; *host_ranks = hr;
}

typedef struct pend { uint32_t id; double v; int group, kind; } pend;

/* An op's cost is a function of its event's kind, dimensions and work alone (cost_machine_op_us), and a step
 * repeats a few dozen shapes thousands of times: each replay looks each shape up once and keeps it here
 * (the same double, so the same sums to the last bit). Full: the rest are looked up every time. */
enum { MEMO_CAP = 2048 };
typedef struct memo { int used; uint8_t kind; int64_t dim[5]; double flops, bytes, us; } memo;

static double op_us(const cost_machine *m, const cost_event *e, memo *tab, int *n) {
    if (!tab) return cost_machine_op_us(m, e);
    uint64_t h = e->kind;
    for (int k = 0; k < 5; k++) h = (h ^ (uint64_t)e->dim[k]) * 0x100000001B3ull;
    size_t i = (size_t)((h * 0x9E3779B97F4A7C15ull) >> 53) & (MEMO_CAP - 1);
    for (; tab[i].used; i = (i + 1) & (MEMO_CAP - 1)) {
        const memo *q = &tab[i];
        if (q->kind == e->kind && !memcmp(q->dim, e->dim, sizeof q->dim) && q->flops == e->flops && q->bytes == e->bytes)
            return q->us;
    }
    double us = cost_machine_op_us(m, e);
    if (2 * (*n + 1) <= MEMO_CAP) {
        tab[i] = (memo){.used = 1, .kind = e->kind, .flops = e->flops, .bytes = e->bytes, .us = us};
        memcpy(tab[i].dim, e->dim, sizeof tab[i].dim);
        ++*n;
    }
    return us;
}

static double maxd(double a, double b) { return a > b ? a : b; }

int cost_timeline(const cost_trace *t, const cost_machine *m, const cost_place *p, cost_result *r, char *err,
                  size_t errlen) {
    memset(r, 0, sizeof *r);
    int shape[COST_NGROUPS][3];
    for (int g = 0; g < COST_NGROUPS; g++) cost_group_shape(p, g, &shape[g][0], &shape[g][1], &shape[g][2]);
    /* ops as the table has them, on this many ranks of the host, and as a step's sequence of ops runs them */
    double share = cost_machine_op_scale(m, shape[COST_GROUP_WORLD][2]) * (m->sequence_factor > 0 ? m->sequence_factor : 1);
    r->share = share;
    double th = 0, tc = 0, tm = 0;   /* host, compute stream, communication stream (us) */
    pend *pd = NULL;
    size_t npd = 0, cap = 0;
    memo *tab = calloc(MEMO_CAP, sizeof *tab);   /* NULL (no memory): every op looked up */
    int nmemo = 0;
    /* the ops' sums in locals, in microseconds, by op kind: the classes are summed from the kinds at the end
     * (a class sum per event, through a call and a division, was a third of a search's time) */
    double op_sum[COST_NOPS] = {0}, compute_us = 0, issue_us = 0, overlap_us = 0;
    int n_ops = 0;
    const cost_event *prev = NULL;
    double prev_us = 0;
    for (size_t i = 0; i < t->n; i++) {
        const cost_event *e = &t->ev[i];
        if (e->type == COST_EV_OP) {
            /* runs of one shape (a permutation's copies, one per block) skip even the look-up */
            if (!prev || prev->kind != e->kind || memcmp(prev->dim, e->dim, sizeof e->dim) || prev->flops != e->flops ||
                prev->bytes != e->bytes)
                prev_us = op_us(m, e, tab, &nmemo);
            prev = e;
            double d = prev_us * share;
            op_sum[e->kind] += d;
            compute_us += d;
            n_ops++;
            if (m->async) {             /* the op reaches the device once the host has issued it */
                th += m->launch_us;
                issue_us += m->launch_us;
                double s0 = maxd(tc, th), dd = d;
                if (m->overlap && m->overlap_slowdown > 0 && tm > s0) {
                    /* slower while the collective runs, at full speed after it ends */
                    double slow = 1 + m->overlap_slowdown;
                    dd = s0 + d * slow <= tm ? d * slow : (tm - s0) + (d - (tm - s0) / slow);
                    overlap_us += dd - d;
                    compute_us += dd - d;
                }
                tc = s0 + dd;
                if (e->host) th = maxd(th, tc);          /* the host waits for the result */
            } else {
                tc = th = maxd(th, tc) + d;
            }
            continue;
        }
        if (e->type == COST_EV_WAIT) {
            size_t k = 0;
            while (k < npd && pd[k].id != e->id) k++;
            if (k == npd) continue;   /* a wait for a collective that needed no communication */
            if (m->overlap) tc = maxd(tc, pd[k].v);
            else tc = th = maxd(th, tc) + pd[k].v;
            pd[k] = pd[--npd];
            continue;
        }
        int g = e->group < COST_NGROUPS ? e->group : COST_GROUP_WORLD;
        int n = e->ranks > 0 ? e->ranks : shape[g][0];
        int flags = (e->host ? COST_COLL_HOST : 0) | (e->type == COST_EV_START ? COST_COLL_STARTED : 0);
        double d = cost_machine_coll_us(m, e->kind, e->bytes, n, shape[g][1], shape[g][2], flags, err, errlen);
        if (d < 0) { free(pd); free(tab); return -1; }
        r->comm_ms += d / 1e3;
        r->comm_by_ms[g][e->kind] += d / 1e3;
        r->n_colls++;
        double v = d;
        if (e->host) {                        /* MPI on host memory: the host runs it (its data came to the host before) */
            if (m->async) th += d;
            else tc = th = maxd(th, tc) + d;
            continue;
        }
        if (m->overlap) {
            double start = maxd(maxd(tm, tc), th);   /* ordered after everything issued to the compute stream */
            tm = start + d;
            if (e->type == COST_EV_COLL) tc = tm;    /* the compute stream waits for its end */
            v = tm;
        } else if (e->type == COST_EV_COLL) {
            tc = th = maxd(th, tc) + d;
        }
        if (e->type == COST_EV_START) {
            if (npd == cap) {
                pend *q = realloc(pd, (cap = cap ? cap * 2 : 16) * sizeof *q);
                if (!q) { free(pd); free(tab); snprintf(err, errlen, "out of host memory"); return -1; }
                pd = q;
            }
            pd[npd++] = (pend){e->id, v, g, e->kind};
        }
    }
    free(pd);
    free(tab);
    for (int k = 0; k < COST_NOPS; k++) {
        r->op_ms[k] = op_sum[k] / 1e3;
        r->class_ms[cost_op_class_of((cost_op_kind)k)] += op_sum[k] / 1e3;
    }
    r->compute_ms = compute_us / 1e3, r->host_issue_ms = issue_us / 1e3, r->overlap_ms = overlap_us / 1e3, r->n_ops = n_ops;
    double end = maxd(maxd(th, tc), tm);
    r->step_ms = end / 1e3;
    r->exposed_comm_ms = r->step_ms - r->compute_ms > 0 ? r->step_ms - r->compute_ms : 0;
    return 0;
}
