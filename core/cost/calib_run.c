/* core/cost/calib_run.c — the calibration run behind build/calibrate (see calib_run.h): measure this
 * machine into its machine file, or re-measure a few of a file's points to say how far the machine has
 * drifted from it. Every rank calls these (MPI started by the caller). */
#include "core/cost/calib_run.h"
#include "core/common/files.h"
#include "core/cost/calibrate.h"
#include "core/cost/predict.h"
#include "core/engine/comm.h"
#include "core/job/metrics.h"
#ifdef MESHSWEEP_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void utc_now(char *out, size_t cap) {
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}
/* the load averages (1, 5, 15 min); $MESHSWEEP_LOADAVG names a file read instead of /proc/loadavg (the
 * tests give the calibration's quiet check a load of their choosing) */
static void loadavg(double l[3]) {
    l[0] = l[1] = l[2] = -1;
    const char *path = getenv("MESHSWEEP_LOADAVG");
    FILE *f = fopen(path && *path ? path : "/proc/loadavg", "r");
    if (!f) return;
    if (fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) != 3) l[0] = l[1] = l[2] = -1;
    fclose(f);
}

/* How many of the host's cores other work keeps busy now: /proc/stat's busy time (all but idle and iowait)
 * over one second while this calibration's ranks sleep, in cores. The load average would count the build
 * that has only just finished (`make sweep` compiles, then calibrates) for a minute after it ended. With
 * $MESHSWEEP_LOADAVG set, that file's 1-minute figure stands for it (the tests' way to give a load). -1:
 * unknown. */
static double busy_cores(const double load[3]) {
    const char *path = getenv("MESHSWEEP_LOADAVG");
    if (path && *path) return load[0];
    unsigned long long a[2][8] = {{0}};
    for (int k = 0; k < 2; k++) {
        if (k) { struct timespec ts = {1, 0}; nanosleep(&ts, NULL); }
        FILE *f = fopen("/proc/stat", "r");
        if (!f) return -1;
        int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &a[k][0], &a[k][1], &a[k][2], &a[k][3],
                       &a[k][4], &a[k][5], &a[k][6], &a[k][7]);
        fclose(f);
        if (n != 8) return -1;
    }
    unsigned long long tot = 0, idle = (a[1][3] - a[0][3]) + (a[1][4] - a[0][4]);
    for (int i = 0; i < 8; i++) tot += a[1][i] - a[0][i];
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return tot ? (double)(tot - idle) / (double)tot * (double)(cores > 0 ? cores : 1) : -1;
}

