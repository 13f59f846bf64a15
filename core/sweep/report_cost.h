/* core/sweep/report_cost.h — the predicted step time in the sweep's outputs (docs/cost-model.md): summary.json's
 * per-mesh fields, the report.md section, prediction.dat for the prediction chart. */
#ifndef MESHSWEEP_SWEEP_REPORT_COST_H
#define MESHSWEEP_SWEEP_REPORT_COST_H
#include "core/sweep/results.h"

/* the predicted step of a mesh: summary.predicted_step_ms of a run, time.step_ms of a plan; NAN: none */
double sweep_predicted_ms(const sweep_report_ctx *c, const sweep_result *r);
/* 1-based rank by predicted tokens/s, highest first; 0 when not predicted */
int sweep_predicted_rank(const sweep_report_ctx *c, const sweep_result *r);
/* predicted_step_ms, predicted_tok_s, and measured_step_ms + prediction_error (runs) or predicted_mfu +
 * predicted_rank (plans), prediction_machine: into the mesh's summary.json object m */
void sweep_cost_mesh_json(const sweep_report_ctx *c, const sweep_result *r, json_t *m);
int sweep_write_prediction_data(const sweep_report_ctx *c, char *err, size_t el);
/* "## Predicted step time": the machine, its drift, and the table (ranked by predicted tok/s in plans) */
void sweep_report_cost_section(sweep_sbuf *b, const sweep_report_ctx *c);
#endif
