#!/usr/bin/env bash
# tests/t_memory.sh — docs/memory.md: the plan equals the measured tracked peak byte for byte (total and every
# category, max over ranks) for every 8-rank mesh and 1x1 across batch sizes, sequence parallel on/off
# checkpointing on/off and --sp-activations local/gathered; local's extra all-gather bytes in the comm
# counters; the budget stops a run cleanly (exit 3, oom record); the planned max batch
# runs and max+1 stops with oom; --plan of Llama 3.1 8B for every mesh; bad sizes.
source "$(dirname "$0")/lib.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
TR="$BUILD/train"
COMMON=(--model tiny --seq-len 64 --steps 2 --log-every 100)
# The sanitizer build runs one plan-against-run case of each C path, not every mesh: one rank, dp = 1
# with TP (SP off, checkpointing), FSDP with TP (gathered, checkpointing), prefetch off, tp = 1, HSDP
# with S > 1, S = 1 and accumulation; the other eleven repeat those paths with other sizes and options
# already combined here, and their byte counts are the plain suite's (CI runs both). Max batch: the
# HSDP mesh only (the same search and budget stop as the others).
SAN_CASES="1x1_b1 1x8_b3_nosp_ckpt 2x4_b3_gathered_ckpt 4x2_b4_noprefetch 8x1_b2 2x2x2_b2 2x1x4_b2_nosp
  2x2x2_b1_accum_last max_2x2x2"
in_san() { [ "$BUILD" != build-san ] || [[ " ${SAN_CASES//$'\n'/ } " == *" $1 "* ]]; }   # NAME: run in this build?

plan_vs_run() { # NAME DP TP B EXTRA...
  local name=$1 dp=$2 tp=$3 b=$4; shift 4
  in_san "$name" || return 0
  local w=$((dp * tp))
  "$TR" --plan --world $w --tp $tp --batch-size $b "${COMMON[@]}" "$@" --out "$T/$name.plan.json" >/dev/null 2>"$T/$name.plan.err" \
    || { fail "mem_plan_$name" "plan failed: $(cat "$T/$name.plan.err")"; return; }
  "${MPIRUN[@]}" -np $w "$TR" --tp $tp --batch-size $b "${COMMON[@]}" "$@" --out "$T/$name.run.json" >"$T/$name.log" 2>&1 \
    || { fail "mem_plan_$name" "run failed: $(tail -3 "$T/$name.log" | tr '\n' ' ')"; return; }
  /usr/bin/python3 - "$name" "$T/$name.plan.json" "$T/$name.run.json" <<'PY'
import json, sys
name, p, r = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
m = r["memory"]
if p["peak"] == m["peak"] and p["by_category"] == m["by_category"] and p["at_peak"] == m["at_peak"] and m["peak"] > 0:
    print(f"ok   mem_plan_equals_measured_{name}  ({m['peak']} bytes)")
else:
    print(f"FAIL mem_plan_equals_measured_{name}: planned {p['peak']} {p['by_category']} measured {m['peak']} {m['by_category']}")
PY
}
plan_vs_run 1x1_b1 1 1 1
plan_vs_run 1x1_b5_ckpt 1 1 5 --checkpoint-activations
plan_vs_run 1x8_b2 1 8 2
plan_vs_run 1x8_b3_nosp_ckpt 1 8 3 --no-sequence-parallel --checkpoint-activations
plan_vs_run 2x4_b2 2 4 2
plan_vs_run 2x4_b3_nosp 2 4 3 --no-sequence-parallel
plan_vs_run 4x2_b1_ckpt 4 2 1 --checkpoint-activations
plan_vs_run 4x2_b4_noprefetch 4 2 4 --no-prefetch
plan_vs_run 8x1_b2 8 1 2
# --sp-activations: the runs above use the default (local); gathered saves the all-gathered inputs
plan_vs_run 1x8_b2_gathered 1 8 2 --sp-activations gathered
plan_vs_run 2x4_b3_gathered_ckpt 2 4 3 --sp-activations gathered --checkpoint-activations
plan_vs_run 2x4_b2_ckpt 2 4 2 --checkpoint-activations
plan_vs_run 4x2_b2_gathered 4 2 2 --sp-activations gathered
plan_vs_run 8x1_b3_ckpt 8 1 3 --checkpoint-activations
# HSDP meshes R x S x tp (DP argument = R * S): the state is sharded over S only, the replica all-reduce
# works in place on the owned gradient slice; S = 1 keeps the persistent unsharded copy of dp = 1
plan_vs_run 2x2x2_b2 4 2 2 --replicate 2
plan_vs_run 2x4x1_b3_ckpt 8 1 3 --replicate 2 --checkpoint-activations
plan_vs_run 4x2x1_b1_noprefetch 8 1 1 --replicate 4 --no-prefetch
plan_vs_run 2x1x4_b2_nosp 2 4 2 --replicate 2 --no-sequence-parallel
plan_vs_run 2x2x2_b1_accum_last 4 2 1 --replicate 2 --grad-accum 2 --accum-reduce last
# the model state of 2x2x2 is that of the 2x2 mesh (1/S with S = 2), not of 4x2 (1/dp)
/usr/bin/python3 - "$T/2x2x2_b2.run.json" "$TR" "$T" <<'PY'
import json, subprocess, sys
r = json.load(open(sys.argv[1]))["memory"]["by_category"]
def plan(w, tp):
    out = f"{sys.argv[3]}/state_{w}x{tp}.json"
    subprocess.run([sys.argv[2], "--plan", "--world", str(w), "--tp", str(tp), "--batch-size", "2", "--model", "tiny",
                    "--seq-len", "64", "--out", out], capture_output=True)
    return json.load(open(out))["by_category"]
