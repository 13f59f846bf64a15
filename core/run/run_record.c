/* core/run/run_record.c — the run record of design 8 (schema meshsweep.run/1: the resolved configuration,
 * mesh, steps, evaluations, summary, memory, collectives, environment), written by rank 0 to --out.
 * Not here: the run itself (core/run/run.c), the atomic writer and the shared JSON pieces
 * (core/run/record.c). */
#include <jansson.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/common/cli.h"
#include "core/run/metrics.h"
#include "core/run/record.h"
#include "core/run/run_state.h"

#ifndef MESHSWEEP_GIT
#define MESHSWEEP_GIT "unknown"
#endif

static json_t *config_json(const run_t *R) {
    const model_config *c = &R->cfg;
    const run_cfg *o = &R->o;
    json_t *m = config_to_json(c); /* HF names, rope_scaling included */
    json_t *j = json_object();
    json_object_set_new(j, "model", m);
    json_object_set_new(j, "seq_len", json_integer(R->T));
    json_object_set_new(j, "steps", json_integer(o->steps));
    json_object_set_new(j, "lr", json_real(o->lr));
    json_object_set_new(j, "weight_decay", json_real(o->weight_decay));
    json_object_set_new(j, "beta1", json_real(o->beta1));
    json_object_set_new(j, "beta2", json_real(o->beta2));
    json_object_set_new(j, "adam_eps", json_real(o->adam_eps));
    json_object_set_new(j, "grad_clip", json_real(o->grad_clip));
    json_object_set_new(j, "schedule", json_string(o->schedule));
    json_object_set_new(j, "warmup", json_integer(o->warmup));
    json_object_set_new(j, "min_lr_ratio", json_real(o->min_lr_ratio));
    json_object_set_new(j, "seed", json_integer(o->seed));
    json_object_set_new(j, "data", json_string(o->data));
    json_object_set_new(j, "eval_data", o->eval_data ? json_string(o->eval_data) : json_null());
    json_object_set_new(j, "eval_every", json_integer(o->eval_every));
    json_object_set_new(j, "eval_batches", json_integer(o->eval_batches));
    json_object_set_new(j, "init", o->init ? json_string(o->init) : json_null());
    json_object_set_new(j, "sequence_parallel", json_boolean(R->mo.sequence_parallel && R->mesh.tp > 1));
    json_object_set_new(j, "sp_activations", json_string(R->mo.sp_local ? "local" : "gathered"));
    json_object_set_new(j, "prefetch", json_boolean(o->prefetch));
    json_object_set_new(j, "checkpoint_activations", json_boolean(o->ckpt));
    json_object_set_new(j, "backend", json_string(o->backend));
    json_object_set_new(j, "comm", json_string(R->comm_name ? R->comm_name : o->comm));
    json_object_set_new(j, "dtype", json_string(o->dtype));
    json_object_set_new(j, "mem_budget", R->budget ? json_integer((json_int_t)R->budget) : json_null());
    json_object_set_new(j, "mem_budget_auto", json_boolean(R->gb.is_auto));
    json_object_set_new(j, "mem_reserve", R->gb.is_auto || R->gb.gpu ? json_integer((json_int_t)R->gb.reserve) : json_null());
    json_object_set_new(j, "gpu", R->gb.gpu ? json_string(R->gb.gpu->name) : json_null());
    json_object_set_new(j, "warmup_steps_excluded", json_integer(o->excluded));
    return j;
}

static json_t *plan_json(const mem_stats *s) {
    return json_pack("{s:I, s:o, s:o}", "peak", (json_int_t)s->total_peak, "by_category", record_categories(s->peak),
                     "at_peak", record_categories(s->at_peak));
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
    return json_pack("{s:o, s:o}", "train", data_file_json(&R->train, R->T), "eval",
                     R->have_eval ? data_file_json(&R->val, R->T) : json_null());
}

