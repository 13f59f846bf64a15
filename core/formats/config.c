/* core/formats/config.c — model configurations: HF config.json loading (strict), validation, parameter
 * counts, the record's JSON of a config. Not the presets (core/job/catalog.c), not the training options
 * (core/job/options.c), not the sweep spec (core/sweep/spec.c). */
#include "core/formats/config.h"
#include "core/common/errmsg.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *const rope_type_names[ROPE_NTYPES] = {"none", "linear", "llama3"};

void config_defaults(model_config *c) {
    memset(c, 0, sizeof *c);
    c->rms_norm_eps = 1e-5;
    c->rope_theta = 10000.0;
    c->tie_word_embeddings = 0;
    c->initializer_range = 0.02;
}

int config_check_seq_len(const model_config *c, int T, char *err, size_t errlen) {
    if (T <= c->max_position_embeddings) return 0;
    errmsg_set(err, errlen, "%d exceeds max_position_embeddings %d of model %s", T, c->max_position_embeddings, c->name);
    return -1;
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
    const rope_scaling *r = &c->rope;
    if ((unsigned)r->type >= ROPE_NTYPES) {
        errmsg_set(err, errlen, "rope_scaling: unknown type %d", (int)r->type);
        return -1;
    }
    if (r->type != ROPE_NONE && !(isfinite(r->factor) && r->factor > 0)) {
        errmsg_set(err, errlen, "rope_scaling.factor must be a finite number > 0 (got %g)", r->factor);
        return -1;
    }
    if (r->type == ROPE_LLAMA3) {
        if (!(isfinite(r->low_freq_factor) && r->low_freq_factor > 0 && isfinite(r->high_freq_factor) &&
              r->high_freq_factor > r->low_freq_factor)) {
            errmsg_set(err, errlen, "rope_scaling: llama3 needs 0 < low_freq_factor < high_freq_factor (got %g, %g)",
                       r->low_freq_factor, r->high_freq_factor);
            return -1;
        }
        if (r->original_max_position_embeddings <= 0) {
            errmsg_set(err, errlen, "rope_scaling.original_max_position_embeddings must be positive (got %d)",
                       r->original_max_position_embeddings);
            return -1;
        }
    }
    return 0;
}

