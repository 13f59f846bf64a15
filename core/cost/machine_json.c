/* core/cost/machine_json.c — the machine file (schema meshsweep.machine/1) read strictly and written back
 * (see machine.h; every field is documented in docs/cost-model.md). Strict: an unknown key, a missing
 * field, a value of the wrong type or a rate that is zero or negative is one line naming the field.
 * Not the look-ups (core/cost/machine.c). */
#include "core/cost/machine.h"
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rd { const char *origin; char *err; size_t errlen; } rd;

static int bad(rd *r, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(rd *r, const char *path, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(r->err, r->errlen, "%s: %s: %s", r->origin, path, msg);
    return -1;
}

static void join(char *out, size_t cap, const char *a, const char *b) {
    snprintf(out, cap, "%s%s%s", a, *a ? "." : "", b);
}

/* every key of obj must be one of allowed (NULL-terminated) */
static int keys_known(rd *r, json_t *obj, const char *path, const char *const *allowed) {
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int ok = 0;
        for (const char *const *a = allowed; *a && !ok; a++) ok = !strcmp(key, *a);
        if (!ok) {
            char p[160];
            join(p, sizeof p, path, key);
            return bad(r, p, "unknown field");
        }
    }
    return 0;
}

enum { ANY, NONNEG, POS, FRACTION };
/* a number at obj.key (path names obj); absent: -1 with a message when required, else 1 (out untouched) */
static int num(rd *r, json_t *obj, const char *path, const char *key, int req, int range, double *out) {
    char p[160];
    join(p, sizeof p, path, key);
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return req ? bad(r, p, "missing") : 1;
    if (!json_is_number(v)) return bad(r, p, "must be a number");
    double x = json_number_value(v);
    if (!isfinite(x)) return bad(r, p, "must be finite");
    if (range == NONNEG && x < 0) return bad(r, p, "must be >= 0 (got %g)", x);
    if (range == POS && !(x > 0)) return bad(r, p, "must be > 0 (got %g)", x);
    /* the units are GB/s, TFLOP/s and microseconds: a rate below 1e-9 or above 1e9 of them is a unit
     * mistake or a denormal, never a machine (1e-320 passes "> 0") */
    if (range == POS && (x < 1e-9 || x > 1e9))
        return bad(r, p, "%g is not a plausible figure in its units (GB/s, TFLOP/s, us: 1e-9 to 1e9)", x);
    if (range == FRACTION && !(x > 0 && x <= 1)) return bad(r, p, "must be in (0, 1] (got %g)", x);
    if (range == FRACTION && x < 1e-9) return bad(r, p, "%g is not a plausible fraction (1e-9 to 1)", x);
    /* a time in microseconds may be 0 (none), else as plausible as a rate */
    size_t kl = strlen(key);
    if (range == NONNEG && x > 0 && kl > 3 && !strcmp(key + kl - 3, "_us") && (x < 1e-9 || x > 1e9))
        return bad(r, p, "%g is not a plausible figure in its units (us: 0, or 1e-9 to 1e9)", x);
    *out = x;
    return 0;
}
static int integer(rd *r, json_t *obj, const char *path, const char *key, int req, int min, int *out) {
    char p[160];
    join(p, sizeof p, path, key);
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return req ? bad(r, p, "missing") : 1;
    if (!json_is_integer(v)) return bad(r, p, "must be an integer");
    json_int_t x = json_integer_value(v);
    if (x < min || x > 1 << 24) return bad(r, p, "must be an integer in [%d, %d] (got %lld)", min, 1 << 24, (long long)x);
    *out = (int)x;
    return 0;
}
static int boolean(rd *r, json_t *obj, const char *path, const char *key, int *out) {
    char p[160];
    join(p, sizeof p, path, key);
    json_t *v = json_object_get(obj, key);
    if (!v) return bad(r, p, "missing");
    if (!json_is_boolean(v)) return bad(r, p, "must be true or false");
    *out = json_is_true(v);
    return 0;
}
static int string(rd *r, json_t *obj, const char *path, const char *key, int req, char *out, size_t cap) {
    char p[160];
    join(p, sizeof p, path, key);
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return req ? bad(r, p, "missing") : 1;
    if (!json_is_string(v) || !*json_string_value(v)) return bad(r, p, "must be a non-empty string");
    if (strlen(json_string_value(v)) >= cap) return bad(r, p, "longer than %zu characters", cap - 1);
    for (const unsigned char *c = (const unsigned char *)json_string_value(v); *c; c++)
        if (*c < 0x20 || *c == 0x7f) return bad(r, p, "holds a control character (byte %d): one line of text only", *c);
    snprintf(out, cap, "%s", json_string_value(v));
    return 0;
}
static json_t *object(rd *r, json_t *obj, const char *path, const char *key, int *rc) {
    char p[160];
    join(p, sizeof p, path, key);
    json_t *v = json_object_get(obj, key);
    *rc = 0;
    if (!v) { *rc = bad(r, p, "missing"); return NULL; }
    if (!json_is_object(v)) { *rc = bad(r, p, "must be an object"); return NULL; }
    return v;
}

