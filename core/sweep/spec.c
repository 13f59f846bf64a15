/* core/sweep/spec.c — strict parsing of a sweep spec (docs/sweeps.md) and the argv of a build/train launch.
 * Every rejection names the key it is about in one line, so a user can fix the spec without
 * reading code. Not the runner (bench/sweep.c); no process is started here. */
#include "core/sweep/spec.h"
#include "core/common/errmsg.h"
#include "core/sweep/grid.h"

#include "core/formats/config.h"
#include "core/common/parse.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- keys ------------------------------------------------------------------------------------ */

/* One table of keys: what is known, and what is required (unless it is an axis of a grid).
 * Conditional requirements (mem_budget with "max", batch_size and global_batch) are checked after it. */
static const struct { const char *key; int required; } spec_keys[] = {
    {"name", 1}, {"world", 1}, {"meshes", 1}, {"model", 1}, {"seq_len", 1}, {"steps", 1},
    {"lr", 1}, {"mem_budget", 0}, {"batch_size", 0}, {"global_batch", 0}, {"data", 1},
    {"eval_data", 0}, {"eval_every", 0}, {"backend", 0}, {"launcher", 0}, {"timeout_s", 0},
    {"seed", 0}, {"schedule", 0}, {"warmup", 0}, {"grad_clip", 0}, {"weight_decay", 0},
    {"sequence_parallel", 0}, {"prefetch", 0}, {"checkpoint_activations", 0}, {"sp_activations", 0}, {"extra_args", 0},
    {"results_dir", 0}, {"target_loss", 0}, {"gpu", 0}, {"axes", 0},
};
#define N_SPEC_KEYS ((int)(sizeof spec_keys / sizeof spec_keys[0]))

static const char *type_name(const json_t *v) {
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

/* ---- field readers: each returns 0, or -1 with err "KEY: expected ..., got ..." ---------------- */

static int get_int(json_t *o, const char *key, long long lo, long long hi, int *out, char *err, size_t el) {
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v)) {
        errmsg_set(err, el, "%s: expected an integer in [%lld, %lld], got %s", key, lo, hi, type_name(v));
        return -1;
    }
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        errmsg_set(err, el, "%s: %lld is out of range [%lld, %lld]", key, x, lo, hi);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int get_num(json_t *o, const char *key, double lo, int lo_open, double *out, char *err, size_t el) {
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v)) {
        errmsg_set(err, el, "%s: expected a number, got %s", key, type_name(v));
        return -1;
    }
    double x = json_number_value(v);
    if (!(lo_open ? x > lo : x >= lo)) {
        errmsg_set(err, el, "%s: %g must be %s %g", key, x, lo_open ? ">" : ">=", lo);
        return -1;
    }
    *out = x;
    return 0;
}

static int get_str(json_t *o, const char *key, const char **out, char *err, size_t el) {
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v)) {
        errmsg_set(err, el, "%s: expected a string, got %s", key, type_name(v));
        return -1;
    }
    const char *s = json_string_value(v);
    if (!*s || strlen(s) != json_string_length(v)) {  /* empty, or an embedded NUL */
        errmsg_set(err, el, "%s: expected a non-empty string without NUL characters", key);
        return -1;
    }
    *out = s;
    return 0;
}

static int get_bool(json_t *o, const char *key, int *out, char *err, size_t el) {
    json_t *v = json_object_get(o, key);
    if (!json_is_boolean(v)) {
        errmsg_set(err, el, "%s: expected true or false, got %s", key, type_name(v));
        return -1;
    }
    *out = json_is_true(v) ? 1 : 0;
    return 0;
}

/* An array of strings; elements may be empty strings only if allow_empty. */
static int get_str_array(json_t *o, const char *key, int allow_empty, const char ***out, int *n,
                         char *err, size_t el) {
    json_t *v = json_object_get(o, key);
    if (!json_is_array(v)) {
        errmsg_set(err, el, "%s: expected an array of strings, got %s", key, type_name(v));
        return -1;
    }
    size_t len = json_array_size(v);
    const char **a = calloc(len + 1, sizeof *a);
    if (!a) {
        errmsg_set(err, el, "%s: out of memory", key);
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e) ||
            (!allow_empty && !*json_string_value(e))) {
            errmsg_set(err, el, "%s[%zu]: expected a non-empty string, got %s", key, i, type_name(e));
            free(a);
            return -1;
        }
        a[i] = json_string_value(e);
    }
    *out = a;
    *n = (int)len;
    return 0;
}

