/* tests/test_cost.c — the step-time model (core/cost/) on its own: the arithmetic of a hand-made trace on
 * a machine with known tables (the exact predicted milliseconds), the overlap rules of the timeline
 * (a started gather longer than the compute it hides behind exposes the difference, a shorter one
 * nothing; without overlap it is all exposed; a blocking collective always is), hand-computed timelines
 * for each clock that can end the step, the look-ups (curve interpolation, nearest measured GEMM shapes,
 * the collective entry for a group shape and for a started collective), the recorded step (every
 * started collective is waited for; the GEMM FLOPs of a step are exactly 6 × tokens × matrix
 * parameters; the layers every:K recomputes), monotonicity on real steps (more bandwidth is never slower, more ranks per core
 * never faster), and the machine file: round trip, and every bad file a line naming its field. */
#include "tests/check.h"
#include "core/cost/machine.h"
#include "core/cost/predict.h"
#include "core/cost/timeline.h"
#include "core/formats/config.h"
#include "core/job/catalog.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(b) > 1 ? fabs(b) : 1); }

/* a synchronous machine: GEMM 100x100x100 measured at 50 us, add by a curve, all-gather over 2 ranks on
 * one host as 10 us + bytes / 1 GB/s of bus bandwidth */
static void toy_machine(cost_machine *m, int async, int overlap) {
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "toy");
    m->async = async; m->overlap = overlap;
    m->peak_tflops = 1; m->n_eff = 1; m->eff_flops[0] = 1; m->eff[0] = 1;
    m->attention_efficiency = 1; m->memory_gbs = 1; m->memory_efficiency = 1; m->host_link_gbs = 1;
    m->cores_per_host = 2; m->oversubscribed_efficiency = 0.5;
    m->ngemm = 1;
    m->gemm = calloc(1, sizeof *m->gemm);
    m->gemm[0] = (cost_gemm_point){COST_GEMM_FWD, 100, 100, 100, 50};
    m->ops[COST_ADD] = (cost_curve){.n = 2, .x = {1000, 2000}, .us = {2, 3}};
    m->ncoll = 1;
    m->coll = calloc(1, sizeof *m->coll);
    m->coll[0] = (cost_coll){.kind = COMM_ALL_GATHER, .ranks = 2, .ranks_per_host = 2, .scope = COST_SCOPE_INTRA,
                             .latency_us = 10, .busbw_gbs = 1};
}

static cost_event op(cost_op_kind k, int64_t a, int64_t b, int64_t c) {
    cost_event e = {.type = COST_EV_OP, .kind = (uint8_t)k, .dim = {a, b, c, 0, 0}};
    cost_op_work(k, e.dim, 4, &e.flops, &e.bytes);
    return e;
}
static cost_event coll(int type, double bytes, uint32_t id) {
    return (cost_event){.type = (uint8_t)type, .kind = COMM_ALL_GATHER, .group = COST_GROUP_DP, .ranks = 2, .id = id,
                        .bytes = bytes};
}

static void test_arithmetic(void) {
    cost_machine m;
    toy_machine(&m, 0, 0);
    /* GEMM 50 us; add of 500 floats = 6000 bytes, past the curve's end: its last rate, 3 us per 2000 B = 9 us;
     * all-gather of 4000 B over 2 ranks: 10 + 4000 * (1/2) / 1000 = 12 us. Total 71 us. */
    cost_event ev[] = {op(COST_GEMM_FWD, 100, 100, 100), op(COST_ADD, 500, 0, 0), coll(COST_EV_COLL, 4000, 0)};
    cost_trace t = {.ev = ev, .n = 3, .cbytes = 4};
    cost_place p = {.world = 2, .tp = 1, .rank = 0, .ranks_per_host = 2};
    cost_result r;
    char err[256];
    int rc = cost_timeline(&t, &m, &p, &r, err, sizeof err);
    CHECK(rc == 0 && near(r.step_ms, 0.071), "cost_arithmetic_exact_step", "rc %d step %.9f ms, want 0.071 (%s)", rc,
          r.step_ms, rc ? err : "");
    CHECK(near(r.compute_ms, 0.059) && near(r.comm_ms, 0.012) && near(r.exposed_comm_ms, 0.012) &&
          near(r.class_ms[COST_CLASS_GEMM], 0.05) && near(r.comm_by_ms[COST_GROUP_DP][COMM_ALL_GATHER], 0.012),
          "cost_arithmetic_breakdown", "compute %.6f comm %.6f exposed %.6f gemm %.6f", r.compute_ms, r.comm_ms,
          r.exposed_comm_ms, r.class_ms[COST_CLASS_GEMM]);
    /* four ranks on the 2 cores: compute × 4 / (2 × 0.5) = ×4, collectives as measured (the entry's shape) */
    cost_place p4 = {.world = 2, .tp = 1, .rank = 0, .ranks_per_host = 4};
    cost_machine_free(&m);
    toy_machine(&m, 0, 0);
    m.coll[0].host_ranks = 0;
    rc = cost_timeline(&t, &m, &p4, &r, err, sizeof err);
    CHECK(rc == 0 && near(r.share, 1.0), "cost_share_counts_job_ranks", "rc %d share %g (2 ranks of a world of 2)", rc, r.share);
    CHECK(near(cost_machine_share(&m, 4), 4.0) && near(cost_machine_share(&m, 2), 1.0) && near(cost_machine_share(&m, 1), 1.0),
          "cost_share_factor", "share(4) %g share(2) %g", cost_machine_share(&m, 4), cost_machine_share(&m, 2));
    /* ops measured with 8 ranks at once on the 2 cores (share 8) are used as they are for 8 ranks, halved for 4 */
    m.calibrated_ranks = 8;
    CHECK(near(cost_machine_op_scale(&m, 8), 1.0) && near(cost_machine_op_scale(&m, 4), 0.5) &&
          near(cost_machine_op_scale(&m, 2), 0.125), "cost_op_scale_calibrated_ranks", "scale(8) %g scale(4) %g scale(2) %g",
          cost_machine_op_scale(&m, 8), cost_machine_op_scale(&m, 4), cost_machine_op_scale(&m, 2));
    cost_machine_free(&m);
    /* a sequence factor of 1.5 (whole steps' ops 1.5x the table's sum): every op 1.5x, collectives as they
     * are: 59 · 1.5 + 12 = 100.5 us; absent (0) counts as 1 */
    toy_machine(&m, 0, 0);
    m.sequence_factor = 1.5;
    rc = cost_timeline(&t, &m, &p, &r, err, sizeof err);
    CHECK(rc == 0 && near(r.step_ms, 0.1005) && near(r.compute_ms, 0.0885) && near(r.comm_ms, 0.012),
          "cost_sequence_factor_scales_ops", "rc %d step %.6f compute %.6f comm %.6f ms, want 0.1005 0.0885 0.012", rc,
          r.step_ms, r.compute_ms, r.comm_ms);
    m.sequence_factor = 0;
    rc = cost_timeline(&t, &m, &p, &r, err, sizeof err);
    CHECK(rc == 0 && near(r.step_ms, 0.071), "cost_sequence_factor_absent_is_one", "step %.6f ms, want 0.071", r.step_ms);
    cost_machine_free(&m);
}

