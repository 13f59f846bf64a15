/* core/sweep/report_md.c — report.md, the page to read: a first paragraph with the answers (the
 * fastest mesh, the first to reach the target loss, the largest global batch), how the cores were
 * shared, where the results came from (resumed or not), the table, the max-batch search, the charts
 * that exist, and the runs that did not finish ok. Numbers only, no adjectives.
 * Not the tables (core/sweep/report.c), not the charts (core/sweep/charts.c). */
#include "core/sweep/report.h"
#include "core/sweep/charts.h"
#include "core/sweep/report_cost.h"
#include "core/common/errmsg.h"
#include "core/sweep/grid.h"
#include "core/sweep/machine.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double MiB = 1048576.0;

static void md_num(sweep_sbuf *b, double x, const char *fmt) {
    if (isfinite(x)) sweep_sb_printf(b, fmt, x);
    else sweep_sb_printf(b, "n/a");
    sweep_sb_printf(b, " | ");
}

/* An MFU in percent: one above 100.00% is no real utilisation (the host was loaded: see the footnote
 * mfu_over_note writes under the table), so it carries a '*' and sets *over. */
static void md_mfu(sweep_sbuf *b, double pct, int *over) {
    if (isfinite(pct) && llround(pct * 100) > 10000) {
        sweep_sb_printf(b, "%.2f%%* | ", pct);
        *over = 1;
    } else
        md_num(b, pct, "%.2f%%");
}

static void mfu_over_note(sweep_sbuf *b) {
    sweep_sb_printf(b, "\\* Above 100%%: not a real utilisation but a sign that the host was loaded while it ran. "
                       "The peak it is divided by is train's one-core SGEMM rate, measured at start (or `--peak-tflops`), "
                       "so other load on the host makes it low, and the core share counts each rank's cores/ranks of "
                       "the host while ranks waiting in a collective yield their core to the others. Compare such "
                       "meshes by tok/s.\n\n");
}

/* The first line of an error, with table-breaking characters replaced. */
static void one_line(const char *in, char *out, size_t cap) {
    size_t k = 0;
    for (const char *p = in; *p && *p != '\n' && k + 1 < cap; p++) out[k++] = (*p == '|' || *p == '`') ? '/' : *p;
    out[k] = '\0';
}

static int is_ok(const sweep_result *r) { return strcmp(r->status, "ok") == 0; }

/* ---- the first paragraph ---------------------------------------------------------------------- */

