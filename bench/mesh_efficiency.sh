#!/usr/bin/env bash
# bench/mesh_efficiency.sh — parallel efficiency of the 8-rank meshes on this machine (docs/benchmarks.md): the
# 1-rank step time against each 8-rank mesh (1x8, 2x4, 4x2, 8x1) at the SAME global batch, median step
# ms from the run records, efficiency T1 / (cores · T8), the share of the step spent in communication,
# per-collective ms per step, CPU time of the whole job (user and sys; sched_yield spinning shows up as
# sys), and commbench busbw next to memcpy bandwidth. Then variants (VARIANTS=1): 2 and 4 ranks (is it
# the oversubscription?), 2x4 with yield_when_idle=0 and with --mca btl self,vader, and baseline repeats
# (run-to-run noise). Reduce-scatter algorithms are not a launch setting: build/commbench measures them.
# Writes results/bench/mesh_efficiency.md (OUT=...) with the date, machine and the exact commands; takes
# about 2 minutes on a quiet 2-core machine. A benchmark, not a test: it asserts nothing.
# Usage: bash bench/mesh_efficiency.sh   (env: MODEL=small SEQ=256 GLOBAL=8 STEPS=8 VARIANTS=1 OUT=...)
set -u
BUILD=${BUILD:-build}
MODEL=${MODEL:-small}
SEQ=${SEQ:-256}
GLOBAL=${GLOBAL:-8}
STEPS=${STEPS:-8}
EXCL=${EXCL:-3}
VARIANTS=${VARIANTS:-1}
OUT=${OUT:-results/bench/mesh_efficiency.md}
CORES=$(nproc)
W=8
for b in train commbench; do [ -x "$BUILD/$b" ] || { echo "mesh_efficiency: $BUILD/$b missing (run make)" >&2; exit 2; }; done
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export OPENBLAS_NUM_THREADS=1
BASE_ENV=(OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1)
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none)
COMMON=(--model "$MODEL" --seq-len "$SEQ" --steps "$STEPS" --data synthetic --warmup-steps-excluded "$EXCL" --log-every 1000)
CMDS=()

# run NAME NP TP ENV... -- EXTRA_MPI_ARGS... : one training run; leaves $T/NAME.json and $T/NAME.cpu
run() {
  local name=$1 np=$2 tp=$3; shift 3
  local envs=() mpiargs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  mpiargs=("$@")
  local dp=$((np / tp)); local b=$((GLOBAL / dp))
  local cmd common=("${COMMON[@]}")
  [ -n "${RUN_STEPS:-}" ] && common=(--model "$MODEL" --seq-len "$SEQ" --steps "$RUN_STEPS" --data synthetic \
    --warmup-steps-excluded "$EXCL" --log-every 1000)   # train takes an option once
  if [ "$np" -eq 1 ]; then
    cmd=("$BUILD/train" "${common[@]}" --batch-size "$b" --out "$T/$name.json")
  else
    cmd=("${MPIRUN[@]}" "${mpiargs[@]}" -np "$np" "$BUILD/train" "${common[@]}" --tp "$tp" --batch-size "$b" --out "$T/$name.json")
  fi
  CMDS+=("$(printf '%s ' "${envs[@]}") ${cmd[*]}")
  local t0; t0=$(cut -d' ' -f1 /proc/loadavg)
  # `time` of the whole job: mpirun reaps its ranks, so user+sys include every rank
  { TIMEFORMAT='%R %U %S'; time env "${envs[@]}" "${cmd[@]}" >"$T/$name.log" 2>&1; } 2>"$T/$name.cpu"
  echo "$t0 $(cut -d' ' -f1 /proc/loadavg)" >"$T/$name.load"
  if [ ! -s "$T/$name.json" ]; then echo "mesh_efficiency: run $name failed: $(tail -3 "$T/$name.log")" >&2; fi
  grep -v '^\s*$' "$T/$name.log" | grep -v '^train: step' | tail -1 | cut -c1-160 >"$T/$name.err"
  echo "  ran $name ($(cat "$T/$name.cpu"))" >&2
}

# commbench at the engine's message sizes (1 MiB: an FSDP unit of `small` sharded over tp is 0.4-3.4 MB)
cbench() { # TP
  local tp=$1
  local cmd=("${MPIRUN[@]}" -np $W "$BUILD/commbench" --tp "$tp" --min-bytes 1M --max-bytes 1M --iters 10 --warmup 2 --memcpy-bytes 512M --json "$T/cb$tp.json")
  CMDS+=("$(printf '%s ' "${BASE_ENV[@]}") ${cmd[*]}")
  env "${BASE_ENV[@]}" "${cmd[@]}" >"$T/cb$tp.txt" 2>&1 || echo "mesh_efficiency: commbench --tp $tp failed" >&2
}

