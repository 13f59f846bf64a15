/* core/sweep/report_grid.c — the parts of report.md that a grid or a matched global batch adds: the
 * mode in the first paragraph, the loss agreement between meshes and why it holds, and the tables
 * that answer "the largest batch per TP degree for each value of each axis" and "the fastest cell".
 * A spec without axes and without a matched global batch gets none of this (its report is as it was).
 * Not the rest of the page (core/sweep/report_md.c), not the tables' files (core/sweep/report.c). */
#include "core/sweep/report.h"
#include "core/sweep/grid.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_good(const sweep_report_ctx *c, const sweep_result *r) {
    return strcmp(r->status, c->plan_only ? "planned" : "ok") == 0;
}

/* Tokens/s of a cell: measured, or with --plan-only the plan's prediction when it makes one. */
static double cell_tok_s(const sweep_report_ctx *c, const sweep_result *r) {
    return sweep_record_num(r->record, c->plan_only ? "time.tok_s" : "summary.tok_s");
}

/* The meshes in TP order: the columns of every table here. */
static int tp_order(const sweep_spec *s, int *order) {
    int n = 0;
    for (int tp = 1; n < s->n_meshes && tp <= s->world; tp++)
        for (int i = 0; i < s->n_meshes; i++)
            if (s->meshes[i].tp == tp) order[n++] = i;
    return n;
}

static const sweep_result *cell_of(const sweep_report_ctx *c, int mesh, int setting) {
    for (int i = 0; i < c->n; i++)
        if (c->res[i].mesh->mesh_index == mesh && c->res[i].mesh->setting == setting) return &c->res[i];
    return NULL;
}

/* ---- the first paragraph ---------------------------------------------------------------------- */

void sweep_md_mode(sweep_sbuf *b, const sweep_report_ctx *c) {
    const sweep_spec *s = c->spec;
    char g[32];
    if (s->global_batch) snprintf(g, sizeof g, "%d", s->global_batch);
    else snprintf(g, sizeof g, "G (per cell, axis gb)");
    switch (s->batch_mode) {
    case SWEEP_BATCH_MATCHED:
        sweep_sb_printf(b, "Mode: **matched global batch**: every mesh trains on %s sequences per optimizer step, as its "
                           "largest micro-batch that fits the memory budget and divides %s / dp, accumulated over "
                           "%s / (dp × micro-batch) micro-batches. ", g, g, g);
        break;
    case SWEEP_BATCH_GLOBAL:
        sweep_sb_printf(b, "Mode: **equivalence**: one global batch of %s sequences on every mesh, all at once (%s / dp "
                           "per DP rank). ", g, g);
        break;
    case SWEEP_BATCH_MAX:
        sweep_sb_printf(b, "Mode: **largest batch**: each cell runs at the largest batch per DP rank that fits the "
                           "memory budget%s. ", c->plan_only ? " in its plan" : ", searched on that cell");
        break;
    default: sweep_sb_printf(b, "Mode: **fixed batch** per DP rank, as the spec gives it. ");
    }
    if (s->n_axes == 0) return;
    sweep_sb_printf(b, "Grid: %d meshes", s->n_meshes);
    for (int k = 0; k < s->n_axes; k++) {
        sweep_sb_printf(b, " × %s (%s:", s->axes[k].key, s->axes[k].short_name);
        for (int v = 0; v < s->axes[k].n; v++) sweep_sb_printf(b, "%s %s", v ? "," : "", s->axes[k].values[v].text);
        sweep_sb_printf(b, ")");
    }
    sweep_sb_printf(b, " = %d cells. ", s->n_cells);
}

/* The largest deviation over the settings (without axes: the one group of meshes); *setting: where. */
static void worst_deviation(const sweep_report_ctx *c, sweep_deviation *d, int *setting) {
    const sweep_spec *s = c->spec;
    *setting = -1;
    sweep_loss_deviation_setting(c->res, c->n, -1, d, NULL);
    if (s->n_axes == 0) return;
    d->at_mesh = -1;
    for (int t = 0; t < s->n_settings; t++) {
        sweep_deviation e;
        sweep_loss_deviation_setting(c->res, c->n, t, &e, NULL);
        if (e.at_mesh >= 0 && (d->at_mesh < 0 || e.max_rel > d->max_rel)) *d = e, *setting = t;
    }
}