/* ---- public helpers -------------------------------------------------------------------------- */

static int parse_pos_dec(const char **p, int *out) {
    const char *s = *p;
    if (*s < '1' || *s > '9') return -1;  /* no sign, no space, no leading zero, not empty */
    long long x = 0;
    while (*s >= '0' && *s <= '9') {
        x = x * 10 + (*s - '0');
        if (x > 1000000) return -1;
        s++;
    }
    *out = (int)x;
    *p = s;
    return 0;
}

int sweep_parse_mesh(const char *text, int *dp, int *tp) {
    if (!text) return -1;
    const char *p = text;
    int a, b;
    if (parse_pos_dec(&p, &a) != 0 || *p != 'x') return -1;
    p++;
    if (parse_pos_dec(&p, &b) != 0 || *p != '\0') return -1;
    *dp = a;
    *tp = b;
    return 0;
}

int sweep_parse_mesh3(const char *text, int *rep, int *dp, int *tp) {
    if (sweep_parse_mesh(text, dp, tp) == 0) {
        *rep = 1;
        return 0;
    }
    if (!text) return -1;
    const char *p = text;
    int r, s, t;
    if (parse_pos_dec(&p, &r) != 0 || *p++ != 'x' || parse_pos_dec(&p, &s) != 0 || *p++ != 'x' ||
        parse_pos_dec(&p, &t) != 0 || *p != '\0' || (long long)r * s * t > (1 << 20))
        return -1;
    *rep = r; *dp = r * s; *tp = t;
    return 0;
}

int sweep_name_valid(const char *name) {
    if (!name || !*name || strlen(name) > 100) return 0;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) return 0;
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* The options of build/train that the runner sets itself, and the spec key each comes from. */
static const struct { const char *opt, *key; } owned_opts[] = {
    {"--tp", "meshes"}, {"--replicate", "meshes"}, {"--world", "world"}, {"--batch-size", "batch_size / global_batch"},
    {"--steps", "steps"}, {"--seq-len", "seq_len"}, {"--model", "model"}, {"--out", "the results folder"},
    {"--mem-budget", "mem_budget"}, {"--data", "data"}, {"--eval-data", "eval_data"},
    {"--eval-every", "eval_every"}, {"--seed", "seed"}, {"--lr", "lr"}, {"--backend", "backend"},
    {"--schedule", "schedule"}, {"--warmup", "warmup"}, {"--grad-clip", "grad_clip"},
    {"--weight-decay", "weight_decay"}, {"--sequence-parallel", "sequence_parallel"},
    {"--no-sequence-parallel", "sequence_parallel"}, {"--prefetch", "prefetch"}, {"--no-prefetch", "prefetch"},
    {"--checkpoint-activations", "checkpoint_activations"}, {"--plan", "--plan-only"}, {"--gpu", "gpu"},
    {"--sp-activations", "sp_activations"}, {"--global-batch", "global_batch"},
};

const char *sweep_owned_option(const char *arg) {
    for (size_t i = 0; i < sizeof owned_opts / sizeof owned_opts[0]; i++) {
        size_t n = strlen(owned_opts[i].opt);
        if (strncmp(arg, owned_opts[i].opt, n) == 0 && (arg[n] == '\0' || arg[n] == '=')) return owned_opts[i].key;
    }
    return NULL;
}

int sweep_batch_searched(const sweep_spec *s) {
    return s->batch_mode == SWEEP_BATCH_MAX || s->batch_mode == SWEEP_BATCH_MATCHED;
}

/* ---- the parser ------------------------------------------------------------------------------ */

