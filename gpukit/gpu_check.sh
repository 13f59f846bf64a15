#!/usr/bin/env bash
# gpukit/gpu_check.sh — the one check for a short window on a machine with one GPU (8 minutes in all).
#
# Steps (each under `timeout`, all under one budget of GPU_CHECK_BUDGET_S = 480 s counted from
# GPU_CHECK_T0, which the kit's run.sh sets to its own start so that unpacking counts):
#   env           GPU name, driver, memory (nvidia-smi), the libraries build/train resolves
#   build         make -j16 all (from a source tree), or, with GPU_CHECK_PREBUILT=1 (the kit),
#                 `binaries`: the carried programs exist and resolve every library
#   cuda_kernels  build/tests/test_cuda_kernels: every ops_cuda op against the CPU reference
#   cuda_bf16     build/tests/test_cuda_bf16: every ops_cuda_bf16 op against the CPU reference
#   cuda_attention build/tests/test_cuda_attention: the tensor-core attention (mma, cp.async and
#                 ldmatrix fragment self-tests, forward and backward at head dims 64 and 128) against
#                 the CPU reference
#   calibrate     this GPU's machine files for the step-time model (core/cost/): build/calibrate --quick on
#                 bench_1b's bf16 step (1 rank) and on the meshes' fp32 steps (8 ranks on the one GPU),
#                 written into $OUT as machine-bf16.json and machine-fp32.json; the runs below predict
#                 their step with them before step 1
#   init_1b       the host side: llama3.2-1b's owned slices at 1x1 initialised by build/initbench
#                 (threads, wall and CPU seconds; docs/semantics.md#initialisation, core/engine/init.c)
#   cpu_vs_cuda   1 rank, fp32: the same run on --backend cpu and cuda gives the same losses (run_gpu.sh)
#   bench_1b      llama3.2-1b 1x1 bf16, seq 2048, --mem-budget auto: tok/s, MFU, step ms, tracked peak,
#                 device memory
#   mesh_1x1, mesh_1x8 mesh_2x4 mesh_4x2 mesh_8x1
#                 the `small` model at a fixed global batch, the 8-rank meshes with all ranks on the one
#                 GPU (--comm mpi, staged: NCCL refuses two ranks on one GPU); final loss against 1x1
#   plan          plan = measured on CUDA: each run record's planned tracked bytes equal the measured
#                 ones byte for byte (bench_1b and mesh_1x1), and the device memory in use stays within
#                 the budget plus the runtime overhead the run measured (bench_1b)
#   prediction    predicted against measured step time of bench_1b and the meshes (their records'
#                 summary.predicted_step_ms and step_ms_median): the error of each; a benchmark, FAIL only
#                 when a run that finished has no prediction
#   gpu_bench     when at least 60 s remain: bench/gpu_bench.sh into $OUT/gpu-bench, the per-kernel
#                 times at llama3.2-1b's shapes (GEMMs against cuBLAS, attention TFLOP/s, CE, AdamW),
#                 attention at head dims 64/128 and T 2048/8192, the fused AdamW's bandwidth, the GEMM
#                 peak, MFU in two conventions against two peaks
#                 next to bench_1b's record (no second engine run); a benchmark, nothing asserted:
#                 FAIL only when a program fails or it runs out of time
# The truth, not a hopeful reading: a step is `skip` only when there is no GPU (then every GPU step
# says `skip ... no GPU`) or when it was not started because the budget was spent. A build failure,
# a FAIL line, a CUDA test that skips although a GPU is there, a non-zero exit or a timeout of any
# run is FAIL, and the script exits 1. After a failed build the GPU steps are FAIL ("not run").
# Output: a fixed-width table on stdout (also summary.txt) and summary.json (each step's status,
# seconds, note and figures) in $OUT (default build/gpu-check), with every log and run record.
# Environment for tests (tests/t_gpu_check.sh): GPU_CHECK_NVIDIA_SMI (the nvidia-smi to ask; the GPU
# counts as present when it prints a GPU), GPU_CHECK_BUDGET_S, GPU_CHECK_T0, GPU_CHECK_PREBUILT.
set -u
cd "$(dirname "$0")/.."
OUT_DIR=${OUT:-build/gpu-check}
mkdir -p "$OUT_DIR" || { echo "gpu_check: cannot create $OUT_DIR" >&2; exit 1; }
BUILD=${BUILD:-build}
export BUILD OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
budget=${GPU_CHECK_BUDGET_S:-480}
t0=${GPU_CHECK_T0:-$(date +%s)}
prebuilt=${GPU_CHECK_PREBUILT:-0}
SMI=${GPU_CHECK_NVIDIA_SMI:-nvidia-smi}
failed=0
build_ok=1
: > "$OUT_DIR/steps.tsv"

