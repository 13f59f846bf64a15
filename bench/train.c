/* bench/train.c — one training run of one mesh (`mpirun -np W build/train --tp T ...`), or its memory
 * plan without running (`build/train --plan --world W ...`). This file is main: the option table, its
 * parser and the checks are core/job (job.h); the run itself (setup, step loop, evaluation, metrics,
 * the record of docs/formats.md) is core/run/run, the plan report core/engine/plan, --init/--save core/run/checkpoint.
 * Exit codes: 0 ok, 1 failed, 2 bad usage or configuration, 3 out of memory budget, 4 diverged. */
#include <stddef.h>
#include <stdio.h>

#include "core/common/cli.h"
#include "core/job/job.h"
#include "core/run/run.h"

static void usage(void) {
    printf("usage: [mpirun -np W] build/train [options]\n       build/train --plan --world W [options]\n\n");
    job_usage(stdout);
    printf("\nexit codes: 0 ok, 1 failed, 2 bad usage or configuration, 3 out of memory budget, 4 diverged\n");
}

int main(int argc, char **argv) {
    job_t j;
    int rank0 = run_env_rank0();
    cli_set_program("train"); cli_set_rank0(rank0);
    char err[256];
    run_result res;
    if (job_parse(&j, argc, argv, err, sizeof err)) {
        if (!run_env_launched()) { cli_say("%s", err); return 2; }
        return run_train(&j, err, &res); /* the other ranks may have parsed theirs: every rank leaves together */
    }
    if (j.o.help) { if (rank0) usage(); return 0; }
    if (j.o.plan) return run_plan(&j);
    return run_train(&j, NULL, &res);
}
