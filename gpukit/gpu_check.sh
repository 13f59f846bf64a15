#!/usr/bin/env bash
# gpukit/gpu_check.sh — the one check for a short window on a machine with one GPU (10 minutes in all).
#
# Usage: gpukit/gpu_check.sh [--budget-s S]   (S: the window's seconds, at most 600; default
# GPU_CHECK_BUDGET_S or 600, counted from GPU_CHECK_T0, which the kit's run.sh sets to its own start
# so that unpacking counts).
#
# Stages, in the order the window needs them, each with a time limit of its own (seconds of a 600 s
# window; the limits add up to the budget, the last stage takes what is left):
#   versions    5  env: GPU name, driver, memory (nvidia-smi); `versions`: driver, runtime, cuBLAS and
#                  NCCL versions (build/gpu_bench --versions; a driver older than the runtime is FAIL
#                  with that one line); from the kit, `binaries`: the carried programs resolve every library
#   kernels    60  cuda_kernels, cuda_bf16, cuda_attention: every CUDA op against the CPU reference
#   speed     120  speed: bench/gpu_bench.sh without an engine run: attention forward/backward TFLOP/s
#                  at head dims 64/128 and T 2048/8192, the fused AdamW's GB/s, the GEMM peak, the
#                  kernel-sum step (its optimizer group is the optimizer time of the steps below)
#   steps     150  bench_b1, bench_b4, bench_b8: llama3.2-1b 1x1 bf16 seq 2048 at batch 1, 4, 8
#                  (--mem-budget auto, predicted with the shipped machine model of this GPU): tok/s,
#                  step ms, MFU with attention counted whole and causal (as --plan names them), the
#                  optimizer's share of the step, tracked peak and device memory
#   calibrate 120  this GPU's machine files for the step-time model: build/calibrate --quick on the
#                  bf16 step (1 rank) and on the meshes' fp32 steps (8 ranks on the one GPU), into
#                  machine-bf16.json and machine-fp32.json (results/gpu/README.md: they become the
#                  shipped h100/h200 machine models)
#   meshes    145  cpu_vs_cuda (1 rank, same losses), mesh_1x1 and the 8-rank meshes mesh_1x8 mesh_2x4
#                  mesh_4x2 mesh_8x1 of `small` on the one GPU (--comm mpi: NCCL refuses two ranks on
#                  one GPU; final loss against 1x1), init_1b (llama3.2-1b's initialisation on the host)
# then, from the records (under a second): plan (planned = measured tracked bytes; device memory in
# use within budget + runtime overhead) and prediction (predicted against measured step time).
# A shorter budget scales every limit by S/600 (never below the stage's floor: versions 3,
# kernels 20, speed 30, steps 40, calibrate 30, meshes 30) and cuts, from the first stage that no
# longer fits on, every stage whose limit does not: its steps say `skip ... not run: budget`.
# A source tree builds first (`make -j16 all`, up to 300 s, before the budget starts).
# Every stage writes summary.txt and summary.json (temp, then rename) as soon as it ends, so a stop at
# any moment leaves every table before it; stages.tsv holds each stage's limit and the seconds used.
# The truth: a step is `skip` only when there is no GPU (`skip ... no GPU`) or its stage was cut or
# spent (`not run: budget`, `not run: stage time spent`). A build failure, a FAIL line, a CUDA test
# that skips although a GPU is there, a non-zero exit or a timeout is FAIL, and the script exits 1.
# Output under $OUT (default build/gpu-check): the table on stdout and in summary.txt, summary.json
# (each stage's limit and use; each step's status, seconds, note and figures), every log and record.
# Environment for tests (tests/t_gpu_check.sh): GPU_CHECK_NVIDIA_SMI (the nvidia-smi to ask; the GPU
# counts as present when it prints a GPU), GPU_CHECK_BUDGET_S, GPU_CHECK_T0, GPU_CHECK_PREBUILT,
# GPU_CHECK_STAGES ("name:limit:floor ..." in place of the table above).
set -u
cd "$(dirname "$0")/.."
budget=${GPU_CHECK_BUDGET_S:-600}
while [ $# -gt 0 ]; do
  case "$1" in
    --budget-s) [ $# -ge 2 ] || { echo "gpu_check: --budget-s needs a value" >&2; exit 2; }; budget=$2; shift 2;;
    -h|--help) sed -n '2,43p' "$0" | sed 's/^# \{0,1\}//'; exit 0;;
    *) echo "gpu_check: unknown argument '$1' (usage: gpukit/gpu_check.sh [--budget-s S])" >&2; exit 2;;
  esac
