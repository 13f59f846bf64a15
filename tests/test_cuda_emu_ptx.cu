/* tests/test_cuda_emu_ptx.cu — self-test of the emulated PTX instructions of
 * tests/emu/cuda_emu_ptx.cuh: cp.async (ca 4/8/16, cg 16, zero fill, commit_group, wait_group N),
 * ldmatrix (x1/x2/x4, .trans) and ex2.approx.
 * Each rule is checked from both sides: the right use gives the right data, and the mistake the
 * rule exists to catch gives wrong data or an emulator report — a read before the matching wait,
 * a wait_group N one too large, a copy never committed, the .trans variant where the plain one
 * belongs (the emulated mma then computes another product than the host), a misaligned or
 * non-global source. The lane mapping of ldmatrix is checked against the ISA's statement with rows
 * given in a permuted order, so the addresses are followed, not assumed. Emulator only: built by
 * tests/t_cuda_emu.sh as C++ against the emulator (the device side of the same instructions is
 * checked by tests/test_cuda_attention.c through cuda_mma_selftest on a GPU).
 */
#include "kernels/cuda/cuda_common.cuh"
#include "tests/check.h"

#define LAUNCH1(nt, kernel, ...) \
    emu_launch(dim3(1), dim3(nt), 0, (cudaStream_t)0, #kernel, [](auto... a_) { kernel(a_...); }, __VA_ARGS__)

static void *dev(size_t bytes) {
    void *p = NULL;
    cudaCheck(cudaMalloc(&p, bytes));
    return p;
}
static void get(void *h, const void *d, size_t bytes) { cudaCheck(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost)); }
static void put(void *d, const void *h, size_t bytes) { cudaCheck(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice)); }

/* ---- cp.async --------------------------------------------------------------------------------
 * 32 threads, 16 bytes (4 floats) each: tile t of src is floats [128 t, 128 t + 128).
 * mode 0: copy tile 0, commit, wait 0, barrier, read           -> tile 0
 * mode 1: the same without the wait                            -> poison
 * mode 2: tiles 0 and 1 as two groups; wait 1 reads both (out[0..255]), wait 0 reads both again
 *         (out[256..511])                                      -> tile 0 + poison, then tiles 0 and 1
 * mode 3: tile 0 issued, never committed; wait 0; read (out[0..127]); commit; wait 0; read again
 *                                                              -> poison, then tile 0 */
static __global__ void cp_kernel(float *out, const float *src, int mode) {
    __shared__ __align__(16) float sh[256];
    const int t = threadIdx.x;
    for (int i = t; i < 256; i += 32) sh[i] = 12345.0f; /* a value no copy brings */
    __syncthreads();
    cp_async_cg(sh + 4 * t, src + 4 * t, 16);
    if (mode == 2) {
        cp_async_commit();
        cp_async_cg(sh + 128 + 4 * t, src + 128 + 4 * t, 16);
    }
    if (mode != 3) cp_async_commit();
    if (mode == 0) cp_async_wait<0>();
    if (mode == 2) cp_async_wait<1>();
    if (mode == 3) cp_async_wait<0>();
    __syncthreads();
    for (int i = t; i < 256; i += 32) out[i] = sh[i];
    __syncthreads();
    if (mode == 2 || mode == 3) {
        if (mode == 3) cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();
        for (int i = t; i < 256; i += 32) out[256 + i] = sh[i];
    }
}
/* how many of out[o, o + n) equal src[s + i] */
static int same(const float *out, int o, const float *src, int s, int n) {
    int k = 0;
    for (int i = 0; i < n; i++) k += memcmp(&out[o + i], &src[s + i], 4) == 0;
    return k;
}
static int poisoned(const float *out, int o, int n) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &out[o + i], 4);
        k += u == 0xffffffffu;
    }
    return k;
}
static void test_cp_async(void) {
    float src[256], out[512];
    for (int i = 0; i < 256; i++) src[i] = 1.0f + (float)i;
    float *d_src = (float *)dev(sizeof src), *d_out = (float *)dev(sizeof out);
    put(d_src, src, sizeof src);
    for (int mode = 0; mode < 4; mode++) {
        LAUNCH1(32, cp_kernel, d_out, (const float *)d_src, mode);
        get(out, d_out, sizeof out);
        if (mode == 0)
            CHECK(same(out, 0, src, 0, 128) == 128, "emu_ptx_cp_async_wait_shows_data", "%d of 128 copied",
                  same(out, 0, src, 0, 128));
        if (mode == 1)
            CHECK(poisoned(out, 0, 128) == 128, "emu_ptx_cp_async_missing_wait_fails",
                  "%d of 128 floats read before any wait were already the data", same(out, 0, src, 0, 128));
        if (mode == 2) {
            CHECK(same(out, 0, src, 0, 128) == 128 && poisoned(out, 128, 128) == 128, "emu_ptx_cp_async_wait_group_1",
                  "after wait_group 1: %d of tile 0 copied, %d of tile 1 still undefined (want 128, 128)",
                  same(out, 0, src, 0, 128), poisoned(out, 128, 128));
            CHECK(same(out, 256, src, 0, 256) == 256, "emu_ptx_cp_async_wait_group_0", "%d of 256 after wait_group 0",
                  same(out, 256, src, 0, 256));
        }
        if (mode == 3)
            CHECK(poisoned(out, 0, 128) == 128 && same(out, 256, src, 0, 128) == 128,
                  "emu_ptx_cp_async_uncommitted_not_waited",
                  "an uncommitted copy: %d undefined after wait_group 0 (want 128), %d copied after commit",
                  poisoned(out, 0, 128), same(out, 256, src, 0, 128));
    }
    cudaCheck(cudaFree(d_src));
    cudaCheck(cudaFree(d_out));
}

