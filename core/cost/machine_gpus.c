/* core/cost/machine_gpus.c — the shipped machine models of GPUs of core/job/catalog.c's table
 * (H100 80GB, H200 141GB, A100 80GB; each names its catalogue entry): an HGX/DGX-style host of 8 SXM GPUs on NVSwitch with one
 * InfiniBand port per GPU. Every number carries its source, or says "estimate" and why; the sources
 * travel with the model (its "sources" object), so a plan can say which of its numbers are estimates.
 * A GPU run measures the real figures (`build/calibrate --backend cuda` in gpukit/gpu_check.sh).
 * Not the device table (core/job/catalog.c), not the look-ups (core/cost/machine.c). */
#include "core/cost/machine.h"
#include "core/job/catalog.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct gpu_model {
    catalog_gpu_id gpu;               /* its name and datasheet figures: core/job/catalog.c */
    const char *description;
    double peak_tflops, memory_gbs, ar_busbw_gbs, agrs_busbw_gbs, net_busbw_gbs, host_link_gbs;
    const char *src_peak, *src_mem, *src_ar, *src_agrs, *src_net, *src_host;
    double gemm_top;              /* bf16 GEMM efficiency of the largest shapes (the curve below scales to it) */
    const char *src_gemm;
    double ar_small_busbw_gbs;    /* all-reduce busbw of 2-4 GPUs of a host (no NVLink SHARP gain at these sizes) */
    const char *src_ar_small;
    double attn_fwd, attn_bwd;    /* attention forward and backward, fraction of the dense peak */
    const char *src_attn;
} gpu_model;

#define SRC_H100 "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM)"
/* published nccl-tests tables (results/bench/collectives_gpu.md compares the model with them point by point) */
#define SRC_CRUSOE "dstackai/dstack examples/clusters/crusoe/README.md: all_reduce_perf on 2 hosts x 8 A100-SXM4-80GB, " \
                   "one 200 Gb/s HDR port per GPU: busbw 194 GB/s at 2 GB (97 % of 8 x 25 GB/s), 37 us at 8 KB"
#define SRC_AZURE_H200 "Azure/AI-benchmarking-guide Azure_Results/ND_H200_v5_results.md: all_reduce_perf on 8 H200 " \
                       "(NVLS): busbw 0.47 GB/s at 8 KB (30 us), 53 at 1 MB, 240 at 16 MB, 412 at 128 MB, 477 at 4 GB"
#define SRC_NCCL212 "NVIDIA/nccl-tests issue 212 (NCCL maintainer: ~370 GB/s effective NVLink busbw on H100 for " \
                    "non-all-reduce collectives; ~480 GB/s all-reduce busbw on 8 GPUs with NVLink SHARP)"
#define SRC_NET_NDR "estimate: one 400 Gb/s InfiniBand NDR port (ConnectX-7) per GPU = 50 GB/s per direction " \
                    "(DGX H100 user guide: 8 ConnectX-7 per system), 97 % of it as ring busbw: the efficiency " \
                    "measured on A100s with one HDR port per GPU (" SRC_CRUSOE ")"

