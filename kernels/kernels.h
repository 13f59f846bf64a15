/* kernels/kernels.h — the mathematics of meshsweep behind one interface.
 *
 * Every op the model needs, forward and backward, as a table of function pointers (`ops_t`),
 * so the model is written once and runs on:
 *   ops_cpu   fp32 reference kernels (kernels/cpu/, GEMM through OpenBLAS cblas_sgemm)
 *   ops_cuda  CUDA kernels + cuBLAS (kernels/cuda/; only when built with nvcc)
 *   ops_null  does nothing: `--plan` runs the engine's allocation sequence through it
 * This file holds no parallelism: collectives live in core/engine/comm, their use in core/engine/tp and core/engine/fsdp.
 *
 * Conventions (as llm.c): outputs first, then inputs and saved state, then dimensions.
 * Activations are row-major [N, C] with N = B*T tokens, b-major (token n = b*T + t).
 * Linear weights are HF-shaped [out, in]. Backward kernels ACCUMULATE (+=) into every gradient
 * they are given (activation and weight gradients alike); a NULL gradient pointer is skipped.
 * Kernels never allocate: temporaries come in as `ws` arguments sized by the *_ws_floats helpers.
 * Pointers are device pointers of the backend (host memory for cpu). The device a table runs on
 * (selection, memory figures, peak) is kernels/device.h.
 */
#ifndef MESHSWEEP_KERNELS_H
#define MESHSWEEP_KERNELS_H
#include <stddef.h>
#include <stdint.h>

/* Compute precision (the engine's dtype, core/engine/engine.h): the element type of activations, their
 * gradients, workspace and gathered parameter copies. The value is the element size in bytes. */
typedef enum { DTYPE_F32 = 4, DTYPE_BF16 = 2 } dtype_t;
static inline size_t dtype_bytes(dtype_t t) { return (size_t)t; }
static inline const char *dtype_name(dtype_t t) { return t == DTYPE_BF16 ? "bf16" : "fp32"; }
/* An element of compute precision, as llm.c's floatX: a float in fp32 tables, the bit pattern of a
 * bf16 in its first two bytes in bf16 tables. Declared as float so that the fp32 kernels take it as it
 * is; a floatX pointer must be advanced by dtype_bytes, never by hand. Master weights, their gradients,
 * the AdamW moments, rstd, lse and the logits are float whatever the precision. */
typedef float floatX;

/* The op table, one list: X(ret, name, params, args, prec) for every op, in table order, with its
 * parameters, the same names as arguments (the null table forwards them to a trace) and whether it
 * reads or writes compute precision (C: some floatX argument; F: fp32 and bytes only — the bf16 table
 * inherits those from ops_cuda). ops_t, the null table, the CPU and CUDA tables, the planner's trace
 * hooks and the tests' completeness check are all made from it. ret is void or double. */
