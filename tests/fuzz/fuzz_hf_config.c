/* tests/fuzz/fuzz_hf_config.c — libFuzzer target for the HF config.json loader of core/formats/config.c
 * (catalog_model on a path: strict JSON, LlamaConfig fields, validation). The input is the file's
 * bytes. Oracles: an accepted config passes config_validate, has positive sizes and a positive
 * parameter count; a rejected one leaves one line (no newline) in the error buffer. Short inputs
 * without '/' are also tried as preset names, which must be a preset (core/job/catalog.h) or rejected.
 * Not the training options (bench/train.c). */
#include "tests/fuzz/fuzz_common.h"

#include "core/formats/config.h"
#include "core/job/catalog.h"

static void hf_check_result(int rc, const model_config *c, const char *err) {
    if (rc == 0) {
        char verr[256];
        FUZZ_ASSERT(config_validate(c, verr, sizeof verr) == 0);
        FUZZ_ASSERT(c->vocab_size > 0 && c->hidden_size > 0 && c->num_hidden_layers > 0);
        FUZZ_ASSERT(c->hidden_size % c->num_attention_heads == 0);
        FUZZ_ASSERT(c->num_attention_heads % c->num_key_value_heads == 0);
        FUZZ_ASSERT(config_num_params(c) > 0);
        FUZZ_ASSERT(memchr(c->name, '\0', sizeof c->name) != NULL);
    } else {
        FUZZ_ASSERT(rc == -1 && err[0] != '\0' && strchr(err, '\n') == NULL);
    }
}

int FUZZ_ENTRY(const uint8_t *data, size_t size);
int FUZZ_ENTRY(const uint8_t *data, size_t size) {
    if (size > 1 << 16) return 0;
    const char *path = fuzz_as_file(data, size);
    if (path) {
        model_config c;
        char err[512] = "";
        int rc = catalog_model(&c, path, err, sizeof err);
        hf_check_result(rc, &c, err);
    }
    if (size < 64 && !memchr(data, '/', size)) {
        char *name = fuzz_cstr(data, size);
        size_t n = name ? strlen(name) : 0;
        /* a name ending in .json is a (relative) path: not something to open from a fuzzer */
        if (name && !(n >= 5 && strcmp(name + n - 5, ".json") == 0)) {
            model_config c;
            char err[512] = "";
            int rc = catalog_model(&c, name, err, sizeof err);
            hf_check_result(rc, &c, err);
            if (rc == 0) {
                FUZZ_ASSERT(catalog_is_preset(name));
            }
        }
        free(name);
    }
    return 0;
}
