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
 * Pointers are device pointers of the backend (host memory for cpu).
 */
#ifndef MESHSWEEP_KERNELS_H
#define MESHSWEEP_KERNELS_H
#include <stddef.h>
#include <stdint.h>

typedef struct ops {
    const char *name;
    /* out[N,Cout] = in[N,Cin] · w[Cout,Cin]ᵀ ; accumulate != 0 adds to out instead of overwriting */
    void (*matmul_forward)(float *out, const float *in, const float *w, int N, int Cin, int Cout, int accumulate);
    /* din[N,Cin] += dout·w ; dw[Cout,Cin] += doutᵀ·in */
    void (*matmul_backward)(float *din, float *dw, const float *dout, const float *in, const float *w,
                            int N, int Cin, int Cout);
    /* out[N,Cout] = in[N,Cin] · w[Cout,Cin]ᵀ with out in fp32 whatever the compute precision (in and w
     * are compute precision; fp32 accumulation): the logits the cross-entropy reads */
    void (*matmul_forward_f32out)(float *out, const float *in, const float *w, int N, int Cin, int Cout);
    /* vocab-parallel: out[n,:] = table[tok[n]-v_start,:] when v_start <= tok[n] < v_start+v_count, else 0 */
    void (*embedding_forward)(float *out, const int32_t *tok, const float *table, int N, int C, int v_start, int v_count);
    /* dtable[tok[n]-v_start,:] += dout[n,:] for owned tokens */
    void (*embedding_backward)(float *dtable, const float *dout, const int32_t *tok, int N, int C, int v_start, int v_count);
    /* out = x / sqrt(mean(x²)+eps) ⊙ w ; rstd[N] saved */
    void (*rmsnorm_forward)(float *out, float *rstd, const float *x, const float *w, int N, int C, float eps);
    /* dx += ..., dw += ... */
    void (*rmsnorm_backward)(float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd,
                             int N, int C);
    /* HF rotate_half RoPE over x[B,T,nh*hd] at positions 0..T-1: out = x·cos + rotate_half(x)·sin,
       cos/sin read from tab (fp32 on every backend, rope_table_fill's layout, device memory).
       out may equal x (in place). Assigns (does not accumulate). */
    void (*rope_forward)(float *out, const float *x, const float *tab, int B, int T, int nh, int hd);
    /* din = Rᵀ·dout (the transpose rotation); din may equal dout. Assigns. */
    void (*rope_backward)(float *din, const float *dout, const float *tab, int B, int T, int nh, int hd);
    /* causal softmax attention with GQA: q[B,T,H*hd], k,v[B,T,KV*hd] -> out[B,T,H*hd], scale 1/sqrt(hd),
       query head j uses kv head j/(H/KV). lse[B,H,T] (log-sum-exp of scaled scores) is saved for backward;
       no [B,H,T,T] tensor is kept. ws: attention_ws_floats(T) floats. */
    void (*attention_forward)(float *out, float *lse, float *ws, const float *q, const float *k, const float *v,
                              int B, int T, int H, int KV, int hd);
    void (*attention_backward)(float *dq, float *dk, float *dv, float *ws, const float *dout, const float *out,
                               const float *lse, const float *q, const float *k, const float *v,
                               int B, int T, int H, int KV, int hd);
    /* out = silu(gate) ⊙ up, all [n] */
    void (*swiglu_forward)(float *out, const float *gate, const float *up, size_t n);
    void (*swiglu_backward)(float *dgate, float *dup, const float *dout, const float *gate, const float *up, size_t n);
    /* Vocab-parallel cross-entropy pieces over local logits[N,Vloc] holding global vocab columns
       [v_start, v_start+Vloc); only the first v_valid local columns are real (the rest is padding, masked).
       The TP group combines them: max (MAX), sumexp rescaled to the global max (SUM), target logit (SUM).
       logits are fp32 in every table (matmul_forward_f32out); so are mx, se, tl and loss. */
    void (*ce_rowmax)(float *mx, const float *logits, int N, int Vloc, int v_valid);
    /* se[n] = sum_j exp(logits[n,j] - mx[n]) over valid columns (mx is the GLOBAL max) */
    void (*ce_sumexp)(float *se, const float *logits, const float *mx, int N, int Vloc, int v_valid);
    /* tl[n] = logits[n, tgt[n]-v_start] if owned, else 0 */
    void (*ce_target)(float *tl, const float *logits, const int32_t *tgt, int N, int Vloc, int v_start);
    /* loss[n] = log(se[n]) + mx[n] - tl[n] (global values) ; returns nothing, writes loss[N] */
    void (*ce_loss)(float *loss, const float *mx, const float *se, const float *tl, int N);
    /* dlogits[n,j] = scale * (exp(logits[n,j]-mx[n])/se[n] - [v_start+j == tgt[n]]) for valid j, 0 for padding.
       ASSIGNS; dlogits is compute precision (the lm_head backward GEMM reads it), logits fp32, so
       dlogits may alias logits only in an fp32 table (cbytes == 4). */
    void (*ce_backward)(float *dlogits, const float *logits, const float *mx, const float *se, const int32_t *tgt,
                        float scale, int N, int Vloc, int v_start, int v_valid);
    /* AdamW (PyTorch semantics) over a flat slice: p -= lr*wd*p; m,v update; p -= lr/bc1 * m/(sqrt(v)/sqrt(bc2)+eps)
       with bc1 = 1-beta1^t, bc2 = 1-beta2^t. */
    void (*adamw)(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                  float eps, float wd, float bc1, float bc2);
    /* small helpers */
    void (*add_inplace)(float *y, const float *x, size_t n);          /* y += x */
    void (*scale_inplace)(float *y, float s, size_t n);               /* y *= s */
    /* Σ_k Σ_i x[k][i]² over count segments of n[k] floats: each segment's sum in double, added in
     * segment order; one result for all, so a device table waits for the device once */
    double (*sumsq)(const float *const *x, const size_t *n, int count);
    void (*zero)(void *dst, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes);           /* device to device */
    void (*to_host)(void *host_dst, const void *src, size_t bytes);
    void (*from_host)(void *dst, const void *host_src, size_t bytes);
    /* device memory (the tracked allocator in core/engine/mem calls these; NULL for ops_null) */
    void *(*dev_alloc)(size_t bytes);
    void (*dev_free)(void *p);
    void (*synchronize)(void);
    /* compute precision of the table: activations, workspace and gathered parameter copies hold
     * elements of cbytes bytes (4: fp32; 2: bf16 in ops_cuda_bf16, where the pointer types of the
     * ops above stay float* but the C-typed arguments hold bf16 bit patterns — see its header) */
    size_t cbytes;
    /* dst (compute precision) <- src (fp32) for n elements: a copy for fp32 tables */
    void (*to_compute)(void *dst, const float *src, size_t n);
} ops_t;

/* The RoPE table of positions 0..T-1 (host memory; computed once per run, then copied to the device):
 * tab[t·2h + i] = cos(t·inv_freq[i]), tab[t·2h + h + i] = sin(t·inv_freq[i]) for i < h = hd/2, the angle
 * and both functions evaluated in double, stored as fp32. inv_freq comes with rope_scaling applied
 * (core/formats/config: config_rope_inv_freq). */
static inline size_t rope_table_floats(int T, int hd) { return (size_t)T * (size_t)(hd / 2) * 2u; }
void rope_table_fill(float *tab, const double *inv_freq, int T, int hd);

/* floats of workspace attention_forward/backward need for sequence length T */
static inline size_t attention_ws_floats(int T) { return 2u * (size_t)T * (size_t)T; }

extern const ops_t ops_cpu;
extern const ops_t ops_null;
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
