/* core/tune/measure.c — `--measure K`: chosen cells run on this host, interleaved, and the ranking checked
 * against them (see measure.h). */
#include "core/tune/measure.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/job/catalog.h"
#include "core/job/metrics.h"
#include "core/sweep/launch.h"

/* the cells: ranks 1..k, then k more evenly spaced over the ranks after them */
static int choose(const tune_space *S, const int *order, int k, int *out) {
    int P = S->n_priced, n = 0;
    if (P <= 2 * k) { for (int i = 0; i < P; i++) out[n++] = order[i]; return n; }
    for (int i = 0; i < k; i++) out[n++] = order[i];
    for (int i = 0; i < k; i++) out[n++] = order[k + (int)((long long)(i + 1) * (P - k) / (k + 1)) - 1];
    return n;
}

enum { MAX_ARGS = 64 };
/* mpirun --oversubscribe -np W TRAIN <the cell's train arguments but --plan, --world, --gpus-per-host> --steps S ... */
static int run_argv(const tune_space *S, const tune_cell *c, const char *train, const tune_measure_opts *o, const char *out,
                    char *buf, size_t cap, char **argv) {
    char args[2048], np[16];
    tune_cell_args(S, c, args, sizeof args);
    snprintf(np, sizeof np, "%d", S->o.world);
    int n = 0;
    size_t w = 0;
    const char *fixed[] = {"mpirun", "--oversubscribe", "-np", np, train};
    for (int i = 0; i < 5; i++) { argv[n++] = buf + w; w += (size_t)snprintf(buf + w, cap - w, "%s", fixed[i]) + 1; }
    for (char *t = strtok(args, " "); t && n < MAX_ARGS - 8; t = strtok(NULL, " ")) {
        if (!strcmp(t, "--plan")) continue;
        if (!strcmp(t, "--world") || !strcmp(t, "--gpus-per-host")) { strtok(NULL, " "); continue; }
        argv[n++] = buf + w; w += (size_t)snprintf(buf + w, cap - w, "%s", t) + 1;
        if (w >= cap) return -1;
    }
    char steps[16];
    snprintf(steps, sizeof steps, "%d", o->steps);
    const char *tail[] = {"--steps", steps, "--warmup-steps-excluded", "2", "--data", o->data, "--out", out};
    for (int i = 0; i < 8; i++) { argv[n++] = buf + w; w += (size_t)snprintf(buf + w, cap - w, "%s", tail[i]) + 1; }
    argv[n] = NULL;
    return w < cap ? 0 : -1;
}

/* one launch: its median step into m, or why it failed */
static int launch_one(const tune_space *S, const tune_cell *c, const char *train, const tune_measure_opts *o, const char *dir,
                      int cell_i, int rep, tune_measured *m) {
    static const char *const env[] = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "OPENBLAS_NUM_THREADS=1",
                                      "OMPI_MCA_mpi_yield_when_idle=1", "OMPI_MCA_btl_vader_single_copy_mechanism=none", NULL};
    char out[4200], log[4200], buf[8192], *argv[MAX_ARGS + 1];
    snprintf(out, sizeof out, "%.4000s/cell%d.run%d.json", dir, cell_i, rep);
    snprintf(log, sizeof log, "%.4000s/cell%d.run%d.log", dir, cell_i, rep);
    if (run_argv(S, c, train, o, out, buf, sizeof buf, argv)) { snprintf(m->failed, sizeof m->failed, "command too long"); return 0; }
    sweep_launch_opts lo = {.argv = argv, .log_path = log, .timeout_s = o->timeout_s, .env_default = env};
    sweep_launch_result r;
    int rc = sweep_launch(&lo, &r);
    if (rc == 0 && r.outcome == SWEEP_LAUNCH_INTERRUPTED) return 130;
    if (rc || r.outcome != SWEEP_LAUNCH_EXITED || r.exit_code) {
        snprintf(m->failed, sizeof m->failed, "%s", rc ? "could not start" : r.outcome == SWEEP_LAUNCH_TIMEOUT ? "timeout"
                                                     : r.outcome == SWEEP_LAUNCH_EXITED ? "exit code" : "signal");
        if (!rc && r.outcome == SWEEP_LAUNCH_EXITED) snprintf(m->failed, sizeof m->failed, "exit %d", r.exit_code);
        return 0;
    }
    json_t *j = json_load_file(out, 0, NULL);
    json_t *v = json_object_get(json_object_get(j, "summary"), "step_ms_median");
    const char *st = json_string_value(json_object_get(j, "status"));
    if (!j || !json_is_number(v) || !st || strcmp(st, "ok")) snprintf(m->failed, sizeof m->failed, "no ok record");
    else if (m->n_ok < TUNE_MEASURE_MAX_REPS) m->ms[m->n_ok++] = json_number_value(v);
    json_decref(j);
    return 0;
}

