/* core/tune/report.c — the ranking and the folder of a tune (see report.h): cells.json, cells.csv, report.md,
 * pareto.png and by_mesh.png (gnuplot, started through the sweep's launcher), in DIR/.STAMP.tmp renamed
 * to DIR/STAMP once complete. */
#include "core/tune/report.h"

#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common/files.h"
#include "core/sweep/charts.h"
#include "core/sweep/folder.h"
#include "core/sweep/launch.h"

/* ------------------------------------------------------------------ the ranking */
static const tune_space *g_sort;
static int by_tok_s(const void *a, const void *b) {
    const tune_cell *x = &g_sort->cells[*(const int *)a], *y = &g_sort->cells[*(const int *)b];
    if (x->tok_s != y->tok_s) return x->tok_s > y->tok_s ? -1 : 1;
    if (x->peak != y->peak) return x->peak < y->peak ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

int *tune_rank(tune_space *S) {
    int *o = malloc((size_t)(S->n_priced > 0 ? S->n_priced : 1) * sizeof *o), k = 0;
    if (!o) return NULL;
    for (int i = 0; i < S->n; i++) if (S->cells[i].priced) o[k++] = i;
    g_sort = S;
    qsort(o, (size_t)k, sizeof *o, by_tok_s);
    for (int r = 0; r < k; r++) S->cells[o[r]].rank = r + 1;
    return o;
}

/* ------------------------------------------------------------------ cells.json, cells.csv */
static json_t *cell_json(const tune_space *S, const tune_cell *c) {
    char ck[32], args[1024];
    tune_ckpt_text(c, ck, sizeof ck);
    json_t *j = json_object(), *cat = json_object();
    json_object_set_new(j, "rank", c->rank ? json_integer(c->rank) : json_null());
    json_object_set_new(j, "status", json_string(tune_status_names[c->status]));
    json_object_set_new(j, "mesh", json_pack("{s:i, s:i, s:i}", "replicate", c->mesh.r, "dp", c->dp, "tp", c->mesh.t));
    json_object_set_new(j, "micro_batch", json_integer(c->B));
    if (c->status == TUNE_UNREACHABLE) {
        json_object_set_new(j, "why", json_string(c->why));
        json_decref(cat);
        return j;
    }
    json_object_set_new(j, "grad_accum", json_integer(c->N));
    json_object_set_new(j, "checkpoint_activations", json_string(ck));
    json_object_set_new(j, "recomputed_layers", json_integer(c->recompute_layers));
    json_object_set_new(j, "sequence_parallel", c->sp < 0 ? json_null() : json_boolean(c->sp));
    json_object_set_new(j, "sp_activations", c->sp == 1 ? json_string(c->sp_local ? "local" : "gathered") : json_null());
    json_object_set_new(j, "accum_reduce", c->reduce_last < 0 ? json_null() : json_string(c->reduce_last ? "last" : "each"));
    json_object_set_new(j, "prefetch", json_boolean(c->prefetch));
    json_object_set_new(j, "peak_bytes", json_integer((json_int_t)c->peak));
    for (int k = 0; k < MEM_NCAT; k++) json_object_set_new(cat, mem_cat_names[k], json_integer((json_int_t)c->by_cat[k]));
    json_object_set_new(j, "peak_bytes_by_category", cat);
    json_object_set_new(j, "headroom_bytes", json_integer((json_int_t)S->budget - (json_int_t)c->peak));
    if (c->priced) {
        json_object_set_new(j, "predicted_step_ms", json_real(c->step_ms));
        json_object_set_new(j, "predicted_tok_s", json_real(c->tok_s));
        json_object_set_new(j, "predicted_tok_s_per_gpu", json_real(c->tok_s_per_gpu));
        json_object_set_new(j, "predicted_mfu", json_real(c->mfu));
        json_object_set_new(j, "predicted_mfu_causal", json_real(c->mfu_causal));
        json_object_set_new(j, "predicted_comm_ms", json_real(c->comm_ms));
        json_object_set_new(j, "predicted_exposed_comm_ms", json_real(c->exposed_comm_ms));
        json_object_set_new(j, "predicted_compute_ms", json_real(c->compute_ms));
    }
    if (c->why[0]) json_object_set_new(j, "why", json_string(c->why));
    tune_cell_args(S, c, args, sizeof args);
    json_object_set_new(j, "train_plan_args", json_string(args));
    return j;
}

static json_t *space_json(const tune_space *S) {
    const tune_opts *o = &S->o;
    json_t *cells = json_array();
    for (int i = 0; i < S->n; i++) json_array_append_new(cells, cell_json(S, &S->cells[i]));
    json_t *j = json_object();
    json_object_set_new(j, "schema", json_string("meshsweep.tune/1"));
    json_object_set_new(j, "model", json_string(S->base.cfg.name));
    json_object_set_new(j, "model_arg", json_string(o->model));
    json_object_set_new(j, "world", json_integer(o->world));
    json_object_set_new(j, "ranks_per_host", json_integer(S->ranks_per_host));
    json_object_set_new(j, "seq_len", json_integer(o->seq_len));
    json_object_set_new(j, "global_batch", json_integer(S->global_batch));
    json_object_set_new(j, "dtype", json_string(o->dtype));
    json_object_set_new(j, "gpu", o->gpu ? json_string(o->gpu) : json_null());
    json_object_set_new(j, "mem_budget_bytes", json_integer((json_int_t)S->budget));
    json_object_set_new(j, "mem_budget_from", json_string(S->budget_from));
    json_object_set_new(j, "machine", json_string(S->machine.name));
    json_object_set_new(j, "machine_from", json_string(S->machine_from ? S->machine_from : "file"));
    json_object_set_new(j, "mfu_convention", json_string("6(N - N_embedding) + 12 L d T per token: attention counted whole "
                                                         "(PaLM, torchtitan); predicted_mfu_causal counts it half"));
    json_object_set_new(j, "meshes_refused", json_string(S->refused));
    json_object_set_new(j, "counts", json_pack("{s:i, s:i, s:i}", "cells", S->n, "fit", S->n_fit, "priced", S->n_priced));
    json_object_set_new(j, "search_s", json_real(S->elapsed_s));
    json_object_set_new(j, "cells", cells);
    return j;
}

static void csv_row(FILE *f, const tune_space *S, const tune_cell *c) {
    char ck[32], args[1024];
    tune_ckpt_text(c, ck, sizeof ck);
    tune_cell_args(S, c, args, sizeof args);
    int un = c->status == TUNE_UNREACHABLE;
    fprintf(f, "%d,%s,%d,%d,%d,%d,", c->rank, tune_status_names[c->status], c->mesh.r, c->dp, c->mesh.t, c->B);
    if (un) { fprintf(f, ",,,,,,,,"); for (int k = 0; k < MEM_NCAT; k++) fprintf(f, ","); fprintf(f, ",,,,,,,,,\"%s\",\n", c->why); return; }
    fprintf(f, "%d,%s,%d,%s,%s,%s,%d,%llu,", c->N, ck, c->recompute_layers, c->sp < 0 ? "" : c->sp ? "on" : "off",
            c->sp == 1 ? (c->sp_local ? "local" : "gathered") : "", c->reduce_last < 0 ? "" : c->reduce_last ? "last" : "each",
            c->prefetch, (unsigned long long)c->peak);
    for (int k = 0; k < MEM_NCAT; k++) fprintf(f, "%llu,", (unsigned long long)c->by_cat[k]);
    fprintf(f, "%lld,", (long long)S->budget - (long long)c->peak);
    if (c->priced) fprintf(f, "%.4f,%.1f,%.2f,%.5f,%.5f,%.4f,%.4f,%.4f,", c->step_ms, c->tok_s, c->tok_s_per_gpu, c->mfu,
                           c->mfu_causal, c->comm_ms, c->exposed_comm_ms, c->compute_ms);
    else fprintf(f, ",,,,,,,,");
    fprintf(f, "\"%s\",\"%s\"\n", c->why, args);
}

static int write_csv(const tune_space *S, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "rank,status,replicate,dp,tp,micro_batch,grad_accum,checkpoint_activations,recomputed_layers,sequence_parallel,"
               "sp_activations,accum_reduce,prefetch,peak_bytes,");
    for (int k = 0; k < MEM_NCAT; k++) fprintf(f, "%s_bytes,", mem_cat_names[k]);
    fprintf(f, "headroom_bytes,predicted_step_ms,predicted_tok_s,predicted_tok_s_per_gpu,predicted_mfu,predicted_mfu_causal,"
               "predicted_comm_ms,predicted_exposed_comm_ms,predicted_compute_ms,why,train_plan_args\n");
    for (int i = 0; i < S->n; i++) csv_row(f, S, &S->cells[i]);
    return fclose(f) ? -1 : 0;
}

