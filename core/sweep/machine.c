/* core/sweep/machine.c — the sweep's machine file: found, calibrated once when missing, checked for drift
 * (see machine.h). build/calibrate runs under the spec's own launcher and world, as the meshes will. Like
 * the rest of the runner this knows the engine only through its programs: the file is validated by
 * build/calibrate and build/train, here only its name and calibration date are read. */
#include "core/sweep/machine.h"
#include "core/job/catalog.h"
#include "core/cost/machine.h"
#include "core/sweep/launch.h"
#include "core/sweep/runner.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* launcher (with {world}) + -x for Open MPI + calibrate */
static int calib_argv(const sweep_runner *R, const char *calib, sweep_argv *a) {
    const sweep_spec *s = R->spec;
    int rc = 0;
    for (int i = 0; i < s->n_launcher; i++) {
        char buf[4096];
        size_t o = 0;
        for (const char *p = s->launcher[i]; *p && o + 16 < sizeof buf;) {
            if (!strncmp(p, "{world}", 7)) { o += (size_t)snprintf(buf + o, sizeof buf - o, "%d", s->world); p += 7; }
            else buf[o++] = *p++;
        }
        buf[o] = 0;
        rc |= sweep_argv_push(a, buf);
        for (const char *const *e = R->forward_env; i == 0 && *e && sweep_launcher_is_openmpi(s); e++) {
            rc |= sweep_argv_push(a, "-x");
            rc |= sweep_argv_push(a, *e);
        }
    }
    return rc | sweep_argv_push(a, calib);
}

static int launch(sweep_runner *R, sweep_argv *a, const char *log, double timeout_s, sweep_launch_result *lr) {
    sweep_launch_opts lo = {.argv = a->v, .log_path = log, .append = 1, .timeout_s = timeout_s,
                            .env_default = R->env_default};
    int rc = sweep_launch(&lo, lr);
    return rc != 0 ? -1 : lr->outcome == SWEEP_LAUNCH_INTERRUPTED ? SWEEP_EXIT_INTERRUPTED
                        : lr->outcome == SWEEP_LAUNCH_EXITED && lr->exit_code == 0 ? 0 : -1;
}

static void read_file_info(sweep_machine *mi) {
    json_error_t je;
    json_t *j = json_load_file(mi->path, 0, &je);
    const char *schema = json_string_value(json_object_get(j, "schema"));
    const char *name = json_string_value(json_object_get(j, "name"));
    const char *cal = json_string_value(json_object_get(j, "calibrated"));
    if (!j || !schema || strcmp(schema, "meshsweep.machine/1") || !name) {
        snprintf(mi->note, sizeof mi->note, "%s is not a machine file (schema meshsweep.machine/1)%s%s", mi->path,
                 j ? "" : ": ", j ? "" : je.text);
        json_decref(j);
        mi->have = 0;
        return;
    }
    snprintf(mi->name, sizeof mi->name, "%s", name);
    snprintf(mi->calibrated, sizeof mi->calibrated, "%s", cal ? cal : "");
    json_decref(j);
    mi->have = 1;
}

