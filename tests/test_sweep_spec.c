/* tests/test_sweep_spec.c — the sweep spec parser (core/sweep/spec.c): every kind of bad spec is
 * rejected with one line naming its key (also options the runner owns in extra_args), good specs
 * give the right fields and defaults, the argv of a launch passes spec strings through untouched
 * (and names the runner's variables with -x for Open MPI); the process-control pieces the runner is
 * built on (core/sweep/launch.c: exit codes, timeout, exec failure, atomic writes, log tails, Open
 * MPI leftovers of a killed launch); the derived numbers of the report (core/sweep/report.c: MFU
 * against the core share, TP groups across hosts, seconds to a loss, complete charts) and the
 * engine's batch limit. Not the end-to-end sweep (tests/t_sweep.sh). */
#include "core/sweep/launch.h"
#include "core/sweep/charts.h"
#include "core/sweep/report.h"
#include "core/sweep/runner.h"
#include "core/sweep/spec.h"
#include "tests/check.h"
#include "core/common/files.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A valid spec with one key replaced (or removed when value is NULL, or added when absent). */
static char *spec_with(const char *key, const char *value_json) {
    const char *base =
        "{\"name\": \"t\", \"world\": 8, \"meshes\": [\"1x8\", \"2x4\", \"4x2\", \"8x1\"], \"model\": \"tiny\","
        " \"seq_len\": 64, \"steps\": 4, \"lr\": 0.003, \"mem_budget\": \"96MiB\", \"batch_size\": \"max\","
        " \"data\": \"build/data/kjv/train.bin\", \"timeout_s\": 60}";
    json_t *o = json_loads(base, 0, NULL);
    if (key) {
        if (value_json) {
            json_t *v = json_loads(value_json, JSON_DECODE_ANY, NULL);
            if (!v) {
                fprintf(stderr, "bad test value %s\n", value_json);
                exit(1);
            }
            json_object_set_new(o, key, v);
        } else {
            json_object_del(o, key);
        }
    }
    char *s = json_dumps(o, JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

/* Expect a parse error whose message starts with prefix. */
static void expect_error(const char *name, const char *text, const char *prefix) {
    sweep_spec s;
    char err[512] = "";
    int rc = sweep_spec_parse(text, &s, err, sizeof err);
    int ok = rc == -1 && strncmp(err, prefix, strlen(prefix)) == 0 && !strchr(err, '\n');
    CHECK(ok, name, "rc %d, message '%s', want a line starting with '%s'", rc, err, prefix);
    if (rc == 0) sweep_spec_free(&s);
}

static void expect_key_error(const char *name, const char *key, const char *value, const char *prefix) {
    char *t = spec_with(key, value);
    expect_error(name, t, prefix);
    free(t);
}

static int argv_has(const sweep_argv *a, const char *x) {
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->v[i], x) == 0) return 1;
    return 0;
}

static const char *argv_after(const sweep_argv *a, const char *opt) {
    for (int i = 0; i + 1 < a->n; i++)
        if (strcmp(a->v[i], opt) == 0) return a->v[i + 1];
    return NULL;
}

