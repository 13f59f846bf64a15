/* tests/test_mem.c — the tracked allocator (core/engine/mem.c) on its own, and the memory plan against the
 * closed-form model of docs/memory.md. Allocator: per-category current and peak bytes, the total peak as the
 * peak of the sum (not the sum of peaks), at_peak (the categories at the moment of the total peak),
 * mem_reset_peaks, and the budget boundary: an allocation that reaches the budget exactly fits, one
 * byte more is refused — in plan mode (recorded in the stats, counting goes on) and in real mode (the
 * out-of-memory handler runs before anything is allocated; here it jumps back instead of exiting).
 * Plan: a budget of exactly the planned peak fits, one byte less stops at the same allocation in the
 * plan. Arenas: a plan arena beside a real one leaves it untouched. Closed form (docs/memory.md, "Closed-form memory model"): params = 4*sum_u ceil(P_u/dp),
 * optimizer = 2*params, grads = params + (dp > 1) 4*(padded P_root + padded P_layer), with P_u
 * computed here from the config, on several meshes. */
#include "tests/check.h"
#include "core/engine/mem.h"
#include "core/engine/model.h"
#include "core/engine/plan.h"
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

static jmp_buf g_jmp;
static int g_oom_calls;
static mem_stats g_oom_seen;
static void oom_jump(const mem_stats *s) { g_oom_calls++; g_oom_seen = *s; longjmp(g_jmp, 1); }

static void test_tracking(int plan) {
    const char *m = plan ? "plan" : "real";
    char n[96];
    mem_arena A_, *A = &A_;
    mem_arena_init(A, plan ? NULL : &ops_cpu, plan, 0);
    void *a = mem_alloc(A, MEM_PARAMS, 1000);
    void *b = mem_alloc(A, MEM_ACTIVATIONS, 5000);
    void *c = mem_calloc(A, MEM_WORKSPACE, 3000);
    const mem_stats *s = mem_get_stats(A);
    snprintf(n, sizeof n, "mem_%s_current_per_category", m);
    CHECK(s->cur[MEM_PARAMS] == 1000 && s->cur[MEM_ACTIVATIONS] == 5000 && s->cur[MEM_WORKSPACE] == 3000 &&
          s->cur[MEM_GRADS] == 0 && s->total_cur == 9000, n, "cur %llu %llu %llu total %llu",
          (unsigned long long)s->cur[MEM_PARAMS], (unsigned long long)s->cur[MEM_ACTIVATIONS],
          (unsigned long long)s->cur[MEM_WORKSPACE], (unsigned long long)s->total_cur);
    if (!plan) {
        int zero = 1;
        for (int i = 0; i < 3000; i++) zero &= ((unsigned char *)c)[i] == 0;
        CHECK(zero, "mem_real_calloc_zeroes", "mem_calloc returned non-zero bytes");
    }
    mem_free(A, b);                                   /* total 4000; peak so far 9000 */
    void *d = mem_alloc(A, MEM_GRADS, 4000);          /* total 8000 */
    void *e = mem_alloc(A, MEM_ACTIVATIONS, 2000);    /* total 10000: new total peak */
    s = mem_get_stats(A);
    snprintf(n, sizeof n, "mem_%s_peak_per_category", m);
    CHECK(s->peak[MEM_ACTIVATIONS] == 5000 && s->peak[MEM_GRADS] == 4000 && s->peak[MEM_PARAMS] == 1000 &&
          s->cur[MEM_ACTIVATIONS] == 2000, n, "peak act %llu grads %llu",
          (unsigned long long)s->peak[MEM_ACTIVATIONS], (unsigned long long)s->peak[MEM_GRADS]);
    snprintf(n, sizeof n, "mem_%s_total_peak_is_peak_of_sum", m);
    CHECK(s->total_peak == 10000, n, "total peak %llu, want 10000 (sum of category peaks is 13000)",
          (unsigned long long)s->total_peak);
    uint64_t sum = 0;
    for (int k = 0; k < MEM_NCAT; k++) sum += s->at_peak[k];
    snprintf(n, sizeof n, "mem_%s_at_peak", m);
    CHECK(sum == s->total_peak && s->at_peak[MEM_ACTIVATIONS] == 2000 && s->at_peak[MEM_GRADS] == 4000 &&
          s->at_peak[MEM_WORKSPACE] == 3000 && s->at_peak[MEM_PARAMS] == 1000, n,
          "at_peak act %llu grads %llu ws %llu (sum %llu)", (unsigned long long)s->at_peak[MEM_ACTIVATIONS],
          (unsigned long long)s->at_peak[MEM_GRADS], (unsigned long long)s->at_peak[MEM_WORKSPACE], (unsigned long long)sum);
    mem_free(A, e); mem_free(A, d);
    mem_reset_peaks(A);
    s = mem_get_stats(A);
    snprintf(n, sizeof n, "mem_%s_reset_peaks", m);
    CHECK(s->total_peak == 4000 && s->peak[MEM_ACTIVATIONS] == 0 && s->peak[MEM_WORKSPACE] == 3000, n,
          "after reset: total peak %llu act peak %llu", (unsigned long long)s->total_peak,
          (unsigned long long)s->peak[MEM_ACTIVATIONS]);
    mem_free(A, a); mem_free(A, c);
    snprintf(n, sizeof n, "mem_%s_all_freed", m);
    CHECK(mem_get_stats(A)->total_cur == 0, n, "total_cur %llu", (unsigned long long)mem_get_stats(A)->total_cur);
    mem_arena_release(A);
}

