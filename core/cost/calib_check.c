/* core/cost/calib_check.c — how far this machine is from its machine file now (see calib_run.h): a few
 * of the file's GEMMs, on every rank at once as a step computes and as the calibration timed them (against
 * the file's time scaled by the model's share for this many ranks), and its collectives of the whole world, measured again as the
 * calibration measured them; the ratios measured / predicted from the file, their geometric means for compute and for collectives,
 * and the load average, as one JSON record (schema meshsweep.machine_check/1). A shared machine's
 * prediction error then says how much of it is the load and how much the model. */
#include "core/cost/calib_run.h"
#include "core/cost/calibrate.h"
#include "core/engine/comm.h"
#include "core/common/files.h"
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* the GEMMs of the file at the quartiles of their times (of those of at least 20 us, stable enough to compare,
 * or of all when none is that long) */
static int pick_gemms(const cost_machine *m, int *idx, int cap) {
    int n = 0, any20 = 0;
    for (int i = 0; i < m->ngemm; i++) any20 |= m->gemm[i].us >= 20;
    for (int q = 1; q <= 3 && n < cap; q++) {
        int best = -1;
        double want = 0;
        double v[4096];
        int nv = 0;
        for (int i = 0; i < m->ngemm && nv < 4096; i++) if (m->gemm[i].us >= 20 || !any20) v[nv++] = m->gemm[i].us;
        if (!nv) break;
        for (int i = 1; i < nv; i++) for (int j = i; j > 0 && v[j] < v[j - 1]; j--) { double t = v[j]; v[j] = v[j - 1]; v[j - 1] = t; }
        want = v[(nv - 1) * q / 4];
        for (int i = 0; i < m->ngemm; i++) if (m->gemm[i].us == want) { best = i; break; }
        int dup = 0;
        for (int j = 0; j < n; j++) dup |= idx[j] == best;
        if (best >= 0 && !dup) idx[n++] = best;
    }
    return n;
}

static double gmean(const double *r, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += log(r[i]);
    return n ? exp(s / n) : NAN;
}

