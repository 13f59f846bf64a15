/* core/sweep/grid.c — grid sweeps (docs/grids.md): the spec's "axes", checked strictly (every rejection is
 * one line naming the key: "axes.seq_len[1]: ..."), crossed with the meshes into cells, and the cell
 * names. Why the names look as they do: a cell is the mesh, then ".SHORT=VALUE" for each axis in the
 * spec's order, so files of one mesh sort together and a name reads as the setting it ran
 * ("2x4.ac=every:2.seq=4096"); the characters are those of a safe file name, with '=' and ':'.
 * Not the other spec keys (core/sweep/spec.c), not the runs or outputs (core/sweep/mesh_runs.c, report*.c). */
#include "core/sweep/grid.h"
#include "core/common/errmsg.h"

#include "core/formats/config.h"
#include "core/common/parse.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum axis_type { AX_CKPT = 1, AX_SPA, AX_BOOL, AX_SEQ, AX_GB, AX_SIZE };

/* The keys that may be axes: those that change one run and nothing else of the sweep. Not here:
 * world, meshes, model, steps, data (what is compared), batch_size (the search is the point of a
 * grid; a list of fixed batches would mix modes between cells), names and paths. */
static const struct { const char *key, *short_name; int type; } axis_defs[] = {
    {"checkpoint_activations", "ac", AX_CKPT}, {"sp_activations", "spa", AX_SPA},
    {"sequence_parallel", "sp", AX_BOOL},      {"prefetch", "pf", AX_BOOL},
    {"seq_len", "seq", AX_SEQ},                {"global_batch", "gb", AX_GB},
    {"mem_budget", "mem", AX_SIZE},
};
#define N_AXIS_DEFS ((int)(sizeof axis_defs / sizeof axis_defs[0]))
_Static_assert(N_AXIS_DEFS <= SWEEP_MAX_AXES, "every axis key fits in a cell's value[]");

static int axis_def(const char *key) {
    for (int i = 0; i < N_AXIS_DEFS; i++)
        if (strcmp(axis_defs[i].key, key) == 0) return i;
    return -1;
}

const char *sweep_axis_short_name(const char *key) {
    int d = key ? axis_def(key) : -1;
    return d < 0 ? NULL : axis_defs[d].short_name;
}

static const char *type_name(const json_t *v) {
    if (!v) return "nothing";
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

int sweep_axes_has(json_t *root, const char *key) {
    json_t *axes = json_object_get(root, "axes");
    return json_is_object(axes) && json_object_get(axes, key) != NULL;
}

int sweep_axes_check_shape(json_t *root, char *err, size_t el) {
    json_t *axes = json_object_get(root, "axes");
    if (!axes) return 0;
    if (!json_is_object(axes) || json_object_size(axes) == 0) {
        errmsg_set(err, el, "axes: expected an object from option keys to lists of values, got %s",
                   json_is_object(axes) ? "an empty object" : type_name(axes));
        return -1;
    }
    const char *k;
    json_t *v;
    json_object_foreach(axes, k, v) {
        if (axis_def(k) < 0) {
            errmsg_set(err, el, "axes.%.60s: not an option that can be swept (one of checkpoint_activations, "
                                "sp_activations, sequence_parallel, prefetch, seq_len, global_batch, mem_budget)", k);
            return -1;
        }
        if (json_object_get(root, k)) {
            errmsg_set(err, el, "axes.%s: also given at the top level; give it in one place", k);
            return -1;
        }
        if (!json_is_array(v) || json_array_size(v) == 0) {
            errmsg_set(err, el, "axes.%s: expected a non-empty array of values, got %s", k,
                       json_is_array(v) ? "an empty array" : type_name(v));
            return -1;
        }
        if (json_array_size(v) > 64) {
            errmsg_set(err, el, "axes.%s: %zu values; at most 64", k, json_array_size(v));
            return -1;
        }
    }
    return 0;
}

/* ---- values ------------------------------------------------------------------------------------ */

static int pos_dec(const char *s, long long max) {
    if (*s < '1' || *s > '9') return 0;
    long long x = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return 0;
        x = x * 10 + (*s - '0');
        if (x > max) return 0;
    }
    return 1;
}

