/* bench/calibrate.c — measure this machine for the step-time model (docs/cost-model.md; `make calibrate`):
 * `mpirun -np W build/calibrate [--spec sweeps/NAME.json ...] [--out FILE]` writes the machine file the
 * plans and runs of this host predict with (by default build/machines/HOST-Nc.json next to this binary);
 * `--check FILE` re-measures a few of its points and says how far the machine has drifted from it.
 * This file is the option table and main; the measuring is core/cost/calib_run.c.
 * Exit codes: 0 ok, 1 failed, 2 bad usage or input. */
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/common/cli.h"
#include "core/common/files.h"
#include "core/cost/calib_run.h"
#include "core/cost/predict.h"
#include "core/job/catalog.h"
#include "core/engine/comm.h"
#include "core/sweep/calib_spec.h"
#include "core/sweep/spec.h"
#include "kernels/kernels.h"
#ifdef MESHSWEEP_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

typedef struct opts {
    const char *out, *spec, *check, *backend, *dtype, *build, *model;
    int quick, verbose, help, tp, batch, seq_len, force, no_coll;
} opts;

#define F(x) offsetof(opts, x)
static const cli_opt OPTS[] = {
    {"spec", CLI_STR, F(spec), "FILE[,FILE...]", "sweep specs whose steps are measured (their GEMM shapes, ops and "
     "collective sizes, and rank 0's step of each mesh replayed in order for the sequence factor; at most 8, comma-separated)", 0, NULL, NULL},
    {"out", CLI_STR, F(out), "FILE", "the machine file (default: machines/HOST-Nc.json next to this program); with "
     "--check: the check's record (default: stdout)", 0, NULL, NULL},
    {"model", CLI_STR, F(model), "NAME|PATH", "also measure the step of one run of this model (with --tp, --batch-size, "
     "--seq-len; the world is the MPI world)", 0, NULL, NULL},
    {"tp", CLI_INT, F(tp), "N", "that run's tensor-parallel degree (default 1)", 0, NULL, NULL},
    {"batch-size", CLI_INT, F(batch), "N", "that run's sequences per DP rank (default 1)", 0, NULL, NULL},
    {"seq-len", CLI_INT, F(seq_len), "T", "that run's sequence length (default 128)", 0, NULL, NULL},
    {"check", CLI_STR, F(check), "FILE", "re-measure a few points of this machine file and report the drift", 0, NULL, NULL},
    {"backend", CLI_STR, F(backend), "cpu|cuda", "the backend whose ops are measured (default cpu)", 0, NULL, NULL},
    {"dtype", CLI_STR, F(dtype), "fp32|bf16", "compute precision measured (default: fp32 on cpu, bf16 on cuda)", 0, NULL, NULL},
    {"build", CLI_STR, F(build), "TEXT", "build identity recorded in the file (default: the compiler)", 0, NULL, NULL},
    {"force", CLI_ON, F(force), NULL, "calibrate even on a loaded host (the file records that it was forced, with the load); "
     "without it a host whose load average or timing spread is beyond the limits of docs/cost-model.md is refused", 0, NULL, NULL},
    {"no-collectives", CLI_ON, F(no_coll), NULL, "measure no collectives (the file gets a placeholder that predicts none "
     "truly); needed to write this host's default machine file from one rank", 0, NULL, NULL},
    {"quick", CLI_ON, F(quick), NULL, "a tiny grid with short timings (seconds; for tests, not for predictions)", 0, NULL, NULL},
    {"verbose", CLI_INT, F(verbose), "N", "1: a line per replayed step and per collective kind and group; 2: a line per op", 0, NULL, NULL},
    {"help", CLI_ON, F(help), NULL, "this text", 0, NULL, NULL},
};
#undef F
#define NOPTS (int)(sizeof OPTS / sizeof OPTS[0])

static int pick_ops(const opts *o, const ops_t **ops) {
    *ops = &ops_cpu;
    if (!strcmp(o->backend, "cpu")) {
        if (o->dtype && strcmp(o->dtype, "fp32")) { cli_say("--dtype %s needs --backend cuda", o->dtype); return 2; }
        return 0;
    }
    if (strcmp(o->backend, "cuda")) { cli_say("--backend must be cpu or cuda (got '%s')", o->backend); return 2; }
#ifdef MESHSWEEP_CUDA
    if (cuda_device_count() <= 0) { cli_say("--backend cuda: no CUDA device found"); return 1; }
    *ops = o->dtype && !strcmp(o->dtype, "fp32") ? &ops_cuda : &ops_cuda_bf16;
    return 0;
#else
    cli_say("--backend cuda: this build has no CUDA backend");
    return 2;
#endif
}

