#!/usr/bin/env bash
# gpukit/run_gpu.sh — the GPU tests (`make test-gpu`): builds nothing, runs what `make` built.
#  1. build/tests/test_cuda_kernels and build/tests/test_cuda_bf16: every ops_cuda (fp32) and
#     ops_cuda_bf16 (bf16, the CUDA default) op against ops_cpu (their own ok/FAIL/skip lines).
#  2. build/train, 1 rank, fp32: the same short run with --backend cpu and --backend cuda must give the
#     same loss at every step (relative 1e-3: only summation order differs), and a cuda gradient norm.
# Without a GPU (or without CUDA in the build) the checks print skip lines and the script passes.
# Prints ok/FAIL/skip lines as tests/lib.sh and the closing line "N passed, N failed, N skipped";
# exits 1 if anything failed. Environment: BUILD (default build), GPU_TEST_STEPS (default 8),
# GPU_TEST_ONLY=train_cuda_vs_cpu runs only check 2 (gpukit/gpu_check.sh runs the op tests itself and
# calls this only on a machine where it found a GPU).
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
steps=${GPU_TEST_STEPS:-8}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log=$tmp/all.log
: > "$log"
say() { echo "$@" | tee -a "$log"; }

# ---- 1. kernels, fp32 and bf16
gpu=0
if [ "${GPU_TEST_ONLY:-}" = train_cuda_vs_cpu ]; then gpu=1
else
  for name in cuda_kernels cuda_bf16; do
    t=$BUILD/tests/test_$name
    if [ ! -x "$t" ]; then say "$(fail "$name" "$t not built (run make first)")"; continue; fi
    timeout 600 "$t" > "$tmp/$name.log" 2>&1; rc=$?
    grep -E '^(ok|FAIL|skip) ' "$tmp/$name.log" | tee -a "$log"
    if [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' "$tmp/$name.log"; then
      say "$(fail "$name" "exited $rc without a FAIL line: $(tail -c 300 "$tmp/$name.log")")"
    fi
    grep -q '^ok ' "$tmp/$name.log" && gpu=1
  done
fi

# ---- 2. engine: cpu vs cuda, 1 rank, fp32
losses() { grep -o '"loss": *[-0-9.eE+]*' "$1" | sed 's/.*: *//'; }
if [ "$gpu" -ne 1 ]; then
  say "$(skip train_cuda_vs_cpu "no GPU (or no CUDA in the build)")"
elif [ ! -x "$BUILD/train" ]; then
  say "$(fail train_cuda_vs_cpu "$BUILD/train not built")"
else
  data=$BUILD/data/kjv/train.bin
  [ -f "$data" ] || data=synthetic
  args=(--model tiny --seq-len 64 --batch-size 4 --steps "$steps" --lr 1e-3 --data "$data" --dtype fp32 --log-every 1000)
  timeout 300 "$BUILD/train" "${args[@]}" --backend cpu --out "$tmp/cpu.json" > "$tmp/cpu.log" 2>&1; rc_cpu=$?
  timeout 300 "$BUILD/train" "${args[@]}" --backend cuda --out "$tmp/cuda.json" > "$tmp/cuda.log" 2>&1; rc_cuda=$?
  if [ "$rc_cpu" -ne 0 ] || [ "$rc_cuda" -ne 0 ]; then
    say "$(fail train_cuda_vs_cpu "exit cpu=$rc_cpu cuda=$rc_cuda: $(tail -n 2 "$tmp/cuda.log" | tr '\n' ' ')")"
  else
    paste <(losses "$tmp/cpu.json") <(losses "$tmp/cuda.json") > "$tmp/pairs"
    n=$(wc -l < "$tmp/pairs")
    # the loss at step 1 depends only on the forward pass; later steps also on the backward and AdamW
    verdict=$(awk -v want="$steps" '
      { c=$1; g=$2; if (g == "" || g != g + 0) { bad = bad " step " NR ": no cuda loss"; next }
        e = (c - g) / (c < 0 ? -c : c); if (e < 0) e = -e; if (e > worst) worst = e
        if (e > 1e-3) bad = bad sprintf(" step %d: cpu %s cuda %s;", NR, c, g) }
      END { if (NR != want) bad = bad sprintf(" %d steps recorded, want %d;", NR, want)
            if (bad != "") print "BAD" bad; else printf "max rel diff %.2e\n", worst }' "$tmp/pairs")
    if [[ "$verdict" == BAD* ]]; then say "$(fail train_cuda_vs_cpu "${verdict#BAD}")"
    else say "$(ok train_cuda_vs_cpu) ($n steps, $verdict)"; fi
  fi
fi

p=$(grep -c '^ok ' "$log"); f=$(grep -c '^FAIL ' "$log"); s=$(grep -c '^skip ' "$log")
echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