#define OPS_LIST(X)                                                                                               \
    /* out[N,Cout] = in[N,Cin] · w[Cout,Cin]ᵀ ; accumulate != 0 adds to out instead of overwriting */           \
    X(void, matmul_forward, (floatX *out, const floatX *in, const floatX *w, int N, int Cin, int Cout, int accumulate), \
      (out, in, w, N, Cin, Cout, accumulate), C)                                                                  \
    /* din[N,Cin] += dout·w ; dw[Cout,Cin] += doutᵀ·in */                                                         \
    X(void, matmul_backward, (floatX *din, float *dw, const floatX *dout, const floatX *in, const floatX *w, int N,  \
      int Cin, int Cout), (din, dw, dout, in, w, N, Cin, Cout), C)                                                \
    /* out[N,Cout] = in[N,Cin] · w[Cout,Cin]ᵀ with out in fp32 whatever the compute precision (in and w are      \
     * compute precision; fp32 accumulation): the logits the cross-entropy reads */                               \
    X(void, matmul_forward_f32out, (float *out, const floatX *in, const floatX *w, int N, int Cin, int Cout),     \
      (out, in, w, N, Cin, Cout), C)                                                                              \
    /* vocab-parallel: out[n,:] = table[tok[n]-v_start,:] when v_start <= tok[n] < v_start+v_count, else 0 */    \
    X(void, embedding_forward, (floatX *out, const int32_t *tok, const floatX *table, int N, int C, int v_start,  \
      int v_count), (out, tok, table, N, C, v_start, v_count), C)                                                 \
    /* dtable[tok[n]-v_start,:] += dout[n,:] for owned tokens */                                                  \
    X(void, embedding_backward, (float *dtable, const floatX *dout, const int32_t *tok, int N, int C, int v_start, \
      int v_count), (dtable, dout, tok, N, C, v_start, v_count), C)                                               \
    /* out = x / sqrt(mean(x²)+eps) ⊙ w ; rstd[N] saved */                                                        \
    X(void, rmsnorm_forward, (floatX *out, float *rstd, const floatX *x, const floatX *w, int N, int C, float eps), \
      (out, rstd, x, w, N, C, eps), C)                                                                            \
    /* dx += ..., dw += ... */                                                                                    \
    X(void, rmsnorm_backward, (floatX *dx, float *dw, const floatX *dout, const floatX *x, const floatX *w,       \
      const float *rstd, int N, int C), (dx, dw, dout, x, w, rstd, N, C), C)                                      \
    /* HF rotate_half RoPE over x[B,T,nh*hd] at positions 0..T-1: out = x·cos + rotate_half(x)·sin, cos/sin       \
     * read from tab (fp32 on every backend, rope_table_fill's layout, device memory). out may equal x (in       \
     * place). Assigns (does not accumulate). */                                                                  \
    X(void, rope_forward, (floatX *out, const floatX *x, const float *tab, int B, int T, int nh, int hd),         \
      (out, x, tab, B, T, nh, hd), C)                                                                             \
    /* din = Rᵀ·dout (the transpose rotation); din may equal dout. Assigns. */                                    \
    X(void, rope_backward, (floatX *din, const floatX *dout, const float *tab, int B, int T, int nh, int hd),     \
      (din, dout, tab, B, T, nh, hd), C)                                                                          \
    /* causal softmax attention with GQA: q[B,T,H*hd], k,v[B,T,KV*hd] -> out[B,T,H*hd], scale 1/sqrt(hd), query  \
     * head j uses kv head j/(H/KV). lse[B,H,T] (log-sum-exp of scaled scores) is saved for backward; no          \
     * [B,H,T,T] tensor is kept. ws: attention_ws_floats(T) floats on the CPU; on CUDA the forward takes none   \
     * and the backward attention_flash_ws_floats(B, T, H, KV, hd). */                                            \
    X(void, attention_forward, (floatX *out, float *lse, float *ws, const floatX *q, const floatX *k,             \
      const floatX *v, int B, int T, int H, int KV, int hd), (out, lse, ws, q, k, v, B, T, H, KV, hd), C)         \
    X(void, attention_backward, (floatX *dq, floatX *dk, floatX *dv, float *ws, const floatX *dout,               \
      const floatX *out, const float *lse, const floatX *q, const floatX *k, const floatX *v, int B, int T, int H, \
      int KV, int hd), (dq, dk, dv, ws, dout, out, lse, q, k, v, B, T, H, KV, hd), C)                             \
    /* out = silu(gate) ⊙ up, all [n] */                                                                          \
    X(void, swiglu_forward, (floatX *out, const floatX *gate, const floatX *up, size_t n), (out, gate, up, n), C) \
    X(void, swiglu_backward, (floatX *dgate, floatX *dup, const floatX *dout, const floatX *gate, const floatX *up, \
      size_t n), (dgate, dup, dout, gate, up, n), C)                                                              \
    /* Vocab-parallel cross-entropy pieces over local logits[N,Vloc] holding global vocab columns                 \
     * [v_start, v_start+Vloc); only the first v_valid local columns are real (the rest is padding, masked).     \
     * The TP group combines them: max (MAX), sumexp rescaled to the global max (SUM), target logit (SUM).       \
     * logits are fp32 in every table (matmul_forward_f32out); so are mx, se, tl and loss. */                     \
    X(void, ce_rowmax, (float *mx, const float *logits, int N, int Vloc, int v_valid), (mx, logits, N, Vloc,      \
      v_valid), F)                                                                                                \
    /* se[n] = sum_j exp(logits[n,j] - mx[n]) over valid columns (mx is the GLOBAL max) */                        \
    X(void, ce_sumexp, (float *se, const float *logits, const float *mx, int N, int Vloc, int v_valid),           \
      (se, logits, mx, N, Vloc, v_valid), F)                                                                      \
    /* tl[n] = logits[n, tgt[n]-v_start] if owned, else 0 */                                                      \
    X(void, ce_target, (float *tl, const float *logits, const int32_t *tgt, int N, int Vloc, int v_start),        \
      (tl, logits, tgt, N, Vloc, v_start), F)                                                                     \
    /* loss[n] = log(se[n]) + mx[n] - tl[n] (global values) */                                                    \
    X(void, ce_loss, (float *loss, const float *mx, const float *se, const float *tl, int N), (loss, mx, se, tl,  \
      N), F)                                                                                                      \
    /* dlogits[n,j] = scale * (exp(logits[n,j]-mx[n])/se[n] - [v_start+j == tgt[n]]) for valid j, 0 for padding.  \
     * ASSIGNS; dlogits is compute precision (the lm_head backward GEMM reads it), logits fp32, so dlogits may   \
     * alias logits only in an fp32 table. */                                                                     \
    X(void, ce_backward, (floatX *dlogits, const float *logits, const float *mx, const float *se,                 \
      const int32_t *tgt, float scale, int N, int Vloc, int v_start, int v_valid),                                \
      (dlogits, logits, mx, se, tgt, scale, N, Vloc, v_start, v_valid), C)                                        \
    /* AdamW (PyTorch semantics) over a flat slice: p -= lr*wd*p; m,v update; p -= lr/bc1 * m/(sqrt(v)/sqrt(bc2)+eps) \
     * with bc1 = 1-beta1^t, bc2 = 1-beta2^t. */                                                                  \
    X(void, adamw, (float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,   \
      float eps, float wd, float bc1, float bc2), (p, g, m, v, n, lr, beta1, beta2, eps, wd, bc1, bc2), F)        \
    /* the engine's optimizer step over a flat slice, in one pass over p, g, m, v: exactly scale_inplace(g,     \
     * gscale) (skipped when gscale = 1) then adamw, then, when pc is not NULL, pc[i] = the new p[i] in compute  \
     * precision (as to_compute), and, when zero_g, g[i] = 0 (so g ends as g·gscale, or 0) */                    \
    X(void, adamw_fused, (float *p, void *pc, float *g, float *m, float *v, size_t n, float gscale, int zero_g,   \
      float lr, float beta1, float beta2, float eps, float wd, float bc1, float bc2),                             \
      (p, pc, g, m, v, n, gscale, zero_g, lr, beta1, beta2, eps, wd, bc1, bc2), C)                                \
    /* y += x */                                                                                                  \
    X(void, add_inplace, (floatX *y, const floatX *x, size_t n), (y, x, n), C)                                    \
    /* y *= s */                                                                                                  \
    X(void, scale_inplace, (float *y, float s, size_t n), (y, s, n), F)                                           \
    /* Σ_k Σ_i x[k][i]² over count segments of n[k] floats: each segment's sum in double, added in segment        \
     * order; one result for all, so a device table waits for the device once */                                  \
    X(double, sumsq, (const float *const *x, const size_t *n, int count), (x, n, count), F)                       \
    X(void, zero, (void *dst, size_t bytes), (dst, bytes), F)                                                     \
    /* device to device */                                                                                        \
    X(void, copy, (void *dst, const void *src, size_t bytes), (dst, src, bytes), F)                               \
    X(void, to_host, (void *host_dst, const void *src, size_t bytes), (host_dst, src, bytes), F)                  \
    X(void, from_host, (void *dst, const void *host_src, size_t bytes), (dst, host_src, bytes), F)                \
    /* dst (compute precision) <- src (fp32) for n elements: a copy for fp32 tables */                            \
    X(void, to_compute, (void *dst, const float *src, size_t n), (dst, src, n), C)

