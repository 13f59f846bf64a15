/* tests/test_optim.c — the optimizer path (core/engine/optim.c, the sharded AdamW of core/engine/fsdp.c) against a
 * double-precision AdamW written here from docs/semantics.md#loss-and-optimizer (PyTorch semantics): the schedule (optim_lr:
 * warmup, cosine, last step, minimum ratio), the global grad norm (replicated norm weights counted on
 * TP rank 0 only), clipping as clip_grad_norm_, the decay mask (matrices yes, norm weights no, decided
 * here from the HF names), bias correction, and non-finite gradient norms. The model state comes from
 * model_init on a tiny config; the DP shards are exercised with null groups of 1 and 3 ranks, where
 * each owned slice is updated alone (the collectives of the real mesh are tested in t_mesh and
 * t_reference). Tolerance: fp32 against double, 2e-6 relative + 1e-7 absolute per element (lr 1e-2 times
 * fp32 rounding); the bugs this exists for move elements by ~1e-3. */
#include "tests/check.h"
#include "core/engine/mem.h"
#include "core/engine/model.h"
#include "core/engine/optim.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static model_config cfg(void) {
    model_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "optimtest");
    c.vocab_size = 37; c.hidden_size = 16; c.intermediate_size = 24; c.num_hidden_layers = 2;
    c.num_attention_heads = 4; c.num_key_value_heads = 2; c.rms_norm_eps = 1e-5; c.rope_theta = 10000;
    c.max_position_embeddings = 64; c.initializer_range = 0.2;
    return c;
}

static comm_group g_tp, g_dp, g_world;
static engine_t g_E;

static void build(model_t *M, int dp, int dp_rank) {
    model_config c = cfg();
    mesh_t m; char err[256];
    if (mesh_init(&m, dp, dp_rank, 1, err, sizeof err)) { printf("mesh_init: %s\n", err); exit(1); }
    comm_null_group(&g_tp, &g_E.comm, 1, 0); comm_null_group(&g_dp, &g_E.comm, dp, dp_rank);
    comm_null_group(&g_world, &g_E.comm, dp, dp_rank);
    model_opts o = {.B = 1, .T = 8, .sequence_parallel = 0, .prefetch = 0, .checkpoint = 0};
    if (model_init(M, &g_E, &c, &m, &g_tp, &g_dp, &o, err, sizeof err)) { printf("model_init: %s\n", err); exit(1); }
}

/* the HF tensor an owned element belongs to (NULL: padding of the flat buffer) */
static const fsdp_seg *seg_of(const fsdp_unit *u, int64_t flat) {
    for (int k = 0; k < u->nseg; k++)
        if (flat >= u->seg[k].off && flat < u->seg[k].off + u->seg[k].rows * u->seg[k].cols) return &u->seg[k];
    return NULL;
}
static int is_norm(const fsdp_seg *s) { return strstr(s->name, "norm.weight") != NULL; }

static uint64_t g_rng = 88172645463325252ull;
static double urand(void) { g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17; return (double)(g_rng >> 11) / 9007199254740992.0; }

/* a copy of every owned gradient (at dp = 1 the step zeroes them: what reached AdamW is read from here) */
static float **save_grads(model_t *M) {
    float **g = calloc((size_t)M->fsdp.n, sizeof *g);
    for (int i = 0; i < M->fsdp.n; i++) {
        g[i] = malloc((size_t)M->fsdp.u[i].shard * sizeof(float) + 1);
        memcpy(g[i], M->fsdp.u[i].g, (size_t)M->fsdp.u[i].shard * sizeof(float));
    }
    return g;
}
static void restore_grads(model_t *M, float **g) {
    for (int i = 0; i < M->fsdp.n; i++) memcpy(M->fsdp.u[i].g, g[i], (size_t)M->fsdp.u[i].shard * sizeof(float));
}
static void free_grads(model_t *M, float **g) {
    for (int i = 0; i < M->fsdp.n; i++) free(g[i]);
    free(g);
}
/* Σ m² over the owned segments: after a first step from m = 0, m = (1 − β1)·(the gradient AdamW used) */
static double sumsq_m(model_t *M) {
    double s = 0;
    for (int i = 0; i < M->fsdp.n; i++) {
        fsdp_unit *u = &M->fsdp.u[i];
        for (int64_t j = 0; j < u->shard; j++)
            if (seg_of(u, (int64_t)M->fsdp.dp->rank * u->shard + j)) s += (double)u->m[j] * u->m[j];
    }
    return s;
}

