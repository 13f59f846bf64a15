/* core/sweep/report.c — the sweep's tables from its run records: summary.json and summary.csv. Every
 * file goes through sweep_sb_write (atomic), so an interrupted sweep never leaves half a file. Not the
 * shared numbers (core/sweep/results.c), not the charts (core/sweep/charts.c), not report.md
 * (core/sweep/report_md.c), not the runs (core/sweep/mesh_runs.c). */
#include "core/sweep/report.h"
#include "core/common/errmsg.h"
#include "core/sweep/charts.h"
#include "core/sweep/machine.h"
#include "core/sweep/report_cost.h"
#include "core/sweep/grid.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- summary.json ----------------------------------------------------------------------------- */

static json_t *num_or_null(double x) { return isfinite(x) ? json_real(x) : json_null(); }
static json_t *int_or_null(double x) { return isfinite(x) ? json_integer((json_int_t)x) : json_null(); }

static const char *mode_name(int m) {
    return m == SWEEP_BATCH_MAX      ? "max"
           : m == SWEEP_BATCH_GLOBAL ? "global_batch"
           : m == SWEEP_BATCH_MATCHED ? "matched_global_batch"
                                      : "fixed";
}

static json_t *search_json(const sweep_result *r) {
    json_t *search = json_object(), *probes = json_array();
    if (!search || !probes) {
        json_decref(search), json_decref(probes);
        return json_null();
    }
    json_object_set_new(search, "plan_batch_size", r->plan_batch >= 0 ? json_integer(r->plan_batch) : json_null());
    json_object_set_new(search, "capped_at_engine_limit", json_boolean(r->capped == SWEEP_CAP_ENGINE));
    json_object_set_new(search, "capped_at_data_limit", json_boolean(r->capped == SWEEP_CAP_DATA));
    for (int p = 0; p < r->n_probes; p++) {
        const sweep_probe *pr = &r->probes[p];
        char prec[SWEEP_CELL_NAME_MAX + 48];
        snprintf(prec, sizeof prec, "runs/%s.probe-b%d.json", r->mesh->name, pr->batch_size);
        json_t *po = json_pack("{s:i, s:s, s:b, s:s}", "batch_size", pr->batch_size, "status", pr->status, "resumed",
                               pr->resumed, "record", prec);
        if (po) {
            json_object_set_new(po, "elapsed_s", pr->elapsed_s >= 0 ? json_real(pr->elapsed_s) : json_null());
            json_array_append_new(probes, po);
        }
    }
    json_object_set_new(search, "probes", probes);
    return search;
}

/* Memory of a run record (max over ranks) or of a plan (the most loaded rank). */
static void mem_json(const sweep_result *r, int plan, json_t *m) {
    json_t *cats = json_object();
    for (int k = 0; cats && k < MEM_NCAT; k++) {
        char path[64];
        snprintf(path, sizeof path, "%s.%s", plan ? "by_category" : "memory.by_category", mem_cat_names[k]);
        json_object_set_new(cats, mem_cat_names[k], int_or_null(sweep_record_num(r->record, path)));
    }
    json_object_set_new(m, "peak_bytes", int_or_null(sweep_record_num(r->record, plan ? "peak" : "memory.peak")));
    json_object_set_new(m, "by_category", cats ? cats : json_null());
}

/* The hosts of a run and how its ranks shared the cores. */
static void hosts_json(const sweep_result *r, json_t *m) {
    json_t *hosts = sweep_record_get(r->record, "env.hosts");
    json_t *rb = sweep_record_get(r->record, "env.ranks_by_host");
    json_t *cb = sweep_record_get(r->record, "env.cores_by_host");
    json_object_set_new(m, "hosts", hosts ? json_incref(hosts) : json_null());
    json_object_set_new(m, "ranks_by_host", rb ? json_incref(rb) : json_null());
    json_object_set_new(m, "cores_by_host", cb ? json_incref(cb) : json_null());
    int spans = sweep_tp_spans_hosts(r);
    json_object_set_new(m, "tp_spans_hosts", spans < 0 ? json_null() : json_boolean(spans));
}

/* A cell's axis values, typed as the spec gives them. */
static json_t *cell_axes_json(const sweep_spec *s, const sweep_mesh *c) {
    json_t *o = json_object();
    for (int k = 0; o && k < s->n_axes; k++) {
        const sweep_axis_value *v = &s->axes[k].values[c->value[k]];
        const char *key = s->axes[k].key;
        json_t *j = v->sval                                                                   ? json_string(v->sval)
                    : !strcmp(key, "sequence_parallel") || !strcmp(key, "prefetch") ? json_boolean(v->ival)
                                                                                          : json_integer(v->ival);
        json_object_set_new(o, key, j);
    }
    return o ? o : json_null();
}