static int check(sweep_runner *R, const char *calib, sweep_machine *mi) {
    char out[PATH_MAX], logf[PATH_MAX];
    sweep_pathf(out, sizeof out, "%s/machine_check.json", R->dir);
    sweep_pathf(logf, sizeof logf, "%s/calibrate.log", R->dir);
    sweep_argv a = {0};
    int rc = calib_argv(R, calib, &a) | sweep_argv_push(&a, "--check") | sweep_argv_push(&a, mi->path) |
             sweep_argv_push(&a, "--out") | sweep_argv_push(&a, out);
    sweep_launch_result lr;
    if (!rc) rc = launch(R, &a, logf, 300, &lr);
    sweep_argv_free(&a);
    if (rc == SWEEP_EXIT_INTERRUPTED) return rc;
    json_t *j = rc ? NULL : json_load_file(out, 0, NULL);
    json_t *c = json_object_get(j, "compute_ratio"), *m = json_object_get(j, "comm_ratio");
    json_t *l = json_array_get(json_object_get(j, "load"), 0);
    if (!j || (!json_is_number(c) && !json_is_number(m))) {
        snprintf(mi->note, sizeof mi->note, "the drift check failed (see calibrate.log)");
        json_decref(j);
        return 0;
    }
    mi->checked = 1;
    mi->compute_ratio = json_is_number(c) ? json_number_value(c) : NAN;
    mi->comm_ratio = json_is_number(m) ? json_number_value(m) : NAN;
    mi->load = json_is_number(l) ? json_number_value(l) : NAN;
    json_decref(j);
    int far = sweep_machine_drift(mi) > 0.25;
    char ct[48] = "not compared", mt[48] = "not compared";   /* never "xnan": a ratio the check could not have */
    if (isfinite(mi->compute_ratio)) snprintf(ct, sizeof ct, "x%.2f", mi->compute_ratio);
    if (isfinite(mi->comm_ratio)) snprintf(mt, sizeof mt, "x%.2f", mi->comm_ratio);
    fprintf(stderr, "sweep: machine %s (calibrated %s): now compute %s, collectives %s of its file (load %.2f)%s\n",
            mi->name, mi->calibrated, ct, mt, mi->load,
            far ? "; more than 25% away: the prediction errors include that drift (`make calibrate` measures it again)" : "");
    return 0;
}

