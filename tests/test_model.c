/* tests/test_model.c — the whole model's gradient by finite differences (docs/testing.md), on a tiny GQA
 * config (KV < H, odd vocabulary) on one rank with the CPU kernels, plus checks that activation
 * checkpointing reproduces the gradients bit for bit and that the memory plan equals the measured
 * tracked peak for this model, and that a recorder attached to a planned engine sees every op and
 * collective of the replay. The FD check runs twice: untied, and with tied embeddings and llama3
 * rope_scaling (one tensor as embedding and lm_head: its FD derivative sees both uses at once).
 * FD in fp32: the loss is the token SUM (scale 1) so gradients are O(0.1..10); central differences
 * with eps 1e-2 along (a) the normalised analytic gradient of each tensor and (b) a random unit
 * direction per tensor, and (c) per element on each tensor's largest-gradient elements. The loss
 * (~60) carries fp32 rounding of ~1e-5, i.e. FD noise ~1e-3 absolute; tolerances are set above it
 * (2e-2 relative + 2e-3 absolute) and far below what a wrong gradient (O(1) relative) gives. */
#include "tests/check.h"
#include "core/engine/mem.h"
#include "core/engine/model.h"
#include "core/engine/plan.h"
#include "core/engine/init.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static model_config cfg(void) {
    model_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "fdtest");
    c.vocab_size = 37; c.hidden_size = 16; c.intermediate_size = 24; c.num_hidden_layers = 2;
    c.num_attention_heads = 4; c.num_key_value_heads = 2; c.rms_norm_eps = 1e-5; c.rope_theta = 10000;
    c.max_position_embeddings = 64; c.initializer_range = 0.2;
    return c;
}

enum { B = 2, T = 8 };
static int32_t in[B * T], tg[B * T];
static comm_group g1, g2;
static engine_t g_E;          /* the live engine of the model under test */

/* tied embeddings, and llama3 rope_scaling whose bands all occur at hd 4 with these numbers */
static model_config cfg_tied(void) {
    model_config c = cfg();
    snprintf(c.name, sizeof c.name, "fdtest_tied");
    c.tie_word_embeddings = 1;
    c.rope_theta = 100;
    c.rope = (rope_scaling){ROPE_LLAMA3, 4.0, 1.0, 4.0, 16}; /* hd 4: wavelengths 6.3 (interpolated), 62.8 (divided) */
    return c;
}

static void build_cfg(model_t *M, model_config c, int ckpt) {
    mesh_t m; char err[256];
    mesh_init(&m, 1, 0, 1, err, sizeof err);
    comm_null_group(&g1, &g_E.comm, 1, 0); comm_null_group(&g2, &g_E.comm, 1, 0);
    model_opts o = {.B = B, .T = T, .sequence_parallel = 0, .prefetch = 1, .checkpoint = ckpt};
    if (model_init(M, &g_E, &c, &m, &g1, &g2, &o, err, sizeof err)) { printf("FAIL model_init: %s\n", err); exit(1); }
    model_init_params(M, 7);
}

static void build(model_t *M, int ckpt) { build_cfg(M, cfg(), ckpt); }

static double loss_at(model_t *M) { return model_forward_loss(M, in, tg); }

