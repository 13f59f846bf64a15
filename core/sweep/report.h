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

#endif