int sweep_parse_checkpointing(json_t *v, const char **out) {
    if (json_is_boolean(v)) {
        *out = json_is_true(v) ? "full" : "none";
        return 0;
    }
    const char *s = json_string_value(v);
    if (!s || strlen(s) != json_string_length(v)) return -1;
    if (strcmp(s, "none") == 0 || strcmp(s, "full") == 0) {
        *out = strcmp(s, "none") == 0 ? "none" : "full";
        return 0;
    }
    if (strncmp(s, "every:", 6) != 0 || !pos_dec(s + 6, 1000000)) return -1;
    *out = s;
    return 0;
}

int sweep_cell_name_valid(const char *name) {
    if (!name || !*name || strlen(name) > SWEEP_CELL_NAME_MAX || name[0] < '0' || name[0] > '9') return 0;
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-' || c == '=' || c == ':'))
            return 0;
    }
    return 1;
}

/* One value of axis `key` at position i into *out; -1 with "axes.KEY[i]: ..." in err. */
static int read_value(const sweep_spec *s, const char *key, int type, json_t *v, int i, sweep_axis_value *out,
                      char *err, size_t el) {
    memset(out, 0, sizeof *out);
    const char *str = json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v) ? json_string_value(v)
                                                                                                : NULL;
    switch (type) {
    case AX_CKPT:
        if (sweep_parse_checkpointing(v, &out->sval) != 0) {
            errmsg_set(err, el, "axes.%s[%d]: expected \"none\", \"full\", \"every:K\" (K a positive integer), true "
                                "or false, got %s", key, i, str ? "another string" : type_name(v));
            return -1;
        }
        snprintf(out->text, sizeof out->text, "%s", out->sval);
        return 0;
    case AX_SPA:
        if (!str || (strcmp(str, "local") != 0 && strcmp(str, "gathered") != 0)) {
            errmsg_set(err, el, "axes.%s[%d]: expected \"local\" or \"gathered\", got %s", key, i,
                       str ? "another string" : type_name(v));
            return -1;
        }
        out->sval = str;
        snprintf(out->text, sizeof out->text, "%s", str);
        return 0;
    case AX_BOOL:
        if (!json_is_boolean(v)) {
            errmsg_set(err, el, "axes.%s[%d]: expected true or false, got %s", key, i, type_name(v));
            return -1;
        }
        out->ival = json_is_true(v);
        snprintf(out->text, sizeof out->text, "%s", out->ival ? "on" : "off");
        return 0;
    case AX_SEQ:
    case AX_GB:
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 24)) {
            errmsg_set(err, el, "axes.%s[%d]: expected an integer in [1, %d], got %s", key, i, 1 << 24,
                       json_is_integer(v) ? "one out of range" : type_name(v));
            return -1;
        }
        out->ival = (int)json_integer_value(v);
        snprintf(out->text, sizeof out->text, "%d", out->ival);
        for (int m = 0; type == AX_GB && m < s->n_meshes; m++)
            if (out->ival % s->meshes[m].dp) {
                errmsg_set(err, el, "axes.%s[%d]: %d is not divisible by dp = %d of mesh %s", key, i, out->ival,
                           s->meshes[m].dp, s->meshes[m].mesh_name);
                return -1;
            }
        return 0;
    case AX_SIZE:
        if (!str || strlen(str) >= sizeof out->text ||
            (strcmp(str, "auto") != 0 && (parse_size(str, &out->bytes) != 0 || out->bytes == 0))) {
            errmsg_set(err, el, "axes.%s[%d]: expected a size (e.g. \"96MiB\", \"80GB\") or \"auto\", got %s", key, i,
                       str ? "another string" : type_name(v));
            return -1;
        }
        if (strcmp(str, "auto") == 0 && strcmp(s->backend, "cuda") != 0) {
            errmsg_set(err, el, "axes.%s[%d]: \"auto\" needs \"backend\": \"cuda\" (it is the device's free memory)",
                       key, i);
            return -1;
        }
        out->sval = str;
        snprintf(out->text, sizeof out->text, "%s", str);
        return 0;
    }
    return -1;
}

/* Checkpointing by what it recomputes: the K of "every K-th layer", none 0, full 1 (so "every:1" is "full").
 * sval is a value sweep_parse_checkpointing gave: "none", "full" or "every:K" with K checked. */
