/* core/job/job.h — what a run is, said once: the whole configuration of one training run or plan (model,
 * mesh, batch, accumulation, checkpointing, sequence parallel, budget, machine, data, outputs), parsed from
 * argv by the one option table of build/train (core/job/options.c), checked and derived by one function
 * (job_build: every check, the mesh among them), written back as the argv a sweep launches (job_argv),
 * compared across the ranks of a launch (job_agree_fields), and recorded (job_config_json, the record's
 * "config"). The engine below knows nothing of options; cost, run, sweep and tune above read a job_t.
 * Not here: running it (core/run/), pricing it (core/cost/), sweeping it (core/sweep/). */
#ifndef MESHSWEEP_JOB_H
#define MESHSWEEP_JOB_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/common/cli.h"
#include "core/engine/mesh.h"
#include "core/engine/model.h"
#include "core/formats/config.h"
#include "core/job/catalog.h"
#include "core/job/keys.h"
#include "core/job/options.h"


/* --mem-budget / --mem-reserve / --gpu resolved (job_build). With --plan: --gpu NAME plans against that
 * device (budget = usable − overhead − reserve); `auto` needs --gpu there; SIZE and --gpu together are
 * refused (two budgets). On a CUDA run: `auto` (or --gpu without --mem-budget) measures the device once it
 * is set up (is_auto = 1, budget 0 until core/engine/gpus.h fills it). On CPU: neither `auto` nor --gpu. */
#define JOB_DEFAULT_RESERVE_BYTES (1ull << 30)
typedef struct job_budget {
    uint64_t budget, reserve;
    int is_auto;                 /* the budget comes from the device at run time */
    const catalog_gpu *gpu;      /* --gpu NAME, or NULL */
} job_budget;

/* --mem-budget, --mem-reserve, --gpu, --plan and --backend of o resolved as above: 0, or -1 with one line */
int job_resolve_budget(const job_opts *o, job_budget *out, char *err, size_t errlen);
/* a plan's budget on device g: usable − overhead − reserve; -1 with a reason when nothing is left */
int job_plan_budget(const catalog_gpu *g, uint64_t reserve, uint64_t *budget, char *err, size_t errlen);
/* the budget text `auto`, any case */
int job_is_auto(const char *s);

typedef struct job {
    job_opts o;
    unsigned char given[JOB_MAX_OPTS];  /* by option-table index: the option appeared (or a sweep set it) */
    /* derived by job_build */
    model_config cfg;
    mesh_t mesh;                 /* the world's dp x tp mesh as this rank (a plan: rank 0) sees it */
    int B, T;                    /* micro-batch per DP rank, sequence length */
    int N;                       /* micro-batches per optimizer step (--grad-accum, or from --global-batch); 0 with
                                    --batch-size max and --global-batch until the plan picks the micro-batch */
    int G;                       /* the global batch dp * B * N (0 as N) */
    int max_batch;               /* --batch-size max (plans only) */
    model_opts mo;               /* the engine's options of the step */
    dtype_t dtype;
    job_budget budget;
} job_t;

/* build/train's defaults, nothing given */
void job_init(job_t *j);
/* job_init, then argv through the option table (the bare --checkpoint-activations is full). 0, or -1 with
 * one line in err (unknown option, bad value, an option given twice). */
int job_parse(job_t *j, int argc, char **argv, char *err, size_t errlen);
/* was option NAME (without --) given? */
int job_given(const job_t *j, const char *name);
/* Mark the option whose field is at offset off (offsetof(job_opts, ...)) as given: for the flags of a
 * field, the one that sets its value. What a sweep uses to say what it sets. */
void job_set_given(job_t *j, size_t off);
#define JOB_SET(j, field, value) ((j)->o.field = (value), job_set_given((j), offsetof(job_opts, field)))

/* Every check and derivation of the configuration, once, for a world of `world` ranks seen from `rank`:
 * the model (preset or config.json), ranges and combinations of the options, the budget, the mesh (world
 * mod tp, H, KV and f mod tp, seq_len mod tp with sequence parallel), checkpointing, accumulation. 0, or
 * the exit code 2 with one line in err. */
int job_build(job_t *j, int world, int rank, char *err, size_t errlen);
/* An output that is also an input (or the other output) would destroy what the run reads, and an output
 * that cannot be written fails only at the end: both refused now. -1 with one line in err. */
int job_check_outputs(const job_t *j, char *err, size_t errlen);

/* The given options as command-line arguments, in the table's order: push(ctx, arg) per argument. 0, or
 * -1 when push failed. */
int job_argv(const job_t *j, int (*push)(void *ctx, const char *arg), void *ctx);

/* What the ranks of one launch must share, as (label, value) fields for core/run/agree.h: every option
 * of the table but the local ones, as given (files by kind, "(default)" when not given), then what they
 * resolved to (the model's every field, the dtype, the budget). Return the number of fields written. */
enum { JOB_FIELD_LEN = 96, JOB_MAX_FIELDS = 96 };
typedef struct job_field { const char *label; char value[JOB_FIELD_LEN]; } job_field;
int job_option_fields(const job_t *j, job_field *f, int cap);
int job_resolved_fields(const job_t *j, job_field *f, int cap);

/* The micro-batches per step on dp DP ranks at --batch-size B: --grad-accum n (0: not given) and
 * --global-batch G (0: not given), n alone, G / (dp * B) alone, or 1. -1 with one line in err when G is
 * not dp * B * n for a whole n (the line says which micro-batches would divide it), n disagrees with G,
 * or n passes PLAN_MAX_GRAD_ACCUM. */
int job_accum_of(int global_batch, int grad_accum, int dp, int tp, int B, int *n, char *err, size_t errlen);

/* The run record's "config" (docs/formats.md): the resolved configuration; comm: what carried the
 * collectives (NULL: --comm as given). New reference. */
json_t *job_config_json(const job_t *j, const char *comm);
#endif