/* every parameter tensor's gradient against central differences of the loss (see the top) */
static void fd_check(model_t *M, const char *tag) {
    double eps = 1e-2;
    uint64_t rng = 12345;
    for (int ui = 0; ui < M->fsdp.n; ui++) {
        fsdp_unit *u = &M->units[ui];
        for (int k = 0; k < u->nseg; k++) {
            fsdp_seg *s = &u->seg[k];
            int64_t n = s->rows * s->cols;
            float *p = u->p + s->off, *g = u->g + s->off;
            double gn = 0;
            for (int64_t e = 0; e < n; e++) gn += (double)g[e] * g[e];
            gn = sqrt(gn);
            char name[160];
            /* directions: the gradient itself and a random one */
            for (int dir = 0; dir < 2; dir++) {
                double *uvec = malloc((size_t)n * sizeof(double)), un = 0, gu = 0;
                for (int64_t e = 0; e < n; e++) {
                    if (dir == 0) uvec[e] = g[e];
                    else { rng = init_splitmix64(rng); uvec[e] = init_normal(99, rng, (uint64_t)e); }
                    un += uvec[e] * uvec[e];
                }
                un = sqrt(un);
                for (int64_t e = 0; e < n; e++) { uvec[e] /= un; gu += uvec[e] * g[e]; }
                float *save = malloc((size_t)n * sizeof(float));
                memcpy(save, p, (size_t)n * sizeof(float));
                for (int64_t e = 0; e < n; e++) p[e] = (float)(save[e] + eps * uvec[e]);
                double lp = loss_at(M);
                for (int64_t e = 0; e < n; e++) p[e] = (float)(save[e] - eps * uvec[e]);
                double lm = loss_at(M);
                memcpy(p, save, (size_t)n * sizeof(float));
                double fd = (lp - lm) / (2 * eps);
                snprintf(name, sizeof name, "model_grad%s_%s_%s", tag, dir ? "random_dir" : "grad_dir", s->name);
                CHECK(fabs(fd - gu) <= 2e-2 * fabs(gu) + 2e-3 && (dir || gn > 1e-4), name,
                      "fd %.6g vs analytic %.6g (|g| %.3g)", fd, gu, gn);
                free(save); free(uvec);
            }
            /* the two largest-gradient elements, one by one */
            for (int rep = 0; rep < 2; rep++) {
                int64_t best = -1;
                for (int64_t e = 0; e < n; e++)
                    if (best < 0 || fabsf(g[e]) > fabsf(g[best])) { if (rep == 0 || e != 0) best = e; }
                if (rep == 1) { /* second largest */
                    int64_t b1 = best; best = -1;
                    for (int64_t e = 0; e < n; e++) if (e != b1 && (best < 0 || fabsf(g[e]) > fabsf(g[best]))) best = e;
                }
                float save = p[best];
                p[best] = save + (float)eps; double lp = loss_at(M);
                p[best] = save - (float)eps; double lm = loss_at(M);
                p[best] = save;
                double fd = (lp - lm) / (2 * eps);
                snprintf(name, sizeof name, "model_grad%s_elem%d_%s", tag, rep, s->name);
                CHECK(fabs(fd - g[best]) <= 2e-2 * fabs(g[best]) + 2e-3, name, "element %lld: fd %.6g vs analytic %.6g",
                      (long long)best, fd, (double)g[best]);
            }
        }
    }
}

/* A recorder attached to the engine a plan is made for sees the replay: every GEMM of one step (7 per
 * layer forward, 14 with checkpointing; 12 per layer backward and the lm_head's), each started
 * all-gather waited for once, every collective on a group of the 2x2 mesh or the world. */