static void test_good(void) {
    sweep_spec s;
    char err[512] = "";
    char *t = spec_with(NULL, NULL);
    int rc = sweep_spec_parse(t, &s, err, sizeof err);
    free(t);
    CHECK(rc == 0, "spec_valid_parses", "rc %d: %s", rc, err);
    if (rc) return;
    CHECK(s.world == 8 && s.n_meshes == 4 && s.meshes[1].dp == 2 && s.meshes[1].tp == 4 &&
              strcmp(s.meshes[3].name, "8x1") == 0,
          "spec_meshes", "world %d n %d", s.world, s.n_meshes);
    CHECK(s.batch_mode == SWEEP_BATCH_MAX && s.mem_budget_bytes == 96ull << 20, "spec_max_budget", "mode %d bytes %llu",
          s.batch_mode, (unsigned long long)s.mem_budget_bytes);
    CHECK(s.n_launcher == 4 && strcmp(s.launcher[0], "mpirun") == 0 && strcmp(s.launcher[3], "{world}") == 0,
          "spec_default_launcher", "n %d", s.n_launcher);
    CHECK(strcmp(s.backend, "cpu") == 0 && strcmp(s.results_dir, "results") == 0 && s.eval_every == 0 &&
              s.timeout_s == 60 && s.sequence_parallel == -1 && s.warmup == -1 && !s.has_seed,
          "spec_defaults", "backend %s results %s eval_every %d", s.backend, s.results_dir, s.eval_every);

    /* argv of a run: launcher with {world}, spec strings untouched, one element each */
    sweep_argv a = {0};
    rc = sweep_train_argv(&s, &s.meshes[1], SWEEP_ARGV_RUN, 7, "build/train", "out dir/x.json", &a);
    CHECK(rc == 0 && strcmp(a.v[0], "mpirun") == 0 && strcmp(a.v[3], "8") == 0 && strcmp(a.v[4], "build/train") == 0 &&
              a.v[a.n] == NULL,
          "argv_launcher_world", "rc %d argv[3] %s", rc, a.n > 3 ? a.v[3] : "?");
    CHECK(argv_after(&a, "--tp") && strcmp(argv_after(&a, "--tp"), "4") == 0 && strcmp(argv_after(&a, "--batch-size"), "7") == 0 &&
              strcmp(argv_after(&a, "--steps"), "4") == 0 && strcmp(argv_after(&a, "--mem-budget"), "96MiB") == 0 &&
              strcmp(argv_after(&a, "--out"), "out dir/x.json") == 0 && strcmp(argv_after(&a, "--lr"), "0.003") == 0 &&
              !argv_has(&a, "--plan"),
          "argv_run_options", "tp %s", argv_after(&a, "--tp"));
    sweep_argv_free(&a);
    const char *fwd[] = {"OPENBLAS_NUM_THREADS", NULL};
    rc = sweep_train_argv_env(&s, &s.meshes[1], SWEEP_ARGV_RUN, 7, "build/train", "x.json", fwd, &a);
    CHECK(rc == 0 && strcmp(a.v[0], "mpirun") == 0 && strcmp(a.v[1], "-x") == 0 &&
              strcmp(a.v[2], "OPENBLAS_NUM_THREADS") == 0 && strcmp(a.v[3], "--oversubscribe") == 0 &&
              strcmp(a.v[6], "build/train") == 0,
          "argv_forward_env_openmpi", "argv %s %s %s", a.v[0], a.n > 1 ? a.v[1] : "?", a.n > 2 ? a.v[2] : "?");
    sweep_argv_free(&a);
    rc = sweep_train_argv(&s, &s.meshes[0], SWEEP_ARGV_PLAN, 5, "build/train", "p.json", &a);
    CHECK(rc == 0 && strcmp(argv_after(&a, "--batch-size"), "5") == 0 && !argv_has(&a, "--gpu"), "argv_plan_at_batch",
          "batch %s", argv_after(&a, "--batch-size"));
    sweep_argv_free(&a);
    rc = sweep_train_argv(&s, &s.meshes[0], SWEEP_ARGV_PLAN, 0, "build/train", "p.json", &a);
    CHECK(rc == 0 && strcmp(a.v[0], "build/train") == 0 && argv_has(&a, "--plan") &&
              strcmp(argv_after(&a, "--world"), "8") == 0 && strcmp(argv_after(&a, "--batch-size"), "max") == 0 &&
              strcmp(argv_after(&a, "--tp"), "8") == 0 && !argv_has(&a, "--steps") && !argv_has(&a, "mpirun"),
          "argv_plan", "argv[0] %s", a.n ? a.v[0] : "?");
    sweep_argv_free(&a);
    sweep_spec_free(&s);

    /* every optional key, shell syntax in strings, eval, a custom launcher */
    const char *full =
        "{\"name\": \"full.x-1\", \"world\": 4, \"meshes\": [\"4x1\", \"1x4\"], \"model\": \"cfg dir/config.json\","
        " \"seq_len\": 32, \"steps\": 10, \"lr\": 1, \"batch_size\": {\"4x1\": 3, \"1x4\": 5},"
        " \"data\": \"x; touch /tmp/pwned\", \"eval_data\": \"$(id).bin\", \"backend\": \"cuda\","
        " \"launcher\": [\"srun\", \"-n{world}\", \"--x={world}{world}\"], \"timeout_s\": 1.5, \"seed\": 7,"
        " \"schedule\": \"cosine\", \"warmup\": 2, \"grad_clip\": 0, \"weight_decay\": 0.05,"
        " \"sequence_parallel\": false, \"prefetch\": false, \"checkpoint_activations\": true,"
        " \"extra_args\": [\"--dtype\", \"fp32\"], \"results_dir\": \"/tmp/r\", \"target_loss\": 2.5,"
        " \"gpu\": \"h100-80gb\"}";
    rc = sweep_spec_parse(full, &s, err, sizeof err);
    CHECK(rc == 0, "spec_full_parses", "%s", err);
    if (rc) return;
    CHECK(s.batch_mode == SWEEP_BATCH_FIXED && s.meshes[0].batch_size == 3 && s.meshes[1].batch_size == 5 &&
              s.eval_every == 10 && !s.mem_budget,
          "spec_batch_object", "b %d %d eval_every %d", s.meshes[0].batch_size, s.meshes[1].batch_size, s.eval_every);
    rc = sweep_train_argv(&s, &s.meshes[1], SWEEP_ARGV_RUN, 5, "/abs/train", "o.json", &a);
    CHECK(rc == 0 && strcmp(a.v[0], "srun") == 0 && strcmp(a.v[1], "-n4") == 0 && strcmp(a.v[2], "--x=44") == 0,
          "argv_launcher_substitution", "%s %s %s", a.v[0], a.v[1], a.v[2]);
    CHECK(s.target_loss == 2.5 && s.gpu && strcmp(s.gpu, "h100-80gb") == 0 && !argv_has(&a, "--gpu"),
          "spec_target_loss_gpu", "target %g", s.target_loss);
    sweep_argv_free(&a);
    const char *fwd2[] = {"OPENBLAS_NUM_THREADS", NULL};
    rc = sweep_train_argv_env(&s, &s.meshes[1], SWEEP_ARGV_RUN, 5, "/abs/train", "o.json", fwd2, &a);
    CHECK(rc == 0 && !argv_has(&a, "-x") && strcmp(a.v[0], "srun") == 0, "argv_no_x_for_srun", "argv[1] %s", a.v[1]);
    sweep_argv_free(&a);
    rc = sweep_train_argv(&s, &s.meshes[1], SWEEP_ARGV_PLAN, 0, "/abs/train", "o.json", &a);
    CHECK(rc == 0 && argv_after(&a, "--gpu") && strcmp(argv_after(&a, "--gpu"), "h100-80gb") == 0, "argv_plan_gpu",
          "gpu %s", argv_after(&a, "--gpu"));
    sweep_argv_free(&a);
    rc = sweep_train_argv(&s, &s.meshes[1], SWEEP_ARGV_RUN, 5, "/abs/train", "o.json", &a);
    CHECK(argv_after(&a, "--data") && strcmp(argv_after(&a, "--data"), "x; touch /tmp/pwned") == 0 &&
              strcmp(argv_after(&a, "--eval-data"), "$(id).bin") == 0 &&
              strcmp(argv_after(&a, "--model"), "cfg dir/config.json") == 0,
          "argv_shell_syntax_verbatim", "data '%s'", argv_after(&a, "--data"));
    CHECK(argv_has(&a, "--no-sequence-parallel") && argv_has(&a, "--no-prefetch") &&
              argv_has(&a, "--checkpoint-activations") && strcmp(argv_after(&a, "--seed"), "7") == 0 &&
              strcmp(argv_after(&a, "--schedule"), "cosine") == 0 && strcmp(argv_after(&a, "--warmup"), "2") == 0 &&
              strcmp(argv_after(&a, "--grad-clip"), "0") == 0 && strcmp(argv_after(&a, "--dtype"), "fp32") == 0 &&
              strcmp(argv_after(&a, "--backend"), "cuda") == 0 && strcmp(argv_after(&a, "--eval-every"), "10") == 0 &&
              !argv_has(&a, "--mem-budget"),
          "argv_optional_flags", "argc %d", a.n);
    sweep_argv_free(&a);
    rc = sweep_train_argv(&s, &s.meshes[1], SWEEP_ARGV_PROBE, 6, "/abs/train", "o.json", &a);
    CHECK(rc == 0 && strcmp(argv_after(&a, "--steps"), "2") == 0 && !argv_has(&a, "--eval-data") &&
              strcmp(argv_after(&a, "--batch-size"), "6") == 0,
          "argv_probe_short_no_eval", "steps %s", argv_after(&a, "--steps"));
    sweep_argv_free(&a);
    sweep_spec_free(&s);

    /* global batch: batch per DP rank = G / dp */
    char *g = spec_with("batch_size", NULL);
    json_t *o = json_loads(g, 0, NULL);
    free(g);
    json_object_set_new(o, "global_batch", json_integer(16));
    g = json_dumps(o, 0);
    json_decref(o);
    rc = sweep_spec_parse(g, &s, err, sizeof err);
    free(g);
    CHECK(rc == 0 && s.batch_mode == SWEEP_BATCH_GLOBAL && s.meshes[0].batch_size == 16 &&
              s.meshes[1].batch_size == 8 && s.meshes[2].batch_size == 4 && s.meshes[3].batch_size == 2,
          "spec_global_batch_split", "rc %d %s", rc, err);
    if (rc == 0) sweep_spec_free(&s);
}

