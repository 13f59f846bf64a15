/* kernels/cuda/attention.cu — causal GQA attention, forward and backward: which kernels run, and the
 * tensor-core self-test.
 *
 * What it is: the entry points of the op tables. bf16 at head dims 64 and 128 (the Llama 3 models)
 * takes the tensor-core kernels, FlashAttention-2 on mma.sync with cp.async tile pipelines and
 * ldmatrix fragment loads: attention_fwd.cu (forward), attention_bwd.cu (D pass, dk/dv over key
 * blocks x query heads, dq, the GQA group sum), their shared pieces in attention_tile.cuh. fp32,
 * and bf16 at every other head dim (the tiny test models), take the scalar kernels of
 * attention_scalar.cu. The backward's workspace: attention_flash_ws_floats (kernels.h) for the
 * tensor-core path; the scalar kernels need none.
 * What it is not: tuned on a GPU yet — their speed is for bench/gpu_bench.sh to measure.
 */
#include "kernels/cuda/attention_tile.cuh"

#include <type_traits>

#define ATT_MAX_HD 256

static int check_shape(const char *what, int B, int T, int H, int KV, int hd) {
    if (B <= 0 || T <= 0 || H <= 0 || KV <= 0 || hd <= 0) return 0;
    if (H % KV != 0 || hd > ATT_MAX_HD) {
        fprintf(stderr, "cuda %s: unsupported shape H=%d KV=%d hd=%d (need H %% KV == 0 and hd <= %d)\n", what,
                H, KV, hd, ATT_MAX_HD);
        exit(1);
    }
    return 1;
}

/* tensor-core (mma) kernel launches so far: lets a test see which path ran */
static long tc_launches;
/* off (--deterministic off): the backward folds dq into the dk/dv pass with fp32 atomics */
static bool deterministic = true;

/* the bf16 tensor-core kernels cover these head dimensions; the others (and fp32) take the
 * scalar kernels */
static bool tc_head_dim(int hd) { return hd == 64 || hd == 128; }

template <typename S>
static void attention_forward_t(S *out, float *lse, const S *q, const S *k, const S *v, int B, int T, int H, int KV,
                                int hd) {
    if (!check_shape("attention_forward", B, T, H, KV, hd)) return;
    if constexpr (std::is_same_v<S, bf16s>) {
        if (tc_head_dim(hd)) {
            if (hd == 64) attention_tc_forward<64>(out, lse, q, k, v, B, T, H, KV);
            else attention_tc_forward<128>(out, lse, q, k, v, B, T, H, KV);
            tc_launches++;
            return;
        }
    }
    attention_scalar_forward<S>(out, lse, q, k, v, B, T, H, KV, hd);
}

template <typename S>
static void attention_backward_t(S *dq, S *dk, S *dv, float *ws, const S *dout, const S *out, const float *lse,
                                 const S *q, const S *k, const S *v, int B, int T, int H, int KV, int hd) {
    if (!dq && !dk && !dv) return;
    if (!check_shape("attention_backward", B, T, H, KV, hd)) return;
    if constexpr (std::is_same_v<S, bf16s>) {
        if (hd == 64) {
            tc_launches += attention_tc_backward<64>(dq, dk, dv, ws, dout, out, lse, q, k, v, B, T, H, KV,
                                                       !deterministic);
            return;
        }
        if (hd == 128) {
            tc_launches += attention_tc_backward<128>(dq, dk, dv, ws, dout, out, lse, q, k, v, B, T, H, KV,
                                                       !deterministic);
            return;
        }
    }
    attention_scalar_backward<S>(dq, dk, dv, dout, out, lse, q, k, v, B, T, H, KV, hd);
}

