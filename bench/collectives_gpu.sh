#!/usr/bin/env bash
# bench/collectives_gpu.sh — the shipped GPU models' collectives as nccl-tests tables, beside every published
# nccl-tests point we could source: runs `build/commbench --predict` for h100-80gb, h200-141gb and a100-80gb
# (groups of 2, 4, 8 GPUs on one host; 16 and 64 ranks with k = 1, 2, 4, 8 per host) and writes
# results/bench/collectives_gpu.md (OUT=...): the published points with predicted / published, the machine
# figures each GPU's table rests on (sourced, fitted, or estimates), then the tables at 8K, 64K, 1M, 16M,
# 128M, 1G and 4G. Predictions only: no GPU, a second. Usage: bash bench/collectives_gpu.sh
# The published points are the PUBLISHED block below (one line each: GPU, ranks, ranks per host, collective,
# bytes, busbw GB/s, source); tests/t_colltable.sh checks the same points against their tolerance.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-results/bench/collectives_gpu.md}
make -s -j"$(nproc)" "$BUILD/commbench" >/dev/null || exit 1
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
for g in h100-80gb h200-141gb a100-80gb; do
  "$BUILD/commbench" --predict "$g" > "$T/$g.txt" || { echo "collectives_gpu: commbench --predict $g failed" >&2; exit 1; }
done
cat > "$T/published.tsv" <<'PUBLISHED'
h200-141gb	8	8	all_reduce	8192	0.47	azure-h200
h200-141gb	8	8	all_reduce	65536	3.72	azure-h200
h200-141gb	8	8	all_reduce	1048576	52.96	azure-h200
h200-141gb	8	8	all_reduce	16777216	240.41	azure-h200
h200-141gb	8	8	all_reduce	134217728	412.45	azure-h200
h200-141gb	8	8	all_reduce	1073741824	467.58	azure-h200
h200-141gb	8	8	all_reduce	4294967296	477.41	azure-h200
a100-80gb	8	8	all_reduce	8192	0.33	azure-a100
a100-80gb	8	8	all_reduce	65536	2.70	azure-a100
a100-80gb	8	8	all_reduce	1048576	36.22	azure-a100
a100-80gb	8	8	all_reduce	16777216	109.22	azure-a100
a100-80gb	8	8	all_reduce	134217728	174.18	azure-a100
a100-80gb	8	8	all_reduce	1073741824	228.10	azure-a100
a100-80gb	8	8	all_reduce	4294967296	230.48	azure-a100
a100-80gb	8	8	all_reduce	1073741824	200	nccl-tests-149
a100-80gb	16	8	all_reduce	8192	0.42	dstack-crusoe
a100-80gb	16	8	all_reduce	65536	2.49	dstack-crusoe
a100-80gb	16	8	all_reduce	1048576	24.06	dstack-crusoe
a100-80gb	16	8	all_reduce	16777216	114.79	dstack-crusoe
a100-80gb	16	8	all_reduce	134217728	169.65	dstack-crusoe
a100-80gb	16	8	all_reduce	1073741824	192.25	dstack-crusoe
h100-80gb	8	8	all_reduce	4294967296	480	nccl-tests-212
h100-80gb	8	8	all_gather	4294967296	370	nccl-tests-212
h100-80gb	8	8	all_gather	4294967296	360	nccl-tests-326
h100-80gb	4	4	all_reduce	4294967296	367	nccl-1455
h100-80gb	2	2	all_reduce	4294967296	367	nccl-1455
PUBLISHED
python3 - "$T" "$OUT.tmp" "$(date -u +%Y-%m-%d)" "$(git describe --always --dirty 2>/dev/null || echo unknown)" <<'PY' || exit 1
import os, sys
tmp, out, date, build = sys.argv[1:5]
GPUS = ["h100-80gb", "h200-141gb", "a100-80gb"]
SIZES = [8192, 65536, 1 << 20, 16 << 20, 128 << 20, 1 << 30, 4 << 30]
KINDS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast"]
SOURCES = {
    "azure-h200": "Azure AI benchmarking guide, ND H200 v5 (8 H200, NCCL 2.20.5, all_reduce_perf in place): "
                  "https://github.com/Azure/AI-benchmarking-guide/blob/main/Azure_Results/ND_H200_v5_results.md",
    "azure-a100": "Azure AI benchmarking guide, ND A100 v4 (8 A100-SXM4-80GB, NCCL 2.18.5, all_reduce_perf in place): "
                  "https://github.com/Azure/AI-benchmarking-guide/blob/main/Azure_Results/ND_A100_v4_results.md",
    "dstack-crusoe": "dstack's Crusoe example, all_reduce_perf on 2 hosts x 8 A100-SXM4-80GB, 8 HDR ports per host "
                     "(out of place): https://github.com/dstackai/dstack/blob/master/examples/clusters/crusoe/README.md",
    "nccl-tests-149": "nccl-tests issue 149, 8 A100-SXM4-80GB (HPE Apollo 6500): busbw ~200 GB/s at the largest sizes: "
                      "https://github.com/NVIDIA/nccl-tests/issues/149",
    "nccl-tests-212": "nccl-tests issue 212, NCCL maintainer: ~480 GB/s all-reduce busbw on 8 H100 (NVLink SHARP), "
                      "~370 GB/s for other collectives: https://github.com/NVIDIA/nccl-tests/issues/212",
    "nccl-tests-326": "nccl-tests issue 326, 8 H100, all_gather_perf 128M-16G saturating at ~360 GB/s busbw, "
                      "\"exactly what we'd expect\" (maintainer): https://github.com/NVIDIA/nccl-tests/issues/326",
    "nccl-1455": "nccl issue 1455, H100 all_reduce_perf on 2 and 4 GPUs of a host: ~365-370 GB/s busbw: "
                 "https://github.com/NVIDIA/nccl/issues/1455",
}