echo "mesh_efficiency: baseline runs ($MODEL, seq $SEQ, global batch $GLOBAL, $STEPS steps)" >&2
run r1 1 1 "${BASE_ENV[@]}" --
for tp in 8 4 2 1; do run "m$tp" $W $tp "${BASE_ENV[@]}" --; done
if [ "$VARIANTS" = 1 ]; then
  echo "mesh_efficiency: variants" >&2
  # fewer ranks than cores+: is it the oversubscription? (2 ranks on 2 cores, 4 ranks on 2 cores)
  run w2x1 2 1 "${BASE_ENV[@]}" --
  run w1x2 2 2 "${BASE_ENV[@]}" --
  run w2x2 4 2 "${BASE_ENV[@]}" --
  RUN_STEPS=4 run y0_4 $W 4 OMPI_MCA_mpi_yield_when_idle=0 OPENBLAS_NUM_THREADS=1 --  # slow: few steps
  run vader_4 $W 4 "${BASE_ENV[@]}" -- --mca btl self,vader
  run rep_4 $W 4 "${BASE_ENV[@]}" --   # the baseline again: run-to-run noise on a shared machine
  run rep_2 $W 2 "${BASE_ENV[@]}" --
fi
echo "mesh_efficiency: commbench" >&2
for tp in 8 4 2 1; do cbench $tp; done

mkdir -p "$(dirname "$OUT")"
/usr/bin/python3 - "$T" "$OUT" "$CORES" "$W" "$MODEL" "$SEQ" "$GLOBAL" "$STEPS" "$EXCL" "$VARIANTS" "${CMDS[@]}" <<'PY'
import json, os, statistics, sys, datetime, subprocess
T, out, cores, W, model, seq, G, steps, excl, variants = sys.argv[1:11]
cmds = sys.argv[11:]
cores, W, G, steps, excl = int(cores), int(W), int(G), int(steps), int(excl)

def load(name):
    try: r = json.load(open(os.path.join(T, name + ".json")))
    except Exception: return None
    real, user, sys_ = map(float, open(os.path.join(T, name + ".cpu")).read().split()[-3:])
    la = open(os.path.join(T, name + ".load")).read().split()
    st = [s for s in r["steps"]][excl:] or r["steps"]
    mn = min(s["ms"] for s in st)
    med = statistics.median(s["ms"] for s in st)
    comm = statistics.median(s["comm_ms"] for s in st)
    per = {k: v["ms"] / max(1, len(r["steps"])) for k, v in r["comm"].items()}
    byt = {k: v["bytes"] / max(1, len(r["steps"])) for k, v in r["comm"].items()}
    return dict(r=r, ms=med, min=mn, comm=comm, per=per, bytes=byt, real=real, user=user, sys=sys_, load=la, status=r.get("status"))

cpu = "?"
for l in open("/proc/cpuinfo"):
    if l.startswith("model name"): cpu = l.split(":", 1)[1].strip(); break
r1 = load("r1")
L = []
L.append("# Mesh efficiency on this machine (bench/mesh_efficiency.sh)\n")
L.append("Generated by `bash bench/mesh_efficiency.sh` on %s UTC. Machine: `nproc` = %d, CPU `%s`, %s, %s.\n" % (
    datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), cores, cpu,
    open("/proc/meminfo").readline().split(":")[1].strip() + " RAM",
    subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout.splitlines()[0]))
L.append("**The machine is shared**: other engineers' builds and tests run at the same time, so every number here "
         "carries their load. The 1-minute load average before and after each run is in the tables; treat rows "
         "whose load is far above %d as contaminated.\n" % cores)
L.append("Model `%s`, sequence %s, global batch %d sequences (batch per DP rank = %d/dp), %d steps, median over steps %d..%d. "
         "Efficiency = T1 / (%d · T8): %d ranks share %d cores, so the ideal 8-rank step is T1/%d. "
         "comm share = median per-step comm_ms / ms (the record's comm_ms is the max over ranks of the wall time "
         "inside collectives, which on an oversubscribed machine includes waiting for descheduled peers). "
         "CPU = user+sys of the whole job (all ranks, start-up included) from bash `time`; "
         "busy = CPU / (cores · wall). CPU efficiency = CPU of the 1-rank job / CPU of this job: the share of the "
         "CPU burnt that the 1-rank run needed for the same steps; it is much less sensitive to other users' load "
         "than wall-clock efficiency, and bounds it (a job cannot beat CPU efficiency on fully busy cores).\n" % (model, seq, G, G, steps, excl + 1, steps, cores, W, cores, cores))

def row(name, label, base):
    x = load(name)
    if not x:
        try: why = open(os.path.join(T, name + ".err")).read().strip().replace("|", "/")
        except Exception: why = "?"
        return "| %s | failed: %s | | | | | | | | | |" % (label, why)
    w = x["r"]["mesh"]["world"]
    c = min(cores, w)
    eff = base["ms"] / (c * x["ms"]) if base else float("nan")
    effmin = base["min"] / (c * x["min"]) if base else float("nan")
    per = x["per"]
    cpueff = (base["user"] + base["sys"]) / (x["user"] + x["sys"]) if base else float("nan")
    return "| %s | %.0f (%.0f) | %.2f (%.2f) | %.2f | %.0f | %.0f%% | %.0f / %.0f / %.0f | %.1f / %.1f | %.0f%% | %s→%s |" % (
        label, x["ms"], x["min"], eff, effmin, cpueff, x["comm"], 100 * x["comm"] / x["ms"],
        per.get("all_gather", 0), per.get("reduce_scatter", 0), per.get("all_reduce", 0),
        x["user"], x["sys"], 100 * (x["user"] + x["sys"]) / (cores * x["real"]), x["load"][0], x["load"][1])

