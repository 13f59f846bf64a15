/* core/job/options.h — what build/train's options set (job_opts) and the one option table that sets it
 * (core/job/options.c): the parser, --help and the argv a sweep launches all read this table; job.h puts
 * it in a job_t. */
#ifndef MESHSWEEP_JOB_OPTIONS_H
#define MESHSWEEP_JOB_OPTIONS_H
#include <stddef.h>
#include <stdio.h>

#include "core/common/cli.h"

/* What build/train's options set, as given (the option table's fields); strings point into argv or
 * static text. */
typedef struct job_opts {
    const char *model, *batch, *data, *eval_data, *init, *save, *out, *mem_budget, *schedule, *backend, *comm, *dtype,
               *sp_activations;
    const char *ckpt;                /* --checkpoint-activations none|full|every:K (the bare flag: full) */
    const char *accum_reduce;        /* --accum-reduce each|last */
    const char *deterministic;       /* --deterministic on|off */
    const char *mem_reserve, *gpu;   /* --mem-reserve SIZE, --gpu NAME (core/job/catalog.h) */
    const char *machine;             /* --machine NAME|FILE: the step-time model (core/cost/predict.h) */
    int gpus_per_host;               /* --gpus-per-host N: ranks per host of a --plan (0: the machine's default) */
    int tp, seq_len, steps, warmup, eval_every, eval_batches, plan, world, sp, prefetch, excluded, log_every;
    int replicate;                   /* --replicate R: HSDP mesh R x S x tp (1: the 2D mesh) */
    int grad_accum, global_batch;    /* --grad-accum N, --global-batch G (0: not given) */
    long long seed;
    double lr, weight_decay, beta1, beta2, adam_eps, grad_clip, min_lr_ratio, peak_tflops;
    int help;
} job_opts;

/* The option table (core/job/options.c): every option of build/train once. */
enum { JOB_MAX_OPTS = 64 };
extern const cli_opt job_options[];
extern const int job_noptions;
/* the index of option `name` (without --) in job_options, or -1 */
int job_option_index(const char *name);
/* build/train --help: the table, then the model presets and the GPU names (core/job/catalog.h) */
void job_usage(FILE *f);
/* The option table's spec key of an option a sweep sets itself ("--tp" or "--tp=2" -> "meshes"), or NULL
 * when it is free for a spec's extra_args. */
const char *job_owned_option(const char *arg);
#endif
