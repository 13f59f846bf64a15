#!/usr/bin/env bash
# bench/gpu_bench.sh — the GPU speed report: per-kernel times and the llama3.2-1b 1x1 step, as a table and JSON.
#
# What it is: a driver around build/gpu_bench (per-kernel CUDA-event times of the bf16 ops at the
# model's shapes: GEMMs against cublasGemmEx alone, attention forward/backward TFLOP/s, also at head
# dims 64 and 128 and T 2048 and 8192, the CE, the fused AdamW's bandwidth against the datasheet's
# and a measured copy's, the measured bf16 GEMM peak, and the step those kernel times add up to) and
# one engine run, build/train 1x1 bf16 on synthetic data, whose median step time and MFU stand next
# to the kernel sum (the difference is launch gaps, allocation and everything the kernel sum leaves
# out). MFU in two conventions (torchtitan's 6N + 12·L·d·T, and causal attention counted as half)
# against two peaks (datasheet; the measured GEMM peak), for the kernel sum and the engine's step.
# Writes into OUTDIR (default build/gpu-bench):
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
case "${1:-}" in -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0;; esac
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
# a field of the kernel record named NAME in kernels.json
kfield() { grep -o "\"name\": \"$1\"[^}]*" "$OUT/kernels.json" 2>/dev/null | grep -o "\"$2\": [-0-9.eE+]*" | sed 's/.*: //'; }
K=$OUT/kernels.json
ksum=$(num kernel_sum_ms "$K"); kmfu=$(num mfu "$K"); kmfuc=$(num mfu_causal "$K")
kmfug=$(num mfu_gemm_peak "$K"); kmfucg=$(num mfu_causal_gemm_peak "$K")
peak=$(num peak_tflops "$K"); gpeak=$(num gemm_peak_tflops "$K"); pbw=$(num peak_gb_s "$K"); cbw=$(num copy_gb_s "$K")
fpt=$(num flops_per_token "$K"); fptc=$(num flops_per_token_causal "$K")
afw=$(kfield "attention forward" tflops); abw=$(kfield "attention backward" tflops)
abwf=$(kfield "attention backward, dQ folded (--deterministic off)" tflops)
adam=$(kfield "adamw fused (bf16 copy, zero g)" gb_s)
step=""; mfu=""; toks=""
if [ -n "$rec" ] && [ -f "$rec" ]; then step=$(num step_ms_median "$rec"); mfu=$(num mfu "$rec"); toks=$(num tok_s "$rec"); fi
# x / y (or empty when either is missing or y is not positive)
ratio() { awk -v x="$1" -v y="$2" 'BEGIN { if (x != "" && y != "" && y > 0 && x >= 0) printf "%.4g", x / y }'; }
# the engine's MFU in both conventions against both peaks: FLOPs/token x tok/s (1 rank) / peak
emfu_c=$(ratio "$(awk -v a="$fptc" -v b="$toks" 'BEGIN { if (a != "" && b != "") print a * b }')" "$(awk -v p="$peak" 'BEGIN { if (p != "") print p * 1e12 }')")
emfu_g=$(ratio "$(awk -v a="$fpt" -v b="$toks" 'BEGIN { if (a != "" && b != "") print a * b }')" "$(awk -v p="$gpeak" 'BEGIN { if (p != "") print p * 1e12 }')")
emfu_cg=$(ratio "$(awk -v a="$fptc" -v b="$toks" 'BEGIN { if (a != "" && b != "") print a * b }')" "$(awk -v p="$gpeak" 'BEGIN { if (p != "") print p * 1e12 }')")
adam_pk=$(ratio "$adam" "$pbw"); adam_cp=$(ratio "$adam" "$cbw")
sweep=(); sweep_json=""
for hd in 64 128; do for t in 2048 8192; do for dir in forward backward; do
  v=$(kfield "attention sweep $dir hd$hd T$t" tflops)
  sweep+=("attention $dir hd$hd T$t TFLOP/s" "${v:-n/a}")
  sweep_json="$sweep_json\"attention_${dir}_hd${hd}_T${t}_tflops\": ${v:-null}, "
