/* tests/emu/cuda_emu_ptx.cuh — the asynchronous copies, warp matrix loads and fast exponential the
 * tensor-core kernels use, emulated on the host with the semantics of the PTX ISA:
 *   cp.async.ca.shared.global [dst], [src], 4|8|16, src-size;  cp.async.cg ... 16, src-size;
 *   cp.async.commit_group;  cp.async.wait_group N;
 *   ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{,.trans}.shared.b16;  ex2.approx.ftz.f32.
 *
 * What it is: included by cuda_emu.cuh (MESHSWEEP_CUDA_EMU builds only). The device build gets the
 * same names as inline PTX from kernels/cuda/cuda_ptx.cuh; kernels call only these names.
 * cp.async  A copy is issued by one thread; its destination is POISONED at the issue (0xff bytes:
 *           a NaN in bf16 and fp32) and the source bytes are taken then, but they are written to
 *           the destination only when the thread's cp.async.wait_group retires the copy's group.
 *           commit_group closes the thread's open copies into a group (an empty group is a group);
 *           wait_group N retires the oldest committed groups until at most N are pending; copies
 *           not yet committed are never retired. So a read of the destination before the matching
 *           wait (by any thread; a missing __syncthreads after the wait shows as a race between the
 *           host threads) sees NaNs, and an off-by-one N leaves the newest tile unwritten.
 *           src-size < cp-size fills the rest with zeros (src-size 0 reads nothing). Reported
 *           (emu_error): a size other than 4, 8, 16 for .ca or 16 for .cg, a src-size above it, a
 *           destination or source not aligned to the cp-size, a source outside device memory, a
 *           destination inside it. Copies a thread leaves unretired at its exit are dropped.
 * ldmatrix  Lane 8·i + r supplies the address of row r of matrix i (16 bytes, 16-byte aligned, in
 *           shared memory; only lanes 0-7 count for .x1 and 0-15 for .x2, the others' addresses are
 *           ignored). Register i of lane L = 4·g + t receives, of matrix i, the two elements of row
 *           g at columns 2t, 2t+1 (low half first); with .trans those of column g at rows 2t, 2t+1.
 *           The lanes meet at a warp barrier as for a shuffle: a warp in which not all 32 lanes
 *           reach the instruction is reported as a deadlock.
 * ex2       2^x with flush-to-zero of subnormal inputs and results, and an error of up to 2 units in
 *           the last place (the documented bound of exp2f / ex2.approx) drawn from the argument's
 *           bits (integer arguments give the exact power of two): a kernel whose result depends on
 *           exact exponentials fails its tolerance here.
 * What it is not: a timing or bank-conflict model, nor the cp.async.bulk / TMA / wgmma families.
 */
#ifndef MESHSWEEP_CUDA_EMU_PTX_CUH
#define MESHSWEEP_CUDA_EMU_PTX_CUH

/* ---- cp.async ------------------------------------------------------------------------------- */
struct emu_cp {
    void *dst;
    int bytes;
    unsigned char data[16];
};
/* per CUDA thread of the block (the fibers share one host thread: cuda_emu_threads.cuh) */
inline std::vector<emu_cp> emu_cp_open_of[1024];                 /* issued, not committed */
inline std::deque<std::vector<emu_cp>> emu_cp_groups_of[1024];   /* committed, not retired */
#define emu_cp_open (emu_cp_open_of[emu_tid()])
#define emu_cp_groups (emu_cp_groups_of[emu_tid()])
/* a thread starts each block as a new thread would: no copies in flight */
inline void emu_thread_reset() {
    emu_cp_open.clear();
    emu_cp_groups.clear();
}

