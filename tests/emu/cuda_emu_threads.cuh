/* tests/emu/cuda_emu_threads.cuh — how the emulator runs the threads of a block (cuda_emu.cuh).
 *
 * What it is: every CUDA thread of a block is a fiber (a stack of its own, 1 MiB reserved, with a
 * guard page) on the host thread that runs the grid; a barrier (emu_barrier: __syncthreads, and
 * the warp barriers of __syncwarp, shuffles, mma and ldmatrix) parks the fiber that reaches it
 * until every thread of its block or warp has, and the scheduler runs the others. Each pass over
 * the runnable fibers takes them in an order drawn from MESHSWEEP_EMU_SEED (default 1; a generator
 * of its own, so the streams' order of cuda_emu.cuh does not move with it), so code between two
 * barriers runs in a different thread order from phase to phase, and a read that needs a missing
 * __syncthreads shows up as a wrong result. A barrier that only part of a block or warp can reach
 * (a thread returned early, a divergent __syncthreads) leaves no fiber runnable: that is reported
 * ("emu: deadlock in a block") and the process aborts, where host threads would hang.
 * Switching fibers is a few instructions (x86-64: callee-saved registers and the stack pointer;
 * elsewhere ucontext), against a futex wake-up and sleep per thread per barrier for host threads,
 * which made the emulator suites spend most of their time in the kernel.
 * What it is not: concurrency (one fiber runs at a time, blocks one after another, and
 * emu_run_grid is only entered from the thread that drains the streams, one grid at a time), nor a
 * model of warp-synchronous execution (lanes of a warp run as independent threads between barriers,
 * as on Volta and later).
 * Per-thread state of the emulator lives per CUDA thread index (cuda_emu_ptx.cuh's cp.async groups)
 * and is reset before each block as a fresh thread's would be (emu_thread_reset).
 */
#ifndef MESHSWEEP_CUDA_EMU_THREADS_CUH
#define MESHSWEEP_CUDA_EMU_THREADS_CUH
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <sys/mman.h>
#include <vector>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

inline void emu_thread_reset(); /* per-thread state a new thread starts without (cuda_emu_ptx.cuh) */

/* a barrier of n threads: the last to arrive goes on; the others wait for the next generation */
struct emu_barrier {
    unsigned n = 0, arrived = 0;
    unsigned long gen = 0;
    explicit emu_barrier(unsigned n_ = 0) : n(n_) {}
    void arrive_and_wait();
};

#if defined(__x86_64__)
/* emu_ctx_switch(&from_sp, to_sp): push the callee-saved registers, keep the stack pointer in
 * *from_sp, take to_sp's and pop its registers (weak: every translation unit carries it) */
extern "C" void emu_ctx_switch(void **from_sp, void *to_sp);
asm(".text\n.weak emu_ctx_switch\n.type emu_ctx_switch,@function\nemu_ctx_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n  ret\n"
    ".size emu_ctx_switch, .-emu_ctx_switch\n");
#endif

inline void emu_fiber_start();

struct emu_block_threads {
    enum { RUNNABLE, BLOCKED, DONE };
    static constexpr size_t STACK = 1u << 20, GUARD = 1u << 16;
    struct fiber {
        char *mem = nullptr;          /* guard page, then the stack */
        int state = DONE;
        const emu_barrier *bar = nullptr;
        unsigned long gen = 0;        /* the barrier's generation it waits to pass */
#if defined(__x86_64__)
        void *sp = nullptr;
#else
        ucontext_t ctx;
#endif
    };
    std::vector<std::unique_ptr<fiber>> f;
    unsigned nt = 0;                  /* threads of the current block */
    int cur = -1;                     /* the fiber running, -1: the scheduler */
#if defined(__x86_64__)
    void *home_sp = nullptr;
#else
    ucontext_t home;
#endif
    const std::function<void()> *fn = nullptr;
    dim3 block;
    std::vector<unsigned> order;
    uint64_t rng = 0;
    const char *kernel = "";