/* compute of 50 us (one GEMM) behind a started gather of `bytes` */
static double overlapped(int overlap, double bytes, double *exposed) {
    cost_machine m;
    toy_machine(&m, 1, overlap);
    cost_event ev[] = {coll(COST_EV_START, bytes, 7), op(COST_GEMM_FWD, 100, 100, 100), coll(COST_EV_WAIT, 0, 7),
                       op(COST_GEMM_FWD, 100, 100, 100)};
    cost_trace t = {.ev = ev, .n = 4, .cbytes = 4};
    cost_place p = {.world = 2, .tp = 1, .rank = 0, .ranks_per_host = 2};
    cost_result r;
    char err[256];
    if (cost_timeline(&t, &m, &p, &r, err, sizeof err)) r.step_ms = -1;
    *exposed = r.exposed_comm_ms;
    cost_machine_free(&m);
    return r.step_ms;
}

static void test_overlap(void) {
    double ex;
    /* gather 10 + 160000/2/1000 = 90 us > 50 us of compute: 40 us exposed, step 90 + 50 */
    double s = overlapped(1, 160000, &ex);
    CHECK(near(s, 0.140) && near(ex, 0.040), "cost_overlap_long_gather_exposes_difference", "step %.6f exposed %.6f", s, ex);
    /* gather 10 + 40000/2/1000 = 30 us < 50 us: hidden, step 100 us */
    s = overlapped(1, 40000, &ex);
    CHECK(near(s, 0.100) && near(ex, 0.0), "cost_overlap_short_gather_hidden", "step %.6f exposed %.6f", s, ex);
    /* no overlap (MPI on host buffers): the gather runs at the wait */
    s = overlapped(0, 40000, &ex);
    CHECK(near(s, 0.130) && near(ex, 0.030), "cost_no_overlap_gather_at_wait", "step %.6f exposed %.6f", s, ex);
    /* a blocking collective between two GEMMs is on the critical path even where collectives overlap */
    cost_machine m;
    toy_machine(&m, 1, 1);
    cost_event ev[] = {op(COST_GEMM_FWD, 100, 100, 100), coll(COST_EV_COLL, 40000, 0), op(COST_GEMM_FWD, 100, 100, 100)};
    cost_trace t = {.ev = ev, .n = 3, .cbytes = 4};
    cost_place p = {.world = 2, .tp = 1, .rank = 0, .ranks_per_host = 2};
    cost_result r;
    char err[256];
    int rc = cost_timeline(&t, &m, &p, &r, err, sizeof err);
    CHECK(rc == 0 && near(r.step_ms, 0.130), "cost_blocking_collective_on_critical_path", "step %.6f", r.step_ms);
    /* an async device behind a slow host: 3 GEMMs, each issued in 100 us, the last reaches the device at 300 us */
    m.launch_us = 100;
    cost_event ev3[] = {op(COST_GEMM_FWD, 100, 100, 100), op(COST_GEMM_FWD, 100, 100, 100), op(COST_GEMM_FWD, 100, 100, 100)};
    cost_trace t3 = {.ev = ev3, .n = 3, .cbytes = 4};
    rc = cost_timeline(&t3, &m, &p, &r, err, sizeof err);
    CHECK(rc == 0 && near(r.step_ms, 0.350), "cost_host_issue_bound", "step %.6f (want 0.350: last issued at 300 us, 50 us)",
          r.step_ms);
    /* no entry for a group shape: a message naming it */
    cost_event e4[] = {(cost_event){.type = COST_EV_COLL, .kind = COMM_ALL_REDUCE, .group = COST_GROUP_TP, .ranks = 2, .bytes = 8}};
    cost_trace t4 = {.ev = e4, .n = 1, .cbytes = 4};
    rc = cost_timeline(&t4, &m, &p, &r, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "all_reduce") && strstr(err, "2 ranks"), "cost_missing_collective_named", "rc %d: %s", rc, err);
    cost_machine_free(&m);
}

