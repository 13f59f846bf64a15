/* tests/test_comm_nccl_emu.cu — the streams and events of core/engine/comm_nccl.c, run on the host emulator's
 * CUDA runtime and NCCL (tests/emu/cuda_emu.cuh, nccl_emu.cuh) by 2 MPI ranks, built and run by
 * tests/t_cuda_engine_emu.sh.
 *
 * What it is: two communicators over the same two ranks, one "TP" (critical) and one "DP", as the
 * engine makes them. order: a kernel fills x and z on the compute stream; x is all-reduced on TP, an
 * all-gather of z is started on DP (an FSDP prefetch), a kernel doubles x into w, the compute stream
 * waits for the gather; the host reads the gathered y and w. The emulator runs the streams'
 * queued work in an order drawn from its seed, so each of 8 seeds is one interleaving: every one must
 * give the right w and y. With --count-wrong the program only prints how many seeds gave a wrong
 * result: t_cuda_engine_emu.sh runs it so against copies of comm_nccl.c with one event wait removed
 * (a collective's wait for the compute stream; the compute stream's wait for a blocking collective;
 * its wait for a started one), and requires wrong results there — so the test can see a missing wait.
 * prefetch: rank 0 starts its DP all-gather and then all-reduces on TP and waits for that result on
 * the host, while rank 1 starts its gather only after its own all-reduce is done: rank 0's TP
 * collective can only complete if it is not queued behind its own gather, i.e. if TP traffic has a
 * stream of its own. On one shared NCCL stream this deadlocks (the script's timeout fails it).
 * serial (--serial, with MESHSWEEP_EMU_NCCL_SERIAL=1: the device runs one collective at a time, in
 * the order this rank issued them over both communicators): the order scenario, which issues TP then
 * DP on both ranks, stays right for every seed — one issue order kept by every rank does not depend
 * on two NCCL kernels running side by side. --serial --swap issues them in the other order on rank 1
 * only and must hang (the script's timeout is the expected outcome): what a GPU can do when ranks
 * issue two communicators' collectives in different orders (docs/gpu.md#gpu-backend). The prefetch
 * scenario is such a swap on purpose (it proves the streams are separate) and is not run serially.
 * reduce-scatter: the started reduce-scatter of FSDP's gradient (comm_nccl_reduce_scatter_start) done as
 * fsdp does it: the input filled on the compute stream, the collective started, the input freed at once
 * through ops_cuda's pool, a buffer of its size allocated and overwritten on the compute stream (it may get
 * the freed memory only once the collective has read it: cuda_free_after), then the wait; for each seed the
 * result must equal, bit for bit, the blocking reduce-scatter's of the same input, and the emulator must
 * report no freed memory in use. With --count-wrong a copy of comm_nccl.c without cuda_free_after must give
 * wrong results or emulator errors for some seed.
 * --swap without --serial issues rank 1's order scenario swapped and runs nothing else: with
 * MESHSWEEP_EMU_NCCL_LOG the two ranks' issue logs must then differ (t_cuda_engine_emu checks that its
 * comparison of logs can fail).
 * What it is not: a timing or priority model (the emulator gives the TP stream's priority no effect).
 */
#include <cuda_runtime.h> /* the emulator (-Itests/emu/include) */
#include "core/engine/comm_nccl.h"
extern "C" {
#include "kernels/kernels.h" /* ops_cuda: its pool's dev_alloc / dev_free, as the engine allocates */
}
#include "tests/check.h"

#include <mpi.h>

#define N 64
#define SEEDS 8