/* double-precision mirror of the owned state */
typedef struct { double *p, *m, *v; } ref_t;

static void fill_grads(model_t *M, double scale) {
    for (int i = 0; i < M->fsdp.n; i++) {
        fsdp_unit *u = &M->fsdp.u[i];
        for (int64_t j = 0; j < u->shard; j++)
            u->g[j] = seg_of(u, (int64_t)M->fsdp.dp->rank * u->shard + j) ? (float)((urand() * 2 - 1) * scale) : 0.0f;
    }
}

static double sumsq_grads(model_t *M, int with_norms) {
    double s = 0;
    for (int i = 0; i < M->fsdp.n; i++) {
        fsdp_unit *u = &M->fsdp.u[i];
        for (int64_t j = 0; j < u->shard; j++) {
            const fsdp_seg *sg = seg_of(u, (int64_t)M->fsdp.dp->rank * u->shard + j);
            if (sg && (with_norms || !is_norm(sg))) s += (double)u->g[j] * u->g[j];
        }
    }
    return s;
}

/* one reference step from the current (fp32) grads: returns the norm; updates ref */
static double ref_step(model_t *M, ref_t *R, const optim_cfg *c, double lr, int t) {
    double norm = sqrt(sumsq_grads(M, 1)), coef = 1.0;
    if (c->grad_clip > 0 && c->grad_clip / (norm + 1e-6) < 1.0) coef = c->grad_clip / (norm + 1e-6);
    double bc1 = 1 - pow(c->beta1, t), bc2 = 1 - pow(c->beta2, t);
    for (int i = 0; i < M->fsdp.n; i++) {
        fsdp_unit *u = &M->fsdp.u[i];
        for (int64_t j = 0; j < u->shard; j++) {
            const fsdp_seg *sg = seg_of(u, (int64_t)M->fsdp.dp->rank * u->shard + j);
            if (!sg) continue;
            double g = (double)(float)((double)u->g[j] * coef), *p = &R[i].p[j], *m = &R[i].m[j], *v = &R[i].v[j];
            *p -= lr * (is_norm(sg) ? 0.0 : c->weight_decay) * *p;
            *m = c->beta1 * *m + (1 - c->beta1) * g;
            *v = c->beta2 * *v + (1 - c->beta2) * g * g;
            *p -= lr * (*m / bc1) / (sqrt(*v / bc2) + c->eps);
        }
    }
    return norm;
}

static ref_t *ref_init(model_t *M) {
    ref_t *R = calloc((size_t)M->fsdp.n, sizeof *R);
    for (int i = 0; i < M->fsdp.n; i++) {
        fsdp_unit *u = &M->fsdp.u[i];
        R[i].p = calloc((size_t)u->shard, sizeof(double));
        R[i].m = calloc((size_t)u->shard, sizeof(double));
        R[i].v = calloc((size_t)u->shard, sizeof(double));
        for (int64_t j = 0; j < u->shard; j++) {
            const fsdp_seg *sg = seg_of(u, (int64_t)M->fsdp.dp->rank * u->shard + j);
            u->p[j] = sg ? (float)(is_norm(sg) ? 1.0 + 0.1 * (urand() - 0.5) : 0.2 * (urand() - 0.5)) : 0.0f;
            R[i].p[j] = u->p[j];
        }
    }
    return R;
}
static void ref_free(model_t *M, ref_t *R) {
    for (int i = 0; i < M->fsdp.n; i++) { free(R[i].p); free(R[i].m); free(R[i].v); }
    free(R);
}

static double max_rel_err(model_t *M, ref_t *R) {
    double worst = 0;
    for (int i = 0; i < M->fsdp.n; i++)
        for (int64_t j = 0; j < M->fsdp.u[i].shard; j++) {
            double d = fabs(M->fsdp.u[i].p[j] - R[i].p[j]) / (2e-6 * fabs(R[i].p[j]) + 1e-7);
            if (!(d <= worst)) worst = d;  /* NaN-safe */
        }
    return worst; /* <= 1 passes */
}

