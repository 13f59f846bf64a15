/* tests/test_gpus.c — the device table (core/job/catalog.c), the budget arithmetic (core/job/job.c) and
 * the device measurement (core/engine/gpus.c): every --gpu
 * name docs/options.md lists is in the table (any case), capacities are what the runtime reports (a little under the marketing
 * size, never over it), the plan budget is usable − overhead − reserve, `auto` is free − reserve,
 * and a reserve that takes everything is an error with a reason, never a zero or wrapped budget;
 * the local rank (the GPU of a rank) is the launcher's when it gave one that fits the host. */
#include "tests/check.h"
#include "core/engine/gpus.h"
#include "core/job/job.h"
#include "core/engine/engine.h"
#include <stdlib.h>
#include <string.h>

#define GiB (1024ull * 1024ull * 1024ull)

/* the resolution of --mem-budget, --mem-reserve, --gpu in a plan or a run on a backend */
static int resolve(const char *mb, const char *mr, const char *gpu, int plan, int cuda, job_budget *r, char *err, size_t len) {
    job_t j;
    job_init(&j);
    j.o.mem_budget = mb; j.o.mem_reserve = mr; j.o.gpu = gpu; j.o.plan = plan; j.o.backend = cuda ? "cuda" : "cpu";
    return job_resolve_budget(&j.o, r, err, len);
}
static int ngpus(void) { int n = 0; while (catalog_gpu_at(n)) n++; return n; }

