/* core/config.c — model configurations: the presets, HF config.json loading (strict), validation,
 * parameter counts, and the small strict parsers (sizes, integers, doubles) the programs share.
 * Not the training options (bench/train.c) and not the sweep spec (bench/sweep.c). */
#include "core/config.h"
#include "core/errmsg.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------------------------------------
 * Presets. tiny and small keep H, KV and f divisible by 8 so every 8-rank mesh (1x8 .. 8x1) is a
 * valid tensor-parallel split. The Llama 3 presets carry the published shapes; the real 3.2 models
 * tie lm_head to embed_tokens, but meshsweep always trains untied embeddings, so those presets are
 * untied (their parameter counts are therefore V*d above the published ones). rope_scaling of the
 * Llama 3 releases is not modelled: RoPE uses plain inv_freq = theta^(-2i/hd) (design 4.1). */
typedef struct preset {
    const char *name;
    int V, d, f, L, H, KV, max_pos;
    double theta;
} preset;

static const preset presets[] = {
    {"tiny", 256, 128, 384, 4, 8, 8, 1024, 10000.0},
    {"small", 256, 256, 768, 6, 8, 8, 2048, 10000.0},
    {"llama3.2-1b", 128256, 2048, 8192, 16, 32, 8, 131072, 500000.0},
    {"llama3.2-3b", 128256, 3072, 8192, 28, 24, 8, 131072, 500000.0},
    {"llama3.1-8b", 128256, 4096, 14336, 32, 32, 8, 131072, 500000.0},
};
#define NPRESETS ((int)(sizeof presets / sizeof presets[0]))

const char *const config_presets[] = {"tiny", "small", "llama3.2-1b", "llama3.2-3b", "llama3.1-8b", NULL};
_Static_assert(sizeof config_presets / sizeof config_presets[0] == sizeof presets / sizeof presets[0] + 1,
               "config_presets must list every preset");

static void defaults(model_config *c) {
    memset(c, 0, sizeof *c);
    c->rms_norm_eps = 1e-5;
    c->rope_theta = 10000.0;
    c->tie_word_embeddings = 0;
    c->initializer_range = 0.02;
}

int config_validate(const model_config *c, char *err, size_t errlen) {
    /* Upper bounds far above any published Llama (405B: V 128256, d 16384, f 53248, L 126) that keep
     * every derived size the engine forms (padded vocabulary, d*f, V*d, per-layer element counts) well
     * inside int64 and each dimension plus a tensor-parallel degree inside int. */
    const struct { const char *name; int v; int max; } pos[] = {
        {"vocab_size", c->vocab_size, 1 << 24},
        {"hidden_size", c->hidden_size, 1 << 20},
        {"intermediate_size", c->intermediate_size, 1 << 22},
        {"num_hidden_layers", c->num_hidden_layers, 1 << 16},
        {"num_attention_heads", c->num_attention_heads, 1 << 16},
        {"num_key_value_heads", c->num_key_value_heads, 1 << 16},
        {"max_position_embeddings", c->max_position_embeddings, 1 << 24},
    };
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++) {
        if (pos[i].v <= 0) {
            errmsg_set(err, errlen, "%s must be positive (got %d)", pos[i].name, pos[i].v);
            return -1;
        }
        if (pos[i].v > pos[i].max) {
            errmsg_set(err, errlen, "%s %d is larger than meshsweep supports (at most %d)", pos[i].name, pos[i].v,
                    pos[i].max);
            return -1;
        }
    }
    if (c->hidden_size % c->num_attention_heads != 0) {
        errmsg_set(err, errlen, "hidden_size %d is not divisible by num_attention_heads %d", c->hidden_size,
                c->num_attention_heads);
        return -1;
    }
    if (c->num_attention_heads % c->num_key_value_heads != 0) {
        errmsg_set(err, errlen, "num_attention_heads %d is not divisible by num_key_value_heads %d",
                c->num_attention_heads, c->num_key_value_heads);
        return -1;
    }
    int hd = c->hidden_size / c->num_attention_heads;
    if (hd % 2 != 0) { /* RoPE rotates pairs (rotate_half) */
        errmsg_set(err, errlen, "head dim hidden_size/num_attention_heads = %d must be even (RoPE)", hd);
        return -1;
    }
    const struct { const char *name; double v; } fpos[] = {
        {"rms_norm_eps", c->rms_norm_eps},
        {"rope_theta", c->rope_theta},
        {"initializer_range", c->initializer_range},
    };
    for (size_t i = 0; i < sizeof fpos / sizeof fpos[0]; i++)
        if (!(isfinite(fpos[i].v) && fpos[i].v > 0)) {
            errmsg_set(err, errlen, "%s must be a finite number > 0 (got %g)", fpos[i].name, fpos[i].v);
            return -1;
        }
    if (c->tie_word_embeddings) {
        errmsg_set(err, errlen, "tie_word_embeddings: tied embeddings are not supported (meshsweep trains untied)");
        return -1;
    }
    return 0;
}

