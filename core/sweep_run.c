/* core/sweep_run.c — the sweep runner behind build/sweep (design 9): for each mesh of a spec it
 * launches build/train as a fresh process (launcher + argv, never a shell), finds the largest batch
 * that fits the memory budget when asked ("max": the plan's candidate, confirmed by probe runs at b
 * and b+1), records every run, resumes a matching folder, then has the outputs written.
 * Not the spec parser (core/sweep_spec.c), not process control (core/sweep_launch.c), not the
 * outputs (core/sweep_report.c), not option parsing (bench/sweep.c), not training (build/train). */
#include "core/sweep_run.h"

#include "core/sweep_launch.h"
#include "core/sweep_report.h"
#include "core/sweep_spec.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXIT_IO 1
#define EXIT_USAGE 2
#define EXIT_INTERRUPTED 130

typedef struct runner {
    const sweep_spec *spec;
    const char *spec_path;
    char train[PATH_MAX];
    char plots[PATH_MAX];
    char dir[PATH_MAX];         /* the sweep's folder */
    int dry_run;
    int io_error;               /* something could not be written: exit 1 at the end */
    int idx;                    /* 1-based index of the mesh in progress, for "[i/n]" */
    const char *env_default[8];
} runner;

/* Everything one launch of train left behind, as the runner judges it. */
typedef struct launch_out {
    char status[16];
    char error[1024];
    json_t *record;             /* owned */
    int resumed;
    double elapsed_s;           /* < 0 when resumed */
} launch_out;

/* ---- small helpers ---------------------------------------------------------------------------- */

