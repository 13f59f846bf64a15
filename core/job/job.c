/* core/job/job.c — the configuration of one run, checked and derived once (job_build), its outputs checked
 * (job_check_outputs), what its ranks compare (job_option_fields, job_resolved_fields) and its record's
 * "config" (job_config_json). The option table is core/job/options.c. */
#include "core/job/job.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/common/files.h"
#include "core/common/parse.h"
#include "core/engine/plan.h"
#include "core/engine/tp.h"

void job_init(job_t *j) {
    memset(j, 0, sizeof *j);
    j->o = (job_opts){.model = "tiny", .batch = "4", .data = "build/data/kjv/train.bin", .schedule = "constant",
                      .backend = "cpu", .sp_activations = "local", .ckpt = "none", .accum_reduce = "each", .comm = "mpi",
                      .deterministic = "on",
                      .dtype = NULL, .tp = 1, .replicate = 1, .seq_len = 128, .steps = 50, .eval_batches = 4, .world = 0, .sp = -1,
                      .prefetch = 1, .excluded = 3, .log_every = 10, .seed = 1337, .lr = 3e-3, .weight_decay = 0.1,
                      .beta1 = 0.9, .beta2 = 0.95, .adam_eps = 1e-8, .grad_clip = 1.0, .min_lr_ratio = 0.1};
}

/* ------------------------------------------------------------------ the budget */
int job_is_auto(const char *s) { return s && !strcasecmp(s, "auto"); }

int job_plan_budget(const catalog_gpu *g, uint64_t reserve, uint64_t *budget, char *err, size_t errlen) {
    if (g->usable_bytes <= g->overhead_bytes + reserve) {
        snprintf(err, errlen, "--gpu %s: the reserve (%llu bytes) and the runtime overhead (%llu bytes) leave "
                 "nothing of its %llu bytes", g->name, (unsigned long long)reserve,
                 (unsigned long long)g->overhead_bytes, (unsigned long long)g->usable_bytes);
        return -1;
    }
    *budget = g->usable_bytes - g->overhead_bytes - reserve;
    return 0;
}

int job_resolve_budget(const job_opts *o, job_budget *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->reserve = JOB_DEFAULT_RESERVE_BYTES;
    char names[128];
    catalog_gpu_names(names, sizeof names);
    if (o->gpu && !(out->gpu = catalog_gpu_find(o->gpu))) {
        snprintf(err, errlen, "--gpu '%s' is not a known device (known: %s)", o->gpu, names);
        return -1;
    }
    int autob = job_is_auto(o->mem_budget);
    if (o->mem_reserve) {
        if (parse_size(o->mem_reserve, &out->reserve)) {
            snprintf(err, errlen, "--mem-reserve '%s' is not a size (examples: 512MiB, 1GiB)", o->mem_reserve);
            return -1;
        }
        if (!autob && !out->gpu) {
            snprintf(err, errlen, "--mem-reserve applies only with --mem-budget auto or --gpu NAME");
            return -1;
        }
    }
    if (o->mem_budget && !autob) {
        if (parse_size(o->mem_budget, &out->budget) || out->budget == 0) {
            snprintf(err, errlen, "--mem-budget '%s' is not a size or auto (examples: 96MiB, 80GB, 80GiB, auto)", o->mem_budget);
            return -1;
        }
        if (out->gpu) {
            snprintf(err, errlen, "--mem-budget %s and --gpu %s are two budgets: give one (--gpu plans against "
                     "what that device holds)", o->mem_budget, o->gpu);
            return -1;
        }
        return 0;
    }
    if (o->plan) {
        if (autob && !out->gpu) {
            snprintf(err, errlen, "--plan --mem-budget auto needs --gpu NAME (no device is measured in a plan; known: %s)", names);
            return -1;
        }
        if (out->gpu) return job_plan_budget(out->gpu, out->reserve, &out->budget, err, errlen);
        return 0;
    }
    if ((autob || out->gpu) && strcmp(o->backend, "cuda")) {
        snprintf(err, errlen, "%s needs --backend cuda (or --plan --gpu NAME to plan for a GPU)",
                 autob ? "--mem-budget auto" : "--gpu");
        return -1;
    }
    out->is_auto = autob || out->gpu != NULL;
    return 0;
}

