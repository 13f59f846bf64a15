/* core/sweep/report_cost.c — the predicted step time in a sweep's outputs (see report_cost.h): per mesh,
 * what train predicted before step 1 next to what it measured and the error (run sweeps), or the
 * predicted step, tokens/s and MFU with the meshes ranked by predicted tokens/s (--plan-only); the
 * report.md section, the data of the prediction chart, the summary.json fields. Every predicted number
 * is labelled as predicted. Not the model (core/cost/), not the other outputs. */
#include "core/sweep/report_cost.h"
#include "core/sweep/machine.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double sweep_predicted_ms(const sweep_report_ctx *c, const sweep_result *r) {
    return sweep_record_num(r->record, c->plan_only ? "time.step_ms" : "summary.predicted_step_ms");
}
static double measured_ms(const sweep_report_ctx *c, const sweep_result *r) {
    return c->plan_only || strcmp(r->status, "ok") ? NAN : sweep_record_num(r->record, "summary.step_ms_median");
}
static double pred_error(const sweep_report_ctx *c, const sweep_result *r) {
    double p = sweep_predicted_ms(c, r), m = measured_ms(c, r);
    return isfinite(p) && isfinite(m) && m > 0 ? p / m - 1 : NAN;
}
static double pred_tok_s(const sweep_report_ctx *c, const sweep_result *r) {
    if (c->plan_only) return sweep_record_num(r->record, "time.tok_s");
    double p = sweep_predicted_ms(c, r);
    return p > 0 ? (double)sweep_global_batch(r) * c->spec->seq_len / (p / 1e3) : NAN;
}

/* 1-based rank of r among the meshes by predicted tokens/s (highest first); 0 when not predicted */
int sweep_predicted_rank(const sweep_report_ctx *c, const sweep_result *r) {
    double t = pred_tok_s(c, r);
    if (!isfinite(t)) return 0;
    int rank = 1;
    for (int i = 0; i < c->n; i++) {
        double u = pred_tok_s(c, &c->res[i]);
        if (&c->res[i] != r && isfinite(u) && (u > t || (u == t && &c->res[i] < r))) rank++;
    }
    return rank;
}

static json_t *num(double x) { return isfinite(x) ? json_real(x) : json_null(); }

void sweep_cost_mesh_json(const sweep_report_ctx *c, const sweep_result *r, json_t *m) {
    json_object_set_new(m, "predicted_step_ms", num(sweep_predicted_ms(c, r)));
    json_object_set_new(m, "predicted_tok_s", num(pred_tok_s(c, r)));
    if (c->plan_only) {
        json_object_set_new(m, "predicted_mfu", num(sweep_record_num(r->record, "time.mfu")));
        int k = sweep_predicted_rank(c, r);
        json_object_set_new(m, "predicted_rank", k ? json_integer(k) : json_null());
    } else {
        json_object_set_new(m, "measured_step_ms", num(measured_ms(c, r)));
        json_object_set_new(m, "prediction_error", num(pred_error(c, r)));
    }
    json_t *mach = sweep_record_get(r->record, c->plan_only ? "time.machine" : "summary.prediction_machine");
    json_object_set_new(m, "prediction_machine", json_is_string(mach) ? json_incref(mach) : json_null());
}

int sweep_write_prediction_data(const sweep_report_ctx *c, char *err, size_t el) {
    sweep_sbuf b = {0};
    sweep_sb_printf(&b, "# mesh measured_step_ms predicted_step_ms   (0: none)\n");
    for (int i = 0; i < c->n; i++) {
        const sweep_result *r = &c->res[i];
        double m = measured_ms(c, r), p = sweep_predicted_ms(c, r);
        sweep_sb_printf(&b, "\"%s\" %.4f %.4f\n", r->mesh->name, isfinite(m) ? m : 0.0, isfinite(p) ? p : 0.0);
    }
    return sweep_sb_write(&b, c->dir, "prediction.dat", err, el);
}

static void md(sweep_sbuf *b, double x, const char *fmt) {
    if (isfinite(x)) sweep_sb_printf(b, fmt, x);
    else sweep_sb_printf(b, "n/a");
    sweep_sb_printf(b, " | ");
}

