/* core/sweep_run.h — the sweep runner (design 9) as a library call: load a spec, resume or create
 * its results folder, run every mesh (max-batch search, probes, the measured run), write the outputs.
 * build/sweep (bench/sweep.c) only parses its options and calls sweep_run.
 * Not the spec parser (core/sweep_spec.c), not process control (core/sweep_launch.c), not the
 * outputs (core/sweep_report.c). */
#ifndef MESHSWEEP_SWEEP_RUN_H
#define MESHSWEEP_SWEEP_RUN_H

typedef struct sweep_run_opts {
    const char *spec_path;      /* the spec file (required) */
    const char *out_dir;        /* results root instead of the spec's results_dir; NULL: the spec's */
    const char *train;          /* the train program; NULL: train next to this binary */
    int fresh;                  /* start a new folder even if one could be resumed */
    int dry_run;                /* check the spec, print the commands, run nothing */
} sweep_run_opts;

/* Runs the sweep; returns the program's exit status: 0 completed (even with failed runs), 1 I/O
 * error, 2 bad spec or usage, 130 interrupted. Messages go to stderr. */
int sweep_run(const sweep_run_opts *o);
#endif