/* ------------------------------------------------------------------ the charts */
/* the Pareto front of (peak memory down, tok/s up): sorted by peak (then tok/s down), a cell is on it when it
 * is faster than every cell before it; front[i] = 1 for order[i] */
static const int *g_order;
static int by_peak(const void *a, const void *b) {
    const tune_cell *x = &g_sort->cells[g_order[*(const int *)a]], *y = &g_sort->cells[g_order[*(const int *)b]];
    if (x->peak != y->peak) return x->peak < y->peak ? -1 : 1;
    if (x->tok_s != y->tok_s) return x->tok_s > y->tok_s ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}
static int pareto(const tune_space *S, const int *order, unsigned char *front) {
    int *byp = malloc((size_t)S->n_priced * sizeof *byp);
    if (!byp) return -1;
    for (int i = 0; i < S->n_priced; i++) byp[i] = i;
    g_sort = S, g_order = order;
    qsort(byp, (size_t)S->n_priced, sizeof *byp, by_peak);
    double best = -1;
    for (int i = 0; i < S->n_priced; i++) {
        double t = S->cells[order[byp[i]]].tok_s;
        if (t > best) { best = t; front[byp[i]] = 1; }
    }
    free(byp);
    return 0;
}

static int write_chart_data(const tune_space *S, const int *order, const char *dir) {
    char p[4200];
    unsigned char *front = calloc((size_t)S->n_priced + 1, 1);
    if (!front || pareto(S, order, front)) { free(front); return -1; }
    snprintf(p, sizeof p, "%.4000s/pareto.dat", dir);
    FILE *f = fopen(p, "w");
    if (!f) { free(front); return -1; }
    fprintf(f, "# peak_gib predicted_tok_s on_front rank\n");
    for (int i = 0; i < S->n_priced; i++)
        fprintf(f, "%.4f %.2f %d %d\n", S->cells[order[i]].peak / 1073741824.0, S->cells[order[i]].tok_s, front[i], i + 1);
    free(front);
    if (fclose(f)) return -1;
    snprintf(p, sizeof p, "%.4000s/by_mesh.dat", dir);
    if (!(f = fopen(p, "w"))) return -1;
    fprintf(f, "# mesh predicted_tok_s best_cell\n");
    tune_mesh ms[TUNE_MAX_MESHES];
    int nm = tune_meshes(S->o.world, S->o.max_replicate, ms, TUNE_MAX_MESHES);
    for (int m = 0; m < nm; m++) {
        const tune_cell *b = NULL;
        for (int i = 0; i < S->n_priced && !b; i++)
            if (S->cells[order[i]].mesh.t == ms[m].t && S->cells[order[i]].mesh.r == ms[m].r) b = &S->cells[order[i]];
        char lab[160], mn[48];
        if (b) tune_cell_label(b, lab, sizeof lab);
        tune_mesh_name(&ms[m], mn, sizeof mn);
        fprintf(f, "\"%s\" %.2f \"%s\"\n", mn, b ? b->tok_s : 0.0, b ? lab : "no fitting cell");
    }
    return fclose(f) ? -1 : 0;
}

