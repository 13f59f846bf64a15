/* core/sweep/runner.c — the sweep runner behind build/sweep (docs/sweeps.md): load the spec, check what it
 * names before anything is launched (data files, model, launcher), pick the results folder (resume
 * only a matching one, one runner per folder), run each mesh (core/sweep/mesh_runs.c) or only its plan
 * (--plan-only), then have the outputs written (core/sweep/report.c).
 * Not the spec parser (core/sweep/spec.c), not process control (core/sweep/launch.c), not one mesh
 * (core/sweep/mesh_runs.c), not option parsing (bench/sweep.c), not training (build/train). */
#include "core/sweep/runner.h"
#include "core/sweep/charts.h"

#include "core/formats/config.h"
#include "core/sweep/folder.h"
#include "core/sweep/grid.h"
#include "core/sweep/inputs.h"
#include "core/sweep/launch.h"
#include "core/sweep/machine.h"
#include "core/common/files.h"
#include "core/job/catalog.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void sweep_print_argv(FILE *f, char *const *argv); /* core/sweep/mesh_runs.c */

/* ---- where things are ------------------------------------------------------------------------- */

/* Where the programs and templates are: next to this binary (build/train, ../plots). */
static int exe_dir(char *out, size_t cap) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return -1;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash) return -1;
    *slash = '\0';
    size_t len = strlen(self);
    if (len >= cap) return -1;
    memcpy(out, self, len + 1);
    return 0;
}

static int find_plots(char *out, size_t cap) {
    char cand[3][PATH_MAX];
    int nc = 0;
    const char *envp = getenv("MESHSWEEP_PLOTS");
    if (envp && *envp) snprintf(cand[nc++], PATH_MAX, "%s", envp);
    char ed[PATH_MAX];
    if (exe_dir(ed, sizeof ed) == 0) snprintf(cand[nc++], PATH_MAX, "%.4000s/../plots", ed);
    snprintf(cand[nc++], PATH_MAX, "plots");
    for (int i = 0; i < nc; i++) {
        char probe[PATH_MAX + 16];
        if (snprintf(probe, sizeof probe, "%s/loss.gp", cand[i]) >= (int)sizeof probe) continue;
        if (access(probe, R_OK) == 0 && realpath(cand[i], out) && strlen(out) < cap) return 0;
    }
    return -1;
}

/* ---- the spec's inputs, checked before any launch ------------------------------------------------ */

/* 0 when path is a file this process can open for reading; else -1 and why. */
static int readable(const char *path, char *why, size_t cap) {
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(why, cap, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(why, cap, "%s is a folder, not a token file", path);
        return -1;
    }
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, cap, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    close(fd);
    return 0;
}

/* A token file, a Megatron prefix (PREFIX.bin + PREFIX.idx) or "synthetic". */
static int data_ok(const char *path, char *why, size_t cap) {
    if (strcmp(path, "synthetic") == 0) return 0;
    if (readable(path, why, cap) == 0) return 0;
    char bin[PATH_MAX], idx[PATH_MAX], w2[64];
    if (snprintf(bin, sizeof bin, "%s.bin", path) < (int)sizeof bin && snprintf(idx, sizeof idx, "%s.idx", path) <
        (int)sizeof idx && readable(bin, w2, sizeof w2) == 0 && readable(idx, w2, sizeof w2) == 0)
        return 0;
    return -1;
}

