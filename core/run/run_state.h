/* core/run/run_state.h — the state of one training run, shared by the files of core/run/run*: run.c (the
 * run in the order it happens) and run_record.c (the run record of docs/formats.md and the resolved
 * configuration the ranks compare). Private to those files; the interface is core/run/run.h. */
#ifndef MESHSWEEP_RUN_STATE_H
#define MESHSWEEP_RUN_STATE_H
#include <jansson.h>
#include <stdint.h>

#include "core/engine/comm.h"
#include "core/engine/engine.h"
#include "core/engine/gpus.h"
#include "core/engine/mem.h"
#include "core/engine/mesh.h"
#include "core/engine/model.h"
#include "core/engine/optim.h"
#include "core/formats/config.h"
#include "core/formats/data.h"
#include "core/formats/safetensors.h"
#include "core/job/job.h"
#include "core/run/agree.h"
#include "core/run/run.h"
#include "core/run/run_predict.h"
#include "kernels/kernels.h"

typedef struct run {
    job_t J;                     /* the configuration (core/job/job.h): options, model, mesh, batch, budget */
    const char *parse_error;     /* the command line did not parse on this rank */
    int rank0, mpi;              /* this rank speaks for the run; MPI is started */
    json_t *steps, *evals;
    double *step_ms;
    int nsteps_done;
    double flops_per_token, peak_flops;
    mem_stats planned;
    int have_plan;
    const char *comm_name;   /* what carried the collectives: mpi, mpi-staged, nccl */
    int64_t dev_total, dev_used; /* CUDA: device memory total and in use at the end (runtime included) */
    gpus_device_mem dev;         /* CUDA: the device once context, cuBLAS and NCCL exist (rank 0's) */
    int64_t pool_reserved;       /* CUDA: the most the stream-ordered pool held (reserved bytes) */
    json_t *hosts;               /* distinct host names of the ranks */
    const char *local_rank_from; /* where this rank's local rank (its GPU) came from (gpus_local_rank) */
    json_t *blas_by_host;        /* the BLAS library and kernels of each host (record_gather_blas) */
    int blas_differ;             /* two ranks have another BLAS library or kernels */
    /* the engine of a run */
    int rank, world, use_nccl, have_eval;
    data_file train, val;
    st_file stf;
    comm_group tpg, dpg, wg;
    comm_group shg, repg;        /* HSDP (--replicate > 1): the shard and replica groups; unused at R = 1 */
    engine_t E;                  /* the live engine: device, op table, compute precision, arena, groups' context */
    model_t M;
    optim_cfg oc;
    int32_t *in, *tg;            /* one batch of tokens and targets [B*T] */
    run_prediction pred;         /* the predicted step (core/run/run_predict.h) */
    char why[4096];       /* why the run diverged or --save failed (the record's error) */
} run_t;


/* The run record (schema meshsweep.run/1), written by rank 0 to --out atomically; peaks: max over
 * ranks per category (NULL: zeros). 0, or -1 when it could not be written (said unless quiet). */
int run_write_record(run_t *R, const char *status, const char *error, const uint64_t *peaks, uint64_t total_peak,
                     const uint64_t *at_peak, int quiet);
#endif
