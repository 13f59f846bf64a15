/* tests/test_io.c — the input side: model presets and HF config.json loading, the size/number
 * parsers, the safetensors reader and writer (including every kind of corrupt file). Token files,
 * the batch layout and build/mkdata are tests/test_data.c.
 * Every fixture is generated at run time into a fresh temp dir, removed at the end. */
#include "core/formats/config.h"
#include "core/formats/safetensors.h"
#include "tests/check.h"
#include "core/common/parse.h"
#include "core/job/catalog.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char err[1024];

static void write_text(const char *path, const char *s) { check_write_file(path, s, strlen(s)); }

/* Number of entries in dir whose name contains `sub`. */
static int count_files(const char *sub) {
    DIR *d = opendir(check_scratch);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, sub)) n++;
    closedir(d);
    return n;
}
static int exists(const char *path) { return access(path, F_OK) == 0; }

/* ------------------------------------------------------------------------------------------ */
static void test_presets(void) {
    model_config c;
    int n = 0;
    for (int i = 0; catalog_preset_name(i); i++, n++) {
        char name[96];
        snprintf(name, sizeof name, "preset_%s_resolves", catalog_preset_name(i));
        int rc = catalog_model(&c, catalog_preset_name(i), err, sizeof err);
        int tied = strncmp(catalog_preset_name(i), "llama3.2", 8) == 0; /* as published */
        CHECK(rc == 0 && strcmp(c.name, catalog_preset_name(i)) == 0 && c.tie_word_embeddings == tied, name, "rc %d: %s",
              rc, err);
    }
    CHECK(n == 5, "preset_list_has_5", "%d presets", n);

    /* tiny and small: every TP-split dimension divisible by 8 (all four 8-rank meshes valid) */
    const char *cpu[] = {"tiny", "small"};
    for (int i = 0; i < 2; i++) {
        catalog_model(&c, cpu[i], err, sizeof err);
        char name[96];
        snprintf(name, sizeof name, "preset_%s_divisible_by_8", cpu[i]);
        CHECK(c.num_attention_heads % 8 == 0 && c.num_key_value_heads % 8 == 0 && c.intermediate_size % 8 == 0 &&
                  c.vocab_size % 8 == 0 && c.vocab_size <= 65536 && (c.hidden_size / c.num_attention_heads) % 2 == 0,
              name, "H %d KV %d f %d V %d", c.num_attention_heads, c.num_key_value_heads, c.intermediate_size,
              c.vocab_size);
    }
    catalog_model(&c, "tiny", err, sizeof err);
    CHECK(c.vocab_size == 256 && c.hidden_size == 128 && c.intermediate_size == 384 && c.num_hidden_layers == 4 &&
              c.num_attention_heads == 8 && c.num_key_value_heads == 8 && c.max_position_embeddings == 1024 &&
              c.rms_norm_eps == 1e-5 && c.rope_theta == 10000.0 && c.initializer_range == 0.02,
          "preset_tiny_shape", "V %d d %d f %d L %d", c.vocab_size, c.hidden_size, c.intermediate_size,
          c.num_hidden_layers);

    /* published shapes; parameter counts by hand: the 3.2 models tied (as published), 3.1 8B untied */
    struct { const char *n; int V, d, f, L, H, KV; int64_t params; } pub[] = {
        {"llama3.2-1b", 128256, 2048, 8192, 16, 32, 8, 1235814400LL},
        {"llama3.2-3b", 128256, 3072, 8192, 28, 24, 8, 3212749824LL},
        {"llama3.1-8b", 128256, 4096, 14336, 32, 32, 8, 8030261248LL},
    };
    for (int i = 0; i < 3; i++) {
        catalog_model(&c, pub[i].n, err, sizeof err);
        char name[96];
        snprintf(name, sizeof name, "preset_%s_shape", pub[i].n);
        CHECK(c.vocab_size == pub[i].V && c.hidden_size == pub[i].d && c.intermediate_size == pub[i].f &&
                  c.num_hidden_layers == pub[i].L && c.num_attention_heads == pub[i].H &&
                  c.num_key_value_heads == pub[i].KV && c.rope_theta == 500000.0 && c.rms_norm_eps == 1e-5 &&
                  c.max_position_embeddings == 131072 && c.rope.type == ROPE_LLAMA3 &&
                  c.rope.factor == (i == 2 ? 8.0 : 32.0) && c.rope.low_freq_factor == 1.0 &&
                  c.rope.high_freq_factor == 4.0 && c.rope.original_max_position_embeddings == 8192,
              name, "V %d d %d f %d L %d H %d KV %d theta %g", c.vocab_size, c.hidden_size, c.intermediate_size,
              c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, c.rope_theta);
        snprintf(name, sizeof name, "preset_%s_num_params", pub[i].n);
        CHECK(config_num_params(&c) == pub[i].params, name, "got %lld want %lld", (long long)config_num_params(&c),
              (long long)pub[i].params);
        snprintf(name, sizeof name, "preset_%s_embedding_params", pub[i].n);
        CHECK(config_num_embedding_params(&c) == (i == 2 ? (int64_t)pub[i].V * pub[i].d : 0), name, "got %lld",
              (long long)config_num_embedding_params(&c));
    }
    /* untied, the 1B model would have one V*d more */
    catalog_model(&c, "llama3.2-1b", err, sizeof err);
    c.tie_word_embeddings = 0;
    CHECK(config_num_params(&c) == 1498482688LL && config_num_embedding_params(&c) == 128256LL * 2048,
          "preset_llama3.2-1b_untied_adds_lm_head", "%lld", (long long)config_num_params(&c));
    /* tiny by hand: 2*256*128 + 4*(2*128 + 4*128*128 + 3*128*384) + 128 */
    catalog_model(&c, "tiny", err, sizeof err);
    CHECK(config_num_params(&c) == 2LL * 256 * 128 + 4LL * (256 + 4 * 128 * 128 + 3 * 128 * 384) + 128,
          "preset_tiny_num_params", "%lld", (long long)config_num_params(&c));

    int rc = catalog_model(&c, "llama-7b", err, sizeof err);
    CHECK(rc == -1 && strstr(err, "llama-7b") && strstr(err, "tiny") && strstr(err, "llama3.1-8b"),
          "preset_unknown_lists_presets", "rc %d: %s", rc, err);
    rc = catalog_model(&c, "", err, sizeof err);
    CHECK(rc == -1 && *err, "preset_empty_name_rejected", "rc %d", rc);

    /* config_validate on hand-built configs */
    catalog_model(&c, "tiny", err, sizeof err);
    model_config b = c;
    b.num_key_value_heads = 3;
    CHECK(config_validate(&b, err, sizeof err) == -1 && strstr(err, "num_key_value_heads"), "validate_kv_divides_h",
          "%s", err);
    b = c, b.hidden_size = 136, b.num_attention_heads = 8, b.num_key_value_heads = 8; /* hd 17: odd */
    CHECK(config_validate(&b, err, sizeof err) == -1 && strstr(err, "even"), "validate_head_dim_even", "%s", err);
    b = c, b.num_hidden_layers = 0;
    CHECK(config_validate(&b, err, sizeof err) == -1 && strstr(err, "num_hidden_layers"), "validate_positive", "%s",
          err);
    b = c, b.tie_word_embeddings = 1;
    CHECK(config_validate(&b, err, sizeof err) == 0 && config_num_params(&b) == config_num_params(&c) - 256 * 128,
          "validate_tied_accepted_counted_once", "%s", err);
    b = c, b.rms_norm_eps = 0;
    CHECK(config_validate(&b, err, sizeof err) == -1 && strstr(err, "rms_norm_eps"), "validate_eps_positive", "%s",
          err);
}