def parse(path):
    rows, sources, desc, ranks, per_host = {}, [], "", 0, 0
    for line in open(path):
        f = line.split()
        if line.startswith("# machine: "): desc = line[11:].strip()
        elif line.startswith("# source "):
            k, _, v = line[9:].partition(": ")
            sources.append((k, v.strip()))
        elif line.startswith("# ") and len(f) > 5 and f[2] == "ranks," and f[4] == "per":
            ranks, per_host = int(f[1]), int(f[3])
        elif f and not line.startswith("#"):
            rows[(ranks, per_host, f[4], int(f[0]))] = (float(f[6]), float(f[8]))
    return rows, sources, desc

pred = {g: parse(os.path.join(tmp, g + ".txt")) for g in GPUS}
pub = [l.rstrip("\n").split("\t") for l in open(os.path.join(tmp, "published.tsv")) if l.strip()]
o = []
w = o.append
w("# The shipped GPU models' collectives against published nccl-tests tables\n")
w(f"`bash bench/collectives_gpu.sh` on {date} (build {build}): `build/commbench --predict GPU` for each shipped GPU model")
w("(`core/cost/machine_gpus.c`), the rows nccl-tests prints (busbw = algbw x its factor: all_reduce 2(n-1)/n, all_gather")
w("and reduce_scatter (n-1)/n, broadcast 1), float32 counts, one group alone on its hosts. Predictions, no GPU: how the")
w("model prices a collective is in docs/cost-model.md, \"Collectives as nccl-tests tables\". Groups: `intra` = all ranks on one host (NVSwitch),")
w("`k=K` = K ranks on each of ranks/K hosts, one network port per GPU, busbw min(K x port x 0.97, the host's NVLink figure).\n")
w("## Published points\n")
w("Every point we could source, predicted busbw / published busbw. tests/t_colltable.sh holds the model to")
w("[0.75, 1.33] of each point from 1 MB up and [0.5, 2] below (small messages are latency, and published latencies")
w("vary by 1.5x between systems of the same GPUs).\n")
w("| GPU | ranks | per host | collective | size (B) | predicted busbw (GB/s) | published | ratio | source |")
w("|---|---:|---:|---|---:|---:|---:|---:|---|")
worst = 0
for g, n, k, kind, size, bw, src in pub:
    t, b = pred[g][0].get((int(n), int(k), kind, int(size)), (0, 0))
    r = b / float(bw) if float(bw) > 0 else 0
    w(f"| {g} | {n} | {k} | {kind} | {int(size):,} | {b:.2f} | {float(bw):.2f} | {r:.2f} | {src} |")
w("")
for key, text in SOURCES.items(): w(f"- {key}: {text}")
w("\nWhat the comparison shows and what was changed because of it:\n")
w("- Small messages on one host: the model had 6 us + 0.5 us per ring step (13 us for an all-reduce of 8 GPUs);")
w("  the H200 table takes ~30 us at 1-8 KB, so the 8 KB point was 2.2x too fast. Now 18 us + 0.5 us per step")
w("  (25 us for 8) and the size curve's half point at 4 MB (was 8 MB: 1 MB was 1.26x too fast): every H200 point is")
w("  within 0.94-1.19. The A100 table (ND A100 v4) takes 43 us at 8 KB, more than the same GPUs across two hosts")
w("  (37 us, dstack); its 8 KB ratio stays ~1.6, left as it is.")
w("- Across hosts: 15 us + 2.5 us per step (90 us for 16 ranks), half point 32 MB and 90 % of the port made 2 x 8")
w("  A100 0.38x (8 KB) to 0.81x (2 GB) of the dstack table. Now 20 us + 0.5 us per step, 6 MB and 97 % of the")
w("  port (194 GB/s of 8 x 25 at 2 GB): 0.90-1.18. Beyond 16 ranks the latency per step is an estimate (NCCL")
w("  switches to trees for small messages at scale; nothing published here pins it).")
w("- Large A100 all-reduce on one host: the model's 200 GB/s (nccl-tests 149) is 0.84x of Azure's 230; both are")
w("  published, the model keeps the lower.")
w("- The anchor suite (tests/t_anchors.sh, results/bench/anchors.md) moved by at most 3.1 % per run with these changes (median 1.010 -> 1.030).\n")
for g in GPUS:
    rows, sources, desc = pred[g]
    w(f"## {g}\n")
    w(f"{desc}. The figures its collectives rest on (`# source` lines of `build/commbench --predict {g}`):\n")
    for k, v in sources:
        tag = "**estimate**" if v.startswith("estimate") else "fitted" if v.startswith("fitted") else "sourced"
        w(f"- `{k}` ({tag}): {v}")
    w("")
    groups = []
    for key in rows:
        if (key[0], key[1]) not in groups: groups.append((key[0], key[1]))
    for n, k in groups:
        name = "one host" if k >= n else f"{k} per host, {n // k} hosts"
        w(f"### {g}: {n} ranks, {name}\n")
        w("| size (B) | " + " | ".join(f"{c} time (us) | busbw (GB/s)" for c in KINDS) + " |")
        w("|---:|" + "---:|---:|" * len(KINDS))
        for s in SIZES:
            cells = []
            for c in KINDS:
                t, b = rows.get((n, k, c, s), (None, None))
                cells += ["-", "-"] if t is None else [f"{t:,.1f}", f"{b:.2f}"]
            w(f"| {s:,} | " + " | ".join(cells) + " |")
        w("")
open(out, "w").write("\n".join(o))
PY
mv "$OUT.tmp" "$OUT"
echo "wrote $OUT"
