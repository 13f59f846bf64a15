/* core/sweep/calib_spec.c — see calib_spec.h. */
#include "core/sweep/calib_spec.h"
#include "core/cost/trace.h"
#include "core/engine/plan.h"
#include "core/formats/config.h"
#include "core/job/catalog.h"
#include "core/sweep/spec.h"
#include <stdio.h>
#include <string.h>

/* the batch of one cell of the spec: its own, or (max and matched modes) the plan's largest under its budget,
 * in matched mode the largest of those that divides the cell's global batch / dp */
static int spec_batch(const sweep_spec *s, const sweep_mesh *mm, const model_config *cfg, const model_opts *o,
                      char *err, size_t errlen) {
    if (s->batch_mode != SWEEP_BATCH_MAX && s->batch_mode != SWEEP_BATCH_MATCHED) return mm->batch_size;
    if (!mm->mem_budget_bytes) {
        snprintf(err, errlen, "batch_size max needs a fixed mem_budget to be planned here (got %s)",
                 mm->mem_budget ? mm->mem_budget : "none");
        return -1;
    }
    engine_t P; /* planned for: the engine the cell runs (fp32) */
    engine_init_plan(&P, DTYPE_F32, 0);
    int b = plan_max_batch(&P, cfg, s->world, mm->tp, o, mm->mem_budget_bytes, err, errlen);
    engine_release(&P);
    if (b > 0 && s->batch_mode == SWEEP_BATCH_MATCHED && mm->global_batch > 0) {
        int per = mm->global_batch / mm->dp;
        while (b > 1 && per % b) b--;
    }
    return b < 0 ? -1 : b;
}

int sweep_calib_workload(cost_workload *w, const char *path, char *err, size_t errlen) {
    sweep_spec s;
    char e2[1024];
    if (sweep_spec_load(path, &s, e2, sizeof e2)) { snprintf(err, errlen, "%s: %s", path, e2); return -1; }
    model_config cfg;
    int rc = catalog_model(&cfg, s.model, e2, sizeof e2) || config_validate(&cfg, e2, sizeof e2);
    if (rc) snprintf(err, errlen, "%s: model: %s", path, e2);
    cost_trace t = {0};
    for (int i = 0; !rc && i < s.n_cells; i++) {
        const sweep_mesh *mm = &s.cells[i];
        /* the engine's defaults, as build/train runs the cell (fp32 on the CPU); every:K checkpointing is
         * measured as full (the same ops, more of them) */
        const char *ck = mm->checkpoint_activations;
        model_opts o = {.B = 1, .T = mm->seq_len, .sequence_parallel = mm->sequence_parallel != 0, .sp_local = 1,
                        .prefetch = mm->prefetch != 0, .checkpoint = ck && strcmp(ck, "none") != 0,
                        .attention_flash = s.backend && !strcmp(s.backend, "cuda"), .replicate = mm->rep};
        if (mm->sp_activations) o.sp_local = !strcmp(mm->sp_activations, "local");
        int b = spec_batch(&s, mm, &cfg, &o, e2, sizeof e2);
        if (b <= 0) {
            if (b < 0) { snprintf(err, errlen, "%s: mesh %s: %s", path, mm->name, e2); rc = -1; }
            continue;   /* nothing fits: that mesh runs no step */
        }
        o.B = b;
        int ranks[2] = {0, s.world - 1};
        for (int k = 0; k < 2 && !rc; k++) {
            if (cost_record_step(&cfg, s.world, mm->tp, ranks[k], DTYPE_F32, &o, &t, e2, sizeof e2)) {
                snprintf(err, errlen, "%s: mesh %s: %s", path, mm->name, e2);
                rc = -1;
            } else if (cost_workload_add(w, &t, k == 0)) {
                snprintf(err, errlen, "out of host memory");
                rc = -1;
            }
        }
    }
    cost_trace_free(&t);
    sweep_spec_free(&s);
    return rc ? -1 : 0;
}
