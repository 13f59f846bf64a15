/* core/sweep/charts.c — the sweep's charts: the gnuplot data files written from the run records,
 * and the charts drawn from them (gnuplot started through sweep_launch with the templates in
 * plots/). A chart counts only when complete (PNG up to its IEND chunk, SVG up to </svg>): gnuplot
 * exits 0 on a full disk, so an incomplete file is removed rather than shown.
 * Not the tables (core/sweep/report.c), not report.md (core/sweep/report_md.c). */
#include "core/sweep/charts.h"
#include "core/common/errmsg.h"

#include "core/sweep/grid.h"
#include "core/sweep/launch.h"
#include "core/sweep/report_cost.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- gnuplot data ----------------------------------------------------------------------------- */

static const double MiB = 1048576.0;

static double zero_if_nan(double x) { return isfinite(x) ? x : 0.0; }

/* A mesh's label on bar charts: the mesh, and its status when it has no measurement. */
static void bar_label(const sweep_result *r, char *out, size_t cap) {
    if (strcmp(r->status, "ok") == 0 || strcmp(r->status, "planned") == 0) snprintf(out, cap, "\"%s\"", r->mesh->name);
    else snprintf(out, cap, "\"%s (%s)\"", r->mesh->name, r->status[0] ? r->status : "not run");
}

/* ---- grids: one axis at a time ---------------------------------------------------------------- */

/* The panel of cell c in the charts of axis k: its combination of the other axes' values. */
static int panel_of(const sweep_spec *s, const sweep_mesh *c, int k) {
    int p = 0;
    for (int j = 0; j < s->n_axes; j++)
        if (j != k) p = p * s->axes[j].n + c->value[j];
    return p;
}

/* The cell of mesh `mesh` with value v of axis k in panel p (NULL: none). */
static const sweep_result *cell_at(const sweep_report_ctx *c, int k, int p, int v, int mesh) {
    for (int i = 0; i < c->n; i++) {
        const sweep_mesh *m = c->res[i].mesh;
        if (m->mesh_index == mesh && m->value[k] == v && panel_of(c->spec, m, k) == p) return &c->res[i];
    }
    return NULL;
}

/* axis_<short>.dat: for each panel, for each value of the axis, a block (gnuplot `index`) of rows
 * "tp batch global_batch tok_s cell" in TP order; 0 where there is no measurement. */
static int write_axis_data(const sweep_report_ctx *c, int k, char *err, size_t el) {
    const sweep_spec *s = c->spec;
    const sweep_axis *a = &s->axes[k];
    int np = s->n_settings / a->n;
    sweep_sbuf b = {0};
    sweep_sb_printf(&b, "# %s (%s): one block per panel (the other axes' values) and value, %d x %d blocks\n"
                        "# tp batch_per_dp_rank global_batch tok_s cell\n", a->key, a->short_name, np, a->n);
    for (int p = 0; p < np; p++)
        for (int v = 0; v < a->n; v++) {
            sweep_sb_printf(&b, "%s# panel %d, %s=%s\n", p || v ? "\n\n" : "", p + 1, a->short_name, a->values[v].text);
            for (int tp = 1, done = 0; done < s->n_meshes && tp <= s->world; tp++)
                for (int mi = 0; mi < s->n_meshes; mi++) {
                    if (s->meshes[mi].tp != tp) continue;
                    done++;
                    const sweep_result *r = cell_at(c, k, p, v, mi);
                    if (!r) continue;
                    double tok = sweep_record_num(r->record, c->plan_only ? "time.tok_s" : "summary.tok_s");
                    sweep_sb_printf(&b, "%d %d %d %.3f %s\n", tp, r->batch_size, sweep_global_batch(r), zero_if_nan(tok),
                                    r->mesh->name);
                }
        }
    char name[64];
    snprintf(name, sizeof name, "axis_%s.dat", a->short_name);
    return sweep_sb_write(&b, c->dir, name, err, el);
}