static int parse_meshes(json_t *root, sweep_spec *s, char *err, size_t el) {
    json_t *v = json_object_get(root, "meshes");
    if (!json_is_array(v) || json_array_size(v) == 0) {
        errmsg_set(err, el, "meshes: expected a non-empty array of \"DPxTP\" strings, got %s",
                json_is_array(v) ? "an empty array" : type_name(v));
        return -1;
    }
    if (json_array_size(v) > 64) {
        errmsg_set(err, el, "meshes: %zu meshes; at most 64", json_array_size(v));
        return -1;
    }
    s->n_meshes = (int)json_array_size(v);
    s->meshes = calloc((size_t)s->n_meshes, sizeof *s->meshes);
    if (!s->meshes) {
        errmsg_set(err, el, "meshes: out of memory");
        return -1;
    }
    for (int i = 0; i < s->n_meshes; i++) {
        json_t *e = json_array_get(v, (size_t)i);
        sweep_mesh *m = &s->meshes[i];
        if (!json_is_string(e)) {
            errmsg_set(err, el, "meshes[%d]: expected a \"DPxTP\" string, got %s", i, type_name(e));
            return -1;
        }
        const char *t = json_string_value(e);
        if (strlen(t) >= sizeof m->mesh_name || sweep_parse_mesh3(t, &m->rep, &m->dp, &m->tp) != 0) {
            errmsg_set(err, el, "meshes[%d]: \"%.40s\" is not DPxTP or RxSxT (positive integers, e.g. \"2x4\", \"2x2x2\")", i, t);
            return -1;
        }
        if ((long long)m->dp * m->tp != s->world) {
            errmsg_set(err, el, "meshes[%d]: \"%s\" has dp*tp = %lld, but world is %d", i, t,
                    (long long)m->dp * m->tp, s->world);
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (s->meshes[j].dp == m->dp && s->meshes[j].tp == m->tp && s->meshes[j].rep == m->rep) {
                errmsg_set(err, el, "meshes[%d]: \"%s\" is listed twice", i, t);
                return -1;
            }
        /* canonical name: equal to the text, which has no leading zeros by construction ("1x8x1" stays 3D) */
        snprintf(m->name, sizeof m->name, "%s", t);
        snprintf(m->mesh_name, sizeof m->mesh_name, "%s", t);
    }
    return 0;
}

/* global_batch given at the top level or as an axis, with batch_size absent (equivalence: one global
 * batch that must fit at once) or "max" (matched: the largest micro-batch that fits, accumulated to it). */
static int parse_global_batch(json_t *root, json_t *bs, sweep_spec *s, char *err, size_t el) {
    int matched = json_is_string(bs) && strcmp(json_string_value(bs), "max") == 0;
    if (bs && !matched) {
        errmsg_set(err, el, "global_batch: cannot be given together with a fixed batch_size (give \"batch_size\": "
                            "\"max\" to accumulate to it, or leave batch_size out)");
        return -1;
    }
    s->batch_mode = matched ? SWEEP_BATCH_MATCHED : SWEEP_BATCH_GLOBAL;
    if (matched && !s->mem_budget && !sweep_axes_has(root, "mem_budget")) {
        errmsg_set(err, el, "mem_budget: required when batch_size is \"max\"");
        return -1;
    }
    if (!json_object_get(root, "global_batch")) return 0; /* an axis: each cell has its own (core/sweep/grid.c) */
    if (get_int(root, "global_batch", 1, 1 << 24, &s->global_batch, err, el)) return -1;
    for (int i = 0; i < s->n_meshes; i++) {
        sweep_mesh *m = &s->meshes[i];
        if (s->global_batch % m->dp) {
            errmsg_set(err, el, "global_batch: %d is not divisible by dp = %d of mesh %s", s->global_batch, m->dp,
                       m->name);
            return -1;
        }
        m->batch_size = matched ? 0 : s->global_batch / m->dp;
    }
    return 0;
}

static int parse_batch(json_t *root, sweep_spec *s, char *err, size_t el) {
    json_t *bs = json_object_get(root, "batch_size");
    int gb = json_object_get(root, "global_batch") || sweep_axes_has(root, "global_batch");
    if (!bs && !gb) {
        errmsg_set(err, el, "batch_size: missing required key (or give global_batch)");
        return -1;
    }
    if (gb) return parse_global_batch(root, bs, s, err, el);
    if (json_is_string(bs)) {
        if (strcmp(json_string_value(bs), "max") != 0) {
            errmsg_set(err, el, "batch_size: expected \"max\", an integer or an object mesh -> integer, got \"%.40s\"",
                    json_string_value(bs));
            return -1;
        }
        s->batch_mode = SWEEP_BATCH_MAX;
        if (!s->mem_budget && !sweep_axes_has(root, "mem_budget")) {
            errmsg_set(err, el, "mem_budget: required when batch_size is \"max\"");
            return -1;
        }
        return 0;
    }
    s->batch_mode = SWEEP_BATCH_FIXED;
    if (json_is_integer(bs)) {
        int b;
        if (get_int(root, "batch_size", 1, 1 << 24, &b, err, el)) return -1;
        for (int i = 0; i < s->n_meshes; i++) s->meshes[i].batch_size = b;
        return 0;
    }
    if (!json_is_object(bs)) {
        errmsg_set(err, el, "batch_size: expected \"max\", an integer or an object mesh -> integer, got %s",
                type_name(bs));
        return -1;
    }
    const char *k;
    json_t *val;
    json_object_foreach(bs, k, val) {
        int rep, dp, tp, found = -1;
        if (sweep_parse_mesh3(k, &rep, &dp, &tp) == 0)
            for (int i = 0; i < s->n_meshes; i++)
                if (s->meshes[i].dp == dp && s->meshes[i].tp == tp && s->meshes[i].rep == rep) found = i;
        if (found < 0) {
            errmsg_set(err, el, "batch_size.%.40s: not one of the meshes", k);
            return -1;
        }
        if (!json_is_integer(val) || json_integer_value(val) < 1 || json_integer_value(val) > (1 << 24)) {
            errmsg_set(err, el, "batch_size.%s: expected a positive integer, got %s", k,
                    json_is_integer(val) ? "a value out of range" : type_name(val));
            return -1;
        }
        s->meshes[found].batch_size = (int)json_integer_value(val);
    }
    for (int i = 0; i < s->n_meshes; i++)
        if (s->meshes[i].batch_size == 0) {
            errmsg_set(err, el, "batch_size.%s: missing (the object must give every mesh)", s->meshes[i].name);
            return -1;
        }
    return 0;
}

/* the spec's launcher, or mpirun --oversubscribe -np {world} */
static int parse_launcher(json_t *root, sweep_spec *s, char *err, size_t el) {
    if (json_object_get(root, "launcher")) return get_str_array(root, "launcher", 0, &s->launcher, &s->n_launcher, err, el);
    static const char *def[] = {"mpirun", "--oversubscribe", "-np", "{world}", NULL};
    s->launcher = malloc(sizeof def);
    if (!s->launcher) {
        errmsg_set(err, el, "launcher: out of memory");
        return -1;
    }
    memcpy(s->launcher, def, sizeof def);
    s->n_launcher = 4;
    return 0;
}

static int parse_root(json_t *root, sweep_spec *s, char *err, size_t el) {
    if (!json_is_object(root)) {
        errmsg_set(err, el, "spec: expected a JSON object at the top level, got %s", type_name(root));
        return -1;
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        int known = 0;
        for (int i = 0; i < N_SPEC_KEYS; i++)
            if (strcmp(k, spec_keys[i].key) == 0) known = 1;
        if (!known) {
            errmsg_set(err, el, "%.60s: unknown key", k);
            return -1;
        }
    }
    if (sweep_axes_check_shape(root, err, el)) return -1;
    for (int i = 0; i < N_SPEC_KEYS; i++)
        if (spec_keys[i].required && !json_object_get(root, spec_keys[i].key) && !sweep_axes_has(root, spec_keys[i].key)) {
            errmsg_set(err, el, "%s: missing required key", spec_keys[i].key);
            return -1;
        }

    if (get_str(root, "name", &s->name, err, el)) return -1;
    if (!sweep_name_valid(s->name)) {
        errmsg_set(err, el, "name: \"%.60s\" must be 1-100 characters of [A-Za-z0-9._-] and not \".\" or \"..\"",
                s->name);
        return -1;
    }
    if (get_int(root, "world", 1, 1 << 20, &s->world, err, el)) return -1;
    if (parse_meshes(root, s, err, el)) return -1;
    if (get_str(root, "model", &s->model, err, el)) return -1;
    if (json_object_get(root, "seq_len") && get_int(root, "seq_len", 1, 1 << 24, &s->seq_len, err, el)) return -1;
    if (get_int(root, "steps", 1, 1 << 30, &s->steps, err, el)) return -1;
    if (get_num(root, "lr", 0.0, 1, &s->lr, err, el)) return -1;
    if (json_object_get(root, "mem_budget")) {
        if (get_str(root, "mem_budget", &s->mem_budget, err, el)) return -1;
        /* "auto" (CUDA: the device's free memory less the reserve, resolved by train) has no bytes here */
        if (strcmp(s->mem_budget, "auto") != 0 &&
            (parse_size(s->mem_budget, &s->mem_budget_bytes) != 0 || s->mem_budget_bytes == 0)) {
            errmsg_set(err, el, "mem_budget: \"%.40s\" is not a size (e.g. \"96MiB\", \"80GB\", \"80GiB\") or \"auto\"",
                    s->mem_budget);
            return -1;
        }
    }
    if (parse_batch(root, s, err, el)) return -1;
    if (get_str(root, "data", &s->data, err, el)) return -1;
    if (json_object_get(root, "eval_data") && get_str(root, "eval_data", &s->eval_data, err, el)) return -1;
    s->eval_every = s->eval_data ? s->steps : 0;
    if (json_object_get(root, "eval_every")) {
        if (get_int(root, "eval_every", 0, 1 << 30, &s->eval_every, err, el)) return -1;
        if (s->eval_every > 0 && !s->eval_data) {
            errmsg_set(err, el, "eval_every: needs eval_data");
            return -1;
        }
    }
    s->backend = "cpu";
    if (json_object_get(root, "backend")) {
        if (get_str(root, "backend", &s->backend, err, el)) return -1;
        if (strcmp(s->backend, "cpu") != 0 && strcmp(s->backend, "cuda") != 0) {
            errmsg_set(err, el, "backend: expected \"cpu\" or \"cuda\", got \"%.40s\"", s->backend);
            return -1;
        }
    }
    if (s->mem_budget && strcmp(s->mem_budget, "auto") == 0 && strcmp(s->backend, "cuda") != 0) {
        errmsg_set(err, el, "mem_budget: \"auto\" needs \"backend\": \"cuda\" (it is the device's free memory)");
        return -1;
    }
    if (parse_launcher(root, s, err, el)) return -1;
    s->timeout_s = 600;
    if (json_object_get(root, "timeout_s") && get_num(root, "timeout_s", 0.0, 1, &s->timeout_s, err, el))
        return -1;
    if (s->timeout_s > 7 * 86400.0) {
        errmsg_set(err, el, "timeout_s: %g is more than a week", s->timeout_s);
        return -1;
    }

    if (json_object_get(root, "seed")) {
        json_t *sv = json_object_get(root, "seed");
        if (!json_is_integer(sv) || json_integer_value(sv) < 0) {
            errmsg_set(err, el, "seed: expected a non-negative integer, got %s",
                    json_is_integer(sv) ? "a negative integer" : type_name(sv));
            return -1;
        }
        s->has_seed = 1;
        s->seed = json_integer_value(sv);
    }
    if (json_object_get(root, "schedule")) {
        if (get_str(root, "schedule", &s->schedule, err, el)) return -1;
        if (strcmp(s->schedule, "constant") != 0 && strcmp(s->schedule, "cosine") != 0) {
            errmsg_set(err, el, "schedule: expected \"constant\" or \"cosine\", got \"%.40s\"", s->schedule);
            return -1;
        }
    }
    s->warmup = -1;
    if (json_object_get(root, "warmup") && get_int(root, "warmup", 0, 1 << 30, &s->warmup, err, el)) return -1;
    if (json_object_get(root, "grad_clip")) {
        if (get_num(root, "grad_clip", 0.0, 0, &s->grad_clip, err, el)) return -1;
        s->has_grad_clip = 1;
    }
    if (json_object_get(root, "weight_decay")) {
        if (get_num(root, "weight_decay", 0.0, 0, &s->weight_decay, err, el)) return -1;
        s->has_weight_decay = 1;
    }
    s->sequence_parallel = s->prefetch = -1;
    if (json_object_get(root, "sequence_parallel") &&
        get_bool(root, "sequence_parallel", &s->sequence_parallel, err, el))
        return -1;
    if (json_object_get(root, "prefetch") && get_bool(root, "prefetch", &s->prefetch, err, el)) return -1;
    json_t *ca = json_object_get(root, "checkpoint_activations");
    if (ca && sweep_parse_checkpointing(ca, &s->checkpoint_activations) != 0) {
        errmsg_set(err, el, "checkpoint_activations: expected \"none\", \"full\", \"every:K\" (K a positive integer), "
                            "true or false, got %s", json_is_string(ca) ? "another string" : type_name(ca));
        return -1;
    }
    if (json_object_get(root, "sp_activations")) {
        if (get_str(root, "sp_activations", &s->sp_activations, err, el)) return -1;
        if (strcmp(s->sp_activations, "local") != 0 && strcmp(s->sp_activations, "gathered") != 0) {
            errmsg_set(err, el, "sp_activations: expected \"local\" or \"gathered\", got \"%.40s\"", s->sp_activations);
            return -1;
        }
    }
    if (json_object_get(root, "extra_args") &&
        get_str_array(root, "extra_args", 0, &s->extra_args, &s->n_extra_args, err, el))
        return -1;
    for (int i = 0; i < s->n_extra_args; i++) {
        const char *key = sweep_owned_option(s->extra_args[i]);
        const char *a = s->extra_args[i];
        if (!strncmp(a, "--grad-accum", 12) && (a[12] == '\0' || a[12] == '=')) { /* the record, the progress and the report
                                                                                 * would count the batch apart */
            errmsg_set(err, el, "extra_args[%d]: \"%.40s\": the micro-batches per step come from \"global_batch\" "
                       "(the runner derives them); remove it", i, a);
            return -1;
        }
        if (key) {
            errmsg_set(err, el, "extra_args[%d]: \"%.40s\" is set by the runner (from %s); remove it", i,
                       s->extra_args[i], key);
            return -1;
        }
    }
    if (json_object_get(root, "target_loss") && get_num(root, "target_loss", 0.0, 1, &s->target_loss, err, el))
        return -1;
    if (json_object_get(root, "gpu") && get_str(root, "gpu", &s->gpu, err, el)) return -1;
    s->results_dir = "results";
    if (json_object_get(root, "results_dir") && get_str(root, "results_dir", &s->results_dir, err, el))
        return -1;
    return sweep_grid_build(root, s, err, el);
}

void sweep_spec_free(sweep_spec *s) {
    if (!s) return;
    sweep_grid_free(s);
    free(s->meshes);
    free(s->launcher);
    free(s->extra_args);
    if (s->json) json_decref(s->json);
    memset(s, 0, sizeof *s);
}

static int spec_parse(const char *text, sweep_spec *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    json_error_t je;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        errmsg_set(err, errlen, "spec: invalid JSON at line %d column %d: %s", je.line, je.column, je.text);
        return -1;
    }
    s->json = root;
    if (parse_root(root, s, err, errlen) != 0) {
        sweep_spec_free(s);
        return -1;
    }
    return 0;
}