static void test_budget_plan(void) {
    mem_arena A_, *A = &A_;
    mem_arena_init(A, NULL, 1, 10000);
    mem_alloc(A, MEM_PARAMS, 6000);
    mem_alloc(A, MEM_GRADS, 4000);                    /* exactly the budget */
    const mem_stats *s = mem_get_stats(A);
    CHECK(!s->over_budget && s->total_cur == 10000, "mem_plan_budget_exact_fits", "over_budget %d at %llu",
          s->over_budget, (unsigned long long)s->total_cur);
    mem_alloc(A, MEM_WORKSPACE, 1);                   /* one byte over */
    s = mem_get_stats(A);
    CHECK(s->over_budget && s->oom_cat == MEM_WORKSPACE && s->oom_bytes == 1 && s->oom_in_use == 10000 &&
          s->total_cur == 10001, "mem_plan_budget_one_byte_over", "over %d cat %d bytes %llu in use %llu",
          s->over_budget, (int)s->oom_cat, (unsigned long long)s->oom_bytes, (unsigned long long)s->oom_in_use);
    mem_arena_release(A);
}

static void test_budget_real(void) {
    mem_arena A_, *A = &A_;
    mem_arena_init(A, &ops_cpu, 0, 10000);
    mem_set_oom_handler(A, oom_jump);
    g_oom_calls = 0;
    void *volatile a = NULL, *volatile b = NULL, *volatile c = NULL;
    if (setjmp(g_jmp) == 0) {
        a = mem_alloc(A, MEM_PARAMS, 6000);
        b = mem_alloc(A, MEM_OPTIMIZER, 4000);        /* exactly the budget */
    }
    CHECK(g_oom_calls == 0 && a && b && mem_get_stats(A)->total_cur == 10000, "mem_real_budget_exact_fits",
          "oom handler called %d times at %llu bytes", g_oom_calls, (unsigned long long)mem_get_stats(A)->total_cur);
    if (setjmp(g_jmp) == 0) c = mem_alloc(A, MEM_ACTIVATIONS, 1);
    CHECK(g_oom_calls == 1 && !c && g_oom_seen.oom_cat == MEM_ACTIVATIONS && g_oom_seen.oom_bytes == 1 &&
          g_oom_seen.oom_in_use == 10000 && g_oom_seen.budget == 10000 && mem_get_stats(A)->total_cur == 10000,
          "mem_real_budget_one_byte_over_stops", "handler calls %d, cat %d, bytes %llu, in use %llu, total now %llu",
          g_oom_calls, (int)g_oom_seen.oom_cat, (unsigned long long)g_oom_seen.oom_bytes,
          (unsigned long long)g_oom_seen.oom_in_use, (unsigned long long)mem_get_stats(A)->total_cur);
    mem_set_oom_handler(A, NULL);
    mem_arena_release(A);
}

/* two arenas are independent: a plan arena made, used and released while a real one holds memory
 * leaves the real one's allocations and figures as they were (the budget gate plans beside a live engine) */
