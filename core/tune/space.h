/* core/tune/space.h — the space build/tune searches (docs/tune.md): every mesh of the world x micro-batch x
 * the accumulation that reaches the global batch x activation checkpointing x sequence parallel x
 * reduce mode x prefetch, each cell checked by job_build exactly as `build/train --plan` with the same
 * flags checks it, planned by the engine's memory plan (core/engine/plan.h) and priced by the step-time
 * model (core/cost/predict.h). Nothing here plans or prices by itself: a cell is the argv of one
 * `build/train --plan` and what those two functions say of it.
 * Not here: the folder, report and charts (core/tune/report.h), the program (bench/tune.c). */
#ifndef MESHSWEEP_TUNE_SPACE_H
#define MESHSWEEP_TUNE_SPACE_H
#include <stddef.h>
#include <stdint.h>

#include "core/common/cli.h"
#include "core/cost/predict.h"
#include "core/engine/engine.h"
#include "core/engine/mem_categories.h"
#include "core/job/job.h"

/* build/tune's options (their table and --help: bench/tune.c) */
typedef struct tune_opts {
    const char *model, *gpu, *machine, *mem_budget, *mem_reserve, *dtype, *out_dir, *global_tokens;
    int world, gpus_per_host, seq_len, global_batch, top, jobs, full_replay, help;
    int max_replicate;                          /* --max-replicate R: HSDP meshes up to R replicas (0: all, 1: 2D only) */
    int measure, measure_reps, measure_steps;   /* --measure K (0: none) */
    const char *data;                           /* --data: the tokens of the measured runs */
} tune_opts;
void tune_opts_init(tune_opts *o);

/* A mesh of the world: replicate x shard x tp (r = 1: the 2D mesh dp x tp with dp = s; r > 1: HSDP, dp = r * s;
 * tune_meshes is the one place that lists them) */
typedef struct tune_mesh { int r, s, t; } tune_mesh;
/* the meshes R x S x T of a world of `world` ranks with R <= max_r (0: any), at most cap, in order of tp, then
 * of R (R = 1 first); returns how many (a world of at most 65536 ranks has at most 2520 of them) */
#define TUNE_MAX_MESHES 2560
int tune_meshes(int world, int max_r, tune_mesh *out, int cap);
/* a mesh's name as build/train names it: "DPxT" (R = 1), "RxSxT" (HSDP) */
void tune_mesh_name(const tune_mesh *m, char *out, size_t cap);

typedef enum { TUNE_FITS, TUNE_NO_FIT, TUNE_UNREACHABLE } tune_status;
extern const char *const tune_status_names[3];

typedef struct tune_cell {
    tune_mesh mesh;
    int dp, B, N;             /* DP ranks, micro-batch per DP rank, micro-batches per step */
    int ckpt;                 /* 0 none, 1 full, K every:K */
    int sp, sp_local;         /* sequence parallel (tp > 1 only; -1 when it does not apply) */
    int reduce_last;          /* --accum-reduce last (-1 when N == 1: nothing is accumulated) */
    int prefetch;
    int recompute_layers;     /* layers recomputed in backward */
    tune_status status;
    char why[160];            /* unreachable: why */
    uint64_t peak, by_cat[MEM_NCAT];
    double step_ms, tok_s, tok_s_per_gpu, mfu, mfu_causal, comm_ms, exposed_comm_ms, compute_ms;
    int priced;               /* the step-time model priced it */
    int mesh_i, setting_i;    /* where the enumeration made it: mesh, then micro-batch, then setting */
    int rank;                 /* 1-based rank among the fitting, priced cells; 0 for others */
} tune_cell;

typedef struct tune_space {
    tune_opts o;
    job_t base;               /* the first cell's job: the model, budget and dtype every cell shares */
    int global_batch;         /* sequences */
    uint64_t budget;
    char budget_text[32];     /* the --mem-budget given to every cell (bytes), "" with --gpu */
    const char *budget_from;  /* "--gpu NAME", "--mem-budget", "this host's memory / ranks per host" */
    cost_machine machine;
    const char *machine_from;
    int ranks_per_host;
    tune_cell *cells;
    int n, cap;
    int n_fit, n_priced;
    int jobs;                 /* processes that plan and price (--jobs) */
    char refused[1024];       /* meshes refused as a whole, "8x... : reason; ..." */
    double elapsed_s;
    int interrupted;
} tune_space;

/* ---- the pieces (core/tune/search.c puts them together) */
/* A mesh's setting: checkpointing, sequence parallel, reduce mode, prefetch */
typedef struct tune_setting { int ckpt, sp, sp_local, reduce_last, prefetch; } tune_setting;
/* the settings of mesh m, at most cap; returns how many */
int tune_settings(const tune_space *S, const tune_mesh *m, tune_setting *out, int cap);
/* the options checked, the model, the budget and the machine resolved (S zeroed first): 0 or 2 with err */
int tune_space_check(tune_space *S, const tune_opts *o, char *err, size_t errlen);
/* job_parse + job_build of cell c's argv, what build/train --plan does first: 0 or 2 with err */
int tune_cell_job(const tune_space *S, const tune_cell *c, job_t *j, char *err, size_t errlen);
/* plan and price cell c (mesh, B, N and setting set): 0, or 2 when job_build refuses it (err) */
int tune_plan_cell(tune_space *S, const engine_t *P, tune_cell *c, char *err, size_t errlen);
/* append a cell: 0, or -1 out of memory */
int tune_add_cell(tune_space *S, const tune_cell *c);

/* Check the options, resolve the model, budget and machine, then enumerate, plan and price every cell
 * (a progress line on stderr). 0; 2 with one line in err on bad input (nothing fits, no reachable cell,
 * ...); 130 when interrupted (interrupted() nonzero, polled between cells). */
int tune_space_build(tune_space *S, const tune_opts *o, int (*interrupted)(void), char *err, size_t errlen);
/* the cell's checkpointing as the option value: none, full, every:K */
void tune_ckpt_text(const tune_cell *c, char *out, size_t cap);
/* the `build/train --plan` arguments of cell c (space-separated, shell-safe for the names used) */
void tune_cell_args(const tune_space *S, const tune_cell *c, char *out, size_t cap);
/* "8x8 b2 x4 every:4 sp=local last prefetch" (an HSDP mesh "2x4x8 ..."): a cell in a line of text */
void tune_cell_label(const tune_cell *c, char *out, size_t cap);
void tune_space_free(tune_space *S);
#endif