/* [[x, y], ...] with x increasing and > 0, y checked by yrange; n points into x[], y[] */
static int pairs(rd *r, json_t *a, const char *p, int yrange, double *x, double *y, int cap, int *n) {
    if (!json_is_array(a) || json_array_size(a) == 0) return bad(r, p, "must be a non-empty array of [x, y] pairs");
    if ((int)json_array_size(a) > cap) return bad(r, p, "more than %d points", cap);
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e) {
        char q[200];
        snprintf(q, sizeof q, "%s[%zu]", p, i);
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_number(json_array_get(e, 0)) ||
            !json_is_number(json_array_get(e, 1)))
            return bad(r, q, "must be a pair of numbers [x, y]");
        double a0 = json_number_value(json_array_get(e, 0)), a1 = json_number_value(json_array_get(e, 1));
        if (!(a0 > 0) || !isfinite(a0)) return bad(r, q, "x must be > 0 (got %g)", a0);
        if (i > 0 && !(a0 > x[i - 1])) return bad(r, q, "x must increase (%g after %g)", a0, x[i - 1]);
        if (!isfinite(a1) || (yrange == POS && !(a1 > 0)) || (yrange == FRACTION && !(a1 > 0 && a1 <= 1)))
            return bad(r, q, "%s (got %g)", yrange == FRACTION ? "y must be in (0, 1]" : "y must be > 0", a1);
        if (a1 < 1e-9 || (yrange == POS && a1 > 1e9)) /* a denormal or a unit mistake (us, fractions) */
            return bad(r, q, "y %g is not a plausible figure in its units (1e-9 to %s)", a1, yrange == POS ? "1e9" : "1");
        x[i] = a0; y[i] = a1;
    }
    *n = (int)json_array_size(a);
    return 0;
}

static int kind_of(const char *s) {
    for (int k = 0; k < COMM_NKIND; k++) if (!strcmp(s, comm_kind_names[k])) return k;
    return -1;
}
static int op_of(const char *s) {
    for (int k = 0; k < COST_NOPS; k++) if (!strcmp(s, cost_op_names[k])) return k;
    return -1;
}

static int parse_gemm(rd *r, json_t *a, cost_machine *m) {
    const char *p = "compute.gemm";
    if (!json_is_array(a) || json_array_size(a) == 0) return bad(r, p, "must be a non-empty array of {op, m, n, k, us}");
    m->ngemm = (int)json_array_size(a);
    m->gemm = calloc((size_t)(m->ngemm ? m->ngemm : 1), sizeof *m->gemm);
    if (!m->gemm) return bad(r, p, "out of memory");
    static const char *const keys[] = {"op", "m", "n", "k", "us", NULL};
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e) {
        char q[64], op[32];
        snprintf(q, sizeof q, "%s[%zu]", p, i);
        if (!json_is_object(e)) return bad(r, q, "must be an object {op, m, n, k, us}");
        if (keys_known(r, e, q, keys) || string(r, e, q, "op", 1, op, sizeof op)) return -1;
        cost_gemm_point *g = &m->gemm[i];
        g->op = op_of(op);
        if (g->op < 0 || !cost_op_is_gemm((cost_op_kind)g->op))
            return bad(r, q, "op '%s' is not a GEMM (gemm_fwd, gemm_fwd_f32, gemm_din, gemm_dw)", op);
        int d[3];
        if (integer(r, e, q, "m", 1, 1, &d[0]) || integer(r, e, q, "n", 1, 1, &d[1]) ||
            integer(r, e, q, "k", 1, 1, &d[2]) || num(r, e, q, "us", 1, POS, &g->us))
            return -1;
        g->m = d[0]; g->n = d[1]; g->k = d[2];
    }
    return 0;
}

