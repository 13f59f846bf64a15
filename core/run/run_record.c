/* core/run/run_record.c — the run record of docs/formats.md (schema meshsweep.run/1: the resolved configuration,
 * mesh, steps, evaluations, summary, memory, collectives, environment), written by rank 0 to --out.
 * Not here: the run itself (core/run/run.c), the atomic writer and the shared JSON pieces
 * (core/run/record.c). */
#include <jansson.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/job/keys.h"
#include "core/common/cli.h"
#include "core/job/metrics.h"
#include "core/run/record.h"
#include "core/run/run_state.h"

/* The revision the program was built from ("git describe --always --dirty") and the compiler's own
 * version line, written by the Makefile into $(BUILD)/gen/buildinfo.h (rewritten only when they
 * change, so only this file is recompiled); "unknown" in a build without it (a tarball without
 * .git: the Makefile writes "unknown" there too). */
#if defined(__has_include)
#if __has_include("buildinfo.h")
#include "buildinfo.h"
#include "core/common/files.h"
#include "core/job/catalog.h"
#endif
#endif
#ifndef MESHSWEEP_GIT
#define MESHSWEEP_GIT "unknown"
#endif
#ifndef MESHSWEEP_COMPILER
#define MESHSWEEP_COMPILER "gcc " __VERSION__
#endif

static json_t *plan_json(const mem_stats *s) {
    json_t *p = json_object();
    record_peaks(p, s->total_peak, s->peak, s->at_peak);
    return p;
}

/* the run record; on rank 0 only. mem: max over ranks (per category and total) */
/* returns -1 when the record could not be written (rank 0) */
/* the token files as detected: {"train": {path, format, dtype, tokens, sequences}, "eval": ... or null} */
static json_t *data_file_json(const data_file *d, int T) {
    if (!d->ntokens) return json_null(); /* not opened (the run stopped before) */
    return json_pack("{s:s, s:s, s:s, s:I, s:I}", "path", d->path, "format", data_format_names[d->format], "dtype",
                     d->synthetic ? "none" : data_dtype_names[d->dtype], "tokens", (json_int_t)d->ntokens, "sequences",
                     (json_int_t)data_num_sequences(d, T));
}
static json_t *data_json(const run_t *R) {
    return json_pack("{s:o, s:o}", "train", data_file_json(&R->train, R->J.T), "eval",
                     R->have_eval ? data_file_json(&R->val, R->J.T) : json_null());
}