done
  v=$(kfield "attention sweep backward dQ folded hd$hd T$t" tflops)
  sweep+=("attention backward dQ folded hd$hd T$t TFLOP/s" "${v:-n/a}")
  sweep_json="$sweep_json\"attention_backward_folded_hd${hd}_T${t}_tflops\": ${v:-null}, "
done; done
{
  printf '# %-44s %14s\n' "figure" "value"
  printf '  %-44s %14s\n' "attention forward TFLOP/s (model shape)" "${afw:-n/a}" \
    "attention backward TFLOP/s (model shape)" "${abw:-n/a}" \
    "attention backward dQ folded TFLOP/s (model shape)" "${abwf:-n/a}" "${sweep[@]}" \
    "fused AdamW GB/s" "${adam:-n/a}" "fused AdamW / datasheet bandwidth" "${adam_pk:-n/a}" \
    "fused AdamW / measured copy bandwidth" "${adam_cp:-n/a}" \
    "datasheet bf16 TFLOP/s" "${peak:-n/a}" "measured GEMM peak TFLOP/s" "${gpeak:-n/a}" \
    "kernel-sum step ms" "${ksum:-n/a}" "kernel-sum MFU (6N+12LdT, datasheet)" "${kmfu:-n/a}" \
    "kernel-sum MFU (causal half, datasheet)" "${kmfuc:-n/a}" "kernel-sum MFU (6N+12LdT, GEMM peak)" "${kmfug:-n/a}" \
    "kernel-sum MFU (causal half, GEMM peak)" "${kmfucg:-n/a}" \
    "engine step ms (median)" "${step:-n/a}" "engine tok/s" "${toks:-n/a}" \
    "engine MFU (6N+12LdT, datasheet)" "${mfu:-n/a}" "engine MFU (causal half, datasheet)" "${emfu_c:-n/a}" \
    "engine MFU (6N+12LdT, GEMM peak)" "${emfu_g:-n/a}" "engine MFU (causal half, GEMM peak)" "${emfu_cg:-n/a}"
} | tee "$OUT/summary.txt"
j() { [ -n "$1" ] && echo "$1" || echo null; }
printf '{"model": "%s", "seq_len": %s, "batch_size": %s, "attention_forward_tflops": %s, "attention_backward_tflops": %s, %s"adamw_fused_gb_s": %s, "adamw_fused_of_peak_bw": %s, "adamw_fused_of_copy_bw": %s, "peak_gb_s": %s, "copy_gb_s": %s, "peak_tflops": %s, "gemm_peak_tflops": %s, "kernel_sum_step_ms": %s, "kernel_sum_mfu": %s, "kernel_sum_mfu_causal": %s, "kernel_sum_mfu_gemm_peak": %s, "kernel_sum_mfu_causal_gemm_peak": %s, "engine_step_ms": %s, "engine_tok_s": %s, "engine_mfu": %s, "engine_mfu_causal": %s, "engine_mfu_gemm_peak": %s, "engine_mfu_causal_gemm_peak": %s}\n' \
  "$MODEL" "$T" "$B" "$(j "$afw")" "$(j "$abw")" "$sweep_json" "$(j "$adam")" "$(j "$adam_pk")" "$(j "$adam_cp")" "$(j "$pbw")" "$(j "$cbw")" "$(j "$peak")" \
  "$(j "$gpeak")" "$(j "$ksum")" "$(j "$kmfu")" "$(j "$kmfuc")" "$(j "$kmfug")" "$(j "$kmfucg")" "$(j "$step")" \
  "$(j "$toks")" "$(j "$mfu")" "$(j "$emfu_c")" "$(j "$emfu_g")" "$(j "$emfu_cg")" > "$OUT/summary.json"
exit "$rc"