static void machine_lines(sweep_sbuf *b, const sweep_report_ctx *c) {
    const sweep_machine *mi = c->machine;
    if (!mi) return;
    if (mi->have)
        sweep_sb_printf(b, "Machine model: `%s` (%s%s%s)%s.", mi->name, mi->path, mi->calibrated[0] ? ", calibrated " : "",
                        mi->calibrated, mi->calibrated_now ? "; calibrated by this sweep" : "");
    else
        sweep_sb_printf(b, "No machine model:");
    if (mi->checked) {   /* a ratio the check could not have is "not compared", never "xnan" */
        char ct[32] = "not compared", mt[32] = "not compared";
        if (isfinite(mi->compute_ratio)) snprintf(ct, sizeof ct, "x%.2f", mi->compute_ratio);
        if (isfinite(mi->comm_ratio)) snprintf(mt, sizeof mt, "x%.2f", mi->comm_ratio);
        sweep_sb_printf(b, " Drift check at the start of this invocation: compute %s, collectives %s of the "
                           "file (1-minute load average %.2f): an error beyond that drift is the model's.", ct, mt, mi->load);
    }
    if (mi->note[0]) sweep_sb_printf(b, " %s.", mi->note);
    sweep_sb_printf(b, "\n\n");
}

void sweep_report_cost_section(sweep_sbuf *b, const sweep_report_ctx *c) {
    int any = 0;
    for (int i = 0; i < c->n; i++) any |= isfinite(sweep_predicted_ms(c, &c->res[i]));
    if (!any && !c->machine) return;
    sweep_sb_printf(b, "## Predicted step time\n\n");
    machine_lines(b, c);
    if (!any) {
        sweep_sb_printf(b, "No mesh has a predicted step time.\n\n");
        return;
    }
    if (c->plan_only) {
        sweep_sb_printf(b, "| rank by predicted tok/s | mesh | predicted step ms | predicted tok/s | predicted MFU (attention whole) | "
                           "predicted exposed comm ms | machine |\n|---:|---|---:|---:|---:|---:|---|\n");
        for (int k = 1; k <= c->n; k++)
            for (int i = 0; i < c->n; i++) {
                const sweep_result *r = &c->res[i];
                if (sweep_predicted_rank(c, r) != k) continue;
                sweep_sb_printf(b, "| %d | %s | ", k, r->mesh->name);
                md(b, sweep_predicted_ms(c, r), "%.2f");
                md(b, pred_tok_s(c, r), "%.0f");
                md(b, 100 * sweep_record_num(r->record, "time.mfu"), "%.1f%%");
                md(b, sweep_record_num(r->record, "time.exposed_comm_ms"), "%.2f");
                const char *mn = json_string_value(sweep_record_get(r->record, "time.machine"));
                sweep_sb_printf(b, "%s |\n", mn ? mn : "n/a");
            }
        json_t *est = NULL;
        for (int i = 0; i < c->n && !est; i++) est = sweep_record_get(c->res[i].record, "time.machine_estimates");
        if (json_array_size(est)) {
            sweep_sb_printf(b, "\nFigures of the machine model that are estimates, not measurements:");
            for (size_t k = 0; k < json_array_size(est); k++)
                sweep_sb_printf(b, "%s `%s`", k ? "," : "", json_string_value(json_array_get(est, k)));
            sweep_sb_printf(b, ".\n");
        }
        sweep_sb_printf(b, "\n");
        return;
    }
    sweep_sb_printf(b, "| mesh | predicted step ms (before step 1) | measured step ms (median) | prediction error | "
                       "predicted tok/s | machine |\n|---|---:|---:|---:|---:|---|\n");
    for (int i = 0; i < c->n; i++) {
        const sweep_result *r = &c->res[i];
        sweep_sb_printf(b, "| %s | ", r->mesh->name);
        md(b, sweep_predicted_ms(c, r), "%.2f");
        md(b, measured_ms(c, r), "%.2f");
        md(b, 100 * pred_error(c, r), "%+.1f%%");
        md(b, pred_tok_s(c, r), "%.0f");
        const char *mn = json_string_value(sweep_record_get(r->record, "summary.prediction_machine"));
        sweep_sb_printf(b, "%s |\n", mn ? mn : "n/a");
    }
    sweep_sb_printf(b, "\nPrediction error = predicted / measured − 1 (the record's summary.prediction_error).\n\n");
}
