/* core/cost/calib_run.h — the two runs of build/calibrate (bench/calibrate.c is its option table):
 *   cost_calibrate  measure this machine (the ops of the given sweep specs' steps, a GEMM grid, how
 *                   ranks share the cores, the collectives of every group size) into a machine file;
 *   cost_check      re-measure a few of a machine file's points (seconds) and report how far the
 *                   machine has drifted from it: compute and collectives, measured / file.
 * Both are collective over MPI_COMM_WORLD; MPI is started by the caller. Exit codes: 0 ok, 1 failed
 * (a message says why), 2 bad input (a spec, the machine file). */
#ifndef MESHSWEEP_COST_CALIB_RUN_H
#define MESHSWEEP_COST_CALIB_RUN_H
#include "kernels/kernels.h"
#include <stddef.h>
struct cost_workload;

typedef struct cost_calib_opts {
    const ops_t *ops;        /* the backend measured */
    const char *out;         /* the machine file (or the check's JSON; NULL: stdout) */
    const char *specs[8];    /* sweep specs whose steps are measured, each added to the workload by */
    int nspecs;
    int (*add_spec)(struct cost_workload *w, const char *spec, char *err, size_t errlen);  /* (core/sweep/calib_spec.h) */
    int quick;               /* a tiny grid and short timings (tests) */
    int verbose;
    const char *build;       /* build identity recorded in the file; NULL: the compiler */
    const char *check;       /* cost_check: the machine file to compare with */
    const char *model;       /* a run whose step is measured besides the specs' (NULL: none) */
    int tp, batch, seq_len;
    int force;               /* calibrate on a loaded host anyway (recorded in the file) */
    int no_collectives;      /* measure none: the file gets a placeholder, said so in its sources */
} cost_calib_opts;

int cost_calibrate(const cost_calib_opts *o);
int cost_check(const cost_calib_opts *o);
#endif