static const gpu_model MODELS[] = {
    {CATALOG_H100_80GB, "NVIDIA H100 80GB HBM3 (SXM), 8 per host on NVSwitch, one 400 Gb/s NDR port per GPU",
     989.4, 3350, 480, 370, 48.5, 50,
     SRC_H100 ": BF16 dense tensor 989.4 TFLOP/s (1979 with sparsity)", SRC_H100 ": HBM3 3.35 TB/s",
     SRC_NCCL212, SRC_NCCL212, SRC_NET_NDR,
     "estimate: PCIe Gen5 x16, 64 GB/s per direction (datasheet: 128 GB/s), ~50 GB/s achieved",
     0.62, "estimate: the sustained bf16 GEMM rate of an H100 SXM in training, ~610 TFLOP/s: cuBLAS reaches 600-750 "
           "TFLOP/s on single large GEMMs and the clocks drop under sustained tensor load at 700 W; set within that range "
           "so that the llm-foundry H100 table (MFU 40-46 %, tests/anchors) is met: fitted, not measured by us",
     365, "NVIDIA/nccl issue 1455 (H100, all_reduce_perf on 2 and 4 GPUs of a host: ~365-370 GB/s busbw; "
          "NVLink SHARP's ~480 needs the 8)",
     0.30, 0.21, "estimate: the engine's flash-style kernels are mma.sync, not wgmma/TMA: FlashAttention-2 reaches ~35 % "
                 "of H100's peak forward (its paper's H100 figures), the backward ~0.7 of its forward"},
    {CATALOG_H200_141GB, "NVIDIA H200 141GB HBM3e (SXM), 8 per host on NVSwitch, one 400 Gb/s NDR port per GPU",
     989.4, 4800, 475, 370, 48.5, 50,
     "NVIDIA H200 datasheet: the H100's GH100 compute (BF16 dense 989.4 TFLOP/s)", "NVIDIA H200 datasheet: HBM3e 4.8 TB/s",
     "NVIDIA/nccl-tests issue 272 (8x H200 on NVLink 4: all_reduce_perf peak busbw 475 GB/s)",
     "estimate: the H100's NVLink 4 figure (" SRC_NCCL212 ")", SRC_NET_NDR,
     "estimate: PCIe Gen5 x16, 64 GB/s per direction, ~50 GB/s achieved",
     0.62, "estimate: the H100's GH100 compute at the same 700 W limit: the H100's sustained rate",
     365, "estimate: as the H100 (nccl issue 1455: 2-4 GPUs ~365-370 GB/s all-reduce busbw, NVLink 4 as here)",
     0.30, 0.21, "estimate: as the H100 (the same GH100 compute, the engine's mma.sync kernels)"},
    {CATALOG_A100_80GB, "NVIDIA A100-SXM4-80GB, 8 per host on NVSwitch, one 200 Gb/s HDR port per GPU",
     312, 2039, 200, 200, 24.25, 25,
     "NVIDIA A100 datasheet: BF16 dense tensor 312 TFLOP/s (624 with sparsity)", "NVIDIA A100 80GB datasheet: HBM2e 2,039 GB/s",
     "NVIDIA/nccl-tests issue 149 (8x A100-SXM4-80GB on NVLink 3: all_reduce busbw ~200 GB/s)",
     "estimate: as all-reduce (NVLink 3, 600 GB/s bidirectional per GPU; nccl-tests issue 149)",
     "one 200 Gb/s InfiniBand HDR port per GPU (DGX A100) = 25 GB/s per direction, 97 % of it as ring busbw (" SRC_CRUSOE ")",
     "estimate: PCIe Gen4 x16, 32 GB/s per direction, ~25 GB/s achieved",
     0.75, "estimate: cuBLAS bf16 GEMMs on A100 SXM reach ~235-280 of its 312 TFLOP/s (its clocks hold at 400 W); taken "
           "at the low end so that one node's MFU stays below the best of the llm-foundry A100 table (64 %, tests/anchors): "
           "fitted, not measured by us",
     190, "estimate: NVLink 3 without NVLink SHARP: 2-4 GPUs of a host near the 8's ring figure (nccl-tests issue 149)",
     0.50, 0.35, "estimate: FlashAttention-2 reaches ~70 % of A100's peak forward (its paper), the engine's kernels less; "
                 "the backward ~0.7 of its forward"},
};
#define NMODELS ((int)(sizeof MODELS / sizeof *MODELS))

static void src(json_t *s, const char *field, const char *text) { json_object_set_new(s, field, json_string(text)); }

static void add_coll(cost_machine *m, int kind, int scope, int host, double lat, double step, double bw) {
    cost_coll *c = &m->coll[m->ncoll++];
    memset(c, 0, sizeof *c);
    c->kind = kind; c->scope = scope; c->host = host;
    c->latency_us = lat; c->latency_per_step_us = step; c->busbw_gbs = bw;
}

