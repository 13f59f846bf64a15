#!/usr/bin/env bash
# tests/t_plan_backend.sh — the memory plan follows the compute backend: on CPU the attention scratch of
# 2·T² floats per layer call is planned (and allocated), on CUDA it is not (its flash backward takes
# attention_flash_ws_floats: D per query row, and with GQA per-head fp32 dK, dV — O(T), not O(T²)).
# At T = 1024 the scratch alone is 8 MiB, more than the whole rest of the tiny model's
# workspace, so: CPU workspace peak >= 8 MiB > CUDA workspace peak. plan = measured on each backend
# is checked where the runs are (t_memory on CPU, t_cuda_engine_emu on the emulated CUDA backend).
source "$(dirname "$0")/lib.sh"
T=1024; scratch=$((2 * T * T * 4))
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
for be in cpu cuda; do
  "$BUILD/train" --plan --world 1 --model tiny --seq-len $T --batch-size 1 --backend $be --dtype fp32 \
      --out "$dir/$be.json" > "$dir/$be.log" 2>&1 || { fail plan_backend_$be "exit $?: $(tail -2 "$dir/$be.log")"; exit 1; }
done
ws() { grep -o '"workspace": [0-9]*' "$1" | head -1 | sed 's/.*: //'; } # by_category: the workspace peak
cpu=$(ws "$dir/cpu.json"); cuda=$(ws "$dir/cuda.json")
[ -n "$cpu" ] && [ "$cpu" -ge "$scratch" ] && ok plan_backend_cpu_attention_scratch \
  || fail plan_backend_cpu_attention_scratch "CPU workspace peak ${cpu:-?} < 2·T²·4 = $scratch"
[ -n "$cuda" ] && [ "$cuda" -lt "$scratch" ] && ok plan_backend_cuda_no_attention_scratch \
  || fail plan_backend_cuda_no_attention_scratch "CUDA workspace peak ${cuda:-?} >= 2·T²·4 = $scratch: the scratch is planned"
