/* core/cost/machine.c — the cost of one op and of one collective on a machine model (see machine.h):
 * table look-ups with their interpolation, and the fallbacks when a machine has no measurement.
 * Not the JSON (core/cost/machine_json.c), not the shipped GPU models (core/cost/machine_gpus.c). */
#include "core/cost/machine.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cost_machine_free(cost_machine *m) {
    free(m->gemm);
    free(m->coll);
    json_decref(m->sources);
    memset(m, 0, sizeof *m);
}

int cost_machine_copy(cost_machine *dst, const cost_machine *src) {
    *dst = *src;
    dst->gemm = NULL; dst->coll = NULL; dst->sources = NULL;
    if (src->ngemm) {
        dst->gemm = malloc((size_t)src->ngemm * sizeof *dst->gemm);
        if (!dst->gemm) return -1;
        memcpy(dst->gemm, src->gemm, (size_t)src->ngemm * sizeof *dst->gemm);
    }
    if (src->ncoll) {
        dst->coll = malloc((size_t)src->ncoll * sizeof *dst->coll);
        if (!dst->coll) { free(dst->gemm); dst->gemm = NULL; return -1; }
        memcpy(dst->coll, src->coll, (size_t)src->ncoll * sizeof *dst->coll);
    }
    dst->sources = src->sources ? json_deep_copy(src->sources) : NULL;
    return 0;
}

double cost_curve_at(const cost_curve *c, double x) {
    int n = c->n;
    if (n <= 0) return 0;
    if (n == 1 || x <= c->x[0]) {
        if (n == 1 || x >= c->x[0]) return c->us[0] * (c->x[0] > 0 ? x / c->x[0] : 1);
        /* below the smallest point: the first segment's line, at least 0, at most the first point */
        double slope = (c->us[1] - c->us[0]) / (c->x[1] - c->x[0]);
        double y = c->us[0] + slope * (x - c->x[0]);
        return y < 0 ? 0 : y > c->us[0] ? c->us[0] : y;
    }
    if (x >= c->x[n - 1]) return c->us[n - 1] * x / c->x[n - 1];
    int lo = 0, hi = n - 1;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (c->x[mid] <= x) lo = mid; else hi = mid;
    }
    double f = (x - c->x[lo]) / (c->x[hi] - c->x[lo]);
    return c->us[lo] + f * (c->us[hi] - c->us[lo]);
}

/* fraction of peak at a GEMM of `flops`: piecewise linear in log(flops) between the table's points */
static double gemm_eff(const cost_machine *m, double flops) {
    if (m->n_eff <= 0) return 1;
    if (flops <= m->eff_flops[0]) return m->eff[0];
    for (int i = 1; i < m->n_eff; i++)
        if (flops <= m->eff_flops[i]) {
            double a = log(m->eff_flops[i - 1]), b = log(m->eff_flops[i]);
            double f = (log(flops) - a) / (b - a);
            return m->eff[i - 1] + f * (m->eff[i] - m->eff[i - 1]);
        }
    return m->eff[m->n_eff - 1];
}

static double ldist(int64_t a, int64_t b) { return fabs(log((double)(a > 0 ? a : 1)) - log((double)(b > 0 ? b : 1))); }

/* A measured GEMM table: the exact shape if measured, else the rate (FLOP/us) of the nearest measured
 * shapes of the same op (same transposes; any op if it has none), weighted by 1/distance² in
 * log m + log n + log k, applied to this GEMM's FLOPs. */