static void test_arenas_coexist(void) {
    mem_arena live, plan;
    mem_arena_init(&live, &ops_cpu, 0, 0);
    unsigned char *p = mem_alloc(&live, MEM_PARAMS, 4096);
    for (int i = 0; i < 4096; i++) p[i] = (unsigned char)i;
    mem_stats before = *mem_get_stats(&live);
    mem_arena_init(&plan, NULL, 1, 100);
    mem_alloc(&plan, MEM_ACTIVATIONS, 1 << 20);
    int plan_counted = mem_get_stats(&plan)->total_cur == 1 << 20 && mem_get_stats(&plan)->over_budget;
    mem_arena_release(&plan);
    int intact = 1;
    for (int i = 0; i < 4096; i++) intact &= p[i] == (unsigned char)i;
    CHECK(plan_counted && intact && !memcmp(&before, mem_get_stats(&live), sizeof before), "mem_arenas_coexist",
          "plan counted %d, live bytes intact %d, live figures unchanged %d", plan_counted, intact,
          !memcmp(&before, mem_get_stats(&live), sizeof before));
    mem_free(&live, p);
    mem_arena_release(&live);
}

/* the allocator itself refusing (not the budget): the handler hears it as the host on the CPU backend */
static void *refuse_alloc(size_t bytes) { (void)bytes; return NULL; }
static void test_alloc_refused(void) {
    ops_t refusing = ops_cpu;
    refusing.dev_alloc = refuse_alloc;
    mem_arena arena, *A = &arena;
    mem_arena_init(A, &refusing, 0, 0);
    mem_set_oom_handler(A, oom_jump);
    g_oom_calls = 0;
    void *volatile p = NULL;
    if (setjmp(g_jmp) == 0) p = mem_alloc(A, MEM_GATHERED, 4096);
    char m[512] = "";
    if (g_oom_calls) mem_oom_message(&g_oom_seen, m, sizeof m);
    CHECK(g_oom_calls == 1 && !p && g_oom_seen.alloc_failed == 1 && g_oom_seen.oom_cat == MEM_GATHERED &&
              g_oom_seen.oom_bytes == 4096 && !strcmp(g_oom_seen.oom_where, "host") &&
              strstr(m, "out of host memory: gathered asked 4.00 KiB (4096 bytes)") && !strstr(m, "device"),
          "mem_real_host_refuses_is_out_of_host_memory", "calls %d failed %d: %s", g_oom_calls, g_oom_seen.alloc_failed, m);
    refusing.name = "cuda";
    mem_arena_release(A);
    mem_arena_init(A, &refusing, 0, 0);
    mem_set_oom_handler(A, oom_jump);
    g_oom_calls = 0;
    if (setjmp(g_jmp) == 0) p = mem_alloc(A, MEM_PARAMS, 8);
    if (g_oom_calls) mem_oom_message(&g_oom_seen, m, sizeof m);
    CHECK(g_oom_calls == 1 && strstr(m, "out of device memory: params asked") && strstr(m, "the device itself is full"),
          "mem_real_device_refuses_is_out_of_device_memory", "calls %d: %s", g_oom_calls, m);
    mem_set_oom_handler(A, NULL);
    mem_arena_release(A);
}

/* what the plans below plan for: an fp32 engine */
static engine_t g_fp32;

static model_config cfg(void) {
    model_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "memtest");
    c.vocab_size = 250; c.hidden_size = 64; c.intermediate_size = 192; c.num_hidden_layers = 2;
    c.num_attention_heads = 16; c.num_key_value_heads = 8; c.rms_norm_eps = 1e-5; c.rope_theta = 10000;
    c.max_position_embeddings = 64; c.initializer_range = 0.02;
    return c;
}

