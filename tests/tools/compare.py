#!/usr/bin/python3
"""tests/tools/compare.py — test helper (stdlib only): compares run records and safetensors files.

  compare.py runs NAME REF.json OTHER.json LOSS_RTOL NORM_RTOL
      every step's loss, grad_norm and lr of OTHER against REF (same number of steps, all finite), and
      the eval losses (same steps) to LOSS_RTOL when either record has any
  compare.py params NAME REF.safetensors OTHER.safetensors ATOL
      same tensor names, shapes and dtypes; every value finite; max |a-b| over all elements <= ATOL
  compare.py same NAME A.safetensors B.safetensors      every value finite, tensor data identical
Relative differences are |a-b| / max(|a|, |b|) (0 when both are 0), so a zero reference is no error.
Prints one "ok NAME" / "FAIL NAME: why" line (tests/lib.sh passes it to the result channel); any
exception is a FAIL line too."""
import json, math, struct, sys

class Failed(Exception):
    pass

def fail(name, why):
    raise Failed(why)

def rel(a, b):
    d = max(abs(a), abs(b))
    return 0.0 if d == 0 else abs(a - b) / d

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
        if v["dtype"] != "F32":
            raise Failed(f"{path}: {k} has dtype {v['dtype']}, want F32")
        out[k] = (tuple(v["shape"]), struct.unpack(f"<{(e - b) // 4}f", data[b:e]))
    return out

def finite(x):
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)

def runs(name, a, b, lt, nt):
    if a.get("status") != "ok" or b.get("status") != "ok":
        fail(name, f"status {a.get('status')} / {b.get('status')}")
    sa, sb = a["steps"], b["steps"]
    if len(sa) != len(sb) or not sa:
        fail(name, f"{len(sa)} vs {len(sb)} steps")
    worst_l = worst_n = worst_lr = 0.0
    for x, y in zip(sa, sb):
        for key in ("loss", "grad_norm", "lr"):
            if not finite(x.get(key)) or not finite(y.get(key)):
                fail(name, f"non-finite or missing {key} at step {x.get('step')}: {x.get(key)} / {y.get(key)}")
        worst_l = max(worst_l, rel(x["loss"], y["loss"]))
        worst_n = max(worst_n, rel(x["grad_norm"], y["grad_norm"]))
        worst_lr = max(worst_lr, rel(x["lr"], y["lr"]))
    ea, eb = a.get("eval") or [], b.get("eval") or []
    if [e["step"] for e in ea] != [e["step"] for e in eb]:
        fail(name, f"eval steps {[e['step'] for e in ea]} vs {[e['step'] for e in eb]}")
    worst_e = 0.0
    for x, y in zip(ea, eb):
        if not finite(x.get("loss")) or not finite(y.get("loss")):
            fail(name, f"non-finite eval loss at step {x['step']}")
        worst_e = max(worst_e, rel(x["loss"], y["loss"]))
    if worst_l > lt or worst_n > nt or worst_lr > 1e-9 or worst_e > lt:
        fail(name, f"max rel diff loss {worst_l:.3g} (tol {lt}), grad_norm {worst_n:.3g} (tol {nt}), "
                   f"lr {worst_lr:.3g} (tol 1e-9), eval {worst_e:.3g} (tol {lt})")
    ev = f", eval {worst_e:.2g} over {len(ea)}" if ea else ""
    return f"max rel diff loss {worst_l:.2g}, grad_norm {worst_n:.2g} over {len(sa)} steps{ev}"

def params(name, mode, a, b, atol):
    if sorted(a) != sorted(b):
        fail(name, f"tensor names differ: {sorted(set(a) ^ set(b))[:4]}")
    worst, where = 0.0, ""
    for k in sorted(a):
        if a[k][0] != b[k][0]:
            fail(name, f"{k}: shape {a[k][0]} vs {b[k][0]}")
        for x, y in zip(a[k][1], b[k][1]):
            if not (math.isfinite(x) and math.isfinite(y)):
                fail(name, f"{k}: non-finite value ({x} / {y})")
        if mode == "same":
            if a[k][1] != b[k][1]:
                fail(name, f"{k}: values differ")
            continue
        for x, y in zip(a[k][1], b[k][1]):
            d = abs(x - y)
            if d > worst:
                worst, where = d, k
    if mode == "params" and not worst <= atol:
        fail(name, f"max |diff| {worst:.3g} > {atol} (in {where})")
    return f"{len(a)} tensors, max |diff| {worst:.2g}"

def main():
    name = sys.argv[2] if len(sys.argv) > 2 else "compare"
    try:
        mode = sys.argv[1]
        if mode == "runs":
            a, b = (json.load(open(p)) for p in sys.argv[3:5])
            msg = runs(name, a, b, float(sys.argv[5]), float(sys.argv[6]))
        elif mode in ("params", "same"):
            a, b = load_st(sys.argv[3]), load_st(sys.argv[4])
            msg = params(name, mode, a, b, float(sys.argv[5]) if mode == "params" else 0.0)
        else:
            fail(name, f"unknown mode {mode}")
    except Failed as e:
        print(f"FAIL {name}: {e}")
        return
    except Exception as e:  # a missing or broken file is a failed check, never a silent one
        print(f"FAIL {name}: {type(e).__name__}: {e}")
        return
    print(f"ok   {name}  ({msg})")

if __name__ == "__main__":
    main()