static void test_errors(void) {
    expect_error("err_invalid_json", "{\"name\": ", "spec: invalid JSON");
    expect_error("err_duplicate_key", "{\"name\": \"a\", \"name\": \"b\"}", "spec: invalid JSON");
    expect_error("err_top_level_array", "[1, 2]", "spec:");
    expect_key_error("err_unknown_key", "batchsize", "4", "batchsize: unknown key");
    expect_key_error("err_unknown_key_newline", "a\nb", "4", "a?b: unknown key"); /* still one line */
    expect_key_error("err_mesh_newline", "meshes", "[\"1\\nx8\"]", "meshes[0]: \"1?x8\"");
    static const char *required[] = {"name", "world", "meshes", "model", "seq_len", "steps", "lr", "data"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        char name[64], prefix[64];
        snprintf(name, sizeof name, "err_missing_%s", required[i]);
        snprintf(prefix, sizeof prefix, "%s: missing required key", required[i]);
        expect_key_error(name, required[i], NULL, prefix);
    }
    expect_key_error("err_missing_batch", "batch_size", NULL, "batch_size: missing");
    {   /* a fixed batch with a global batch (with "max" it is the matched mode: tests/test_sweep_grid.c) */
        char *t = spec_with("batch_size", "4");
        json_t *o = json_loads(t, 0, NULL);
        json_object_set_new(o, "global_batch", json_integer(8));
        char *u = json_dumps(o, 0);
        expect_error("err_both_batches", u, "global_batch: cannot be given together");
        free(u), free(t), json_decref(o);
    }
    expect_key_error("err_world_string", "world", "\"8\"", "world:");
    expect_key_error("err_world_zero", "world", "0", "world:");
    expect_key_error("err_steps_real", "steps", "1.5", "steps:");
    expect_key_error("err_seq_len_negative", "seq_len", "-64", "seq_len:");
    expect_key_error("err_lr_string", "lr", "\"3e-3\"", "lr:");
    expect_key_error("err_lr_zero", "lr", "0", "lr:");
    expect_key_error("err_meshes_string", "meshes", "\"1x8\"", "meshes:");
    expect_key_error("err_meshes_empty", "meshes", "[]", "meshes:");
    static const char *bad_meshes[] = {"\"3x\"", "\"0x8\"", "\"2x4x1x1\"", "\"x8\"", "\"2X4\"", "\" 2x4\"",
                                       "\"2x4 \"", "\"+2x4\"", "\"-2x-4\"", "\"02x4\"", "\"2.0x4\"", "8", "\"\""};
    for (size_t i = 0; i < sizeof bad_meshes / sizeof bad_meshes[0]; i++) {
        char v[64], name[64];
        snprintf(v, sizeof v, "[%s, \"2x4\", \"4x2\", \"8x1\"]", bad_meshes[i]);
        snprintf(name, sizeof name, "err_mesh_syntax_%zu", i);
        expect_key_error(name, "meshes", v, "meshes[0]:");
    }
    expect_key_error("err_mesh_product", "meshes", "[\"1x8\", \"2x2\"]", "meshes[1]: \"2x2\" has dp*tp = 4, but world is 8");
    expect_key_error("err_mesh_duplicate", "meshes", "[\"1x8\", \"2x4\", \"1x8\"]", "meshes[2]:");
    expect_key_error("err_mem_budget_syntax", "mem_budget", "\"lots\"", "mem_budget:");
    expect_key_error("err_mem_budget_number", "mem_budget", "96", "mem_budget:");
    expect_key_error("err_mem_budget_zero", "mem_budget", "\"0MiB\"", "mem_budget:");
    expect_key_error("err_max_needs_budget", "mem_budget", NULL, "mem_budget: required");
    expect_key_error("err_mem_budget_auto_needs_cuda", "mem_budget", "\"auto\"", "mem_budget: \"auto\" needs");
    {   /* "auto" on CUDA: accepted, no bytes known to the runner, passed on to train as written */
        char *t = spec_with("mem_budget", "\"auto\"");
        json_t *o = json_loads(t, 0, NULL);
        json_object_set_new(o, "backend", json_string("cuda"));
        char *u = json_dumps(o, JSON_PRESERVE_ORDER);
        sweep_spec s;
        char err[512] = "";
        int rc = sweep_spec_parse(u, &s, err, sizeof err);
        CHECK(rc == 0 && s.mem_budget_bytes == 0 && strcmp(s.mem_budget, "auto") == 0, "spec_mem_budget_auto_cuda",
              "rc %d (%s)", rc, err);
        if (rc == 0) sweep_spec_free(&s);
        free(u); free(t); json_decref(o);
    }
    expect_key_error("err_batch_string", "batch_size", "\"maximum\"", "batch_size:");
    expect_key_error("err_batch_zero", "batch_size", "0", "batch_size:");
    expect_key_error("err_batch_real", "batch_size", "2.5", "batch_size:");
    expect_key_error("err_batch_object_missing", "batch_size", "{\"1x8\": 1, \"2x4\": 2, \"4x2\": 3}",
                     "batch_size.8x1: missing");
    expect_key_error("err_batch_object_unknown_mesh", "batch_size",
                     "{\"1x8\": 1, \"2x4\": 2, \"4x2\": 3, \"8x1\": 4, \"3x3\": 1}", "batch_size.3x3:");
    expect_key_error("err_batch_object_value", "batch_size", "{\"1x8\": \"4\", \"2x4\": 2, \"4x2\": 3, \"8x1\": 4}",
                     "batch_size.1x8:");
    static const char *bad_names[] = {"\"../x\"", "\".\"", "\"..\"", "\"a/b\"", "\"\"", "\"a b\"", "\"x;rm\"", "7"};
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "err_name_%zu", i);
        expect_key_error(name, "name", bad_names[i], "name:");
    }
    expect_key_error("err_data_empty", "data", "\"\"", "data:");
    expect_key_error("err_data_array", "data", "[\"a\"]", "data:");
    expect_key_error("err_eval_every_without_data", "eval_every", "5", "eval_every: needs eval_data");
    expect_key_error("err_eval_every_negative", "eval_every", "-1", "eval_every:");
    expect_key_error("err_backend", "backend", "\"tpu\"", "backend:");
    expect_key_error("err_launcher_type", "launcher", "\"mpirun -np 8\"", "launcher:");
    expect_key_error("err_launcher_elem", "launcher", "[\"mpirun\", 8]", "launcher[1]:");
    expect_key_error("err_timeout_zero", "timeout_s", "0", "timeout_s:");
    expect_key_error("err_timeout_string", "timeout_s", "\"60\"", "timeout_s:");
    expect_key_error("err_seed_negative", "seed", "-1", "seed:");
    expect_key_error("err_schedule", "schedule", "\"linear\"", "schedule:");
    expect_key_error("err_warmup_real", "warmup", "1.5", "warmup:");
    expect_key_error("err_grad_clip_negative", "grad_clip", "-1", "grad_clip:");
    expect_key_error("err_weight_decay_string", "weight_decay", "\"0.1\"", "weight_decay:");
    expect_key_error("err_sp_string", "sequence_parallel", "\"yes\"", "sequence_parallel:");
    expect_key_error("err_prefetch_int", "prefetch", "1", "prefetch:");
    expect_key_error("err_ckpt_null", "checkpoint_activations", "null", "checkpoint_activations:");
    expect_key_error("err_extra_args_string", "extra_args", "\"--dtype fp32\"", "extra_args:");
    expect_key_error("err_results_dir_empty", "results_dir", "\"\"", "results_dir:");
    /* options the runner sets itself may not come in through extra_args */
    static const char *owned[] = {"[\"--tp\", \"2\"]", "[\"--dtype\", \"fp32\", \"--steps=3\"]", "[\"--batch-size\", \"4\"]",
                                  "[\"--seq-len\", \"8\"]", "[\"--model\", \"small\"]", "[\"--out\", \"x\"]",
                                  "[\"--mem-budget\", \"1GB\"]", "[\"--data\", \"x\"]", "[\"--eval-data\", \"x\"]",
                                  "[\"--seed\", \"1\"]", "[\"--world\", \"8\"]", "[\"--plan\"]", "[\"--lr\", \"1\"]"};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "err_extra_args_owned_%zu", i);
        expect_key_error(name, "extra_args", owned[i], i == 1 ? "extra_args[2]: \"--steps=3\" is set by the runner"
                                                              : "extra_args[0]:");
    }
    CHECK(sweep_owned_option("--tp") && strcmp(sweep_owned_option("--steps"), "steps") == 0 &&
              !sweep_owned_option("--dtype") && !sweep_owned_option("--tpx") && !sweep_owned_option("--comm"),
          "owned_option_table", "wrong verdict");
    expect_key_error("err_target_loss_zero", "target_loss", "0", "target_loss:");
    expect_key_error("err_target_loss_string", "target_loss", "\"2.0\"", "target_loss:");
    expect_key_error("err_gpu_empty", "gpu", "\"\"", "gpu:");
    expect_key_error("err_sp_activations_value", "sp_activations", "\"sharded\"", "sp_activations: expected");
    {   /* sp_activations reaches train as --sp-activations, in plans and runs; extra_args may not set it */
        char *t = spec_with("sp_activations", "\"gathered\"");
        sweep_spec s;
        sweep_argv a = {0}, p = {0};
        char err[512] = "";
        int rc = sweep_spec_parse(t, &s, err, sizeof err);
        if (rc == 0) rc = sweep_train_argv(&s, &s.meshes[0], SWEEP_ARGV_RUN, 2, "/abs/train", "o.json", &a);
        if (rc == 0) rc = sweep_train_argv(&s, &s.meshes[0], SWEEP_ARGV_PLAN, 0, "/abs/train", "o.json", &p);
        CHECK(rc == 0 && argv_after(&a, "--sp-activations") && !strcmp(argv_after(&a, "--sp-activations"), "gathered") &&
                  argv_after(&p, "--sp-activations") && !strcmp(argv_after(&p, "--sp-activations"), "gathered"),
              "argv_sp_activations", "rc %d (%s)", rc, err);
        sweep_argv_free(&a); sweep_argv_free(&p);
        if (rc == 0) sweep_spec_free(&s);
        free(t);
    }
    expect_key_error("err_extra_args_sp_activations", "extra_args", "[\"--sp-activations\", \"local\"]",
                     "extra_args[0]:");
    /* --grad-accum in extra_args: the record, the progress line and the report would count the batch apart */
    expect_key_error("err_extra_args_grad_accum", "extra_args", "[\"--grad-accum\", \"2\"]",
                     "extra_args[0]: \"--grad-accum\": the micro-batches per step come from \"global_batch\"");
    expect_key_error("err_extra_args_grad_accum_eq", "extra_args", "[\"--dtype\", \"fp32\", \"--grad-accum=2\"]",
                     "extra_args[2]: \"--grad-accum=2\"");
    /* global batch that a mesh's dp does not divide */
    char *g = spec_with("batch_size", NULL);
    json_t *o = json_loads(g, 0, NULL);
    free(g);
    json_object_set_new(o, "global_batch", json_integer(12));
    g = json_dumps(o, 0);
    json_decref(o);
    expect_error("err_global_batch_divides", g, "global_batch: 12 is not divisible by dp = 8 of mesh 8x1");
    free(g);

    sweep_spec s;
    char err[256];
    int rc = sweep_spec_load("/nonexistent/spec.json", &s, err, sizeof err);
    CHECK(rc == -2 && strstr(err, "cannot open"), "err_missing_file", "rc %d %s", rc, err);
}

