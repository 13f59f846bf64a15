/* core/plan.h — the memory plan (design 6): the engine's own allocation sequence for one training
 * step (model state, forward, backward, optimizer) replayed through ops_null and null communicators,
 * for any mesh and any rank, in one process, without allocating or computing. Because it is the
 * same code path as training, the planned peak equals the measured tracked peak byte for byte. */
#ifndef MESHSWEEP_PLAN_H
#define MESHSWEEP_PLAN_H
#include "core/mem.h"
#include "core/model.h"

/* Plan rank `rank` of a world of `world` ranks with tensor parallel degree tp. Returns -1 with a
 * message on an invalid shape. *out receives the statistics (peaks, and the first over-budget
 * allocation if budget > 0 and it was passed). */
int plan_rank(const model_config *cfg, int world, int tp, int rank, const model_opts *o, uint64_t budget,
              mem_stats *out, char *err, size_t errlen);
/* Max over all ranks of the planned total peak; *worst gets the most loaded rank. */
int plan_world(const model_config *cfg, int world, int tp, const model_opts *o, uint64_t budget,
               mem_stats *worst_stats, int *worst, char *err, size_t errlen);
/* Largest B (sequences per DP rank) whose planned peak fits the budget on every rank; 0 if none. */
int plan_max_batch(const model_config *cfg, int world, int tp, const model_opts *o, uint64_t budget,
                   char *err, size_t errlen);

/* The --plan report of build/train: one table row per rank (MiB per category and peak) and the most
 * loaded rank on stdout, the record (schema meshsweep.plan/1) at out if set; with max_batch the largest
 * batch that fits the budget first. Messages go through cli_say. Returns the exit code: 0 fits,
 * 1 record not written, 2 bad configuration, 3 does not fit the budget. */
typedef struct plan_req {
    const model_config *cfg;
    int world, tp;
    model_opts mo;        /* mo.B: the batch (ignored with max_batch), mo.T: the sequence length */
    int max_batch;        /* --batch-size max: search the largest batch (needs budget) */
    uint64_t budget;      /* bytes per rank, 0: none */
    const char *dtype;    /* fp32 or bf16, as printed and recorded */
    const char *out;      /* JSON record path or NULL */
} plan_req;
int plan_report(const plan_req *q);
#endif
