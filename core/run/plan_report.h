/* core/run/plan_report.h — the --plan report of build/train (the table and the meshsweep.plan/1 record).
 * The plan itself is the engine's (core/engine/plan.h). */
#ifndef MESHSWEEP_PLAN_REPORT_H
#define MESHSWEEP_PLAN_REPORT_H
#include "core/engine/plan.h"

/* The --plan report of build/train: one table row per rank (MiB per category and peak) and the most
 * loaded rank on stdout, the record (schema meshsweep.plan/1) at out if set; with max_batch the largest
 * batch that fits the budget first; with a machine the predicted step (its "time" object). Messages go through cli_say. Returns the exit code: 0 fits,
 * 1 record not written, 2 bad configuration, 3 does not fit the budget. */
typedef struct plan_req {
    const model_config *cfg;
    int world, tp;
    model_opts mo;        /* mo.B: the batch (ignored with max_batch), mo.T: the sequence length, mo.grad_accum:
                           * --grad-accum (0: not given) */
    int global_batch;     /* --global-batch G (0: not given): the micro-batches follow from it */
    int max_batch;        /* --batch-size max: search the largest batch (needs budget) */
    uint64_t budget;      /* bytes per rank, 0: none */
    const engine_t *E;    /* the engine planned for: its compute precision is planned, printed and recorded */
    const char *out;      /* JSON record path or NULL */
    const struct cost_machine *machine;  /* predict the step on it (core/cost/predict.h); NULL: memory only */
    const char *machine_from;            /* where the machine comes from: calibrated, shipped, file */
    int ranks_per_host;                  /* --gpus-per-host; 0: the machine's default */
} plan_req;
int plan_report(const plan_req *q);

#endif