static void test_helpers(void) {
    int dp = 0, tp = 0;
    CHECK(sweep_parse_mesh("12x3", &dp, &tp) == 0 && dp == 12 && tp == 3, "mesh_parse_ok", "%d %d", dp, tp);
    CHECK(sweep_parse_mesh("1x", &dp, &tp) != 0 && sweep_parse_mesh("", &dp, &tp) != 0 &&
              sweep_parse_mesh("1x1x1", &dp, &tp) != 0 && sweep_parse_mesh("99999999x1", &dp, &tp) != 0,
          "mesh_parse_rejects", "accepted a bad mesh");
    CHECK(sweep_name_valid("default") && sweep_name_valid("llama3.1-8b_8xH100") && sweep_name_valid("..a") &&
              !sweep_name_valid("..") && !sweep_name_valid(".") && !sweep_name_valid("a/b") && !sweep_name_valid(""),
          "name_valid", "wrong verdict");
    /* every spec in sweeps/ parses (tests run from the repository root) */
    DIR *d = opendir("sweeps");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0) continue;
        char path[512], name[300], err[512] = "";
        snprintf(path, sizeof path, "sweeps/%s", e->d_name);
        snprintf(name, sizeof name, "sweeps_parse_%s", e->d_name);
        sweep_spec s;
        int rc = sweep_spec_load(path, &s, err, sizeof err);
        CHECK(rc == 0, name, "%s", err);
        if (rc == 0) sweep_spec_free(&s);
        n++;
    }
    if (d) closedir(d);
    CHECK(n >= 4, "sweeps_present", "found %d specs in sweeps/", n);
}

