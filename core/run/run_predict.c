/* core/run/run_predict.c — a run's own prediction (see run_predict.h). */
#include "core/run/run_predict.h"
#include "core/job/catalog.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

int run_predict_resolve(run_prediction *p, const char *machine, const char *gpu, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    char dir[4096];
    int rc = cost_machine_resolve(machine, gpu, catalog_exe_dir(dir, sizeof dir) ? NULL : dir, &p->m, &p->from, err, errlen);
    if (rc < 0) return -1;
    p->have = rc > 0;
    return 0;
}

void run_predict_device(run_prediction *p, const char *device_name) {
    if (p->have || !device_name) return;
    const catalog_gpu *g = catalog_gpu_of_device(device_name);
    if (g && cost_machine_shipped(g->name, &p->m) == 0) {
        p->have = 1;
        p->from = "shipped";
    }
}

void run_predict_step(run_prediction *p, const model_config *cfg, int world, int tp, dtype_t dtype, const model_opts *mo,
                      int ranks_per_host) {
    if (!p->have) return;
    cost_req q = {.cfg = cfg, .world = world, .tp = tp, .mo = *mo, .dtype = dtype, .ranks_per_host = ranks_per_host,
                  .m = &p->m};
    cost_prediction cp;
    char err[512];
    if (cost_predict(&q, &cp, err, sizeof err)) {
        snprintf(p->error, sizeof p->error, "%s", err);
        return;
    }
    p->step_ms = cp.r.step_ms;
    p->time = cost_prediction_json(&cp, &p->m, p->from);
}

void run_predict_progress(const run_prediction *p, char *out, size_t cap) {
    if (!p->have) { if (cap) out[0] = 0; return; }
    if (p->step_ms > 0) snprintf(out, cap, " | predicted step %.2f ms (machine %s)", p->step_ms, p->m.name);
    else snprintf(out, cap, " | no predicted step: %.500s", p->error[0] ? p->error : "not predicted");
}

void run_predict_summary(const run_prediction *p, json_t *summary, double med) {
    int ok = p->step_ms > 0;
    json_object_set_new(summary, "predicted_step_ms", ok ? json_real(p->step_ms) : json_null());
    json_object_set_new(summary, "prediction_error", ok && med > 0 && isfinite(med) ? json_real(p->step_ms / med - 1) : json_null());
    json_object_set_new(summary, "prediction_machine", p->have ? json_string(p->m.name) : json_null());
    if (p->have && !ok) json_object_set_new(summary, "prediction_note", json_string(p->error[0] ? p->error : "not predicted"));
}

void run_predict_free(run_prediction *p) {
    if (p->have) cost_machine_free(&p->m);
    json_decref(p->time);
    memset(p, 0, sizeof *p);
}