s22, s42 = plan(4, 2), plan(8, 2)
k = ("params", "grads", "optimizer")
same = all(r[c] == s22[c] for c in k) and all(r[c] > s42[c] for c in k)
print(f"ok   mem_hsdp_state_is_1_over_S  (optimizer {r['optimizer']} = 2x2's, 4x2's {s42['optimizer']})" if same
      else f"FAIL mem_hsdp_state_is_1_over_S: 2x2x2 {[r[c] for c in k]} 2x2 {[s22[c] for c in k]} 4x2 {[s42[c] for c in k]}")
PY

# --sp-activations local: same losses as gathered, fewer saved activation bytes, and exactly the extra
# all-gather of the two column-parallel inputs [B*T, d] per layer and step (2x2 mesh, tiny: L = 4, d = 128)
for m in local gathered; do
  "${MPIRUN[@]}" -np 4 "$TR" --tp 2 --batch-size 2 "${COMMON[@]}" --sp-activations $m --out "$T/spa_$m.json" >"$T/spa_$m.log" 2>&1 \
    || fail "mem_sp_activations_$m" "run failed: $(tail -2 "$T/spa_$m.log" | tr '\n' ' ')"
done
/usr/bin/python3 - "$T/spa_local.json" "$T/spa_gathered.json" <<'PY'
import json, sys
l, g = (json.load(open(p)) for p in sys.argv[1:3])
ll = [s["loss"] for s in l["steps"]]; lg = [s["loss"] for s in g["steps"]]
ok = len(ll) == 2 and all(abs(x - y) <= 1e-6 * abs(x) for x, y in zip(ll, lg))
print("ok   mem_sp_local_same_losses" if ok else f"FAIL mem_sp_local_same_losses: {ll} vs {lg}")
al, ag = l["memory"]["by_category"]["activations"], g["memory"]["by_category"]["activations"]
print(f"ok   mem_sp_local_fewer_activations  ({al} < {ag})" if al < ag else f"FAIL mem_sp_local_fewer_activations: {al} vs {ag}")
c = l["config"]; mdl = c["model"]
steps, L, d, nt = c["steps"], mdl["num_hidden_layers"], mdl["hidden_size"], l["batch_size"] * c["seq_len"]
want = steps * L * 2 * nt * d * 4
got = l["comm"]["all_gather"]["bytes"] - g["comm"]["all_gather"]["bytes"]
calls = l["comm"]["all_gather"]["calls"] - g["comm"]["all_gather"]["calls"]
if got == want and calls == steps * L * 2: print(f"ok   mem_sp_local_extra_all_gather_bytes  ({got} bytes, {calls} calls)")
else: print(f"FAIL mem_sp_local_extra_all_gather_bytes: {got} bytes / {calls} calls more, expected {want} / {steps * L * 2}")
PY
expect_exit mem_bad_sp_activations 2 "--sp-activations must be local or gathered" -- "$TR" --plan --sp-activations sharded

# checkpointing: same losses, lower activation peak (1 rank, 4 steps)
without COMMON --steps
must mem_checkpoint_run_off "$TR" "${WITHOUT[@]}" --steps 4 --batch-size 4 --out "$T/nock.json" 2>/dev/null
must mem_checkpoint_run_on "$TR" "${WITHOUT[@]}" --steps 4 --batch-size 4 --checkpoint-activations --out "$T/ck.json" 2>/dev/null
/usr/bin/python3 - "$T/nock.json" "$T/ck.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
la = [s["loss"] for s in a["steps"]]; lb = [s["loss"] for s in b["steps"]]
ok = len(la) == 4 and all(abs(x - y) <= 1e-6 * abs(x) for x, y in zip(la, lb))
print("ok   mem_checkpoint_same_losses" if ok else f"FAIL mem_checkpoint_same_losses: {la} vs {lb}")
aa, ab = a["memory"]["by_category"]["activations"], b["memory"]["by_category"]["activations"]
print(f"ok   mem_checkpoint_lower_activations  ({ab} < {aa})" if ab < aa else f"FAIL mem_checkpoint_lower_activations: {ab} vs {aa}")
PY