static void summarise(const tune_space *S, const int *order, tune_measure *M) {
    M->n_used = 0, M->best = -1;
    for (int i = 0; i < M->n; i++) {
        tune_measured *m = &M->m[i];
        if (!m->n_ok) continue;
        M->n_used++;
        m->median = metrics_median(m->ms, m->n_ok), m->lo = m->hi = m->ms[0];
        for (int r = 1; r < m->n_ok; r++) { if (m->ms[r] < m->lo) m->lo = m->ms[r]; if (m->ms[r] > m->hi) m->hi = m->ms[r]; }
        if (M->best < 0 || m->median < M->m[M->best].median) M->best = i;
    }
    long long conc = 0, disc = 0, pairs = 0;
    for (int a = 0; a < M->n; a++)
        for (int b = a + 1; b < M->n; b++) {
            const tune_measured *x = &M->m[a], *y = &M->m[b];
            if (!x->n_ok || !y->n_ok) continue;
            double p = S->cells[x->cell].step_ms - S->cells[y->cell].step_ms, q = x->median - y->median;
            pairs++;
            if (p * q > 0) conc++;
            else if (p * q < 0) disc++;
        }
    M->tau = pairs ? (double)(conc - disc) / (double)pairs : 0;
    M->winner_err = 0, M->winner_within = 0;
    if (M->best >= 0 && M->m[0].cell == order[0] && M->m[0].n_ok) {
        const tune_measured *w = &M->m[0], *b = &M->m[M->best];
        M->winner_err = w->median / b->median - 1;
        M->winner_within = M->best == 0 || w->lo <= b->hi;
    }
}

int tune_measure_run(const tune_space *S, const int *order, const tune_measure_opts *o, const char *work_dir,
                     int (*interrupted)(void), tune_measure *M, char *err, size_t errlen) {
    memset(M, 0, sizeof *M);
    if (S->o.gpu) { snprintf(err, errlen, "--measure runs the cells on this host: not with --gpu"); return 2; }
    if (o->reps < 1 || o->reps > TUNE_MEASURE_MAX_REPS) { snprintf(err, errlen, "--measure-reps must be in 1..%d", TUNE_MEASURE_MAX_REPS); return 2; }
    if (o->steps < 3) { snprintf(err, errlen, "--measure-steps must be >= 3 (two are left out of the median)"); return 2; }
    if (access(o->data, R_OK)) { snprintf(err, errlen, "--data %s: cannot read it (make data writes build/data/kjv/train.bin)", o->data); return 2; }
    char train[4200], dir[4096];
    if (catalog_exe_dir(dir, sizeof dir)) { snprintf(err, errlen, "cannot find the program's folder"); return 1; }
    snprintf(train, sizeof train, "%.4000s/train", dir);
    int *cells = malloc((2 * (size_t)o->k + 1) * sizeof *cells);
    M->m = calloc(2 * (size_t)o->k + 1, sizeof *M->m);
    if (!cells || !M->m) { free(cells); snprintf(err, errlen, "out of host memory"); return 1; }
    M->n = choose(S, order, o->k, cells), M->reps = o->reps, M->steps = o->steps;
    for (int i = 0; i < M->n; i++) M->m[i].cell = cells[i];
    free(cells);
    for (int r = 0; r < o->reps; r++)
        for (int i = 0; i < M->n; i++) {
            if (interrupted && interrupted()) return 130;
            char lab[160];
            tune_cell_label(&S->cells[M->m[i].cell], lab, sizeof lab);
            int before = M->m[i].n_ok;
            if (launch_one(S, &S->cells[M->m[i].cell], train, o, work_dir, i, r, &M->m[i]) == 130) return 130;
            int ok = M->m[i].n_ok > before;
            fprintf(stderr, "tune: measure round %d of %d, cell %d of %d (rank %d, %s): %s", r + 1, o->reps, i + 1, M->n,
                    S->cells[M->m[i].cell].rank, lab, ok ? "" : M->m[i].failed);
            if (ok) fprintf(stderr, "%.1f ms", M->m[i].ms[M->m[i].n_ok - 1]);
            fprintf(stderr, "\n");
        }
    summarise(S, order, M);
    return 0;
}

void tune_measure_free(tune_measure *M) {
    free(M->m);
    memset(M, 0, sizeof *M);
}