/* zero fill and the .ca sizes: one thread; out[0..3] cg src-size 0, [4..7] cg src-size 8,
 * [8] ca 4, [10..11] ca 8, [12..15] ca 16 src-size 4 */
static __global__ void cp_sizes_kernel(float *out, const float *src) {
    __shared__ __align__(16) float sh[16];
    if (threadIdx.x == 0) {
        cp_async_cg(sh, src, 0);
        cp_async_cg(sh + 4, src + 4, 8);
        cp_async_ca<4>(sh + 8, src + 8, 4);
        sh[9] = -1.0f;
        cp_async_ca<8>(sh + 10, src + 10, 8);
        cp_async_ca<16>(sh + 12, src + 12, 4);
        cp_async_commit();
        cp_async_wait<0>();
        for (int i = 0; i < 16; i++) out[i] = sh[i];
    }
}
/* each call makes one mistake the emulator reports */
static __global__ void cp_bad_kernel(const float *src, const float *host, float *global_dst, int which) {
    __shared__ __align__(16) float sh[8];
    if (threadIdx.x != 0) return;
    if (which == 0) cp_async_cg(sh, src + 1, 16);     /* source not 16-byte aligned */
    if (which == 1) cp_async_ca<8>(sh + 1, src, 8);   /* destination not 8-byte aligned */
    if (which == 2) cp_async_ca<16>(sh, host, 16);    /* a host pointer as the source */
    if (which == 3) cp_async_cg(global_dst, src, 16); /* global memory as the destination */
    if (which == 4) cp_async_cg(sh, src, 17);         /* src-size above the copy size */
    cp_async_commit();
    cp_async_wait<0>();
}
static void test_cp_sizes(void) {
    float src[16], out[16];
    for (int i = 0; i < 16; i++) src[i] = 10.0f + (float)i;
    float *d_src = (float *)dev(sizeof src), *d_out = (float *)dev(sizeof out);
    put(d_src, src, sizeof src);
    LAUNCH1(32, cp_sizes_kernel, d_out, (const float *)d_src);
    get(out, d_out, sizeof out);
    const float want[16] = {0, 0, 0, 0, 14, 15, 0, 0, 18, -1, 20, 21, 22, 0, 0, 0};
    int bad = 0;
    for (int i = 0; i < 16; i++) bad += out[i] != want[i];
    CHECK(bad == 0, "emu_ptx_cp_async_zero_fill_and_sizes", "%d of 16 wrong (out[4] %g, out[13] %g)", bad, out[4],
          out[13]);
    static float host[8];
    int reported = 0;
    for (int which = 0; which < 5; which++) {
        const uint64_t e0 = emu_state.errors;
        LAUNCH1(32, cp_bad_kernel, (const float *)d_src, (const float *)host, d_out, which);
        cudaCheck(cudaDeviceSynchronize());
        reported += emu_state.errors == e0 + 1;
    }
    CHECK(reported == 5, "emu_ptx_cp_async_misuse_reported", "%d of 5 misuses reported", reported);
    cudaCheck(cudaFree(d_src));
    cudaCheck(cudaFree(d_out));
}

