/* core/sweep/mesh_runs.c — one mesh of a sweep: launch build/train (a fresh process per run), judge what
 * it left (exit code, its record checked against what was asked), find the largest batch that fits
 * in max mode (the plan's candidate, probes at b and b+1, capped at the engine's own limit), reuse
 * final records of a resumed folder (ok, oom, diverged) and retry the others (failed, timeout).
 * Not the folder or the loop over meshes (core/sweep/runner.c), not process control
 * (core/sweep/launch.c). */
#include "core/sweep/runner.h"

#include "core/sweep/grid.h"
#include "core/sweep/inputs.h"
#include "core/sweep/launch.h"
#include "core/common/files.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Everything one launch of train left behind, as the runner judges it. */
typedef struct launch_out {
    char status[16];
    char error[1024];
    json_t *record;             /* owned */
    int resumed;
    char finished[24];          /* resumed: when the record was written */
    double elapsed_s;           /* < 0 when resumed */
} launch_out;

/* ---- small helpers ---------------------------------------------------------------------------- */

void sweep_progress(const sweep_runner *R, const sweep_mesh *m, const char *fmt, ...) {
    fprintf(stderr, "[%d/%d] %s  ", R->idx, R->spec->n_cells, m->name);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

void sweep_pathf(char *out, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, cap, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap) {
        fprintf(stderr, "sweep: path too long: %.200s...\n", out);
        exit(SWEEP_EXIT_IO);
    }
}

int sweep_engine_max_batch(int seq_len) {
    long long b = seq_len > 0 ? SWEEP_ENGINE_MAX_TOKENS_PER_RANK / seq_len : 0;
    return (int)(b < SWEEP_ENGINE_MAX_BATCH ? b : SWEEP_ENGINE_MAX_BATCH);
}

/* The first line of a message, at most cap-1 bytes. */
static void first_line(char *out, size_t cap, const char *msg) {
    size_t k = 0;
    for (; msg[k] && msg[k] != '\n' && k + 1 < cap; k++) out[k] = msg[k];
    out[k] = '\0';
}

/* The line of a log that most likely says what went wrong: the last one outside Open MPI's
 * dashed message boxes that is not blank and not one of the runner's own "[sweep]" notes. */
static void key_line(const char *text, char *out, size_t cap) {
    out[0] = '\0';
    int inside = 0;
    for (const char *b = text; *b;) {
        const char *e = strchr(b, '\n');
        size_t len = e ? (size_t)(e - b) : strlen(b);
        if (len >= 5 && strncmp(b, "-----", 5) == 0) inside = !inside;
        else if (!inside && len > 0 && strncmp(b, "[sweep]", 7) != 0) {
            size_t n = len < cap ? len : cap - 1;
            memcpy(out, b, n);
            out[n] = '\0';
        }
        b += len + (e ? 1 : 0);
    }
}

static int is_status(const char *s) {
    static const char *const ok[] = {"ok", "oom", "diverged", "failed", "timeout"};
    for (size_t i = 0; s && i < sizeof ok / sizeof ok[0]; i++)
        if (strcmp(s, ok[i]) == 0) return 1;
    return 0;
}

/* ok, oom and diverged are answers; failed and timeout are retried by the next invocation. */
static int is_final(const char *s) { return s && (!strcmp(s, "ok") || !strcmp(s, "oom") || !strcmp(s, "diverged")); }

