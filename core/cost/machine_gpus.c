/* core/cost/machine_gpus.c — the shipped machine models of the GPUs in core/engine/gpus.c's table
 * (h100-80gb, h200-141gb, a100-80gb): an HGX/DGX-style host of 8 SXM GPUs on NVSwitch with one
 * InfiniBand port per GPU. Every number carries its source, or says "estimate" and why; the sources
 * travel with the model (its "sources" object), so a plan can say which of its numbers are estimates.
 * A GPU run measures the real figures (`build/calibrate --backend cuda` in gpukit/gpu_check.sh).
 * Not the device memory table (core/engine/gpus.c), not the look-ups (core/cost/machine.c). */
#include "core/cost/machine.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct gpu_model {
    const char *name, *description;
    double peak_tflops, memory_gbs, ar_busbw_gbs, agrs_busbw_gbs, net_busbw_gbs, host_link_gbs;
    const char *src_peak, *src_mem, *src_ar, *src_agrs, *src_net, *src_host;
} gpu_model;

#define SRC_H100 "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM)"
#define SRC_NCCL212 "NVIDIA/nccl-tests issue 212 (NCCL maintainer: ~370 GB/s effective NVLink busbw on H100 for " \
                    "non-all-reduce collectives; ~480 GB/s all-reduce busbw on 8 GPUs with NVLink SHARP)"
#define SRC_NET_NDR "estimate: one 400 Gb/s InfiniBand NDR port (ConnectX-7) per GPU = 50 GB/s per direction " \
                    "(DGX H100 user guide: 8 ConnectX-7 per system), 90% of it as ring busbw"