void config_rope_inv_freq(const model_config *c, double *inv_freq) {
    int hd = c->hidden_size / c->num_attention_heads, half = hd / 2;
    const rope_scaling *r = &c->rope;
    const double pi = 3.14159265358979323846;
    for (int i = 0; i < half; i++) {
        double f = pow(c->rope_theta, -2.0 * i / hd);
        if (r->type == ROPE_LINEAR) f /= r->factor;
        if (r->type == ROPE_LLAMA3) {
            double old = r->original_max_position_embeddings, wavelen = 2 * pi / f;
            double low_wavelen = old / r->low_freq_factor, high_wavelen = old / r->high_freq_factor;
            if (wavelen > low_wavelen) f /= r->factor;          /* low frequencies: scaled */
            else if (wavelen >= high_wavelen) {                 /* the band between: interpolated */
                double s = (old / wavelen - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
                f = (1 - s) * f / r->factor + s * f;
            }                                                   /* high frequencies: kept */
        }
        inv_freq[i] = f;
    }
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

/* rope_scaling: null or absent (none), or an object with rope_type (or the legacy type) linear or llama3 */
static int json_rope_scaling(const char *file, json_t *root, rope_scaling *r, char *err, size_t errlen) {
    json_t *v = json_object_get(root, "rope_scaling");
    if (!v || json_is_null(v)) return 0;
    if (!json_is_object(v)) {
        errmsg_set(err, errlen, "%s: rope_scaling must be an object or null", file);
        return -1;
    }
    json_t *t = json_object_get(v, "rope_type");
    if (!t) t = json_object_get(v, "type");
    if (!json_is_string(t)) {
        errmsg_set(err, errlen, "%s: rope_scaling needs a string rope_type (linear or llama3)", file);
        return -1;
    }
    const char *name = json_string_value(t);
    if (strcmp(name, "default") == 0) return 0; /* HF's name for plain RoPE */
    if (strcmp(name, "linear") == 0) r->type = ROPE_LINEAR;
    else if (strcmp(name, "llama3") == 0) r->type = ROPE_LLAMA3;
    else {
        errmsg_set(err, errlen, "%s: rope_scaling type '%.64s' is not supported (linear or llama3)", file, name);
        return -1;
    }
    const struct { const char *key; double *dst; int need; } nums[] = {
        {"factor", &r->factor, 1},
        {"low_freq_factor", &r->low_freq_factor, r->type == ROPE_LLAMA3},
        {"high_freq_factor", &r->high_freq_factor, r->type == ROPE_LLAMA3},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        if (!nums[i].need) continue;
        json_t *x = json_object_get(v, nums[i].key);
        if (!json_is_number(x) || !isfinite(json_number_value(x)) || !(json_number_value(x) > 0)) {
            errmsg_set(err, errlen, "%s: rope_scaling.%s (%s) must be a number > 0", file, nums[i].key, name);
            return -1;
        }
        *nums[i].dst = json_number_value(x);
    }
    if (r->type == ROPE_LLAMA3) {
        json_t *x = json_object_get(v, "original_max_position_embeddings");
        if (!json_is_integer(x) || json_integer_value(x) <= 0 || json_integer_value(x) > INT_MAX) {
            errmsg_set(err, errlen, "%s: rope_scaling.original_max_position_embeddings (llama3) must be a positive "
                       "integer", file);
            return -1;
        }
        r->original_max_position_embeddings = (int)json_integer_value(x);
    }
    return 0;
}

/* "a string", "a number", ... for messages about a JSON value of the wrong kind */
static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: case JSON_REAL: return "a number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Every field of a config.json is one meshsweep knows: one it reads; metadata that cannot change the
 * mathematics (token ids, the dtype the weights were stored in, HF's own bookkeeping; pretraining_tp
 * only splits HF's matmuls into slices of the same product); or a field that would change the
 * model unless it has its neutral value (dropout: 0; a sliding window: none), accepted only with
 * that value. Anything else is refused rather than ignored: an unknown field may well change the
 * model (another architecture's options, a quantization config), and ignoring it would train
 * something other than what the file describes. */
static int json_known_fields(const char *file, json_t *root, char *err, size_t errlen) {
    static const char *const read_or_meta[] = {
        "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "max_position_embeddings", "head_dim", "rms_norm_eps", "rope_theta", "initializer_range",
        "rope_scaling", "tie_word_embeddings", "model_type", "architectures", "hidden_act", "attention_bias", "mlp_bias",
        "_name_or_path", "bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype", "dtype", "transformers_version",
        "use_cache", "pretraining_tp", "tokenizer_class",
    };
    static const char *const zero_only[] = {"attention_dropout", "hidden_dropout", "dropout", "resid_pdrop", "embd_pdrop",
                                            "attn_pdrop", "mlp_dropout"};
    static const char *const none_only[] = {"sliding_window", "use_sliding_window"};
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        int known = 0;
        for (size_t i = 0; i < sizeof read_or_meta / sizeof read_or_meta[0] && !known; i++) known = !strcmp(key, read_or_meta[i]);
        if (known) continue;
        for (size_t i = 0; i < sizeof zero_only / sizeof zero_only[0] && !known; i++) known = !strcmp(key, zero_only[i]);
        if (known) {
            if (json_is_null(v) || (json_is_number(v) && json_number_value(v) == 0)) continue;
            if (json_is_number(v))
                errmsg_set(err, errlen, "%s: %s %g is not supported (meshsweep trains without dropout: 0 or remove it)", file,
                           key, json_number_value(v));
            else errmsg_set(err, errlen, "%s: %s must be a number (0: meshsweep trains without dropout)", file, key);
            return -1;
        }
        for (size_t i = 0; i < sizeof none_only / sizeof none_only[0] && !known; i++) known = !strcmp(key, none_only[i]);
        if (known) {
            if (json_is_null(v) || json_is_false(v)) continue;
            errmsg_set(err, errlen, "%s: %s is not supported (Llama attends to the whole causal context: null or remove it)",
                       file, key);
            return -1;
        }
        errmsg_set(err, errlen, "%s: field %.64s is not one meshsweep knows (refused rather than ignored: it could change "
                   "the model; remove it if it does not)", file, key);
        return -1;
    }
    return 0;
}

/* fields that would change the mathematics if meshsweep ignored them: refused unless they say Llama */
static int json_refusals(const char *file, json_t *root, char *err, size_t errlen) {
    json_t *v = json_object_get(root, "hidden_act");
    if (v && !(json_is_string(v) && strcmp(json_string_value(v), "silu") == 0)) {
        errmsg_set(err, errlen, "%s: hidden_act %.64s is not supported (meshsweep computes silu)", file,
                   json_is_string(v) ? json_string_value(v) : "(not a string)");
        return -1;
    }
    const char *bias[] = {"attention_bias", "mlp_bias"};
    for (int i = 0; i < 2; i++) {
        v = json_object_get(root, bias[i]);
        if (v && !json_is_false(v) && !json_is_null(v)) {
            errmsg_set(err, errlen, "%s: %s %s is not supported (Llama projections have no bias)", file, bias[i],
                       json_is_true(v) ? "true" : "(not false)");
            return -1;
        }
    }
    v = json_object_get(root, "architectures");
    if (v && !json_is_null(v)) {
        if (!json_is_array(v) || json_array_size(v) == 0) {
            errmsg_set(err, errlen, "%s: architectures must be a list of names, [\"LlamaForCausalLM\"] (got %s)", file,
                       json_is_array(v) ? "an empty list" : json_kind(v));
            return -1;
        }
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *a = json_array_get(v, i);
            if (!json_is_string(a)) {
                errmsg_set(err, errlen, "%s: architectures must be a list of names, [\"LlamaForCausalLM\"] (entry %zu is %s)",
                           file, i, json_kind(a));
                return -1;
            }
            if (strcmp(json_string_value(a), "LlamaForCausalLM") != 0) {
                errmsg_set(err, errlen, "%s: architectures %.64s is not supported (LlamaForCausalLM)", file,
                           json_string_value(a));
                return -1;
            }
        }
    }
    return json_known_fields(file, root, err, errlen);
}

static int load_hf_config(model_config *c, const char *path, char *err, size_t errlen) {
    config_defaults(c);
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
    if (json_rope_scaling(path, root, &c->rope, err, errlen) < 0 || json_refusals(path, root, err, errlen) < 0)
        goto out;
    json_t *tie = json_object_get(root, "tie_word_embeddings");
    if (tie && !json_is_null(tie)) {
        if (!json_is_boolean(tie)) {
            errmsg_set(err, errlen, "%s: tie_word_embeddings must be true or false", path);
            goto out;
        }
        c->tie_word_embeddings = json_is_true(tie);
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

int config_load_file(model_config *c, const char *path, char *err, size_t errlen) {
    int rc = load_hf_config(c, path, err, errlen);
    if (rc != 0) errmsg_one_line(err, errlen);
    return rc;
}

int64_t config_num_embedding_params(const model_config *c) {
    /* tied: the one tensor is also lm_head, whose matmul is real work, so it counts as lm_head */
    return c->tie_word_embeddings ? 0 : (int64_t)c->vocab_size * c->hidden_size;
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
    return V * d + L * layer + d + (c->tie_word_embeddings ? 0 : V * d); /* embed_tokens, layers, norm, lm_head */
}

json_t *config_to_json(const model_config *c) {
    json_t *m = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:i, s:b, s:f}", "name", c->name,
                          "vocab_size", c->vocab_size, "hidden_size", c->hidden_size,
                          "intermediate_size", c->intermediate_size, "num_hidden_layers", c->num_hidden_layers,
                          "num_attention_heads", c->num_attention_heads, "num_key_value_heads", c->num_key_value_heads,
                          "rms_norm_eps", c->rms_norm_eps, "rope_theta", c->rope_theta,
                          "max_position_embeddings", c->max_position_embeddings,
                          "tie_word_embeddings", c->tie_word_embeddings, "initializer_range", c->initializer_range);
    if (!m) return NULL;
    const rope_scaling *r = &c->rope;
    json_t *rs = json_null();
    if (r->type == ROPE_LINEAR) rs = json_pack("{s:s, s:f}", "rope_type", "linear", "factor", r->factor);
    if (r->type == ROPE_LLAMA3)
        rs = json_pack("{s:s, s:f, s:f, s:f, s:i}", "rope_type", "llama3", "factor", r->factor, "low_freq_factor",
                       r->low_freq_factor, "high_freq_factor", r->high_freq_factor,
                       "original_max_position_embeddings", r->original_max_position_embeddings);
    json_object_set_new(m, "rope_scaling", rs ? rs : json_null());
    return m;
}

/* ---- checkpoint tensor names ------------------------------------------------------------- */
static const char *const layer_tensors[] = {
    "input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
    "self_attn.o_proj.weight", "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
    "mlp.down_proj.weight",
};

/* layer index of "model.layers.N.<layer tensor>", -1 for any other name */
static long layer_of(const char *name) {
    const char *pre = "model.layers.";
    if (strncmp(name, pre, strlen(pre)) != 0) return -1;
    const char *p = name + strlen(pre);
    if (*p < '0' || *p > '9' || (*p == '0' && p[1] != '.')) return -1;
    char *end;
    long i = strtol(p, &end, 10);
    if (*end != '.' || i > INT_MAX) return -1;
    for (size_t k = 0; k < sizeof layer_tensors / sizeof layer_tensors[0]; k++)
        if (strcmp(end + 1, layer_tensors[k]) == 0) return i;
    return -1;
}

int config_check_tensor_names(const model_config *c, const char *path, const char *const *names, int n, char *err,
                              size_t errlen) {
    long layers = 0;
    int unknown = 0;
    char list[400] = "";
    for (int i = 0; i < n; i++) {
        long l = layer_of(names[i]);
        if (l >= 0) {
            if (l + 1 > layers) layers = l + 1;
            continue;
        }
        if (!strcmp(names[i], "model.embed_tokens.weight") || !strcmp(names[i], "model.norm.weight") ||
            !strcmp(names[i], "lm_head.weight"))
            continue;
        if (unknown++ < 3)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%.100s", unknown > 1 ? ", " : "", names[i]);
    }
    if (layers != c->num_hidden_layers) {
        errmsg_set(err, errlen, "%.1000s: the checkpoint has %ld layers but num_hidden_layers is %d", path, layers,
                   c->num_hidden_layers);
        errmsg_one_line(err, errlen);
        return -1;
    }
    if (unknown) {
        errmsg_set(err, errlen, "%.1000s: %d tensor%s the model does not have: %s%s", path, unknown,
                   unknown > 1 ? "s" : "", list, unknown > 3 ? ", ..." : "");
        errmsg_one_line(err, errlen);
        return -2;
    }
    return 0;
}
