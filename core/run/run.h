/* core/run/run.h — one training run of one mesh (docs/formats.md), the engine behind build/train: configuration
 * checks, MPI and mesh setup, data, the budget gate from the memory plan, model and optimizer, the
 * step loop with evaluation and per-step metrics, peak-FLOP measurement, and the run record
 * (schema meshsweep.run/1). Also the --plan entry (the report itself is core/engine/plan). Not here: option
 * parsing and --help (bench/train.c holds the option table), checkpoint files (core/run/checkpoint).
 * Exit codes: 0 ok, 1 failed, 2 bad usage or configuration, 3 out of memory budget, 4 diverged. */
#ifndef MESHSWEEP_RUN_H
#define MESHSWEEP_RUN_H
#include <stdint.h>

/* What build/train's options set; strings point into argv or static text. */
typedef struct run_cfg {
    const char *model, *batch, *data, *eval_data, *init, *save, *out, *mem_budget, *schedule, *backend, *comm, *dtype,
               *sp_activations;
    const char *ckpt;                /* --checkpoint-activations none|full|every:K (the bare flag: full) */
    const char *accum_reduce;        /* --accum-reduce each|last */
    const char *mem_reserve, *gpu;   /* --mem-reserve SIZE, --gpu NAME (core/engine/gpus.h) */
    const char *machine;             /* --machine NAME|FILE: the step-time model (core/cost/predict.h) */
    int gpus_per_host;               /* --gpus-per-host N: ranks per host of a --plan (0: the machine's default) */
    int tp, seq_len, steps, warmup, eval_every, eval_batches, plan, world, sp, prefetch, excluded, log_every;
    int grad_accum, global_batch;    /* --grad-accum N, --global-batch G (0: not given; given values are checked) */
    long long seed;
    double lr, weight_decay, beta1, beta2, adam_eps, grad_clip, min_lr_ratio, peak_tflops;
    int help;
    int comm_set;    /* --comm was given (else nccl is chosen for multi-rank CUDA runs) */
    int world_set;   /* --world was given */
    int grad_accum_set, global_batch_set; /* --grad-accum, --global-batch were given */
    const char *parse_error; /* the command line did not parse on this rank (main): under a launcher the
                                ranks agree on it before anything else (run_train) */
} run_cfg;

/* What a finished run reports besides its record (rank 0 has the record's figures). */
typedef struct run_result {
    const char *status;        /* ok or diverged (out of budget exits with 3 before any step) */
    int steps_done;
    double step_ms_median;     /* over the steps after the excluded warm-up ones */
    double final_loss;         /* NAN when no step ran */
    uint64_t mem_peak;         /* tracked bytes, max over ranks */
} run_result;

/* build/train's defaults */
void run_cfg_defaults(run_cfg *c);
/* 1 when this process is rank 0 of an MPI launch (by the launcher's environment) or not launched by
 * MPI: the rank that prints errors before MPI is started */
int run_env_rank0(void);
/* 1 when started by an MPI launcher (its rank variables are set): the ranks may have been given
 * different command lines, so a refusal is agreed on across them before anyone exits */
int run_env_launched(void);
/* --plan: check the configuration and print the plan (one process, no MPI). Returns the exit code. */
int run_plan(const run_cfg *c);
/* One training run: starts and finalizes MPI. Returns the exit code; on a failure after MPI has started
 * every rank leaves at once (MPI is finalized and the process exits with the code). */
int run_train(const run_cfg *c, run_result *res);
#endif
