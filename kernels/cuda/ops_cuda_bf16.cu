/* kernels/cuda/ops_cuda_bf16.cu — `ops_cuda_bf16`: the mixed-precision CUDA op table of docs/semantics.md#mixed-precision-bf16
 * (compute in bf16 with fp32 accumulation; norms, softmax and the loss in fp32).
 *
 * What it is: the table, and the casts that put bf16 storage behind the float* signatures of ops_t.
 * Arguments of compute precision ("C") hold bf16 bit patterns (2 bytes an element, rounded to
 * nearest even from fp32); the others stay fp32:
 *   matmul_forward        out, in, w: C (cuBLAS GemmEx, fp32 accumulation; accumulate adds to out)
 *   matmul_backward       din C (+=), dw fp32 (+=), dout, in, w: C
 *   matmul_forward_f32out out fp32; in, w: C (the logits: the CE runs on fp32 logits)
 *   embedding_forward     out, table: C          embedding_backward  dtable fp32 (+=), dout C
 *   rmsnorm_forward       out, x, w: C; rstd fp32  rmsnorm_backward   dx C (+=), dw fp32 (+=), dout, x, w C
 *   rope_forward/backward out/din, x/dout: C; tab fp32
 *   attention_forward     out, q, k, v: C; lse fp32; attention_backward dq, dk, dv C (+=), dout, out C
 *   swiglu_forward/backward  all C (gradients +=)
 *   ce_rowmax/sumexp/target  logits, mx, se, tl fp32 (ops_cuda's)    ce_loss  all fp32
 *   ce_backward           dlogits C; logits, mx, se fp32 (so dlogits never aliases logits)
 *   add_inplace           y, x: C
 *   adamw, scale_inplace, sumsq   fp32 (they only see master weights, fp32 gradients and moments)
 *   adamw_fused           p, g, m, v fp32; pc C (the bf16 compute copy of the parameters it updates)
 *   zero, copy, to_host, from_host, dev_alloc, dev_free, synchronize: bytes, as ops_cuda
 *   cbytes = 2; to_compute(dst C, src fp32, n) rounds fp32 to bf16 (dst must not overlap src).
 * Everything in between a load and a store is fp32: the kernels are the templates of ops_cuda.cu
 * and attention_scalar.cu instantiated for bf16s, so each op is one kernel source shared with ops_cuda.
 * Attention at head dims 64 and 128 runs on the tensor-core kernels of attention_fwd.cu and
 * attention_bwd.cu (P and dS are rounded to bf16 as mma operands there; the backward needs
 * ws = attention_flash_ws_floats floats), other head dims on the shared scalar template.
 * What it is not: a place that keeps fp32 copies: the master weights,
 * their gradients and the AdamW state are the engine's fp32 buffers (core/engine/fsdp).
 */
#include "kernels/cuda/cuda_common.cuh"

/* the C-typed float* of ops_t hold bf16s: reinterpret (NULL stays NULL) */
static inline bf16s *as_bf(float *p) { return reinterpret_cast<bf16s *>(p); }
static inline const bf16s *as_bf(const float *p) { return reinterpret_cast<const bf16s *>(p); }
static inline uint16_t *as_u16(float *p) { return reinterpret_cast<uint16_t *>(p); }
static inline const uint16_t *as_u16(const float *p) { return reinterpret_cast<const uint16_t *>(p); }

static void b_matmul_forward(float *out, const float *in, const float *w, int N, int Cin, int Cout, int accumulate) {
    cuda_matmul_forward_bf16(as_u16(out), as_u16(in), as_u16(w), N, Cin, Cout, accumulate);
}

static void b_matmul_forward_f32out(float *out, const float *in, const float *w, int N, int Cin, int Cout) {
    cuda_matmul_forward_bf16_f32out(out, as_u16(in), as_u16(w), N, Cin, Cout, 0);
}

static void b_matmul_backward(float *din, float *dw, const float *dout, const float *in, const float *w, int N,
                              int Cin, int Cout) {
    cuda_matmul_backward_bf16(as_u16(din), dw, as_u16(dout), as_u16(in), as_u16(w), N, Cin, Cout);
}

static void b_embedding_forward(float *out, const int32_t *tok, const float *table, int N, int C, int v_start,
                                int v_count) {
    cuda_embedding_forward_t<bf16s>(as_bf(out), tok, as_bf(table), N, C, v_start, v_count);
}

static void b_embedding_backward(float *dtable, const float *dout, const int32_t *tok, int N, int C, int v_start,
                                 int v_count) {
    cuda_embedding_backward_t<bf16s>(dtable, as_bf(dout), tok, N, C, v_start, v_count);
}