int sweep_write_plot_data(const sweep_report_ctx *c, char *err, size_t el) {
    const sweep_spec *s = c->spec;
    for (int i = 0; i < c->n; i++) {
        const sweep_result *r = &c->res[i];
        double tok_per_step = (double)sweep_global_batch(r) * r->mesh->seq_len;
        if (sweep_n_steps(r) > 0) {
            sweep_sbuf b = {0};
            sweep_sb_printf(&b, "# %s: training loss per step\n# step loss tokens_seen seconds (sum of step times)\n",
                            r->mesh->name);
            json_t *steps = json_object_get(r->record, "steps");
            double t = 0;
            for (size_t k = 0; k < json_array_size(steps); k++) {
                json_t *st = json_array_get(steps, k);
                json_t *lv = json_object_get(st, "loss");
                long long step = json_integer_value(json_object_get(st, "step"));
                t += json_number_value(json_object_get(st, "ms")) / 1000.0;
                if (json_is_number(lv) && isfinite(json_number_value(lv)))
                    sweep_sb_printf(&b, "%lld %.7g %.0f %.4f\n", step, json_number_value(lv), (double)step * tok_per_step, t);
                else
                    sweep_sb_printf(&b, "%lld NaN %.0f %.4f\n", step, (double)step * tok_per_step, t);
            }
            char name[SWEEP_CELL_NAME_MAX + 16];
            snprintf(name, sizeof name, "loss_%s.dat", r->mesh->name);
            if (sweep_sb_write(&b, c->dir, name, err, el)) return -1;
        }
        if (sweep_n_steps(r) > 0 && sweep_n_evals(r) > 0) {
            sweep_sbuf b = {0};
            sweep_sb_printf(&b, "# %s: eval loss\n# step eval_loss tokens_seen seconds\n", r->mesh->name);
            json_t *ev = json_object_get(r->record, "eval");
            json_t *steps = json_object_get(r->record, "steps");
            for (size_t k = 0; k < json_array_size(ev); k++) {
                json_t *e = json_array_get(ev, k);
                json_t *lv = json_object_get(e, "loss");
                long long step = json_integer_value(json_object_get(e, "step"));
                double t = 0; /* training seconds up to that step */
                for (size_t j = 0; j < json_array_size(steps); j++) {
                    json_t *st = json_array_get(steps, j);
                    if (json_integer_value(json_object_get(st, "step")) > step) break;
                    t += json_number_value(json_object_get(st, "ms")) / 1000.0;
                }
                if (json_is_number(lv))
                    sweep_sb_printf(&b, "%lld %.7g %.0f %.4f\n", step, json_number_value(lv), (double)step * tok_per_step, t);
            }
            char name[SWEEP_CELL_NAME_MAX + 16];
            snprintf(name, sizeof name, "eval_%s.dat", r->mesh->name);
            if (sweep_sb_write(&b, c->dir, name, err, el)) return -1;
        }
    }
    sweep_sbuf t = {0}, m = {0}, mb = {0};
    sweep_sb_printf(&t, "# mesh tok_s tok_s_per_rank mfu_percent mfu_share_percent   (0: no measurement / n/a)\n"
                        "# mfu: against one core per rank; mfu_share: against peak x min(1, cores/ranks) per host\n");
    sweep_sb_printf(&m, "# memory per rank in MiB (categories at the moment of the total peak of the most loaded rank;\n"
                  "# older records without memory.at_peak: peak per category)\n# mesh");
    for (int k = 0; k < MEM_NCAT; k++) sweep_sb_printf(&m, " %s", mem_cat_names[k]);
    sweep_sb_printf(&m, " peak_total\n");
    sweep_sb_printf(&mb, "# %s batch per mesh\n# tp dp batch_per_dp_rank global_batch mesh k (its index among the meshes of "
                         "its TP degree, HSDP meshes sharing one: where its label stacks)\n",
              sweep_batch_searched(s) ? "largest fitting" : "configured");
    for (int i = 0; i < c->n; i++) {
        const sweep_result *r = &c->res[i];
        char label[SWEEP_CELL_NAME_MAX + 32];
        bar_label(r, label, sizeof label);
        sweep_sb_printf(&t, "%s %.3f %.3f %.4f %.4f\n", label, zero_if_nan(sweep_record_num(r->record, "summary.tok_s")),
                        zero_if_nan(sweep_record_num(r->record, "summary.tok_s_per_rank")),
                        100 * zero_if_nan(sweep_record_num(r->record, "summary.mfu")), 100 * zero_if_nan(sweep_mfu_share(r)));
        sweep_sb_printf(&m, "%s", label);
        for (int k = 0; k < MEM_NCAT; k++) {
            char path[64];
            snprintf(path, sizeof path, c->plan_only ? "by_category.%s" : "memory.at_peak.%s", mem_cat_names[k]);
            double v = sweep_record_num(r->record, path);
            if (isnan(v)) {
                snprintf(path, sizeof path, "memory.by_category.%s", mem_cat_names[k]);
                v = sweep_record_num(r->record, path);
            }
            sweep_sb_printf(&m, " %.4f", zero_if_nan(v) / MiB);
        }
        sweep_sb_printf(&m, " %.4f\n", zero_if_nan(sweep_record_num(r->record, c->plan_only ? "peak" : "memory.peak")) / MiB);
    }
    /* sorted by TP degree so the lines go left to right */
    for (int tp = 1, done = 0; done < c->n; tp++)
        for (int i = 0, k = 0; i < c->n; i++) {
            const sweep_result *r = &c->res[i];
            if (r->mesh->tp != tp) continue;
            sweep_sb_printf(&mb, "%d %d %d %d %s %d\n", r->mesh->tp, r->mesh->dp, r->batch_size, r->mesh->dp * r->batch_size,
                      r->mesh->name, k++);
            done++;
        }
    if (sweep_sb_write(&t, c->dir, "throughput.dat", err, el)) {
        free(m.p), free(mb.p);
        return -1;
    }
    if (sweep_sb_write(&m, c->dir, "memory.dat", err, el)) {
        free(mb.p);
        return -1;
    }
    if (sweep_sb_write(&mb, c->dir, "max_batch.dat", err, el)) return -1;
    for (int k = 0; k < s->n_axes; k++)
        if (write_axis_data(c, k, err, el)) return -1;
    return sweep_write_prediction_data(c, err, el);
}