int sweep_spec_parse(const char *text, sweep_spec *s, char *err, size_t errlen) {
    int rc = spec_parse(text, s, err, errlen);
    if (rc != 0) errmsg_one_line(err, errlen);
    return rc;
}

int sweep_spec_load(const char *path, sweep_spec *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    /* a folder, FIFO or device is not a spec (a FIFO would block fopen, /dev/zero never ends) */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        errmsg_set(err, errlen, "not a regular file");
        return -1;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        errmsg_set(err, errlen, "cannot open: %s", strerror(errno));
        return -2;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    int rc = 0;
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) break;
        if (len + 1 == cap) {
            if (cap > (64u << 20)) {  /* a spec is a few hundred bytes; refuse anything absurd */
                errmsg_set(err, errlen, "spec: larger than 64 MiB");
                rc = -1;
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (!buf) {
        errmsg_set(err, errlen, "out of memory");
        fclose(f);
        return -2;
    }
    if (rc == 0 && ferror(f)) {
        errmsg_set(err, errlen, "read error: %s", strerror(errno));
        rc = -2;
    }
    fclose(f);
    if (rc == 0) {
        buf[len] = '\0';
        if (strlen(buf) != len) {
            errmsg_set(err, errlen, "spec: contains a NUL byte");
            rc = -1;
        } else {
            rc = sweep_spec_parse(buf, s, err, errlen);
        }
    }
    free(buf);
    return rc;
}

/* ---- argv ------------------------------------------------------------------------------------ */

int sweep_argv_push(sweep_argv *a, const char *str) {
    if (a->n + 2 > a->cap) {
        int nc = a->cap ? a->cap * 2 : 32;
        char **nv = realloc(a->v, (size_t)nc * sizeof *nv);
        if (!nv) return -1;
        a->v = nv;
        a->cap = nc;
    }
    char *d = strdup(str);
    if (!d) return -1;
    a->v[a->n++] = d;
    a->v[a->n] = NULL;
    return 0;
}

int sweep_argv_pushf(sweep_argv *a, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf) return -1;
    return sweep_argv_push(a, buf);
}

