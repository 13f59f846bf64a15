/* tests/emu/cuda_emu.cuh — a host emulator for the subset of CUDA, the runtime and cuBLAS that
 * the .cu files of kernels/cuda use, so the kernels can be *executed* on machines without a GPU.
 *
 * What it is: with MESHSWEEP_CUDA_EMU defined, cuda_common.cuh includes this instead of the CUDA
 * headers and the .cu files compile as ordinary C++20. Each block runs with one fiber per
 * CUDA thread (a fiber of the host thread, taken in a seeded order from barrier to barrier:
 * cuda_emu_threads.cuh); __syncthreads is a barrier over the block, shuffles exchange through a per-warp
 * slot array between two warp barriers, so a shuffle or __syncthreads reached by only part of a
 * warp/block is reported as a deadlock (and aborts) instead of silently working. Blocks run one
 * after another, which is what lets `__shared__` be a function-static.
 * Work is asynchronous as on the device: kernel launches (arguments copied at the launch), cuBLAS
 * GEMMs, memsets, copies, event records and frees are queued on their stream and run lazily, at
 * the points where the host has to wait, with the streams interleaved in an order drawn from
 * MESHSWEEP_EMU_SEED; the legacy default stream has its documented implicit ordering. So a
 * missing event wait gives a wrong result for some seed, and a stream-ordered free of memory that
 * queued work still uses is reported (see "streams" below). Device memory is a reserved address
 * range: freed memory faults when touched, a launch with a pointer into freed memory is reported;
 * cudaMemcpy refuses overlapping ranges (UB on the device); cudaMallocAsync/cudaFreeAsync run on
 * an emulated stream-ordered pool; cublasSgemm/GemmEx are naive column-major loops checking the
 * BLAS leading-dimension rules, i.e. the documented semantics the row-major mapping in matmul.cu
 * relies on (cuda_emu_cublas.cuh); mma.sync, cp.async, ldmatrix and ex2.approx follow the PTX ISA
 * (cuda_emu_mma.cuh, cuda_emu_ptx.cuh). tests/emu/nccl_emu.cuh adds NCCL on top (collectives through MPI when their
 * stream reaches them). Counters of what was asked (cudaMalloc, cudaFree, device synchronisations,
 * ...) are written at exit to $MESHSWEEP_EMU_STATS.<pid> when that is set.
 * What it is not: a timing model (event times are host times of the lazy execution), a race
 * detector for plain loads and stores (only frees are checked; other races show as wrong
 * results under some seed), nor part of the library build (the Makefile compiles the .cu files
 * with nvcc). Build of the CUDA test against it (from the repository root):
 *   for f in kernels/cuda/[a-z]*.cu; do g++ -std=c++20 -O1 -g -x c++ -DMESHSWEEP_CUDA -DMESHSWEEP_CUDA_EMU \
 *       -I. -Wall -Wextra -Wno-unknown-pragmas -c $f -o /tmp/emu_$(basename $f .cu).o; done
 *   gcc -std=c11 -D_GNU_SOURCE -O2 -I. -I/usr/include/x86_64-linux-gnu/openblas-pthread -DMESHSWEEP_CUDA \
 *       tests/test_cuda_kernels.c kernels/cpu/ops_cpu.c /tmp/emu_*.o -lopenblas -lm -lstdc++ \
 *       -o /tmp/test_cuda_emu && timeout 600 /tmp/test_cuda_emu
 */
#ifndef MESHSWEEP_CUDA_EMU_CUH
#define MESHSWEEP_CUDA_EMU_CUH
#include <barrier>
#include <chrono>
#include <cstdarg>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <type_traits>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

/* ---- thread and block coordinates ---------------------------------------------------------- */
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct emu_uint3 { unsigned x, y, z; };
inline thread_local emu_uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
#include "tests/emu/cuda_emu_threads.cuh" /* the fibers a block's threads run on, and their barriers */

struct emu_block {
    emu_barrier *block;
    emu_barrier *warp[32];
    uint64_t slot[32][32];
};
inline emu_block *emu_cur;
inline std::vector<unsigned char> emu_smem_buf(228 * 1024);
inline size_t emu_smem_limit = 48 * 1024; /* raised by cudaFuncSetAttribute, as on the device */
inline void *emu_dynamic_smem() { return emu_smem_buf.data(); }

inline int emu_tid() { return (int)(threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y); }
inline void __syncthreads() { emu_cur->block->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_cur->warp[emu_tid() / 32]->arrive_and_wait(); }