left() { echo $(( budget - ($(date +%s) - t0) )); }
jesc() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\t'/ }; s=${s//$'\n'/ }; printf '%s' "$s"; }
# row NAME STATUS SECONDS NOTE [FIGURES as k=v;k=v]
row() {
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5:-}" >> "$OUT_DIR/steps.tsv"
  [ "$2" = FAIL ] && failed=1
  printf '== %-13s %-5s %4ss  %s\n' "$1" "$2" "$3" "$4"
}
# run NAME MIN_S LIMIT_S CMD... : not started (rc 125) when less than MIN_S is left; else under
# timeout min(LIMIT_S, left); output in $OUT_DIR/NAME.log; sets rc and secs
run() {
  local name=$1 min=$2 limit=$3; shift 3
  local l; l=$(left)
  if [ "$l" -lt "$min" ]; then rc=125; secs=0; return; fi
  [ "$limit" -gt "$l" ] && limit=$l
  local s; s=$(date +%s)
  timeout -k 10 "$limit" "$@" > "$OUT_DIR/$name.log" 2>&1; rc=$?
  secs=$(( $(date +%s) - s ))
}
why() { # the program's own message when there is one (mpirun adds banners after it)
  { grep -m1 -E '^(train|FAIL|CUDA error|cuBLAS error|NCCL)' "$OUT_DIR/$1.log" || grep -v '^\s*$' "$OUT_DIR/$1.log" | tail -n 1; } | cut -c1-110
}
# gate NAME : 0 when the GPU step NAME may run; else writes its row
gate() {
  if [ "$have_gpu" -eq 0 ]; then row "$1" skip 0 "no GPU ($gpu_why)"; return 1; fi
  if [ "$build_ok" -eq 0 ]; then row "$1" FAIL 0 "not run: the build failed"; return 1; fi
  return 0
}
# verdict NAME NOTE [FIGURES] : the row of a finished run from rc
verdict() {
  if [ "$rc" -eq 125 ]; then row "$1" skip 0 "not started: out of time ($(left) s left of $budget)"
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then row "$1" FAIL "$secs" "timed out: $(why "$1")"
  elif [ "$rc" -ne 0 ]; then row "$1" FAIL "$secs" "exit $rc: $(why "$1")"
  else row "$1" ok "$secs" "$2" "${3:-}"; fi
}
# jget FILE EXPR : a value of a run record (python3 expression on r), empty when absent
jget() {
  python3 - "$1" "$2" 2>/dev/null <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1])); v = eval(sys.argv[2], {}, {"r": r})
    print("" if v is None else v)
except Exception:
    pass
PY
}

# ---- env (not a GPU step: it says what the machine has)
have_gpu=0; gpu_why="nvidia-smi not found"
s=$(date +%s)
gpu_line=$(timeout 20 "$SMI" --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>"$OUT_DIR/smi.err" | head -n 1)
smi_rc=$?
if [ -n "$gpu_line" ] && [ "$smi_rc" -eq 0 ]; then have_gpu=1; gpu_why=""
elif command -v "$SMI" >/dev/null 2>&1; then gpu_why="nvidia-smi lists no GPU: $(head -c 100 "$OUT_DIR/smi.err" | tr '\n' ' ')"; fi
{
  date -u; uname -a; echo "nproc $(nproc)"
  echo "gpu: ${gpu_line:-none ($gpu_why)}"
  timeout 20 "$SMI" 2>&1 | head -n 20
  echo "--- libraries of $BUILD/train"; ldd "$BUILD/train" 2>&1
  echo "--- PATH=$PATH"; echo "--- LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
} > "$OUT_DIR/env.log" 2>&1
libs=$(ldd "$BUILD/train" 2>/dev/null | awk '$1 ~ /^lib(cudart|cublas|nccl|mpi)\./ { printf "%s=%s;", $1, $3 }')
IFS=, read -r g_name g_driver g_mem <<< "${gpu_line:-}"
row env ok $(( $(date +%s) - s )) "${gpu_line:-no GPU ($gpu_why)}; $(nproc) cores" \
  "gpu=$(echo "${g_name:-}" | xargs);driver=$(echo "${g_driver:-}" | xargs);memory=$(echo "${g_mem:-}" | xargs);${libs}"

