/* core/tune/space.c — the cells of a tune, each checked, planned and priced as `build/train --plan` does it
 * (see space.h): the argv of a cell goes through job_parse and job_build, the plan and the price are
 * cost_predict_mem's replays of the corner ranks (plan_world_ranks where they differ), with the options
 * plan_report gives them. */
#include "core/tune/space.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/engine/engine.h"
#include "core/engine/plan.h"
#include "core/job/catalog.h"


const char *const tune_status_names[3] = {"fits", "no_fit", "unreachable"};

void tune_opts_init(tune_opts *o) {
    memset(o, 0, sizeof *o);
    *o = (tune_opts){.model = "small", .world = 8, .seq_len = 128, .top = 20, .out_dir = "results/tune", .measure_reps = 3,
                     .measure_steps = 6};
}

/* ------------------------------------------------------------------ the meshes */
int tune_meshes(int world, int max_r, tune_mesh *out, int cap) {
    int n = 0;
    /* replicate x shard x tp: for each tp, every replicate degree R that divides dp = world / tp (R = 1 first: the
     * 2D mesh; R = dp leaves shard groups of one rank, plain data parallel) */
    for (int t = 1; t <= world && n < cap; t++) {
        if (world % t) continue;
        int dp = world / t;
        for (int r = 1; r <= dp && n < cap && (max_r <= 0 || r <= max_r); r++)
            if (dp % r == 0) out[n++] = (tune_mesh){.r = r, .s = dp / r, .t = t};
    }
    return n;
}

void tune_mesh_name(const tune_mesh *m, char *out, size_t cap) {
    if (m->r > 1) snprintf(out, cap, "%dx%dx%d", m->r, m->s, m->t);
    else snprintf(out, cap, "%dx%d", m->s, m->t);
}

/* ------------------------------------------------------------------ a cell as text */
void tune_ckpt_text(const tune_cell *c, char *out, size_t cap) {
    if (c->ckpt == 0) snprintf(out, cap, "none");
    else if (c->ckpt == 1) snprintf(out, cap, "full");
    else snprintf(out, cap, "every:%d", c->ckpt);
}

enum { ARGS_MAX = 40, ARG_LEN = 24 };
/* the arguments: options' values by pointer (they live as long as the space), numbers in s[] */
typedef struct cell_argv { int n; char s[ARGS_MAX][ARG_LEN]; char *v[ARGS_MAX + 1]; } cell_argv;

static void push(cell_argv *a, const char *s) {
    if (a->n >= ARGS_MAX) return;
    a->v[a->n] = (char *)s;
    a->v[++a->n] = NULL;
}
static void push2(cell_argv *a, const char *k, long long v) {
    push(a, k);
    if (a->n >= ARGS_MAX) return;
    snprintf(a->s[a->n], ARG_LEN, "%lld", v);
    push(a, a->s[a->n]);
}

static const char *const CKPT_NONE = "none", *const CKPT_FULL = "full";

/* the argv of `build/train --plan` for cell c (argv[0] "train") */
static void cell_args(const tune_space *S, const tune_cell *c, cell_argv *a) {
    const tune_opts *o = &S->o;
    a->n = 0;
    push(a, "train");
    push(a, "--plan");
    push(a, "--model"); push(a, o->model);
    push2(a, "--world", o->world);
    if (o->gpus_per_host) push2(a, "--gpus-per-host", o->gpus_per_host);
    push2(a, "--tp", c->mesh.t);
    if (c->mesh.r > 1) push2(a, "--replicate", c->mesh.r);
    push2(a, "--seq-len", o->seq_len);
    push2(a, "--batch-size", c->B);
    push2(a, "--global-batch", S->global_batch);
    push(a, "--checkpoint-activations");
    if (c->ckpt > 1) { snprintf(a->s[a->n], ARG_LEN, "every:%d", c->ckpt); push(a, a->s[a->n]); }
    else push(a, c->ckpt ? CKPT_FULL : CKPT_NONE);
    if (c->sp == 0) push(a, "--no-sequence-parallel");
    if (c->sp == 1) { push(a, "--sp-activations"); push(a, c->sp_local ? "local" : "gathered"); }
    if (c->reduce_last >= 0) { push(a, "--accum-reduce"); push(a, c->reduce_last ? "last" : "each"); }
    if (!c->prefetch) push(a, "--no-prefetch");
    if (o->gpu) { push(a, "--gpu"); push(a, o->gpu); push(a, "--backend"); push(a, "cuda"); }
    if (o->mem_reserve) { push(a, "--mem-reserve"); push(a, o->mem_reserve); }
    if (S->budget_text[0]) { push(a, "--mem-budget"); push(a, S->budget_text); }
    if (o->machine) { push(a, "--machine"); push(a, o->machine); }
    push(a, "--dtype"); push(a, o->dtype);
}