template <typename T> inline T emu_shfl(T v, int src) {
    static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
    const int t = emu_tid(), w = t / 32, lane = t % 32;
    uint64_t u = 0;
    memcpy(&u, &v, sizeof(T));
    emu_cur->slot[w][lane] = u;
    emu_cur->warp[w]->arrive_and_wait();
    T r;
    memcpy(&r, &emu_cur->slot[w][src & 31], sizeof(T));
    emu_cur->warp[w]->arrive_and_wait();
    return r;
}
template <typename T> inline T __shfl_sync(unsigned, T v, int src) { return emu_shfl(v, src); }
template <typename T> inline T __shfl_xor_sync(unsigned, T v, int mask) { return emu_shfl(v, (emu_tid() % 32) ^ mask); }
template <typename T> inline T __shfl_down_sync(unsigned, T v, unsigned delta) {
    const int lane = emu_tid() % 32;
    return emu_shfl(v, lane + (int)delta < 32 ? lane + (int)delta : lane);
}

inline std::mutex emu_atomic_mutex;
inline float atomicAdd(float *p, float v) {
    std::lock_guard<std::mutex> g(emu_atomic_mutex);
    float old = *p;
    *p = old + v;
    return old;
}
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }

/* ---- runtime: device memory ------------------------------------------------------------------
 * Device memory is one reserved range of host address space (the arena), committed page by page
 * and never handed out twice: a pointer outside it is a host pointer, a pointer into it names one
 * allocation. Freed memory (cudaFree, or a pool block released to the system) becomes PROT_NONE,
 * so any later access from a kernel or the host faults, and the handler says which allocation it
 * was. Pool blocks that are free but still reserved are poisoned with 0xff (a NaN in fp32 and bf16)
 * and reused by later allocations, as on the device. */
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2,
                   cudaErrorInsufficientDriver = 35, cudaErrorNoDevice = 100,
                   cudaErrorInvalidResourceHandle = 400, cudaErrorNotReady = 600, cudaErrorLaunchFailure = 719 };
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                      cudaMemcpyDeviceToDevice, cudaMemcpyDefault };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
struct cudaDeviceProp { char name[256]; };
inline cudaError_t emu_last_error = cudaSuccess;
inline const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    default: return "unspecified launch failure";
    }
}
inline cudaError_t cudaGetLastError() { cudaError_t e = emu_last_error; emu_last_error = cudaSuccess; return e; }
inline cudaError_t emu_fail(cudaError_t e) { emu_last_error = e; return e; }

/* What the runtime was asked to do, for tests (MESHSWEEP_EMU_STATS=PREFIX writes PREFIX.<pid> at
 * exit, one "name count" line each, then one "launch:KERNEL count" line per kernel launched, by the name
 * its LAUNCH gave: which kernels a run reached). device_sync counts cudaDeviceSynchronize only; cudaFree and
 * cudaMalloc synchronise the device as well on real GPUs and have their own counters. */
struct emu_counters {
    uint64_t cudaMalloc, cudaFree, cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize,
        cudaMallocAsync, cudaFreeAsync, pool_grow, pool_release, launches, memcpy_to_host;
};
inline void emu_dump_counters();
struct emu_state_t {
    emu_counters n{};
    std::map<std::string, uint64_t> by_kernel; /* launches by kernel name */
    bool errors_fatal = true; /* self-tests set false and read `errors` instead */
    uint64_t errors = 0;
    ~emu_state_t() { emu_dump_counters(); }
};
inline emu_state_t emu_state;
inline void emu_dump_counters() {
    const char *p = getenv("MESHSWEEP_EMU_STATS");
    if (!p || !*p) return;
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", p, (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f) return;
    const emu_counters &c = emu_state.n;
    fprintf(f, "cudaMalloc %llu\ncudaFree %llu\ncudaDeviceSynchronize %llu\ncudaStreamSynchronize %llu\n"
               "cudaEventSynchronize %llu\ncudaMallocAsync %llu\ncudaFreeAsync %llu\npool_grow %llu\n"
               "pool_release %llu\nlaunches %llu\nmemcpy_to_host %llu\n",
            (unsigned long long)c.cudaMalloc, (unsigned long long)c.cudaFree,
            (unsigned long long)c.cudaDeviceSynchronize, (unsigned long long)c.cudaStreamSynchronize,
            (unsigned long long)c.cudaEventSynchronize, (unsigned long long)c.cudaMallocAsync,
            (unsigned long long)c.cudaFreeAsync, (unsigned long long)c.pool_grow,
            (unsigned long long)c.pool_release, (unsigned long long)c.launches,
            (unsigned long long)c.memcpy_to_host);
    for (const auto &k : emu_state.by_kernel) fprintf(f, "launch:%s %llu\n", k.first.c_str(), (unsigned long long)k.second);
    fclose(f);
}
/* an error of the program under emulation (not of the emulator): fatal unless a self-test asked */
inline void emu_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "emu: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    emu_state.errors++;
    if (emu_state.errors_fatal) abort();
}