# ---- build (source tree) or the carried binaries (kit)
if [ "$prebuilt" = 1 ]; then
  s=$(date +%s); missing=""
  for b in "$BUILD/train" "$BUILD/initbench" "$BUILD/calibrate" "$BUILD/tests/test_cuda_kernels" "$BUILD/tests/test_cuda_bf16" \
           "$BUILD/tests/test_cuda_attention"; do
    if [ ! -x "$b" ]; then missing="$missing $b(absent)"
    else nf=$(ldd "$b" 2>&1 | awk '/not found/ { printf "%s ", $1 }'); [ -z "$nf" ] || missing="$missing $b(not found: $nf)"; fi
  done
  if [ -z "$missing" ]; then row binaries ok $(( $(date +%s) - s )) "carried, built on $(cat GIT_REVISION 2>/dev/null || echo '?')"
  else row binaries FAIL $(( $(date +%s) - s )) "$missing"; build_ok=0; fi
else
  run build 60 300 make -j16 all
  verdict build "make -j16 all"
  [ "$rc" -eq 0 ] || build_ok=0
fi

# ---- the CUDA op tests against the CPU reference
cuda_test() { # NAME BINARY
  gate "$1" || return
  run "$1" 20 120 "$BUILD/tests/$2"
  local nok nfail nskip
  nok=$(grep -c '^ok ' "$OUT_DIR/$1.log"); nfail=$(grep -c '^FAIL ' "$OUT_DIR/$1.log"); nskip=$(grep -c '^skip ' "$OUT_DIR/$1.log")
  if [ "$rc" -eq 0 ] && [ "$nfail" -gt 0 ]; then row "$1" FAIL "$secs" "$nfail FAIL lines: $(grep -m1 '^FAIL ' "$OUT_DIR/$1.log" | cut -c1-90)"
  elif [ "$rc" -eq 0 ] && [ "$nskip" -gt 0 ]; then row "$1" FAIL "$secs" "skipped on a GPU machine: $(grep -m1 '^skip ' "$OUT_DIR/$1.log" | cut -c1-90)"
  elif [ "$rc" -eq 0 ] && [ "$nok" -eq 0 ]; then row "$1" FAIL "$secs" "ran no check"
  else verdict "$1" "$nok ok" "checks=$nok"; fi
}
cuda_test cuda_kernels test_cuda_kernels
cuda_test cuda_bf16 test_cuda_bf16
cuda_test cuda_attention test_cuda_attention

