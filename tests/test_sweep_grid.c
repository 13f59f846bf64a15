/* tests/test_sweep_grid.c — grid sweeps and the matched global batch in the sweep spec (core/sweep/grid.c,
 * core/sweep/spec.c): cells and their names, every kind of bad "axes" rejected with one line naming the
 * key (one value spelled twice, a seq_len past the model's positions among them), checkpointing as none|full|every:K, the argv of every cell (and --global-batch in matched mode),
 * the batches a max-batch search may try (divisors of G/dp), the record checks per cell, and report.md,
 * summary.json and summary.csv of a grid at a matched global batch from constructed records.
 * Not the end-to-end sweep (tests/t_sweep.sh), not the rest of the spec (tests/test_sweep_spec.c). */
#include "core/job/catalog.h"
#include "core/sweep/grid.h"
#include "core/sweep/report.h"
#include "core/sweep/runner.h"
#include "core/sweep/spec.h"
#include "tests/check.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A valid spec with the keys of `edits` (a JSON object) set, or removed where the value is null. */
static char *spec_edit(const char *edits) {
    const char *base =
        "{\"name\": \"g\", \"world\": 8, \"meshes\": [\"1x8\", \"2x4\", \"8x1\"], \"model\": \"tiny\","
        " \"seq_len\": 64, \"steps\": 4, \"lr\": 0.003, \"mem_budget\": \"96MiB\", \"batch_size\": \"max\","
        " \"data\": \"build/data/kjv/train.bin\", \"timeout_s\": 60}";
    json_t *o = json_loads(base, 0, NULL), *e = json_loads(edits, 0, NULL);
    if (!o || !e) {
        fprintf(stderr, "bad test edits %s\n", edits);
        exit(1);
    }
    const char *k;
    json_t *v;
    json_object_foreach(e, k, v) {
        if (json_is_null(v)) json_object_del(o, k);
        else json_object_set(o, k, v);
    }
    char *s = json_dumps(o, JSON_PRESERVE_ORDER);
    json_decref(o), json_decref(e);
    return s;
}

static int parse(const char *edits, sweep_spec *s, char *err, size_t el) {
    char *t = spec_edit(edits);
    int rc = sweep_spec_parse(t, s, err, el);
    free(t);
    return rc;
}

static void expect_error(const char *name, const char *edits, const char *prefix) {
    sweep_spec s;
    char err[512] = "";
    int rc = parse(edits, &s, err, sizeof err);
    int ok = rc == -1 && strncmp(err, prefix, strlen(prefix)) == 0 && !strchr(err, '\n');
    CHECK(ok, name, "rc %d, message '%s', want a line starting with '%s'", rc, err, prefix);
    if (rc == 0) sweep_spec_free(&s);
}

static const char *after(const sweep_argv *a, const char *opt) {
    for (int i = 0; i + 1 < a->n; i++)
        if (strcmp(a->v[i], opt) == 0) return a->v[i + 1];
    return NULL;
}

static int count(const sweep_argv *a, const char *x) {
    int n = 0;
    for (int i = 0; i < a->n; i++) n += strcmp(a->v[i], x) == 0;
    return n;
}

/* ---- cells -------------------------------------------------------------------------------------- */

