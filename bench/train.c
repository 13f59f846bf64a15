/* bench/train.c — one training run of one mesh (`mpirun -np W build/train --tp T ...`), or its memory
 * plan without running (`build/train --plan --world W ...`). Options come from one table that drives
 * both the parser and --help. The engine is core/; this file wires options, data, the step loop,
 * metrics and the run record (design 8) together. Exit codes: 0 ok, 1 failed, 2 bad usage or
 * configuration, 3 out of memory budget, 4 diverged. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/cli.h"
#include "core/comm.h"
#include "core/config.h"
#include "core/data.h"
#include "core/mem.h"
#include "core/mesh.h"
#include "core/metrics.h"
#include "core/model.h"
#include "core/optim.h"
#include "core/plan.h"
#include "core/record.h"
#include "core/safetensors.h"
#include "kernels/kernels.h"
#ifdef MESHSWEEP_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

#ifndef MESHSWEEP_GIT
#define MESHSWEEP_GIT "unknown"
#endif

/* ------------------------------------------------------------------ options */
typedef struct opts {
    const char *model, *batch, *data, *eval_data, *init, *save, *out, *mem_budget, *schedule, *backend, *comm, *dtype;
    int tp, seq_len, steps, warmup, eval_every, eval_batches, plan, world, sp, prefetch, ckpt, excluded, log_every;
    long long seed;
    double lr, weight_decay, beta1, beta2, adam_eps, grad_clip, min_lr_ratio, peak_tflops;
    int help, comm_set, world_set;
} opts;

#define F(x) offsetof(opts, x)
static const cli_opt OPTS[] = {
    {"model", CLI_STR, F(model), "NAME|PATH", "preset (tiny, small, llama3.2-1b, llama3.2-3b, llama3.1-8b) or HF config.json"},
    {"tp", CLI_INT, F(tp), "N", "tensor-parallel degree; dp = world / tp"},
    {"batch-size", CLI_STR, F(batch), "N|max", "sequences per DP rank (global batch = dp * N); max only with --plan"},
    {"seq-len", CLI_INT, F(seq_len), "T", "sequence length"},
    {"steps", CLI_INT, F(steps), "N", "optimizer steps"},
    {"lr", CLI_DBL, F(lr), "X", "peak learning rate"},
    {"weight-decay", CLI_DBL, F(weight_decay), "X", "AdamW weight decay on matrices (not on norm weights)"},
    {"beta1", CLI_DBL, F(beta1), "X", "AdamW beta1"},
    {"beta2", CLI_DBL, F(beta2), "X", "AdamW beta2"},
    {"adam-eps", CLI_DBL, F(adam_eps), "X", "AdamW epsilon"},
    {"grad-clip", CLI_DBL, F(grad_clip), "C", "clip the global gradient L2 norm to C (0: off)"},
    {"schedule", CLI_STR, F(schedule), "constant|cosine", "learning-rate schedule"},
    {"warmup", CLI_INT, F(warmup), "N", "linear warmup steps (cosine schedule)"},
    {"min-lr-ratio", CLI_DBL, F(min_lr_ratio), "X", "cosine: final lr = lr * X"},
    {"seed", CLI_LL, F(seed), "N", "initialisation seed (the same model on every mesh)"},
    {"data", CLI_STR, F(data), "PATH|synthetic", "training tokens (uint16 file) or synthetic random tokens"},
    {"eval-data", CLI_STR, F(eval_data), "PATH", "validation tokens"},
    {"eval-every", CLI_INT, F(eval_every), "N", "evaluate every N steps and at the end (0: only at the end, if --eval-data)"},
    {"eval-batches", CLI_INT, F(eval_batches), "N", "validation batches per evaluation"},
    {"init", CLI_STR, F(init), "FILE", "initialise from an HF-named safetensors file (F32 or BF16)"},
    {"save", CLI_STR, F(save), "FILE", "write the trained model as HF-named F32 safetensors"},
    {"out", CLI_STR, F(out), "FILE", "run record (or plan) as JSON, written atomically"},
    {"mem-budget", CLI_STR, F(mem_budget), "SIZE", "per-rank tracked memory budget: 96MiB, 80GB, 80GiB ..."},
    {"plan", CLI_ON, F(plan), NULL, "plan memory for one step without running (one process)"},
    {"world", CLI_INT, F(world), "W", "with --plan: world size to plan for"},
    {"sequence-parallel", CLI_ON, F(sp), NULL, "sequence parallel (default on when tp > 1)"},
    {"no-sequence-parallel", CLI_OFF, F(sp), NULL, "replicate the residual stream across the TP group"},
    {"no-prefetch", CLI_OFF, F(prefetch), NULL, "do not prefetch the next FSDP unit"},
    {"checkpoint-activations", CLI_ON, F(ckpt), NULL, "keep only each layer's input; recompute in backward"},
    {"backend", CLI_STR, F(backend), "cpu|cuda", "compute backend"},
    {"comm", CLI_STR, F(comm), "mpi|nccl", "collectives: mpi, or nccl (CUDA; the default for multi-rank CUDA runs with one GPU per rank)"},
    {"dtype", CLI_STR, F(dtype), "fp32|bf16", "compute precision (default: bf16 on cuda, fp32 on cpu; --plan takes either)"},
    {"warmup-steps-excluded", CLI_INT, F(excluded), "N", "steps left out of the median step time"},
    {"peak-tflops", CLI_DBL, F(peak_tflops), "X", "peak FLOP/s per rank for MFU (default: measured SGEMM on CPU)"},
    {"log-every", CLI_INT, F(log_every), "N", "progress line every N steps (rank 0, stderr)"},
    {"help", CLI_ON, F(help), NULL, "this text"},
};
#undef F
#define NOPTS (int)(sizeof OPTS / sizeof OPTS[0])