static void progress(const runner *R, const sweep_mesh *m, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void progress(const runner *R, const sweep_mesh *m, const char *fmt, ...) {
    fprintf(stderr, "[%d/%d] %s  ", R->idx, R->spec->n_meshes, m->name);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

/* snprintf for paths built from the folder (whose length is checked at start, so this cannot
 * truncate; if it ever did, stopping beats writing to the wrong file). */
static void pathf(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void pathf(char *out, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, cap, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap) {
        fprintf(stderr, "sweep: path too long: %.200s...\n", out);
        exit(EXIT_IO);
    }
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

static int path_join(char *out, size_t cap, const char *a, const char *b) {
    int n = snprintf(out, cap, "%s/%s", a, b);
    return (n < 0 || (size_t)n >= cap) ? -1 : 0;
}

static int is_final_status(const char *s) {
    static const char *const ok[] = {"ok", "oom", "diverged", "failed", "timeout"};
    for (size_t i = 0; s && i < sizeof ok / sizeof ok[0]; i++)
        if (strcmp(s, ok[i]) == 0) return 1;
    return 0;
}

/* A run record that is complete: a JSON object with a final status. NULL otherwise. */
static json_t *load_final_record(const char *path) {
    if (access(path, F_OK) != 0) return NULL;
    json_t *r = json_load_file(path, 0, NULL);
    if (!json_is_object(r) || !is_final_status(json_string_value(json_object_get(r, "status")))) {
        json_decref(r);
        return NULL;
    }
    return r;
}

static void utc_now(char *stamp, size_t scap, char *iso, size_t icap) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    if (stamp) strftime(stamp, scap, "%Y%m%dT%H%M%SZ", &tm);
    if (iso) strftime(iso, icap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int is_stamp(const char *s) {
    if (strlen(s) != 16 || s[8] != 'T' || s[15] != 'Z') return 0;
    for (int i = 0; i < 15; i++)
        if (i != 8 && (s[i] < '0' || s[i] > '9')) return 0;
    return 1;
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

/* ---- results folder --------------------------------------------------------------------------- */

/* The latest <root>/<name>/<stamp> whose spec.json equals the spec; 1 found, 0 none. */
static int find_resume_folder(const char *base, json_t *spec, char *out, size_t cap) {
    DIR *d = opendir(base);
    if (!d) return 0;
    char best[32] = "";
    char (*stamps)[20] = NULL;
    int n = 0, capn = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!is_stamp(e->d_name)) continue;
        if (n == capn) {
            capn = capn ? capn * 2 : 16;
            void *ns = realloc(stamps, (size_t)capn * sizeof *stamps);
            if (!ns) break;
            stamps = ns;
        }
        memcpy(stamps[n++], e->d_name, 17); /* is_stamp: exactly 16 characters + NUL */
    }
    closedir(d);
    /* newest first: timestamps sort as strings */
    for (;;) {
        int bi = -1;
        for (int i = 0; i < n; i++)
            if (stamps[i][0] && (bi < 0 || strcmp(stamps[i], stamps[bi]) > 0)) bi = i;
        if (bi < 0) break;
        char path[PATH_MAX];
        pathf(path, sizeof path, "%s/%s/spec.json", base, stamps[bi]);
        json_t *old = json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
        int same = old && json_equal(old, spec);
        json_decref(old);
        if (same) {
            snprintf(best, sizeof best, "%s", stamps[bi]);
            break;
        }
        stamps[bi][0] = '\0';
    }
    free(stamps);
    if (!best[0]) return 0;
    pathf(out, cap, "%s/%s", base, best);
    return 1;
}

static int create_folder(const char *base, json_t *spec, char *out, size_t cap) {
    if (sweep_mkdirs(base, 0755) != 0) {
        fprintf(stderr, "sweep: cannot create %s: %s\n", base, strerror(errno));
        return -1;
    }
    for (int attempt = 0;; attempt++) {
        char stamp[32];
        utc_now(stamp, sizeof stamp, NULL, 0);
        int n = snprintf(out, cap, "%s/%s", base, stamp);
        if (n < 0 || (size_t)n >= cap) {
            fprintf(stderr, "sweep: results path too long: %s\n", base);
            return -1;
        }
        if (mkdir(out, 0755) == 0) break;
        if (errno != EEXIST || attempt >= 5) {
            fprintf(stderr, "sweep: cannot create %s: %s\n", out, strerror(errno));
            return -1;
        }
        sleep(1); /* two sweeps of one name in the same second: take the next second */
    }
    char *text = json_dumps(spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    char path[PATH_MAX];
    if (!text || path_join(path, sizeof path, out, "spec.json") != 0 ||
        sweep_write_atomic(path, text, strlen(text)) != 0) {
        fprintf(stderr, "sweep: cannot write %s/spec.json: %s\n", out, text ? strerror(errno) : "out of memory");
        free(text);
        rmdir(out); /* no folder without a spec: a later run must not find a half-made one */
        return -1;
    }
    free(text);
    return 0;
}

/* ---- one launch of train ---------------------------------------------------------------------- */

/* A record for a run that left none (or whose record cannot be trusted), in the run schema. */
static json_t *runner_record(const runner *R, const sweep_mesh *m, int batch, const char *status, const char *error,
                             const sweep_launch_result *lr, char *const *argv, const char *log_rel) {
    const sweep_spec *s = R->spec;
    json_t *argv_j = json_array();
    for (int i = 0; argv && argv[i] && argv_j; i++) json_array_append_new(argv_j, json_string(argv[i]));
    json_t *r = json_pack("{s:s, s:s, s:s, s:{s:s, s:i, s:i}, s:{s:i, s:i, s:i}, s:i, s:i, s:[], s:[], s:n, s:n}",
                          "schema", "meshsweep.run/1", "status", status, "error", error ? error : "", "config",
                          "model", s->model, "seq_len", s->seq_len, "steps", s->steps, "mesh", "world", s->world, "dp",
                          m->dp, "tp", m->tp, "batch_size", batch, "global_batch", m->dp * batch, "steps", "eval",
                          "summary", "memory");
    if (!r) {
        json_decref(argv_j);
        return NULL;
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

static int write_record(runner *R, const char *path, json_t *rec) {
    char *text = rec ? json_dumps(rec, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    int rc = -1;
    if (text) {
        size_t len = strlen(text);
        char *t2 = realloc(text, len + 2);
        if (t2) {
            text = t2;
            text[len] = '\n', text[len + 1] = '\0';
            rc = sweep_write_atomic(path, text, len + 1);
        }
    }
    if (rc != 0) {
        fprintf(stderr, "sweep: cannot write %s: %s\n", path, text ? strerror(errno) : "out of memory");
        R->io_error = 1;
    }
    free(text);
    return rc;
}

/* Run train once (kind RUN or PROBE) as runs/<base>.{json,log}, or reuse a complete record.
 * Returns 0 (o filled; a failed run is still 0) or EXIT_INTERRUPTED. */
static int run_train(runner *R, const sweep_mesh *m, int kind, int batch, const char *base, launch_out *o) {
    memset(o, 0, sizeof *o);
    o->elapsed_s = -1;
    char final[PATH_MAX], tmp[PATH_MAX], log[PATH_MAX], log_rel[256];
    pathf(final, sizeof final, "%s/runs/%s.json", R->dir, base);
    pathf(tmp, sizeof tmp, "%s/runs/.%s.train.json", R->dir, base);
    pathf(log, sizeof log, "%s/runs/%s.log", R->dir, base);
    snprintf(log_rel, sizeof log_rel, "runs/%s.log", base);
    json_t *done = load_final_record(final);
    if (done) {
        o->record = done;
        o->resumed = 1;
        snprintf(o->status, sizeof o->status, "%s", json_string_value(json_object_get(done, "status")));
        const char *e = json_string_value(json_object_get(done, "error"));
        snprintf(o->error, sizeof o->error, "%s", e ? e : "");
        return 0;
    }
    if (unlink(tmp) != 0 && errno != ENOENT) {
        fprintf(stderr, "sweep: cannot remove stale %s: %s\n", tmp, strerror(errno));
        R->io_error = 1;
    }
    sweep_argv a = {0};
    if (sweep_train_argv(R->spec, m, kind, batch, R->train, tmp, &a) != 0) {
        snprintf(o->status, sizeof o->status, "failed");
        snprintf(o->error, sizeof o->error, "cannot build the command line (out of memory or an argument too long)");
        o->record = runner_record(R, m, batch, o->status, o->error, NULL, NULL, log_rel);
        if (o->record) write_record(R, final, o->record);
        sweep_argv_free(&a);
        return 0;
    }
    char prefix[96];
    snprintf(prefix, sizeof prefix, "[%d/%d] %s   ", R->idx, R->spec->n_meshes, m->name);
    sweep_launch_opts lo = {.argv = a.v, .log_path = log, .timeout_s = R->spec->timeout_s,
                            .env_default = R->env_default, .progress = kind == SWEEP_ARGV_RUN ? prefix : NULL};
    sweep_launch_result lr;
    int rc = sweep_launch(&lo, &lr);
    o->elapsed_s = lr.elapsed_s;
    if (lr.outcome == SWEEP_LAUNCH_INTERRUPTED) {
        unlink(tmp); /* no partial record: the rerun starts this launch again */
        sweep_argv_free(&a);
        return EXIT_INTERRUPTED;
    }
    json_t *rec = NULL;
    if (access(tmp, F_OK) == 0) {
        json_error_t je;
        rec = json_load_file(tmp, 0, &je);
        if (!json_is_object(rec) || !is_final_status(json_string_value(json_object_get(rec, "status")))) {
            json_decref(rec);
            rec = NULL;
        }
    }
    char tail[700], key[240], more[4000];
    sweep_tail_lines(log, 10, tail, sizeof tail);
    sweep_tail_lines(log, 60, more, sizeof more);
    key_line(more, key, sizeof key);
    int modified = 0;
    if (rc != 0) { /* could not start at all (or no log): the error says why */
        snprintf(o->status, sizeof o->status, "failed");
        snprintf(o->error, sizeof o->error, "%s", lr.error);
        if (lr.outcome == SWEEP_LAUNCH_IO_ERROR) R->io_error = 1;
    } else if (lr.outcome == SWEEP_LAUNCH_TIMEOUT) {
        snprintf(o->status, sizeof o->status, "timeout");
        snprintf(o->error, sizeof o->error, "killed after the %g s timeout; last log lines:\n%s", R->spec->timeout_s,
                 tail);
        modified = rec != NULL;
    } else if (rec) {
        const char *st = json_string_value(json_object_get(rec, "status"));
        const char *e = json_string_value(json_object_get(rec, "error"));
        int code = lr.outcome == SWEEP_LAUNCH_EXITED ? lr.exit_code : -1;
        if (strcmp(st, "ok") == 0 && code != 0) {
            snprintf(o->status, sizeof o->status, "failed");
            snprintf(o->error, sizeof o->error, "%s %d although its record says ok: %s\nlast log lines:\n%s",
                     code >= 0 ? "exited with code" : "killed by signal", code >= 0 ? code : lr.term_signal, key, tail);
            modified = 1;
        } else {
            snprintf(o->status, sizeof o->status, "%s", st);
            snprintf(o->error, sizeof o->error, "%s", e ? e : (strcmp(st, "ok") ? tail : ""));
        }
    } else {
        int code = lr.outcome == SWEEP_LAUNCH_EXITED ? lr.exit_code : -1;
        snprintf(o->status, sizeof o->status, "%s", code == 3 ? "oom" : code == 4 ? "diverged" : "failed");
        if (code >= 0)
            snprintf(o->error, sizeof o->error, "exited with code %d, no run record: %s\nlast log lines:\n%s", code,
                     key, tail);
        else
            snprintf(o->error, sizeof o->error, "killed by signal %d: %s\nlast log lines:\n%s", lr.term_signal, key,
                     tail);
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

/* ---- max batch -------------------------------------------------------------------------------- */

/* The plan's candidate for "max" (runs/<mesh>.plan.json, reused when present). Returns the batch
 * (>= 0), -1 on failure (error filled), or -EXIT_INTERRUPTED. */
static int plan_max_batch(runner *R, const sweep_mesh *m, char *error, size_t ecap) {
    char final[PATH_MAX], tmp[PATH_MAX], log[PATH_MAX];
    pathf(final, sizeof final, "%s/runs/%s.plan.json", R->dir, m->name);
    pathf(tmp, sizeof tmp, "%s/runs/.%s.plan.train.json", R->dir, m->name);
    pathf(log, sizeof log, "%s/runs/%s.plan.log", R->dir, m->name);
    json_t *plan = access(final, F_OK) == 0 ? json_load_file(final, 0, NULL) : NULL;
    if (json_is_integer(json_object_get(plan, "batch_size"))) {
        int b = (int)json_integer_value(json_object_get(plan, "batch_size"));
        json_decref(plan);
        progress(R, m, "plan: max batch %d (done before)\n", b);
        return b;
    }
    json_decref(plan);
    unlink(tmp);
    sweep_argv a = {0};
    if (sweep_train_argv(R->spec, m, SWEEP_ARGV_PLAN, 0, R->train, tmp, &a) != 0) {
        snprintf(error, ecap, "cannot build the plan command line");
        sweep_argv_free(&a);
        return -1;
    }
    sweep_launch_opts lo = {.argv = a.v, .log_path = log, .timeout_s = R->spec->timeout_s,
                            .env_default = R->env_default};
    sweep_launch_result lr;
    int rc = sweep_launch(&lo, &lr);
    sweep_argv_free(&a);
    if (lr.outcome == SWEEP_LAUNCH_INTERRUPTED) {
        unlink(tmp);
        return -EXIT_INTERRUPTED;
    }
    plan = access(tmp, F_OK) == 0 ? json_load_file(tmp, 0, NULL) : NULL;
    json_t *bv = json_object_get(plan, "batch_size");
    /* exit 0: fits; 3: not even one sequence fits (batch_size 0) */
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
        progress(R, m, "plan ... failed (%.1f s)\n", lr.elapsed_s);
        return -1;
    }
    int b = (int)json_integer_value(bv);
    json_decref(plan);
    if (rename(tmp, final) != 0) {
        fprintf(stderr, "sweep: cannot move %s to %s: %s\n", tmp, final, strerror(errno));
        R->io_error = 1;
    }
    progress(R, m, "plan: max batch %d (%.1f s)\n", b, lr.elapsed_s);
    return b;
}

/* One probe: 1 fits, 0 oom, -1 failed (error in res), -EXIT_INTERRUPTED. */
static int probe(runner *R, sweep_result *res, int b) {
    const sweep_mesh *m = res->mesh;
    if (res->n_probes >= SWEEP_MAX_PROBES) {
        snprintf(res->error, sizeof res->error, "max-batch search: more than %d probes", SWEEP_MAX_PROBES);
        return -1;
    }
    char base[96];
    snprintf(base, sizeof base, "%s.probe-b%d", m->name, b);
    progress(R, m, "probe b=%d ... ", b);
    launch_out o;
    int rc = run_train(R, m, SWEEP_ARGV_PROBE, b, base, &o);
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
    if (o.resumed) fprintf(stderr, "%s (done before)\n", word);
    else fprintf(stderr, "%s (%.1f s)\n", word, o.elapsed_s);
    if (fits) return 1;
    if (oom) return 0;
    char first[300];
    first_line(first, sizeof first, o.error);
    snprintf(res->error, sizeof res->error, "max-batch probe b=%d %s: %s (log: runs/%s.log)", b, o.status, first, base);
    return -1;
}

/* Largest b with probe(b) fitting and probe(b+1) oom, starting at the plan's candidate: upward by
 * doubling steps or downward likewise until the answer is bracketed, then bisection. Returns b
 * (0: not even b=1 fits), -1 failed (res->error), -EXIT_INTERRUPTED. */
static int search_max_batch(runner *R, sweep_result *res, int candidate) {
    int lo = 0, hi = -1; /* lo: largest known fit (0 none); hi: smallest known oom (-1 none) */
    int c = candidate >= 1 ? candidate : 1;
    int r = probe(R, res, c);
    if (r < 0) return r;
    if (r) lo = c;
    else hi = c;
    for (int step = 1; hi < 0; step *= 2) {
        int b = lo + step;
        if (b > (1 << 20)) {
            snprintf(res->error, sizeof res->error, "max-batch search: batch %d still fits; is mem_budget set?", lo);
            return -1;
        }
        if ((r = probe(R, res, b)) < 0) return r;
        if (r) lo = b;
        else hi = b;
    }
    for (int step = 1; lo == 0 && hi > 1; step *= 2) {
        int b = hi - step < 1 ? 1 : hi - step;
        if ((r = probe(R, res, b)) < 0) return r;
        if (r) lo = b;
        else hi = b;
    }
    while (lo >= 1 && hi - lo > 1) {
        int b = lo + (hi - lo) / 2;
        if ((r = probe(R, res, b)) < 0) return r;
        if (r) lo = b;
        else hi = b;
    }
    return lo;
}

/* A mesh that is already complete in max mode: its plan and probes as found on disk. */
static void load_search_from_disk(runner *R, sweep_result *res) {
    char path[PATH_MAX], runs[PATH_MAX];
    pathf(path, sizeof path, "%s/runs/%s.plan.json", R->dir, res->mesh->name);
    json_t *plan = access(path, F_OK) == 0 ? json_load_file(path, 0, NULL) : NULL;
    if (json_is_integer(json_object_get(plan, "batch_size")))
        res->plan_batch = (int)json_integer_value(json_object_get(plan, "batch_size"));
    json_decref(plan);
    pathf(runs, sizeof runs, "%s/runs", R->dir);
    DIR *d = opendir(runs);
    if (!d) return;
    char prefix[64];
    int pl = snprintf(prefix, sizeof prefix, "%s.probe-b", res->mesh->name);
    struct dirent *e;
    while ((e = readdir(d)) && res->n_probes < SWEEP_MAX_PROBES) {
        int b;
        char tail[16];
        if (strncmp(e->d_name, prefix, (size_t)pl) != 0) continue;
        if (sscanf(e->d_name + pl, "%d%15s", &b, tail) != 2 || strcmp(tail, ".json") != 0) continue;
        pathf(path, sizeof path, "%s/%s", runs, e->d_name);
        json_t *rec = load_final_record(path);
        if (!rec) continue;
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
}

/* ---- one mesh --------------------------------------------------------------------------------- */

static void take_outcome(sweep_result *res, launch_out *o) {
    snprintf(res->status, sizeof res->status, "%s", o->status);
    snprintf(res->error, sizeof res->error, "%s", o->error);
    res->record = o->record;
    res->resumed = o->resumed;
    res->elapsed_s = o->elapsed_s;
    o->record = NULL;
}

/* Record a mesh that ends before its measured run (plan failed, probe failed, nothing fits). */
static void mesh_ends_early(runner *R, sweep_result *res, const char *status, const char *log_rel) {
    char final[PATH_MAX];
    pathf(final, sizeof final, "%s/runs/%s.json", R->dir, res->mesh->name);
    snprintf(res->status, sizeof res->status, "%s", status);
    res->record = runner_record(R, res->mesh, res->batch_size, status, res->error, NULL, NULL, log_rel);
    if (!res->record || write_record(R, final, res->record) != 0) R->io_error = 1;
    char first[200];
    first_line(first, sizeof first, res->error);
    progress(R, res->mesh, "%s: %s\n", status, first);
}

static void report_run(runner *R, const sweep_result *res, int b) {
    if (res->resumed) {
        progress(R, res->mesh, "run b=%d ... skipped (already complete: %s)\n", b, res->status);
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

/* Returns 0 or EXIT_INTERRUPTED. */
static int run_mesh(runner *R, sweep_result *res) {
    const sweep_mesh *m = res->mesh;
    const sweep_spec *s = R->spec;
    res->plan_batch = -1;
    res->elapsed_s = -1;
    char final[PATH_MAX];
    pathf(final, sizeof final, "%s/runs/%s.json", R->dir, m->name);
    int b = m->batch_size;
    if (s->batch_mode == SWEEP_BATCH_MAX) {
        json_t *done = load_final_record(final);
        if (done) { /* complete: nothing is launched again, not even the plan */
            res->record = done;
            res->resumed = 1;
            res->batch_size = (int)sweep_record_num(done, "batch_size");
            if (res->batch_size < 0) res->batch_size = 0;
            snprintf(res->status, sizeof res->status, "%s", json_string_value(json_object_get(done, "status")));
            const char *e = json_string_value(json_object_get(done, "error"));
            snprintf(res->error, sizeof res->error, "%s", e ? e : "");
            load_search_from_disk(R, res);
            progress(R, m, "run b=%d ... skipped (already complete: %s)\n", res->batch_size, res->status);
            return 0;
        }
        int cand = plan_max_batch(R, m, res->error, sizeof res->error);
        if (cand == -EXIT_INTERRUPTED) return EXIT_INTERRUPTED;
        char log_rel[128];
        snprintf(log_rel, sizeof log_rel, "runs/%s.plan.log", m->name);
        if (cand < 0) {
            mesh_ends_early(R, res, "failed", log_rel);
            return 0;
        }
        res->plan_batch = cand;
        b = search_max_batch(R, res, cand);
        if (b == -EXIT_INTERRUPTED) return EXIT_INTERRUPTED;
        snprintf(log_rel, sizeof log_rel, "runs/%s.probe-b%d.log", m->name,
                 res->n_probes ? res->probes[res->n_probes - 1].batch_size : 0);
        if (b < 0) {
            mesh_ends_early(R, res, "failed", log_rel);
            return 0;
        }
        if (b == 0) {
            snprintf(res->error, sizeof res->error, "no batch size fits mem_budget %s: b=1 stops with oom",
                     s->mem_budget);
            mesh_ends_early(R, res, "oom", log_rel);
            return 0;
        }
        progress(R, m, "max batch %d per DP rank (global %d)\n", b, m->dp * b);
    }
    res->batch_size = b;
    json_t *done = load_final_record(final);
    if (!done) progress(R, m, "run b=%d steps=%d ... ", b, s->steps);
    json_decref(done);
    launch_out o;
    int rc = run_train(R, m, SWEEP_ARGV_RUN, b, m->name, &o);
    if (rc) {
        fprintf(stderr, "interrupted\n");
        return rc;
    }
    take_outcome(res, &o);
    report_run(R, res, b);
    return 0;
}

/* ---- dry run ---------------------------------------------------------------------------------- */

static int dry_run(runner *R, const char *base) {
    const sweep_spec *s = R->spec;
    fprintf(stderr, "sweep: %s: %d meshes; results would go to %s/<UTC timestamp>/ (or the latest matching one)\n",
            R->spec_path, s->n_meshes, base);
    for (int i = 0; i < s->n_meshes; i++) {
        const sweep_mesh *m = &s->meshes[i];
        R->idx = i + 1;
        sweep_argv a = {0};
        if (s->batch_mode == SWEEP_BATCH_MAX) {
            if (sweep_train_argv(s, m, SWEEP_ARGV_PLAN, 0, R->train, "runs/.plan.json", &a)) return EXIT_IO;
            progress(R, m, "plan: ");
            print_argv(stderr, a.v);
            sweep_argv_free(&a);
            progress(R, m, "then probes at the planned b and b+1 (--steps 2), then the run at the confirmed b:\n");
            if (sweep_train_argv(s, m, SWEEP_ARGV_RUN, 0, R->train, "runs/.run.json", &a)) return EXIT_IO;
            for (int k = 0; a.v[k]; k++)
                if (strcmp(a.v[k], "--batch-size") == 0 && a.v[k + 1]) {
                    free(a.v[k + 1]);
                    a.v[k + 1] = strdup("<b>");
                    if (!a.v[k + 1]) return EXIT_IO;
                }
        } else if (sweep_train_argv(s, m, SWEEP_ARGV_RUN, m->batch_size, R->train, "runs/.run.json", &a)) {
            return EXIT_IO;
        }
        progress(R, m, "run: ");
        print_argv(stderr, a.v);
        sweep_argv_free(&a);
    }
    return 0;
}

/* ---- the whole sweep -------------------------------------------------------------------------- */

/* The train program (next to this binary unless given) and the child environment. 0 or an exit code. */
static int setup_runner(runner *R, const sweep_run_opts *o) {
    if (o->train) {
        snprintf(R->train, sizeof R->train, "%s", o->train);
    } else {
        char ed[PATH_MAX];
        if (exe_dir(ed, sizeof ed) != 0) {
            fprintf(stderr, "sweep: cannot find this program's folder (/proc/self/exe); pass --train PATH\n");
            return EXIT_IO;
        }
        snprintf(R->train, sizeof R->train, "%.4000s/train", ed);
    }
    if (!R->dry_run && access(R->train, X_OK) != 0) {
        fprintf(stderr, "sweep: train program %s: %s (build it with make, or pass --train PATH)\n", R->train,
                strerror(errno));
        return EXIT_IO;
    }
    /* the child environment: what Open MPI and OpenBLAS need here, unless the user set it */
    int ne = 0;
    R->env_default[ne++] = "OMPI_MCA_mpi_yield_when_idle=1";
    R->env_default[ne++] = "OPENBLAS_NUM_THREADS=1";
    R->env_default[ne++] = "OMPI_MCA_btl_vader_single_copy_mechanism=none";
    if (geteuid() == 0) {
        R->env_default[ne++] = "OMPI_ALLOW_RUN_AS_ROOT=1";
        R->env_default[ne++] = "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1";
    }
    R->env_default[ne] = NULL;
    return 0;
}

/* Resume or create the folder, check it takes files. 0 or an exit code. */
static int prepare_folder(runner *R, const char *base, int fresh, int *resumed) {
    *resumed = !fresh && find_resume_folder(base, R->spec->json, R->dir, sizeof R->dir);
    if (!*resumed && create_folder(base, R->spec->json, R->dir, sizeof R->dir) != 0) return EXIT_IO;
    char runs[PATH_MAX];
    pathf(runs, sizeof runs, "%s/runs", R->dir);
    if (sweep_mkdirs(runs, 0755) != 0) {
        fprintf(stderr, "sweep: cannot create %s: %s\n", runs, strerror(errno));
        return EXIT_IO;
    }
    /* a folder that cannot take a file (read-only, full) stops the sweep before anything runs */
    char probe_path[PATH_MAX];
    pathf(probe_path, sizeof probe_path, "%s/.write-test", runs);
    if (sweep_write_atomic(probe_path, "", 0) != 0 || unlink(probe_path) != 0) {
        fprintf(stderr, "sweep: cannot write in %s: %s\n", runs, strerror(errno));
        return EXIT_IO;
    }
    return 0;
}

/* Summary, CSV, charts, report once every mesh is done. Returns the exit status. */
static int write_outputs(runner *R, sweep_result *res, const char *started) {
    const sweep_spec *s = R->spec;
    char err[1024];
    int status = 0;
    sweep_report_ctx c = {.spec = s, .res = res, .n = s->n_meshes, .dir = R->dir, .plots_dir = R->plots,
                          .gnuplot = "gnuplot", .started_utc = started};
    int ok = 1;
    if (sweep_write_summary_json(&c, err, sizeof err) || sweep_write_summary_csv(&c, err, sizeof err) ||
        sweep_write_plot_data(&c, err, sizeof err)) {
        fprintf(stderr, "sweep: %s\n", err);
        ok = 0;
    }
    int charts_ok = ok && sweep_draw_charts(&c, err, sizeof err) == 0;
    if (ok && !charts_ok) fprintf(stderr, "sweep: %s\n", err);
    if (sweep_launch_interrupted()) status = EXIT_INTERRUPTED;
    else if (ok && sweep_write_report_md(&c, charts_ok, err, sizeof err) != 0) {
        fprintf(stderr, "sweep: %s\n", err);
        ok = 0;
    }
    if (s->batch_mode == SWEEP_BATCH_GLOBAL) {
        sweep_deviation d;
        sweep_loss_deviation(res, s->n_meshes, &d, NULL);
        if (d.at_mesh >= 0)
            fprintf(stderr, "sweep: largest relative loss deviation from %s: %.3g (mesh %s, step %d, %d steps compared)\n",
                    res[d.ref].mesh->name, d.max_rel, res[d.at_mesh].mesh->name, d.at_step, d.steps_compared);
        else
            fprintf(stderr, "sweep: loss deviation: nothing to compare\n");
    }
    int n_ok = 0;
    for (int i = 0; i < s->n_meshes; i++) n_ok += strcmp(res[i].status, "ok") == 0;
    if (status != EXIT_INTERRUPTED) {
        fprintf(stderr, "sweep: %d of %d runs ok; report: %s/report.md\n", n_ok, s->n_meshes, R->dir);
        if (!ok || !charts_ok || R->io_error) status = EXIT_IO;
    }
    return status;
}

/* Every mesh in order, then the outputs. Returns the exit status. */
static int run_all(runner *R, const char *started) {
    const sweep_spec *s = R->spec;
    sweep_result *res = calloc((size_t)s->n_meshes, sizeof *res);
    if (!res) {
        fprintf(stderr, "sweep: out of memory\n");
        return EXIT_IO;
    }
    int status = 0;
    for (int i = 0; i < s->n_meshes; i++) {
        R->idx = i + 1;
        res[i].mesh = &s->meshes[i];
        if (sweep_launch_interrupted() || run_mesh(R, &res[i]) == EXIT_INTERRUPTED) {
            status = EXIT_INTERRUPTED;
            break;
        }
        if (R->io_error) { /* results that cannot be saved are not worth computing: stop here */
            status = EXIT_IO;
            break;
        }
    }
    if (status == 0 && sweep_launch_interrupted()) status = EXIT_INTERRUPTED;
    if (status == EXIT_INTERRUPTED)
        fprintf(stderr, "sweep: interrupted; complete runs are kept in %s (run the same command again to resume)\n",
                R->dir);
    else if (status == EXIT_IO)
        fprintf(stderr, "sweep: stopped: the results folder cannot be written; complete runs are kept in %s\n",
                R->dir);
    else
        status = write_outputs(R, res, started);
    for (int i = 0; i < s->n_meshes; i++) json_decref(res[i].record);
    free(res);
    return status;
}

int sweep_run(const sweep_run_opts *o) {
    sweep_spec spec;
    char err[1024];
    if (sweep_spec_load(o->spec_path, &spec, err, sizeof err) != 0) {
        fprintf(stderr, "sweep: %s: %s\n", o->spec_path, err);
        return EXIT_USAGE;
    }
    runner R;
    memset(&R, 0, sizeof R);
    R.spec = &spec;
    R.spec_path = o->spec_path;
    R.dry_run = o->dry_run;
    int rc = setup_runner(&R, o);
    char base[PATH_MAX];
    int bl = snprintf(base, sizeof base, "%s/%s", o->out_dir ? o->out_dir : spec.results_dir, spec.name);
    if (!rc && (bl < 0 || bl > PATH_MAX - 600)) { /* room for /<stamp>/runs/<mesh>.probe-b<N>.json and friends */
        fprintf(stderr, "sweep: results path too long\n");
        rc = EXIT_USAGE;
    }
    if (!rc && o->dry_run) {
        rc = dry_run(&R, base);
    } else if (!rc) {
        if (find_plots(R.plots, sizeof R.plots) != 0) {
            fprintf(stderr, "sweep: cannot find the gnuplot templates (plots/loss.gp next to build/ or in the current "
                            "folder; or set MESHSWEEP_PLOTS)\n");
            rc = EXIT_IO;
        } else if (sweep_launch_install_signals() != 0) {
            fprintf(stderr, "sweep: cannot install signal handlers: %s\n", strerror(errno));
            rc = EXIT_IO;
        }
        char started[32];
        utc_now(NULL, 0, started, sizeof started);
        int resumed = 0;
        if (!rc) rc = prepare_folder(&R, base, o->fresh, &resumed);
        if (!rc) {
            fprintf(stderr, "sweep: %s: %d meshes, %s %s\n", spec.name, spec.n_meshes,
                    resumed ? "resuming" : "writing to", R.dir);
            rc = run_all(&R, started);
        }
    }
    sweep_spec_free(&spec);
    return rc;
}