static void test_cells(void) {
    sweep_spec s;
    char err[512] = "";
    int rc = parse("{\"seq_len\": null, \"axes\": {\"checkpoint_activations\": [\"none\", true, \"every:2\"],"
                   " \"seq_len\": [64, 128]}}", &s, err, sizeof err);
    CHECK(rc == 0, "grid_parses", "%s", err);
    if (rc) return;
    CHECK(s.n_axes == 2 && s.n_settings == 6 && s.n_cells == 18 && s.n_meshes == 3 && s.seq_len == 0 &&
              strcmp(s.axes[0].short_name, "ac") == 0 && strcmp(s.axes[1].short_name, "seq") == 0,
          "grid_counts", "axes %d settings %d cells %d", s.n_axes, s.n_settings, s.n_cells);
    /* mesh-major, the first axis slowest; values canonical in names */
    static const char *want[] = {"1x8.ac=none.seq=64", "1x8.ac=none.seq=128", "1x8.ac=full.seq=64",
                                 "1x8.ac=full.seq=128", "1x8.ac=every:2.seq=64", "1x8.ac=every:2.seq=128",
                                 "2x4.ac=none.seq=64"};
    int names_ok = 1;
    for (int i = 0; i < 7; i++) names_ok &= strcmp(s.cells[i].name, want[i]) == 0;
    CHECK(names_ok && strcmp(s.cells[17].name, "8x1.ac=every:2.seq=128") == 0, "grid_cell_names", "[0] %s [6] %s [17] %s",
          s.cells[0].name, s.cells[6].name, s.cells[17].name);
    int unique = 1, valid = 1;
    for (int i = 0; i < s.n_cells; i++) {
        valid &= sweep_cell_name_valid(s.cells[i].name);
        for (int j = 0; j < i; j++) unique &= strcmp(s.cells[i].name, s.cells[j].name) != 0;
    }
    CHECK(unique && valid, "grid_cell_names_unique_safe", "unique %d valid %d", unique, valid);
    const sweep_mesh *c = &s.cells[9]; /* 2x4, setting 3: ac=full, seq=128 */
    CHECK(strcmp(c->name, "2x4.ac=full.seq=128") == 0 && c->dp == 2 && c->tp == 4 && c->mesh_index == 1 &&
              c->setting == 3 && c->value[0] == 1 && c->value[1] == 1 && c->seq_len == 128 &&
              strcmp(c->checkpoint_activations, "full") == 0 && strcmp(c->mesh_name, "2x4") == 0 && c->batch_size == 0,
          "grid_cell_fields", "%s seq %d ac %s setting %d", c->name, c->seq_len, c->checkpoint_activations, c->setting);
    char label[256];
    CHECK(strcmp(sweep_setting_label(&s, c, -1, " ", label, sizeof label), "ac=full seq=128") == 0 &&
              strcmp(sweep_setting_label(&s, c, 0, ",", label, sizeof label), "seq=128") == 0 &&
              strcmp(sweep_cell_value(&s, c, 0), "full") == 0,
          "grid_setting_label", "'%s'", label);
    char what[64];
    sweep_count_text(&s, what, sizeof what);
    CHECK(strcmp(what, "18 cells (3 meshes x 6 settings)") == 0, "grid_count_text", "%s", what);
    /* each cell's argv carries its own values */
    sweep_argv a = {0}, p = {0};
    rc = sweep_train_argv(&s, &s.cells[4], SWEEP_ARGV_RUN, 3, "build/train", "o.json", &a);
    rc |= sweep_train_argv(&s, &s.cells[4], SWEEP_ARGV_PLAN, 0, "build/train", "p.json", &p);
    CHECK(rc == 0 && strcmp(after(&a, "--seq-len"), "64") == 0 && strcmp(after(&a, "--checkpoint-activations"), "every:2") == 0 &&
              strcmp(after(&p, "--checkpoint-activations"), "every:2") == 0 && strcmp(after(&p, "--batch-size"), "max") == 0 &&
              !count(&a, "--global-batch"),
          "grid_argv_every_k", "seq %s ac %s", after(&a, "--seq-len"), after(&a, "--checkpoint-activations"));
    sweep_argv_free(&a), sweep_argv_free(&p);
    rc = sweep_train_argv(&s, &s.cells[3], SWEEP_ARGV_PROBE, 3, "build/train", "o.json", &a);
    const char *nx = after(&a, "--checkpoint-activations");
    CHECK(rc == 0 && count(&a, "--checkpoint-activations") == 1 && nx && strncmp(nx, "--", 2) == 0 &&
              strcmp(after(&a, "--seq-len"), "128") == 0 && strcmp(after(&a, "--steps"), "2") == 0,
          "grid_argv_full_is_bare_flag", "after the flag: %s", nx ? nx : "(end)");
    sweep_argv_free(&a);
    rc = sweep_train_argv(&s, &s.cells[0], SWEEP_ARGV_RUN, 3, "build/train", "o.json", &a);
    CHECK(rc == 0 && !count(&a, "--checkpoint-activations"), "grid_argv_none_no_flag", "rc %d", rc);
    sweep_argv_free(&a);
    sweep_spec_free(&s);

    /* the other axes: names and the options each cell is launched with */
    rc = parse("{\"mem_budget\": null, \"axes\": {\"sp_activations\": [\"local\", \"gathered\"], \"sequence_parallel\":"
               " [true, false], \"prefetch\": [false], \"mem_budget\": [\"96MiB\", \"1.5GiB\"]}}", &s, err, sizeof err);
    CHECK(rc == 0 && s.n_cells == 24 && strcmp(s.cells[0].name, "1x8.spa=local.sp=on.pf=off.mem=96MiB") == 0 &&
              strcmp(s.cells[7].name, "1x8.spa=gathered.sp=off.pf=off.mem=1.5GiB") == 0,
          "grid_other_axes_names", "rc %d (%s) %s", rc, err, rc ? "" : s.cells[7].name);
    if (rc == 0) {
        rc = sweep_train_argv(&s, &s.cells[7], SWEEP_ARGV_RUN, 1, "build/train", "o.json", &a);
        CHECK(rc == 0 && strcmp(after(&a, "--sp-activations"), "gathered") == 0 && count(&a, "--no-sequence-parallel") == 1 &&
                  count(&a, "--no-prefetch") == 1 && strcmp(after(&a, "--mem-budget"), "1.5GiB") == 0 &&
                  s.cells[7].mem_budget_bytes == 3ull << 29,
              "grid_other_axes_argv", "mem %s", after(&a, "--mem-budget"));
        sweep_argv_free(&a);
        sweep_spec_free(&s);
    }

    /* without axes: one cell per mesh, named and launched as the mesh */
    rc = parse("{\"checkpoint_activations\": \"every:3\"}", &s, err, sizeof err);
    CHECK(rc == 0 && s.n_axes == 0 && s.n_settings == 1 && s.n_cells == 3 && strcmp(s.cells[1].name, "2x4") == 0 &&
              strcmp(s.cells[1].mesh_name, "2x4") == 0 && s.cells[2].seq_len == 64 &&
              strcmp(s.checkpoint_activations, "every:3") == 0,
          "grid_none_cells_are_meshes", "rc %d (%s)", rc, err);
    if (rc == 0) {
        rc = sweep_train_argv(&s, &s.meshes[0], SWEEP_ARGV_RUN, 2, "build/train", "o.json", &a);
        CHECK(rc == 0 && strcmp(after(&a, "--checkpoint-activations"), "every:3") == 0, "argv_top_level_every_k",
              "%s", after(&a, "--checkpoint-activations"));
        sweep_argv_free(&a);
        sweep_spec_free(&s);
    }
    static const struct { const char *v, *want; } ckpt[] = {{"false", "none"}, {"true", "full"}, {"\"none\"", "none"},
                                                           {"\"full\"", "full"}, {"\"every:12\"", "every:12"}};
    for (size_t i = 0; i < sizeof ckpt / sizeof ckpt[0]; i++) {
        char e[96], name[64];
        snprintf(e, sizeof e, "{\"checkpoint_activations\": %s}", ckpt[i].v);
        snprintf(name, sizeof name, "spec_checkpointing_%zu", i);
        rc = parse(e, &s, err, sizeof err);
        CHECK(rc == 0 && strcmp(s.checkpoint_activations, ckpt[i].want) == 0 &&
                  strcmp(s.cells[0].checkpoint_activations, ckpt[i].want) == 0,
              name, "%s: rc %d (%s)", ckpt[i].v, rc, err);
        if (rc == 0) sweep_spec_free(&s);
    }
}