done
if ! [[ "$budget" =~ ^[0-9]+$ ]] || [ "$budget" -lt 1 ] || [ "$budget" -gt 600 ]; then
  echo "gpu_check: --budget-s must be a whole number of seconds from 1 to 600, not '$budget'" >&2; exit 2
fi
OUT_DIR=${OUT:-build/gpu-check}
mkdir -p "$OUT_DIR" || { echo "gpu_check: cannot create $OUT_DIR" >&2; exit 1; }
BUILD=${BUILD:-build}
export BUILD OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
prebuilt=${GPU_CHECK_PREBUILT:-0}
SMI=${GPU_CHECK_NVIDIA_SMI:-nvidia-smi}
failed=0
build_ok=1
: > "$OUT_DIR/steps.tsv"

# ---- the stages' plan: name, limit, floor (GPU_CHECK_STAGES overrides the table, for tests)
read -ra STAGE_DEF <<< "${GPU_CHECK_STAGES:-versions:5:3 kernels:60:20 speed:120:30 steps:150:40 calibrate:120:30 meshes:145:30}"
SNAME=(); SLIM=(); SUSED=(); SSTATE=(); nominal=0
for d in "${STAGE_DEF[@]}"; do IFS=: read -r n l f <<< "$d"; nominal=$(( nominal + l )); done
cut=0; planned=0
for d in "${STAGE_DEF[@]}"; do
  IFS=: read -r n l f <<< "$d"
  [ "$budget" -lt "$nominal" ] && l=$(( l * budget / nominal ))
  [ "$l" -lt "$f" ] && l=$f
  if [ "$cut" -eq 1 ] || [ $(( planned + l )) -gt "$budget" ]; then cut=1; SSTATE+=("not run: budget"); l=0
  else SSTATE+=("planned"); planned=$(( planned + l )); fi
  SNAME+=("$n"); SLIM+=("$l"); SUSED+=(0)
done
# the last stage that runs takes what the others leave
for (( i = ${#SNAME[@]} - 1; i >= 0; i-- )); do
  if [ "${SSTATE[$i]}" = planned ]; then SLIM[$i]=$(( SLIM[i] + budget - planned )); break; fi
done
# Open the window only after the build (a source tree): the budget is the GPU's
t0=${GPU_CHECK_T0:-$(date +%s)}

left() { echo $(( budget - ($(date +%s) - t0) )); }
jesc() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\t'/ }; s=${s//$'\n'/ }; printf '%s' "$s"; }
# row NAME STATUS SECONDS NOTE [FIGURES as k=v;k=v]
row() {
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5:-}" "${cur_stage:-}" >> "$OUT_DIR/steps.tsv"
  [ "$2" = FAIL ] && failed=1
  printf '== %-13s %-5s %4ss  %s\n' "$1" "$2" "$3" "$4"
}

# ---- stages: stage_begin NAME (0 when it may run), stage_end; stage_left is what remains of it
cur_stage=""; stage_i=-1; stage_t=0; stage_deadline=0
stage_index() { local i; for i in "${!SNAME[@]}"; do [ "${SNAME[$i]}" = "$1" ] && { echo "$i"; return; }; done; echo -1; }
stage_begin() {
  cur_stage=$1; stage_i=$(stage_index "$1"); stage_t=$(date +%s)
  if [ "$stage_i" -lt 0 ]; then stage_deadline=$(( t0 + budget )); return 0; fi
  [ "${SSTATE[$stage_i]}" = planned ] || return 1
  SSTATE[$stage_i]=running
  stage_deadline=$(( stage_t + SLIM[stage_i] ))
  [ "$stage_deadline" -gt $(( t0 + budget )) ] && stage_deadline=$(( t0 + budget ))
  return 0
}
stage_left() { echo $(( stage_deadline - $(date +%s) )); }
stage_end() {
  if [ "$stage_i" -ge 0 ] && [ "${SSTATE[$stage_i]}" = running ]; then
    SUSED[$stage_i]=$(( $(date +%s) - stage_t )); SSTATE[$stage_i]=done
  fi
  emit
}
# why_cut STEP : the row of a step whose stage did not run
why_cut() {
  row "$1" skip 0 "not run: budget (stage $cur_stage cut to fit the ${budget} s budget)"
}

# run NAME MIN_S LIMIT_S CMD... : not started (rc 125) when less than MIN_S is left of the stage; else
# under timeout min(LIMIT_S, what is left of the stage); output in $OUT_DIR/NAME.log; sets rc and secs
run() {
  local name=$1 min=$2 limit=$3; shift 3
  local l; l=$(stage_left)
  if [ "$l" -lt "$min" ]; then rc=125; secs=0; return; fi
  [ "$limit" -gt "$l" ] && limit=$l
  local s; s=$(date +%s)
  timeout -k 5 "$limit" "$@" > "$OUT_DIR/$name.log" 2>&1; rc=$?
  secs=$(( $(date +%s) - s ))
}
why() { # the program's own message when there is one (mpirun adds banners after it)
  { grep -m1 -E '^(train|gpu_bench|FAIL|CUDA error|cuBLAS error|NCCL)' "$OUT_DIR/$1.log" || grep -v '^\s*$' "$OUT_DIR/$1.log" | tail -n 1; } | cut -c1-110
}
# gate NAME : 0 when the GPU step NAME may run; else writes its row
gate() {
  if [ "$have_gpu" -eq 0 ]; then row "$1" skip 0 "no GPU ($gpu_why)"; return 1; fi
  if [ "$build_ok" -eq 0 ]; then row "$1" FAIL 0 "not run: the build failed"; return 1; fi
  return 0
}
# verdict NAME NOTE [FIGURES] : the row of a finished run from rc
verdict() {
  if [ "$rc" -eq 125 ]; then row "$1" skip 0 "not run: stage time spent ($(stage_left) s left of stage $cur_stage)"
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then row "$1" FAIL "$secs" "timed out: $(why "$1")"
  elif [ "$rc" -ne 0 ]; then row "$1" FAIL "$secs" "exit $rc: $(why "$1")"
  else row "$1" ok "$secs" "$2" "${3:-}"; fi
}
# jget FILE EXPR : a value of a JSON file (python3 expression on r), empty when absent
jget() {
  python3 - "$1" "$2" 2>/dev/null <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1])); v = eval(sys.argv[2], {}, {"r": r})
    print("" if v is None else (f"{v:.6g}" if isinstance(v, float) else v))