void sweep_md_matched_agreement(sweep_sbuf *b, const sweep_report_ctx *c) {
    sweep_deviation d;
    int t;
    worst_deviation(c, &d, &t);
    char label[SWEEP_CELL_NAME_MAX + 1] = "";
    if (t >= 0) sweep_setting_label(c->spec, &c->spec->cells[t], -1, " ", label, sizeof label);
    if (d.at_mesh < 0) {
        sweep_sb_printf(b, "Loss deviation between meshes: nothing to compare (fewer than two meshes produced losses). ");
        return;
    }
    sweep_sb_printf(b, "Largest relative loss deviation between meshes%s%s: **%.3g** (%s against %s at step %d, %d steps "
                       "compared). They coincide because every mesh takes the same global batch in the same data "
                       "order: each optimizer step sees the same sequences and averages the loss and the gradient over "
                       "all of them, and the mesh and the micro-batch only split that work differently, so what is "
                       "left is floating-point rounding. ",
                    t >= 0 ? " of one setting, at " : "", label, d.max_rel, c->res[d.at_mesh].mesh->name,
                    c->res[d.ref].mesh->name, d.at_step, d.steps_compared);
}

void sweep_md_fastest_planned(sweep_sbuf *b, const sweep_report_ctx *c) {
    int best = -1;
    for (int i = 0; i < c->n; i++) {
        double t = cell_tok_s(c, &c->res[i]);
        if (is_good(c, &c->res[i]) && isfinite(t) && (best < 0 || t > cell_tok_s(c, &c->res[best]))) best = i;
    }
    if (best >= 0)
        sweep_sb_printf(b, "Fastest cell (predicted by the plan): **%s**, %.0f tokens/s. ", c->res[best].mesh->name,
                        cell_tok_s(c, &c->res[best]));
    else
        sweep_sb_printf(b, "The plans predict no step time, so they name no fastest cell: a run does. ");
}

/* ---- the tables --------------------------------------------------------------------------------- */

/* One table entry: the cell's batch per DP rank (× micro-batches at a matched global batch), or why none. */
static void batch_text(const sweep_report_ctx *c, const sweep_result *r, char *out, size_t cap) {
    if (!r) {
        snprintf(out, cap, "n/a");
        return;
    }
    int n = c->spec->batch_mode == SWEEP_BATCH_MATCHED ? sweep_grad_accum(r) : 0;
    char acc[32] = "";
    if (n > 0) snprintf(acc, sizeof acc, " × %d", n);
    if (r->batch_size > 0)
        snprintf(out, cap, "%d%s%s%s%s", r->batch_size, acc, sweep_cap_text(r->capped),
                 is_good(c, r) ? "" : " ", is_good(c, r) ? "" : r->status);
    else snprintf(out, cap, "— %s", r->status[0] ? r->status : "not run");
}

static void table_head(sweep_sbuf *b, const sweep_spec *s, const char *first, const int *order, int nm) {
    sweep_sb_printf(b, "| %s |", first);
    for (int j = 0; j < nm; j++) sweep_sb_printf(b, " tp %d (%s) |", s->meshes[order[j]].tp, s->meshes[order[j]].mesh_name);
    sweep_sb_printf(b, "\n|---|");
    for (int j = 0; j < nm; j++) sweep_sb_printf(b, "---:|");
    sweep_sb_printf(b, "\n");
}

/* Every setting against every TP degree: batch (or tokens/s with tok). */
static void setting_table(sweep_sbuf *b, const sweep_report_ctx *c, const int *order, int nm, int tok) {
    const sweep_spec *s = c->spec;
    table_head(b, s, "setting", order, nm);
    for (int t = 0; t < s->n_settings; t++) {
        char label[SWEEP_CELL_NAME_MAX + 1];
        sweep_sb_printf(b, "| %s |", sweep_setting_label(s, &s->cells[t], -1, " ", label, sizeof label));
        for (int j = 0; j < nm; j++) {
            const sweep_result *r = cell_of(c, order[j], t);
            char text[96];
            if (!tok) batch_text(c, r, text, sizeof text);
            else if (r && is_good(c, r) && isfinite(cell_tok_s(c, r))) snprintf(text, sizeof text, "%.0f", cell_tok_s(c, r));
            else snprintf(text, sizeof text, "%s", r && r->status[0] ? r->status : "n/a");
            if (r && (is_good(c, r) || r->record))
                sweep_sb_printf(b, " [%s](runs/%s%s.json) |", text, r->mesh->name, c->plan_only ? ".plan" : "");
            else sweep_sb_printf(b, " %s |", text);
        }
        sweep_sb_printf(b, "\n");
    }
    sweep_sb_printf(b, "\n");
}