static int parse_compute(rd *r, json_t *c, cost_machine *m) {
    static const char *const keys[] = {"async", "launch_us", "peak_tflops", "gemm_efficiency", "attention_efficiency",
                                       "attention_bwd_efficiency", "memory_gbs", "memory_efficiency", "host_link_gbs", "sequence_factor", "gemm", "ops", NULL};
    const char *p = "compute";
    if (keys_known(r, c, p, keys) || boolean(r, c, p, "async", &m->async) ||
        num(r, c, p, "launch_us", 1, NONNEG, &m->launch_us) || num(r, c, p, "peak_tflops", 1, POS, &m->peak_tflops) ||
        num(r, c, p, "attention_efficiency", 1, FRACTION, &m->attention_efficiency) ||
        num(r, c, p, "memory_gbs", 1, POS, &m->memory_gbs) ||
        num(r, c, p, "memory_efficiency", 1, FRACTION, &m->memory_efficiency) ||
        num(r, c, p, "host_link_gbs", 1, POS, &m->host_link_gbs))
        return -1;
    m->attention_bwd_efficiency = 0;   /* optional: absent, the backward runs as the forward */
    if (num(r, c, p, "attention_bwd_efficiency", 0, FRACTION, &m->attention_bwd_efficiency) < 0) return -1;
    m->sequence_factor = 1;   /* optional: files calibrated before it was measured have none */
    if (num(r, c, p, "sequence_factor", 0, POS, &m->sequence_factor) < 0) return -1;
    json_t *ge = json_object_get(c, "gemm_efficiency");
    if (!ge) return bad(r, "compute.gemm_efficiency", "missing");
    if (pairs(r, ge, "compute.gemm_efficiency", FRACTION, m->eff_flops, m->eff, COST_MAX_EFF, &m->n_eff)) return -1;
    json_t *g = json_object_get(c, "gemm");
    if (g && parse_gemm(r, g, m)) return -1;
    json_t *ops = json_object_get(c, "ops");
    if (!ops) return 0;
    if (!json_is_object(ops)) return bad(r, "compute.ops", "must be an object {op name: [[bytes, us], ...]}");
    const char *key;
    json_t *v;
    json_object_foreach(ops, key, v) {
        char q[96];
        snprintf(q, sizeof q, "compute.ops.%s", key);
        int k = op_of(key);
        if (k < 0 || cost_op_is_gemm((cost_op_kind)k)) return bad(r, q, "unknown op (GEMMs go in compute.gemm)");
        cost_curve *cv = &m->ops[k];
        if (pairs(r, v, q, POS, cv->x, cv->us, COST_MAX_POINTS, &cv->n)) return -1;
    }
    return 0;
}