/* The device memory behind a table: X(ret, name, params). The tracked allocator's arenas
 * (core/engine/mem) call these, never a planner's (ops_null's dev_alloc gives NULL). */
#define OPS_DEVICE(X) X(void *, dev_alloc, (size_t bytes)) X(void, dev_free, (void *p)) X(void, synchronize, (void))

#define OPS_FIELD_(ret, name, params, args, prec) ret (*name) params;
#define OPS_DEVICE_FIELD_(ret, name, params) ret (*name) params;
typedef struct ops {
    const char *name;
    /* the compute precision this table's kernels read and write as floatX: 4 (fp32) or 2 (bf16 in
     * ops_cuda_bf16; see its header); ops_null reads nothing. The engine does not size buffers by it:
     * its dtype chooses the table (kernels/device.h), and engine_init checks that they agree. */
    size_t cbytes;
    OPS_LIST(OPS_FIELD_)
    OPS_DEVICE(OPS_DEVICE_FIELD_)
} ops_t;
#undef OPS_FIELD_
#undef OPS_DEVICE_FIELD_

/* `, a, b` from `(a, b)`: to put a context before a parameter or argument list of OPS_LIST */
#define OPS_COMMA_(...) , __VA_ARGS__
/* Hooks for each op of ops_null's replay (a planner's; the engine value carries them, kernels/cpu/null.c
 * calls them): the op's own arguments after ctx; a NULL hook is skipped. */