static long ckpt_every(const char *sval) {
    if (strcmp(sval, "none") == 0) return 0;
    if (strcmp(sval, "full") == 0) return 1;
    return strtol(sval + 6, NULL, 10);
}

/* 1 when two values of an axis of this type give the same runs, however they are spelled: checkpointing
 * by ckpt_every, sizes in bytes ("16MiB" is "16777216B"; "auto" has no bytes and equals only itself);
 * booleans, integers and sp_activations by their text, which is already canonical ("on", "64"). Two
 * such values would make two cells of one run. */
static int same_value(int type, const sweep_axis_value *a, const sweep_axis_value *b) {
    switch (type) {
    case AX_CKPT: return ckpt_every(a->sval) == ckpt_every(b->sval);
    case AX_SIZE: return a->bytes == b->bytes && (a->bytes != 0 || strcmp(a->sval, b->sval) == 0);
    }
    return strcmp(a->text, b->text) == 0;
}

static int read_axis(const sweep_spec *s, const char *key, json_t *list, sweep_axis *a, char *err, size_t el) {
    int d = axis_def(key);
    a->key = axis_defs[d].key;
    a->short_name = axis_defs[d].short_name;
    a->n = (int)json_array_size(list);
    a->values = calloc((size_t)a->n, sizeof *a->values);
    if (!a->values) {
        errmsg_set(err, el, "axes.%s: out of memory", key);
        return -1;
    }
    for (int i = 0; i < a->n; i++) {
        if (read_value(s, key, axis_defs[d].type, json_array_get(list, (size_t)i), i, &a->values[i], err, el))
            return -1;
        for (int j = 0; j < i; j++) {
            const sweep_axis_value *x = &a->values[i], *y = &a->values[j];
            if (!same_value(axis_defs[d].type, x, y)) continue;
            if (strcmp(x->text, y->text) == 0)
                errmsg_set(err, el, "axes.%s[%d]: %s is listed twice (as [%d] too)", key, i, x->text, j);
            else /* only strings are spelled two ways: checkpointing and sizes */
                errmsg_set(err, el, "axes.%s[%d]: \"%s\" is the same value as [%d] \"%s\"", key, i, x->text, j,
                           y->text);
            return -1;
        }
    }
    return 0;
}

int sweep_axes_check_model(const sweep_spec *s, const model_config *cfg, char *err, size_t el) {
    char why[200];
    for (int k = 0; k < s->n_axes; k++) {
        if (axis_defs[axis_def(s->axes[k].key)].type != AX_SEQ) continue;
        for (int i = 0; i < s->axes[k].n; i++)
            if (config_check_seq_len(cfg, s->axes[k].values[i].ival, why, sizeof why)) {
                errmsg_set(err, el, "axes.%s[%d]: %s", s->axes[k].key, i, why);
                return -1;
            }
    }
    return 0;
}

/* ---- cells ------------------------------------------------------------------------------------- */

static void apply(const sweep_spec *s, sweep_mesh *c, const sweep_axis *a, const sweep_axis_value *v) {
    switch (axis_defs[axis_def(a->key)].type) {
    case AX_CKPT: c->checkpoint_activations = v->sval; break;
    case AX_SPA: c->sp_activations = v->sval; break;
    case AX_BOOL:
        if (strcmp(a->key, "prefetch") == 0) c->prefetch = v->ival;
        else c->sequence_parallel = v->ival;
        break;
    case AX_SEQ: c->seq_len = v->ival; break;
    case AX_GB:
        c->global_batch = v->ival;
        c->batch_size = s->batch_mode == SWEEP_BATCH_GLOBAL ? v->ival / c->dp : 0;
        break;
    case AX_SIZE:
        c->mem_budget = v->sval;
        c->mem_budget_bytes = v->bytes;
        break;
    }
}

/* Every mesh gets the spec's own options: the cells start from them. */
static void mesh_defaults(sweep_spec *s) {
    for (int i = 0; i < s->n_meshes; i++) {
        sweep_mesh *m = &s->meshes[i];
        m->mesh_index = i;
        m->seq_len = s->seq_len;
        m->global_batch = s->global_batch;
        m->checkpoint_activations = s->checkpoint_activations;
        m->sp_activations = s->sp_activations;
        m->sequence_parallel = s->sequence_parallel;
        m->prefetch = s->prefetch;
        m->mem_budget = s->mem_budget;
        m->mem_budget_bytes = s->mem_budget_bytes;
    }
}

