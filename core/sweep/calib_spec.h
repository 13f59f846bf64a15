/* core/sweep/calib_spec.h — the steps a sweep spec will run, as a calibration's workload: every mesh
 * of the spec (its batch: the plan's max under its budget, or as given) recorded from the engine for
 * rank 0 and the last rank. build/calibrate --spec hands it to the cost floor (cost_calib_opts.add_spec),
 * which knows nothing of sweeps. */
#ifndef MESHSWEEP_SWEEP_CALIB_SPEC_H
#define MESHSWEEP_SWEEP_CALIB_SPEC_H
#include "core/cost/calibrate.h"
#include <stddef.h>
/* -1 with a message naming the spec */
int sweep_calib_workload(cost_workload *w, const char *spec_path, char *err, size_t errlen);
#endif