/* Running (a zombie left to an init that does not reap counts as gone). */
static int alive(long pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

static void test_launch(void) {
    char dir[] = "/tmp/test_sweep_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "launch_tmpdir", "mkdtemp failed");
        return;
    }
    char log[256];
    snprintf(log, sizeof log, "%s/log", dir);
    sweep_launch_result r;

    char *a1[] = {"sh", "-c", "echo hello; echo oops >&2; exit 3", NULL};
    sweep_launch_opts o = {.argv = a1, .log_path = log, .timeout_s = 30};
    int rc = sweep_launch(&o, &r);
    char tail[256];
    sweep_tail_lines(log, 2, tail, sizeof tail);
    CHECK(rc == 0 && r.outcome == SWEEP_LAUNCH_EXITED && r.exit_code == 3, "launch_exit_code", "rc %d outcome %d code %d",
          rc, r.outcome, r.exit_code);
    CHECK(strcmp(tail, "hello\noops") == 0, "launch_log_both_streams", "tail '%s'", tail);

    const char *env[] = {"SWEEP_TEST_X=from runner", NULL};
    char *a2[] = {"sh", "-c", "echo \"$SWEEP_TEST_X\"", NULL};
    sweep_launch_opts o2 = {.argv = a2, .log_path = log, .timeout_s = 30, .env = env};
    rc = sweep_launch(&o2, &r);
    sweep_tail_lines(log, 1, tail, sizeof tail);
    CHECK(rc == 0 && r.exit_code == 0 && strcmp(tail, "from runner") == 0, "launch_env", "tail '%s'", tail);

    /* a child that ignores SIGTERM and leaves a grandchild: both must be gone after the timeout */
    char pidfile[300];
    snprintf(pidfile, sizeof pidfile, "%s/gc.pid", dir);
    char script[600];
    snprintf(script, sizeof script, "trap '' TERM; sleep 60 & echo $! > %s; wait; sleep 60", pidfile);
    char *a3[] = {"sh", "-c", script, NULL};
    sweep_launch_opts o3 = {.argv = a3, .log_path = log, .timeout_s = 0.5, .term_grace_s = 0.5};
    rc = sweep_launch(&o3, &r);
    CHECK(rc == 0 && r.outcome == SWEEP_LAUNCH_TIMEOUT && r.elapsed_s < 5, "launch_timeout_kills",
          "rc %d outcome %d elapsed %.1f", rc, r.outcome, r.elapsed_s);
    FILE *f = fopen(pidfile, "r");
    long gc = 0;
    if (f) {
        if (fscanf(f, "%ld", &gc) != 1) gc = 0;
        fclose(f);
    }
    usleep(100000);
    CHECK(gc > 0 && !alive(gc), "launch_timeout_kills_group", "grandchild %ld still alive", gc);

    char *a4[] = {"/nonexistent/program", "x", NULL};
    sweep_launch_opts o4 = {.argv = a4, .log_path = log, .timeout_s = 5};
    rc = sweep_launch(&o4, &r);
    CHECK(rc == -1 && r.outcome == SWEEP_LAUNCH_EXEC_FAILED && strstr(r.error, "/nonexistent/program"),
          "launch_exec_failure", "rc %d outcome %d '%s'", rc, r.outcome, r.error);

    char badlog[300];
    snprintf(badlog, sizeof badlog, "%s/no/such/dir/log", dir);
    sweep_launch_opts o5 = {.argv = a1, .log_path = badlog, .timeout_s = 5};
    rc = sweep_launch(&o5, &r);
    CHECK(rc == -1 && r.outcome == SWEEP_LAUNCH_IO_ERROR, "launch_log_io_error", "rc %d outcome %d", rc, r.outcome);

    char path[300];
    snprintf(path, sizeof path, "%s/a.json", dir);
    rc = files_write_atomic(path, "{}\n", 3);
    int entries = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp")) entries++;
    if (d) closedir(d);
    f = fopen(path, "r");
    char buf[8] = "";
    if (f) {
        if (!fgets(buf, sizeof buf, f)) buf[0] = '\0';
        fclose(f);
    }
    CHECK(rc == 0 && entries == 0 && strcmp(buf, "{}\n") == 0, "write_atomic", "rc %d temps %d content '%s'", rc,
          entries, buf);
    snprintf(path, sizeof path, "%s/missing/a.json", dir);
    CHECK(files_write_atomic(path, "x", 1) == -1, "write_atomic_error", "wrote into a missing folder");

    /* clean up */
    snprintf(path, sizeof path, "%s/a.json", dir);
    unlink(path), unlink(log), unlink(pidfile);
    rmdir(dir);
}


