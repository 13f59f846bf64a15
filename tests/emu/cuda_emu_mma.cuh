/* tests/emu/cuda_emu_mma.cuh — the warp-level tensor-core operation the kernels of kernels/cuda use,
 * emulated on the host: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32.
 *
 * What it is: included by cuda_emu.cuh (MESHSWEEP_CUDA_EMU builds only). The kernels call
 * mma_m16n8k16_bf16(d, a, b, c) with the per-lane fragments of PTX ISA "Matrix Fragments for
 * mma.m16n8k16 with floating point type" (groupID g = lane >> 2, t = lane % 4; elements low half
 * first in each 32-bit register):
 *   A 16x16 row-major, 4 regs {a0,a1},{a2,a3},{a4,a5},{a6,a7}: ai at row g (i in 0,1,4,5) or g+8
 *     (otherwise), column 2t + (i & 1) (+8 for i >= 4);
 *   B 16x8 ("col"), 2 regs {b0,b1},{b2,b3}: bi at row 2t + (i & 1) (+8 for i >= 2), column g;
 *   C, D 16x8 fp32, 4 floats: ci at row g (i < 2) or g+8, column 2t + (i & 1).
 * Every lane publishes its registers in a per-warp array, the warp meets at a barrier, every lane
 * rebuilds the whole A, B and C from all 32 lanes' registers by that table and computes its own
 * four elements of D = A·B + C (fp32 sum of the exact bf16 products in increasing k), and a second
 * barrier keeps the array until all have read it. A kernel that fills its fragments with another
 * layout therefore computes another product here, as it would on the device; a warp in which not
 * all 32 lanes reach the mma is reported as a deadlock, as the instruction is undefined then.
 * In the device build the same name is the inline PTX in kernels/cuda/cuda_ptx.cuh.
 * What it is not: a model of the hardware's accumulation order or timing, nor WMMA; ldmatrix and
 * cp.async, which fill the fragments' shared tiles, are in tests/emu/cuda_emu_ptx.cuh.
 */
#ifndef MESHSWEEP_CUDA_EMU_MMA_CUH
#define MESHSWEEP_CUDA_EMU_MMA_CUH

/* [warp][lane][a0..a3, b0..b1, c0..c3 as bits]; blocks run one after another (cuda_emu.cuh), so
 * one array per warp index is enough */
inline uint32_t emu_mma_regs[32][32][10];

inline float emu_bf16_lo(uint32_t r) { return __uint_as_float(r << 16); }
inline float emu_bf16_hi(uint32_t r) { return __uint_as_float(r & 0xffff0000u); }

inline void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
    const int t = emu_tid(), w = t / 32, lane = t % 32;
    uint32_t *mine = emu_mma_regs[w][lane];
    for (int i = 0; i < 4; i++) mine[i] = a[i];
    for (int i = 0; i < 2; i++) mine[4 + i] = b[i];
    for (int i = 0; i < 4; i++) mine[6 + i] = __float_as_uint(c[i]);
    emu_cur->warp[w]->arrive_and_wait();
    float A[16][16], B[16][8], C[16][8];
    for (int L = 0; L < 32; L++) {
        const uint32_t *r = emu_mma_regs[w][L];
        const int g = L >> 2, q = L & 3;
        for (int i = 0; i < 8; i++) {
            const int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
            const int col = 2 * q + (i & 1) + (i >= 4 ? 8 : 0);
            const uint32_t reg = r[i / 2];
            A[row][col] = (i & 1) ? emu_bf16_hi(reg) : emu_bf16_lo(reg);
        }
        for (int i = 0; i < 4; i++) {
            const int row = 2 * q + (i & 1) + (i >= 2 ? 8 : 0);
            const uint32_t reg = r[4 + i / 2];
            B[row][g] = (i & 1) ? emu_bf16_hi(reg) : emu_bf16_lo(reg);
        }
        for (int i = 0; i < 4; i++) C[i < 2 ? g : g + 8][2 * q + (i & 1)] = __uint_as_float(r[6 + i]);
    }
    emu_cur->warp[w]->arrive_and_wait();
    const int g = lane >> 2, q = lane & 3;
    for (int i = 0; i < 4; i++) {
        const int row = i < 2 ? g : g + 8, col = 2 * q + (i & 1);
        float s = 0.0f;
        for (int k = 0; k < 16; k++) s += A[row][k] * B[k][col];
        d[i] = s + C[row][col];
    }
}

#endif