struct emu_alloc {
    size_t block;    /* bytes reserved (page multiple) */
    size_t bytes;    /* bytes asked for */
    uint64_t id;     /* changes at every allocation of the block */
    bool live;       /* allocated now */
    bool pool;       /* a block of the stream-ordered pool */
    bool released;   /* PROT_NONE: gone for good */
};
inline const size_t emu_arena_bytes = (size_t)1 << 38;
inline const size_t emu_page = 4096;
inline char *emu_arena_base = nullptr;
inline size_t emu_arena_used = 0;
inline uint64_t emu_alloc_ids = 0;
inline std::map<uintptr_t, emu_alloc> emu_allocs;

inline void emu_segv(int sig, siginfo_t *si, void *) {
    const uintptr_t a = (uintptr_t)si->si_addr, b = (uintptr_t)emu_arena_base;
    if (emu_arena_base && a >= b && a < b + emu_arena_bytes) {
        char msg[160];
        int n = snprintf(msg, sizeof msg, "emu: access to freed device memory at %p\n", si->si_addr);
        if (n > 0) (void)!write(2, msg, (size_t)n);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}
inline bool emu_arena_init() {
    if (emu_arena_base) return true;
    void *p = mmap(nullptr, emu_arena_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    emu_arena_base = (char *)p;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = emu_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, nullptr);
    return true;
}
/* a fresh committed block, never used before; garbage content (0xff), as cudaMalloc gives */
inline void *emu_arena_get(size_t bytes, size_t *block) {
    if (!emu_arena_init()) return nullptr;
    const size_t b = ((bytes ? bytes : 1) + emu_page - 1) / emu_page * emu_page;
    /* absurd requests fail, as on the device */
    if (bytes > ((size_t)1 << 36) || emu_arena_used + b > emu_arena_bytes) return nullptr;
    char *p = emu_arena_base + emu_arena_used;
    if (mprotect(p, b, PROT_READ | PROT_WRITE) != 0) return nullptr;
    emu_arena_used += b + emu_page; /* an inaccessible page between blocks catches overruns */
    memset(p, 0xff, b);
    *block = b;
    return p;
}
inline void emu_arena_release(void *p, size_t block) {
    madvise(p, block, MADV_DONTNEED);
    mprotect(p, block, PROT_NONE);
}
/* the allocation a device pointer points into, or null (a host pointer) */
inline std::pair<const uintptr_t, emu_alloc> *emu_find(const void *p) {
    if (!emu_arena_base) return nullptr;
    const uintptr_t a = (uintptr_t)p, b = (uintptr_t)emu_arena_base;
    if (a < b || a >= b + emu_arena_bytes) return nullptr;
    auto it = emu_allocs.upper_bound(a);
    if (it == emu_allocs.begin()) return nullptr;
    --it;
    if (a >= it->first + it->second.block + emu_page) return nullptr;
    return &*it;
}
inline bool emu_is_device(const void *p) {
    const uintptr_t a = (uintptr_t)p, b = (uintptr_t)emu_arena_base;
    return emu_arena_base && a >= b && a < b + emu_arena_bytes;
}

/* ---- runtime: streams, events, queued work ---------------------------------------------------
 * Every stream is a queue. Nothing runs when it is enqueued: queued work runs at the points where
 * the host must wait for it (stream/event/device synchronize, event query, a copy to the host,
 * stream destruction, a pageable host-to-device copy), and then the heads of the streams that may
 * run are taken in an order drawn from a seed (MESHSWEEP_EMU_SEED, default 1), so work from two
 * streams interleaves differently from seed to seed. An item may only start when the events it
 * waits on have completed; the legacy default stream (0) follows the documented rules: its work
 * waits for all earlier work of the blocking streams, and their work waits for its earlier work;
 * cudaStreamNonBlocking streams are not ordered against it. Each item records the allocations it
 * touches, so a stream-ordered free that executes while other queued work still uses the memory
 * is reported (emu_error), and a launch with a pointer into freed memory is reported at launch. */
struct emu_stream;
struct emu_dep {
    emu_stream *s;
    uint64_t seq; /* done when s->done >= seq */
};
struct emu_item {
    std::function<int()> run; /* 1: complete; 0: started and still in progress (polled again) */
    std::vector<emu_dep> deps;
    std::vector<uint64_t> refs; /* ids of the allocations it touches */
    const char *what;
    bool started;
};
struct emu_stream {
    std::deque<emu_item> q;
    uint64_t enq = 0, done = 0;
    bool legacy = false, nonblocking = false;
};
typedef emu_stream *cudaStream_t;
#define cudaStreamLegacy ((cudaStream_t)0x1)
enum { cudaStreamDefault = 0, cudaStreamNonBlocking = 1 };
enum { cudaEventDefault = 0, cudaEventBlockingSync = 1, cudaEventDisableTiming = 2 };
inline emu_stream emu_legacy_stream = [] { emu_stream s; s.legacy = true; return s; }();
inline std::vector<emu_stream *> emu_streams = {&emu_legacy_stream};
inline emu_stream *emu_S(cudaStream_t s) { return (!s || s == cudaStreamLegacy) ? &emu_legacy_stream : s; }

inline uint64_t emu_rng_state = 0;
inline bool emu_rng_ready = false;
inline void emu_set_seed(uint64_t seed) { emu_rng_state = seed; emu_rng_ready = true; }
inline uint64_t emu_rng() {
    if (!emu_rng_ready) {
        const char *e = getenv("MESHSWEEP_EMU_SEED");
        emu_set_seed(e && *e ? strtoull(e, nullptr, 10) : 1);
    }
    uint64_t z = (emu_rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
inline double emu_now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline void emu_ref(std::vector<uint64_t> &refs, const void *p, const char *what) {
    auto *a = emu_find(p);
    if (!a) return;
    if (!a->second.live)
        emu_error("%s uses device memory at %p that was freed (allocation of %zu bytes)", what, p, a->second.bytes);
    else
        refs.push_back(a->second.id);
}
inline void emu_enqueue(cudaStream_t st, const char *what, std::function<int()> run, std::vector<uint64_t> refs = {},
                        std::vector<emu_dep> deps = {}) {
    emu_stream *s = emu_S(st);
    if (s->legacy) {
        for (emu_stream *o : emu_streams)
            if (!o->legacy && !o->nonblocking && o->enq) deps.push_back({o, o->enq});
    } else if (!s->nonblocking && emu_legacy_stream.enq) {
        deps.push_back({&emu_legacy_stream, emu_legacy_stream.enq});
    }
    s->q.push_back(emu_item{std::move(run), std::move(deps), std::move(refs), what, false});
    s->enq++;
}
inline bool emu_ready(const emu_item &it) {
    for (const emu_dep &d : it.deps)
        if (d.s->done < d.seq) return false;
    return true;
}
inline void emu_deadlock() {
    fprintf(stderr, "emu: deadlock: queued work waits for events that no queued work will complete\n");
    for (emu_stream *s : emu_streams)
        if (!s->q.empty())
            fprintf(stderr, "emu:   stream %p: %zu items, head %s\n", (void *)s, s->q.size(), s->q.front().what);
    abort();
}
/* run queued work, heads of runnable streams in seeded order, until done() holds */
template <typename P> inline void emu_run_until(P done) {
    std::vector<emu_stream *> r;
    int idle = 0;
    while (!done()) {
        r.clear();
        for (emu_stream *s : emu_streams)
            if (!s->q.empty() && (s->q.front().started || emu_ready(s->q.front()))) r.push_back(s);
        if (r.empty()) emu_deadlock();
        emu_stream *s = r[emu_rng() % r.size()];
        emu_item &it = s->q.front();
        it.started = true;
        if (it.run()) {
            s->q.pop_front();
            s->done++;
            idle = 0;
        } else if (++idle > 64) {
            /* only work in progress elsewhere (a collective waiting for its peers): yield the core */
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }
}
inline void emu_sync_stream(emu_stream *s) {
    const uint64_t target = s->enq;
    emu_run_until([=] { return s->done >= target; });
}
inline void emu_sync_all() {
    std::vector<std::pair<emu_stream *, uint64_t>> t;
    for (emu_stream *s : emu_streams) t.push_back({s, s->enq});
    emu_run_until([&] {
        for (auto &x : t)
            if (x.first->done < x.second) return false;
        return true;
    });
}
inline void emu_pool_trim_at_sync();

inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    emu_stream *n = new emu_stream;
    n->nonblocking = (flags & cudaStreamNonBlocking) != 0;
    emu_streams.push_back(n);
    *s = n;
    return cudaSuccess;
}
inline cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
/* priorities are accepted and have no effect here (the seeded order is the only schedule) */
inline cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest) {
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return cudaSuccess;
}
inline cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int priority) {
    if (priority > 0 || priority < -5) return emu_fail(cudaErrorInvalidValue);
    return cudaStreamCreateWithFlags(s, flags);
}
inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!s || s == cudaStreamLegacy) return emu_fail(cudaErrorInvalidResourceHandle);
    emu_sync_stream(s);
    /* a later item that waits on this stream's events is already satisfied (done >= seq), but it
       still points here: keep the object, empty, out of the list */
    for (size_t i = 0; i < emu_streams.size(); i++)
        if (emu_streams[i] == s) emu_streams.erase(emu_streams.begin() + (long)i);
    return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    emu_state.n.cudaStreamSynchronize++;
    emu_sync_stream(emu_S(s));
    emu_pool_trim_at_sync();
    return cudaSuccess;
}
inline cudaError_t cudaStreamQuery(cudaStream_t s) {
    emu_sync_stream(emu_S(s));
    return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() {
    emu_state.n.cudaDeviceSynchronize++;
    emu_sync_all();
    emu_pool_trim_at_sync();
    return cudaSuccess;
}

struct emu_event {
    emu_stream *s = nullptr; /* of the last record; null: never recorded */
    uint64_t seq = 0, gen = 0;
    bool timing = true, destroyed = false;
    int pending = 0;         /* queued records */
    double t_ms = 0;
};
typedef emu_event *cudaEvent_t;
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    *e = new emu_event;
    (*e)->timing = !(flags & cudaEventDisableTiming);
    return cudaSuccess;
}
inline cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!e || e->destroyed) return emu_fail(cudaErrorInvalidResourceHandle);
    e->destroyed = true;
    if (!e->pending) delete e;
    return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t st = 0) {
    if (!e || e->destroyed) return emu_fail(cudaErrorInvalidResourceHandle);
    emu_stream *s = emu_S(st);
    const uint64_t gen = ++e->gen;
    e->pending++;
    emu_enqueue(s, "cudaEventRecord", [e, gen] {
        if (e->gen == gen) e->t_ms = emu_now_ms();
        if (--e->pending == 0 && e->destroyed) delete e;
        return 1;
    });
    e->s = s;
    e->seq = s->enq;
    return cudaSuccess;
}
inline cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t e, unsigned = 0) {
    if (!e || e->destroyed) return emu_fail(cudaErrorInvalidResourceHandle);
    if (!e->s) return cudaSuccess; /* never recorded: nothing to wait for */
    emu_enqueue(st, "cudaStreamWaitEvent", [] { return 1; }, {}, {{e->s, e->seq}});
    return cudaSuccess;
}
inline bool emu_event_done(const emu_event *e) { return !e->s || e->s->done >= e->seq; }
inline cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!e || e->destroyed) return emu_fail(cudaErrorInvalidResourceHandle);
    emu_state.n.cudaEventSynchronize++;
    emu_run_until([e] { return emu_event_done(e); });
    emu_pool_trim_at_sync();
    return cudaSuccess;
}
/* runs the work up to the event (lazily, as a real query would find it done some time later) */
inline cudaError_t cudaEventQuery(cudaEvent_t e) {
    if (!e || e->destroyed) return emu_fail(cudaErrorInvalidResourceHandle);
    emu_run_until([e] { return emu_event_done(e); });
    return cudaSuccess;
}
/* host time between the two records' execution; both must have completed (no implicit run) */
inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    if (!a || !b || a->destroyed || b->destroyed || !a->s || !b->s || !a->timing || !b->timing)
        return emu_fail(cudaErrorInvalidResourceHandle);
    if (!emu_event_done(a) || !emu_event_done(b)) return emu_fail(cudaErrorNotReady);
    *ms = (float)(b->t_ms - a->t_ms);
    return cudaSuccess;
}

