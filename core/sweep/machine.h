/* core/sweep/machine.h — the machine model behind a sweep's predictions (docs/cost-model.md): before the first
 * mesh of a CPU sweep, the runner makes sure this host has a machine file (build/calibrate under the
 * spec's launcher, once, when there is none), and re-measures a few of its points (seconds) to say how
 * far the machine has drifted from it, so that a prediction error can be told from the load.
 * MESHSWEEP_MACHINE=FILE: train predicts with that file; the runner checks it and never writes it.
 * MESHSWEEP_CALIBRATE=0: neither calibrate nor check; =quick: calibrate with build/calibrate --quick.
 * Not the model (core/cost/), not the outputs (core/sweep/report_cost.c). */
#ifndef MESHSWEEP_SWEEP_MACHINE_H
#define MESHSWEEP_SWEEP_MACHINE_H
#include <jansson.h>
#include <limits.h>

typedef struct sweep_runner sweep_runner;

typedef struct sweep_machine {
    int have;                     /* a machine file train will predict with */
    char path[PATH_MAX];
    char name[64], calibrated[32];
    int calibrated_now;           /* this invocation made it */
    double calibrate_s;
    int checked;                  /* the drift check ran */
    double compute_ratio, comm_ratio, load;   /* now / file, and the 1-minute load average at the check */
    char note[PATH_MAX + 256];    /* what happened, for report.md */
} sweep_machine;

/* Returns 0, or SWEEP_EXIT_INTERRUPTED (Ctrl-C during a launch). Failures are notes, not errors: the
 * sweep runs without predictions. plan_only: looks, launches nothing. */
int sweep_machine_prepare(sweep_runner *R, int plan_only, sweep_machine *mi);
/* How far the drift check found the machine from its file: the larger of compute's and the collectives'
 * ratios as a fraction away (x1.30 and x0.77 are both 0.30); 0 when unchecked or neither ratio was had.
 * Beyond 0.25 the predictions' errors include the drift (report.md says so in its first paragraph). */
double sweep_machine_drift(const sweep_machine *mi);
/* summary.json's "machine" (new reference) */
json_t *sweep_machine_json(const sweep_machine *mi);
/* --dry-run: one line on stderr naming the machine model the sweep would predict with (the file read
 * and checked as a real run reads it), or why there would be none; nothing is calibrated or launched. */
void sweep_machine_dry(const sweep_runner *R, int plan_only);
#endif
