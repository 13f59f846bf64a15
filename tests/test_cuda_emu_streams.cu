/* tests/test_cuda_emu_streams.cu — self-test of the host emulator's asynchronous model
 * (tests/emu/cuda_emu.cuh): lazy queues, seeded interleaving of streams, the legacy default
 * stream's implicit ordering, events, launch arguments copied at the launch, the stream-ordered
 * pool and the detection of frees of memory that queued work still uses.
 * Each bug the emulator is meant to expose is run twice: with the bug (the emulator must show it:
 * a wrong result for some seed, or a reported error) and with the fix (right for every seed, no
 * error). Emulator only: built by tests/t_cuda_emu.sh as C++ against the emulator; on a GPU the
 * bug variants would be races with no guaranteed outcome.
 */
#include "kernels/cuda/cuda_common.cuh"
#include "tests/check.h"

#include <sys/wait.h>

#define N 96
#define SEEDS 8
/* a launch on a given stream (LAUNCH always uses the legacy stream) */
#define LAUNCH_ON(st, kernel, ...) emu_launch(dim3(1), dim3(32), 0, (st), #kernel, [](auto... a_) { kernel(a_...); }, __VA_ARGS__)

static __global__ void fill_kernel(float *x, size_t n, float v) {
    GRID_STRIDE(i, n) x[i] = v + (float)i;
}
static __global__ void twice_kernel(float *y, const float *x, size_t n) {
    GRID_STRIDE(i, n) y[i] = 2.0f * x[i];
}
static int twice_ok(const float *h, float v) {
    for (int i = 0; i < N; i++)
        if (h[i] != 2.0f * (v + (float)i)) return 0;
    return 1;
}
static void *dev(size_t bytes) {
    void *p = NULL;
    cudaCheck(cudaMalloc(&p, bytes));
    return p;
}

/* A writes x, B reads it: with an event wait B always sees A's values; without, some seed runs
 * B first and reads the garbage of fresh memory */