/* ---- ldmatrix --------------------------------------------------------------------------------
 * Shared: 32 rows of 8 b16, row s holding value 256·s + c at column c. Lane l gives the address of
 * storage row perm(l) = (l·13 + 5) % 32 (lanes past 8·NUM give a null address for .x1/.x2, which
 * must be ignored). out[l·4 + i] = register i of lane l. */
static __device__ int ld_perm(int l) { return (l * 13 + 5) % 32; }
static __global__ void ldsm_kernel(uint32_t *out, int num, int trans) {
    __shared__ __align__(16) uint16_t sh[32 * 8];
    const int l = threadIdx.x;
    for (int c = 0; c < 8; c++) sh[l * 8 + c] = (uint16_t)(256 * l + c);
    __syncthreads();
    const void *row = l < 8 * num ? (const void *)(sh + 8 * ld_perm(l)) : nullptr;
    uint32_t r[4] = {0, 0, 0, 0};
    if (num == 1) trans ? ldsm_x1_trans(r, row) : ldsm_x1(r, row);
    if (num == 2) trans ? ldsm_x2_trans(r, row) : ldsm_x2(r, row);
    if (num == 4) trans ? ldsm_x4_trans(r, row) : ldsm_x4(r, row);
    for (int i = 0; i < 4; i++) out[l * 4 + i] = r[i];
}
static void test_ldsm_lanes(void) {
    uint32_t *d_out = (uint32_t *)dev(32 * 4 * 4), out[128];
    for (int num = 1; num <= 4; num *= 2)
        for (int trans = 0; trans < 2; trans++) {
            LAUNCH1(32, ldsm_kernel, d_out, num, trans);
            get(out, d_out, sizeof out);
            int bad = 0;
            for (int l = 0; l < 32; l++) {
                const int g = l / 4, t = l % 4;
                for (int i = 0; i < num; i++) {
                    /* the ISA: matrix i's row r is at the address of lane 8i + r; lane l gets row g,
                       columns 2t, 2t+1 — with .trans, column g, rows 2t, 2t+1 */
                    uint32_t lo, hi;
                    if (!trans) {
                        const int srow = ((8 * i + g) * 13 + 5) % 32;
                        lo = 256u * srow + 2 * t;
                        hi = 256u * srow + 2 * t + 1;
                    } else {
                        const int s0 = ((8 * i + 2 * t) * 13 + 5) % 32, s1 = ((8 * i + 2 * t + 1) * 13 + 5) % 32;
                        lo = 256u * s0 + g;
                        hi = 256u * s1 + g;
                    }
                    bad += out[l * 4 + i] != (lo | hi << 16);
                }
            }
            char nm[64];
            snprintf(nm, sizeof nm, "emu_ptx_ldmatrix_x%d%s_lanes", num, trans ? "_trans" : "");
            CHECK(bad == 0, nm, "%d of %d registers differ from the ISA's lane mapping", bad, 32 * num);
        }
    cudaCheck(cudaFree(d_out));
}

