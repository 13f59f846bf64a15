/* core/run/plan_report.c — the --plan report of build/train: the per-rank table on stdout and the
 * meshsweep.plan/1 record, from the engine's memory plan (core/engine/plan.c). */
#include "core/run/plan_report.h"
#include "core/common/cli.h"
#include "core/run/record.h"
#include "core/cost/predict.h"
#include "core/common/files.h"
#include "core/job/job.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define say cli_say

static void print_plan_row(const char *label, const mem_stats *s) {
    printf("%-8s", label);
    for (int c = 0; c < MEM_NCAT; c++) printf(" %12.2f", s->peak[c] / 1048576.0);
    printf(" %12.2f\n", s->total_peak / 1048576.0);
}


/* --batch-size max --global-batch G where batch 1 fits but no micro-batch that fits divides G/dp into at
 * most PLAN_MAX_GRAD_ACCUM: that limit is the reason, said (exit 2), not "no micro-batch fits" */
static int too_many_micro_batches(const plan_req *q, const mesh_t *m, const model_opts *mo, int gper) {
    char err[512];
    int bmax = plan_max_batch(q->E, q->cfg, q->world, q->tp, mo, q->budget, err, sizeof err);
    if (bmax < 1) bmax = 1;
    say("--global-batch %d on mesh %dx%d is %d sequences per DP rank: micro-batches of at most %d fit, so a step "
        "would take more than %d micro-batches, the most this engine supports (give --global-batch at most %lld)",
        q->global_batch, m->dp, m->tp, gper, bmax, PLAN_MAX_GRAD_ACCUM, (long long)m->dp * bmax * PLAN_MAX_GRAD_ACCUM);
    return 2;
}

/* the per-rank table's two header lines: the categories, then their unit */
static void print_plan_head(void) {
    printf("%-8s", "# rank");
    for (int c = 0; c < MEM_NCAT; c++) printf(" %12s", mem_cat_names[c]);
    printf(" %12s\n", "peak");
    printf("%-8s", "#");
    for (int c = 0; c <= MEM_NCAT; c++) printf(" %12s", "MiB");
    printf("\n");
}

