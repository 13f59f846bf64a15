/* bench/sweep.c — build/sweep: run one sweep spec (docs/sweeps.md). Parses the options and calls the
 * runner (core/sweep/runner.c), which launches build/train per mesh and writes the results folder.
 * Not the runner, the spec parser, process control or the outputs (core/sweep/). */
#include "core/sweep/runner.h"

#include <stdio.h>
#include <string.h>

#define EXIT_USAGE 2

static const char usage_text[] =
    "usage: build/sweep SPEC.json [--fresh] [--plan-only] [--out-dir DIR] [--dry-run] [--train PATH]\n"
    "Runs every mesh of a sweep spec (sweeps/*.json, docs/sweeps.md) with build/train and writes\n"
    "RESULTS/<name>/<UTC timestamp>/: spec.json, runner.json, runs/<mesh>.json + .log (and max-batch\n"
    "probes), summary.json, summary.csv, charts (PNG + SVG) and report.md. A grid spec (key \"axes\")\n"
    "runs one cell per mesh and combination of axis values, named like 2x4.ac=full.seq=4096, each\n"
    "with its own search, record and row (docs/grids.md).\n"
    "  --resume       (default) continue the latest folder of this name if the runner made it for the\n"
    "                 same spec, build and hosts: ok, oom and diverged runs are kept, failed and\n"
    "                 timeout runs are retried; otherwise a new folder is started (and the reason said)\n"
    "  --fresh        start a new folder even if the latest one could be resumed\n"
    "  --plan-only    launch nothing: build/train --plan per mesh, then the plan-based summary,\n"
    "                 memory and max-batch charts and report, in a new folder\n"
    "  --out-dir DIR  results root instead of the spec's results_dir (default \"results\")\n"
    "  --dry-run      check the spec and print the commands without running anything\n"
    "  --train PATH   the train program (default: train next to this binary)\n"
    "Exit: 0 sweep completed (even with failed runs), 1 I/O error, 2 bad spec, missing input file,\n"
    "usage, or the folder is in use by another runner, 130 interrupted.\n";

int main(int argc, char **argv) {
    sweep_run_opts o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            return 0;
        } else if (strcmp(a, "--fresh") == 0) o.fresh = 1;
        else if (strcmp(a, "--resume") == 0) o.fresh = 0;
        else if (strcmp(a, "--dry-run") == 0) o.dry_run = 1;
        else if (strcmp(a, "--plan-only") == 0) o.plan_only = 1;
        else if (!strncmp(a, "--out-dir", 9) || !strncmp(a, "--train", 7)) {
            /* an option with a value is given once, as build/train's (the last winning silently is refused) */
            int od = !strncmp(a, "--out-dir", 9);
            const char *rest = a + (od ? 9 : 7);
            if (*rest && *rest != '=') {
                fprintf(stderr, "sweep: unknown option %s (see --help)\n", a);
                return EXIT_USAGE;
            }
            if (od ? o.out_dir != NULL : o.train != NULL) {
                fprintf(stderr, "sweep: %s given twice: give it once\n", od ? "--out-dir" : "--train");
                return EXIT_USAGE;
            }
            if (*rest == '=') {
                if (!rest[1]) { fprintf(stderr, "sweep: %s needs a value (see --help)\n", od ? "--out-dir" : "--train"); return EXIT_USAGE; }
                if (od) o.out_dir = rest + 1;
                else o.train = rest + 1;
                continue;
            }
            if (i + 1 >= argc || !argv[i + 1][0]) {
                fprintf(stderr, "sweep: %s needs a value (see --help)\n", a);
                return EXIT_USAGE;
            }
            if (strcmp(a, "--out-dir") == 0) o.out_dir = argv[++i];
            else o.train = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "sweep: unknown option %s (see --help)\n", a);
            return EXIT_USAGE;
        } else if (o.spec_path) {
            fprintf(stderr, "sweep: one spec at a time (got %s and %s)\n", o.spec_path, a);
            return EXIT_USAGE;
        } else o.spec_path = a;
    }
    if (!o.spec_path) {
        fprintf(stderr, "sweep: missing SPEC.json (usage: build/sweep SPEC.json [--fresh] [--out-dir DIR] [--dry-run])\n");
        return EXIT_USAGE;
    }
    return sweep_run(&o);
}