# ---- this GPU measured for the step-time model: bench_1b's step (bf16, 1 rank) and the meshes' (fp32, the
# 8-rank meshes of `small` at global batch 8, every rank on the one GPU: a spec of them for build/calibrate)
G=8
if gate calibrate; then
  printf '%s\n' '{"name": "gpu-meshes", "world": 8, "meshes": ["1x8", "2x4", "4x2", "8x1"], "model": "small", "seq_len": 128,
    "steps": 6, "lr": 1e-3, "global_batch": '$G', "data": "synthetic", "backend": "cuda", "timeout_s": 60}' > "$OUT_DIR/mesh-spec.json"
  s=$(date +%s)
  run calibrate 30 60 "$BUILD/calibrate" --backend cuda --dtype bf16 --quick --model llama3.2-1b --seq-len 2048 --batch-size 1 \
    --out "$OUT_DIR/machine-bf16.json"
  c1=$rc
  if [ "$c1" -eq 0 ]; then
    cp "$OUT_DIR/calibrate.log" "$OUT_DIR/calibrate-bf16.log"
    run calibrate 30 90 mpirun --oversubscribe -np 8 "$BUILD/calibrate" --backend cuda --dtype fp32 --quick \
      --spec "$OUT_DIR/mesh-spec.json" --out "$OUT_DIR/machine-fp32.json"
  fi
  secs=$(( $(date +%s) - s ))
  pk=$(jget "$OUT_DIR/machine-bf16.json" 'r["compute"]["peak_tflops"]'); pk32=$(jget "$OUT_DIR/machine-fp32.json" 'r["compute"]["peak_tflops"]')
  if [ "$rc" -eq 0 ] && { [ -z "$pk" ] || [ -z "$pk32" ]; }; then row calibrate FAIL "$secs" "exit 0 but no machine file"
  else verdict calibrate "bf16 GEMM peak ${pk:-?} TFLOP/s, fp32 ${pk32:-?} TFLOP/s (8 ranks)" "bf16_peak_tflops=$pk;fp32_peak_tflops=$pk32"; fi
fi
m16=(); m32=()
[ -s "$OUT_DIR/machine-bf16.json" ] && m16=(--machine "$OUT_DIR/machine-bf16.json")
[ -s "$OUT_DIR/machine-fp32.json" ] && m32=(--machine "$OUT_DIR/machine-fp32.json")

# ---- initialisation of llama3.2-1b's owned slices at 1x1 on this host (what bench_1b waits for first)
if gate init_1b; then
  run init_1b 20 60 "$BUILD/initbench" --model llama3.2-1b
  read -r ie iw ic ins <<< "$(grep -v '^#' "$OUT_DIR/init_1b.log" 2>/dev/null | tail -n 1)"
  ith=$(sed -n 's/.*, \([0-9]*\) threads$/\1/p' "$OUT_DIR/init_1b.log" 2>/dev/null)
  if [ "$rc" -eq 0 ] && [ -z "${iw:-}" ]; then row init_1b FAIL "$secs" "no timing line"
  else verdict init_1b "${ie:-?} elements in ${iw:-?} s wall, ${ic:-?} s CPU, ${ith:-?} threads" \
    "elements=${ie:-};wall_s=${iw:-};cpu_s=${ic:-};cpu_ns_per_element=${ins:-};threads=${ith:-}"; fi
fi

# ---- 1 rank, cpu vs cuda (the engine end to end)
if gate cpu_vs_cuda; then
  run cpu_vs_cuda 30 120 env GPU_TEST_ONLY=train_cuda_vs_cpu bash gpukit/run_gpu.sh
  if [ "$rc" -eq 0 ] && ! grep -q '^ok   train_cuda_vs_cpu' "$OUT_DIR/cpu_vs_cuda.log"; then
    row cpu_vs_cuda FAIL "$secs" "no ok line: $(grep -m1 -E '^(skip|FAIL) ' "$OUT_DIR/cpu_vs_cuda.log" | cut -c1-90)"
  else verdict cpu_vs_cuda "$(grep -m1 '^ok   train_cuda_vs_cpu' "$OUT_DIR/cpu_vs_cuda.log" | cut -c6-100)"; fi
fi

# ---- llama3.2-1b, 1x1, bf16, seq 2048
if gate bench_1b; then
  run bench_1b 60 150 "$BUILD/train" --model llama3.2-1b --backend cuda --dtype bf16 --seq-len 2048 --batch-size 1 \
    --steps 10 --data synthetic --warmup-steps-excluded 3 --log-every 1 --mem-budget auto "${m16[@]}" --out "$OUT_DIR/bench_1b.json"
  f=$OUT_DIR/bench_1b.json
  tok=$(jget "$f" 'r["summary"]["tok_s"]'); mfu=$(jget "$f" 'r["summary"]["mfu"]'); ms=$(jget "$f" 'r["summary"]["step_ms_median"]')
  peak=$(jget "$f" 'r["memory"]["peak"]'); dused=$(jget "$f" 'r["memory"]["device"]["used_at_end"]'); dtot=$(jget "$f" 'r["memory"]["device"]["total"]')
  if [ "$rc" -eq 0 ] && [ -z "$tok" ]; then row bench_1b FAIL "$secs" "exit 0 but the record has no summary.tok_s"
  else verdict bench_1b "tok/s ${tok:-?}  MFU ${mfu:-?}  step ${ms:-?} ms  tracked peak ${peak:-?} B  device ${dused:-?}/${dtot:-?} B" \
    "tok_s=$tok;mfu=$mfu;step_ms=$ms;peak_tracked_bytes=$peak;device_used_bytes=$dused;device_total_bytes=$dtot"; fi
