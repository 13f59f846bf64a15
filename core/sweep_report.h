/* core/sweep_report.h — what a sweep leaves behind once its runs are done: summary.json,
 * summary.csv, the gnuplot data files and charts (PNG + SVG, drawn with the templates in plots/)
 * and report.md. Each output is one function, every file written atomically.
 * Not the runs themselves (bench/sweep.c) and not the spec (core/sweep_spec.c). */
#ifndef MESHSWEEP_SWEEP_REPORT_H
#define MESHSWEEP_SWEEP_REPORT_H
#include <stddef.h>

#include "core/sweep_spec.h"

#define SWEEP_MAX_PROBES 64
#define SWEEP_N_MEM_CATEGORIES 7
/* The memory categories of design 6, in the order of the CSV columns and the stacked bars. */
extern const char *const sweep_mem_categories[SWEEP_N_MEM_CATEGORIES];

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
    int capped;             /* max mode: the batch is the engine's own limit, not the memory budget's */
    double elapsed_s;       /* of the measured run; < 0 when resumed or not run */
    int plan_batch;         /* max mode: the plan's candidate; -1 when no plan */
    int n_probes;
    sweep_probe probes[SWEEP_MAX_PROBES];
    json_t *record;         /* the run record (owned; NULL when none could be read); the plan with --plan-only */
} sweep_result;

/* The largest relative loss deviation from a reference mesh (equivalence mode). */
typedef struct sweep_deviation {
    int ref;                /* index of the reference mesh (the first one with steps), -1 if none */
    double max_rel;         /* max over steps and meshes of |loss_m - loss_ref| / |loss_ref| */
    int at_step, at_mesh;   /* where the max is (-1 when nothing was compared) */
    int steps_compared;
} sweep_deviation;

/* Compute the deviation; per_step (may be NULL) receives [{"step", "max_rel"}] (new reference). */
void sweep_loss_deviation(const sweep_result *res, int n, sweep_deviation *d, json_t **per_step);

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
} sweep_report_ctx;

/* Each returns 0, or -1 with one line in err. */
int sweep_write_summary_json(const sweep_report_ctx *c, char *err, size_t errlen);
int sweep_write_summary_csv(const sweep_report_ctx *c, char *err, size_t errlen);
int sweep_write_plot_data(const sweep_report_ctx *c, char *err, size_t errlen);
/* Draws loss, loss_tokens, throughput, memory, max_batch as .png and .svg (gnuplot output goes to
 * gnuplot.log in the folder). Draws what it can; -1 if any chart failed. */
int sweep_draw_charts(const sweep_report_ctx *c, char *err, size_t errlen);
int sweep_write_report_md(const sweep_report_ctx *c, int charts_ok, char *err, size_t errlen);

/* Numbers from a run record by dotted path ("summary.tok_s"); NAN when absent or null. */
double sweep_record_num(json_t *record, const char *path);
json_t *sweep_record_get(json_t *record, const char *path);

/* ---- derived numbers (core/sweep_report.c), shared by the summary, charts and report ----------- */

int sweep_global_batch(const sweep_result *r);
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
/* The charts of this sweep: NULL-terminated names ("loss", ...); the plan-only set with plan_only. */
const char *const *sweep_chart_names(int plan_only);
/* The chart file exists and is complete (PNG ends with its IEND chunk, SVG with </svg>). */
int sweep_chart_complete(const char *path);

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
