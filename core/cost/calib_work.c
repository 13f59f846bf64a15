/* core/cost/calib_work.c — what a calibration measures: the distinct ops and collectives of the steps
 * given to it (recorded from the engine, core/cost/trace.h; a sweep spec's steps come from
 * core/sweep/calib_spec.c), and a small grid of GEMM shapes for the shapes no spec has (see calibrate.h). */
#include "core/cost/calibrate.h"
#include "core/engine/plan.h"
#include "core/formats/config.h"
#include "core/job/catalog.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cost_workload_free(cost_workload *w) {
    free(w->ops); free(w->colls); free(w->seq); free(w->ends);
    memset(w, 0, sizeof *w);
}

static int same(const cost_event *a, const cost_event *b, int coll) {
    if (a->kind != b->kind) return 0;
    if (coll) return a->ranks == b->ranks && a->bytes == b->bytes;
    return !memcmp(a->dim, b->dim, sizeof a->dim);
}

/* room for `need` elements of `size` bytes in *v (capacity *cap, doubled from 256) */
static int grow(void **v, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    void *q = realloc(*v, c * size);
    if (!q) return -1;
    *v = q; *cap = c;
    return 0;
}

static int add(cost_event **v, size_t *n, size_t *cap, const cost_event *e, int coll) {
    for (size_t i = 0; i < *n; i++) if (same(&(*v)[i], e, coll)) return 0;
    if (grow((void **)v, cap, *n + 1, sizeof **v)) return -1;
    (*v)[(*n)++] = *e;
    return 0;
}

int cost_workload_add(cost_workload *w, const cost_trace *t, int whole) {
    if (whole) {
        size_t cs = (size_t)w->capsteps;
        if (grow((void **)&w->ends, &cs, (size_t)w->nsteps + 1, sizeof *w->ends)) return -1;
        w->capsteps = (int)cs;
        for (size_t i = 0; i < t->n; i++) {
            if (t->ev[i].type != COST_EV_OP) continue;
            if (grow((void **)&w->seq, &w->capseq, w->nseq + 1, sizeof *w->seq)) return -1;
            w->seq[w->nseq++] = t->ev[i];
        }
        w->ends[w->nsteps++] = w->nseq;
    }
    for (size_t i = 0; i < t->n; i++) {
        const cost_event *e = &t->ev[i];
        if (e->type == COST_EV_WAIT) continue;
        int rc = e->type == COST_EV_OP ? add(&w->ops, &w->nops, &w->capops, e, 0)
                                       : add(&w->colls, &w->ncolls, &w->capcolls, e, 1);
        if (rc) return -1;
    }
    return 0;
}

int cost_workload_add_gemm_grid(cost_workload *w, int64_t lo, int64_t hi) {
    static const int kinds[] = {COST_GEMM_FWD, COST_GEMM_DIN, COST_GEMM_DW};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
        for (int64_t a = lo; a <= hi; a *= 4)
            for (int64_t b = lo; b <= hi; b *= 4)
                for (int64_t c = lo; c <= hi; c *= 4) {
                    cost_event e = {.type = COST_EV_OP, .kind = (uint8_t)kinds[k], .dim = {a, b, c, 0, 0}};
                    if (add(&w->ops, &w->nops, &w->capops, &e, 0)) return -1;
                }
    return 0;
}

int cost_workload_add_run(cost_workload *w, const char *model, int world, int tp, int batch, int seq_len, dtype_t dtype,
                          int cuda, char *err, size_t errlen) {
    model_config cfg;
    char e2[1024];
    if (catalog_model(&cfg, model, e2, sizeof e2) || config_validate(&cfg, e2, sizeof e2)) {
        snprintf(err, errlen, "--model %s: %s", model, e2);
        return -1;
    }
    model_opts o = {.B = batch, .T = seq_len, .sequence_parallel = 1, .sp_local = 1, .prefetch = 1,
                    .attention_flash = cuda};
    cost_trace t = {0};
    int ranks[2] = {0, world - 1}, rc = 0;
    for (int k = 0; k < 2 && !rc; k++) {
        if (cost_record_step(&cfg, world, tp, ranks[k], dtype, &o, &t, e2, sizeof e2)) { snprintf(err, errlen, "%s", e2); rc = -1; }
        else if (cost_workload_add(w, &t, k == 0)) { snprintf(err, errlen, "out of host memory"); rc = -1; }
    }
    cost_trace_free(&t);
    return rc;
}