fi

# ---- the 8-rank meshes of `small` on the one GPU, fixed global batch G, against 1 rank
common=(--model small --backend cuda --dtype fp32 --comm mpi --seq-len 128 --steps 6 --lr 1e-3 --data synthetic --log-every 1000 "${m32[@]}")
ref=""
if gate mesh_1x1; then
  run mesh_1x1 20 60 "$BUILD/train" "${common[@]}" --batch-size $G --out "$OUT_DIR/mesh_1x1.json"
  ref=$(jget "$OUT_DIR/mesh_1x1.json" 'r["summary"]["final_loss"]')
  if [ "$rc" -eq 0 ] && [ -z "$ref" ]; then row mesh_1x1 FAIL "$secs" "exit 0 but no final_loss in the record"
  else verdict mesh_1x1 "final loss $ref" "final_loss=$ref"; fi
fi
for tp in 8 4 2 1; do
  dp=$(( 8 / tp )); name="mesh_${dp}x${tp}"
  gate "$name" || continue
  run "$name" 30 75 mpirun --oversubscribe -np 8 "$BUILD/train" "${common[@]}" --tp $tp --batch-size $(( G / dp )) \
    --out "$OUT_DIR/$name.json"
  loss=$(jget "$OUT_DIR/$name.json" 'r["summary"]["final_loss"]')
  if [ "$rc" -ne 0 ]; then verdict "$name" ""
  elif [ -z "$ref" ] || [ -z "$loss" ]; then row "$name" FAIL "$secs" "no loss to compare (mesh ${loss:-none}, 1 rank ${ref:-none})"
  elif awk -v a="$loss" -v b="$ref" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; exit !(d < 1e-3) }'; then
    # same global batch, same initial model: the losses agree to float rounding (docs/semantics.md#fsdp)
    row "$name" ok "$secs" "final loss $loss (1 rank: $ref)" "final_loss=$loss;ref_loss=$ref"
  else row "$name" FAIL "$secs" "final loss $loss, 1 rank $ref (relative difference over 1e-3)"; fi
done

