/* core/cost/timeline.h — one rank's step as the engine runs it, from its trace and a machine (docs/cost-model.md).
 * Three clocks: the host (issues ops; waits where the engine copies to the host or runs an MPI
 * collective of host memory), the compute stream (ops in order) and the communication stream (the
 * collectives in order; the engine has one, core/engine/comm_nccl.c). Following core/engine/comm.c:
 *   - a blocking collective starts once the compute stream has finished what was issued before it,
 *     and the compute stream waits for its end;
 *   - a started collective (FSDP's prefetch all-gather, the SP re-gather of --sp-activations local)
 *     runs on the communication stream while the compute stream goes on, where the machine's
 *     collectives overlap compute (NCCL), and the compute stream waits for it at comm_wait; where they
 *     do not (MPI on host buffers progresses only inside MPI calls), it runs at the wait;
 *   - on a synchronous device (the CPU) the host is the compute stream.
 * Co-located ranks share the host's compute units (cost_machine_share). The step is when the last of
 * the three clocks stops (core/run/run.c synchronises the device before it stops its clock): the
 * critical path, not a sum. Not here: the events (core/cost/trace.h), their costs (core/cost/machine.h). */
#ifndef MESHSWEEP_COST_TIMELINE_H
#define MESHSWEEP_COST_TIMELINE_H
#include "core/cost/machine.h"
#include "core/cost/trace.h"

/* Where a rank is: its mesh position and how ranks are placed on hosts (consecutive ranks fill a host,
 * as `mpirun --map-by slot` and Slurm's block distribution place them, so TP groups stay inside one). */
typedef struct cost_place {
    int world, tp, rank;
    int ranks_per_host;      /* job ranks per host (the last host may hold fewer); >= world: one host */
    int replicate;           /* HSDP mesh R x S x tp: R (0 or 1: the 2D mesh, dp = S) */
} cost_place;

typedef struct cost_result {
    double step_ms;
    double compute_ms;                        /* time the compute stream is busy (overlap_ms included) */
    double overlap_ms;                        /* of which, what ops lost running beside a collective */
    double class_ms[COST_NCLASS];             /* of which, by op class */
    double op_ms[COST_NOPS];                  /* and by op kind */
    double comm_ms;                           /* time the collectives take */
    double comm_by_ms[COST_NGROUPS][COMM_NKIND];
    double exposed_comm_ms;                   /* step_ms − compute_ms: what compute does not hide */
    double host_issue_ms;                     /* host time spent issuing ops (async devices) */
    double share;                             /* the compute share factor applied (>= 1) */
    int n_ops, n_colls;
} cost_result;

/* The group shape of this rank's group g: its size, its members on this rank's host, and the job's
 * ranks on that host. */
void cost_group_shape(const cost_place *p, int group, int *ranks, int *ranks_per_host, int *host_ranks);

/* Replay trace t on machine m for the rank at p. -1 with one line in err when the machine has no
 * model for one of the collectives. */
int cost_timeline(const cost_trace *t, const cost_machine *m, const cost_place *p, cost_result *r, char *err,
                  size_t errlen);
#endif
