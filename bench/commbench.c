/* bench/commbench.c — collective bandwidth per mesh group, nccl-tests style (docs/options.md, docs/metrics.md, docs/benchmarks.md):
 * `mpirun -np W build/commbench --tp T` splits the world into the TP groups (consecutive ranks) and
 * DP groups (strided) of the dp×tp mesh with comm_mpi_groups, and for each group kind and each
 * collective the engine uses (all-reduce, all-gather, reduce-scatter by both algorithms of
 * core/engine/comm.c) times sizes doubling from --min-bytes to --max-bytes through the core/engine/comm.h calls
 * themselves, so what is measured is what the engine runs. All groups of one kind run at the same
 * time, as they do in training (NCCL_TESTS_SPLIT does the same).
 * One harness owns warm-up, timing (barrier on the group first; time = max over ranks of the mean),
 * verification outside the timed region (rank-dependent small-integer data, so float sums are exact
 * and the result can be checked exactly; #wrong counts wrong elements over all ranks, as nccl-tests
 * -c does) and reporting: a `#`-headed fixed-width table with a units row (gnuplot/awk read it as is)
 * and the same records as JSON (--json, written atomically). algbw = S/t with S the whole array
 * (count·size for all-reduce, the gathered / the reduced array for all-gather / reduce-scatter);
 * busbw = algbw · metrics_busbw_factor (nccl-tests). A single-process memcpy rate is printed as the
 * reference a shared-memory transport can be compared with. The header lists every host of the job
 * with its ranks. A run that would measure nothing (one rank, or sizes below one float per rank) is
 * refused (exit 2), so "0 wrong" always means something was checked.
 * --replicate R (HSDP, mesh R x S x T) adds the shard groups (S ranks, stride T) and the replica groups
 * (R ranks: every S·T-th rank) with the one collective the engine runs on the latter, the all-reduce of
 * the owned gradient slice (comm_mpi_hsdp_groups).
 * Not here: NCCL (this measures the MPI path only), in-place vs out-of-place variants, alltoall. */
#include <errno.h>
#include <jansson.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/run/agree.h"
#include "core/common/cli.h"
#include "core/engine/comm.h"
#include "core/formats/config.h"
#include "core/engine/mesh.h"
#include "core/job/metrics.h"
#include "core/run/record.h"
#include "core/common/files.h"
#include "core/common/parse.h"
#include "core/cost/machine.h"

/* ------------------------------------------------------------------ options */
typedef struct opts {
    int tp, replicate, iters, warmup, help, ranks, ranks_per_host;
    const char *min_bytes, *max_bytes, *memcpy_bytes, *json, *rs_algo, *predict;
} opts;

#define F(x) offsetof(opts, x)
static const cli_opt OPTS[] = {
    {"tp", CLI_INT, F(tp), "T", "tensor-parallel degree of the mesh; dp = world / T (default 1: one DP group of all ranks)", 0, NULL, NULL},
    {"replicate", CLI_INT, F(replicate), "R", "HSDP mesh R x S x T: also the shard groups (S ranks) and the replica groups (every S*T-th rank: all-reduce) (default 1)", 0, NULL, NULL},
    {"min-bytes", CLI_STR, F(min_bytes), "SIZE", "smallest message (whole array; default 1K), e.g. 4096, 1MiB (K/M/G = 1024 powers, as nccl-tests)", 0, NULL, NULL},
    {"max-bytes", CLI_STR, F(max_bytes), "SIZE", "largest message (default 64M, at most 1G); sizes double from --min-bytes", 0, NULL, NULL},
    {"iters", CLI_INT, F(iters), "N", "timed iterations per size (default 20)", 0, NULL, NULL},
    {"warmup", CLI_INT, F(warmup), "N", "untimed iterations per size before the timed ones (default 5)", 0, NULL, NULL},
    {"rs-algo", CLI_STR, F(rs_algo), "allreduce|native|both", "reduce-scatter: MPI_Allreduce + copy, MPI_Reduce_scatter_block, or both (default)", 0, NULL, NULL},
    {"memcpy-bytes", CLI_STR, F(memcpy_bytes), "SIZE", "buffer size of the out-of-cache memcpy reference (default 512M)", 0, NULL, NULL},
    {"json", CLI_STR, F(json), "FILE", "also write the records as JSON (atomically: temp file, then rename)", 0, NULL, NULL},
    {"predict", CLI_STR, F(predict), "MACHINE", "measure nothing: print the cost model's table for a shipped GPU model (h100-80gb, h200-141gb, a100-80gb) or a machine file (one process, no mpirun; sizes default 8K..4G)", 0, NULL, NULL},
    {"ranks", CLI_INT, F(ranks), "N", "--predict: one group of N ranks (default: 2, 4, 8 on one host, then 16 and 64 with 1, 2, 4, 8 per host)", 0, NULL, NULL},
    {"ranks-per-host", CLI_INT, F(ranks_per_host), "K", "--predict with --ranks: K of the group's ranks on each host (default: all on one host up to the machine's GPUs per host)", 0, NULL, NULL},
    {"help", CLI_ON, F(help), NULL, "this text", 0, NULL, NULL},
};
#undef F
#define NOPTS (int)(sizeof OPTS / sizeof OPTS[0])

