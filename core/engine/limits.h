/* core/engine/limits.h — the engine's limits on --batch-size and on B*T tokens per rank: train checks
 * them (core/run/run.c), the planner's max-batch search stops at them (core/engine/plan.c) and so does
 * the sweep's (core/sweep/), which needs nothing else of the engine. */
#ifndef MESHSWEEP_LIMITS_H
#define MESHSWEEP_LIMITS_H
#include <stdint.h>
#define PLAN_MAX_BATCH (1 << 24)
#define PLAN_MAX_TOKENS ((int64_t)1 << 26)
#endif
