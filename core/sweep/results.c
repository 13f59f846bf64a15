/* core/sweep/results.c — what the sweep's outputs share: the run records read by dotted path, the
 * numbers derived from them (MFU against the cores each rank had, seconds to a target loss, hosts, the
 * loss deviation between meshes) and the text buffer every output file is built in, then written
 * atomically. Not an output of its own (core/sweep/report.c, charts.c, report_md.c). */
#include "core/sweep/results.h"
#include "core/common/errmsg.h"
#include "core/sweep/launch.h"
#include "core/common/files.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    } else if (files_write_atomic(path, b->p ? b->p : "", b->len) != 0) {
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
    if (r->mesh->global_batch > 0) return r->mesh->global_batch; /* equivalence (= dp x batch) or matched */
    return r->mesh->dp * r->batch_size;
}

int sweep_grad_accum(const sweep_result *r) {
    double n = sweep_record_num(r->record, "grad_accum");
    if (isfinite(n) && n >= 1) return (int)n;
    long long per = (long long)r->mesh->dp * r->batch_size;
    return per > 0 && sweep_global_batch(r) % per == 0 ? (int)(sweep_global_batch(r) / per) : 0;
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
    sweep_loss_deviation_setting(res, n, -1, d, per_step);
}

void sweep_loss_deviation_setting(const sweep_result *res, int n, int setting, sweep_deviation *d, json_t **per_step) {
    memset(d, 0, sizeof *d);
    d->ref = -1, d->at_step = -1, d->at_mesh = -1;
    if (per_step) *per_step = json_array();
    for (int i = 0; i < n && d->ref < 0; i++)
        if (sweep_n_steps(&res[i]) > 0 && (setting < 0 || res[i].mesh->setting == setting)) d->ref = i;
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
            if (m == d->ref || !res[m].record || (setting >= 0 && res[m].mesh->setting != setting)) continue;
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

const char *sweep_cap_text(int capped) {
    return capped == SWEEP_CAP_DATA ? " (data limit)" : capped ? " (engine limit)" : "";
}
const char *sweep_cap_sentence(int capped) {
    return capped == SWEEP_CAP_DATA ? ": the most the token files hold as distinct sequences (the train steps and the "
                                      "eval batches), not the memory budget's"
           : capped ? ": the engine's own batch limit, not the memory budget's" : "";
}