static int parse_coll(rd *r, json_t *e, const char *q, cost_coll *c) {
    static const char *const keys[] = {"kind", "scope", "ranks", "ranks_per_host", "host_ranks", "host", "started",
                                       "latency_us", "latency_per_step_us", "busbw_gbs", "busbw_half_bytes", "table", NULL};
    char kind[32], scope[16];
    if (!json_is_object(e)) return bad(r, q, "must be an object");
    if (keys_known(r, e, q, keys) || string(r, e, q, "kind", 1, kind, sizeof kind)) return -1;
    if ((c->kind = kind_of(kind)) < 0) return bad(r, q, "kind '%s' is not all_reduce, all_gather, reduce_scatter or broadcast", kind);
    int hr = integer(r, e, q, "ranks", 0, 2, &c->ranks), hp = integer(r, e, q, "ranks_per_host", 0, 1, &c->ranks_per_host);
    if (hr < 0 || hp < 0 || integer(r, e, q, "host_ranks", 0, 1, &c->host_ranks) < 0) return -1;
    char p2[200];
    snprintf(p2, sizeof p2, "%s.ranks_per_host", q);
    if ((hr == 0) != (hp == 0)) return bad(r, p2, "give ranks and ranks_per_host together, or neither (then scope)");
    if (hr == 0 && c->ranks_per_host > c->ranks) return bad(r, p2, "more than ranks (%d > %d)", c->ranks_per_host, c->ranks);
    int hs = string(r, e, q, "scope", hr != 0, scope, sizeof scope);
    if (hs < 0) return -1;
    if (hs == 0) {
        c->scope = !strcmp(scope, "intra") ? COST_SCOPE_INTRA : !strcmp(scope, "inter") ? COST_SCOPE_INTER : 0;
        snprintf(p2, sizeof p2, "%s.scope", q);
        if (!c->scope) return bad(r, p2, "must be intra (one host) or inter (spans hosts), got '%s'", scope);
        if (hr == 0 && c->scope != (c->ranks_per_host >= c->ranks ? COST_SCOPE_INTRA : COST_SCOPE_INTER))
            return bad(r, p2, "'%s' disagrees with ranks %d, ranks_per_host %d", scope, c->ranks, c->ranks_per_host);
    } else {
        c->scope = c->ranks_per_host >= c->ranks ? COST_SCOPE_INTRA : COST_SCOPE_INTER;
    }
    json_t *h = json_object_get(e, "host");
    if (h && !json_is_boolean(h)) { snprintf(p2, sizeof p2, "%s.host", q); return bad(r, p2, "must be true or false"); }
    c->host = h && json_is_true(h);
    json_t *st = json_object_get(e, "started");
    if (st && !json_is_boolean(st)) { snprintf(p2, sizeof p2, "%s.started", q); return bad(r, p2, "must be true or false"); }
    c->started = st && json_is_true(st);
    if (num(r, e, q, "latency_us", 1, NONNEG, &c->latency_us) < 0 || num(r, e, q, "busbw_gbs", 1, POS, &c->busbw_gbs) < 0 ||
        num(r, e, q, "latency_per_step_us", 0, NONNEG, &c->latency_per_step_us) < 0 ||
        num(r, e, q, "busbw_half_bytes", 0, NONNEG, &c->half_bytes) < 0)
        return -1;
    json_t *t = json_object_get(e, "table");
    if (!t) return 0;
    snprintf(p2, sizeof p2, "%s.table", q);
    return pairs(r, t, p2, POS, c->bytes, c->us, COST_MAX_POINTS, &c->npts);
}

static int parse_comm(rd *r, json_t *c, cost_machine *m) {
    static const char *const keys[] = {"overlap", "overlap_slowdown", "nic_per_rank", "collectives", NULL};
    if (keys_known(r, c, "comm", keys) || boolean(r, c, "comm", "overlap", &m->overlap)) return -1;
    m->overlap_slowdown = 0;   /* optional: compute beside a running collective as fast as alone */
    if (num(r, c, "comm", "overlap_slowdown", 0, NONNEG, &m->overlap_slowdown) < 0) return -1;
    if (m->overlap_slowdown > 1) return bad(r, "comm.overlap_slowdown", "must be <= 1 (a fraction of the op's time; got %g)", m->overlap_slowdown);
    m->nic_per_rank = 0;   /* optional: a network port per rank (GPU hosts), machine.h */
    if (json_object_get(c, "nic_per_rank") && boolean(r, c, "comm", "nic_per_rank", &m->nic_per_rank)) return -1;
    json_t *a = json_object_get(c, "collectives");
    if (!a) return bad(r, "comm.collectives", "missing");
    if (!json_is_array(a) || json_array_size(a) == 0) return bad(r, "comm.collectives", "must be a non-empty array");
    m->ncoll = (int)json_array_size(a);
    m->coll = calloc((size_t)m->ncoll, sizeof *m->coll);
    if (!m->coll) return bad(r, "comm.collectives", "out of memory");
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e) {
        char q[64];
        snprintf(q, sizeof q, "comm.collectives[%zu]", i);
        if (parse_coll(r, e, q, &m->coll[i])) return -1;
        for (size_t k = 0; k < i; k++) { /* two tables of one collective: which one a look-up finds is chance */
            const cost_coll *a0 = &m->coll[k], *b0 = &m->coll[i];
            if (a0->kind == b0->kind && a0->scope == b0->scope && a0->ranks == b0->ranks &&
                a0->ranks_per_host == b0->ranks_per_host && a0->host_ranks == b0->host_ranks && a0->host == b0->host &&
                a0->started == b0->started)
                return bad(r, q, "the same collective as comm.collectives[%zu] (kind, scope, ranks, host): give one table", k);
        }
    }
    return 0;
}

