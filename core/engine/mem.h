/* core/engine/mem.h — the one allocator for every engine buffer on the compute device (docs/memory.md), as a
 * value: an arena. Each allocation is tagged with a category; current and peak bytes are tracked per
 * category and for the total (the peak of the sum, not the sum of peaks). A plan arena allocates
 * nothing: mem_alloc returns distinct fake addresses that are never dereferenced (the model runs
 * through ops_null), so `--plan` replays the exact allocation sequence of a real step. Arenas are
 * independent: a plan arena and a live one coexist in one process (the budget gate plans while the
 * run's engine exists; core/engine/engine.h holds the arena of each engine).
 * Not here: host-side buffers of the data loader and checkpoint I/O (they never touch the device). */
#ifndef MESHSWEEP_MEM_H
#define MESHSWEEP_MEM_H
#include <stddef.h>
#include <stdint.h>
#include "core/engine/mem_categories.h"
#include "kernels/kernels.h"


typedef struct mem_stats {
    uint64_t cur[MEM_NCAT], peak[MEM_NCAT];
    uint64_t total_cur, total_peak;
    uint64_t at_peak[MEM_NCAT];    /* the categories at the moment of the total peak (they sum to it) */
    uint64_t budget;               /* 0 = none */
    /* the first allocation that would have passed the budget (over_budget != 0) */
    int over_budget;
    mem_cat oom_cat;
    uint64_t oom_bytes, oom_in_use, oom_peak_before;
    /* plan mode: the sum of live bytes would have passed MEM_PLAN_CAP; from then on allocations
     * count nothing, so the figures are a lower bound and the plan cannot fit any budget */
    int overflow;
    /* the allocator itself refused (not the budget): 1 an engine buffer (oom_cat, oom_bytes) from the
     * device (the host on the CPU backend; oom_where says which), 2 host memory for the engine's own
     * bookkeeping (oom_what, oom_bytes); the oom handler is called with it set */
    int alloc_failed;
    const char *oom_where, *oom_what;
} mem_stats;
/* 4 EiB: what a plan counts at most (sums stay far from 64-bit wrap-around) */
#define MEM_PLAN_CAP ((uint64_t)1 << 62)

/* Real arenas: called when an allocation passes the budget or the device (host) refuses it
 * (s->alloc_failed); the process exits with 3 if it returns. Default: one line on stderr, exit 3. */
typedef void (*mem_oom_handler)(const mem_stats *s);

typedef struct mem_live mem_live;  /* one live allocation (mem.c) */
typedef struct mem_arena {
    const ops_t *ops;        /* real arena: dev_alloc / dev_free / zero of this table; unused when planning */
    int plan;                /* track only: nothing is allocated */
    mem_stats st;
    mem_live *tab;           /* live allocations, open addressing by address (host bookkeeping) */
    size_t cap, n;
    uintptr_t fake_next;     /* plan: the next fake address */
    mem_oom_handler oom;
} mem_arena;

/* plan != 0: track only (ops unused, may be NULL). budget 0 = unlimited. */
void mem_arena_init(mem_arena *a, const ops_t *ops, int plan, uint64_t budget);
/* Release every live allocation of the arena and its bookkeeping; init it again to reuse it. */
void mem_arena_release(mem_arena *a);
/* the budget, before the first allocation (a run's budget may be measured after its engine exists) */
void mem_set_budget(mem_arena *a, uint64_t budget);
/* h (NULL: the default) for a's allocations; a real arena given a handler is also the one the engine's
 * host bookkeeping failures are reported to (mem_host_failed) */
void mem_set_oom_handler(mem_arena *a, mem_oom_handler h);
/* Real arena: exceeding the budget is fatal (the oom handler decides how).
 * Plan arena: records the first over-budget allocation in the stats and goes on counting. */
void *mem_alloc(mem_arena *a, mem_cat c, size_t bytes);
void *mem_calloc(mem_arena *a, mem_cat c, size_t bytes);
void mem_free(mem_arena *a, void *p);
const mem_stats *mem_get_stats(const mem_arena *a);
void mem_reset_peaks(mem_arena *a);
/* the engine's host bookkeeping (fsdp, comm, the allocation table) could not get `bytes` for `what`:
 * the oom handler of the last real arena given one is called with alloc_failed = 2; then exit 3 */
_Noreturn void mem_host_failed(const char *what, size_t bytes);
/* one line for an oom the handler was called with: "out of memory budget: ...", "out of host memory: ..." */
void mem_oom_message(const mem_stats *s, char *buf, size_t len);
/* "12.3 MiB" */
void mem_format(char *buf, size_t len, uint64_t bytes);
#endif