static void answers(sweep_sbuf *b, const sweep_report_ctx *c, double target) {
    int fast = -1, first = -1, big = -1, first_step = -1;
    double best_tok = 0, best_t = INFINITY;
    for (int i = 0; i < c->n; i++) {
        const sweep_result *r = &c->res[i];
        if (c->plan_only ? strcmp(r->status, "planned") != 0 : !is_ok(r)) continue;
        double tok = sweep_record_num(r->record, "summary.tok_s");
        if (!c->plan_only && isfinite(tok) && tok > best_tok) best_tok = tok, fast = i;
        int step = -1;
        double t = c->plan_only ? NAN : sweep_seconds_to_loss(r, target, &step);
        if (isfinite(t) && t < best_t) best_t = t, first = i, first_step = step;
        if (big < 0 || sweep_global_batch(r) > sweep_global_batch(&c->res[big])) big = i;
    }
    const sweep_spec *s = c->spec;
    int matched = s->batch_mode == SWEEP_BATCH_MATCHED, grid = s->n_axes > 0;
    if (grid || matched) sweep_md_mode(b, c);
    if (big < 0) {
        sweep_sb_printf(b, "No %s %s; there is nothing to compare.\n\n", grid ? "cell" : "mesh",
                        c->plan_only ? "could be planned" : "finished ok");
        return;
    }
    if (matched) /* every mesh has the same global batch: the answer is the largest micro-batch */
        for (int i = 0; i < c->n; i++)
            if ((c->plan_only ? !strcmp(c->res[i].status, "planned") : is_ok(&c->res[i])) &&
                c->res[i].batch_size > c->res[big].batch_size)
                big = i;
    if (c->plan_only) {
        const sweep_result *r = &c->res[big];
        if (r->batch_size == 0) { /* no mesh fits even one sequence: say so, and what one needs */
            int least = big;
            for (int i = 0; i < c->n; i++)
                if (sweep_record_num(c->res[i].record, "batch_1_needs.peak") <
                    sweep_record_num(c->res[least].record, "batch_1_needs.peak"))
                    least = i;
            sweep_sb_printf(b, "No %s fits the memory budget even at batch 1: batch 1 needs %.1f MiB per rank at the "
                               "least (%s). No run was launched: these are plans.\n\n", grid ? "cell" : "mesh",
                            sweep_record_num(c->res[least].record, "batch_1_needs.peak") / MiB, c->res[least].mesh->name);
            return;
        }
        if (matched)
            sweep_sb_printf(b, "Largest planned micro-batch: **%s**, %d per DP rank (%d micro-batches to global batch %d), "
                               "planned peak %.1f MiB per rank. ", r->mesh->name, r->batch_size, sweep_grad_accum(r),
                            sweep_global_batch(r), sweep_record_num(r->record, "peak") / MiB);
        else
            sweep_sb_printf(b, "Largest planned global batch: **%s**, %d sequences (%d per DP rank), planned peak %.1f MiB "
                               "per rank. ", r->mesh->name, sweep_global_batch(r), r->batch_size,
                            sweep_record_num(r->record, "peak") / MiB);
        if (grid) sweep_md_fastest_planned(b, c);
        sweep_sb_printf(b, "No run was launched: these are plans.\n\n");
        return;
    }
    if (matched) sweep_md_matched_agreement(b, c);
    if (fast >= 0) {
        const sweep_result *r = &c->res[fast];
        char tokens[96] = "";
        if (matched && !grid) snprintf(tokens, sizeof tokens, " at equal tokens per step (%lld on every mesh)",
                                       (long long)sweep_global_batch(r) * r->mesh->seq_len);
        sweep_sb_printf(b, "%s%s: **%s**, %.0f tokens/s at batch %d per DP rank (global %d). ",
                        grid ? "Fastest cell" : "Highest throughput", tokens, r->mesh->name, best_tok, r->batch_size,
                        sweep_global_batch(r));
    }
    const char *from = c->spec->target_loss > 0 ? "the spec's target_loss" : "the highest final loss among the meshes";
    if (first >= 0)
        sweep_sb_printf(b, "First to reach loss %.4f (%s): **%s**, after %.1f s of training (step %d). ", target, from,
                        c->res[first].mesh->name, best_t, first_step);
    else if (isfinite(target))
        sweep_sb_printf(b, "No mesh reached loss %.4f (%s). ", target, from);
    const sweep_result *r = &c->res[big];
    if (matched)
        sweep_sb_printf(b, "Largest micro-batch: **%s**, %d per DP rank (%d micro-batches per step).\n\n", r->mesh->name,
                        r->batch_size, sweep_grad_accum(r));
    else
        sweep_sb_printf(b, "Largest global batch: **%s**, %d sequences (%d per DP rank).\n\n", r->mesh->name,
                        sweep_global_batch(r), r->batch_size);
}

/* ---- hosts and cores -------------------------------------------------------------------------- */

static void share_text(int ranks, int cores, char *out, size_t cap) {
    if (cores >= ranks) snprintf(out, cap, "a core of its own");
    else if (ranks % cores == 0) snprintf(out, cap, "1/%d of a core", ranks / cores);
    else snprintf(out, cap, "%.2f of a core", (double)cores / ranks);
}

/* Ranks that ran other BLAS kernels (OpenBLAS picks them per CPU, or by OPENBLAS_CORETYPE: env.blas_by_host
 * of the record): their losses agree with a run on one host to rounding, not bit for bit. */
static void blas_note(sweep_sbuf *b, const sweep_report_ctx *c) {
    int first = 1;
    for (int i = 0; i < c->n; i++) {
        if (!json_is_true(sweep_record_get(c->res[i].record, "env.blas_hosts_differ"))) continue;
        if (first) sweep_sb_printf(b, "\n**Note:** the ranks ran different BLAS kernels in");
        sweep_sb_printf(b, "%s %s (", first ? "" : ";", c->res[i].mesh->name);
        first = 0;
        json_t *by = sweep_record_get(c->res[i].record, "env.blas_by_host");
        const char *h;
        json_t *v;
        int k = 0;
        json_object_foreach(by, h, v) {
            const char *core = json_string_value(json_object_get(v, "core"));
            sweep_sb_printf(b, "%s`%s` %s", k++ ? ", " : "", h, core ? core : "?");
        }
        sweep_sb_printf(b, ")");
    }
    if (!first)
        sweep_sb_printf(b, ": their losses agree with a run on one host to rounding, not bit for bit (env.blas_by_host "
                           "of each record; OpenBLAS picks kernels per CPU, or by OPENBLAS_CORETYPE).\n");
}