typedef struct {
    int mm_fwd, mm_bwd, f32out, started, waited, other_size, host, bad_id;
    size_t start_bytes, wait_bytes;
    uint64_t start_ids, wait_ids, last_start;
} seen_t;
static void seen_mm_fwd(void *c, floatX *o, const floatX *i, const floatX *w, int N, int Ci, int Co, int a) {
    (void)o; (void)i; (void)w; (void)N; (void)Ci; (void)Co; (void)a; ((seen_t *)c)->mm_fwd++;
}
static void seen_mm_bwd(void *c, floatX *di, float *dw, const floatX *d, const floatX *i, const floatX *w, int N, int Ci,
                        int Co) {
    (void)di; (void)dw; (void)d; (void)i; (void)w; (void)N; (void)Ci; (void)Co; ((seen_t *)c)->mm_bwd++;
}
static void seen_f32out(void *c, float *o, const floatX *i, const floatX *w, int N, int Ci, int Co) {
    (void)o; (void)i; (void)w; (void)N; (void)Ci; (void)Co; ((seen_t *)c)->f32out++;
}
static void seen_coll(void *c, const comm_group *g, comm_kind k, size_t bytes, comm_phase ph, int host, uint64_t id) {
    seen_t *s = c;
    (void)k;
    if (g->size != 2 && g->size != 4) s->other_size++;   /* the mesh's groups, the world (the gradient norm) */
    s->host += host;
    /* a blocking call has id 0; each start a new one (increasing), its wait the same */
    if (ph == COMM_BLOCKING) s->bad_id += id != 0;
    if (ph == COMM_STARTED) {
        s->started++; s->start_bytes += bytes; s->start_ids += id;
        s->bad_id += id <= s->last_start;
        s->last_start = id;
    }
    if (ph == COMM_WAITED) { s->waited++; s->wait_bytes += bytes; s->wait_ids += id; s->bad_id += id == 0 || id > s->last_start; }
}
static void test_plan_trace(int ckpt) {
    model_config c = cfg();
    model_opts o = {.B = B, .T = T, .sequence_parallel = 1, .sp_local = 1, .prefetch = 1, .checkpoint = ckpt};
    seen_t s = {0};
    ops_trace ot = {.ctx = &s, .matmul_forward = seen_mm_fwd, .matmul_backward = seen_mm_bwd, .matmul_forward_f32out = seen_f32out};
    comm_trace ct = {.ctx = &s, .collective = seen_coll};
    engine_trace tr = {.ops = &ot, .comm = &ct};
    engine_t E;
    engine_init_plan(&E, DTYPE_F32, 0);
    engine_set_trace(&E, &tr);
    mem_stats ps; char err[256], name[64];
    int rc = plan_rank(&E, &c, 4, 2, 0, &o, 0, &ps, err, sizeof err), L = c.num_hidden_layers;
    snprintf(name, sizeof name, "model_plan_trace_gemms%s", ckpt ? "_checkpointing" : "");
    CHECK(rc == 0 && s.mm_fwd == (ckpt ? 14 : 7) * L && s.mm_bwd == 12 * L + 1 && s.f32out == 1, name,
          "rc %d: matmul_forward %d, matmul_backward %d, f32out %d", rc, s.mm_fwd, s.mm_bwd, s.f32out);
    snprintf(name, sizeof name, "model_plan_trace_collectives%s", ckpt ? "_checkpointing" : "");
    CHECK(rc == 0 && s.started > 0 && s.started == s.waited && s.start_bytes == s.wait_bytes && !s.other_size, name,
          "started %d (%zu bytes), waited %d (%zu bytes), %d on a group of another size", s.started, s.start_bytes, s.waited,
          s.wait_bytes, s.other_size);
    /* the one host-memory collective of plan_rank's step: optim_step's gradient-norm all-reduce (f64) */
    snprintf(name, sizeof name, "model_plan_trace_ids_host%s", ckpt ? "_checkpointing" : "");
    CHECK(rc == 0 && !s.bad_id && s.start_ids == s.wait_ids && s.host == 1, name,
          "%d ids out of place, started ids sum %llu, waited %llu, %d on host memory", s.bad_id,
          (unsigned long long)s.start_ids, (unsigned long long)s.wait_ids, s.host);
    engine_release(&E);
}

