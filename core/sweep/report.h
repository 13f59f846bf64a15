/* core/sweep/report.h — the sweep's tables and its page: summary.json, summary.csv and report.md, each
 * one function, every file written atomically. Not the charts (core/sweep/charts.h), not the shared
 * numbers (core/sweep/results.h), not the runs (core/sweep/mesh_runs.c), not the spec (core/sweep/spec.c). */
#ifndef MESHSWEEP_SWEEP_REPORT_H
#define MESHSWEEP_SWEEP_REPORT_H
#include <stddef.h>

#include "core/sweep/results.h"

/* Each returns 0, or -1 with one line in err. */
int sweep_write_summary_json(const sweep_report_ctx *c, char *err, size_t errlen);
int sweep_write_summary_csv(const sweep_report_ctx *c, char *err, size_t errlen);
int sweep_write_report_md(const sweep_report_ctx *c, int charts_ok, char *err, size_t errlen);

/* ---- report.md's parts for grids and a matched global batch (core/sweep/report_grid.c) ---------- */
/* The first paragraph's opening: the mode, and a grid's axes and cells. */
void sweep_md_mode(sweep_sbuf *b, const sweep_report_ctx *c);
/* The first paragraph at a matched global batch: the largest loss deviation between meshes, and why small. */
void sweep_md_matched_agreement(sweep_sbuf *b, const sweep_report_ctx *c);
/* The first paragraph of a grid's plans: the fastest cell if the plans predict step times. */
void sweep_md_fastest_planned(sweep_sbuf *b, const sweep_report_ctx *c);
/* A grid's tables: the largest batch per TP degree for every setting and for each value of each axis;
 * tokens/s per TP degree. Nothing without axes. */
void sweep_md_grid_tables(sweep_sbuf *b, const sweep_report_ctx *c);
/* "Loss agreement between meshes" (equivalence and matched modes), per setting in a grid. */
void sweep_md_deviation_section(sweep_sbuf *b, const sweep_report_ctx *c);

#endif