/* --spec A,B,...: every name non-empty (a doubled, leading or trailing comma is refused), at most 8 */
static int split_specs(const char *arg, const char **specs, int *n) {
    static char list[8192];
    if (strlen(arg) >= sizeof list) { cli_say("--spec: the list is too long"); return -1; }
    snprintf(list, sizeof list, "%s", arg);
    *n = 0;
    for (char *p = list;;) {
        char *c = strchr(p, ',');
        if (c) *c = 0;
        if (!*p) { cli_say("--spec '%s': an empty name (a leading, trailing or doubled comma)", arg); return -1; }
        if (*n == 8) { cli_say("--spec: at most 8 specs"); return -1; }
        specs[(*n)++] = p;
        if (!c) return 0;
        p = c + 1;
    }
}

static int has_control(const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f) return 1;
    return 0;
}

/* After MPI starts, before anything is measured: a single rank would replace this host's machine file
 * with one without collectives; the output must be writable now, not after the measurement. Every rank
 * gets rank 0's answer; 2 when refused (one line, rank 0). */
static int check_outputs(const opts *o, const char *out, int is_default, int world, int rank) {
    int bad = 0;
    if (world == 1 && !o->check && is_default && !o->no_coll) {
        cli_say("one rank measures no collectives: this host's machine file %s would lose them (run under mpirun -np N, "
                "or give --no-collectives, or --out FILE)", out);
        return 2;
    }
    if (rank == 0 && out) {
        char err[512];
        if (!o->check && is_default) {   /* the default folder, made if missing */
            char dir[4200];
            snprintf(dir, sizeof dir, "%s", out);
            char *slash = strrchr(dir, '/');
            if (slash) *slash = 0;
            mkdir(dir, 0755);
        }
        if (files_check_writable(out, err, sizeof err)) { cli_say("--out: %s", err); bad = 2; }
    }
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return bad;
}

int main(int argc, char **argv) {
    opts o = {.backend = "cpu", .tp = 1, .batch = 1, .seq_len = 128};
    char err[512];
    cli_set_program("calibrate");
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    cli_set_rank0(!r || !strcmp(r, "0"));
    if (cli_parse(OPTS, NOPTS, &o, NULL, argc, argv, err, sizeof err)) { cli_say("%s", err); return 2; }
    if (o.tp < 1 || o.batch < 1 || o.seq_len < 1) { cli_say("--tp, --batch-size and --seq-len must be >= 1"); return 2; }
    if (o.help) {
        if (!r || !strcmp(r, "0")) {
            printf("usage: mpirun -np W build/calibrate [--spec FILE ...] [--out FILE]\n"
                   "       mpirun -np W build/calibrate --check FILE [--out FILE]\n\n");
            cli_usage(stdout, OPTS, NOPTS);
        }
        return 0;
    }
    const ops_t *ops;
    int rc = pick_ops(&o, &ops);
    if (rc) return rc;
    char path[4200];
    const char *out = o.out;
    if (!out && !o.check) {
        char dir[4096];
        if (catalog_exe_dir(dir, sizeof dir) || catalog_machine_path(dir, path, sizeof path)) {
            cli_say("cannot name the default machine file: give --out FILE");
            return 2;
        }
        out = path;
    }
    /* the check reads the machine file: writing its record over it would destroy the calibration */
    if (o.check && out && files_same(o.check, out)) {
        cli_say("--out %s is the machine file --check reads: its record would replace the calibration", out);
        return 2;
    }
    const char *specs[8];
    int nspecs = 0;
    if (o.spec && split_specs(o.spec, specs, &nspecs)) return 2;
    if (o.build && has_control(o.build)) { cli_say("--build: a newline or control character in the build identity"); return 2; }
    for (int i = 0; i < nspecs; i++) {   /* a bad spec is found before MPI starts: one line, exit 2 on every rank */
        sweep_spec s;
        if (sweep_spec_load(specs[i], &s, err, sizeof err)) { cli_say("%s: %s", specs[i], err); return 2; }
        sweep_spec_free(&s);
    }
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    cli_set_rank0(rank == 0);
    int world;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    rc = check_outputs(&o, out, out == path, world, rank);
    if (rc) { MPI_Finalize(); return rc; }
    cpu_blas_init();
    cost_calib_opts co = {.ops = ops, .out = out, .quick = o.quick, .verbose = o.verbose, .build = o.build,
                          .check = o.check, .model = o.model, .tp = o.tp, .batch = o.batch, .seq_len = o.seq_len,
                          .force = o.force, .no_collectives = o.no_coll};
    for (int i = 0; i < nspecs; i++) co.specs[co.nspecs++] = specs[i];
    co.add_spec = sweep_calib_workload;
#ifdef MESHSWEEP_CUDA
    if (ops != &ops_cpu) {   /* one device per local rank, as build/train picks it */
        int lr, ls;
        comm_local_rank(&lr, &ls);
        if (cuda_select_device(lr, err, sizeof err)) { cli_say("%s", err); MPI_Abort(MPI_COMM_WORLD, 1); }
    }
#endif
    rc = o.check ? cost_check(&co) : cost_calibrate(&co);
    MPI_Finalize();
    return rc;
}
