/* core/sweep/charts.h — the sweep's charts: the gnuplot data files written from the run records and the
 * charts drawn from them (PNG + SVG, with the templates in plots/). Not the tables (core/sweep/report.h). */
#ifndef MESHSWEEP_SWEEP_CHARTS_H
#define MESHSWEEP_SWEEP_CHARTS_H
#include "core/sweep/results.h"

/* Each returns 0, or -1 with one line in err. */
int sweep_write_plot_data(const sweep_report_ctx *c, char *err, size_t errlen);
/* Draws loss, loss_tokens, loss_time, throughput, memory, max_batch (a grid: max_batch_<axis> and
 * throughput_<axis> instead of max_batch), and prediction where a mesh has a predicted step, as .png and .svg (gnuplot output goes to
 * gnuplot.log in the folder). Draws what it can; -1 if any chart failed; SWEEP_CHARTS_INTERRUPTED when Ctrl-C
 * came while drawing (then no chart of the folder changed: all are drawn to temp files first). */
#define SWEEP_CHARTS_INTERRUPTED (-2)
int sweep_draw_charts(const sweep_report_ctx *c, char *err, size_t errlen);
/* The charts of this sweep ("loss", ..., in a grid "max_batch_ac" per axis), at most cap names, in the
 * order of the report; the plan-only set with c->plan_only. Returns how many. */
#define SWEEP_CHART_NAME_MAX 48
#define SWEEP_MAX_CHARTS (7 + 2 * SWEEP_MAX_AXES)
int sweep_chart_names(const sweep_report_ctx *c, char (*names)[SWEEP_CHART_NAME_MAX], int cap);
/* The chart file exists and is complete (PNG ends with its IEND chunk, SVG with </svg>). */
int sweep_chart_complete(const char *path);
#endif