static int parse_root(rd *r, json_t *j, cost_machine *m) {
    static const char *const keys[] = {"schema", "name", "description", "calibrated", "host", "cores", "build",
                                       "compute", "hosts", "comm", "sources", NULL};
    char schema[64];
    if (!json_is_object(j)) return bad(r, "(top level)", "must be a JSON object");
    if (keys_known(r, j, "", keys) || string(r, j, "", "schema", 1, schema, sizeof schema)) return -1;
    if (strcmp(schema, COST_MACHINE_SCHEMA)) return bad(r, "schema", "must be \"%s\" (got \"%s\")", COST_MACHINE_SCHEMA, schema);
    if (string(r, j, "", "name", 1, m->name, sizeof m->name) || string(r, j, "", "description", 0, m->description, sizeof m->description) < 0 ||
        string(r, j, "", "calibrated", 0, m->calibrated, sizeof m->calibrated) < 0 ||
        string(r, j, "", "host", 0, m->host, sizeof m->host) < 0 || string(r, j, "", "build", 0, m->build, sizeof m->build) < 0 ||
        integer(r, j, "", "cores", 0, 1, &m->cores) < 0)
        return -1;
    int rc;
    json_t *c = object(r, j, "", "compute", &rc);
    if (rc || parse_compute(r, c, m)) return -1;
    json_t *h = object(r, j, "", "hosts", &rc);
    static const char *const hkeys[] = {"cores_per_host", "calibrated_ranks", "oversubscribed_efficiency", NULL};
    m->calibrated_ranks = 1;
    if (rc || keys_known(r, h, "hosts", hkeys) || integer(r, h, "hosts", "cores_per_host", 1, 1, &m->cores_per_host) ||
        integer(r, h, "hosts", "calibrated_ranks", 0, 1, &m->calibrated_ranks) < 0 ||
        num(r, h, "hosts", "oversubscribed_efficiency", 1, POS, &m->oversubscribed_efficiency))
        return -1;
    json_t *cm = object(r, j, "", "comm", &rc);
    if (rc || parse_comm(r, cm, m)) return -1;
    json_t *s = json_object_get(j, "sources");
    if (s) {
        const char *key;
        json_t *v;
        if (!json_is_object(s)) return bad(r, "sources", "must be an object {field: source}");
        json_object_foreach(s, key, v) if (!json_is_string(v)) {
            char q[160];
            join(q, sizeof q, "sources", key);
            return bad(r, q, "must be a string");
        }
        m->sources = json_incref(s);
    }
    return 0;
}

int cost_machine_parse(const char *text, const char *origin, cost_machine *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    rd r = {origin, err, errlen};
    json_error_t je;
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        snprintf(err, errlen, "%s: line %d: not valid JSON: %s", origin, je.line, je.text);
        return -1;
    }
    int rc = parse_root(&r, j, m);
    json_decref(j);
    if (rc) cost_machine_free(m);
    return rc;
}

int cost_machine_load(const char *path, cost_machine *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, errlen, "--machine %s: cannot open: %s", path, strerror(errno)); return -1; }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 65536 > cap) {
            char *b = realloc(buf, cap = cap ? cap * 2 : 131072);
            if (!b || cap > (64u << 20)) { free(b ? b : buf); fclose(f); snprintf(err, errlen, "%s: too large", path); return -1; }
            buf = b;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    int rerr = ferror(f);
    fclose(f);
    if (rerr) { free(buf); snprintf(err, errlen, "%s: read error", path); return -1; }
    buf[n] = 0;
    int rc = cost_machine_parse(buf, path, m, err, errlen);
    free(buf);
    return rc;
}

/* ---- writing ----------------------------------------------------------------------------------- */

static json_t *pairs_json(const double *x, const double *y, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_pack("[f, f]", x[i], y[i]));
    return a;
}
static json_t *str_or_null(const char *s) { return s && *s ? json_string(s) : json_null(); }

static json_t *coll_json(const cost_coll *c) {
    json_t *e = json_object();
    json_object_set_new(e, "kind", json_string(comm_kind_names[c->kind]));
    if (c->ranks) {
        json_object_set_new(e, "ranks", json_integer(c->ranks));
        json_object_set_new(e, "ranks_per_host", json_integer(c->ranks_per_host));
    }
    json_object_set_new(e, "scope", json_string(c->scope == COST_SCOPE_INTER ? "inter" : "intra"));
    if (c->host_ranks) json_object_set_new(e, "host_ranks", json_integer(c->host_ranks));
    if (c->host) json_object_set_new(e, "host", json_true());
    if (c->started) json_object_set_new(e, "started", json_true());
    json_object_set_new(e, "latency_us", json_real(c->latency_us));
    json_object_set_new(e, "latency_per_step_us", json_real(c->latency_per_step_us));
    json_object_set_new(e, "busbw_gbs", json_real(c->busbw_gbs));
    if (c->half_bytes > 0) json_object_set_new(e, "busbw_half_bytes", json_real(c->half_bytes));
    if (c->npts) json_object_set_new(e, "table", pairs_json(c->bytes, c->us, c->npts));
    return e;
}