/* ---- runtime: device, allocation, copies ----------------------------------------------------- */
/* MESHSWEEP_EMU_DEVICES (default 1) devices per host: every process emulates its own, so ranks of
 * one host can each "have" a GPU, as NCCL requires; they all share the one emulated memory */
inline int emu_device = 0;
inline int emu_ndevices() {
    const char *e = getenv("MESHSWEEP_EMU_DEVICES");
    const int n = e && *e ? atoi(e) : 1;
    return n > 0 ? n : 1;
}
/* The versions, as the runtime encodes them (1000·major + 10·minor). The emulated runtime is CUDA
 * 13.0; MESHSWEEP_EMU_DRIVER_VERSION (default 13000) is the CUDA version the emulated driver
 * supports: 0 is no driver, one older than the runtime is a driver too old for it. Either way every
 * runtime call that needs the driver fails with cudaErrorInsufficientDriver, as the CUDA runtime
 * does (without a driver too: cudaDriverGetVersion's 0 tells the two apart). */
#define CUDART_VERSION 13000
inline int emu_driver_version() {
    const char *e = getenv("MESHSWEEP_EMU_DRIVER_VERSION");
    return e && *e ? atoi(e) : CUDART_VERSION;
}
inline cudaError_t cudaDriverGetVersion(int *v) { *v = emu_driver_version(); return cudaSuccess; }
inline cudaError_t cudaRuntimeGetVersion(int *v) { *v = CUDART_VERSION; return cudaSuccess; }
inline cudaError_t emu_driver_check() {
    const int d = emu_driver_version();
    if (d < CUDART_VERSION) return emu_fail(cudaErrorInsufficientDriver);
    return cudaSuccess;
}
inline cudaError_t cudaGetDeviceCount(int *n) {
    const cudaError_t e = emu_driver_check();
    *n = e == cudaSuccess ? emu_ndevices() : 0;
    return e;
}
inline cudaError_t cudaSetDevice(int d) {
    if (emu_driver_check() != cudaSuccess) return emu_last_error;
    if (d < 0 || d >= emu_ndevices()) return emu_fail(cudaErrorInvalidValue);
    emu_device = d;
    return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int *d) { *d = emu_device; return cudaSuccess; }
