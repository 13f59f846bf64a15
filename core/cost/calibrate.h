/* core/cost/calibrate.h — measuring a machine for its model (docs/cost-model.md; `make calibrate`, bench/calibrate.c):
 *   ops          every distinct op of the steps the given sweep specs will run (their GEMM shapes, their
 *                bandwidth-bound ops, their attention), through the backend's own op table, on one rank
 *                while the others sleep; plus a small grid of GEMMs for shapes no spec has;
 *   sharing      one GEMM on every rank of the host at once against one rank alone;
 *   collectives  every kind over every group size of the world, all groups at once as in training,
 *                through core/engine/comm (its algorithm choices and its polling), at a grid of sizes
 *                and at the sizes the specs use.
 * Not here: the program's options (bench/calibrate.c) or the model's arithmetic (core/cost/machine.c). */
#ifndef MESHSWEEP_COST_CALIBRATE_H
#define MESHSWEEP_COST_CALIBRATE_H
#include "core/cost/machine.h"
#include "core/cost/trace.h"

/* The distinct events of a set of steps: ops by kind and dimensions, collectives by kind, group size
 * and bytes. */
typedef struct cost_workload {
    cost_event *ops;   size_t nops, capops;
    cost_event *colls; size_t ncolls, capcolls;
    /* the ops of whole steps in their order (rank 0's step of every mesh), for the sequence factor:
     * step s is seq[s ? ends[s-1] : 0 .. ends[s]) */
    cost_event *seq;   size_t nseq, capseq;
    size_t *ends;      int nsteps, capsteps;
} cost_workload;
void cost_workload_free(cost_workload *w);
/* add the distinct events of trace t (and, when whole, its ops in order as one more step of seq); -1 out
 * of memory */
int cost_workload_add(cost_workload *w, const cost_trace *t, int whole);
/* the step of one run (model preset or HF config, world, tp, batch per DP rank, sequence length, compute
 * precision, CUDA's flash attention) for rank 0 and the last rank; -1 with a message */
int cost_workload_add_run(cost_workload *w, const char *model, int world, int tp, int batch, int seq_len, dtype_t dtype,
                          int cuda, char *err, size_t errlen);
/* a small grid of GEMM shapes (every GEMM kind at m, n, k from lo to hi, powers of 4) */
int cost_workload_add_gemm_grid(cost_workload *w, int64_t lo, int64_t hi);

/* How long a timed loop of one op runs on one rank alone (ms); on every rank at once of an oversubscribed
 * host a sample lasts ranks / cores times that, long against the scheduler's time slice */
#define COST_CALIB_OP_MS 10.0
/* Time one op in microseconds through ops (buffers from its dev_alloc, filled with valid values): the
 * median of `samples` timings of a loop of at least target_ms, going round sets of buffers larger than
 * the core's cache together (core/cost/calib_ops.c); -1 when its buffers cannot be had. */
double cost_calib_op_us(const ops_t *ops, const cost_event *e, double target_ms, int samples);
/* The same on every rank at once, as a step computes it (collective over MPI_COMM_WORLD): each sample
 * from a common start to the slowest rank's end, the median over samples; the same value on every rank. */
double cost_calib_together_us(const ops_t *ops, const cost_event *e, double target_ms, int samples);
/* Every op of w measured into m's GEMM table and op curves, and the fallbacks derived from them
 * (peak, GEMM and attention efficiency, memory bandwidth): each op's median of `samples` samples taken
 * in rounds across all the ops (a slow spell spoils one round, not every sample of a few ops).
 * together: on every rank at once, as a step computes (collective over MPI_COMM_WORLD; rank 0's m gets
 * the figures), else on the calling rank alone. -1 when an op cannot be measured. */
int cost_calib_ops(const ops_t *ops, const cost_workload *w, double target_ms, int samples, int together,
                   cost_machine *m, int verbose);
/* The same with between(arg) called after every round but the last (with together, on every rank: it may
 * be collective), to spread other measurements over the table's rounds */
int cost_calib_ops_between(const ops_t *ops, const cost_workload *w, double target_ms, int samples, int together,
                           cost_machine *m, int verbose, void (*between)(void *), void *arg);
/* Collectives over MPI_COMM_WORLD (every rank calls it): every kind at every group size n dividing the
 * world (consecutive groups, all at once), at `sizes` bytes and the workload's sizes for that kind and
 * n; entries appended to m->coll (host_ranks: the ranks on this host). Buffers of the backend of ops:
 * device buffers go through NCCL where every rank has its own GPU, else host-staged MPI, as in
 * build/train. -1 with a message. */
int cost_calib_collectives(const ops_t *ops, const cost_workload *w, const double *sizes, int nsizes, int iters_scale, cost_machine *m,
                           int verbose, char *err, size_t errlen);
/* The same in parts, so that its rounds (iters_scale >= 4: 5, else 1) can be spread over a calibration: _begin
 * makes the groups and the points and warms each up once (NULL with a message, on every rank, when any rank
 * failed); _round times the next round of every point; _end times the rounds left, appends the tables (the
 * median over the rounds of each size) and frees the state (-1 with a message). Every rank calls each. */
typedef struct cost_calib_coll cost_calib_coll;
cost_calib_coll *cost_calib_coll_begin(const ops_t *ops, const cost_workload *w, const double *sizes, int nsizes, int iters_scale,
                                       char *err, size_t errlen);
int cost_calib_coll_rounds(const cost_calib_coll *s);
void cost_calib_coll_round(cost_calib_coll *s);
int cost_calib_coll_end(cost_calib_coll *s, cost_machine *m, int verbose, char *err, size_t errlen);
/* The state freed without the rounds left or the tables (a calibration that stops early; every rank) */
void cost_calib_coll_free(cost_calib_coll *s);
/* One pass of a step's ops in order (ev[0..n), COST_EV_OP events; others skipped), each distinct op on its
 * own one set of buffers, in microseconds, timed after a warm-up pass. together: on every rank at once,
 * the slowest rank's time (collective over MPI_COMM_WORLD); else this rank alone. -1 when buffers cannot
 * be had (on any rank, when together). */
double cost_calib_sequence_us(const ops_t *ops, const cost_event *ev, size_t n, int together);
/* Host time to issue one small op on an asynchronous device (the mean over many, without waiting) */
double cost_calib_launch_us(const ops_t *ops);
/* 1 when cost_calib_collectives runs device collectives over NCCL (every rank has its own GPU), as
 * build/train would (collective over MPI_COMM_WORLD) */
int cost_calib_uses_nccl(const ops_t *ops);
/* Sleep-poll until every rank arrives: a barrier that leaves the cores to a rank that measures */
void cost_calib_idle_barrier(void);
#endif
