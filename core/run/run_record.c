/* core/run/run_record.c — the run record of docs/formats.md (schema meshsweep.run/1: the resolved configuration,
 * mesh, steps, evaluations, summary, memory, collectives, environment), written by rank 0 to --out.
 * Not here: the run itself (core/run/run.c), the atomic writer and the shared JSON pieces
 * (core/run/record.c). */
#include <jansson.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <stdarg.h>
#include <time.h>

#include "core/common/cli.h"
#include "core/run/metrics.h"
#include "core/run/record.h"
#include "core/run/run_state.h"

/* The revision the program was built from ("git describe --always --dirty") and the compiler's own
 * version line, written by the Makefile into $(BUILD)/gen/buildinfo.h (rewritten only when they
 * change, so only this file is recompiled); "unknown" in a build without it (a tarball without
 * .git: the Makefile writes "unknown" there too). */
#if defined(__has_include)
#if __has_include("buildinfo.h")
#include "buildinfo.h"
#endif
#endif
#ifndef MESHSWEEP_GIT
#define MESHSWEEP_GIT "unknown"
#endif
#ifndef MESHSWEEP_COMPILER
#define MESHSWEEP_COMPILER "gcc " __VERSION__
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
    json_object_set_new(j, "checkpoint_activations", json_string(o->ckpt));
    json_object_set_new(j, "grad_accum", json_integer(R->N));
    json_object_set_new(j, "accum_reduce", json_string(o->accum_reduce));
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
    json_object_set_new(j, "micro_batch", json_integer(R->B));
    json_object_set_new(j, "grad_accum", json_integer(R->N));
    json_object_set_new(j, "global_batch", json_integer(R->G));
    json_object_set_new(j, "steps", R->steps ? json_incref(R->steps) : json_array());
    json_object_set_new(j, "eval", R->evals ? json_incref(R->evals) : json_array());
    /* summary (docs/metrics.md) */
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
    run_predict_summary(&R->pred, sum, med);
    json_object_set_new(j, "summary", sum);
    json_object_set_new(j, "prediction", R->pred.time ? json_incref(R->pred.time) : json_null());
    json_t *mem = json_object();
    json_object_set_new(mem, "budget", R->budget ? json_integer((json_int_t)R->budget) : json_null());
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
                        "runtime_overhead", (json_int_t)R->dev.runtime_overhead, "reserve", (json_int_t)R->gb.reserve,
                        "budget_auto", R->gb.is_auto);
        if (R->dev_total) {
            json_object_set_new(dev, "used_at_end", json_integer((json_int_t)R->dev_used));
            json_object_set_new(dev, "untracked_at_end", json_integer((json_int_t)(R->dev_used - (int64_t)mem_get_stats(&R->E.mem)->total_cur)));
        }
    }
    json_object_set_new(mem, "device", dev);
    /* the high-water mark of the pool behind the tracked allocations: the tracked peak plus what the
     * pool keeps for reuse (block rounding, fragmentation) */
    json_object_set_new(mem, "device_pool_reserved", R->dev_total ? json_integer((json_int_t)R->pool_reserved) : json_null());
    json_object_set_new(j, "memory", mem);
    json_object_set_new(j, "comm", record_comm(comm_get_stats(&R->E.comm)));
    char date[64]; time_t now = time(NULL); strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    char mpiver[MPI_MAX_LIBRARY_VERSION_STRING] = "n/a"; int ml = 0;
    if (R->mpi) { MPI_Get_library_version(mpiver, &ml); char *nl = strchr(mpiver, ','); if (nl) *nl = 0; }
    json_object_set_new(j, "env", json_pack("{s:O, s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "hosts", R->hosts ? R->hosts : json_null(),
                                            "ranks", R->mesh.world, "backend", R->o.backend, "dtype", R->o.dtype,
                                            "compiler", MESHSWEEP_COMPILER, "mpi", mpiver, "blas", cpu_blas_config(),
                                            "git", MESHSWEEP_GIT, "date", date));
    json_t *env = json_object_get(j, "env");
    json_object_set_new(env, "blas_core", json_string(cpu_blas_core()));
    json_object_set_new(env, "blas_by_host", R->blas_by_host ? json_incref(R->blas_by_host) : json_null());
    json_object_set_new(env, "blas_hosts_differ", json_boolean(R->blas_differ));
    if (R->mpi) record_env_hosts(json_object_get(j, "env"), R->mesh.tp);
    if (R->mpi) record_env_launch(json_object_get(j, "env"), R->local_rank_from);
    char err[512];
    int rc = record_write_atomic(R->o.out, j, err, sizeof err);
    if (rc && !quiet) cli_say("%s", err);
    json_decref(j);
    return rc;
}