void cuda_attention_forward_bf16(bf16s *out, float *lse, const bf16s *q, const bf16s *k, const bf16s *v, int B, int T,
                                 int H, int KV, int hd) {
    attention_forward_t<bf16s>(out, lse, q, k, v, B, T, H, KV, hd);
}
void cuda_attention_backward_bf16(bf16s *dq, bf16s *dk, bf16s *dv, float *ws, const bf16s *dout, const bf16s *out,
                                  const float *lse, const bf16s *q, const bf16s *k, const bf16s *v, int B, int T,
                                  int H, int KV, int hd) {
    attention_backward_t<bf16s>(dq, dk, dv, ws, dout, out, lse, q, k, v, B, T, H, KV, hd);
}
void cuda_attention_forward(float *out, float *lse, float *ws, const float *q, const float *k, const float *v, int B,
                            int T, int H, int KV, int hd) {
    (void)ws;
    attention_forward_t<float>(out, lse, q, k, v, B, T, H, KV, hd);
}
void cuda_attention_backward(float *dq, float *dk, float *dv, float *ws, const float *dout, const float *out,
                             const float *lse, const float *q, const float *k, const float *v, int B, int T, int H,
                             int KV, int hd) {
    attention_backward_t<float>(dq, dk, dv, ws, dout, out, lse, q, k, v, B, T, H, KV, hd);
}

extern "C" int cuda_attention_tensor_cores(int hd) { return tc_head_dim(hd); }
extern "C" long cuda_attention_tc_launches(void) { return tc_launches; }
extern "C" int cuda_attention_set_deterministic(int on) {
    const int was = deterministic;
    deterministic = on != 0;
    return was;
}

/* ---- the fragment self-test -------------------------------------------------------------------
 * One warp: D = A·B + C with A [16][16], B [16][8], C and D [16][8] row-major in global memory.
 * mode 0: fragments filled by scalar loads in the documented layout; 1: A's filled transposed (a
 * wrong layout); 2: A and B brought to shared memory by cp.async, fragments by ldmatrix (A x4,
 * B x2.trans) as the kernels do; 3: as 2 but B by the plain x2 (the wrong variant). A test must
 * see 0 and 2 match the host product and 1 and 3 fail. */
static __device__ uint32_t selftest_pair(const bf16s *p, size_t stride) {
    return p[0].bits | (uint32_t)p[stride].bits << 16;
}
static __global__ void __launch_bounds__(32)
mma_selftest_kernel(float *d, const bf16s *a, const bf16s *bm, const float *c, int mode) {
    __shared__ __align__(16) bf16s As[16 * 16], Bs[16 * 8];
    const int lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
    uint32_t af[4], bf[2];
    if (mode < 2) {
        for (int r = 0; r < 4; r++) { /* a_r: row g (+8 for odd r), column 2t (+8 for r >= 2) */
            const int row = g + ((r & 1) ? 8 : 0), col = 2 * tq + ((r & 2) ? 8 : 0);
            af[r] = mode == 0 ? selftest_pair(a + (size_t)row * 16 + col, 1)
                              : selftest_pair(a + (size_t)col * 16 + row, 16); /* (row, col) from a[col][row] */
        }
        for (int r = 0; r < 2; r++) bf[r] = selftest_pair(bm + (size_t)(2 * tq + 8 * r) * 8 + g, 8);
    } else {
        cp_async_cg(As + lane * 8, a + lane * 8, 16); /* 32 x 16 bytes: all of A */
        if (lane < 16) cp_async_cg(Bs + lane * 8, bm + lane * 8, 16);
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();
        ldsm_x4(af, As + (lane & 15) * 16 + 8 * (lane >> 4));
        if (mode == 2) ldsm_x2_trans(bf, Bs + (lane & 15) * 8);
        else ldsm_x2(bf, Bs + (lane & 15) * 8);
    }
    float cf[4], df[4];
    for (int i = 0; i < 4; i++) cf[i] = c[(i < 2 ? g : g + 8) * 8 + 2 * tq + (i & 1)];
    mma_m16n8k16_bf16(df, af, bf, cf);
    for (int i = 0; i < 4; i++) d[(i < 2 ? g : g + 8) * 8 + 2 * tq + (i & 1)] = df[i];
}

extern "C" void cuda_mma_selftest(float *d, const uint16_t *a, const uint16_t *b, const float *c, int mode) {
    LAUNCH(mma_selftest_kernel, dim3(1), 32, 0, d, reinterpret_cast<const bf16s *>(a),
           reinterpret_cast<const bf16s *>(b), c, mode);
}
