/* core/cost/machine.h — what each event of a step costs on one machine (docs/cost-model.md): the machine model,
 * one JSON file (schema meshsweep.machine/1, every field in docs/cost-model.md), read strictly.
 *   compute   GEMMs from a measured table over shapes (nearest measured shapes, by rate), or peak ×
 *             an efficiency by GEMM size; every other op from measured points (time against its
 *             bytes, or FLOPs for attention), or bytes / memory bandwidth; whether the device runs
 *             asynchronously from the host and what issuing one op costs the host
 *   hosts     compute units (cores, GPUs) per host and how ranks beyond them share one
 *   comm      each collective kind per group shape (ranks, ranks per host, job ranks on the host) as
 *             latency + bytes / bus bandwidth (nccl-tests' busbw), or a measured table of times by
 *             bytes; whether a started collective progresses while the rank computes
 * Machines come from `make calibrate` (this host, measured: bench/calibrate.c) or are shipped for
 * GPUs (core/cost/machine_gpus.c, each number with its source or marked as an estimate).
 * Not here: the step's events (core/cost/trace.h) or their timeline (core/cost/timeline.h). */
#ifndef MESHSWEEP_COST_MACHINE_H
#define MESHSWEEP_COST_MACHINE_H
#include <jansson.h>
#include <stddef.h>
#include "core/cost/trace.h"

#define COST_MACHINE_SCHEMA "meshsweep.machine/1"
#define COST_MAX_POINTS 96
#define COST_MAX_EFF 16

/* measured points (x = bytes, or FLOPs for attention; us), sorted by x */
typedef struct cost_curve { int n; double x[COST_MAX_POINTS], us[COST_MAX_POINTS]; } cost_curve;

typedef struct cost_gemm_point { int op; int64_t m, n, k; double us; } cost_gemm_point;

enum { COST_SCOPE_ANY = 0, COST_SCOPE_INTRA = 1, COST_SCOPE_INTER = 2 };

typedef struct cost_coll {
    int kind;                  /* comm_kind */
    int ranks, ranks_per_host; /* the group shape it was measured on; 0: any group of its scope */
    int host_ranks;            /* the job's ranks on that host when measured; 0: any */
    int scope;                 /* COST_SCOPE_INTRA (all ranks on one host) or _INTER (the group spans hosts) */
    int host;                  /* 1: host-memory collectives over MPI (the f64 all-reduces of device runs) */
    int started;               /* 1: measured as the engine's started collective (comm_*_start, then comm_wait) */
    double latency_us, latency_per_step_us, busbw_gbs;
    double half_bytes;         /* > 0: busbw climbs with the message as nccl-tests curves do,
                                  busbw_gbs / (1 + sqrt(half_bytes / bytes)): half of it at half_bytes */
    int npts;                  /* measured times by bytes (optional) */
    double bytes[COST_MAX_POINTS], us[COST_MAX_POINTS];
} cost_coll;