    uint64_t next_rand() {
        if (!rng) {
            const char *e = getenv("MESHSWEEP_EMU_SEED");
            rng = (e && *e ? strtoull(e, nullptr, 10) : 1) * 0xD1B54A32D192ED03ull + 0x2545F4914F6CDD1Dull;
        }
        uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    void resize(unsigned n) {
        while (f.size() < n) {
            auto q = std::make_unique<fiber>();
            void *m = mmap(nullptr, STACK + GUARD, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (m == MAP_FAILED) { perror("emu: fiber stack"); abort(); }
            mprotect(m, GUARD, PROT_NONE);
            q->mem = (char *)m;
            f.push_back(std::move(q));
        }
        nt = n;
        order.resize(n);
    }
    void set_tid(unsigned t) { threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)}; }
    /* into fiber i (from the scheduler), and back */
    void enter(unsigned i) {
        cur = (int)i;
        set_tid(i);
#if defined(__x86_64__)
        emu_ctx_switch(&home_sp, f[i]->sp);
#else
        swapcontext(&home, &f[i]->ctx);
#endif
        cur = -1;
    }
    void leave() {
        fiber &q = *f[(unsigned)cur];
#if defined(__x86_64__)
        emu_ctx_switch(&q.sp, home_sp);
#else
        swapcontext(&q.ctx, &home);
#endif
    }
    void prepare(unsigned i) {
        fiber &q = *f[i];
        q.state = RUNNABLE;
        q.bar = nullptr;
        char *top = q.mem + GUARD + STACK;
#if defined(__x86_64__)
        void **sp = (void **)(top - 16);   /* emu_fiber_start begins as if called: rsp = 8 mod 16 */
        *sp = (void *)&emu_fiber_start;
        for (int r = 0; r < 6; r++) *--sp = nullptr;   /* r15 .. rbp */
        q.sp = sp;
#else
        getcontext(&q.ctx);
        q.ctx.uc_stack.ss_sp = q.mem + GUARD;
        q.ctx.uc_stack.ss_size = STACK;
        q.ctx.uc_link = nullptr;
        makecontext(&q.ctx, emu_fiber_start, 0);
#endif
    }
    /* run fn on every thread of one block, in seeded orders from barrier to barrier */
    void run(const std::function<void()> &fn_, dim3 blk, unsigned x, unsigned y, unsigned z, const char *name) {
        fn = &fn_; block = blk; kernel = name;
        blockIdx = {x, y, z};
        for (unsigned i = 0; i < nt; i++) { prepare(i); order[i] = i; }
        unsigned left = nt;
        while (left) {
            for (unsigned i = nt; i > 1; i--) std::swap(order[i - 1], order[next_rand() % i]);
            bool ran = false;
            for (unsigned k = 0; k < nt; k++) {
                fiber &q = *f[order[k]];
                if (q.state == BLOCKED && q.bar->gen != q.gen) q.state = RUNNABLE;
                if (q.state != RUNNABLE) continue;
                enter(order[k]);
                ran = true;
                if (q.state == DONE) left--;
            }
            if (!ran) {
                fprintf(stderr, "emu: deadlock in a block of %s (block (%u,%u,%u)): %u of %u threads wait at a barrier "
                        "(__syncthreads, __syncwarp, a shuffle, mma or ldmatrix) that the others cannot reach\n",
                        kernel, x, y, z, left, nt);
                abort();
            }
        }
    }
    void wait_at(const emu_barrier *b, unsigned long gen) {
        if (cur < 0) { fprintf(stderr, "emu: a barrier outside a kernel\n"); abort(); }
        fiber &q = *f[(unsigned)cur];
        q.state = BLOCKED; q.bar = b; q.gen = gen;
        int me = cur;
        leave();
        cur = me;   /* resumed by the scheduler (enter) after the barrier's generation moved on */
    }
    void finished() {
        f[(unsigned)cur]->state = DONE;
        leave();
    }
};
/* never destroyed: a process may exit from inside a kernel (an emulator report), on a fiber's stack */
inline emu_block_threads &emu_threads = *new emu_block_threads;

inline void emu_barrier::arrive_and_wait() {
    if (++arrived == n) { arrived = 0; gen++; return; }
    emu_threads.wait_at(this, gen);
}
inline void emu_fiber_start() {
    emu_thread_reset();
    (*emu_threads.fn)();
    emu_threads.finished();
    abort(); /* not reached: a finished fiber is never entered again */
}
#endif
