/* core/engine/plan.c — the memory plan (see plan.h): one rank, the worst rank, the largest batch that fits.
 * Not the --plan report (core/run/plan_report.c). */
#include "core/engine/plan.h"
#include "core/engine/optim.h"
#include <string.h>

int plan_rank(const engine_t *E, const model_config *cfg, int world, int tp, int rank, const model_opts *o, uint64_t budget,
              mem_stats *out, char *err, size_t errlen) {
    mesh_t m;
    if (mesh_init_hsdp(&m, world, rank, o->replicate > 1 ? o->replicate : 1, tp, err, errlen)) return -1;
    /* the planner's own engine: its arena is not the one of a live engine in this process */
    engine_t P;
    engine_init_plan(&P, E->dtype, budget);
    engine_set_trace(&P, E->trace);   /* the replay records into the planned engine's recorder */
    const ops_trace *was = ops_null_bind(P.trace ? P.trace->ops : NULL);
    comm_group tpg, shg, repg, wg;
    comm_null_group(&tpg, &P.comm, m.tp, m.tp_rank);
    comm_null_group(&shg, &P.comm, m.shard, m.shard_rank);   /* FSDP shards over S (= dp when R = 1) */
    comm_null_group(&repg, &P.comm, m.rep, m.rep_rank);
    comm_null_group(&wg, &P.comm, m.world, m.rank);
    model_t M;
    int rc = model_init(&M, &P, cfg, &m, &tpg, &shg, o, err, errlen);
    if (rc == 0) {
        M.fsdp.rep = &repg;
        /* the step as build/train runs it (core/run/run.c): every micro-batch, then the optimizer */
        int n = model_micro_batches(o);
        for (int k = 0; k < n; k++) {
            model_accum_begin(&M, k, n);
            model_forward_backward(&M, NULL, NULL, 1.0f);
        }
        optim_cfg oc = {.lr = 0, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
        optim_step(&M, &wg, &oc, 0, 1, NULL);
        *out = *mem_get_stats(&P.mem);
    }
    model_free(&M);
    ops_null_bind(was);
    engine_release(&P);
    return rc;
}

/* Every rank of a mesh allocates alike: FSDP pads each unit to a multiple of dp and gives every DP
 * rank an equal slice, and the TP splits are even (the divisibility checks, the padded vocabulary).
 * So the plan replays the four corner ranks (tp_rank 0 and tp-1 of dp_rank 0 and dp-1) and takes
 * their figures for every rank; only if the corners differ is every rank replayed. This keeps
 * --plan of a deep model on a large world to a few replays instead of one per rank. */
static int same_stats(const mem_stats *a, const mem_stats *b) {
    return a->total_peak == b->total_peak && !memcmp(a->peak, b->peak, sizeof a->peak) &&
           !memcmp(a->at_peak, b->at_peak, sizeof a->at_peak) && a->over_budget == b->over_budget &&
           a->overflow == b->overflow;
}

int plan_world_ranks(const engine_t *E, const model_config *cfg, int world, int tp, const model_opts *o, uint64_t budget,
                     mem_stats *per_rank, mem_stats *worst_stats, int *worst, char *err, size_t errlen) {
    *worst = -1;
    mesh_t m;
    if (mesh_init_hsdp(&m, world, 0, o->replicate > 1 ? o->replicate : 1, tp, err, errlen)) return -1;
    int corner[4] = {0, m.tp - 1, world - m.tp, world - 1}, uniform = 1;
    mem_stats cs[4];
    for (int k = 0; k < 4; k++) {
        int same = -1;   /* tp 1 or dp 1: a corner named twice is replayed once */
        for (int j = 0; j < k && same < 0; j++) if (corner[j] == corner[k]) same = j;
        if (same >= 0) cs[k] = cs[same];
        else if (plan_rank(E, cfg, world, tp, corner[k], o, budget, &cs[k], err, errlen)) return -1;
        uniform &= same_stats(&cs[0], &cs[k]);
    }
    for (int r = 0; r < world; r++) {
        mem_stats s = cs[0];
        if (!uniform && plan_rank(E, cfg, world, tp, r, o, budget, &s, err, errlen)) return -1;
        if (per_rank) per_rank[r] = s;
        if (*worst < 0 || s.total_peak > worst_stats->total_peak || (s.overflow && !worst_stats->overflow)) { *worst_stats = s; *worst = r; }
        if (uniform && !per_rank) break; /* rank 0 stands for all */
    }
    return 0;
}

int plan_world_corners(const mem_stats cs[4], mem_stats *worst_stats, int *worst) {
    for (int k = 1; k < 4; k++) if (!same_stats(&cs[0], &cs[k])) return 0;
    *worst_stats = cs[0], *worst = 0;   /* as plan_world_ranks: rank 0 stands for all */
    return 1;
}

int plan_world(const engine_t *E, const model_config *cfg, int world, int tp, const model_opts *o, uint64_t budget,
               mem_stats *worst_stats, int *worst, char *err, size_t errlen) {
    return plan_world_ranks(E, cfg, world, tp, o, budget, NULL, worst_stats, worst, err, errlen);
}

static int fits(const engine_t *E, const model_config *cfg, int world, int tp, const model_opts *o, int B, uint64_t budget,
                char *err, size_t errlen) {
    model_opts x = *o; x.B = B;
    mem_stats s = {0}; int w;
    if (plan_world(E, cfg, world, tp, &x, budget, &s, &w, err, errlen)) return -1;
    return !s.overflow && s.total_peak <= budget;
}

int plan_max_batch(const engine_t *E, const model_config *cfg, int world, int tp, const model_opts *o, uint64_t budget,
                   char *err, size_t errlen) {
    /* the engine's own limits: --batch-size up to PLAN_MAX_BATCH and B*T up to PLAN_MAX_TOKENS */
    int cap = PLAN_MAX_BATCH;
    if (o->T > 0 && PLAN_MAX_TOKENS / o->T < cap) cap = (int)(PLAN_MAX_TOKENS / o->T);
    if (cap < 1) return 0;
    int f = fits(E, cfg, world, tp, o, 1, budget, err, errlen);
    if (f <= 0) return f < 0 ? -1 : 0;
    int lo = 1, hi = 2; /* lo fits; find hi that does not */
    for (;;) {
        if (hi > cap) hi = cap;
        if (hi <= lo) return lo;
        f = fits(E, cfg, world, tp, o, hi, budget, err, errlen);
        if (f < 0) return -1;
        if (!f) break;
        lo = hi;
        if (lo == cap) return lo;
        hi = lo > cap / 2 ? cap : lo * 2;
    }
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        f = fits(E, cfg, world, tp, o, mid, budget, err, errlen);
        if (f < 0) return -1;
        if (f) lo = mid; else hi = mid;
    }
    return lo;
}