#define OPS_TRACE_FIELD_(ret, name, params, args, prec) void (*name)(void *ctx OPS_COMMA_ params);
typedef struct ops_trace {
    void *ctx;
    OPS_LIST(OPS_TRACE_FIELD_)
} ops_trace;
#undef OPS_TRACE_FIELD_

/* The RoPE table of positions 0..T-1 (host memory; computed once per run, then copied to the device):
 * tab[t·2h + i] = cos(t·inv_freq[i]), tab[t·2h + h + i] = sin(t·inv_freq[i]) for i < h = hd/2, the angle
 * and both functions evaluated in double, stored as fp32. inv_freq comes with rope_scaling applied
 * (core/formats/config: config_rope_inv_freq). */
static inline size_t rope_table_floats(int T, int hd) { return (size_t)T * (size_t)(hd / 2) * 2u; }
void rope_table_fill(float *tab, const double *inv_freq, int T, int hd);

/* floats of workspace attention_forward/backward need for sequence length T (the CPU kernels) */
static inline size_t attention_ws_floats(int T) { return 2u * (size_t)T * (size_t)T; }
/* floats of workspace the CUDA flash attention_backward needs (its forward needs none): D =
 * rowsum(dO ⊙ O) per query row (B·H·T, rounded up to 4 floats), and with GQA (H > KV) every query
 * head's fp32 dK and dV before the sum over its group (2·B·T·H·hd) */
static inline size_t attention_flash_ws_floats(int B, int T, int H, int KV, int hd) {
    const size_t d = ((size_t)B * H * T + 3u) / 4u * 4u;
    return d + (H != KV ? 2u * (size_t)B * T * H * hd : 0u);
}
/* ... and with the folded dq (the deterministic backward off, --deterministic off): B·T·H·hd more, dQ in
 * fp32 summed by atomics, after those */
static inline size_t attention_flash_fold_ws_floats(int B, int T, int H, int KV, int hd) {
    return attention_flash_ws_floats(B, T, H, KV, hd) + (size_t)B * T * H * hd;
}

extern const ops_t ops_cpu;
extern const ops_t ops_null;
/* the trace hooks every op of ops_null calls on this thread from now on (NULL: none); returns the
 * previous ones. A planner binds its engine's hooks around a replay (core/engine/plan.c). */
const ops_trace *ops_null_bind(const ops_trace *t);
#ifdef MESHSWEEP_CUDA
extern const ops_t ops_cuda;
#endif

/* cpu: set BLAS to one thread (one per rank) and measure the single-thread SGEMM rate (GFLOP/s) */
void cpu_blas_init(void);
/* what the BLAS library is and which kernels it chose on this host (OpenBLAS picks them by CPU, or by
 * OPENBLAS_CORETYPE): "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...", "Cooperlake" */
const char *cpu_blas_config(void);
const char *cpu_blas_core(void);
double cpu_sgemm_gflops(int n, double seconds);

#endif
