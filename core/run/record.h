/* core/run/record.h — the small JSON pieces the run record and the plan share (written atomically by
 * core/common/files.h). The record's fields are docs/formats.md. */
#ifndef MESHSWEEP_RECORD_H
#define MESHSWEEP_RECORD_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "core/engine/mem.h"
#include "core/engine/comm.h"
/* {"params": n, ...} of per-category byte counts */
json_t *record_categories(const uint64_t bytes[MEM_NCAT]);
/* obj.peak, obj.by_category, obj.at_peak, in that order: the memory figures the run record gives for
 * what was measured (memory) and for what was planned (memory.planned) */
void record_peaks(json_t *obj, uint64_t peak, const uint64_t by_category[MEM_NCAT], const uint64_t at_peak[MEM_NCAT]);
/* {"all_gather": {"calls","bytes","ms"}, ...} */
json_t *record_comm(const comm_stats *s);
/* The rank-to-host map of the record's env (core/run/agree.h gathered it): ranks_by_host {host: [ranks]},
 * cores_by_host {host: cores available to the job there}, tp_spans_hosts (bool) */
void record_env_hosts(json_t *env, int tp);
/* Collective (every rank, after MPI_Init; a world of one without MPI): the BLAS library and the kernels
 * it chose on each host, {host: {"library", "core", "coretype_env"}} (the first rank of each host), and
 * *differ = 1 when any two ranks have another library or core (their losses then agree to rounding,
 * not bit for bit). */
json_t *record_gather_blas(int *differ);
/* How the job was launched, into the record's env (rank 0's view): slurm {job_id, step_id,
 * job_nodelist, step_nodelist, cluster, partition, restart_count} from SLURM_* (null outside Slurm;
 * a field the scheduler did not set is null), local_rank_from (the source of the local rank, i.e. of
 * a CUDA rank's GPU: gpus_local_rank), mpi_transports {pml: [...], btl: [...]} (the Open MPI
 * components open after MPI_Init, comm_mpi_components; null for another MPI). */
void record_env_launch(json_t *env, const char *local_rank_from);
/* summary.mfu_share: achieved FLOP/s of the job over the compute the ranks actually had,
 * peak_flops x sum over hosts of min(cores_h, ranks_h) (= peak x min(1, cores/ranks) per rank);
 * mfu is the per-rank summary.mfu (against one core per rank) */
double record_mfu_share(double mfu, int world);
#endif
