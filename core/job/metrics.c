/* core/job/metrics.c — see metrics.h. */
#include "core/job/metrics.h"
#include "core/engine/comm.h"
#include <stdlib.h>
#include <string.h>

double metrics_flops_per_token(const model_config *c, int T) {
    double N = (double)config_num_params(c), Ne = (double)config_num_embedding_params(c);
    return 6.0 * (N - Ne) + 12.0 * c->num_hidden_layers * (double)c->hidden_size * T;
}

double metrics_flops_per_token_causal(const model_config *c, int T) {
    double N = (double)config_num_params(c), Ne = (double)config_num_embedding_params(c);
    return 6.0 * (N - Ne) + 6.0 * c->num_hidden_layers * (double)c->hidden_size * T;
}

double metrics_mfu(double fpt, double tok_s_per_rank, double peak) { return peak > 0 ? fpt * tok_s_per_rank / peak : 0; }

double metrics_busbw_factor(int kind, int n) {
    if (n <= 1) return 0;
    if (kind == COMM_ALL_REDUCE) return 2.0 * (n - 1) / n;
    if (kind == COMM_BROADCAST) return 1.0;
    return (double)(n - 1) / n;
}

static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
double metrics_median(const double *v, int n) {
    if (n <= 0) return 0;
    double *t = malloc((size_t)n * sizeof *t);
    if (!t) return v[0];
    memcpy(t, v, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, cmp);
    double m = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    free(t);
    return m;
}