/* ---- HF config.json ---------------------------------------------------------------------- */

/* Integer field: a JSON integer in [1, INT_MAX]. Returns 1 if set, 0 if absent/null (optional), -1 on error. */
static int json_pos_int(const char *file, json_t *root, const char *key, int required, int *out, char *err,
                        size_t errlen) {
    json_t *v = json_object_get(root, key);
    if (!v || (json_is_null(v) && !required)) {
        if (required) {
            errmsg_set(err, errlen, "%s: missing required field %s", file, key);
            return -1;
        }
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > INT_MAX) {
        errmsg_set(err, errlen, "%s: %s must be a positive integer", file, key);
        return -1;
    }
    *out = (int)json_integer_value(v);
    return 1;
}

static int json_pos_num(const char *file, json_t *root, const char *key, double *out, char *err, size_t errlen) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v) || !(json_number_value(v) > 0) || !isfinite(json_number_value(v))) {
        errmsg_set(err, errlen, "%s: %s must be a number > 0", file, key);
        return -1;
    }
    *out = json_number_value(v);
    return 1;
}

static int load_hf_config(model_config *c, const char *path, char *err, size_t errlen) {
    defaults(c);
    /* a folder, FIFO or device is not a config: reading one would fail obscurely, block or never end */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        errmsg_set(err, errlen, "%s: not a regular file (expected an HF config.json)", path);
        return -1;
    }
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        /* jansson's text says "unable to open ..." for a missing file and the syntax error otherwise */
        errmsg_set(err, errlen, "%s: invalid config.json: %s (line %d, column %d)", path, jerr.text, jerr.line,
                jerr.column);
        return -1;
    }
    int rc = -1;
    if (!json_is_object(root)) {
        errmsg_set(err, errlen, "%s: config must be a JSON object", path);
        goto out;
    }
    json_t *mt = json_object_get(root, "model_type");
    if (mt && !(json_is_string(mt) && strcmp(json_string_value(mt), "llama") == 0)) {
        errmsg_set(err, errlen, "%s: model_type must be \"llama\" (got %s)", path,
                json_is_string(mt) ? json_string_value(mt) : "a non-string");
        goto out;
    }
    const struct { const char *key; int *dst; } req[] = {
        {"vocab_size", &c->vocab_size},
        {"hidden_size", &c->hidden_size},
        {"intermediate_size", &c->intermediate_size},
        {"num_hidden_layers", &c->num_hidden_layers},
        {"num_attention_heads", &c->num_attention_heads},
        {"max_position_embeddings", &c->max_position_embeddings},
    };
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++)
        if (json_pos_int(path, root, req[i].key, 1, req[i].dst, err, errlen) < 0) goto out;
    c->num_key_value_heads = c->num_attention_heads;
    if (json_pos_int(path, root, "num_key_value_heads", 0, &c->num_key_value_heads, err, errlen) < 0) goto out;
    int head_dim = 0;
    int has_hd = json_pos_int(path, root, "head_dim", 0, &head_dim, err, errlen);
    if (has_hd < 0) goto out;
    if (json_pos_num(path, root, "rms_norm_eps", &c->rms_norm_eps, err, errlen) < 0) goto out;
    if (json_pos_num(path, root, "rope_theta", &c->rope_theta, err, errlen) < 0) goto out;
    if (json_pos_num(path, root, "initializer_range", &c->initializer_range, err, errlen) < 0) goto out;
    json_t *tie = json_object_get(root, "tie_word_embeddings");
    if (tie && !json_is_null(tie)) {
        if (!json_is_boolean(tie)) {
            errmsg_set(err, errlen, "%s: tie_word_embeddings must be true or false", path);
            goto out;
        }
        if (json_is_true(tie)) {
            errmsg_set(err, errlen, "%s: tie_word_embeddings: tied embeddings are not supported", path);
            goto out;
        }
    }
    /* head_dim is a free parameter in HF; meshsweep derives hd = d/H, so it must agree. */
    if (has_hd > 0 && (c->hidden_size % c->num_attention_heads != 0 ||
                       head_dim != c->hidden_size / c->num_attention_heads)) {
        errmsg_set(err, errlen, "%s: head_dim %d must equal hidden_size/num_attention_heads (%d/%d)", path, head_dim,
                c->hidden_size, c->num_attention_heads);
        goto out;
    }
    char verr[256];
    if (config_validate(c, verr, sizeof verr) < 0) {
        errmsg_set(err, errlen, "%s: %s", path, verr);
        goto out;
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(c->name, sizeof c->name, "%s", base);
    rc = 0;
out:
    json_decref(root);
    return rc;
}