void tune_cell_args(const tune_space *S, const tune_cell *c, char *out, size_t cap) {
    cell_argv a;
    cell_args(S, c, &a);
    size_t w = 0;
    out[0] = 0;
    for (int i = 1; i < a.n && w < cap; i++) w += (size_t)snprintf(out + w, cap - w, "%s%s", i > 1 ? " " : "", a.v[i]);
}

void tune_cell_label(const tune_cell *c, char *out, size_t cap) {
    char ck[32], mn[48];
    tune_ckpt_text(c, ck, sizeof ck);
    tune_mesh_name(&c->mesh, mn, sizeof mn);
    if (c->status == TUNE_UNREACHABLE && c->B == 0) { snprintf(out, cap, "%s", mn); return; }
    snprintf(out, cap, "%s b%d x%d ckpt=%s%s%s%s%s", mn, c->B, c->N, ck,
             c->sp < 0 ? "" : c->sp == 0 ? " sp=off" : c->sp_local ? " sp=local" : " sp=gathered",
             c->reduce_last < 0 ? "" : c->reduce_last ? " reduce=last" : " reduce=each", c->prefetch ? "" : " no-prefetch", "");
}

/* ------------------------------------------------------------------ the space */
int tune_add_cell(tune_space *S, const tune_cell *c) {
    if (S->n == S->cap) {
        int cap = S->cap ? 2 * S->cap : 1024;
        tune_cell *p = realloc(S->cells, (size_t)cap * sizeof *p);
        if (!p) return -1;
        S->cells = p, S->cap = cap;
    }
    S->cells[S->n++] = *c;
    return 0;
}

int tune_cell_job(const tune_space *S, const tune_cell *c, job_t *j, char *err, size_t errlen) {
    cell_argv a;
    cell_args(S, c, &a);
    if (job_parse(j, a.n, a.v, err, errlen)) return 2;
    return job_build(j, S->o.world, 0, err, errlen);
}

/* the checkpointing values worth a cell: none, full, and every:K for the smallest K of each number of
 * recomputed layers ceil(L / K) (a larger K with the same count saves the same layers' inputs) */
static int ckpt_values(int L, int *out, int cap) {
    int n = 0;
    out[n++] = 0;
    if (L >= 1) out[n++] = 1;
    for (int K = 2; K <= L && n < cap; K++)
        if ((L + K - 2) / (K - 1) > (L + K - 1) / K) out[n++] = K;
    return n;
}

static int recomputed(int L, int ckpt) { return ckpt == 0 ? 0 : ckpt == 1 ? L : (L + ckpt - 1) / ckpt; }

/* The micro-batches of a step repeat: from the third on, each adds the same allocations (freed before the
 * next) and the same stretch of the timeline, so the peak of N >= 3 micro-batches is the peak of 3 and
 * the step, its communication and its compute grow by the same amount per micro-batch (what
 * tests/t_tune.sh checks against build/train --plan, cell by cell). A cell of N > 3 is replayed at 2 and
 * 3 micro-batches and its figures extended; one of N <= 3 is replayed as it is. */
#define TUNE_REPLAY_MICRO 3

static cost_req request(const tune_space *S, const job_t *j, int tp, int N) {
    cost_req q = {.cfg = &j->cfg, .world = S->o.world, .tp = tp, .mo = j->mo, .dtype = j->dtype,
                  .ranks_per_host = S->o.gpus_per_host, .m = &S->machine, .share_dp_ranks = !S->o.full_replay};
    q.mo.grad_accum = N;
    return q;
}

/* the figures of cell c from p, the prediction of its replayed step: as it is, or extended from 2 and 3
 * micro-batches (p of 3, the step of 2 priced here) */