/* ------------------------------------------------------------------------------------------ */
#define BASE_FIELDS                                                                                                \
    "\"vocab_size\": 512, \"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, "             \
    "\"max_position_embeddings\": 256"

static void expect_bad_config(const char *name, const char *json, const char *want) {
    const char *p = check_path("config.json");
    write_text(p, json);
    model_config c;
    err[0] = 0;
    int rc = catalog_model(&c, p, err, sizeof err);
    CHECK(rc == -1 && strstr(err, want) && strstr(err, p) && !strchr(err, '\n'), name,
          "rc %d, want an error naming %s and '%s', got: %s", rc, p, want, err);
    printf("#    %s\n", err); /* the message itself, for a reader of the log */
}

static void test_hf_config(void) {
    model_config c;
    const char *p = check_path("config.json");
    write_text(p, "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"torch_dtype\": \"bfloat16\",\n"
                  " \"bos_token_id\": 128000, \"eos_token_id\": [128001, 128009], \"hidden_act\": \"silu\",\n"
                  " \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0,\n"
                  "  \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}, \"attention_bias\": false,\n"
                  " \"mlp_bias\": false,\n"
                  " \"vocab_size\": 512, \"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2,\n"
                  " \"num_attention_heads\": 8, \"num_key_value_heads\": 2, \"max_position_embeddings\": 256,\n"
                  " \"rms_norm_eps\": 1e-06, \"rope_theta\": 500000.0, \"tie_word_embeddings\": false,\n"
                  " \"initializer_range\": 0.01, \"head_dim\": 8}\n");
    int rc = catalog_model(&c, p, err, sizeof err);
    CHECK(rc == 0, "hf_config_valid_loads", "rc %d: %s", rc, err);
    CHECK(rc == 0 && c.vocab_size == 512 && c.hidden_size == 64 && c.intermediate_size == 96 &&
              c.num_hidden_layers == 2 && c.num_attention_heads == 8 && c.num_key_value_heads == 2 &&
              c.max_position_embeddings == 256 && c.rms_norm_eps == 1e-6 && c.rope_theta == 500000.0 &&
              c.initializer_range == 0.01 && c.tie_word_embeddings == 0 && strcmp(c.name, "config.json") == 0,
          "hf_config_valid_fields", "V %d d %d KV %d eps %g theta %g init %g name %s", c.vocab_size, c.hidden_size,
          c.num_key_value_heads, c.rms_norm_eps, c.rope_theta, c.initializer_range, c.name);
    CHECK(rc == 0 && c.rope.type == ROPE_LLAMA3 && c.rope.factor == 8.0 && c.rope.low_freq_factor == 1.0 &&
              c.rope.high_freq_factor == 4.0 && c.rope.original_max_position_embeddings == 8192,
          "hf_config_rope_scaling_llama3", "type %d factor %g", c.rope.type, c.rope.factor);
    write_text(p, "{" BASE_FIELDS ", \"num_attention_heads\": 4, \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2}}");
    rc = catalog_model(&c, p, err, sizeof err);
    CHECK(rc == 0 && c.rope.type == ROPE_LINEAR && c.rope.factor == 2.0, "hf_config_rope_scaling_legacy_type_linear",
          "rc %d: %s", rc, err);
    write_text(p, "{" BASE_FIELDS ", \"num_attention_heads\": 4, \"rope_scaling\": {\"rope_type\": \"default\"}}");
    rc = catalog_model(&c, p, err, sizeof err);
    CHECK(rc == 0 && c.rope.type == ROPE_NONE, "hf_config_rope_scaling_default_is_none", "rc %d: %s", rc, err);
    write_text(p, "{" BASE_FIELDS ", \"num_attention_heads\": 4, \"rope_scaling\": null}");
    rc = catalog_model(&c, p, err, sizeof err);
    CHECK(rc == 0 && c.rope.type == ROPE_NONE, "hf_config_rope_scaling_null", "rc %d: %s", rc, err);

    write_text(p, "{" BASE_FIELDS ", \"num_attention_heads\": 4}");
    rc = catalog_model(&c, p, err, sizeof err);
    CHECK(rc == 0 && c.num_key_value_heads == 4 && c.rms_norm_eps == 1e-5 && c.rope_theta == 10000.0 &&
              c.initializer_range == 0.02 && c.tie_word_embeddings == 0,
          "hf_config_defaults", "rc %d %s KV %d eps %g theta %g", rc, err, c.num_key_value_heads, c.rms_norm_eps,
          c.rope_theta);
    /* an integer where a float is expected is fine (rope_theta: 10000 in many configs) */
    write_text(p, "{" BASE_FIELDS ", \"num_attention_heads\": 4, \"rope_theta\": 10000, \"num_key_value_heads\": null}");
    rc = catalog_model(&c, p, err, sizeof err);
    CHECK(rc == 0 && c.rope_theta == 10000.0 && c.num_key_value_heads == 4, "hf_config_int_theta_and_null_kv",
          "rc %d: %s", rc, err);

    expect_bad_config("hf_config_d_mod_h", "{" BASE_FIELDS ", \"num_attention_heads\": 5}", "num_attention_heads");
    expect_bad_config("hf_config_kv_not_dividing_h",
                      "{" BASE_FIELDS ", \"num_attention_heads\": 8, \"num_key_value_heads\": 3}",
                      "num_key_value_heads");
    expect_bad_config("hf_config_missing_field",
                      "{\"vocab_size\": 512, \"hidden_size\": 64, \"num_hidden_layers\": 2, "
                      "\"num_attention_heads\": 8, \"max_position_embeddings\": 256}",
                      "intermediate_size");
    expect_bad_config("hf_config_missing_max_pos",
                      "{\"vocab_size\": 512, \"hidden_size\": 64, \"intermediate_size\": 96, "
                      "\"num_hidden_layers\": 2, \"num_attention_heads\": 8}",
                      "max_position_embeddings");
    expect_bad_config("hf_config_string_for_int",
                      "{\"vocab_size\": 512, \"hidden_size\": \"64\", \"intermediate_size\": 96, "
                      "\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"max_position_embeddings\": 256}",
                      "hidden_size must be a positive integer");
    expect_bad_config("hf_config_float_for_int",
                      "{\"vocab_size\": 512.0, \"hidden_size\": 64, \"intermediate_size\": 96, "
                      "\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"max_position_embeddings\": 256}",
                      "vocab_size");
    expect_bad_config("hf_config_negative",
                      "{\"vocab_size\": 512, \"hidden_size\": 64, \"intermediate_size\": 96, "
                      "\"num_hidden_layers\": -2, \"num_attention_heads\": 8, \"max_position_embeddings\": 256}",
                      "num_hidden_layers");
    expect_bad_config("hf_config_int_overflow",
                      "{\"vocab_size\": 5000000000, \"hidden_size\": 64, \"intermediate_size\": 96, "
                      "\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"max_position_embeddings\": 256}",
                      "vocab_size");
    write_text(p, "{" BASE_FIELDS ", \"num_attention_heads\": 8, \"tie_word_embeddings\": true}");
    rc = catalog_model(&c, p, err, sizeof err);
    CHECK(rc == 0 && c.tie_word_embeddings == 1, "hf_config_tied_true_loads", "rc %d: %s", rc, err);
    expect_bad_config("hf_config_tied_not_bool",
                      "{" BASE_FIELDS ", \"num_attention_heads\": 8, \"tie_word_embeddings\": \"no\"}",
                      "tie_word_embeddings");
    expect_bad_config("hf_config_model_type_other",
                      "{" BASE_FIELDS ", \"num_attention_heads\": 8, \"model_type\": \"mistral\"}", "model_type");
    expect_bad_config("hf_config_invalid_json", "{" BASE_FIELDS ", \"num_attention_heads\": 8,", "invalid");
    expect_bad_config("hf_config_not_object", "[1, 2]", "object");
    expect_bad_config("hf_config_duplicate_key",
                      "{" BASE_FIELDS ", \"num_attention_heads\": 8, \"num_attention_heads\": 4}", "duplicate");
    expect_bad_config("hf_config_head_dim_mismatch",
                      "{" BASE_FIELDS ", \"num_attention_heads\": 8, \"head_dim\": 16}", "head_dim");
    expect_bad_config("hf_config_odd_head_dim", "{" BASE_FIELDS ", \"num_attention_heads\": 64}", "even");
    expect_bad_config("hf_config_eps_string",
                      "{" BASE_FIELDS ", \"num_attention_heads\": 8, \"rms_norm_eps\": \"1e-5\"}", "rms_norm_eps");
    expect_bad_config("hf_config_theta_zero", "{" BASE_FIELDS ", \"num_attention_heads\": 8, \"rope_theta\": 0}",
                      "rope_theta");
    expect_bad_config("hf_config_init_negative",
                      "{" BASE_FIELDS ", \"num_attention_heads\": 8, \"initializer_range\": -0.02}",
                      "initializer_range");
    expect_bad_config("hf_config_rope_dynamic",
                      "{" BASE_FIELDS ", \"num_attention_heads\": 8, \"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2}}",
                      "rope_scaling type 'dynamic' is not supported");
    expect_bad_config("hf_config_rope_yarn",
                      "{" BASE_FIELDS ", \"num_attention_heads\": 8, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 2}}",
                      "'yarn'");
    expect_bad_config("hf_config_rope_llama3_missing_low",
                      "{" BASE_FIELDS ", \"num_attention_heads\": 8, \"rope_scaling\": {\"rope_type\": \"llama3\", "
                      "\"factor\": 8, \"high_freq_factor\": 4, \"original_max_position_embeddings\": 8192}}",
                      "low_freq_factor");
    expect_bad_config("hf_config_rope_llama3_low_ge_high",
                      "{" BASE_FIELDS ", \"num_attention_heads\": 8, \"rope_scaling\": {\"rope_type\": \"llama3\", "
                      "\"factor\": 8, \"low_freq_factor\": 4, \"high_freq_factor\": 4, \"original_max_position_embeddings\": 8192}}",
                      "low_freq_factor < high_freq_factor");
    expect_bad_config("hf_config_rope_linear_factor_zero",
                      "{" BASE_FIELDS ", \"num_attention_heads\": 8, \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 0}}",
                      "rope_scaling.factor");
    expect_bad_config("hf_config_rope_no_type",
                      "{" BASE_FIELDS ", \"num_attention_heads\": 8, \"rope_scaling\": {\"factor\": 2}}", "rope_type");
    expect_bad_config("hf_config_hidden_act_gelu", "{" BASE_FIELDS ", \"num_attention_heads\": 8, \"hidden_act\": \"gelu\"}",
                      "hidden_act gelu is not supported");
    expect_bad_config("hf_config_attention_bias", "{" BASE_FIELDS ", \"num_attention_heads\": 8, \"attention_bias\": true}",
                      "attention_bias true is not supported");
    expect_bad_config("hf_config_mlp_bias", "{" BASE_FIELDS ", \"num_attention_heads\": 8, \"mlp_bias\": true}",
                      "mlp_bias true is not supported");
    expect_bad_config("hf_config_architecture_other",
                      "{" BASE_FIELDS ", \"num_attention_heads\": 8, \"architectures\": [\"MistralForCausalLM\"]}",
                      "architectures MistralForCausalLM is not supported");
    /* checkpoint tensor names against the config (L = 2) */
    write_text(p, "{" BASE_FIELDS ", \"num_attention_heads\": 8}");
    catalog_model(&c, p, err, sizeof err);
    const char *lt[] = {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                        "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
    char nbuf[40][64];
    const char *names[40];
    int nn = 0;
    for (int l = 0; l < 3; l++)
        for (int k = 0; k < 9; k++) snprintf(nbuf[nn], 64, "model.layers.%d.%s.weight", l, lt[k]), names[nn] = nbuf[nn], nn++;
    const char *rest[] = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight", "extra.a", "model.layers.1.bogus.weight",
                          "extra.c", "extra.d"};
    for (int k = 0; k < 7; k++) names[nn++] = rest[k];
    /* names[0..18) = layers 0-1, [18..27) = layer 2, [27..30) = root, then 4 unknown */
    const char *ok_names[21];
    memcpy(ok_names, names, 18 * sizeof *names);
    memcpy(ok_names + 18, names + 27, 3 * sizeof *names);
    rc = config_check_tensor_names(&c, "ck.st", ok_names, 21, err, sizeof err);
    CHECK(rc == 0, "ckpt_names_match", "rc %d: %s", rc, err);
    rc = config_check_tensor_names(&c, "ck.st", names, 30, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "ck.st: the checkpoint has 3 layers but num_hidden_layers is 2"), "ckpt_more_layers",
          "rc %d: %s", rc, err);
    rc = config_check_tensor_names(&c, "ck.st", ok_names + 9, 12, err, sizeof err); /* layer 1 only: still 2 */
    CHECK(rc == 0, "ckpt_layer_count_from_highest_index", "rc %d: %s", rc, err);
    rc = config_check_tensor_names(&c, "ck.st", ok_names, 9, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "has 1 layers but num_hidden_layers is 2"), "ckpt_fewer_layers", "rc %d: %s", rc, err);
    const char *unk[25];
    memcpy(unk, ok_names, 21 * sizeof *unk);
    memcpy(unk + 21, names + 30, 4 * sizeof *unk);
    rc = config_check_tensor_names(&c, "ck.st", unk, 25, err, sizeof err);
    CHECK(rc == -2 && strstr(err, "ck.st: 4 tensors the model does not have: extra.a, model.layers.1.bogus.weight, extra.c, ...") &&
              !strstr(err, "extra.d"), "ckpt_unknown_tensors_three_named", "rc %d: %s", rc, err);
    printf("#    %s\n", err);
    const char *missing = check_path("nope/config.json");
    rc = catalog_model(&c, missing, err, sizeof err);
    CHECK(rc == -1 && strstr(err, missing), "hf_config_missing_file", "rc %d: %s", rc, err);
}

