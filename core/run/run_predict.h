/* core/run/run_predict.h — the step-time prediction a run records next to what it measures (docs/cost-model.md):
 * the machine is resolved before MPI starts (a bad --machine is exit 2 on every rank), the step is
 * predicted on rank 0 before the engine allocates anything (and said on the first progress line) (the prediction replays the step through
 * core/engine/mem's planning mode, as the budget gate does), and the record's summary gets
 * predicted_step_ms, prediction_error (= predicted / measured median − 1) and prediction_machine, and
 * the record a "prediction" object (core/cost/predict.h's "time"). Not the model (core/cost/). */
#ifndef MESHSWEEP_RUN_PREDICT_H
#define MESHSWEEP_RUN_PREDICT_H
#include <jansson.h>
#include "core/cost/predict.h"

typedef struct run_prediction {
    int have;               /* a machine was found */
    cost_machine m;
    const char *from;       /* calibrated, shipped, file */
    double step_ms;         /* predicted; 0 when not predicted */
    json_t *time;           /* the prediction's "time" object, or NULL */
    char error[512];        /* why there is no prediction although there is a machine */
} run_prediction;

/* --machine / --gpu / this host's calibration (cost_machine_resolve); 0 (a machine or none) or -1 with
 * one line in err */
int run_predict_resolve(run_prediction *p, const char *machine, const char *gpu, char *err, size_t errlen);
/* CUDA runs without a machine: the shipped model of the device (by the name the runtime gives) */
void run_predict_device(run_prediction *p, const char *device_name);
/* rank 0, before the model is built: predict the step of this run, computing in dtype (a planner's replay
 * with an engine of its own) */
void run_predict_step(run_prediction *p, const model_config *cfg, int world, int tp, dtype_t dtype, const model_opts *mo,
                      int ranks_per_host);
/* " | predicted step 12.34 ms (machine NAME)" (or why there is none) for the first progress line; "" without a
 * machine */
void run_predict_progress(const run_prediction *p, char *out, size_t cap);
/* summary.predicted_step_ms, summary.prediction_error, summary.prediction_machine (null when none) */
void run_predict_summary(const run_prediction *p, json_t *summary, double measured_median_ms);
void run_predict_free(run_prediction *p);
#endif