static int g_rank0 = 1;
static int g_mpi = 0;

/* one line on rank 0's stderr */
#define say cli_say

static void finish(int code) __attribute__((noreturn));
static void finish(int code) {
    if (g_mpi) MPI_Finalize();
    exit(code);
}

static void usage(void) {
    printf("usage: mpirun -np W build/commbench [options]\n"
           "       build/commbench --predict MACHINE [--ranks N [--ranks-per-host K]] [--min-bytes S] [--max-bytes S]\n\n");
    cli_usage(stdout, OPTS, NOPTS);
    printf("\nOutput: one row per (group, collective, algorithm, size): size (B), count (float elements of the\n"
           "whole array), group (tp|dp, and shard|replica with --replicate), ranks, collective, algo, time (us, max over ranks of the mean),\n"
           "algbw and busbw (GB/s = 1e9 B/s, nccl-tests factors), #wrong. Rows not starting with '#' are data.\n"
           "--predict prints the same rows from the cost model (algo \"model\", #wrong \"-\"; group \"intra\" for one host,\n"
           "\"k=K\" for K ranks on each of several hosts), each table after the machine's sources for its collectives.\n"
           "exit codes: 0 ok, 1 failed (including #wrong > 0), 2 bad usage\n");
}

/* sizes as nccl-tests writes them: a number with an optional K, M or G (powers of 1024); anything
 * else core's parse_size understands (KiB, MB, ...) is accepted too */
static int parse_bytes(const char *s, uint64_t *out) {
    size_t l = strlen(s);
    if (l >= 2 && l < 32 && strchr("KMG", s[l - 1]) && s[l - 2] >= '0' && s[l - 2] <= '9') {
        char buf[40];
        snprintf(buf, sizeof buf, "%.*s%ciB", (int)(l - 1), s, s[l - 1]);
        return parse_size(buf, out);
    }
    return parse_size(s, out);
}

static unsigned char g_given[NOPTS];   /* which options the command line gave */
static int given(const char *name) {
    for (int i = 0; i < NOPTS; i++) if (!strcmp(OPTS[i].name, name)) return g_given[i];
    return 0;
}
static int parse_args(opts *o, int argc, char **argv) {
    char err[256];
    if (cli_parse(OPTS, NOPTS, o, g_given, argc, argv, err, sizeof err) == 0) return 0;
    say("%s", err);
    return -1;
}

/* ------------------------------------------------------------------ the collectives */
/* One benchmark instance: the group, the whole-array size S and the two buffers (a: input or in-place
 * buffer, S bytes; b: output, S bytes). n_part = elements each rank owns (S/4/ranks). */
typedef struct bench {
    comm_group *g;
    size_t count;  /* float elements of the whole array */
    size_t n_part; /* count / ranks */
    float *a, *b;
} bench_t;

/* The data rank r holds at element j of the whole array: small integers in [-8, 8], so sums over up
 * to 2^20 ranks are exact in fp32 and the result can be compared with == . */
static inline float val(int r, size_t j) { return (float)((int)((j * 7u + (size_t)r * 31u + 3u) % 17u) - 8); }
static inline float sum_val(int n, size_t j) { float s = 0; for (int r = 0; r < n; r++) s += val(r, j); return s; }

static void fill_whole(bench_t *B) { for (size_t j = 0; j < B->count; j++) B->a[j] = val(B->g->rank, j); }
static void fill_part(bench_t *B) {
    size_t off = (size_t)B->g->rank * B->n_part;
    for (size_t i = 0; i < B->n_part; i++) B->a[i] = val(B->g->rank, off + i);
}

static void run_ar(bench_t *B) { comm_all_reduce_sum(B->g, B->a, B->count); }
static void run_ag(bench_t *B) { comm_all_gather(B->g, B->b, B->a, B->n_part); }
static void run_rs_allreduce(bench_t *B) { comm_set_rs_algo(B->g->ctx, COMM_RS_ALLREDUCE); comm_reduce_scatter(B->g, B->b, B->a, B->n_part); }
static void run_rs_native(bench_t *B) { comm_set_rs_algo(B->g->ctx, COMM_RS_NATIVE); comm_reduce_scatter(B->g, B->b, B->a, B->n_part); }