enum cudaDeviceAttr { cudaDevAttrMemoryPoolsSupported = 115 };
inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int dev) {
    if (dev < 0 || dev >= emu_ndevices() || a != cudaDevAttrMemoryPoolsSupported) return emu_fail(cudaErrorInvalidValue);
    *v = 1;
    return cudaSuccess;
}
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
    snprintf(p->name, sizeof p->name, "emulated device");
    return cudaSuccess;
}
inline cudaError_t cudaMemGetInfo(size_t *f, size_t *t) { *f = (size_t)1 << 30; *t = (size_t)2 << 30; return cudaSuccess; }
inline cudaError_t cudaMalloc(void **p, size_t bytes) {
    emu_state.n.cudaMalloc++;
    size_t block = 0;
    *p = emu_arena_get(bytes, &block);
    if (!*p) return emu_fail(cudaErrorMemoryAllocation);
    emu_allocs[(uintptr_t)*p] = emu_alloc{block, bytes, ++emu_alloc_ids, true, false, false};
    return cudaSuccess;
}
/* cudaFree synchronises the device (all streams), then the memory is gone */
inline cudaError_t cudaFree(void *p) {
    emu_state.n.cudaFree++;
    if (!p) return cudaSuccess; /* context creation */
    auto it = emu_allocs.find((uintptr_t)p);
    if (it == emu_allocs.end() || !it->second.live || it->second.pool) {
        emu_error("cudaFree of %p, which is not a live cudaMalloc allocation", p);
        return emu_fail(cudaErrorInvalidValue);
    }
    emu_sync_all();
    it->second.live = false;
    it->second.released = true;
    emu_arena_release(p, it->second.block);
    return cudaSuccess;
}