static void cores_paragraph(sweep_sbuf *b, const sweep_report_ctx *c) {
    const sweep_result *with = NULL;
    for (int i = 0; i < c->n && !with; i++) {
        int nr, nc, nh;
        sweep_rank_cores(&c->res[i], &nr, &nc, &nh);
        if (nr > 0) with = &c->res[i];
    }
    const sweep_result *any = NULL;
    for (int i = 0; i < c->n && !any; i++)
        if (json_is_array(sweep_record_get(c->res[i].record, "env.hosts"))) any = &c->res[i];
    if (any) {
        json_t *h = sweep_record_get(any->record, "env.hosts");
        sweep_sb_printf(b, "Hosts: ");
        for (size_t k = 0; k < json_array_size(h); k++)
            sweep_sb_printf(b, "%s`%s`", k ? ", " : "", json_string_value(json_array_get(h, k)) ? json_string_value(json_array_get(h, k)) : "?");
        sweep_sb_printf(b, ". ");
    }
    if (!with) {
        sweep_sb_printf(b, "Cores per rank: n/a (the run records do not list the cores available on each host), "
                           "so the second MFU column is n/a.\n");
    } else {
        int nr, nc, nh;
        char share[64];
        sweep_rank_cores(with, &nr, &nc, &nh);
        json_t *rb = sweep_record_get(with->record, "env.ranks_by_host");
        json_t *cb = sweep_record_get(with->record, "env.cores_by_host");
        if (nh == 1) {
            share_text(nr, nc, share, sizeof share);
            sweep_sb_printf(b, "%d ranks on %d core%s: each rank had %s.\n", nr, nc, nc == 1 ? "" : "s", share);
        } else {
            sweep_sb_printf(b, "%d ranks on %d hosts with %d cores in all:", nr, nh, nc);
            const char *h;
            json_t *v;
            int k = 0;
            json_object_foreach(rb, h, v) {
                int r = (int)json_array_size(v), cc = (int)json_integer_value(json_object_get(cb, h));
                share_text(r, cc, share, sizeof share);
                sweep_sb_printf(b, "%s `%s` %d ranks on %d cores (each rank had %s)", k++ ? ";" : "", h, r, cc, share);
            }
            sweep_sb_printf(b, ".\n");
        }
    }
    sweep_sb_printf(b, "MFU is given twice: against one core per rank (peak FLOP/s per rank as train measured or was "
                       "told it), and against the compute share each rank had, peak × min(1, cores/ranks) per host. Both count "
                       "6(N − N_embedding) + 12·L·d·T FLOPs per token: attention whole, not causal (PaLM, torchtitan).\n");
    for (int i = 0; i < c->n; i++)
        if (sweep_tp_spans_hosts(&c->res[i]) == 1)
            sweep_sb_printf(b, "\n**Warning:** on mesh %s a tensor-parallel group spans hosts, so its collectives "
                               "cross the network; launch with `--map-by slot` or `--npernode N` (N a multiple of "
                               "tp = %d) so that each group of %d consecutive ranks is on one host.\n",
                            c->res[i].mesh->name, c->res[i].mesh->tp, c->res[i].mesh->tp);
    blas_note(b, c);
    sweep_sb_printf(b, "\n");
}

/* ---- setup and provenance --------------------------------------------------------------------- */

