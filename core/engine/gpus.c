/* core/engine/gpus.c — the device table and the budget arithmetic of core/engine/gpus.h.
 *
 * Capacities are what the CUDA runtime reports as the device total (cudaMemGetInfo, or
 * cudaDeviceProp.totalGlobalMem; PyTorch prints it as "GPU 0 has a total capacity of X GiB"), read
 * from public logs, to 0.01 GiB; the driver's own reservation is already outside it. They vary by a
 * few tens of MiB with driver version and ECC, which the 1 GiB default reserve covers.
 * Overheads are typical values for one training rank, not guarantees: CUDA context (with lazy module
 * loading) + cuBLAS/cuBLASLt workspace (NVIDIA's cuBLAS guide recommends 32 MiB on Hopper, 4 MiB
 * before) + NCCL buffers of a TP and a DP communicator. A run on the device measures its own overhead
 * (`--mem-budget auto`); the table serves `--plan --gpu NAME` where no device is at hand. */
#include "core/engine/gpus.h"
#include "core/formats/config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MiB (1024ull * 1024ull)
#define GIB_CENTI(x) ((uint64_t)(x) * 1024ull * 1024ull * 1024ull / 100ull) /* x hundredths of a GiB */

static const gpu_spec GPUS[] = {
    /* NVIDIA H100 80GB HBM3 (SXM): nvidia-smi memory.total 81559 MiB; the runtime's total is
       79.19 GiB ("GPU 0 has a total capacity of 79.19 GiB" in PyTorch OOM reports from H100 80GB
       HBM3 machines; 79.18 also seen), and "78.7 of 79.2 GiB free" right after a framework's CUDA
       start-up on such a machine, i.e. ~0.5 GiB context. Overhead: 512 MiB context + 32 MiB cuBLAS
       workspace (cuBLAS guide, cublasSetWorkspace: 32 MiB recommended on Hopper) + ~480 MiB NCCL
       buffers for two communicators (NCCL_BUFFSIZE 4 MiB per channel and peer) = 1 GiB. */
    {"h100-80gb", "NVIDIA H100 80GB HBM3", GIB_CENTI(7919), 1024 * MiB},
    /* NVIDIA H200 (SXM, 141 GB HBM3e): nvidia-smi memory.total 143771 MiB; the runtime's total is
       139.80 GiB in PyTorch OOM reports from 8xH200 machines (139.81 and 139.72 also seen). A process
       holding only its context shows ~612 MiB in use in the same reports. Overhead as H100 with that
       context: 612 + 32 + 480 MiB. */
    {"h200-141gb", "NVIDIA H200", GIB_CENTI(13980), (612 + 32 + 480) * MiB},
    /* NVIDIA A100-SXM4-80GB: the runtime's total is 79.15 GiB in PyTorch OOM reports from 80 GB A100s
       (79.25 in older PyTorch wording). Overhead: ~450 MiB context + 4 MiB cuBLAS workspace (4 MiB
       recommended before Hopper) + ~480 MiB NCCL ≈ 0.9 GiB (an estimate: context size from typical
       Ampere reports, not a datasheet figure). */
    {"a100-80gb", "NVIDIA A100-SXM4-80GB", GIB_CENTI(7915), (450 + 4 + 480) * MiB},
    /* NVIDIA A100-SXM4-40GB: the runtime's total is 39.39 GiB in PyTorch OOM reports from 40 GB A100s
       (39.38–39.56 seen; the lowest common value taken). Overhead as a100-80gb. */
    {"a100-40gb", "NVIDIA A100-SXM4-40GB", GIB_CENTI(3939), (450 + 4 + 480) * MiB},
};
#define NGPUS ((int)(sizeof GPUS / sizeof *GPUS))
_Static_assert(sizeof GPUS / sizeof *GPUS == 4, "docs/options.md (--gpu) lists every name: update it with the table");

int gpus_count(void) { return NGPUS; }
const gpu_spec *gpus_at(int i) { return i >= 0 && i < NGPUS ? &GPUS[i] : NULL; }

const gpu_spec *gpus_find(const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < NGPUS; i++)
        if (!strcasecmp(name, GPUS[i].name)) return &GPUS[i];
    return NULL;
}

void gpus_names(char *buf, size_t len) {
    size_t n = 0;
    if (len) buf[0] = 0;
    for (int i = 0; i < NGPUS && n < len; i++) {
        int w = snprintf(buf + n, len - n, "%s%s", i ? ", " : "", GPUS[i].name);
        if (w < 0) break;
        n += (size_t)w;
    }
}

int gpus_plan_budget(const gpu_spec *g, uint64_t reserve, uint64_t *budget, char *err, size_t errlen) {
    if (g->usable_bytes <= g->overhead_bytes + reserve) {
        snprintf(err, errlen, "--gpu %s: the reserve (%llu bytes) and the runtime overhead (%llu bytes) leave "
                 "nothing of its %llu bytes", g->name, (unsigned long long)reserve,
                 (unsigned long long)g->overhead_bytes, (unsigned long long)g->usable_bytes);
        return -1;
    }
    *budget = g->usable_bytes - g->overhead_bytes - reserve;
    return 0;
}