static void test_lr(void) {
    optim_cfg c = {.lr = 1.0, .min_lr_ratio = 0.1, .warmup = 3, .cosine = 1};
    double e = 1e-12;
    CHECK(fabs(optim_lr(&c, 0, 10) - 1.0 / 3) < e, "optim_lr_warmup_first", "%g, want 1/3", optim_lr(&c, 0, 10));
    CHECK(fabs(optim_lr(&c, 1, 10) - 2.0 / 3) < e, "optim_lr_warmup_second", "%g, want 2/3", optim_lr(&c, 1, 10));
    CHECK(fabs(optim_lr(&c, 2, 10) - 1.0) < e, "optim_lr_warmup_reaches_peak", "%g, want 1", optim_lr(&c, 2, 10));
    CHECK(fabs(optim_lr(&c, 3, 10) - 1.0) < e, "optim_lr_cosine_starts_at_peak", "%g, want 1", optim_lr(&c, 3, 10));
    CHECK(fabs(optim_lr(&c, 6, 10) - 0.55) < e, "optim_lr_cosine_midpoint", "%g, want 0.55", optim_lr(&c, 6, 10));
    CHECK(fabs(optim_lr(&c, 9, 10) - 0.1) < e, "optim_lr_last_step_min_ratio", "%g, want 0.1", optim_lr(&c, 9, 10));
    int mono = 1;
    for (int s = 3; s < 9; s++) mono &= optim_lr(&c, s + 1, 10) < optim_lr(&c, s, 10);
    CHECK(mono, "optim_lr_cosine_decreasing", "not strictly decreasing after warmup");
    c.warmup = 0;
    CHECK(fabs(optim_lr(&c, 0, 5) - 1.0) < e && fabs(optim_lr(&c, 4, 5) - 0.1) < e, "optim_lr_no_warmup",
          "%g %g, want 1 and 0.1", optim_lr(&c, 0, 5), optim_lr(&c, 4, 5));
    c.min_lr_ratio = 0.0;
    CHECK(fabs(optim_lr(&c, 2, 5) - 0.5) < e && fabs(optim_lr(&c, 4, 5)) < e, "optim_lr_min_ratio_zero",
          "%g %g, want 0.5 and 0", optim_lr(&c, 2, 5), optim_lr(&c, 4, 5));
    optim_cfg k = {.lr = 3e-3, .min_lr_ratio = 0.1, .warmup = 3, .cosine = 0};
    CHECK(optim_lr(&k, 0, 10) == 3e-3 && optim_lr(&k, 9, 10) == 3e-3, "optim_lr_constant", "%g %g",
          optim_lr(&k, 0, 10), optim_lr(&k, 9, 10));
}

/* three AdamW steps with cosine lr against the reference, for dp ranks of a null group */
static void test_steps(int dp, int dp_rank, double clip, double gscale, const char *tag) {
    model_t M; build(&M, dp, dp_rank);
    ref_t *R = ref_init(&M);
    optim_cfg c = {.lr = 1e-2, .weight_decay = 0.1, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .grad_clip = clip,
                   .min_lr_ratio = 0.1, .warmup = 1, .cosine = 1};
    double worst_norm = 0, worst_p = 0;
    for (int s = 0; s < 3; s++) {
        fill_grads(&M, gscale);
        /* warmup 1 of 3 steps: the peak, then the cosine's start (the peak) and its end (lr * 0.1) */
        static const double lrs[3] = {1e-2, 1e-2, 1e-3};
        double lr_ref = lrs[s];
        double lr = 0;
        double nref = ref_step(&M, R, &c, lr_ref, s + 1);
        double n = optim_step(&M, &g_world, &c, s, 3, &lr);
        double dn = fabs(n - nref) / nref;
        if (dn > worst_norm) worst_norm = dn;
        double dp_ = max_rel_err(&M, R);
        if (!(dp_ <= worst_p)) worst_p = dp_;
        if (fabs(lr - lr_ref) > 1e-15) { CHECK(0, "optim_step_lr", "step %d lr %g, want %g", s, lr, lr_ref); }
    }
    char name[96];
    snprintf(name, sizeof name, "optim_norm_%s", tag);
    CHECK(worst_norm < 1e-6, name, "grad norm rel err %g", worst_norm);
    snprintf(name, sizeof name, "optim_adamw_%s", tag);
    CHECK(worst_p <= 1.0, name, "params differ from the reference by %g x tolerance", worst_p);
    ref_free(&M, R);
    model_free(&M);
}

/* zero gradients: only decoupled weight decay moves parameters — matrices shrink by (1 - lr*wd)
 * exactly as PyTorch does it, norm weights stay */