static double gemm_table_us(const cost_machine *m, const cost_event *e) {
    enum { K = 4 };
    int best[K];
    double bd[K];
    for (int pass = 0; pass < 2; pass++) {
        int nb = 0;
        for (int i = 0; i < m->ngemm; i++) {
            const cost_gemm_point *p = &m->gemm[i];
            if (pass == 0 && p->op != e->kind) continue;
            double d = ldist(p->m, e->dim[0]) + ldist(p->n, e->dim[1]) + ldist(p->k, e->dim[2]);
            if (d == 0 && p->op == e->kind) return p->us;
            int slot;
            if (nb < K) slot = nb++;
            else if (d < bd[K - 1]) slot = K - 1;
            else continue;
            bd[slot] = d; best[slot] = i;
            for (int j = slot; j > 0 && bd[j] < bd[j - 1]; j--) {
                double td = bd[j]; bd[j] = bd[j - 1]; bd[j - 1] = td;
                int ti = best[j]; best[j] = best[j - 1]; best[j - 1] = ti;
            }
        }
        if (nb == 0) continue;
        double wsum = 0, rate = 0;
        for (int j = 0; j < nb; j++) {
            const cost_gemm_point *p = &m->gemm[best[j]];
            double pf = 2.0 * (double)p->m * (double)p->n * (double)p->k;
            double w = 1.0 / (bd[j] * bd[j] + 1e-9);
            rate += w * (pf / p->us);
            wsum += w;
        }
        return e->flops / (rate / wsum);
    }
    return -1;
}

double cost_machine_op_us(const cost_machine *m, const cost_event *e) {
    cost_op_kind k = (cost_op_kind)e->kind;
    double peak_per_us = m->peak_tflops * 1e6; /* FLOP per microsecond */
    if (cost_op_is_gemm(k)) {
        if (e->flops <= 0) return 0;
        double t = m->ngemm ? gemm_table_us(m, e) : -1;
        return t >= 0 ? t : e->flops / (peak_per_us * gemm_eff(m, e->flops));
    }
    int attn = k == COST_ATTN_FWD || k == COST_ATTN_BWD;
    double x = attn ? e->flops : e->bytes;
    if (m->ops[k].n > 0) return cost_curve_at(&m->ops[k], x);
    if (attn) {
        double eff = k == COST_ATTN_BWD && m->attention_bwd_efficiency > 0 ? m->attention_bwd_efficiency : m->attention_efficiency;
        return e->flops / (peak_per_us * eff);
    }
    if (k == COST_TO_HOST || k == COST_FROM_HOST) return e->bytes / (m->host_link_gbs * 1e3);
    return e->bytes / (m->memory_gbs * m->memory_efficiency * 1e3);
}

double cost_machine_share(const cost_machine *m, int host_ranks) {
    if (m->cores_per_host <= 0 || host_ranks <= m->cores_per_host) return 1.0;
    double f = (double)host_ranks / ((double)m->cores_per_host * m->oversubscribed_efficiency);
    return f > 1 ? f : 1.0;
}

double cost_machine_op_scale(const cost_machine *m, int host_ranks) {
    int cal = m->calibrated_ranks > 0 ? m->calibrated_ranks : 1;
    return cost_machine_share(m, host_ranks) / cost_machine_share(m, cal);
}

double cost_busbw_factor(int kind, int n) {
    if (n <= 1) return 0;
    if (kind == COMM_ALL_REDUCE) return 2.0 * (n - 1) / n;
    if (kind == COMM_BROADCAST) return 1.0;
    return (double)(n - 1) / n;
}
int cost_ring_steps(int kind, int n) {
    if (n <= 1) return 0;
    return kind == COMM_ALL_REDUCE ? 2 * (n - 1) : kind == COMM_BROADCAST ? 1 : n - 1;
}

static double coll_time(const cost_coll *c, double bytes, int n) {
    if (c->npts > 0) {
        cost_curve cv;
        cv.n = c->npts;
        memcpy(cv.x, c->bytes, (size_t)c->npts * sizeof(double));
        memcpy(cv.us, c->us, (size_t)c->npts * sizeof(double));
        return cost_curve_at(&cv, bytes);
    }
    double bw = c->busbw_gbs;
    if (c->half_bytes > 0 && bytes > 0) bw /= 1 + sqrt(c->half_bytes / bytes);
    return c->latency_us + c->latency_per_step_us * cost_ring_steps(c->kind, n) +
           bytes * cost_busbw_factor(c->kind, n) / (bw * 1e3);
}