except Exception:
    pass
PY
}

# emit : the table and summary.json as they stand (written whole, then renamed)
emit() {
  local total; total=$(( $(date +%s) - t0 ))
  {
    printf '# %-12s %-6s %7s  %s\n' step status seconds note
    while IFS=$'\t' read -r n st sc note _ _; do printf '%-14s %-6s %7s  %s\n' "$n" "$st" "$sc" "$note"; done < "$OUT_DIR/steps.tsv"
    printf '# stages (limit/used s):'
    local i; for i in "${!SNAME[@]}"; do printf ' %s %s/%s (%s)' "${SNAME[$i]}" "${SLIM[$i]}" "${SUSED[$i]}" "${SSTATE[$i]}"; done; echo
    echo "# ${total} s of a ${budget} s budget; $( [ "$failed" -eq 0 ] && echo passed || echo FAILED )$( [ "${finished:-0}" = 1 ] || echo ' so far' ); logs in $OUT_DIR"
  } > "$OUT_DIR/summary.txt.tmp" && mv "$OUT_DIR/summary.txt.tmp" "$OUT_DIR/summary.txt"
  : > "$OUT_DIR/stages.tsv.tmp"
  for i in "${!SNAME[@]}"; do printf '%s\t%s\t%s\t%s\n' "${SNAME[$i]}" "${SLIM[$i]}" "${SUSED[$i]}" "${SSTATE[$i]}" >> "$OUT_DIR/stages.tsv.tmp"; done
  mv "$OUT_DIR/stages.tsv.tmp" "$OUT_DIR/stages.tsv"
  {
    printf '{"schema": "meshsweep.gpu_check/2", "date": "%s", "gpu": "%s", "versions": "%s", "budget_s": %d, "total_s": %d, "finished": %s, "failed": %s,\n "stages": [' \
      "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(jesc "${gpu_line:-none}")" "$(jesc "${versions_line:-}")" "$budget" "$total" \
      "$( [ "${finished:-0}" = 1 ] && echo true || echo false )" "$( [ "$failed" -eq 0 ] && echo false || echo true )"
    local sep=""
    for i in "${!SNAME[@]}"; do
      printf '%s{"stage": "%s", "limit_s": %d, "used_s": %d, "state": "%s"}' "$sep" "${SNAME[$i]}" "${SLIM[$i]}" "${SUSED[$i]}" "${SSTATE[$i]}"; sep=", "
    done
    printf '],\n "steps": ['
    sep=""
    while IFS=$'\t' read -r n st sc note fg sg; do
      printf '%s\n  {"step": "%s", "stage": "%s", "status": "%s", "seconds": %d, "note": "%s", "figures": {' "$sep" "$(jesc "$n")" "$(jesc "$sg")" "$st" "$sc" "$(jesc "$note")"
      local fsep="" x k v kv
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
}
# a stop from outside (the window closing) still leaves the table as it stands
trap 'emit; exit 1' TERM INT HUP

# ---- build (a source tree only; before the window's budget)
if [ "$prebuilt" != 1 ]; then
  cur_stage=build; stage_deadline=$(( $(date +%s) + 300 ))
  run build 1 300 make -j16 all
  verdict build "make -j16 all"
  [ "$rc" -eq 0 ] || build_ok=0
  [ -n "${GPU_CHECK_T0:-}" ] || t0=$(date +%s)
fi

# ---- versions: what the machine has (env is not a GPU step); the kit's binaries
have_gpu=0; gpu_why="nvidia-smi not found"; versions_line=""
if stage_begin versions; then
  s=$(date +%s)
  gpu_line=$(timeout 3 "$SMI" --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>"$OUT_DIR/smi.err" | head -n 1)
  smi_rc=$?
  if [ -n "$gpu_line" ] && [ "$smi_rc" -eq 0 ]; then have_gpu=1; gpu_why=""
  elif command -v "$SMI" >/dev/null 2>&1; then gpu_why="nvidia-smi lists no GPU: $(head -c 100 "$OUT_DIR/smi.err" | tr '\n' ' ')"; fi
  {
    date -u; uname -a; echo "nproc $(nproc)"; echo "glibc $(getconf GNU_LIBC_VERSION 2>/dev/null)"
    echo "gpu: ${gpu_line:-none ($gpu_why)}"
    echo "--- libraries of $BUILD/train"; ldd "$BUILD/train" 2>&1
    echo "--- PATH=$PATH"; echo "--- LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  } > "$OUT_DIR/env.log" 2>&1
  libs=$(ldd "$BUILD/train" 2>/dev/null | awk '$1 ~ /^lib(cudart|cublas|nccl|mpi)\./ { printf "%s=%s;", $1, $3 }')
  IFS=, read -r g_name g_driver g_mem <<< "${gpu_line:-}"
  row env ok $(( $(date +%s) - s )) "${gpu_line:-no GPU ($gpu_why)}; $(nproc) cores" \
    "gpu=$(echo "${g_name:-}" | xargs);driver=$(echo "${g_driver:-}" | xargs);memory=$(echo "${g_mem:-}" | xargs);${libs}"
  if [ "$prebuilt" = 1 ]; then
    s=$(date +%s); missing=""
    for b in "$BUILD/train" "$BUILD/initbench" "$BUILD/calibrate" "$BUILD/gpu_bench" "$BUILD/tests/test_cuda_kernels" \
             "$BUILD/tests/test_cuda_bf16" "$BUILD/tests/test_cuda_attention"; do
      if [ ! -x "$b" ]; then missing="$missing $b(absent)"
      else nf=$(ldd "$b" 2>&1 | awk '/not found/ { printf "%s ", $1 }'); [ -z "$nf" ] || missing="$missing $b(not found: $nf)"; fi
    done
    if [ -z "$missing" ]; then row binaries ok $(( $(date +%s) - s )) "carried, built on $(cat GIT_REVISION 2>/dev/null || echo '?')"
    else row binaries FAIL $(( $(date +%s) - s )) "$missing"; build_ok=0; fi
  fi
  # driver, runtime, cuBLAS and NCCL in one line (a driver too old for the runtime says so, and fails)
  if gate versions; then
    run versions 1 5 "$BUILD/gpu_bench" --versions
    versions_line=$(grep -m1 -E '^(driver|gpu_bench)' "$OUT_DIR/versions.log" | cut -c1-160)
    vf=$(echo "$versions_line" | sed -n 's/^driver CUDA \([^,]*\), runtime CUDA \([^,]*\), cuBLAS \([^,]*\), NCCL \([^ ,:]*\).*/driver_cuda=\1;runtime_cuda=\2;cublas=\3;nccl=\4/p')
    if [ "$rc" -eq 0 ] && [ -z "$vf" ]; then row versions FAIL "$secs" "no version line: $(head -c 100 "$OUT_DIR/versions.log")"
    else verdict versions "$versions_line" "$vf"; fi
  fi
else cur_stage=versions; why_cut env; fi
stage_end

# ---- kernels: the CUDA op tests against the CPU reference
cuda_test() { # NAME BINARY
  gate "$1" || return
  run "$1" 3 60 "$BUILD/tests/$2"
  local nok nfail nskip
  nok=$(grep -c '^ok ' "$OUT_DIR/$1.log" 2>/dev/null); nfail=$(grep -c '^FAIL ' "$OUT_DIR/$1.log" 2>/dev/null); nskip=$(grep -c '^skip ' "$OUT_DIR/$1.log" 2>/dev/null)
  if [ "$rc" -eq 0 ] && [ "${nfail:-0}" -gt 0 ]; then row "$1" FAIL "$secs" "$nfail FAIL lines: $(grep -m1 '^FAIL ' "$OUT_DIR/$1.log" | cut -c1-90)"
  elif [ "$rc" -eq 0 ] && [ "${nskip:-0}" -gt 0 ]; then row "$1" FAIL "$secs" "skipped on a GPU machine: $(grep -m1 '^skip ' "$OUT_DIR/$1.log" | cut -c1-90)"
  elif [ "$rc" -eq 0 ] && [ "${nok:-0}" -eq 0 ]; then row "$1" FAIL "$secs" "ran no check"
  else verdict "$1" "${nok:-0} ok" "checks=${nok:-0}"; fi
}
KSTEPS=(cuda_kernels:test_cuda_kernels cuda_bf16:test_cuda_bf16 cuda_attention:test_cuda_attention)
if stage_begin kernels; then
  for k in "${KSTEPS[@]}"; do cuda_test "${k%%:*}" "${k#*:}"; done
else for k in "${KSTEPS[@]}"; do why_cut "${k%%:*}"; done; fi
stage_end

# ---- speed: the kernels at llama3.2-1b's shapes, attention at hd 64/128 x T 2048/8192, the fused AdamW
opt_ms=""
if stage_begin speed; then
  if gate speed; then
    kt=$(( $(stage_left) - 3 )); [ "$kt" -lt 1 ] && kt=1
    run speed 1 "$(stage_left)" env NO_ENGINE=1 KERNEL_TIMEOUT_S="$kt" BUILD="$BUILD" bash bench/gpu_bench.sh "$OUT_DIR/gpu-bench"
    f=$OUT_DIR/gpu-bench/summary.json
    afw=$(jget "$f" 'r["attention_forward_tflops"]'); abw=$(jget "$f" 'r["attention_backward_tflops"]')
    kmfu=$(jget "$f" 'r["kernel_sum_mfu"]'); kmfuc=$(jget "$f" 'r["kernel_sum_mfu_causal"]')
    f128=$(jget "$f" 'r["attention_forward_hd128_T2048_tflops"]'); b128=$(jget "$f" 'r["attention_backward_hd128_T2048_tflops"]')
    adam=$(jget "$f" 'r["adamw_fused_gb_s"]'); gpk=$(jget "$f" 'r["gemm_peak_tflops"]')
    opt_ms=$(jget "$OUT_DIR/gpu-bench/kernels.json" '[g["ms"] for g in r["step"]["groups"] if g["group"] == "optimizer"][0]')
    # gpu_bench.sh's own timeout of the kernels (KERNEL_TIMEOUT_S) is this stage's limit too
    grep -q 'failed (exit 124)' "$OUT_DIR/speed.log" 2>/dev/null && rc=124
    if [ "$rc" -eq 0 ] && [ -z "$afw" ]; then row speed FAIL "$secs" "exit 0 but no attention figures in gpu-bench/summary.json"
    else verdict speed "attention fwd ${afw:-?} bwd ${abw:-?} TFLOP/s (hd128 T2048: ${f128:-?} / ${b128:-?})  AdamW ${adam:-?} GB/s  GEMM peak ${gpk:-?}  kernel-sum MFU ${kmfu:-?} (causal ${kmfuc:-?})" \
      "attention_forward_tflops=$afw;attention_backward_tflops=$abw;attention_forward_hd128_T2048_tflops=$f128;attention_backward_hd128_T2048_tflops=$b128;adamw_fused_gb_s=$adam;gemm_peak_tflops=$gpk;kernel_sum_mfu=$kmfu;kernel_sum_mfu_causal=$kmfuc;optimizer_ms=$opt_ms"; fi
  fi
else why_cut speed; fi
stage_end

# ---- steps: llama3.2-1b 1x1 bf16 seq 2048 at batch 1, 4, 8, predicted with the shipped machine of this GPU
shipped=""
case "${gpu_line:-}" in *H200*) shipped=h200-141gb;; *H100*) shipped=h100-80gb;; *A100*) shipped=a100-80gb;; esac
BATCHES=(1 4 8)
if stage_begin steps; then
  for i in "${!BATCHES[@]}"; do
    b=${BATCHES[$i]}; name=bench_b$b
    gate "$name" || continue
    # each run may take what is left of the stage less 20 s for each run after it
    cap=$(( $(stage_left) - 20 * (${#BATCHES[@]} - i - 1) ))
    mach=(); [ -n "$shipped" ] && mach=(--machine "$shipped")
    run "$name" 15 "$cap" "$BUILD/train" --model llama3.2-1b --backend cuda --dtype bf16 --seq-len 2048 --batch-size "$b" \
      --steps 8 --data synthetic --warmup-steps-excluded 3 --log-every 1 --mem-budget auto "${mach[@]}" --out "$OUT_DIR/$name.json"
    f=$OUT_DIR/$name.json
    read -r tok mfu mfuc ms share peak dused <<< "$(python3 - "$f" "$opt_ms" 2>/dev/null <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1])); s = r["summary"]; c = r["config"]; m = c["model"]
    fpt = s["flops_per_token"]
    # the same run counted with causal attention (half of the 12 L d T term): core/job/metrics.c
    causal = fpt - 6.0 * m["num_hidden_layers"] * m["hidden_size"] * c["seq_len"]
    mfuc = s["mfu"] * causal / fpt if fpt else None
    opt = float(sys.argv[2]) if sys.argv[2] else None
    share = opt / s["step_ms_median"] if opt and s["step_ms_median"] else None
    dev = (r["memory"].get("device") or {}).get("used_at_end")
    f = lambda v: "-" if v is None else (f"{v:.6g}" if isinstance(v, float) else str(v))
    print(" ".join(f(v) for v in (s["tok_s"], s["mfu"], mfuc, s["step_ms_median"], share, r["memory"]["peak"], dev)))
except Exception:
    print("- - - - - - -")
PY
)"
    nd() { [ "$1" = - ] && echo "" || echo "$1"; }
    if [ "$rc" -eq 0 ] && [ "${tok:--}" = - ]; then row "$name" FAIL "$secs" "exit 0 but the record has no summary"
    else verdict "$name" "batch $b: tok/s ${tok:-?}  MFU ${mfu:-?} (causal ${mfuc:-?})  step ${ms:-?} ms  optimizer ${share:-?} of it  tracked peak ${peak:-?} B  device ${dused:-?} B" \
      "batch=$b;tok_s=$(nd "${tok:--}");mfu=$(nd "${mfu:--}");mfu_causal=$(nd "${mfuc:--}");step_ms=$(nd "${ms:--}");optimizer_share=$(nd "${share:--}");peak_tracked_bytes=$(nd "${peak:--}");device_used_bytes=$(nd "${dused:--}")"; fi
  done
else for b in "${BATCHES[@]}"; do why_cut "bench_b$b"; done; fi
stage_end

# ---- calibrate: this GPU measured for the step-time model: the bf16 step (1 rank) and the meshes'
# fp32 steps (the 8-rank meshes of `small` at global batch 8, every rank on the one GPU)
G=8
if stage_begin calibrate; then
  if gate calibrate; then
    printf '%s\n' '{"name": "gpu-meshes", "world": 8, "meshes": ["1x8", "2x4", "4x2", "8x1"], "model": "small", "seq_len": 128,
      "steps": 6, "lr": 1e-3, "global_batch": '$G', "data": "synthetic", "backend": "cuda", "timeout_s": 60}' > "$OUT_DIR/mesh-spec.json"
    s=$(date +%s)
    run calibrate 10 $(( $(stage_left) / 2 )) "$BUILD/calibrate" --backend cuda --dtype bf16 --quick --model llama3.2-1b --seq-len 2048 \
      --batch-size 4 --out "$OUT_DIR/machine-bf16.json"
    if [ "$rc" -eq 0 ]; then
      cp "$OUT_DIR/calibrate.log" "$OUT_DIR/calibrate-bf16.log"
      run calibrate 10 "$(stage_left)" mpirun --oversubscribe -np 8 "$BUILD/calibrate" --backend cuda --dtype fp32 --quick \
        --spec "$OUT_DIR/mesh-spec.json" --out "$OUT_DIR/machine-fp32.json"
    fi
    secs=$(( $(date +%s) - s ))
    pk=$(jget "$OUT_DIR/machine-bf16.json" 'r["compute"]["peak_tflops"]'); pk32=$(jget "$OUT_DIR/machine-fp32.json" 'r["compute"]["peak_tflops"]')
    if [ "$rc" -eq 0 ] && { [ -z "$pk" ] || [ -z "$pk32" ]; }; then row calibrate FAIL "$secs" "exit 0 but no machine file"
    else verdict calibrate "bf16 GEMM peak ${pk:-?} TFLOP/s, fp32 ${pk32:-?} TFLOP/s (8 ranks)" "bf16_peak_tflops=$pk;fp32_peak_tflops=$pk32"; fi
  fi
else why_cut calibrate; fi
stage_end
m32=()
[ -s "$OUT_DIR/machine-fp32.json" ] && m32=(--machine "$OUT_DIR/machine-fp32.json")

# ---- meshes: the engine end to end (1 rank cpu vs cuda, the 8-rank meshes on the one GPU), host init
MSTEPS=(cpu_vs_cuda mesh_1x1 mesh_1x8 mesh_2x4 mesh_4x2 mesh_8x1 init_1b)
common=(--model small --backend cuda --dtype fp32 --comm mpi --seq-len 128 --steps 6 --lr 1e-3 --data synthetic --log-every 1000 "${m32[@]}")
if stage_begin meshes; then
  if gate cpu_vs_cuda; then
    run cpu_vs_cuda 15 60 env GPU_TEST_ONLY=train_cuda_vs_cpu bash gpukit/run_gpu.sh
    if [ "$rc" -eq 0 ] && ! grep -q '^ok   train_cuda_vs_cpu' "$OUT_DIR/cpu_vs_cuda.log"; then
      row cpu_vs_cuda FAIL "$secs" "no ok line: $(grep -m1 -E '^(skip|FAIL) ' "$OUT_DIR/cpu_vs_cuda.log" | cut -c1-90)"
    else verdict cpu_vs_cuda "$(grep -m1 '^ok   train_cuda_vs_cpu' "$OUT_DIR/cpu_vs_cuda.log" | cut -c6-100)"; fi
  fi
  ref=""
  if gate mesh_1x1; then
    run mesh_1x1 10 40 "$BUILD/train" "${common[@]}" --batch-size $G --out "$OUT_DIR/mesh_1x1.json"
    ref=$(jget "$OUT_DIR/mesh_1x1.json" 'r["summary"]["final_loss"]')
    if [ "$rc" -eq 0 ] && [ -z "$ref" ]; then row mesh_1x1 FAIL "$secs" "exit 0 but no final_loss in the record"
    else verdict mesh_1x1 "final loss $ref" "final_loss=$ref"; fi
  fi
  for tp in 8 4 2 1; do
    dp=$(( 8 / tp )); name="mesh_${dp}x${tp}"
    gate "$name" || continue
    run "$name" 10 60 mpirun --oversubscribe -np 8 "$BUILD/train" "${common[@]}" --tp $tp --batch-size $(( G / dp )) \
      --out "$OUT_DIR/$name.json"
    loss=$(python3 -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["summary"]["final_loss"]))' "$OUT_DIR/$name.json" 2>/dev/null)
    refr=$(python3 -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["summary"]["final_loss"]))' "$OUT_DIR/mesh_1x1.json" 2>/dev/null)
    if [ "$rc" -ne 0 ]; then verdict "$name" ""
    elif [ -z "$refr" ] || [ -z "$loss" ]; then row "$name" FAIL "$secs" "no loss to compare (mesh ${loss:-none}, 1 rank ${refr:-none})"
    elif awk -v a="$loss" -v b="$refr" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; exit !(d < 1e-3) }'; then
      # same global batch, same initial model: the losses agree to float rounding (docs/semantics.md#fsdp)
      row "$name" ok "$secs" "final loss $loss (1 rank: $refr)" "final_loss=$loss;ref_loss=$refr"
    else row "$name" FAIL "$secs" "final loss $loss, 1 rank $refr (relative difference over 1e-3)"; fi
  done
  if gate init_1b; then
    run init_1b 10 40 "$BUILD/initbench" --model llama3.2-1b
    read -r ie iw ic ins <<< "$(grep -v '^#' "$OUT_DIR/init_1b.log" 2>/dev/null | tail -n 1)"
    ith=$(sed -n 's/.*, \([0-9]*\) threads$/\1/p' "$OUT_DIR/init_1b.log" 2>/dev/null)
    if [ "$rc" -eq 0 ] && [ -z "${iw:-}" ]; then row init_1b FAIL "$secs" "no timing line"
    else verdict init_1b "${ie:-?} elements in ${iw:-?} s wall, ${ic:-?} s CPU, ${ith:-?} threads" \
      "elements=${ie:-};wall_s=${iw:-};cpu_s=${ic:-};cpu_ns_per_element=${ins:-};threads=${ith:-}"; fi
  fi