int gpus_auto_budget(uint64_t total, uint64_t free_b, uint64_t reserve, gpus_device_mem *out, char *err,
                     size_t errlen) {
    memset(out, 0, sizeof *out);
    out->total = total; out->free_after_setup = free_b; out->reserve = reserve;
    out->runtime_overhead = total > free_b ? total - free_b : 0;
    if (total == 0) { snprintf(err, errlen, "--mem-budget auto: the device reports no memory"); return -1; }
    if (free_b <= reserve) {
        snprintf(err, errlen, "--mem-budget auto: only %llu bytes free on the device after set-up, not more than "
                 "--mem-reserve %llu", (unsigned long long)free_b, (unsigned long long)reserve);
        return -1;
    }
    out->budget = free_b - reserve;
    return 0;
}

void gpus_warm_runtime(const ops_t *ops) {
    if (!ops || !ops->dev_alloc || !ops->matmul_forward) return;
    /* 16x16 of 4-byte elements covers both the fp32 and the bf16 tables (2-byte elements) */
    enum { N = 16 };
    const size_t bytes = (size_t)N * N * 4;
    float *a = ops->dev_alloc(bytes), *w = ops->dev_alloc(bytes), *o = ops->dev_alloc(bytes);
    float *dw = ops->dev_alloc(bytes), *din = ops->dev_alloc(bytes);
    float zero[N * N] = {0};
    ops->from_host(a, zero, sizeof zero); ops->from_host(w, zero, sizeof zero);
    ops->from_host(dw, zero, sizeof zero); ops->from_host(din, zero, sizeof zero);
    ops->matmul_forward(o, a, w, N, N, N, 0);
    if (ops->matmul_backward) ops->matmul_backward(din, dw, o, a, w, N, N, N);
    if (ops->synchronize) ops->synchronize();
    ops->dev_free(a); ops->dev_free(w); ops->dev_free(o); ops->dev_free(dw); ops->dev_free(din);
    if (ops->synchronize) ops->synchronize();
}

int gpus_is_auto(const char *s) { return s && !strcasecmp(s, "auto"); }

int gpus_resolve_budget(const char *mem_budget, const char *mem_reserve, const char *gpu, int plan, int cuda,
                        gpus_budget *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->reserve = GPUS_DEFAULT_RESERVE_BYTES;
    char names[128];
    gpus_names(names, sizeof names);
    if (gpu && !(out->gpu = gpus_find(gpu))) {
        snprintf(err, errlen, "--gpu '%s' is not a known device (known: %s)", gpu, names);
        return -1;
    }
    int is_auto = gpus_is_auto(mem_budget);
    if (mem_reserve) {
        if (parse_size(mem_reserve, &out->reserve)) {
            snprintf(err, errlen, "--mem-reserve '%s' is not a size (examples: 512MiB, 1GiB)", mem_reserve);
            return -1;
        }
        if (!is_auto && !out->gpu) {
            snprintf(err, errlen, "--mem-reserve applies only with --mem-budget auto or --gpu NAME");
            return -1;
        }
    }
    if (mem_budget && !is_auto) {
        if (parse_size(mem_budget, &out->budget) || out->budget == 0) {
            snprintf(err, errlen, "--mem-budget '%s' is not a size or auto (examples: 96MiB, 80GB, 80GiB, auto)", mem_budget);
            return -1;
        }
        if (out->gpu) {
            snprintf(err, errlen, "--mem-budget %s and --gpu %s are two budgets: give one (--gpu plans against "
                     "what that device holds)", mem_budget, gpu);
            return -1;
        }
        return 0;
    }
    if (plan) {
        if (is_auto && !out->gpu) {
            snprintf(err, errlen, "--plan --mem-budget auto needs --gpu NAME (no device is measured in a plan; known: %s)", names);
            return -1;
        }
        if (out->gpu) return gpus_plan_budget(out->gpu, out->reserve, &out->budget, err, errlen);
        return 0;
    }
    if ((is_auto || out->gpu) && !cuda) {
        snprintf(err, errlen, "%s needs --backend cuda (or --plan --gpu NAME to plan for a GPU)",
                 is_auto ? "--mem-budget auto" : "--gpu");
        return -1;
    }
    out->is_auto = is_auto || out->gpu != NULL;
    return 0;
}

int gpus_measure_device(const engine_t *E, int ranks_per_gpu, gpus_budget *b, gpus_device_mem *m, char *err,
                        size_t errlen) {
    memset(m, 0, sizeof *m);
    if (E->dev->host_memory) {
        snprintf(err, errlen, "--mem-budget auto: the %s backend has no device memory to measure", E->dev->name);
        return -1;
    }
    gpus_warm_runtime(E->ops);
    size_t f = 0, t = 0;
    E->dev->mem_info(&f, &t);
    gpus_device_mem d;
    if (gpus_auto_budget(t, f, b->reserve, &d, err, errlen)) {
        if (!b->is_auto) { *m = d; return 0; } /* a fixed budget: only the figures are wanted */
        *m = d;
        return -1;
    }
    if (ranks_per_gpu > 1) d.budget /= (uint64_t)ranks_per_gpu;
    *m = d;
    if (b->is_auto) b->budget = d.budget;
    return 0;
}

/* a launcher variable holding a local rank: digits only, in [0, local_size); else -1 */
static int env_local_rank(const char *name, int local_size) {
    const char *v = getenv(name);
    if (!v || !*v || strlen(v) > 9 || strspn(v, "0123456789") != strlen(v)) return -1;
    int r = atoi(v);
    return r < local_size ? r : -1;
}

int gpus_local_rank(int mpi_local_rank, int local_size, const char **from) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        int r = env_local_rank(vars[i], local_size);
        if (r >= 0) {
            if (from) *from = vars[i];
            return r;
        }
    }
    if (from) *from = "mpi";
    return mpi_local_rank;
}