void sweep_argv_free(sweep_argv *a) {
    for (int i = 0; i < a->n; i++) free(a->v[i]);
    free(a->v);
    memset(a, 0, sizeof *a);
}

/* The shortest decimal that reads back as the same double ("0.003", not "0.0030000000000000001"). */
static int push_double(sweep_argv *a, double x) {
    char buf[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    return sweep_argv_push(a, buf);
}

/* Replace every "{world}" in a launcher element; other text stays as written. */
static int push_launcher_elem(sweep_argv *a, const char *e, int world) {
    char buf[4096];
    size_t o = 0;
    for (const char *p = e; *p;) {
        if (strncmp(p, "{world}", 7) == 0) {
            int n = snprintf(buf + o, sizeof buf - o, "%d", world);
            if (n < 0 || (size_t)n >= sizeof buf - o) return -1;
            o += (size_t)n;
            p += 7;
        } else {
            if (o + 1 >= sizeof buf) return -1;
            buf[o++] = *p++;
        }
    }
    buf[o] = '\0';
    return sweep_argv_push(a, buf);
}

/* none: nothing (train's default); full: the bare flag, as train has always read it; every:K: the value. */
static int push_checkpointing(sweep_argv *a, const char *ca) {
    if (!ca || strcmp(ca, "none") == 0) return 0;
    int rc = sweep_argv_push(a, "--checkpoint-activations");
    if (strcmp(ca, "full") != 0) rc |= sweep_argv_push(a, ca);
    return rc;
}

/* launcher[0] without its folder ("" when there is no launcher) */
static const char *launcher_base(const sweep_spec *s) {
    if (s->n_launcher == 0) return "";
    const char *b = strrchr(s->launcher[0], '/');
    return b ? b + 1 : s->launcher[0];
}

int sweep_launcher_is_openmpi(const sweep_spec *s) {
    const char *b = launcher_base(s);
    return strcmp(b, "mpirun") == 0 || strcmp(b, "mpiexec") == 0 || strcmp(b, "orterun") == 0;
}

int sweep_launcher_is_srun(const sweep_spec *s) { return strcmp(launcher_base(s), "srun") == 0; }

int sweep_train_argv(const sweep_spec *s, const sweep_mesh *m, int kind, int batch_size,
                     const char *train_path, const char *out_path, sweep_argv *a) {
    return sweep_train_argv_env(s, m, kind, batch_size, train_path, out_path, NULL, a);
}

int sweep_train_argv_env(const sweep_spec *s, const sweep_mesh *m, int kind, int batch_size,
                         const char *train_path, const char *out_path, const char *const *forward_env,
                         sweep_argv *a) {
    int rc = 0;
#define P(x) rc |= sweep_argv_push(a, (x))
#define PF(...) rc |= sweep_argv_pushf(a, __VA_ARGS__)
    int planned = kind == SWEEP_ARGV_PLAN || kind == SWEEP_ARGV_CHECK;
    if (!planned)
        for (int i = 0; i < s->n_launcher; i++) {
            rc |= push_launcher_elem(a, s->launcher[i], s->world);
            /* Open MPI passes only OMPI_* variables to remote ranks: name the others the runner sets */
            for (const char *const *e = forward_env; i == 0 && e && *e && sweep_launcher_is_openmpi(s); e++) {
                P("-x");
                P(*e);
            }
        }
    P(train_path);
    if (planned) {
        P("--plan");
        P("--world");
        PF("%d", s->world);
        if (s->gpu) {
            P("--gpu");
            P(s->gpu);
        }
    }
    P("--model");
    P(s->model);
    P("--tp");
    PF("%d", m->tp);
    if (m->rep > 1) {
        P("--replicate");
        PF("%d", m->rep);
    }
    P("--batch-size");
    if (kind == SWEEP_ARGV_PLAN && batch_size <= 0) P("max");
    else PF("%d", batch_size);
    if (s->batch_mode == SWEEP_BATCH_MATCHED) { /* micro-batches accumulated to G: train derives their number */
        P("--global-batch");
        PF("%d", m->global_batch);
    }
    P("--seq-len");
    PF("%d", m->seq_len);
    if (m->mem_budget && !(kind == SWEEP_ARGV_CHECK && !s->gpu && !strcmp(m->mem_budget, "auto"))) { /* auto: the device's */
        P("--mem-budget");
        P(m->mem_budget);
    }
    P("--backend");
    P(s->backend);
    if (m->sequence_parallel >= 0) P(m->sequence_parallel ? "--sequence-parallel" : "--no-sequence-parallel");
    if (m->prefetch == 0) P("--no-prefetch");
    rc |= push_checkpointing(a, m->checkpoint_activations);
    if (m->sp_activations) {
        P("--sp-activations");
        P(m->sp_activations);
    }
    if (kind != SWEEP_ARGV_PLAN) {
        P("--steps");
        PF("%d", kind == SWEEP_ARGV_PROBE ? 2 : s->steps);
        P("--lr");
        rc |= push_double(a, s->lr);
        P("--data");
        P(s->data);
        if (kind != SWEEP_ARGV_PROBE && s->eval_data && s->eval_every > 0) {
            P("--eval-data");
            P(s->eval_data);
            P("--eval-every");
            PF("%d", s->eval_every);
        }
        if (s->has_seed) {
            P("--seed");
            PF("%lld", s->seed);
        }
        if (s->schedule) {
            P("--schedule");
            P(s->schedule);
        }
        if (s->warmup >= 0) {
            P("--warmup");
            PF("%d", s->warmup);
        }
        if (s->has_grad_clip) {
            P("--grad-clip");
            rc |= push_double(a, s->grad_clip);
        }
        if (s->has_weight_decay) {
            P("--weight-decay");
            rc |= push_double(a, s->weight_decay);
        }
    }
    for (int i = 0; i < s->n_extra_args; i++) { /* a plan refuses --save (nothing is trained): not checked there */
        int save = !strcmp(s->extra_args[i], "--save"), save_eq = !strncmp(s->extra_args[i], "--save=", 7);
        if (kind == SWEEP_ARGV_CHECK && (save || save_eq)) i += save;
        else P(s->extra_args[i]);
    }
    P("--out");
    P(out_path);
#undef P
#undef PF
    return rc ? -1 : 0;
}