/* 1 when a mesh has a predicted step: only then is there a prediction chart */
static int any_prediction(const sweep_report_ctx *c) {
    for (int i = 0; i < c->n; i++) if (isfinite(sweep_predicted_ms(c, &c->res[i]))) return 1;
    return 0;
}

/* ---- charts ----------------------------------------------------------------------------------- */

typedef struct chart {
    char out[SWEEP_CHART_NAME_MAX];  /* file name without extension */
    const char *script;    /* template in plots/ */
    int axis;              /* a grid's chart of one axis: its index; -1 otherwise */
    const char *metric;    /* axis charts: "batch" or "tok_s" */
} chart;

/* The charts of this sweep, in the order of the report. A grid has no max_batch chart of all cells
 * (one line through cells of different settings would mean nothing): one per axis instead. */
static int chart_list(const sweep_report_ctx *c, chart *out, int cap) {
    static const chart run[] = {{"loss", "loss.gp", -1, NULL},         {"loss_tokens", "loss.gp", -1, NULL},
                                {"loss_time", "loss.gp", -1, NULL},    {"throughput", "throughput.gp", -1, NULL},
                                {"memory", "memory.gp", -1, NULL},     {"max_batch", "max_batch.gp", -1, NULL}};
    const sweep_spec *s = c->spec;
    int n = 0;
    for (int i = c->plan_only ? 4 : 0; i < 6 && n < cap; i++)
        if (i < 5 || s->n_axes == 0) out[n++] = run[i];
    for (int k = 0; k < s->n_axes; k++)
        for (int m = 0; m < (c->plan_only ? 1 : 2) && n < cap; m++) {
            chart *ch = &out[n++];
            snprintf(ch->out, sizeof ch->out, "%s_%s", m ? "throughput" : "max_batch", s->axes[k].short_name);
            ch->script = "axis.gp", ch->axis = k, ch->metric = m ? "tok_s" : "batch";
        }
    static const chart pred = {"prediction", "prediction.gp", -1, NULL};   /* measured and predicted step time */
    if (any_prediction(c) && n < cap) out[n++] = pred;
    return n;
}

int sweep_chart_names(const sweep_report_ctx *c, char (*names)[SWEEP_CHART_NAME_MAX], int cap) {
    chart list[SWEEP_MAX_CHARTS];
    int n = chart_list(c, list, SWEEP_MAX_CHARTS);
    for (int i = 0; i < n && i < cap; i++) memcpy(names[i], list[i].out, sizeof list[i].out);
    return n < cap ? n : cap;
}