# ---- plan = measured on CUDA (reads the records of bench_1b and mesh_1x1)
plan_check() {
  local recs=() n s pyrc figs
  s=$(date +%s)
  : > "$OUT_DIR/plan.log"
  for n in bench_1b mesh_1x1; do # a run not started for lack of time has no record to check
    if grep -q "^$n"$'\t'"skip"$'\t' "$OUT_DIR/steps.tsv"; then continue; fi
    if [ -f "$OUT_DIR/$n.json" ]; then recs+=("$OUT_DIR/$n.json"); else echo "missing $n.json (the run failed)" >> "$OUT_DIR/plan.log"; fi
  done
  if [ "${#recs[@]}" -eq 0 ] && ! grep -q '^missing' "$OUT_DIR/plan.log"; then
    row plan skip 0 "not started: out of time (no run record to check)"; return
  fi
  [ "${#recs[@]}" -eq 0 ] || python3 - "${recs[@]}" >> "$OUT_DIR/plan.log" 2>&1 <<'PY'
import json, os, sys
bad, figs = [], []
for p in sys.argv[1:]:
    r = json.load(open(p)); m = r.get("memory", {}); pl = m.get("planned") or {}
    n = os.path.basename(p)[:-5]
    if pl.get("peak") != m.get("peak") or pl.get("by_category") != m.get("by_category"):
        bad.append(f"{n}: planned {pl.get('peak')} vs measured {m.get('peak')} ({pl.get('by_category')} vs {m.get('by_category')})")
    else:
        figs.append(f"{n}_tracked_bytes={m.get('peak')}")
    if n == "bench_1b":
        d = m.get("device") or {}
        if any(k not in d for k in ("used_at_end", "runtime_overhead")) or not m.get("budget"):
            bad.append(f"bench_1b: record lacks memory.budget or memory.device.{{used_at_end,runtime_overhead}} (device: {d})")
        elif d["used_at_end"] > m["budget"] + d["runtime_overhead"]:
            bad.append(f"bench_1b: device in use {d['used_at_end']} B > budget {m['budget']} + runtime overhead {d['runtime_overhead']} B")
        else:
            figs += [f"device_used_bytes={d['used_at_end']}", f"budget_bytes={m['budget']}", f"runtime_overhead_bytes={d['runtime_overhead']}"]
print("FIGURES " + ";".join(figs))
for b in bad: print("BAD " + b)
PY
  pyrc=$?; secs=$(( $(date +%s) - s ))
  figs=$(sed -n 's/^FIGURES //p' "$OUT_DIR/plan.log")
  if [ "$pyrc" -ne 0 ] || grep -q '^missing \|^BAD ' "$OUT_DIR/plan.log" || [ -z "$figs" ]; then
    row plan FAIL "$secs" "$(grep -m1 -E '^(missing|BAD)|Error' "$OUT_DIR/plan.log" | sed 's/^BAD //' | cut -c1-150)"
  else row plan ok "$secs" "planned = measured; $(echo "$figs" | tr ';' ' ' | cut -c1-110)" "$figs"; fi
}
if gate plan; then plan_check; fi

# ---- predicted against measured step time (the records of bench_1b and the meshes)
if gate prediction; then
  s=$(date +%s); recs=()
  for n in bench_1b mesh_1x1 mesh_1x8 mesh_2x4 mesh_4x2 mesh_8x1; do [ -f "$OUT_DIR/$n.json" ] && recs+=("$OUT_DIR/$n.json"); done
  if [ "${#recs[@]}" -eq 0 ]; then
    if grep -q $'^bench_1b\tskip\t' "$OUT_DIR/steps.tsv"; then row prediction skip 0 "not started: out of time (no run record)"
    else row prediction FAIL 0 "no run record (the runs failed)"; fi
  else
    python3 - "${recs[@]}" > "$OUT_DIR/prediction.log" 2>&1 <<'PY'
import json, os, sys
figs, notes, bad = [], [], []
for p in sys.argv[1:]:
    r = json.load(open(p)); n = os.path.basename(p)[:-5]; s = r.get("summary", {})
    pr, me = s.get("predicted_step_ms"), s.get("step_ms_median")
    if r.get("status") == "ok" and not pr:
        bad.append(f"{n}: no summary.predicted_step_ms")
    elif pr and me:
        e = pr / me - 1
        figs += [f"{n}_predicted_ms={pr:.4g}", f"{n}_measured_ms={me:.4g}", f"{n}_prediction_error={e:.4f}"]
        notes.append(f"{n} {100 * e:+.0f}%")
print("FIGURES " + ";".join(figs)); print("NOTE " + " ".join(notes))
for b in bad: print("BAD " + b)
PY
    secs=$(( $(date +%s) - s )); figs=$(sed -n 's/^FIGURES //p' "$OUT_DIR/prediction.log")
    if grep -q '^BAD \|Error' "$OUT_DIR/prediction.log"; then
      row prediction FAIL "$secs" "$(grep -m1 -E '^BAD|Error' "$OUT_DIR/prediction.log" | sed 's/^BAD //' | cut -c1-120)"
    else row prediction ok "$secs" "predicted/measured - 1: $(sed -n 's/^NOTE //p' "$OUT_DIR/prediction.log" | cut -c1-110)" "$figs"; fi
  fi
fi