# max batch: the plan's max runs; max+1 stops with exit 3 and an oom record (three meshes, one HSDP)
BUDGET=24MiB
for mesh in "2 4 1" "8 1 1" "4 2 2"; do
  set -- $mesh; dp=$1; tp=$2; rep=$3; w=$((dp * tp)); name=${dp}x${tp}
  [ "$rep" -gt 1 ] && name=${rep}x$((dp / rep))x${tp}
  in_san "max_$name" || continue
  must "mem_maxbatch_${name}_plan" "$TR" --plan --world $w --tp $tp --replicate $rep --batch-size max --mem-budget $BUDGET "${COMMON[@]}" --out "$T/max$name.json" >/dev/null 2>&1
  b=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['batch_size'])" "$T/max$name.json" 2>/dev/null)
  if [ -z "$b" ] || [ "$b" -lt 1 ]; then fail "mem_maxbatch_$name" "plan found no batch"; continue; fi
  "${MPIRUN[@]}" -np $w "$TR" --tp $tp --replicate $rep --batch-size $b --mem-budget $BUDGET "${COMMON[@]}" --out "$T/fit$name.json" >"$T/fit$name.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] && ok "mem_maxbatch_${name}_fits_b$b" || fail "mem_maxbatch_${name}_fits_b$b" "exit $rc: $(tail -2 "$T/fit$name.log")"
  "${MPIRUN[@]}" -np $w "$TR" --tp $tp --replicate $rep --batch-size $((b + 1)) --mem-budget $BUDGET "${COMMON[@]}" --out "$T/oom$name.json" >"$T/oom$name.log" 2>&1
  rc=$?
  st=$(/usr/bin/python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['status'], r['memory']['peak'] > 0, r['batch_size'])" "$T/oom$name.json" 2>/dev/null)
  lines=$(grep -c "out of memory budget" "$T/oom$name.log")
  if [ $rc -eq 3 ] && [ "$st" = "oom True $((b + 1))" ] && [ "$lines" -eq 1 ]; then ok "mem_maxbatch_${name}_plus1_oom"
  else fail "mem_maxbatch_${name}_plus1_oom" "exit $rc, record '$st', $lines oom lines"; fi
done

# --plan for Llama 3.1 8B, seq 1024, bf16, every 8-rank mesh
for tp in 8 4 2 1; do
  start=$(date +%s%N)
  out=$(timeout 20 "$TR" --plan --model llama3.1-8b --world 8 --tp $tp --seq-len 1024 --dtype bf16 --batch-size 4 2>&1); rc=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  if [ $rc -eq 0 ] && grep -q "^max(" <<<"$out" && [ "$(grep -c '^[0-7] ' <<<"$out")" -eq 8 ]; then ok "mem_plan_8b_tp$tp  (${ms} ms)"
  else fail "mem_plan_8b_tp$tp" "exit $rc: $(head -c 300 <<<"$out")"; fi
done
out=$("$TR" --plan --model llama3.1-8b --world 8 --tp 2 --seq-len 1024 --dtype bf16 --batch-size max --mem-budget 80GB 2>&1)
grep -q "max batch per DP rank: [1-9]" <<<"$out" && ok mem_plan_8b_maxbatch || fail mem_plan_8b_maxbatch "$out"

# bad sizes and budgets
for s in 12XB 96mib -1MiB MiB "" 1e400GiB; do
  expect_exit "mem_bad_size_'$s'" 2 "not a size|empty value" -- "$TR" --plan --mem-budget "$s"
done
expect_exit mem_budget_below_state 3 "no batch size fits .*model state alone" -- "$TR" --plan --model llama3.1-8b --world 8 --tp 8 --seq-len 1024 --dtype bf16 --batch-size max --mem-budget 1GiB
expect_exit mem_run_budget_below_state 3 "out of memory budget: params" -- "$TR" --steps 1 --mem-budget 100KiB --out "$T/tiny.json"
/usr/bin/python3 -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r['status']=='oom' else 1)" "$T/tiny.json" \
  && ok mem_oom_record_written || fail mem_oom_record_written "no oom record"
