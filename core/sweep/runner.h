/* core/sweep/runner.h — the sweep runner (docs/sweeps.md) as a library call: load a spec, check its inputs,
 * resume or create its results folder, run every mesh (max-batch search, probes, the measured run;
 * or only the plans with --plan-only), write the outputs. build/sweep (bench/sweep.c) only parses
 * its options and calls sweep_run. The runner state is shared with core/sweep/mesh_runs.c (one mesh).
 * Not the spec parser (core/sweep/spec.c), not process control (core/sweep/launch.c), not the
 * results folder (core/sweep/folder.c), not the outputs (core/sweep/report.c). */
#ifndef MESHSWEEP_SWEEP_RUN_H
#define MESHSWEEP_SWEEP_RUN_H
#include <limits.h>
#include <stddef.h>

#include "core/engine/limits.h"   /* the engine's batch limits, one definition */
#include "core/sweep/report.h"
#include "core/sweep/spec.h"

/* The engine's own bounds on a run's batch (build/train refuses anything larger): batch per DP
 * rank at most 2^24 and batch x seq_len at most 2^26 tokens per rank. The max-batch search stops there. */
#define SWEEP_ENGINE_MAX_BATCH PLAN_MAX_BATCH
#define SWEEP_ENGINE_MAX_TOKENS_PER_RANK PLAN_MAX_TOKENS
int sweep_engine_max_batch(int seq_len);

/* The batches a max-batch search may try for a cell, ascending: 1 .. the engine's limit, or at a
 * matched global batch the divisors of G/dp up to it (a micro-batch must divide each rank's share
 * of G). Position p (1..n) holds sweep_ladder_at(l, p). top_capped: the top is the engine's limit,
 * not the largest batch that makes sense. 0, or -1 out of memory. */
typedef struct sweep_ladder {
    int n;
    int *v;                     /* NULL: position p is batch p */
    int top_capped;
} sweep_ladder;
int sweep_batch_ladder(const sweep_spec *s, const sweep_mesh *m, sweep_ladder *l);
int sweep_ladder_at(const sweep_ladder *l, int p);
void sweep_ladder_free(sweep_ladder *l);

typedef struct sweep_run_opts {
    const char *spec_path;      /* the spec file (required) */
    const char *out_dir;        /* results root instead of the spec's results_dir; NULL: the spec's */
    const char *train;          /* the train program; NULL: train next to this binary */
    int fresh;                  /* start a new folder even if one could be resumed */
    int dry_run;                /* check the spec, print the commands, run nothing */
    int plan_only;              /* plans only: no launches, plan-based summary, charts, report */
} sweep_run_opts;

/* Runs the sweep; returns the program's exit status: 0 completed (some runs may have failed), 1 I/O
 * error or every run failed, 2 bad spec, bad input file or usage (found before anything runs), or
 * the folder is in use, 130 interrupted. */
int sweep_run(const sweep_run_opts *o);

/* ---- shared by core/sweep/runner.c and core/sweep/mesh_runs.c ---------------------------------------- */

#define SWEEP_EXIT_IO 1
#define SWEEP_EXIT_USAGE 2
#define SWEEP_EXIT_INTERRUPTED 130

typedef struct sweep_runner {
    const sweep_spec *spec;
    char train[PATH_MAX];
    char plots[PATH_MAX];
    char dir[PATH_MAX];         /* the sweep's folder */
    char stamp[20];             /* its name (UTC stamp) */
    int resumed;                /* the folder existed before this invocation */
    int io_error;               /* something could not be written: exit 1 at the end */
    int idx;                    /* 1-based index of the mesh in progress, for "[i/n]" */
    const char *env_default[8]; /* NAME=VALUE set in the child unless set */
    const char *forward_env[4]; /* names passed on with "-x NAME" to an Open MPI launcher */
    const char *spec_path;      /* the spec file (build/calibrate measures its steps) */
    struct sweep_machine *machine; /* the machine model of the predictions (core/sweep/machine.h) */
    const struct sweep_inputs *inputs; /* what the inputs hold (core/sweep/inputs.h); NULL with --plan-only */
    char (*refused)[300];       /* --dry-run: per cell, train's line when its plan refuses it, else "" */
    char launcher_down[300];    /* srun's own failure (no controller): the sweep stops at the first one */
} sweep_runner;

void sweep_progress(const sweep_runner *R, const sweep_mesh *m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* snprintf of a path that cannot be truncated (lengths are checked at start); exits 1 if it ever is. */
void sweep_pathf(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* One mesh: the measured run (and in max mode the plan and the probes before it). 0 or 130. */
int sweep_run_mesh(sweep_runner *R, sweep_result *res);
/* One mesh of --plan-only: build/train --plan into runs/<mesh>.plan.json. 0 or 130. */
int sweep_plan_mesh(sweep_runner *R, sweep_result *res);
#endif
