#!/usr/bin/python3
"""tests/tools/compare.py — test helper (stdlib only): compares run records and safetensors files.

  compare.py runs NAME REF.json OTHER.json LOSS_RTOL NORM_RTOL
      every step's loss and grad_norm of OTHER against REF (same number of steps, all finite)
  compare.py params NAME REF.safetensors OTHER.safetensors ATOL
      same tensor names, shapes and dtypes; max |a-b| over all elements <= ATOL
  compare.py same NAME A.safetensors B.safetensors      byte-identical tensor data
Prints one "ok NAME" / "FAIL NAME: why" line (the format tests/run.sh counts)."""
import json, math, struct, sys

def fail(name, why):
    print(f"FAIL {name}: {why}"); sys.exit(0)

def load_st(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        assert v["dtype"] == "F32", v["dtype"]
        out[k] = (tuple(v["shape"]), struct.unpack(f"<{(e - b) // 4}f", data[b:e]))
    return out

def main():
    mode, name = sys.argv[1], sys.argv[2]
    if mode == "runs":
        a, b = (json.load(open(p)) for p in sys.argv[3:5])
        lt, nt = float(sys.argv[5]), float(sys.argv[6])
        if a["status"] != "ok" or b["status"] != "ok":
            fail(name, f"status {a['status']} / {b['status']}")
        sa, sb = a["steps"], b["steps"]
        if len(sa) != len(sb) or not sa:
            fail(name, f"{len(sa)} vs {len(sb)} steps")
        worst_l = worst_n = 0.0
        for x, y in zip(sa, sb):
            for key in ("loss", "grad_norm"):
                if x[key] is None or y[key] is None or not math.isfinite(x[key]) or not math.isfinite(y[key]):
                    fail(name, f"non-finite {key} at step {x['step']}")
            worst_l = max(worst_l, abs(x["loss"] - y["loss"]) / abs(x["loss"]))
            worst_n = max(worst_n, abs(x["grad_norm"] - y["grad_norm"]) / abs(x["grad_norm"]))
        if worst_l > lt or worst_n > nt:
            fail(name, f"max rel diff loss {worst_l:.3g} (tol {lt}), grad_norm {worst_n:.3g} (tol {nt})")
        print(f"ok   {name}  (max rel diff loss {worst_l:.2g}, grad_norm {worst_n:.2g} over {len(sa)} steps)")
    elif mode in ("params", "same"):
        a, b = load_st(sys.argv[3]), load_st(sys.argv[4])
        if sorted(a) != sorted(b):
            fail(name, f"tensor names differ: {sorted(set(a) ^ set(b))[:4]}")
        worst = 0.0
        for k in a:
            if a[k][0] != b[k][0]:
                fail(name, f"{k}: shape {a[k][0]} vs {b[k][0]}")
            if mode == "same":
                if a[k][1] != b[k][1]:
                    fail(name, f"{k}: values differ")
            else:
                d = max((abs(x - y) for x, y in zip(a[k][1], b[k][1])), default=0.0)
                worst = max(worst, d)
        if mode == "params" and not worst <= float(sys.argv[5]):
            fail(name, f"max |diff| {worst:.3g} > {sys.argv[5]}")
        print(f"ok   {name}  ({len(a)} tensors, max |diff| {worst:.2g})")
    else:
        fail(name, f"unknown mode {mode}")

if __name__ == "__main__":
    main()