/* The entry of one kind, transport and start mode: the exact group shape at the same job ranks on the
 * host; then the same shape measured with another number of ranks on the host (scaled by how the ranks
 * share the cores); then the machine's entry for the scope; then the measured group size nearest to this
 * one (of the same scope if there is one), its latency per ring step and its bus bandwidth applied to
 * this group's steps and bytes. -1 when the machine has no entry of that kind. */
static double find(const cost_machine *m, int kind, double bytes, int ranks, int ranks_per_host, int host_ranks,
                   int host, int started) {
    int scope = ranks_per_host >= ranks ? COST_SCOPE_INTRA : COST_SCOPE_INTER;
    const cost_coll *exact = NULL, *shape = NULL, *dflt = NULL, *in = NULL;   /* in: the host's own entry */
    for (int i = 0; i < m->ncoll; i++) {
        const cost_coll *c = &m->coll[i];
        if (c->kind != kind || c->host != host || c->started != started) continue;
        if (c->ranks == 0 && c->scope == COST_SCOPE_INTRA) in = c;
        if (c->ranks == ranks && c->ranks_per_host == ranks_per_host) {
            if (c->host_ranks == 0 || c->host_ranks == host_ranks) exact = c;
            else if (!shape || abs(c->host_ranks - host_ranks) < abs(shape->host_ranks - host_ranks)) shape = c;
        } else if (c->ranks == 0 && c->scope == scope) {
            dflt = c;
        }
    }
    if (exact) return coll_time(exact, bytes, ranks);
    if (shape) return coll_time(shape, bytes, ranks) * cost_machine_share(m, host_ranks) / cost_machine_share(m, shape->host_ranks);
    if (dflt && scope == COST_SCOPE_INTER && m->nic_per_rank && ranks_per_host > 1 && dflt->npts == 0) {
        /* k ranks per host, each with its own port: k rings over the hosts at once, as fast as the host's
         * own links let them (nccl-tests: a node's busbw across nodes is about its total NIC bandwidth) */
        cost_coll k = *dflt;
        k.busbw_gbs = dflt->busbw_gbs * ranks_per_host;
        if (in && in->npts == 0 && in->busbw_gbs < k.busbw_gbs) k.busbw_gbs = in->busbw_gbs;
        return coll_time(&k, bytes, ranks);
    }
    if (dflt) return coll_time(dflt, bytes, ranks);
    const cost_coll *near = NULL;
    double best = 0;
    for (int i = 0; i < m->ncoll; i++) {
        const cost_coll *c = &m->coll[i];
        if (c->kind != kind || c->host != host || c->started != started || c->ranks < 2) continue;
        double d = fabs(log((double)c->ranks / ranks)) + (c->scope != scope ? 100 : 0);
        if (!near || d < best) { near = c; best = d; }
    }
    if (!near) return -1;
    double lat = (near->latency_us + near->latency_per_step_us * cost_ring_steps(kind, near->ranks)) *
                 cost_ring_steps(kind, ranks) / cost_ring_steps(kind, near->ranks);
    double t = lat + bytes * cost_busbw_factor(kind, ranks) / (near->busbw_gbs * 1e3);
    return near->host_ranks ? t * cost_machine_share(m, host_ranks) / cost_machine_share(m, near->host_ranks) : t;
}

/* Host-memory entries first for host collectives, started entries first for started ones; then the
 * ordinary (device, blocking) entries. */
double cost_machine_coll_us(const cost_machine *m, int kind, double bytes, int ranks, int ranks_per_host,
                            int host_ranks, int flags, char *err, size_t errlen) {
    if (ranks <= 1) return 0;
    int host = (flags & COST_COLL_HOST) != 0, started = (flags & COST_COLL_STARTED) != 0;
    for (int h = host; h >= 0; h--)
        for (int s = started; s >= 0; s--) {
            double t = find(m, kind, bytes, ranks, ranks_per_host, host_ranks, h, s);
            if (t >= 0) return t;
        }
    snprintf(err, errlen, "machine %s has no %s model for groups of %d ranks (%d per host)%s", m->name,
             comm_kind_names[kind], ranks, ranks_per_host, host ? " on host memory" : "");
    return -1;
}
