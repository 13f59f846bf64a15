/* core/sweep/charts.c — the sweep's charts: the gnuplot data files written from the run records,
 * and the charts drawn from them (gnuplot started through sweep_launch with the templates in
 * plots/). A chart counts only when complete (PNG up to its IEND chunk, SVG up to </svg>): gnuplot
 * exits 0 on a full disk, so an incomplete file is removed rather than shown.
 * Not the tables (core/sweep/report.c), not report.md (core/sweep/report_md.c). */
#include "core/sweep/charts.h"
#include "core/common/errmsg.h"

#include "core/sweep/launch.h"
#include "core/sweep/report_cost.h"

#include <errno.h>
#include <jansson.h>
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

int sweep_write_plot_data(const sweep_report_ctx *c, char *err, size_t el) {
    const sweep_spec *s = c->spec;
    for (int i = 0; i < c->n; i++) {
        const sweep_result *r = &c->res[i];
        double tok_per_step = (double)sweep_global_batch(r) * s->seq_len;
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
            char name[96];
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
            char name[96];
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
    sweep_sb_printf(&mb, "# %s batch per mesh\n# tp dp batch_per_dp_rank global_batch mesh\n",
              s->batch_mode == SWEEP_BATCH_MAX ? "largest fitting" : "configured");
    for (int i = 0; i < c->n; i++) {
        const sweep_result *r = &c->res[i];
        char label[80];
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
        for (int i = 0; i < c->n; i++) {
            const sweep_result *r = &c->res[i];
            if (r->mesh->tp != tp) continue;
            sweep_sb_printf(&mb, "%d %d %d %d %s\n", r->mesh->tp, r->mesh->dp, r->batch_size, r->mesh->dp * r->batch_size,
                      r->mesh->name);
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
    return sweep_write_prediction_data(c, err, el);
}

/* ---- charts ----------------------------------------------------------------------------------- */

typedef struct chart {
    const char *out;       /* file name without extension */
    const char *script;    /* template in plots/ */
} chart;

static const chart charts[] = {
    {"loss", "loss.gp"}, {"loss_tokens", "loss.gp"}, {"loss_time", "loss.gp"}, {"throughput", "throughput.gp"},
    {"memory", "memory.gp"}, {"max_batch", "max_batch.gp"}, {"prediction", "prediction.gp"},
};
#define N_CHARTS ((int)(sizeof charts / sizeof charts[0]))

const char *const *sweep_chart_names(int plan_only) {
    static const char *const all[] = {"loss", "loss_tokens", "loss_time", "throughput", "memory", "max_batch",
                                      "prediction", NULL};
    static const char *const plans[] = {"memory", "max_batch", "prediction", NULL};
    return plan_only ? plans : all;
}

int sweep_chart_wanted(const sweep_report_ctx *c, const char *name) {
    if (strcmp(name, "prediction")) return 1;
    for (int i = 0; i < c->n; i++) if (isfinite(sweep_predicted_ms(c, &c->res[i]))) return 1;
    return 0;
}

static int is_drawn(const sweep_report_ctx *c, const char *name) {
    for (const char *const *n = sweep_chart_names(c->plan_only); *n; n++)
        if (strcmp(*n, name) == 0) return sweep_chart_wanted(c, name);
    return 0;
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

/* The -e text for one chart. Every value is generated by us from names that cannot hold quotes
 * (mesh names are digits and 'x', the sweep name is [A-Za-z0-9._-], sizes are checked). */
static void chart_vars(const sweep_report_ctx *c, const chart *ch, const char *fmt, char *out, size_t cap) {
    const sweep_spec *s = c->spec;
    sweep_sbuf b = {0};
    sweep_sb_printf(&b, "fmt='%s'; out='.%s.%s.tmp'; name='%s'; world=%d; n=%d; mode='%s'; budget='%s'; budget_mib=%.4f; ",
              fmt, ch->out, fmt, s->name, s->world, c->n, s->batch_mode == SWEEP_BATCH_MAX ? "max" : "fixed",
              s->mem_budget ? s->mem_budget : "", s->mem_budget_bytes ? (double)s->mem_budget_bytes / MiB : -1.0);
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
    snprintf(out, cap, "%s", b.oom || !b.p ? "" : b.p);
    free(b.p);
}

int sweep_draw_charts(const sweep_report_ctx *c, char *err, size_t el) {
    char log[4200], common[4200];
    snprintf(log, sizeof log, "%s/gnuplot.log", c->dir);
    snprintf(common, sizeof common, "%s/common.gp", c->plots_dir);
    if (truncate(log, 0) != 0 && errno != ENOENT) {
        errmsg_set(err, el, "cannot truncate %s: %s", log, strerror(errno));
        return -1;
    }
    int failed = 0;
    err[0] = '\0';
    for (int i = 0; i < N_CHARTS; i++) {
        if (!sweep_chart_wanted(c, charts[i].out)) {   /* nothing to show: no chart of an earlier invocation stays */
            char old[4200];
            for (int f = 0; f < 2; f++) { snprintf(old, sizeof old, "%s/%s.%s", c->dir, charts[i].out, f ? "svg" : "png"); unlink(old); }
            continue;
        }
        for (int f = 0; f < 2 && is_drawn(c, charts[i].out); f++) {
            const char *fmt = f ? "svg" : "png";
            char vars[8192], script[4200], tmp[256], final[256];
            chart_vars(c, &charts[i], fmt, vars, sizeof vars);
            snprintf(script, sizeof script, "%s/%s", c->plots_dir, charts[i].script);
            char *argv[] = {(char *)c->gnuplot, "-e", vars, common, script, NULL};
            sweep_launch_opts o = {.argv = argv, .log_path = log, .append = 1, .cwd = c->dir, .timeout_s = 120};
            sweep_launch_result r;
            snprintf(tmp, sizeof tmp, "%s/.%s.%s.tmp", c->dir, charts[i].out, fmt);
            snprintf(final, sizeof final, "%s/%s.%s", c->dir, charts[i].out, fmt);
            int rc = sweep_launch(&o, &r);
            struct stat st;
            int ran = rc == 0 && r.outcome == SWEEP_LAUNCH_EXITED && r.exit_code == 0;
            int wrote = ran && stat(tmp, &st) == 0 && st.st_size > 0;
            int complete = wrote && sweep_chart_complete(tmp); /* gnuplot exits 0 on a full disk */
            if (complete && rename(tmp, final) == 0) continue;
            unlink(tmp);
            unlink(final); /* no chart from an earlier invocation stands in for this one */
            if (!failed)
                errmsg_set(err, el, "chart %s.%s: %s", charts[i].out, fmt,
                           rc != 0   ? r.error
                           : wrote   ? "gnuplot wrote an incomplete file (disk full?); removed"
                           : ran     ? "gnuplot wrote no output"
                                     : "gnuplot failed (see gnuplot.log)");
            failed++;
            if (r.outcome == SWEEP_LAUNCH_INTERRUPTED) return -1;
        }
    }
    return failed ? -1 : 0;
}
