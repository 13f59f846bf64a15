#!/usr/bin/env bash
# tests/t_mem_auto.sh — `--mem-budget auto` and `--gpu NAME` end to end.
#   plan: `--plan --gpu NAME --batch-size max` plans against the table's usable − overhead − reserve
#         (core/engine/gpus.c) and gives the same batch as `--mem-budget` of that many bytes; bad
#         combinations are one line and exit 2.
#   run:  build/train --backend cuda --mem-budget auto through the host emulator (kernels/cuda compiled
#         against tests/emu/cuda_emu.cuh, whose device reports 1 GiB free of 2 GiB): the budget is
#         free − reserve exactly, the record's memory.device has total, runtime_overhead, reserve and
#         budget_auto, the first progress line shows them, and a reserve that takes everything is exit 2.
# What the emulator cannot show: what a real device has free after a real context, cuBLAS and NCCL.
source "$(dirname "$0")/lib.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
GiB=$((1024 * 1024 * 1024))

# ---- plan against a named device
usable_minus() { # NAME RESERVE_BYTES -> budget bytes from the plan record
  "$BUILD/train" --plan --world 8 --tp 2 --model llama3.1-8b --seq-len 1024 --dtype bf16 --batch-size max --gpu "$1" \
    ${2:+--mem-reserve "$2"} --out "$T/p.json" > "$T/p.log" 2>&1 || return 1
  grep -o '"mem_budget": *[0-9]*' "$T/p.json" | sed 's/.*: *//'
}
b_h100=$(usable_minus h100-80gb) || { fail mem_auto_plan_gpu "$(tail -n 2 "$T/p.log")"; }
batch_h100=$(grep -o '"batch_size": *[0-9]*' "$T/p.json" | sed 's/.*: *//')
if [ -n "${b_h100:-}" ] && [ "$b_h100" -gt $((75 * GiB)) ] && [ "$b_h100" -lt $((79 * GiB)) ]; then ok "mem_auto_plan_gpu_h100_budget ($b_h100 bytes, batch $batch_h100)"
else fail mem_auto_plan_gpu_h100_budget "budget ${b_h100:-none}"; fi
"$BUILD/train" --plan --world 8 --tp 2 --model llama3.1-8b --seq-len 1024 --dtype bf16 --batch-size max --mem-budget "${b_h100:-1}" \
  --out "$T/q.json" > /dev/null 2>&1
batch_same=$(grep -o '"batch_size": *[0-9]*' "$T/q.json" | sed 's/.*: *//')
check mem_auto_plan_gpu_equals_that_many_bytes [ "${batch_h100:-x}" = "${batch_same:-y}" ]
b_r=$(usable_minus h100-80gb 3GiB)
check mem_auto_plan_reserve_lowers_budget_by_2GiB [ $(( ${b_h100:-0} - ${b_r:-0} )) -eq $((2 * GiB)) ]
b_a40=$(usable_minus a100-40gb)
check mem_auto_plan_a100_40gb_holds_less [ "${b_a40:-999999999999}" -lt "${b_h100:-0}" ]
usable_minus h100-80gb > /dev/null
check mem_auto_plan_prints_the_device grep -q '^# --gpu h100-80gb (NVIDIA H100 80GB HBM3): 79.19 GiB' "$T/p.log"
expect_exit mem_auto_plan_unknown_gpu 2 "--gpu 'v100' is not a known device" -- "$BUILD/train" --plan --gpu v100
expect_exit mem_auto_plan_auto_needs_gpu 2 "needs --gpu NAME" -- "$BUILD/train" --plan --mem-budget auto
expect_exit mem_auto_plan_two_budgets 2 "two budgets" -- "$BUILD/train" --plan --gpu h100-80gb --mem-budget 80GB
expect_exit mem_auto_cpu_run_auto_refused 2 "needs --backend cuda" -- "$BUILD/train" --mem-budget auto --steps 1
expect_exit mem_auto_reserve_alone_refused 2 "mem-reserve applies only" -- "$BUILD/train" --mem-budget 1GiB --mem-reserve 1GiB

# ---- a CUDA run through the emulator
case "$BUILD" in *san*) skip mem_auto_emu "runs in the plain suite (not a sanitizer build)"; exit 0;; esac
command -v g++ >/dev/null || { skip mem_auto_emu "no g++"; exit 0; }
O="$BUILD/emu-engine"   # build/train for the emulator, shared with t_cuda_engine_emu.sh (tests/emu/build_train.sh)
bash tests/emu/build_train.sh "$O" || { fail mem_auto_emu_build "$(head -5 "$O/build.log" | tr '\n' ' ')"; exit 1; }
cat > "$T/m.json" <<'JSON'
{"vocab_size": 64, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
 "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64}
JSON
A=(--model "$T/m.json" --seq-len 8 --batch-size 1 --steps 1 --data synthetic --backend cuda --dtype fp32 --log-every 1)
if timeout 600 "$O/train" "${A[@]}" --mem-budget auto --mem-reserve 256MiB --out "$T/r.json" > "$T/r.log" 2>&1; then
  /usr/bin/python3 - "$T/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); m = r["memory"]; d = m.get("device") or {}
G = 1 << 30
want = {"total": 2 * G, "free_after_setup": G, "runtime_overhead": G, "reserve": 256 << 20, "budget_auto": True}
bad = {k: (d.get(k), v) for k, v in want.items() if d.get(k) != v}
print("ok   mem_auto_emu_record_device" if not bad else f"FAIL mem_auto_emu_record_device: {bad}")
print("ok   mem_auto_emu_budget_free_minus_reserve" if m["budget"] == G - (256 << 20) else f"FAIL mem_auto_emu_budget_free_minus_reserve: {m['budget']}")
print("ok   mem_auto_emu_plan_equals_measured" if m["planned"]["peak"] == m["peak"] else f"FAIL mem_auto_emu_plan_equals_measured: {m['planned']['peak']} vs {m['peak']}")
PY
  if grep -m1 'step 1/' "$T/r.log" | grep -q 'device 2.00 GiB.*runtime 1.00 GiB.*reserve 256.00 MiB.*budget 768.00 MiB (auto)'; then
    ok mem_auto_emu_first_progress_line
  else fail mem_auto_emu_first_progress_line "$(grep -m1 'step 1/' "$T/r.log")"; fi
else
  fail mem_auto_emu_run "$(tail -n 3 "$T/r.log" | tr '\n' ' ')"
fi
expect_exit mem_auto_emu_reserve_takes_all 2 "not more than --mem-reserve" -- "$O/train" "${A[@]}" --mem-budget auto