L.append("## Baseline: OMPI_MCA_mpi_yield_when_idle=1, --oversubscribe --bind-to none, default btl and coll\n")
L.append("| mesh (dp×tp) | step ms median (min) | efficiency T1/(%d·T8) median (min) | CPU efficiency | comm ms | comm share | AG / RS / AR ms per step (rank 0) | CPU user / sys s | busy | load avg |" % cores)
L.append("|---|---|---|---|---|---|---|---|---|---|")
if r1:
    L.append("| 1 rank (1×1) | %.0f (%.0f) | 1/%d | 1 | 0 | 0%% | - | %.1f / %.1f | %.0f%% | %s→%s |" % (
        r1["ms"], r1["min"], cores, r1["user"], r1["sys"], 100 * (r1["user"] + r1["sys"]) / (cores * r1["real"]), r1["load"][0], r1["load"][1]))
for tp in (8, 4, 2, 1):
    L.append(row("m%d" % tp, "%d×%d" % (W // tp, tp), r1))
L.append("")
if variants == "1":
    L.append("## Variants\n")
    L.append("Fewer ranks (efficiency T1 / (min(cores, W) · T_W)), then 2×4 with other Open MPI settings, then the "
             "baseline again to show the run-to-run noise.\n")
    L.append("| variant | step ms median (min) | efficiency median (min) | CPU efficiency | comm ms | comm share | AG / RS / AR ms per step | CPU user / sys s | busy | load avg |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    L.append(row("w2x1", "2×1 (2 ranks)", r1))
    L.append(row("w1x2", "1×2 (2 ranks)", r1))
    L.append(row("w2x2", "2×2 (4 ranks)", r1))
    L.append(row("y0_4", "2×4 yield_when_idle=0 (4 steps)", r1))
    L.append(row("vader_4", "2×4 --mca btl self,vader", r1))
    L.append(row("rep_4", "2×4 baseline again", r1))
    L.append(row("rep_2", "4×2 baseline again", r1))
    L.append("")

L.append("## Collective bandwidth at 1 MiB (build/commbench, all groups of a kind at once) next to memcpy\n")
L.append("In-engine algbw = bytes / ms of each collective kind over the whole run from the record (rank 0).\n")
L.append("| mesh | group | ranks | all_gather busbw | reduce_scatter (allreduce+copy) busbw | reduce_scatter (native) busbw | all_reduce busbw | in-engine AG / RS algbw GB/s |")
L.append("|---|---|---|---|---|---|---|---|")
mc = None
for tp in (8, 4, 2, 1):
    try: cb = json.load(open(os.path.join(T, "cb%d.json" % tp)))
    except Exception: L.append("| %d×%d | commbench failed | | | | | | |" % (W // tp, tp)); continue
    mc = cb["memcpy"]
    x = load("m%d" % tp)
    eng = "-"
    if x:
        r = x["r"]["comm"]
        f = lambda k: r[k]["bytes"] / r[k]["ms"] / 1e6 if r[k]["ms"] > 0 else 0
        eng = "%.2f / %.2f" % (f("all_gather"), f("reduce_scatter"))
    for g in ("tp", "dp"):
        rec = {(q["collective"], q["algo"]): q for q in cb["records"] if q["group"] == g}
        if not rec: continue
        b = lambda c, a: "%.2f" % rec[(c, a)]["busbw_gbs"] if (c, a) in rec else "-"
        L.append("| %d×%d | %s | %d | %s | %s | %s | %s | %s |" % (W // tp, tp, g, next(iter(rec.values()))["ranks"],
                 b("all_gather", "mpi"), b("reduce_scatter", "allreduce"), b("reduce_scatter", "native"), b("all_reduce", "mpi"), eng))
if mc:
    L.append("\nmemcpy, one process (best of several copies): %.2f GB/s at %d B (cache-resident on this CPU's large L3), "
             "%.2f GB/s at %d B. busbw counts bytes crossing a rank's link once; a shared-memory transport copies "
             "through a buffer (copy-in + copy-out), so busbw of about half the memcpy rate is the ceiling to expect.\n"
             % (mc[0]["gbs"], mc[0]["bytes"], mc[1]["gbs"], mc[1]["bytes"]))
L.append("## Commands\n")
L.append("```")
L.extend(c.strip().replace(T, "$TMP") for c in cmds)
L.append("```\n")
tmp = out + ".tmp"
open(tmp, "w").write("\n".join(L) + "\n")
os.replace(tmp, out)
print("\n".join(L))
PY
