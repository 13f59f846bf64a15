#!/usr/bin/env python3
"""tests/anchors/anchors.py TRAIN [MD] — the step-time model against published runs (published.tsv beside it).

Each row is planned with `TRAIN --plan` on the shipped GPU model of its GPU with the nearest setting of
ours; the predicted tok/s per GPU (or MFU) over the published figure must lie in the row's [lo, hi].
Then the shapes the published runs share, and the targets of docs/cost-model.md:
  - every ratio in its band, the median ratio within +-10 %;
  - FSDP weak scaling of Llama 3.1 8B on H100 (8 per host): 64/8 and 128/8 GPUs >= 0.93 per GPU
    (torchtitan 128/8: 0.97; MPT-13B 64/8 of llm-foundry: 1.00);
  - on one node of 8 H100, FSDP > TP2 > TP4 > TP8 in tok/s (8B, seq 8192, batch 1);
  - one-node bf16 MFU no higher than the best published bf16 runs (H100/H200 ~50 %; A100: the
    llm-foundry table reaches 64 %, so 65 %).
Prints "ok NAME" / "FAIL NAME: why" lines (tests/lib.sh passes them on); with MD, writes the table as
markdown there (results/bench/anchors.md is this table, committed). Plans take milliseconds; no GPU.
What it is not: a measurement."""
import os, re, statistics, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = sys.argv[1]
MD = sys.argv[2] if len(sys.argv) > 2 else None
PRED = re.compile(r"^# predicted step \([^)]*\): ([0-9.]+) ms, ([0-9]+) tok/s, MFU ([0-9.]+)%", re.M)