int cost_check(const cost_calib_opts *o) {
    int rank, world, lr = 0, ls = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    comm_local_rank(&lr, &ls);
    char err[2048];
    cost_machine m;
    int bad = cost_machine_load(o->check, &m, err, sizeof err) != 0;
    if (bad) { if (rank == 0) fprintf(stderr, "calibrate: %s\n", err); return 2; }
    json_t *pts = json_array();
    double cr[8], mr[8];
    int nc = 0, nm = 0;
    /* compute as a step runs it: every rank of the host at once, against the file's time scaled to this many
     * ranks (what a prediction would use) */
    int gi[3], ng = pick_gemms(&m, gi, 3);
    double share = cost_machine_op_scale(&m, ls);
    for (int i = 0; i < ng; i++) {
        const cost_gemm_point *p = &m.gemm[gi[i]];
        cost_event e = {.type = COST_EV_OP, .kind = (uint8_t)p->op, .dim = {p->m, p->n, p->k, 0, 0}};
        cost_op_work((cost_op_kind)e.kind, e.dim, (int)o->ops->cbytes, &e.flops, &e.bytes);
        cost_calib_idle_barrier();
        double us = cost_calib_together_us(o->ops, &e, COST_CALIB_OP_MS, 3);   /* as the calibration timed it */
        if (us < 0) continue;
        cr[nc++] = us / (p->us * share);
        if (rank == 0)
            json_array_append_new(pts, json_pack("{s:s, s:[I,I,I], s:f, s:f, s:f}", "op", cost_op_names[p->op], "shape",
                                                 (json_int_t)p->m, (json_int_t)p->n, (json_int_t)p->k, "file_us", p->us,
                                                 "predicted_us", p->us * share, "now_us", us));
    }
    cost_calib_idle_barrier();
    /* collectives of the whole world at a middle and the largest size the file's all-gather measured */
    double sz[2] = {0, 0};
    for (int i = 0; i < m.ncoll && !sz[0]; i++) {
        const cost_coll *c = &m.coll[i];
        if (c->ranks == world && c->kind == COMM_ALL_GATHER && !c->host && c->npts >= 2) {
            sz[0] = c->bytes[c->npts / 2];
            sz[1] = c->bytes[c->npts - 1];
        }
    }
    if (sz[0] > 0 && world > 1) {
        cost_workload w = {0};
        cost_machine t;
        memset(&t, 0, sizeof t);
        if (cost_calib_collectives(o->ops, &w, sz, sz[1] > sz[0] ? 2 : 1, 4, &t, 0, err, sizeof err) == 0) {
            for (int j = 0; j < t.ncoll; j++) {
                const cost_coll *now = &t.coll[j];
                if (now->ranks != world) continue;
                for (int i = 0; i < m.ncoll; i++) {
                    const cost_coll *c = &m.coll[i];
                    if (c->kind != now->kind || c->started != now->started || c->ranks != world || c->host || !c->npts) continue;
                    cost_curve cv = {.n = c->npts};
                    memcpy(cv.x, c->bytes, (size_t)c->npts * sizeof(double));
                    memcpy(cv.us, c->us, (size_t)c->npts * sizeof(double));
                    for (int k = 0; k < now->npts && nm < 8; k++) {
                        if (now->bytes[k] == 8) continue;
                        double file_us = cost_curve_at(&cv, now->bytes[k]);
                        mr[nm++] = now->us[k] / file_us;
                        if (rank == 0)
                            json_array_append_new(pts, json_pack("{s:s, s:i, s:f, s:f, s:f}", "collective",
                                                                 comm_kind_names[c->kind], "ranks", world, "bytes",
                                                                 now->bytes[k], "file_us", file_us, "now_us", now->us[k]));
                    }
                    break;
                }
            }
        }
        cost_machine_free(&t);
    }
    int rc = 0;
    if (rank == 0) {
        double l[3] = {-1, -1, -1};
        FILE *f = fopen("/proc/loadavg", "r");
        if (f) { if (fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) != 3) l[0] = -1; fclose(f); }
        char date[32];
        time_t now = time(NULL);
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        double cg = gmean(cr, nc), mg = gmean(mr, nm);
        /* a ratio that cannot be had is said in words, never printed as nan */
        char ct[96], mt[160];
        if (isfinite(cg)) snprintf(ct, sizeof ct, "compute x%.2f", cg);
        else snprintf(ct, sizeof ct, "compute not compared (no GEMM of the file could be timed)");
        if (isfinite(mg)) snprintf(mt, sizeof mt, "collectives x%.2f", mg);
        else if (world == 1) snprintf(mt, sizeof mt, "collectives not compared (one rank has none)");
        else snprintf(mt, sizeof mt, "collectives not compared (the file has no collective of %d ranks)", world);
        json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:[f,f,f], s:o, s:o, s:o}", "schema", "meshsweep.machine_check/1",
                              "machine", o->check, "calibrated", m.calibrated[0] ? m.calibrated : "", "date", date,
                              "load", l[0], l[1], l[2], "compute_ratio", isfinite(cg) ? json_real(cg) : json_null(),
                              "comm_ratio", isfinite(mg) ? json_real(mg) : json_null(), "points", pts);
        if (!isfinite(mg)) json_object_set_new(j, "comm_note", json_string(mt));
        if (!isfinite(cg)) json_object_set_new(j, "compute_note", json_string(ct));
        pts = NULL;
        fprintf(stderr, "calibrate: machine check against %s (calibrated %s): now %s, %s (load %.2f)\n", o->check,
                m.calibrated, ct, mt, l[0]);
        if (o->out) rc = files_write_json(o->out, j, err, sizeof err) ? 1 : 0;
        else { char *s = json_dumps(j, JSON_INDENT(2)); if (s) puts(s); free(s); }
        if (rc) fprintf(stderr, "calibrate: %s\n", err);
        json_decref(j);
    }
    json_decref(pts);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    cost_machine_free(&m);
    return rc;
}