/* ------------------------------------------------------------------ accumulation */
/* the divisors of n, as "1, 2, 3, 4, 6, ..." (the first 16) */
static void divisors(char *buf, size_t cap, int n) {
    size_t o = 0; int k = 0;
    buf[0] = 0;
    for (int d = 1; d <= n && o + 16 < cap; d++) {
        if (n % d) continue;
        if (k++ == 16) { snprintf(buf + o, cap - o, ", ..., %d", n); return; }
        o += (size_t)snprintf(buf + o, cap - o, "%s%d", k > 1 ? ", " : "", d);
    }
}

int job_accum_of(int global_batch, int grad_accum, int dp, int tp, int B, int *n, char *err, size_t errlen) {
    int G = global_batch;
    *n = grad_accum > 0 ? grad_accum : 1;
    if (G > 0) {
        char dv[256];
        if (G % dp) {
            snprintf(err, errlen, "--global-batch %d is not divisible by dp %d of mesh %dx%d (give a multiple of %d)", G, dp, dp, tp, dp);
            return -1;
        }
        int per = G / dp;
        if (per % B) {
            divisors(dv, sizeof dv, per);
            snprintf(err, errlen, "--global-batch %d on mesh %dx%d is %d sequences per DP rank, not a multiple of --batch-size %d "
                     "(micro-batches that divide %d: %s)", G, dp, tp, per, B, per, dv);
            return -1;
        }
        if (grad_accum > 0 && grad_accum != per / B) {
            snprintf(err, errlen, "--grad-accum %d disagrees with --global-batch %d: dp %d x --batch-size %d x %d = %lld (give one of "
                     "the two, or --grad-accum %d)", grad_accum, G, dp, B, grad_accum, (long long)dp * B * grad_accum, per / B);
            return -1;
        }
        *n = per / B;
    }
    if (*n > PLAN_MAX_GRAD_ACCUM) {
        snprintf(err, errlen, "%d micro-batches per step is more than this engine supports (%d)", *n, PLAN_MAX_GRAD_ACCUM);
        return -1;
    }
    if ((int64_t)dp * B * *n > 2147483647) {
        snprintf(err, errlen, "a global batch of dp %d x batch %d x %d micro-batches is more sequences than this engine supports "
                 "(2147483647)", dp, B, *n);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ the checks */
#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return 2; } while (0)

int job_build(job_t *j, int world, int rank, char *err, size_t errlen) {
    job_opts *o = &j->o;
    char e[4096];
    if (catalog_model(&j->cfg, o->model, e, sizeof e) || config_validate(&j->cfg, e, sizeof e)) BAD("%s", e);
    j->T = o->seq_len;
    if (o->tp < 1) BAD("--tp must be >= 1 (got %d)", o->tp);
    if (j->T < 1) BAD("--seq-len must be >= 1 (got %d)", j->T);
    if (config_check_seq_len(&j->cfg, j->T, e, sizeof e)) BAD("--seq-len %s", e);
    if (o->steps < 0) BAD("--steps must be >= 0 (got %d)", o->steps);
    if (o->warmup < 0) BAD("--warmup must be >= 0");
    if (o->eval_every < 0 || o->eval_batches < 1) BAD("--eval-every must be >= 0 and --eval-batches >= 1");
    if (o->eval_every > 0 && !o->eval_data && !o->plan) BAD("--eval-every %d needs --eval-data (validation tokens to evaluate on)", o->eval_every);
    if (!(o->lr >= 0) || !(o->weight_decay >= 0) || !(o->grad_clip >= 0)) BAD("--lr, --weight-decay and --grad-clip must be >= 0");
    if (!(o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 && o->beta2 < 1)) BAD("--beta1 and --beta2 must be in [0, 1)");
    if (!(o->adam_eps > 0)) BAD("--adam-eps must be > 0");
    if (!(o->min_lr_ratio >= 0 && o->min_lr_ratio <= 1)) BAD("--min-lr-ratio must be in [0, 1]");
    if (o->log_every < 1) BAD("--log-every must be >= 1");
    if (o->excluded < 0) BAD("--warmup-steps-excluded must be >= 0");
    if (!(o->peak_tflops >= 0)) BAD("--peak-tflops must be >= 0 (got %g; 0: measured on CPU, the datasheet value on CUDA)", o->peak_tflops);
    if (strcmp(o->schedule, "constant") && strcmp(o->schedule, "cosine")) BAD("--schedule must be constant or cosine (got '%s')", o->schedule);
    /* accepted and ignored would be wrong: warmup belongs to the cosine schedule */
    if (o->warmup > 0 && strcmp(o->schedule, "cosine")) BAD("--warmup %d applies to --schedule cosine only (the constant schedule has no warmup)", o->warmup);
    if (!strcmp(o->schedule, "cosine") && o->steps > 0 && o->warmup >= o->steps) BAD("--warmup %d must be below --steps %d", o->warmup, o->steps);
    if (strcmp(o->backend, "cpu") && strcmp(o->backend, "cuda")) BAD("--backend must be cpu or cuda (got '%s')", o->backend);
    if (strcmp(o->comm, "mpi") && strcmp(o->comm, "nccl")) BAD("--comm must be mpi or nccl (got '%s')", o->comm);
    if (!o->dtype) o->dtype = strcmp(o->backend, "cuda") ? "fp32" : "bf16"; /* docs/semantics.md#mixed-precision-bf16: bf16 is CUDA's default */
    if (strcmp(o->dtype, "fp32") && strcmp(o->dtype, "bf16")) BAD("--dtype must be fp32 or bf16 (got '%s')", o->dtype);
    j->dtype = !strcmp(o->dtype, "bf16") ? DTYPE_BF16 : DTYPE_F32;
    if (job_resolve_budget(o, &j->budget, e, sizeof e)) BAD("%s", e);
    j->max_batch = 0;
    if (!strcmp(o->batch, "max")) {
        if (!o->plan) BAD("--batch-size max is only valid with --plan (the sweep confirms it with real runs)");
        j->max_batch = 1; j->B = 1;
    } else {
        long long b;
        if (parse_int(o->batch, 1, PLAN_MAX_BATCH, &b)) BAD("--batch-size must be a positive integer or max (got '%s')", o->batch);
        j->B = (int)b;
    }
    if (job_given(j, "world") && !o->plan) BAD("--world is only valid with --plan (a run's world is the MPI world)");
    if (job_given(j, "gpus-per-host") && !o->plan) BAD("--gpus-per-host is only valid with --plan (a run's placement is the launcher's)");
    if ((int64_t)j->B * j->T > PLAN_MAX_TOKENS) BAD("--batch-size %d x --seq-len %d = %lld tokens per rank is more than this engine supports (%d)",
                                                  j->B, j->T, (long long)j->B * j->T, (int)PLAN_MAX_TOKENS);
    int ckpt;
    if (model_parse_checkpointing(o->ckpt, &j->cfg, &ckpt, e, sizeof e)) BAD("%s", e);
    if (!strncmp(o->ckpt, "every:", 6)) { /* one spelling per K: every:01 or every:+2 would name a cell twice */
        char canon[32];
        snprintf(canon, sizeof canon, "every:%d", ckpt);
        if (strcmp(canon, o->ckpt)) BAD("--checkpoint-activations %.80s: write K in digits without sign or leading zeros (%s)", o->ckpt, canon);
    }
    int ga_set = job_given(j, "grad-accum"), gb_set = job_given(j, "global-batch");
    if (ga_set && (o->grad_accum < 1 || o->grad_accum > PLAN_MAX_GRAD_ACCUM))
        BAD("--grad-accum must be in 1..%d (got %d)", PLAN_MAX_GRAD_ACCUM, o->grad_accum);
    if (gb_set && o->global_batch < 1) BAD("--global-batch must be >= 1 (got %d)", o->global_batch);
    if (!ga_set) o->grad_accum = 0;
    if (!gb_set) o->global_batch = 0;
    int reduce_last = !strcmp(o->accum_reduce, "last");
    if (!reduce_last && strcmp(o->accum_reduce, "each")) BAD("--accum-reduce must be each or last (got '%s')", o->accum_reduce);
    int nondet = !strcmp(o->deterministic, "off");
    if (!nondet && strcmp(o->deterministic, "on")) BAD("--deterministic must be on or off (got '%s')", o->deterministic);
    int sp_local = !strcmp(o->sp_activations, "local");
    if (!sp_local && strcmp(o->sp_activations, "gathered")) BAD("--sp-activations must be local or gathered (got '%s')", o->sp_activations);
    j->mo = (model_opts){.B = j->B, .T = j->T, .sequence_parallel = o->sp != 0, .sp_local = sp_local, .prefetch = o->prefetch,
                         .checkpoint = ckpt, .attention_flash = !strcmp(o->backend, "cuda"), .grad_accum = o->grad_accum,
                         .accum_reduce_last = reduce_last, .replicate = o->replicate, .nondeterministic = nondet};
    if (o->plan) {
        if (job_given(j, "world") && o->world < 1) BAD("--world must be >= 1 (got %d)", o->world);
        if (!o->world) o->world = 1;
        if (o->world > 65536) BAD("--world %d is more ranks than --plan supports (65536)", o->world);
        if (o->save) BAD("--save is not used with --plan (nothing is trained)");
        if (job_given(j, "gpus-per-host") && (o->gpus_per_host < 1 || o->gpus_per_host > o->world))
            BAD("--gpus-per-host must be in 1..--world %d (got %d)", o->world, o->gpus_per_host);
        if (job_given(j, "gpus-per-host") && o->world % o->gpus_per_host)
            BAD("--gpus-per-host %d does not divide --world %d (every host holds the same number of ranks)", o->gpus_per_host, o->world);
        world = o->world;
        rank = 0;
    } else {
        if (!strcmp(o->dtype, "bf16") && strcmp(o->backend, "cuda")) BAD("--dtype bf16 needs --backend cuda (the CPU engine is fp32; --plan accepts bf16)");
        if (!strcmp(o->comm, "nccl") && strcmp(o->backend, "cuda")) BAD("--comm nccl needs --backend cuda");
    }
    /* the mesh: the one mesh_init of a run or a plan */
    if (mesh_init_hsdp(&j->mesh, world, rank, o->replicate, o->tp, e, sizeof e)) BAD("%s", e);
    if (o->replicate > 1 && !o->plan && strcmp(o->backend, "cpu"))
        BAD("--replicate %d: HSDP runs on --backend cpu only in this build (--plan plans it for any device)", o->replicate);
    tp_shape sh;
    if (tp_shape_of(&sh, &j->cfg, o->tp, 0, e, sizeof e)) BAD("%s", e);
    if (j->mo.sequence_parallel && o->tp > 1 && j->T % o->tp)
        BAD("--seq-len %d is not divisible by --tp %d (required with sequence parallel; use --no-sequence-parallel)", j->T, o->tp);
    /* with --batch-size max and --global-batch the plan picks the micro-batch, then the micro-batches */
    if (j->max_batch && gb_set) { j->N = 0; j->G = 0; return 0; }
    if (job_accum_of(o->global_batch, o->grad_accum, j->mesh.dp, j->mesh.tp, j->B, &j->N, e, sizeof e)) BAD("%s", e);
    j->mo.grad_accum = j->N;
    j->G = j->mesh.dp * j->B * j->N;
    return 0;
}
#undef BAD

int job_check_outputs(const job_t *j, char *err, size_t errlen) {
    const job_opts *o = &j->o;
    const char *outs[2][2] = {{"--out", o->out}, {"--save", o->save}};
    const char *ins[4][2] = {{"--data", strcmp(o->data, "synthetic") ? o->data : NULL}, {"--eval-data", o->eval_data},
                             {"--init", o->init}, {"--model", catalog_is_preset(o->model) ? NULL : o->model}};
    for (int i = 0; i < 2; i++) {
        if (!outs[i][1]) continue;
        if (files_check_writable(outs[i][1], err, errlen)) return -1;
        for (int k = 0; k < 4; k++)
            if (files_same(outs[i][1], ins[k][1])) {
                snprintf(err, errlen, "%s %s is also %s: an output may not overwrite an input", outs[i][0], outs[i][1], ins[k][0]);
                return -1;
            }
    }
    if (files_same(o->out, o->save)) { snprintf(err, errlen, "--out %s is also --save: give two files", o->out); return -1; }
    return 0;
}

/* ------------------------------------------------------------------ what the ranks compare */
static int field(job_field *f, int cap, int n, const char *label, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int field(job_field *f, int cap, int n, const char *label, const char *fmt, ...) {
    if (n >= cap) return n;
    f[n].label = label;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f[n].value, sizeof f[n].value, fmt, ap);
    va_end(ap);
    return n + 1;
}

int job_option_fields(const job_t *j, job_field *f, int cap) {
    int n = 0;
    /* every option of the table that is not local, in the table's order (a new option is compared
     * without a line here); a flag pair once, by its field; files by kind (their bytes: agree_inputs) */
    for (int i = 0; i < job_noptions; i++) {
        const cli_opt *op = &job_options[i];
        if (op->flags & CLI_LOCAL) continue;
        if (op->type == CLI_OFF) {
            int paired = 0; /* shown with its CLI_ON partner when there is one */
            for (int k = 0; k < job_noptions; k++) paired |= job_options[k].off == op->off && job_options[k].type == CLI_ON;
            if (paired) continue;
        }
        int given = j->given[i];
        for (int k = 0; k < job_noptions; k++) if (job_options[k].off == op->off) given |= j->given[k];
        char v[JOB_FIELD_LEN - 16];
        /* a string option's field is a pointer; any other field is not (reading one as a pointer is a
         * misaligned load of an int or a double) */
        int str = op->type == CLI_STR || op->type == CLI_OPT;
        const char *s = str ? *(const char *const *)((const char *)&j->o + op->off) : NULL;
        if (str && (op->flags & CLI_NAME_OR_PATH)) snprintf(v, sizeof v, "%s", !s ? "(not given)" : catalog_is_preset(s) ? s : "a config file");
        else if (str && (op->flags & CLI_PATH)) snprintf(v, sizeof v, "%s", !s ? "(not given)" : strcmp(s, "synthetic") ? "a file" : "synthetic");
        else if (str && !s) snprintf(v, sizeof v, "(not given)");
        else cli_value_text(op, &j->o, v, sizeof v);
        static char names[JOB_MAX_OPTS][40]; /* the label: --name (the table's names are short) */
        snprintf(names[i], sizeof names[i], "--%s", op->name);
        n = field(f, cap, n, names[i], "%s%s", v, given || !strcmp(v, "(not given)") ? "" : " (default)");
    }
    return n;
}

int job_resolved_fields(const job_t *j, job_field *f, int cap) {
    int n = 0;
    /* the model as resolved on each rank (a config file is read on each host): every field */
    json_t *m = config_to_json(&j->cfg);
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
    n = field(f, cap, n, "--dtype", "%s", j->o.dtype);
    n = field(f, cap, n, "--mem-budget", "%llu%s", (unsigned long long)j->budget.budget, j->budget.is_auto ? " (auto)" : "");
    n = field(f, cap, n, "--grad-accum", "%d micro-batches", j->N);
    return n;
}

/* ------------------------------------------------------------------ the record's "config" */
json_t *job_config_json(const job_t *J, const char *comm) {
    const job_opts *o = &J->o;
    json_t *j = json_object();
#define K(key, val) json_object_set_new(j, job_record_key(JOB_KEY_##key), (val))
    K(MODEL, config_to_json(&J->cfg)); /* HF names, rope_scaling included */
    K(SEQ_LEN, json_integer(J->T));
    K(STEPS, json_integer(o->steps));
    K(LR, json_real(o->lr));
    K(WEIGHT_DECAY, json_real(o->weight_decay));
    K(BETA1, json_real(o->beta1));
    K(BETA2, json_real(o->beta2));
    K(ADAM_EPS, json_real(o->adam_eps));
    K(GRAD_CLIP, json_real(o->grad_clip));
    K(SCHEDULE, json_string(o->schedule));
    K(WARMUP, json_integer(o->warmup));
    K(MIN_LR_RATIO, json_real(o->min_lr_ratio));
    K(SEED, json_integer(o->seed));
    K(DATA, json_string(o->data));
    K(EVAL_DATA, o->eval_data ? json_string(o->eval_data) : json_null());
    K(EVAL_EVERY, json_integer(o->eval_every));
    K(EVAL_BATCHES, json_integer(o->eval_batches));
    K(INIT, o->init ? json_string(o->init) : json_null());
    K(SEQUENCE_PARALLEL, json_boolean(J->mo.sequence_parallel && J->mesh.tp > 1));
    K(SP_ACTIVATIONS, json_string(J->mo.sp_local ? "local" : "gathered"));
    K(PREFETCH, json_boolean(o->prefetch));
    K(CHECKPOINT_ACTIVATIONS, json_string(o->ckpt));
    K(GRAD_ACCUM, json_integer(J->N));
    K(ACCUM_REDUCE, json_string(o->accum_reduce));
    K(BACKEND, json_string(o->backend));
    K(DETERMINISTIC, json_boolean(!J->mo.nondeterministic));
    K(COMM, json_string(comm ? comm : o->comm));
    K(DTYPE, json_string(o->dtype));
    K(MEM_BUDGET, J->budget.budget ? json_integer((json_int_t)J->budget.budget) : json_null());
    K(MEM_BUDGET_AUTO, json_boolean(J->budget.is_auto));
    K(MEM_RESERVE, J->budget.is_auto || J->budget.gpu ? json_integer((json_int_t)J->budget.reserve) : json_null());
    K(GPU, J->budget.gpu ? json_string(J->budget.gpu->name) : json_null());
    K(WARMUP_STEPS_EXCLUDED, json_integer(o->excluded));
#undef K
    return j;
}

/* ------------------------------------------------------------------ the record's keys (keys.h) */
static const char *const KEYS[JOB_NKEYS][2] = {
#define JOB_KEY_ROW(id, key, where) {key, where},
    JOB_RECORD_KEYS(JOB_KEY_ROW)
#undef JOB_KEY_ROW
};
const char *job_record_key(job_key k) { return k >= 0 && k < JOB_NKEYS ? KEYS[k][0] : NULL; }
const char *job_record_key_where(job_key k) { return k >= 0 && k < JOB_NKEYS ? KEYS[k][1] : NULL; }
int job_record_key_find(const char *where, const char *name) {
    for (int k = 0; k < JOB_NKEYS; k++)
        if (!strcmp(KEYS[k][0], name) && (!where || !strcmp(KEYS[k][1], where))) return k;
    return -1;
}

/* ---- the option table applied to a job (core/job/options.c) */
int job_given(const job_t *j, const char *name) {
    int i = job_option_index(name);
    return i >= 0 && j->given[i];
}

void job_set_given(job_t *j, size_t off) {
    for (int i = 0; i < job_noptions; i++) {
        const cli_opt *o = &job_options[i];
        if (o->off != off) continue;
        /* of a flag pair, the one that sets the field's value */
        int flag = o->type == CLI_ON || o->type == CLI_OFF;
        if (flag && *(const int *)((const char *)&j->o + off) != (o->type == CLI_ON)) continue;
        j->given[i] = 1;
        return;
    }
}

int job_parse(job_t *j, int argc, char **argv, char *err, size_t errlen) {
    job_init(j);
    return cli_parse(job_options, job_noptions, &j->o, j->given, argc, argv, err, errlen);
}

int job_argv(const job_t *j, int (*push)(void *ctx, const char *arg), void *ctx) {
    for (int i = 0; i < job_noptions; i++)
        if (j->given[i] && cli_unparse(&job_options[i], &j->o, push, ctx) < 0) return -1;
    return 0;
}
