/* core/run/run.c — one training run of one mesh and the --plan entry; see run.h. In order: measurements
 * over ranks, the configuration checks, then the run itself in the order it happens: MPI and mesh,
 * inputs, communicators and (CUDA) the device measured for --mem-budget auto, the budget gate, the
 * engine, the step loop, the end (record, --save). The state is core/run/run_state.h, the record
 * core/run/run_record.c; the option table and --help are bench/train.c. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/job/keys.h"
#include "core/common/cleanup.h"
#include "core/common/cli.h"
#include "core/engine/comm.h"
#include "core/engine/engine.h"
#include "core/formats/config.h"
#include "core/formats/data.h"
#include "core/engine/gpus.h"
#include "core/engine/mem.h"
#include "core/engine/mesh.h"
#include "core/common/errmsg.h"
#include "core/run/agree.h"
#include "core/run/checkpoint.h"
#include "core/job/metrics.h"
#include "core/run/plan_report.h"
#include "core/run/run_predict.h"
#include "core/run/record.h"
#include "core/run/run_state.h"
#include "core/formats/safetensors.h"
#include "kernels/kernels.h"
#include "core/common/files.h"
#include "core/common/parse.h"
#include "core/job/catalog.h"

static int g_rank0 = 1;
static int g_mpi = 0;

/* one line on rank 0's stderr */
#define say cli_say

/* every rank leaves at once after MPI has started */
static _Noreturn void fail(int code) {
    if (g_mpi) MPI_Finalize();
    exit(code);
}

/* distinct host names over the world (collective) */
static json_t *gather_hosts(int world) {
    char me[64] = {0};
    if (gethostname(me, sizeof me - 1) != 0) snprintf(me, sizeof me, "unknown");
    char *all = calloc((size_t)world, sizeof me);
    json_t *a = json_array();
    if (!all) return a;
    MPI_Allgather(me, sizeof me, MPI_CHAR, all, sizeof me, MPI_CHAR, MPI_COMM_WORLD);
    for (int r = 0; r < world; r++) {
        const char *h = all + (size_t)r * sizeof me;
        int seen = 0;
        for (size_t k = 0; k < json_array_size(a); k++) seen |= !strcmp(json_string_value(json_array_get(a, k)), h);
        if (!seen) json_array_append_new(a, json_string(h));
    }
    free(all);
    return a;
}


int run_env_rank0(void) {
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r) r = getenv("PMI_RANK");
    if (!r) r = getenv("PMIX_RANK");
    return !r || !strcmp(r, "0");
}

/* ------------------------------------------------------------------ helpers */
static double measure_peak_flops(const device_t *dev) {
    /* rank 0 asks its device (on the CPU: the single-thread SGEMM rate, measured while the others
     * sleep, so the measurement is not disturbed by oversubscribed ranks spinning in a barrier) */
    double g = 0;
    if (g_rank0) g = dev->peak_flops();
    if (g_mpi) {
        MPI_Request rq; int done = 0;
        MPI_Ibcast(&g, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD, &rq);
        while (!done) { MPI_Test(&rq, &done, MPI_STATUS_IGNORE); if (!done) { struct timespec ts = {0, 2000000}; nanosleep(&ts, NULL); } }
    }
    return g;
}