/* The memory of a step depends on the micro-batch b and, with --accum-reduce last, on whether there is
 * more than one micro-batch (the unsharded gradients are then held through the later forwards); with
 * --accum-reduce each not at all on their number. So the step of one micro-batch (b = per_rank) is
 * planned by itself, and below it the largest batch that fits with two micro-batches stands for every
 * count from two on: the largest divisor of per_rank up to it is the answer. */
int plan_max_micro_batch(const engine_t *E, const model_config *cfg, int world, int tp, const model_opts *o, int per_rank,
                         uint64_t budget, char *err, size_t errlen) {
    int cap = PLAN_MAX_BATCH;
    if (o->T > 0 && PLAN_MAX_TOKENS / o->T < cap) cap = (int)(PLAN_MAX_TOKENS / o->T);
    model_opts x = *o;
    x.grad_accum = 1;
    if (per_rank <= cap) {
        int f = fits(E, cfg, world, tp, &x, per_rank, budget, err, errlen);
        if (f) return f < 0 ? -1 : per_rank;
    }
    x.grad_accum = 2;
    int b = plan_max_batch(E, cfg, world, tp, &x, budget, err, errlen);
    if (b < 0) return -1;
    if (b >= per_rank) b = per_rank - 1;
    /* the fewest micro-batches n (two or more) that divide per_rank into micro-batches of at most b */
    for (int n = 2; n <= per_rank && n <= PLAN_MAX_GRAD_ACCUM; n++)
        if (per_rank % n == 0 && per_rank / n <= b) return per_rank / n;
    return 0;
}
