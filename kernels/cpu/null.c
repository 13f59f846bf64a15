/* kernels/cpu/null.c — `ops_null`, the backend that computes nothing.
 *
 * What it is: the ops_t table whose every entry returns at once (sumsq gives 0.0, dev_alloc gives
 * NULL), so that `--plan` can run the engine's whole allocation sequence — every size it would ask
 * for, in order — without memory or arithmetic. core/engine/mem records the sizes; it must not treat the
 * NULL from dev_alloc as out of memory when planning.
 * What it is not: a stub to fill in later; every pointer is set (tests/test_kernels.c checks it),
 * because the model calls through the table without NULL checks.
 */
#include "kernels/kernels.h"

static void null_matmul_forward(float *out, const float *in, const float *w, int N, int Cin, int Cout, int acc) {
    (void)out; (void)in; (void)w; (void)N; (void)Cin; (void)Cout; (void)acc;
}
static void null_matmul_backward(float *din, float *dw, const float *dout, const float *in, const float *w,
                                 int N, int Cin, int Cout) {
    (void)din; (void)dw; (void)dout; (void)in; (void)w; (void)N; (void)Cin; (void)Cout;
}
static void null_matmul_forward_f32out(float *out, const float *in, const float *w, int N, int Cin, int Cout) {
    (void)out; (void)in; (void)w; (void)N; (void)Cin; (void)Cout;
}
static void null_embedding_forward(float *out, const int32_t *tok, const float *table, int N, int C, int vs, int vc) {
    (void)out; (void)tok; (void)table; (void)N; (void)C; (void)vs; (void)vc;
}
static void null_embedding_backward(float *dtable, const float *dout, const int32_t *tok, int N, int C, int vs,
                                    int vc) {
    (void)dtable; (void)dout; (void)tok; (void)N; (void)C; (void)vs; (void)vc;
}
static void null_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int N, int C, float eps) {
    (void)out; (void)rstd; (void)x; (void)w; (void)N; (void)C; (void)eps;
}
static void null_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                                  const float *rstd, int N, int C) {
    (void)dx; (void)dw; (void)dout; (void)x; (void)w; (void)rstd; (void)N; (void)C;
}
static void null_rope(float *out, const float *x, const float *tab, int B, int T, int nh, int hd) {
    (void)out; (void)x; (void)tab; (void)B; (void)T; (void)nh; (void)hd;
}
static void null_attention_forward(float *out, float *lse, float *ws, const float *q, const float *k,
                                   const float *v, int B, int T, int H, int KV, int hd) {
    (void)out; (void)lse; (void)ws; (void)q; (void)k; (void)v; (void)B; (void)T; (void)H; (void)KV; (void)hd;
}
static void null_attention_backward(float *dq, float *dk, float *dv, float *ws, const float *dout,
                                    const float *out, const float *lse, const float *q, const float *k,
                                    const float *v, int B, int T, int H, int KV, int hd) {
    (void)dq; (void)dk; (void)dv; (void)ws; (void)dout; (void)out; (void)lse; (void)q; (void)k; (void)v;
    (void)B; (void)T; (void)H; (void)KV; (void)hd;
}
static void null_swiglu_forward(float *out, const float *gate, const float *up, size_t n) {
    (void)out; (void)gate; (void)up; (void)n;
}
static void null_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                                 size_t n) {
    (void)dgate; (void)dup; (void)dout; (void)gate; (void)up; (void)n;
}
static void null_ce_rowmax(float *mx, const float *logits, int N, int Vloc, int v_valid) {
    (void)mx; (void)logits; (void)N; (void)Vloc; (void)v_valid;
}
static void null_ce_sumexp(float *se, const float *logits, const float *mx, int N, int Vloc, int v_valid) {
    (void)se; (void)logits; (void)mx; (void)N; (void)Vloc; (void)v_valid;
}
static void null_ce_target(float *tl, const float *logits, const int32_t *tgt, int N, int Vloc, int v_start) {
    (void)tl; (void)logits; (void)tgt; (void)N; (void)Vloc; (void)v_start;
}
static void null_ce_loss(float *loss, const float *mx, const float *se, const float *tl, int N) {
    (void)loss; (void)mx; (void)se; (void)tl; (void)N;
}
static void null_ce_backward(float *dlogits, const float *logits, const float *mx, const float *se,
                             const int32_t *tgt, float scale, int N, int Vloc, int v_start, int v_valid) {
    (void)dlogits; (void)logits; (void)mx; (void)se; (void)tgt; (void)scale; (void)N; (void)Vloc; (void)v_start;
    (void)v_valid;
}
static void null_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                       float eps, float wd, float bc1, float bc2) {
    (void)p; (void)g; (void)m; (void)v; (void)n; (void)lr; (void)beta1; (void)beta2; (void)eps; (void)wd;
    (void)bc1; (void)bc2;
}
static void null_adamw_fused(float *p, void *pc, float *g, float *m, float *v, size_t n, float gscale, int zero_g,
                             float lr, float beta1, float beta2, float eps, float wd, float bc1, float bc2) {
    (void)pc; (void)gscale; (void)zero_g;
    null_adamw(p, g, m, v, n, lr, beta1, beta2, eps, wd, bc1, bc2);
}
static void null_add_inplace(float *y, const float *x, size_t n) { (void)y; (void)x; (void)n; }
static void null_scale_inplace(float *y, float s, size_t n) { (void)y; (void)s; (void)n; }
static double null_sumsq(const float *const *x, const size_t *n, int count) { (void)x; (void)n; (void)count; return 0.0; }
static void null_zero(void *dst, size_t bytes) { (void)dst; (void)bytes; }
static void null_copy(void *dst, const void *src, size_t bytes) { (void)dst; (void)src; (void)bytes; }
static void *null_dev_alloc(size_t bytes) { (void)bytes; return NULL; }
static void null_dev_free(void *p) { (void)p; }
static void null_synchronize(void) {}
static void null_to_compute(void *dst, const float *src, size_t n) { (void)dst; (void)src; (void)n; }

const ops_t ops_null = {
    .name = "null",
    .matmul_forward = null_matmul_forward,
    .matmul_backward = null_matmul_backward,
    .matmul_forward_f32out = null_matmul_forward_f32out,
    .embedding_forward = null_embedding_forward,
    .embedding_backward = null_embedding_backward,
    .rmsnorm_forward = null_rmsnorm_forward,
    .rmsnorm_backward = null_rmsnorm_backward,
    .rope_forward = null_rope,
    .rope_backward = null_rope,
    .attention_forward = null_attention_forward,
    .attention_backward = null_attention_backward,
    .swiglu_forward = null_swiglu_forward,
    .swiglu_backward = null_swiglu_backward,
    .ce_rowmax = null_ce_rowmax,
    .ce_sumexp = null_ce_sumexp,
    .ce_target = null_ce_target,
    .ce_loss = null_ce_loss,
    .ce_backward = null_ce_backward,
    .adamw = null_adamw,
    .adamw_fused = null_adamw_fused,
    .add_inplace = null_add_inplace,
    .scale_inplace = null_scale_inplace,
    .sumsq = null_sumsq,
    .zero = null_zero,
    .copy = null_copy,
    .to_host = null_copy,
    .from_host = null_copy,
    .dev_alloc = null_dev_alloc,
    .dev_free = null_dev_free,
    .synchronize = null_synchronize,
    .cbytes = 4,
    .to_compute = null_to_compute,
};