int main(void) {
    char err[256], names[256];
    CHECK(ngpus() == 4, "gpus_four_devices", "%d", ngpus());
    catalog_gpu_names(names, sizeof names);
    CHECK(!strcmp(names, "h100-80gb, h200-141gb, a100-80gb, a100-40gb"), "gpus_names", "'%s'", names);
    const char *nm[] = {"h100-80gb", "H200-141GB", "a100-80gb", "a100-40gb"};
    /* runtime totals: under the marketing size in GB (10^9) and within 3% below it in GiB terms */
    double lo[] = {79.0, 139.5, 79.0, 39.2}, hi[] = {79.5, 140.0, 79.5, 39.6};
    for (int i = 0; i < 4; i++) {
        const catalog_gpu *g = catalog_gpu_find(nm[i]);
        char n[64];
        snprintf(n, sizeof n, "gpus_find_%s", nm[i]);
        CHECK(g != NULL, n, "not found");
        if (!g) continue;
        double gib = (double)g->usable_bytes / GiB;
        snprintf(n, sizeof n, "gpus_usable_%s_as_the_runtime_reports", g->name);
        CHECK(gib > lo[i] && gib < hi[i], n, "%.3f GiB", gib);
        snprintf(n, sizeof n, "gpus_overhead_%s_plausible", g->name);
        CHECK(g->overhead_bytes >= 256ull << 20 && g->overhead_bytes <= 4 * GiB, n, "%llu", (unsigned long long)g->overhead_bytes);
        uint64_t b = 0;
        snprintf(n, sizeof n, "gpus_plan_budget_%s", g->name);
        CHECK(job_plan_budget(g, JOB_DEFAULT_RESERVE_BYTES, &b, err, sizeof err) == 0 &&
              b == g->usable_bytes - g->overhead_bytes - JOB_DEFAULT_RESERVE_BYTES, n, "%llu", (unsigned long long)b);
    }
    CHECK(catalog_gpu_find("h100") == NULL && catalog_gpu_find("") == NULL && catalog_gpu_find(NULL) == NULL, "gpus_unknown_is_null", "found");
    uint64_t b = 7;
    const catalog_gpu *a40 = catalog_gpu_find("a100-40gb");
    CHECK(job_plan_budget(a40, 40 * GiB, &b, err, sizeof err) == -1 && b == 7 && strstr(err, "a100-40gb"),
          "gpus_plan_budget_reserve_too_big", "b %llu err '%s'", (unsigned long long)b, err);
    gpus_device_mem m;
    CHECK(gpus_auto_budget(80 * GiB, 78 * GiB, GiB, &m, err, sizeof err) == 0 && m.budget == 77 * GiB &&
          m.runtime_overhead == 2 * GiB && m.reserve == GiB && m.total == 80 * GiB && m.free_after_setup == 78 * GiB,
          "gpus_auto_budget_free_minus_reserve", "budget %llu overhead %llu", (unsigned long long)m.budget,
          (unsigned long long)m.runtime_overhead);
    CHECK(gpus_auto_budget(80 * GiB, GiB, GiB, &m, err, sizeof err) == -1 && strstr(err, "--mem-reserve"),
          "gpus_auto_budget_reserve_takes_all", "'%s'", err);
    CHECK(gpus_auto_budget(0, 0, GiB, &m, err, sizeof err) == -1, "gpus_auto_budget_no_device_memory", "accepted");
    CHECK(job_is_auto("auto") && job_is_auto("AUTO") && !job_is_auto("80GiB") && !job_is_auto(NULL),
          "gpus_is_auto", "wrong");
    /* option resolution: --mem-budget SIZE|auto, --mem-reserve, --gpu, in plan / CUDA run / CPU run */
    job_budget r;
    const catalog_gpu *h = catalog_gpu_find("h100-80gb");
    uint64_t hb = h->usable_bytes - h->overhead_bytes - JOB_DEFAULT_RESERVE_BYTES;
    CHECK(resolve(NULL, NULL, "h100-80gb", 1, 0, &r, err, sizeof err) == 0 && r.budget == hb && r.gpu == h && !r.is_auto,
          "gpus_resolve_plan_gpu", "%llu vs %llu: %s", (unsigned long long)r.budget, (unsigned long long)hb, err);
    CHECK(resolve("auto", NULL, "h100-80gb", 1, 0, &r, err, sizeof err) == 0 && r.budget == hb,
          "gpus_resolve_plan_gpu_auto_same", "%llu", (unsigned long long)r.budget);
    CHECK(resolve(NULL, "2GiB", "h100-80gb", 1, 0, &r, err, sizeof err) == 0 && r.budget == hb - GiB && r.reserve == 2 * GiB,
          "gpus_resolve_plan_gpu_reserve", "%llu", (unsigned long long)r.budget);
    CHECK(resolve("auto", NULL, NULL, 1, 0, &r, err, sizeof err) == -1 && strstr(err, "--gpu"),
          "gpus_resolve_plan_auto_needs_gpu", "'%s'", err);
    CHECK(resolve("80GB", NULL, "h100-80gb", 1, 0, &r, err, sizeof err) == -1 && strstr(err, "two budgets"),
          "gpus_resolve_size_and_gpu_refused", "'%s'", err);
    CHECK(resolve("auto", NULL, NULL, 0, 0, &r, err, sizeof err) == -1 && strstr(err, "--backend cuda"),
          "gpus_resolve_auto_on_cpu_refused", "'%s'", err);
    CHECK(resolve(NULL, NULL, "a100-40gb", 0, 0, &r, err, sizeof err) == -1 && strstr(err, "--backend cuda"),
          "gpus_resolve_gpu_on_cpu_run_refused", "'%s'", err);
    CHECK(resolve("auto", "512MiB", NULL, 0, 1, &r, err, sizeof err) == 0 && r.is_auto && r.budget == 0 &&
          r.reserve == 512ull << 20, "gpus_resolve_auto_on_cuda_measures", "auto %d budget %llu", r.is_auto, (unsigned long long)r.budget);
    CHECK(resolve(NULL, NULL, "h200-141gb", 0, 1, &r, err, sizeof err) == 0 && r.is_auto,
          "gpus_resolve_gpu_on_cuda_run_is_auto", "%d", r.is_auto);
    CHECK(resolve("96MiB", NULL, NULL, 0, 0, &r, err, sizeof err) == 0 && r.budget == 96ull << 20 && !r.is_auto,
          "gpus_resolve_size", "%llu", (unsigned long long)r.budget);
    CHECK(resolve("96MiB", "1GiB", NULL, 0, 0, &r, err, sizeof err) == -1 && strstr(err, "--mem-reserve"),
          "gpus_resolve_reserve_without_auto_refused", "'%s'", err);
    CHECK(resolve("auto", "lots", NULL, 0, 1, &r, err, sizeof err) == -1 && strstr(err, "'lots'"),
          "gpus_resolve_bad_reserve", "'%s'", err);
    CHECK(resolve("0", NULL, NULL, 0, 0, &r, err, sizeof err) == -1 && strstr(err, "auto"),
          "gpus_resolve_bad_size_names_auto", "'%s'", err);
    CHECK(resolve(NULL, NULL, "v100", 1, 0, &r, err, sizeof err) == -1 && strstr(err, "h200-141gb"),
          "gpus_resolve_unknown_gpu_lists_known", "'%s'", err);
    engine_t E;
    if (engine_init(&E, &device_cpu, DTYPE_F32, err, sizeof err)) { printf("FAIL engine_init: %s\n", err); return 1; }
#ifndef MESHSWEEP_CUDA
    gpus_device_mem dm;
    CHECK(gpus_measure_device(&E, 1, r.reserve, r.is_auto, &r.budget, &dm, err, sizeof err) == -1, "gpus_measure_without_cuda_build", "accepted");
#endif

    /* the warm-up belongs to the runtime's overhead, not to the tracked bytes the budget caps */
    gpus_warm_runtime(E.ops);
    CHECK(mem_get_stats(&E.mem)->total_peak == 0, "gpus_warm_runtime_outside_tracked_allocator", "%llu tracked",
          (unsigned long long)mem_get_stats(&E.mem)->total_peak);
    engine_release(&E);

    /* the local rank: Open MPI's variable, then Slurm's, then MPI's own count; garbage or a number
     * past the ranks on this host is not taken */
    const char *from = NULL;
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK"); unsetenv("SLURM_LOCALID");
    CHECK(gpus_local_rank(2, 4, &from) == 2 && !strcmp(from, "mpi"), "gpus_local_rank_mpi_without_launcher", "%s", from);
    setenv("SLURM_LOCALID", "3", 1);
    CHECK(gpus_local_rank(1, 4, &from) == 3 && !strcmp(from, "SLURM_LOCALID"), "gpus_local_rank_slurm", "%s", from);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1); /* mpirun inside an allocation: Open MPI's number wins */
    CHECK(gpus_local_rank(1, 4, &from) == 0 && !strcmp(from, "OMPI_COMM_WORLD_LOCAL_RANK"), "gpus_local_rank_openmpi_first", "%s", from);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "4", 1); setenv("SLURM_LOCALID", "1x", 1);
    CHECK(gpus_local_rank(2, 4, &from) == 2 && !strcmp(from, "mpi"), "gpus_local_rank_out_of_range_or_garbage", "%s", from);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "", 1); setenv("SLURM_LOCALID", "1", 1);
    CHECK(gpus_local_rank(0, 2, NULL) == 1, "gpus_local_rank_empty_skipped", "not 1");
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK"); unsetenv("SLURM_LOCALID");
    return check_exit();
}