inline void emu_check_overlap(const void *d, const void *s, size_t n) {
    const char *dc = (const char *)d, *sc = (const char *)s;
    if (n && dc < sc + n && sc < dc + n) {
        fprintf(stderr, "emu: cudaMemcpy with overlapping ranges\n");
        abort();
    }
}
inline std::vector<uint64_t> emu_refs2(const void *a, const void *b, const char *what) {
    std::vector<uint64_t> r;
    emu_ref(r, a, what);
    if (b) emu_ref(r, b, what);
    return r;
}
/* the copy queued on stream st; host sources are captured now (a pageable copy is staged at the
 * call), host destinations are written when the copy runs */
inline void emu_enqueue_copy(void *d, const void *s, size_t n, cudaStream_t st, const char *what) {
    emu_check_overlap(d, s, n);
    auto refs = emu_refs2(d, s, what);
    if (!emu_is_device(s)) {
        auto buf = std::make_shared<std::vector<unsigned char>>((const unsigned char *)s, (const unsigned char *)s + n);
        emu_enqueue(st, what, [d, buf] { memcpy(d, buf->data(), buf->size()); return 1; }, std::move(refs));
    } else {
        emu_enqueue(st, what, [d, s, n] { memcpy(d, s, n); return 1; }, std::move(refs));
    }
}
inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t st = 0) {
    if (n) emu_enqueue_copy(d, s, n, st, "cudaMemcpyAsync");
    return cudaSuccess;
}
/* on the legacy stream: device to device is asynchronous; host to device (pageable) synchronises
 * the stream first; a copy to the host returns when it is done */
inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind) {
    if (!n) return cudaSuccess;
    const bool to_host = !emu_is_device(d), from_host = !emu_is_device(s);
    if (from_host) emu_sync_stream(&emu_legacy_stream);
    emu_enqueue_copy(d, s, n, 0, "cudaMemcpy");
    if (to_host) {
        emu_state.n.memcpy_to_host++;
        emu_sync_stream(&emu_legacy_stream);
    }
    return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t st = 0) {
    if (!n) return cudaSuccess;
    emu_enqueue(st, "cudaMemset", [p, v, n] { memset(p, v, n); return 1; }, emu_refs2(p, nullptr, "cudaMemset"));
    return cudaSuccess;
}
inline cudaError_t cudaMemset(void *p, int v, size_t n) { return cudaMemsetAsync(p, v, n, 0); }
template <typename T> inline cudaError_t cudaMemcpyFromSymbol(void *dst, const T &sym, size_t n, size_t off = 0,
                                                              cudaMemcpyKind = cudaMemcpyDeviceToHost) {
    const char *src = (const char *)&sym + off;
    emu_enqueue(0, "cudaMemcpyFromSymbol", [dst, src, n] { memcpy(dst, src, n); return 1; });
    emu_state.n.memcpy_to_host++;
    emu_sync_stream(&emu_legacy_stream);
    return cudaSuccess;
}
template <typename F> inline cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int v) {
    if ((size_t)v > emu_smem_buf.size()) return emu_fail(cudaErrorInvalidValue);
    if ((size_t)v > emu_smem_limit) emu_smem_limit = (size_t)v;
    return cudaSuccess;
}