/* The axes of a grid: key, short name, values as in cell names. */
static json_t *axes_json(const sweep_spec *s) {
    json_t *a = json_array();
    for (int k = 0; a && k < s->n_axes; k++) {
        json_t *vals = json_array();
        for (int v = 0; vals && v < s->axes[k].n; v++) json_array_append_new(vals, json_string(s->axes[k].values[v].text));
        json_array_append_new(a, json_pack("{s:s, s:s, s:o}", "key", s->axes[k].key, "short", s->axes[k].short_name,
                                           "values", vals ? vals : json_array()));
    }
    return a ? a : json_array();
}

static json_t *mesh_json(const sweep_report_ctx *c, const sweep_result *r, double target) {
    json_t *m = json_object();
    if (!m) return NULL;
    char rec[SWEEP_CELL_NAME_MAX + 32], log[SWEEP_CELL_NAME_MAX + 32];
    snprintf(rec, sizeof rec, c->plan_only ? "runs/%s.plan.json" : "runs/%s.json", r->mesh->name);
    snprintf(log, sizeof log, c->plan_only ? "runs/%s.plan.log" : "runs/%s.log", r->mesh->name);
    if (c->spec->n_axes) {
        json_object_set_new(m, "cell", json_string(r->mesh->name));
        json_object_set_new(m, "axes", cell_axes_json(c->spec, r->mesh));
    }
    json_object_set_new(m, "mesh", json_string(r->mesh->mesh_name));
    json_object_set_new(m, "dp", json_integer(r->mesh->dp));
    json_object_set_new(m, "tp", json_integer(r->mesh->tp));
    json_object_set_new(m, "replicate", json_integer(r->mesh->rep)); /* HSDP's R; dp = R·S */
    json_object_set_new(m, "batch_size", json_integer(r->batch_size));
    json_object_set_new(m, "global_batch", json_integer(sweep_global_batch(r)));
    if (c->spec->batch_mode == SWEEP_BATCH_MATCHED) {
        int n = sweep_grad_accum(r);
        json_object_set_new(m, "grad_accum", n > 0 ? json_integer(n) : json_null());
        json_object_set_new(m, "tokens_per_step", json_integer((json_int_t)sweep_global_batch(r) * r->mesh->seq_len));
    }
    json_object_set_new(m, "status", json_string(r->status));
    json_object_set_new(m, "error", r->error[0] ? json_string(r->error) : json_null());
    json_object_set_new(m, "record", r->record ? json_string(rec) : json_null()); /* only files that exist */
    json_object_set_new(m, "log", json_string(log));
    if (c->plan_only) {
        json_t *fits = sweep_record_get(r->record, "fits");
        json_object_set_new(m, "fits", json_is_boolean(fits) ? json_incref(fits) : json_null());
        json_object_set_new(m, "capped_at_engine_limit", json_boolean(r->capped == SWEEP_CAP_ENGINE));
        mem_json(r, 1, m);
        sweep_cost_mesh_json(c, r, m);
        return m;
    }
    json_object_set_new(m, "resumed", json_boolean(r->resumed));
    json_object_set_new(m, "resumed_from", r->resumed ? json_string(c->stamp ? c->stamp : "") : json_null());
    json_object_set_new(m, "finished", r->resumed && r->finished[0] ? json_string(r->finished) : json_null());
    json_object_set_new(m, "elapsed_s", r->elapsed_s >= 0 ? json_real(r->elapsed_s) : json_null());
    json_object_set_new(m, "tok_s", num_or_null(sweep_record_num(r->record, "summary.tok_s")));
    json_object_set_new(m, "tok_s_per_rank", num_or_null(sweep_record_num(r->record, "summary.tok_s_per_rank")));
    json_object_set_new(m, "mfu", num_or_null(sweep_record_num(r->record, "summary.mfu")));
    json_object_set_new(m, "mfu_share", num_or_null(sweep_mfu_share(r)));
    json_object_set_new(m, "step_ms_median", num_or_null(sweep_record_num(r->record, "summary.step_ms_median")));
    sweep_cost_mesh_json(c, r, m);
    mem_json(r, 0, m);
    json_object_set_new(m, "final_loss", num_or_null(sweep_record_num(r->record, "summary.final_loss")));
    json_object_set_new(m, "final_eval_loss", num_or_null(sweep_record_num(r->record, "summary.final_eval_loss")));
    json_object_set_new(m, "seconds_to_target_loss", num_or_null(sweep_seconds_to_loss(r, target, NULL)));
    hosts_json(r, m);
    if (sweep_batch_searched(c->spec)) json_object_set_new(m, "max_batch_search", search_json(r));
    return m;
}

