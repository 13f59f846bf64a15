/* core/run/run.h — one training run of one mesh (docs/formats.md), the engine behind build/train: configuration
 * checks, MPI and mesh setup, data, the budget gate from the memory plan, model and optimizer, the
 * step loop with evaluation and per-step metrics, peak-FLOP measurement, and the run record
 * (schema meshsweep.run/1). Also the --plan entry (the report itself is core/engine/plan). Not here: option
 * parsing, checks and --help (core/job/), checkpoint files (core/run/checkpoint).
 * Exit codes: 0 ok, 1 failed, 2 bad usage or configuration, 3 out of memory budget, 4 diverged. */
#ifndef MESHSWEEP_RUN_H
#define MESHSWEEP_RUN_H
#include <stdint.h>

#include "core/job/job.h"

/* What a finished run reports besides its record (rank 0 has the record's figures). */
typedef struct run_result {
    const char *status;        /* ok or diverged (out of budget exits with 3 before any step) */
    int steps_done;
    double step_ms_median;     /* over the steps after the excluded warm-up ones */
    double final_loss;         /* NAN when no step ran */
    uint64_t mem_peak;         /* tracked bytes, max over ranks */
} run_result;

/* 1 when this process is rank 0 of an MPI launch (by the launcher's environment) or not launched by
 * MPI: the rank that prints errors before MPI is started */
int run_env_rank0(void);
/* 1 when started by an MPI launcher (its rank variables are set): the ranks may have been given
 * different command lines, so a refusal is agreed on across them before anyone exits */
int run_env_launched(void);
/* --plan: check the configuration and print the plan (one process, no MPI). Returns the exit code. */
int run_plan(job_t *j);
/* One training run of job j (parsed, not yet built: run_train builds it for the world it finds); parse_error:
 * the command line did not parse on this rank (under a launcher the ranks agree on it before anything
 * else). Starts and finalizes MPI. Returns the exit code; on a failure after MPI has started
 * every rank leaves at once (MPI is finalized and the process exits with the code). */
int run_train(job_t *j, const char *parse_error, run_result *res);
#endif