static int predict_cell(const tune_space *S, const job_t *j, tune_cell *c, const cost_prediction *p, const cost_prediction *two,
                        char *err, size_t errlen) {
    cost_prediction p2;
    int N = c->N, big = N > TUNE_REPLAY_MICRO && !S->o.full_replay;
    double k = 0, step = p->r.step_ms, comm = p->r.comm_ms, exposed = p->r.exposed_comm_ms, comp = p->r.compute_ms;
    if (big) {
        cost_req q = request(S, j, c->mesh.t, TUNE_REPLAY_MICRO - 1);
        if (two) p2 = *two;
        else if (cost_predict(&q, &p2, err, errlen)) return -1;
        k = N - TUNE_REPLAY_MICRO;
        step += k * (p->r.step_ms - p2.r.step_ms), comm += k * (p->r.comm_ms - p2.r.comm_ms);
        exposed += k * (p->r.exposed_comm_ms - p2.r.exposed_comm_ms), comp += k * (p->r.compute_ms - p2.r.compute_ms);
    }
    double tokens = (double)c->dp * c->B * N * S->o.seq_len;
    c->step_ms = step, c->comm_ms = comm, c->exposed_comm_ms = exposed, c->compute_ms = comp;
    c->tok_s = step > 0 ? tokens / (step / 1e3) : 0, c->tok_s_per_gpu = c->tok_s / S->o.world;
    double scale = p->tok_s > 0 ? c->tok_s / p->tok_s : 0;   /* MFU is proportional to tok/s */
    c->mfu = p->mfu * scale, c->mfu_causal = p->mfu_causal * scale;
    return 0;
}

/* The replayed step (N micro-batches, or 3 of a larger N) is recorded for the price by the same replays of the
 * corner ranks that plan its memory (cost_predict_mem): one replay per rank, not two, and the step of 2 that
 * extends a larger N is those recordings with the second micro-batch cut out. The memory plan is replayed
 * apart only where that cannot stand for it (the corners differ, or the step was not priced), the step of 2
 * only where a cut would split a collective from its wait. */
int tune_plan_cell(tune_space *S, const engine_t *P, tune_cell *c, char *err, size_t errlen) {
    job_t j;
    int rc = tune_cell_job(S, c, &j, err, errlen);
    if (rc) return rc;
    c->recompute_layers = recomputed(j.cfg.num_hidden_layers, c->ckpt);
    mem_stats worst, corner[4];
    int wr;
    model_opts mo = j.mo;
    if (mo.grad_accum > TUNE_REPLAY_MICRO && !S->o.full_replay) mo.grad_accum = TUNE_REPLAY_MICRO;
    cost_req q = request(S, &j, c->mesh.t, mo.grad_accum);
    cost_prediction p, p2;
    char e2[512];
    int big = c->N > TUNE_REPLAY_MICRO && !S->o.full_replay, two_ok = 0;
    int priced = cost_predict_mem(&q, S->budget, corner, &p, big ? &p2 : NULL, &two_ok, e2, sizeof e2);
    if ((priced || !plan_world_corners(corner, &worst, &wr)) &&
        plan_world_ranks(P, &j.cfg, S->o.world, c->mesh.t, &mo, S->budget, NULL, &worst, &wr, err, errlen))
        return 2;
    c->peak = worst.total_peak;
    memcpy(c->by_cat, worst.peak, sizeof c->by_cat);
    c->status = !worst.overflow && worst.total_peak <= S->budget ? TUNE_FITS : TUNE_NO_FIT;
    if (c->status != TUNE_FITS) return 0;
    S->n_fit++;
    if (priced || predict_cell(S, &j, c, &p, two_ok ? &p2 : NULL, e2, sizeof e2)) { snprintf(c->why, sizeof c->why, "not priced: %.140s", e2); return 0; }
    c->priced = 1;
    S->n_priced++;
    return 0;
}

int tune_settings(const tune_space *S, const tune_mesh *m, tune_setting *out, int cap) {
    int ck[256], nck = ckpt_values(S->base.cfg.num_hidden_layers, ck, 256), n = 0;
    int sp[3][2] = {{-1, 0}}, nsp = 1;
    if (m->t > 1) {
        sp[0][0] = 0, nsp = 1;
        if (S->o.seq_len % m->t == 0) sp[1][0] = 1, sp[1][1] = 1, sp[2][0] = 1, sp[2][1] = 0, nsp = 3;
    }
    for (int a = 0; a < nck; a++)
        for (int b = 0; b < nsp; b++)
            for (int r = 0; r < 2; r++)
                for (int p = 1; p >= 0; p--)
                    if (n < cap) out[n++] = (tune_setting){ck[a], sp[b][0], sp[b][1], r, p};
    return n;
}

/* ------------------------------------------------------------------ the options, the budget, the machine */
#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return 2; } while (0)