int main(void) {
    cpu_blas_init();
    for (int i = 0; i < B * T; i++) { in[i] = (int32_t)(init_splitmix64(i) % 37); tg[i] = (int32_t)(init_splitmix64(i + 100) % 37); }
    engine_init(&g_E, &device_cpu, DTYPE_F32, NULL, 0);
    model_t M;
    build(&M, 0);
    double L0 = model_forward_backward(&M, in, tg, 1.0f);
    CHECK(isfinite(L0) && L0 > 0, "model_loss_finite", "loss %g", L0);
    /* initial loss of a random model is about ln V per token */
    CHECK(fabs(L0 / (B * T) - log(37.0)) < 1.0, "model_initial_loss_near_lnV", "mean loss %g vs ln 37 = %g", L0 / (B * T), log(37.0));
    const mem_stats *ms = mem_get_stats(&g_E.mem);
    uint64_t measured_peak = ms->total_peak, measured_cat[MEM_NCAT];
    memcpy(measured_cat, ms->peak, sizeof measured_cat);
    fd_check(&M, "");
    /* checkpointing: identical gradients, lower activation peak */
    int64_t total = 0;
    for (int ui = 0; ui < M.fsdp.n; ui++) total += M.units[ui].shard;
    float *g_ref = malloc((size_t)total * sizeof(float));
    for (int ui = 0, o = 0; ui < M.fsdp.n; o += (int)M.units[ui].shard, ui++)
        memcpy(g_ref + o, M.units[ui].g, (size_t)M.units[ui].shard * sizeof(float));
    uint64_t act_peak = measured_cat[MEM_ACTIVATIONS];
    model_free(&M);
    engine_release(&g_E);
    engine_init(&g_E, &device_cpu, DTYPE_F32, NULL, 0);
    build(&M, 1);
    double L1 = model_forward_backward(&M, in, tg, 1.0f);
    int same = L1 == L0;
    for (int ui = 0, o = 0; ui < M.fsdp.n; o += (int)M.units[ui].shard, ui++)
        same &= !memcmp(g_ref + o, M.units[ui].g, (size_t)M.units[ui].shard * sizeof(float));
    CHECK(same, "model_checkpointing_same_gradients", "loss %.9g vs %.9g or gradients differ", L1, L0);
    CHECK(mem_get_stats(&g_E.mem)->peak[MEM_ACTIVATIONS] < act_peak, "model_checkpointing_lower_activations",
          "activation peak %llu vs %llu", (unsigned long long)mem_get_stats(&g_E.mem)->peak[MEM_ACTIVATIONS], (unsigned long long)act_peak);
    free(g_ref);
    model_free(&M);
    engine_release(&g_E);
    /* the plan of the same step equals what was measured (the optimizer allocates nothing more) */
    model_config c = cfg();
    model_opts o = {.B = B, .T = T, .sequence_parallel = 0, .prefetch = 1, .checkpoint = 0};
    mem_stats ps; char err[256];
    int rc = plan_rank(&g_E, &c, 1, 1, 0, &o, 0, &ps, err, sizeof err);
    CHECK(rc == 0 && ps.total_peak == measured_peak && !memcmp(ps.peak, measured_cat, sizeof measured_cat),
          "model_plan_equals_measured", "planned %llu vs measured %llu", (unsigned long long)ps.total_peak,
          (unsigned long long)measured_peak);

    /* tied embeddings: one shared tensor, no lm_head segment; its gradient sums both uses (FD) */
    engine_init(&g_E, &device_cpu, DTYPE_F32, NULL, 0);
    build_cfg(&M, cfg_tied(), 0);
    const fsdp_unit *root = &M.units[M.L];
    int has_head = 0;
    for (int k = 0; k < root->nseg; k++) has_head |= strcmp(root->seg[k].name, "lm_head.weight") == 0;
    CHECK(root->nseg == 2 && !has_head && !strcmp(root->seg[0].name, "model.embed_tokens.weight"),
          "model_tied_root_has_one_embedding", "%d segments, lm_head %d", root->nseg, has_head);
    double Lt = model_forward_backward(&M, in, tg, 1.0f);
    CHECK(isfinite(Lt) && fabs(Lt / (B * T) - log(37.0)) < 1.0, "model_tied_loss_near_lnV", "mean loss %g", Lt / (B * T));
    uint64_t tied_peak = mem_get_stats(&g_E.mem)->total_peak;
    fd_check(&M, "_tied");
    model_free(&M);
    engine_release(&g_E);
    c = cfg_tied();
    rc = plan_rank(&g_E, &c, 1, 1, 0, &o, 0, &ps, err, sizeof err);
    CHECK(rc == 0 && ps.total_peak == tied_peak && tied_peak < measured_peak, "model_tied_plan_equals_measured",
          "planned %llu vs measured %llu (untied %llu)", (unsigned long long)ps.total_peak,
          (unsigned long long)tied_peak, (unsigned long long)measured_peak);
    test_plan_trace(0);
    test_plan_trace(1);
    return check_exit();
}