/* the breakdown at the total peak of the most loaded rank */
static void at_peak_of_max_rank(const run_t *R, uint64_t at[MEM_NCAT]) {
    const mem_stats *s = mem_get_stats(&R->E.mem);
    struct { double v; int r; } in = {(double)s->total_peak, 0}, out;
    MPI_Comm_rank(MPI_COMM_WORLD, &in.r);
    MPI_Allreduce(&in, &out, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    unsigned long long v[MEM_NCAT];
    for (int c = 0; c < MEM_NCAT; c++) v[c] = s->at_peak[c];
    MPI_Bcast(v, MEM_NCAT, MPI_UNSIGNED_LONG_LONG, out.r, MPI_COMM_WORLD);
    for (int c = 0; c < MEM_NCAT; c++) at[c] = v[c];
}

static void max_mem_over_ranks(const run_t *R, uint64_t peaks[MEM_NCAT], uint64_t *total) {
    const mem_stats *s = mem_get_stats(&R->E.mem);
    unsigned long long v[MEM_NCAT + 1];
    for (int c = 0; c < MEM_NCAT; c++) v[c] = s->peak[c];
    v[MEM_NCAT] = s->total_peak;
    if (g_mpi) MPI_Allreduce(MPI_IN_PLACE, v, MEM_NCAT + 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    for (int c = 0; c < MEM_NCAT; c++) peaks[c] = v[c];
    *total = v[MEM_NCAT];
}

/* the mean eval loss; a batch that cannot be read (the file shrank: core/formats/data.h) is recorded as
 * this rank's failure and zeros are evaluated instead, so every rank runs the same collectives and the
 * caller agrees on the failure afterwards */
static double evaluate(model_t *M, data_file *d, comm_group *dpg, int nb, int32_t *in, int32_t *tg, const run_t *R) {
    double sum = 0;
    char err[1024];
    for (int k = 0; k < nb; k++)
        for (int m = 0; m < R->J.N; m++) { /* an evaluation batch is a global batch, in micro-batches as in training */
            if (data_batch(d, k, R->J.G, m * R->J.mesh.dp + R->J.mesh.dp_rank, R->J.B, R->J.T, in, tg, err, sizeof err)) agree_fail(1, "%s", err);
            sum += model_forward_loss(M, in, tg);
        }
    comm_all_reduce_sum_f64(dpg, &sum, 1);
    return sum / ((double)nb * R->J.G * R->J.T);
}


static run_t *run_new(job_t *j, const char *parse_error) {
    run_t *R = calloc(1, sizeof *R);
    if (!R) { say("out of host memory"); return NULL; }
    R->J = *j;
    R->parse_error = parse_error;
    R->rank0 = g_rank0 = run_env_rank0();
    cli_set_rank0(g_rank0);
    return R;
}

int run_plan(job_t *j) {
    run_t *R = run_new(j, NULL);
    if (!R) return 1;
    job_opts *o = &R->J.o;
    char err[4096];
    int rc = job_build(&R->J, 1, 0, err, sizeof err);
    if (rc) { say("%s", err); free(R); return rc; }
    if (job_check_outputs(&R->J, err, sizeof err)) { say("%s", err); free(R); return 2; }
    const job_budget *gb = &R->J.budget;
    if (gb->gpu) {
        char u[32], ov[32], rs[32], b[32];
        mem_format(u, sizeof u, gb->gpu->usable_bytes); mem_format(ov, sizeof ov, gb->gpu->overhead_bytes);
        mem_format(rs, sizeof rs, gb->reserve); mem_format(b, sizeof b, gb->budget);
        printf("# --gpu %s (%s): %s as the runtime reports it - %s typical runtime overhead - %s reserve = budget %s\n",
               gb->gpu->name, gb->gpu->device, u, ov, rs, b);
    }
    cost_machine mach;
    const char *from = NULL;
    char bdir[4096];
    int have = cost_machine_resolve(o->machine, o->gpu, catalog_exe_dir(bdir, sizeof bdir) ? NULL : bdir, &mach, &from,
                                    err, sizeof err);
    if (have < 0) { say("%s", err); free(R); return 2; }
    engine_t P; /* what is planned for: an engine computing in --dtype */
    engine_init_plan(&P, R->J.dtype, 0);
    plan_req q = {.cfg = &R->J.cfg, .world = o->world, .tp = o->tp, .mo = R->J.mo, .max_batch = R->J.max_batch,
                  .budget = gb->budget, .E = &P, .out = o->out, .machine = have ? &mach : NULL,
                  .machine_from = from, .ranks_per_host = o->gpus_per_host, .global_batch = o->global_batch};
    q.mo.grad_accum = o->grad_accum; /* as given: the report derives the micro-batches per mesh and batch */
    rc = plan_report(&q);
    engine_release(&P);
    if (have) cost_machine_free(&mach);
    free(R);
    return rc;
}

/* ------------------------------------------------------------------ the run */
/* the compute backend of a run (the checks of the options are job_build's); 0 or the exit code with its
 * line in R->why */
#define BAD(...) do { snprintf(R->why, sizeof R->why, __VA_ARGS__); return 2; } while (0)
static int pick_backend(run_t *R) {
    job_opts *o = &R->J.o;
    char err[4096];
    const device_t *dev = engine_device(o->backend); /* cpu always; cuda in CUDA builds */
    if (!dev) BAD("--backend cuda: this build has no CUDA backend (nvcc was not found at build time)");
    if (dev->count() <= 0) {
        snprintf(R->why, sizeof R->why, "--backend cuda: no CUDA device or driver found on this machine (use --backend cpu)");
        return 1;
    }
    /* its budget once it is known (setup_comm measures a device) */
    if (engine_init(&R->E, dev, R->J.dtype, err, sizeof err)) BAD("%s", err);
    return 0;
}
#undef BAD

/* An allocation the device (the host, on CPU) refused, or host memory the engine's bookkeeping could
 * not get, in the middle of the run: the other ranks may be inside a collective already, so nothing
 * can be agreed. This rank says it in one line naming itself, writes the oom record when it shares rank
 * 0's host (the --out that was checked), and ends the job (exit 3). The preflight finds most such
 * cases before (host_preflight). */
static run_t *g_run;
static void on_alloc_failed(const mem_stats *s) {
    run_t *R = g_run;
    char m[600], line[800];
    mem_oom_message(s, m, sizeof m);
    if (R->world > 1) snprintf(line, sizeof line, "rank %d on %s: %s", R->rank, agree_host(), m);
    else snprintf(line, sizeof line, "%s", m);
    errmsg_one_line(line, sizeof line);
    fprintf(stderr, "train: %s\n", line);
    fflush(stderr);
    if (R->J.o.out && (R->world == 1 || !strcmp(agree_host(), agree_host_of(0)))) {
        R->rank0 = 1; /* this rank writes it: rank 0 may be waiting in a collective that never ends */
        run_write_record(R, "oom", line, s->peak, s->total_peak, s->at_peak, 1);
    }
    if (R->world > 1) MPI_Abort(MPI_COMM_WORLD, 3);
    MPI_Finalize();
    exit(3);
}

/* Ranks launched with different options would wait forever in a collective or train something else
 * than asked: before the first collective that depends on them, in this order, every rank agrees
 * that the command line parsed everywhere; that the options every rank must share are the same
 * (core/run/run_record.c lists them; one line names the option, the values and the ranks and hosts,
 * exit 2); that the configuration checks passed (the same options give the same verdict, but a
 * config file read on each host may not); and that the resolved configuration (the model's every
 * field) is the same. `code` is this rank's verdict of check_cfg/pick_backend (its line in R->why). */
static int build_job(run_t *R);
static void agree_configuration(run_t *R, int code) {
    int c;
    if (R->parse_error) agree_fail(2, "%s", R->parse_error);
    if ((c = agree_check())) fail(c);
    agree_field f[JOB_MAX_FIELDS];
    if ((c = agree_fields(f, job_option_fields(&R->J, f, JOB_MAX_FIELDS)))) fail(c);
    if (code < 0) code = build_job(R); /* launched: the checks for the world MPI found */
    if (code) agree_fail(code, "%s", R->why);
    if ((c = agree_check())) fail(c);
    if ((c = agree_fields(f, job_resolved_fields(&R->J, f, JOB_MAX_FIELDS)))) fail(c);
}

/* MPI, the mesh, the device of this rank and what carries the collectives; code: this rank's verdict
 * of the configuration checks, agreed on first (agree_configuration) */
static void start_mpi(run_t *R, int code) {
    job_opts *o = &R->J.o;
    char err[4096];
    MPI_Init(NULL, NULL);
    R->mpi = g_mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &R->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &R->world);
    R->rank0 = g_rank0 = R->rank == 0;
    cli_set_rank0(g_rank0);
    /* from here a failure on one rank follows one rule (core/run/agree.h): recorded, agreed, printed once
     * by rank 0 naming the rank and host, the same exit code everywhere */
    if (agree_init("train")) agree_fail(1, "out of host memory");
    g_run = R;
    mem_set_oom_handler(&R->E.mem, on_alloc_failed);
    agree_configuration(R, code);
    /* outputs before anything else: rank 0 writes --out and --save, so its view is the one checked */
    if (g_rank0 && job_check_outputs(&R->J, err, sizeof err)) agree_fail(2, "%s", err);
    if ((code = agree_check())) fail(code);
    R->use_nccl = 0;
    /* the local rank: the launcher's (SLURM_LOCALID, Open MPI's), else the index among the ranks of
     * this host by MPI_COMM_TYPE_SHARED; ls counts those ranks */
    int lr, ls;
    comm_local_rank(&lr, &ls);
    lr = gpus_local_rank(lr, ls, &R->local_rank_from);
    const device_t *dev = R->E.dev;
    if (!dev->host_memory) {
        /* one device per local rank; NCCL needs one GPU per rank, so when ranks share a GPU the
         * collectives fall back to host-staged MPI */
        if (dev->select(lr, err, sizeof err)) agree_fail(1, "%s", err);
        if ((code = agree_check())) fail(code);
        int ndev = dev->count();
        R->use_nccl = !strcmp(o->comm, "nccl") || (!job_given(&R->J, "comm") && R->world > 1);
        /* one implementation on every rank: NCCL only if every host has a GPU per rank */
        int shared = ls > ndev, any_shared = 0;
        MPI_Allreduce(&shared, &any_shared, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (R->use_nccl && any_shared) {
            if (shared) snprintf(err, sizeof err, "%d ranks share %d GPU(s) on %s", ls, ndev, agree_host());
            else snprintf(err, sizeof err, "ranks share a GPU on another host");
            if (g_rank0) fprintf(stderr, "train: %s: NCCL needs one GPU per rank, using host-staged MPI collectives on every rank\n", err);
            R->use_nccl = 0;
        }
    }
    R->hosts = gather_hosts(R->world);
    if (g_rank0 && agree_tp_spans_hosts(o->tp)) {
        int a = 0, b = 0;
        for (int r = 0; r < R->world && !b; r++)
            if (r % o->tp && strcmp(agree_host_of(r), agree_host_of(r - r % o->tp))) { a = r - r % o->tp; b = r; }
        fprintf(stderr, "train: warning: a TP group of %d ranks spans hosts (rank %d on %s, rank %d on %s): its collectives "
                "run every layer over the network; map consecutive ranks to one host with --map-by slot or --npernode N "
                "(N a multiple of --tp)\n", o->tp, a, agree_host_of(a), b, agree_host_of(b));
    }
    cpu_blas_init();
    R->blas_by_host = record_gather_blas(&R->blas_differ); /* said on the first progress line */
}

static void fewer_than_a_batch(const run_t *R, const char *opt, const char *path, const data_file *d) {
    int64_t nseq = data_num_sequences(d, R->J.T);
    if (nseq >= R->J.G) return;
    say("%s %s holds %lld sequences of %d tokens, fewer than one global batch of %d (dp %d x --batch-size %d): a step "
        "would repeat sequences", opt, path, (long long)nseq, R->J.T, R->J.G, R->J.mesh.dp, R->J.B);
    fail(2);
}

/* training and validation tokens, the --init file */
static void open_inputs(run_t *R) {
    job_opts *o = &R->J.o;
    char err[4096];
    int code;
    int ok_train = data_open(&R->train, o->data, R->J.cfg.vocab_size, R->J.T, (uint64_t)o->seed, err, sizeof err) == 0;
    if (!ok_train) agree_fail(2, "%s", err);
    R->have_eval = o->eval_data != NULL;
    int ok_val = !R->have_eval || data_open(&R->val, o->eval_data, R->J.cfg.vocab_size, R->J.T, (uint64_t)o->seed + 1, err, sizeof err) == 0;
    if (!ok_val) agree_fail(2, "%s", err);
    int ok_init = !o->init || st_open(&R->stf, o->init, err, sizeof err) == 0;
    if (!ok_init) agree_fail(2, "%s", err);
    if ((code = agree_check())) {
        if (ok_train) data_close(&R->train);
        if (R->have_eval && ok_val) data_close(&R->val);
        if (o->init && ok_init) st_close(&R->stf);
        fail(code);
    }
    /* the same bytes on every host: size and sampled hash of each input file compared across ranks */
    agree_input in[4]; int n = 0;
    if (strcmp(o->data, "synthetic")) in[n++] = (agree_input){"--data", o->data};
    if (o->eval_data && strcmp(o->eval_data, "synthetic")) in[n++] = (agree_input){"--eval-data", o->eval_data};
    if (o->init) in[n++] = (agree_input){"--init", o->init};
    if (!catalog_is_preset(o->model)) in[n++] = (agree_input){"--model", o->model};
    if ((code = agree_inputs(in, n))) fail(code);
    /* a global batch is G distinct sequences: a file with fewer would repeat sequences within a step
     * (the same on every rank: the inputs agree) */
    fewer_than_a_batch(R, "--data", o->data, &R->train);
    if (R->have_eval) fewer_than_a_batch(R, "--eval-data", o->eval_data, &R->val);
    /* evaluation batches beyond the validation data would only repeat it */
    if (R->have_eval) {
        int64_t nseq = data_num_sequences(&R->val, R->J.T), nb = nseq / R->J.G;
        if (o->eval_batches > nb) {
            say("--eval-batches %d: %s holds %lld sequences of %d tokens, %lld batches of %d (at most %lld; more would repeat them)",
                o->eval_batches, o->eval_data, (long long)nseq, R->J.T, (long long)nb, R->J.G, (long long)nb);
            fail(2);
        }
    }
}

/* CPU: the engine's buffers are host memory. The plan's peak (on CPU the measured peak, exactly) is
 * asked of the host once before anything is allocated, so a host that cannot give it (ulimit -v, a
 * machine too small for the ranks on it) is found on every rank at once: one line, an oom record,
 * exit 3, instead of a failed allocation in the middle of a step. */
static void host_preflight(run_t *R) {
    if (!R->E.dev->host_memory) return;
    size_t need = (size_t)(R->planned.total_peak ? R->planned.total_peak : 1);
    void *probe = malloc(need);
    if (!probe) {
        char a[32];
        mem_format(a, sizeof a, need);
        agree_fail(3, "out of host memory: the engine needs %s (%zu bytes) per rank at its planned peak and this host "
                   "would not give it (ulimit -v, or more ranks than its memory holds)", a, need);
    }
    free(probe);
    if (!agree_check()) return;
    uint64_t peaks[MEM_NCAT] = {0};
    if (g_rank0) run_write_record(R, "oom", agree_last_error(), peaks, 0, NULL, 1);
    fail(3);
}

/* plan first: an allocation past the budget is found before anything is allocated, on every rank at
 * once, so no rank is left waiting in a collective */
static void budget_gate(run_t *R) {
    char err[4096];
    if (plan_rank(&R->E, &R->J.cfg, R->world, R->J.o.tp, R->rank, &R->J.mo, R->J.budget.budget, &R->planned, err, sizeof err)) agree_fail(2, "%s", err);
    else if (R->planned.overflow) agree_fail(R->J.budget.budget ? 3 : 2, "this configuration needs more than %llu EiB per rank: beyond what can be run",
                                             (unsigned long long)(MEM_PLAN_CAP >> 60));
    int code = agree_check();
    if (code) fail(code);
    R->have_plan = 1;
    int over = R->planned.over_budget, any = 0;
    MPI_Allreduce(&over, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!any) { host_preflight(R); return; }
    if (g_rank0) {
        char a[32], u[32], b[32];
        mem_format(a, sizeof a, R->planned.oom_bytes); mem_format(u, sizeof u, R->planned.oom_in_use); mem_format(b, sizeof b, R->J.budget.budget);
        char msg[512];
        snprintf(msg, sizeof msg, "out of memory budget: %s asked %s (%llu bytes) with %s in use, budget %s (%llu bytes)",
                 mem_cat_names[R->planned.oom_cat], a, (unsigned long long)R->planned.oom_bytes, u, b, (unsigned long long)R->J.budget.budget);
        say("%s", msg);
        uint64_t peaks[MEM_NCAT] = {0};
        run_write_record(R, "oom", msg, peaks, R->planned.oom_peak_before, NULL, 1);
    }
    fail(3);
}

/* the communicators; then, on CUDA, what the device has left once its context, cuBLAS and the NCCL
 * communicators exist: recorded always, and the budget when it is `auto` (the smallest over ranks, so
 * every rank plans the same; ranks sharing a GPU share its free memory) */
static void setup_comm(run_t *R) {
    job_opts *o = &R->J.o;
    char err[4096];
    comm_mpi_groups(&R->E.comm, &R->tpg, &R->dpg, o->tp);
    comm_mpi_world(&R->E.comm, &R->wg);
    if (R->J.mesh.rep > 1) comm_mpi_hsdp_groups(&R->E.comm, &R->shg, &R->repg, o->tp, R->J.mesh.shard);
    if (R->use_nccl && (comm_nccl_attach(&R->tpg, 1, err, sizeof err) || comm_nccl_attach(&R->dpg, 0, err, sizeof err)))
        agree_fail(1, "%s", err);
    int code = agree_check();
    if (code) fail(code);
    const device_t *dev = R->E.dev;
    R->comm_name = R->use_nccl ? "nccl" : (!dev->host_memory && R->world > 1 ? "mpi-staged" : "mpi");
    if (dev->host_memory) return;
    int lr, ls, ndev = dev->count();
    comm_local_rank(&lr, &ls);
    int per_gpu = ndev > 0 ? (ls + ndev - 1) / ndev : 1;
    MPI_Barrier(MPI_COMM_WORLD); /* every rank's context and communicators exist before anyone measures */
    int bad = gpus_measure_device(&R->E, per_gpu, R->J.budget.reserve, R->J.budget.is_auto, &R->J.budget.budget, &R->dev,
                                  err, sizeof err) != 0, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (anybad) {
        if (bad) say("%s", err); else say("--mem-budget auto: the device of another rank has no more than --mem-reserve free");
        fail(2);
    }
    if (R->J.budget.is_auto) {
        unsigned long long b = R->J.budget.budget;
        MPI_Allreduce(MPI_IN_PLACE, &b, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
        R->J.budget.budget = b;
    }
}

/* the predicted step, on rank 0, before the model is built (core/run/run_predict.h; the planner's
 * replay has an engine of its own beside the run's) */
static void predict(run_t *R) {
    int lr = 0, ls = 1;
    comm_local_rank(&lr, &ls);
    MPI_Allreduce(MPI_IN_PLACE, &ls, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!R->E.dev->host_memory) run_predict_device(&R->pred, R->E.dev->device_name());
    if (g_rank0) run_predict_step(&R->pred, &R->J.cfg, R->world, R->J.o.tp, R->E.dtype, &R->J.mo, ls);
}

/* memory, the model and its parameters (seed or --init), FLOP figures, the optimizer */
static void build_engine(run_t *R) {
    job_opts *o = &R->J.o;
    char err[4096];
    int code;
    mem_set_budget(&R->E.mem, R->J.budget.budget);
    model_t *M = &R->M;
    int hsdp = R->J.mesh.rep > 1; /* FSDP shards over the shard group; the loss and evaluation still sum over dp */
    if (model_init(M, &R->E, &R->J.cfg, &R->J.mesh, &R->tpg, hsdp ? &R->shg : &R->dpg, &R->J.mo, err, sizeof err))
        agree_fail(2, "%s", err);
    if (hsdp) M->fsdp.rep = &R->repg;
    if ((code = agree_check())) fail(code);
    if (o->init) {
        if (checkpoint_check_shapes(M, &R->stf, err, sizeof err)) agree_fail(2, "%s", err);
        if ((code = agree_check())) fail(code);
        int lr = checkpoint_load(M, &R->stf, err, sizeof err); /* agreed inside: -2 another rank failed */
        if (lr == -1) agree_fail(2, "%s", err);
        if ((code = agree_check()) || lr) fail(code ? code : 2);
        st_close(&R->stf);
    } else {
        model_init_params(M, (uint64_t)o->seed);
    }
    R->flops_per_token = metrics_flops_per_token(&R->J.cfg, R->J.T);
    R->peak_flops = o->peak_tflops > 0 ? o->peak_tflops * 1e12 : measure_peak_flops(R->E.dev);
    R->oc = (optim_cfg){.lr = o->lr, .weight_decay = o->weight_decay, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->adam_eps,
                        .grad_clip = o->grad_clip, .min_lr_ratio = o->min_lr_ratio, .warmup = o->warmup,
                        .cosine = !strcmp(o->schedule, "cosine")};
    R->in = malloc((size_t)R->J.B * R->J.T * sizeof(int32_t)); R->tg = malloc((size_t)R->J.B * R->J.T * sizeof(int32_t));
    R->step_ms = calloc((size_t)o->steps + 1, sizeof(double));
    R->steps = json_array(); R->evals = json_array();
    if (!R->in || !R->tg || !R->step_ms) agree_fail(1, "out of host memory");
    if ((code = agree_check())) fail(code);
}

/* one entry of the record's steps[] */
static json_t *step_json(int s, int world, double loss, double norm, double lr, const double tm[2], double comm_bytes, double tok) {
    double tok_s = tok / (tm[0] / 1e3);
    json_t *st = json_object();
    json_object_set_new(st, "step", json_integer(s + 1));
    json_object_set_new(st, "loss", isfinite(loss) ? json_real(loss) : json_null());
    json_object_set_new(st, "grad_norm", isfinite(norm) ? json_real(norm) : json_null());
    json_object_set_new(st, JOB_KEY(LR), json_real(lr));
    json_object_set_new(st, "ms", json_real(tm[0]));
    json_object_set_new(st, "tok_s", json_real(tok_s));
    json_object_set_new(st, "tok_s_per_rank", json_real(tok_s / world));
    json_object_set_new(st, "comm_ms", json_real(tm[1]));
    json_object_set_new(st, "compute_ms", json_real(tm[0] - tm[1]));
    json_object_set_new(st, "comm_bytes", json_integer((json_int_t)comm_bytes));
    json_object_set_new(st, "tokens", json_integer((json_int_t)(tok * (s + 1))));
    return st;
}

/* time and bytes of all collectives so far */
static void comm_totals(run_t *R, double *ms, double *bytes) {
    const comm_stats *cs = comm_get_stats(&R->E.comm);
    *ms = 0; *bytes = 0;
    for (int k = 0; k < COMM_NKIND; k++) { *ms += cs->ms[k]; *bytes += (double)cs->bytes[k]; }
}

/* a diverged run: one line, kept for the record's error; returns the exit code 4 */
static int diverged(run_t *R, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int diverged(run_t *R, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(R->why, sizeof R->why, fmt, ap);
    va_end(ap);
    say("%s", R->why);
    return 4;
}

/* a failure every rank has agreed on (agree_check has printed it): kept for the record; returns code */
static int run_failed(run_t *R, int code) {
    snprintf(R->why, sizeof R->why, "%s", agree_last_error());
    return code;
}

/* the optimizer steps with evaluation and progress lines; returns 0, 4 when it diverged, or the code of
 * a failure the ranks agreed on (1: a token file changed under the run) */
static int step_loop(run_t *R) {
    const job_opts *o = &R->J.o;
    model_t *M = &R->M;
    comm_reset_stats(&R->E.comm);
    double scale = 1.0 / ((double)R->J.G * R->J.T);
    double t_start = comm_now_ms();
    int dp = R->J.mesh.dp, r = R->J.mesh.dp_rank;
    for (int s = 0; s < o->steps; s++) {
        /* micro-batch m of DP rank r: block m*dp + r of the step's global batch (core/formats/data.h), so
         * the N micro-batches of the dp ranks are the G sequences a 1-rank run of batch G takes */
        char err[1024];
        if (data_batch(&R->train, s, R->J.G, r, R->J.B, R->J.T, R->in, R->tg, err, sizeof err)) agree_fail(1, "%s", err);
        int code = agree_check(); /* also the barrier before the step's clock starts */
        if (code) return run_failed(R, code);
        double comm0, bytes0, comm1, bytes1;
        comm_totals(R, &comm0, &bytes0);
        double t0 = comm_now_ms(), loss = 0;
        for (int m = 0; m < R->J.N; m++) {
            if (m && data_batch(&R->train, s, R->J.G, m * dp + r, R->J.B, R->J.T, R->in, R->tg, err, sizeof err))
                agree_fail(1, "%s", err); /* zeros: the collectives still run; agreed after the step */
            model_accum_begin(M, m, R->J.N);
            loss += model_forward_backward(M, R->in, R->tg, (float)scale);
        }
        comm_all_reduce_sum_f64(&R->dpg, &loss, 1);
        loss *= scale;
        double lr = 0, norm = optim_step(M, &R->wg, &R->oc, s, o->steps, &lr);
        R->E.ops->synchronize();
        double t1 = comm_now_ms();
        comm_totals(R, &comm1, &bytes1);
        double tm[2] = {t1 - t0, comm1 - comm0};
        MPI_Allreduce(MPI_IN_PLACE, tm, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (R->J.N > 1 && (code = agree_check())) return run_failed(R, code); /* a later micro-batch unread */
        R->step_ms[s] = tm[0];
        R->nsteps_done = s + 1;
        double tok = (double)R->J.G * R->J.T, tok_s = tok / (tm[0] / 1e3);
        json_array_append_new(R->steps, step_json(s, R->world, loss, norm, lr, tm, bytes1 - bytes0, tok));
        if (!isfinite(loss) || !isfinite(norm))
            return diverged(R, "diverged at step %d: loss %g, grad norm %g (non-finite)", s + 1, loss, norm);
        int last = s + 1 == o->steps;
        /* a step's loss is computed before its update, so the last update is checked on the parameters
         * themselves (the sum of their squares over every rank is finite exactly when each is) */
        if (last) {
            double sq = fsdp_param_sumsq(&M->fsdp);
            comm_all_reduce_sum_f64(&R->wg, &sq, 1);
            if (!isfinite(sq)) return diverged(R, "diverged at step %d: its update made the parameters non-finite", s + 1);
        }
        if (R->have_eval && ((o->eval_every && (s + 1) % o->eval_every == 0) || last)) {
            double el = evaluate(M, &R->val, &R->dpg, o->eval_batches, R->in, R->tg, R); /* the same on every rank */
            int code = agree_check();
            if (code) return run_failed(R, code);
            json_t *ev = json_object();
            json_object_set_new(ev, "step", json_integer(s + 1));
            json_object_set_new(ev, "loss", isfinite(el) ? json_real(el) : json_null());
            json_array_append_new(R->evals, ev);
            if (!isfinite(el)) return diverged(R, "diverged at step %d: eval loss %g (non-finite)", s + 1, el);
            if (g_rank0) fprintf(stderr, "train: step %d eval loss %.4f\n", s + 1, el);
        }
        if (g_rank0 && ((s + 1) % o->log_every == 0 || s == 0 || last)) {
            double el = (comm_now_ms() - t_start) / 1e3, eta = el / (s + 1) * (o->steps - s - 1);
            char mb[32]; mem_format(mb, sizeof mb, mem_get_stats(&R->E.mem)->total_peak);
            char dv[256] = "";
            if (s == 0 && R->dev.total) { /* the first line says what the budget was made of */
                char t[32], ov[32], rs[32], b[32];
                mem_format(t, sizeof t, R->dev.total); mem_format(ov, sizeof ov, R->dev.runtime_overhead);
                mem_format(rs, sizeof rs, R->J.budget.reserve); mem_format(b, sizeof b, R->J.budget.budget);
                snprintf(dv, sizeof dv, " | device %s, runtime %s, reserve %s, budget %s%s", t, ov, rs,
                         R->J.budget.budget ? b : "none", R->J.budget.is_auto ? " (auto)" : "");
            }
            char df[256] = "";
            if (s == 0) { /* and what the token files were taken for (core/formats/data.h detects them) */
                char a[40], b[40] = "";
                data_describe(&R->train, a, sizeof a);
                if (R->have_eval) data_describe(&R->val, b, sizeof b);
                snprintf(df, sizeof df, " | data %s%s%s%s", a, R->have_eval ? ", eval " : "", b,
                         R->blas_differ ? " | BLAS kernels differ between ranks (env.blas_by_host): losses match a "
                                          "one-host run to rounding, not bit for bit" : "");
            }
            char pv[640] = "";
            if (s == 0) run_predict_progress(&R->pred, pv, sizeof pv); /* and what was predicted for it */
            char acc[64] = "";
            if (R->J.N > 1) snprintf(acc, sizeof acc, " batch %dx%d (global %d)", R->J.B, R->J.N, R->J.G);
            fprintf(stderr, "train: step %d/%d loss %.4f gnorm %.3f lr %.2e %.0f tok/s %.1f ms mem %s%s eta %.0fs%s%s%s\n",
                    s + 1, o->steps, loss, norm, lr, tok_s, tm[0], mb, acc, eta, dv, df, pv);
        }
    }
    return 0;
}

/* the record, --save, and the run's own memory released; returns the exit code */
static int end_run(run_t *R, int code, run_result *res) {
    const char *status = code == 4 ? "diverged" : code ? "failed" : "ok";
    char err[4096];
    uint64_t peaks[MEM_NCAT], total, at[MEM_NCAT];
    if (!R->E.dev->host_memory) {
        size_t fb = 0, tb = 0;
        R->E.dev->mem_info(&fb, &tb);
        R->dev_total = (int64_t)tb; R->dev_used = (int64_t)(tb - fb);
        uint64_t pool_now = 0, pool_high = 0;
        R->E.dev->pool_reserved(&pool_now, &pool_high);
        R->pool_reserved = (int64_t)pool_high;
    }
    max_mem_over_ranks(R, peaks, &total);
    at_peak_of_max_rank(R, at);
    const char *error = code ? R->why : NULL; /* why it diverged or failed (diverged(), run_failed()) */
    /* --save first, so the record says how it went: a failed save is "failed", an interrupted one
     * "interrupted" (SIGINT/SIGTERM: the temp file is removed at once, core/common/cleanup.h) */
    if (code == 0 && R->J.o.save) {
        int sc = checkpoint_save(&R->M, &R->tpg, R->J.o.save, err, sizeof err);
        if (sc) {
            snprintf(R->why, sizeof R->why, "%s", err);
            error = R->why;
            status = sc > 128 ? "interrupted" : "failed";
            code = sc > 128 ? sc : 1;
        }
    }
    if (run_write_record(R, status, error, peaks, total, at, code != 0) && code == 0) code = 1;
    if (res) {
        int n = R->nsteps_done, first = R->J.o.excluded < n ? R->J.o.excluded : (n > 0 ? n - 1 : 0);
        res->status = status;
        res->steps_done = n;
        res->step_ms_median = n > 0 ? metrics_median(R->step_ms + first, n - first) : 0;
        json_t *l = n > 0 ? json_object_get(json_array_get(R->steps, (size_t)n - 1), "loss") : NULL;
        res->final_loss = l && json_is_real(l) ? json_real_value(l) : NAN;
        res->mem_peak = total;
    }
    model_free(&R->M);
    engine_release(&R->E);
    data_close(&R->train);
    if (R->have_eval) data_close(&R->val);
    free(R->in); free(R->tg); free(R->step_ms);
    json_decref(R->steps); json_decref(R->evals); json_decref(R->hosts); json_decref(R->blas_by_host);
    return code;
}

int run_env_launched(void) {
    return getenv("OMPI_COMM_WORLD_RANK") || getenv("PMI_RANK") || getenv("PMIX_RANK") || getenv("SLURM_PROCID");
}

/* job_build for the world and rank MPI gives (1 and 0 before MPI), the backend, the machine of the
 * prediction: 0, or the exit code with its line in R->why */
static int build_job(run_t *R) {
    int world = 1, rank = 0;
    if (g_mpi) { MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &world); }
    int code = job_build(&R->J, world, rank, R->why, sizeof R->why);
    if (!code) code = pick_backend(R);
    char err[512];
    if (!code && run_predict_resolve(&R->pred, R->J.o.machine, R->J.o.gpu, err, sizeof err)) {
        snprintf(R->why, sizeof R->why, "%s", err);
        code = 2;
    }
    return code;
}

int run_train(job_t *j, const char *parse_error, run_result *res) {
    run_t *R = run_new(j, parse_error);
    if (!R) return 1;
    int code = -1; /* launched: built once MPI gives the world (agree_configuration) */
    if (!run_env_launched()) {
        /* not launched: nobody to agree with, so a refusal is said at once and MPI never starts */
        if (parse_error) snprintf(R->why, sizeof R->why, "%s", parse_error);
        code = parse_error ? 2 : build_job(R);
        if (code) { say("%s", R->why); free(R); return code; }
    }
    start_mpi(R, code);
    open_inputs(R);
    setup_comm(R);
    budget_gate(R);
    predict(R);
    build_engine(R);
    code = end_run(R, step_loop(R), res);
    comm_mpi_groups_free(&R->tpg, &R->dpg);
    comm_mpi_groups_free(&R->shg, &R->repg);
    run_predict_free(&R->pred);
    free(R);
    if (g_mpi) MPI_Finalize();
    g_mpi = 0;
    return code;
}
