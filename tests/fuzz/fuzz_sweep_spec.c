/* tests/fuzz/fuzz_sweep_spec.c — libFuzzer target for the sweep spec parser (core/sweep/spec.c and
 * core/sweep/grid.c: sweep_spec_parse, then sweep_train_argv for every cell and launch kind). The input
 * is the spec's text. Oracles: an accepted spec has a name that is one safe path component, cells
 * (meshes x axis values) with distinct safe file names whose dp*tp is the world, a positive batch and
 * seq_len for every fixed-batch cell, and argv arrays whose every element is a string ending in
 * "--out PATH"; a rejected spec gives one line and frees everything (LeakSanitizer checks).
 * Not the runner (bench/sweep.c). */
#include "tests/fuzz/fuzz_common.h"

#include "core/sweep/grid.h"
#include "core/sweep/spec.h"

int FUZZ_ENTRY(const uint8_t *data, size_t size);
int FUZZ_ENTRY(const uint8_t *data, size_t size) {
    if (size > 1 << 16) return 0;
    char *text = fuzz_cstr(data, size);
    if (!text) return 0;
    sweep_spec s;
    char err[1024] = "";
    int rc = sweep_spec_parse(text, &s, err, sizeof err);
    if (rc != 0) {
        FUZZ_ASSERT(rc == -1 && err[0] != '\0' && strchr(err, '\n') == NULL);
        free(text);
        return 0;
    }
    FUZZ_ASSERT(sweep_name_valid(s.name) && !strchr(s.name, '/') && strcmp(s.name, "..") != 0);
    FUZZ_ASSERT(s.n_meshes > 0 && s.world > 0 && s.steps > 0 && s.lr > 0);
    FUZZ_ASSERT(s.n_cells == s.n_meshes * s.n_settings && s.n_cells <= SWEEP_MAX_CELLS && (s.n_axes > 0 || s.seq_len > 0));
    for (int i = 0; i < s.n_extra_args; i++) FUZZ_ASSERT(!sweep_owned_option(s.extra_args[i])); /* the runner owns those */
    for (int i = 0; i < s.n_cells; i++) {
        const sweep_mesh *m = &s.cells[i];
        FUZZ_ASSERT((long long)m->dp * m->tp == s.world && m->seq_len > 0);
        FUZZ_ASSERT(sweep_cell_name_valid(m->name) && (s.n_axes > 0 || strcmp(m->name, s.meshes[i].name) == 0));
        for (int j = 0; j < i && s.n_cells <= 64; j++) FUZZ_ASSERT(strcmp(m->name, s.cells[j].name) != 0);
        if (!sweep_batch_searched(&s)) FUZZ_ASSERT(m->batch_size > 0);
        static const int kinds[] = {SWEEP_ARGV_RUN, SWEEP_ARGV_PROBE, SWEEP_ARGV_PLAN};
        for (int k = 0; k < 3; k++) {
            sweep_argv a = {0};
            if (sweep_train_argv(&s, m, kinds[k], 3, "build/train", "runs/.x.json", &a) == 0) {
                FUZZ_ASSERT(a.n >= 4 && a.v[a.n] == NULL);
                for (int j = 0; j < a.n; j++) FUZZ_ASSERT(a.v[j] != NULL);
                FUZZ_ASSERT(strcmp(a.v[a.n - 2], "--out") == 0 && strcmp(a.v[a.n - 1], "runs/.x.json") == 0);
            }
            sweep_argv_free(&a);
        }
    }
    sweep_spec_free(&s);
    free(text);
    return 0;
}