static const char pareto_gp[] =
    "set terminal pngcairo size 1000,650 noenhanced\nset output '.pareto.png.tmp'\n"
    "set title 'predicted tok/s against peak memory per rank (every fitting cell; the Pareto front joined)'\n"
    "set xlabel 'planned peak per rank (GiB)'\nset ylabel 'predicted tok/s'\nset grid\nset key bottom right\n"
    "plot 'pareto.dat' using 1:2 with points pt 7 ps 0.4 lc rgb '#9aa9c9' title 'cell', \\\n"
    "     '< awk \"!/^#/ && \\$3==1\" pareto.dat | sort -g -k1' using 1:2 with linespoints pt 7 ps 0.9 lc rgb '#c0392b' "
    "title 'Pareto front', \\\n"
    "     'pareto.dat' every ::0::0 using 1:2 with points pt 6 ps 2.5 lw 2 lc rgb '#000000' title 'winner'\n";
static const char by_mesh_gp[] =
    "set terminal pngcairo size 1000,650 noenhanced\nset output '.by_mesh.png.tmp'\n"
    "set title 'best predicted tok/s of each mesh (dp x tp; HSDP replicate x shard x tp)'\nset xlabel 'mesh'\nset ylabel 'predicted tok/s'\n"
    "set style fill solid 0.7\nset boxwidth 0.6\nset grid ytics\nset yrange [0:*]\nset xtics rotate by 90 right\n"
    "plot 'by_mesh.dat' using 0:2:xtic(1) with boxes lc rgb '#2e86c1' notitle, \\\n"
    "     '' using 0:(0):3 with labels rotate by 90 left offset 0,0.7 font ',9' notitle\n";