/* The loss deviation between the meshes of one setting (-1: all cells, without axes). */
static json_t *deviation_json(const sweep_report_ctx *c, int setting) {
    sweep_deviation d;
    json_t *per_step = NULL;
    sweep_loss_deviation_setting(c->res, c->n, setting, &d, &per_step);
    json_t *dev = json_object();
    if (!dev) {
        json_decref(per_step);
        return json_null();
    }
    if (setting >= 0) {
        char label[SWEEP_CELL_NAME_MAX + 1];
        sweep_setting_label(c->spec, &c->spec->cells[setting], -1, ".", label, sizeof label);
        json_object_set_new(dev, "setting", json_string(label));
    }
    json_object_set_new(dev, "global_batch", json_integer(c->spec->cells[setting < 0 ? 0 : setting].global_batch));
    json_object_set_new(dev, "ref", d.ref >= 0 ? json_string(c->res[d.ref].mesh->name) : json_null());
    json_object_set_new(dev, "max_rel", d.at_mesh >= 0 ? num_or_null(d.max_rel) : json_null());
    json_object_set_new(dev, "at_step", d.at_step >= 0 ? json_integer(d.at_step) : json_null());
    json_object_set_new(dev, "at_mesh", d.at_mesh >= 0 ? json_string(c->res[d.at_mesh].mesh->name) : json_null());
    json_object_set_new(dev, "steps_compared", json_integer(d.steps_compared));
    json_object_set_new(dev, "per_step", per_step ? per_step : json_array());
    return dev;
}

/* The charts that exist and are complete, as listed in summary.json and report.md. */
static json_t *charts_json(const sweep_report_ctx *c) {
    json_t *a = json_array();
    char names[SWEEP_MAX_CHARTS][SWEEP_CHART_NAME_MAX];
    int n = sweep_chart_names(c, names, SWEEP_MAX_CHARTS);
    for (int i = 0; a && i < n; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s.png", c->dir, names[i]);
        if (sweep_chart_complete(path)) json_array_append_new(a, json_sprintf("%s.png", names[i]));
    }
    return a ? a : json_array();
}

int sweep_write_summary_json(const sweep_report_ctx *c, char *err, size_t el) {
    const sweep_spec *s = c->spec;
    json_t *root = json_object();
    json_t *meshes = json_array();
    if (!root || !meshes) {
        errmsg_set(err, el, "summary.json: out of memory");
        json_decref(root), json_decref(meshes);
        return -1;
    }
    double target = c->plan_only ? NAN : sweep_target_loss(c);
    json_object_set_new(root, "schema", json_string("meshsweep.sweep/1"));
    json_object_set_new(root, "name", json_string(s->name));
    json_object_set_new(root, "plan_only", json_boolean(c->plan_only));
    json_object_set_new(root, "folder", json_string(c->dir));
    json_object_set_new(root, "created", json_string(c->created_utc ? c->created_utc : ""));
    json_object_set_new(root, "started", json_string(c->started_utc ? c->started_utc : ""));
    json_object_set_new(root, "mode", json_string(mode_name(s->batch_mode)));
    json_object_set_new(root, "world", json_integer(s->world));
    json_object_set_new(root, "model", json_string(s->model));
    json_object_set_new(root, "seq_len", s->seq_len ? json_integer(s->seq_len) : json_null());
    json_object_set_new(root, "steps", json_integer(s->steps));
    json_object_set_new(root, "mem_budget", s->mem_budget ? json_string(s->mem_budget) : json_null());
    json_object_set_new(root, "mem_budget_bytes", s->mem_budget_bytes ? json_integer((json_int_t)s->mem_budget_bytes)
                                                                 : json_null());
    if (s->n_axes) {
        json_object_set_new(root, "axes", axes_json(s));
        json_object_set_new(root, "cells", json_integer(s->n_cells));
        json_object_set_new(root, "settings", json_integer(s->n_settings));
    }
    if (s->batch_mode == SWEEP_BATCH_MATCHED)
        json_object_set_new(root, "global_batch", s->global_batch ? json_integer(s->global_batch) : json_null());
    json_object_set_new(root, "target_loss", num_or_null(target));
    json_object_set_new(root, "target_loss_from", json_string(s->target_loss > 0 ? "spec" : "highest final loss"));
    json_object_set_new(root, "machine", c->machine ? sweep_machine_json(c->machine) : json_null());
    int n_ok = 0;
    for (int i = 0; i < c->n; i++) {
        n_ok += strcmp(c->res[i].status, c->plan_only ? "planned" : "ok") == 0;
        json_t *m = mesh_json(c, &c->res[i], target);
        if (m) json_array_append_new(meshes, m);
    }
    json_object_set_new(root, "meshes", meshes);
    json_object_set_new(root, c->plan_only ? "meshes_planned" : "runs_ok", json_integer(n_ok));
    json_object_set_new(root, "runs_total", json_integer(c->n));
    if ((s->batch_mode == SWEEP_BATCH_GLOBAL || s->batch_mode == SWEEP_BATCH_MATCHED) && !c->plan_only) {
        json_t *dev = s->n_axes ? json_array() : deviation_json(c, -1);
        for (int t = 0; s->n_axes && dev && t < s->n_settings; t++) json_array_append_new(dev, deviation_json(c, t));
        json_object_set_new(root, "loss_deviation", dev ? dev : json_null());
    }
    json_object_set_new(root, "charts", charts_json(c));
    json_object_set_new(root, "report", json_string("report.md"));
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
    json_decref(root);
    if (!text) {
        errmsg_set(err, el, "summary.json: out of memory");
        return -1;
    }
    sweep_sbuf b = {0};
    sweep_sb_printf(&b, "%s\n", text);
    free(text);
    return sweep_sb_write(&b, c->dir, "summary.json", err, el);
}