/* ------------------------------------------------------------------------------------------ */
static void test_parsers(void) {
    struct { const char *s; uint64_t v; } good[] = {
        {"96MiB", 100663296ull}, {"80GB", 80000000000ull}, {"80GiB", 85899345920ull}, {"1000", 1000},
        {"1.5GiB", 1610612736ull}, {"512KiB", 524288}, {"0", 0}, {"7B", 7}, {"2TB", 2000000000000ull},
        {"1TiB", 1099511627776ull}, {"0.5KB", 500}, {"16777215TiB", 16777215ull << 40}, {"1.0", 1}, {".5GiB", 536870912ull},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t v = 12345;
        int rc = parse_size(good[i].s, &v);
        char name[96];
        snprintf(name, sizeof name, "parse_size_ok_%s", good[i].s);
        CHECK(rc == 0 && v == good[i].v, name, "rc %d v %llu want %llu", rc, (unsigned long long)v,
              (unsigned long long)good[i].v);
    }
    const char *bad[] = {"", "12XB", "-1MiB", "MiB", "1e400GiB", "96mib", "96 MiB", " 96MiB", "96MiB ", "1.5",
                         "1.", "0x10", "16777216TiB", "18446744073709551616", "inf", "nan", "1,5GiB",
                         "96Mi", "96MIB", "1.0000000000000000001GiB", "+1MiB"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 777;
        int rc = parse_size(bad[i], &v);
        char name[96];
        snprintf(name, sizeof name, "parse_size_rejects_'%s'", bad[i]);
        CHECK(rc == -1 && v == 777, name, "rc %d v %llu", rc, (unsigned long long)v);
    }
    uint64_t v;
    CHECK(parse_size("18446744073709551615", &v) == 0 && v == UINT64_MAX, "parse_size_u64_max", "v %llu",
          (unsigned long long)v);

    long long iv = 0;
    CHECK(parse_int("42", 0, 100, &iv) == 0 && iv == 42, "parse_int_ok", "%lld", iv);
    CHECK(parse_int("-7", -10, 10, &iv) == 0 && iv == -7, "parse_int_negative_ok", "%lld", iv);
    const char *ibad[] = {"", "4x", "x4", " 4", "4 ", "101", "-1", "1e3", "99999999999999999999", "0x10", "4.0"};
    for (size_t i = 0; i < sizeof ibad / sizeof ibad[0]; i++) {
        iv = 555;
        char name[96];
        snprintf(name, sizeof name, "parse_int_rejects_'%s'", ibad[i]);
        CHECK(parse_int(ibad[i], 0, 100, &iv) == -1 && iv == 555, name, "accepted as %lld", iv);
    }
    double dv = 0;
    CHECK(parse_double("3e-3", &dv) == 0 && dv == 3e-3, "parse_double_ok", "%g", dv);
    CHECK(parse_double("-0.5", &dv) == 0 && dv == -0.5, "parse_double_negative_ok", "%g", dv);
    const char *dbad[] = {"", "abc", "1.0x", " 1", "1 ", "inf", "nan", "1e400", "-1e400", "--1"};
    for (size_t i = 0; i < sizeof dbad / sizeof dbad[0]; i++) {
        dv = 9.5;
        char name[96];
        snprintf(name, sizeof name, "parse_double_rejects_'%s'", dbad[i]);
        CHECK(parse_double(dbad[i], &dv) == -1 && dv == 9.5, name, "accepted as %g", dv);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* A raw safetensors file: 8-byte length (hlen_override if nonzero) + header + data. */
static void write_st_raw(const char *path, const char *hdr, size_t hdr_len, uint64_t hlen_field, const void *data,
                         size_t data_len) {
    size_t n = 8 + hdr_len + data_len;
    unsigned char *buf = malloc(n);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(hlen_field >> (8 * i));
    memcpy(buf + 8, hdr, hdr_len);
    if (data_len) memcpy(buf + 8 + hdr_len, data, data_len);
    check_write_file(path, buf, n);
    free(buf);
}
static void write_st(const char *path, const char *hdr, size_t data_len) {
    unsigned char *data = calloc(data_len ? data_len : 1, 1);
    write_st_raw(path, hdr, strlen(hdr), strlen(hdr), data, data_len);
    free(data);
}

static void expect_bad_st(const char *name, const char *path, const char *want1, const char *want2) {
    st_file f;
    memset(&f, 0x5a, sizeof f);
    err[0] = 0;
    int rc = st_open(&f, path, err, sizeof err);
    CHECK(rc == -1 && strstr(err, path) && strstr(err, want1) && (!want2 || strstr(err, want2)) &&
              !strchr(err, '\n') && f.fp == NULL && f.t == NULL,
          name, "rc %d, want '%s'%s%s, got: %s", rc, want1, want2 ? " and " : "", want2 ? want2 : "", err);
    printf("#    %s\n", err);
    if (rc == 0) st_close(&f);
}

static void test_safetensors(void) {
    /* --- writer round trip --- */
    const char *path = check_path("model.safetensors");
    const char *names[] = {"model.embed_tokens.weight", "model.norm.weight", "scalar", "empty", "w4d"};
    int ndims[] = {2, 1, 0, 2, 4};
    int64_t shapes[][4] = {{5, 3}, {7}, {0}, {0, 9}, {2, 1, 3, 2}};
    int64_t numel[] = {15, 7, 1, 0, 12};
    int64_t total = 35;
    float *data = malloc((size_t)total * sizeof(float));
    for (int64_t i = 0; i < total; i++) data[i] = (float)(i * 0.37 - 3.1) * (i % 3 ? 1.0f : -1e-20f);
    st_writer *w = st_writer_begin(path, 5, names, ndims, (const int64_t(*)[4])shapes, err, sizeof err);
    CHECK(w != NULL, "st_writer_begin", "%s", err);
    if (!w) return;
    int ok = 1;
    /* deliberately odd chunking that straddles tensor boundaries */
    int64_t chunks[] = {4, 0, 13, 1, 17};
    for (int64_t i = 0, off = 0; i < 5; off += chunks[i], i++)
        ok &= st_writer_put(w, data + off, chunks[i], err, sizeof err) == 0;
    CHECK(ok, "st_writer_put_chunks", "%s", err);
    CHECK(count_files(".tmp.") == 1 && !exists(path), "st_writer_uses_temp_file", "tmp files %d, target exists %d",
          count_files(".tmp."), exists(path));
    int rc = st_writer_finish(w, err, sizeof err);
    CHECK(rc == 0 && exists(path) && count_files(".tmp.") == 0, "st_writer_finish_renames", "rc %d: %s", rc, err);

    /* layout: header length multiple of 8, padded with spaces, JSON first */
    FILE *fp = fopen(path, "rb");
    unsigned char lenb[8] = {0};
    char hdr[4096] = {0};
    uint64_t hlen = 0;
    if (fp && fread(lenb, 1, 8, fp) == 8) {
        for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | lenb[i];
        if (hlen < sizeof hdr && fread(hdr, 1, hlen, fp) != hlen) hlen = 0;
    }
    if (fp) fclose(fp);
    struct stat sb;
    stat(path, &sb);
    CHECK(hlen % 8 == 0 && hlen > 0 && hdr[0] == '{' && (uint64_t)sb.st_size == 8 + hlen + (uint64_t)total * 4 &&
              (hlen < 2 || hdr[hlen - 1] == ' ' || hdr[hlen - 1] == '}'),
          "st_writer_layout", "hlen %llu size %lld first '%c'", (unsigned long long)hlen, (long long)sb.st_size,
          hdr[0]);
    char *e0 = strstr(hdr, names[0]), *e1 = strstr(hdr, names[1]), *e4 = strstr(hdr, "w4d");
    CHECK(e0 && e1 && e4 && e0 < e1 && e1 < e4, "st_writer_declaration_order", "%s", hdr);

    st_file f;
    rc = st_open(&f, path, err, sizeof err);
    CHECK(rc == 0 && f.n == 5, "st_open_written", "rc %d n %d: %s", rc, rc == 0 ? f.n : -1, err);
    if (rc == 0) {
        int64_t off = 0;
        int allok = 1;
        for (int i = 0; i < 5; i++) {
            const st_tensor *t = st_find(&f, names[i]);
            if (!t || t->dtype != ST_F32 || t->ndim != ndims[i]) { allok = 0; break; }
            for (int k = 0; k < ndims[i]; k++) allok &= t->shape[k] == shapes[i][k];
            allok &= t->begin == (uint64_t)off * 4 && t->end == (uint64_t)(off + numel[i]) * 4;
            float got[16] = {0};
            allok &= st_read_f32(&f, t, 0, numel[i], got, err, sizeof err) == 0;
            allok &= memcmp(got, data + off, (size_t)numel[i] * 4) == 0;
            off += numel[i];
        }
        CHECK(allok, "st_roundtrip_f32_exact", "%s", err);
        const st_tensor *t = st_find(&f, "model.embed_tokens.weight");
        float part[4];
        rc = st_read_f32(&f, t, 6, 4, part, err, sizeof err);
        CHECK(rc == 0 && memcmp(part, data + 6, 16) == 0, "st_read_range", "rc %d: %s", rc, err);
        rc = st_read_f32(&f, t, 12, 4, part, err, sizeof err);
        CHECK(rc == -1 && strstr(err, "model.embed_tokens.weight"), "st_read_range_out_of_bounds", "rc %d: %s", rc,
              err);
        rc = st_read_f32(&f, t, -1, 1, part, err, sizeof err);
        CHECK(rc == -1, "st_read_negative_first", "rc %d", rc);
        CHECK(st_find(&f, "missing") == NULL, "st_find_missing", "found something");
        st_close(&f);
    }

    /* --- writer failures leave nothing behind --- */
    const char *p2 = check_path("aborted.safetensors");
    w = st_writer_begin(p2, 1, names, ndims, (const int64_t(*)[4])shapes, err, sizeof err);
    if (w) st_writer_put(w, data, 3, err, sizeof err);
    st_writer_abort(w);
    CHECK(w && !exists(p2) && count_files(".tmp.") == 0, "st_writer_abort_leaves_nothing", "exists %d tmp %d",
          exists(p2), count_files(".tmp."));
    w = st_writer_begin(p2, 1, names, ndims, (const int64_t(*)[4])shapes, err, sizeof err);
    if (w) st_writer_put(w, data, 14, err, sizeof err);
    rc = w ? st_writer_finish(w, err, sizeof err) : 0;
    CHECK(rc == -1 && strstr(err, "56 bytes of tensor data written, 60 declared") && !exists(p2) && count_files(".tmp.") == 0,
          "st_writer_finish_short_data", "rc %d exists %d: %s", rc, exists(p2), err);
    w = st_writer_begin(p2, 1, names, ndims, (const int64_t(*)[4])shapes, err, sizeof err);
    rc = w ? st_writer_put(w, data, 16, err, sizeof err) : 0;
    int rc2 = w ? st_writer_finish(w, err, sizeof err) : 0;
    CHECK(rc == -1 && rc2 == -1 && !exists(p2) && count_files(".tmp.") == 0, "st_writer_put_too_much", "rc %d %d",
          rc, rc2);
    /* an aborted rewrite keeps the previous file intact */
    write_text(p2, "previous");
    w = st_writer_begin(p2, 1, names, ndims, (const int64_t(*)[4])shapes, err, sizeof err);
    st_writer_abort(w);
    fp = fopen(p2, "rb");
    char prev[16] = {0};
    if (fp) { if (fread(prev, 1, 15, fp) == 0) prev[0] = 0; fclose(fp); }
    CHECK(strcmp(prev, "previous") == 0 && count_files(".tmp.") == 0, "st_writer_abort_keeps_old_file", "%s", prev);
    const char *dup[] = {"a", "a"};
    int nd1[] = {1, 1};
    int64_t sh1[][4] = {{2}, {2}};
    w = st_writer_begin(p2, 2, dup, nd1, (const int64_t(*)[4])sh1, err, sizeof err);
    CHECK(w == NULL && strstr(err, "twice") && count_files(".tmp.") == 0, "st_writer_rejects_duplicate", "%s", err);
    st_writer_abort(w);
    int64_t shneg[][4] = {{-2}};
    w = st_writer_begin(p2, 1, dup, nd1, (const int64_t(*)[4])shneg, err, sizeof err);
    CHECK(w == NULL && strstr(err, "shape"), "st_writer_rejects_negative_shape", "%s", err);
    st_writer_abort(w);
    w = st_writer_begin(check_path("nodir/x.safetensors"), 1, dup, nd1, (const int64_t(*)[4])sh1, err, sizeof err);
    CHECK(w == NULL && strstr(err, "nodir"), "st_writer_unwritable_dir", "%s", err);
    st_writer_abort(w);
    free(data);

    /* --- BF16 by hand, with an F32 neighbour and HF-style space padding --- */
    const char *pb = check_path("bf16.safetensors");
    const char *hb = "{\"__metadata__\":{\"format\":\"pt\"},"
                     "\"x\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
                     "\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}        ";
    unsigned char bd[12];
    uint16_t bf[4] = {0x3F80, 0xC000, 0x3F00, 0x4049}; /* 1, -2, 0.5, 3.140625 */
    for (int i = 0; i < 4; i++) bd[2 * i] = (unsigned char)(bf[i] & 0xff), bd[2 * i + 1] = (unsigned char)(bf[i] >> 8);
    float yv = -7.25f;
    memcpy(bd + 8, &yv, 4);
    write_st_raw(pb, hb, strlen(hb), strlen(hb), bd, 12);
    rc = st_open(&f, pb, err, sizeof err);
    CHECK(rc == 0 && f.n == 2, "st_open_bf16", "rc %d: %s", rc, err);
    if (rc == 0) {
        float got[4] = {0}, gy = 0;
        const st_tensor *x = st_find(&f, "x"), *y = st_find(&f, "y");
        int r1 = x ? st_read_f32(&f, x, 0, 4, got, err, sizeof err) : -1;
        int r2 = y ? st_read_f32(&f, y, 0, 1, &gy, err, sizeof err) : -1;
        CHECK(x && x->dtype == ST_BF16 && r1 == 0 && got[0] == 1.0f && got[1] == -2.0f && got[2] == 0.5f &&
                  got[3] == 3.140625f,
              "st_bf16_converted", "%g %g %g %g", got[0], got[1], got[2], got[3]);
        CHECK(r2 == 0 && gy == -7.25f, "st_f32_after_bf16", "%g", gy);
        float g2 = 0;
        CHECK(x && st_read_f32(&f, x, 3, 1, &g2, err, sizeof err) == 0 && g2 == 3.140625f, "st_bf16_range", "%g", g2);
        st_close(&f);
    }

    /* --- corruptions: each rejected with one line naming the file (and the tensor) --- */
    const char *pc = check_path("bad.safetensors");
    check_write_file(pc, "\x05\0\0\0", 4);
    expect_bad_st("st_bad_file_under_8_bytes", pc, "too short", NULL);
    check_write_file(pc, "", 0);
    expect_bad_st("st_bad_empty_file", pc, "too short", NULL);
    const char *h_ok = "{\"t\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}";
    write_st_raw(pc, h_ok, strlen(h_ok), 1000, "", 0);
    expect_bad_st("st_bad_header_length_past_file", pc, "larger than the file", NULL);
    write_st_raw(pc, h_ok, strlen(h_ok), UINT64_MAX, "", 0);
    expect_bad_st("st_bad_header_length_huge", pc, "larger than the file", NULL);
    write_st(pc, h_ok, 16); /* data cut: 16 of 24 bytes */
    expect_bad_st("st_bad_truncated_data", pc, "truncated", "tensor t");
    write_st(pc, "{\"t\": {\"dtype\": \"F32\", \"shape\": [2,3], \"data_offsets\": [0,24]", 24);
    expect_bad_st("st_bad_header_not_json", pc, "not valid JSON", NULL);
    write_st(pc, "hello, world", 0);
    expect_bad_st("st_bad_header_garbage", pc, "not valid JSON", NULL);
    write_st(pc, "[1,2,3]", 0);
    expect_bad_st("st_bad_header_array", pc, "JSON object", NULL);
    write_st(pc, "{\"t\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[0,12]}}", 12);
    expect_bad_st("st_bad_dtype_f16", pc, "unsupported dtype F16 for tensor t", NULL);
    write_st(pc, "{\"t\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16);
    expect_bad_st("st_bad_dtype_i64", pc, "unsupported dtype I64 for tensor t", NULL);
    write_st(pc, "{\"t\":{\"dtype\":5,\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
    expect_bad_st("st_bad_dtype_not_string", pc, "dtype", "tensor t");
    write_st(pc, "{\"t\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,16]}}", 24);
    expect_bad_st("st_bad_misshaped", pc, "need 24", "tensor t");
    write_st(pc, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", 24);
    expect_bad_st("st_bad_overlap", pc, "overlap", "a [0, 16)");
    write_st(pc, "{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]},"
                 "\"a\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}", 32);
    expect_bad_st("st_bad_overlap_contained", pc, "overlap", NULL);
    write_st(pc, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", 16);
    expect_bad_st("st_bad_offsets_out_of_range", pc, "past the data section", "tensor a");
    write_st(pc, "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 16);
    expect_bad_st("st_bad_offsets_begin_after_end", pc, "begin", "tensor a");
    write_st(pc, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[-4,12]}}", 16);
    expect_bad_st("st_bad_offsets_negative", pc, "data_offsets", "tensor a");
    write_st(pc, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0]}}", 16);
    expect_bad_st("st_bad_offsets_one_int", pc, "data_offsets", "tensor a");
    write_st(pc, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[\"0\",\"16\"]}}", 16);
    expect_bad_st("st_bad_offsets_strings", pc, "data_offsets", "tensor a");
    write_st(pc, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-4],\"data_offsets\":[0,16]}}", 16);
    expect_bad_st("st_bad_shape_negative", pc, "shape", "tensor a");
    write_st(pc, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1000000000000000000],\"data_offsets\":[0,16]}}", 16);
    expect_bad_st("st_bad_shape_absurd_1e18", pc, "tensor a", NULL);
    write_st(pc, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,16]}}", 16);
    expect_bad_st("st_bad_shape_overflow", pc, "overflow", "tensor a");
    write_st(pc, "{\"a\":{\"dtype\":\"F32\",\"shape\":[0,9223372036854775807],\"data_offsets\":[0,0]}}", 16);
    expect_bad_st("st_bad_shape_zero_then_huge", pc, "tensor a", NULL);
    write_st(pc, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,4],\"data_offsets\":[0,16]}}", 16);
    expect_bad_st("st_bad_shape_5d", pc, "at most 4", "tensor a");
    write_st(pc, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8);
    expect_bad_st("st_bad_shape_float", pc, "shape", "tensor a");
    write_st(pc, "{\"a\":{\"dtype\":\"F32\",\"shape\":\"4\",\"data_offsets\":[0,16]}}", 16);
    expect_bad_st("st_bad_shape_string", pc, "shape", "tensor a");
    write_st(pc, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                 "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8);
    expect_bad_st("st_bad_duplicate_names", pc, "duplicate", NULL);
    write_st(pc, "{\"bad\xff name\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    expect_bad_st("st_bad_non_utf8_name", pc, "UTF-8", "bad");
    write_st(pc, "{\"ok\xc0\xaf\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    expect_bad_st("st_bad_overlong_utf8_name", pc, "UTF-8", NULL);
    write_st(pc, "{\"a\":[1,2]}", 0);
    expect_bad_st("st_bad_entry_not_object", pc, "tensor a", NULL);
    write_st(pc, "{\"__metadata__\":{\"format\":1}}", 0);
    expect_bad_st("st_bad_metadata_value", pc, "__metadata__", NULL);
    write_st(pc, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"\":{\"dtype\":\"F32\",\"shape\":[0],"
                 "\"data_offsets\":[0,0]}}", 4);
    expect_bad_st("st_bad_empty_name", pc, "empty name", NULL);
    write_st_raw(pc, "", 0, 0, "", 0);
    expect_bad_st("st_bad_zero_header", pc, "header", NULL);
    expect_bad_st("st_bad_missing_file", check_path("does-not-exist.safetensors"), "cannot open", NULL);
    expect_bad_st("st_bad_directory", check_scratch, "regular file", NULL);

    /* valid edge cases: empty header object, gaps between tensors, zero-size tensor */
    write_st(pc, "{}", 0);
    rc = st_open(&f, pc, err, sizeof err);
    CHECK(rc == 0 && f.n == 0, "st_ok_empty_header", "rc %d: %s", rc, err);
    if (rc == 0) st_close(&f);
    write_st(pc, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                 "\"z\":{\"dtype\":\"BF16\",\"shape\":[0,3],\"data_offsets\":[6,6]}}", 12);
    rc = st_open(&f, pc, err, sizeof err);
    CHECK(rc == 0 && f.n == 2, "st_ok_gap_and_empty_tensor", "rc %d: %s", rc, err);
    if (rc == 0) st_close(&f);
}


int main(void) {
    if (check_mkscratch("test_io")) {
        printf("FAIL setup: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    test_presets();
    test_hf_config();
    test_parsers();
    test_safetensors();
    check_rmtree(check_scratch);
    return check_exit();
}