static int draw(const char *dir, const char *name, const char *script, char *err, size_t errlen) {
    char gp[4200], tmp[4200], fin[4200], log[4200];
    snprintf(gp, sizeof gp, "%.4000s/%.20s.gp", dir, name);
    snprintf(tmp, sizeof tmp, "%.4000s/.%.20s.png.tmp", dir, name);
    snprintf(fin, sizeof fin, "%.4000s/%.20s.png", dir, name);
    snprintf(log, sizeof log, "%.4000s/gnuplot.log", dir);
    if (files_write_atomic(gp, script, strlen(script))) { snprintf(err, errlen, "cannot write %.400s", gp); return 1; }
    char g[] = "gnuplot", base[32], *argv[] = {g, base, NULL};   /* gnuplot runs in dir */
    snprintf(base, sizeof base, "%.20s.gp", name);
    sweep_launch_opts o = {.argv = argv, .log_path = log, .append = 1, .cwd = dir, .timeout_s = 120};
    sweep_launch_result r;
    int rc = sweep_launch(&o, &r);
    if (rc == 0 && r.outcome == SWEEP_LAUNCH_INTERRUPTED) return 130;
    if (rc == 0 && r.outcome == SWEEP_LAUNCH_EXITED && r.exit_code == 0 && sweep_chart_complete(tmp) && rename(tmp, fin) == 0)
        return 0;
    unlink(tmp);
    snprintf(err, errlen, "chart %.20s.png: %.400s", name, rc ? r.error : "gnuplot failed (see gnuplot.log)");
    return 1;
}

/* ------------------------------------------------------------------ report.md */
static void setting_text(const tune_cell *c, char *out, size_t cap) {
    char ck[32], mn[48];
    tune_ckpt_text(c, ck, sizeof ck);
    tune_mesh_name(&c->mesh, mn, sizeof mn);
    snprintf(out, cap, "mesh %s, micro-batch %d x %d micro-batch%s, checkpointing %s%s%s%s%s", mn, c->B, c->N,
             c->N > 1 ? "es" : "", ck,
             c->sp < 0 ? "" : c->sp == 0 ? ", no sequence parallel" : c->sp_local ? ", sequence parallel (local)" : ", sequence parallel (gathered)",
             c->reduce_last < 0 ? "" : c->reduce_last ? ", reduce after the last" : ", reduce each",
             c->prefetch ? ", prefetch" : ", no prefetch", "");
}

static double gib(double b) { return b / 1073741824.0; }