int run_write_record(run_t *R, const char *status, const char *error, const uint64_t *peaks, uint64_t total_peak,
                        const uint64_t *at_peak, int quiet) {
    if (!R->rank0 || !R->o.out) return 0;
    json_t *j = json_object();
    json_object_set_new(j, "schema", json_string("meshsweep.run/1"));
    json_object_set_new(j, "status", json_string(status));
    if (error) json_object_set_new(j, "error", json_string(error));
    json_object_set_new(j, "config", config_json(R));
    json_object_set_new(j, "mesh", json_pack("{s:i, s:i, s:i}", "world", R->mesh.world, "dp", R->mesh.dp, "tp", R->mesh.tp));
    json_object_set_new(j, "data", data_json(R));
    json_object_set_new(j, "batch_size", json_integer(R->B));
    json_object_set_new(j, "global_batch", json_integer(R->G));
    json_object_set_new(j, "steps", R->steps ? json_incref(R->steps) : json_array());
    json_object_set_new(j, "eval", R->evals ? json_incref(R->evals) : json_array());
    /* summary (design 7) */
    int n = R->nsteps_done, first = R->o.excluded < n ? R->o.excluded : (n > 0 ? n - 1 : 0);
    double med = n > 0 ? metrics_median(R->step_ms + first, n - first) : 0;
    double tokens = (double)R->G * R->T;
    double tok_s = med > 0 ? tokens / (med / 1e3) : 0, tok_s_rank = tok_s / R->mesh.world;
    json_t *last_loss = json_null(), *last_eval = json_null();
    if (R->steps && json_array_size(R->steps))
        last_loss = json_incref(json_object_get(json_array_get(R->steps, json_array_size(R->steps) - 1), "loss"));
    if (R->evals && json_array_size(R->evals))
        last_eval = json_incref(json_object_get(json_array_get(R->evals, json_array_size(R->evals) - 1), "loss"));
    json_t *sum = json_object();
    json_object_set_new(sum, "steps_done", json_integer(n));
    json_object_set_new(sum, "step_ms_median", json_real(med));
    json_object_set_new(sum, "tokens_per_step", json_integer((json_int_t)tokens));
    json_object_set_new(sum, "tok_s", json_real(tok_s));
    json_object_set_new(sum, "tok_s_per_rank", json_real(tok_s_rank));
    json_object_set_new(sum, "flops_per_token", json_real(R->flops_per_token));
    json_object_set_new(sum, "peak_tflops", json_real(R->peak_flops / 1e12));
    double mfu = metrics_mfu(R->flops_per_token, tok_s_rank, R->peak_flops);
    json_object_set_new(sum, "mfu", json_real(mfu));
    /* against the compute the ranks had: peak x min(1, cores/ranks) on each host (core/run/record.h) */
    json_object_set_new(sum, "mfu_share", json_real(R->mpi ? record_mfu_share(mfu, R->mesh.world) : mfu));
    json_object_set_new(sum, "final_loss", last_loss);
    json_object_set_new(sum, "final_eval_loss", last_eval);
    json_object_set_new(j, "summary", sum);
    json_t *mem = json_object();
    json_object_set_new(mem, "budget", R->budget ? json_integer((json_int_t)R->budget) : json_null());
    json_object_set_new(mem, "peak", json_integer((json_int_t)total_peak));
    uint64_t zero[MEM_NCAT] = {0};
    json_object_set_new(mem, "by_category", record_categories(peaks ? peaks : zero));
    json_object_set_new(mem, "at_peak", record_categories(at_peak ? at_peak : zero));
    json_object_set_new(mem, "planned", R->have_plan ? plan_json(&R->planned) : json_null());
    /* CUDA: what the device reports in use (context, cuBLAS workspace, NCCL buffers included) next to
     * the tracked bytes still allocated at that moment */
    json_t *dev = json_null();
    if (R->dev_total || R->dev.total) {
        /* the set-up figures (after context, cuBLAS and NCCL, before the engine's first byte) and the end */
        dev = json_pack("{s:I, s:I, s:I, s:I, s:b}", "total", (json_int_t)(R->dev.total ? R->dev.total : (uint64_t)R->dev_total),
                        "free_after_setup", (json_int_t)R->dev.free_after_setup,
                        "runtime_overhead", (json_int_t)R->dev.runtime_overhead, "reserve", (json_int_t)R->gb.reserve,
                        "budget_auto", R->gb.is_auto);
        if (R->dev_total) {
            json_object_set_new(dev, "used_at_end", json_integer((json_int_t)R->dev_used));
            json_object_set_new(dev, "untracked_at_end", json_integer((json_int_t)(R->dev_used - (int64_t)mem_get_stats()->total_cur)));
        }
    }
    json_object_set_new(mem, "device", dev);
    /* the high-water mark of the pool behind the tracked allocations: the tracked peak plus what the
     * pool keeps for reuse (block rounding, fragmentation) */
    json_object_set_new(mem, "device_pool_reserved", R->dev_total ? json_integer((json_int_t)R->pool_reserved) : json_null());
    json_object_set_new(j, "memory", mem);
    json_object_set_new(j, "comm", record_comm(comm_get_stats()));
    char date[64]; time_t now = time(NULL); strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    char mpiver[MPI_MAX_LIBRARY_VERSION_STRING] = "n/a"; int ml = 0;
    if (R->mpi) { MPI_Get_library_version(mpiver, &ml); char *nl = strchr(mpiver, ','); if (nl) *nl = 0; }
    json_object_set_new(j, "env", json_pack("{s:O, s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "hosts", R->hosts ? R->hosts : json_null(),
                                            "ranks", R->mesh.world, "backend", R->o.backend, "dtype", R->o.dtype,
                                            "compiler", "gcc " __VERSION__, "mpi", mpiver, "blas", "OpenBLAS",
                                            "git", MESHSWEEP_GIT, "date", date));
    if (R->mpi) record_env_hosts(json_object_get(j, "env"), R->mesh.tp);
    char err[512];
    int rc = record_write_atomic(R->o.out, j, err, sizeof err);
    if (rc && !quiet) cli_say("%s", err);
    json_decref(j);
    return rc;
}