static void b_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int N, int C, float eps) {
    cuda_rmsnorm_forward_t<bf16s>(as_bf(out), rstd, as_bf(x), as_bf(w), N, C, eps);
}

static void b_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                               const float *rstd, int N, int C) {
    cuda_rmsnorm_backward_t<bf16s>(as_bf(dx), dw, as_bf(dout), as_bf(x), as_bf(w), rstd, N, C);
}

static void b_rope_forward(float *out, const float *x, const float *tab, int Bn, int T, int nh, int hd) {
    cuda_rope_forward_t<bf16s>(as_bf(out), as_bf(x), tab, Bn, T, nh, hd);
}

static void b_rope_backward(float *din, const float *dout, const float *tab, int Bn, int T, int nh, int hd) {
    cuda_rope_backward_t<bf16s>(as_bf(din), as_bf(dout), tab, Bn, T, nh, hd);
}

static void b_attention_forward(float *out, float *lse, float *ws, const float *q, const float *k, const float *v,
                                int Bn, int T, int H, int KV, int hd) {
    (void)ws;
    cuda_attention_forward_bf16(as_bf(out), lse, as_bf(q), as_bf(k), as_bf(v), Bn, T, H, KV, hd);
}

static void b_attention_backward(float *dq, float *dk, float *dv, float *ws, const float *dout, const float *out,
                                 const float *lse, const float *q, const float *k, const float *v, int Bn, int T,
                                 int H, int KV, int hd) {
    cuda_attention_backward_bf16(as_bf(dq), as_bf(dk), as_bf(dv), ws, as_bf(dout), as_bf(out), lse, as_bf(q),
                                 as_bf(k), as_bf(v), Bn, T, H, KV, hd);
}

static void b_swiglu_forward(float *out, const float *gate, const float *up, size_t n) {
    cuda_swiglu_forward_t<bf16s>(as_bf(out), as_bf(gate), as_bf(up), n);
}

static void b_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                              size_t n) {
    cuda_swiglu_backward_t<bf16s>(as_bf(dgate), as_bf(dup), as_bf(dout), as_bf(gate), as_bf(up), n);
}

/* the CE reads fp32 logits (matmul_forward_f32out): rowmax, sumexp and target are ops_cuda's; the
 * gradient it writes is bf16, the lm_head backward GEMM's operand */
static void b_ce_backward(float *dlogits, const float *logits, const float *mx, const float *se, const int32_t *tgt,
                          float scale, int N, int Vloc, int v_start, int v_valid) {
    cuda_ce_backward_t<bf16s, float>(as_bf(dlogits), logits, mx, se, tgt, scale, N, Vloc, v_start, v_valid);
}

static void b_add_inplace(float *y, const float *x, size_t n) { cuda_add_inplace_t<bf16s>(as_bf(y), as_bf(x), n); }

/* fp32 masters, gradients and moments; the new parameters also into their bf16 compute copy */
static void b_adamw_fused(float *p, void *pc, float *g, float *m, float *v, size_t n, float gscale, int zero_g,
                          float lr, float beta1, float beta2, float eps, float wd, float bc1, float bc2) {
    cuda_adamw_fused_t<bf16s>(p, static_cast<bf16s *>(pc), g, m, v, n, gscale, zero_g, lr, beta1, beta2, eps, wd, bc1,
                              bc2);
}

static void b_to_compute(void *dst, const float *src, size_t n) {
    cuda_f32_to_bf16(static_cast<uint16_t *>(dst), src, n);
}

/* ---- the table ---------------------------------------------------------------------------------
 * Starts from ops_cuda's (a fresh copy: no dependence on the order of static initialisation) and
 * replaces every op the list of ops (OPS_LIST, kernels/kernels.h) marks C (a compute-precision
 * argument) with b_X above; the ops marked F are fp32 or byte-based and stay ops_cuda's: ce_rowmax,
 * ce_sumexp, ce_target and ce_loss (fp32 logits and statistics), adamw, scale_inplace, sumsq and the
 * memory ops. An op added to the list must say which it is, and a C op fails the build here until
 * its bf16 version exists, so that nobody inherits an fp32 op by accident. */
static ops_t make_ops_cuda_bf16(void) {
    ops_t o = cuda_ops_fp32_table();
    o.name = "cuda_bf16";
    o.cbytes = 2;
#define B_SET_C(name) o.name = b_##name;
#define B_SET_F(name)
#define B_SET_(ret, name, params, args, prec) B_SET_##prec(name)
    OPS_LIST(B_SET_)
#undef B_SET_
#undef B_SET_C
#undef B_SET_F
    return o;
}

extern "C" const ops_t ops_cuda_bf16 = make_ops_cuda_bf16();
