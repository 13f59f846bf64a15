/* core/sweep/spec.h — the sweep spec (docs/sweeps.md): strict parsing of the sweeps/ folder into a struct, and
 * the argv of one build/train launch built from it. Pure functions, no I/O except reading the spec
 * file, so the unit tests and a fuzzer can reach every error path.
 * Not the runner (bench/sweep.c), not process launching (core/sweep/launch.c), not the outputs
 * (core/sweep/report.c). */
#ifndef MESHSWEEP_SWEEP_SPEC_H
#define MESHSWEEP_SWEEP_SPEC_H
#include <stddef.h>
#include <stdint.h>

typedef struct json_t json_t;

enum sweep_batch_mode {
    SWEEP_BATCH_MAX = 1,   /* "batch_size": "max" — search the largest batch that fits mem_budget */
    SWEEP_BATCH_FIXED,     /* "batch_size": N or {"2x4": N, ...} — given per mesh */
    SWEEP_BATCH_GLOBAL,    /* "global_batch": G — batch_size = G/dp on every mesh (equivalence mode) */
    SWEEP_BATCH_MATCHED,   /* "global_batch": G with "batch_size": "max" — the largest micro-batch b that
                              fits and divides G/dp, accumulated to G (train --global-batch G) */
};

/* A cell name: the mesh, then ".SHORT=VALUE" per axis ("2x4.ac=every:2.seq=4096"); one path component
 * with room for the runner's suffixes (".probe-b16777216.train.json") within NAME_MAX. */
#define SWEEP_CELL_NAME_MAX 200
#define SWEEP_MAX_AXES 8
#define SWEEP_MAX_CELLS 1024

/* One run of the sweep: a mesh, and in a grid one value of every axis (a cell). The spec's meshes[]
 * and cells[] have this type; without axes the cells are the meshes, named as the meshes. The
 * options below are what the run is launched with: the spec's top-level keys, with the cell's
 * axis values in their place. Strings point into the spec's JSON or are static. */
typedef struct sweep_mesh {
    char name[SWEEP_CELL_NAME_MAX + 1]; /* "2x4" as written in meshes[]; a grid cell "2x4.ac=full.seq=4096" */
    char mesh_name[24];    /* the mesh alone, "2x4" */
    int dp, tp;            /* dp = R·S: the data-parallel degree of the batch */
    int rep;               /* HSDP "RxSxT": R (1 on a 2D mesh "DPxTP") */
    int batch_size;        /* per DP rank; 0 in SWEEP_BATCH_MAX and SWEEP_BATCH_MATCHED (found at run time) */
    int mesh_index;        /* its mesh in the spec's meshes[] */
    int setting;           /* grid: which combination of axis values (0..n_settings-1); 0 without axes */
    int value[SWEEP_MAX_AXES];   /* grid: the index of the cell's value in each axis */
    int seq_len;
    int global_batch;      /* SWEEP_BATCH_GLOBAL and SWEEP_BATCH_MATCHED; 0 otherwise */
    const char *checkpoint_activations; /* "none" | "full" | "every:K"; NULL when not given (train's default) */
    const char *sp_activations;         /* "local" | "gathered"; NULL when not given */
    int sequence_parallel, prefetch;    /* -1 not given, 0/1 */
    const char *mem_budget;             /* as written; NULL when not given */
    uint64_t mem_budget_bytes;          /* 0 when not given or "auto" */
} sweep_mesh;

/* One axis of a grid: an option key of the spec and the values it takes, one cell per value. */
typedef struct sweep_axis_value {
    char text[48];         /* as it appears in cell names ("every:2", "4096", "on") */
    int ival;              /* integers and booleans */
    const char *sval;      /* strings (canonical: true -> "full", false -> "none" for checkpointing) */
    uint64_t bytes;        /* mem_budget */
} sweep_axis_value;

typedef struct sweep_axis {
    const char *key;       /* the spec key ("checkpoint_activations") */
    const char *short_name;/* its name in cells ("ac") */
    int n;
    sweep_axis_value *values;
} sweep_axis;

