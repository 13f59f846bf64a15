/* core/tune/search.c — the search of a tune (tune_space_build, space.h): the meshes checked once, then one
 * task per (mesh, setting) that plans and prices its micro-batches from 1 up to the first that does not
 * fit, the tasks shared round-robin by --jobs processes (fork; each sends its cells back through a
 * pipe), then the cells put in the enumeration's order with the micro-batches that cannot reach the
 * global batch listed among them. Not the pieces (core/tune/space.c). */
#include "core/tune/space.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/engine/plan.h"

enum { MAX_MESHES = TUNE_MAX_MESHES, MAX_SETTINGS = 4096, MAX_JOBS = 64 };

typedef struct task { int mesh, setting; } task;

typedef struct search {
    tune_space *S;
    tune_mesh ms[MAX_MESHES];
    int nm, refused[MAX_MESHES];
    task *tasks;
    int nt;
    int *next;   /* the next task to take, in memory every worker process shares (NULL: one process) */
} search;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int dp_of(const tune_mesh *m) { return m->r * m->s; }

/* the micro-batches of one (mesh, setting), from 1 up to the first that does not fit. 0, -1 out of
 * memory, 130 interrupted */
static int run_task(search *X, const engine_t *P, const task *t, int (*interrupted)(void)) {
    tune_space *S = X->S;
    const tune_mesh *m = &X->ms[t->mesh];
    static tune_setting st[MAX_SETTINGS];
    static int st_mesh = -1;
    if (st_mesh != t->mesh) tune_settings(S, m, st, MAX_SETTINGS), st_mesh = t->mesh;
    const tune_setting *g = &st[t->setting];
    int dp = dp_of(m), per = S->global_batch / dp;
    for (int B = 1; B <= per; B++) {
        int N = per / B;
        if (per % B || N > PLAN_MAX_GRAD_ACCUM) continue;   /* listed as unreachable by the merge */
        if (N == 1 && g->reduce_last) break;                  /* nothing is accumulated: one reduce mode */
        if (interrupted && interrupted()) return 130;
        tune_cell c = {.mesh = *m, .dp = dp, .B = B, .N = N, .ckpt = g->ckpt, .sp = g->sp, .sp_local = g->sp_local,
                       .reduce_last = N > 1 ? g->reduce_last : -1, .prefetch = g->prefetch, .mesh_i = t->mesh,
                       .setting_i = t->setting};
        char e[512];
        if (tune_plan_cell(S, P, &c, e, sizeof e)) break;   /* refused (B x T beyond the engine's tokens) */
        if (tune_add_cell(S, &c)) return -1;
        if (c.status != TUNE_FITS) break;
    }
    return 0;
}

/* ------------------------------------------------------------------ the meshes */
static void refuse(search *X, int i, const char *why) {
    tune_space *S = X->S;
    size_t w = strlen(S->refused);
    char mn[48];
    tune_mesh_name(&X->ms[i], mn, sizeof mn);
    X->refused[i] = 1;
    if (w + 8 < sizeof S->refused) snprintf(S->refused + w, sizeof S->refused - w, "%s%s: %s", w ? "; " : "", mn, why);
}

/* each mesh checked once (job_build of its first cell), and the tasks of the meshes that can run */
static int plan_meshes(search *X) {
    tune_space *S = X->S;
    X->nm = tune_meshes(S->o.world, S->o.max_replicate, X->ms, MAX_MESHES);
    static tune_setting st[MAX_SETTINGS];
    int cap = 0;
    for (int i = 0; i < X->nm; i++) {
        const tune_mesh *m = &X->ms[i];
        int dp = dp_of(m), per = S->global_batch / dp, B0 = 1;
        if (S->global_batch % dp) continue;   /* one unreachable row, by the merge */
        while (per / B0 > PLAN_MAX_GRAD_ACCUM || per % B0) B0++;
        tune_cell c = {.mesh = *m, .dp = dp, .B = B0, .N = per / B0, .sp = m->t > 1 ? 0 : -1, .reduce_last = -1, .prefetch = 1};
        job_t j;
        char e[512];
        if (tune_cell_job(S, &c, &j, e, sizeof e)) { refuse(X, i, e); continue; }
        int ns = tune_settings(S, m, st, MAX_SETTINGS);
        if (X->nt + ns > cap) {
            cap = 2 * (X->nt + ns);
            task *p = realloc(X->tasks, (size_t)cap * sizeof *p);
            if (!p) return -1;
            X->tasks = p;
        }
        for (int k = 0; k < ns; k++) X->tasks[X->nt++] = (task){i, k};
    }
    return 0;
}