static uint64_t check_ar(bench_t *B) {
    uint64_t bad = 0;
    for (size_t j = 0; j < B->count; j++) bad += B->a[j] != sum_val(B->g->size, j);
    return bad;
}
static uint64_t check_ag(bench_t *B) {
    uint64_t bad = 0;
    for (size_t j = 0; j < B->count; j++) bad += B->b[j] != val((int)(j / B->n_part), j);
    return bad;
}
static uint64_t check_rs(bench_t *B) {
    uint64_t bad = 0;
    size_t off = (size_t)B->g->rank * B->n_part;
    for (size_t i = 0; i < B->n_part; i++) bad += B->b[i] != sum_val(B->g->size, off + i);
    return bad;
}

/* nccl-tests' table of function pointers: how to fill, run and check each collective */
typedef struct coll_def {
    const char *name, *algo;
    comm_kind kind; /* for the busbw factor */
    int rs;         /* 0: not a reduce-scatter; 1: allreduce+copy; 2: native (for --rs-algo) */
    int out_in_a;   /* the result is in a (in place) rather than b */
    void (*fill)(bench_t *);
    void (*run)(bench_t *);
    uint64_t (*check)(bench_t *);
} coll_def;
static const coll_def COLLS[] = {
    {"all_reduce", "mpi", COMM_ALL_REDUCE, 0, 1, fill_whole, run_ar, check_ar},
    {"all_gather", "mpi", COMM_ALL_GATHER, 0, 0, fill_part, run_ag, check_ag},
    {"reduce_scatter", "allreduce", COMM_REDUCE_SCATTER, 1, 0, fill_whole, run_rs_allreduce, check_rs},
    {"reduce_scatter", "native", COMM_REDUCE_SCATTER, 2, 0, fill_whole, run_rs_native, check_rs},
};
#define NCOLLS (int)(sizeof COLLS / sizeof COLLS[0])

typedef struct record {
    uint64_t bytes, count, wrong;
    const char *group, *coll, *algo;
    int ranks;
    double time_us, algbw_gbs, busbw_gbs;
    int predicted;   /* a row of --predict: nothing was run, so nothing was checked (#wrong "-") */
} record;

/* The harness: warm-up, timed loop, cross-rank max of the mean, then verification (untimed). Every
 * rank of the world calls this with the same arguments, so all groups of one kind run together. */
static int g_fault; /* MESHSWEEP_COMMBENCH_FAULT=1: corrupt one result element (tests/t_commbench.sh
                     * uses it to show that the check finds a wrong result) */
static record measure(const coll_def *c, bench_t *B, const char *group, int warmup, int iters) {
    c->fill(B);
    for (int i = 0; i < warmup; i++) c->run(B);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Barrier(*(MPI_Comm *)B->g->mpi);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) c->run(B);
    double mean_s = (MPI_Wtime() - t0) / iters, max_s = 0;
    MPI_Allreduce(&mean_s, &max_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    /* verification outside the timed region: fresh data, one call, exact comparison */
    memset(B->b, 0xff, B->count * sizeof(float)); /* NaN: an untouched output element is counted wrong */
    c->fill(B);
    c->run(B);
    if (g_fault && B->g->rank == 0) (c->out_in_a ? B->a : B->b)[0] += 1;
    unsigned long long bad = c->check(B), bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);

    record r = {0};
    r.bytes = B->count * sizeof(float);
    r.count = B->count;
    r.wrong = bad_all;
    r.group = group; r.coll = c->name; r.algo = c->algo;
    r.ranks = B->g->size;
    r.time_us = max_s * 1e6;
    r.algbw_gbs = max_s > 0 ? (double)r.bytes / max_s / 1e9 : 0;
    r.busbw_gbs = r.algbw_gbs * metrics_busbw_factor(c->kind, B->g->size);
    return r;
}

/* ------------------------------------------------------------------ memcpy reference */
/* Single-process copy rate S/t (GB/s) of `bytes`-sized buffers: the best of `reps` copies after one
 * that faults the pages in. Other ranks wait in a sleeping loop so this process has a core. */
static double memcpy_gbs(size_t bytes, int reps) {
    char *s = malloc(bytes), *d = malloc(bytes);
    if (!s || !d) { free(s); free(d); return -1; }
    memset(s, 1, bytes); memset(d, 2, bytes);
    memcpy(d, s, bytes);
    double best = 1e30;
    for (int i = 0; i < reps; i++) {
        double t0 = MPI_Wtime();
        memcpy(d, s, bytes);
        double t = MPI_Wtime() - t0;
        if (t < best) best = t;
        s[(size_t)i * 4096 % bytes] ^= d[bytes - 1]; /* keep the copies observable */
    }
    free(s); free(d);
    return best > 0 ? (double)bytes / best / 1e9 : 0;
}