typedef struct cost_machine {
    char name[64], description[256];
    char calibrated[32], host[64], build[128];   /* calibrated machines; "" otherwise */
    int cores;                                   /* calibrated: cores of the host; 0 otherwise */
    /* compute */
    int async;                /* the device runs behind the host (CUDA); 0: the host waits for every op (CPU) */
    double launch_us;         /* host time to issue one op (async devices) */
    double peak_tflops;       /* dense peak of one compute unit, for MFU and the fallbacks */
    int n_eff;                /* GEMM efficiency (fraction of peak) by GEMM FLOPs, piecewise linear in log FLOPs */
    double eff_flops[COST_MAX_EFF], eff[COST_MAX_EFF];
    double attention_efficiency;
    double attention_bwd_efficiency;   /* the backward's own fraction of peak (0: as the forward) */
    double memory_gbs, memory_efficiency;   /* bandwidth-bound ops: bytes / (memory_gbs · efficiency) */
    double host_link_gbs;     /* to_host / from_host copies */
    double sequence_factor;   /* whole steps' ops in order against the sum of the table's figures for them (every
                                 op's time is multiplied by it; 0 or absent: 1) */
    int ngemm;
    cost_gemm_point *gemm;    /* measured GEMMs (owned) */
    cost_curve ops[COST_NOPS];/* measured non-GEMM ops */
    /* hosts */
    int cores_per_host;
    int calibrated_ranks;     /* ranks of the host computing at once when the ops were measured (>= 1; 1: alone) */
    double oversubscribed_efficiency;   /* ranks beyond the cores: compute × max(1, ranks / (cores · this)) */
    /* comm */
    int overlap;              /* a started collective progresses while the rank computes (NCCL streams) */
    double overlap_slowdown;  /* compute running while a collective is in flight takes (1 + this) x as long: the
                                 collective's kernels hold SMs and memory bandwidth (0: none, the CPU files) */
    int nic_per_rank;         /* each rank of a host has its own network port (GPU hosts: one NIC per GPU): a group
                                 spanning hosts with k ranks on each runs k rings at once, its bus bandwidth
                                 min(k × the network's, the host's own for that kind); 0: one port per host */
    int ncoll;
    cost_coll *coll;          /* owned */
    json_t *sources;          /* {"field": "source, or estimate: why"} (owned; may be NULL) */
} cost_machine;

void cost_machine_free(cost_machine *m);
int cost_machine_copy(cost_machine *dst, const cost_machine *src);

/* Parse a machine from JSON text; origin names it in messages. -1 with one line "ORIGIN: FIELD: problem"
 * in err on a malformed file, an unknown or missing field, or a zero or negative rate. */
int cost_machine_parse(const char *text, const char *origin, cost_machine *m, char *err, size_t errlen);
int cost_machine_load(const char *path, cost_machine *m, char *err, size_t errlen);
/* The machine as JSON (new reference), in the form cost_machine_parse reads. */
json_t *cost_machine_to_json(const cost_machine *m);
/* A shipped GPU model by --machine / --gpu name (h100-80gb, h200-141gb, a100-80gb); -1 if none. */
int cost_machine_shipped(const char *name, cost_machine *m);
/* "h100-80gb, h200-141gb, a100-80gb" */
void cost_machine_shipped_names(char *buf, size_t len);
/* Field paths of m whose source says "estimate" (a JSON array, new reference). */
json_t *cost_machine_estimates(const cost_machine *m);

/* Compute time of one op on one unit that has it alone, in microseconds. */
double cost_machine_op_us(const cost_machine *m, const cost_event *e);
/* Compute share factor: ranks on a host with `cores` units; >= 1 (1 when the ranks fit). */
double cost_machine_share(const cost_machine *m, int host_ranks);
/* What an op measured with calibrated_ranks computing at once takes with host_ranks doing so:
 * share(host_ranks) / share(calibrated_ranks). (In a step, times also sequence_factor: core/cost/timeline.c.) */
double cost_machine_op_scale(const cost_machine *m, int host_ranks);
/* Time of one collective in microseconds for a group of `ranks` with `ranks_per_host` of them on this
 * rank's host and `host_ranks` job ranks there; flags: COST_COLL_HOST (on host memory), COST_COLL_STARTED
 * (started and waited for later); -1 with a message when the machine has no model for it. */
enum { COST_COLL_HOST = 1, COST_COLL_STARTED = 2 };
double cost_machine_coll_us(const cost_machine *m, int kind, double bytes, int ranks, int ranks_per_host,
                            int host_ranks, int flags, char *err, size_t errlen);
/* nccl-tests' bus-bandwidth factor and the ring steps of a collective over n ranks */
double cost_busbw_factor(int kind, int n);
int cost_ring_steps(int kind, int n);
/* value of a curve at x: linear between measured points, the rate of the largest point above them,
 * the first segment's line (never below 0) below them */
double cost_curve_at(const cost_curve *c, double x);
#endif