/* ---- summary.csv ------------------------------------------------------------------------------ */

static void csv_num(sweep_sbuf *b, double x, const char *fmt) {
    if (isfinite(x)) sweep_sb_printf(b, fmt, x);
    sweep_sb_printf(b, ",");
}

int sweep_write_summary_csv(const sweep_report_ctx *c, char *err, size_t el) {
    const sweep_spec *s = c->spec;
    int matched = s->batch_mode == SWEEP_BATCH_MATCHED;
    sweep_sbuf b = {0};
    if (s->n_axes) sweep_sb_printf(&b, "cell,");
    for (int k = 0; k < s->n_axes; k++) sweep_sb_printf(&b, "%s,", s->axes[k].key);
    sweep_sb_printf(&b, "mesh,dp,tp,batch_size,global_batch,%stok_s,tok_s_per_rank,mfu,peak_bytes", matched ? "grad_accum," : "");
    for (int k = 0; k < MEM_NCAT; k++) sweep_sb_printf(&b, ",%s_bytes", mem_cat_names[k]);
    sweep_sb_printf(&b, ",final_loss,final_eval_loss,mfu_share,seconds_to_target_loss,predicted_step_ms,measured_step_ms,"
                        "prediction_error,status\n");
    double target = c->plan_only ? NAN : sweep_target_loss(c);
    const char *peak = c->plan_only ? "peak" : "memory.peak", *cat = c->plan_only ? "by_category" : "memory.by_category";
    for (int i = 0; i < c->n; i++) {
        const sweep_result *r = &c->res[i];
        if (s->n_axes) sweep_sb_printf(&b, "%s,", r->mesh->name);
        for (int k = 0; k < s->n_axes; k++) sweep_sb_printf(&b, "%s,", sweep_cell_value(s, r->mesh, k));
        sweep_sb_printf(&b, "%s,%d,%d,%d,%d,", r->mesh->mesh_name, r->mesh->dp, r->mesh->tp, r->batch_size,
                        sweep_global_batch(r));
        if (matched && sweep_grad_accum(r) > 0) sweep_sb_printf(&b, "%d,", sweep_grad_accum(r));
        else if (matched) sweep_sb_printf(&b, ",");
        csv_num(&b, sweep_record_num(r->record, "summary.tok_s"), "%.1f");
        csv_num(&b, sweep_record_num(r->record, "summary.tok_s_per_rank"), "%.1f");
        csv_num(&b, sweep_record_num(r->record, "summary.mfu"), "%.6f");
        csv_num(&b, sweep_record_num(r->record, peak), "%.0f");
        for (int k = 0; k < MEM_NCAT; k++) {
            char path[64];
            snprintf(path, sizeof path, "%s.%s", cat, mem_cat_names[k]);
            csv_num(&b, sweep_record_num(r->record, path), "%.0f");
        }
        csv_num(&b, sweep_record_num(r->record, "summary.final_loss"), "%.6f");
        csv_num(&b, sweep_record_num(r->record, "summary.final_eval_loss"), "%.6f");
        csv_num(&b, sweep_mfu_share(r), "%.6f");
        csv_num(&b, sweep_seconds_to_loss(r, target, NULL), "%.3f");
        double pm = sweep_predicted_ms(c, r);
        double mm = c->plan_only || strcmp(r->status, "ok") ? NAN : sweep_record_num(r->record, "summary.step_ms_median");
        csv_num(&b, pm, "%.4f");
        csv_num(&b, mm, "%.4f");
        csv_num(&b, isfinite(pm) && isfinite(mm) && mm > 0 ? pm / mm - 1 : NAN, "%.4f");
        sweep_sb_printf(&b, "%s\n", r->status);
    }
    return sweep_sb_write(&b, c->dir, "summary.csv", err, el);
}