/* ---- bad axes: exit 2 before anything runs, one line naming the key ---------------------------- */

static void test_errors(void) {
    expect_error("err_axes_not_object", "{\"axes\": [\"seq_len\"]}", "axes: expected an object");
    expect_error("err_axes_empty", "{\"axes\": {}}", "axes: expected an object");
    expect_error("err_axes_unknown", "{\"axes\": {\"steps\": [1, 2]}}", "axes.steps: not an option that can be swept");
    expect_error("err_axes_unknown_batch", "{\"axes\": {\"batch_size\": [1, 2]}}", "axes.batch_size: not an option");
    expect_error("err_axes_repeats_top", "{\"axes\": {\"seq_len\": [32]}}", "axes.seq_len: also given at the top level");
    expect_error("err_axes_repeats_top_budget", "{\"axes\": {\"mem_budget\": [\"1GB\"]}}",
                 "axes.mem_budget: also given at the top level");
    expect_error("err_axes_not_list", "{\"seq_len\": null, \"axes\": {\"seq_len\": 64}}",
                 "axes.seq_len: expected a non-empty array");
    expect_error("err_axes_empty_list", "{\"axes\": {\"prefetch\": []}}", "axes.prefetch: expected a non-empty array");
    static const struct { const char *name, *edits, *prefix; } bad[] = {
        {"err_axes_ckpt_number", "{\"axes\": {\"checkpoint_activations\": [1]}}", "axes.checkpoint_activations[0]: expected"},
        {"err_axes_ckpt_word", "{\"axes\": {\"checkpoint_activations\": [\"none\", \"some\"]}}",
         "axes.checkpoint_activations[1]: expected"},
        {"err_axes_ckpt_every_0", "{\"axes\": {\"checkpoint_activations\": [\"every:0\"]}}", "axes.checkpoint_activations[0]:"},
        {"err_axes_ckpt_every_lead0", "{\"axes\": {\"checkpoint_activations\": [\"every:02\"]}}",
         "axes.checkpoint_activations[0]:"},
        {"err_axes_ckpt_every_empty", "{\"axes\": {\"checkpoint_activations\": [\"every:\"]}}",
         "axes.checkpoint_activations[0]:"},
        {"err_axes_ckpt_twice", "{\"axes\": {\"checkpoint_activations\": [false, \"none\"]}}",
         "axes.checkpoint_activations[1]: none is listed twice"},
        /* one value spelled twice is two cells of one run: refused by meaning, not spelling */
        {"err_axes_ckpt_every1_is_full", "{\"axes\": {\"checkpoint_activations\": [\"every:1\", \"full\"]}}",
         "axes.checkpoint_activations[1]: \"full\" is the same value as [0] \"every:1\""},
        {"err_axes_ckpt_true_is_every1", "{\"axes\": {\"checkpoint_activations\": [\"none\", true, \"every:1\"]}}",
         "axes.checkpoint_activations[2]: \"every:1\" is the same value as [1] \"full\""},
        {"err_axes_mem_same_bytes", "{\"mem_budget\": null, \"axes\": {\"mem_budget\": [\"16MiB\", \"16777216B\"]}}",
         "axes.mem_budget[1]: \"16777216B\" is the same value as [0] \"16MiB\""},
        {"err_axes_mem_same_bytes_units", "{\"mem_budget\": null, \"axes\": {\"mem_budget\": [\"1GiB\", \"96MiB\", \"1024MiB\"]}}",
         "axes.mem_budget[2]: \"1024MiB\" is the same value as [0] \"1GiB\""},
        {"err_axes_spa_value", "{\"axes\": {\"sp_activations\": [\"sharded\"]}}", "axes.sp_activations[0]: expected"},
        {"err_axes_sp_int", "{\"axes\": {\"sequence_parallel\": [1]}}", "axes.sequence_parallel[0]: expected true or false"},
        {"err_axes_seq_string", "{\"seq_len\": null, \"axes\": {\"seq_len\": [\"64\"]}}", "axes.seq_len[0]: expected an integer"},
        {"err_axes_seq_zero", "{\"seq_len\": null, \"axes\": {\"seq_len\": [64, 0]}}", "axes.seq_len[1]: expected an integer"},
        {"err_axes_seq_twice", "{\"seq_len\": null, \"axes\": {\"seq_len\": [64, 64]}}", "axes.seq_len[1]: 64 is listed twice"},
        {"err_axes_gb_divides", "{\"axes\": {\"global_batch\": [8, 12]}}", "axes.global_batch[1]: 12 is not divisible by dp = 8"},
        {"err_axes_gb_real", "{\"axes\": {\"global_batch\": [8.5]}}", "axes.global_batch[0]: expected an integer"},
        {"err_axes_gb_fixed_batch", "{\"batch_size\": 2, \"axes\": {\"global_batch\": [8]}}",
         "global_batch: cannot be given together with a fixed batch_size"},
        {"err_axes_mem_size", "{\"mem_budget\": null, \"axes\": {\"mem_budget\": [\"lots\"]}}", "axes.mem_budget[0]: expected a size"},
        {"err_axes_mem_auto_cpu", "{\"mem_budget\": null, \"axes\": {\"mem_budget\": [\"auto\"]}}",
         "axes.mem_budget[0]: \"auto\" needs"},
        {"err_axes_too_many_cells", "{\"seq_len\": null, \"axes\": {\"seq_len\": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],"
         " \"global_batch\": [8,16,24,32,40,48,56,64,72,80,88,96,104,112,120,128], \"prefetch\": [true, false]}}",
         "axes: more than 1024 cells"},
        {"err_axes_values_64", "{\"seq_len\": null, \"axes\": {\"seq_len\": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,"
         "21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,"
         "59,60,61,62,63,64,65]}}", "axes.seq_len: 65 values; at most 64"},
        {"err_ckpt_top_word", "{\"checkpoint_activations\": \"half\"}", "checkpoint_activations: expected"},
        {"err_ckpt_top_number", "{\"checkpoint_activations\": 2}", "checkpoint_activations: expected"},
        {"err_global_batch_extra_args", "{\"extra_args\": [\"--global-batch\", \"8\"]}", "extra_args[0]: \"--global-batch\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) expect_error(bad[i].name, bad[i].edits, bad[i].prefix);
    /* a key that is an axis need not be at the top level: seq_len and mem_budget are required otherwise */
    expect_error("err_seq_len_missing_without_axis", "{\"seq_len\": null}", "seq_len: missing required key");
    expect_error("err_matched_needs_budget", "{\"mem_budget\": null, \"global_batch\": 8}", "mem_budget: required");
}

/* Values that only look alike are distinct cells: every:2 is not full, 16MB is not 16MiB. */
static void test_distinct_values(void) {
    sweep_spec s;
    char err[512] = "";
    int rc = parse("{\"axes\": {\"checkpoint_activations\": [\"full\", \"every:2\", \"every:12\", false]}}", &s, err,
                   sizeof err);
    CHECK(rc == 0 && s.n_settings == 4, "grid_ckpt_every_k_distinct_from_full", "rc %d (%s)", rc, err);
    if (rc == 0) sweep_spec_free(&s);
    rc = parse("{\"mem_budget\": null, \"axes\": {\"mem_budget\": [\"16MiB\", \"16MB\", \"16777217B\"]}}", &s, err,
               sizeof err);
    CHECK(rc == 0 && s.n_settings == 3, "grid_mem_sizes_distinct_by_bytes", "rc %d (%s)", rc, err);
    if (rc == 0) sweep_spec_free(&s);
}

/* A seq_len axis against the model (sweep_axes_check_model, run before any launch): a value past
 * max_position_embeddings is refused naming its position; the limit itself is a value that fits. */
static void test_axes_against_model(void) {
    model_config tiny;
    char err[512] = "", why[512] = "";
    if (catalog_model(&tiny, "tiny", why, sizeof why) != 0) {
        CHECK(0, "axes_model_tiny_loads", "%s", why);
        return;
    }
    static const struct { const char *name, *edits, *prefix; } cases[] = {
        {"axes_seq_len_past_positions", "{\"seq_len\": null, \"axes\": {\"seq_len\": [16, 4096]}}",
         "axes.seq_len[1]: 4096 exceeds max_position_embeddings 1024 of model tiny"},
        {"axes_seq_len_first_past_positions", "{\"seq_len\": null, \"axes\": {\"prefetch\": [true, false], "
         "\"seq_len\": [1025, 16]}}", "axes.seq_len[0]: 1025 exceeds max_position_embeddings 1024 of model tiny"},
        {"axes_seq_len_at_positions_fits", "{\"seq_len\": null, \"axes\": {\"seq_len\": [16, 1024]}}", NULL},
        {"axes_without_seq_len_fit", "{\"seq_len\": 1024, \"axes\": {\"prefetch\": [true, false]}}", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sweep_spec s;
        err[0] = '\0';
        int rc = parse(cases[i].edits, &s, err, sizeof err);
        if (rc) {
            CHECK(0, cases[i].name, "the spec does not parse: %s", err);
            continue;
        }
        rc = sweep_axes_check_model(&s, &tiny, err, sizeof err);
        if (cases[i].prefix)
            CHECK(rc == -1 && strcmp(err, cases[i].prefix) == 0, cases[i].name, "rc %d, message '%s', want '%s'", rc, err,
                  cases[i].prefix);
        else
            CHECK(rc == 0, cases[i].name, "rc %d: %s", rc, err);
        sweep_spec_free(&s);
    }
}

/* ---- the matched global batch ------------------------------------------------------------------- */

static void test_matched(void) {
    sweep_spec s;
    char err[512] = "";
    int rc = parse("{\"global_batch\": 48}", &s, err, sizeof err);
    CHECK(rc == 0 && s.batch_mode == SWEEP_BATCH_MATCHED && s.global_batch == 48 && sweep_batch_searched(&s) &&
              s.cells[1].global_batch == 48 && s.cells[1].batch_size == 0,
          "matched_parses", "rc %d (%s) mode %d", rc, err, s.batch_mode);
    if (rc) return;
    sweep_argv a = {0}, p = {0}, q = {0};
    rc = sweep_train_argv(&s, &s.cells[1], SWEEP_ARGV_RUN, 6, "build/train", "o.json", &a);
    rc |= sweep_train_argv(&s, &s.cells[1], SWEEP_ARGV_PLAN, 0, "build/train", "p.json", &p);
    rc |= sweep_train_argv(&s, &s.cells[1], SWEEP_ARGV_PROBE, 4, "build/train", "q.json", &q);
    CHECK(rc == 0 && strcmp(after(&a, "--batch-size"), "6") == 0 && strcmp(after(&a, "--global-batch"), "48") == 0 &&
              strcmp(after(&p, "--batch-size"), "max") == 0 && strcmp(after(&p, "--global-batch"), "48") == 0 &&
              strcmp(after(&q, "--batch-size"), "4") == 0 && strcmp(after(&q, "--global-batch"), "48") == 0,
          "matched_argv_global_batch", "run %s/%s plan %s/%s", after(&a, "--batch-size"), after(&a, "--global-batch"),
          after(&p, "--batch-size"), after(&p, "--global-batch"));
    sweep_argv_free(&a), sweep_argv_free(&p), sweep_argv_free(&q);
    /* the batches a search may try: the divisors of G/dp = 24 on 2x4, of 6 on 8x1 */
    sweep_ladder l;
    rc = sweep_batch_ladder(&s, &s.cells[1], &l);
    int want[] = {1, 2, 3, 4, 6, 8, 12, 24}, ok = rc == 0 && l.n == 8 && !l.top_capped;
    for (int i = 0; ok && i < 8; i++) ok = sweep_ladder_at(&l, i + 1) == want[i];
    CHECK(ok, "matched_ladder_divisors", "n %d top_capped %d", l.n, l.top_capped);
    sweep_ladder_free(&l);
    rc = sweep_batch_ladder(&s, &s.cells[2], &l);
    CHECK(rc == 0 && l.n == 4 && sweep_ladder_at(&l, 3) == 3 && sweep_ladder_at(&l, 4) == 6, "matched_ladder_8x1",
          "n %d", l.n);
    sweep_ladder_free(&l);
    /* the record checks: another global batch, another micro-batch */
    json_t *rec = json_loads("{\"global_batch\": 24, \"batch_size\": 6}", 0, NULL);
    char why[256];
    const char *bad = sweep_cell_record_mismatch(&s, &s.cells[1], rec, why, sizeof why);
    CHECK(bad && strstr(bad, "global batch 24; asked: 48"), "matched_record_global_batch", "%s", bad ? bad : "accepted");
    json_decref(rec);
    rec = json_loads("{\"global_batch\": 48, \"batch_size\": 6, \"micro_batch\": 6, \"grad_accum\": 4}", 0, NULL);
    CHECK(!sweep_cell_record_mismatch(&s, &s.cells[1], rec, why, sizeof why), "matched_record_ok", "%s", why);
    json_decref(rec);
    sweep_spec_free(&s);

    /* equivalence stays what it was: batch G/dp, no --global-batch */
    rc = parse("{\"batch_size\": null, \"mem_budget\": null, \"global_batch\": 8}", &s, err, sizeof err);
    CHECK(rc == 0 && s.batch_mode == SWEEP_BATCH_GLOBAL && s.cells[1].batch_size == 4, "equivalence_unchanged", "rc %d (%s)",
          rc, err);
    if (rc == 0) {
        rc = sweep_train_argv(&s, &s.cells[1], SWEEP_ARGV_RUN, 4, "build/train", "o.json", &a);
        CHECK(rc == 0 && !count(&a, "--global-batch") && strcmp(after(&a, "--batch-size"), "4") == 0,
              "equivalence_argv_no_global_batch", "rc %d", rc);
        sweep_argv_free(&a);
        sweep_spec_free(&s);
    }
    /* a global batch axis: equivalence per cell */
    rc = parse("{\"batch_size\": null, \"axes\": {\"global_batch\": [8, 16]}}", &s, err, sizeof err);
    CHECK(rc == 0 && s.batch_mode == SWEEP_BATCH_GLOBAL && s.n_cells == 6 && strcmp(s.cells[3].name, "2x4.gb=16") == 0 &&
              s.cells[3].batch_size == 8 && s.cells[3].global_batch == 16,
          "grid_global_batch_axis", "rc %d (%s)", rc, err);
    if (rc == 0) sweep_spec_free(&s);
    /* a global batch axis with "max": matched per cell, each cell with its own G */
    rc = parse("{\"axes\": {\"global_batch\": [8, 16]}}", &s, err, sizeof err);
    if (rc == 0) rc = sweep_train_argv(&s, &s.cells[3], SWEEP_ARGV_PROBE, 2, "build/train", "o.json", &a);
    CHECK(rc == 0 && s.batch_mode == SWEEP_BATCH_MATCHED && strcmp(s.cells[3].name, "2x4.gb=16") == 0 &&
              s.cells[3].batch_size == 0 && strcmp(after(&a, "--global-batch"), "16") == 0,
          "grid_matched_global_batch_axis", "rc %d (%s)", rc, err);
    if (rc == 0) sweep_argv_free(&a), sweep_spec_free(&s);
    /* the engine's limit caps the ladder: G/dp = 2^20 at seq_len 2^12 allows 2^14 */
    rc = parse("{\"seq_len\": 4096, \"global_batch\": 8388608}", &s, err, sizeof err);
    if (rc == 0) rc = sweep_batch_ladder(&s, &s.cells[0], &l);
    CHECK(rc == 0 && l.top_capped && sweep_ladder_at(&l, l.n) == 1 << 14 && l.n == 15, "matched_ladder_engine_cap",
          "rc %d (%s) n %d top %d", rc, err, l.n, l.n ? sweep_ladder_at(&l, l.n) : 0);
    if (rc == 0) sweep_ladder_free(&l), sweep_spec_free(&s);
    rc = parse("{}", &s, err, sizeof err);
    if (rc == 0) rc = sweep_batch_ladder(&s, &s.cells[0], &l);
    CHECK(rc == 0 && !l.v && l.n == sweep_engine_max_batch(64) && sweep_ladder_at(&l, 7) == 7 && l.top_capped,
          "max_ladder_every_batch", "n %d", l.n);
    if (rc == 0) sweep_ladder_free(&l), sweep_spec_free(&s);
}

/* ---- record checks per cell --------------------------------------------------------------------- */

static void test_record_checks(void) {
    sweep_spec s;
    char err[512] = "", why[256];
    int rc = parse("{\"mem_budget\": null, \"axes\": {\"checkpoint_activations\": [false, \"full\", \"every:2\"],"
                   " \"sequence_parallel\": [true], \"mem_budget\": [\"96MiB\"], \"sp_activations\": [\"gathered\"]}}",
                   &s, err, sizeof err);
    CHECK(rc == 0, "record_checks_spec", "%s", err);
    if (rc) return;
    static const struct { int cell; const char *config; int agrees; const char *name; } t[] = {
        {1, "{\"checkpoint_activations\": true, \"sp_activations\": \"gathered\"}", 1, "record_ckpt_bool_full"},
        {0, "{\"checkpoint_activations\": true}", 0, "record_ckpt_on_asked_none"},
        {2, "{\"checkpoint_activations\": \"every:2\"}", 1, "record_ckpt_every_string"},
        {2, "{\"checkpoint_activations\": \"every:3\"}", 0, "record_ckpt_every_other_k"},
        {1, "{\"sp_activations\": \"local\"}", 0, "record_spa_other"},
        {1, "{\"mem_budget\": 100663296}", 1, "record_mem_bytes"},
        {1, "{\"mem_budget\": 100663297}", 0, "record_mem_other"},
        {1, "{\"sequence_parallel\": false}", 0, "record_sp_off_at_tp8"},
        {7, "{\"sequence_parallel\": false}", 1, "record_sp_off_at_tp1"}, /* 8x1: nothing to split */
        {1, "{}", 1, "record_without_keys_not_judged"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char text[300];
        snprintf(text, sizeof text, "{\"config\": %s}", t[i].config);
        json_t *rec = json_loads(text, 0, NULL);
        const char *bad = sweep_cell_record_mismatch(&s, &s.cells[t[i].cell], rec, why, sizeof why);
        CHECK((bad == NULL) == t[i].agrees, t[i].name, "%s on %s: %s", t[i].config, s.cells[t[i].cell].name, bad ? bad : "accepted");
        json_decref(rec);
    }
    sweep_spec_free(&s);
}

/* ---- report.md, summary.json, summary.csv of a grid at a matched global batch ------------------ */

static json_t *fake_record(const sweep_mesh *m, int b, double loss0, double tok_s) {
    json_t *steps = json_array();
    for (int k = 1; k <= 3; k++)
        json_array_append_new(steps, json_pack("{s:i, s:f, s:f}", "step", k, "loss", loss0 - 0.1 * k, "ms", 100.0));
    return json_pack("{s:s, s:s, s:i, s:i, s:i, s:o, s:{s:f, s:f}, s:{s:i}}", "schema", "meshsweep.run/1", "status", "ok",
                     "batch_size", b, "global_batch", m->global_batch, "grad_accum", m->global_batch / (m->dp * b), "steps",
                     steps, "summary", "tok_s", tok_s, "final_loss", loss0 - 0.3, "memory", "peak", 1000000);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void test_report(void) {
    sweep_spec s;
    char err[512] = "";
    int rc = parse("{\"meshes\": [\"2x4\", \"8x1\"], \"global_batch\": 16, \"axes\": {\"checkpoint_activations\": [false, true]}}",
                   &s, err, sizeof err);
    if (rc || check_mkscratch("grid_report")) {
        CHECK(0, "report_grid_setup", "rc %d (%s)", rc, err);
        return;
    }
    /* cells: 2x4.ac=none (b 8, 1 step of accumulation), 2x4.ac=full (8), 8x1.ac=none (2), 8x1.ac=full (1, the slowest) */
    sweep_result res[4];
    memset(res, 0, sizeof res);
    const int b[4] = {8, 8, 2, 1};
    const double loss[4] = {5.0, 5.0001, 5.0002, 5.004}, tok[4] = {900, 700, 1200, 500};
    for (int i = 0; i < 4; i++) {
        res[i].mesh = &s.cells[i];
        res[i].batch_size = b[i];
        res[i].plan_batch = b[i];
        snprintf(res[i].status, sizeof res[i].status, "ok");
        res[i].record = fake_record(&s.cells[i], b[i], loss[i], tok[i]);
    }
    /* MFU: cell 0's core share above 100% (a loaded host) is flagged, cell 1's rounds to 100.00% and is not */
    json_t *sm0 = json_object_get(res[0].record, "summary"), *sm1 = json_object_get(res[1].record, "summary");
    json_object_set_new(sm0, "mfu", json_real(0.2811));
    json_object_set_new(sm0, "mfu_share", json_real(1.1244));
    json_object_set_new(sm1, "mfu", json_real(0.25));
    json_object_set_new(sm1, "mfu_share", json_real(1.00004));
    sweep_report_ctx c = {.spec = &s, .res = res, .n = 4, .dir = check_scratch, .plots_dir = "plots", .gnuplot = "gnuplot",
                          .started_utc = "2026-01-01T00:00:00Z", .created_utc = "2026-01-01T00:00:00Z", .stamp = "X"};
    rc = sweep_write_report_md(&c, 0, err, sizeof err) | sweep_write_summary_json(&c, err, sizeof err) |
         sweep_write_summary_csv(&c, err, sizeof err);
    CHECK(rc == 0, "report_grid_written", "%s", err);
    const char *md = slurp(check_path("report.md"));
    const char *results = md ? strstr(md, "## Results\n") : NULL;
    const char *row0 = results ? strstr(results, "\n| [2x4.ac=none](runs/2x4.ac=none.json) |") : NULL;
    const char *row1 = results ? strstr(results, "\n| [2x4.ac=full](runs/2x4.ac=full.json) |") : NULL;
    const char *note = md ? strstr(md, "\n\n\\* Above 100%: not a real utilisation but a sign that the host was loaded") : NULL;
    const char *secs = note ? strstr(note, "\nSeconds to a loss:") : NULL;
    const char *eol1 = row1 ? strchr(row1 + 1, '\n') : NULL, *star1 = row1 ? strstr(row1, "%*") : NULL;
    CHECK(row0 && eol1 && strstr(row0, "| 28.11% | 112.44%* |") == strstr(row0, "| 28.11% |") &&
              strstr(row0, "| 28.11% |") < row1 && strstr(row1, "| 25.00% | 100.00% |") &&
              strstr(row1, "| 25.00% | 100.00% |") < eol1 && (!star1 || star1 > eol1) && note && secs && row1 < note &&
              note < secs && !strstr(note + 3, "\\* Above 100%"),
          "report_mfu_over_100_flagged", "%.900s", row0 ? row0 : "(no row)");
    const char *para = md ? strstr(md, "\n\n") : NULL; /* the first paragraph follows the title */
    const char *end = para ? strstr(para + 2, "\n\n") : NULL;
    int in_para = para && end && strstr(para, "Mode: **matched global batch**") < end &&
                  strstr(para, "same global batch in the same data order") < end && strstr(para, "Fastest cell: **8x1.ac=none**") < end;
    CHECK(md && in_para && strstr(md, "Grid: 2 meshes × checkpoint_activations (ac: none, full) = 4 cells"),
          "report_first_paragraph_mode_agreement", "%.400s", para ? para : "(no report)");
    /* between the meshes of one setting: ac=full, 8x1 against 2x4 at step 3: |4.704 - 4.7001| / 4.7001 */
    char dev[64];
    snprintf(dev, sizeof dev, "**%.3g**", fabs(4.704 - 4.7001) / 4.7001);
    CHECK(md && strstr(md, dev) && strstr(md, "of one setting, at ac=full"), "report_largest_deviation", "want %s", dev);
    const char *tables = md ? strstr(md, "## Largest batch per TP degree") : NULL;
    CHECK(tables && strstr(tables, "| setting | tp 1 (8x1) | tp 4 (2x4) |") &&
              strstr(tables, "| ac=none | [2 × 1](runs/8x1.ac=none.json) | [8 × 1](runs/2x4.ac=none.json) |") &&
              strstr(tables, "### checkpoint_activations (ac)") && strstr(tables, "| ac=full | 1 × 2 | 8 × 1 |"),
          "report_grid_tables", "%.600s", tables ? tables : "(no section)");
    CHECK(tables && strstr(tables, "## Tokens per second per TP degree") &&
              strstr(tables, "| ac=none | [1200](runs/8x1.ac=none.json) | [900](runs/2x4.ac=none.json) |"),
          "report_grid_tok_s_table", "%.300s", tables ? strstr(tables, "## Tokens") : "");
    json_t *sum = json_load_file(check_path("summary.json"), 0, NULL);
    json_t *m0 = json_array_get(json_object_get(sum, "meshes"), 2);
    CHECK(sum && !strcmp(json_string_value(json_object_get(sum, "mode")), "matched_global_batch") &&
              json_integer_value(json_object_get(sum, "cells")) == 4 && json_array_size(json_object_get(sum, "loss_deviation")) == 2 &&
              !strcmp(json_string_value(json_object_get(m0, "cell")), "8x1.ac=none") &&
              !strcmp(json_string_value(json_object_get(m0, "mesh")), "8x1") &&
              json_integer_value(json_object_get(m0, "grad_accum")) == 1 &&
              !strcmp(json_string_value(json_object_get(json_object_get(m0, "axes"), "checkpoint_activations")), "none") &&
              json_integer_value(json_object_get(m0, "tokens_per_step")) == 16 * 64,
          "summary_json_grid", "%s", sum ? "fields differ" : "unreadable");
    json_decref(sum);
    const char *csv = slurp(check_path("summary.csv"));
    CHECK(csv && !strncmp(csv, "cell,checkpoint_activations,mesh,dp,tp,batch_size,global_batch,grad_accum,tok_s,", 80) &&
              strstr(csv, "\n8x1.ac=full,full,8x1,8,1,1,16,2,500.0,"),
          "summary_csv_grid", "%.200s", csv ? csv : "(none)");
    /* nothing above 100%: no mark and no footnote */
    json_object_set_new(sm0, "mfu_share", json_real(0.9));
    rc = sweep_write_report_md(&c, 0, err, sizeof err);
    md = slurp(check_path("report.md"));
    CHECK(rc == 0 && md && strstr(md, "| 28.11% | 90.00% |") && !strstr(md, "%*") && !strstr(md, "Above 100%"),
          "report_mfu_at_most_100_unflagged", "rc %d %.300s", rc, md ? md : "(none)");
    for (int i = 0; i < 4; i++) json_decref(res[i].record);
    check_rmtree(check_scratch);
    sweep_spec_free(&s);
}

int main(void) {
    test_cells();
    test_errors();
    test_distinct_values();
    test_axes_against_model();
    test_matched();
    test_record_checks();
    test_report();
    return check_exit();
}