/* The report's derived numbers from constructed records (fields as build/train writes them). */
static void test_derived(void) {
    sweep_mesh m24 = {.name = "2x4", .dp = 2, .tp = 4};
    sweep_result r = {.mesh = &m24};
    /* 8 ranks on one host with 2 cores: each rank had 1/4 of a core, so MFU x 4 */
    r.record = json_loads("{\"summary\": {\"mfu\": 0.05}, \"env\": {\"ranks_by_host\": {\"a\": [0,1,2,3,4,5,6,7]},"
                          " \"cores_by_host\": {\"a\": 2}}}", 0, NULL);
    double ms = sweep_mfu_share(&r);
    int nr, nc, nh;
    sweep_rank_cores(&r, &nr, &nc, &nh);
    CHECK(fabs(ms - 0.2) < 1e-12 && nr == 8 && nc == 2 && nh == 1 && sweep_tp_spans_hosts(&r) == 0,
          "derived_mfu_share_one_host", "share %g ranks %d cores %d hosts %d", ms, nr, nc, nh);
    json_decref(r.record);
    /* two hosts of 4 ranks, 8 and 2 cores: available = min(4,8) + min(4,2) = 6 rank-cores */
    r.record = json_loads("{\"summary\": {\"mfu\": 0.3}, \"env\": {\"ranks_by_host\": {\"a\": [0,1,2,3], \"b\": [4,5,6,7]},"
                          " \"cores_by_host\": {\"a\": 8, \"b\": 2}}}", 0, NULL);
    ms = sweep_mfu_share(&r);
    CHECK(fabs(ms - 0.4) < 1e-12 && sweep_tp_spans_hosts(&r) == 0, "derived_mfu_share_two_hosts", "share %g", ms);
    json_decref(r.record);
    /* --map-by node: TP groups of 4 consecutive ranks alternate hosts */
    r.record = json_loads("{\"env\": {\"ranks_by_host\": {\"a\": [0,2,4,6], \"b\": [1,3,5,7]}}}", 0, NULL);
    CHECK(sweep_tp_spans_hosts(&r) == 1 && isnan(sweep_mfu_share(&r)), "derived_tp_spans_hosts", "verdict %d",
          sweep_tp_spans_hosts(&r));
    json_decref(r.record);
    /* the record's own fields win; none at all is n/a */
    r.record = json_loads("{\"summary\": {\"mfu\": 0.1, \"mfu_share\": 0.7}, \"env\": {\"tp_spans_hosts\": true}}", 0, NULL);
    CHECK(sweep_mfu_share(&r) == 0.7 && sweep_tp_spans_hosts(&r) == 1, "derived_record_fields_first", "share %g",
          sweep_mfu_share(&r));
    json_decref(r.record);
    r.record = json_loads("{\"summary\": {\"mfu\": 0.1}, \"env\": {\"hosts\": [\"a\"]}}", 0, NULL);
    sweep_rank_cores(&r, &nr, &nc, &nh);
    CHECK(isnan(sweep_mfu_share(&r)) && sweep_tp_spans_hosts(&r) == -1 && nr == 0, "derived_na_without_fields",
          "share %g", sweep_mfu_share(&r));
    json_decref(r.record);
    /* seconds to a loss: the sum of step times up to the first step at or below it */
    r.record = json_loads("{\"steps\": [{\"step\": 1, \"loss\": 5.0, \"ms\": 1000}, {\"step\": 2, \"loss\": 4.0, \"ms\": 500},"
                          " {\"step\": 3, \"loss\": 4.5, \"ms\": 250}, {\"step\": 4, \"loss\": 3.0, \"ms\": 250}]}", 0, NULL);
    int step;
    double t = sweep_seconds_to_loss(&r, 4.2, &step);
    double never = sweep_seconds_to_loss(&r, 2.0, NULL);
    CHECK(fabs(t - 1.5) < 1e-12 && step == 2 && isnan(never), "derived_seconds_to_loss", "t %g step %d", t, step);
    json_decref(r.record);
    /* the engine's batch limit: 2^26 tokens per rank, at most 2^24 sequences */
    CHECK(sweep_engine_max_batch(64) == 1 << 20 && sweep_engine_max_batch(256) == 1 << 18 &&
              sweep_engine_max_batch(1) == 1 << 24,
          "engine_max_batch", "%d %d", sweep_engine_max_batch(64), sweep_engine_max_batch(256));
}

