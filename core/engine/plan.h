/* core/engine/plan.h — the memory plan (docs/memory.md): the engine's own allocation sequence for one training
 * step (model state, forward, backward, optimizer) replayed through ops_null and null communicators,
 * for any mesh and any rank, in one process, without allocating or computing. Because it is the
 * same code path as training, the planned peak equals the measured tracked peak byte for byte.
 * Each replay runs in a planner engine of its own (core/engine/engine.h), made like the engine E it
 * plans for (its compute precision), so planning beside a live engine leaves it untouched.
 * Not the --plan report (core/run/plan_report.h). */
#ifndef MESHSWEEP_PLAN_H
#define MESHSWEEP_PLAN_H
#include "core/engine/mem.h"
#include "core/engine/limits.h"
#include "core/engine/model.h"

/* Plan rank `rank` of a world of `world` ranks with tensor parallel degree tp. Returns -1 with a
 * message on an invalid shape. *out receives the statistics (peaks, and the first over-budget
 * allocation if budget > 0 and it was passed). */
int plan_rank(const engine_t *E, const model_config *cfg, int world, int tp, int rank, const model_opts *o, uint64_t budget,
              mem_stats *out, char *err, size_t errlen);
/* Max over all ranks of the planned total peak; *worst gets the most loaded rank. */
int plan_world(const engine_t *E, const model_config *cfg, int world, int tp, const model_opts *o, uint64_t budget,
               mem_stats *worst_stats, int *worst, char *err, size_t errlen);
/* The same with every rank's statistics in per_rank[world] (when not NULL). Ranks allocate alike, so
 * four corner ranks are replayed and stand for all unless they differ (then every rank is). */
int plan_world_ranks(const engine_t *E, const model_config *cfg, int world, int tp, const model_opts *o, uint64_t budget,
                     mem_stats *per_rank, mem_stats *worst_stats, int *worst, char *err, size_t errlen);
/* plan_world_ranks's answer from its four corners' statistics when another replay already gave them (cs[k] of
 * ranks 0, tp-1, world-tp, world-1, e.g. cost_predict_mem's): 1 with *worst_stats, *worst set when the corners
 * are alike (they stand for every rank), 0 when they differ (then plan_world_ranks replays every rank). */
int plan_world_corners(const mem_stats cs[4], mem_stats *worst_stats, int *worst);
/* Largest B (sequences per DP rank) within those limits whose planned peak fits the budget on every rank; 0 if none. */
int plan_max_batch(const engine_t *E, const model_config *cfg, int world, int tp, const model_opts *o, uint64_t budget,
                   char *err, size_t errlen);
/* Largest micro-batch b dividing per_rank (sequences per DP rank and step: the global batch / dp) whose
 * step of per_rank / b micro-batches (o->accum_reduce_last as given) fits the budget on every rank; 0 if
 * none. Within the limits above (b, and per_rank / b up to PLAN_MAX_GRAD_ACCUM). */
int plan_max_micro_batch(const engine_t *E, const model_config *cfg, int world, int tp, const model_opts *o, int per_rank,
                         uint64_t budget, char *err, size_t errlen);
#endif