int run_write_record(run_t *R, const char *status, const char *error, const uint64_t *peaks, uint64_t total_peak,
                        const uint64_t *at_peak, int quiet) {
    if (!R->rank0 || !R->J.o.out) return 0;
    json_t *j = json_object();
    json_object_set_new(j, JOB_KEY(SCHEMA), json_string("meshsweep.run/1"));
    json_object_set_new(j, JOB_KEY(STATUS), json_string(status));
    if (error) json_object_set_new(j, JOB_KEY(ERROR), json_string(error));
    json_object_set_new(j, JOB_KEY(CONFIG), job_config_json(&R->J, R->comm_name));
    json_object_set_new(j, JOB_KEY(MESH), json_pack("{s:i, s:i, s:i}", JOB_KEY(WORLD), R->J.mesh.world, JOB_KEY(DP), R->J.mesh.dp,
                                                            JOB_KEY(TP), R->J.mesh.tp));
    if (R->J.mesh.rep > 1) { /* HSDP: its factors of dp; a 2D mesh's record is as before */
        json_t *mesh = json_object_get(j, JOB_KEY(MESH));
        json_object_set_new(mesh, JOB_KEY(REPLICATE), json_integer(R->J.mesh.rep));
        json_object_set_new(mesh, JOB_KEY(SHARD), json_integer(R->J.mesh.shard));
    }
    json_object_set_new(j, JOB_KEY(DATA_FILES), data_json(R));
    json_object_set_new(j, JOB_KEY(BATCH_SIZE), json_integer(R->J.B));
    json_object_set_new(j, JOB_KEY(MICRO_BATCH), json_integer(R->J.B));
    json_object_set_new(j, JOB_KEY(GRAD_ACCUM), json_integer(R->J.N));
    json_object_set_new(j, JOB_KEY(GLOBAL_BATCH), json_integer(R->J.G));
    json_object_set_new(j, JOB_KEY(STEP_LIST), R->steps ? json_incref(R->steps) : json_array());
    json_object_set_new(j, JOB_KEY(EVAL), R->evals ? json_incref(R->evals) : json_array());
    /* summary (docs/metrics.md) */
    int n = R->nsteps_done, first = R->J.o.excluded < n ? R->J.o.excluded : (n > 0 ? n - 1 : 0);
    double med = n > 0 ? metrics_median(R->step_ms + first, n - first) : 0;
    double tokens = (double)R->J.G * R->J.T;
    double tok_s = med > 0 ? tokens / (med / 1e3) : 0, tok_s_rank = tok_s / R->J.mesh.world;
    json_t *last_loss = json_null(), *last_eval = json_null();
    if (R->steps && json_array_size(R->steps))
        last_loss = json_incref(json_object_get(json_array_get(R->steps, json_array_size(R->steps) - 1), "loss"));
    if (R->evals && json_array_size(R->evals))
        last_eval = json_incref(json_object_get(json_array_get(R->evals, json_array_size(R->evals) - 1), "loss"));
    json_t *sum = json_object();
    json_object_set_new(sum, JOB_KEY(STEPS_DONE), json_integer(n));
    json_object_set_new(sum, JOB_KEY(STEP_MS_MEDIAN), json_real(med));
    json_object_set_new(sum, "tokens_per_step", json_integer((json_int_t)tokens));
    json_object_set_new(sum, "tok_s", json_real(tok_s));
    json_object_set_new(sum, "tok_s_per_rank", json_real(tok_s_rank));
    json_object_set_new(sum, "flops_per_token", json_real(R->flops_per_token));
    json_object_set_new(sum, "peak_tflops", json_real(R->peak_flops / 1e12));
    double mfu = metrics_mfu(R->flops_per_token, tok_s_rank, R->peak_flops);
    json_object_set_new(sum, "mfu", json_real(mfu));
    /* against the compute the ranks had: peak x min(1, cores/ranks) on each host (core/run/record.h) */
    json_object_set_new(sum, "mfu_share", json_real(R->mpi ? record_mfu_share(mfu, R->J.mesh.world) : mfu));
    json_object_set_new(sum, "final_loss", last_loss);
    json_object_set_new(sum, "final_eval_loss", last_eval);
    run_predict_summary(&R->pred, sum, med);
    json_object_set_new(j, JOB_KEY(SUMMARY), sum);
    json_object_set_new(j, JOB_KEY(PREDICTION), R->pred.time ? json_incref(R->pred.time) : json_null());
    json_t *mem = json_object();
    json_object_set_new(mem, "budget", R->J.budget.budget ? json_integer((json_int_t)R->J.budget.budget) : json_null());
    uint64_t zero[MEM_NCAT] = {0};
    record_peaks(mem, total_peak, peaks ? peaks : zero, at_peak ? at_peak : zero);
    json_object_set_new(mem, "planned", R->have_plan ? plan_json(&R->planned) : json_null());
    /* CUDA: what the device reports in use (context, cuBLAS workspace, NCCL buffers included) next to
     * the tracked bytes still allocated at that moment */
    json_t *dev = json_null();
    if (R->dev_total || R->dev.total) {
        /* the set-up figures (after context, cuBLAS and NCCL, before the engine's first byte) and the end */
        dev = json_pack("{s:I, s:I, s:I, s:I, s:b}", "total", (json_int_t)(R->dev.total ? R->dev.total : (uint64_t)R->dev_total),
                        "free_after_setup", (json_int_t)R->dev.free_after_setup,
                        "runtime_overhead", (json_int_t)R->dev.runtime_overhead, "reserve", (json_int_t)R->J.budget.reserve,
                        "budget_auto", R->J.budget.is_auto);
        if (R->dev_total) {
            json_object_set_new(dev, "used_at_end", json_integer((json_int_t)R->dev_used));
            json_object_set_new(dev, "untracked_at_end", json_integer((json_int_t)(R->dev_used - (int64_t)mem_get_stats(&R->E.mem)->total_cur)));
        }
    }
    json_object_set_new(mem, "device", dev);
    /* the high-water mark of the pool behind the tracked allocations: the tracked peak plus what the
     * pool keeps for reuse (block rounding, fragmentation) */
    json_object_set_new(mem, "device_pool_reserved", R->dev_total ? json_integer((json_int_t)R->pool_reserved) : json_null());
    json_object_set_new(j, JOB_KEY(MEMORY), mem);
    json_object_set_new(j, JOB_KEY(COMM_STATS), record_comm(comm_get_stats(&R->E.comm)));
    char date[64]; time_t now = time(NULL); strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    char mpiver[MPI_MAX_LIBRARY_VERSION_STRING] = "n/a"; int ml = 0;
    if (R->mpi) { MPI_Get_library_version(mpiver, &ml); char *nl = strchr(mpiver, ','); if (nl) *nl = 0; }
    json_object_set_new(j, JOB_KEY(ENV), json_pack("{s:O, s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "hosts", R->hosts ? R->hosts : json_null(),
                                            "ranks", R->J.mesh.world, "backend", R->J.o.backend, "dtype", R->J.o.dtype,
                                            "compiler", MESHSWEEP_COMPILER, "mpi", mpiver, "blas", cpu_blas_config(),
                                            "git", MESHSWEEP_GIT, "date", date));
    json_t *env = json_object_get(j, "env");
    json_object_set_new(env, "blas_core", json_string(cpu_blas_core()));
    json_object_set_new(env, "blas_by_host", R->blas_by_host ? json_incref(R->blas_by_host) : json_null());
    json_object_set_new(env, "blas_hosts_differ", json_boolean(R->blas_differ));
    if (R->mpi) record_env_hosts(json_object_get(j, "env"), R->J.mesh.tp);
    if (R->mpi) record_env_launch(json_object_get(j, "env"), R->local_rank_from);
    char err[512];
    int rc = files_write_json(R->J.o.out, j, err, sizeof err);
    if (rc && !quiet) cli_say("%s", err);
    json_decref(j);
    return rc;
}