static int make_cell(sweep_spec *s, int mesh, int setting, sweep_mesh *c, char *err, size_t el) {
    *c = s->meshes[mesh];
    c->setting = setting;
    size_t len = strlen(c->mesh_name);
    memcpy(c->name, c->mesh_name, len + 1);
    for (int k = s->n_axes - 1, rest = setting; k >= 0; k--) { /* the first axis varies slowest */
        c->value[k] = rest % s->axes[k].n;
        rest /= s->axes[k].n;
    }
    for (int k = 0; k < s->n_axes; k++) {
        const sweep_axis *a = &s->axes[k];
        apply(s, c, a, &a->values[c->value[k]]);
        int n = snprintf(c->name + len, sizeof c->name - len, ".%s=%s", a->short_name, a->values[c->value[k]].text);
        if (n < 0 || (size_t)n >= sizeof c->name - len) {
            errmsg_set(err, el, "axes: the cell names of mesh %s are longer than %d characters", c->mesh_name,
                       SWEEP_CELL_NAME_MAX);
            return -1;
        }
        len += (size_t)n;
    }
    if (!sweep_cell_name_valid(c->name)) { /* cannot happen with the values read above: a guard for the next key */
        errmsg_set(err, el, "axes: \"%.60s\" is not a safe file name", c->name);
        return -1;
    }
    return 0;
}

int sweep_grid_build(json_t *root, sweep_spec *s, char *err, size_t el) {
    mesh_defaults(s);
    json_t *axes = json_object_get(root, "axes");
    s->n_settings = 1;
    const char *k;
    json_t *list;
    json_object_foreach(axes, k, list) { /* the spec's order: the order of the pairs in cell names */
        if (read_axis(s, k, list, &s->axes[s->n_axes++], err, el)) return -1;
        s->n_settings *= s->axes[s->n_axes - 1].n;
        if ((long long)s->n_settings * s->n_meshes > SWEEP_MAX_CELLS) {
            errmsg_set(err, el, "axes: more than %d cells (meshes x values of every axis)", SWEEP_MAX_CELLS);
            return -1;
        }
    }
    s->n_cells = s->n_meshes * s->n_settings;
    s->cells = calloc((size_t)s->n_cells, sizeof *s->cells);
    if (!s->cells) {
        errmsg_set(err, el, "axes: out of memory");
        return -1;
    }
    for (int m = 0; m < s->n_meshes; m++)
        for (int t = 0; t < s->n_settings; t++)
            if (make_cell(s, m, t, &s->cells[m * s->n_settings + t], err, el)) return -1;
    return 0;
}

void sweep_grid_free(sweep_spec *s) {
    for (int k = 0; k < s->n_axes; k++) free(s->axes[k].values);
    free(s->cells);
    s->cells = NULL;
    s->n_axes = 0;
}

/* ---- records ----------------------------------------------------------------------------------- */

/* Axis k of cell c against the record's value v of that key; 1 when they agree. */
static int value_agrees(const sweep_spec *s, const sweep_mesh *c, int k, json_t *v) {
    const sweep_axis_value *x = &s->axes[k].values[c->value[k]];
    const char *got = NULL;
    switch (axis_defs[axis_def(s->axes[k].key)].type) {
    case AX_CKPT: /* a record says true/false (every layer or none) or, with K, the string */
        if (json_is_boolean(v)) return json_is_true(v) == (strcmp(x->sval, "none") != 0);
        return sweep_parse_checkpointing(v, &got) == 0 && strcmp(got, x->sval) == 0;
    case AX_SPA: return json_is_string(v) && strcmp(json_string_value(v), x->sval) == 0;
    case AX_BOOL: /* the record's sequence_parallel is what ran: never on at tp = 1 */
        if (strcmp(s->axes[k].key, "sequence_parallel") == 0 && c->tp == 1) return 1;
        return json_is_boolean(v) && json_is_true(v) == (x->ival != 0);
    case AX_SEQ: return json_is_integer(v) && json_integer_value(v) == x->ival;
    case AX_GB: return 1; /* the batch (equivalence) or the record's global_batch (matched) say it */
    case AX_SIZE: /* bytes in the record; "auto" is resolved on the device */
        return x->bytes == 0 || (json_is_integer(v) && (uint64_t)json_integer_value(v) == x->bytes);
    }
    return 0;
}

