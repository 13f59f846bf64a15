/* core/sweep/results.h — a sweep's results as its outputs see them: one sweep_result per mesh (its
 * status, the max-batch search, the run record), the context every output is written from, the numbers
 * derived from the records that the summary, the charts and report.md share, and the text buffer
 * output files are built in. Not the outputs themselves (core/sweep/report.h, core/sweep/charts.h). */
#ifndef MESHSWEEP_SWEEP_RESULTS_H
#define MESHSWEEP_SWEEP_RESULTS_H
#include <stddef.h>

#include "core/engine/mem_categories.h"   /* the memory categories: the engine's one list */
#include "core/sweep/spec.h"

#define SWEEP_MAX_PROBES 64

typedef struct sweep_probe {
    int batch_size;
    char status[16];        /* the probe run's status: ok | oom | diverged | failed | timeout */
    int resumed;            /* found complete in the folder, not launched again */
    double elapsed_s;       /* < 0 when resumed */
} sweep_probe;

typedef struct sweep_result {
    const sweep_mesh *mesh;
    int batch_size;         /* per DP rank that was run (the max found in max mode); 0 if none */
    char status[16];        /* ok | oom | diverged | failed | timeout */
    char error[1024];       /* first part of the record's error, "" when ok */
    int resumed;            /* the measured run was found complete (in this folder, from an earlier invocation) */
    char finished[24];      /* resumed: when its record was written (UTC, ISO 8601); "" otherwise */
    int capped;             /* max mode: the batch is a limit, not the memory budget's: SWEEP_CAP_ENGINE (the
                               engine's own) or SWEEP_CAP_DATA (the token files hold no more distinct sequences) */
    double elapsed_s;       /* of the measured run; < 0 when resumed or not run */
    int plan_batch;         /* max mode: the plan's candidate; -1 when no plan */
    int n_probes;
    sweep_probe probes[SWEEP_MAX_PROBES];
    json_t *record;         /* the run record (owned; NULL when none could be read); the plan with --plan-only */
} sweep_result;

enum { SWEEP_CAP_ENGINE = 1, SWEEP_CAP_DATA = 2 };
/* " (engine limit)", " (data limit)" or "" for a table cell; the long form for a sentence */
const char *sweep_cap_text(int capped);
const char *sweep_cap_sentence(int capped);

/* The largest relative loss deviation from a reference mesh (equivalence mode). */
typedef struct sweep_deviation {
    int ref;                /* index of the reference mesh (the first one with steps), -1 if none */
    double max_rel;         /* max over steps and meshes of |loss_m - loss_ref| / |loss_ref| */
    int at_step, at_mesh;   /* where the max is (-1 when nothing was compared) */
    int steps_compared;
} sweep_deviation;

/* Compute the deviation; per_step (may be NULL) receives [{"step", "max_rel"}] (new reference). */
void sweep_loss_deviation(const sweep_result *res, int n, sweep_deviation *d, json_t **per_step);
/* The same over the cells of one setting of a grid (mesh->setting == setting; -1: every cell). */
void sweep_loss_deviation_setting(const sweep_result *res, int n, int setting, sweep_deviation *d, json_t **per_step);

typedef struct sweep_report_ctx {
    const sweep_spec *spec;
    sweep_result *res;
    int n;
    const char *dir;        /* the sweep's folder */
    const char *plots_dir;  /* where loss.gp etc. live (absolute) */
    const char *gnuplot;    /* program name or path, "gnuplot" normally */
    const char *started_utc;    /* this invocation */
    const char *created_utc;    /* the folder (earlier than started_utc when resumed) */
    const char *stamp;          /* the folder's name */
    int plan_only;              /* records are plans (meshsweep.plan/1), status "planned" */
    const struct sweep_machine *machine;  /* the machine model behind the predictions (core/sweep/machine.h); may be NULL */
} sweep_report_ctx;

/* Numbers from a run record by dotted path ("summary.tok_s"); NAN when absent or null. */
double sweep_record_num(json_t *record, const char *path);
json_t *sweep_record_get(json_t *record, const char *path);

/* ---- derived numbers, shared by the summary, charts and report -------------------------------- */

int sweep_global_batch(const sweep_result *r);
/* Micro-batches per optimizer step at a matched global batch: the record's grad_accum, else
 * global / (dp x batch); 0 when unknown (no batch). */
int sweep_grad_accum(const sweep_result *r);
size_t sweep_n_steps(const sweep_result *r);
size_t sweep_n_evals(const sweep_result *r);
/* MFU against the compute share each rank had, peak x min(1, cores/ranks) per host: the record's
 * summary.mfu_share, else from summary.mfu and env.ranks_by_host / env.cores_by_host; NAN: n/a. */
double sweep_mfu_share(const sweep_result *r);
/* Ranks and cores of the run (summed over hosts); 0 when the record does not say. */
void sweep_rank_cores(const sweep_result *r, int *ranks, int *cores, int *hosts);
/* 1 when a TP group spans hosts (env.tp_spans_hosts, else from env.ranks_by_host), 0 no, -1 unknown. */
int sweep_tp_spans_hosts(const sweep_result *r);
/* The loss the "seconds to reach" column is about: the spec's target_loss, else the highest final
 * loss among the ok meshes; NAN when there is none. */
double sweep_target_loss(const sweep_report_ctx *c);
/* Training seconds (sum of the step times) until the first step whose loss is <= x; NAN if never.
 * *step (may be NULL) receives that step. */
double sweep_seconds_to_loss(const sweep_result *r, double x, int *step);

/* A growable text buffer: files are built in memory, then written atomically. */
typedef struct sweep_sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sweep_sbuf;
void sweep_sb_printf(sweep_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes DIR/NAME atomically and frees the buffer; 0 or -1 with one line in err. */
int sweep_sb_write(sweep_sbuf *b, const char *dir, const char *name, char *err, size_t el);
#endif