inline void emu_cp_async(const char *what, void *dst, const void *src, int cp_bytes, int src_bytes) {
    if (src_bytes < 0 || src_bytes > cp_bytes) {
        emu_error("%s: src-size %d outside [0, %d]", what, src_bytes, cp_bytes);
        return;
    }
    if ((uintptr_t)dst % (uintptr_t)cp_bytes || (src_bytes > 0 && (uintptr_t)src % (uintptr_t)cp_bytes)) {
        emu_error("%s: %d-byte copy with a misaligned address (dst %p, src %p)", what, cp_bytes, dst, src);
        return;
    }
    if (emu_is_device(dst)) {
        emu_error("%s: destination %p is device (global) memory, not shared memory", what, dst);
        return;
    }
    if (src_bytes > 0 && !emu_is_device(src)) {
        emu_error("%s: source %p is not device (global) memory", what, src);
        return;
    }
    emu_cp c;
    c.dst = dst;
    c.bytes = cp_bytes;
    memset(c.data, 0, sizeof c.data);
    if (src_bytes > 0) memcpy(c.data, src, (size_t)src_bytes);
    memset(dst, 0xff, (size_t)cp_bytes); /* undefined until the wait: poisoned */
    emu_cp_open.push_back(c);
}
template <int BYTES> inline void cp_async_ca(void *dst, const void *src, int src_bytes) {
    if constexpr (BYTES != 4 && BYTES != 8 && BYTES != 16) emu_error("cp.async.ca: cp-size %d", BYTES);
    else emu_cp_async("cp.async.ca", dst, src, BYTES, src_bytes);
}
inline void cp_async_cg(void *dst, const void *src, int src_bytes) {
    emu_cp_async("cp.async.cg", dst, src, 16, src_bytes);
}
inline void cp_async_commit() {
    emu_cp_groups.push_back(std::move(emu_cp_open));
    emu_cp_open.clear();
}
template <int N> inline void cp_async_wait() {
    static_assert(N >= 0 && N <= 7, "cp.async.wait_group takes 0..7 here");
    while (emu_cp_groups.size() > (size_t)N) {
        for (const emu_cp &c : emu_cp_groups.front()) memcpy(c.dst, c.data, (size_t)c.bytes);
        emu_cp_groups.pop_front();
    }
}

/* ---- ldmatrix ------------------------------------------------------------------------------- */
template <int NUM, bool TRANS> inline void emu_ldmatrix(uint32_t *r, const void *row) {
    static_assert(NUM == 1 || NUM == 2 || NUM == 4, "ldmatrix .x1, .x2 or .x4");
    const int t = emu_tid(), w = t / 32, lane = t % 32;
    emu_cur->slot[w][lane] = (uint64_t)(uintptr_t)row;
    emu_cur->warp[w]->arrive_and_wait();
    if (lane < 8 * NUM) { /* the lanes whose addresses count check their own */
        if ((uintptr_t)row % 16u) emu_error("ldmatrix: row address %p (lane %d) not 16-byte aligned", row, lane);
        else if (emu_is_device(row)) emu_error("ldmatrix: row address %p (lane %d) is not shared memory", row, lane);
    }
    const int g = lane >> 2, q = lane & 3;
    for (int i = 0; i < NUM; i++) {
        uint16_t lo, hi;
        if (!TRANS) {
            const uint16_t *p = (const uint16_t *)(uintptr_t)emu_cur->slot[w][8 * i + g];
            lo = p[2 * q];
            hi = p[2 * q + 1];
        } else {
            lo = ((const uint16_t *)(uintptr_t)emu_cur->slot[w][8 * i + 2 * q])[g];
            hi = ((const uint16_t *)(uintptr_t)emu_cur->slot[w][8 * i + 2 * q + 1])[g];
        }
        r[i] = (uint32_t)lo | (uint32_t)hi << 16;
    }
    emu_cur->warp[w]->arrive_and_wait();
}
inline void ldsm_x1(uint32_t r[1], const void *row) { emu_ldmatrix<1, false>(r, row); }
inline void ldsm_x2(uint32_t r[2], const void *row) { emu_ldmatrix<2, false>(r, row); }
inline void ldsm_x4(uint32_t r[4], const void *row) { emu_ldmatrix<4, false>(r, row); }
inline void ldsm_x1_trans(uint32_t r[1], const void *row) { emu_ldmatrix<1, true>(r, row); }
inline void ldsm_x2_trans(uint32_t r[2], const void *row) { emu_ldmatrix<2, true>(r, row); }
inline void ldsm_x4_trans(uint32_t r[4], const void *row) { emu_ldmatrix<4, true>(r, row); }

/* ---- ex2.approx.ftz.f32 --------------------------------------------------------------------- */
inline float emu_ftz(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; }
inline float ex2_approx(float x) {
    x = emu_ftz(x);
    if (std::isnan(x)) return x;
    float y = emu_ftz((float)std::exp2((double)x));
    if (y == 0.0f || std::isinf(y) || x == std::floor(x)) return y; /* powers of two stay exact */
    /* -2..+2 ulp from the argument's bits (splitmix finaliser), staying finite and normal */
    uint64_t z = (uint64_t)__float_as_uint(x) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
    const int d = (int)((z >> 40) % 5u) - 2;
    const uint32_t u = __float_as_uint(y);
    const uint32_t v = (uint32_t)((int64_t)u + d);
    if ((v & 0x7f800000u) == (u & 0x7f800000u)) y = __uint_as_float(v);
    return y;
}

#endif