/* the first paragraph: the winner, the runner-up and what separates them */
static void why_paragraph(FILE *f, const tune_space *S, const int *order) {
    const tune_cell *w = &S->cells[order[0]], *r = S->n_priced > 1 ? &S->cells[order[1]] : NULL;
    char a[256], b[256];
    setting_text(w, a, sizeof a);
    fprintf(f, "The predicted winner is **%s**: %.0f tok/s (%.0f per GPU, MFU %.1f%%), a step of %.1f ms, peak %.2f GiB of "
               "%.2f GiB per rank.", a, w->tok_s, w->tok_s_per_gpu, 100 * w->mfu, w->step_ms, gib(w->peak), gib(S->budget));
    if (!r) { fprintf(f, " It is the only cell that fits.\n\n"); return; }
    setting_text(r, b, sizeof b);
    fprintf(f, " The runner-up is **%s** at %.0f tok/s (%.2f%% slower). The winner exposes %.1f ms of communication "
               "(runner-up %.1f ms), recomputes %d of %d layers (runner-up %d), computes %.1f ms (runner-up %.1f ms) and leaves "
               "%.2f GiB of headroom (runner-up %.2f GiB).", b, r->tok_s, 100 * (1 - r->tok_s / w->tok_s), w->exposed_comm_ms,
            r->exposed_comm_ms, w->recompute_layers, S->base.cfg.num_hidden_layers, r->recompute_layers, w->compute_ms, r->compute_ms,
            gib((double)S->budget - (double)w->peak), gib((double)S->budget - (double)r->peak));
    for (int i = 1; i < S->n_priced; i++) { /* the best cell of another mesh: why the mesh itself won */
        const tune_cell *o = &S->cells[order[i]];
        if (o->mesh.t == w->mesh.t && o->mesh.r == w->mesh.r) continue;
        char mn[48];
        tune_mesh_name(&o->mesh, mn, sizeof mn);
        fprintf(f, " The best other mesh, %s, reaches %.0f tok/s (%.1f%% slower) with %.1f ms of exposed communication, "
                   "%.1f ms of compute and %d recomputed layers.", mn, o->tok_s, 100 * (1 - o->tok_s / w->tok_s),
                o->exposed_comm_ms, o->compute_ms, o->recompute_layers);
        break;
    }
    fprintf(f, "\n\n");
}

static void table_row(FILE *f, const tune_space *S, const tune_cell *c) {
    char ck[32], mn[48];
    tune_ckpt_text(c, ck, sizeof ck);
    tune_mesh_name(&c->mesh, mn, sizeof mn);
    fprintf(f, "| %d | %s | %d x %d | %s | %s | %s | %s | %.2f | %.2f | %.1f | %.0f | %.0f | %.1f%% | %.1f |\n", c->rank, mn,
            c->B, c->N, ck, c->sp < 0 ? "-" : c->sp == 0 ? "off" : c->sp_local ? "local" : "gathered",
            c->reduce_last < 0 ? "-" : c->reduce_last ? "last" : "each", c->prefetch ? "on" : "off", gib(c->peak),
            gib((double)S->budget - (double)c->peak), c->step_ms, c->tok_s, c->tok_s_per_gpu, 100 * c->mfu, c->exposed_comm_ms);
}

static const char table_head[] =
    "| rank | mesh dp x tp (R x S x tp) | micro-batch x accum | checkpointing | SP | reduce | prefetch | peak GiB | headroom GiB | "
    "step ms | tok/s | tok/s per GPU | MFU | exposed comm ms |\n"
    "|---:|---|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n";