static int resolve(model_config *c, const char *name_or_path, char *err, size_t errlen) {
    if (!name_or_path || !*name_or_path) {
        errmsg_set(err, errlen, "model: empty name (presets: tiny, small, llama3.2-1b, llama3.2-3b, llama3.1-8b, or a "
                             "path to an HF config.json)");
        return -1;
    }
    size_t n = strlen(name_or_path);
    if (strchr(name_or_path, '/') || (n >= 5 && strcmp(name_or_path + n - 5, ".json") == 0))
        return load_hf_config(c, name_or_path, err, errlen);
    for (int i = 0; i < NPRESETS; i++) {
        const preset *p = &presets[i];
        if (strcmp(p->name, name_or_path) != 0) continue;
        defaults(c);
        snprintf(c->name, sizeof c->name, "%s", p->name);
        c->vocab_size = p->V;
        c->hidden_size = p->d;
        c->intermediate_size = p->f;
        c->num_hidden_layers = p->L;
        c->num_attention_heads = p->H;
        c->num_key_value_heads = p->KV;
        c->max_position_embeddings = p->max_pos;
        c->rope_theta = p->theta;
        return config_validate(c, err, errlen);
    }
    char list[256] = "";
    for (int i = 0; config_presets[i]; i++) {
        strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, config_presets[i], sizeof list - strlen(list) - 1);
    }
    errmsg_set(err, errlen, "unknown model '%s' (presets: %s; or a path to an HF config.json)", name_or_path, list);
    return -1;
}

int config_resolve(model_config *c, const char *name_or_path, char *err, size_t errlen) {
    int rc = resolve(c, name_or_path, err, errlen);
    if (rc != 0) errmsg_one_line(err, errlen);
    return rc;
}

int64_t config_num_embedding_params(const model_config *c) {
    return (int64_t)c->vocab_size * c->hidden_size;
}

int64_t config_num_params(const model_config *c) {
    int64_t V = c->vocab_size, d = c->hidden_size, f = c->intermediate_size, L = c->num_hidden_layers;
    int64_t H = c->num_attention_heads, KV = c->num_key_value_heads;
    int64_t hd = H > 0 ? d / H : 0;
    int64_t layer = 2 * d                 /* input_layernorm, post_attention_layernorm */
                    + d * H * hd          /* q_proj */
                    + 2 * d * KV * hd     /* k_proj, v_proj */
                    + H * hd * d          /* o_proj */
                    + 3 * d * f;          /* gate_proj, up_proj, down_proj */
    return V * d + L * layer + d + V * d; /* embed_tokens, layers, norm, lm_head (untied) */
}

/* ---- strict parsers ---------------------------------------------------------------------- */

int parse_size(const char *s, uint64_t *out) {
    if (!s || !*s) return -1;
    const char *p = s;
    uint64_t ip = 0, frac = 0, frac_scale = 1;
    int nd = 0;
    while (*p >= '0' && *p <= '9') {
        if (__builtin_mul_overflow(ip, 10u, &ip) || __builtin_add_overflow(ip, (uint64_t)(*p - '0'), &ip))
            return -1;
        p++, nd++;
    }
    if (*p == '.') {
        p++;
        int nf = 0;
        while (*p >= '0' && *p <= '9') {
            if (nf >= 18) return -1; /* more precision than bytes need; keeps frac_scale in range */
            frac = frac * 10 + (uint64_t)(*p - '0');
            frac_scale *= 10;
            p++, nf++;
        }
        if (nf == 0) return -1;
        nd += nf;
    }
    if (nd == 0) return -1;
    static const struct { const char *suf; uint64_t mult; } sufs[] = {
        {"", 1}, {"B", 1},
        {"KB", 1000ull}, {"MB", 1000000ull}, {"GB", 1000000000ull}, {"TB", 1000000000000ull},
        {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40},
    };
    uint64_t mult = 0;
    for (size_t i = 0; i < sizeof sufs / sizeof sufs[0]; i++)
        if (strcmp(p, sufs[i].suf) == 0) mult = sufs[i].mult;
    if (!mult) return -1;
    uint64_t whole;
    if (__builtin_mul_overflow(ip, mult, &whole)) return -1;
    if (frac) {
        /* exact: frac/frac_scale * mult must be a whole number of bytes */
        unsigned __int128 num = (unsigned __int128)frac * mult;
        if (num % frac_scale != 0) return -1;
        unsigned __int128 add = num / frac_scale;
        if (add > UINT64_MAX || __builtin_add_overflow(whole, (uint64_t)add, &whole)) return -1;
    }
    *out = whole;
    return 0;
}

int parse_int(const char *s, long long lo, long long hi, long long *out) {
    if (!s || !*s || !(*s == '-' || *s == '+' || (*s >= '0' && *s <= '9'))) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int parse_double(const char *s, double *out) {
    if (!s || !*s || !(*s == '-' || *s == '+' || *s == '.' || (*s >= '0' && *s <= '9'))) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || end == s || !isfinite(v) || (errno == ERANGE && fabs(v) > 1.0)) return -1;
    *out = v;
    return 0;
}