static void sleep_until_all(void) {
    MPI_Request q; int done = 0;
    MPI_Ibarrier(MPI_COMM_WORLD, &q);
    struct timespec ts = {0, 1000000};
    while (!done) { MPI_Test(&q, &done, MPI_STATUS_IGNORE); if (!done) nanosleep(&ts, NULL); }
}

/* ------------------------------------------------------------------ output */
static void print_header(void) {
    printf("#%11s %12s %6s %5s %15s %9s %10s %8s %8s %7s\n", "size", "count", "group", "ranks", "collective", "algo", "time", "algbw", "busbw", "#wrong");
    printf("#%11s %12s %6s %5s %15s %9s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "", "", "(us)", "(GB/s)", "(GB/s)", "");
}
static void print_row(const record *r) {
    char wrong[24];
    snprintf(wrong, sizeof wrong, r->predicted ? "-" : "%llu", (unsigned long long)r->wrong);
    printf("%12llu %12llu %6s %5d %15s %9s %10.1f %8.3f %8.3f %7s\n", (unsigned long long)r->bytes,
           (unsigned long long)r->count, r->group, r->ranks, r->coll, r->algo, r->time_us, r->algbw_gbs,
           r->busbw_gbs, wrong);
    fflush(stdout);
}

static json_t *record_json(const record *r) {
    return json_pack("{s:I, s:I, s:s, s:i, s:s, s:s, s:f, s:f, s:f, s:I}", "size_bytes", (json_int_t)r->bytes,
                     "count", (json_int_t)r->count, "group", r->group, "ranks", r->ranks, "collective", r->coll,
                     "algo", r->algo, "time_us", r->time_us, "algbw_gbs", r->algbw_gbs, "busbw_gbs", r->busbw_gbs,
                     "wrong", (json_int_t)r->wrong);
}

/* ------------------------------------------------------------------ hosts */
/* "mhA (ranks 0-3), mhB (ranks 4-7)": every host of the job with its ranks (ranges where consecutive) */
static void hosts_line(char *out, size_t len) {
    json_t *m = agree_ranks_by_host();
    size_t used = 0;
    const char *h; json_t *ranks;
    out[0] = 0;
    json_object_foreach(m, h, ranks) {
        if (used >= len) break;
        used += (size_t)snprintf(out + used, len - used, "%s%s (rank%s ", used ? ", " : "", h, json_array_size(ranks) > 1 ? "s" : "");
        size_t n = json_array_size(ranks);
        for (size_t i = 0; i < n && used < len;) {
            long long a = json_integer_value(json_array_get(ranks, i)), b = a;
            size_t j = i + 1;
            while (j < n && json_integer_value(json_array_get(ranks, j)) == b + 1) b++, j++;
            used += (size_t)snprintf(out + used, len - used, "%s%lld", i ? "," : "", a);
            if (b > a) used += (size_t)snprintf(out + used, len - used, "-%lld", b);
            i = j;
        }
        if (used < len) used += (size_t)snprintf(out + used, len - used, ")");
    }
    json_decref(m);
}

/* ------------------------------------------------------------------ the sweep over groups and sizes */
typedef struct results {
    json_t *recs;
    double bus_sum; int nrows;
    uint64_t wrong_total;
    /* reduce-scatter comparison: time of each algorithm per group and size, for the footer */
    double rs_t[4][2][64]; uint64_t rs_bytes[4][64]; int rs_n[4];
} results;

/* a kind of group; all_reduce_only: the replica group, where the engine runs nothing else */
typedef struct gdef { const char *name; comm_group *g; int all_reduce_only; } gdef;
static int g_ngroups = 2;
static int measured(const gdef *g, const coll_def *c, int rs_mask) {
    if (g->all_reduce_only) return c->kind == COMM_ALL_REDUCE;
    return !c->rs || (c->rs & rs_mask);
}

/* the bytes of size s a group of `ranks` measures: every rank owns an equal whole number of floats,
 * as nccl-tests rounds; 0 when s is below one float per rank */
static uint64_t group_bytes(uint64_t s, int ranks) { uint64_t unit = sizeof(float) * (uint64_t)ranks; return s - s % unit; }

/* rows the run will measure (all ranks compute the same number) */
static int planned_rows(const gdef *groups, uint64_t min_b, uint64_t max_b, int rs_mask) {
    int rows = 0;
    for (int gi = 0; gi < g_ngroups; gi++) {
        if (groups[gi].g->size < 2) continue;
        int ncoll = 0;
        for (int ci = 0; ci < NCOLLS; ci++) ncoll += measured(&groups[gi], &COLLS[ci], rs_mask);
        int si = 0;
        for (uint64_t s = min_b; s <= max_b && si < 64; s *= 2, si++) rows += group_bytes(s, groups[gi].g->size) ? ncoll : 0;
    }
    return rows;
}

static void run_all(results *R, const gdef *groups, float *a, float *b, uint64_t min_b, uint64_t max_b, int rs_mask, const opts *o) {
    for (int gi = 0; gi < g_ngroups; gi++) {
        comm_group *g = groups[gi].g;
        if (g->size < 2) {
            if (g_rank0) printf("# %s groups have 1 rank: nothing to measure\n", groups[gi].name);
            continue;
        }
        /* sizes outside, collectives inside: on a machine shared with other jobs the load drifts over
         * seconds, and the two reduce-scatter algorithms are compared under the same conditions */
        int si = 0;
        for (uint64_t s = min_b; s <= max_b && si < 64; s *= 2, si++) {
            uint64_t bytes = group_bytes(s, g->size);
            if (!bytes) continue;
            for (int ci = 0; ci < NCOLLS; ci++) {
                const coll_def *c = &COLLS[ci];
                if (!measured(&groups[gi], c, rs_mask)) continue;
                bench_t B = {g, (size_t)(bytes / sizeof(float)), (size_t)(bytes / (sizeof(float) * (uint64_t)g->size)), a, b};
                record r = measure(c, &B, groups[gi].name, o->warmup, o->iters);
                R->wrong_total += r.wrong;
                R->bus_sum += r.busbw_gbs; R->nrows++;
                if (c->rs) { R->rs_t[gi][c->rs - 1][si] = r.time_us; R->rs_bytes[gi][si] = r.bytes; if (si + 1 > R->rs_n[gi]) R->rs_n[gi] = si + 1; }
                if (g_rank0) { print_row(&r); json_array_append_new(R->recs, record_json(&r)); }
            }
        }
    }
}

static void print_footer(const results *R, const gdef *groups, int rs_mask) {
    printf("# Out of bounds values : %llu %s\n", (unsigned long long)R->wrong_total, R->wrong_total ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %.3f GB/s\n", R->bus_sum / R->nrows);
    if (rs_mask == 3 && R->rs_n[0] + R->rs_n[1] + R->rs_n[2] > 0) {
        printf("# reduce_scatter algorithms: time (us) of MPI_Allreduce+copy vs MPI_Reduce_scatter_block\n");
        printf("#%5s %12s %12s %12s %8s %10s\n", "group", "size(B)", "allreduce", "native", "ratio", "faster");
        for (int gi = 0; gi < g_ngroups; gi++)
            for (int si = 0; si < R->rs_n[gi]; si++) {
                double ta = R->rs_t[gi][0][si], tn = R->rs_t[gi][1][si];
                if (ta <= 0 || tn <= 0) continue;
                printf("#%5s %12llu %12.1f %12.1f %8.2f %10s\n", groups[gi].name, (unsigned long long)R->rs_bytes[gi][si],
                       ta, tn, tn / ta, tn < ta ? "native" : "allreduce");
            }
    }
    fflush(stdout);
}

/* rank 0: the JSON record (env names rank 0's host and every host with its ranks) */
static int write_json(const char *path, results *R, const mesh_t *mesh, const opts *o, uint64_t max_b, uint64_t mc_b,
                      double mc_msg, double mc_big, const char *mpiver, const char *date) {
    char err[512];
    json_t *root = json_pack("{s:s, s:i, s:{s:i, s:i}, s:i, s:i, s:s, s:[{s:I, s:f}, {s:I, s:f}], s:O, s:I, s:f, s:{s:s, s:o, s:s, s:s}}",
        "schema", "meshsweep.commbench/1", "world", mesh->world, "mesh", "dp", mesh->dp, "tp", mesh->tp,
        "iters", o->iters, "warmup", o->warmup, "dtype", "float32",
        "memcpy", "bytes", (json_int_t)max_b, "gbs", mc_msg, "bytes", (json_int_t)mc_b, "gbs", mc_big,
        "records", R->recs, "wrong_total", (json_int_t)R->wrong_total, "avg_busbw_gbs", R->bus_sum / R->nrows,
        "env", "host", agree_host(), "ranks_by_host", agree_ranks_by_host(), "mpi", mpiver, "date", date);
    if (!root) { say("could not build the JSON record"); return 1; }
    if (mesh->rep > 1) json_object_set_new(json_object_get(root, "mesh"), "replicate", json_integer(mesh->rep));
    int rc = 0;
    if (files_write_json(path, root, err, sizeof err)) { say("%s", err); rc = 1; }
    json_decref(root);
    return rc;
}

/* ------------------------------------------------------------------ --predict: the cost model's table */
/* The table the cost model predicts for one machine (core/cost/machine.c, cost_machine_coll_us), in the
 * rows a measured run prints: no MPI, nothing run, so #wrong is "-". Groups are one host's 2, 4, 8 ranks
 * ("intra"), then groups spanning hosts with k ranks on each ("k=K"), as nccl-tests runs them: one
 * group alone on its hosts. */
static const int PRED_KINDS[] = {COMM_ALL_REDUCE, COMM_ALL_GATHER, COMM_REDUCE_SCATTER, COMM_BROADCAST};

/* the machine by shipped name, else as a machine file; 0, or -1 with one line in err */
static int predict_machine(const char *what, cost_machine *m, char *err, size_t errlen) {
    if (cost_machine_shipped(what, m) == 0) return 0;
    if (access(what, F_OK) == 0) return cost_machine_load(what, m, err, errlen);
    char names[256];
    cost_machine_shipped_names(names, sizeof names);
    snprintf(err, errlen, "--predict '%s': not a shipped model (%s) nor a machine file", what, names);
    return -1;
}

/* the rows of one group; returns how many it printed */
static int predict_group(const cost_machine *m, int ranks, int per_host, uint64_t min_b, uint64_t max_b) {
    char group[16];
    if (per_host >= ranks) snprintf(group, sizeof group, "intra");
    else snprintf(group, sizeof group, "k=%d", per_host);
    printf("# %d ranks, %d per host (%d host%s)\n", ranks, per_host, ranks / per_host, ranks / per_host > 1 ? "s" : "");
    int rows = 0;
    for (size_t ki = 0; ki < sizeof PRED_KINDS / sizeof *PRED_KINDS; ki++) {
        int kind = PRED_KINDS[ki];
        for (uint64_t s = min_b; s <= max_b; s *= 2) {
            uint64_t bytes = group_bytes(s, ranks);
            if (!bytes) continue;
            char err[256];
            double t = cost_machine_coll_us(m, kind, (double)bytes, ranks, per_host, per_host, 0, err, sizeof err);
            if (t < 0) { printf("# %s\n", err); break; }
            record r = {0};
            r.bytes = bytes; r.count = bytes / sizeof(float);
            r.group = group; r.coll = comm_kind_names[kind]; r.algo = "model"; r.ranks = ranks;
            r.time_us = t;
            r.algbw_gbs = t > 0 ? (double)bytes / (t * 1e3) : 0;
            r.busbw_gbs = r.algbw_gbs * metrics_busbw_factor(kind, ranks);
            r.predicted = 1;
            print_row(&r);
            rows++;
        }
    }
    return rows;
}

/* one line on a usage error (exit 2); otherwise the tables (exit 0, 1 when the machine models none) */
static int predict_main(const opts *o, uint64_t min_b, uint64_t max_b) {
    static const char *const measuring[] = {"tp", "replicate", "iters", "warmup", "rs-algo", "memcpy-bytes", "json"};
    for (size_t j = 0; j < sizeof measuring / sizeof *measuring; j++)
        if (given(measuring[j])) { say("--%s: not with --predict (nothing is measured)", measuring[j]); return 2; }
    if (max_b > (64ull << 30)) { say("--max-bytes: at most 64G with --predict"); return 2; }
    cost_machine m;
    char err[512];
    if (predict_machine(o->predict, &m, err, sizeof err)) { say("%s", err); return 2; }
    int host_units = m.cores_per_host > 0 ? m.cores_per_host : 8;
    int ranks = o->ranks, per_host = o->ranks_per_host;
    const char *bad = NULL;
    if (per_host && !ranks) bad = "--ranks-per-host needs --ranks";
    else if (ranks && ranks < 2) bad = "--ranks: at least 2 (one rank has no collective)";
    else if (ranks && per_host && (per_host < 1 || per_host > ranks || ranks % per_host)) bad = "--ranks-per-host: between 1 and --ranks, and dividing it";
    if (bad) { say("%s", bad); cost_machine_free(&m); return 2; }
    printf("# commbench --predict %s: the cost model's table (docs/cost-model.md), nothing measured; float32 counts\n", m.name);
    printf("# machine: %s\n", m.description[0] ? m.description : m.name);
    printf("# time = latency + ring steps x latency per step + S x factor / busbw(S); algbw = S/time, busbw = algbw x nccl-tests factor\n");
    const char *key; json_t *v;
    json_object_foreach(m.sources, key, v)
        if (!strncmp(key, "comm.", 5)) printf("# source %s: %s\n", key, json_string_value(v));
    print_header();
    int rows = 0;
    if (ranks) {
        rows += predict_group(&m, ranks, per_host ? per_host : ranks <= host_units ? ranks : host_units, min_b, max_b);
    } else {
        for (int n = 2; n <= host_units && n <= 8; n *= 2) rows += predict_group(&m, n, n, min_b, max_b);
        for (int n = 16; n <= 64; n *= 4)
            for (int k = 1; k <= 8 && k <= host_units; k *= 2) rows += predict_group(&m, n, k, min_b, max_b);
    }
    cost_machine_free(&m);
    if (!rows) { say("machine %s models none of these collectives", o->predict); return 1; }
    return 0;
}

/* ------------------------------------------------------------------ main */
static const char *env_rank_str(void) {
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r) r = getenv("PMI_RANK");
    if (!r) r = getenv("PMIX_RANK");
    return r;
}

int main(int argc, char **argv) {
    opts o = {.tp = 1, .replicate = 1, .iters = 20, .warmup = 5, .memcpy_bytes = "512M", .rs_algo = "both"};
    const char *rs = env_rank_str();
    g_rank0 = !rs || !strcmp(rs, "0");
    cli_set_program("commbench"); cli_set_rank0(g_rank0);

    /* usage errors are found before MPI starts, so every rank exits 2 with one line from rank 0 */
#define BAD(...) do { say(__VA_ARGS__); finish(2); } while (0)
    if (parse_args(&o, argc, argv)) finish(2);
    if (o.help) { if (g_rank0) usage(); finish(0); }
    if (!o.min_bytes) o.min_bytes = o.predict ? "8K" : "1K";
    if (!o.max_bytes) o.max_bytes = o.predict ? "4G" : "64M";
    uint64_t min_b, max_b, mc_b;
    if (parse_bytes(o.min_bytes, &min_b)) BAD("option --min-bytes: '%s' is not a size (e.g. 1K, 4096, 1MiB)", o.min_bytes);
    if (parse_bytes(o.max_bytes, &max_b)) BAD("option --max-bytes: '%s' is not a size (e.g. 64M, 1GiB)", o.max_bytes);
    if (parse_bytes(o.memcpy_bytes, &mc_b)) BAD("option --memcpy-bytes: '%s' is not a size (e.g. 512M)", o.memcpy_bytes);
    if (min_b < 4) BAD("--min-bytes %s: at least 4 bytes (one float)", o.min_bytes);
    if (max_b < min_b) BAD("--max-bytes %s is below --min-bytes %s", o.max_bytes, o.min_bytes);
    if (o.predict) finish(g_rank0 ? predict_main(&o, min_b, max_b) : 0);   /* under mpirun, rank 0 prints it once */
    if (given("ranks") || given("ranks-per-host")) BAD("--ranks and --ranks-per-host go with --predict (a measured run's groups come from mpirun and --tp)");
    if (max_b > (1ull << 30)) BAD("--max-bytes %s: at most 1G per message", o.max_bytes);
    if (mc_b < 4096 || mc_b > (4ull << 30)) BAD("--memcpy-bytes %s: between 4K and 4G", o.memcpy_bytes);
    if (o.iters < 1) BAD("--iters %d: at least 1", o.iters);
    if (o.warmup < 0) BAD("--warmup %d: not negative", o.warmup);
    if (o.tp < 1) BAD("--tp %d: at least 1", o.tp);
    if (o.replicate < 1) BAD("--replicate %d: at least 1", o.replicate);
    int rs_mask = !strcmp(o.rs_algo, "allreduce") ? 1 : !strcmp(o.rs_algo, "native") ? 2 : !strcmp(o.rs_algo, "both") ? 3 : 0;
    if (!rs_mask) BAD("--rs-algo '%s': one of allreduce, native, both", o.rs_algo);

    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) { say("MPI_Init failed"); return 1; }
    g_mpi = 1;
    { const char *f = getenv("MESHSWEEP_COMMBENCH_FAULT"); g_fault = f && !strcmp(f, "1"); }
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    g_rank0 = rank == 0;
    cli_set_rank0(g_rank0);
    agree_init("commbench");
    char err[512];
    mesh_t mesh;
    if (mesh_init_hsdp(&mesh, world, rank, o.replicate, o.tp, err, sizeof err)) BAD("%s", err);
    /* rank 0 writes the file, so it checks; every rank leaves together if it cannot */
    if (o.json && g_rank0 && files_check_writable(o.json, err, sizeof err)) agree_fail(2, "%s", err);
    int code = agree_check();
    if (code) finish(code);

    comm_ctx cc;                  /* host buffers: MPI reads them directly */
    comm_ctx_init(&cc, NULL);
    comm_group tpg, dpg, shg = {0}, repg = {0};
    if (comm_mpi_groups(&cc, &tpg, &dpg, o.tp)) { say("could not build the mesh groups"); finish(1); }
    if (mesh.rep > 1 && comm_mpi_hsdp_groups(&cc, &shg, &repg, o.tp, mesh.shard)) { say("could not build the HSDP groups"); finish(1); }
    comm_rs_algo rs_default = comm_get_rs_algo(&cc);
    gdef groups[4] = {{"tp", &tpg, 0}, {"dp", &dpg, 0}, {"shard", &shg, 0}, {"replica", &repg, 1}};
    g_ngroups = mesh.rep > 1 ? 4 : 2;
    /* a run that would measure nothing is refused, so "0 wrong" always means something was checked */
    if (!planned_rows(groups, min_b, max_b, rs_mask)) {
        if (world < 2) BAD("nothing to measure: 1 rank has no group to communicate in (run it under mpirun -np 2 or more)");
        BAD("nothing to measure: --max-bytes %s is below one float per rank of every group of 2 or more ranks", o.max_bytes);
    }

    /* buffers for the largest message, touched once so page faults stay out of the timings */
    size_t max_count = (size_t)(max_b / sizeof(float));
    float *a = malloc(max_count * sizeof(float)), *b = malloc(max_count * sizeof(float));
    if (!a || !b) agree_fail(1, "out of host memory for two %llu-byte buffers", (unsigned long long)max_b);
    if ((code = agree_check())) finish(code);
    if (!a || !b) finish(1);   /* agreed just above; this only tells the analyser */
    memset(a, 0, max_count * sizeof(float)); memset(b, 0, max_count * sizeof(float));

    /* memcpy reference on rank 0 while the others sleep: at the largest message size (what the
     * collectives' working set sees, partly cache-resident) and at --memcpy-bytes (out of cache) */
    double mc_msg = 0, mc_big = 0;
    if (g_rank0) { mc_msg = memcpy_gbs((size_t)max_b, 10); mc_big = memcpy_gbs((size_t)mc_b, 5); }
    sleep_until_all();

    char hosts[1024], mpiver[MPI_MAX_LIBRARY_VERSION_STRING] = "?", date[64] = "?";
    hosts_line(hosts, sizeof hosts);
    { int ml = 0; MPI_Get_library_version(mpiver, &ml); char *nl = strchr(mpiver, ','); if (nl) *nl = 0; }
    { time_t now = time(NULL); struct tm tmv; if (gmtime_r(&now, &tmv)) strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tmv); }
    if (g_rank0) {
        char mn[48];
        mesh_name(&mesh, mn, sizeof mn);
        printf("# commbench: world %d, mesh %s (%s), float32 sum, iters %d, warmup %d, %s\n", world, mn,
               mesh.rep > 1 ? "replicate x shard x tp" : "dp x tp", o.iters, o.warmup, mpiver);
        printf("# hosts: %s\n", hosts);
        printf("# time = max over ranks of the mean of %d iterations; all groups of one kind run at once;\n", o.iters);
        printf("# algbw = S/time (S = whole array), busbw = algbw * nccl-tests factor (all_reduce 2(n-1)/n, others (n-1)/n)\n");
        printf("# memcpy (1 process, best of copies): %.3f GB/s at %llu B, %.3f GB/s at %llu B\n", mc_msg,
               (unsigned long long)max_b, mc_big, (unsigned long long)mc_b);
        print_header();
    }

    static results R;
    R.recs = json_array();
    run_all(&R, groups, a, b, min_b, max_b, rs_mask, &o);
    comm_set_rs_algo(&cc, rs_default);
    int rc = R.wrong_total ? 1 : 0;
    if (!R.nrows) { say("nothing was measured"); rc = 1; } /* planned_rows said otherwise: a fault */
    else if (g_rank0) print_footer(&R, groups, rs_mask);
    if (g_rank0 && o.json && R.nrows && write_json(o.json, &R, &mesh, &o, max_b, mc_b, mc_msg, mc_big, mpiver, date)) rc = 1;
    json_decref(R.recs);
    if (R.wrong_total) say("%llu wrong elements: the collectives returned wrong results", (unsigned long long)R.wrong_total);
    free(a); free(b);
    comm_mpi_groups_free(&shg, &repg);
    agree_free();
    finish(rc);
    return rc;
}
