/* bench/tune.c — build/tune: the best configuration of a model on a cluster, from every candidate's memory plan
 * and predicted step (docs/tune.md). This file is main: the options and the space are core/tune/space.h,
 * the ranking, folder, report and charts core/tune/report.h.
 * Exit codes: 0 written, 1 I/O error, 2 bad usage or input (nothing fits, no reachable cell, ...), 130
 * interrupted (no folder left). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/common/cli.h"
#include "core/job/catalog.h"
#include "core/sweep/launch.h"
#include "core/tune/report.h"
#include "core/tune/space.h"

/* the option table: parser and --help (the fields: tune_opts, core/tune/space.h) */
#define F(x) offsetof(tune_opts, x)
static const cli_opt tune_options[] = {
    {"model", CLI_STR, F(model), "NAME|PATH", "a preset or an HF config.json (as build/train)", 0, NULL, NULL},
    {"gpu", CLI_STR, F(gpu), "NAME", "plan every cell for this device (its budget and its step-time model; bf16, "
     "the CUDA backend's kernels)", 0, NULL, NULL},
    {"machine", CLI_STR, F(machine), "NAME|FILE", "step-time model (default: the --gpu's, else this host's `make "
     "calibrate` file)", 0, NULL, NULL},
    {"world", CLI_INT, F(world), "W", "ranks (GPUs) of the cluster", 0, NULL, NULL},
    {"gpus-per-host", CLI_INT, F(gpus_per_host), "N", "ranks per host (default: the machine's)", 0, NULL, NULL},
    {"seq-len", CLI_INT, F(seq_len), "T", "sequence length", 0, NULL, NULL},
    {"global-batch", CLI_INT, F(global_batch), "G", "sequences per optimizer step, reached exactly by every cell", 0, NULL, NULL},
    {"global-tokens", CLI_STR, F(global_tokens), "N", "tokens per optimizer step instead (a multiple of --seq-len)", 0, NULL, NULL},
    {"mem-budget", CLI_STR, F(mem_budget), "SIZE", "per-rank budget (default: --gpu's, as build/train --plan --gpu; on "
     "this host its memory over the ranks of a host)", 0, NULL, NULL},
    {"mem-reserve", CLI_STR, F(mem_reserve), "SIZE", "with --gpu: device memory kept out of the budget (default 1GiB)", 0, NULL, NULL},
    {"dtype", CLI_STR, F(dtype), "fp32|bf16", "compute precision (default: bf16 with --gpu, fp32 on this host)", 0, NULL, NULL},
    {"max-replicate", CLI_INT, F(max_replicate), "R", "HSDP meshes R x S x tp up to R replicas (default: every R that divides "
     "dp; 1: the 2D meshes dp x tp only)", 0, NULL, NULL},
    {"jobs", CLI_INT, F(jobs), "N", "processes that plan and price the cells (default: the online cores, at most 8)", 0, NULL, NULL},
    {"full-replay", CLI_ON, F(full_replay), NULL, "replay every micro-batch of every cell (slower: what extending a step "
     "from 2 and 3 micro-batches is measured against)", 0, NULL, NULL},
    {"measure", CLI_INT, F(measure), "K", "run the top K cells and K more spread through the ranking on this host with the "
     "real engine and check the ranking (Kendall's tau, the winner against the measured best)", 0, NULL, NULL},
    {"measure-reps", CLI_INT, F(measure_reps), "N", "launches of each measured cell, interleaved (default 3)", 0, NULL, NULL},
    {"measure-steps", CLI_INT, F(measure_steps), "S", "steps of each launch; the first 2 are left out (default 6)", 0, NULL, NULL},
    {"data", CLI_STR, F(data), "PATH", "the measured runs' tokens (default: data/kjv/train.bin next to this program)", 0, NULL, NULL},
    {"top", CLI_INT, F(top), "N", "rows of the ranked table in report.md (default 20)", 0, NULL, NULL},
    {"out-dir", CLI_STR, F(out_dir), "DIR", "results root: the folder is DIR/<UTC timestamp>/ (default results/tune)", 0, NULL, NULL},
    {"help", CLI_ON, F(help), NULL, "this text", 0, NULL, NULL},
};
#undef F
static const int tune_noptions = (int)(sizeof tune_options / sizeof tune_options[0]);

