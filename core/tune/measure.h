/* core/tune/measure.h — `build/tune --measure K` (docs/tune.md): the top K cells and K more spread through the
 * ranking (by rank: evenly spaced over the rest) run with the real engine on this host, each launched
 * `reps` times, the cells interleaved within each round (mpirun through the sweep's launcher, one record
 * per launch); per cell the median step and its spread, Kendall's tau between the predicted and the
 * measured order, and whether the predicted winner is the measured best or within its spread. A launch
 * that fails or runs past its timeout is recorded as such and the rest go on. Not the ranking
 * (core/tune/report.h). */
#ifndef MESHSWEEP_TUNE_MEASURE_H
#define MESHSWEEP_TUNE_MEASURE_H
#include <stddef.h>

#include "core/tune/space.h"

#define TUNE_MEASURE_MAX_REPS 16
typedef struct tune_measured {
    int cell;                          /* index in S->cells */
    int n_ok;                          /* launches that ended with a record of status ok */
    double ms[TUNE_MEASURE_MAX_REPS];  /* each ok launch's median step (ms) */
    double median, lo, hi;             /* over the ok launches */
    char failed[96];                   /* the last failure, "" when none */
} tune_measured;

typedef struct tune_measure {
    int n, reps, steps;
    tune_measured *m;
    int n_used;                        /* cells with at least one ok launch: what tau is over */
    double tau;                        /* Kendall's tau-a, predicted against measured step */
    int best;                          /* index in m of the measured best */
    double winner_err;                 /* the predicted winner's measured median / the best's − 1 */
    int winner_within;                 /* the winner is the best, or its spread meets the best's */
} tune_measure;

typedef struct tune_measure_opts { int k, reps, steps; const char *data; double timeout_s; } tune_measure_opts;

/* Run the measurement (order: the ranking, best first). 0; 2 with one line in err on bad input (no data,
 * --gpu); 130 when interrupted; the records are written under work_dir. */
int tune_measure_run(const tune_space *S, const int *order, const tune_measure_opts *o, const char *work_dir,
                     int (*interrupted)(void), tune_measure *out, char *err, size_t errlen);
void tune_measure_free(tune_measure *M);
#endif
