/* core/run/record.c — see record.h. */
#include "core/run/record.h"
#include "core/run/agree.h"
#include "core/common/cleanup.h"
#include "kernels/kernels.h"
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

json_t *record_categories(const uint64_t bytes[MEM_NCAT]) {
    json_t *o = json_object();
    for (int c = 0; c < MEM_NCAT; c++) json_object_set_new(o, mem_cat_names[c], json_integer((json_int_t)bytes[c]));
    return o;
}

void record_peaks(json_t *obj, uint64_t peak, const uint64_t by_category[MEM_NCAT], const uint64_t at_peak[MEM_NCAT]) {
    json_object_set_new(obj, "peak", json_integer((json_int_t)peak));
    json_object_set_new(obj, "by_category", record_categories(by_category));
    json_object_set_new(obj, "at_peak", record_categories(at_peak));
}

json_t *record_comm(const comm_stats *s) {
    json_t *o = json_object();
    for (int k = 0; k < COMM_NKIND; k++)
        json_object_set_new(o, comm_kind_names[k], json_pack("{s:I, s:I, s:f}", "calls", (json_int_t)s->calls[k],
                                                             "bytes", (json_int_t)s->bytes[k], "ms", s->ms[k]));
    return o;
}

void record_env_hosts(json_t *env, int tp) {
    json_object_set_new(env, "ranks_by_host", agree_ranks_by_host());
    json_object_set_new(env, "cores_by_host", agree_cores_by_host());
    json_object_set_new(env, "tp_spans_hosts", json_boolean(agree_tp_spans_hosts(tp)));
}

json_t *record_gather_blas(int *differ) {
    enum { LEN = 256 };
    char mine[LEN];
    const char *env = getenv("OPENBLAS_CORETYPE");
    snprintf(mine, sizeof mine, "%.180s|%.40s|%.30s", cpu_blas_config(), cpu_blas_core(), env ? env : "");
    int world = agree_world(), on = 0, off = 0;
    MPI_Initialized(&on);
    if (on) MPI_Finalized(&off);
    char *all = calloc((size_t)world, LEN);
    *differ = 0;
    if (!all) mem_host_failed("the BLAS map of the ranks", (size_t)world * LEN);
    json_t *o = json_object();
    if (on && !off && world > 1) MPI_Allgather(mine, LEN, MPI_CHAR, all, LEN, MPI_CHAR, MPI_COMM_WORLD);
    else memcpy(all, mine, LEN);
    char first[LEN] = ""; /* rank 0's "library|core" */
    for (int r = 0; r < world; r++) {
        char *lib = all + (size_t)r * LEN, *core = strchr(lib, '|'), *ct = core ? strchr(core + 1, '|') : NULL;
        if (!core || !ct) continue;
        *ct++ = 0;
        if (r == 0) snprintf(first, sizeof first, "%s", lib);
        else if (strcmp(first, lib)) *differ = 1;
        *core++ = 0;
        const char *h = agree_host_of(r);
        if (json_object_get(o, h)) continue;
        json_object_set_new(o, h, json_pack("{s:s, s:s, s:o}", "library", lib, "core", core, "coretype_env",
                                            *ct ? json_string(ct) : json_null()));
    }
    free(all);
    return o;
}

static json_t *env_or_null(const char *name) {
    const char *v = getenv(name);
    return v && *v ? json_string(v) : json_null();
}

/* "a,b,c" as ["a", "b", "c"] */
static json_t *str_list(const char *s) {
    json_t *a = json_array();
    while (s && *s) {
        const char *e = strchr(s, ',');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        json_array_append_new(a, json_stringn(s, n));
        s = e ? e + 1 : NULL;
    }
    return a;
}

void record_env_launch(json_t *env, const char *local_rank_from) {
    json_t *sl = json_null();
    if (getenv("SLURM_JOB_ID")) {
        static const char *const f[][2] = {{"job_id", "SLURM_JOB_ID"}, {"step_id", "SLURM_STEP_ID"},
                                           {"job_nodelist", "SLURM_JOB_NODELIST"}, {"step_nodelist", "SLURM_STEP_NODELIST"},
                                           {"cluster", "SLURM_CLUSTER_NAME"}, {"partition", "SLURM_JOB_PARTITION"},
                                           {"restart_count", "SLURM_RESTART_COUNT"}};
        sl = json_object();
        for (size_t i = 0; i < sizeof f / sizeof *f; i++) json_object_set_new(sl, f[i][0], env_or_null(f[i][1]));
    }
    json_object_set_new(env, "slurm", sl);
    json_object_set_new(env, "local_rank_from", local_rank_from ? json_string(local_rank_from) : json_null());
    char pml[256], btl[256];
    json_t *tr = json_null();
    if (comm_mpi_components("pml", pml, sizeof pml) > 0)
        tr = json_pack("{s:o, s:o}", "pml", str_list(pml), "btl", comm_mpi_components("btl", btl, sizeof btl) > 0 ? str_list(btl) : json_array());
    json_object_set_new(env, "mpi_transports", tr);
}

double record_mfu_share(double mfu, int world) {
    /* sum over hosts of min(cores, ranks), counted once per host at its first rank */
    double had = 0;
    for (int r = 0; r < world; r++) {
        int first = 1;
        for (int q = 0; q < r && first; q++) first = strcmp(agree_host_of(q), agree_host_of(r)) != 0;
        if (!first) continue;
        int n = agree_ranks_on_host(r), c = agree_cores_on_host(r);
        had += n < c ? n : c;
    }
    return had > 0 ? mfu * world / had : 0;
}