static int g_rank0 = 1;
static int g_mpi = 0;

/* one line on rank 0's stderr */
#define say cli_say

static void finish(int code) {
    if (g_mpi) MPI_Finalize();
    exit(code);
}

static void usage(void) {
    printf("usage: [mpirun -np W] build/train [options]\n       build/train --plan --world W [options]\n\n");
    cli_usage(stdout, OPTS, NOPTS);
    printf("\nexit codes: 0 ok, 1 failed, 2 bad usage or configuration, 3 out of memory budget, 4 diverged\n");
}

static int parse_args(opts *o, int argc, char **argv) {
    char err[256];
    if (cli_parse(OPTS, NOPTS, o, argc, argv, err, sizeof err) == 0) return 0;
    say("%s", err);
    return -1;
}

/* ------------------------------------------------------------------ run state */
typedef struct run {
    opts o;
    model_config cfg;
    mesh_t mesh;
    uint64_t budget;
    int B, T, G, max_batch;
    model_opts mo;
    json_t *steps, *evals;
    double *step_ms;
    int nsteps_done;
    double flops_per_token, peak_flops;
    mem_stats planned;
    int have_plan;
    const char *comm_name;   /* what carried the collectives: mpi, mpi-staged, nccl */
    int64_t dev_total, dev_used; /* CUDA: device memory total and in use at the end (runtime included) */
    json_t *hosts;               /* distinct host names of the ranks */
} run_t;

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

static const char *env_rank_str(void) {
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r) r = getenv("PMI_RANK");
    if (!r) r = getenv("PMIX_RANK");
    return r;
}

static json_t *config_json(const run_t *R) {
    const model_config *c = &R->cfg;
    const opts *o = &R->o;
    json_t *m = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:i, s:b, s:f}", "name", c->name,
                          "vocab_size", c->vocab_size, "hidden_size", c->hidden_size,
                          "intermediate_size", c->intermediate_size, "num_hidden_layers", c->num_hidden_layers,
                          "num_attention_heads", c->num_attention_heads, "num_key_value_heads", c->num_key_value_heads,
                          "rms_norm_eps", c->rms_norm_eps, "rope_theta", c->rope_theta,
                          "max_position_embeddings", c->max_position_embeddings,
                          "tie_word_embeddings", c->tie_word_embeddings, "initializer_range", c->initializer_range);
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
    json_object_set_new(j, "prefetch", json_boolean(o->prefetch));
    json_object_set_new(j, "checkpoint_activations", json_boolean(o->ckpt));
    json_object_set_new(j, "backend", json_string(o->backend));
    json_object_set_new(j, "comm", json_string(R->comm_name ? R->comm_name : o->comm));
    json_object_set_new(j, "dtype", json_string(o->dtype));
    json_object_set_new(j, "mem_budget", R->budget ? json_integer((json_int_t)R->budget) : json_null());
    json_object_set_new(j, "warmup_steps_excluded", json_integer(o->excluded));
    return j;
}

static json_t *plan_json(const mem_stats *s) {
    return json_pack("{s:I, s:o, s:o}", "peak", (json_int_t)s->total_peak, "by_category", record_categories(s->peak),
                     "at_peak", record_categories(s->at_peak));
}

/* the run record; on rank 0 only. mem: max over ranks (per category and total) */
/* returns -1 when the record could not be written (rank 0) */
static int write_record(run_t *R, const char *status, const char *error, const uint64_t *peaks, uint64_t total_peak,
                        const uint64_t *at_peak) {
    if (!g_rank0 || !R->o.out) return 0;
    json_t *j = json_object();
    json_object_set_new(j, "schema", json_string("meshsweep.run/1"));
    json_object_set_new(j, "status", json_string(status));
    if (error) json_object_set_new(j, "error", json_string(error));
    json_object_set_new(j, "config", config_json(R));
    json_object_set_new(j, "mesh", json_pack("{s:i, s:i, s:i}", "world", R->mesh.world, "dp", R->mesh.dp, "tp", R->mesh.tp));
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
    json_object_set_new(sum, "mfu", json_real(metrics_mfu(R->flops_per_token, tok_s_rank, R->peak_flops)));
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
    json_object_set_new(mem, "device", R->dev_total ? json_pack("{s:I, s:I, s:I}", "total", (json_int_t)R->dev_total,
                        "used_at_end", (json_int_t)R->dev_used, "untracked_at_end",
                        (json_int_t)(R->dev_used - (int64_t)mem_get_stats()->total_cur)) : json_null());
    json_object_set_new(j, "memory", mem);
    json_object_set_new(j, "comm", record_comm(comm_get_stats()));
    char date[64]; time_t now = time(NULL); strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    char mpiver[MPI_MAX_LIBRARY_VERSION_STRING] = "n/a"; int ml = 0;
    if (g_mpi) { MPI_Get_library_version(mpiver, &ml); char *nl = strchr(mpiver, ','); if (nl) *nl = 0; }
    json_object_set_new(j, "env", json_pack("{s:O, s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "hosts", R->hosts ? R->hosts : json_null(),
                                            "ranks", R->mesh.world, "backend", R->o.backend, "dtype", R->o.dtype,
                                            "compiler", "gcc " __VERSION__, "mpi", mpiver, "blas", "OpenBLAS",
                                            "git", MESHSWEEP_GIT, "date", date));
    char err[512];
    int rc = record_write_atomic(R->o.out, j, err, sizeof err);
    if (rc) say("%s", err);
    json_decref(j);
    return rc;
}

