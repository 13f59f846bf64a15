/* core/cost/predict.h — the predicted cost of one training step of a mesh (docs/cost-model.md): the step recorded
 * from the engine (core/cost/trace.h), replayed on a machine model (core/cost/timeline.h) for the ranks
 * that can differ, the slowest taken; tokens/s and MFU from it; which machine it is and where it comes
 * from (this host's calibration, a shipped GPU model, a file). Every figure here is a prediction and
 * is labelled so wherever it is shown (predicted_*, "predicted" in text). */
#ifndef MESHSWEEP_COST_PREDICT_H
#define MESHSWEEP_COST_PREDICT_H
#include <jansson.h>
#include <stdio.h>
#include "core/cost/machine.h"
#include "core/cost/timeline.h"

typedef struct cost_req {
    const model_config *cfg;
    int world, tp;
    model_opts mo;              /* mo.B, mo.T and the engine options of the step */
    dtype_t dtype;              /* its compute precision */
    int ranks_per_host;         /* 0: the machine's default (cost_default_ranks_per_host) */
    const cost_machine *m;
    /* 1: a corner rank whose TP rank an earlier corner has is not replayed again: its step and its memory
     * are that corner's (FSDP pads every shard to one size, so the ranks of one TP rank differ only in
     * where they are placed, which the timeline still prices for each; build/tune, checked cell by cell
     * against build/train --plan, which replays every corner: tests/t_tune.sh). 0: every corner replayed. */
    int share_dp_ranks;
} cost_req;

typedef struct cost_prediction {
    cost_result r;              /* of the slowest rank */
    int rank;                   /* which one */
    int ranks_per_host;
    double tokens, tok_s, tok_s_per_rank, mfu, flops_per_token;
    double mfu_causal;   /* the same tok/s with attention counted causal (half): FlashAttention's convention */
} cost_prediction;

/* Ranks per host when not given: one GPU per rank on a GPU machine (its cores_per_host, at most the
 * world), every rank on this host for a CPU machine. */
int cost_default_ranks_per_host(const cost_machine *m, int world);
int cost_predict(const cost_req *q, cost_prediction *p, char *err, size_t errlen);
/* The same, each replay of a memory plan's corner rank (tp_rank 0 and tp−1 of the first and the last DP rank:
 * ranks 0, tp−1, world−tp, world−1, plan_world_ranks's) also planning its memory under `budget`: corner[k]
 * is plan_rank's statistics of the k-th (one replay gives both; build/tune plans and prices a cell so).
 * With fewer != NULL and a step of n = 3 micro-batches, *fewer is the prediction of n - 1 from the same
 * replays, the second micro-batch's events cut out (the ones between the first and the last behave alike),
 * and *fewer_ok 1 (0 where a cut would split a started collective from its wait: price n - 1 apart then).
 * 0; -1 the step could not be recorded (err); 1 not priced (err; corner[] may be incomplete: plan the memory apart). */
int cost_predict_mem(const cost_req *q, uint64_t budget, mem_stats corner[4], cost_prediction *p, cost_prediction *fewer,
                     int *fewer_ok, char *err, size_t errlen);
/* The plan record's "time" object (new reference) */
json_t *cost_prediction_json(const cost_prediction *p, const cost_machine *m, const char *machine_from);
/* The --plan lines, every one marked predicted */
void cost_prediction_print(FILE *f, const cost_prediction *p, const cost_machine *m, const char *machine_from);

/* Which machine: `spec` (--machine NAME|FILE; "none": none), else $MESHSWEEP_MACHINE (a file; "none": none), else the shipped model
 * of `gpu` (--gpu NAME, or the CUDA device's table name), else this host's calibrated file under
 * build_dir (catalog_machine_path, core/job/catalog.h) when it exists. 1 found (*from says which: "shipped", "file",
 * "calibrated"), 0 none (no prediction), -1 bad --machine / machine file (one line in err: exit 2). */
int cost_machine_resolve(const char *spec, const char *gpu, const char *build_dir, cost_machine *m, const char **from,
                         char *err, size_t errlen);
#endif