static void usage(void) {
    printf("usage: build/tune --model NAME|PATH [--gpu NAME | --machine NAME|FILE] --world W [--gpus-per-host N]\n"
           "                  [--max-replicate R]\n"
           "                  --seq-len T --global-batch G|--global-tokens N [--mem-budget SIZE] [--out-dir DIR]\n\n"
           "Plans and prices every cell of mesh (dp x tp, and HSDP R x S x tp) x micro-batch x accumulation x\n"
           "checkpointing x sequence parallel x reduce mode x prefetch that reaches the global batch exactly, and\n"
           "writes DIR/<UTC timestamp>/:\n"
           "cells.json, cells.csv, report.md (winner, runner-up and why; the ranked table), pareto.png, by_mesh.png.\n"
           "Each cell is `build/train --plan` with the flags of its train_plan_args column.\n\n");
    cli_usage(stdout, tune_options, tune_noptions);
    printf("\nexit codes: 0 written, 1 I/O error, 2 bad usage or input, 130 interrupted\n");
}

int main(int argc, char **argv) {
    cli_set_program("tune");
    cli_set_rank0(1);
    tune_opts o;
    tune_opts_init(&o);
    char err[2048];
    if (cli_parse(tune_options, tune_noptions, &o, NULL, argc, argv, err, sizeof err)) { cli_say("%s", err); return 2; }
    if (o.help) { usage(); return 0; }
    if (o.measure < 0 || (o.measure > 0 && o.gpu)) {
        cli_say("%s", o.measure < 0 ? "--measure must be >= 1 (cells at the top, as many spread below)"
                                    : "--measure runs the cells on this host: not with --gpu (give --machine for a GPU's ranking)");
        return 2;
    }
    if (o.measure > 0 && (o.measure_reps < 1 || o.measure_reps > TUNE_MEASURE_MAX_REPS || o.measure_steps < 3)) {
        cli_say("--measure-reps must be in 1..%d and --measure-steps >= 3 (two are left out of the median)", TUNE_MEASURE_MAX_REPS);
        return 2;
    }
    char data[4300];
    if (o.measure > 0 && !o.data) {
        char exe[4096];
        if (!catalog_exe_dir(exe, sizeof exe)) snprintf(data, sizeof data, "%.4000s/data/kjv/train.bin", exe), o.data = data;
    }
    if (o.measure > 0 && (!o.data || access(o.data, R_OK))) {
        cli_say("--data %s: cannot read it (make data writes build/data/kjv/train.bin)", o.data ? o.data : "(none)");
        return 2;
    }
    if (sweep_launch_install_signals()) { cli_say("cannot install the signal handlers"); return 1; }
    tune_space S;
    int rc = tune_space_build(&S, &o, sweep_launch_interrupted, err, sizeof err);
    if (rc == 130) { cli_say("interrupted: nothing written"); tune_space_free(&S); return 130; }
    if (rc) { cli_say("%s", err); tune_space_free(&S); return rc; }
    int *order = tune_rank(&S);
    char dir[4300], mdir[4300] = "";
    tune_measure M = {0};
    rc = order ? 0 : 1;
    if (!order) snprintf(err, sizeof err, "out of host memory for the ranking");
    if (!rc && o.measure > 0) {
        snprintf(mdir, sizeof mdir, "%.4000s/.measure.%ld.tmp", o.out_dir, (long)getpid());
        tune_measure_opts mo = {.k = o.measure, .reps = o.measure_reps, .steps = o.measure_steps, .data = o.data ? o.data : "",
                                .timeout_s = 600};
        if (sweep_mkdirs(mdir, 0755)) { snprintf(err, sizeof err, "cannot create %s", mdir); rc = 1; }
        else rc = tune_measure_run(&S, order, &mo, mdir, sweep_launch_interrupted, &M, err, sizeof err);
        if (rc) tune_rm_tree(mdir);
    }
    if (!rc) rc = tune_write(&S, order, o.measure > 0 ? &M : NULL, o.measure > 0 ? mdir : NULL, sweep_launch_interrupted, dir,
                             sizeof dir, err, sizeof err);
    if (rc && mdir[0]) tune_rm_tree(mdir);
    if (rc == 130) cli_say("interrupted: nothing written");
    else if (rc) cli_say("%s", err);
    else printf("%s\n", dir);
    tune_measure_free(&M);
    free(order);
    tune_space_free(&S);
    return rc;
}