/* ------------------------------------------------------------------ plan mode */
static void print_plan_row(const char *label, const mem_stats *s) {
    printf("%-8s", label);
    for (int c = 0; c < MEM_NCAT; c++) printf(" %12.2f", s->peak[c] / 1048576.0);
    printf(" %12.2f\n", s->total_peak / 1048576.0);
}

static int do_plan(run_t *R) {
    char err[512];
    int W = R->o.world;
    mesh_t m;
    if (mesh_init(&m, W, 0, R->o.tp, err, sizeof err)) { say("%s", err); return 2; }
    R->mesh = m;
    if (R->max_batch) {
        if (!R->budget) { say("--batch-size max needs --mem-budget"); return 2; }
        int b = plan_max_batch(&R->cfg, W, R->o.tp, &R->mo, R->budget, err, sizeof err);
        if (b < 0) { say("%s", err); return 2; }
        R->B = b > 0 ? b : 1;
        R->mo.B = R->B;
        if (b == 0) {
            mem_stats s; int w;
            if (plan_world(&R->cfg, W, R->o.tp, &R->mo, 0, &s, &w, err, sizeof err)) { say("%s", err); return 2; }
            char need[32], have[32], st[32];
            mem_format(need, sizeof need, s.total_peak); mem_format(have, sizeof have, R->budget);
            mem_format(st, sizeof st, s.peak[MEM_PARAMS] + s.peak[MEM_GRADS] + s.peak[MEM_OPTIMIZER]);
            say("no batch size fits --mem-budget %s on mesh %dx%d: batch 1 needs %s per rank (model state alone %s)",
                have, m.dp, m.tp, need, st);
            R->B = 0;
        }
    }
    R->G = m.dp * R->B;
    printf("# memory plan: model %s, mesh %dx%d (dp x tp), world %d, batch %d per DP rank (global %d), seq %d, %s%s%s%s\n",
           R->cfg.name, m.dp, m.tp, W, R->B, R->G, R->T, R->o.dtype,
           R->mo.sequence_parallel && m.tp > 1 ? ", sequence parallel" : "", R->mo.checkpoint ? ", checkpointing" : "",
           R->mo.prefetch ? ", prefetch" : "");
    printf("%-8s", "# rank");
    for (int c = 0; c < MEM_NCAT; c++) printf(" %12s", mem_cat_names[c]);
    printf(" %12s\n", "peak");
    printf("%-8s", "#");
    for (int c = 0; c <= MEM_NCAT; c++) printf(" %12s", "MiB");
    printf("\n");
    json_t *ranks = json_array();
    mem_stats worst = {0}; int wr = 0;
    if (R->B > 0) {
        for (int r = 0; r < W; r++) {
            mem_stats s;
            if (plan_rank(&R->cfg, W, R->o.tp, r, &R->mo, R->budget, &s, err, sizeof err)) { say("%s", err); json_decref(ranks); return 2; }
            char lab[16]; snprintf(lab, sizeof lab, "%d", r);
            print_plan_row(lab, &s);
            json_array_append_new(ranks, json_pack("{s:i, s:I, s:o}", "rank", r, "peak", (json_int_t)s.total_peak,
                                                   "by_category", record_categories(s.peak)));
            if (r == 0 || s.total_peak > worst.total_peak) { worst = s; wr = r; }
        }
        char lab[16]; snprintf(lab, sizeof lab, "max(%d)", wr);
        print_plan_row(lab, &worst);
    }
    int fitsb = R->B > 0 && (!R->budget || worst.total_peak <= R->budget);
    if (R->budget) {
        char b[32]; mem_format(b, sizeof b, R->budget);
        printf("# budget %s: %s\n", b, fitsb ? "fits" : "does not fit");
    }
    if (R->max_batch) printf("# max batch per DP rank: %d (global %d)\n", R->B, R->G);
    if (R->o.out) {
        json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:o, s:b, s:I, s:i, s:o, s:o, s:s}",
                              "schema", "meshsweep.plan/1", "world", W, "dp", m.dp, "tp", m.tp, "batch_size", R->B,
                              "global_batch", R->G, "seq_len", R->T,
                              "mem_budget", R->budget ? json_integer((json_int_t)R->budget) : json_null(),
                              "fits", fitsb, "peak", (json_int_t)worst.total_peak, "most_loaded_rank", wr,
                              "by_category", record_categories(worst.peak), "ranks", ranks, "dtype", R->o.dtype);
        json_object_set_new(j, "at_peak", record_categories(worst.at_peak));
        if (record_write_atomic(R->o.out, j, err, sizeof err)) { say("%s", err); json_decref(j); return 1; }
        json_decref(j);
    } else {
        json_decref(ranks);
    }
    if (R->budget && !fitsb) {
        if (!R->max_batch) {
            char a[32], u[32], b[32];
            mem_format(a, sizeof a, worst.oom_bytes); mem_format(u, sizeof u, worst.oom_in_use); mem_format(b, sizeof b, R->budget);
            say("out of memory budget (planned): %s asked %s with %s in use, budget %s", mem_cat_names[worst.oom_cat], a, u, b);
        }
        return 3;
    }
    return 0;
}