/* ------------------------------------------------------------------ the configuration the ranks share */
static int field(agree_field *f, int cap, int n, const char *label, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int field(agree_field *f, int cap, int n, const char *label, const char *fmt, ...) {
    if (n >= cap) return n;
    f[n].label = label;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f[n].value, sizeof f[n].value, fmt, ap);
    va_end(ap);
    return n + 1;
}
static const char *or_none(const char *s) { return s ? s : "(not given)"; }
static const char *kind(const char *path) { return !path ? "(not given)" : strcmp(path, "synthetic") ? "a file" : "synthetic"; }

int run_option_fields(const run_t *R, agree_field *f, int cap) {
    const run_cfg *o = &R->o;
    int n = 0;
    /* every option that changes what is computed or which collectives run; not --out and --log-every
     * (rank 0 alone writes and prints); paths by kind (agree_inputs compares what they hold) */
    n = field(f, cap, n, "--model", "%s", config_is_preset(o->model) ? o->model : "a config file");
    n = field(f, cap, n, "--tp", "%d", o->tp);
    n = field(f, cap, n, "--batch-size", "%s", o->batch);
    n = field(f, cap, n, "--seq-len", "%d", o->seq_len);
    n = field(f, cap, n, "--steps", "%d", o->steps);
    n = field(f, cap, n, "--lr", "%.17g", o->lr);
    n = field(f, cap, n, "--weight-decay", "%.17g", o->weight_decay);
    n = field(f, cap, n, "--beta1", "%.17g", o->beta1);
    n = field(f, cap, n, "--beta2", "%.17g", o->beta2);
    n = field(f, cap, n, "--adam-eps", "%.17g", o->adam_eps);
    n = field(f, cap, n, "--grad-clip", "%.17g", o->grad_clip);
    n = field(f, cap, n, "--schedule", "%s", o->schedule);
    n = field(f, cap, n, "--warmup", "%d", o->warmup);
    n = field(f, cap, n, "--min-lr-ratio", "%.17g", o->min_lr_ratio);
    n = field(f, cap, n, "--seed", "%lld", o->seed);
    n = field(f, cap, n, "--data", "%s", kind(o->data));
    n = field(f, cap, n, "--eval-data", "%s", kind(o->eval_data));
    n = field(f, cap, n, "--eval-every", "%d", o->eval_every);
    n = field(f, cap, n, "--eval-batches", "%d", o->eval_batches);
    n = field(f, cap, n, "--init", "%s", kind(o->init));
    n = field(f, cap, n, "--save", "%s", kind(o->save));
    n = field(f, cap, n, "--mem-budget", "%s", or_none(o->mem_budget));
    n = field(f, cap, n, "--mem-reserve", "%s", or_none(o->mem_reserve));
    n = field(f, cap, n, "--gpu", "%s", or_none(o->gpu));
    n = field(f, cap, n, "--world", "%d", o->world);
    n = field(f, cap, n, "--sequence-parallel", "%s", o->sp < 0 ? "default" : o->sp ? "on" : "off");
    n = field(f, cap, n, "--sp-activations", "%s", o->sp_activations);
    n = field(f, cap, n, "--no-prefetch", "%s", o->prefetch ? "prefetch" : "no prefetch");
    n = field(f, cap, n, "--checkpoint-activations", "%s", o->ckpt ? "on" : "off");
    n = field(f, cap, n, "--backend", "%s", o->backend);
    n = field(f, cap, n, "--comm", "%s%s", o->comm, o->comm_set ? "" : " (default)");
    n = field(f, cap, n, "--dtype", "%s", o->dtype ? o->dtype : "(default)");
    n = field(f, cap, n, "--warmup-steps-excluded", "%d", o->excluded);
    n = field(f, cap, n, "--peak-tflops", "%.17g", o->peak_tflops);
    return n;
}

int run_resolved_fields(const run_t *R, agree_field *f, int cap) {
    int n = 0;
    /* the model as resolved on each rank (a config file is read on each host): every field */
    json_t *m = config_to_json(&R->cfg);
    const char *key;
    json_t *v;
    json_object_foreach(m, key, v) {
        if (!strcmp(key, "name")) continue;
        json_t *one = json_is_object(v) ? v : NULL; /* rope_scaling: field by field, each short */
        const char *k2 = NULL;
        json_t *v2 = v;
        void *it = one ? json_object_iter(one) : NULL;
        if (one && !it) v2 = json_null();
        do {
            if (it) k2 = json_object_iter_key(it), v2 = json_object_iter_value(it);
            char *t = json_dumps(v2, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(17));
            n = field(f, cap, n, "--model", "%s%s%s %s", key, k2 ? "." : "", k2 ? k2 : "", t ? t : "?");
            free(t);
            it = it ? json_object_iter_next(one, it) : NULL;
        } while (it);
    }
    json_decref(m);
    n = field(f, cap, n, "--dtype", "%s", R->o.dtype);
    n = field(f, cap, n, "--mem-budget", "%llu%s", (unsigned long long)R->budget, R->gb.is_auto ? " (auto)" : "");
    return n;
}
