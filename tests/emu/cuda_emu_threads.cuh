/* tests/emu/cuda_emu_threads.cuh — the host threads the emulator runs a block on (cuda_emu.cuh).
 *
 * What it is: one host thread per CUDA thread, as before, but made once per block shape and reused
 * for every block of every grid of that shape, instead of created and joined for each block: a
 * grid of a thousand 256-thread blocks was a quarter of a million thread creations. The threads
 * of the pool wait on a start barrier; the launching thread sets the block's coordinates, passes
 * the start barrier, and waits on the end barrier, which every thread of the pool reaches after
 * running the kernel body for its (threadIdx, blockIdx). Blocks still run one after another, every
 * CUDA thread on a thread of its own (so __syncthreads, __syncwarp and shuffles reached by part of
 * a block or warp still deadlock), and a thread's per-thread emulator state is reset before each
 * block as a fresh thread's would be (emu_thread_reset: cp.async groups, cuda_emu_ptx.cuh).
 * What it is not: concurrency between blocks or grids (emu_run_grid is only entered from the
 * thread that drains the streams, one grid at a time).
 */
#ifndef MESHSWEEP_CUDA_EMU_THREADS_CUH
#define MESHSWEEP_CUDA_EMU_THREADS_CUH
#include <barrier>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

inline void emu_thread_reset(); /* per-thread state a new thread starts without (cuda_emu_ptx.cuh) */

struct emu_block_threads {
    unsigned nt = 0;                                 /* threads per block this pool runs */
    std::unique_ptr<std::barrier<>> start, end;      /* nt workers + the launching thread */
    std::vector<std::thread> th;
    /* what the next block is: read by the workers after the start barrier */
    const std::function<void()> *f = nullptr;
    dim3 block;
    unsigned bx = 0, by = 0, bz = 0;
    bool quit = false;

    void stop() {
        if (!nt) return;
        quit = true;
        start->arrive_and_wait();
        for (auto &t : th) t.join();
        th.clear();
        nt = 0;
        quit = false;
    }
    void resize(unsigned n) {
        if (n == nt) return;
        stop();
        nt = n;
        start = std::make_unique<std::barrier<>>((std::ptrdiff_t)n + 1);
        end = std::make_unique<std::barrier<>>((std::ptrdiff_t)n + 1);
        th.reserve(n);
        for (unsigned t = 0; t < n; t++)
            th.emplace_back([this, t] {
                for (;;) {
                    start->arrive_and_wait();
                    if (quit) return;
                    threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                    blockIdx = {bx, by, bz};
                    emu_thread_reset();
                    (*f)();
                    end->arrive_and_wait();
                }
            });
    }
    /* run f on every thread of one block and wait for all of them */
    void run(const std::function<void()> &fn, dim3 blk, unsigned x, unsigned y, unsigned z) {
        f = &fn; block = blk; bx = x; by = y; bz = z;
        start->arrive_and_wait();
        end->arrive_and_wait();
    }
};
/* never destroyed: a process may exit from inside a kernel (an emulator report), where joining the
 * pool would wait for the thread that is exiting; the threads end with the process */
inline emu_block_threads &emu_threads = *new emu_block_threads;
#endif