/* ------------------------------------------------------------------ init from safetensors */
typedef struct { st_file *f; int failed; char err[512]; } st_ctx;
static void fill_st(void *ctx, const fsdp_seg *s, int64_t first, int64_t count, float *dst) {
    st_ctx *c = ctx;
    if (c->failed) return;
    const st_tensor *t = st_find(c->f, s->name);
    int64_t e = first, end = first + count;
    while (e < end) {
        int64_t r = e / s->cols, col = e % s->cols;
        int64_t run = s->cols - col;
        if (run > end - e) run = end - e;
        if (r >= s->valid_rows) memset(dst + (e - first), 0, (size_t)run * sizeof(float));
        else if (st_read_f32(c->f, t, (s->row0 + r) * s->full_cols + s->col0 + col, run, dst + (e - first), c->err, sizeof c->err)) {
            c->failed = 1; return;
        }
        e += run;
    }
}

static int check_st_shapes(model_t *M, st_file *f, char *err, size_t errlen) {
    for (int i = 0; i < M->fsdp.n; i++)
        for (int k = 0; k < M->units[i].nseg; k++) {
            const fsdp_seg *s = &M->units[i].seg[k];
            const st_tensor *t = st_find(f, s->name);
            if (!t) { snprintf(err, errlen, "%.1000s: tensor %s is missing", f->path, s->name); return -1; }
            int ok = s->ndim == 1 ? (t->ndim == 1 && t->shape[0] == s->full_cols)
                                  : (t->ndim == 2 && t->shape[0] == s->full_rows && t->shape[1] == s->full_cols);
            if (!ok) {
                if (s->ndim == 1) snprintf(err, errlen, "%.1000s: tensor %s has the wrong shape (expected [%lld])", f->path, s->name, (long long)s->full_cols);
                else snprintf(err, errlen, "%.1000s: tensor %s has the wrong shape (expected [%lld, %lld])", f->path, s->name,
                              (long long)s->full_rows, (long long)s->full_cols);
                return -1;
            }
        }
    return 0;
}

/* ------------------------------------------------------------------ save */
static int save_model(model_t *M, comm_group *tpg, const char *path, char *err, size_t errlen) {
    /* every rank gathers the TP-local units over dp; the TP group then gathers each segment to its
     * rank 0; the global rank 0 assembles full HF tensors and writes them. Host memory only. */
    int ntens = 0;
    for (int i = 0; i < M->fsdp.n; i++) ntens += M->units[i].nseg;
    size_t cap = (size_t)(ntens > 0 ? ntens : 1);
    const char **names = calloc(cap, sizeof *names);
    int *nd = calloc(cap, sizeof *nd);
    int64_t (*shapes)[4] = calloc(cap, sizeof *shapes);
    int *order = calloc(cap, sizeof *order);
    if (!names || !nd || !shapes || !order) {
        free(names); free(nd); free(shapes); free(order);
        snprintf(err, errlen, "save: out of host memory");
        return -1;
    }
    /* HF order: embedding, layers, final norm, lm_head (entry = unit * 16 + segment) */
    int no = 0;
    int root = M->L;
    order[no++] = root * 16 + 0;
    for (int i = 0; i < M->L; i++) for (int k = 0; k < M->units[i].nseg; k++) order[no++] = i * 16 + k;
    order[no++] = root * 16 + 1; order[no++] = root * 16 + 2;
    for (int j = 0; j < no; j++) {
        const fsdp_seg *s = &M->units[order[j] / 16].seg[order[j] % 16];
        names[j] = s->name; nd[j] = s->ndim;
        if (s->ndim == 1) shapes[j][0] = s->full_cols; else { shapes[j][0] = s->full_rows; shapes[j][1] = s->full_cols; }
    }
    int rank0 = M->mesh.rank == 0, rc = 0;
    st_writer *w = NULL;
    if (rank0) w = st_writer_begin(path, no, names, nd, (const int64_t(*)[4])shapes, err, errlen);
    int ok = rank0 ? w != NULL : 1;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) { free(names); free(nd); free(shapes); free(order); if (!rank0) snprintf(err, errlen, "save failed on rank 0"); return -1; }
    int cur_unit = -1;
    float *unit = NULL, *tmp = NULL, *seg_all = NULL, *full = NULL;
    for (int j = 0; j < no && rc == 0; j++) {
        int ui = order[j] / 16;
        fsdp_unit *u = &M->units[ui];
        const fsdp_seg *s = &u->seg[order[j] % 16];
        if (ui != cur_unit) {
            free(unit); free(tmp);
            unit = malloc((size_t)u->padded * sizeof(float)); tmp = malloc((size_t)u->shard * sizeof(float) + 4);
            if (!unit || !tmp) { snprintf(err, errlen, "save: out of host memory"); rc = -1; break; }
            fsdp_unit_to_host(&M->fsdp, ui, unit, tmp);
            cur_unit = ui;
        }
        size_t n = (size_t)(s->rows * s->cols);
        free(seg_all); free(full);
        seg_all = malloc(n * tpg->size * sizeof(float));
        full = rank0 ? malloc((size_t)(s->full_rows * s->full_cols) * sizeof(float)) : NULL;
        if (!seg_all || (rank0 && !full)) { snprintf(err, errlen, "save: out of host memory"); rc = -1; break; }
        comm_all_gather_host(tpg, seg_all, unit + s->off, n);
        if (!rank0) continue;
        for (int t = 0; t < tpg->size; t++) {
            const float *src = seg_all + (size_t)t * n;
            for (int64_t r = 0; r < s->rows; r++) {
                int64_t gr, gc0;
                if (s->split == SPLIT_ROWS) { gr = t * s->rows + r; gc0 = 0; }
                else if (s->split == SPLIT_COLS) { gr = r; gc0 = t * s->cols; }
                else { gr = r; gc0 = 0; }
                if (gr >= s->full_rows) continue; /* vocabulary padding */
                memcpy(full + gr * s->full_cols + gc0, src + r * s->cols, (size_t)s->cols * sizeof(float));
            }
            if (s->split == SPLIT_NONE) break;
        }
        if (st_writer_put(w, full, s->full_rows * s->full_cols, err, errlen)) rc = -1;
    }
    free(unit); free(tmp); free(seg_all); free(full);
    if (rank0 && w) {
        if (rc == 0) { if (st_writer_finish(w, err, errlen)) rc = -1; }
        else st_writer_abort(w);
    }
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    free(names); free(nd); free(shapes); free(order);
    return rc;
}

