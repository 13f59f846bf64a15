/* core/plan.c — the memory plan (see plan.h): one rank, the worst rank, the largest batch that fits,
 * and the --plan report of build/train (the per-rank table on stdout and the meshsweep.plan/1 record). */
#include "core/plan.h"
#include "core/cli.h"
#include "core/optim.h"
#include "core/record.h"
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#define say cli_say

int plan_rank(const model_config *cfg, int world, int tp, int rank, const model_opts *o, uint64_t budget,
              mem_stats *out, char *err, size_t errlen) {
    mesh_t m;
    if (mesh_init(&m, world, rank, tp, err, errlen)) return -1;
    comm_group tpg, dpg, wg;
    comm_null_group(&tpg, m.tp, m.tp_rank);
    comm_null_group(&dpg, m.dp, m.dp_rank);
    comm_null_group(&wg, m.world, m.rank);
    mem_init(&ops_null, 1, budget);
    model_t M;
    int rc = model_init(&M, cfg, &m, &tpg, &dpg, &ops_null, o, err, errlen);
    if (rc == 0) {
        model_forward_backward(&M, NULL, NULL, 1.0f);
        optim_cfg oc = {.lr = 0, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
        optim_step(&M, &wg, &oc, 0, 1, NULL);
        *out = *mem_get_stats();
    }
    model_free(&M);
    mem_shutdown();
    return rc;
}

int plan_world(const model_config *cfg, int world, int tp, const model_opts *o, uint64_t budget,
               mem_stats *worst_stats, int *worst, char *err, size_t errlen) {
    *worst = -1;
    for (int r = 0; r < world; r++) {
        mem_stats s;
        if (plan_rank(cfg, world, tp, r, o, budget, &s, err, errlen)) return -1;
        if (*worst < 0 || s.total_peak > worst_stats->total_peak) { *worst_stats = s; *worst = r; }
    }
    return 0;
}

static int fits(const model_config *cfg, int world, int tp, const model_opts *o, int B, uint64_t budget,
                char *err, size_t errlen) {
    model_opts x = *o; x.B = B;
    mem_stats s = {0}; int w;
    if (plan_world(cfg, world, tp, &x, budget, &s, &w, err, errlen)) return -1;
    return s.total_peak <= budget;
}

int plan_max_batch(const model_config *cfg, int world, int tp, const model_opts *o, uint64_t budget,
                   char *err, size_t errlen) {
    int f = fits(cfg, world, tp, o, 1, budget, err, errlen);
    if (f <= 0) return f < 0 ? -1 : 0;
    int lo = 1, hi = 2; /* lo fits; find hi that does not */
    for (;;) {
        f = fits(cfg, world, tp, o, hi, budget, err, errlen);
        if (f < 0) return -1;
        if (!f) break;
        lo = hi;
        if (hi >= (1 << 20)) return lo;
        hi *= 2;
    }
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        f = fits(cfg, world, tp, o, mid, budget, err, errlen);
        if (f < 0) return -1;
        if (f) lo = mid; else hi = mid;
    }
    return lo;
}

/* ------------------------------------------------------------------ the --plan report */
static void print_plan_row(const char *label, const mem_stats *s) {
    printf("%-8s", label);
    for (int c = 0; c < MEM_NCAT; c++) printf(" %12.2f", s->peak[c] / 1048576.0);
    printf(" %12.2f\n", s->total_peak / 1048576.0);
}

int plan_report(const plan_req *q) {
    char err[512];
    int W = q->world;
    model_opts mo = q->mo;
    int B = mo.B, G;
    mesh_t m;
    if (mesh_init(&m, W, 0, q->tp, err, sizeof err)) { say("%s", err); return 2; }
    if (q->max_batch) {
        if (!q->budget) { say("--batch-size max needs --mem-budget"); return 2; }
        int b = plan_max_batch(q->cfg, W, q->tp, &mo, q->budget, err, sizeof err);
        if (b < 0) { say("%s", err); return 2; }
        B = b > 0 ? b : 1;
        mo.B = B;
        if (b == 0) {
            mem_stats s; int w;
            if (plan_world(q->cfg, W, q->tp, &mo, 0, &s, &w, err, sizeof err)) { say("%s", err); return 2; }
            char need[32], have[32], st[32];
            mem_format(need, sizeof need, s.total_peak); mem_format(have, sizeof have, q->budget);
            mem_format(st, sizeof st, s.peak[MEM_PARAMS] + s.peak[MEM_GRADS] + s.peak[MEM_OPTIMIZER]);
            say("no batch size fits --mem-budget %s on mesh %dx%d: batch 1 needs %s per rank (model state alone %s)",
                have, m.dp, m.tp, need, st);
            B = 0;
        }
    }
    G = m.dp * B;
    printf("# memory plan: model %s, mesh %dx%d (dp x tp), world %d, batch %d per DP rank (global %d), seq %d, %s%s%s%s\n",
           q->cfg->name, m.dp, m.tp, W, B, G, mo.T, q->dtype,
           mo.sequence_parallel && m.tp > 1 ? ", sequence parallel" : "", mo.checkpoint ? ", checkpointing" : "",
           mo.prefetch ? ", prefetch" : "");
    printf("%-8s", "# rank");
    for (int c = 0; c < MEM_NCAT; c++) printf(" %12s", mem_cat_names[c]);
    printf(" %12s\n", "peak");
    printf("%-8s", "#");
    for (int c = 0; c <= MEM_NCAT; c++) printf(" %12s", "MiB");
    printf("\n");
    json_t *ranks = json_array();
    mem_stats worst = {0}; int wr = 0;
    if (B > 0) {
        for (int r = 0; r < W; r++) {
            mem_stats s;
            if (plan_rank(q->cfg, W, q->tp, r, &mo, q->budget, &s, err, sizeof err)) { say("%s", err); json_decref(ranks); return 2; }
            char lab[16]; snprintf(lab, sizeof lab, "%d", r);
            print_plan_row(lab, &s);
            json_array_append_new(ranks, json_pack("{s:i, s:I, s:o}", "rank", r, "peak", (json_int_t)s.total_peak,
                                                   "by_category", record_categories(s.peak)));
            if (r == 0 || s.total_peak > worst.total_peak) { worst = s; wr = r; }
        }
        char lab[16]; snprintf(lab, sizeof lab, "max(%d)", wr);
        print_plan_row(lab, &worst);
    }
    int fitsb = B > 0 && (!q->budget || worst.total_peak <= q->budget);
    if (q->budget) {
        char b[32]; mem_format(b, sizeof b, q->budget);
        printf("# budget %s: %s\n", b, fitsb ? "fits" : "does not fit");
    }
    if (q->max_batch) printf("# max batch per DP rank: %d (global %d)\n", B, G);
    if (q->out) {
        json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:o, s:b, s:I, s:i, s:o, s:o, s:s}",
                              "schema", "meshsweep.plan/1", "world", W, "dp", m.dp, "tp", m.tp, "batch_size", B,
                              "global_batch", G, "seq_len", mo.T,
                              "mem_budget", q->budget ? json_integer((json_int_t)q->budget) : json_null(),
                              "fits", fitsb, "peak", (json_int_t)worst.total_peak, "most_loaded_rank", wr,
                              "by_category", record_categories(worst.peak), "ranks", ranks, "dtype", q->dtype);
        json_object_set_new(j, "at_peak", record_categories(worst.at_peak));
        if (record_write_atomic(q->out, j, err, sizeof err)) { say("%s", err); json_decref(j); return 1; }
        json_decref(j);
    } else {
        json_decref(ranks);
    }
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