int sweep_chart_complete(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char head[8] = {0}, tail[64];
    size_t nh = fread(head, 1, sizeof head, f);
    if (fseek(f, -(long)sizeof tail, SEEK_END) != 0) rewind(f);
    size_t n = fread(tail, 1, sizeof tail, f);
    fclose(f);
    static const unsigned char png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (nh == 8 && memcmp(head, png_sig, 8) == 0) { /* a PNG ends with its IEND chunk */
        static const unsigned char iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
        return n >= 12 && memcmp(tail + n - 12, iend, 12) == 0;
    }
    size_t len = strlen(path);
    int svg = (len > 4 && strcmp(path + len - 4, ".svg") == 0) || (len > 8 && strcmp(path + len - 8, ".svg.tmp") == 0);
    if (!svg || nh == 0) return 0;
    while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == '\r' || tail[n - 1] == ' ' || tail[n - 1] == '\t')) n--;
    return n >= 6 && memcmp(tail + n - 6, "</svg>", 6) == 0;
}

/* The -e text of an axis chart: the axis, its values, and the panels (the other axes' values). */
static void axis_vars(const sweep_report_ctx *c, const chart *ch, sweep_sbuf *b) {
    const sweep_spec *s = c->spec;
    const sweep_axis *a = &s->axes[ch->axis];
    sweep_sb_printf(b, "; axis='%s'; axiskey='%s'; metric='%s'; data='axis_%s.dat'; values='", a->short_name, a->key,
                    ch->metric, a->short_name);
    for (int v = 0; v < a->n; v++) sweep_sb_printf(b, "%s%s", v ? " " : "", a->values[v].text);
    sweep_sb_printf(b, "'; panels='");
    int np = s->n_settings / a->n;
    for (int p = 0; p < np; p++) {
        char label[SWEEP_CELL_NAME_MAX + 1] = "";
        for (int i = 0; i < c->n; i++)
            if (panel_of(s, c->res[i].mesh, ch->axis) == p) {
                sweep_setting_label(s, c->res[i].mesh, ch->axis, ",", label, sizeof label);
                break;
            }
        sweep_sb_printf(b, "%s%s", p ? " " : "", label[0] ? label : "all");
    }
    sweep_sb_printf(b, "'");
}

/* The -e text for one chart (malloc'd; NULL out of memory). Every value is generated by us from names
 * that cannot hold quotes (cell names are [A-Za-z0-9._=:-], the sweep name is [A-Za-z0-9._-], sizes
 * are checked). */