def plan(model, gpu, world, per_host, seq, batch, accum, ckpt, tp):
    if os.path.exists(os.path.join(HERE, model + ".json")):
        model = os.path.join(HERE, model + ".json")
    args = [TRAIN, "--plan", "--model", model, "--machine", gpu, "--gpu", gpu, "--world", str(world),
            "--gpus-per-host", str(per_host), "--seq-len", str(seq), "--batch-size", str(batch),
            "--grad-accum", str(accum), "--checkpoint-activations", ckpt, "--tp", str(tp), "--dtype", "bf16"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    m = PRED.search(out)
    if p.returncode != 0 or not m:
        oom = [l for l in out.splitlines() if "out of memory budget" in l]
        return None, f"exit {p.returncode}: " + (oom[0] if oom else " ".join(out.strip().splitlines()[-2:]))[:300]
    if re.search(r"^# budget .*: does not fit", out, re.M):
        oom = [l for l in out.splitlines() if "out of memory budget" in l]
        return None, "does not fit its GPU's memory: " + (oom[0] if oom else "")[:240]
    ms, toks, mfu = float(m.group(1)), float(m.group(2)), float(m.group(3)) / 100
    return {"ms": ms, "tok_s": toks, "mfu": mfu}, None


rows, ratios, table = [], [], []
for line in open(os.path.join(HERE, "published.tsv")):
    if not line.strip() or line.startswith("#"):
        continue
    f = line.rstrip("\n").split("\t")
    name, model, gpu, world, per, seq, batch, accum, ckpt, tp, metric, pub, lo, hi, src = f
    world, per, seq, batch, accum, tp = map(int, (world, per, seq, batch, accum, tp))
    pub, lo, hi = float(pub), float(lo), float(hi)
    r, err = plan(model, gpu, world, per, seq, batch, accum, ckpt, tp)
    if r is None:
        print(f"FAIL anchor_{name}: cannot be planned: {err}")
        continue
    got = r["tok_s"] / world if metric == "tok_s_gpu" else r["mfu"]
    ratio = got / pub
    ratios.append(ratio)
    table.append((name, model, gpu, world, per, seq, batch, accum, ckpt, tp, metric, got, pub, ratio, r["mfu"], src))
    if lo <= ratio <= hi:
        print(f"ok anchor_{name}  (predicted {got:.4g}, published {pub:.4g}: ratio {ratio:.3f})")
    else:
        print(f"FAIL anchor_{name}: predicted {got:.4g}, published {pub:.4g}: ratio {ratio:.3f} outside [{lo}, {hi}] ({src})")

if len(ratios) >= 12:
    med = statistics.median(ratios)
    if 0.9 <= med <= 1.1:
        print(f"ok anchor_median  ({med:.3f} over {len(ratios)} runs)")
    else:
        print(f"FAIL anchor_median: median ratio {med:.3f} over {len(ratios)} runs, outside [0.9, 1.1]")
else:
    print(f"FAIL anchor_median: only {len(ratios)} runs planned, want >= 12")

shapes = []
base, err = plan("llama3.1-8b", "h100-80gb", 8, 8, 8192, 1, 1, "none", 1)
for w in (64, 128):
    r, err2 = plan("llama3.1-8b", "h100-80gb", w, 8, 8192, 1, 1, "none", 1)
    if base is None or r is None:
        print(f"FAIL anchor_weak_scaling_{w}_over_8: {err or err2}")
        continue
    s = (r["tok_s"] / w) / (base["tok_s"] / 8)
    shapes.append((f"8B FSDP weak scaling, {w} / 8 H100 (8 per host), tok/s per GPU", f"{s:.3f}", ">= 0.93"))
    if s >= 0.93:
        print(f"ok anchor_weak_scaling_{w}_over_8  ({s:.3f})")
    else:
        print(f"FAIL anchor_weak_scaling_{w}_over_8: {s:.3f} < 0.93 (torchtitan 128/8: 0.97, MPT-13B 64/8: 1.00)")
toks = []
for tp in (1, 2, 4, 8):
    r, err = plan("llama3.1-8b", "h100-80gb", 8, 8, 8192, 1, 1, "none", tp)
    toks.append(r["tok_s"] if r else None)
order = " / ".join("none" if t is None else f"{t:,.0f}" for t in toks)
shapes.append(("one node of 8 H100, 8B seq 8192 batch 1: tok/s at tp 1 / 2 / 4 / 8", order, "decreasing"))
if None not in toks and all(a > b for a, b in zip(toks, toks[1:])):
    print(f"ok anchor_one_node_ranking  ({order})")
else:
    print(f"FAIL anchor_one_node_ranking: want FSDP > TP2 > TP4 > TP8 in tok/s: {order}")
cap = {"h100-80gb": 0.50, "h200-141gb": 0.50, "a100-80gb": 0.65}
over = [f"{t[0]} MFU {t[14]:.1%}" for t in table if t[3] <= 8 and t[14] > cap[t[2]]]
if table and not over:
    print(f"ok anchor_one_node_mfu_cap  (H100/H200 <= 50 %, A100 <= 65 %)")
else:
    print(f"FAIL anchor_one_node_mfu_cap: above the best published bf16 runs: {'; '.join(over) or 'no rows'}")

if MD:
    with open(MD + ".tmp", "w") as o:
        o.write("| run | model | GPUs (per host) | seq | batch x accum | AC | mesh | predicted | published | ratio | predicted MFU (attention whole) | source and how the settings differ |\n")
        o.write("|---|---|---:|---:|---:|---|---|---:|---:|---:|---:|---|\n")
        for (name, model, gpu, world, per, seq, batch, accum, ckpt, tp, metric, got, pub, ratio, mfu, src) in table:
            unit = "tok/s/GPU" if metric == "tok_s_gpu" else "MFU"
            g = f"{got:,.0f}" if metric == "tok_s_gpu" else f"{got:.1%}"
            p = f"{pub:,.0f}" if metric == "tok_s_gpu" else f"{pub:.1%}"
            o.write(f"| {name} | {model} | {world} {gpu} ({per}) | {seq} | {batch} x {accum} | {ckpt} | "
                    f"{world // tp}x{tp} | {g} {unit} | {p} | {ratio:.3f} | {mfu:.1%} | {src} |\n")
        if ratios:
            o.write(f"\nMedian ratio {statistics.median(ratios):.3f} over {len(ratios)} runs; "
                    f"range {min(ratios):.3f} .. {max(ratios):.3f}.\n\n")
        o.write("| shape | predicted | published / target |\n|---|---:|---|\n")
        for s in shapes:
            o.write(f"| {s[0]} | {s[1]} | {s[2]} |\n")
    os.replace(MD + ".tmp", MD)