/* one event array of the workload to every rank (rank 0 recorded it) */
static int bcast_events(cost_event **v, size_t *n, size_t *cap) {
    unsigned long long k = *n;
    MPI_Bcast(&k, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    if (k > *cap) {
        cost_event *q = realloc(*v, (size_t)k * sizeof *q);
        if (!q) return -1;
        *v = q; *cap = (size_t)k;
    }
    *n = (size_t)k;
    if (k) MPI_Bcast(*v, (int)(k * sizeof **v), MPI_BYTE, 0, MPI_COMM_WORLD);
    return 0;
}

/* the step ends of the workload's sequences to every rank */
static int bcast_ends(cost_workload *w) {
    int k = w->nsteps;
    MPI_Bcast(&k, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (k > w->capsteps) {
        size_t *q = realloc(w->ends, (size_t)k * sizeof *q);
        if (!q) return -1;
        w->ends = q; w->capsteps = k;
    }
    w->nsteps = k;
    if (k) MPI_Bcast(w->ends, (int)(k * sizeof *w->ends), MPI_BYTE, 0, MPI_COMM_WORLD);
    return 0;
}

/* Ranks beyond the cores: one GEMM on every rank at once against rank 0 alone. */
static double sharing(const ops_t *ops, int ls, int cores, double target_ms) {
    if (ls <= cores) return 1.0;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    cost_event e = {.type = COST_EV_OP, .kind = COST_GEMM_FWD, .dim = {256, 256, 256, 0, 0}};
    cost_op_work(COST_GEMM_FWD, e.dim, (int)ops->cbytes, &e.flops, &e.bytes);
    double alone = rank == 0 ? cost_calib_op_us(ops, &e, target_ms, 3) : 0;
    cost_calib_idle_barrier();
    double all = cost_calib_together_us(ops, &e, target_ms, 3);   /* as the op table is timed */
    MPI_Bcast(&alone, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    /* t_alone · (ranks / cores) / t_together: below 1 when time slicing costs (caches, switches); above 1 when
     * other jobs on the host slow one rank alone about as much as the group (then the group's ranks get
     * more than ranks / cores of a core each); at most ranks / cores (the group never beats one rank alone) */
    double eff = alone > 0 && all > 0 ? alone * ((double)ls / cores) / all : 1, most = (double)ls / cores;
    return eff > most ? most : eff < 0.05 ? 0.05 : eff;
}

/* The collectives' rounds spread over npoints points of the calibration: at point p (counting from 0) the
 * rounds up to ceil(rounds * (p + 1) / npoints) are done (with 5 rounds and 5 points, one at each). */
typedef struct {
    cost_calib_coll *s;
    int point, npoints;
} coll_spread;

static void coll_point(void *arg) {
    coll_spread *c = arg;
    int rounds = cost_calib_coll_rounds(c->s), from = (rounds * c->point + c->npoints - 1) / c->npoints,
        upto = (rounds * (c->point + 1) + c->npoints - 1) / c->npoints;
    for (int k = from; k < upto; k++) cost_calib_coll_round(c->s);
    c->point++;
}

/* The sequence factor: whole steps' ops in their order on every rank at once (rank 0's step of every mesh
 * of the workload) against the sum of the table's figures for the same ops, i.e. what a step adds to ops
 * timed one by one: other ops between an op's calls and, with more ranks than cores, other ranks' steps
 * between them (every rank's working set cycled through the caches that time slices share). One ratio of
 * sums over all the steps, so it is the machine's, not a mesh's. With more ranks than cores, the same
 * passes on rank 0 alone give how the ranks share the cores (replacing the one GEMM of sharing(): a
 * step's mix of ops shares them as a step does). The replays come in rounds across the steps, spread
 * over the calibration (seq_rounds() before the op table, after it and at the end): a prediction
 * of a replayed step is close to its replay, so a slow or fast spell of a few seconds would otherwise set
 * it for the whole file, where the table's medians span the calibration. Every rank calls these. */
typedef struct {
    double *tv, *av;   /* [step][round]: on every rank at once; rank 0 alone (with more ranks than cores) */
    int samples, done, shared, ok;
} seq_replays;

static void seq_begin(seq_replays *q, const cost_workload *w, int samples, int ls, int cores) {
    memset(q, 0, sizeof *q);
    q->samples = samples > 16 ? 16 : samples < 1 ? 1 : samples;
    q->shared = ls > cores;
    size_t n = (size_t)(w->nsteps ? w->nsteps : 1) * (size_t)q->samples;
    q->tv = calloc(n, sizeof *q->tv);
    q->av = calloc(n, sizeof *q->av);
    int ok = q->tv && q->av;
    MPI_Allreduce(&ok, &q->ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
}

/* the next k rounds of replays of every step (fewer when the samples run out) */
static void seq_rounds(seq_replays *q, const ops_t *ops, const cost_workload *w, int k) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    size_t ss = (size_t)q->samples;
    for (; k > 0 && q->ok && q->tv && q->av && q->done < q->samples; k--, q->done++)
        for (int s = 0; s < w->nsteps; s++) {
            size_t a = s ? w->ends[s - 1] : 0, n = w->ends[s] - a, at = (size_t)s * ss + (size_t)q->done;
            if (!n) continue;
            q->tv[at] = cost_calib_sequence_us(ops, w->seq + a, n, 1);
            if (q->shared) {
                double al = rank == 0 ? cost_calib_sequence_us(ops, w->seq + a, n, 0) : 0;
                cost_calib_idle_barrier();
                MPI_Bcast(&al, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
                q->av[at] = al;
            }
        }
}

/* the factor (and, shared, the efficiency) from the rounds done, against rank 0's table in m */
static void seq_end(seq_replays *q, const cost_workload *w, cost_machine *m, int ls, int verbose) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double tog = 0, alone = 0, table = 0;
    size_t ss = (size_t)q->samples;
    for (int s = 0; q->ok && q->tv && q->av && q->done > 0 && s < w->nsteps; s++) {
        size_t a = s ? w->ends[s - 1] : 0, n = w->ends[s] - a;
        double t = metrics_median(&q->tv[(size_t)s * ss], q->done);
        double al = q->shared ? metrics_median(&q->av[(size_t)s * ss], q->done) : 0;
        if (!n || t <= 0 || (q->shared && al <= 0)) continue;   /* its buffers could not be had: the other steps decide */
        double sum = 0;
        for (size_t i = 0; rank == 0 && i < n; i++) sum += cost_machine_op_us(m, &w->seq[a + i]);
        if (verbose && rank == 0)
        {
            char alone_t[64] = "";   /* with more ranks than cores only */
            if (q->shared) snprintf(alone_t, sizeof alone_t, ", rank 0 alone %.2f ms", al / 1e3);
            fprintf(stderr, "calibrate: step %d (%zu ops): table %.2f ms, in order on every rank %.2f ms (x%.3f)%s\n", s, n,
                    sum / 1e3, t / 1e3, sum > 0 ? t / sum : 0, alone_t);
        }
        tog += t; alone += al; table += sum;
    }
    free(q->tv); free(q->av);
    q->tv = q->av = NULL;
    if (rank == 0 && tog > 0 && table > 0) {   /* no replay: the factor stays 1 */
        double f = tog / table;
        m->sequence_factor = f < 0.25 ? 0.25 : f > 4 ? 4 : f;
        if (q->shared && alone > 0) {   /* as sharing() computes it, from the passes */
            double eff = alone * ((double)ls / m->cores) / tog, most = (double)ls / m->cores;
            m->oversubscribed_efficiency = eff > most ? most : eff < 0.05 ? 0.05 : eff;
        }
    }
    MPI_Bcast(&m->sequence_factor, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(&m->oversubscribed_efficiency, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

static void set_sources(cost_machine *m, const char *date, int device, int seq) {
    json_t *s = m->sources = json_object();
    char t[256];
    snprintf(t, sizeof t, "measured by build/calibrate on %s, %s", m->host, date);
    const char *measured[] = {"compute.gemm", "compute.ops", "compute.peak_tflops", "compute.gemm_efficiency",
                              "compute.attention_efficiency", "compute.memory_gbs", "compute.host_link_gbs",
                              "hosts.oversubscribed_efficiency", "comm.collectives"};
    if (seq) json_object_set_new(s, "compute.sequence_factor", json_string(t));
    else if (!device)
        json_object_set_new(s, "compute.sequence_factor", json_string("1: not measured with no more ranks than cores (there the "
                                                                       "replays ran 7-10 % slower than build/train's steps of the "
                                                                       "same ops: docs/cost-model.md)"));
    else json_object_set_new(s, "compute.sequence_factor", json_string("1: not measured on an asynchronous device (its "
                                                                       "launches are in compute.launch_us)"));
    for (size_t i = 0; i < sizeof measured / sizeof *measured; i++) json_object_set_new(s, measured[i], json_string(t));
    json_object_set_new(s, "hosts.cores_per_host", json_string(device ? "the CUDA devices of the host at calibration"
                                                                      : "sysconf(_SC_NPROCESSORS_ONLN) at calibration"));
    json_object_set_new(s, "compute.async", json_string(device ? "the CUDA backend: kernels run on a stream behind the host"
                                                               : "the CPU backend computes on the calling thread"));
    if (device) json_object_set_new(s, "compute.launch_us", json_string(t));
    json_object_set_new(s, "comm.overlap", json_string(m->overlap ? "NCCL on its own stream (core/engine/comm_nccl.c)"
                                                                  : "MPI progresses only inside MPI calls; host-staged "
                                                                    "collectives complete at once (core/engine/comm.c)"));
}

/* Is the host quiet enough that a calibration measures it, not the scheduler? Before anything is
 * measured: the cores other work keeps busy over one second (busy_cores; the load average is only said)
 * against COST_CALIB_MAX_LOAD_PER_CORE of its cores, and the spread ((max - min) / median) of 7 timings of
 * one 256^3 GEMM on rank 0 while the other ranks sleep, against COST_CALIB_MAX_SPREAD (docs/cost-model.md,
 * "A calibration needs a quiet host"). 0 quiet, or forced (note says so, for the file); 1 refused (one
 * line said by rank 0). Every rank calls it and gets rank 0's verdict. */
#define COST_CALIB_MAX_LOAD_PER_CORE 0.5
#define COST_CALIB_MAX_SPREAD 0.25
static int host_quiet(const cost_calib_opts *o, int cores, const double load[3], char *note, size_t cap) {
    int rank, refuse = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    note[0] = 0;
    if (rank == 0) {
        double busy = busy_cores(load);
        cost_event e = {.type = COST_EV_OP, .kind = COST_GEMM_FWD, .dim = {256, 256, 256, 0, 0}};
        cost_op_work(COST_GEMM_FWD, e.dim, (int)o->ops->cbytes, &e.flops, &e.bytes);
        double t[7];
        int n = 0;
        for (int i = 0; i < 7; i++) {
            double us = cost_calib_op_us(o->ops, &e, 5.0, 1);
            if (us > 0) t[n++] = us;
        }
        double spread = 0;
        if (n >= 3) {
            for (int i = 1; i < n; i++) for (int j = i; j > 0 && t[j] < t[j - 1]; j--) { double x = t[j]; t[j] = t[j - 1]; t[j - 1] = x; }
            spread = (t[n - 1] - t[0]) / t[n / 2];
        }
        double limit = COST_CALIB_MAX_LOAD_PER_CORE * cores;
        int loaded = busy > limit || spread > COST_CALIB_MAX_SPREAD;
        snprintf(note, cap, "%.2f of %d cores busy with other work (limit %.2f; load average %.2f), one GEMM's spread %.0f%% "
                 "over %d timings (limit %.0f%%)", busy, cores, limit, load[0], 100 * spread, n, 100 * COST_CALIB_MAX_SPREAD);
        if (loaded && !o->force) {
            fprintf(stderr, "calibrate: the host is loaded: %s: a calibration now would measure the scheduler's luck, not this "
                            "machine (--force, or `make calibrate FORCE=1`, calibrates anyway)\n", note);
            refuse = 1;
        } else if (loaded) {
            char t2[512];
            snprintf(t2, sizeof t2, "FORCED on a loaded host: %s", note);
            snprintf(note, cap, "%s", t2);
        } else {
            char t2[512];
            snprintf(t2, sizeof t2, "a quiet host: %s", note);
            snprintf(note, cap, "%s", t2);
        }
    }
    cost_calib_idle_barrier();
    MPI_Bcast(&refuse, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return refuse;
}

int cost_calibrate(const cost_calib_opts *o) {
    int rank, world, lr = 0, ls = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    comm_local_rank(&lr, &ls);
    double t0 = comm_now_ms(), l0[3], l1[3];
    loadavg(l0);
    char err[2048] = "", date[32], quiet[512] = "";
    utc_now(date, sizeof date);
    long ncores = sysconf(_SC_NPROCESSORS_ONLN);
    if (!o->quick && host_quiet(o, ncores > 0 ? (int)ncores : 1, l0, quiet, sizeof quiet)) return 1;
    int forced = !strncmp(quiet, "FORCED", 6);
    cost_workload w = {0};
    int bad = 0;
    if (rank == 0) {
        for (int i = 0; i < o->nspecs && !bad; i++) bad = o->add_spec(&w, o->specs[i], err, sizeof err) != 0;
        if (!bad && o->model)
            bad = cost_workload_add_run(&w, o->model, world, o->tp, o->batch, o->seq_len,
                                        o->ops->cbytes == 2 ? DTYPE_BF16 : DTYPE_F32,
                                        o->ops != &ops_cpu, err, sizeof err) != 0;
        if (!bad) bad = cost_workload_add_gemm_grid(&w, 16, o->quick ? 64 : 256) != 0;
        if (bad && !err[0]) snprintf(err, sizeof err, "out of host memory");
    }
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (bad) { if (rank == 0) fprintf(stderr, "calibrate: %s\n", err); cost_workload_free(&w); return 2; }
    if (bcast_events(&w.ops, &w.nops, &w.capops) || bcast_events(&w.colls, &w.ncolls, &w.capcolls) ||
        bcast_events(&w.seq, &w.nseq, &w.capseq) || bcast_ends(&w)) {
        fprintf(stderr, "calibrate: out of host memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    cost_machine m;
    memset(&m, 0, sizeof m);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (gethostname(m.host, sizeof m.host - 1) != 0) snprintf(m.host, sizeof m.host, "unknown");
    m.cores = cores > 0 ? (int)cores : 1;
    int device = o->ops != &ops_cpu;
#ifdef MESHSWEEP_CUDA
    if (device) m.cores = cuda_device_count() > 0 ? cuda_device_count() : 1;   /* compute units: the GPUs */
#endif
    double tms = o->quick ? 0.3 : COST_CALIB_OP_MS;
    int samples = o->quick ? 1 : 3;
    if (o->verbose && rank == 0)
        fprintf(stderr, "calibrate: %zu ops and %zu collective sizes from %d spec(s), world %d (%d on this host, %d cores)\n",
                w.nops, w.ncolls, o->nspecs, world, ls, m.cores);
    /* how ranks share the cores first (the op figures are converted with it), then the ops on every rank at
     * once, as the steps compute them */
    m.cores_per_host = m.cores;
    m.calibrated_ranks = ls;
    m.overlap = cost_calib_uses_nccl(o->ops);
    m.oversubscribed_efficiency = sharing(o->ops, ls, m.cores, tms);
    if (device && rank == 0) m.launch_us = cost_calib_launch_us(o->ops);
    if (rank == 0) {   /* the peak of one rank alone, as build/train measures it for MFU: a 512^3 GEMM */
        cost_event e = {.type = COST_EV_OP, .kind = COST_GEMM_FWD, .dim = {512, 512, 512, 0, 0}};
        cost_op_work(COST_GEMM_FWD, e.dim, (int)o->ops->cbytes, &e.flops, &e.bytes);
        double us = cost_calib_op_us(o->ops, &e, tms * 3, samples);
        m.peak_tflops = us > 0 ? e.flops / us / 1e6 : 0;
    }
    cost_calib_idle_barrier();
    MPI_Bcast(&m.peak_tflops, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    /* the step replays' rounds: a third before the op table, the rest after it, a third at the end.
     * Only with more ranks than cores, where time slices of other ranks' ops come between a step's ops: with
     * a core per rank the replays measured 7-10 % slower than build/train's own steps of the same ops (2 ranks
     * of the 2-core host, quiet, docs/cost-model.md), so there the factor would only add that bias.
     * MESHSWEEP_CALIB_SEQUENCE=1 replays anyway (tests, comparisons). */
    seq_replays q = {0};
    int third = samples / 3;
    const char *force_seq = getenv("MESHSWEEP_CALIB_SEQUENCE");
    int seq = !device && (ls > m.cores || (force_seq && !strcmp(force_seq, "1")));
    if (!device && !seq && o->verbose && rank == 0)
        fprintf(stderr, "calibrate: sequence factor 1: %d ranks on %d cores, no time slicing to measure\n", ls, m.cores);
    /* the collectives' rounds, spread over the calibration like the replays: one before the op table, one
     * between each two of its rounds, one after it and one at the end (coll_point()). Timed one after
     * another in a few seconds, the rounds caught one speed of this host's 2-rank collectives, which change
     * from second to second (4 MiB all-reduce at 1.9 and 5.4 ms in two files a minute apart, 2 ranks of the
     * quiet 2-core host); the median over rounds seconds apart is the host's usual speed. */
    static const double grid[] = {64, 1024, 16384, 65536, 131072, 262144, 1048576, 4194304, 16777216};
    static const double qgrid[] = {64, 4096, 262144};
    int measure_coll = world > 1 && !o->no_collectives;
    cost_calib_coll *cs = NULL;
    if (measure_coll) {
        cs = cost_calib_coll_begin(o->ops, &w, o->quick ? qgrid : grid, o->quick ? 3 : 9, o->quick ? 1 : 4, err, sizeof err);
        if (!cs) { if (rank == 0) fprintf(stderr, "calibrate: %s\n", err); cost_machine_free(&m); cost_workload_free(&w); return 1; }
    }
    coll_spread cp = {cs, 0, samples + 2};
    if (seq) seq_begin(&q, &w, samples, ls, m.cores);
    if (seq) seq_rounds(&q, o->ops, &w, third);
    coll_point(&cp);
    bad = cost_calib_ops_between(o->ops, &w, tms, samples, 1, &m, rank == 0 ? o->verbose : 0, coll_point, &cp) != 0;
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (bad) {
        cost_calib_coll_free(cs);   /* frees the groups (collective: every rank is here) */
        free(q.tv); free(q.av); cost_machine_free(&m); cost_workload_free(&w);
        return 1;
    }
    m.sequence_factor = 1;
    if (seq) seq_rounds(&q, o->ops, &w, samples - 2 * third);
    coll_point(&cp);
    if (seq) seq_rounds(&q, o->ops, &w, third);
    int rc = cs ? cost_calib_coll_end(cs, &m, o->verbose, err, sizeof err) : 0;   /* the last round, then the tables */
    if (rc) { if (rank == 0) fprintf(stderr, "calibrate: %s\n", err); free(q.tv); free(q.av); cost_machine_free(&m); cost_workload_free(&w); return 1; }
    if (seq) seq_end(&q, &w, &m, ls, o->verbose);
    if (!measure_coll) {   /* a machine file needs a collective model: a single rank has nothing to measure */
        m.coll = calloc(1, sizeof *m.coll);
        if (m.coll) { m.ncoll = 1; m.coll[0] = (cost_coll){.kind = COMM_ALL_REDUCE, .scope = COST_SCOPE_INTRA, .busbw_gbs = 1}; }
    }
    loadavg(l1);
    if (rank == 0) {
        snprintf(m.name, sizeof m.name, "%.48s-%dc", m.host, m.cores);
        snprintf(m.calibrated, sizeof m.calibrated, "%s", date);
        snprintf(m.build, sizeof m.build, "%s", o->build ? o->build : "gcc " __VERSION__);
        snprintf(m.description, sizeof m.description,
                 "%s: %d cores, calibrated in %.0f s with %d ranks, load average %.2f before, %.2f after%s%s", m.host, m.cores,
                 (comm_now_ms() - t0) / 1e3, world, l0[0], l1[0], o->quick ? " (quick: a tiny grid, for tests)" : "",
                 forced ? "; FORCED on a loaded host (sources.calibrated)" : "");
        m.async = device;
        set_sources(&m, date, device, seq);
        if (quiet[0]) json_object_set_new(m.sources, "calibrated", json_string(quiet));   /* the host's quiet, or forced */
        if (!measure_coll)
            json_object_set_new(m.sources, "comm.collectives",
                                json_string(world == 1 ? "none measured (one rank): a placeholder all-reduce of 1 GB/s, "
                                                         "no collective of this file is a measurement"
                                                       : "none measured (--no-collectives): a placeholder all-reduce of "
                                                         "1 GB/s, no collective of this file is a measurement"));
        json_t *j = cost_machine_to_json(&m);
        rc = files_write_json(o->out, j, err, sizeof err) ? 1 : 0;
        json_decref(j);
        if (rc) fprintf(stderr, "calibrate: %s\n", err);
        else fprintf(stderr, "calibrate: wrote %s (%d GEMMs, %d collective tables, %.0f s, load %.2f -> %.2f%s)\n", o->out,
                     m.ngemm, m.ncoll, (comm_now_ms() - t0) / 1e3, l0[0], l1[0], forced ? ", FORCED on a loaded host" : "");
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    cost_machine_free(&m);
    cost_workload_free(&w);
    return rc;
}