/* ------------------------------------------------------------------ the workers */
static int write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w, n -= (size_t)w;
    }
    return 0;
}
static int read_all(int fd, void *p, size_t n) {
    char *c = p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        c += r, n -= (size_t)r;
    }
    return 0;
}

static void progress(const tune_space *S, int taken, int all, int jobs, double t0, int last) {
    fprintf(stderr, "%stune: %d of %d tasks taken (%d process%s); this one: %d cells, %d fit, %.1f s%s", isatty(2) ? "\r" : "",
            taken, all, jobs, jobs > 1 ? "es" : "", S->n, S->n_fit, now_s() - t0, last || !isatty(2) ? "\n" : "   ");
    fflush(stderr);
}

/* worker w's tasks: the next one no worker has taken (X->next, shared by the processes), so the workers end
 * together whatever their tasks cost (every jobs-th task, as before, left one process planning alone for
 * the last second of the 8B search). The cells come back in any order: the merge sorts them. 0, -1, 130 */
static int work(search *X, int w, int jobs, int (*interrupted)(void), double t0) {
    engine_t P;
    engine_init_plan(&P, X->S->base.dtype, 0);
    int done = 0, rc = 0;
    double shown = now_s();
    for (;;) {
        int k = X->next ? __atomic_fetch_add(X->next, 1, __ATOMIC_RELAXED) : done;
        if (k >= X->nt || rc) break;
        rc = run_task(X, &P, &X->tasks[k], interrupted);
        done++;
        if (w == 0 && now_s() - shown > (isatty(2) ? 0.5 : 5.0)) { progress(X->S, k + 1, X->nt, jobs, t0, 0); shown = now_s(); }
    }
    engine_release(&P);
    return rc;
}

/* the child: its cells through the pipe, then exit */
static void child(search *X, int w, int jobs, int fd, int (*interrupted)(void), double t0) {
    tune_space *S = X->S;
    S->n = S->n_fit = S->n_priced = 0;
    int rc = work(X, w, jobs, interrupted, t0);
    if (rc) _exit(rc == 130 ? 130 : 1);
    if (write_all(fd, &S->n, sizeof S->n) || write_all(fd, S->cells, (size_t)S->n * sizeof *S->cells)) _exit(1);
    _exit(0);
}

/* read a child's cells and reap it: 0, -1 (failed), 130 (interrupted) */
static int collect(tune_space *S, pid_t pid, int fd, int stop) {
    int n = 0, rc = 0;
    if (stop) kill(pid, SIGINT);
    else if (read_all(fd, &n, sizeof n) == 0) {
        for (int i = 0; i < n && !rc; i++) {
            tune_cell c;
            rc = read_all(fd, &c, sizeof c) || tune_add_cell(S, &c) ? -1 : 0;
        }
    } else rc = -1;
    close(fd);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(st) && WEXITSTATUS(st) == 130) return 130;
    return rc || !WIFEXITED(st) || WEXITSTATUS(st) ? (stop ? 130 : -1) : 0;
}

static int run_workers(search *X, int jobs, int (*interrupted)(void), double t0) {
    pid_t pid[MAX_JOBS];
    int fd[MAX_JOBS], started = 1, rc = 0;
    fflush(stderr);
    for (int w = 1; w < jobs; w++, started++) {
        int p[2];
        if (pipe(p)) break;
        pid[w] = fork();
        if (pid[w] < 0) { close(p[0]); close(p[1]); break; }
        if (pid[w] == 0) { close(p[0]); child(X, w, jobs, p[1], interrupted, t0); }
        close(p[1]);
        fd[w] = p[0];
    }
    if (started < jobs) { /* no fork: this process does them all */
        for (int w = 1; w < started; w++) collect(X->S, pid[w], fd[w], 1);
        *X->next = 0;
        return work(X, 0, 1, interrupted, t0);
    }
    rc = work(X, 0, jobs, interrupted, t0);
    for (int w = 1; w < jobs; w++) {
        int r = collect(X->S, pid[w], fd[w], rc != 0);
        if (!rc) rc = r;
    }
    return rc;
}

/* ------------------------------------------------------------------ the merge */
static int by_enumeration(const void *a, const void *b) {
    const tune_cell *x = a, *y = b;
    if (x->mesh_i != y->mesh_i) return x->mesh_i - y->mesh_i;
    if (x->B != y->B) return x->B - y->B;
    return x->setting_i - y->setting_i;
}