static void setup_lines(sweep_sbuf *b, const sweep_report_ctx *c) {
    const sweep_spec *s = c->spec;
    sweep_sb_printf(b, "Model `%s`, %d ranks (`%s` backend), ", s->model, s->world, s->backend);
    if (s->seq_len) sweep_sb_printf(b, "sequence length %d", s->seq_len);
    else sweep_sb_printf(b, "sequence length per cell (axis seq)");
    sweep_sb_printf(b, ", %d steps, lr %g", s->steps, s->lr);
    if (s->mem_budget) sweep_sb_printf(b, ", memory budget %s per rank", s->mem_budget);
    else if (sweep_axes_has(s->json, "mem_budget")) sweep_sb_printf(b, ", memory budget per cell (axis mem)");
    if (s->gpu && c->plan_only) sweep_sb_printf(b, ", planned for GPU `%s`", s->gpu);
    sweep_sb_printf(b, ".\n");
    if (s->batch_mode == SWEEP_BATCH_MAX)
        sweep_sb_printf(b, c->plan_only ? "Batch: the largest that the plan fits in the budget on each mesh.\n"
                                        : "Batch: the largest that fits the budget on each mesh (plan, then confirmed "
                                          "by short probe runs at b and b+1).\n");
    else if (s->batch_mode == SWEEP_BATCH_GLOBAL && s->global_batch)
        sweep_sb_printf(b, "Batch: global batch %d sequences on every mesh (batch per DP rank = %d / dp).\n",
                        s->global_batch, s->global_batch);
    else if (s->batch_mode == SWEEP_BATCH_GLOBAL)
        sweep_sb_printf(b, "Batch: the cell's global batch (axis gb) on every mesh, batch per DP rank = G / dp.\n");
    else if (s->batch_mode == SWEEP_BATCH_MATCHED)
        sweep_sb_printf(b, "Batch: the global batch G%s is the same on every mesh; the batch per DP rank is the largest "
                           "micro-batch that fits the budget and divides G / dp (%s), and train accumulates G / (dp × "
                           "micro-batch) micro-batches per optimizer step (`--global-batch`).\n",
                        s->global_batch ? "" : " of the cell (axis gb)",
                        c->plan_only ? "the plan's" : "plan, then confirmed by short probe runs at it and the next divisor");
    else
        sweep_sb_printf(b, "Batch: as given in the spec, per DP rank.\n");
    sweep_sb_printf(b, "Folder `%s` created %s; this report written by the invocation started %s. Spec: "
                       "[spec.json](spec.json); summary: [summary.json](summary.json), [summary.csv](summary.csv).\n",
                    c->stamp ? c->stamp : "?", c->created_utc ? c->created_utc : "?", c->started_utc ? c->started_utc : "?");
    int k = 0;
    for (int i = 0; i < c->n; i++)
        if (c->res[i].resumed)
            sweep_sb_printf(b, "%s%s (finished %s)", k++ ? ", " : "Resumed from an earlier invocation on this folder: ",
                            c->res[i].mesh->name, c->res[i].finished[0] ? c->res[i].finished : "?");
    if (k) sweep_sb_printf(b, ".\n");
    sweep_sb_printf(b, "\n");
}

/* ---- tables ----------------------------------------------------------------------------------- */

/* the dp column: the data-parallel degree, and on an HSDP mesh RxSxT its factors, "4 (2 x 2)" (replicate x shard) */
static const char *dp_cell(const sweep_mesh *m, char *buf, size_t cap) {
    if (m->rep > 1) snprintf(buf, cap, "%d (%d x %d)", m->dp, m->rep, m->dp / m->rep);
    else snprintf(buf, cap, "%d", m->dp);
    return buf;
}

