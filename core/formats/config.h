/* core/formats/config.h — model configuration (HF LlamaConfig names) and HF config.json loading.
 * Not the presets (core/job/catalog.h), not the training options (core/job/options.c). */
#ifndef MESHSWEEP_CONFIG_H
#define MESHSWEEP_CONFIG_H
#include <stddef.h>
#include <stdint.h>

/* HF rope_scaling. linear: every inv_freq / factor. llama3: wavelengths 2π/inv_freq above
 * original_max_position_embeddings / low_freq_factor are divided by factor, those below
 * original / high_freq_factor kept, the band between interpolated smoothly (HF's
 * _compute_llama3_parameters). Unused fields are 0. */
typedef enum { ROPE_NONE = 0, ROPE_LINEAR, ROPE_LLAMA3, ROPE_NTYPES } rope_type;
extern const char *const rope_type_names[ROPE_NTYPES]; /* "none", "linear", "llama3" */
typedef struct rope_scaling {
    rope_type type;
    double factor, low_freq_factor, high_freq_factor;
    int original_max_position_embeddings;
} rope_scaling;

typedef struct model_config {
    char name[64];                 /* preset name or the config file's path basename */
    int vocab_size;                /* V */
    int hidden_size;               /* d */
    int intermediate_size;         /* f */
    int num_hidden_layers;         /* L */
    int num_attention_heads;       /* H */
    int num_key_value_heads;       /* KV (default H) */
    double rms_norm_eps;           /* 1e-5 */
    double rope_theta;             /* 10000 */
    int max_position_embeddings;
    rope_scaling rope;             /* HF rope_scaling (none, linear, llama3) */
    int tie_word_embeddings;       /* 1: model.embed_tokens.weight is also lm_head (no lm_head.weight) */
    double initializer_range;      /* 0.02 */
} model_config;

/* The defaults of HF's LlamaConfig for the fields a config may leave out (rms_norm_eps 1e-5, rope_theta
 * 10000, untied, initializer_range 0.02); the sizes zero. */
void config_defaults(model_config *c);
/* Load an HF config.json strictly (refused fields and types named) and validate it. On error one line in
 * err naming the file, and -1. Presets are core/job/catalog.h (catalog_model takes either). */
int config_load_file(model_config *c, const char *path, char *err, size_t errlen);
/* Check internal consistency (positive sizes, d mod H, H mod KV, even head dim, ...). */
int config_validate(const model_config *c, char *err, size_t errlen);
/* A sequence of T tokens against the model's positions: 0 when T <= max_position_embeddings, else -1 with
 * "T exceeds max_position_embeddings N of model NAME" in err. The one check of build/train's --seq-len
 * (core/job/job.c) and a grid sweep's seq_len axis (core/sweep/grid.c). */
int config_check_seq_len(const model_config *c, int T, char *err, size_t errlen);
/* RoPE inverse frequencies inv_freq[i] = theta^(-2i/hd), i < hd/2, with rope_scaling applied, in double
 * (hd = hidden_size / num_attention_heads). The engine computes its cos/sin tables from these once per run. */
void config_rope_inv_freq(const model_config *c, double *inv_freq);
/* A checkpoint's tensor names against the model, one line in err naming path: -1 for a layer count other
 * than num_hidden_layers, -2 for names the model does not have (up to three named). lm_head.weight is
 * accepted (and ignored by the loader) when the embeddings are tied, as Hugging Face does. */
int config_check_tensor_names(const model_config *c, const char *path, const char *const *names, int n, char *err,
                              size_t errlen);
/* The resolved config as a JSON object with HF names (the run record's config.model): rope_scaling is
 * null or {rope_type, factor[, low_freq_factor, high_freq_factor, original_max_position_embeddings]}. */
struct json_t;
struct json_t *config_to_json(const model_config *c);
/* Parameter counts of the full (unsharded) model: total (a tied embedding counted once) and embedding
 * (embed_tokens when untied; 0 when tied, where the one tensor does lm_head's work and counts as it in
 * FLOPs per token = 6·(N − N_embedding) + ...). */
int64_t config_num_params(const model_config *c);
int64_t config_num_embedding_params(const model_config *c);

#endif