/* the micro-batches no cell of a mesh can use, up to the largest any of its settings reached */
static int unreachable_rows(search *X) {
    tune_space *S = X->S;
    int n0 = S->n;
    for (int i = 0; i < X->nm; i++) {
        const tune_mesh *m = &X->ms[i];
        int dp = dp_of(m), G = S->global_batch;
        tune_cell c = {.mesh = *m, .dp = dp, .status = TUNE_UNREACHABLE, .sp = -1, .reduce_last = -1, .prefetch = 1, .mesh_i = i,
                       .setting_i = -1};
        if (G % dp) {
            snprintf(c.why, sizeof c.why, "--global-batch %d is not a multiple of dp %d", G, dp);
            if (tune_add_cell(S, &c)) return -1;
            continue;
        }
        int top = 0, per = G / dp;
        for (int k = 0; k < n0; k++) if (S->cells[k].mesh_i == i && S->cells[k].B > top) top = S->cells[k].B;
        for (int B = 1; B < top; B++) {
            if (per % B == 0 && per / B <= PLAN_MAX_GRAD_ACCUM) continue;
            c.B = B;
            if (per % B) snprintf(c.why, sizeof c.why, "%d sequences per DP rank are not a whole number of micro-batches of %d", per, B);
            else snprintf(c.why, sizeof c.why, "%d micro-batches per step: more than this engine supports (%d)", per / B,
                          PLAN_MAX_GRAD_ACCUM);
            if (tune_add_cell(S, &c)) return -1;
        }
    }
    qsort(S->cells, (size_t)S->n, sizeof *S->cells, by_enumeration);
    S->n_fit = S->n_priced = 0;
    for (int k = 0; k < S->n; k++) S->n_fit += S->cells[k].status == TUNE_FITS, S->n_priced += S->cells[k].priced;
    return 0;
}

/* the smallest cell's need, for the line that says nothing fits */
static void nothing_fits(const tune_space *S, char *err, size_t errlen) {
    const tune_cell *best = NULL;
    for (int i = 0; i < S->n; i++)
        if (S->cells[i].status == TUNE_NO_FIT && (!best || S->cells[i].peak < best->peak)) best = &S->cells[i];
    char need[32], have[32], lab[160];
    mem_format(have, sizeof have, S->budget);
    if (!best) { snprintf(err, errlen, "no cell of the space could be planned (%s)", S->refused); return; }
    mem_format(need, sizeof need, best->peak);
    tune_cell_label(best, lab, sizeof lab);
    snprintf(err, errlen, "nothing fits the budget %s per rank: the smallest cell (%s) needs %s", have, lab, need);
}

int tune_space_build(tune_space *S, const tune_opts *o, int (*interrupted)(void), char *err, size_t errlen) {
    int rc = tune_space_check(S, o, err, errlen);
    if (rc) return rc;
    double t0 = now_s();
    search X = {.S = S};
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    S->jobs = o->jobs ? o->jobs : cores < 1 ? 1 : cores > 8 ? 8 : (int)cores;
    if (plan_meshes(&X)) { free(X.tasks); snprintf(err, errlen, "out of host memory for the tasks"); return 1; }
    int jobs = S->jobs < X.nt ? S->jobs : X.nt > 0 ? X.nt : 1;
    void *sh = jobs > 1 ? mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
    X.next = sh == MAP_FAILED ? NULL : sh;
    if (!X.next) jobs = 1;   /* no shared counter: one process takes every task */
    rc = X.nt ? run_workers(&X, jobs, interrupted, t0) : 0;
    if (X.next) munmap(sh, sizeof(int));
    free(X.tasks);
    if (rc == 130) { S->interrupted = 1; return 130; }
    if (rc || unreachable_rows(&X)) { snprintf(err, errlen, "a worker failed or host memory ran out while planning the cells"); return 1; }
    S->elapsed_s = now_s() - t0;
    if (!S->n_fit) {
        int reach = 0;
        for (int i = 0; i < S->n; i++) reach += S->cells[i].status != TUNE_UNREACHABLE;
        if (reach || !S->n) nothing_fits(S, err, errlen);
        if (!S->n && S->refused[0]) snprintf(err, errlen, "no mesh of world %d can hold the model: %s", S->o.world, S->refused);
        else if (!reach) snprintf(err, errlen, "no cell reaches --global-batch %d exactly on any mesh of world %d", S->global_batch, S->o.world);
        return 2;
    }
    if (!S->n_priced) { snprintf(err, errlen, "the step-time model priced no fitting cell (machine %s)", S->machine.name); return 2; }
    fprintf(stderr, "%stune: %d cells (%d fit, %d priced) in %.1f s by %d process%s\n", isatty(2) ? "\r" : "", S->n, S->n_fit,
            S->n_priced, S->elapsed_s, jobs, jobs > 1 ? "es" : "");
    return 0;
}