static void run_table(sweep_sbuf *b, const sweep_report_ctx *c, double target) {
    sweep_sb_printf(b, "| %s | dp | tp | batch / DP rank | global batch | tok/s | tok/s per rank | MFU (1 core per rank) | "
                       "MFU (core share) | peak MiB | final loss | final eval loss | s to loss ", c->spec->n_axes ? "cell" : "mesh");
    if (isfinite(target)) sweep_sb_printf(b, "%.4f", target);
    else sweep_sb_printf(b, "n/a");
    sweep_sb_printf(b, " | status |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    int over = 0;
    for (int i = 0; i < c->n; i++) {
        const sweep_result *r = &c->res[i];
        char dpb[48];
        sweep_sb_printf(b, "| [%s](runs/%s.json) | %s | %d | %d | %d | ", r->mesh->name, r->mesh->name,
                        dp_cell(r->mesh, dpb, sizeof dpb), r->mesh->tp, r->batch_size, sweep_global_batch(r));
        md_num(b, sweep_record_num(r->record, "summary.tok_s"), "%.0f");
        md_num(b, sweep_record_num(r->record, "summary.tok_s_per_rank"), "%.0f");
        md_mfu(b, 100 * sweep_record_num(r->record, "summary.mfu"), &over);
        md_mfu(b, 100 * sweep_mfu_share(r), &over);
        md_num(b, sweep_record_num(r->record, "memory.peak") / MiB, "%.1f");
        md_num(b, sweep_record_num(r->record, "summary.final_loss"), "%.4f");
        md_num(b, sweep_record_num(r->record, "summary.final_eval_loss"), "%.4f");
        md_num(b, sweep_seconds_to_loss(r, target, NULL), "%.1f");
        if (r->resumed) sweep_sb_printf(b, "%s (resumed from %s) |\n", r->status, c->stamp ? c->stamp : "?");
        else sweep_sb_printf(b, "%s |\n", r->status);
    }
    sweep_sb_printf(b, "\n");
    if (over) mfu_over_note(b);
    sweep_sb_printf(b, "Seconds to a loss: the sum of the step times up to the first step whose training loss is at "
                       "or below it (start-up and evaluation not counted).\n\n");
    int hsdp = 0;
    for (int i = 0; i < c->n; i++) hsdp |= c->res[i].mesh->rep > 1;
    if (hsdp)
        sweep_sb_printf(b, "HSDP meshes RxSxT (replicate x shard x tp): dp = R x S, shown as \"dp (R x S)\"; the state is "
                           "sharded over S and each replica of it holds a copy.\n\n");
}

static void plan_table(sweep_sbuf *b, const sweep_report_ctx *c) {
    sweep_sb_printf(b, "| %s | dp | tp | planned batch / DP rank | global batch | planned peak MiB |",
                    c->spec->n_axes ? "cell" : "mesh");
    for (int k = 0; k < MEM_NCAT; k++) sweep_sb_printf(b, " %s MiB |", mem_cat_names[k]);
    sweep_sb_printf(b, " fits | status |\n|---|---:|---:|---:|---:|---:|");
    for (int k = 0; k < MEM_NCAT; k++) sweep_sb_printf(b, "---:|");
    sweep_sb_printf(b, "---|---|\n");
    for (int i = 0; i < c->n; i++) {
        const sweep_result *r = &c->res[i];
        if (r->record) sweep_sb_printf(b, "| [%s](runs/%s.plan.json) ", r->mesh->name, r->mesh->name);
        else sweep_sb_printf(b, "| %s ", r->mesh->name); /* no plan file to link to */
        double need1 = sweep_record_num(r->record, "batch_1_needs.peak");
        char dpb[48];
        if (r->batch_size == 0 && need1 == need1) { /* nothing fits: batch 1's need, not a peak of zero */
            sweep_sb_printf(b, "| %s | %d | none fits | 0 | batch 1 needs %.1f ", dp_cell(r->mesh, dpb, sizeof dpb), r->mesh->tp,
                            need1 / MiB);
            for (int k = 0; k < MEM_NCAT; k++) sweep_sb_printf(b, "| ");
            sweep_sb_printf(b, "| no | %s |\n", r->status);
            continue;
        }
        sweep_sb_printf(b, "| %s | %d | %d%s | %d | ", dp_cell(r->mesh, dpb, sizeof dpb), r->mesh->tp, r->batch_size,
                        sweep_cap_text(r->capped), sweep_global_batch(r));
        md_num(b, sweep_record_num(r->record, "peak") / MiB, "%.1f");
        for (int k = 0; k < MEM_NCAT; k++) {
            char path[64];
            snprintf(path, sizeof path, "by_category.%s", mem_cat_names[k]);
            md_num(b, sweep_record_num(r->record, path) / MiB, "%.1f");
        }
        json_t *fits = sweep_record_get(r->record, "fits");
        sweep_sb_printf(b, "%s | %s |\n", json_is_boolean(fits) ? (json_is_true(fits) ? "yes" : "no") : "n/a", r->status);
    }
    sweep_sb_printf(b, "\n");
}

static void max_batch_section(sweep_sbuf *b, const sweep_report_ctx *c) {
    sweep_sb_printf(b, "## Largest batch per %s\n\n", c->spec->n_axes ? "cell" : "mesh");
    for (int i = 0; i < c->n; i++) {
        const sweep_result *r = &c->res[i];
        sweep_sb_printf(b, "- **%s**: plan ", r->mesh->name);
        if (r->plan_batch >= 0) sweep_sb_printf(b, "%d", r->plan_batch);
        else sweep_sb_printf(b, "n/a");
        sweep_sb_printf(b, "; probes");
        for (int p = 0; p < r->n_probes; p++) {
            const char *st = r->probes[p].status;
            sweep_sb_printf(b, "%s b=%d %s", p ? "," : "", r->probes[p].batch_size,
                            strcmp(st, "oom") == 0                                  ? "oom"
                            : (strcmp(st, "ok") == 0 || strcmp(st, "diverged") == 0) ? "fits"
                                                                                     : st);
        }
        if (!r->n_probes) sweep_sb_printf(b, " none");
        if (c->spec->batch_mode == SWEEP_BATCH_MATCHED)
            sweep_sb_printf(b, " → micro-batch **%d** per DP rank × %d (global %d)%s\n", r->batch_size, sweep_grad_accum(r),
                            sweep_global_batch(r), sweep_cap_sentence(r->capped));
        else
            sweep_sb_printf(b, " → **%d** per DP rank (global %d)%s\n", r->batch_size, r->mesh->dp * r->batch_size,
                            sweep_cap_sentence(r->capped));
    }
    sweep_sb_printf(b, "\n");
}

/* ---- charts and problems ---------------------------------------------------------------------- */

static const char *chart_title(const sweep_report_ctx *c, const char *n, char *buf, size_t cap) {
    for (int k = 0; k < c->spec->n_axes; k++) { /* a grid's charts of one axis */
        const sweep_axis *a = &c->spec->axes[k];
        char mb[SWEEP_CHART_NAME_MAX], th[SWEEP_CHART_NAME_MAX];
        snprintf(mb, sizeof mb, "max_batch_%s", a->short_name);
        snprintf(th, sizeof th, "throughput_%s", a->short_name);
        if (strcmp(n, mb) == 0 || strcmp(n, th) == 0) {
            snprintf(buf, cap, "%s vs TP degree, one line per value of %s (%s); one panel per setting of the other axes",
                     strcmp(n, mb) == 0 ? "Batch per DP rank" : "Tokens/s", a->key, a->short_name);
            return buf;
        }
    }
    static const struct { const char *name, *title, *data; } t[] = {
        {"loss", "Training loss vs step", "loss_<mesh>.dat"},
        {"loss_tokens", "Training loss vs tokens seen", "loss_<mesh>.dat"},
        {"loss_time", "Training loss vs training seconds", "loss_<mesh>.dat"},
        {"throughput", "Throughput and MFU (one core per rank, and the core share)", "throughput.dat"},
        {"memory", "Peak memory per rank by category", "memory.dat"},
        {"max_batch", "Batch vs TP degree", "max_batch.dat"},
        {"prediction", "Predicted against measured step time", "prediction.dat"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(t[i].name, n) == 0) return t[i].title;
    return n;
}

static void charts_section(sweep_sbuf *b, const sweep_report_ctx *c) {
    sweep_sb_printf(b, "## Charts\n\n");
    char names[SWEEP_MAX_CHARTS][SWEEP_CHART_NAME_MAX], title[400];
    int nc = sweep_chart_names(c, names, SWEEP_MAX_CHARTS), missing = 0;
    for (int i = 0; i < nc; i++) {
        const char *n = names[i];
        char png[4200], svg[4200];
        snprintf(png, sizeof png, "%s/%s.png", c->dir, n);
        snprintf(svg, sizeof svg, "%s/%s.svg", c->dir, n);
        int have_png = sweep_chart_complete(png), have_svg = sweep_chart_complete(svg);
        if (!have_png && !have_svg) {
            missing++;
            continue;
        }
        const char *t = chart_title(c, n, title, sizeof title);
        sweep_sb_printf(b, "### %s\n\n", t);
        if (have_png) sweep_sb_printf(b, "![%s](%s.png)\n\n", t, n);
        if (have_svg) sweep_sb_printf(b, "[SVG](%s.svg)\n\n", n);
    }
    if (missing) {
        sweep_sb_printf(b, "Not drawn (see `gnuplot.log`):");
        int k = 0;
        for (int i = 0; i < nc; i++) {
            char png[4200], svg[4200];
            snprintf(png, sizeof png, "%s/%s.png", c->dir, names[i]);
            snprintf(svg, sizeof svg, "%s/%s.svg", c->dir, names[i]);
            if (!sweep_chart_complete(png) && !sweep_chart_complete(svg)) sweep_sb_printf(b, "%s %s", k++ ? "," : "", names[i]);
        }
        sweep_sb_printf(b, ".\n\n");
    }
}

static void problems_section(sweep_sbuf *b, const sweep_report_ctx *c) {
    const char *good = c->plan_only ? "planned" : "ok";
    int problems = 0;
    for (int i = 0; i < c->n; i++) problems += strcmp(c->res[i].status, good) != 0;
    if (!problems) return;
    sweep_sb_printf(b, "## %s\n\n", c->plan_only ? (c->spec->n_axes ? "Cells that could not be planned" : "Meshes that could not be planned") : "Runs that did not finish ok");
    for (int i = 0; i < c->n; i++) {
        const sweep_result *r = &c->res[i];
        if (strcmp(r->status, good) == 0) continue;
        char line[400], log[SWEEP_CELL_NAME_MAX + 32];
        one_line(r->error[0] ? r->error : "(no message)", line, sizeof line);
        const char *rl = json_string_value(sweep_record_get(r->record, "runner.log"));
        if (rl && strlen(rl) < sizeof log && strncmp(rl, "runs/", 5) == 0) snprintf(log, sizeof log, "%s", rl);
        else snprintf(log, sizeof log, c->plan_only ? "runs/%s.plan.log" : "runs/%s.log", r->mesh->name);
        sweep_sb_printf(b, "- **%s** %s: %s (log: [%s](%s))%s\n", r->mesh->name, r->status, line, log, log,
                        c->plan_only || strcmp(r->status, "oom") == 0 || strcmp(r->status, "diverged") == 0
                            ? ""
                            : "; the next invocation retries it");
    }
    sweep_sb_printf(b, "\n");
}

/* The opening paragraph, when the drift check at the start found the machine more than 25% from its file:
 * every prediction below carries that drift, and a reader of the answers should know it first. */
static void drift_paragraph(sweep_sbuf *b, const sweep_report_ctx *c) {
    const sweep_machine *mi = c->machine;
    if (c->plan_only || !mi || sweep_machine_drift(mi) <= 0.25) return;
    char ct[32] = "not compared", mt[32] = "not compared";
    if (isfinite(mi->compute_ratio)) snprintf(ct, sizeof ct, "x%.2f", mi->compute_ratio);
    if (isfinite(mi->comm_ratio)) snprintf(mt, sizeof mt, "x%.2f", mi->comm_ratio);
    sweep_sb_printf(b, "**This host has drifted %.0f%% from its machine file** `%s` (calibrated %s): at the start of this "
                       "sweep compute measured %s and collectives %s of the file (1-minute load average %.2f). Every "
                       "predicted step time below includes that drift; `make calibrate` measures the host again.\n\n",
                    100 * sweep_machine_drift(mi), mi->name, mi->calibrated[0] ? mi->calibrated : "at an unknown time", ct, mt,
                    mi->load);
}

int sweep_write_report_md(const sweep_report_ctx *c, int charts_ok, char *err, size_t el) {
    (void)charts_ok; /* the charts section lists what exists, whatever happened while drawing */
    const sweep_spec *s = c->spec;
    double target = c->plan_only ? NAN : sweep_target_loss(c);
    sweep_sbuf b = {0};
    sweep_sb_printf(&b, "# %s `%s`\n\n", c->plan_only ? "Plan of sweep" : "Sweep", s->name);
    drift_paragraph(&b, c);
    answers(&b, c, target);
    setup_lines(&b, c);
    if (!c->plan_only) cores_paragraph(&b, c);
    sweep_sb_printf(&b, "## Results\n\n");
    if (c->plan_only) plan_table(&b, c);
    else run_table(&b, c, target);
    sweep_md_grid_tables(&b, c);
    sweep_report_cost_section(&b, c);
    if (sweep_batch_searched(s) && !c->plan_only) max_batch_section(&b, c);
    if ((s->batch_mode == SWEEP_BATCH_GLOBAL || s->batch_mode == SWEEP_BATCH_MATCHED) && !c->plan_only)
        sweep_md_deviation_section(&b, c);
    charts_section(&b, c);
    problems_section(&b, c);
    return sweep_sb_write(&b, c->dir, "report.md", err, el);
}