else for n in "${MSTEPS[@]}"; do why_cut "$n"; done; fi
stage_end

# ---- from the records: plan = measured on CUDA, predicted against measured step time
cur_stage=report; stage_i=-1
REC_RUNS=(bench_b1 bench_b4 bench_b8 mesh_1x1)
plan_check() {
  local recs=() n s pyrc figs
  s=$(date +%s)
  : > "$OUT_DIR/plan.log"
  for n in "${REC_RUNS[@]}"; do # a run not started (cut, out of time, no GPU) has no record to check
    if grep -q "^$n"$'\t'"skip"$'\t' "$OUT_DIR/steps.tsv"; then continue; fi
    grep -q "^$n"$'\t' "$OUT_DIR/steps.tsv" || continue
    if [ -f "$OUT_DIR/$n.json" ]; then recs+=("$OUT_DIR/$n.json"); else echo "missing $n.json (the run failed)" >> "$OUT_DIR/plan.log"; fi
  done
  if [ "${#recs[@]}" -eq 0 ] && ! grep -q '^missing' "$OUT_DIR/plan.log"; then
    row plan skip 0 "not run: no run record to check (runs cut or out of time)"; return
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
    if n.startswith("bench_"):
        d = m.get("device") or {}
        if any(k not in d for k in ("used_at_end", "runtime_overhead")) or not m.get("budget"):
            bad.append(f"{n}: record lacks memory.budget or memory.device.{{used_at_end,runtime_overhead}} (device: {d})")
        elif d["used_at_end"] > m["budget"] + d["runtime_overhead"]:
            bad.append(f"{n}: device in use {d['used_at_end']} B > budget {m['budget']} + runtime overhead {d['runtime_overhead']} B")
        else:
            figs += [f"{n}_device_used_bytes={d['used_at_end']}", f"{n}_budget_bytes={m['budget']}", f"{n}_runtime_overhead_bytes={d['runtime_overhead']}"]
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
if gate prediction; then
  s=$(date +%s); recs=()
  for n in bench_b1 bench_b4 bench_b8 mesh_1x1 mesh_1x8 mesh_2x4 mesh_4x2 mesh_8x1; do [ -f "$OUT_DIR/$n.json" ] && recs+=("$OUT_DIR/$n.json"); done
  if [ "${#recs[@]}" -eq 0 ]; then
    if grep -qE $'^(bench_b1|mesh_1x1)\tskip\t' "$OUT_DIR/steps.tsv"; then row prediction skip 0 "not run: no run record (runs cut or out of time)"
    else row prediction FAIL 0 "no run record (the runs failed)"; fi
  else
    python3 - "${recs[@]}" > "$OUT_DIR/prediction.log" 2>&1 <<'PY'
import json, os, sys
figs, notes, bad = [], [], []
for p in sys.argv[1:]:
    r = json.load(open(p)); n = os.path.basename(p)[:-5]; s = r.get("summary", {})
    pr, me = s.get("predicted_step_ms"), s.get("step_ms_median")
    if r.get("status") == "ok" and not pr and s.get("prediction_machine"):
        bad.append(f"{n}: no summary.predicted_step_ms ({s.get('prediction_note', 'no note')})")
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
finished=1
emit
cat "$OUT_DIR/summary.txt"
exit $failed
