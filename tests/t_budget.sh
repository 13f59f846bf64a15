#!/usr/bin/env bash
# tests/t_budget.sh — the budget boundary end to end (docs/memory.md): a run whose --mem-budget is exactly
# its planned peak (in bytes) trains and exits 0 with status ok and a measured peak equal to the
# budget; one byte less stops with exit 3, one "out of memory budget" line and an oom record. On 1x1
# and on the 2x2 mesh (FSDP and TP). The allocator's own boundary, and its enforcement of the budget
# on real allocations (not only through the pre-run plan), are unit-tested in tests/test_mem.c.
source "$(dirname "$0")/lib.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
TR="$BUILD/train"
COMMON=(--model tiny --seq-len 64 --steps 1 --log-every 100 --data "$BUILD/data/kjv/train.bin")
boundary() { # NAME DP TP B
  local name=$1 dp=$2 tp=$3 b=$4 w=$(($2 * $3))
  must "budget_${name}_plan" "$TR" --plan --world $w --tp $tp --batch-size $b "${COMMON[@]}" --out "$T/$name.plan.json" \
    >/dev/null 2>&1 || return
  local peak; peak=$(command /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak'])" "$T/$name.plan.json")
  local run=("$TR"); [ $w -gt 1 ] && run=("${MPIRUN[@]}" -np $w "$TR")
  timeout 300 "${run[@]}" --tp $tp --batch-size $b "${COMMON[@]}" --mem-budget "${peak}B" --out "$T/$name.fit.json" \
    >"$T/$name.fit.log" 2>&1; local rc=$?
  /usr/bin/python3 - "budget_${name}_at_peak_fits" "$T/$name.fit.json" "$rc" "$peak" <<'PY'
import json, sys
n, rc, peak = sys.argv[1], int(sys.argv[3]), int(sys.argv[4])
r = json.load(open(sys.argv[2]))
ok = rc == 0 and r["status"] == "ok" and r["memory"]["peak"] == peak and r["memory"]["budget"] == peak
print(f"ok   {n}  ({peak} bytes)" if ok else f"FAIL {n}: exit {rc}, status {r['status']}, peak {r['memory']['peak']} budget {r['memory'].get('budget')} plan {peak}")
PY
  timeout 300 "${run[@]}" --tp $tp --batch-size $b "${COMMON[@]}" --mem-budget "$((peak - 1))B" --out "$T/$name.oom.json" \
    >"$T/$name.oom.log" 2>&1; rc=$?
  local lines; lines=$(grep -c "out of memory budget" "$T/$name.oom.log")
  /usr/bin/python3 - "budget_${name}_one_byte_less_oom" "$T/$name.oom.json" "$rc" "$lines" <<'PY'
import json, sys
n, rc, lines = sys.argv[1], int(sys.argv[3]), int(sys.argv[4])
r = json.load(open(sys.argv[2]))
ok = rc == 3 and r["status"] == "oom" and lines == 1
print(f"ok   {n}" if ok else f"FAIL {n}: exit {rc}, status {r['status']}, {lines} oom lines")
PY
}
boundary 1x1 1 1 2
boundary 2x2 2 2 2
