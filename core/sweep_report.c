/* core/sweep_report.c — the sweep's outputs from its run records: summary.json, summary.csv, the
 * gnuplot data files, the charts (gnuplot started with fork/execvp through sweep_launch, templates
 * from plots/) and report.md. Every file goes through sweep_write_atomic, so an interrupted sweep
 * never leaves half a file. Not the runs (bench/sweep.c), not the chart styling (the plots/ templates). */
#include "core/sweep_report.h"
#include "core/errmsg.h"

#include "core/sweep_launch.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const sweep_mem_categories[SWEEP_N_MEM_CATEGORIES] = {
    "params", "grads", "optimizer", "gathered", "activations", "workspace", "comm",
};

/* ---- a growable text buffer: files are built in memory, then written atomically ---------------- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && (size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t nc = (b->cap ? b->cap * 2 : 4096);
        while (nc < b->len + (size_t)n + 1) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np, b->cap = nc;
    }
}

static int sb_write(sbuf *b, const char *dir, const char *name, char *err, size_t el) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = 0;
    if (b->oom) {
        errmsg_set(err, el, "%s: out of memory", path);
        rc = -1;
    } else if (sweep_write_atomic(path, b->p ? b->p : "", b->len) != 0) {
        errmsg_set(err, el, "cannot write %s: %s", path, strerror(errno));
        rc = -1;
    }
    free(b->p);
    memset(b, 0, sizeof *b);
    return rc;
}

/* ---- reading the run records ------------------------------------------------------------------ */

static json_t *rec_get(json_t *record, const char *path) {
    if (!record) return NULL;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *v = record;
    for (char *tok = strtok(buf, "."); tok && v; tok = strtok(NULL, ".")) v = json_object_get(v, tok);
    return v;
}