int cost_machine_shipped(const char *name, cost_machine *m) {
    const gpu_model *g = NULL;
    for (int i = 0; i < NMODELS && !g; i++) if (name && !strcasecmp(name, catalog_gpu_at(MODELS[i].gpu)->name)) g = &MODELS[i];
    if (!g) return -1;
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", catalog_gpu_at(g->gpu)->name);
    snprintf(m->description, sizeof m->description, "%s", g->description);
    m->async = 1;
    m->launch_us = 4;
    m->peak_tflops = g->peak_tflops;
    /* bf16 GEMM efficiency by size: small GEMMs cannot fill the SMs; the largest reach the GPU's own top */
    static const double ef[][2] = {{1e7, 0.05}, {1e8, 0.2}, {1e9, 0.45}, {1e10, 0.65}, {1e11, 0.75}, {1e12, 0.8}};
    m->n_eff = (int)(sizeof ef / sizeof ef[0]);
    for (int i = 0; i < m->n_eff; i++) { m->eff_flops[i] = ef[i][0]; m->eff[i] = ef[i][1] * g->gemm_top / 0.8; }
    m->attention_efficiency = g->attn_fwd;
    m->attention_bwd_efficiency = g->attn_bwd;
    m->memory_gbs = g->memory_gbs;
    m->memory_efficiency = 0.8;
    m->sequence_factor = 1;
    m->host_link_gbs = g->host_link_gbs;
    m->cores_per_host = 8;
    m->calibrated_ranks = 1;
    m->oversubscribed_efficiency = 1.0;
    m->overlap = 1;
    m->overlap_slowdown = 0.10;
    m->nic_per_rank = 1;
    m->coll = calloc(24, sizeof *m->coll);
    if (!m->coll) return -1;
    /* NVLink/NVSwitch inside a host; the network for groups that span hosts; host-memory MPI for the
     * step's two f64 all-reduces (loss, gradient norm) */
    add_coll(m, COMM_ALL_REDUCE, COST_SCOPE_INTRA, 0, 18, 0.5, g->ar_small_busbw_gbs);
    add_coll(m, COMM_ALL_GATHER, COST_SCOPE_INTRA, 0, 18, 0.5, g->agrs_busbw_gbs);
    add_coll(m, COMM_REDUCE_SCATTER, COST_SCOPE_INTRA, 0, 18, 0.5, g->agrs_busbw_gbs);
    add_coll(m, COMM_BROADCAST, COST_SCOPE_INTRA, 0, 18, 0.5, g->agrs_busbw_gbs);
    /* all-reduce by group size inside a host: the 8 of a host reach the NVLink SHARP figure, 2 and 4 do not */
    for (int n = 2; n <= 8; n *= 2) {
        add_coll(m, COMM_ALL_REDUCE, COST_SCOPE_INTRA, 0, 18, 0.5, n == 8 ? g->ar_busbw_gbs : g->ar_small_busbw_gbs);
        m->coll[m->ncoll - 1].ranks = m->coll[m->ncoll - 1].ranks_per_host = n;
    }
    add_coll(m, COMM_ALL_REDUCE, COST_SCOPE_INTER, 0, 20, 0.5, g->net_busbw_gbs);
    add_coll(m, COMM_ALL_GATHER, COST_SCOPE_INTER, 0, 20, 0.5, g->net_busbw_gbs);
    add_coll(m, COMM_REDUCE_SCATTER, COST_SCOPE_INTER, 0, 20, 0.5, g->net_busbw_gbs);
    add_coll(m, COMM_BROADCAST, COST_SCOPE_INTER, 0, 20, 0.5, g->net_busbw_gbs);
    /* bus bandwidth climbs with the message (nccl-tests' curves): half of it at 4 MB on NVLink, 6 MB across
     * hosts, 90 % at 100x those (an FSDP layer of 8B, 0.4-0.9 GB, runs near the peak; TP's activations do not) */
    for (int i = 0; i < m->ncoll; i++) m->coll[i].half_bytes = m->coll[i].scope == COST_SCOPE_INTER ? 6e6 : 4e6;
    add_coll(m, COMM_ALL_REDUCE, COST_SCOPE_INTRA, 1, 5, 0, 10);
    add_coll(m, COMM_ALL_REDUCE, COST_SCOPE_INTER, 1, 12, 0, 10);
    json_t *s = m->sources = json_object();
    src(s, "compute.async", "the CUDA backend: kernels run on a stream behind the host (kernels/cuda)");
    src(s, "compute.launch_us", "estimate: CUDA kernel launch overhead of a few microseconds per op");
    src(s, "compute.peak_tflops", g->src_peak);
    src(s, "compute.gemm_efficiency", g->src_gemm);
    src(s, "compute.gemm_efficiency.shape", "estimate: far less than the top when the GEMM cannot fill the SMs (by GEMM FLOPs)");
    src(s, "compute.attention_bwd_efficiency", "estimate: 0.7 x the forward's: flash-attention backward passes run at "
                                               "~0.65-0.75 of their forward's FLOP rate (FlashAttention-2 paper's A100 and "
                                               "H100 figures)");
    src(s, "compute.attention_efficiency", g->src_attn);
    src(s, "compute.memory_gbs", g->src_mem);
    src(s, "compute.memory_efficiency", "estimate: streaming kernels reach ~80% of HBM peak");
    src(s, "compute.host_link_gbs", g->src_host);
    src(s, "compute.sequence_factor", "estimate: 1, the kernel efficiencies above are taken as those of whole steps");
    src(s, "hosts.cores_per_host", "HGX/DGX host: 8 SXM GPUs on NVSwitch");
    src(s, "hosts.oversubscribed_efficiency", "estimate: ranks sharing a GPU take turns");
    src(s, "comm.overlap", "NCCL runs on its own stream, ordered with events (core/engine/comm_nccl.c)");
    src(s, "comm.collectives.intra.all_reduce.busbw_gbs", g->src_ar);
    src(s, "comm.collectives.intra.all_reduce.2-4_gpus.busbw_gbs", g->src_ar_small);
    src(s, "comm.collectives.busbw_half_bytes", "fitted: busbw(S) = peak / (1 + sqrt(S_half / S)), S_half 4 MB on NVLink (8 H200, "
                                                SRC_AZURE_H200 "), 6 MB across hosts (" SRC_CRUSOE ")");
    src(s, "comm.overlap_slowdown", "estimate: compute beside a running collective takes 10 % longer: NCCL's kernels hold "
                                    "one SM per channel (up to 32 of the GPU's) and HBM bandwidth; overlapped compute "
                                    "measures 5-15 % slower in published FSDP/TP profiles");
    src(s, "comm.collectives.intra.all_gather.busbw_gbs", g->src_agrs);
    src(s, "comm.collectives.intra.reduce_scatter.busbw_gbs", g->src_agrs);
    src(s, "comm.collectives.intra.latency_us", "fitted: 18 us per collective plus 0.5 us per ring step on NVLink, 25 us for "
                                                "an all-reduce of 8: " SRC_AZURE_H200);
    src(s, "comm.collectives.inter.busbw_gbs", g->src_net);
    src(s, "comm.nic_per_rank", "one network port per GPU (DGX/HGX); a group with k ranks on each host runs k rings "
                                "across hosts, busbw min(k x the port's, NVLink's): nccl-tests issues 119, 160, 283 "
                                "(a node's busbw across nodes is about the node's total NIC bandwidth)");
    src(s, "comm.collectives.inter.latency_us", "fitted: 20 us per collective plus 0.5 us per ring step across hosts, 35 us for "
                                                "an all-reduce of 16 (" SRC_CRUSOE "); beyond 16 ranks an estimate");
    src(s, "comm.collectives.host", "estimate: MPI all-reduce of 8 bytes of host memory: ~5 us on one host, ~12 us across hosts");
    return 0;
}

void cost_machine_shipped_names(char *buf, size_t len) {
    size_t n = 0;
    if (len) buf[0] = 0;
    for (int i = 0; i < NMODELS && n < len; i++) {
        int w = snprintf(buf + n, len - n, "%s%s", i ? ", " : "", catalog_gpu_at(MODELS[i].gpu)->name);
        if (w < 0) break;
        n += (size_t)w;
    }
}