static int write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* Complete charts only: a PNG up to IEND, an SVG up to </svg>. */
static void test_charts_complete(void) {
    char dir[] = "/tmp/test_sweep_chart_XXXXXX";
    if (!mkdtemp(dir)) return;
    static const unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 0,
                                        'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
    char a[300], b[300], c[300], d[300];
    snprintf(a, sizeof a, "%s/ok.png", dir), snprintf(b, sizeof b, "%s/cut.png", dir);
    snprintf(c, sizeof c, "%s/ok.svg", dir), snprintf(d, sizeof d, "%s/cut.svg", dir);
    int w = write_bytes(a, png, sizeof png) | write_bytes(b, png, 12) | write_bytes(c, "<svg>\n</svg>\n\n", 14) |
            write_bytes(d, "<svg>\n<g>", 9);
    CHECK(w == 0 && sweep_chart_complete(a) && !sweep_chart_complete(b) && sweep_chart_complete(c) &&
              !sweep_chart_complete(d) && !sweep_chart_complete("/nonexistent.png"),
          "chart_complete", "png %d/%d svg %d/%d", sweep_chart_complete(a), sweep_chart_complete(b),
          sweep_chart_complete(c), sweep_chart_complete(d));
    unlink(a), unlink(b), unlink(c), unlink(d), rmdir(dir);
}