# ---- the speed report, with what time remains (kernel times; the engine figures are bench_1b's)
if gate gpu_bench; then
  kt=$(( $(left) - 20 )); [ "$kt" -gt 150 ] && kt=150
  eng=(NO_ENGINE=1); [ -s "$OUT_DIR/bench_1b.json" ] && eng=(ENGINE_RECORD="$OUT_DIR/bench_1b.json")
  run gpu_bench 60 170 env "${eng[@]}" KERNEL_TIMEOUT_S="$kt" BUILD="$BUILD" bash bench/gpu_bench.sh "$OUT_DIR/gpu-bench"
  f=$OUT_DIR/gpu-bench/summary.json
  afw=$(jget "$f" 'r["attention_forward_tflops"]'); abw=$(jget "$f" 'r["attention_backward_tflops"]')
  kmfu=$(jget "$f" 'r["kernel_sum_mfu"]'); emfu=$(jget "$f" 'r["engine_mfu"]')
  f128=$(jget "$f" 'r["attention_forward_hd128_T2048_tflops"]'); b128=$(jget "$f" 'r["attention_backward_hd128_T2048_tflops"]')
  adam=$(jget "$f" 'r["adamw_fused_gb_s"]'); emfuc=$(jget "$f" 'r["engine_mfu_causal"]')
  if [ "$rc" -eq 0 ] && [ -z "$afw" ]; then row gpu_bench FAIL "$secs" "exit 0 but no attention figures in gpu-bench/summary.json"
  else verdict gpu_bench "attention fwd ${afw:-?} bwd ${abw:-?} TFLOP/s (hd128 T2048: ${f128:-?} / ${b128:-?})  AdamW ${adam:-?} GB/s  kernel-sum MFU ${kmfu:-?}  engine MFU ${emfu:-?} (causal half ${emfuc:-?})" \
    "attention_forward_tflops=$afw;attention_backward_tflops=$abw;attention_forward_hd128_T2048_tflops=$f128;attention_backward_hd128_T2048_tflops=$b128;adamw_fused_gb_s=$adam;kernel_sum_mfu=$kmfu;engine_mfu=$emfu;engine_mfu_causal=$emfuc"; fi
fi

# ---- table and summary.json
total=$(( $(date +%s) - t0 ))
{
  printf '# %-12s %-6s %7s  %s\n' step status seconds note
  printf '# %-12s %-6s %7s  %s\n' "" "" s ""
  while IFS=$'\t' read -r n st sc note _; do printf '%-14s %-6s %7s  %s\n' "$n" "$st" "$sc" "$note"; done < "$OUT_DIR/steps.tsv"
  echo "# total ${total} s of a ${budget} s budget; $( [ "$failed" -eq 0 ] && echo passed || echo FAILED ); logs in $OUT_DIR"
} | tee "$OUT_DIR/summary.txt"
{
  printf '{"schema": "meshsweep.gpu_check/1", "date": "%s", "gpu": "%s", "budget_s": %d, "total_s": %d, "failed": %s,\n "steps": [' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(jesc "${gpu_line:-none}")" "$budget" "$total" "$( [ "$failed" -eq 0 ] && echo false || echo true )"
  sep=""
  while IFS=$'\t' read -r n st sc note fg; do
    printf '%s\n  {"step": "%s", "status": "%s", "seconds": %d, "note": "%s", "figures": {' "$sep" "$(jesc "$n")" "$st" "$sc" "$(jesc "$note")"
    fsep=""
    IFS=';' read -ra kv <<< "$fg"
    for x in "${kv[@]}"; do
      [ -n "$x" ] || continue
      k=${x%%=*}; v=${x#*=}
      if [[ "$v" =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]]; then printf '%s"%s": %s' "$fsep" "$(jesc "$k")" "$v"
      else printf '%s"%s": "%s"' "$fsep" "$(jesc "$k")" "$(jesc "$v")"; fi
      fsep=", "
    done
    printf '}}'; sep=","
  done < "$OUT_DIR/steps.tsv"
  printf '\n]}\n'
} > "$OUT_DIR/summary.json.tmp" && mv "$OUT_DIR/summary.json.tmp" "$OUT_DIR/summary.json"
exit $failed