static int check_opts(tune_space *S, char *err, size_t errlen) {
    tune_opts *o = &S->o;
    if (o->world < 1 || o->world > 65536) BAD("--world must be in 1..65536 (got %d)", o->world);
    if (o->gpus_per_host < 0 || o->gpus_per_host > o->world)
        BAD("--gpus-per-host must be in 1..--world %d (got %d)", o->world, o->gpus_per_host);
    if (o->gpus_per_host && o->world % o->gpus_per_host)
        BAD("--gpus-per-host %d does not divide --world %d (every host holds the same number of ranks)", o->gpus_per_host, o->world);
    if (o->seq_len < 1) BAD("--seq-len must be >= 1 (got %d)", o->seq_len);
    if (o->jobs < 0 || o->jobs > 64) BAD("--jobs must be in 1..64 (got %d)", o->jobs);
    if (o->top < 1) BAD("--top must be >= 1 (got %d)", o->top);
    if (o->max_replicate < 0 || o->max_replicate > o->world)
        BAD("--max-replicate must be in 1..--world %d (got %d; 1: the 2D meshes only, 0 or none given: every degree)", o->world,
            o->max_replicate);
    if (o->global_batch && o->global_tokens) BAD("--global-batch and --global-tokens are two global batches: give one");
    if (o->global_tokens) {
        long long t;
        char *end;
        t = strtoll(o->global_tokens, &end, 10);
        if (*end || t < 1) BAD("--global-tokens must be a positive integer (got '%s')", o->global_tokens);
        if (t % o->seq_len) BAD("--global-tokens %lld is not a whole number of sequences of --seq-len %d", t, o->seq_len);
        if (t / o->seq_len > 2147483647LL) BAD("--global-tokens %lld is more sequences than this engine supports", t);
        S->global_batch = (int)(t / o->seq_len);
    } else {
        if (o->global_batch < 1) BAD("--global-batch must be >= 1 (got %d; or give --global-tokens)", o->global_batch);
        S->global_batch = o->global_batch;
    }
    if (!o->dtype) o->dtype = o->gpu ? "bf16" : "fp32";
    if (o->gpu && o->mem_budget) BAD("--mem-budget %s and --gpu %s are two budgets: give one", o->mem_budget, o->gpu);
    if (o->mem_reserve && !o->gpu) BAD("--mem-reserve applies only with --gpu NAME");
    if (!o->gpu && !strcmp(o->dtype, "bf16")) BAD("--dtype bf16 plans the CUDA engine: give --gpu NAME (the CPU engine is fp32)");
    if (o->mem_budget) { snprintf(S->budget_text, sizeof S->budget_text, "%s", o->mem_budget); S->budget_from = "--mem-budget"; }
    else if (o->gpu) S->budget_from = "--gpu";
    else {
        /* this host: its memory shared by the ranks a host holds */
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        int rph = o->gpus_per_host ? o->gpus_per_host : o->world;
        if (pages <= 0 || psz <= 0) BAD("this host's memory is unknown: give --mem-budget SIZE");
        snprintf(S->budget_text, sizeof S->budget_text, "%llu", (unsigned long long)pages * (unsigned long long)psz / (unsigned)rph);
        S->budget_from = "this host's memory over the ranks of a host";
    }
    return 0;
}

/* the first cell's job: the model, the budget and every option checked once before the space */
static int check_base(tune_space *S, char *err, size_t errlen);
int tune_space_check(tune_space *S, const tune_opts *o, char *err, size_t errlen) {
    memset(S, 0, sizeof *S);
    S->o = *o;
    int rc = check_opts(S, err, errlen);
    return rc ? rc : check_base(S, err, errlen);
}

static int check_base(tune_space *S, char *err, size_t errlen) {
    tune_cell c = {.mesh = {1, S->o.world, 1}, .dp = S->o.world, .B = 1, .sp = -1, .reduce_last = -1, .prefetch = 1};
    /* --batch-size 1 and --global-batch G need dp | G; this check only resolves the options */
    int save = S->global_batch;
    S->global_batch = S->o.world;
    int rc = tune_cell_job(S, &c, &S->base, err, errlen);
    S->global_batch = save;
    if (rc) return rc;
    S->budget = S->base.budget.budget;
    if (!S->budget) BAD("no memory budget (give --gpu NAME or --mem-budget SIZE)");
    char dir[4096];
    int have = cost_machine_resolve(S->o.machine, S->o.gpu, catalog_exe_dir(dir, sizeof dir) ? NULL : dir, &S->machine,
                                    &S->machine_from, err, errlen);
    if (have < 0) return 2;
    if (have == 0) BAD("no step-time model to rank the cells by: give --gpu NAME or --machine NAME|FILE, or run `make calibrate` "
                       "for this host");
    S->ranks_per_host = S->o.gpus_per_host ? S->o.gpus_per_host : cost_default_ranks_per_host(&S->machine, S->o.world);
    return 0;
}

#undef BAD

void tune_space_free(tune_space *S) {
    free(S->cells);
    cost_machine_free(&S->machine);
    memset(S, 0, sizeof *S);
}