double sweep_record_num(json_t *record, const char *path) {
    json_t *v = record ? rec_get(record, path) : NULL;
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int global_batch_of(const sweep_result *r) {
    double g = sweep_record_num(r->record, "global_batch");
    if (isfinite(g) && g > 0) return (int)g;
    return r->mesh->dp * r->batch_size;
}

static size_t n_steps(const sweep_result *r) {
    json_t *a = r->record ? json_object_get(r->record, "steps") : NULL;
    return json_is_array(a) ? json_array_size(a) : 0;
}

static size_t n_evals(const sweep_result *r) {
    json_t *a = r->record ? json_object_get(r->record, "eval") : NULL;
    size_t k = 0;
    for (size_t i = 0; json_is_array(a) && i < json_array_size(a); i++)
        if (json_is_number(json_object_get(json_array_get(a, i), "loss"))) k++;
    return k;
}

/* ---- equivalence: loss deviation between meshes ----------------------------------------------- */

void sweep_loss_deviation(const sweep_result *res, int n, sweep_deviation *d, json_t **per_step) {
    memset(d, 0, sizeof *d);
    d->ref = -1, d->at_step = -1, d->at_mesh = -1;
    if (per_step) *per_step = json_array();
    for (int i = 0; i < n && d->ref < 0; i++)
        if (n_steps(&res[i]) > 0) d->ref = i;
    if (d->ref < 0) return;
    json_t *ref = json_object_get(res[d->ref].record, "steps");
    for (size_t k = 0; k < json_array_size(ref); k++) {
        json_t *rs = json_array_get(ref, k);
        json_t *sv = json_object_get(rs, "step");
        double lref = json_number_value(json_object_get(rs, "loss"));
        if (!json_is_integer(sv) || !json_is_number(json_object_get(rs, "loss")) || !isfinite(lref) || lref == 0)
            continue;
        long long step = json_integer_value(sv);
        double step_max = -1;
        for (int m = 0; m < n; m++) {
            if (m == d->ref || !res[m].record) continue;
            json_t *steps = json_object_get(res[m].record, "steps");
            for (size_t j = 0; j < json_array_size(steps); j++) {
                json_t *ms = json_array_get(steps, j);
                json_t *lv = json_object_get(ms, "loss");
                if (json_integer_value(json_object_get(ms, "step")) != step || !json_is_number(lv)) continue;
                double rel = fabs(json_number_value(lv) - lref) / fabs(lref);
                if (!isfinite(rel)) rel = INFINITY; /* a non-finite loss is the largest deviation there is */
                if (rel > step_max) step_max = rel;
                if (rel > d->max_rel || d->at_mesh < 0) d->max_rel = rel, d->at_step = (int)step, d->at_mesh = m;
                break;
            }
        }
        if (step_max >= 0) {
            d->steps_compared++;
            if (per_step && *per_step) {
                json_t *o = json_pack("{s:I, s:f}", "step", step, "max_rel", isfinite(step_max) ? step_max : 1e308);
                if (o) json_array_append_new(*per_step, o);
            }
        }
    }
}

/* ---- summary.json ----------------------------------------------------------------------------- */

static json_t *num_or_null(double x) { return isfinite(x) ? json_real(x) : json_null(); }
static json_t *int_or_null(double x) { return isfinite(x) ? json_integer((json_int_t)x) : json_null(); }

static const char *mode_name(int m) {
    return m == SWEEP_BATCH_MAX ? "max" : m == SWEEP_BATCH_GLOBAL ? "global_batch" : "fixed";
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
    json_object_set_new(root, "schema", json_string("meshsweep.sweep/1"));
    json_object_set_new(root, "name", json_string(s->name));
    json_object_set_new(root, "started", json_string(c->started_utc ? c->started_utc : ""));
    json_object_set_new(root, "folder", json_string(c->dir));
    json_object_set_new(root, "mode", json_string(mode_name(s->batch_mode)));
    json_object_set_new(root, "world", json_integer(s->world));
    json_object_set_new(root, "model", json_string(s->model));
    json_object_set_new(root, "seq_len", json_integer(s->seq_len));
    json_object_set_new(root, "steps", json_integer(s->steps));
    json_object_set_new(root, "mem_budget", s->mem_budget ? json_string(s->mem_budget) : json_null());
    json_object_set_new(root, "mem_budget_bytes", s->mem_budget ? json_integer((json_int_t)s->mem_budget_bytes)
                                                                 : json_null());
    int n_ok = 0;
    for (int i = 0; i < c->n; i++) {
        const sweep_result *r = &c->res[i];
        json_t *m = json_object(), *cats = json_object(), *probes = json_array();
        if (!m || !cats || !probes) {
            json_decref(m), json_decref(cats), json_decref(probes);
            continue;
        }
        n_ok += strcmp(r->status, "ok") == 0;
        char rec[96], log[96];
        snprintf(rec, sizeof rec, "runs/%s.json", r->mesh->name);
        snprintf(log, sizeof log, "runs/%s.log", r->mesh->name);
        json_object_set_new(m, "mesh", json_string(r->mesh->name));
        json_object_set_new(m, "dp", json_integer(r->mesh->dp));
        json_object_set_new(m, "tp", json_integer(r->mesh->tp));
        json_object_set_new(m, "batch_size", json_integer(r->batch_size));
        json_object_set_new(m, "global_batch", json_integer(global_batch_of(r)));
        json_object_set_new(m, "status", json_string(r->status));
        json_object_set_new(m, "error", r->error[0] ? json_string(r->error) : json_null());
        json_object_set_new(m, "record", json_string(rec));
        json_object_set_new(m, "log", json_string(log));
        json_object_set_new(m, "resumed", json_boolean(r->resumed));
        json_object_set_new(m, "elapsed_s", r->elapsed_s >= 0 ? json_real(r->elapsed_s) : json_null());
        json_object_set_new(m, "tok_s", num_or_null(sweep_record_num(r->record, "summary.tok_s")));
        json_object_set_new(m, "tok_s_per_rank", num_or_null(sweep_record_num(r->record, "summary.tok_s_per_rank")));
        json_object_set_new(m, "mfu", num_or_null(sweep_record_num(r->record, "summary.mfu")));
        json_object_set_new(m, "step_ms_median", num_or_null(sweep_record_num(r->record, "summary.step_ms_median")));
        json_object_set_new(m, "peak_bytes", int_or_null(sweep_record_num(r->record, "memory.peak")));
        for (int k = 0; k < SWEEP_N_MEM_CATEGORIES; k++) {
            char path[64];
            snprintf(path, sizeof path, "memory.by_category.%s", sweep_mem_categories[k]);
            json_object_set_new(cats, sweep_mem_categories[k], int_or_null(sweep_record_num(r->record, path)));
        }
        json_object_set_new(m, "by_category", cats);
        json_object_set_new(m, "final_loss", num_or_null(sweep_record_num(r->record, "summary.final_loss")));
        json_object_set_new(m, "final_eval_loss", num_or_null(sweep_record_num(r->record, "summary.final_eval_loss")));
        if (s->batch_mode == SWEEP_BATCH_MAX) {
            json_t *search = json_object();
            if (search) {
                json_object_set_new(search, "plan_batch_size", r->plan_batch >= 0 ? json_integer(r->plan_batch)
                                                                                 : json_null());
                for (int p = 0; p < r->n_probes; p++) {
                    const sweep_probe *pr = &r->probes[p];
                    char prec[96];
                    snprintf(prec, sizeof prec, "runs/%s.probe-b%d.json", r->mesh->name, pr->batch_size);
                    json_t *po = json_pack("{s:i, s:s, s:b, s:s}", "batch_size", pr->batch_size, "status",
                                           pr->status, "resumed", pr->resumed, "record", prec);
                    if (po) {
                        json_object_set_new(po, "elapsed_s", pr->elapsed_s >= 0 ? json_real(pr->elapsed_s)
                                                                                 : json_null());
                        json_array_append_new(probes, po);
                    }
                }
                json_object_set_new(search, "probes", probes);
                probes = NULL;
                json_object_set_new(m, "max_batch_search", search);
            }
        }
        json_decref(probes);
        json_array_append_new(meshes, m);
    }
    json_object_set_new(root, "meshes", meshes);
    json_object_set_new(root, "runs_ok", json_integer(n_ok));
    json_object_set_new(root, "runs_total", json_integer(c->n));
    if (s->batch_mode == SWEEP_BATCH_GLOBAL) {
        sweep_deviation d;
        json_t *per_step = NULL;
        sweep_loss_deviation(c->res, c->n, &d, &per_step);
        json_t *dev = json_object();
        if (dev) {
            json_object_set_new(dev, "global_batch", json_integer(s->global_batch));
            json_object_set_new(dev, "ref", d.ref >= 0 ? json_string(c->res[d.ref].mesh->name) : json_null());
            json_object_set_new(dev, "max_rel", d.at_mesh >= 0 ? num_or_null(d.max_rel) : json_null());
            json_object_set_new(dev, "at_step", d.at_step >= 0 ? json_integer(d.at_step) : json_null());
            json_object_set_new(dev, "at_mesh", d.at_mesh >= 0 ? json_string(c->res[d.at_mesh].mesh->name)
                                                               : json_null());
            json_object_set_new(dev, "steps_compared", json_integer(d.steps_compared));
            json_object_set_new(dev, "per_step", per_step ? per_step : json_array());
            per_step = NULL;
            json_object_set_new(root, "loss_deviation", dev);
        }
        json_decref(per_step);
    }
    json_t *charts = json_pack("[s,s,s,s,s]", "loss.png", "loss_tokens.png", "throughput.png", "memory.png",
                               "max_batch.png");
    json_object_set_new(root, "charts", charts ? charts : json_array());
    json_object_set_new(root, "report", json_string("report.md"));
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
    json_decref(root);
    if (!text) {
        errmsg_set(err, el, "summary.json: out of memory");
        return -1;
    }
    sbuf b = {0};
    sb_printf(&b, "%s\n", text);
    free(text);
    return sb_write(&b, c->dir, "summary.json", err, el);
}

/* ---- summary.csv ------------------------------------------------------------------------------ */

static void csv_num(sbuf *b, double x, const char *fmt) {
    if (isfinite(x)) sb_printf(b, fmt, x);
    sb_printf(b, ",");
}

int sweep_write_summary_csv(const sweep_report_ctx *c, char *err, size_t el) {
    sbuf b = {0};
    sb_printf(&b, "mesh,dp,tp,batch_size,global_batch,tok_s,tok_s_per_rank,mfu,peak_bytes");
    for (int k = 0; k < SWEEP_N_MEM_CATEGORIES; k++) sb_printf(&b, ",%s_bytes", sweep_mem_categories[k]);
    sb_printf(&b, ",final_loss,final_eval_loss,status\n");
    for (int i = 0; i < c->n; i++) {
        const sweep_result *r = &c->res[i];
        sb_printf(&b, "%s,%d,%d,%d,%d,", r->mesh->name, r->mesh->dp, r->mesh->tp, r->batch_size, global_batch_of(r));
        csv_num(&b, sweep_record_num(r->record, "summary.tok_s"), "%.1f");
        csv_num(&b, sweep_record_num(r->record, "summary.tok_s_per_rank"), "%.1f");
        csv_num(&b, sweep_record_num(r->record, "summary.mfu"), "%.6f");
        csv_num(&b, sweep_record_num(r->record, "memory.peak"), "%.0f");
        for (int k = 0; k < SWEEP_N_MEM_CATEGORIES; k++) {
            char path[64];
            snprintf(path, sizeof path, "memory.by_category.%s", sweep_mem_categories[k]);
            csv_num(&b, sweep_record_num(r->record, path), "%.0f");
        }
        csv_num(&b, sweep_record_num(r->record, "summary.final_loss"), "%.6f");
        csv_num(&b, sweep_record_num(r->record, "summary.final_eval_loss"), "%.6f");
        sb_printf(&b, "%s\n", r->status);
    }
    return sb_write(&b, c->dir, "summary.csv", err, el);
}

/* ---- gnuplot data ----------------------------------------------------------------------------- */

static const double MiB = 1048576.0;

static double zero_if_nan(double x) { return isfinite(x) ? x : 0.0; }

/* A mesh's label on bar charts: the mesh, and its status when it has no measurement. */
static void bar_label(const sweep_result *r, char *out, size_t cap) {
    if (strcmp(r->status, "ok") == 0) snprintf(out, cap, "\"%s\"", r->mesh->name);
    else snprintf(out, cap, "\"%s (%s)\"", r->mesh->name, r->status[0] ? r->status : "not run");
}

int sweep_write_plot_data(const sweep_report_ctx *c, char *err, size_t el) {
    const sweep_spec *s = c->spec;
    for (int i = 0; i < c->n; i++) {
        const sweep_result *r = &c->res[i];
        double tok_per_step = (double)global_batch_of(r) * s->seq_len;
        if (n_steps(r) > 0) {
            sbuf b = {0};
            sb_printf(&b, "# %s: training loss per step\n# step loss tokens_seen\n", r->mesh->name);
            json_t *steps = json_object_get(r->record, "steps");
            for (size_t k = 0; k < json_array_size(steps); k++) {
                json_t *st = json_array_get(steps, k);
                json_t *lv = json_object_get(st, "loss");
                long long step = json_integer_value(json_object_get(st, "step"));
                if (json_is_number(lv) && isfinite(json_number_value(lv)))
                    sb_printf(&b, "%lld %.7g %.0f\n", step, json_number_value(lv), (double)step * tok_per_step);
                else
                    sb_printf(&b, "%lld NaN %.0f\n", step, (double)step * tok_per_step);
            }
            char name[96];
            snprintf(name, sizeof name, "loss_%s.dat", r->mesh->name);
            if (sb_write(&b, c->dir, name, err, el)) return -1;
        }
        if (n_steps(r) > 0 && n_evals(r) > 0) {
            sbuf b = {0};
            sb_printf(&b, "# %s: eval loss\n# step eval_loss tokens_seen\n", r->mesh->name);
            json_t *ev = json_object_get(r->record, "eval");
            for (size_t k = 0; k < json_array_size(ev); k++) {
                json_t *e = json_array_get(ev, k);
                json_t *lv = json_object_get(e, "loss");
                long long step = json_integer_value(json_object_get(e, "step"));
                if (json_is_number(lv))
                    sb_printf(&b, "%lld %.7g %.0f\n", step, json_number_value(lv), (double)step * tok_per_step);
            }
            char name[96];
            snprintf(name, sizeof name, "eval_%s.dat", r->mesh->name);
            if (sb_write(&b, c->dir, name, err, el)) return -1;
        }
    }
    sbuf t = {0}, m = {0}, mb = {0};
    sb_printf(&t, "# mesh tok_s tok_s_per_rank   (0: no measurement)\n");
    sb_printf(&m, "# memory per rank in MiB (categories at the moment of the total peak of the most loaded rank;\n"
                  "# older records without memory.at_peak: peak per category)\n# mesh");
    for (int k = 0; k < SWEEP_N_MEM_CATEGORIES; k++) sb_printf(&m, " %s", sweep_mem_categories[k]);
    sb_printf(&m, " peak_total\n");
    sb_printf(&mb, "# %s batch per mesh\n# tp dp batch_per_dp_rank global_batch mesh\n",
              s->batch_mode == SWEEP_BATCH_MAX ? "largest fitting" : "configured");
    for (int i = 0; i < c->n; i++) {
        const sweep_result *r = &c->res[i];
        char label[80];
        bar_label(r, label, sizeof label);
        sb_printf(&t, "%s %.3f %.3f\n", label, zero_if_nan(sweep_record_num(r->record, "summary.tok_s")),
                  zero_if_nan(sweep_record_num(r->record, "summary.tok_s_per_rank")));
        sb_printf(&m, "%s", label);
        for (int k = 0; k < SWEEP_N_MEM_CATEGORIES; k++) {
            char path[64];
            snprintf(path, sizeof path, "memory.at_peak.%s", sweep_mem_categories[k]);
            double v = sweep_record_num(r->record, path);
            if (isnan(v)) {
                snprintf(path, sizeof path, "memory.by_category.%s", sweep_mem_categories[k]);
                v = sweep_record_num(r->record, path);
            }
            sb_printf(&m, " %.4f", zero_if_nan(v) / MiB);
        }
        sb_printf(&m, " %.4f\n", zero_if_nan(sweep_record_num(r->record, "memory.peak")) / MiB);
    }
    /* sorted by TP degree so the lines go left to right */
    for (int tp = 1, done = 0; done < c->n; tp++)
        for (int i = 0; i < c->n; i++) {
            const sweep_result *r = &c->res[i];
            if (r->mesh->tp != tp) continue;
            sb_printf(&mb, "%d %d %d %d %s\n", r->mesh->tp, r->mesh->dp, r->batch_size, r->mesh->dp * r->batch_size,
                      r->mesh->name);
            done++;
        }
    if (sb_write(&t, c->dir, "throughput.dat", err, el)) {
        free(m.p), free(mb.p);
        return -1;
    }
    if (sb_write(&m, c->dir, "memory.dat", err, el)) {
        free(mb.p);
        return -1;
    }
    return sb_write(&mb, c->dir, "max_batch.dat", err, el);
}

/* ---- charts ----------------------------------------------------------------------------------- */

typedef struct chart {
    const char *out;       /* file name without extension */
    const char *script;    /* template in plots/ */
} chart;

static const chart charts[] = {
    {"loss", "loss.gp"}, {"loss_tokens", "loss.gp"}, {"throughput", "throughput.gp"},
    {"memory", "memory.gp"}, {"max_batch", "max_batch.gp"},
};

/* The -e text for one chart. Every value is generated by us from names that cannot hold quotes
 * (mesh names are digits and 'x', the sweep name is [A-Za-z0-9._-], sizes are checked). */
static void chart_vars(const sweep_report_ctx *c, const chart *ch, const char *fmt, char *out, size_t cap) {
    const sweep_spec *s = c->spec;
    sbuf b = {0};
    sb_printf(&b, "fmt='%s'; out='.%s.%s.tmp'; name='%s'; world=%d; n=%d; mode='%s'; budget='%s'; budget_mib=%.4f; ",
              fmt, ch->out, fmt, s->name, s->world, c->n, s->batch_mode == SWEEP_BATCH_MAX ? "max" : "fixed",
              s->mem_budget ? s->mem_budget : "", s->mem_budget ? (double)s->mem_budget_bytes / MiB : -1.0);
    sb_printf(&b, "xaxis='%s'; meshes='", strcmp(ch->out, "loss_tokens") == 0 ? "tokens" : "step");
    int k = 0;
    for (int i = 0; i < c->n; i++)
        if (n_steps(&c->res[i]) > 0) sb_printf(&b, "%s%s", k++ ? " " : "", c->res[i].mesh->name);
    sb_printf(&b, "'; evals='");
    k = 0;
    for (int i = 0; i < c->n; i++)
        if (n_steps(&c->res[i]) > 0 && n_evals(&c->res[i]) > 0) sb_printf(&b, "%s%s", k++ ? " " : "", c->res[i].mesh->name);
    sb_printf(&b, "'; evalidx='");
    k = 0;
    int pos = 0;
    for (int i = 0; i < c->n; i++) {
        if (n_steps(&c->res[i]) == 0) continue;
        pos++;
        if (n_evals(&c->res[i]) > 0) sb_printf(&b, "%s%d", k++ ? " " : "", pos);
    }
    sb_printf(&b, "'");
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
    for (size_t i = 0; i < sizeof charts / sizeof charts[0]; i++) {
        for (int f = 0; f < 2; f++) {
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
            if (rc == 0 && r.outcome == SWEEP_LAUNCH_EXITED && r.exit_code == 0 && stat(tmp, &st) == 0 &&
                st.st_size > 0 && rename(tmp, final) == 0)
                continue;
            unlink(tmp);
            if (!failed)
                errmsg_set(err, el, "chart %s.%s: %s", charts[i].out, fmt,
                        rc != 0 ? r.error
                        : r.outcome == SWEEP_LAUNCH_EXITED && r.exit_code == 0 ? "gnuplot wrote no output"
                        : "gnuplot failed (see gnuplot.log)");
            failed++;
            if (r.outcome == SWEEP_LAUNCH_INTERRUPTED) return -1;
        }
    }
    return failed ? -1 : 0;
}

/* ---- report.md -------------------------------------------------------------------------------- */

static void md_num(sbuf *b, double x, const char *fmt) {
    if (isfinite(x)) sb_printf(b, fmt, x);
    else sb_printf(b, "–");
    sb_printf(b, " | ");
}

/* The first line of an error, with table-breaking characters replaced. */
static void one_line(const char *in, char *out, size_t cap) {
    size_t k = 0;
    for (const char *p = in; *p && *p != '\n' && k + 1 < cap; p++) out[k++] = (*p == '|' || *p == '`') ? '/' : *p;
    out[k] = '\0';
}

int sweep_write_report_md(const sweep_report_ctx *c, int charts_ok, char *err, size_t el) {
    const sweep_spec *s = c->spec;
    sbuf b = {0};
    sb_printf(&b, "# Sweep `%s`\n\n", s->name);
    sb_printf(&b, "Model `%s`, %d ranks (`%s` backend), sequence length %d, %d steps, lr %g", s->model, s->world,
              s->backend, s->seq_len, s->steps, s->lr);
    if (s->mem_budget) sb_printf(&b, ", memory budget %s per rank", s->mem_budget);
    sb_printf(&b, ".\n");
    if (s->batch_mode == SWEEP_BATCH_MAX)
        sb_printf(&b, "Batch: the largest that fits the budget on each mesh (plan, then confirmed by short probe "
                      "runs at b and b+1).\n");
    else if (s->batch_mode == SWEEP_BATCH_GLOBAL)
        sb_printf(&b, "Batch: global batch %d sequences on every mesh (batch per DP rank = %d / dp).\n",
                  s->global_batch, s->global_batch);
    else
        sb_printf(&b, "Batch: as given in the spec, per DP rank.\n");
    sb_printf(&b, "Runner started %s. Spec: [spec.json](spec.json); summary: [summary.json](summary.json), "
                  "[summary.csv](summary.csv).\n\n",
              c->started_utc ? c->started_utc : "?");

    sb_printf(&b, "## Results\n\n");
    sb_printf(&b, "| mesh | dp | tp | batch / DP rank | global batch | tok/s | tok/s per rank | MFU | peak MiB | "
                  "final loss | final eval loss | status |\n");
    sb_printf(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for (int i = 0; i < c->n; i++) {
        const sweep_result *r = &c->res[i];
        sb_printf(&b, "| [%s](runs/%s.json) | %d | %d | %d | %d | ", r->mesh->name, r->mesh->name, r->mesh->dp,
                  r->mesh->tp, r->batch_size, global_batch_of(r));
        md_num(&b, sweep_record_num(r->record, "summary.tok_s"), "%.0f");
        md_num(&b, sweep_record_num(r->record, "summary.tok_s_per_rank"), "%.0f");
        double mfu = sweep_record_num(r->record, "summary.mfu");
        md_num(&b, isfinite(mfu) ? 100 * mfu : NAN, "%.2f%%");
        md_num(&b, sweep_record_num(r->record, "memory.peak") / MiB, "%.1f");
        md_num(&b, sweep_record_num(r->record, "summary.final_loss"), "%.4f");
        md_num(&b, sweep_record_num(r->record, "summary.final_eval_loss"), "%.4f");
        sb_printf(&b, "%s |\n", r->status);
    }
    sb_printf(&b, "\n");

    if (s->batch_mode == SWEEP_BATCH_MAX) {
        sb_printf(&b, "## Largest batch per mesh\n\n");
        for (int i = 0; i < c->n; i++) {
            const sweep_result *r = &c->res[i];
            sb_printf(&b, "- **%s**: plan ", r->mesh->name);
            if (r->plan_batch >= 0) sb_printf(&b, "%d", r->plan_batch);
            else sb_printf(&b, "–");
            sb_printf(&b, "; probes");
            for (int p = 0; p < r->n_probes; p++)
                sb_printf(&b, "%s b=%d %s", p ? "," : "", r->probes[p].batch_size,
                          strcmp(r->probes[p].status, "oom") == 0 ? "oom"
                          : (strcmp(r->probes[p].status, "ok") == 0 || strcmp(r->probes[p].status, "diverged") == 0)
                              ? "fits"
                              : r->probes[p].status);
            if (!r->n_probes) sb_printf(&b, " none");
            sb_printf(&b, " → **%d** per DP rank (global %d)\n", r->batch_size, r->mesh->dp * r->batch_size);
        }
        sb_printf(&b, "\n");
    }
    if (s->batch_mode == SWEEP_BATCH_GLOBAL) {
        sweep_deviation d;
        sweep_loss_deviation(c->res, c->n, &d, NULL);
        sb_printf(&b, "## Loss agreement between meshes\n\n");
        if (d.at_mesh >= 0)
            sb_printf(&b, "Largest relative loss deviation from %s over %d steps: **%.3g** (mesh %s, step %d).\n\n",
                      c->res[d.ref].mesh->name, d.steps_compared, d.max_rel, c->res[d.at_mesh].mesh->name, d.at_step);
        else
            sb_printf(&b, "Nothing to compare (fewer than two meshes produced losses).\n\n");
    }

    sb_printf(&b, "## Charts\n\n");
    static const char *titles[] = {"Training loss vs step", "Training loss vs tokens seen",
                                   "Throughput (global and per rank)", "Peak memory per rank by category",
                                   "Batch vs TP degree"};
    for (size_t i = 0; i < sizeof charts / sizeof charts[0]; i++)
        sb_printf(&b, "### %s\n\n![%s](%s.png)\n\n[SVG](%s.svg) · data: `%s`\n\n", titles[i], titles[i], charts[i].out,
                  charts[i].out,
                  strcmp(charts[i].out, "loss") == 0 || strcmp(charts[i].out, "loss_tokens") == 0 ? "loss_<mesh>.dat"
                  : strcmp(charts[i].out, "throughput") == 0                                  ? "throughput.dat"
                  : strcmp(charts[i].out, "memory") == 0                                      ? "memory.dat"
                                                                                              : "max_batch.dat");
    if (!charts_ok) sb_printf(&b, "Some charts could not be drawn; see `gnuplot.log`.\n\n");

    int problems = 0;
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->res[i].status, "ok") != 0) problems++;
    if (problems) {
        sb_printf(&b, "## Runs that did not finish ok\n\n");
        for (int i = 0; i < c->n; i++) {
            const sweep_result *r = &c->res[i];
            if (strcmp(r->status, "ok") == 0) continue;
            char line[400];
            one_line(r->error[0] ? r->error : "(no message)", line, sizeof line);
            char log[128];
            const char *rl = json_string_value(rec_get(r->record, "runner.log"));
            if (rl && strlen(rl) < sizeof log && strncmp(rl, "runs/", 5) == 0) snprintf(log, sizeof log, "%s", rl);
            else snprintf(log, sizeof log, "runs/%s.log", r->mesh->name);
            sb_printf(&b, "- **%s** %s: %s (log: [%s](%s))\n", r->mesh->name, r->status, line, log, log);
        }
        sb_printf(&b, "\n");
    }
    return sb_write(&b, c->dir, "report.md", err, el);
}