json_t *cost_machine_to_json(const cost_machine *m) {
    json_t *j = json_object();
    json_object_set_new(j, "schema", json_string(COST_MACHINE_SCHEMA));
    json_object_set_new(j, "name", json_string(m->name));
    json_object_set_new(j, "description", str_or_null(m->description));
    json_object_set_new(j, "calibrated", str_or_null(m->calibrated));
    json_object_set_new(j, "host", str_or_null(m->host));
    json_object_set_new(j, "cores", m->cores ? json_integer(m->cores) : json_null());
    json_object_set_new(j, "build", str_or_null(m->build));
    json_t *c = json_object();
    json_object_set_new(c, "async", json_boolean(m->async));
    json_object_set_new(c, "launch_us", json_real(m->launch_us));
    json_object_set_new(c, "peak_tflops", json_real(m->peak_tflops));
    json_object_set_new(c, "gemm_efficiency", pairs_json(m->eff_flops, m->eff, m->n_eff));
    json_object_set_new(c, "attention_efficiency", json_real(m->attention_efficiency));
    if (m->attention_bwd_efficiency > 0) json_object_set_new(c, "attention_bwd_efficiency", json_real(m->attention_bwd_efficiency));
    json_object_set_new(c, "memory_gbs", json_real(m->memory_gbs));
    json_object_set_new(c, "memory_efficiency", json_real(m->memory_efficiency));
    json_object_set_new(c, "host_link_gbs", json_real(m->host_link_gbs));
    json_object_set_new(c, "sequence_factor", json_real(m->sequence_factor > 0 ? m->sequence_factor : 1));
    if (m->ngemm) {
        json_t *g = json_array();
        for (int i = 0; i < m->ngemm; i++) {
            const cost_gemm_point *p = &m->gemm[i];
            json_array_append_new(g, json_pack("{s:s, s:I, s:I, s:I, s:f}", "op", cost_op_names[p->op], "m", (json_int_t)p->m,
                                               "n", (json_int_t)p->n, "k", (json_int_t)p->k, "us", p->us));
        }
        json_object_set_new(c, "gemm", g);
    }
    json_t *ops = json_object();
    for (int k = 0; k < COST_NOPS; k++)
        if (m->ops[k].n) json_object_set_new(ops, cost_op_names[k], pairs_json(m->ops[k].x, m->ops[k].us, m->ops[k].n));
    if (json_object_size(ops)) json_object_set_new(c, "ops", ops);
    else json_decref(ops);
    json_object_set_new(j, "compute", c);
    json_object_set_new(j, "hosts", json_pack("{s:i, s:i, s:f}", "cores_per_host", m->cores_per_host, "calibrated_ranks",
                                              m->calibrated_ranks > 0 ? m->calibrated_ranks : 1,
                                              "oversubscribed_efficiency", m->oversubscribed_efficiency));
    json_t *cl = json_array();
    for (int i = 0; i < m->ncoll; i++) json_array_append_new(cl, coll_json(&m->coll[i]));
    json_t *cm = json_pack("{s:b, s:b, s:o}", "overlap", m->overlap, "nic_per_rank", m->nic_per_rank, "collectives", cl);
    if (m->overlap_slowdown > 0) json_object_set_new(cm, "overlap_slowdown", json_real(m->overlap_slowdown));
    json_object_set_new(j, "comm", cm);
    if (m->sources) json_object_set_new(j, "sources", json_deep_copy(m->sources));
    return j;
}

json_t *cost_machine_estimates(const cost_machine *m) {
    json_t *a = json_array();
    const char *key;
    json_t *v;
    if (m->sources)
        json_object_foreach(m->sources, key, v) if (!strncmp(json_string_value(v), "estimate", 8))
            json_array_append_new(a, json_string(key));
    return a;
}