/* ------------------------------------------------------------------ helpers */
static double measure_peak_flops(void) {
    /* rank 0 measures the single-thread SGEMM rate while the others sleep, so the measurement is not
     * disturbed by oversubscribed ranks spinning in a barrier */
    double g = 0;
    if (g_rank0) g = cpu_sgemm_gflops(512, 0.3) * 1e9;
    if (g_mpi) {
        MPI_Request rq; int done = 0;
        MPI_Ibcast(&g, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD, &rq);
        while (!done) { MPI_Test(&rq, &done, MPI_STATUS_IGNORE); if (!done) { struct timespec ts = {0, 2000000}; nanosleep(&ts, NULL); } }
    }
    return g;
}

/* the breakdown at the total peak of the most loaded rank */
static void at_peak_of_max_rank(uint64_t at[MEM_NCAT]) {
    const mem_stats *s = mem_get_stats();
    struct { double v; int r; } in = {(double)s->total_peak, 0}, out;
    MPI_Comm_rank(MPI_COMM_WORLD, &in.r);
    MPI_Allreduce(&in, &out, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    unsigned long long v[MEM_NCAT];
    for (int c = 0; c < MEM_NCAT; c++) v[c] = s->at_peak[c];
    MPI_Bcast(v, MEM_NCAT, MPI_UNSIGNED_LONG_LONG, out.r, MPI_COMM_WORLD);
    for (int c = 0; c < MEM_NCAT; c++) at[c] = v[c];
}

static void max_mem_over_ranks(uint64_t peaks[MEM_NCAT], uint64_t *total) {
    const mem_stats *s = mem_get_stats();
    unsigned long long v[MEM_NCAT + 1];
    for (int c = 0; c < MEM_NCAT; c++) v[c] = s->peak[c];
    v[MEM_NCAT] = s->total_peak;
    if (g_mpi) MPI_Allreduce(MPI_IN_PLACE, v, MEM_NCAT + 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    for (int c = 0; c < MEM_NCAT; c++) peaks[c] = v[c];
    *total = v[MEM_NCAT];
}

static double evaluate(model_t *M, data_file *d, comm_group *dpg, int nb, int32_t *in, int32_t *tg, const run_t *R) {
    double sum = 0;
    for (int k = 0; k < nb; k++) {
        data_batch(d, k, R->G, R->mesh.dp_rank, R->B, R->T, in, tg);
        sum += model_forward_loss(M, in, tg);
    }
    comm_all_reduce_sum_f64(dpg, &sum, 1);
    return sum / ((double)nb * R->G * R->T);
}

/* ------------------------------------------------------------------ main */
int main(int argc, char **argv) {
    run_t R;
    memset(&R, 0, sizeof R);
    opts *o = &R.o;
    *o = (opts){.model = "tiny", .batch = "4", .data = "build/data/kjv/train.bin", .schedule = "constant", .backend = "cpu",
                .comm = "mpi", .dtype = NULL, .tp = 1, .seq_len = 128, .steps = 50, .eval_batches = 4, .world = 0,
                .sp = -1, .prefetch = 1, .excluded = 3, .log_every = 10, .seed = 1337, .lr = 3e-3, .weight_decay = 0.1,
                .beta1 = 0.9, .beta2 = 0.95, .adam_eps = 1e-8, .grad_clip = 1.0, .min_lr_ratio = 0.1};
    const char *er = env_rank_str();
    g_rank0 = !er || !strcmp(er, "0");
    cli_set_program("train"); cli_set_rank0(g_rank0);
    const char *comm_default = o->comm;
    if (parse_args(o, argc, argv)) return 2;
    o->comm_set = o->comm != comm_default;
    for (int i = 1; i < argc; i++) if (!strncmp(argv[i], "--world", 7)) o->world_set = 1;
    if (o->help) { if (g_rank0) usage(); return 0; }

    char err[4096];
    if (config_resolve(&R.cfg, o->model, err, sizeof err) || config_validate(&R.cfg, err, sizeof err)) { say("%s", err); return 2; }
    R.T = o->seq_len;
#define BAD(...) do { say(__VA_ARGS__); return 2; } while (0)
    if (o->tp < 1) BAD("--tp must be >= 1 (got %d)", o->tp);
    if (R.T < 1) BAD("--seq-len must be >= 1 (got %d)", R.T);
    if (R.T > R.cfg.max_position_embeddings) BAD("--seq-len %d exceeds max_position_embeddings %d of model %s", R.T, R.cfg.max_position_embeddings, R.cfg.name);
    if (o->steps < 0) BAD("--steps must be >= 0 (got %d)", o->steps);
    if (o->warmup < 0) BAD("--warmup must be >= 0");
    if (o->eval_every < 0 || o->eval_batches < 1) BAD("--eval-every must be >= 0 and --eval-batches >= 1");
    if (!(o->lr >= 0) || !(o->weight_decay >= 0) || !(o->grad_clip >= 0)) BAD("--lr, --weight-decay and --grad-clip must be >= 0");
    if (!(o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 && o->beta2 < 1)) BAD("--beta1 and --beta2 must be in [0, 1)");
    if (!(o->adam_eps > 0)) BAD("--adam-eps must be > 0");
    if (!(o->min_lr_ratio >= 0 && o->min_lr_ratio <= 1)) BAD("--min-lr-ratio must be in [0, 1]");
    if (o->log_every < 1) BAD("--log-every must be >= 1");
    if (o->excluded < 0) BAD("--warmup-steps-excluded must be >= 0");
    if (strcmp(o->schedule, "constant") && strcmp(o->schedule, "cosine")) BAD("--schedule must be constant or cosine (got '%s')", o->schedule);
    if (strcmp(o->backend, "cpu") && strcmp(o->backend, "cuda")) BAD("--backend must be cpu or cuda (got '%s')", o->backend);
    if (strcmp(o->comm, "mpi") && strcmp(o->comm, "nccl")) BAD("--comm must be mpi or nccl (got '%s')", o->comm);
    if (!o->dtype) o->dtype = strcmp(o->backend, "cuda") ? "fp32" : "bf16"; /* design 4.8: bf16 is CUDA's default */
    if (strcmp(o->dtype, "fp32") && strcmp(o->dtype, "bf16")) BAD("--dtype must be fp32 or bf16 (got '%s')", o->dtype);
    if (o->mem_budget) {
        if (parse_size(o->mem_budget, &R.budget) || R.budget == 0)
            BAD("--mem-budget '%s' is not a size (examples: 96MiB, 80GB, 80GiB)", o->mem_budget);
    }
    if (!strcmp(o->batch, "max")) {
        if (!o->plan) BAD("--batch-size max is only valid with --plan (the sweep confirms it with real runs)");
        R.max_batch = 1; R.B = 1;
    } else {
        long long b;
        if (parse_int(o->batch, 1, 1 << 24, &b)) BAD("--batch-size must be a positive integer or max (got '%s')", o->batch);
        R.B = (int)b;
    }
    if (o->world && !o->plan) BAD("--world is only valid with --plan (a run's world is the MPI world)");
    if ((int64_t)R.B * R.T > (1 << 26)) BAD("--batch-size %d x --seq-len %d = %lld tokens per rank is more than this engine supports (%d)",
                                             R.B, R.T, (long long)R.B * R.T, 1 << 26);
    R.mo = (model_opts){.B = R.B, .T = R.T, .sequence_parallel = o->sp != 0, .prefetch = o->prefetch,
                        .checkpoint = o->ckpt, .abytes = strcmp(o->dtype, "bf16") ? 4 : 2};

    if (o->plan) {
        if (o->world_set && o->world < 1) BAD("--world must be >= 1 (got %d)", o->world);
        if (!o->world) o->world = 1;
        if (o->world > 65536) BAD("--world %d is more ranks than --plan supports (65536)", o->world);
        if (o->out && record_check_writable(o->out, err, sizeof err)) { say("%s", err); return 2; }
        return do_plan(&R);
    }
    if (!strcmp(o->dtype, "bf16") && strcmp(o->backend, "cuda")) BAD("--dtype bf16 needs --backend cuda (the CPU engine is fp32; --plan accepts bf16)");
    if (!strcmp(o->comm, "nccl") && strcmp(o->backend, "cuda")) BAD("--comm nccl needs --backend cuda");
    if (o->out && record_check_writable(o->out, err, sizeof err)) BAD("%s", err);
    if (o->save && record_check_writable(o->save, err, sizeof err)) BAD("%s", err);
    const ops_t *ops = &ops_cpu;
    if (!strcmp(o->backend, "cuda")) {
#ifdef MESHSWEEP_CUDA
        if (cuda_device_count() <= 0) { say("--backend cuda: no CUDA device or driver found on this machine (use --backend cpu)"); return 1; }
        ops = &ops_cuda;
        if (!strcmp(o->dtype, "bf16")) ops = &ops_cuda_bf16;
#else
        BAD("--backend cuda: this build has no CUDA backend (nvcc was not found at build time)");
#endif
    }

    if ((int)ops->cbytes != R.mo.abytes) BAD("--dtype %s is not available on --backend %s in this build", o->dtype, o->backend);

    /* ---- MPI and mesh */
    MPI_Init(&argc, &argv);
    g_mpi = 1;
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    g_rank0 = rank == 0;
    cli_set_rank0(g_rank0);
    if (mesh_init(&R.mesh, world, rank, o->tp, err, sizeof err)) { say("%s", err); finish(2); }
    int use_nccl = 0;
#ifdef MESHSWEEP_CUDA
    if (ops != &ops_cpu) {
        /* one device per local rank (ranks of this host, by MPI_COMM_TYPE_SHARED); NCCL needs one GPU
         * per rank, so when ranks share a GPU the collectives fall back to host-staged MPI */
        int lr, ls;
        comm_local_rank(&lr, &ls);
        if (cuda_select_device(lr, err, sizeof err)) { say("%s", err); finish(1); }
        int ndev = cuda_device_count();
        use_nccl = !strcmp(o->comm, "nccl") || (!o->comm_set && world > 1);
        if (use_nccl && ls > ndev) {
            say("%d ranks share %d GPU(s) on this host: NCCL needs one GPU per rank, using host-staged MPI collectives", ls, ndev);
            use_nccl = 0;
        }
    }
#endif
    comm_set_device_ops(ops);
    {
        tp_shape sh;
        if (tp_shape_of(&sh, &R.cfg, o->tp, 0, err, sizeof err)) { say("%s", err); finish(2); }
        if (R.mo.sequence_parallel && o->tp > 1 && R.T % o->tp)
            { say("--seq-len %d is not divisible by --tp %d (required with sequence parallel; use --no-sequence-parallel)", R.T, o->tp); finish(2); }
    }
    R.G = R.mesh.dp * R.B;
    R.hosts = gather_hosts(world);
    cpu_blas_init();

    /* ---- data */
    data_file train, val;
    memset(&train, 0, sizeof train); memset(&val, 0, sizeof val);
    if (data_open(&train, o->data, R.cfg.vocab_size, R.T, (uint64_t)o->seed, err, sizeof err)) { say("%s", err); finish(2); }
    int have_eval = o->eval_data != NULL;
    if (have_eval && data_open(&val, o->eval_data, R.cfg.vocab_size, R.T, (uint64_t)o->seed + 1, err, sizeof err)) { say("%s", err); finish(2); }
    st_file stf; memset(&stf, 0, sizeof stf);
    if (o->init && st_open(&stf, o->init, err, sizeof err)) { say("%s", err); finish(2); }

    /* ---- plan first: an allocation past the budget is found before anything is allocated, on every
     * rank at once, so no rank is left waiting in a collective */
    if (plan_rank(&R.cfg, world, o->tp, rank, &R.mo, R.budget, &R.planned, err, sizeof err)) { say("%s", err); finish(2); }
    R.have_plan = 1;
    {
        int over = R.planned.over_budget, any = 0;
        MPI_Allreduce(&over, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any) {
            if (g_rank0) {
                char a[32], u[32], b[32];
                mem_format(a, sizeof a, R.planned.oom_bytes); mem_format(u, sizeof u, R.planned.oom_in_use); mem_format(b, sizeof b, R.budget);
                char msg[512];
                snprintf(msg, sizeof msg, "out of memory budget: %s asked %s (%llu bytes) with %s in use, budget %s (%llu bytes)",
                         mem_cat_names[R.planned.oom_cat], a, (unsigned long long)R.planned.oom_bytes, u, b, (unsigned long long)R.budget);
                say("%s", msg);
                uint64_t peaks[MEM_NCAT] = {0};
                write_record(&R, "oom", msg, peaks, R.planned.oom_peak_before, NULL);
            }
            finish(3);
        }
    }

    /* ---- engine */
    mem_init(ops, 0, R.budget);
    comm_group tpg, dpg, wg;
    comm_mpi_groups(&tpg, &dpg, o->tp);
    comm_mpi_world(&wg);
    if (use_nccl && (comm_nccl_attach(&tpg, err, sizeof err) || comm_nccl_attach(&dpg, err, sizeof err))) { say("%s", err); finish(1); }
    R.comm_name = use_nccl ? "nccl" : (ops != &ops_cpu && world > 1 ? "mpi-staged" : "mpi");
    model_t M;
    if (model_init(&M, &R.cfg, &R.mesh, &tpg, &dpg, ops, &R.mo, err, sizeof err)) { say("%s", err); finish(2); }
    if (o->init) {
        if (check_st_shapes(&M, &stf, err, sizeof err)) { say("%s", err); finish(2); }
        st_ctx c = {.f = &stf};
        fsdp_fill_params(&M.fsdp, fill_st, &c);
        int bad = c.failed;
        MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (bad) { if (c.failed) fprintf(stderr, "train: %s\n", c.err); else say("reading %s failed on another rank", o->init); finish(2); }
        st_close(&stf);
    } else {
        model_init_params(&M, (uint64_t)o->seed);
    }
    R.flops_per_token = metrics_flops_per_token(&R.cfg, R.T);
    R.peak_flops = o->peak_tflops > 0 ? o->peak_tflops * 1e12 : (ops == &ops_cpu ? measure_peak_flops() : 0);
#ifdef MESHSWEEP_CUDA
    if (ops != &ops_cpu && !(o->peak_tflops > 0)) R.peak_flops = cuda_peak_bf16_tflops(cuda_device_name()) * 1e12;
#endif
    optim_cfg oc = {.lr = o->lr, .weight_decay = o->weight_decay, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->adam_eps,
                    .grad_clip = o->grad_clip, .min_lr_ratio = o->min_lr_ratio, .warmup = o->warmup,
                    .cosine = !strcmp(o->schedule, "cosine")};
    if (oc.cosine && oc.warmup >= o->steps && o->steps > 0) { say("--warmup %d must be below --steps %d", o->warmup, o->steps); finish(2); }

    int32_t *in = malloc((size_t)R.B * R.T * sizeof(int32_t)), *tg = malloc((size_t)R.B * R.T * sizeof(int32_t));
    R.step_ms = calloc((size_t)o->steps + 1, sizeof(double));
    R.steps = json_array(); R.evals = json_array();
    if (!in || !tg || !R.step_ms) { say("out of host memory"); finish(1); }
    comm_reset_stats();
    const char *status = "ok";
    int code = 0;
    double scale = 1.0 / ((double)R.G * R.T);
    double t_start = comm_now_ms();
    for (int s = 0; s < o->steps; s++) {
        data_batch(&train, s, R.G, R.mesh.dp_rank, R.B, R.T, in, tg);
        MPI_Barrier(MPI_COMM_WORLD);
        double comm0 = 0, bytes0 = 0;
        const comm_stats *cs = comm_get_stats();
        for (int k = 0; k < COMM_NKIND; k++) { comm0 += cs->ms[k]; bytes0 += (double)cs->bytes[k]; }
        double t0 = comm_now_ms();
        double loss = model_forward_backward(&M, in, tg, (float)scale);
        comm_all_reduce_sum_f64(&dpg, &loss, 1);
        loss *= scale;
        double lr = 0, norm = optim_step(&M, &wg, &oc, s, o->steps, &lr);
        ops->synchronize();
        double t1 = comm_now_ms(), comm1 = 0, bytes1 = 0;
        for (int k = 0; k < COMM_NKIND; k++) { comm1 += cs->ms[k]; bytes1 += (double)cs->bytes[k]; }
        double tm[2] = {t1 - t0, comm1 - comm0};
        MPI_Allreduce(MPI_IN_PLACE, tm, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        R.step_ms[s] = tm[0];
        R.nsteps_done = s + 1;
        double tok = (double)R.G * R.T, tok_s = tok / (tm[0] / 1e3);
        json_t *st = json_object();
        json_object_set_new(st, "step", json_integer(s + 1));
        json_object_set_new(st, "loss", isfinite(loss) ? json_real(loss) : json_null());
        json_object_set_new(st, "grad_norm", isfinite(norm) ? json_real(norm) : json_null());
        json_object_set_new(st, "lr", json_real(lr));
        json_object_set_new(st, "ms", json_real(tm[0]));
        json_object_set_new(st, "tok_s", json_real(tok_s));
        json_object_set_new(st, "tok_s_per_rank", json_real(tok_s / world));
        json_object_set_new(st, "comm_ms", json_real(tm[1]));
        json_object_set_new(st, "compute_ms", json_real(tm[0] - tm[1]));
        json_object_set_new(st, "comm_bytes", json_integer((json_int_t)(bytes1 - bytes0)));
        json_object_set_new(st, "tokens", json_integer((json_int_t)(tok * (s + 1))));
        json_array_append_new(R.steps, st);
        if (!isfinite(loss) || !isfinite(norm)) {
            say("diverged at step %d: loss %g, grad norm %g", s + 1, loss, norm);
            status = "diverged"; code = 4;
            break;
        }
        int last = s + 1 == o->steps;
        if (have_eval && ((o->eval_every && (s + 1) % o->eval_every == 0) || last)) {
            double el = evaluate(&M, &val, &dpg, o->eval_batches, in, tg, &R);
            json_array_append_new(R.evals, json_pack("{s:i, s:f}", "step", s + 1, "loss", el));
            if (g_rank0) fprintf(stderr, "train: step %d eval loss %.4f\n", s + 1, el);
        }
        if (g_rank0 && ((s + 1) % o->log_every == 0 || s == 0 || last)) {
            double el = (comm_now_ms() - t_start) / 1e3, eta = el / (s + 1) * (o->steps - s - 1);
            char mb[32]; mem_format(mb, sizeof mb, mem_get_stats()->total_peak);
            fprintf(stderr, "train: step %d/%d loss %.4f gnorm %.3f lr %.2e %.0f tok/s %.1f ms mem %s eta %.0fs\n",
                    s + 1, o->steps, loss, norm, lr, tok_s, tm[0], mb, eta);
        }
    }
    uint64_t peaks[MEM_NCAT], total, at[MEM_NCAT];
#ifdef MESHSWEEP_CUDA
    if (ops != &ops_cpu) {
        size_t fb = 0, tb = 0;
        cuda_mem_info(&fb, &tb);
        R.dev_total = (int64_t)tb; R.dev_used = (int64_t)(tb - fb);
    }
#endif
    max_mem_over_ranks(peaks, &total);
    at_peak_of_max_rank(at);
    if (write_record(&R, status, code ? "non-finite loss or gradient norm" : NULL, peaks, total, at) && code == 0) code = 1;
    if (code == 0 && o->save) {
        if (save_model(&M, &tpg, o->save, err, sizeof err)) { say("%s", err); code = 1; }
    }
    model_free(&M);
    mem_shutdown();
    data_close(&train);
    if (have_eval) data_close(&val);
    free(in); free(tg); free(R.step_ms);
    json_decref(R.steps); json_decref(R.evals); json_decref(R.hosts);
    finish(code);
    return code;
}