static const gpu_model MODELS[] = {
    {"h100-80gb", "NVIDIA H100 80GB HBM3 (SXM), 8 per host on NVSwitch, one 400 Gb/s NDR port per GPU",
     989.4, 3350, 480, 370, 45, 50,
     SRC_H100 ": BF16 dense tensor 989.4 TFLOP/s (1979 with sparsity)", SRC_H100 ": HBM3 3.35 TB/s",
     SRC_NCCL212, SRC_NCCL212, SRC_NET_NDR,
     "estimate: PCIe Gen5 x16, 64 GB/s per direction (datasheet: 128 GB/s), ~50 GB/s achieved"},
    {"h200-141gb", "NVIDIA H200 141GB HBM3e (SXM), 8 per host on NVSwitch, one 400 Gb/s NDR port per GPU",
     989.4, 4800, 475, 370, 45, 50,
     "NVIDIA H200 datasheet: the H100's GH100 compute (BF16 dense 989.4 TFLOP/s)", "NVIDIA H200 datasheet: HBM3e 4.8 TB/s",
     "NVIDIA/nccl-tests issue 272 (8x H200 on NVLink 4: all_reduce_perf peak busbw 475 GB/s)",
     "estimate: the H100's NVLink 4 figure (" SRC_NCCL212 ")", SRC_NET_NDR,
     "estimate: PCIe Gen5 x16, 64 GB/s per direction, ~50 GB/s achieved"},
    {"a100-80gb", "NVIDIA A100-SXM4-80GB, 8 per host on NVSwitch, one 200 Gb/s HDR port per GPU",
     312, 2039, 200, 200, 22, 25,
     "NVIDIA A100 datasheet: BF16 dense tensor 312 TFLOP/s (624 with sparsity)", "NVIDIA A100 80GB datasheet: HBM2e 2,039 GB/s",
     "NVIDIA/nccl-tests issue 149 (8x A100-SXM4-80GB on NVLink 3: all_reduce busbw ~200 GB/s)",
     "estimate: as all-reduce (NVLink 3, 600 GB/s bidirectional per GPU; nccl-tests issue 149)",
     "estimate: one 200 Gb/s InfiniBand HDR port per GPU (DGX A100) = 25 GB/s per direction, 90% as busbw",
     "estimate: PCIe Gen4 x16, 32 GB/s per direction, ~25 GB/s achieved"},
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
    for (int i = 0; i < NMODELS && !g; i++) if (name && !strcasecmp(name, MODELS[i].name)) g = &MODELS[i];
    if (!g) return -1;
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", g->name);
    snprintf(m->description, sizeof m->description, "%s", g->description);
    m->async = 1;
    m->launch_us = 4;
    m->peak_tflops = g->peak_tflops;
    /* bf16 GEMM efficiency by size: small GEMMs cannot fill the SMs, large ones reach 70-80% of peak */
    static const double ef[][2] = {{1e7, 0.05}, {1e8, 0.2}, {1e9, 0.45}, {1e10, 0.65}, {1e11, 0.75}, {1e12, 0.8}};
    m->n_eff = (int)(sizeof ef / sizeof ef[0]);
    for (int i = 0; i < m->n_eff; i++) { m->eff_flops[i] = ef[i][0]; m->eff[i] = ef[i][1]; }
    m->attention_efficiency = 0.3;
    m->memory_gbs = g->memory_gbs;
    m->memory_efficiency = 0.8;
    m->sequence_factor = 1;
    m->host_link_gbs = g->host_link_gbs;
    m->cores_per_host = 8;
    m->calibrated_ranks = 1;
    m->oversubscribed_efficiency = 1.0;
    m->overlap = 1;
    m->coll = calloc(16, sizeof *m->coll);
    if (!m->coll) return -1;
    /* NVLink/NVSwitch inside a host; the network for groups that span hosts; host-memory MPI for the
     * step's two f64 all-reduces (loss, gradient norm) */
    add_coll(m, COMM_ALL_REDUCE, COST_SCOPE_INTRA, 0, 6, 0.5, g->ar_busbw_gbs);
    add_coll(m, COMM_ALL_GATHER, COST_SCOPE_INTRA, 0, 6, 0.5, g->agrs_busbw_gbs);
    add_coll(m, COMM_REDUCE_SCATTER, COST_SCOPE_INTRA, 0, 6, 0.5, g->agrs_busbw_gbs);
    add_coll(m, COMM_BROADCAST, COST_SCOPE_INTRA, 0, 6, 0.5, g->agrs_busbw_gbs);
    add_coll(m, COMM_ALL_REDUCE, COST_SCOPE_INTER, 0, 15, 2.5, g->net_busbw_gbs);
    add_coll(m, COMM_ALL_GATHER, COST_SCOPE_INTER, 0, 15, 2.5, g->net_busbw_gbs);
    add_coll(m, COMM_REDUCE_SCATTER, COST_SCOPE_INTER, 0, 15, 2.5, g->net_busbw_gbs);
    add_coll(m, COMM_BROADCAST, COST_SCOPE_INTER, 0, 15, 2.5, g->net_busbw_gbs);
    add_coll(m, COMM_ALL_REDUCE, COST_SCOPE_INTRA, 1, 5, 0, 10);
    add_coll(m, COMM_ALL_REDUCE, COST_SCOPE_INTER, 1, 12, 0, 10);
    json_t *s = m->sources = json_object();
    src(s, "compute.async", "the CUDA backend: kernels run on a stream behind the host (kernels/cuda)");
    src(s, "compute.launch_us", "estimate: CUDA kernel launch overhead of a few microseconds per op");
    src(s, "compute.peak_tflops", g->src_peak);
    src(s, "compute.gemm_efficiency", "estimate: cuBLAS bf16 GEMMs reach 70-80% of dense peak at large sizes, far less "
                                      "when the GEMM cannot fill the SMs (by GEMM FLOPs)");
    src(s, "compute.attention_efficiency", "estimate: the engine's own flash-style attention kernels, fraction of dense peak");
    src(s, "compute.memory_gbs", g->src_mem);
    src(s, "compute.memory_efficiency", "estimate: streaming kernels reach ~80% of HBM peak");
    src(s, "compute.host_link_gbs", g->src_host);
    src(s, "compute.sequence_factor", "estimate: 1, the kernel efficiencies above are taken as those of whole steps");
    src(s, "hosts.cores_per_host", "HGX/DGX host: 8 SXM GPUs on NVSwitch");
    src(s, "hosts.oversubscribed_efficiency", "estimate: ranks sharing a GPU take turns");
    src(s, "comm.overlap", "NCCL runs on its own stream, ordered with events (core/engine/comm_nccl.c)");
    src(s, "comm.collectives.intra.all_reduce.busbw_gbs", g->src_ar);
    src(s, "comm.collectives.intra.all_gather.busbw_gbs", g->src_agrs);
    src(s, "comm.collectives.intra.reduce_scatter.busbw_gbs", g->src_agrs);
    src(s, "comm.collectives.intra.latency_us", "estimate: after NCCL's latency model (src/graph/tuning.cc: a base "
                                                "latency of some microseconds per collective plus ~0.5 us per ring step on NVLink)");
    src(s, "comm.collectives.inter.busbw_gbs", g->src_net);
    src(s, "comm.collectives.inter.latency_us", "estimate: NCCL over InfiniBand, ~15 us base and ~2.5 us per ring step");
    src(s, "comm.collectives.host", "estimate: MPI all-reduce of 8 bytes of host memory: ~5 us on one host, ~12 us across hosts");
    return 0;
}

void cost_machine_shipped_names(char *buf, size_t len) {
    size_t n = 0;
    if (len) buf[0] = 0;
    for (int i = 0; i < NMODELS && n < len; i++) {
        int w = snprintf(buf + n, len - n, "%s%s", i ? ", " : "", MODELS[i].name);
        if (w < 0) break;
        n += (size_t)w;
    }
}