/* The step ends when the last of the three clocks stops (core/cost/timeline.h); one hand-computed
 * timeline per clock that can be the last, and per way the compute stream gets there. Ops of 0.5 ms
 * (the toy GEMM at 500 us) and all-gathers over 2 ranks of bytes / 2 / 1 GB/s with no latency
 * (5 ms: 1e7 bytes). Times below in ms: step, compute, comm, exposed. */
typedef struct { const char *name; int async, overlap; cost_event ev[6]; int n; double step, compute, comm, exposed; } tl_case;

static void test_timeline_ends(void) {
    const cost_event G = op(COST_GEMM_FWD, 100, 100, 100);
    cost_event Gh = G;
    Gh.host = 1;                                        /* the host waits for its result (a copy to the host) */
    cost_event hostcoll = coll(COST_EV_COLL, 4e6, 0);   /* 2 ms, MPI on host memory */
    hostcoll.host = 1;
    const tl_case cases[] = {
        /* an async collective of 5 ms started at 0.5 ms, nothing waits for it: the communication stream is
         * the last clock, 5.5 ms, of which 4.5 exposed (on an async device and on a synchronous one) */
        {"cost_timeline_ends_on_comm_stream_async", 1, 1, {G, coll(COST_EV_START, 1e7, 1), G}, 3, 5.5, 1.0, 5.0, 4.5},
        {"cost_timeline_ends_on_comm_stream_sync", 0, 1, {G, coll(COST_EV_START, 1e7, 1), G}, 3, 5.5, 1.0, 5.0, 4.5},
        /* the same collective waited for after the compute: the compute stream ends with it */
        {"cost_timeline_ends_on_wait_for_long_collective", 1, 1,
         {G, coll(COST_EV_START, 1e7, 1), G, coll(COST_EV_WAIT, 0, 1)}, 4, 5.5, 1.0, 5.0, 4.5},
        /* a 0.2 ms collective behind 0.5 ms of compute: hidden, the compute stream ends the step */
        {"cost_timeline_ends_on_compute_collective_hidden", 1, 1,
         {G, coll(COST_EV_START, 4e5, 1), G, coll(COST_EV_WAIT, 0, 1)}, 4, 1.0, 1.0, 0.2, 0.0},
        /* a blocking 2 ms collective last: the compute stream waits for its end, 2.5 ms */
        {"cost_timeline_ends_on_blocking_collective", 1, 1, {G, coll(COST_EV_COLL, 4e6, 0)}, 2, 2.5, 0.5, 2.0, 2.0},
        /* an op's result copied to the host, then 2 ms of MPI on host memory: the host is the last clock
         * (the device stream stopped at 0.5 ms) */
        {"cost_timeline_ends_on_host", 1, 1, {Gh, hostcoll}, 2, 2.5, 0.5, 2.0, 2.0},
        /* no overlap (MPI on host buffers): the started collective runs at its wait, after all compute */
        {"cost_timeline_ends_on_wait_without_overlap", 0, 0,
         {G, coll(COST_EV_START, 1e7, 1), G, coll(COST_EV_WAIT, 0, 1)}, 4, 6.0, 1.0, 5.0, 5.0},
        /* synchronous device, no overlap: an op after a blocking collective ends the step */
        {"cost_timeline_ends_on_op_after_collective", 0, 0, {G, coll(COST_EV_COLL, 4e6, 0), G}, 3, 3.0, 1.0, 2.0, 2.0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const tl_case *k = &cases[c];
        cost_machine m;
        toy_machine(&m, k->async, k->overlap);
        m.gemm[0].us = 500;
        m.coll[0].latency_us = 0;
        cost_event ev[6];
        memcpy(ev, k->ev, sizeof ev);
        cost_trace t = {.ev = ev, .n = (size_t)k->n, .cbytes = 4};
        cost_place p = {.world = 2, .tp = 1, .rank = 0, .ranks_per_host = 2};
        cost_result r;
        char err[256] = "";
        int rc = cost_timeline(&t, &m, &p, &r, err, sizeof err);
        CHECK(rc == 0 && near(r.step_ms, k->step) && near(r.compute_ms, k->compute) && near(r.comm_ms, k->comm) &&
              near(r.exposed_comm_ms, k->exposed), k->name,
              "rc %d (%s): step %.6f compute %.6f comm %.6f exposed %.6f ms, want %g %g %g %g", rc, err, r.step_ms,
              r.compute_ms, r.comm_ms, r.exposed_comm_ms, k->step, k->compute, k->comm, k->exposed);
        cost_machine_free(&m);
    }
}

/* Compute beside a running collective pays the machine's overlap slowdown (here 0.5: 1.5x as long) while the
 * collective runs, and runs at full speed after it ends. Hand-computed, in ms: ops of 0.5, all-gathers over 2
 * ranks at 1 GB/s busbw with no latency. */
static void test_overlap_slowdown(void) {
    const cost_event G = op(COST_GEMM_FWD, 100, 100, 100);
    struct { const char *name; cost_event ev[5]; int n; double step, compute, slow; } cases[] = {
        /* a 5 ms collective started at 0.5 ms; the two ops after it both lie inside it: 0.75 ms each */
        {"cost_overlap_slowdown_inside", {G, coll(COST_EV_START, 1e7, 1), G, G}, 4, 5.5, 2.0, 0.5},
        /* a 0.2 ms collective from 0.5 to 0.7 ms: the op after it runs 0.2 ms at 2/3 speed (0.1333 ms of its
         * work), the rest (0.3667) at full speed: it ends at 1.0667, 0.0667 late */
        {"cost_overlap_slowdown_partial", {G, coll(COST_EV_START, 4e5, 1), G, coll(COST_EV_WAIT, 0, 1)}, 4,
         0.7 + (0.5 - 0.2 / 1.5), 0.5 + 0.2 + (0.5 - 0.2 / 1.5), 0.2 + (0.5 - 0.2 / 1.5) - 0.5},
        /* nothing in flight: no slowdown */
        {"cost_overlap_slowdown_none_without_collective", {G, G}, 2, 1.0, 1.0, 0.0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cost_machine m;
        toy_machine(&m, 1, 1);
        m.gemm[0].us = 500;
        m.coll[0].latency_us = 0;
        m.overlap_slowdown = 0.5;
        cost_trace t = {.ev = cases[c].ev, .n = (size_t)cases[c].n, .cbytes = 4};
        cost_place p = {.world = 2, .tp = 1, .rank = 0, .ranks_per_host = 2};
        cost_result r;
        char err[256] = "";
        int rc = cost_timeline(&t, &m, &p, &r, err, sizeof err);
        CHECK(rc == 0 && near(r.step_ms, cases[c].step) && near(r.compute_ms, cases[c].compute) && near(r.overlap_ms, cases[c].slow),
              cases[c].name, "rc %d (%s): step %.6f compute %.6f slowdown %.6f ms, want %.6f %.6f %.6f", rc, err, r.step_ms,
              r.compute_ms, r.overlap_ms, cases[c].step, cases[c].compute, cases[c].slow);
        cost_machine_free(&m);
    }
}

/* Bus bandwidth climbs with the message (busbw_half_bytes): half of it at that size, 1/1.1 at 100x it; and
 * the shipped H100's all-reduce is 365 GB/s on 2 and 4 GPUs of a host, 480 on the 8 (NVLink SHARP). */
static void test_busbw_curve(void) {
    cost_machine m;
    toy_machine(&m, 1, 1);
    m.coll[0].latency_us = 0;
    m.coll[0].half_bytes = 1e6;
    char err[256] = "";
    double half = cost_machine_coll_us(&m, COMM_ALL_GATHER, 1e6, 2, 2, 2, 0, err, sizeof err);
    double big = cost_machine_coll_us(&m, COMM_ALL_GATHER, 1e8, 2, 2, 2, 0, err, sizeof err);
    CHECK(near(half, 1e6 * 0.5 / 0.5e3) && near(big, 1e8 * 0.5 * 1.1 / 1e3), "cost_busbw_climbs_with_bytes",
          "1 MB %g us (want %g), 100 MB %g us (want %g)", half, 1e6 * 0.5 / 0.5e3, big, 1e8 * 0.5 * 1.1 / 1e3);
    cost_machine_free(&m);
    CHECK(cost_machine_shipped("h100-80gb", &m) == 0, "cost_shipped_h100", "h100-80gb not shipped");
    double bytes = 1e9, shape = 1 + sqrt(4e6 / bytes), bw[3];
    int ns[3] = {2, 4, 8};
    for (int i = 0; i < 3; i++) {
        int n = ns[i];
        double t = cost_machine_coll_us(&m, COMM_ALL_REDUCE, bytes, n, n, 8, COST_COLL_STARTED, err, sizeof err);
        bw[i] = bytes * 2.0 * (n - 1) / n / ((t - 18 - 0.5 * 2 * (n - 1)) * 1e3) * shape;   /* back to the peak busbw */
    }
    CHECK(fabs(bw[0] - 365) < 0.5 && fabs(bw[1] - 365) < 0.5 && fabs(bw[2] - 480) < 0.5, "cost_shipped_all_reduce_by_group_size",
          "busbw on 2/4/8 GPUs %.1f %.1f %.1f GB/s, want 365 365 480", bw[0], bw[1], bw[2]);
    CHECK(m.overlap_slowdown > 0 && m.attention_bwd_efficiency < m.attention_efficiency, "cost_shipped_overlap_and_attention_bwd",
          "overlap slowdown %g, attention fwd %g bwd %g", m.overlap_slowdown, m.attention_efficiency, m.attention_bwd_efficiency);
    cost_machine_free(&m);
}

static void test_lookups(void) {
    cost_curve c = {.n = 3, .x = {100, 200, 400}, .us = {10, 20, 24}};
    CHECK(near(cost_curve_at(&c, 150), 15) && near(cost_curve_at(&c, 300), 22) && near(cost_curve_at(&c, 800), 48) &&
          near(cost_curve_at(&c, 50), 5) && near(cost_curve_at(&c, 0), 0), "cost_curve_interpolation",
          "150 %g 300 %g 800 %g 50 %g", cost_curve_at(&c, 150), cost_curve_at(&c, 300), cost_curve_at(&c, 800),
          cost_curve_at(&c, 50));
    cost_machine m;
    toy_machine(&m, 0, 0);
    free(m.gemm);
    m.ngemm = 2;
    m.gemm = calloc(2, sizeof *m.gemm);
    m.gemm[0] = (cost_gemm_point){COST_GEMM_FWD, 100, 100, 100, 50};   /* 40 GFLOP/s */
    m.gemm[1] = (cost_gemm_point){COST_GEMM_FWD, 400, 400, 400, 800};  /* 160 GFLOP/s */
    cost_event e = op(COST_GEMM_FWD, 200, 200, 200);                  /* halfway in log: rate 100 GFLOP/s */
    double us = cost_machine_op_us(&m, &e);
    CHECK(near(us, e.flops / 100e3), "cost_gemm_nearest_shapes_rate", "us %g want %g", us, e.flops / 100e3);
    e = op(COST_GEMM_FWD, 400, 400, 400);
    CHECK(near(cost_machine_op_us(&m, &e), 800), "cost_gemm_exact_shape", "us %g", cost_machine_op_us(&m, &e));
    char err[256];
    /* a group size without an entry: the nearest measured one's latency per ring step and bus bandwidth,
     * 10 us x 3 steps / 1 step + 1000 B x 3/4 / 1 GB/s */
    double t = cost_machine_coll_us(&m, COMM_ALL_GATHER, 1000, 4, 4, 4, 0, err, sizeof err);
    CHECK(near(t, 30.75), "cost_coll_nearest_group_size", "t %g us, want 30.75 (%s)", t, t < 0 ? err : "");
    /* a started all-gather is priced by the started entry where there is one, else by the blocking one */
    double blocking = cost_machine_coll_us(&m, COMM_ALL_GATHER, 4000, 2, 2, 2, COST_COLL_STARTED, err, sizeof err);
    cost_coll *c2 = realloc(m.coll, 2 * sizeof *c2);
    m.coll = c2;
    m.coll[1] = m.coll[0];
    m.coll[1].started = 1;
    m.coll[1].latency_us = 100;
    m.ncoll = 2;
    double st = cost_machine_coll_us(&m, COMM_ALL_GATHER, 4000, 2, 2, 2, COST_COLL_STARTED, err, sizeof err);
    double bl = cost_machine_coll_us(&m, COMM_ALL_GATHER, 4000, 2, 2, 2, 0, err, sizeof err);
    CHECK(near(blocking, 12) && near(st, 102) && near(bl, 12), "cost_started_collective_entry",
          "started %g (want 102), blocking %g and %g (want 12)", st, bl, blocking);
    cost_machine_free(&m);
    /* the shipped model: a group spanning hosts is priced by the network, one inside a host by NVLink */
    CHECK(cost_machine_shipped("h100-80gb", &m) == 0, "cost_shipped_h100", "no h100-80gb model");
    double intra = cost_machine_coll_us(&m, COMM_ALL_GATHER, 1e8, 8, 8, 8, 0, err, sizeof err);
    double inter = cost_machine_coll_us(&m, COMM_ALL_GATHER, 1e8, 8, 1, 8, 0, err, sizeof err);
    CHECK(intra > 0 && inter > 5 * intra, "cost_inter_host_slower", "intra %g us inter %g us", intra, inter);
    /* placement: 64 ranks, 8 on each host, run 8 rings over the hosts, one per GPU's port: busbw
     * min(8 x 50 GB/s x 0.97, NVLink's 370) = min(388, 370) = 370 GB/s, against 48.5 with one rank per host and 97
     * with two (latency 20 us + 0.5 us x 63 steps), each on the curve of a message of 1 GB across hosts
     * (busbw / (1 + sqrt(6 MB / 1 GB))) */
    double lat = 20 + 0.5 * 63, bytes = 1e9, f = 63.0 / 64 * (1 + sqrt(6e6 / 1e9));
    double k8 = cost_machine_coll_us(&m, COMM_ALL_GATHER, bytes, 64, 8, 8, 0, err, sizeof err);
    double k1 = cost_machine_coll_us(&m, COMM_ALL_GATHER, bytes, 64, 1, 1, 0, err, sizeof err);
    double k2 = cost_machine_coll_us(&m, COMM_ALL_GATHER, bytes, 64, 2, 2, 0, err, sizeof err);
    CHECK(fabs(k8 - (lat + bytes * f / 370e3)) < 1e-6 * k8 && fabs(k1 - (lat + bytes * f / 48.5e3)) < 1e-6 * k1 &&
          fabs(k2 - (lat + bytes * f / 97e3)) < 1e-6 * k2,
          "cost_inter_host_rings_per_port", "8/host %g us (want %g), 1/host %g (want %g), 2/host %g (want %g)", k8,
          lat + bytes * f / 370e3, k1, lat + bytes * f / 48.5e3, k2, lat + bytes * f / 97e3);
    m.nic_per_rank = 0;   /* one port per host: the ranks of a host share it */
    double shared = cost_machine_coll_us(&m, COMM_ALL_GATHER, bytes, 64, 8, 8, 0, err, sizeof err);
    CHECK(fabs(shared - k1) < 1e-6 * k1, "cost_inter_host_one_port", "%g us, want %g", shared, k1);
    cost_machine_free(&m);
    CHECK(cost_machine_shipped("h100-80gbx", &m) == -1, "cost_shipped_unknown", "an unknown name was found");
}

static model_config cfg_of(const char *name) {
    model_config c;
    char err[256];
    if (catalog_model(&c, name, err, sizeof err) || config_validate(&c, err, sizeof err)) { printf("%s\n", err); exit(1); }
    return c;
}

static void test_trace(void) {
    model_config c = cfg_of("tiny");
    model_opts o = {.B = 2, .T = 32, .sequence_parallel = 1, .sp_local = 1, .prefetch = 1};
    cost_trace t = {0};
    char err[256];
    int rc = cost_record_step(&c, 4, 2, 0, DTYPE_F32, &o, &t, err, sizeof err);
    int starts = 0, waits = 0, unmatched = 0;
    for (size_t i = 0; i < t.n; i++) {
        if (t.ev[i].type == COST_EV_START) {
            starts++;
            int w = 0;
            for (size_t j = i + 1; j < t.n && !w; j++) w = t.ev[j].type == COST_EV_WAIT && t.ev[j].id == t.ev[i].id;
            unmatched += !w;
        }
        waits += t.ev[i].type == COST_EV_WAIT;
    }
    CHECK(rc == 0 && starts > 0 && unmatched == 0 && waits == starts, "cost_trace_starts_waited",
          "rc %d starts %d waits %d unmatched %d", rc, starts, waits, unmatched);
    /* 1 rank, no recompute: the GEMMs of a step do 6 x tokens x matrix parameters (embedding excluded) */
    rc = cost_record_step(&c, 1, 1, 0, DTYPE_F32, &o, &t, err, sizeof err);
    double g = 0;
    for (size_t i = 0; i < t.n; i++) if (t.ev[i].type == COST_EV_OP && cost_op_is_gemm((cost_op_kind)t.ev[i].kind)) g += t.ev[i].flops;
    double d = c.hidden_size, f = c.intermediate_size, hd = d / c.num_attention_heads;
    double P = c.num_hidden_layers * (d * hd * (2 * c.num_attention_heads + 2 * c.num_key_value_heads) + 3 * d * f) +
               (double)c.vocab_size * d;
    double want = 6.0 * o.B * o.T * P;
    CHECK(rc == 0 && near(g, want), "cost_trace_gemm_flops_6NT", "GEMM FLOPs %.0f want %.0f", g, want);
    cost_trace_free(&t);
}

/* Which layers every:K recomputes: the recorded step of a 4-layer model on 1 rank, as the sequence of
 * attention forwards (F) and backwards (B). A recomputed layer runs its forward again right before its
 * backward; the recomputed layers are the first of each K (docs/options.md: i mod K == 0 from 0), so
 * every:2 is layers 0 and 2, every:3 layers 0 and 3. The gradients cannot tell (recomputing is the same
 * arithmetic) and the activation bytes of layers {1, 3} lie between none and full as those of {0, 2} do. */
static void test_trace_every_k(void) {
    model_config c = cfg_of("tiny");
    struct { int k; const char *want, *name; } cases[] = {
        {0, "FFFFBBBB", "cost_trace_checkpoint_none"},
        {1, "FFFFFBFBFBFB", "cost_trace_checkpoint_full"},
        {2, "FFFFBFBBFB", "cost_trace_checkpoint_every2_layers_0_2"},
        {3, "FFFFFBBBFB", "cost_trace_checkpoint_every3_layers_0_3"},
        {4, "FFFFBBBFB", "cost_trace_checkpoint_every4_layer_0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        model_opts o = {.B = 1, .T = 16, .prefetch = 1, .checkpoint = cases[i].k};
        cost_trace t = {0};
        char err[256] = "", seq[64] = "";
        int rc = cost_record_step(&c, 1, 1, 0, DTYPE_F32, &o, &t, err, sizeof err);
        size_t n = 0;
        for (size_t e = 0; rc == 0 && e < t.n && n + 1 < sizeof seq; e++)
            if (t.ev[e].type == COST_EV_OP && (t.ev[e].kind == COST_ATTN_FWD || t.ev[e].kind == COST_ATTN_BWD))
                seq[n++] = t.ev[e].kind == COST_ATTN_FWD ? 'F' : 'B';
        seq[n] = 0;
        CHECK(rc == 0 && c.num_hidden_layers == 4 && strcmp(seq, cases[i].want) == 0, cases[i].name,
              "rc %d (%s), %d layers: attention %s, want %s", rc, err, c.num_hidden_layers, seq, cases[i].want);
        cost_trace_free(&t);
    }
}

static double predict_full(const cost_machine *m, int world, int tp, int rph, cost_prediction *p) {
    model_config c = cfg_of("tiny");
    cost_req q = {.cfg = &c, .world = world, .tp = tp,
                  .mo = {.B = 4, .T = 64, .sequence_parallel = 1, .sp_local = 1, .prefetch = 1}, .dtype = DTYPE_F32,
                  .ranks_per_host = rph, .m = m};
    char err[256];
    return cost_predict(&q, p, err, sizeof err) ? -1 : p->r.step_ms;
}
static double predict_with(const cost_machine *m, int world, int tp, int rph) {
    cost_prediction p;
    return predict_full(m, world, tp, rph, &p);
}

static void test_monotone(void) {
    cost_machine m;
    cost_machine_shipped("a100-80gb", &m);
    int ok = 1;
    double prev = predict_with(&m, 8, 2, 0);
    for (int k = 0; k < 4 && ok; k++) {
        for (int i = 0; i < m.ncoll; i++) m.coll[i].busbw_gbs *= 2;
        double s = predict_with(&m, 8, 2, 0);
        ok = s > 0 && s <= prev;
        prev = s;
    }
    CHECK(ok, "cost_more_bandwidth_never_slower", "a step got slower with twice the bus bandwidth (%g ms)", prev);
    ok = 1;
    prev = 0;
    for (int u = 1; u <= 8 && ok; u *= 2) {   /* 8 ranks on one host of 8, 4, 2, 1 compute units */
        m.cores_per_host = 8 / u;
        double s = predict_with(&m, 8, 2, 8);
        ok = s > 0 && s >= prev;
        prev = s;
    }
    CHECK(ok, "cost_more_ranks_per_core_never_faster", "a step got faster with more ranks per compute unit (%g ms)", prev);
    /* 64 ranks, tp 8: 8 per host puts the DP groups across hosts (the network), TP inside one (NVLink); no
     * latencies, so the bytes alone tell which link priced a group (this model's messages are small) */
    m.cores_per_host = 64;
    for (int i = 0; i < m.ncoll; i++) m.coll[i].latency_us = m.coll[i].latency_per_step_us = 0;
    cost_prediction a, b;
    double s8 = predict_full(&m, 64, 8, 8, &a), s64 = predict_full(&m, 64, 8, 64, &b);
    double dp8 = a.r.comm_by_ms[COST_GROUP_DP][COMM_ALL_GATHER], dp64 = b.r.comm_by_ms[COST_GROUP_DP][COMM_ALL_GATHER];
    double tp8 = a.r.comm_by_ms[COST_GROUP_TP][COMM_ALL_GATHER], tp64 = b.r.comm_by_ms[COST_GROUP_TP][COMM_ALL_GATHER];
    CHECK(s8 > 0 && s64 > 0 && dp8 > 2 * dp64 && near(tp8, tp64), "cost_groups_across_hosts_use_the_network",
          "DP all-gather %g ms (8 per host) vs %g (one host); TP %g vs %g", dp8, dp64, tp8, tp64);
    cost_machine_free(&m);
}

/* HSDP meshes R x S x tp: the shard group is priced as dp, the replica group (stride S·tp) on its own scope */
static void test_hsdp(void) {
    int n, local, hr;
    cost_place p = {.world = 64, .tp = 1, .rank = 9, .ranks_per_host = 8, .replicate = 8};
    cost_group_shape(&p, COST_GROUP_DP, &n, &local, &hr);
    int ok = n == 8 && local == 8;
    cost_group_shape(&p, COST_GROUP_REPLICA, &n, &local, &hr);
    ok &= n == 8 && local == 1;
    CHECK(ok, "cost_hsdp_8x8x1_shard_in_host_replicas_across", "8x8x1, 8 per host: replica group %d ranks, %d on this host", n, local);
    cost_place q = {.world = 16, .tp = 2, .rank = 5, .ranks_per_host = 8, .replicate = 2}; /* 2x4x2: ranks 1,3,5,7 | 5,13 */
    cost_group_shape(&q, COST_GROUP_DP, &n, &local, &hr);
    ok = n == 4 && local == 4;
    cost_group_shape(&q, COST_GROUP_REPLICA, &n, &local, &hr);
    ok &= n == 2 && local == 1;
    q.ranks_per_host = 16;
    cost_group_shape(&q, COST_GROUP_REPLICA, &n, &local, &hr);
    ok &= n == 2 && local == 2;
    q.replicate = 1;
    cost_group_shape(&q, COST_GROUP_DP, &n, &local, &hr);
    ok &= n == 8;
    cost_group_shape(&q, COST_GROUP_REPLICA, &n, &local, &hr);
    ok &= n == 1;
    CHECK(ok, "cost_hsdp_2x4x2_group_shapes", "2x4x2 rank 5: shard and replica groups as the mesh places them");
    /* the replica all-reduce is in the predicted step, on the network when the replicas span hosts */
    cost_machine m;
    cost_machine_shipped("a100-80gb", &m);
    m.cores_per_host = 64;
    model_config c = cfg_of("tiny");
    char err[256];
    double ar[3];
    for (int k = 0; k < 3; k++) {
        cost_req r = {.cfg = &c, .world = 16, .tp = 1,
                      .mo = {.B = 4, .T = 64, .prefetch = 1, .replicate = k == 2 ? 1 : 2}, .dtype = DTYPE_F32,
                      .ranks_per_host = k == 0 ? 8 : 16, .m = &m};
        cost_prediction pr;
        ar[k] = cost_predict(&r, &pr, err, sizeof err) ? -1 : pr.r.comm_by_ms[COST_GROUP_REPLICA][COMM_ALL_REDUCE];
    }
    CHECK(ar[0] > 2 * ar[1] && ar[1] > 0 && ar[2] == 0, "cost_hsdp_replica_all_reduce_across_hosts",
          "replica all-reduce %g ms across 2 hosts, %g on one, %g on the 2D mesh", ar[0], ar[1], ar[2]);
    cost_machine_free(&m);
}

static void bad(const char *name, const char *text, const char *field) {
    cost_machine m;
    char err[512] = "";
    int rc = cost_machine_parse(text, "m.json", &m, err, sizeof err);
    CHECK(rc == -1 && strstr(err, field) && !strchr(err, '\n'), name, "rc %d, message '%s' should name %s", rc, err, field);
}

static void test_files(void) {
    cost_machine m, r;
    cost_machine_shipped("h200-141gb", &m);
    json_t *j = cost_machine_to_json(&m);
    char *text = json_dumps(j, 0);
    char err[512] = "";
    int rc = cost_machine_parse(text, "h200.json", &r, err, sizeof err);
    double a = predict_with(&m, 8, 4, 0), b = rc ? -2 : predict_with(&r, 8, 4, 0);
    CHECK(rc == 0 && a > 0 && near(a, b), "cost_machine_json_round_trip", "rc %d (%s) %g vs %g ms", rc, err, a, b);
    json_t *e = cost_machine_estimates(&r);
    CHECK(json_array_size(e) > 0, "cost_machine_estimates_listed", "no estimate among the shipped sources");
    json_decref(e);
    /* one field broken at a time */
    json_t *c = json_deep_copy(j);
    json_object_del(json_object_get(c, "compute"), "peak_tflops");
    char *t2 = json_dumps(c, 0);
    bad("cost_machine_missing_field", t2, "compute.peak_tflops");
    free(t2);
    json_object_set_new(json_object_get(c, "compute"), "peak_tflops", json_real(0));
    t2 = json_dumps(c, 0);
    bad("cost_machine_zero_rate", t2, "compute.peak_tflops");
    free(t2);
    json_object_set_new(json_object_get(c, "compute"), "peak_tflops", json_real(100));
    json_object_set_new(json_array_get(json_object_get(json_object_get(c, "comm"), "collectives"), 2), "busbw_gbs", json_real(-3));
    t2 = json_dumps(c, 0);
    bad("cost_machine_negative_rate", t2, "comm.collectives[2].busbw_gbs");
    free(t2);
    json_object_set_new(json_array_get(json_object_get(json_object_get(c, "comm"), "collectives"), 2), "busbw_gbs", json_real(3));
    json_object_set_new(json_object_get(c, "hosts"), "cores", json_integer(2));
    t2 = json_dumps(c, 0);
    bad("cost_machine_unknown_field", t2, "hosts.cores");
    free(t2);
    json_object_del(json_object_get(c, "hosts"), "cores");
    json_object_set_new(json_object_get(c, "compute"), "sequence_factor", json_real(0));
    t2 = json_dumps(c, 0);
    bad("cost_machine_zero_sequence_factor", t2, "compute.sequence_factor");
    free(t2);
    /* absent (a file calibrated before it was measured): 1 */
    json_object_del(json_object_get(c, "compute"), "sequence_factor");
    t2 = json_dumps(c, 0);
    cost_machine o;
    rc = cost_machine_parse(t2, "old.json", &o, err, sizeof err);
    CHECK(rc == 0 && o.sequence_factor == 1, "cost_machine_sequence_factor_optional", "rc %d (%s) factor %g", rc,
          rc ? err : "", rc ? 0 : o.sequence_factor);
    if (rc == 0) cost_machine_free(&o);
    free(t2);
    json_object_set_new(json_object_get(c, "compute"), "sequence_factor", json_real(1.25));
    t2 = json_dumps(c, 0);
    rc = cost_machine_parse(t2, "f.json", &o, err, sizeof err);
    json_t *back = rc ? NULL : cost_machine_to_json(&o);
    double f = back ? json_number_value(json_object_get(json_object_get(back, "compute"), "sequence_factor")) : 0;
    CHECK(rc == 0 && o.sequence_factor == 1.25 && f == 1.25, "cost_machine_sequence_factor_round_trip",
          "rc %d (%s) parsed %g written %g", rc, rc ? err : "", rc ? 0 : o.sequence_factor, f);
    json_decref(back);
    if (rc == 0) cost_machine_free(&o);
    free(t2);
    json_object_set_new(json_object_get(c, "compute"), "ops", json_pack("{s:[[i,i],[i,i]]}", "add", 100, 2, 50, 3));
    t2 = json_dumps(c, 0);
    bad("cost_machine_curve_order", t2, "compute.ops.add[1]");
    free(t2);
    json_decref(c);
    bad("cost_machine_malformed", "{\"schema\": \"meshsweep.machine/1\", ", "line");
    bad("cost_machine_wrong_schema", "{\"schema\": \"meshsweep.run/1\"}", "schema");
    bad("cost_machine_not_object", "[1, 2]", "top level");
    free(text);
    json_decref(j);
    cost_machine_free(&m);
    cost_machine_free(&r);
}

int main(void) {
    test_arithmetic();
    test_overlap();
    test_timeline_ends();
    test_overlap_slowdown();
    test_busbw_curve();
    test_lookups();
    test_trace();
    test_trace_every_k();
    test_monotone();
    test_hsdp();
    test_files();
    return check_exit();
}