/* A killed mpirun's session folder and its job's shared-memory segments go; another job's stay. */
static void test_openmpi_cleanup(void) {
    pid_t p = fork();
    if (p == 0) _exit(0);
    int st;
    waitpid(p, &st, 0); /* p is now a pid that is gone */
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    const char *tmp = getenv("TMPDIR");
    char base[600], sess[700], contact[800], ours[800], other[800], sub[800];
    snprintf(base, sizeof base, "%s/ompi.%s.%u", tmp && *tmp ? tmp : "/tmp", host, (unsigned)getuid());
    snprintf(sess, sizeof sess, "%s/pid.%ld", base, (long)p);
    snprintf(sub, sizeof sub, "%s/1", sess);
    mkdir(base, 0700);
    int made = mkdir(sess, 0700) == 0 && mkdir(sub, 0700) == 0;
    snprintf(contact, sizeof contact, "%s/contact.txt", sess);
    /* family 0x7e57 (an unlikely one), jobid 0x7e570001 */
    made = made && write_bytes(contact, "2119630848.0;tcp://127.0.0.1:1\n1\n", 33) == 0;
    snprintf(ours, sizeof ours, "/dev/shm/vader_segment.%s.%u.7e570001.0", host, (unsigned)getuid());
    snprintf(other, sizeof other, "/dev/shm/vader_segment.%s.%u.7e560001.0", host, (unsigned)getuid());
    made = made && write_bytes(ours, "x", 1) == 0 && write_bytes(other, "x", 1) == 0;
    int n = made ? sweep_launch_cleanup_openmpi(p) : -1;
    CHECK(made && n == 2 && access(sess, F_OK) != 0 && access(ours, F_OK) != 0 && access(other, F_OK) == 0,
          "openmpi_leftovers_removed", "made %d removed %d session %s ours %s other %s", made, n,
          access(sess, F_OK) ? "gone" : "left", access(ours, F_OK) ? "gone" : "left",
          access(other, F_OK) ? "gone" : "kept");
    /* a live pid's session is never touched */
    char live[700];
    snprintf(live, sizeof live, "%s/pid.%ld", base, (long)getpid());
    mkdir(base, 0700);
    mkdir(live, 0700);
    CHECK(sweep_launch_cleanup_openmpi(getpid()) == 0 && access(live, F_OK) == 0, "openmpi_live_session_kept",
          "a running process's session was removed");
    rmdir(live);
    unlink(other), unlink(ours), unlink(contact), rmdir(sub), rmdir(sess);
}

/* HSDP meshes "RxSxT" in meshes[] (dp = R·S), the 2D "DPxTP" unchanged; --replicate only where R > 1 */
static void test_hsdp(void) {
    int r = 0, dp = 0, tp = 0;
    CHECK(sweep_parse_mesh3("2x2x2", &r, &dp, &tp) == 0 && r == 2 && dp == 4 && tp == 2 &&
              sweep_parse_mesh3("8x1", &r, &dp, &tp) == 0 && r == 1 && dp == 8 && tp == 1,
          "hsdp_mesh_parse_ok", "%d %d %d", r, dp, tp);
    CHECK(sweep_parse_mesh3("2x0x2", &r, &dp, &tp) != 0 && sweep_parse_mesh3("2x2x", &r, &dp, &tp) != 0 &&
              sweep_parse_mesh3("1x1x1x1", &r, &dp, &tp) != 0 && sweep_parse_mesh3("0x1x1", &r, &dp, &tp) != 0 &&
              sweep_parse_mesh3("1024x1024x2", &r, &dp, &tp) != 0 && sweep_parse_mesh3("02x2x2", &r, &dp, &tp) != 0,
          "hsdp_mesh_parse_rejects", "accepted a bad mesh");
    sweep_spec s;
    char err[512] = "";
    char *t = spec_with("meshes", "[\"1x8x1\", \"2x4x1\", \"4x2x1\", \"2x2x2\"]");
    int rc = sweep_spec_parse(t, &s, err, sizeof err);
    free(t);
    CHECK(rc == 0, "hsdp_spec_parses", "rc %d: %s", rc, err);
    if (rc) return;
    const sweep_mesh *m = s.meshes;
    CHECK(m[0].rep == 1 && m[0].dp == 8 && m[1].rep == 2 && m[1].dp == 8 && m[2].rep == 4 && m[3].rep == 2 && m[3].dp == 4 &&
              m[3].tp == 2 && !strcmp(m[3].name, "2x2x2") && !strcmp(m[0].mesh_name, "1x8x1"),
          "hsdp_spec_meshes", "%s rep %d dp %d", m[3].name, m[3].rep, m[3].dp);
    sweep_argv a = {0}, b = {0};
    int ra = sweep_train_argv(&s, &m[3], SWEEP_ARGV_RUN, 2, "build/train", "x.json", &a);
    int rb = sweep_train_argv(&s, &m[0], SWEEP_ARGV_RUN, 2, "build/train", "x.json", &b);
    CHECK(ra == 0 && rb == 0 && argv_after(&a, "--replicate") && !strcmp(argv_after(&a, "--replicate"), "2") &&
              !strcmp(argv_after(&a, "--tp"), "2") && !argv_has(&b, "--replicate"),
          "hsdp_argv_replicate", "rc %d %d", ra, rb);
    sweep_argv_free(&a);
    sweep_argv_free(&b);
    sweep_spec_free(&s);
    expect_key_error("hsdp_mesh_world_mismatch", "meshes", "[\"2x4x2\"]", "meshes[0]: \"2x4x2\" has dp*tp = 16");
    expect_key_error("hsdp_mesh_twice", "meshes", "[\"8x1\", \"1x8x1\"]", "meshes[1]: \"1x8x1\" is listed twice");
    expect_key_error("hsdp_mesh_bad", "meshes", "[\"2x2x2x1\"]", "meshes[0]: \"2x2x2x1\" is not DPxTP or RxSxT");
}

int main(void) {
    test_good();
    test_hsdp();
    test_errors();
    test_helpers();
    test_launch();
    test_derived();
    test_charts_complete();
    test_openmpi_cleanup();
    return check_exit();
}