static void test_decay_mask(void) {
    model_t M; build(&M, 1, 0);
    ref_t *R = ref_init(&M);
    for (int i = 0; i < M.fsdp.n; i++) memset(M.fsdp.u[i].g, 0, (size_t)M.fsdp.u[i].shard * sizeof(float));
    optim_cfg c = {.lr = 0.5, .weight_decay = 0.1, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .grad_clip = 1.0};
    optim_step(&M, &g_world, &c, 0, 1, NULL);
    int norms_kept = 1, mats_decayed = 1, nnorm = 0, nmat = 0;
    for (int i = 0; i < M.fsdp.n; i++) {
        fsdp_unit *u = &M.fsdp.u[i];
        for (int64_t j = 0; j < u->shard; j++) {
            const fsdp_seg *sg = seg_of(u, j);
            if (!sg) continue;
            if (is_norm(sg)) { nnorm++; norms_kept &= u->p[j] == (float)R[i].p[j]; }
            else { nmat++; mats_decayed &= fabs(u->p[j] - R[i].p[j] * 0.95) <= 1e-6 * fabs(R[i].p[j]) + 1e-12; }
        }
    }
    CHECK(nnorm > 0 && norms_kept, "optim_no_decay_on_norm_weights", "a norm weight changed (%d norm elements)", nnorm);
    CHECK(nmat > 0 && mats_decayed, "optim_decay_on_matrices", "a matrix element is not p*(1-lr*wd)");
    ref_free(&M, R);
    model_free(&M);
}

/* bias correction: at t = 1, m^ = g and v^ = g^2, so each element moves by lr * g/(|g|+eps) ~ lr */
static void test_bias_correction(void) {
    model_t M; build(&M, 1, 0);
    ref_t *R = ref_init(&M);
    fill_grads(&M, 1e-3);
    float **g = save_grads(&M);
    optim_cfg c = {.lr = 1e-2, .weight_decay = 0.0, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .grad_clip = 0};
    optim_step(&M, &g_world, &c, 0, 1, NULL);
    double worst = 0;
    int64_t moved = 0, zeroed = 0, owned = 0;
    for (int i = 0; i < M.fsdp.n; i++)
        for (int64_t j = 0; j < M.fsdp.u[i].shard; j++) {
            if (!seg_of(&M.fsdp.u[i], j)) continue;
            owned++;
            zeroed += M.fsdp.u[i].g[j] == 0.0f;
            if (fabs(g[i][j]) < 1e-5) continue;
            moved++;
            double d = fabs(fabs(M.fsdp.u[i].p[j] - R[i].p[j]) - 1e-2) / 1e-2;
            if (!(d <= worst)) worst = d;
        }
    CHECK(moved > 0 && worst < 1e-3, "optim_bias_correction_first_step",
          "first update differs from lr by %g relative (%lld elements)", worst, (long long)moved);
    /* dp = 1: the fused step leaves the gradients zero for the next backward */
    CHECK(owned > 0 && zeroed == owned, "optim_step_zeroes_grads_dp1", "%lld of %lld gradients not zero",
          (long long)(owned - zeroed), (long long)owned);
    free_grads(&M, g);
    ref_free(&M, R);
    model_free(&M);
}

/* clipping: the gradients that reach AdamW are scaled by C/(norm+1e-6) when that is below 1 (read
 * from the first moment of a first step: m = (1 − β1)·g) */
static void test_clip_applied(void) {
    for (int pass = 0; pass < 2; pass++) {
        model_t M; build(&M, 1, 0);
        fill_grads(&M, pass ? 1e-4 : 1.0);
        double before = sqrt(sumsq_grads(&M, 1));
        float **g = save_grads(&M);
        optim_cfg c = {.lr = 0, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .grad_clip = pass ? 1.0 : 0.25};
        double n = optim_step(&M, &g_world, &c, 0, 1, NULL);
        double used = sqrt(sumsq_m(&M)) / (1.0 - 0.9);
        if (!pass) {
            CHECK(fabs(n - before) <= 1e-9 * before, "optim_returns_norm_before_clip", "%g vs %g", n, before);
            CHECK(fabs(used - 0.25 * before / (before + 1e-6)) <= 1e-5 * 0.25, "optim_clip_scales_grads",
                  "norm reaching AdamW %g, want %g", used, 0.25 * before / (before + 1e-6));
        } else { /* unclipped: m is exactly (1 − β1)·g, element by element */
            int same = 1;
            for (int i = 0; i < M.fsdp.n; i++)
                for (int64_t j = 0; j < M.fsdp.u[i].shard; j++) same &= M.fsdp.u[i].m[j] == (1.0f - 0.9f) * g[i][j];
            CHECK(same, "optim_clip_inactive_below_c", "the gradients reaching AdamW changed with norm %g < C", before);
        }
        free_grads(&M, g);
        model_free(&M);
    }
}