static uint16_t f2b(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float b2f(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }

/* D = A·B with A [16][16] and B [16][8] row-major, both through ldmatrix: A by x4 (lane l: row
 * l % 16, column 8·(l / 16)), B by x2.trans (lane l < 16: row k = l). b_plain = 1 takes the plain
 * x2 for B instead: the wrong variant for a row-major B. A second product reads Bᵀ [8][16]
 * (row n = the keys of a score tile) with the plain x2, the right variant for it. */
static __global__ void ldsm_mma_kernel(float *d, const uint16_t *a, const uint16_t *b, const uint16_t *bt,
                                       int b_plain) {
    __shared__ __align__(16) uint16_t As[16 * 16], Bs[16 * 8], Bts[8 * 16];
    const int l = threadIdx.x, g = l >> 2, t = l & 3;
    for (int i = l; i < 256; i += 32) As[i] = a[i];
    for (int i = l; i < 128; i += 32) Bs[i] = b[i];
    for (int i = l; i < 128; i += 32) Bts[i] = bt[i];
    __syncthreads();
    uint32_t af[4], bf[2], btf[2];
    ldsm_x4(af, As + (l % 16) * 16 + 8 * (l / 16));
    if (b_plain) ldsm_x2(bf, Bs + (l % 16) * 8);
    else ldsm_x2_trans(bf, Bs + (l % 16) * 8);
    ldsm_x2(btf, Bts + (l % 8) * 16 + 8 * ((l / 8) % 2));
    const float z[4] = {0, 0, 0, 0};
    float df[4], dtf[4];
    mma_m16n8k16_bf16(df, af, bf, z);
    mma_m16n8k16_bf16(dtf, af, btf, z);
    for (int i = 0; i < 4; i++) {
        d[(i < 2 ? g : g + 8) * 8 + 2 * t + (i & 1)] = df[i];
        d[128 + (i < 2 ? g : g + 8) * 8 + 2 * t + (i & 1)] = dtf[i];
    }
}
static void test_ldsm_mma(void) {
    uint16_t a[256], b[128], bt[128];
    float want[128], got[256];
    uint64_t z = 7;
    for (int i = 0; i < 256; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        a[i] = f2b((float)((int)(z >> 40) % 1000) / 500.0f - 1.0f);
    }
    for (int i = 0; i < 128; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        b[i] = f2b((float)((int)(z >> 40) % 1000) / 500.0f - 1.0f);
    }
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 8; n++) bt[n * 16 + k] = b[k * 8 + n];
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) {
            double s = 0;
            for (int k = 0; k < 16; k++) s += (double)b2f(a[r * 16 + k]) * b2f(b[k * 8 + n]);
            want[r * 8 + n] = (float)s;
        }
    uint16_t *da = (uint16_t *)dev(sizeof a), *db = (uint16_t *)dev(sizeof b), *dbt = (uint16_t *)dev(sizeof bt);
    float *dd = (float *)dev(sizeof got);
    put(da, a, sizeof a);
    put(db, b, sizeof b);
    put(dbt, bt, sizeof bt);
    for (int plain = 0; plain < 2; plain++) {
        LAUNCH1(32, ldsm_mma_kernel, dd, (const uint16_t *)da, (const uint16_t *)db, (const uint16_t *)dbt, plain);
        get(got, dd, sizeof got);
        double w = 0, wt = 0;
        for (int i = 0; i < 128; i++) {
            w = fmax(w, fabs((double)got[i] - want[i]));
            wt = fmax(wt, fabs((double)got[128 + i] - want[i]));
        }
        printf("# ldmatrix + mma, B by x2%s: max |D - A·B| %.3g; Bᵀ by x2: %.3g\n", plain ? "" : ".trans", w, wt);
        if (!plain)
            CHECK(w <= 1e-5 && wt <= 1e-5, "emu_ptx_ldmatrix_mma_product", "max error %.3g (B), %.3g (Bᵀ)", w, wt);
        else
            CHECK(w >= 0.05, "emu_ptx_ldmatrix_wrong_variant_fails",
                  "the plain x2 on a row-major B gave A·B within %.3g: the layout is not checked", w);
    }
    cudaCheck(cudaFree(da));
    cudaCheck(cudaFree(db));
    cudaCheck(cudaFree(dbt));
    cudaCheck(cudaFree(dd));
}

/* ---- ex2.approx ----------------------------------------------------------------------------- */
static void test_ex2(void) {
    int worst = 0, moved = 0, n = 0;
    for (float x = -126.0f; x < 127.0f; x += 0.0173f, n++) {
        const float y = ex2_approx(x), r = (float)exp2((double)x);
        const int d = abs((int)(__float_as_uint(y) - __float_as_uint(r)));
        worst = d > worst ? d : worst;
        moved += d != 0;
    }
    CHECK(worst <= 2 && moved > n / 2, "emu_ptx_ex2_within_2ulp",
          "worst %d ulp, %d of %d results not the correctly rounded one", worst, moved, n);
    const float sub = __uint_as_float(0x00000100u);
    CHECK(ex2_approx(-127.5f) == 0.0f && ex2_approx(sub) == 1.0f && ex2_approx(-INFINITY) == 0.0f &&
              std::isinf(ex2_approx(INFINITY)) && std::isnan(ex2_approx(NAN)) && ex2_approx(0.0f) == 1.0f,
          "emu_ptx_ex2_special_values", "ex2(-127.5) %g (subnormal: 0), ex2(subnormal) %g, ex2(-inf) %g",
          ex2_approx(-127.5f), ex2_approx(sub), ex2_approx(-INFINITY));
}

int main(void) {
    emu_state.errors_fatal = false;
    test_cp_async();
    test_cp_sizes();
    test_ldsm_lanes();
    test_ldsm_mma();
    test_ex2();
    return check_exit();
}