/* For each value of axis k and each TP degree: the largest batch among the cells with that value. */
static void axis_table(sweep_sbuf *b, const sweep_report_ctx *c, int k, const int *order, int nm) {
    const sweep_spec *s = c->spec;
    const sweep_axis *a = &s->axes[k];
    sweep_sb_printf(b, "### %s (%s)\n\n", a->key, a->short_name);
    if (s->n_axes > 1)
        sweep_sb_printf(b, "The largest batch per DP rank among the cells with that value (the other axes' values of that "
                           "cell in brackets).\n\n");
    char first[80];
    snprintf(first, sizeof first, "%s", a->short_name);
    table_head(b, s, first, order, nm);
    for (int v = 0; v < a->n; v++) {
        sweep_sb_printf(b, "| %s=%s |", a->short_name, a->values[v].text);
        for (int j = 0; j < nm; j++) {
            const sweep_result *best = NULL;
            for (int i = 0; i < c->n; i++) {
                const sweep_result *r = &c->res[i];
                if (r->mesh->mesh_index != order[j] || r->mesh->value[k] != v || !is_good(c, r)) continue;
                if (!best || r->batch_size > best->batch_size) best = r;
            }
            char text[96], others[SWEEP_CELL_NAME_MAX + 1] = "";
            if (!best) {
                sweep_sb_printf(b, " — |");
                continue;
            }
            batch_text(c, best, text, sizeof text);
            if (s->n_axes > 1) sweep_setting_label(s, best->mesh, k, " ", others, sizeof others);
            sweep_sb_printf(b, " %s%s%s%s |", text, others[0] ? " (" : "", others, others[0] ? ")" : "");
        }
        sweep_sb_printf(b, "\n");
    }
    sweep_sb_printf(b, "\n");
}

void sweep_md_grid_tables(sweep_sbuf *b, const sweep_report_ctx *c) {
    const sweep_spec *s = c->spec;
    if (s->n_axes == 0) return;
    int *order = calloc((size_t)s->n_meshes, sizeof *order);
    if (!order) {
        b->oom = 1;
        return;
    }
    int nm = tp_order(s, order);
    int matched = s->batch_mode == SWEEP_BATCH_MATCHED;
    sweep_sb_printf(b, "## Largest batch per TP degree\n\n%s per DP rank%s%s; each entry links its %s.\n\n",
                    sweep_batch_searched(s) ? "The largest batch" : "The batch", matched ? " × micro-batches per step" : "",
                    c->plan_only ? " as planned" : "", c->plan_only ? "plan" : "run record");
    sweep_sb_printf(b, "### Every setting\n\n");
    setting_table(b, c, order, nm, 0);
    for (int k = 0; k < s->n_axes; k++) axis_table(b, c, k, order, nm);
    int any_tok = 0;
    for (int i = 0; i < c->n; i++) any_tok |= is_good(c, &c->res[i]) && isfinite(cell_tok_s(c, &c->res[i]));
    if (any_tok) {
        sweep_sb_printf(b, "## Tokens per second per TP degree%s\n\n", c->plan_only ? " (predicted by the plan)" : "");
        setting_table(b, c, order, nm, 1);
    }
    free(order);
}

void sweep_md_deviation_section(sweep_sbuf *b, const sweep_report_ctx *c) {
    const sweep_spec *s = c->spec;
    sweep_sb_printf(b, "## Loss agreement between meshes\n\n");
    for (int t = 0; t < s->n_settings; t++) {
        sweep_deviation d;
        char label[SWEEP_CELL_NAME_MAX + 1];
        sweep_loss_deviation_setting(c->res, c->n, s->n_axes ? t : -1, &d, NULL);
        sweep_setting_label(s, &s->cells[t], -1, " ", label, sizeof label);
        if (s->n_axes) sweep_sb_printf(b, "- %s: ", label);
        if (d.at_mesh >= 0)
            sweep_sb_printf(b, "Largest relative loss deviation from %s over %d steps: **%.3g** (mesh %s, step %d).\n",
                            c->res[d.ref].mesh->name, d.steps_compared, d.max_rel, c->res[d.at_mesh].mesh->name,
                            d.at_step);
        else
            sweep_sb_printf(b, "Nothing to compare (fewer than two meshes produced losses).\n");
    }
    sweep_sb_printf(b, "\n");
}