/* 1 (why in buf) when an ok record's micro-batches per step are not the cell's: the runner passes no
 * --grad-accum, so they are global_batch / (dp x batch) with a matched global batch, else 1 (a record
 * copied in from a run with other options, e.g. --grad-accum in its extra_args). */
static int accum_mismatch(const sweep_spec *s, const sweep_mesh *m, json_t *rec, char *buf, size_t cap) {
    json_t *jn = json_object_get(rec, "grad_accum"), *jg = json_object_get(rec, "global_batch"), *jb = json_object_get(rec, "batch_size");
    long long n = json_is_integer(jn) ? json_integer_value(jn) : -1, g = json_is_integer(jg) ? json_integer_value(jg) : -1;
    long long b = json_is_integer(jb) ? json_integer_value(jb) : -1, want = 1;
    const char *st = json_string_value(json_object_get(rec, "status"));
    if (!st || strcmp(st, "ok") != 0) return 0;
    if (s->batch_mode == SWEEP_BATCH_MATCHED && b > 0 && m->global_batch % (m->dp * b) == 0)
        want = m->global_batch / (m->dp * b);
    if (n < 0 && g < 0) return 0; /* a record of before accumulation: one micro-batch */
    if (n == want && g == (long long)m->dp * b * want) return 0;
    snprintf(buf, cap, "the record is of %lld micro-batches per step (global batch %lld); asked: %lld (global batch %lld)",
             n, g, want, (long long)m->dp * b * want);
    return 1;
}

const char *sweep_cell_record_mismatch(const sweep_spec *s, const sweep_mesh *c, json_t *rec, char *buf, size_t cap) {
    if (s->batch_mode == SWEEP_BATCH_MATCHED) {
        json_t *g = json_object_get(rec, "global_batch"), *mb = json_object_get(rec, "micro_batch");
        json_t *b = json_object_get(rec, "batch_size");
        if (json_is_integer(g) && json_integer_value(g) != c->global_batch) {
            snprintf(buf, cap, "the record is of global batch %lld; asked: %d", (long long)json_integer_value(g),
                     c->global_batch);
            return buf;
        }
        if (json_is_integer(mb) && json_is_integer(b) && json_integer_value(mb) != json_integer_value(b)) {
            snprintf(buf, cap, "the record is of micro-batch %lld; asked: %lld", (long long)json_integer_value(mb),
                     (long long)json_integer_value(b));
            return buf;
        }
    }
    if (accum_mismatch(s, c, rec, buf, cap)) return buf;
    json_t *cfg = json_object_get(rec, "config");
    for (int k = 0; k < s->n_axes; k++) {
        json_t *v = json_object_get(cfg, s->axes[k].key);
        if (!v || value_agrees(s, c, k, v)) continue;
        char *text = json_dumps(v, JSON_ENCODE_ANY);
        snprintf(buf, cap, "the record is of %s %.40s; asked: %s", s->axes[k].key, text ? text : "?",
                 s->axes[k].values[c->value[k]].text);
        free(text);
        return buf;
    }
    return NULL;
}

const char *sweep_cell_value(const sweep_spec *s, const sweep_mesh *c, int k) {
    if (k < 0 || k >= s->n_axes) return "";
    return s->axes[k].values[c->value[k]].text;
}

char *sweep_setting_label(const sweep_spec *s, const sweep_mesh *c, int skip, const char *sep, char *out,
                          size_t cap) {
    size_t o = 0;
    if (cap) out[0] = '\0';
    for (int k = 0; k < s->n_axes; k++) {
        if (k == skip) continue;
        int n = snprintf(out + o, cap > o ? cap - o : 0, "%s%s=%s", o ? sep : "", s->axes[k].short_name,
                         sweep_cell_value(s, c, k));
        if (n < 0 || o + (size_t)n >= cap) break;
        o += (size_t)n;
    }
    return out;
}

void sweep_count_text(const sweep_spec *s, char *out, size_t cap) {
    if (s->n_axes == 0) snprintf(out, cap, "%d meshes", s->n_meshes);
    else snprintf(out, cap, "%d cells (%d meshes x %d settings)", s->n_cells, s->n_meshes, s->n_settings);
}
