/* core/sweep_report.c — the sweep's tables from its run records: summary.json and summary.csv, and
 * the numbers derived from the records that the charts and report.md share (MFU against the cores
 * each rank had, seconds to a target loss, hosts). Every file goes through sweep_write_atomic, so an
 * interrupted sweep never leaves half a file. Not the charts (core/sweep_charts.c), not report.md
 * (core/sweep_report_md.c), not the runs (core/sweep_mesh.c). */
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

void sweep_sb_printf(sweep_sbuf *b, const char *fmt, ...) {
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

int sweep_sb_write(sweep_sbuf *b, const char *dir, const char *name, char *err, size_t el) {
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

json_t *sweep_record_get(json_t *record, const char *path) {
    if (!record) return NULL;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *v = record;
    for (char *tok = strtok(buf, "."); tok && v; tok = strtok(NULL, ".")) v = json_object_get(v, tok);
    return v;
}

double sweep_record_num(json_t *record, const char *path) {
    json_t *v = record ? sweep_record_get(record, path) : NULL;
    return json_is_number(v) ? json_number_value(v) : NAN;
}

int sweep_global_batch(const sweep_result *r) {
    double g = sweep_record_num(r->record, "global_batch");
    if (isfinite(g) && g > 0) return (int)g;
    return r->mesh->dp * r->batch_size;
}

size_t sweep_n_steps(const sweep_result *r) {
    json_t *a = r->record ? json_object_get(r->record, "steps") : NULL;
    return json_is_array(a) ? json_array_size(a) : 0;
}

size_t sweep_n_evals(const sweep_result *r) {
    json_t *a = r->record ? json_object_get(r->record, "eval") : NULL;
    size_t k = 0;
    for (size_t i = 0; json_is_array(a) && i < json_array_size(a); i++)
        if (json_is_number(json_object_get(json_array_get(a, i), "loss"))) k++;
    return k;
}


/* ---- derived numbers -------------------------------------------------------------------------- */

void sweep_rank_cores(const sweep_result *r, int *ranks, int *cores, int *hosts) {
    *ranks = *cores = *hosts = 0;
    json_t *rb = sweep_record_get(r->record, "env.ranks_by_host");
    json_t *cb = sweep_record_get(r->record, "env.cores_by_host");
    if (!json_is_object(rb) || !json_is_object(cb)) return;
    const char *h;
    json_t *v;
    int nr = 0, nc = 0, nh = 0;
    json_object_foreach(rb, h, v) {
        json_t *c = json_object_get(cb, h);
        if (!json_is_array(v) || !json_is_integer(c) || json_integer_value(c) < 1) return;
        nr += (int)json_array_size(v);
        nc += (int)json_integer_value(c);
        nh++;
    }
    *ranks = nr, *cores = nc, *hosts = nh;
}

double sweep_mfu_share(const sweep_result *r) {
    double m = sweep_record_num(r->record, "summary.mfu_share");
    if (isfinite(m)) return m;
    double mfu = sweep_record_num(r->record, "summary.mfu");
    json_t *rb = sweep_record_get(r->record, "env.ranks_by_host");
    json_t *cb = sweep_record_get(r->record, "env.cores_by_host");
    if (!isfinite(mfu) || !json_is_object(rb) || !json_is_object(cb)) return NAN;
    /* achieved = mfu x ranks x peak; available = peak x sum over hosts of min(ranks, cores) */
    double ranks = 0, avail = 0;
    const char *h;
    json_t *v;
    json_object_foreach(rb, h, v) {
        json_t *c = json_object_get(cb, h);
        if (!json_is_array(v) || !json_is_integer(c) || json_integer_value(c) < 1) return NAN;
        double nr = (double)json_array_size(v), nc = (double)json_integer_value(c);
        ranks += nr;
        avail += nr < nc ? nr : nc;
    }
    return avail > 0 ? mfu * ranks / avail : NAN;
}

int sweep_tp_spans_hosts(const sweep_result *r) {
    json_t *t = sweep_record_get(r->record, "env.tp_spans_hosts");
    if (json_is_boolean(t)) return json_is_true(t);
    json_t *rb = sweep_record_get(r->record, "env.ranks_by_host");
    if (!json_is_object(rb)) return -1;
    int tp = r->mesh->tp, world = r->mesh->dp * r->mesh->tp;
    int *host_of = calloc((size_t)world, sizeof *host_of);
    if (!host_of) return -1;
    const char *h;
    json_t *v;
    int hi = 0, spans = 0;
    json_object_foreach(rb, h, v) {
        hi++;
        for (size_t i = 0; json_is_array(v) && i < json_array_size(v); i++) {
            json_int_t k = json_integer_value(json_array_get(v, i));
            if (k >= 0 && k < world) host_of[k] = hi;
        }
    }
    for (int k = 0; k < world; k++)
        if (host_of[k] != host_of[k - k % tp]) spans = 1; /* a TP group is tp consecutive ranks */
    free(host_of);
    return spans;
}

double sweep_target_loss(const sweep_report_ctx *c) {
    if (c->spec->target_loss > 0) return c->spec->target_loss;
    double x = NAN;
    for (int i = 0; i < c->n; i++) {
        double f = sweep_record_num(c->res[i].record, "summary.final_loss");
        if (strcmp(c->res[i].status, "ok") == 0 && isfinite(f) && (isnan(x) || f > x)) x = f;
    }
    return x;
}

double sweep_seconds_to_loss(const sweep_result *r, double x, int *step) {
    json_t *steps = r->record ? json_object_get(r->record, "steps") : NULL;
    double t = 0;
    if (step) *step = -1;
    if (!isfinite(x)) return NAN;
    for (size_t k = 0; k < json_array_size(steps); k++) {
        json_t *st = json_array_get(steps, k);
        json_t *lv = json_object_get(st, "loss");
        t += json_number_value(json_object_get(st, "ms")) / 1000.0;
        if (json_is_number(lv) && json_number_value(lv) <= x) {
            if (step) *step = (int)json_integer_value(json_object_get(st, "step"));
            return t;
        }
    }
    return NAN;
}

/* ---- equivalence: loss deviation between meshes ----------------------------------------------- */

void sweep_loss_deviation(const sweep_result *res, int n, sweep_deviation *d, json_t **per_step) {
    memset(d, 0, sizeof *d);
    d->ref = -1, d->at_step = -1, d->at_mesh = -1;
    if (per_step) *per_step = json_array();
    for (int i = 0; i < n && d->ref < 0; i++)
        if (sweep_n_steps(&res[i]) > 0) d->ref = i;
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

static json_t *search_json(const sweep_result *r) {
    json_t *search = json_object(), *probes = json_array();
    if (!search || !probes) {
        json_decref(search), json_decref(probes);
        return json_null();
    }
    json_object_set_new(search, "plan_batch_size", r->plan_batch >= 0 ? json_integer(r->plan_batch) : json_null());
    json_object_set_new(search, "capped_at_engine_limit", json_boolean(r->capped));
    for (int p = 0; p < r->n_probes; p++) {
        const sweep_probe *pr = &r->probes[p];
        char prec[96];
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
    for (int k = 0; cats && k < SWEEP_N_MEM_CATEGORIES; k++) {
        char path[64];
        snprintf(path, sizeof path, "%s.%s", plan ? "by_category" : "memory.by_category", sweep_mem_categories[k]);
        json_object_set_new(cats, sweep_mem_categories[k], int_or_null(sweep_record_num(r->record, path)));
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

static json_t *mesh_json(const sweep_report_ctx *c, const sweep_result *r, double target) {
    json_t *m = json_object();
    if (!m) return NULL;
    char rec[96], log[96];
    snprintf(rec, sizeof rec, c->plan_only ? "runs/%s.plan.json" : "runs/%s.json", r->mesh->name);
    snprintf(log, sizeof log, c->plan_only ? "runs/%s.plan.log" : "runs/%s.log", r->mesh->name);
    json_object_set_new(m, "mesh", json_string(r->mesh->name));
    json_object_set_new(m, "dp", json_integer(r->mesh->dp));
    json_object_set_new(m, "tp", json_integer(r->mesh->tp));
    json_object_set_new(m, "batch_size", json_integer(r->batch_size));
    json_object_set_new(m, "global_batch", json_integer(sweep_global_batch(r)));
    json_object_set_new(m, "status", json_string(r->status));
    json_object_set_new(m, "error", r->error[0] ? json_string(r->error) : json_null());
    json_object_set_new(m, "record", r->record ? json_string(rec) : json_null()); /* only files that exist */
    json_object_set_new(m, "log", json_string(log));
    if (c->plan_only) {
        json_t *fits = sweep_record_get(r->record, "fits");
        json_object_set_new(m, "fits", json_is_boolean(fits) ? json_incref(fits) : json_null());
        json_object_set_new(m, "capped_at_engine_limit", json_boolean(r->capped));
        mem_json(r, 1, m);
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
    mem_json(r, 0, m);
    json_object_set_new(m, "final_loss", num_or_null(sweep_record_num(r->record, "summary.final_loss")));
    json_object_set_new(m, "final_eval_loss", num_or_null(sweep_record_num(r->record, "summary.final_eval_loss")));
    json_object_set_new(m, "seconds_to_target_loss", num_or_null(sweep_seconds_to_loss(r, target, NULL)));
    hosts_json(r, m);
    if (c->spec->batch_mode == SWEEP_BATCH_MAX) json_object_set_new(m, "max_batch_search", search_json(r));
    return m;
}

static json_t *deviation_json(const sweep_report_ctx *c) {
    sweep_deviation d;
    json_t *per_step = NULL;
    sweep_loss_deviation(c->res, c->n, &d, &per_step);
    json_t *dev = json_object();
    if (!dev) {
        json_decref(per_step);
        return json_null();
    }
    json_object_set_new(dev, "global_batch", json_integer(c->spec->global_batch));
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
    for (const char *const *n = sweep_chart_names(c->plan_only); a && *n; n++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s.png", c->dir, *n);
        if (sweep_chart_complete(path)) json_array_append_new(a, json_sprintf("%s.png", *n));
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
    json_object_set_new(root, "seq_len", json_integer(s->seq_len));
    json_object_set_new(root, "steps", json_integer(s->steps));
    json_object_set_new(root, "mem_budget", s->mem_budget ? json_string(s->mem_budget) : json_null());
    json_object_set_new(root, "mem_budget_bytes", s->mem_budget_bytes ? json_integer((json_int_t)s->mem_budget_bytes)
                                                                 : json_null());
    json_object_set_new(root, "target_loss", num_or_null(target));
    json_object_set_new(root, "target_loss_from", json_string(s->target_loss > 0 ? "spec" : "highest final loss"));
    int n_ok = 0;
    for (int i = 0; i < c->n; i++) {
        n_ok += strcmp(c->res[i].status, c->plan_only ? "planned" : "ok") == 0;
        json_t *m = mesh_json(c, &c->res[i], target);
        if (m) json_array_append_new(meshes, m);
    }
    json_object_set_new(root, "meshes", meshes);
    json_object_set_new(root, c->plan_only ? "meshes_planned" : "runs_ok", json_integer(n_ok));
    json_object_set_new(root, "runs_total", json_integer(c->n));
    if (s->batch_mode == SWEEP_BATCH_GLOBAL && !c->plan_only) json_object_set_new(root, "loss_deviation", deviation_json(c));
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
    sweep_sbuf b = {0};
    sweep_sb_printf(&b, "mesh,dp,tp,batch_size,global_batch,tok_s,tok_s_per_rank,mfu,peak_bytes");
    for (int k = 0; k < SWEEP_N_MEM_CATEGORIES; k++) sweep_sb_printf(&b, ",%s_bytes", sweep_mem_categories[k]);
    sweep_sb_printf(&b, ",final_loss,final_eval_loss,mfu_share,seconds_to_target_loss,status\n");
    double target = c->plan_only ? NAN : sweep_target_loss(c);
    const char *peak = c->plan_only ? "peak" : "memory.peak", *cat = c->plan_only ? "by_category" : "memory.by_category";
    for (int i = 0; i < c->n; i++) {
        const sweep_result *r = &c->res[i];
        sweep_sb_printf(&b, "%s,%d,%d,%d,%d,", r->mesh->name, r->mesh->dp, r->mesh->tp, r->batch_size, sweep_global_batch(r));
        csv_num(&b, sweep_record_num(r->record, "summary.tok_s"), "%.1f");
        csv_num(&b, sweep_record_num(r->record, "summary.tok_s_per_rank"), "%.1f");
        csv_num(&b, sweep_record_num(r->record, "summary.mfu"), "%.6f");
        csv_num(&b, sweep_record_num(r->record, peak), "%.0f");
        for (int k = 0; k < SWEEP_N_MEM_CATEGORIES; k++) {
            char path[64];
            snprintf(path, sizeof path, "%s.%s", cat, sweep_mem_categories[k]);
            csv_num(&b, sweep_record_num(r->record, path), "%.0f");
        }
        csv_num(&b, sweep_record_num(r->record, "summary.final_loss"), "%.6f");
        csv_num(&b, sweep_record_num(r->record, "summary.final_eval_loss"), "%.6f");
        csv_num(&b, sweep_mfu_share(r), "%.6f");
        csv_num(&b, sweep_seconds_to_loss(r, target, NULL), "%.3f");
        sweep_sb_printf(&b, "%s\n", r->status);
    }
    return sweep_sb_write(&b, c->dir, "summary.csv", err, el);
}