/* a budget of exactly the planned peak fits; one byte less is refused by the plan */
static void test_plan_boundary(int world, int tp) {
    model_config c = cfg();
    model_opts o = {.B = 2, .T = 32, .sequence_parallel = 1, .prefetch = 1, .checkpoint = 0};
    char err[256], n[96];
    mem_stats s, t, u;
    int w;
    int rc = plan_world(&g_fp32, &c, world, tp, &o, 0, &s, &w, err, sizeof err);
    rc |= plan_rank(&g_fp32, &c, world, tp, w, &o, s.total_peak, &t, err, sizeof err);
    rc |= plan_rank(&g_fp32, &c, world, tp, w, &o, s.total_peak - 1, &u, err, sizeof err);
    snprintf(n, sizeof n, "mem_plan_budget_at_peak_%dx%d", world / tp, tp);
    CHECK(rc == 0 && !t.over_budget && t.total_peak == s.total_peak, n, "rc %d, over_budget %d at budget = peak %llu",
          rc, t.over_budget, (unsigned long long)s.total_peak);
    snprintf(n, sizeof n, "mem_plan_budget_peak_minus_1_%dx%d", world / tp, tp);
    CHECK(rc == 0 && u.over_budget && u.oom_in_use + u.oom_bytes == s.total_peak, n,
          "over_budget %d, refused at %llu + %llu (peak %llu)", u.over_budget, (unsigned long long)u.oom_in_use,
          (unsigned long long)u.oom_bytes, (unsigned long long)s.total_peak);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* docs/memory.md closed form for params, grads, optimizer against the plan of every rank */
static void test_closed_form(int world, int tp) {
    model_config c = cfg();
    model_opts o = {.B = 2, .T = 32, .sequence_parallel = 1, .prefetch = 1, .checkpoint = 0};
    int64_t d = c.hidden_size, f = c.intermediate_size, H = c.num_attention_heads, KV = c.num_key_value_heads;
    int64_t hd = d / H, V = c.vocab_size, L = c.num_hidden_layers, dp = world / tp, s = 4;
    int64_t P_layer = 2 * d + d * hd * (2 * H + 2 * KV) / tp + 3 * d * f / tp;
    /* untied: the root is two units, the embedding and the head (final norm + lm_head) */
    int64_t P_emb = d * ceil_div(V, tp), P_head = d * ceil_div(V, tp) + d;
    int64_t shards = L * ceil_div(P_layer, dp) + ceil_div(P_emb, dp) + ceil_div(P_head, dp);
    uint64_t params = (uint64_t)(s * shards), optimizer = 2 * params;
    /* one unit's unsharded (padded) gradient at a time on top of the owned shards */
    int64_t pad_max = ceil_div(P_layer, dp) * dp;
    if (ceil_div(P_emb, dp) * dp > pad_max) pad_max = ceil_div(P_emb, dp) * dp;
    if (ceil_div(P_head, dp) * dp > pad_max) pad_max = ceil_div(P_head, dp) * dp;
    uint64_t grads = params + (dp > 1 ? (uint64_t)(s * pad_max) : 0);
    int good = 1;
    char err[256], n[96], why[256] = "";
    for (int r = 0; r < world && good; r++) {
        mem_stats st;
        if (plan_rank(&g_fp32, &c, world, tp, r, &o, 0, &st, err, sizeof err)) { good = 0; snprintf(why, sizeof why, "%s", err); break; }
        if (st.peak[MEM_PARAMS] != params || st.peak[MEM_OPTIMIZER] != optimizer || st.peak[MEM_GRADS] != grads) {
            good = 0;
            snprintf(why, sizeof why, "rank %d: params %llu/%llu optimizer %llu/%llu grads %llu/%llu (plan/closed form)", r,
                     (unsigned long long)st.peak[MEM_PARAMS], (unsigned long long)params,
                     (unsigned long long)st.peak[MEM_OPTIMIZER], (unsigned long long)optimizer,
                     (unsigned long long)st.peak[MEM_GRADS], (unsigned long long)grads);
        }
    }
    snprintf(n, sizeof n, "mem_closed_form_state_%dx%d", world / tp, tp);
    CHECK(good, n, "%s", why);
}

int main(void) {
    cpu_blas_init();
    engine_init_plan(&g_fp32, DTYPE_F32, 0);
    test_tracking(1);
    test_tracking(0);
    test_budget_plan();
    test_budget_real();
    test_arenas_coexist();
    test_alloc_refused();
    test_plan_boundary(1, 1);
    test_plan_boundary(8, 2);
    test_plan_boundary(8, 8);
    static const int meshes[][2] = {{1, 1}, {8, 8}, {8, 4}, {8, 2}, {8, 1}, {3, 1}, {6, 2}};
    for (size_t i = 0; i < sizeof meshes / sizeof meshes[0]; i++) test_closed_form(meshes[i][0], meshes[i][1]);
    return check_exit();
}