/* argv[0] as execvp finds it: a path with a slash, or a name on PATH. */
static int on_path(const char *prog) {
    if (strchr(prog, '/')) return access(prog, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    for (const char *p = path;;) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char cand[PATH_MAX];
        struct stat st;
        if (snprintf(cand, sizeof cand, "%.*s/%s", (int)n, n ? p : ".", prog) < (int)sizeof cand &&
            stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
            return 1;
        if (!e) return 0;
        p = e + 1;
    }
}

/* Spec faults that would fail every mesh, or every cell of an axis value (a seq_len past the model's
 * positions: sweep_axes_check_model): one line "KEY: problem", exit 2, before anything runs, also with
 * --plan-only. The token files are opened as train opens them (in->, core/sweep/inputs.h) unless only
 * plans are made. */
static int check_inputs(const sweep_spec *s, int plan_only, sweep_inputs *in, char *err, size_t el) {
    char why[PATH_MAX + 200];
    model_config cfg;
    if (catalog_model(&cfg, s->model, why, sizeof why) != 0) {
        snprintf(err, el, "model: %s", why);
        return -1;
    }
    if (sweep_axes_check_model(s, &cfg, err, el)) return -1;
    if (plan_only) return 0; /* a plan reads no data and starts no launcher */
    if (data_ok(s->data, why, sizeof why) != 0) {
        snprintf(err, el, "data: %s", why);
        return -1;
    }
    if (s->eval_data && data_ok(s->eval_data, why, sizeof why) != 0) {
        snprintf(err, el, "eval_data: %s", why);
        return -1;
    }
    if (s->n_launcher > 0 && !on_path(s->launcher[0])) {
        snprintf(err, el, "launcher[0]: %s is not %s", s->launcher[0],
                 strchr(s->launcher[0], '/') ? "an executable file" : "a program on PATH");
        return -1;
    }
    if (sweep_inputs_open(s, in, err, el)) return -1;
    /* every cell's batch must be distinct sequences of the files: G for a step, and its eval batches */
    for (int i = 0; i < s->n_cells; i++) {
        const sweep_mesh *m = &s->cells[i];
        int need = m->batch_size > 0 ? m->batch_size : 1, G = m->dp * need, T = m->seq_len;
        if (sweep_inputs_max_batch(in, m, 0) < need) {
            snprintf(err, el, "data: %s holds %lld sequences of %d tokens, fewer than one global batch of %d (cell %s)",
                     s->data, (long long)((in->data_tokens - 1) / T), T, G, m->name);
            return -1;
        }
        if (sweep_inputs_max_batch(in, m, 1) < need) {
            snprintf(err, el, "eval_data: %s holds %lld sequences of %d tokens, fewer than %d eval batches of %d (cell %s)",
                     s->eval_data, (long long)((in->eval_tokens - 1) / T), T, in->eval_batches, G, m->name);
            return -1;
        }
    }
    return 0;
}

/* The spec key behind the first build/train option a refusal names ("--seq-len 2048 exceeds ..." ->
 * seq_len); an option the runner does not set came from extra_args. */
static const char *key_of(const char *msg) {
    const char *p = strstr(msg, "--");
    if (!p) return "the cell";
    char opt[48];
    size_t n = strspn(p, "-abcdefghijklmnopqrstuvwxyz");
    snprintf(opt, sizeof opt, "%.*s", (int)(n < sizeof opt ? n : sizeof opt - 1), p);
    const char *k = sweep_owned_option(opt);
    return k ? k : "extra_args";
}

/* The cells' measured runs, as plans (train --plan with the run's options, SWEEP_ARGV_CHECK), every cell
 * (milliseconds each): when train would refuse every one of them (exit 2: seq_len past the model's
 * positions, an unknown gpu, gpu with a byte budget, warmup not below steps, an unknown option in
 * extra_args, a tp that divides no cell's heads, ...), the sweep stops here, naming the key of the first
 * refusal, before a folder is made. The cells refused while others are not are the sweep's to record as
 * failed, as any run that fails; why[i] (when not NULL, 300 bytes per cell) holds train's line for each
 * refused cell, "" for the others. A cell that only does not fit (exit 3) is not a fault of the spec.
 * 0, or -1 with err. */
#define SWEEP_WHY 300
static int check_cells(const sweep_runner *R, char (*why)[SWEEP_WHY], char *err, size_t el) {
    _Static_assert(sizeof *R->refused == SWEEP_WHY, "one line per cell");
    const sweep_spec *s = R->spec;
    char dir[] = "/tmp/meshsweep-check.XXXXXX";
    if (!mkdtemp(dir)) return 0; /* nowhere to check: the launches will say it */
    char out[PATH_MAX], log[PATH_MAX];
    snprintf(out, sizeof out, "%s/plan.json", dir);
    snprintf(log, sizeof log, "%s/plan.log", dir);
    int rc = 0, refused = 0;
    for (int i = 0; i < s->n_cells; i++) {
        const sweep_mesh *m = &s->cells[i];
        if (why) why[i][0] = '\0';
        sweep_argv a = {0};
        if (sweep_train_argv(s, m, SWEEP_ARGV_CHECK, m->batch_size > 0 ? m->batch_size : 1, R->train, out, &a)) {
            sweep_argv_free(&a);
            break;
        }
        const char *env[] = {"OPENBLAS_NUM_THREADS=1", NULL};
        sweep_launch_opts lo = {.argv = a.v, .log_path = log, .timeout_s = 60, .env_default = env};
        sweep_launch_result lr;
        if (sweep_launch(&lo, &lr) == 0 && lr.outcome == SWEEP_LAUNCH_EXITED && lr.exit_code == 2) {
            char line[700] = "", tail[4000];
            sweep_tail_lines(log, 20, tail, sizeof tail);
            for (char *t = strtok(tail, "\n"); t; t = strtok(NULL, "\n"))
                if (!strncmp(t, "train: ", 7)) snprintf(line, sizeof line, "%s", t + 7);
            if (!refused) snprintf(err, el, "%s: build/train refuses cell %s: %s", key_of(line), m->name,
                                   line[0] ? line : "(no reason given)");
            if (why) snprintf(why[i], SWEEP_WHY, "%s", line[0] ? line : "(no reason given)");
            refused++;
        }
        sweep_argv_free(&a);
    }
    DIR *d = opendir(dir); /* whatever the plans left (a stand-in train may write more) */
    for (struct dirent *e; d && (e = readdir(d));) {
        char p[PATH_MAX];
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < (int)sizeof p)
            unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
    if (refused == s->n_cells && s->n_cells > 0) {
        if (s->n_cells > 1) { /* say it is every cell, not only the one named */
            size_t n = strlen(err);
            snprintf(err + n, el > n ? el - n : 0, " (and every other cell)");
        }
        rc = -1;
    }
    return rc;
}

/* ---- setting up ------------------------------------------------------------------------------- */

/* The train program (next to this binary unless given) and the child environment. 0 or an exit code. */
static int setup_runner(sweep_runner *R, const sweep_run_opts *o) {
    if (o->train) {
        snprintf(R->train, sizeof R->train, "%s", o->train);
    } else {
        char ed[PATH_MAX];
        if (exe_dir(ed, sizeof ed) != 0) {
            fprintf(stderr, "sweep: cannot find this program's folder (/proc/self/exe); pass --train PATH\n");
            return SWEEP_EXIT_IO;
        }
        snprintf(R->train, sizeof R->train, "%.4000s/train", ed);
    }
    if (!o->dry_run && access(R->train, X_OK) != 0) {
        fprintf(stderr, "sweep: train program %s: %s (build it with make, or pass --train PATH)\n", R->train,
                strerror(errno));
        return SWEEP_EXIT_IO;
    }
    /* the child environment: what Open MPI and OpenBLAS need here, unless the user set it */
    int ne = 0;
    R->env_default[ne++] = "OMPI_MCA_mpi_yield_when_idle=1";
    R->env_default[ne++] = "OPENBLAS_NUM_THREADS=1";
    R->env_default[ne++] = "OMPI_MCA_btl_vader_single_copy_mechanism=none";
    /* srun --mpi=pmix: Slurm's fences as a ring, not a tree. With the tree (the default for MPI_Init's
     * closing barrier) Slurm 22.05 + Open MPI 4.1 could let ranks leave MPI_Init while a rank on another
     * node was still in its modex fence; their first message then killed it (SIGSEGV in the TCP BTL,
     * a NULL handler: docs/cluster.md). Read by Slurm's PMIx plugin only. */
    R->env_default[ne++] = "SLURM_PMIX_FENCE=ring";
    if (geteuid() == 0) {
        R->env_default[ne++] = "OMPI_ALLOW_RUN_AS_ROOT=1";
        R->env_default[ne++] = "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1";
    }
    R->env_default[ne] = NULL;
    /* Open MPI forwards OMPI_* to remote ranks itself; the rest must be named with -x */
    R->forward_env[0] = "OPENBLAS_NUM_THREADS";
    R->forward_env[1] = NULL;
    return 0;
}

/* Resume a matching folder or create one, lock it, check it takes files. 0 or an exit code. */
static int prepare_folder(sweep_runner *R, const char *base, const sweep_run_opts *o, int *lock_fd) {
    const sweep_spec *s = R->spec;
    sweep_identity id;
    char err[600], why[PATH_MAX + 200] = "";
    if (sweep_identity_get(&id, R->train, s, err, sizeof err) != 0) {
        fprintf(stderr, "sweep: %s\n", err);
        return SWEEP_EXIT_IO;
    }
    json_t *idj = sweep_identity_json(&id);
    if (R->inputs) json_object_set(idj, "inputs", R->inputs->fingerprints); /* the inputs' contents */
    int kind = o->plan_only ? SWEEP_FOLDER_PLAN : SWEEP_FOLDER_RUN;
    R->resumed = !o->fresh && !o->plan_only &&
                 sweep_folder_find(base, s->json, idj, kind, R->dir, sizeof R->dir, why, sizeof why);
    int rc = 0;
    if (R->resumed) {
        if (why[0]) fprintf(stderr, "sweep: %s; resuming %s, this runner's latest\n", why, R->dir); /* passed over */
        int l = sweep_folder_lock(R->dir, lock_fd);
        if (l != 0) rc = l == -2 ? SWEEP_EXIT_USAGE : SWEEP_EXIT_IO;
    } else {
        if (why[0] && !o->fresh && !o->plan_only) fprintf(stderr, "sweep: %s; starting a new folder\n", why);
        if (sweep_folder_create(base, s->json, idj, kind, R->dir, sizeof R->dir, lock_fd) != 0) rc = SWEEP_EXIT_IO;
    }
    json_decref(idj);
    if (rc) return rc;
    const char *slash = strrchr(R->dir, '/');
    snprintf(R->stamp, sizeof R->stamp, "%.16s", slash ? slash + 1 : R->dir);
    char runs[PATH_MAX];
    sweep_pathf(runs, sizeof runs, "%s/runs", R->dir);
    if (sweep_mkdirs(runs, 0755) != 0) {
        fprintf(stderr, "sweep: cannot create %s: %s\n", runs, strerror(errno));
        return SWEEP_EXIT_IO;
    }
    /* a folder that cannot take a file (read-only, full) stops the sweep before anything runs */
    char probe_path[PATH_MAX];
    sweep_pathf(probe_path, sizeof probe_path, "%s/.write-test", runs);
    if (files_write_atomic(probe_path, "", 0) != 0 || unlink(probe_path) != 0) {
        fprintf(stderr, "sweep: cannot write in %s: %s\n", runs, strerror(errno));
        return SWEEP_EXIT_IO;
    }
    return 0;
}

/* ---- dry run ---------------------------------------------------------------------------------- */

static int dry_run(sweep_runner *R, const char *base, int plan_only) {
    const sweep_spec *s = R->spec;
    char what[64];
    sweep_count_text(s, what, sizeof what);
    fprintf(stderr, "sweep: %s; results would go to %s/<UTC timestamp>/ (or the latest matching one)\n", what, base);
    sweep_machine_dry(R, plan_only);
    for (int i = 0; i < s->n_cells; i++) {
        const sweep_mesh *m = &s->cells[i];
        R->idx = i + 1;
        if (R->refused && R->refused[i][0]) { /* its run would fail: say why instead of its commands */
            sweep_progress(R, m, "refused by build/train --plan (its run would fail): %s\n", R->refused[i]);
            continue;
        }
        sweep_argv a = {0};
        int max = sweep_batch_searched(s);
        if (max || plan_only) {
            if (sweep_train_argv(s, m, SWEEP_ARGV_PLAN, max ? 0 : m->batch_size, R->train, "runs/.plan.json", &a))
                return SWEEP_EXIT_IO;
            sweep_progress(R, m, "plan: ");
            sweep_print_argv(stderr, a.v);
            sweep_argv_free(&a);
            if (plan_only) continue;
            sweep_progress(R, m, "then probes at the planned b and %s (--steps 2), then the run at the confirmed b:\n",
                           s->batch_mode == SWEEP_BATCH_MATCHED ? "the next divisor of G/dp up" : "b+1");
        }
        if (sweep_train_argv_env(s, m, SWEEP_ARGV_RUN, max ? 0 : m->batch_size, R->train, "runs/.run.json",
                                 R->forward_env, &a))
            return SWEEP_EXIT_IO;
        for (int k = 0; max && a.v[k]; k++)
            if (strcmp(a.v[k], "--batch-size") == 0 && a.v[k + 1]) {
                free(a.v[k + 1]);
                a.v[k + 1] = strdup("<b>");
                if (!a.v[k + 1]) return SWEEP_EXIT_IO;
            }
        sweep_progress(R, m, "run: ");
        sweep_print_argv(stderr, a.v);
        sweep_argv_free(&a);
    }
    return 0;
}

/* ---- outputs ---------------------------------------------------------------------------------- */

/* Summary, CSV, charts, report once every mesh is done. Returns the exit status. */
static int write_outputs(sweep_runner *R, sweep_result *res, const char *started, int plan_only) {
    const sweep_spec *s = R->spec;
    char err[1024], created[32];
    sweep_folder_created(R->dir, created, sizeof created);
    const char *gp = getenv("MESHSWEEP_GNUPLOT");
    sweep_report_ctx c = {.spec = s, .res = res, .n = s->n_cells, .dir = R->dir, .plots_dir = R->plots,
                          .gnuplot = gp && *gp ? gp : "gnuplot", .started_utc = started,
                          .created_utc = created[0] ? created : started, .stamp = R->stamp, .plan_only = plan_only,
                          .machine = R->machine};
    int ok = 1, status = 0;
    if (sweep_write_plot_data(&c, err, sizeof err)) {
        fprintf(stderr, "sweep: %s\n", err);
        ok = 0;
    }
    int charts_rc = ok ? sweep_draw_charts(&c, err, sizeof err) : -1, charts_ok = ok && charts_rc == 0;
    if (charts_rc == SWEEP_CHARTS_INTERRUPTED) { /* the folder's report set is as it was: no summary without its report */
        char rep[PATH_MAX];
        sweep_pathf(rep, sizeof rep, "%s/report.md", R->dir);
        fprintf(stderr, "sweep: interrupted (%s) while drawing the charts: the report set is left as it was (%s); complete "
                "runs are kept in %s (run the same command again to write the report)\n",
                sweep_launch_interrupted() == SIGTERM ? "SIGTERM" : "SIGINT",
                access(rep, F_OK) == 0 ? "the earlier report" : "none", R->dir);
        return SWEEP_EXIT_INTERRUPTED;
    }
    if (ok && !charts_ok) fprintf(stderr, "sweep: %s\n", err);
    /* after the charts: summary.json lists only those that exist */
    if (sweep_write_summary_json(&c, err, sizeof err) || sweep_write_summary_csv(&c, err, sizeof err)) {
        fprintf(stderr, "sweep: %s\n", err);
        ok = 0;
    }
    int report_ok = 0;
    /* Ctrl-C after the charts: the report is still written (milliseconds), so the set is whole */
    if (ok && sweep_write_report_md(&c, charts_ok, err, sizeof err) != 0) fprintf(stderr, "sweep: %s\n", err);
    else report_ok = ok;
    if (sweep_launch_interrupted()) {
        status = SWEEP_EXIT_INTERRUPTED;
        fprintf(stderr, "sweep: interrupted (%s) while writing the report: it was completed in %s\n",
                sweep_launch_interrupted() == SIGTERM ? "SIGTERM" : "SIGINT", R->dir);
    }
    if ((s->batch_mode == SWEEP_BATCH_GLOBAL || s->batch_mode == SWEEP_BATCH_MATCHED) && !plan_only)
        for (int t = 0; t < s->n_settings; t++) {
            sweep_deviation d;
            char label[SWEEP_CELL_NAME_MAX + 8];
            sweep_loss_deviation_setting(res, s->n_cells, s->n_axes ? t : -1, &d, NULL);
            sweep_setting_label(s, &s->cells[t], -1, " ", label, sizeof label);
            if (d.at_mesh >= 0)
                fprintf(stderr, "sweep: %s%slargest relative loss deviation from %s: %.3g (mesh %s, step %d, %d steps "
                                "compared)\n", label, *label ? ": " : "", res[d.ref].mesh->name, d.max_rel,
                        res[d.at_mesh].mesh->name, d.at_step, d.steps_compared);
            else
                fprintf(stderr, "sweep: %s%sloss deviation: nothing to compare\n", label, *label ? ": " : "");
        }
    int n_ok = 0, n_failed = 0;
    const char *want = plan_only ? "planned" : "ok";
    for (int i = 0; i < s->n_cells; i++) n_ok += strcmp(res[i].status, want) == 0;
    for (int i = 0; i < s->n_cells; i++) n_failed += !strcmp(res[i].status, "failed") || !strcmp(res[i].status, "timeout");
    if (status != SWEEP_EXIT_INTERRUPTED) {
        if (report_ok)
            fprintf(stderr, "sweep: %d of %d %s %s; report: %s/report.md\n", n_ok, s->n_cells,
                    plan_only ? (s->n_axes ? "cells" : "meshes") : "runs", want, R->dir);
        else
            fprintf(stderr, "sweep: %d of %d %s %s; no report (see above); results so far in %s\n", n_ok,
                    s->n_cells, plan_only ? (s->n_axes ? "cells" : "meshes") : "runs", want, R->dir);
        if (!ok || !charts_ok || !report_ok || R->io_error) status = SWEEP_EXIT_IO;
        /* a sweep whose every run failed has answered nothing: not a success */
        if (n_failed == s->n_cells && s->n_cells > 0) {
            fprintf(stderr, "sweep: every run failed (the reasons are in %s/runs/*.log)\n", R->dir);
            status = SWEEP_EXIT_IO;
        }
    }
    return status;
}

/* Every mesh in order, then the outputs. Returns the exit status. */
static int run_all(sweep_runner *R, const char *started, int plan_only) {
    const sweep_spec *s = R->spec;
    sweep_result *res = calloc((size_t)s->n_cells, sizeof *res);
    if (!res) {
        fprintf(stderr, "sweep: out of memory\n");
        return SWEEP_EXIT_IO;
    }
    int status = 0;
    for (int i = 0; i < s->n_cells; i++) {
        R->idx = i + 1;
        res[i].mesh = &s->cells[i];
        int rc = sweep_launch_interrupted() ? SWEEP_EXIT_INTERRUPTED
                 : plan_only                ? sweep_plan_mesh(R, &res[i])
                                            : sweep_run_mesh(R, &res[i]);
        if (rc == SWEEP_EXIT_INTERRUPTED) {
            status = SWEEP_EXIT_INTERRUPTED;
            break;
        }
        if (R->io_error) { /* results that cannot be saved are not worth computing: stop here */
            status = SWEEP_EXIT_IO;
            break;
        }
        if (R->launcher_down[0]) { /* srun itself failed: every other launch would too */
            status = SWEEP_EXIT_USAGE;
            break;
        }
    }
    if (status == 0 && sweep_launch_interrupted()) status = SWEEP_EXIT_INTERRUPTED;
    if (status == SWEEP_EXIT_INTERRUPTED)
        fprintf(stderr, "sweep: interrupted (%s); complete runs are kept in %s (run the same command again to resume)\n",
                sweep_launch_interrupted() == SIGTERM ? "SIGTERM" : "SIGINT", R->dir);
    else if (status == SWEEP_EXIT_USAGE)
        fprintf(stderr, "sweep: stopped: srun cannot reach a Slurm controller (%s): run the sweep inside an allocation "
                "(sbatch, salloc) on a host with a Slurm configuration; complete runs are kept in %s\n", R->launcher_down, R->dir);
    else if (status == SWEEP_EXIT_IO)
        fprintf(stderr, "sweep: stopped: the results folder cannot be written; complete runs are kept in %s\n",
                R->dir);
    else
        status = write_outputs(R, res, started, plan_only);
    for (int i = 0; i < s->n_cells; i++) json_decref(res[i].record);
    free(res);
    return status;
}

static int run_checked(sweep_runner *R, const sweep_run_opts *o);
static int run_spec(sweep_runner *R, const sweep_run_opts *o) {
    const sweep_spec *s = R->spec;
    char err[PATH_MAX + 300];
    int rc = setup_runner(R, o);
    if (rc) return rc;
    sweep_inputs in = {0};
    /* a dry run checks what a run checks: the inputs, then every cell as a plan (it names each refused cell) */
    R->refused = o->dry_run ? calloc((size_t)s->n_cells, sizeof *R->refused) : NULL;
    if (o->dry_run && !R->refused) {
        fprintf(stderr, "sweep: out of memory\n");
        return SWEEP_EXIT_IO;
    }
    if (check_inputs(s, o->plan_only, &in, err, sizeof err) != 0 || check_cells(R, R->refused, err, sizeof err)) {
        fprintf(stderr, "sweep: %s: %s\n", o->spec_path, err);
        sweep_inputs_free(&in);
        free(R->refused);
        R->refused = NULL;
        return SWEEP_EXIT_USAGE;
    }
    R->inputs = o->plan_only ? NULL : &in;
    rc = run_checked(R, o);
    R->inputs = NULL;
    sweep_inputs_free(&in);
    free(R->refused);
    R->refused = NULL;
    return rc;
}

/* run_spec once the spec and its inputs are checked */
static int run_checked(sweep_runner *R, const sweep_run_opts *o) {
    const sweep_spec *s = R->spec;
    int rc;
    char base[PATH_MAX];
    int bl = snprintf(base, sizeof base, "%s/%s", o->out_dir ? o->out_dir : s->results_dir, s->name);
    if (bl < 0 || bl > PATH_MAX - 600) { /* room for /<stamp>/runs/<mesh>.probe-b<N>.json and friends */
        fprintf(stderr, "sweep: results path too long\n");
        return SWEEP_EXIT_USAGE;
    }
    if (o->dry_run) return dry_run(R, base, o->plan_only);
    if (find_plots(R->plots, sizeof R->plots) != 0) {
        fprintf(stderr, "sweep: cannot find the gnuplot templates (plots/loss.gp next to build/ or in the current "
                        "folder; or set MESHSWEEP_PLOTS)\n");
        return SWEEP_EXIT_IO;
    }
    if (sweep_launch_install_signals() != 0) {
        fprintf(stderr, "sweep: cannot install signal handlers: %s\n", strerror(errno));
        return SWEEP_EXIT_IO;
    }
    char started[32];
    sweep_utc_now(NULL, 0, started, sizeof started);
    int lock_fd = -1;
    rc = prepare_folder(R, base, o, &lock_fd);
    if (!rc) {
        char what[64];
        sweep_count_text(s, what, sizeof what);
        fprintf(stderr, "sweep: %s: %s%s, %s %s\n", s->name, what, o->plan_only ? " (plans only)" : "",
                R->resumed ? "resuming" : "writing to", R->dir);
        sweep_machine mi;
        R->machine = &mi;
        rc = sweep_machine_prepare(R, o->plan_only, &mi);
        if (!rc) rc = run_all(R, started, o->plan_only);
        R->machine = NULL;
    }
    if (lock_fd >= 0) close(lock_fd); /* the lock file stays; only the flock on it counts */
    return rc;
}

int sweep_run(const sweep_run_opts *o) {
    sweep_spec spec;
    char err[1024];
    if (sweep_spec_load(o->spec_path, &spec, err, sizeof err) != 0) {
        fprintf(stderr, "sweep: %s: %s\n", o->spec_path, err);
        return SWEEP_EXIT_USAGE;
    }
    sweep_runner R;
    memset(&R, 0, sizeof R);
    R.spec = &spec;
    R.spec_path = o->spec_path;
    int rc = run_spec(&R, o);
    sweep_spec_free(&spec);
    return rc;
}