/* Strings point into `json` (the parsed document) and live as long as the spec. */
typedef struct sweep_spec {
    json_t *json;          /* the whole document: copied to spec.json, compared on resume */
    const char *name;
    int world;
    int n_meshes;
    sweep_mesh *meshes;
    const char *model;
    int seq_len, steps;         /* seq_len 0 when it is an axis (each cell has its own) */
    double lr;
    const char *mem_budget;     /* as written ("96MiB"); NULL when absent or an axis */
    uint64_t mem_budget_bytes;  /* 0 when absent or "auto" (resolved by train on the device) */
    int batch_mode;             /* enum sweep_batch_mode */
    int global_batch;           /* SWEEP_BATCH_GLOBAL / SWEEP_BATCH_MATCHED; 0 when it is an axis */
    const char *data, *eval_data;  /* eval_data NULL when absent */
    int eval_every;             /* 0 = off; defaults to steps when eval_data is given without it */
    const char *backend;        /* "cpu" | "cuda" */
    int n_launcher;
    const char **launcher;      /* may be empty: run train directly */
    double timeout_s;
    /* optional training options; has_* / -1 mean "not given: train's default" */
    int has_seed; long long seed;
    const char *schedule;
    int warmup;                 /* -1 when absent */
    int has_grad_clip; double grad_clip;
    int has_weight_decay; double weight_decay;
    int sequence_parallel, prefetch;   /* -1 absent, 0/1 */
    const char *checkpoint_activations; /* "none" | "full" | "every:K" (false/true read as none/full); NULL absent */
    int n_extra_args;
    const char **extra_args;
    const char *results_dir;    /* default "results" */
    double target_loss;         /* "seconds to reach loss X" in the report; 0: the highest final loss */
    const char *sp_activations; /* --sp-activations local|gathered; NULL when absent (train's default) */
    const char *gpu;            /* --plan --gpu NAME (plan against a named device); NULL when absent */
    /* a grid (spec key "axes"): every mesh crossed with every combination of axis values */
    int n_axes;
    sweep_axis axes[SWEEP_MAX_AXES];
    int n_settings;             /* combinations of axis values; 1 without axes */
    int n_cells;                /* n_meshes x n_settings */
    sweep_mesh *cells;          /* mesh-major, the first axis varying slowest; the runs of the sweep */
} sweep_spec;

/* Parse a spec from JSON text. `origin` names it in parse errors. On error writes one line
 * "KEY: problem" (no trailing newline) into err and returns -1; nothing is left allocated. */
int sweep_spec_parse(const char *text, sweep_spec *s, char *err, size_t errlen);
/* Read and parse a spec file; I/O errors return -2 (err says why), spec errors -1. */
int sweep_spec_load(const char *path, sweep_spec *s, char *err, size_t errlen);
void sweep_spec_free(sweep_spec *s);

/* The batch of each cell is searched (SWEEP_BATCH_MAX or SWEEP_BATCH_MATCHED), not given. */
int sweep_batch_searched(const sweep_spec *s);

/* "DPxTP": two positive decimal integers without sign, spaces or leading zeros. 0 or -1. */
int sweep_parse_mesh(const char *text, int *dp, int *tp);
/* "DPxTP" (rep 1) or the HSDP mesh "RxSxT" (dp = R·S; at most 2^20 ranks). 0 or -1. */
int sweep_parse_mesh3(const char *text, int *rep, int *dp, int *tp);
/* A sweep name that is safe as one path component: [A-Za-z0-9._-]{1,100}, not "." or "..". */
int sweep_name_valid(const char *name);

/* A growable NULL-terminated argv of owned strings. */
typedef struct sweep_argv {
    char **v;
    int n, cap;
} sweep_argv;
int sweep_argv_push(sweep_argv *a, const char *s);          /* -1 on allocation failure */
int sweep_argv_pushf(sweep_argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sweep_argv_free(sweep_argv *a);

enum sweep_launch_kind {
    SWEEP_ARGV_RUN = 1,    /* a measured run: the spec's steps, eval */
    SWEEP_ARGV_PROBE,      /* a max-batch probe: --steps 2, no eval */
    SWEEP_ARGV_PLAN,       /* build/train --plan --batch-size max (or the batch given): one process, no launcher */
    SWEEP_ARGV_CHECK,      /* the measured run's options as a plan (--plan --world W, no launcher): what train
                              refuses of a cell, found before anything is launched */
};
/* The spec key behind an option of build/train that the runner sets itself ("--tp" -> "meshes",
 * also "--tp=2"), or NULL when the option is free for extra_args. */
const char *sweep_owned_option(const char *arg);
/* The launcher is Open MPI's (mpirun, mpiexec, orterun): remote ranks get only OMPI_* variables
 * unless named with -x. */
int sweep_launcher_is_openmpi(const sweep_spec *s);
/* The launcher is Slurm's srun: it takes SIGTERM as "stop the step" (its SIGINT only reports the
 * tasks' state), so that is what the runner forwards when it is interrupted. */
int sweep_launcher_is_srun(const sweep_spec *s);
/* Build the argv of one launch: launcher (with "{world}" replaced) + train + options + --out.
 * batch_size is ignored for SWEEP_ARGV_PLAN. Every spec string is one argv element, as written. */
int sweep_train_argv(const sweep_spec *s, const sweep_mesh *m, int kind, int batch_size,
                     const char *train_path, const char *out_path, sweep_argv *a);
/* The same, with "-x NAME" after an Open MPI launcher's program for each name in forward_env
 * (NULL-terminated; NULL for none), so the variables the runner sets reach every host. */
int sweep_train_argv_env(const sweep_spec *s, const sweep_mesh *m, int kind, int batch_size,
                         const char *train_path, const char *out_path, const char *const *forward_env,
                         sweep_argv *a);
#endif