int plan_report(const plan_req *q) {
    char err[512];
    int W = q->world;
    model_opts mo = q->mo;
    int B = mo.B, G;
    mesh_t m;
    if (mesh_init_hsdp(&m, W, 0, mo.replicate > 1 ? mo.replicate : 1, q->tp, err, sizeof err)) { say("%s", err); return 2; }
    char mn[48];
    mesh_name(&m, mn, sizeof mn);
    int gper = 0; /* --global-batch with max: sequences per DP rank the micro-batch must divide */
    mem_stats at1; /* nothing fits: what batch 1 needs, for the record as for the line */
    int none_fits = 0;
    memset(&at1, 0, sizeof at1);
    if (q->max_batch) {
        if (!q->budget) { say("--batch-size max needs --mem-budget"); return 2; }
        if (q->global_batch && mo.grad_accum > 0) { say("--batch-size max takes --global-batch or --grad-accum, not both"); return 2; }
        if (q->global_batch && q->global_batch % m.dp) {
            say("--global-batch %d is not divisible by dp %d of mesh %s (give a multiple of %d)", q->global_batch, m.dp, mn, m.dp);
            return 2;
        }
        gper = q->global_batch / m.dp;
        int b = gper ? plan_max_micro_batch(q->E, q->cfg, W, q->tp, &mo, gper, q->budget, err, sizeof err)
                    : plan_max_batch(q->E, q->cfg, W, q->tp, &mo, q->budget, err, sizeof err);
        if (b < 0) { say("%s", err); return 2; }
        B = b > 0 ? b : 1;
        mo.B = B;
        if (gper) mo.grad_accum = b > 0 ? gper / B : (gper > 1 ? 2 : 1); /* none fits: what batch 1 needs */
        if (b == 0) {
            mem_stats s; int w;
            if (plan_world(q->E, q->cfg, W, q->tp, &mo, 0, &s, &w, err, sizeof err)) { say("%s", err); return 2; }
            at1 = s, none_fits = 1;
            if (gper && !s.overflow && s.total_peak <= q->budget) return too_many_micro_batches(q, &m, &mo, gper);
            char need[32], have[32], st[32];
            mem_format(need, sizeof need, s.total_peak); mem_format(have, sizeof have, q->budget);
            if (s.overflow) snprintf(need, sizeof need, "more than %llu EiB", (unsigned long long)(MEM_PLAN_CAP >> 60));
            mem_format(st, sizeof st, s.peak[MEM_PARAMS] + s.peak[MEM_GRADS] + s.peak[MEM_OPTIMIZER]);
            if (gper) say("no micro-batch dividing %d fits --mem-budget %s on mesh %s: batch 1 needs %s per rank (model state alone %s)",
                         gper, have, mn, need, st);
            else say("no batch size fits --mem-budget %s on mesh %s: batch 1 needs %s per rank (model state alone %s)",
                     have, mn, need, st);
            B = 0;
        }
    }
    int N = 1;
    if (!q->max_batch || !gper) {
        if (job_accum_of(q->max_batch ? 0 : q->global_batch, mo.grad_accum, m.dp, m.tp, B > 0 ? B : 1, &N, err, sizeof err)) {
            say("%s", err);
            return 2;
        }
    } else {
        N = gper / (B > 0 ? B : 1);
    }
    mo.grad_accum = N;
    G = m.dp * B * N;
    /* plan every rank first: a configuration error is found before any line of the table is printed */
    json_t *ranks = json_array();
    mem_stats worst = {0}; int wr = 0;
    mem_stats *per = B > 0 ? calloc((size_t)W, sizeof *per) : NULL;
    if (B > 0) {
        if (!per) { say("--plan: out of host memory for %d ranks", W); json_decref(ranks); return 1; }
        if (plan_world_ranks(q->E, q->cfg, W, q->tp, &mo, q->budget, per, &worst, &wr, err, sizeof err)) {
            say("%s", err); json_decref(ranks); free(per); return 2;
        }
    }
    if (worst.overflow) {
        say("--plan: this configuration needs more than %llu EiB per rank (batch %d x seq %d on mesh %s): beyond "
            "what can be planned or run", (unsigned long long)(MEM_PLAN_CAP >> 60), B, mo.T, mn);
        json_decref(ranks); free(per);
        return q->budget ? 3 : 2;
    }
    char acc[96] = "", ck[48] = "";
    if (N > 1) snprintf(acc, sizeof acc, " x %d micro-batches (reduce-scatter %s)", N, mo.accum_reduce_last ? "after the last" : "each");
    if (mo.checkpoint == 1) snprintf(ck, sizeof ck, ", checkpointing");
    else if (mo.checkpoint > 1) snprintf(ck, sizeof ck, ", checkpointing every %d layers", mo.checkpoint);
    printf("# memory plan: model %s, mesh %s (%s), world %d, batch %d per DP rank%s (global %d), seq %d, %s%s%s%s\n",
           q->cfg->name, mn, m.rep > 1 ? "replicate x shard x tp" : "dp x tp", W, B, acc, G, mo.T, dtype_name(q->E->dtype),
           mo.sequence_parallel && m.tp > 1 ? ", sequence parallel" : "", ck, mo.prefetch ? ", prefetch" : "");
    print_plan_head();
    if (B > 0) {
        for (int r = 0; r < W; r++) {
            const mem_stats *s = &per[r];
            char lab[16]; snprintf(lab, sizeof lab, "%d", r);
            print_plan_row(lab, s);
            json_array_append_new(ranks, json_pack("{s:i, s:I, s:o}", "rank", r, "peak", (json_int_t)s->total_peak,
                                                   "by_category", record_categories(s->peak)));
        }
        char lab[16]; snprintf(lab, sizeof lab, "max(%d)", wr);
        print_plan_row(lab, &worst);
    }
    free(per);
    int fitsb = B > 0 && (!q->budget || worst.total_peak <= q->budget);
    if (q->budget) {
        char b[32]; mem_format(b, sizeof b, q->budget);
        printf("# budget %s: %s\n", b, fitsb ? "fits" : "does not fit");
    }
    if (q->max_batch && gper) printf("# max micro-batch per DP rank dividing %d: %d x %d micro-batches (global %d)\n", gper, B, N, G);
    else if (q->max_batch) printf("# max batch per DP rank: %d (global %d)\n", B, G);
    json_t *time = NULL;
    if (q->machine && B > 0) {
        cost_req cr = {.cfg = q->cfg, .world = W, .tp = q->tp, .mo = mo, .dtype = q->E->dtype,
                       .ranks_per_host = q->ranks_per_host, .m = q->machine};
        cost_prediction cp;
        /* a machine that cannot price this step (no model of a collective kind) leaves the plan a plan */
        if (cost_predict(&cr, &cp, err, sizeof err)) printf("# no predicted step (machine %s): %s\n", q->machine->name, err);
        else {
            cost_prediction_print(stdout, &cp, q->machine, q->machine_from);
            time = cost_prediction_json(&cp, q->machine, q->machine_from);
        }
    }
    if (q->out) {
        json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:o, s:b, s:I, s:i, s:o, s:o, s:s}",
                              "schema", "meshsweep.plan/1", "world", W, "dp", m.dp, "tp", m.tp, "batch_size", B,
                              "global_batch", G, "seq_len", mo.T,
                              "mem_budget", q->budget ? json_integer((json_int_t)q->budget) : json_null(),
                              "fits", fitsb, "peak", (json_int_t)worst.total_peak, "most_loaded_rank", wr,
                              "by_category", record_categories(worst.peak), "ranks", ranks, "dtype", dtype_name(q->E->dtype));
        json_object_set_new(j, "at_peak", record_categories(worst.at_peak));
        if (m.rep > 1) { /* HSDP; a 2D plan's record is as before */
            json_object_set_new(j, JOB_KEY(REPLICATE), json_integer(m.rep));
            json_object_set_new(j, JOB_KEY(SHARD), json_integer(m.shard));
        }
        json_object_set_new(j, JOB_KEY(MICRO_BATCH), json_integer(B));
        json_object_set_new(j, JOB_KEY(GRAD_ACCUM), json_integer(N));
        json_object_set_new(j, JOB_KEY(ACCUM_REDUCE), json_string(mo.accum_reduce_last ? "last" : "each"));
        json_object_set_new(j, "time", time ? time : json_null());
        time = NULL;
        /* batch 0: not even one sequence fits; say what one needs (peak, by category), not zeros */
        json_object_set_new(j, "batch_1_needs", none_fits ? json_pack("{s:I, s:o}", "peak", (json_int_t)at1.total_peak,
                                                                      "by_category", record_categories(at1.peak))
                                                          : json_null());
        if (files_write_json(q->out, j, err, sizeof err)) { say("%s", err); json_decref(j); return 1; }
        json_decref(j);
    } else {
        json_decref(ranks);
    }
    json_decref(time);
    if (q->budget && !fitsb) {
        if (!q->max_batch) {
            char a[32], u[32], b[32];
            mem_format(a, sizeof a, worst.oom_bytes); mem_format(u, sizeof u, worst.oom_in_use); mem_format(b, sizeof b, q->budget);
            say("out of memory budget (planned): %s asked %s with %s in use, budget %s", mem_cat_names[worst.oom_cat], a, u, b);
        }
        return 3;
    }
    return 0;
}

