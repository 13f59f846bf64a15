/* core/plan.c — see plan.h. */
#include "core/plan.h"
#include "core/optim.h"
#include <string.h>

int plan_rank(const model_config *cfg, int world, int tp, int rank, const model_opts *o, uint64_t budget,
              mem_stats *out, char *err, size_t errlen) {
    mesh_t m;
    if (mesh_init(&m, world, rank, tp, err, errlen)) return -1;
    comm_group tpg, dpg, wg;
    comm_null_group(&tpg, m.tp, m.tp_rank);
    comm_null_group(&dpg, m.dp, m.dp_rank);
    comm_null_group(&wg, m.world, m.rank);
    mem_init(&ops_null, 1, budget);
    model_t M;
    int rc = model_init(&M, cfg, &m, &tpg, &dpg, &ops_null, o, err, errlen);
    if (rc == 0) {
        model_forward_backward(&M, NULL, NULL, 1.0f);
        optim_cfg oc = {.lr = 0, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
        optim_step(&M, &wg, &oc, 0, 1, NULL);
        *out = *mem_get_stats();
    }
    model_free(&M);
    mem_shutdown();
    return rc;
}

int plan_world(const model_config *cfg, int world, int tp, const model_opts *o, uint64_t budget,
               mem_stats *worst_stats, int *worst, char *err, size_t errlen) {
    *worst = -1;
    for (int r = 0; r < world; r++) {
        mem_stats s;
        if (plan_rank(cfg, world, tp, r, o, budget, &s, err, errlen)) return -1;
        if (*worst < 0 || s.total_peak > worst_stats->total_peak) { *worst_stats = s; *worst = r; }
    }
    return 0;
}

static int fits(const model_config *cfg, int world, int tp, const model_opts *o, int B, uint64_t budget,
                char *err, size_t errlen) {
    model_opts x = *o; x.B = B;
    mem_stats s = {0}; int w;
    if (plan_world(cfg, world, tp, &x, budget, &s, &w, err, errlen)) return -1;
    return s.total_peak <= budget;
}

int plan_max_batch(const model_config *cfg, int world, int tp, const model_opts *o, uint64_t budget,
                   char *err, size_t errlen) {
    int f = fits(cfg, world, tp, o, 1, budget, err, errlen);
    if (f <= 0) return f < 0 ? -1 : 0;
    int lo = 1, hi = 2; /* lo fits; find hi that does not */
    for (;;) {
        f = fits(cfg, world, tp, o, hi, budget, err, errlen);
        if (f < 0) return -1;
        if (!f) break;
        lo = hi;
        if (hi >= (1 << 20)) return lo;
        hi *= 2;
    }
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        f = fits(cfg, world, tp, o, mid, budget, err, errlen);
        if (f < 0) return -1;
        if (f) lo = mid; else hi = mid;
    }
    return lo;
}
