#!/usr/bin/env bash
# bench/gpu_bench.sh — the GPU speed report: per-kernel times and the llama3.2-1b 1x1 step, as a table and JSON.
#
# What it is: a driver around build/gpu_bench (per-kernel CUDA-event times of the bf16 ops at the
# model's shapes: GEMMs against cublasGemmEx alone, attention forward/backward TFLOP/s, the CE, AdamW,
# and the step those kernel times add up to) and one engine run, build/train 1x1 bf16 on synthetic
# data, whose median step time and MFU stand next to the kernel sum (the difference is launch gaps,
# allocation and everything the kernel sum leaves out). Writes into OUTDIR (default build/gpu-bench):
#   kernels.txt, kernels.json  build/gpu_bench's table and records
#   train.json                 the engine's run record (or the one given as ENGINE_RECORD)
#   summary.txt, summary.json  the headline figures
# What it is not: a test: nothing is asserted (targets are read off the table, never enforced).
# Needs a GPU and a CUDA build (make). Exit 1 if a program failed, 2 on bad usage.
# Usage: bench/gpu_bench.sh [OUTDIR]
#   env: BUILD=build MODEL=llama3.2-1b T=2048 B=1 STEPS=8 REPS=10
#        ENGINE_RECORD=FILE  use an existing run record of the same configuration instead of running train
#        NO_ENGINE=1         kernels only;  SMALL=1  toy shapes (build/gpu_bench --small), no engine run
#        KERNEL_TIMEOUT_S=240 TRAIN_TIMEOUT_S=180
set -u
cd "$(dirname "$0")/.."
case "${1:-}" in -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0;; esac
[ $# -le 1 ] || { echo "gpu_bench.sh: usage: bench/gpu_bench.sh [OUTDIR]" >&2; exit 2; }
BUILD=${BUILD:-build} MODEL=${MODEL:-llama3.2-1b} T=${T:-2048} B=${B:-1} STEPS=${STEPS:-8} REPS=${REPS:-10}
OUT=${1:-$BUILD/gpu-bench}
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
for f in "$BUILD/gpu_bench" "$BUILD/train"; do
  [ -x "$f" ] || { echo "gpu_bench.sh: $f missing (run make)" >&2; exit 2; }
done
rc=0
if [ "${SMALL:-0}" = 1 ]; then kargs=(--small); NO_ENGINE=1
else kargs=(--model "$MODEL" --seq-len "$T" --batch-size "$B" --reps "$REPS"); fi
timeout "${KERNEL_TIMEOUT_S:-240}" "$BUILD/gpu_bench" "${kargs[@]}" --json "$OUT/kernels.json" > "$OUT/kernels.txt" 2>&1 \
  || { echo "gpu_bench.sh: build/gpu_bench failed (exit $?): $(tail -2 "$OUT/kernels.txt")" >&2; rc=1; }
cat "$OUT/kernels.txt"

rec=""
if [ -n "${ENGINE_RECORD:-}" ]; then rec=$ENGINE_RECORD
elif [ "${NO_ENGINE:-0}" != 1 ]; then
  timeout "${TRAIN_TIMEOUT_S:-180}" "$BUILD/train" --model "$MODEL" --backend cuda --dtype bf16 --seq-len "$T" \
      --batch-size "$B" --steps "$STEPS" --warmup-steps-excluded 3 --data synthetic --out "$OUT/train.json" \
      > "$OUT/train.log" 2>&1 && rec=$OUT/train.json \
    || { echo "gpu_bench.sh: build/train failed (exit $?): $(tail -2 "$OUT/train.log")" >&2; rc=1; }
fi
# a number from a one-line-per-field or compact JSON record (jansson output): first "key": value
num() { grep -o "\"$1\": *[-0-9.eE+]*" "$2" 2>/dev/null | head -1 | sed 's/.*: *//'; }
ksum=$(num kernel_sum_ms "$OUT/kernels.json"); kmfu=$(num mfu "$OUT/kernels.json")
afw=$(grep -o '"name": "attention forward"[^}]*' "$OUT/kernels.json" 2>/dev/null | grep -o '"tflops": [-0-9.eE+]*' | sed 's/.*: //')
abw=$(grep -o '"name": "attention backward"[^}]*' "$OUT/kernels.json" 2>/dev/null | grep -o '"tflops": [-0-9.eE+]*' | sed 's/.*: //')
step=""; mfu=""; toks=""
if [ -n "$rec" ] && [ -f "$rec" ]; then step=$(num step_ms_median "$rec"); mfu=$(num mfu "$rec"); toks=$(num tok_s "$rec"); fi
{
  printf '# %-34s %14s\n' "figure" "value"
  printf '  %-34s %14s\n' "attention forward TFLOP/s" "${afw:-n/a}" "attention backward TFLOP/s" "${abw:-n/a}" \
    "kernel-sum step ms" "${ksum:-n/a}" "kernel-sum MFU" "${kmfu:-n/a}" \
    "engine step ms (median)" "${step:-n/a}" "engine tok/s" "${toks:-n/a}" "engine MFU" "${mfu:-n/a}"
} | tee "$OUT/summary.txt"
j() { [ -n "$1" ] && echo "$1" || echo null; }
printf '{"model": "%s", "seq_len": %s, "batch_size": %s, "attention_forward_tflops": %s, "attention_backward_tflops": %s, "kernel_sum_step_ms": %s, "kernel_sum_mfu": %s, "engine_step_ms": %s, "engine_tok_s": %s, "engine_mfu": %s}\n' \
  "$MODEL" "$T" "$B" "$(j "$afw")" "$(j "$abw")" "$(j "$ksum")" "$(j "$kmfu")" "$(j "$step")" "$(j "$toks")" "$(j "$mfu")" \
  > "$OUT/summary.json"
exit "$rc"