static void fill_kernel(float *x, float *z, float v) {
    for (unsigned i = threadIdx.x; i < N; i += blockDim.x) {
        x[i] = v + (float)i;
        z[i] = 10.0f * v + (float)i;
    }
}
static void twice_kernel(float *w, const float *x) {
    for (unsigned i = threadIdx.x; i < N; i += blockDim.x) w[i] = 2.0f * x[i];
}
#define ON_COMPUTE(kernel, ...) \
    emu_launch(dim3(1), dim3(32), 0, (cudaStream_t)0, #kernel, [](auto... a_) { kernel(a_...); }, __VA_ARGS__)

static int g_rank;
static void *g_tp, *g_dp;

static float *dev(size_t n) {
    void *p = NULL;
    if (cudaMalloc(&p, n * sizeof(float)) != cudaSuccess) { fprintf(stderr, "cudaMalloc failed\n"); exit(1); }
    return (float *)p;
}
/* w = 2·Σ_ranks x and y = both ranks' z: 1 when this rank's results are right */
static int results_right(const float *w, const float *y) {
    float hw[N], hy[2 * N];
    cudaMemcpy(hy, y, sizeof hy, cudaMemcpyDeviceToHost); /* first: right after the wait for the gather */
    cudaMemcpy(hw, w, sizeof hw, cudaMemcpyDeviceToHost);
    int ok = 1;
    for (int i = 0; i < N; i++) {
        ok &= hw[i] == 2.0f * ((1.0f + (float)i) + (2.0f + (float)i));
        for (int r = 0; r < 2; r++) ok &= hy[r * N + i] == 10.0f * (float)(r + 1) + (float)i;
    }
    return ok;
}

/* one interleaving of the order scenario; 1 when right on this rank. swap: rank 1 issues the DP
 * gather before the TP all-reduce (an order the ranks do not share) */
static int order_case(uint64_t seed, int swap) {
    emu_set_seed(seed * 1000 + (uint64_t)g_rank);
    float *x = dev(N), *z = dev(N), *w = dev(N), *y = dev(2 * N);
    ON_COMPUTE(fill_kernel, x, z, (float)(g_rank + 1));
    void *ev = NULL;
    if (swap && g_rank == 1) comm_nccl_all_gather(g_dp, y, z, N, 4, &ev);
    comm_nccl_all_reduce(g_tp, x, N, 0, 4);
    if (!(swap && g_rank == 1)) comm_nccl_all_gather(g_dp, y, z, N, 4, &ev); /* started, as the next unit's prefetch */
    ON_COMPUTE(twice_kernel, w, (const float *)x);
    comm_nccl_wait(ev);
    const int ok = results_right(w, y);
    cudaDeviceSynchronize();
    cudaFree(x); cudaFree(z); cudaFree(w); cudaFree(y);
    return ok;
}

static void rs_fill_kernel(float *b, float v) {
    for (unsigned i = threadIdx.x; i < 2 * N; i += blockDim.x) b[i] = v + 0.37f * (float)i;
}
static void overwrite_kernel(float *b) {
    for (unsigned i = threadIdx.x; i < 2 * N; i += blockDim.x) b[i] = -1e30f;
}
/* one interleaving of the reduce-scatter scenario (see the top): 1 when the started reduce-scatter equals
 * the blocking one bit for bit and the emulator saw no misuse of freed memory */
static int rs_case(uint64_t seed) {
    emu_set_seed(seed * 1000 + 500 + (uint64_t)g_rank);
    const uint64_t errors = emu_state.errors;
    const float v = 0.1f * (float)(g_rank + 1);
    float *ref = dev(N), *got = dev(N), *b0 = (float *)ops_cuda.dev_alloc(2 * N * sizeof(float));
    ON_COMPUTE(rs_fill_kernel, b0, v);
    comm_nccl_reduce_scatter(g_dp, ref, b0, N, 4);
    ops_cuda.dev_free(b0);
    float *b = (float *)ops_cuda.dev_alloc(2 * N * sizeof(float));
    ON_COMPUTE(rs_fill_kernel, b, v);
    void *ev = NULL;
    comm_nccl_reduce_scatter_start(g_dp, got, b, N, 4, &ev);
    ops_cuda.dev_free(b); /* at once, as fsdp_grad_end frees the unsharded gradient */
    float *q = (float *)ops_cuda.dev_alloc(2 * N * sizeof(float));
    ON_COMPUTE(overwrite_kernel, q);
    comm_nccl_wait(ev);
    float hr[N], hg[N];
    cudaMemcpy(hg, got, sizeof hg, cudaMemcpyDeviceToHost);
    cudaMemcpy(hr, ref, sizeof hr, cudaMemcpyDeviceToHost);
    ops_cuda.dev_free(q);
    cudaDeviceSynchronize();
    cudaFree(ref); cudaFree(got);
    int ok = !memcmp(hr, hg, sizeof hr) && emu_state.errors == errors;
    for (int j = 0; j < N; j++) { /* and the blocking one is the sum (two terms: one order) */
        const float i = (float)(g_rank * N + j);
        ok &= hr[j] == (0.1f + 0.37f * i) + (0.2f + 0.37f * i);
    }
    return ok;
}

/* the prefetch scenario: rank 0's TP all-reduce must not wait behind its own DP all-gather */
static int prefetch_case(void) {
    float *x = dev(N), *z = dev(N), *w = dev(N), *y = dev(2 * N);
    ON_COMPUTE(fill_kernel, x, z, (float)(g_rank + 1));
    void *ev = NULL;
    if (g_rank == 0) comm_nccl_all_gather(g_dp, y, z, N, 4, &ev);
    comm_nccl_all_reduce(g_tp, x, N, 0, 4);
    ON_COMPUTE(twice_kernel, w, (const float *)x);
    cudaStreamSynchronize(0); /* the TP result on the host, rank 1's gather not started yet */
    if (g_rank == 1) comm_nccl_all_gather(g_dp, y, z, N, 4, &ev);
    comm_nccl_wait(ev);
    const int ok = results_right(w, y);
    cudaDeviceSynchronize();
    cudaFree(x); cudaFree(z); cudaFree(w); cudaFree(y);
    return ok;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int count_wrong = 0, serial = 0, swap = 0;
    for (int i = 1; i < argc; i++) {
        count_wrong |= !strcmp(argv[i], "--count-wrong");
        serial |= !strcmp(argv[i], "--serial");
        swap |= !strcmp(argv[i], "--swap");
    }
    if (size != 2) {
        if (g_rank == 0) printf("FAIL comm_nccl_emu_ranks: needs 2 MPI ranks, got %d\n", size);
        MPI_Finalize();
        return 1;
    }
    MPI_Comm tpc, dpc;
    MPI_Comm_dup(MPI_COMM_WORLD, &tpc);
    MPI_Comm_dup(MPI_COMM_WORLD, &dpc);
    char err[256];
    if (comm_nccl_init(&tpc, 2, g_rank, 1, &g_tp, err, sizeof err) ||
        comm_nccl_init(&dpc, 2, g_rank, 0, &g_dp, err, sizeof err)) {
        if (g_rank == 0) printf("FAIL comm_nccl_emu_init: %s\n", err);
        MPI_Finalize();
        return 1;
    }
    if (count_wrong) emu_state.errors_fatal = false; /* a misuse of freed memory counts as a wrong run */
    int wrong = 0, rs_wrong = 0;
    for (uint64_t s = 1; s <= SEEDS; s++) wrong += !order_case(s, swap);
    if (!serial && !swap)
        for (uint64_t s = 1; s <= SEEDS; s++) rs_wrong += !rs_case(s);
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &rs_wrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (swap && !serial) {
        /* only the issue logs matter here */
    } else if (serial) {
        if (g_rank == 0)
            CHECK(wrong == 0, swap ? "comm_nccl_emu_serial_swapped_order_finished" : "comm_nccl_emu_serial_one_issue_order",
                  "one collective at a time: %d of %d (seed, rank) runs gave a wrong result", wrong, 2 * SEEDS);
    } else if (count_wrong) {
        if (g_rank == 0) printf("wrong %d\nrs_wrong %d\n", wrong, rs_wrong);
    } else {
        int pre = prefetch_case(), both = 0;
        MPI_Allreduce(&pre, &both, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (g_rank == 0) {
            CHECK(wrong == 0, "comm_nccl_emu_events_order_every_interleaving",
                  "%d of %d (seed, rank) runs gave a wrong result", wrong, 2 * SEEDS);
            CHECK(both, "comm_nccl_emu_prefetch_does_not_delay_tp",
                  "a TP all-reduce behind an unfinished DP all-gather gave a wrong result");
            CHECK(rs_wrong == 0, "comm_nccl_emu_started_reduce_scatter_equals_blocking",
                  "%d of %d (seed, rank) runs differed from the blocking reduce-scatter or used freed memory", rs_wrong,
                  2 * SEEDS);
        }
    }
    MPI_Comm_free(&tpc);
    MPI_Comm_free(&dpc);
    MPI_Finalize(); /* destroys the NCCL communicators first (comm_nccl.c) */
    return g_rank == 0 ? check_exit() : 0;
}
