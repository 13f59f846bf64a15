/* core/sweep/charts.h — the sweep's charts: the gnuplot data files written from the run records and the
 * charts drawn from them (PNG + SVG, with the templates in plots/). Not the tables (core/sweep/report.h). */
#ifndef MESHSWEEP_SWEEP_CHARTS_H
#define MESHSWEEP_SWEEP_CHARTS_H
#include "core/sweep/results.h"

/* Each returns 0, or -1 with one line in err. */
int sweep_write_plot_data(const sweep_report_ctx *c, char *err, size_t errlen);
/* Draws loss, loss_tokens, throughput, memory, max_batch as .png and .svg (gnuplot output goes to
 * gnuplot.log in the folder). Draws what it can; -1 if any chart failed. */
int sweep_draw_charts(const sweep_report_ctx *c, char *err, size_t errlen);
/* The charts of this sweep: NULL-terminated names ("loss", ...); the plan-only set with plan_only. */
const char *const *sweep_chart_names(int plan_only);
/* 0 for a chart of the list that has nothing to show in this sweep (prediction: no mesh has a predicted
 * step), so it is neither drawn nor missed; 1 otherwise */
int sweep_chart_wanted(const sweep_report_ctx *c, const char *name);
/* The chart file exists and is complete (PNG ends with its IEND chunk, SVG with </svg>). */
int sweep_chart_complete(const char *path);
#endif