int sweep_machine_prepare(sweep_runner *R, int plan_only, sweep_machine *mi) {
    memset(mi, 0, sizeof *mi);
    const char *mode = getenv("MESHSWEEP_CALIBRATE");
    const char *given = getenv("MESHSWEEP_MACHINE");
    char dir[PATH_MAX], calib[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", R->train);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    sweep_pathf(calib, sizeof calib, "%s/calibrate", dir);
    if (given && !strcmp(given, "none")) {
        snprintf(mi->note, sizeof mi->note, "no machine model (MESHSWEEP_MACHINE=none): no predictions");
        return 0;
    }
    if (given && *given) snprintf(mi->path, sizeof mi->path, "%s", given);
    else if (catalog_machine_path(dir, mi->path, sizeof mi->path)) return 0;
    int exists = access(mi->path, R_OK) == 0;
    if (strcmp(R->spec->backend, "cpu")) {   /* GPU runs predict with their device's model */
        if (R->spec->gpu) {   /* build/train --plan --gpu NAME predicts with that GPU's shipped model */
            mi->have = 1;
            snprintf(mi->name, sizeof mi->name, "%.60s", R->spec->gpu);
            snprintf(mi->path, sizeof mi->path, "shipped model of gpu %s", R->spec->gpu);
        }
        snprintf(mi->note, sizeof mi->note, "GPU sweep: the plans predict with the spec's gpu model, each run with its "
                 "device's shipped model");
        return 0;
    }
    int off = mode && !strcmp(mode, "0");
    if (plan_only || off || (!exists && given && *given)) {
        if (exists) read_file_info(mi);
        else snprintf(mi->note, sizeof mi->note, "no machine file (%s): no predictions%s", mi->path,
                      off ? " (MESHSWEEP_CALIBRATE=0)" : plan_only ? " (`make calibrate` makes one)" : "");
        return 0;
    }
    if (!exists) {
        if (access(calib, X_OK) != 0) {
            snprintf(mi->note, sizeof mi->note, "no machine file and no %s to make one: no predictions", calib);
            return 0;
        }
        char mdir[PATH_MAX], log[PATH_MAX];
        sweep_pathf(mdir, sizeof mdir, "%s/machines", dir);
        sweep_pathf(log, sizeof log, "%s/calibrate.log", R->dir);
        if (sweep_mkdirs(mdir, 0755) != 0) {
            snprintf(mi->note, sizeof mi->note, "cannot create %s: %s", mdir, strerror(errno));
            return 0;
        }
        int quick = mode && !strcmp(mode, "quick");
        fprintf(stderr, "sweep: no machine model for this host yet: calibrating it once (%s) into %s\n",
                quick ? "quick" : "a minute or two", mi->path);
        sweep_argv a = {0};
        int rc = calib_argv(R, calib, &a) | sweep_argv_push(&a, "--spec") | sweep_argv_push(&a, R->spec_path) |
                 sweep_argv_push(&a, "--out") | sweep_argv_push(&a, mi->path);
        if (quick) rc |= sweep_argv_push(&a, "--quick");
        sweep_launch_result lr = {0};
        if (!rc) rc = launch(R, &a, log, 600, &lr);
        sweep_argv_free(&a);
        if (rc == SWEEP_EXIT_INTERRUPTED) return rc;
        if (rc) {
            snprintf(mi->note, sizeof mi->note,
                     "calibration failed, or refused on a loaded host (calibrate.log says which): no predictions");
            fprintf(stderr, "sweep: %s\n", mi->note);
            return 0;
        }
        mi->calibrated_now = 1;
        mi->calibrate_s = lr.elapsed_s;
    }
    read_file_info(mi);
    if (!mi->have) { fprintf(stderr, "sweep: %s\n", mi->note); return 0; }
    return check(R, calib, mi);
}

double sweep_machine_drift(const sweep_machine *mi) {
    if (!mi->checked) return 0;
    double d = 0;
    const double r[2] = {mi->compute_ratio, mi->comm_ratio};
    for (int i = 0; i < 2; i++)   /* x1.30 and x0.77 are both 30% away */
        if (isfinite(r[i]) && r[i] > 0) {
            double a = r[i] >= 1 ? r[i] - 1 : 1 / r[i] - 1;
            if (a > d) d = a;
        }
    return d;
}

static json_t *num(double x) { return isfinite(x) ? json_real(x) : json_null(); }

json_t *sweep_machine_json(const sweep_machine *mi) {
    json_t *j = json_object();
    json_object_set_new(j, "file", mi->have ? json_string(mi->path) : json_null());
    json_object_set_new(j, "name", mi->have ? json_string(mi->name) : json_null());
    json_object_set_new(j, "calibrated", mi->have && mi->calibrated[0] ? json_string(mi->calibrated) : json_null());
    json_object_set_new(j, "calibrated_by_this_sweep", json_boolean(mi->calibrated_now));
    json_object_set_new(j, "check", mi->checked ? json_pack("{s:o, s:o, s:o, s:s}", "compute_ratio", num(mi->compute_ratio),
                                                           "comm_ratio", num(mi->comm_ratio), "load", num(mi->load),
                                                           "record", "machine_check.json")
                                                : json_null());
    json_object_set_new(j, "note", mi->note[0] ? json_string(mi->note) : json_null());
    return j;
}

void sweep_machine_dry(const sweep_runner *R, int plan_only) {
    const char *mode = getenv("MESHSWEEP_CALIBRATE"), *given = getenv("MESHSWEEP_MACHINE");
    char dir[PATH_MAX], path[PATH_MAX], err[600];
    snprintf(dir, sizeof dir, "%s", R->train);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    if (given && !strcmp(given, "none")) { fprintf(stderr, "sweep: machine model: none (MESHSWEEP_MACHINE=none)\n"); return; }
    if (strcmp(R->spec->backend, "cpu")) {
        fprintf(stderr, "sweep: machine model: %s%s, each run its device's shipped model\n", R->spec->gpu ? "plans: gpu " : "",
                R->spec->gpu ? R->spec->gpu : "plans: none");
        return;
    }
    if (given && *given) snprintf(path, sizeof path, "%s", given);
    else if (catalog_machine_path(dir, path, sizeof path)) {
        fprintf(stderr, "sweep: machine model: none (no machine file path for this host)\n");
        return;
    }
    if (access(path, F_OK) != 0) {
        int calib = !plan_only && !(mode && !strcmp(mode, "0")) && !(given && *given);
        fprintf(stderr, "sweep: machine model: %s does not exist: %s\n", path,
                calib ? "a run would calibrate it first (a minute or two)" : "no predictions");
        return;
    }
    cost_machine m;
    if (cost_machine_load(path, &m, err, sizeof err)) { /* the plans above refuse it too */
        fprintf(stderr, "sweep: machine model: %s\n", err);
        return;
    }
    fprintf(stderr, "sweep: machine model: %s (%s, calibrated %s)%s\n", path, m.name, m.calibrated[0] ? m.calibrated : "?",
            plan_only || (mode && !strcmp(mode, "0")) ? "" : "; a run checks its drift first");
    cost_machine_free(&m);
}
