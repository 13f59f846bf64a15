/* core/job/metrics.h — the metric definitions of docs/metrics.md, one documented function each. */
#ifndef MESHSWEEP_METRICS_H
#define MESHSWEEP_METRICS_H
#include "core/formats/config.h"
/* FLOPs per token = 6·(N − N_embedding) + 12·L·d·T (PaLM / torchtitan convention: no causal discount,
 * no recompute counted; N counts lm_head, N_embedding is embed_tokens only). */
double metrics_flops_per_token(const model_config *c, int T);
/* the same with causal attention counted as half: 6·(N − N_embedding) + 6·L·d·T (the FLOPs a causal
 * kernel that skips the masked half does; FlashAttention's convention for its own TFLOP/s) */
double metrics_flops_per_token_causal(const model_config *c, int T);
/* MFU = FLOPs/token × tokens/s per rank / peak FLOP/s per rank */
double metrics_mfu(double flops_per_token, double tok_s_per_rank, double peak_flops_per_rank);
/* nccl-tests bus-bandwidth factors: all-reduce 2(n−1)/n, all-gather and reduce-scatter (n−1)/n */
double metrics_busbw_factor(int kind, int n);
/* median of n values (copies; n > 0) */
double metrics_median(const double *v, int n);
#endif