/* ---- runtime: the stream-ordered pool (cudaMallocAsync) ----------------------------------------
 * One pool per device, as the default pool. A block freed by cudaFreeAsync on stream s may be
 * handed out again by cudaMallocAsync on s at once (stream order makes that safe), and on any
 * stream once the free has executed; the free itself, when its stream reaches it, reports queued
 * work that still uses the memory and poisons it. At a synchronize, free blocks above the release
 * threshold (default 0, as on the device) go back to the system. Reserved and used bytes (current
 * and high) as cudaMemPoolGetAttribute reports them. What it is not: the device's 2 MiB
 * sub-allocation granularity; blocks here are whole pages. */
enum cudaMemPoolAttr { cudaMemPoolReuseFollowEventDependencies = 1, cudaMemPoolReuseAllowOpportunistic = 2,
                       cudaMemPoolReuseAllowInternalDependencies = 3, cudaMemPoolAttrReleaseThreshold = 4,
                       cudaMemPoolAttrReservedMemCurrent = 5, cudaMemPoolAttrReservedMemHigh = 6,
                       cudaMemPoolAttrUsedMemCurrent = 7, cudaMemPoolAttrUsedMemHigh = 8 };
struct emu_free_block {
    uintptr_t p;
    emu_stream *s;  /* freed on */
    uint64_t seq;   /* the free's position on s */
};
struct emu_pool {
    uint64_t threshold = 0, reserved = 0, reserved_high = 0, used = 0, used_high = 0;
    std::vector<emu_free_block> free_blocks;
};
typedef emu_pool *cudaMemPool_t;
inline emu_pool emu_default_pool;
inline cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *p, int dev) {
    if (dev != emu_device) return emu_fail(cudaErrorInvalidValue);
    *p = &emu_default_pool;
    return cudaSuccess;
}
inline cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t p, cudaMemPoolAttr a, void *v) {
    const uint64_t x = *(uint64_t *)v;
    switch (a) {
    case cudaMemPoolAttrReleaseThreshold: p->threshold = x; return cudaSuccess;
    case cudaMemPoolAttrReservedMemHigh: if (x) break; p->reserved_high = p->reserved; return cudaSuccess;
    case cudaMemPoolAttrUsedMemHigh: if (x) break; p->used_high = p->used; return cudaSuccess;
    default: break;
    }
    return emu_fail(cudaErrorInvalidValue);
}
inline cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t p, cudaMemPoolAttr a, void *v) {
    uint64_t x;
    switch (a) {
    case cudaMemPoolAttrReleaseThreshold: x = p->threshold; break;
    case cudaMemPoolAttrReservedMemCurrent: x = p->reserved; break;
    case cudaMemPoolAttrReservedMemHigh: x = p->reserved_high; break;
    case cudaMemPoolAttrUsedMemCurrent: x = p->used; break;
    case cudaMemPoolAttrUsedMemHigh: x = p->used_high; break;
    default: return emu_fail(cudaErrorInvalidValue);
    }
    *(uint64_t *)v = x;
    return cudaSuccess;
}
/* free blocks whose free has executed go back to the system until reserved <= keep */
inline void emu_pool_trim(emu_pool *pl, uint64_t keep) {
    for (size_t i = 0; i < pl->free_blocks.size() && pl->reserved > keep;) {
        emu_free_block &f = pl->free_blocks[i];
        if (f.s->done < f.seq) { i++; continue; }
        emu_alloc &a = emu_allocs[f.p];
        a.released = true;
        emu_arena_release((void *)f.p, a.block);
        pl->reserved -= a.block;
        emu_state.n.pool_release++;
        pl->free_blocks.erase(pl->free_blocks.begin() + (long)i);
    }
}
inline void emu_pool_trim_at_sync() { emu_pool_trim(&emu_default_pool, emu_default_pool.threshold); }
inline cudaError_t cudaMemPoolTrimTo(cudaMemPool_t p, size_t keep) { emu_pool_trim(p, keep); return cudaSuccess; }
inline cudaError_t cudaMallocAsync(void **out, size_t bytes, cudaStream_t st) {
    emu_state.n.cudaMallocAsync++;
    emu_pool *pl = &emu_default_pool;
    emu_stream *s = emu_S(st);
    const size_t need = ((bytes ? bytes : 1) + emu_page - 1) / emu_page * emu_page;
    long best = -1;
    for (size_t i = 0; i < pl->free_blocks.size(); i++) {
        const emu_free_block &f = pl->free_blocks[i];
        const size_t b = emu_allocs[f.p].block;
        /* reuse a block of the same stream at once, of another once its free has run; no block
           more than twice the request (the device would split it; here it would waste it) */
        if (b < need || b > 2 * need || (f.s != s && f.s->done < f.seq)) continue;
        if (best < 0 || b < emu_allocs[pl->free_blocks[(size_t)best].p].block) best = (long)i;
    }
    uintptr_t p;
    if (best >= 0) {
        p = pl->free_blocks[(size_t)best].p;
        pl->free_blocks.erase(pl->free_blocks.begin() + best);
    } else {
        size_t block = 0;
        void *q = emu_arena_get(bytes, &block);
        if (!q) return emu_fail(cudaErrorMemoryAllocation);
        p = (uintptr_t)q;
        emu_allocs[p] = emu_alloc{block, 0, 0, false, true, false};
        pl->reserved += block;
        if (pl->reserved > pl->reserved_high) pl->reserved_high = pl->reserved;
        emu_state.n.pool_grow++;
    }
    emu_alloc &a = emu_allocs[p];
    a.bytes = bytes;
    a.id = ++emu_alloc_ids;
    a.live = true;
    pl->used += a.block;
    if (pl->used > pl->used_high) pl->used_high = pl->used;
    *out = (void *)p;
    return cudaSuccess;
}
inline cudaError_t cudaFreeAsync(void *ptr, cudaStream_t st) {
    emu_state.n.cudaFreeAsync++;
    emu_pool *pl = &emu_default_pool;
    auto it = emu_allocs.find((uintptr_t)ptr);
    if (it == emu_allocs.end() || !it->second.live || !it->second.pool) {
        emu_error("cudaFreeAsync of %p, which is not a live cudaMallocAsync allocation", ptr);
        return emu_fail(cudaErrorInvalidValue);
    }
    emu_alloc &a = it->second;
    a.live = false; /* from now on the host may not queue work that uses it */
    pl->used -= a.block;
    const uint64_t id = a.id;
    const size_t block = a.block, bytes = a.bytes;
    emu_stream *s = emu_S(st);
    emu_enqueue(s, "cudaFreeAsync", [ptr, id, block, bytes] {
        for (emu_stream *o : emu_streams)
            for (const emu_item &w : o->q)
                for (uint64_t r : w.refs)
                    if (r == id) {
                        emu_error("cudaFreeAsync of %p (%zu bytes) ran while queued work (%s on stream %p) still "
                                  "uses it: a missing event wait before the free", ptr, bytes, w.what, (void *)o);
                        goto poison;
                    }
    poison:
        /* poisoned even when the block was handed out again on this stream: its new work comes
           after the free in stream order, and new memory has no defined content */
        memset(ptr, 0xff, block);
        return 1;
    });
    pl->free_blocks.push_back({(uintptr_t)ptr, s, s->enq});
    return cudaSuccess;
}