static char *chart_vars(const sweep_report_ctx *c, const chart *ch, const char *fmt) {
    const sweep_spec *s = c->spec;
    sweep_sbuf b = {0};
    const char *mode = sweep_batch_searched(s) ? "max" : "fixed";
    sweep_sb_printf(&b, "fmt='%s'; out='.%s.%s.tmp'; name='%s'; world=%d; n=%d; mode='%s'; budget='%s'; budget_mib=%.4f; ",
              fmt, ch->out, fmt, s->name, s->world, c->n, mode,
              s->mem_budget ? s->mem_budget : "", s->mem_budget_bytes ? (double)s->mem_budget_bytes / MiB : -1.0);
    if (s->n_axes) sweep_sb_printf(&b, "rotate=1; width=%d; ", c->n > 12 ? 1440 : 1120);
    sweep_sb_printf(&b, "plan_only=%d; ", c->plan_only);
    sweep_sb_printf(&b, "xaxis='%s'; meshes='", strcmp(ch->out, "loss_tokens") == 0 ? "tokens"
                                                 : strcmp(ch->out, "loss_time") == 0 ? "time" : "step");
    int k = 0;
    for (int i = 0; i < c->n; i++)
        if (sweep_n_steps(&c->res[i]) > 0) sweep_sb_printf(&b, "%s%s", k++ ? " " : "", c->res[i].mesh->name);
    sweep_sb_printf(&b, "'; evals='");
    k = 0;
    for (int i = 0; i < c->n; i++)
        if (sweep_n_steps(&c->res[i]) > 0 && sweep_n_evals(&c->res[i]) > 0) sweep_sb_printf(&b, "%s%s", k++ ? " " : "", c->res[i].mesh->name);
    sweep_sb_printf(&b, "'; evalidx='");
    k = 0;
    int pos = 0;
    for (int i = 0; i < c->n; i++) {
        if (sweep_n_steps(&c->res[i]) == 0) continue;
        pos++;
        if (sweep_n_evals(&c->res[i]) > 0) sweep_sb_printf(&b, "%s%d", k++ ? " " : "", pos);
    }
    sweep_sb_printf(&b, "'");
    if (ch->axis >= 0) axis_vars(c, ch, &b);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* One chart in one format into its temp file ".<out>.<fmt>.tmp": 1 complete, 0 not (why in err when
 * err is still empty), -1 interrupted (Ctrl-C reached gnuplot). */
static int draw_one(const sweep_report_ctx *c, const chart *ch, const char *fmt, const char *log, const char *common,
                    char *err, size_t el) {
    char script[4200], tmp[PATH_MAX + 64];
    char *vars = chart_vars(c, ch, fmt);
    if (!vars) {
        if (!err[0]) errmsg_set(err, el, "chart %s.%s: out of memory", ch->out, fmt);
        return 0;
    }
    snprintf(script, sizeof script, "%s/%s", c->plots_dir, ch->script);
    char *argv[] = {(char *)c->gnuplot, "-e", vars, (char *)common, script, NULL};
    sweep_launch_opts o = {.argv = argv, .log_path = log, .append = 1, .cwd = c->dir, .timeout_s = 120};
    sweep_launch_result r;
    snprintf(tmp, sizeof tmp, "%s/.%s.%s.tmp", c->dir, ch->out, fmt);
    int rc = sweep_launch(&o, &r);
    free(vars);
    if (r.outcome == SWEEP_LAUNCH_INTERRUPTED || sweep_launch_interrupted()) return -1;
    struct stat st;
    int ran = rc == 0 && r.outcome == SWEEP_LAUNCH_EXITED && r.exit_code == 0;
    int wrote = ran && stat(tmp, &st) == 0 && st.st_size > 0;
    if (wrote && sweep_chart_complete(tmp)) return 1; /* gnuplot exits 0 on a full disk: checked */
    if (!err[0])
        errmsg_set(err, el, "chart %s.%s: %s", ch->out, fmt,
                   rc != 0 ? r.error
                   : wrote ? "gnuplot wrote an incomplete file (disk full?); removed"
                   : ran   ? "gnuplot wrote no output"
                           : "gnuplot failed (see gnuplot.log)");
    return 0;
}

/* Every chart is drawn into a temp file first and moved into place only once all are drawn: Ctrl-C while
 * drawing leaves the folder's charts as they were (an earlier invocation's set, or none), never a mix. */
int sweep_draw_charts(const sweep_report_ctx *c, char *err, size_t el) {
    char log[4200], common[4200];
    snprintf(log, sizeof log, "%s/gnuplot.log", c->dir);
    snprintf(common, sizeof common, "%s/common.gp", c->plots_dir);
    if (truncate(log, 0) != 0 && errno != ENOENT) {
        errmsg_set(err, el, "cannot truncate %s: %s", log, strerror(errno));
        return -1;
    }
    err[0] = '\0';
    chart charts[SWEEP_MAX_CHARTS];
    int n_charts = chart_list(c, charts, SWEEP_MAX_CHARTS), failed = 0, interrupted = 0;
    unsigned char done[SWEEP_MAX_CHARTS][2] = {{0}};
    for (int i = 0; i < n_charts && !interrupted; i++)
        for (int f = 0; f < 2 && !interrupted; f++) {
            int d = draw_one(c, &charts[i], f ? "svg" : "png", log, common, err, el);
            interrupted = d < 0;
            done[i][f] = d > 0;
        }
    for (int i = 0; i < n_charts; i++)
        for (int f = 0; f < 2; f++) {
            char tmp[PATH_MAX + 64], final[PATH_MAX + 64];
            const char *fmt = f ? "svg" : "png";
            snprintf(tmp, sizeof tmp, "%s/.%s.%s.tmp", c->dir, charts[i].out, fmt);
            snprintf(final, sizeof final, "%s/%s.%s", c->dir, charts[i].out, fmt);
            if (!interrupted && done[i][f] && rename(tmp, final) == 0) continue;
            if (!interrupted && done[i][f] && !err[0]) errmsg_set(err, el, "cannot move %s into place: %s", tmp, strerror(errno));
            unlink(tmp);
            if (interrupted) continue;
            unlink(final); /* no chart from an earlier invocation stands in for this one */
            failed++;
        }
    if (interrupted) {
        errmsg_set(err, el, "interrupted while drawing the charts");
        return SWEEP_CHARTS_INTERRUPTED;
    }
    if (!any_prediction(c)) {   /* no prediction chart of an earlier invocation stays */
        char old[PATH_MAX + 64];
        for (int f = 0; f < 2; f++) { snprintf(old, sizeof old, "%s/prediction.%s", c->dir, f ? "svg" : "png"); unlink(old); }
    }
    return failed ? -1 : 0;
}