static long long rec_int(json_t *rec, const char *a, const char *b) {
    json_t *v = json_object_get(rec, a);
    if (b) v = json_object_get(v, b);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* NULL when rec is a run record of mesh m as asked (batch < 0: any), else why not, in buf. */
static const char *check_record(const sweep_runner *R, const sweep_mesh *m, int kind, int batch, json_t *rec,
                                char *buf, size_t cap) {
    const sweep_spec *s = R->spec;
    const char *schema = json_string_value(json_object_get(rec, "schema"));
    const char *st = json_string_value(json_object_get(rec, "status"));
    int want_steps = kind == SWEEP_ARGV_PROBE ? 2 : s->steps;
    long long w = rec_int(rec, "mesh", "world"), dp = rec_int(rec, "mesh", "dp"), tp = rec_int(rec, "mesh", "tp");
    long long rep = rec_int(rec, "mesh", "replicate"), b = rec_int(rec, "batch_size", NULL);
    if (rep < 0) rep = 1; /* a record from before HSDP: a 2D mesh */
    if (!json_is_object(rec) || !schema || strcmp(schema, "meshsweep.run/1") != 0)
        snprintf(buf, cap, "not a run record (schema \"meshsweep.run/1\" missing)");
    else if (!is_status(st)) snprintf(buf, cap, "no valid status");
    else if (w != s->world || dp != m->dp || tp != m->tp || rep != m->rep)
        snprintf(buf, cap, "the record is of world %lld, mesh %lldx%lld (replicate %lld); asked: world %d, mesh %s", w, dp,
                 tp, rep, s->world, m->name);
    else if (batch >= 0 ? b != batch : b < 0)
        snprintf(buf, cap, "the record is of batch size %lld; asked: %d", b, batch);
    else if (strcmp(st, "ok") == 0 && (rec_int(rec, "config", "steps") != want_steps ||
                                       rec_int(rec, "summary", "steps_done") != want_steps ||
                                       (long long)json_array_size(json_object_get(rec, "steps")) != want_steps))
        snprintf(buf, cap, "the record has %lld of %lld steps done (%zu listed); asked: %d steps",
                 rec_int(rec, "summary", "steps_done"), rec_int(rec, "config", "steps"),
                 json_array_size(json_object_get(rec, "steps")), want_steps);
    else if (strcmp(st, "ok") == 0 && rec_int(rec, "config", "seq_len") != m->seq_len)
        snprintf(buf, cap, "the record is of seq_len %lld; asked: %d", rec_int(rec, "config", "seq_len"), m->seq_len);
    else return sweep_cell_record_mismatch(s, m, rec, buf, cap);
    return buf;
}

/* A record file's time as "YYYY-mm-ddTHH:MM:SSZ". */
static void file_time(const char *path, char *out, size_t cap) {
    struct stat st;
    struct tm tm;
    out[0] = '\0';
    if (stat(path, &st) == 0 && gmtime_r(&st.st_mtime, &tm)) strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* A final, valid record of this launch in the folder (resume), or NULL: absent, retried
 * (failed/timeout, said on stderr) or not a record of what is asked (said on stderr). */
static json_t *load_done(const sweep_runner *R, const sweep_mesh *m, int kind, int batch, const char *path,
                         const char *label) {
    if (access(path, F_OK) != 0) return NULL;
    json_t *r = json_load_file(path, 0, NULL);
    char why[300];
    const char *bad = r ? check_record(R, m, kind, batch, r, why, sizeof why) : "not valid JSON";
    /* a kept record is trusted only with the configuration the spec asks (copied in from elsewhere?) */
    if (!bad && R->inputs) bad = sweep_inputs_record_mismatch(R->inputs, R->spec, m, kind, r, why, sizeof why);
    const char *st = json_string_value(json_object_get(r, "status"));
    if (bad) sweep_progress(R, m, "%s: runs/%s is not a record of this launch (%s): running it again\n", label,
                      strrchr(path, '/') + 1, bad);
    else if (!is_final(st))
        sweep_progress(R, m, "%s: was %s in the run of %s: retrying\n", label, st, R->stamp);
    if (bad || !is_final(st)) {
        json_decref(r);
        return NULL;
    }
    return r;
}

static void print_argv(FILE *f, char *const *argv) {
    for (int i = 0; argv[i]; i++) {
        const char *a = argv[i];
        int plain = *a != '\0';
        for (const char *p = a; *p; p++)
            if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%{}", *p)) plain = 0;
        if (plain) fprintf(f, "%s%s", i ? " " : "", a);
        else {
            fprintf(f, "%s'", i ? " " : "");
            for (const char *p = a; *p; p++) {
                if (*p == '\'') fputs("'\\''", f);
                else fputc(*p, f);
            }
            fputc('\'', f);
        }
    }
    fputc('\n', f);
}

void sweep_print_argv(FILE *f, char *const *argv);
void sweep_print_argv(FILE *f, char *const *argv) { print_argv(f, argv); }

/* ---- one launch of train ---------------------------------------------------------------------- */

/* A record for a run that left none (or whose record cannot be trusted), in the run schema. */
static json_t *runner_record(const sweep_runner *R, const sweep_mesh *m, int batch, const char *status,
                             const char *error, const sweep_launch_result *lr, char *const *argv, const char *log_rel) {
    const sweep_spec *s = R->spec;
    json_t *argv_j = json_array();
    for (int i = 0; argv && argv[i] && argv_j; i++) json_array_append_new(argv_j, json_string(argv[i]));
    json_t *r = json_pack("{s:s, s:s, s:s, s:{s:s, s:i, s:i}, s:{s:i, s:i, s:i}, s:i, s:i, s:[], s:[], s:n, s:n}",
                          "schema", "meshsweep.run/1", "status", status, "error", error ? error : "", "config",
                          "model", s->model, "seq_len", m->seq_len, "steps", s->steps, "mesh", "world", s->world, "dp",
                          m->dp, "tp", m->tp, "batch_size", batch, "global_batch",
                          s->batch_mode == SWEEP_BATCH_MATCHED ? m->global_batch : m->dp * batch, "steps", "eval",
                          "summary", "memory");
    if (!r) {
        json_decref(argv_j);
        return NULL;
    }
    if (m->rep > 1) { /* HSDP, as build/train records it */
        json_object_set_new(json_object_get(r, "mesh"), "replicate", json_integer(m->rep));
        json_object_set_new(json_object_get(r, "mesh"), "shard", json_integer(m->dp / m->rep));
    }
    json_t *run = json_object();
    if (run) {
        json_object_set_new(run, "argv", argv_j ? argv_j : json_array());
        json_object_set_new(run, "log", json_string(log_rel));
        if (lr) {
            json_object_set_new(run, "elapsed_s", json_real(lr->elapsed_s));
            json_object_set_new(run, "exit_code", lr->outcome == SWEEP_LAUNCH_EXITED ? json_integer(lr->exit_code)
                                                                                     : json_null());
            json_object_set_new(run, "signal", lr->outcome == SWEEP_LAUNCH_SIGNALED ? json_integer(lr->term_signal)
                                                                                    : json_null());
        }
        json_object_set_new(r, "runner", run);
    } else {
        json_decref(argv_j);
    }
    return r;
}

static int write_record(sweep_runner *R, const char *path, json_t *rec) {
    char *text = rec ? json_dumps(rec, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    int rc = -1;
    if (text) {
        size_t len = strlen(text);
        char *t2 = realloc(text, len + 2);
        if (t2) {
            text = t2;
            text[len] = '\n', text[len + 1] = '\0';
            rc = files_write_atomic(path, text, len + 1);
        }
    }
    if (rc != 0) {
        fprintf(stderr, "sweep: cannot write %s: %s\n", path, text ? strerror(errno) : "out of memory");
        R->io_error = 1;
    }
    free(text);
    return rc;
}

/* train's record after a launch that ran: status and error as the runner judges them; *modified
 * when the record must be rewritten (overruled), NULL rec when there is none to keep. */
static void judge(sweep_runner *R, const sweep_mesh *m, int kind, int batch, const sweep_launch_result *lr,
                  json_t **recp, const char *log, launch_out *o, int *modified) {
    json_t *rec = *recp;
    char tail[700], key[240], more[4000], why[300];
    sweep_tail_lines(log, 10, tail, sizeof tail);
    sweep_tail_lines(log, 60, more, sizeof more);
    key_line(more, key, sizeof key);
    int code = lr->outcome == SWEEP_LAUNCH_EXITED ? lr->exit_code : -1;
    const char *bad = rec ? check_record(R, m, kind, batch, rec, why, sizeof why) : NULL;
    *modified = 0;
    if (lr->outcome == SWEEP_LAUNCH_TIMEOUT) {
        snprintf(o->status, sizeof o->status, "timeout");
        snprintf(o->error, sizeof o->error, "killed after the %g s timeout; last log lines:\n%s", R->spec->timeout_s,
                 tail);
        *modified = rec != NULL;
    } else if (rec && bad) { /* e.g. a launcher that started another number of ranks than asked */
        snprintf(o->status, sizeof o->status, "failed");
        snprintf(o->error, sizeof o->error, "the run is not what was asked: %s (check the launcher and extra_args)",
                 bad);
        *modified = 1;
    } else if (rec) {
        const char *st = json_string_value(json_object_get(rec, "status"));
        const char *e = json_string_value(json_object_get(rec, "error"));
        if (strcmp(st, "ok") == 0 && code != 0) {
            snprintf(o->status, sizeof o->status, "failed");
            snprintf(o->error, sizeof o->error, "%s %d although its record says ok: %s\nlast log lines:\n%s",
                     code >= 0 ? "exited with code" : "killed by signal", code >= 0 ? code : lr->term_signal, key, tail);
            *modified = 1;
        } else {
            snprintf(o->status, sizeof o->status, "%s", st);
            snprintf(o->error, sizeof o->error, "%s", e ? e : (strcmp(st, "ok") ? tail : ""));
        }
    } else {
        snprintf(o->status, sizeof o->status, "%s", code == 3 ? "oom" : code == 4 ? "diverged" : "failed");
        if (code >= 0)
            snprintf(o->error, sizeof o->error, "exited with code %d, no run record: %s\nlast log lines:\n%s", code,
                     key, tail);
        else
            snprintf(o->error, sizeof o->error, "killed by signal %d: %s\nlast log lines:\n%s", lr->term_signal, key,
                     tail);
    }
    if (bad) { /* a record that is not of this mesh keeps no measurement in the summary */
        json_decref(rec);
        *recp = NULL;
    }
}

/* 1 when a launch that left no record failed in srun itself, before any rank ran train: no Slurm
 * configuration, or no controller to reach (every other launch would fail the same way). srun's line
 * goes to out. */
static int srun_unreachable(const sweep_runner *R, const char *log, char *out, size_t cap) {
    static const char *const signs[] = {"Could not establish a configuration source", "Unable to contact slurm controller",
                                        "s_p_parse_file: cannot stat file"};
    if (!sweep_launcher_is_srun(R->spec)) return 0;
    char text[4000];
    sweep_tail_lines(log, 40, text, sizeof text);
    int found = 0;
    for (char *t = strtok(text, "\n"); t; t = strtok(NULL, "\n")) {
        if (!strncmp(t, "train: ", 7)) return 0; /* train ran: the failure is the run's own */
        for (size_t k = 0; !found && k < sizeof signs / sizeof signs[0]; k++)
            if (!strncmp(t, "srun: ", 6) && strstr(t, signs[k])) found = 1, snprintf(out, cap, "%s", t);
    }
    return found;
}

/* Run train once (kind RUN or PROBE) as runs/<base>.{json,log}, or reuse a final record.
 * Returns 0 (o filled; a failed run is still 0) or SWEEP_EXIT_INTERRUPTED. */
static int launch_train(sweep_runner *R, const sweep_mesh *m, int kind, int batch, const char *base, launch_out *o) {
    char intro[64];
    if (kind == SWEEP_ARGV_PROBE) snprintf(intro, sizeof intro, "probe b=%d ... ", batch);
    else snprintf(intro, sizeof intro, "run b=%d steps=%d ... ", batch, R->spec->steps);
    memset(o, 0, sizeof *o);
    o->elapsed_s = -1;
    char final[PATH_MAX], tmp[PATH_MAX], log[PATH_MAX], log_rel[PATH_MAX];
    sweep_pathf(final, sizeof final, "%s/runs/%s.json", R->dir, base);
    sweep_pathf(tmp, sizeof tmp, "%s/runs/.%s.train.json", R->dir, base);
    sweep_pathf(log, sizeof log, "%s/runs/%s.log", R->dir, base);
    snprintf(log_rel, sizeof log_rel, "runs/%s.log", base);
    json_t *done = load_done(R, m, kind, batch, final, kind == SWEEP_ARGV_PROBE ? "probe" : "run");
    if (done) {
        if (kind == SWEEP_ARGV_PROBE) sweep_progress(R, m, "%s", intro);
        o->record = done;
        o->resumed = 1;
        file_time(final, o->finished, sizeof o->finished);
        snprintf(o->status, sizeof o->status, "%s", json_string_value(json_object_get(done, "status")));
        const char *e = json_string_value(json_object_get(done, "error"));
        snprintf(o->error, sizeof o->error, "%s", e ? e : "");
        return 0;
    }
    if (unlink(tmp) != 0 && errno != ENOENT) {
        fprintf(stderr, "sweep: cannot remove stale %s: %s\n", tmp, strerror(errno));
        R->io_error = 1;
    }
    sweep_progress(R, m, "%s", intro);
    sweep_argv a = {0};
    if (sweep_train_argv_env(R->spec, m, kind, batch, R->train, tmp, R->forward_env, &a) != 0) {
        snprintf(o->status, sizeof o->status, "failed");
        snprintf(o->error, sizeof o->error, "cannot build the command line (out of memory or an argument too long)");
        o->record = runner_record(R, m, batch, o->status, o->error, NULL, NULL, log_rel);
        if (o->record) write_record(R, final, o->record);
        sweep_argv_free(&a);
        return 0;
    }
    char prefix[SWEEP_CELL_NAME_MAX + 64];
    snprintf(prefix, sizeof prefix, "[%d/%d] %s   ", R->idx, R->spec->n_cells, m->name);
    sweep_launch_opts lo = {.argv = a.v, .log_path = log, .timeout_s = R->spec->timeout_s,
                            .env_default = R->env_default, .progress = kind == SWEEP_ARGV_RUN ? prefix : NULL,
                            .stop_signal = sweep_launcher_is_srun(R->spec) ? SIGTERM : 0};
    sweep_launch_result lr;
    int rc = sweep_launch(&lo, &lr);
    o->elapsed_s = lr.elapsed_s;
    if (lr.outcome == SWEEP_LAUNCH_INTERRUPTED) {
        unlink(tmp); /* no partial record: the rerun starts this launch again */
        sweep_argv_free(&a);
        return SWEEP_EXIT_INTERRUPTED;
    }
    json_t *rec = NULL;
    if (access(tmp, F_OK) == 0) {
        rec = json_load_file(tmp, 0, NULL);
        if (!json_is_object(rec)) {
            json_decref(rec);
            rec = NULL;
        }
    }
    int modified = 0;
    if (rc != 0) { /* could not start at all (or no log): the error says why */
        snprintf(o->status, sizeof o->status, "failed");
        snprintf(o->error, sizeof o->error, "%s", lr.error);
        if (lr.outcome == SWEEP_LAUNCH_IO_ERROR) R->io_error = 1;
        json_decref(rec);
        rec = NULL;
    } else {
        judge(R, m, kind, batch, &lr, &rec, log, o, &modified);
        if (!rec && srun_unreachable(R, log, R->launcher_down, sizeof R->launcher_down))
            snprintf(o->error, sizeof o->error, "srun cannot reach a Slurm controller: %s", R->launcher_down);
    }
    if (rec && !modified) {
        /* train's own record, byte for byte */
        if (rename(tmp, final) != 0) {
            fprintf(stderr, "sweep: cannot move %s to %s: %s\n", tmp, final, strerror(errno));
            R->io_error = 1;
        }
    } else {
        if (rec) {
            json_object_set_new(rec, "status", json_string(o->status));
            json_object_set_new(rec, "error", json_string(o->error));
        } else {
            rec = runner_record(R, m, batch, o->status, o->error, &lr, a.v, log_rel);
        }
        if (!rec || write_record(R, final, rec) != 0) R->io_error = 1;
        unlink(tmp);
    }
    o->record = rec;
    sweep_argv_free(&a);
    return 0;
}

/* ---- the plan --------------------------------------------------------------------------------- */

/* build/train --plan for mesh m at batch b (0: max) into runs/<mesh>.plan.json, reused when present.
 * Returns the plan (owned) or NULL (error filled), *interrupted set on Ctrl-C. */
static json_t *launch_plan(sweep_runner *R, const sweep_mesh *m, int b, char *error, size_t ecap, int *interrupted) {
    char final[PATH_MAX], tmp[PATH_MAX], log[PATH_MAX];
    sweep_pathf(final, sizeof final, "%s/runs/%s.plan.json", R->dir, m->name);
    sweep_pathf(tmp, sizeof tmp, "%s/runs/.%s.plan.train.json", R->dir, m->name);
    sweep_pathf(log, sizeof log, "%s/runs/%s.plan.log", R->dir, m->name);
    *interrupted = 0;
    json_t *plan = access(final, F_OK) == 0 ? json_load_file(final, 0, NULL) : NULL;
    long long prep = rec_int(plan, "replicate", NULL);
    if (json_is_integer(json_object_get(plan, "batch_size")) && rec_int(plan, "tp", NULL) == m->tp &&
        rec_int(plan, "world", NULL) == R->spec->world && (prep < 0 ? 1 : prep) == m->rep) {
        sweep_progress(R, m, "plan: %s %lld (done before)\n", b ? "batch" : "max batch", rec_int(plan, "batch_size", NULL));
        return plan;
    }
    json_decref(plan);
    unlink(tmp);
    sweep_argv a = {0};
    if (sweep_train_argv(R->spec, m, SWEEP_ARGV_PLAN, b, R->train, tmp, &a) != 0) {
        snprintf(error, ecap, "cannot build the plan command line");
        sweep_argv_free(&a);
        return NULL;
    }
    sweep_launch_opts lo = {.argv = a.v, .log_path = log, .timeout_s = R->spec->timeout_s,
                            .env_default = R->env_default};
    sweep_launch_result lr;
    int rc = sweep_launch(&lo, &lr);
    sweep_argv_free(&a);
    if (lr.outcome == SWEEP_LAUNCH_INTERRUPTED) {
        unlink(tmp);
        *interrupted = 1;
        return NULL;
    }
    plan = access(tmp, F_OK) == 0 ? json_load_file(tmp, 0, NULL) : NULL;
    json_t *bv = json_object_get(plan, "batch_size");
    /* exit 0: fits; 3: does not fit (with max: not even one sequence, batch_size 0) */
    int code_ok = rc == 0 && lr.outcome == SWEEP_LAUNCH_EXITED && (lr.exit_code == 0 || lr.exit_code == 3);
    if (!code_ok || !json_is_integer(bv) || json_integer_value(bv) < 0) {
        char tail[600], key[240], more[4000];
        sweep_tail_lines(log, 6, tail, sizeof tail);
        sweep_tail_lines(log, 60, more, sizeof more);
        key_line(more, key, sizeof key);
        if (rc != 0) snprintf(error, ecap, "plan: %s", lr.error);
        else if (lr.outcome == SWEEP_LAUNCH_TIMEOUT)
            snprintf(error, ecap, "plan: killed after the %g s timeout\nlast log lines:\n%s", R->spec->timeout_s, tail);
        else if (lr.outcome == SWEEP_LAUNCH_EXITED)
            snprintf(error, ecap, "plan: exited with code %d%s: %s\nlast log lines:\n%s", lr.exit_code,
                     json_is_integer(bv) ? "" : ", no plan", key, tail);
        else snprintf(error, ecap, "plan: killed by signal %d: %s\nlast log lines:\n%s", lr.term_signal, key, tail);
        json_decref(plan);
        unlink(tmp);
        sweep_progress(R, m, "plan ... failed (%.1f s)\n", lr.elapsed_s);
        return NULL;
    }
    if (rename(tmp, final) != 0) {
        fprintf(stderr, "sweep: cannot move %s to %s: %s\n", tmp, final, strerror(errno));
        R->io_error = 1;
    }
    sweep_progress(R, m, "plan: %s %lld (%.1f s)\n", b ? "batch" : "max batch", rec_int(plan, "batch_size", NULL),
             lr.elapsed_s);
    return plan;
}

int sweep_plan_mesh(sweep_runner *R, sweep_result *res) {
    const sweep_mesh *m = res->mesh;
    int interrupted;
    res->plan_batch = -1;
    res->elapsed_s = -1;
    int b = sweep_batch_searched(R->spec) ? 0 : m->batch_size;
    json_t *plan = launch_plan(R, m, b, res->error, sizeof res->error, &interrupted);
    if (interrupted) return SWEEP_EXIT_INTERRUPTED;
    if (!plan) {
        snprintf(res->status, sizeof res->status, "failed");
        return 0;
    }
    res->record = plan;
    res->batch_size = (int)rec_int(plan, "batch_size", NULL);
    sweep_ladder l;
    if (b == 0 && sweep_batch_ladder(R->spec, m, &l) == 0) {
        /* train's plan stops at the same limit itself; at (or, from an older train, past) it the answer is the limit */
        int top = sweep_ladder_at(&l, l.n);
        if (res->batch_size >= top) res->batch_size = top, res->capped = l.top_capped;
        sweep_ladder_free(&l);
    }
    res->plan_batch = res->batch_size;
    snprintf(res->status, sizeof res->status, "planned");
    return 0;
}

/* ---- max batch -------------------------------------------------------------------------------- */

/* One probe: 1 fits, 0 oom, -1 failed (error in res), -SWEEP_EXIT_INTERRUPTED. */
static int probe(sweep_runner *R, sweep_result *res, int b) {
    const sweep_mesh *m = res->mesh;
    if (res->n_probes >= SWEEP_MAX_PROBES) {
        snprintf(res->error, sizeof res->error, "max-batch search: more than %d probes", SWEEP_MAX_PROBES);
        return -1;
    }
    char base[SWEEP_CELL_NAME_MAX + 32];
    snprintf(base, sizeof base, "%s.probe-b%d", m->name, b);
    launch_out o;
    int rc = launch_train(R, m, SWEEP_ARGV_PROBE, b, base, &o);
    if (rc) {
        fprintf(stderr, "interrupted\n");
        return -rc;
    }
    json_decref(o.record);
    sweep_probe *p = &res->probes[res->n_probes++];
    p->batch_size = b;
    snprintf(p->status, sizeof p->status, "%s", o.status);
    p->resumed = o.resumed;
    p->elapsed_s = o.elapsed_s;
    int fits = strcmp(o.status, "ok") == 0 || strcmp(o.status, "diverged") == 0; /* diverged: memory was fine */
    int oom = strcmp(o.status, "oom") == 0;
    const char *word = fits ? "fits" : oom ? "oom" : o.status;
    if (o.resumed) fprintf(stderr, "%s (done before: resumed from %s)\n", word, R->stamp);
    else fprintf(stderr, "%s (%.1f s)\n", word, o.elapsed_s);
    if (fits) return 1;
    if (oom) return 0;
    char first[300];
    first_line(first, sizeof first, o.error);
    snprintf(res->error, sizeof res->error, "max-batch probe b=%d %s: %s (log: runs/%s.log)", b, o.status, first, base);
    return -1;
}

int sweep_batch_ladder(const sweep_spec *s, const sweep_mesh *m, sweep_ladder *l) {
    int cap = sweep_engine_max_batch(m->seq_len);
    memset(l, 0, sizeof *l);
    if (s->batch_mode != SWEEP_BATCH_MATCHED) {
        l->n = cap, l->top_capped = 1;
        return 0;
    }
    int d = m->global_batch / m->dp, n = 0;
    for (int x = 1; (long long)x * x <= d; x++) n += d % x == 0 ? 2 : 0; /* at most 2 per pair */
    l->v = malloc((size_t)(n > 0 ? n : 1) * sizeof *l->v);
    if (!l->v) return -1;
    for (int x = 1; (long long)x * x <= d; x++) /* the divisors up to sqrt(d) ascending, then their pairs */
        if (d % x == 0 && x <= cap) l->v[l->n++] = x;
    for (int k = l->n - 1; k >= 0; k--) {
        int y = d / l->v[k];
        if (y != l->v[k] && y <= cap) l->v[l->n++] = y;
    }
    l->top_capped = l->n == 0 || l->v[l->n - 1] != d;
    return 0;
}

int sweep_ladder_at(const sweep_ladder *l, int p) { return l->v ? l->v[p - 1] : p; }
void sweep_ladder_free(sweep_ladder *l) { free(l->v), memset(l, 0, sizeof *l); }

/* The highest position whose batch is at most b (at least 1). */
static int ladder_pos(const sweep_ladder *l, int b) {
    if (!l->v) return b < 1 ? 1 : b > l->n ? l->n : b;
    int p = 1;
    while (p < l->n && l->v[p] <= b) p++;
    return p;
}

/* Largest b with probe(b) fitting and probe(b+1) oom, starting at the plan's candidate: upward by
 * doubling steps or downward likewise until the answer is bracketed, then bisection — over the
 * positions of the ladder (b itself, or at a matched global batch the divisors of G/dp, so that the
 * found micro-batch accumulates to G exactly). Never above the engine's own limit: a fit there is
 * the answer (res->capped). Returns b (0: not even the smallest fits), -1 failed (res->error),
 * -SWEEP_EXIT_INTERRUPTED. */
static int search_ladder(sweep_runner *R, sweep_result *res, const sweep_ladder *l, int candidate) {
    int n = l->n;
    int lo = 0, hi = -1; /* positions: lo the largest known fit (0 none); hi the smallest known oom (-1 none) */
    int c = ladder_pos(l, candidate);
    int r = probe(R, res, sweep_ladder_at(l, c));
    if (r < 0) return r;
    if (r) lo = c;
    else hi = c;
    for (int step = 1; hi < 0; step *= 2) {
        if (lo >= n) {
            res->capped = l->top_capped;
            return sweep_ladder_at(l, lo);
        }
        int b = lo + step > n ? n : lo + step;
        if ((r = probe(R, res, sweep_ladder_at(l, b))) < 0) return r;
        if (r) lo = b;
        else hi = b;
    }
    for (int step = 1; lo == 0 && hi > 1; step *= 2) {
        int b = hi - step < 1 ? 1 : hi - step;
        if ((r = probe(R, res, sweep_ladder_at(l, b))) < 0) return r;
        if (r) lo = b;
        else hi = b;
    }
    while (lo >= 1 && hi - lo > 1) {
        int b = lo + (hi - lo) / 2;
        if ((r = probe(R, res, sweep_ladder_at(l, b))) < 0) return r;
        if (r) lo = b;
        else hi = b;
    }
    return lo ? sweep_ladder_at(l, lo) : 0;
}

/* The cell's ladder up to what the token files allow too (core/sweep/inputs.h): the measured run needs
 * G distinct training sequences and its eval batches of validation ones, so the search never confirms
 * a batch the measured run would be refused at; a top trimmed so is SWEEP_CAP_DATA. 0 or -1. */
static int cell_ladder(const sweep_runner *R, const sweep_mesh *m, sweep_ladder *l) {
    if (sweep_batch_ladder(R->spec, m, l) != 0) return -1;
    int cap = R->inputs ? sweep_inputs_max_batch(R->inputs, m, 1) : INT32_MAX, trimmed = 0;
    while (l->n > 0 && sweep_ladder_at(l, l->n) > cap) l->n--, trimmed = 1;
    if (trimmed) l->top_capped = SWEEP_CAP_DATA;
    return 0;
}

static int search_max_batch(sweep_runner *R, sweep_result *res, int candidate) {
    sweep_ladder l;
    if (cell_ladder(R, res->mesh, &l) != 0 || l.n == 0) {
        snprintf(res->error, sizeof res->error, "max-batch search: %s", l.n ? "out of memory" : "no batch to try");
        sweep_ladder_free(&l);
        return -1;
    }
    int b = search_ladder(R, res, &l, candidate);
    sweep_ladder_free(&l);
    return b;
}

/* A mesh that is already complete in max mode: its plan and probes as found on disk. */
static void load_search_from_disk(sweep_runner *R, sweep_result *res) {
    char path[PATH_MAX], runs[PATH_MAX];
    sweep_pathf(path, sizeof path, "%s/runs/%s.plan.json", R->dir, res->mesh->name);
    json_t *plan = access(path, F_OK) == 0 ? json_load_file(path, 0, NULL) : NULL;
    if (json_is_integer(json_object_get(plan, "batch_size")))
        res->plan_batch = (int)json_integer_value(json_object_get(plan, "batch_size"));
    json_decref(plan);
    sweep_pathf(runs, sizeof runs, "%s/runs", R->dir);
    DIR *d = opendir(runs);
    if (!d) return;
    char prefix[SWEEP_CELL_NAME_MAX + 16];
    int pl = snprintf(prefix, sizeof prefix, "%s.probe-b", res->mesh->name);
    struct dirent *e;
    while ((e = readdir(d)) && res->n_probes < SWEEP_MAX_PROBES) {
        int b;
        char tail[16];
        if (strncmp(e->d_name, prefix, (size_t)pl) != 0) continue;
        if (sscanf(e->d_name + pl, "%d%15s", &b, tail) != 2 || strcmp(tail, ".json") != 0) continue;
        sweep_pathf(path, sizeof path, "%s/%s", runs, e->d_name);
        json_t *rec = json_load_file(path, 0, NULL);
        char why[300];
        if (!rec || check_record(R, res->mesh, SWEEP_ARGV_PROBE, b, rec, why, sizeof why) ||
            (R->inputs && sweep_inputs_record_mismatch(R->inputs, R->spec, res->mesh, SWEEP_ARGV_PROBE, rec, why, sizeof why))) {
            json_decref(rec);
            continue;
        }
        sweep_probe *p = &res->probes[res->n_probes++];
        p->batch_size = b;
        snprintf(p->status, sizeof p->status, "%s", json_string_value(json_object_get(rec, "status")));
        p->resumed = 1;
        p->elapsed_s = -1;
        json_decref(rec);
    }
    closedir(d);
    /* in batch order: the order they ran is not recorded on disk */
    for (int i = 1; i < res->n_probes; i++)
        for (int j = i; j > 0 && res->probes[j - 1].batch_size > res->probes[j].batch_size; j--) {
            sweep_probe t = res->probes[j];
            res->probes[j] = res->probes[j - 1];
            res->probes[j - 1] = t;
        }
    sweep_ladder l;
    if (cell_ladder(R, res->mesh, &l) == 0 && l.n > 0)
        res->capped = res->batch_size >= sweep_ladder_at(&l, l.n) ? l.top_capped : 0;
    sweep_ladder_free(&l);
}

/* ---- one mesh --------------------------------------------------------------------------------- */

static void take_outcome(sweep_result *res, launch_out *o) {
    snprintf(res->status, sizeof res->status, "%s", o->status);
    snprintf(res->error, sizeof res->error, "%s", o->error);
    snprintf(res->finished, sizeof res->finished, "%s", o->finished);
    res->record = o->record;
    res->resumed = o->resumed;
    res->elapsed_s = o->elapsed_s;
    o->record = NULL;
}

/* Record a mesh that ends before its measured run (plan failed, probe failed, nothing fits). */
static void mesh_ends_early(sweep_runner *R, sweep_result *res, const char *status, const char *log_rel) {
    char final[PATH_MAX];
    sweep_pathf(final, sizeof final, "%s/runs/%s.json", R->dir, res->mesh->name);
    snprintf(res->status, sizeof res->status, "%s", status);
    res->record = runner_record(R, res->mesh, res->batch_size, status, res->error, NULL, NULL, log_rel);
    if (!res->record || write_record(R, final, res->record) != 0) R->io_error = 1;
    char first[200];
    first_line(first, sizeof first, res->error);
    sweep_progress(R, res->mesh, "%s: %s\n", status, first);
}

static void report_run(sweep_runner *R, const sweep_result *res, int b) {
    if (res->resumed) {
        sweep_progress(R, res->mesh, "run b=%d ... skipped: resumed from %s (%s, finished %s)\n", b, R->stamp, res->status,
                 res->finished[0] ? res->finished : "?");
        return;
    }
    double tok_s = sweep_record_num(res->record, "summary.tok_s");
    double loss = sweep_record_num(res->record, "summary.final_loss");
    if (strcmp(res->status, "ok") == 0)
        fprintf(stderr, "ok in %.1f s: %.0f tok/s, final loss %.4f\n", res->elapsed_s, tok_s, loss);
    else {
        char first[200];
        first_line(first, sizeof first, res->error);
        fprintf(stderr, "%s in %.1f s: %s\n", res->status, res->elapsed_s, first);
    }
}

/* Max mode: the plan, then the probes. Returns the batch (> 0), 0 when the mesh ended early (res
 * recorded), or -SWEEP_EXIT_INTERRUPTED. */
static int find_max_batch(sweep_runner *R, sweep_result *res) {
    const sweep_mesh *m = res->mesh;
    int interrupted;
    json_t *plan = launch_plan(R, m, 0, res->error, sizeof res->error, &interrupted);
    if (interrupted) return -SWEEP_EXIT_INTERRUPTED;
    char log_rel[PATH_MAX];
    snprintf(log_rel, sizeof log_rel, "runs/%s.plan.log", m->name);
    if (!plan) {
        mesh_ends_early(R, res, "failed", log_rel);
        return 0;
    }
    int cand = (int)rec_int(plan, "batch_size", NULL);
    json_decref(plan);
    res->plan_batch = cand;
    int cap = sweep_engine_max_batch(m->seq_len);
    if (cand > cap)
        sweep_progress(R, m, "plan: %d is above the engine's limit of %d sequences per rank at seq_len %d: searching up "
                       "to %d\n", cand, cap, m->seq_len, cap);
    int b = search_max_batch(R, res, cand);
    if (b == -SWEEP_EXIT_INTERRUPTED) return b;
    snprintf(log_rel, sizeof log_rel, "runs/%s.probe-b%d.log", m->name,
             res->n_probes ? res->probes[res->n_probes - 1].batch_size : 0);
    if (b < 0) {
        mesh_ends_early(R, res, "failed", log_rel);
        return 0;
    }
    if (b == 0) {
        snprintf(res->error, sizeof res->error, "no batch size fits mem_budget %s: b=1 stops with oom",
                 m->mem_budget);
        mesh_ends_early(R, res, "oom", log_rel);
        return 0;
    }
    if (R->spec->batch_mode == SWEEP_BATCH_MATCHED)
        sweep_progress(R, m, "max micro-batch %d per DP rank dividing %d: %d micro-batches to global batch %d%s\n", b,
                       m->global_batch / m->dp, m->global_batch / (m->dp * b), m->global_batch,
                       sweep_cap_text(res->capped));
    else if (res->capped) sweep_progress(R, m, "max batch %d per DP rank (global %d)%s\n", b, m->dp * b,
                                         sweep_cap_sentence(res->capped));
    else sweep_progress(R, m, "max batch %d per DP rank (global %d)\n", b, m->dp * b);
    return b;
}

int sweep_run_mesh(sweep_runner *R, sweep_result *res) {
    const sweep_mesh *m = res->mesh;
    const sweep_spec *s = R->spec;
    res->plan_batch = -1;
    res->elapsed_s = -1;
    char final[PATH_MAX];
    sweep_pathf(final, sizeof final, "%s/runs/%s.json", R->dir, m->name);
    int b = m->batch_size;
    if (sweep_batch_searched(s)) {
        json_t *done = load_done(R, m, SWEEP_ARGV_RUN, -1, final, "run");
        if (done) { /* complete: nothing is launched again, not even the plan */
            res->record = done;
            res->resumed = 1;
            file_time(final, res->finished, sizeof res->finished);
            res->batch_size = (int)rec_int(done, "batch_size", NULL);
            snprintf(res->status, sizeof res->status, "%s", json_string_value(json_object_get(done, "status")));
            const char *e = json_string_value(json_object_get(done, "error"));
            snprintf(res->error, sizeof res->error, "%s", e ? e : "");
            load_search_from_disk(R, res);
            report_run(R, res, res->batch_size);
            return 0;
        }
        b = find_max_batch(R, res);
        if (b == -SWEEP_EXIT_INTERRUPTED) return SWEEP_EXIT_INTERRUPTED;
        if (b == 0) return 0;
    }
    res->batch_size = b;
    launch_out o;
    int rc = launch_train(R, m, SWEEP_ARGV_RUN, b, m->name, &o);
    if (rc) {
        fprintf(stderr, "interrupted\n");
        return rc;
    }
    take_outcome(res, &o);
    report_run(R, res, b);
    return 0;
}