static int write_md(const tune_space *S, const int *order, const char *path, int charts) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    const tune_opts *o = &S->o;
    fprintf(f, "# tune: %s on %d %s (%d per host), seq %d, global batch %d sequences\n\n", S->base.cfg.name, o->world,
            o->gpu ? o->gpu : "ranks of this host", S->ranks_per_host, o->seq_len, S->global_batch);
    why_paragraph(f, S, order);
    int unre = 0;
    for (int i = 0; i < S->n; i++) unre += S->cells[i].status == TUNE_UNREACHABLE;
    fprintf(f, "Every figure is predicted: memory by the engine's plan (byte-exact, `build/train --plan`), time by the "
               "step-time model %s (%s). MFU counts 6(N − N_embedding) + 12·L·d·T FLOPs per token (attention whole: PaLM, "
               "torchtitan); cells.csv has it with attention counted causal too. Budget %.2f GiB per rank (%s). "
               "%d cells: %d fit, %d do not (kept with what they need), %d cannot reach the global batch exactly; searched "
               "in %.2f s.%s%s\n\n", S->machine.name, S->machine_from ? S->machine_from : "file", gib(S->budget), S->budget_from,
            S->n, S->n_fit, S->n - S->n_fit - unre, unre, S->elapsed_s, S->refused[0] ? " Meshes refused: " : "", S->refused);
    int top = o->top < S->n_priced ? o->top : S->n_priced;
    fprintf(f, "## The %d best cells\n\n%s", top, table_head);
    for (int i = 0; i < top; i++) table_row(f, S, &S->cells[order[i]]);
    fprintf(f, "\n## The best cell of each mesh\n\n%s", table_head);
    tune_mesh ms[TUNE_MAX_MESHES];
    int nm = tune_meshes(o->world, o->max_replicate, ms, TUNE_MAX_MESHES);
    for (int m = 0; m < nm; m++)
        for (int i = 0; i < S->n_priced; i++)
            if (S->cells[order[i]].mesh.t == ms[m].t && S->cells[order[i]].mesh.r == ms[m].r) { table_row(f, S, &S->cells[order[i]]); break; }
    char args[1024];
    tune_cell_args(S, &S->cells[order[0]], args, sizeof args);
    fprintf(f, "\nThe winner's plan and prediction: `build/train %s`\n\n", args);
    if (charts) fprintf(f, "## Charts\n\n![predicted tok/s against peak memory](pareto.png)\n\n![best tok/s per mesh](by_mesh.png)\n");
    else fprintf(f, "## Charts\n\nNot drawn (see gnuplot.log); the data is pareto.dat and by_mesh.dat.\n");
    return fclose(f) ? -1 : 0;
}

/* ------------------------------------------------------------------ --measure */
static json_t *measure_json(const tune_space *S, const tune_measure *M) {
    json_t *cells = json_array();
    for (int i = 0; i < M->n; i++) {
        const tune_measured *m = &M->m[i];
        const tune_cell *c = &S->cells[m->cell];
        json_t *ms = json_array();
        for (int r = 0; r < m->n_ok; r++) json_array_append_new(ms, json_real(m->ms[r]));
        char args[1024];
        tune_cell_args(S, c, args, sizeof args);
        json_array_append_new(cells, json_pack("{s:i, s:s, s:f, s:o, s:o, s:o, s:o, s:i, s:s}", "predicted_rank", c->rank,
                                               "train_plan_args", args, "predicted_step_ms", c->step_ms,
                                               "measured_step_ms_median", m->n_ok ? json_real(m->median) : json_null(),
                                               "measured_step_ms_min", m->n_ok ? json_real(m->lo) : json_null(),
                                               "measured_step_ms_max", m->n_ok ? json_real(m->hi) : json_null(),
                                               "measured_step_ms", ms, "launches_ok", m->n_ok, "last_failure", m->failed));
    }
    return json_pack("{s:s, s:i, s:i, s:i, s:f, s:f, s:b, s:o}", "schema", "meshsweep.tune-measure/1", "reps", M->reps, "steps",
                     M->steps, "cells_measured", M->n_used, "kendall_tau", M->tau, "winner_error", M->winner_err,
                     "winner_within_spread", M->winner_within, "cells", cells);
}

