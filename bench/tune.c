/* bench/tune.c — build/tune: the best configuration of a model on a cluster, from every candidate's memory plan
 * and predicted step (docs/tune.md). This file is main: the options and the space are core/tune/space.h,
 * the ranking, folder, report and charts core/tune/report.h.
 * Exit codes: 0 written, 1 I/O error, 2 bad usage or input (nothing fits, no reachable cell, ...), 130
 * interrupted (no folder left). */
#include <stdio.h>
#include <stdlib.h>

#include "core/common/cli.h"
#include "core/sweep/launch.h"
#include "core/tune/report.h"
#include "core/tune/space.h"

static void usage(void) {
    printf("usage: build/tune --model NAME|PATH [--gpu NAME | --machine NAME|FILE] --world W [--gpus-per-host N]\n"
           "                  --seq-len T --global-batch G|--global-tokens N [--mem-budget SIZE] [--out-dir DIR]\n\n"
           "Plans and prices every cell of mesh (dp x tp) x micro-batch x accumulation x checkpointing x sequence\n"
           "parallel x reduce mode x prefetch that reaches the global batch exactly, and writes DIR/<UTC timestamp>/:\n"
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
    if (sweep_launch_install_signals()) { cli_say("cannot install the signal handlers"); return 1; }
    tune_space S;
    int rc = tune_space_build(&S, &o, sweep_launch_interrupted, err, sizeof err);
    if (rc == 130) { cli_say("interrupted: nothing written"); tune_space_free(&S); return 130; }
    if (rc) { cli_say("%s", err); tune_space_free(&S); return rc; }
    int *order = tune_rank(&S);
    char dir[4300];
    rc = order ? tune_write(&S, order, sweep_launch_interrupted, dir, sizeof dir, err, sizeof err) : 1;
    if (!order) snprintf(err, sizeof err, "out of host memory for the ranking");
    if (rc == 130) cli_say("interrupted: nothing written");
    else if (rc) cli_say("%s", err);
    else printf("%s\n", dir);
    free(order);
    tune_space_free(&S);
    return rc;
}