/* ---- kernel launches: the arguments are copied now, the grid runs when its stream reaches it ---- */
template <typename T> inline void emu_ref_arg(std::vector<uint64_t> &refs, const T &v, const char *what) {
    if constexpr (std::is_pointer_v<T>) emu_ref(refs, (const void *)v, what);
}
inline void emu_run_grid(dim3 grid, dim3 block, const std::function<void()> &f, const char *name) {
    const unsigned nt = block.x * block.y * block.z;
    gridDim = grid;
    blockDim = block;
    emu_threads.resize(nt);
    /* garbage in shared memory, as on the device: reads before writes show up as wrong results */
    memset(emu_smem_buf.data(), 0x7f, emu_smem_buf.size());
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                emu_barrier bb(nt), wb[32];
                emu_block st;
                st.block = &bb;
                for (unsigned w = 0; w < nt / 32; w++) { wb[w].n = 32; st.warp[w] = &wb[w]; }
                emu_cur = &st;
                emu_threads.run(f, block, bx, by, bz, name); /* a fiber per CUDA thread (cuda_emu_threads.cuh) */
            }
}
template <typename K, typename... A>
inline void emu_launch(dim3 grid, dim3 block, size_t smem, cudaStream_t st, const char *name, K kernel, A... args) {
    const unsigned nt = block.x * block.y * block.z;
    if (nt == 0 || nt > 1024 || nt % 32 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
        grid.z > 65535 || smem > emu_smem_limit) {
        fprintf(stderr, "emu: bad launch of %s: grid (%u,%u,%u) block (%u,%u,%u) smem %zu (limit %zu)\n", name,
                grid.x, grid.y, grid.z, block.x, block.y, block.z, smem, emu_smem_limit);
        emu_last_error = cudaErrorInvalidValue;
        return;
    }
    emu_state.n.launches++;
    emu_state.by_kernel[name]++;
    std::vector<uint64_t> refs;
    (emu_ref_arg(refs, args, name), ...);
    auto tup = std::make_tuple(args...);
    emu_enqueue(st, name, [grid, block, kernel, tup, name] {
        emu_run_grid(grid, block, [&] { std::apply(kernel, tup); }, name);
        return 1;
    }, std::move(refs));
}

#include "tests/emu/cuda_emu_cublas.cuh" /* cuBLAS as checked column-major loops */
#include "tests/emu/cuda_emu_mma.cuh" /* warp-level matrix operations (mma.sync) */
#include "tests/emu/cuda_emu_ptx.cuh" /* cp.async, ldmatrix, ex2.approx */
#endif
