/* core/tune/report.h — what build/tune writes (docs/tune.md): the ranking of the cells, then one folder like a
 * sweep's, DIR/<UTC timestamp>/ with cells.json, cells.csv, report.md and the charts (pareto.png: predicted
 * tok/s against the peak memory, the Pareto front marked; by_mesh.png: the best tok/s of each mesh), written
 * in a hidden temp folder and renamed whole, so an interrupted tune leaves none. Not the space
 * (core/tune/space.h). */
#ifndef MESHSWEEP_TUNE_REPORT_H
#define MESHSWEEP_TUNE_REPORT_H
#include <stddef.h>

#include "core/tune/measure.h"
#include "core/tune/space.h"

/* Rank the fitting, priced cells by predicted tok/s (ties: the smaller peak first); fills cell.rank and
 * returns the cells' indices best first in *order (malloc'd, n_priced entries), or NULL */
int *tune_rank(tune_space *S);
/* Write the folder under S->o.out_dir; its path in dir. With M (--measure; NULL: none) its section of
 * report.md, measure.json, and measure_dir (the launches' records and logs) moved in as measure/. 0; 1
 * with one line in err (I/O); 130 when interrupted() became nonzero (the temp folder removed). */
int tune_write(const tune_space *S, const int *order, const tune_measure *M, const char *measure_dir, int (*interrupted)(void),
               char *dir, size_t cap, char *err, size_t errlen);
/* rm -r of a folder this program made */
void tune_rm_tree(const char *dir);
#endif