static int append_measure(const tune_space *S, const tune_measure *M, const char *path) {
    FILE *f = fopen(path, "a");
    if (!f) return -1;
    fprintf(f, "\n## Measured on this host (--measure)\n\nThe top %d cells and %d more spread through the ranking, each launched %d "
               "times (the cells interleaved in each round), %d steps, the median step of each launch (2 left out); the "
               "median of the launches and their spread (min .. max). Kendall's tau between the predicted and the measured "
               "order over %d cells: **%.3f**. The predicted winner measured %+.1f%% against the measured best: %s.\n\n",
            M->n > 1 ? (M->n + 1) / 2 : M->n, M->n / 2, M->reps, M->steps, M->n_used, M->tau, 100 * M->winner_err,
            M->winner_within ? "it is the best or within the best's spread" : "outside the best's spread");
    fprintf(f, "| predicted rank | cell | predicted step ms | measured median ms | spread ms | launches ok |\n"
               "|---:|---|---:|---:|---|---:|\n");
    for (int i = 0; i < M->n; i++) {
        const tune_measured *m = &M->m[i];
        char lab[160];
        tune_cell_label(&S->cells[m->cell], lab, sizeof lab);
        if (m->n_ok) fprintf(f, "| %d | %s | %.1f | %.1f | %.1f .. %.1f | %d of %d |\n", S->cells[m->cell].rank, lab,
                             S->cells[m->cell].step_ms, m->median, m->lo, m->hi, m->n_ok, M->reps);
        else fprintf(f, "| %d | %s | %.1f | failed: %s | | 0 of %d |\n", S->cells[m->cell].rank, lab, S->cells[m->cell].step_ms,
                     m->failed, M->reps);
    }
    return fclose(f) ? -1 : 0;
}

/* ------------------------------------------------------------------ the folder */
static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}
void tune_rm_tree(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

#define FAIL(rc, ...) do { snprintf(err, errlen, __VA_ARGS__); tune_rm_tree(tmp); return rc; } while (0)

int tune_write(const tune_space *S, const int *order, const tune_measure *M, const char *measure_dir, int (*interrupted)(void),
               char *dir, size_t cap, char *err, size_t errlen) {
    char stamp[32], tmp[4200], p[4300];
    sweep_utc_now(stamp, sizeof stamp, NULL, 0);
    if (sweep_mkdirs(S->o.out_dir, 0755)) { snprintf(err, errlen, "cannot create %s: %s", S->o.out_dir, strerror(errno)); return 1; }
    snprintf(tmp, sizeof tmp, "%s/.%s.%ld.tmp", S->o.out_dir, stamp, (long)getpid());
    if (mkdir(tmp, 0755)) { snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno)); return 1; }
    json_t *j = space_json(S);
    snprintf(p, sizeof p, "%s/cells.json", tmp);
    int rc = json_dump_file(j, p, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
    json_decref(j);
    if (rc) FAIL(1, "cannot write %s", p);
    snprintf(p, sizeof p, "%s/cells.csv", tmp);
    if (write_csv(S, p)) FAIL(1, "cannot write %s", p);
    if (write_chart_data(S, order, tmp)) FAIL(1, "cannot write the charts' data in %s", tmp);
    char e[600] = "";
    int charts = 1;
    for (int k = 0; k < 2; k++) {
        int d = draw(tmp, k ? "by_mesh" : "pareto", k ? by_mesh_gp : pareto_gp, e, sizeof e);
        if (d == 130 || (interrupted && interrupted())) FAIL(130, "interrupted");
        if (d) { charts = 0; fprintf(stderr, "tune: %s\n", e); }
    }
    snprintf(p, sizeof p, "%s/report.md", tmp);
    if (write_md(S, order, p, charts) || (M && append_measure(S, M, p))) FAIL(1, "cannot write %s", p);
    if (M) {
        snprintf(p, sizeof p, "%s/measure.json", tmp);
        json_t *mj = measure_json(S, M);
        int bad = json_dump_file(mj, p, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
        json_decref(mj);
        if (bad) FAIL(1, "cannot write %s", p);
        snprintf(p, sizeof p, "%s/measure", tmp);
        if (measure_dir && rename(measure_dir, p)) FAIL(1, "cannot move %s into %s: %s", measure_dir, tmp, strerror(errno));
    }
    if (interrupted && interrupted()) FAIL(130, "interrupted");
    snprintf(dir, cap, "%s/%s", S->o.out_dir, stamp);
    for (int k = 2; access(dir, F_OK) == 0 && k < 100; k++) snprintf(dir, cap, "%s/%s-%d", S->o.out_dir, stamp, k);
    if (rename(tmp, dir)) FAIL(1, "cannot rename %s to %s: %s", tmp, dir, strerror(errno));
    return 0;
}
#undef FAIL