static int missing_wait(int with_wait, uint64_t seed) {
    emu_set_seed(seed);
    cudaStream_t a, b;
    cudaCheck(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    cudaCheck(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t e;
    cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    float *x = (float *)dev(N * 4), *y = (float *)dev(N * 4), h[N];
    LAUNCH_ON(a, fill_kernel, x, (size_t)N, 1.0f);
    if (with_wait) {
        cudaCheck(cudaEventRecord(e, a));
        cudaCheck(cudaStreamWaitEvent(b, e, 0));
    }
    LAUNCH_ON(b, twice_kernel, y, (const float *)x, (size_t)N);
    cudaCheck(cudaStreamSynchronize(b));
    cudaCheck(cudaMemcpy(h, y, sizeof h, cudaMemcpyDeviceToHost));
    cudaCheck(cudaDeviceSynchronize());
    int ok = twice_ok(h, 1.0f);
    cudaCheck(cudaFree(x));
    cudaCheck(cudaFree(y));
    cudaCheck(cudaEventDestroy(e));
    cudaCheck(cudaStreamDestroy(a));
    cudaCheck(cudaStreamDestroy(b));
    return ok;
}

/* memory from the pool on A, read by B; A frees it. Without B's event the free can run before
 * B's kernel: the emulator reports it (and the poisoned memory gives NaNs) */
static int premature_free(int with_wait, uint64_t seed, uint64_t *errors) {
    emu_set_seed(seed);
    const uint64_t e0 = emu_state.errors;
    cudaStream_t a, b;
    cudaCheck(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    cudaCheck(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t ea, eb;
    cudaCheck(cudaEventCreateWithFlags(&ea, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&eb, cudaEventDisableTiming));
    float *x = NULL, *y = (float *)dev(N * 4), h[N];
    cudaCheck(cudaMallocAsync((void **)&x, N * 4, a));
    LAUNCH_ON(a, fill_kernel, x, (size_t)N, 3.0f);
    cudaCheck(cudaEventRecord(ea, a));
    cudaCheck(cudaStreamWaitEvent(b, ea, 0));
    LAUNCH_ON(b, twice_kernel, y, (const float *)x, (size_t)N);
    if (with_wait) {
        cudaCheck(cudaEventRecord(eb, b));
        cudaCheck(cudaStreamWaitEvent(a, eb, 0));
    }
    cudaCheck(cudaFreeAsync(x, a));
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(h, y, sizeof h, cudaMemcpyDeviceToHost));
    *errors = emu_state.errors - e0;
    int ok = twice_ok(h, 3.0f) && *errors == 0;
    cudaCheck(cudaFree(y));
    cudaCheck(cudaEventDestroy(ea));
    cudaCheck(cudaEventDestroy(eb));
    cudaCheck(cudaStreamDestroy(a));
    cudaCheck(cudaStreamDestroy(b));
    return ok;
}

/* the legacy default stream orders itself against blocking streams, not against non-blocking ones */
static int legacy_order(unsigned flags, int legacy_first, uint64_t seed) {
    emu_set_seed(seed);
    cudaStream_t s;
    cudaCheck(cudaStreamCreateWithFlags(&s, flags));
    float *x = (float *)dev(N * 4), *y = (float *)dev(N * 4), h[N];
    if (legacy_first) {
        LAUNCH_ON((cudaStream_t)0, fill_kernel, x, (size_t)N, 5.0f);
        LAUNCH_ON(s, twice_kernel, y, (const float *)x, (size_t)N);
    } else {
        LAUNCH_ON(s, fill_kernel, x, (size_t)N, 5.0f);
        LAUNCH_ON((cudaStream_t)0, twice_kernel, y, (const float *)x, (size_t)N);
    }
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(h, y, sizeof h, cudaMemcpyDeviceToHost));
    int ok = twice_ok(h, 5.0f);
    cudaCheck(cudaFree(x));
    cudaCheck(cudaFree(y));
    cudaCheck(cudaStreamDestroy(s));
    return ok;
}

static int count_wrong(int (*f)(int, uint64_t), int arg) {
    int wrong = 0;
    for (uint64_t s = 1; s <= SEEDS; s++) wrong += !f(arg, s);
    return wrong;
}
static int legacy_blocking_lf(int lf, uint64_t s) { return legacy_order(cudaStreamDefault, lf, s); }
static int legacy_nonblocking_lf(int lf, uint64_t s) { return legacy_order(cudaStreamNonBlocking, lf, s); }

int main(void) {
    emu_state.errors_fatal = false;

    int w = count_wrong(missing_wait, 0);
    CHECK(w > 0, "emu_streams_missing_wait_shows", "without the event wait all %d seeds gave the right result", SEEDS);
    w = count_wrong(missing_wait, 1);
    CHECK(w == 0, "emu_streams_event_wait_orders", "with the event wait %d of %d seeds were wrong", w, SEEDS);

    int caught = 0, bad_fix = 0;
    for (uint64_t s = 1; s <= SEEDS; s++) {
        uint64_t e = 0;
        premature_free(0, s, &e);
        caught += e > 0;
        if (!premature_free(1, s, &e)) bad_fix++;
    }
    CHECK(caught > 0, "emu_streams_premature_free_reported", "a free with no wait for the reader ran unreported on all %d seeds", SEEDS);
    CHECK(bad_fix == 0, "emu_streams_ordered_free_clean", "%d of %d seeds reported an error or a wrong result with the wait", bad_fix, SEEDS);

    w = count_wrong(legacy_blocking_lf, 1) + count_wrong(legacy_blocking_lf, 0);
    CHECK(w == 0, "emu_streams_legacy_orders_blocking", "%d runs wrong", w);
    w = count_wrong(legacy_nonblocking_lf, 1);
    int w2 = count_wrong(legacy_nonblocking_lf, 0);
    CHECK(w > 0 && w2 > 0, "emu_streams_legacy_ignores_nonblocking", "wrong results: %d (legacy first), %d (stream first) of %d", w, w2, SEEDS);

    /* arguments are copied at the launch; nothing runs before the host waits */
    {
        float *x = (float *)dev(N * 4), h[N];
        float v = 7.0f;
        LAUNCH_ON((cudaStream_t)0, fill_kernel, x, (size_t)N, v);
        v = 9.0f;
        uint32_t raw;
        memcpy(&raw, x, 4); /* device memory is host memory here: peek without a sync */
        CHECK(raw == 0xffffffffu, "emu_streams_lazy", "the kernel ran at its launch (x[0] bits %08x)", raw);
        cudaCheck(cudaMemcpy(h, x, sizeof h, cudaMemcpyDeviceToHost));
        CHECK(h[0] == 7.0f && h[N - 1] == 7.0f + (float)(N - 1), "emu_streams_args_by_value", "x[0] = %g (v was 7 at the launch, 9 after)", h[0]);
        (void)v;
        /* an asynchronous copy to the host lands when the stream is synchronised */
        float g[N];
        memset(g, 0, sizeof g);
        cudaCheck(cudaMemcpyAsync(g, x, sizeof g, cudaMemcpyDeviceToHost, 0));
        int before = g[0] == 0.0f;
        cudaCheck(cudaStreamSynchronize(0));
        CHECK(before && g[0] == 7.0f, "emu_streams_async_copy_lands_at_sync", "before %d after %g", before, g[0]);
        cudaCheck(cudaFree(x));
    }

    /* a launch with a pointer into memory already given back is reported at the launch */
    {
        const uint64_t e0 = emu_state.errors;
        float *x = NULL;
        cudaCheck(cudaMallocAsync((void **)&x, N * 4, 0));
        cudaCheck(cudaFreeAsync(x, 0));
        LAUNCH_ON((cudaStream_t)0, fill_kernel, x, (size_t)N, 1.0f);
        cudaCheck(cudaStreamSynchronize(0));
        CHECK(emu_state.errors == e0 + 1, "emu_streams_launch_after_free_reported", "%llu errors", (unsigned long long)(emu_state.errors - e0));
    }

    /* memory given back by cudaFree faults when touched (checked in a child process) */
    {
        float *x = (float *)dev(N * 4);
        cudaCheck(cudaFree(x));
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            volatile float *vx = x;
            vx[0] = 1.0f;
            _exit(0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "emu_streams_freed_memory_faults", "child status %d", st);
    }

    /* events: elapsed time only once both records have run */
    {
        cudaEvent_t a, b;
        cudaCheck(cudaEventCreate(&a));
        cudaCheck(cudaEventCreate(&b));
        float *x = (float *)dev(N * 4);
        cudaCheck(cudaEventRecord(a, 0));
        LAUNCH_ON((cudaStream_t)0, fill_kernel, x, (size_t)N, 1.0f);
        cudaCheck(cudaEventRecord(b, 0));
        float ms = -1;
        cudaError_t r = cudaEventElapsedTime(&ms, a, b);
        (void)cudaGetLastError();
        cudaCheck(cudaEventSynchronize(b));
        cudaError_t r2 = cudaEventElapsedTime(&ms, a, b);
        CHECK(r == cudaErrorNotReady && r2 == cudaSuccess && ms >= 0, "emu_streams_event_elapsed", "before %d after %d ms %g", (int)r, (int)r2, ms);
        cudaCheck(cudaEventDestroy(a));
        cudaCheck(cudaEventDestroy(b));
        cudaCheck(cudaFree(x));
    }

    /* the pool: with a release threshold blocks are kept and reused; no cudaMalloc behind it */
    {
        cudaMemPool_t pool;
        cudaCheck(cudaDeviceGetDefaultMemPool(&pool, 0));
        uint64_t keep = UINT64_MAX;
        cudaCheck(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
        const emu_counters c0 = emu_state.n;
        uint64_t res1 = 0, res = 0;
        for (int it = 0; it < 4; it++) {
            void *p[5];
            for (int i = 0; i < 5; i++) cudaCheck(cudaMallocAsync(&p[i], (size_t)(i + 1) * 10000, 0));
            for (int i = 0; i < 5; i++) LAUNCH_ON((cudaStream_t)0, fill_kernel, (float *)p[i], (size_t)N, 1.0f);
            for (int i = 4; i >= 0; i--) cudaCheck(cudaFreeAsync(p[i], 0));
            cudaCheck(cudaStreamSynchronize(0));
            cudaCheck(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &res));
            if (it == 0) res1 = res;
        }
        const emu_counters c1 = emu_state.n;
        CHECK(res1 > 0 && res == res1 && c1.pool_grow - c0.pool_grow == 5 && c1.cudaMalloc == c0.cudaMalloc &&
                  c1.pool_release == c0.pool_release,
              "emu_streams_pool_reuses", "reserved %llu then %llu, grew %llu times, %llu cudaMalloc, %llu released",
              (unsigned long long)res1, (unsigned long long)res, (unsigned long long)(c1.pool_grow - c0.pool_grow),
              (unsigned long long)(c1.cudaMalloc - c0.cudaMalloc), (unsigned long long)(c1.pool_release - c0.pool_release));
        keep = 0;
        cudaCheck(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
        cudaCheck(cudaStreamSynchronize(0));
        cudaCheck(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &res));
        CHECK(res == 0, "emu_streams_pool_releases_above_threshold", "reserved %llu after a sync with threshold 0", (unsigned long long)res);
    }
    return check_exit();
}