/* replicated (norm) weights are counted by TP rank 0 only: the sum over the TP group counts them once */
static void test_replicated_once(void) {
    model_t M; build(&M, 1, 0);
    fill_grads(&M, 1.0);
    optim_cfg c = {.lr = 0, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .grad_clip = 0};
    double all = sumsq_grads(&M, 1), mats = sumsq_grads(&M, 0);
    float **g = save_grads(&M);
    double n0 = optim_step(&M, &g_world, &c, 0, 1, NULL);
    restore_grads(&M, g); /* the step zeroed them (dp = 1) */
    free_grads(&M, g);
    M.mesh.tp_rank = 1;
    double n1 = optim_step(&M, &g_world, &c, 0, 1, NULL);
    M.mesh.tp_rank = 0;
    CHECK(fabs(n0 * n0 - all) <= 1e-9 * all, "optim_norm_tp_rank0_counts_norm_weights", "%g vs %g", n0 * n0, all);
    CHECK(fabs(n1 * n1 - mats) <= 1e-9 * mats && mats < all, "optim_norm_other_tp_ranks_skip_norm_weights",
          "%g vs %g (all %g)", n1 * n1, mats, all);
    model_free(&M);
}

/* dp = 1: the fused step zeroes the gradients for the next backward; a backward that follows another
 * with no step in between must still start from zero: its gradients equal the first ones */
static void test_backward_twice(void) {
    model_t M; build(&M, 1, 0);
    model_init_params(&M, 7);
    int32_t in[8], tg[8];
    for (int i = 0; i < 8; i++) { in[i] = (i * 5) % 37; tg[i] = (i * 7 + 3) % 37; }
    model_forward_backward(&M, in, tg, 1.0f);
    float **g = save_grads(&M);
    double s1 = sumsq_grads(&M, 1);
    model_forward_backward(&M, in, tg, 1.0f);
    int same = s1 > 0;
    for (int i = 0; i < M.fsdp.n; i++)
        same &= !memcmp(g[i], M.fsdp.u[i].g, (size_t)M.fsdp.u[i].shard * sizeof(float));
    CHECK(same, "optim_backward_twice_starts_from_zero", "the second backward's gradients differ (sumsq %g then %g)",
          s1, sumsq_grads(&M, 1));
    free_grads(&M, g);
    model_free(&M);
}

/* a non-finite gradient gives a non-finite norm (the run then stops as diverged, t_reference) */
static void test_nonfinite(void) {
    model_t M; build(&M, 1, 0);
    optim_cfg c = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .grad_clip = 1.0};
    fill_grads(&M, 1.0);
    M.fsdp.u[0].g[3] = INFINITY;
    double n = optim_step(&M, &g_world, &c, 0, 1, NULL);
    CHECK(isinf(n), "optim_norm_inf_gradient", "norm %g", n);
    fill_grads(&M, 1.0);
    M.fsdp.u[M.fsdp.n - 1].g[1] = NAN;
    n = optim_step(&M, &g_world, &c, 0, 1, NULL);
    CHECK(isnan(n), "optim_norm_nan_gradient", "norm %g", n);
    model_free(&M);
}

int main(void) {
    cpu_blas_init();
    engine_init(&g_E, &device_cpu, DTYPE_F32, NULL, 0);
    test_lr();
    test_steps(1, 0, 0.5, 1.0, "dp1_clipped");
    test_steps(1, 0, 100.0, 1e-2, "dp1_unclipped");
    test_steps(1, 0, 0.0, 1.0, "dp1_clip_off");
    for (int r = 0; r < 3; r++) {
        char tag[32]; snprintf(tag, sizeof tag, "dp3_rank%d_clipped", r);
        test_steps(3, r, 0.05, 1.0, tag);
    }
    test_decay_mask();
    test_bias_correction();
    test_clip_applied();
    test_replicated_once();
    test_backward_twice();
    test_nonfinite();
    engine_release(&g_E);
    return check_exit();
}
